//! Model-based test of the namespace operations: random sequences of system
//! calls, made by root and by an ordinary user, run against vfscale and
//! against a small reference model of Linux written here. Both must give the
//! same result (value or errno) for every call and end with the same tree.
//!
//! The model is deliberately naive: nodes in a vector indexed by id (hard
//! links share an id), path resolution written out as `fs/namei.c` does it,
//! and each system call as Linux's checks in Linux's order, with the kernel
//! function it follows named in its comment. Link counts are computed from
//! the tree on demand rather than maintained, so they check vfscale's
//! bookkeeping instead of repeating it. Sizes of directories are 0 and there
//! is no umask, as in vfscale (and ramfs).
//!
//! Cases come from `PROPTEST_CASES` (default 64), each under one of the 16
//! [`VfsConfig`] design variants. Each case is a few calls that build
//! a tree, then up to 50 calls of any kind, over the names `a` to `e`, `.`
//! and `..`, at most three deep (often naming an existing path, see
//! [`Op::resolved`]). Fixed sequences at the end pin rules on which vfscale
//! and Linux have differed.

mod common;

use common::all_configs;
use proptest::prelude::*;
use proptest::sample::select;
use proptest::test_runner::Config;
use std::collections::BTreeMap;
use std::fmt;
use vfscale::mode::{S_IFMT, S_ISGID, S_ISUID, S_ISVTX, S_IXGRP};
use vfscale::{Credentials, Errno, FileType, OpenFlags, Process, RenameFlags, Stat, Vfs, VfsConfig};

/// Linux `MAXSYMLINKS`: the most symlinks one path walk follows.
const MAX_SYMLINKS: u32 = 40;
const MAY_READ: u32 = 4;
const MAY_WRITE: u32 = 2;
const MAY_EXEC: u32 = 1;

/// Who makes a call: root, or uid 1000 with gid 1000 and groups [1000].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Who {
    Root,
    User,
}

impl Who {
    fn index(self) -> usize {
        self as usize
    }

    fn uid(self) -> u32 {
        match self {
            Who::Root => 0,
            Who::User => 1000,
        }
    }

    fn gid(self) -> u32 {
        self.uid()
    }

    fn is_root(self) -> bool {
        self == Who::Root
    }

    fn in_group(self, gid: u32) -> bool {
        gid == self.gid()
    }

    fn credentials(self) -> Credentials {
        match self {
            Who::Root => Credentials::root(),
            Who::User => Credentials::user(1000, 1000, [1000]),
        }
    }
}

/// `open(2)` flags, shown by name in failure reports.
#[derive(Clone, Copy, PartialEq, Eq)]
struct Flags(i32);

impl Flags {
    fn has(self, flag: i32) -> bool {
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

/// A descriptor argument: a number from the caller's own table (handed out
/// lowest first, so it may be unused: EBADF), or whatever the latest
/// successful `open` returned, used by the process that opened it.
#[derive(Clone, Copy, Debug)]
enum FdArg {
    Latest,
    Num(i32),
}

impl FdArg {
    fn num(self) -> i32 {
        match self {
            FdArg::Num(fd) => fd,
            FdArg::Latest => unreachable!("`check` resolves FdArg::Latest before running a call"),
        }
    }
}

/// One system call.
#[derive(Clone, Debug)]
enum Op {
    Mkdir(Who, String, u32),
    Rmdir(Who, String),
    Unlink(Who, String),
    Rename { who: Who, from: String, to: String, noreplace: bool },
    Link(Who, String, String),
    Symlink { who: Who, target: String, path: String },
    Readlink(Who, String),
    Open(Who, String, Flags, u32),
    Write(Who, FdArg, Vec<u8>),
    Read(Who, FdArg, usize),
    Close(Who, FdArg),
    Ftruncate(Who, FdArg, i64),
    Stat(Who, String),
    Lstat(Who, String),
    Chmod(Who, String, u32),
    Chown { who: Who, path: String, uid: Option<u32>, gid: Option<u32>, follow: bool },
    ListDir(Who, String),
}

impl Op {
    /// The call with [`FdArg::Latest`] replaced by `latest` (who opened
    /// what; `None` before any open succeeded), and each path of the form
    /// `@k` + suffix by the `k`-th (modulo their number) of the `existing`
    /// paths + suffix, so that calls often name something that exists.
    fn resolved(&self, latest: Option<(Who, i32)>, existing: &[String]) -> Op {
        let fd = |who: &Who, fd: &FdArg| match (fd, latest) {
            (FdArg::Latest, Some((opener, fd))) => (opener, FdArg::Num(fd)),
            (FdArg::Latest, None) => (*who, FdArg::Num(-1)),
            (fd, _) => (*who, *fd),
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
            Op::Mkdir(who, p, perm) => Op::Mkdir(*who, path(p), *perm),
            Op::Rmdir(who, p) => Op::Rmdir(*who, path(p)),
            Op::Unlink(who, p) => Op::Unlink(*who, path(p)),
            Op::Rename { who, from, to, noreplace } => {
                Op::Rename { who: *who, from: path(from), to: path(to), noreplace: *noreplace }
            }
            Op::Link(who, old, new) => Op::Link(*who, path(old), path(new)),
            Op::Symlink { who, target, path: p } => Op::Symlink { who: *who, target: path(target), path: path(p) },
            Op::Readlink(who, p) => Op::Readlink(*who, path(p)),
            Op::Open(who, p, flags, perm) => Op::Open(*who, path(p), *flags, *perm),
            Op::Write(who, f, data) => {
                let (who, f) = fd(who, f);
                Op::Write(who, f, data.clone())
            }
            Op::Read(who, f, len) => {
                let (who, f) = fd(who, f);
                Op::Read(who, f, *len)
            }
            Op::Close(who, f) => {
                let (who, f) = fd(who, f);
                Op::Close(who, f)
            }
            Op::Ftruncate(who, f, len) => {
                let (who, f) = fd(who, f);
                Op::Ftruncate(who, f, *len)
            }
            Op::Stat(who, p) => Op::Stat(*who, path(p)),
            Op::Lstat(who, p) => Op::Lstat(*who, path(p)),
            Op::Chmod(who, p, perm) => Op::Chmod(*who, path(p), *perm),
            Op::Chown { who, path: p, uid, gid, follow } => {
                Op::Chown { who: *who, path: path(p), uid: *uid, gid: *gid, follow: *follow }
            }
            Op::ListDir(who, p) => Op::ListDir(*who, path(p)),
        }
    }
}

/// What `stat` tells about a node; `ident` is the model's node id or
/// vfscale's inode number (see [`Idents`]).
#[derive(Clone, Debug, PartialEq, Eq)]
struct Attr {
    file_type: FileType,
    perm: u32,
    nlink: u32,
    uid: u32,
    gid: u32,
    size: u64,
    ident: u64,
}

/// The successful result of a call.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Out {
    Done,
    Fd(i32),
    Count(usize),
    Bytes(Vec<u8>),
    Attr(Attr),
    /// Directory entries sorted by name: name, type, ident.
    Entries(Vec<(Vec<u8>, FileType, u64)>),
}

type Res<T> = Result<T, Errno>;

// ---------------------------------------------------------------------------
// The reference model.
// ---------------------------------------------------------------------------

type Id = usize;
const ROOT: Id = 0;

#[derive(Clone, Debug)]
enum Body {
    /// The root is its own parent.
    Dir {
        parent: Id,
        children: BTreeMap<String, Id>,
    },
    File(Vec<u8>),
    Symlink(String),
}

#[derive(Clone, Debug)]
struct Node {
    body: Body,
    /// Permission, set-id and sticky bits.
    perm: u32,
    uid: u32,
    gid: u32,
}

/// An open file description.
#[derive(Clone, Debug)]
struct Desc {
    node: Id,
    readable: bool,
    writable: bool,
    append: bool,
    offset: usize,
}

/// The last component of a path (Linux `last_type`).
#[derive(Clone, Debug, PartialEq, Eq)]
enum Last {
    Root,
    Dot,
    DotDot,
    Normal(String),
}

/// Nodes are never freed: an unlinked file may still be open, and ids must
/// not be reused.
#[derive(Clone, Debug)]
struct Model {
    nodes: Vec<Node>,
    /// Descriptor tables of root and the user.
    fds: [Vec<Option<Desc>>; 2],
}

impl Model {
    fn new() -> Model {
        let root = Node { body: Body::Dir { parent: ROOT, children: BTreeMap::new() }, perm: 0o755, uid: 0, gid: 0 };
        Model { nodes: vec![root], fds: [Vec::new(), Vec::new()] }
    }

