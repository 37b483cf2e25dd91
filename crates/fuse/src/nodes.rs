//! The node table: which VFS inodes the kernel knows by node id, how many
//! lookups it holds on each, and by which names it reached them.
//!
//! Invariant: a node id the kernel may still use (its lookup count is above
//! zero, or it is the root) maps to the same `Arc<Inode>` until `forget`
//! brings the count to zero; the entry keeps the inode alive even after its
//! last name is unlinked, as the kernel's inode cache does. Node ids are the
//! VFS inode numbers, except that the VFS root and FUSE's root id 1 swap
//! places.
//!
//! The names recorded per node stand in for an "open by inode" call the VFS
//! does not have: a regular file is opened through one of the names the
//! kernel reached it by, and a directory's path (for a rename or link into
//! another directory) is built from the single name every directory has.
//! A node may also hold its own open description, through which the
//! kernel's reads and writes of files it opened without a request go; it
//! lives as long as the node, so it outlasts the file's last name.

use std::collections::HashMap;
use std::fmt;
use std::sync::{Arc, Mutex, MutexGuard};
use vfscale::inode::Inode;
use vfscale::OpenFile;
use vfscale_sync::poison::unpoisoned;

/// FUSE's root node id (`FUSE_ROOT_ID`).
pub(crate) const ROOT: u64 = 1;

/// A name: the parent's node id and the entry name in it.
pub(crate) type Link = (u64, Box<[u8]>);

struct Node {
    inode: Arc<Inode>,
    lookups: u64,
    links: Vec<Link>,
    /// The front end's own description of the file, once opened.
    own: Option<Arc<OpenFile>>,
}

/// Node id to inode, with lookup counts.
pub(crate) struct Nodes {
    root: Arc<Inode>,
    map: Mutex<HashMap<u64, Node>>,
}

impl fmt::Debug for Nodes {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Nodes").field("root", &self.root.ino()).field("known", &self.len()).finish()
    }
}

impl Nodes {
    pub fn new(root: Arc<Inode>) -> Nodes {
        Nodes { root, map: Mutex::new(HashMap::new()) }
    }

