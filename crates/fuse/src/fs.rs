//! The FUSE request handlers: each request becomes the matching call on a
//! [`Process`] with the caller's credentials, its working directory the
//! request's parent directory, so the VFS makes every permission check
//! (the kernel also checks at open when opens send no request) and its
//! errno goes back to the caller unchanged.
//!
//! A mount serves a small mount table: the VFS it was given, and with
//! `--demo` the instances of the demo trees, each mounted on a directory
//! of the first. A node id carries its instance's index in its top bits
//! ([`MOUNT_SHIFT`]) and the instance's own node id below them, so the
//! instances' inode numbers never meet; a lookup that reaches a mount
//! point answers with the mounted instance's root, as crossing a mount
//! does, and renames and links between instances fail with EXDEV.
//!
//! What the kernel caches, and why nothing goes stale:
//!
//! - The served VFS changes only through this mount, and the kernel
//!   updates or drops what it cached at every change it sends (a create or
//!   rename instantiates the dentry, an unlink invalidates it, a write
//!   updates the pages it went through, a setattr returns the attributes).
//!   So its entries, attributes and *negative* entries (a miss is answered
//!   with node id 0 and a timeout) are kept for [`TTL`], its file pages
//!   across opens (`FOPEN_KEEP_CACHE`). Only atime lags: reads served from
//!   the page cache do not reach the VFS.
//! - The demo trees change on their own (processes come and go, attributes
//!   follow the VFS): nothing of them is cached ([`NO_TTL`], misses are
//!   plain ENOENT) and their files are read with direct I/O, past the sizes
//!   they report.
//! - Opens and closes (see [`Caching`]): with record locks in the kernel
//!   and no demo trees, `OPEN` answers ENOSYS once and the kernel never
//!   asks again, nor sends `FLUSH` or `RELEASE`; reads and writes then come
//!   with file handle 0 and go through a description the front end opens
//!   itself ([`Nodes`]'s per-node one). Otherwise every open asks, so the
//!   demo trees get direct I/O and the VFS's locks their `RELEASE`, and
//!   closes skip `FLUSH` unless the VFS holds record locks.
//!
//! Invariant: the names recorded in the node tables change only while the
//! operation that changes them holds `topology` for writing (renames) or
//! are added by replies that carry an entry; operations that turn a node id
//! back into a name (open of a regular file, link, a rename into another
//! directory) hold it for reading, so the name they use is current. Every
//! other request runs without a lock of the front end's own, on as many
//! threads as the session has.

use crate::demo::Demo;
use crate::forgets::{InService, Serving};
use crate::linger::Linger;
use crate::locks::Locks;
use crate::nodes::{Nodes, ROOT};
use crate::requests::{Counters, Opcode};
use crate::{MountOptions, RecordLocks};
use fuser::{FileAttr, FileHandle, FopenFlags, INodeNo, TimeOrNow};
use std::collections::HashMap;
use std::fmt;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, RwLock};
use std::time::{Duration, SystemTime, UNIX_EPOCH};
use vfscale::cred::Access;
use vfscale::inode::Inode;
use vfscale::{
    Credentials, Errno, FileType, OpenFile, OpenFlags, Process, RenameFlags, SetAttr, SetTime, Stat, Timespec, Vfs,
    VfsResult,
};

/// How long the kernel may cache entries (negative ones too), attributes
/// and pages of the served VFS: every change goes through this mount,
/// which the kernel sees, so the bound is only a backstop.
const TTL: Duration = Duration::from_secs(24 * 3600);
/// The demo trees change on their own (processes come and go, attributes
/// follow the VFS), so nothing of them is cached, and their files are read
/// with direct I/O, past the sizes they report.
const NO_TTL: Duration = Duration::ZERO;

/// The longest [`VfsFs::settle_forgets`] waits for the forgets being
/// served, and then for what they released to be freed. Both end as soon
/// as that is done (a forget takes microseconds, the releases a few
/// epochs); only a thread stuck elsewhere holds them up, and a busy
/// machine may keep a reader off its CPU for a while.
const SETTLE_AT_MOST: Duration = Duration::from_secs(10);

/// How opens and closes reach the front end, decided once per mount.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Caching {
    /// The VFS decides record locks (`FUSE_POSIX_LOCKS`), so every close
    /// must reach it (`FLUSH` drops the closer's POSIX locks) and every
    /// open must ask (an OFD lock goes at the `RELEASE` of its file).
    vfs_locks: bool,
    /// Regular files open without a request: no VFS locks and no demo
    /// trees (whose files need `FOPEN_DIRECT_IO`, which only `OPEN` can
    /// give), if the kernel offers it (`FUSE_NO_OPEN_SUPPORT`, see
    /// [`VfsFs::init`]).
    no_open: bool,
}

impl Caching {
    pub fn new(options: &MountOptions) -> Caching {
        let vfs_locks = options.locks == RecordLocks::Vfs;
        Caching { vfs_locks, no_open: !vfs_locks && !options.demo }
    }
}

/// Node id bits below an instance's index: its own node ids (inode
/// numbers, counted up from 1) stay far below.
const MOUNT_SHIFT: u32 = 56;
const LOCAL_MASK: u64 = (1 << MOUNT_SHIFT) - 1;

/// The node id of instance `mount`'s node `local`.
fn node_id(mount: usize, local: u64) -> u64 {
    debug_assert!(local <= LOCAL_MASK, "node id {local} overflows into the instance bits");
    (mount as u64) << MOUNT_SHIFT | local
}

/// One VFS instance of the mount table.
struct Mount {
    vfs: Vfs,
    /// Node ids (without the instance bits) into `vfs`.
    nodes: Nodes,
    locks: Arc<Locks>,
    /// The directory of the first instance this one is mounted on; `None`
    /// for the first.
    on: Option<u64>,
    ttl: Duration,
}

impl Mount {
    fn new(vfs: Vfs, on: Option<u64>, ttl: Duration) -> Mount {
        Mount { nodes: Nodes::new(Arc::clone(vfs.root())), locks: Locks::new(vfs.clone()), vfs, on, ttl }
    }

    /// Whether this is a demo tree (kernfs, procfs), mounted on the first.
    fn is_tree(&self) -> bool {
        self.on.is_some()
    }

