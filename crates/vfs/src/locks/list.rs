//! The system-wide lock list (`file_lock_list`), read by `/proc/locks`, in
//! the designs of seed 004: per-CPU lists under an lglock (two spinlock
//! flavours), per-CPU lists under a per-CPU rwsem (Linux 4.9+), and the
//! "before" where it sits inside the one global lock (see
//! [`super::LockManager`]).
//!
//! Invariant: every lock held on some inode has exactly one entry here,
//! named by the [`EntryId`] returned by `insert`, from its insertion into an
//! inode's list until its removal; `insert` and `remove` touch one CPU's
//! list, only a listing sees all of them at once.

use super::LockInfo;
use std::fmt;
use vfscale_sync::lglock::LgPerCpu;
use vfscale_sync::percpu_rwsem::PerCpuRwSem;
use vfscale_sync::spin::{RawSpinLock, TasLock};

/// Names one entry: the CPU list it went to and its index there.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct EntryId {
    cpu: u32,
    index: u32,
}

/// One list: entries in slots reused through a free list.
#[derive(Debug, Default)]
pub(crate) struct Slab {
    entries: Vec<Option<LockInfo>>,
    free: Vec<u32>,
}

impl Slab {
    pub(crate) fn insert(&mut self, cpu: u32, info: LockInfo) -> EntryId {
        let index = match self.free.pop() {
            Some(index) => {
                self.entries[index as usize] = Some(info);
                index
            }
            None => {
                self.entries.push(Some(info));
                u32::try_from(self.entries.len() - 1).expect("fewer than 2^32 locks per CPU")
            }
        };
        EntryId { cpu, index }
    }

    pub(crate) fn remove(&mut self, slot: EntryId) {
        let entry = self.entries.get_mut(slot.index as usize).and_then(Option::take);
        debug_assert!(entry.is_some(), "lock list: removal of a free slot {slot:?}");
        self.free.push(slot.index);
    }

    pub(crate) fn for_each(&self, f: &mut dyn FnMut(&LockInfo)) {
        self.entries.iter().flatten().for_each(f);
    }
}

/// A per-CPU variant of the list.
pub(crate) trait LockList: Send + Sync + fmt::Debug {
    fn insert(&self, info: LockInfo) -> EntryId;
    fn remove(&self, slot: EntryId);
    /// Visits every entry with the whole list frozen (the global side).
    fn for_each(&self, f: &mut dyn FnMut(&LockInfo));
}

/// Per-CPU lists under an lglock of spinlocks of flavour `R` (3.13-4.8):
/// insert and remove take one CPU's lock, a listing takes all of them.
pub(crate) struct LgLockList<R: RawSpinLock> {
    lists: LgPerCpu<R, Slab>,
}

impl<R: RawSpinLock> LgLockList<R> {
    pub(crate) fn new() -> Self {
        LgLockList { lists: LgPerCpu::new() }
    }
}

impl<R: RawSpinLock> fmt::Debug for LgLockList<R> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("LgLockList").field("cpus", &self.lists.cpus()).finish()
    }
}

impl<R: RawSpinLock> LockList for LgLockList<R> {
    fn insert(&self, info: LockInfo) -> EntryId {
        let mut local = self.lists.local_lock();
        let cpu = local.cpu() as u32;
        local.insert(cpu, info)
    }

    fn remove(&self, slot: EntryId) {
        self.lists.lock_cpu(slot.cpu as usize).remove(slot);
    }

    fn for_each(&self, f: &mut dyn FnMut(&LockInfo)) {
        self.lists.global_lock().iter().for_each(|slab| slab.for_each(f));
    }
}

/// Per-CPU `{spinlock, list}` pairs plus a per-CPU rwsem (`file_rwsem`,
/// Linux 4.9+): insert and remove hold the rwsem for read (a per-CPU
/// counter) and their CPU's spinlock; a listing holds it for write, which
/// keeps every inserter out, so the per-CPU spinlocks it then takes are
/// free.
pub(crate) struct RwSemLockList {
    sem: PerCpuRwSem<()>,
    lists: LgPerCpu<TasLock, Slab>,
}

impl RwSemLockList {
    pub(crate) fn new() -> Self {
        RwSemLockList { sem: PerCpuRwSem::new(()), lists: LgPerCpu::new() }
    }
}

impl fmt::Debug for RwSemLockList {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RwSemLockList").field("cpus", &self.lists.cpus()).finish()
    }
}

impl LockList for RwSemLockList {
    fn insert(&self, info: LockInfo) -> EntryId {
        let _read = self.sem.read();
        let mut local = self.lists.local_lock();
        let cpu = local.cpu() as u32;
        local.insert(cpu, info)
    }

    fn remove(&self, slot: EntryId) {
        let _read = self.sem.read();
        self.lists.lock_cpu(slot.cpu as usize).remove(slot);
    }

    fn for_each(&self, f: &mut dyn FnMut(&LockInfo)) {
        let _write = self.sem.write();
        self.lists.global_lock().iter().for_each(|slab| slab.for_each(f));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::locks::LockKind;
    use vfscale_sync::spin::{McsLock, TasLock};

    fn info(ino: u64) -> LockInfo {
        LockInfo { kind: LockKind::Posix, write: true, pid: 1, ino, start: 0, end: None }
    }

    fn exercise(list: &dyn LockList) {
        let slots: Vec<EntryId> = (0..10).map(|i| list.insert(info(i))).collect();
        for slot in slots.iter().step_by(2) {
            list.remove(*slot);
        }
        let mut seen = Vec::new();
        list.for_each(&mut |i| seen.push(i.ino));
        seen.sort();
        assert_eq!(seen, [1, 3, 5, 7, 9]);
        std::thread::scope(|s| {
            for t in 0..4u64 {
                s.spawn(move || {
                    for i in 0..200 {
                        let slot = list.insert(info(100 + t * 1000 + i));
                        list.remove(slot);
                    }
                });
            }
        });
        let mut count = 0;
        list.for_each(&mut |_| count += 1);
        assert_eq!(count, 5, "inserts and removes balance");
    }

    #[test]
    fn every_variant_lists_what_is_held() {
        exercise(&LgLockList::<TasLock>::new());
        exercise(&LgLockList::<McsLock>::new());
        exercise(&RwSemLockList::new());
    }

    #[test]
    fn slab_reuses_slots() {
        let mut slab = Slab::default();
        let a = slab.insert(0, info(1));
        slab.remove(a);
        let b = slab.insert(0, info(2));
        assert_eq!(a, b);
        let mut n = 0;
        slab.for_each(&mut |_| n += 1);
        assert_eq!(n, 1);
    }
}
