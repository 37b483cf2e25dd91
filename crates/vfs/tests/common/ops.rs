//! The operation language of the randomized namespace tests: one system
//! call on the namespace ([`Op`], with its arguments [`Flags`] and
//! [`FdArg`]), what a successful call gives ([`Out`]), the call made on
//! vfscale ([`run_vfs`]), and the comparison of vfscale's answers with the
//! expected side's ([`Comparison`], over [`vfs_tree`] at the end).
//!
//! Two tests speak it. `model.rs` runs the calls on vfscale and on a
//! reference model of Linux, made by root or by an ordinary user;
//! `host_diff.rs` runs them on vfscale and, through `libc`, on the host
//! kernel. Each has its own expected side and its own strategies for whole
//! calls; the language is the union of what they need (only the model
//! makes `Chown` calls, for one). The argument strategies they share come
//! at the end.
//!
//! Generated paths may be of the form `@k` + suffix: [`Op::resolved`]
//! replaces `@k` with the `k`-th existing path, so that calls often find
//! something.
//!
//! Only those two tests include this file (by `#[path]`), so that the other
//! users of `common` do not compile it.

use proptest::prelude::*;
use proptest::sample::select;
use std::collections::BTreeMap;
use std::fmt;
use vfscale::mode::{S_IFDIR, S_IFLNK, S_IFMT};
use vfscale::{Errno, FileType, OpenFlags, Process, RenameFlags, Stat};

pub type Res<T> = Result<T, Errno>;

/// `open(2)` flags, shown by name in failure reports.
#[derive(Clone, Copy, PartialEq, Eq)]
pub struct Flags(pub i32);

impl Flags {
    pub fn has(self, flag: i32) -> bool {
        self.0 & flag != 0
    }
}

impl fmt::Debug for Flags {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let access = match self.0 & libc::O_ACCMODE {
            libc::O_RDONLY => "O_RDONLY",
            libc::O_WRONLY => "O_WRONLY",
            libc::O_RDWR => "O_RDWR",
            _ => "O_ACCMODE",
        };
        f.write_str(access)?;
        let named = [
            (libc::O_CREAT, "O_CREAT"),
            (libc::O_EXCL, "O_EXCL"),
            (libc::O_TRUNC, "O_TRUNC"),
            (libc::O_DIRECTORY, "O_DIRECTORY"),
            (libc::O_NOFOLLOW, "O_NOFOLLOW"),
            (libc::O_APPEND, "O_APPEND"),
        ];
        for (flag, name) in named {
            if self.has(flag) {
                write!(f, "|{name}")?;
            }
        }
        Ok(())
    }
}

/// A descriptor argument: a number in vfscale's table of the calling
/// process (handed out lowest first, so it may be unused: EBADF), or
/// whatever the latest successful `open` returned, which
/// [`Op::resolved`] turns into its number.
#[derive(Clone, Copy, Debug)]
pub enum FdArg {
    Latest,
    Num(i32),
}

impl FdArg {
    pub fn num(self) -> i32 {
        match self {
            FdArg::Num(fd) => fd,
            FdArg::Latest => unreachable!("`Op::resolved` replaces FdArg::Latest before a call is made"),
        }
    }
}

/// One system call. Relative paths start at the working directory, which
/// is the root on every side.
#[derive(Clone, Debug)]
pub enum Op {
    Mkdir(String, u32),
    Rmdir(String),
    Unlink(String),
    /// `renameat2`, with `RENAME_NOREPLACE` or no flags.
    Rename {
        from: String,
        to: String,
        noreplace: bool,
    },
    /// `link(old, new)`, not following a symlink `old`.
    Link(String, String),
    Symlink {
        target: String,
        path: String,
    },
    Readlink(String),
    Open(String, Flags, u32),
    Write(FdArg, Vec<u8>),
    /// Reads at most this many bytes.
    Read(FdArg, usize),
    Close(FdArg),
    Ftruncate(FdArg, i64),
    Stat(String),
    Lstat(String),
    Chmod(String, u32),
    /// `chown` if `follow`, else `lchown`; `None` leaves that id as it is.
    // Only the model makes these: `host_diff` does not compare owners.
    #[allow(dead_code)]
    Chown {
        path: String,
        uid: Option<u32>,
        gid: Option<u32>,
        follow: bool,
    },
    /// Every entry of a directory, `.` and `..` included.
    ListDir(String),
}

