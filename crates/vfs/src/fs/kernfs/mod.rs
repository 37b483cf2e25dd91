//! kernfs: a program publishes its objects as a sysfs-like tree of
//! directories, attribute files with `show`/`store` callbacks, and
//! symlinks, which readers walk through an ordinary [`Vfs`] while the tree
//! changes under them (seed 000; `docs/design.md`, "Seed 000").
//!
//! Invariant: the tree (every directory's children) changes only under
//! the tree lock held for write, and each change bumps the revision of the
//! directories it touches; a node's `show`/`store` runs only under an
//! active reference, and [`Kernfs::remove`] returns only after the removed
//! nodes' active references are drained. The dcache caches the tree:
//! a cached dentry is re-checked against its node (live, same parent, same
//! name) by `->d_revalidate`, lock-free in the [`KernfsConfig::rcu`] design.
//!
//! The three designs of the seed are [`KernfsConfig`] presets:
//!
//! | preset | tree lock | negative dentries | revalidate / permission |
//! |---|---|---|---|
//! | [`before`](KernfsConfig::before) | one global mutex | never kept | `-ECHILD` in rcu-walk, then under the mutex |
//! | [`rwsem`](KernfsConfig::rwsem) | per-tree rwsem | kept, `dir.rev` | `-ECHILD` in rcu-walk, then under the rwsem (read) |
//! | [`rcu`](KernfsConfig::rcu) | per-tree rwsem | kept, `dir.rev` | decided in rcu-walk, lock-free |
//!
//! Attribute files behave like sysfs: a read at offset 0 calls `show` and
//! keeps its output as the snapshot later reads continue from; a write
//! calls `store` with the buffer (an empty write returns 0 without calling
//! it; one over [`MAX_WRITE`] bytes fails with E2BIG, as sysfs's
//! `atomic_write_len`); callback errors reach the caller unchanged. After
//! a node is removed, opens fail with ENOENT and reads or writes on files
//! already open fail with ENODEV.
//!
//! May import the base modules, the node types, `fs` and `vfs`.
//!
//! ```
//! use vfscale::kernfs::{Kernfs, KernfsConfig};
//! use vfscale::{Credentials, OpenFlags};
//! use vfscale_sync::audited::{AtomicU64, Ordering};
//! use std::sync::Arc;
//!
//! let sys = Kernfs::new(KernfsConfig::rcu());
//! let counter = Arc::new(AtomicU64::new(7));
//! let dev = sys.create_dir(&sys.root(), "dev0", 0o755)?;
//! let c = Arc::clone(&counter);
//! sys.create_file(&dev, "count", 0o644, move || Ok(format!("{}\n", c.load(Ordering::Relaxed)).into_bytes()),
//!     Some(move |buf: &[u8]| { counter.store(String::from_utf8_lossy(buf).trim().parse().map_err(|_| vfscale::Errno::EINVAL)?, Ordering::Relaxed); Ok(()) }))?;
//!
//! let p = sys.vfs().process(Credentials::root());
//! let fd = p.open("/dev0/count", OpenFlags::RDWR, 0)?;
//! let mut buf = [0u8; 16];
//! let n = p.read(fd, &mut buf)?;
//! assert_eq!(&buf[..n], b"7\n");
//! p.pwrite(fd, b"42", 0)?;
//! let n = p.pread(fd, &mut buf, 0)?;
//! assert_eq!(&buf[..n], b"42\n");
//! # Ok::<(), vfscale::Errno>(())
//! ```

mod active;
mod attr;

pub use attr::{Attribute, MAX_WRITE};

use crate::cred::Access;
use crate::errno::{Errno, VfsResult};
use crate::fs::{FileOps, Filesystem, Guard, Instance, Revalidate};
use crate::inode::{Inode, NewInode, ParentLink};
use crate::types::{DirEntry, FileType, OpenFlags};
use crate::{Credentials, Vfs, VfsConfig};
use active::Active;
use crossbeam_epoch::Owned;
use std::collections::{BTreeMap, HashMap};
use std::fmt;
use std::sync::Arc;
use vfscale_sync::audited::EpochAtomic;
use vfscale_sync::audited::OnceLock;
use vfscale_sync::audited::Ordering;
use vfscale_sync::rwsem::{RwSem, RwSemReadGuard, RwSemWriteGuard, SpinPolicy};

