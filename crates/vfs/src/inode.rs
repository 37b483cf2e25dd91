//! Inodes: the objects a name refers to — directories, regular files,
//! symlinks, and the special files (FIFOs, sockets, devices) whose I/O a
//! front end does — with their attributes and contents.
//!
//! Invariant: attributes live in two [`SeqLock`]s, so `stat` and the
//! per-component permission checks of an rcu-walk read them without taking
//! a lock or writing shared memory: `MetaAttrs` (mode, owner, link count),
//! which changes of the file's names, mode and owner write, and
//! `ContentAttrs` (size and times), which changes of its data write, on
//! lines apart. Each keeps the change time of its own changes; the file's
//! is the later of the two. Every live inode is on its superblock's
//! inode list (a [`ConcurrentList`]) from creation until it is dropped.
//!
//! May import the base modules, `dentry`, `dirents` and `locks` (an inode holds its lock state).

use crate::config::FileWrites;
use crate::dirents::{Design, Entries};
use crate::errno::{Errno, VfsResult};
use crate::mode::{S_ISGID, S_ISUID, S_IXGRP};
use crate::opens::DOTDOT;
use crate::pages::PageMap;
use crate::reclaim::Reclaim;
use crate::space::{Space, BOGO_INODE_SIZE};
use crate::time::Timespec;
use crate::types::{FileType, Stat};
use bytemuck::{Pod, Zeroable};
use crossbeam_epoch::{Guard, Owned, Shared};
use std::any::Any;
use std::cell::Cell;
use std::fmt;
use std::mem::ManuallyDrop;
use std::sync::{Arc, Weak};
use vfscale_sync::audited::EpochAtomic;
use vfscale_sync::audited::{fence, AtomicBool, AtomicU32, AtomicU64, CountedArc, Ordering};
use vfscale_sync::audited::{Mutex, OnceLock};
use vfscale_sync::cpu::current_cpu;
use vfscale_sync::dlock_list::{ConcurrentList, ListHandle};
use vfscale_sync::pad::LinePad;
use vfscale_sync::poison::unpoisoned;
use vfscale_sync::seqcount::SeqLock;
use vfscale_sync::{PercpuChanges, PercpuRef};

/// The attributes `stat` reports, as one value: both cells read (see
/// [`Attrs::of`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Attrs {
    pub mode: u32,
    pub uid: u32,
    pub gid: u32,
    pub nlink: u32,
    pub size: u64,
    pub atime: Timespec,
    pub mtime: Timespec,
    pub ctime: Timespec,
}

impl Attrs {
    /// The attributes of the two cells; the change time is the later one.
    pub fn of(meta: MetaAttrs, content: ContentAttrs) -> Attrs {
        Attrs {
            mode: meta.mode,
            uid: meta.uid,
            gid: meta.gid,
            nlink: meta.nlink,
            size: content.size,
            atime: content.atime,
            mtime: content.mtime,
            ctime: meta.ctime.max(content.ctime),
        }
    }
}

/// What changes of a file's names, mode and owner write (`chmod`,
/// `chown`, `link`, `unlink`, `rename`, `setxattr`), with the time of the
/// last of them: never ahead of the clock (a change time a filesystem
/// gives goes whole to the content cell), so a read whose access time is
/// ahead of the clock knows it is later without reading this cell.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Pod, Zeroable)]
#[repr(C)]
pub(crate) struct MetaAttrs {
    pub mode: u32,
    pub uid: u32,
    pub gid: u32,
    pub nlink: u32,
    pub ctime: Timespec,
}

/// What changes of a file's data write (`write`, `truncate`, `fallocate`,
/// a read's access time), with the time of the last change among them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Pod, Zeroable)]
#[repr(C)]
pub(crate) struct ContentAttrs {
    pub size: u64,
    pub atime: Timespec,
    pub mtime: Timespec,
    pub ctime: Timespec,
}

/// The set-id bits a write by an unprivileged caller may clear.
const SET_ID: u32 = S_ISUID | S_ISGID;

/// `uid` and `gid` in one word (see [`Inode::owner`]).
fn pack_owner(uid: u32, gid: u32) -> u64 {
    (u64::from(uid) << 32) | u64::from(gid)
}

/// The per-CPU ref of `inode`'s open counts (`opens::InodeOpens`), made
/// live on first use, which keeps one `Arc` on the inode (`keep`) while it
/// is live. One made after the last link went is killed at once (the
/// unlink may not have seen it), so it never keeps an unlinked inode.
pub(crate) fn opens_ref<'i>(inode: &'i Arc<Inode>, reclaim: &Arc<Reclaim>) -> &'i PercpuRef {
    let opens = &inode.opens;
    if let Some(r) = opens.percpu.get() {
        return r;
    }
    let mut made = false;
    let r = opens.percpu.get_or_init(|| {
        made = true;
        let keep = Mutex::new(Some(Arc::clone(inode)));
        let reclaim = Arc::clone(reclaim);
        PercpuRef::new(move || {
            if let Some(inode) = unpoisoned(keep.lock()).take() {
                // The release runs inside the inode it may free. A finish
                // that runs it takes the inode, to drop once the release
                // has returned; otherwise the epoch drops it after this
                // call has returned (and `drop_caches` waits for that).
                if let Some(inode) = FinishKill::claim(inode) {
                    reclaim.defer(&crossbeam_epoch::pin(), inode);
                }
            }
        })
    });
    // Pairs with the fence of `InodeOpens::start_kill` and `kill`: either
    // the unlink saw the ref, or this sees the unlink.
    fence(Ordering::SeqCst);
    if made && inode.stat().nlink == 0 {
        r.kill();
    }
    r
}

/// The second half of the kill of an unlinked inode's open counts
/// ([`PercpuRef::finish_kill`]), run when it is dropped, after a grace
/// period. Until then the ref's own `Arc` on the inode (`keep` in
/// [`opens_ref`]) keeps the inode, and so the ref, alive: only the
/// release drops it, and the release cannot run before this puts the
/// initial reference.
///
/// If that put is the last (the last open was closed before), the release
/// runs inside the finish, which then drops the inode itself once the
/// ref's code has returned, rather than through another grace period: the
/// unlinked file's space comes back one grace period after the unlink, as
/// it did when the unlink folded at once (a mount's `df` waits for that).
struct FinishKill(std::ptr::NonNull<PercpuRef>);

