//! The FUSE request handlers: each request becomes the matching call on a
//! [`Process`] with the caller's credentials, its working directory the
//! request's parent directory, so the VFS makes every permission check
//! (the mount does not use `default_permissions`) and its errno goes back
//! to the caller unchanged.
//!
//! Invariant: the names recorded in the node table change only while the
//! operation that changes them holds `topology` for writing (renames) or
//! are added by replies that carry an entry; operations that turn a node id
//! back into a name (open of a regular file, link, a rename into another
//! directory) hold it for reading, so the name they use is current. Every
//! other request runs without a lock of the front end's own, on as many
//! threads as the session has.

use crate::demo::{Demo, Kind, SynthAttr};
use crate::locks::Locks;
use crate::nodes::Nodes;
use fuser::{
    AccessFlags, FileAttr, FileHandle, Filesystem, FopenFlags, Generation, INodeNo, InitFlags, KernelConfig, LockOwner,
    ReplyAttr, ReplyCreate, ReplyData, ReplyDirectory, ReplyEmpty, ReplyEntry, ReplyLock, ReplyOpen, ReplyStatfs,
    ReplyWrite, Request, TimeOrNow, WriteFlags,
};
use std::collections::HashMap;
use std::ffi::OsStr;
use std::fmt;
use std::os::unix::ffi::OsStrExt;
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, RwLock};
use std::time::{Duration, SystemTime, UNIX_EPOCH};
use vfscale::cred::Access;
use vfscale::inode::Inode;
use vfscale::{
    Credentials, Errno, FileType, OpenFile, OpenFlags, Process, RenameFlags, SetAttr, SetTime, Stat, Timespec, Vfs,
    VfsResult,
};

/// How long the kernel may cache entries and attributes of VFS nodes: every
/// change goes through this mount, which the kernel sees, so only changes
/// made outside it (none, except by the demo trees) could be missed.
const TTL: Duration = Duration::from_secs(1);
/// Demo nodes change on their own (processes come and go), so nothing of
/// them is cached.
const NO_TTL: Duration = Duration::ZERO;

/// An open file or directory, behind a FUSE file handle.
enum Handle {
    /// A VFS regular file.
    File(Arc<OpenFile>),
    /// A directory: a snapshot of its entries, taken at offset 0 (opendir
    /// or rewinddir), so the kernel's offsets index it.
    Dir { file: Option<Arc<OpenFile>>, id: u64, entries: Mutex<Vec<(u64, FileType, Vec<u8>)>> },
    /// A demo file: its contents as computed at open.
    Synth { id: u64, contents: Vec<u8> },
}

/// The filesystem a mount serves: a VFS, the kernel's node ids into it,
/// the open handles and, with `--demo`, the demo trees.
pub(crate) struct VfsFs {
    vfs: Vfs,
    nodes: Nodes,
    handles: Mutex<HashMap<u64, Arc<Handle>>>,
    next_handle: AtomicU64,
    demo: Option<Demo>,
    topology: RwLock<()>,
    locks: Arc<Locks>,
}

impl fmt::Debug for VfsFs {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("VfsFs").field("nodes", &self.nodes).field("demo", &self.demo.is_some()).finish_non_exhaustive()
    }
}

fn errno(e: Errno) -> fuser::Errno {
    fuser::Errno::from_i32(e.raw())
}

fn system_time(ts: Timespec) -> SystemTime {
    if ts.sec >= 0 {
        UNIX_EPOCH + Duration::new(ts.sec as u64, ts.nsec as u32)
    } else {
        UNIX_EPOCH - Duration::from_secs(ts.sec.unsigned_abs()) + Duration::from_nanos(ts.nsec as u64)
    }
}

fn timespec(t: SystemTime) -> Timespec {
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
    }
}

fn file_type(mode: u32) -> FileType {
    match mode & libc::S_IFMT {
        libc::S_IFDIR => FileType::Directory,
        libc::S_IFLNK => FileType::Symlink,
        _ => FileType::Regular,
    }
}

