//! The system-call layer: each call takes a [`Context`] — who makes it
//! (credentials) and where its relative paths start (a directory) — as
//! gVisor's VFS takes `(creds, PathOperation)`, and not a process.
//!
//! [`Process`](crate::Process) owns a descriptor table, a working
//! directory and credentials, and its methods wrap these calls in one
//! line each; a front end that keeps its own handles and addresses
//! directories by inode (FUSE) makes a `Context` per request, which
//! writes nothing shared. The lock calls, which work on an open file
//! description rather than a path, are in [`locks`].
//!
//! May import the base modules, the node types, `dirlock`, `file`,
//! `locks`, `mount`, `namei`, `namespace`, `notify_change`, `superblock`,
//! `vfs` and `xattr`;
//! only `process` and the crate root import it.
//!
//! ```
//! use vfscale::{AtFlags, Context, Credentials, OpenFlags, Vfs};
//!
//! let vfs = Vfs::default();
//! let root = Credentials::root();
//! let at_root = Context::new(&vfs, &root, vfs.root());
//! at_root.mkdir("srv", 0o755)?;
//! let srv = at_root.resolve("srv", true)?;
//! let in_srv = Context::new(&vfs, &root, &srv);
//! let file = in_srv.open("motd", OpenFlags::CREAT | OpenFlags::WRONLY, 0o644)?;
//! file.write(b"hello\n", &root)?;
//! assert_eq!(at_root.stat("/srv/motd", AtFlags::NONE)?.size, 6);
//! # Ok::<(), vfscale::Errno>(())
//! ```

pub mod locks;
mod open;

use crate::cred::{Access, Credentials};
use crate::errno::{Errno, VfsResult};
use crate::file::OpenFile;
use crate::inode::Inode;
use crate::mount::{Location, MountFlags, MountNamespace};
use crate::namei::{At, Intent, Scope, Walked};
use crate::namespace::{Ctx, Dir};
use crate::types::{AtFlags, FileType, OpenFlags, OpenHow, RenameFlags, ResolveFlags, SetAttr, SetTime, Stat};
use crate::Vfs;
use std::sync::Arc;
use vfscale_sync::audited::CountedArc;

mod mounts;
pub use mounts::UmountFlags;

/// Who makes a system call, and the directory its relative paths start
/// from. Borrowed, so making one writes nothing.
#[derive(Debug, Clone, Copy)]
pub struct Context<'a> {
    names: Ctx<'a>,
}

fn intent(follow: bool) -> Intent {
    if follow {
        Intent::Follow
    } else {
        Intent::NoFollow
    }
}

impl<'a> Context<'a> {
    /// Calls with credentials `cred` whose relative paths start at `start`
    /// of `vfs` (the `dirfd` of the `*at` calls) and whose absolute paths
    /// start at the instance's root. A relative path from a `start` that
    /// is not a directory fails with ENOTDIR at its first component, as in
    /// Linux; an empty one names `start` itself where the call was given
    /// [`AtFlags::EMPTY_PATH`].
    pub fn new(vfs: &'a Vfs, cred: &'a Credentials, start: &'a Arc<Inode>) -> Context<'a> {
        let mount = vfs.own_mount();
        let names = Ctx {
            ns: None,
            cred,
            root: At { mount, inode: &vfs.sb.root },
            cwd: At { mount, inode: start },
            scope: Scope::default(),
        };
        Context { names }
    }

    /// Calls in the mount namespace `ns` (none: inside `cwd`'s instance
    /// alone), whose absolute paths start at `root` — where `..` stops
    /// (a process's `chroot`) — and whose relative paths start at `cwd`.
    pub fn in_namespace(
        ns: Option<&'a MountNamespace>,
        cred: &'a Credentials,
        root: &'a Location,
        cwd: &'a Location,
    ) -> Context<'a> {
        let at = |l: &'a Location| At { mount: &l.mount, inode: &l.inode };
        Context { names: Ctx { ns, cred, root: at(root), cwd: at(cwd), scope: Scope::default() } }
    }

