//! Local/global lock (Linux `lglock`, 3.13-4.8): one cache-padded raw
//! spinlock per possible CPU. A *local* locker takes one CPU's lock; the
//! *global* locker takes all of them, in index order.
//!
//! Invariant: a local holder owns exactly one slot and the global holder owns
//! every slot, so a global holder excludes all local holders and every other
//! global holder, while local holders of different slots run in parallel.
//! Global lockers all take slots in ascending order, so they cannot deadlock
//! with each other.
//!
//! Use it for data split per CPU where the common operation touches one
//! slot (insert into this CPU's list) and a rare one must see all slots at
//! once (the kernel's `file_lock_list` read by `/proc/locks`):
//! [`LgPerCpu`] bundles the per-CPU data with the lock. Do not use it when
//! the global side is frequent: it costs one lock round-trip per CPU. The
//! kernel replaced it with a per-CPU rwsem in 4.9
//! ([`PerCpuRwSem`](crate::percpu_rwsem::PerCpuRwSem)).
//! Each slot's lock and data share one cache line, so a local locker that
//! finds its slot taken over by a global locker pays one miss, not two.
//! Unlike the kernel, a userspace thread may migrate while it holds a local
//! lock, so the guard remembers the slot it locked ([`LgLocalGuard::cpu`]);
//! taking the global lock while holding a local one deadlocks.
//!
//! ```
//! use vfscale_sync::lglock::LgPerCpu;
//! use vfscale_sync::spin::TicketLock;
//!
//! let lists: LgPerCpu<TicketLock, Vec<u32>> = LgPerCpu::with_cpus(4);
//! lists.local_lock().push(1);
//! lists.lock_cpu(3).push(2);
//! let all = lists.global_lock();
//! assert_eq!(all.iter().map(Vec::len).sum::<usize>(), 2);
//! assert_eq!(all.get(3), &[2]);
//! ```

use crate::cpu::{current_cpu, possible_cpus};
use crate::shim::UnsafeCell;
use crate::spin::{RawSpinLock, TicketLock};
use crossbeam_utils::CachePadded;
use std::fmt;
use std::marker::PhantomData;
use std::ops::{Deref, DerefMut};

/// One raw spinlock of flavour `R` per CPU, with a local and a global mode.
pub struct LgLock<R: RawSpinLock = TicketLock> {
    inner: LgPerCpu<R, ()>,
}

impl<R: RawSpinLock> LgLock<R> {
    /// One slot per possible CPU.
    pub fn new() -> Self {
        Self::with_cpus(possible_cpus())
    }

    /// Exactly `cpus` slots; the current CPU maps to slot `cpu % cpus`.
    ///
    /// # Panics
    ///
    /// If `cpus` is zero.
    pub fn with_cpus(cpus: usize) -> Self {
        Self { inner: LgPerCpu::with_cpus(cpus) }
    }

    /// The number of slots.
    pub fn cpus(&self) -> usize {
        self.inner.cpus()
    }

    /// Locks the current CPU's slot.
    pub fn local_lock(&self) -> LgLocalGuard<'_, R> {
        LgLocalGuard { inner: self.inner.local_lock() }
    }

    /// Locks slot `cpu`, e.g. the one an item recorded when it was added.
    ///
    /// # Panics
    ///
    /// If `cpu >= self.cpus()`: a slot number from elsewhere is a bug, and
    /// wrapping it would silently lock the wrong slot.
    pub fn lock_cpu(&self, cpu: usize) -> LgLocalGuard<'_, R> {
        LgLocalGuard { inner: self.inner.lock_cpu(cpu) }
    }

    /// Locks every slot, in index order.
    pub fn global_lock(&self) -> LgGlobalGuard<'_, R> {
        LgGlobalGuard { inner: self.inner.global_lock() }
    }
}

impl<R: RawSpinLock> Default for LgLock<R> {
    fn default() -> Self {
        Self::new()
    }
}

impl<R: RawSpinLock> fmt::Debug for LgLock<R> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("LgLock")
            .field("flavour", &R::NAME)
            .field("cpus", &self.cpus())
            .field("locked_slots", &self.inner.locked_slots())
            .finish()
    }
}

/// Holds one slot of an [`LgLock`]; releases it when dropped.
pub struct LgLocalGuard<'a, R: RawSpinLock> {
    inner: LgPerCpuLocalGuard<'a, R, ()>,
}

