//! # vfscale
//!
//! An in-memory virtual filesystem with Linux semantics, built to show how
//! the kernel's VFS read path scales: path walks run in rcu-walk mode (no
//! lock, no reference count, no shared write) and fall back to ref-walk;
//! missing names are cached as negative dentries (validated by directory
//! revisions in kernfs trees, which change behind the dcache); the
//! superblock's inode list is a per-CPU list. Each of those designs has its
//! "before" variant, selected in [`VfsConfig`].
//!
//! ```
//! use vfscale::{Credentials, Errno, OpenFlags, Vfs};
//!
//! let vfs = Vfs::default();
//! let root = vfs.process(Credentials::root());
//! root.mkdir("/srv", 0o755)?;
//! root.symlink("/srv", "/data")?;
//! let fd = root.open("/data/hello", OpenFlags::CREAT | OpenFlags::RDWR, 0o644)?;
//! root.write(fd, b"hi")?;
//! root.close(fd)?;
//! assert_eq!(root.stat("/srv/hello")?.size, 2);
//!
//! let alice = vfs.process(Credentials::user(1000, 1000, []));
//! assert_eq!(alice.unlink("/srv/hello"), Err(Errno::EACCES));
//! assert_eq!(alice.stat("/srv/missing").unwrap_err(), Errno::ENOENT);
//! # Ok::<(), Errno>(())
//! ```
//!
//! | module | what | Linux original |
//! |---|---|---|
//! | [`errno`] | [`Errno`], [`VfsResult`]: Linux error numbers | `include/uapi/asm-generic/errno*.h` |
//! | [`mode`] | `st_mode` type and permission bits | `include/uapi/linux/stat.h` |
//! | [`cred`] | [`Credentials`] and permission checks | `generic_permission`, `setattr_prepare` |
//! | [`path`] | path validation and components | `getname`, `link_path_walk` |
//! | [`config`] | the design variants | — |
//! | `dcache`, `dentry` | the dentry hash, negative dentries | `fs/dcache.c` |
//! | `namei` | rcu-walk and ref-walk | `fs/namei.c` |
//! | `namespace` | mkdir, unlink, rename, ... | `fs/namei.c`, `fs/libfs.c` |
//! | [`inode`] | inodes and attributes | `fs/inode.c` |
//! | [`file`](mod@file) | open file descriptions | `fs/read_write.c`, `fs/open.c` |
//! | [`pages`] | sparse file data, read lock-free | `mm/shmem.c`, `lib/xarray.c` |
//! | [`process`] | credentials, cwd, descriptor table | `fs/file.c` |
//! | [`kernfs`] | sysfs-like attribute trees | `fs/kernfs/` |
//! | [`procfs`] | a task table as `/proc` | `fs/proc/base.c` |
//! | [`locks`] | flock, POSIX and OFD record locks, leases | `fs/locks.c` |
//! | [`xattr`] | extended attributes | `fs/xattr.c` |
//! | [`space`] | `size=` and `nr_inodes=` limits | `mm/shmem.c` |
//!
//! In the repository, `docs/design.md` maps these modules and the seed
//! mechanism each holds, `docs/benchmarks.md` and `docs/commutativity.md`
//! describe how the designs are measured, and `docs/results/` holds the
//! measurements, each with its machine, date and command.

#![warn(missing_docs, missing_debug_implementations)]

mod backend;
pub mod config;
pub mod cred;
mod dcache;
mod dentry;
mod dirlock;
pub mod errno;
mod fdtable;
pub mod file;
pub mod inode;
pub mod kernfs;
pub mod locks;
pub mod mode;
mod namei;
mod namespace;
mod opens;
pub mod pages;
pub mod path;
pub mod process;
pub mod procfs;
mod reclaim;
pub mod space;
mod superblock;
pub mod time;
pub mod xattr;

pub use config::VfsConfig;
pub use cred::Credentials;
pub use errno::{Errno, VfsResult};
pub use file::{DirEntry, OpenFile, OpenFlags, Whence};
pub use inode::{FileType, Stat};
pub use namei::MAX_SYMLINKS;
pub use namespace::{RenameFlags, SetTime};
pub use process::{Fd, Process, SetAttr};
pub use reclaim::run_deferred_releases;
pub use time::Timespec;

