//! The `private` variant of every workload: the machine's ceiling.
//!
//! Thread i of a `private` run does exactly what thread 0 of the workload's
//! first variant (our "after" design) does, on an instance of its own: its
//! own Vfs, tree, lock or list, built by the workload's own constructor.
//! Nothing the workload allocates is shared between threads, so how far its
//! throughput scales with threads is what this machine allows — cores,
//! caches, memory bandwidth, the allocator, the scheduler — and not what a
//! design allows. A design's `efficiency` is its speedup over that of
//! `private` at the same thread count (see [`crate::bench`]).
//!
//! Not for judging designs: `private` is the same work without sharing,
//! which no design can have, so verdicts never pit a design against it.
//! All instances are built with the subject, for the most threads any of
//! its runs will have, so no run times a constructor; each run prepares
//! every instance as a 1-thread run of its own, so that none keeps what
//! its last run left.

use super::{Params, Subject, Workload};
use crossbeam_utils::CachePadded;

/// The variant name, listed after every workload's own variants.
pub const PRIVATE: &str = "private";

/// One instance of the workload's first variant per thread.
pub(super) struct Private {
    /// Thread i runs `instances[i]`.
    instances: Vec<Box<dyn Subject>>,
}

impl Private {
    /// The ceiling of `workload` for runs of up to `max_threads` threads.
    pub(super) fn new(workload: &Workload, params: &Params, max_threads: usize) -> Private {
        Private { instances: (0..max_threads).map(|_| (workload.build)(workload.variants[0], params)).collect() }
    }
}

impl Subject for Private {
    fn prepare_run(&self, threads: usize) {
        assert!(
            threads <= self.instances.len(),
            "private built for {} threads, run with {threads}",
            self.instances.len()
        );
        // Every instance, those this run leaves idle too: what an idle one
        // kept from its last run (the files of a 16-thread run of
        // `dir-create`, say) would otherwise weigh on the ones running
        // (a 1-thread `dir-create` ran at half the speed of the shared
        // design's after a 16-thread run).
        for instance in &self.instances {
            instance.prepare_run(1);
        }
    }

    fn prepare_thread(&self, thread: usize, iterations: u64) {
        self.instances[thread].prepare_thread(0, iterations);
    }

    fn run_thread(&self, thread: usize, iterations: u64) {
        self.instances[thread].run_thread(0, iterations);
    }
}

/// A subject on cache lines of its own. Workloads whose state lives inline
/// in the subject (a lock, a count) build it padded, so that the instances
/// of `private`, allocated one after another, share no cache line.
pub(super) fn padded<S: Subject + 'static>(subject: S) -> Box<dyn Subject> {
    Box::new(CachePadded::new(subject))
}

impl<S: Subject> Subject for CachePadded<S> {
    fn prepare_run(&self, threads: usize) {
        S::prepare_run(self, threads);
    }

    fn prepare_thread(&self, thread: usize, iterations: u64) {
        S::prepare_thread(self, thread, iterations);
    }

    fn run_thread(&self, thread: usize, iterations: u64) {
        S::run_thread(self, thread, iterations);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::harness::{run_cell, RunPlan};
    use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
    use std::sync::Mutex;

    static BUILT: AtomicUsize = AtomicUsize::new(0);
    static SEEN: Mutex<Vec<(usize, String, usize, u64)>> = Mutex::new(Vec::new());

    /// Records, per instance, its number, variant, the thread number it was
    /// run as and the operations it did.
    struct Recorder {
        id: usize,
        variant: String,
        prepared_for: AtomicUsize,
        ops: AtomicU64,
    }

    impl Subject for Recorder {
        fn prepare_run(&self, threads: usize) {
            self.prepared_for.store(threads, Ordering::Relaxed);
        }
        fn run_thread(&self, thread: usize, iterations: u64) {
            assert_eq!(self.prepared_for.load(Ordering::Relaxed), 1, "prepared as a 1-thread run");
            self.ops.fetch_add(iterations, Ordering::Relaxed);
            SEEN.lock().unwrap().push((self.id, self.variant.clone(), thread, iterations));
        }
    }

    const TEST: Workload = Workload {
        name: "test",
        about: "records",
        variants: &["ours", "before"],
        default_iterations: |_| 1,
        takes_hold: false,
        build: |variant, _| {
            let id = BUILT.fetch_add(1, Ordering::Relaxed);
            Box::new(Recorder {
                id,
                variant: variant.to_string(),
                prepared_for: AtomicUsize::new(0),
                ops: AtomicU64::new(0),
            })
        },
    };

    #[test]
    fn each_thread_runs_its_own_instance_of_the_first_variant_as_thread_0() {
        let private = TEST.subject(PRIVATE, &Params::default(), 3);
        assert_eq!(BUILT.load(Ordering::Relaxed), 3, "one instance per thread, built with the subject");
        run_cell(private.as_ref(), 3, RunPlan::new(2, 50));
        run_cell(private.as_ref(), 2, RunPlan::new(1, 50));
        assert_eq!(BUILT.load(Ordering::Relaxed), 3, "runs build nothing");
        let seen = SEEN.lock().unwrap();
        assert!(seen.iter().all(|(_, variant, thread, _)| variant == "ours" && *thread == 0), "{seen:?}");
        for id in 0..3 {
            let runs = seen.iter().filter(|s| s.0 == id).count();
            // Warm-up + 2 runs at 3 threads, then warm-up + 1 run at 2 for the first two.
            assert_eq!(runs, if id < 2 { 5 } else { 3 }, "instance {id}");
        }
    }
}
