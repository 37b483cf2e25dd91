//! The atomics and locks the [`audit`] sees: drop-in
//! stand-ins for `std::sync::atomic`, `std::sync::{Mutex, Condvar, OnceLock}` and
//! `crossbeam_epoch::Atomic` that report each access (address, read or
//! write, the caller's file and line) before making it.
//!
//! Invariant: a stand-in is `#[repr(transparent)]` over the type it wraps
//! and does exactly what that type does; the only addition is the report,
//! which without the `audit` feature is nothing, and with it one relaxed
//! load of a read-mostly word while no thread records. This crate reaches
//! atomics only through its `shim` module, which re-exports these types
//! outside loom, and `vfscale` only through this module (a test greps for
//! anything else).

use crate::audit;
use std::fmt;
use std::ops::Deref;
use std::sync::{Arc, LockResult, TryLockResult};

pub use std::sync::atomic::{fence, Ordering};
pub use std::sync::MutexGuard;

macro_rules! audited_atomic {
    ($(#[$doc:meta])* $name:ident, $std:ty, $value:ty $(, $generic:ident)?) => {
        $(#[$doc])*
        #[repr(transparent)]
        pub struct $name$(<$generic>)?($std);

        impl$(<$generic>)? Default for $name$(<$generic>)? {
            fn default() -> Self {
                Self(<$std>::default())
            }
        }

        impl$(<$generic>)? $name$(<$generic>)? {
            /// A new atomic holding `value`.
            pub const fn new(value: $value) -> Self {
                Self(<$std>::new(value))
            }

            /// As the `std` method; reported as a read.
            #[inline(always)]
            #[cfg_attr(feature = "audit", track_caller)]
            pub fn load(&self, order: Ordering) -> $value {
                audit::read(self);
                self.0.load(order)
            }

            /// As the `std` method; reported as a write.
            #[inline(always)]
            #[cfg_attr(feature = "audit", track_caller)]
            pub fn store(&self, value: $value, order: Ordering) {
                audit::write(self);
                self.0.store(value, order)
            }

            /// As the `std` method; reported as a write.
            #[inline(always)]
            #[cfg_attr(feature = "audit", track_caller)]
            pub fn swap(&self, value: $value, order: Ordering) -> $value {
                audit::write(self);
                self.0.swap(value, order)
            }

            /// As the `std` method; reported as a write, failed or not
            /// (a failed `lock cmpxchg` takes the line exclusive too).
            #[inline(always)]
            #[cfg_attr(feature = "audit", track_caller)]
            pub fn compare_exchange(
                &self,
                current: $value,
                new: $value,
                success: Ordering,
                failure: Ordering,
            ) -> Result<$value, $value> {
                audit::write(self);
                self.0.compare_exchange(current, new, success, failure)
            }

            /// As the `std` method; reported as a write.
            #[inline(always)]
            #[cfg_attr(feature = "audit", track_caller)]
            pub fn compare_exchange_weak(
                &self,
                current: $value,
                new: $value,
                success: Ordering,
                failure: Ordering,
            ) -> Result<$value, $value> {
                audit::write(self);
                self.0.compare_exchange_weak(current, new, success, failure)
            }

            /// As the `std` method; reported as a write.
            #[inline(always)]
            #[cfg_attr(feature = "audit", track_caller)]
            pub fn fetch_update<F: FnMut($value) -> Option<$value>>(
                &self,
                set_order: Ordering,
                fetch_order: Ordering,
                f: F,
            ) -> Result<$value, $value> {
                audit::write(self);
                self.0.fetch_update(set_order, fetch_order, f)
            }

            /// As the `std` method: unshared, so not reported.
            pub fn get_mut(&mut self) -> &mut $value {
                self.0.get_mut()
            }

            /// As the `std` method.
            pub fn into_inner(self) -> $value {
                self.0.into_inner()
            }

            /// As the `std` method (for futex words); accesses through the
            /// pointer are the caller's to report.
            pub const fn as_ptr(&self) -> *mut $value {
                self.0.as_ptr()
            }
        }

        impl$(<$generic>)? fmt::Debug for $name$(<$generic>)? {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                fmt::Debug::fmt(&self.0, f)
            }
        }

        impl$(<$generic>)? From<$value> for $name$(<$generic>)? {
            fn from(value: $value) -> Self {
                Self::new(value)
            }
        }

        // SAFETY: transparent over a `std` atomic, whose all-zero bits are
        // a valid value (0, false or null), as for the integer it holds.
        unsafe impl$(<$generic>)? bytemuck::Zeroable for $name$(<$generic>)? {}
    };
}

macro_rules! audited_rmw {
    ($name:ident, $value:ty, $($op:ident),*) => {
        impl $name {
            $(
                /// As the `std` method; reported as a write.
                #[inline(always)]
                #[cfg_attr(feature = "audit", track_caller)]
                pub fn $op(&self, value: $value, order: Ordering) -> $value {
                    audit::write(self);
                    self.0.$op(value, order)
                }
            )*
        }
    };
}

audited_atomic!(
    /// An audited `std::sync::atomic::AtomicBool`.
    AtomicBool, std::sync::atomic::AtomicBool, bool
);
audited_atomic!(
    /// An audited `std::sync::atomic::AtomicI32`.
    AtomicI32, std::sync::atomic::AtomicI32, i32
);
audited_atomic!(
    /// An audited `std::sync::atomic::AtomicU32`.
    AtomicU32, std::sync::atomic::AtomicU32, u32
);
audited_atomic!(
    /// An audited `std::sync::atomic::AtomicU64`.
    AtomicU64, std::sync::atomic::AtomicU64, u64
);
audited_atomic!(
    /// An audited `std::sync::atomic::AtomicIsize`.
    AtomicIsize, std::sync::atomic::AtomicIsize, isize
);
audited_atomic!(
    /// An audited `std::sync::atomic::AtomicUsize`.
    AtomicUsize, std::sync::atomic::AtomicUsize, usize
);
audited_atomic!(
    /// An audited `std::sync::atomic::AtomicPtr`.
    AtomicPtr, std::sync::atomic::AtomicPtr<T>, *mut T, T
);

audited_rmw!(AtomicBool, bool, fetch_and, fetch_or, fetch_xor);
audited_rmw!(AtomicI32, i32, fetch_add, fetch_sub, fetch_and, fetch_or, fetch_max, fetch_min);
audited_rmw!(AtomicU32, u32, fetch_add, fetch_sub, fetch_and, fetch_or, fetch_max, fetch_min);
audited_rmw!(AtomicU64, u64, fetch_add, fetch_sub, fetch_and, fetch_or, fetch_max, fetch_min);
audited_rmw!(AtomicIsize, isize, fetch_add, fetch_sub, fetch_and, fetch_or, fetch_max, fetch_min);
audited_rmw!(AtomicUsize, usize, fetch_add, fetch_sub, fetch_and, fetch_or, fetch_max, fetch_min);

/// An audited `std::sync::Mutex`: taking it is reported as a write of its
/// word and as a lock acquisition.
#[derive(Default)]
pub struct Mutex<T: ?Sized>(std::sync::Mutex<T>);

impl<T> Mutex<T> {
    /// A new unlocked mutex.
    pub const fn new(value: T) -> Self {
        Self(std::sync::Mutex::new(value))
    }

    /// As the `std` method.
    pub fn into_inner(self) -> LockResult<T> {
        self.0.into_inner()
    }
}

impl<T: ?Sized> Mutex<T> {
    /// As the `std` method; reported.
    #[cfg_attr(feature = "audit", track_caller)]
    pub fn lock(&self) -> LockResult<MutexGuard<'_, T>> {
        audit::write(self);
        audit::lock_acquired();
        self.0.lock()
    }

    /// As the `std` method; reported.
    #[cfg_attr(feature = "audit", track_caller)]
    pub fn try_lock(&self) -> TryLockResult<MutexGuard<'_, T>> {
        audit::write(self);
        audit::lock_acquired();
        self.0.try_lock()
    }

    /// As the `std` method: unshared, so not reported.
    pub fn get_mut(&mut self) -> LockResult<&mut T> {
        self.0.get_mut()
    }
}