impl<R: RawSpinLock> LgLocalGuard<'_, R> {
    /// The slot this guard holds (the caller may have migrated since).
    pub fn cpu(&self) -> usize {
        self.inner.cpu()
    }
}

impl<R: RawSpinLock> fmt::Debug for LgLocalGuard<'_, R> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("LgLocalGuard").field("cpu", &self.cpu()).finish()
    }
}

/// Holds every slot of an [`LgLock`]; releases them all when dropped.
pub struct LgGlobalGuard<'a, R: RawSpinLock> {
    inner: LgPerCpuGlobalGuard<'a, R, ()>,
}

impl<R: RawSpinLock> fmt::Debug for LgGlobalGuard<'_, R> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("LgGlobalGuard").field("cpus", &self.inner.cpus()).finish()
    }
}

/// One CPU's lock and the data it protects, on one cache line.
struct Slot<R, T> {
    lock: R,
    data: UnsafeCell<T>,
}

/// Per-CPU data of type `T`, slot `i` protected by lock `i` of a local/global
/// lock, each slot's lock and data sharing a cache line.
///
/// A local guard gives `&mut T` of one slot; the global guard gives access
/// to all of them at once.
pub struct LgPerCpu<R: RawSpinLock, T> {
    slots: Box<[CachePadded<Slot<R, T>>]>,
}

// SAFETY: each slot's data is only reached through a guard holding that
// slot's lock, one thread at a time, so sharing needs only `T: Send` (as for
// `std::sync::Mutex`).
unsafe impl<R: RawSpinLock, T: Send> Sync for LgPerCpu<R, T> {}

impl<R: RawSpinLock, T> LgPerCpu<R, T> {
    /// `cpus` slots, slot `i` initialised to `init(i)`.
    ///
    /// # Panics
    ///
    /// If `cpus` is zero.
    pub fn from_fn(cpus: usize, mut init: impl FnMut(usize) -> T) -> Self {
        assert!(cpus > 0, "LgLock needs at least one slot");
        let slots =
            (0..cpus).map(|i| CachePadded::new(Slot { lock: R::default(), data: UnsafeCell::new(init(i)) })).collect();
        Self { slots }
    }

    /// The number of slots.
    pub fn cpus(&self) -> usize {
        self.slots.len()
    }

    /// Locks the current CPU's slot and gives access to its data.
    pub fn local_lock(&self) -> LgPerCpuLocalGuard<'_, R, T> {
        self.lock_slot(current_cpu() % self.cpus())
    }

    /// Locks slot `cpu` and gives access to its data.
    ///
    /// # Panics
    ///
    /// If `cpu >= self.cpus()`, as [`LgLock::lock_cpu`].
    pub fn lock_cpu(&self, cpu: usize) -> LgPerCpuLocalGuard<'_, R, T> {
        assert!(cpu < self.cpus(), "LgLock::lock_cpu: cpu {cpu} out of range 0..{}", self.cpus());
        self.lock_slot(cpu)
    }

    /// Locks every slot, in index order, and gives access to all the data.
    pub fn global_lock(&self) -> LgPerCpuGlobalGuard<'_, R, T> {
        for slot in self.slots.iter() {
            slot.lock.lock();
        }
        LgPerCpuGlobalGuard { slots: &self.slots, _not_send: PhantomData }
    }

    /// Consumes the structure and returns the data, slot by slot.
    pub fn into_inner(self) -> Vec<T> {
        self.slots.into_vec().into_iter().map(|slot| CachePadded::into_inner(slot).data.into_inner()).collect()
    }

    fn lock_slot(&self, cpu: usize) -> LgPerCpuLocalGuard<'_, R, T> {
        let slot = &self.slots[cpu];
        slot.lock.lock();
        LgPerCpuLocalGuard { slot, cpu, _not_send: PhantomData }
    }

    fn locked_slots(&self) -> usize {
        self.slots.iter().filter(|slot| slot.lock.is_locked()).count()
    }

    #[cfg(all(test, not(loom)))]
    fn is_slot_locked(&self, cpu: usize) -> bool {
        self.slots[cpu].lock.is_locked()
    }
}

impl<R: RawSpinLock, T: Default> LgPerCpu<R, T> {
    /// One default-initialised slot per possible CPU.
    pub fn new() -> Self {
        Self::with_cpus(possible_cpus())
    }

    /// `cpus` default-initialised slots.
    ///
    /// # Panics
    ///
    /// If `cpus` is zero.
    pub fn with_cpus(cpus: usize) -> Self {
        Self::from_fn(cpus, |_| T::default())
    }
}