impl Op {
    /// The call with [`FdArg::Latest`] replaced by `latest` (-1 when no
    /// `open` succeeded yet), and each path of the form `@k` + suffix by
    /// the `k`-th (modulo their number) of the `existing` paths + suffix.
    pub fn resolved(&self, latest: i32, existing: &[String]) -> Op {
        let fd = |fd: &FdArg| match fd {
            FdArg::Latest => FdArg::Num(latest),
            fd => *fd,
        };
        let path = |path: &String| match path.strip_prefix('@') {
            Some(rest) => {
                let digits = rest.find(|c: char| !c.is_ascii_digit()).unwrap_or(rest.len());
                let k: usize = rest[..digits].parse().expect("@ is followed by a number");
                format!("{}{}", existing[k % existing.len()], &rest[digits..])
            }
            None => path.clone(),
        };
        match self {
            Op::Mkdir(p, perm) => Op::Mkdir(path(p), *perm),
            Op::Rmdir(p) => Op::Rmdir(path(p)),
            Op::Unlink(p) => Op::Unlink(path(p)),
            Op::Rename { from, to, noreplace } => Op::Rename { from: path(from), to: path(to), noreplace: *noreplace },
            Op::Link(old, new) => Op::Link(path(old), path(new)),
            Op::Symlink { target, path: p } => Op::Symlink { target: path(target), path: path(p) },
            Op::Readlink(p) => Op::Readlink(path(p)),
            Op::Open(p, flags, perm) => Op::Open(path(p), *flags, *perm),
            Op::Write(f, data) => Op::Write(fd(f), data.clone()),
            Op::Read(f, len) => Op::Read(fd(f), *len),
            Op::Close(f) => Op::Close(fd(f)),
            Op::Ftruncate(f, len) => Op::Ftruncate(fd(f), *len),
            Op::Stat(p) => Op::Stat(path(p)),
            Op::Lstat(p) => Op::Lstat(path(p)),
            Op::Chmod(p, perm) => Op::Chmod(path(p), *perm),
            Op::Chown { path: p, uid, gid, follow } => {
                Op::Chown { path: path(p), uid: *uid, gid: *gid, follow: *follow }
            }
            Op::ListDir(p) => Op::ListDir(path(p)),
        }
    }
}

/// What `stat` tells about a node. `ident` is the node's identity on its
/// side (a model node id, an inode number), compared only as a one-to-one
/// correspondence (see [`Comparison`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Attr {
    pub file_type: FileType,
    /// Permission, set-id and sticky bits.
    pub perm: u32,
    pub nlink: u32,
    pub uid: u32,
    pub gid: u32,
    pub size: u64,
    pub ident: u64,
}

impl Attr {
    pub fn of(stat: Stat) -> Attr {
        let file_type = match stat.mode & S_IFMT {
            S_IFDIR => FileType::Directory,
            S_IFLNK => FileType::Symlink,
            _ => FileType::Regular,
        };
        Attr {
            file_type,
            perm: stat.mode & 0o7777,
            nlink: stat.nlink,
            uid: stat.uid,
            gid: stat.gid,
            size: stat.size,
            ident: stat.ino,
        }
    }
}

/// A directory entry: name, type, ident.
pub type Entry = (Vec<u8>, FileType, u64);

/// The successful result of a call.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Out {
    Done,
    Fd(i32),
    Count(usize),
    Bytes(Vec<u8>),
    Attr(Attr),
    /// Sorted by name.
    Entries(Vec<Entry>),
}

impl Out {
    /// Takes the idents out (leaving 0), so the rest compares with `==`.
    fn take_idents(&mut self) -> Vec<u64> {
        match self {
            Out::Attr(attr) => vec![std::mem::take(&mut attr.ident)],
            Out::Entries(entries) => entries.iter_mut().map(|e| std::mem::take(&mut e.2)).collect(),
            _ => Vec::new(),
        }
    }
}

