//! [`RawRwSem`]: the count word, the wait queue and the rules that pass the
//! lock from a releaser to a waiter.
//!
//! # The count word
//!
//! `count` packs `WRITER_LOCKED`, `WAITERS` (the wait queue is non-empty),
//! `HANDOFF` (the lock is reserved for the queue's front) and, from bit 8,
//! the number of reader biases. A bias is either a reader that holds the lock
//! or a reader on its way from a failed fast path to the queue ("transient").
//! `WRITER_LOCKED` is only set while no bias is present, so genuine readers
//! and a writer never coexist; transient biases may sit next to a writer.
//!
//! # The queue
//!
//! A FIFO of waiters behind a small spinlock, `queue`. `WAITERS` is set when
//! the queue becomes non-empty and cleared when it becomes empty, both while
//! holding `queue`, so under that lock `WAITERS` is exact. Every waiter
//! sleeps on a futex word of its own (`Waiter::state`). Readers are granted
//! the lock by whoever wakes them (the waker adds their biases); a writer is
//! only told to retry and takes the lock itself, while holding `queue`: the
//! front as the queue's own (the only way past `HANDOFF`), any other writer
//! by stealing it like a newcomer, leaving the queue if it wins.
//!
//! A release that finds the lock free and writers at the front wakes the
//! first of them still asleep, even if an earlier one was woken and has not
//! run yet (as parking_lot unparks one thread per contended unlock): with
//! more threads than CPUs a woken thread may wait long for a CPU, and
//! waking only the front would leave the queue idle behind it while the
//! threads that never slept keep barging. It wakes nobody while an adaptive
//! spinner is active, unless the lock is reserved or the front is due a
//! hand-off: the spinner takes the lock (and its release wakes), or stops,
//! queues and retries under `queue`, taking the lock if it is free.
//!
//! # No lost wake-ups
//!
//! Rule: whoever takes the lock-held part of `count` to "free", in an RMW
//! that also sees `WAITERS`, runs [`RawRwSem::wake`] afterwards; and whoever
//! queues re-checks `count` after setting `WAITERS`, under `queue`. Suppose a
//! waiter went to sleep because the lock was held. It queued and saw the
//! holder in `count` after its own `WAITERS` update, so the holder's release
//! RMW comes later in `count`'s modification order and sees `WAITERS` (which
//! stays set while anyone is queued): the releaser will take `queue` and
//! wake a sleeping writer at the front. A writer told to retry that loses
//! the lock to a barging writer sleeps again, and that writer's release
//! wakes again. A waker only wakes a writer while the lock is free; if it
//! is not, the release that frees it sees `WAITERS` and wakes later.
//!
//! # Hand-off
//!
//! Writers that barge (fast path, spinners, a last try before queueing) keep
//! throughput up but can starve the queue. When the front waiter has queued
//! longer than `handoff_after` and finds the lock taken, it sets `HANDOFF`:
//! fast paths and spinners then fail, only the front may take the lock, and
//! it clears `HANDOFF` in the same RMW that grants it. A reader front sets it
//! through the waker that failed to grant it.
//!
//! # Under loom
//!
//! The code is the same; three helpers behave differently, each for the
//! reason given where it is defined:
//! - waiters sleep in `futex::wait` until a wake on their word, so a lost
//!   wake-up is a deadlock loom reports (the `*_no_lost_wakeup` models);
//! - `queue`'s spinlock and the OSQ park their waiters until the word they
//!   poll is stored to (`shim::spin_wait`);
//! - spin budgets are `Deadline`s of two steps, and adaptive spinners read
//!   them every round (`clock_due`), so a spin lasts two rounds; nothing a
//!   spinner does depends on how many rounds it spun, only on what it saw.
//!   `cpus_oversubscribed` is false, so the yield-and-retry path is not
//!   modelled.

use super::osq::Osq;
use super::policy::{cpus_oversubscribed, RwSemConfig, SpinPolicy};
use crate::futex;
use crate::shim::{spin_loop, yield_now, AtomicBool, AtomicU32, AtomicU64, Deadline, Ordering};
use crate::spin::{SpinLock, TasLock};
use std::collections::VecDeque;
use std::fmt;
use std::sync::Arc;

const WRITER_LOCKED: u64 = 1 << 0;
const WAITERS: u64 = 1 << 1;
const HANDOFF: u64 = 1 << 2;
const READER_SHIFT: u32 = 8;
const READER_BIAS: u64 = 1 << READER_SHIFT;
const READER_MASK: u64 = !(READER_BIAS - 1);
const LOCK_MASK: u64 = WRITER_LOCKED | READER_MASK;
/// A reader may not take the fast path while any of these is set: a queued
/// writer blocks new readers, so writers are not starved.
const READ_FAIL_MASK: u64 = WRITER_LOCKED | WAITERS | HANDOFF;

/// `Waiter::state` values.
const WAITING: u32 = 0;
/// A writer: go and retry (the lock is not yours yet).
const WOKEN: u32 = 1;
/// A reader: you hold the lock.
const GRANTED: u32 = 2;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Reader,
    Writer,
}

/// A sleeper's futex word, shared with the waker: the `Arc` keeps it alive
/// until the waker's `futex::wake` is done, even if the sleeper has left.
#[derive(Debug)]
struct Waiter {
    state: AtomicU32,
}

