//! One inode's leases (`F_SETLEASE`, `generic_setlease` and
//! `__break_lease`), split per CPU like the flock list: a read lease is
//! kept in, taken and dropped under the lock of its CPU's shard alone, so
//! two read leases of one file taken on two CPUs share no line. A write
//! lease, an `open` breaking leases, and any call while a break is under
//! way take every shard, in order. A description's [`HomeShard`] names the
//! shard holding its lease.
//!
//! Invariant: `breaking` is set, under every shard's lock, before any
//! lease gets a break deadline, and cleared only under every shard's lock
//! when no lease has one; so a call that holds one shard's lock and sees
//! it clear knows no lease anywhere is being broken, and the single-shard
//! path needs neither the other shards nor a time-out pass. Each shard's
//! `held` flag says whether it holds a lease, stored (`SeqCst`) under its
//! lock after every change; an `open` counts itself and then reads the
//! flags, a new lease is stored and then the open counts are read again,
//! so one of the two sees the other; an open for reading also reads
//! `write_leased`, set the same way before a write lease is stored, and
//! looks no further while it is clear. A lease removed by a time-out leaves
//! its description's home naming a shard without it: the description's
//! next call finds none there and clears the home.

use super::{FileId, FileLockContext, HomeShard, KindList, Owner};
use crate::errno::{Errno, VfsResult};
use crate::locks::wait::Interrupt;
use crate::locks::{EntryId, LeaseBreak, LeaseNotifier, LockKind, Shared, F_RDLCK, F_UNLCK, F_WRLCK};
use crossbeam_utils::CachePadded;
use std::fmt;
use std::sync::Arc;
use std::time::Instant;
use vfscale_sync::audited::{AtomicBool, OnceLock, Ordering};
use vfscale_sync::lglock::LgPerCpu;
use vfscale_sync::spin::TasLock;

pub(super) struct LeaseEntry {
    file: FileId,
    pid: i32,
    write: bool,
    /// When a read-only open asked for a downgrade, its deadline.
    downgrade: Option<Instant>,
    /// When a writing open asked for removal, its deadline.
    unlock: Option<Instant>,
    notify: Option<LeaseNotifier>,
    slot: EntryId,
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

    fn being_broken(&self) -> bool {
        self.unlock.is_some() || self.downgrade.is_some()
    }
}

impl fmt::Debug for LeaseEntry {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("LeaseEntry").field("file", &self.file).field("target", &self.target()).finish_non_exhaustive()
    }
}

/// The shards, made on the file's first lease, and whether each holds a
/// lease (read by every `open` of the file without a lock).
struct Shards {
    lists: LgPerCpu<TasLock, KindList<LeaseEntry>>,
    held: Box<[CachePadded<AtomicBool>]>,
}

impl Shards {
    fn new() -> Shards {
        let lists: LgPerCpu<TasLock, KindList<LeaseEntry>> = LgPerCpu::new();
        let held = (0..lists.cpus()).map(|_| CachePadded::new(AtomicBool::new(false))).collect();
        Shards { lists, held }
    }

    /// Publishes whether shard `at` (whose lock the caller holds) holds a
    /// lease; stores only a change, so a pass over every shard writes no
    /// line that did not change.
    fn note(&self, at: usize, shard: &KindList<LeaseEntry>) {
        let held = !shard.entries.is_empty();
        if self.held[at].load(Ordering::Relaxed) != held {
            self.held[at].store(held, Ordering::SeqCst);
        }
    }
}

/// An inode's lease state (see the module doc).
#[derive(Default)]
pub(super) struct Leases {
    shards: OnceLock<Shards>,
    breaking: AtomicBool,
    /// Set (`SeqCst`, under every shard's lock) before a write lease is
    /// stored, cleared by a pass over every shard that finds none: an
    /// open for reading, which conflicts with write leases alone, skips
    /// the shards while it is clear.
    write_leased: AtomicBool,
}

impl fmt::Debug for Leases {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Leases").field("breaking", &self.breaking.load(Ordering::Relaxed)).finish_non_exhaustive()
    }
}

