//! Sleepable read-copy update (Linux `srcu_struct`, its classic two-phase
//! form): readers count themselves on their own CPU's slot and never wait;
//! [`Srcu::synchronize`] waits until every reader that was inside when it
//! was called has left.
//!
//! Invariant: a reader is counted, from [`Srcu::read_lock`] until its guard
//! drops, on the slot of the phase and CPU it picked, so a slot at zero has
//! no reader of that phase and CPU inside. The reader's increment and the
//! updater's unpublishing store are each followed by a `SeqCst` fence
//! before the reader loads what it protects and the updater reads the
//! slots (a Dekker pair): either the updater sees the reader counted, or
//! the reader sees the unpublished state.
//!
//! Use it where readers are many and short and an update must know when
//! the old value is no longer in use, without readers writing a shared
//! word (a descriptor table: a look-up writes only its CPU's slot, where a
//! counted reference would write the open file's count; `docs/design.md`,
//! "Conflict-free hot paths").
//! An idle `synchronize` (no reader inside) reads every CPU's slots and
//! returns; one that finds readers flips the phase, so new readers count
//! on the other slots, waits for the old phase's slots to drain, and does
//! it again for the other phase (a reader may have picked its phase just
//! before an earlier flip). Updates are serialized.
//! [`Srcu::synchronize_cpus`] does the same for the readers of some CPUs
//! only, reading no other CPU's slots: an updater that knows on which
//! CPUs the readers that may hold its value counted (a
//! [`SrcuSlot`](crate::srcu_slot::SrcuSlot) records it) waits for those
//! alone.
//!
//! ```
//! use vfscale_sync::srcu::Srcu;
//!
//! let srcu = Srcu::new();
//! {
//!     let _reader = srcu.read_lock();
//!     // read what the updater may unpublish
//! }
//! srcu.synchronize(); // no reader of before this call is still inside
//! ```

use crate::rwsem::{RwSem, SpinPolicy};
use crate::shim::{fence, seqcst_fence_for_loom, spin_wait, wake_spinners, yield_now, AtomicUsize, Ordering};
use crossbeam_utils::CachePadded;
use std::fmt;

/// Rounds a draining updater spins on a slot before it yields the CPU to
/// the reader it waits for (under loom every round spins, which parks).
const SPINS_BEFORE_YIELD: u32 = 100;

/// Sleepable RCU (see the module doc).
pub struct Srcu {
    /// Readers count on phase `phase & 1`; written only by an updater that
    /// found readers inside.
    phase: CachePadded<AtomicUsize>,
    /// Readers inside, per CPU and phase: a line per CPU, of this `Srcu`
    /// alone (an updater reads every CPU's, so they must not share a line
    /// with another object's, as the per-CPU arena's do).
    readers: Box<[CachePadded<[AtomicUsize; 2]>]>,
    /// Serializes updaters (they may wait long, so they sleep).
    updaters: RwSem<()>,
}

impl fmt::Debug for Srcu {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Srcu").field("phase", &(self.phase.load(Ordering::Relaxed) & 1)).finish_non_exhaustive()
    }
}

impl Default for Srcu {
    fn default() -> Self {
        Srcu::new()
    }
}

impl Srcu {
    /// An `Srcu` with no reader inside.
    pub fn new() -> Srcu {
        Srcu {
            phase: CachePadded::new(AtomicUsize::new(0)),
            readers: (0..crate::cpu::possible_cpus())
                .map(|_| CachePadded::new([AtomicUsize::new(0), AtomicUsize::new(0)]))
                .collect(),
            updaters: RwSem::new((), SpinPolicy::Block),
        }
    }

