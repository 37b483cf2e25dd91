//! The file-lock system calls on an open file description: `fcntl`'s
//! record-lock and lease commands and `flock(2)` (Linux `fcntl_setlk`,
//! `fcntl_getlk`, `sys_flock`, `fcntl_setlease` in `fs/locks.c`).
//!
//! They turn a call's arguments (a `struct flock` relative to the file's
//! offset or size, an access mode, a lease type) into the lock engine's
//! owners and byte ranges, and leave the locking to it: the engine
//! ([`crate::locks`]) knows owners only as a [`Pid`] or a [`FileId`](crate::locks::FileId).
//! May import `locks`, `file` and the base modules; descriptors
//! and processes are the caller's ([`crate::Process`] holds the wrappers).

use crate::cred::Credentials;
use crate::errno::{Errno, VfsResult};
use crate::file::OpenFile;
use crate::locks::range;
use crate::locks::{
    FileLockContext, Flock, Interrupt, LeaseNotifier, LockManager, Owner, Pid, F_RDLCK, F_UNLCK, F_WRLCK, LOCK_EX,
    LOCK_NB, LOCK_SH, LOCK_UN,
};
use crate::types::{FileType, OpenFlags};
use std::sync::Arc;

/// Who a record lock belongs to: the calling process (`F_SETLK`, a POSIX
/// lock) or the open file description (`F_OFD_SETLK`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RecordOwner {
    /// The caller's POSIX locks.
    Posix,
    /// The description's own (OFD) locks; `l_pid` must be 0.
    Ofd,
}

/// Whether a record lock's type is checked against the description's
/// access mode (EBADF for a read lock on a description not open for
/// reading, a write lock on one not open for writing).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AccessModeCheck {
    /// As `fcntl(2)` checks it.
    Check,
    /// Already made: FUSE's kernel side checked `fcntl`, and forwards
    /// `flock`, which has no such check, as the same request.
    Skip,
}

/// What a record lock command does: test, set, or set and wait.
#[derive(Debug, Clone, Copy)]
enum RecordCmd<'a> {
    Get,
    Set(Option<&'a Interrupt<'a>>),
}

fn lock_context<'f>(locks: &Arc<LockManager>, file: &'f OpenFile) -> &'f FileLockContext {
    let inode = file.inode();
    inode.locks.context(locks, inode.ino())
}

/// A record lock command on `file`.
fn record(
    locks: &Arc<LockManager>,
    file: &OpenFile,
    pid: Pid,
    who: RecordOwner,
    lock: &Flock,
    cmd: RecordCmd<'_>,
    mode: AccessModeCheck,
) -> VfsResult<Flock> {
    let set = matches!(cmd, RecordCmd::Set(_));
    let (start, end) = range::to_range(
        lock.l_whence,
        lock.l_start,
        lock.l_len,
        || file.position() as i64,
        || file.inode().stat().size as i64,
    )?;
    let write = match lock.l_type {
        F_RDLCK => Some(false),
        F_WRLCK => Some(true),
        // Linux 6.7+: F_OFD_GETLK with F_UNLCK reports the caller's own
        // lock on the range (to see what a description holds).
        F_UNLCK if set || who == RecordOwner::Ofd => None,
        _ => return Err(Errno::EINVAL),
    };
    if mode == AccessModeCheck::Check
        && set
        && (write == Some(false) && !file.is_readable() || write == Some(true) && !file.is_writable())
    {
        return Err(Errno::EBADF);
    }
    let owner = match who {
        RecordOwner::Ofd if lock.l_pid != 0 => return Err(Errno::EINVAL),
        RecordOwner::Ofd => {
            if set && write.is_some() {
                file.mark_ofd_locks();
            }
            Owner::File(file.lock_id())
        }
        RecordOwner::Posix => Owner::Pid(pid),
    };
    let ctx = lock_context(locks, file);
    match cmd {
        RecordCmd::Set(intr) => {
            ctx.set_record(owner, pid, write, start, end, intr)?;
            Ok(*lock)
        }
        RecordCmd::Get => {
            let mut out = *lock;
            match ctx.test_record(owner, write, start, end) {
                None => out.l_type = F_UNLCK,
                Some((piece, holder)) => {
                    let (l_start, l_len) = range::to_start_len(piece.start, piece.end);
                    out = Flock {
                        l_type: if piece.write { F_WRLCK } else { F_RDLCK },
                        l_whence: libc::SEEK_SET as i16,
                        l_start,
                        l_len,
                        l_pid: holder,
                    };
                }
            }
            Ok(out)
        }
    }
}

/// `F_GETLK` / `F_OFD_GETLK` by process `pid`: if a lock of another owner conflicts with
/// `lock`, overwrites it with the first such lock (type, absolute range,
/// holder pid, -1 for an OFD lock); otherwise sets only `l_type` to
/// `F_UNLCK`. EINVAL for `F_UNLCK` (except `F_OFD_GETLK`, Linux 6.7+,
/// which then reports the description's own first lock on the range) or
/// a bad type or range.
pub fn getlk(
    locks: &Arc<LockManager>,
    file: &OpenFile,
    pid: Pid,
    owner: RecordOwner,
    lock: &mut Flock,
) -> VfsResult<()> {
    *lock = record(locks, file, pid, owner, lock, RecordCmd::Get, AccessModeCheck::Check)?;
    Ok(())
}

