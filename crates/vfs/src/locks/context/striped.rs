//! Record locks striped by byte offset ([`RecordLocks::Striped`](crate::config::RecordLocks)):
//! owners locking disjoint, non-touching ranges of one file in different
//! stripes share no written line.
//!
//! Invariant: before the file shards, every record lock is on one list
//! (`one`, as [`super::records`] keeps it). From the moment a lock within
//! one stripe is asked for in a second stripe, `one` stays empty and a
//! lock lies either in the slot of its stripe (stripe `k` in slot
//! `k % SLOTS`), if it is within that stripe, or in the wide lane; a slot
//! whose stripes a wide-lane lock covers has `wide` set, set while its lock
//! is held, so whoever holds a slot's lock knows whether the wide lane
//! matters to it. An owner's group (which slots hold its locks, whether the
//! wide lane does, and its stamp) changes only under its owner shard's
//! lock, which every request that may change it takes first; the shard's
//! `reach` (by type: the union of its groups' slots, or every slot once one
//! of them holds such a lock in the wide lane) changes under that lock
//! too, while the lanes the change touched are still locked.
//!
//! Lock order: an owner shard, then slots in increasing order, then the
//! wide lane. A request locks the slots of its range (an unlock: only those
//! the owner has locks in), the slots just outside it only where the owner
//! has locks there (they may merge), and the wide lane only if its range
//! spans stripes, may merge across them, or a locked slot says a wide lock
//! covers it. A request within one stripe whose owner holds locks in its
//! slot and keeps some there (a lock: of its type), with no wide lock over
//! the slot and, where a lock's range touches a neighbouring stripe, no
//! lock of its type and owner shard in that stripe's slot nor in the wide
//! lane, takes its slot's lock alone (`attempt_in_stripe`): its owner's
//! group gains nothing, so requests of one owner in different stripes
//! share no line. A group may show a type its owner no longer holds in a
//! slot where it holds the other (the slot's next change by the long way
//! corrects it): never less than the owner holds. So a file whose locks sit
//! in one stripe pays one lock per call before sharding, and one owner
//! shard and one slot after (the slot alone once the owner holds a lock of
//! the request's type there).
//!
//! `F_GETLK` must report the conflict Linux's `flc_posix` order puts
//! first: owners in the order their groups appeared on the file, each
//! owner's locks by start. Each lock carries its group's stamp, taken from
//! the monotonic clock when the group appears (when sharding: the groups of
//! `one`, in list order, before any later one), so the order needs no write
//! that another owner's request makes.

use super::records::{conflicts, holder_pid, Request};
use super::{locked, FileLockContext, KindList, Locked, Owner, RecordEntry};
use crate::errno::{Errno, VfsResult};
use crate::locks::range::{self, Piece, OFFSET_MAX};
use crate::locks::wait::{Interrupt, Waiter};
use crate::locks::Shared;
use crate::locks::OWNER_SHARDS;
use crossbeam_utils::CachePadded;
use std::fmt;
use std::sync::Arc;
use vfscale_sync::audited::{AtomicU64, OnceLock, Ordering};
use vfscale_sync::spin::{SpinLock, SpinLockGuard, TasLock};

/// Slots per file; stripes `k` and `k + SLOTS` share one.
const SLOTS: usize = 64;
/// The wide lane's index among the lanes a request locks.
const WIDE: usize = SLOTS;

/// A file's record locks: one list, then stripes.
pub(super) struct Striped {
    shift: u32,
    /// Every record lock of the file until it shards; empty after.
    pub(super) one: Locked<RecordEntry>,
    /// 1 + the stripe of the first lock within one stripe (0: none yet);
    /// written once, under `one`'s lock.
    home: AtomicU64,
    shards: OnceLock<Box<Shards>>,
}

impl fmt::Debug for Striped {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Striped").field("stripe_shift", &self.shift).field("sharded", &self.shards().is_some()).finish()
    }
}

impl Striped {
    /// Stripes of `1 << stripe_shift` bytes (at most 2^62).
    pub(super) fn new(stripe_shift: u8) -> Striped {
        let shift = u32::from(stripe_shift.min(62));
        Striped { shift, one: locked(), home: AtomicU64::new(0), shards: OnceLock::new() }
    }

