//! Namespace operations — everything that adds, removes, renames or
//! inspects names — with Linux's checks, in Linux's order.
//!
//! Invariant: each operation changes a directory's names only under their
//! locks (`dirlock`), updating the entries and the dcache together (a new name's dentry replaces its negative one in the
//! hash), so rcu-walks and negative dentries see every change. A failed
//! operation changes nothing (a create that lost the race for its name
//! has used up an inode number).
//!
//! May import the base modules, the node types, `namei`, `mount`,
//! `superblock`, `dirlock` and `notify_change`; the system-call layer (`syscalls`) calls
//! it.

use crate::cred::{may_delete_in_sticky, Access, Capabilities};
use crate::dentry::Dentry;
use crate::dirlock::{NameLock, RenameLocks, WholeDir};
use crate::errno::{Errno, VfsResult};
use crate::inode::{Inode, NewInode, ParentLink};
use crate::mode::{S_IALLUGO, S_IFDIR, S_IFMT, S_ISGID, S_ISVTX, S_IXGRP};
use crate::mount::{MountNamespace, MountRef, MountWrite};
use crate::namei::{walk, At, Intent, Scope, Start, Walked};
use crate::path::{DirOp, Last};
use crate::superblock::SuperBlock;
use crate::types::{FileType, RenameFlags, SetTime, Stat};
use crate::Credentials;
use std::sync::Arc;
use vfscale_sync::audited::CountedArc;

/// Who performs an operation, and from where relative paths start: the
/// name operations' view of a [`Context`](crate::Context).
#[derive(Debug, Clone, Copy)]
pub(crate) struct Ctx<'a> {
    /// The namespace whose mounts walks cross; none inside one instance.
    pub ns: Option<&'a MountNamespace>,
    pub cred: &'a Credentials,
    /// Where absolute paths start and `..` stops.
    pub root: At<'a>,
    pub cwd: At<'a>,
    pub scope: Scope,
}

/// A place a walk ended at, held: its mount and its inode (counted, or
/// for the directory of a name, [`PinnedInode`]).
pub(crate) struct Dir<I = CountedArc<Inode>> {
    pub mount: MountRef,
    pub inode: I,
}

/// The directory a walk for a name's parent ended at.
pub(crate) type ParentDir = Dir<PinnedInode>;

impl<I: std::ops::Deref<Target = Arc<Inode>>> std::ops::Deref for Dir<I> {
    type Target = Arc<Inode>;
    fn deref(&self) -> &Arc<Inode> {
        &self.inode
    }
}

impl<I> Dir<I> {
    fn sb(&self) -> &SuperBlock {
        &self.mount.sb
    }
}

/// An inode a walk ended at, kept by the epoch the walk ran in rather
/// than by a count, so that changes of different names in one directory
/// write no count on it (Linux holds the parent's dentry with a counted
/// `d_lockref`, one line every such change writes).
///
/// Sound because the guard was pinned before the walk began and stays
/// pinned (a nested pin keeps the thread's first epoch) until this drops:
/// every inode a walk can end at is held by something released only
/// through the epoch (a dentry's inode, a directory's parent pointer), by
/// the walk's start (borrowed for the call), or by a mount root (its
/// mount is counted in [`Dir::mount`]), so its `Arc` outlives the guard.
pub(crate) struct PinnedInode {
    arc: std::mem::ManuallyDrop<Arc<Inode>>,
    _pin: crossbeam_epoch::Guard,
}

impl PinnedInode {
    /// Holds `inode` under the current thread's pin, which the caller took
    /// before the walk that found it.
    fn new(inode: &Arc<Inode>) -> PinnedInode {
        // SAFETY: the strong count of `inode` stays above zero until the
        // pin below is dropped (see the type's doc); this `Arc` is never
        // dropped, so it takes no count and gives none back.
        let arc = std::mem::ManuallyDrop::new(unsafe { Arc::from_raw(Arc::as_ptr(inode)) });
        PinnedInode { arc, _pin: crossbeam_epoch::pin() }
    }

    /// A counted reference, to keep beyond this one.
    pub fn into_arc(self) -> Arc<Inode> {
        CountedArc::new(&self.arc).into_arc()
    }
}

impl std::ops::Deref for PinnedInode {
    type Target = Arc<Inode>;
    fn deref(&self) -> &Arc<Inode> {
        &self.arc
    }
}

/// A counted reference to the mount of `at`, for a walk's result to keep.
/// An rcu-walk may find a mount an `umount` has freed since the walk's
/// table was read: then EAGAIN, which the walk discards, because its gate
/// check fails and it walks again (ref-walk holds every mount it is at).
pub(crate) fn keep_mount(at: &At<'_>) -> VfsResult<MountRef> {
    keep_mount_on(at, vfscale_sync::cpu::current_cpu())
}

/// [`keep_mount`], counted on `cpu`'s slot, which the caller has just
/// looked up.
pub(crate) fn keep_mount_on(at: &At<'_>, cpu: usize) -> VfsResult<MountRef> {
    MountRef::try_get_on(at.mount, cpu).ok_or(Errno::EAGAIN)
}

impl<'a> Ctx<'a> {
    /// Resolves `path` to an inode.
    pub fn lookup(&self, path: &[u8], intent: Intent) -> VfsResult<CountedArc<Inode>> {
        self.walk(path, intent, |walked| match walked {
            Walked::Found(at) => Ok(CountedArc::new(at.inode)),
            Walked::Parent { .. } => unreachable!("not a parent walk"),
        })
    }

    /// Resolves `path` to a place: the mount and the inode.
    pub fn locate(&self, path: &[u8], intent: Intent) -> VfsResult<Dir> {
        self.locate_checked(path, intent, |_| Ok(()))
    }

    /// [`locate`](Self::locate), failing with `check`'s error where it
    /// fails on the place the walk found, before the place is counted: a
    /// call that is bound to fail writes nothing.
    pub fn locate_checked(
        &self,
        path: &[u8],
        intent: Intent,
        check: impl Fn(&At<'_>) -> VfsResult<()>,
    ) -> VfsResult<Dir> {
        self.walk(path, intent, |walked| match walked {
            Walked::Found(at) => {
                check(&at)?;
                Ok(Dir { mount: keep_mount(&at)?, inode: CountedArc::new(at.inode) })
            }
            Walked::Parent { .. } => unreachable!("not a parent walk"),
        })
    }

    /// Runs `finish` on the end of a walk of `path`.
    pub fn walk<'p, R>(
        &self,
        path: &'p [u8],
        intent: Intent,
        finish: impl Fn(Walked<'p, At<'_>>) -> VfsResult<R>,
    ) -> VfsResult<R> {
        walk(self.cred, Start { ns: self.ns, root: self.root, cwd: self.cwd, scope: self.scope }, path, intent, finish)
    }

