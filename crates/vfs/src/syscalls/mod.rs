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
//! `locks`, `namei`, `namespace`, `notify_change`, `vfs` and `xattr`;
//! only `process` and the crate root import it.
//!
//! ```
//! use vfscale::{Context, Credentials, OpenFlags, Vfs};
//!
//! let vfs = Vfs::default();
//! let root = Credentials::root();
//! let at_root = Context::new(&vfs, &root, vfs.root())?;
//! at_root.mkdir("srv", 0o755)?;
//! let srv = at_root.resolve("srv", true)?;
//! let in_srv = Context::new(&vfs, &root, &srv)?;
//! let file = in_srv.open("motd", OpenFlags::CREAT | OpenFlags::WRONLY, 0o644)?;
//! file.write(b"hello\n", &root)?;
//! assert_eq!(at_root.stat("/srv/motd", true)?.size, 6);
//! # Ok::<(), vfscale::Errno>(())
//! ```

pub mod locks;
mod open;

use crate::cred::{Access, Credentials};
use crate::errno::VfsResult;
use crate::file::OpenFile;
use crate::inode::Inode;
use crate::namei::{Intent, Walked};
use crate::namespace::Ctx;
use crate::types::{RenameFlags, SetAttr, SetTime, Stat};
use crate::Vfs;
use std::sync::Arc;
use vfscale_sync::audited::CountedArc;