    /// The stripes, once the file has sharded.
    pub(super) fn shards(&self) -> Option<&Shards> {
        self.shards.get().map(|shards| &**shards)
    }

    /// Under `one`'s lock: whether `req` locks a range within one stripe
    /// other than the home stripe (the file then shards). The first such
    /// request names the home stripe; wide ones never shard the file.
    pub(super) fn spreads(&self, req: Request) -> bool {
        let stripe = stripe(self.shift, req.start);
        if req.write.is_none() || stripe != self.stripe(req.end) {
            return false;
        }
        match self.home.load(Ordering::Relaxed) {
            0 => {
                self.home.store(stripe + 1, Ordering::Relaxed);
                false
            }
            home => home != stripe + 1,
        }
    }

    fn stripe(&self, offset: i64) -> u64 {
        stripe(self.shift, offset)
    }
}

fn stripe(shift: u32, offset: i64) -> u64 {
    offset.max(0).unsigned_abs() >> shift
}

/// The slot of stripe `k`.
fn slot_of(k: u64) -> usize {
    (k % SLOTS as u64) as usize
}

/// The slot of stripe `k`, as a bit.
fn bit(k: u64) -> u64 {
    1 << slot_of(k)
}

/// The slots of stripes `a..=b`.
fn span(a: u64, b: u64) -> u64 {
    if b - a >= SLOTS as u64 - 1 {
        return u64::MAX;
    }
    let (x, y) = (a % SLOTS as u64, b % SLOTS as u64);
    let upto = |y: u64| u64::MAX >> (SLOTS as u64 - 1 - y);
    if x <= y {
        upto(y) & (u64::MAX << x)
    } else {
        upto(y) | (u64::MAX << x)
    }
}

/// The slots named by `mask`, in increasing order.
fn slots(mut mask: u64) -> impl Iterator<Item = usize> {
    std::iter::from_fn(move || {
        let k = mask.trailing_zeros() as usize;
        mask &= mask.wrapping_sub(1);
        (k < SLOTS).then_some(k)
    })
}

/// A stamp later than every one taken before it: the monotonic clock in
/// the high bits (the low ones order the groups found when sharding).
fn now_stamp() -> u128 {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: clock_gettime writes the timespec we own.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    let nanos = ts.tv_sec.unsigned_abs() as u128 * 1_000_000_000 + ts.tv_nsec.unsigned_abs() as u128;
    nanos << 32 | u128::from(u32::MAX)
}

/// One slot or the wide lane: the locks in it and the requests waiting on
/// them.
#[derive(Debug, Default)]
pub(super) struct Lane {
    locks: KindList<RecordEntry>,
    /// In a slot: a wide-lane lock may cover one of its stripes.
    wide: bool,
}

type LaneLock = CachePadded<SpinLock<TasLock, Lane>>;

/// One owner's locks on the file: where they lie, and where the owner
/// stands in `F_GETLK`'s order.
#[derive(Debug)]
struct Group {
    owner: Owner,
    stamp: u128,
    held: Held,
}

/// Where an owner's locks lie, by type (index: whether a write lock): the
/// slots holding some, and whether the wide lane does.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
struct Held {
    slots: [u64; 2],
    wide: [bool; 2],
}

impl Held {
    /// The slots holding locks of either type.
    fn slots(&self) -> u64 {
        self.slots[0] | self.slots[1]
    }

    /// Whether the wide lane holds locks of either type.
    fn wide(&self) -> bool {
        self.wide[0] || self.wide[1]
    }

    /// Records what lane `k` (or the wide lane) holds of `owner`'s locks.
    fn see(&mut self, k: usize, lane: &Lane, owner: Owner) {
        for write in [false, true] {
            let has = lane.locks.entries.iter().any(|r| r.owner == owner && r.piece.write == write);
            let t = usize::from(write);
            match k {
                WIDE => self.wide[t] = has,
                k if has => self.slots[t] |= 1 << k,
                k => self.slots[t] &= !(1 << k),
            }
        }
    }
}