    /// Resolves all but the last component of `path`.
    pub fn parent<'p>(&self, path: &'p [u8]) -> VfsResult<(ParentDir, Last<'p>, bool)> {
        // Pinned before the walk, for `PinnedInode`.
        let _pin = crossbeam_epoch::pin();
        self.walk(path, Intent::Parent, |walked| match walked {
            Walked::Parent { dir, last, trailing_slash } => {
                Ok((Dir { mount: keep_mount(&dir)?, inode: PinnedInode::new(dir.inode) }, last, trailing_slash))
            }
            Walked::Found(_) => unreachable!("a parent walk"),
        })
    }

    pub fn stat(&self, path: &[u8], intent: Intent) -> VfsResult<Stat> {
        self.walk(path, intent, |walked| match walked {
            Walked::Found(at) => Ok(at.inode.stat()),
            Walked::Parent { .. } => unreachable!("not a parent walk"),
        })
    }

    /// Whether `inode` is a mount point in this namespace, through any
    /// mount (Linux `is_local_mountpoint`): it cannot be removed or
    /// renamed (EBUSY).
    fn is_mountpoint(&self, inode: &Inode) -> bool {
        inode.has_mounts() && self.ns.is_some_and(|ns| ns.table(&crossbeam_epoch::pin()).covers(inode))
    }

    /// Locks `name` of `dir` for a change; a removed directory takes no
    /// new entries (ENOENT, Linux `IS_DEADDIR`).
    fn lock_name<'d>(&self, dir: &'d ParentDir, name: &[u8]) -> VfsResult<NameLock<'d>> {
        // Trees whose names a filesystem provides change only through its
        // own API: their directories have no `->mkdir`, `->unlink`, ...
        // (EPERM), and a read-only instance refuses first (EROFS).
        if !dir.sb().native {
            return Err(if dir.sb().read_only { Errno::EROFS } else { Errno::EPERM });
        }
        let directory = dir.dir()?;
        let locked = dir.sb().dir_locks.lock_name(directory, name);
        if directory.is_dead() {
            return Err(Errno::ENOENT);
        }
        Ok(locked)
    }

    /// [`Self::lock_name`] for a change that needs `name` to be in `dir`
    /// (`exists`, an unlink or rmdir: else ENOENT) or not (a link: else
    /// EEXIST). Where [`presence`] can tell without a lock, a
    /// change that must fail fails at once, writing nothing.
    fn lock_name_expecting<'d>(&self, dir: &'d ParentDir, name: &[u8], exists: bool) -> VfsResult<NameLock<'d>> {
        if presence(dir, name)? == Some(!exists) {
            return Err(if exists { Errno::ENOENT } else { Errno::EEXIST });
        }
        self.lock_name(dir, name)
    }

    /// Linux `may_create`: write and search permission on the directory.
    fn may_create(&self, dir: &Inode) -> VfsResult<()> {
        self.may_create_in(DirState::of(dir))
    }

    /// [`may_create`](Self::may_create) on a directory's mode and owner
    /// as read once.
    fn may_create_in(&self, dir: DirState) -> VfsResult<()> {
        let DirState { mode, owner: (uid, gid) } = dir;
        crate::cred::permission(mode, uid, gid, self.cred, Access::WRITE | Access::EXEC)
    }

    /// Linux `may_delete`: write and search permission on the directory,
    /// the sticky-bit rule, then the victim's type against the operation.
    fn may_delete(&self, dir: &Inode, victim: &Inode, removing_dir: bool) -> VfsResult<()> {
        self.may_create(dir)?;
        may_delete_in_sticky(dir.mode(), || (dir.owner().0, victim.owner().0), self.cred)?;
        match (removing_dir, victim.is_dir()) {
            (true, false) => Err(Errno::ENOTDIR),
            (false, true) => Err(Errno::EISDIR),
            _ => Ok(()),
        }
    }

    /// Creates `name` in `dir` as a new inode of `file_type`.
    ///
    /// Where the name is seen missing without a lock (a split directory's
    /// entries, [`presence`]), the inode is made before its name is
    /// locked, and the lock covers only the check and the insert: the
    /// allocations (and the page faults fresh memory takes) held the
    /// bucket for every create whose name hashed beside this one. A name
    /// that appears or a directory removed meanwhile fails as it would
    /// under the lock, and the inode made goes (its inode number unused).
    /// What can fail only after the name is known to be missing, as in
    /// Linux, which finds the name first, waits for the lock: a check that
    /// fails before it is made again under it, and the inode is charged
    /// to the inode limit (ENOSPC) under it. Checks that passed before it
    /// stand only while the directory's mode and owner are those they
    /// read (a chmod or chown of the directory holds every name of it);
    /// else the inode is made again under the lock.
    ///
    /// Returns the inode and the mount's write access, which the create
    /// held from its mount check on, for a caller that goes on changing
    /// (an `open` that creates keeps it until the file is open).
    pub fn create<'d>(
        &self,
        dir: &'d ParentDir,
        name: &[u8],
        file_type: FileType,
        perm: u32,
        symlink_target: Box<[u8]>,
        rdev: u64,
    ) -> VfsResult<(Arc<Inode>, MountWrite<'d>)> {
        // `filename_create` finds an existing name before anything else.
        if self.provided_name_exists(dir, name)? {
            return Err(Errno::EEXIST);
        }
        // Nor `->create`, which `vfs_create` reports as EACCES.
        if !dir.sb().native && file_type == FileType::Regular {
            return Err(if dir.sb().read_only { Errno::EROFS } else { Errno::EACCES });
        }
        let spec = NewChild { file_type, perm, symlink_target, rdev };
        let child = match presence(dir, name)? {
            Some(true) => return Err(Errno::EEXIST),
            // A removed directory takes no new names (`lock_name` checks
            // again under the lock).
            Some(false) if dir.dir()?.is_dead() => return Err(Errno::ENOENT),
            Some(false) => {
                let seen = DirState::of(dir);
                #[cfg(test)]
                crate::test_pause::pause_at(crate::test_pause::Point::TheCheck, name);
                match self.new_child(dir, seen, &spec) {
                    Ok((inode, write)) => Child::Made { inode, write, seen, spec },
                    Err(_) => Child::ToMake(spec),
                }
            }
            None => Child::ToMake(spec),
        };
        #[cfg(test)]
        crate::test_pause::pause_at(crate::test_pause::Point::BeforeTheLock, name);
        let mut locked = self.lock_name(dir, name)?;
        if locked.contains(name) {
            return Err(Errno::EEXIST);
        }
        // The directory's mode and owner hold still under the lock (a chmod
        // or chown of it holds every name of it): an inode made from them as
        // they are now stands.
        let now = DirState::of(dir);
        let (inode, write) = match child {
            Child::Made { inode, write, seen, .. } if seen == now => (inode, write),
            Child::Made { spec, .. } | Child::ToMake(spec) => self.new_child(dir, now, &spec)?,
        };
        inode.charge()?;
        self.add_entry(dir, &mut locked, name, Arc::clone(&inode), i32::from(inode.is_dir()));
        Ok((inode, write))
    }

    /// The checks of a create that follow the new name's own (`EEXIST`,
    /// a removed directory), in Linux's order, then the new inode, with
    /// its `..` if it is a directory, not yet charged to the inode space
    /// (the caller charges it under the name's lock), and the write access
    /// to the mount that the create holds until the name is linked. Every
    /// check and inherited bit is taken from `dir_state`, the directory's
    /// mode and owner read once, so that the caller can tell whether they
    /// still hold.
    fn new_child<'d>(
        &self,
        dir: &'d ParentDir,
        dir_state: DirState,
        spec: &NewChild,
    ) -> VfsResult<(Arc<Inode>, MountWrite<'d>)> {
        let NewChild { file_type, perm, ref symlink_target, rdev } = *spec;
        let DirState { mode: dir_mode, owner: (_, dir_gid) } = dir_state;
        // `filename_create` reports a read-only mount after EEXIST.
        let write = dir.mount.want_write()?;
        self.may_create_in(dir_state)?;
        // `vfs_mknod`: devices need CAP_MKNOD.
        if file_type.is_device() && !self.cred.capable(Capabilities::MKNOD) {
            return Err(Errno::EPERM);
        }
        let inherit_gid = dir_mode & S_ISGID != 0;
        let mut perm = perm & S_IALLUGO;
        if inherit_gid && file_type == FileType::Directory {
            perm |= S_ISGID;
        }
        // `mode_strip_sgid`: a group-executable file made in a set-group-ID
        // directory keeps set-group-ID only for a member of its group.
        if inherit_gid
            && file_type != FileType::Directory
            && perm & (S_ISGID | S_IXGRP) == S_ISGID | S_IXGRP
            && !self.cred.in_group_or_capable(dir_gid)
        {
            perm &= !S_ISGID;
        }
        let inode = Inode::uncharged(
            &dir.sb().inodes,
            NewInode {
                file_type,
                perm,
                uid: self.cred.uid(),
                gid: if inherit_gid { dir_gid } else { self.cred.gid() },
                symlink_target: symlink_target.clone(),
                rdev,
                ..NewInode::of(file_type, perm)
            },
        );
        if let Ok(made) = inode.dir() {
            // `..`: a count on the parent, per CPU (Linux's `d_parent`),
            // linked before the directory is published.
            made.set_parent(ParentLink::new(dir, &dir.sb().reclaim), &dir.sb().reclaim, &crossbeam_epoch::pin());
        }
        Ok((inode, write))
    }

    /// Links `inode` as `name` in `dir` (whose name is locked), which gains
    /// `subdirs` links.
    fn add_entry(&self, dir: &ParentDir, locked: &mut NameLock<'_>, name: &[u8], inode: Arc<Inode>, subdirs: i32) {
        #[cfg(test)]
        crate::test_pause::pause_at(crate::test_pause::Point::Landing, name);
        let dentry = Dentry::new(dir.ino(), name, Some(inode), 0);
        locked.insert(Arc::clone(&dentry), &dir.sb().reclaim);
        dir.sb().dcache.insert(dentry, &crossbeam_epoch::pin());
        dir.entries_changed(subdirs);
    }

    /// Drops one link of a non-directory; a link beyond its last gives its
    /// inode back to the limit (shmem_unlink), the last one goes with the
    /// inode.
    fn unlink_nondir(&self, sb: &SuperBlock, victim: &Inode) {
        // The count before, read in the same update: unlinks of two of its
        // names in different directories do not hold one lock.
        if victim.change_nlink(-1) > 1 {
            sb.inodes.space.give_ispace(crate::space::BOGO_INODE_SIZE);
        }
    }

    /// Removes the entry `name` from `dir` (whose name is locked), which
    /// loses `subdirs` links.
    fn remove_entry(&self, dir: &ParentDir, locked: &mut NameLock<'_>, name: &[u8], subdirs: i32) {
        if let Some(dentry) = locked.remove(name, &dir.sb().reclaim) {
            dir.sb().dcache.remove(&dentry, &crossbeam_epoch::pin());
        }
        dir.entries_changed(-subdirs);
    }

    pub fn mkdir(&self, path: &[u8], perm: u32) -> VfsResult<()> {
        let (dir, last, _) = self.parent(path)?;
        let name = last.require_normal(DirOp::Create)?;
        self.create(&dir, name, FileType::Directory, perm & (0o777 | S_ISVTX), Box::default(), 0).map(drop)
    }

    /// `mknod(2)`: a regular file, FIFO, socket or (with CAP_MKNOD) device
    /// node; EPERM for a directory and EINVAL for a mode
    /// naming no type, both before the path is looked at (`may_mknod`).
    pub fn mknod(&self, path: &[u8], mode: u32, rdev: u64) -> VfsResult<()> {
        let file_type = match mode & S_IFMT {
            0 => FileType::Regular,
            S_IFDIR => return Err(Errno::EPERM),
            bits => FileType::from_mode(bits).filter(|t| *t != FileType::Symlink).ok_or(Errno::EINVAL)?,
        };
        let (dir, last, trailing_slash) = self.parent(path)?;
        let name = last.require_normal(DirOp::Create)?;
        if trailing_slash {
            return Err(self.trailing_slash_on_create(&dir, name));
        }
        self.create(&dir, name, file_type, mode & S_IALLUGO, Box::default(), rdev).map(drop)
    }

    pub fn symlink(&self, target: &[u8], path: &[u8]) -> VfsResult<()> {
        if target.is_empty() {
            return Err(Errno::ENOENT);
        }
        crate::path::PathName::new(target)?;
        let (dir, last, trailing_slash) = self.parent(path)?;
        let name = last.require_normal(DirOp::Create)?;
        if trailing_slash {
            return Err(self.trailing_slash_on_create(&dir, name));
        }
        self.create(&dir, name, FileType::Symlink, 0o777, target.into(), 0).map(drop)
    }

    /// Whether `name` exists in `dir` of a tree whose names a filesystem
    /// provides (kernfs, procfs, hostfs), asking the filesystem: a name
    /// there need not be in the dcache. Always false in a tree whose
    /// names live in the dcache, which its callers look in themselves.
    fn provided_name_exists(&self, dir: &ParentDir, name: &[u8]) -> VfsResult<bool> {
        if dir.sb().native {
            return Ok(false);
        }
        Ok(dir.sb().fs.lookup(dir, name)?.is_some())
    }

    /// Linux `filename_create` for a non-directory whose new name has a
    /// trailing slash: EEXIST if the name exists, else ENOENT.
    fn trailing_slash_on_create(&self, dir: &ParentDir, name: &[u8]) -> Errno {
        let exists = dir.dir().is_ok_and(|d| dir.sb().dir_locks.contains(d, name))
            || self.provided_name_exists(dir, name).unwrap_or(false);
        if exists {
            Errno::EEXIST
        } else {
            Errno::ENOENT
        }
    }

    /// `link(2)`, `new` walked from `to`'s start, checking in `do_linkat` /
    /// `vfs_link` order: the new name, write permission on its directory,
    /// then the source's type and links.
    pub fn link(&self, old: &[u8], intent: Intent, to: &Ctx<'_>, new: &[u8]) -> VfsResult<()> {
        let Dir { mount: old_mount, inode } = self.locate(old, intent)?;
        let (dir, last, trailing_slash) = to.parent(new)?;
        let name = last.require_normal(DirOp::Create)?;
        if trailing_slash {
            return Err(self.trailing_slash_on_create(&dir, name));
        }
        if self.provided_name_exists(&dir, name)? {
            return Err(Errno::EEXIST);
        }
        let mut locked = self.lock_name_expecting(&dir, name, false)?;
        if locked.contains(name) {
            return Err(Errno::EEXIST);
        }
        // `do_linkat`'s order: the new name, a read-only mount, then one
        // across mounts.
        let _write = dir.mount.want_write()?;
        if !std::ptr::eq(&*old_mount, &*dir.mount) {
            return Err(Errno::EXDEV);
        }
        self.may_create(&dir)?;
        if inode.is_dir() {
            return Err(Errno::EPERM);
        }
        if inode.meta().nlink == 0 {
            return Err(Errno::ENOENT);
        }
        // shmem_link: each extra link takes an inode from the limit.
        let space = &dir.sb().inodes.space;
        space.reserve_inode()?;
        if let Err(gone) = inode.add_link() {
            space.give_ispace(crate::space::BOGO_INODE_SIZE);
            return Err(gone);
        }
        self.add_entry(&dir, &mut locked, name, inode.into_arc(), 0);
        Ok(())
    }

    pub fn unlink(&self, path: &[u8]) -> VfsResult<()> {
        let (dir, last, trailing_slash) = self.parent(path)?;
        let name = last.require_normal(DirOp::Unlink)?;
        let _write = dir.mount.want_write()?;
        self.unlink_of_a_directory(&dir, name, trailing_slash)?;
        let mut locked = self.lock_name_expecting(&dir, name, true)?;
        let victim = Arc::clone(child_inode(locked.get(name))?);
        if trailing_slash {
            return Err(if victim.is_dir() { Errno::EISDIR } else { Errno::ENOTDIR });
        }
        self.may_delete(&dir, &victim, false)?;
        if self.is_mountpoint(&victim) {
            return Err(Errno::EBUSY);
        }
        self.remove_entry(&dir, &mut locked, name, 0);
        self.unlink_nondir(dir.sb(), &victim);
        Ok(())
    }

    /// An unlink of a name that names a directory fails (EISDIR, or an
    /// error `may_delete` finds first) whatever happens to other names:
    /// where the design finds the entry without a lock, it fails here,
    /// writing nothing, as `unlink` would under the lock. The directory's
    /// mode and the owners are read after the look-up, so the answer
    /// stands only if the name still holds the same entry after them (a
    /// name that comes back gets a new one): it was there throughout, and
    /// the answer is the one of the moment the mode was read. Otherwise
    /// the locked path decides.
    fn unlink_of_a_directory(&self, dir: &ParentDir, name: &[u8], trailing_slash: bool) -> VfsResult<()> {
        if !dir.sb().native {
            return Ok(());
        }
        let (guard, hash) = (crossbeam_epoch::pin(), crate::dentry::name_hash(name));
        let directory = dir.dir()?;
        let peek = || dir.sb().dir_locks.peek(directory, name, hash, &guard).flatten();
        let Some(entry) = peek().filter(|dentry| dentry.inode.as_ref().is_some_and(|inode| inode.is_dir())) else {
            return Ok(());
        };
        let victim = entry.inode.as_ref().expect("filtered on its inode");
        let failed = if trailing_slash { Err(Errno::EISDIR) } else { self.may_delete(dir, victim, false) };
        if peek().is_some_and(|now| Arc::ptr_eq(now, entry)) {
            failed
        } else {
            Ok(())
        }
    }

    pub fn rmdir(&self, path: &[u8]) -> VfsResult<()> {
        let (dir, last, _) = self.parent(path)?;
        let name = last.require_normal(DirOp::Rmdir)?;
        let _write = dir.mount.want_write()?;
        let mut locked = self.lock_name_expecting(&dir, name, true)?;
        let victim = Arc::clone(child_inode(locked.get(name))?);
        self.may_delete(&dir, &victim, true)?;
        if self.is_mountpoint(&victim) {
            return Err(Errno::EBUSY);
        }
        let victim_dir = victim.dir()?;
        // Parent before child: the ancestor-first lock order. Every create
        // in the victim rechecks its dead flag under its own lock.
        let whole = WholeDir::lock(victim_dir);
        if !whole.is_empty() {
            return Err(Errno::ENOTEMPTY);
        }
        victim_dir.mark_dead();
        victim.remove_empty_dir();
        drop(whole);
        self.remove_entry(&dir, &mut locked, name, 1);
        Ok(())
    }

    pub fn readlink(&self, path: &[u8]) -> VfsResult<Vec<u8>> {
        self.walk(path, Intent::NoFollow, |walked| match walked {
            Walked::Found(at) => at.inode.symlink_target().map(<[u8]>::to_vec).ok_or(Errno::EINVAL),
            Walked::Parent { .. } => unreachable!("not a parent walk"),
        })
    }

    /// Applies `change` to the inode `path` names, on a mount that takes
    /// changes (else EROFS), holding the mount's write access throughout
    /// (Linux's `mnt_want_write` .. `mnt_drop_write` around
    /// `notify_change`).
    fn change_attr(&self, path: &[u8], intent: Intent, change: impl FnOnce(&Inode) -> VfsResult<()>) -> VfsResult<()> {
        let Dir { mount, inode } = self.locate(path, intent)?;
        let _write = mount.want_write()?;
        #[cfg(test)]
        crate::test_pause::pause_at(crate::test_pause::Point::Landing, path);
        change(&inode)
    }

    pub fn chmod(&self, path: &[u8], perm: u32, intent: Intent) -> VfsResult<()> {
        self.change_attr(path, intent, |inode| crate::notify_change::chmod(inode, self.cred, perm))
    }

    pub fn chown(&self, path: &[u8], uid: Option<u32>, gid: Option<u32>, intent: Intent) -> VfsResult<()> {
        self.change_attr(path, intent, |inode| crate::notify_change::chown(inode, self.cred, uid, gid))
    }

    pub fn utimens(&self, path: &[u8], atime: SetTime, mtime: SetTime, intent: Intent) -> VfsResult<()> {
        self.change_attr(path, intent, |inode| crate::notify_change::set_times(inode, self.cred, atime, mtime))
    }

    /// `renameat2`, `new` walked from `to`'s start, with Linux's checks in
    /// Linux's order (`do_renameat2`, `vfs_rename`).
    pub fn rename(&self, old: &[u8], to: &Ctx<'_>, new: &[u8], flags: RenameFlags) -> VfsResult<()> {
        let (old_dir, old_last, old_slash) = self.parent(old)?;
        let (new_dir, new_last, new_slash) = to.parent(new)?;
        if !std::ptr::eq(&*old_dir.mount, &*new_dir.mount) {
            return Err(Errno::EXDEV);
        }
        let old_name = old_last.require_normal(DirOp::RenameFrom)?;
        let new_op = if flags.noreplace { DirOp::RenameToNoReplace } else { DirOp::RenameTo };
        let new_name = new_last.require_normal(new_op)?;
        let _write = old_dir.mount.want_write()?;
        let sb = old_dir.sb();
        // A missing old name fails before any lock, as in
        // `lock_name_expecting`.
        if presence(&old_dir, old_name)? == Some(false) {
            return Err(Errno::ENOENT);
        }
        let same_dir = Arc::ptr_eq(&old_dir, &new_dir);
        // Only a directory that moves between directories changes an
        // ancestry, so only such a move excludes every other move between
        // directories (and ref-walks that keep losing to moves); any other
        // move between directories holds the rename lock for reading, a
        // write of its own CPU's count alone. A rename within one
        // directory takes no rename lock: the locks of its two names order
        // it against every other change of them (the dcache swaps a
        // replaced target's dentry in one step). A walk that misses the
        // dcache looks a name up under its lock, so it sees a move whole or
        // not at all.
        let mut moves_dir = !same_dir && sb.dir_locks.names_directory(old_dir.dir()?, old_name);
        loop {
            let (_files_move, _tree_moves) = match (same_dir, moves_dir) {
                (true, _) => (None, None),
                (false, false) => (Some(sb.rename_lock.read()), None),
                (false, true) => (None, Some(sb.rename_lock.write())),
            };
            let new_dir_first = !same_dir && lock_rank(&new_dir) < lock_rank(&old_dir);
            let mut locked =
                sb.dir_locks.lock_rename((old_dir.dir()?, old_name), (new_dir.dir()?, new_name), new_dir_first);
            if old_dir.dir()?.is_dead() || new_dir.dir()?.is_dead() {
                return Err(Errno::ENOENT);
            }
            let source = Arc::clone(child_inode(locked.old_name().get(old_name))?);
            if source.is_dir() && !same_dir && !moves_dir {
                // A directory took the old name since the peek: move it
                // holding the lock for writing.
                moves_dir = true;
                continue;
            }
            let target = locked.new_name().get(new_name).and_then(|d| d.inode.clone());
            let old = RenameEnd { dir: &old_dir, name: old_name, slash: old_slash };
            let new = RenameEnd { dir: &new_dir, name: new_name, slash: new_slash };
            return self.rename_locked(&mut locked, old, new, source, target, flags);
        }
    }

    /// The rest of `rename`, its two names locked: the checks that need
    /// the source and the target, then the move.
    fn rename_locked(
        &self,
        locked: &mut RenameLocks<'_>,
        old: RenameEnd<'_>,
        new: RenameEnd<'_>,
        source: Arc<Inode>,
        target: Option<Arc<Inode>>,
        flags: RenameFlags,
    ) -> VfsResult<()> {
        let RenameEnd { dir: old_dir, name: old_name, slash: old_slash } = old;
        let RenameEnd { dir: new_dir, name: new_name, slash: new_slash } = new;
        let sb = old_dir.sb();
        let same_dir = Arc::ptr_eq(old_dir, new_dir);
        if flags.noreplace && target.is_some() {
            return Err(Errno::EEXIST);
        }
        if !source.is_dir() && (old_slash || new_slash) {
            return Err(Errno::ENOTDIR);
        }
        if source.is_dir() && (Arc::ptr_eq(&source, new_dir) || is_ancestor(&source, new_dir)) {
            return Err(Errno::EINVAL);
        }
        if let Some(target) = &target {
            // The target contains the source: it cannot be empty. (It is
            // also already locked, or an ancestor of a locked directory.)
            if Arc::ptr_eq(target, old_dir) || is_ancestor(target, old_dir) {
                return Err(Errno::ENOTEMPTY);
            }
            if Arc::ptr_eq(target, &source) {
                return Ok(());
            }
        }
        self.may_delete(old_dir, &source, source.is_dir())?;
        match &target {
            Some(target) => self.may_delete(new_dir, target, source.is_dir())?,
            None => self.may_create(new_dir)?,
        }
        if source.is_dir() && !same_dir {
            source.permission(self.cred, Access::WRITE)?;
        }
        if self.is_mountpoint(&source) || target.as_ref().is_some_and(|t| self.is_mountpoint(t)) {
            return Err(Errno::EBUSY);
        }
        let victim_guard = match target.as_ref().map(|t| t.dir()) {
            Some(Ok(target_dir)) => {
                let whole = WholeDir::lock(target_dir);
                if !whole.is_empty() {
                    return Err(Errno::ENOTEMPTY);
                }
                Some(whole)
            }
            _ => None,
        };

        let guard = crossbeam_epoch::pin();
        let moving = (source.is_dir() && !same_dir).then(|| sb.rename_seq.write_begin());
        let old_dentry = locked.old_name().remove(old_name, &sb.reclaim).expect("checked above");
        let new_dentry = Dentry::new(new_dir.ino(), new_name, Some(Arc::clone(&source)), 0);
        locked.new_name().insert_or_replace(Arc::clone(&new_dentry), &sb.reclaim);
        sb.dcache.remove(&old_dentry, &guard);
        sb.dcache.insert(new_dentry, &guard);
        if let Some(target) = &target {
            if let Ok(target_dir) = target.dir() {
                target_dir.mark_dead();
                target.remove_empty_dir();
            } else {
                self.unlink_nondir(sb, target);
            }
        }
        let moved_dir = i32::from(source.is_dir() && !same_dir);
        let replaced_dir = i32::from(target.as_ref().is_some_and(|t| t.is_dir()));
        if moved_dir == 1 {
            source.dir()?.set_parent(ParentLink::new(new_dir, &sb.reclaim), &sb.reclaim, &guard);
        }
        if same_dir {
            new_dir.entries_changed(-replaced_dir);
        } else {
            old_dir.entries_changed(-moved_dir);
            new_dir.entries_changed(moved_dir - replaced_dir);
        }
        source.touch_ctime();
        drop(moving);
        drop(victim_guard);
        Ok(())
    }
}

