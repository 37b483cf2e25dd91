//! Record locks through the mount: the kernel forwards `fcntl` locks
//! (POSIX and OFD; the mount requests `FUSE_POSIX_LOCKS`) and vfscale's
//! lock manager decides them. `flock` locks the kernel keeps itself.
//!
//! Invariant: each kernel lock owner (a request's `lock_owner`) maps to one
//! vfscale lock owner id ([`Pid`], from [`new_pid`]), which owns the
//! owner's locks, for as long as it
//! may hold a lock or wait for one: an owner leaves the table only while it
//! has no lock in the lock manager and no wait in flight, so no lock is ever
//! left under a pid no one maps to. A blocking request (`F_SETLKW`) waits
//! on a thread of its own, so the request threads are never stalled by a
//! lock holder. The table's mutex is held across the non-blocking part of
//! every request, which serializes the lock requests of one mount and keeps
//! an owner from being removed while it takes a lock; removing one scans
//! the instance's lock list.
//!
//! Ownership as Linux's FUSE sends it: for a POSIX lock the owner is the
//! caller's file table, whose locks go at `flush` (any close of the file);
//! for an OFD lock it is the open file, whose locks go at its `release`.
//!
//! Why `flock` stays in the kernel: fuser 0.18 drops the `FUSE_LK_FLOCK`
//! flag, so a forwarded `flock` would look like a whole-file record lock
//! and conflict with `fcntl` locks, and `F_GETLK` would report it. Without
//! `FUSE_FLOCK_LOCKS` the kernel applies `flock` to the mount's inode as on
//! any local filesystem: independent of record locks, with upgrades,
//! downgrades and interruptible waits exactly as tmpfs. The cost: `flock`
//! locks are not in vfscale's lock manager (not in its lock list, and not
//! seen by other users of the same VFS instance), which a mount does not
//! share anyway. (Switching to another FUSE crate that passes the flag
//! would keep them in the VFS, at the cost of rewriting the front end.)
//!
//! The kernel sends `RELEASE` after the last `close` has returned, so the
//! OFD locks of a file just closed could still be in the way of the
//! caller's next request; a request that would fail on a conflict while a
//! flushed file's release may be on its way waits for it (briefly, on a
//! thread of its own: see the `releases` module), so that, as on tmpfs,
//! they are gone when `close` has returned.
//!
//! fuser 0.18 does not pass `FUSE_INTERRUPT` on either, so a blocked
//! `F_SETLKW` would not see the signal that interrupts its caller. Each
//! wait therefore watches its caller: while the calling thread has a
//! pending signal it does not block (`/proc/TID/status`), the wait ends
//! with EINTR, which the kernel turns into the `fcntl`'s EINTR (or a
//! restart, under `SA_RESTART`), as on tmpfs. Waits also end with EINTR at
//! unmount.
//!
//! Each blocked `F_SETLKW` costs two threads (the wait and its watcher),
//! so at most [`MAX_BLOCKED_WAITS`] wait at once. Past that a request
//! takes its lock at once if it can, and fails with ENOLCK if it would
//! have to wait, as Linux's `fcntl` does when it runs out of locks.

use crate::releases::Releases;
use std::collections::HashMap;
use std::fmt;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;
use vfscale::locks::{new_pid, CancelToken, Flock, Interrupt, Pid, F_UNLCK};
use vfscale::syscalls::locks::{self as lock_calls, AccessModeCheck, RecordOwner};
use vfscale::{Errno, OpenFile, Vfs, VfsResult};
use vfscale_sync::poison::unpoisoned;

/// Most `F_SETLKW` requests waiting at once, each on two threads of its own.
pub(crate) const MAX_BLOCKED_WAITS: usize = 256;

/// The largest file offset (`OFFSET_MAX`): a lock ending there runs to the
/// end of the file.
const OFFSET_MAX: u64 = i64::MAX as u64;

/// A kernel lock owner as vfscale's lock manager knows it.
struct Owner {
    /// The id its locks are taken under.
    pid: Pid,
    /// The host process that last locked as this owner (the tgid FUSE
    /// passes), reported as the holder by `getlk`.
    host_pid: u32,
    /// Blocking requests of this owner in flight.
    waits: usize,
}

