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
//! Mounts: a position is a (mount, inode) pair ([`At`]). A step onto an
//! inode some mount sits on (its mount count is not zero) looks the
//! namespace's mount table up and goes on at the top mount's root; `..`
//! at a mount's root climbs to the mount point in the parent mount first.
//! rcu-walk reads the table snapshot it loaded at its start, under its
//! guard; it samples the rename seqcount of every superblock it enters
//! (up to [`MAX_SUPERBLOCKS`], then it falls back), and, in a namespace,
//! the namespace's gate, so a result that keeps its mount is confirmed
//! against any `umount` that began meanwhile. ref-walk takes a counted
//! [`MountRef`] at each crossing, confirmed the same way.
//!
//! May import the base modules, the node types, `fs`, `superblock`
//! and `mount`.

use crate::dcache::Dcache;
use crate::dentry::{scan_component, Dentry, DentryRef};
use crate::errno::{Errno, VfsResult};
use crate::fs::Revalidate;
use crate::inode::Inode;
use crate::mount::{Mount, MountNamespace, MountRef, MountTable};
use crate::path::{check_name_len, Last, PathName};
use crate::superblock::SuperBlock;
use crate::Credentials;
use crossbeam_epoch::Guard;
use std::sync::Arc;
use vfscale_sync::audited::CountedArc;
use vfscale_sync::seq_gate;

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
    /// Crossing into or out of a mount is EXDEV (`RESOLVE_NO_XDEV`).
    pub no_xdev: bool,
    /// The walk's root is its start (`RESOLVE_IN_ROOT`, `RESOLVE_BENEATH`:
    /// Linux sets `nd->root` at once).
    pub rooted_at_start: bool,
}

/// Most superblocks one rcu-walk enters before it falls back to ref-walk.
pub const MAX_SUPERBLOCKS: usize = 4;

/// A place a walk is at: a mount, and an inode seen through it.
#[derive(Debug, Clone, Copy)]
pub(crate) struct At<'a> {
    pub mount: &'a Mount,
    pub inode: &'a Arc<Inode>,
}

impl<'a> At<'a> {
    /// The superblock of the inode.
    #[inline]
    pub fn sb(&self) -> &'a SuperBlock {
        &self.mount.sb
    }

    fn is(&self, other: &At<'_>) -> bool {
        std::ptr::eq(self.mount, other.mount) && Arc::ptr_eq(self.inode, other.inode)
    }
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
    /// A `..` met a walk that reads no rename counts: walk again reading
    /// them (see [`RenameSeqs`]).
    Climbs,
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
    fn mount<'p>(&self, pos: &'p Self::Pos) -> &'p Mount;
    fn start(&mut self, absolute: bool) -> Self::Pos;
    /// The parent of the directory at `pos`, across mount roots; `None` at
    /// the walk's root, which `..` does not leave.
    fn parent(&mut self, pos: &Self::Pos) -> Result<Option<Self::Pos>, Stop>;
    /// The root of the mount stacked highest on `pos`, where `..` at the
    /// walk's root stays (Linux `follow_dotdot` then `step_into`); `None`
    /// where no mount is on it.
    fn onto_mounts(&mut self, pos: &Self::Pos) -> Result<Option<Self::Pos>, Stop>;
    /// Search permission on the directory at `pos`.
    fn may_search(&mut self, pos: &Self::Pos) -> Result<(), Stop>;
    /// The child `name` of the directory at `pos`; `None` if it does not
    /// exist. `hash` is the name's [`name_hash`](crate::dentry::name_hash).
    fn child(&mut self, pos: &Self::Pos, name: &[u8], hash: u64) -> Result<Option<Self::Pos>, Stop>;
}

/// The rest of a path: the path itself, and above it the bodies of the
/// symlinks being followed (innermost last), each with a position.
struct Cursor<'p> {
    path: (&'p [u8], usize),
    links: Vec<(Box<[u8]>, usize)>,
}

