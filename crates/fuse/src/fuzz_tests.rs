//! Fuzzing of the FUSE message parsers (`wire_survives_arbitrary_messages`):
//! arbitrary bytes, and valid requests of every opcode the queues serve
//! (and some they do not) mutated byte by byte, go where requests come in
//! without fuser — a queue's slot (`ring`) and the forget drain's reads
//! (`forgets`) — on a fresh VFS, and every answer, and the VFS at the end,
//! is checked.
//!
//! A case is a setup (where record locks live, the VFS's design, tight
//! limits or a roomy size limit) and up to 40 steps, each a request built from its fields
//! (node ids and file handles named by what earlier replies gave, so most
//! requests reach real nodes), then mutated: a byte flipped, a part cut
//! short or lengthened, the length, opcode, node or payload size changed,
//! the last NUL dropped. Requests go where the kernel sends them (the
//! forgets and interrupts to the device, the rest to a queue) or, now and
//! then, the other way. The test keeps the kernel's side: the lookups each
//! node got and the handles opened, from the replies.
//!
//! The cases come from `VFSCALE_FUZZ_CASES` ([`DEFAULT_CASES`] without it).

use crate::forgets::Drain;
use crate::fs::{OpenPolicy, Server};
use crate::ring::detached::{self, ENT_IN_OUT, HEADERS, OP_IN};
use crate::wire::{self, InHeader, IN_HEADER, OUT_HEADER};
use crate::{MountOptions, RecordLocks};
use proptest::prelude::*;
use proptest::sample::select;
use proptest::test_runner::{Config, RngAlgorithm, RngSeed, TestCaseError};
use std::cell::Cell;
use std::collections::BTreeMap;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::sync::{Arc, Once};
use std::time::Duration;
use vfscale::{Credentials, Errno, FileType, FsStats, OpenFlags, Process, Vfs, VfsConfig, VfsResult};

/// Cases without `VFSCALE_FUZZ_CASES`: about 3 s in a debug build on two
/// cores (a release build runs 20,000 in under half a minute).
const DEFAULT_CASES: u32 = 1000;

/// The cases to run: `VFSCALE_FUZZ_CASES`, or [`DEFAULT_CASES`].
fn cases() -> u32 {
    match std::env::var("VFSCALE_FUZZ_CASES") {
        Ok(n) => n.parse().unwrap_or_else(|_| panic!("VFSCALE_FUZZ_CASES={n:?} is not a number of cases")),
        Err(_) => DEFAULT_CASES,
    }
}

// The opcodes (`enum fuse_opcode`), as the kernel numbers them.
const LOOKUP: u32 = 1;
const FORGET: u32 = 2;
const GETATTR: u32 = 3;
const SETATTR: u32 = 4;
const READLINK: u32 = 5;
const SYMLINK: u32 = 6;
const MKNOD: u32 = 8;
const MKDIR: u32 = 9;
const UNLINK: u32 = 10;
const RMDIR: u32 = 11;
const RENAME: u32 = 12;
const LINK: u32 = 13;
const OPEN: u32 = 14;
const READ: u32 = 15;
const WRITE: u32 = 16;
const STATFS: u32 = 17;
const RELEASE: u32 = 18;
const FSYNC: u32 = 20;
const SETXATTR: u32 = 21;
const GETXATTR: u32 = 22;
const LISTXATTR: u32 = 23;
const REMOVEXATTR: u32 = 24;
const FLUSH: u32 = 25;
const INIT: u32 = 26;
const OPENDIR: u32 = 27;
const READDIR: u32 = 28;
const RELEASEDIR: u32 = 29;
const FSYNCDIR: u32 = 30;
const ACCESS: u32 = 34;
const CREATE: u32 = 35;
const INTERRUPT: u32 = 36;
const DESTROY: u32 = 38;
const BATCH_FORGET: u32 = 42;
const FALLOCATE: u32 = 43;
const RENAME2: u32 = 45;
const LSEEK: u32 = 46;

/// What `wire::serve` answers; any other opcode is ENOSYS on a queue.
const SERVED: [u32; 32] = [
    LOOKUP,
    GETATTR,
    SETATTR,
    READLINK,
    SYMLINK,
    MKNOD,
    MKDIR,
    UNLINK,
    RMDIR,
    RENAME,
    LINK,
    OPEN,
    READ,
    WRITE,
    STATFS,
    RELEASE,
    FSYNC,
    SETXATTR,
    GETXATTR,
    LISTXATTR,
    REMOVEXATTR,
    FLUSH,
    OPENDIR,
    READDIR,
    RELEASEDIR,
    FSYNCDIR,
    ACCESS,
    CREATE,
    DESTROY,
    FALLOCATE,
    RENAME2,
    LSEEK,
];

/// FUSE's root node id.
const ROOT: u64 = 1;
/// `struct fuse_entry_out`, `struct fuse_open_out`, `struct fuse_attr_out`.
const ENTRY_OUT: usize = 128;
const OPEN_OUT: usize = 16;
const ATTR_OUT: usize = 104;
/// A queue's payload buffer: the ring's, on 4 KiB pages.
const RING_PAYLOAD: usize = 1 << 20;
/// What the forget drain reads at most.
const DRAIN_MAX_WRITE: usize = 64 * 1024;
/// Longer than settling the VFS takes; only a thread stuck elsewhere runs
/// it out.
const SETTLE: Duration = Duration::from_secs(10);

fn u32_at(bytes: &[u8], at: usize) -> u32 {
    u32::from_le_bytes(bytes[at..at + 4].try_into().expect("4 bytes"))
}

fn i32_at(bytes: &[u8], at: usize) -> i32 {
    i32::from_le_bytes(bytes[at..at + 4].try_into().expect("4 bytes"))
}

fn u64_at(bytes: &[u8], at: usize) -> u64 {
    u64::from_le_bytes(bytes[at..at + 8].try_into().expect("8 bytes"))
}

/// Little-endian fields and C strings, as a request's parts are laid out.
#[derive(Default)]
struct Le(Vec<u8>);

impl Le {
    fn u32(mut self, v: u32) -> Le {
        self.0.extend_from_slice(&v.to_le_bytes());
        self
    }

    fn u64(mut self, v: u64) -> Le {
        self.0.extend_from_slice(&v.to_le_bytes());
        self
    }

    fn raw(mut self, bytes: &[u8]) -> Le {
        self.0.extend_from_slice(bytes);
        self
    }

    /// A name and its NUL.
    fn name(self, name: &[u8]) -> Le {
        self.raw(name).raw(&[0])
    }
}

/// Panics on this thread so far. A queue answers EIO for a handler that
/// panicked, so a panic would not reach proptest through one; the hook
/// counts it on the way.
fn panics_here() -> u64 {
    thread_local!(static PANICS: Cell<u64> = const { Cell::new(0) });
    static HOOK: Once = Once::new();
    HOOK.call_once(|| {
        let previous = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            PANICS.with(|p| p.set(p.get() + 1));
            previous(info);
        }));
    });
    PANICS.with(Cell::get)
}

/// Whether `raw` (positive) is an errno Linux has.
fn known_errno(raw: i32) -> bool {
    raw > 0 && Errno::from_raw(raw).name() != "EUNKNOWN"
}

/// A node id: the root, one an earlier reply gave (by index, modulo how
/// many there are), or any number.
#[derive(Debug, Clone, Copy)]
enum NodeRef {
    Root,
    Known(usize),
    Raw(u64),
}

/// A file handle: none (what the kernel opened without a request), one an
/// earlier reply gave, or any number.
#[derive(Debug, Clone, Copy)]
enum FhRef {
    Zero,
    Known(usize),
    Raw(u64),
}

/// A forget's count: all the node's lookups, one, or any number (which the
/// kernel's contract may rule out: see [`Rig::may_forget`]).
#[derive(Debug, Clone, Copy)]
enum Count {
    All,
    One,
    Raw(u64),
}

/// `struct fuse_setattr_in`'s fields the parser reads.
#[derive(Debug, Clone)]
struct SetattrIn {
    valid: u32,
    fh: FhRef,
    size: u64,
    atime: u64,
    mtime: u64,
    atimensec: u32,
    mtimensec: u32,
    mode: u32,
    uid: u32,
    gid: u32,
}

