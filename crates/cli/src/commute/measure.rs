//! S2 of a pair: how much faster two threads running A and B side by
//! side are than one thread running A and B in turn.
//!
//! Each cell runs through the benchmark harness ([`crate::harness`]):
//! threads pinned to the first allowed CPUs, released by a barrier, a
//! warm-up run, then `runs` measured runs of all cells interleaved. Every
//! run starts from a fresh state, built untimed in `prepare_run`, which
//! also runs instance 0 of both operations (the state's warm-up). A run of
//! `n` iterations is then:
//!
//! - 1 thread: A(1), B(1), A(2), B(2), ... — `n` operations in all;
//! - 2 threads: thread 0 runs A(1..=n), thread 1 runs B(1..=n).
//!
//! Throughput is all threads' operations over the run's wall time, and
//! S2 is the median 2-thread throughput over the median 1-thread one.
//! Whether vfscale scales is judged by rounds: vfscale's S2 over
//! private's is its 2-thread throughput over private's (both share the
//! 1-thread cell), so each round gives one such ratio from two runs made
//! side by side; their median with its bootstrap 95% interval is
//! `vs_private`, and the pair scales (`met`) when the whole interval is at
//! least 0.9, does not (`not met`) when the whole interval is below 0.85
//! (0.9 less [`DRIFT`], the move between runs one run's rounds cannot
//! see), and is `inconclusive` otherwise. That cancels the drift between
//! rounds a shared machine shows, which a ratio of two medians does not.
//! A pair left inconclusive runs more rounds, `runs` at a time, up to
//! `max_runs` in all, until a look decides it; each later look judges the
//! median of all its rounds on the 99% interval ([`Look::More`]): at
//! the nominal levels, the default four looks call a pair at the bar met
//! at most 2.5% + 3 x 0.5% of the time (each look past four adds 0.5%),
//! where four looks at 95% could call it met up to 10% of the time.
//! The host's rounds are its own, so its S2 (round by round, with its
//! interval) is judged against 0.9 times private's S2, `not met` below
//! 0.85 times it.
//! `private` is the ceiling: its 2-thread runs give each thread a state
//! of its own (thread 0 runs A on one, thread 1 runs B on another); its
//! 1-thread run would be one state with A and B in turn, which is exactly
//! vfscale's 1-thread cell, so that cell serves both. `host` runs the same
//! calls on the host kernel; where a pair gives each side its own process,
//! each host thread first unshares its file table (timed: one syscall).

use super::host_sys::own_file_table;
use super::pairs::{Ops, Pair};
use super::plain;
use super::world::World;
use crate::harness::{rounds_to_go, run_cells, until_decided, CellRuns, RunPlan};
use crate::stats::{Bound, Judgement, Look, RoundRatio};
use crate::workloads::Subject;
use serde::Serialize;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Mutex, RwLock};
use std::time::Duration;
use vfscale_sync::poison::unpoisoned;

/// Where a cell's state lives.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Target {
    /// One vfscale state for both threads.
    Vfscale,
    /// One vfscale state per thread.
    Private,
    /// The host kernel.
    Host,
}

/// The S2 of one pair on one target.
#[derive(Debug, Clone, Serialize)]
pub struct Scaling {
    /// Median 2-thread throughput over median 1-thread throughput.
    pub s2: f64,
    /// For vfscale and host: whether it scales like private, judged on
    /// the 95% interval, or on `ci99` after more rounds (vfscale:
    /// `vs_private` at least 0.9; host: its S2 at least 0.9 times
    /// private's).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub judgement: Option<Judgement>,
    /// `judgement` is `met`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub scales: Option<bool>,
    /// For vfscale: the median over rounds of its 2-thread throughput over
    /// private's in the same round (S2 over private's S2, by round).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub vs_private: Option<f64>,
    /// With `--against`: this run's own judgement, before it was combined
    /// with the earlier run's into `judgement`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub alone: Option<Judgement>,
    /// The 95% interval of `vs_private` (vfscale) or of S2 round by round
    /// (host).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ci95: Option<[f64; 2]>,
    /// For a pair that ran more rounds than the first `runs`: the 99%
    /// interval its judgement was made on.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ci99: Option<[f64; 2]>,
    /// Operations per thread per run.
    pub iterations: u64,
    /// Median operations per second, 1 thread.
    pub ops_per_sec_1: f64,
    /// Median operations per second, 2 threads (both together).
    pub ops_per_sec_2: f64,
    /// Each measured 1-thread run's operations per second.
    pub runs_1: Vec<f64>,
    /// Each measured 2-thread run's operations per second.
    pub runs_2: Vec<f64>,
}

