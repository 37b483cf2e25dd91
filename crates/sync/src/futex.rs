//! Thin wrappers over the Linux `futex(2)` wait/wake calls on an `AtomicU32`.
//!
//! `wait` may return spuriously, so every caller re-checks its condition in a
//! loop. Under loom, `wait` is a yield and `wake` does nothing: the callers'
//! loops are what the model checks.

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

/// Loom stand-in: a yield, so the waiter's re-check loop is explored.
#[cfg(loom)]
pub fn wait(_word: &AtomicU32, _expected: u32, _timeout: Option<Duration>) {
    crate::shim::yield_now();
}

/// Loom stand-in: waiters never really sleep under loom.
#[cfg(loom)]
pub fn wake(_word: &AtomicU32, _count: u32) {}
