//! `vfscale reproduce`: the five seed experiments, each on vfscale's
//! in-memory VFS with the seed's "before" and "after" designs (and ours
//! where it differs) side by side at 1, 2 and 16 threads, and the same
//! workload against the host kernel beside them.
//!
//! An experiment is a list of [`Case`]s, each naming the vfscale workload
//! it needs. A case whose workload is not registered yet runs its stand-in
//! (the closest existing workload) or only the host driver, with a one-line
//! note; adding the workload to `workloads::all()` makes the case run it
//! with no change here. Every before/after pair gets a [`Comparison`] per
//! thread count: the throughput ratio, its bootstrap interval, and a
//! Mann–Whitney verdict.
//!
//! Every workload also runs its `private` variant in the same rounds: the
//! machine's ceiling, against which each design's efficiency is given. It
//! is a reference, never half of a verdict pair.

use crate::bench::{self, efficiency_line, BenchRequest, CellReport, Cells, FIGURE_TOLERANCE, SCALES};
use crate::calibration::Calibration;
use crate::harness::RunPlan;
use crate::host;
use crate::machine::Machine;
use crate::stats::{self, Comparison, Judgement};
use crate::workloads::{self, Params, Workload, PRIVATE};
use serde::{Deserialize, Serialize};
use std::fmt::Write as _;

/// How an experiment's results are printed besides the common table: in
/// the shape the seed thread used.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    /// sysfs_benchmark's `single:` / `concur:` / `times:` lines (seed 000).
    Sysfs,
    /// "Elapsed Time / System Time" per variant (seed 001).
    ElapsedSystem,
    /// The common table only (seeds 002 and 003).
    Table,
    /// lockperf's mean / variance / sigma / max / min per test (seed 004).
    Lockperf,
}

/// One workload of an experiment.
#[derive(Debug, Clone, Copy)]
pub struct Case {
    /// The vfscale workload (and host driver) the seed's test maps to.
    pub workload: &'static str,
    /// Runs instead while `workload` is not registered.
    pub stand_in: Option<&'static str>,
    /// `--hold-us` (and `--work-us`), for workloads that take it.
    pub hold_us: Option<u64>,
    /// Whether the host driver of the same name runs too.
    pub host: bool,
    /// (before, after) variant pairs to judge; those naming a variant the
    /// workload lacks (or `private`, which is the ceiling, not a design)
    /// are dropped, and when none is left the workload's
    /// second variant (the "before" design) is judged against its first
    /// (ours).
    pub pairs: &'static [(&'static str, &'static str)],
}

impl Case {
    const fn new(workload: &'static str) -> Case {
        Case { workload, stand_in: None, hold_us: None, host: true, pairs: &[] }
    }

    const fn stand_in(self, stand_in: &'static str) -> Case {
        Case { stand_in: Some(stand_in), ..self }
    }
}

/// A seed experiment.
#[derive(Debug)]
pub struct Experiment {
    /// Name on the command line.
    pub name: &'static str,
    /// Seed number ("000".."004").
    pub seed: &'static str,
    /// What changed in the kernel.
    pub title: &'static str,
    /// What the seed measured, and what it found.
    pub claim: &'static str,
    /// Seed-shaped output.
    pub format: Format,
    /// The workloads, in order.
    pub cases: &'static [Case],
}

/// Seed 000: the 5.15 design against the mutex, then ours against 5.15.
const KERNFS_PAIRS: &[(&str, &str)] = &[("before", "rwsem"), ("rwsem", "rcu")];

/// Seed 004: lglock on arch spinlocks (4.0-rc3) against lglock-v0 on queued
/// spinlocks, then ours against 4.0-rc3.
const LOCK_PAIRS: &[(&str, &str)] = &[("lglock-tas", "lglock-queued"), ("lglock-tas", "percpu-rwsem")];

