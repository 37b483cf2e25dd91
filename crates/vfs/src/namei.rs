//! Path walking, in the two modes of Linux `fs/namei.c`
//! (Documentation/filesystems/path-lookup.rst).
//!
//! **rcu-walk** runs first. It pins the epoch and then takes no lock,
//! changes no reference count and writes nothing shared: each component is
//! found in the dcache hash, its dentry's `seq` is sampled, its hashed
//! state and inode read, and the `seq` re-checked.
//! Search permission is decided from attributes read through a seqlock. The
//! superblock's rename seqcount is sampled at the start and re-checked at
//! the end, so a walk that overlapped a rename never returns.
//!
//! rcu-walk gives up — and the whole walk restarts in **ref-walk** — on a
//! dcache miss, a stale negative dentry, a dentry unhashed or changing
//! under it, or an overlapping rename. ref-walk takes a `LockRef` reference
//! on every dentry it passes (dropping the previous one), looks up misses
//! under the directory lock (creating negative dentries when they are
//! cached), and retries around renames; after two retries it holds the
//! rename lock for reading, so it always finishes. With
//! [`WalkMode::RefOnly`](crate::config::WalkMode) walks start in ref-walk.
//!
//! Both modes share one driver ([`drive`]) over the [`Walker`] trait: the
//! modes differ only in how a position is held and how one step is taken.
//!
//! A walk is confined by its [`Scope`] (`openat2`'s resolve flags): `..`
//! never climbs above the root it is given (the process's root, or the
//! `dirfd` for `RESOLVE_IN_ROOT` and `RESOLVE_BENEATH`), and a beneath walk
//! refuses to reach the root's outside at all (EXDEV) rather than stopping
//! there.
//!
//! May import the base modules, the node types, `generated` and `superblock`.

use crate::dcache::Dcache;
use crate::dentry::{Dentry, DentryRef};
use crate::errno::{Errno, VfsResult};
use crate::generated::Revalidate;
use crate::inode::Inode;
use crate::path::{check_name_len, Last, PathName};
use crate::superblock::SuperBlock;
use crate::Credentials;
use crossbeam_epoch::Guard;
use std::sync::Arc;
use vfscale_sync::audited::CountedArc;

/// Most symlinks one walk follows (Linux `MAXSYMLINKS`).
pub const MAX_SYMLINKS: u32 = 40;

/// What to do with the last component.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Intent {
    /// Resolve it, following a final symlink.
    Follow,
    /// Resolve it, but not through a final symlink (`lstat`, `O_NOFOLLOW`).
    NoFollow,
    /// Stop at its parent directory and return the name unresolved.
    Parent,
}

/// The rules of one walk beyond its root: Linux's `LOOKUP_BENEATH`,
/// `LOOKUP_NO_SYMLINKS` and `LOOKUP_CACHED`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Scope {
    /// An absolute path or symlink, or `..` at the root, is EXDEV.
    pub beneath: bool,
    /// Following any symlink is ELOOP.
    pub no_symlinks: bool,
    /// The walk must finish in rcu-walk, from the dcache alone; where it
    /// cannot, EAGAIN.
    pub cached: bool,
    /// An empty path names the start itself (`AT_EMPTY_PATH`, Linux
    /// `LOOKUP_EMPTY`), which need not be a directory.
    pub empty_path: bool,
}

/// Where a walk ended.
#[derive(Debug)]
pub(crate) enum Walked<'p, P> {
    Found(P),
    /// With [`Intent::Parent`]: the directory holding the last component,
    /// which is a slice of the path itself (a final symlink is not followed).
    Parent {
        dir: P,
        last: Last<'p>,
        trailing_slash: bool,
    },
}

/// Why a walk step did not produce a position.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Stop {
    /// A definite error for this walk.
    Error(Errno),
    /// rcu-walk cannot decide without blocking: restart in ref-walk.
    Fallback,
}

