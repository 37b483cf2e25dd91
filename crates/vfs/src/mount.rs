//! Mounts and mount namespaces (Linux `fs/namespace.c`, `fs/mount.h`).
//!
//! Invariant: a namespace's mount table is an immutable snapshot, replaced
//! whole by a writer that holds the namespace's writer lock and has a
//! write section of its `gate` seqcount open; walks read the snapshot they
//! loaded under their epoch guard, with no lock and no write, and a walk
//! that keeps a mount (an open file's) confirms against the gate
//! (`vfscale_sync::seq_gate`) that no `umount` began meanwhile. A mount's
//! memory lives until it is killed (unmounted, or its instance's last
//! handle gone) and its last [`MountRef`] is dropped, and then one grace
//! period more, so a walk that still sees it in an old snapshot reads
//! freed memory never.
//!
//! A mount is a (superblock, root inode) pair with per-mount flags; the
//! table maps each mount point — a (parent mount, inode) pair — to the
//! mount on it, and each mount to its parent and mount point. Mounts stack:
//! mounting on a path that is a mount root already puts the new mount on
//! that root, as Linux's `lock_mount` does. A walk looks the table up only
//! at inodes whose mount count is not zero (Linux's `DCACHE_MOUNTED`).
//!
//! References: a mount's users (open files, a process's root and working
//! directory, a ref-walk's positions) hold [`MountRef`]s, counted in a
//! [`PercpuRef`] (Linux's `mnt_pcp`), so taking and dropping one writes
//! only the CPU's own slot. `umount` counts them exactly in the gate's
//! write section: more than the mounted reference is EBUSY.
//!
//! May import the base modules, the node types, `superblock` and `locks`.

use crate::errno::{Errno, VfsResult};
use crate::inode::Inode;
use crate::locks::LockManager;
use crate::superblock::SuperBlock;
use std::collections::HashMap;
use std::fmt;
use std::hash::{BuildHasherDefault, Hasher};
use std::ptr::NonNull;
use std::sync::Arc;
use vfscale_sync::audited::{fence, AtomicPtr, AtomicU32, AtomicU64, EpochAtomic, Mutex, Ordering};
use vfscale_sync::pad::LinePad;
use vfscale_sync::{seq_gate, PercpuCounter, PercpuRef, SeqCount};

/// Per-mount flags (`mount(2)`'s `MS_*` values).
#[derive(Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct MountFlags(pub u32);

impl MountFlags {
    /// No flag: read-write, set-ID bits honoured, devices and programs
    /// usable.
    pub const NONE: MountFlags = MountFlags(0);
    /// `MS_RDONLY`: every change through the mount is EROFS.
    pub const RDONLY: MountFlags = MountFlags(libc::MS_RDONLY as u32);
    /// `MS_NOSUID`: set-ID bits are not honoured on exec (the library
    /// runs no programs; the flag is kept and shown).
    pub const NOSUID: MountFlags = MountFlags(libc::MS_NOSUID as u32);
    /// `MS_NODEV`: opening a device node is EACCES.
    pub const NODEV: MountFlags = MountFlags(libc::MS_NODEV as u32);
    /// `MS_NOEXEC`: `access(X_OK)` of a regular file is EACCES.
    pub const NOEXEC: MountFlags = MountFlags(libc::MS_NOEXEC as u32);
    /// Every per-mount flag.
    pub const ALL: MountFlags = MountFlags(Self::RDONLY.0 | Self::NOSUID.0 | Self::NODEV.0 | Self::NOEXEC.0);

    /// Whether every flag of `other` is set.
    pub fn contains(self, other: MountFlags) -> bool {
        self.0 & other.0 == other.0
    }

    /// The flags of `self` and `other`.
    pub fn union(self, other: MountFlags) -> MountFlags {
        MountFlags(self.0 | other.0)
    }

    /// These flags, or EINVAL if any is not a per-mount flag.
    pub fn checked(self) -> VfsResult<MountFlags> {
        if self.0 & !Self::ALL.0 != 0 {
            return Err(Errno::EINVAL);
        }
        Ok(self)
    }

