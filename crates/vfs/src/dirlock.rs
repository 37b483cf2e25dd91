//! Directory locking, in three designs: names split by hash, each bucket
//! under its own lock, with listings and dcache hits that take none (sv6's
//! hashed directory; the default); a lock per directory (an `RwSem`, as
//! `i_rwsem` / the per-root `kernfs_rwsem`); or one superblock-wide mutex
//! taken by every directory operation and by every ref-walk step
//! (`kernfs_mutex` before Linux 5.15), over the per-directory locks.
//!
//! Invariant: a name of a directory changes only under its lock (the
//! bucket's, or the directory's held for write). Locks taken together
//! follow one order: directories shallower first (so ancestors first),
//! then in inode number order; within one directory buckets in
//! [`lock_order`](crate::dirents::split::lock_order). A directory locked
//! whole (rmdir's emptiness check, a rename over a directory) comes
//! after its parent's name; a chmod or chown of a directory locks it
//! whole and nothing else.
//!
//! May import `config`, `dentry`, `dirents`, `inode`, `reclaim` and `types`.

use crate::config::DirLocking;
use crate::dentry::{name_hash, Dentry};
use crate::dirents::split::{lock_order, AllBuckets, BucketGuard, SplitEntries};
use crate::dirents::{next_cookie, Children, Design, Entries, Entry};
use crate::inode::{Directory, Inode};
use crate::reclaim::Reclaim;
use crate::types::DirEntry;
use crossbeam_epoch::Guard;
use std::fmt;
use std::sync::Arc;
use vfscale_sync::audited::CountedArc;
use vfscale_sync::rwsem::{RwSem, RwSemReadGuard, RwSemWriteGuard, SpinPolicy};

/// The directory-lock design of a superblock.
pub(crate) enum DirLocks {
    Split,
    PerDirectory,
    /// Shared with the superblock's open directories, which take it for
    /// readdir (only this "before" design counts the references).
    Global(Arc<RwSem<()>>),
}

impl fmt::Debug for DirLocks {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            DirLocks::Split => "DirLocks::Split",
            DirLocks::PerDirectory => "DirLocks::PerDirectory",
            DirLocks::Global(_) => "DirLocks::Global",
        })
    }
}

/// One name of a directory held: its bucket, or the whole directory.
pub(crate) struct NameLock<'a> {
    held: Held<'a>,
    _global: Option<RwSemWriteGuard<'a, ()>>,
}

enum Held<'a> {
    Directory(RwSemWriteGuard<'a, Children>, &'a Directory),
    Bucket(BucketGuard, &'a SplitEntries),
}

/// A directory held whole: for rmdir, a rename over a directory, and a
/// chmod or chown of one.
pub(crate) enum WholeDir<'a> {
    Directory(RwSemWriteGuard<'a, Children>),
    Buckets(AllBuckets<'a>),
}

impl<'a> WholeDir<'a> {
    /// Locks all of `dir`: every name of it (its rwsem for write, or all
    /// its buckets in lock order). A caller that holds a name of `dir`'s
    /// parent too took that first (ancestors first).
    pub fn lock(dir: &'a Directory) -> WholeDir<'a> {
        match &dir.entries {
            Entries::Locked(children) => WholeDir::Directory(children.write()),
            Entries::Split(entries) => WholeDir::Buckets(entries.lock_all()),
        }
    }

    pub fn is_empty(&self) -> bool {
        match self {
            WholeDir::Directory(children) => children.is_empty(),
            WholeDir::Buckets(buckets) => buckets.is_empty(),
        }
    }
}

/// The two names of a rename held: one lock when they share it.
pub(crate) struct RenameLocks<'a> {
    first: NameLock<'a>,
    second: Option<NameLock<'a>>,
    /// Whether the old name's lock is `second`.
    old_second: bool,
    _global: Option<RwSemWriteGuard<'a, ()>>,
}

impl<'a> RenameLocks<'a> {
    /// The lock of the old name.
    pub fn old_name(&mut self) -> &mut NameLock<'a> {
        match (&mut self.second, self.old_second) {
            (Some(second), true) => second,
            _ => &mut self.first,
        }
    }

    /// The lock of the new name.
    pub fn new_name(&mut self) -> &mut NameLock<'a> {
        match (&mut self.second, self.old_second) {
            (Some(second), false) => second,
            _ => &mut self.first,
        }
    }
}

/// A directory held for a filesystem's lookup or a listing: its rwsem for
/// reading, nothing in the split design (the filesystem has its own).
pub(crate) struct DirReadGuard<'a> {
    _children: Option<RwSemReadGuard<'a, Children>>,
    _global: Option<RwSemWriteGuard<'a, ()>>,
}

