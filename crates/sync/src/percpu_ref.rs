//! A reference count whose gets and puts touch only the calling CPU's
//! counter while the object is live (Linux `lib/percpu-refcount.c`, and the
//! `mnt_count` pattern: the owner's long-term reference keeps the count off
//! zero; `docs/design.md`, "Conflict-free hot paths").
//!
//! Invariant: the true count is `atomic - BIAS + sum(slots)` while the
//! ref is in per-CPU mode and `atomic` alone once it is in atomic mode; the
//! switch folds each CPU's slot into `atomic` with one swap that leaves
//! [`FOLDED`] behind, so every get or put lands either before the swap (and
//! is folded) or after it (sees `FOLDED` and goes to `atomic`). `BIAS` keeps
//! `atomic` far from zero in per-CPU mode, so only an atomic-mode put can
//! reach zero, and it runs the release exactly once.
//!
//! Why: an object every thread opens (one sysfs file, one hot inode) keeps
//! a count that every open and close changes. A shared atomic moves its
//! cache line between CPUs on each change (~70-100 ns); a per-CPU slot stays
//! in the local cache. The object's owner keeps the initial reference (a
//! hashed dentry keeps its inode, a live kernfs node its active count) and
//! [`kill`](PercpuRef::kill)s it when the object starts to die; until then
//! the count cannot reach zero and nobody needs the sum.
//!
//! Storage: a per-object array of cache-padded counters would cost
//! 64 bytes x CPUs per object, far too much for millions of inodes. Like
//! Linux's `alloc_percpu`, the slots live in a process-wide arena with one
//! row per CPU: object `i`'s slot for CPU `c` is `row[c][i]`, so the slots
//! of one object are on different lines (no false sharing between CPUs)
//! while one CPU's slots of many objects share lines that only that CPU
//! writes. An object pays 8 bytes per CPU, and the arena hands slot indices
//! out through per-thread caches, so creating and freeing objects writes no
//! shared word in the common case. Refcache's per-CPU delta caches (sv6)
//! would use even less memory but free objects epochs late and need a
//! periodic flush; the arena keeps Linux's semantics (the last put releases
//! at once).
//!
//! The grace period of Linux's switch (`call_rcu_hurry`, so every CPU sees
//! the atomic flag before the sum is taken) is replaced by the swap itself:
//! a slot is closed by one atomic read-modify-write, which orders it with
//! every get and put on that slot. [`kill`](PercpuRef::kill) therefore
//! returns with the ref in atomic mode, and
//! [`kill_and_confirm`](PercpuRef::kill_and_confirm) confirms before
//! returning. A caller whose kill must not write other CPUs' lines (an
//! unlink of an open file, beside opens of other files on those CPUs)
//! splits it: [`start_kill`](PercpuRef::start_kill) marks the ref dying,
//! and [`finish_kill`](PercpuRef::finish_kill), which the caller defers
//! past a grace period as Linux defers its fold to an RCU callback, folds
//! and drops the initial reference.
//!
//! Cost: a get or put in per-CPU mode is one uncontended atomic add on a
//! line only this CPU writes (a thread that migrates may write another
//! CPU's slot; the sum stays right, and the line moves once). In atomic
//! mode it is a shared atomic, plus two adds on the local slot. A switch
//! visits every CPU's slot. Do not use it for objects whose count is read
//! often (the count is not readable in per-CPU mode), or for short-lived
//! objects that are created and freed more often than shared: a plain
//! atomic or `Arc` is cheaper then.
//!
//! Under loom the slots are owned by the ref (the arena's `static` would
//! outlive a model) and models pick CPUs explicitly; the protocol is the
//! same code.
//!
//! ```
//! use std::sync::atomic::{AtomicBool, Ordering};
//! use std::sync::Arc;
//! use vfscale_sync::percpu_ref::PercpuRef;
//!
//! let released = Arc::new(AtomicBool::new(false));
//! let flag = Arc::clone(&released);
//! let count = PercpuRef::new(move || flag.store(true, Ordering::SeqCst));
//! assert!(count.tryget_live()); // an open: one add on this CPU's slot
//! count.kill(); // the owner lets go: atomic mode, initial ref dropped
//! assert!(!count.tryget_live()); // no new users of a dying object
//! assert!(!released.load(Ordering::SeqCst)); // the open one remains
//! count.put(); // the last put runs the release
//! assert!(released.load(Ordering::SeqCst));
//! ```