/// A component: which buffer (0 = the path, k = the k-th link body),
/// which bytes, and their [`name_hash`](crate::dentry::name_hash).
#[derive(Debug, Clone, Copy)]
struct ComponentAt {
    frame: usize,
    start: usize,
    end: usize,
    hash: u64,
}

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
            let (end, hash) = scan_component(buf, start);
            *pos = end;
            return Some(ComponentAt { frame, start, end, hash });
        }
    }

    fn bytes(&self, ComponentAt { frame, start, end, .. }: ComponentAt) -> &[u8] {
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
    // Whether Linux would have set `nd->root` by now: at an absolute start,
    // a scoped start, or the first `..`. Until then `nd_jump_root` refuses
    // any absolute symlink under RESOLVE_NO_XDEV, whatever its mount.
    let mut root_known = absolute || scope.rooted_at_start;
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
            let ComponentAt { frame, start, end, .. } = component;
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
                root_known = true;
                match walker.parent(&pos)? {
                    Some(parent) => pos = parent,
                    None if scope.beneath => return Err(Errno::EXDEV.into()),
                    None => {
                        if let Some(top) = walker.onto_mounts(&pos)? {
                            pos = top;
                        }
                    }
                }
                continue;
            }
            _ => {}
        }
        check_name_len(name)?;
        let child = walker.child(&pos, name, component.hash)?.ok_or(Stop::Error(Errno::ENOENT))?;
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
                let root = walker.start(true);
                if scope.no_xdev && (!root_known || !std::ptr::eq(walker.mount(&root), walker.mount(&pos))) {
                    return Err(Errno::EXDEV.into());
                }
                root_known = true;
                pos = root;
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

/// The rename seqcounts an rcu-walk sampled, one per superblock entered,
/// once `sampling`.
///
/// Only a walk that climbs (`..`) follows a directory's parent link,
/// which is all that a move of a directory between directories changes
/// for a walk (the entries it changes are each seen whole, as a rename in
/// one directory's are), so only such a walk reads the rename counts: a
/// walk starts reading none, and the first `..` it meets, in its path or
/// in a symlink's target, makes it walk again ([`Stop::Climbs`]) reading
/// them from its start.
struct RenameSeqs<'g> {
    seen: [Option<(&'g SuperBlock, u32)>; MAX_SUPERBLOCKS],
    sampling: bool,
}

impl<'g> RenameSeqs<'g> {
    fn new(sampling: bool) -> RenameSeqs<'g> {
        RenameSeqs { seen: [None; MAX_SUPERBLOCKS], sampling }
    }

    /// Samples `sb`'s count unless it was; false when full.
    #[inline]
    fn enter(&mut self, sb: &'g SuperBlock) -> bool {
        if !self.sampling {
            return true;
        }
        for slot in &mut self.seen {
            match slot {
                Some((seen, _)) if std::ptr::eq(*seen, sb) => return true,
                Some(_) => {}
                None => {
                    *slot = Some((sb, sb.rename_seq.read_begin()));
                    return true;
                }
            }
        }
        false
    }

    /// Whether a rename overlapped the walk in any superblock it entered.
    fn retry(&self) -> bool {
        self.seen.iter().flatten().any(|(sb, seq)| sb.rename_seq.read_retry(*seq))
    }
}

/// rcu-walk: positions are borrowed for the guard's lifetime.
struct RcuWalker<'g> {
    cred: &'g Credentials,
    guard: &'g Guard,
    table: Option<&'g MountTable>,
    root: At<'g>,
    cwd: At<'g>,
    no_xdev: bool,
    seqs: RenameSeqs<'g>,
}

impl<'g> RcuWalker<'g> {
    /// `at`, or the root of the mount stacked highest on it.
    #[inline]
    fn cross(&mut self, at: At<'g>) -> Result<At<'g>, Stop> {
        match self.table {
            Some(table) if at.inode.has_mounts() => self.cross_mounted(table, at),
            _ => Ok(at),
        }
    }

    /// [`RcuWalker::cross`] at an inode a mount may sit on.
    #[inline(never)]
    fn cross_mounted(&mut self, table: &'g MountTable, mut at: At<'g>) -> Result<At<'g>, Stop> {
        while at.inode.has_mounts() {
            let Some(child) = table.child(at.mount, at.inode) else { break };
            if self.no_xdev {
                return Err(Errno::EXDEV.into());
            }
            if !child.sb.rcu_walk_enabled() || !self.seqs.enter(&child.sb) {
                return Err(Stop::Fallback);
            }
            at = At { mount: child, inode: child.root() };
        }
        Ok(at)
    }
}

impl<'g> Walker for RcuWalker<'g> {
    type Pos = At<'g>;

