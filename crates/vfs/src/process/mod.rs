//! A process: credentials, a root, a working directory and a file
//! descriptor table, with the system calls as methods. Each method is one
//! line over the system-call layer ([`crate::syscalls`]): a path call runs
//! in a [`Context`] of the process's credentials and root, starting at its
//! working directory or at a `dirfd` (the `*at` calls, in `paths`), a
//! descriptor call on the open file the descriptor names.
//!
//! Invariant: a file descriptor names one open file description until it is
//! closed; descriptors are allocated lowest-first, as Linux does, up to
//! [`MAX_FDS`] (then EMFILE); looking one up writes only that descriptor's
//! line (the `fdtable` module). The root and the working directory are
//! read without a lock (epoch-protected pointers), so walks write nothing
//! shared.
//!
//! May import every module: it is the top of the crate, and nothing but
//! the crate root imports it. [`Vfs::process`] is defined here, with the
//! type it makes.

use crate::cred::Credentials;
use crate::errno::{Errno, VfsResult};
use crate::fdtable::FdTable;
pub use crate::fdtable::MAX_FDS;
use crate::file::OpenFile;
use crate::inode::Inode;
use crate::locks::{Flock, Interrupt, LeaseNotifier, Pid, F_UNLCK};
use crate::mount::{Location, Mount, MountNamespace, MountRef};
use crate::namei::At;
use crate::syscalls::locks::{self as lock_calls, AccessModeCheck, RecordOwner};
use crate::syscalls::Context;
use crate::types::{DirEntry, Stat, Whence};
use crate::Vfs;
use crossbeam_epoch::Owned;
use std::fmt;
use std::ptr::NonNull;
use std::sync::Arc;
use vfscale_sync::audited::CountedArc;
use vfscale_sync::audited::EpochAtomic;
use vfscale_sync::audited::Mutex;
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
    /// Its mount namespace, root and working directory (Linux's
    /// `fs_struct` and `nsproxy`), replaced whole by `chdir`, `chroot`
    /// and `unshare`.
    fs: EpochAtomic<FsState>,
    fds: FdTable,
}

/// Where a process's walks run. Readers borrow it under the epoch; the
/// counted references to its two mounts are in `held`, which the state's
/// replacement drops at once (Linux's `path_put` of the old working
/// directory), so that an `umount` right after a `chdir` out of the mount
/// does not find it busy. A reader that still borrows a replaced state
/// reads mounts whose memory outlives its guard (see `mount`).
struct FsState {
    /// The namespace whose mounts its walks cross; none for a process of
    /// one instance alone.
    ns: Option<Arc<MountNamespace>>,
    /// Where absolute paths start and `..` stops (`chroot`).
    root: (NonNull<Mount>, Arc<Inode>),
    cwd: (NonNull<Mount>, Arc<Inode>),
    held: Mutex<Option<[MountRef; 2]>>,
}

// SAFETY: the mount pointers are to mounts `held` counts (or, once
// replaced, whose memory the epoch keeps for readers); Mount is Sync.
unsafe impl Send for FsState {}
// SAFETY: as above.
unsafe impl Sync for FsState {}

impl FsState {
    fn new(ns: Option<Arc<MountNamespace>>, root: Location, cwd: Location) -> FsState {
        FsState {
            ns,
            root: (NonNull::from(&*root.mount), root.inode),
            cwd: (NonNull::from(&*cwd.mount), cwd.inode),
            held: Mutex::new(Some([root.mount, cwd.mount])),
        }
    }

    /// The root or the working directory, as a place a walk starts at,
    /// for as long as the state is borrowed.
    fn at(place: &(NonNull<Mount>, Arc<Inode>)) -> At<'_> {
        // SAFETY: counted by `held` while the state is current; a reader
        // of a replaced state is pinned, and the mount's memory is freed
        // only through the epoch.
        At { mount: unsafe { place.0.as_ref() }, inode: &place.1 }
    }

    /// A counted copy of the root or the working directory.
    fn location(place: &(NonNull<Mount>, Arc<Inode>)) -> Location {
        let at = Self::at(place);
        let mount = MountRef::try_get(at.mount).expect("the current state's mounts are counted");
        Location { mount, inode: Arc::clone(at.inode) }
    }
}

mod paths;

/// The `dirfd` that names the working directory.
pub const AT_FDCWD: Fd = libc::AT_FDCWD;

/// What a process's POSIX lock marks know a file's inode by.
fn inode_key(file: &OpenFile) -> usize {
    Arc::as_ptr(file.inode()) as usize
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
        // state pointer.
        unsafe {
            drop(self.fs.load(Ordering::Relaxed, crossbeam_epoch::unprotected()).into_owned());
        }
    }
}

impl Vfs {
    /// A process with these credentials, its root and working directory
    /// the instance's root.
    pub fn process(&self, cred: Credentials) -> Process {
        let root = Location { mount: self.own_mount().clone(), inode: Arc::clone(self.root()) };
        self.process_with(None, root, cred)
    }

