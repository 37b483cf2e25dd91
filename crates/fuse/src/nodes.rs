//! The node table: which positions of the served mount namespace — a
//! mount and an inode seen through it, Linux's `struct path`, a
//! [`Location`] — the kernel knows by node id, how many lookups it holds
//! on each, and by which names it reached them.
//!
//! Node ids name positions, not inodes: a mount's *slot* (the order in
//! which the table first saw the mount, the namespace's root mount being
//! slot 0) in the top [`SLOT_BITS`] bits, the inode number below them,
//! except that in slot 0 the root's inode number and FUSE's root id 1 swap
//! places. So one inode seen through two mounts (a bind mount) has a node
//! id per mount, the inodes of two filesystems never share one, and a
//! position has the same id at every lookup, after a forget too (fuser
//! sends a node id as the attributes' inode number: it is the `st_ino`
//! programs see). The slots are not a mount table: which mount covers
//! which directory is the VFS's to say, and the table only remembers the
//! mount ids it has numbered.
//!
//! Invariant: a node id the kernel may still use (its lookup count is above
//! zero, or it is the root) maps to the same position until `forget`
//! brings the count to zero; the entry keeps the inode alive even after its
//! last name is unlinked, as the kernel's inode cache does, and its mount
//! counted, as a kernel dentry's inode keeps its superblock.
//!
//! The names recorded per node stand in for an "open by inode" call the VFS
//! does not have: a regular file is opened, and a `LINK`'s source linked,
//! through one of the names the kernel reached it by, each name relative
//! to its directory's position. A rename or link into another directory
//! works on the directories' positions themselves (a VFS context at each),
//! so no path from the root is ever built: a directory renamed meanwhile
//! changes nothing.
//! A node may also hold its own open description, through which the
//! kernel's reads and writes of files it opened without a request go; it
//! lives as long as the node, so it outlasts the file's last name.

use std::collections::HashMap;
use std::fmt;
use std::sync::{Arc, Mutex, MutexGuard};
use vfscale::{Errno, Location, Mount, OpenFile, VfsResult};
use vfscale_sync::poison::unpoisoned;

/// FUSE's root node id (`FUSE_ROOT_ID`).
pub(crate) const ROOT: u64 = 1;

/// Node id bits that hold the mount's slot.
pub(crate) const SLOT_BITS: u32 = 16;
/// Node id bits below the slot, for the inode number.
const INO_BITS: u32 = 64 - SLOT_BITS;
const INO_MASK: u64 = (1 << INO_BITS) - 1;
/// The inode number below the slot bits that no node gets: what a listing
/// shows for an entry without one.
const UNKNOWN: u64 = INO_MASK;

/// A name: the parent's node id and the entry name in it.
pub(crate) type Link = (u64, Box<[u8]>);

struct Node {
    at: Arc<Location>,
    lookups: u64,
    links: Vec<Link>,
    /// The front end's own description of the file, once opened.
    own: Option<Arc<OpenFile>>,
}

struct Table {
    nodes: HashMap<u64, Node>,
    /// Mount id to slot.
    slots: HashMap<u64, u64>,
}

/// How node ids are made for one mount: its slot, and (for slot 0) the
/// inode number that trades places with [`ROOT`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Slot {
    slot: u64,
    root_ino: Option<u64>,
}

impl Slot {
    /// The node id of inode number `ino` seen through this slot's mount;
    /// EOVERFLOW for one that does not fit below the slot bits.
    pub fn id(self, ino: u64) -> VfsResult<u64> {
        let local = match self.root_ino {
            Some(root) if ino == root => ROOT,
            Some(root) if ino == ROOT => root,
            _ => ino,
        };
        if local == 0 || local >= UNKNOWN {
            return Err(Errno::EOVERFLOW);
        }
        Ok(self.slot << INO_BITS | local)
    }

    /// The `d_ino` a directory listing shows for inode number `ino`: its
    /// node id, or, for an entry whose inode is not made yet (procfs lists
    /// 0) or whose number does not fit, this slot's [`UNKNOWN`] number,
    /// which is never a node.
    pub fn listed(self, ino: u64) -> u64 {
        self.id(ino).unwrap_or(self.slot << INO_BITS | UNKNOWN)
    }
}

/// Node id to position, with lookup counts.
pub(crate) struct Nodes {
    root: Arc<Location>,
    table: Mutex<Table>,
}

impl fmt::Debug for Nodes {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Nodes").field("root", &self.root.inode.ino()).field("known", &self.len()).finish()
    }
}

impl Nodes {
    /// A table whose [`ROOT`] is `root`, whose mount takes slot 0.
    pub fn new(root: Location) -> Nodes {
        let slots = HashMap::from([(root.mount.id(), 0)]);
        Nodes { root: Arc::new(root), table: Mutex::new(Table { nodes: HashMap::new(), slots }) }
    }