    /// The options field of a `mountinfo` line: `rw` or `ro`, then the
    /// others in Linux's order.
    pub fn options(self) -> String {
        let mut options = String::from(if self.contains(Self::RDONLY) { "ro" } else { "rw" });
        for (flag, name) in [(Self::NOSUID, "nosuid"), (Self::NODEV, "nodev"), (Self::NOEXEC, "noexec")] {
            if self.contains(flag) {
                options.push(',');
                options.push_str(name);
            }
        }
        options.push_str(",relatime");
        options
    }
}

impl std::ops::BitOr for MountFlags {
    type Output = MountFlags;
    fn bitor(self, other: MountFlags) -> MountFlags {
        self.union(other)
    }
}

impl fmt::Debug for MountFlags {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "MountFlags({})", self.options())
    }
}

static NEXT_MOUNT_ID: AtomicU64 = AtomicU64::new(1);

/// Set in a mount's flags word while a remount to read-only counts the
/// mount's writers (Linux `MNT_WRITE_HOLD`); never one of the flags shown.
const WRITE_HOLD: u32 = 1 << 31;

/// One mount: a filesystem instance's superblock seen from `root`, with
/// per-mount flags.
#[repr(C)]
pub struct Mount {
    /// Every operation through the mount reads its fields: a line of
    /// never-touched bytes at each end keeps heap neighbours' writes (a
    /// new inode's counts) off their lines.
    _before: LinePad,
    id: u64,
    pub(crate) sb: Arc<SuperBlock>,
    pub(crate) locks: Arc<LockManager>,
    root: Arc<Inode>,
    flags: AtomicU32,
    users: PercpuRef,
    /// Files open for writing through the mount and changes under way
    /// through it (Linux `mnt_writers`): a remount to read-only is EBUSY
    /// while any is counted.
    writers: PercpuCounter,
    _after: LinePad,
}

impl fmt::Debug for Mount {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Mount").field("id", &self.id).field("flags", &self.flags()).finish_non_exhaustive()
    }
}

impl Mount {
    /// The mount id (`mountinfo`'s first field), unique in the process.
    pub fn id(&self) -> u64 {
        self.id
    }

    /// The directory (or file, for a file bind mount) the mount shows.
    pub fn root(&self) -> &Arc<Inode> {
        &self.root
    }

    /// The per-mount flags now.
    pub fn flags(&self) -> MountFlags {
        MountFlags(self.flags.load(Ordering::Acquire) & !WRITE_HOLD)
    }

    /// EROFS on a read-only mount, a check that holds nothing (Linux
    /// `__mnt_is_readonly`, as `faccessat` asks it).
    #[inline]
    pub(crate) fn check_writable(&self) -> VfsResult<()> {
        if self.flags().contains(MountFlags::RDONLY) || self.sb.read_only {
            return Err(Errno::EROFS);
        }
        Ok(())
    }

    /// Write access for one change through the mount, held until the
    /// guard drops (Linux `mnt_want_write` .. `mnt_drop_write`): EROFS on
    /// a read-only mount, and a remount to read-only is EBUSY while the
    /// guard lives, so no change that passed the check lands after such
    /// a remount returned.
    #[inline]
    pub(crate) fn want_write(&self) -> VfsResult<MountWrite<'_>> {
        let cpu = self.count_writer()?;
        Ok(MountWrite { mount: self, cpu })
    }

    /// Write access for a file opened for writing, held until it closes
    /// (Linux `mnt_get_write_access`): EROFS on a read-only mount.
    pub(crate) fn get_write_access(this: &MountRef) -> VfsResult<WriteAccess> {
        let cpu = this.count_writer()?;
        Ok(WriteAccess { mount: this.clone(), cpu })
    }

    /// Counts a writer on the calling CPU's slot of `writers` and returns
    /// the slot, or EROFS (counting nothing) on a read-only mount.
    ///
    /// The writer is counted first, then the flags are read, while a
    /// remount to read-only sets `WRITE_HOLD` first, then counts (a
    /// `SeqCst` fence between on both sides): either the remount sees
    /// this writer and is EBUSY, or this sees the hold, waits for the
    /// remount to end and then sees whether the mount is read-only.
    #[inline]
    fn count_writer(&self) -> VfsResult<usize> {
        let cpu = self.writers.add(1);
        fence(Ordering::SeqCst);
        let mut flags = self.flags.load(Ordering::Acquire);
        // The hold lasts a few instructions under the namespace's writer
        // lock, which cannot block while holding it.
        while flags & WRITE_HOLD != 0 {
            std::thread::yield_now();
            flags = self.flags.load(Ordering::Acquire);
        }
        if MountFlags(flags).contains(MountFlags::RDONLY) || self.sb.read_only {
            self.writers.add_at(cpu, -1);
            return Err(Errno::EROFS);
        }
        Ok(cpu)
    }

    /// Whether it was unmounted (or its instance's last handle dropped):
    /// in no namespace any more.
    pub(crate) fn is_detached(&self) -> bool {
        self.users.is_dying()
    }

    /// The file-lock state of its instance.
    pub fn locks(&self) -> &Arc<LockManager> {
        &self.locks
    }

    /// The filesystem type `mountinfo` shows.
    pub fn fs_type(&self) -> &'static str {
        self.sb.fs_type()
    }
}

