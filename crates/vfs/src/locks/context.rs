//! One inode's locks (`struct file_lock_context`): its flock, POSIX/OFD
//! and lease lists, each with the queue of requests waiting on it, each
//! under a small spinlock of its own on a line of its own. Linux keeps all
//! three under one `flc_lock`; the kinds never conflict with each other,
//! so here a flock and a record lock on one file share no line.
//!
//! The flock list is split further, per CPU, the way an lglock splits its
//! lock: a shared flock is kept in, taken and dropped under the shard of
//! the CPU that took it alone; an exclusive one takes every shard, in
//! order, and marks each with its holder, so a shared request sees a
//! conflict in its own shard. Two shared flocks of one file taken on two
//! CPUs then share no line. A description's [`HomeShard`] names the shard
//! that holds its flock. Until a second description asks for a shared
//! flock, shard 0 holds every flock, so exclusive flocks take one lock as
//! before; the shards (one padded line pair per CPU) are made on a file's
//! first flock. The lease list is split per CPU the same way (see
//! [`lease`]): read leases of one file taken on two CPUs share no line.
//!
//! Invariant: every entry of the three lists has its own entry on the
//! system-wide list (its `slot`); a queued waiter is on the queue of the
//! kind it waits on and names the owner whose lock of that kind it waits
//! for, and whenever that owner's locks of that kind here shrink, change
//! type or go, the waiter is dequeued (and taken off the wait-for graph)
//! and woken, in queue order. POSIX/OFD entries keep one owner's locks
//! together and sorted (see [`super::range`]), the order Linux keeps, so
//! `F_GETLK` reports the same first conflict.

mod lease;
mod records;
mod striped;

use lease::Leases;
use records::Records;

use super::range::{Piece, OFFSET_MAX};
use super::wait::{Interrupt, Waiter};
use super::{BlockedEntry, EntryId, FileId, LockInfo, LockKind, LockManager, Shared};
use crate::errno::{Errno, VfsResult};
use crossbeam_utils::CachePadded;
use std::collections::VecDeque;
use std::fmt;
use std::sync::Arc;
use vfscale_sync::audited::{AtomicBool, AtomicUsize, OnceLock, Ordering};
use vfscale_sync::lglock::LgPerCpu;
use vfscale_sync::spin::{SpinLock, TasLock};

/// Who owns a lock: a process (POSIX locks) or an open file description
/// (flock, OFD locks, leases), named by its address.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Owner {
    Pid(i32),
    File(FileId),
}

#[derive(Debug)]
struct FlockEntry {
    file: FileId,
    slot: EntryId,
}

#[derive(Debug)]
struct RecordEntry {
    owner: Owner,
    piece: Piece,
    slot: EntryId,
    /// Where the owner's locks stand in Linux's `flc_posix` order (see
    /// [`striped`]); 0 in one list, where the position says it.
    stamp: u128,
}

#[derive(Debug)]
struct Queued {
    id: u64,
    blocker: Owner,
    waiter: Arc<Waiter>,
}

/// The locks of one kind and the requests waiting on them.
#[derive(Debug)]
struct KindList<E> {
    entries: Vec<E>,
    queue: VecDeque<Queued>,
}

impl<E> Default for KindList<E> {
    fn default() -> Self {
        KindList { entries: Vec::new(), queue: VecDeque::new() }
    }
}

impl<E> KindList<E> {
    /// Queues waiter `id`, blocked on `blocker`'s locks here.
    fn park(&mut self, id: u64, blocker: Owner) -> Arc<Waiter> {
        let waiter = Arc::new(Waiter::default());
        self.queue.push_back(Queued { id, blocker, waiter: Arc::clone(&waiter) });
        waiter
    }

    /// Takes waiter `id` off the queue; false if a waker already did.
    fn unqueue(&mut self, id: u64) -> bool {
        let at = self.queue.iter().position(|q| q.id == id);
        at.map(|at| self.queue.remove(at)).is_some()
    }

    /// Wakes, in queue order, everyone queued here.
    fn wake_all(&mut self, sys: &mut Shared<'_>) {
        let woken = std::mem::take(&mut self.queue);
        sys.blocked(|g| g.blocked.retain(|b| !woken.iter().any(|q| q.id == b.id)));
        for q in woken {
            q.waiter.wake();
        }
    }

