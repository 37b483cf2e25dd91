//! `vfscale commute --generate`: a pair matrix made by enumeration rather
//! than by hand, as COMMUTER (Clements et al., SOSP 2013) generated its
//! cases from a model of POSIX.
//!
//! Every pair of calls of the vocabulary ([`Call`]s of [`cases`]) is
//! enumerated with every argument relation between its two sides: the same
//! or a different name, in the same or another directory, of an existing
//! file, an existing directory or a missing name, or the directory itself;
//! the same description, another description of the same file, another
//! file, in the same process or another; overlapping, adjacent or
//! disjoint byte ranges. Whether a case commutes is decided empirically
//! on the host's tmpfs ([`host`]): from one initial state, A then B and,
//! from a fresh copy of it, B then A; the case commutes when both orders
//! give each call the same result and leave the same state. vfscale's
//! conflict checker then runs on every commutative case, and vfscale's
//! result of each call must be the host's (the same success, or the same
//! errno), so the matrix is a differential test too.

mod host;

use super::audited;
use super::pairs::make_file;
use super::sys::{Call, Fd, Outcome, Owner, Syscalls};
use super::world::Fs;
use audited_sync::conflict::{self, Verdict, INSTANCES};
use serde::Serialize;
use std::collections::BTreeMap;
use std::ffi::CString;
use std::fmt;

/// What a path argument names.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Kind {
    /// An existing regular file (64 bytes, one extended attribute).
    File,
    /// An existing, empty directory.
    Dir,
    /// A name that does not exist.
    Missing,
    /// The directory that holds the other kinds (`d` or `e`) itself.
    Parent,
}

/// One path argument: a kind of object in directory `d` (side A's) or
/// `e`, in one of two slots, so two arguments of one kind in one
/// directory are the same name (same slot) or different names.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Object {
    /// The directory: `false` for `d`, `true` for `e`.
    pub other_dir: bool,
    /// What it names.
    pub kind: Kind,
    /// 1 or 2 (ignored for [`Kind::Parent`]).
    pub slot: u8,
}

impl Object {
    fn dir(self) -> &'static str {
        if self.other_dir {
            "e"
        } else {
            "d"
        }
    }

    /// The name in its directory without the instance (`f1`), or `None`
    /// for the directory itself.
    fn stem(self) -> Option<String> {
        let letter = match self.kind {
            Kind::File => 'f',
            Kind::Dir => 's',
            Kind::Missing => 'n',
            Kind::Parent => return None,
        };
        Some(format!("{letter}{}", self.slot))
    }

    /// The name in its directory for instance `i`, or `None` for the
    /// directory itself.
    fn name(self, i: usize) -> Option<String> {
        self.stem().map(|stem| format!("{stem}_{i}"))
    }

    /// The path relative to the world's root for instance `i`.
    fn rel(self, i: usize) -> String {
        match self.name(i) {
            Some(name) => format!("{}/{name}", self.dir()),
            None => self.dir().to_string(),
        }
    }
}

impl fmt::Display for Object {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.stem() {
            Some(stem) => write!(f, "{}/{stem}", self.dir()),
            None => write!(f, "{}", self.dir()),
        }
    }
}

/// Which open description a descriptor call uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Desc {
    /// Process P's first description of `d/f1` (side A's).
    P1,
    /// Process P's second description of `d/f1`.
    P1Again,
    /// Process P's description of `d/f2`.
    P2,
    /// Process Q's description of `d/f1`.
    Q1,
    /// Process Q's description of `d/f2`.
    Q2,
}

impl Desc {
    fn in_q(self) -> bool {
        matches!(self, Desc::Q1 | Desc::Q2)
    }

    /// The file it is a description of.
    fn file(self) -> Object {
        let slot = if matches!(self, Desc::P2 | Desc::Q2) { 2 } else { 1 };
        Object { other_dir: false, kind: Kind::File, slot }
    }

    fn label(self) -> &'static str {
        match self {
            Desc::P1 => "P:d/f1",
            Desc::P1Again => "P:d/f1'",
            Desc::P2 => "P:d/f2",
            Desc::Q1 => "Q:d/f1",
            Desc::Q2 => "Q:d/f2",
        }
    }
}

/// A byte range of a descriptor call: offset and length.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Range(pub u64, pub u64);

/// A page, the unit in which files keep their data and record locks
/// their stripes.
const PAGE: u64 = 4096;

/// Bytes of every generated file: three pages of `x`.
const FILE_BYTES: u64 = 3 * PAGE;

/// Side A's range, the last 16 bytes of the first page, and side B's:
/// overlapping it (across the page boundary), adjacent to it (the first
/// 16 bytes of the next page) and disjoint from it (a page further).
/// Disjoint ranges a few bytes apart within one page would share a line of
/// the page itself in any design that keeps a file's data in pages, and a
/// stripe in one that splits locks by block, as the issue's own example
/// does; ranges that do not touch are placed in different pages.
const RANGES: [Range; 4] = [Range(PAGE - 16, 16), Range(PAGE - 8, 16), Range(PAGE, 16), Range(2 * PAGE, 16)];