impl<R: RawSpinLock, T: Default> Default for LgPerCpu<R, T> {
    fn default() -> Self {
        Self::new()
    }
}

impl<R: RawSpinLock, T> fmt::Debug for LgPerCpu<R, T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("LgPerCpu")
            .field("flavour", &R::NAME)
            .field("cpus", &self.cpus())
            .field("locked_slots", &self.locked_slots())
            .finish_non_exhaustive()
    }
}

/// Holds one slot of an [`LgPerCpu`]; dereferences to that slot's data.
pub struct LgPerCpuLocalGuard<'a, R: RawSpinLock, T> {
    slot: &'a Slot<R, T>,
    cpu: usize,
    /// Queued flavours release per-thread state: the guard stays on its thread.
    _not_send: PhantomData<*const ()>,
}

impl<R: RawSpinLock, T> LgPerCpuLocalGuard<'_, R, T> {
    /// The slot this guard holds (the caller may have migrated since).
    pub fn cpu(&self) -> usize {
        self.cpu
    }
}

impl<R: RawSpinLock, T> Deref for LgPerCpuLocalGuard<'_, R, T> {
    type Target = T;
    fn deref(&self) -> &T {
        // SAFETY: the guard holds this slot's lock, so no `&mut T` to the
        // slot exists elsewhere.
        self.slot.data.with(|p| unsafe { &*p })
    }
}

impl<R: RawSpinLock, T> DerefMut for LgPerCpuLocalGuard<'_, R, T> {
    fn deref_mut(&mut self) -> &mut T {
        // SAFETY: the guard holds this slot's lock and is borrowed mutably,
        // so this is the only reference to the slot.
        self.slot.data.with_mut(|p| unsafe { &mut *p })
    }
}

impl<R: RawSpinLock, T> Drop for LgPerCpuLocalGuard<'_, R, T> {
    fn drop(&mut self) {
        // SAFETY: the guard was created by locking this slot and drops once.
        unsafe { self.slot.lock.unlock() }
    }
}

impl<R: RawSpinLock, T: fmt::Debug> fmt::Debug for LgPerCpuLocalGuard<'_, R, T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("LgPerCpuLocalGuard").field("cpu", &self.cpu()).field("data", &**self).finish()
    }
}

/// Holds every slot of an [`LgPerCpu`]; gives access to all of them.
pub struct LgPerCpuGlobalGuard<'a, R: RawSpinLock, T> {
    slots: &'a [CachePadded<Slot<R, T>>],
    /// Queued flavours release per-thread state: the guard stays on its thread.
    _not_send: PhantomData<*const ()>,
}

impl<R: RawSpinLock, T> LgPerCpuGlobalGuard<'_, R, T> {
    /// The number of slots.
    pub fn cpus(&self) -> usize {
        self.slots.len()
    }

    /// Slot `cpu`'s data.
    ///
    /// # Panics
    ///
    /// If `cpu >= self.cpus()`.
    pub fn get(&self, cpu: usize) -> &T {
        // SAFETY: the guard holds every slot's lock and is borrowed shared,
        // so only shared references to the slots exist.
        self.slots[cpu].data.with(|p| unsafe { &*p })
    }

    /// Slot `cpu`'s data, mutably.
    ///
    /// # Panics
    ///
    /// If `cpu >= self.cpus()`.
    pub fn get_mut(&mut self, cpu: usize) -> &mut T {
        // SAFETY: the guard holds every slot's lock and is borrowed mutably,
        // so this is the only reference to the slot.
        self.slots[cpu].data.with_mut(|p| unsafe { &mut *p })
    }

    /// Every slot's data, in slot order.
    pub fn iter(&self) -> impl Iterator<Item = &T> + '_ {
        // SAFETY: as in `get`.
        self.slots.iter().map(|slot| slot.data.with(|p| unsafe { &*p }))
    }

    /// Every slot's data, mutably, in slot order.
    pub fn iter_mut(&mut self) -> impl Iterator<Item = &mut T> + '_ {
        // SAFETY: as in `get_mut`; the slots are distinct, so the references
        // do not alias.
        self.slots.iter().map(|slot| slot.data.with_mut(|p| unsafe { &mut *p }))
    }
}

impl<R: RawSpinLock, T> Drop for LgPerCpuGlobalGuard<'_, R, T> {
    fn drop(&mut self) {
        for slot in self.slots.iter() {
            // SAFETY: `global_lock` took every slot; each is released once.
            unsafe { slot.lock.unlock() }
        }
    }
}

