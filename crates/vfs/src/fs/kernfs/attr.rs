//! Attribute files: the `show`/`store` callbacks and the open-file state
//! that turns them into sysfs read/write semantics.

use super::active::ActiveRef;
use super::NodeState;
use crate::errno::{Errno, VfsResult};
use crate::fs::{FileOps, Snapshot};
use crate::inode::Inode;

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
/// offset 0. The node's callbacks are found through the inode on each call.
#[derive(Debug, Default)]
pub(crate) struct OpenAttribute {
    snapshot: Snapshot,
}

/// The attribute behind a kernfs file inode, under an active reference.
fn attribute(inode: &Inode) -> VfsResult<(ActiveRef<'_>, &dyn Attribute)> {
    let state = inode.private::<NodeState>().ok_or(Errno::EINVAL)?;
    let active = state.active.get().ok_or(Errno::ENODEV)?;
    Ok((active, state.attr.as_deref().ok_or(Errno::EINVAL)?))
}

impl FileOps for OpenAttribute {
    fn read(&self, inode: &Inode, buf: &mut [u8], offset: u64) -> VfsResult<usize> {
        let (_active, attr) = attribute(inode)?;
        self.snapshot.read(buf, offset, || attr.show())
    }

    fn write(&self, inode: &Inode, buf: &[u8], _offset: u64) -> VfsResult<usize> {
        if buf.len() > MAX_WRITE {
            return Err(Errno::E2BIG);
        }
        if buf.is_empty() {
            return Ok(0);
        }
        let (_active, attr) = attribute(inode)?;
        attr.store(buf)?;
        Ok(buf.len())
    }
}
