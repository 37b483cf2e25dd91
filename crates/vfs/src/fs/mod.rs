//! The filesystem interface: what a filesystem gives the VFS, and what the
//! VFS gives a filesystem to build its inodes with — Linux's
//! `file_system_type`, `super_operations`, `inode_operations` and
//! `file_operations`, or gVisor's `FilesystemImpl`, in two traits:
//!
//! - [`Filesystem`]: one instance's hooks on its tree — `->d_revalidate`
//!   ([`revalidate`](Filesystem::revalidate)), `->permission`,
//!   `->lookup`, `->iterate_shared` ([`readdir`](Filesystem::readdir)) and
//!   the file `->open`, plus what the instance is (its type name, whether it
//!   is read-only, whether the dcache holds its names).
//! - [`FileOps`]: an open file's `->read_iter` and `->write_iter`.
//!
//! The VFS owns the rest: the path walk, the dcache, mounts, open file
//! descriptions, file locks, and every permission check against the
//! caller's [`Credentials`]. A filesystem never sees a path, only the
//! directory inode and the name of each step, and decides nothing the VFS
//! decides for it: it is asked whether a cached name still stands, what a
//! name it has not been asked about yet refers to, and what a file it
//! serves contains.
//!
//! # The two walk modes
//!
//! A path walk runs first in **rcu-walk**: it takes no lock and writes no
//! shared memory. The hooks it calls carry `_rcu` in their name and answer
//! "cannot tell here" ([`Revalidate::NeedRefWalk`], or `None` from
//! [`permission_rcu`](Filesystem::permission_rcu)); the walk then restarts
//! in **ref-walk**, which calls the hooks without the suffix. Those may
//! block and take locks, and their answer types have no "cannot tell": the
//! rule is in the signatures. An rcu hook must not block, sleep, take a
//! lock that can be held across a block, or write memory other threads
//! read; by default each answers "cannot tell", so a filesystem that never
//! thinks about rcu-walk is still correct, only slower.
//!
//! # Writing a filesystem
//!
//! 1. Define the per-inode data (Linux's `i_private`) and put it in each
//!    inode with [`NewInode::private`]; find it again with
//!    [`Inode::private`].
//! 2. Implement [`Filesystem`]: `lookup` makes the inode of a name on
//!    demand through the [`Instance`] it was given; `readdir` lists a
//!    directory; `open` returns the [`FileOps`] of a regular file.
//! 3. Make a [`Vfs`](crate::Vfs) over it with
//!    [`Vfs::with_filesystem`](crate::Vfs::with_filesystem), and mount it
//!    where processes walk ([`Context::mount`](crate::Context::mount)).
//!
//! The VFS caches what `lookup` returns in the dcache and asks
//! [`revalidate`](Filesystem::revalidate) before it reuses an entry. The
//! ownership and mode of each inode are what the permission checks read,
//! with the caller's credentials, before any hook that serves data runs.
//!
//! A tiny filesystem with one directory, `/greeting`, holding one file,
//! `hello`, owned by uid 1000 and readable by its owner only:
//!
//! ```
//! use std::sync::Arc;
//! use vfscale::fs::{FileOps, Filesystem, Instance, NewInode};
//! use vfscale::inode::Inode;
//! use vfscale::{Credentials, DirEntry, Errno, FileType, MountFlags, OpenFlags, Vfs, VfsConfig, VfsResult};
//!
//! /// What each inode is.
//! enum Node {
//!     Greeting,
//!     Hello,
//! }
//!
//! #[derive(Debug)]
//! struct Tiny {
//!     instance: Instance,
//! }
//!
//! impl Filesystem for Tiny {
//!     fn fs_type(&self) -> &'static str {
//!         "tiny"
//!     }
//!
//!     fn lookup(&self, dir: &Arc<Inode>, name: &[u8]) -> VfsResult<Option<Arc<Inode>>> {
//!         let (node, file_type, perm) = match (dir.private::<Node>(), name) {
//!             (None, b"greeting") => (Node::Greeting, FileType::Directory, 0o755),
//!             (Some(Node::Greeting), b"hello") => (Node::Hello, FileType::Regular, 0o600),
//!             _ => return Ok(None),
//!         };
//!         let mut spec = NewInode::of(file_type, perm);
//!         spec.uid = 1000;
//!         spec.size = Some(6);
//!         spec.parent = Some(Arc::clone(dir));
//!         spec.private = Some(Arc::new(node));
//!         Ok(Some(self.instance.new_inode(spec)))
//!     }
//!
//!     fn readdir(&self, dir: &Inode) -> VfsResult<Vec<DirEntry>> {
//!         let (name, file_type) = match dir.private::<Node>() {
//!             None => ("greeting", FileType::Directory),
//!             Some(_) => ("hello", FileType::Regular),
//!         };
//!         Ok(vec![DirEntry { name: name.into(), ino: 0, file_type }])
//!     }
//!
//!     fn open(&self, _inode: &Arc<Inode>, _flags: OpenFlags, _cred: &Credentials) -> VfsResult<Box<dyn FileOps>> {
//!         Ok(Box::new(Hello))
//!     }
//! }
//!
//! #[derive(Debug)]
//! struct Hello;
//!
//! impl FileOps for Hello {
//!     fn read(&self, _inode: &Inode, buf: &mut [u8], offset: u64) -> VfsResult<usize> {
//!         let text = b"hello\n".get(offset as usize..).unwrap_or_default();
//!         let n = text.len().min(buf.len());
//!         buf[..n].copy_from_slice(&text[..n]);
//!         Ok(n)
//!     }
//! }
//!
//! let tiny = Vfs::with_filesystem(VfsConfig::default(), |instance| Arc::new(Tiny { instance: instance.clone() }));
//! let root_fs = Vfs::default();
//! let ns = root_fs.new_namespace();
//! let admin = root_fs.process_in(&ns, Credentials::root());
//! admin.mkdir("/mnt", 0o755)?;
//! admin.mount(&tiny, "tiny", "/mnt", MountFlags::NONE)?;
//!
//! let owner = root_fs.process_in(&ns, Credentials::user(1000, 1000, []));
//! let fd = owner.open("/mnt/greeting/hello", OpenFlags::RDONLY, 0)?;
//! let mut buf = [0u8; 16];
//! let n = owner.read(fd, &mut buf)?;
//! assert_eq!(&buf[..n], b"hello\n");
//! assert_eq!(owner.stat("/mnt/greeting/hello")?.size, 6);
//!
//! // The VFS checks the caller, whatever the filesystem would serve.
//! let other = root_fs.process_in(&ns, Credentials::user(1001, 1001, []));
//! assert_eq!(other.open("/mnt/greeting/hello", OpenFlags::RDONLY, 0), Err(Errno::EACCES));
//! assert_eq!(other.stat("/mnt/greeting/missing"), Err(Errno::ENOENT));
//! # Ok::<(), Errno>(())
//! ```
//!
//! The filesystems of this crate are written against the same interface:
//! [`memfs`] (the in-memory default, whose names live in the dcache),
//! [`kernfs`] (a sysfs-like tree a program publishes) and [`procfs`] (a
//! task table); `vfscale-hostfs` is one outside the crate.
//!
//! May import the base modules and `inode`.

