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
//!
//! May import nothing of the crate.

use crossbeam_epoch::Guard;
use crossbeam_utils::CachePadded;
use std::sync::Arc;
use std::time::{Duration, Instant};
use vfscale_sync::audited::{AtomicIsize, Ordering};

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

/// The release barrier of every instance at once (an `rcu_barrier`): runs
/// every release deferred so far through the epoch, by any filesystem of
/// this process, as [`Vfs::release_barrier`](crate::Vfs::release_barrier)
/// does for one, or gives up after
/// `timeout` (another thread stayed pinned); returns whether they all ran.
/// Benchmarks call it between runs, so that no run pays for collecting
/// the garbage of the one before.
///
/// Deferred releases run in the order their batches were handed to the
/// global queue, so once a marker deferred now has run, everything handed
/// over before it has too; threads that have exited handed theirs over.
pub fn release_barrier(timeout: Duration) -> bool {
    let ran = Arc::new(vfscale_sync::audited::AtomicBool::new(false));
    let marker = Arc::clone(&ran);
    crossbeam_epoch::pin().defer(move || marker.store(true, Ordering::Release));
    let deadline = Instant::now() + timeout;
    while !ran.load(Ordering::Acquire) {
        if Instant::now() >= deadline {
            return false;
        }
        crossbeam_epoch::pin().flush();
        std::thread::yield_now();
    }
    true
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn deferred_releases_of_exited_threads_run() {
        let dropped = Arc::new(vfscale_sync::audited::AtomicUsize::new(0));
        // Joined, not scoped: a scope may end before a thread's exit hands
        // its last batch to the global queue (a thread-local destructor).
        let threads: Vec<_> = (0..4)
            .map(|_| {
                let dropped = Arc::clone(&dropped);
                std::thread::spawn(move || {
                    for _ in 0..1000 {
                        let dropped = Arc::clone(&dropped);
                        crossbeam_epoch::pin().defer(move || dropped.fetch_add(1, Ordering::Relaxed));
                    }
                })
            })
            .collect();
        threads.into_iter().for_each(|t| t.join().unwrap());
        assert!(release_barrier(Duration::from_secs(60)));
        assert_eq!(dropped.load(Ordering::Relaxed), 4000);
    }
}
