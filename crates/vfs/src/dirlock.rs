//! Directory locking, in the two designs of seed 000: a lock per directory
//! (an `RwSem`, as `i_rwsem` / the per-root `kernfs_rwsem`) or one
//! superblock-wide mutex taken by every directory operation and by every
//! ref-walk step (`kernfs_mutex` before Linux 5.15).
//!
//! Invariant: a directory's children change only under its lock held for
//! write; when two or more directories are locked, ancestors come before
//! descendants, and unrelated directories in inode-number order, so lock
//! orders never cross.
//!
//! May import `config` and `inode`.

use crate::config::DirLocking;
use crate::inode::{Children, Directory};
use std::fmt;
use std::sync::Arc;
use vfscale_sync::rwsem::{RwSem, RwSemReadGuard, RwSemWriteGuard, SpinPolicy};

/// The directory-lock design of a superblock.
pub(crate) enum DirLocks {
    PerDirectory,
    /// Shared with the superblock's open directories, which take it for
    /// readdir (only this "before" design counts the references).
    Global(Arc<RwSem<()>>),
}

impl fmt::Debug for DirLocks {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            DirLocks::PerDirectory => "DirLocks::PerDirectory",
            DirLocks::Global(_) => "DirLocks::Global",
        })
    }
}

/// A directory held for reading (slow lookup, readdir).
pub(crate) struct DirReadGuard<'a> {
    pub children: RwSemReadGuard<'a, Children>,
    _global: Option<RwSemWriteGuard<'a, ()>>,
}

/// A directory held for writing (create, unlink, rename).
pub(crate) struct DirWriteGuard<'a> {
    pub children: RwSemWriteGuard<'a, Children>,
    _global: Option<RwSemWriteGuard<'a, ()>>,
}

/// Several directories held for writing, for rename and rmdir.
pub(crate) struct MultiDirGuard<'a> {
    pub children: Vec<RwSemWriteGuard<'a, Children>>,
    _global: Option<RwSemWriteGuard<'a, ()>>,
}

impl DirLocks {
    pub fn new(design: DirLocking) -> DirLocks {
        match design {
            DirLocking::RwSem => DirLocks::PerDirectory,
            DirLocking::GlobalMutex => DirLocks::Global(Arc::new(RwSem::new((), SpinPolicy::Block))),
        }
    }

    /// What an open directory keeps to lock itself for readdir as every
    /// other reader of its children does: nothing per directory, the
    /// global mutex in the "before" design.
    pub fn for_open_directory(&self) -> DirLocks {
        match self {
            DirLocks::PerDirectory => DirLocks::PerDirectory,
            DirLocks::Global(mutex) => DirLocks::Global(Arc::clone(mutex)),
        }
    }

    /// The global mutex in the "before" design, none per directory: what
    /// every directory operation takes first, and all a ref-walk step
    /// takes around revalidation and permission.
    pub fn global(&self) -> Option<RwSemWriteGuard<'_, ()>> {
        match self {
            DirLocks::PerDirectory => None,
            DirLocks::Global(mutex) => Some(mutex.write()),
        }
    }

    pub fn read<'a>(&'a self, dir: &'a Directory) -> DirReadGuard<'a> {
        let global = self.global();
        DirReadGuard { children: dir.children.read(), _global: global }
    }

    pub fn write<'a>(&'a self, dir: &'a Directory) -> DirWriteGuard<'a> {
        let global = self.global();
        DirWriteGuard { children: dir.children.write(), _global: global }
    }

    /// Locks `dirs` for writing in the order given, which the caller has
    /// put ancestors-first; a directory listed twice is locked once (the
    /// returned guards follow the first occurrences).
    pub fn write_many<'a>(&'a self, dirs: &[&'a Directory]) -> MultiDirGuard<'a> {
        let global = self.global();
        let mut children = Vec::with_capacity(dirs.len());
        for (i, dir) in dirs.iter().enumerate() {
            if !dirs[..i].iter().any(|d| std::ptr::eq(*d, *dir)) {
                children.push(dir.children.write());
            }
        }
        MultiDirGuard { children, _global: global }
    }
}
