//! The FUSE request handlers and the [`Server`] state they share: each
//! request becomes the matching call on a [`Process`] with the caller's
//! credentials, its working directory the request's parent directory, so
//! the VFS makes every permission check (the kernel also checks at open
//! when opens send no request) and its errno goes back to the caller
//! unchanged. A node id names a node of one of the mount table's
//! instances (see the `instances` module); renames and links between
//! instances fail with EXDEV.
//!
//! It imports what serving needs: the mount table (`instances`), the
//! caller (`caller`), the reply conversions (`convert`), the node tables,
//! lock owners, demo trees, forgets, lingering and request counts. The
//! front ends (`dev`, `wire` and `ring`) call it, never the other way.
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
//! - Opens and closes (see [`OpenPolicy`]): with record locks in the kernel
//!   and no demo trees, `OPEN` answers ENOSYS once and the kernel never
//!   asks again, nor sends `FLUSH` or `RELEASE`; reads and writes then come
//!   with file handle 0 and go through a description the front end opens
//!   itself (the node table's per-node one). Otherwise every open asks, so
//!   the demo trees get direct I/O and the VFS's locks their `RELEASE`, and
//!   closes skip `FLUSH` unless the VFS holds record locks.
//!
//! Invariant: the names recorded in the node tables change only while the
//! operation that changes them holds `topology` for writing (renames) or
//! are added by replies that carry an entry; operations that turn a node id
//! back into a name (open of a regular file, link, a rename into another
//! directory) hold it for reading, so the name they use is current. Every
//! other request runs without a lock of the front end's own, on as many
//! threads as the session has.

use crate::caller::{credentials, Client};
use crate::convert::{file_attr, kind, negative_attr, set_time};
use crate::demo::Demo;
use crate::forgets::{InService, Serving};
use crate::instances::{node_id, Instances, Mount};
use crate::linger::Linger;
use crate::locks::Locks;
use crate::nodes::ROOT;
use crate::requests::{Counters, Opcode};
use crate::{MountOptions, RecordLocks};
use fuser::{FileAttr, FileHandle, FopenFlags, TimeOrNow};
use std::collections::HashMap;
use std::fmt;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, RwLock};
use std::time::Duration;
use vfscale::cred::Access;
use vfscale::inode::Inode;
use vfscale::{
    AtFlags, Context, Credentials, Errno, FileType, OpenFile, OpenFlags, RenameFlags, SetAttr, Vfs, VfsResult,
};
use vfscale_sync::poison::unpoisoned;

/// How long the kernel may cache entries (negative ones too), attributes
/// and pages of the served VFS: every change goes through this mount,
/// which the kernel sees, so the bound is only a backstop.
const TTL: Duration = Duration::from_secs(24 * 3600);
/// The demo trees change on their own (processes come and go, attributes
/// follow the VFS), so nothing of them is cached, and their files are read
/// with direct I/O, past the sizes they report.
const NO_TTL: Duration = Duration::ZERO;

/// The longest [`Server::settle_forgets`] waits for the forgets being
/// served, and then for what they released to be freed. Both end as soon
/// as that is done (a forget takes microseconds, the releases a few
/// epochs); only a thread stuck elsewhere holds them up, and a busy
/// machine may keep a reader off its CPU for a while.
const SETTLE_AT_MOST: Duration = Duration::from_secs(10);

/// How opens and closes reach the server, decided once per mount from
/// where record locks live and whether the demo trees are mounted: which
/// opens send `OPEN`, which closes `FLUSH`, and the open flags a file is
/// served with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct OpenPolicy {
    /// The VFS decides record locks (`FUSE_POSIX_LOCKS`), so every close
    /// must reach it (`FLUSH` drops the closer's POSIX locks) and every
    /// open must ask (an OFD lock goes at the `RELEASE` of its file).
    vfs_locks: bool,
    /// Regular files open without a request: no VFS locks and no demo
    /// trees (whose files need `FOPEN_DIRECT_IO`, which only `OPEN` can
    /// give), if the kernel offers it (`FUSE_NO_OPEN_SUPPORT`, asked for at
    /// `INIT`: see the `dev` module).
    no_open: bool,
}

