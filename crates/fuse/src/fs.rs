//! The FUSE request handlers and the [`Server`] state they share: each
//! request becomes the matching call on a [`Context`] of the served mount
//! namespace with the caller's credentials, its relative paths starting at
//! the request's node, so the VFS makes every permission check (the kernel
//! also checks at open when opens send no request), crosses every mount
//! point, and its errno goes back to the caller unchanged. A node id names
//! a position of the namespace, a (mount, inode) pair (see the `nodes`
//! module); renames and links between mounts fail with the VFS's EXDEV,
//! and a mount point may not be removed or renamed (its EBUSY).
//!
//! It imports what serving needs: the namespace (`namespace`), the node
//! table (`nodes`), the caller (`caller`), the reply conversions
//! (`convert`), lock owners, demo trees, forgets, lingering and request
//! counts. The front ends (`dev`, `wire` and `ring`) call it, never the
//! other way.
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
//!   follow the VFS): nothing of them is cached (their filesystems are
//!   [`Caching::Live`], misses are plain ENOENT) and their files are read
//!   with direct I/O, past the sizes they report.
//! - Opens and closes (see [`OpenPolicy`]): with record locks in the kernel
//!   and no demo trees, `OPEN` answers ENOSYS once and the kernel never
//!   asks again, nor sends `FLUSH` or `RELEASE`; reads and writes then come
//!   with file handle 0 and go through a description the front end opens
//!   itself (the node table's per-node one). Otherwise every open asks, so
//!   the demo trees get direct I/O and the VFS's locks their `RELEASE`, and
//!   closes skip `FLUSH` unless the VFS holds record locks.
//!
//! Invariant: the names recorded in the node table change only while the
//! operation that changes them holds `topology` for writing (renames) or
//! are added by replies that carry an entry; operations that turn a node id
//! back into a name (open of a regular file, link, a rename into another
//! directory) hold it for reading, so the name they use is current. Every
//! other request runs without a lock of the front end's own, on as many
//! threads as the session has.

use crate::caller::{credentials, Client};
use crate::convert::{file_attr, kind, negative_attr};
use crate::demo::Demo;
use crate::forgets::{InService, Serving};
use crate::linger::Linger;
use crate::locks::Locks;
use crate::namespace::{Caching, Filesystem, Namespace};
use crate::nodes::{location_of, opened_at, Nodes};
use crate::requests::{Counters, Opcode};
use crate::{MountError, MountOptions, ReadOnlyMount, RecordLocks};
use fuser::{FileAttr, FileHandle, FopenFlags};
use std::collections::HashMap;
use std::fmt;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, RwLock};
use std::time::Duration;
use vfscale::cred::Access;
use vfscale::{
    AtFlags, Context, Credentials, Errno, FileType, Location, MountFlags, OpenFile, OpenFlags, RenameFlags, SetAttr,
    SetTime, Vfs, VfsResult,
};
use vfscale_sync::poison::unpoisoned;

/// How long the kernel may cache entries (negative ones too), attributes
/// and pages of the served VFS: every change goes through this mount,
/// which the kernel sees, so the bound is only a backstop.
const TTL: Duration = Duration::from_secs(24 * 3600);

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

    /// This policy for a mount that also serves live filesystems (read-only
    /// mounts of trees that change on their own), whose files, like the
    /// demo trees', need an `OPEN` for direct I/O.
    pub fn with_live_mounts(self) -> OpenPolicy {
        OpenPolicy { no_open: false, ..self }
    }

    /// The open flags a file of filesystem `fs` is served with: a live
    /// one's files (the demo trees') with direct I/O, the others from pages
    /// kept across opens; no `FLUSH` at close unless the VFS holds record
    /// locks.
    fn fopen(self, fs: &Filesystem) -> FopenFlags {
        let io = if fs.is_live() { FopenFlags::FOPEN_DIRECT_IO } else { FopenFlags::FOPEN_KEEP_CACHE };
        if self.vfs_locks {
            io
        } else {
            io | FopenFlags::FOPEN_NOFLUSH
        }
    }
}

/// An open file or directory, behind a FUSE file handle; the description
/// knows the mount it was opened through. File handle 0 is none: what the
/// kernel opened without a request.
enum Handle {
    /// A file, or a directory opened with `open`.
    File { file: Arc<OpenFile> },
    /// A directory: a snapshot of its entries, taken at offset 0 (opendir
    /// or rewinddir), so the kernel's offsets index it.
    Dir { file: Arc<OpenFile>, entries: Mutex<Vec<(u64, FileType, Vec<u8>)>> },
}