/// A lease holder to notify once the locks are dropped.
type Notice = (LeaseNotifier, LeaseBreak);

/// The shards a lease call holds: `(shard index, its list)`, one shard or
/// all of them.
type View<'a> = [(usize, &'a mut KindList<LeaseEntry>)];

/// What one request is, for [`FileLockContext::apply_lease`].
struct Request<'a> {
    file: FileId,
    home: &'a HomeShard,
    pid: i32,
    /// `None` unlocks.
    want: Option<bool>,
    conflicting_open: &'a dyn Fn(bool) -> bool,
}

impl FileLockContext {
    fn lease_shards(&self) -> &Shards {
        self.leases.shards.get_or_init(Shards::new)
    }

    /// `F_SETLEASE`; `conflicting_open(write)` says whether the file is
    /// open in a way that forbids such a lease (`check_conflicting_open`).
    pub(crate) fn setlease(
        &self,
        file: FileId,
        home: &HomeShard,
        pid: i32,
        want: Option<bool>,
        mut notify: Option<LeaseNotifier>,
        conflicting_open: &dyn Fn(bool) -> bool,
    ) -> VfsResult<()> {
        let request = Request { file, home, pid, want, conflicting_open };
        let shards = self.lease_shards();
        loop {
            let mut sys = self.mgr.enter();
            if want != Some(true) && !self.leases.breaking.load(Ordering::Acquire) {
                let at = home.get().map(|(at, _)| at);
                let mut shard = match at {
                    Some(at) => shards.lists.lock_cpu(at),
                    None => shards.lists.local_lock(),
                };
                if self.leases.breaking.load(Ordering::Acquire) || home.get().map(|(at, _)| at) != at {
                    continue;
                }
                let here = shard.cpu();
                let mut view = [(here, &mut *shard)];
                match self.apply_lease(&mut sys, &mut view, here, &request, &mut notify) {
                    Some(result) => return result,
                    None => continue,
                }
            }
            let mut all = shards.lists.global_lock();
            let here = vfscale_sync::cpu::current_cpu() % all.cpus();
            let mut view: Vec<_> = all.iter_mut().enumerate().collect();
            self.time_out_leases(&mut sys, &mut view);
            if let Some(result) = self.apply_lease(&mut sys, &mut view, here, &request, &mut notify) {
                return result;
            }
        }
    }

    /// The request on the shards in `view`, which hold every lease it
    /// could conflict with; new leases go to shard `here`. `None` if
    /// another thread of the description changed its lease meanwhile.
    fn apply_lease(
        &self,
        sys: &mut Shared<'_>,
        view: &mut View<'_>,
        here: usize,
        request: &Request<'_>,
        notify: &mut Option<LeaseNotifier>,
    ) -> Option<VfsResult<()>> {
        let shards = self.lease_shards();
        let Request { file, home, pid, want, conflicting_open } = *request;
        let mine = own_lease(view, file, home);
        let Some(write) = want else {
            let Some((v, i)) = mine else { return Some(Err(Errno::EAGAIN)) };
            let (at, shard) = &mut view[v];
            sys.remove(shard.entries.remove(i).slot);
            home.clear();
            shards.note(*at, shard);
            shard.wake(sys, Owner::File(file));
            return Some(Ok(()));
        };
        if conflicting_open(write) {
            return Some(Err(Errno::EAGAIN));
        }
        let mut others = view.iter().flat_map(|(_, shard)| shard.entries.iter()).filter(|l| l.file != file);
        if others.any(|l| write || l.unlock.is_some()) {
            return Some(Err(Errno::EAGAIN));
        }
        if let Some((v, i)) = mine {
            let shard = &mut *view[v].1;
            let lease = &mut shard.entries[i];
            if !write {
                lease.downgrade = None;
            }
            if notify.is_some() {
                lease.notify = notify.take();
            }
            if lease.write != write {
                if write {
                    self.leases.write_leased.store(true, Ordering::SeqCst);
                }
                lease.write = write;
                self.relist_lease(sys, lease);
            }
            shard.wake(sys, Owner::File(file));
            return Some(Ok(()));
        }
        if !home.claim(here, write) {
            return None;
        }
        if write {
            self.leases.write_leased.store(true, Ordering::SeqCst);
        }
        let (at, shard) = view.iter_mut().find(|(at, _)| *at == here).expect("the view holds shard `here`");
        let slot = sys.insert(self.info(LockKind::Lease, write, pid, None));
        let notify = notify.take();
        shard.entries.push(LeaseEntry { file, pid, write, downgrade: None, unlock: None, notify, slot });
        shards.note(*at, shard);
        // An open that counted itself before our store may have missed the
        // lease; look at the counts again (the other half of that pair).
        if conflicting_open(write) {
            let lease = shard.entries.pop().expect("just pushed");
            sys.remove(lease.slot);
            home.clear();
            shards.note(*at, shard);
            return Some(Err(Errno::EAGAIN));
        }
        Some(Ok(()))
    }