// SAFETY: it only reaches a `PercpuRef`, which is `Sync`.
unsafe impl Send for FinishKill {}

thread_local! {
    /// Whether a [`FinishKill`] runs on this thread, and the inode its
    /// release let go (from `Arc::into_raw`; null until then). Plain
    /// cells, which need no destructor: a release may run while the
    /// thread exits (crossbeam-epoch's last pin runs deferred work), after
    /// the destructors of the thread's other locals.
    static FINISHING: Cell<bool> = const { Cell::new(false) };
    static RELEASED: Cell<*const Inode> = const { Cell::new(std::ptr::null()) };
}

impl FinishKill {
    /// A release hands its inode to the finish running on this thread;
    /// returns it if none is.
    fn claim(inode: Arc<Inode>) -> Option<Arc<Inode>> {
        if !FINISHING.get() || !RELEASED.get().is_null() {
            return Some(inode);
        }
        RELEASED.set(Arc::into_raw(inode));
        None
    }
}

/// Ends a finish, also on unwind: no later release on the thread is
/// claimed, and the inode claimed is dropped, after the ref's code has
/// returned.
struct Finished;

impl Drop for Finished {
    fn drop(&mut self) {
        FINISHING.set(false);
        let released = RELEASED.replace(std::ptr::null());
        if !released.is_null() {
            // SAFETY: from `Arc::into_raw` in `claim`, taken once (the
            // cell was reset to null above).
            drop(unsafe { Arc::from_raw(released) });
        }
    }
}

impl Drop for FinishKill {
    fn drop(&mut self) {
        FINISHING.set(true);
        let _finished = Finished;
        // SAFETY: valid until the initial reference goes (see the type),
        // which is this call's put.
        unsafe { self.0.as_ref() }.finish_kill();
    }
}

/// A directory's reference to its parent, which `..` leads to: while the
/// parent is linked, a count on the calling CPU's slot of the parent's
/// open-count ref ([`opens_ref`]), so mkdirs of different names in one
/// directory share no line (Linux's `d_parent` counts on the parent's
/// `d_lockref`); otherwise an `Arc`. Dropped, it puts its count back.
pub(crate) struct ParentLink {
    /// Per CPU: an `Arc` that owns no count (the ref's `keep` does), never
    /// dropped.
    inode: ManuallyDrop<Arc<Inode>>,
    percpu: bool,
}

impl ParentLink {
    /// A link to `parent`, per CPU while `parent` is linked.
    pub fn new(parent: &Arc<Inode>, reclaim: &Arc<Reclaim>) -> ParentLink {
        if opens_ref(parent, reclaim).tryget_live_many_on(current_cpu(), DOTDOT) {
            // SAFETY: the live count just taken keeps the ref's own `Arc`
            // (`keep`) until it is put, so the pointer stays valid, and this
            // uncounted `Arc` is never dropped (see `Drop`).
            let borrowed = unsafe { Arc::from_raw(Arc::as_ptr(parent)) };
            return ParentLink { inode: ManuallyDrop::new(borrowed), percpu: true };
        }
        ParentLink::counted(CountedArc::new(parent).into_arc())
    }

    /// A link that owns `parent`'s count.
    pub fn counted(parent: Arc<Inode>) -> ParentLink {
        ParentLink { inode: ManuallyDrop::new(parent), percpu: false }
    }
}

impl Drop for ParentLink {
    fn drop(&mut self) {
        if self.percpu {
            let r = self.inode.opens.percpu.get().expect("a per-CPU link has its ref");
            r.put_on(current_cpu(), DOTDOT);
        } else {
            // SAFETY: the field owns its count and is taken exactly once,
            // here, and dropped as the counted reference it is.
            drop(CountedArc::adopt(unsafe { ManuallyDrop::take(&mut self.inode) }));
        }
    }
}

/// A directory's state beyond its attributes.
///
/// What walks read (the parent, the dead flag) comes first, on the line of
/// the inode's read-mostly fields; what creating and unlinking write (the
/// lock, the revision) a line later, so a walk through a directory and a
/// create in it share no written line.
#[repr(C)]
pub(crate) struct Directory {
    /// The parent directory, swapped by rename and released through the
    /// epoch; null for the root, and once the superblock's end took it
    /// ([`Directory::take_parent`]).
    parent: EpochAtomic<ParentLink>,
    /// Set by rmdir: nothing may be created in a removed directory.
    dead: AtomicBool,
    _written_below: LinePad,
    /// The names in the directory and their lock(s): the authoritative
    /// contents, which the dcache mirrors for lock-free lookup.
    pub entries: Entries,
    /// Bumped by a filesystem whose names change behind the dcache's back
    /// (kernfs) whenever a directory's set of children changes; a negative
    /// dentry of such a tree is valid while this equals the revision it
    /// saw. An in-memory tree's dcache is authoritative and needs none
    /// (`SuperBlock::revalidate`).
    rev: AtomicU64,
}

/// Tagged first (`repr(u8)`), so the tag a walk tests (`dir()`) sits with
/// the read-mostly fields before it.
#[repr(u8)]
pub(crate) enum Body {
    Regular(PageMap),
    Symlink(Box<[u8]>),
    Directory(Directory),
    /// A regular file whose contents its filesystem serves.
    Generated,
    /// A FIFO, socket or device node: a name and attributes, and for
    /// devices the device number; its I/O is the front end's.
    Special(FileType, u64),
}