    fn is_dir(&self, id: Id) -> bool {
        matches!(self.nodes[id].body, Body::Dir { .. })
    }

    fn children(&self, dir: Id) -> &BTreeMap<String, Id> {
        match &self.nodes[dir].body {
            Body::Dir { children, .. } => children,
            _ => unreachable!("node {dir} is not a directory"),
        }
    }

    fn children_mut(&mut self, dir: Id) -> &mut BTreeMap<String, Id> {
        match &mut self.nodes[dir].body {
            Body::Dir { children, .. } => children,
            _ => unreachable!("node {dir} is not a directory"),
        }
    }

    fn parent(&self, dir: Id) -> Id {
        match self.nodes[dir].body {
            Body::Dir { parent, .. } => parent,
            _ => unreachable!("node {dir} is not a directory"),
        }
    }

    fn child(&self, dir: Id, name: &str) -> Option<Id> {
        self.children(dir).get(name).copied()
    }

    /// Linux `generic_permission`, with root's `CAP_DAC_OVERRIDE`: root may
    /// do anything except execute a non-directory without any execute bit.
    fn permitted(&self, who: Who, id: Id, mask: u32) -> bool {
        let node = &self.nodes[id];
        if who.is_root() {
            return mask & MAY_EXEC == 0 || self.is_dir(id) || node.perm & 0o111 != 0;
        }
        let bits = if who.uid() == node.uid {
            node.perm >> 6
        } else if who.in_group(node.gid) {
            node.perm >> 3
        } else {
            node.perm
        };
        mask & !bits & 0o7 == 0
    }

    fn require(&self, who: Who, id: Id, mask: u32) -> Res<()> {
        if self.permitted(who, id, mask) {
            Ok(())
        } else {
            Err(Errno::EACCES)
        }
    }

    /// Resolves `path` from the directory `start` (Linux `link_path_walk`
    /// plus `lookup_last`): each component needs its directory to be a
    /// directory (ENOTDIR) and searchable (EACCES) before it is looked up
    /// (ENOENT). Symlinks are followed except a final one when
    /// `follow_last` is false and no slash follows it; `links` counts every
    /// symlink followed in the whole walk (ELOOP beyond 40).
    fn resolve(&self, who: Who, start: Id, path: &str, follow_last: bool, links: &mut u32) -> Res<Id> {
        let names: Vec<&str> = path.split('/').filter(|name| !name.is_empty()).collect();
        let trailing_slash = path.ends_with('/') && !names.is_empty();
        let mut cur = if path.starts_with('/') { ROOT } else { start };
        for (i, &name) in names.iter().enumerate() {
            if !self.is_dir(cur) {
                return Err(Errno::ENOTDIR);
            }
            self.require(who, cur, MAY_EXEC)?;
            let is_last = i + 1 == names.len();
            cur = match name {
                "." => cur,
                ".." => self.parent(cur),
                _ => {
                    let child = self.child(cur, name).ok_or(Errno::ENOENT)?;
                    match &self.nodes[child].body {
                        Body::Symlink(target) if !is_last || follow_last || trailing_slash => {
                            *links += 1;
                            if *links > MAX_SYMLINKS {
                                return Err(Errno::ELOOP);
                            }
                            self.resolve(who, cur, target, true, links)?
                        }
                        _ => child,
                    }
                }
            };
        }
        if trailing_slash && !self.is_dir(cur) {
            return Err(Errno::ENOTDIR);
        }
        Ok(cur)
    }

    /// `resolve` from the working directory, which is always the root.
    fn lookup(&self, who: Who, path: &str, follow: bool) -> Res<Id> {
        if path.is_empty() {
            return Err(Errno::ENOENT);
        }
        self.resolve(who, ROOT, path, follow, &mut 0)
    }

    /// Linux `filename_parentat`: resolves all but the last component, which
    /// its directory must be able to search, and returns the directory, the
    /// last component and whether slashes follow it.
    fn lookup_parent(&self, who: Who, start: Id, path: &str, links: &mut u32) -> Res<(Id, Last, bool)> {
        let names: Vec<&str> = path.split('/').filter(|name| !name.is_empty()).collect();
        let mut dir = if path.starts_with('/') { ROOT } else { start };
        let Some((&last, prefix)) = names.split_last() else {
            return Ok((dir, Last::Root, false));
        };
        if !prefix.is_empty() {
            dir = self.resolve(who, dir, &prefix.join("/"), true, links)?;
        }
        if !self.is_dir(dir) {
            return Err(Errno::ENOTDIR);
        }
        self.require(who, dir, MAY_EXEC)?;
        let last = match last {
            "." => Last::Dot,
            ".." => Last::DotDot,
            name => Last::Normal(name.to_string()),
        };
        Ok((dir, last, path.ends_with('/')))
    }

    fn parent_of_path(&self, who: Who, path: &str) -> Res<(Id, Last, bool)> {
        if path.is_empty() {
            return Err(Errno::ENOENT);
        }
        self.lookup_parent(who, ROOT, path, &mut 0)
    }

    /// Linux `may_create`: write and search permission on the directory.
    fn may_create(&self, who: Who, dir: Id) -> Res<()> {
        self.require(who, dir, MAY_WRITE | MAY_EXEC)
    }

    /// Linux `may_delete`: write and search permission on the directory,
    /// the sticky rule (`check_sticky`), then the victim's type.
    fn may_delete(&self, who: Who, dir: Id, victim: Id, removing_dir: bool) -> Res<()> {
        self.may_create(who, dir)?;
        let sticky = self.nodes[dir].perm & S_ISVTX != 0;
        let owns = who.uid() == self.nodes[victim].uid || who.uid() == self.nodes[dir].uid;
        if sticky && !owns && !who.is_root() {
            return Err(Errno::EPERM);
        }
        match (removing_dir, self.is_dir(victim)) {
            (true, false) => Err(Errno::ENOTDIR),
            (false, true) => Err(Errno::EISDIR),
            _ => Ok(()),
        }
    }

    /// A new node named `name` in `dir` (Linux `inode_init_owner`): owned
    /// by the caller, with the directory's group if it is set-group-ID
    /// (and then a new directory is set-group-ID too).
    fn add_node(&mut self, who: Who, dir: Id, name: String, body: Body, perm: u32) -> Id {
        let is_dir = matches!(body, Body::Dir { .. });
        let parent = &self.nodes[dir];
        let (gid, perm) = if parent.perm & S_ISGID != 0 {
            (parent.gid, if is_dir { perm | S_ISGID } else { perm })
        } else {
            (who.gid(), perm)
        };
        let id = self.nodes.len();
        self.nodes.push(Node { body, perm, uid: who.uid(), gid });
        self.children_mut(dir).insert(name, id);
        id
    }