    fn inode<'p>(&self, pos: &'p At<'g>) -> &'p Arc<Inode> {
        pos.inode
    }

    fn mount<'p>(&self, pos: &'p At<'g>) -> &'p Mount {
        pos.mount
    }

    fn start(&mut self, absolute: bool) -> At<'g> {
        if absolute {
            self.root
        } else {
            self.cwd
        }
    }

    fn parent(&mut self, pos: &At<'g>) -> Result<Option<At<'g>>, Stop> {
        if !self.seqs.sampling {
            return Err(Stop::Climbs);
        }
        let mut at = *pos;
        loop {
            if at.is(&self.root) {
                return Ok(if at.is(pos) { None } else { Some(*pos) });
            }
            if !Arc::ptr_eq(at.inode, at.mount.root()) {
                break;
            }
            let Some((parent, mountpoint)) = self.table.and_then(|t| t.parent(at.mount)) else {
                // The namespace's root, or a detached mount: its own parent.
                return Ok(Some(*pos));
            };
            if self.no_xdev {
                return Err(Errno::EXDEV.into());
            }
            if !self.seqs.enter(&parent.sb) {
                return Err(Stop::Fallback);
            }
            at = At { mount: parent, inode: mountpoint };
        }
        // The filesystem's own root is its own parent.
        let inode = at.inode.dir().ok().and_then(|d| d.parent(self.guard)).unwrap_or(at.inode);
        self.cross(At { mount: at.mount, inode }).map(Some)
    }

    fn onto_mounts(&mut self, pos: &At<'g>) -> Result<Option<At<'g>>, Stop> {
        let top = self.cross(*pos)?;
        Ok((!top.is(pos)).then_some(top))
    }

    fn may_search(&mut self, pos: &At<'g>) -> Result<(), Stop> {
        Ok(pos.sb().may_search_rcu(pos.inode, self.cred).ok_or(Stop::Fallback)??)
    }

    #[inline]
    fn child(&mut self, pos: &At<'g>, name: &[u8], hash: u64) -> Result<Option<At<'g>>, Stop> {
        let sb = pos.sb();
        let Some(dentry) = sb.dcache.lookup_hashed(pos.inode.ino(), name, hash, self.guard) else {
            // A native tree's dcache holds every name its directories
            // have; where their entries tell a missing name without a lock
            // (`DirLocks::peek`), a miss ends here, in rcu-walk, as a
            // cached negative would end it. Elsewhere ref-walk looks.
            let missing = sb.native
                && sb.fs.caches_negatives()
                && matches!(sb.dir_locks.peek(pos.inode.dir()?, name, hash, self.guard), Some(None));
            return if missing { Ok(None) } else { Err(Stop::Fallback) };
        };
        let seq = dentry.seq.read_begin();
        if dentry.is_unhashed() || sb.revalidate(pos.inode, dentry, Some(self.guard)) != Revalidate::Valid {
            return Err(Stop::Fallback);
        }
        if dentry.seq.read_retry(seq) {
            return Err(Stop::Fallback);
        }
        match dentry.inode.as_ref() {
            Some(inode) => self.cross(At { mount: pos.mount, inode }).map(Some),
            None => Ok(None),
        }
    }
}

/// A ref-walk position: a counted mount, an owned inode and the counted
/// dentry that named it.
pub(crate) struct RefPos {
    mount: MountRef,
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
    cred: &'a Credentials,
    ns: Option<&'a MountNamespace>,
    root: &'a At<'a>,
    cwd: &'a At<'a>,
    no_xdev: bool,
    /// The superblocks entered, each once, with its rename count as first
    /// seen; none unless `sampling` (see [`RenameSeqs`]).
    seqs: Vec<(Arc<SuperBlock>, u32)>,
    sampling: bool,
}

impl RefWalker<'_> {
    fn enter(&mut self, sb: &Arc<SuperBlock>) {
        if self.sampling && !self.seqs.iter().any(|(seen, _)| Arc::ptr_eq(seen, sb)) {
            self.seqs.push((Arc::clone(sb), sb.rename_seq.read_begin()));
        }
    }

    fn counted(at: &At<'_>) -> RefPos {
        let mount = MountRef::try_get(at.mount).expect("a walk's start is held by its caller");
        RefPos { mount, inode: get_inode(at.inode), _dentry: None }
    }

    /// `pos`, or the root of the mount stacked highest on it, counted.
    fn cross(&mut self, mut pos: RefPos) -> Result<RefPos, Stop> {
        let Some(ns) = self.ns else { return Ok(pos) };
        while pos.inode.has_mounts() {
            let Some(child) = crossed(ns, &pos.mount, &pos.inode) else { break };
            if self.no_xdev {
                return Err(Errno::EXDEV.into());
            }
            self.enter(&child.sb);
            let inode = get_inode(child.root());
            pos = RefPos { mount: child, inode, _dentry: None };
        }
        Ok(pos)
    }
}

/// The mount on `inode` of `mount` in `ns`, counted, for a last component
/// found outside a walk (`O_CREAT`'s), which crosses onto it as the walk
/// would (Linux `step_into` and `handle_mounts`).
pub(crate) fn mounted_on(ns: &MountNamespace, mount: &Mount, inode: &Inode) -> Option<MountRef> {
    crossed(ns, mount, inode)
}

/// The mount on `inode` of `mount` in `ns`, counted and confirmed against
/// the gate (Linux `lookup_mnt` with `legitimize_mnt`).
fn crossed(ns: &MountNamespace, mount: &Mount, inode: &Inode) -> Option<MountRef> {
    loop {
        let start = ns.gate.read_begin();
        let guard = crossbeam_epoch::pin();
        let child = ns.table(&guard).child(mount, inode)?;
        if let Some(counted) = MountRef::try_get(child) {
            if seq_gate::confirm(&ns.gate, start) {
                return Some(counted);
            }
        }
    }
}

impl Walker for RefWalker<'_> {
    type Pos = RefPos;

    fn inode<'p>(&self, pos: &'p RefPos) -> &'p Arc<Inode> {
        &pos.inode
    }

    fn mount<'p>(&self, pos: &'p RefPos) -> &'p Mount {
        &pos.mount
    }

    fn start(&mut self, absolute: bool) -> RefPos {
        let at = if absolute { self.root } else { self.cwd };
        self.enter(&at.mount.sb);
        Self::counted(at)
    }

    fn parent(&mut self, pos: &RefPos) -> Result<Option<RefPos>, Stop> {
        if !self.sampling {
            return Err(Stop::Climbs);
        }
        let is_root = |mount: &Mount, inode: &Arc<Inode>| At { mount, inode }.is(self.root);
        if is_root(&pos.mount, &pos.inode) {
            return Ok(None);
        }
        let mut mount = pos.mount.clone();
        let mut inode = Arc::clone(&pos.inode);
        while Arc::ptr_eq(&inode, mount.root()) {
            let parent = self.ns.and_then(|ns| {
                let guard = crossbeam_epoch::pin();
                let (parent, mountpoint) = ns.table(&guard).parent(&mount)?;
                Some((MountRef::try_get(parent)?, Arc::clone(mountpoint)))
            });
            let Some((parent, mountpoint)) = parent else { break };
            if self.no_xdev {
                return Err(Errno::EXDEV.into());
            }
            if is_root(&parent, &mountpoint) {
                // Linux's `choose_mountpoint` stops below the root.
                return Ok(Some(RefPos { mount: pos.mount.clone(), inode: get_inode(&pos.inode), _dentry: None }));
            }
            self.enter(&parent.sb);
            (mount, inode) = (parent, mountpoint);
        }
        let guard = crossbeam_epoch::pin();
        let parent = inode.dir().ok().and_then(|d| d.parent(&guard)).unwrap_or(&inode);
        let parent = RefPos { inode: get_inode(parent), mount, _dentry: None };
        drop(guard);
        self.cross(parent).map(Some)
    }

    fn onto_mounts(&mut self, pos: &RefPos) -> Result<Option<RefPos>, Stop> {
        if !pos.inode.has_mounts() {
            return Ok(None);
        }
        let here = RefPos { mount: pos.mount.clone(), inode: get_inode(&pos.inode), _dentry: None };
        let top = self.cross(here)?;
        Ok((!Arc::ptr_eq(&top.inode, &pos.inode) || !std::ptr::eq(&*top.mount, &*pos.mount)).then_some(top))
    }

    fn may_search(&mut self, pos: &RefPos) -> Result<(), Stop> {
        let sb = &pos.mount.sb;
        let _step = sb.dir_locks.global();
        Ok(sb.may_search(&pos.inode, self.cred)?)
    }

    fn child(&mut self, pos: &RefPos, name: &[u8], hash: u64) -> Result<Option<RefPos>, Stop> {
        let found = self.child_here(pos, name, hash)?;
        match found {
            Some(child) => self.cross(child).map(Some),
            None => Ok(None),
        }
    }
}