/// What serves a mount's requests, on every request thread and queue at
/// once: the namespace and the kernel's node ids into it, the open
/// handles, the open policy, and the counts and lingering every request
/// goes through.
pub(crate) struct Server {
    ns: Namespace,
    nodes: Nodes,
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
    /// Keeps the demo trees followed while the mount lives.
    demo: Option<Demo>,
}

impl fmt::Debug for Server {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Server")
            .field("nodes", &self.nodes)
            .field("open_policy", &self.open_policy)
            .field("demo", &self.demo)
            .finish_non_exhaustive()
    }
}

impl Server {
    /// Serves `vfs`; with `demo`, also the demo trees mounted on `sys/`
    /// and `proc/`.
    #[cfg(test)]
    pub fn new(vfs: Vfs, demo: bool, open_policy: OpenPolicy, linger: Duration) -> Result<Server, MountError> {
        Server::with_mounts(vfs, demo, Vec::new(), open_policy, linger)
    }

    /// [`Server::new`], with the instances of `read_only` mounted
    /// read-only on their paths (after the demo trees, in the order
    /// given); the error names the mount that could not be made.
    pub fn with_mounts(
        vfs: Vfs,
        demo: bool,
        read_only: Vec<ReadOnlyMount>,
        open_policy: OpenPolicy,
        linger: Duration,
    ) -> Result<Server, MountError> {
        let setup = |e: Errno| MountError::Invalid(format!("cannot set up the served tree's mounts: {e}"));
        let demo = if demo { Some(Demo::new(&vfs).map_err(setup)?) } else { None };
        let mut ns = Namespace::new(vfs, Caching::Kept(TTL)).map_err(setup)?;
        if let Some(demo) = &demo {
            demo.mount(&mut ns).map_err(setup)?;
        }
        let open_policy = if read_only.is_empty() { open_policy } else { open_policy.with_live_mounts() };
        for m in read_only {
            ns.mount_read_only(m.fs, &m.source, &m.path).map_err(|e| {
                MountError::Invalid(format!(
                    "cannot mount {} read-only on {} of the served tree: {e}",
                    m.source, m.path
                ))
            })?;
        }
        Ok(Server::serving(ns, demo, open_policy, linger))
    }