impl OpenPolicy {
    pub fn new(options: &MountOptions) -> OpenPolicy {
        let vfs_locks = options.locks == RecordLocks::Vfs;
        OpenPolicy { vfs_locks, no_open: !vfs_locks && !options.demo }
    }

    /// The open flags a file of instance `m` is served with: the demo
    /// trees' files with direct I/O, the others from pages kept across
    /// opens; no `FLUSH` at close unless the VFS holds record locks.
    fn fopen(self, m: &Mount) -> FopenFlags {
        let io = if m.is_tree() { FopenFlags::FOPEN_DIRECT_IO } else { FopenFlags::FOPEN_KEEP_CACHE };
        if self.vfs_locks {
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

/// What serves a mount's requests, on every request thread and queue at
/// once: the mount table (the instances and the kernel's node ids into
/// them), the open handles, the open policy, and the counts and lingering
/// every request goes through.
pub(crate) struct Server {
    instances: Instances,
    handles: Mutex<HashMap<u64, Arc<Handle>>>,
    next_handle: AtomicU64,
    topology: RwLock<()>,
    open_policy: OpenPolicy,
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

impl fmt::Debug for Server {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Server")
            .field("nodes", &self.instances.iter().map(|m| m.nodes.len()).collect::<Vec<_>>())
            .field("open_policy", &self.open_policy)
            .field("demo", &self.demo)
            .finish_non_exhaustive()
    }
}

impl Server {
    /// Serves `vfs`; with `demo`, also the demo trees under `sys/` and
    /// `proc/`.
    pub fn new(vfs: Vfs, demo: bool, open_policy: OpenPolicy, linger: Duration) -> VfsResult<Server> {
        let demo = if demo { Some(Demo::new(&vfs)?) } else { None };
        let requests = Arc::new(Counters::default());
        let mut instances = Instances::new(vfs, TTL);
        for (on, tree) in demo.iter().flat_map(Demo::mounts) {
            instances.mount(tree, on, NO_TTL);
        }
        Ok(Server {
            instances,
            handles: Mutex::new(HashMap::new()),
            next_handle: AtomicU64::new(1),
            topology: RwLock::new(()),
            open_policy,
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

    /// Runs `call` with credentials `cred` at node `id` of its instance
    /// (relative paths start there; an empty path with `AT_EMPTY_PATH`
    /// names the node itself): the system-call context a request names
    /// (its node and its caller), which writes nothing shared.
    fn at<R>(&self, cred: &Credentials, id: u64, call: impl FnOnce(&Context<'_>) -> VfsResult<R>) -> VfsResult<R> {
        let (_, m, _) = self.instances.split(id)?;
        let dir = self.instances.inode(id)?;
        call(&Context::new(&m.vfs, cred, &dir))
    }

    /// After the reply to a request on directory `id` that removed names
    /// (or replaced a cached negative dentry): lets what it released be
    /// freed by whichever thread collects next, not only by this one (the
    /// space of an unlinked file comes back at once, as on tmpfs).
    pub(crate) fn hand_on_releases(&self, id: u64) {
        if let Ok((_, m, _)) = self.instances.split(id) {
            m.vfs.release_barrier(Duration::ZERO);
        }
    }

    /// Runs the releases deferred so far in every instance (what forgotten
    /// nodes held), waiting at most `timeout` for each.
    pub(crate) fn collect(&self, timeout: Duration) {
        for m in self.instances.iter() {
            m.vfs.release_barrier(timeout);
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
        if let Ok((_, m, local)) = self.instances.split(ino) {
            if m.nodes.forget(local, nlookup) {
                // What the node held (an unlinked file's inode, its own
                // description) is freed by whichever thread collects next.
                self.hand_on_releases(ino);
            }
        }
    }

    /// The entry reply for `inode`, reached as `name` in directory
    /// `parent`: one more lookup of it, or the root of the instance
    /// mounted on it.
    fn entry(&self, parent: u64, name: &[u8], inode: &Arc<Inode>) -> VfsResult<(Duration, FileAttr)> {
        let (mount, m, local) = self.instances.split(parent)?;
        if let Some(sub) = self.instances.mounted_on(mount, inode.ino()) {
            let sub_mount = &self.instances[sub];
            return Ok((sub_mount.ttl, file_attr(node_id(sub, ROOT), &sub_mount.vfs.root().stat())));
        }
        let id = m.nodes.remember(local, name, inode);
        Ok((m.ttl, file_attr(node_id(mount, id), &inode.stat())))
    }

    fn add_handle(&self, handle: Handle) -> FileHandle {
        let fh = self.next_handle.fetch_add(1, Ordering::Relaxed);
        unpoisoned(self.handles.lock()).insert(fh, Arc::new(handle));
        FileHandle(fh)
    }

    fn handle(&self, fh: FileHandle) -> VfsResult<Arc<Handle>> {
        unpoisoned(self.handles.lock()).get(&fh.0).cloned().ok_or(Errno::EBADF)
    }

    fn drop_handle(&self, fh: FileHandle) {
        unpoisoned(self.handles.lock()).remove(&fh.0);
    }

    /// Opens regular file `id` through a name the kernel reached it by (the
    /// VFS opens by path only), checking that the name still refers to it.
    fn open_by_name(&self, id: u64, inode: &Inode, cred: &Credentials, flags: OpenFlags) -> VfsResult<Arc<OpenFile>> {
        let (mount, m, local) = self.instances.split(id)?;
        let _names = unpoisoned(self.topology.read());
        for (parent, name) in m.nodes.links(local).into_iter().rev() {
            match self.at(cred, node_id(mount, parent), |c| c.open(&name, flags, 0)) {
                Ok(file) if file.inode().ino() == inode.ino() => return Ok(file),
                Ok(_) | Err(Errno::ENOENT) | Err(Errno::ESTALE) | Err(Errno::ENOTDIR) => continue,
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
        let (_, m, local) = self.instances.split(id)?;
        if let Some(file) = m.nodes.own_file(local) {
            return Ok(file);
        }
        let inode = self.instances.inode(id)?;
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
        let Ok((_, m, _)) = self.instances.split(parent) else { return };
        let local = m.nodes.node_id(victim.ino());
        if m.nodes.get(local).is_none() || m.nodes.own_file(local).is_some() {
            return;
        }
        let own = self.at(&Credentials::root(), parent, |c| c.open(name, OpenFlags::RDWR, 0));
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
            out.extend(batch.into_iter().map(|e| (self.instances.listed_id(mount, e.ino), e.file_type, e.name)));
        }
        Ok(out)
    }

    fn do_setattr(&self, c: &Client, id: u64, attr: SetAttr, fh: Option<FileHandle>) -> VfsResult<FileAttr> {
        let (_, m, _) = self.instances.split(id)?;
        let inode = self.instances.inode(id)?;
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
        Context::new(&m.vfs, &cred, m.vfs.root()).setattr(&inode, rest)?;
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
        let (mount, m, local) = self.instances.split(parent)?;
        let (new_mount, _, new_local) = self.instances.split(newparent)?;
        if mount != new_mount {
            return Err(Errno::EXDEV);
        }
        if flags & !libc::RENAME_NOREPLACE != 0 {
            return Err(Errno::EINVAL);
        }
        let _names = unpoisoned(self.topology.write());
        let cred = credentials(c);
        let moved = self.at(&cred, parent, |c| c.resolve(name, false))?;
        self.instances.not_mount_point(mount, &moved)?;
        let replaced = self.at(&cred, newparent, |c| c.resolve(newname, false)).ok();
        if let Some(replaced) = &replaced {
            self.instances.not_mount_point(mount, replaced)?;
            self.keep_reachable(newparent, newname, replaced);
        }
        let new_dir = self.instances.inode(newparent)?;
        let flags = RenameFlags { noreplace: flags & libc::RENAME_NOREPLACE != 0 };
        self.at(&cred, parent, |c| c.renameat(name, &new_dir, newname, flags))?;
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
        let (mount, m, local) = self.instances.split(id)?;
        let (new_mount, _, _) = self.instances.split(newparent)?;
        if mount != new_mount {
            return Err(Errno::EXDEV);
        }
        let _names = unpoisoned(self.topology.read());
        let inode = self.instances.inode(id)?;
        let cred = credentials(c);
        let new_dir = self.instances.inode(newparent)?;
        for (parent, name) in m.nodes.links(local).into_iter().rev() {
            // A name that no longer reaches the node is skipped; the
            // link's own errors are the reply.
            let linked = self.at(&cred, node_id(mount, parent), |c| {
                if c.resolve(&name, false).map(|i| i.ino()) != Ok(inode.ino()) {
                    return Ok(None);
                }
                Ok(Some(c.linkat(&name, AtFlags::NONE, &new_dir, newname)))
            });
            if let Ok(Some(result)) = linked {
                result?;
                return self.entry(newparent, newname, &inode);
            }
        }
        Err(Errno::ESTALE)
    }
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
/// [`Server::hand_on_releases`] for requests that may have released
/// nodes.
impl Server {
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
        for m in self.instances.iter() {
            m.locks.cancel_waits();
        }
    }

    /// Whether the kernel opens regular files without a request: set up
    /// so, and not refused at `INIT` (read-only after it).
    pub(crate) fn opens_without_request(&self) -> bool {
        self.open_policy.no_open && !self.no_open_refused.load(Ordering::Relaxed)
    }

    /// Whether the VFS decides record locks (`FUSE_POSIX_LOCKS`).
    pub(crate) fn holds_record_locks(&self) -> bool {
        self.open_policy.vfs_locks
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
            .at(&credentials(c), parent, |c| c.resolve(name, false))
            .and_then(|inode| self.entry(parent, name, &inode));
        match (result, self.instances.split(parent)) {
            (Err(Errno::ENOENT), Ok((_, m, _))) if !m.is_tree() => Ok((m.ttl, negative_attr())),
            (result, _) => result,
        }
    }

    /// `GETATTR`.
    pub(crate) fn attributes(&self, id: u64) -> VfsResult<Entry> {
        let (_, m, _) = self.instances.split(id)?;
        Ok((m.ttl, file_attr(id, &self.instances.inode(id)?.stat())))
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
        let (_, m, _) = self.instances.split(id)?;
        Ok((m.ttl, self.do_setattr(c, id, attr, fh)?))
    }

    /// `READLINK`.
    pub(crate) fn link_target(&self, id: u64) -> VfsResult<Vec<u8>> {
        self.instances.inode(id)?.symlink_target().map(<[u8]>::to_vec).ok_or(Errno::EINVAL)
    }

    /// `MKNOD`: the kernel does FIFO, socket and device I/O itself; the
    /// VFS keeps the node.
    pub(crate) fn make_node(&self, c: &Client, parent: u64, name: &[u8], mode: u32, rdev: u32) -> VfsResult<Entry> {
        let made = self.at(&credentials(c), parent, |c| {
            c.mknod(name, mode, u64::from(rdev))?;
            c.resolve(name, false)
        })?;
        self.entry(parent, name, &made)
    }

    /// `MKDIR`.
    pub(crate) fn make_dir(&self, c: &Client, parent: u64, name: &[u8], mode: u32) -> VfsResult<Entry> {
        let made = self.at(&credentials(c), parent, |c| {
            c.mkdir(name, mode & 0o7777)?;
            c.resolve(name, false)
        })?;
        self.entry(parent, name, &made)
    }

    /// `UNLINK`, or `RMDIR` with `dir`.
    pub(crate) fn remove(&self, c: &Client, parent: u64, name: &[u8], dir: bool) -> VfsResult<()> {
        let (mount, m, local) = self.instances.split(parent)?;
        let cred = credentials(c);
        let victim = self.at(&cred, parent, |c| c.resolve(name, false))?;
        self.instances.not_mount_point(mount, &victim)?;
        self.keep_reachable(parent, name, &victim);
        self.at(&cred, parent, |c| if dir { c.rmdir(name) } else { c.unlink(name) })?;
        m.nodes.unlinked(m.nodes.node_id(victim.ino()), local, name);
        Ok(())
    }

    /// `SYMLINK`: `name` in `parent`, pointing to `target`.
    pub(crate) fn make_symlink(&self, c: &Client, parent: u64, name: &[u8], target: &[u8]) -> VfsResult<Entry> {
        let made = self.at(&credentials(c), parent, |c| {
            c.symlink(target, name)?;
            c.resolve(name, false)
        })?;
        self.entry(parent, name, &made)
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
        let (mount, m, _) = self.instances.split(id)?;
        let inode = self.instances.inode(id)?;
        let file = if inode.file_type() == FileType::Directory {
            Context::new(&m.vfs, &cred, &inode).open(".", flags, 0)?
        } else {
            self.open_by_name(id, &inode, &cred, flags)?
        };
        Ok((self.add_handle(Handle::File { mount, file }), self.open_policy.fopen(m)))
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
        if !self.open_policy.vfs_locks {
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
        let (mount, _, _) = self.instances.split(id)?;
        let file = self.at(&credentials(c), id, |c| c.open(".", OpenFlags(flags | libc::O_DIRECTORY), 0))?;
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
        let mut entries = unpoisoned(entries.lock());
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
        let s = self.instances.served().vfs.statfs();
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
        self.at(&credentials(c), id, |c| c.setxattr("", AtFlags::EMPTY_PATH, name, value, flags))
    }

    /// `GETXATTR`.
    pub(crate) fn get_xattr(&self, c: &Client, id: u64, name: &[u8], size: u32) -> VfsResult<Xattr> {
        let mut buf = vec![0; size as usize];
        let n = self.at(&credentials(c), id, |c| c.getxattr("", AtFlags::EMPTY_PATH, name, &mut buf))?;
        Ok(xattr(n, size, buf))
    }

    /// `LISTXATTR`.
    pub(crate) fn list_xattr(&self, c: &Client, id: u64, size: u32) -> VfsResult<Xattr> {
        let mut buf = vec![0; size as usize];
        let n = self.at(&credentials(c), id, |c| c.listxattr("", AtFlags::EMPTY_PATH, &mut buf))?;
        Ok(xattr(n, size, buf))
    }

    /// `REMOVEXATTR`.
    pub(crate) fn remove_xattr(&self, c: &Client, id: u64, name: &[u8]) -> VfsResult<()> {
        self.at(&credentials(c), id, |c| c.removexattr("", AtFlags::EMPTY_PATH, name))
    }

    /// `ACCESS` with `access(2)`'s mask (`R_OK`, `W_OK`, `X_OK`).
    pub(crate) fn check_access(&self, c: &Client, id: u64, mask: i32) -> VfsResult<()> {
        let mut access = Access::empty();
        for (flag, a) in [(libc::R_OK, Access::READ), (libc::W_OK, Access::WRITE), (libc::X_OK, Access::EXEC)] {
            if mask & flag != 0 {
                access |= a;
            }
        }
        let st = self.instances.inode(id)?.stat();
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
        let (mount, m, _) = self.instances.split(parent)?;
        if m.is_tree() {
            // Linux's vfs_create answers EACCES where a directory cannot
            // hold new files, as a kernfs one cannot.
            return Err(Errno::EACCES);
        }
        let flags = OpenFlags(flags | libc::O_CREAT);
        let file = self.at(&credentials(c), parent, |c| c.open(name, flags, mode & 0o7777))?;
        let entry = self.entry(parent, name, file.inode())?;
        let fh = if self.opens_without_request() {
            // Like the opens to come, which send nothing: handle 0, whose
            // I/O goes through the node's own description, and no RELEASE
            // to wait for.
            FileHandle(0)
        } else {
            self.add_handle(Handle::File { mount, file })
        };
        Ok((entry, fh, self.open_policy.fopen(m)))
    }

    /// The open file description behind `fh` that locks apply to, and the
    /// lock owners of its instance.
    pub(crate) fn lock_file(&self, fh: FileHandle) -> VfsResult<(&Arc<Locks>, Arc<OpenFile>)> {
        match &*self.handle(fh)? {
            Handle::File { mount, file } | Handle::Dir { mount, file, .. } => {
                Ok((&self.instances[*mount].locks, Arc::clone(file)))
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

    /// A mount of a VFS of `pages` pages, and a file `f` that filled it
    /// and was unlinked, whose node the kernel still holds: its `FORGET`
    /// is what gives the space back. Returns the node id.
    fn full_of_an_unlinked_file(pages: u64) -> (Server, Client, u64) {
        let vfs = Vfs::new(vfscale::VfsConfig { size_limit: pages * 4096, ..Default::default() });
        let fs = Server::new(vfs, false, OpenPolicy::new(&MountOptions::default()), Duration::ZERO).unwrap();
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
    fn while_forgetting<T: Send>(fs: &Server, node: u64, ask: impl FnOnce() -> T + Send) -> T {
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

    /// Two requests of different callers on different nodes write no
    /// cache line in common: in particular no process-wide counter (each
    /// request once made a VFS process, whose pid one shared counter
    /// handed out). The audit sees what the VFS and its primitives touch;
    /// the front end's own bookkeeping (the node table's mutex, the request
    /// counts, which `serve` keeps) is outside it.
    #[test]
    fn requests_on_different_nodes_write_no_shared_line() {
        const { assert!(vfscale_sync::audit::ENABLED, "fuse tests build vfscale-sync with the audit feature") };
        let fs = Server::new(Vfs::default(), false, OpenPolicy::new(&MountOptions::default()), Duration::ZERO).unwrap();
        let root = Client { uid: 0, gid: 0, pid: std::process::id() };
        let alice = Client { uid: 1000, gid: 1000, pid: std::process::id() };
        let made: Vec<(u64, u64)> = [&b"a"[..], b"b"]
            .iter()
            .map(|dir| {
                let (_, d) = fs.make_dir(&root, ROOT, dir, 0o755).unwrap();
                let ((_, f), fh, _) = fs.create_file(&root, d.ino.0, b"f", 0o644, libc::O_RDWR).unwrap();
                fs.set_xattr(&root, f.ino.0, b"user.k", b"v", 0).unwrap();
                fs.release_file(fh, None);
                (d.ino.0, f.ino.0)
            })
            .collect();
        let fs = &fs;
        let request = |caller: Client, (dir, file): (u64, u64)| {
            move |_: usize| -> Result<(), String> {
                let (_, attr) = fs.look_up(&caller, dir, b"f").map_err(|e| e.to_string())?;
                assert_eq!(attr.ino.0, file);
                fs.forget_node(file, 1);
                assert_eq!(fs.get_xattr(&caller, file, b"user.k", 0), Ok(Xattr::Size(1)));
                fs.attributes(file).map(drop).map_err(|e| e.to_string())
            }
        };
        let (a, b) = (request(root, made[0]), request(alice, made[1]));
        let verdict = vfscale_sync::conflict::check_pair(&a, &b).unwrap();
        assert!(verdict.conflict_free(), "{:#?}", verdict.conflicts);
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
}