impl RefWalker<'_> {
    /// The child `name` of the directory at `pos`, in `pos`'s mount.
    fn child_here(&self, pos: &RefPos, name: &[u8], hash: u64) -> Result<Option<RefPos>, Stop> {
        let sb = &pos.mount.sb;
        let dir = pos.inode.dir()?;
        if let Some(found) = self.cached_child(pos, name, hash) {
            return Ok(found);
        }
        let here = |inode, dentry| RefPos { mount: pos.mount.clone(), inode, _dentry: dentry };
        let locked = sb.dir_locks.read(dir);
        if !sb.native {
            return match sb.fs.lookup(&pos.inode, name)? {
                Some(inode) => {
                    let dentry = Dentry::new(pos.inode.ino(), name, Some(Arc::clone(&inode)), 0);
                    sb.dcache.insert(Arc::clone(&dentry), &crossbeam_epoch::pin());
                    let inode = CountedArc::adopt(inode);
                    Ok(Some(here(inode, DentryRef::try_get(CountedArc::adopt(dentry)))))
                }
                None => {
                    sb.cache_negative(&pos.inode, name);
                    Ok(None)
                }
            };
        }
        drop(locked);
        // Under the name's lock, the miss recorded with it: a lock-free
        // look-up could find a renamed object at its new name and then
        // still at its old one.
        let found = sb.dir_locks.with_name_locked(dir, name, |found| match found {
            Some(dentry) => Some(CountedArc::new(dentry)),
            None => {
                if !dir.is_dead() {
                    sb.cache_negative(&pos.inode, name);
                }
                None
            }
        });
        Ok(found.map(|dentry| {
            let inode = get_inode(dentry.inode.as_ref().expect("entries are positive"));
            here(inode, DentryRef::try_get(dentry))
        }))
    }

    /// The dcache's answer, with a reference taken, when it has a valid one.
    fn cached_child(&self, pos: &RefPos, name: &[u8], hash: u64) -> Option<Option<RefPos>> {
        let sb = &pos.mount.sb;
        let _revalidate = sb.dir_locks.global();
        let guard = crossbeam_epoch::pin();
        let dentry = Dcache::to_arc(sb.dcache.lookup_hashed(pos.inode.ino(), name, hash, &guard)?);
        let counted = DentryRef::try_get(dentry)?;
        let dentry = counted.dentry();
        if dentry.is_unhashed() {
            return None;
        }
        if sb.revalidate(&pos.inode, dentry, None) != Revalidate::Valid {
            // Linux `d_invalidate`: the stale entry leaves the cache.
            sb.dcache.remove(dentry, &guard);
            return None;
        }
        let inode = dentry.inode.as_ref().map(get_inode);
        Some(inode.map(|inode| RefPos { mount: pos.mount.clone(), inode, _dentry: Some(counted) }))
    }
}