/// A request, before its node ids and handles are known.
#[derive(Debug, Clone)]
enum Spec {
    Lookup(Vec<u8>),
    Getattr(FhRef),
    Setattr(SetattrIn),
    Readlink,
    Symlink {
        name: Vec<u8>,
        target: Vec<u8>,
    },
    Mknod {
        mode: u32,
        rdev: u32,
        name: Vec<u8>,
    },
    Mkdir {
        mode: u32,
        name: Vec<u8>,
    },
    Unlink(Vec<u8>),
    Rmdir(Vec<u8>),
    /// `RENAME`, or with flags `RENAME2`.
    Rename {
        newdir: NodeRef,
        flags: Option<u32>,
        name: Vec<u8>,
        newname: Vec<u8>,
    },
    Link {
        target: NodeRef,
        newname: Vec<u8>,
    },
    /// `OPEN`, or `OPENDIR`.
    Open {
        dir: bool,
        flags: u32,
    },
    /// `READ`, or `READDIR`.
    Read {
        dir: bool,
        fh: FhRef,
        offset: u64,
        size: u32,
    },
    Write {
        fh: FhRef,
        offset: u64,
        data: Vec<u8>,
    },
    Statfs,
    /// `RELEASE`, or `RELEASEDIR`.
    Release {
        dir: bool,
        fh: FhRef,
        release_flags: u32,
        lock_owner: u64,
    },
    /// `FSYNC`, or `FSYNCDIR`.
    Fsync {
        dir: bool,
        fh: FhRef,
    },
    Setxattr {
        name: Vec<u8>,
        value: Vec<u8>,
        flags: u32,
    },
    Getxattr {
        name: Vec<u8>,
        size: u32,
    },
    Listxattr(u32),
    Removexattr(Vec<u8>),
    Flush {
        fh: FhRef,
        lock_owner: u64,
    },
    Access(u32),
    Create {
        flags: u32,
        mode: u32,
        name: Vec<u8>,
    },
    Interrupt(u64),
    Fallocate {
        fh: FhRef,
        offset: u64,
        length: u64,
        mode: u32,
    },
    Lseek {
        fh: FhRef,
        offset: u64,
        whence: u32,
    },
    Forget(Count),
    /// With `count` the batch's count, if not how many follow.
    BatchForget {
        count: Option<u32>,
        forgets: Vec<(NodeRef, Count)>,
    },
    Init {
        minor: u32,
        flags: u32,
        flags2: u32,
    },
    Destroy,
    /// Any opcode, with any parts.
    Other {
        opcode: u32,
        op_in: Vec<u8>,
        args: Vec<u8>,
    },
}

impl Spec {
    fn opcode(&self) -> u32 {
        match self {
            Spec::Lookup(_) => LOOKUP,
            Spec::Getattr(_) => GETATTR,
            Spec::Setattr(_) => SETATTR,
            Spec::Readlink => READLINK,
            Spec::Symlink { .. } => SYMLINK,
            Spec::Mknod { .. } => MKNOD,
            Spec::Mkdir { .. } => MKDIR,
            Spec::Unlink(_) => UNLINK,
            Spec::Rmdir(_) => RMDIR,
            Spec::Rename { flags: None, .. } => RENAME,
            Spec::Rename { flags: Some(_), .. } => RENAME2,
            Spec::Link { .. } => LINK,
            Spec::Open { dir: false, .. } => OPEN,
            Spec::Open { dir: true, .. } => OPENDIR,
            Spec::Read { dir: false, .. } => READ,
            Spec::Read { dir: true, .. } => READDIR,
            Spec::Write { .. } => WRITE,
            Spec::Statfs => STATFS,
            Spec::Release { dir: false, .. } => RELEASE,
            Spec::Release { dir: true, .. } => RELEASEDIR,
            Spec::Fsync { dir: false, .. } => FSYNC,
            Spec::Fsync { dir: true, .. } => FSYNCDIR,
            Spec::Setxattr { .. } => SETXATTR,
            Spec::Getxattr { .. } => GETXATTR,
            Spec::Listxattr(_) => LISTXATTR,
            Spec::Removexattr(_) => REMOVEXATTR,
            Spec::Flush { .. } => FLUSH,
            Spec::Access(_) => ACCESS,
            Spec::Create { .. } => CREATE,
            Spec::Interrupt(_) => INTERRUPT,
            Spec::Fallocate { .. } => FALLOCATE,
            Spec::Lseek { .. } => LSEEK,
            Spec::Forget(_) => FORGET,
            Spec::BatchForget { .. } => BATCH_FORGET,
            Spec::Init { .. } => INIT,
            Spec::Destroy => DESTROY,
            Spec::Other { opcode, .. } => *opcode,
        }
    }

    /// Whether the request fails to parse (EINVAL) when its arguments are
    /// cut short: each name it takes is NUL-free (so only its terminator
    /// ends it), and written data or an xattr value is read by its size.
    fn needs_whole_args(&self) -> bool {
        let whole = |name: &[u8]| !name.contains(&0);
        match self {
            Spec::Lookup(name) | Spec::Unlink(name) | Spec::Rmdir(name) | Spec::Removexattr(name) => whole(name),
            Spec::Mknod { name, .. } | Spec::Mkdir { name, .. } | Spec::Create { name, .. } => whole(name),
            Spec::Getxattr { name, .. } | Spec::Setxattr { name, .. } | Spec::Link { newname: name, .. } => whole(name),
            Spec::Symlink { name, target: other } | Spec::Rename { name, newname: other, .. } => {
                whole(name) && whole(other)
            }
            Spec::Write { data, .. } => !data.is_empty(),
            _ => false,
        }
    }
}

/// A part of a request.
#[derive(Debug, Clone, Copy)]
enum Part {
    Header,
    OpIn,
    Args,
}

/// A change to a valid request.
#[derive(Debug, Clone)]
enum Mutation {
    /// The byte at `at` (modulo the part's length) xor `xor`.
    Flip {
        part: Part,
        at: usize,
        xor: u8,
    },
    /// The part cut to `at` (modulo its length) bytes.
    Truncate {
        part: Part,
        at: usize,
    },
    Append {
        part: Part,
        bytes: Vec<u8>,
    },
    /// `fuse_in_header.len`.
    Len(u32),
    Opcode(u32),
    Node(u64),
    /// `fuse_uring_ent_in_out.payload_sz` (on a queue only).
    PayloadSize(u32),
    /// The last NUL of the arguments removed.
    DropNul,
}

/// A request as the kernel lays it out: `struct fuse_in_header`, the
/// opcode's header, and the rest of the arguments; on a queue, also the
/// payload size the kernel gives.
#[derive(Debug, Clone)]
struct Frame {
    header: Vec<u8>,
    op_in: Vec<u8>,
    args: Vec<u8>,
    payload_sz: Option<u32>,
}

impl Frame {
    fn new(
        opcode: u32,
        unique: u64,
        node: u64,
        (uid, gid, pid): (u32, u32, u32),
        op_in: Vec<u8>,
        args: Vec<u8>,
    ) -> Frame {
        let len = (IN_HEADER + op_in.len() + args.len()) as u32;
        // len, opcode, unique, nodeid, uid, gid, pid, total_extlen and padding.
        let header = Le::default().u32(len).u32(opcode).u64(unique).u64(node).u32(uid).u32(gid).u32(pid).u32(0).0;
        debug_assert_eq!(header.len(), IN_HEADER);
        Frame { header, op_in, args, payload_sz: None }
    }

    fn part(&mut self, part: Part) -> &mut Vec<u8> {
        match part {
            Part::Header => &mut self.header,
            Part::OpIn => &mut self.op_in,
            Part::Args => &mut self.args,
        }
    }

    fn set(&mut self, at: usize, bytes: &[u8]) {
        if let Some(field) = self.header.get_mut(at..at + bytes.len()) {
            field.copy_from_slice(bytes);
        }
    }