/// How a kernfs tree is locked and how its dentries are revalidated.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct KernfsConfig {
    /// One global mutex (`true`, `kernfs_mutex`) or a per-tree rwsem.
    pub global_mutex: bool,
    /// Keep negative dentries, validated by the directory revision.
    pub negative_dentries: bool,
    /// Decide revalidation and permission in rcu-walk.
    pub rcu_revalidate: bool,
}

impl KernfsConfig {
    /// Before Linux 5.15: global mutex, no negative dentries, every walk
    /// leaves rcu-walk.
    pub fn before() -> Self {
        Self { global_mutex: true, negative_dentries: false, rcu_revalidate: false }
    }

    /// Ian Kent's series: per-tree rwsem and negative dentries, still
    /// leaving rcu-walk to revalidate.
    pub fn rwsem() -> Self {
        Self { global_mutex: false, negative_dentries: true, rcu_revalidate: false }
    }

    /// Our design: as `rwsem`, with revalidation and permission decided in
    /// rcu-walk, so a cached walk never leaves it.
    pub fn rcu() -> Self {
        Self { global_mutex: false, negative_dentries: true, rcu_revalidate: true }
    }
}

impl Default for KernfsConfig {
    fn default() -> Self {
        Self::rcu()
    }
}

/// Where a node hangs: read lock-free by revalidation, replaced by rename.
#[derive(Debug)]
struct Link {
    parent_ino: u64,
    name: Box<[u8]>,
}

/// What a node's inode carries (its `i_private`), readable without the
/// tree lock.
struct NodeState {
    active: Active,
    link: EpochAtomic<Link>,
    attr: Option<Arc<dyn Attribute>>,
}

impl fmt::Debug for NodeState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("NodeState").field("active", &self.active).finish_non_exhaustive()
    }
}

impl Drop for NodeState {
    fn drop(&mut self) {
        // SAFETY: the state is being dropped, so no reader holds its link.
        unsafe {
            let link = self.link.load(Ordering::Relaxed, crossbeam_epoch::unprotected());
            if !link.is_null() {
                drop(link.into_owned());
            }
        }
    }
}

/// A node of a kernfs tree: a directory, an attribute file or a symlink.
#[derive(Clone)]
pub struct KernfsNode {
    inode: Arc<Inode>,
    state: Arc<NodeState>,
}

impl fmt::Debug for KernfsNode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("KernfsNode").field("ino", &self.inode.ino()).field("type", &self.inode.file_type()).finish()
    }
}

impl KernfsNode {
    /// The inode number readers see.
    pub fn ino(&self) -> u64 {
        self.inode.ino()
    }

    /// Whether it has not been removed.
    pub fn is_active(&self) -> bool {
        self.state.active.is_live()
    }
}

/// Children by name, per directory inode number: the tree.
#[derive(Default)]
struct Tree {
    dirs: HashMap<u64, BTreeMap<Box<[u8]>, KernfsNode>>,
}

/// The shared part: the tree, its lock, and the generator the VFS calls.
struct Shared {
    config: KernfsConfig,
    tree: RwSem<Tree>,
    instance: Instance,
    root: OnceLock<KernfsNode>,
}

impl fmt::Debug for Shared {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Kernfs").field("config", &self.config).finish_non_exhaustive()
    }
}

/// The tree held for reading: shared under the rwsem, exclusive under the
/// global mutex.
enum TreeRead<'a> {
    Shared(RwSemReadGuard<'a, Tree>),
    Exclusive(RwSemWriteGuard<'a, Tree>),
}

impl std::ops::Deref for TreeRead<'_> {
    type Target = Tree;
    fn deref(&self) -> &Tree {
        match self {
            TreeRead::Shared(g) => g,
            TreeRead::Exclusive(g) => g,
        }
    }
}