/// A directory's mode and owner, read once: what a create's checks and
/// its new inode's inherited bits come from.
#[derive(Clone, Copy, PartialEq, Eq)]
struct DirState {
    mode: u32,
    owner: (u32, u32),
}

impl DirState {
    fn of(dir: &Inode) -> DirState {
        DirState { mode: dir.mode(), owner: dir.owner() }
    }
}

/// What a create makes, besides its name.
struct NewChild {
    file_type: FileType,
    perm: u32,
    symlink_target: Box<[u8]>,
    rdev: u64,
}

/// A create's inode: made before its name was locked, or to be made
/// under the lock.
enum Child<'d> {
    /// Made before the name was locked, checked against the directory's
    /// mode and owner `seen`: made again under the lock if they changed.
    Made {
        inode: Arc<Inode>,
        write: MountWrite<'d>,
        seen: DirState,
        spec: NewChild,
    },
    ToMake(NewChild),
}

/// Whether `name` is in `dir`, where a look-up without a lock can tell (a
/// split directory of a tree of the VFS's own memory): present when the
/// dcache holds it, absent when neither the dcache nor the entries, read
/// after it, do; a name that is in the entries alone is being changed,
/// and the name's lock decides. Every change updates the entries before
/// the dcache (a create inserts, an unlink removes, a rename inserts the
/// new name and removes the old one, each in the entries and then in the
/// dcache), so each answer is a moment of the changes' order: a rename's
/// is its removal of the old name from the dcache, before which the old
/// name is present (in the dcache) and the new one absent (from the
/// entries, which take it before), and after which the old one is absent
/// and the new one is either present or left to the lock.
fn presence(dir: &ParentDir, name: &[u8]) -> VfsResult<Option<bool>> {
    let sb = dir.sb();
    let directory = dir.dir()?;
    if !sb.native || sb.dir_locks.dirents() != crate::dirents::Design::Split {
        return Ok(None);
    }
    let (guard, hash) = (crossbeam_epoch::pin(), crate::dentry::name_hash(name));
    if sb.dcache.lookup_hashed(dir.ino(), name, hash, &guard).is_some_and(|dentry| dentry.inode.is_some()) {
        return Ok(Some(true));
    }
    Ok(matches!(sb.dir_locks.peek(directory, name, hash, &guard), Some(None)).then_some(false))
}