pub mod kernfs;
pub mod memfs;
pub mod procfs;

pub use crate::cred::Access;
pub use crate::inode::NewInode;
/// The epoch guard an rcu-walk holds pinned while it calls the `_rcu`
/// hooks (the walk's `rcu_read_lock`).
pub use crossbeam_epoch::Guard;

use crate::errno::VfsResult;
use crate::inode::{Inode, InodeRegistry};
use crate::types::{DirEntry, OpenFlags};
use crate::Credentials;
use std::fmt;
use std::sync::Arc;
use vfscale_sync::audited::Mutex;
use vfscale_sync::poison::unpoisoned;

/// An rcu-walk hook's verdict on a cached dentry.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Revalidate {
    /// Still right: use it.
    Valid,
    /// Stale: drop it and look the name up again.
    Invalid,
    /// Cannot tell without blocking: restart the walk in ref-walk (the
    /// kernel's `-ECHILD`).
    NeedRefWalk,
}

impl Revalidate {
    /// The verdict of a ref-walk hook, which always decides.
    pub fn decided(valid: bool) -> Revalidate {
        if valid {
            Revalidate::Valid
        } else {
            Revalidate::Invalid
        }
    }
}

/// One filesystem instance's hooks: what the VFS asks of the tree it
/// mounts. See the [module documentation](self) for the walk modes and an
/// example.
///
/// Every method but [`fs_type`](Self::fs_type), [`lookup`](Self::lookup),
/// [`readdir`](Self::readdir) and [`open`](Self::open) has a default: no
/// `->d_revalidate` (cached names stand), no negative dentries,
/// `generic_permission` on the inode's mode and owner, writable.
pub trait Filesystem: Send + Sync + fmt::Debug {
    /// The type `mountinfo` shows (`tmpfs`, `sysfs`, `proc`).
    fn fs_type(&self) -> &'static str;