/// The five seed experiments.
pub const EXPERIMENTS: [Experiment; 5] = [
    Experiment {
        name: "kernfs",
        seed: "000",
        title: "kernfs: a rwsem and cached negative dentries instead of one kernfs_mutex (Linux 5.15)",
        claim: "sysfs_benchmark, 16 CPUs: open+read+close 89-95 us -> 21 us per op; missing path 80 -> 23 us",
        format: Format::Sysfs,
        cases: &[
            Case { pairs: KERNFS_PAIRS, ..Case::new("kernfs-files").stand_in("walk") },
            Case { pairs: KERNFS_PAIRS, ..Case::new("kernfs-missing").stand_in("walk-missing") },
        ],
    },
    Experiment {
        name: "inode-list",
        seed: "001",
        title: "per-CPU (dlock) lists for the superblock inode list (Waiman Long, 2016)",
        claim: "exit microbenchmark, 80 threads: 65.29 s -> 22.81 s elapsed, 82m14s -> 23m03s system time",
        format: Format::ElapsedSystem,
        // Beside the exit benchmark (each thread its own directory), its
        // files in ONE shared directory, created and unlinked apart
        // (FxMark's MWCM and MWUM).
        cases: &[Case::new("inode-exit"), Case::new("dir-create"), Case::new("dir-unlink")],
    },
    Experiment {
        name: "rwsem",
        seed: "002",
        title: "rwsem optimistic spinning (3.16) under long mmap_sem holds",
        claim: "xfs_repair with mprotect storms: 4-5x slower with spinning, 83% of time in osq_lock",
        format: Format::Table,
        cases: &[
            Case { hold_us: Some(1), pairs: &[("block", "spin"), ("spin", "adaptive")], ..Case::new("prim-mprotect") },
            Case {
                hold_us: Some(100),
                host: false,
                pairs: &[("block", "spin"), ("spin", "adaptive")],
                ..Case::new("prim-mprotect")
            },
        ],
    },
    Experiment {
        name: "proc",
        seed: "003",
        title: "/proc pid_revalidate in RCU walk mode (Linux 5.16)",
        claim: "128 parallel `ps -fe` on 128 CPUs: %sys 97% -> 85%, 3-4x more ps runs per unit time",
        format: Format::Table,
        cases: &[Case::new("proc-ps").stand_in("prim-lockref")],
    },
    Experiment {
        name: "locks",
        seed: "004",
        title: "file_lock_list under an lglock / narrower blocked_lock_lock (Linux 4.0)",
        claim: "lockperf flock/posix/lease tests: no convincing difference (\"not really convincing numbers\")",
        format: Format::Lockperf,
        cases: &[
            Case { pairs: LOCK_PAIRS, ..Case::new("flock01") }.stand_in("prim-read"),
            Case { pairs: LOCK_PAIRS, ..Case::new("flock02") },
            Case { pairs: LOCK_PAIRS, ..Case::new("posix01") },
            Case { pairs: LOCK_PAIRS, ..Case::new("posix02") },
            Case { pairs: LOCK_PAIRS, ..Case::new("posix03") },
            Case { pairs: LOCK_PAIRS, ..Case::new("posix04") },
            Case { pairs: LOCK_PAIRS, ..Case::new("lease01") },
            Case { pairs: LOCK_PAIRS, ..Case::new("lease02") },
        ],
    },
];

/// The experiment called `name`.
pub fn find(name: &str) -> Option<&'static Experiment> {
    EXPERIMENTS.iter().find(|e| e.name == name)
}

/// How much to run.
#[derive(Debug, Clone)]
pub struct Options {
    /// Fewer runs and a fifth of the iterations.
    pub quick: bool,
    /// Thread counts of every case.
    pub threads: Vec<usize>,
    /// Runs per cell a case goes on to while a design's efficiency above
    /// 1 thread is inconclusive ([`RunPlan::max_runs`]); `None`: none more.
    pub max_runs: Option<usize>,
}

impl Options {
    /// Measured runs per cell. Four is the fewest with which a complete
    /// separation of two cells is significant (exact p = 2/70).
    pub fn runs(&self) -> usize {
        if self.quick {
            4
        } else {
            5
        }
    }

    /// Runs per cell a case may go on to: `max_runs`, or [`Options::runs`].
    pub fn max_runs(&self) -> usize {
        self.max_runs.unwrap_or_else(|| self.runs())
    }

    fn iterations(&self, default: u64) -> u64 {
        (default / if self.quick { 5 } else { 1 }).max(10)
    }
}

/// A before/after judgement of one pair at one thread count.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PairVerdict {
    /// Workload whose variants are compared.
    pub workload: String,
    /// Its `--hold-us`, if it takes one.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub hold_us: Option<u64>,
    /// Threads of both cells.
    pub threads: usize,
    /// The "before" variant.
    pub before: String,
    /// The "after" variant.
    pub after: String,
    /// Ratio, interval, rank test and verdict.
    #[serde(flatten)]
    pub comparison: Comparison,
}