    /// Wakes, in queue order, everyone waiting on `owner`'s locks here.
    fn wake(&mut self, sys: &mut Shared<'_>, owner: Owner) {
        if self.queue.iter().all(|q| q.blocker != owner) {
            return;
        }
        let (woken, rest): (VecDeque<Queued>, VecDeque<Queued>) =
            std::mem::take(&mut self.queue).into_iter().partition(|q| q.blocker == owner);
        self.queue = rest;
        sys.blocked(|g| g.blocked.retain(|b| !woken.iter().any(|q| q.id == b.id)));
        for q in woken {
            q.waiter.wake();
        }
    }
}

/// A kind's list under its spinlock, on a line of its own.
type Locked<E> = CachePadded<SpinLock<TasLock, KindList<E>>>;

fn locked<E>() -> Locked<E> {
    CachePadded::new(SpinLock::new(KindList::default()))
}

/// One CPU's part of the flock list: the flocks taken on it (and the
/// requests waiting for them), and the holder of the exclusive flock, if
/// any, which every shard records.
#[derive(Debug, Default)]
struct FlockShard {
    locks: KindList<FlockEntry>,
    exclusive: Option<FileId>,
    /// Shard 0, before sharding: the description that took shared flocks.
    shared_by: Option<FileId>,
}

impl FlockShard {
    /// A description whose flock here (or exclusive one anywhere)
    /// conflicts with an exclusive request.
    fn holder(&self) -> Option<FileId> {
        self.exclusive.or_else(|| self.locks.entries.first().map(|f| f.file))
    }

    /// Takes `file`'s flock out of the shard its home names; its slot.
    fn remove(&mut self, file: FileId) -> EntryId {
        let i = self.locks.entries.iter().position(|f| f.file == file).expect("the shard the home names");
        self.locks.entries.swap_remove(i).slot
    }
}

/// Which shard of its inode's flock list holds a description's flock, and
/// whether it is exclusive: set and cleared only under that shard's lock,
/// with the entry, by the description's own calls, so it lives on the
/// description's lines ([`OpenFile`](crate::OpenFile)) and two
/// descriptions never share it.
#[derive(Debug, Default)]
pub(crate) struct HomeShard(AtomicUsize);

impl HomeShard {
    /// The shard holding the flock and whether it is exclusive, if there
    /// is one.
    fn get(&self) -> Option<(usize, bool)> {
        let home = self.0.load(Ordering::Acquire).checked_sub(1)?;
        Some((home >> 1, home & 1 == 1))
    }

    /// Records `shard` unless another thread of the description already
    /// took a flock (the caller then starts over).
    fn claim(&self, shard: usize, exclusive: bool) -> bool {
        let home = (shard << 1 | usize::from(exclusive)) + 1;
        self.0.compare_exchange(0, home, Ordering::AcqRel, Ordering::Acquire).is_ok()
    }

    fn clear(&self) {
        self.0.store(0, Ordering::Release);
    }

    /// Whether the description holds a flock (or lease) in some shard.
    pub(crate) fn is_set(&self) -> bool {
        self.0.load(Ordering::Acquire) != 0
    }
}

/// How a flock request went under the shard locks.
enum Taken {
    Done(VfsResult<()>),
    /// Another thread of the description changed its flock meanwhile.
    Raced,
    /// Queued on `shard` behind a conflicting flock.
    Parked {
        shard: usize,
        id: u64,
        waiter: Arc<Waiter>,
    },
}

pub(crate) struct FileLockContext {
    mgr: Arc<LockManager>,
    ino: u64,
    /// Made on the first flock of the file: a file only record-locked or
    /// leased does not pay a line per CPU.
    flocks: OnceLock<LgPerCpu<TasLock, FlockShard>>,
    /// Whether shared flocks go to their CPU's shard: set (for good) when
    /// a second description asks for a shared flock; until then every
    /// flock is kept in shard 0 under its lock alone, so a file whose
    /// flocks are exclusive, or shared by one description, pays one lock
    /// per call.
    flocks_sharded: AtomicBool,
    records: Records,
    leases: CachePadded<Leases>,
}