/// The registry of live inodes: the superblock's inode list.
///
/// Every inode holds it by a per-CPU reference ([`RegistryRef`]), not an
/// `Arc`: inodes are made and freed on every CPU, and an `Arc` count would
/// be one line all of them write (the pattern of Linux's per-CPU
/// `mnt_count`). The registry keeps itself (`keep`) until the superblock has
/// retired it and its last inode is gone.
pub(crate) struct InodeRegistry {
    list: Box<dyn ConcurrentList<Weak<Inode>>>,
    /// The capacity inodes, their attributes and file pages are charged to.
    pub space: Arc<Space>,
    /// The design of its directories' entries.
    pub dirents: Design,
    /// The superblock's deferred releases, which finish the kill of an
    /// unlinked inode's open counts ([`FinishKill`]).
    reclaim: Arc<Reclaim>,
    /// How writes to its files' data are serialized.
    pub file_writes: FileWrites,
    /// One reference per live inode, plus the superblock's initial one.
    users: PercpuRef,
    keep: Mutex<Option<Arc<InodeRegistry>>>,
}

impl InodeRegistry {
    pub fn new(
        list: Box<dyn ConcurrentList<Weak<Inode>>>,
        space: Arc<Space>,
        dirents: Design,
        file_writes: FileWrites,
        reclaim: Arc<Reclaim>,
    ) -> Arc<Self> {
        let registry = Arc::new_cyclic(|weak: &Weak<InodeRegistry>| {
            let weak = weak.clone();
            let users = PercpuRef::new(move || {
                let Some(registry) = weak.upgrade() else { return };
                let kept = unpoisoned(registry.keep.lock()).take();
                // This runs inside the registry: free it after returning.
                crossbeam_epoch::pin().defer(move || drop((registry, kept)));
            });
            InodeRegistry { list, space, dirents, file_writes, reclaim, users, keep: Mutex::new(None) }
        });
        *unpoisoned(registry.keep.lock()) = Some(Arc::clone(&registry));
        registry
    }

    /// The superblock is going: the registry lives on until its last inode
    /// does. No inode may be made after this.
    pub fn retire(&self) {
        self.users.kill();
    }

    /// Number of live inodes.
    pub fn len(&self) -> usize {
        self.list.len()
    }

    /// Calls `f` with every live inode. The inodes are collected first:
    /// the last reference to one may go while the walk holds it, and its
    /// drop leaves the list under the lock the walk would still hold.
    pub fn for_each(&self, f: &mut dyn FnMut(&Arc<Inode>)) {
        let mut live = Vec::new();
        self.list.for_each(&mut |weak| live.extend(weak.upgrade()));
        live.iter().for_each(f);
    }
}

/// An inode's counted reference to its registry: one add on the calling
/// CPU's slot to take, one to drop.
pub(crate) struct RegistryRef(std::ptr::NonNull<InodeRegistry>);

// SAFETY: it only hands out `&InodeRegistry`, which is `Sync`.
unsafe impl Send for RegistryRef {}
// SAFETY: as above.
unsafe impl Sync for RegistryRef {}

impl RegistryRef {
    /// Counts a new inode of a registry that is not retired.
    fn new(registry: &Arc<InodeRegistry>) -> RegistryRef {
        registry.users.get();
        RegistryRef(std::ptr::NonNull::from(&**registry))
    }
}

impl std::ops::Deref for RegistryRef {
    type Target = InodeRegistry;
    fn deref(&self) -> &InodeRegistry {
        // SAFETY: this counted reference keeps the registry's `keep` (its
        // own `Arc`) alive until it is dropped.
        unsafe { self.0.as_ref() }
    }
}

impl Drop for RegistryRef {
    fn drop(&mut self) {
        // SAFETY: as in `deref`; nothing touches the registry after the put.
        unsafe { self.0.as_ref() }.users.put();
    }
}

/// An inode: attributes plus a body that depends on its type.
///
/// Padded ([`LinePad`]): the `Arc` counts before it sit on no line with
/// its fields, and no neighbour on the heap shares its lines. Unpadded,
/// the conflict checker saw a create in one directory write the line of
/// another directory's mode (`vfscale commute`).
#[repr(C)]
pub struct Inode {
    _head: LinePad,
    // Read by every walk step and open, written (almost) never.
    ino: u64,
    /// A copy of `meta.mode` readable with one load, for the search
    /// permission fast path of every walk step; stored only when it changes.
    mode: AtomicU32,
    /// A copy of `meta.uid` (high half) and `meta.gid` (low half),
    /// readable with one load, for permission checks that the mode alone
    /// does not decide: they read neither the times nor the size, which
    /// every write of the file changes. Stored only when the owner changes.
    owner: AtomicU64,
    /// How many mounts, in any namespace, sit on this inode: a walk looks
    /// the mount table up only where this is not 0 (Linux's
    /// `DCACHE_MOUNTED`), so crossing nothing reads no table.
    mounted: AtomicU32,
    /// Whether the inode space holds this inode's charge, which its drop
    /// gives back (false only for a create's inode before it is linked).
    charged: AtomicBool,
    registry: RegistryRef,
    list_handle: OnceLock<ListHandle>,
    private: Option<Arc<dyn Any + Send + Sync>>,
    /// Extended attributes (whose change sets `meta.ctime` too): a
    /// pointer the first change sets, to a cell of their own, so reading
    /// them reads no line that changes of the inode write.
    pub(crate) xattrs: crate::xattr_store::Xattrs,
    /// Link count and time changes made per CPU, which `stat` folds in:
    /// the creates and unlinks of a split directory (the rwsem design
    /// changes the attributes themselves), and a regular file's changes
    /// of its data that leave its size. Made by the first (a line per
    /// CPU, so an inode never changed so pays none), which alone writes
    /// this line, as the first `setxattr` does.
    changes: OnceLock<PercpuChanges>,
    /// Its tag and a directory's read-mostly fields first (see
    /// [`Directory`]).
    pub(crate) body: Body,
    // Written by changes of the file's names, mode and owner, and by
    // every attribute change (its lock).
    _written_below: LinePad,
    meta: SeqLock<MetaAttrs>,
    /// Held by an attribute change (`notify_change`) from its checks to
    /// its last update ([`lock_attrs`](Self::lock_attrs)); nothing else
    /// takes it.
    attr_changes: Mutex<()>,
    // Written by changes of its data: apart from the lines above.
    _between_cells: LinePad,
    content: SeqLock<ContentAttrs>,
    /// Whether the mode holds a set-id bit (a copy, stored only when it
    /// changes): what a write reads, on its own lines, to learn that it
    /// has no privileges to remove without reading the mode, which a
    /// `chmod` writes.
    setid: AtomicBool,
    // Written once each (by the first lock, the first open), read by
    // every lock call and open: apart from the lines every change of the
    // inode writes.
    _written_above: LinePad,
    /// File locks (`i_flctx`), which the first lock request makes: apart
    /// from the open counts every open and unlink reads.
    pub(crate) locks: crate::locks::InodeLocks,
    _made_by_first_lock: LinePad,
    /// Open counts (`i_readcount`, `i_writecount`) and the references
    /// open files hold; last, so its count of writers (on a line apart)
    /// is followed by the tail pad alone.
    pub(crate) opens: crate::opens::InodeOpens,
    _tail: LinePad,
}