    /// The directory `.`, `..` or `/` names, seen from `dir`.
    fn dots(&self, dir: Id, last: &Last) -> Id {
        match last {
            Last::DotDot => self.parent(dir),
            _ => dir,
        }
    }

    fn reachable_dirs(&self) -> Vec<Id> {
        let mut dirs = vec![ROOT];
        let mut i = 0;
        while i < dirs.len() {
            let subdirs = self.children(dirs[i]).values().copied().filter(|&c| self.is_dir(c));
            dirs.extend(subdirs.collect::<Vec<_>>());
            i += 1;
        }
        dirs
    }

    /// Counted from the tree: a directory has `.`, its name and each
    /// subdirectory's `..`; anything else has one link per name.
    fn nlink(&self, id: Id) -> u32 {
        let dirs = self.reachable_dirs();
        if self.is_dir(id) {
            if !dirs.contains(&id) {
                return 0;
            }
            return 2 + self.children(id).values().filter(|&&c| self.is_dir(c)).count() as u32;
        }
        dirs.iter().map(|&d| self.children(d).values().filter(|&&c| c == id).count() as u32).sum()
    }

    fn attr(&self, id: Id) -> Attr {
        let node = &self.nodes[id];
        let (file_type, size) = match &node.body {
            Body::Dir { .. } => (FileType::Directory, 0),
            Body::File(data) => (FileType::Regular, data.len() as u64),
            Body::Symlink(target) => (FileType::Symlink, target.len() as u64),
        };
        Attr { file_type, perm: node.perm, nlink: self.nlink(id), uid: node.uid, gid: node.gid, size, ident: id as u64 }
    }

    /// Linux `setattr_should_drop_suidgid` as a write or truncate applies
    /// it: unless the caller has `CAP_FSETID`, set-user-ID goes, and
    /// set-group-ID goes if group-executable or not the caller's group.
    fn remove_privileges(&mut self, who: Who, id: Id) {
        let node = &mut self.nodes[id];
        if who.is_root() {
            return;
        }
        node.perm &= !S_ISUID;
        if node.perm & S_IXGRP != 0 || !who.in_group(node.gid) {
            node.perm &= !S_ISGID;
        }
    }

    fn apply(&mut self, op: &Op) -> Res<Out> {
        match op {
            Op::Mkdir(who, path, perm) => self.mkdir(*who, path, *perm).map(|()| Out::Done),
            Op::Rmdir(who, path) => self.rmdir(*who, path).map(|()| Out::Done),
            Op::Unlink(who, path) => self.unlink(*who, path).map(|()| Out::Done),
            Op::Rename { who, from, to, noreplace } => self.rename(*who, from, to, *noreplace).map(|()| Out::Done),
            Op::Link(who, old, new) => self.link(*who, old, new).map(|()| Out::Done),
            Op::Symlink { who, target, path } => self.symlink(*who, target, path).map(|()| Out::Done),
            Op::Readlink(who, path) => self.readlink(*who, path).map(Out::Bytes),
            Op::Open(who, path, flags, perm) => self.open(*who, path, *flags, *perm).map(Out::Fd),
            Op::Write(who, fd, data) => self.write(*who, fd.num(), data).map(Out::Count),
            Op::Read(who, fd, len) => self.read(*who, fd.num(), *len).map(Out::Bytes),
            Op::Close(who, fd) => self.close(*who, fd.num()).map(|()| Out::Done),
            Op::Ftruncate(who, fd, len) => self.ftruncate(*who, fd.num(), *len).map(|()| Out::Done),
            Op::Stat(who, path) => self.lookup(*who, path, true).map(|id| Out::Attr(self.attr(id))),
            Op::Lstat(who, path) => self.lookup(*who, path, false).map(|id| Out::Attr(self.attr(id))),
            Op::Chmod(who, path, perm) => self.chmod(*who, path, *perm).map(|()| Out::Done),
            Op::Chown { who, path, uid, gid, follow } => {
                self.chown(*who, path, *uid, *gid, *follow).map(|()| Out::Done)
            }
            Op::ListDir(who, path) => self.list_dir(*who, path).map(Out::Entries),
        }
    }

    /// Linux `do_mkdirat`: `filename_create`, then `vfs_mkdir`.
    fn mkdir(&mut self, who: Who, path: &str, perm: u32) -> Res<()> {
        let (dir, last, _) = self.parent_of_path(who, path)?;
        let Last::Normal(name) = last else { return Err(Errno::EEXIST) };
        if self.child(dir, &name).is_some() {
            return Err(Errno::EEXIST);
        }
        self.may_create(who, dir)?;
        let body = Body::Dir { parent: dir, children: BTreeMap::new() };
        self.add_node(who, dir, name, body, perm & (0o777 | S_ISVTX));
        Ok(())
    }

    /// Linux `do_rmdir`, `vfs_rmdir`, `simple_rmdir`.
    fn rmdir(&mut self, who: Who, path: &str) -> Res<()> {
        let (dir, last, _) = self.parent_of_path(who, path)?;
        let name = match last {
            Last::Normal(name) => name,
            Last::Dot => return Err(Errno::EINVAL),
            Last::DotDot => return Err(Errno::ENOTEMPTY),
            Last::Root => return Err(Errno::EBUSY),
        };
        let victim = self.child(dir, &name).ok_or(Errno::ENOENT)?;
        self.may_delete(who, dir, victim, true)?;
        if !self.children(victim).is_empty() {
            return Err(Errno::ENOTEMPTY);
        }
        self.children_mut(dir).remove(&name);
        Ok(())
    }

    /// Linux `do_unlinkat`: a trailing slash is judged on the entry itself
    /// (a symlink to a directory is not a directory), then `vfs_unlink`.
    fn unlink(&mut self, who: Who, path: &str) -> Res<()> {
        let (dir, last, trailing_slash) = self.parent_of_path(who, path)?;
        let Last::Normal(name) = last else { return Err(Errno::EISDIR) };
        let victim = self.child(dir, &name).ok_or(Errno::ENOENT)?;
        if trailing_slash {
            return Err(if self.is_dir(victim) { Errno::EISDIR } else { Errno::ENOTDIR });
        }
        self.may_delete(who, dir, victim, false)?;
        self.children_mut(dir).remove(&name);
        Ok(())
    }

    /// Linux `filename_create` for a non-directory: the new name must not
    /// exist (EEXIST, also for `.`, `..`, `/`) and must not have a trailing
    /// slash (ENOENT); returns the directory and name.
    fn create_target(&self, who: Who, path: &str) -> Res<(Id, String)> {
        let (dir, last, trailing_slash) = self.parent_of_path(who, path)?;
        let Last::Normal(name) = last else { return Err(Errno::EEXIST) };
        if self.child(dir, &name).is_some() {
            return Err(Errno::EEXIST);
        }
        if trailing_slash {
            return Err(Errno::ENOENT);
        }
        Ok((dir, name))
    }

