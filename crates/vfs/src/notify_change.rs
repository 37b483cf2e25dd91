//! Attribute changes: `chmod`, `chown`, `utimensat` and `truncate` on an
//! inode, with Linux's checks in Linux's order (`notify_change`,
//! `setattr_prepare`). The path calls resolve the inode first (the
//! `namespace` and `syscalls` modules); a front end that addresses files
//! by inode calls [`setattr`] directly.
//!
//! Invariant: a change is all or nothing. Every check is made against the
//! attributes as they are before anything changes, and only then is
//! anything applied, so a refused `setattr` leaves the inode exactly as it
//! was. A change holds the inode's lock for attribute changes from its
//! checks to its last update, as Linux's `setattr` holds `i_rwsem`, so
//! of two each is checked against what the other left. Others change
//! the mode without it (a write, `ftruncate` or `O_TRUNC` open clearing
//! set-id bits, a filesystem refreshing an inode), so the ids and mode
//! change first (with the set-id bits a truncate clears), in one update
//! of the inode's attributes (under its seqlock), so `stat` sees them
//! whole, and only if they are still those the checks read (else the
//! whole change is checked again); then the size and the times, in one
//! update of the other cell, under the file's data writer lock where a
//! size is named (an `ftruncate` or an `O_TRUNC` open, which takes no
//! lock of this module's, lands before or after both).
//!
//! May import the base modules, the node types, `file` (for a size
//! change) and `dirlock` (for a directory's mode or owner).

use crate::cred::{may_chmod, may_chown, Access, Credentials};
use crate::dirlock::WholeDir;
use crate::errno::{Errno, VfsResult};
use crate::inode::{without_privileges, Body, ContentAttrs, Inode, MetaAttrs};
use crate::pages::PageMap;
use crate::time::Timespec;
use crate::types::{SetAttr, SetTime};

/// Changes the attributes `attr` names on `inode`, with the checks of the
/// matching system calls (`truncate`, `chown`, `chmod`, `utimensat`), all
/// made before any change: Linux's `notify_change`. `max_file_size`
/// bounds a size.
pub(crate) fn setattr(inode: &Inode, cred: &Credentials, attr: SetAttr, max_file_size: u64) -> VfsResult<()> {
    let chown = attr.uid.is_some() || attr.gid.is_some();
    apply(inode, cred, attr, chown, max_file_size)
}

/// [`setattr`], with `chown` saying whether the call is a `chown`: one
/// that names no id still clears set-id bits (Linux's `ATTR_KILL_SUID`),
/// with the check that goes with it.
fn apply(inode: &Inode, cred: &Credentials, attr: SetAttr, chown: bool, max_file_size: u64) -> VfsResult<()> {
    // One change after another, checks and all (Linux's `setattr` under
    // `i_rwsem`): of two, each is checked against what the other left.
    let _attrs = inode.lock_attrs();
    // A directory's mode and owner decide who may change its names: their
    // change, checks and all, holds every name of it (Linux holds the
    // directory's `i_rwsem`), so a create, link, unlink or rename in it,
    // which checks them under its name's lock, sees them before or after.
    let _names = (chown || attr.mode.is_some()).then(|| inode.dir().ok().map(WholeDir::lock)).flatten();
    let (resize, times) = loop {
        let before = inode.meta();
        let resize = attr.size.map(|len| may_truncate(inode, cred, len, max_file_size)).transpose()?;
        let owner_mode = match chown {
            false => None,
            true => Some(may_chown(before.mode, before.uid, before.gid, cred, attr.uid, attr.gid)?),
        };
        let mode = attr.mode.map(|perm| may_chmod_inode(inode, &before, cred, perm)).transpose()?;
        let times = may_set_times(inode, &before, cred, attr.atime, attr.mtime)?;
        #[cfg(test)]
        crate::test_pause::pause_at(crate::test_pause::Point::AttrCommit, &inode.ino().to_le_bytes());
        // A truncate's set-id bits to clear (Linux's kill flags, judged
        // on the file before the change, and never beside a new mode),
        // cleared in the same update as the owner.
        let killed = match resize {
            Some(_) if mode.is_none() => before.mode & !without_privileges(before.mode, before.gid, cred),
            _ => 0,
        };
        if owner_mode.is_none() && mode.is_none() && killed == 0 {
            break (resize, times);
        }
        let now = Timespec::now();
        let mut landed = false;
        inode.update_meta(|a| {
            // Checked against `before`: a change of the mode or owner
            // since by what takes no lock of this module's (a write
            // clearing set-id bits) sends this one back to its checks,
            // before anything of it has landed.
            if (a.mode, a.uid, a.gid) != (before.mode, before.uid, before.gid) {
                return;
            }
            landed = true;
            if let Some(cleared) = owner_mode {
                a.mode = cleared;
                a.uid = attr.uid.unwrap_or(a.uid);
                a.gid = attr.gid.unwrap_or(a.gid);
            }
            if let Some(mode) = mode {
                a.mode = mode;
            }
            a.mode &= !killed;
            a.ctime = now;
        });
        if landed {
            break (resize, times);
        }
    };
    // A size checked above cannot fail now (`may_truncate` made the one
    // check `truncate_data` makes), so the change stays all or nothing; its
    // set-id bits were cleared above. The times land in the same update
    // as the size, after the truncate's own, so that none goes back.
    let sets_mtime = times && attr.mtime != SetTime::Omit;
    let set_times = |a: &mut ContentAttrs, now: Timespec| {
        let resolve = |t: SetTime, old: Timespec| match t {
            SetTime::Now => now,
            SetTime::Omit => old,
            SetTime::At(t) => t,
        };
        a.atime = resolve(attr.atime, a.atime);
        a.mtime = resolve(attr.mtime, a.mtime);
        a.ctime = now;
    };
    match resize {
        Some((data, len)) => {
            crate::file::truncate_then(inode, data, len, max_file_size, None, sets_mtime, |a, now| {
                if times {
                    set_times(a, now);
                }
            })?
        }
        None if times => inode.update_content_setting(sets_mtime, |a| set_times(a, Timespec::now())),
        None => {}
    }
    Ok(())
}