/// One change's write access to a mount ([`Mount::want_write`]), given
/// back when dropped.
#[must_use = "a change holds its write access until it is done"]
pub(crate) struct MountWrite<'a> {
    mount: &'a Mount,
    /// The slot of the mount's writer count it was added to.
    cpu: usize,
}

impl MountWrite<'_> {
    /// The same write access, owned, to outlive the borrow of the mount:
    /// `mount` is the mount it was taken on (an `open` that created its
    /// file keeps it for the file, or until the open is done).
    pub(crate) fn keep(self, mount: &MountRef) -> WriteAccess {
        debug_assert!(std::ptr::eq(self.mount, &**mount), "write access kept on another mount");
        let cpu = self.cpu;
        std::mem::forget(self);
        WriteAccess { mount: mount.clone(), cpu }
    }
}

impl Drop for MountWrite<'_> {
    fn drop(&mut self) {
        self.mount.writers.add_at(self.cpu, -1);
    }
}

/// Owned write access to a mount ([`Mount::get_write_access`], or a
/// create's kept by its `open`: [`MountWrite::keep`]), given back when
/// dropped.
pub(crate) struct WriteAccess {
    mount: MountRef,
    /// The slot of the mount's writer count it was added to.
    cpu: usize,
}

impl Drop for WriteAccess {
    fn drop(&mut self) {
        self.mount.writers.add_at(self.cpu, -1);
    }
}

impl fmt::Debug for WriteAccess {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("WriteAccess").field("mount", &self.mount.id).finish()
    }
}

/// A counted reference to a [`Mount`]: cloning and dropping one adds to
/// and takes from the calling CPU's slot of the mount's count.
pub struct MountRef {
    mount: NonNull<Mount>,
}

// SAFETY: a MountRef is a counted shared reference to a `Mount`, which is
// `Sync` (its fields are atomics, Arcs of Sync types and a PercpuRef).
unsafe impl Send for MountRef {}
// SAFETY: as above; `&MountRef` only gives `&Mount`.
unsafe impl Sync for MountRef {}

impl MountRef {
    /// A new mount of `sb` from `root` (mounted: it holds the initial
    /// reference of its count, which [`kill`](Self::kill) drops), and a
    /// reference to it.
    pub(crate) fn new(sb: Arc<SuperBlock>, locks: Arc<LockManager>, root: Arc<Inode>, flags: MountFlags) -> MountRef {
        let home = Arc::new(AtomicPtr::<Mount>::new(std::ptr::null_mut()));
        let freed = Arc::clone(&home);
        let users = PercpuRef::new(move || {
            let mount = SendPtr(freed.load(Ordering::Acquire));
            let guard = crossbeam_epoch::pin();
            // SAFETY: the count reached zero after the kill, so no MountRef
            // is left and no table lists the mount; walks that read an old
            // table are pinned, so the epoch frees it after them. It was
            // made by `Box::into_raw` below and is freed once.
            unsafe { guard.defer_unchecked(move || drop(Box::from_raw(mount.into_inner()))) };
        });
        let id = NEXT_MOUNT_ID.fetch_add(1, Ordering::Relaxed);
        let mount = Box::into_raw(Box::new(Mount {
            _before: LinePad::new(),
            id,
            sb,
            locks,
            root,
            flags: AtomicU32::new(flags.0),
            users,
            writers: PercpuCounter::new(),
            _after: LinePad::new(),
        }));
        home.store(mount, Ordering::Release);
        // SAFETY: `mount` is the live box just made; the reference taken
        // here is the MountRef's own, beside the initial one.
        unsafe {
            (*mount).users.get();
            MountRef { mount: NonNull::new_unchecked(mount) }
        }
    }

