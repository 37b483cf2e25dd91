//! The requests fuser reads from `/dev/fuse`: each of its `Filesystem`
//! calls becomes the matching handler of [`Server`] (see the `fs` module),
//! and the handler's answer its reply.
//!
//! This front end serves every request unless the io_uring queues start
//! (see the `ring` module); with them, the ones the kernel still sends
//! through the device: `FORGET`, `BATCH_FORGET` and `INTERRUPT`. It also
//! answers `INIT`, where it decides what the kernel may do without
//! asking, and whether the queues start. A request that fails with ENOSPC
//! is served again once the forgets other threads are serving have ended
//! (`Server::unless_full`), as the queues do after draining forgets. A
//! handler that panics is answered EIO, as the queues answer it, and its
//! thread goes on serving.

use crate::caller::Client;
use crate::convert::fuser_set_time;
use crate::fs::{AttrChanges, Entry, Server, Xattr};
use crate::requests::Opcode;
use crate::ring::Rings;
use fuser::{
    AccessFlags, FileHandle, Filesystem, Generation, INodeNo, InitFlags, KernelConfig, LockOwner, ReplyAttr,
    ReplyCreate, ReplyData, ReplyDirectory, ReplyEmpty, ReplyEntry, ReplyLock, ReplyLseek, ReplyOpen, ReplyStatfs,
    ReplyWrite, ReplyXattr, Request, TimeOrNow, WriteFlags,
};
use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;
use std::panic::AssertUnwindSafe;
use std::path::Path;
use std::sync::Arc;
use std::time::SystemTime;
use vfscale::{Errno, VfsResult};

/// fuser's `Filesystem` for a mount: the handlers, and the queues that
/// may take over at `INIT`.
pub(crate) struct Dev {
    fs: Arc<Server>,
    rings: Arc<Rings>,
}

impl std::fmt::Debug for Dev {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Dev").field("fs", &self.fs).field("rings", &self.rings).finish_non_exhaustive()
    }
}

impl Dev {
    /// Serves `fs`; `rings` may start at `INIT`.
    pub fn new(fs: Arc<Server>, rings: Arc<Rings>) -> Dev {
        Dev { fs, rings }
    }
}

fn errno(e: Errno) -> fuser::Errno {
    fuser::Errno::from_i32(e.raw())
}

fn client(req: &Request) -> Client {
    Client { uid: req.uid(), gid: req.gid(), pid: req.pid() }
}

/// Runs a handler; a panic is answered EIO, as the io_uring queues
/// answer it: the thread that died would leave the request unanswered,
/// and where it read the session's own fd, its caller waiting until the
/// mount is unmounted.
fn guarded<T>(handler: impl FnOnce() -> VfsResult<T>) -> VfsResult<T> {
    std::panic::catch_unwind(AssertUnwindSafe(handler)).unwrap_or(Err(Errno::EIO))
}

/// Runs a handler that answers nothing (`FORGET`, the releases, whose
/// replies carry no result); a panic leaves the thread serving.
fn surviving(handler: impl FnOnce()) {
    let _ = std::panic::catch_unwind(AssertUnwindSafe(handler));
}

/// Sends an entry reply.
fn reply_entry(result: VfsResult<Entry>, reply: ReplyEntry) {
    match result {
        Ok((ttl, attr)) => reply.entry(&ttl, &attr, Generation(0)),
        Err(e) => reply.error(errno(e)),
    }
}

/// Sends an attribute reply.
fn reply_attr(result: VfsResult<Entry>, reply: ReplyAttr) {
    match result {
        Ok((ttl, attr)) => reply.attr(&ttl, &attr),
        Err(e) => reply.error(errno(e)),
    }
}

/// Sends a `getxattr` or `listxattr` reply.
fn reply_xattr(result: VfsResult<Xattr>, reply: ReplyXattr) {
    match result {
        Ok(Xattr::Size(n)) => reply.size(n),
        Ok(Xattr::Data(data)) => reply.data(&data),
        Err(e) => reply.error(errno(e)),
    }
}