use crate::percpu_alloc::Slots;
use crate::shim::{spin_wait, wake_spinners, AtomicIsize, AtomicU32, Ordering};
use crate::spin::{SpinLock, TasLock};
use std::fmt;

/// What a slot holds once it is folded into the atomic count. Gets and puts
/// that find it there add and take back their one unit, so a folded slot
/// reads `FOLDED` plus the number of such transient units.
pub const FOLDED: isize = isize::MIN / 2;

/// Added to the atomic count in per-CPU mode so it cannot reach zero while
/// the slots hold the rest of the count (`PERCPU_COUNT_BIAS`).
const BIAS: isize = 1 << (isize::BITS - 3);

/// The ref was killed: `tryget_live` fails.
const DEAD: u32 = 1;
/// The ref is in atomic mode (the slots are folded).
const ATOMIC: u32 = 2;

/// A per-CPU reference count with Linux `percpu_ref` semantics.
pub struct PercpuRef {
    slots: Slots,
    atomic: AtomicIsize,
    /// [`DEAD`] and [`ATOMIC`]; changed under `switching`.
    mode: AtomicU32,
    /// Serializes mode switches (`percpu_ref_switch_lock`).
    switching: SpinLock<TasLock, ()>,
    release: Box<dyn Fn() + Send + Sync>,
}

impl fmt::Debug for PercpuRef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mode = self.mode.load(Ordering::Relaxed);
        f.debug_struct("PercpuRef")
            .field("dead", &(mode & DEAD != 0))
            .field("atomic", &(mode & ATOMIC != 0))
            .finish_non_exhaustive()
    }
}

impl PercpuRef {
    /// A live ref in per-CPU mode holding one (the initial) reference;
    /// `release` runs when the count reaches zero after a kill.
    pub fn new(release: impl Fn() + Send + Sync + 'static) -> PercpuRef {
        PercpuRef {
            slots: Slots::new(),
            atomic: AtomicIsize::new(BIAS + 1),
            mode: AtomicU32::new(0),
            switching: SpinLock::new(()),
            release: Box::new(release),
        }
    }

    /// Takes a reference; the caller already holds one (or the object is
    /// known live), so this cannot fail.
    #[inline]
    pub fn get(&self) {
        self.get_many(1);
    }

    /// Takes `n` references at once (`percpu_ref_get_many`).
    #[inline]
    pub fn get_many(&self, n: isize) {
        self.get_on(crate::cpu::current_cpu(), n);
    }

    /// Takes a reference unless the count has reached zero.
    #[inline]
    pub fn tryget(&self) -> bool {
        self.tryget_many(1)
    }

    /// Takes `n` references unless the count has reached zero.
    #[inline]
    pub fn tryget_many(&self, n: isize) -> bool {
        self.tryget_slot(crate::cpu::current_cpu(), n, false)
    }

    /// Takes a reference unless the ref has been killed. After
    /// [`kill`](Self::kill) has returned, this fails.
    #[inline]
    pub fn tryget_live(&self) -> bool {
        self.tryget_live_many(1)
    }

    /// Takes `n` references unless the ref has been killed.
    #[inline]
    pub fn tryget_live_many(&self, n: isize) -> bool {
        self.tryget_slot(crate::cpu::current_cpu(), n, true)
    }

    /// Drops a reference; the last one (after a kill) runs the release.
    #[inline]
    pub fn put(&self) {
        self.put_many(1);
    }

    /// Drops `n` references (`percpu_ref_put_many`).
    #[inline]
    pub fn put_many(&self, n: isize) {
        self.put_on(crate::cpu::current_cpu(), n);
    }

