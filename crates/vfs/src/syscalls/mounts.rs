//! The mount calls (Linux `fs/namespace.c`): `mount(2)` of an instance,
//! bind and recursive bind mounts, remount of the per-mount flags,
//! `umount2(2)`, `statfs(2)` of a mount, and `/proc/<pid>/mountinfo`.
//!
//! Checks in Linux's order: the target's walk (ENOENT, ENOTDIR, EACCES),
//! then CAP_SYS_ADMIN (EPERM), then the mount's own rules (EINVAL for a
//! target that is not a mount root or not in the caller's namespace,
//! ENOTDIR for a directory on a file or a file on a directory, EBUSY for a
//! busy unmount). A context outside any namespace has no mounts to change:
//! EINVAL.

use super::Context;
use crate::cred::Capabilities;
use crate::errno::{Errno, VfsResult};
use crate::inode::Inode;
use crate::mount::{Mount, MountFlags, MountNamespace, MountPoint, MountRef, MountTable, RootPath};
use crate::namei::{At, Intent};
use crate::namespace::Dir;
use crate::path::Last;
use crate::{FsStats, Vfs};
use std::ptr::NonNull;
use std::sync::Arc;
use vfscale_sync::audited::CountedArc;

/// `umount2(2)`'s flags.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct UmountFlags(pub i32);

impl UmountFlags {
    /// No flag: EBUSY while the mount is in use.
    pub const NONE: UmountFlags = UmountFlags(0);
    /// `MNT_FORCE`: for filesystems that can abort their requests; an
    /// in-memory one has none, so it unmounts as without the flag.
    pub const FORCE: UmountFlags = UmountFlags(libc::MNT_FORCE);
    /// `MNT_DETACH`: leave the namespace now, die when the last user goes.
    pub const DETACH: UmountFlags = UmountFlags(libc::MNT_DETACH);
    /// `UMOUNT_NOFOLLOW`: do not follow a final symlink of the target.
    pub const NOFOLLOW: UmountFlags = UmountFlags(libc::UMOUNT_NOFOLLOW);

    fn contains(self, flag: UmountFlags) -> bool {
        self.0 & flag.0 != 0
    }
}

impl std::ops::BitOr for UmountFlags {
    type Output = UmountFlags;
    fn bitor(self, other: UmountFlags) -> UmountFlags {
        UmountFlags(self.0 | other.0)
    }
}

impl Vfs {
    /// A new mount namespace whose root mount is this instance's whole
    /// tree; processes join it with [`Vfs::process_in`].
    pub fn new_namespace(&self) -> Arc<MountNamespace> {
        Arc::new(MountNamespace::with_root(self.new_mount(MountFlags::NONE), self.sb.fs_type()))
    }
}

/// Where a target or source is: its place, and for a non-directory the
/// directory and name it was found by (for `mountinfo`).
struct Found {
    dir: Dir,
    place: Option<(Arc<Inode>, Box<[u8]>)>,
}