/// Every offset where a record lock made from [`RANGES`] can begin or
/// end, and 0: the lock table is the same between two neighbours, so
/// probing at each tells two tables apart.
pub fn lock_boundaries() -> Vec<u64> {
    let mut at: Vec<u64> = RANGES.iter().flat_map(|r| [r.0, r.0 + r.1]).chain([0]).collect();
    at.sort_unstable();
    at.dedup();
    at
}

/// The calls of the vocabulary.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Verb {
    Stat,
    OpenRead,
    Create,
    OpenCreat,
    OpenTrunc,
    Unlink,
    Mkdir,
    Rmdir,
    Rename,
    RenameAcross,
    Link,
    Chmod,
    Readdir,
    Setxattr,
    Getxattr,
    Fstatat,
    OpenatRead,
    Unlinkat,
    Mkdirat,
    Fstat,
    Pread,
    Pwrite,
    Ftruncate,
    Fallocate,
    Lseek,
    FlockShared,
    FlockExclusive,
    PosixRead,
    PosixWrite,
    OfdRead,
    OfdWrite,
}

use Kind::{Dir as D, File as F, Missing as M, Parent as P};

impl Verb {
    const ALL: [Verb; 31] = [
        Verb::Stat,
        Verb::OpenRead,
        Verb::Create,
        Verb::OpenCreat,
        Verb::OpenTrunc,
        Verb::Unlink,
        Verb::Mkdir,
        Verb::Rmdir,
        Verb::Rename,
        Verb::RenameAcross,
        Verb::Link,
        Verb::Chmod,
        Verb::Readdir,
        Verb::Setxattr,
        Verb::Getxattr,
        Verb::Fstatat,
        Verb::OpenatRead,
        Verb::Unlinkat,
        Verb::Mkdirat,
        Verb::Fstat,
        Verb::Pread,
        Verb::Pwrite,
        Verb::Ftruncate,
        Verb::Fallocate,
        Verb::Lseek,
        Verb::FlockShared,
        Verb::FlockExclusive,
        Verb::PosixRead,
        Verb::PosixWrite,
        Verb::OfdRead,
        Verb::OfdWrite,
    ];

    /// The kinds of object a path call is generated on (empty for a
    /// descriptor call).
    fn kinds(self) -> &'static [Kind] {
        match self {
            Verb::Stat => &[F, D, M, P],
            Verb::OpenRead => &[F, D, M],
            Verb::Create | Verb::OpenCreat | Verb::Mkdir | Verb::Mkdirat => &[M, F],
            Verb::OpenTrunc | Verb::Setxattr => &[F],
            Verb::Unlink => &[F, M, D],
            Verb::Rmdir => &[D, M],
            Verb::Rename | Verb::RenameAcross => &[F, D, M],
            Verb::Link | Verb::Getxattr | Verb::Fstatat | Verb::OpenatRead | Verb::Unlinkat => &[F, M],
            Verb::Chmod => &[F, D],
            Verb::Readdir => &[P, D],
            _ => &[],
        }
    }

    fn on_descriptor(self) -> bool {
        self.kinds().is_empty()
    }

    /// Whether the call's range matters (all descriptor calls but `fstat`
    /// and the `flock`s).
    fn ranged(self) -> bool {
        self.on_descriptor() && !matches!(self, Verb::Fstat | Verb::FlockShared | Verb::FlockExclusive)
    }

    /// The call as the case names show it.
    pub fn name(self) -> &'static str {
        match self {
            Verb::Stat => "stat",
            Verb::OpenRead => "open(O_RDONLY)+close",
            Verb::Create => "open(O_CREAT|O_EXCL)+close",
            Verb::OpenCreat => "open(O_CREAT)+close",
            Verb::OpenTrunc => "open(O_TRUNC)+close",
            Verb::Unlink => "unlink",
            Verb::Mkdir => "mkdir",
            Verb::Rmdir => "rmdir",
            Verb::Rename => "rename(X, Xr)",
            Verb::RenameAcross => "rename(X, Y/Xm)",
            Verb::Link => "link(X, Xl)",
            Verb::Chmod => "chmod(0600)",
            Verb::Readdir => "getdents",
            Verb::Setxattr => "setxattr(user.b)",
            Verb::Getxattr => "getxattr(user.a)",
            Verb::Fstatat => "fstatat",
            Verb::OpenatRead => "openat(O_RDONLY)+close",
            Verb::Unlinkat => "unlinkat",
            Verb::Mkdirat => "mkdirat",
            Verb::Fstat => "fstat",
            Verb::Pread => "pread",
            Verb::Pwrite => "pwrite",
            Verb::Ftruncate => "ftruncate",
            Verb::Fallocate => "fallocate",
            Verb::Lseek => "lseek",
            Verb::FlockShared => "flock(LOCK_SH|LOCK_NB)",
            Verb::FlockExclusive => "flock(LOCK_EX|LOCK_NB)",
            Verb::PosixRead => "F_SETLK(F_RDLCK)",
            Verb::PosixWrite => "F_SETLK(F_WRLCK)",
            Verb::OfdRead => "F_OFD_SETLK(F_RDLCK)",
            Verb::OfdWrite => "F_OFD_SETLK(F_WRLCK)",
        }
    }

    /// For a record lock request: whether it is an OFD lock (else POSIX).
    fn record_lock(self) -> Option<bool> {
        match self {
            Verb::PosixRead | Verb::PosixWrite => Some(false),
            Verb::OfdRead | Verb::OfdWrite => Some(true),
            _ => None,
        }
    }

    /// Whether a record lock request asks for a write lock.
    fn writes_lock(self) -> bool {
        matches!(self, Verb::PosixWrite | Verb::OfdWrite)
    }

    /// Whether the call uses its object up: it creates, removes or
    /// renames a name of the object's directory (when it succeeds), so a
    /// repeated run needs a fresh object.
    fn consumes(self) -> bool {
        matches!(
            self,
            Verb::Create
                | Verb::OpenCreat
                | Verb::Unlink
                | Verb::Mkdir
                | Verb::Rmdir
                | Verb::Rename
                | Verb::RenameAcross
                | Verb::Link
                | Verb::Unlinkat
                | Verb::Mkdirat
        )
    }
}