/// Where a walk starts and what confines it.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Start<'a> {
    /// The mount namespace whose mounts the walk crosses; none for a walk
    /// inside one instance.
    pub ns: Option<&'a MountNamespace>,
    /// Where absolute paths start, and above which `..` does not climb.
    pub root: At<'a>,
    /// Where relative paths start.
    pub cwd: At<'a>,
    pub scope: Scope,
}

/// Resolves `path` from `start.cwd` (or `start.root` if absolute) and
/// hands the end of the walk to `finish`: in rcu-walk where the start's
/// superblocks allow it, else in ref-walk. A relative path from a start
/// that is not a directory is ENOTDIR at its first component, as in
/// Linux's `path_init`.
///
/// `finish` runs inside the walk: in rcu-walk it sees borrowed inodes and
/// mounts and must not block; it may take references (an open count, a
/// [`MountRef`]), and its result is dropped if the walk has to restart.
pub(crate) fn walk<'p, R>(
    cred: &Credentials,
    start: Start<'_>,
    path: &'p [u8],
    intent: Intent,
    finish: impl Fn(Walked<'p, At<'_>>) -> VfsResult<R>,
) -> VfsResult<R> {
    let Start { ns, root, cwd, scope } = start;
    if path.is_empty() && scope.empty_path && intent != Intent::Parent {
        return finish(Walked::Found(cwd));
    }
    PathName::new(path)?;
    let mut sampling = false;
    if root.sb().rcu_walk_enabled() && cwd.sb().rcu_walk_enabled() {
        loop {
            let guard = crossbeam_epoch::pin();
            let gate = ns.map(|ns| ns.gate.read_begin());
            let table = ns.map(|ns| ns.table(&guard));
            let seqs = RenameSeqs::new(sampling);
            let mut walker = RcuWalker { cred, guard: &guard, table, root, cwd, no_xdev: scope.no_xdev, seqs };
            walker.seqs.enter(root.sb());
            walker.seqs.enter(cwd.sb());
            let valid = |walker: &RcuWalker<'_>| {
                !walker.seqs.retry() && ns.zip(gate).map_or(true, |(ns, start)| seq_gate::confirm(&ns.gate, start))
            };
            match drive(&mut walker, path, intent, scope) {
                Ok(walked) => {
                    let result = finish(walked);
                    if valid(&walker) {
                        return result;
                    }
                }
                Err(Stop::Error(e)) => {
                    if valid(&walker) {
                        return Err(e);
                    }
                }
                Err(Stop::Climbs) => {
                    sampling = true;
                    continue;
                }
                Err(Stop::Fallback) => {}
            }
            break;
        }
    }
    if scope.cached {
        // Linux `LOOKUP_CACHED`: no ref-walk, which may block.
        return Err(Errno::EAGAIN);
    }
    ref_walk(cred, start, path, intent, sampling, finish)
}