impl<'a> Context<'a> {
    fn namespace(&self) -> VfsResult<&'a MountNamespace> {
        self.names.ns.ok_or(Errno::EINVAL)
    }

    fn may_mount(&self) -> VfsResult<()> {
        if !self.names.cred.capable(Capabilities::SYS_ADMIN) {
            return Err(Errno::EPERM);
        }
        Ok(())
    }

    /// The place `path` names, following a final symlink unless
    /// `nofollow`, with the directory a non-directory was found in.
    fn find(&self, path: &[u8], nofollow: bool) -> VfsResult<Found> {
        let intent = if nofollow { Intent::NoFollow } else { Intent::Follow };
        let dir = self.names.locate(path, intent)?;
        if dir.inode.is_dir() {
            return Ok(Found { dir, place: None });
        }
        // A file: where its name is, for `mountinfo` (a file has no
        // parent pointer), following final symlinks as the walk did.
        let mut path = path.to_vec();
        let mut start: Option<crate::namespace::ParentDir> = None;
        for _ in 0..=crate::namei::MAX_SYMLINKS {
            let cwd = start.as_ref().map_or(self.names.cwd, |d| At { mount: &d.mount, inode: &d.inode });
            let here = crate::namespace::Ctx { cwd, ..self.names };
            let Ok((parent, Last::Normal(name), _)) = here.parent(&path) else { break };
            let named = parent.mount.sb.dir_locks.lookup(parent.dir()?, name).map(CountedArc::into_arc);
            let Some(named) = named else { break };
            if Arc::ptr_eq(&named, &dir.inode) {
                let place = Some((parent.inode.into_arc(), Box::from(name)));
                return Ok(Found { dir, place });
            }
            match named.symlink_target() {
                Some(target) if !nofollow => {
                    let target = target.to_vec();
                    path = target;
                    start = Some(parent);
                }
                _ => break,
            }
        }
        Ok(Found { dir, place: None })
    }

    /// `mount(2)` of the instance `fs` on the directory `target`, with
    /// per-mount `flags`; `source` is what `mountinfo` shows.
    ///
    /// ```
    /// use vfscale::{Credentials, Errno, MountFlags, Vfs};
    ///
    /// let root_fs = Vfs::default();
    /// let ns = root_fs.new_namespace();
    /// let p = root_fs.process_in(&ns, Credentials::root());
    /// p.mkdir("/mnt", 0o755)?;
    /// let other = Vfs::default();
    /// p.mount(&other, "tmpfs", "/mnt", MountFlags::RDONLY)?;
    /// assert_eq!(p.mkdir("/mnt/x", 0o755), Err(Errno::EROFS));
    /// assert_eq!(p.stat("/mnt/..")?.ino, p.stat("/")?.ino);
    /// # Ok::<(), Errno>(())
    /// ```
    pub fn mount(&self, fs: &Vfs, source: &str, target: impl AsRef<[u8]>, flags: MountFlags) -> VfsResult<()> {
        let ns = self.namespace()?;
        let flags = flags.checked()?;
        let target = self.find(target.as_ref(), false)?;
        self.may_mount()?;
        let root_path = RootPath { path: Box::from(&b"/"[..]), place: None };
        self.graft(ns, fs.new_mount(flags), target, root_path, source)
    }

    /// A bind mount (`mount --bind`, `MS_BIND`, with `MS_REC` when
    /// `recursive`): `source` (a directory or a file) appears at `target`
    /// too, with the source mount's flags; a recursive bind copies the
    /// mounts under `source` as well.
    pub fn bind(&self, source: impl AsRef<[u8]>, target: impl AsRef<[u8]>, recursive: bool) -> VfsResult<()> {
        let ns = self.namespace()?;
        // Linux `path_mount` walks to the target and checks the
        // capability before `do_loopback` walks to the source.
        let target = self.find(target.as_ref(), false)?;
        self.may_mount()?;
        let source = self.find(source.as_ref(), false)?;
        let guard = crossbeam_epoch::pin();
        let table = ns.table(&guard);
        let from = &source.dir.mount;
        // The target is locked and checked before the source (Linux
        // `do_loopback`).
        target_listed(table, &target.dir.mount)?;
        table.entry(from).ok_or(Errno::EINVAL)?;
        // A file that is its mount's root has no place of its own: its path
        // is the one that mount shows.
        let root_path = match table.entry(from) {
            Some(m) if !source.dir.inode.is_dir() && Arc::ptr_eq(&source.dir.inode, from.root()) => m.root_path.clone(),
            _ => {
                RootPath { path: fs_path(from, &source.dir.inode, source.place.as_ref()), place: source.place.clone() }
            }
        };
        let name = table.entry(from).map_or(Box::from(""), |m| m.source.clone());
        let copy = MountRef::new(
            Arc::clone(&from.sb),
            Arc::clone(&from.locks),
            source.dir.inode.clone().into_arc(),
            from.flags(),
        );
        let under = |at: &MountPoint| is_under(from, &at.inode, at.place.as_ref(), &source.dir.inode);
        let submounts = if recursive { table.submounts(from, &under) } else { Vec::new() };
        drop(guard);
        let top = NonNull::from(&*copy);
        self.graft(ns, copy, target, root_path, &name)?;
        // The copies of the submounts, each on the copy of its parent.
        let mut copies: Vec<(u64, NonNull<Mount>)> = vec![(from.id(), top)];
        ns.change(|table, _| {
            for sub in &submounts {
                // SAFETY: listed when read; the writer lock keeps the
                // table's mounts mounted until this change is published.
                let (mount, at) = unsafe { (sub.mount.as_ref(), sub.at.as_ref().expect("a submount has a parent")) };
                // SAFETY: as above.
                let parent_id = unsafe { at.parent.as_ref() }.id();
                let Some(&(_, parent)) = copies.iter().find(|(id, _)| *id == parent_id) else { continue };
                let sub_copy = MountRef::new(
                    Arc::clone(&mount.sb),
                    Arc::clone(&mount.locks),
                    Arc::clone(mount.root()),
                    mount.flags(),
                );
                copies.push((mount.id(), NonNull::from(&*sub_copy)));
                let point = MountPoint { parent, inode: Arc::clone(&at.inode), place: at.place.clone() };
                table.attach(sub_copy, point, sub.root_path.clone(), &sub.source);
            }
            Ok(())
        })
    }

    /// Lists `mount` on `target` (on top of any mounts there).
    fn graft(
        &self,
        ns: &MountNamespace,
        mount: MountRef,
        target: Found,
        root_path: RootPath,
        source: &str,
    ) -> VfsResult<()> {
        // Linux's order: `lock_mount` (ENOENT for a removed target or one
        // in a detached mount), `do_add_mount` (EINVAL outside the
        // caller's namespace), `graft_tree` (ENOTDIR).
        if target.dir.inode.dir().is_ok_and(|d| d.is_dead()) || target.dir.inode.meta().nlink == 0 {
            return Err(Errno::ENOENT);
        }
        ns.change(|table, _| {
            target_listed(table, &target.dir.mount)?;
            // Another mount may have landed on the target since the walk:
            // go on top of it (Linux `lock_mount`).
            let (mut on, mut inode) = (NonNull::from(&*target.dir.mount), Arc::clone(&target.dir.inode));
            // SAFETY: `on` is listed (checked above, or found in the table).
            while let Some(child) = table.child(unsafe { on.as_ref() }, &inode) {
                (on, inode) = (NonNull::from(child), Arc::clone(child.root()));
            }
            if inode.is_dir() != mount.root().is_dir() {
                return Err(Errno::ENOTDIR);
            }
            let place = if Arc::ptr_eq(&inode, &target.dir.inode) { target.place.clone() } else { None };
            table.attach(mount, MountPoint { parent: on, inode, place }, root_path, source);
            Ok(())
        })
    }

    /// Remount: sets the per-mount flags of the mount whose root `target`
    /// is (`mount -o remount,bind,...`: `MS_REMOUNT | MS_BIND`).
    pub fn remount(&self, target: impl AsRef<[u8]>, flags: MountFlags) -> VfsResult<()> {
        let ns = self.namespace()?;
        let flags = flags.checked()?;
        let target = self.find(target.as_ref(), false)?;
        self.may_mount()?;
        if !Arc::ptr_eq(&target.dir.inode, target.dir.mount.root()) {
            return Err(Errno::EINVAL);
        }
        ns.change(|table, _| table.set_flags(&target.dir.mount, flags))
    }

    /// `umount2(2)` of the mount whose root `target` is: EBUSY while files
    /// are open through it, a process's root or working directory is in
    /// it, or mounts sit under it — unless `flags` holds `MNT_DETACH`,
    /// which takes it and its submounts out of the namespace at once and
    /// frees each when its last user goes (with `MNT_FORCE` too, as
    /// `umount -fl` asks). `MNT_EXPIRE` is left out: EINVAL, as any flag
    /// not known.
    pub fn umount(&self, target: impl AsRef<[u8]>, flags: UmountFlags) -> VfsResult<()> {
        let known = UmountFlags::FORCE | UmountFlags::DETACH | UmountFlags::NOFOLLOW;
        if flags.0 & !known.0 != 0 {
            return Err(Errno::EINVAL);
        }
        let ns = self.namespace()?;
        let mut target = self.names.locate(
            target.as_ref(),
            if flags.contains(UmountFlags::NOFOLLOW) { Intent::NoFollow } else { Intent::Follow },
        )?;
        // Onto the mounts on where the walk ended, as a walk's last `.`
        // does not go (Linux `LOOKUP_MOUNTPOINT`, `handle_lookup_down`).
        while target.inode.has_mounts() {
            let Some(child) = crate::namei::mounted_on(ns, &target.mount, &target.inode) else { break };
            target = Dir { inode: CountedArc::adopt(Arc::clone(child.root())), mount: child };
        }
        self.may_mount()?;
        if !Arc::ptr_eq(&target.inode, target.mount.root()) {
            return Err(Errno::EINVAL);
        }
        let lazy = flags.contains(UmountFlags::DETACH);
        // The reference `target` holds is the caller's own.
        ns.change(|table, section| table.detach(&target.mount, lazy, 1, section))
    }

    /// `statfs(2)` of the filesystem `path` is on, with its mount's flags.
    pub fn statfs(&self, path: impl AsRef<[u8]>) -> VfsResult<FsStats> {
        let dir = self.names.locate(path.as_ref(), Intent::Follow)?;
        let stats = crate::vfs::statfs_of(&dir.mount.sb);
        Ok(FsStats { flags: dir.mount.flags(), ..stats })
    }

    /// The `/proc/self/mountinfo` of a process whose root and namespace
    /// this context has: one line per mount reachable from the root, in
    /// mount order, in Linux's format (no propagation fields: every mount
    /// is private).
    pub fn mountinfo(&self) -> VfsResult<String> {
        let ns = self.namespace()?;
        let guard = crossbeam_epoch::pin();
        let table = ns.table(&guard);
        let mut out = String::new();
        for m in &table.mounts {
            // SAFETY: listed, so live while the guard is pinned.
            let mount = unsafe { m.mount.as_ref() };
            // SAFETY: as above.
            let parent_id = m.at.as_ref().map_or(mount.id(), |at| unsafe { at.parent.as_ref() }.id());
            let Some(point) = ns_path(table, mount, mount.root(), None, self.names.root) else { continue };
            // The root's path in its filesystem as it is now (Linux
            // prints the root dentry's path at each read, so a rename
            // shows).
            let root_path = if removed(mount.root()) {
                // Linux `dentry_path` of an unhashed dentry.
                [&m.root_path.path[..], b"//deleted"].concat().into()
            } else if mount.root().is_dir() {
                fs_path(mount, mount.root(), None)
            } else {
                file_root_path(mount, &m.root_path)
            };
            let dev = mount.sb.dev();
            out.push_str(&format!(
                "{} {} {}:{} {} {} {} - {} {} rw\n",
                mount.id(),
                parent_id,
                libc::major(dev),
                libc::minor(dev),
                escape(&root_path),
                escape(&point),
                mount.flags().options(),
                mount.fs_type(),
                escape(m.source.as_bytes()),
            ));
        }
        Ok(out)
    }
}