/// The lock owners of one mount.
pub(crate) struct Locks {
    vfs: Vfs,
    owners: Mutex<HashMap<u64, Owner>>,
    /// The lock owners that locked through each open file (by address),
    /// whose locks go when it is released: the kernel keeps no record of
    /// an OFD lock it forwarded, so it sends no unlock for it at close.
    through: Mutex<HashMap<usize, Vec<u64>>>,
    /// The flushed files whose release may be on its way.
    releases: Arc<Releases>,
    /// Cancelled at unmount, ending every blocked wait with EINTR.
    unmount: CancelToken,
    /// Blocked waits in flight, and how many may be.
    waiting: std::sync::atomic::AtomicUsize,
    max_waiting: usize,
}

impl fmt::Debug for Locks {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Locks").field("owners", &self.table().len()).field("unmount", &self.unmount).finish()
    }
}

/// A FUSE lock range (first and last byte, inclusive) as a `struct flock`.
fn flock(typ: i32, start: u64, end: u64) -> VfsResult<Flock> {
    let typ = i16::try_from(typ).map_err(|_| Errno::EINVAL)?;
    if end < start || start > OFFSET_MAX {
        return Err(Errno::EINVAL);
    }
    let len = if end >= OFFSET_MAX { 0 } else { (end - start + 1) as i64 };
    Ok(Flock::new(typ, start as i64, len))
}

/// A `struct flock` range as FUSE's first and last byte.
fn range(lock: &Flock) -> (u64, u64) {
    let start = lock.l_start as u64;
    let end = if lock.l_len == 0 { OFFSET_MAX } else { start + lock.l_len as u64 - 1 };
    (start, end)
}

/// What `getlk` answers: type, first and last byte, holder's host pid.
pub(crate) type Conflict = (i32, u64, u64, u32);

/// Who asks for a blocking lock: the host process (reported by `getlk`)
/// and the thread waiting in the kernel (watched for signals).
#[derive(Debug, Clone, Copy)]
pub(crate) struct Caller {
    pub host_pid: u32,
    pub thread: u32,
}

/// How often a blocked wait looks at its caller's signals.
const SIGNAL_POLL: Duration = Duration::from_millis(20);

/// Whether host thread `tid` has a pending signal it does not block, which
/// makes the kernel interrupt its request; true if the thread is gone.
fn signal_pending(tid: u32) -> bool {
    let Ok(status) = std::fs::read_to_string(format!("/proc/{tid}/status")) else { return true };
    let mask = |field: &str| {
        status
            .lines()
            .find_map(|l| l.strip_prefix(field))
            .and_then(|v| u64::from_str_radix(v.trim(), 16).ok())
            .unwrap_or(0)
    };
    (mask("SigPnd:") | mask("ShdPnd:")) & !mask("SigBlk:") != 0
}

impl Locks {
    pub fn new(vfs: Vfs) -> Arc<Locks> {
        Locks::with_releases(vfs, Releases::default())
    }

    fn with_releases(vfs: Vfs, releases: Releases) -> Arc<Locks> {
        Locks::bounded(vfs, releases, MAX_BLOCKED_WAITS)
    }

    fn bounded(vfs: Vfs, releases: Releases, max_waiting: usize) -> Arc<Locks> {
        Arc::new(Locks {
            vfs,
            owners: Mutex::new(HashMap::new()),
            through: Mutex::new(HashMap::new()),
            releases: Arc::new(releases),
            unmount: CancelToken::new(),
            waiting: std::sync::atomic::AtomicUsize::new(0),
            max_waiting,
        })
    }

