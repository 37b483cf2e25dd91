//! A process's view of the VFS: credentials, working directory and file
//! descriptor table, with the system calls as methods.
//!
//! Invariant: a file descriptor names one open file description until it is
//! closed; descriptors are allocated lowest-first, as Linux does, up to
//! [`MAX_FDS`] (then EMFILE); looking one up writes only that descriptor's
//! line (the `fdtable` module). The working directory is read without a lock
//! (an epoch-protected pointer), so relative walks write nothing shared.

use crate::cred::Access;
use crate::errno::{Errno, VfsResult};
use crate::fdtable::FdTable;
pub use crate::fdtable::MAX_FDS;
use crate::file::{DirEntry, OpenFile, OpenFlags, Whence};
use crate::inode::{FileType, Inode, Stat};
use crate::namei::{Intent, Walked, MAX_SYMLINKS};
use crate::namespace::{Ctx, RenameFlags, SetTime};
use crate::opens::OpenRef;
use crate::path::Last;
use crate::{Credentials, Vfs};
use crossbeam_epoch::Owned;
use std::fmt;
use std::sync::Arc;
use vfscale_sync::audited::CountedArc;
use vfscale_sync::audited::EpochAtomic;
use vfscale_sync::audited::{AtomicI32, Ordering};

/// The attributes [`Process::setattr`] changes; `None` / `Omit` leave one
/// alone.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SetAttr {
    /// New permission bits (`chmod`).
    pub mode: Option<u32>,
    /// New owner (`chown`).
    pub uid: Option<u32>,
    /// New group (`chown`).
    pub gid: Option<u32>,
    /// New size (`truncate`); negative is EINVAL.
    pub size: Option<i64>,
    /// New access time.
    pub atime: SetTime,
    /// New modification time.
    pub mtime: SetTime,
}

impl Default for SetAttr {
    fn default() -> Self {
        SetAttr { mode: None, uid: None, gid: None, size: None, atime: SetTime::Omit, mtime: SetTime::Omit }
    }
}

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
            crate::locks::posix_close(&file, self.pid);
        }
        // SAFETY: the process is being dropped, so nothing else can read its
        // working directory pointer.
        unsafe {
            let cwd = self.cwd.load(Ordering::Relaxed, crossbeam_epoch::unprotected());
            drop(cwd.into_owned());
        }
    }
}

impl Process {
    pub(crate) fn new(vfs: Vfs, cred: Credentials, cwd: Arc<Inode>) -> Process {
        // Process ids are unique among all processes of all instances, as
        // POSIX lock owners must be.
        static NEXT_PID: AtomicI32 = AtomicI32::new(1);
        let pid = NEXT_PID.fetch_add(1, Ordering::Relaxed);
        Process { pid, vfs, cred, cwd: EpochAtomic::new(cwd), fds: FdTable::new() }
    }

    /// The process id: the owner of its POSIX locks.
    pub fn pid(&self) -> i32 {
        self.pid
    }

    /// The inode `path` names (following a final symlink if `follow`), as
    /// a handle that stays valid after it is unlinked; for front ends that
    /// address files by inode (FUSE), with [`Vfs::process_in`].
    pub fn resolve(&self, path: impl AsRef<[u8]>, follow: bool) -> VfsResult<Arc<Inode>> {
        let intent = if follow { Intent::Follow } else { Intent::NoFollow };
        self.with_ctx(|ctx| ctx.lookup(path.as_ref(), intent).map(CountedArc::into_arc))
    }

    /// `open(2)` without a descriptor: the new open file description, for
    /// front ends that keep their own handle tables (FUSE).
    pub fn open_description(&self, path: impl AsRef<[u8]>, flags: OpenFlags, perm: u32) -> VfsResult<Arc<OpenFile>> {
        self.with_ctx(|ctx| open_file(&ctx, path.as_ref(), flags, perm)).map(Arc::new)
    }

    /// The credentials every call is checked against.
    pub fn credentials(&self) -> &Credentials {
        &self.cred
    }

    /// The VFS this process works in.
    pub fn vfs(&self) -> &Vfs {
        &self.vfs
    }