/// `truncate(2)` on an inode: needs write permission; EINVAL for a
/// negative length or a file that is not regular (EISDIR: a directory),
/// EFBIG past `max_file_size`.
pub(crate) fn truncate(inode: &Inode, cred: &Credentials, len: i64, max_file_size: u64) -> VfsResult<()> {
    setattr(inode, cred, SetAttr { size: Some(len), ..SetAttr::default() }, max_file_size)
}

/// `chmod` on an inode: its owner or a holder of CAP_FOWNER only; a
/// symlink's mode never changes (EOPNOTSUPP, Linux 6.6's `notify_change`).
pub(crate) fn chmod(inode: &Inode, cred: &Credentials, perm: u32) -> VfsResult<()> {
    setattr(inode, cred, SetAttr { mode: Some(perm), ..SetAttr::default() }, u64::MAX)
}

/// `chown` on an inode; `None` leaves an id unchanged.
pub(crate) fn chown(inode: &Inode, cred: &Credentials, uid: Option<u32>, gid: Option<u32>) -> VfsResult<()> {
    apply(inode, cred, SetAttr { uid, gid, ..SetAttr::default() }, true, u64::MAX)
}

/// `utimensat` on an inode: explicit times need ownership (or CAP_FOWNER);
/// `UTIME_NOW` for both also allows anyone with write permission.
pub(crate) fn set_times(inode: &Inode, cred: &Credentials, atime: SetTime, mtime: SetTime) -> VfsResult<()> {
    setattr(inode, cred, SetAttr { atime, mtime, ..SetAttr::default() }, u64::MAX)
}

/// The checks of a size change: the pages to resize and the new size.
fn may_truncate<'i>(
    inode: &'i Inode,
    cred: &Credentials,
    len: i64,
    max_file_size: u64,
) -> VfsResult<(&'i PageMap, u64)> {
    if len < 0 {
        return Err(Errno::EINVAL);
    }
    let Body::Regular(data) = &inode.body else {
        return Err(if inode.is_dir() { Errno::EISDIR } else { Errno::EINVAL });
    };
    inode.permission(cred, Access::WRITE)?;
    let len = len as u64;
    if len > max_file_size {
        return Err(Errno::EFBIG);
    }
    Ok((data, len))
}

/// The checks of a mode change: the st_mode to store.
fn may_chmod_inode(inode: &Inode, before: &MetaAttrs, cred: &Credentials, perm: u32) -> VfsResult<u32> {
    if inode.symlink_target().is_some() {
        return Err(Errno::EOPNOTSUPP);
    }
    may_chmod(before.mode, before.uid, before.gid, cred, perm)
}

/// The checks of a times change: whether there is one.
fn may_set_times(
    inode: &Inode,
    before: &MetaAttrs,
    cred: &Credentials,
    atime: SetTime,
    mtime: SetTime,
) -> VfsResult<bool> {
    if atime == SetTime::Omit && mtime == SetTime::Omit {
        return Ok(false);
    }
    if !cred.owner_or_capable(before.uid) {
        let only_now = matches!((atime, mtime), (SetTime::Now | SetTime::Omit, SetTime::Now | SetTime::Omit));
        if !only_now {
            return Err(Errno::EPERM);
        }
        inode.permission(cred, Access::WRITE)?;
    }
    Ok(true)
}