impl fmt::Debug for FileLockContext {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("FileLockContext").field("ino", &self.ino).finish_non_exhaustive()
    }
}

impl FileLockContext {
    pub(crate) fn new(mgr: Arc<LockManager>, ino: u64) -> Self {
        FileLockContext {
            records: Records::new(mgr.records()),
            mgr,
            ino,
            flocks: OnceLock::new(),
            flocks_sharded: AtomicBool::new(false),
            leases: CachePadded::default(),
        }
    }

    fn flocks(&self) -> &LgPerCpu<TasLock, FlockShard> {
        self.flocks.get_or_init(LgPerCpu::new)
    }

    fn info(&self, kind: LockKind, write: bool, pid: i32, piece: Option<Piece>) -> LockInfo {
        let (start, end) = piece.map_or((0, None), |p| (p.start as u64, (p.end != OFFSET_MAX).then_some(p.end as u64)));
        LockInfo { kind, write, pid, ino: self.ino, start, end }
    }

    /// `flock` by description `file` (whose shard `home` names): `write`
    /// `None` unlocks; `wait` `None` is `LOCK_NB`. A lock of the other type
    /// is dropped first (waking its waiters), as in Linux.
    pub(crate) fn flock(
        &self,
        file: FileId,
        home: &HomeShard,
        pid: i32,
        write: Option<bool>,
        wait: Option<&Interrupt<'_>>,
    ) -> VfsResult<()> {
        let intr = wait.copied().unwrap_or_default();
        loop {
            let taken = {
                let mut sys = self.mgr.enter();
                match self.drop_flock(&mut sys, file, home, write) {
                    Some(Taken::Done(result)) => return result,
                    Some(_) => continue,
                    None => {}
                }
                let Some(write) = write else { return Ok(()) };
                match write {
                    false => self.take_shared(&mut sys, file, home, pid, wait.is_some()),
                    true => self.take_exclusive(&mut sys, file, home, pid, wait.is_some()),
                }
            };
            match taken {
                Taken::Done(result) => return result,
                Taken::Raced => {}
                Taken::Parked { shard, id, waiter } => {
                    intr.sleep(&waiter, None);
                    let _sys = self.mgr.enter();
                    self.flocks().lock_cpu(shard).locks.unqueue(id);
                    if intr.fired() {
                        return Err(Errno::EINTR);
                    }
                }
            }
        }
    }

    /// Drops `file`'s flock unless it is already of type `write`
    /// (`Done(Ok)`); `None` once it holds none, `Raced` to start over.
    fn drop_flock(&self, sys: &mut Shared<'_>, file: FileId, home: &HomeShard, write: Option<bool>) -> Option<Taken> {
        let (at, exclusive) = home.get()?;
        if Some(exclusive) == write {
            return Some(Taken::Done(Ok(())));
        }
        let owner = Owner::File(file);
        // An exclusive flock taken before sharding is marked in shard 0
        // alone, and sharding waits until none is held.
        if !exclusive || !self.flocks_sharded.load(Ordering::Acquire) {
            let mut shard = self.flocks().lock_cpu(at);
            if home.get() != Some((at, exclusive)) {
                return Some(Taken::Raced);
            }
            sys.remove(shard.remove(file));
            home.clear();
            if exclusive {
                shard.exclusive = None;
            }
            shard.locks.wake(sys, owner);
            return None;
        }
        let mut all = self.flocks().global_lock();
        if home.get() != Some((at, exclusive)) {
            return Some(Taken::Raced);
        }
        sys.remove(all.get_mut(at).remove(file));
        home.clear();
        for cpu in 0..all.cpus() {
            let shard = all.get_mut(cpu);
            shard.exclusive = None;
            shard.locks.wake(sys, owner);
        }
        None
    }

