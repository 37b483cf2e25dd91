//! File locks (`fs/locks.c`, seed 004, kernel-notes §6): `flock`, POSIX
//! and open-file-description (OFD) record locks, leases, deadlock
//! detection, and the system-wide lock list that `/proc/locks` reads.
//!
//! Invariant: every lock lives on exactly one inode's lists, changed only
//! under the lock of its kind's list there (Linux's `flc_lock`, split per
//! kind, and per CPU for flocks and leases: see `context`), and has exactly one entry
//! on the system-wide list while it lives there. A POSIX owner (a process
//! id) is on the wait-for graph (`blocked_hash`, under `blocked_lock`) only
//! while it sleeps on a lock held by another owner, and no request is
//! allowed to sleep if that would close a cycle of such waits (EDEADLK).
//!
//! Who owns what, as in Linux: a flock lock and an OFD lock belong to the
//! open file description (dropped when its last reference goes); a POSIX
//! lock belongs to the process and is dropped when the process closes
//! *any* descriptor of the file; a lease belongs to the description and
//! breaks when another open conflicts with it. POSIX and OFD locks share
//! one list and conflict with each other; flock locks are separate.
//!
//! Lock order: the global lock (only in [`LockListKind::GlobalLock`], the
//! "before" design, where it covers everything), then an inode's list lock
//! of one kind (for an exclusive flock, a write lease or a lease break,
//! every shard's, in shard order), then
//! the system-wide list lock or `blocked_lock`. Waiters sleep with no lock
//! held and wake in the order they queued, with no wake-up lost between
//! queueing and sleeping.
//!
//! The inode lock, the global lock and the per-CPU list locks under the
//! rwsem are test-and-set spinlocks: a userspace holder can be preempted,
//! and a FIFO lock (ticket, MCS) then makes every later waiter wait for a
//! descheduled one. With 16 threads on 2 CPUs that convoy made `flock02`
//! hundreds of times slower; the `lglock-queued` variant keeps the queued
//! flavour on purpose, to show it.
//!
//! Use the [`Process`] methods (`flock`, `fcntl_setlk`, ...); this module
//! holds their types and the shared [`LockManager`].
//!
//! ```
//! use vfscale::locks::{Flock, F_RDLCK, F_UNLCK, F_WRLCK};
//! use vfscale::{Credentials, Errno, OpenFlags, Vfs};
//!
//! let vfs = Vfs::default();
//! let (a, b) = (vfs.process(Credentials::root()), vfs.process(Credentials::root()));
//! let fa = a.open("/f", OpenFlags::CREAT | OpenFlags::RDWR, 0o644)?;
//! let fb = b.open("/f", OpenFlags::RDWR, 0)?;
//! a.fcntl_setlk(fa, &Flock::new(F_WRLCK, 0, 10))?;
//! assert_eq!(b.fcntl_setlk(fb, &Flock::new(F_RDLCK, 5, 1)), Err(Errno::EAGAIN));
//! let mut probe = Flock::new(F_RDLCK, 5, 1);
//! b.fcntl_getlk(fb, &mut probe)?;
//! assert_eq!((probe.l_type, probe.l_start, probe.l_len, probe.l_pid), (F_WRLCK, 0, 10, a.pid()));
//! a.close(fa)?; // drops all of a's POSIX locks on /f
//! b.fcntl_setlk(fb, &Flock::new(F_RDLCK, 5, 1))?;
//! assert_eq!(vfs.locks().list().len(), 1);
//! b.fcntl_setlk(fb, &Flock::new(F_UNLCK, 0, 0))?;
//! # Ok::<(), Errno>(())
//! ```

mod context;
mod list;
mod range;
mod wait;

pub use crate::config::LockListKind;
pub use wait::{CancelToken, Interrupt};

