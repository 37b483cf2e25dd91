//! The mount table a mount serves: the VFS it was given, and with
//! `--demo` the instances of the demo trees, each mounted on a directory
//! of the first. A node id carries its instance's index in its top bits
//! ([`MOUNT_SHIFT`]) and the instance's own node id below them, so the
//! instances' inode numbers never meet; a lookup that reaches a mount
//! point answers with the mounted instance's root, as crossing a mount
//! does, and a mount point may not be removed or renamed (EBUSY).
//!
//! It imports the node tables (`nodes`) and lock owners (`locks`) that
//! each instance has; the handlers (`fs`) use it, never the other way.

use crate::locks::Locks;
use crate::nodes::{Nodes, ROOT};
use std::ops::Index;
use std::sync::Arc;
use std::time::Duration;
use vfscale::inode::Inode;
use vfscale::{Errno, Vfs, VfsResult};

/// Node id bits below an instance's index: its own node ids (inode
/// numbers, counted up from 1) stay far below.
const MOUNT_SHIFT: u32 = 56;
const LOCAL_MASK: u64 = (1 << MOUNT_SHIFT) - 1;

/// The node id of instance `mount`'s node `local`.
pub(crate) fn node_id(mount: usize, local: u64) -> u64 {
    debug_assert!(local <= LOCAL_MASK, "node id {local} overflows into the instance bits");
    (mount as u64) << MOUNT_SHIFT | local
}

/// One VFS instance of the mount table.
pub(crate) struct Mount {
    pub vfs: Vfs,
    /// Node ids (without the instance bits) into `vfs`.
    pub nodes: Nodes,
    pub locks: Arc<Locks>,
    /// The directory of the first instance this one is mounted on; `None`
    /// for the first.
    on: Option<u64>,
    /// How long the kernel may cache this instance's entries and
    /// attributes.
    pub ttl: Duration,
}

impl Mount {
    fn new(vfs: Vfs, on: Option<u64>, ttl: Duration) -> Mount {
        Mount { nodes: Nodes::new(Arc::clone(vfs.root())), locks: Locks::new(vfs.clone()), vfs, on, ttl }
    }

    /// Whether this is a demo tree (kernfs, procfs), mounted on the first.
    pub fn is_tree(&self) -> bool {
        self.on.is_some()
    }
}

/// The instances, the served VFS first (index 0, whose root is FUSE's
/// root node).
pub(crate) struct Instances {
    mounts: Vec<Mount>,
}

impl Instances {
    /// A table of the served `vfs` alone, its entries cached for `ttl`.
    pub fn new(vfs: Vfs, ttl: Duration) -> Instances {
        Instances { mounts: vec![Mount::new(vfs, None, ttl)] }
    }

    /// Mounts `tree` on directory `on` (an inode number) of the served
    /// VFS, its entries cached for `ttl`.
    pub fn mount(&mut self, tree: Vfs, on: u64, ttl: Duration) {
        self.mounts.push(Mount::new(tree, Some(on), ttl));
    }

    /// The served VFS's instance.
    pub fn served(&self) -> &Mount {
        &self.mounts[0]
    }

    /// Every instance, the served VFS first.
    pub fn iter(&self) -> impl Iterator<Item = &Mount> {
        self.mounts.iter()
    }

    /// The instance of node id `id`, its index and the id within it.
    pub fn split(&self, id: u64) -> VfsResult<(usize, &Mount, u64)> {
        let index = (id >> MOUNT_SHIFT) as usize;
        self.mounts.get(index).map(|m| (index, m, id & LOCAL_MASK)).ok_or(Errno::ESTALE)
    }

    /// The inode of node id `id`; ESTALE if the kernel has forgotten it.
    pub fn inode(&self, id: u64) -> VfsResult<Arc<Inode>> {
        let (_, m, local) = self.split(id)?;
        m.nodes.get(local).ok_or(Errno::ESTALE)
    }

    /// The instance mounted on inode `ino` of instance `mount`, if any.
    pub fn mounted_on(&self, mount: usize, ino: u64) -> Option<usize> {
        if mount != 0 {
            return None;
        }
        self.mounts.iter().position(|m| m.on == Some(ino))
    }

    /// EBUSY if `inode` of instance `mount` is a mount point, which must
    /// stay.
    pub fn not_mount_point(&self, mount: usize, inode: &Inode) -> VfsResult<()> {
        match self.mounted_on(mount, inode.ino()) {
            Some(_) => Err(Errno::EBUSY),
            None => Ok(()),
        }
    }

    /// The node id an entry of instance `mount` for inode `ino` shows.
    pub fn listed_id(&self, mount: usize, ino: u64) -> u64 {
        match self.mounted_on(mount, ino) {
            Some(sub) => node_id(sub, ROOT),
            None => node_id(mount, self.mounts[mount].nodes.node_id(ino)),
        }
    }
}

impl Index<usize> for Instances {
    type Output = Mount;

    /// Instance `index`, as [`Instances::split`] returned it.
    fn index(&self, index: usize) -> &Mount {
        &self.mounts[index]
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::demo::Demo;
    use vfscale::Credentials;

    #[test]
    fn instances_keep_their_node_ids_apart() {
        let vfs = Vfs::default();
        let demo = Demo::new(&vfs).unwrap();
        let mut instances = Instances::new(vfs, Duration::ZERO);
        for (on, tree) in demo.mounts() {
            instances.mount(tree, on, Duration::ZERO);
        }
        assert_eq!(instances.iter().count(), 3);
        assert_eq!(node_id(0, ROOT), ROOT);
        for mount in 0..3 {
            let (index, _, local) = instances.split(node_id(mount, 42)).unwrap();
            assert_eq!((index, local), (mount, 42));
            assert_eq!(instances.inode(node_id(mount, ROOT)).unwrap().ino(), instances[mount].vfs.root().ino());
        }
        assert_eq!(instances.split(node_id(3, ROOT)).err(), Some(Errno::ESTALE));
        let p = instances[0].vfs.process(Credentials::root());
        let sys = p.resolve("/sys", false).unwrap();
        assert_eq!(instances.listed_id(0, sys.ino()), node_id(1, ROOT));
        assert_eq!(instances.not_mount_point(0, &sys), Err(Errno::EBUSY));
        assert_eq!(instances.listed_id(1, sys.ino()), node_id(1, instances[1].nodes.node_id(sys.ino())));
    }
}