/// Sends a data reply.
fn reply_data(result: VfsResult<Vec<u8>>, reply: ReplyData) {
    match result {
        Ok(data) => reply.data(&data),
        Err(e) => reply.error(errno(e)),
    }
}

/// Sends an empty reply.
fn reply_empty(result: VfsResult<()>, reply: ReplyEmpty) {
    match result {
        Ok(()) => reply.ok(),
        Err(e) => reply.error(errno(e)),
    }
}

/// Sends an open reply.
fn reply_open(result: VfsResult<(FileHandle, fuser::FopenFlags)>, reply: ReplyOpen) {
    match result {
        Ok((fh, flags)) => reply.opened(fh, flags),
        Err(e) => reply.error(errno(e)),
    }
}

impl Filesystem for Dev {
    fn init(&mut self, _req: &Request, config: &mut KernelConfig) -> std::io::Result<()> {
        // Lookups, creates and unlinks may run in parallel in one
        // directory: the VFS locks what each changes.
        let _unsupported = config.add_capabilities(InitFlags::FUSE_PARALLEL_DIROPS);
        // The VFS clears set-user-ID and set-group-ID itself on write,
        // truncate and chown, by the caller's CAP_FSETID, as Linux's
        // `file_remove_privs` does; without this the kernel would clear
        // them with a SETATTR of the mode sent as the writer, which only
        // the owner may make.
        let _unsupported = config.add_capabilities(InitFlags::FUSE_HANDLE_KILLPRIV_V2);
        if self.fs.holds_record_locks() {
            // Record locks go to the VFS's lock manager. flock locks stay
            // with the kernel (no FUSE_FLOCK_LOCKS), on the mount's inodes
            // as for a local filesystem: fuser 0.18 drops the FUSE_LK_FLOCK
            // flag that would tell a forwarded flock from a record lock
            // (see `locks`).
            let _unsupported = config.add_capabilities(InitFlags::FUSE_POSIX_LOCKS);
        }
        if self.fs.opens_without_request() && config.add_capabilities(InitFlags::FUSE_NO_OPEN_SUPPORT).is_err() {
            // A kernel that cannot open without a request would fail the
            // opens OPEN's ENOSYS is meant to waive.
            self.fs.open_with_requests();
        }
        let _queues = self.rings.start(config, &self.fs);
        Ok(())
    }

    fn destroy(&mut self) {
        self.fs.shut_down();
    }

    fn lookup(&self, req: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEntry) {
        let _served = self.fs.serve(Opcode::Lookup);
        reply_entry(guarded(|| self.fs.look_up(&client(req), parent.0, name.as_bytes())), reply);
        // A miss may have replaced a cached negative dentry.
        self.fs.hand_on_releases(parent.0);
    }

    fn forget(&self, req: &Request, ino: INodeNo, nlookup: u64) {
        // fuser serves a BATCH_FORGET (whose node type it keeps private)
        // as one call per node, all with the request's id: only the first
        // lingers, so a batch of a thousand nodes lingers once.
        thread_local!(static LAST_FORGET: std::cell::Cell<u64> = const { std::cell::Cell::new(0) });
        let first_of_request = LAST_FORGET.with(|last| last.replace(req.unique().0)) != req.unique().0;
        // Begun before it is counted, and over before the rest: a STATFS
        // or an ENOSPC retry waits for it, not for the rest.
        let serving = self.fs.forgetting();
        let _served = if first_of_request {
            self.fs.count_forget_request();
            Some(self.fs.serve(Opcode::Forget))
        } else {
            self.fs.count(Opcode::Forget);
            None
        };
        surviving(|| self.fs.forget_node(ino.0, nlookup));
        drop(serving);
        if let Some(drain) = self.rings.forget_rest() {
            // After a request's first node, rest, so the next forgets come
            // as one batch (see the `forgets` module).
            drain.served_forget(first_of_request);
        }
    }

