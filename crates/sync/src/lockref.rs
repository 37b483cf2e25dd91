//! A reference count and a spinlock packed into one 64-bit word (the
//! kernel's `struct lockref`, `include/linux/lockref.h`, `lib/lockref.c`).
//!
//! Invariant: the count may only change while the lock part is free, in one
//! compare-and-swap of the whole word, or while the lock is held by the
//! changer. So a lock holder sees a count nobody else can change, and a
//! lockless get/put can never slip in under a holder that is deciding what to
//! do with the object (free it, mark it dead). A negative count means dead
//! ([`DEAD`], -128 as in the kernel): no new references may be taken.
//!
//! Why: the dcache needs both a refcount and a lock per dentry, and most
//! operations only touch the count. With both in one word on one cache line,
//! an uncontended get or put is a single `cmpxchg` with no lock taken; only
//! the rare "last reference" and "kill" paths take the spinlock, and they see
//! a stable count while they hold it. The fast path gives up after
//! [`CMPXCHG_RETRIES`] failed attempts (the kernel's `CMPXCHG_LOOP`) and
//! takes the lock instead, so heavy contention degrades to a plain spinlock
//! rather than livelock.
//!
//! The cost: every get and put still writes the shared line. When many CPUs
//! take references on one hot dentry ("/proc", a sysfs directory), the line
//! bounces between them on every operation and the cmpxchg keeps failing:
//! that is the contention behind seeds 000 (kernfs) and 003 (/proc
//! `pid_revalidate`). The cure there is to take no reference at all (stay in
//! RCU walk, validate with a [`SeqCount`](crate::seqcount::SeqCount)), not a
//! faster lockref. Do not use a lockref when the count alone would do (an
//! atomic counter is cheaper) or when the lock protects long critical
//! sections (waiters spin).
//!
//! Under loom a waiter for the lock parks until the unlock's
//! `shim::wake_spinners` instead of spinning (see `shim`): only the
//! length of the wait changes, so models explore interleavings, not rounds.
//!
//! ```
//! use vfscale_sync::lockref::LockRef;
//!
//! let dentry = LockRef::new(1);
//! assert!(dentry.get_not_dead()); // lockless: one cmpxchg
//! assert_eq!(dentry.put_return(), Some(1));
//!
//! // The last put does not drop to 0 locklessly: it hands back the lock so
//! // the caller can decide, with the count stable, to kill the object.
//! let mut guard = dentry.put_or_lock().expect("last reference");
//! assert_eq!(guard.count(), 1);
//! guard.mark_dead();
//! drop(guard);
//! assert!(dentry.is_dead());
//! assert!(!dentry.get_not_dead());
//! ```

use crate::shim::{spin_wait, wake_spinners, AtomicU64, Ordering};
use std::fmt;

/// The count of a dead lockref (the kernel's `lockref_mark_dead`).
pub const DEAD: i32 = -128;

/// Failed lockless attempts before falling back to the lock (the kernel's
/// `CMPXCHG_LOOP` uses 100).
pub const CMPXCHG_RETRIES: u32 = 100;

/// The lock is the low half of the word, the count the high half.
const LOCKED: u64 = 1;
const COUNT_SHIFT: u32 = 32;

fn pack(count: i32, locked: bool) -> u64 {
    (u64::from(count as u32) << COUNT_SHIFT) | u64::from(locked)
}

fn count_of(word: u64) -> i32 {
    (word >> COUNT_SHIFT) as u32 as i32
}

fn plus_one(count: i32) -> i32 {
    debug_assert!(count != i32::MAX, "lockref count overflow");
    count.wrapping_add(1)
}

/// How the lockless fast path ended.
enum Fast {
    /// The count was changed to this value by one cmpxchg.
    Changed(i32),
    /// The operation declined given the count it saw; nothing changed.
    Declined,
    /// The lock was held, or the retries ran out: take the lock.
    Contended,
}

/// A 32-bit signed reference count and a spinlock in one atomic word.
pub struct LockRef {
    word: AtomicU64,
}

impl LockRef {
    /// An unlocked lockref holding `count` references.
    pub fn new(count: i32) -> Self {
        Self { word: AtomicU64::new(pack(count, false)) }
    }

    /// The count now (a racy snapshot; [`DEAD`] or below once dead).
    pub fn count(&self) -> i32 {
        count_of(self.word.load(Ordering::Relaxed))
    }

    /// Whether the lockref has been marked dead (a racy snapshot).
    pub fn is_dead(&self) -> bool {
        self.count() < 0
    }

