//! A sleeping reader-writer semaphore after Linux `kernel/locking/rwsem.c`,
//! with the writer's spinning strategy chosen by a [`SpinPolicy`].
//!
//! Invariant: at any time either one writer or any number of readers hold
//! the lock, never both. Once a waiter is queued new readers queue behind it
//! (no writer starvation), and a waiter at the front for longer than
//! [`RwSemConfig::handoff_after`] gets the lock next (no waiter starvation).
//!
//! Use it for a lock that may be held long or across blocking work: the
//! `mmap_sem` of seed 002, a VFS directory lock (`i_rwsem`), kernfs's tree
//! lock. For short sections use a [`spin`](crate::spin) lock; for
//! read-mostly data where writers are rare use a
//! [`PerCpuRwSem`](crate::percpu_rwsem::PerCpuRwSem) (readers here all write
//! one cache line).
//!
//! ```
//! use vfscale_sync::rwsem::{RwSem, SpinPolicy};
//!
//! let sem = RwSem::new(vec![1, 2], SpinPolicy::Adaptive);
//! {
//!     let a = sem.read();
//!     let b = sem.read(); // readers share
//!     assert_eq!(a.len() + b.len(), 4);
//!     assert!(sem.try_write().is_none());
//! }
//! sem.write().push(3);
//! assert_eq!(*sem.read(), [1, 2, 3]);
//! ```
//!
//! # Design
//!
//! One 64-bit count word holds a writer bit, a waiters bit, a hand-off bit
//! and the reader count. Readers take the lock with one `fetch_add` unless a
//! writer holds it, waits or has it reserved; a writer with one
//! `compare_exchange` from 0. Everyone else queues in FIFO order behind a
//! small spinlock and sleeps on a futex word of their own. A release that
//! sees the waiters bit wakes the front: a writer retries itself; readers at
//! the front are granted the lock by their waker. The source of `rwsem/raw.rs`
//! give the full protocol and why no wake-up is lost.
//!
//! Before queueing, a writer spins per [`SpinPolicy`]:
//! - [`SpinPolicy::Block`] never spins (rwsems before Linux 3.16).
//! - [`SpinPolicy::Spin`] is 3.16's optimistic spinning: writers line up on
//!   an MCS-style OSQ and its head spins whatever holds the lock, for up to
//!   one scheduler tick. With long holds and more threads than CPUs the
//!   spinners eat the owner's CPU: seed 002's 4-5x slowdown, kept on purpose.
//! - [`SpinPolicy::Adaptive`] spins only where it can pay off, using what
//!   userspace can see in place of "owner is on a CPU": one spinner at a
//!   time; only on a writer-held lock whose write-acquisition counter moves
//!   within [`RwSemConfig::owner_spin_budget`]; never on a reader-held lock
//!   or a reserved one; and for [`RwSemConfig::spin_budget`] at most. When
//!   the system has more runnable threads than this process has CPUs
//!   (sampled from `/proc/loadavg` at most once a millisecond), the spin is
//!   capped at about what blocking costs
//!   ([`RwSemConfig::oversubscribed_spin_budget`]: a failed spin then wastes
//!   no more than sleeping at once), followed by a few `sched_yield` retries,
//!   which give the CPU to whoever is runnable (a preempted owner included)
//!   yet catch a release without a cross-CPU wake-up. On a 2-CPU VM with
//!   16 writers this keeps it level with `std` and `parking_lot` at 1 us and
//!   100 us holds; sleeping at once instead cost it a third of its
//!   throughput at 1 us.
//!
//! # Raw use
//!
//! [`RawRwSem`] is the same lock without data, with `unsafe` unlocks, for
//! lock/unlock pairs that do not nest in one scope; `RwSem<()>` is the
//! guard-based way to use a data-less lock (e.g. a directory lock that
//! guards a tree stored elsewhere).
//!
//! Unlike Linux, a `RwSem` cannot be released by a thread other than the
//! one that took it through the guards (they are `!Send`); [`RawRwSem`]
//! allows it.

mod osq;
mod policy;
mod raw;

pub use policy::{RwSemConfig, SpinPolicy};
pub use raw::RawRwSem;

use crate::shim::UnsafeCell;
use std::fmt;
use std::marker::PhantomData;
use std::ops::{Deref, DerefMut};

/// Data guarded by a reader-writer semaphore.
pub struct RwSem<T: ?Sized> {
    raw: RawRwSem,
    data: UnsafeCell<T>,
}