#[derive(Debug)]
struct Entry {
    kind: Kind,
    waiter: Arc<Waiter>,
    /// When this waiter, at the front, may reserve the lock with `HANDOFF`.
    handoff_at: Deadline,
}

/// A reader-writer semaphore with no data: the lock behind
/// [`RwSem`](super::RwSem), for callers that pair it with data of their own
/// or must release it in another scope than they took it.
///
/// `lock_*` block, `try_lock_*` never do, `unlock_*` are `unsafe` because
/// the caller promises it holds what it releases.
///
/// ```
/// use vfscale_sync::rwsem::{RawRwSem, SpinPolicy};
///
/// let dir_lock = RawRwSem::new(SpinPolicy::Adaptive);
/// dir_lock.lock_exclusive();
/// assert!(dir_lock.is_write_locked());
/// // SAFETY: taken just above.
/// unsafe { dir_lock.unlock_exclusive() };
/// assert!(!dir_lock.is_locked());
/// ```
pub struct RawRwSem {
    count: AtomicU64,
    /// The write holder's thread id, 0 when none: for `Debug` and for
    /// catching a writer that deadlocks on itself.
    owner: AtomicU64,
    /// Bumped by every write acquisition: what adaptive spinners watch to
    /// tell a busy lock from one stuck behind a long (or preempted) owner.
    progress: AtomicU64,
    /// Set while an adaptive spinner spins: the only one.
    spinner: AtomicBool,
    /// Where `Spin` writers queue to spin.
    osq: Osq,
    /// Not FIFO among contenders (the queue it guards provides the order),
    /// and a preempted waiter on a test-and-set lock stalls nobody, unlike a
    /// ticket lock where every later ticket waits for it.
    queue: SpinLock<TasLock, VecDeque<Entry>>,
    config: RwSemConfig,
}

impl RawRwSem {
    /// An unlocked semaphore with [`RwSemConfig::new`]`(policy)`.
    pub fn new(policy: SpinPolicy) -> Self {
        Self::with_config(RwSemConfig::new(policy))
    }

    /// An unlocked semaphore with the given tuning.
    pub fn with_config(config: RwSemConfig) -> Self {
        Self {
            count: AtomicU64::new(0),
            owner: AtomicU64::new(0),
            progress: AtomicU64::new(0),
            spinner: AtomicBool::new(false),
            osq: Osq::new(),
            queue: SpinLock::new(VecDeque::new()),
            config,
        }
    }

    /// The tuning chosen at construction.
    pub fn config(&self) -> &RwSemConfig {
        &self.config
    }

    /// Takes the lock shared, sleeping while a writer holds it or waits.
    #[inline]
    pub fn lock_shared(&self) {
        let prev = self.count.fetch_add(READER_BIAS, Ordering::Acquire);
        if prev & READ_FAIL_MASK != 0 {
            self.lock_shared_slow();
        }
    }

    /// Takes the lock shared if no writer holds it, waits or has it reserved.
    pub fn try_lock_shared(&self) -> bool {
        let mut count = self.count.load(Ordering::Relaxed);
        while count & READ_FAIL_MASK == 0 {
            match self.count.compare_exchange_weak(count, count + READER_BIAS, Ordering::Acquire, Ordering::Relaxed) {
                Ok(_) => return true,
                Err(now) => count = now,
            }
        }
        false
    }

    /// Releases a shared hold.
    ///
    /// # Safety
    ///
    /// The caller holds the lock shared (from `lock_shared` or a successful
    /// `try_lock_shared`) and releases that hold once. Debug builds panic if
    /// no reader holds the lock.
    pub unsafe fn unlock_shared(&self) {
        let prev = self.drop_reader_bias();
        debug_assert!(prev & READER_MASK != 0, "RwSem: read unlock of a lock that is not read-locked");
    }

    /// Gives back one reader bias, a hold or a transient one, waking the
    /// queue if it was the last with waiters queued; the count before.
    fn drop_reader_bias(&self) -> u64 {
        let prev = self.count.fetch_sub(READER_BIAS, Ordering::Release);
        // The last bias gone with waiters queued: the lock is free now.
        if prev & (WAITERS | WRITER_LOCKED | READER_MASK) == WAITERS | READER_BIAS {
            self.wake();
        }
        prev
    }

    /// Takes the lock exclusive: spins per the policy, then sleeps.
    #[inline]
    pub fn lock_exclusive(&self) {
        if self.count.compare_exchange(0, WRITER_LOCKED, Ordering::Acquire, Ordering::Relaxed).is_err() {
            self.lock_exclusive_slow();
        }
        self.set_owner();
    }

    /// Takes the lock exclusive if nobody holds it and it is not reserved
    /// for a waiter. Like a spinner, it may take the lock ahead of queued
    /// waiters.
    pub fn try_lock_exclusive(&self) -> bool {
        let taken = self.try_write_unqueued().is_ok();
        if taken {
            self.set_owner();
        }
        taken
    }

    /// Releases an exclusive hold.
    ///
    /// # Safety
    ///
    /// The caller holds the lock exclusive (from `lock_exclusive` or a
    /// successful `try_lock_exclusive`) and releases it once. Debug builds
    /// panic if the lock is not write-locked.
    pub unsafe fn unlock_exclusive(&self) {
        self.clear_owner();
        let prev = self.count.fetch_and(!WRITER_LOCKED, Ordering::Release);
        debug_assert!(prev & WRITER_LOCKED != 0, "RwSem: write unlock of a lock that is not write-locked");
        if prev & WAITERS != 0 {
            self.wake();
        }
    }