    fn getattr(&self, _req: &Request, ino: INodeNo, _fh: Option<FileHandle>, reply: ReplyAttr) {
        let _served = self.fs.serve(Opcode::Getattr);
        reply_attr(guarded(|| self.fs.attributes(ino.0)), reply);
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
        let _served = self.fs.serve(Opcode::Setattr);
        let (atime, mtime) = (fuser_set_time(atime), fuser_set_time(mtime));
        let changes = AttrChanges { mode, uid, gid, size, atime, mtime };
        reply_attr(guarded(|| self.fs.set_attributes(&client(req), ino.0, changes, fh)), reply);
    }

    fn readlink(&self, _req: &Request, ino: INodeNo, reply: ReplyData) {
        let _served = self.fs.serve(Opcode::Other);
        reply_data(guarded(|| self.fs.link_target(ino.0)), reply);
    }

    fn mknod(
        &self,
        req: &Request,
        parent: INodeNo,
        name: &OsStr,
        mode: u32,
        _umask: u32,
        rdev: u32,
        reply: ReplyEntry,
    ) {
        let _served = self.fs.serve(Opcode::Namespace);
        let made =
            guarded(|| self.fs.unless_full(|| self.fs.make_node(&client(req), parent.0, name.as_bytes(), mode, rdev)));
        reply_entry(made, reply);
        self.fs.hand_on_releases(parent.0);
    }

    fn mkdir(&self, req: &Request, parent: INodeNo, name: &OsStr, mode: u32, _umask: u32, reply: ReplyEntry) {
        let _served = self.fs.serve(Opcode::Namespace);
        reply_entry(
            guarded(|| self.fs.unless_full(|| self.fs.make_dir(&client(req), parent.0, name.as_bytes(), mode))),
            reply,
        );
        self.fs.hand_on_releases(parent.0);
    }

    fn unlink(&self, req: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEmpty) {
        let _served = self.fs.serve(Opcode::Unlink);
        reply_empty(guarded(|| self.fs.remove(&client(req), parent.0, name.as_bytes(), false)), reply);
        self.fs.hand_on_releases(parent.0);
    }

    fn rmdir(&self, req: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEmpty) {
        let _served = self.fs.serve(Opcode::Unlink);
        reply_empty(guarded(|| self.fs.remove(&client(req), parent.0, name.as_bytes(), true)), reply);
        self.fs.hand_on_releases(parent.0);
    }

    fn symlink(&self, req: &Request, parent: INodeNo, link_name: &OsStr, target: &Path, reply: ReplyEntry) {
        let _served = self.fs.serve(Opcode::Namespace);
        let target = target.as_os_str().as_bytes();
        let made = guarded(|| {
            self.fs.unless_full(|| self.fs.make_symlink(&client(req), parent.0, link_name.as_bytes(), target))
        });
        reply_entry(made, reply);
        self.fs.hand_on_releases(parent.0);
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
        let _served = self.fs.serve(Opcode::Namespace);
        let (c, name, newname) = (client(req), name.as_bytes(), newname.as_bytes());
        reply_empty(guarded(|| self.fs.rename_entry(&c, parent.0, name, newparent.0, newname, flags.bits())), reply);
        self.fs.hand_on_releases(parent.0);
    }

    fn link(&self, req: &Request, ino: INodeNo, newparent: INodeNo, newname: &OsStr, reply: ReplyEntry) {
        let _served = self.fs.serve(Opcode::Namespace);
        reply_entry(guarded(|| self.fs.link_entry(&client(req), ino.0, newparent.0, newname.as_bytes())), reply);
        self.fs.hand_on_releases(newparent.0);
    }

    fn open(&self, req: &Request, ino: INodeNo, flags: fuser::OpenFlags, reply: ReplyOpen) {
        let _served = self.fs.serve(Opcode::Open);
        reply_open(guarded(|| self.fs.open_file(&client(req), ino.0, flags.0)), reply);
    }

