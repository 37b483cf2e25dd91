//! Extended attributes, as tmpfs keeps them (Linux `fs/xattr.c`,
//! `simple_xattr`): name-value pairs on an inode, in the `user.`,
//! `trusted.` and `security.` namespaces.
//!
//! Checks come in Linux's order: the name and size first (ERANGE for an
//! empty name or one over [`XATTR_NAME_MAX`], E2BIG for a value over
//! [`XATTR_SIZE_MAX`], EINVAL for unknown flags), then the permission
//! (`xattr_permission`), then the namespace (EOPNOTSUPP for one tmpfs does
//! not keep, including `system.` since ACLs are not kept), then the
//! value's presence (ENODATA, EEXIST).
//!
//! - `user.*`: the inode's read or write permission; only regular files and
//!   directories have them (others: EPERM to write, ENODATA to read); in a
//!   sticky directory only its owner (or a holder of CAP_FOWNER) may write
//!   them.
//! - `trusted.*`: CAP_SYS_ADMIN to read, write or list
//!   (others: EPERM to write, ENODATA to read; listing leaves them out).
//! - `security.*`: anyone reads; CAP_SYS_ADMIN writes.
//!
//! Setting or removing one changes the inode's ctime; a failure changes
//! nothing.
//!
//! Invariant: every value is at most [`XATTR_SIZE_MAX`] bytes and every
//! name at most [`XATTR_NAME_MAX`]; the space they take is charged to the
//! filesystem's inode space (tmpfs's `free_ispace`) while they exist. The
//! storage itself (one map per inode under one lock) is the
//! `xattr_store` module; this one holds the calls and their checks.
//!
//! May import the base modules and the node types.
//!
//! ```
//! use vfscale::xattr::{XATTR_CREATE, XATTR_REPLACE};
//! use vfscale::{Credentials, Errno, OpenFlags, Vfs};
//!
//! let vfs = Vfs::default();
//! let p = vfs.process(Credentials::root());
//! p.close(p.open("/f", OpenFlags::CREAT | OpenFlags::WRONLY, 0o644)?)?;
//! p.setxattr("/f", b"user.origin", b"camera", XATTR_CREATE)?;
//! assert_eq!(p.setxattr("/f", b"user.origin", b"x", XATTR_CREATE), Err(Errno::EEXIST));
//! let mut buf = [0; 64];
//! let n = p.getxattr("/f", b"user.origin", &mut buf)?;
//! assert_eq!(&buf[..n], b"camera");
//! assert_eq!(p.getxattr("/f", b"user.origin", &mut [])?, 6, "an empty buffer asks for the size");
//! assert_eq!(p.getxattr("/f", b"user.origin", &mut [0; 2]), Err(Errno::ERANGE));
//! let n = p.listxattr("/f", &mut buf)?;
//! assert_eq!(&buf[..n], b"user.origin\0");
//! p.removexattr("/f", b"user.origin")?;
//! assert_eq!(p.setxattr("/f", b"user.origin", b"x", XATTR_REPLACE), Err(Errno::ENODATA));
//! assert_eq!(p.setxattr("/f", b"os2.name", b"x", 0), Err(Errno::EOPNOTSUPP));
//! # Ok::<(), Errno>(())
//! ```

use crate::cred::{Access, Capabilities};
use crate::errno::{Errno, VfsResult};
use crate::inode::Inode;
use crate::mode::S_ISVTX;
use crate::types::FileType;
use crate::xattr_store::space;
use crate::Credentials;

/// `setxattr` flag: fail with EEXIST if the attribute exists.
pub const XATTR_CREATE: i32 = 1;
/// `setxattr` flag: fail with ENODATA unless the attribute exists.
pub const XATTR_REPLACE: i32 = 2;
/// Longest name, prefix included (Linux `XATTR_NAME_MAX`).
pub const XATTR_NAME_MAX: usize = 255;
/// Largest value (Linux `XATTR_SIZE_MAX`).
pub const XATTR_SIZE_MAX: usize = 65536;
/// Largest list `listxattr` returns (Linux `XATTR_LIST_MAX`).
pub const XATTR_LIST_MAX: usize = 65536;

/// The namespaces tmpfs keeps.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Namespace {
    User,
    Trusted,
    Security,
    /// `system.`, and any other prefix: kept by no handler here.
    Other,
}

fn namespace(name: &[u8]) -> Namespace {
    if name.starts_with(b"user.") {
        Namespace::User
    } else if name.starts_with(b"trusted.") {
        Namespace::Trusted
    } else if name.starts_with(b"security.") {
        Namespace::Security
    } else {
        Namespace::Other
    }
}

/// The checks `setxattr(2)` and friends make on the name before the path
/// is looked up.
pub(crate) fn check_name(name: &[u8]) -> VfsResult<()> {
    if name.is_empty() || name.len() > XATTR_NAME_MAX || name.contains(&0) {
        return Err(Errno::ERANGE);
    }
    Ok(())
}

/// The checks `setxattr(2)` makes on its arguments before the lookup.
pub(crate) fn check_set_args(name: &[u8], value: &[u8], flags: i32) -> VfsResult<()> {
    if flags & !(XATTR_CREATE | XATTR_REPLACE) != 0 {
        return Err(Errno::EINVAL);
    }
    check_name(name)?;
    if value.len() > XATTR_SIZE_MAX {
        return Err(Errno::E2BIG);
    }
    Ok(())
}