    /// Whether anyone holds the lock (a racy snapshot; a reader on its way
    /// to the queue may count briefly).
    pub fn is_locked(&self) -> bool {
        self.count.load(Ordering::Relaxed) & LOCK_MASK != 0
    }

    /// Whether a writer holds the lock (a racy snapshot).
    pub fn is_write_locked(&self) -> bool {
        self.count.load(Ordering::Relaxed) & WRITER_LOCKED != 0
    }

    /// Whether the count word is back to its initial state: no holder, no
    /// waiter, no reservation, no stray bias (for tests).
    #[cfg(test)]
    pub(super) fn is_idle(&self) -> bool {
        self.count.load(Ordering::Relaxed) == 0
    }

    fn set_owner(&self) {
        let me = thread_id();
        // No id, nothing to record (loom, thread teardown): keeping the
        // word at 0 only turns off the self-deadlock check.
        if me != 0 {
            self.owner.store(me, Ordering::Relaxed);
        }
        self.progress.fetch_add(1, Ordering::Relaxed);
    }

    fn clear_owner(&self) {
        if thread_id() != 0 {
            self.owner.store(0, Ordering::Relaxed);
        }
    }

    fn debug_check_not_write_holder(&self, what: &str) {
        let me = thread_id();
        debug_assert!(
            me == 0 || self.owner.load(Ordering::Relaxed) != me,
            "RwSem: {what} lock taken by the thread that holds it for write (self-deadlock)"
        );
    }

    /// Steals the lock if it is free and not reserved, even with waiters;
    /// on failure, the count that stopped it.
    fn try_write_unqueued(&self) -> Result<(), u64> {
        let mut count = self.count.load(Ordering::Relaxed);
        while count & (LOCK_MASK | HANDOFF) == 0 {
            match self.count.compare_exchange_weak(count, count | WRITER_LOCKED, Ordering::Acquire, Ordering::Relaxed) {
                Ok(_) => return Ok(()),
                Err(now) => count = now,
            }
        }
        Err(count)
    }

    #[cold]
    fn lock_shared_slow(&self) {
        self.debug_check_not_write_holder("read");
        if self.config.policy == SpinPolicy::Adaptive && self.spin_for_read() {
            return;
        }
        let waiter = Arc::new(Waiter { state: AtomicU32::new(WAITING) });
        let mut to_wake = Vec::new();
        {
            let mut queue = self.queue.lock();
            let first = queue.is_empty();
            queue.push_back(self.entry(Kind::Reader, &waiter));
            // Trade the fast path's transient bias for `WAITERS` in one RMW,
            // so no release falls between "bias gone" and "waiters visible".
            let adjust = if first { WAITERS.wrapping_sub(READER_BIAS) } else { READER_BIAS.wrapping_neg() };
            let now = self.count.fetch_add(adjust, Ordering::AcqRel).wrapping_add(adjust);
            debug_assert!(!first || now.wrapping_sub(adjust) & WAITERS == 0, "RwSem: WAITERS set, queue empty");
            // Free or reader-held: the front (maybe us) can go now. If a
            // writer holds it, its release sees `WAITERS` and wakes.
            if now & WRITER_LOCKED == 0 {
                self.wake_locked(&mut queue, &mut to_wake);
            }
        }
        wake_all(&to_wake);
        while waiter.state.load(Ordering::Acquire) != GRANTED {
            futex::wait(&waiter.state, WAITING, None);
        }
    }

    #[cold]
    fn lock_exclusive_slow(&self) {
        self.debug_check_not_write_holder("write");
        if self.try_write_unqueued().is_ok() || self.spin_for_write() {
            return;
        }
        let waiter = Arc::new(Waiter { state: AtomicU32::new(WAITING) });
        let mut queue = self.queue.lock();
        queue.push_back(self.entry(Kind::Writer, &waiter));
        if queue.len() == 1 {
            self.count.fetch_or(WAITERS, Ordering::Relaxed);
        }
        loop {
            if Arc::ptr_eq(&queue[0].waiter, &waiter) {
                if self.try_write_queued(&mut queue) {
                    return;
                }
            } else if self.try_write_unqueued().is_ok() {
                let at = queue.iter().position(|entry| Arc::ptr_eq(&entry.waiter, &waiter)).expect("we are queued");
                queue.remove(at);
                return;
            }
            // Set under `queue`, where wakers look at it, so a wake between
            // our unlock and our sleep turns the sleep into a no-op.
            waiter.state.store(WAITING, Ordering::Relaxed);
            drop(queue);
            while waiter.state.load(Ordering::Acquire) == WAITING {
                futex::wait(&waiter.state, WAITING, None);
            }
            queue = self.queue.lock();
        }
    }

    fn entry(&self, kind: Kind, waiter: &Arc<Waiter>) -> Entry {
        Entry { kind, waiter: Arc::clone(waiter), handoff_at: Deadline::after(self.config.handoff_after) }
    }