impl fmt::Debug for Inode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Inode").field("ino", &self.ino).field("type", &self.file_type()).finish_non_exhaustive()
    }
}

/// The mode `mode` (of a file of group `gid`) keeps after a write or
/// truncate by `cred` ([`Inode::remove_privileges`]): without
/// `CAP_FSETID`, no set-user-ID, and no set-group-ID where it marks a
/// program or `cred` is not in the group.
pub(crate) fn without_privileges(mode: u32, gid: u32, cred: &crate::Credentials) -> u32 {
    if cred.capable(crate::cred::Capabilities::FSETID) {
        return mode;
    }
    let mut mode = mode & !S_ISUID;
    if mode & S_ISGID != 0 && (mode & S_IXGRP != 0 || !cred.in_group(gid)) {
        mode &= !S_ISGID;
    }
    mode
}

/// Allocates inode numbers from the global counter in per-thread batches,
/// as Linux's `get_next_ino()`, so creating inodes writes no shared counter
/// in the common case.
fn next_ino() -> u64 {
    static NEXT_BATCH: AtomicU64 = AtomicU64::new(1);
    thread_local!(static BATCH: crate::batched::Batch = const { Cell::new((0, 0)) });
    crate::batched::next(&NEXT_BATCH, &BATCH, 1024)
}

/// What a new inode starts with: its type and permission bits, owner root,
/// the rest as a new file has it unless set. A filesystem makes one with
/// [`NewInode::of`], sets the fields it knows, and hands it to
/// [`Instance::new_inode`](crate::fs::Instance::new_inode).
#[non_exhaustive]
pub struct NewInode {
    /// The type; it never changes.
    pub file_type: FileType,
    /// Permission bits (`0o7777`); the type bits come from `file_type`.
    pub perm: u32,
    /// Owner.
    pub uid: u32,
    /// Group.
    pub gid: u32,
    /// A directory's parent, which `..` leads to; none for a root.
    pub parent: Option<Arc<Inode>>,
    /// A symlink's target.
    pub symlink_target: Box<[u8]>,
    /// A device node's device number.
    pub rdev: u64,
    /// The size `stat` shows; by default 0, or a symlink's target length.
    pub size: Option<u64>,
    /// The link count; by default 1, or 2 for a directory.
    pub nlink: Option<u32>,
    /// Last access; by default now.
    pub atime: Option<Timespec>,
    /// Last modification; by default now.
    pub mtime: Option<Timespec>,
    /// Last status change; by default now.
    pub ctime: Option<Timespec>,
    /// The filesystem's data for the inode (Linux `i_private`), found again
    /// with [`Inode::private`]; a regular file with some is served by its
    /// filesystem's [`open`](crate::fs::Filesystem::open).
    pub private: Option<Arc<dyn Any + Send + Sync>>,
    /// Served by the filesystem even without private data.
    pub(crate) served: bool,
}

impl fmt::Debug for NewInode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("NewInode")
            .field("file_type", &self.file_type)
            .field("perm", &format_args!("{:o}", self.perm))
            .field("uid", &self.uid)
            .field("gid", &self.gid)
            .finish_non_exhaustive()
    }
}

impl NewInode {
    /// A plain inode of `file_type`, owned by root.
    pub fn of(file_type: FileType, perm: u32) -> NewInode {
        NewInode {
            file_type,
            perm,
            uid: 0,
            gid: 0,
            parent: None,
            symlink_target: Box::default(),
            rdev: 0,
            size: None,
            nlink: None,
            atime: None,
            mtime: None,
            ctime: None,
            private: None,
            served: false,
        }
    }
}

impl Inode {
    /// A new inode even past the inode limit (the root, and trees a
    /// filesystem builds): charged to the inode space where it fits,
    /// otherwise charged to nothing, so that its drop gives back only
    /// what it took.
    pub(crate) fn new(registry: &Arc<InodeRegistry>, spec: NewInode) -> Arc<Inode> {
        let charged = registry.space.reserve_inode().is_ok();
        Inode::build(registry, spec, charged)
    }

    /// A new inode not yet charged to the inode space, which
    /// [`charge`](Self::charge) charges before it is linked. A create makes
    /// its inode before it locks its name and charges it under the lock,
    /// once it knows the name is still missing: Linux reserves the inode
    /// (`shmem_reserve_inode`) under the directory's lock, so a create
    /// never fails ENOSPC for a name that another is making.
    pub(crate) fn uncharged(registry: &Arc<InodeRegistry>, spec: NewInode) -> Arc<Inode> {
        Inode::build(registry, spec, false)
    }

    /// Charges an [`uncharged`](Self::uncharged) inode to the inode
    /// space, or ENOSPC past the filesystem's inode limit.
    pub(crate) fn charge(&self) -> VfsResult<()> {
        self.registry.space.reserve_inode()?;
        self.charged.store(true, Ordering::Relaxed);
        Ok(())
    }