/// The target's mount is in `table`: ENOENT where it was unmounted
/// (Linux `lock_mount`'s `is_mounted`), EINVAL where it is in another
/// namespace (`check_mnt`).
fn target_listed(table: &MountTable, mount: &Mount) -> VfsResult<()> {
    match table.entry(mount) {
        Some(_) => Ok(()),
        None if mount.is_detached() => Err(Errno::ENOENT),
        None => Err(Errno::EINVAL),
    }
}

/// Whether `inode` was removed from its filesystem's tree (a directory
/// by `rmdir` or a rename over it, a file's last link by `unlink`).
fn removed(inode: &Inode) -> bool {
    match inode.dir() {
        Ok(dir) => dir.is_dead(),
        Err(_) => inode.meta().nlink == 0,
    }
}

/// The path of a file root: its directory's path now and its name there;
/// where it left that directory, wherever a search of its filesystem
/// finds it; where it is nowhere, its path when mounted.
fn file_root_path(mount: &Mount, root: &RootPath) -> Box<[u8]> {
    let Some((dir, name)) = &root.place else { return root.path.clone() };
    // The name it was found by, while that still names it (of its hard
    // links, that is the one Linux's dentry is), else any other there.
    let still = mount.sb.native
        && dir.dir().is_ok_and(|d| mount.sb.dir_locks.lookup(d, name).is_some_and(|i| Arc::ptr_eq(&i, mount.root())));
    let found = if still { Some(name.clone()) } else { name_in(&mount.sb, dir, mount.root()) };
    let Some(name) = found else {
        return search(&mount.sb, mount.root()).unwrap_or_else(|| root.path.clone());
    };
    let mut path = fs_path(mount, dir, None).into_vec();
    if path != b"/" {
        path.push(b'/');
    }
    path.extend_from_slice(&name);
    path.into()
}