    fn table(&self) -> MutexGuard<'_, HashMap<u64, Owner>> {
        unpoisoned(self.owners.lock())
    }

    /// The owner `lock_owner`, given an id on first use; `host_pid` (0:
    /// unknown, as for an unlock) becomes the pid `getlk` reports.
    fn owner<'t>(&self, table: &'t mut HashMap<u64, Owner>, lock_owner: u64, host_pid: u32) -> &'t mut Owner {
        let owner = table.entry(lock_owner).or_insert_with(|| Owner { pid: new_pid(), host_pid, waits: 0 });
        if host_pid != 0 {
            owner.host_pid = host_pid;
        }
        owner
    }

    /// Records that `lock_owner` locks through `file`.
    fn locks_through(&self, file: &OpenFile, lock_owner: u64) {
        let mut through = unpoisoned(self.through.lock());
        let owners = through.entry(file as *const OpenFile as usize).or_default();
        if !owners.contains(&lock_owner) {
            owners.push(lock_owner);
        }
    }

    /// A descriptor of `file` was closed (`flush`): if something locked
    /// through it, its release may follow.
    pub fn flushed(&self, file: &OpenFile) {
        let key = file as *const OpenFile as usize;
        if unpoisoned(self.through.lock()).contains_key(&key) {
            self.releases.flushed(key);
        }
    }

    /// The last descriptor of `file` was closed (`release`): the locks of
    /// every owner that locked through it go (its OFD locks; an owner's
    /// POSIX locks went already at the `flush` of its close).
    pub fn release(&self, file: &OpenFile) {
        let key = file as *const OpenFile as usize;
        let owners = unpoisoned(self.through.lock()).remove(&key);
        let held_locks = owners.is_some();
        for lock_owner in owners.unwrap_or_default() {
            self.close(file, lock_owner);
        }
        self.releases.released(key, held_locks);
    }

    /// Removes `lock_owner` if it holds no lock and waits for none.
    fn prune(&self, table: &mut HashMap<u64, Owner>, lock_owner: u64) {
        let Some(owner) = table.get(&lock_owner) else { return };
        let pid = owner.pid;
        if owner.waits == 0 && !self.vfs.locks().list().iter().any(|l| l.pid == pid) {
            table.remove(&lock_owner);
        }
    }

    /// `F_GETLK` for `lock_owner`: `done` gets the first conflicting
    /// lock, or `None` (from another thread if it waits for a release).
    pub fn getlk(
        self: &Arc<Self>,
        file: Arc<OpenFile>,
        lock_owner: u64,
        (start, end, typ): (u64, u64, i32),
        done: impl FnOnce(VfsResult<Option<Conflict>>) + Send + 'static,
    ) {
        let locks = Arc::clone(self);
        let attempt = move || locks.getlk_once(&file, lock_owner, start, end, typ);
        self.releases.answer(attempt, |r| matches!(r, Ok(Some(_))), done);
    }

    fn getlk_once(
        &self,
        file: &OpenFile,
        lock_owner: u64,
        start: u64,
        end: u64,
        typ: i32,
    ) -> VfsResult<Option<Conflict>> {
        let mut lock = flock(typ, start, end)?;
        let mut table = self.table();
        // An owner not in the table holds nothing; pid 0, which no owner
        // has, stands in.
        let pid = table.get(&lock_owner).map_or(0, |owner| owner.pid);
        lock_calls::getlk(self.vfs.locks(), file, pid, RecordOwner::Posix, &mut lock)?;
        if lock.l_type == F_UNLCK {
            return Ok(None);
        }
        let holder = table.values_mut().find(|o| o.pid == lock.l_pid).map_or(0, |o| o.host_pid);
        let (start, end) = range(&lock);
        Ok(Some((i32::from(lock.l_type), start, end, holder)))
    }

    /// `F_SETLK` for `lock_owner`; `host_pid` is the caller's process.
    /// `done` gets the outcome (from another thread if it waits for a
    /// release).
    pub fn setlk(
        self: &Arc<Self>,
        file: Arc<OpenFile>,
        lock_owner: u64,
        (start, end, typ): (u64, u64, i32),
        host_pid: u32,
        done: impl FnOnce(VfsResult<()>) + Send + 'static,
    ) {
        let locks = Arc::clone(self);
        let attempt = move || locks.setlk_once(&file, lock_owner, start, end, typ, host_pid);
        self.releases.answer(attempt, |r| *r == Err(Errno::EAGAIN), done);
    }

    fn setlk_once(
        &self,
        file: &OpenFile,
        lock_owner: u64,
        start: u64,
        end: u64,
        typ: i32,
        host_pid: u32,
    ) -> VfsResult<()> {
        let lock = flock(typ, start, end)?;
        let mut table = self.table();
        if lock.l_type == F_UNLCK && !table.contains_key(&lock_owner) {
            return Ok(());
        }
        if lock.l_type != F_UNLCK {
            self.locks_through(file, lock_owner);
        }
        let pid = self.owner(&mut table, lock_owner, host_pid).pid;
        let result = self.set(file, pid, &lock, None);
        self.prune(&mut table, lock_owner);
        result
    }

    /// `F_SETLKW` for `lock_owner`: waits on a thread of its own and calls
    /// `done` with the outcome there (at once if the request is invalid);
    /// EINTR once the caller has a signal to take, or at unmount. With
    /// [`MAX_BLOCKED_WAITS`] waiting already, it takes the lock at once or
    /// fails with ENOLCK.
    pub fn setlkw(
        self: &Arc<Self>,
        file: Arc<OpenFile>,
        lock_owner: u64,
        (start, end, typ): (u64, u64, i32),
        caller: Caller,
        done: impl FnOnce(VfsResult<()>) + Send + 'static,
    ) {
        let lock = match flock(typ, start, end) {
            Ok(lock) => lock,
            Err(e) => return done(Err(e)),
        };
        if lock.l_type != F_UNLCK {
            self.locks_through(&file, lock_owner);
        }
        use std::sync::atomic::Ordering::AcqRel;
        if self.waiting.fetch_add(1, AcqRel) >= self.max_waiting {
            self.waiting.fetch_sub(1, AcqRel);
            let mut table = self.table();
            let pid = self.owner(&mut table, lock_owner, caller.host_pid).pid;
            let result = self.set(&file, pid, &lock, None);
            self.prune(&mut table, lock_owner);
            drop(table);
            return done(result.map_err(|e| if e == Errno::EAGAIN { Errno::ENOLCK } else { e }));
        }
        let pid = {
            let mut table = self.table();
            let owner = self.owner(&mut table, lock_owner, caller.host_pid);
            owner.waits += 1;
            owner.pid
        };
        let locks = Arc::clone(self);
        let interrupted = CancelToken::new();
        let finished = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let watcher = {
            let (interrupted, finished, unmount) = (interrupted.clone(), Arc::clone(&finished), self.unmount.clone());
            move || {
                while !finished.load(std::sync::atomic::Ordering::Acquire) {
                    if unmount.is_cancelled() || signal_pending(caller.thread) {
                        interrupted.cancel();
                        return;
                    }
                    std::thread::sleep(SIGNAL_POLL);
                }
            }
        };
        let waiter = move || {
            let intr = Interrupt::never().with_token(&interrupted);
            let result = locks.set(&file, pid, &lock, Some(&intr));
            finished.store(true, std::sync::atomic::Ordering::Release);
            let mut table = locks.table();
            if let Some(owner) = table.get_mut(&lock_owner) {
                owner.waits -= 1;
            }
            locks.prune(&mut table, lock_owner);
            drop(table);
            locks.waiting.fetch_sub(1, AcqRel);
            done(result);
        };
        // Without the threads the reply is dropped, which fuser answers
        // with EIO; the wait count must then be given back here.
        let spawned = std::thread::Builder::new()
            .name("vfscale-setlkw".into())
            .spawn(waiter)
            .and_then(|_| std::thread::Builder::new().name("vfscale-setlkw-signals".into()).spawn(watcher));
        if spawned.is_err() {
            let mut table = self.table();
            if let Some(owner) = table.get_mut(&lock_owner) {
                owner.waits -= 1;
            }
            self.prune(&mut table, lock_owner);
            self.waiting.fetch_sub(1, AcqRel);
        }
    }

    /// `lock_owner` closed a descriptor of `file` (`flush`) or released an
    /// open file it `flock`ed (`release`): its locks on the inode go.
    pub fn close(&self, file: &OpenFile, lock_owner: u64) {
        let mut table = self.table();
        if let Some(owner) = table.get(&lock_owner) {
            lock_calls::posix_close(file, owner.pid);
            self.prune(&mut table, lock_owner);
        }
    }

    /// `F_SETLK` (`wait` `None`) or `F_SETLKW` as owner `pid`, without the
    /// check of the lock type against the open file's access mode: the
    /// kernel made that check for `fcntl` already.
    fn set(&self, file: &OpenFile, pid: Pid, lock: &Flock, wait: Option<&Interrupt<'_>>) -> VfsResult<()> {
        lock_calls::setlk(self.vfs.locks(), file, (pid, RecordOwner::Posix), lock, wait, AccessModeCheck::Skip)
    }

    /// Ends every blocked wait with EINTR (at unmount).
    pub fn cancel_waits(&self) {
        self.unmount.cancel();
    }
}