    /// The open flags a file of this instance is served with: the demo
    /// trees' files with direct I/O, the others from pages kept across
    /// opens; no `FLUSH` at close unless the VFS holds record locks.
    fn fopen(&self, caching: Caching) -> FopenFlags {
        let io = if self.is_tree() { FopenFlags::FOPEN_DIRECT_IO } else { FopenFlags::FOPEN_KEEP_CACHE };
        if caching.vfs_locks {
            io
        } else {
            io | FopenFlags::FOPEN_NOFLUSH
        }
    }
}

/// An open file or directory, behind a FUSE file handle, with the index of
/// its instance. File handle 0 is none: what the kernel opened without a
/// request.
enum Handle {
    /// A file, or a directory opened with `open`.
    File { mount: usize, file: Arc<OpenFile> },
    /// A directory: a snapshot of its entries, taken at offset 0 (opendir
    /// or rewinddir), so the kernel's offsets index it.
    Dir { mount: usize, file: Arc<OpenFile>, entries: Mutex<Vec<(u64, FileType, Vec<u8>)>> },
}

/// The filesystem a mount serves: the mount table, the kernel's node ids
/// into it, and the open handles.
pub(crate) struct VfsFs {
    mounts: Vec<Mount>,
    handles: Mutex<HashMap<u64, Arc<Handle>>>,
    next_handle: AtomicU64,
    topology: RwLock<()>,
    caching: Caching,
    /// The kernel lacks `FUSE_NO_OPEN_SUPPORT`: every open asks.
    no_open_refused: AtomicBool,
    requests: Arc<Counters>,
    linger: Arc<Linger>,
    /// The forgets being served now, which `STATFS` and a retry after
    /// ENOSPC wait for (see the `forgets` module).
    forgets: InService,
    /// Keeps the demo trees' instances followed while the mount lives.
    demo: Option<Demo>,
}

impl fmt::Debug for VfsFs {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("VfsFs")
            .field("nodes", &self.mounts.iter().map(|m| m.nodes.len()).collect::<Vec<_>>())
            .field("caching", &self.caching)
            .field("demo", &self.demo)
            .finish_non_exhaustive()
    }
}

pub(crate) fn system_time(ts: Timespec) -> SystemTime {
    if ts.sec >= 0 {
        UNIX_EPOCH + Duration::new(ts.sec as u64, ts.nsec as u32)
    } else {
        UNIX_EPOCH - Duration::from_secs(ts.sec.unsigned_abs()) + Duration::from_nanos(ts.nsec as u64)
    }
}

pub(crate) fn timespec(t: SystemTime) -> Timespec {
    match t.duration_since(UNIX_EPOCH) {
        Ok(d) => Timespec { sec: d.as_secs() as i64, nsec: i64::from(d.subsec_nanos()) },
        Err(e) => {
            let d = e.duration();
            let (sec, nsec) = (-(d.as_secs() as i64), i64::from(d.subsec_nanos()));
            if nsec == 0 {
                Timespec { sec, nsec }
            } else {
                Timespec { sec: sec - 1, nsec: 1_000_000_000 - nsec }
            }
        }
    }
}

fn set_time(t: Option<TimeOrNow>) -> SetTime {
    match t {
        None => SetTime::Omit,
        Some(TimeOrNow::Now) => SetTime::Now,
        Some(TimeOrNow::SpecificTime(t)) => SetTime::At(timespec(t)),
    }
}

fn kind(t: FileType) -> fuser::FileType {
    match t {
        FileType::Directory => fuser::FileType::Directory,
        FileType::Regular => fuser::FileType::RegularFile,
        FileType::Symlink => fuser::FileType::Symlink,
        FileType::Fifo => fuser::FileType::NamedPipe,
        FileType::Socket => fuser::FileType::Socket,
        FileType::CharDevice => fuser::FileType::CharDevice,
        FileType::BlockDevice => fuser::FileType::BlockDevice,
    }
}

fn file_type(mode: u32) -> FileType {
    FileType::from_mode(mode).unwrap_or(FileType::Regular)
}

fn file_attr(id: u64, st: &Stat) -> FileAttr {
    FileAttr {
        ino: INodeNo(id),
        size: st.size,
        blocks: st.blocks,
        atime: system_time(st.atime),
        mtime: system_time(st.mtime),
        ctime: system_time(st.ctime),
        crtime: UNIX_EPOCH,
        kind: kind(file_type(st.mode)),
        perm: (st.mode & 0o7777) as u16,
        nlink: st.nlink,
        uid: st.uid,
        gid: st.gid,
        // FUSE carries the kernel's 32-bit encoding, which is `makedev`'s
        // for every device number that fits in it.
        rdev: st.rdev as u32,
        blksize: 4096,
        flags: 0,
    }
}

/// A negative entry's attributes: node id 0 says "no such name" and makes
/// the kernel keep the miss for the entry's timeout; the rest is unused.
fn negative_attr() -> FileAttr {
    FileAttr {
        ino: INodeNo(0),
        size: 0,
        blocks: 0,
        atime: UNIX_EPOCH,
        mtime: UNIX_EPOCH,
        ctime: UNIX_EPOCH,
        crtime: UNIX_EPOCH,
        kind: fuser::FileType::RegularFile,
        perm: 0,
        nlink: 0,
        uid: 0,
        gid: 0,
        rdev: 0,
        blksize: 4096,
        flags: 0,
    }
}

/// The caller's supplementary groups, from the host's `/proc/PID/status`
/// (FUSE passes only uid, gid and pid); none if the process is gone.
fn groups_of(pid: u32) -> Vec<u32> {
    let Ok(status) = std::fs::read_to_string(format!("/proc/{pid}/status")) else { return Vec::new() };
    status
        .lines()
        .find_map(|l| l.strip_prefix("Groups:"))
        .map(|g| g.split_whitespace().filter_map(|n| n.parse().ok()).collect())
        .unwrap_or_default()
}

/// The credentials a request runs with. Root's groups decide nothing, so
/// only other callers cost a read of `/proc`.
fn credentials(c: &Client) -> Credentials {
    if c.uid == 0 {
        Credentials::user(0, c.gid, [])
    } else {
        Credentials::user(c.uid, c.gid, groups_of(c.pid))
    }
}