    fn read(
        &self,
        _req: &Request,
        ino: INodeNo,
        fh: FileHandle,
        offset: u64,
        size: u32,
        _flags: fuser::OpenFlags,
        _lock_owner: Option<LockOwner>,
        reply: ReplyData,
    ) {
        let _served = self.fs.serve(Opcode::Read);
        reply_data(guarded(|| self.fs.read_file(ino.0, fh, offset, size)), reply);
    }

    fn write(
        &self,
        req: &Request,
        ino: INodeNo,
        fh: FileHandle,
        offset: u64,
        data: &[u8],
        _write_flags: WriteFlags,
        _flags: fuser::OpenFlags,
        _lock_owner: Option<LockOwner>,
        reply: ReplyWrite,
    ) {
        let _served = self.fs.serve(Opcode::Write);
        match guarded(|| self.fs.unless_full(|| self.fs.write_file(&client(req), ino.0, fh, offset, data))) {
            Ok(n) => reply.written(n),
            Err(e) => reply.error(errno(e)),
        }
    }

    fn fallocate(
        &self,
        req: &Request,
        ino: INodeNo,
        fh: FileHandle,
        offset: u64,
        length: u64,
        mode: i32,
        reply: ReplyEmpty,
    ) {
        let _served = self.fs.serve(Opcode::Other);
        reply_empty(
            guarded(|| self.fs.unless_full(|| self.fs.allocate(&client(req), ino.0, fh, (offset, length), mode))),
            reply,
        );
    }

    fn lseek(&self, _req: &Request, ino: INodeNo, fh: FileHandle, offset: i64, whence: i32, reply: ReplyLseek) {
        let _served = self.fs.serve(Opcode::Other);
        match guarded(|| self.fs.seek(ino.0, fh, offset, whence)) {
            Ok(at) => reply.offset(at),
            Err(e) => reply.error(errno(e)),
        }
    }

    fn flush(&self, _req: &Request, _ino: INodeNo, fh: FileHandle, lock_owner: LockOwner, reply: ReplyEmpty) {
        let _served = self.fs.serve(Opcode::Flush);
        reply_empty(guarded(|| self.fs.flush_file(fh, lock_owner.0)), reply);
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
        let _served = self.fs.serve(Opcode::Release);
        surviving(|| self.fs.release_file(fh, lock_owner.map(|o| o.0)));
        reply.ok();
    }

    fn fsync(&self, _req: &Request, _ino: INodeNo, _fh: FileHandle, _datasync: bool, reply: ReplyEmpty) {
        let _served = self.fs.serve(Opcode::Other);
        reply.ok();
    }

    fn opendir(&self, req: &Request, ino: INodeNo, flags: fuser::OpenFlags, reply: ReplyOpen) {
        let _served = self.fs.serve(Opcode::Dir);
        reply_open(guarded(|| self.fs.open_dir(&client(req), ino.0, flags.0)), reply);
    }

    fn readdir(&self, _req: &Request, _ino: INodeNo, fh: FileHandle, offset: u64, mut reply: ReplyDirectory) {
        let _served = self.fs.serve(Opcode::Dir);
        let listed = guarded(|| {
            self.fs.read_dir(fh, offset, |id, next, kind, name| {
                reply.add(INodeNo(id), next, kind, OsStr::from_bytes(name))
            })
        });
        match listed {
            Ok(()) => reply.ok(),
            Err(e) => reply.error(errno(e)),
        }
    }

    fn releasedir(&self, _req: &Request, _ino: INodeNo, fh: FileHandle, _flags: fuser::OpenFlags, reply: ReplyEmpty) {
        let _served = self.fs.serve(Opcode::Dir);
        surviving(|| self.fs.release_dir(fh));
        reply.ok();
    }

    fn fsyncdir(&self, _req: &Request, _ino: INodeNo, _fh: FileHandle, _datasync: bool, reply: ReplyEmpty) {
        let _served = self.fs.serve(Opcode::Other);
        reply.ok();
    }

