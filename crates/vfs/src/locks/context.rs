//! One inode's locks (`struct file_lock_context`): its flock, POSIX/OFD
//! and lease lists and the queue of requests waiting on them, under one
//! small spinlock (`flc_lock`).
//!
//! Invariant: every entry of the three lists has its own entry on the
//! system-wide list (its `slot`); a queued waiter names the owner whose
//! lock it waits for, and whenever that owner's locks here shrink, change
//! type or go, the waiter is dequeued (and taken off the wait-for graph)
//! and woken, in queue order. POSIX/OFD entries keep one owner's locks
//! together and sorted (see [`super::range`]), the order Linux keeps, so
//! `F_GETLK` reports the same first conflict.

use super::range::{self, Piece, OFFSET_MAX};
use super::wait::{Interrupt, Waiter};
use super::{
    BlockedEntry, LeaseBreak, LeaseNotifier, LockInfo, LockKind, LockManager, Slot, Sys, F_RDLCK, F_UNLCK, F_WRLCK,
};
use crate::errno::{Errno, VfsResult};
use std::collections::VecDeque;
use std::fmt;
use std::sync::Arc;
use std::time::Instant;
use vfscale_sync::audited::{AtomicBool, Ordering};
use vfscale_sync::spin::{SpinLock, TasLock};

/// Who owns a lock: a process (POSIX locks) or an open file description
/// (flock, OFD locks, leases), named by its address.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Owner {
    Pid(i32),
    File(usize),
}

#[derive(Debug)]
struct FlockEntry {
    file: usize,
    write: bool,
    slot: Slot,
}

#[derive(Debug)]
struct RecordEntry {
    owner: Owner,
    piece: Piece,
    slot: Slot,
}

struct LeaseEntry {
    file: usize,
    pid: i32,
    write: bool,
    /// When a read-only open asked for a downgrade, its deadline.
    downgrade: Option<Instant>,
    /// When a writing open asked for removal, its deadline.
    unlock: Option<Instant>,
    notify: Option<LeaseNotifier>,
    slot: Slot,
}

impl LeaseEntry {
    /// The type the lease is heading for (`target_leasetype`).
    fn target(&self) -> i16 {
        match (self.unlock, self.downgrade, self.write) {
            (Some(_), _, _) => F_UNLCK,
            (None, Some(_), _) | (None, None, false) => F_RDLCK,
            (None, None, true) => F_WRLCK,
        }
    }
}

impl fmt::Debug for LeaseEntry {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("LeaseEntry").field("file", &self.file).field("target", &self.target()).finish_non_exhaustive()
    }
}

#[derive(Debug)]
struct Queued {
    id: u64,
    blocker: Owner,
    waiter: Arc<Waiter>,
}

#[derive(Debug, Default)]
struct Lists {
    flocks: Vec<FlockEntry>,
    records: Vec<RecordEntry>,
    leases: Vec<LeaseEntry>,
    queue: VecDeque<Queued>,
}

/// What one attempt at a request under the locks concluded.
enum Attempt {
    Done(VfsResult<()>),
    /// Sleep on `blocker`'s locks; `posix` is the waiting POSIX owner's pid
    /// (checked for deadlock and put on the wait-for graph).
    Wait {
        blocker: Owner,
        posix: Option<i32>,
        deadline: Option<Instant>,
    },
}

/// A lease holder to notify once the locks are dropped.
type Notice = (LeaseNotifier, LeaseBreak);

pub(crate) struct FileLockContext {
    mgr: Arc<LockManager>,
    ino: u64,
    lists: SpinLock<TasLock, Lists>,
    /// Whether `leases` is non-empty, read without the lock by `open`.
    has_leases: AtomicBool,
}

impl fmt::Debug for FileLockContext {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("FileLockContext").field("ino", &self.ino).finish_non_exhaustive()
    }
}

impl FileLockContext {
    pub(crate) fn new(mgr: Arc<LockManager>, ino: u64) -> Self {
        FileLockContext { mgr, ino, lists: SpinLock::new(Lists::default()), has_leases: AtomicBool::new(false) }
    }

    fn info(&self, kind: LockKind, write: bool, pid: i32, piece: Option<Piece>) -> LockInfo {
        let (start, end) = piece.map_or((0, None), |p| (p.start as u64, (p.end != OFFSET_MAX).then_some(p.end as u64)));
        LockInfo { kind, write, pid, ino: self.ino, start, end }
    }

