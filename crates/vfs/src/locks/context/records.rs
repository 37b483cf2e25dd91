//! A file's POSIX and OFD record locks in the configured design
//! ([`RecordLocks`]): one list under one lock, Linux's `flc_posix` (the
//! `List` design, and the `Striped` one until it shards), or the stripes
//! of [`super::striped`].
//!
//! Invariant: in one list, each owner's locks are kept together and sorted
//! by start, and an owner whose first lock appears on the file goes to the
//! end, as Linux keeps `flc_posix`, so the first conflict in list order is
//! the lock `F_GETLK` reports. A conversion (merge, split, change of type)
//! is made under the list's lock in one step, never through "unlocked".

use super::striped::{Shards, Striped};
use super::{locked, BlockedEntry, FileLockContext, KindList, Locked, Owner, RecordEntry};
use crate::config::RecordLocks;
use crate::errno::{Errno, VfsResult};
use crate::locks::range::{self, Piece, OFFSET_MAX};
use crate::locks::wait::{Interrupt, Waiter};
use crate::locks::{LockKind, Shared};
use std::sync::Arc;
use vfscale_sync::spin::{SpinLock, TasLock};

/// A file's record locks.
#[derive(Debug)]
pub(super) enum Records {
    /// One list under one lock, for good.
    List(Locked<RecordEntry>),
    /// One list until locks spread over stripes, then stripes.
    Striped(Striped),
}

impl Records {
    pub(super) fn new(design: RecordLocks) -> Records {
        match design {
            RecordLocks::List => Records::List(locked()),
            RecordLocks::Striped { stripe_shift } => Records::Striped(Striped::new(stripe_shift)),
        }
    }
}

/// One record-lock request: `owner` (taken by process `pid`) locks
/// `[start, end]` for writing or reading (`write`), or unlocks it (`None`).
#[derive(Debug, Clone, Copy)]
pub(super) struct Request {
    pub(super) owner: Owner,
    pub(super) pid: i32,
    pub(super) write: Option<bool>,
    pub(super) start: i64,
    pub(super) end: i64,
}

impl Request {
    /// The pid deadlock detection follows for a waiting POSIX owner; none
    /// for an OFD owner, which is never checked (as in Linux).
    pub(super) fn posix_pid(&self) -> Option<i32> {
        match self.owner {
            Owner::Pid(pid) => Some(pid),
            Owner::File(_) => None,
        }
    }

    fn kind(&self) -> LockKind {
        match self.owner {
            Owner::Pid(_) => LockKind::Posix,
            Owner::File(_) => LockKind::Ofd,
        }
    }
}

/// How an attempt on one list ended.
enum Flow {
    Done,
    /// The file's locks moved to stripes: start over there.
    Moved,
}

/// What one attempt at a request under the list's lock concluded.
enum Attempt {
    Done(VfsResult<()>),
    Moved,
    /// Sleep on `blocker`'s locks.
    Wait(Owner),
}

/// Whether `r`, another owner's lock, conflicts with `owner` locking
/// `[start, end]` for writing (`write`) or reading.
pub(super) fn conflicts(r: &RecordEntry, owner: Owner, write: bool, start: i64, end: i64) -> bool {
    r.owner != owner && r.piece.overlaps(start, end) && (write || r.piece.write)
}

/// The holder's pid as `F_GETLK` reports it: -1 for an OFD lock.
pub(super) fn holder_pid(owner: Owner) -> i32 {
    match owner {
        Owner::Pid(pid) => pid,
        Owner::File(_) => -1,
    }
}

impl FileLockContext {
    /// The first lock of another owner that conflicts with the request
    /// (`posix_test_lock`), and its holder's pid (-1 for OFD locks); for
    /// `write` `None` (OFD `F_UNLCK`), the owner's own first lock there.
    pub(crate) fn test_record(&self, owner: Owner, write: Option<bool>, start: i64, end: i64) -> Option<(Piece, i32)> {
        let _sys = self.mgr.enter();
        let list = match &self.records {
            Records::List(list) => list,
            Records::Striped(striped) => match striped.shards() {
                Some(shards) => return self.test_sharded(shards, owner, write, start, end),
                None => &striped.one,
            },
        };
        let records = list.lock();
        if let Records::Striped(striped) = &self.records {
            if let Some(shards) = striped.shards() {
                drop(records);
                return self.test_sharded(shards, owner, write, start, end);
            }
        }
        let matches = |r: &&RecordEntry| match write {
            Some(write) => conflicts(r, owner, write, start, end),
            None => r.owner == owner && r.piece.overlaps(start, end),
        };
        records.entries.iter().find(matches).map(|r| (r.piece, holder_pid(r.owner)))
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
        let req = Request { owner, pid, write, start, end };
        match &self.records {
            Records::List(list) => self.set_in_list(list, None, req, wait).map(|_| ()),
            Records::Striped(striped) => loop {
                if let Some(shards) = striped.shards() {
                    return self.set_sharded(shards, req, wait);
                }
                if let Flow::Done = self.set_in_list(&striped.one, Some(striped), req, wait)? {
                    return Ok(());
                }
            },
        }
    }