use crate::errno::{Errno, VfsResult};
use crate::file::OpenFile;
use crate::process::{Fd, Process};
pub(crate) use context::LockHome;
use context::{FileLockContext, Owner};
use list::{LgLockList, LockList, RwSemLockList, Slab, Slot};
use std::fmt;
use std::sync::Arc;
use std::time::Duration;
use vfscale_sync::audited::OnceLock;
use vfscale_sync::audited::{AtomicU64, Ordering};
use vfscale_sync::spin::{McsLock, SpinLock, SpinLockGuard, TasLock};

/// Read lock / read lease (`F_RDLCK`).
pub const F_RDLCK: i16 = libc::F_RDLCK as i16;
/// Write lock / write lease (`F_WRLCK`).
pub const F_WRLCK: i16 = libc::F_WRLCK as i16;
/// Unlock / no lease (`F_UNLCK`).
pub const F_UNLCK: i16 = libc::F_UNLCK as i16;
/// `flock`: shared lock.
pub const LOCK_SH: i32 = libc::LOCK_SH;
/// `flock`: exclusive lock.
pub const LOCK_EX: i32 = libc::LOCK_EX;
/// `flock`: unlock.
pub const LOCK_UN: i32 = libc::LOCK_UN;
/// `flock`: fail with EWOULDBLOCK rather than wait.
pub const LOCK_NB: i32 = libc::LOCK_NB;

/// Linux's default `/proc/sys/fs/lease-break-time`.
pub const DEFAULT_LEASE_BREAK_TIME: Duration = Duration::from_secs(45);

/// `struct flock`, the argument of `F_GETLK`/`F_SETLK`/`F_SETLKW` and the
/// OFD commands, with Linux's field types so bad values can be passed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Flock {
    /// `F_RDLCK`, `F_WRLCK` or `F_UNLCK`.
    pub l_type: i16,
    /// `SEEK_SET`, `SEEK_CUR` or `SEEK_END`: what `l_start` is relative to.
    pub l_whence: i16,
    /// First byte, relative to `l_whence`.
    pub l_start: i64,
    /// Bytes; 0 means "to end of file", negative means the bytes before
    /// `l_start`.
    pub l_len: i64,
    /// `F_GETLK`: the holder's pid (-1 for an OFD lock); must be 0 for the
    /// OFD commands.
    pub l_pid: i32,
}

impl Flock {
    /// A request of type `l_type` for `l_len` bytes from absolute offset
    /// `l_start` (`SEEK_SET`).
    pub fn new(l_type: i16, l_start: i64, l_len: i64) -> Flock {
        Flock { l_type, l_whence: libc::SEEK_SET as i16, l_start, l_len, l_pid: 0 }
    }
}

/// The kind of a lock, as `/proc/locks` names it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum LockKind {
    /// `flock(2)`.
    Flock,
    /// POSIX record lock (`F_SETLK`).
    Posix,
    /// OFD record lock (`F_OFD_SETLK`).
    Ofd,
    /// Lease (`F_SETLEASE`).
    Lease,
}

/// One line of `/proc/locks`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LockInfo {
    /// What kind of lock.
    pub kind: LockKind,
    /// Write (exclusive) rather than read (shared).
    pub write: bool,
    /// The owning process (for flock, OFD locks and leases: the one that
    /// took it).
    pub pid: i32,
    /// Inode number of the locked file.
    pub ino: u64,
    /// First byte (0 for flock and leases).
    pub start: u64,
    /// Last byte; `None` for "to EOF" (and for flock and leases).
    pub end: Option<u64>,
}

impl fmt::Display for LockInfo {
    /// `POSIX  ADVISORY  WRITE 1234 00:00:56 0 EOF`, as `/proc/locks`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let kind = match self.kind {
            LockKind::Flock => "FLOCK ",
            LockKind::Posix => "POSIX ",
            LockKind::Ofd => "OFDLCK",
            LockKind::Lease => "LEASE ",
        };
        let access = if self.write { "WRITE" } else { "READ " };
        let end = self.end.map_or("EOF".to_string(), |e| e.to_string());
        write!(f, "{kind} ADVISORY  {access} {} 00:00:{} {} {end}", self.pid, self.ino, self.start)
    }
}