impl Scaling {
    pub(super) fn of(one: &CellRuns, two: &CellRuns) -> Scaling {
        let iterations = one.iterations;
        let (one, two) = (one.stats(), two.stats());
        Scaling {
            s2: two.ops_per_sec.median / one.ops_per_sec.median,
            judgement: None,
            scales: None,
            vs_private: None,
            alone: None,
            ci95: None,
            ci99: None,
            iterations,
            ops_per_sec_1: one.ops_per_sec.median,
            ops_per_sec_2: two.ops_per_sec.median,
            runs_1: one.ops_per_sec_samples,
            runs_2: two.ops_per_sec_samples,
        }
    }

    /// This S2, round by round with its interval, judged against 0.9
    /// times the ceiling's, on the interval `look` judges on.
    pub(super) fn judged(self, ceiling: &Scaling, look: Look) -> Scaling {
        let cells = [&self.runs_2[..], &self.runs_1[..]];
        let estimate = RoundRatio::of_rounds(&cells, over);
        let judged_on = look.interval(estimate, &cells, over);
        self.with(estimate, look, judged_on, Bound::AtLeast(SCALES * ceiling.s2), DRIFT * ceiling.s2)
    }

    /// vfscale's S2 judged against the ceiling measured in the same rounds:
    /// by the median of the rounds' 2-thread ratios and the interval `look`
    /// judges on.
    pub(super) fn judged_by_round(mut self, ceiling: &Scaling, look: Look) -> Scaling {
        let cells = [&self.runs_2[..], &ceiling.runs_2[..]];
        let estimate = RoundRatio::of_rounds(&cells, over);
        let judged_on = look.interval(estimate, &cells, over);
        self.vs_private = estimate.map(|r| r.median);
        self.with(estimate, look, judged_on, Bound::AtLeast(SCALES), DRIFT)
    }

    /// Records `estimate`'s 95% interval and the judgement of the interval
    /// `look` judges on (that same interval at the first look; after more
    /// rounds the 99% one, recorded as `ci99`).
    fn with(
        mut self,
        estimate: Option<RoundRatio>,
        look: Look,
        judged_on: Option<[f64; 2]>,
        bar: Bound,
        margin: f64,
    ) -> Scaling {
        let judgement = judged_on.map(|interval| bar.judge_clear_of(interval, margin));
        self.ci95 = estimate.map(|e| e.ci95);
        self.ci99 = judged_on.filter(|_| look == Look::More);
        self.judgement = judgement;
        self.scales = judgement.map(|j| j == Judgement::Met);
        self
    }

    /// How many more rounds this pair runs under `plan`: none once a look
    /// decided it or it ran `plan.max_runs`; otherwise `plan.runs`, or what
    /// is left below the cap.
    pub(super) fn more_rounds_wanted(&self, plan: Plan) -> Option<usize> {
        let undecided = self.judgement == Some(Judgement::Inconclusive);
        rounds_to_go(undecided, self.rounds(), plan.runs, plan.max_runs)
    }

    /// Measured rounds: runs of each of its cells.
    pub fn rounds(&self) -> usize {
        self.runs_1.len().min(self.runs_2.len())
    }
}

/// A round's first cell over its second.
fn over(round: &[f64]) -> f64 {
    round[0] / round[1]
}

/// The rule: a pair scales when its S2 is at least this share of
/// the S2 of `private`.
pub const SCALES: f64 = 0.9;

/// How far below the bar (as a share of private's S2) a pair's whole
/// interval must lie for it to be called not scaling; above that it is
/// inconclusive. Two runs of one machine put a pair's figure up to about
/// 0.1 apart, while a run's own interval sees only its rounds (see
/// docs/results/verdicts-back-to-back-2026-12-03.md): half that keeps a pair
/// whose interval ends just below 0.9 from being not met in one run and
/// undecided in the next.
pub const DRIFT: f64 = 0.05;

/// A pair's three S2 figures, measured in one set of interleaved runs.
#[derive(Debug, Clone)]
pub struct Measured {
    /// One shared vfscale state.
    pub vfscale: Scaling,
    /// One vfscale state per thread: the ceiling.
    pub private: Scaling,
    /// The host kernel, or why it did not run.
    pub host: Result<Scaling, String>,
}