impl Shared {
    fn read(&self) -> TreeRead<'_> {
        if self.config.global_mutex {
            TreeRead::Exclusive(self.tree.write())
        } else {
            TreeRead::Shared(self.tree.read())
        }
    }

    fn state(inode: &Inode) -> Option<&NodeState> {
        inode.private::<NodeState>()
    }

    /// Whether `inode`'s node is live and hangs at (`dir`, `name`).
    fn still_there(dir: &Inode, name: &[u8], inode: &Inode, guard: &Guard) -> bool {
        let Some(state) = Self::state(inode) else { return false };
        // SAFETY: links are replaced by rename, which releases the old one
        // through the epoch; the guard is pinned.
        let link = unsafe { state.link.load(Ordering::Acquire, guard).as_ref() };
        state.active.is_live() && link.is_some_and(|l| l.parent_ino == dir.ino() && *l.name == *name)
    }
}

impl Shared {
    /// Whether a negative dentry recorded at `neg_rev` stands.
    fn negative_stands(&self, dir: &Inode, neg_rev: u64) -> bool {
        self.config.negative_dentries && dir.dir_revision() == Some(neg_rev)
    }
}

/// In the [`KernfsConfig::rcu`] design the hooks decide in rcu-walk, with
/// loads of the node's link and the directory's revision; in the others
/// they refuse there and decide under the tree lock, as Linux did before
/// 5.15.
impl Filesystem for Shared {
    fn revalidate_rcu(&self, dir: &Inode, name: &[u8], inode: &Inode, guard: &Guard) -> Revalidate {
        if !self.config.rcu_revalidate {
            return Revalidate::NeedRefWalk;
        }
        Revalidate::decided(Self::still_there(dir, name, inode, guard))
    }

    fn revalidate(&self, dir: &Inode, name: &[u8], inode: &Inode) -> bool {
        let _locked = self.read();
        Self::still_there(dir, name, inode, &crossbeam_epoch::pin())
    }

    fn revalidate_negative_rcu(&self, dir: &Inode, neg_rev: u64) -> Revalidate {
        if !self.config.negative_dentries {
            return Revalidate::Invalid;
        }
        if !self.config.rcu_revalidate {
            return Revalidate::NeedRefWalk;
        }
        Revalidate::decided(self.negative_stands(dir, neg_rev))
    }

    fn revalidate_negative(&self, dir: &Inode, neg_rev: u64) -> bool {
        if !self.config.negative_dentries {
            return false;
        }
        let _locked = self.read();
        self.negative_stands(dir, neg_rev)
    }

    fn permission_rcu(&self, inode: &Inode, cred: &Credentials, mask: Access) -> Option<VfsResult<()>> {
        self.config.rcu_revalidate.then(|| inode.generic_permission(cred, mask))
    }

    fn permission(&self, inode: &Inode, cred: &Credentials, mask: Access) -> VfsResult<()> {
        let _locked = self.read();
        inode.generic_permission(cred, mask)
    }

    fn lookup(&self, dir: &Arc<Inode>, name: &[u8]) -> VfsResult<Option<Arc<Inode>>> {
        let tree = self.read();
        Ok(tree.dirs.get(&dir.ino()).and_then(|children| children.get(name)).map(|node| Arc::clone(&node.inode)))
    }

