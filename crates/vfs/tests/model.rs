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
//!
//! The calls are the shared language of `common/ops.rs`; what is this
//! test's own is who makes each call ([`Call`]) and the model.

mod common;
#[path = "common/ops.rs"]
mod ops;

use common::all_configs;
use ops::{
    components, data, fd_arg, name, open_flags, run_vfs, vfs_tree, Attr, Comparison, FdArg, Flags, Op, Out, Res, Tree,
};
use proptest::prelude::*;
use proptest::sample::select;
use proptest::test_runner::Config;
use std::collections::BTreeMap;
use std::fmt;
use vfscale::mode::{S_ISGID, S_ISUID, S_ISVTX, S_IXGRP};
use vfscale::{Credentials, Errno, FileType, Vfs, VfsConfig};

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

    fn makes(self, op: Op) -> Call {
        Call { who: self, op }
    }

    fn credentials(self) -> Credentials {
        match self {
            Who::Root => Credentials::root(),
            Who::User => Credentials::user(1000, 1000, [1000]),
        }
    }
}

/// One system call and who makes it.
#[derive(Clone)]
struct Call {
    who: Who,
    op: Op,
}

impl fmt::Debug for Call {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:?} {:?}", self.who, self.op)
    }
}

impl Call {
    /// The call with its paths resolved as [`Op::resolved`] does, and a
    /// descriptor argument [`FdArg::Latest`] replaced by whatever the latest
    /// successful `open` returned (`latest`: who opened what, `None` before
    /// any did), then made by the process that opened it.
    fn resolved(&self, latest: Option<(Who, i32)>, existing: &[String]) -> Call {
        let uses_latest = matches!(
            self.op,
            Op::Write(FdArg::Latest, _)
                | Op::Read(FdArg::Latest, _)
                | Op::Close(FdArg::Latest)
                | Op::Ftruncate(FdArg::Latest, _)
        );
        let (who, fd) = match latest {
            Some((opener, fd)) if uses_latest => (opener, fd),
            _ => (self.who, -1),
        };
        Call { who, op: self.op.resolved(fd, existing) }
    }
}

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

    fn apply(&mut self, call: &Call) -> Res<Out> {
        let who = call.who;
        match &call.op {
            Op::Mkdir(path, perm) => self.mkdir(who, path, *perm).map(|()| Out::Done),
            Op::Rmdir(path) => self.rmdir(who, path).map(|()| Out::Done),
            Op::Unlink(path) => self.unlink(who, path).map(|()| Out::Done),
            Op::Rename { from, to, noreplace } => self.rename(who, from, to, *noreplace).map(|()| Out::Done),
            Op::Link(old, new) => self.link(who, old, new).map(|()| Out::Done),
            Op::Symlink { target, path } => self.symlink(who, target, path).map(|()| Out::Done),
            Op::Readlink(path) => self.readlink(who, path).map(Out::Bytes),
            Op::Open(path, flags, perm) => self.open(who, path, *flags, *perm).map(Out::Fd),
            Op::Write(fd, data) => self.write(who, fd.num(), data).map(Out::Count),
            Op::Read(fd, len) => self.read(who, fd.num(), *len).map(Out::Bytes),
            Op::Close(fd) => self.close(who, fd.num()).map(|()| Out::Done),
            Op::Ftruncate(fd, len) => self.ftruncate(who, fd.num(), *len).map(|()| Out::Done),
            Op::Stat(path) => self.lookup(who, path, true).map(|id| Out::Attr(self.attr(id))),
            Op::Lstat(path) => self.lookup(who, path, false).map(|id| Out::Attr(self.attr(id))),
            Op::Chmod(path, perm) => self.chmod(who, path, *perm).map(|()| Out::Done),
            Op::Chown { path, uid, gid, follow } => self.chown(who, path, *uid, *gid, *follow).map(|()| Out::Done),
            Op::ListDir(path) => self.list_dir(who, path).map(Out::Entries),
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

    /// Every reachable name with its attributes and contents, as root
    /// would see it (see [`Tree`]).
    fn tree(&self) -> Tree {
        let mut out = Tree::new();
        out.insert(".".to_string(), (self.attr(ROOT), Vec::new()));
        let mut pending = vec![(String::new(), ROOT)];
        while let Some((path, dir)) = pending.pop() {
            for (name, &id) in self.children(dir) {
                let child_path = if path.is_empty() { name.clone() } else { format!("{path}/{name}") };
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
        out
    }
}

// ---------------------------------------------------------------------------
// Running the same calls on the model and on vfscale.
// ---------------------------------------------------------------------------

/// Runs `calls` on a fresh vfscale and a fresh model; the first difference
/// is returned as a message naming the call.
fn check(config: VfsConfig, calls: &[Call]) -> Result<(), String> {
    let vfs = Vfs::new(config);
    let procs = [vfs.process(Who::Root.credentials()), vfs.process(Who::User.credentials())];
    let mut model = Model::new();
    let mut comparison = Comparison::new("Linux");
    let mut latest = None;
    for (i, call) in calls.iter().enumerate() {
        let existing: Vec<String> = model.tree().into_keys().collect();
        let call = &call.resolved(latest, &existing);
        let expected = model.apply(call);
        let actual = run_vfs(&procs[call.who.index()], &call.op);
        if let (Op::Open(..), Ok(Out::Fd(fd))) = (&call.op, &expected) {
            latest = Some((call.who, *fd));
        }
        comparison.results(expected, actual).map_err(|e| format!("call #{i} {call:?}: {e}"))?;
    }
    comparison.trees(model.tree(), vfs_tree(&procs[Who::Root.index()]))
}

// ---------------------------------------------------------------------------
// Generating calls.
// ---------------------------------------------------------------------------

fn who() -> impl Strategy<Value = Who> {
    prop_oneof![Just(Who::Root), Just(Who::User)]
}

fn component() -> impl Strategy<Value = &'static str> + Clone {
    prop_oneof![12 => name(), 1 => Just("."), 1 => Just("..")]
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
fn setup_calls() -> impl Strategy<Value = Vec<Call>> {
    let inside = (0..64usize, name()).prop_map(|(k, name)| format!("@{k}/{name}"));
    let plain = move || prop_oneof![components(name()), inside.clone()];
    let dir_perm = select(vec![0o755, 0o777, 0o1777, 0o2777, 0o700]);
    let creat = Flags(libc::O_WRONLY | libc::O_CREAT);
    prop_oneof![
        3 => (plain(), dir_perm).prop_map(|(p, m)| vec![Who::Root.makes(Op::Mkdir(p, m))]),
        1 => plain().prop_map(|p| vec![Who::User.makes(Op::Mkdir(p, 0o755))]),
        5 => (who(), plain(), data()).prop_map(move |(who, p, d)| {
            vec![who.makes(Op::Open(p, creat, 0o644)), who.makes(Op::Write(FdArg::Latest, d))]
        }),
        1 => (who(), path(), plain()).prop_map(|(who, target, path)| vec![who.makes(Op::Symlink { target, path })]),
    ]
}

/// A few setup calls, then any calls at all.
fn calls() -> impl Strategy<Value = Vec<Call>> {
    let setup = prop::collection::vec(setup_calls(), 2..10);
    let any = (who(), op()).prop_map(|(who, op)| Call { who, op });
    (setup, prop::collection::vec(any, 1..50))
        .prop_map(|(setup, calls)| setup.into_iter().flatten().chain(calls).collect())
}

fn op() -> impl Strategy<Value = Op> {
    let dir_perm = select(vec![0o755, 0o700, 0o777, 0o1777, 0o2775]);
    let any_perm =
        select(vec![0o755, 0o700, 0o1777, 0o777, 0o2775, 0o644, 0o666, 0o600, 0o4755, 0o2666, 0o6777, 0o000]);
    let file_perm = select(vec![0o644, 0o600, 0o666, 0o000, 0o755]);
    let id = select(vec![None, Some(0), Some(1000)]);
    prop_oneof![
        6 => (new_path(), dir_perm).prop_map(|(p, m)| Op::Mkdir(p, m)),
        2 => path().prop_map(Op::Rmdir),
        2 => path().prop_map(Op::Unlink),
        4 => (path(), new_path(), prop::bool::weighted(0.3))
            .prop_map(|(from, to, noreplace)| Op::Rename { from, to, noreplace }),
        2 => (path(), new_path()).prop_map(|(a, b)| Op::Link(a, b)),
        3 => (path(), new_path()).prop_map(|(target, path)| Op::Symlink { target, path }),
        1 => path().prop_map(Op::Readlink),
        6 => (new_path(), open_flags(), file_perm).prop_map(|(p, f, m)| Op::Open(p, f, m)),
        3 => (fd_arg(), data()).prop_map(|(fd, d)| Op::Write(fd, d)),
        3 => (fd_arg(), 0..8usize).prop_map(|(fd, n)| Op::Read(fd, n)),
        1 => fd_arg().prop_map(Op::Close),
        2 => (fd_arg(), select(vec![-1i64, 0, 2, 7])).prop_map(|(fd, n)| Op::Ftruncate(fd, n)),
        2 => path().prop_map(Op::Stat),
        2 => path().prop_map(Op::Lstat),
        2 => (path(), any_perm).prop_map(|(p, m)| Op::Chmod(p, m)),
        1 => (path(), id.clone(), id, any::<bool>())
            .prop_map(|(path, uid, gid, follow)| Op::Chown { path, uid, gid, follow }),
        1 => path().prop_map(Op::ListDir),
    ]
}

proptest! {
    #![proptest_config(Config {
        cases: ops::cases(),
        rng_seed: ops::seed(),
        failure_persistence: None,
        ..Config::default()
    })]

    #[test]
    fn namespace_matches_model(config in 0..16usize, calls in calls()) {
        let result = check(all_configs()[config], &calls);
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
fn expect(calls: &[(Call, Want)]) {
    let mut model = Model::new();
    for (call, want) in calls {
        let got = model.apply(call);
        assert!(want.matches(&got), "the model gives {got:?} for {call:?}, Linux {want:?}");
    }
    let calls: Vec<Call> = calls.iter().map(|(call, _)| call.clone()).collect();
    for config in all_configs() {
        let result = check(config, &calls);
        assert!(result.is_ok(), "{config:?}: {}", result.unwrap_err());
    }
}

fn s(text: &str) -> String {
    text.to_string()
}

fn create_file(who: Who, path: &str) -> (Call, Want) {
    (who.makes(Op::Open(s(path), Flags(libc::O_RDWR | libc::O_CREAT), 0o644)), Want::Ok)
}

#[test]
fn open_with_creat_and_directory_is_einval_and_creates_nothing() {
    let flags = Flags(libc::O_RDONLY | libc::O_CREAT | libc::O_DIRECTORY);
    expect(&[
        (Who::Root.makes(Op::Open(s("a"), flags, 0o644)), Want::Err(Errno::EINVAL)),
        (Who::Root.makes(Op::Mkdir(s("d"), 0o755)), Want::Ok),
        (Who::Root.makes(Op::Open(s("d"), flags, 0o644)), Want::Err(Errno::EINVAL)),
        (Who::Root.makes(Op::Stat(s("a"))), Want::Err(Errno::ENOENT)),
    ]);
}

#[test]
fn ftruncate_checks_the_length_before_the_descriptor() {
    expect(&[(Who::Root.makes(Op::Ftruncate(FdArg::Num(3), -1)), Want::Err(Errno::EINVAL))]);
}

#[test]
fn symlink_with_trailing_slash_is_enoent_or_eexist() {
    expect(&[
        (Who::Root.makes(Op::Symlink { target: s("x"), path: s("a/") }), Want::Err(Errno::ENOENT)),
        (Who::Root.makes(Op::Lstat(s("a"))), Want::Err(Errno::ENOENT)),
        (Who::Root.makes(Op::Mkdir(s("d"), 0o755)), Want::Ok),
        (Who::Root.makes(Op::Symlink { target: s("x"), path: s("d/") }), Want::Err(Errno::EEXIST)),
    ]);
}

#[test]
fn open_trunc_asks_for_write_even_when_read_only() {
    let read_trunc = Flags(libc::O_RDONLY | libc::O_TRUNC);
    expect(&[
        (Who::Root.makes(Op::Open(s("."), read_trunc, 0)), Want::Err(Errno::EISDIR)),
        create_file(Who::Root, "f"),
        (Who::Root.makes(Op::Write(FdArg::Num(0), b"xyz".to_vec())), Want::Ok),
        (Who::Root.makes(Op::Open(s("f"), read_trunc, 0)), Want::Ok),
        (Who::Root.makes(Op::Stat(s("f"))), Want::Size(0)),
        (Who::User.makes(Op::Open(s("f"), read_trunc, 0)), Want::Err(Errno::EACCES)),
    ]);
}

#[test]
fn link_reports_the_new_name_before_the_source_type() {
    expect(&[
        (Who::Root.makes(Op::Mkdir(s("d"), 0o755)), Want::Ok),
        create_file(Who::Root, "f"),
        (Who::Root.makes(Op::Link(s("d"), s("f"))), Want::Err(Errno::EEXIST)),
        (Who::Root.makes(Op::Link(s("d"), s("f/"))), Want::Err(Errno::EEXIST)),
        (Who::Root.makes(Op::Link(s("f"), s("g/"))), Want::Err(Errno::ENOENT)),
        (Who::Root.makes(Op::Link(s("d"), s("g/"))), Want::Err(Errno::ENOENT)),
        (Who::User.makes(Op::Link(s("d"), s("g"))), Want::Err(Errno::EACCES)),
        (Who::Root.makes(Op::Link(s("d"), s("g"))), Want::Err(Errno::EPERM)),
    ]);
}

#[test]
fn open_creat_excl_of_an_existing_directory_name_is_eexist() {
    let flags = Flags(libc::O_RDONLY | libc::O_CREAT | libc::O_EXCL);
    expect(&[
        (Who::Root.makes(Op::Open(s("."), flags, 0o644)), Want::Err(Errno::EEXIST)),
        (Who::Root.makes(Op::Open(s("/"), flags, 0o644)), Want::Err(Errno::EEXIST)),
        (Who::Root.makes(Op::Open(s(".."), Flags(libc::O_RDONLY | libc::O_CREAT), 0o644)), Want::Err(Errno::EISDIR)),
    ]);
}

#[test]
fn rename_noreplace_onto_an_existing_name_is_eexist_before_other_checks() {
    let rename = |from: &str, to: &str| Who::Root.makes(Op::Rename { from: s(from), to: s(to), noreplace: true });
    expect(&[
        (Who::Root.makes(Op::Mkdir(s("a"), 0o755)), Want::Ok),
        (Who::Root.makes(Op::Mkdir(s("a/b"), 0o755)), Want::Ok),
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
        (Who::Root.makes(Op::Mkdir(s("d"), 0o755)), Want::Ok),
        (Who::Root.makes(Op::Symlink { target: s("d"), path: s("s") }), Want::Ok),
        (
            Who::Root.makes(Op::Open(s("s"), Flags(libc::O_RDONLY | libc::O_NOFOLLOW | libc::O_DIRECTORY), 0)),
            Want::Err(Errno::ENOTDIR),
        ),
        (Who::Root.makes(Op::Open(s("s"), Flags(libc::O_RDONLY | libc::O_NOFOLLOW), 0)), Want::Err(Errno::ELOOP)),
    ]);
}

#[test]
fn empty_write_in_append_mode_leaves_the_offset() {
    expect(&[
        create_file(Who::Root, "f"),
        (Who::Root.makes(Op::Write(FdArg::Num(0), b"xyz".to_vec())), Want::Ok),
        (Who::Root.makes(Op::Open(s("f"), Flags(libc::O_RDWR | libc::O_APPEND), 0)), Want::Ok),
        (Who::Root.makes(Op::Write(FdArg::Num(1), Vec::new())), Want::Ok),
        (Who::Root.makes(Op::Read(FdArg::Num(1), 8)), Want::Bytes(b"xyz")),
    ]);
}

#[test]
fn write_by_a_non_member_drops_set_group_id() {
    expect(&[
        (Who::Root.makes(Op::Open(s("f"), Flags(libc::O_WRONLY | libc::O_CREAT), 0o666)), Want::Ok),
        (Who::Root.makes(Op::Chmod(s("f"), 0o2666)), Want::Ok),
        (Who::User.makes(Op::Open(s("f"), Flags(libc::O_WRONLY), 0)), Want::Ok),
        (Who::User.makes(Op::Write(FdArg::Num(0), b"x".to_vec())), Want::Ok),
        (Who::Root.makes(Op::Stat(s("f"))), Want::Perm(0o666)),
    ]);
}

#[test]
fn chown_without_ids_by_a_stranger_may_not_clear_set_user_id() {
    let chown = |who: Who| who.makes(Op::Chown { path: s("f"), uid: None, gid: None, follow: true });
    expect(&[
        create_file(Who::Root, "f"),
        (Who::Root.makes(Op::Chmod(s("f"), 0o4755)), Want::Ok),
        (chown(Who::User), Want::Err(Errno::EPERM)),
        (Who::Root.makes(Op::Stat(s("f"))), Want::Perm(0o4755)),
        (chown(Who::Root), Want::Ok),
        (Who::Root.makes(Op::Stat(s("f"))), Want::Perm(0o755)),
    ]);
}
