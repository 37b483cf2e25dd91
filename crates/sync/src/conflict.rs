//! The conflict checker: do two operations, run on two CPUs, share a cache
//! line that one of them writes? (sv6's conflict-freedom; `docs/design.md`,
//! "Conflict-free hot paths".)
//!
//! Invariant: both operations run on their own long-lived thread, each with
//! its own [virtual CPU](crate::cpu::with_virtual_cpu), so per-thread and
//! per-CPU state is set up by the warm-up and reused by the recorded runs,
//! as on a machine where the two run side by side; the recorded runs are
//! sequential, A then B and then B then A, so the verdict does not depend
//! on timing. Only what the [`audit`](crate::audit) sees is compared.

use crate::audit::{self, Conflict, Trace};
use std::sync::mpsc;

/// One side of a pair: runs the operation's `i`-th instance (a name or an
/// offset may depend on `i`, so repeated runs stay distinct), or says why
/// it could not.
pub type Op<'a> = &'a (dyn Fn(usize) -> Result<(), String> + Sync);

/// Instances each side runs before recording (the first may set up
/// per-thread state, the second shows what the steady state does).
pub const WARM_UPS: usize = 2;

/// Instances each side runs in all: the warm-ups, then one recorded in the
/// order A, B and one in the order B, A. Setups that prepare one object
/// per instance (a file to unlink) prepare this many.
pub const INSTANCES: usize = WARM_UPS + 2;

/// What the checker found for a pair.
#[derive(Debug, Clone)]
pub struct Verdict {
    /// Lines one side wrote and the other touched, in either order.
    pub conflicts: Vec<Conflict>,
    /// What A's recorded runs touched.
    pub a: Trace,
    /// What B's recorded runs touched.
    pub b: Trace,
}

impl Verdict {
    /// No line was written by one side and touched by the other.
    pub fn conflict_free(&self) -> bool {
        self.conflicts.is_empty()
    }
}

type Job<'a> = Box<dyn FnOnce() + Send + 'a>;

/// Runs `a` on virtual CPU 0 and `b` on virtual CPU 1 (see the module doc)
/// and compares what they touched. Fails when an instance fails.
pub fn check_pair<'o>(a: Op<'o>, b: Op<'o>) -> Result<Verdict, String> {
    std::thread::scope(|scope| {
        let spawn = |cpu: usize| {
            let (jobs, queue) = mpsc::channel::<Job<'o>>();
            scope.spawn(move || {
                crate::cpu::with_virtual_cpu(cpu, || {
                    for job in queue {
                        job();
                    }
                })
            });
            jobs
        };
        let workers = [spawn(0), spawn(1)];
        let run = |side: usize, op: Op<'o>, i: usize| -> Result<Trace, String> {
            let (reply, result) = mpsc::channel();
            let job: Job<'o> = Box::new(move || {
                let _ = reply.send(audit::record(|| op(i)));
            });
            workers[side].send(job).map_err(|_| "checker thread gone".to_string())?;
            let (outcome, trace) = result.recv().map_err(|_| format!("instance {i} panicked"))?;
            outcome.map(|()| trace).map_err(|e| format!("instance {i}: {e}"))
        };
        for i in 0..WARM_UPS {
            run(0, a, i)?;
            run(1, b, i)?;
        }
        let a_first = run(0, a, WARM_UPS)?;
        let b_second = run(1, b, WARM_UPS)?;
        let b_first = run(1, b, WARM_UPS + 1)?;
        let a_second = run(0, a, WARM_UPS + 1)?;
        let mut conflicts = a_first.conflicts(&b_second);
        for c in a_second.conflicts(&b_first) {
            match conflicts.iter_mut().find(|known| known.line == c.line) {
                Some(known) => {
                    known.sites.extend(c.sites);
                    known.sites.sort();
                    known.sites.dedup();
                }
                None => conflicts.push(c),
            }
        }
        let mut a_trace = a_first;
        a_trace.merge(a_second);
        let mut b_trace = b_first;
        b_trace.merge(b_second);
        Ok(Verdict { conflicts, a: a_trace, b: b_trace })
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::audited::{AtomicU64, Ordering};
    use crate::PercpuCounter;
    use crossbeam_utils::CachePadded;

    #[test]
    fn a_shared_counter_conflicts_and_a_per_cpu_one_does_not() {
        let shared = CachePadded::new(AtomicU64::new(0));
        let bump = |_: usize| {
            shared.fetch_add(1, Ordering::Relaxed);
            Ok(())
        };
        let verdict = check_pair(&bump, &bump).unwrap();
        assert_eq!(verdict.conflicts.len(), 1, "{:?}", verdict.conflicts);
        assert!(verdict.conflicts[0].sites.iter().any(|s| s.contains("conflict.rs")), "{:?}", verdict.conflicts);

        let percpu = PercpuCounter::new();
        let add = |_: usize| {
            percpu.add(1);
            Ok(())
        };
        let verdict = check_pair(&add, &add).unwrap();
        assert!(verdict.conflict_free(), "{:?}", verdict.conflicts);
        assert_eq!(verdict.a.written_lines(), 1, "its own slot");
    }

    #[test]
    fn a_failing_instance_is_reported() {
        let fine = |_: usize| Ok(());
        let fails_late = |i: usize| if i == WARM_UPS { Err("no space".to_string()) } else { Ok(()) };
        let err = check_pair(&fine, &fails_late).unwrap_err();
        assert!(err.contains("no space") && err.contains(&format!("instance {WARM_UPS}")), "{err}");
    }
}