    /// Takes a reference unconditionally (`lockref_get`): the caller already
    /// holds one, or otherwise knows the object cannot die.
    pub fn get(&self) {
        if let Fast::Changed(_) = self.cmpxchg_loop(|c| Some(plus_one(c))) {
            return;
        }
        self.lock().inc();
    }

    /// Takes a reference unless the count is zero or negative
    /// (`lockref_get_not_zero`).
    #[must_use = "false means no reference was taken"]
    pub fn get_not_zero(&self) -> bool {
        match self.cmpxchg_loop(|c| (c > 0).then(|| plus_one(c))) {
            Fast::Changed(_) => true,
            Fast::Declined => false,
            Fast::Contended => {
                let mut guard = self.lock();
                let live = guard.count() > 0;
                if live {
                    guard.inc();
                }
                live
            }
        }
    }

    /// Takes a reference unless the lockref is dead (`lockref_get_not_dead`,
    /// what RCU path walk uses to leave RCU mode). A zero count is fine.
    #[must_use = "false means no reference was taken"]
    pub fn get_not_dead(&self) -> bool {
        match self.cmpxchg_loop(|c| (c >= 0).then(|| plus_one(c))) {
            Fast::Changed(_) => true,
            Fast::Declined => false,
            Fast::Contended => {
                let mut guard = self.lock();
                let live = !guard.is_dead();
                if live {
                    guard.inc();
                }
                live
            }
        }
    }

    /// Drops a reference locklessly and returns the new count
    /// (`lockref_put_return`). `None`, with nothing changed, when the lock is
    /// held, the retries ran out, or the count is already zero or negative:
    /// the caller falls back to a locked put.
    #[must_use = "None means no reference was dropped"]
    pub fn put_return(&self) -> Option<i32> {
        match self.cmpxchg_loop(|c| (c > 0).then(|| c - 1)) {
            Fast::Changed(count) => Some(count),
            Fast::Declined | Fast::Contended => None,
        }
    }

    /// Drops a reference unless it is the last one (`lockref_put_or_lock`).
    ///
    /// `None`: the count was above 1 and has been decremented. `Some(guard)`:
    /// the count is 1 or less, nothing changed, and the caller now holds the
    /// lock to finish the put (decrement, mark dead, free) with a stable
    /// count.
    #[must_use = "Some means the reference is still held and the lock taken"]
    pub fn put_or_lock(&self) -> Option<LockRefGuard<'_>> {
        match self.cmpxchg_loop(|c| (c > 1).then(|| c - 1)) {
            Fast::Changed(_) => None,
            Fast::Declined | Fast::Contended => {
                let mut guard = self.lock();
                if guard.count() <= 1 {
                    return Some(guard);
                }
                guard.dec();
                None
            }
        }
    }

    /// Spins until the embedded lock is held.
    pub fn lock(&self) -> LockRefGuard<'_> {
        loop {
            if self.try_lock_raw() {
                return LockRefGuard { lockref: self };
            }
            loop {
                let word = self.word.load(Ordering::Relaxed);
                if word & LOCKED == 0 {
                    break;
                }
                spin_wait(&self.word, word);
            }
        }
    }

    /// Takes the embedded lock if it is free right now.
    pub fn try_lock(&self) -> Option<LockRefGuard<'_>> {
        if self.try_lock_raw() {
            Some(LockRefGuard { lockref: self })
        } else {
            None
        }
    }

    fn try_lock_raw(&self) -> bool {
        // fetch_or touches only the lock bit, so a lockless get/put racing
        // with it does not make the lock attempt fail (unlike a whole-word
        // cmpxchg); the first load keeps waiters from writing the line.
        let locked = self.word.load(Ordering::Relaxed) & LOCKED == 0
            && self.word.fetch_or(LOCKED, Ordering::Acquire) & LOCKED == 0;
        if locked {
            crate::audit::lock_acquired();
        }
        locked
    }

    /// The kernel's `CMPXCHG_LOOP`: while the lock half is free, try to
    /// install `code(count)` with one cmpxchg of the whole word.
    ///
    /// Successful cmpxchgs are `AcqRel`, so count changes form one
    /// happens-before chain with the lock's acquire/release: whoever takes
    /// the last reference, or finds the count dead, sees everything done by
    /// earlier holders (free on x86, where `lock cmpxchg` is a full barrier).
    #[inline]
    fn cmpxchg_loop(&self, code: impl Fn(i32) -> Option<i32>) -> Fast {
        let mut old = self.word.load(Ordering::Relaxed);
        for _ in 0..CMPXCHG_RETRIES {
            if old & LOCKED != 0 {
                return Fast::Contended;
            }
            let Some(new) = code(count_of(old)) else {
                return Fast::Declined;
            };
            match self.word.compare_exchange(old, pack(new, false), Ordering::AcqRel, Ordering::Relaxed) {
                Ok(_) => {
                    return Fast::Changed(new);
                }
                Err(current) => old = current,
            }
        }
        Fast::Contended
    }
}