impl<R: RawSpinLock, T: fmt::Debug> fmt::Debug for LgPerCpuGlobalGuard<'_, R, T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_list().entries(self.iter()).finish()
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use crate::spin::{McsLock, TasLock};
    use crate::test_support::Budget;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::{Arc, Barrier};

    #[test]
    fn new_has_one_slot_per_possible_cpu() {
        assert_eq!(LgLock::<TicketLock>::new().cpus(), possible_cpus());
        assert_eq!(LgLock::<TicketLock>::default().cpus(), possible_cpus());
        assert_eq!(LgLock::<TasLock>::with_cpus(3).cpus(), 3);
    }

    #[test]
    #[should_panic(expected = "at least one slot")]
    fn zero_slots_panics() {
        LgLock::<TicketLock>::with_cpus(0);
    }

    #[test]
    fn local_lock_locks_one_slot_and_remembers_it() {
        let lg: LgLock = LgLock::with_cpus(4);
        let guard = lg.local_lock();
        let cpu = guard.cpu();
        assert!(cpu < 4);
        assert!(lg.inner.is_slot_locked(cpu));
        assert_eq!(lg.inner.locked_slots(), 1);
        drop(guard);
        assert!(lg.inner.locked_slots() == 0);
    }

    #[test]
    fn lock_cpu_locks_the_named_slot() {
        let lg: LgLock<McsLock> = LgLock::with_cpus(3);
        let a = lg.lock_cpu(2);
        let b = lg.lock_cpu(0);
        assert_eq!((a.cpu(), b.cpu()), (2, 0));
        assert!(lg.inner.is_slot_locked(2) && lg.inner.is_slot_locked(0) && !lg.inner.is_slot_locked(1));
        assert_eq!(format!("{a:?}"), "LgLocalGuard { cpu: 2 }");
    }

    #[test]
    #[should_panic(expected = "out of range")]
    fn lock_cpu_out_of_range_panics() {
        LgLock::<TicketLock>::with_cpus(2).lock_cpu(2);
    }

    #[test]
    fn global_lock_takes_every_slot() {
        let lg: LgLock<McsLock> = LgLock::with_cpus(5);
        let guard = lg.global_lock();
        assert!(lg.inner.locked_slots() == lg.cpus());
        assert_eq!(format!("{guard:?}"), "LgGlobalGuard { cpus: 5 }");
        assert_eq!(format!("{lg:?}"), "LgLock { flavour: \"mcs\", cpus: 5, locked_slots: 5 }");
        drop(guard);
        assert!(lg.inner.locked_slots() == 0);
        let _local = lg.lock_cpu(4);
    }

    #[test]
    fn per_cpu_constructors() {
        let d: LgPerCpu<TicketLock, u8> = LgPerCpu::default();
        assert_eq!(d.cpus(), possible_cpus());
        assert_eq!(LgPerCpu::<TicketLock, u8>::new().cpus(), possible_cpus());
        let w: LgPerCpu<TicketLock, u8> = LgPerCpu::with_cpus(3);
        assert_eq!(w.into_inner(), vec![0, 0, 0]);
        let f: LgPerCpu<TasLock, usize> = LgPerCpu::from_fn(4, |i| i * 10);
        assert_eq!(f.into_inner(), vec![0, 10, 20, 30]);
    }

    #[test]
    fn per_cpu_local_and_cpu_guards_reach_their_slot() {
        let lists: LgPerCpu<McsLock, Vec<u32>> = LgPerCpu::with_cpus(3);
        let cpu = {
            let mut local = lists.local_lock();
            local.push(7);
            local.cpu()
        };
        lists.lock_cpu(1).push(8);
        let guard = lists.lock_cpu(1);
        assert_eq!(guard.cpu(), 1);
        assert_eq!(format!("{guard:?}"), format!("LgPerCpuLocalGuard {{ cpu: 1, data: {:?} }}", *guard));
        drop(guard);
        let all = lists.into_inner();
        assert!(all[cpu].contains(&7));
        assert!(all[1].contains(&8));
    }

    #[test]
    fn per_cpu_global_guard_sees_and_changes_every_slot() {
        let counts: LgPerCpu<TicketLock, u32> = LgPerCpu::from_fn(4, |i| i as u32);
        let mut all = counts.global_lock();
        assert_eq!(all.cpus(), 4);
        assert_eq!(all.iter().copied().collect::<Vec<_>>(), [0, 1, 2, 3]);
        *all.get_mut(2) = 20;
        assert_eq!(*all.get(2), 20);
        for slot in all.iter_mut() {
            *slot += 1;
        }
        assert_eq!(format!("{all:?}"), "[1, 2, 21, 4]");
        drop(all);
        assert_eq!(format!("{counts:?}"), "LgPerCpu { flavour: \"ticket\", cpus: 4, locked_slots: 0, .. }");
        assert_eq!(*counts.lock_cpu(3), 4);
    }

    /// Local holders of one slot exclude each other, and the global holders
    /// (two threads) exclude everyone: per-slot non-atomic counters stay exact, and a
    /// global reader sees every slot's count settled at a multiple of 2
    /// (each local holder adds 1 twice within one hold).
    fn stress<R: RawSpinLock + 'static>() {
        const THREADS: usize = 8;
        let budget = Budget::new(5_000);
        let cpus = 3;
        let counts: Arc<LgPerCpu<R, u64>> = Arc::new(LgPerCpu::with_cpus(cpus));
        let global_inside = Arc::new(AtomicUsize::new(0));
        let start = Arc::new(Barrier::new(THREADS));
        let handles: Vec<_> = (0..THREADS)
            .map(|t| {
                let (counts, global_inside, start) = (counts.clone(), global_inside.clone(), start.clone());
                std::thread::spawn(move || {
                    start.wait();
                    let mut added = 0u64;
                    let mut i = 0;
                    while budget.allows(i) {
                        i += 1;
                        if t < 2 && i % 16 == 0 {
                            let all = counts.global_lock();
                            assert_eq!(global_inside.fetch_add(1, Ordering::Relaxed), 0);
                            assert!(all.iter().all(|c| c % 2 == 0), "global saw a half-done update");
                            global_inside.fetch_sub(1, Ordering::Relaxed);
                            continue;
                        }
                        let mut slot = if i % 2 == 0 { counts.local_lock() } else { counts.lock_cpu((t + i) % cpus) };
                        assert_eq!(global_inside.load(Ordering::Relaxed), 0);
                        *slot += 1;
                        std::hint::black_box(&mut *slot);
                        *slot += 1;
                        added += 2;
                    }
                    added
                })
            })
            .collect();
        let added: u64 = handles.into_iter().map(|h| h.join().unwrap()).sum();
        assert_eq!(counts.global_lock().iter().sum::<u64>(), added);
    }

    #[test]
    fn stress_ticket() {
        stress::<TicketLock>();
    }

    #[test]
    fn stress_mcs() {
        stress::<McsLock>();
    }
}