/// The groups of the owners of one shard, and what a request of one of
/// them reads without the lock to learn whether its owner may hold locks
/// next to its range.
#[derive(Debug, Default)]
struct OwnerShard {
    groups: SpinLock<TasLock, Vec<Group>>,
    /// By type: the slots any of the groups holds locks of that type in,
    /// or every slot if one of them holds such locks in the wide lane. One
    /// word per type, so a merge that moves a lock between a slot and the
    /// wide lane never shows neither.
    reach: [AtomicU64; 2],
}

impl OwnerShard {
    /// Under `groups`' lock, after a change of `groups` and before the
    /// lanes it touched are unlocked: records their reach, writing only if
    /// it changed.
    fn note(&self, groups: &[Group]) {
        for (t, word) in self.reach.iter().enumerate() {
            let reach = match groups.iter().any(|g| g.held.wide[t]) {
                true => u64::MAX,
                false => groups.iter().fold(0, |mask, g| mask | g.held.slots[t]),
            };
            if word.load(Ordering::Relaxed) != reach {
                word.store(reach, Ordering::Release);
            }
        }
    }

    /// Whether some owner of the shard may hold a lock of the type `write`
    /// says in slot `k` or in the wide lane, read without the lock.
    fn may_hold(&self, k: usize, write: bool) -> bool {
        self.reach[usize::from(write)].load(Ordering::Acquire) & 1 << k != 0
    }
}

/// The stripes of a sharded file, each made on first use.
pub(super) struct Shards {
    shift: u32,
    slots: [OnceLock<Box<LaneLock>>; SLOTS],
    wide: LaneLock,
    owners: [OnceLock<Box<CachePadded<OwnerShard>>>; OWNER_SHARDS],
}

impl fmt::Debug for Shards {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Shards").field("stripe_shift", &self.shift).finish_non_exhaustive()
    }
}

/// A request queued in lane `lane` behind a conflicting lock.
pub(super) struct Parked {
    lane: usize,
    id: u64,
    waiter: Arc<Waiter>,
}

impl Shards {
    fn new(shift: u32) -> Shards {
        Shards {
            shift,
            slots: std::array::from_fn(|_| OnceLock::new()),
            wide: CachePadded::default(),
            owners: std::array::from_fn(|_| OnceLock::new()),
        }
    }

    fn stripe(&self, offset: i64) -> u64 {
        stripe(self.shift, offset)
    }

    fn lane(&self, at: usize) -> &SpinLock<TasLock, Lane> {
        match at {
            WIDE => &self.wide,
            k => self.slots[k].get_or_init(Box::default),
        }
    }

    /// The owner's shard: chosen when the owner was made, so that owners
    /// one thread makes in turn take different shards (no hash of an
    /// address, which the allocator's placement would decide).
    fn owner_index(owner: Owner) -> usize {
        match owner {
            Owner::Pid(pid) => crate::locks::pid_owner_shard(pid),
            Owner::File(file) => file.owner_shard(),
        }
    }

    fn owner_shard(&self, owner: Owner) -> &OwnerShard {
        self.owners[Self::owner_index(owner)].get_or_init(Box::default)
    }
}

impl FileLockContext {
    /// Moves the locks of `one` (under its lock) to stripes, each owner's
    /// group stamped in list order, and wakes every request queued there
    /// to retry on the stripes.
    pub(super) fn shard(&self, striped: &Striped, sys: &mut Shared<'_>, one: &mut KindList<RecordEntry>) {
        let shards = Shards::new(striped.shift);
        let base = now_stamp() & !u128::from(u32::MAX);
        let mut groups = 0u32;
        for mut r in one.entries.drain(..) {
            let shard = shards.owner_shard(r.owner);
            let mut owners = shard.groups.lock();
            let at = match owners.iter().position(|g| g.owner == r.owner) {
                Some(at) => at,
                None => {
                    owners.push(Group { owner: r.owner, stamp: base | u128::from(groups), held: Held::default() });
                    groups = groups.saturating_add(1).min(u32::MAX - 1);
                    owners.len() - 1
                }
            };
            let group = &mut owners[at];
            r.stamp = group.stamp;
            let (a, b) = (shards.stripe(r.piece.start), shards.stripe(r.piece.end));
            if a == b {
                group.held.slots[usize::from(r.piece.write)] |= bit(a);
                shards.lane(slot_of(a)).lock().locks.entries.push(r);
            } else {
                group.held.wide[usize::from(r.piece.write)] = true;
                for k in slots(span(a, b)) {
                    shards.lane(k).lock().wide = true;
                }
                shards.wide.lock().locks.entries.push(r);
            }
            shard.note(&owners);
        }
        one.wake_all(sys);
        striped.shards.get_or_init(|| Box::new(shards));
    }