/// What one side of a case does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Side {
    /// The call.
    pub verb: Verb,
    /// The path argument of a path call.
    pub object: Option<Object>,
    /// The description of a descriptor call.
    pub desc: Option<Desc>,
    /// The range of a ranged descriptor call.
    pub range: Option<Range>,
    /// Whether the side runs in process Q (otherwise P, side A's).
    pub in_q: bool,
}

impl fmt::Display for Side {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let process = if self.in_q { "Q" } else { "P" };
        match (self.object, self.desc) {
            (Some(object), _) => write!(f, "{process}: {}({object})", self.verb.name()),
            (None, Some(desc)) => match self.range {
                Some(Range(offset, len)) => write!(f, "{}({}, {offset}+{len})", self.verb.name(), desc.label()),
                None => write!(f, "{}({})", self.verb.name(), desc.label()),
            },
            (None, None) => write!(f, "{}", self.verb.name()),
        }
    }
}

/// One generated case: two calls and the relation of their arguments.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Case {
    /// Side A (process P, thread 0).
    pub a: Side,
    /// Side B (thread 1).
    pub b: Side,
}

/// The exemption the issue names: "adjacent ranges of one owner must
/// merge, so they cannot be conflict-free". Two record locks of one owner
/// on one file whose ranges overlap, or touch with one lock type, merge
/// into one range or split one: both requests rewrite that owner's list of
/// ranges, whatever the design. (Touching ranges of two types do not merge
/// and are not exempt.)
pub const EXEMPTION: &str = "record locks of one owner on one file whose ranges overlap, or touch with one lock \
                             type: they merge or split that owner's ranges, so both rewrite one list";

impl Case {
    /// Whether the case falls under [`EXEMPTION`]: both sides are record
    /// locks of one owner (POSIX: one process; OFD: one description) on
    /// one file, their ranges overlapping, or touching with one type.
    pub fn exempt(&self) -> bool {
        let (a, b) = (self.a, self.b);
        let (Some(ofd), Some(ofd_b)) = (a.verb.record_lock(), b.verb.record_lock()) else { return false };
        let (Some(da), Some(db), Some(Range(s1, l1)), Some(Range(s2, l2))) = (a.desc, b.desc, a.range, b.range) else {
            return false;
        };
        let one_owner = ofd == ofd_b && da.file() == db.file() && if ofd { da == db } else { a.in_q == b.in_q };
        let overlap = s1 < s2 + l2 && s2 < s1 + l1;
        let touch = s1 == s2 + l2 || s2 == s1 + l1;
        one_owner && (overlap || touch && a.verb.writes_lock() == b.verb.writes_lock())
    }

    /// The objects a side uses up: each instance of the case gets its own
    /// copy of these; every other object, and every descriptor of a file
    /// not among them, is instance 0's in every instance, so repeated runs
    /// see the steady state (a cached name, a file's lock context already
    /// made) as a long-running program does.
    fn consumed(&self) -> Vec<Object> {
        [self.a, self.b].iter().filter(|side| side.verb.consumes()).filter_map(|side| side.object).collect()
    }
}

impl fmt::Display for Case {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} || {}", self.a, self.b)
    }
}