    fn build(registry: &Arc<InodeRegistry>, spec: NewInode, charged: bool) -> Arc<Inode> {
        let now = Timespec::now();
        let (body, nlink, size) = match spec.file_type {
            FileType::Regular if spec.private.is_some() || spec.served => (Body::Generated, 1, 0),
            FileType::Regular => (Body::Regular(PageMap::new()), 1, 0),
            FileType::Symlink => {
                let len = spec.symlink_target.len() as u64;
                (Body::Symlink(spec.symlink_target), 1, len)
            }
            FileType::Directory => {
                let parent = spec.parent.map_or_else(EpochAtomic::null, |p| EpochAtomic::new(ParentLink::counted(p)));
                let dir = Directory {
                    parent,
                    dead: AtomicBool::new(false),
                    _written_below: LinePad::new(),
                    entries: Entries::new(registry.dirents),
                    rev: AtomicU64::new(0),
                };
                (Body::Directory(dir), 2, 0)
            }
            special => (Body::Special(special, if special.is_device() { spec.rdev } else { 0 }), 1, 0),
        };
        let ctime = spec.ctime.unwrap_or(now);
        let meta = MetaAttrs {
            mode: spec.file_type.mode_bits() | (spec.perm & 0o7777),
            uid: spec.uid,
            gid: spec.gid,
            nlink: spec.nlink.unwrap_or(nlink),
            ctime: ctime.min(now),
        };
        let content = ContentAttrs {
            size: spec.size.unwrap_or(size),
            atime: spec.atime.unwrap_or(now),
            mtime: spec.mtime.unwrap_or(now),
            ctime,
        };
        let inode = Arc::new(Inode {
            _head: LinePad::new(),
            _written_below: LinePad::new(),
            _between_cells: LinePad::new(),
            _written_above: LinePad::new(),
            _made_by_first_lock: LinePad::new(),
            ino: next_ino(),
            meta: SeqLock::new(meta),
            attr_changes: Mutex::new(()),
            content: SeqLock::new(content),
            setid: AtomicBool::new(meta.mode & SET_ID != 0),
            mode: AtomicU32::new(meta.mode),
            owner: AtomicU64::new(pack_owner(meta.uid, meta.gid)),
            mounted: AtomicU32::new(0),
            charged: AtomicBool::new(charged),
            body,
            registry: RegistryRef::new(registry),
            list_handle: OnceLock::new(),
            locks: crate::locks::InodeLocks::default(),
            changes: OnceLock::new(),
            opens: crate::opens::InodeOpens::default(),
            xattrs: crate::xattr_store::Xattrs::default(),
            private: spec.private,
            _tail: LinePad::new(),
        });
        let handle = registry.list.add(Arc::downgrade(&inode));
        inode.list_handle.set(handle).expect("a new inode is listed once");
        inode
    }

    /// Inode number.
    pub fn ino(&self) -> u64 {
        self.ino
    }

    /// Whether a mount may sit on this inode (in some namespace).
    #[inline]
    pub(crate) fn has_mounts(&self) -> bool {
        self.mounted.load(Ordering::Acquire) != 0
    }

    /// Counts a mount put on (`delta` 1) or taken off (-1) this inode;
    /// under the namespace's writer lock, before the mount is published or
    /// after it is unpublished.
    pub(crate) fn count_mount(&self, delta: i32) {
        self.mounted.fetch_add(delta as u32, Ordering::Release);
    }

    /// The type, which never changes.
    pub fn file_type(&self) -> FileType {
        match self.body {
            Body::Regular(_) | Body::Generated => FileType::Regular,
            Body::Symlink(_) => FileType::Symlink,
            Body::Directory(_) => FileType::Directory,
            Body::Special(file_type, _) => file_type,
        }
    }

    /// Whether its filesystem keeps data for this inode.
    pub(crate) fn has_private(&self) -> bool {
        self.private.is_some()
    }

    /// The capacity this inode's pages are charged to.
    pub(crate) fn space(&self) -> &Space {
        &self.registry.space
    }

    /// Its filesystem's data ([`NewInode::private`]), if it is of type `T`.
    pub fn private<T: Any + Send + Sync>(&self) -> Option<&T> {
        self.private.as_deref()?.downcast_ref()
    }

    /// Both cells' attributes (see [`Attrs::of`]); the per-CPU changes of
    /// a split directory or a file's data are not folded in
    /// ([`stat`](Self::stat) folds them).
    pub(crate) fn attrs(&self) -> Attrs {
        Attrs::of(self.meta.read(), self.content.read())
    }

    /// The mode, owner, link count and the time of their last change.
    pub(crate) fn meta(&self) -> MetaAttrs {
        self.meta.read()
    }

    /// The size and times, and the time of their last change.
    pub(crate) fn content(&self) -> ContentAttrs {
        self.content.read()
    }