    fn statfs(&self, _req: &Request, ino: INodeNo, reply: ReplyStatfs) {
        let _served = self.fs.serve(Opcode::Other);
        match guarded(|| self.fs.fs_stats(ino.0)) {
            Ok(s) => reply.statfs(s.blocks, s.bfree, s.bavail, s.files, s.ffree, s.bsize, s.namelen, s.frsize),
            Err(e) => reply.error(errno(e)),
        }
    }

    fn setxattr(
        &self,
        req: &Request,
        ino: INodeNo,
        name: &OsStr,
        value: &[u8],
        flags: i32,
        _position: u32,
        reply: ReplyEmpty,
    ) {
        let _served = self.fs.serve(Opcode::Other);
        reply_empty(
            guarded(|| self.fs.unless_full(|| self.fs.set_xattr(&client(req), ino.0, name.as_bytes(), value, flags))),
            reply,
        );
    }

    fn getxattr(&self, req: &Request, ino: INodeNo, name: &OsStr, size: u32, reply: ReplyXattr) {
        let _served = self.fs.serve(Opcode::Other);
        reply_xattr(guarded(|| self.fs.get_xattr(&client(req), ino.0, name.as_bytes(), size)), reply);
    }

    fn listxattr(&self, req: &Request, ino: INodeNo, size: u32, reply: ReplyXattr) {
        let _served = self.fs.serve(Opcode::Other);
        reply_xattr(guarded(|| self.fs.list_xattr(&client(req), ino.0, size)), reply);
    }

    fn removexattr(&self, req: &Request, ino: INodeNo, name: &OsStr, reply: ReplyEmpty) {
        let _served = self.fs.serve(Opcode::Other);
        reply_empty(guarded(|| self.fs.remove_xattr(&client(req), ino.0, name.as_bytes())), reply);
    }

    fn access(&self, req: &Request, ino: INodeNo, mask: AccessFlags, reply: ReplyEmpty) {
        let _served = self.fs.serve(Opcode::Other);
        reply_empty(guarded(|| self.fs.check_access(&client(req), ino.0, mask.bits())), reply);
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
        let _served = self.fs.serve(Opcode::Create);
        match guarded(|| {
            self.fs.unless_full(|| self.fs.create_file(&client(req), parent.0, name.as_bytes(), mode, flags))
        }) {
            Ok(((ttl, attr), fh, fopen)) => reply.created(&ttl, &attr, Generation(0), fh, fopen),
            Err(e) => reply.error(errno(e)),
        }
        self.fs.hand_on_releases(parent.0);
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
        let _served = self.fs.serve(Opcode::Other);
        let (locks, file) = match self.fs.lock_file(fh) {
            Ok(found) => found,
            Err(e) => return reply.error(errno(e)),
        };
        locks.getlk(file, lock_owner.0, (start, end, typ), move |found| match found {
            Ok(Some((typ, start, end, pid))) => reply.locked(start, end, typ, pid),
            Ok(None) => reply.locked(start, end, libc::F_UNLCK, 0),
            Err(e) => reply.error(errno(e)),
        });
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
        let _served = self.fs.serve(Opcode::Other);
        let (locks, file) = match self.fs.lock_file(fh) {
            Ok(found) => found,
            Err(e) => return reply.error(errno(e)),
        };
        let host_pid = if pid != 0 { pid } else { req.pid() };
        if sleep {
            let done = move |result: VfsResult<()>| reply_empty(result, reply);
            let caller = crate::locks::Caller { host_pid, thread: req.pid() };
            return locks.setlkw(file, lock_owner.0, (start, end, typ), caller, done);
        }
        locks.setlk(file, lock_owner.0, (start, end, typ), host_pid, move |result| reply_empty(result, reply));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_handler_that_panics_is_answered_eio() {
        assert_eq!(guarded(|| Ok(7)), Ok(7));
        assert_eq!(guarded(|| Err::<(), _>(Errno::ENOENT)), Err(Errno::ENOENT));
        assert_eq!(guarded::<()>(|| panic!("a handler's bug")), Err(Errno::EIO));
    }
}