    fn fs_type(&self) -> &'static str {
        "sysfs"
    }

    fn caches_negatives(&self) -> bool {
        self.config.negative_dentries
    }

    fn readdir(&self, dir: &Inode) -> VfsResult<Vec<DirEntry>> {
        let tree = self.read();
        let children = tree.dirs.get(&dir.ino()).ok_or(Errno::ENOENT)?;
        Ok(children
            .iter()
            .map(|(name, node)| DirEntry { name: name.to_vec(), ino: node.ino(), file_type: node.inode.file_type() })
            .collect())
    }

    fn open(&self, inode: &Arc<Inode>, flags: OpenFlags, _cred: &Credentials) -> VfsResult<Box<dyn FileOps>> {
        // `kernfs_fop_open`: even root may not open an attribute for a
        // direction its mode has no bit for.
        let mode = inode.mode();
        let wanted = flags.permission_needed();
        if (wanted.contains(Access::WRITE) && mode & 0o222 == 0) || (wanted.contains(Access::READ) && mode & 0o444 == 0)
        {
            return Err(Errno::EACCES);
        }
        let state = Self::state(inode).ok_or(Errno::ENODEV)?;
        // Linux's `kernfs_fop_open` holds an active reference while it
        // sets the file up; here nothing runs under one (each read and
        // write takes its own), so whether the node is live decides the
        // same, with one load instead of a get and a put.
        if !state.active.is_live() {
            return Err(Errno::ENODEV);
        }
        state.attr.as_ref().ok_or(Errno::EINVAL)?;
        Ok(Box::<attr::OpenAttribute>::default())
    }
}

/// A kernfs tree and the [`Vfs`] that serves it.
#[derive(Debug)]
pub struct Kernfs {
    vfs: Vfs,
    shared: Arc<Shared>,
}

impl Kernfs {
    /// An empty tree (a root directory, mode 0755) in the given design.
    pub fn new(config: KernfsConfig) -> Kernfs {
        let mut shared = None;
        let vfs = Vfs::with_filesystem(VfsConfig::default(), |instance| {
            let root = instance.root();
            let made = Arc::new(Shared {
                config,
                tree: RwSem::new(Tree::default(), SpinPolicy::Adaptive),
                instance: instance.clone(),
                root: OnceLock::new(),
            });
            shared = Some(Arc::clone(&made));
            let root_state = Arc::new(NodeState { active: Active::default(), link: EpochAtomic::null(), attr: None });
            let root_node = KernfsNode { inode: Arc::clone(root), state: root_state };
            made.tree.write().dirs.insert(root.ino(), BTreeMap::new());
            made.root.set(root_node).expect("set once");
            made
        });
        Kernfs { vfs, shared: shared.expect("the generator was made") }
    }

    /// The filesystem readers walk.
    pub fn vfs(&self) -> &Vfs {
        &self.vfs
    }

    /// The design it was built with.
    pub fn config(&self) -> KernfsConfig {
        self.shared.config
    }

    /// The root directory.
    pub fn root(&self) -> KernfsNode {
        self.shared.root.get().expect("set in new").clone()
    }

    /// A new directory `name` in `parent`.
    pub fn create_dir(&self, parent: &KernfsNode, name: &str, perm: u32) -> VfsResult<KernfsNode> {
        self.add(parent, name, NewInode::of(FileType::Directory, perm), None)
    }

    /// A new attribute file `name` in `parent`: `show` produces its
    /// contents, `store` (if any) takes writes.
    pub fn create_file<S, W>(
        &self,
        parent: &KernfsNode,
        name: &str,
        perm: u32,
        show: S,
        store: Option<W>,
    ) -> VfsResult<KernfsNode>
    where
        S: Fn() -> VfsResult<Vec<u8>> + Send + Sync + 'static,
        W: Fn(&[u8]) -> VfsResult<()> + Send + Sync + 'static,
    {
        self.create_attribute(parent, name, perm, Arc::new(attr::FnAttribute::new(show, store)))
    }

    /// A new attribute file served by an [`Attribute`] implementation.
    pub fn create_attribute(
        &self,
        parent: &KernfsNode,
        name: &str,
        perm: u32,
        attr: Arc<dyn Attribute>,
    ) -> VfsResult<KernfsNode> {
        self.add(parent, name, NewInode::of(FileType::Regular, perm), Some(attr))
    }

    /// A new symlink `name` in `parent` pointing at `target`, stored as a
    /// relative path (like sysfs's `../../devices/...`) computed now.
    pub fn create_symlink(&self, parent: &KernfsNode, name: &str, target: &KernfsNode) -> VfsResult<KernfsNode> {
        let relative = self.relative_path(parent, target)?;
        let mut spec = NewInode::of(FileType::Symlink, 0o777);
        spec.symlink_target = relative.into_boxed_slice();
        self.add(parent, name, spec, None)
    }

