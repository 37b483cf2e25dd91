//! Runs one benchmark cell — a (workload, variant, threads) triple — a number
//! of times, each run behind a real start barrier, after one warm-up run.
//!
//! A run spawns its threads, pins thread i to the i-th allowed CPU modulo
//! their number (as sysfs_benchmark pins thread i to CPU i % ncpu), lets
//! each do its untimed preparation (`Subject::prepare_thread`), waits
//! until all of them are parked on the barrier and releases them; its wall time runs from the first thread's
//! start to the last thread's end, as the threads themselves saw them.
//! Every thread does the same number of operations, so `ops_per_sec` is `threads * iterations / elapsed`
//! (the aggregate of all threads) and `per_op_ns` is `elapsed / iterations`
//! (the time one thread saw per operation, like sysfs_benchmark's "per").
//! Each thread also times itself from its release to its last operation:
//! those per-thread times give sysfs_benchmark's `concur:` lines, the
//! per-op time distribution of the report, and the fairness figures (a
//! thread that was starved finishes late).

use crate::stats::{Look, Summary};
use crate::workloads::Subject;
use serde::{Deserialize, Serialize};
use std::sync::Barrier;
use std::time::{Duration, Instant};

/// How many runs of how many iterations each thread does.
#[derive(Debug, Clone, Copy)]
pub struct RunPlan {
    /// Measured runs (the warm-up comes on top).
    pub runs: usize,
    /// Runs per cell that [`crate::bench::Cells::measure`] goes on to,
    /// `runs` more at a time, while a design's efficiency above 1 thread is
    /// undecided (equal to `runs`: none more). [`run_cells`] runs `runs`.
    pub max_runs: usize,
    /// Operations per thread per run.
    pub iterations: u64,
    /// Where set, a cell whose warm-up says a run of `iterations` would
    /// be shorter than this gets more iterations, so that each of its runs
    /// lasts about a fifth longer than it (cells already longer keep
    /// `iterations`).
    pub min_run: Option<Duration>,
}

impl RunPlan {
    /// `runs` runs of `iterations` operations per thread, of any length,
    /// and none more.
    pub fn new(runs: usize, iterations: u64) -> RunPlan {
        RunPlan { runs, max_runs: runs, iterations, min_run: None }
    }

    /// Operations per thread for a cell whose warm-up of `warm_up`
    /// operations per thread took `took`.
    fn iterations_after(&self, warm_up: u64, took: Duration) -> u64 {
        let Some(min_run) = self.min_run else { return self.iterations };
        let per_op = took.as_secs_f64().max(1e-9) / warm_up as f64;
        let wanted = (1.2 * min_run.as_secs_f64() / per_op).ceil() as u64;
        wanted.max(self.iterations)
    }
}

/// The measured runs of one cell.
#[derive(Debug, Clone)]
pub struct CellRuns {
    /// Threads that ran concurrently.
    pub threads: usize,
    /// Operations per thread per run.
    pub iterations: u64,
    /// Wall time of each measured run.
    pub elapsed: Vec<Duration>,
    /// CPU time the whole process spent in each measured run.
    pub cpu: Vec<CpuTime>,
    /// Per measured run, each thread's time from its release to its end.
    pub thread_elapsed: Vec<Vec<Duration>>,
}

/// User and system CPU time, from `getrusage(RUSAGE_SELF)`.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct CpuTime {
    /// Seconds in user mode.
    pub user: f64,
    /// Seconds in the kernel.
    pub system: f64,
}

impl CpuTime {
    /// The process's CPU time so far.
    pub fn now() -> CpuTime {
        // SAFETY: getrusage fills the zeroed struct we own.
        let usage = unsafe {
            let mut usage: libc::rusage = std::mem::zeroed();
            libc::getrusage(libc::RUSAGE_SELF, &mut usage);
            usage
        };
        let secs = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
        CpuTime { user: secs(usage.ru_utime), system: secs(usage.ru_stime) }
    }

    fn since(self, earlier: CpuTime) -> CpuTime {
        CpuTime { user: self.user - earlier.user, system: self.system - earlier.system }
    }
}