    /// A reference to `mount`, which the caller found in a table it read
    /// under `guard`, or which is otherwise known not freed; `None` if its
    /// count has reached zero (it is being freed).
    #[inline]
    pub(crate) fn try_get(mount: &Mount) -> Option<MountRef> {
        Self::try_get_on(mount, vfscale_sync::cpu::current_cpu())
    }

    /// [`try_get`](Self::try_get) counted on `cpu`'s slot, for an operation
    /// that looked its CPU up once for several per-CPU counts (see
    /// [`PercpuRef::get_on`](vfscale_sync::PercpuRef::get_on)).
    #[inline]
    pub(crate) fn try_get_on(mount: &Mount, cpu: usize) -> Option<MountRef> {
        mount.users.tryget_many_on(cpu, 1).then(|| MountRef { mount: NonNull::from(mount) })
    }

    /// Drops the reference, counted on `cpu`'s slot (as
    /// [`try_get_on`](Self::try_get_on)).
    #[inline]
    pub(crate) fn drop_on(self, cpu: usize) {
        let this = std::mem::ManuallyDrop::new(self);
        this.put_on(cpu);
    }

    #[inline]
    fn put_on(&self, cpu: usize) {
        // The last put defers the free through the epoch; pinned, this
        // thread is done with the mount before the free can run.
        let _guard = crossbeam_epoch::pin();
        self.users.put_on(cpu, 1);
    }
}

impl Mount {
    /// Unmounts: drops the mounted (initial) reference; the mount is freed
    /// after its last `MountRef`. Only its owner (the namespace's writer,
    /// after unpublishing it; an instance's last handle) calls it, once.
    pub(crate) fn kill(&self) {
        self.users.kill();
    }
}

struct SendPtr(*mut Mount);

// SAFETY: the pointer is handed to the epoch's collector to free a Mount,
// which is Send.
unsafe impl Send for SendPtr {}

impl SendPtr {
    fn into_inner(self) -> *mut Mount {
        self.0
    }
}

impl std::ops::Deref for MountRef {
    type Target = Mount;
    #[inline]
    fn deref(&self) -> &Mount {
        // SAFETY: this reference keeps the count above zero, so the mount
        // is not freed (see `MountRef::new`).
        unsafe { self.mount.as_ref() }
    }
}

impl Clone for MountRef {
    #[inline]
    fn clone(&self) -> MountRef {
        self.users.get();
        MountRef { mount: self.mount }
    }
}

impl Drop for MountRef {
    #[inline]
    fn drop(&mut self) {
        self.put_on(vfscale_sync::cpu::current_cpu());
    }
}

impl fmt::Debug for MountRef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&**self, f)
    }
}

/// The mount of an instance by itself, outside any namespace (Linux's
/// `kern_mount`): what a [`Context`](crate::Context) made from a `Vfs`
/// walks in. Killed when the instance's last handle goes.
pub(crate) struct InternalMount(pub MountRef);

impl Drop for InternalMount {
    fn drop(&mut self) {
        self.0.kill();
    }
}

impl fmt::Debug for InternalMount {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&self.0, f)
    }
}

/// A place in a namespace: a mount and an inode of it (Linux's
/// `struct path`).
#[derive(Debug, Clone)]
pub struct Location {
    /// The mount.
    pub mount: MountRef,
    /// The inode, seen through `mount`.
    pub inode: Arc<Inode>,
}