    /// A process in the mount namespace `ns`, its root and working
    /// directory the namespace's root; [`Process::vfs`] answers this
    /// instance.
    ///
    /// ```
    /// use vfscale::procfs::{ProcConfig, Procfs};
    /// use vfscale::{Credentials, MountFlags, Vfs};
    ///
    /// let root_fs = Vfs::default();
    /// let ns = root_fs.new_namespace();
    /// let p = root_fs.process_in(&ns, Credentials::root());
    /// p.mkdir("/proc", 0o555)?;
    /// let proc = Procfs::new(ProcConfig::rcu_revalidate());
    /// p.mount(proc.vfs(), "proc", "/proc", MountFlags::NOSUID | MountFlags::NODEV)?;
    /// assert!(p.stat("/proc/self").is_err()); // no task 'self' was added
    /// assert_eq!(p.stat("/proc/..")?.ino, p.stat("/")?.ino);
    /// # Ok::<(), vfscale::Errno>(())
    /// ```
    pub fn process_in(&self, ns: &Arc<MountNamespace>, cred: Credentials) -> Process {
        let mount = ns.root_mount();
        let root = Location { inode: Arc::clone(mount.root()), mount };
        self.process_with(Some(Arc::clone(ns)), root, cred)
    }

    fn process_with(&self, ns: Option<Arc<MountNamespace>>, root: Location, cred: Credentials) -> Process {
        let fs = FsState::new(ns, root.clone(), root);
        Process { pid: crate::locks::new_pid(), vfs: self.clone(), cred, fs: EpochAtomic::new(fs), fds: FdTable::new() }
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

    /// Runs `call` in the context of this process's credentials and root,
    /// starting at its working directory.
    fn at_cwd<R>(&self, call: impl FnOnce(&Context<'_>) -> VfsResult<R>) -> VfsResult<R> {
        let guard = crossbeam_epoch::pin();
        let fs = self.fs(&guard);
        call(&Context::from_places(fs.ns.as_deref(), &self.cred, FsState::at(&fs.root), FsState::at(&fs.cwd)))
    }

    /// The namespace, root and working directory, for as long as `guard`
    /// is pinned.
    fn fs<'g>(&self, guard: &'g crossbeam_epoch::Guard) -> &'g FsState {
        // SAFETY: the pointer is never null (set in `process_with`,
        // replaced through `set_fs`, which releases the old state through
        // the epoch), so it stays valid while the guard is pinned.
        unsafe { self.fs.load(Ordering::Acquire, guard).deref() }
    }

    /// Replaces the namespace, root and working directory with what
    /// `change` makes of the current ones.
    fn set_fs(&self, change: impl FnOnce(Option<&Arc<MountNamespace>>, Location, Location) -> FsState) {
        let guard = crossbeam_epoch::pin();
        let fs = self.fs(&guard);
        let to = change(fs.ns.as_ref(), FsState::location(&fs.root), FsState::location(&fs.cwd));
        let old = self.fs.swap(Owned::new(to), Ordering::AcqRel, &guard);
        // SAFETY: `old` was current until the swap, so it is valid while
        // the guard is pinned.
        let released = unsafe { old.deref() }.held.lock().unwrap_or_else(|e| e.into_inner()).take();
        drop(released);
        // SAFETY: the old directory is unreachable now; the box is only
        // freed by the deferred release, after every guard pinned now has
        // unpinned.
        self.vfs.sb.reclaim.defer(&guard, unsafe { old.into_owned() });
    }

    /// The open file behind `fd`, counted: a write of its `Arc`'s count,
    /// shared with every thread using the same description (as Linux's
    /// `f_count` in a multithreaded process). Calls that neither keep the
    /// file nor wait long (read, write, seek, truncate, fallocate, fstat)
    /// borrow it instead, through `FdTable::with`.
    fn file(&self, fd: Fd) -> VfsResult<CountedArc<OpenFile>> {
        self.fds.get(fd)
    }

    /// `close(2)`: also drops every POSIX lock this process holds on the
    /// file, whichever descriptor took it.
    pub fn close(&self, fd: Fd) -> VfsResult<()> {
        let file = self.fds.remove(fd)?;
        if self.fds.may_hold_posix(inode_key(&file)) {
            lock_calls::posix_close(&file, self.pid);
        }
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
        self.fds.with(fd, |file| file.truncate(len, &self.cred))?
    }