    fn apply(&mut self, mutation: &Mutation) {
        match *mutation {
            Mutation::Flip { part, at, xor } => {
                let bytes = self.part(part);
                if !bytes.is_empty() {
                    let at = at % bytes.len();
                    bytes[at] ^= xor;
                }
            }
            Mutation::Truncate { part, at } => {
                let bytes = self.part(part);
                if !bytes.is_empty() {
                    let keep = at % bytes.len();
                    bytes.truncate(keep);
                }
            }
            Mutation::Append { part, ref bytes } => self.part(part).extend_from_slice(bytes),
            Mutation::Len(len) => self.set(0, &len.to_le_bytes()),
            Mutation::Opcode(opcode) => self.set(4, &opcode.to_le_bytes()),
            Mutation::Node(node) => self.set(16, &node.to_le_bytes()),
            Mutation::PayloadSize(size) => self.payload_sz = Some(size),
            Mutation::DropNul => {
                if let Some(at) = self.args.iter().rposition(|&b| b == 0) {
                    self.args.remove(at);
                }
            }
        }
    }

    /// As a `/dev/fuse` read returns it.
    fn device(&self) -> Vec<u8> {
        [&self.header[..], &self.op_in, &self.args].concat()
    }

    /// A queue slot's headers (`struct fuse_uring_req_header`); the
    /// arguments go in its payload.
    fn slot(&self, commit_id: u64) -> Vec<u8> {
        let mut headers = vec![0; HEADERS];
        let n = self.header.len().min(OP_IN);
        headers[..n].copy_from_slice(&self.header[..n]);
        let n = self.op_in.len().min(ENT_IN_OUT - OP_IN);
        headers[OP_IN..OP_IN + n].copy_from_slice(&self.op_in[..n]);
        headers[ENT_IN_OUT + 8..ENT_IN_OUT + 16].copy_from_slice(&commit_id.to_le_bytes());
        let payload_sz = self.payload_sz.unwrap_or(self.args.len() as u32);
        headers[ENT_IN_OUT + 16..ENT_IN_OUT + 20].copy_from_slice(&payload_sz.to_le_bytes());
        headers
    }

    /// The arguments a queue's parser sees in a payload buffer of `room`.
    fn args_seen(&self, room: usize) -> usize {
        self.args.len().min(self.payload_sz.map_or(usize::MAX, |n| n as usize)).min(room)
    }
}

/// The error a request must get on a queue, where the test can tell: an
/// opcode the queues do not serve is ENOSYS; arguments that a single
/// mutation cut short (`before` to `after`) are EINVAL.
fn expected_error(spec: &Spec, mutations: &[Mutation], before: &Frame, after: &Frame, room: usize) -> Option<Errno> {
    match mutations {
        [] if !SERVED.contains(&spec.opcode()) => Some(Errno::ENOSYS),
        [Mutation::Opcode(opcode)] if !SERVED.contains(opcode) => Some(Errno::ENOSYS),
        [Mutation::DropNul | Mutation::Truncate { part: Part::Args, .. } | Mutation::PayloadSize(_)]
            if SERVED.contains(&spec.opcode())
                && spec.needs_whole_args()
                && after.args_seen(room) < before.args_seen(room) =>
        {
            Some(Errno::EINVAL)
        }
        _ => None,
    }
}

/// What `wire::forgets` must make of a device message, written out from
/// `struct fuse_forget_in` and `struct fuse_batch_forget_in` independently
/// of it: the whole entries of a body cut short; `None` for another
/// request (or one too short to have a header).
fn reference_forgets(msg: &[u8]) -> Option<Vec<(u64, u64)>> {
    if msg.len() < IN_HEADER {
        return None;
    }
    let body = &msg[IN_HEADER..];
    match u32_at(msg, 4) {
        FORGET if body.len() >= 8 => Some(vec![(u64_at(msg, 16), u64_at(body, 0))]),
        BATCH_FORGET if body.len() >= 8 => {
            let count = u32_at(body, 0) as usize;
            Some(body[8..].chunks_exact(16).take(count).map(|e| (u64_at(e, 0), u64_at(e, 8))).collect())
        }
        FORGET | BATCH_FORGET => Some(Vec::new()),
        _ => None,
    }
}

/// A queue's answer.
#[derive(Debug)]
struct Reply {
    /// `fuse_out_header.error`: 0 or a negative errno.
    error: i32,
    body: Vec<u8>,
}

/// Where record locks live, whether the VFS has tight size and inode
/// limits (or only a roomy size limit), and whether it is of the "before"
/// designs ([`VfsConfig::before`]).
#[derive(Debug, Clone, Copy)]
struct Setup {
    locks: RecordLocks,
    tight: bool,
    before: bool,
}

/// One step of a case.
#[derive(Debug, Clone)]
enum Step {
    /// A request from its fields, from `(uid, gid, pid)`, mutated, in a
    /// payload buffer of `room` if it goes to a queue; `swap` sends it
    /// where the kernel would not.
    Request {
        spec: Spec,
        node: NodeRef,
        who: (u32, u32, u32),
        unique: u64,
        swap: bool,
        mutations: Vec<Mutation>,
        room: usize,
    },
    /// Any slot headers and payload.
    RawSlot { headers: Vec<u8>, payload: Vec<u8>, room: usize },
    /// Any bytes read from the device.
    RawDevice(Vec<u8>),
}

/// A served VFS with a queue and a forget drain, and the kernel's side of
/// it: the test's end of the socket pair the drain reads as its device,
/// and the lookups and handles the replies gave.
struct Rig {
    vfs: Vfs,
    fs: Arc<Server>,
    drain: Arc<Drain>,
    /// Where the test writes what the drain reads, and reads its answers.
    kernel: OwnedFd,
    /// Lookups the kernel holds, by node id.
    lookups: BTreeMap<u64, u64>,
    /// Handles opened and not released.
    handles: Vec<u64>,
    next_unique: u64,
    /// The VFS before the case, which cleaning up must give back.
    initial: FsStats,
}