/// The inode of a looked-up child, or ENOENT.
fn child_inode(found: Option<&Arc<Dentry>>) -> VfsResult<&Arc<Inode>> {
    found.and_then(|d| d.inode.as_ref()).ok_or(Errno::ENOENT)
}

/// One name of a rename: its directory, the name, and whether its path
/// ended in a slash.
struct RenameEnd<'a> {
    dir: &'a ParentDir,
    name: &'a [u8],
    slash: bool,
}

/// Where `dir` comes in the order in which a rename locks names of two
/// directories: shallower first, so an ancestor before its descendants
/// (as rmdir locks a parent's name before the child), then by inode
/// number and address. A total order, unlike "ancestors first, then
/// inode number", which two moves of files and a third between unrelated
/// directories could close into a cycle. Stable while the caller holds the
/// rename lock, since only moves of directories change a depth.
fn lock_rank(dir: &Arc<Inode>) -> (usize, u64, usize) {
    let depth = ancestors(dir, &crossbeam_epoch::pin()).count();
    (depth, dir.ino(), Arc::as_ptr(dir) as usize)
}

/// `dir`'s parent, its parent, and so on up to its superblock's root,
/// valid while `guard` is pinned.
fn ancestors<'g>(dir: &Arc<Inode>, guard: &'g crossbeam_epoch::Guard) -> impl Iterator<Item = &'g Arc<Inode>> {
    let parent = |inode: &Arc<Inode>| inode.dir().ok().and_then(|d| d.parent(guard));
    std::iter::successors(parent(dir), move |inode| parent(inode))
}

