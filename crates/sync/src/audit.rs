//! Per-thread counts of the writes to shared memory and the lock
//! acquisitions this crate's primitives perform: the check behind sv6's
//! "conflict-free" property (kernel-notes §2). A cached rcu-walk must leave
//! both counts unchanged; a ref-walk of the same path must not.
//!
//! Counting is compiled in only with the `audit` cargo feature (tests turn
//! it on); without it every function here is an empty inline function,
//! [`ENABLED`] is false and [`counts`] stays zero.
//!
//! ```
//! use vfscale_sync::{audit, LockRef};
//!
//! let count = LockRef::new(1);
//! let before = audit::counts();
//! count.get();
//! let after = audit::counts();
//! if audit::ENABLED {
//!     assert_eq!(after.shared_writes, before.shared_writes + 1);
//! } else {
//!     assert_eq!(after, before);
//! }
//! ```

/// Whether this build counts (the `audit` feature).
pub const ENABLED: bool = cfg!(feature = "audit");

/// What the calling thread has done to shared state so far.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Counts {
    /// Atomic read-modify-writes and stores to shared words.
    pub shared_writes: u64,
    /// Locks taken (spinlocks, rwsems, lockref locks), read locks included.
    pub lock_acquisitions: u64,
}

#[cfg(feature = "audit")]
std::thread_local!(static COUNTS: std::cell::Cell<Counts> = const { std::cell::Cell::new(Counts { shared_writes: 0, lock_acquisitions: 0 }) });

/// The calling thread's counts.
pub fn counts() -> Counts {
    #[cfg(feature = "audit")]
    return COUNTS.with(std::cell::Cell::get);
    #[cfg(not(feature = "audit"))]
    Counts::default()
}

/// Runs `f` without counting what it does: for deferred releases (the
/// kernel's RCU callbacks), which run on whichever thread next collects
/// garbage and are not part of the operation that happens to trigger them.
pub fn uncounted<R>(f: impl FnOnce() -> R) -> R {
    #[cfg(feature = "audit")]
    {
        let saved = counts();
        let result = f();
        COUNTS.with(|c| c.set(saved));
        result
    }
    #[cfg(not(feature = "audit"))]
    f()
}

/// Records one write to a shared word by the calling thread.
#[inline(always)]
pub fn shared_write() {
    #[cfg(feature = "audit")]
    COUNTS.with(|c| {
        let mut counts = c.get();
        counts.shared_writes += 1;
        c.set(counts);
    });
}

/// Records one lock acquisition by the calling thread.
#[inline(always)]
pub fn lock_acquired() {
    #[cfg(feature = "audit")]
    COUNTS.with(|c| {
        let mut counts = c.get();
        counts.lock_acquisitions += 1;
        c.set(counts);
    });
}

#[cfg(all(test, not(loom)))]
mod tests {
    #[test]
    fn uncounted_work_leaves_the_counts_alone() {
        let before = super::counts();
        let seven = super::uncounted(|| {
            super::shared_write();
            super::lock_acquired();
            7
        });
        assert_eq!(seven, 7);
        assert_eq!(super::counts(), before);
        super::shared_write();
        assert_eq!(super::counts().shared_writes, before.shared_writes + u64::from(super::ENABLED));
    }
}
