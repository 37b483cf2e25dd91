//! The superblock: one instance of a filesystem — its root, dentry cache,
//! inode list, locks, design variants, and the [`Filesystem`] whose hooks
//! the VFS calls.
//!
//! Invariant: every positive dentry of an in-memory tree in the dcache is
//! also in its parent's entries (and the reverse), both changed together
//! under the name's lock (`dirlock`: its bucket's, or its directory's for
//! write); `rename_seq` is odd while a rename moves a directory from one
//! directory to another, so no walk that climbs (`..`) and overlapped one
//! is believed (any other rename is ordered by the locks of its two names
//! alone, and changes no parent a walk could see; a walk that does not
//! climb follows no parent link, and reads no rename count).
//!
//! May import the base modules, the node types, `fs` and `dirlock`.

use crate::config::{InodeListKind, VfsConfig, WalkMode};
use crate::dcache::Dcache;
use crate::dentry::Dentry;
use crate::dirlock::DirLocks;
use crate::fs::{Filesystem, Guard, Instance, Revalidate};
use crate::inode::{Inode, InodeRegistry, NewInode};
use crate::reclaim::Reclaim;
use crate::types::FileType;
use std::fmt;
use std::sync::{Arc, Weak};
use vfscale_sync::dlock_list::{ConcurrentList, GlobalList, PerCpuList};
use vfscale_sync::percpu_rwsem::PerCpuRwSem;
use vfscale_sync::seqcount::SeqCount;
use vfscale_sync::spin::TasLock;

pub(crate) struct SuperBlock {
    pub config: VfsConfig,
    pub dcache: Dcache,
    pub inodes: Arc<InodeRegistry>,
    pub root: Arc<Inode>,
    /// Odd while a rename moves a directory from one directory to another
    /// (Linux `rename_lock`'s seqcount, which Linux takes for every
    /// rename).
    pub rename_seq: SeqCount,
    /// Held for writing by a move of a directory between directories
    /// (Linux `s_vfs_rename_mutex`), for reading by a move of anything
    /// else between directories and by ref-walks that keep losing to
    /// moves: per-CPU, so moves of files share no line.
    pub rename_lock: PerCpuRwSem<()>,
    pub dir_locks: DirLocks,
    /// The filesystem's hooks.
    pub fs: Arc<dyn Filesystem>,
    /// Whether the tree lives in the dcache alone
    /// ([`Filesystem::names_in_dcache`]), read once: a walk step then
    /// calls no hook.
    pub native: bool,
    /// [`Filesystem::read_only`], read once.
    pub read_only: bool,
    /// Counts what waits in the epoch to be freed.
    pub reclaim: Arc<Reclaim>,
    dev: u64,
}

impl fmt::Debug for SuperBlock {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SuperBlock")
            .field("config", &self.config)
            .field("root", &self.root.ino())
            .field("inodes", &self.inodes.len())
            .finish_non_exhaustive()
    }
}

impl SuperBlock {
    /// Takes `delta` bytes of inode space (gives them back if negative):
    /// what extended attributes cost.
    pub fn charge_ispace(&self, delta: i64) -> crate::errno::VfsResult<()> {
        let space = &self.inodes.space;
        match u64::try_from(delta) {
            Ok(bytes) => space.take_ispace(bytes),
            Err(_) => {
                space.give_ispace(delta.unsigned_abs());
                Ok(())
            }
        }
    }

    /// A superblock whose hooks `make_fs` makes, given the instance (the
    /// inode registry, to make inodes, and the root directory).
    pub fn with_filesystem(config: VfsConfig, make_fs: impl FnOnce(&Instance) -> Arc<dyn Filesystem>) -> SuperBlock {
        crate::dentry::fix_name_hash_key();
        // Test-and-set heads: in userspace a lock holder can be preempted,
        // and a FIFO (ticket) lock then makes every later waiter wait for
        // it and for each other in turn.
        let list: Box<dyn ConcurrentList<Weak<Inode>>> = match config.inode_list {
            InodeListKind::PerCpu => Box::new(PerCpuList::<Weak<Inode>, TasLock>::new()),
            InodeListKind::Global => Box::new(GlobalList::<Weak<Inode>, TasLock>::new()),
        };
        let dir_locks = DirLocks::new(config.dir_locking);
        let space = Arc::new(crate::space::Space::new(config.size_limit, config.inode_limit));
        let reclaim = Arc::new(Reclaim::default());
        let inodes = InodeRegistry::new(list, space, dir_locks.dirents(), config.file_writes, Arc::clone(&reclaim));
        let root = Inode::new(&inodes, NewInode::of(FileType::Directory, 0o755));
        let fs = make_fs(&Instance::new(Arc::clone(&inodes), Arc::clone(&root)));
        let native = fs.names_in_dcache();
        let read_only = fs.read_only();
        SuperBlock {
            dcache: Dcache::new(config.dcache_buckets, config.max_negative_dentries, Arc::clone(&reclaim)),
            reclaim,
            inodes,
            root,
            rename_seq: SeqCount::new(),
            rename_lock: PerCpuRwSem::new(()),
            dir_locks,
            fs,
            native,
            read_only,
            config,
            dev: next_dev(),
        }
    }

    /// The device number of the instance (`mountinfo`'s `major:minor`): an
    /// anonymous one, major 0, as tmpfs, sysfs and proc get.
    pub fn dev(&self) -> u64 {
        self.dev
    }