    fn lock(&self) -> MutexGuard<'_, Table> {
        unpoisoned(self.table.lock())
    }

    fn slot_in(&self, table: &mut Table, mount: &Mount) -> VfsResult<Slot> {
        let next = table.slots.len() as u64;
        let slot = *table.slots.entry(mount.id()).or_insert(next);
        if slot >> SLOT_BITS != 0 {
            table.slots.remove(&mount.id());
            return Err(Errno::EOVERFLOW);
        }
        Ok(Slot { slot, root_ino: (slot == 0).then(|| self.root.inode.ino()) })
    }

    /// The slot of `mount`, numbered now if it is new; EOVERFLOW once every
    /// slot is taken.
    pub fn slot(&self, mount: &Mount) -> VfsResult<Slot> {
        self.slot_in(&mut self.lock(), mount)
    }

    /// The node id of position `at`.
    pub fn node_id(&self, at: &Location) -> VfsResult<u64> {
        self.slot(&at.mount)?.id(at.inode.ino())
    }

    /// The position behind a node id the kernel holds.
    pub fn get(&self, id: u64) -> Option<Arc<Location>> {
        if id == ROOT {
            return Some(Arc::clone(&self.root));
        }
        self.lock().nodes.get(&id).map(|n| Arc::clone(&n.at))
    }

    /// Records one more lookup of position `at` reached as `name` in
    /// `parent` (what every reply carrying an entry does); returns its node
    /// id.
    pub fn remember(&self, parent: u64, name: &[u8], at: Location) -> VfsResult<u64> {
        let mut table = self.lock();
        let id = self.slot_in(&mut table, &at.mount)?.id(at.inode.ino())?;
        if id == ROOT {
            return Ok(id);
        }
        let node = table.nodes.entry(id).or_insert_with(|| Node {
            at: Arc::new(at),
            lookups: 0,
            links: Vec::new(),
            own: None,
        });
        node.lookups += 1;
        if !node.links.iter().any(|(p, n)| *p == parent && **n == *name) {
            node.links.push((parent, name.into()));
        }
        Ok(id)
    }

    /// The kernel dropped `n` lookups of `id`; the node goes at zero.
    /// Returns whether it went (its position and own description with it,
    /// dropped after the table's lock).
    pub fn forget(&self, id: u64, n: u64) -> bool {
        let mut table = self.lock();
        let Some(node) = table.nodes.get_mut(&id) else { return false };
        debug_assert!(node.lookups >= n, "forget of {n} lookups on node {id}, which has {}", node.lookups);
        node.lookups = node.lookups.saturating_sub(n);
        let gone = if node.lookups == 0 { table.nodes.remove(&id) } else { None };
        drop(table);
        gone.is_some()
    }

    /// `name` in `parent` no longer refers to `id` (unlink, rmdir, the
    /// source or the replaced target of a rename).
    pub fn unlinked(&self, id: u64, parent: u64, name: &[u8]) {
        if let Some(node) = self.lock().nodes.get_mut(&id) {
            node.links.retain(|(p, n)| !(*p == parent && **n == *name));
        }
    }

    /// `id` is now also reachable as `name` in `parent`, without a new
    /// lookup (the target of a rename).
    pub fn linked(&self, id: u64, parent: u64, name: &[u8]) {
        if let Some(node) = self.lock().nodes.get_mut(&id) {
            if !node.links.iter().any(|(p, n)| *p == parent && **n == *name) {
                node.links.push((parent, name.into()));
            }
        }
    }

    /// The node's own open description, if one was kept.
    pub fn own_file(&self, id: u64) -> Option<Arc<OpenFile>> {
        self.lock().nodes.get(&id).and_then(|n| n.own.clone())
    }

    /// Keeps `file` as node `id`'s own description, unless another thread
    /// kept one first; returns the one kept (`file` itself if the node is
    /// gone).
    pub fn keep_own_file(&self, id: u64, file: Arc<OpenFile>) -> Arc<OpenFile> {
        match self.lock().nodes.get_mut(&id) {
            Some(node) => Arc::clone(node.own.get_or_insert(file)),
            None => file,
        }
    }

    /// The names `id` is known by, most recent last.
    pub fn links(&self, id: u64) -> Vec<Link> {
        self.lock().nodes.get(&id).map(|n| n.links.clone()).unwrap_or_default()
    }

    /// How many node ids the kernel holds besides the root.
    pub fn len(&self) -> usize {
        self.lock().nodes.len()
    }
}

/// Whether `file` was opened at position `at`: the same inode, through the
/// same mount.
pub(crate) fn opened_at(file: &OpenFile, at: &Location) -> bool {
    Arc::ptr_eq(file.inode(), &at.inode) && file.mount().id() == at.mount.id()
}

/// The position an open file was opened at.
pub(crate) fn location_of(file: &OpenFile) -> Location {
    Location { mount: file.mount().clone(), inode: Arc::clone(file.inode()) }
}

#[cfg(test)]
mod tests {
    use super::*;
    use vfscale::{Context, Credentials, MountFlags, MountNamespace, OpenFlags, Vfs};