/// Whether `ancestor` is a proper ancestor of `dir`. Stable while the
/// caller holds the rename lock (for reading, or for writing to move a
/// directory), since only moves of directories change an ancestry.
fn is_ancestor(ancestor: &Arc<Inode>, dir: &Arc<Inode>) -> bool {
    ancestors(dir, &crossbeam_epoch::pin()).any(|inode| Arc::ptr_eq(inode, ancestor))
}

#[cfg(test)]
mod tests {
    use crate::test_pause::{self as pause, Point};
    use crate::{Credentials, Errno, MountFlags, Process, SetTime, Timespec, Vfs, VfsResult};

    /// A remount of `/w` to read-only while a change is stopped after its
    /// mount check (just before it lands) is EBUSY, as Linux's
    /// `mnt_make_readonly` is while writers hold `mnt_want_write`, so no
    /// change lands on a mount already read-only; once the change is done
    /// the remount succeeds and the change is EROFS. For a create, a link
    /// and a chmod, one after another.
    #[test]
    fn a_change_under_way_holds_off_a_remount_to_read_only() {
        let _alone = pause::alone();
        type Change = fn(&Process, &str) -> VfsResult<()>;
        let changes: [(&str, &str, Change); 3] = [
            ("mkdir", "made-under-remount", |p, name| p.mkdir(format!("/w/{name}"), 0o755)),
            ("link", "linked-under-remount", |p, name| p.link("/w/f", format!("/w/{name}"))),
            ("chmod", "/w/chmodded-under-remount", |p, _| p.chmod("/w/chmodded-under-remount", 0o600)),
        ];
        for (call, key, change) in changes {
            let root_fs = Vfs::default();
            let ns = root_fs.new_namespace();
            let p = root_fs.process_in(&ns, Credentials::root());
            p.mkdir("/w", 0o755).unwrap();
            p.mount(&Vfs::default(), "tmpfs", "/w", MountFlags::NONE).unwrap();
            p.mknod("/w/f", 0o100644, 0).unwrap();
            p.mknod("/w/chmodded-under-remount", 0o100644, 0).unwrap();
            pause::arm(Point::Landing, key.as_bytes());
            std::thread::scope(|s| {
                let changer = s.spawn(|| change(&p, key));
                // A change that never stops fails below rather than
                // hanging here.
                pause::wait_for_the_stop(|| changer.is_finished());
                let remount = p.remount("/w", MountFlags::RDONLY);
                pause::let_go();
                assert_eq!(changer.join().unwrap(), Ok(()), "{call}: the change itself");
                assert_eq!(remount, Err(Errno::EBUSY), "{call}: remounted read-only under the change");
            });
            p.remount("/w", MountFlags::RDONLY).unwrap();
            assert_eq!(change(&p, "again"), Err(Errno::EROFS), "{call} on the read-only mount");
        }
    }