    // The `_on` forms count on the slot of `cpu`, which the caller looked
    // up ([`current_cpu`](crate::cpu::current_cpu)) once for the several
    // counts of one operation. Any CPU keeps the count right (the true
    // count is the sum); the caller's own keeps the write on a line only
    // its CPU writes, so a caller passes the CPU it looked up just before,
    // never one kept across a block or from another thread.

    /// [`get_many`](Self::get_many) on `cpu`'s slot.
    #[inline]
    pub fn get_on(&self, cpu: usize, n: isize) {
        let slot = self.slots.get(cpu);
        if slot.fetch_add(n, Ordering::SeqCst) > FOLDED / 2 {
            return;
        }
        slot.fetch_sub(n, Ordering::Relaxed);
        wake_spinners(slot);
        self.atomic.fetch_add(n, Ordering::SeqCst);
    }

    /// [`tryget_many`](Self::tryget_many) on `cpu`'s slot.
    #[inline]
    pub fn tryget_many_on(&self, cpu: usize, n: isize) -> bool {
        self.tryget_slot(cpu, n, false)
    }

    /// [`tryget_live_many`](Self::tryget_live_many) on `cpu`'s slot.
    #[inline]
    pub fn tryget_live_many_on(&self, cpu: usize, n: isize) -> bool {
        self.tryget_slot(cpu, n, true)
    }

    /// [`put_many`](Self::put_many) on `cpu`'s slot.
    #[inline]
    pub fn put_on(&self, cpu: usize, n: isize) {
        let slot = self.slots.get(cpu);
        if slot.fetch_sub(n, Ordering::SeqCst) > FOLDED / 2 {
            return;
        }
        slot.fetch_add(n, Ordering::Relaxed);
        wake_spinners(slot);
        self.put_atomic(n);
    }

    /// Whether [`kill`](Self::kill) has been called (and no reinit since).
    pub fn is_dying(&self) -> bool {
        self.mode.load(Ordering::Acquire) & DEAD != 0
    }

    /// The count, if the ref is in atomic mode (in per-CPU mode the count
    /// is spread over the slots and has no single value).
    pub fn atomic_count(&self) -> Option<usize> {
        (self.mode.load(Ordering::Acquire) & ATOMIC != 0)
            .then(|| usize::try_from(self.atomic.load(Ordering::SeqCst)).unwrap_or(0))
    }

    /// Refuses new `tryget_live`s, switches to atomic mode and drops the
    /// initial reference (`percpu_ref_kill`). Killing twice is a no-op the
    /// second time.
    pub fn kill(&self) {
        self.kill_and_confirm(|| {});
    }

    /// [`kill`](Self::kill), calling `confirm` once every later
    /// `tryget_live` is sure to fail, before the initial reference goes.
    pub fn kill_and_confirm(&self, confirm: impl FnOnce()) {
        let locked = self.switching.lock();
        if !self.mark_dead() {
            return;
        }
        self.fold();
        drop(locked);
        confirm();
        self.put_atomic(1);
    }

    /// The first half of a kill whose fold is left for later, as Linux's
    /// `percpu_ref_kill` leaves it to an RCU callback: marks the ref dying
    /// and writes nothing but its own mode word, none of the other CPUs'
    /// slots (which share lines with other objects' slots). Returns whether
    /// this call marked it; that caller must then call
    /// [`finish_kill`](Self::finish_kill) exactly once. Until then gets and
    /// puts stay per CPU, and a `tryget_live` that finds its slot unfolded
    /// still succeeds: its reference is counted like any other, and the
    /// release waits for its put. A [`kill`](Self::kill) meanwhile does
    /// nothing.
    #[must_use]
    pub fn start_kill(&self) -> bool {
        let _locked = self.switching.lock();
        self.mark_dead()
    }

