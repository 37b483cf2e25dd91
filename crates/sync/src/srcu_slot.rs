//! A pointer that readers load inside an [`Srcu`](crate::srcu::Srcu)'s read sections and that
//! remembers on which CPUs readers borrowed the value it holds, so taking
//! a value no reader borrowed needs no grace period, and taking one needs
//! a grace period for those CPUs' readers alone: a descriptor table's
//! close of a descriptor no look-up used reads no other CPU's reader
//! count, nor does the close of one that only look-ups on the closing
//! CPU used.
//!
//! Invariant: each publication of a value has a generation, one above the
//! last, and clears `readers` first; `readers` only gains CPUs between
//! publications (`fetch_or`), and a reader uses a value only after adding
//! its section's CPU to `readers` and then, loading both again, finding
//! the same value of the same generation published (so its CPU was added
//! after that publication cleared the set). A take unpublishes the value,
//! then reads `readers`, all in one `SeqCst` order with the reader's
//! loads: either it finds the reader's CPU (and the caller synchronizes
//! that CPU's readers, waiting for the section) or the reader finds the
//! value gone. A reader that loaded an older value may add its CPU after
//! the clear: the set is then a superset, never short. Publications and
//! takes of one slot are serialized by its owner.
//!
//! The first reader of a publication on each CPU writes `readers` once;
//! later readers only read it, so readers of one value share no written
//! line after the first on each CPU.

use crate::shim::{seqcst_fence_for_loom, AtomicPtr, AtomicU64, Ordering};
use crate::srcu::{CpuMask, SrcuReadGuard};
use std::fmt;
use std::ptr;

/// A published pointer (see the module doc). Null is "none".
pub struct SrcuSlot<T> {
    value: AtomicPtr<T>,
    /// The generation of the value published last.
    generation: AtomicU64,
    /// The CPUs ([`CpuMask::bits`]) of the sections that borrowed it.
    readers: AtomicU64,
}

/// A value a take unpublished.
#[derive(Debug)]
pub struct Taken<T> {
    /// The value (not null).
    pub value: *mut T,
    /// The CPUs of the read sections that may have borrowed it (empty when
    /// none did): before the value goes, the caller must
    /// [synchronize](crate::srcu::Srcu::synchronize_cpus) those CPUs'
    /// readers of the [`Srcu`](crate::srcu::Srcu) whose sections read the
    /// slot.
    pub readers: CpuMask,
}

impl<T> Default for SrcuSlot<T> {
    fn default() -> Self {
        SrcuSlot::new()
    }
}

impl<T> fmt::Debug for SrcuSlot<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SrcuSlot").field("generation", &self.generation.load(Ordering::Relaxed)).finish_non_exhaustive()
    }
}

impl<T> SrcuSlot<T> {
    /// An empty slot.
    pub fn new() -> SrcuSlot<T> {
        SrcuSlot { value: AtomicPtr::new(ptr::null_mut()), generation: AtomicU64::new(0), readers: AtomicU64::new(0) }
    }

    /// Publishes `value` (not null) in the empty slot. Serialized with the
    /// slot's other publications and takes by its owner.
    pub fn publish(&self, value: *mut T) {
        debug_assert!(!value.is_null(), "SrcuSlot: publishing null");
        self.readers.store(0, Ordering::SeqCst);
        let generation = self.generation.load(Ordering::Relaxed) + 1;
        self.generation.store(generation, Ordering::SeqCst);
        let old = self.value.swap(value, Ordering::SeqCst);
        debug_assert!(old.is_null(), "SrcuSlot: publishing into a full slot");
    }

    /// The published value, or null; usable until `section` ends (it may
    /// be taken meanwhile, but not released before the section ends).
    pub fn borrow(&self, section: &SrcuReadGuard<'_>) -> *mut T {
        let cpu = CpuMask::of(section.cpu()).bits();
        loop {
            let generation = self.generation.load(Ordering::SeqCst);
            let value = self.value.load(Ordering::SeqCst);
            if value.is_null() {
                return value;
            }
            if self.readers.load(Ordering::SeqCst) & cpu == 0 {
                self.readers.fetch_or(cpu, Ordering::SeqCst);
            }
            // Still the value of that generation, now that it is borrowed
            // (the reader's half of the store-then-load pair).
            seqcst_fence_for_loom();
            if self.value.load(Ordering::SeqCst) == value && self.generation.load(Ordering::SeqCst) == generation {
                return value;
            }
        }
    }