/// What a lease holder is told when an `open` starts breaking its lease:
/// give the lease up ([`F_UNLCK`]) or downgrade it ([`F_RDLCK`]) within
/// the lease-break time.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LeaseBreak {
    /// Inode number of the leased file.
    pub ino: u64,
    /// The lease type the holder must get down to.
    pub target: i16,
}

/// How a lease holder is notified (Linux sends `SIGIO`). Called with no
/// lock held, from the thread of the breaking `open`.
pub type LeaseNotifier = Arc<dyn Fn(LeaseBreak) + Send + Sync>;

/// An entry of the wait-for graph: POSIX owner `pid` sleeps (as waiter
/// `id`) on a lock held by `blocker`.
#[derive(Debug, Clone, Copy)]
struct BlockedEntry {
    id: u64,
    pid: i32,
    blocker: Owner,
}

/// What `blocked_lock` protects: the wait-for graph, and in the
/// [`LockListKind::GlobalLock`] design also the system-wide list.
#[derive(Debug, Default)]
struct Global {
    blocked: Vec<BlockedEntry>,
    list: Slab,
}

/// Longest chain of waits followed looking for a cycle
/// (`MAX_DEADLK_ITERATIONS`).
const MAX_DEADLK_ITERATIONS: usize = 10;

impl Global {
    /// Whether POSIX owner `caller` waiting on `blocker` closes a cycle
    /// (`posix_locks_deadlock`): follow "owner waits for a lock held by
    /// owner ..." and see whether it comes back to `caller`.
    fn would_deadlock(&self, caller: i32, mut blocker: Owner) -> bool {
        for _ in 0..=MAX_DEADLK_ITERATIONS {
            let Owner::Pid(pid) = blocker else { return false };
            match self.blocked.iter().find(|b| b.pid == pid) {
                Some(next) => blocker = next.blocker,
                None => return false,
            }
            if blocker == Owner::Pid(caller) {
                return true;
            }
        }
        false
    }

    fn unblock(&mut self, id: u64) {
        self.blocked.retain(|b| b.id != id);
    }
}

/// The lock state shared by all inodes of a [`crate::Vfs`]: the
/// system-wide lock list in the configured design, the wait-for graph
/// under its own lock (`blocked_lock_lock`), and the lease-break time.
pub struct LockManager {
    kind: LockListKind,
    /// `None` in the global design, where the list is inside `global`.
    list: Option<Box<dyn LockList>>,
    global: SpinLock<TasLock, Global>,
    lease_break_ms: AtomicU64,
    next_waiter: AtomicU64,
}

impl fmt::Debug for LockManager {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("LockManager")
            .field("kind", &self.kind)
            .field("lease_break_time", &self.lease_break_time())
            .finish_non_exhaustive()
    }
}

impl LockManager {
    /// A manager with an empty list of design `kind`.
    pub fn new(kind: LockListKind) -> LockManager {
        let list: Option<Box<dyn LockList>> = match kind {
            LockListKind::PerCpuRwSem => Some(Box::new(RwSemLockList::new())),
            LockListKind::LgLockTas => Some(Box::new(LgLockList::<TasLock>::new())),
            LockListKind::LgLockQueued => Some(Box::new(LgLockList::<McsLock>::new())),
            LockListKind::GlobalLock => None,
        };
        LockManager {
            kind,
            list,
            global: SpinLock::new(Global::default()),
            lease_break_ms: AtomicU64::new(DEFAULT_LEASE_BREAK_TIME.as_millis() as u64),
            next_waiter: AtomicU64::new(1),
        }
    }

    /// How many POSIX owners sleep on the wait-for graph right now.
    pub fn blocked(&self) -> usize {
        self.global.lock().blocked.len()
    }

    /// The list design.
    pub fn kind(&self) -> LockListKind {
        self.kind
    }