impl<T: ?Sized + fmt::Debug> fmt::Debug for Mutex<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&self.0, f)
    }
}

/// An audited `std::sync::Condvar`: waits and notifications are reported
/// as writes of its word.
#[derive(Default)]
pub struct Condvar(std::sync::Condvar);

impl Condvar {
    /// A new condition variable.
    pub const fn new() -> Self {
        Self(std::sync::Condvar::new())
    }

    /// As the `std` method; reported.
    #[cfg_attr(feature = "audit", track_caller)]
    pub fn wait<'a, T>(&self, guard: MutexGuard<'a, T>) -> LockResult<MutexGuard<'a, T>> {
        audit::write(self);
        self.0.wait(guard)
    }

    /// As the `std` method; reported.
    #[cfg_attr(feature = "audit", track_caller)]
    pub fn wait_timeout<'a, T>(
        &self,
        guard: MutexGuard<'a, T>,
        timeout: std::time::Duration,
    ) -> LockResult<(MutexGuard<'a, T>, std::sync::WaitTimeoutResult)> {
        audit::write(self);
        self.0.wait_timeout(guard, timeout)
    }

    /// As the `std` method; reported.
    #[cfg_attr(feature = "audit", track_caller)]
    pub fn notify_one(&self) {
        audit::write(self);
        self.0.notify_one()
    }

    /// As the `std` method; reported.
    #[cfg_attr(feature = "audit", track_caller)]
    pub fn notify_all(&self) {
        audit::write(self);
        self.0.notify_all()
    }
}