    /// A tree with `/shared` of mode `mode`, owned by root, and a process
    /// of root and one of user 1000.
    fn a_shared_directory(mode: u32) -> (Vfs, Process, Process) {
        let vfs = Vfs::default();
        let root = vfs.process(Credentials::root());
        root.mkdir("/shared", 0o777).unwrap();
        root.chmod("/shared", mode).unwrap();
        let user = vfs.process(Credentials::user(1000, 1000, []));
        (vfs, root, user)
    }

    /// A create that checked the directory's mode before its name was
    /// locked, and a chmod of the directory that took its write permission
    /// away before the create locked the name: the create checks again
    /// under the lock and is EACCES, as in Linux, where the create holds
    /// the directory's `i_rwsem` from its check to its link and the chmod
    /// takes it too. Likewise a chown that gives the directory away.
    #[test]
    fn a_create_checked_before_a_chmod_of_its_directory_checks_again() {
        let _alone = pause::alone();
        type Revoke = fn(&Process) -> VfsResult<()>;
        let revokes: [(&str, Revoke); 2] =
            [("chmod", |root| root.chmod("/shared", 0o555)), ("chown", |root| root.chown("/shared", Some(0), Some(0)))];
        for (call, revoke) in revokes {
            let (_vfs, root, user) = a_shared_directory(0o700);
            root.chown("/shared", Some(1000), Some(1000)).unwrap();
            pause::arm(Point::BeforeTheLock, b"late");
            std::thread::scope(|s| {
                let creator = s.spawn(|| user.mkdir("/shared/late", 0o755));
                pause::wait_for_the_stop(|| creator.is_finished());
                let revoked = revoke(&root);
                pause::let_go();
                revoked.unwrap();
                assert_eq!(creator.join().unwrap(), Err(Errno::EACCES), "{call}: created after the {call} returned");
            });
            assert_eq!(root.stat("/shared/late").err(), Some(Errno::ENOENT), "{call}");
        }
    }