    /// Serves the namespace `ns`, set up by the caller (see
    /// [`Namespace::mount_read_only`]).
    fn serving(ns: Namespace, demo: Option<Demo>, open_policy: OpenPolicy, linger: Duration) -> Server {
        let requests = Arc::new(Counters::default());
        Server {
            nodes: Nodes::new(ns.root().clone()),
            ns,
            handles: Mutex::new(HashMap::new()),
            next_handle: AtomicU64::new(1),
            topology: RwLock::new(()),
            open_policy,
            no_open_refused: AtomicBool::new(false),
            linger: Arc::new(Linger::new(linger, Arc::clone(&requests))),
            requests,
            forgets: InService::default(),
            demo,
        }
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

    /// The position of node `id`; ESTALE if the kernel has forgotten it.
    fn place(&self, id: u64) -> VfsResult<Arc<Location>> {
        self.nodes.get(id).ok_or(Errno::ESTALE)
    }

    /// Runs `call` with credentials `cred` at node `id` (relative paths
    /// start there; an empty path with `AT_EMPTY_PATH` names the node
    /// itself): the system-call context a request names (its node and its
    /// caller), which writes nothing shared.
    fn at<R>(&self, cred: &Credentials, id: u64, call: impl FnOnce(&Context<'_>) -> VfsResult<R>) -> VfsResult<R> {
        let at = self.place(id)?;
        call(&self.ns.context(cred, &at))
    }

    /// After the reply to a request on node `_id` that removed names (or
    /// replaced a cached negative dentry): lets what it released be freed
    /// by whichever thread collects next, not only by this one (the space
    /// of an unlinked file comes back at once, as on tmpfs). Handing on is
    /// the same for every filesystem.
    pub(crate) fn hand_on_releases(&self, _id: u64) {
        self.ns.served().vfs.release_barrier(Duration::ZERO);
    }

    /// Runs the releases deferred so far in every filesystem mounted
    /// (what forgotten nodes held), waiting at most `timeout` for each.
    pub(crate) fn collect(&self, timeout: Duration) {
        for fs in self.ns.filesystems() {
            fs.vfs.release_barrier(timeout);
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
        if self.nodes.forget(ino, nlookup) {
            // What the node held (an unlinked file's inode, its own
            // description) is freed by whichever thread collects next.
            self.hand_on_releases(ino);
        }
    }

    /// The entry reply for position `at`, reached as `name` in directory
    /// `parent`: one more lookup of it. A name that is a mount point
    /// reaches the root of what is mounted there, as the walk crossed.
    fn entry(&self, parent: u64, name: &[u8], at: Location) -> VfsResult<Entry> {
        let ttl = self.ns.filesystem(&at.mount)?.ttl();
        let st = at.inode.stat();
        let id = self.nodes.remember(parent, name, at)?;
        Ok((ttl, file_attr(id, &st)))
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

    /// Opens regular file `id` (at `at`) through a name the kernel reached
    /// it by (the VFS opens by path only), checking that the name still
    /// refers to it, through the same mount.
    fn open_by_name(&self, id: u64, at: &Location, cred: &Credentials, flags: OpenFlags) -> VfsResult<Arc<OpenFile>> {
        let _names = unpoisoned(self.topology.read());
        for (parent, name) in self.nodes.links(id).into_iter().rev() {
            match self.at(cred, parent, |c| c.open(&name, flags, 0)) {
                Ok(file) if opened_at(&file, at) => return Ok(file),
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
        if let Some(file) = self.nodes.own_file(id) {
            return Ok(file);
        }
        let at = self.place(id)?;
        let file = self.open_by_name(id, &at, &Credentials::root(), OpenFlags::RDWR)?;
        Ok(self.nodes.keep_own_file(id, file))
    }

    /// Before `victim`, reached as `name` in `parent`, loses what may be
    /// its last name: if the kernel knows it and may have opened it
    /// without a request, the node's own description is opened now, while
    /// the name still reaches it, so the kernel's reads and writes through
    /// those opens keep working after the name is gone (as an unlinked
    /// file's do).
    fn keep_reachable(&self, parent: u64, name: &[u8], victim: &Location) {
        let inode = &victim.inode;
        if !self.opens_without_request() || inode.file_type() != FileType::Regular || inode.stat().nlink > 1 {
            return;
        }
        let Ok(id) = self.nodes.node_id(victim) else { return };
        if self.nodes.get(id).is_none() || self.nodes.own_file(id).is_some() {
            return;
        }
        let own = self.at(&Credentials::root(), parent, |c| c.open(name, OpenFlags::RDWR, 0));
        if let Some(file) = own.ok().filter(|f| opened_at(f, victim)) {
            self.nodes.keep_own_file(id, file);
        }
    }

    /// Re-reads a directory's entries into its handle (at offset 0). An
    /// entry's node id is its inode's seen through the directory's mount:
    /// for a mount point the covered directory's, as Linux's `d_ino` is.
    fn snapshot(&self, file: &OpenFile) -> VfsResult<Vec<(u64, FileType, Vec<u8>)>> {
        let slot = self.nodes.slot(file.mount())?;
        file.lseek(0, vfscale::Whence::Set)?;
        let mut out = Vec::new();
        loop {
            let batch = file.readdir(256)?;
            if batch.is_empty() {
                break;
            }
            for e in batch {
                out.push((slot.listed(e.ino), e.file_type, e.name));
            }
        }
        Ok(out)
    }

    fn do_setattr(&self, c: &Client, id: u64, attr: SetAttr, fh: Option<FileHandle>) -> VfsResult<FileAttr> {
        let at = self.place(id)?;
        let cred = credentials(c);
        let mut rest = attr;
        if self.ns.filesystem(&at.mount)?.is_live() && attr.size.is_some() {
            // sysfs ignores a size change (`echo 2 > attr` truncates
            // first); the caller must still be allowed to write.
            let st = at.inode.stat();
            vfscale::cred::permission(st.mode, st.uid, st.gid, &cred, Access::WRITE)?;
            rest.size = None;
        }
        if let (Some(len), Some(fh)) = (rest.size, fh) {
            // ftruncate: the open file's write access decides (an O_TRUNC
            // open comes without a handle, Linux's `fuse_do_setattr`).
            self.data_file(id, fh)?.truncate(len, &cred)?;
            rest.size = None;
        }
        self.ns.context(&cred, &at).setattr(&at.inode, rest)?;
        Ok(file_attr(id, &at.inode.stat()))
    }

    /// `RENAME` and `RENAME2` (only `RENAME_NOREPLACE`), within a mount.
    pub(crate) fn rename_entry(
        &self,
        c: &Client,
        parent: u64,
        name: &[u8],
        newparent: u64,
        newname: &[u8],
        flags: u32,
    ) -> VfsResult<()> {
        if flags & !libc::RENAME_NOREPLACE != 0 {
            return Err(Errno::EINVAL);
        }
        let (from, to) = (self.place(parent)?, self.place(newparent)?);
        let _names = unpoisoned(self.topology.write());
        let cred = credentials(c);
        let (old_dir, new_dir) = (self.ns.context(&cred, &from), self.ns.context(&cred, &to));
        let moved = old_dir.locate(name, false)?;
        let replaced = new_dir.locate(newname, false).ok();
        if let Some(replaced) = &replaced {
            self.keep_reachable(newparent, newname, replaced);
        }
        let flags = RenameFlags { noreplace: flags & libc::RENAME_NOREPLACE != 0 };
        old_dir.rename_to(name, &new_dir, newname, flags)?;
        let moved_id = self.nodes.node_id(&moved)?;
        if let Some(replaced) = replaced.filter(|r| !Arc::ptr_eq(&r.inode, &moved.inode)) {
            if let Ok(replaced_id) = self.nodes.node_id(&replaced) {
                self.nodes.unlinked(replaced_id, newparent, newname);
            }
        }
        self.nodes.unlinked(moved_id, parent, name);
        self.nodes.linked(moved_id, newparent, newname);
        Ok(())
    }

    /// `LINK`: node `id` gets the name `newname` in `newparent`, which must
    /// be in the same mount (else EXDEV).
    pub(crate) fn link_entry(&self, c: &Client, id: u64, newparent: u64, newname: &[u8]) -> VfsResult<Entry> {
        let (at, to) = (self.place(id)?, self.place(newparent)?);
        if at.mount.id() != to.mount.id() {
            return Err(Errno::EXDEV);
        }
        let _names = unpoisoned(self.topology.read());
        let cred = credentials(c);
        let new_dir = self.ns.context(&cred, &to);
        for (parent, name) in self.nodes.links(id).into_iter().rev() {
            // A name that no longer reaches the node is skipped; the
            // link's own errors are the reply.
            let linked = self.at(&cred, parent, |c| {
                match c.locate(&name, false) {
                    Ok(found) if Arc::ptr_eq(&found.inode, &at.inode) && found.mount.id() == at.mount.id() => {}
                    _ => return Ok(None),
                }
                Ok(Some(c.link_to(&name, AtFlags::NONE, &new_dir, newname)))
            });
            if let Ok(Some(result)) = linked {
                result?;
                return self.entry(newparent, newname, (*at).clone());
            }
        }
        Err(Errno::ESTALE)
    }
}

/// An entry reply: how long the kernel may keep it, and the node.
pub(crate) type Entry = (Duration, FileAttr);

/// The changes a `SETATTR` asks for. Each front end converts the times
/// itself (`convert::fuser_set_time` for `/dev/fuse`, the `wire` module's
/// parser for the queues), so both store the same time for one request.
#[derive(Debug, Clone, Copy)]
pub(crate) struct AttrChanges {
    pub mode: Option<u32>,
    pub uid: Option<u32>,
    pub gid: Option<u32>,
    pub size: Option<u64>,
    pub atime: SetTime,
    pub mtime: SetTime,
}

impl Default for AttrChanges {
    /// No change.
    fn default() -> Self {
        AttrChanges { mode: None, uid: None, gid: None, size: None, atime: SetTime::Omit, mtime: SetTime::Omit }
    }
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
        for fs in self.ns.filesystems() {
            fs.locks.cancel_waits();
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

    /// `LOOKUP`: the walk crosses a mount point (to the root of what is
    /// mounted there) and `..` at a mount's root (to the parent mount), as
    /// the VFS's walks do. A miss in a filesystem whose entries are kept
    /// is a negative entry: the name can only appear through this mount,
    /// whose create, mknod, mkdir, symlink, link or rename replaces the
    /// kernel's entry.
    pub(crate) fn look_up(&self, c: &Client, parent: u64, name: &[u8]) -> VfsResult<Entry> {
        let dir = self.place(parent)?;
        let cred = credentials(c);
        match self.ns.context(&cred, &dir).locate(name, false) {
            Ok(found) => self.entry(parent, name, found),
            Err(Errno::ENOENT) => match self.ns.filesystem(&dir.mount)?.caching {
                Caching::Kept(ttl) => Ok((ttl, negative_attr())),
                Caching::Live => Err(Errno::ENOENT),
            },
            Err(e) => Err(e),
        }
    }

    /// `GETATTR`.
    pub(crate) fn attributes(&self, id: u64) -> VfsResult<Entry> {
        let at = self.place(id)?;
        Ok((self.ns.filesystem(&at.mount)?.ttl(), file_attr(id, &at.inode.stat())))
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
        let attr = SetAttr { mode, uid, gid, size, atime, mtime };
        let ttl = self.ns.filesystem(&self.place(id)?.mount)?.ttl();
        Ok((ttl, self.do_setattr(c, id, attr, fh)?))
    }

    /// `READLINK`.
    pub(crate) fn link_target(&self, id: u64) -> VfsResult<Vec<u8>> {
        self.place(id)?.inode.symlink_target().map(<[u8]>::to_vec).ok_or(Errno::EINVAL)
    }

    /// `MKNOD`: the kernel does FIFO, socket and device I/O itself; the
    /// VFS keeps the node.
    pub(crate) fn make_node(&self, c: &Client, parent: u64, name: &[u8], mode: u32, rdev: u32) -> VfsResult<Entry> {
        let made = self.at(&credentials(c), parent, |c| {
            c.mknod(name, mode, u64::from(rdev))?;
            c.locate(name, false)
        })?;
        self.entry(parent, name, made)
    }

    /// `MKDIR`.
    pub(crate) fn make_dir(&self, c: &Client, parent: u64, name: &[u8], mode: u32) -> VfsResult<Entry> {
        let made = self.at(&credentials(c), parent, |c| {
            c.mkdir(name, mode & 0o7777)?;
            c.locate(name, false)
        })?;
        self.entry(parent, name, made)
    }

    /// `UNLINK`, or `RMDIR` with `dir`.
    pub(crate) fn remove(&self, c: &Client, parent: u64, name: &[u8], dir: bool) -> VfsResult<()> {
        let cred = credentials(c);
        // A mount point is the VFS's EBUSY: the victim found here is never
        // the root of a mount the name leads to.
        let victim = self.at(&cred, parent, |c| c.locate(name, false))?;
        self.keep_reachable(parent, name, &victim);
        self.at(&cred, parent, |c| if dir { c.rmdir(name) } else { c.unlink(name) })?;
        if let Ok(id) = self.nodes.node_id(&victim) {
            self.nodes.unlinked(id, parent, name);
        }
        Ok(())
    }

    /// `SYMLINK`: `name` in `parent`, pointing to `target`.
    pub(crate) fn make_symlink(&self, c: &Client, parent: u64, name: &[u8], target: &[u8]) -> VfsResult<Entry> {
        let made = self.at(&credentials(c), parent, |c| {
            c.symlink(target, name)?;
            c.locate(name, false)
        })?;
        self.entry(parent, name, made)
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
        let at = self.place(id)?;
        let fs = self.ns.filesystem(&at.mount)?;
        let file = if at.inode.file_type() == FileType::Directory {
            self.ns.context(&cred, &at).open(".", flags, 0)?
        } else {
            self.open_by_name(id, &at, &cred, flags)?
        };
        Ok((self.add_handle(Handle::File { file }), self.open_policy.fopen(fs)))
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
        let file = self.at(&credentials(c), id, |c| c.open(".", OpenFlags(flags | libc::O_DIRECTORY), 0))?;
        let handle = Handle::Dir { file, entries: Mutex::new(Vec::new()) };
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
        let Handle::Dir { file, entries } = &*handle else { return Err(Errno::ENOTDIR) };
        let mut entries = unpoisoned(entries.lock());
        if offset == 0 {
            *entries = self.snapshot(file)?;
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

    /// `STATFS` of node `id`: the filesystem its mount shows (the served
    /// VFS's, or a demo tree's under `sys/` and `proc/`), as tmpfs: the
    /// limits (0 where there is none), so `df` shows the `--size` and
    /// `--inodes` a mount was given, and, after the forgets being served
    /// have ended, without what they freed.
    pub(crate) fn fs_stats(&self, id: u64) -> VfsResult<FsStats> {
        let at = self.place(id)?;
        let fs = self.ns.filesystem(&at.mount)?;
        self.settle_forgets();
        let s = fs.vfs.statfs();
        let bsize = s.block_size as u32;
        Ok(FsStats {
            blocks: s.blocks,
            bfree: s.blocks_free,
            bavail: s.blocks_free,
            files: s.files,
            ffree: s.files_free,
            bsize,
            namelen: 255,
            frsize: bsize,
        })
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
    /// The VFS's `faccessat` checks, its mount's included (EROFS for
    /// writing through a read-only one).
    pub(crate) fn check_access(&self, c: &Client, id: u64, mask: i32) -> VfsResult<()> {
        let mut access = Access::empty();
        for (flag, a) in [(libc::R_OK, Access::READ), (libc::W_OK, Access::WRITE), (libc::X_OK, Access::EXEC)] {
            if mask & flag != 0 {
                access |= a;
            }
        }
        self.at(&credentials(c), id, |c| c.access("", access, AtFlags::EMPTY_PATH))
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
        let dir = self.place(parent)?;
        let fs = self.ns.filesystem(&dir.mount)?;
        if fs.is_live() {
            // Linux's vfs_create answers EACCES where a directory cannot
            // hold new files, as a kernfs one cannot, after the mount's
            // EROFS.
            let read_only = dir.mount.flags().contains(MountFlags::RDONLY);
            return Err(if read_only { Errno::EROFS } else { Errno::EACCES });
        }
        let flags = OpenFlags(flags | libc::O_CREAT);
        let file = self.ns.context(&credentials(c), &dir).open(name, flags, mode & 0o7777)?;
        let entry = self.entry(parent, name, location_of(&file))?;
        let fh = if self.opens_without_request() {
            // Like the opens to come, which send nothing: handle 0, whose
            // I/O goes through the node's own description, and no RELEASE
            // to wait for.
            FileHandle(0)
        } else {
            self.add_handle(Handle::File { file })
        };
        Ok((entry, fh, self.open_policy.fopen(fs)))
    }

    /// The open file description behind `fh` that locks apply to, and the
    /// lock owners of its filesystem.
    pub(crate) fn lock_file(&self, fh: FileHandle) -> VfsResult<(&Arc<Locks>, Arc<OpenFile>)> {
        match &*self.handle(fh)? {
            Handle::File { file } | Handle::Dir { file, .. } => {
                Ok((&self.ns.filesystem(file.mount())?.locks, Arc::clone(file)))
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
    use crate::nodes::ROOT;

    /// A read-only mount whose path cannot be made (it lies in another
    /// read-only mount that lacks it) fails the setup, naming its source
    /// and path.
    #[test]
    fn a_read_only_mount_that_cannot_be_made_is_named() {
        let tree = Vfs::default();
        tree.process(Credentials::root()).mkdir("/there", 0o755).unwrap();
        let at = |fs: &Vfs, source: &str, path: &str| ReadOnlyMount {
            fs: fs.clone(),
            source: source.into(),
            path: path.into(),
        };
        let policy = || OpenPolicy::new(&MountOptions::default());
        let fine = vec![at(&tree, "tree", "/a"), at(&Vfs::default(), "inner", "/a/there")];
        assert!(Server::with_mounts(Vfs::default(), false, fine, policy(), Duration::ZERO).is_ok());
        let missing = vec![at(&tree, "tree", "/a"), at(&Vfs::default(), "inner", "/a/missing")];
        let err = Server::with_mounts(Vfs::default(), false, missing, policy(), Duration::ZERO).unwrap_err();
        assert_eq!(
            err.to_string(),
            "cannot mount inner read-only on /a/missing of the served tree: EROFS: Read-only file system"
        );
    }

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
        let before = fs.fs_stats(ROOT).unwrap();
        assert_eq!((before.blocks, before.bfree), (4, 0), "the node keeps the unlinked file");
        let after = while_forgetting(&fs, node, || fs.fs_stats(ROOT).unwrap());
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

#[cfg(test)]
mod namespace_tests {
    use super::*;
    use crate::nodes::ROOT;

    const ROOT_CALLER: Client = Client { uid: 0, gid: 0, pid: 0 };

    /// A server of a fresh VFS with the demo trees, and the VFS.
    fn demo_server() -> (Server, Vfs) {
        let vfs = Vfs::new(vfscale::VfsConfig { inode_limit: 1000, ..Default::default() });
        let options = MountOptions { demo: true, ..MountOptions::default() };
        (Server::new(vfs.clone(), true, OpenPolicy::new(&options), Duration::ZERO).unwrap(), vfs)
    }

    /// The node id a walk of `path` from the root ends at, looking up
    /// each component as the kernel does.
    fn walk(fs: &Server, path: &str) -> VfsResult<(u64, FileAttr)> {
        let mut at = (ROOT, fs.attributes(ROOT)?.1);
        for part in path.split('/').filter(|p| !p.is_empty()) {
            let (_, attr) = fs.look_up(&ROOT_CALLER, at.0, part.as_bytes())?;
            if attr.ino.0 == 0 {
                return Err(Errno::ENOENT);
            }
            at = (attr.ino.0, attr);
        }
        Ok(at)
    }

    fn read_all(fs: &Server, id: u64) -> String {
        let (fh, flags) = fs.open_file(&ROOT_CALLER, id, libc::O_RDONLY).unwrap();
        assert!(flags.contains(FopenFlags::FOPEN_DIRECT_IO), "a demo tree's file is read directly");
        let data = fs.read_file(id, fh, 0, 1 << 16).unwrap();
        fs.release_file(fh, None);
        String::from_utf8(data).unwrap()
    }

    #[test]
    fn demo_trees_are_reached_through_the_namespace() {
        let (fs, vfs) = demo_server();
        let (sys, sys_attr) = walk(&fs, "/sys").unwrap();
        let covered = vfs.process(Credentials::root()).resolve("/sys", false).unwrap();
        assert_ne!(sys_attr.ino.0, covered.ino(), "a lookup of a mount point crosses it");
        assert_eq!(sys_attr.perm, 0o755, "kernfs's root, not the covered 0555 directory");
        let (attr_id, _) = walk(&fs, "/sys/fs/vfscale/inodes").unwrap();
        let shown: u64 = read_all(&fs, attr_id).trim().parse().unwrap();
        assert_eq!(shown, vfs.statfs().inodes as u64);
        let (me, _) = walk(&fs, &format!("/proc/{}", std::process::id())).unwrap();
        let (_, status) = fs.look_up(&ROOT_CALLER, me, b"status").unwrap();
        assert!(read_all(&fs, status.ino.0).contains(&format!("Pid:\t{}", std::process::id())));
        // `..` of a mount's root climbs to the parent mount.
        let (_, up) = fs.look_up(&ROOT_CALLER, sys, b"..").unwrap();
        assert_eq!(up.ino.0, ROOT);
        // A miss in a live tree is not cached; one in the served VFS is.
        assert_eq!(fs.look_up(&ROOT_CALLER, sys, b"nope").err(), Some(Errno::ENOENT));
        assert_eq!(fs.look_up(&ROOT_CALLER, ROOT, b"nope").unwrap().1.ino.0, 0);
    }

    #[test]
    fn node_ids_of_two_filesystems_never_meet() {
        let (fs, _vfs) = demo_server();
        let (sys, sys_attr) = walk(&fs, "/sys").unwrap();
        let (proc, _) = walk(&fs, "/proc").unwrap();
        assert!(sys != ROOT && proc != ROOT && sys != proc);
        assert_eq!(fs.attributes(sys).unwrap().1.ino, sys_attr.ino, "GETATTR answers the lookup's id");
        assert_eq!(fs.attributes(sys).unwrap().0, Duration::ZERO, "a live tree's attributes are not kept");
        assert_eq!(fs.attributes(ROOT).unwrap().0, TTL);
        // The directory listing of the root shows the covered directory
        // for `sys`, as Linux's d_ino does; the tree's listing shows its
        // own ids.
        let (fh, _) = fs.open_dir(&ROOT_CALLER, sys, 0).unwrap();
        let mut listed = Vec::new();
        fs.read_dir(fh, 0, |id, _, _, name| {
            listed.push((id, name.to_vec()));
            false
        })
        .unwrap();
        fs.release_dir(fh);
        let (_, fs_dir) = fs.look_up(&ROOT_CALLER, sys, b"fs").unwrap();
        assert!(listed.contains(&(sys, b".".to_vec())), "{listed:?}");
        assert!(listed.contains(&(fs_dir.ino.0, b"fs".to_vec())), "{listed:?}");
        // procfs lists its tasks before it has inodes for them: they show
        // a number of their own, never 0 (a deleted entry to libc).
        let (proc, _) = walk(&fs, "/proc").unwrap();
        let (fh, _) = fs.open_dir(&ROOT_CALLER, proc, 0).unwrap();
        let mut ids = Vec::new();
        fs.read_dir(fh, 0, |id, _, _, _| {
            ids.push(id);
            false
        })
        .unwrap();
        fs.release_dir(fh);
        assert!(ids.len() > 2 && !ids.contains(&0), "{ids:?}");
    }

    #[test]
    fn statfs_reports_the_mount_of_its_node() {
        let (fs, vfs) = demo_server();
        let (sys, _) = walk(&fs, "/sys").unwrap();
        let top = fs.fs_stats(ROOT).unwrap();
        let tree = fs.fs_stats(sys).unwrap();
        assert_eq!((top.files, top.files - top.ffree), (1000, vfs.statfs().inodes as u64));
        assert_eq!(tree.files, 0, "the tree's own counts: it has no inode limit");
        assert_eq!(fs.fs_stats(u64::MAX).err(), Some(Errno::ESTALE));
    }

    #[test]
    fn mount_points_stay_and_mounts_are_not_crossed_by_names() {
        let (fs, _vfs) = demo_server();
        let (sys, _) = walk(&fs, "/sys").unwrap();
        assert_eq!(fs.remove(&ROOT_CALLER, ROOT, b"sys", true), Err(Errno::EBUSY));
        assert_eq!(fs.rename_entry(&ROOT_CALLER, ROOT, b"sys", ROOT, b"moved", 0), Err(Errno::EBUSY));
        let (_, dir) = fs.make_dir(&ROOT_CALLER, ROOT, b"new", 0o755).unwrap();
        assert_eq!(fs.rename_entry(&ROOT_CALLER, ROOT, b"new", sys, b"new", 0), Err(Errno::EXDEV));
        let (_, file) = fs.make_node(&ROOT_CALLER, dir.ino.0, b"f", libc::S_IFREG | 0o644, 0).unwrap();
        assert_eq!(fs.link_entry(&ROOT_CALLER, file.ino.0, sys, b"f").err(), Some(Errno::EXDEV));
        assert_eq!(fs.create_file(&ROOT_CALLER, sys, b"f", 0o644, libc::O_WRONLY).err(), Some(Errno::EACCES));
        assert!(fs.link_entry(&ROOT_CALLER, file.ino.0, ROOT, b"g").is_ok(), "within a mount");
    }

    #[test]
    fn a_bind_mount_gives_its_positions_their_own_ids() {
        let vfs = Vfs::default();
        let p = vfs.process(Credentials::root());
        p.mkdir("/d", 0o755).unwrap();
        p.open("/d/f", OpenFlags::CREAT | OpenFlags::WRONLY, 0o644).unwrap();
        let mut ns = Namespace::new(vfs.clone(), Caching::Kept(TTL)).unwrap();
        let cred = Credentials::root();
        let root = ns.root().clone();
        ns.context(&cred, &root).mkdir("/b", 0o755).unwrap();
        ns.context(&cred, &root).bind("/d", "/b", false).unwrap();
        // Another instance, read-only, as a host tree would be bound.
        let other = Vfs::default();
        other.process(Credentials::root()).mkdir("/inside", 0o755).unwrap();
        ns.mount_read_only(other, "other", "/ro/here").unwrap();
        let fs = Server::serving(ns, None, OpenPolicy::new(&MountOptions::default()), Duration::ZERO);
        let (direct, direct_attr) = walk(&fs, "/d/f").unwrap();
        let (bound, bound_attr) = walk(&fs, "/b/f").unwrap();
        assert_ne!(direct, bound, "one inode, two mounts, two nodes");
        assert_eq!(direct, p.resolve("/d/f", false).unwrap().ino(), "the root mount's ids are inode numbers");
        assert_eq!((direct_attr.size, direct_attr.nlink), (bound_attr.size, bound_attr.nlink));
        assert_eq!(walk(&fs, "/b/f").unwrap().0, bound, "the same id at every lookup");
        // A write through one shows through the other.
        let (fh, _) = fs.open_file(&ROOT_CALLER, bound, libc::O_RDWR).unwrap_or((FileHandle(0), FopenFlags::empty()));
        assert_eq!(fs.write_file(&ROOT_CALLER, bound, fh, 0, b"hi"), Ok(2));
        assert_eq!(fs.attributes(direct).unwrap().1.size, 2);
        // The read-only mount: its positions have their own ids, and
        // nothing changes through it.
        let (here, _) = walk(&fs, "/ro/here").unwrap();
        let (inside, _) = walk(&fs, "/ro/here/inside").unwrap();
        assert_ne!(inside, p.resolve("/d", false).unwrap().ino());
        assert_eq!(fs.make_dir(&ROOT_CALLER, here, b"x", 0o755).err(), Some(Errno::EROFS));
        assert_eq!(fs.create_file(&ROOT_CALLER, here, b"x", 0o644, libc::O_WRONLY).err(), Some(Errno::EROFS));
        assert_eq!(fs.check_access(&ROOT_CALLER, inside, libc::W_OK), Err(Errno::EROFS));
        assert_eq!(fs.check_access(&ROOT_CALLER, inside, libc::R_OK), Ok(()));
        let chmod = AttrChanges { mode: Some(0o700), ..AttrChanges::default() };
        assert_eq!(fs.set_attributes(&ROOT_CALLER, inside, chmod, None).err(), Some(Errno::EROFS));
    }
}