impl fmt::Debug for LockRef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let word = self.word.load(Ordering::Relaxed);
        f.debug_struct("LockRef").field("count", &count_of(word)).field("locked", &(word & LOCKED != 0)).finish()
    }
}

/// Holds a [`LockRef`]'s embedded lock; the count is stable and only this
/// guard may change it. Releases the lock when dropped.
#[must_use = "the lock is released as soon as the guard is dropped"]
pub struct LockRefGuard<'a> {
    lockref: &'a LockRef,
}

impl LockRefGuard<'_> {
    /// The count (stable while the guard is held).
    pub fn count(&self) -> i32 {
        count_of(self.lockref.word.load(Ordering::Relaxed))
    }

    /// Sets the count.
    pub fn set_count(&mut self, count: i32) {
        // Plain store: while the lock bit is set no cmpxchg of another thread
        // can succeed and a racing lock attempt only re-sets the lock bit, so
        // this cannot lose an update. The unlock publishes it (release).
        self.lockref.word.store(pack(count, true), Ordering::Relaxed);
    }

    /// Adds a reference.
    pub fn inc(&mut self) {
        let count = plus_one(self.count());
        self.set_count(count);
    }

    /// Drops a reference. Debug builds panic when a live count would go
    /// below zero ("put below zero"), where the kernel would `BUG()`.
    pub fn dec(&mut self) {
        let count = self.count();
        debug_assert!(count != 0, "put below zero");
        self.set_count(count.wrapping_sub(1));
    }

    /// Marks the lockref dead (count [`DEAD`]): later `get_not_dead` and
    /// `get_not_zero` fail (`lockref_mark_dead`).
    pub fn mark_dead(&mut self) {
        self.set_count(DEAD);
    }

    /// Whether the count is negative (dead).
    pub fn is_dead(&self) -> bool {
        self.count() < 0
    }
}

impl Drop for LockRefGuard<'_> {
    fn drop(&mut self) {
        let was = self.lockref.word.fetch_and(!LOCKED, Ordering::Release);
        wake_spinners(&self.lockref.word);
        debug_assert!(was & LOCKED != 0, "LockRef: unlock of an unlocked lock");
    }
}