    /// Enters a read-side section on the caller's CPU; it ends when the
    /// guard drops. Never waits.
    pub fn read_lock(&self) -> SrcuReadGuard<'_> {
        self.read_lock_on(crate::cpu::current_cpu())
    }

    pub(crate) fn read_lock_on(&self, cpu: usize) -> SrcuReadGuard<'_> {
        let cpu = cpu % self.readers.len();
        let phase = self.phase.load(Ordering::Relaxed) & 1;
        let slot = &self.readers[cpu][phase];
        slot.fetch_add(1, Ordering::SeqCst);
        // The reader's half of the Dekker pair (module doc): what the
        // section loads comes after the increment.
        fence(Ordering::SeqCst);
        SrcuReadGuard { slot, cpu }
    }

    /// Waits until every reader inside when this was called has left. Call
    /// it after unpublishing what those readers may hold.
    pub fn synchronize(&self) {
        self.synchronize_cpus(CpuMask::ALL);
    }

    /// Waits until every reader that was inside on one of `cpus` when this
    /// was called has left (the CPUs that
    /// [`SrcuReadGuard::cpu`] names), reading no other CPU's slots. Call
    /// it after unpublishing what only those readers may hold.
    pub fn synchronize_cpus(&self, cpus: CpuMask) {
        // The updater's half of the Dekker pair: the caller's unpublishing
        // store comes before the slot loads.
        fence(Ordering::SeqCst);
        if self.idle(cpus) {
            return;
        }
        let _serial = self.updaters.write();
        for _ in 0..2 {
            let old = self.phase.fetch_add(1, Ordering::SeqCst) & 1;
            seqcst_fence_for_loom();
            for slots in self.slots_of(cpus) {
                drain(&slots[old]);
            }
        }
    }

    /// The slots of the CPUs in `cpus`.
    fn slots_of(&self, cpus: CpuMask) -> impl Iterator<Item = &[AtomicUsize; 2]> {
        self.readers.iter().enumerate().filter(move |&(cpu, _)| cpus.contains(cpu)).map(|(_, slots)| &**slots)
    }

    /// Whether no reader of either phase is inside on any of `cpus` right
    /// now.
    fn idle(&self, cpus: CpuMask) -> bool {
        self.slots_of(cpus).flatten().all(|slot| slot.load(Ordering::Acquire) == 0)
    }
}

/// A set of CPUs, each kept as its number modulo 64 (so on a machine of
/// more CPUs a set may hold some it was not given: a superset, which an
/// updater may wait for in vain but never wrongly skips).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CpuMask(u64);

impl CpuMask {
    /// No CPU.
    pub const EMPTY: CpuMask = CpuMask(0);
    /// Every CPU.
    pub const ALL: CpuMask = CpuMask(u64::MAX);

    /// The set of `cpu` alone.
    pub fn of(cpu: usize) -> CpuMask {
        CpuMask(1 << (cpu % 64))
    }

    /// Whether `cpu` is in the set.
    pub fn contains(self, cpu: usize) -> bool {
        self.0 & CpuMask::of(cpu).0 != 0
    }

    /// Whether the set has no CPU.
    pub fn is_empty(self) -> bool {
        self.0 == 0
    }

    /// The set as one word, for an atomic to keep.
    pub fn bits(self) -> u64 {
        self.0
    }

    /// The set a word from [`bits`](Self::bits) holds.
    pub fn from_bits(bits: u64) -> CpuMask {
        CpuMask(bits)
    }
}

/// Waits until `slot` has been seen at zero: every reader counted on it
/// when this began has left (readers that pick this slot later may count
/// on it meanwhile, but each such is one that read the phase before the
/// flip, and there are at most as many as threads).
fn drain(slot: &AtomicUsize) {
    let mut spins = 0;
    loop {
        // Acquire pairs with the leaving reader's release decrement.
        let seen = slot.load(Ordering::Acquire);
        if seen == 0 {
            return;
        }
        spins += 1;
        if spins < SPINS_BEFORE_YIELD || cfg!(loom) {
            spin_wait(slot, seen);
        } else {
            spins = 0;
            yield_now();
        }
    }
}

/// A read-side section of an [`Srcu`]; leaves when dropped.
pub struct SrcuReadGuard<'a> {
    /// The slot this reader counted on, whatever CPU it runs on later.
    slot: &'a AtomicUsize,
    /// The CPU whose slot that is.
    cpu: usize,
}

impl SrcuReadGuard<'_> {
    /// The CPU this reader counted on: what an updater waiting for it
    /// must [synchronize](Srcu::synchronize_cpus), wherever the reader
    /// runs now.
    pub fn cpu(&self) -> usize {
        self.cpu
    }
}

impl Drop for SrcuReadGuard<'_> {
    fn drop(&mut self) {
        // Release: the updater's acquire load orders the section's reads
        // before what it does once the slot drained.
        let before = self.slot.fetch_sub(1, Ordering::Release);
        debug_assert!(before > 0, "Srcu: reader count below zero");
        wake_spinners(self.slot);
    }
}