    fn add(
        &self,
        parent: &KernfsNode,
        name: &str,
        mut spec: NewInode,
        attr: Option<Arc<dyn Attribute>>,
    ) -> VfsResult<KernfsNode> {
        crate::path::validate_name(name.as_bytes())?;
        let mut tree = self.shared.tree.write();
        if !parent.is_active() {
            return Err(Errno::ENOENT);
        }
        let children = tree.dirs.get(&parent.ino()).ok_or(Errno::ENOTDIR)?;
        if children.contains_key(name.as_bytes()) {
            return Err(Errno::EEXIST);
        }
        let is_dir = spec.file_type == FileType::Directory;
        let state = Arc::new(NodeState {
            active: Active::default(),
            link: EpochAtomic::new(Link { parent_ino: parent.ino(), name: name.as_bytes().into() }),
            attr,
        });
        spec.private = Some(Arc::clone(&state) as Arc<dyn std::any::Any + Send + Sync>);
        if is_dir {
            spec.parent = Some(Arc::clone(&parent.inode));
        }
        let inode = self.shared.instance.new_inode(spec);
        if inode.file_type() == FileType::Regular {
            inode.update_content(|a| a.size = MAX_WRITE as u64);
        }
        let node = KernfsNode { inode, state };
        if is_dir {
            tree.dirs.insert(node.ino(), BTreeMap::new());
            parent.inode.change_nlink(1);
        }
        tree.dirs.get_mut(&parent.ino()).expect("checked above").insert(name.as_bytes().into(), node.clone());
        parent.inode.dir()?.bump_rev();
        Ok(node)
    }

    /// Removes `node` and everything below it, then waits until no `show`
    /// or `store` of theirs is running. ENOENT if it was already removed;
    /// EBUSY for the root.
    pub fn remove(&self, node: &KernfsNode) -> VfsResult<()> {
        let removed = {
            let mut tree = self.shared.tree.write();
            let guard = crossbeam_epoch::pin();
            // SAFETY: links are only freed through the epoch; pinned.
            let link = unsafe { node.state.link.load(Ordering::Acquire, &guard).as_ref() }.ok_or(Errno::EBUSY)?;
            if !node.is_active() {
                return Err(Errno::ENOENT);
            }
            let parent_children = tree.dirs.get_mut(&link.parent_ino).ok_or(Errno::ENOENT)?;
            parent_children.remove(&link.name);
            let mut removed = vec![node.clone()];
            let mut i = 0;
            while i < removed.len() {
                if let Some(children) = tree.dirs.remove(&removed[i].ino()) {
                    removed.extend(children.into_values());
                }
                i += 1;
            }
            for gone in &removed {
                gone.state.active.deactivate();
                if let Ok(dir) = gone.inode.dir() {
                    dir.mark_dead();
                    dir.bump_rev();
                }
            }
            if let Some(parent) = self.find_dir(&tree, link.parent_ino) {
                if node.inode.is_dir() {
                    parent.inode.change_nlink(-1);
                }
                parent.inode.dir()?.bump_rev();
            }
            removed
        };
        for gone in &removed {
            gone.state.active.drain();
        }
        Ok(())
    }

