//! The FUSE wire format of the requests that come through the io_uring
//! queues (see the `ring` module): parsing them into calls of the
//! handlers and writing the handlers' answers in the kernel's layout
//! (`include/uapi/linux/fuse.h`, protocol 7.x on a little-endian host).
//!
//! A queued request comes in three parts: the `fuse_in_header`, the
//! opcode's own header (`fuse_create_in`, ..., none for some opcodes) in a
//! separate field, and the rest of its arguments (names, written data)
//! in the payload. A reply is the `fuse_out_header` and the payload the
//! opcode's `/dev/fuse` reply would carry after it. Parsing never trusts
//! a length: what is short or unterminated is EINVAL.

use crate::caller::Client;
use crate::convert::timespec;
use crate::fs::{AttrChanges, Entry, FsStats, Server, Xattr};
use crate::requests::Opcode;
use fuser::{FileAttr, FileHandle, FileType, FopenFlags};
use std::time::{Duration, SystemTime};
use vfscale::xattr::{XATTR_LIST_MAX, XATTR_SIZE_MAX};
use vfscale::{Errno, SetTime, Timespec, VfsResult};

/// `struct fuse_in_header`.
pub(crate) const IN_HEADER: usize = 40;
/// `struct fuse_out_header`.
pub(crate) const OUT_HEADER: usize = 16;

const FUSE_LOOKUP: u32 = 1;
pub(crate) const FUSE_FORGET: u32 = 2;
const FUSE_GETATTR: u32 = 3;
const FUSE_SETATTR: u32 = 4;
const FUSE_READLINK: u32 = 5;
const FUSE_SYMLINK: u32 = 6;
const FUSE_MKNOD: u32 = 8;
const FUSE_MKDIR: u32 = 9;
const FUSE_UNLINK: u32 = 10;
const FUSE_RMDIR: u32 = 11;
const FUSE_RENAME: u32 = 12;
const FUSE_LINK: u32 = 13;
const FUSE_OPEN: u32 = 14;
const FUSE_READ: u32 = 15;
const FUSE_WRITE: u32 = 16;
pub(crate) const FUSE_STATFS: u32 = 17;
const FUSE_RELEASE: u32 = 18;
const FUSE_FSYNC: u32 = 20;
const FUSE_SETXATTR: u32 = 21;
const FUSE_GETXATTR: u32 = 22;
const FUSE_LISTXATTR: u32 = 23;
const FUSE_REMOVEXATTR: u32 = 24;
const FUSE_FLUSH: u32 = 25;
const FUSE_OPENDIR: u32 = 27;
const FUSE_READDIR: u32 = 28;
const FUSE_RELEASEDIR: u32 = 29;
const FUSE_FSYNCDIR: u32 = 30;
const FUSE_ACCESS: u32 = 34;
pub(crate) const FUSE_INTERRUPT: u32 = 36;
const FUSE_CREATE: u32 = 35;
const FUSE_DESTROY: u32 = 38;
pub(crate) const FUSE_BATCH_FORGET: u32 = 42;
const FUSE_FALLOCATE: u32 = 43;
const FUSE_RENAME2: u32 = 45;
const FUSE_LSEEK: u32 = 46;

const FATTR_MODE: u32 = 1 << 0;
const FATTR_UID: u32 = 1 << 1;
const FATTR_GID: u32 = 1 << 2;
const FATTR_SIZE: u32 = 1 << 3;
const FATTR_ATIME: u32 = 1 << 4;
const FATTR_MTIME: u32 = 1 << 5;
const FATTR_FH: u32 = 1 << 6;
const FATTR_ATIME_NOW: u32 = 1 << 7;
const FATTR_MTIME_NOW: u32 = 1 << 8;
const FUSE_RELEASE_FLOCK_UNLOCK: u32 = 1 << 1;

/// The fields of `struct fuse_in_header` a handler needs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct InHeader {
    pub opcode: u32,
    pub unique: u64,
    pub node: u64,
    pub client: Client,
}