    /// `fallocate(2)` (see [`OpenFile::fallocate`]).
    pub fn fallocate(&self, fd: Fd, mode: i32, offset: i64, len: i64) -> VfsResult<()> {
        self.fds.with(fd, |file| file.fallocate(mode, offset, len, &self.cred))?
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

    /// `fcntl(fd, F_GETLK, lock)`: see [`lock_calls::getlk`].
    pub fn fcntl_getlk(&self, fd: Fd, lock: &mut Flock) -> VfsResult<()> {
        self.fds.with(fd, |file| lock_calls::getlk(file.mount().locks(), file, self.pid, RecordOwner::Posix, lock))?
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
        self.fds.with(fd, |file| lock_calls::getlk(file.mount().locks(), file, self.pid, RecordOwner::Ofd, lock))?
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

    /// A request first tries without waiting, borrowing the description
    /// (as a read does); only one that must wait holds a count of it. A
    /// POSIX lock granted outside the table's read-side section (after a
    /// wait, or on a generated file) may have been granted after a close
    /// of `fd` dropped the process's locks on the file: then it goes too,
    /// and the call fails EBADF, as Linux's `fcntl_setlk` does. Inside the
    /// section no check is needed: a close waits for the section before
    /// it drops the locks.
    fn setlk(&self, fd: Fd, owner: RecordOwner, lock: &Flock, wait: Option<&Interrupt<'_>>) -> VfsResult<()> {
        let posix_lock = owner == RecordOwner::Posix && lock.l_type != F_UNLCK;
        let request = |file: &OpenFile, wait| {
            if posix_lock {
                self.fds.mark_posix(inode_key(file));
            }
            lock_calls::setlk(file.mount().locks(), file, (self.pid, owner), lock, wait, AccessModeCheck::Check)
        };
        let kept = |file: &OpenFile, granted: VfsResult<()>| match granted {
            Ok(()) if posix_lock => self.release_if_closed(fd, file),
            other => other,
        };
        let tried = self.fds.with(fd, |file| match file.is_generated() {
            true => kept(file, request(file, None)),
            false => request(file, None),
        })?;
        match tried {
            Err(Errno::EAGAIN) if wait.is_some() => {
                let file = self.file(fd)?;
                kept(&file, request(&file, wait))
            }
            tried => tried,
        }
    }

    /// After a POSIX lock on `file` was granted through `fd` outside the
    /// table's read-side section: if `fd` no longer names `file`, a close
    /// ran and dropped the process's locks on it, perhaps before this one
    /// was granted, so they go now and the request fails EBADF.
    fn release_if_closed(&self, fd: Fd, file: &OpenFile) -> VfsResult<()> {
        if self.fds.with(fd, |now| std::ptr::eq(now, file)) == Ok(true) {
            return Ok(());
        }
        lock_calls::posix_close(file, self.pid);
        Err(Errno::EBADF)
    }

    /// Runs a lock request on the file `fd` names. One that cannot wait
    /// borrows the description for its short section, as a read does (two
    /// of them through one description count nothing); one that may wait
    /// holds a count of it.
    fn lock_request(&self, fd: Fd, may_wait: bool, request: impl FnOnce(&OpenFile) -> VfsResult<()>) -> VfsResult<()> {
        if may_wait {
            request(&*self.file(fd)?)
        } else {
            self.fds.with(fd, request)?
        }
    }

    /// `flock(fd, op)`: `LOCK_SH`, `LOCK_EX` or `LOCK_UN`, with `LOCK_NB`
    /// to fail with EWOULDBLOCK rather than wait. Waits without limit.
    pub fn flock(&self, fd: Fd, op: i32) -> VfsResult<()> {
        self.flock_interruptible(fd, op, &Interrupt::never())
    }

    /// `flock(fd, op)` whose wait ends with EINTR when `intr` fires.
    /// With `LOCK_NB` it borrows the description, as
    /// [`fcntl_setlk`](Self::fcntl_setlk) does.
    pub fn flock_interruptible(&self, fd: Fd, op: i32, intr: &Interrupt<'_>) -> VfsResult<()> {
        self.lock_request(fd, op & crate::locks::LOCK_NB == 0, |file| {
            lock_calls::flock(file.mount().locks(), file, self.pid, op, intr)
        })
    }

    /// `fcntl(fd, F_SETLEASE, arg)`: see [`lock_calls::setlease`].
    pub fn setlease(&self, fd: Fd, arg: i32) -> VfsResult<()> {
        self.setlease_notify(fd, arg, None)
    }

    /// [`setlease`](Self::setlease) with a notifier called when an `open`
    /// starts breaking the lease (replacing any earlier notifier).
    pub fn setlease_notify(&self, fd: Fd, arg: i32, notify: Option<LeaseNotifier>) -> VfsResult<()> {
        let file = self.file(fd)?;
        lock_calls::setlease(file.mount().locks(), &self.cred, &file, self.pid, arg, notify)
    }

    /// `fcntl(fd, F_GETLEASE)`: see [`lock_calls::getlease`].
    pub fn getlease(&self, fd: Fd) -> VfsResult<i16> {
        Ok(lock_calls::getlease(&*self.file(fd)?))
    }
}