fn ref_walk<'p, R>(
    cred: &Credentials,
    start: Start<'_>,
    path: &'p [u8],
    intent: Intent,
    sampling: bool,
    finish: impl Fn(Walked<'p, At<'_>>) -> VfsResult<R>,
) -> VfsResult<R> {
    const OPTIMISTIC_TRIES: usize = 2;
    let mut walker = RefWalker {
        cred,
        ns: start.ns,
        root: &start.root,
        cwd: &start.cwd,
        no_xdev: start.scope.no_xdev,
        seqs: Vec::new(),
        sampling,
    };
    // None: the walk climbed without reading the rename counts.
    let run = |walker: &mut RefWalker<'_>| match drive(walker, path, intent, start.scope) {
        Ok(Walked::Found(pos)) => Some(finish(Walked::Found(At { mount: &pos.mount, inode: &pos.inode }))),
        Ok(Walked::Parent { dir, last, trailing_slash }) => {
            Some(finish(Walked::Parent { dir: At { mount: &dir.mount, inode: &dir.inode }, last, trailing_slash }))
        }
        Err(Stop::Error(e)) => Some(Err(e)),
        Err(Stop::Climbs) => None,
        Err(Stop::Fallback) => unreachable!("ref-walk steps always decide"),
    };
    let mut tries = 0;
    while tries < OPTIMISTIC_TRIES {
        walker.seqs.clear();
        let Some(result) = run(&mut walker) else {
            walker.sampling = true;
            continue;
        };
        tries += 1;
        if !walker.seqs.iter().any(|(sb, seq)| sb.rename_seq.read_retry(*seq)) {
            return result;
        }
    }
    // Renames keep overlapping: hold the rename lock of every superblock
    // the last walk entered, and walk again until it enters no other.
    loop {
        let mut entered: Vec<Arc<SuperBlock>> = walker.seqs.iter().map(|(sb, _)| Arc::clone(sb)).collect();
        // In one order (by address), so two walks never wait on each
        // other's locks behind a writer.
        entered.sort_by_key(|sb| Arc::as_ptr(sb) as usize);
        let _no_renames: Vec<_> = entered.iter().map(|sb| sb.rename_lock.read()).collect();
        walker.seqs.clear();
        let result = run(&mut walker).expect("the walks here read the rename counts");
        if walker.seqs.iter().all(|(sb, _)| entered.iter().any(|held| Arc::ptr_eq(held, sb))) {
            return result;
        }
    }
}