// SAFETY: a writer gets `&mut T` on whichever thread locks, so sharing the
// semaphore needs `T: Send`; readers on several threads share `&T`, so also
// `T: Sync` (the same bounds as `std::sync::RwLock`).
unsafe impl<T: ?Sized + Send + Sync> Sync for RwSem<T> {}
// SAFETY: moving the semaphore moves the data; the raw lock holds no
// thread-bound state once unlocked.
unsafe impl<T: ?Sized + Send> Send for RwSem<T> {}

impl<T> RwSem<T> {
    /// An unlocked semaphore holding `value`, with the defaults of `policy`
    /// ([`RwSemConfig::new`]).
    pub fn new(value: T, policy: SpinPolicy) -> Self {
        Self::with_config(value, RwSemConfig::new(policy))
    }

    /// An unlocked semaphore holding `value`, with the given tuning.
    pub fn with_config(value: T, config: RwSemConfig) -> Self {
        Self { raw: RawRwSem::with_config(config), data: UnsafeCell::new(value) }
    }

    /// Consumes the semaphore and returns the data.
    pub fn into_inner(self) -> T {
        self.data.into_inner()
    }
}

impl<T: ?Sized> RwSem<T> {
    /// The tuning chosen at construction.
    pub fn config(&self) -> &RwSemConfig {
        self.raw.config()
    }

    /// Takes the lock shared; sleeps while a writer holds it or is queued.
    pub fn read(&self) -> RwSemReadGuard<'_, T> {
        crate::audit::lock_acquired();
        self.raw.lock_shared();
        RwSemReadGuard { sem: self, _not_send: PhantomData }
    }

    /// Takes the lock exclusive; spins per the policy, then sleeps.
    pub fn write(&self) -> RwSemWriteGuard<'_, T> {
        crate::audit::lock_acquired();
        self.raw.lock_exclusive();
        RwSemWriteGuard { sem: self, _not_send: PhantomData }
    }

    /// Takes the lock shared if that needs no waiting: no writer holds it,
    /// is queued, or has it reserved.
    pub fn try_read(&self) -> Option<RwSemReadGuard<'_, T>> {
        crate::audit::lock_acquired();
        self.raw.try_lock_shared().then(|| RwSemReadGuard { sem: self, _not_send: PhantomData })
    }

    /// Takes the lock exclusive if nobody holds it and it is not reserved
    /// for a long-waiting waiter.
    pub fn try_write(&self) -> Option<RwSemWriteGuard<'_, T>> {
        crate::audit::lock_acquired();
        self.raw.try_lock_exclusive().then(|| RwSemWriteGuard { sem: self, _not_send: PhantomData })
    }

    /// The data, without locking: `&mut self` proves nobody else holds it.
    pub fn get_mut(&mut self) -> &mut T {
        // SAFETY: `&mut self` excludes guards and every other reference.
        self.data.with_mut(|p| unsafe { &mut *p })
    }

    /// Whether anyone holds the lock (a racy snapshot, for assertions).
    pub fn is_locked(&self) -> bool {
        self.raw.is_locked()
    }

    /// Whether a writer holds the lock (a racy snapshot, for assertions).
    pub fn is_write_locked(&self) -> bool {
        self.raw.is_write_locked()
    }
}

impl<T: Default> Default for RwSem<T> {
    /// `T::default()` under [`RwSemConfig::default`].
    fn default() -> Self {
        Self::with_config(T::default(), RwSemConfig::default())
    }
}

impl<T: ?Sized + fmt::Debug> fmt::Debug for RwSem<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut d = f.debug_struct("RwSem");
        d.field("policy", &self.config().policy);
        match self.try_read() {
            Some(guard) => d.field("data", &&*guard),
            None => d.field("data", &format_args!("<locked>")),
        };
        d.finish()
    }
}

/// A shared hold on a [`RwSem`]; released when dropped.
pub struct RwSemReadGuard<'a, T: ?Sized> {
    sem: &'a RwSem<T>,
    /// Released on the thread that took it, like `std`'s guards.
    _not_send: PhantomData<*const ()>,
}

// SAFETY: the guard only gives `&T`, which may be shared if `T: Sync`.
unsafe impl<T: ?Sized + Sync> Sync for RwSemReadGuard<'_, T> {}

impl<T: ?Sized> Deref for RwSemReadGuard<'_, T> {
    type Target = T;
    fn deref(&self) -> &T {
        // SAFETY: a read hold excludes writers, so no `&mut T` exists.
        self.sem.data.with(|p| unsafe { &*p })
    }
}