/// The results of one case.
#[derive(Debug, Clone, Serialize)]
pub struct CaseResult {
    /// The workload the case asks for.
    pub workload: &'static str,
    /// The vfscale workload that ran (the stand-in, or none).
    pub vfs_workload: Option<&'static str>,
    /// `--hold-us`, if the workload takes it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub hold_us: Option<u64>,
    /// Iterations per thread of the vfscale cells.
    pub iterations: Option<u64>,
    /// Iterations per thread of the host cells.
    pub host_iterations: Option<u64>,
    /// Every cell, vfscale variants first, then the host.
    pub cells: Vec<CellReport>,
    /// Every pair at every thread count.
    pub verdicts: Vec<PairVerdict>,
}

/// The results of one experiment.
#[derive(Debug, Clone, Serialize)]
pub struct ExperimentResult {
    /// Experiment name.
    pub name: &'static str,
    /// Seed number.
    pub seed: &'static str,
    /// What changed in the kernel.
    pub title: &'static str,
    /// What the seed found.
    pub claim: &'static str,
    /// Stand-ins, skips and other remarks, one line each.
    pub notes: Vec<String>,
    /// One per case.
    pub cases: Vec<CaseResult>,
}

/// A whole reproduction, as `--json` writes it.
#[derive(Debug, Clone, Serialize)]
pub struct Reproduction {
    /// The vfscale version that ran.
    pub vfscale_version: &'static str,
    /// Where it ran.
    pub machine: Machine,
    /// Whether `--quick` was given.
    pub quick: bool,
    /// Measured runs per cell.
    pub runs: usize,
    /// Runs per cell a case could go on to while an efficiency was
    /// inconclusive (equal to `runs`: none more).
    pub max_runs: usize,
    /// Thread counts.
    pub threads: Vec<usize>,
    /// The machine's ceiling outside the process's shared state.
    pub calibration: Calibration,
    /// One per experiment run.
    pub experiments: Vec<ExperimentResult>,
}

/// A case resolved against the registered workloads.
struct Plan {
    vfs: Option<&'static Workload>,
    host: Option<&'static host::HostWorkload>,
    notes: Vec<String>,
}

impl Plan {
    fn resolve(case: &Case) -> Plan {
        let mut notes = Vec::new();
        let vfs = workloads::find(case.workload).or_else(|| {
            let stand_in = case.stand_in.and_then(workloads::find);
            notes.push(match stand_in {
                Some(s) => format!(
                    "{} is not a vfscale workload yet: running its stand-in `{}` ({})",
                    case.workload, s.name, s.about
                ),
                None => format!("{} is not a vfscale workload yet: host kernel only", case.workload),
            });
            stand_in
        });
        let host = if case.host { host::find(case.workload) } else { None };
        Plan { vfs, host, notes }
    }

    fn cells(&self, threads: usize) -> usize {
        (self.vfs.map_or(0, |w| w.all_variants().len()) + usize::from(self.host.is_some())) * threads
    }
}

/// The shortest a lock workload's run may be in a full reproduce (each
/// cell's warm-up sizes its runs; see `RunPlan::min_run`): shorter runs of
/// these 0.2-1 us operations swing with every scheduler tick and
/// frequency change (one machine measured lease01 at 0.53-2.14 M ops/s
/// over five runs of 25 ms).
pub const MIN_LOCK_RUN: std::time::Duration = std::time::Duration::from_millis(50);

/// The number of runs, warm-ups included, that `run` will report to its
/// `progress` callback as planned (for the progress bar); more rounds come
/// on top.
pub fn run_count(experiments: &[&Experiment], options: &Options) -> usize {
    let cells: usize =
        experiments.iter().flat_map(|e| e.cases).map(|c| Plan::resolve(c).cells(options.threads.len())).sum();
    cells * (options.runs() + 1)
}