impl From<Errno> for Stop {
    fn from(e: Errno) -> Stop {
        Stop::Error(e)
    }
}

/// One walk mode: how positions are held and how a step is taken.
pub(crate) trait Walker {
    type Pos;
    fn inode<'p>(&self, pos: &'p Self::Pos) -> &'p Arc<Inode>;
    fn start(&mut self, absolute: bool) -> Self::Pos;
    /// The parent of the directory at `pos`; `None` at the walk's root,
    /// which `..` does not leave.
    fn parent(&mut self, pos: &Self::Pos) -> Option<Self::Pos>;
    /// Search permission on the directory at `pos`.
    fn may_search(&mut self, pos: &Self::Pos) -> Result<(), Stop>;
    /// The child `name` of the directory at `pos`; `None` if it does not
    /// exist.
    fn child(&mut self, pos: &Self::Pos, name: &[u8]) -> Result<Option<Self::Pos>, Stop>;
}

/// The rest of a path: the path itself, and above it the bodies of the
/// symlinks being followed (innermost last), each with a position.
struct Cursor<'p> {
    path: (&'p [u8], usize),
    links: Vec<(Box<[u8]>, usize)>,
}

/// A component: which buffer (0 = the path, k = the k-th link body) and
/// which bytes.
type ComponentAt = (usize, usize, usize);

impl<'p> Cursor<'p> {
    fn new(path: &'p [u8]) -> Cursor<'p> {
        Cursor { path: (path, 0), links: Vec::new() }
    }

    fn buffer(&self, frame: usize) -> &[u8] {
        if frame == 0 {
            self.path.0
        } else {
            &self.links[frame - 1].0
        }
    }

    /// Buffers from the innermost outwards, with their positions.
    fn frames(&self) -> impl Iterator<Item = (&[u8], usize)> {
        self.links.iter().rev().map(|(buf, pos)| (&buf[..], *pos)).chain(std::iter::once(self.path))
    }

    /// Skips slashes; returns the next component.
    fn next(&mut self) -> Option<ComponentAt> {
        loop {
            let frame = self.links.len();
            let (buf, pos) = match self.links.last_mut() {
                Some((buf, pos)) => (&buf[..], pos),
                None => (self.path.0, &mut self.path.1),
            };
            while *pos < buf.len() && buf[*pos] == b'/' {
                *pos += 1;
            }
            if *pos == buf.len() {
                // The path itself is exhausted when no link body is left.
                self.links.pop()?;
                continue;
            }
            let start = *pos;
            let end = buf[start..].iter().position(|&b| b == b'/').map_or(buf.len(), |i| start + i);
            *pos = end;
            return Some((frame, start, end));
        }
    }

    fn bytes(&self, (frame, start, end): ComponentAt) -> &[u8] {
        &self.buffer(frame)[start..end]
    }

    /// Whether no component follows the one just taken.
    fn at_end(&self) -> bool {
        self.frames().all(|(buf, pos)| buf[pos..].iter().all(|&b| b == b'/'))
    }

    /// Whether slashes follow the last component (it must be a directory).
    fn trailing_slash(&self) -> bool {
        self.frames().any(|(buf, pos)| pos < buf.len())
    }

    fn push_link(&mut self, target: Box<[u8]>) {
        self.links.push((target, 0));
    }
}

/// Walks `path` with `walker`: the mode-independent part of namei.
pub(crate) fn drive<'p, W: Walker>(
    walker: &mut W,
    path: &'p [u8],
    intent: Intent,
    scope: Scope,
) -> Result<Walked<'p, W::Pos>, Stop> {
    let mut cursor = Cursor::new(path);
    let absolute = path.first() == Some(&b'/');
    if absolute && scope.beneath {
        return Err(Errno::EXDEV.into());
    }
    let mut pos = walker.start(absolute);
    let mut links_followed = 0;
    loop {
        let Some(component) = cursor.next() else {
            // Only slashes were left: the walk ends at `pos` (e.g. "/" or a
            // symlink to "/").
            return Ok(match intent {
                Intent::Parent => Walked::Parent { dir: pos, last: Last::Root, trailing_slash: false },
                _ => Walked::Found(pos),
            });
        };
        if !walker.inode(&pos).is_dir() {
            return Err(Errno::ENOTDIR.into());
        }
        walker.may_search(&pos)?;
        let is_last = cursor.at_end();
        if is_last && intent == Intent::Parent {
            let (frame, start, end) = component;
            debug_assert_eq!(frame, 0, "a final symlink is never followed for a parent walk");
            let last = match &path[start..end] {
                b"." => Last::Dot,
                b".." => Last::DotDot,
                name => {
                    check_name_len(name)?;
                    Last::Normal(name)
                }
            };
            return Ok(Walked::Parent { dir: pos, last, trailing_slash: cursor.trailing_slash() });
        }
        let name = cursor.bytes(component);
        match name {
            b"." => continue,
            b".." => {
                match walker.parent(&pos) {
                    Some(parent) => pos = parent,
                    None if scope.beneath => return Err(Errno::EXDEV.into()),
                    None => {}
                }
                continue;
            }
            _ => {}
        }
        check_name_len(name)?;
        let child = walker.child(&pos, name)?.ok_or(Stop::Error(Errno::ENOENT))?;
        let follow = !is_last || intent == Intent::Follow || cursor.trailing_slash();
        if let (Some(target), true) = (walker.inode(&child).symlink_target(), follow) {
            links_followed += 1;
            if links_followed > MAX_SYMLINKS || scope.no_symlinks {
                return Err(Errno::ELOOP.into());
            }
            if target.first() == Some(&b'/') {
                if scope.beneath {
                    return Err(Errno::EXDEV.into());
                }
                pos = walker.start(true);
            }
            cursor.push_link(target.into());
            if target.is_empty() {
                return Err(Errno::ENOENT.into());
            }
            continue;
        }
        pos = child;
        if is_last {
            if cursor.trailing_slash() && !walker.inode(&pos).is_dir() {
                return Err(Errno::ENOTDIR.into());
            }
            return Ok(Walked::Found(pos));
        }
    }
}

