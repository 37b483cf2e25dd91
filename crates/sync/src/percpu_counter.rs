//! A statistics count whose updates touch only one CPU's slot (Linux
//! `percpu_counter`, read with `percpu_counter_sum`).
//!
//! Invariant: the value is the sum of the slots. An update adds to one
//! slot; [`add`](PercpuCounter::add) picks the caller's CPU and returns it,
//! so that an update paired with an earlier one (a deferred release and its
//! registration) can go to the same slot with
//! [`add_at`](PercpuCounter::add_at) and keep every slot's share
//! meaningful on its own (never below zero, say).
//!
//! Cost: an update is one uncontended atomic add on a line only that CPU
//! writes; [`sum`](PercpuCounter::sum) reads every CPU's slot and is exact
//! only when no update runs concurrently. Do not use it for a count that is
//! read on every operation or must be compared exactly while it changes
//! (a reference count: use [`PercpuRef`](crate::PercpuRef)).
//!
//! ```
//! use vfscale_sync::percpu_counter::PercpuCounter;
//!
//! let dentries = PercpuCounter::new();
//! let cpu = dentries.add(1);
//! dentries.add(2);
//! dentries.add_at(cpu, -1);
//! assert_eq!(dentries.sum(), 2);
//! ```

use crate::percpu_alloc::Slots;
use crate::shim::Ordering;
use std::fmt;

/// A count split over per-CPU slots.
pub struct PercpuCounter {
    slots: Slots,
}

impl fmt::Debug for PercpuCounter {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PercpuCounter").field("sum", &self.sum()).finish()
    }
}

impl Default for PercpuCounter {
    fn default() -> Self {
        PercpuCounter::new()
    }
}

impl PercpuCounter {
    /// A counter at zero.
    pub fn new() -> PercpuCounter {
        PercpuCounter { slots: Slots::new() }
    }

    /// Adds `n` (may be negative) on the caller's CPU; returns that CPU.
    #[inline]
    pub fn add(&self, n: isize) -> usize {
        let cpu = crate::cpu::current_cpu();
        self.add_at(cpu, n);
        cpu
    }

    /// Adds `n` on `cpu`'s slot.
    #[inline]
    pub fn add_at(&self, cpu: usize, n: isize) {
        self.slots.get(cpu).fetch_add(n, Ordering::AcqRel);
    }

    /// The sum of all slots.
    pub fn sum(&self) -> isize {
        (0..self.slots.len()).map(|cpu| self.slots.get(cpu).load(Ordering::Acquire)).sum()
    }

    /// Whether every slot is zero right now: with updates paired on one
    /// slot (see the module doc), every update made before this call has
    /// been undone. Exact for that even while others update.
    pub fn all_zero(&self) -> bool {
        (0..self.slots.len()).all(|cpu| self.slots.get(cpu).load(Ordering::Acquire) == 0)
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    #[test]
    fn updates_on_any_cpu_sum_up() {
        let c = PercpuCounter::new();
        c.add_at(0, 5);
        c.add_at(1, -2);
        c.add(4);
        assert_eq!(c.sum(), 7);
        assert!(!c.all_zero());
    }

    #[test]
    fn paired_updates_leave_every_slot_zero() {
        let c = PercpuCounter::new();
        let cpus: Vec<usize> = (0..10).map(|_| c.add(1)).collect();
        for cpu in cpus {
            assert!(!c.all_zero());
            c.add_at(cpu, -1);
        }
        assert!(c.all_zero());
    }

    #[cfg(feature = "audit")]
    #[test]
    fn updates_on_two_cpus_are_conflict_free() {
        let c = PercpuCounter::new();
        let add = |_: usize| {
            c.add(1);
            Ok(())
        };
        let verdict = crate::conflict::check_pair(&add, &add).unwrap();
        assert!(verdict.conflict_free(), "{:?}", verdict.conflicts);
        let sum = |_: usize| {
            c.sum();
            Ok(())
        };
        assert!(!crate::conflict::check_pair(&add, &sum).unwrap().conflict_free(), "a sum reads every slot");
    }

    #[test]
    fn stress_threads_sum_exactly_when_quiet() {
        let budget = crate::test_support::Budget::new(50_000);
        let c = PercpuCounter::new();
        let done: usize = std::thread::scope(|s| {
            let workers: Vec<_> = (0..4)
                .map(|_| {
                    s.spawn(|| {
                        let mut i = 0;
                        while budget.allows(i) {
                            let cpu = c.add(2);
                            c.add_at(cpu, -1);
                            i += 1;
                        }
                        i
                    })
                })
                .collect();
            workers.into_iter().map(|w| w.join().unwrap()).sum()
        });
        assert_eq!(c.sum(), done as isize);
    }
}

#[cfg(all(test, loom))]
mod loom_models {
    use super::*;
    use loom::sync::Arc;
    use loom::thread;

    /// Updates on two CPUs and a paired undo sum exactly after the join,
    /// and `all_zero` never claims zero while a paired update is pending.
    #[test]
    fn paired_updates_and_sum() {
        loom::model(|| {
            let c = Arc::new(PercpuCounter::new());
            let workers: Vec<_> = (0..2)
                .map(|cpu| {
                    let c = Arc::clone(&c);
                    thread::spawn(move || {
                        c.add_at(cpu, 1);
                        assert!(!c.all_zero());
                        c.add_at(cpu, -1);
                    })
                })
                .collect();
            for w in workers {
                w.join().unwrap();
            }
            assert!(c.all_zero());
            assert_eq!(c.sum(), 0);
        });
    }
}