impl Drop for Locks {
    fn drop(&mut self) {
        self.unmount.cancel();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::mpsc;
    use vfscale::locks::{F_RDLCK, F_WRLCK};
    use vfscale::{Credentials, OpenFlags};
    use vfscale_sync::test_support::wait_until;

    /// Longer than any test takes: a wait for a release or an answer that
    /// runs this out means what should have ended it never came.
    const LONG: Duration = Duration::from_secs(60);

    fn setup() -> (Arc<Locks>, Arc<OpenFile>) {
        let vfs = Vfs::default();
        let file = vfs.process(Credentials::root()).open_description("/f", OpenFlags::CREAT | OpenFlags::RDONLY, 0o644);
        (Locks::with_releases(vfs, Releases::with_grace(LONG)), file.unwrap())
    }

    /// This test's own thread as the caller (no signal pending).
    fn me(host_pid: u32) -> Caller {
        // SAFETY: gettid has no preconditions.
        Caller { host_pid, thread: unsafe { libc::gettid() } as u32 }
    }

    /// What a request that answers through `done` answered.
    fn answered<T: Send + 'static>(ask: impl FnOnce(Box<dyn FnOnce(T) + Send>)) -> T {
        let (tx, rx) = mpsc::channel();
        ask(Box::new(move |r| tx.send(r).unwrap()));
        rx.recv_timeout(2 * LONG).unwrap()
    }