#[cfg(all(test, loom))]
mod loom_models {
    //! Slot waiters park under loom until the slot is released
    //! (`shim::spin_wait`), so the models may have several waiting at once.

    use super::*;
    use crate::spin::McsLock;
    use loom::sync::Arc;
    use loom::thread;

    /// A local holder adds 2 to its slot in two steps; the global holder's
    /// sum over all slots sees either none or all of it.
    fn local_excludes_global<R: RawSpinLock + 'static>() {
        for cpu in 0..2 {
            loom::model(move || {
                let counts: Arc<LgPerCpu<R, u32>> = Arc::new(LgPerCpu::with_cpus(2));
                let local = {
                    let counts = counts.clone();
                    thread::spawn(move || {
                        let mut slot = counts.lock_cpu(cpu);
                        *slot += 1;
                        *slot += 1;
                    })
                };
                let seen: u32 = counts.global_lock().iter().sum();
                assert!(seen == 0 || seen == 2, "global holder saw {seen}");
                local.join().unwrap();
                assert_eq!(counts.global_lock().iter().sum::<u32>(), 2);
            });
        }
    }

    #[test]
    fn lglock_local_excludes_global_ticket() {
        local_excludes_global::<TicketLock>();
    }

    #[test]
    fn lglock_local_excludes_global_mcs() {
        local_excludes_global::<McsLock>();
    }

    #[test]
    fn lglock_global_excludes_global() {
        loom::model(|| {
            let counts: Arc<LgPerCpu<McsLock, u32>> = Arc::new(LgPerCpu::with_cpus(2));
            let other = counts.clone();
            let handle = thread::spawn(move || {
                for slot in other.global_lock().iter_mut() {
                    *slot += 1;
                }
            });
            for slot in counts.global_lock().iter_mut() {
                *slot += 1;
            }
            handle.join().unwrap();
            assert!(counts.global_lock().iter().all(|&c| c == 2));
        });
    }
}
