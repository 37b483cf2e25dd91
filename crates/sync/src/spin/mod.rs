//! Raw spinlocks behind one trait, and a typed [`SpinLock`] over any of them.
//!
//! Invariant: a [`RawSpinLock`] is held by at most one context at a time;
//! `unlock` is called exactly once per successful `lock`/`try_lock`, by the
//! holder. The flavour (test-and-test-and-set, ticket, queued/MCS) is a type
//! parameter chosen once, the way `lock_api` separates the algorithm from the
//! data it protects, so benchmarks can compare flavours (seed 004's lglock).
//!
//! Spinlocks suit short critical sections between threads that are running.
//! Unlike the kernel, userspace cannot stop the holder from being
//! preempted, so a waiter that has spun [`SPINS_BEFORE_YIELD`] times yields
//! its CPU (the holder may be waiting for one) before spinning again.
//! Where holders may sleep or hold for long, use [`crate::rwsem::RwSem`].
//!
//! Under loom a waiting round parks the waiter until the word it polls is
//! next stored to (`shim::spin_wait`), so every store that lets a
//! waiter go is followed by `shim::wake_spinners` (a no-op in the
//! shipped build): each model then explores interleavings, not spin rounds.
//!
//! ```
//! use vfscale_sync::spin::{SpinLock, TicketLock};
//!
//! let counter: SpinLock<TicketLock, u64> = SpinLock::new(0);
//! *counter.lock() += 1;
//! assert_eq!(*counter.lock(), 1);
//! ```

mod mcs;
mod tas;
mod ticket;

pub use mcs::McsLock;
pub use tas::TasLock;
pub use ticket::TicketLock;

use crate::shim::{spin_wait, yield_now, SpinWord, UnsafeCell};
use std::fmt;
use std::marker::PhantomData;
use std::ops::{Deref, DerefMut};

/// Busy-wait rounds before a waiter yields its CPU once.
pub const SPINS_BEFORE_YIELD: u32 = 128;

/// One round of waiting while `word` holds `seen` (just loaded): a CPU
/// pause, and every [`SPINS_BEFORE_YIELD`] rounds a `sched_yield`. Under
/// loom the pause parks until the word's next store
/// ([`spin_wait`](crate::shim::spin_wait)), so releases must call
/// [`wake_spinners`](crate::shim::wake_spinners) on it.
#[inline]
pub(crate) fn relax<W: SpinWord>(word: &W, seen: W::Value, spins: &mut u32) {
    *spins += 1;
    if *spins % SPINS_BEFORE_YIELD == 0 {
        yield_now();
    } else {
        spin_wait(word, seen);
    }
}

/// A raw spinlock: mutual exclusion on a word, with no data attached.
///
/// # Safety
///
/// Implementors must guarantee that between a successful `lock`/`try_lock`
/// and the matching `unlock`, no other `lock`/`try_lock` succeeds, and that
/// `unlock` has release semantics paired with acquire in `lock`.
pub unsafe trait RawSpinLock: Default + Send + Sync {
    /// Short name used in benchmark variants and `Debug` output.
    const NAME: &'static str;

    /// Spins until the lock is acquired.
    fn lock(&self);

    /// Acquires the lock if it is free right now.
    fn try_lock(&self) -> bool;

    /// Releases the lock.
    ///
    /// # Safety
    ///
    /// The caller holds the lock (acquired by `lock` or a successful
    /// `try_lock`) and releases it once. Debug builds panic on releasing a
    /// lock that is not held, where the flavour can detect it.
    unsafe fn unlock(&self);

    /// Whether some context holds the lock (a racy snapshot).
    fn is_locked(&self) -> bool;
}

/// Data protected by a raw spinlock of flavour `R`.
pub struct SpinLock<R: RawSpinLock, T: ?Sized> {
    raw: R,
    data: UnsafeCell<T>,
}

