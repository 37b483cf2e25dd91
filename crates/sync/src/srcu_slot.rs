//! A pointer that readers load inside an [`Srcu`](crate::srcu::Srcu)'s read sections and that
//! remembers whether a reader borrowed the value it holds, so taking a
//! value no reader borrowed needs no grace period: a descriptor table's
//! close of a descriptor no look-up used reads no other CPU's reader count.
//!
//! Invariant: each publication of a value has a generation, one above the
//! last; `borrowed` only grows (`fetch_max`), and a reader uses a value
//! only after `borrowed` reached the value's generation and then, loading
//! both again, found the same value of the same generation published. A
//! take unpublishes the value, then reads `borrowed`, all in one `SeqCst`
//! order with the reader's loads: either it finds the generation borrowed
//! (and the caller synchronizes, waiting for the reader's section) or the
//! reader finds the value gone. Publications and takes of one slot are
//! serialized by its owner.
//!
//! The first reader of a publication writes `borrowed` once; later readers
//! only read it, so readers of one value share no written line after the
//! first.

use crate::shim::{seqcst_fence_for_loom, AtomicPtr, AtomicU64, Ordering};
use crate::srcu::SrcuReadGuard;
use std::fmt;
use std::ptr;

/// A published pointer (see the module doc). Null is "none".
pub struct SrcuSlot<T> {
    value: AtomicPtr<T>,
    /// The generation of the value published last.
    generation: AtomicU64,
    /// The highest generation a reader borrowed.
    borrowed: AtomicU64,
}

/// A value a take unpublished.
#[derive(Debug)]
pub struct Taken<T> {
    /// The value (not null).
    pub value: *mut T,
    /// Whether a reader borrowed it: the caller must then synchronize the
    /// [`Srcu`](crate::srcu::Srcu) whose sections read the slot before the
    /// value goes.
    pub borrowed: bool,
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
        SrcuSlot { value: AtomicPtr::new(ptr::null_mut()), generation: AtomicU64::new(0), borrowed: AtomicU64::new(0) }
    }

    /// Publishes `value` (not null) in the empty slot. Serialized with the
    /// slot's other publications and takes by its owner.
    pub fn publish(&self, value: *mut T) {
        debug_assert!(!value.is_null(), "SrcuSlot: publishing null");
        let generation = self.generation.load(Ordering::Relaxed) + 1;
        self.generation.store(generation, Ordering::SeqCst);
        let old = self.value.swap(value, Ordering::SeqCst);
        debug_assert!(old.is_null(), "SrcuSlot: publishing into a full slot");
    }

    /// The published value, or null; usable until `_section` ends (it may
    /// be taken meanwhile, but not released before the section ends).
    pub fn borrow(&self, _section: &SrcuReadGuard<'_>) -> *mut T {
        loop {
            let generation = self.generation.load(Ordering::SeqCst);
            let value = self.value.load(Ordering::SeqCst);
            if value.is_null() {
                return value;
            }
            if self.borrowed.load(Ordering::SeqCst) < generation {
                self.borrowed.fetch_max(generation, Ordering::SeqCst);
            }
            // Still the value of that generation, now that it is borrowed
            // (the reader's half of the store-then-load pair).
            seqcst_fence_for_loom();
            if self.value.load(Ordering::SeqCst) == value && self.generation.load(Ordering::SeqCst) == generation {
                return value;
            }
        }
    }

    /// Unpublishes the value, if any, and says whether a reader borrowed
    /// it. Serialized with the slot's other publications and takes.
    pub fn take(&self) -> Option<Taken<T>> {
        let value = self.value.swap(ptr::null_mut(), Ordering::SeqCst);
        if value.is_null() {
            return None;
        }
        // The owner's half of the pair: the unpublishing swap, then the
        // load of `borrowed`.
        seqcst_fence_for_loom();
        let borrowed = self.borrowed.load(Ordering::SeqCst) >= self.generation.load(Ordering::SeqCst);
        Some(Taken { value, borrowed })
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use crate::srcu::Srcu;

    #[test]
    fn a_take_knows_whether_the_value_was_borrowed() {
        let srcu = Srcu::new();
        let slot = SrcuSlot::new();
        let (mut a, mut b) = (1u32, 2u32);
        assert!(slot.take().is_none());
        slot.publish(&mut a);
        let taken = slot.take().unwrap();
        assert_eq!((taken.value, taken.borrowed), (&mut a as *mut u32, false), "never borrowed");
        slot.publish(&mut b);
        assert_eq!(slot.borrow(&srcu.read_lock()), &mut b as *mut u32);
        assert!(slot.take().unwrap().borrowed);
        assert!(slot.borrow(&srcu.read_lock()).is_null());
        // The same address published again is a new generation, not yet
        // borrowed.
        slot.publish(&mut b);
        assert!(!slot.take().unwrap().borrowed);
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
        if taken.borrowed {
            srcu.synchronize();
        }
        // SAFETY: taken, and any reader that borrowed it has left.
        cell.with_mut(|p| unsafe { *p = 0 });
    }

    /// A reader borrows and reads the published value while the owner
    /// takes and releases it: loom reports a data race unless every reader
    /// that got the value was waited for.
    #[test]
    fn no_reader_sees_a_released_value() {
        loom::model(|| {
            let srcu = Arc::new(Srcu::new());
            let slot = Arc::new(SrcuSlot::new());
            let cell = Arc::new(UnsafeCell::new(7));
            publish(&slot, &cell);
            let reader = reader(&srcu, &slot, 1);
            take_and_release(&srcu, &slot, &cell);
            reader.join().unwrap();
        });
    }

    /// A reader that loaded an earlier publication and stalled cannot make
    /// a later one look unborrowed: after a take and a new publication, a
    /// second reader borrows the new value, and its take still waits.
    #[test]
    fn a_stale_reader_does_not_hide_a_later_borrow() {
        loom::model(|| {
            let srcu = Arc::new(Srcu::new());
            let slot = Arc::new(SrcuSlot::new());
            let (first, second) = (Arc::new(UnsafeCell::new(1)), Arc::new(UnsafeCell::new(2)));
            publish(&slot, &first);
            let stale = reader(&srcu, &slot, 0);
            take_and_release(&srcu, &slot, &first);
            publish(&slot, &second);
            let later = reader(&srcu, &slot, 1);
            take_and_release(&srcu, &slot, &second);
            stale.join().unwrap();
            later.join().unwrap();
        });
    }
}
