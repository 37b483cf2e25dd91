//! Deferred release of what rcu-walkers may still be reading: the
//! userspace stand-in for `call_rcu` and `rcu_barrier`.
//!
//! Invariant: `counts[c]` holds two counts that only grow: the releases
//! deferred on CPU `c`, and how many of those have run (on whatever thread
//! ran them), the second counted after the first, so it never passes it.
//! [`Reclaim::barrier`] reads every CPU's count of releases run, then
//! every CPU's count of releases deferred: equal sums mean that at the
//! instant between the two passes none was pending (what ran by then was
//! read as run at most; what was deferred by then was read as deferred at
//! least). So it knows when every object unlinked before it was called
//! has really been freed, releases deferred by releases included, whatever
//! other threads, pinning and unpinning on the same global epoch, are
//! doing. (One signed count per CPU, which a release took back from the
//! CPU it was counted on, could read zero everywhere, one CPU read before
//! a running release deferred another there and one after it took its own
//! unit back, with the second release pending.) SRCU counts its readers
//! the same way.
//!
//! Each CPU's counts are their own `Arc` on their own cache line: a
//! deferred release holds that `Arc` (the counts must outlive the
//! superblock if the release runs late), so deferring writes only the
//! deferring CPU's line and unlinks in different directories share none.
//!
//! May import nothing of the crate.

use crossbeam_epoch::Guard;
use crossbeam_utils::CachePadded;
use std::collections::HashMap;
use std::sync::{Arc, Weak};
use std::time::{Duration, Instant};
use vfscale_sync::audited::{AtomicU64, Mutex, Ordering};
use vfscale_sync::poison::unpoisoned;

/// The counts of every `Reclaim` of the process while they live (a
/// pending release holds its CPU's), for [`release_barrier`] to see
/// releases deferred while it waits. Written when a `Reclaim` is made
/// (once per superblock), never by a release.
static MADE: Mutex<Vec<Weak<CachePadded<Counts>>>> = Mutex::new(Vec::new());

/// One CPU's releases: deferred there, and run (see the module doc).
#[derive(Debug, Default)]
struct Counts {
    deferred: AtomicU64,
    ran: AtomicU64,
}

#[derive(Debug)]
pub(crate) struct Reclaim {
    counts: Box<[Arc<CachePadded<Counts>>]>,
}

impl Default for Reclaim {
    fn default() -> Self {
        let cpus = vfscale_sync::cpu::possible_cpus();
        let counts: Box<[Arc<CachePadded<Counts>>]> = (0..cpus).map(|_| Arc::default()).collect();
        let mut made = unpoisoned(MADE.lock());
        // Pruned when full, then given room for as many again as are
        // live, so that a prune comes only after as many makes as it
        // visited: constant time per superblock made, on average.
        if made.len() == made.capacity() {
            made.retain(|c| c.strong_count() > 0);
            let live = made.len().max(cpus);
            made.reserve(live);
        }
        made.extend(counts.iter().map(Arc::downgrade));
        Reclaim { counts }
    }
}

impl Reclaim {
    /// Drops `value` once every thread pinned now has unpinned.
    pub fn defer<T: Send + 'static>(&self, guard: &Guard, value: T) {
        let counts = self.count_on(vfscale_sync::cpu::current_cpu());
        guard.defer(move || {
            vfscale_sync::audit::uncounted(|| drop(value));
            counts.ran.fetch_add(1, Ordering::SeqCst);
        });
    }

    /// Counts a release deferred on `cpu`; the caller counts its run on
    /// the counts returned.
    fn count_on(&self, cpu: usize) -> Arc<CachePadded<Counts>> {
        let counts = Arc::clone(&self.counts[cpu % self.counts.len()]);
        counts.deferred.fetch_add(1, Ordering::SeqCst);
        counts
    }

    /// Whether no release was pending at some instant during the call
    /// (see the module doc); `between` runs between the two passes.
    fn settled_around(&self, between: impl FnOnce()) -> bool {
        let ran: u64 = self.counts.iter().map(|c| c.ran.load(Ordering::SeqCst)).sum();
        between();
        let deferred: u64 = self.counts.iter().map(|c| c.deferred.load(Ordering::SeqCst)).sum();
        ran == deferred
    }

    /// Waits until every release deferred so far has run, or `timeout`
    /// passes; returns whether they all ran.
    pub fn barrier(&self, timeout: Duration) -> bool {
        let deadline = Instant::now() + timeout;
        loop {
            crossbeam_epoch::pin().flush();
            if self.settled_around(|| {}) {
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
/// A release may defer another (a mount's release drops the superblock,
/// whose end releases its inodes): while any `Reclaim` counted a release
/// deferred during a round, another marker follows, which waits for the
/// ones deferred on this thread or handed over by others. What an idle
/// live thread keeps in its own queue is not waited for (it may never
/// hand it over: a served mount's idle server threads), nor what a
/// release defers straight through the epoch. Beside threads that keep
/// deferring releases, rounds keep following, and the barrier returns
/// false at `timeout`.
pub fn release_barrier(timeout: Duration) -> bool {
    let deadline = Instant::now() + timeout;
    loop {
        let before = deferred_by_reclaim();
        if !marker_ran(deadline) {
            return false;
        }
        let after = deferred_by_reclaim();
        // Counts made during the round were zero before it.
        if after.iter().all(|(counts, (_, n))| before.get(counts).map_or(0, |(_, m)| *m) == *n) {
            return true;
        }
    }
}

/// Each live `Reclaim` CPU's count of releases deferred, by the address of
/// its counts, with a `Weak` that keeps the address from being reused
/// while the snapshot lives.
fn deferred_by_reclaim() -> HashMap<usize, (Weak<CachePadded<Counts>>, u64)> {
    let made = unpoisoned(MADE.lock());
    made.iter()
        .filter_map(|weak| {
            let counts = weak.upgrade()?;
            Some((Arc::as_ptr(&counts) as usize, (Weak::clone(weak), counts.deferred.load(Ordering::SeqCst))))
        })
        .collect()
}

/// Defers a marker and waits until it has run; false if `deadline`
/// passed first.
fn marker_ran(deadline: Instant) -> bool {
    let ran = Arc::new(vfscale_sync::audited::AtomicBool::new(false));
    let marker = Arc::clone(&ran);
    crossbeam_epoch::pin().defer(move || marker.store(true, Ordering::Release));
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

    /// A release counted on CPU 1 runs on another thread while a barrier
    /// reads, and defers a second release on CPU 0 before its own run is
    /// counted: whichever pass sees what, the barrier does not settle
    /// with the second pending, and settles once it has run.
    #[test]
    fn a_release_deferred_by_a_running_one_keeps_the_barrier_waiting() {
        let reclaim = Reclaim { counts: (0..2).map(|_| Arc::default()).collect() };
        let outer = reclaim.count_on(1);
        let inner = std::cell::Cell::new(None);
        let settled = reclaim.settled_around(|| {
            inner.set(Some(reclaim.count_on(0)));
            outer.ran.fetch_add(1, Ordering::SeqCst);
        });
        assert!(!settled, "settled with a release pending");
        assert!(!reclaim.settled_around(|| {}));
        inner.take().unwrap().ran.fetch_add(1, Ordering::SeqCst);
        assert!(reclaim.settled_around(|| {}));
    }

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
