//! The design variants of the VFS, chosen once when a [`crate::Vfs`] is
//! built. Each "before" design of the seeds is a real, selectable variant;
//! each field is consulted in exactly one place of the code.
//!
//! May import `pages`.

/// How path walks resolve components: rcu-walk first, or ref-walk only.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum WalkMode {
    /// rcu-walk first: no lock taken, no reference count changed; falls back
    /// to ref-walk when it cannot finish.
    Rcu,
    /// ref-walk only: every component takes a `LockRef` reference on its
    /// dentry (the pre-RCU-walk VFS, and kernfs/procfs before the seeds).
    RefOnly,
}

/// How directory operations are serialized (seed 000).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum DirLocking {
    /// Names split by hash into buckets, each with its own lock on its own
    /// line; listings and dcache hits take no lock, and a split directory's
    /// link count and times change per CPU, folded at `stat` (sv6's and
    /// ScaleFS's hashed directory): changes of different names in one
    /// directory share no line.
    Split,
    /// One `RwSem` per directory: changes take it for write, slow lookups
    /// for read (kernfs after 5.15, and the ordinary VFS `i_rwsem`).
    RwSem,
    /// One superblock-wide mutex taken by every directory operation and by
    /// every ref-walk step, the way `kernfs_mutex` was taken by
    /// `->d_revalidate()` and `->permission()` before 5.15.
    GlobalMutex,
}

/// Whether failed lookups are remembered (seed 000).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum NegativeDentries {
    /// A miss leaves a negative dentry: it answers ENOENT until the name
    /// is created (which replaces it) or, in a generator's tree, until the
    /// directory's revision moves. A tree of the VFS's own memory whose
    /// directories split their names ([`DirLocking::Split`]) needs none:
    /// its entries, read without a lock, answer a miss in rcu-walk.
    Cached,
    /// Every miss goes to the slow lookup under the directory lock.
    Uncached,
}

/// Which list the superblock keeps its inodes on (seed 001).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum InodeListKind {
    /// `vfscale_sync::PerCpuList`: one lock and list per CPU.
    PerCpu,
    /// `vfscale_sync::GlobalList`: one lock, one list (`s_inode_list_lock`).
    Global,
}

/// Which system-wide file-lock list (`file_lock_list`, for `/proc/locks`)
/// and which lock over the wait-for graph (seed 004).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum LockListKind {
    /// Per-CPU lists whose inserts and deletes take a per-CPU rwsem for
    /// read and `/proc/locks` takes it for write (Linux 4.9+).
    PerCpuRwSem,
    /// Per-CPU lists under an lglock of test-and-set spinlocks (3.13-4.8).
    LgLockTas,
    /// Per-CPU lists under an lglock of queued (MCS) spinlocks.
    LgLockQueued,
    /// One global lock over the list, the wait-for graph and every
    /// per-inode lock list (`file_lock_lock` before 3.13).
    GlobalLock,
}

/// How one file's POSIX and OFD record locks are kept.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum RecordLocks {
    /// Striped by byte offset: a file's record locks stay one list under
    /// one lock until locks fitting in one stripe have been taken in two
    /// stripes; from then on a lock within one stripe lives in that
    /// stripe's slot (one of 64, each its own spinlock on its own line,
    /// made on first use; stripes `k` and `k + 64` share a slot) and a lock
    /// across stripes in a separate wide lane, so owners locking disjoint,
    /// non-touching ranges in different slots share no written line.
    /// Adjacent ranges of one owner merge, as in Linux, so they are never
    /// conflict-free. `stripe_shift` is log2 of the stripe size in bytes
    /// (12: 4 KiB; tests use 0-2 so small ranges cross stripes).
    Striped {
        /// log2 of the stripe size in bytes, at most 62.
        stripe_shift: u8,
    },
    /// One list under one spinlock per file, each owner's locks together
    /// (Linux's `flc_posix` under `flc_lock`).
    List,
}

impl RecordLocks {
    /// Striped by 4 KiB.
    pub const STRIPED: RecordLocks = RecordLocks::Striped { stripe_shift: 12 };
}