    /// The second half of a kill [`start_kill`](Self::start_kill) began:
    /// folds the slots into the atomic count (unless a switch did already)
    /// and drops the initial reference. From here `tryget_live` fails.
    pub fn finish_kill(&self) {
        let locked = self.switching.lock();
        debug_assert!(self.is_dying(), "percpu_ref: finish_kill without start_kill");
        self.fold();
        drop(locked);
        self.put_atomic(1);
    }

    /// Sets [`DEAD`] unless it is set; returns whether it set it. The
    /// caller holds `switching`.
    fn mark_dead(&self) -> bool {
        let mode = self.mode.load(Ordering::Relaxed);
        if mode & DEAD != 0 {
            return false;
        }
        self.mode.store(mode | DEAD, Ordering::Release);
        true
    }

    /// Makes every later get and put use the single atomic count, so the
    /// count can be read ([`atomic_count`](Self::atomic_count)).
    pub fn switch_to_atomic(&self) {
        let _locked = self.switching.lock();
        self.fold();
    }

    /// Back to per-CPU mode, unless the ref was killed (then it stays in
    /// atomic mode until [`reinit`](Self::reinit)).
    pub fn switch_to_percpu(&self) {
        let _locked = self.switching.lock();
        let mode = self.mode.load(Ordering::Relaxed);
        if mode != ATOMIC {
            return;
        }
        self.atomic.fetch_add(BIAS, Ordering::AcqRel);
        for cpu in 0..self.slots.len() {
            let slot = self.slots.get(cpu);
            // A transient unit is being taken back; wait for it.
            while let Err(seen) = slot.compare_exchange(FOLDED, 0, Ordering::AcqRel, Ordering::Relaxed) {
                spin_wait(slot, seen);
            }
        }
        self.mode.store(0, Ordering::Release);
    }

    /// Revives a ref whose count reached zero after a kill: live, per-CPU,
    /// holding the initial reference again, with the same release. Returns
    /// false (and changes nothing) if the ref is not released yet.
    #[must_use]
    pub fn reinit(&self) -> bool {
        let _locked = self.switching.lock();
        if self.mode.load(Ordering::Relaxed) != DEAD | ATOMIC
            || self.atomic.compare_exchange(0, BIAS + 1, Ordering::AcqRel, Ordering::Relaxed).is_err()
        {
            return false;
        }
        for cpu in 0..self.slots.len() {
            let slot = self.slots.get(cpu);
            while let Err(seen) = slot.compare_exchange(FOLDED, 0, Ordering::AcqRel, Ordering::Relaxed) {
                spin_wait(slot, seen);
            }
        }
        self.mode.store(0, Ordering::Release);
        true
    }

    /// Folds every slot into the atomic count and drops the bias, unless
    /// the ref is in atomic mode already. The caller holds `switching`.
    fn fold(&self) {
        let mode = self.mode.load(Ordering::Relaxed);
        if mode & ATOMIC != 0 {
            return;
        }
        self.mode.store(mode | ATOMIC, Ordering::Release);
        let mut sum = 0isize;
        for cpu in 0..self.slots.len() {
            sum = sum.wrapping_add(self.slots.get(cpu).swap(FOLDED, Ordering::SeqCst));
        }
        self.atomic.fetch_add(sum, Ordering::SeqCst);
        // The initial reference is still counted (only kill drops it, after
        // this), so removing the bias cannot reach zero.
        self.atomic.fetch_sub(BIAS, Ordering::AcqRel);
    }

    // Slot and count updates are SeqCst: on x86 a locked add is a full
    // barrier anyway, and a caller may pair the update with a later SeqCst
    // load Dekker-style (an open counted, then a lease flag checked).

    fn tryget_slot(&self, cpu: usize, n: isize, live: bool) -> bool {
        let slot = self.slots.get(cpu);
        if slot.fetch_add(n, Ordering::SeqCst) > FOLDED / 2 {
            return true;
        }
        slot.fetch_sub(n, Ordering::Relaxed);
        wake_spinners(slot);
        if live && self.is_dying() {
            return false;
        }
        let mut count = self.atomic.load(Ordering::Relaxed);
        while count > 0 {
            match self.atomic.compare_exchange_weak(count, count + n, Ordering::SeqCst, Ordering::Relaxed) {
                Ok(_) => return true,
                Err(now) => count = now,
            }
        }
        false
    }