    /// Linux `do_linkat` (without `AT_SYMLINK_FOLLOW`, and with
    /// `fs.protected_hardlinks` at the kernel default 0), then `vfs_link`.
    fn link(&mut self, who: Who, old: &str, new: &str) -> Res<()> {
        let source = self.lookup(who, old, false)?;
        let (dir, name) = self.create_target(who, new)?;
        self.may_create(who, dir)?;
        if self.is_dir(source) {
            return Err(Errno::EPERM);
        }
        self.children_mut(dir).insert(name, source);
        Ok(())
    }

    /// Linux `do_symlinkat`: `getname` of the target, `filename_create`,
    /// then `vfs_symlink`.
    fn symlink(&mut self, who: Who, target: &str, path: &str) -> Res<()> {
        if target.is_empty() {
            return Err(Errno::ENOENT);
        }
        let (dir, name) = self.create_target(who, path)?;
        self.may_create(who, dir)?;
        self.add_node(who, dir, name, Body::Symlink(target.to_string()), 0o777);
        Ok(())
    }

    /// Linux `do_readlinkat`.
    fn readlink(&self, who: Who, path: &str) -> Res<Vec<u8>> {
        match &self.nodes[self.lookup(who, path, false)?].body {
            Body::Symlink(target) => Ok(target.as_bytes().to_vec()),
            _ => Err(Errno::EINVAL),
        }
    }

    /// The child of `ancestor` on the way down to `dir`, if `ancestor` is a
    /// proper ancestor of `dir`.
    fn child_towards(&self, ancestor: Id, dir: Id) -> Option<Id> {
        let mut cur = dir;
        while cur != ROOT {
            let parent = self.parent(cur);
            if parent == ancestor {
                return Some(cur);
            }
            cur = parent;
        }
        None
    }

    /// Linux `do_renameat2` and `vfs_rename` (with `simple_rename`), whose
    /// order of checks is: both parent walks, `.`/`..`/`/` (EBUSY, or
    /// EEXIST for the target with RENAME_NOREPLACE), a missing source
    /// (ENOENT), an existing target with RENAME_NOREPLACE (EEXIST),
    /// trailing slashes on a non-directory source (ENOTDIR), the "trap" of
    /// `lock_rename` (EINVAL when the source contains the new parent,
    /// ENOTEMPTY when the target contains the old parent), renaming a file
    /// onto itself (nothing happens), `may_delete` of the source, then of
    /// the target or `may_create`, write permission on a directory that
    /// changes parent, and a non-empty target directory.
    fn rename(&mut self, who: Who, from: &str, to: &str, noreplace: bool) -> Res<()> {
        let (old_dir, old_last, old_slash) = self.parent_of_path(who, from)?;
        let (new_dir, new_last, new_slash) = self.parent_of_path(who, to)?;
        let Last::Normal(old_name) = old_last else { return Err(Errno::EBUSY) };
        let Last::Normal(new_name) = new_last else {
            return Err(if noreplace { Errno::EEXIST } else { Errno::EBUSY });
        };
        let source = self.child(old_dir, &old_name).ok_or(Errno::ENOENT)?;
        let target = self.child(new_dir, &new_name);
        if noreplace && target.is_some() {
            return Err(Errno::EEXIST);
        }
        let is_dir = self.is_dir(source);
        if !is_dir && (old_slash || new_slash) {
            return Err(Errno::ENOTDIR);
        }
        let trap = if old_dir == new_dir {
            None
        } else {
            self.child_towards(old_dir, new_dir).or_else(|| self.child_towards(new_dir, old_dir))
        };
        if trap == Some(source) {
            return Err(Errno::EINVAL);
        }
        if target.is_some() && target == trap {
            return Err(Errno::ENOTEMPTY);
        }
        if target == Some(source) {
            return Ok(());
        }
        self.may_delete(who, old_dir, source, is_dir)?;
        match target {
            Some(target) => self.may_delete(who, new_dir, target, is_dir)?,
            None => self.may_create(who, new_dir)?,
        }
        if is_dir && old_dir != new_dir {
            self.require(who, source, MAY_WRITE)?;
        }
        if let Some(target) = target {
            if self.is_dir(target) && !self.children(target).is_empty() {
                return Err(Errno::ENOTEMPTY);
            }
        }
        self.children_mut(old_dir).remove(&old_name);
        self.children_mut(new_dir).insert(new_name, source);
        if let Body::Dir { parent, .. } = &mut self.nodes[source].body {
            *parent = new_dir;
        }
        Ok(())
    }

    /// Linux `path_openat` with `O_CREAT` (`open_last_lookups`,
    /// `lookup_open`): the existing file, following a final symlink unless
    /// `nofollow`, or a new one; returns the node and whether it was made.
    fn open_or_create(&mut self, who: Who, path: &str, nofollow: bool, perm: u32) -> Res<(Id, bool)> {
        if path.is_empty() {
            return Err(Errno::ENOENT);
        }
        let mut links = 0;
        let mut start = ROOT;
        let mut path = path.to_string();
        loop {
            let (dir, last, trailing_slash) = self.lookup_parent(who, start, &path, &mut links)?;
            let name = match last {
                Last::Normal(name) => name,
                dots => return Ok((self.dots(dir, &dots), false)),
            };
            if trailing_slash {
                return Err(Errno::EISDIR);
            }
            let Some(existing) = self.child(dir, &name) else {
                self.may_create(who, dir)?;
                return Ok((self.add_node(who, dir, name, Body::File(Vec::new()), perm & 0o7777), true));
            };
            match &self.nodes[existing].body {
                Body::Symlink(target) if !nofollow => {
                    links += 1;
                    if links > MAX_SYMLINKS {
                        return Err(Errno::ELOOP);
                    }
                    path = target.clone();
                    start = dir;
                }
                _ => return Ok((existing, false)),
            }
        }
    }

    /// Linux `build_open_flags`, `path_openat`, `do_open` and `may_open`.
    fn open(&mut self, who: Who, path: &str, flags: Flags, perm: u32) -> Res<i32> {
        let (creat, excl, trunc) = (flags.has(libc::O_CREAT), flags.has(libc::O_EXCL), flags.has(libc::O_TRUNC));
        let (directory, nofollow) = (flags.has(libc::O_DIRECTORY), flags.has(libc::O_NOFOLLOW));
        if creat && directory {
            return Err(Errno::EINVAL);
        }
        // The access mode 3 (O_ACCMODE) asks for read and write permission
        // but gives neither (it is for ioctls).
        let access = flags.0 & libc::O_ACCMODE;
        let readable = access == libc::O_RDONLY || access == libc::O_RDWR;
        let writable = access == libc::O_WRONLY || access == libc::O_RDWR;
        let mut mask = 0;
        if access != libc::O_WRONLY {
            mask |= MAY_READ;
        }
        if access != libc::O_RDONLY || trunc {
            mask |= MAY_WRITE;
        }
        let (node, created) = if creat {
            self.open_or_create(who, path, nofollow || excl, perm)?
        } else {
            (self.lookup(who, path, !nofollow)?, false)
        };
        if creat {
            if excl && !created {
                return Err(Errno::EEXIST);
            }
            if self.is_dir(node) {
                return Err(Errno::EISDIR);
            }
        }
        if directory && !self.is_dir(node) {
            return Err(Errno::ENOTDIR);
        }
        if !created {
            match self.nodes[node].body {
                Body::Symlink(_) => return Err(Errno::ELOOP),
                Body::Dir { .. } if mask & MAY_WRITE != 0 => return Err(Errno::EISDIR),
                _ => {}
            }
            self.require(who, node, mask)?;
            if trunc {
                if let Body::File(data) = &mut self.nodes[node].body {
                    data.clear();
                    self.remove_privileges(who, node);
                }
            }
        }
        let desc = Desc { node, readable, writable, append: flags.has(libc::O_APPEND), offset: 0 };
        let table = &mut self.fds[who.index()];
        let fd = table.iter().position(Option::is_none).unwrap_or(table.len());
        if fd == table.len() {
            table.push(None);
        }
        table[fd] = Some(desc);
        Ok(fd as i32)
    }