/// How writes to a regular file's data are serialized.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum FileWrites {
    /// A write within the size to pages written before locks only those
    /// pages (each page's sequence count is its lock) and stamps the
    /// file's times on the calling CPU's record, as an `fallocate` of a
    /// range reserved already does: writes to different pages of one file
    /// share no line. A write that moves the end or adds a page, a
    /// truncate and every other `fallocate` take the file's writer lock.
    InPlace,
    /// Every write and `fallocate` takes the file's writer lock and stamps
    /// the times in the inode's attribute cell (Linux's `i_rwsem`, which
    /// tmpfs's writes take).
    Locked,
}

/// Every design choice and limit of a VFS instance.
///
/// ```
/// use vfscale::config::{VfsConfig, WalkMode};
///
/// let before = VfsConfig { walk: WalkMode::RefOnly, ..VfsConfig::default() };
/// assert_ne!(before, VfsConfig::default());
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct VfsConfig {
    /// Path walk mode.
    pub walk: WalkMode,
    /// Directory lock design.
    pub dir_locking: DirLocking,
    /// Negative dentry caching.
    pub negative_dentries: NegativeDentries,
    /// Inode list design.
    pub inode_list: InodeListKind,
    /// Most negative dentries kept; the oldest are dropped beyond it.
    pub max_negative_dentries: usize,
    /// Size of the dentry hash table, in eighths of a line: the table is
    /// this many over 8 lines (rounded up to a power of two), each of seven
    /// chain heads and their lock. It does not grow, so chains lengthen
    /// with the dentries it holds: 2^18 by default (2 MiB, 229,376 chains)
    /// keeps them short up to a few hundred thousand names, as Linux sizes
    /// its hash by memory at boot.
    pub dcache_buckets: usize,
    /// Largest regular file, in bytes; writes beyond it fail with EFBIG.
    /// Linux's `MAX_LFS_FILESIZE` by default, as on tmpfs.
    pub max_file_size: u64,
    /// File-lock list design.
    pub lock_list: LockListKind,
    /// How a file's record locks are kept.
    pub record_locks: RecordLocks,
    /// How writes to a file's data are serialized.
    pub file_writes: FileWrites,
    /// Most bytes of file data (rounded up to pages), as tmpfs's `size=`;
    /// past it writes and `fallocate` fail with ENOSPC. 0: no limit.
    pub size_limit: u64,
    /// Most inodes, as tmpfs's `nr_inodes=`; past it creating fails with
    /// ENOSPC. Extended attributes take from the same space (see
    /// [`crate::space`]). 0: no limit.
    pub inode_limit: u64,
}

impl VfsConfig {
    /// Every "before" design at once: ref-walk only, one global directory
    /// mutex, no negative dentries, one global inode list, one global
    /// file-lock lock, one record-lock list per file and every write under
    /// its file's lock.
    pub fn before() -> VfsConfig {
        VfsConfig {
            walk: WalkMode::RefOnly,
            dir_locking: DirLocking::GlobalMutex,
            negative_dentries: NegativeDentries::Uncached,
            inode_list: InodeListKind::Global,
            lock_list: LockListKind::GlobalLock,
            record_locks: RecordLocks::List,
            file_writes: FileWrites::Locked,
            ..VfsConfig::default()
        }
    }
}

impl Default for VfsConfig {
    /// The scalable design: RCU walk, split directories, cached negative
    /// dentries, per-CPU inode list, record locks striped by 4 KiB, writes
    /// in place.
    fn default() -> Self {
        Self {
            walk: WalkMode::Rcu,
            dir_locking: DirLocking::Split,
            negative_dentries: NegativeDentries::Cached,
            inode_list: InodeListKind::PerCpu,
            max_negative_dentries: 64 * 1024,
            dcache_buckets: 1 << 18,
            max_file_size: crate::pages::MAX_LFS_FILESIZE,
            lock_list: LockListKind::PerCpuRwSem,
            record_locks: RecordLocks::STRIPED,
            file_writes: FileWrites::InPlace,
            size_limit: 0,
            inode_limit: 0,
        }
    }
}