/// How long and how often each cell runs.
#[derive(Debug, Clone, Copy)]
pub struct Plan {
    /// Measured runs per cell, after one warm-up run.
    pub runs: usize,
    /// Runs per cell a pair left inconclusive goes on to, `runs` more at
    /// a time (equal to `runs`: none more).
    pub max_runs: usize,
    /// Operations per thread per run; `None` calibrates them per pair and
    /// target so that a 1-thread run takes about `run_time`.
    pub iterations: Option<u64>,
    /// What a calibrated 1-thread run should take.
    pub run_time: Duration,
}

/// Operations of each calibration run.
const CALIBRATION_OPS: u64 = 1024;

/// Calibration runs, after one warm-up run; the fastest sets the count.
const CALIBRATION_PROBES: usize = 3;

/// Bounds of a calibrated iteration count: enough operations to time, and
/// few enough instances to prepare.
const ITERATIONS: std::ops::RangeInclusive<u64> = 200..=200_000;

/// Measures `pair`; `before_run(cell, run)` is called before every run.
/// The vfscale cells (1 and 2 threads, private) run interleaved, then the
/// host's two. Fails when a vfscale operation fails (a host failure only
/// leaves the host out).
pub fn measure(pair: &Pair, plan: Plan, mut before_run: impl FnMut(usize, usize)) -> Result<Measured, String> {
    let iterations = calibrate(pair, Target::Vfscale, plan).map_err(|e| format!("{}: {e}", pair.name))?;
    let run_plan = RunPlan::new(plan.runs, iterations);
    let vfscale = PairSubject::new(pair, Target::Vfscale, iterations);
    let private = PairSubject::new(pair, Target::Private, iterations);
    let cells: [(&dyn Subject, usize); 3] = [(&vfscale, 1), (&vfscale, 2), (&private, 2)];
    let runs = run_cells(&cells, run_plan, &mut before_run);
    let judge = |runs: &[CellRuns], look| -> Result<(Scaling, Scaling), String> {
        for subject in [&vfscale, &private] {
            subject.failure().map_or(Ok(()), |e| Err(format!("{}: {e}", pair.name)))?;
        }
        let private_s2 = Scaling::of(&runs[0], &runs[2]);
        Ok((Scaling::of(&runs[0], &runs[1]).judged_by_round(&private_s2, look), private_s2))
    };
    let wanted = |judged: &Result<(Scaling, Scaling), String>| judged.as_ref().ok()?.0.more_rounds_wanted(plan);
    let (vfscale_s2, private_s2) = until_decided(&cells, runs, &mut before_run, judge, wanted)?;
    let host = World::host(pair.fs).map(drop).and_then(|()| {
        let iterations = calibrate(pair, Target::Host, plan)?;
        let host = PairSubject::new(pair, Target::Host, iterations);
        let cells: [(&dyn Subject, usize); 2] = [(&host, 1), (&host, 2)];
        let runs = run_cells(&cells, RunPlan::new(plan.runs, iterations), &mut before_run);
        let judge = |runs: &[CellRuns], look| -> Result<Scaling, String> {
            host.failure().map_or(Ok(()), Err)?;
            Ok(Scaling::of(&runs[0], &runs[1]).judged(&private_s2, look))
        };
        until_decided(&cells, runs, &mut before_run, judge, |judged| judged.as_ref().ok()?.more_rounds_wanted(plan))
    });
    Ok(Measured { vfscale: vfscale_s2, private: private_s2, host })
}

/// `plan`'s iteration count, or one calibrated by short 1-thread runs on
/// `target` (its threads' own time, without their start).
fn calibrate(pair: &Pair, target: Target, plan: Plan) -> Result<u64, String> {
    if let Some(n) = plan.iterations {
        return Ok(n);
    }
    let probe = PairSubject::new(pair, target, CALIBRATION_OPS);
    let runs = run_cells(&[(&probe, 1)], RunPlan::new(CALIBRATION_PROBES, CALIBRATION_OPS), |_, _| {});
    probe.failure().map_or(Ok(()), Err)?;
    Ok(calibrated(plan.run_time, runs[0].thread_elapsed.iter().map(|run| run[0])))
}