/// Side A's objects of `kinds`: always slot 1 of `d`.
fn a_objects(kinds: &[Kind]) -> impl Iterator<Item = Object> + '_ {
    kinds.iter().map(|&kind| Object { other_dir: false, kind, slot: 1 })
}

/// Side B's objects of `kinds` against side A's `a`: the same name (when
/// the kinds agree), another name in the same directory, a name in the
/// other directory.
fn b_objects(kinds: &[Kind], a: Option<Object>) -> Vec<Object> {
    let mut out = Vec::new();
    for &kind in kinds {
        let same = a.is_some_and(|a| a.kind == kind);
        if kind == Kind::Parent {
            // The directory itself: `d` (A's, or the one A's file is in) or `e`.
            out.extend([false, true].map(|other_dir| Object { other_dir, kind, slot: 1 }));
            continue;
        }
        if same {
            out.push(Object { other_dir: false, kind, slot: 1 });
        }
        out.push(Object { other_dir: false, kind, slot: 2 });
        out.push(Object { other_dir: true, kind, slot: 1 });
    }
    out
}

/// Every case of the vocabulary, each unordered pair of sides once.
pub fn cases() -> Vec<Case> {
    let mut out = Vec::new();
    for (i, &va) in Verb::ALL.iter().enumerate() {
        for &vb in &Verb::ALL[i..] {
            push_cases(&mut out, va, vb);
        }
    }
    out
}

fn push_cases(out: &mut Vec<Case>, va: Verb, vb: Verb) {
    let side = |verb, object, desc, range, in_q| Side { verb, object, desc, range, in_q };
    let range_of = |verb: Verb, range: Range| verb.ranged().then_some(range);
    match (va.on_descriptor(), vb.on_descriptor()) {
        // Path calls: B runs in its own process.
        (false, false) => {
            for a in a_objects(va.kinds()) {
                for b in b_objects(vb.kinds(), Some(a)) {
                    // One of each mirrored pair of the same call.
                    if va == vb && (b.kind < a.kind) {
                        continue;
                    }
                    out.push(Case { a: side(va, Some(a), None, None, false), b: side(vb, Some(b), None, None, true) });
                }
            }
        }
        // Descriptor calls: every description relation, every range
        // relation where both sides have a range.
        (true, true) => {
            for desc in [Desc::P1, Desc::P1Again, Desc::P2, Desc::Q1, Desc::Q2] {
                let ranges: &[Range] = if va.ranged() && vb.ranged() { &RANGES } else { &RANGES[..1] };
                for &range in ranges {
                    out.push(Case {
                        a: side(va, None, Some(Desc::P1), range_of(va, RANGES[0]), false),
                        b: side(vb, None, Some(desc), range_of(vb, range), desc.in_q()),
                    });
                }
            }
        }
        // A path call beside a descriptor call (the descriptor on A's
        // side, `d/f1` in P): B's path relates to `d/f1`, in P or in Q.
        (false, true) | (true, false) => {
            let (path_verb, fd_verb) = if va.on_descriptor() { (vb, va) } else { (va, vb) };
            let file = Object { other_dir: false, kind: Kind::File, slot: 1 };
            for object in b_objects(path_verb.kinds(), Some(file)) {
                for in_q in [false, true] {
                    out.push(Case {
                        a: side(fd_verb, None, Some(Desc::P1), range_of(fd_verb, RANGES[0]), false),
                        b: side(path_verb, Some(object), None, None, in_q),
                    });
                }
            }
        }
    }
}

/// The objects a world holds for `instances` instances, and the
/// descriptors and directory descriptors of processes P and Q.
struct Setup {
    /// Per instance: P's descriptions of `d/f1` (two) and `d/f2`, Q's of
    /// `d/f1` and `d/f2`.
    fds: Vec<[Fd; 5]>,
    /// P's and Q's descriptors of `d` and `e`.
    dirs: [[Fd; 2]; 2],
}

/// The extended attribute every file starts with, and the one side B of a
/// `setxattr` adds.
const XATTR_A: &std::ffi::CStr = c"user.a";
const XATTR_B: &std::ffi::CStr = c"user.b";