    fn with_ctx<R>(&self, f: impl FnOnce(Ctx<'_>) -> VfsResult<R>) -> VfsResult<R> {
        let guard = crossbeam_epoch::pin();
        // SAFETY: the working directory is never null (set in `new`, replaced
        // by `chdir`, which releases the old one through the epoch), and the
        // guard is pinned for the whole call.
        let cwd = unsafe { self.cwd.load(Ordering::Acquire, &guard).deref() };
        f(Ctx { sb: &self.vfs.sb, cred: &self.cred, cwd })
    }

    /// The open file behind `fd`, counted: a write of its `Arc`'s count,
    /// shared with every thread using the same description (as Linux's
    /// `f_count` in a multithreaded process). Calls that neither keep the
    /// file nor wait long (read, write, seek, fstat) borrow it instead,
    /// through `FdTable::with`.
    fn file(&self, fd: Fd) -> VfsResult<CountedArc<OpenFile>> {
        self.fds.get(fd)
    }

    fn install(&self, file: Arc<OpenFile>) -> VfsResult<Fd> {
        self.fds.install(file)
    }

    /// `stat(2)`.
    pub fn stat(&self, path: impl AsRef<[u8]>) -> VfsResult<Stat> {
        self.with_ctx(|ctx| ctx.stat(path.as_ref(), Intent::Follow))
    }

    /// `lstat(2)`.
    pub fn lstat(&self, path: impl AsRef<[u8]>) -> VfsResult<Stat> {
        self.with_ctx(|ctx| ctx.stat(path.as_ref(), Intent::NoFollow))
    }

    /// `access(2)`-like check of `mask` on the file `path` names, with
    /// these credentials.
    pub fn access(&self, path: impl AsRef<[u8]>, mask: Access) -> VfsResult<()> {
        self.with_ctx(|ctx| {
            ctx.walk(path.as_ref(), Intent::Follow, |walked| match walked {
                Walked::Found(inode) => inode.permission(ctx.cred, mask),
                Walked::Parent { .. } => unreachable!("not a parent walk"),
            })
        })
    }

    /// `open(2)`; `perm` is used when `O_CREAT` creates the file.
    pub fn open(&self, path: impl AsRef<[u8]>, flags: OpenFlags, perm: u32) -> VfsResult<Fd> {
        let file = self.open_description(path, flags, perm)?;
        self.install(file)
    }

    /// `close(2)`: also drops every POSIX lock this process holds on the
    /// file, whichever descriptor took it.
    pub fn close(&self, fd: Fd) -> VfsResult<()> {
        let file = self.fds.remove(fd)?;
        crate::locks::posix_close(&file, self.pid);
        Ok(())
    }

    /// `dup(2)`: a new descriptor for the same open file description.
    pub fn dup(&self, fd: Fd) -> VfsResult<Fd> {
        let file = self.file(fd)?;
        self.install(file.into_arc())
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
        self.with_ctx(|ctx| ctx.mkdir(path.as_ref(), perm))
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
        self.with_ctx(|ctx| ctx.mknod(path.as_ref(), mode, rdev))
    }

    /// `rmdir(2)`.
    pub fn rmdir(&self, path: impl AsRef<[u8]>) -> VfsResult<()> {
        self.with_ctx(|ctx| ctx.rmdir(path.as_ref()))
    }

    /// `unlink(2)`.
    pub fn unlink(&self, path: impl AsRef<[u8]>) -> VfsResult<()> {
        self.with_ctx(|ctx| ctx.unlink(path.as_ref()))
    }

    /// `rename(2)`.
    pub fn rename(&self, old: impl AsRef<[u8]>, new: impl AsRef<[u8]>) -> VfsResult<()> {
        self.rename2(old, new, RenameFlags::default())
    }

    /// `renameat2(2)` with flags.
    pub fn rename2(&self, old: impl AsRef<[u8]>, new: impl AsRef<[u8]>, flags: RenameFlags) -> VfsResult<()> {
        self.with_ctx(|ctx| ctx.rename(old.as_ref(), new.as_ref(), flags))
    }

    /// `link(2)`.
    pub fn link(&self, old: impl AsRef<[u8]>, new: impl AsRef<[u8]>) -> VfsResult<()> {
        self.with_ctx(|ctx| ctx.link(old.as_ref(), new.as_ref()))
    }

    /// `symlink(2)`: creates `path` pointing at `target`.
    pub fn symlink(&self, target: impl AsRef<[u8]>, path: impl AsRef<[u8]>) -> VfsResult<()> {
        self.with_ctx(|ctx| ctx.symlink(target.as_ref(), path.as_ref()))
    }

    /// `readlink(2)`.
    pub fn readlink(&self, path: impl AsRef<[u8]>) -> VfsResult<Vec<u8>> {
        self.with_ctx(|ctx| ctx.readlink(path.as_ref()))
    }

    /// `chmod(2)`.
    pub fn chmod(&self, path: impl AsRef<[u8]>, perm: u32) -> VfsResult<()> {
        self.with_ctx(|ctx| ctx.chmod(path.as_ref(), perm))
    }

    /// `chown(2)`; `None` leaves an id unchanged (like -1).
    pub fn chown(&self, path: impl AsRef<[u8]>, uid: Option<u32>, gid: Option<u32>) -> VfsResult<()> {
        self.with_ctx(|ctx| ctx.chown(path.as_ref(), uid, gid, Intent::Follow))
    }

    /// `lchown(2)`.
    pub fn lchown(&self, path: impl AsRef<[u8]>, uid: Option<u32>, gid: Option<u32>) -> VfsResult<()> {
        self.with_ctx(|ctx| ctx.chown(path.as_ref(), uid, gid, Intent::NoFollow))
    }

    /// `utimensat(2)` following symlinks.
    pub fn utimens(&self, path: impl AsRef<[u8]>, atime: SetTime, mtime: SetTime) -> VfsResult<()> {
        self.with_ctx(|ctx| ctx.utimens(path.as_ref(), atime, mtime, Intent::Follow))
    }

    /// `truncate(2)`: needs write permission on the file.
    pub fn truncate(&self, path: impl AsRef<[u8]>, len: i64) -> VfsResult<()> {
        let inode = self.resolve(path, true)?;
        self.setattr(&inode, SetAttr { size: Some(len), ..SetAttr::default() })
    }

    /// Changes the attributes `attr` names on `inode`, in the order and
    /// with the checks of the matching system calls (`truncate`, `chown`,
    /// `chmod`, `utimensat`) — Linux's `notify_change`, for front ends that
    /// address files by inode (FUSE `setattr`).
    pub fn setattr(&self, inode: &Arc<Inode>, attr: SetAttr) -> VfsResult<()> {
        if let Some(len) = attr.size {
            if len < 0 {
                return Err(Errno::EINVAL);
            }
            let crate::inode::Body::Regular(data) = &inode.body else {
                return Err(if inode.is_dir() { Errno::EISDIR } else { Errno::EINVAL });
            };
            inode.permission(&self.cred, Access::WRITE)?;
            crate::file::truncate_data(inode, data, len as u64, self.vfs.sb.config.max_file_size, &self.cred)?;
        }
        if attr.uid.is_some() || attr.gid.is_some() {
            crate::namespace::chown_inode(inode, &self.cred, attr.uid, attr.gid)?;
        }
        if let Some(perm) = attr.mode {
            crate::namespace::chmod_inode(inode, &self.cred, perm)?;
        }
        crate::namespace::set_times(inode, &self.cred, attr.atime, attr.mtime)
    }

    /// `getxattr(2)`, following a final symlink: the value's length, with
    /// the value copied into `buf` unless `buf` is empty. See
    /// [`crate::xattr`] for the rules.
    pub fn getxattr(&self, path: impl AsRef<[u8]>, name: &[u8], buf: &mut [u8]) -> VfsResult<usize> {
        crate::xattr::check_name(name)?;
        self.getxattr_inode(&self.resolve(path, true)?, name, buf)
    }

    /// `lgetxattr(2)`: [`getxattr`](Self::getxattr) of a symlink itself.
    pub fn lgetxattr(&self, path: impl AsRef<[u8]>, name: &[u8], buf: &mut [u8]) -> VfsResult<usize> {
        crate::xattr::check_name(name)?;
        self.getxattr_inode(&self.resolve(path, false)?, name, buf)
    }

    /// `getxattr` on an inode (for front ends that address files by inode).
    pub fn getxattr_inode(&self, inode: &Arc<Inode>, name: &[u8], buf: &mut [u8]) -> VfsResult<usize> {
        crate::xattr::check_name(name)?;
        crate::xattr::get(inode, &self.cred, name, buf)
    }

    /// `setxattr(2)`, following a final symlink; `flags` is 0,
    /// [`XATTR_CREATE`](crate::xattr::XATTR_CREATE) or
    /// [`XATTR_REPLACE`](crate::xattr::XATTR_REPLACE).
    pub fn setxattr(&self, path: impl AsRef<[u8]>, name: &[u8], value: &[u8], flags: i32) -> VfsResult<()> {
        crate::xattr::check_set_args(name, value, flags)?;
        self.setxattr_inode(&self.resolve(path, true)?, name, value, flags)
    }

    /// `lsetxattr(2)`.
    pub fn lsetxattr(&self, path: impl AsRef<[u8]>, name: &[u8], value: &[u8], flags: i32) -> VfsResult<()> {
        crate::xattr::check_set_args(name, value, flags)?;
        self.setxattr_inode(&self.resolve(path, false)?, name, value, flags)
    }

    /// `setxattr` on an inode.
    pub fn setxattr_inode(&self, inode: &Arc<Inode>, name: &[u8], value: &[u8], flags: i32) -> VfsResult<()> {
        crate::xattr::check_set_args(name, value, flags)?;
        crate::xattr::set(inode, &self.cred, name, Some(value), flags, &|delta| self.vfs.sb.charge_ispace(delta))
    }

    /// `listxattr(2)`, following a final symlink: the names, each ending in
    /// a NUL, as [`getxattr`](Self::getxattr) fills `buf`.
    pub fn listxattr(&self, path: impl AsRef<[u8]>, buf: &mut [u8]) -> VfsResult<usize> {
        self.listxattr_inode(&self.resolve(path, true)?, buf)
    }

    /// `llistxattr(2)`.
    pub fn llistxattr(&self, path: impl AsRef<[u8]>, buf: &mut [u8]) -> VfsResult<usize> {
        self.listxattr_inode(&self.resolve(path, false)?, buf)
    }

    /// `listxattr` on an inode.
    pub fn listxattr_inode(&self, inode: &Arc<Inode>, buf: &mut [u8]) -> VfsResult<usize> {
        crate::xattr::list(inode, &self.cred, buf)
    }

    /// `removexattr(2)`, following a final symlink.
    pub fn removexattr(&self, path: impl AsRef<[u8]>, name: &[u8]) -> VfsResult<()> {
        crate::xattr::check_name(name)?;
        self.removexattr_inode(&self.resolve(path, true)?, name)
    }

    /// `lremovexattr(2)`.
    pub fn lremovexattr(&self, path: impl AsRef<[u8]>, name: &[u8]) -> VfsResult<()> {
        crate::xattr::check_name(name)?;
        self.removexattr_inode(&self.resolve(path, false)?, name)
    }

    /// `removexattr` on an inode.
    pub fn removexattr_inode(&self, inode: &Arc<Inode>, name: &[u8]) -> VfsResult<()> {
        crate::xattr::check_name(name)?;
        crate::xattr::set(inode, &self.cred, name, None, 0, &|delta| self.vfs.sb.charge_ispace(delta))
    }

    /// `chdir(2)`.
    pub fn chdir(&self, path: impl AsRef<[u8]>) -> VfsResult<()> {
        let dir = self.with_ctx(|ctx| {
            let inode = ctx.lookup(path.as_ref(), Intent::Follow)?;
            inode.dir()?;
            inode.permission(ctx.cred, Access::EXEC)?;
            Ok(inode)
        })?;
        let guard = crossbeam_epoch::pin();
        let old = self.cwd.swap(Owned::new(dir.into_arc()), Ordering::AcqRel, &guard);
        // SAFETY: the old working directory is unreachable now; the box is
        // only freed by the deferred release, after every guard pinned now
        // has unpinned.
        self.vfs.sb.reclaim.defer(&guard, unsafe { old.into_owned() });
        Ok(())
    }
}

/// `open(2)`: the walk, creation, and the checks of Linux `do_open`.
fn open_file(ctx: &Ctx<'_>, path: &[u8], flags: OpenFlags, perm: u32) -> VfsResult<OpenFile> {
    // Linux 6.4+: O_CREAT|O_DIRECTORY never creates a directory; refuse it.
    if flags.creat() && flags.directory() {
        return Err(Errno::EINVAL);
    }
    // Counted as an open from here on (Linux `do_dentry_open` counts
    // before the lease check); in rcu-walk that is the only write.
    let count = |inode: &Arc<Inode>, created| {
        OpenRef::new(inode, &ctx.sb.reclaim, flags.may_read(), flags.may_write(), created)
    };
    let (inode, created) = if flags.creat() {
        let (inode, created) = open_or_create(ctx, path, flags, perm)?;
        (count(&inode, created), created)
    } else {
        let intent = if flags.nofollow() { Intent::NoFollow } else { Intent::Follow };
        let found = ctx.walk(path, intent, |walked| match walked {
            Walked::Found(inode) => Ok(count(inode, false)),
            Walked::Parent { .. } => unreachable!("not a parent walk"),
        })?;
        (found, false)
    };
    let mut wanted = flags.permission_needed();
    if flags.trunc() {
        wanted |= Access::WRITE;
    }
    if flags.directory() && !inode.is_dir() {
        return Err(Errno::ENOTDIR);
    }
    match inode.file_type() {
        FileType::Symlink => return Err(Errno::ELOOP),
        FileType::Directory if flags.creat() || wanted.contains(Access::WRITE) => return Err(Errno::EISDIR),
        _ => {}
    }
    let special = matches!(&inode.body, crate::inode::Body::Special(..));
    let max = ctx.sb.config.max_file_size;
    if !created {
        if let Some(backend) = &ctx.sb.backend {
            // Decided without the backend's lock where it can (the "after"
            // designs), as the walk's own permission checks are.
            backend.permission(&inode, ctx.cred, wanted, true).unwrap_or_else(|| {
                backend.permission(&inode, ctx.cred, wanted, false).expect("ref mode always decides")
            })?;
        } else {
            inode.permission_fast(ctx.cred, wanted)?;
        }
        if let (true, crate::inode::Body::Regular(data)) = (flags.trunc(), &inode.body) {
            crate::file::truncate_data(&inode, data, 0, max, ctx.cred)?;
        }
    }
    if special {
        open_special(inode.file_type(), flags)?;
    }
    let backed = match (&inode.body, &ctx.sb.backend) {
        (crate::inode::Body::Backed, Some(backend)) => Some(backend.open(&inode, flags, ctx.cred)?),
        _ => None,
    };
    let (backend, dir_locks) = if inode.is_dir() {
        (ctx.sb.backend.clone(), ctx.sb.dir_locks.for_open_directory())
    } else {
        (None, crate::dirlock::DirLocks::PerDirectory)
    };
    let file = OpenFile::new(inode, flags, max, backend, backed, dir_locks);
    // Counted as open by now, so a racing F_SETLEASE sees this open.
    if !created {
        crate::locks::break_lease(&file)?;
    }
    Ok(file)
}

/// Opening a special file, after the permission check: the library keeps
/// no pipe buffers, sockets or drivers (a front end does their I/O; on the
/// mount, the kernel), so it answers as Linux does where none is there: a
/// socket or a device with no driver is ENXIO, and so is a FIFO opened
/// `O_WRONLY | O_NONBLOCK`, which finds no reader since the library keeps
/// no pipe for a reader to wait on. Other FIFO opens succeed (without
/// waiting for a peer); reading or writing the description is EINVAL.
fn open_special(file_type: FileType, flags: OpenFlags) -> VfsResult<()> {
    match file_type {
        FileType::Fifo if flags.0 & libc::O_ACCMODE == libc::O_WRONLY && flags.0 & libc::O_NONBLOCK != 0 => {
            Err(Errno::ENXIO)
        }
        FileType::Fifo => Ok(()),
        _ => Err(Errno::ENXIO),
    }
}

/// `O_CREAT`: the existing file (following a final symlink unless
/// `O_EXCL` or `O_NOFOLLOW`), or a new one; a dangling final symlink
/// creates its target, as Linux does.
fn open_or_create(ctx: &Ctx<'_>, path: &[u8], flags: OpenFlags, perm: u32) -> VfsResult<(Arc<Inode>, bool)> {
    let mut path = path.to_vec();
    let mut start = Arc::clone(ctx.cwd);
    let mut links_followed = 0;
    loop {
        let here = Ctx { cwd: &start, ..*ctx };
        let (dir, last, trailing_slash) = here.parent(&path)?;
        let name = match last {
            Last::Normal(name) => name,
            // ".", ".." or "/": an existing directory.
            _ if flags.excl() => return Err(Errno::EEXIST),
            _ => return Err(Errno::EISDIR),
        };
        if trailing_slash {
            return Err(Errno::EISDIR);
        }
        let existing = {
            let locked = ctx.sb.dir_locks.read(dir.dir()?);
            locked.children.get(name).and_then(|d| d.inode.clone())
        };
        let Some(existing) = existing else {
            match here.create(&dir, name, FileType::Regular, perm, Box::default(), 0) {
                // Lost a race with another creator: look again.
                Err(Errno::EEXIST) if !flags.excl() => continue,
                created => return created.map(|inode| (inode, true)),
            }
        };
        if flags.excl() {
            return Err(Errno::EEXIST);
        }
        match existing.symlink_target() {
            Some(target) if !flags.nofollow() => {
                links_followed += 1;
                if links_followed > MAX_SYMLINKS {
                    return Err(Errno::ELOOP);
                }
                path = target.to_vec();
                start = dir.into_arc();
            }
            _ => return Ok((existing, false)),
        }
    }
}
