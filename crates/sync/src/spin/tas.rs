//! Test-and-test-and-set spinlock: one flag; `lock` tries one swap, then
//! waiters spin on a plain load and only try the swap again when the flag
//! looks free. Unfair; cheapest uncontended.

use super::{relax, RawSpinLock};
use crate::shim::{wake_spinners, AtomicBool, Ordering};

/// A test-and-test-and-set spinlock.
#[derive(Debug, Default)]
pub struct TasLock {
    locked: AtomicBool,
}

// SAFETY: all-zero bits are `locked == false`, an unlocked lock (loom's
// model atomics are not plain words, so only outside loom).
#[cfg(not(loom))]
unsafe impl bytemuck::Zeroable for TasLock {}

// SAFETY: `locked` goes false -> true only through a successful swap, so one
// holder at a time; acquire on success pairs with the release in `unlock`.
unsafe impl RawSpinLock for TasLock {
    const NAME: &'static str = "tas";

    fn lock(&self) {
        // First a bare swap: when the line sits in another CPU's cache (a
        // global locker just used it), a load then a swap would fetch it
        // twice, shared then exclusive.
        if !self.locked.swap(true, Ordering::Acquire) {
            crate::audit::lock_acquired();
            return;
        }
        let mut spins = 0;
        while !self.try_lock() {
            while self.locked.load(Ordering::Relaxed) {
                relax(&self.locked, true, &mut spins);
            }
        }
    }

    fn try_lock(&self) -> bool {
        let acquired = !self.locked.load(Ordering::Relaxed) && !self.locked.swap(true, Ordering::Acquire);
        if acquired {
            crate::audit::lock_acquired();
        }
        acquired
    }

    unsafe fn unlock(&self) {
        let was_locked = self.locked.swap(false, Ordering::Release);
        wake_spinners(&self.locked);
        debug_assert!(was_locked, "TasLock: unlock of an unlocked lock");
    }

    fn is_locked(&self) -> bool {
        self.locked.load(Ordering::Relaxed)
    }
}