    /// A create stopped under its name's lock, its checks passed, and a
    /// chmod of the directory beside it: the chmod returns only once the
    /// create has landed (it holds every name of the directory), so a
    /// create never lands after a chmod that took its permission away
    /// returned. The chmod's thread looks for the name as soon as its
    /// chmod returns; the create is let go once the chmod is done or after
    /// some yields, whichever comes first.
    #[test]
    fn a_chmod_of_a_directory_waits_for_a_create_under_way_in_it() {
        let _alone = pause::alone();
        let (_vfs, root, user) = a_shared_directory(0o777);
        pause::arm(Point::Landing, b"landing");
        std::thread::scope(|s| {
            let creator = s.spawn(|| user.mkdir("/shared/landing", 0o755));
            pause::wait_for_the_stop(|| creator.is_finished());
            let chmod = s.spawn(|| {
                root.chmod("/shared", 0o755).unwrap();
                root.stat("/shared/landing").is_ok()
            });
            pause::give_time(|| chmod.is_finished());
            pause::let_go();
            assert_eq!(creator.join().unwrap(), Ok(()));
            assert!(chmod.join().unwrap(), "the chmod returned before the create it overlapped landed");
        });
    }

    /// A create's checks and the state it compares under its name's lock
    /// are one read of the directory's mode and owner: a chmod that gives
    /// write permission while the create is about to check, and one that
    /// takes it back before the create locks its name, leave the create
    /// EACCES (had the check read the mode again, it would have passed on
    /// the first, and the lock would have found the state it first read).
    #[test]
    fn a_create_checks_the_state_it_compares_under_the_lock() {
        let _alone = pause::alone();
        let (_vfs, root, user) = a_shared_directory(0o555);
        pause::arm(Point::TheCheck, b"between");
        std::thread::scope(|s| {
            let creator = s.spawn(|| user.mkdir("/shared/between", 0o755));
            pause::wait_for_the_stop(|| creator.is_finished());
            let given = root.chmod("/shared", 0o777);
            // Let it go, to stop again before the lock.
            pause::arm(Point::BeforeTheLock, b"between");
            pause::wait_for_the_stop(|| creator.is_finished());
            let taken = root.chmod("/shared", 0o555);
            pause::let_go();
            given.unwrap();
            taken.unwrap();
            assert_eq!(creator.join().unwrap(), Err(Errno::EACCES));
        });
        assert_eq!(root.stat("/shared/between").err(), Some(Errno::ENOENT));
    }