/// Where a mount sits: its parent mount, the inode it covers there, and,
/// for a mount on a file, the directory and name of that file (for
/// `mountinfo`).
#[derive(Clone)]
pub(crate) struct MountPoint {
    pub parent: NonNull<Mount>,
    pub inode: Arc<Inode>,
    pub place: Option<(Arc<Inode>, Box<[u8]>)>,
}

/// One mount of a table.
#[derive(Clone)]
pub(crate) struct Mounted {
    pub mount: NonNull<Mount>,
    pub at: Option<MountPoint>,
    /// `mountinfo`'s root field: the path of the mount's root in its
    /// filesystem.
    pub root_path: RootPath,
    pub source: Box<str>,
}

/// Where a mount's root is in its filesystem, for `mountinfo`.
#[derive(Clone)]
pub(crate) struct RootPath {
    /// The path when the mount was made.
    pub path: Box<[u8]>,
    /// For a file root, the directory and name it was found by, from
    /// which its path is read again at each `mountinfo` (a file has no
    /// parent pointer to climb).
    pub place: Option<(Arc<Inode>, Box<[u8]>)>,
}

/// A snapshot of a namespace's mounts.
#[derive(Clone, Default)]
pub(crate) struct MountTable {
    /// In mount order; the namespace's root mount first.
    pub mounts: Vec<Mounted>,
    /// Mount point (parent mount id, covered inode's address) to the index
    /// of the mount on it.
    children: HashMap<(u64, usize), usize, BuildHasherDefault<KeyHasher>>,
    by_id: HashMap<u64, usize, BuildHasherDefault<KeyHasher>>,
}

/// A multiply-rotate hash for the table's keys, mount ids and inode
/// addresses: a walk hashes one at every crossing, where SipHash cost it
/// a tenth of a look-up. The keys are the library's own numbers, never a
/// caller's bytes, so nobody can choose them to collide.
#[derive(Default)]
pub(crate) struct KeyHasher(u64);

impl Hasher for KeyHasher {
    fn finish(&self) -> u64 {
        self.0
    }

    fn write(&mut self, bytes: &[u8]) {
        for &byte in bytes {
            self.write_u64(u64::from(byte));
        }
    }

    #[inline]
    fn write_u64(&mut self, word: u64) {
        self.0 = (self.0.rotate_left(26) ^ word).wrapping_mul(0x9e37_79b9_7f4a_7c15);
    }

    #[inline]
    fn write_usize(&mut self, word: usize) {
        self.write_u64(word as u64);
    }
}

// SAFETY: the table's pointers are to mounts it holds mounted (their
// initial reference not killed while they are listed), which are Sync.
unsafe impl Send for MountTable {}
// SAFETY: as above.
unsafe impl Sync for MountTable {}

fn key(mount: &Mount, inode: &Inode) -> (u64, usize) {
    (mount.id, inode as *const Inode as usize)
}

impl MountTable {
    fn rebuild(&mut self) {
        self.children.clear();
        self.by_id.clear();
        for (i, m) in self.mounts.iter().enumerate() {
            // SAFETY: listed mounts are live (the table's invariant).
            let mount = unsafe { m.mount.as_ref() };
            self.by_id.insert(mount.id, i);
            if let Some(at) = &m.at {
                // SAFETY: as above, for the parent.
                let parent = unsafe { at.parent.as_ref() };
                self.children.insert(key(parent, &at.inode), i);
            }
        }
    }

    /// The mount on `inode` of `mount`, if one is.
    #[inline]
    pub fn child(&self, mount: &Mount, inode: &Inode) -> Option<&Mount> {
        let i = *self.children.get(&key(mount, inode))?;
        // SAFETY: listed mounts are live while the table is readable.
        Some(unsafe { self.mounts[i].mount.as_ref() })
    }

    /// The parent mount of `mount` and the inode it covers there; `None`
    /// for the namespace's root and a mount not in the table.
    #[inline]
    pub fn parent(&self, mount: &Mount) -> Option<(&Mount, &Arc<Inode>)> {
        let at = self.mounts[*self.by_id.get(&mount.id)?].at.as_ref()?;
        // SAFETY: as in `child`.
        Some((unsafe { at.parent.as_ref() }, &at.inode))
    }