    /// A context from places a walk can start at (a process's state).
    pub(crate) fn from_places(
        ns: Option<&'a MountNamespace>,
        cred: &'a Credentials,
        root: At<'a>,
        cwd: At<'a>,
    ) -> Context<'a> {
        Context { names: Ctx { ns, cred, root, cwd, scope: Scope::default() } }
    }

    /// This context with its relative paths starting at the open file
    /// `dir` (a `dirfd`), in the mount it was opened through.
    pub fn starting_at(self, dir: &'a OpenFile) -> Context<'a> {
        Context { names: Ctx { cwd: At { mount: dir.mount(), inode: dir.inode() }, ..self.names } }
    }

    /// This context with its relative paths starting at `cwd` instead.
    pub fn with_cwd(self, cwd: &'a Location) -> Context<'a> {
        Context { names: Ctx { cwd: At { mount: &cwd.mount, inode: &cwd.inode }, ..self.names } }
    }

    /// The credentials every call is checked against.
    pub fn credentials(&self) -> &'a Credentials {
        self.names.cred
    }

    /// The name operations of a call given `flags`, after checking that
    /// it takes no flag outside `allowed`.
    fn names_with(&self, flags: AtFlags, allowed: AtFlags) -> VfsResult<(Ctx<'a>, Intent)> {
        let flags = flags.only(allowed)?;
        let scope = Scope { empty_path: flags.contains(AtFlags::EMPTY_PATH), ..self.names.scope };
        Ok((Ctx { scope, ..self.names }, intent(!flags.contains(AtFlags::SYMLINK_NOFOLLOW))))
    }

    /// The inode `path` names (following a final symlink if `follow`), as
    /// a handle that stays valid after it is unlinked.
    pub fn resolve(&self, path: impl AsRef<[u8]>, follow: bool) -> VfsResult<Arc<Inode>> {
        self.names.lookup(path.as_ref(), intent(follow)).map(CountedArc::into_arc)
    }

    /// The directory `path` names, if the caller may search it: the check
    /// of `chdir(2)` and `chroot(2)`.
    pub fn search_dir(&self, path: impl AsRef<[u8]>) -> VfsResult<Location> {
        let Dir { mount, inode } = self.names.locate(path.as_ref(), Intent::Follow)?;
        inode.dir()?;
        inode.permission(self.names.cred, Access::EXEC)?;
        Ok(Location { mount, inode: inode.into_arc() })
    }

    /// The place `path` names: its mount and inode (following a final
    /// symlink if `follow`).
    pub fn locate(&self, path: impl AsRef<[u8]>, follow: bool) -> VfsResult<Location> {
        let Dir { mount, inode } = self.names.locate(path.as_ref(), intent(follow))?;
        Ok(Location { mount, inode: inode.into_arc() })
    }

    /// `fstatat(2)`: `flags` may hold `AT_SYMLINK_NOFOLLOW` (`lstat`) and
    /// `AT_EMPTY_PATH`.
    pub fn stat(&self, path: impl AsRef<[u8]>, flags: AtFlags) -> VfsResult<Stat> {
        let (names, intent) = self.names_with(flags, AtFlags::SYMLINK_NOFOLLOW | AtFlags::EMPTY_PATH)?;
        names.stat(path.as_ref(), intent)
    }

    /// `faccessat2(2)`-like check of `mask` on the file `path` names;
    /// `flags` may hold `AT_EACCESS`, `AT_SYMLINK_NOFOLLOW` and
    /// `AT_EMPTY_PATH`.
    pub fn access(&self, path: impl AsRef<[u8]>, mask: Access, flags: AtFlags) -> VfsResult<()> {
        let allowed = AtFlags::EACCESS | AtFlags::SYMLINK_NOFOLLOW | AtFlags::EMPTY_PATH;
        let (names, intent) = self.names_with(flags, allowed)?;
        names.walk(path.as_ref(), intent, |walked| match walked {
            Walked::Found(at) => access_at(at, self.names.cred, mask),
            Walked::Parent { .. } => unreachable!("not a parent walk"),
        })
    }

    /// `open(2)` without a descriptor: the new open file description;
    /// `perm` is used when `O_CREAT` creates the file.
    pub fn open(&self, path: impl AsRef<[u8]>, flags: OpenFlags, perm: u32) -> VfsResult<Arc<OpenFile>> {
        open::open(&self.names, path.as_ref(), flags, perm)
    }

    /// `openat2(2)`: [`open`](Self::open) with Linux's strict checks of
    /// `how` (see [`OpenHow`]) and a walk confined by `how.resolve`:
    /// `RESOLVE_BENEATH` and `RESOLVE_IN_ROOT` make this context's start
    /// the root; `RESOLVE_CACHED` is EAGAIN for an open that would create
    /// or truncate, or whose walk leaves the dcache.
    ///
    /// ```
    /// use vfscale::{Context, Credentials, Errno, OpenFlags, OpenHow, ResolveFlags, Vfs};
    ///
    /// let vfs = Vfs::default();
    /// let root = Credentials::root();
    /// let top = Context::new(&vfs, &root, vfs.root());
    /// top.mkdir("jail", 0o755)?;
    /// top.symlink("/etc/hosts", "jail/hosts")?;
    /// let jail = top.resolve("jail", true)?;
    /// let inside = Context::new(&vfs, &root, &jail);
    /// let how = |resolve| OpenHow { flags: OpenFlags::RDONLY, mode: 0, resolve };
    /// assert_eq!(inside.openat2("../jail", &how(ResolveFlags::BENEATH)).err(), Some(Errno::EXDEV));
    /// assert_eq!(inside.openat2("hosts", &how(ResolveFlags::BENEATH)).err(), Some(Errno::EXDEV));
    /// assert_eq!(inside.openat2("hosts", &how(ResolveFlags::NO_SYMLINKS)).err(), Some(Errno::ELOOP));
    /// // In the jail, "/etc/hosts" is the jail's own (missing) one.
    /// assert_eq!(inside.openat2("hosts", &how(ResolveFlags::IN_ROOT)).err(), Some(Errno::ENOENT));
    /// assert!(inside.openat2("..", &how(ResolveFlags::IN_ROOT)).is_ok());
    /// # Ok::<(), Errno>(())
    /// ```
    pub fn openat2(&self, path: impl AsRef<[u8]>, how: &OpenHow) -> VfsResult<Arc<OpenFile>> {
        how.validate()?;
        let resolve = how.resolve;
        // O_TMPFILE includes O_DIRECTORY's bit, so it is matched whole.
        let creates_or_truncates =
            how.flags.0 & (libc::O_CREAT | libc::O_TRUNC) != 0 || how.flags.0 & libc::O_TMPFILE == libc::O_TMPFILE;
        if resolve.contains(ResolveFlags::CACHED) && creates_or_truncates {
            return Err(Errno::EAGAIN);
        }
        let beneath = resolve.contains(ResolveFlags::BENEATH);
        let scope = Scope {
            beneath,
            no_symlinks: resolve.contains(ResolveFlags::NO_SYMLINKS),
            cached: resolve.contains(ResolveFlags::CACHED),
            empty_path: false,
            no_xdev: resolve.contains(ResolveFlags::NO_XDEV),
            rooted_at_start: beneath || resolve.contains(ResolveFlags::IN_ROOT),
        };
        let root = if beneath || resolve.contains(ResolveFlags::IN_ROOT) { self.names.cwd } else { self.names.root };
        let names = Ctx { root, scope, ..self.names };
        // `openat2`'s mode was checked to fit permission bits.
        open::open(&names, path.as_ref(), how.flags, how.mode as u32)
    }

    /// `mkdir(2)`.
    pub fn mkdir(&self, path: impl AsRef<[u8]>, perm: u32) -> VfsResult<()> {
        self.names.mkdir(path.as_ref(), perm)
    }

    /// `mknod(2)`: `mode` is the type (`S_IFREG` or 0, `S_IFIFO`,
    /// `S_IFSOCK`, `S_IFCHR`, `S_IFBLK`) and permission bits; `rdev` the
    /// device number of a device node (ignored for other types). Devices
    /// need CAP_MKNOD.
    pub fn mknod(&self, path: impl AsRef<[u8]>, mode: u32, rdev: u64) -> VfsResult<()> {
        self.names.mknod(path.as_ref(), mode, rdev)
    }

    /// `rmdir(2)`.
    pub fn rmdir(&self, path: impl AsRef<[u8]>) -> VfsResult<()> {
        self.names.rmdir(path.as_ref())
    }

    /// `unlinkat(2)`: `rmdir` with `AT_REMOVEDIR`, else `unlink`.
    pub fn unlinkat(&self, path: impl AsRef<[u8]>, flags: AtFlags) -> VfsResult<()> {
        if flags.only(AtFlags::REMOVEDIR)?.contains(AtFlags::REMOVEDIR) {
            self.rmdir(path)
        } else {
            self.unlink(path)
        }
    }

    /// `unlink(2)`.
    pub fn unlink(&self, path: impl AsRef<[u8]>) -> VfsResult<()> {
        self.names.unlink(path.as_ref())
    }

    /// `renameat2(2)` with both paths relative to this context's start.
    pub fn rename(&self, old: impl AsRef<[u8]>, new: impl AsRef<[u8]>, flags: RenameFlags) -> VfsResult<()> {
        self.names.rename(old.as_ref(), &self.names, new.as_ref(), flags)
    }

    /// `renameat2(2)` with `new` relative to `new_start` (a second
    /// `dirfd`).
    pub fn renameat(
        &self,
        old: impl AsRef<[u8]>,
        new_start: &Arc<Inode>,
        new: impl AsRef<[u8]>,
        flags: RenameFlags,
    ) -> VfsResult<()> {
        let to = Ctx { cwd: At { inode: new_start, ..self.names.cwd }, ..self.names };
        self.names.rename(old.as_ref(), &to, new.as_ref(), flags)
    }

    /// `renameat2(2)` with `new` relative to `to`'s start (a second
    /// `dirfd`, which may be in another mount: then EXDEV).
    pub fn rename_to(
        &self,
        old: impl AsRef<[u8]>,
        to: &Context<'_>,
        new: impl AsRef<[u8]>,
        flags: RenameFlags,
    ) -> VfsResult<()> {
        self.names.rename(old.as_ref(), &to.names, new.as_ref(), flags)
    }

    /// `link(2)`: `new` becomes another name of `old` (a final symlink in
    /// `old` is not followed, as in Linux).
    pub fn link(&self, old: impl AsRef<[u8]>, new: impl AsRef<[u8]>) -> VfsResult<()> {
        self.names.link(old.as_ref(), Intent::NoFollow, &self.names, new.as_ref())
    }

    /// `linkat(2)` with `new` relative to `new_start`; `flags` may hold
    /// `AT_SYMLINK_FOLLOW` (follow a final symlink of `old`) and
    /// `AT_EMPTY_PATH` (link this context's start itself, which needs
    /// CAP_DAC_READ_SEARCH: else ENOENT, as Linux before 6.10
    /// answers; 6.10's exception for a file the caller opened is not
    /// made).
    pub fn linkat(
        &self,
        old: impl AsRef<[u8]>,
        flags: AtFlags,
        new_start: &Arc<Inode>,
        new: impl AsRef<[u8]>,
    ) -> VfsResult<()> {
        let to = Context { names: Ctx { cwd: At { inode: new_start, ..self.names.cwd }, ..self.names } };
        self.link_to(old, flags, &to, new)
    }

    /// `linkat(2)` with `new` relative to `to`'s start (a second `dirfd`,
    /// which may be in another mount: then EXDEV); `flags` as
    /// [`linkat`](Self::linkat)'s.
    pub fn link_to(
        &self,
        old: impl AsRef<[u8]>,
        flags: AtFlags,
        to: &Context<'_>,
        new: impl AsRef<[u8]>,
    ) -> VfsResult<()> {
        let allowed = AtFlags::SYMLINK_FOLLOW | AtFlags::EMPTY_PATH;
        let read_search = self.names.cred.capable(crate::cred::Capabilities::DAC_READ_SEARCH);
        if flags.only(allowed)?.contains(AtFlags::EMPTY_PATH) && !read_search {
            return Err(Errno::ENOENT);
        }
        let follow = flags.contains(AtFlags::SYMLINK_FOLLOW);
        let (names, _) = self.names_with(AtFlags(flags.0 & AtFlags::EMPTY_PATH.0), allowed)?;
        names.link(old.as_ref(), intent(follow), &to.names, new.as_ref())
    }

    /// `symlink(2)`: creates `path` pointing at `target`.
    pub fn symlink(&self, target: impl AsRef<[u8]>, path: impl AsRef<[u8]>) -> VfsResult<()> {
        self.names.symlink(target.as_ref(), path.as_ref())
    }

    /// `readlink(2)`.
    pub fn readlink(&self, path: impl AsRef<[u8]>) -> VfsResult<Vec<u8>> {
        self.names.readlink(path.as_ref())
    }

    /// `fchmodat2(2)`: `flags` may hold `AT_SYMLINK_NOFOLLOW` (a symlink's
    /// own mode cannot change: EOPNOTSUPP, as since Linux 6.6) and
    /// `AT_EMPTY_PATH`.
    pub fn chmod(&self, path: impl AsRef<[u8]>, perm: u32, flags: AtFlags) -> VfsResult<()> {
        let (names, intent) = self.names_with(flags, AtFlags::SYMLINK_NOFOLLOW | AtFlags::EMPTY_PATH)?;
        names.chmod(path.as_ref(), perm, intent)
    }

    /// `fchownat(2)`: `None` leaves an id unchanged (like -1); `flags` may
    /// hold `AT_SYMLINK_NOFOLLOW` (`lchown`) and `AT_EMPTY_PATH`.
    pub fn chown(&self, path: impl AsRef<[u8]>, uid: Option<u32>, gid: Option<u32>, flags: AtFlags) -> VfsResult<()> {
        let (names, intent) = self.names_with(flags, AtFlags::SYMLINK_NOFOLLOW | AtFlags::EMPTY_PATH)?;
        names.chown(path.as_ref(), uid, gid, intent)
    }

    /// `utimensat(2)`: `flags` may hold `AT_SYMLINK_NOFOLLOW` and
    /// `AT_EMPTY_PATH`.
    pub fn utimens(&self, path: impl AsRef<[u8]>, atime: SetTime, mtime: SetTime, flags: AtFlags) -> VfsResult<()> {
        let (names, intent) = self.names_with(flags, AtFlags::SYMLINK_NOFOLLOW | AtFlags::EMPTY_PATH)?;
        names.utimens(path.as_ref(), atime, mtime, intent)
    }

    /// `truncate(2)`: needs write permission on the file.
    pub fn truncate(&self, path: impl AsRef<[u8]>, len: i64) -> VfsResult<()> {
        let Dir { mount, inode } = self.names.locate(path.as_ref(), Intent::Follow)?;
        // `vfs_truncate`: the type, then the mount, then permission.
        match inode.file_type() {
            FileType::Directory => return Err(Errno::EISDIR),
            FileType::Regular => {}
            _ => return Err(Errno::EINVAL),
        }
        let _write = mount.want_write()?;
        crate::notify_change::truncate(&inode, self.names.cred, len, mount.sb.config.max_file_size)
    }

    /// Changes the attributes `attr` names on `inode`, in the order and
    /// with the checks of the matching system calls (`truncate`, `chown`,
    /// `chmod`, `utimensat`) — Linux's `notify_change`, for front ends that
    /// address files by inode (FUSE `setattr`).
    pub fn setattr(&self, inode: &Inode, attr: SetAttr) -> VfsResult<()> {
        let start = self.names.cwd;
        let _write = start.mount.want_write()?;
        crate::notify_change::setattr(inode, self.names.cred, attr, start.sb().config.max_file_size)
    }

    /// `getxattrat(2)`: the value's length, with the value copied into
    /// `buf` unless `buf` is empty; `flags` may hold `AT_SYMLINK_NOFOLLOW`
    /// (`lgetxattr`) and `AT_EMPTY_PATH` (`fgetxattr`). See
    /// [`crate::xattr`] for the rules.
    pub fn getxattr(&self, path: impl AsRef<[u8]>, flags: AtFlags, name: &[u8], buf: &mut [u8]) -> VfsResult<usize> {
        crate::xattr::check_name(name)?;
        let buf = std::cell::RefCell::new(buf);
        self.on_xattr_target(path.as_ref(), flags, |inode| {
            crate::xattr::get(inode, self.names.cred, name, &mut buf.borrow_mut())
        })
    }

    /// `setxattrat(2)`; `flags` as [`getxattr`](Self::getxattr)'s, and
    /// `xattr_flags` 0, [`XATTR_CREATE`](crate::xattr::XATTR_CREATE) or
    /// [`XATTR_REPLACE`](crate::xattr::XATTR_REPLACE).
    pub fn setxattr(
        &self,
        path: impl AsRef<[u8]>,
        flags: AtFlags,
        name: &[u8],
        value: &[u8],
        xattr_flags: i32,
    ) -> VfsResult<()> {
        crate::xattr::check_set_args(name, value, xattr_flags)?;
        self.change_xattr(path.as_ref(), flags, name, Some(value), xattr_flags)
    }

    /// `listxattrat(2)`: the names, each ending in a NUL, as
    /// [`getxattr`](Self::getxattr) fills `buf`.
    pub fn listxattr(&self, path: impl AsRef<[u8]>, flags: AtFlags, buf: &mut [u8]) -> VfsResult<usize> {
        let buf = std::cell::RefCell::new(buf);
        self.on_xattr_target(path.as_ref(), flags, |inode| {
            crate::xattr::list(inode, self.names.cred, &mut buf.borrow_mut())
        })
    }

    /// `removexattrat(2)`.
    pub fn removexattr(&self, path: impl AsRef<[u8]>, flags: AtFlags, name: &[u8]) -> VfsResult<()> {
        crate::xattr::check_name(name)?;
        self.change_xattr(path.as_ref(), flags, name, None, 0)
    }

    /// `read` of the inode an xattr call names, at the end of its walk (as
    /// `stat` is: no count taken on it; a walk may end more than once).
    fn on_xattr_target<R>(&self, path: &[u8], flags: AtFlags, read: impl Fn(&Inode) -> VfsResult<R>) -> VfsResult<R> {
        let (names, intent) = self.names_with(flags, XATTR_AT_FLAGS)?;
        names.walk(path, intent, |walked| match walked {
            Walked::Found(at) => read(at.inode),
            Walked::Parent { .. } => unreachable!("not a parent walk"),
        })
    }

    /// Sets (`value` given) or removes an attribute whose arguments were
    /// checked, on a mount that takes changes, charging its space to the
    /// instance. A change bound to fail (a read-only mount, permission,
    /// the namespace, the name present or missing against `xattr_flags`)
    /// fails at the end of its walk on reads alone, before the place is
    /// counted or the attributes locked: it writes no line.
    fn change_xattr(
        &self,
        path: &[u8],
        flags: AtFlags,
        name: &[u8],
        value: Option<&[u8]>,
        xattr_flags: i32,
    ) -> VfsResult<()> {
        let (names, intent) = self.names_with(flags, XATTR_AT_FLAGS)?;
        let cred = self.names.cred;
        let target = names.locate_checked(path, intent, |at| {
            at.mount.check_writable()?;
            crate::xattr::may_set(at.inode, cred, name, value.is_some(), xattr_flags)
        })?;
        // Held until the value is set: checked above in Linux's order,
        // taken here (a remount to read-only in between is EROFS here).
        let _write = target.mount.want_write()?;
        let charge = |delta| target.mount.sb.charge_ispace(delta);
        crate::xattr::set(&target.inode, name, value, xattr_flags, &charge)
    }
}

/// The `AtFlags` the xattr calls take: `AT_SYMLINK_NOFOLLOW` (the `l`
/// forms) and `AT_EMPTY_PATH` (the `f` forms).
const XATTR_AT_FLAGS: AtFlags = AtFlags(libc::AT_SYMLINK_NOFOLLOW | libc::AT_EMPTY_PATH);

/// `faccessat`'s checks in Linux's order: a program on a `noexec` mount,
/// permission, then writing through a read-only mount (not for special
/// files, which the mount does not hold).
fn access_at(at: At<'_>, cred: &Credentials, mask: Access) -> VfsResult<()> {
    let file_type = at.inode.file_type();
    if mask.contains(Access::EXEC) && file_type == FileType::Regular && at.mount.flags().contains(MountFlags::NOEXEC) {
        return Err(Errno::EACCES);
    }
    // The filesystem's `->permission`, as ref-walk asks it.
    at.sb().permission(at.inode, cred, mask)?;
    if mask.contains(Access::WRITE) && matches!(file_type, FileType::Regular | FileType::Directory | FileType::Symlink)
    {
        at.mount.check_writable()?;
    }
    Ok(())
}