/// Makes the call `op` as `p`.
pub fn run_vfs(p: &Process, op: &Op) -> Res<Out> {
    match op {
        Op::Mkdir(path, perm) => p.mkdir(path, *perm).map(|()| Out::Done),
        Op::Rmdir(path) => p.rmdir(path).map(|()| Out::Done),
        Op::Unlink(path) => p.unlink(path).map(|()| Out::Done),
        Op::Rename { from, to, noreplace } => {
            p.rename2(from, to, RenameFlags { noreplace: *noreplace }).map(|()| Out::Done)
        }
        Op::Link(old, new) => p.link(old, new).map(|()| Out::Done),
        Op::Symlink { target, path } => p.symlink(target, path).map(|()| Out::Done),
        Op::Readlink(path) => p.readlink(path).map(Out::Bytes),
        Op::Open(path, flags, perm) => p.open(path, OpenFlags(flags.0), *perm).map(Out::Fd),
        Op::Write(fd, data) => p.write(fd.num(), data).map(Out::Count),
        Op::Read(fd, len) => {
            let mut buf = vec![0; *len];
            p.read(fd.num(), &mut buf).map(|n| Out::Bytes(buf[..n].to_vec()))
        }
        Op::Close(fd) => p.close(fd.num()).map(|()| Out::Done),
        Op::Ftruncate(fd, len) => p.ftruncate(fd.num(), *len).map(|()| Out::Done),
        Op::Stat(path) => p.stat(path).map(|s| Out::Attr(Attr::of(s))),
        Op::Lstat(path) => p.lstat(path).map(|s| Out::Attr(Attr::of(s))),
        Op::Chmod(path, perm) => p.chmod(path, *perm).map(|()| Out::Done),
        Op::Chown { path, uid, gid, follow: true } => p.chown(path, *uid, *gid).map(|()| Out::Done),
        Op::Chown { path, uid, gid, follow: false } => p.lchown(path, *uid, *gid).map(|()| Out::Done),
        Op::ListDir(path) => p.list_dir(path).map(|entries| {
            let mut entries: Vec<_> = entries.into_iter().map(|e| (e.name, e.file_type, e.ino)).collect();
            entries.sort_by(|a, b| a.0.cmp(&b.0));
            Out::Entries(entries)
        }),
    }
}

/// Every name in a tree with its attributes and contents (file data or
/// symlink target), keyed by its path from the root without the leading
/// slash; the root itself is `.`.
pub type Tree = BTreeMap<String, (Attr, Vec<u8>)>;

/// vfscale's tree as `root` (who must be able to read everything) sees it.
pub fn vfs_tree(root: &Process) -> Tree {
    let mut out = Tree::new();
    out.insert(".".to_string(), (Attr::of(root.stat("/").expect("stat /")), Vec::new()));
    let mut pending = vec![String::new()];
    while let Some(dir) = pending.pop() {
        for entry in root.list_dir(format!("/{dir}")).expect("list a directory") {
            if entry.name == b"." || entry.name == b".." {
                continue;
            }
            let name = String::from_utf8(entry.name).expect("generated names are ASCII");
            let path = if dir.is_empty() { name } else { format!("{dir}/{name}") };
            let attr = Attr::of(root.lstat(&path).expect("lstat a listed name"));
            let content = match attr.file_type {
                FileType::Directory => {
                    pending.push(path.clone());
                    Vec::new()
                }
                FileType::Symlink => root.readlink(&path).expect("readlink a listed symlink"),
                FileType::Regular => {
                    let fd = root.open(&path, OpenFlags::RDONLY, 0).expect("open a listed file");
                    let mut data = vec![0; attr.size as usize + 1];
                    let n = root.read(fd, &mut data).expect("read a listed file");
                    root.close(fd).expect("close");
                    data.truncate(n);
                    data
                }
                FileType::Fifo | FileType::Socket | FileType::CharDevice | FileType::BlockDevice => {
                    unreachable!("the generated operations make no special files")
                }
            };
            out.insert(path, (attr, content));
        }
    }
    out
}

/// Compares vfscale's answers with the expected side's, call by call and
/// then tree against tree. Idents are never compared as numbers; they must
/// correspond one to one (hard links share one on both sides, nothing else
/// does), as far as they have been seen.
#[derive(Debug)]
pub struct Comparison {
    /// The expected side as failure messages name it.
    expected_side: &'static str,
    to_actual: BTreeMap<u64, u64>,
    to_expected: BTreeMap<u64, u64>,
}

impl Comparison {
    pub fn new(expected_side: &'static str) -> Comparison {
        Comparison { expected_side, to_actual: BTreeMap::new(), to_expected: BTreeMap::new() }
    }

    fn pair(&mut self, expected: u64, actual: u64) -> Result<(), String> {
        match (self.to_actual.get(&expected), self.to_expected.get(&actual)) {
            (None, None) => {
                self.to_actual.insert(expected, actual);
                self.to_expected.insert(actual, expected);
                Ok(())
            }
            (Some(&a), Some(&e)) if a == actual && e == expected => Ok(()),
            (a, e) => Err(format!(
                "identity mismatch: {side}'s {expected} is vfscale's {a:?} so far, vfscale's {actual} is {side}'s {e:?}",
                side = self.expected_side
            )),
        }
    }

