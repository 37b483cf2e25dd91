//! File locks (`fs/locks.c`, seed 004): `flock`, POSIX
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
//! breaks when another open conflicts with it. POSIX and OFD locks are
//! kept together and conflict with each other; flock locks are separate.
//!
//! A file's record locks are kept in one of two designs
//! ([`RecordLocks`], chosen by [`VfsConfig`](crate::VfsConfig)): one list
//! under one lock (Linux's `flc_posix` under `flc_lock`), or striped by
//! byte offset (the default): one list until locks within one stripe have
//! been taken in two stripes, then a lock per stripe slot plus a lane for
//! locks across stripes, so owners locking disjoint ranges in different
//! stripes share no written line. Adjacent ranges of one owner merge, so
//! they never are conflict-free. Each owner's locks carry a stamp of when
//! its group appeared on the file, so `F_GETLK` still reports the
//! conflict Linux's list order puts first (see `context::striped`).
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
//! The engine knows its owners only by id, as Linux's `fl_owner_t` and
//! gVisor's `UniqueID`: a [`Pid`] for POSIX locks, a [`FileId`] for the
//! rest. It imports neither processes nor open files; an open file's drop
//! calls down into it.
//!
//! May import `batched`, `config` and `errno`. The system
//! calls ([`crate::syscalls::locks`], wrapped by the
//! [`Process`](crate::Process) methods `flock`, `fcntl_setlk`, ...) turn a
//! call's arguments into owners and byte ranges; this module holds their
//! types and the shared [`LockManager`].
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
pub(crate) mod range;
mod wait;

pub use crate::config::{LockListKind, RecordLocks};
pub use wait::{CancelToken, Interrupt};

use crate::errno::VfsResult;
pub(crate) use context::{FileLockContext, HomeShard, Owner};
use list::{EntryId, LgLockList, LockList, RwSemLockList, Slab};
use std::cell::Cell;
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
    records: RecordLocks,
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
            .field("records", &self.records)
            .field("lease_break_time", &self.lease_break_time())
            .finish_non_exhaustive()
    }
}

impl LockManager {
    /// A manager with an empty list of design `kind`, whose files keep
    /// their record locks as `records` says.
    pub fn new(kind: LockListKind, records: RecordLocks) -> LockManager {
        let list: Option<Box<dyn LockList>> = match kind {
            LockListKind::PerCpuRwSem => Some(Box::new(RwSemLockList::new())),
            LockListKind::LgLockTas => Some(Box::new(LgLockList::<TasLock>::new())),
            LockListKind::LgLockQueued => Some(Box::new(LgLockList::<McsLock>::new())),
            LockListKind::GlobalLock => None,
        };
        LockManager {
            kind,
            records,
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

    /// How each file keeps its record locks.
    pub fn records(&self) -> RecordLocks {
        self.records
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
    fn enter(&self) -> Shared<'_> {
        let held = self.list.is_none().then(|| self.global.lock());
        Shared { mgr: self, held }
    }
}

/// A lock operation's access to the shared state: the list and the
/// wait-for graph, each under its own lock or under the one global lock.
struct Shared<'a> {
    mgr: &'a LockManager,
    held: Option<SpinLockGuard<'a, TasLock, Global>>,
}

impl Shared<'_> {
    fn insert(&mut self, info: LockInfo) -> EntryId {
        match (&mut self.held, &self.mgr.list) {
            (Some(global), _) => global.list.insert(0, info),
            (None, Some(list)) => list.insert(info),
            (None, None) => unreachable!("the global design always holds the global lock"),
        }
    }

    fn remove(&mut self, slot: EntryId) {
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

/// The id of an open file description as a lock owner (Linux's
/// `fl_owner_t` for flock and OFD locks and leases): its address, unique
/// among the descriptions alive at one time and reused only after the
/// locks of the description it named were released, and the owner shard
/// its record locks take on a file whose locks spread over stripes
/// ([`FileId::owner_shard`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct FileId {
    address: usize,
    owner_shard: u8,
}

impl FileId {
    /// The description at `address`, whose record locks take owner shard
    /// `owner_shard` (modulo [`OWNER_SHARDS`]).
    pub fn new(address: usize, owner_shard: u8) -> FileId {
        FileId { address, owner_shard: owner_shard % OWNER_SHARDS as u8 }
    }