    /// A namespace of a fresh VFS with another one mounted on `/m` and
    /// `/d` bound on `/b`, its root, and a node table.
    fn setup() -> (Vfs, Arc<MountNamespace>, Location, Nodes) {
        let vfs = Vfs::default();
        let ns = vfs.new_namespace();
        let p = vfs.process_in(&ns, Credentials::root());
        for dir in ["/m", "/d", "/b"] {
            p.mkdir(dir, 0o755).unwrap();
        }
        p.open("/d/f", OpenFlags::CREAT | OpenFlags::WRONLY, 0o644).unwrap();
        p.mount(&Vfs::default(), "tmpfs", "/m", MountFlags::NONE).unwrap();
        p.bind_mount("/d", "/b", false).unwrap();
        let root = location_of(&p.open_description("/", OpenFlags::RDONLY, 0).unwrap());
        let nodes = Nodes::new(root.clone());
        (vfs, ns, root, nodes)
    }

    fn locate(ns: &MountNamespace, root: &Location, path: &str) -> Location {
        let cred = Credentials::root();
        Context::in_namespace(Some(ns), &cred, root, root).locate(path, false).unwrap()
    }

    #[test]
    fn the_root_is_one_and_the_swap_undoes_itself() {
        let (vfs, _ns, root, nodes) = setup();
        assert_eq!(nodes.node_id(&root), Ok(ROOT));
        assert_eq!(nodes.get(ROOT).unwrap().inode.ino(), vfs.root().ino());
        let slot0 = nodes.slot(&root.mount).unwrap();
        assert_eq!(slot0.id(vfs.root().ino()), Ok(ROOT));
        assert_eq!(slot0.id(ROOT), Ok(vfs.root().ino()));
        assert_eq!(slot0.id(12345), Ok(12345));
        assert_eq!(slot0.id(0), Err(Errno::EOVERFLOW));
        assert_eq!(slot0.id(1 << INO_BITS), Err(Errno::EOVERFLOW));
        assert_eq!(slot0.id(UNKNOWN), Err(Errno::EOVERFLOW));
        assert_eq!((slot0.listed(0), slot0.listed(12345)), (UNKNOWN, 12345));
    }

    #[test]
    fn one_inode_through_two_mounts_has_an_id_per_mount() {
        let (_vfs, ns, root, nodes) = setup();
        let (direct, bound) = (locate(&ns, &root, "/d/f"), locate(&ns, &root, "/b/f"));
        assert!(Arc::ptr_eq(&direct.inode, &bound.inode));
        let (d, b) = (nodes.node_id(&direct).unwrap(), nodes.node_id(&bound).unwrap());
        assert_ne!(d, b);
        assert_eq!(d, direct.inode.ino(), "the root mount's ids are its inode numbers");
        assert_eq!(b, 1 << INO_BITS | direct.inode.ino(), "the bind mount is the next slot");
        let other = locate(&ns, &root, "/m");
        assert_eq!(nodes.node_id(&other), Ok(2 << INO_BITS | other.inode.ino()));
        assert_eq!(nodes.node_id(&bound), Ok(b), "slots stay");
    }

    #[test]
    fn lookups_keep_a_node_until_forgotten() {
        let (_vfs, ns, root, nodes) = setup();
        let d = locate(&ns, &root, "/d");
        let id = nodes.remember(ROOT, b"d", d.clone()).unwrap();
        assert_eq!(nodes.remember(ROOT, b"d", d.clone()), Ok(id));
        assert_eq!(nodes.remember(ROOT, b"..", root.clone()), Ok(ROOT), "the root is never counted");
        assert_eq!(nodes.len(), 1);
        nodes.forget(id, 1);
        assert!(Arc::ptr_eq(&nodes.get(id).unwrap().inode, &d.inode));
        nodes.forget(id, 1);
        assert!(nodes.get(id).is_none());
        assert_eq!(nodes.len(), 0);
    }

    #[test]
    fn links_follow_unlink_and_rename() {
        let (_vfs, ns, root, nodes) = setup();
        let id = nodes.remember(ROOT, b"d", locate(&ns, &root, "/d")).unwrap();
        nodes.linked(id, ROOT, b"e");
        assert_eq!(nodes.links(id), vec![(ROOT, b"d"[..].into()), (ROOT, b"e"[..].into())]);
        nodes.unlinked(id, ROOT, b"d");
        assert_eq!(nodes.links(id), vec![(ROOT, b"e"[..].into())]);
    }

    #[test]
    fn a_node_keeps_one_own_file_until_forgotten() {
        let (vfs, ns, root, nodes) = setup();
        let p = vfs.process_in(&ns, Credentials::root());
        let open = || p.open_description("/d/f", OpenFlags::RDWR, 0).unwrap();
        let first = open();
        assert!(opened_at(&first, &locate(&ns, &root, "/d/f")));
        assert!(!opened_at(&first, &locate(&ns, &root, "/b/f")), "another mount");
        let id = nodes.remember(ROOT, b"f", location_of(&first)).unwrap();
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