impl Rig {
    fn new(setup: Setup) -> Rig {
        let design = if setup.before { VfsConfig::before() } else { VfsConfig::default() };
        // Always a size limit: without one (the mount's default) the VFS
        // gives a FALLOCATE of an exabyte all the memory there is, as
        // tmpfs would without its default limit of half of it.
        let (size_limit, inode_limit) = if setup.tight { (16 * 4096, 24) } else { (8 << 20, 0) };
        // A small dentry hash: the default's 2 MiB table took most of a
        // case to make and to count in a debug build.
        let vfs = Vfs::new(VfsConfig { size_limit, inode_limit, dcache_buckets: 1 << 10, ..design });
        let options = MountOptions { locks: setup.locks, ..MountOptions::default() };
        let fs = Server::new(vfs.clone(), false, OpenPolicy::new(&options), Duration::ZERO).expect("a server");
        let mut fds = [0; 2];
        // SAFETY: `fds` is a live array of the two ints socketpair fills;
        // the result is checked.
        let made = unsafe {
            libc::socketpair(
                libc::AF_UNIX,
                libc::SOCK_SEQPACKET | libc::SOCK_NONBLOCK | libc::SOCK_CLOEXEC,
                0,
                fds.as_mut_ptr(),
            )
        };
        assert_eq!(made, 0, "socketpair: {}", std::io::Error::last_os_error());
        // SAFETY: socketpair just made both descriptors, which nothing
        // else owns.
        let (kernel, device) = unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) };
        let initial = vfs.statfs();
        Rig {
            vfs,
            fs: Arc::new(fs),
            drain: Arc::new(Drain::on(device, DRAIN_MAX_WRITE)),
            kernel,
            lookups: BTreeMap::new(),
            handles: Vec::new(),
            next_unique: 1,
            initial,
        }
    }

    fn node(&self, node: NodeRef) -> u64 {
        match node {
            NodeRef::Root => ROOT,
            NodeRef::Known(_) if self.lookups.is_empty() => ROOT,
            NodeRef::Known(i) => *self.lookups.keys().nth(i % self.lookups.len()).expect("in range"),
            NodeRef::Raw(id) => id,
        }
    }

    fn fh(&self, fh: FhRef) -> u64 {
        match fh {
            FhRef::Zero => 0,
            FhRef::Known(_) if self.handles.is_empty() => 0,
            FhRef::Known(i) => self.handles[i % self.handles.len()],
            FhRef::Raw(fh) => fh,
        }
    }

    fn count(&self, node: u64, count: Count) -> u64 {
        match count {
            Count::All => self.lookups.get(&node).copied().unwrap_or(1),
            Count::One => 1,
            Count::Raw(n) => n,
        }
    }

    /// The opcode's header and the arguments of `spec`.
    fn parts(&self, spec: &Spec) -> (Vec<u8>, Vec<u8>) {
        let none = Vec::new;
        match spec {
            Spec::Lookup(name) | Spec::Unlink(name) | Spec::Rmdir(name) | Spec::Removexattr(name) => {
                (none(), Le::default().name(name).0)
            }
            Spec::Getattr(fh) => {
                let fh = self.fh(*fh);
                (Le::default().u32(u32::from(fh != 0)).u32(0).u64(fh).0, none())
            }
            Spec::Setattr(s) => {
                let head = Le::default().u32(s.valid).u32(0).u64(self.fh(s.fh)).u64(s.size).u64(0);
                let head = head.u64(s.atime).u64(s.mtime).u64(0).u32(s.atimensec).u32(s.mtimensec).u32(0);
                (head.u32(s.mode).u32(0).u32(s.uid).u32(s.gid).u32(0).0, none())
            }
            Spec::Readlink | Spec::Statfs | Spec::Destroy => (none(), none()),
            Spec::Symlink { name, target } => (none(), Le::default().name(name).name(target).0),
            Spec::Mknod { mode, rdev, name } => {
                (Le::default().u32(*mode).u32(*rdev).u32(0o022).u32(0).0, Le::default().name(name).0)
            }
            Spec::Mkdir { mode, name } => (Le::default().u32(*mode).u32(0o022).0, Le::default().name(name).0),
            Spec::Rename { newdir, flags, name, newname } => {
                let head = Le::default().u64(self.node(*newdir));
                let head = match flags {
                    Some(flags) => head.u32(*flags).u32(0),
                    None => head,
                };
                (head.0, Le::default().name(name).name(newname).0)
            }
            Spec::Link { target, newname } => (Le::default().u64(self.node(*target)).0, Le::default().name(newname).0),
            Spec::Open { flags, .. } => (Le::default().u32(*flags).u32(0).0, none()),
            Spec::Read { fh, offset, size, .. } => {
                (Le::default().u64(self.fh(*fh)).u64(*offset).u32(*size).u32(0).u64(0).u32(0).u32(0).0, none())
            }
            Spec::Write { fh, offset, data } => {
                let head = Le::default().u64(self.fh(*fh)).u64(*offset).u32(data.len() as u32).u32(0);
                (head.u64(0).u32(0).u32(0).0, data.clone())
            }
            Spec::Release { fh, release_flags, lock_owner, .. } => {
                (Le::default().u64(self.fh(*fh)).u32(0).u32(*release_flags).u64(*lock_owner).0, none())
            }
            Spec::Fsync { fh, .. } => (Le::default().u64(self.fh(*fh)).u32(0).u32(0).0, none()),
            Spec::Setxattr { name, value, flags } => {
                let head = Le::default().u32(value.len() as u32).u32(*flags).u32(0).u32(0).0;
                (head, Le::default().name(name).raw(value).0)
            }
            Spec::Getxattr { name, size } => (Le::default().u32(*size).u32(0).0, Le::default().name(name).0),
            Spec::Listxattr(size) => (Le::default().u32(*size).u32(0).0, none()),
            Spec::Flush { fh, lock_owner } => {
                (Le::default().u64(self.fh(*fh)).u32(0).u32(0).u64(*lock_owner).0, none())
            }
            Spec::Access(mask) => (Le::default().u32(*mask).u32(0).0, none()),
            Spec::Create { flags, mode, name } => {
                (Le::default().u32(*flags).u32(*mode).u32(0o022).u32(0).0, Le::default().name(name).0)
            }
            Spec::Interrupt(unique) => (Le::default().u64(*unique).0, none()),
            Spec::Fallocate { fh, offset, length, mode } => {
                (Le::default().u64(self.fh(*fh)).u64(*offset).u64(*length).u32(*mode).u32(0).0, none())
            }
            Spec::Lseek { fh, offset, whence } => {
                (Le::default().u64(self.fh(*fh)).u64(*offset).u32(*whence).u32(0).0, none())
            }
            // The node is the header's; see `frame`.
            Spec::Forget(_) => (none(), none()),
            Spec::BatchForget { count, forgets } => {
                let mut entries = Le::default();
                for &(node, n) in forgets {
                    let node = self.node(node);
                    entries = entries.u64(node).u64(self.count(node, n));
                }
                (Le::default().u32(count.unwrap_or(forgets.len() as u32)).u32(0).0, entries.0)
            }
            Spec::Init { minor, flags, flags2 } => {
                let head = Le::default().u32(7).u32(*minor).u32(128 * 1024).u32(*flags).u32(*flags2);
                (head.raw(&[0; 44]).0, none())
            }
            Spec::Other { op_in, args, .. } => (op_in.clone(), args.clone()),
        }
    }

    /// `spec` on `node` as the kernel would send it.
    fn frame(&self, spec: &Spec, node: NodeRef, who: (u32, u32, u32), unique: u64) -> Frame {
        let node = self.node(node);
        let (mut op_in, args) = self.parts(spec);
        if let Spec::Forget(count) = spec {
            op_in = Le::default().u64(self.count(node, *count)).0;
        }
        Frame::new(spec.opcode(), unique, node, who, op_in, args)
    }

    fn run(&mut self, step: &Step) -> Result<(), TestCaseError> {
        match step {
            Step::Request { spec, node, who, unique, swap, mutations, room } => {
                let valid = self.frame(spec, *node, *who, *unique);
                let mut frame = valid.clone();
                for mutation in mutations {
                    frame.apply(mutation);
                }
                let to_device = matches!(spec.opcode(), FORGET | BATCH_FORGET | INTERRUPT) != *swap;
                if to_device {
                    return self.device(&frame.device());
                }
                let reply = self.queue(&frame.slot(*unique), &frame.args, *room)?;
                if let Some(want) = expected_error(spec, mutations, &valid, &frame, *room) {
                    prop_assert_eq!(reply.error, -want.raw(), "{:?} got {:?}", frame, reply);
                }
                Ok(())
            }
            Step::RawSlot { headers, payload, room } => self.queue(headers, payload, *room).map(drop),
            Step::RawDevice(msg) => self.device(msg),
        }
    }

    /// Answers a slot through `Queue::answer`, checks the answer's framing
    /// and layout, and learns the nodes and handles it gives.
    fn queue(&mut self, headers: &[u8], payload: &[u8], room: usize) -> Result<Reply, TestCaseError> {
        let mut slot = headers.to_vec();
        slot.resize(HEADERS, 0);
        let (opcode, unique) = (u32_at(&slot, 4), u64_at(&slot, 8));
        let panics = panics_here();
        let answered = detached::answer(&self.fs, Some(Arc::clone(&self.drain)), headers, payload, room);
        prop_assert_eq!(panics_here(), panics, "a handler panicked (the queue answered EIO)");
        if let Some(dir) = answered.then_tidy {
            self.fs.hand_on_releases(dir);
        }
        let out = &answered.headers;
        let (len, error, payload_sz) = (u32_at(out, 0) as usize, i32_at(out, 4), u32_at(out, ENT_IN_OUT + 16) as usize);
        prop_assert_eq!(answered.commit_id, u64_at(&slot, ENT_IN_OUT + 8), "the commit id is the slot's");
        prop_assert_eq!(u64_at(out, 8), unique, "the reply names its request");
        prop_assert!(payload_sz <= room, "a reply of {} bytes in a payload buffer of {}", payload_sz, room);
        prop_assert_eq!(len, OUT_HEADER + payload_sz, "fuse_out_header.len");
        prop_assert!(
            out[OUT_HEADER..ENT_IN_OUT + 16] == slot[OUT_HEADER..ENT_IN_OUT + 16]
                && out[ENT_IN_OUT + 20..] == slot[ENT_IN_OUT + 20..],
            "the answer wrote past the out header and the payload size"
        );
        if error != 0 {
            prop_assert!(error < 0 && known_errno(-error), "error {} for opcode {}", error, opcode);
            prop_assert_eq!(payload_sz, 0, "an error with a payload");
        }
        let reply = Reply { error, body: answered.payload[..payload_sz].to_vec() };
        if error == 0 {
            self.learn(opcode, &slot[OP_IN..ENT_IN_OUT], &reply.body)?;
        }
        Ok(reply)
    }

    /// Checks a success reply's layout against its opcode (whose header
    /// was `op_in`), and records the nodes and handles it gives.
    fn learn(&mut self, opcode: u32, op_in: &[u8], body: &[u8]) -> Result<(), TestCaseError> {
        match opcode {
            LOOKUP | MKNOD | MKDIR | SYMLINK | LINK | CREATE => {
                prop_assert_eq!(body.len(), if opcode == CREATE { ENTRY_OUT + OPEN_OUT } else { ENTRY_OUT });
                let node = u64_at(body, 0);
                if node == 0 {
                    prop_assert_eq!(opcode, LOOKUP, "only a lookup answers a negative entry");
                } else {
                    prop_assert_eq!(u64_at(body, 40), node, "fuse_attr.ino is the entry's node");
                }
                if node != 0 && node != ROOT {
                    *self.lookups.entry(node).or_default() += 1;
                }
                if opcode == CREATE && u64_at(body, ENTRY_OUT) != 0 {
                    self.handles.push(u64_at(body, ENTRY_OUT));
                }
            }
            GETATTR | SETATTR => prop_assert_eq!(body.len(), ATTR_OUT),
            OPEN | OPENDIR => {
                prop_assert_eq!(body.len(), OPEN_OUT);
                self.handles.push(u64_at(body, 0));
            }
            WRITE => {
                prop_assert_eq!(body.len(), 8);
                prop_assert!(u32_at(body, 0) <= u32_at(op_in, 16), "wrote more than was sent");
            }
            STATFS => prop_assert_eq!(body.len(), 80),
            LSEEK => prop_assert_eq!(body.len(), 8),
            GETXATTR | LISTXATTR => match u32_at(op_in, 0) {
                0 => prop_assert_eq!(body.len(), 8, "a size asked with size 0"),
                size => prop_assert!(body.len() <= size as usize, "{} bytes for a buffer of {}", body.len(), size),
            },
            READ => prop_assert!(body.len() <= u32_at(op_in, 16) as usize, "read more than asked"),
            READDIR => {
                prop_assert!(body.len() <= u32_at(op_in, 16) as usize, "listed more than asked");
                let mut at = 0;
                while at < body.len() {
                    prop_assert!(body.len() - at >= 24, "a dirent cut short");
                    let namelen = u32_at(body, at + 16) as usize;
                    prop_assert!(namelen > 0 && at + ((24 + namelen + 7) & !7) <= body.len(), "a bad dirent");
                    at += (24 + namelen + 7) & !7;
                }
            }
            READLINK => {}
            RELEASE | RELEASEDIR => {
                prop_assert!(body.is_empty());
                let fh = u64_at(op_in, 0);
                self.handles.retain(|&h| h != fh);
            }
            UNLINK | RMDIR | RENAME | RENAME2 | FSYNC | FSYNCDIR | SETXATTR | REMOVEXATTR | FLUSH | ACCESS
            | DESTROY | FALLOCATE => prop_assert!(body.is_empty(), "a payload for opcode {}", opcode),
            _ => prop_assert!(false, "opcode {} is not served, but was answered with success", opcode),
        }
        Ok(())
    }

    /// Whether the kernel could send `forgets`: it never forgets more
    /// lookups of a node than it was given (`Nodes::forget` asserts that
    /// in debug builds), so a message that would is not sent.
    fn may_forget(&self, forgets: &[(u64, u64)]) -> bool {
        let mut lookups = self.lookups.clone();
        forgets.iter().all(|&(node, n)| match lookups.get_mut(&node) {
            Some(held) if *held < n => false,
            Some(held) => {
                *held -= n;
                if *held == 0 {
                    lookups.remove(&node);
                }
                true
            }
            None => true,
        })
    }

    /// Hands `msg` to the drain as a read of the device, and checks what
    /// it answered: nothing to a forget, an interrupt or what has no
    /// header, EIO to anything else.
    fn device(&mut self, msg: &[u8]) -> Result<(), TestCaseError> {
        // A read of the device is never empty (and an empty message reads
        // as the end of the socket).
        if msg.is_empty() {
            return Ok(());
        }
        let header = InHeader::parse(msg);
        prop_assert_eq!(header.is_ok(), msg.len() >= IN_HEADER, "the in header parsed from {} bytes", msg.len());
        let forgets = reference_forgets(msg);
        if let Ok(h) = header {
            prop_assert_eq!((h.opcode, h.unique, h.node), (u32_at(msg, 4), u64_at(msg, 8), u64_at(msg, 16)));
            prop_assert_eq!(wire::forgets(&h, &msg[IN_HEADER..]), forgets.clone(), "the forgets of {:?}", msg);
        }
        if forgets.as_deref().is_some_and(|f| !self.may_forget(f)) {
            return Ok(());
        }
        // SAFETY: `msg` is a live slice of the length passed, and the
        // descriptor is the rig's own.
        let sent = unsafe { libc::send(self.kernel.as_raw_fd(), msg.as_ptr().cast(), msg.len(), libc::MSG_NOSIGNAL) };
        prop_assert_eq!(sent, msg.len() as isize, "send: {}", std::io::Error::last_os_error());
        self.drain.drain_all(&self.fs, false);
        let replies = self.replies();
        let answered = msg.len() >= IN_HEADER && !matches!(u32_at(msg, 4), FORGET | BATCH_FORGET | INTERRUPT);
        if answered {
            let eio = Le::default().u32(OUT_HEADER as u32).u32(-libc::EIO as u32).u64(u64_at(msg, 8)).0;
            prop_assert_eq!(replies, vec![eio], "the drain's answer to opcode {}", u32_at(msg, 4));
        } else {
            prop_assert!(replies.is_empty(), "the drain answered {:?}", replies);
        }
        for (node, n) in forgets.unwrap_or_default() {
            if let Some(held) = self.lookups.get_mut(&node) {
                *held -= n;
                if *held == 0 {
                    self.lookups.remove(&node);
                }
            }
        }
        Ok(())
    }

    /// What the drain has written to the device since the last call.
    fn replies(&self) -> Vec<Vec<u8>> {
        let mut replies = Vec::new();
        let mut buffer = [0u8; 4096];
        loop {
            // SAFETY: the buffer is a live local of the length passed.
            let n = unsafe { libc::read(self.kernel.as_raw_fd(), buffer.as_mut_ptr().cast(), buffer.len()) };
            match usize::try_from(n) {
                Ok(n) if n > 0 => replies.push(buffer[..n].to_vec()),
                _ => return replies,
            }
        }
    }

    /// A request from root, on a queue with the ring's payload buffer.
    fn call(&mut self, opcode: u32, node: u64, op_in: Vec<u8>, args: Vec<u8>) -> Result<Reply, TestCaseError> {
        let unique = self.next_unique;
        self.next_unique += 1;
        let frame = Frame::new(opcode, unique, node, (0, 0, std::process::id()), op_in, args);
        self.queue(&frame.slot(unique), &frame.args, RING_PAYLOAD)
    }

    /// Releases every handle and forgets every node the kernel holds;
    /// then the server must know none of them.
    fn let_go(&mut self) -> Result<(), TestCaseError> {
        for fh in self.handles.clone() {
            let reply = self.call(RELEASE, ROOT, Le::default().u64(fh).u32(0).u32(0).u64(0).0, Vec::new())?;
            prop_assert_eq!(reply.error, 0);
        }
        prop_assert!(self.handles.is_empty());
        let held: Vec<(u64, u64)> = self.lookups.iter().map(|(&node, &n)| (node, n)).collect();
        let entries = held.iter().fold(Le::default(), |e, &(node, n)| e.u64(node).u64(n));
        let batch = Frame::new(BATCH_FORGET, 0, 0, (0, 0, 0), Le::default().u32(held.len() as u32).u32(0).0, entries.0);
        self.device(&batch.device())?;
        prop_assert!(self.lookups.is_empty(), "left after the batch: {:?}", self.lookups);
        for (node, _) in held {
            let reply = self.call(GETATTR, node, vec![0; 16], Vec::new())?;
            prop_assert_eq!(reply.error, -libc::ESTALE, "node {} outlived its forget", node);
        }
        Ok(())
    }

    /// Removes everything below the root and the root's xattrs, through
    /// the VFS, and runs the releases that frees (until then the space of
    /// an unlinked file is still taken: a write that needs it fails).
    fn empty(&self) -> Result<(), TestCaseError> {
        let p = self.vfs.process(Credentials::root());
        let emptied = empty_cwd(&p).and_then(|()| {
            let mut names = vec![0; 64 * 1024];
            let n = p.listxattr("/", &mut names)?;
            names[..n].split(|&b| b == 0).filter(|x| !x.is_empty()).try_for_each(|name| p.removexattr("/", name))
        });
        prop_assert_eq!(emptied, Ok(()), "emptying the tree");
        prop_assert!(self.vfs.drop_caches(SETTLE), "the VFS's releases did not run");
        Ok(())
    }

    /// Then the VFS must be as it was before the case.
    fn compare(&self) -> Result<(), TestCaseError> {
        let (now, then) = (self.vfs.statfs(), &self.initial);
        prop_assert_eq!(
            (now.inodes, now.bytes, now.blocks_used, now.blocks_free, now.files_free),
            (then.inodes, then.bytes, then.blocks_used, then.blocks_free, then.files_free),
            "the VFS kept something of the case"
        );
        Ok(())
    }

    /// After a case: the root still stats; what the kernel held can be
    /// let go of and the tree emptied; a directory and a file can be made,
    /// written and removed, through the VFS and through a queue; and then
    /// nothing of the case is left.
    fn check(&mut self) -> Result<(), TestCaseError> {
        let root = self.call(GETATTR, ROOT, vec![0; 16], Vec::new())?;
        prop_assert_eq!(root.error, 0, "GETATTR of the root");
        prop_assert_eq!(u32_at(&root.body, 16 + 60) & libc::S_IFMT, libc::S_IFDIR, "the root's mode");
        let p = self.vfs.process(Credentials::root());
        prop_assert!(p.stat("/").is_ok_and(|st| FileType::from_mode(st.mode) == Some(FileType::Directory)));
        self.let_go()?;
        self.empty()?;

        let made = (|| -> VfsResult<()> {
            p.mkdir("/after", 0o755)?;
            let fd = p.open("/after/f", OpenFlags::CREAT | OpenFlags::RDWR, 0o644)?;
            p.write(fd, b"hello")?;
            p.close(fd)?;
            p.unlink("/after/f")?;
            p.rmdir("/after")
        })();
        prop_assert_eq!(made, Ok(()), "through the VFS");

        let dir = self.call(MKDIR, ROOT, Le::default().u32(0o755).u32(0).0, Le::default().name(b"after").0)?;
        prop_assert_eq!(dir.error, 0, "MKDIR");
        let dir = u64_at(&dir.body, 0);
        let create_in = Le::default().u32(libc::O_RDWR as u32).u32(libc::S_IFREG | 0o644).u32(0).u32(0).0;
        let file = self.call(CREATE, dir, create_in, Le::default().name(b"f").0)?;
        prop_assert_eq!(file.error, 0, "CREATE");
        let (node, fh) = (u64_at(&file.body, 0), u64_at(&file.body, ENTRY_OUT));
        let write_in = Le::default().u64(fh).u64(0).u32(5).u32(0).u64(0).u32(0).u32(0).0;
        let written = self.call(WRITE, node, write_in, b"hello".to_vec())?;
        prop_assert_eq!((written.error, u32_at(&written.body, 0)), (0, 5), "WRITE");
        prop_assert_eq!(self.call(UNLINK, dir, Vec::new(), Le::default().name(b"f").0)?.error, 0, "UNLINK");
        prop_assert_eq!(self.call(RMDIR, ROOT, Vec::new(), Le::default().name(b"after").0)?.error, 0, "RMDIR");
        self.let_go()?;
        self.empty()?;
        self.compare()
    }
}