    /// Whether the instance is read-only (Linux `SB_RDONLY`): every call
    /// that would change it fails with EROFS, whatever its mounts' flags.
    fn read_only(&self) -> bool {
        false
    }

    /// Whether the tree lives in the dcache alone, as tmpfs's does (Linux
    /// `simple_lookup`, `dcache_readdir`): then the VFS's own name
    /// operations (`mkdir`, `unlink`, `rename`, ...) create and remove its
    /// names, file data lives in the VFS's pages, and
    /// [`lookup`](Self::lookup) and [`readdir`](Self::readdir) are not
    /// called. Otherwise the filesystem provides every name, and the
    /// directories have no `->mkdir`, `->unlink`, ... (EPERM).
    fn names_in_dcache(&self) -> bool {
        false
    }

    /// In rcu-walk: whether the positive dentry `name` in `dir`, naming
    /// `inode`, still stands. Must not block or write shared memory.
    /// `guard` is the walk's, pinned for the whole walk: what the
    /// filesystem frees through the epoch stays readable under it, with no
    /// pin of its own.
    fn revalidate_rcu(&self, dir: &Inode, name: &[u8], inode: &Inode, guard: &Guard) -> Revalidate {
        let _ = (dir, name, inode, guard);
        Revalidate::NeedRefWalk
    }

    /// In ref-walk: whether the positive dentry `name` in `dir`, naming
    /// `inode`, still stands. May block.
    fn revalidate(&self, dir: &Inode, name: &[u8], inode: &Inode) -> bool {
        let _ = (dir, name, inode);
        true
    }

    /// Whether a failed lookup may be remembered as a negative dentry,
    /// then checked by [`revalidate_negative`](Self::revalidate_negative).
    fn caches_negatives(&self) -> bool {
        false
    }

    /// In rcu-walk: whether a negative dentry of `dir`, recorded when
    /// `dir`'s [revision](Inode::dir_revision) was `neg_rev`, still
    /// stands. Must not block or write shared memory.
    fn revalidate_negative_rcu(&self, dir: &Inode, neg_rev: u64) -> Revalidate {
        let _ = (dir, neg_rev);
        Revalidate::NeedRefWalk
    }

    /// In ref-walk: as [`revalidate_negative_rcu`](Self::revalidate_negative_rcu),
    /// deciding. May block.
    fn revalidate_negative(&self, dir: &Inode, neg_rev: u64) -> bool {
        let _ = (dir, neg_rev);
        false
    }

    /// In rcu-walk: `->permission` for `mask` (search, as a walk step
    /// asks, is [`Access::EXEC`] on a directory), or `None` when it cannot
    /// be decided without blocking. Must not block or write shared memory;
    /// the default reads the inode's attributes, which takes neither.
    fn permission_rcu(&self, inode: &Inode, cred: &Credentials, mask: Access) -> Option<VfsResult<()>> {
        Some(inode.generic_permission(cred, mask))
    }