    /// Serializes attribute changes (`notify_change`), each held from its
    /// checks to its last update, as Linux's `i_rwsem` does for
    /// `setattr`: of two, each is checked against what the other left.
    pub(crate) fn lock_attrs(&self) -> vfscale_sync::audited::MutexGuard<'_, ()> {
        unpoisoned(self.attr_changes.lock())
    }

    /// Changes the mode, owner or link count; the caller sets `ctime`.
    pub(crate) fn update_meta(&self, f: impl FnOnce(&mut MetaAttrs)) {
        // Stored under the cell's writer lock, so concurrent changes
        // leave the copies equal to the attributes; and only when they
        // change: every walk through the inode or open of it reads the
        // mode and owner words, every write the set-id flag.
        self.meta.update(|a| {
            let (mode, owner) = (a.mode, pack_owner(a.uid, a.gid));
            f(a);
            if a.mode != mode {
                self.mode.store(a.mode, Ordering::Release);
                if (a.mode & SET_ID != 0) != (mode & SET_ID != 0) {
                    self.setid.store(a.mode & SET_ID != 0, Ordering::Release);
                }
            }
            let new_owner = pack_owner(a.uid, a.gid);
            if new_owner != owner {
                self.owner.store(new_owner, Ordering::Release);
            }
        });
    }

    /// Changes the size or times; the caller sets `ctime` where the change
    /// is one.
    pub(crate) fn update_content(&self, f: impl FnOnce(&mut ContentAttrs)) {
        self.content.update(f);
    }

    /// The change time is now, for a change of the file's names or
    /// extended attributes.
    pub(crate) fn touch_ctime(&self) {
        let now = Timespec::now();
        self.update_meta(|a| a.ctime = now);
    }

    /// Linux `file_remove_privs` (6.2+), before a write or truncate by
    /// `cred`: without `CAP_FSETID` it clears set-user-ID, and set-group-ID
    /// where it marks a program or the writer is not in the file's group.
    /// A file without set-id bits is known from one load of a flag on its
    /// content cell's lines, so writes read nothing a `chmod` writes.
    pub(crate) fn remove_privileges(&self, cred: &crate::Credentials) {
        if !self.setid.load(Ordering::Acquire) || cred.capable(crate::cred::Capabilities::FSETID) {
            return;
        }
        let now = self.meta();
        if without_privileges(now.mode, now.gid, cred) == now.mode {
            return;
        }
        let time = Timespec::now();
        self.update_meta(|a| {
            a.mode = without_privileges(a.mode, a.gid, cred);
            a.ctime = time;
        });
    }

    /// The owner and group, `(uid, gid)`, with one load, without reading
    /// the other attributes.
    #[inline]
    pub(crate) fn owner(&self) -> (u32, u32) {
        let packed = self.owner.load(Ordering::Acquire);
        ((packed >> 32) as u32, packed as u32)
    }

    /// The mode (type and permission bits), with one load: what
    /// [`stat`](Self::stat) reports as `mode`, without reading the other
    /// attributes.
    #[inline]
    pub fn mode(&self) -> u32 {
        self.mode.load(Ordering::Acquire)
    }

    /// The attributes with the per-CPU link count and time changes (of a
    /// split directory, or of a file's data) folded in, all as they were
    /// at one instant: what `stat` reports.
    pub(crate) fn folded_attrs(&self) -> Attrs {
        let Some(changes) = self.changes.get() else {
            return self.attrs();
        };
        let (delta, latest, mut a) = changes.snapshot(|| self.attrs());
        a.nlink = (i64::from(a.nlink) + delta as i64) as u32;
        if let Some(latest) = latest.map(Timespec::from_nanos) {
            a.mtime = a.mtime.max(latest);
            a.ctime = a.ctime.max(latest);
        }
        a
    }

    /// A directory's entries changed, by `nlink_delta` subdirectories: its
    /// link count moves and its modification and change times are now. In
    /// the split design on the calling CPU's record only, so changes on
    /// two CPUs share no line.
    pub(crate) fn entries_changed(&self, nlink_delta: i32) {
        match self.registry.dirents {
            Design::Split => {
                self.changes.get_or_init(PercpuChanges::new).record(nlink_delta as isize, Timespec::now().as_nanos())
            }
            Design::Locked => {
                if nlink_delta != 0 {
                    self.update_meta(|a| {
                        a.nlink = a.nlink.checked_add_signed(nlink_delta).expect("nlink stays within u32");
                    });
                }
                let now = Timespec::now();
                self.update_content(|a| {
                    a.mtime = now;
                    a.ctime = now;
                });
            }
        }
    }

    /// Changes the size or times with `f`. Where `f` sets an explicit
    /// modification time (`sets_mtime`), the times of the per-CPU
    /// records, which would otherwise outweigh it, go in the same step, so
    /// a `stat` sees them and the old cell or neither and the new one.
    pub(crate) fn update_content_setting(&self, sets_mtime: bool, f: impl FnOnce(&mut ContentAttrs)) {
        match self.changes.get().filter(|_| sets_mtime) {
            Some(changes) => changes.clear_times_with(|| self.content.update(f)),
            None => self.content.update(f),
        }
    }

    /// Whether a change of the file's data that leaves its size may go
    /// without the writer lock and stamp its times at `now` on a per-CPU
    /// record: in the [`FileWrites::InPlace`] design, and not while a time
    /// in the content cell is ahead of `now` (set explicitly, or given by
    /// a filesystem), which the record could not outweigh. Reads the cell
    /// only.
    pub(crate) fn may_change_in_place(&self, now: Timespec) -> bool {
        if self.registry.file_writes != FileWrites::InPlace {
            return false;
        }
        let a = self.content();
        a.mtime <= now && a.ctime <= now
    }

    /// A change of a regular file's data that leaves its size (a write in
    /// place, an `fallocate` that allocates nothing; see
    /// [`may_change_in_place`](Self::may_change_in_place)): its
    /// modification and change times are `now`, on the calling CPU's
    /// record only, so such changes on two CPUs share no line.
    pub(crate) fn data_changed_in_place(&self, now: Timespec) {
        self.changes.get_or_init(PercpuChanges::new).record(0, now.as_nanos());
    }

    /// The latest time of a per-CPU change (see
    /// [`data_changed_in_place`](Self::data_changed_in_place)), if any;
    /// reads every CPU's record.
    pub(crate) fn latest_percpu_change(&self) -> Option<Timespec> {
        let changes = self.changes.get()?;
        changes.snapshot(|| ()).1.map(Timespec::from_nanos)
    }

    /// The attributes as `stat` reports them (no lock, no shared write).
    pub fn stat(&self) -> Stat {
        let a = self.folded_attrs();
        Stat {
            ino: self.ino,
            mode: a.mode,
            nlink: a.nlink,
            uid: a.uid,
            gid: a.gid,
            size: a.size,
            blocks: match &self.body {
                Body::Regular(data) => data.blocks(),
                _ => 0,
            },
            rdev: match self.body {
                Body::Special(_, rdev) => rdev,
                _ => 0,
            },
            atime: a.atime,
            mtime: a.mtime,
            ctime: a.ctime,
        }
    }

    pub(crate) fn is_dir(&self) -> bool {
        matches!(self.body, Body::Directory(_))
    }

    pub(crate) fn dir(&self) -> VfsResult<&Directory> {
        match &self.body {
            Body::Directory(d) => Ok(d),
            _ => Err(Errno::ENOTDIR),
        }
    }

    /// A symlink's target; `None` for other types.
    pub fn symlink_target(&self) -> Option<&[u8]> {
        match &self.body {
            Body::Symlink(target) => Some(target),
            _ => None,
        }
    }

    /// Sets the permission bits, owner and group of `spec`, and whichever
    /// of its size, link count and times it sets.
    pub(crate) fn set_attributes(&self, spec: &NewInode) {
        let now = Timespec::now();
        self.update_meta(|a| {
            a.mode = (a.mode & !0o7777) | (spec.perm & 0o7777);
            a.uid = spec.uid;
            a.gid = spec.gid;
            a.nlink = spec.nlink.unwrap_or(a.nlink);
            a.ctime = spec.ctime.map_or(a.ctime, |ctime| ctime.min(now));
        });
        self.update_content_setting(spec.mtime.is_some(), |a| {
            a.size = spec.size.unwrap_or(a.size);
            a.atime = spec.atime.unwrap_or(a.atime);
            a.mtime = spec.mtime.unwrap_or(a.mtime);
            a.ctime = spec.ctime.unwrap_or(a.ctime);
        });
    }

    /// Checks `mask` access for `cred` against the mode and owner (Linux
    /// `generic_permission`); search on a directory everyone may search is
    /// decided from one load. Takes no lock and writes nothing shared, so
    /// rcu-walk may call it.
    pub fn generic_permission(&self, cred: &crate::Credentials, mask: crate::cred::Access) -> VfsResult<()> {
        self.permission_fast(cred, mask)
    }

    /// A directory's revision, which a filesystem whose names change
    /// behind the dcache bumps when its children change; `None` for
    /// another type. Negative dentries record it
    /// ([`Filesystem::revalidate_negative`](crate::fs::Filesystem::revalidate_negative)).
    pub fn dir_revision(&self) -> Option<u64> {
        self.dir().ok().map(Directory::rev)
    }

    /// Checks `mask` access for `cred` (Linux `generic_permission`): from
    /// the mode and owner words, as Linux reads `i_mode`, `i_uid` and
    /// `i_gid` each on its own, so a check reads nothing a write of the
    /// file or a change of its times writes.
    pub(crate) fn permission(&self, cred: &crate::Credentials, mask: crate::cred::Access) -> VfsResult<()> {
        let (uid, gid) = self.owner();
        crate::cred::permission(self.mode(), uid, gid, cred, mask)
    }

    /// Search permission on a directory, as every walk step checks it. A
    /// directory everyone may search is decided from one load of the mode,
    /// the fast path Linux takes before `generic_permission`.
    #[inline]
    pub(crate) fn may_search(&self, cred: &crate::Credentials) -> VfsResult<()> {
        self.permission_fast(cred, crate::cred::Access::EXEC)
    }

    /// [`permission`](Self::permission) that first checks, with one load
    /// of the mode, whether every class (owner, group, other) has all of
    /// `mask`: then anyone may, whichever class the caller falls in.
    #[inline]
    pub(crate) fn permission_fast(&self, cred: &crate::Credentials, mask: crate::cred::Access) -> VfsResult<()> {
        let all_classes = mask.bits() * 0o111;
        if self.mode.load(Ordering::Acquire) & all_classes == all_classes {
            return Ok(());
        }
        self.permission(cred, mask)
    }

    /// Adds `delta` to the link count; returns the count before.
    pub(crate) fn change_nlink(&self, delta: i32) -> u32 {
        let now = Timespec::now();
        let (mut before, mut nlink) = (0, 0);
        self.update_meta(|a| {
            before = a.nlink;
            a.nlink = a.nlink.checked_add_signed(delta).expect("nlink stays within u32");
            a.ctime = now;
            nlink = a.nlink;
        });
        self.nlink_changed(nlink);
        before
    }

    /// Adds a link unless the last one has gone (Linux checks `i_nlink`
    /// under the inode's lock in `vfs_link`): the check and the add are
    /// one update, so a link racing the unlink of the last name comes
    /// before it or fails with ENOENT, never bringing the file back.
    pub(crate) fn add_link(&self) -> VfsResult<()> {
        let now = Timespec::now();
        let mut linked = false;
        self.update_meta(|a| {
            if a.nlink != 0 {
                a.nlink += 1;
                a.ctime = now;
                linked = true;
            }
        });
        if linked {
            Ok(())
        } else {
            Err(Errno::ENOENT)
        }
    }

    /// Removes an empty directory, locked whole: its link count, which is
    /// 2 (its name and its `.`) whatever its split records hold, drops by
    /// both, so it reads 0 with them folded in, without reading the
    /// records (other CPUs' lines).
    pub(crate) fn remove_empty_dir(&self) {
        self.update_meta(|a| a.nlink = a.nlink.wrapping_sub(2));
        self.nlink_changed(0);
    }

    /// The last link went: open files stop keeping the inode per CPU.
    /// The unlink only marks the per-CPU ref dying; its fold, which visits
    /// every CPU's slot (lines those CPUs write for other objects), runs
    /// after a grace period ([`FinishKill`]), as Linux folds a killed
    /// `percpu_ref` in an RCU callback.
    fn nlink_changed(&self, nlink: u32) {
        if nlink != 0 {
            return;
        }
        if let Some(r) = self.opens.start_kill() {
            let reclaim = &self.registry.reclaim;
            reclaim.defer(&crossbeam_epoch::pin(), FinishKill(std::ptr::NonNull::from(r)));
        }
    }
}