/// Removes everything in the working directory (by relative names, so no
/// path grows past `PATH_MAX`).
fn empty_cwd(p: &Process) -> VfsResult<()> {
    for entry in p.list_dir(".")? {
        if entry.name == b"." || entry.name == b".." {
            continue;
        }
        if entry.file_type == FileType::Directory {
            p.chdir(&entry.name)?;
            empty_cwd(p)?;
            p.chdir("..")?;
            p.rmdir(&entry.name)?;
        } else {
            p.unlink(&entry.name)?;
        }
    }
    Ok(())
}

/// Runs `steps` on a fresh rig, then its checks.
fn run_case(setup: Setup, steps: &[Step]) -> Result<(), TestCaseError> {
    let mut rig = Rig::new(setup);
    for step in steps {
        rig.run(step)?;
    }
    rig.check()
}

// ---- strategies ----------------------------------------------------------

fn name() -> impl Strategy<Value = Vec<u8>> {
    let odd = vec![".", "..", "", "/", "a/b", "/a", "a/..", "b/c", "a\0b"];
    prop_oneof![
        8 => select(vec!["a", "b", "c", "d"]).prop_map(|s| s.as_bytes().to_vec()),
        3 => select(odd).prop_map(|s| s.as_bytes().to_vec()),
        1 => Just(vec![b'n'; 255]),
        1 => Just(vec![b'n'; 256]),
        2 => prop::collection::vec(any::<u8>(), 0..12),
    ]
}