    fn desc(&mut self, who: Who, fd: i32) -> Res<&mut Desc> {
        let table = &mut self.fds[who.index()];
        usize::try_from(fd).ok().and_then(|fd| table.get_mut(fd)?.as_mut()).ok_or(Errno::EBADF)
    }

    /// Linux `ksys_write`, `generic_perform_write`: an empty write changes
    /// nothing, not even the offset of an `O_APPEND` description.
    fn write(&mut self, who: Who, fd: i32, buf: &[u8]) -> Res<usize> {
        let desc = self.desc(who, fd)?.clone();
        if !desc.writable {
            return Err(Errno::EBADF);
        }
        if buf.is_empty() {
            return Ok(0);
        }
        let Body::File(data) = &mut self.nodes[desc.node].body else { unreachable!("only files open for writing") };
        let start = if desc.append { data.len() } else { desc.offset };
        if data.len() < start + buf.len() {
            data.resize(start + buf.len(), 0);
        }
        data[start..start + buf.len()].copy_from_slice(buf);
        self.remove_privileges(who, desc.node);
        self.desc(who, fd)?.offset = start + buf.len();
        Ok(buf.len())
    }

    /// Linux `ksys_read`; a directory answers EISDIR (`generic_read_dir`).
    fn read(&mut self, who: Who, fd: i32, len: usize) -> Res<Vec<u8>> {
        let desc = self.desc(who, fd)?.clone();
        if !desc.readable {
            return Err(Errno::EBADF);
        }
        let Body::File(data) = &self.nodes[desc.node].body else { return Err(Errno::EISDIR) };
        let start = desc.offset.min(data.len());
        let out = data[start..data.len().min(start + len)].to_vec();
        self.desc(who, fd)?.offset = desc.offset + out.len();
        Ok(out)
    }

    fn close(&mut self, who: Who, fd: i32) -> Res<()> {
        self.desc(who, fd)?;
        self.fds[who.index()][fd as usize] = None;
        Ok(())
    }

    /// Linux `do_sys_ftruncate`: a negative length is EINVAL before the
    /// descriptor is even looked up; then it must be a regular file open
    /// for writing (EINVAL).
    fn ftruncate(&mut self, who: Who, fd: i32, len: i64) -> Res<()> {
        let len = usize::try_from(len).map_err(|_| Errno::EINVAL)?;
        let desc = self.desc(who, fd)?.clone();
        let Body::File(data) = &mut self.nodes[desc.node].body else { return Err(Errno::EINVAL) };
        if !desc.writable {
            return Err(Errno::EINVAL);
        }
        data.resize(len, 0);
        self.remove_privileges(who, desc.node);
        Ok(())
    }

    /// Linux `chmod_common` and `setattr_prepare`: only the owner or root;
    /// set-group-ID is dropped for a caller outside the file's group.
    fn chmod(&mut self, who: Who, path: &str, perm: u32) -> Res<()> {
        let id = self.lookup(who, path, true)?;
        let node = &mut self.nodes[id];
        if who.uid() != node.uid && !who.is_root() {
            return Err(Errno::EPERM);
        }
        node.perm = perm & 0o7777;
        if !who.is_root() && !who.in_group(node.gid) {
            node.perm &= !S_ISGID;
        }
        Ok(())
    }

    /// Linux `chown_common`, `notify_change` and `setattr_prepare`. For a
    /// non-directory the set-id bits are killed (set-user-ID always,
    /// set-group-ID as `setattr_should_drop_sgid` says) even when no id
    /// changes, and killing them is a mode change only the owner or root
    /// may make (EPERM).
    fn chown(&mut self, who: Who, path: &str, uid: Option<u32>, gid: Option<u32>, follow: bool) -> Res<()> {
        let id = self.lookup(who, path, follow)?;
        let is_dir = self.is_dir(id);
        let node = &mut self.nodes[id];
        let owner = who.uid() == node.uid;
        let may_set_uid = |uid: u32| who.is_root() || (owner && uid == node.uid);
        let may_set_gid = |gid: u32| who.is_root() || (owner && (gid == node.gid || who.in_group(gid)));
        if uid.is_some_and(|uid| !may_set_uid(uid)) || gid.is_some_and(|gid| !may_set_gid(gid)) {
            return Err(Errno::EPERM);
        }
        let mut perm = node.perm;
        if !is_dir {
            perm &= !S_ISUID;
            if perm & S_IXGRP != 0 || !(who.is_root() || who.in_group(node.gid)) {
                perm &= !S_ISGID;
            }
            if perm != node.perm && !(owner || who.is_root()) {
                return Err(Errno::EPERM);
            }
        }
        node.perm = perm;
        node.uid = uid.unwrap_or(node.uid);
        node.gid = gid.unwrap_or(node.gid);
        Ok(())
    }

    /// `open(path, O_RDONLY | O_DIRECTORY)` and every entry, sorted by name.
    fn list_dir(&self, who: Who, path: &str) -> Res<Vec<(Vec<u8>, FileType, u64)>> {
        let dir = self.lookup(who, path, true)?;
        if !self.is_dir(dir) {
            return Err(Errno::ENOTDIR);
        }
        self.require(who, dir, MAY_READ)?;
        let mut entries = vec![
            (b".".to_vec(), FileType::Directory, dir as u64),
            (b"..".to_vec(), FileType::Directory, self.parent(dir) as u64),
        ];
        for (name, &child) in self.children(dir) {
            entries.push((name.as_bytes().to_vec(), self.attr(child).file_type, child as u64));
        }
        entries.sort_by(|a, b| a.0.cmp(&b.0));
        Ok(entries)
    }

