//! Attribute changes: `chmod`, `chown`, `utimensat` and `truncate` on an
//! inode, with Linux's checks in Linux's order (`notify_change`,
//! `setattr_prepare`). The path calls resolve the inode first (the
//! `namespace` and `syscalls` modules); a front end that addresses files
//! by inode calls [`setattr`] directly.
//!
//! Invariant: each change is one update of the inode's attributes (under
//! its seqlock), so `stat` sees it whole; a failed check changes nothing.
//! May import the base modules, the node types and `file` (for a size
//! change).

use crate::cred::{may_chmod, may_chown, Access, Credentials};
use crate::errno::{Errno, VfsResult};
use crate::inode::{Body, Inode};
use crate::time::Timespec;
use crate::types::{SetAttr, SetTime};

/// Changes the attributes `attr` names on `inode`, in the order and with
/// the checks of the matching system calls (`truncate`, `chown`, `chmod`,
/// `utimensat`): Linux's `notify_change`. `max_file_size` bounds a size.
pub(crate) fn setattr(inode: &Inode, cred: &Credentials, attr: SetAttr, max_file_size: u64) -> VfsResult<()> {
    if let Some(len) = attr.size {
        truncate(inode, cred, len, max_file_size)?;
    }
    if attr.uid.is_some() || attr.gid.is_some() {
        chown(inode, cred, attr.uid, attr.gid)?;
    }
    if let Some(perm) = attr.mode {
        chmod(inode, cred, perm)?;
    }
    set_times(inode, cred, attr.atime, attr.mtime)
}

/// `truncate(2)` on an inode: needs write permission; EINVAL for a
/// negative length or a file that is not regular (EISDIR: a directory).
pub(crate) fn truncate(inode: &Inode, cred: &Credentials, len: i64, max_file_size: u64) -> VfsResult<()> {
    if len < 0 {
        return Err(Errno::EINVAL);
    }
    let Body::Regular(data) = &inode.body else {
        return Err(if inode.is_dir() { Errno::EISDIR } else { Errno::EINVAL });
    };
    inode.permission(cred, Access::WRITE)?;
    crate::file::truncate_data(inode, data, len as u64, max_file_size, cred)
}

/// `chmod` on an inode: owner or root only; a symlink's mode never
/// changes (EOPNOTSUPP, Linux 6.6's `notify_change`).
pub(crate) fn chmod(inode: &Inode, cred: &Credentials, perm: u32) -> VfsResult<()> {
    if inode.symlink_target().is_some() {
        return Err(Errno::EOPNOTSUPP);
    }
    let a = inode.attrs();
    let mode = may_chmod(a.mode, a.uid, a.gid, cred, perm)?;
    let now = Timespec::now();
    inode.update_attrs(|a| {
        a.mode = mode;
        a.ctime = now;
    });
    Ok(())
}

/// `chown` on an inode; `None` leaves an id unchanged.
pub(crate) fn chown(inode: &Inode, cred: &Credentials, uid: Option<u32>, gid: Option<u32>) -> VfsResult<()> {
    let a = inode.attrs();
    let mode = may_chown(a.mode, a.uid, a.gid, cred, uid, gid)?;
    let now = Timespec::now();
    inode.update_attrs(|a| {
        a.mode = mode;
        a.uid = uid.unwrap_or(a.uid);
        a.gid = gid.unwrap_or(a.gid);
        a.ctime = now;
    });
    Ok(())
}

/// `utimensat` on an inode: explicit times need ownership (or root);
/// `UTIME_NOW` for both also allows anyone with write permission.
pub(crate) fn set_times(inode: &Inode, cred: &Credentials, atime: SetTime, mtime: SetTime) -> VfsResult<()> {
    if atime == SetTime::Omit && mtime == SetTime::Omit {
        return Ok(());
    }
    let a = inode.attrs();
    let owner = cred.uid() == a.uid || cred.is_root();
    if !owner {
        let only_now = matches!((atime, mtime), (SetTime::Now | SetTime::Omit, SetTime::Now | SetTime::Omit));
        if !only_now {
            return Err(Errno::EPERM);
        }
        inode.permission(cred, Access::WRITE)?;
    }
    let now = Timespec::now();
    let resolve = |t: SetTime, old: Timespec| match t {
        SetTime::Now => now,
        SetTime::Omit => old,
        SetTime::At(t) => t,
    };
    inode.update_attrs(|a| {
        a.atime = resolve(atime, a.atime);
        a.mtime = resolve(mtime, a.mtime);
        a.ctime = now;
    });
    Ok(())
}