    /// Runs `attempt` under the locks until it is done, sleeping between
    /// tries on the lock it reports; EINTR if `intr` fires first.
    fn retry(
        &self,
        intr: &Interrupt<'_>,
        mut attempt: impl FnMut(&mut Sys<'_>, &mut Lists, &mut Vec<Notice>) -> Attempt,
    ) -> VfsResult<()> {
        loop {
            let mut notices = Vec::new();
            let outcome = {
                let mut sys = self.mgr.enter();
                let mut lists = self.lists.lock();
                match attempt(&mut sys, &mut lists, &mut notices) {
                    Attempt::Done(result) => Err(result),
                    Attempt::Wait { blocker, posix, deadline } => {
                        let id = self.mgr.next_waiter_id();
                        let deadlock = posix.is_some_and(|pid| {
                            sys.blocked(|g| {
                                let cycle = g.would_deadlock(pid, blocker);
                                if !cycle {
                                    g.blocked.push(BlockedEntry { id, pid, blocker });
                                }
                                cycle
                            })
                        });
                        if deadlock {
                            Err(Err(Errno::EDEADLK))
                        } else {
                            let waiter = Arc::new(Waiter::default());
                            lists.queue.push_back(Queued { id, blocker, waiter: Arc::clone(&waiter) });
                            Ok((id, waiter, deadline))
                        }
                    }
                }
            };
            for (notify, notice) in notices {
                notify(notice);
            }
            let (id, waiter, deadline) = match outcome {
                Ok(wait) => wait,
                Err(result) => return result,
            };
            intr.sleep(&waiter, deadline);
            self.unqueue(id);
            if intr.fired() {
                return Err(Errno::EINTR);
            }
        }
    }

    /// Takes waiter `id` off the queue and the wait-for graph, unless a
    /// waker already did.
    fn unqueue(&self, id: u64) {
        let mut sys = self.mgr.enter();
        let mut lists = self.lists.lock();
        if let Some(pos) = lists.queue.iter().position(|q| q.id == id) {
            lists.queue.remove(pos);
            sys.blocked(|g| g.unblock(id));
        }
    }

    /// Wakes, in queue order, everyone waiting on `owner`'s locks here.
    fn wake(lists: &mut Lists, sys: &mut Sys<'_>, owner: Owner) {
        if lists.queue.iter().all(|q| q.blocker != owner) {
            return;
        }
        let (woken, rest): (VecDeque<Queued>, VecDeque<Queued>) =
            std::mem::take(&mut lists.queue).into_iter().partition(|q| q.blocker == owner);
        lists.queue = rest;
        sys.blocked(|g| g.blocked.retain(|b| !woken.iter().any(|q| q.id == b.id)));
        for q in woken {
            q.waiter.wake();
        }
    }

    /// `flock`: `write` `None` unlocks; `wait` `None` is `LOCK_NB`.
    pub(crate) fn flock(
        &self,
        file: usize,
        pid: i32,
        write: Option<bool>,
        wait: Option<&Interrupt<'_>>,
    ) -> VfsResult<()> {
        let intr = wait.copied().unwrap_or_default();
        self.retry(&intr, |sys, lists, _| {
            if let Some(i) = lists.flocks.iter().position(|f| f.file == file) {
                if Some(lists.flocks[i].write) == write {
                    return Attempt::Done(Ok(()));
                }
                let old = lists.flocks.remove(i);
                sys.remove(old.slot);
                Self::wake(lists, sys, Owner::File(file));
            }
            let Some(write) = write else { return Attempt::Done(Ok(())) };
            match lists.flocks.iter().find(|f| f.write || write) {
                Some(_) if wait.is_none() => Attempt::Done(Err(Errno::EWOULDBLOCK)),
                Some(held) => Attempt::Wait { blocker: Owner::File(held.file), posix: None, deadline: None },
                None => {
                    let slot = sys.insert(self.info(LockKind::Flock, write, pid, None));
                    lists.flocks.push(FlockEntry { file, write, slot });
                    Attempt::Done(Ok(()))
                }
            }
        })
    }

    /// The first lock of another owner that conflicts with the request
    /// (`posix_test_lock`), and its holder's pid (-1 for OFD locks); for
    /// `write` `None` (OFD `F_UNLCK`), the owner's own first lock there.
    pub(crate) fn test_record(&self, owner: Owner, write: Option<bool>, start: i64, end: i64) -> Option<(Piece, i32)> {
        let _sys = self.mgr.enter();
        let lists = self.lists.lock();
        let matches = |r: &&RecordEntry| match write {
            Some(write) => conflicts(r, owner, write, start, end),
            None => r.owner == owner && r.piece.overlaps(start, end),
        };
        lists.records.iter().find(matches).map(|r| {
            let pid = match r.owner {
                Owner::Pid(pid) => pid,
                Owner::File(_) => -1,
            };
            (r.piece, pid)
        })
    }

    /// `F_SETLK`/`F_SETLKW` and the OFD variants: `write` `None` unlocks;
    /// `wait` `None` fails with EAGAIN on a conflict.
    pub(crate) fn set_record(
        &self,
        owner: Owner,
        pid: i32,
        write: Option<bool>,
        start: i64,
        end: i64,
        wait: Option<&Interrupt<'_>>,
    ) -> VfsResult<()> {
        let intr = wait.copied().unwrap_or_default();
        self.retry(&intr, |sys, lists, _| {
            if let Some(write) = write {
                if let Some(held) = lists.records.iter().find(|r| conflicts(r, owner, write, start, end)) {
                    if wait.is_none() {
                        return Attempt::Done(Err(Errno::EAGAIN));
                    }
                    let posix = match owner {
                        Owner::Pid(pid) => Some(pid),
                        Owner::File(_) => None,
                    };
                    return Attempt::Wait { blocker: held.owner, posix, deadline: None };
                }
            }
            self.apply_record(sys, lists, owner, pid, write, start, end);
            Attempt::Done(Ok(()))
        })
    }

    /// Replaces `owner`'s locks by their merge/split with the request,
    /// keeping the list entries of pieces that did not change.
    #[allow(clippy::too_many_arguments)]
    fn apply_record(
        &self,
        sys: &mut Sys<'_>,
        lists: &mut Lists,
        owner: Owner,
        pid: i32,
        write: Option<bool>,
        start: i64,
        end: i64,
    ) {
        let at = lists.records.iter().position(|r| r.owner == owner).unwrap_or(lists.records.len());
        let count = lists.records[at..].iter().take_while(|r| r.owner == owner).count();
        let old: Vec<Piece> = lists.records[at..at + count].iter().map(|r| r.piece).collect();
        let new = range::apply(&old, write, start, end);
        if new == old {
            return;
        }
        let kind = if matches!(owner, Owner::File(_)) { LockKind::Ofd } else { LockKind::Posix };
        let mut removed: Vec<RecordEntry> = lists.records.drain(at..at + count).collect();
        let mut changed = false;
        let entries: Vec<RecordEntry> = new
            .into_iter()
            .map(|piece| match removed.iter().position(|r| r.piece == piece) {
                Some(i) => removed.swap_remove(i),
                None => RecordEntry { owner, piece, slot: sys.insert(self.info(kind, piece.write, pid, Some(piece))) },
            })
            .collect();
        for gone in removed {
            sys.remove(gone.slot);
            changed = true;
        }
        lists.records.splice(at..at, entries);
        if changed {
            Self::wake(lists, sys, owner);
        }
    }

    /// Drops every POSIX/OFD lock of `owner` here.
    pub(crate) fn remove_owner(&self, owner: Owner) {
        let mut sys = self.mgr.enter();
        let mut lists = self.lists.lock();
        if lists.records.iter().any(|r| r.owner == owner) {
            self.apply_record(&mut sys, &mut lists, owner, 0, None, 0, OFFSET_MAX);
        }
    }

    /// The last reference to description `file` went: its flock and OFD
    /// locks and its lease go.
    pub(crate) fn release_file(&self, file: usize) {
        let mut sys = self.mgr.enter();
        let mut lists = self.lists.lock();
        let mut changed = false;
        if let Some(i) = lists.flocks.iter().position(|f| f.file == file) {
            sys.remove(lists.flocks.remove(i).slot);
            changed = true;
        }
        if lists.records.iter().any(|r| r.owner == Owner::File(file)) {
            self.apply_record(&mut sys, &mut lists, Owner::File(file), 0, None, 0, OFFSET_MAX);
        }
        if let Some(i) = lists.leases.iter().position(|l| l.file == file) {
            sys.remove(lists.leases.remove(i).slot);
            self.has_leases.store(!lists.leases.is_empty(), Ordering::SeqCst);
            changed = true;
        }
        if changed {
            Self::wake(&mut lists, &mut sys, Owner::File(file));
        }
    }

    /// Applies lease-break deadlines that have passed (`time_out_leases`):
    /// a lease past its downgrade time becomes a read lease, one past its
    /// break time goes.
    fn time_out_leases(&self, sys: &mut Sys<'_>, lists: &mut Lists) {
        let now = Instant::now();
        let mut i = 0;
        while i < lists.leases.len() {
            let lease = &mut lists.leases[i];
            let file = lease.file;
            if lease.unlock.is_some_and(|t| t <= now) {
                sys.remove(lists.leases.remove(i).slot);
                Self::wake(lists, sys, Owner::File(file));
                continue;
            }
            if lease.downgrade.is_some_and(|t| t <= now) {
                lease.downgrade = None;
                if lease.write {
                    lease.write = false;
                    let pid = lease.pid;
                    let slot = sys.insert(self.info(LockKind::Lease, false, pid, None));
                    sys.remove(std::mem::replace(&mut lists.leases[i].slot, slot));
                }
                Self::wake(lists, sys, Owner::File(file));
            }
            i += 1;
        }
        self.has_leases.store(!lists.leases.is_empty(), Ordering::SeqCst);
    }

    /// `F_SETLEASE`; `conflicting_open(write)` says whether the file is
    /// open in a way that forbids such a lease (`check_conflicting_open`).
    pub(crate) fn setlease(
        &self,
        file: usize,
        pid: i32,
        want: Option<bool>,
        notify: Option<LeaseNotifier>,
        conflicting_open: &dyn Fn(bool) -> bool,
    ) -> VfsResult<()> {
        let mut sys = self.mgr.enter();
        let mut lists = self.lists.lock();
        self.time_out_leases(&mut sys, &mut lists);
        let mine = lists.leases.iter().position(|l| l.file == file);
        let Some(write) = want else {
            let i = mine.ok_or(Errno::EAGAIN)?;
            sys.remove(lists.leases.remove(i).slot);
            self.has_leases.store(!lists.leases.is_empty(), Ordering::SeqCst);
            Self::wake(&mut lists, &mut sys, Owner::File(file));
            return Ok(());
        };
        if conflicting_open(write) {
            return Err(Errno::EAGAIN);
        }
        if lists.leases.iter().any(|l| l.file != file && (write || l.unlock.is_some())) {
            return Err(Errno::EAGAIN);
        }
        if let Some(i) = mine {
            let lease = &mut lists.leases[i];
            if !write {
                lease.downgrade = None;
            }
            if notify.is_some() {
                lease.notify = notify;
            }
            if lease.write != write {
                lease.write = write;
                let slot = sys.insert(self.info(LockKind::Lease, write, pid, None));
                sys.remove(std::mem::replace(&mut lease.slot, slot));
            }
            Self::wake(&mut lists, &mut sys, Owner::File(file));
            return Ok(());
        }
        let slot = sys.insert(self.info(LockKind::Lease, write, pid, None));
        lists.leases.push(LeaseEntry { file, pid, write, downgrade: None, unlock: None, notify, slot });
        self.has_leases.store(true, Ordering::SeqCst);
        // An open that counted itself before our store may have missed the
        // lease; look at the counts again (the other half of that pair).
        if conflicting_open(write) {
            let lease = lists.leases.pop().expect("just pushed");
            sys.remove(lease.slot);
            self.has_leases.store(!lists.leases.is_empty(), Ordering::SeqCst);
            return Err(Errno::EAGAIN);
        }
        Ok(())
    }

    /// `F_GETLEASE`.
    pub(crate) fn getlease(&self, file: usize) -> i16 {
        let mut sys = self.mgr.enter();
        let mut lists = self.lists.lock();
        self.time_out_leases(&mut sys, &mut lists);
        lists.leases.iter().find(|l| l.file == file).map_or(F_UNLCK, LeaseEntry::target)
    }

    /// An `open` (for writing if `writable`) breaks the leases it conflicts
    /// with and waits until they are gone or downgraded, or their break
    /// time passes; EWOULDBLOCK at once for `O_NONBLOCK`, after starting
    /// the break.
    pub(crate) fn break_lease(&self, writable: bool, nonblock: bool) -> VfsResult<()> {
        if !self.has_leases.load(Ordering::SeqCst) {
            return Ok(());
        }
        let mut started = false;
        let break_time = self.mgr.lease_break_time();
        self.retry(&Interrupt::never(), |sys, lists, notices| {
            self.time_out_leases(sys, lists);
            let conflicting = |l: &LeaseEntry| l.write || writable;
            if !lists.leases.iter().any(conflicting) {
                return Attempt::Done(Ok(()));
            }
            if !started {
                started = true;
                let deadline = Instant::now() + break_time;
                for lease in lists.leases.iter_mut().filter(|l| conflicting(l)) {
                    let starts = if writable {
                        lease.unlock.is_none().then(|| lease.unlock = Some(deadline)).is_some()
                    } else {
                        (lease.unlock.is_none() && lease.downgrade.is_none())
                            .then(|| lease.downgrade = Some(deadline))
                            .is_some()
                    };
                    if let (true, Some(notify)) = (starts, &lease.notify) {
                        notices.push((Arc::clone(notify), LeaseBreak { ino: self.ino, target: lease.target() }));
                    }
                }
            }
            if nonblock {
                return Attempt::Done(Err(Errno::EWOULDBLOCK));
            }
            let first = lists.leases.iter().find(|l| conflicting(l)).expect("a conflicting lease");
            Attempt::Wait { blocker: Owner::File(first.file), posix: None, deadline: first.unlock.or(first.downgrade) }
        })
    }
}

fn conflicts(r: &RecordEntry, owner: Owner, write: bool, start: i64, end: i64) -> bool {
    r.owner != owner && r.piece.overlaps(start, end) && (write || r.piece.write)
}