/// rcu-walk: positions are borrowed for the guard's lifetime.
struct RcuWalker<'g> {
    sb: &'g SuperBlock,
    cred: &'g Credentials,
    guard: &'g Guard,
    root: &'g Arc<Inode>,
    cwd: &'g Arc<Inode>,
}

impl<'g> Walker for RcuWalker<'g> {
    type Pos = &'g Arc<Inode>;

    fn inode<'p>(&self, pos: &'p &'g Arc<Inode>) -> &'p Arc<Inode> {
        pos
    }

    fn start(&mut self, absolute: bool) -> &'g Arc<Inode> {
        if absolute {
            self.root
        } else {
            self.cwd
        }
    }

    fn parent(&mut self, pos: &&'g Arc<Inode>) -> Option<&'g Arc<Inode>> {
        if Arc::ptr_eq(pos, self.root) {
            return None;
        }
        // The filesystem's own root (outside a chroot's) is its own parent.
        Some(pos.dir().ok().and_then(|d| d.parent(self.guard)).unwrap_or(pos))
    }

    fn may_search(&mut self, pos: &&'g Arc<Inode>) -> Result<(), Stop> {
        Ok(self.sb.may_search(pos, self.cred, true).ok_or(Stop::Fallback)??)
    }

    fn child(&mut self, pos: &&'g Arc<Inode>, name: &[u8]) -> Result<Option<&'g Arc<Inode>>, Stop> {
        let dentry: &'g Dentry = self.sb.dcache.lookup(pos.ino(), name, self.guard).ok_or(Stop::Fallback)?;
        let seq = dentry.seq.read_begin();
        if dentry.is_unhashed() || self.sb.revalidate(pos, dentry, true) != Revalidate::Valid {
            return Err(Stop::Fallback);
        }
        if dentry.seq.read_retry(seq) {
            return Err(Stop::Fallback);
        }
        Ok(dentry.inode.as_ref())
    }
}

/// A ref-walk position: an owned inode and the counted dentry that named it.
pub(crate) struct RefPos {
    inode: CountedArc<Inode>,
    _dentry: Option<DentryRef>,
}

/// An owned reference to an inode, counted as the shared write it is
/// (an `Arc` increment on the inode's cache line).
fn get_inode(inode: &Arc<Inode>) -> CountedArc<Inode> {
    CountedArc::new(inode)
}

/// ref-walk: positions hold references.
struct RefWalker<'a> {
    sb: &'a SuperBlock,
    cred: &'a Credentials,
    root: &'a Arc<Inode>,
    cwd: &'a Arc<Inode>,
}

