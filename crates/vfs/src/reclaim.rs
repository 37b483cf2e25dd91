//! Deferred release of what rcu-walkers may still be reading: the
//! userspace stand-in for `call_rcu` and `rcu_barrier`.
//!
//! Invariant: `pending[c]` counts the releases deferred on CPU `c` that
//! have not run yet; a release takes its unit back from the counter it was
//! counted on, so every counter stays at or above zero and
//! [`Reclaim::barrier`] knows when every object unlinked before it was
//! called has really been freed — whatever other threads, pinning and
//! unpinning on the same global epoch, are doing.
//!
//! Each CPU's counter is its own `Arc` on its own cache line: a deferred
//! release holds that `Arc` (the counter must outlive the superblock if the
//! release runs late), so deferring writes only the deferring CPU's line
//! and unlinks in different directories share no counter.

use crossbeam_epoch::Guard;
use crossbeam_utils::CachePadded;
use std::sync::atomic::{AtomicIsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

#[derive(Debug)]
pub(crate) struct Reclaim {
    pending: Box<[Arc<CachePadded<AtomicIsize>>]>,
}

impl Default for Reclaim {
    fn default() -> Self {
        let cpus = vfscale_sync::cpu::possible_cpus();
        Reclaim { pending: (0..cpus).map(|_| Arc::default()).collect() }
    }
}

impl Reclaim {
    /// Drops `value` once every thread pinned now has unpinned.
    pub fn defer<T: Send + 'static>(&self, guard: &Guard, value: T) {
        let pending = Arc::clone(&self.pending[vfscale_sync::cpu::current_cpu() % self.pending.len()]);
        pending.fetch_add(1, Ordering::Relaxed);
        guard.defer(move || {
            vfscale_sync::audit::uncounted(|| drop(value));
            pending.fetch_sub(1, Ordering::Release);
        });
    }

    /// Waits until every release deferred so far has run, or `timeout`
    /// passes; returns whether they all ran.
    pub fn barrier(&self, timeout: Duration) -> bool {
        let deadline = Instant::now() + timeout;
        loop {
            crossbeam_epoch::pin().flush();
            if self.pending.iter().all(|p| p.load(Ordering::Acquire) == 0) {
                return true;
            }
            if Instant::now() >= deadline {
                return false;
            }
            std::thread::yield_now();
        }
    }
}