impl Directory {
    /// The parent directory, valid while `guard` is pinned; `None` for the
    /// root.
    pub fn parent<'g>(&self, guard: &'g Guard) -> Option<&'g Arc<Inode>> {
        // SAFETY: the parent is replaced only by `set_parent`, which releases
        // the old one through the epoch, so it outlives the pinned guard,
        // and taken by `take_parent`, when no reader is left.
        unsafe { self.parent.load(Ordering::Acquire, guard).as_ref() }.map(|link| &*link.inode)
    }

    /// Re-parents a moved directory; the caller holds the rename lock for
    /// writing.
    pub fn set_parent(&self, parent: ParentLink, reclaim: &Arc<Reclaim>, guard: &Guard) {
        let old = self.parent.swap(Owned::new(parent), Ordering::AcqRel, guard);
        if !old.is_null() {
            // SAFETY: `old` is no longer reachable from this directory; the
            // box is only freed by the deferred release, after every guard
            // pinned now has unpinned.
            reclaim.defer(guard, unsafe { old.into_owned() });
        }
    }

    /// Takes the link to the parent, leaving none.
    ///
    /// # Safety
    ///
    /// No reader may read the link any more: the directory is being
    /// dropped, or its superblock is (every reader of the link, a walk's
    /// `..`, rename's check for loops, readdir's `..` entry, a mount's
    /// step up, runs through a mount or a file, which holds its mount, of
    /// this superblock, or is handed the superblock itself; a mount is
    /// freed through the epoch after its last rcu-walker).
    pub unsafe fn take_parent(&self) -> Option<Box<ParentLink>> {
        // SAFETY: no reader is left (the caller's promise), so the link can
        // be freed at once rather than through the epoch.
        unsafe {
            let old = self.parent.swap(Shared::null(), Ordering::AcqRel, crossbeam_epoch::unprotected());
            (!old.is_null()).then(|| old.into_owned().into_box())
        }
    }

    pub fn is_dead(&self) -> bool {
        self.dead.load(Ordering::Acquire)
    }

    pub fn mark_dead(&self) {
        self.dead.store(true, Ordering::Release);
    }

    pub fn rev(&self) -> u64 {
        self.rev.load(Ordering::Acquire)
    }

    pub fn bump_rev(&self) {
        self.rev.fetch_add(1, Ordering::AcqRel);
    }
}

