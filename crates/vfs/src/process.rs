//! A process: credentials, a working directory and a file descriptor
//! table, with the system calls as methods. Each method is one line over
//! the system-call layer ([`crate::syscalls`]): a path call runs in a
//! [`Context`] of the process's credentials and working directory, a
//! descriptor call on the open file the descriptor names.
//!
//! Invariant: a file descriptor names one open file description until it is
//! closed; descriptors are allocated lowest-first, as Linux does, up to
//! [`MAX_FDS`] (then EMFILE); looking one up writes only that descriptor's
//! line (the `fdtable` module). The working directory is read without a lock
//! (an epoch-protected pointer), so relative walks write nothing shared.
//!
//! May import every module: it is the top of the crate, and nothing but
//! the crate root imports it. [`Vfs::process`] is defined here, with the
//! type it makes.

use crate::cred::{Access, Credentials};
use crate::errno::{Errno, VfsResult};
use crate::fdtable::FdTable;
pub use crate::fdtable::MAX_FDS;
use crate::file::OpenFile;
use crate::inode::Inode;
use crate::locks::{Flock, Interrupt, LeaseNotifier, Pid};
use crate::syscalls::locks::{self as lock_calls, AccessModeCheck, RecordOwner};
use crate::syscalls::Context;
use crate::types::{DirEntry, OpenFlags, RenameFlags, SetTime, Stat, Whence};
use crate::Vfs;
use crossbeam_epoch::Owned;
use std::fmt;
use std::sync::Arc;
use vfscale_sync::audited::CountedArc;
use vfscale_sync::audited::EpochAtomic;
use vfscale_sync::audited::Ordering;

/// A file descriptor.
pub type Fd = i32;

/// A process: who it is, where it is, and what it has open.
///
/// ```
/// use vfscale::{Credentials, OpenFlags, Vfs};
///
/// let vfs = Vfs::default();
/// let p = vfs.process(Credentials::root());
/// p.mkdir("/etc", 0o755)?;
/// let fd = p.open("/etc/motd", OpenFlags::CREAT | OpenFlags::WRONLY, 0o644)?;
/// p.write(fd, b"hello\n")?;
/// p.close(fd)?;
/// assert_eq!(p.stat("/etc/motd")?.size, 6);
/// # Ok::<(), vfscale::Errno>(())
/// ```
pub struct Process {
    pid: i32,
    vfs: Vfs,
    cred: Credentials,
    cwd: EpochAtomic<Arc<Inode>>,
    fds: FdTable,
}

impl fmt::Debug for Process {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Process").field("pid", &self.pid).field("cred", &self.cred).finish_non_exhaustive()
    }
}

impl Drop for Process {
    fn drop(&mut self) {
        // Exit closes every descriptor, dropping the POSIX locks they held.
        for file in self.fds.take_all() {
            lock_calls::posix_close(&file, self.pid);
        }
        // SAFETY: the process is being dropped, so nothing else can read its
        // working directory pointer.
        unsafe {
            let cwd = self.cwd.load(Ordering::Relaxed, crossbeam_epoch::unprotected());
            drop(cwd.into_owned());
        }
    }
}

impl Vfs {
    /// A process with these credentials, its working directory the root.
    pub fn process(&self, cred: Credentials) -> Process {
        let cwd = Arc::clone(self.root());
        Process {
            pid: crate::locks::new_pid(),
            vfs: self.clone(),
            cred,
            cwd: EpochAtomic::new(cwd),
            fds: FdTable::new(),
        }
    }
}

impl Process {
    /// The process id: the owner of its POSIX locks.
    pub fn pid(&self) -> Pid {
        self.pid
    }

    /// The credentials every call is checked against.
    pub fn credentials(&self) -> &Credentials {
        &self.cred
    }

    /// The VFS this process works in.
    pub fn vfs(&self) -> &Vfs {
        &self.vfs
    }