impl<T: ?Sized> Drop for RwSemReadGuard<'_, T> {
    fn drop(&mut self) {
        // SAFETY: the guard stands for one read hold and drops once.
        unsafe { self.sem.raw.unlock_shared() }
    }
}

impl<T: ?Sized + fmt::Debug> fmt::Debug for RwSemReadGuard<'_, T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&**self, f)
    }
}

/// An exclusive hold on a [`RwSem`]; released when dropped.
pub struct RwSemWriteGuard<'a, T: ?Sized> {
    sem: &'a RwSem<T>,
    /// Released on the thread that took it (the owner id names it).
    _not_send: PhantomData<*const ()>,
}

// SAFETY: a shared guard only gives `&T`, which may be shared if `T: Sync`.
unsafe impl<T: ?Sized + Sync> Sync for RwSemWriteGuard<'_, T> {}

impl<T: ?Sized> Deref for RwSemWriteGuard<'_, T> {
    type Target = T;
    fn deref(&self) -> &T {
        // SAFETY: the write hold excludes every other holder.
        self.sem.data.with(|p| unsafe { &*p })
    }
}

impl<T: ?Sized> DerefMut for RwSemWriteGuard<'_, T> {
    fn deref_mut(&mut self) -> &mut T {
        // SAFETY: the write hold excludes every other holder and the guard
        // is borrowed mutably, so this is the only reference.
        self.sem.data.with_mut(|p| unsafe { &mut *p })
    }
}

impl<T: ?Sized> Drop for RwSemWriteGuard<'_, T> {
    fn drop(&mut self) {
        // SAFETY: the guard stands for the write hold and drops once.
        unsafe { self.sem.raw.unlock_exclusive() }
    }
}

