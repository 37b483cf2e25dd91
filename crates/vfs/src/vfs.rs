//! [`Vfs`], the handle of one filesystem instance: its superblock and the
//! file-lock state its inodes share, with the calls that concern the whole
//! instance (`statfs`, `drop_caches`, the release barrier).
//!
//! May import the base modules, the node types, `fs`, `superblock`,
//! `mount` and `locks`; not the system-call layer or `process` (a process is made
//! from a `Vfs`, in the `process` module), nor any filesystem (the in-memory
//! one's constructor, [`Vfs::new`], is in `fs::memfs`).

use crate::config::VfsConfig;
use crate::fs::{Filesystem, Instance};
use crate::mount::{InternalMount, MountFlags, MountRef};
use crate::superblock::SuperBlock;
use crate::types::FileType;
use crate::{inode, locks, pages};
use std::sync::Arc;

/// One filesystem instance. Cloning is cheap and shares the instance.
#[derive(Debug, Clone)]
pub struct Vfs {
    pub(crate) sb: Arc<SuperBlock>,
    pub(crate) locks: Arc<locks::LockManager>,
    /// The instance by itself, outside any namespace.
    pub(crate) mount: Arc<InternalMount>,
}

/// Space and object counts, like `statfs(2)` plus dcache figures.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FsStats {
    /// Live inodes (on the superblock's inode list).
    pub inodes: usize,
    /// Bytes held by regular files.
    pub bytes: u64,
    /// Dentries in the dcache, positive and negative.
    pub dentries: usize,
    /// Negative dentries in the dcache.
    pub negative_dentries: usize,
    /// The unit of the block counts (`f_bsize`): a page.
    pub block_size: u64,
    /// The size limit in blocks (`f_blocks`); 0 without one, as tmpfs
    /// reports `size=0`.
    pub blocks: u64,
    /// Blocks left under the limit (`f_bfree`, `f_bavail`); 0 without one.
    pub blocks_free: u64,
    /// Blocks of file data allocated.
    pub blocks_used: u64,
    /// The inode limit (`f_files`); 0 without one.
    pub files: u64,
    /// Inodes left under it (`f_ffree`); 0 without one.
    pub files_free: u64,
    /// The flags of the mount asked about (`f_flags`); none for the
    /// instance itself.
    pub flags: MountFlags,
}

impl Vfs {
    fn of(sb: SuperBlock) -> Vfs {
        let sb = Arc::new(sb);
        let locks = Arc::new(locks::LockManager::new(sb.config.lock_list, sb.config.record_locks));
        let mount = MountRef::new(Arc::clone(&sb), Arc::clone(&locks), Arc::clone(&sb.root), MountFlags::NONE);
        Vfs { sb, locks, mount: Arc::new(InternalMount(mount)) }
    }

    /// A new mount of this instance's whole tree, for
    /// [`Context::mount`](crate::Context::mount).
    pub(crate) fn new_mount(&self, flags: MountFlags) -> MountRef {
        MountRef::new(Arc::clone(&self.sb), Arc::clone(&self.locks), Arc::clone(&self.sb.root), flags)
    }

    /// The mount of this instance by itself, outside any namespace: where
    /// a [`Context`](crate::Context) made from it walks.
    pub fn own_mount(&self) -> &MountRef {
        &self.mount.0
    }

    /// An instance of the filesystem `make_fs` makes: it is handed the
    /// [`Instance`] (the root directory, owned by root with mode 0755, and
    /// the means to make inodes) and returns the hooks the VFS calls. See
    /// [`crate::fs`] for how to write one.
    pub fn with_filesystem(config: VfsConfig, make_fs: impl FnOnce(&Instance) -> Arc<dyn Filesystem>) -> Vfs {
        Vfs::of(SuperBlock::with_filesystem(config, make_fs))
    }

    /// The filesystem whose hooks the instance calls.
    pub fn filesystem(&self) -> &Arc<dyn Filesystem> {
        &self.sb.fs
    }

    /// The design variants and limits it was built with.
    pub fn config(&self) -> &VfsConfig {
        &self.sb.config
    }

    /// The file-lock state shared by all inodes: the system-wide lock list
    /// (`/proc/locks`), the wait-for graph and the lease-break time.
    pub fn locks(&self) -> &Arc<locks::LockManager> {
        &self.locks
    }

    /// The root directory's inode.
    pub fn root(&self) -> &Arc<inode::Inode> {
        &self.sb.root
    }

    /// Like `echo 2 > /proc/sys/vm/drop_caches`: evicts every unused
    /// negative dentry, then runs the [release
    /// barrier](Self::release_barrier), so inodes and dentries nothing
    /// uses any more are freed. Returns false if that took longer than
    /// `timeout` (a thread stayed pinned throughout).
    pub fn drop_caches(&self, timeout: std::time::Duration) -> bool {
        self.sb.dcache.evict_unused_negatives();
        self.release_barrier(timeout)
    }

    /// The release barrier (like `rcu_barrier`) of this instance: waits up
    /// to `timeout` (0: not at all) until every release it deferred for
    /// rcu-walkers so far has run, after handing this thread's pending
    /// ones on, so that others can run them; returns whether all ran. A
    /// front end that serves requests on long-lived threads calls it with 0
    /// after an unlink, rmdir or rename, so the space of what it removed
    /// comes back without waiting for more deferred releases on that
    /// thread (the epoch collects them in batches). The crate-level
    /// [`release_barrier`](crate::release_barrier) does the same for every
    /// instance at once.
    pub fn release_barrier(&self, timeout: std::time::Duration) -> bool {
        self.sb.reclaim.barrier(timeout)
    }

    /// Counts inodes and bytes by iterating the superblock's inode list
    /// (one list head locked at a time), and the dcache.
    pub fn statfs(&self) -> FsStats {
        statfs_of(&self.sb)
    }
}

/// [`Vfs::statfs`] of the instance `sb`.
pub(crate) fn statfs_of(sb: &SuperBlock) -> FsStats {
    {
        let mut inodes = 0;
        let mut bytes = 0;
        sb.inodes.for_each(&mut |inode| {
            inodes += 1;
            if inode.file_type() == FileType::Regular {
                bytes += inode.stat().size;
            }
        });
        let usage = sb.inodes.space.usage();
        FsStats {
            inodes,
            bytes,
            dentries: sb.dcache.len(),
            negative_dentries: sb.dcache.negative_count(),
            block_size: pages::PAGE_SIZE,
            blocks: usage.max_pages,
            blocks_free: usage.max_pages.saturating_sub(usage.used_pages),
            blocks_used: usage.used_pages,
            files: usage.max_inodes,
            files_free: usage.free_inodes,
            flags: MountFlags::NONE,
        }
    }
}