    fn put_atomic(&self, n: isize) {
        if self.atomic.fetch_sub(n, Ordering::SeqCst) == n {
            (self.release)();
        }
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicUsize;
    use std::sync::Arc;

    fn counted() -> (PercpuRef, Arc<AtomicUsize>) {
        let releases = Arc::new(AtomicUsize::new(0));
        let r = Arc::clone(&releases);
        (
            PercpuRef::new(move || {
                r.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            }),
            releases,
        )
    }

    fn releases(count: &AtomicUsize) -> usize {
        count.load(std::sync::atomic::Ordering::SeqCst)
    }

    #[test]
    fn gets_and_puts_on_different_cpus_balance_at_kill() {
        let (r, released) = counted();
        r.get_on(0, 1);
        r.get_on(1, 1);
        r.put_on(1, 1);
        assert_eq!(r.atomic_count(), None, "per-CPU mode has no single count");
        r.switch_to_atomic();
        assert_eq!(r.atomic_count(), Some(2));
        r.put_on(0, 1);
        assert_eq!(r.atomic_count(), Some(1));
        r.kill();
        assert_eq!(releases(&released), 1);
        assert!(!r.tryget());
    }

    #[test]
    fn tryget_live_fails_after_kill_but_tryget_and_get_do_not() {
        let (r, released) = counted();
        assert!(r.tryget_live());
        r.kill();
        assert!(r.is_dying());
        assert!(!r.tryget_live());
        assert!(r.tryget(), "a killed ref with users still counts");
        r.get();
        r.put();
        r.put();
        assert_eq!(releases(&released), 0);
        r.put();
        assert_eq!(releases(&released), 1);
    }

    #[test]
    fn kill_and_confirm_confirms_before_the_initial_reference_goes() {
        let (r, released) = counted();
        let mut confirmed = false;
        r.kill_and_confirm(|| {
            confirmed = true;
            assert_eq!(releases(&released), 0);
        });
        assert!(confirmed);
        assert_eq!(releases(&released), 1);
        r.kill();
        assert_eq!(releases(&released), 1, "a second kill does nothing");
    }

    #[test]
    fn switches_keep_the_count_and_reinit_revives() {
        let (r, released) = counted();
        r.get();
        r.switch_to_atomic();
        assert_eq!(r.atomic_count(), Some(2));
        r.switch_to_percpu();
        assert_eq!(r.atomic_count(), None);
        r.put_on(1, 1);
        r.switch_to_atomic();
        assert_eq!(r.atomic_count(), Some(1));
        assert!(!r.reinit(), "not released yet");
        r.kill();
        r.switch_to_percpu();
        assert_eq!(r.atomic_count(), Some(0), "a killed ref stays atomic");
        assert_eq!(releases(&released), 1);
        assert!(r.reinit());
        assert!(!r.is_dying());
        assert!(r.tryget_live());
        r.put();
        r.kill();
        assert_eq!(releases(&released), 2);
    }

    #[cfg(feature = "audit")]
    #[test]
    fn per_cpu_gets_are_conflict_free_and_atomic_mode_is_not() {
        let (r, _) = counted();
        let get_put = |_: usize| {
            if !r.tryget_live() {
                return Err("dead".to_string());
            }
            r.put();
            Ok(())
        };
        let verdict = crate::conflict::check_pair(&get_put, &get_put).unwrap();
        assert!(verdict.conflict_free(), "{:?}", verdict.conflicts);
        r.switch_to_atomic();
        let verdict = crate::conflict::check_pair(&get_put, &get_put).unwrap();
        assert!(!verdict.conflict_free(), "atomic mode shares the count");
        assert!(verdict.conflicts.iter().any(|c| c.sites.iter().any(|s| s.contains("percpu_ref.rs"))));
        r.kill();
    }

    /// A kill in two halves: between them references are taken and put
    /// per CPU (a `tryget_live` too), a second kill does nothing, and the
    /// release waits for the finish and then for the last put.
    #[test]
    fn a_kill_finished_later_counts_what_came_between() {
        let (r, released) = counted();
        r.get_on(1, 1);
        assert!(r.start_kill());
        assert!(!r.start_kill(), "marked once");
        assert!(r.is_dying());
        assert!(r.tryget_live_many_on(0, 1), "an unfolded slot still counts");
        r.put_on(1, 1);
        r.kill();
        assert_eq!(r.atomic_count(), None, "still per CPU until the finish");
        r.finish_kill();
        assert!(!r.tryget_live());
        assert_eq!(r.atomic_count(), Some(1));
        assert_eq!(releases(&released), 0);
        r.put_on(1, 1);
        assert_eq!(releases(&released), 1);
    }

    #[cfg(feature = "audit")]
    #[test]
    fn starting_a_kill_writes_no_slot() {
        let (r, _) = counted();
        let (other, _) = counted();
        r.get_on(0, 1);
        other.get_on(1, 1);
        let (marked, trace) = crate::audit::record(|| r.start_kill());
        assert!(marked);
        let (_, beside) = crate::audit::record(|| {
            other.get_on(1, 1);
            other.put_on(1, 1);
        });
        assert!(trace.conflicts(&beside).is_empty(), "{:?}", trace.conflicts(&beside));
        r.finish_kill();
        r.put_on(0, 1);
        other.put_on(1, 1);
        other.kill();
    }

    #[test]
    fn weighted_references_fold_to_their_sum() {
        let (r, released) = counted();
        r.get_many(1 << 20);
        assert!(r.tryget_live_many(3));
        r.put_many(1);
        r.switch_to_atomic();
        assert_eq!(r.atomic_count(), Some(1 + (1 << 20) + 2));
        r.kill();
        r.put_many(2);
        assert!(r.tryget_many(5), "still referenced");
        r.put_many(5 + (1 << 20));
        assert_eq!(releases(&released), 1);
    }

    #[test]
    fn slots_are_reused_and_start_at_zero() {
        for _ in 0..3 * 1024 {
            let (r, released) = counted();
            r.get_on(0, 1);
            r.put_on(1, 1);
            r.kill();
            assert_eq!(releases(&released), 1);
        }
    }

    #[test]
    fn stress_many_threads_one_object() {
        let budget = crate::test_support::Budget::new(20_000);
        let (r, released) = counted();
        let r = Arc::new(r);
        std::thread::scope(|s| {
            for t in 0..4 {
                let r = &r;
                s.spawn(move || {
                    let mut i = 0;
                    while budget.allows(i) {
                        if r.tryget_live() {
                            r.get();
                            r.put();
                            r.put();
                        } else {
                            assert!(r.is_dying());
                        }
                        if t == 0 && i == 500 {
                            r.kill();
                        }
                        i += 1;
                    }
                });
            }
        });
        r.kill();
        assert_eq!(releases(&released), 1);
        assert_eq!(r.atomic_count(), Some(0));
    }
}

#[cfg(all(test, loom))]
mod loom_models {
    use super::*;
    use loom::sync::atomic::AtomicUsize;
    use loom::sync::Arc;
    use loom::thread;