    /// The front writer's attempt, under `queue`: the only way to take a
    /// lock reserved by `HANDOFF`.
    fn try_write_queued(&self, queue: &mut VecDeque<Entry>) -> bool {
        let mut count = self.count.load(Ordering::Relaxed);
        loop {
            if count & LOCK_MASK != 0 {
                if count & HANDOFF == 0 && queue[0].handoff_at.expired() {
                    if let Err(now) =
                        self.count.compare_exchange(count, count | HANDOFF, Ordering::Relaxed, Ordering::Relaxed)
                    {
                        count = now;
                        continue;
                    }
                }
                return false;
            }
            let mut new = (count | WRITER_LOCKED) & !HANDOFF;
            if queue.len() == 1 {
                new &= !WAITERS;
            }
            match self.count.compare_exchange(count, new, Ordering::Acquire, Ordering::Relaxed) {
                Ok(_) => {
                    queue.pop_front();
                    return true;
                }
                Err(now) => count = now,
            }
        }
    }

    /// Lets the front of the queue go; called after a release that saw
    /// `WAITERS` (see the module doc).
    #[cold]
    fn wake(&self) {
        let mut to_wake = Vec::new();
        self.wake_locked(&mut self.queue.lock(), &mut to_wake);
        wake_all(&to_wake);
    }

    /// Under `queue`: grants the lock to the readers at the front, or, if
    /// the lock is free, tells the first writer at the front that is still
    /// asleep to retry. The futex wakes are left in `to_wake`, for after
    /// `queue` is released.
    fn wake_locked(&self, queue: &mut VecDeque<Entry>, to_wake: &mut Vec<Arc<Waiter>>) {
        let Some(front) = queue.front() else { return };
        if front.kind == Kind::Writer {
            // A spinner will take the free lock before any sleeper could
            // wake, and queues and retries if it stops: leave the sleepers
            // be (Go's mutex does the same). Not once the lock is reserved
            // (exact here: `HANDOFF` changes only under `queue`): the
            // spinner cannot take it, and the front must wake to. Nor when
            // the front is due a hand-off, which it can only claim awake.
            let count = self.count.load(Ordering::Relaxed);
            let reserved = count & HANDOFF != 0;
            if self.spinner.load(Ordering::Relaxed) && !reserved && !queue[0].handoff_at.expired() {
                return;
            }
            if count & LOCK_MASK == 0 {
                let asleep = queue
                    .iter()
                    .take_while(|entry| entry.kind == Kind::Writer)
                    .find(|entry| entry.waiter.state.load(Ordering::Relaxed) == WAITING);
                if let Some(entry) = asleep {
                    entry.waiter.state.store(WOKEN, Ordering::Release);
                    to_wake.push(Arc::clone(&entry.waiter));
                }
            }
            return;
        }
        let readers = queue.iter().take_while(|entry| entry.kind == Kind::Reader).count();
        let empties_queue = readers == queue.len();
        let mut count = self.count.load(Ordering::Relaxed);
        loop {
            if count & WRITER_LOCKED != 0 {
                // A barging writer took it; its release wakes us again.
                if count & HANDOFF == 0 && queue[0].handoff_at.expired() {
                    if let Err(now) =
                        self.count.compare_exchange(count, count | HANDOFF, Ordering::Relaxed, Ordering::Relaxed)
                    {
                        count = now;
                        continue;
                    }
                }
                return;
            }
            let mut new = (count + readers as u64 * READER_BIAS) & !HANDOFF;
            if empties_queue {
                new &= !WAITERS;
            }
            // AcqRel: acquire the last writer's release for the readers we
            // grant (passed on by the `GRANTED` store below).
            match self.count.compare_exchange(count, new, Ordering::AcqRel, Ordering::Relaxed) {
                Ok(_) => break,
                Err(now) => count = now,
            }
        }
        for entry in queue.drain(..readers) {
            entry.waiter.state.store(GRANTED, Ordering::Release);
            to_wake.push(entry.waiter);
        }
    }

    /// An adaptive reader whose fast path failed waits actively a short
    /// while for the writer in its way (holding, queued or reserving) to be
    /// done: it gives its transient bias back (waking as a release would),
    /// polls the count, and retries the fast path once nothing blocks
    /// readers. True if it took the lock; false when the budget ran out,
    /// with a transient bias held again for the queue.
    fn spin_for_read(&self) -> bool {
        let budget = match cpus_oversubscribed() {
            true => self.config.spin_budget.min(self.config.oversubscribed_spin_budget),
            false => self.config.owner_spin_budget,
        };
        let mut budget = Deadline::after(budget);
        let mut spins: u32 = 0;
        loop {
            self.drop_reader_bias();
            while self.count.load(Ordering::Relaxed) & READ_FAIL_MASK != 0 {
                if clock_due(spins) && budget.expired() {
                    return self.count.fetch_add(READER_BIAS, Ordering::Acquire) & READ_FAIL_MASK == 0;
                }
                spins = spins.wrapping_add(1);
                spin_loop();
            }
            if self.count.fetch_add(READER_BIAS, Ordering::Acquire) & READ_FAIL_MASK == 0 {
                return true;
            }
        }
    }

    /// Spins per the policy; true if it took the lock.
    fn spin_for_write(&self) -> bool {
        match self.config.policy {
            SpinPolicy::Block => false,
            SpinPolicy::Spin => self.spin_osq(),
            SpinPolicy::Adaptive => self.spin_adaptive(),
        }
    }