/// Runs one experiment; `progress` is told about each run (warm-ups too)
/// before it starts, and whether it is one of the planned runs
/// ([`run_count`]) or of the more rounds a case took beyond them.
pub fn run(experiment: &Experiment, options: &Options, progress: &mut dyn FnMut(&str, Planned)) -> ExperimentResult {
    let mut notes = Vec::new();
    let mut cases = Vec::new();
    let runs = options.runs();
    for case in experiment.cases {
        let plan = Plan::resolve(case);
        notes.extend(plan.notes.iter().cloned());
        let params = case.hold_us.map_or_else(Params::default, |h| Params { hold_us: h, work_us: h });
        let mut result = CaseResult {
            workload: case.workload,
            vfs_workload: plan.vfs.map(|w| w.name),
            hold_us: case.hold_us,
            iterations: None,
            host_iterations: None,
            cells: Vec::new(),
            verdicts: Vec::new(),
        };
        if let Some(workload) = plan.vfs {
            let iterations = options.iterations((workload.default_iterations)(&params));
            result.iterations = Some(iterations);
            let lock_workload = workloads::locks::NAMES.contains(&workload.name);
            let min_run = (lock_workload && !options.quick).then_some(MIN_LOCK_RUN);
            let request = BenchRequest {
                workload,
                variants: workload.all_variants(),
                threads: options.threads.clone(),
                plan: RunPlan { min_run, max_runs: options.max_runs(), ..RunPlan::new(runs, iterations) },
                params,
            };
            result.cells.extend(request.run(|v: &str, t: usize, run: usize| {
                let planned = if run <= runs { Planned::Yes } else { Planned::No };
                progress(&format!("[{}] {} {v} x{t}", experiment.name, workload.name), planned)
            }));
            result.verdicts = judge(workload, case, &result.cells);
        }
        if let Some(driver) = plan.host {
            let iterations = options.iterations(driver.default_iterations);
            let outcome = driver.probe().and_then(|built| {
                let cells = Cells { workload: driver.name, hold: None, note: built.note };
                let subjects = [(host::VARIANT, built.subject.as_ref())];
                let mut tell = |_: &str, t: usize, _: usize| {
                    progress(&format!("[{}] host {} x{t}", experiment.name, driver.name), Planned::Yes)
                };
                host::quietly(|| cells.measure(&subjects, &options.threads, RunPlan::new(runs, iterations), &mut tell))
            });
            match outcome {
                Ok(cells) => {
                    result.host_iterations = Some(iterations);
                    result.cells.extend(cells);
                }
                Err(reason) => {
                    // Keep the progress bar honest about the runs skipped.
                    for &t in &options.threads {
                        for _ in 0..=runs {
                            progress(
                                &format!("[{}] host {} x{t} (skipped)", experiment.name, driver.name),
                                Planned::Yes,
                            );
                        }
                    }
                    notes.push(format!("host {}: skipped: {reason}", driver.name));
                }
            }
        }
        cases.push(result);
    }
    ExperimentResult {
        name: experiment.name,
        seed: experiment.seed,
        title: experiment.title,
        claim: experiment.claim,
        notes,
        cases,
    }
}

/// Whether a run `run` reports is one [`run_count`] counted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Planned {
    /// A warm-up or one of the planned runs.
    Yes,
    /// A run of the more rounds a case took while an efficiency was
    /// inconclusive.
    No,
}

/// The (before, after) pairs judged for `workload` in `case`: designs only,
/// never `private`.
fn pairs(workload: &Workload, case: &Case) -> Vec<(&'static str, &'static str)> {
    let has = |v: &str| v != PRIVATE && workload.variants.contains(&v);
    let listed: Vec<_> = case.pairs.iter().copied().filter(|(b, a)| has(b) && has(a)).collect();
    match (listed.is_empty(), workload.variants) {
        (false, _) => listed,
        (true, [ours, before, ..]) => vec![(*before, *ours)],
        (true, _) => Vec::new(),
    }
}

fn judge(workload: &Workload, case: &Case, cells: &[CellReport]) -> Vec<PairVerdict> {
    let cell = |variant: &str, threads: usize| cells.iter().find(|c| c.variant == variant && c.threads == threads);
    let mut verdicts = Vec::new();
    for (before, after) in pairs(workload, case) {
        for threads in cells.iter().map(|c| c.threads).collect::<std::collections::BTreeSet<_>>() {
            let (Some(b), Some(a)) = (cell(before, threads), cell(after, threads)) else { continue };
            if let Some(comparison) = stats::compare(&b.stats.ops_per_sec_samples, &a.stats.ops_per_sec_samples) {
                verdicts.push(PairVerdict {
                    workload: workload.name.to_string(),
                    hold_us: a.hold_us,
                    threads,
                    before: before.to_string(),
                    after: after.to_string(),
                    comparison,
                });
            }
        }
    }
    verdicts
}