impl InHeader {
    /// Reads `struct fuse_in_header`.
    pub fn parse(bytes: &[u8]) -> VfsResult<InHeader> {
        let mut r = Reader::new(bytes);
        let _len = r.u32()?;
        let opcode = r.u32()?;
        let unique = r.u64()?;
        let node = r.u64()?;
        let (uid, gid, pid) = (r.u32()?, r.u32()?, r.u32()?);
        // `total_extlen` and padding: unused, but a header cut short in
        // them is as short as any other (the drain once took 36 bytes for
        // a header and answered it).
        r.skip(4)?;
        Ok(InHeader { opcode, unique, node, client: Client { uid, gid, pid } })
    }
}

/// The nodes and lookup counts a `FORGET` (`struct fuse_forget_in`) or a
/// `BATCH_FORGET` (`struct fuse_batch_forget_in` and its `struct
/// fuse_forget_one`s) with header `h` and `body` gives up: what is whole
/// of a body cut short; `None` for another request.
pub(crate) fn forgets(h: &InHeader, body: &[u8]) -> Option<Vec<(u64, u64)>> {
    let mut r = Reader::new(body);
    match h.opcode {
        FUSE_FORGET => Some(r.u64().map(|nlookup| vec![(h.node, nlookup)]).unwrap_or_default()),
        FUSE_BATCH_FORGET => {
            let Ok(count) = r.u32().and_then(|count| r.skip(4).map(|()| count)) else { return Some(Vec::new()) };
            Some((0..count).map_while(|_| Some((r.u64().ok()?, r.u64().ok()?))).collect())
        }
        _ => None,
    }
}

/// Reads little-endian fields and C strings off the front of a buffer.
struct Reader<'a>(&'a [u8]);

impl<'a> Reader<'a> {
    fn new(bytes: &'a [u8]) -> Reader<'a> {
        Reader(bytes)
    }

    fn take(&mut self, n: usize) -> VfsResult<&'a [u8]> {
        if self.0.len() < n {
            return Err(Errno::EINVAL);
        }
        let (head, rest) = self.0.split_at(n);
        self.0 = rest;
        Ok(head)
    }

    fn u32(&mut self) -> VfsResult<u32> {
        Ok(u32::from_le_bytes(self.take(4)?.try_into().expect("4 bytes")))
    }

    fn u64(&mut self) -> VfsResult<u64> {
        Ok(u64::from_le_bytes(self.take(8)?.try_into().expect("8 bytes")))
    }

    /// A NUL-terminated name, without its NUL.
    fn name(&mut self) -> VfsResult<&'a [u8]> {
        let end = self.0.iter().position(|&b| b == 0).ok_or(Errno::EINVAL)?;
        let name = self.take(end)?;
        self.take(1)?;
        Ok(name)
    }

    fn skip(&mut self, n: usize) -> VfsResult<()> {
        self.take(n).map(drop)
    }
}

/// What a reply carries after its `fuse_out_header`.
#[derive(Debug)]
pub(crate) enum Answer {
    /// Nothing (an empty reply).
    Empty,
    /// `fuse_entry_out`.
    Entry(Entry),
    /// `fuse_attr_out`.
    Attr(Entry),
    /// `fuse_open_out`.
    Open(FileHandle, FopenFlags),
    /// `fuse_entry_out` and `fuse_open_out`.
    Created(Entry, FileHandle, FopenFlags),
    /// `fuse_write_out`.
    Written(u32),
    /// `fuse_statfs_out`.
    Statfs(FsStats),
    /// `fuse_getxattr_out`.
    XattrSize(u32),
    /// `fuse_lseek_out`.
    Offset(i64),
    /// Bytes as they are: read data, a link target, xattrs, dirents.
    Data(Vec<u8>),
}

/// A request served: what to count, the reply, and the directory whose
/// releases to hand on after it (see [`Server::hand_on_releases`]).
#[derive(Debug)]
pub(crate) struct Handled {
    pub op: Opcode,
    pub reply: VfsResult<Answer>,
    pub then_tidy: Option<u64>,
}

impl Handled {
    fn of(op: Opcode, reply: VfsResult<Answer>) -> Handled {
        Handled { op, reply, then_tidy: None }
    }

    fn tidying(op: Opcode, reply: VfsResult<Answer>, dir: u64) -> Handled {
        Handled { op, reply, then_tidy: Some(dir) }
    }
}

fn empty(result: VfsResult<()>) -> VfsResult<Answer> {
    result.map(|()| Answer::Empty)
}

fn entry(result: VfsResult<Entry>) -> VfsResult<Answer> {
    result.map(Answer::Entry)
}