/// A cell's runs reduced to the figures the table and JSON report.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct CellStats {
    /// Aggregate operations per second over all threads.
    pub ops_per_sec: Summary,
    /// Wall nanoseconds per operation as one thread saw it.
    pub per_op_ns: Summary,
    /// Wall seconds per run.
    pub elapsed_s: Summary,
    /// User CPU seconds per run (all threads).
    pub cpu_user_s: Summary,
    /// System CPU seconds per run (all threads).
    pub cpu_system_s: Summary,
    /// The aggregate throughput of each measured run, in run order: the
    /// samples the verdicts rank.
    pub ops_per_sec_samples: Vec<f64>,
    /// Microseconds per operation of every thread of every run (thread-major
    /// within a run): the per-op time distribution.
    pub thread_per_op_us: Vec<f64>,
    /// How evenly the threads progressed.
    pub fairness: Fairness,
}

/// Per-thread throughput extremes over all measured runs. Every thread does
/// the same number of operations, so a starved thread shows up as a low rate.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Fairness {
    /// Lowest operations per second of any one thread in any run.
    pub min_thread_ops_per_sec: f64,
    /// Highest operations per second of any one thread in any run.
    pub max_thread_ops_per_sec: f64,
    /// Median over runs of (slowest thread's rate / fastest thread's rate):
    /// 1 is perfectly fair.
    pub min_over_max: f64,
}

impl CellRuns {
    /// Summaries of throughput and per-op time over the runs.
    pub fn stats(&self) -> CellStats {
        let total_ops = self.threads as f64 * self.iterations as f64;
        let secs: Vec<f64> = self.elapsed.iter().map(|d| d.as_secs_f64().max(1e-9)).collect();
        let ops: Vec<f64> = secs.iter().map(|s| total_ops / s).collect();
        let per_op: Vec<f64> = secs.iter().map(|s| s * 1e9 / self.iterations as f64).collect();
        let summary = |values: &[f64]| Summary::of(values).expect("runs >= 1 and finite times");
        let user: Vec<f64> = self.cpu.iter().map(|c| c.user).collect();
        let system: Vec<f64> = self.cpu.iter().map(|c| c.system).collect();
        let iterations = self.iterations as f64;
        let thread_secs = |run: &Vec<Duration>| -> Vec<f64> { run.iter().map(|d| d.as_secs_f64().max(1e-9)).collect() };
        let thread_per_op_us =
            self.thread_elapsed.iter().flat_map(thread_secs).map(|s| s * 1e6 / iterations).collect::<Vec<_>>();
        let rates: Vec<Vec<f64>> =
            self.thread_elapsed.iter().map(|run| thread_secs(run).iter().map(|s| iterations / s).collect()).collect();
        let all_rates = || rates.iter().flatten().copied();
        let ratios: Vec<f64> = rates
            .iter()
            .map(|run| run.iter().copied().fold(f64::INFINITY, f64::min) / run.iter().copied().fold(0.0, f64::max))
            .collect();
        CellStats {
            ops_per_sec: summary(&ops),
            per_op_ns: summary(&per_op),
            elapsed_s: summary(&secs),
            cpu_user_s: summary(&user),
            cpu_system_s: summary(&system),
            ops_per_sec_samples: ops,
            thread_per_op_us,
            fairness: Fairness {
                min_thread_ops_per_sec: all_rates().fold(f64::INFINITY, f64::min),
                max_thread_ops_per_sec: all_rates().fold(0.0, f64::max),
                min_over_max: crate::stats::median(&ratios).expect("runs >= 1"),
            },
        }
    }
}

/// Runs `subject` with `threads` threads: one warm-up run of a tenth of the
/// iterations, then `plan.runs` measured runs (tests' shorthand for one cell).
#[cfg(test)]
pub fn run_cell(subject: &dyn Subject, threads: usize, plan: RunPlan) -> CellRuns {
    run_cells(&[(subject, threads)], plan, |_, _| {}).pop().expect("one cell in, one out")
}