/// The path of `file` in the native filesystem `sb`, by a search of its
/// directories (a file has no parent pointer; only a file mount whose
/// file was renamed into another directory needs this).
fn search(sb: &crate::superblock::SuperBlock, file: &Arc<Inode>) -> Option<Box<[u8]>> {
    if !sb.native {
        return None;
    }
    let mut pending = vec![(Arc::clone(&sb.root), Vec::new())];
    while let Some((dir, path)) = pending.pop() {
        let Ok(d) = dir.dir() else { continue };
        for dentry in sb.dir_locks.all_entries(d) {
            let Some(inode) = &dentry.inode else { continue };
            let mut child_path = path.clone();
            child_path.push(b'/');
            child_path.extend_from_slice(&dentry.name);
            if Arc::ptr_eq(inode, file) {
                return Some(child_path.into());
            }
            if inode.is_dir() {
                pending.push((Arc::clone(inode), child_path));
            }
        }
    }
    None
}

/// `mountinfo`'s escapes (Linux `seq_path` with `" \t\n\\"`).
fn escape(path: &[u8]) -> String {
    let mut out = String::new();
    for &b in path {
        match b {
            b' ' | b'\t' | b'\n' | b'\\' => out.push_str(&format!("\\{b:03o}")),
            _ => out.push_str(&String::from_utf8_lossy(&[b])),
        }
    }
    out
}