impl Walker for RefWalker<'_> {
    type Pos = RefPos;

    fn inode<'p>(&self, pos: &'p RefPos) -> &'p Arc<Inode> {
        &pos.inode
    }

    fn start(&mut self, absolute: bool) -> RefPos {
        let inode = if absolute { self.root } else { self.cwd };
        RefPos { inode: get_inode(inode), _dentry: None }
    }

    fn parent(&mut self, pos: &RefPos) -> Option<RefPos> {
        if Arc::ptr_eq(&pos.inode, self.root) {
            return None;
        }
        let guard = crossbeam_epoch::pin();
        let parent = pos.inode.dir().ok().and_then(|d| d.parent(&guard)).unwrap_or(&pos.inode);
        Some(RefPos { inode: get_inode(parent), _dentry: None })
    }

    fn may_search(&mut self, pos: &RefPos) -> Result<(), Stop> {
        let _step = self.sb.dir_locks.global();
        let decided = self.sb.may_search(&pos.inode, self.cred, false);
        Ok(decided.expect("ref-walk permission always decides")?)
    }

    fn child(&mut self, pos: &RefPos, name: &[u8]) -> Result<Option<RefPos>, Stop> {
        let dir = pos.inode.dir()?;
        if let Some(found) = self.cached_child(pos, name) {
            return Ok(found);
        }
        let locked = self.sb.dir_locks.read(dir);
        if let Some(generator) = &self.sb.generator {
            return match generator.lookup(&pos.inode, name)? {
                Some(inode) => {
                    let dentry = Dentry::new(pos.inode.ino(), name, Some(Arc::clone(&inode)), 0);
                    self.sb.dcache.insert(Arc::clone(&dentry), &crossbeam_epoch::pin());
                    let inode = CountedArc::adopt(inode);
                    Ok(Some(RefPos { inode, _dentry: DentryRef::try_get(CountedArc::adopt(dentry)) }))
                }
                None => {
                    self.sb.cache_negative(&pos.inode, name);
                    Ok(None)
                }
            };
        }
        if let Some(dentry) = locked.children.get(name) {
            let inode = get_inode(dentry.inode.as_ref().expect("children are positive"));
            return Ok(Some(RefPos { inode, _dentry: DentryRef::try_get(CountedArc::new(dentry)) }));
        }
        if !dir.is_dead() {
            self.sb.cache_negative(&pos.inode, name);
        }
        Ok(None)
    }
}