impl fmt::Debug for SrcuReadGuard<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SrcuReadGuard").field("cpu", &self.cpu).finish_non_exhaustive()
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use crate::audited::AtomicBool;
    use std::sync::Arc;
    use std::time::Duration;

    #[test]
    fn synchronize_waits_for_a_reader_inside() {
        waits_for_a_reader_on(1, Srcu::synchronize);
    }

    /// `update` on another thread returns only after the reader this takes
    /// on `cpu` has left.
    fn waits_for_a_reader_on(cpu: usize, update: impl FnOnce(&Srcu) + Send + 'static) {
        let srcu = Arc::new(Srcu::new());
        let left = Arc::new(AtomicBool::new(false));
        let reader = srcu.read_lock_on(cpu);
        let updater = {
            let (srcu, left) = (Arc::clone(&srcu), Arc::clone(&left));
            std::thread::spawn(move || {
                update(&srcu);
                assert!(left.load(Ordering::SeqCst), "the update returned under a reader it had to wait for");
            })
        };
        std::thread::sleep(Duration::from_millis(20));
        left.store(true, Ordering::SeqCst);
        drop(reader);
        updater.join().unwrap();
        assert!(srcu.idle(CpuMask::ALL));
    }

    /// `synchronize_cpus` waits for a reader inside on a CPU it names and
    /// returns with one inside on a CPU it does not name.
    #[test]
    fn synchronize_cpus_waits_for_the_readers_of_the_cpus_named() {
        let srcu = Srcu::new();
        let cpus = crate::cpu::possible_cpus();
        // (A machine of one CPU has no other CPU to leave out.)
        if cpus >= 2 {
            let elsewhere = srcu.read_lock_on(0);
            srcu.synchronize_cpus(CpuMask::of(1));
            drop(elsewhere);
        }
        waits_for_a_reader_on(1 % cpus, move |srcu| srcu.synchronize_cpus(CpuMask::of(1 % cpus)));
    }

    /// A steady stream of overlapping readers on one CPU never lets its
    /// slot reach zero; the phase flip still lets `synchronize` finish.
    #[test]
    fn synchronize_ends_under_a_stream_of_readers() {
        let srcu = Srcu::new();
        let stop = AtomicBool::new(false);
        std::thread::scope(|s| {
            for _ in 0..2 {
                s.spawn(|| {
                    let mut held = srcu.read_lock_on(0);
                    while !stop.load(Ordering::Relaxed) {
                        let next = srcu.read_lock_on(0);
                        drop(std::mem::replace(&mut held, next));
                    }
                });
            }
            for _ in 0..100 {
                srcu.synchronize();
            }
            stop.store(true, Ordering::Relaxed);
        });
    }

    #[cfg(feature = "audit")]
    #[test]
    fn readers_on_two_cpus_are_conflict_free() {
        let srcu = Srcu::new();
        let read = |_: usize| {
            drop(srcu.read_lock());
            Ok(())
        };
        let verdict = crate::conflict::check_pair(&read, &read).unwrap();
        assert!(verdict.conflict_free(), "{:?}", verdict.conflicts);
    }
}

#[cfg(all(test, loom))]
mod loom_models {
    use super::*;
    use loom::sync::atomic::AtomicBool;
    use loom::sync::Arc;
    use loom::thread;

    /// A reader reads a published value while an updater unpublishes it,
    /// synchronizes and then overwrites it (as a free would): loom reports
    /// the read and the write as a data race unless `synchronize` waited.
    #[test]
    fn no_reader_sees_a_freed_value() {
        loom::model(|| {
            let srcu = Arc::new(Srcu::new());
            let value = Arc::new(crate::shim::UnsafeCell::new(7usize));
            let published = Arc::new(AtomicBool::new(true));
            let reader = {
                let (srcu, value, published) = (Arc::clone(&srcu), Arc::clone(&value), Arc::clone(&published));
                thread::spawn(move || {
                    let _guard = srcu.read_lock_on(1);
                    if published.load(Ordering::Acquire) {
                        // SAFETY: published, so the updater has not passed
                        // synchronize yet (what the model checks).
                        assert_eq!(value.with(|p| unsafe { *p }), 7);
                    }
                })
            };
            published.store(false, Ordering::Release);
            srcu.synchronize();
            // SAFETY: unpublished, and every reader that saw it published
            // has left.
            value.with_mut(|p| unsafe { *p = 0 });
            reader.join().unwrap();
        });
    }

    /// A reader that picked its phase before a flip keeps the next
    /// updater waiting until it leaves.
    #[test]
    fn a_reader_of_the_old_phase_holds_the_next_update() {
        loom::model(|| {
            let srcu = Arc::new(Srcu::new());
            let left = Arc::new(AtomicBool::new(false));
            let guard = srcu.read_lock_on(0);
            let updater = {
                let (srcu, left) = (Arc::clone(&srcu), Arc::clone(&left));
                thread::spawn(move || {
                    srcu.synchronize();
                    assert!(left.load(Ordering::SeqCst));
                })
            };
            let reader = {
                let srcu = Arc::clone(&srcu);
                thread::spawn(move || drop(srcu.read_lock_on(1)))
            };
            left.store(true, Ordering::SeqCst);
            drop(guard);
            updater.join().unwrap();
            reader.join().unwrap();
        });
    }
}