fn xattr(result: VfsResult<Xattr>) -> VfsResult<Answer> {
    result.map(|x| match x {
        Xattr::Size(n) => Answer::XattrSize(n),
        Xattr::Data(data) => Answer::Data(data),
    })
}

fn open(result: VfsResult<(FileHandle, FopenFlags)>) -> VfsResult<Answer> {
    result.map(|(fh, flags)| Answer::Open(fh, flags))
}

/// `SETATTR`'s time: the given one, now, or none. Nanoseconds of a second
/// or more are EINVAL, as `utimensat` has them: the kernel never sends
/// them. Every other time the kernel sends is stored as it is.
fn set_time(valid: u32, given: u32, now: u32, sec: u64, nsec: u32) -> VfsResult<SetTime> {
    if valid & given == 0 {
        Ok(SetTime::Omit)
    } else if valid & now != 0 {
        Ok(SetTime::Now)
    } else if nsec >= 1_000_000_000 {
        Err(Errno::EINVAL)
    } else {
        Ok(SetTime::At(Timespec { sec: sec as i64, nsec: i64::from(nsec) }))
    }
}

/// Serves the request with header `h`, opcode header `op_in` and
/// arguments `payload` on `fs`, whose reply's payload may be `room` bytes
/// at most (a longer one cannot be answered). The kernel sends `FORGET`,
/// `BATCH_FORGET` and `INTERRUPT` through the device, never here; `INIT`
/// comes before the queues exist; record lock requests only come when
/// the VFS holds locks, which keeps requests on the device. Everything
/// else fuser would answer ENOSYS is ENOSYS.
pub(crate) fn serve(fs: &Server, h: &InHeader, op_in: &[u8], payload: &[u8], room: usize) -> Handled {
    let (c, node) = (&h.client, h.node);
    let mut head = Reader::new(op_in);
    let mut args = Reader::new(payload);
    let result = (|| -> VfsResult<Handled> {
        Ok(match h.opcode {
            FUSE_LOOKUP => {
                let name = args.name()?;
                Handled::tidying(Opcode::Lookup, entry(fs.look_up(c, node, name)), node)
            }
            FUSE_GETATTR => Handled::of(Opcode::Getattr, fs.attributes(node).map(Answer::Attr)),
            FUSE_SETATTR => {
                let valid = head.u32()?;
                head.skip(4)?;
                let fh = head.u64()?;
                let size = head.u64()?;
                let _lock_owner = head.u64()?;
                let (atime, mtime, _ctime) = (head.u64()?, head.u64()?, head.u64()?);
                let (atimensec, mtimensec, _ctimensec) = (head.u32()?, head.u32()?, head.u32()?);
                let mode = head.u32()?;
                head.skip(4)?;
                let (uid, gid) = (head.u32()?, head.u32()?);
                let changes = AttrChanges {
                    mode: (valid & FATTR_MODE != 0).then_some(mode),
                    uid: (valid & FATTR_UID != 0).then_some(uid),
                    gid: (valid & FATTR_GID != 0).then_some(gid),
                    size: (valid & FATTR_SIZE != 0).then_some(size),
                    atime: set_time(valid, FATTR_ATIME, FATTR_ATIME_NOW, atime, atimensec)?,
                    mtime: set_time(valid, FATTR_MTIME, FATTR_MTIME_NOW, mtime, mtimensec)?,
                };
                let fh = (valid & FATTR_FH != 0).then_some(FileHandle(fh));
                Handled::of(Opcode::Setattr, fs.set_attributes(c, node, changes, fh).map(Answer::Attr))
            }
            FUSE_READLINK => Handled::of(Opcode::Other, fs.link_target(node).map(Answer::Data)),
            FUSE_SYMLINK => {
                let (name, target) = (args.name()?, args.name()?);
                Handled::tidying(Opcode::Namespace, entry(fs.make_symlink(c, node, name, target)), node)
            }
            FUSE_MKNOD => {
                let (mode, rdev) = (head.u32()?, head.u32()?);
                let name = args.name()?;
                Handled::tidying(Opcode::Namespace, entry(fs.make_node(c, node, name, mode, rdev)), node)
            }
            FUSE_MKDIR => {
                let mode = head.u32()?;
                let name = args.name()?;
                Handled::tidying(Opcode::Namespace, entry(fs.make_dir(c, node, name, mode)), node)
            }
            FUSE_UNLINK | FUSE_RMDIR => {
                let name = args.name()?;
                let removed = fs.remove(c, node, name, h.opcode == FUSE_RMDIR);
                Handled::tidying(Opcode::Unlink, empty(removed), node)
            }
            FUSE_RENAME | FUSE_RENAME2 => {
                let newdir = head.u64()?;
                let flags = if h.opcode == FUSE_RENAME2 { head.u32()? } else { 0 };
                let (name, newname) = (args.name()?, args.name()?);
                let renamed = fs.rename_entry(c, node, name, newdir, newname, flags);
                Handled::tidying(Opcode::Namespace, empty(renamed), node)
            }
            FUSE_LINK => {
                let inode = head.u64()?;
                let newname = args.name()?;
                Handled::tidying(Opcode::Namespace, entry(fs.link_entry(c, inode, node, newname)), node)
            }
            FUSE_OPEN => {
                let flags = head.u32()? as i32;
                Handled::of(Opcode::Open, open(fs.open_file(c, node, flags)))
            }
            FUSE_READ => {
                let (fh, offset, size) = (head.u64()?, head.u64()?, head.u32()?);
                // Data past `room` cannot be answered (the queue answers
                // EIO), so one byte past it is as good as all: reading all
                // first made a READ of 4 GiB of a sparse file take 4 GiB,
                // twice.
                let size = size.min(u32::try_from(room.saturating_add(1)).unwrap_or(u32::MAX));
                Handled::of(Opcode::Read, fs.read_file(node, FileHandle(fh), offset, size).map(Answer::Data))
            }
            FUSE_WRITE => {
                let (fh, offset, size) = (head.u64()?, head.u64()?, head.u32()?);
                let data = args.take(size as usize)?;
                let written = fs.write_file(c, node, FileHandle(fh), offset, data);
                Handled::of(Opcode::Write, written.map(Answer::Written))
            }
            FUSE_STATFS => Handled::of(Opcode::Other, fs.fs_stats(node).map(Answer::Statfs)),
            FUSE_RELEASE => {
                let fh = head.u64()?;
                let (_flags, release_flags) = (head.u32()?, head.u32()?);
                let lock_owner = head.u64()?;
                let owner = (release_flags & FUSE_RELEASE_FLOCK_UNLOCK != 0).then_some(lock_owner);
                fs.release_file(FileHandle(fh), owner);
                Handled::of(Opcode::Release, Ok(Answer::Empty))
            }
            FUSE_FSYNC | FUSE_FSYNCDIR => Handled::of(Opcode::Other, Ok(Answer::Empty)),
            FUSE_SETXATTR => {
                let (size, flags) = (head.u32()?, head.u32()?);
                let name = args.name()?;
                let value = args.take(size as usize)?;
                Handled::of(Opcode::Other, empty(fs.set_xattr(c, node, name, value, flags as i32)))
            }
            FUSE_GETXATTR => {
                // As `getxattr(2)` caps the size (no value is longer); the
                // handler allocates what it is asked for.
                let size = head.u32()?.min(XATTR_SIZE_MAX as u32);
                let name = args.name()?;
                Handled::of(Opcode::Other, xattr(fs.get_xattr(c, node, name, size)))
            }
            FUSE_LISTXATTR => {
                // As `listxattr(2)` caps the size.
                let size = head.u32()?.min(XATTR_LIST_MAX as u32);
                Handled::of(Opcode::Other, xattr(fs.list_xattr(c, node, size)))
            }
            FUSE_REMOVEXATTR => {
                let name = args.name()?;
                Handled::of(Opcode::Other, empty(fs.remove_xattr(c, node, name)))
            }
            FUSE_FLUSH => {
                let fh = head.u64()?;
                head.skip(8)?;
                Handled::of(Opcode::Flush, empty(fs.flush_file(FileHandle(fh), head.u64()?)))
            }
            FUSE_OPENDIR => {
                let flags = head.u32()? as i32;
                Handled::of(Opcode::Dir, open(fs.open_dir(c, node, flags)))
            }
            FUSE_READDIR => {
                let (fh, offset, size) = (head.u64()?, head.u64()?, head.u32()?);
                let mut out = Vec::new();
                let listed = fs.read_dir(FileHandle(fh), offset, |id, next, kind, name| {
                    !add_dirent(&mut out, size as usize, (id, next, kind, name))
                });
                Handled::of(Opcode::Dir, listed.map(|()| Answer::Data(out)))
            }
            FUSE_RELEASEDIR => {
                fs.release_dir(FileHandle(head.u64()?));
                Handled::of(Opcode::Dir, Ok(Answer::Empty))
            }
            FUSE_ACCESS => Handled::of(Opcode::Other, empty(fs.check_access(c, node, head.u32()? as i32))),
            FUSE_CREATE => {
                let (flags, mode) = (head.u32()? as i32, head.u32()?);
                let name = args.name()?;
                let created = fs.create_file(c, node, name, mode, flags);
                let answer = created.map(|(entry, fh, fopen)| Answer::Created(entry, fh, fopen));
                Handled::tidying(Opcode::Create, answer, node)
            }
            FUSE_DESTROY => {
                fs.shut_down();
                Handled::of(Opcode::Other, Ok(Answer::Empty))
            }
            FUSE_FALLOCATE => {
                let (fh, offset, length, mode) = (head.u64()?, head.u64()?, head.u64()?, head.u32()?);
                let allocated = fs.allocate(c, node, FileHandle(fh), (offset, length), mode as i32);
                Handled::of(Opcode::Other, empty(allocated))
            }
            FUSE_LSEEK => {
                let (fh, offset, whence) = (head.u64()?, head.u64()?, head.u32()?);
                let at = fs.seek(node, FileHandle(fh), offset as i64, whence as i32);
                Handled::of(Opcode::Other, at.map(Answer::Offset))
            }
            _ => Handled::of(Opcode::Other, Err(Errno::ENOSYS)),
        })
    })();
    result.unwrap_or_else(|e| Handled::of(Opcode::Other, Err(e)))
}