    /// Moves `node` to `new_parent` under `new_name`. EEXIST if the name is
    /// taken, EINVAL if a directory would move into its own subtree.
    pub fn rename(&self, node: &KernfsNode, new_parent: &KernfsNode, new_name: &str) -> VfsResult<()> {
        crate::path::validate_name(new_name.as_bytes())?;
        let mut tree = self.shared.tree.write();
        let guard = crossbeam_epoch::pin();
        // SAFETY: as in `remove`.
        let link = unsafe { node.state.link.load(Ordering::Acquire, &guard).as_ref() }.ok_or(Errno::EBUSY)?;
        if !node.is_active() || !new_parent.is_active() {
            return Err(Errno::ENOENT);
        }
        if !tree.dirs.contains_key(&new_parent.ino()) {
            return Err(Errno::ENOTDIR);
        }
        if tree.dirs[&new_parent.ino()].contains_key(new_name.as_bytes()) {
            return Err(Errno::EEXIST);
        }
        if self.is_within(&tree, new_parent.ino(), node.ino()) {
            return Err(Errno::EINVAL);
        }
        let old_parent = link.parent_ino;
        let moved = tree.dirs.get_mut(&old_parent).and_then(|c| c.remove(&link.name)).ok_or(Errno::ENOENT)?;
        tree.dirs.get_mut(&new_parent.ino()).expect("checked above").insert(new_name.as_bytes().into(), moved);
        let new_link = Owned::new(Link { parent_ino: new_parent.ino(), name: new_name.as_bytes().into() });
        let old = node.state.link.swap(new_link, Ordering::AcqRel, &guard);
        // SAFETY: the old link is unreachable now and freed after every
        // guard pinned now has unpinned.
        unsafe { guard.defer_destroy(old) };
        if let Ok(dir) = node.inode.dir() {
            dir.set_parent(ParentLink::counted(Arc::clone(&new_parent.inode)), &self.vfs.sb.reclaim, &guard);
            if let Some(old_dir) = self.find_dir(&tree, old_parent) {
                old_dir.inode.change_nlink(-1);
            }
            new_parent.inode.change_nlink(1);
        }
        for ino in [old_parent, new_parent.ino()] {
            if let Some(dir) = self.find_dir(&tree, ino) {
                dir.inode.dir()?.bump_rev();
            }
        }
        Ok(())
    }

    /// The child `name` of directory `parent`, if it exists.
    pub fn lookup(&self, parent: &KernfsNode, name: &str) -> Option<KernfsNode> {
        let tree = self.shared.read();
        tree.dirs.get(&parent.ino())?.get(name.as_bytes()).cloned()
    }

    /// The directory node with inode number `ino`.
    fn find_dir(&self, tree: &Tree, ino: u64) -> Option<KernfsNode> {
        let root = self.root();
        if root.ino() == ino {
            return Some(root);
        }
        tree.dirs.values().flat_map(|c| c.values()).find(|n| n.ino() == ino).cloned()
    }

    /// Whether directory `dir` is `ancestor` or below it.
    fn is_within(&self, tree: &Tree, dir: u64, ancestor: u64) -> bool {
        let mut cursor = Some(dir);
        while let Some(ino) = cursor {
            if ino == ancestor {
                return true;
            }
            cursor = tree
                .dirs
                .iter()
                .find(|(_, children)| children.values().any(|n| n.ino() == ino))
                .map(|(parent, _)| *parent);
        }
        false
    }

    /// The path of `node` from the root, as names.
    fn path_of(&self, node: &KernfsNode) -> VfsResult<Vec<Box<[u8]>>> {
        let guard = crossbeam_epoch::pin();
        let tree = self.shared.read();
        let mut names = Vec::new();
        let mut state = Arc::clone(&node.state);
        // SAFETY (each load): as in `remove`.
        while let Some(link) = unsafe { state.link.load(Ordering::Acquire, &guard).as_ref() } {
            names.push(link.name.clone());
            let parent = self.find_dir(&tree, link.parent_ino).ok_or(Errno::ENOENT)?;
            state = Arc::clone(&parent.state);
        }
        names.reverse();
        Ok(names)
    }

    fn relative_path(&self, from_dir: &KernfsNode, to: &KernfsNode) -> VfsResult<Vec<u8>> {
        let from = self.path_of(from_dir)?;
        let to = self.path_of(to)?;
        let common = from.iter().zip(&to).take_while(|(a, b)| a == b).count();
        let mut parts: Vec<&[u8]> = vec![b".."; from.len() - common];
        parts.extend(to[common..].iter().map(|n| &**n));
        Ok(parts.join(&b'/'))
    }
}