    /// Every reachable name with its attributes and contents (file data or
    /// symlink target), as root would see it.
    fn tree(&self) -> BTreeMap<String, (Attr, Vec<u8>)> {
        let mut out = BTreeMap::new();
        let mut pending = vec![(String::new(), ROOT)];
        while let Some((path, dir)) = pending.pop() {
            for (name, &id) in self.children(dir) {
                let child_path = format!("{path}/{name}");
                let content = match &self.nodes[id].body {
                    Body::Dir { .. } => {
                        pending.push((child_path.clone(), id));
                        Vec::new()
                    }
                    Body::File(data) => data.clone(),
                    Body::Symlink(target) => target.as_bytes().to_vec(),
                };
                out.insert(child_path, (self.attr(id), content));
            }
        }
        out.insert("/".to_string(), (self.attr(ROOT), Vec::new()));
        out
    }
}

// ---------------------------------------------------------------------------
// Running the same calls on vfscale.
// ---------------------------------------------------------------------------

fn attr_of(stat: Stat) -> Attr {
    let file_type = match stat.mode & S_IFMT {
        vfscale::mode::S_IFDIR => FileType::Directory,
        vfscale::mode::S_IFLNK => FileType::Symlink,
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

fn run_vfs(procs: &[Process; 2], op: &Op) -> Res<Out> {
    let p = |who: &Who| &procs[who.index()];
    match op {
        Op::Mkdir(who, path, perm) => p(who).mkdir(path, *perm).map(|()| Out::Done),
        Op::Rmdir(who, path) => p(who).rmdir(path).map(|()| Out::Done),
        Op::Unlink(who, path) => p(who).unlink(path).map(|()| Out::Done),
        Op::Rename { who, from, to, noreplace } => {
            p(who).rename2(from, to, RenameFlags { noreplace: *noreplace }).map(|()| Out::Done)
        }
        Op::Link(who, old, new) => p(who).link(old, new).map(|()| Out::Done),
        Op::Symlink { who, target, path } => p(who).symlink(target, path).map(|()| Out::Done),
        Op::Readlink(who, path) => p(who).readlink(path).map(Out::Bytes),
        Op::Open(who, path, flags, perm) => p(who).open(path, OpenFlags(flags.0), *perm).map(Out::Fd),
        Op::Write(who, fd, data) => p(who).write(fd.num(), data).map(Out::Count),
        Op::Read(who, fd, len) => {
            let mut buf = vec![0; *len];
            p(who).read(fd.num(), &mut buf).map(|n| Out::Bytes(buf[..n].to_vec()))
        }
        Op::Close(who, fd) => p(who).close(fd.num()).map(|()| Out::Done),
        Op::Ftruncate(who, fd, len) => p(who).ftruncate(fd.num(), *len).map(|()| Out::Done),
        Op::Stat(who, path) => p(who).stat(path).map(|s| Out::Attr(attr_of(s))),
        Op::Lstat(who, path) => p(who).lstat(path).map(|s| Out::Attr(attr_of(s))),
        Op::Chmod(who, path, perm) => p(who).chmod(path, *perm).map(|()| Out::Done),
        Op::Chown { who, path, uid, gid, follow: true } => p(who).chown(path, *uid, *gid).map(|()| Out::Done),
        Op::Chown { who, path, uid, gid, follow: false } => p(who).lchown(path, *uid, *gid).map(|()| Out::Done),
        Op::ListDir(who, path) => p(who).list_dir(path).map(|entries| {
            let mut entries: Vec<_> = entries.into_iter().map(|e| (e.name, e.file_type, e.ino)).collect();
            entries.sort_by(|a, b| a.0.cmp(&b.0));
            Out::Entries(entries)
        }),
    }
}

/// vfscale's counterpart of [`Model::tree`], read through the API as root.
fn vfs_tree(root: &Process) -> BTreeMap<String, (Attr, Vec<u8>)> {
    let mut out = BTreeMap::new();
    out.insert("/".to_string(), (attr_of(root.stat("/").expect("stat /")), Vec::new()));
    let mut pending = vec![String::new()];
    while let Some(dir) = pending.pop() {
        let listing = root.list_dir(if dir.is_empty() { "/" } else { &dir }).expect("list a directory as root");
        for entry in listing {
            if entry.name == b"." || entry.name == b".." {
                continue;
            }
            let path = format!("{dir}/{}", String::from_utf8(entry.name).expect("generated names are ASCII"));
            let attr = attr_of(root.lstat(&path).expect("lstat a listed name"));
            let content = match attr.file_type {
                FileType::Directory => {
                    pending.push(path.clone());
                    Vec::new()
                }
                FileType::Symlink => root.readlink(&path).expect("readlink a listed symlink"),
                FileType::Regular => {
                    let fd = root.open(&path, OpenFlags::RDONLY, 0).expect("open a listed file as root");
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

/// The correspondence between model node ids and vfscale inode numbers,
/// which must be one to one: hard links share both, and nothing else does.
#[derive(Default)]
struct Idents {
    to_vfs: BTreeMap<u64, u64>,
    to_model: BTreeMap<u64, u64>,
}

impl Idents {
    fn pair(&mut self, model: u64, vfs: u64) -> Result<(), String> {
        match (self.to_vfs.get(&model), self.to_model.get(&vfs)) {
            (None, None) => {
                self.to_vfs.insert(model, vfs);
                self.to_model.insert(vfs, model);
                Ok(())
            }
            (Some(&v), Some(&m)) if v == vfs && m == model => Ok(()),
            (v, m) => Err(format!(
                "identity mismatch: model node {model} is inode {v:?} so far, inode {vfs} is model node {m:?}"
            )),
        }
    }
}

/// Takes the identities out of a result, so the rest compares with `==`.
fn split_idents(out: &mut Out) -> Vec<u64> {
    match out {
        Out::Attr(attr) => vec![std::mem::take(&mut attr.ident)],
        Out::Entries(entries) => entries.iter_mut().map(|e| std::mem::take(&mut e.2)).collect(),
        _ => Vec::new(),
    }
}

/// Runs `ops` on a fresh vfscale and a fresh model; the first difference
/// is returned as a message naming the call.
fn check(config: VfsConfig, ops: &[Op]) -> Result<(), String> {
    let vfs = Vfs::new(config);
    let procs = [vfs.process(Who::Root.credentials()), vfs.process(Who::User.credentials())];
    let mut model = Model::new();
    let mut idents = Idents::default();
    let mut latest = None;
    for (i, op) in ops.iter().enumerate() {
        let existing =
            model.tree().into_keys().map(|path| if path == "/" { ".".to_string() } else { path[1..].to_string() });
        let op = &op.resolved(latest, &existing.collect::<Vec<_>>());
        let mut expected = model.apply(op);
        let mut actual = run_vfs(&procs, op);
        if let (Ok(expected), Ok(actual)) = (&mut expected, &mut actual) {
            let pairs = split_idents(expected).into_iter().zip(split_idents(actual));
            for (model_id, ino) in pairs {
                idents.pair(model_id, ino).map_err(|e| format!("call #{i} {op:?}: {e}"))?;
            }
        }
        if expected != actual {
            return Err(format!("call #{i} {op:?}: Linux gives {expected:?}, vfscale {actual:?}"));
        }
        if let (Op::Open(who, ..), Ok(Out::Fd(fd))) = (op, &expected) {
            latest = Some((*who, *fd));
        }
    }
    let expected = model.tree();
    let actual = vfs_tree(&procs[0]);
    let names = |tree: &BTreeMap<String, (Attr, Vec<u8>)>| tree.keys().cloned().collect::<Vec<_>>();
    if names(&expected) != names(&actual) {
        return Err(format!("final names: Linux has {:?}, vfscale {:?}", names(&expected), names(&actual)));
    }
    for ((path, (mut want, want_content)), (_, (mut got, got_content))) in expected.into_iter().zip(actual) {
        idents.pair(want.ident, got.ident).map_err(|e| format!("final {path}: {e}"))?;
        (want.ident, got.ident) = (0, 0);
        if (&want, &want_content) != (&got, &got_content) {
            return Err(format!("final {path}: Linux has {want:?} {want_content:?}, vfscale {got:?} {got_content:?}"));
        }
    }
    Ok(())
}

// ---------------------------------------------------------------------------
// Generating calls.
// ---------------------------------------------------------------------------

fn who() -> impl Strategy<Value = Who> {
    prop_oneof![Just(Who::Root), Just(Who::User)]
}

fn name() -> impl Strategy<Value = &'static str> + Clone {
    prop_oneof![Just("a"), Just("b"), Just("c")]
}

fn component() -> impl Strategy<Value = &'static str> + Clone {
    prop_oneof![12 => name(), 1 => Just("."), 1 => Just("..")]
}

/// One to three components (shorter more often, since deep names rarely
/// exist), joined by one slash or, rarely, two.
fn components(component: impl Strategy<Value = &'static str> + Clone) -> impl Strategy<Value = String> {
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

/// A path of one to three components, sometimes absolute, sometimes with
/// a trailing slash; now and then just `/`; or often an existing path,
/// perhaps with something after it (see [`Op::resolved`]).
fn path() -> impl Strategy<Value = String> {
    let joined = (prop::bool::weighted(0.15), components(component()), prop::bool::weighted(0.08)).prop_map(
        |(absolute, names, slash)| {
            format!("{}{names}{}", if absolute { "/" } else { "" }, if slash { "/" } else { "" })
        },
    );
    let fixed = prop_oneof![8 => Just(""), 1 => Just("/"), 1 => Just("/."), 1 => Just("/..")];
    let suffix = prop_oneof![11 => fixed.prop_map(str::to_string), 3 => name().prop_map(|n| format!("/{n}"))];
    let existing = (0..64usize, suffix).prop_map(|(k, suffix)| format!("@{k}{suffix}"));
    prop_oneof![20 => joined, 1 => Just("/".to_string()), 20 => existing]
}

/// A path for a new name: any path, or a name in an existing directory
/// (names `d` and `e` appear only this way).
fn new_path() -> impl Strategy<Value = String> {
    let fresh = prop_oneof![name(), Just("d"), Just("e")];
    prop_oneof![path(), (0..64usize, fresh).prop_map(|(k, name)| format!("@{k}/{name}"))]
}

/// Calls that build a tree to work on: directories (some writable by all,
/// some sticky), files with contents, and symlinks.
fn setup_op() -> impl Strategy<Value = Vec<Op>> {
    let inside = (0..64usize, name()).prop_map(|(k, name)| format!("@{k}/{name}"));
    let plain = move || prop_oneof![components(name()), inside.clone()];
    let dir_perm = select(vec![0o755, 0o777, 0o1777, 0o2777, 0o700]);
    let creat = Flags(libc::O_WRONLY | libc::O_CREAT);
    prop_oneof![
        3 => (plain(), dir_perm).prop_map(|(p, m)| vec![Op::Mkdir(Who::Root, p, m)]),
        1 => plain().prop_map(|p| vec![Op::Mkdir(Who::User, p, 0o755)]),
        5 => (who(), plain(), data()).prop_map(move |(w, p, d)| {
            vec![Op::Open(w, p, creat, 0o644), Op::Write(w, FdArg::Latest, d)]
        }),
        1 => (who(), path(), plain()).prop_map(|(who, target, path)| vec![Op::Symlink { who, target, path }]),
    ]
}

/// A few setup calls, then any calls at all.
fn ops() -> impl Strategy<Value = Vec<Op>> {
    let setup = prop::collection::vec(setup_op(), 2..10);
    (setup, prop::collection::vec(op(), 1..50))
        .prop_map(|(setup, ops)| setup.into_iter().flatten().chain(ops).collect())
}

fn fd() -> impl Strategy<Value = FdArg> {
    prop_oneof![3 => Just(FdArg::Latest), 1 => (0..4i32).prop_map(FdArg::Num)]
}

fn open_flags() -> impl Strategy<Value = Flags> {
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

fn data() -> impl Strategy<Value = Vec<u8>> {
    prop::collection::vec(b'p'..=b'z', 0..6)
}

fn op() -> impl Strategy<Value = Op> {
    let dir_perm = select(vec![0o755, 0o700, 0o777, 0o1777, 0o2775]);
    let any_perm =
        select(vec![0o755, 0o700, 0o1777, 0o777, 0o2775, 0o644, 0o666, 0o600, 0o4755, 0o2666, 0o6777, 0o000]);
    let file_perm = select(vec![0o644, 0o600, 0o666, 0o000, 0o755]);
    let id = select(vec![None, Some(0), Some(1000)]);
    prop_oneof![
        6 => (who(), new_path(), dir_perm).prop_map(|(w, p, m)| Op::Mkdir(w, p, m)),
        2 => (who(), path()).prop_map(|(w, p)| Op::Rmdir(w, p)),
        2 => (who(), path()).prop_map(|(w, p)| Op::Unlink(w, p)),
        4 => (who(), path(), new_path(), prop::bool::weighted(0.3))
            .prop_map(|(who, from, to, noreplace)| Op::Rename { who, from, to, noreplace }),
        2 => (who(), path(), new_path()).prop_map(|(w, a, b)| Op::Link(w, a, b)),
        3 => (who(), path(), new_path()).prop_map(|(who, target, path)| Op::Symlink { who, target, path }),
        1 => (who(), path()).prop_map(|(w, p)| Op::Readlink(w, p)),
        6 => (who(), new_path(), open_flags(), file_perm).prop_map(|(w, p, f, m)| Op::Open(w, p, f, m)),
        3 => (who(), fd(), data()).prop_map(|(w, fd, d)| Op::Write(w, fd, d)),
        3 => (who(), fd(), 0..8usize).prop_map(|(w, fd, n)| Op::Read(w, fd, n)),
        1 => (who(), fd()).prop_map(|(w, fd)| Op::Close(w, fd)),
        2 => (who(), fd(), select(vec![-1i64, 0, 2, 7])).prop_map(|(w, fd, n)| Op::Ftruncate(w, fd, n)),
        2 => (who(), path()).prop_map(|(w, p)| Op::Stat(w, p)),
        2 => (who(), path()).prop_map(|(w, p)| Op::Lstat(w, p)),
        2 => (who(), path(), any_perm).prop_map(|(w, p, m)| Op::Chmod(w, p, m)),
        1 => (who(), path(), id.clone(), id, any::<bool>())
            .prop_map(|(who, path, uid, gid, follow)| Op::Chown { who, path, uid, gid, follow }),
        1 => (who(), path()).prop_map(|(w, p)| Op::ListDir(w, p)),
    ]
}

fn cases() -> u32 {
    std::env::var("PROPTEST_CASES").ok().and_then(|v| v.parse().ok()).unwrap_or(64)
}

proptest! {
    #![proptest_config(Config { cases: cases(), failure_persistence: None, ..Config::default() })]

    #[test]
    fn namespace_matches_model(config in 0..16usize, ops in ops()) {
        let result = check(all_configs()[config], &ops);
        prop_assert!(result.is_ok(), "{}", result.unwrap_err());
    }
}

// ---------------------------------------------------------------------------
// Fixed sequences: each pins one rule where vfscale and Linux have differed,
// with the result Linux gives (checked against Linux 6.18) written out.
// ---------------------------------------------------------------------------

/// What a call must give.
#[derive(Debug)]
enum Want {
    Ok,
    Err(Errno),
    Bytes(&'static [u8]),
    Size(u64),
    Perm(u32),
}

impl Want {
    fn matches(&self, got: &Res<Out>) -> bool {
        match (self, got) {
            (Want::Ok, Ok(_)) => true,
            (Want::Err(want), Err(got)) => want == got,
            (Want::Bytes(want), Ok(Out::Bytes(got))) => want == got,
            (Want::Size(want), Ok(Out::Attr(attr))) => *want == attr.size,
            (Want::Perm(want), Ok(Out::Attr(attr))) => *want == attr.perm,
            _ => false,
        }
    }
}

/// Checks that the model gives what each call wants (so the model is
/// right), then that vfscale agrees with the model call by call and in the
/// final tree. Descriptors must be given as numbers.
fn expect(calls: &[(Op, Want)]) {
    let mut model = Model::new();
    for (op, want) in calls {
        let got = model.apply(op);
        assert!(want.matches(&got), "the model gives {got:?} for {op:?}, Linux {want:?}");
    }
    let ops: Vec<Op> = calls.iter().map(|(op, _)| op.clone()).collect();
    for config in all_configs() {
        let result = check(config, &ops);
        assert!(result.is_ok(), "{config:?}: {}", result.unwrap_err());
    }
}

fn s(text: &str) -> String {
    text.to_string()
}

fn create_file(who: Who, path: &str) -> (Op, Want) {
    (Op::Open(who, s(path), Flags(libc::O_RDWR | libc::O_CREAT), 0o644), Want::Ok)
}

#[test]
fn open_with_creat_and_directory_is_einval_and_creates_nothing() {
    let flags = Flags(libc::O_RDONLY | libc::O_CREAT | libc::O_DIRECTORY);
    expect(&[
        (Op::Open(Who::Root, s("a"), flags, 0o644), Want::Err(Errno::EINVAL)),
        (Op::Mkdir(Who::Root, s("d"), 0o755), Want::Ok),
        (Op::Open(Who::Root, s("d"), flags, 0o644), Want::Err(Errno::EINVAL)),
        (Op::Stat(Who::Root, s("a")), Want::Err(Errno::ENOENT)),
    ]);
}

#[test]
fn ftruncate_checks_the_length_before_the_descriptor() {
    expect(&[(Op::Ftruncate(Who::Root, FdArg::Num(3), -1), Want::Err(Errno::EINVAL))]);
}

#[test]
fn symlink_with_trailing_slash_is_enoent_or_eexist() {
    expect(&[
        (Op::Symlink { who: Who::Root, target: s("x"), path: s("a/") }, Want::Err(Errno::ENOENT)),
        (Op::Lstat(Who::Root, s("a")), Want::Err(Errno::ENOENT)),
        (Op::Mkdir(Who::Root, s("d"), 0o755), Want::Ok),
        (Op::Symlink { who: Who::Root, target: s("x"), path: s("d/") }, Want::Err(Errno::EEXIST)),
    ]);
}

#[test]
fn open_trunc_asks_for_write_even_when_read_only() {
    let read_trunc = Flags(libc::O_RDONLY | libc::O_TRUNC);
    expect(&[
        (Op::Open(Who::Root, s("."), read_trunc, 0), Want::Err(Errno::EISDIR)),
        create_file(Who::Root, "f"),
        (Op::Write(Who::Root, FdArg::Num(0), b"xyz".to_vec()), Want::Ok),
        (Op::Open(Who::Root, s("f"), read_trunc, 0), Want::Ok),
        (Op::Stat(Who::Root, s("f")), Want::Size(0)),
        (Op::Open(Who::User, s("f"), read_trunc, 0), Want::Err(Errno::EACCES)),
    ]);
}

#[test]
fn link_reports_the_new_name_before_the_source_type() {
    expect(&[
        (Op::Mkdir(Who::Root, s("d"), 0o755), Want::Ok),
        create_file(Who::Root, "f"),
        (Op::Link(Who::Root, s("d"), s("f")), Want::Err(Errno::EEXIST)),
        (Op::Link(Who::Root, s("d"), s("f/")), Want::Err(Errno::EEXIST)),
        (Op::Link(Who::Root, s("f"), s("g/")), Want::Err(Errno::ENOENT)),
        (Op::Link(Who::Root, s("d"), s("g/")), Want::Err(Errno::ENOENT)),
        (Op::Link(Who::User, s("d"), s("g")), Want::Err(Errno::EACCES)),
        (Op::Link(Who::Root, s("d"), s("g")), Want::Err(Errno::EPERM)),
    ]);
}

#[test]
fn open_creat_excl_of_an_existing_directory_name_is_eexist() {
    let flags = Flags(libc::O_RDONLY | libc::O_CREAT | libc::O_EXCL);
    expect(&[
        (Op::Open(Who::Root, s("."), flags, 0o644), Want::Err(Errno::EEXIST)),
        (Op::Open(Who::Root, s("/"), flags, 0o644), Want::Err(Errno::EEXIST)),
        (Op::Open(Who::Root, s(".."), Flags(libc::O_RDONLY | libc::O_CREAT), 0o644), Want::Err(Errno::EISDIR)),
    ]);
}

#[test]
fn rename_noreplace_onto_an_existing_name_is_eexist_before_other_checks() {
    let rename = |from: &str, to: &str| Op::Rename { who: Who::Root, from: s(from), to: s(to), noreplace: true };
    expect(&[
        (Op::Mkdir(Who::Root, s("a"), 0o755), Want::Ok),
        (Op::Mkdir(Who::Root, s("a/b"), 0o755), Want::Ok),
        create_file(Who::Root, "f"),
        (rename("a", "a/b"), Want::Err(Errno::EEXIST)),
        (rename("a/b", "a"), Want::Err(Errno::EEXIST)),
        (rename("f", "f/"), Want::Err(Errno::EEXIST)),
        (rename("f", "a/"), Want::Err(Errno::EEXIST)),
    ]);
}

#[test]
fn open_nofollow_directory_of_a_symlink_is_enotdir() {
    expect(&[
        (Op::Mkdir(Who::Root, s("d"), 0o755), Want::Ok),
        (Op::Symlink { who: Who::Root, target: s("d"), path: s("s") }, Want::Ok),
        (
            Op::Open(Who::Root, s("s"), Flags(libc::O_RDONLY | libc::O_NOFOLLOW | libc::O_DIRECTORY), 0),
            Want::Err(Errno::ENOTDIR),
        ),
        (Op::Open(Who::Root, s("s"), Flags(libc::O_RDONLY | libc::O_NOFOLLOW), 0), Want::Err(Errno::ELOOP)),
    ]);
}

#[test]
fn empty_write_in_append_mode_leaves_the_offset() {
    expect(&[
        create_file(Who::Root, "f"),
        (Op::Write(Who::Root, FdArg::Num(0), b"xyz".to_vec()), Want::Ok),
        (Op::Open(Who::Root, s("f"), Flags(libc::O_RDWR | libc::O_APPEND), 0), Want::Ok),
        (Op::Write(Who::Root, FdArg::Num(1), Vec::new()), Want::Ok),
        (Op::Read(Who::Root, FdArg::Num(1), 8), Want::Bytes(b"xyz")),
    ]);
}

#[test]
fn write_by_a_non_member_drops_set_group_id() {
    expect(&[
        (Op::Open(Who::Root, s("f"), Flags(libc::O_WRONLY | libc::O_CREAT), 0o666), Want::Ok),
        (Op::Chmod(Who::Root, s("f"), 0o2666), Want::Ok),
        (Op::Open(Who::User, s("f"), Flags(libc::O_WRONLY), 0), Want::Ok),
        (Op::Write(Who::User, FdArg::Num(0), b"x".to_vec()), Want::Ok),
        (Op::Stat(Who::Root, s("f")), Want::Perm(0o666)),
    ]);
}

#[test]
fn chown_without_ids_by_a_stranger_may_not_clear_set_user_id() {
    let chown = |who: Who| Op::Chown { who, path: s("f"), uid: None, gid: None, follow: true };
    expect(&[
        create_file(Who::Root, "f"),
        (Op::Chmod(Who::Root, s("f"), 0o4755), Want::Ok),
        (chown(Who::User), Want::Err(Errno::EPERM)),
        (Op::Stat(Who::Root, s("f")), Want::Perm(0o4755)),
        (chown(Who::Root), Want::Ok),
        (Op::Stat(Who::Root, s("f")), Want::Perm(0o755)),
    ]);
}