    /// `F_GETLK` on a sharded file: the first conflict in Linux's order.
    pub(super) fn test_sharded(
        &self,
        shards: &Shards,
        owner: Owner,
        write: Option<bool>,
        start: i64,
        end: i64,
    ) -> Option<(Piece, i32)> {
        let mask = span(shards.stripe(start), shards.stripe(end));
        let mut lanes: Vec<SpinLockGuard<'_, TasLock, Lane>> =
            slots(mask).filter_map(|k| shards.slots[k].get()).map(|slot| slot.lock()).collect();
        if lanes.iter().any(|lane| lane.wide) {
            lanes.push(shards.wide.lock());
        }
        let matches = |r: &&RecordEntry| match write {
            Some(write) => conflicts(r, owner, write, start, end),
            None => r.owner == owner && r.piece.overlaps(start, end),
        };
        let first = lanes.iter().flat_map(|lane| lane.locks.entries.iter()).filter(matches);
        first.min_by_key(|r| (r.stamp, r.piece.start)).map(|r| (r.piece, holder_pid(r.owner)))
    }

    /// `F_SETLK`/`F_SETLKW` on a sharded file, sleeping between tries on
    /// the lane that holds the conflicting lock.
    pub(super) fn set_sharded(&self, shards: &Shards, req: Request, wait: Option<&Interrupt<'_>>) -> VfsResult<()> {
        let intr = wait.copied().unwrap_or_default();
        loop {
            let parked = self.attempt_sharded(&mut self.mgr.enter(), shards, req, wait.is_some())?;
            let Some(Parked { lane, id, waiter }) = parked else { return Ok(()) };
            intr.sleep(&waiter, None);
            let mut sys = self.mgr.enter();
            if shards.lane(lane).lock().locks.unqueue(id) {
                sys.blocked(|g| g.unblock(id));
            }
            drop(sys);
            if intr.fired() {
                return Err(Errno::EINTR);
            }
        }
    }