    /// The entry of `mount`, if the table lists it.
    pub fn entry(&self, mount: &Mount) -> Option<&Mounted> {
        Some(&self.mounts[*self.by_id.get(&mount.id)?])
    }

    /// The indices of `mount`'s descendants, in depth-first preorder with
    /// each mount's children in mount order (Linux `next_mnt`, the order
    /// in which `copy_tree` copies a recursive bind's mounts).
    fn descendants(&self, mount: &Mount) -> Vec<usize> {
        let children = |id: u64| {
            self.mounts.iter().enumerate().filter_map(move |(i, m)| {
                // SAFETY: as in `child`.
                let parent = m.at.as_ref().map(|at| unsafe { at.parent.as_ref() }.id);
                (parent == Some(id)).then_some(i)
            })
        };
        let mut found = Vec::new();
        let mut pending: Vec<usize> = children(mount.id).collect();
        pending.reverse();
        while let Some(i) = pending.pop() {
            found.push(i);
            // SAFETY: as in `child`.
            let id = unsafe { self.mounts[i].mount.as_ref() }.id;
            let at = pending.len();
            pending.extend(children(id));
            pending[at..].reverse();
        }
        found
    }
}

/// A mount namespace: a tree of mounts, read by walks without a lock.
/// Padded: two namespaces made one after the other may sit side by side
/// on the heap, and a mount in one would then write the line a walk in
/// the other reads (`commute`'s `mount-walk-vs-mount-other-ns` caught it
/// under mimalloc, which keeps blocks of one size together).
#[repr(C)]
pub struct MountNamespace {
    _head: LinePad,
    /// Linux's `mount_lock` seqcount: every change to the table is a
    /// write section.
    pub(crate) gate: SeqCount,
    table: EpochAtomic<MountTable>,
    /// Serializes the writers (Linux's `namespace_sem`).
    writer: Mutex<()>,
    _tail: LinePad,
}

impl fmt::Debug for MountNamespace {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("MountNamespace").finish_non_exhaustive()
    }
}

impl Drop for MountNamespace {
    fn drop(&mut self) {
        // SAFETY: dropped, so no walk reads the table any more.
        let table = unsafe { std::mem::take(&mut self.table).into_owned() }.into_box();
        for m in table.mounts.iter().rev() {
            // SAFETY: listed mounts are live; the namespace's end unmounts
            // each (their users keep them until done).
            let mount = unsafe { m.mount.as_ref() };
            if let Some(at) = &m.at {
                at.inode.count_mount(-1);
            }
            mount.kill();
        }
    }
}

impl MountNamespace {
    /// A namespace whose root mount is `root`.
    pub(crate) fn with_root(root: MountRef, source: &str) -> MountNamespace {
        let mut table = MountTable::default();
        table.mounts.push(Mounted {
            mount: NonNull::from(&*root),
            at: None,
            root_path: RootPath { path: Box::from(&b"/"[..]), place: None },
            source: source.into(),
        });
        table.rebuild();
        // The table holds the initial reference; this one goes.
        drop(root);
        MountNamespace::of(table)
    }

    /// The table now, for as long as `guard` is pinned.
    #[inline]
    pub(crate) fn table<'g>(&self, guard: &'g crossbeam_epoch::Guard) -> &'g MountTable {
        // SAFETY: the table is never null (set at construction, replaced
        // by `publish`, which frees the old one through the epoch).
        unsafe { self.table.load(Ordering::Acquire, guard).deref() }
    }

    /// The root mount.
    pub(crate) fn root_mount(&self) -> MountRef {
        let guard = crossbeam_epoch::pin();
        let root = self.table(&guard).mounts[0].mount;
        // SAFETY: listed, so live; mounted, so its count is above zero.
        MountRef::try_get(unsafe { root.as_ref() }).expect("a listed mount is live")
    }

    /// Runs `change` on a copy of the table under the writer lock, inside
    /// a write section of the gate, and publishes the copy if `change`
    /// succeeds. `change` gets the open section, for exact counts.
    pub(crate) fn change<R>(
        &self,
        change: impl FnOnce(&mut MountTable, &vfscale_sync::seqcount::SeqWriteGuard<'_>) -> VfsResult<R>,
    ) -> VfsResult<R> {
        let _writer = self.writer.lock().unwrap_or_else(|e| e.into_inner());
        let guard = crossbeam_epoch::pin();
        let mut table = self.table(&guard).clone();
        let section = self.gate.write_begin();
        let result = change(&mut table, &section)?;
        table.rebuild();
        let old = self.table.swap(crossbeam_epoch::Owned::new(table), Ordering::AcqRel, &guard);
        drop(section);
        // SAFETY: unpublished, so only walks pinned before the swap can
        // read it; the epoch frees it after them.
        unsafe { guard.defer_destroy(old) };
        Ok(result)
    }
}