fn xattr_name() -> impl Strategy<Value = Vec<u8>> {
    let names = vec!["user.a", "user.b", "trusted.t", "security.s", "system.posix_acl_access", "user.", "", "bad.x"];
    prop_oneof![
        6 => select(names).prop_map(|s| s.as_bytes().to_vec()),
        1 => Just([&b"user."[..], &[b'x'; 251]].concat()),
        1 => prop::collection::vec(any::<u8>(), 0..12),
    ]
}

fn data() -> impl Strategy<Value = Vec<u8>> {
    prop_oneof![
        6 => prop::collection::vec(any::<u8>(), 0..64),
        1 => (1..=4096usize, any::<u8>()).prop_map(|(n, b)| vec![b; n]),
    ]
}

/// Sizes the kernel asks for: small, at the edges of pages and buffers,
/// or any (up to 4 GiB: the handlers allocate it, lazily).
fn size() -> impl Strategy<Value = u32> {
    prop_oneof![
        6 => 0..=64u32,
        3 => select(vec![0, 1, 24, 4095, 4096, 4097, 65536, 1 << 20, (1 << 20) + 1]),
        1 => any::<u32>(),
    ]
}

fn offsets() -> impl Strategy<Value = u64> {
    let edges = vec![4096, 1 << 20, 1 << 40, i64::MAX as u64, i64::MAX as u64 + 1, u64::MAX - 1, u64::MAX];
    prop_oneof![6 => 0..10_000u64, 2 => select(edges), 1 => any::<u64>()]
}

/// Seconds as `fuse_setattr_in` carries them (signed, in a u64).
fn seconds() -> impl Strategy<Value = u64> {
    let edges = vec![0, i64::MAX as u64, i64::MIN as u64, u64::MAX, i64::MAX as u64 - 1, 1 << 62];
    prop_oneof![4 => 0..4_000_000_000u64, 2 => select(edges), 1 => any::<u64>()]
}

fn nanoseconds() -> impl Strategy<Value = u32> {
    prop_oneof![4 => 0..1_000_000_000u32, 1 => select(vec![999_999_999, 1_000_000_000, u32::MAX]), 1 => any::<u32>()]
}

fn mode() -> impl Strategy<Value = u32> {
    let modes = vec![
        libc::S_IFREG | 0o644,
        libc::S_IFDIR | 0o755,
        libc::S_IFIFO | 0o600,
        libc::S_IFCHR | 0o600,
        libc::S_IFBLK | 0o600,
        libc::S_IFSOCK | 0o600,
        libc::S_IFLNK | 0o777,
        libc::S_IFREG | 0o4755,
        0o7777,
        0,
    ];
    prop_oneof![4 => select(modes), 1 => any::<u32>()]
}

fn open_flags() -> impl Strategy<Value = u32> {
    let extra = vec![
        libc::O_TRUNC,
        libc::O_APPEND,
        libc::O_EXCL,
        libc::O_DIRECTORY,
        libc::O_NOFOLLOW,
        libc::O_NONBLOCK,
        libc::O_PATH,
        libc::O_TMPFILE,
        libc::O_CLOEXEC,
    ];
    let composed = (0..3i32, prop::collection::vec(select(extra), 0..3))
        .prop_map(|(access, extra)| extra.into_iter().fold(access, |all, f| all | f) as u32);
    prop_oneof![4 => composed, 1 => any::<u32>()]
}