fn file_attr(id: u64, st: &Stat) -> FileAttr {
    FileAttr {
        ino: INodeNo(id),
        size: st.size,
        blocks: st.size.div_ceil(512),
        atime: system_time(st.atime),
        mtime: system_time(st.mtime),
        ctime: system_time(st.ctime),
        crtime: UNIX_EPOCH,
        kind: kind(file_type(st.mode)),
        perm: (st.mode & 0o7777) as u16,
        nlink: st.nlink,
        uid: st.uid,
        gid: st.gid,
        rdev: 0,
        blksize: 4096,
        flags: 0,
    }
}

fn synth_attr(a: &SynthAttr) -> FileAttr {
    let now = SystemTime::now();
    let (kind, nlink) = match a.kind {
        Kind::Dir => (fuser::FileType::Directory, 2),
        Kind::File { .. } => (fuser::FileType::RegularFile, 1),
        Kind::Symlink => (fuser::FileType::Symlink, 1),
    };
    FileAttr {
        ino: INodeNo(a.id),
        size: 0,
        blocks: 0,
        atime: now,
        mtime: now,
        ctime: now,
        crtime: UNIX_EPOCH,
        kind,
        perm: a.mode as u16,
        nlink,
        uid: a.uid,
        gid: a.gid,
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
fn credentials(req: &Request) -> Credentials {
    if req.uid() == 0 {
        Credentials::user(0, req.gid(), [])
    } else {
        Credentials::user(req.uid(), req.gid(), groups_of(req.pid()))
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
    pub fn new(vfs: Vfs, demo: bool) -> VfsResult<VfsFs> {
        let demo = if demo { Some(Demo::new(&vfs)?) } else { None };
        Ok(VfsFs {
            nodes: Nodes::new(Arc::clone(vfs.root())),
            vfs: vfs.clone(),
            handles: Mutex::new(HashMap::new()),
            next_handle: AtomicU64::new(1),
            demo,
            topology: RwLock::new(()),
            locks: Locks::new(vfs.clone()),
        })
    }

    fn inode(&self, id: u64) -> VfsResult<Arc<Inode>> {
        self.nodes.get(id).ok_or(Errno::ESTALE)
    }

    /// A process working in directory `id`; EPERM in a demo directory,
    /// which has no namespace operations (as kernfs's have none).
    fn at(&self, cred: Credentials, id: u64) -> VfsResult<Process> {
        if Demo::owns(id) {
            return Err(Errno::EPERM);
        }
        self.vfs.process_in(cred, self.inode(id)?)
    }

    fn demo(&self) -> VfsResult<&Demo> {
        self.demo.as_ref().ok_or(Errno::ENOENT)
    }

    /// EBUSY if `inode` is a demo mount point, which must stay.
    fn not_mount_point(&self, inode: &Inode) -> VfsResult<()> {
        match &self.demo {
            Some(demo) if demo.mounted_on(inode.ino()).is_some() => Err(Errno::EBUSY),
            _ => Ok(()),
        }
    }

    /// The entry reply for `inode`, reached as `name` in `parent`: one
    /// more lookup of it, or the demo tree mounted on it.
    fn entry(&self, parent: u64, name: &[u8], inode: &Arc<Inode>) -> (Duration, FileAttr) {
        if let Some(root) = self.demo.as_ref().and_then(|d| d.mounted_on(inode.ino())) {
            let attr = self.demo.as_ref().and_then(|d| d.getattr(root).ok()).expect("demo roots always exist");
            return (NO_TTL, synth_attr(&attr));
        }
        let id = self.nodes.remember(parent, name, inode);
        (TTL, file_attr(id, &inode.stat()))
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

    /// The open file description behind `fh` that locks apply to; ENOLCK
    /// for a demo node, which has none.
    fn lock_file(&self, fh: FileHandle) -> VfsResult<Arc<OpenFile>> {
        match &*self.handle(fh)? {
            Handle::File(file) | Handle::Dir { file: Some(file), .. } => Ok(Arc::clone(file)),
            Handle::Dir { file: None, .. } | Handle::Synth { .. } => Err(Errno::ENOLCK),
        }
    }

    /// Opens regular file `id` through a name the kernel reached it by (the
    /// VFS opens by path only), checking that the name still refers to it.
    fn open_by_name(&self, id: u64, inode: &Inode, cred: &Credentials, flags: OpenFlags) -> VfsResult<Arc<OpenFile>> {
        let _names = self.topology.read().unwrap_or_else(|e| e.into_inner());
        for (parent, name) in self.nodes.links(id).into_iter().rev() {
            let Ok(p) = self.at(cred.clone(), parent) else { continue };
            match p.open_description(&name, flags, 0) {
                Ok(file) if file.inode().ino() == inode.ino() => return Ok(file),
                Ok(_) | Err(Errno::ENOENT) | Err(Errno::ESTALE) => continue,
                Err(e) => return Err(e),
            }
        }
        Err(Errno::ESTALE)
    }

    fn do_open(&self, req: &Request, id: u64, flags: i32) -> VfsResult<(FileHandle, FopenFlags)> {
        let cred = credentials(req);
        let flags = OpenFlags(flags & !(libc::O_CREAT | libc::O_EXCL));
        if Demo::owns(id) {
            let demo = self.demo()?;
            if demo.getattr(id)?.kind == Kind::Dir {
                return self.do_opendir(req, id, flags.0);
            }
            let contents = demo.open(id, flags, &cred)?;
            return Ok((self.add_handle(Handle::Synth { id, contents }), FopenFlags::FOPEN_DIRECT_IO));
        }
        let inode = self.inode(id)?;
        let file = if inode.file_type() == FileType::Directory {
            self.vfs.process_in(cred, Arc::clone(&inode))?.open_description(".", flags, 0)?
        } else {
            self.open_by_name(id, &inode, &cred, flags)?
        };
        Ok((self.add_handle(Handle::File(file)), FopenFlags::empty()))
    }

    fn do_opendir(&self, req: &Request, id: u64, flags: i32) -> VfsResult<(FileHandle, FopenFlags)> {
        let file = if Demo::owns(id) {
            let attr = self.demo()?.getattr(id)?;
            vfscale::cred::permission(libc::S_IFDIR | attr.mode, attr.uid, attr.gid, &credentials(req), Access::READ)?;
            None
        } else {
            let p = self.vfs.process_in(credentials(req), self.inode(id)?)?;
            Some(p.open_description(".", OpenFlags(flags | libc::O_DIRECTORY), 0)?)
        };
        let handle = Handle::Dir { file, id, entries: Mutex::new(Vec::new()) };
        Ok((self.add_handle(handle), FopenFlags::empty()))
    }

    /// Re-reads a directory's entries into its handle (at offset 0).
    fn snapshot(&self, file: Option<&OpenFile>, id: u64) -> VfsResult<Vec<(u64, FileType, Vec<u8>)>> {
        let Some(file) = file else {
            let entries = self.demo()?.entries(id)?;
            return Ok(entries.into_iter().map(|e| (e.id, e.file_type, e.name)).collect());
        };
        file.lseek(0, vfscale::Whence::Set)?;
        let mut out = Vec::new();
        loop {
            let batch = file.readdir(256)?;
            if batch.is_empty() {
                break;
            }
            out.extend(batch.into_iter().map(|e| (self.nodes.node_id(e.ino), e.file_type, e.name)));
        }
        Ok(out)
    }

    fn do_setattr(&self, req: &Request, id: u64, attr: SetAttr, fh: Option<FileHandle>) -> VfsResult<FileAttr> {
        if Demo::owns(id) {
            let synth = self.demo()?.getattr(id)?;
            // `echo 2 > drop_caches` truncates before writing; the
            // attribute has no size to lose.
            let truncate_only = attr == SetAttr { size: Some(0), ..SetAttr::default() };
            return match synth.kind {
                Kind::File { writable: true } if truncate_only => Ok(synth_attr(&synth)),
                _ => Err(Errno::EPERM),
            };
        }
        let inode = self.inode(id)?;
        let cred = credentials(req);
        let mut rest = attr;
        if let (Some(len), Some(fh)) = (attr.size, fh) {
            // ftruncate (and O_TRUNC): the open file's write access decides.
            if let Handle::File(file) = &*self.handle(fh)? {
                file.truncate(len, &cred)?;
                rest.size = None;
            }
        }
        self.vfs.process(cred).setattr(&inode, rest)?;
        Ok(file_attr(id, &inode.stat()))
    }

    fn do_rename(
        &self,
        req: &Request,
        parent: u64,
        name: &[u8],
        newparent: u64,
        newname: &[u8],
        flags: u32,
    ) -> VfsResult<()> {
        if Demo::owns(parent) != Demo::owns(newparent) {
            return Err(Errno::EXDEV);
        }
        if flags & !libc::RENAME_NOREPLACE != 0 {
            return Err(Errno::EINVAL);
        }
        let _names = self.topology.write().unwrap_or_else(|e| e.into_inner());
        let p = self.at(credentials(req), parent)?;
        let moved = p.resolve(name, false)?;
        self.not_mount_point(&moved)?;
        let target = if parent == newparent {
            newname.to_vec()
        } else {
            join(&self.nodes.dir_path(newparent).ok_or(Errno::ESTALE)?, newname)
        };
        let replaced = p.resolve(&target, false).ok();
        if let Some(replaced) = &replaced {
            self.not_mount_point(replaced)?;
        }
        p.rename2(name, &target, RenameFlags { noreplace: flags & libc::RENAME_NOREPLACE != 0 })?;
        let moved_id = self.nodes.node_id(moved.ino());
        if let Some(replaced) = replaced.filter(|r| r.ino() != moved.ino()) {
            self.nodes.unlinked(self.nodes.node_id(replaced.ino()), newparent, newname);
        }
        self.nodes.unlinked(moved_id, parent, name);
        self.nodes.linked(moved_id, newparent, newname);
        Ok(())
    }

    fn do_link(&self, req: &Request, id: u64, newparent: u64, newname: &[u8]) -> VfsResult<(Duration, FileAttr)> {
        if Demo::owns(id) || Demo::owns(newparent) {
            return Err(Errno::EXDEV);
        }
        let _names = self.topology.read().unwrap_or_else(|e| e.into_inner());
        let inode = self.inode(id)?;
        let cred = credentials(req);
        for (parent, name) in self.nodes.links(id).into_iter().rev() {
            let Ok(p) = self.at(cred.clone(), parent) else { continue };
            if p.resolve(&name, false).map(|i| i.ino()) != Ok(inode.ino()) {
                continue;
            }
            let target = if parent == newparent {
                newname.to_vec()
            } else {
                join(&self.nodes.dir_path(newparent).ok_or(Errno::ESTALE)?, newname)
            };
            p.link(&name, &target)?;
            return Ok(self.entry(newparent, newname, &inode));
        }
        Err(Errno::ESTALE)
    }

    fn do_unlink(&self, req: &Request, parent: u64, name: &[u8], dir: bool) -> VfsResult<()> {
        let p = self.at(credentials(req), parent)?;
        let victim = p.resolve(name, false)?;
        self.not_mount_point(&victim)?;
        if dir {
            p.rmdir(name)?;
        } else {
            p.unlink(name)?;
        }
        self.nodes.unlinked(self.nodes.node_id(victim.ino()), parent, name);
        Ok(())
    }
}

impl Filesystem for VfsFs {
    fn init(&mut self, _req: &Request, config: &mut KernelConfig) -> std::io::Result<()> {
        // A kernel without one of them keeps those locks itself, on the
        // mount's inodes, as for a local filesystem.
        for flag in [InitFlags::FUSE_POSIX_LOCKS, InitFlags::FUSE_FLOCK_LOCKS] {
            let _unsupported = config.add_capabilities(flag);
        }
        Ok(())
    }

    fn destroy(&mut self) {
        self.locks.cancel_waits();
    }

    fn lookup(&self, req: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEntry) {
        let name = name.as_bytes();
        let result = if Demo::owns(parent.0) {
            self.demo().and_then(|d| d.lookup(parent.0, name)).map(|a| (NO_TTL, synth_attr(&a)))
        } else {
            self.at(credentials(req), parent.0)
                .and_then(|p| p.resolve(name, false))
                .map(|inode| self.entry(parent.0, name, &inode))
        };
        match result {
            Ok((ttl, attr)) => reply.entry(&ttl, &attr, Generation(0)),
            Err(e) => reply.error(errno(e)),
        }
    }

    fn forget(&self, _req: &Request, ino: INodeNo, nlookup: u64) {
        if !Demo::owns(ino.0) {
            self.nodes.forget(ino.0, nlookup);
        }
    }

    fn getattr(&self, _req: &Request, ino: INodeNo, _fh: Option<FileHandle>, reply: ReplyAttr) {
        let result = if Demo::owns(ino.0) {
            self.demo().and_then(|d| d.getattr(ino.0)).map(|a| (NO_TTL, synth_attr(&a)))
        } else {
            self.inode(ino.0).map(|i| (TTL, file_attr(ino.0, &i.stat())))
        };
        match result {
            Ok((ttl, attr)) => reply.attr(&ttl, &attr),
            Err(e) => reply.error(errno(e)),
        }
    }

    fn setattr(
        &self,
        req: &Request,
        ino: INodeNo,
        mode: Option<u32>,
        uid: Option<u32>,
        gid: Option<u32>,
        size: Option<u64>,
        atime: Option<TimeOrNow>,
        mtime: Option<TimeOrNow>,
        _ctime: Option<SystemTime>,
        fh: Option<FileHandle>,
        _crtime: Option<SystemTime>,
        _chgtime: Option<SystemTime>,
        _bkuptime: Option<SystemTime>,
        _flags: Option<fuser::BsdFileFlags>,
        reply: ReplyAttr,
    ) {
        let size = match size.map(i64::try_from).transpose() {
            Ok(size) => size,
            Err(_) => return reply.error(errno(Errno::EFBIG)),
        };
        let attr = SetAttr { mode, uid, gid, size, atime: set_time(atime), mtime: set_time(mtime) };
        let ttl = if Demo::owns(ino.0) { NO_TTL } else { TTL };
        match self.do_setattr(req, ino.0, attr, fh) {
            Ok(attr) => reply.attr(&ttl, &attr),
            Err(e) => reply.error(errno(e)),
        }
    }

    fn readlink(&self, req: &Request, ino: INodeNo, reply: ReplyData) {
        let result = if Demo::owns(ino.0) {
            self.demo().and_then(|d| d.readlink(ino.0, req.pid()))
        } else {
            self.inode(ino.0).and_then(|i| i.symlink_target().map(<[u8]>::to_vec).ok_or(Errno::EINVAL))
        };
        match result {
            Ok(target) => reply.data(&target),
            Err(e) => reply.error(errno(e)),
        }
    }

    fn mknod(
        &self,
        req: &Request,
        parent: INodeNo,
        name: &OsStr,
        mode: u32,
        _umask: u32,
        _rdev: u32,
        reply: ReplyEntry,
    ) {
        let name = name.as_bytes();
        // The VFS has regular files, directories and symlinks only; Linux
        // answers EPERM where a filesystem cannot make a node type.
        if mode & libc::S_IFMT != libc::S_IFREG {
            return reply.error(errno(Errno::EPERM));
        }
        let flags = OpenFlags::CREAT | OpenFlags::EXCL | OpenFlags::WRONLY;
        match self.at(credentials(req), parent.0).and_then(|p| p.open_description(name, flags, mode & 0o7777)) {
            Ok(file) => {
                let (ttl, attr) = self.entry(parent.0, name, file.inode());
                reply.entry(&ttl, &attr, Generation(0));
            }
            Err(e) => reply.error(errno(e)),
        }
    }

    fn mkdir(&self, req: &Request, parent: INodeNo, name: &OsStr, mode: u32, _umask: u32, reply: ReplyEntry) {
        let name = name.as_bytes();
        let result = self.at(credentials(req), parent.0).and_then(|p| {
            p.mkdir(name, mode & 0o7777)?;
            p.resolve(name, false)
        });
        match result {
            Ok(inode) => {
                let (ttl, attr) = self.entry(parent.0, name, &inode);
                reply.entry(&ttl, &attr, Generation(0));
            }
            Err(e) => reply.error(errno(e)),
        }
    }

    fn unlink(&self, req: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEmpty) {
        match self.do_unlink(req, parent.0, name.as_bytes(), false) {
            Ok(()) => reply.ok(),
            Err(e) => reply.error(errno(e)),
        }
    }

    fn rmdir(&self, req: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEmpty) {
        match self.do_unlink(req, parent.0, name.as_bytes(), true) {
            Ok(()) => reply.ok(),
            Err(e) => reply.error(errno(e)),
        }
    }

    fn symlink(&self, req: &Request, parent: INodeNo, link_name: &OsStr, target: &Path, reply: ReplyEntry) {
        let name = link_name.as_bytes();
        let result = self.at(credentials(req), parent.0).and_then(|p| {
            p.symlink(target.as_os_str().as_bytes(), name)?;
            p.resolve(name, false)
        });
        match result {
            Ok(inode) => {
                let (ttl, attr) = self.entry(parent.0, name, &inode);
                reply.entry(&ttl, &attr, Generation(0));
            }
            Err(e) => reply.error(errno(e)),
        }
    }

    fn rename(
        &self,
        req: &Request,
        parent: INodeNo,
        name: &OsStr,
        newparent: INodeNo,
        newname: &OsStr,
        flags: fuser::RenameFlags,
        reply: ReplyEmpty,
    ) {
        match self.do_rename(req, parent.0, name.as_bytes(), newparent.0, newname.as_bytes(), flags.bits()) {
            Ok(()) => reply.ok(),
            Err(e) => reply.error(errno(e)),
        }
    }

    fn link(&self, req: &Request, ino: INodeNo, newparent: INodeNo, newname: &OsStr, reply: ReplyEntry) {
        match self.do_link(req, ino.0, newparent.0, newname.as_bytes()) {
            Ok((ttl, attr)) => reply.entry(&ttl, &attr, Generation(0)),
            Err(e) => reply.error(errno(e)),
        }
    }

    fn open(&self, req: &Request, ino: INodeNo, flags: fuser::OpenFlags, reply: ReplyOpen) {
        match self.do_open(req, ino.0, flags.0) {
            Ok((fh, flags)) => reply.opened(fh, flags),
            Err(e) => reply.error(errno(e)),
        }
    }

    fn read(
        &self,
        _req: &Request,
        _ino: INodeNo,
        fh: FileHandle,
        offset: u64,
        size: u32,
        _flags: fuser::OpenFlags,
        _lock_owner: Option<LockOwner>,
        reply: ReplyData,
    ) {
        let result = self.handle(fh).and_then(|h| match &*h {
            Handle::File(file) => {
                let mut buf = vec![0; size as usize];
                let n = file.pread(&mut buf, offset)?;
                buf.truncate(n);
                Ok(buf)
            }
            Handle::Synth { contents, .. } => {
                let start = usize::try_from(offset).unwrap_or(usize::MAX).min(contents.len());
                let end = start.saturating_add(size as usize).min(contents.len());
                Ok(contents[start..end].to_vec())
            }
            Handle::Dir { .. } => Err(Errno::EISDIR),
        });
        match result {
            Ok(data) => reply.data(&data),
            Err(e) => reply.error(errno(e)),
        }
    }

    fn write(
        &self,
        req: &Request,
        _ino: INodeNo,
        fh: FileHandle,
        offset: u64,
        data: &[u8],
        _write_flags: WriteFlags,
        _flags: fuser::OpenFlags,
        _lock_owner: Option<LockOwner>,
        reply: ReplyWrite,
    ) {
        let result = self.handle(fh).and_then(|h| match &*h {
            Handle::File(file) => file.pwrite(data, offset, &credentials(req)),
            Handle::Synth { id, .. } => self.demo()?.store(*id, data),
            Handle::Dir { .. } => Err(Errno::EISDIR),
        });
        match result {
            Ok(n) => reply.written(n as u32),
            Err(e) => reply.error(errno(e)),
        }
    }

    fn flush(&self, _req: &Request, _ino: INodeNo, fh: FileHandle, lock_owner: LockOwner, reply: ReplyEmpty) {
        // A close: the closing file table's POSIX locks on the file go.
        if let Ok(file) = self.lock_file(fh) {
            self.locks.close(&file, lock_owner.0);
        }
        reply.ok();
    }

    fn release(
        &self,
        _req: &Request,
        _ino: INodeNo,
        fh: FileHandle,
        _flags: fuser::OpenFlags,
        lock_owner: Option<LockOwner>,
        _flush: bool,
        reply: ReplyEmpty,
    ) {
        // The kernel names the open file's owner when it holds flock
        // locks, which go with it.
        if let (Ok(file), Some(owner)) = (self.lock_file(fh), lock_owner) {
            self.locks.close(&file, owner.0);
        }
        self.drop_handle(fh);
        reply.ok();
    }

    fn getlk(
        &self,
        _req: &Request,
        _ino: INodeNo,
        fh: FileHandle,
        lock_owner: LockOwner,
        start: u64,
        end: u64,
        typ: i32,
        _pid: u32,
        reply: ReplyLock,
    ) {
        match self.lock_file(fh).and_then(|file| self.locks.getlk(&file, lock_owner.0, start, end, typ)) {
            Ok(Some((typ, start, end, pid))) => reply.locked(start, end, typ, pid),
            Ok(None) => reply.locked(start, end, libc::F_UNLCK, 0),
            Err(e) => reply.error(errno(e)),
        }
    }

    fn setlk(
        &self,
        req: &Request,
        _ino: INodeNo,
        fh: FileHandle,
        lock_owner: LockOwner,
        start: u64,
        end: u64,
        typ: i32,
        pid: u32,
        sleep: bool,
        reply: ReplyEmpty,
    ) {
        let file = match self.lock_file(fh) {
            Ok(file) => file,
            Err(e) => return reply.error(errno(e)),
        };
        let host_pid = if pid != 0 { pid } else { req.pid() };
        if sleep {
            let done = move |result: VfsResult<()>| match result {
                Ok(()) => reply.ok(),
                Err(e) => reply.error(errno(e)),
            };
            return self.locks.setlkw(file, lock_owner.0, (start, end, typ), host_pid, done);
        }
        match self.locks.setlk(&file, lock_owner.0, start, end, typ, host_pid) {
            Ok(()) => reply.ok(),
            Err(e) => reply.error(errno(e)),
        }
    }

    fn fsync(&self, _req: &Request, _ino: INodeNo, _fh: FileHandle, _datasync: bool, reply: ReplyEmpty) {
        reply.ok();
    }

    fn opendir(&self, req: &Request, ino: INodeNo, flags: fuser::OpenFlags, reply: ReplyOpen) {
        match self.do_opendir(req, ino.0, flags.0) {
            Ok((fh, flags)) => reply.opened(fh, flags),
            Err(e) => reply.error(errno(e)),
        }
    }

    fn readdir(&self, _req: &Request, _ino: INodeNo, fh: FileHandle, offset: u64, mut reply: ReplyDirectory) {
        let handle = match self.handle(fh) {
            Ok(h) => h,
            Err(e) => return reply.error(errno(e)),
        };
        let Handle::Dir { file, id, entries } = &*handle else { return reply.error(errno(Errno::ENOTDIR)) };
        let mut entries = entries.lock().unwrap_or_else(|e| e.into_inner());
        if offset == 0 {
            match self.snapshot(file.as_deref(), *id) {
                Ok(fresh) => *entries = fresh,
                Err(e) => return reply.error(errno(e)),
            }
        }
        for (i, (id, file_type, name)) in entries.iter().enumerate().skip(offset as usize) {
            if reply.add(INodeNo(*id), i as u64 + 1, kind(*file_type), OsStr::from_bytes(name)) {
                break;
            }
        }
        reply.ok();
    }

    fn releasedir(&self, _req: &Request, _ino: INodeNo, fh: FileHandle, _flags: fuser::OpenFlags, reply: ReplyEmpty) {
        self.drop_handle(fh);
        reply.ok();
    }

    fn fsyncdir(&self, _req: &Request, _ino: INodeNo, _fh: FileHandle, _datasync: bool, reply: ReplyEmpty) {
        reply.ok();
    }

    fn statfs(&self, _req: &Request, _ino: INodeNo, reply: ReplyStatfs) {
        // A nominal 4 GiB and 1 Mi inodes: the VFS has limits per file,
        // not per filesystem, and `df` wants a size.
        const BLOCKS: u64 = 1 << 20;
        const FILES: u64 = 1 << 20;
        let s = self.vfs.statfs();
        let used = s.bytes.div_ceil(4096).min(BLOCKS);
        let free = BLOCKS - used;
        reply.statfs(BLOCKS, free, free, FILES, FILES.saturating_sub(s.inodes as u64), 4096, 255, 4096);
    }

    fn access(&self, req: &Request, ino: INodeNo, mask: AccessFlags, reply: ReplyEmpty) {
        let mut access = Access::empty();
        for (flag, a) in
            [(AccessFlags::R_OK, Access::READ), (AccessFlags::W_OK, Access::WRITE), (AccessFlags::X_OK, Access::EXEC)]
        {
            if mask.contains(flag) {
                access |= a;
            }
        }
        let owner = if Demo::owns(ino.0) {
            self.demo().and_then(|d| d.getattr(ino.0)).map(|a| {
                let t = match a.kind {
                    Kind::Dir => libc::S_IFDIR,
                    Kind::File { .. } => libc::S_IFREG,
                    Kind::Symlink => libc::S_IFLNK,
                };
                (t | a.mode, a.uid, a.gid)
            })
        } else {
            self.inode(ino.0).map(|i| {
                let st = i.stat();
                (st.mode, st.uid, st.gid)
            })
        };
        match owner.and_then(|(mode, uid, gid)| vfscale::cred::permission(mode, uid, gid, &credentials(req), access)) {
            Ok(()) => reply.ok(),
            Err(e) => reply.error(errno(e)),
        }
    }

    fn create(
        &self,
        req: &Request,
        parent: INodeNo,
        name: &OsStr,
        mode: u32,
        _umask: u32,
        flags: i32,
        reply: ReplyCreate,
    ) {
        let name = name.as_bytes();
        if Demo::owns(parent.0) {
            // Linux's vfs_create answers EACCES where a directory cannot
            // hold new files.
            return reply.error(errno(Errno::EACCES));
        }
        let flags = OpenFlags(flags | libc::O_CREAT);
        match self.at(credentials(req), parent.0).and_then(|p| p.open_description(name, flags, mode & 0o7777)) {
            Ok(file) => {
                let (ttl, attr) = self.entry(parent.0, name, file.inode());
                let fh = self.add_handle(Handle::File(file));
                reply.created(&ttl, &attr, Generation(0), fh, FopenFlags::empty());
            }
            Err(e) => reply.error(errno(e)),
        }
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
        assert_eq!((attr.ino, attr.size, attr.blocks, attr.perm, attr.nlink), (INodeNo(42), 1000, 2, 0o640, 1));
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
    fn join_adds_one_slash() {
        assert_eq!(join(b"/", b"a"), b"/a");
        assert_eq!(join(b"/d", b"a"), b"/d/a");
    }
}