impl Setup {
    /// Makes, in a fresh world seen by `p` and `q`: `d` and `e`, each with
    /// files `f1_i`, `f2_i` (as the pair table makes them, [`FILE_BYTES`] of `x`:
    /// the access time ahead so reads update no time; `user.a` = `1`) and empty
    /// directories `s1_i`, `s2_i` per instance; then opens the
    /// descriptors.
    fn build(p: &dyn Syscalls, q: &dyn Syscalls, instances: usize) -> Result<Setup, String> {
        let call = |s: &dyn Syscalls, call: Call| s.call(&call).map_err(|e| format!("setting up {call:?}: errno {e}"));
        for dir in ["d", "e"] {
            p.mkdir(&p.path(dir), 0o755)?;
            for i in 0..instances {
                for slot in [1, 2] {
                    let file = p.path(&format!("{dir}/f{slot}_{i}"));
                    make_file(p, &file, FILE_BYTES as usize)?;
                    call(p, Call::Setxattr(file, XATTR_A, b"1"))?;
                    p.mkdir(&p.path(&format!("{dir}/s{slot}_{i}")), 0o755)?;
                }
            }
        }
        let open = |s: &dyn Syscalls, rel: &str, flags: i32| s.open(&s.path(rel), flags, 0);
        let dirs = [
            [open(p, "d", libc::O_RDONLY | libc::O_DIRECTORY)?, open(p, "e", libc::O_RDONLY | libc::O_DIRECTORY)?],
            [open(q, "d", libc::O_RDONLY | libc::O_DIRECTORY)?, open(q, "e", libc::O_RDONLY | libc::O_DIRECTORY)?],
        ];
        let mut fds = Vec::with_capacity(instances);
        for i in 0..instances {
            let (f1, f2) = (format!("d/f1_{i}"), format!("d/f2_{i}"));
            fds.push([
                open(p, &f1, libc::O_RDWR)?,
                open(p, &f1, libc::O_RDWR)?,
                open(p, &f2, libc::O_RDWR)?,
                open(q, &f1, libc::O_RDWR)?,
                open(q, &f2, libc::O_RDWR)?,
            ]);
        }
        Ok(Setup { fds, dirs })
    }

    fn fd(&self, desc: Desc, i: usize) -> Fd {
        let index = match desc {
            Desc::P1 => 0,
            Desc::P1Again => 1,
            Desc::P2 => 2,
            Desc::Q1 => 3,
            Desc::Q2 => 4,
        };
        self.fds[i][index]
    }

    /// Every descriptor of the setup (for the state's file offsets).
    fn all_fds(&self) -> impl Iterator<Item = Fd> + '_ {
        self.fds.iter().flatten().copied()
    }
}

/// Side `side`'s call for instance `i` of a case that uses up `consumed`,
/// its paths as `s` names them; `byte` is what a `pwrite` writes (each side
/// its own, so the order of two writes shows).
fn resolve(side: &Side, consumed: &[Object], setup: &Setup, s: &dyn Syscalls, i: usize, byte: u8) -> Call {
    let cstr = |text: String| CString::new(text).expect("generated names have no NUL byte");
    let instance_of = |object: Object| if consumed.contains(&object) { i } else { 0 };
    let fd = side.desc.map(|desc| setup.fd(desc, instance_of(desc.file()))).unwrap_or(-1);
    let Range(offset, len) = side.range.unwrap_or(RANGES[0]);
    let object = side.object.unwrap_or(Object { other_dir: false, kind: Kind::File, slot: 1 });
    let i = instance_of(object);
    let path = s.path(&object.rel(i));
    let suffixed = |suffix: &str| s.path(&format!("{}{suffix}", object.rel(i)));
    let dirfd = setup.dirs[usize::from(side.in_q)][usize::from(object.other_dir)];
    let name = || cstr(object.name(i).unwrap_or_else(|| ".".into()));
    let lock = |owner, l_type: libc::c_int| Call::RecordLock(fd, owner, l_type as i16, offset as i64, len as i64);
    match side.verb {
        Verb::Stat => Call::Stat(path),
        Verb::OpenRead => Call::OpenClose(path, libc::O_RDONLY),
        Verb::Create => Call::OpenClose(path, libc::O_CREAT | libc::O_EXCL | libc::O_WRONLY),
        Verb::OpenCreat => Call::OpenClose(path, libc::O_CREAT | libc::O_WRONLY),
        Verb::OpenTrunc => Call::OpenClose(path, libc::O_TRUNC | libc::O_WRONLY),
        Verb::Unlink => Call::Unlink(path),
        Verb::Mkdir => Call::Mkdir(path),
        Verb::Rmdir => Call::Rmdir(path),
        Verb::Rename => Call::Rename(path, suffixed("r")),
        Verb::RenameAcross => {
            let other = Object { other_dir: !object.other_dir, ..object };
            Call::Rename(path, s.path(&format!("{}/{}m", other.dir(), object.name(i).unwrap_or_default())))
        }
        Verb::Link => Call::Link(path, suffixed("l")),
        Verb::Chmod => Call::Chmod(path, 0o600),
        Verb::Readdir => Call::Readdir(path),
        Verb::Setxattr => Call::Setxattr(path, XATTR_B, b"2"),
        Verb::Getxattr => Call::Getxattr(path, XATTR_A),
        Verb::Fstatat => Call::Fstatat(dirfd, name()),
        Verb::OpenatRead => Call::OpenatClose(dirfd, name(), libc::O_RDONLY),
        Verb::Unlinkat => Call::Unlinkat(dirfd, name(), 0),
        Verb::Mkdirat => Call::Mkdirat(dirfd, name()),
        Verb::Fstat => Call::Fstat(fd),
        Verb::Pread => Call::Pread(fd, offset, len as usize),
        Verb::Pwrite => Call::Pwrite(fd, offset, len as usize, byte),
        Verb::Ftruncate => Call::Ftruncate(fd, offset + len),
        Verb::Fallocate => Call::Fallocate(fd, offset + FILE_BYTES, len),
        Verb::Lseek => Call::Lseek(fd, offset),
        Verb::FlockShared => Call::Flock(fd, libc::LOCK_SH | libc::LOCK_NB),
        Verb::FlockExclusive => Call::Flock(fd, libc::LOCK_EX | libc::LOCK_NB),
        Verb::PosixRead => lock(Owner::Process, libc::F_RDLCK),
        Verb::PosixWrite => lock(Owner::Process, libc::F_WRLCK),
        Verb::OfdRead => lock(Owner::Description, libc::F_RDLCK),
        Verb::OfdWrite => lock(Owner::Description, libc::F_WRLCK),
    }
}