impl<T: ?Sized + fmt::Debug> fmt::Debug for RwSemWriteGuard<'_, T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&**self, f)
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use crate::test_support::stress_iters;
    use crate::test_support::wait_until;
    use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering::Relaxed};
    use std::sync::Barrier;
    use std::time::{Duration, Instant};

    #[test]
    fn new_read_write_into_inner() {
        for policy in SpinPolicy::ALL {
            let sem = RwSem::new(5u32, policy);
            assert_eq!(sem.config().policy, policy);
            assert_eq!(*sem.read(), 5);
            *sem.write() += 1;
            assert_eq!(sem.into_inner(), 6);
        }
    }

    #[test]
    fn with_config_and_config() {
        let config = RwSemConfig { handoff_after: Duration::from_millis(1), ..RwSemConfig::new(SpinPolicy::Spin) };
        let sem = RwSem::with_config((), config);
        assert_eq!(sem.config(), &config);
        assert_eq!(RwSem::<u8>::default().config(), &RwSemConfig::default());
    }

    #[test]
    fn try_read_and_try_write() {
        let sem = RwSem::new(1u8, SpinPolicy::Adaptive);
        {
            let r = sem.try_read().expect("free lock");
            assert!(sem.try_read().is_some(), "readers share");
            assert!(sem.try_write().is_none());
            assert_eq!(*r, 1);
        }
        {
            let mut w = sem.try_write().expect("free lock");
            *w = 2;
            assert!(sem.try_read().is_none());
            assert!(sem.try_write().is_none());
        }
        assert_eq!(*sem.read(), 2);
    }

    #[test]
    fn get_mut_and_lock_state() {
        let mut sem = RwSem::new(vec![1], SpinPolicy::Block);
        sem.get_mut().push(2);
        assert!(!sem.is_locked());
        let r = sem.read();
        assert!(sem.is_locked() && !sem.is_write_locked());
        drop(r);
        let w = sem.write();
        assert!(sem.is_locked() && sem.is_write_locked());
        assert_eq!(*w, [1, 2]);
    }

    #[test]
    fn debug_output() {
        let sem = RwSem::new(7u8, SpinPolicy::Block);
        assert_eq!(format!("{sem:?}"), "RwSem { policy: Block, data: 7 }");
        let w = sem.write();
        assert_eq!(format!("{w:?}"), "7");
        assert_eq!(format!("{sem:?}"), "RwSem { policy: Block, data: <locked> }");
        drop(w);
        assert_eq!(format!("{:?}", sem.read()), "7");
    }

    #[test]
    fn unsized_data() {
        let sem: &RwSem<[u8]> = &RwSem::new([1u8, 2, 3], SpinPolicy::Adaptive);
        sem.write()[0] = 9;
        assert_eq!(&*sem.read(), &[9, 2, 3]);
    }

    #[derive(Debug, Default)]
    struct Shared {
        /// Non-atomic: lost updates show a broken exclusion.
        count: u64,
        writer_inside: bool,
    }

    /// Readers and writers on 8 threads (more than this machine's CPUs):
    /// writers never overlap anyone, readers never see a writer inside.
    fn stress(config: RwSemConfig) {
        const THREADS: usize = 8;
        let iters = stress_iters(if config.policy == SpinPolicy::Spin { 300 } else { 1_500 });
        let sem = RwSem::with_config(Shared::default(), config);
        let (readers_in, writers_in) = (AtomicUsize::new(0), AtomicUsize::new(0));
        let start = Barrier::new(THREADS);
        let written = AtomicUsize::new(0);
        std::thread::scope(|s| {
            for t in 0..THREADS {
                let (sem, readers_in, writers_in, start, written) = (&sem, &readers_in, &writers_in, &start, &written);
                s.spawn(move || {
                    start.wait();
                    for i in 0..iters {
                        match (i + t) % 5 {
                            0 | 1 => {
                                let mut w = if i % 7 == 0 {
                                    match sem.try_write() {
                                        Some(w) => w,
                                        None => continue,
                                    }
                                } else {
                                    sem.write()
                                };
                                assert_eq!(writers_in.fetch_add(1, Relaxed), 0, "two writers inside");
                                assert_eq!(readers_in.load(Relaxed), 0, "a reader inside with a writer");
                                w.writer_inside = true;
                                w.count += 1;
                                std::hint::black_box(&mut *w);
                                w.writer_inside = false;
                                writers_in.fetch_sub(1, Relaxed);
                                written.fetch_add(1, Relaxed);
                            }
                            _ => {
                                let r = if i % 7 == 1 {
                                    match sem.try_read() {
                                        Some(r) => r,
                                        None => continue,
                                    }
                                } else {
                                    sem.read()
                                };
                                readers_in.fetch_add(1, Relaxed);
                                assert_eq!(writers_in.load(Relaxed), 0, "a writer inside with a reader");
                                let before = r.count;
                                assert!(!r.writer_inside);
                                std::hint::black_box(&*r);
                                assert_eq!(r.count, before, "data changed under a read hold");
                                readers_in.fetch_sub(1, Relaxed);
                            }
                        }
                    }
                });
            }
        });
        assert_eq!(sem.read().count, written.load(Relaxed) as u64);
        assert!(sem.raw.is_idle(), "leaked bias, waiter or reservation: {:?}", sem.raw);
    }

    #[test]
    fn stress_block() {
        stress(RwSemConfig::new(SpinPolicy::Block));
    }

    #[test]
    fn stress_spin() {
        stress(RwSemConfig::new(SpinPolicy::Spin));
    }

    #[test]
    fn stress_adaptive() {
        stress(RwSemConfig::new(SpinPolicy::Adaptive));
    }

    /// Hand-off after 20 us: nearly every contended wait ends in a hand-off.
    #[test]
    fn stress_with_frequent_handoff() {
        for policy in SpinPolicy::ALL {
            stress(RwSemConfig { handoff_after: Duration::from_micros(20), ..RwSemConfig::new(policy) });
        }
    }

    /// Readers that keep the lock read-held at all times (their holds
    /// overlap) cannot keep a writer out: once it queues, new readers queue
    /// behind it and the old ones drain.
    #[test]
    fn writer_not_starved_by_continuous_readers() {
        for policy in SpinPolicy::ALL {
            let sem = RwSem::new(0u64, policy);
            let writer_done = AtomicBool::new(false);
            let gave_up = AtomicBool::new(false);
            let reads = AtomicUsize::new(0);
            std::thread::scope(|s| {
                for _ in 0..3 {
                    s.spawn(|| {
                        // Readers keep coming until the writer got in; the
                        // deadline only ends a starved writer's test, which
                        // would otherwise hang.
                        let deadline = Instant::now() + Duration::from_secs(60);
                        while !writer_done.load(Relaxed) {
                            if Instant::now() >= deadline {
                                gave_up.store(true, Relaxed);
                                break;
                            }
                            let r = sem.read();
                            reads.fetch_add(1, Relaxed);
                            std::thread::sleep(Duration::from_micros(200));
                            drop(r);
                        }
                    });
                }
                wait_until("ten reads", || reads.load(Relaxed) >= 10);
                *sem.write() = 1;
                writer_done.store(true, Relaxed);
            });
            assert!(!gave_up.load(Relaxed), "{policy:?}: the writer got in only once the readers stopped");
            assert_eq!(*sem.read(), 1);
            assert!(sem.raw.is_idle());
        }
    }

    /// Under Spin with a long hold and more spinners than CPUs, waiters
    /// give up spinning after their tick and sleep; everyone completes.
    #[test]
    fn spin_long_holds_complete() {
        let sem = RwSem::new(0u64, SpinPolicy::Spin);
        std::thread::scope(|s| {
            for _ in 0..6 {
                s.spawn(|| {
                    for _ in 0..3 {
                        let mut w = sem.write();
                        let until = Instant::now() + Duration::from_millis(2);
                        while Instant::now() < until {
                            std::hint::spin_loop();
                        }
                        *w += 1;
                    }
                });
            }
        });
        assert_eq!(sem.into_inner(), 18);
    }
}