    fn setlk(locks: &Arc<Locks>, file: &Arc<OpenFile>, owner: u64, range: (u64, u64, i32), pid: u32) -> VfsResult<()> {
        answered(|done| locks.setlk(Arc::clone(file), owner, range, pid, done))
    }

    fn getlk(
        locks: &Arc<Locks>,
        file: &Arc<OpenFile>,
        owner: u64,
        range: (u64, u64, i32),
    ) -> VfsResult<Option<Conflict>> {
        answered(|done| locks.getlk(Arc::clone(file), owner, range, done))
    }

    const WR: i32 = F_WRLCK as i32;
    const RD: i32 = F_RDLCK as i32;
    const UN: i32 = F_UNLCK as i32;

    #[test]
    fn ranges_convert_both_ways() {
        assert_eq!(flock(WR, 0, OFFSET_MAX).unwrap(), Flock::new(F_WRLCK, 0, 0));
        assert_eq!(flock(RD, 5, 9).unwrap(), Flock::new(F_RDLCK, 5, 5));
        assert_eq!(range(&Flock::new(F_RDLCK, 5, 5)), (5, 9));
        assert_eq!(range(&Flock::new(F_RDLCK, 5, 0)), (5, OFFSET_MAX));
        assert_eq!(flock(RD, 9, 5), Err(Errno::EINVAL));
        assert_eq!(flock(1 << 20, 0, 1), Err(Errno::EINVAL));
    }

    #[test]
    fn owners_conflict_and_getlk_names_the_host_pid() {
        let (locks, file) = setup();
        setlk(&locks, &file, 1, (0, 9, WR), 111).unwrap();
        assert_eq!(setlk(&locks, &file, 2, (5, 5, RD), 222), Err(Errno::EAGAIN));
        assert_eq!(getlk(&locks, &file, 2, (5, 5, RD)).unwrap(), Some((WR, 0, 9, 111)));
        assert_eq!(getlk(&locks, &file, 1, (5, 5, RD)).unwrap(), None);
        assert_eq!(getlk(&locks, &file, 3, (10, OFFSET_MAX, WR)).unwrap(), None);
        setlk(&locks, &file, 1, (0, OFFSET_MAX, UN), 0).unwrap();
        setlk(&locks, &file, 2, (5, 5, RD), 222).unwrap();
        assert_eq!(locks.table().len(), 1, "owner 1 holds nothing and is gone");
    }

    #[test]
    fn close_drops_the_owners_locks_and_the_owner() {
        let (locks, file) = setup();
        setlk(&locks, &file, 1, (0, 0, WR), 111).unwrap();
        setlk(&locks, &file, 1, (7, 7, WR), 111).unwrap();
        locks.close(&file, 2);
        assert_eq!(locks.table().len(), 1);
        locks.close(&file, 1);
        assert!(locks.table().is_empty());
        assert!(locks.vfs.locks().list().is_empty());
        assert_eq!(setlk(&locks, &file, 9, (0, OFFSET_MAX, UN), 0), Ok(()));
        assert!(locks.table().is_empty());
    }