    /// `F_GETLEASE`.
    pub(crate) fn getlease(&self, file: FileId, home: &HomeShard) -> i16 {
        let Some((at, _)) = home.get() else { return F_UNLCK };
        let shards = self.lease_shards();
        let mut sys = self.mgr.enter();
        let target =
            |view: &mut View<'_>| own_lease(view, file, home).map_or(F_UNLCK, |(v, i)| view[v].1.entries[i].target());
        if !self.leases.breaking.load(Ordering::Acquire) {
            let mut shard = shards.lists.lock_cpu(at);
            if !self.leases.breaking.load(Ordering::Acquire) {
                return target(&mut [(at, &mut *shard)]);
            }
        }
        let mut all = shards.lists.global_lock();
        let mut view: Vec<_> = all.iter_mut().enumerate().collect();
        self.time_out_leases(&mut sys, &mut view);
        target(&mut view)
    }

    /// The last reference to description `file` went: its lease goes.
    pub(super) fn release_lease(&self, sys: &mut Shared<'_>, file: FileId, home: &HomeShard) {
        let (Some((at, _)), Some(shards)) = (home.get(), self.leases.shards.get()) else { return };
        let mut shard = shards.lists.lock_cpu(at);
        if let Some(i) = shard.entries.iter().position(|l| l.file == file) {
            sys.remove(shard.entries.remove(i).slot);
            shards.note(at, &shard);
            shard.wake(sys, Owner::File(file));
        }
        home.clear();
    }

    /// Gives `lease`, whose type changed, a system-wide entry of its new
    /// type in place of its old one.
    fn relist_lease(&self, sys: &mut Shared<'_>, lease: &mut LeaseEntry) {
        let slot = sys.insert(self.info(LockKind::Lease, lease.write, lease.pid, None));
        sys.remove(std::mem::replace(&mut lease.slot, slot));
    }

    /// Applies lease-break deadlines that have passed (`time_out_leases`)
    /// on every shard (the caller holds them all): a lease past its
    /// downgrade time becomes a read lease, one past its break time goes.
    /// Clears `breaking` once no lease is being broken.
    fn time_out_leases(&self, sys: &mut Shared<'_>, view: &mut View<'_>) {
        let shards = self.lease_shards();
        let now = Instant::now();
        for (at, shard) in view.iter_mut() {
            let mut i = 0;
            while i < shard.entries.len() {
                let lease = &mut shard.entries[i];
                let file = lease.file;
                if lease.unlock.is_some_and(|t| t <= now) {
                    sys.remove(shard.entries.remove(i).slot);
                    shard.wake(sys, Owner::File(file));
                    continue;
                }
                if lease.downgrade.is_some_and(|t| t <= now) {
                    lease.downgrade = None;
                    if lease.write {
                        lease.write = false;
                        self.relist_lease(sys, lease);
                    }
                    shard.wake(sys, Owner::File(file));
                }
                i += 1;
            }
            shards.note(*at, shard);
        }
        let mut leases = view.iter().flat_map(|(_, shard)| shard.entries.iter());
        if !leases.clone().any(LeaseEntry::being_broken) {
            self.leases.breaking.store(false, Ordering::Release);
        }
        if !leases.any(|l| l.write) {
            self.leases.write_leased.store(false, Ordering::Release);
        }
    }