    /// The filesystem type `mountinfo` shows.
    pub fn fs_type(&self) -> &'static str {
        self.fs.fs_type()
    }

    /// `->d_revalidate` of a cached dentry found in `dir`: the
    /// filesystem's answer, or for a tree in the dcache valid. That dcache
    /// is authoritative, negatives included, as Linux's is for tmpfs: a
    /// negative is cached only under the directory's lock after the name
    /// was not found, and whatever later gives the name an inode (create,
    /// link, mkdir, rename) replaces that dentry in the hash under the
    /// directory's write lock. So no directory revision is read, and a
    /// create in a directory writes nothing a look-up of another name in it
    /// reads, a miss included.
    /// `guard` is the rcu-walk's own; `None` in ref-walk.
    pub fn revalidate(&self, dir: &Inode, dentry: &Dentry, rcu: Option<&Guard>) -> Revalidate {
        if dir.dir().is_err() {
            return Revalidate::Invalid;
        }
        if self.native {
            return Revalidate::Valid;
        }
        match (&dentry.inode, rcu) {
            (Some(inode), Some(guard)) => self.fs.revalidate_rcu(dir, &dentry.name, inode, guard),
            (Some(inode), None) => Revalidate::decided(self.fs.revalidate(dir, &dentry.name, inode)),
            (None, Some(_)) => self.fs.revalidate_negative_rcu(dir, dentry.neg_rev),
            (None, None) => Revalidate::decided(self.fs.revalidate_negative(dir, dentry.neg_rev)),
        }
    }

    /// Search permission on `dir` for an rcu-walk step; `None` when it
    /// cannot be decided there.
    #[inline]
    pub fn may_search_rcu(&self, dir: &Inode, cred: &crate::Credentials) -> Option<crate::VfsResult<()>> {
        if self.native {
            return Some(dir.may_search(cred));
        }
        self.fs.permission_rcu(dir, cred, crate::cred::Access::EXEC)
    }

    /// Search permission on `dir` for a ref-walk step.
    pub fn may_search(&self, dir: &Inode, cred: &crate::Credentials) -> crate::VfsResult<()> {
        self.permission(dir, cred, crate::cred::Access::EXEC)
    }

    /// `->permission` for `mask`, as ref-walk asks it: decided.
    pub fn permission(
        &self,
        inode: &Inode,
        cred: &crate::Credentials,
        mask: crate::cred::Access,
    ) -> crate::VfsResult<()> {
        if self.native {
            return inode.permission_fast(cred, mask);
        }
        self.fs.permission(inode, cred, mask)
    }

    pub fn rcu_walk_enabled(&self) -> bool {
        self.config.walk == WalkMode::Rcu
    }

    /// Records that `name` is missing from `dir`, when negatives are cached.
    /// The caller holds `dir`'s lock (for reading at least) and saw no child.
    pub fn cache_negative(&self, dir: &Inode, name: &[u8]) {
        if !self.fs.caches_negatives() {
            return;
        }
        let Ok(directory) = dir.dir() else { return };
        let guard = crossbeam_epoch::pin();
        if let Some(existing) = self.dcache.lookup(dir.ino(), name, &guard) {
            let valid = || self.revalidate(dir, existing, None) == Revalidate::Valid;
            if existing.inode.is_none() && !existing.is_unhashed() && valid() {
                return;
            }
        }
        self.dcache.insert(Dentry::new(dir.ino(), name, None, directory.rev()), &guard);
    }
}

impl Drop for SuperBlock {
    /// The end of the instance (Linux's `shrink_dcache_for_umount`). Every
    /// directory's `..` counts a reference on its parent, whose entries
    /// hold it: the tree is a cycle, broken here by taking each directory's
    /// link to its parent, so that the root goes with this superblock and
    /// takes the tree with it. Inodes held from outside stop being kept by
    /// per-CPU references and go when the last holder lets go.
    fn drop(&mut self) {
        let mut parents = Vec::new();
        self.inodes.for_each(&mut |inode| {
            inode.opens.kill();
            if let Ok(dir) = inode.dir() {
                // SAFETY: every reader of a parent link runs through a mount
                // or a file of this superblock, or is handed it, and it is
                // being dropped (see `Directory::take_parent`).
                parents.extend(unsafe { dir.take_parent() });
            }
        });
        self.inodes.retire();
        drop(parents);
    }
}

/// A new anonymous device number (Linux `get_anon_bdev`), minor from 100
/// so as not to look like the host's first ones.
fn next_dev() -> u64 {
    static NEXT: vfscale_sync::audited::AtomicU32 = vfscale_sync::audited::AtomicU32::new(100);
    libc::makedev(0, NEXT.fetch_add(1, vfscale_sync::audited::Ordering::Relaxed))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::{Duration, Instant};

    /// Runs deferred releases until `gone` holds, for at most `limit`.
    fn until(limit: Duration, gone: impl Fn() -> bool) -> bool {
        let deadline = Instant::now() + limit;
        while !gone() && Instant::now() < deadline {
            crossbeam_epoch::pin().flush();
            std::thread::yield_now();
        }
        gone()
    }

    #[test]
    fn the_inode_registry_outlives_the_superblock_until_its_last_inode() {
        let config = VfsConfig::default();
        let sb = SuperBlock::with_filesystem(config, |_| Arc::new(crate::fs::memfs::Memfs::new(&config)));
        let registry = Arc::downgrade(&sb.inodes);
        let survivor = Inode::new(&sb.inodes, NewInode::of(FileType::Regular, 0o644));
        drop(sb);
        // Nothing may free the registry here, so a short look can only
        // miss a bug, never report a false one.
        assert!(!until(Duration::from_secs(1), || registry.strong_count() == 0), "freed under a live inode");
        drop(survivor);
        // A hang guard: other tests' threads may hold the epoch back a
        // while on a busy machine, but not for a minute.
        assert!(until(Duration::from_secs(60), || registry.strong_count() == 0), "the registry was never freed");
    }
}