#[cfg(all(test, loom))]
mod loom_models {
    use super::*;
    use loom::sync::Arc;
    use loom::thread;
    use std::time::Duration;

    /// Adds 2 in two steps; with `pause`, yields in between, so loom may
    /// run anyone else inside the critical section without spending a
    /// preemption, and a reader that gets in there sees an odd value.
    /// (Since waiters park under loom instead of yielding in a loop, the
    /// 3-thread models can afford the pause too.)
    fn add_two(sem: &RwSem<u32>, pause: bool) {
        let mut w = sem.write();
        *w += 1;
        if pause {
            thread::yield_now();
        }
        *w += 1;
    }

    fn read_even(sem: &RwSem<u32>) -> u32 {
        let r = sem.read();
        assert_eq!(*r % 2, 0, "a reader saw a writer's half-done update");
        *r
    }

    /// Two writers; loom flags any overlap of their data accesses.
    fn writer_writer(config: RwSemConfig) {
        loom::model(move || {
            let sem = Arc::new(RwSem::with_config(0u32, config));
            let other = sem.clone();
            let t = thread::spawn(move || add_two(&other, true));
            add_two(&sem, true);
            t.join().unwrap();
            assert_eq!(read_even(&sem), 4);
            assert!(sem.raw.is_idle());
        });
    }

    /// A reader and a writer: the reader sees before or after, never during.
    fn reader_writer(config: RwSemConfig) {
        loom::model(move || {
            let sem = Arc::new(RwSem::with_config(0u32, config));
            let other = sem.clone();
            let t = thread::spawn(move || add_two(&other, true));
            assert!(read_even(&sem) <= 2);
            t.join().unwrap();
            assert!(sem.raw.is_idle());
        });
    }

    /// Two writers and a reader all finish: a lost wake-up leaves one
    /// waiting forever, which loom reports.
    fn two_writers_one_reader(config: RwSemConfig) {
        loom::model(move || {
            let sem = Arc::new(RwSem::with_config(0u32, config));
            let writers: Vec<_> = (0..2)
                .map(|_| {
                    let sem = sem.clone();
                    thread::spawn(move || add_two(&sem, true))
                })
                .collect();
            assert!(read_even(&sem) <= 4);
            for w in writers {
                w.join().unwrap();
            }
            assert_eq!(read_even(&sem), 4);
            assert!(sem.raw.is_idle());
        });
    }

    /// With `handoff_after` zero a queued writer that loses the lock to a
    /// barging writer reserves it at once: the barger's next attempt must
    /// fail until the queued writer has had the lock, and both finish.
    fn handoff(config: RwSemConfig) {
        let config = RwSemConfig { handoff_after: Duration::ZERO, ..config };
        loom::model(move || {
            let sem = Arc::new(RwSem::with_config(0u32, config));
            let other = sem.clone();
            let queued = thread::spawn(move || add_two(&other, false));
            add_two(&sem, false);
            add_two(&sem, false);
            queued.join().unwrap();
            assert_eq!(read_even(&sem), 6);
            assert!(sem.raw.is_idle());
        });
    }