/// Linux `xattr_permission`, then the namespace's own capability rule
/// (`cap_inode_setxattr` for `security.`).
fn permission(inode: &Inode, cred: &Credentials, name: &[u8], write: bool) -> VfsResult<()> {
    let denied = if write { Errno::EPERM } else { Errno::ENODATA };
    match namespace(name) {
        Namespace::Security if write && !cred.capable(Capabilities::SYS_ADMIN) => Err(Errno::EPERM),
        Namespace::Security => Ok(()),
        _ if name.starts_with(b"system.") => Ok(()),
        Namespace::Trusted if !cred.capable(Capabilities::SYS_ADMIN) => Err(denied),
        Namespace::Trusted => Ok(()),
        ns => {
            if ns == Namespace::User {
                match inode.file_type() {
                    FileType::Regular => {}
                    FileType::Directory => {
                        if inode.mode() & S_ISVTX != 0 && write && !cred.owner_or_capable(inode.owner().0) {
                            return Err(Errno::EPERM);
                        }
                    }
                    _ => return Err(denied),
                }
            }
            inode.permission(cred, if write { Access::WRITE } else { Access::READ })
        }
    }
}

/// The namespace check of `xattr_resolve_name`: EOPNOTSUPP for a prefix
/// no handler keeps, EINVAL for a known prefix with nothing after it.
fn resolve(name: &[u8]) -> VfsResult<()> {
    let prefix_len = match namespace(name) {
        Namespace::User => 5,
        Namespace::Trusted => 8,
        Namespace::Security => 9,
        Namespace::Other => return Err(Errno::EOPNOTSUPP),
    };
    if name.len() == prefix_len {
        return Err(Errno::EINVAL);
    }
    Ok(())
}

/// `getxattr` on an inode: the value's length, copied into `buf` unless
/// `buf` is empty (then only its length); ERANGE if it does not fit.
pub(crate) fn get(inode: &Inode, cred: &Credentials, name: &[u8], buf: &mut [u8]) -> VfsResult<usize> {
    permission(inode, cred, name, false)?;
    resolve(name)?;
    inode.xattrs.read(&crossbeam_epoch::pin(), |map| {
        let value = map.get(name).ok_or(Errno::ENODATA)?;
        if buf.is_empty() {
            return Ok(value.len());
        }
        if buf.len() < value.len() {
            return Err(if buf.len() >= XATTR_SIZE_MAX { Errno::E2BIG } else { Errno::ERANGE });
        }
        buf[..value.len()].copy_from_slice(value);
        Ok(value.len())
    })
}

/// `listxattr` on an inode: the names the caller may see, each followed by
/// a NUL, as with [`get`] for the buffer.
pub(crate) fn list(inode: &Inode, cred: &Credentials, buf: &mut [u8]) -> VfsResult<usize> {
    let mut out = Vec::new();
    inode.xattrs.read(&crossbeam_epoch::pin(), |map| {
        for name in map.keys() {
            if namespace(name) == Namespace::Trusted && !cred.capable(Capabilities::SYS_ADMIN) {
                continue;
            }
            out.extend_from_slice(name);
            out.push(0);
        }
    });
    if buf.is_empty() {
        return Ok(out.len());
    }
    if buf.len() < out.len() {
        return Err(if buf.len() >= XATTR_LIST_MAX { Errno::E2BIG } else { Errno::ERANGE });
    }
    buf[..out.len()].copy_from_slice(&out);
    Ok(out.len())
}

/// The checks of [`set`] that take no lock, on reads alone: permission,
/// the namespace, and the name's presence in the published attributes
/// against `flags` (`setting` for a `setxattr`, else a `removexattr`). A
/// change that fails them fails with no line written; one that passes
/// goes on to [`set`], which checks the presence again under its lock.
pub(crate) fn may_set(inode: &Inode, cred: &Credentials, name: &[u8], setting: bool, flags: i32) -> VfsResult<()> {
    permission(inode, cred, name, true)?;
    resolve(name)?;
    let present = inode.xattrs.read(&crossbeam_epoch::pin(), |map| map.contains_key(name));
    refused(setting, present, flags).map_or(Ok(()), Err)
}

/// Why a `setxattr` (`setting`) or `removexattr` of a name that is
/// `present` or not fails, given its `flags`: EEXIST for `XATTR_CREATE` of
/// a present name, ENODATA for `XATTR_REPLACE` or a removal of a missing
/// one.
fn refused(setting: bool, present: bool, flags: i32) -> Option<Errno> {
    match (setting, present) {
        (true, true) if flags & XATTR_CREATE != 0 => Some(Errno::EEXIST),
        (true, false) if flags & XATTR_REPLACE != 0 => Some(Errno::ENODATA),
        (false, false) => Some(Errno::ENODATA),
        _ => None,
    }
}

/// `setxattr` (`value` given) or `removexattr` (`None`) on an inode, the
/// arguments already checked and [`may_set`] passed (its presence check is
/// made again here, under the attributes' lock); `charge` takes (positive)
/// or gives back (negative) inode space, failing with ENOSPC when none is
/// left.
pub(crate) fn set(
    inode: &Inode,
    name: &[u8],
    value: Option<&[u8]>,
    flags: i32,
    charge: &dyn Fn(i64) -> VfsResult<()>,
) -> VfsResult<()> {
    inode.xattrs.change(|map| {
        let old = map.get(name).map(|v| space(name, v.len()) as i64);
        if let Some(refused) = refused(value.is_some(), old.is_some(), flags) {
            return Err(refused);
        }
        let new = value.map_or(0, |v| space(name, v.len()) as i64);
        charge(new - old.unwrap_or(0))?;
        match value {
            Some(value) => map.insert(name.into(), value.into()),
            None => map.remove(name),
        };
        Ok(())
    })?;
    inode.touch_ctime();
    Ok(())
}