    /// Unpublishes the value, if any, and says on which CPUs readers may
    /// have borrowed it. Serialized with the slot's other publications and
    /// takes.
    pub fn take(&self) -> Option<Taken<T>> {
        let value = self.value.swap(ptr::null_mut(), Ordering::SeqCst);
        if value.is_null() {
            return None;
        }
        // The owner's half of the pair: the unpublishing swap, then the
        // load of `readers`.
        seqcst_fence_for_loom();
        let readers = CpuMask::from_bits(self.readers.load(Ordering::SeqCst));
        Some(Taken { value, readers })
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use crate::srcu::Srcu;

    #[test]
    fn a_take_knows_on_which_cpus_the_value_was_borrowed() {
        let srcu = Srcu::new();
        let slot = SrcuSlot::new();
        let (mut a, mut b) = (1u32, 2u32);
        assert!(slot.take().is_none());
        slot.publish(&mut a);
        let taken = slot.take().unwrap();
        assert_eq!((taken.value, taken.readers), (&mut a as *mut u32, CpuMask::EMPTY), "never borrowed");
        slot.publish(&mut b);
        let section = srcu.read_lock_on(1);
        assert_eq!(slot.borrow(&section), &mut b as *mut u32);
        assert_eq!(slot.borrow(&srcu.read_lock_on(1)), &mut b as *mut u32);
        assert_eq!(slot.take().unwrap().readers, CpuMask::of(section.cpu()), "borrowed on one CPU alone");
        drop(section);
        assert!(slot.borrow(&srcu.read_lock()).is_null());
        // The same address published again is a new generation, not yet
        // borrowed.
        slot.publish(&mut b);
        assert!(slot.take().unwrap().readers.is_empty());
    }
}

#[cfg(all(test, loom))]
mod loom_models {
    use super::*;
    use crate::shim::UnsafeCell;
    use crate::srcu::Srcu;
    use loom::sync::Arc;
    use loom::thread;

    type Cell = UnsafeCell<usize>;

    fn publish(slot: &SrcuSlot<Cell>, cell: &Arc<Cell>) {
        slot.publish(Arc::as_ptr(cell).cast_mut());
    }

    /// Borrows in a section of its own on `cpu` and reads what it got
    /// through loom's tracked cell.
    fn reader(srcu: &Arc<Srcu>, slot: &Arc<SrcuSlot<Cell>>, cpu: usize) -> thread::JoinHandle<()> {
        let (srcu, slot) = (Arc::clone(srcu), Arc::clone(slot));
        thread::spawn(move || {
            let section = srcu.read_lock_on(cpu);
            let seen = slot.borrow(&section);
            if !seen.is_null() {
                // SAFETY: the cells outlive the model; the read itself is
                // what loom checks against the owner's overwrite.
                let value = unsafe { &*seen }.with(|p| unsafe { *p });
                assert_ne!(value, 0, "read a released value");
            }
        })
    }

    /// Takes the published value, synchronizes if it was borrowed, and
    /// overwrites it as a release would.
    fn take_and_release(srcu: &Srcu, slot: &SrcuSlot<Cell>, cell: &Cell) {
        let taken = slot.take().unwrap();
        srcu.synchronize_cpus(taken.readers);
        // SAFETY: taken, and any reader that borrowed it has left.
        cell.with_mut(|p| unsafe { *p = 0 });
    }

    /// A reader borrows and reads the published value while the owner
    /// takes and releases it: loom reports a data race unless every reader
    /// that got the value was waited for.
    #[test]
    fn no_reader_sees_a_released_value() {
        readers_race_a_take(&[1]);
    }

    /// Readers on `cpus` borrow the published value while the owner takes
    /// and releases it.
    fn readers_race_a_take(cpus: &'static [usize]) {
        loom::model(move || {
            let srcu = Arc::new(Srcu::new());
            let slot = Arc::new(SrcuSlot::new());
            let cell = Arc::new(UnsafeCell::new(7));
            publish(&slot, &cell);
            let readers: Vec<_> = cpus.iter().map(|&cpu| reader(&srcu, &slot, cpu)).collect();
            take_and_release(&srcu, &slot, &cell);
            for reader in readers {
                reader.join().unwrap();
            }
        });
    }

    /// A reader that loaded an earlier publication and stalled cannot make
    /// a later one look unborrowed: after a take and a new publication, a
    /// second reader borrows the new value, and its take still waits.
    #[test]
    fn a_stale_reader_does_not_hide_a_later_borrow() {
        stale_reader_beside_a_later_borrow(0, 1);
    }

    /// The same with both readers on one CPU: the later reader may skip
    /// its `fetch_or`, finding the CPU in the set, which the stale one may
    /// have set before the new publication cleared it.
    #[test]
    fn a_stale_reader_on_the_same_cpu_does_not_hide_a_later_borrow() {
        stale_reader_beside_a_later_borrow(1, 1);
    }

    fn stale_reader_beside_a_later_borrow(stale_cpu: usize, later_cpu: usize) {
        loom::model(move || {
            let srcu = Arc::new(Srcu::new());
            let slot = Arc::new(SrcuSlot::new());
            let (first, second) = (Arc::new(UnsafeCell::new(1)), Arc::new(UnsafeCell::new(2)));
            publish(&slot, &first);
            let stale = reader(&srcu, &slot, stale_cpu);
            take_and_release(&srcu, &slot, &first);
            publish(&slot, &second);
            let later = reader(&srcu, &slot, later_cpu);
            take_and_release(&srcu, &slot, &second);
            stale.join().unwrap();
            later.join().unwrap();
        });
    }

    /// Readers on two CPUs borrow the value while the owner takes it: the
    /// take's set names both CPUs whose readers may still hold it.
    #[test]
    fn readers_on_two_cpus_are_both_waited_for() {
        readers_race_a_take(&[0, 1]);
    }

    /// Two readers on one CPU: the second may find the CPU already in the
    /// set and skip its `fetch_or`; the take still waits for both.
    #[test]
    fn readers_on_one_cpu_are_both_waited_for() {
        readers_race_a_take(&[1, 1]);
    }
}