impl fmt::Debug for Condvar {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&self.0, f)
    }
}

/// An audited `std::sync::OnceLock`: a look-up is reported as a read, the
/// first initialization as a write.
pub struct OnceLock<T>(std::sync::OnceLock<T>);

impl<T> Default for OnceLock<T> {
    fn default() -> Self {
        Self::new()
    }
}

impl<T> OnceLock<T> {
    /// A new empty cell.
    pub const fn new() -> Self {
        Self(std::sync::OnceLock::new())
    }

    /// As the `std` method; reported as a read.
    #[inline]
    #[cfg_attr(feature = "audit", track_caller)]
    pub fn get(&self) -> Option<&T> {
        audit::read(self);
        self.0.get()
    }

    /// As the `std` method; a read, and a write when it initializes.
    #[cfg_attr(feature = "audit", track_caller)]
    pub fn get_or_init(&self, f: impl FnOnce() -> T) -> &T {
        audit::read(self);
        if self.0.get().is_none() {
            audit::write(self);
        }
        self.0.get_or_init(f)
    }

    /// As the `std` method; reported as a write.
    #[cfg_attr(feature = "audit", track_caller)]
    pub fn set(&self, value: T) -> Result<(), T> {
        audit::write(self);
        self.0.set(value)
    }

    /// As the `std` method: unshared, so not reported.
    pub fn get_mut(&mut self) -> Option<&mut T> {
        self.0.get_mut()
    }

    /// As the `std` method.
    pub fn into_inner(self) -> Option<T> {
        self.0.into_inner()
    }

    /// As the `std` method: unshared, so not reported.
    pub fn take(&mut self) -> Option<T> {
        self.0.take()
    }
}

impl<T: fmt::Debug> fmt::Debug for OnceLock<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&self.0, f)
    }
}

/// An audited `crossbeam_epoch::Atomic`: loads are reported as reads,
/// stores, swaps and compare-exchanges as writes.
pub struct EpochAtomic<T>(crossbeam_epoch::Atomic<T>);

impl<T> EpochAtomic<T> {
    /// A null pointer.
    pub const fn null() -> Self {
        Self(crossbeam_epoch::Atomic::null())
    }

    /// A pointer to a new heap value.
    pub fn new(value: T) -> Self {
        Self(crossbeam_epoch::Atomic::new(value))
    }

    /// As the crossbeam method; reported as a read.
    #[inline(always)]
    #[cfg_attr(feature = "audit", track_caller)]
    pub fn load<'g>(&self, order: Ordering, guard: &'g crossbeam_epoch::Guard) -> crossbeam_epoch::Shared<'g, T> {
        audit::read(self);
        self.0.load(order, guard)
    }

    /// As the crossbeam method; reported as a write.
    #[inline(always)]
    #[cfg_attr(feature = "audit", track_caller)]
    pub fn store<P: crossbeam_epoch::Pointer<T>>(&self, new: P, order: Ordering) {
        audit::write(self);
        self.0.store(new, order)
    }

    /// As the crossbeam method; reported as a write.
    #[inline(always)]
    #[cfg_attr(feature = "audit", track_caller)]
    pub fn swap<'g, P: crossbeam_epoch::Pointer<T>>(
        &self,
        new: P,
        order: Ordering,
        guard: &'g crossbeam_epoch::Guard,
    ) -> crossbeam_epoch::Shared<'g, T> {
        audit::write(self);
        self.0.swap(new, order, guard)
    }

    /// As the crossbeam method; reported as a write.
    #[inline(always)]
    #[cfg_attr(feature = "audit", track_caller)]
    pub fn compare_exchange<'g, P: crossbeam_epoch::Pointer<T>>(
        &self,
        current: crossbeam_epoch::Shared<'_, T>,
        new: P,
        success: Ordering,
        failure: Ordering,
        guard: &'g crossbeam_epoch::Guard,
    ) -> Result<crossbeam_epoch::Shared<'g, T>, crossbeam_epoch::CompareExchangeError<'g, T, P>> {
        audit::write(self);
        self.0.compare_exchange(current, new, success, failure, guard)
    }

    /// As the crossbeam method: unshared, so not reported.
    ///
    /// # Safety
    /// As `crossbeam_epoch::Atomic::into_owned`: the pointer is non-null
    /// and nothing else holds it.
    pub unsafe fn into_owned(self) -> crossbeam_epoch::Owned<T> {
        // SAFETY: the caller's contract is the crossbeam method's.
        unsafe { self.0.into_owned() }
    }
}