    fn lock(&self) -> MutexGuard<'_, HashMap<u64, Node>> {
        unpoisoned(self.map.lock())
    }

    /// The node id of a VFS inode number: the identity, except that the VFS
    /// root becomes 1 and whatever VFS inode is numbered 1 takes the root's
    /// number. The mapping is its own inverse.
    pub fn node_id(&self, vfs_ino: u64) -> u64 {
        let root = self.root.ino();
        if vfs_ino == root {
            ROOT
        } else if vfs_ino == ROOT {
            root
        } else {
            vfs_ino
        }
    }

    /// The inode behind a node id the kernel holds.
    pub fn get(&self, id: u64) -> Option<Arc<Inode>> {
        if id == ROOT {
            return Some(Arc::clone(&self.root));
        }
        self.lock().get(&id).map(|n| Arc::clone(&n.inode))
    }

    /// Records one more lookup of `inode` reached as `name` in `parent`
    /// (what every reply carrying an entry does); returns its node id.
    pub fn remember(&self, parent: u64, name: &[u8], inode: &Arc<Inode>) -> u64 {
        let id = self.node_id(inode.ino());
        if id == ROOT {
            return id;
        }
        let mut map = self.lock();
        let node = map.entry(id).or_insert_with(|| Node {
            inode: Arc::clone(inode),
            lookups: 0,
            links: Vec::new(),
            own: None,
        });
        node.lookups += 1;
        if !node.links.iter().any(|(p, n)| *p == parent && **n == *name) {
            node.links.push((parent, name.into()));
        }
        id
    }

    /// The kernel dropped `n` lookups of `id`; the node goes at zero.
    /// Returns whether it went (its inode and own description with it,
    /// dropped after the table's lock).
    pub fn forget(&self, id: u64, n: u64) -> bool {
        let mut map = self.lock();
        let Some(node) = map.get_mut(&id) else { return false };
        debug_assert!(node.lookups >= n, "forget of {n} lookups on node {id}, which has {}", node.lookups);
        node.lookups = node.lookups.saturating_sub(n);
        let gone = if node.lookups == 0 { map.remove(&id) } else { None };
        drop(map);
        gone.is_some()
    }

    /// `name` in `parent` no longer refers to `id` (unlink, rmdir, the
    /// source or the replaced target of a rename).
    pub fn unlinked(&self, id: u64, parent: u64, name: &[u8]) {
        if let Some(node) = self.lock().get_mut(&id) {
            node.links.retain(|(p, n)| !(*p == parent && **n == *name));
        }
    }

    /// `id` is now also reachable as `name` in `parent`, without a new
    /// lookup (the target of a rename).
    pub fn linked(&self, id: u64, parent: u64, name: &[u8]) {
        if let Some(node) = self.lock().get_mut(&id) {
            if !node.links.iter().any(|(p, n)| *p == parent && **n == *name) {
                node.links.push((parent, name.into()));
            }
        }
    }

    /// The node's own open description, if one was kept.
    pub fn own_file(&self, id: u64) -> Option<Arc<OpenFile>> {
        self.lock().get(&id).and_then(|n| n.own.clone())
    }

    /// Keeps `file` as node `id`'s own description, unless another thread
    /// kept one first; returns the one kept (`file` itself if the node is
    /// gone).
    pub fn keep_own_file(&self, id: u64, file: Arc<OpenFile>) -> Arc<OpenFile> {
        match self.lock().get_mut(&id) {
            Some(node) => Arc::clone(node.own.get_or_insert(file)),
            None => file,
        }
    }

    /// The names `id` is known by, most recent last.
    pub fn links(&self, id: u64) -> Vec<Link> {
        self.lock().get(&id).map(|n| n.links.clone()).unwrap_or_default()
    }

    /// How many node ids the kernel holds besides the root.
    pub fn len(&self) -> usize {
        self.lock().len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use vfscale::{Credentials, Vfs};

    fn setup() -> (Vfs, Nodes) {
        let vfs = Vfs::default();
        let nodes = Nodes::new(Arc::clone(vfs.root()));
        (vfs, nodes)
    }

    #[test]
    fn root_maps_to_one_and_back() {
        let (vfs, nodes) = setup();
        let root = vfs.root().ino();
        assert_eq!(nodes.node_id(root), ROOT);
        assert_eq!(nodes.node_id(nodes.node_id(root)), root);
        assert_eq!(nodes.node_id(ROOT), root);
        assert_eq!(nodes.node_id(12345), 12345);
        assert_eq!(nodes.get(ROOT).unwrap().ino(), root);
    }

    #[test]
    fn lookups_keep_a_node_until_forgotten() {
        let (vfs, nodes) = setup();
        let p = vfs.process(Credentials::root());
        p.mkdir("/d", 0o755).unwrap();
        let d = p.resolve("/d", false).unwrap();
        let id = nodes.remember(ROOT, b"d", &d);
        assert_eq!(nodes.remember(ROOT, b"d", &d), id);
        assert_eq!(nodes.len(), 1);
        nodes.forget(id, 1);
        assert_eq!(nodes.get(id).unwrap().ino(), d.ino());
        nodes.forget(id, 1);
        assert!(nodes.get(id).is_none());
        assert_eq!(nodes.len(), 0);
    }

    #[test]
    fn links_follow_unlink_and_rename() {
        let (vfs, nodes) = setup();
        let p = vfs.process(Credentials::root());
        p.mkdir("/d", 0o755).unwrap();
        let d = p.resolve("/d", false).unwrap();
        let id = nodes.remember(ROOT, b"d", &d);
        nodes.linked(id, ROOT, b"e");
        assert_eq!(nodes.links(id), vec![(ROOT, b"d"[..].into()), (ROOT, b"e"[..].into())]);
        nodes.unlinked(id, ROOT, b"d");
        assert_eq!(nodes.links(id), vec![(ROOT, b"e"[..].into())]);
    }

    #[test]
    fn a_node_keeps_one_own_file_until_forgotten() {
        let (vfs, nodes) = setup();
        let p = vfs.process(Credentials::root());
        let open = || p.open_description("/f", vfscale::OpenFlags::CREAT | vfscale::OpenFlags::RDWR, 0o644).unwrap();
        let first = open();
        let id = nodes.remember(ROOT, b"f", first.inode());
        assert!(nodes.own_file(id).is_none());
        assert!(Arc::ptr_eq(&nodes.keep_own_file(id, Arc::clone(&first)), &first));
        assert!(Arc::ptr_eq(&nodes.keep_own_file(id, open()), &first), "the first one kept stays");
        assert!(Arc::ptr_eq(&nodes.own_file(id).unwrap(), &first));
        nodes.forget(id, 1);
        assert_eq!(Arc::strong_count(&first), 1, "forgetting the node closes its own file");
        let stray = open();
        assert!(Arc::ptr_eq(&nodes.keep_own_file(id, Arc::clone(&stray)), &stray));
        assert!(nodes.own_file(id).is_none());
    }
}