/// The name `inode` has in its parent directory `parent`.
fn name_in(sb: &crate::superblock::SuperBlock, parent: &Arc<Inode>, inode: &Arc<Inode>) -> Option<Box<[u8]>> {
    if !sb.native {
        let entries = sb.fs.readdir(parent).ok()?;
        return entries
            .into_iter()
            .find(|e| e.ino == inode.ino() && e.name != b"." && e.name != b"..")
            .map(|e| e.name.into());
    }
    let dir = parent.dir().ok()?;
    let entries = sb.dir_locks.all_entries(dir);
    entries.into_iter().find(|d| d.inode.as_ref().is_some_and(|i| Arc::ptr_eq(i, inode))).map(|d| d.name.clone())
}

/// One step up within a filesystem: the parent directory and the name, or
/// `None` at the filesystem's root (or for a file with no known place).
fn step_up(
    sb: &crate::superblock::SuperBlock,
    inode: &Arc<Inode>,
    place: Option<&(Arc<Inode>, Box<[u8]>)>,
) -> Option<(Arc<Inode>, Box<[u8]>)> {
    if let Some((dir, name)) = place {
        return Some((Arc::clone(dir), name.clone()));
    }
    let guard = crossbeam_epoch::pin();
    let parent = Arc::clone(inode.dir().ok()?.parent(&guard)?);
    drop(guard);
    let name = name_in(sb, &parent, inode)?;
    Some((parent, name))
}

/// The path of `inode` (a file at `place`) inside `mount`'s filesystem.
fn fs_path(mount: &Mount, inode: &Arc<Inode>, place: Option<&(Arc<Inode>, Box<[u8]>)>) -> Box<[u8]> {
    let mut names = Vec::new();
    let mut at = Arc::clone(inode);
    let mut place = place.cloned();
    while let Some((parent, name)) = step_up(&mount.sb, &at, place.as_ref()) {
        names.push(name);
        at = parent;
        place = None;
    }
    join(names)
}

fn join(mut names: Vec<Box<[u8]>>) -> Box<[u8]> {
    names.reverse();
    let mut path = Vec::new();
    for name in names {
        path.push(b'/');
        path.extend_from_slice(&name);
    }
    if path.is_empty() {
        path.push(b'/');
    }
    path.into()
}

/// The path of `inode` of `mount` from `root`, across mount points (Linux
/// `d_path`); `None` where `root` is not above it.
fn ns_path(
    table: &MountTable,
    mount: &Mount,
    inode: &Arc<Inode>,
    place: Option<&(Arc<Inode>, Box<[u8]>)>,
    root: At<'_>,
) -> Option<Box<[u8]>> {
    let mut names = Vec::new();
    let (mut mount, mut at, mut place) = (mount, Arc::clone(inode), place.cloned());
    loop {
        if std::ptr::eq(mount, root.mount) && Arc::ptr_eq(&at, root.inode) {
            return Some(join(names));
        }
        // At a mount's root, up to its mount point, even where a place
        // is known: a place is where a file lies in the mount below, so a
        // file mount stacked on a file mount climbs both.
        if Arc::ptr_eq(&at, mount.root()) {
            let (parent, point) = table.parent(mount)?;
            place = table.entry(mount).and_then(|m| m.at.as_ref()).and_then(|p| p.place.clone());
            (mount, at) = (parent, Arc::clone(point));
            continue;
        }
        let (parent, name) = step_up(&mount.sb, &at, place.as_ref())?;
        names.push(name);
        at = parent;
        place = None;
    }
}

/// Whether `inode` (a file at `place`) of `mount` lies at or under `top`.
fn is_under(mount: &Mount, inode: &Arc<Inode>, place: Option<&(Arc<Inode>, Box<[u8]>)>, top: &Arc<Inode>) -> bool {
    let mut at = Arc::clone(inode);
    let mut place = place.cloned();
    loop {
        if Arc::ptr_eq(&at, top) {
            return true;
        }
        let Some((parent, _)) = step_up(&mount.sb, &at, place.as_ref()) else { return false };
        at = parent;
        place = None;
    }
}