    /// The results of one call; the error says how they differ.
    pub fn results(&mut self, mut expected: Res<Out>, mut actual: Res<Out>) -> Result<(), String> {
        if let (Ok(expected), Ok(actual)) = (&mut expected, &mut actual) {
            for (e, a) in expected.take_idents().into_iter().zip(actual.take_idents()) {
                self.pair(e, a)?;
            }
        }
        if expected != actual {
            return Err(format!("{} gives {expected:?}, vfscale {actual:?}", self.expected_side));
        }
        Ok(())
    }

    /// The final trees: the same names, and the same attributes and
    /// contents under each.
    pub fn trees(&mut self, expected: Tree, actual: Tree) -> Result<(), String> {
        let side = self.expected_side;
        let names = |tree: &Tree| tree.keys().cloned().collect::<Vec<_>>();
        if names(&expected) != names(&actual) {
            return Err(format!("final names: {side} has {:?}, vfscale {:?}", names(&expected), names(&actual)));
        }
        for ((path, (mut want, want_content)), (_, (mut got, got_content))) in expected.into_iter().zip(actual) {
            self.pair(want.ident, got.ident).map_err(|e| format!("final {path}: {e}"))?;
            (want.ident, got.ident) = (0, 0);
            if (&want, &want_content) != (&got, &got_content) {
                return Err(format!(
                    "final {path}: {side} has {want:?} {want_content:?}, vfscale {got:?} {got_content:?}"
                ));
            }
        }
        Ok(())
    }
}

// ---------------------------------------------------------------------------
// Strategies for arguments, the same in both tests.
// ---------------------------------------------------------------------------

pub fn name() -> impl Strategy<Value = &'static str> + Clone {
    prop_oneof![Just("a"), Just("b"), Just("c")]
}

/// One to three components from `component` (shorter more often, since
/// deep names rarely exist), joined by one slash or, rarely, two.
pub fn components(component: impl Strategy<Value = &'static str> + Clone) -> impl Strategy<Value = String> {
    let depth = prop_oneof![4 => Just(1), 3 => Just(2), 1 => Just(3)];
    let separator = prop_oneof![12 => Just("/"), 1 => Just("//")];
    depth.prop_flat_map(move |n| prop::collection::vec((component.clone(), separator.clone()), n)).prop_map(|parts| {
        let mut path = String::new();
        for (i, (name, separator)) in parts.iter().enumerate() {
            if i > 0 {
                path.push_str(separator);
            }
            path.push_str(name);
        }
        path
    })
}

pub fn fd_arg() -> impl Strategy<Value = FdArg> {
    prop_oneof![3 => Just(FdArg::Latest), 1 => (0..4i32).prop_map(FdArg::Num)]
}

pub fn data() -> impl Strategy<Value = Vec<u8>> {
    prop::collection::vec(b'p'..=b'z', 0..6)
}

pub fn open_flags() -> impl Strategy<Value = Flags> {
    let access = prop_oneof![
        4 => select(vec![libc::O_RDONLY, libc::O_WRONLY, libc::O_RDWR]),
        1 => Just(libc::O_ACCMODE)
    ];
    let extra = [
        (libc::O_CREAT, 0.45),
        (libc::O_EXCL, 0.15),
        (libc::O_TRUNC, 0.2),
        (libc::O_DIRECTORY, 0.12),
        (libc::O_NOFOLLOW, 0.12),
        (libc::O_APPEND, 0.2),
    ]
    .map(|(flag, p)| prop::bool::weighted(p).prop_map(move |on| if on { flag } else { 0 }));
    (access, extra).prop_map(|(access, extra)| Flags(extra.into_iter().fold(access, |all, flag| all | flag)))
}

/// The seed of the random cases: `PROPTEST_RNG_SEED`, or a fixed one.
pub fn seed() -> proptest::test_runner::RngSeed {
    proptest::test_runner::RngSeed::Fixed(vfscale_sync::test_support::case_seed(0x5eed_f0e5))
}

/// The number of random cases: `PROPTEST_CASES`, or 64.
pub fn cases() -> u32 {
    std::env::var("PROPTEST_CASES").ok().and_then(|v| v.parse().ok()).unwrap_or(64)
}