    /// How long a lease holder has to give a broken lease up before it is
    /// removed (`/proc/sys/fs/lease-break-time`), millisecond resolution.
    pub fn lease_break_time(&self) -> Duration {
        Duration::from_millis(self.lease_break_ms.load(Ordering::Relaxed))
    }

    /// Sets the lease-break time; zero removes a broken lease at once.
    pub fn set_lease_break_time(&self, time: Duration) {
        self.lease_break_ms.store(time.as_millis().try_into().unwrap_or(u64::MAX), Ordering::Relaxed);
    }

    /// Every lock in the system, as `/proc/locks` lists it (the list's
    /// global side: all CPUs' lists frozen at once).
    pub fn list(&self) -> Vec<LockInfo> {
        let mut all = Vec::new();
        match &self.list {
            Some(list) => list.for_each(&mut |info| all.push(*info)),
            None => self.global.lock().list.for_each(&mut |info| all.push(*info)),
        }
        all
    }

    /// `/proc/locks` as text, one numbered line per lock.
    pub fn proc_locks(&self) -> String {
        self.list().iter().enumerate().map(|(i, info)| format!("{}: {info}\n", i + 1)).collect()
    }

    fn next_waiter_id(&self) -> u64 {
        self.next_waiter.fetch_add(1, Ordering::Relaxed)
    }

    /// Enters a lock operation: in the global design takes the one lock
    /// for its whole duration.
    fn enter(&self) -> Sys<'_> {
        let held = self.list.is_none().then(|| self.global.lock());
        Sys { mgr: self, held }
    }
}

/// A lock operation's access to the shared state: the list and the
/// wait-for graph, each under its own lock or under the one global lock.
struct Sys<'a> {
    mgr: &'a LockManager,
    held: Option<SpinLockGuard<'a, TasLock, Global>>,
}

impl Sys<'_> {
    fn insert(&mut self, info: LockInfo) -> Slot {
        match (&mut self.held, &self.mgr.list) {
            (Some(global), _) => global.list.insert(0, info),
            (None, Some(list)) => list.insert(info),
            (None, None) => unreachable!("the global design always holds the global lock"),
        }
    }

    fn remove(&mut self, slot: Slot) {
        match (&mut self.held, &self.mgr.list) {
            (Some(global), _) => global.list.remove(slot),
            (None, Some(list)) => list.remove(slot),
            (None, None) => unreachable!("the global design always holds the global lock"),
        }
    }

    fn blocked<R>(&mut self, f: impl FnOnce(&mut Global) -> R) -> R {
        match &mut self.held {
            Some(global) => f(global),
            None => f(&mut self.mgr.global.lock()),
        }
    }
}

/// An inode's lock state: its lock context, created on first use
/// (`i_flctx`). The open counts leases check are the inode's
/// [`InodeOpens`](crate::opens::InodeOpens).
#[derive(Debug, Default)]
pub(crate) struct InodeLocks {
    ctx: OnceLock<Box<FileLockContext>>,
}

impl InodeLocks {
    fn context(&self, mgr: &Arc<LockManager>, ino: u64) -> &FileLockContext {
        self.ctx.get_or_init(|| Box::new(FileLockContext::new(Arc::clone(mgr), ino)))
    }
}

/// The id of an open file description: its address, stable while it is
/// in its `Arc` and reused only after its locks were released on drop.
fn file_id(file: &OpenFile) -> usize {
    file as *const OpenFile as usize
}

/// The last reference to an open file description went: its flock and
/// OFD locks and its lease go (`locks_remove_file`).
pub(crate) fn file_released(file: &OpenFile) {
    if let Some(ctx) = file.inode().locks.ctx.get() {
        ctx.release_file(file_id(file), file.flock_home(), file.lease_home());
    }
}