/// The mechanisms behind the conflicts vfscale's design still has on
/// generated cases: each names the source files whose sites it covers (the
/// first frame of a site, the vfscale caller of a primitive) and why the
/// line is shared. `commutative_pairs_are_conflict_free` holds the checker
/// to them: every site of every conflicting commutative case must fall
/// under one, and every one must explain some case. Remove one when its
/// conflicts are gone.
pub const KNOWN_MECHANISMS: &[(&str, &[&str], &str)] = &[
    (
        "inode-attributes",
        &["crates/vfs/src/inode.rs"],
        "a change of an inode (its size and the times a truncate or a write or fallocate that moves the end \
         sets, its mode and link count) is a write section of the inode's attribute seqlock, which every stat, \
         relatime check, write and hard link of it reads, and a change of its mode or owner writes the words every \
         permission check reads; an attribute change (chmod, chown, utimensat, truncate) holds the inode's \
         attribute-change lock; writes within the size stamp their times on per-CPU records, which a stat reads \
         (Linux: the inode's fields, i_lock and i_rwsem)",
    ),
    (
        "file-pages",
        &["crates/vfs/src/pages.rs"],
        "a file's size and the shape of its page tree are one sequence count and one size word: a truncate, or a \
         write or fallocate that moves the end or adds a page, writes them, and every read and write reads them; \
         two changes of one page take its lock (Linux: i_size, the page cache's xarray lock, and i_rwsem, which \
         even writes within the size take)",
    ),
    (
        "directory-entries",
        &[
            "crates/vfs/src/dirlock.rs",
            "crates/vfs/src/dirents/mod.rs",
            "crates/vfs/src/dirents/split.rs",
            "crates/vfs/src/namespace.rs",
            "crates/vfs/src/namei.rs",
            "crates/vfs/src/dentry.rs",
            "crates/vfs/src/dcache.rs",
            "crates/vfs/src/syscalls/open.rs",
        ],
        "a change of a name takes the lock of its bucket, which a change of another name in the same bucket \
         takes too (two names of a small directory share one of its 64 buckets one time in 64), a move of a \
         directory between directories takes the rename lock for writing and writes the rename seqcount that \
         walks through `..` read, and a look-up that races a change of its name leaves rcu-walk for ref-walk, \
         counting references on the dentries it passes (Linux: d_lockref, i_rwsem, d_alloc_parallel, \
         s_vfs_rename_mutex, rename_lock)",
    ),
    (
        "lock-lists",
        &[
            "crates/vfs/src/locks/mod.rs",
            "crates/vfs/src/locks/context.rs",
            "crates/vfs/src/locks/context/records.rs",
            "crates/vfs/src/locks/context/striped.rs",
        ],
        "a file's record locks are one list under one spinlock until locks within one stripe (4 KiB) have been \
         taken in two stripes: until then every lock and unlock takes it, however far apart the ranges, and so \
         does a close by a process that once asked for a POSIX lock on the file, or of a description that asked \
         for an OFD lock; after, locks in one stripe share its lock, and requests of one owner that change which slots hold its \
         locks (its first lock in a stripe's slot, its last unlock there, a lock that may merge across stripes) its \
         owner shard's lock and group (Linux: flc_lock and locks_remove_posix)",
    ),
    (
        "open-descriptions",
        &[
            "crates/vfs/src/file/mod.rs",
            "crates/vfs/src/file/open_ref.rs",
            "crates/vfs/src/opens.rs",
            "crates/vfs/src/mount.rs",
        ],
        "an open file description's offset is under one mutex that read and lseek take (a seek to where the \
         offset is takes none), its truncate and directory listing take the inode's lock, and the open that \
         creates a file counts itself in the inode's shared open counts, beside which the first open of the \
         new file makes its per-CPU counts (other opens count on their CPU's slots, those for writing on their \
         CPU's slots of the count of writers too, and an unlink of an open file marks its per-CPU open count \
         dying and folds it after a grace period, outside the call) (Linux: f_pos_lock, i_rwsem, i_count)",
    ),
    (
        "xattrs",
        &["crates/vfs/src/xattr_store.rs", "crates/vfs/src/syscalls/mod.rs"],
        "a setxattr replaces the map of a file's extended attributes that a getxattr reads, under a lock the \
         file's setxattrs share, and counts a reference on the inode (Linux: simple_xattrs' rwlock)",
    ),
];