fn join(dir: &[u8], name: &[u8]) -> Vec<u8> {
    let mut path = dir.to_vec();
    if path.last() != Some(&b'/') {
        path.push(b'/');
    }
    path.extend_from_slice(name);
    path
}

impl VfsFs {
    /// Serves `vfs`; with `demo`, also the demo trees under `sys/` and
    /// `proc/`.
    pub fn new(vfs: Vfs, demo: bool, caching: Caching, linger: Duration) -> VfsResult<VfsFs> {
        let demo = if demo { Some(Demo::new(&vfs)?) } else { None };
        let requests = Arc::new(Counters::default());
        let mut mounts = vec![Mount::new(vfs, None, TTL)];
        for (on, tree) in demo.iter().flat_map(Demo::mounts) {
            mounts.push(Mount::new(tree, Some(on), NO_TTL));
        }
        Ok(VfsFs {
            mounts,
            handles: Mutex::new(HashMap::new()),
            next_handle: AtomicU64::new(1),
            topology: RwLock::new(()),
            caching,
            no_open_refused: AtomicBool::new(false),
            linger: Arc::new(Linger::new(linger, Arc::clone(&requests))),
            requests,
            forgets: InService::default(),
            demo,
        })
    }

    /// The request counters, for the mount's handle.
    pub fn requests(&self) -> Arc<Counters> {
        Arc::clone(&self.requests)
    }

    /// What decides lingering after replies, to attach the device to.
    pub fn linger(&self) -> Arc<Linger> {
        Arc::clone(&self.linger)
    }

    /// The count of the demo `proc/` tree's refreshes, with `--demo`.
    pub fn demo_refreshes(&self) -> Option<Arc<AtomicU64>> {
        self.demo.as_ref().map(Demo::refreshes)
    }

    /// The instance of node id `id`, its index and the id within it.
    fn split(&self, id: u64) -> VfsResult<(usize, &Mount, u64)> {
        let index = (id >> MOUNT_SHIFT) as usize;
        self.mounts.get(index).map(|m| (index, m, id & LOCAL_MASK)).ok_or(Errno::ESTALE)
    }

    fn inode(&self, id: u64) -> VfsResult<Arc<Inode>> {
        let (_, m, local) = self.split(id)?;
        m.nodes.get(local).ok_or(Errno::ESTALE)
    }

    /// A process working in directory `id`.
    fn at(&self, cred: Credentials, id: u64) -> VfsResult<Process> {
        let (_, m, _) = self.split(id)?;
        m.vfs.process_in(cred, self.inode(id)?)
    }

    /// After the reply to a request on directory `id` that removed names
    /// (or replaced a cached negative dentry): lets what it released be
    /// freed by whichever thread collects next, not only by this one (the
    /// space of an unlinked file comes back at once, as on tmpfs).
    pub(crate) fn hand_on_releases(&self, id: u64) {
        if let Ok((_, m, _)) = self.split(id) {
            m.vfs.reclaim(Duration::ZERO);
        }
    }

    /// Runs the releases deferred so far in every instance (what forgotten
    /// nodes held), waiting at most `timeout` for each.
    pub(crate) fn collect(&self, timeout: Duration) {
        for m in &self.mounts {
            m.vfs.reclaim(timeout);
        }
    }