use std::sync::Arc;
use superblock::SuperBlock;

/// One filesystem instance. Cloning is cheap and shares the instance.
#[derive(Debug, Clone)]
pub struct Vfs {
    sb: Arc<SuperBlock>,
    locks: Arc<locks::LockManager>,
}

impl Default for Vfs {
    /// The scalable design ([`VfsConfig::default`]).
    fn default() -> Self {
        Vfs::new(VfsConfig::default())
    }
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
}

impl Vfs {
    /// A new, empty filesystem (a root directory owned by root, mode 0755).
    pub fn new(config: VfsConfig) -> Vfs {
        Vfs { sb: Arc::new(SuperBlock::new(config)), locks: Arc::new(locks::LockManager::new(config.lock_list)) }
    }

    /// A filesystem whose contents `make_backend` provides (kernfs, procfs).
    pub(crate) fn with_backend(
        config: VfsConfig,
        make_backend: impl FnOnce(&Arc<inode::InodeRegistry>, &Arc<inode::Inode>) -> Arc<dyn backend::Backend>,
    ) -> Vfs {
        Vfs {
            sb: Arc::new(SuperBlock::with_backend(config, |registry, root| Some(make_backend(registry, root)))),
            locks: Arc::new(locks::LockManager::new(config.lock_list)),
        }
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

    /// A process with these credentials, its working directory the root.
    pub fn process(&self, cred: Credentials) -> Process {
        Process::new(self.clone(), cred, Arc::clone(&self.sb.root))
    }

    /// A process with these credentials whose working directory is `dir`,
    /// so relative paths (a single name, say) start there: how a front end
    /// that addresses directories by inode (FUSE) performs `mkdirat` and
    /// friends. ENOTDIR if `dir` is not a directory.
    pub fn process_in(&self, cred: Credentials, dir: Arc<inode::Inode>) -> VfsResult<Process> {
        dir.dir()?;
        Ok(Process::new(self.clone(), cred, dir))
    }

    /// The root directory's inode.
    pub fn root(&self) -> &Arc<inode::Inode> {
        &self.sb.root
    }

    /// Like `echo 2 > /proc/sys/vm/drop_caches`: evicts every unused
    /// negative dentry, then waits (like `rcu_barrier`) until every release
    /// deferred for rcu-walkers has run, so inodes and dentries nothing uses
    /// any more are freed. Returns false if that took longer than
    /// `timeout` (a thread stayed pinned throughout).
    pub fn drop_caches(&self, timeout: std::time::Duration) -> bool {
        self.sb.dcache.evict_unused_negatives();
        self.sb.reclaim.barrier(timeout)
    }

    /// Waits up to `timeout` (0: not at all) until every release deferred
    /// for rcu-walkers so far has run, after handing this thread's pending
    /// ones on, so that others can run them; returns whether all ran. A
    /// front end that serves requests on long-lived threads calls it with 0
    /// after an unlink, rmdir or rename, so the space of what it removed
    /// comes back without waiting for more deferred releases on that
    /// thread (the epoch collects them in batches).
    pub fn reclaim(&self, timeout: std::time::Duration) -> bool {
        self.sb.reclaim.barrier(timeout)
    }

    /// Counts inodes and bytes by iterating the superblock's inode list
    /// (one list head locked at a time), and the dcache.
    pub fn statfs(&self) -> FsStats {
        let mut inodes = 0;
        let mut bytes = 0;
        self.sb.inodes.for_each(&mut |inode| {
            inodes += 1;
            if inode.file_type() == FileType::Regular {
                bytes += inode.stat().size;
            }
        });
        let usage = self.sb.inodes.space.usage();
        FsStats {
            inodes,
            bytes,
            dentries: self.sb.dcache.len(),
            negative_dentries: self.sb.dcache.negative_count(),
            block_size: pages::PAGE_SIZE,
            blocks: usage.max_pages,
            blocks_free: usage.max_pages.saturating_sub(usage.used_pages),
            blocks_used: usage.used_pages,
            files: usage.max_inodes,
            files_free: usage.free_inodes,
        }
    }
}