    /// One try of `req` under its owner shard and the lanes it needs:
    /// applied, refused (EAGAIN, EDEADLK), or queued behind a conflict.
    pub(super) fn attempt_sharded(
        &self,
        sys: &mut Shared<'_>,
        shards: &Shards,
        req: Request,
        may_wait: bool,
    ) -> VfsResult<Option<Parked>> {
        if let Some(done) = self.attempt_in_stripe(sys, shards, req, may_wait)? {
            return Ok(done);
        }
        let locking = req.write.is_some();
        let shard = match locking {
            true => shards.owner_shard(req.owner),
            false => match shards.owners[Shards::owner_index(req.owner)].get() {
                Some(shard) => shard,
                None => return Ok(None),
            },
        };
        let mut owners = shard.groups.lock();
        let group = owners.iter().position(|g| g.owner == req.owner);
        let held = group.map_or(Held::default(), |g| owners[g].held);
        let (mine, own_wide) = (held.slots(), held.wide());
        if !locking && mine == 0 && !own_wide {
            return Ok(None);
        }
        let (a, b) = (shards.stripe(req.start), shards.stripe(req.end));
        let mut want = span(a, b);
        if locking {
            if req.start > 0 {
                want |= mine & bit(shards.stripe(req.start - 1));
            }
            if req.end < OFFSET_MAX {
                want |= mine & bit(shards.stripe(req.end + 1));
            }
        } else {
            want &= mine;
        }
        let mut lanes: Vec<(usize, SpinLockGuard<'_, TasLock, Lane>)> =
            slots(want).map(|k| (k, shards.lane(k).lock())).collect();
        if own_wide || locking && (a != b || want != span(a, b) || lanes.iter().any(|(_, lane)| lane.wide)) {
            lanes.push((WIDE, shards.wide.lock()));
        }
        if let Some(write) = req.write {
            let conflict = |r: &RecordEntry| conflicts(r, req.owner, write, req.start, req.end);
            let held = lanes.iter().position(|(_, lane)| lane.locks.entries.iter().any(conflict));
            if let Some(at) = held {
                if !may_wait {
                    return Err(Errno::EAGAIN);
                }
                let (lane, queue) = &mut lanes[at];
                let blocker = queue.locks.entries.iter().find(|r| conflict(r)).map_or(req.owner, |r| r.owner);
                let (id, waiter) = self.park(sys, &mut queue.locks, blocker, req.posix_pid())?;
                return Ok(Some(Parked { lane: *lane, id, waiter }));
            }
        }
        let stamp = group.map_or_else(now_stamp, |g| owners[g].stamp);
        self.apply_sharded(sys, shards, &mut lanes, req, stamp);
        let mut now = held;
        for (k, lane) in &lanes {
            now.see(*k, lane, req.owner);
        }
        match group {
            Some(g) if now == Held::default() => {
                owners.swap_remove(g);
            }
            Some(g) => owners[g].held = now,
            None if now != Held::default() => owners.push(Group { owner: req.owner, stamp, held: now }),
            None => {}
        }
        shard.note(&owners);
        self.forget_wide(shards, &mut lanes);
        Ok(None)
    }

    /// A request whose range lies in one stripe, where its owner holds
    /// locks already and keeps some (for a lock: of its type), done under
    /// that stripe's slot lock alone: the owner's group gains nothing (it
    /// may go on showing a type the request converted away, which only
    /// sends later requests the long way) and its stamp stays, so the owner
    /// shard is not locked, and requests of one owner in different stripes
    /// share no line. It must need no other lane: no wide lock covers the
    /// slot, and where a lock's range touches a neighbouring stripe (a lock
    /// of its type there would merge with it), no owner of its shard holds
    /// one of that type in that stripe's slot or in the wide lane. That is
    /// the shard's `reach`, read without the shard's lock, after taking the
    /// slot's. A lock of the owner next to this range is either there
    /// before and after any change of the owner's group (a merge that
    /// moves it between a slot and the wide lane: `reach` shows it in both
    /// states, in one word), or made by a request whose own range touches
    /// this stripe, which then takes this slot too (the group says the
    /// owner holds locks here): it came first and its `reach` is seen, or
    /// comes after and merges. (If the group did not show this slot when it
    /// ran, the owner's lock here came later, the long way, ordered after
    /// it by the owner shard and before this request by the slot's lock.)
    /// `None`: the long way.
    fn attempt_in_stripe(
        &self,
        sys: &mut Shared<'_>,
        shards: &Shards,
        req: Request,
        may_wait: bool,
    ) -> VfsResult<Option<Option<Parked>>> {
        let k = shards.stripe(req.start);
        if k != shards.stripe(req.end) {
            return Ok(None);
        }
        let (Some(slot), Some(owner_shard)) =
            (shards.slots[slot_of(k)].get(), shards.owners[Shards::owner_index(req.owner)].get())
        else {
            return Ok(None);
        };
        let lane = slot.lock();
        let mine = |r: &&RecordEntry| r.owner == req.owner;
        let Some(stamp) = lane.locks.entries.iter().find(mine).map(|r| r.stamp) else { return Ok(None) };
        // The owner keeps a lock here (of the request's type, for a lock):
        // no type appears in the slot that its group does not show.
        let keeps = |r: &&RecordEntry| match req.write {
            Some(write) => r.piece.write == write,
            None => r.piece.start < req.start || r.piece.end > req.end,
        };
        if lane.wide || !lane.locks.entries.iter().filter(mine).any(|r| keeps(&r)) {
            return Ok(None);
        }
        if let Some(write) = req.write {
            // Only a lock merges, and only with the owner's locks of its type.
            let outside = [(req.start > 0).then(|| req.start - 1), (req.end < OFFSET_MAX).then(|| req.end + 1)];
            let mut neighbours = outside.into_iter().flatten().map(|at| shards.stripe(at)).filter(|&n| n != k);
            if neighbours.any(|n| owner_shard.may_hold(slot_of(n), write)) {
                return Ok(None);
            }
            if lane.locks.entries.iter().any(|r| conflicts(r, req.owner, write, req.start, req.end)) {
                return if may_wait { Ok(None) } else { Err(Errno::EAGAIN) };
            }
        }
        let mut lanes = [(slot_of(k), lane)];
        self.apply_sharded(sys, shards, &mut lanes, req, stamp);
        debug_assert!(lanes[0].1.locks.entries.iter().any(|r| r.owner == req.owner), "the owner keeps locks here");
        Ok(Some(None))
    }

    /// Replaces the owner's locks in `lanes` that the request overlaps or
    /// touches by their merge/split with it, keeping the entries of pieces
    /// that did not change; a new piece goes to its stripe's slot if it is
    /// within one and that slot is locked, else to the wide lane.
    fn apply_sharded(
        &self,
        sys: &mut Shared<'_>,
        shards: &Shards,
        lanes: &mut [(usize, SpinLockGuard<'_, TasLock, Lane>)],
        req: Request,
        stamp: u128,
    ) {
        let (start, end) = (req.start, req.end);
        let near = |p: &Piece| p.start <= end.saturating_add(1) && start.saturating_sub(1) <= p.end;
        let mut old: Vec<(usize, RecordEntry)> = Vec::new();
        for (i, (_, lane)) in lanes.iter_mut().enumerate() {
            let entries = &mut lane.locks.entries;
            let mut j = 0;
            while j < entries.len() {
                if entries[j].owner == req.owner && near(&entries[j].piece) {
                    old.push((i, entries.swap_remove(j)));
                } else {
                    j += 1;
                }
            }
        }
        old.sort_by_key(|(_, r)| r.piece.start);
        for piece in range::apply(old.iter().map(|(_, r)| &r.piece), req.write, start, end) {
            if let Some(i) = old.iter().position(|(_, r)| r.piece == piece) {
                let (at, r) = old.swap_remove(i);
                lanes[at].1.locks.entries.push(r);
                continue;
            }
            let entry = self.new_entry(sys, req, piece, stamp);
            let (a, b) = (shards.stripe(piece.start), shards.stripe(piece.end));
            let home = lanes.iter().position(|(k, _)| a == b && *k == slot_of(a));
            let at = home.or_else(|| lanes.iter().position(|(k, _)| *k == WIDE));
            let at = at.expect("a piece outside the locked slots goes to the wide lane, locked for it");
            lanes[at].1.locks.entries.push(entry);
            if lanes[at].0 == WIDE {
                let covered = span(a, b);
                for (k, lane) in lanes.iter_mut() {
                    if *k != WIDE && covered & 1 << *k != 0 {
                        lane.wide = true;
                    }
                }
            }
        }
        let mut changed = 0u128;
        for (at, gone) in old {
            sys.remove(gone.slot);
            changed |= 1 << at;
        }
        for (i, (_, lane)) in lanes.iter_mut().enumerate() {
            if changed & 1 << i != 0 {
                lane.locks.wake(sys, req.owner);
            }
        }
    }

    /// With the wide lane locked: clears `wide` in each locked slot that
    /// no wide-lane lock covers any more.
    fn forget_wide(&self, shards: &Shards, lanes: &mut [(usize, SpinLockGuard<'_, TasLock, Lane>)]) {
        let Some((WIDE, wide)) = lanes.last() else { return };
        let covered = wide
            .locks
            .entries
            .iter()
            .fold(0, |mask, r| mask | span(shards.stripe(r.piece.start), shards.stripe(r.piece.end)));
        for (k, lane) in lanes.iter_mut() {
            if *k != WIDE && covered & 1 << *k == 0 {
                lane.wide = false;
            }
        }
    }
}