    #[test]
    fn blocking_waits_run_on_their_own_thread() {
        let (locks, file) = setup();
        setlk(&locks, &file, 1, (0, OFFSET_MAX, WR), 111).unwrap();
        let (tx, rx) = mpsc::channel();
        let tx2 = tx.clone();
        locks.setlkw(Arc::clone(&file), 2, (0, OFFSET_MAX, WR), me(222), move |r| tx.send(r).unwrap());
        assert!(rx.recv_timeout(Duration::from_millis(50)).is_err(), "granted while held");
        locks.close(&file, 1);
        assert_eq!(rx.recv_timeout(LONG).unwrap(), Ok(()));
        locks.setlkw(Arc::clone(&file), 3, (0, 0, RD), me(333), move |r| tx2.send(r).unwrap());
        locks.cancel_waits();
        assert_eq!(rx.recv_timeout(LONG).unwrap(), Err(Errno::EINTR));
        locks.setlkw(file, 4, (3, 1, RD), me(444), |r| assert_eq!(r, Err(Errno::EINVAL)));
        assert_eq!(locks.table().len(), 1, "only owner 2 holds a lock");
    }

    #[test]
    fn release_drops_what_was_locked_through_the_file() {
        let (locks, file) = setup();
        setlk(&locks, &file, 1, (0, 0, WR), 111).unwrap();
        setlk(&locks, &file, 2, (5, 5, WR), 111).unwrap();
        locks.release(&file);
        assert!(locks.vfs.locks().list().is_empty());
        assert!(locks.table().is_empty());
        locks.release(&file);
    }

    #[test]
    fn a_conflict_waits_for_the_release_of_a_flushed_file() {
        let (locks, file) = setup();
        let other =
            Arc::new(locks.vfs.process(Credentials::root()).open_description("/f", OpenFlags::RDONLY, 0).unwrap());
        setlk(&locks, &file, 1, (0, 0, WR), 111).unwrap();
        locks.flushed(&file);
        // The release comes once the conflicting request waits for it.
        let releaser = {
            let (locks, file) = (Arc::clone(&locks), Arc::clone(&file));
            std::thread::spawn(move || {
                wait_until("the request waits for the release", || locks.releases.waiting() > 0);
                locks.release(&file);
            })
        };
        assert_eq!(setlk(&locks, &other, 2, (0, 0, RD), 222), Ok(()), "granted once the release came");
        releaser.join().unwrap();
        assert_eq!(setlk(&locks, &file, 3, (0, 0, WR), 333), Err(Errno::EAGAIN), "an ordinary conflict");
    }

    #[test]
    fn past_the_bound_a_request_locks_at_once_or_fails_with_enolck() {
        let vfs = Vfs::default();
        let file = vfs.process(Credentials::root()).open_description("/f", OpenFlags::CREAT | OpenFlags::RDONLY, 0o644);
        let (locks, file) = (Locks::bounded(vfs, Releases::with_grace(LONG), 1), file.unwrap());
        setlk(&locks, &file, 1, (0, 9, WR), 111).unwrap();
        // The one wait the bound allows.
        let (tx, rx) = mpsc::channel();
        locks.setlkw(Arc::clone(&file), 2, (0, 0, WR), me(222), move |r| tx.send(r).unwrap());
        let set = |owner, range| answered(|done| locks.setlkw(Arc::clone(&file), owner, range, me(333), done));
        assert_eq!(set(3, (5, 5, WR)), Err(Errno::ENOLCK), "it would have to wait");
        assert_eq!(set(3, (20, 29, WR)), Ok(()), "no conflict: taken at once");
        locks.close(&file, 1);
        assert_eq!(rx.recv_timeout(LONG).unwrap(), Ok(()));
        // The waiter's slot came back.
        assert_eq!(locks.waiting.load(std::sync::atomic::Ordering::Acquire), 0);
        let (tx, rx) = mpsc::channel();
        locks.setlkw(Arc::clone(&file), 4, (20, 20, WR), me(444), move |r| tx.send(r).unwrap());
        locks.cancel_waits();
        assert_eq!(rx.recv_timeout(LONG).unwrap(), Err(Errno::EINTR));
    }

    #[test]
    fn a_pending_signal_interrupts_a_wait() {
        let (locks, file) = setup();
        setlk(&locks, &file, 1, (0, OFFSET_MAX, WR), 111).unwrap();
        assert!(!signal_pending(me(0).thread));
        // A thread that is gone counts as interrupted.
        let (tx, rx) = mpsc::channel();
        locks.setlkw(file, 2, (0, 0, WR), Caller { host_pid: 222, thread: u32::MAX }, move |r| tx.send(r).unwrap());
        assert_eq!(rx.recv_timeout(LONG).unwrap(), Err(Errno::EINTR));
    }
}