    /// A shared flock in this CPU's shard (shard 0 until sharding), which
    /// knows of any exclusive one.
    fn take_shared(&self, sys: &mut Shared<'_>, file: FileId, home: &HomeShard, pid: i32, wait: bool) -> Taken {
        let sharded = self.flocks_sharded.load(Ordering::Acquire);
        let mut shard = if sharded { self.flocks().local_lock() } else { self.flocks().lock_cpu(0) };
        if !sharded && self.flocks_sharded.load(Ordering::Acquire) {
            return Taken::Raced;
        }
        let here = shard.cpu();
        if let Some(holder) = shard.exclusive {
            return self.park_flock(&mut shard.locks, here, holder, file, wait);
        }
        if !sharded && shard.shared_by.is_some_and(|by| by != file) {
            drop(shard);
            let all = self.flocks().global_lock();
            if all.get(0).exclusive.is_none() {
                self.flocks_sharded.store(true, Ordering::Release);
            }
            return Taken::Raced;
        }
        if !home.claim(here, false) {
            return Taken::Raced;
        }
        shard.shared_by = Some(file);
        let slot = sys.insert(self.info(LockKind::Flock, false, pid, None));
        shard.locks.entries.push(FlockEntry { file, slot });
        Taken::Done(Ok(()))
    }

    /// An exclusive flock: no shard may hold a flock (before sharding,
    /// shard 0 holds them all).
    fn take_exclusive(&self, sys: &mut Shared<'_>, file: FileId, home: &HomeShard, pid: i32, wait: bool) -> Taken {
        if !self.flocks_sharded.load(Ordering::Acquire) {
            let mut shard = self.flocks().lock_cpu(0);
            if self.flocks_sharded.load(Ordering::Acquire) {
                return Taken::Raced;
            }
            if let Some(holder) = shard.holder() {
                return self.park_flock(&mut shard.locks, 0, holder, file, wait);
            }
            let Some(entry) = self.new_exclusive(sys, file, home, pid, 0) else { return Taken::Raced };
            shard.locks.entries.push(entry);
            shard.exclusive = Some(file);
            return Taken::Done(Ok(()));
        }
        let mut all = self.flocks().global_lock();
        let blocker = all.iter().enumerate().find_map(|(at, shard)| Some((at, shard.holder()?)));
        if let Some((at, holder)) = blocker {
            return self.park_flock(&mut all.get_mut(at).locks, at, holder, file, wait);
        }
        let here = vfscale_sync::cpu::current_cpu() % all.cpus();
        let Some(entry) = self.new_exclusive(sys, file, home, pid, here) else { return Taken::Raced };
        all.get_mut(here).locks.entries.push(entry);
        for cpu in 0..all.cpus() {
            all.get_mut(cpu).exclusive = Some(file);
        }
        Taken::Done(Ok(()))
    }

    /// Claims `home` for an exclusive flock of `file` in shard `here` and
    /// lists it system-wide; `None` if another thread of the description
    /// took a flock meanwhile.
    fn new_exclusive(
        &self,
        sys: &mut Shared<'_>,
        file: FileId,
        home: &HomeShard,
        pid: i32,
        here: usize,
    ) -> Option<FlockEntry> {
        let claimed = home.claim(here, true);
        claimed.then(|| FlockEntry { file, slot: sys.insert(self.info(LockKind::Flock, true, pid, None)) })
    }

    /// Queues a request of `file` behind `holder`'s flock in `shard`
    /// (EWOULDBLOCK unless it may `wait`): the holder's release locks that
    /// shard. `Raced` if the holder is `file` itself: another of its
    /// threads took a flock meanwhile, which the retry converts.
    fn park_flock(
        &self,
        locks: &mut KindList<FlockEntry>,
        shard: usize,
        holder: FileId,
        file: FileId,
        wait: bool,
    ) -> Taken {
        if holder == file {
            return Taken::Raced;
        }
        if !wait {
            return Taken::Done(Err(Errno::EWOULDBLOCK));
        }
        let id = self.mgr.next_waiter_id();
        Taken::Parked { shard, id, waiter: locks.park(id, Owner::File(holder)) }
    }

    /// The last reference to description `file` went: its flock, its OFD
    /// locks (if `ofd_locks`: a description that never asked for one
    /// leaves the record list alone) and its lease go.
    pub(crate) fn release_file(&self, file: FileId, home: &HomeShard, lease_home: &HomeShard, ofd_locks: bool) {
        let owner = Owner::File(file);
        let mut sys = self.mgr.enter();
        while self.drop_flock(&mut sys, file, home, None).is_some() {}
        if ofd_locks {
            self.remove_owner_locked(&mut sys, owner);
        }
        self.release_lease(&mut sys, file, lease_home);
    }
}