    /// A forget begins, before it is counted; it ends when the guard
    /// drops (see the `forgets` module).
    pub(crate) fn forgetting(&self) -> Serving<'_> {
        self.forgets.begin()
    }

    /// Waits for the forgets begun so far to end, then frees what they
    /// released, so that what follows sees the space and inodes of the
    /// files they were the last references to.
    pub(crate) fn settle_forgets(&self) {
        self.forgets.wait_for_begun(SETTLE_AT_MOST);
        self.collect(SETTLE_AT_MOST);
    }

    /// Runs `attempt`, and if it fails with ENOSPC runs it again once the
    /// forgets being served, and what they released, are done: the space
    /// of a file just unlinked comes back when the kernel's `FORGET` for
    /// it has been served, which may still be under way on another thread.
    pub(crate) fn unless_full<T>(&self, attempt: impl Fn() -> VfsResult<T>) -> VfsResult<T> {
        match attempt() {
            Err(Errno::ENOSPC) => {
                self.settle_forgets();
                attempt()
            }
            result => result,
        }
    }

    /// The kernel dropped `nlookup` of its references to node `ino`.
    pub(crate) fn forget_node(&self, ino: u64, nlookup: u64) {
        if let Ok((_, m, local)) = self.split(ino) {
            if m.nodes.forget(local, nlookup) {
                // What the node held (an unlinked file's inode, its own
                // description) is freed by whichever thread collects next.
                self.hand_on_releases(ino);
            }
        }
    }

    /// A process of node `id`'s instance with the caller's credentials, for
    /// calls that name the inode itself.
    fn process(&self, c: &Client, id: u64) -> VfsResult<Process> {
        let (_, m, _) = self.split(id)?;
        Ok(m.vfs.process(credentials(c)))
    }

    /// The instance mounted on inode `ino` of instance `mount`, if any.
    fn mounted_on(&self, mount: usize, ino: u64) -> Option<usize> {
        if mount != 0 {
            return None;
        }
        self.mounts.iter().position(|m| m.on == Some(ino))
    }

    /// EBUSY if `inode` of instance `mount` is a mount point, which must
    /// stay.
    fn not_mount_point(&self, mount: usize, inode: &Inode) -> VfsResult<()> {
        match self.mounted_on(mount, inode.ino()) {
            Some(_) => Err(Errno::EBUSY),
            None => Ok(()),
        }
    }

    /// The node id an entry of instance `mount` for inode `ino` shows.
    fn listed_id(&self, mount: usize, ino: u64) -> u64 {
        match self.mounted_on(mount, ino) {
            Some(sub) => node_id(sub, ROOT),
            None => node_id(mount, self.mounts[mount].nodes.node_id(ino)),
        }
    }

    /// The entry reply for `inode`, reached as `name` in directory
    /// `parent`: one more lookup of it, or the root of the instance
    /// mounted on it.
    fn entry(&self, parent: u64, name: &[u8], inode: &Arc<Inode>) -> VfsResult<(Duration, FileAttr)> {
        let (mount, m, local) = self.split(parent)?;
        if let Some(sub) = self.mounted_on(mount, inode.ino()) {
            let sub_mount = &self.mounts[sub];
            return Ok((sub_mount.ttl, file_attr(node_id(sub, ROOT), &sub_mount.vfs.root().stat())));
        }
        let id = m.nodes.remember(local, name, inode);
        Ok((m.ttl, file_attr(node_id(mount, id), &inode.stat())))
    }

    fn add_handle(&self, handle: Handle) -> FileHandle {
        let fh = self.next_handle.fetch_add(1, Ordering::Relaxed);
        self.handles.lock().unwrap_or_else(|e| e.into_inner()).insert(fh, Arc::new(handle));
        FileHandle(fh)
    }

    fn handle(&self, fh: FileHandle) -> VfsResult<Arc<Handle>> {
        self.handles.lock().unwrap_or_else(|e| e.into_inner()).get(&fh.0).cloned().ok_or(Errno::EBADF)
    }

    fn drop_handle(&self, fh: FileHandle) {
        self.handles.lock().unwrap_or_else(|e| e.into_inner()).remove(&fh.0);
    }

    /// Opens regular file `id` through a name the kernel reached it by (the
    /// VFS opens by path only), checking that the name still refers to it.
    fn open_by_name(&self, id: u64, inode: &Inode, cred: &Credentials, flags: OpenFlags) -> VfsResult<Arc<OpenFile>> {
        let (mount, m, local) = self.split(id)?;
        let _names = self.topology.read().unwrap_or_else(|e| e.into_inner());
        for (parent, name) in m.nodes.links(local).into_iter().rev() {
            let Ok(p) = self.at(cred.clone(), node_id(mount, parent)) else { continue };
            match p.open_description(&name, flags, 0) {
                Ok(file) if file.inode().ino() == inode.ino() => return Ok(file),
                Ok(_) | Err(Errno::ENOENT) | Err(Errno::ESTALE) => continue,
                Err(e) => return Err(e),
            }
        }
        Err(Errno::ESTALE)
    }

    /// The open file that reads, writes and truncates of handle `fh` on
    /// node `id` go through: the handle's, or, for handle 0 (a file the
    /// kernel opened without a request, having checked the caller's
    /// access itself), the node's own read-write description, opened on
    /// first use.
    fn data_file(&self, id: u64, fh: FileHandle) -> VfsResult<Arc<OpenFile>> {
        if fh.0 != 0 {
            return match &*self.handle(fh)? {
                Handle::File { file, .. } | Handle::Dir { file, .. } => Ok(Arc::clone(file)),
            };
        }
        let (_, m, local) = self.split(id)?;
        if let Some(file) = m.nodes.own_file(local) {
            return Ok(file);
        }
        let inode = self.inode(id)?;
        let file = self.open_by_name(id, &inode, &Credentials::root(), OpenFlags::RDWR)?;
        Ok(m.nodes.keep_own_file(local, file))
    }

    /// Before `victim`, reached as `name` in `parent`, loses what may be
    /// its last name: if the kernel knows it and may have opened it
    /// without a request, the node's own description is opened now, while
    /// the name still reaches it, so the kernel's reads and writes through
    /// those opens keep working after the name is gone (as an unlinked
    /// file's do).
    fn keep_reachable(&self, parent: u64, name: &[u8], victim: &Inode) {
        if !self.opens_without_request() || victim.file_type() != FileType::Regular || victim.stat().nlink > 1 {
            return;
        }
        let Ok((_, m, _)) = self.split(parent) else { return };
        let local = m.nodes.node_id(victim.ino());
        if m.nodes.get(local).is_none() || m.nodes.own_file(local).is_some() {
            return;
        }
        let own = self.at(Credentials::root(), parent).and_then(|p| p.open_description(name, OpenFlags::RDWR, 0));
        if let Some(file) = own.ok().filter(|f| f.inode().ino() == victim.ino()) {
            m.nodes.keep_own_file(local, file);
        }
    }

    /// Re-reads a directory's entries into its handle (at offset 0).
    fn snapshot(&self, mount: usize, file: &OpenFile) -> VfsResult<Vec<(u64, FileType, Vec<u8>)>> {
        file.lseek(0, vfscale::Whence::Set)?;
        let mut out = Vec::new();
        loop {
            let batch = file.readdir(256)?;
            if batch.is_empty() {
                break;
            }
            out.extend(batch.into_iter().map(|e| (self.listed_id(mount, e.ino), e.file_type, e.name)));
        }
        Ok(out)
    }

    fn do_setattr(&self, c: &Client, id: u64, attr: SetAttr, fh: Option<FileHandle>) -> VfsResult<FileAttr> {
        let (_, m, _) = self.split(id)?;
        let inode = self.inode(id)?;
        let cred = credentials(c);
        let mut rest = attr;
        if m.is_tree() && attr.size.is_some() {
            // sysfs ignores a size change (`echo 2 > attr` truncates
            // first); the caller must still be allowed to write.
            let st = inode.stat();
            vfscale::cred::permission(st.mode, st.uid, st.gid, &cred, Access::WRITE)?;
            rest.size = None;
        }
        if let (Some(len), Some(fh)) = (rest.size, fh) {
            // ftruncate (and O_TRUNC): the open file's write access decides.
            self.data_file(id, fh)?.truncate(len, &cred)?;
            rest.size = None;
        }
        m.vfs.process(cred).setattr(&inode, rest)?;
        Ok(file_attr(id, &inode.stat()))
    }

    /// `RENAME` and `RENAME2` (only `RENAME_NOREPLACE`), within an
    /// instance.
    pub(crate) fn rename_entry(
        &self,
        c: &Client,
        parent: u64,
        name: &[u8],
        newparent: u64,
        newname: &[u8],
        flags: u32,
    ) -> VfsResult<()> {
        let (mount, m, local) = self.split(parent)?;
        let (new_mount, _, new_local) = self.split(newparent)?;
        if mount != new_mount {
            return Err(Errno::EXDEV);
        }
        if flags & !libc::RENAME_NOREPLACE != 0 {
            return Err(Errno::EINVAL);
        }
        let _names = self.topology.write().unwrap_or_else(|e| e.into_inner());
        let p = self.at(credentials(c), parent)?;
        let moved = p.resolve(name, false)?;
        self.not_mount_point(mount, &moved)?;
        let target = if parent == newparent {
            newname.to_vec()
        } else {
            join(&m.nodes.dir_path(new_local).ok_or(Errno::ESTALE)?, newname)
        };
        let replaced = p.resolve(&target, false).ok();
        if let Some(replaced) = &replaced {
            self.not_mount_point(mount, replaced)?;
            self.keep_reachable(newparent, newname, replaced);
        }
        p.rename2(name, &target, RenameFlags { noreplace: flags & libc::RENAME_NOREPLACE != 0 })?;
        let moved_id = m.nodes.node_id(moved.ino());
        if let Some(replaced) = replaced.filter(|r| r.ino() != moved.ino()) {
            m.nodes.unlinked(m.nodes.node_id(replaced.ino()), new_local, newname);
        }
        m.nodes.unlinked(moved_id, local, name);
        m.nodes.linked(moved_id, new_local, newname);
        Ok(())
    }

    /// `LINK`: node `id` gets the name `newname` in `newparent`.
    pub(crate) fn link_entry(
        &self,
        c: &Client,
        id: u64,
        newparent: u64,
        newname: &[u8],
    ) -> VfsResult<(Duration, FileAttr)> {
        let (mount, m, local) = self.split(id)?;
        let (new_mount, _, new_local) = self.split(newparent)?;
        if mount != new_mount {
            return Err(Errno::EXDEV);
        }
        let _names = self.topology.read().unwrap_or_else(|e| e.into_inner());
        let inode = self.inode(id)?;
        let cred = credentials(c);
        for (parent, name) in m.nodes.links(local).into_iter().rev() {
            let Ok(p) = self.at(cred.clone(), node_id(mount, parent)) else { continue };
            if p.resolve(&name, false).map(|i| i.ino()) != Ok(inode.ino()) {
                continue;
            }
            let target = if parent == new_local {
                newname.to_vec()
            } else {
                join(&m.nodes.dir_path(new_local).ok_or(Errno::ESTALE)?, newname)
            };
            p.link(&name, &target)?;
            return self.entry(newparent, newname, &inode);
        }
        Err(Errno::ESTALE)
    }
}