impl Drop for Directory {
    fn drop(&mut self) {
        crate::dirents::release(self.entries.take());
        // SAFETY: the directory is being dropped, so no reader can reach its
        // parent link any more.
        drop(unsafe { self.take_parent() });
    }
}

impl Drop for Inode {
    fn drop(&mut self) {
        if let Body::Regular(pages) = &self.body {
            crate::pages::PageBudget::uncharge(&*self.registry.space, pages.pages());
        }
        if self.registry.space.limits_inodes() {
            let own = if *self.charged.get_mut() { BOGO_INODE_SIZE } else { 0 };
            self.registry.space.give_ispace(own + self.xattrs.space());
        }
        if let Some(handle) = self.list_handle.get() {
            let removed = self.registry.list.remove(*handle);
            debug_assert!(removed.is_some(), "inode {} missing from the inode list", self.ino);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::mem::{offset_of, size_of};
    use vfscale_sync::audit::LINE_SIZE;

    /// A release may run while its thread exits (crossbeam-epoch's last
    /// pin runs deferred work), after the destructors of the thread's
    /// other locals: here a local made before the finish's cells were
    /// first touched, so destroyed after them, hands an inode to
    /// `claim`. It gets the inode back (no finish runs), and the thread
    /// exits cleanly (the cells need no destructor; with one, `claim`
    /// panicked there and the process aborted).
    #[test]
    fn a_release_while_its_thread_exits_keeps_its_inode() {
        struct AtExit(std::cell::RefCell<Option<(Arc<Inode>, std::sync::mpsc::Sender<bool>)>>);
        impl Drop for AtExit {
            fn drop(&mut self) {
                if let Some((inode, kept)) = self.0.borrow_mut().take() {
                    kept.send(FinishKill::claim(inode).is_some()).unwrap();
                }
            }
        }
        thread_local! {
            static AT_EXIT: AtExit = const { AtExit(std::cell::RefCell::new(None)) };
        }
        let vfs = crate::Vfs::default();
        let (root, probe) = (Arc::clone(&vfs.sb.root), Arc::clone(&vfs.sb.root));
        let (kept, back) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            AT_EXIT.with(|at_exit| *at_exit.0.borrow_mut() = Some((root, kept)));
            // The finish's cells, touched after the local above.
            assert!(FinishKill::claim(probe).is_some());
        })
        .join()
        .unwrap();
        assert!(back.recv().unwrap(), "the exiting thread's release lost its inode");
    }

    /// The lock context and the open counts, which every lock request and
    /// open reads, start a whole line past the attributes every change
    /// writes, and the extended attributes' pointer, which every getxattr
    /// reads, ends a whole line before them, wherever the inode lies: a
    /// change of a file shares no line with a lock request or a getxattr
    /// on it; nor does a file's first lock with its opens.
    #[test]
    fn what_changes_write_lies_a_line_from_what_lock_requests_opens_and_getxattrs_read() {
        let written_end = offset_of!(Inode, setid) + size_of::<AtomicBool>();
        let xattrs_end = offset_of!(Inode, xattrs) + size_of::<crate::xattr_store::Xattrs>();
        assert!(
            offset_of!(Inode, meta) >= xattrs_end + LINE_SIZE,
            "the extended attributes are read apart from changes"
        );
        let meta_end = offset_of!(Inode, meta) + size_of::<SeqLock<MetaAttrs>>();
        assert!(offset_of!(Inode, content) >= meta_end + LINE_SIZE, "the two cells lie a line apart");
        let attr_lock_end = offset_of!(Inode, attr_changes) + size_of::<Mutex<()>>();
        assert!(offset_of!(Inode, attr_changes) >= offset_of!(Inode, meta), "the attribute lock lies with the mode");
        assert!(offset_of!(Inode, content) >= attr_lock_end + LINE_SIZE, "and a line from the content");
        assert!(offset_of!(Inode, setid) > offset_of!(Inode, content), "the set-id flag lies with the content");
        assert!(offset_of!(Inode, locks) >= written_end + LINE_SIZE);
        let locks_end = offset_of!(Inode, locks) + size_of::<crate::locks::InodeLocks>();
        assert!(offset_of!(Inode, opens) >= locks_end + LINE_SIZE, "the first lock's write is apart from opens");
    }
}