    fn counted() -> (Arc<PercpuRef>, Arc<AtomicUsize>) {
        let releases = Arc::new(AtomicUsize::new(0));
        let r = Arc::clone(&releases);
        (
            Arc::new(PercpuRef::new(move || {
                r.fetch_add(1, Ordering::SeqCst);
            })),
            releases,
        )
    }

    /// A user holding a reference gets another on one CPU and puts both on
    /// the other, racing the kill; the count balances and the release runs
    /// exactly once, after the user's last put.
    #[test]
    fn get_put_racing_kill() {
        loom::model(|| {
            let (r, released) = counted();
            r.get_on(0, 1);
            let user = {
                let (r, released) = (Arc::clone(&r), Arc::clone(&released));
                thread::spawn(move || {
                    r.get_on(1, 1);
                    r.put_on(0, 1);
                    assert_eq!(released.load(Ordering::SeqCst), 0, "released under a reference");
                    r.put_on(0, 1);
                })
            };
            let killer = {
                let r = Arc::clone(&r);
                thread::spawn(move || r.kill())
            };
            user.join().unwrap();
            killer.join().unwrap();
            assert_eq!(released.load(Ordering::SeqCst), 1);
            assert_eq!(r.atomic_count(), Some(0));
        });
    }

    /// A user takes a live reference on CPU 1 and puts it, racing `kill`
    /// on another thread: the release runs exactly once, never under the
    /// user's reference.
    fn live_user_racing(r: Arc<PercpuRef>, released: Arc<AtomicUsize>, kill: impl FnOnce(&PercpuRef) + Send + 'static) {
        let user = {
            let (r, released) = (Arc::clone(&r), Arc::clone(&released));
            thread::spawn(move || {
                if r.tryget_live_many_on(1, 1) {
                    assert_eq!(released.load(Ordering::SeqCst), 0, "a live reference was released");
                    r.put_on(1, 1);
                }
            })
        };
        let killer = {
            let r = Arc::clone(&r);
            thread::spawn(move || kill(&r))
        };
        user.join().unwrap();
        killer.join().unwrap();
        assert_eq!(released.load(Ordering::SeqCst), 1);
    }