/// The operations a run of `run_time` holds, by the fastest of calibration
/// runs of [`CALIBRATION_OPS`] that took `probes`. Not the first alone: a
/// process's first runs fault its heap's pages in, and a first
/// `create-one-dir` probe that ran some ten times slower than the runs
/// after it made them 2.4 ms long instead of about 20 ms, too short to
/// see past the machine's noise.
fn calibrated(run_time: Duration, probes: impl Iterator<Item = Duration>) -> u64 {
    let fastest = probes.min().expect("the harness makes at least one run").as_secs_f64().max(1e-9);
    let wanted = run_time.as_secs_f64() / (fastest / CALIBRATION_OPS as f64);
    (wanted as u64).clamp(*ITERATIONS.start(), *ITERATIONS.end())
}

/// A pair on one target, as the harness runs it.
struct PairSubject<'p> {
    pair: &'p Pair,
    target: Target,
    /// Instances each state prepares per side.
    instances: usize,
    /// The states of the current run: one, or one per thread.
    states: RwLock<Vec<Ops>>,
    /// Threads of the current run.
    threads: AtomicUsize,
    /// The first failure; the subject does nothing once it is set.
    failure: Mutex<Option<String>>,
}

impl<'p> PairSubject<'p> {
    /// The subject of runs of up to `iterations` operations per thread.
    fn new(pair: &'p Pair, target: Target, iterations: u64) -> PairSubject<'p> {
        PairSubject {
            pair,
            target,
            instances: iterations as usize + 1,
            states: RwLock::default(),
            threads: AtomicUsize::new(1),
            failure: Mutex::default(),
        }
    }

    fn failure(&self) -> Option<String> {
        unpoisoned(self.failure.lock()).clone()
    }

    fn fail(&self, error: String) {
        unpoisoned(self.failure.lock()).get_or_insert(error);
    }

    /// A fresh state, warmed up by instance 0 of both sides.
    fn state(&self) -> Result<Ops, String> {
        let world = match self.target {
            Target::Vfscale | Target::Private => plain::world(self.pair.fs)?,
            Target::Host => World::host(self.pair.fs)?,
        };
        let ops = (self.pair.build)(&world, self.instances)?;
        (ops.a)(0)?;
        (ops.b)(0)?;
        Ok(ops)
    }

    /// Thread `thread`'s share of a run of `threads` threads.
    fn run(&self, states: &[Ops], threads: usize, thread: usize, iterations: usize) -> Result<(), String> {
        if self.target == Target::Host && states[0].own_file_tables {
            own_file_table()?;
        }
        if threads == 1 {
            let ops = &states[0];
            for k in 0..iterations {
                let i = k / 2 + 1;
                if k % 2 == 0 {
                    (ops.a)(i)?;
                } else {
                    (ops.b)(i)?;
                }
            }
        } else {
            let ops = &states[thread.min(states.len() - 1)];
            let op = if thread == 0 { &ops.a } else { &ops.b };
            for i in 1..=iterations {
                op(i)?;
            }
        }
        Ok(())
    }
}

impl Subject for PairSubject<'_> {
    fn prepare_run(&self, threads: usize) {
        let mut states = unpoisoned(self.states.write());
        states.clear();
        // What the last run's states deferred is released now, untimed.
        plain::release_barrier();
        self.threads.store(threads, Ordering::Relaxed);
        if self.failure().is_some() {
            return;
        }
        let count = if self.target == Target::Private { threads } else { 1 };
        for _ in 0..count {
            match self.state() {
                Ok(ops) => states.push(ops),
                Err(e) => {
                    states.clear();
                    return self.fail(e);
                }
            }
        }
    }

    fn run_thread(&self, thread: usize, iterations: u64) {
        let states = unpoisoned(self.states.read());
        if states.is_empty() {
            return;
        }
        let threads = self.threads.load(Ordering::Relaxed);
        if let Err(e) = self.run(&states, threads, thread, iterations as usize) {
            self.fail(e);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_fastest_calibration_run_sets_the_count() {
        let ms = Duration::from_millis;
        let run_time = ms(20);
        // A cold first run ten times slower than the warm ones after it.
        let probes = [ms(10), ms(1), Duration::from_micros(1100)];
        assert_eq!(calibrated(run_time, probes.into_iter()), 20 * CALIBRATION_OPS);
        assert_eq!(calibrated(run_time, probes.into_iter().rev()), 20 * CALIBRATION_OPS, "in any order");
        assert_eq!(calibrated(run_time, [ms(1000)].into_iter()), *ITERATIONS.start(), "too slow: the floor");
        assert_eq!(calibrated(run_time, [Duration::ZERO].into_iter()), *ITERATIONS.end(), "too fast: the cap");
    }
}