/// One verdict as a line: "x16  rcu vs ref: 4.10x [3.90, 4.31] faster (p = 0.002)".
pub fn verdict_line(v: &PairVerdict) -> String {
    let c = &v.comparison;
    format!(
        "x{:<3} {} vs {}: {:.2}x [{:.2}, {:.2}] {} (p = {:.3}{})",
        v.threads,
        v.after,
        v.before,
        c.ratio,
        c.ratio_ci95[0],
        c.ratio_ci95[1],
        c.verdict,
        c.rank_test.p_value,
        if c.rank_test.exact { ", exact" } else { "" }
    )
}

/// The text of one experiment: notes, seed-shaped blocks, the common
/// table, and the verdicts.
pub fn render(experiment: &Experiment, result: &ExperimentResult, options: &Options) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "\n== {} (seed {}): {} ==", result.name, result.seed, result.title);
    let _ = writeln!(out, "seed: {}", result.claim);
    for note in &result.notes {
        let _ = writeln!(out, "note: {note}");
    }
    for case in &result.cases {
        if case.cells.is_empty() {
            continue;
        }
        let name = match case.vfs_workload {
            Some(w) if w != case.workload => format!("{} (vfscale stand-in: {w})", case.workload),
            _ => case.workload.to_string(),
        };
        let hold = case.hold_us.map_or(String::new(), |h| format!(", hold {h} us, work {h} us"));
        let iterations = [
            case.iterations.map(|i| {
                let raised = case.cells.iter().any(|c| c.variant != host::VARIANT && c.iterations > i);
                let more =
                    if raised { format!(" (more where a run would be under {MIN_LOCK_RUN:?})") } else { String::new() };
                format!("{i} iterations per thread{more}")
            }),
            case.host_iterations.map(|i| format!("host {i}")),
        ]
        .into_iter()
        .flatten()
        .collect::<Vec<_>>()
        .join(", ");
        let _ = writeln!(out, "\n-- {name}: {iterations}, {} runs per cell after a warm-up{hold} --", options.runs());
        match experiment.format {
            Format::Sysfs => out.push_str(&sysfs_lines(&case.cells)),
            Format::ElapsedSystem => out.push_str(&elapsed_system(&case.cells)),
            Format::Lockperf => out.push_str(&lockperf(&case.cells)),
            Format::Table => {}
        }
        out.push_str(&bench::table(&case.cells));
        if let Some(line) = bench::more_rounds_line(&case.cells, options.runs(), options.max_runs()) {
            let _ = writeln!(out, "{line}");
        }
        for cell in case.cells.iter().filter(|c| c.threads == 1) {
            if let Some(note) = &cell.note {
                let _ = writeln!(out, "note: {} {}: {note}", cell.workload, cell.variant);
            }
        }
        if !case.verdicts.is_empty() {
            let _ = writeln!(out, "verdicts (throughput, after vs before; bootstrap 95% CI; Mann-Whitney U at 95%):");
            for v in &case.verdicts {
                let _ = writeln!(out, "  {} {}", v.workload, verdict_line(v));
            }
        }
    }
    out
}

/// The index of the median run of a cell (by throughput).
fn median_run(cell: &CellReport) -> usize {
    let samples = &cell.stats.ops_per_sec_samples;
    let mut order: Vec<usize> = (0..samples.len()).collect();
    order.sort_by(|&a, &b| samples[a].total_cmp(&samples[b]));
    order[order.len() / 2]
}

/// Per-thread microseconds per op of one run of a cell.
fn run_threads(cell: &CellReport, run: usize) -> &[f64] {
    &cell.stats.thread_per_op_us[run * cell.threads..(run + 1) * cell.threads]
}

/// sysfs_benchmark's lines for every variant: `single:` from the 1-thread
/// cell, `concur:` per thread and `times:` from the largest thread count
/// (each from its median run). Threads are not pinned, so "CPU n" is the
/// thread number.
pub fn sysfs_lines(cells: &[CellReport]) -> String {
    let mut out = String::new();
    let mut variants: Vec<(&str, &str)> = cells.iter().map(|c| (c.workload, c.variant)).collect();
    variants.dedup();
    for (workload, variant) in variants {
        let mine: Vec<&CellReport> = cells.iter().filter(|c| c.workload == workload && c.variant == variant).collect();
        let _ = writeln!(out, "{workload} {variant}:");
        if let Some(single) = mine.iter().find(|c| c.threads == 1) {
            let per = run_threads(single, median_run(single))[0];
            let _ = writeln!(out, "single: total {:.6}ms per {per:.6}us", per * single.iterations as f64 / 1e3);
        }
        if let Some(concur) = mine.iter().filter(|c| c.threads > 1).max_by_key(|c| c.threads) {
            for (thread, per) in run_threads(concur, median_run(concur)).iter().enumerate() {
                let _ = writeln!(
                    out,
                    "concur: total {:.6}ms per {per:.6}us  CPU {thread}",
                    per * concur.iterations as f64 / 1e3
                );
            }
            let _ = writeln!(
                out,
                "times: {} threads: {} cpus: {}",
                concur.iterations,
                concur.threads,
                vfscale_sync::cpu::usable_cpus()
            );
        }
    }
    out
}