/// Appends a `fuse_dirent` to `out` if it fits in `limit` bytes; false
/// when it does not (the reply is full).
pub(crate) fn add_dirent(out: &mut Vec<u8>, limit: usize, (id, next, kind, name): (u64, u64, FileType, &[u8])) -> bool {
    let len = (24 + name.len() + 7) & !7;
    if out.len() + len > limit {
        return false;
    }
    out.extend_from_slice(&id.to_le_bytes());
    out.extend_from_slice(&next.to_le_bytes());
    out.extend_from_slice(&(name.len() as u32).to_le_bytes());
    out.extend_from_slice(&(mode_bits(kind) >> 12).to_le_bytes());
    out.extend_from_slice(name);
    out.resize(out.len().next_multiple_of(8), 0);
    true
}

/// The `S_IFMT` bits of `kind`.
fn mode_bits(kind: FileType) -> u32 {
    match kind {
        FileType::NamedPipe => libc::S_IFIFO,
        FileType::CharDevice => libc::S_IFCHR,
        FileType::BlockDevice => libc::S_IFBLK,
        FileType::Directory => libc::S_IFDIR,
        FileType::RegularFile => libc::S_IFREG,
        FileType::Symlink => libc::S_IFLNK,
        FileType::Socket => libc::S_IFSOCK,
    }
}