    /// Runs `call` in the context of this process's credentials and
    /// working directory.
    fn at_cwd<R>(&self, call: impl FnOnce(&Context<'_>) -> VfsResult<R>) -> VfsResult<R> {
        let guard = crossbeam_epoch::pin();
        // SAFETY: the working directory is never null (set in
        // `Vfs::process`, replaced by `chdir`, which releases the old one
        // through the epoch), and the guard is pinned for the whole call.
        let cwd = unsafe { self.cwd.load(Ordering::Acquire, &guard).deref() };
        call(&Context::unchecked(&self.vfs, &self.cred, cwd))
    }

    /// The open file behind `fd`, counted: a write of its `Arc`'s count,
    /// shared with every thread using the same description (as Linux's
    /// `f_count` in a multithreaded process). Calls that neither keep the
    /// file nor wait long (read, write, seek, fstat) borrow it instead,
    /// through `FdTable::with`.
    fn file(&self, fd: Fd) -> VfsResult<CountedArc<OpenFile>> {
        self.fds.get(fd)
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

    /// `stat(2)`.
    pub fn stat(&self, path: impl AsRef<[u8]>) -> VfsResult<Stat> {
        self.at_cwd(|c| c.stat(path, true))
    }

    /// `lstat(2)`.
    pub fn lstat(&self, path: impl AsRef<[u8]>) -> VfsResult<Stat> {
        self.at_cwd(|c| c.stat(path, false))
    }

    /// `access(2)`-like check of `mask` on the file `path` names, with
    /// these credentials.
    pub fn access(&self, path: impl AsRef<[u8]>, mask: Access) -> VfsResult<()> {
        self.at_cwd(|c| c.access(path, mask))
    }

    /// `open(2)`; `perm` is used when `O_CREAT` creates the file.
    pub fn open(&self, path: impl AsRef<[u8]>, flags: OpenFlags, perm: u32) -> VfsResult<Fd> {
        self.fds.install(self.open_description(path, flags, perm)?)
    }

    /// `close(2)`: also drops every POSIX lock this process holds on the
    /// file, whichever descriptor took it.
    pub fn close(&self, fd: Fd) -> VfsResult<()> {
        lock_calls::posix_close(&*self.fds.remove(fd)?, self.pid);
        Ok(())
    }

    /// `dup(2)`: a new descriptor for the same open file description.
    pub fn dup(&self, fd: Fd) -> VfsResult<Fd> {
        self.fds.install(self.file(fd)?.into_arc())
    }

    /// The open file description behind `fd`.
    pub fn open_file(&self, fd: Fd) -> VfsResult<Arc<OpenFile>> {
        self.file(fd).map(CountedArc::into_arc)
    }

    /// `read(2)`.
    pub fn read(&self, fd: Fd, buf: &mut [u8]) -> VfsResult<usize> {
        self.fds.with(fd, |file| file.read(buf))?
    }

    /// `write(2)`.
    pub fn write(&self, fd: Fd, buf: &[u8]) -> VfsResult<usize> {
        self.fds.with(fd, |file| file.write(buf, &self.cred))?
    }

    /// `pread(2)`; EINVAL for a negative offset.
    pub fn pread(&self, fd: Fd, buf: &mut [u8], offset: i64) -> VfsResult<usize> {
        let offset = u64::try_from(offset).map_err(|_| Errno::EINVAL)?;
        self.fds.with(fd, |file| file.pread(buf, offset))?
    }

    /// `pwrite(2)`; EINVAL for a negative offset.
    pub fn pwrite(&self, fd: Fd, buf: &[u8], offset: i64) -> VfsResult<usize> {
        let offset = u64::try_from(offset).map_err(|_| Errno::EINVAL)?;
        self.fds.with(fd, |file| file.pwrite(buf, offset, &self.cred))?
    }

    /// `lseek(2)`.
    pub fn lseek(&self, fd: Fd, offset: i64, whence: Whence) -> VfsResult<u64> {
        self.fds.with(fd, |file| file.lseek(offset, whence))?
    }

    /// `ftruncate(2)`; a negative length is EINVAL before the descriptor
    /// is looked at, as in Linux.
    pub fn ftruncate(&self, fd: Fd, len: i64) -> VfsResult<()> {
        if len < 0 {
            return Err(Errno::EINVAL);
        }
        self.file(fd)?.truncate(len, &self.cred)
    }

    /// `fstat(2)`.
    pub fn fstat(&self, fd: Fd) -> VfsResult<Stat> {
        self.fds.with(fd, |file| file.stat())
    }

    /// Up to `max` more entries of the directory open as `fd` (`getdents`);
    /// empty at the end.
    pub fn readdir(&self, fd: Fd, max: usize) -> VfsResult<Vec<DirEntry>> {
        self.file(fd)?.readdir(max)
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

    /// `mkdir(2)`.
    pub fn mkdir(&self, path: impl AsRef<[u8]>, perm: u32) -> VfsResult<()> {
        self.at_cwd(|c| c.mkdir(path, perm))
    }

    /// `mknod(2)`: `mode` is the type (`S_IFREG` or 0, `S_IFIFO`,
    /// `S_IFSOCK`, `S_IFCHR`, `S_IFBLK`) and permission bits; `rdev` the
    /// device number of a device node (ignored for other types). Devices
    /// need CAP_MKNOD: uid 0 here.
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
        self.at_cwd(|c| c.mknod(path, mode, rdev))
    }

    /// `rmdir(2)`.
    pub fn rmdir(&self, path: impl AsRef<[u8]>) -> VfsResult<()> {
        self.at_cwd(|c| c.rmdir(path))
    }

    /// `unlink(2)`.
    pub fn unlink(&self, path: impl AsRef<[u8]>) -> VfsResult<()> {
        self.at_cwd(|c| c.unlink(path))
    }

    /// `rename(2)`.
    pub fn rename(&self, old: impl AsRef<[u8]>, new: impl AsRef<[u8]>) -> VfsResult<()> {
        self.rename2(old, new, RenameFlags::default())
    }

    /// `renameat2(2)` with flags.
    pub fn rename2(&self, old: impl AsRef<[u8]>, new: impl AsRef<[u8]>, flags: RenameFlags) -> VfsResult<()> {
        self.at_cwd(|c| c.rename(old, new, flags))
    }

    /// `link(2)`.
    pub fn link(&self, old: impl AsRef<[u8]>, new: impl AsRef<[u8]>) -> VfsResult<()> {
        self.at_cwd(|c| c.link(old, new))
    }

    /// `symlink(2)`: creates `path` pointing at `target`.
    pub fn symlink(&self, target: impl AsRef<[u8]>, path: impl AsRef<[u8]>) -> VfsResult<()> {
        self.at_cwd(|c| c.symlink(target, path))
    }

    /// `readlink(2)`.
    pub fn readlink(&self, path: impl AsRef<[u8]>) -> VfsResult<Vec<u8>> {
        self.at_cwd(|c| c.readlink(path))
    }

    /// `chmod(2)`.
    pub fn chmod(&self, path: impl AsRef<[u8]>, perm: u32) -> VfsResult<()> {
        self.at_cwd(|c| c.chmod(path, perm))
    }

    /// `chown(2)`; `None` leaves an id unchanged (like -1).
    pub fn chown(&self, path: impl AsRef<[u8]>, uid: Option<u32>, gid: Option<u32>) -> VfsResult<()> {
        self.at_cwd(|c| c.chown(path, uid, gid, true))
    }

    /// `lchown(2)`.
    pub fn lchown(&self, path: impl AsRef<[u8]>, uid: Option<u32>, gid: Option<u32>) -> VfsResult<()> {
        self.at_cwd(|c| c.chown(path, uid, gid, false))
    }

    /// `utimensat(2)` following symlinks.
    pub fn utimens(&self, path: impl AsRef<[u8]>, atime: SetTime, mtime: SetTime) -> VfsResult<()> {
        self.at_cwd(|c| c.utimens(path, atime, mtime, true))
    }

    /// `truncate(2)`: needs write permission on the file.
    pub fn truncate(&self, path: impl AsRef<[u8]>, len: i64) -> VfsResult<()> {
        self.at_cwd(|c| c.truncate(path, len))
    }

    /// `getxattr(2)`, following a final symlink: the value's length, with
    /// the value copied into `buf` unless `buf` is empty. See
    /// [`crate::xattr`] for the rules.
    pub fn getxattr(&self, path: impl AsRef<[u8]>, name: &[u8], buf: &mut [u8]) -> VfsResult<usize> {
        self.at_cwd(|c| c.getxattr(path, true, name, buf))
    }

    /// `lgetxattr(2)`: [`getxattr`](Self::getxattr) of a symlink itself.
    pub fn lgetxattr(&self, path: impl AsRef<[u8]>, name: &[u8], buf: &mut [u8]) -> VfsResult<usize> {
        self.at_cwd(|c| c.getxattr(path, false, name, buf))
    }

    /// `setxattr(2)`, following a final symlink; `flags` is 0,
    /// [`XATTR_CREATE`](crate::xattr::XATTR_CREATE) or
    /// [`XATTR_REPLACE`](crate::xattr::XATTR_REPLACE).
    pub fn setxattr(&self, path: impl AsRef<[u8]>, name: &[u8], value: &[u8], flags: i32) -> VfsResult<()> {
        self.at_cwd(|c| c.setxattr(path, true, name, value, flags))
    }

    /// `lsetxattr(2)`.
    pub fn lsetxattr(&self, path: impl AsRef<[u8]>, name: &[u8], value: &[u8], flags: i32) -> VfsResult<()> {
        self.at_cwd(|c| c.setxattr(path, false, name, value, flags))
    }

    /// `listxattr(2)`, following a final symlink: the names, each ending in
    /// a NUL, as [`getxattr`](Self::getxattr) fills `buf`.
    pub fn listxattr(&self, path: impl AsRef<[u8]>, buf: &mut [u8]) -> VfsResult<usize> {
        self.at_cwd(|c| c.listxattr(path, true, buf))
    }

    /// `llistxattr(2)`.
    pub fn llistxattr(&self, path: impl AsRef<[u8]>, buf: &mut [u8]) -> VfsResult<usize> {
        self.at_cwd(|c| c.listxattr(path, false, buf))
    }

    /// `removexattr(2)`, following a final symlink.
    pub fn removexattr(&self, path: impl AsRef<[u8]>, name: &[u8]) -> VfsResult<()> {
        self.at_cwd(|c| c.removexattr(path, true, name))
    }

    /// `lremovexattr(2)`.
    pub fn lremovexattr(&self, path: impl AsRef<[u8]>, name: &[u8]) -> VfsResult<()> {
        self.at_cwd(|c| c.removexattr(path, false, name))
    }

    /// `chdir(2)`.
    pub fn chdir(&self, path: impl AsRef<[u8]>) -> VfsResult<()> {
        let dir = self.at_cwd(|c| c.search_dir(path))?;
        let guard = crossbeam_epoch::pin();
        let old = self.cwd.swap(Owned::new(dir), Ordering::AcqRel, &guard);
        // SAFETY: the old working directory is unreachable now; the box is
        // only freed by the deferred release, after every guard pinned now
        // has unpinned.
        self.vfs.sb.reclaim.defer(&guard, unsafe { old.into_owned() });
        Ok(())
    }

    /// `fcntl(fd, F_GETLK, lock)`: see [`lock_calls::getlk`].
    pub fn fcntl_getlk(&self, fd: Fd, lock: &mut Flock) -> VfsResult<()> {
        lock_calls::getlk(self.vfs.locks(), &*self.file(fd)?, self.pid, RecordOwner::Posix, lock)
    }

    /// `fcntl(fd, F_SETLK, lock)`: takes, changes or releases this
    /// process's POSIX lock on the range; see [`lock_calls::setlk`].
    pub fn fcntl_setlk(&self, fd: Fd, lock: &Flock) -> VfsResult<()> {
        self.setlk(fd, RecordOwner::Posix, lock, None)
    }

    /// `fcntl(fd, F_SETLKW, lock)`: as [`fcntl_setlk`](Self::fcntl_setlk)
    /// but waits for conflicting locks to go; EDEADLK if waiting would
    /// close a cycle of POSIX owners waiting for each other, EINTR if
    /// `intr` fires first.
    pub fn fcntl_setlkw(&self, fd: Fd, lock: &Flock, intr: &Interrupt<'_>) -> VfsResult<()> {
        self.setlk(fd, RecordOwner::Posix, lock, Some(intr))
    }

    /// `fcntl(fd, F_OFD_GETLK, lock)`: as [`fcntl_getlk`](Self::fcntl_getlk)
    /// for the open file description as owner; `l_pid` must be 0.
    pub fn ofd_getlk(&self, fd: Fd, lock: &mut Flock) -> VfsResult<()> {
        lock_calls::getlk(self.vfs.locks(), &*self.file(fd)?, self.pid, RecordOwner::Ofd, lock)
    }

    /// `fcntl(fd, F_OFD_SETLK, lock)`: a record lock owned by the open file
    /// description; `l_pid` must be 0.
    pub fn ofd_setlk(&self, fd: Fd, lock: &Flock) -> VfsResult<()> {
        self.setlk(fd, RecordOwner::Ofd, lock, None)
    }

    /// `fcntl(fd, F_OFD_SETLKW, lock)`: waits like
    /// [`fcntl_setlkw`](Self::fcntl_setlkw).
    pub fn ofd_setlkw(&self, fd: Fd, lock: &Flock, intr: &Interrupt<'_>) -> VfsResult<()> {
        self.setlk(fd, RecordOwner::Ofd, lock, Some(intr))
    }

    fn setlk(&self, fd: Fd, owner: RecordOwner, lock: &Flock, wait: Option<&Interrupt<'_>>) -> VfsResult<()> {
        let file = self.file(fd)?;
        lock_calls::setlk(self.vfs.locks(), &file, (self.pid, owner), lock, wait, AccessModeCheck::Check)
    }

    /// `flock(fd, op)`: `LOCK_SH`, `LOCK_EX` or `LOCK_UN`, with `LOCK_NB`
    /// to fail with EWOULDBLOCK rather than wait. Waits without limit.
    pub fn flock(&self, fd: Fd, op: i32) -> VfsResult<()> {
        self.flock_interruptible(fd, op, &Interrupt::never())
    }

    /// `flock(fd, op)` whose wait ends with EINTR when `intr` fires.
    pub fn flock_interruptible(&self, fd: Fd, op: i32, intr: &Interrupt<'_>) -> VfsResult<()> {
        lock_calls::flock(self.vfs.locks(), &*self.file(fd)?, self.pid, op, intr)
    }

    /// `fcntl(fd, F_SETLEASE, arg)`: see [`lock_calls::setlease`].
    pub fn setlease(&self, fd: Fd, arg: i32) -> VfsResult<()> {
        self.setlease_notify(fd, arg, None)
    }

    /// [`setlease`](Self::setlease) with a notifier called when an `open`
    /// starts breaking the lease (replacing any earlier notifier).
    pub fn setlease_notify(&self, fd: Fd, arg: i32, notify: Option<LeaseNotifier>) -> VfsResult<()> {
        lock_calls::setlease(self.vfs.locks(), &self.cred, &*self.file(fd)?, self.pid, arg, notify)
    }

    /// `fcntl(fd, F_GETLEASE)`: see [`lock_calls::getlease`].
    pub fn getlease(&self, fd: Fd) -> VfsResult<i16> {
        Ok(lock_calls::getlease(&*self.file(fd)?))
    }
}