/// The mechanism a conflicting site falls under, if any: the one naming
/// the file of its first frame.
pub fn mechanism_of(site: &str) -> Option<&'static str> {
    let frame = site.split(" > ").next().unwrap_or(site);
    let file = frame.split(' ').next().unwrap_or(frame).rsplit_once(':').map_or(frame, |(file, _)| file);
    KNOWN_MECHANISMS.iter().find(|(_, files, _)| files.iter().any(|f| file.ends_with(f))).map(|(name, ..)| *name)
}

/// One generated case's result.
#[derive(Debug, Clone)]
pub struct CaseResult {
    /// The case.
    pub case: Case,
    /// Whether it commuted on the host.
    pub commutes: bool,
    /// The checker's verdict (commutative cases only): the sites of each
    /// conflicting line.
    pub conflicts: Option<Vec<Vec<String>>>,
}

/// A site of a conflicting line and the generated cases it appeared in.
#[derive(Debug, Clone, Serialize)]
pub struct SiteGroup {
    /// The source site (`file:line (kind)`).
    pub site: String,
    /// How many conflicting cases touched it.
    pub cases: usize,
    /// The first of them.
    pub example: String,
}

/// The totals the summary carries (`summary.generated`).
#[derive(Debug, Clone, Copy, Serialize)]
pub struct Totals {
    /// Cases generated.
    pub cases: usize,
    /// Cases that commuted on the host.
    pub commutative: usize,
    /// Commutative cases vfscale runs conflict-free.
    pub conflict_free: usize,
    /// Commutative cases under [`EXEMPTION`], which the goal leaves out.
    pub exempt: usize,
    /// Those of them vfscale runs conflict-free all the same.
    pub exempt_conflict_free: usize,
}

impl Totals {
    /// The commutative cases the goal counts (the exempt left out), and
    /// how many of them are conflict-free.
    pub fn judged(&self) -> (usize, usize) {
        (self.commutative - self.exempt, self.conflict_free - self.exempt_conflict_free)
    }
}

/// A conflicting commutative case, for the JSON and the report.
#[derive(Debug, Clone, Serialize)]
pub struct Conflicting {
    /// The case.
    pub case: String,
    /// Whether it falls under [`EXEMPTION`].
    pub exempt: bool,
    /// The known mechanisms its sites fall under.
    pub mechanisms: Vec<&'static str>,
    /// Its sites no known mechanism covers.
    pub unexplained: Vec<String>,
    /// Every site of its conflicting lines, sorted.
    pub sites: Vec<String>,
}

/// The generated matrix's outcome.
#[derive(Debug, Clone, Serialize)]
pub struct Generated {
    /// Totals.
    #[serde(flatten)]
    pub totals: Totals,
    /// The conflicting commutative cases.
    pub conflicting: Vec<Conflicting>,
    /// The conflicting sites, by how many cases touched them.
    pub sites: Vec<SiteGroup>,
    /// The known mechanisms, with their reasons.
    pub known_conflicts: BTreeMap<&'static str, &'static str>,
}

impl Generated {
    /// The summary of `results`.
    pub fn of(results: &[CaseResult]) -> Generated {
        let commutative: Vec<&CaseResult> = results.iter().filter(|r| r.commutes).collect();
        let mut conflicting = Vec::new();
        let mut sites: BTreeMap<String, (usize, String)> = BTreeMap::new();
        for r in &commutative {
            let Some(lines) = r.conflicts.as_ref().filter(|lines| !lines.is_empty()) else { continue };
            let mut all: Vec<String> = lines.iter().flatten().cloned().collect();
            all.sort();
            all.dedup();
            for site in &all {
                let entry = sites.entry(site.clone()).or_insert_with(|| (0, r.case.to_string()));
                entry.0 += 1;
            }
            let mut mechanisms: Vec<&'static str> = all.iter().filter_map(|site| mechanism_of(site)).collect();
            mechanisms.sort_unstable();
            mechanisms.dedup();
            let unexplained = all.iter().filter(|site| mechanism_of(site).is_none()).cloned().collect();
            let exempt = r.case.exempt();
            conflicting.push(Conflicting { case: r.case.to_string(), exempt, mechanisms, unexplained, sites: all });
        }
        let exempt = commutative.iter().filter(|r| r.case.exempt()).count();
        let mut sites: Vec<SiteGroup> =
            sites.into_iter().map(|(site, (cases, example))| SiteGroup { site, cases, example }).collect();
        sites.sort_by(|a, b| b.cases.cmp(&a.cases).then_with(|| a.site.cmp(&b.site)));
        Generated {
            totals: Totals {
                cases: results.len(),
                commutative: commutative.len(),
                conflict_free: commutative.len() - conflicting.len(),
                exempt,
                exempt_conflict_free: exempt - conflicting.iter().filter(|c| c.exempt).count(),
            },
            conflicting,
            sites,
            known_conflicts: KNOWN_MECHANISMS.iter().map(|(name, _, why)| (*name, *why)).collect(),
        }
    }