/// Seconds (signed, in a u64) and nanoseconds since the epoch, as
/// `fuse_attr` keeps times.
fn epoch_time(t: SystemTime) -> (u64, u32) {
    let ts = timespec(t);
    (ts.sec as u64, ts.nsec as u32)
}

/// Appends `struct fuse_attr`.
fn put_attr(out: &mut Vec<u8>, a: &FileAttr) {
    let [(atime, atimensec), (mtime, mtimensec), (ctime, ctimensec)] = [a.atime, a.mtime, a.ctime].map(epoch_time);
    for v in [a.ino.0, a.size, a.blocks, atime, mtime, ctime] {
        out.extend_from_slice(&v.to_le_bytes());
    }
    let mode = mode_bits(a.kind) | u32::from(a.perm);
    for v in [atimensec, mtimensec, ctimensec, mode, a.nlink, a.uid, a.gid, a.rdev, a.blksize, a.flags] {
        out.extend_from_slice(&v.to_le_bytes());
    }
}

/// A timeout's seconds and nanoseconds, as replies carry them.
fn valid(ttl: Duration) -> (u64, u32) {
    (ttl.as_secs(), ttl.subsec_nanos())
}

/// Appends `struct fuse_entry_out`.
fn put_entry(out: &mut Vec<u8>, (ttl, attr): &Entry) {
    let (sec, nsec) = valid(*ttl);
    for v in [attr.ino.0, 0, sec, sec] {
        out.extend_from_slice(&v.to_le_bytes());
    }
    out.extend_from_slice(&nsec.to_le_bytes());
    out.extend_from_slice(&nsec.to_le_bytes());
    put_attr(out, attr);
}

