//! The hooks a filesystem whose contents live outside the dcache — a
//! kernfs tree, a task table — gives the VFS: Linux's `->d_revalidate`,
//! `->permission`, `->lookup`, `->iterate_shared` and file `->open`.
//!
//! Invariant: a hook called with `rcu = true` runs inside an rcu-walk: it
//! must not block, take a lock or write shared memory, and answers
//! [`Revalidate::NeedRefWalk`] (the kernel's `-ECHILD`) when it cannot
//! decide that way; the walk then restarts in ref-walk, where the same
//! hook is called with `rcu = false` and may block.
//!
//! May import the base modules and `inode`.

use crate::cred::Access;
use crate::errno::VfsResult;
use crate::inode::Inode;
use crate::types::{DirEntry, OpenFlags};
use crate::Credentials;
use std::fmt;
use std::sync::Arc;
use vfscale_sync::audited::Mutex;
use vfscale_sync::poison::unpoisoned;

/// A hook's verdict on a cached dentry.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Revalidate {
    /// Still right: use it.
    Valid,
    /// Stale: drop it and look the name up again.
    Invalid,
    /// Cannot tell without blocking (only with `rcu = true`).
    NeedRefWalk,
}

/// The filesystem side of a superblock whose contents it provides.
pub(crate) trait GeneratedTree: Send + Sync + fmt::Debug {
    /// Whether the positive dentry `name` in `dir`, naming `inode`, still
    /// stands.
    fn revalidate(&self, dir: &Inode, name: &[u8], inode: &Inode, rcu: bool) -> Revalidate;

    /// Whether a negative dentry recorded at directory revision `neg_rev`
    /// still stands.
    fn revalidate_negative(&self, dir: &Inode, neg_rev: u64, rcu: bool) -> Revalidate;

    /// `->permission`: `None` when it cannot decide in rcu-walk.
    fn permission(&self, inode: &Inode, cred: &Credentials, mask: Access, rcu: bool) -> Option<VfsResult<()>>;

    /// `->lookup`: the inode named `name` in `dir`, or `None`.
    fn lookup(&self, dir: &Arc<Inode>, name: &[u8]) -> VfsResult<Option<Arc<Inode>>>;

    /// Whether a failed lookup may be remembered as a negative dentry.
    fn caches_negatives(&self) -> bool;

    /// The filesystem type `mountinfo` shows (`sysfs`, `proc`).
    fn fs_type(&self) -> &'static str;

    /// Every entry of `dir` except `.` and `..`, in a stable order.
    fn readdir(&self, dir: &Inode) -> VfsResult<Vec<DirEntry>>;

    /// Opens a file whose contents the generator produces.
    fn open(&self, inode: &Arc<Inode>, flags: OpenFlags, cred: &Credentials) -> VfsResult<Box<dyn GeneratedFile>>;
}

/// An open file whose reads and writes the generator serves. It is handed
/// its inode on every call (the open file description holds it), so it
/// need not take a reference of its own: opening shares no count.
pub(crate) trait GeneratedFile: Send + Sync + fmt::Debug {
    /// Reads at `offset`.
    fn read(&self, inode: &Inode, buf: &mut [u8], offset: u64) -> VfsResult<usize>;
    /// Writes at `offset`.
    fn write(&self, inode: &Inode, buf: &[u8], offset: u64) -> VfsResult<usize>;
}

/// A seq_file-like snapshot of a generated file: made by `render` at a read
/// from offset 0 (or at the first read), then read on from by later ones.
#[derive(Debug, Default)]
pub(crate) struct Snapshot(Mutex<Option<Vec<u8>>>);

impl Snapshot {
    /// Reads at `offset`, rendering first when needed.
    pub fn read(&self, buf: &mut [u8], offset: u64, render: impl FnOnce() -> VfsResult<Vec<u8>>) -> VfsResult<usize> {
        let mut snapshot = unpoisoned(self.0.lock());
        if offset == 0 || snapshot.is_none() {
            *snapshot = Some(render()?);
        }
        let data = snapshot.as_deref().unwrap_or_default();
        let start = usize::try_from(offset).unwrap_or(usize::MAX).min(data.len());
        let n = buf.len().min(data.len() - start);
        buf[..n].copy_from_slice(&data[start..start + n]);
        Ok(n)
    }
}
