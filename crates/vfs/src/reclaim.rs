//! Deferred release of what rcu-walkers may still be reading: the
//! userspace stand-in for `call_rcu` and `rcu_barrier`.
//!
//! Invariant: `pending` counts the releases deferred through the epoch
//! that have not run yet, so [`Reclaim::barrier`] knows when every object
//! unlinked before it was called has really been freed — whatever other
//! threads, pinning and unpinning on the same global epoch, are doing.

use crossbeam_epoch::Guard;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

#[derive(Debug, Default)]
pub(crate) struct Reclaim {
    pending: AtomicUsize,
}

impl Reclaim {
    /// Drops `value` once every thread pinned now has unpinned.
    pub fn defer<T: Send + 'static>(self: &Arc<Self>, guard: &Guard, value: T) {
        self.pending.fetch_add(1, Ordering::Relaxed);
        let this = Arc::clone(self);
        guard.defer(move || {
            drop(value);
            this.pending.fetch_sub(1, Ordering::Release);
        });
    }

    /// Waits until every release deferred so far has run, or `timeout`
    /// passes; returns whether they all ran.
    pub fn barrier(&self, timeout: Duration) -> bool {
        let deadline = Instant::now() + timeout;
        loop {
            crossbeam_epoch::pin().flush();
            if self.pending.load(Ordering::Acquire) == 0 {
                return true;
            }
            if Instant::now() >= deadline {
                return false;
            }
            std::thread::yield_now();
        }
    }
}