    /// In ref-walk and at open: `->permission` for `mask`. May block.
    fn permission(&self, inode: &Inode, cred: &Credentials, mask: Access) -> VfsResult<()> {
        inode.generic_permission(cred, mask)
    }

    /// `->lookup`: the inode named `name` in the directory `dir`, or `None`
    /// when there is none. Called in ref-walk, after the dcache missed;
    /// the inode returned is cached under `name`.
    fn lookup(&self, dir: &Arc<Inode>, name: &[u8]) -> VfsResult<Option<Arc<Inode>>>;

    /// Every entry of the directory `dir` except `.` and `..`, sorted by
    /// name (a listing resumes after the last name it returned). `ino` may
    /// be 0 for a name not looked up yet.
    fn readdir(&self, dir: &Inode) -> VfsResult<Vec<DirEntry>>;

    /// Opens the regular file `inode` (one made by this filesystem), after
    /// the VFS granted `cred` the access `flags` ask for.
    fn open(&self, inode: &Arc<Inode>, flags: OpenFlags, cred: &Credentials) -> VfsResult<Box<dyn FileOps>>;
}

/// An open file whose reads and writes its filesystem serves. It is handed
/// its inode on every call (the open file description holds it), so it
/// need not take a reference of its own: opening shares no count.
pub trait FileOps: Send + Sync + fmt::Debug {
    /// Reads at `offset` into `buf`; 0 at the end.
    fn read(&self, inode: &Inode, buf: &mut [u8], offset: u64) -> VfsResult<usize>;

    /// Writes `buf` at `offset`. EINVAL by default: no `->write`.
    fn write(&self, inode: &Inode, buf: &[u8], offset: u64) -> VfsResult<usize> {
        let _ = (inode, buf, offset);
        Err(crate::Errno::EINVAL)
    }
}

/// The instance a [`Filesystem`] serves, as the VFS hands it over at
/// [`Vfs::with_filesystem`](crate::Vfs::with_filesystem): its root and the
/// means to make its inodes. Cloning is cheap.
#[derive(Clone)]
pub struct Instance {
    registry: Arc<InodeRegistry>,
    root: Arc<Inode>,
}

impl fmt::Debug for Instance {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Instance").field("root", &self.root.ino()).finish_non_exhaustive()
    }
}

impl Instance {
    pub(crate) fn new(registry: Arc<InodeRegistry>, root: Arc<Inode>) -> Instance {
        Instance { registry, root }
    }

    /// The root directory (mode 0755, owned by root until
    /// [`set_attributes`](Self::set_attributes) changes it). Its
    /// [`private`](Inode::private) data is none.
    pub fn root(&self) -> &Arc<Inode> {
        &self.root
    }

    /// A new inode of this instance. A regular file made here is served
    /// by [`Filesystem::open`] and the [`FileOps`] it returns.
    pub fn new_inode(&self, mut spec: NewInode) -> Arc<Inode> {
        spec.served = true;
        Inode::new(&self.registry, spec)
    }

    /// Records that the children of the directory `dir` changed behind the
    /// dcache: negative dentries recorded before now see a new
    /// [revision](Inode::dir_revision).
    pub fn bump_dir_revision(&self, dir: &Inode) {
        if let Ok(directory) = dir.dir() {
            directory.bump_rev();
        }
    }

    /// Gives `inode` the permission bits, owner, group and whichever of
    /// size, link count and times `spec` sets; its type, parent, target and
    /// private data stay.
    pub fn set_attributes(&self, inode: &Inode, spec: &NewInode) {
        inode.set_attributes(spec);
    }
}

/// A seq_file-like snapshot of a generated file: made by `render` at a
/// read from offset 0 (or at the first read), then read on from by later
/// ones, so a reader that reads in pieces sees one consistent text.
#[derive(Debug, Default)]
pub struct Snapshot(Mutex<Option<Vec<u8>>>);

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