impl MountNamespace {
    fn of(table: MountTable) -> MountNamespace {
        MountNamespace {
            _head: LinePad::new(),
            gate: SeqCount::new(),
            table: EpochAtomic::new(table),
            writer: Mutex::new(()),
            _tail: LinePad::new(),
        }
    }

    /// A copy of this namespace (`unshare(CLONE_NEWNS)`), every mount
    /// copied with its flags, and `places` moved to the copies of their
    /// mounts (a place on a mount outside the table stays as it is).
    /// Propagation is private: later mounts in either namespace do not
    /// appear in the other.
    pub(crate) fn copy(&self, places: &mut [&mut Location]) -> MountNamespace {
        let _writer = self.writer.lock().unwrap_or_else(|e| e.into_inner());
        let guard = crossbeam_epoch::pin();
        let old = self.table(&guard);
        let mut copies: Vec<(u64, MountRef)> = Vec::new();
        let mut table = MountTable::default();
        for m in &old.mounts {
            // SAFETY: listed, so live while the guard is pinned.
            let mount = unsafe { m.mount.as_ref() };
            let copy =
                MountRef::new(Arc::clone(&mount.sb), Arc::clone(&mount.locks), Arc::clone(&mount.root), mount.flags());
            let at = m.at.as_ref().map(|at| {
                // SAFETY: as above.
                let parent_id = unsafe { at.parent.as_ref() }.id;
                let parent = copies.iter().find(|(id, _)| *id == parent_id).expect("parents come first");
                at.inode.count_mount(1);
                MountPoint { parent: NonNull::from(&*parent.1), inode: Arc::clone(&at.inode), place: at.place.clone() }
            });
            table.mounts.push(Mounted {
                mount: NonNull::from(&*copy),
                at,
                root_path: m.root_path.clone(),
                source: m.source.clone(),
            });
            copies.push((mount.id, copy));
        }
        table.rebuild();
        for place in places {
            if let Some((_, copy)) = copies.iter().find(|(id, _)| *id == place.mount.id) {
                place.mount = copy.clone();
            }
        }
        // The table holds each copy's initial reference; these go.
        drop(copies);
        MountNamespace::of(table)
    }
}

impl MountTable {
    /// Lists `mount` on `at` (not on a mount root: the caller resolved
    /// the path to the top of any stack).
    pub(crate) fn attach(&mut self, mount: MountRef, at: MountPoint, root_path: RootPath, source: &str) {
        at.inode.count_mount(1);
        self.mounts.push(Mounted { mount: NonNull::from(&*mount), at: Some(at), root_path, source: source.into() });
        // The table holds the initial reference; this one goes.
        drop(mount);
        self.rebuild();
    }