    /// A held lock, a reader that queues (or, adaptive, backs out of its
    /// failed fast path to spin) behind it, and a second writer; the holder
    /// releases. Two cases share the shape:
    /// - with `writer_pauses`, the writer barges in between the holder's
    ///   release and the reader's wake-up: the waker must not grant the
    ///   reader while the barger holds the lock. (Loom reaches it in two
    ///   preemptions: the holder's after spawning the reader, and after its
    ///   release RMW; the barger's yield lets the waker run.)
    /// - without, the writer may queue while only the reader's transient
    ///   bias is in the count: whichever way the reader goes on (backs out
    ///   to spin, then retries or trades the bias for the queue), the
    ///   writer is woken and both finish.
    fn reader_and_writer_behind_a_held_lock(config: RwSemConfig, writer_pauses: bool) {
        loom::model(move || {
            let sem = Arc::new(RwSem::with_config(0u32, config));
            let held = sem.write();
            let reader = {
                let sem = sem.clone();
                thread::spawn(move || assert!(read_even(&sem) <= 2))
            };
            let writer = {
                let sem = sem.clone();
                thread::spawn(move || add_two(&sem, writer_pauses))
            };
            drop(held);
            reader.join().unwrap();
            writer.join().unwrap();
            assert_eq!(read_even(&sem), 2);
            assert!(sem.raw.is_idle());
        });
    }

    /// A held lock and two writers behind it, with `handoff_after` zero: the
    /// first to queue reserves the lock at once, possibly while the other
    /// (adaptive) still spins. A release must wake the reserved-for front
    /// even with a spinner active, since the spinner cannot take a reserved
    /// lock: it stops, queues behind and sleeps too.
    fn writers_behind_a_reserved_lock(config: RwSemConfig) {
        let config = RwSemConfig { handoff_after: Duration::ZERO, ..config };
        loom::model(move || {
            let sem = Arc::new(RwSem::with_config(0u32, config));
            let held = sem.write();
            let writers: Vec<_> = (0..2)
                .map(|_| {
                    let sem = sem.clone();
                    thread::spawn(move || add_two(&sem, true))
                })
                .collect();
            drop(held);
            for writer in writers {
                writer.join().unwrap();
            }
            assert_eq!(read_even(&sem), 4);
            assert!(sem.raw.is_idle());
        });
    }

    /// The 3-thread models spin at most one try under loom (budget zero):
    /// the spin code still runs, and the wake-up protocol they check is
    /// the same whatever the spinning did. The barging model runs for
    /// `Block` only: waking and granting are shared by all policies, and a
    /// `Block` writer barges with the same steal a spinner uses.
    fn one_try(policy: SpinPolicy) -> RwSemConfig {
        RwSemConfig { spin_budget: Duration::ZERO, owner_spin_budget: Duration::ZERO, ..RwSemConfig::new(policy) }
    }

    fn config(policy: SpinPolicy) -> RwSemConfig {
        RwSemConfig::new(policy)
    }

    #[test]
    fn block_writer_writer() {
        writer_writer(config(SpinPolicy::Block));
    }

    #[test]
    fn block_reader_writer() {
        reader_writer(config(SpinPolicy::Block));
    }

    #[test]
    fn block_no_lost_wakeup() {
        two_writers_one_reader(one_try(SpinPolicy::Block));
    }

    #[test]
    fn block_handoff() {
        handoff(config(SpinPolicy::Block));
    }

    #[test]
    fn spin_writer_writer() {
        writer_writer(config(SpinPolicy::Spin));
    }

    #[test]
    fn spin_reader_writer() {
        reader_writer(config(SpinPolicy::Spin));
    }

    #[test]
    fn spin_no_lost_wakeup() {
        two_writers_one_reader(one_try(SpinPolicy::Spin));
    }

    #[test]
    fn spin_handoff() {
        handoff(one_try(SpinPolicy::Spin));
    }

    #[test]
    fn adaptive_writer_writer() {
        writer_writer(config(SpinPolicy::Adaptive));
    }

    #[test]
    fn adaptive_reader_writer() {
        reader_writer(config(SpinPolicy::Adaptive));
    }

    #[test]
    fn adaptive_no_lost_wakeup() {
        two_writers_one_reader(one_try(SpinPolicy::Adaptive));
    }

    #[test]
    fn adaptive_handoff() {
        handoff(one_try(SpinPolicy::Adaptive));
    }

    #[test]
    fn adaptive_writer_queued_behind_a_transient_reader() {
        reader_and_writer_behind_a_held_lock(one_try(SpinPolicy::Adaptive), false);
    }

    #[test]
    fn adaptive_spinner_vs_reserved_lock() {
        writers_behind_a_reserved_lock(config(SpinPolicy::Adaptive));
    }

    #[test]
    fn block_barging_writer_vs_granted_reader() {
        reader_and_writer_behind_a_held_lock(config(SpinPolicy::Block), true);
    }
}