/// Who sent a request: what credentials and lock owners are made of.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Client {
    pub uid: u32,
    pub gid: u32,
    pub pid: u32,
}

/// An entry reply: how long the kernel may keep it, and the node.
pub(crate) type Entry = (Duration, FileAttr);

/// The changes a `SETATTR` asks for.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct AttrChanges {
    pub mode: Option<u32>,
    pub uid: Option<u32>,
    pub gid: Option<u32>,
    pub size: Option<u64>,
    pub atime: Option<TimeOrNow>,
    pub mtime: Option<TimeOrNow>,
}

/// A `getxattr` or `listxattr` answer: the size when asked with 0, else
/// the bytes.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Xattr {
    Size(u32),
    Data(Vec<u8>),
}

/// A `STATFS` answer, in the kernel's `struct kstatfs` terms.
#[derive(Debug, Clone, Copy)]
pub(crate) struct FsStats {
    pub blocks: u64,
    pub bfree: u64,
    pub bavail: u64,
    pub files: u64,
    pub ffree: u64,
    pub bsize: u32,
    pub namelen: u32,
    pub frsize: u32,
}

/// The handlers of the requests, whichever way they came (fuser's
/// `/dev/fuse` reads, see the `dev` module, or the io_uring queues, see
/// the `ring` module). Each returns what the reply carries; the front end
/// counts the request, sends the reply, and then calls
/// [`VfsFs::hand_on_releases`] for requests that may have released
/// nodes.
impl VfsFs {
    /// Counts a request of kind `op`.
    pub(crate) fn count(&self, op: Opcode) {
        self.requests.count(op);
    }

    /// Counts a `FORGET` or `BATCH_FORGET` request (`count` counts its
    /// nodes).
    pub(crate) fn count_forget_request(&self) {
        self.requests.count_forget_request();
    }