/// Runs several cells (a subject and a thread count each) in rounds: every
/// cell's warm-up run (a tenth of the iterations) first, then `plan.runs`
/// rounds in which each cell runs once, starting one cell later each round.
/// Interleaving spreads the drift of a shared machine (other tenants, clock
/// changes) over all cells alike instead of biasing whichever ran last.
/// `before_run(cell, run)` is called before every run; run 0 is the warm-up.
pub fn run_cells(
    cells: &[(&dyn Subject, usize)],
    plan: RunPlan,
    mut before_run: impl FnMut(usize, usize),
) -> Vec<CellRuns> {
    assert!(cells.iter().all(|&(_, t)| t > 0) && plan.runs > 0 && plan.iterations > 0, "validated by the caller");
    let warm_up = (plan.iterations / 10).max(1);
    let mut results: Vec<CellRuns> = Vec::with_capacity(cells.len());
    for (index, &(subject, threads)) in cells.iter().enumerate() {
        before_run(index, 0);
        let took = one_run(subject, threads, warm_up).elapsed;
        results.push(CellRuns {
            threads,
            iterations: plan.iterations_after(warm_up, took),
            elapsed: Vec::new(),
            cpu: Vec::new(),
            thread_elapsed: Vec::new(),
        });
    }
    more_rounds(cells, &mut results, plan.runs, before_run);
    results
}

/// Runs `rounds` more rounds of `cells`, whose runs so far are `results`
/// (in the order of `cells`, from [`run_cells`]): each cell once per
/// round with the iteration count it has, the rotation and run numbers
/// going on from where they stopped.
pub fn more_rounds(
    cells: &[(&dyn Subject, usize)],
    results: &mut [CellRuns],
    rounds: usize,
    mut before_run: impl FnMut(usize, usize),
) {
    assert_eq!(cells.len(), results.len(), "one result per cell");
    let done = results.iter().map(|r| r.elapsed.len()).min().unwrap_or(0);
    for round in done..done + rounds {
        for offset in 0..cells.len() {
            let index = (round + offset) % cells.len();
            let (subject, threads) = cells[index];
            before_run(index, round + 1);
            let run = one_run(subject, threads, results[index].iterations);
            let runs = &mut results[index];
            runs.elapsed.push(run.elapsed);
            runs.cpu.push(run.cpu);
            runs.thread_elapsed.push(run.threads);
        }
    }
}

/// How many more rounds a judgement that is `undecided` after `rounds`
/// runs under a cap of `max_runs`: `runs` at a time, or what is left
/// below the cap; none once it is decided or at the cap.
pub fn rounds_to_go(undecided: bool, rounds: usize, runs: usize, max_runs: usize) -> Option<usize> {
    (undecided && rounds < max_runs).then(|| runs.min(max_runs - rounds))
}

/// Judges `runs` (the first rounds of `cells`, from [`run_cells`]) as the
/// first look; then, while `wanted` asks more rounds of the judgement,
/// runs them ([`more_rounds`]) and judges all rounds again as a later
/// look.
pub fn until_decided<T>(
    cells: &[(&dyn Subject, usize)],
    mut runs: Vec<CellRuns>,
    mut before_run: impl FnMut(usize, usize),
    judge: impl Fn(&[CellRuns], Look) -> T,
    wanted: impl Fn(&T) -> Option<usize>,
) -> T {
    let mut judged = judge(&runs, Look::First);
    while let Some(rounds) = wanted(&judged) {
        more_rounds(cells, &mut runs, rounds, &mut before_run);
        judged = judge(&runs, Look::More);
    }
    judged
}

/// What one run measured.
struct OneRun {
    elapsed: Duration,
    cpu: CpuTime,
    threads: Vec<Duration>,
}

/// The CPUs this process may run on, in order.
fn allowed_cpus() -> Vec<usize> {
    // SAFETY: sched_getaffinity fills the zeroed set we own.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        if libc::sched_getaffinity(0, std::mem::size_of_val(&set), &mut set) != 0 {
            return Vec::new();
        }
        (0..libc::CPU_SETSIZE as usize).filter(|&c| libc::CPU_ISSET(c, &set)).collect()
    }
}

