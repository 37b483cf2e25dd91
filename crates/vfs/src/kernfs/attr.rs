//! Attribute files: the `show`/`store` callbacks and the open-file state
//! that turns them into sysfs read/write semantics.

use super::NodeState;
use crate::backend::{BackedFile, Snapshot};
use crate::errno::{Errno, VfsResult};
use crate::inode::Inode;
use std::fmt;
use std::sync::Arc;

/// Largest write `store` accepts (sysfs's `atomic_write_len`, a page);
/// longer writes fail with E2BIG.
pub const MAX_WRITE: usize = 4096;

/// The callbacks behind an attribute file.
pub trait Attribute: Send + Sync {
    /// The file's contents now.
    fn show(&self) -> VfsResult<Vec<u8>>;
    /// Takes a write; EINVAL by default (no `store`).
    fn store(&self, _buf: &[u8]) -> VfsResult<()> {
        Err(Errno::EINVAL)
    }
}

/// An [`Attribute`] made of two closures.
pub(crate) struct FnAttribute<S, W> {
    show: S,
    store: Option<W>,
}

impl<S, W> FnAttribute<S, W> {
    pub fn new(show: S, store: Option<W>) -> Self {
        FnAttribute { show, store }
    }
}

impl<S, W> Attribute for FnAttribute<S, W>
where
    S: Fn() -> VfsResult<Vec<u8>> + Send + Sync,
    W: Fn(&[u8]) -> VfsResult<()> + Send + Sync,
{
    fn show(&self) -> VfsResult<Vec<u8>> {
        (self.show)()
    }

    fn store(&self, buf: &[u8]) -> VfsResult<()> {
        self.store.as_ref().map_or(Err(Errno::EINVAL), |store| store(buf))
    }
}

/// An open attribute: the snapshot `show` produced at the last read from
/// offset 0.
pub(crate) struct OpenAttribute {
    inode: Arc<Inode>,
    attr: Arc<dyn Attribute>,
    snapshot: Snapshot,
}

impl fmt::Debug for OpenAttribute {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("OpenAttribute").field("ino", &self.inode.ino()).finish_non_exhaustive()
    }
}

impl OpenAttribute {
    pub fn new(inode: Arc<Inode>, attr: Arc<dyn Attribute>) -> Self {
        OpenAttribute { inode, attr, snapshot: Snapshot::default() }
    }

    fn state(&self) -> &NodeState {
        self.inode.private::<NodeState>().expect("kernfs inodes carry their node state")
    }
}

impl BackedFile for OpenAttribute {
    fn read(&self, buf: &mut [u8], offset: u64) -> VfsResult<usize> {
        let _active = self.state().active.get().ok_or(Errno::ENODEV)?;
        self.snapshot.read(buf, offset, || self.attr.show())
    }

    fn write(&self, buf: &[u8], _offset: u64) -> VfsResult<usize> {
        if buf.len() > MAX_WRITE {
            return Err(Errno::E2BIG);
        }
        if buf.is_empty() {
            return Ok(0);
        }
        let _active = self.state().active.get().ok_or(Errno::ENODEV)?;
        self.attr.store(buf)?;
        Ok(buf.len())
    }
}