    /// An `open` (for writing if `writable`) breaks the leases it conflicts
    /// with and waits until they are gone or downgraded, or their break
    /// time passes; EWOULDBLOCK at once for `O_NONBLOCK`, after starting
    /// the break.
    pub(crate) fn break_lease(&self, writable: bool, nonblock: bool) -> VfsResult<()> {
        let Some(shards) = self.leases.shards.get() else { return Ok(()) };
        if !shards.held.iter().any(|held| held.load(Ordering::SeqCst)) {
            return Ok(());
        }
        if !writable && !self.leases.write_leased.load(Ordering::SeqCst) {
            return Ok(());
        }
        let conflicting = |l: &LeaseEntry| l.write || writable;
        let break_time = self.mgr.lease_break_time();
        let mut started = false;
        loop {
            let mut notices: Vec<Notice> = Vec::new();
            let outcome = {
                let mut sys = self.mgr.enter();
                let mut all = shards.lists.global_lock();
                let mut view: Vec<_> = all.iter_mut().enumerate().collect();
                self.time_out_leases(&mut sys, &mut view);
                if !view.iter().flat_map(|(_, shard)| shard.entries.iter()).any(conflicting) {
                    return Ok(());
                }
                if !started {
                    started = true;
                    self.leases.breaking.store(true, Ordering::Release);
                    let deadline = Instant::now() + break_time;
                    for (_, shard) in view.iter_mut() {
                        for lease in shard.entries.iter_mut().filter(|l| conflicting(l)) {
                            if start_break(lease, writable, deadline) {
                                if let Some(notify) = &lease.notify {
                                    notices.push((
                                        Arc::clone(notify),
                                        LeaseBreak { ino: self.ino, target: lease.target() },
                                    ));
                                }
                            }
                        }
                    }
                }
                if nonblock {
                    Err(Errno::EWOULDBLOCK)
                } else {
                    let (at, shard) = view
                        .iter_mut()
                        .find(|(_, shard)| shard.entries.iter().any(conflicting))
                        .expect("a conflicting lease");
                    let first = shard.entries.iter().find(|l| conflicting(l)).expect("in this shard");
                    let (blocker, deadline) = (Owner::File(first.file), first.unlock.or(first.downgrade));
                    let id = self.mgr.next_waiter_id();
                    Ok((*at, id, shard.park(id, blocker), deadline))
                }
            };
            for (notify, notice) in notices {
                notify(notice);
            }
            let (at, id, waiter, deadline) = outcome?;
            Interrupt::never().sleep(&waiter, deadline);
            let _sys = self.mgr.enter();
            shards.lists.lock_cpu(at).unqueue(id);
        }
    }
}

/// Starts breaking `lease` for an open (for writing if `writable`): sets
/// the deadline of its removal, or of its downgrade, unless one is set;
/// whether it did (and the holder must be told).
fn start_break(lease: &mut LeaseEntry, writable: bool, deadline: Instant) -> bool {
    if lease.unlock.is_some() || !writable && lease.downgrade.is_some() {
        return false;
    }
    if writable {
        lease.unlock = Some(deadline);
    } else {
        lease.downgrade = Some(deadline);
    }
    true
}

/// Where description `file`'s lease is in `view` (`(index in view, index
/// in its shard)`), by its home; clears a home whose lease timed out.
fn own_lease(view: &mut View<'_>, file: FileId, home: &HomeShard) -> Option<(usize, usize)> {
    let (at, _) = home.get()?;
    let v = view.iter().position(|(shard, _)| *shard == at)?;
    let found = view[v].1.entries.iter().position(|l| l.file == file);
    if found.is_none() {
        home.clear();
    }
    found.map(|i| (v, i))
}
