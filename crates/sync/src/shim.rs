#![allow(unused_imports)] // the full std/loom surface, whichever subset a build uses
//! One switch between `std` and `loom`, so every primitive is model-checked
//! with the same code that ships (the tokio pattern).
//!
//! Imports from this crate: only [`crate::audited`] (the shipped atomics,
//! outside loom). `futex` and the primitives import this, never the reverse.
//!
//! Build with `RUSTFLAGS="--cfg loom"` to run the loom models; everything in
//! this crate reaches atomics, cells, threads and hints only through here.
//!
//! # What differs under loom
//!
//! Invariant: a primitive's code is the same in both builds; only the
//! helpers here and in [`crate::futex`] change, and each says why the loom
//! version checks what the shipped one does:
//! - [`spin_wait`], one round of a busy-wait on a word, is a CPU pause in
//!   the shipped build and, under loom, parks the spinner until
//!   [`wake_spinners`] on that word (the parking queue below, which
//!   `futex`'s loom model shares). Loom runs `spin_loop` as a yield and
//!   lets any thread run after one, without spending a preemption, so two
//!   spinners could take turns forever and blow its branch limit; parked,
//!   a spinner costs nothing until the word it polls changes. Sound
//!   because a spinner only loads while it waits: a round that re-reads an
//!   unchanged word changes no state, so skipping it hides no
//!   interleaving, and loom still runs the same load after the store
//!   without parking (where the spinner gains no synchronization from the
//!   wake-up). A store with no [`wake_spinners`] after it leaves the
//!   spinner parked: a deadlock that loom reports, never a missed bug.
//! - [`Deadline`] counts steps instead of reading a clock, so every
//!   execution takes the same branches and every budget is tiny.
//! - [`seqcst_fence_for_loom`] stands in for the total order of `SeqCst`
//!   accesses that loom does not model.
//!
//! Under loom, `parking` is the waiter queue keyed by address that
//! [`spin_wait`] / [`wake_spinners`] and `futex::wait` / `futex::wake`
//! share. It lives in a thread-local of the OS thread that runs the model
//! (loom runs every model thread there, one at a time); it is empty at the
//! end of every execution that loom accepts, since a thread still queued
//! there is parked forever, which loom reports as a deadlock.

#[cfg(loom)]
pub(crate) use loom::{
    hint::spin_loop,
    sync::atomic::{fence, AtomicBool, AtomicI32, AtomicIsize, AtomicPtr, AtomicU32, AtomicU64, AtomicUsize},
    thread::yield_now,
};

// Outside loom every atomic is the audited stand-in (`crate::audited`), so
// the cache-line audit sees each access.
#[cfg(not(loom))]
pub(crate) use crate::audited::{
    fence, AtomicBool, AtomicI32, AtomicIsize, AtomicPtr, AtomicU32, AtomicU64, AtomicUsize,
};
#[cfg(not(loom))]
pub(crate) use std::{hint::spin_loop, thread::yield_now};

pub(crate) use std::sync::atomic::Ordering;

/// An atomic word a spinner can wait on with [`spin_wait`].
pub(crate) trait SpinWord {
    /// The value the word holds.
    type Value: Copy + PartialEq;

    /// Whether the word still holds `seen`, read the way loom lets a thread
    /// read only the newest value: a `compare_exchange` (a read-modify-write)
    /// whose expected value is `seen` flipped, so it fails, and stores
    /// nothing, whenever the answer is yes. A store here would be a second
    /// write of `seen` that loom's partial modification order may place after
    /// a later store, and read back in its place.
    #[cfg(loom)]
    fn still(&self, seen: Self::Value) -> bool;
}

macro_rules! spin_word {
    ($($atomic:ty => $value:ty),* $(,)?) => {$(
        impl SpinWord for $atomic {
            type Value = $value;

            #[cfg(loom)]
            fn still(&self, seen: $value) -> bool {
                let flipped = !seen;
                match self.compare_exchange(flipped, flipped, Ordering::Relaxed, Ordering::Relaxed) {
                    Ok(now) | Err(now) => now == seen,
                }
            }
        }
    )*};
}