/// Seed 001's "Elapsed Time / System Time" table (medians over the runs).
pub fn elapsed_system(cells: &[CellReport]) -> String {
    let mut out = format!(
        "{:<22} {:>7} {:>13} {:>12} {:>10}\n",
        "Variant", "Threads", "Elapsed Time", "System Time", "User Time"
    );
    let _ = writeln!(
        out,
        "{:<22} {:>7} {:>13} {:>12} {:>10}",
        "-------", "-------", "------------", "-----------", "---------"
    );
    for c in cells {
        let _ = writeln!(
            out,
            "{:<22} {:>7} {:>12.3}s {:>11.3}s {:>9.3}s",
            format!("{} {}", c.workload, c.variant),
            c.threads,
            c.stats.elapsed_s.median,
            c.stats.cpu_system_s.median,
            c.stats.cpu_user_s.median
        );
    }
    out
}

/// lockperf's table: milliseconds per run, one row per variant and thread
/// count.
pub fn lockperf(cells: &[CellReport]) -> String {
    let mut out = format!(
        "{:>28} {:>10} {:>10} {:>10} {:>10} {:>10}  (ms per run)\n",
        "", "mean", "variance", "sigma", "max", "min"
    );
    for c in cells {
        let e = &c.stats.elapsed_s;
        let ms = |s: f64| s * 1e3;
        let _ = writeln!(
            out,
            "{:>28} {:>10.4} {:>10.4} {:>10.4} {:>10.4} {:>10.4}",
            format!("{} {} x{}", c.workload, c.variant, c.threads),
            ms(e.mean),
            e.variance * 1e6,
            ms(e.sigma),
            ms(e.max),
            ms(e.min)
        );
    }
    out
}

/// The tallies that close the summary, over every design's efficiency
/// above 1 thread in `cells`: how many met [`SCALES`], missed it or could
/// not tell, and how many figures are themselves inconclusive (`~`).
fn efficiency_tallies<'a>(cells: impl Iterator<Item = &'a CellReport>) -> String {
    let designs: Vec<&CellReport> =
        cells.filter(|c| c.threads > 1 && c.variant != PRIVATE && c.efficiency.is_some()).collect();
    let judged = designs.iter().filter_map(|c| c.efficiency_judgement());
    let [met, not_met, inconclusive] = Judgement::tally(judged);
    let loose = designs.iter().filter(|c| !c.loose_mark().is_empty()).count();
    format!(
        "efficiency {} at 2+ threads: met {met}, not met {not_met}, inconclusive {inconclusive} (the interval \
         straddles the bar: more runs (--max-runs), or a quieter machine, can decide)\n\
         efficiency figures inconclusive (~): {loose} of {} (the 95% interval reaches more than \
         {FIGURE_TOLERANCE} from the figure: another run may give it more than {} apart)\n",
        SCALES.show(""),
        designs.len(),
        2.0 * FIGURE_TOLERANCE
    )
}