impl NameLock<'_> {
    pub fn get(&self, name: &[u8]) -> Option<&Arc<Dentry>> {
        match &self.held {
            Held::Directory(children, _) => children.get(name),
            Held::Bucket(bucket, _) => bucket.get(name, name_hash(name)),
        }
    }

    pub fn contains(&self, name: &[u8]) -> bool {
        self.get(name).is_some()
    }

    /// Adds the new name of `dentry`, with a new cookie.
    pub fn insert(&mut self, dentry: Arc<Dentry>, reclaim: &Reclaim) {
        let hash = name_hash(&dentry.name);
        let entry = Entry { cookie: next_cookie(), dentry };
        match &mut self.held {
            Held::Directory(children, _) => {
                children.insert(entry);
            }
            Held::Bucket(bucket, entries) => bucket.insert(entries, entry, hash, reclaim),
        }
    }

    /// Puts `dentry` in the place (and listing cookie) of the entry of its
    /// name, which it returns, or adds it if there is none.
    pub fn insert_or_replace(&mut self, dentry: Arc<Dentry>, reclaim: &Reclaim) -> Option<Arc<Dentry>> {
        let hash = name_hash(&dentry.name);
        let entry = Entry { cookie: next_cookie(), dentry };
        match &mut self.held {
            Held::Directory(children, _) => children.insert(entry).map(|old| old.dentry),
            Held::Bucket(bucket, entries) => {
                if bucket.get(&entry.dentry.name, hash).is_some() {
                    bucket.replace(entry, hash, reclaim).map(|old| old.dentry)
                } else {
                    bucket.insert(entries, entry, hash, reclaim);
                    None
                }
            }
        }
    }

    pub fn remove(&mut self, name: &[u8], reclaim: &Reclaim) -> Option<Arc<Dentry>> {
        let removed = match &mut self.held {
            Held::Directory(children, _) => children.remove(name),
            Held::Bucket(bucket, _) => bucket.remove(name, name_hash(name), reclaim),
        };
        removed.map(|entry| entry.dentry)
    }

    /// Whether this lock also holds `name` of `dir`.
    fn covers(&self, dir: &Directory, name: &[u8]) -> bool {
        match &self.held {
            Held::Directory(_, held) => std::ptr::eq(*held, dir),
            Held::Bucket(bucket, entries) => {
                matches!(&dir.entries, Entries::Split(e) if std::ptr::eq(*entries, e)) && bucket.covers(name_hash(name))
            }
        }
    }
}

impl DirLocks {
    pub fn new(design: DirLocking) -> DirLocks {
        match design {
            DirLocking::Split => DirLocks::Split,
            DirLocking::RwSem => DirLocks::PerDirectory,
            DirLocking::GlobalMutex => DirLocks::Global(Arc::new(RwSem::new((), SpinPolicy::Block))),
        }
    }

    /// The design of the superblock's directories' entries.
    pub fn dirents(&self) -> Design {
        match self {
            DirLocks::Split => Design::Split,
            DirLocks::PerDirectory | DirLocks::Global(_) => Design::Locked,
        }
    }

    /// What an open directory keeps to lock itself for readdir as every
    /// other reader of its entries does.
    pub fn for_open_directory(&self) -> DirLocks {
        match self {
            DirLocks::Split => DirLocks::Split,
            DirLocks::PerDirectory => DirLocks::PerDirectory,
            DirLocks::Global(mutex) => DirLocks::Global(Arc::clone(mutex)),
        }
    }