    /// "conflict-free on X of N generated commutative cases", then the
    /// sites, then the known mechanisms and any case none explains.
    pub fn text(&self) -> String {
        use std::fmt::Write as _;
        let t = &self.totals;
        let percent = |of: usize, n: usize| if n == 0 { 0.0 } else { 100.0 * of as f64 / n as f64 };
        let (judged, judged_free) = t.judged();
        let mut out = format!(
            "generated: {} cases, {} commutative on the host; vfscale conflict-free on {} of {} generated \
             commutative cases ({:.1}%)\n",
            t.cases,
            t.commutative,
            t.conflict_free,
            t.commutative,
            percent(t.conflict_free, t.commutative)
        );
        let _ = writeln!(
            out,
            "  exempt: {} of them ({} conflict-free), {EXEMPTION}; without them, conflict-free on {judged_free} of \
             {judged} ({:.1}%)",
            t.exempt,
            t.exempt_conflict_free,
            percent(judged_free, judged)
        );
        for group in &self.sites {
            let _ = writeln!(out, "  site {} in {} cases, e.g. {}", group.site, group.cases, group.example);
        }
        let mut by_mechanism: BTreeMap<&str, usize> = BTreeMap::new();
        for c in &self.conflicting {
            for m in &c.mechanisms {
                *by_mechanism.entry(m).or_default() += 1;
            }
        }
        for (mechanism, n) in by_mechanism {
            let _ = writeln!(out, "  known: {mechanism}, in {n} cases: {}", self.known_conflicts[mechanism]);
        }
        for c in self.conflicting.iter().filter(|c| c.exempt) {
            let _ = writeln!(out, "  exempt case: {}", c.case);
        }
        for c in self.conflicting.iter().filter(|c| !c.unexplained.is_empty()) {
            let _ = writeln!(out, "  NOT KNOWN: {}: {}", c.case, c.unexplained.join(", "));
        }
        out
    }
}

/// Decides `case` on the host and, when it commutes, runs the checker on
/// it.
pub fn run_case(case: &Case) -> Result<CaseResult, String> {
    let decided = host::decide(case).map_err(|e| format!("{case}: on the host: {e}"))?;
    let conflicts = match &decided {
        Some(expected) => Some(check(case, *expected)?.conflicts.into_iter().map(|c| c.sites).collect()),
        None => None,
    };
    Ok(CaseResult { case: *case, commutes: decided.is_some(), conflicts })
}

/// The checker's verdict on `case`, on a fresh audited vfscale; each side
/// must give the result the host gave it (`expected`: A's, B's).
fn check(case: &Case, expected: [Outcome; 2]) -> Result<Verdict, String> {
    audited::release_barrier();
    let world = audited::world(Fs::Tmpfs)?;
    let (p, q) = (world.process(), world.process());
    let setup = Setup::build(&*p, &*q, INSTANCES).map_err(|e| format!("{case}: setting up vfscale: {e}"))?;
    let consumed = case.consumed();
    let side = |side: Side, byte: u8, want: Outcome| {
        let s = if side.in_q { q.clone() } else { p.clone() };
        let (setup, consumed) = (&setup, &consumed);
        move |i: usize| -> Result<(), String> {
            let got = s.call(&resolve(&side, consumed, setup, &*s, i, byte));
            if got.err() == want.err() && got.is_ok() == want.is_ok() {
                Ok(())
            } else {
                Err(format!("{side}: vfscale gives {} where the host gives {}", shown(got), shown(want)))
            }
        }
    };
    let (a, b) = (side(case.a, b'a', expected[0]), side(case.b, b'b', expected[1]));
    conflict::check_pair(&a, &b).map_err(|e| format!("{case}: {e}"))
}

/// An outcome as a message shows it.
fn shown(outcome: Outcome) -> String {
    match outcome {
        Ok(_) => "success".into(),
        Err(errno) => std::io::Error::from_raw_os_error(errno).to_string(),
    }
}

#[cfg(test)]
mod tests;
