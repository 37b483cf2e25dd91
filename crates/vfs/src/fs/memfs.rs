//! memfs: the in-memory filesystem, Linux's tmpfs (`mm/shmem.c` over
//! `fs/libfs.c`). Its names live in the dcache alone, so the VFS's own name
//! operations make and remove them and its hooks are libfs's simple ones:
//! no `->d_revalidate` (the dcache is authoritative, negatives included),
//! `generic_permission`, and a `->lookup` that finds nothing the dcache
//! does not hold. File data lives in the VFS's pages ([`crate::pages`]),
//! under the instance's `size=` and `nr_inodes=` limits.
//!
//! [`Vfs::new`] and [`Vfs::default`] make an instance.
//!
//! May import the base modules, the node types, `fs` and `vfs`.

use crate::config::{NegativeDentries, VfsConfig};
use crate::errno::{Errno, VfsResult};
use crate::fs::{FileOps, Filesystem};
use crate::inode::Inode;
use crate::types::{DirEntry, OpenFlags};
use crate::{Credentials, Vfs};
use std::sync::Arc;

/// The type name `mountinfo` shows.
pub const FS_TYPE: &str = "tmpfs";

/// The in-memory filesystem's hooks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Memfs {
    negatives: bool,
}

impl Memfs {
    /// The hooks of an instance of the design `config`, which says whether
    /// missing names are remembered as negative dentries.
    pub fn new(config: &VfsConfig) -> Memfs {
        Memfs { negatives: config.negative_dentries == NegativeDentries::Cached }
    }
}

impl Filesystem for Memfs {
    fn fs_type(&self) -> &'static str {
        FS_TYPE
    }

    fn names_in_dcache(&self) -> bool {
        true
    }

    fn revalidate_rcu(
        &self,
        _dir: &Inode,
        _name: &[u8],
        _inode: &Inode,
        _guard: &crate::fs::Guard,
    ) -> crate::fs::Revalidate {
        crate::fs::Revalidate::Valid
    }

    fn revalidate_negative_rcu(&self, _dir: &Inode, _neg_rev: u64) -> crate::fs::Revalidate {
        crate::fs::Revalidate::Valid
    }

    fn revalidate_negative(&self, _dir: &Inode, _neg_rev: u64) -> bool {
        true
    }

    fn caches_negatives(&self) -> bool {
        self.negatives
    }

    /// libfs `simple_lookup`: a name the dcache does not hold does not
    /// exist.
    fn lookup(&self, _dir: &Arc<Inode>, _name: &[u8]) -> VfsResult<Option<Arc<Inode>>> {
        Ok(None)
    }

    /// The VFS lists a directory from the dcache (`dcache_readdir`).
    fn readdir(&self, _dir: &Inode) -> VfsResult<Vec<DirEntry>> {
        Ok(Vec::new())
    }

    /// Files are the VFS's pages; no inode of this filesystem is served.
    fn open(&self, _inode: &Arc<Inode>, _flags: OpenFlags, _cred: &Credentials) -> VfsResult<Box<dyn FileOps>> {
        Err(Errno::EINVAL)
    }
}

impl Vfs {
    /// A new, empty in-memory filesystem (a root directory owned by root,
    /// mode 0755).
    pub fn new(config: VfsConfig) -> Vfs {
        Vfs::with_filesystem(config, |_| Arc::new(Memfs::new(&config)))
    }
}

impl Default for Vfs {
    /// The scalable design ([`VfsConfig::default`]).
    fn default() -> Self {
        Vfs::new(VfsConfig::default())
    }
}