    /// 3.16: queue on the OSQ, then spin on the count word whoever owns the
    /// lock, until it is ours, reserved for a waiter, or the tick is over.
    fn spin_osq(&self) -> bool {
        let mut deadline = Deadline::after(self.config.spin_budget);
        let Some(token) = self.osq.lock(&mut deadline) else { return false };
        let taken = loop {
            match self.try_write_unqueued() {
                Ok(()) => break true,
                Err(count) if count & HANDOFF != 0 || deadline.expired() => break false,
                Err(_) => spin_loop(),
            }
        };
        self.osq.unlock(token);
        taken
    }

    /// Spin only while the wait is likely shorter than a sleep and a wake:
    /// one spinner, a writer owner that keeps changing, CPUs to spare. With
    /// the CPUs oversubscribed, spin no longer than blocking would cost (a
    /// spin that short loses at most as much as it can win), then yield a
    /// few times: a yield hands the CPU to whoever is runnable, a preempted
    /// owner included, so it takes nothing the owner needs, yet keeps this
    /// writer runnable to catch the release without a cross-CPU wake-up.
    /// Writers that find another spinner yield the same way when the CPUs
    /// are oversubscribed, and queue at once otherwise.
    fn spin_adaptive(&self) -> bool {
        if self.spinner.load(Ordering::Relaxed) || self.spinner.swap(true, Ordering::Acquire) {
            // Someone else spins. Oversubscribed, a yield costs the owner
            // nothing and keeps this writer off the futex queue a while.
            return cpus_oversubscribed() && self.yield_and_retry();
        }
        let oversubscribed = cpus_oversubscribed();
        let budget = match oversubscribed {
            true => self.config.spin_budget.min(self.config.oversubscribed_spin_budget),
            false => self.config.spin_budget,
        };
        let mut budget = Deadline::after(budget);
        let mut seen = self.progress.load(Ordering::Relaxed);
        let mut owner_budget = Deadline::after(self.config.owner_spin_budget);
        let mut spins: u32 = 0;
        let taken = loop {
            let count = match self.try_write_unqueued() {
                Ok(()) => break true,
                Err(count) => count,
            };
            if !spinnable(count) {
                break false;
            }
            // The clock costs as much as a few rounds: read it every few.
            if clock_due(spins) {
                if budget.expired() {
                    break false;
                }
                let now = self.progress.load(Ordering::Relaxed);
                if now != seen {
                    seen = now;
                    owner_budget = Deadline::after(self.config.owner_spin_budget);
                } else if owner_budget.expired() {
                    break false;
                }
            }
            spins = spins.wrapping_add(1);
            spin_loop();
        };
        // A swap, not a store: same effect, and loom 0.7 may let a plain
        // store slip between the read and the write of another thread's
        // earlier swap (tokio-rs/loom#254), so a releaser under `queue` could
        // see this flag still set, defer its wake-up, and leave the queue
        // asleep. Once per spin, it costs nothing measurable.
        self.spinner.swap(false, Ordering::Release);
        if taken || !oversubscribed {
            return taken;
        }
        self.yield_and_retry()
    }

    /// Yields and retries a steal a few times, while the lock stays
    /// writer-held; true if it took the lock.
    fn yield_and_retry(&self) -> bool {
        for _ in 0..YIELDS_WHEN_OVERSUBSCRIBED {
            yield_now();
            match self.try_write_unqueued() {
                Ok(()) => return true,
                Err(count) if !spinnable(count) => return false,
                Err(_) => {}
            }
        }
        false
    }
}

/// An adaptive spinner looks at the clock (spin budget, owner progress) once
/// per this many rounds.
const CLOCK_EVERY_SPINS: u32 = 8;

/// Whether spin round `spins` reads the clock: every [`CLOCK_EVERY_SPINS`]
/// rounds, and every round under loom, where the clock is a step counter
/// (`Deadline`) and reading it costs nothing: a budget there lasts two
/// rounds instead of seventeen, so models explore interleavings rather than
/// spin rounds. Only how long a spin lasts changes, never what it does.
#[inline]
fn clock_due(spins: u32) -> bool {
    cfg!(loom) || spins % CLOCK_EVERY_SPINS == 0
}

/// How many times an adaptive writer yields and retries before it queues,
/// when CPUs are oversubscribed (parking_lot yields 7 times). Sized on a
/// 2-CPU VM, 16 writers: with only the spinner yielding, 8 rounds gave
/// 0.93-1.06x parking_lot's throughput at 1 us holds (median of per-round
/// ratios, 16-20 interleaved runs) and 1.12x at 100 us, 32 rounds
/// 0.91-0.98x and 1.40x; with every writer yielding, 8 rounds gave
/// 1.01-1.11x and 1.19-1.31x. Each round costs a syscall, and a round only
/// takes long when others are runnable, who then get the CPU.
const YIELDS_WHEN_OVERSUBSCRIBED: u32 = 8;

/// Whether an adaptive writer may keep waiting actively on a lock it failed
/// to steal: only on a writer. Not when it is reserved for a waiter, nor
/// when readers hold it (no owner to watch, and they may hold it long;
/// biases next to a writer are transient readers, not holders). A failed
/// steal leaves no other case.
fn spinnable(count: u64) -> bool {
    count & (HANDOFF | WRITER_LOCKED) == WRITER_LOCKED
}

fn wake_all(waiters: &[Arc<Waiter>]) {
    for waiter in waiters {
        futex::wake(&waiter.state, 1);
    }
}