/// Appends `struct fuse_open_out`.
fn put_open(out: &mut Vec<u8>, fh: FileHandle, flags: FopenFlags) {
    out.extend_from_slice(&fh.0.to_le_bytes());
    out.extend_from_slice(&flags.bits().to_le_bytes());
    out.extend_from_slice(&0u32.to_le_bytes());
}

/// The payload of the reply carrying `answer`.
pub(crate) fn encode(answer: &Answer) -> Vec<u8> {
    let mut out = Vec::with_capacity(144);
    match answer {
        Answer::Empty => {}
        Answer::Entry(entry) => put_entry(&mut out, entry),
        Answer::Attr((ttl, attr)) => {
            let (sec, nsec) = valid(*ttl);
            out.extend_from_slice(&sec.to_le_bytes());
            out.extend_from_slice(&nsec.to_le_bytes());
            out.extend_from_slice(&0u32.to_le_bytes());
            put_attr(&mut out, attr);
        }
        Answer::Open(fh, flags) => put_open(&mut out, *fh, *flags),
        Answer::Created(entry, fh, flags) => {
            put_entry(&mut out, entry);
            put_open(&mut out, *fh, *flags);
        }
        Answer::Written(n) | Answer::XattrSize(n) => {
            out.extend_from_slice(&n.to_le_bytes());
            out.extend_from_slice(&0u32.to_le_bytes());
        }
        Answer::Statfs(s) => {
            for v in [s.blocks, s.bfree, s.bavail, s.files, s.ffree] {
                out.extend_from_slice(&v.to_le_bytes());
            }
            for v in [s.bsize, s.namelen, s.frsize] {
                out.extend_from_slice(&v.to_le_bytes());
            }
            out.resize(80, 0);
        }
        Answer::Offset(at) => out.extend_from_slice(&at.to_le_bytes()),
        Answer::Data(data) => out.extend_from_slice(data),
    }
    out
}