fn node_ref() -> impl Strategy<Value = NodeRef> {
    let odd = vec![0, 2, 3, u64::MAX, 1 << 56, (1 << 56) | 1, (1 << 56) - 1];
    prop_oneof![
        4 => Just(NodeRef::Root),
        6 => any::<usize>().prop_map(NodeRef::Known),
        1 => select(odd).prop_map(NodeRef::Raw),
        1 => any::<u64>().prop_map(NodeRef::Raw),
    ]
}

fn fh_ref() -> impl Strategy<Value = FhRef> {
    prop_oneof![
        4 => Just(FhRef::Zero),
        4 => any::<usize>().prop_map(FhRef::Known),
        1 => (1..4u64).prop_map(FhRef::Raw),
        1 => any::<u64>().prop_map(FhRef::Raw),
    ]
}

fn count() -> impl Strategy<Value = Count> {
    prop_oneof![4 => Just(Count::All), 2 => Just(Count::One), 1 => Just(Count::Raw(0)), 1 => any::<u64>().prop_map(Count::Raw)]
}

/// `(uid, gid, pid)`: mostly root, sometimes a user, sometimes anyone.
fn who() -> impl Strategy<Value = (u32, u32, u32)> {
    let id = || prop_oneof![4 => Just(0u32), 1 => Just(1000), 1 => Just(65534), 1 => any::<u32>()];
    let pid = prop_oneof![Just(0u32), Just(std::process::id()), Just(1), any::<u32>()];
    (id(), id(), pid)
}

fn setattr() -> impl Strategy<Value = SetattrIn> {
    // FATTR_MODE, UID, GID, SIZE, ATIME, MTIME, FH, ATIME_NOW, MTIME_NOW, CTIME.
    let bits = vec![1 << 0, 1 << 1, 1 << 2, 1 << 3, 1 << 4, 1 << 5, 1 << 6, 1 << 7, 1 << 8, 1 << 10];
    let valid = prop_oneof![
        4 => prop::collection::vec(select(bits), 0..4).prop_map(|b| b.into_iter().fold(0, |all, bit| all | bit)),
        1 => any::<u32>(),
    ];
    let id = prop_oneof![Just(0u32), Just(1000), Just(u32::MAX), any::<u32>()];
    (valid, fh_ref(), offsets(), seconds(), seconds(), nanoseconds(), nanoseconds(), mode(), id.clone(), id).prop_map(
        |(valid, fh, size, atime, mtime, atimensec, mtimensec, mode, uid, gid)| SetattrIn {
            valid,
            fh,
            size,
            atime,
            mtime,
            atimensec,
            mtimensec,
            mode,
            uid,
            gid,
        },
    )
}

fn spec() -> impl Strategy<Value = Spec> {
    let rdev = prop_oneof![Just(0u32), Just(0x0801), any::<u32>()];
    let access = prop_oneof![0..8u32, any::<u32>()];
    let whence = prop_oneof![0..6u32, any::<u32>()];
    let opcode = prop_oneof![0..=53u32, Just(4096), any::<u32>()];
    prop_oneof![
        6 => name().prop_map(Spec::Lookup),
        2 => fh_ref().prop_map(Spec::Getattr),
        4 => setattr().prop_map(Spec::Setattr),
        1 => Just(Spec::Readlink),
        2 => (name(), name()).prop_map(|(name, target)| Spec::Symlink { name, target }),
        2 => (mode(), rdev, name()).prop_map(|(mode, rdev, name)| Spec::Mknod { mode, rdev, name }),
        4 => (mode(), name()).prop_map(|(mode, name)| Spec::Mkdir { mode, name }),
        2 => name().prop_map(Spec::Unlink),
        2 => name().prop_map(Spec::Rmdir),
        3 => (node_ref(), prop::option::of(prop_oneof![0..8u32, any::<u32>()]), name(), name())
            .prop_map(|(newdir, flags, name, newname)| Spec::Rename { newdir, flags, name, newname }),
        2 => (node_ref(), name()).prop_map(|(target, newname)| Spec::Link { target, newname }),
        3 => (any::<bool>(), open_flags()).prop_map(|(dir, flags)| Spec::Open { dir, flags }),
        3 => (any::<bool>(), fh_ref(), offsets(), size())
            .prop_map(|(dir, fh, offset, size)| Spec::Read { dir, fh, offset, size }),
        4 => (fh_ref(), offsets(), data()).prop_map(|(fh, offset, data)| Spec::Write { fh, offset, data }),
        1 => Just(Spec::Statfs),
        2 => (any::<bool>(), fh_ref(), prop_oneof![Just(0u32), Just(2), any::<u32>()], any::<u64>())
            .prop_map(|(dir, fh, release_flags, lock_owner)| Spec::Release { dir, fh, release_flags, lock_owner }),
        1 => (any::<bool>(), fh_ref()).prop_map(|(dir, fh)| Spec::Fsync { dir, fh }),
        3 => (xattr_name(), data(), prop_oneof![0..4u32, any::<u32>()])
            .prop_map(|(name, value, flags)| Spec::Setxattr { name, value, flags }),
        2 => (xattr_name(), size()).prop_map(|(name, size)| Spec::Getxattr { name, size }),
        1 => size().prop_map(Spec::Listxattr),
        1 => xattr_name().prop_map(Spec::Removexattr),
        1 => (fh_ref(), any::<u64>()).prop_map(|(fh, lock_owner)| Spec::Flush { fh, lock_owner }),
        1 => access.prop_map(Spec::Access),
        4 => (open_flags(), mode(), name()).prop_map(|(flags, mode, name)| Spec::Create { flags, mode, name }),
        1 => any::<u64>().prop_map(Spec::Interrupt),
        1 => (fh_ref(), offsets(), offsets(), prop_oneof![0..4u32, any::<u32>()])
            .prop_map(|(fh, offset, length, mode)| Spec::Fallocate { fh, offset, length, mode }),
        1 => (fh_ref(), offsets(), whence).prop_map(|(fh, offset, whence)| Spec::Lseek { fh, offset, whence }),
        3 => count().prop_map(Spec::Forget),
        2 => (prop::option::weighted(0.2, any::<u32>()), prop::collection::vec((node_ref(), count()), 0..6))
            .prop_map(|(count, forgets)| Spec::BatchForget { count, forgets }),
        1 => (prop_oneof![Just(31u32), Just(45), any::<u32>()], any::<u32>(), any::<u32>())
            .prop_map(|(minor, flags, flags2)| Spec::Init { minor, flags, flags2 }),
        1 => Just(Spec::Destroy),
        1 => (opcode, prop::collection::vec(any::<u8>(), 0..48), prop::collection::vec(any::<u8>(), 0..48))
            .prop_map(|(opcode, op_in, args)| Spec::Other { opcode, op_in, args }),
    ]
}

fn part() -> impl Strategy<Value = Part> {
    select(vec![Part::Header, Part::OpIn, Part::Args])
}

fn mutation() -> impl Strategy<Value = Mutation> {
    let opcode = prop_oneof![3 => 0..=53u32, 1 => any::<u32>()];
    let node = prop_oneof![Just(0u64), Just(ROOT), Just(u64::MAX), Just(1 << 56), any::<u64>()];
    prop_oneof![
        4 => (part(), any::<usize>(), 1..=255u8).prop_map(|(part, at, xor)| Mutation::Flip { part, at, xor }),
        2 => (part(), any::<usize>()).prop_map(|(part, at)| Mutation::Truncate { part, at }),
        2 => (part(), prop::collection::vec(any::<u8>(), 1..32)).prop_map(|(part, bytes)| Mutation::Append { part, bytes }),
        1 => prop_oneof![Just(0u32), Just(39), Just(40), Just(u32::MAX), any::<u32>()].prop_map(Mutation::Len),
        2 => opcode.prop_map(Mutation::Opcode),
        1 => node.prop_map(Mutation::Node),
        1 => prop_oneof![0..64u32, Just(u32::MAX), any::<u32>()].prop_map(Mutation::PayloadSize),
        2 => Just(Mutation::DropNul),
    ]
}

/// No change (valid requests build the state the rest reach), one change
/// (whose effect the test can foresee), or several.
fn mutations() -> impl Strategy<Value = Vec<Mutation>> {
    prop_oneof![
        5 => Just(Vec::new()),
        3 => prop::collection::vec(mutation(), 1..=1),
        2 => prop::collection::vec(mutation(), 2..5),
    ]
}