    /// Counts a request; the guard lingers when the handler is done (see
    /// the `linger` module), and a request another thread began since this
    /// count ends that linger.
    pub(crate) fn serve(&self, op: Opcode) -> Served<'_> {
        Served { linger: &self.linger, begun: self.requests.count(op) }
    }

    /// Stops what waits for the mount (blocked record locks) at its end.
    pub(crate) fn shut_down(&self) {
        for m in &self.mounts {
            m.locks.cancel_waits();
        }
    }

    /// Whether the kernel opens regular files without a request: set up
    /// so, and not refused at `INIT` (read-only after it).
    pub(crate) fn opens_without_request(&self) -> bool {
        self.caching.no_open && !self.no_open_refused.load(Ordering::Relaxed)
    }

    /// Whether the VFS decides record locks (`FUSE_POSIX_LOCKS`).
    pub(crate) fn holds_record_locks(&self) -> bool {
        self.caching.vfs_locks
    }

    /// The kernel cannot open without a request: every open asks.
    pub(crate) fn open_with_requests(&self) {
        self.no_open_refused.store(true, Ordering::Relaxed);
    }

    /// `LOOKUP`. A miss in the served VFS is a negative entry: the name
    /// can only appear through this mount, whose create, mknod, mkdir,
    /// symlink, link or rename replaces the kernel's entry.
    pub(crate) fn look_up(&self, c: &Client, parent: u64, name: &[u8]) -> VfsResult<Entry> {
        let result = self
            .at(credentials(c), parent)
            .and_then(|p| p.resolve(name, false))
            .and_then(|inode| self.entry(parent, name, &inode));
        match (result, self.split(parent)) {
            (Err(Errno::ENOENT), Ok((_, m, _))) if !m.is_tree() => Ok((m.ttl, negative_attr())),
            (result, _) => result,
        }
    }

    /// `GETATTR`.
    pub(crate) fn attributes(&self, id: u64) -> VfsResult<Entry> {
        let (_, m, _) = self.split(id)?;
        Ok((m.ttl, file_attr(id, &self.inode(id)?.stat())))
    }

    /// `SETATTR`.
    pub(crate) fn set_attributes(
        &self,
        c: &Client,
        id: u64,
        changes: AttrChanges,
        fh: Option<FileHandle>,
    ) -> VfsResult<Entry> {
        let size = changes.size.map(i64::try_from).transpose().map_err(|_| Errno::EFBIG)?;
        let AttrChanges { mode, uid, gid, atime, mtime, .. } = changes;
        let attr = SetAttr { mode, uid, gid, size, atime: set_time(atime), mtime: set_time(mtime) };
        let (_, m, _) = self.split(id)?;
        Ok((m.ttl, self.do_setattr(c, id, attr, fh)?))
    }

    /// `READLINK`.
    pub(crate) fn link_target(&self, id: u64) -> VfsResult<Vec<u8>> {
        self.inode(id)?.symlink_target().map(<[u8]>::to_vec).ok_or(Errno::EINVAL)
    }

    /// `MKNOD`: the kernel does FIFO, socket and device I/O itself; the
    /// VFS keeps the node.
    pub(crate) fn make_node(&self, c: &Client, parent: u64, name: &[u8], mode: u32, rdev: u32) -> VfsResult<Entry> {
        let p = self.at(credentials(c), parent)?;
        p.mknod(name, mode, u64::from(rdev))?;
        self.entry(parent, name, &p.resolve(name, false)?)
    }

    /// `MKDIR`.
    pub(crate) fn make_dir(&self, c: &Client, parent: u64, name: &[u8], mode: u32) -> VfsResult<Entry> {
        let p = self.at(credentials(c), parent)?;
        p.mkdir(name, mode & 0o7777)?;
        self.entry(parent, name, &p.resolve(name, false)?)
    }

    /// `UNLINK`, or `RMDIR` with `dir`.
    pub(crate) fn remove(&self, c: &Client, parent: u64, name: &[u8], dir: bool) -> VfsResult<()> {
        let (mount, m, local) = self.split(parent)?;
        let p = self.at(credentials(c), parent)?;
        let victim = p.resolve(name, false)?;
        self.not_mount_point(mount, &victim)?;
        self.keep_reachable(parent, name, &victim);
        if dir {
            p.rmdir(name)?;
        } else {
            p.unlink(name)?;
        }
        m.nodes.unlinked(m.nodes.node_id(victim.ino()), local, name);
        Ok(())
    }

    /// `SYMLINK`: `name` in `parent`, pointing to `target`.
    pub(crate) fn make_symlink(&self, c: &Client, parent: u64, name: &[u8], target: &[u8]) -> VfsResult<Entry> {
        let p = self.at(credentials(c), parent)?;
        p.symlink(target, name)?;
        self.entry(parent, name, &p.resolve(name, false)?)
    }

    /// `OPEN` of a file. ENOSYS when the kernel opens files without
    /// asking: it opens this and every later file that way, having
    /// checked the caller's access itself (`default_permissions`).
    pub(crate) fn open_file(&self, c: &Client, id: u64, flags: i32) -> VfsResult<(FileHandle, FopenFlags)> {
        if self.opens_without_request() {
            return Err(Errno::ENOSYS);
        }
        let cred = credentials(c);
        let flags = OpenFlags(flags & !(libc::O_CREAT | libc::O_EXCL));
        let (mount, m, _) = self.split(id)?;
        let inode = self.inode(id)?;
        let file = if inode.file_type() == FileType::Directory {
            m.vfs.process_in(cred, Arc::clone(&inode))?.open_description(".", flags, 0)?
        } else {
            self.open_by_name(id, &inode, &cred, flags)?
        };
        Ok((self.add_handle(Handle::File { mount, file }), m.fopen(self.caching)))
    }

    /// `READ`.
    pub(crate) fn read_file(&self, id: u64, fh: FileHandle, offset: u64, size: u32) -> VfsResult<Vec<u8>> {
        let file = self.data_file(id, fh)?;
        let mut buf = vec![0; size as usize];
        let n = file.pread(&mut buf, offset)?;
        buf.truncate(n);
        Ok(buf)
    }

    /// `WRITE`: the bytes written.
    pub(crate) fn write_file(&self, c: &Client, id: u64, fh: FileHandle, offset: u64, data: &[u8]) -> VfsResult<u32> {
        Ok(self.data_file(id, fh)?.pwrite(data, offset, &credentials(c))? as u32)
    }

    /// `FALLOCATE`.
    pub(crate) fn allocate(
        &self,
        c: &Client,
        id: u64,
        fh: FileHandle,
        (offset, length): (u64, u64),
        mode: i32,
    ) -> VfsResult<()> {
        let file = self.data_file(id, fh)?;
        let offset = i64::try_from(offset).map_err(|_| Errno::EINVAL)?;
        let length = i64::try_from(length).map_err(|_| Errno::EINVAL)?;
        file.fallocate(mode, offset, length, &credentials(c))
    }

    /// `LSEEK`: the kernel asks only for `SEEK_DATA` and `SEEK_HOLE`; it
    /// keeps the file position itself.
    pub(crate) fn seek(&self, id: u64, fh: FileHandle, offset: i64, whence: i32) -> VfsResult<i64> {
        let whence = match whence {
            libc::SEEK_SET => vfscale::Whence::Set,
            libc::SEEK_CUR => vfscale::Whence::Cur,
            libc::SEEK_END => vfscale::Whence::End,
            libc::SEEK_DATA => vfscale::Whence::Data,
            libc::SEEK_HOLE => vfscale::Whence::Hole,
            _ => return Err(Errno::EINVAL),
        };
        Ok(self.data_file(id, fh)?.lseek(offset, whence)? as i64)
    }

    /// `FLUSH`: a close. Without the VFS's locks there is nothing to do,
    /// and ENOSYS tells the kernel to stop sending it (files opened
    /// without a request have no `FOPEN_NOFLUSH` to say so). With them,
    /// the closing file table's POSIX locks on the file go, and the
    /// file's release may follow.
    pub(crate) fn flush_file(&self, fh: FileHandle, lock_owner: u64) -> VfsResult<()> {
        if !self.caching.vfs_locks {
            return Err(Errno::ENOSYS);
        }
        if let Ok((locks, file)) = self.lock_file(fh) {
            locks.close(&file, lock_owner);
            locks.flushed(&file);
        }
        Ok(())
    }

    /// `RELEASE`: the last close of an open file. The kernel names the
    /// open file's lock owner when it released locks of the open file;
    /// what the owner still holds goes with it.
    pub(crate) fn release_file(&self, fh: FileHandle, lock_owner: Option<u64>) {
        if let Ok((locks, file)) = self.lock_file(fh) {
            if let Some(owner) = lock_owner {
                locks.close(&file, owner);
            }
            locks.release(&file);
        }
        self.drop_handle(fh);
    }

    /// `OPENDIR`.
    pub(crate) fn open_dir(&self, c: &Client, id: u64, flags: i32) -> VfsResult<(FileHandle, FopenFlags)> {
        let (mount, _, _) = self.split(id)?;
        let p = self.at(credentials(c), id)?;
        let file = p.open_description(".", OpenFlags(flags | libc::O_DIRECTORY), 0)?;
        let handle = Handle::Dir { mount, file, entries: Mutex::new(Vec::new()) };
        Ok((self.add_handle(handle), FopenFlags::empty()))
    }

    /// `READDIR` from `offset`: hands each entry (node id, the offset of
    /// the next, type, name) to `add` until it says the reply is full.
    pub(crate) fn read_dir(
        &self,
        fh: FileHandle,
        offset: u64,
        mut add: impl FnMut(u64, u64, fuser::FileType, &[u8]) -> bool,
    ) -> VfsResult<()> {
        let handle = self.handle(fh)?;
        let Handle::Dir { mount, file, entries } = &*handle else { return Err(Errno::ENOTDIR) };
        let mut entries = entries.lock().unwrap_or_else(|e| e.into_inner());
        if offset == 0 {
            *entries = self.snapshot(*mount, file)?;
        }
        for (i, (id, file_type, name)) in entries.iter().enumerate().skip(offset as usize) {
            if add(*id, i as u64 + 1, kind(*file_type), name) {
                break;
            }
        }
        Ok(())
    }

    /// `RELEASEDIR`.
    pub(crate) fn release_dir(&self, fh: FileHandle) {
        self.drop_handle(fh);
    }

    /// `STATFS`, as tmpfs: the limits (0 where there is none), so `df`
    /// shows the `--size` and `--inodes` a mount was given, and, after
    /// the forgets being served have ended, without what they freed.
    pub(crate) fn fs_stats(&self) -> FsStats {
        self.settle_forgets();
        let s = self.mounts[0].vfs.statfs();
        let bsize = s.block_size as u32;
        FsStats {
            blocks: s.blocks,
            bfree: s.blocks_free,
            bavail: s.blocks_free,
            files: s.files,
            ffree: s.files_free,
            bsize,
            namelen: 255,
            frsize: bsize,
        }
    }

    /// `SETXATTR`.
    pub(crate) fn set_xattr(&self, c: &Client, id: u64, name: &[u8], value: &[u8], flags: i32) -> VfsResult<()> {
        let inode = self.inode(id)?;
        self.process(c, id)?.setxattr_inode(&inode, name, value, flags)
    }

    /// `GETXATTR`.
    pub(crate) fn get_xattr(&self, c: &Client, id: u64, name: &[u8], size: u32) -> VfsResult<Xattr> {
        let inode = self.inode(id)?;
        let mut buf = vec![0; size as usize];
        let n = self.process(c, id)?.getxattr_inode(&inode, name, &mut buf)?;
        Ok(xattr(n, size, buf))
    }

    /// `LISTXATTR`.
    pub(crate) fn list_xattr(&self, c: &Client, id: u64, size: u32) -> VfsResult<Xattr> {
        let inode = self.inode(id)?;
        let mut buf = vec![0; size as usize];
        let n = self.process(c, id)?.listxattr_inode(&inode, &mut buf)?;
        Ok(xattr(n, size, buf))
    }

    /// `REMOVEXATTR`.
    pub(crate) fn remove_xattr(&self, c: &Client, id: u64, name: &[u8]) -> VfsResult<()> {
        let inode = self.inode(id)?;
        self.process(c, id)?.removexattr_inode(&inode, name)
    }

    /// `ACCESS` with `access(2)`'s mask (`R_OK`, `W_OK`, `X_OK`).
    pub(crate) fn check_access(&self, c: &Client, id: u64, mask: i32) -> VfsResult<()> {
        let mut access = Access::empty();
        for (flag, a) in [(libc::R_OK, Access::READ), (libc::W_OK, Access::WRITE), (libc::X_OK, Access::EXEC)] {
            if mask & flag != 0 {
                access |= a;
            }
        }
        let st = self.inode(id)?.stat();
        vfscale::cred::permission(st.mode, st.uid, st.gid, &credentials(c), access)
    }

    /// `CREATE`: an open with `O_CREAT` that made the file.
    pub(crate) fn create_file(
        &self,
        c: &Client,
        parent: u64,
        name: &[u8],
        mode: u32,
        flags: i32,
    ) -> VfsResult<(Entry, FileHandle, FopenFlags)> {
        let (mount, m, _) = self.split(parent)?;
        if m.is_tree() {
            // Linux's vfs_create answers EACCES where a directory cannot
            // hold new files, as a kernfs one cannot.
            return Err(Errno::EACCES);
        }
        let flags = OpenFlags(flags | libc::O_CREAT);
        let file = self.at(credentials(c), parent)?.open_description(name, flags, mode & 0o7777)?;
        let entry = self.entry(parent, name, file.inode())?;
        let fh = if self.opens_without_request() {
            // Like the opens to come, which send nothing: handle 0, whose
            // I/O goes through the node's own description, and no RELEASE
            // to wait for.
            FileHandle(0)
        } else {
            self.add_handle(Handle::File { mount, file })
        };
        Ok((entry, fh, m.fopen(self.caching)))
    }

    /// The open file description behind `fh` that locks apply to, and the
    /// lock owners of its instance.
    pub(crate) fn lock_file(&self, fh: FileHandle) -> VfsResult<(&Arc<Locks>, Arc<OpenFile>)> {
        match &*self.handle(fh)? {
            Handle::File { mount, file } | Handle::Dir { mount, file, .. } => {
                Ok((&self.mounts[*mount].locks, Arc::clone(file)))
            }
        }
    }
}

