#![allow(unused_imports)] // the full std/loom surface, whichever subset a build uses
//! One switch between `std` and `loom`, so every primitive is model-checked
//! with the same code that ships (the tokio pattern).
//!
//! Build with `RUSTFLAGS="--cfg loom"` to run the loom models; everything in
//! this crate reaches atomics, cells, threads and hints only through here.

#[cfg(loom)]
pub(crate) use loom::{
    hint::spin_loop,
    sync::atomic::{fence, AtomicBool, AtomicI32, AtomicIsize, AtomicPtr, AtomicU32, AtomicU64, AtomicUsize},
    thread::yield_now,
};

#[cfg(not(loom))]
pub(crate) use std::{
    hint::spin_loop,
    sync::atomic::{fence, AtomicBool, AtomicI32, AtomicIsize, AtomicPtr, AtomicU32, AtomicU64, AtomicUsize},
    thread::yield_now,
};

pub(crate) use std::sync::atomic::Ordering;

/// Loom models `SeqCst` loads, stores and read-modify-writes as plain
/// acquire/release, so code that relies on their single total order (a
/// store-then-load handshake, Dekker style) calls this between the two
/// accesses: a real `SeqCst` fence under loom, nothing otherwise. The
/// `SeqCst` accesses themselves are what make the shipped code correct.
#[inline(always)]
pub(crate) fn seqcst_fence_for_loom() {
    #[cfg(loom)]
    fence(Ordering::SeqCst);
}

/// An `UnsafeCell` whose accesses loom can check for data races.
#[derive(Debug, Default)]
pub(crate) struct UnsafeCell<T: ?Sized>(
    #[cfg(loom)] loom::cell::UnsafeCell<T>,
    #[cfg(not(loom))] std::cell::UnsafeCell<T>,
);

impl<T> UnsafeCell<T> {
    pub(crate) fn new(value: T) -> Self {
        #[cfg(loom)]
        return Self(loom::cell::UnsafeCell::new(value));
        #[cfg(not(loom))]
        return Self(std::cell::UnsafeCell::new(value));
    }

    pub(crate) fn into_inner(self) -> T {
        self.0.into_inner()
    }
}

impl<T: ?Sized> UnsafeCell<T> {
    /// Runs `f` with a shared pointer to the contents.
    pub(crate) fn with<R>(&self, f: impl FnOnce(*const T) -> R) -> R {
        #[cfg(loom)]
        return self.0.with(f);
        #[cfg(not(loom))]
        return f(self.0.get());
    }

    /// Runs `f` with a unique pointer to the contents.
    pub(crate) fn with_mut<R>(&self, f: impl FnOnce(*mut T) -> R) -> R {
        #[cfg(loom)]
        return self.0.with_mut(f);
        #[cfg(not(loom))]
        return f(self.0.get());
    }
}

/// A point in time that loom can replay: under loom it is a step counter, so
/// a model explores the same branches on every execution.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Deadline {
    #[cfg(not(loom))]
    at: std::time::Instant,
    #[cfg(loom)]
    steps_left: u32,
}

impl Deadline {
    /// A deadline `after` from now. Under loom, `after` becomes a few steps:
    /// zero stays zero (expired at once), anything else expires after 2 checks.
    pub(crate) fn after(after: std::time::Duration) -> Self {
        #[cfg(not(loom))]
        return Self { at: std::time::Instant::now() + after };
        #[cfg(loom)]
        return Self { steps_left: if after.is_zero() { 0 } else { 2 } };
    }

    /// Whether the deadline has passed. Under loom each call is one step.
    pub(crate) fn expired(&mut self) -> bool {
        #[cfg(not(loom))]
        return std::time::Instant::now() >= self.at;
        #[cfg(loom)]
        {
            if self.steps_left == 0 {
                return true;
            }
            self.steps_left -= 1;
            false
        }
    }
}