/// `struct fuse_out_header` for request `unique`: `payload` bytes follow,
/// or an error with none.
pub(crate) fn out_header(unique: u64, result: Result<usize, Errno>) -> [u8; OUT_HEADER] {
    let (len, error) = match result {
        Ok(n) => (OUT_HEADER + n, 0),
        Err(e) => (OUT_HEADER, -e.raw()),
    };
    let mut h = [0; OUT_HEADER];
    h[..4].copy_from_slice(&(len as u32).to_le_bytes());
    h[4..8].copy_from_slice(&error.to_le_bytes());
    h[8..].copy_from_slice(&unique.to_le_bytes());
    h
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fs::OpenPolicy;
    use crate::MountOptions;
    use vfscale::Vfs;

    const ROOT: u64 = 1;
    const ROOT_CLIENT: Client = Client { uid: 0, gid: 0, pid: 1 };

    fn fs() -> Server {
        Server::new(Vfs::default(), false, OpenPolicy::new(&MountOptions::default()), Duration::ZERO).unwrap()
    }

    /// [`super::serve`] with room for any reply.
    fn serve(fs: &Server, h: &InHeader, op_in: &[u8], payload: &[u8]) -> Handled {
        super::serve(fs, h, op_in, payload, usize::MAX)
    }

    fn header(opcode: u32, node: u64) -> InHeader {
        InHeader { opcode, unique: 7, node, client: ROOT_CLIENT }
    }

    fn le(fields: &[u64], widths: &[usize]) -> Vec<u8> {
        fields.iter().zip(widths).flat_map(|(v, &w)| v.to_le_bytes()[..w].to_vec()).collect()
    }

    fn u64_at(bytes: &[u8], at: usize) -> u64 {
        u64::from_le_bytes(bytes[at..at + 8].try_into().unwrap())
    }

    fn u32_at(bytes: &[u8], at: usize) -> u32 {
        u32::from_le_bytes(bytes[at..at + 4].try_into().unwrap())
    }

    #[test]
    fn forgets_and_batches_parse() {
        assert_eq!(forgets(&header(FUSE_FORGET, 9), &3u64.to_le_bytes()), Some(vec![(9, 3)]));
        let mut body = vec![];
        body.extend_from_slice(&2u32.to_le_bytes());
        body.extend_from_slice(&0u32.to_le_bytes());
        for (node, nlookup) in [(5u64, 1u64), (6, 2)] {
            body.extend_from_slice(&node.to_le_bytes());
            body.extend_from_slice(&nlookup.to_le_bytes());
        }
        assert_eq!(forgets(&header(FUSE_BATCH_FORGET, 0), &body), Some(vec![(5, 1), (6, 2)]));
        // A batch cut short yields what is whole; other requests none.
        assert_eq!(forgets(&header(FUSE_BATCH_FORGET, 0), &body[..body.len() - 1]), Some(vec![(5, 1)]));
        assert_eq!(forgets(&header(FUSE_INTERRUPT, 0), &body), None);
        // A header cut short is no request, even in its last, unused
        // bytes.
        assert!(InHeader::parse(&[0; 35]).is_err());
        assert!(InHeader::parse(&[0; IN_HEADER - 1]).is_err());
        assert!(InHeader::parse(&[0; IN_HEADER]).is_ok());
    }

    #[test]
    fn the_in_header_is_read_field_by_field() {
        let bytes = le(&[40, FUSE_LOOKUP.into(), 99, 5, 1000, 100, 4242, 0], &[4, 4, 8, 8, 4, 4, 4, 4]);
        let h = InHeader::parse(&bytes).unwrap();
        assert_eq!(
            h,
            InHeader { opcode: FUSE_LOOKUP, unique: 99, node: 5, client: Client { uid: 1000, gid: 100, pid: 4242 } }
        );
        assert_eq!(InHeader::parse(&bytes[..20]), Err(Errno::EINVAL));
    }

    #[test]
    fn a_create_then_write_then_read_goes_through_the_handlers() {
        let fs = fs();
        let create_in = le(&[libc::O_WRONLY as u64, 0o100644, 0o022, 0], &[4, 4, 4, 4]);
        let created = serve(&fs, &header(FUSE_CREATE, ROOT), &create_in, b"f\0");
        assert_eq!((created.op, created.then_tidy), (Opcode::Create, Some(ROOT)));
        let bytes = encode(&created.reply.unwrap());
        assert_eq!(bytes.len(), 128 + 16, "fuse_entry_out and fuse_open_out");
        let node = u64_at(&bytes, 0);
        assert_ne!(node, 0);
        assert_eq!(u32_at(&bytes, 40 + 60), libc::S_IFREG | 0o644, "fuse_attr's mode");
        assert_eq!(u64_at(&bytes, 128), 0, "opened without a handle: the kernel opens without asking");

        let write_in = le(&[0, 0, 5, 0, 0, 0, 0], &[8, 8, 4, 4, 8, 4, 4]);
        let written = serve(&fs, &header(FUSE_WRITE, node), &write_in, b"hello");
        assert_eq!(encode(&written.reply.unwrap()), le(&[5, 0], &[4, 4]));

        let read_in = le(&[0, 1, 100, 0, 0, 0, 0], &[8, 8, 4, 4, 8, 4, 4]);
        let read = serve(&fs, &header(FUSE_READ, node), &read_in, &[]);
        assert_eq!(encode(&read.reply.unwrap()), b"ello");
        // A read past the reply's room reads one byte past it, no more.
        let read_in = le(&[0, 0, u32::MAX.into(), 0, 0, 0, 0], &[8, 8, 4, 4, 8, 4, 4]);
        let read = super::serve(&fs, &header(FUSE_READ, node), &read_in, &[], 2);
        assert_eq!(encode(&read.reply.unwrap()), b"hel");
        let read = super::serve(&fs, &header(FUSE_READ, node), &read_in, &[], 5);
        assert_eq!(encode(&read.reply.unwrap()), b"hello");

        let lookup = serve(&fs, &header(FUSE_LOOKUP, ROOT), &[], b"f\0");
        let entry = encode(&lookup.reply.unwrap());
        assert_eq!((u64_at(&entry, 0), u64_at(&entry, 40 + 8)), (node, 5), "node id and size");

        let unlink = serve(&fs, &header(FUSE_UNLINK, ROOT), &[], b"f\0");
        assert!(matches!(unlink.reply, Ok(Answer::Empty)));
        let missing = serve(&fs, &header(FUSE_LOOKUP, ROOT), &[], b"f\0");
        assert_eq!(u64_at(&encode(&missing.reply.unwrap()), 0), 0, "a negative entry");
    }

    #[test]
    fn setattr_takes_only_the_fields_marked_valid() {
        let fs = fs();
        let mkdir = serve(&fs, &header(FUSE_MKDIR, ROOT), &le(&[0o755, 0], &[4, 4]), b"d\0");
        let node = u64_at(&encode(&mkdir.reply.unwrap()), 0);
        // valid = MODE | MTIME; uid 77 is not marked and stays 0.
        let mut setattr_in = vec![0u8; 88];
        setattr_in[..4].copy_from_slice(&(FATTR_MODE | FATTR_MTIME).to_le_bytes());
        setattr_in[40..48].copy_from_slice(&1_000_000u64.to_le_bytes());
        setattr_in[68..72].copy_from_slice(&(libc::S_IFDIR | 0o700).to_le_bytes());
        setattr_in[76..80].copy_from_slice(&77u32.to_le_bytes());
        let attr = encode(&serve(&fs, &header(FUSE_SETATTR, node), &setattr_in, &[]).reply.unwrap());
        assert_eq!(attr.len(), 104, "fuse_attr_out");
        let fattr = &attr[16..];
        assert_eq!(u64_at(fattr, 32), 1_000_000, "mtime");
        assert_eq!(u32_at(fattr, 60), libc::S_IFDIR | 0o700, "mode");
        assert_eq!(u32_at(fattr, 68), 0, "uid");
    }

    #[test]
    fn short_or_unterminated_arguments_are_einval_and_unknown_opcodes_enosys() {
        let fs = fs();
        assert_eq!(serve(&fs, &header(FUSE_LOOKUP, ROOT), &[], b"no-nul").reply.err(), Some(Errno::EINVAL));
        assert_eq!(serve(&fs, &header(FUSE_SETATTR, ROOT), &[0; 10], &[]).reply.err(), Some(Errno::EINVAL));
        let write_in = le(&[0, 0, 50, 0, 0, 0, 0], &[8, 8, 4, 4, 8, 4, 4]);
        assert_eq!(serve(&fs, &header(FUSE_WRITE, ROOT), &write_in, b"short").reply.err(), Some(Errno::EINVAL));
        assert_eq!(serve(&fs, &header(1000, ROOT), &[], &[]).reply.err(), Some(Errno::ENOSYS));
        assert_eq!(serve(&fs, &header(FUSE_OPEN, ROOT), &[0; 8], &[]).reply.err(), Some(Errno::ENOSYS));
    }

    #[test]
    fn dirents_are_padded_to_eight_bytes_and_stop_at_the_limit() {
        let mut out = Vec::new();
        assert!(add_dirent(&mut out, 64, (5, 1, FileType::Directory, b".")));
        assert_eq!(out.len(), 32);
        assert_eq!(
            (u64_at(&out, 0), u64_at(&out, 8), u32_at(&out, 16), u32_at(&out, 20)),
            (5, 1, 1, libc::DT_DIR.into())
        );
        assert!(!add_dirent(&mut out, 64, (6, 2, FileType::RegularFile, b"seventeen-bytes!!")));
        assert_eq!(out.len(), 32, "what does not fit is left out");
    }

    #[test]
    fn an_error_reply_is_a_bare_header() {
        let h = out_header(9, Err(Errno::ENOENT));
        assert_eq!(
            (u32_at(&h, 0), i32::from_le_bytes(h[4..8].try_into().unwrap()), u64_at(&h, 8)),
            (16, -libc::ENOENT, 9)
        );
        assert_eq!(u32_at(&out_header(9, Ok(8)), 0), 24);
        let statfs = encode(&Answer::Statfs(FsStats {
            blocks: 1,
            bfree: 2,
            bavail: 2,
            files: 3,
            ffree: 4,
            bsize: 4096,
            namelen: 255,
            frsize: 4096,
        }));
        assert_eq!((statfs.len(), u32_at(&statfs, 44)), (80, 255));
    }
}