/// A `getxattr`/`listxattr` answer from `n` bytes of `buf`, asked with
/// `size`.
fn xattr(n: usize, size: u32, mut buf: Vec<u8>) -> Xattr {
    if size == 0 {
        Xattr::Size(n as u32)
    } else {
        buf.truncate(n);
        Xattr::Data(buf)
    }
}

/// A request being served: lingers (see the `linger` module) when the
/// handler returns. Every handler takes it first, so it drops last, after
/// the reply went (or, for a blocked lock, was handed to the thread that
/// sends it; a `FORGET` has none).
#[must_use = "a guard dropped at once lingers before the request is served"]
pub(crate) struct Served<'a> {
    linger: &'a Linger,
    /// The mount's request total when this request was counted.
    begun: u64,
}

impl Drop for Served<'_> {
    fn drop(&mut self) {
        self.linger.after_reply(self.begun);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn timespec_round_trips_through_system_time() {
        for ts in
            [Timespec { sec: 0, nsec: 0 }, Timespec { sec: 1_700_000_000, nsec: 5 }, Timespec { sec: -3, nsec: 250 }]
        {
            assert_eq!(timespec(system_time(ts)), ts);
        }
    }

    #[test]
    fn attributes_carry_stat_fields() {
        let vfs = Vfs::default();
        let p = vfs.process(Credentials::root());
        let fd = p.open("/f", OpenFlags::CREAT | OpenFlags::WRONLY, 0o640).unwrap();
        p.write(fd, &[7; 1000]).unwrap();
        let st = p.stat("/f").unwrap();
        let attr = file_attr(42, &st);
        assert_eq!((attr.ino, attr.size, attr.blocks, attr.perm, attr.nlink), (INodeNo(42), 1000, 8, 0o640, 1));
        assert_eq!(attr.kind, fuser::FileType::RegularFile);
        assert_eq!(attr.mtime, system_time(st.mtime));
    }

    #[test]
    fn groups_are_read_from_proc() {
        let mine = groups_of(std::process::id());
        let status = std::fs::read_to_string("/proc/self/status").unwrap();
        let line = status.lines().find(|l| l.starts_with("Groups:")).unwrap();
        assert_eq!(mine.len(), line.split_whitespace().count() - 1);
        assert!(groups_of(u32::MAX).is_empty());
    }

    #[test]
    fn instances_keep_their_node_ids_apart() {
        let fs = VfsFs::new(
            Vfs::default(),
            true,
            Caching::new(&MountOptions { demo: true, ..MountOptions::default() }),
            Duration::ZERO,
        )
        .unwrap();
        assert_eq!(fs.mounts.len(), 3);
        assert_eq!(node_id(0, ROOT), ROOT);
        for mount in 0..3 {
            let (index, _, local) = fs.split(node_id(mount, 42)).unwrap();
            assert_eq!((index, local), (mount, 42));
            assert_eq!(fs.inode(node_id(mount, ROOT)).unwrap().ino(), fs.mounts[mount].vfs.root().ino());
        }
        assert_eq!(fs.split(node_id(3, ROOT)).err(), Some(Errno::ESTALE));
        let p = fs.mounts[0].vfs.process(Credentials::root());
        let sys = p.resolve("/sys", false).unwrap();
        assert_eq!(fs.listed_id(0, sys.ino()), node_id(1, ROOT));
        assert_eq!(fs.not_mount_point(0, &sys), Err(Errno::EBUSY));
        assert_eq!(fs.listed_id(1, sys.ino()), node_id(1, fs.mounts[1].nodes.node_id(sys.ino())));
    }

    /// A mount of a VFS of `pages` pages, and a file `f` that filled it
    /// and was unlinked, whose node the kernel still holds: its `FORGET`
    /// is what gives the space back. Returns the node id.
    fn full_of_an_unlinked_file(pages: u64) -> (VfsFs, Client, u64) {
        let vfs = Vfs::new(vfscale::VfsConfig { size_limit: pages * 4096, ..Default::default() });
        let fs = VfsFs::new(vfs, false, Caching::new(&MountOptions::default()), Duration::ZERO).unwrap();
        let root = Client { uid: 0, gid: 0, pid: std::process::id() };
        let ((_, attr), fh, _) = fs.create_file(&root, ROOT, b"f", 0o644, libc::O_RDWR).unwrap();
        let size = (pages * 4096) as usize;
        assert_eq!(fs.write_file(&root, attr.ino.0, fh, 0, &vec![1; size]), Ok(size as u32));
        fs.remove(&root, ROOT, b"f", false).unwrap();
        (fs, root, attr.ino.0)
    }

    /// Runs `ask` on another thread while a forget of `node` is being
    /// served on this one, and serves it once `ask` waits for it or has
    /// answered without waiting; what `ask` answered.
    fn while_forgetting<T: Send>(fs: &VfsFs, node: u64, ask: impl FnOnce() -> T + Send) -> T {
        let serving = fs.forgetting();
        std::thread::scope(|s| {
            let asking = s.spawn(ask);
            while fs.forgets.waiting() == 0 && !asking.is_finished() {
                std::thread::yield_now();
            }
            fs.forget_node(node, 1);
            drop(serving);
            asking.join().unwrap()
        })
    }

    #[test]
    fn statfs_waits_for_a_forget_being_served() {
        let (fs, _, node) = full_of_an_unlinked_file(4);
        let before = fs.fs_stats();
        assert_eq!((before.blocks, before.bfree), (4, 0), "the node keeps the unlinked file");
        let after = while_forgetting(&fs, node, || fs.fs_stats());
        assert_eq!((after.blocks, after.bfree), (4, 4), "statfs answered before the forget it raced");
    }

    #[test]
    fn enospc_is_tried_again_after_a_forget_being_served() {
        let (fs, root, node) = full_of_an_unlinked_file(4);
        let ((_, attr), fh, _) = fs.create_file(&root, ROOT, b"g", 0o644, libc::O_RDWR).unwrap();
        let write = || fs.write_file(&root, attr.ino.0, fh, 0, &[2; 4096]);
        assert_eq!(write(), Err(Errno::ENOSPC), "the node keeps the unlinked file");
        let written = while_forgetting(&fs, node, || fs.unless_full(write));
        assert_eq!(written, Ok(4096), "the write failed before the forget it raced");
    }

    #[test]
    fn join_adds_one_slash() {
        assert_eq!(join(b"/", b"a"), b"/a");
        assert_eq!(join(b"/d", b"a"), b"/d/a");
    }
}