impl fmt::Debug for LockRefGuard<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("LockRefGuard").field("count", &self.count()).finish()
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use crate::test_support::stress_iters;
    use std::sync::Arc;
    use std::thread;

    /// The dput pattern: lockless when not the last reference.
    fn put(r: &LockRef) {
        if r.put_return().is_none() {
            if let Some(mut guard) = r.put_or_lock() {
                guard.dec();
            }
        }
    }

    #[test]
    fn packing_round_trips_negative_counts() {
        for count in [0, 1, -1, DEAD, i32::MAX, i32::MIN] {
            assert_eq!(count_of(pack(count, true)), count);
            assert_eq!(count_of(pack(count, false)), count);
            assert_eq!(pack(count, true) & LOCKED, LOCKED);
        }
    }

    #[test]
    fn new_count_and_debug() {
        let r = LockRef::new(3);
        assert_eq!(r.count(), 3);
        assert!(!r.is_dead());
        assert_eq!(format!("{r:?}"), "LockRef { count: 3, locked: false }");
    }

    #[test]
    fn get_always_increments() {
        let r = LockRef::new(0);
        r.get();
        assert_eq!(r.count(), 1);
        let dead = LockRef::new(DEAD);
        dead.get();
        assert_eq!(dead.count(), DEAD + 1);
    }

    #[test]
    fn get_not_zero_refuses_zero_and_dead() {
        let r = LockRef::new(1);
        assert!(r.get_not_zero());
        assert_eq!(r.count(), 2);
        assert!(!LockRef::new(0).get_not_zero());
        assert!(!LockRef::new(DEAD).get_not_zero());
    }

    #[test]
    fn get_not_dead_accepts_zero_refuses_dead() {
        let r = LockRef::new(0);
        assert!(r.get_not_dead());
        assert_eq!(r.count(), 1);
        let dead = LockRef::new(DEAD);
        assert!(!dead.get_not_dead());
        assert_eq!(dead.count(), DEAD);
    }

    #[test]
    fn put_return_decrements_or_declines() {
        let r = LockRef::new(2);
        assert_eq!(r.put_return(), Some(1));
        assert_eq!(r.put_return(), Some(0));
        assert_eq!(r.put_return(), None, "count 0 must not go negative");
        assert_eq!(r.count(), 0);
        assert_eq!(LockRef::new(DEAD).put_return(), None);
    }

    #[test]
    fn put_return_declines_while_locked() {
        let r = LockRef::new(2);
        let guard = r.lock();
        assert_eq!(r.put_return(), None);
        drop(guard);
        assert_eq!(r.count(), 2);
    }

    #[test]
    fn put_or_lock_locks_on_last_reference() {
        let r = LockRef::new(2);
        assert!(r.put_or_lock().is_none());
        assert_eq!(r.count(), 1);
        let mut guard = r.put_or_lock().expect("last reference locks");
        assert_eq!(guard.count(), 1);
        assert!(r.try_lock().is_none());
        guard.dec();
        assert_eq!(guard.count(), 0);
        drop(guard);
        assert_eq!(r.count(), 0);
        assert!(r.put_or_lock().is_some(), "count 0 also hands back the lock");
    }

    #[test]
    fn put_or_lock_slow_path_decrements_above_one() {
        let r = Arc::new(LockRef::new(3));
        let guard = r.lock();
        let putter = {
            let r = Arc::clone(&r);
            thread::spawn(move || r.put_or_lock().is_none())
        };
        thread::sleep(std::time::Duration::from_millis(10));
        drop(guard);
        assert!(putter.join().unwrap(), "count 3 must decrement through the lock");
        assert_eq!(r.count(), 2);
    }

    #[test]
    fn lock_try_lock_and_guard_ops() {
        let r = LockRef::new(5);
        {
            let mut guard = r.lock();
            assert!(r.try_lock().is_none());
            assert_eq!(format!("{r:?}"), "LockRef { count: 5, locked: true }");
            assert_eq!(format!("{guard:?}"), "LockRefGuard { count: 5 }");
            guard.inc();
            guard.dec();
            guard.dec();
            assert_eq!(guard.count(), 4);
            guard.set_count(7);
            assert!(!guard.is_dead());
            guard.mark_dead();
            assert!(guard.is_dead());
            assert_eq!(guard.count(), DEAD);
        }
        assert!(r.is_dead());
        let guard = r.try_lock().expect("unlocked after drop");
        drop(guard);
        assert!(!r.get_not_dead());
        assert!(!r.get_not_zero());
    }

    #[test]
    fn slow_paths_run_while_locked() {
        let r = Arc::new(LockRef::new(1));
        let guard = r.lock();
        let getter = {
            let r = Arc::clone(&r);
            thread::spawn(move || {
                r.get();
                (r.get_not_zero(), r.get_not_dead())
            })
        };
        thread::sleep(std::time::Duration::from_millis(10));
        assert!(!getter.is_finished(), "gets must wait for the lock holder");
        drop(guard);
        assert_eq!(getter.join().unwrap(), (true, true));
        assert_eq!(r.count(), 4);
    }

    #[test]
    #[cfg(debug_assertions)]
    #[should_panic(expected = "put below zero")]
    fn dec_below_zero_panics_in_debug() {
        let r = LockRef::new(0);
        r.lock().dec();
    }

    #[test]
    fn dec_on_dead_is_allowed() {
        let r = LockRef::new(DEAD);
        r.get();
        r.lock().dec();
        assert_eq!(r.count(), DEAD);
    }

    /// T threads each take and drop references N times through every get
    /// and put flavour; the count must come back to where it started.
    #[test]
    fn stress_get_put_balances() {
        let iters = stress_iters(50_000);
        let r = Arc::new(LockRef::new(1));
        let threads: Vec<_> = (0..4)
            .map(|t| {
                let r = Arc::clone(&r);
                thread::spawn(move || {
                    for i in 0..iters {
                        match (i + t) % 3 {
                            0 => r.get(),
                            1 => assert!(r.get_not_zero()),
                            _ => assert!(r.get_not_dead()),
                        }
                        put(&r);
                    }
                })
            })
            .collect();
        for t in threads {
            t.join().unwrap();
        }
        assert_eq!(r.count(), 1);
    }

    /// Lock holders bump a plain counter (checks mutual exclusion) and the
    /// count under the lock, while other threads use the lockless paths.
    #[test]
    fn stress_locked_inc_mixed_with_fast_gets() {
        struct Shared {
            lockref: LockRef,
            plain: std::cell::UnsafeCell<u64>,
        }
        // SAFETY: `plain` is only touched while `lockref`'s lock is held.
        unsafe impl Sync for Shared {}

        let iters = stress_iters(50_000);
        let shared = Arc::new(Shared { lockref: LockRef::new(1), plain: 0.into() });
        let lockers: Vec<_> = (0..2)
            .map(|_| {
                let shared = Arc::clone(&shared);
                thread::spawn(move || {
                    for _ in 0..iters {
                        let mut guard = shared.lockref.lock();
                        guard.inc();
                        // SAFETY: the lockref's lock is held.
                        unsafe { *shared.plain.get() += 1 };
                        drop(guard);
                        shared.lockref.lock().dec();
                    }
                })
            })
            .collect();
        let fast: Vec<_> = (0..2)
            .map(|_| {
                let shared = Arc::clone(&shared);
                thread::spawn(move || {
                    for _ in 0..iters {
                        assert!(shared.lockref.get_not_dead());
                        put(&shared.lockref);
                    }
                })
            })
            .collect();
        for t in lockers.into_iter().chain(fast) {
            t.join().unwrap();
        }
        assert_eq!(shared.lockref.count(), 1);
        let _guard = shared.lockref.lock();
        // SAFETY: the lock is held and all other threads have exited.
        assert_eq!(unsafe { *shared.plain.get() }, 2 * iters);
    }
}