/// A process closed a descriptor of `file`: all its POSIX locks on that
/// inode go (`locks_remove_posix`).
pub(crate) fn posix_close(file: &OpenFile, pid: i32) {
    if let Some(ctx) = file.inode().locks.ctx.get() {
        ctx.remove_owner(Owner::Pid(pid));
    }
}

/// `open` of `file`'s inode with `flags` breaks conflicting leases and
/// waits for them to go, up to the lease-break time (`break_lease`).
pub(crate) fn break_lease(file: &OpenFile) -> VfsResult<()> {
    match file.inode().locks.ctx.get() {
        Some(ctx) => ctx.break_lease(file.is_writable(), file.flags().contains(crate::OpenFlags::NONBLOCK)),
        None => Ok(()),
    }
}

/// Which owner a record lock request has.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum RecordOwner {
    Posix,
    Ofd,
}

/// What a record lock command does: test, set, or set and wait.
#[derive(Debug, Clone, Copy)]
enum RecordCmd<'a> {
    Get,
    Set,
    SetWait(&'a Interrupt<'a>),
}

impl Process {
    fn lock_context<'f>(&self, file: &'f OpenFile) -> &'f FileLockContext {
        let inode = file.inode();
        inode.locks.context(self.vfs().locks(), inode.ino())
    }

    fn record(&self, fd: Fd, who: RecordOwner, lock: &Flock, cmd: RecordCmd<'_>) -> VfsResult<Flock> {
        self.record_on(&*self.open_file(fd)?, who, lock, cmd, true)
    }

    /// A record lock command on `file`; `check_mode` makes the EBADF check
    /// of the lock type against the description's access mode.
    fn record_on(
        &self,
        file: &OpenFile,
        who: RecordOwner,
        lock: &Flock,
        cmd: RecordCmd<'_>,
        check_mode: bool,
    ) -> VfsResult<Flock> {
        let set = !matches!(cmd, RecordCmd::Get);
        let (start, end) = range::to_range(
            lock.l_whence,
            lock.l_start,
            lock.l_len,
            file.position() as i64,
            file.inode().stat().size as i64,
        )?;
        let write = match lock.l_type {
            F_RDLCK => Some(false),
            F_WRLCK => Some(true),
            // Linux 6.7+: F_OFD_GETLK with F_UNLCK reports the caller's own
            // lock on the range (to see what a description holds).
            F_UNLCK if set || who == RecordOwner::Ofd => None,
            _ => return Err(Errno::EINVAL),
        };
        if check_mode
            && set
            && (write == Some(false) && !file.is_readable() || write == Some(true) && !file.is_writable())
        {
            return Err(Errno::EBADF);
        }
        let owner = match who {
            RecordOwner::Ofd if lock.l_pid != 0 => return Err(Errno::EINVAL),
            RecordOwner::Ofd => Owner::File(file_id(file)),
            RecordOwner::Posix => Owner::Pid(self.pid()),
        };
        let ctx = self.lock_context(file);
        let wait = match cmd {
            RecordCmd::Get => None,
            RecordCmd::Set => Some(None),
            RecordCmd::SetWait(intr) => Some(Some(intr)),
        };
        match wait {
            Some(intr) => {
                ctx.set_record(owner, self.pid(), write, start, end, intr)?;
                Ok(*lock)
            }
            None => {
                let mut out = *lock;
                match ctx.test_record(owner, write, start, end) {
                    None => out.l_type = F_UNLCK,
                    Some((piece, holder)) => {
                        let (l_start, l_len) = range::to_start_len(piece.start, piece.end);
                        out = Flock {
                            l_type: if piece.write { F_WRLCK } else { F_RDLCK },
                            l_whence: libc::SEEK_SET as i16,
                            l_start,
                            l_len,
                            l_pid: holder,
                        };
                    }
                }
                Ok(out)
            }
        }
    }

    /// `fcntl(fd, F_GETLK, lock)`: if a lock of another owner conflicts
    /// with `lock`, overwrites it with the first such lock (type, absolute
    /// range, holder pid, -1 for an OFD lock); otherwise sets only
    /// `l_type` to `F_UNLCK`. EINVAL for `F_UNLCK` or a bad type or range.
    pub fn fcntl_getlk(&self, fd: Fd, lock: &mut Flock) -> VfsResult<()> {
        *lock = self.record(fd, RecordOwner::Posix, lock, RecordCmd::Get)?;
        Ok(())
    }

    /// `fcntl(fd, F_SETLK, lock)`: takes, changes or releases this
    /// process's POSIX lock on the range; EAGAIN if another owner's lock
    /// conflicts. EBADF for a read lock on a description not open for
    /// reading, or a write lock on one not open for writing.
    pub fn fcntl_setlk(&self, fd: Fd, lock: &Flock) -> VfsResult<()> {
        self.record(fd, RecordOwner::Posix, lock, RecordCmd::Set).map(drop)
    }

    /// `fcntl(fd, F_SETLKW, lock)`: as [`fcntl_setlk`](Self::fcntl_setlk)
    /// but waits for conflicting locks to go; EDEADLK if waiting would
    /// close a cycle of POSIX owners waiting for each other, EINTR if
    /// `intr` fires first.
    pub fn fcntl_setlkw(&self, fd: Fd, lock: &Flock, intr: &Interrupt<'_>) -> VfsResult<()> {
        self.record(fd, RecordOwner::Posix, lock, RecordCmd::SetWait(intr)).map(drop)
    }

    /// `F_GETLK` on an open file description this process has no
    /// descriptor for, as [`fcntl_getlk`](Self::fcntl_getlk): for front
    /// ends that keep their own handle tables (FUSE).
    pub fn posix_getlk_description(&self, file: &OpenFile, lock: &mut Flock) -> VfsResult<()> {
        *lock = self.record_on(file, RecordOwner::Posix, lock, RecordCmd::Get, false)?;
        Ok(())
    }

    /// `F_SETLK` (`intr` `None`) or `F_SETLKW` on an open file description
    /// this process has no descriptor for, as
    /// [`fcntl_setlk`](Self::fcntl_setlk), but without the check of the
    /// lock type against the description's access mode: FUSE's kernel side
    /// made that check for `fcntl` already, and forwards `flock`, which has
    /// none, as the same request.
    pub fn posix_setlk_description(
        &self,
        file: &OpenFile,
        lock: &Flock,
        intr: Option<&Interrupt<'_>>,
    ) -> VfsResult<()> {
        let cmd = intr.map_or(RecordCmd::Set, RecordCmd::SetWait);
        self.record_on(file, RecordOwner::Posix, lock, cmd, false).map(drop)
    }

    /// Drops every POSIX lock this process holds on `file`'s inode, as a
    /// close of any of its descriptors of the file does (FUSE's `flush`).
    pub fn posix_close_description(&self, file: &OpenFile) {
        posix_close(file, self.pid());
    }

    /// `fcntl(fd, F_OFD_GETLK, lock)`: as [`fcntl_getlk`](Self::fcntl_getlk)
    /// for the open file description as owner; `l_pid` must be 0. With
    /// `F_UNLCK` (Linux 6.7+) it reports this description's own first
    /// lock on the range instead.
    pub fn ofd_getlk(&self, fd: Fd, lock: &mut Flock) -> VfsResult<()> {
        *lock = self.record(fd, RecordOwner::Ofd, lock, RecordCmd::Get)?;
        Ok(())
    }

    /// `fcntl(fd, F_OFD_SETLK, lock)`: a record lock owned by the open file
    /// description; `l_pid` must be 0.
    pub fn ofd_setlk(&self, fd: Fd, lock: &Flock) -> VfsResult<()> {
        self.record(fd, RecordOwner::Ofd, lock, RecordCmd::Set).map(drop)
    }

    /// `fcntl(fd, F_OFD_SETLKW, lock)`: waits like
    /// [`fcntl_setlkw`](Self::fcntl_setlkw) (OFD owners take no part in
    /// deadlock detection, as in Linux).
    pub fn ofd_setlkw(&self, fd: Fd, lock: &Flock, intr: &Interrupt<'_>) -> VfsResult<()> {
        self.record(fd, RecordOwner::Ofd, lock, RecordCmd::SetWait(intr)).map(drop)
    }

    /// `flock(fd, op)`: `LOCK_SH`, `LOCK_EX` or `LOCK_UN`, with `LOCK_NB`
    /// to fail with EWOULDBLOCK rather than wait. Converting an existing
    /// lock first releases it, as in Linux. Waits without limit.
    pub fn flock(&self, fd: Fd, op: i32) -> VfsResult<()> {
        self.flock_interruptible(fd, op, &Interrupt::never())
    }

    /// `flock(fd, op)` whose wait ends with EINTR when `intr` fires.
    pub fn flock_interruptible(&self, fd: Fd, op: i32, intr: &Interrupt<'_>) -> VfsResult<()> {
        let file = self.open_file(fd)?;
        let write = match op & !LOCK_NB {
            LOCK_SH => Some(false),
            LOCK_EX => Some(true),
            LOCK_UN => None,
            _ => return Err(Errno::EINVAL),
        };
        let nonblock = op & LOCK_NB != 0;
        let wait = (!nonblock).then_some(intr);
        self.lock_context(&file).flock(file_id(&file), file.flock_home(), self.pid(), write, wait)
    }

    /// `fcntl(fd, F_SETLEASE, arg)` with `arg` `F_RDLCK`, `F_WRLCK` or
    /// `F_UNLCK`. EINVAL for another `arg` or a file that is not regular,
    /// EACCES unless the caller owns the file or is root, EAGAIN if the
    /// file is open in a conflicting way (a read lease: open for writing
    /// anywhere; a write lease: open by any other description) or another
    /// description holds a conflicting lease, and for `F_UNLCK` without a
    /// lease.
    pub fn setlease(&self, fd: Fd, arg: i32) -> VfsResult<()> {
        self.setlease_notify(fd, arg, None)
    }

    /// [`setlease`](Self::setlease) with a notifier called when an `open`
    /// starts breaking the lease (replacing any earlier notifier).
    pub fn setlease_notify(&self, fd: Fd, arg: i32, notify: Option<LeaseNotifier>) -> VfsResult<()> {
        let file = self.open_file(fd)?;
        let want = match i16::try_from(arg) {
            Ok(F_RDLCK) => Some(false),
            Ok(F_WRLCK) => Some(true),
            Ok(F_UNLCK) => None,
            _ => return Err(Errno::EINVAL),
        };
        let inode = file.inode();
        if self.credentials().uid() != inode.stat().uid && !self.credentials().is_root() {
            return Err(Errno::EACCES);
        }
        if inode.file_type() != crate::FileType::Regular {
            return Err(Errno::EINVAL);
        }
        let opens = &inode.opens;
        let self_w = u32::from(file.is_writable());
        let self_r = u32::from(!file.is_writable() && file.is_readable());
        let conflicting_open = move |write: bool| {
            if write {
                let (r, w) = opens.counts();
                w != self_w || r != self_r
            } else {
                opens.open_for_write()
            }
        };
        let ctx = self.lock_context(&file);
        ctx.setlease(file_id(&file), file.lease_home(), self.pid(), want, notify, &conflicting_open)
    }

    /// `fcntl(fd, F_GETLEASE)`: the lease this description holds —
    /// `F_RDLCK`, `F_WRLCK` or `F_UNLCK` — or, while it is being broken,
    /// the type it must get down to.
    pub fn getlease(&self, fd: Fd) -> VfsResult<i16> {
        let file = self.open_file(fd)?;
        Ok(match file.inode().locks.ctx.get() {
            Some(ctx) => ctx.getlease(file_id(&file), file.lease_home()),
            None => F_UNLCK,
        })
    }
}