/// Who makes a system call, and the directory its relative paths start
/// from. Borrowed, so making one writes nothing.
#[derive(Debug, Clone, Copy)]
pub struct Context<'a> {
    vfs: &'a Vfs,
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
    /// Calls with credentials `cred` whose relative paths start at
    /// directory `start` of `vfs` (the `dirfd` of the `*at` calls);
    /// ENOTDIR if `start` is not a directory.
    pub fn new(vfs: &'a Vfs, cred: &'a Credentials, start: &'a Arc<Inode>) -> VfsResult<Context<'a>> {
        start.dir()?;
        Ok(Context::unchecked(vfs, cred, start))
    }

    /// As [`new`](Self::new), `start` known to be a directory.
    pub(crate) fn unchecked(vfs: &'a Vfs, cred: &'a Credentials, start: &'a Arc<Inode>) -> Context<'a> {
        Context { vfs, names: Ctx { sb: &vfs.sb, cred, cwd: start } }
    }

    /// The credentials every call is checked against.
    pub fn credentials(&self) -> &'a Credentials {
        self.names.cred
    }

    /// The inode `path` names (following a final symlink if `follow`), as
    /// a handle that stays valid after it is unlinked.
    pub fn resolve(&self, path: impl AsRef<[u8]>, follow: bool) -> VfsResult<Arc<Inode>> {
        self.names.lookup(path.as_ref(), intent(follow)).map(CountedArc::into_arc)
    }

    /// The directory `path` names, if the caller may search it: the check
    /// of `chdir(2)`.
    pub fn search_dir(&self, path: impl AsRef<[u8]>) -> VfsResult<Arc<Inode>> {
        let inode = self.names.lookup(path.as_ref(), Intent::Follow)?;
        inode.dir()?;
        inode.permission(self.names.cred, Access::EXEC)?;
        Ok(inode.into_arc())
    }

    /// `stat(2)` (`follow`) or `lstat(2)`.
    pub fn stat(&self, path: impl AsRef<[u8]>, follow: bool) -> VfsResult<Stat> {
        self.names.stat(path.as_ref(), intent(follow))
    }

    /// `access(2)`-like check of `mask` on the file `path` names.
    pub fn access(&self, path: impl AsRef<[u8]>, mask: Access) -> VfsResult<()> {
        self.names.walk(path.as_ref(), Intent::Follow, |walked| match walked {
            Walked::Found(inode) => inode.permission(self.names.cred, mask),
            Walked::Parent { .. } => unreachable!("not a parent walk"),
        })
    }

    /// `open(2)` without a descriptor: the new open file description;
    /// `perm` is used when `O_CREAT` creates the file.
    pub fn open(&self, path: impl AsRef<[u8]>, flags: crate::OpenFlags, perm: u32) -> VfsResult<Arc<OpenFile>> {
        open::open(&self.names, path.as_ref(), flags, perm).map(Arc::new)
    }

    /// `mkdir(2)`.
    pub fn mkdir(&self, path: impl AsRef<[u8]>, perm: u32) -> VfsResult<()> {
        self.names.mkdir(path.as_ref(), perm)
    }

    /// `mknod(2)`: `mode` is the type (`S_IFREG` or 0, `S_IFIFO`,
    /// `S_IFSOCK`, `S_IFCHR`, `S_IFBLK`) and permission bits; `rdev` the
    /// device number of a device node (ignored for other types). Devices
    /// need CAP_MKNOD: uid 0 here.
    pub fn mknod(&self, path: impl AsRef<[u8]>, mode: u32, rdev: u64) -> VfsResult<()> {
        self.names.mknod(path.as_ref(), mode, rdev)
    }

    /// `rmdir(2)`.
    pub fn rmdir(&self, path: impl AsRef<[u8]>) -> VfsResult<()> {
        self.names.rmdir(path.as_ref())
    }

    /// `unlink(2)`.
    pub fn unlink(&self, path: impl AsRef<[u8]>) -> VfsResult<()> {
        self.names.unlink(path.as_ref())
    }

    /// `renameat2(2)` with both paths relative to this context's start.
    pub fn rename(&self, old: impl AsRef<[u8]>, new: impl AsRef<[u8]>, flags: RenameFlags) -> VfsResult<()> {
        self.names.rename(old.as_ref(), &self.names, new.as_ref(), flags)
    }

    /// `renameat2(2)` with `new` relative to directory `new_start` (a
    /// second `dirfd`); ENOTDIR if it is not a directory.
    pub fn renameat(
        &self,
        old: impl AsRef<[u8]>,
        new_start: &Arc<Inode>,
        new: impl AsRef<[u8]>,
        flags: RenameFlags,
    ) -> VfsResult<()> {
        new_start.dir()?;
        let to = Ctx { cwd: new_start, ..self.names };
        self.names.rename(old.as_ref(), &to, new.as_ref(), flags)
    }

    /// `link(2)`: `new` becomes another name of `old` (a final symlink in
    /// `old` is not followed, as in Linux).
    pub fn link(&self, old: impl AsRef<[u8]>, new: impl AsRef<[u8]>) -> VfsResult<()> {
        self.names.link(old.as_ref(), &self.names, new.as_ref())
    }

    /// `linkat(2)` with `new` relative to directory `new_start`; ENOTDIR if
    /// it is not a directory.
    pub fn linkat(&self, old: impl AsRef<[u8]>, new_start: &Arc<Inode>, new: impl AsRef<[u8]>) -> VfsResult<()> {
        new_start.dir()?;
        let to = Ctx { cwd: new_start, ..self.names };
        self.names.link(old.as_ref(), &to, new.as_ref())
    }

    /// `symlink(2)`: creates `path` pointing at `target`.
    pub fn symlink(&self, target: impl AsRef<[u8]>, path: impl AsRef<[u8]>) -> VfsResult<()> {
        self.names.symlink(target.as_ref(), path.as_ref())
    }

    /// `readlink(2)`.
    pub fn readlink(&self, path: impl AsRef<[u8]>) -> VfsResult<Vec<u8>> {
        self.names.readlink(path.as_ref())
    }

    /// `chmod(2)`.
    pub fn chmod(&self, path: impl AsRef<[u8]>, perm: u32) -> VfsResult<()> {
        self.names.chmod(path.as_ref(), perm)
    }

    /// `chown(2)` (`follow`) or `lchown(2)`; `None` leaves an id unchanged
    /// (like -1).
    pub fn chown(&self, path: impl AsRef<[u8]>, uid: Option<u32>, gid: Option<u32>, follow: bool) -> VfsResult<()> {
        self.names.chown(path.as_ref(), uid, gid, intent(follow))
    }

    /// `utimensat(2)`, following a final symlink if `follow`.
    pub fn utimens(&self, path: impl AsRef<[u8]>, atime: SetTime, mtime: SetTime, follow: bool) -> VfsResult<()> {
        self.names.utimens(path.as_ref(), atime, mtime, intent(follow))
    }

    /// `truncate(2)`: needs write permission on the file.
    pub fn truncate(&self, path: impl AsRef<[u8]>, len: i64) -> VfsResult<()> {
        let inode = self.names.lookup(path.as_ref(), Intent::Follow)?;
        crate::notify_change::truncate(&inode, self.names.cred, len, self.vfs.config().max_file_size)
    }

    /// Changes the attributes `attr` names on `inode`, in the order and
    /// with the checks of the matching system calls (`truncate`, `chown`,
    /// `chmod`, `utimensat`) — Linux's `notify_change`, for front ends that
    /// address files by inode (FUSE `setattr`).
    pub fn setattr(&self, inode: &Inode, attr: SetAttr) -> VfsResult<()> {
        crate::notify_change::setattr(inode, self.names.cred, attr, self.vfs.config().max_file_size)
    }

    /// `getxattr(2)` (`follow`) or `lgetxattr(2)`: the value's length, with
    /// the value copied into `buf` unless `buf` is empty. See
    /// [`crate::xattr`] for the rules.
    pub fn getxattr(&self, path: impl AsRef<[u8]>, follow: bool, name: &[u8], buf: &mut [u8]) -> VfsResult<usize> {
        crate::xattr::check_name(name)?;
        crate::xattr::get(&*self.names.lookup(path.as_ref(), intent(follow))?, self.names.cred, name, buf)
    }

    /// `getxattr` on an inode.
    pub fn getxattr_inode(&self, inode: &Inode, name: &[u8], buf: &mut [u8]) -> VfsResult<usize> {
        crate::xattr::check_name(name)?;
        crate::xattr::get(inode, self.names.cred, name, buf)
    }

    /// `setxattr(2)` (`follow`) or `lsetxattr(2)`; `flags` is 0,
    /// [`XATTR_CREATE`](crate::xattr::XATTR_CREATE) or
    /// [`XATTR_REPLACE`](crate::xattr::XATTR_REPLACE).
    pub fn setxattr(
        &self,
        path: impl AsRef<[u8]>,
        follow: bool,
        name: &[u8],
        value: &[u8],
        flags: i32,
    ) -> VfsResult<()> {
        crate::xattr::check_set_args(name, value, flags)?;
        self.set_xattr(&*self.names.lookup(path.as_ref(), intent(follow))?, name, Some(value), flags)
    }

    /// `setxattr` on an inode.
    pub fn setxattr_inode(&self, inode: &Inode, name: &[u8], value: &[u8], flags: i32) -> VfsResult<()> {
        crate::xattr::check_set_args(name, value, flags)?;
        self.set_xattr(inode, name, Some(value), flags)
    }

    /// `listxattr(2)` (`follow`) or `llistxattr(2)`: the names, each ending
    /// in a NUL, as [`getxattr`](Self::getxattr) fills `buf`.
    pub fn listxattr(&self, path: impl AsRef<[u8]>, follow: bool, buf: &mut [u8]) -> VfsResult<usize> {
        crate::xattr::list(&*self.names.lookup(path.as_ref(), intent(follow))?, self.names.cred, buf)
    }

    /// `listxattr` on an inode.
    pub fn listxattr_inode(&self, inode: &Inode, buf: &mut [u8]) -> VfsResult<usize> {
        crate::xattr::list(inode, self.names.cred, buf)
    }

    /// `removexattr(2)` (`follow`) or `lremovexattr(2)`.
    pub fn removexattr(&self, path: impl AsRef<[u8]>, follow: bool, name: &[u8]) -> VfsResult<()> {
        crate::xattr::check_name(name)?;
        self.set_xattr(&*self.names.lookup(path.as_ref(), intent(follow))?, name, None, 0)
    }

    /// `removexattr` on an inode.
    pub fn removexattr_inode(&self, inode: &Inode, name: &[u8]) -> VfsResult<()> {
        crate::xattr::check_name(name)?;
        self.set_xattr(inode, name, None, 0)
    }

    /// Sets (`value` given) or removes an attribute whose arguments were
    /// checked, charging its space to the instance.
    fn set_xattr(&self, inode: &Inode, name: &[u8], value: Option<&[u8]>, flags: i32) -> VfsResult<()> {
        let charge = |delta| self.vfs.sb.charge_ispace(delta);
        crate::xattr::set(inode, self.names.cred, name, value, flags, &charge)
    }
}