/// Pins the calling thread to `cpu`, as sysfs_benchmark pins thread i to
/// CPU i % ncpu; best effort (a refusal leaves it unpinned).
fn pin_to(cpu: usize) {
    // SAFETY: plain libc calls on a zeroed cpu_set_t we own.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        libc::CPU_SET(cpu, &mut set);
        libc::sched_setaffinity(0, std::mem::size_of_val(&set), &set);
    }
}

fn one_run(subject: &dyn Subject, threads: usize, iterations: u64) -> OneRun {
    // The releases earlier runs deferred (of any cell's filesystem) run
    // now, untimed: otherwise the threads of this run collect them, and a
    // 1-thread run after a 16-thread one pays for its garbage.
    vfscale::release_barrier(std::time::Duration::from_secs(2));
    subject.prepare_run(threads);
    // `prepared`: every thread has done its untimed preparation;
    // `barrier`: the run's clock starts.
    let (prepared, barrier) = (Barrier::new(threads + 1), Barrier::new(threads + 1));
    let cpus = allowed_cpus();
    std::thread::scope(|scope| {
        let workers: Vec<_> = (0..threads)
            .map(|thread| {
                let (prepared, barrier) = (&prepared, &barrier);
                let cpu = (!cpus.is_empty()).then(|| cpus[thread % cpus.len()]);
                let quiet = crate::host::Quiet::of_this_thread();
                scope.spawn(move || {
                    quiet.enter();
                    if let Some(cpu) = cpu {
                        pin_to(cpu);
                    }
                    subject.prepare_thread(thread, iterations);
                    prepared.wait();
                    barrier.wait();
                    let start = Instant::now();
                    subject.run_thread(thread, iterations);
                    (start, Instant::now())
                })
            })
            .collect();
        prepared.wait();
        // The workers are parked, so CPU time from here on is the run's; the
        // wall clock comes from the workers themselves, because on a busy
        // machine they may finish before this thread is scheduled again.
        let cpu_start = CpuTime::now();
        barrier.wait();
        let spans: Vec<(Instant, Instant)> = workers
            .into_iter()
            .map(|worker| worker.join().unwrap_or_else(|panic| std::panic::resume_unwind(panic)))
            .collect();
        let cpu = CpuTime::now().since(cpu_start);
        let first_start = spans.iter().map(|s| s.0).min().expect("threads > 0");
        let last_end = spans.iter().map(|s| s.1).max().expect("threads > 0");
        OneRun {
            elapsed: last_end - first_start,
            cpu,
            threads: spans.iter().map(|(start, end)| *end - *start).collect(),
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicU64, Ordering};

    struct Counting {
        ops: AtomicU64,
        runs: AtomicU64,
    }

    impl Subject for Counting {
        fn prepare_run(&self, _threads: usize) {
            self.runs.fetch_add(1, Ordering::Relaxed);
        }
        fn run_thread(&self, _thread: usize, iterations: u64) {
            self.ops.fetch_add(iterations, Ordering::Relaxed);
        }
    }

    #[test]
    fn every_thread_runs_every_iteration_plus_warmup() {
        let subject = Counting { ops: AtomicU64::new(0), runs: AtomicU64::new(0) };
        let runs = run_cell(&subject, 3, RunPlan::new(4, 100));
        assert_eq!(runs.elapsed.len(), 4);
        assert_eq!(runs.thread_elapsed.len(), 4);
        assert!(runs.thread_elapsed.iter().all(|run| run.len() == 3));
        // 3 threads x (10 warm-up + 4 x 100 measured).
        assert_eq!(subject.ops.load(Ordering::Relaxed), 3 * (10 + 400));
        assert_eq!(subject.runs.load(Ordering::Relaxed), 5);
    }

    /// More rounds run every cell again with the count it had (no second
    /// warm-up), go on with the run numbers, and keep the rotation: the
    /// cell that started round r is cell r mod the cells.
    #[test]
    fn more_rounds_go_on_where_the_rounds_stopped() {
        let subjects = [0, 1].map(|_| Counting { ops: AtomicU64::new(0), runs: AtomicU64::new(0) });
        let cells: [(&dyn Subject, usize); 2] = [(&subjects[0], 1), (&subjects[1], 2)];
        let mut starts = Vec::new();
        let mut results = run_cells(&cells, RunPlan::new(3, 100), |cell, run| starts.push((run, cell)));
        more_rounds(&cells, &mut results, 2, |cell, run| starts.push((run, cell)));
        assert!(results.iter().all(|r| r.elapsed.len() == 5 && r.iterations == 100), "five rounds of each cell");
        assert_eq!(subjects[1].ops.load(Ordering::Relaxed), 2 * (10 + 5 * 100), "one warm-up, five runs");
        let firsts: Vec<(usize, usize)> = starts.iter().copied().filter(|&(run, _)| run > 0).step_by(2).collect();
        assert_eq!(firsts, [(1, 0), (2, 1), (3, 0), (4, 1), (5, 0)], "(run, the cell that starts its round)");
    }

    #[test]
    fn a_minimum_run_raises_the_iterations_of_short_cells_only() {
        let plan = RunPlan { min_run: Some(Duration::from_millis(50)), ..RunPlan::new(1, 1000) };
        assert_eq!(plan.iterations_after(100, Duration::from_millis(1)), 6000, "10 us per op: 60 ms");
        assert_eq!(plan.iterations_after(100, Duration::from_millis(100)), 1000, "already long enough");
        assert_eq!(RunPlan::new(1, 1000).iterations_after(100, Duration::from_nanos(1)), 1000);
        let subject = Counting { ops: AtomicU64::new(0), runs: AtomicU64::new(0) };
        // A minute, so that no pause of a busy machine can make the warm-up
        // look long enough: the subject runs any number of iterations in
        // one step.
        let min_run = Some(Duration::from_secs(60));
        let runs = run_cell(&subject, 1, RunPlan { min_run, ..RunPlan::new(1, 10) });
        assert!(runs.iterations > 10, "ten counts take far less than a minute: {}", runs.iterations);
        assert_eq!(subject.ops.load(Ordering::Relaxed), 1 + runs.iterations, "the warm-up, then the raised run");
    }

    #[test]
    fn stats_follow_from_elapsed_times() {
        let runs = CellRuns {
            threads: 2,
            iterations: 1000,
            elapsed: vec![Duration::from_millis(1), Duration::from_millis(2)],
            cpu: vec![CpuTime { user: 0.5, system: 0.25 }, CpuTime { user: 1.5, system: 0.75 }],
            thread_elapsed: vec![
                vec![Duration::from_millis(1), Duration::from_micros(500)],
                vec![Duration::from_millis(2), Duration::from_millis(2)],
            ],
        };
        let stats = runs.stats();
        assert_eq!(stats.ops_per_sec.max, 2000.0 / 0.001);
        assert_eq!(stats.ops_per_sec.min, 2000.0 / 0.002);
        assert_eq!(stats.per_op_ns.min, 1000.0);
        assert_eq!(stats.per_op_ns.max, 2000.0);
        assert_eq!(stats.cpu_user_s.mean, 1.0);
        assert_eq!(stats.cpu_system_s.mean, 0.5);
        assert_eq!(stats.elapsed_s.max, 0.002);
        assert_eq!(stats.ops_per_sec_samples, vec![2000.0 / 0.001, 2000.0 / 0.002]);
        assert_eq!(stats.thread_per_op_us, vec![1.0, 0.5, 2.0, 2.0]);
        assert_eq!(stats.fairness.min_thread_ops_per_sec, 1000.0 / 0.002);
        assert_eq!(stats.fairness.max_thread_ops_per_sec, 1000.0 / 0.0005);
        // Run 1: 0.5 (one thread twice as fast); run 2: 1.0; median 0.75.
        assert_eq!(stats.fairness.min_over_max, 0.75);
    }

    #[test]
    fn cpu_time_grows_with_work() {
        let before = CpuTime::now();
        let mut x = 0u64;
        for i in 0..20_000_000u64 {
            x = std::hint::black_box(x.wrapping_add(i));
        }
        let spent = CpuTime::now().since(before);
        assert!(spent.user + spent.system > 0.0, "{spent:?}");
    }
}