spin_word!(
    AtomicBool => bool,
    AtomicI32 => i32,
    AtomicIsize => isize,
    AtomicU32 => u32,
    AtomicU64 => u64,
    AtomicUsize => usize,
);

impl<T> SpinWord for AtomicPtr<T> {
    type Value = *mut T;

    #[cfg(loom)]
    fn still(&self, seen: *mut T) -> bool {
        // All address bits flipped: a pointer no primitive ever stores.
        let flipped = (seen as usize ^ usize::MAX) as *mut T;
        match self.compare_exchange(flipped, flipped, Ordering::Relaxed, Ordering::Relaxed) {
            Ok(now) | Err(now) => now == seen,
        }
    }
}

/// One round of busy-waiting while `word` holds `seen` (the value the
/// caller just loaded): a CPU pause. Under loom, parks until
/// [`wake_spinners`] on `word` if it still holds `seen` (module doc).
/// The caller re-loads the word afterwards either way.
#[inline(always)]
pub(crate) fn spin_wait<W: SpinWord>(word: &W, seen: W::Value) {
    #[cfg(not(loom))]
    {
        let _ = (word, seen);
        spin_loop();
    }
    #[cfg(loom)]
    parking::park_if(word as *const W as usize, false, || word.still(seen));
}

/// Ends every [`spin_wait`] on `word`; call it right after each store that
/// may end such a wait, with no other atomic access in between (the store
/// then orders it against the spinners' checks). Nothing in the shipped
/// build. Takes a pointer, used only as a key, because the word may be
/// freed by a spinner the store released before this runs.
#[inline(always)]
pub(crate) fn wake_spinners<W>(word: *const W) {
    #[cfg(not(loom))]
    let _ = word;
    #[cfg(loom)]
    parking::unpark(word as usize, u32::MAX);
}

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

/// The loom waiter queue, keyed by address (module doc).
#[cfg(loom)]
pub(crate) mod parking {
    use std::cell::RefCell;

    struct Parked {
        key: usize,
        thread: loom::thread::Thread,
    }

    std::thread_local! {
        /// Threads parked on an address, oldest first.
        static PARKED: RefCell<Vec<Parked>> = const { RefCell::new(Vec::new()) };
    }

    /// Runs `still_waiting` (one loom atomic operation), and if it says so,
    /// queues the thread on `key` before any other thread runs, then parks
    /// until [`unpark`] on `key`. A `timed` wait yields instead of parking
    /// and leaves the queue if nobody woke it: it may return either way.
    pub(crate) fn park_if(key: usize, timed: bool, still_waiting: impl FnOnce() -> bool) {
        if !still_waiting() {
            return;
        }
        let me = loom::thread::current();
        let id = me.id();
        PARKED.with(|parked| parked.borrow_mut().push(Parked { key, thread: me }));
        if !timed {
            loom::thread::park();
            return;
        }
        loom::thread::yield_now();
        PARKED.with(|parked| parked.borrow_mut().retain(|p| p.thread.id() != id));
    }

    /// Unparks up to `count` threads queued on `key`, oldest first.
    pub(crate) fn unpark(key: usize, count: u32) {
        let mut left = count;
        PARKED.with(|parked| {
            parked.borrow_mut().retain(|p| {
                if p.key != key || left == 0 {
                    return true;
                }
                left -= 1;
                p.thread.unpark();
                false
            })
        });
    }
}

#[cfg(all(test, loom))]
mod loom_models {
    use super::*;
    use loom::sync::Arc;
    use loom::thread;

    /// Two spinners on one flag are both let go by one store and its wake
    /// (with `wake_spinners` left out, loom reports a deadlock).
    #[test]
    fn spin_wait_two_spinners_one_release() {
        loom::model(|| {
            let flag = Arc::new(AtomicBool::new(true));
            let spinners: Vec<_> = (0..2)
                .map(|_| {
                    let flag = flag.clone();
                    thread::spawn(move || {
                        while flag.load(Ordering::Acquire) {
                            spin_wait(&*flag, true);
                        }
                    })
                })
                .collect();
            flag.store(false, Ordering::Release);
            wake_spinners(&*flag);
            for spinner in spinners {
                spinner.join().unwrap();
            }
        });
    }
}