/// `F_SETLK` (`wait` `None`) or `F_SETLKW` and their OFD forms, by
/// process `pid` (the lock list shows it as the taker): takes, changes or
/// releases `owner`'s lock on the range. EAGAIN if another
/// owner's lock conflicts and `wait` is `None`; with `wait`, EDEADLK if
/// waiting would close a cycle of POSIX owners waiting for each other
/// (OFD owners take no part in deadlock detection, as in Linux), EINTR if
/// the interrupt fires first.
pub fn setlk(
    locks: &Arc<LockManager>,
    file: &OpenFile,
    (pid, owner): (Pid, RecordOwner),
    lock: &Flock,
    wait: Option<&Interrupt<'_>>,
    mode: AccessModeCheck,
) -> VfsResult<()> {
    record(locks, file, pid, owner, lock, RecordCmd::Set(wait), mode).map(drop)
}

/// Process `pid` closed a descriptor of `file`: every POSIX lock it holds
/// on the file goes, whichever descriptor took it (FUSE's `flush`). A
/// [`Process`](crate::Process) calls it on its own closes, only for files
/// it marked before locking them; a caller of [`setlk`] for POSIX owners
/// of its own calls it on each of their closes.
pub fn posix_close(file: &OpenFile, pid: Pid) {
    file.inode().locks.posix_close(pid);
}

/// `flock(fd, op)` as process `pid`: `LOCK_SH`, `LOCK_EX` or `LOCK_UN`,
/// with `LOCK_NB` to fail with EWOULDBLOCK rather than wait; a wait ends
/// with EINTR when `intr` fires. Converting an existing lock first
/// releases it, as in Linux.
pub fn flock(locks: &Arc<LockManager>, file: &OpenFile, pid: Pid, op: i32, intr: &Interrupt<'_>) -> VfsResult<()> {
    let write = match op & !LOCK_NB {
        LOCK_SH => Some(false),
        LOCK_EX => Some(true),
        LOCK_UN => None,
        _ => return Err(Errno::EINVAL),
    };
    let wait = (op & LOCK_NB == 0).then_some(intr);
    lock_context(locks, file).flock(file.lock_id(), file.flock_home(), pid, write, wait)
}

/// `fcntl(fd, F_SETLEASE, arg)` by process `pid` with credentials `cred`:
/// `arg` is `F_RDLCK`, `F_WRLCK` or `F_UNLCK`. EINVAL for another `arg` or
/// a file that is not regular, EACCES unless the caller owns the file or
/// is root, EAGAIN if the file is open in a conflicting way (a read lease:
/// open for writing anywhere; a write lease: open by any other
/// description) or another description holds a conflicting lease, and for
/// `F_UNLCK` without a lease. `notify` is called when an `open` starts
/// breaking the lease (replacing any earlier notifier).
pub fn setlease(
    locks: &Arc<LockManager>,
    cred: &Credentials,
    file: &OpenFile,
    pid: Pid,
    arg: i32,
    notify: Option<LeaseNotifier>,
) -> VfsResult<()> {
    let want = match i16::try_from(arg) {
        Ok(F_RDLCK) => Some(false),
        Ok(F_WRLCK) => Some(true),
        Ok(F_UNLCK) => None,
        _ => return Err(Errno::EINVAL),
    };
    let inode = file.inode();
    if cred.uid() != inode.stat().uid && !cred.capable(crate::cred::Capabilities::LEASE) {
        return Err(Errno::EACCES);
    }
    if inode.file_type() != FileType::Regular {
        return Err(Errno::EINVAL);
    }
    let opens = &inode.opens;
    if want.is_some() {
        opens.note_lease();
    }
    let self_w = u32::from(file.is_writable());
    let self_r = u32::from(!file.is_writable() && file.is_readable());
    let conflicting_open = move |write: bool| {
        if write {
            let (r, w) = opens.counts();
            w != self_w || r != self_r
        } else {
            opens.open_for_write()
        }
    };
    lock_context(locks, file).setlease(file.lock_id(), file.lease_home(), pid, want, notify, &conflicting_open)
}

/// `fcntl(fd, F_GETLEASE)`: the lease `file` holds — `F_RDLCK`, `F_WRLCK`
/// or `F_UNLCK` — or, while it is being broken, the type it must get down
/// to.
pub fn getlease(file: &OpenFile) -> i16 {
    match file.inode().locks.existing() {
        Some(ctx) => ctx.getlease(file.lock_id(), file.lease_home()),
        None => F_UNLCK,
    }
}

/// An `open` of `file`'s inode breaks conflicting leases and waits for
/// them to go, up to the lease-break time (`break_lease`).
pub(crate) fn break_lease(file: &OpenFile) -> VfsResult<()> {
    let inode = file.inode();
    if !inode.opens.maybe_leased() {
        return Ok(());
    }
    inode.locks.break_lease(file.is_writable(), file.flags().contains(OpenFlags::NONBLOCK))
}