/// A queue's payload buffer: the ring's, or smaller.
fn room() -> impl Strategy<Value = usize> {
    prop_oneof![1 => Just(4096usize), 1 => Just(65536), 2 => Just(RING_PAYLOAD)]
}

/// Any bytes, with their opcode field (if they have one) mostly one the
/// kernel sends.
fn raw(len: std::ops::Range<usize>) -> impl Strategy<Value = Vec<u8>> {
    let opcode = prop::option::weighted(0.7, 0..=53u32);
    (prop::collection::vec(any::<u8>(), len), opcode).prop_map(|(mut bytes, opcode)| {
        if let (Some(opcode), Some(field)) = (opcode, bytes.get_mut(4..8)) {
            field.copy_from_slice(&opcode.to_le_bytes());
        }
        bytes
    })
}

fn step() -> impl Strategy<Value = Step> {
    prop_oneof![
        16 => (spec(), node_ref(), who(), any::<u64>(), prop::bool::weighted(0.1), mutations(), room()).prop_map(
            |(spec, node, who, unique, swap, mutations, room)| Step::Request { spec, node, who, unique, swap, mutations, room }
        ),
        1 => (raw(0..HEADERS + 16), prop::collection::vec(any::<u8>(), 0..64), room())
            .prop_map(|(headers, payload, room)| Step::RawSlot { headers, payload, room }),
        1 => raw(1..200).prop_map(Step::RawDevice),
    ]
}

fn setup() -> impl Strategy<Value = Setup> {
    (select(vec![RecordLocks::Kernel, RecordLocks::Vfs]), prop::bool::weighted(0.3), prop::bool::weighted(0.25))
        .prop_map(|(locks, tight, before)| Setup { locks, tight, before })
}

proptest! {
    // XorShift: ChaCha took a sixth of a debug run.
    #![proptest_config(Config {
        failure_persistence: None,
        rng_algorithm: RngAlgorithm::XorShift,
        rng_seed: RngSeed::Fixed(vfscale_sync::test_support::case_seed(0xf022)),
        ..Config::with_cases(cases())
    })]

    /// Arbitrary bytes and mutated valid requests never make the parsers
    /// panic, every answer fits where it goes and says what it answers,
    /// and the VFS keeps its invariants.
    ///
    /// The layers covered, each as deep as it goes without a kernel:
    ///
    /// - A queue (`ring`): `Queue::answer` itself, on a slot the test
    ///   fills (through `ring::detached`), so the in-header parse,
    ///   `wire::serve` with the drain it runs before `STATFS` and after
    ///   ENOSPC, `wire::encode` and `wire::out_header`. Not the
    ///   `io_uring_enter` that hands a slot over, which needs a kernel
    ///   with FUSE over io_uring. Its device is `/dev/null`, which
    ///   `answer` never touches.
    /// - The forget drain (`forgets`): `Drain::drain_all` reading a
    ///   `SOCK_SEQPACKET` socket in place of its non-blocking clone of
    ///   `/dev/fuse` (a read returns one message, as the device's does),
    ///   so its read loop, `Drain::serve`, `wire::forgets` and the node
    ///   table's forgets. Not opening `/dev/fuse` and cloning the session,
    ///   which needs a mount.
    /// - Not fuser's parsing of what the `/dev/fuse` readers get (the
    ///   `dev` module), which is fuser's code and needs a mount too.
    ///
    /// Every queue answer: no handler panicked (a queue turns a panic
    /// into EIO, so a panic hook counts them); the commit id and unique
    /// are the request's; the payload fits the slot's buffer, and the out
    /// header's length is the header's and the payload's; nothing else in
    /// the slot's headers changed; an error is a negative errno Linux has,
    /// with no payload; a success has its opcode's layout (entries,
    /// attributes, opens, statfs, dirents) and no more data than asked
    /// for; an opcode the queues do not serve, or arguments one mutation
    /// cut short, get ENOSYS and EINVAL. Every drain answer: EIO, naming
    /// the request, to all but forgets and interrupts (which get none),
    /// and the forgets parsed as a reference decoder does. At the end:
    /// the root stats; every handle released and every lookup forgotten,
    /// the server knows none of the nodes; with the tree removed the VFS
    /// has the inodes, bytes and free space it began with; and a
    /// directory and a file can be made, written and removed through the
    /// VFS and through a queue, and given back again.
    #[test]
    fn wire_survives_arbitrary_messages(setup in setup(), steps in prop::collection::vec(step(), 1..40)) {
        run_case(setup, &steps)?;
    }
}

/// The inputs that found bugs, as fixed cases.
#[test]
fn wire_survives_arbitrary_messages_regressions() {
    const FATTR_ATIME: u32 = 1 << 4;
    let setup = Setup { locks: RecordLocks::Kernel, tight: false, before: false };
    let setattr_in = |sec: u64, nsec: u32| {
        let head = Le::default().u32(FATTR_ATIME).u32(0).u64(0).u64(0).u64(0).u64(sec).u64(0).u64(0);
        head.u32(nsec).u32(0).u32(0).u32(0).u32(0).u32(0).u32(0).u32(0).0
    };
    let setattr = |sec: u64, nsec: u32| Step::Request {
        spec: Spec::Other { opcode: SETATTR, op_in: setattr_in(sec, nsec), args: Vec::new() },
        node: NodeRef::Root,
        who: (0, 0, 0),
        unique: 1,
        swap: false,
        mutations: Vec::new(),
        room: RING_PAYLOAD,
    };
    let cases = [
        // 36 bytes parsed as a header (all but its unused last four),
        // which the drain answered.
        vec![Step::RawDevice(Le::default().u32(36).u32(GETATTR).u64(7).u64(ROOT).u32(0).u32(0).u32(0).0)],
        // Nanoseconds past a second, with seconds near i64::MAX, overflowed
        // SystemTime: a panic, which the queue answered EIO.
        vec![setattr(i64::MAX as u64 - 1, 2_000_000_000)],
        // i64::MIN seconds overflowed the conversion back to a Timespec.
        vec![setattr(i64::MIN as u64, 0)],
    ];
    for steps in cases {
        if let Err(e) = run_case(setup, &steps) {
            panic!("{e} in {steps:#?}");
        }
    }

    let mut rig = Rig::new(setup);
    let bad = rig.call(SETATTR, ROOT, setattr_in(i64::MAX as u64 - 1, 2_000_000_000), Vec::new()).unwrap();
    assert_eq!(bad.error, -libc::EINVAL, "nanoseconds past a second");
    let set = rig.call(SETATTR, ROOT, setattr_in(i64::MIN as u64, 0), Vec::new()).unwrap();
    assert_eq!((set.error, u64_at(&set.body, 16 + 24)), (0, i64::MIN as u64), "fuse_attr.atime");

    // A READ of 1 GiB of a sparse file read it all, and copied it, before
    // the queue found the reply too long: 2 GiB for an EIO.
    let peak = || {
        let status = std::fs::read_to_string("/proc/self/status").expect("/proc/self/status");
        let kib = status.lines().find_map(|l| l.strip_prefix("VmHWM:")).expect("VmHWM");
        kib.trim().trim_end_matches(" kB").parse::<u64>().expect("a number of KiB") << 10
    };
    let create_in = Le::default().u32(libc::O_RDWR as u32).u32(libc::S_IFREG | 0o644).u32(0).u32(0).0;
    let file = rig.call(CREATE, ROOT, create_in, Le::default().name(b"sparse").0).unwrap();
    let node = u64_at(&file.body, 0);
    const FATTR_SIZE: u32 = 1 << 3;
    let truncate_in = Le::default().u32(FATTR_SIZE).u32(0).u64(0).u64(1 << 40).raw(&[0; 64]).0;
    assert_eq!(rig.call(SETATTR, node, truncate_in, Vec::new()).unwrap().error, 0, "a sparse TiB");
    let before = peak();
    let read_in = Le::default().u64(0).u64(0).u32(1 << 30).u32(0).u64(0).u32(0).u32(0).0;
    assert_eq!(rig.call(READ, node, read_in, Vec::new()).unwrap().error, -libc::EIO, "a reply past the room");
    assert!(peak() - before < 256 << 20, "a READ of 1 GiB took {} MiB", (peak() - before) >> 20);
    rig.check().unwrap();
}