    /// A chown of a file, stopped between its checks and its change, and
    /// a write meanwhile by a process outside the file's group, which
    /// clears its set-group-ID bit (taking no lock of the chown's): the
    /// chown checks again, so it lands the mode the write left, not the
    /// one it read.
    #[test]
    fn a_chown_checked_before_a_write_cleared_set_group_id_checks_again() {
        let _alone = pause::alone();
        let vfs = Vfs::default();
        let root = vfs.process(Credentials::root());
        root.mknod("/f", 0o100644, 0).unwrap();
        root.chown("/f", Some(1000), Some(1000)).unwrap();
        root.chmod("/f", 0o2666).unwrap();
        let writer = vfs.process(Credentials::user(3000, 3000, []));
        let fd = writer.open("/f", crate::OpenFlags::WRONLY, 0).unwrap();
        pause::arm(Point::AttrCommit, &root.stat("/f").unwrap().ino.to_le_bytes());
        std::thread::scope(|s| {
            let chown = s.spawn(|| root.chown("/f", Some(2000), None));
            pause::wait_for_the_stop(|| chown.is_finished());
            let stopped = !chown.is_finished();
            let wrote = writer.pwrite(fd, b"x", 0);
            let between = root.stat("/f").map(|st| st.mode & 0o7777);
            pause::let_go();
            assert!(stopped, "the chown never stopped");
            assert_eq!((wrote, between), (Ok(1), Ok(0o666)), "the write cleared set-group-ID");
            assert_eq!(chown.join().unwrap(), Ok(()));
        });
        let after = root.stat("/f").unwrap();
        assert_eq!((after.mode & 0o7777, after.uid), (0o666, 2000), "the chown put set-group-ID back");
    }

    /// A chown of a file while its owner's chmod or change of times is
    /// stopped between its checks and its update returns only once that
    /// change landed (Linux's `i_rwsem`), so it never gives the file away
    /// under a change checked against the old owner: for a regular file,
    /// a directory and a fifo. The change is let go once the chown is
    /// done or after some yields, whichever comes first.
    #[test]
    fn a_chown_waits_for_a_change_of_the_mode_or_times_under_way() {
        let _alone = pause::alone();
        let vfs = Vfs::default();
        let root = vfs.process(Credentials::root());
        root.mknod("/file", 0o100644, 0).unwrap();
        root.mkdir("/dir", 0o755).unwrap();
        root.mknod("/fifo", 0o010644, 0).unwrap();
        let owner = vfs.process(Credentials::user(1000, 1000, []));
        let set = Timespec { sec: 1, nsec: 0 };
        type Change = fn(&Process, &str, Timespec) -> VfsResult<()>;
        let changes: [(&str, Change); 2] = [
            ("chmod", |p, path, _| p.chmod(path, 0o700)),
            ("utimensat", |p, path, set| p.utimens(path, SetTime::Omit, SetTime::At(set))),
        ];
        for path in ["/file", "/dir", "/fifo"] {
            for (what, change) in changes {
                root.chown(path, Some(1000), Some(1000)).unwrap();
                pause::arm(Point::AttrCommit, &root.stat(path).unwrap().ino.to_le_bytes());
                std::thread::scope(|s| {
                    let changer = s.spawn(|| change(&owner, path, set));
                    pause::wait_for_the_stop(|| changer.is_finished());
                    assert!(!changer.is_finished(), "{what} {path} never stopped");
                    let chown = s.spawn(|| {
                        root.chown(path, Some(2000), Some(2000)).unwrap();
                        let seen = root.stat(path).unwrap();
                        (seen.mode & 0o777, seen.mtime)
                    });
                    pause::give_time(|| chown.is_finished());
                    pause::let_go();
                    assert_eq!(changer.join().unwrap(), Ok(()), "{what} {path}");
                    let (mode, mtime) = chown.join().unwrap();
                    let landed = if what == "chmod" { mode == 0o700 } else { mtime == set };
                    assert!(landed, "{what} {path}: the chown returned before the change landed");
                });
            }
        }
    }

    /// A `setattr` naming a size and a time lands both in one update,
    /// under the file's data writer lock: stopped once they landed, still
    /// holding it, the file shows both, and an `ftruncate` made meanwhile
    /// waits for the lock, so it lands before or after the two, never
    /// between. The ftruncate is given some yields in which it would land
    /// had it not waited; it is joined only after the setattr is let go.
    #[test]
    fn a_setattr_of_size_and_time_lands_both_under_the_data_lock() {
        let _alone = pause::alone();
        let vfs = Vfs::default();
        let root = vfs.process(Credentials::root());
        let fd = root.open("/f", crate::OpenFlags::CREAT | crate::OpenFlags::RDWR, 0o644).unwrap();
        let file = root.resolve("/f", true).unwrap();
        let cred = Credentials::root();
        let ctx = crate::Context::new(&vfs, &cred, vfs.root());
        let set = Timespec { sec: 1, nsec: 0 };
        pause::arm(Point::SizeAndTimes, &file.ino().to_le_bytes());
        std::thread::scope(|s| {
            let attr = crate::SetAttr { size: Some(10), mtime: SetTime::At(set), ..crate::SetAttr::default() };
            let setattr = s.spawn(move || ctx.setattr(&file, attr));
            pause::wait_for_the_stop(|| setattr.is_finished());
            let stopped = !setattr.is_finished();
            let landed = root.stat("/f").map(|st| (st.size, st.mtime == set));
            let ftruncate = s.spawn(|| root.ftruncate(fd, 20));
            pause::give_time(|| ftruncate.is_finished());
            let waited = !ftruncate.is_finished();
            pause::let_go();
            assert!(stopped, "the setattr never stopped");
            assert_eq!(landed, Ok((10, true)), "the size and the time landed together");
            assert!(waited, "the ftruncate landed while the setattr held the data lock");
            assert_eq!(setattr.join().unwrap(), Ok(()));
            assert_eq!(ftruncate.join().unwrap(), Ok(()));
        });
        let after = root.stat("/f").unwrap();
        assert_eq!((after.size, after.mtime == set), (20, false));
    }
}
