//! The path calls of a process, each in its `*at` form (a `dirfd`, Linux's
//! `AT_*` flags) and in its classic form, a wrapper with [`AT_FDCWD`], plus
//! the calls that move the root and the working directory.
//!
//! A relative path starts at the working directory for `AT_FDCWD`, else
//! at the file `dirfd` names (EBADF if none); an absolute path ignores
//! `dirfd`, as in Linux. The `dirfd`'s file is borrowed for the call (a
//! read-side section of the descriptor table, which writes only this CPU's
//! slot), except for `openat`, whose open may wait for a lease to break
//! and so holds its own count.

use super::{Fd, FsState, Process, AT_FDCWD};
use crate::cred::Access;
use crate::errno::{Errno, VfsResult};
use crate::file::OpenFile;
use crate::inode::Inode;
use crate::mount::MountFlags;
use crate::syscalls::{Context, UmountFlags};
use crate::types::{AtFlags, DirEntry, OpenFlags, OpenHow, RenameFlags, ResolveFlags, SetTime, Stat};
use std::sync::Arc;

impl Process {
    /// Runs `call` in this process's context starting where `dirfd` and
    /// `path` say.
    fn at<R>(&self, dirfd: Fd, path: &[u8], call: impl FnOnce(&Context<'_>) -> VfsResult<R>) -> VfsResult<R> {
        if dirfd == AT_FDCWD || path.first() == Some(&b'/') {
            return self.at_cwd(call);
        }
        self.fds.with(dirfd, |file| self.in_dir(file, call))?
    }

    /// As [`at`](Self::at), holding a count of the `dirfd`'s file rather
    /// than borrowing it, for calls that may wait. A walk `scoped` to the
    /// `dirfd` (`RESOLVE_IN_ROOT`, `RESOLVE_BENEATH`) starts there even for
    /// an absolute path.
    fn at_counted<R>(
        &self,
        dirfd: Fd,
        path: &[u8],
        scoped: bool,
        call: impl FnOnce(&Context<'_>) -> VfsResult<R>,
    ) -> VfsResult<R> {
        if dirfd == AT_FDCWD || (path.first() == Some(&b'/') && !scoped) {
            return self.at_cwd(call);
        }
        self.in_dir(&**self.file(dirfd)?, call)
    }

    /// Runs `call` with relative paths starting at the open directory
    /// `start`.
    fn in_dir<R>(&self, start: &OpenFile, call: impl FnOnce(&Context<'_>) -> VfsResult<R>) -> VfsResult<R> {
        let guard = crossbeam_epoch::pin();
        let fs = self.fs(&guard);
        let root = FsState::at(&fs.root);
        call(&Context::from_places(fs.ns.as_deref(), &self.cred, root, root).starting_at(start))
    }

    /// The inode `path` names (following a final symlink if `follow`), as
    /// a handle that stays valid after it is unlinked.
    pub fn resolve(&self, path: impl AsRef<[u8]>, follow: bool) -> VfsResult<Arc<Inode>> {
        self.at_cwd(|c| c.resolve(path, follow))
    }

    /// `open(2)` without a descriptor: the new open file description.
    pub fn open_description(&self, path: impl AsRef<[u8]>, flags: OpenFlags, perm: u32) -> VfsResult<Arc<OpenFile>> {
        self.at_cwd(|c| c.open(path, flags, perm))
    }

    /// `openat(2)`; `perm` is used when `O_CREAT` creates the file.
    pub fn openat(&self, dirfd: Fd, path: impl AsRef<[u8]>, flags: OpenFlags, perm: u32) -> VfsResult<Fd> {
        let path = path.as_ref();
        self.fds.install(self.at_counted(dirfd, path, false, |c| c.open(path, flags, perm))?)
    }

    /// `openat2(2)`: see [`Context::openat2`].
    pub fn openat2(&self, dirfd: Fd, path: impl AsRef<[u8]>, how: &OpenHow) -> VfsResult<Fd> {
        let path = path.as_ref();
        let scoped = how.resolve.0 & (ResolveFlags::IN_ROOT.0 | ResolveFlags::BENEATH.0) != 0;
        self.fds.install(self.at_counted(dirfd, path, scoped, |c| c.openat2(path, how))?)
    }

    /// `open(2)`; `perm` is used when `O_CREAT` creates the file.
    pub fn open(&self, path: impl AsRef<[u8]>, flags: OpenFlags, perm: u32) -> VfsResult<Fd> {
        self.openat(AT_FDCWD, path, flags, perm)
    }

    /// `fstatat(2)`: `flags` may hold `AT_SYMLINK_NOFOLLOW` and
    /// `AT_EMPTY_PATH`.
    pub fn fstatat(&self, dirfd: Fd, path: impl AsRef<[u8]>, flags: AtFlags) -> VfsResult<Stat> {
        let path = path.as_ref();
        self.at(dirfd, path, |c| c.stat(path, flags))
    }

    /// `stat(2)`.
    pub fn stat(&self, path: impl AsRef<[u8]>) -> VfsResult<Stat> {
        self.fstatat(AT_FDCWD, path, AtFlags::NONE)
    }

    /// `lstat(2)`.
    pub fn lstat(&self, path: impl AsRef<[u8]>) -> VfsResult<Stat> {
        self.fstatat(AT_FDCWD, path, AtFlags::SYMLINK_NOFOLLOW)
    }

    /// `faccessat2(2)`-like check of `mask`: `flags` may hold `AT_EACCESS`,
    /// `AT_SYMLINK_NOFOLLOW` and `AT_EMPTY_PATH`.
    pub fn faccessat(&self, dirfd: Fd, path: impl AsRef<[u8]>, mask: Access, flags: AtFlags) -> VfsResult<()> {
        let path = path.as_ref();
        self.at(dirfd, path, |c| c.access(path, mask, flags))
    }

    /// `access(2)`-like check of `mask` on the file `path` names, with
    /// these credentials.
    pub fn access(&self, path: impl AsRef<[u8]>, mask: Access) -> VfsResult<()> {
        self.faccessat(AT_FDCWD, path, mask, AtFlags::NONE)
    }

    /// `mkdirat(2)`.
    pub fn mkdirat(&self, dirfd: Fd, path: impl AsRef<[u8]>, perm: u32) -> VfsResult<()> {
        let path = path.as_ref();
        self.at(dirfd, path, |c| c.mkdir(path, perm))
    }

    /// `mkdir(2)`.
    pub fn mkdir(&self, path: impl AsRef<[u8]>, perm: u32) -> VfsResult<()> {
        self.mkdirat(AT_FDCWD, path, perm)
    }

    /// `mknodat(2)`: see [`mknod`](Self::mknod).
    pub fn mknodat(&self, dirfd: Fd, path: impl AsRef<[u8]>, mode: u32, rdev: u64) -> VfsResult<()> {
        let path = path.as_ref();
        self.at(dirfd, path, |c| c.mknod(path, mode, rdev))
    }

    /// `mknod(2)`: `mode` is the type (`S_IFREG` or 0, `S_IFIFO`,
    /// `S_IFSOCK`, `S_IFCHR`, `S_IFBLK`) and permission bits; `rdev` the
    /// device number of a device node (ignored for other types). Devices
    /// need CAP_MKNOD.
    ///
    /// ```
    /// use vfscale::mode::{S_IFCHR, S_IFIFO};
    /// use vfscale::{Credentials, Errno, FileType, Vfs};
    ///
    /// let vfs = Vfs::default();
    /// let root = vfs.process(Credentials::root());
    /// root.mknod("/null", S_IFCHR | 0o666, libc::makedev(1, 3))?;
    /// assert_eq!(root.stat("/null")?.rdev, libc::makedev(1, 3));
    /// root.mknod("/fifo", S_IFIFO | 0o644, 0)?;
    /// assert_eq!(FileType::from_mode(root.stat("/fifo")?.mode), Some(FileType::Fifo));
    /// let user = vfs.process(Credentials::user(1000, 1000, []));
    /// root.chmod("/", 0o777)?;
    /// assert_eq!(user.mknod("/tty", S_IFCHR | 0o600, libc::makedev(5, 0)), Err(Errno::EPERM));
    /// # Ok::<(), Errno>(())
    /// ```
    pub fn mknod(&self, path: impl AsRef<[u8]>, mode: u32, rdev: u64) -> VfsResult<()> {
        self.mknodat(AT_FDCWD, path, mode, rdev)
    }

    /// `unlinkat(2)`: with `AT_REMOVEDIR`, `rmdir`.
    pub fn unlinkat(&self, dirfd: Fd, path: impl AsRef<[u8]>, flags: AtFlags) -> VfsResult<()> {
        let path = path.as_ref();
        self.at(dirfd, path, |c| c.unlinkat(path, flags))
    }

    /// `rmdir(2)`.
    pub fn rmdir(&self, path: impl AsRef<[u8]>) -> VfsResult<()> {
        self.unlinkat(AT_FDCWD, path, AtFlags::REMOVEDIR)
    }

    /// `unlink(2)`.
    pub fn unlink(&self, path: impl AsRef<[u8]>) -> VfsResult<()> {
        self.unlinkat(AT_FDCWD, path, AtFlags::NONE)
    }

    /// `renameat2(2)`.
    pub fn renameat2(
        &self,
        old_dirfd: Fd,
        old: impl AsRef<[u8]>,
        new_dirfd: Fd,
        new: impl AsRef<[u8]>,
        flags: RenameFlags,
    ) -> VfsResult<()> {
        let (old, new) = (old.as_ref(), new.as_ref());
        self.at(old_dirfd, old, |c| self.at(new_dirfd, new, |to| c.rename_to(old, to, new, flags)))
    }

    /// `rename(2)`.
    pub fn rename(&self, old: impl AsRef<[u8]>, new: impl AsRef<[u8]>) -> VfsResult<()> {
        self.rename2(old, new, RenameFlags::default())
    }

    /// `renameat2(2)` from the working directory.
    pub fn rename2(&self, old: impl AsRef<[u8]>, new: impl AsRef<[u8]>, flags: RenameFlags) -> VfsResult<()> {
        self.renameat2(AT_FDCWD, old, AT_FDCWD, new, flags)
    }

    /// `linkat(2)`: `flags` may hold `AT_SYMLINK_FOLLOW` and `AT_EMPTY_PATH`
    /// (see [`Context::linkat`]).
    pub fn linkat(
        &self,
        old_dirfd: Fd,
        old: impl AsRef<[u8]>,
        new_dirfd: Fd,
        new: impl AsRef<[u8]>,
        flags: AtFlags,
    ) -> VfsResult<()> {
        let (old, new) = (old.as_ref(), new.as_ref());
        self.at(old_dirfd, old, |c| self.at(new_dirfd, new, |to| c.link_to(old, flags, to, new)))
    }

    /// `link(2)`: a final symlink in `old` is not followed, as in Linux.
    pub fn link(&self, old: impl AsRef<[u8]>, new: impl AsRef<[u8]>) -> VfsResult<()> {
        self.linkat(AT_FDCWD, old, AT_FDCWD, new, AtFlags::NONE)
    }

    /// `symlinkat(2)`: creates `path` pointing at `target`.
    pub fn symlinkat(&self, target: impl AsRef<[u8]>, dirfd: Fd, path: impl AsRef<[u8]>) -> VfsResult<()> {
        let path = path.as_ref();
        self.at(dirfd, path, |c| c.symlink(target, path))
    }

    /// `symlink(2)`: creates `path` pointing at `target`.
    pub fn symlink(&self, target: impl AsRef<[u8]>, path: impl AsRef<[u8]>) -> VfsResult<()> {
        self.symlinkat(target, AT_FDCWD, path)
    }

    /// `readlinkat(2)`.
    pub fn readlinkat(&self, dirfd: Fd, path: impl AsRef<[u8]>) -> VfsResult<Vec<u8>> {
        let path = path.as_ref();
        self.at(dirfd, path, |c| c.readlink(path))
    }

    /// `readlink(2)`.
    pub fn readlink(&self, path: impl AsRef<[u8]>) -> VfsResult<Vec<u8>> {
        self.readlinkat(AT_FDCWD, path)
    }

    /// `fchmodat2(2)`: `flags` may hold `AT_SYMLINK_NOFOLLOW` and
    /// `AT_EMPTY_PATH`.
    pub fn fchmodat(&self, dirfd: Fd, path: impl AsRef<[u8]>, perm: u32, flags: AtFlags) -> VfsResult<()> {
        let path = path.as_ref();
        self.at(dirfd, path, |c| c.chmod(path, perm, flags))
    }

    /// `chmod(2)`.
    pub fn chmod(&self, path: impl AsRef<[u8]>, perm: u32) -> VfsResult<()> {
        self.fchmodat(AT_FDCWD, path, perm, AtFlags::NONE)
    }

    /// `fchmod(2)`.
    pub fn fchmod(&self, fd: Fd, perm: u32) -> VfsResult<()> {
        self.fchmodat(fd, "", perm, AtFlags::EMPTY_PATH)
    }

    /// `fchownat(2)`: `None` leaves an id unchanged (like -1); `flags` may
    /// hold `AT_SYMLINK_NOFOLLOW` and `AT_EMPTY_PATH`.
    pub fn fchownat(
        &self,
        dirfd: Fd,
        path: impl AsRef<[u8]>,
        uid: Option<u32>,
        gid: Option<u32>,
        flags: AtFlags,
    ) -> VfsResult<()> {
        let path = path.as_ref();
        self.at(dirfd, path, |c| c.chown(path, uid, gid, flags))
    }

    /// `chown(2)`; `None` leaves an id unchanged (like -1).
    pub fn chown(&self, path: impl AsRef<[u8]>, uid: Option<u32>, gid: Option<u32>) -> VfsResult<()> {
        self.fchownat(AT_FDCWD, path, uid, gid, AtFlags::NONE)
    }

    /// `lchown(2)`.
    pub fn lchown(&self, path: impl AsRef<[u8]>, uid: Option<u32>, gid: Option<u32>) -> VfsResult<()> {
        self.fchownat(AT_FDCWD, path, uid, gid, AtFlags::SYMLINK_NOFOLLOW)
    }

    /// `fchown(2)`.
    pub fn fchown(&self, fd: Fd, uid: Option<u32>, gid: Option<u32>) -> VfsResult<()> {
        self.fchownat(fd, "", uid, gid, AtFlags::EMPTY_PATH)
    }

    /// `utimensat(2)`: `flags` may hold `AT_SYMLINK_NOFOLLOW` and
    /// `AT_EMPTY_PATH`.
    pub fn utimensat(
        &self,
        dirfd: Fd,
        path: impl AsRef<[u8]>,
        atime: SetTime,
        mtime: SetTime,
        flags: AtFlags,
    ) -> VfsResult<()> {
        let path = path.as_ref();
        self.at(dirfd, path, |c| c.utimens(path, atime, mtime, flags))
    }

    /// `utimensat(AT_FDCWD, path, ...)`, following symlinks.
    pub fn utimens(&self, path: impl AsRef<[u8]>, atime: SetTime, mtime: SetTime) -> VfsResult<()> {
        self.utimensat(AT_FDCWD, path, atime, mtime, AtFlags::NONE)
    }

    /// `futimens(3)`: `utimensat(fd, NULL, ...)`.
    pub fn futimens(&self, fd: Fd, atime: SetTime, mtime: SetTime) -> VfsResult<()> {
        self.utimensat(fd, "", atime, mtime, AtFlags::EMPTY_PATH)
    }

    /// `truncate(2)`: needs write permission on the file.
    pub fn truncate(&self, path: impl AsRef<[u8]>, len: i64) -> VfsResult<()> {
        self.at_cwd(|c| c.truncate(path, len))
    }

    /// `getxattrat(2)`: the value's length, with the value copied into
    /// `buf` unless `buf` is empty. See [`crate::xattr`] for the rules.
    pub fn getxattrat(
        &self,
        dirfd: Fd,
        path: impl AsRef<[u8]>,
        flags: AtFlags,
        name: &[u8],
        buf: &mut [u8],
    ) -> VfsResult<usize> {
        let path = path.as_ref();
        self.at(dirfd, path, |c| c.getxattr(path, flags, name, buf))
    }

    /// `getxattr(2)`, following a final symlink.
    pub fn getxattr(&self, path: impl AsRef<[u8]>, name: &[u8], buf: &mut [u8]) -> VfsResult<usize> {
        self.getxattrat(AT_FDCWD, path, AtFlags::NONE, name, buf)
    }

    /// `lgetxattr(2)`: [`getxattr`](Self::getxattr) of a symlink itself.
    pub fn lgetxattr(&self, path: impl AsRef<[u8]>, name: &[u8], buf: &mut [u8]) -> VfsResult<usize> {
        self.getxattrat(AT_FDCWD, path, AtFlags::SYMLINK_NOFOLLOW, name, buf)
    }

    /// `setxattrat(2)`; `xattr_flags` is 0,
    /// [`XATTR_CREATE`](crate::xattr::XATTR_CREATE) or
    /// [`XATTR_REPLACE`](crate::xattr::XATTR_REPLACE).
    pub fn setxattrat(
        &self,
        dirfd: Fd,
        path: impl AsRef<[u8]>,
        flags: AtFlags,
        name: &[u8],
        value: &[u8],
        xattr_flags: i32,
    ) -> VfsResult<()> {
        let path = path.as_ref();
        self.at(dirfd, path, |c| c.setxattr(path, flags, name, value, xattr_flags))
    }

    /// `setxattr(2)`, following a final symlink.
    pub fn setxattr(&self, path: impl AsRef<[u8]>, name: &[u8], value: &[u8], flags: i32) -> VfsResult<()> {
        self.setxattrat(AT_FDCWD, path, AtFlags::NONE, name, value, flags)
    }

    /// `lsetxattr(2)`.
    pub fn lsetxattr(&self, path: impl AsRef<[u8]>, name: &[u8], value: &[u8], flags: i32) -> VfsResult<()> {
        self.setxattrat(AT_FDCWD, path, AtFlags::SYMLINK_NOFOLLOW, name, value, flags)
    }

    /// `listxattrat(2)`: the names, each ending in a NUL, as
    /// [`getxattr`](Self::getxattr) fills `buf`.
    pub fn listxattrat(&self, dirfd: Fd, path: impl AsRef<[u8]>, flags: AtFlags, buf: &mut [u8]) -> VfsResult<usize> {
        let path = path.as_ref();
        self.at(dirfd, path, |c| c.listxattr(path, flags, buf))
    }

    /// `listxattr(2)`, following a final symlink.
    pub fn listxattr(&self, path: impl AsRef<[u8]>, buf: &mut [u8]) -> VfsResult<usize> {
        self.listxattrat(AT_FDCWD, path, AtFlags::NONE, buf)
    }

    /// `llistxattr(2)`.
    pub fn llistxattr(&self, path: impl AsRef<[u8]>, buf: &mut [u8]) -> VfsResult<usize> {
        self.listxattrat(AT_FDCWD, path, AtFlags::SYMLINK_NOFOLLOW, buf)
    }

    /// `removexattrat(2)`.
    pub fn removexattrat(&self, dirfd: Fd, path: impl AsRef<[u8]>, flags: AtFlags, name: &[u8]) -> VfsResult<()> {
        let path = path.as_ref();
        self.at(dirfd, path, |c| c.removexattr(path, flags, name))
    }

    /// `removexattr(2)`, following a final symlink.
    pub fn removexattr(&self, path: impl AsRef<[u8]>, name: &[u8]) -> VfsResult<()> {
        self.removexattrat(AT_FDCWD, path, AtFlags::NONE, name)
    }

    /// `lremovexattr(2)`.
    pub fn lremovexattr(&self, path: impl AsRef<[u8]>, name: &[u8]) -> VfsResult<()> {
        self.removexattrat(AT_FDCWD, path, AtFlags::SYMLINK_NOFOLLOW, name)
    }

    /// `chdir(2)`.
    pub fn chdir(&self, path: impl AsRef<[u8]>) -> VfsResult<()> {
        let cwd = self.at_cwd(|c| c.search_dir(path))?;
        self.set_fs(|ns, root, _| FsState::new(ns.cloned(), root, cwd));
        Ok(())
    }

    /// `fchdir(2)`: ENOTDIR unless `fd` is a directory, EACCES without
    /// search permission on it.
    pub fn fchdir(&self, fd: Fd) -> VfsResult<()> {
        let cwd = self.at(fd, b"", |c| c.search_dir("."))?;
        self.set_fs(|ns, root, _| FsState::new(ns.cloned(), root, cwd));
        Ok(())
    }

    /// `chroot(2)`: `path` becomes where absolute paths start and above
    /// which `..` does not climb. Needs search permission on it and
    /// CAP_SYS_CHROOT (else EPERM), checked in that order. The
    /// working directory stays where it is, as in Linux, so a process whose
    /// working directory is outside its new root can still walk out.
    ///
    /// ```
    /// use vfscale::{Credentials, Errno, Vfs};
    ///
    /// let vfs = Vfs::default();
    /// let p = vfs.process(Credentials::root());
    /// p.mkdir("/jail", 0o755)?;
    /// p.mkdir("/jail/etc", 0o755)?;
    /// p.mkdir("/secret", 0o700)?;
    /// p.chroot("/jail")?;
    /// p.chdir("/")?;
    /// assert!(p.stat("/etc")?.ino == p.stat("../../etc")?.ino);
    /// assert_eq!(p.stat("/secret"), Err(Errno::ENOENT));
    /// # Ok::<(), Errno>(())
    /// ```
    pub fn chroot(&self, path: impl AsRef<[u8]>) -> VfsResult<()> {
        let dir = self.at_cwd(|c| c.search_dir(path))?;
        if !self.cred.capable(crate::cred::Capabilities::SYS_CHROOT) {
            return Err(Errno::EPERM);
        }
        self.set_fs(|ns, _, cwd| FsState::new(ns.cloned(), dir, cwd));
        Ok(())
    }

    /// Every entry of the directory `path`, `.` and `..` included.
    pub fn list_dir(&self, path: impl AsRef<[u8]>) -> VfsResult<Vec<DirEntry>> {
        let fd = self.open(path, OpenFlags::RDONLY | OpenFlags::DIRECTORY, 0)?;
        let mut all = Vec::new();
        let result = loop {
            match self.readdir(fd, 128) {
                Ok(batch) if batch.is_empty() => break Ok(all),
                Ok(batch) => all.extend(batch),
                Err(e) => break Err(e),
            }
        };
        self.close(fd)?;
        result
    }
}

/// The mount calls (see [`crate::syscalls`]'s `mounts`): in the process's
/// namespace, from its root and working directory.
impl Process {
    /// `mount(2)` of the instance `fs` on `target`; see [`Context::mount`].
    pub fn mount(&self, fs: &crate::Vfs, source: &str, target: impl AsRef<[u8]>, flags: MountFlags) -> VfsResult<()> {
        self.at_cwd(|c| c.mount(fs, source, target, flags))
    }

    /// `mount --bind` (`recursive`: `--rbind`); see [`Context::bind`].
    pub fn bind_mount(&self, source: impl AsRef<[u8]>, target: impl AsRef<[u8]>, recursive: bool) -> VfsResult<()> {
        self.at_cwd(|c| c.bind(source, target, recursive))
    }

    /// `mount -o remount,bind` with `flags`; see [`Context::remount`].
    pub fn remount(&self, target: impl AsRef<[u8]>, flags: MountFlags) -> VfsResult<()> {
        self.at_cwd(|c| c.remount(target, flags))
    }

    /// `umount2(2)`; see [`Context::umount`].
    pub fn umount2(&self, target: impl AsRef<[u8]>, flags: UmountFlags) -> VfsResult<()> {
        self.at_cwd(|c| c.umount(target, flags))
    }

    /// `statfs(2)`: the filesystem `path` is on, with its mount's flags.
    pub fn statfs(&self, path: impl AsRef<[u8]>) -> VfsResult<crate::FsStats> {
        self.at_cwd(|c| c.statfs(path))
    }

    /// The mount namespace the process is in; `None` for a process of one
    /// instance alone ([`Vfs::process`](crate::Vfs::process)).
    pub fn mount_namespace(&self) -> Option<Arc<crate::MountNamespace>> {
        self.fs(&crossbeam_epoch::pin()).ns.clone()
    }

    /// This process's `/proc/self/mountinfo`.
    pub fn mountinfo(&self) -> VfsResult<String> {
        self.at_cwd(|c| c.mountinfo())
    }

    /// `unshare(CLONE_NEWNS)`: the process moves to a copy of its mount
    /// namespace, its root and working directory to the copies of their
    /// mounts; later mounts in either namespace stay out of the other
    /// (private propagation: shared, slave and unbindable mounts are not
    /// modelled). Needs CAP_SYS_ADMIN (else EPERM); EINVAL for a process
    /// in no namespace.
    pub fn unshare_mount_namespace(&self) -> VfsResult<()> {
        if !self.cred.capable(crate::cred::Capabilities::SYS_ADMIN) {
            return Err(Errno::EPERM);
        }
        let mut result = Err(Errno::EINVAL);
        self.set_fs(|ns, mut root, mut cwd| match ns {
            Some(ns) => {
                let copy = Arc::new(ns.copy(&mut [&mut root, &mut cwd]));
                result = Ok(());
                FsState::new(Some(copy), root, cwd)
            }
            None => FsState::new(None, root, cwd),
        });
        result
    }
}