impl<T> Default for EpochAtomic<T> {
    fn default() -> Self {
        Self::null()
    }
}

impl<T> From<crossbeam_epoch::Owned<T>> for EpochAtomic<T> {
    fn from(owned: crossbeam_epoch::Owned<T>) -> Self {
        Self(crossbeam_epoch::Atomic::from(owned))
    }
}

impl<T> fmt::Debug for EpochAtomic<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&self.0, f)
    }
}

/// An `Arc` reference whose taking and dropping the audit sees, for
/// references counted on hot paths (a ref-walk's inode, an open file's
/// inode in atomic mode): both write the `Arc`'s count, the line just
/// before its value in `std`'s layout.
pub struct CountedArc<T: ?Sized>(Arc<T>);

impl<T: ?Sized> CountedArc<T> {
    /// Takes a reference on `arc` (an increment of its count).
    #[cfg_attr(feature = "audit", track_caller)]
    pub fn new(arc: &Arc<T>) -> Self {
        audit::write(count_word(arc));
        CountedArc(Arc::clone(arc))
    }

    /// Takes over a reference already counted (by `Arc::new`, or by an
    /// increment the caller reported); its drop is reported.
    pub fn adopt(arc: Arc<T>) -> Self {
        CountedArc(arc)
    }

    /// Hands the reference over to a plain `Arc`, for storage whose
    /// eventual drop is not on a hot path (a link, a process's cwd).
    pub fn into_arc(self) -> Arc<T> {
        let this = std::mem::ManuallyDrop::new(self);
        // SAFETY: `this` is never dropped, so its `Arc` is moved out once.
        unsafe { std::ptr::read(&this.0) }
    }
}

/// Where `std` keeps the counts of `arc`: two words before the value.
fn count_word<T: ?Sized>(arc: &Arc<T>) -> *const u8 {
    (Arc::as_ptr(arc) as *const u8).wrapping_sub(2 * std::mem::size_of::<usize>())
}

impl<T: ?Sized> Clone for CountedArc<T> {
    #[cfg_attr(feature = "audit", track_caller)]
    fn clone(&self) -> Self {
        CountedArc::new(&self.0)
    }
}

impl<T: ?Sized> Deref for CountedArc<T> {
    type Target = Arc<T>;
    fn deref(&self) -> &Arc<T> {
        &self.0
    }
}

impl<T: ?Sized> Drop for CountedArc<T> {
    fn drop(&mut self) {
        audit::write(count_word(&self.0));
    }
}

impl<T: ?Sized + fmt::Debug> fmt::Debug for CountedArc<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&self.0, f)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::audit;

    #[test]
    fn stand_ins_report_reads_writes_and_locks() {
        let word = AtomicU64::new(1);
        let lock = Mutex::new(0u32);
        let once = OnceLock::new();
        let arc = Arc::new(5u8);
        let ((), trace) = audit::record(|| {
            assert_eq!(word.load(Ordering::Relaxed), 1);
            *lock.lock().unwrap() += 1;
            assert_eq!(*once.get_or_init(|| 3), 3);
            let counted = CountedArc::new(&arc);
            assert_eq!(**counted, 5);
        });
        if audit::ENABLED {
            assert_eq!(trace.lock_acquisitions(), 1);
            assert!(trace.written_lines() >= 2, "the mutex, the cell and the count: {trace:?}");
            assert!(trace.write_sites().iter().all(|s| s.contains("audited.rs")), "{:?}", trace.write_sites());
        } else {
            assert_eq!(trace.touched_lines(), 0);
        }
        assert_eq!(Arc::strong_count(&arc), 1, "the counted reference was dropped");
    }
}