#[cfg(all(test, loom))]
mod loom_models {
    //! Every role runs in a spawned thread and the main thread only joins:
    //! loom 0.7 stops exploring when a spawned thread starts with a load
    //! while the main thread races it (tokio-rs/loom#392).

    use super::*;
    use loom::sync::Arc;
    use loom::thread;

    fn put(r: &LockRef) {
        if r.put_return().is_none() {
            if let Some(mut guard) = r.put_or_lock() {
                guard.dec();
            }
        }
    }

    /// A lockless get/put and a locked inc/put from two threads balance.
    #[test]
    fn get_put_balance() {
        loom::model(|| {
            let r = Arc::new(LockRef::new(1));
            let fast = {
                let r = Arc::clone(&r);
                thread::spawn(move || {
                    r.get();
                    put(&r);
                })
            };
            let locked = {
                let r = Arc::clone(&r);
                thread::spawn(move || {
                    r.lock().inc();
                    put(&r);
                })
            };
            fast.join().unwrap();
            locked.join().unwrap();
            assert_eq!(r.count(), 1);
        });
    }

    /// get_not_dead racing mark_dead: a get that succeeded was counted
    /// before death (the killer saw 2), and none succeeds after.
    #[test]
    fn get_not_dead_vs_mark_dead() {
        loom::model(|| {
            let r = Arc::new(LockRef::new(1));
            let getter = {
                let r = Arc::clone(&r);
                thread::spawn(move || r.get_not_dead())
            };
            let killer = {
                let r = Arc::clone(&r);
                thread::spawn(move || {
                    let mut guard = r.lock();
                    let count = guard.count();
                    guard.mark_dead();
                    count
                })
            };
            let got = getter.join().unwrap();
            let seen_by_killer = killer.join().unwrap();
            assert_eq!(got, seen_by_killer == 2, "a successful get must precede death");
            assert_eq!(r.count(), DEAD);
            assert!(!r.get_not_dead());
            assert!(!r.get_not_zero());
        });
    }

    /// Drops a reference; the last one kills the object under the lock.
    fn release(r: &LockRef) -> bool {
        match r.put_or_lock() {
            None => false,
            Some(mut guard) => {
                assert_eq!(guard.count(), 1, "last reference");
                guard.mark_dead();
                true
            }
        }
    }

    /// The last put (put_or_lock) races a get_not_zero: a holder never sees
    /// the object dead, and exactly one thread ends up killing it.
    #[test]
    fn put_or_lock_last_ref_vs_get_not_zero() {
        loom::model(|| {
            let r = Arc::new(LockRef::new(1));
            let owner = {
                let r = Arc::clone(&r);
                thread::spawn(move || release(&r))
            };
            let getter = {
                let r = Arc::clone(&r);
                thread::spawn(move || {
                    if !r.get_not_zero() {
                        return false;
                    }
                    assert!(!r.is_dead(), "a reference holder saw the object die");
                    release(&r)
                })
            };
            let killed_by_owner = owner.join().unwrap();
            let killed_by_getter = getter.join().unwrap();
            assert!(killed_by_owner ^ killed_by_getter, "exactly one thread kills");
            assert_eq!(r.count(), DEAD);
        });
    }
}