impl RefWalker<'_> {
    /// The dcache's answer, with a reference taken, when it has a valid one.
    fn cached_child(&self, pos: &RefPos, name: &[u8]) -> Option<Option<RefPos>> {
        let _revalidate = self.sb.dir_locks.global();
        let guard = crossbeam_epoch::pin();
        let dentry = Dcache::to_arc(self.sb.dcache.lookup(pos.inode.ino(), name, &guard)?);
        let counted = DentryRef::try_get(dentry)?;
        let dentry = counted.dentry();
        if dentry.is_unhashed() {
            return None;
        }
        if self.sb.revalidate(&pos.inode, dentry, false) != Revalidate::Valid {
            // Linux `d_invalidate`: the stale entry leaves the cache.
            self.sb.dcache.remove(dentry, &guard);
            return None;
        }
        let inode = dentry.inode.as_ref().map(get_inode);
        Some(inode.map(|inode| RefPos { inode, _dentry: Some(counted) }))
    }
}

/// Where a walk starts and what confines it.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Start<'a> {
    /// Where absolute paths start, and above which `..` does not climb.
    pub root: &'a Arc<Inode>,
    /// Where relative paths start.
    pub cwd: &'a Arc<Inode>,
    pub scope: Scope,
}

/// Resolves `path` from `start.cwd` (or `start.root` if absolute), in the
/// superblock's walk mode, and hands the end of the walk to `finish`. A
/// relative path from a start that is not a directory is ENOTDIR at its
/// first component, as in Linux's `path_init`.
///
/// `finish` runs inside the walk: in rcu-walk it sees borrowed inodes and
/// must not block; its result is discarded if the walk has to restart.
pub(crate) fn walk<'p, R>(
    sb: &SuperBlock,
    cred: &Credentials,
    start: Start<'_>,
    path: &'p [u8],
    intent: Intent,
    finish: impl Fn(Walked<'p, &Arc<Inode>>) -> VfsResult<R>,
) -> VfsResult<R> {
    let Start { root, cwd, scope } = start;
    if path.is_empty() && scope.empty_path && intent != Intent::Parent {
        return finish(Walked::Found(cwd));
    }
    PathName::new(path)?;
    if sb.rcu_walk_enabled() {
        let guard = crossbeam_epoch::pin();
        let rename_seq = sb.rename_seq.read_begin();
        let mut walker = RcuWalker { sb, cred, guard: &guard, root, cwd };
        match drive(&mut walker, path, intent, scope) {
            Ok(walked) => {
                let result = finish(walked);
                if !sb.rename_seq.read_retry(rename_seq) {
                    return result;
                }
            }
            Err(Stop::Error(e)) => {
                if !sb.rename_seq.read_retry(rename_seq) {
                    return Err(e);
                }
            }
            Err(Stop::Fallback) => {}
        }
    }
    if scope.cached {
        // Linux `LOOKUP_CACHED`: no ref-walk, which may block.
        return Err(Errno::EAGAIN);
    }
    ref_walk(sb, cred, start, path, intent, finish)
}

fn ref_walk<'p, R>(
    sb: &SuperBlock,
    cred: &Credentials,
    start: Start<'_>,
    path: &'p [u8],
    intent: Intent,
    finish: impl Fn(Walked<'p, &Arc<Inode>>) -> VfsResult<R>,
) -> VfsResult<R> {
    const OPTIMISTIC_TRIES: usize = 2;
    let mut walker = RefWalker { sb, cred, root: start.root, cwd: start.cwd };
    let run = |walker: &mut RefWalker<'_>| match drive(walker, path, intent, start.scope) {
        Ok(Walked::Found(pos)) => finish(Walked::Found(&pos.inode)),
        Ok(Walked::Parent { dir, last, trailing_slash }) => {
            finish(Walked::Parent { dir: &dir.inode, last, trailing_slash })
        }
        Err(Stop::Error(e)) => Err(e),
        Err(Stop::Fallback) => unreachable!("ref-walk steps always decide"),
    };
    for _ in 0..OPTIMISTIC_TRIES {
        let rename_seq = sb.rename_seq.read_begin();
        let result = run(&mut walker);
        if !sb.rename_seq.read_retry(rename_seq) {
            return result;
        }
    }
    let _no_renames = sb.rename_lock.read();
    run(&mut walker)
}