    /// `umount(2)` of `mount` (a listed mount other than the root):
    /// EBUSY unless `lazy` when it has mounts under it or users beyond
    /// the mounted reference and `extra` (the caller's own); with `lazy`
    /// (`MNT_DETACH`) it and its descendants leave the table and die as
    /// their users go.
    pub(crate) fn detach(
        &mut self,
        mount: &Mount,
        lazy: bool,
        extra: usize,
        section: &vfscale_sync::seqcount::SeqWriteGuard<'_>,
    ) -> VfsResult<()> {
        let index = *self.by_id.get(&mount.id).ok_or(Errno::EINVAL)?;
        if self.mounts[index].at.is_none() {
            return Err(if lazy { Errno::EINVAL } else { Errno::EBUSY });
        }
        let mut gone = self.descendants(mount);
        if !lazy {
            if !gone.is_empty() {
                return Err(Errno::EBUSY);
            }
            let users = seq_gate::count_in_write(&mount.users, section);
            if users > 1 + extra {
                mount.users.switch_to_percpu();
                return Err(Errno::EBUSY);
            }
        }
        gone.push(index);
        gone.sort_unstable();
        for &i in gone.iter().rev() {
            let m = self.mounts.remove(i);
            if let Some(at) = &m.at {
                at.inode.count_mount(-1);
            }
            // SAFETY: listed until now, so live; its initial reference is
            // the table's, dropped here once.
            unsafe { m.mount.as_ref() }.kill();
        }
        self.rebuild();
        Ok(())
    }

    /// Sets `mount`'s flags (remount); the walk reads them with one load.
    /// Making a mount read-only is EBUSY while a file is open for writing
    /// through it or a change through it is under way (Linux
    /// `mnt_make_readonly`; see [`Mount::count_writer`] for the protocol).
    pub(crate) fn set_flags(&mut self, mount: &Mount, flags: MountFlags) -> VfsResult<()> {
        self.by_id.get(&mount.id).ok_or(Errno::EINVAL)?;
        if flags.contains(MountFlags::RDONLY) && !mount.flags().contains(MountFlags::RDONLY) {
            mount.flags.fetch_or(WRITE_HOLD, Ordering::SeqCst);
            fence(Ordering::SeqCst);
            // Each writer (a file's, a change's) adds and takes away on
            // one slot, so no slot is ever below zero and a sum above zero
            // means a writer.
            if mount.writers.sum() > 0 {
                mount.flags.fetch_and(!WRITE_HOLD, Ordering::Release);
                return Err(Errno::EBUSY);
            }
        }
        mount.flags.store(flags.0, Ordering::Release);
        Ok(())
    }

    /// The mounts of the subtree of `mount` under `root` (for a recursive
    /// bind), each with its mount point, parents first; `under` decides
    /// whether an inode of `mount` lies under `root`.
    pub(crate) fn submounts(&self, mount: &Mount, under: &dyn Fn(&MountPoint) -> bool) -> Vec<Mounted> {
        let mut kept = std::collections::HashSet::new();
        let mut found = Vec::new();
        // `descendants` lists each mount after its parent.
        for i in self.descendants(mount) {
            let m = &self.mounts[i];
            let at = m.at.as_ref().expect("descendants have parents");
            // SAFETY: as in `child`, for both.
            let (parent, this) = unsafe { (at.parent.as_ref().id, m.mount.as_ref().id) };
            if (parent == mount.id && under(at)) || kept.contains(&parent) {
                kept.insert(this);
                found.push(m.clone());
            }
        }
        found
    }

    /// Whether a mount of this table sits on `inode`, through any mount.
    pub(crate) fn covers(&self, inode: &Inode) -> bool {
        self.mounts.iter().any(|m| m.at.as_ref().is_some_and(|at| std::ptr::eq(&*at.inode, inode)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::mem::{offset_of, size_of};
    use vfscale_sync::audit::LINE_SIZE;

    /// A namespace's words lie a whole line inside each of its ends, so no
    /// neighbour on the heap (another namespace, an `Arc`'s counts) shares
    /// a line with them, wherever the allocator puts it.
    #[test]
    fn a_namespaces_words_lie_a_line_inside_its_ends() {
        let words = [
            (offset_of!(MountNamespace, gate), size_of::<SeqCount>()),
            (offset_of!(MountNamespace, table), size_of::<EpochAtomic<MountTable>>()),
            (offset_of!(MountNamespace, writer), size_of::<Mutex<()>>()),
        ];
        let first = words.iter().map(|(at, _)| *at).min().unwrap();
        let end = words.iter().map(|(at, len)| at + len).max().unwrap();
        assert!(first >= LINE_SIZE, "a line before the first word: {first}");
        assert!(size_of::<MountNamespace>() >= end + LINE_SIZE, "a line after the last word");
    }
}