/// A nonzero id unique among live threads (the address of a thread-local),
/// or 0 where there is none: under loom, whose threads share one OS
/// thread's locals, and during thread teardown.
fn thread_id() -> u64 {
    #[cfg(loom)]
    return 0;
    #[cfg(not(loom))]
    {
        thread_local!(static ANCHOR: u8 = const { 0 });
        ANCHOR.try_with(|anchor| anchor as *const u8 as u64).unwrap_or(0)
    }
}

impl Default for RawRwSem {
    /// [`RawRwSem::with_config`] with [`RwSemConfig::default`].
    fn default() -> Self {
        Self::with_config(RwSemConfig::default())
    }
}

impl fmt::Debug for RawRwSem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let count = self.count.load(Ordering::Relaxed);
        f.debug_struct("RawRwSem")
            .field("policy", &self.config.policy)
            .field("writer", &(count & WRITER_LOCKED != 0))
            .field("readers", &(count >> READER_SHIFT))
            .field("waiters", &(count & WAITERS != 0))
            .field("handoff", &(count & HANDOFF != 0))
            .finish()
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use crate::test_support::wait_until;
    use std::sync::atomic::{AtomicBool as StdAtomicBool, Ordering::Relaxed};
    use std::time::{Duration, Instant};

    #[test]
    fn constructors_and_config() {
        for policy in SpinPolicy::ALL {
            assert_eq!(RawRwSem::new(policy).config(), &RwSemConfig::new(policy));
        }
        let config = RwSemConfig { handoff_after: Duration::from_millis(9), ..RwSemConfig::default() };
        assert_eq!(RawRwSem::with_config(config).config().handoff_after, Duration::from_millis(9));
        assert_eq!(RawRwSem::default().config(), &RwSemConfig::default());
    }

    #[test]
    fn shared_lock_and_unlock() {
        let sem = RawRwSem::new(SpinPolicy::Block);
        assert!(!sem.is_locked());
        sem.lock_shared();
        sem.lock_shared();
        assert!(sem.is_locked() && !sem.is_write_locked());
        assert!(sem.try_lock_shared());
        assert!(!sem.try_lock_exclusive());
        for _ in 0..3 {
            // SAFETY: three shared holds taken above.
            unsafe { sem.unlock_shared() };
        }
        assert!(!sem.is_locked());
        assert_eq!(sem.count.load(Relaxed), 0);
    }

    #[test]
    fn exclusive_lock_and_unlock() {
        for policy in SpinPolicy::ALL {
            let sem = RawRwSem::new(policy);
            sem.lock_exclusive();
            assert!(sem.is_locked() && sem.is_write_locked());
            assert_eq!(sem.owner.load(Relaxed), thread_id());
            assert!(!sem.try_lock_shared());
            assert!(!sem.try_lock_exclusive());
            // SAFETY: taken above.
            unsafe { sem.unlock_exclusive() };
            assert!(sem.try_lock_exclusive());
            // SAFETY: taken by the try above.
            unsafe { sem.unlock_exclusive() };
            assert_eq!(sem.count.load(Relaxed), 0);
            assert_eq!(sem.owner.load(Relaxed), 0);
            assert_eq!(sem.progress.load(Relaxed), 2);
        }
    }

    #[test]
    fn debug_decodes_the_count_word() {
        let sem = RawRwSem::new(SpinPolicy::Spin);
        sem.lock_shared();
        assert_eq!(
            format!("{sem:?}"),
            "RawRwSem { policy: Spin, writer: false, readers: 1, waiters: false, handoff: false }"
        );
        // SAFETY: taken above.
        unsafe { sem.unlock_shared() };
    }

    /// A queued writer blocks new readers, even while readers hold the lock.
    #[test]
    fn queued_writer_blocks_new_readers() {
        let sem = RawRwSem::new(SpinPolicy::Adaptive);
        sem.lock_shared();
        std::thread::scope(|s| {
            s.spawn(|| {
                sem.lock_exclusive();
                // SAFETY: taken just above.
                unsafe { sem.unlock_exclusive() };
            });
            wait_until("the writer queued", || sem.count.load(Relaxed) & WAITERS != 0);
            assert!(!sem.try_lock_shared());
            // SAFETY: taken at the top.
            unsafe { sem.unlock_shared() };
        });
        assert_eq!(sem.count.load(Relaxed), 0);
    }

    /// Readers queued behind a writer are all granted by its release.
    #[test]
    fn release_grants_all_front_readers() {
        let sem = RawRwSem::new(SpinPolicy::Block);
        let inside = std::sync::Barrier::new(3);
        sem.lock_exclusive();
        std::thread::scope(|s| {
            for _ in 0..3 {
                s.spawn(|| {
                    sem.lock_shared();
                    // Passes only if all three hold the lock at once.
                    inside.wait();
                    // SAFETY: taken just above.
                    unsafe { sem.unlock_shared() };
                });
            }
            wait_until("three readers queued", || sem.queue.lock().len() == 3);
            // SAFETY: taken before the readers started.
            unsafe { sem.unlock_exclusive() };
        });
        assert_eq!(sem.count.load(Relaxed), 0);
    }

    /// Each wake of a free lock tells one more sleeping writer at the front
    /// to retry, even while the ones woken before have not run yet; a
    /// writer behind a reader is left asleep.
    #[test]
    fn each_wake_rouses_the_next_sleeping_front_writer() {
        let sem = RawRwSem::new(SpinPolicy::Block);
        let waiters: Vec<Arc<Waiter>> = (0..3).map(|_| Arc::new(Waiter { state: AtomicU32::new(WAITING) })).collect();
        {
            let mut queue = sem.queue.lock();
            queue.push_back(sem.entry(Kind::Writer, &waiters[0]));
            queue.push_back(sem.entry(Kind::Writer, &waiters[1]));
            queue.push_back(sem.entry(Kind::Reader, &Arc::new(Waiter { state: AtomicU32::new(WAITING) })));
            queue.push_back(sem.entry(Kind::Writer, &waiters[2]));
        }
        sem.count.store(WAITERS, Relaxed);
        let states = || waiters.iter().map(|w| w.state.load(Relaxed)).collect::<Vec<_>>();
        sem.wake();
        assert_eq!(states(), [WOKEN, WAITING, WAITING]);
        sem.wake();
        assert_eq!(states(), [WOKEN, WOKEN, WAITING]);
        sem.wake();
        assert_eq!(states(), [WOKEN, WOKEN, WAITING], "the writer behind the reader stays asleep");
        assert_eq!(sem.queue.lock().len(), 4, "waking leaves writers queued until they take the lock");
        // A held lock wakes nobody: its release will.
        waiters[1].state.store(WAITING, Relaxed);
        sem.count.store(WAITERS | WRITER_LOCKED, Relaxed);
        sem.wake();
        assert_eq!(states(), [WOKEN, WAITING, WAITING]);
    }

    /// While an adaptive spinner spins, a free lock's wake leaves the
    /// sleepers be, unless the front is due a hand-off.
    #[test]
    fn an_active_spinner_defers_wake_ups_but_not_a_due_hand_off() {
        for (handoff_after, woken) in [(Duration::from_secs(60), WAITING), (Duration::ZERO, WOKEN)] {
            let sem = RawRwSem::with_config(RwSemConfig { handoff_after, ..RwSemConfig::new(SpinPolicy::Adaptive) });
            let waiter = Arc::new(Waiter { state: AtomicU32::new(WAITING) });
            sem.queue.lock().push_back(sem.entry(Kind::Writer, &waiter));
            sem.count.store(WAITERS, Relaxed);
            sem.spinner.store(true, Relaxed);
            sem.wake();
            assert_eq!(waiter.state.load(Relaxed), woken, "handoff_after {handoff_after:?}");
            sem.spinner.store(false, Relaxed);
            sem.wake();
            assert_eq!(waiter.state.load(Relaxed), WOKEN);
        }
    }

    /// An adaptive reader whose fast path failed gives its transient bias
    /// back while it waits: it gets in once nothing blocks readers, and
    /// when its budget runs out it holds a transient bias again, for the
    /// queue.
    #[test]
    fn adaptive_reader_waits_without_its_bias() {
        let config = RwSemConfig { owner_spin_budget: Duration::ZERO, ..RwSemConfig::new(SpinPolicy::Adaptive) };
        let sem = RawRwSem::with_config(config);
        sem.count.store(READER_BIAS, Relaxed);
        assert!(sem.spin_for_read(), "nothing blocks readers");
        assert_eq!(sem.count.load(Relaxed), READER_BIAS, "one reader holds it");
        sem.count.store(WRITER_LOCKED | READER_BIAS, Relaxed);
        assert!(!sem.spin_for_read(), "the writer outlasts a zero budget");
        assert_eq!(sem.count.load(Relaxed), WRITER_LOCKED | READER_BIAS, "transient bias back, for the queue");
    }

    /// A front writer that waited past `handoff_after` reserves the lock:
    /// a barging `try_lock_exclusive` fails until that writer has had it.
    #[test]
    fn handoff_reserves_the_lock_for_the_front_waiter() {
        let config = RwSemConfig { handoff_after: Duration::from_millis(1), ..RwSemConfig::new(SpinPolicy::Block) };
        let sem = RawRwSem::with_config(config);
        let waiter_done = StdAtomicBool::new(false);
        sem.lock_exclusive();
        std::thread::scope(|s| {
            s.spawn(|| {
                sem.lock_exclusive();
                waiter_done.store(true, Relaxed);
                // SAFETY: taken just above.
                unsafe { sem.unlock_exclusive() };
            });
            wait_until("the writer queued", || sem.count.load(Relaxed) & WAITERS != 0);
            wait_until("the front is due a hand-off", || sem.queue.lock()[0].handoff_at.expired());
            // What a release and a barging writer leave behind: the front
            // writer woken while the lock is held again. Under `queue` the
            // waiter has stored WAITING and let go, so the wake is not lost.
            let front = Arc::clone(&sem.queue.lock()[0].waiter);
            front.state.store(WOKEN, Ordering::Release);
            futex::wake(&front.state, 1);
            // The waiter retries, fails against us and reserves the lock.
            wait_until("hand-off requested", || sem.count.load(Relaxed) & HANDOFF != 0);
            assert!(!waiter_done.load(Relaxed));
            // SAFETY: held since the top.
            unsafe { sem.unlock_exclusive() };
            // Until the waiter has had the lock, nobody else gets it.
            while !waiter_done.load(Relaxed) {
                if sem.try_lock_exclusive() {
                    assert!(waiter_done.load(Relaxed), "a barging writer took a reserved lock");
                    // SAFETY: just taken.
                    unsafe { sem.unlock_exclusive() };
                }
            }
        });
        assert_eq!(sem.count.load(Relaxed) & (LOCK_MASK | HANDOFF | WAITERS), 0);
    }

    /// A reader at the front past its deadline reserves the lock against a
    /// barging writer through the waker that failed to grant it.
    #[test]
    fn handoff_for_a_reader_front() {
        let config = RwSemConfig { handoff_after: Duration::ZERO, ..RwSemConfig::new(SpinPolicy::Block) };
        let sem = RawRwSem::with_config(config);
        sem.lock_exclusive();
        std::thread::scope(|s| {
            s.spawn(|| {
                sem.lock_shared();
                // SAFETY: taken just above.
                unsafe { sem.unlock_shared() };
            });
            wait_until("the reader queued", || sem.count.load(Relaxed) & WAITERS != 0);
            // A waker that finds the lock write-held (we hold it) reserves it.
            sem.wake();
            assert_ne!(sem.count.load(Relaxed) & HANDOFF, 0);
            // SAFETY: taken at the top.
            unsafe { sem.unlock_exclusive() };
        });
        assert_eq!(sem.count.load(Relaxed), 0);
    }

    #[test]
    fn adaptive_takes_a_free_lock_but_never_spins_on_readers() {
        let config = RwSemConfig { spin_budget: Duration::from_secs(5), ..RwSemConfig::new(SpinPolicy::Adaptive) };
        let sem = RawRwSem::with_config(config);
        sem.lock_exclusive();
        // SAFETY: taken above.
        unsafe { sem.unlock_exclusive() };
        // A free lock is taken at the first try, unless CPUs are
        // oversubscribed right now and the spinner does not start.
        let took = sem.spin_adaptive();
        assert_eq!(took, sem.is_write_locked());
        if took {
            // SAFETY: the spinner took it.
            unsafe { sem.unlock_exclusive() };
        }
        sem.lock_shared();
        assert!(!sem.spin_adaptive(), "adaptive never spins on a reader-held lock");
        // SAFETY: taken above.
        unsafe { sem.unlock_shared() };
    }

    #[test]
    fn adaptive_stops_when_the_owner_does_not_move() {
        let config = RwSemConfig {
            spin_budget: Duration::from_secs(30),
            owner_spin_budget: Duration::from_millis(1),
            ..RwSemConfig::new(SpinPolicy::Adaptive)
        };
        let sem = RawRwSem::with_config(config);
        sem.lock_exclusive();
        let start = Instant::now();
        assert!(!sem.spin_adaptive());
        // The bound is the point: only the 30 s total budget ends the spin
        // after 10 s, while the 1 ms owner budget ends it after a few ms,
        // preemptions included, a margin of over 1000x.
        assert!(start.elapsed() < Duration::from_secs(10), "gave up on the owner budget, not the total");
        // SAFETY: taken above.
        unsafe { sem.unlock_exclusive() };
    }

    #[test]
    fn adaptive_allows_one_spinner() {
        let sem = RawRwSem::new(SpinPolicy::Adaptive);
        sem.lock_exclusive();
        sem.spinner.store(true, Relaxed);
        // It does not spin; oversubscribed, it yields and retries a few
        // times, which fail while the lock stays held.
        assert!(!sem.spin_adaptive(), "a second writer queues instead of spinning");
        assert!(sem.spinner.load(Relaxed), "and leaves the spinner's flag alone");
        // SAFETY: taken above.
        unsafe { sem.unlock_exclusive() };
    }

    #[test]
    fn spin_gives_up_after_its_budget() {
        let config = RwSemConfig { spin_budget: Duration::from_millis(2), ..RwSemConfig::new(SpinPolicy::Spin) };
        let sem = RawRwSem::with_config(config);
        sem.lock_shared();
        let start = Instant::now();
        assert!(!sem.spin_osq(), "3.16 spins on a reader-held lock, then gives up");
        assert!(start.elapsed() >= Duration::from_millis(2));
        // SAFETY: taken above.
        unsafe { sem.unlock_shared() };
        assert!(sem.spin_osq());
        // SAFETY: the spinner took it.
        unsafe { sem.unlock_exclusive() };
    }

    #[cfg(debug_assertions)]
    #[test]
    #[should_panic(expected = "write unlock of a lock that is not write-locked")]
    fn write_unlock_of_unlocked_panics() {
        // SAFETY: deliberately wrong; the debug check panics.
        unsafe { RawRwSem::default().unlock_exclusive() };
    }

    #[cfg(debug_assertions)]
    #[test]
    #[should_panic(expected = "read unlock of a lock that is not read-locked")]
    fn read_unlock_of_unlocked_panics() {
        // SAFETY: deliberately wrong; the debug check panics.
        unsafe { RawRwSem::default().unlock_shared() };
    }

    #[cfg(debug_assertions)]
    #[test]
    #[should_panic(expected = "self-deadlock")]
    fn recursive_write_panics() {
        let sem = RawRwSem::new(SpinPolicy::Block);
        sem.lock_exclusive();
        sem.lock_exclusive();
    }

    #[cfg(debug_assertions)]
    #[test]
    #[should_panic(expected = "self-deadlock")]
    fn read_under_own_write_panics() {
        let sem = RawRwSem::new(SpinPolicy::Adaptive);
        sem.lock_exclusive();
        sem.lock_shared();
    }
}