// SAFETY: the lock hands out `&mut T` to one thread at a time, so sharing the
// lock only needs `T: Send` (as for `std::sync::Mutex`).
unsafe impl<R: RawSpinLock, T: ?Sized + Send> Sync for SpinLock<R, T> {}
// SAFETY: moving the lock moves the data; `R` is `Send` by the trait bound.
unsafe impl<R: RawSpinLock, T: ?Sized + Send> Send for SpinLock<R, T> {}
// SAFETY: all-zero bits are an unlocked `R` (by its own `Zeroable`, which a
// flavour implements only where zero means unlocked) beside a valid `T` (by
// its), so a zeroed lock is a new lock holding a zeroed `T`.
#[cfg(not(loom))]
unsafe impl<R: RawSpinLock + bytemuck::Zeroable, T: bytemuck::Zeroable> bytemuck::Zeroable for SpinLock<R, T> {}

impl<R: RawSpinLock, T> SpinLock<R, T> {
    /// A new unlocked lock holding `value`.
    pub fn new(value: T) -> Self {
        Self { raw: R::default(), data: UnsafeCell::new(value) }
    }

    /// Consumes the lock and returns the data.
    pub fn into_inner(self) -> T {
        self.data.into_inner()
    }
}

impl<R: RawSpinLock, T: ?Sized> SpinLock<R, T> {
    /// Spins until the lock is held, then returns a guard that releases it.
    pub fn lock(&self) -> SpinLockGuard<'_, R, T> {
        self.raw.lock();
        SpinLockGuard { lock: self, _not_send: PhantomData }
    }

    /// Takes the lock if it is free right now.
    pub fn try_lock(&self) -> Option<SpinLockGuard<'_, R, T>> {
        self.raw.try_lock().then(|| SpinLockGuard { lock: self, _not_send: PhantomData })
    }

    /// Whether the lock is held (a racy snapshot).
    pub fn is_locked(&self) -> bool {
        self.raw.is_locked()
    }

    /// The raw lock, for callers that pair it with data of their own.
    pub fn raw(&self) -> &R {
        &self.raw
    }
}

impl<R: RawSpinLock, T: Default> Default for SpinLock<R, T> {
    fn default() -> Self {
        Self::new(T::default())
    }
}

impl<R: RawSpinLock, T: ?Sized + fmt::Debug> fmt::Debug for SpinLock<R, T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut d = f.debug_struct("SpinLock");
        d.field("flavour", &R::NAME);
        match self.try_lock() {
            Some(guard) => d.field("data", &&*guard),
            None => d.field("data", &format_args!("<locked>")),
        };
        d.finish()
    }
}

/// Holds a [`SpinLock`]; releases it when dropped.
pub struct SpinLockGuard<'a, R: RawSpinLock, T: ?Sized> {
    lock: &'a SpinLock<R, T>,
    /// Queued flavours release per-thread state: the guard stays on its thread.
    _not_send: PhantomData<*const ()>,
}

// SAFETY: a shared guard only gives `&T`, which is fine to share if `T: Sync`.
unsafe impl<R: RawSpinLock, T: ?Sized + Sync> Sync for SpinLockGuard<'_, R, T> {}

impl<R: RawSpinLock, T: ?Sized> Deref for SpinLockGuard<'_, R, T> {
    type Target = T;
    fn deref(&self) -> &T {
        // SAFETY: the guard proves the lock is held, so no `&mut T` exists
        // elsewhere.
        self.lock.data.with(|p| unsafe { &*p })
    }
}

impl<R: RawSpinLock, T: ?Sized> DerefMut for SpinLockGuard<'_, R, T> {
    fn deref_mut(&mut self) -> &mut T {
        // SAFETY: the guard is the only holder of the lock and is borrowed
        // mutably, so this is the only reference to the data.
        self.lock.data.with_mut(|p| unsafe { &mut *p })
    }
}

impl<R: RawSpinLock, T: ?Sized> Drop for SpinLockGuard<'_, R, T> {
    fn drop(&mut self) {
        // SAFETY: the guard was created by a successful lock and drops once.
        unsafe { self.lock.raw.unlock() }
    }
}

impl<R: RawSpinLock, T: ?Sized + fmt::Debug> fmt::Debug for SpinLockGuard<'_, R, T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&**self, f)
    }
}
