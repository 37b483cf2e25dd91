//! Thin wrappers over the Linux `futex(2)` wait/wake calls on an `AtomicU32`,
//! and, under loom, a faithful model of them built on `shim`'s parking queue.
//!
//! Imports from this crate: only `shim` (atomics, and the loom parking queue).
//!
//! `wait` may return spuriously, so every caller re-checks its condition in a
//! loop. Invariant (the futex contract the callers rely on): a waiter that
//! found the word equal to `expected` is woken by any `wake` on that word
//! issued after the store that changed it; so a thread that stores to the
//! word and then calls `wake` never leaves a waiter asleep on the old value.
//!
//! # Under loom
//!
//! `wait` and `wake` keep that contract and nothing more, so a lost wake-up
//! becomes a deadlock that loom reports ("all threads blocked"):
//!
//! - `wait(word, expected, None)` checks the word and queues the thread in
//!   one atomic step, then parks it until a `wake` on the same address. The
//!   check is a relaxed read-modify-write that stores nothing
//!   (`shim::SpinWord::still`): loom lets an RMW read only the newest
//!   value, which is what the kernel's check under its hash-bucket lock
//!   amounts to, and it adds no synchronization the real call would not
//!   have. The queueing is plain Rust between two loom operations, so no
//!   other thread runs in between: a `wake` either comes before the check
//!   (and the check sees the store before it) or finds the waiter queued.
//! - `wait` with a timeout may return whether woken or not: it queues as
//!   above, yields once (loom may run anyone first), and leaves the queue if
//!   nobody woke it. It can never deadlock, like the real timed wait.
//! - `wake` unparks up to `count` waiters on that address, oldest first, and
//!   passes the waker's history to them (loom's `unpark` does), as the real
//!   wake-up does through the bucket lock. It first does the same
//!   read-only RMW on the word, so loom orders the wake-up against every
//!   waiter's check both ways, as the bucket lock orders `FUTEX_WAKE`
//!   against `FUTEX_WAIT`.
//!
//! The queue is `shim`'s parking queue, which the spinners' model shares
//! (`shim` module doc).
//!
//! # For a new primitive
//!
//! Nothing in a primitive needs `cfg(loom)`: it waits through these calls,
//! and the same code is checked.
//!
//! ```text
//! // Sleeping: an AtomicU32 from crate::shim; store first, then wake.
//! while state.load(Acquire) == WAITING { futex::wait(&state, WAITING, None) }
//! state.store(DONE, Release); futex::wake(&state, 1);
//!
//! // Spinning on any shim atomic (bool, i32, isize, u32, u64, usize, ptr):
//! loop {
//!     let seen = word.load(Relaxed);
//!     if ready(seen) { break }
//!     shim::spin_wait(&word, seen);        // a pause; under loom, parks
//! }
//! word.store(next, Release);                // or any RMW that may end a wait
//! shim::wake_spinners(&word);               // nothing; under loom, unparks
//! ```
//!
//! Call `shim::wake_spinners` right after every store that may end a spin
//! (by address, since the word may be freed once the store lands); a
//! missing one shows up as a loom deadlock, not as a missed bug. A `yield_now`
//! wait loop is neither: it leaves loom unbounded schedules.

use crate::shim::AtomicU32;
use std::time::Duration;

/// Blocks while `*word == expected`, for at most `timeout` if given.
///
/// Returns when woken, when the value differs, on a signal or on timeout;
/// the caller cannot tell which and must re-check.
#[cfg(not(loom))]
pub fn wait(word: &AtomicU32, expected: u32, timeout: Option<Duration>) {
    let ts = timeout.map(|t| libc::timespec {
        tv_sec: t.as_secs().min(i64::MAX as u64) as libc::time_t,
        tv_nsec: t.subsec_nanos() as libc::c_long,
    });
    let ts_ptr = ts.as_ref().map_or(std::ptr::null(), |t| t as *const libc::timespec);
    // SAFETY: `word` is a live, aligned u32 for the duration of the call and
    // `ts_ptr` is null or points to a timespec on this stack frame.
    unsafe {
        libc::syscall(libc::SYS_futex, word.as_ptr(), libc::FUTEX_WAIT | libc::FUTEX_PRIVATE_FLAG, expected, ts_ptr);
    }
}

/// Wakes at most `count` threads blocked in [`wait`] on `word`.
#[cfg(not(loom))]
pub fn wake(word: &AtomicU32, count: u32) {
    let count = count.min(i32::MAX as u32) as libc::c_int;
    // SAFETY: FUTEX_WAKE only uses the address as a key; it is valid.
    unsafe {
        libc::syscall(libc::SYS_futex, word.as_ptr(), libc::FUTEX_WAKE | libc::FUTEX_PRIVATE_FLAG, count);
    }
}

/// Loom model (module doc): parks while `*word == expected` until a
/// [`wake`] on `word`; with a timeout, may also return unwoken.
#[cfg(loom)]
pub fn wait(word: &AtomicU32, expected: u32, timeout: Option<Duration>) {
    use crate::shim::{parking, SpinWord};
    let key = word as *const AtomicU32 as usize;
    parking::park_if(key, timeout.is_some(), || word.still(expected));
}

/// Loom model (module doc): unparks at most `count` threads parked in
/// [`wait`] on `word`.
#[cfg(loom)]
pub fn wake(word: &AtomicU32, count: u32) {
    use crate::shim::{parking, SpinWord};
    // A read-modify-write that stores nothing makes the wake-up an event
    // loom orders against the waiters' checks, whatever the caller did in
    // between (the value it reads does not matter).
    word.still(0);
    parking::unpark(word as *const AtomicU32 as usize, count);
}

#[cfg(all(test, loom))]
mod loom_models {
    use super::*;
    use crate::shim::Ordering;
    use loom::sync::Arc;
    use loom::thread;

    /// A waiter in a re-check loop and a store-then-wake: the waiter always
    /// gets out (with the wake left out, or put before the store, loom
    /// reports a deadlock).
    #[test]
    fn futex_store_then_wake_ends_the_wait() {
        loom::model(|| {
            let word = Arc::new(AtomicU32::new(0));
            let waker = {
                let word = word.clone();
                thread::spawn(move || {
                    word.store(1, Ordering::Release);
                    wake(&word, 1);
                })
            };
            while word.load(Ordering::Acquire) == 0 {
                wait(&word, 0, None);
            }
            waker.join().unwrap();
        });
    }

    /// A timed wait nobody wakes returns anyway, and leaves the queue: a
    /// later wake finds nobody to unpark.
    #[test]
    fn futex_timed_wait_may_return_unwoken() {
        loom::model(|| {
            let word = AtomicU32::new(0);
            wait(&word, 0, Some(Duration::from_millis(1)));
            wake(&word, 1);
        });
    }
}