/// The closing summary: every verdict of every experiment on one line each,
/// each design's efficiency and the noise beside it, where `private` falls
/// short of the calibration, the tally of the efficiency goal, and what did
/// not run.
pub fn summary(results: &[ExperimentResult], calibration: &Calibration) -> String {
    let mut out = String::from("\n== summary: after vs before, throughput ratio [95% CI], Mann-Whitney U at 95% ==\n");
    let _ = writeln!(out, "{}", calibration.line());
    for r in results {
        for case in &r.cases {
            let hold = case.hold_us.map_or(String::new(), |h| format!(" hold {h}us"));
            for v in &case.verdicts {
                let _ = writeln!(out, "{:<10} {:<14} {}", r.name, format!("{}{hold}", v.workload), verdict_line(v));
            }
            if let Some(workload) = case.vfs_workload {
                let label = format!("{workload}{hold}");
                for line in [efficiency_line(&case.cells), bench::noise_line(&case.cells)].into_iter().flatten() {
                    let _ = writeln!(out, "{:<10} {label:<14} {line}", r.name);
                }
                for note in calibration.ceiling_notes(&case.cells) {
                    let _ = writeln!(out, "{:<10} {note}", r.name);
                }
            }
            let host: Vec<&CellReport> = case.cells.iter().filter(|c| c.variant == host::VARIANT).collect();
            if let Some(widest) = host.iter().max_by_key(|c| c.threads) {
                let _ = writeln!(
                    out,
                    "{:<10} {:<14} x{:<3} host kernel: {} ops/s, {:.2} us/op per thread",
                    r.name,
                    case.workload,
                    widest.threads,
                    bench::human(widest.stats.ops_per_sec.median),
                    widest.stats.per_op_ns.median / 1e3
                );
            }
        }
        for note in r.notes.iter().filter(|n| n.contains("skipped")) {
            let _ = writeln!(out, "{:<10} {note}", r.name);
        }
    }
    out.push_str(&efficiency_tallies(results.iter().flat_map(|r| &r.cases).flat_map(|c| &c.cells)));
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn experiments_are_named_uniquely_and_cases_resolve() {
        let names: Vec<_> = EXPERIMENTS.iter().map(|e| e.name).collect();
        assert_eq!(names, ["kernfs", "inode-list", "rwsem", "proc", "locks"]);
        for e in &EXPERIMENTS {
            for case in e.cases {
                let plan = Plan::resolve(case);
                assert!(plan.vfs.is_some() || plan.host.is_some(), "{} runs nothing", case.workload);
                if let Some(stand_in) = case.stand_in {
                    assert!(workloads::find(stand_in).is_some(), "stand-in {stand_in} is not a workload");
                }
                if case.host {
                    assert!(host::find(case.workload).is_some(), "no host driver {}", case.workload);
                }
            }
        }
        assert!(find("locks").is_some() && find("nope").is_none());
    }

    #[test]
    fn listed_pairs_are_kept_and_the_default_is_before_then_ours() {
        let mprotect = workloads::find("prim-mprotect").unwrap();
        let case = &EXPERIMENTS[2].cases[0];
        assert_eq!(pairs(mprotect, case), [("block", "spin"), ("spin", "adaptive")]);
        let exit = workloads::find("inode-exit").unwrap();
        assert_eq!(pairs(exit, &EXPERIMENTS[1].cases[0]), [("global", "percpu")]);
    }

    const LOCKREF_ONLY: Case = Case { host: false, ..Case::new("prim-lockref") };

    fn small_run() -> ExperimentResult {
        let experiment = Experiment {
            name: "test",
            seed: "001",
            title: "t",
            claim: "c",
            format: Format::Sysfs,
            cases: &[LOCKREF_ONLY],
        };
        let options = Options { quick: true, threads: vec![1, 2], max_runs: None };
        let mut seen = 0;
        let result = run(&experiment, &options, &mut |_, planned| {
            assert_eq!(planned, Planned::Yes, "no more rounds without --max-runs");
            seen += 1
        });
        assert_eq!(seen, 8 * (options.runs() + 1), "3 designs and private x 2 thread counts, each warm-up and runs");
        assert_eq!(seen, run_count(&[&experiment], &options), "the progress bar's length");
        result
    }

    /// With `max_runs`, a case runs more rounds only while a design's
    /// efficiency is inconclusive: the progress callback counts them
    /// apart from the planned runs, and the text says how many ran.
    #[test]
    fn more_rounds_are_counted_apart_and_named() {
        let experiment = Experiment {
            name: "test",
            seed: "001",
            title: "t",
            claim: "c",
            format: Format::Table,
            cases: &[LOCKREF_ONLY],
        };
        let options = Options { quick: true, threads: vec![1, 2], max_runs: Some(8) };
        let (mut planned, mut more) = (0, 0);
        let result = run(&experiment, &options, &mut |_, counted| match counted {
            Planned::Yes => planned += 1,
            Planned::No => more += 1,
        });
        assert_eq!(planned, run_count(&[&experiment], &options), "the progress bar's length");
        let cells = &result.cases[0].cells;
        let rounds = cells[0].runs;
        assert!(cells.iter().all(|c| c.runs == rounds) && [4, 8].contains(&rounds), "{rounds} rounds");
        assert_eq!(more, cells.len() * (rounds - options.runs()));
        let undecided = cells.iter().any(|c| {
            c.threads > 1 && c.variant != PRIVATE && c.efficiency_judgement() == Some(Judgement::Inconclusive)
        });
        let text = render(&experiment, &result, &options);
        if rounds == 4 {
            assert!(!undecided && !text.contains("more rounds: "), "decided on the first rounds:\n{text}");
        } else {
            assert!(cells.iter().all(|c| c.efficiency_ci99.is_some()), "judged on the 99% interval");
            assert!(text.contains("more rounds: 8 per cell (up to 8)"), "{text}");
        }
    }

    #[test]
    fn a_run_has_cells_verdicts_and_seed_shaped_text() {
        let result = small_run();
        let case = &result.cases[0];
        assert_eq!(case.cells.len(), 8);
        assert_eq!(case.cells.iter().filter(|c| c.variant == PRIVATE).count(), 2, "private runs at 1 and 2 threads");
        assert!(case.cells.iter().all(|c| c.efficiency.is_some()), "every cell has its efficiency");
        assert_eq!(case.verdicts.len(), 2, "mutex vs lockref at 1 and 2 threads");
        assert!(case.verdicts.iter().all(|v| v.before == "mutex" && v.after == "lockref"));
        let lines = sysfs_lines(&case.cells);
        assert_eq!(lines.lines().filter(|l| l.starts_with("single: total ")).count(), 4);
        assert_eq!(lines.lines().filter(|l| l.starts_with("concur: total ") && l.contains("us  CPU ")).count(), 8);
        assert!(lines.lines().any(|l| l.starts_with("times: ") && l.contains(" threads: 2 cpus: ")));
        assert_eq!(elapsed_system(&case.cells).lines().count(), 2 + 8);
        assert_eq!(lockperf(&case.cells).lines().count(), 1 + 8);
        let calibration = Calibration::measure(&[1, 2], 1, std::time::Duration::from_millis(1));
        let text = summary(std::slice::from_ref(&result), &calibration);
        assert!(text.contains("calibration (") && text.contains("noise (private's S per round): x2 "), "{text}");
        assert!(text.contains("efficiency >= 0.9 at 2+ threads: met "), "{text}");
        assert!(text.contains("efficiency figures inconclusive (~): "), "{text}");
        assert_eq!(text.lines().filter(|l| l.contains("lockref vs mutex")).count(), 2);
        assert!(!text.contains("private vs") && !text.contains("vs private"), "{text}");
        let efficiency = text.lines().find(|l| l.contains("efficiency (S / S private, ")).expect(&text);
        assert!(efficiency.contains("inconclusive): x2 lockref ") && efficiency.contains(", atomic "), "{efficiency}");
        assert!(!efficiency.contains("private "), "private is the reference: {efficiency}");
    }

    #[test]
    fn figures_their_rounds_leave_loose_are_marked_and_counted() {
        let cells = bench::tests::steady_and_loose();
        let line = efficiency_line(&cells).unwrap();
        assert!(line.contains("; ~ figure inconclusive): x2 "), "{line}");
        assert!(line.contains(" steady 0.95 ["), "a pinned figure has no mark: {line}");
        assert!(line.contains(" loose ~0."), "a loose figure is marked: {line}");
        let tallies = efficiency_tallies(cells.iter());
        assert!(tallies.contains(": met 1, not met 0, inconclusive 1 "), "{tallies}");
        assert!(tallies.contains("efficiency figures inconclusive (~): 1 of 2 "), "{tallies}");
    }

    #[test]
    fn private_is_never_judged() {
        const PRIVATE_PAIRS: Case = Case { pairs: &[("mutex", PRIVATE), (PRIVATE, "lockref")], ..LOCKREF_ONLY };
        let lockref = workloads::find("prim-lockref").unwrap();
        assert_eq!(pairs(lockref, &PRIVATE_PAIRS), [("mutex", "lockref")], "falls back to before -> ours");
        for e in &EXPERIMENTS {
            for case in e.cases {
                let Some(workload) = Plan::resolve(case).vfs else { continue };
                assert!(workload.all_variants().contains(&PRIVATE), "{} runs private", workload.name);
                for (before, after) in pairs(workload, case) {
                    assert!(before != PRIVATE && after != PRIVATE, "{}: {before} -> {after}", workload.name);
                }
            }
        }
    }
}