    /// Once kill has returned, tryget_live fails on every CPU; one that
    /// raced it either failed or holds a reference that delays the release.
    #[test]
    fn tryget_live_after_kill() {
        loom::model(|| {
            let (r, released) = counted();
            live_user_racing(r, released, |r| {
                r.kill();
                assert!(!r.tryget_live_many_on(0, 1));
                assert!(!r.tryget_live_many_on(1, 1));
            });
        });
    }

    /// Two users put their last references concurrently after the kill
    /// (one folded, one still in a slot): the release runs exactly once.
    #[test]
    fn release_exactly_once() {
        loom::model(|| {
            let (r, released) = counted();
            r.get_on(0, 1);
            r.get_on(1, 1);
            let users: Vec<_> = (0..2)
                .map(|cpu| {
                    let r = Arc::clone(&r);
                    thread::spawn(move || r.put_on(cpu, 1))
                })
                .collect();
            let killer = {
                let r = Arc::clone(&r);
                thread::spawn(move || r.kill())
            };
            killer.join().unwrap();
            for u in users {
                u.join().unwrap();
            }
            assert_eq!(released.load(Ordering::SeqCst), 1);
        });
    }

    /// A kill started, a user on another CPU takes a live reference and
    /// puts it, racing the finish: the release runs exactly once, after
    /// the user's put, and a `tryget_live` after the finish fails.
    #[test]
    fn tryget_live_between_the_halves_of_a_kill() {
        loom::model(|| {
            let (r, released) = counted();
            assert!(r.start_kill());
            live_user_racing(r, released, |r| {
                r.finish_kill();
                assert!(!r.tryget_live_many_on(0, 1));
            });
        });
    }

    /// A switch back to per-CPU mode races a get/put pair: nothing is lost.
    #[test]
    fn switch_to_percpu_racing_get_put() {
        loom::model(|| {
            let (r, released) = counted();
            r.switch_to_atomic();
            let user = {
                let r = Arc::clone(&r);
                thread::spawn(move || {
                    r.get_on(0, 1);
                    r.put_on(0, 1);
                })
            };
            let switcher = {
                let r = Arc::clone(&r);
                thread::spawn(move || r.switch_to_percpu())
            };
            user.join().unwrap();
            switcher.join().unwrap();
            r.kill();
            assert_eq!(released.load(Ordering::SeqCst), 1);
        });
    }
}