    /// The shard of a sharded file's record-lock owners that holds this
    /// description's: chosen when it was opened, so that the descriptions
    /// one thread opens in turn take different shards, whatever other
    /// threads open (an address would collide one time in
    /// [`OWNER_SHARDS`], as the allocator happens to place them).
    pub fn owner_shard(self) -> usize {
        usize::from(self.owner_shard)
    }
}

/// Shards of a file's record-lock owners once its locks spread over
/// stripes: owners in different shards share no line.
pub const OWNER_SHARDS: usize = 64;

/// A POSIX lock owner: a process id.
pub type Pid = i32;

/// A new POSIX lock owner id, unique among all owners of all instances in
/// this process (as POSIX lock owners must be), and never 0: an owner that
/// holds nothing can ask `F_GETLK` as pid 0. Every
/// [`Process`](crate::Process) takes one.
///
/// Each thread takes pids in aligned batches of [`OWNER_SHARDS`], so the
/// processes one thread makes in turn have consecutive pids and their
/// record locks different owner shards ([`pid_owner_shard`]) whatever other
/// threads make; making a process writes a shared word once a batch.
pub fn new_pid() -> Pid {
    // From 0, so every batch starts at a multiple of its size.
    static NEXT_BATCH: AtomicU64 = AtomicU64::new(0);
    thread_local!(static BATCH: crate::batched::Batch = const { Cell::new((0, 0)) });
    loop {
        // Never 0: the first batch's first number is skipped.
        match crate::batched::next(&NEXT_BATCH, &BATCH, OWNER_SHARDS as u64) {
            0 => continue,
            pid => return pid as Pid,
        }
    }
}

/// The owner shard of a sharded file's record locks that holds `pid`'s:
/// consecutive pids take consecutive shards.
pub fn pid_owner_shard(pid: Pid) -> usize {
    pid.rem_euclid(OWNER_SHARDS as i32) as usize
}

impl InodeLocks {
    /// The lock context of the inode numbered `ino`, made on first use.
    pub(crate) fn context(&self, mgr: &Arc<LockManager>, ino: u64) -> &FileLockContext {
        self.ctx.get_or_init(|| Box::new(FileLockContext::new(Arc::clone(mgr), ino)))
    }

    /// The lock context, if a lock was ever asked for on the inode.
    pub(crate) fn existing(&self) -> Option<&FileLockContext> {
        self.ctx.get().map(|ctx| &**ctx)
    }

    /// The last reference to open file description `file` went: its flock
    /// and OFD locks (if `ofd_locks`, it ever asked for one) and its lease
    /// go (`locks_remove_file`).
    pub(crate) fn file_released(&self, file: FileId, flock_home: &HomeShard, lease_home: &HomeShard, ofd_locks: bool) {
        // A description holding no flock or lease that never asked for an
        // OFD lock has nothing here, and reads nothing.
        if !ofd_locks && !flock_home.is_set() && !lease_home.is_set() {
            return;
        }
        if let Some(ctx) = self.existing() {
            ctx.release_file(file, flock_home, lease_home, ofd_locks);
        }
    }

    /// Process `pid` closed a descriptor of the inode: all its POSIX locks
    /// on it go (`locks_remove_posix`).
    pub(crate) fn posix_close(&self, pid: Pid) {
        if let Some(ctx) = self.existing() {
            ctx.remove_owner(Owner::Pid(pid));
        }
    }

    /// An `open` (for writing if `writable`) breaks conflicting leases and
    /// waits for them to go, up to the lease-break time, unless
    /// `nonblock` (`break_lease`).
    pub(crate) fn break_lease(&self, writable: bool, nonblock: bool) -> VfsResult<()> {
        match self.existing() {
            Some(ctx) => ctx.break_lease(writable, nonblock),
            None => Ok(()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Two processes one thread makes in turn take different record-lock
    /// owner shards, however many pids another thread takes between them
    /// (with one counter for all threads, the two were that many apart and
    /// shared a shard once every 64).
    #[test]
    fn pids_made_in_turn_take_different_owner_shards() {
        let mut seen = std::collections::HashSet::new();
        for others in 0..2 * OWNER_SHARDS {
            let first = new_pid();
            std::thread::scope(|s| {
                s.spawn(|| {
                    for _ in 0..others {
                        new_pid();
                    }
                });
            });
            let second = new_pid();
            assert!(first > 0 && seen.insert(first) && seen.insert(second), "pids are unique and never 0");
            assert_ne!(
                pid_owner_shard(first),
                pid_owner_shard(second),
                "{others} pids taken by another thread between {first} and {second}"
            );
        }
    }
}