    /// The global mutex in the "before" design, none per directory: what
    /// every directory operation takes first, and all a ref-walk step
    /// takes around revalidation and permission.
    pub fn global(&self) -> Option<RwSemWriteGuard<'_, ()>> {
        match self {
            DirLocks::Split | DirLocks::PerDirectory => None,
            DirLocks::Global(mutex) => Some(mutex.write()),
        }
    }

    /// Holds `dir` for a filesystem's own lookup in it.
    pub fn read<'a>(&'a self, dir: &'a Directory) -> DirReadGuard<'a> {
        let global = self.global();
        let children = match &dir.entries {
            Entries::Locked(children) => Some(children.read()),
            Entries::Split(_) => None,
        };
        DirReadGuard { _children: children, _global: global }
    }

    /// Locks `name` of `dir` for a change.
    pub fn lock_name<'a>(&'a self, dir: &'a Directory, name: &[u8]) -> NameLock<'a> {
        let global = self.global();
        NameLock { _global: global, ..lock_one(dir, name) }
    }

    /// Locks the two names of a rename; `new_first` puts the new name's
    /// directory first (the caller orders two directories, ancestors
    /// first); in one directory the order is the design's own.
    pub fn lock_rename<'a>(
        &'a self,
        old: (&'a Directory, &[u8]),
        new: (&'a Directory, &[u8]),
        new_first: bool,
    ) -> RenameLocks<'a> {
        let global = self.global();
        let old_first = match &old.0.entries {
            Entries::Split(_) if std::ptr::eq(old.0, new.0) => {
                lock_order(name_hash(old.1)) <= lock_order(name_hash(new.1))
            }
            _ => !new_first,
        };
        let (a, b) = if old_first { (old, new) } else { (new, old) };
        let first = lock_one(a.0, a.1);
        let second = (!first.covers(b.0, b.1)).then(|| lock_one(b.0, b.1));
        RenameLocks { first, second, old_second: !old_first, _global: global }
    }

    /// The inode `name` of `dir` names, if any, counted.
    pub fn lookup(&self, dir: &Directory, name: &[u8]) -> Option<CountedArc<Inode>> {
        // A closure, not `CountedArc::new` as a value: the audit places the
        // count's write at its caller.
        #[allow(clippy::redundant_closure)]
        self.with_entry(dir, name, |dentry| dentry.inode.as_ref().map(|inode| CountedArc::new(inode)))
    }

    /// Runs `f` with the entry `name` of `dir` (if any) under the name's
    /// lock (its bucket's, or the directory's for reading): what a walk
    /// that missed the dcache believes, so a rename, which holds both its
    /// names' locks while it moves one, is seen whole or not at all.
    pub fn with_name_locked<R>(&self, dir: &Directory, name: &[u8], f: impl FnOnce(Option<&Arc<Dentry>>) -> R) -> R {
        match &dir.entries {
            Entries::Locked(children) => {
                let _global = self.global();
                f(children.read().get(name))
            }
            Entries::Split(entries) => f(entries.lock(name_hash(name)).get(name, name_hash(name))),
        }
    }

    /// Whether `name` of `dir` names a directory (a peek, taking no count:
    /// a rename decides with it which rename lock to try).
    pub fn names_directory(&self, dir: &Directory, name: &[u8]) -> bool {
        self.with_entry(dir, name, |dentry| dentry.inode.as_ref().filter(|inode| inode.is_dir()).map(|_| ())).is_some()
    }

    /// `dir`'s entry `name`, if it has one, where the design can tell
    /// without a lock: the split design's look-up takes none, and what it
    /// finds (or misses) was so at a moment of the call. None in the
    /// locked designs, which decide under the lock as Linux does. A
    /// change of a name updates the entries before the dcache, so a
    /// caller that answers for the name as a whole reads the dcache first
    /// (`namespace::presence`, rcu-walk's miss). `hash` is the name's
    /// `name_hash`; `guard` is pinned.
    pub fn peek<'g>(
        &self,
        dir: &Directory,
        name: &[u8],
        hash: u64,
        guard: &'g Guard,
    ) -> Option<Option<&'g Arc<Dentry>>> {
        debug_assert_eq!(hash, name_hash(name), "a name's hash");
        match &dir.entries {
            Entries::Locked(_) => None,
            Entries::Split(entries) => Some(entries.get(name, hash, guard)),
        }
    }

    /// Whether `dir` has an entry `name`, taking no count on it.
    pub fn contains(&self, dir: &Directory, name: &[u8]) -> bool {
        self.with_entry(dir, name, |_| Some(())).is_some()
    }

    fn with_entry<R>(&self, dir: &Directory, name: &[u8], f: impl FnOnce(&Arc<Dentry>) -> Option<R>) -> Option<R> {
        match &dir.entries {
            Entries::Locked(children) => {
                let _global = self.global();
                children.read().get(name).and_then(f)
            }
            Entries::Split(entries) => {
                let guard = crossbeam_epoch::pin();
                entries.get(name, name_hash(name), &guard).and_then(f)
            }
        }
    }

    /// Every entry of `dir`, in name order (for the searches of
    /// `mountinfo`, not for a hot path).
    pub fn all_entries(&self, dir: &Directory) -> Vec<Arc<Dentry>> {
        let mut all = Vec::new();
        self.each_after(dir, 0, usize::MAX, |_, dentry| all.push(Arc::clone(dentry)));
        all.sort_by(|a, b| a.name.cmp(&b.name));
        all
    }

    /// Up to `max` entries of `dir` past the cookie `after`, in cookie
    /// order, each with its cookie; the split design locks and writes
    /// nothing.
    pub fn list_after(&self, dir: &Directory, after: u64, max: usize) -> Vec<(u64, DirEntry)> {
        let mut listed = Vec::new();
        self.each_after(dir, after, max, |cookie, dentry| {
            let inode = dentry.inode.as_ref().expect("entries are positive");
            listed.push((
                cookie,
                DirEntry { name: dentry.name.to_vec(), ino: inode.ino(), file_type: inode.file_type() },
            ));
        });
        listed
    }

    /// Calls `f` with each of up to `max` entries of `dir` past the cookie
    /// `after`, in cookie order, under the design's read of the directory.
    fn each_after(&self, dir: &Directory, after: u64, max: usize, mut f: impl FnMut(u64, &Arc<Dentry>)) {
        match &dir.entries {
            Entries::Locked(children) => {
                let _global = self.global();
                children.read().after(after, max).for_each(|(cookie, dentry)| f(cookie, dentry));
            }
            Entries::Split(entries) => {
                let guard = crossbeam_epoch::pin();
                entries.after(after, max, &guard).into_iter().for_each(|e| f(e.cookie, &e.dentry));
            }
        }
    }
}

/// Locks `name` of `dir`, without the global mutex.
fn lock_one<'a>(dir: &'a Directory, name: &[u8]) -> NameLock<'a> {
    let held = match &dir.entries {
        Entries::Locked(children) => Held::Directory(children.write(), dir),
        Entries::Split(entries) => Held::Bucket(entries.lock(name_hash(name)), entries),
    };
    NameLock { held, _global: None }
}