    /// The request on one list (`striped`'s before it shards), until it is
    /// done, sleeping between tries on the lock that blocks it; EINTR if
    /// `wait` fires first. `Moved` once `striped` has sharded.
    fn set_in_list(
        &self,
        list: &SpinLock<TasLock, KindList<RecordEntry>>,
        striped: Option<&Striped>,
        req: Request,
        wait: Option<&Interrupt<'_>>,
    ) -> VfsResult<Flow> {
        let intr = wait.copied().unwrap_or_default();
        loop {
            let (id, waiter) = {
                let mut sys = self.mgr.enter();
                let mut records = list.lock();
                match self.attempt_in_list(&mut sys, &mut records, striped, req, wait.is_some()) {
                    Attempt::Done(result) => return result.map(|()| Flow::Done),
                    Attempt::Moved => return Ok(Flow::Moved),
                    Attempt::Wait(blocker) => self.park(&mut sys, &mut records, blocker, req.posix_pid())?,
                }
            };
            intr.sleep(&waiter, None);
            let mut sys = self.mgr.enter();
            if list.lock().unqueue(id) {
                sys.blocked(|g| g.unblock(id));
            }
            drop(sys);
            if intr.fired() {
                return Err(Errno::EINTR);
            }
        }
    }

    fn attempt_in_list(
        &self,
        sys: &mut Shared<'_>,
        records: &mut KindList<RecordEntry>,
        striped: Option<&Striped>,
        req: Request,
        may_wait: bool,
    ) -> Attempt {
        if let Some(striped) = striped {
            if striped.shards().is_some() {
                return Attempt::Moved;
            }
            if striped.spreads(req) {
                self.shard(striped, sys, records);
                return Attempt::Moved;
            }
        }
        if let Some(write) = req.write {
            if let Some(held) = records.entries.iter().find(|r| conflicts(r, req.owner, write, req.start, req.end)) {
                if !may_wait {
                    return Attempt::Done(Err(Errno::EAGAIN));
                }
                return Attempt::Wait(held.owner);
            }
        }
        self.apply_in_list(sys, records, req);
        Attempt::Done(Ok(()))
    }

    /// Queues the request on `queue` behind `blocker`'s locks, unless the
    /// waiting POSIX owner `posix` would close a cycle of waits (EDEADLK).
    pub(super) fn park(
        &self,
        sys: &mut Shared<'_>,
        queue: &mut KindList<RecordEntry>,
        blocker: Owner,
        posix: Option<i32>,
    ) -> VfsResult<(u64, Arc<Waiter>)> {
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
            return Err(Errno::EDEADLK);
        }
        Ok((id, queue.park(id, blocker)))
    }

    /// Replaces the owner's locks by their merge/split with the request,
    /// keeping the list entries of pieces that did not change.
    fn apply_in_list(&self, sys: &mut Shared<'_>, records: &mut KindList<RecordEntry>, req: Request) {
        let list = &mut records.entries;
        let owner = req.owner;
        let at = list.iter().position(|r| r.owner == owner).unwrap_or(list.len());
        let count = list[at..].iter().take_while(|r| r.owner == owner).count();
        let old: Vec<Piece> = list[at..at + count].iter().map(|r| r.piece).collect();
        let new = range::apply(old.iter(), req.write, req.start, req.end);
        if new == old {
            return;
        }
        let mut removed: Vec<RecordEntry> = list.drain(at..at + count).collect();
        let mut changed = false;
        let entries: Vec<RecordEntry> = new
            .into_iter()
            .map(|piece| match removed.iter().position(|r| r.piece == piece) {
                Some(i) => removed.swap_remove(i),
                None => self.new_entry(sys, req, piece, 0),
            })
            .collect();
        for gone in removed {
            sys.remove(gone.slot);
            changed = true;
        }
        list.splice(at..at, entries);
        if changed {
            records.wake(sys, owner);
        }
    }

    /// A new entry for `piece` of the request's owner, listed system-wide.
    pub(super) fn new_entry(&self, sys: &mut Shared<'_>, req: Request, piece: Piece, stamp: u128) -> RecordEntry {
        let info = self.info(req.kind(), piece.write, req.pid, Some(piece));
        RecordEntry { owner: req.owner, piece, slot: sys.insert(info), stamp }
    }

    /// Drops every POSIX/OFD lock of `owner` here.
    pub(crate) fn remove_owner(&self, owner: Owner) {
        self.remove_owner_locked(&mut self.mgr.enter(), owner);
    }

    pub(super) fn remove_owner_locked(&self, sys: &mut Shared<'_>, owner: Owner) {
        let req = Request { owner, pid: 0, write: None, start: 0, end: OFFSET_MAX };
        let list = match &self.records {
            Records::List(list) => list,
            Records::Striped(striped) => match striped.shards() {
                Some(shards) => return self.remove_sharded(sys, shards, req),
                None => &striped.one,
            },
        };
        let mut records = list.lock();
        if let Records::Striped(striped) = &self.records {
            if let Some(shards) = striped.shards() {
                drop(records);
                return self.remove_sharded(sys, shards, req);
            }
        }
        if records.entries.iter().any(|r| r.owner == owner) {
            self.apply_in_list(sys, &mut records, req);
        }
    }

    fn remove_sharded(&self, sys: &mut Shared<'_>, shards: &Shards, req: Request) {
        // An unlock never waits, so it cannot fail.
        let _ = self.attempt_sharded(sys, shards, req, false);
    }
}
