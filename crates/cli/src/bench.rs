//! `vfscale bench`: runs every (variant, threads) cell of one workload and
//! reports each as a table row or a JSON object.
//!
//! Two figures relate cells of one run, both estimated round by round
//! (every cell runs once per round; see [`RoundRatio`]). `speedup` S_T =
//! ops/s at T threads / ops/s at 1 thread of the same variant in that
//! round. `efficiency` = S_T / S_T of [`PRIVATE`] (the same work with
//! nothing shared) in that round: the share of what this machine allows at
//! T threads that the design gets. 1 means the design scales like unshared
//! work; at 1 thread it is 1 by definition. Each is the median over rounds,
//! with a bootstrap 95% interval (`speedup_ci95`, `efficiency_ci95`).
//!
//! A design's efficiency above 1 thread is judged against [`SCALES`] on
//! its interval: met when the whole interval clears the bar, not met when
//! none of it does, inconclusive when it straddles it. Where the plan
//! allows more runs than it starts with ([`RunPlan::max_runs`]), all
//! cells run `runs` more rounds at a time while any design's efficiency is
//! inconclusive; after more rounds every efficiency is judged on its 99%
//! interval (`efficiency_ci99`, [`Look::More`]), which keeps the chance
//! that k looks call a design at the bar met at most 2.5% + (k - 1) x 0.5%
//! (nominal).

use crate::harness::{rounds_to_go, run_cells, until_decided, CellRuns, CellStats, RunPlan};
use crate::stats::{Bound, Judgement, Look, RoundRatio};
use crate::workloads::{Params, Subject, Workload, PRIVATE};
use serde::Serialize;

/// What to run: the command line of `bench`, validated.
#[derive(Debug, Clone)]
pub struct BenchRequest {
    /// The workload.
    pub workload: &'static Workload,
    /// Variants, in the order given.
    pub variants: Vec<&'static str>,
    /// Thread counts, in the order given.
    pub threads: Vec<usize>,
    /// Runs and iterations per cell.
    pub plan: RunPlan,
    /// Workload knobs.
    pub params: Params,
}

/// One measured cell, as printed and as serialized to JSON.
#[derive(Debug, Clone, Serialize)]
pub struct CellReport {
    /// Workload name.
    pub workload: &'static str,
    /// Variant name.
    pub variant: &'static str,
    /// Threads that ran concurrently.
    pub threads: usize,
    /// Measured runs (rounds): the plan's, or more where an efficiency
    /// was undecided.
    pub runs: usize,
    /// Operations per thread per run.
    pub iterations: u64,
    /// `--hold-us`, for workloads that take it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub hold_us: Option<u64>,
    /// `--work-us`, for workloads that take it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub work_us: Option<u64>,
    /// How the cells were run, when a reader should know (e.g. a host
    /// driver that found no tmpfs).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
    /// Throughput and per-op time.
    #[serde(flatten)]
    pub stats: CellStats,
    /// Throughput over that at 1 thread of the same variant, the median
    /// over rounds, when 1 thread was measured.
    pub speedup: Option<f64>,
    /// 95% interval of `speedup`.
    pub speedup_ci95: Option<[f64; 2]>,
    /// `speedup` over the speedup of `private` at the same thread count,
    /// round by round, when both were measured in the same run.
    pub efficiency: Option<f64>,
    /// 95% interval of `efficiency`.
    pub efficiency_ci95: Option<[f64; 2]>,
    /// 99% interval of `efficiency`, given where the cells ran more rounds
    /// than planned: the interval its verdict is judged on then.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub efficiency_ci99: Option<[f64; 2]>,
    /// Whether `efficiency` is pinned to within [`FIGURE_TOLERANCE`]
    /// either side by its interval; `false` marks the figure itself
    /// inconclusive: another run may give it more than twice that apart.
    pub efficiency_pinned: Option<bool>,
}

/// The bar of the efficiency goal: a design scales when it gets at least
/// this share of what unshared work gets here.
pub const SCALES: Bound = Bound::AtLeast(0.9);

/// How far either side of an efficiency its 95% interval may reach for
/// the figure to count as pinned down: two runs whose figures are both
/// pinned should agree to within twice this, 0.1.
pub const FIGURE_TOLERANCE: f64 = 0.05;

impl CellReport {
    /// `speedup` with its interval.
    pub fn speedup_estimate(&self) -> Option<RoundRatio> {
        Some(RoundRatio { median: self.speedup?, ci95: self.speedup_ci95? })
    }

    /// `efficiency` with its interval.
    pub fn efficiency_estimate(&self) -> Option<RoundRatio> {
        Some(RoundRatio { median: self.efficiency?, ci95: self.efficiency_ci95? })
    }

    /// The interval `efficiency` is judged on: the 99% one after more
    /// rounds, the 95% one otherwise.
    pub fn efficiency_judged_on(&self) -> Option<[f64; 2]> {
        self.efficiency_ci99.or(self.efficiency_ci95)
    }

    /// What that interval says of [`SCALES`]; `None` without an
    /// efficiency.
    pub fn efficiency_judgement(&self) -> Option<Judgement> {
        self.efficiency_judged_on().map(|interval| SCALES.judge(interval))
    }

    /// `~`, printed before an efficiency that is not pinned (the figure
    /// itself inconclusive), or nothing.
    pub fn loose_mark(&self) -> &'static str {
        if self.efficiency_pinned == Some(false) {
            "~"
        } else {
            ""
        }
    }
}

impl BenchRequest {
    /// Runs every cell, runs of all cells interleaved (see
    /// [`run_cells`]); `progress(variant, threads, run)` before each run,
    /// run 0 being the warm-up. Reports come variant-major.
    pub fn run(&self, progress: impl FnMut(&str, usize, usize)) -> Vec<CellReport> {
        let hold = self.workload.takes_hold.then_some(self.params);
        let max_threads = self.threads.iter().copied().max().unwrap_or(1);
        let subjects: Vec<(&'static str, Box<dyn Subject>)> = self
            .variants
            .iter()
            .map(|&variant| (variant, self.workload.subject(variant, &self.params, max_threads)))
            .collect();
        let subjects: Vec<(&'static str, &dyn Subject)> = subjects.iter().map(|(v, s)| (*v, s.as_ref())).collect();
        let cells = Cells { workload: self.workload.name, hold, note: None };
        cells.measure(&subjects, &self.threads, self.plan, progress)
    }
}

/// The labels of one workload's cells: what [`Cells::measure`] stamps on
/// every report, for vfscale workloads and host drivers alike.
#[derive(Debug, Clone)]
pub struct Cells {
    /// Workload name.
    pub workload: &'static str,
    /// `--hold-us` / `--work-us`, for workloads that take them.
    pub hold: Option<Params>,
    /// A remark on how the cells were run, copied into each report.
    pub note: Option<String>,
}

impl Cells {
    /// Runs each (variant, thread count) cell, their runs interleaved, and
    /// reports every cell, variant-major, with its speedup and efficiency
    /// (see [`scaling`]); then, while [`more_rounds_wanted`] says so, more
    /// rounds of every cell, judged again. `progress(variant, threads,
    /// run)` is called before each run; run 0 is the warm-up.
    pub fn measure(
        &self,
        subjects: &[(&'static str, &dyn Subject)],
        threads: &[usize],
        plan: RunPlan,
        mut progress: impl FnMut(&str, usize, usize),
    ) -> Vec<CellReport> {
        let labels: Vec<(&'static str, usize)> =
            subjects.iter().flat_map(|&(variant, _)| threads.iter().map(move |&t| (variant, t))).collect();
        let cells: Vec<(&dyn Subject, usize)> =
            subjects.iter().flat_map(|&(_, subject)| threads.iter().map(move |&t| (subject, t))).collect();
        let mut before_run = |cell: usize, run: usize| progress(labels[cell].0, labels[cell].1, run);
        let runs = run_cells(&cells, plan, &mut before_run);
        let judge = |runs: &[CellRuns], look| self.reports(&labels, runs, look);
        until_decided(&cells, runs, before_run, judge, |reports| more_rounds_wanted(reports, plan))
    }

    /// The reports of cells `labels` that ran `runs`, with their scaling
    /// judged as `look`.
    fn reports(&self, labels: &[(&'static str, usize)], runs: &[CellRuns], look: Look) -> Vec<CellReport> {
        let mut reports: Vec<CellReport> = labels
            .iter()
            .zip(runs)
            .map(|(&(variant, threads), runs)| CellReport {
                workload: self.workload,
                variant,
                threads,
                runs: runs.elapsed.len(),
                iterations: runs.iterations,
                hold_us: self.hold.map(|p| p.hold_us),
                work_us: self.hold.map(|p| p.work_us),
                note: self.note.clone(),
                stats: runs.stats(),
                speedup: None,
                speedup_ci95: None,
                efficiency: None,
                efficiency_ci95: None,
                efficiency_ci99: None,
                efficiency_pinned: None,
            })
            .collect();
        scaling(&mut reports, look);
        reports
    }
}

/// How many more rounds the cells of `reports` run under `plan`: none
/// once every design's efficiency above 1 thread is decided (met or not
/// met on the interval it is judged on) or the cells ran
/// `plan.max_runs`; otherwise `plan.runs`, or what is left below the cap.
pub fn more_rounds_wanted(reports: &[CellReport], plan: RunPlan) -> Option<usize> {
    let rounds = reports.iter().map(|r| r.runs).min()?;
    let undecided = reports
        .iter()
        .filter(|r| r.threads > 1 && r.variant != PRIVATE)
        .any(|r| r.efficiency_judgement() == Some(Judgement::Inconclusive));
    rounds_to_go(undecided, rounds, plan.runs, plan.max_runs)
}

/// Fills in every report's `speedup` (against the 1-thread cell of its
/// variant) and `efficiency` (that speedup over the speedup of `private` at
/// the same thread count), each estimated round by round with its
/// interval, and, at a [`Look::More`], the efficiency's 99% interval; each
/// stays `None` where a cell it needs is missing.
pub fn scaling(reports: &mut [CellReport], look: Look) {
    let samples = |variant: &str, of: &CellReport, threads: usize| {
        let cell = reports.iter().find(|r| (r.workload, r.variant, r.threads) == (of.workload, variant, threads))?;
        Some(cell.stats.ops_per_sec_samples.as_slice())
    };
    let efficiency_of = |c: &[f64]| (c[0] / c[1]) / (c[2] / c[3]);
    type Estimates = (Option<RoundRatio>, Option<RoundRatio>, Option<[f64; 2]>);
    let estimates: Vec<Estimates> = reports
        .iter()
        .map(|r| {
            let (at_t, at_1) = (&r.stats.ops_per_sec_samples[..], samples(r.variant, r, 1));
            let speedup = at_1.and_then(|at_1| RoundRatio::of_rounds(&[at_t, at_1], |c| c[0] / c[1]));
            let cells = (|| Some([at_t, at_1?, samples(PRIVATE, r, r.threads)?, samples(PRIVATE, r, 1)?]))();
            let efficiency = cells.and_then(|cells| RoundRatio::of_rounds(&cells, efficiency_of));
            let ci99 =
                cells.filter(|_| look == Look::More).and_then(|cells| look.interval(efficiency, &cells, efficiency_of));
            (speedup, efficiency, ci99)
        })
        .collect();
    for (report, (speedup, efficiency, ci99)) in reports.iter_mut().zip(estimates) {
        report.speedup = speedup.map(|s| s.median);
        report.speedup_ci95 = speedup.map(|s| s.ci95);
        report.efficiency = efficiency.map(|e| e.median);
        report.efficiency_ci95 = efficiency.map(|e| e.ci95);
        report.efficiency_ci99 = ci99;
        report.efficiency_pinned = efficiency.map(|e| e.pinned_within(FIGURE_TOLERANCE));
    }
}

/// How noisy the machine was: the spread of `private`'s speedup over the
/// rounds at each thread count above 1, as `noise (private's S per round):
/// x2 1.85-2.01 (8%)`; a wide spread says the machine, not a design, moved
/// the figures. `None` without private cells.
pub fn noise_line(cells: &[CellReport]) -> Option<String> {
    let one = cells.iter().find(|c| c.variant == PRIVATE && c.threads == 1)?;
    let spreads: Vec<String> = cells
        .iter()
        .filter(|c| c.variant == PRIVATE && c.threads > 1)
        .filter_map(|c| {
            let (at_t, at_1) = (&c.stats.ops_per_sec_samples, &one.stats.ops_per_sec_samples);
            let per_round: Vec<f64> = at_t.iter().zip(at_1).map(|(t, o)| t / o).collect();
            let (lo, hi) = per_round.iter().fold((f64::INFINITY, 0.0_f64), |(lo, hi), &s| (lo.min(s), hi.max(s)));
            let median = crate::stats::median(&per_round)?;
            Some(format!("x{} {lo:.2}-{hi:.2} ({:.0}%)", c.threads, 100.0 * (hi - lo) / median))
        })
        .collect();
    (!spreads.is_empty()).then(|| format!("noise (private's S per round): {}", spreads.join(", ")))
}

/// Each design's efficiency at every thread count above 1, the median of
/// rounds with the interval it is judged on and what that says of
/// [`SCALES`], as "efficiency (S / S private, >= 0.9 scales; ~ figure
/// inconclusive): x2 rcu 0.93 [0.90, 0.97] met, rwsem ~0.41 [0.30, 0.45]
/// not met; x16 ..."; an interval marked "99%" is the one a run judges on
/// after more rounds (95% otherwise); `~` marks a figure whose 95%
/// interval reaches more than [`FIGURE_TOLERANCE`] from it. `None` when no
/// cell above 1 thread has one.
pub fn efficiency_line(cells: &[CellReport]) -> Option<String> {
    let threads: std::collections::BTreeSet<usize> =
        cells.iter().filter(|c| c.threads > 1 && c.efficiency.is_some()).map(|c| c.threads).collect();
    let per_count: Vec<String> = threads
        .into_iter()
        .map(|t| {
            let designs: Vec<String> = cells
                .iter()
                .filter(|c| c.threads == t && c.variant != PRIVATE)
                .filter_map(|c| {
                    let judged = RoundRatio { median: c.efficiency?, ci95: c.efficiency_judged_on()? };
                    let level = if c.efficiency_ci99.is_some() { " 99%" } else { "" };
                    Some(format!("{} {}{judged}{level} {}", c.variant, c.loose_mark(), c.efficiency_judgement()?))
                })
                .collect();
            format!("x{t} {}", designs.join(", "))
        })
        .collect();
    (!per_count.is_empty()).then(|| {
        format!(
            "efficiency (S / S private, {} scales; ~ figure inconclusive): {}",
            SCALES.show(""),
            per_count.join("; ")
        )
    })
}

/// What a header says of a plan of `runs` that may go on to `max_runs`:
/// " (up to 100 while an efficiency at 2+ threads is inconclusive)", or
/// nothing where it may not.
pub fn up_to(runs: usize, max_runs: usize) -> String {
    if max_runs > runs {
        format!(" (up to {max_runs} while an efficiency at 2+ threads is inconclusive)")
    } else {
        String::new()
    }
}

/// Where cells ran more rounds than the `runs` planned, a line saying how
/// many and why: "more rounds: 50 per cell (up to 100) while an efficiency
/// at 2+ threads was inconclusive; each judged on its 99% interval". Host
/// cells, which run only the planned rounds, are left out.
pub fn more_rounds_line(cells: &[CellReport], runs: usize, max_runs: usize) -> Option<String> {
    let rounds = cells.iter().filter(|c| c.variant != crate::host::VARIANT).map(|c| c.runs).max()?;
    (rounds > runs).then(|| {
        format!(
            "more rounds: {rounds} per cell (up to {max_runs}) while an efficiency at 2+ threads was inconclusive; \
             each judged on its 99% interval"
        )
    })
}

/// Renders reports as an aligned text table: for the lockperf analogs
/// (seed 004) the per-run time in milliseconds, as the seed reports it.
pub fn table(reports: &[CellReport]) -> String {
    if !reports.is_empty() && reports.iter().all(|r| crate::workloads::locks::NAMES.contains(&r.workload)) {
        return run_time_table(reports);
    }
    let header = [
        "variant",
        "threads",
        "median ops/s",
        "mean",
        "95% CI",
        "sigma",
        "min",
        "max",
        "ns/op",
        "S",
        "eff",
        "fair",
        "user s",
        "sys s",
    ];
    let mut rows = vec![header.map(String::from).to_vec()];
    for r in reports {
        let o = &r.stats.ops_per_sec;
        rows.push(vec![
            r.variant.to_string(),
            r.threads.to_string(),
            human(o.median),
            human(o.mean),
            format!("{}-{}", human(o.ci95[0]), human(o.ci95[1])),
            human(o.sigma),
            human(o.min),
            human(o.max),
            format!("{:.1}", r.stats.per_op_ns.median),
            estimate(r.speedup_estimate()),
            format!("{}{}", r.loose_mark(), estimate(r.efficiency_estimate())),
            format!("{:.2}", r.stats.fairness.min_over_max),
            format!("{:.3}", r.stats.cpu_user_s.median),
            format!("{:.3}", r.stats.cpu_system_s.median),
        ]);
    }
    align(rows)
}

/// A speedup or efficiency with its interval, "-" when unknown.
fn estimate(value: Option<RoundRatio>) -> String {
    value.map_or("-".into(), |v| v.to_string())
}

/// A speedup or efficiency with two decimals, "-" when unknown.
fn ratio(value: Option<f64>) -> String {
    value.map_or("-".into(), |v| format!("{v:.2}"))
}

/// Seed 004's table: mean, variance, sigma, max and min of the wall time
/// of one run (ms), S2 = median throughput at 2 threads over 1, and the
/// efficiency of each row.
fn run_time_table(reports: &[CellReport]) -> String {
    let header = ["variant", "threads", "mean ms", "variance", "sigma", "max", "min", "S", "S2", "eff"];
    let mut rows = vec![header.map(String::from).to_vec()];
    for r in reports {
        let t = &r.stats.elapsed_s;
        let s2 = reports.iter().filter(|o| o.variant == r.variant && o.threads == 2).find_map(|o| o.speedup);
        rows.push(vec![
            r.variant.to_string(),
            r.threads.to_string(),
            format!("{:.4}", t.mean * 1e3),
            format!("{:.4}", t.variance * 1e6),
            format!("{:.4}", t.sigma * 1e3),
            format!("{:.4}", t.max * 1e3),
            format!("{:.4}", t.min * 1e3),
            ratio(r.speedup),
            ratio(s2),
            format!("{}{}", r.loose_mark(), estimate(r.efficiency_estimate())),
        ]);
    }
    align(rows)
}

fn align(rows: Vec<Vec<String>>) -> String {
    let mut out = String::new();
    let widths: Vec<usize> = (0..rows[0].len()).map(|c| rows.iter().map(|r| r[c].len()).max().unwrap_or(0)).collect();
    for row in rows {
        let line: Vec<String> = row
            .iter()
            .enumerate()
            .map(
                |(c, cell)| {
                    if c == 0 {
                        format!("{cell:<w$}", w = widths[c])
                    } else {
                        format!("{cell:>w$}", w = widths[c])
                    }
                },
            )
            .collect();
        out.push_str(line.join("  ").trim_end());
        out.push('\n');
    }
    out
}

/// 12345678.0 -> "12.35M".
pub fn human(v: f64) -> String {
    let (scaled, unit) = match v.abs() {
        a if a >= 1e9 => (v / 1e9, "G"),
        a if a >= 1e6 => (v / 1e6, "M"),
        a if a >= 1e3 => (v / 1e3, "k"),
        _ => (v, ""),
    };
    format!("{scaled:.2}{unit}")
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::workloads;

    fn request(threads: Vec<usize>) -> BenchRequest {
        BenchRequest {
            workload: workloads::find("prim-lockref").unwrap(),
            variants: vec!["atomic", "lockref"],
            threads,
            plan: RunPlan::new(2, 1000),
            params: Params::default(),
        }
    }

    #[test]
    fn every_cell_is_reported_with_speedup_against_one_thread() {
        let mut seen = Vec::new();
        let reports = request(vec![1, 2]).run(|v, t, run| seen.push((v.to_string(), t, run)));
        // Every cell: a warm-up and two measured runs, interleaved by round.
        assert_eq!(seen.len(), 12);
        assert_eq!(seen[..4].iter().map(|s| s.2).collect::<Vec<_>>(), [0; 4]);
        assert_eq!(seen[4..].iter().filter(|s| s.0 == "lockref" && s.1 == 2).count(), 2);
        assert!(seen[4..8].iter().all(|s| s.2 == 1) && seen[8..].iter().all(|s| s.2 == 2));
        assert_eq!(reports.len(), 4);
        for r in &reports {
            assert_eq!(r.runs, 2);
            let s = r.speedup.expect("1 thread was measured");
            if r.threads == 1 {
                assert_eq!(s, 1.0);
            }
            assert!(r.stats.ops_per_sec.min <= r.stats.ops_per_sec.median);
            assert!(r.stats.ops_per_sec.median <= r.stats.ops_per_sec.max);
        }
        assert!(table(&reports).lines().count() == 5);
    }

    /// A report of `variant` at `threads` whose median throughput is `ops`.
    fn cell(variant: &'static str, threads: usize, ops: f64) -> CellReport {
        rounds(variant, threads, &[ops])
    }

    /// A report of `variant` at `threads` that measured `ops` in its rounds.
    pub(crate) fn rounds(variant: &'static str, threads: usize, ops: &[f64]) -> CellReport {
        let runs = crate::harness::CellRuns {
            threads,
            iterations: 1,
            elapsed: ops.iter().map(|o| std::time::Duration::from_secs_f64(threads as f64 / o)).collect(),
            cpu: vec![Default::default(); ops.len()],
            thread_elapsed: vec![vec![std::time::Duration::from_secs(1); threads]; ops.len()],
        };
        CellReport {
            workload: "w",
            variant,
            threads,
            runs: ops.len(),
            iterations: 1,
            hold_us: None,
            work_us: None,
            note: None,
            stats: runs.stats(),
            speedup: None,
            speedup_ci95: None,
            efficiency: None,
            efficiency_ci95: None,
            efficiency_ci99: None,
            efficiency_pinned: None,
        }
    }

    /// Two designs beside `private`, each at 1 and 2 threads over five
    /// rounds: `steady` at 0.95 of the ceiling in every round, `loose`
    /// anywhere from 0.5 to 0.94.
    pub(crate) fn steady_and_loose() -> Vec<CellReport> {
        let one = [100.0, 101.0, 99.0, 100.0, 100.5];
        let mut reports = vec![
            rounds("steady", 1, &one),
            rounds("steady", 2, &[190.0, 191.9, 188.1, 190.0, 190.95]),
            rounds("loose", 1, &one),
            rounds("loose", 2, &[100.0, 190.0, 120.0, 170.0, 140.0]),
            rounds(PRIVATE, 1, &one),
            rounds(PRIVATE, 2, &[200.0, 202.0, 198.0, 200.0, 201.0]),
        ];
        scaling(&mut reports, Look::First);
        reports
    }

    #[test]
    fn efficiency_is_pinned_only_where_its_rounds_agree() {
        let reports = steady_and_loose();
        let at_2 = |variant| reports.iter().find(|r| r.variant == variant && r.threads == 2).unwrap();
        assert_eq!(at_2("steady").efficiency_pinned, Some(true), "{:?}", at_2("steady").efficiency_estimate());
        assert_eq!(at_2("loose").efficiency_pinned, Some(false), "{:?}", at_2("loose").efficiency_estimate());
        let json = serde_json::to_value(at_2("loose")).unwrap();
        assert_eq!(json["efficiency_pinned"], false);
    }

    /// More rounds while a design's efficiency above 1 thread straddles
    /// the bar, `runs` at a time up to the cap; none once all are decided,
    /// and `private` and 1-thread cells never ask for them.
    #[test]
    fn more_rounds_are_wanted_while_a_design_is_undecided() {
        let reports = steady_and_loose();
        let judgement = |variant| reports.iter().find(|r| r.variant == variant && r.threads == 2).unwrap();
        assert_eq!(judgement("steady").efficiency_judgement(), Some(Judgement::Met));
        assert_eq!(judgement("loose").efficiency_judgement(), Some(Judgement::Inconclusive));
        let plan = |max_runs| RunPlan { max_runs, ..RunPlan::new(5, 1) };
        assert_eq!(more_rounds_wanted(&reports, plan(20)), Some(5));
        assert_eq!(more_rounds_wanted(&reports, plan(8)), Some(3), "what is left below the cap");
        assert_eq!(more_rounds_wanted(&reports, plan(5)), None, "at the cap");
        let decided: Vec<CellReport> = reports.iter().filter(|r| r.variant != "loose").cloned().collect();
        assert_eq!(more_rounds_wanted(&decided, plan(20)), None, "every design decided");
        let mut undecided_private = decided.clone();
        undecided_private
            .iter_mut()
            .filter(|r| r.variant == PRIVATE)
            .for_each(|r| r.efficiency_ci95 = Some([0.8, 1.0]));
        assert_eq!(more_rounds_wanted(&undecided_private, plan(20)), None, "private is the reference, never judged");
        let mut undecided_at_one = decided;
        undecided_at_one.iter_mut().filter(|r| r.threads == 1).for_each(|r| r.efficiency_ci95 = Some([0.8, 1.0]));
        assert_eq!(more_rounds_wanted(&undecided_at_one, plan(20)), None, "1 thread is 1 by definition");
    }

    /// After more rounds every efficiency has its 99% interval, which holds
    /// the 95% one and is what its verdict is judged on.
    #[test]
    fn a_later_look_judges_efficiency_on_its_99_percent_interval() {
        let one = [100.0; 25];
        let two: Vec<f64> =
            (0..25).map(|i| 180.0 + (i % 7) as f64 * 3.0 - if i % 5 == 0 { 30.0 } else { 0.0 }).collect();
        let mut reports = vec![rounds("ours", 1, &one), rounds("ours", 2, &two), rounds(PRIVATE, 1, &one)];
        reports.push(rounds(PRIVATE, 2, &[200.0; 25]));
        scaling(&mut reports, Look::First);
        assert!(reports.iter().all(|r| r.efficiency_ci99.is_none()), "a first look has no 99% interval");
        scaling(&mut reports, Look::More);
        let ours = &reports[1];
        let (ci95, ci99) = (ours.efficiency_ci95.unwrap(), ours.efficiency_ci99.unwrap());
        assert!(ci99[0] <= ci95[0] && ci95[1] <= ci99[1] && ci99[1] - ci99[0] > ci95[1] - ci95[0], "{ci95:?} {ci99:?}");
        assert_eq!(ours.efficiency_judged_on(), Some(ci99));
        let mut straddling = ours.clone();
        straddling.efficiency_ci95 = Some([0.91, 1.0]);
        straddling.efficiency_ci99 = Some([0.88, 1.02]);
        assert_eq!(straddling.efficiency_judgement(), Some(Judgement::Inconclusive), "judged on the 99% interval");
        straddling.efficiency_ci99 = None;
        assert_eq!(straddling.efficiency_judgement(), Some(Judgement::Met), "judged on the 95% interval");
        let line = efficiency_line(&reports).unwrap();
        assert!(line.contains(&format!("[{:.2}, {:.2}] 99% ", ci99[0], ci99[1])), "{line}");
        let json = serde_json::to_value(ours).unwrap();
        assert_eq!(json["efficiency_ci99"].as_array().map(Vec::len), Some(2));
    }

    /// Sleeps 4 ms a run; at 2 threads, when `uneven`, 2 ms and 32 ms on
    /// alternate runs, so that its efficiency is about 2 in one round and
    /// 1/8 in the next: undecided however many rounds run, on any machine.
    struct Sleeper {
        uneven: bool,
        runs_at_two: std::sync::atomic::AtomicUsize,
    }

    impl Subject for Sleeper {
        fn prepare_run(&self, threads: usize) {
            if threads == 2 {
                self.runs_at_two.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            }
        }

        fn run_thread(&self, _thread: usize, _iterations: u64) {
            let odd = self.runs_at_two.load(std::sync::atomic::Ordering::Relaxed) % 2 == 1;
            let ms = match (self.uneven, odd) {
                (false, _) => 4,
                (true, true) => 2,
                (true, false) => 32,
            };
            std::thread::sleep(std::time::Duration::from_millis(ms));
        }
    }

    /// An efficiency no number of rounds decides runs more rounds of every
    /// cell up to the cap, each cell's report counting them and judged on
    /// its 99% interval; with the cap at the planned runs, none run.
    #[test]
    fn an_undecided_efficiency_runs_more_rounds_up_to_the_cap() {
        let sleeper = |uneven| Sleeper { uneven, runs_at_two: Default::default() };
        let (design, private) = (sleeper(true), sleeper(false));
        let subjects: [(&'static str, &dyn Subject); 2] = [("design", &design), (PRIVATE, &private)];
        let cells = Cells { workload: "w", hold: None, note: None };
        let plan = RunPlan { max_runs: 8, ..RunPlan::new(4, 1) };
        let mut last_run = 0;
        let reports = cells.measure(&subjects, &[1, 2], plan, |_, _, run| last_run = last_run.max(run));
        assert_eq!(last_run, 8, "runs are numbered on from the planned four");
        assert!(reports.iter().all(|r| r.runs == 8 && r.stats.ops_per_sec_samples.len() == 8), "{reports:?}");
        assert!(reports.iter().all(|r| r.efficiency_ci99.is_some()), "a later look gives every efficiency its 99%");
        let at_2 = reports.iter().find(|r| r.variant == "design" && r.threads == 2).unwrap();
        assert_eq!(at_2.efficiency_judgement(), Some(Judgement::Inconclusive), "{:?}", at_2.efficiency_judged_on());
        let planned = cells.measure(&subjects, &[1, 2], RunPlan::new(4, 1), |_, _, _| {});
        assert!(planned.iter().all(|r| r.runs == 4 && r.efficiency_ci99.is_none()), "{planned:?}");
    }

    #[test]
    fn the_more_rounds_line_says_how_many_ran_and_why() {
        let reports = steady_and_loose();
        assert_eq!(more_rounds_line(&reports, 5, 20), None, "the planned five");
        let line = more_rounds_line(&reports, 3, 20).unwrap();
        assert!(line.starts_with("more rounds: 5 per cell (up to 20) while an efficiency at 2+ threads"), "{line}");
    }

    #[test]
    fn efficiency_is_speedup_over_the_speedup_of_private() {
        let mut reports = vec![
            cell("ours", 1, 100.0),
            cell("ours", 2, 190.0),
            cell("ours", 16, 150.0),
            cell("before", 1, 200.0),
            cell("before", 2, 100.0),
            cell("before", 16, 50.0),
            cell(PRIVATE, 1, 1000.0),
            cell(PRIVATE, 2, 2000.0),
            cell(PRIVATE, 16, 1500.0),
        ];
        scaling(&mut reports, Look::First);
        let got: Vec<(Option<f64>, Option<f64>)> = reports.iter().map(|r| (r.speedup, r.efficiency)).collect();
        let close = |a: Option<f64>, b: f64| (a.expect("known") - b).abs() < 1e-6;
        let expected = [
            (1.0, 1.0),
            (1.9, 0.95),
            (1.5, 1.0),
            (1.0, 1.0),
            (0.5, 0.25),
            (0.25, 0.25 / 1.5),
            (1.0, 1.0),
            (2.0, 1.0),
            (1.5, 1.0),
        ];
        for (i, ((s, e), (want_s, want_e))) in got.iter().zip(expected).enumerate() {
            assert!(close(*s, want_s) && close(*e, want_e), "row {i}: got {s:?} {e:?}, want {want_s} {want_e}");
        }
    }

    #[test]
    fn noise_is_the_spread_of_privates_rounds() {
        let cells = [
            rounds("ours", 1, &[100.0, 100.0]),
            rounds(PRIVATE, 1, &[100.0, 100.0, 100.0]),
            rounds(PRIVATE, 2, &[200.0, 180.0, 160.0]),
        ];
        assert_eq!(noise_line(&cells).unwrap(), "noise (private's S per round): x2 1.60-2.00 (22%)");
        assert_eq!(noise_line(&cells[..1]), None);
    }

    /// A drop that hits every cell of a round alike (another tenant) moves
    /// no round's ratio; a drop in one cell only widens the interval.
    #[test]
    fn scaling_is_estimated_round_by_round() {
        let mut reports = vec![
            rounds("ours", 1, &[100.0, 100.0, 50.0, 100.0, 100.0]),
            rounds("ours", 2, &[190.0, 190.0, 95.0, 190.0, 190.0]),
            rounds(PRIVATE, 1, &[100.0, 100.0, 50.0, 100.0, 100.0]),
            rounds(PRIVATE, 2, &[200.0, 200.0, 100.0, 200.0, 120.0]),
        ];
        scaling(&mut reports, Look::First);
        let ours = reports[1].speedup_estimate().unwrap();
        assert!((ours.median - 1.9).abs() < 1e-6 && ours.ci95[1] - ours.ci95[0] < 1e-6, "{ours}");
        let efficiency = reports[1].efficiency_estimate().unwrap();
        assert!((efficiency.median - 0.95).abs() < 1e-6, "{efficiency}");
        assert!(efficiency.ci95[0] <= 0.95 && efficiency.ci95[1] > 1.5, "round 5's private widens it: {efficiency}");
        let json = serde_json::to_value(&reports[1]).unwrap();
        assert_eq!(json["efficiency_ci95"].as_array().unwrap().len(), 2);
        assert_eq!(json["speedup_ci95"].as_array().unwrap().len(), 2);
    }

    #[test]
    fn no_efficiency_without_private_or_its_one_thread_cell() {
        let mut without = vec![cell("ours", 1, 100.0), cell("ours", 2, 190.0)];
        scaling(&mut without, Look::First);
        assert!((without[1].speedup.unwrap() - 1.9).abs() < 1e-6);
        assert!(without.iter().all(|r| r.efficiency.is_none()));
        let mut no_base = vec![cell("ours", 1, 100.0), cell("ours", 2, 190.0), cell(PRIVATE, 2, 400.0)];
        scaling(&mut no_base, Look::First);
        assert!(no_base.iter().all(|r| r.efficiency.is_none()), "private has no 1-thread cell");
        let mut no_match = vec![cell("ours", 1, 100.0), cell("ours", 2, 190.0), cell(PRIVATE, 1, 400.0)];
        scaling(&mut no_match, Look::First);
        assert!((no_match[0].efficiency.unwrap() - 1.0).abs() < 1e-6);
        assert_eq!(no_match[1].efficiency, None, "private has no 2-thread cell");
    }

    #[test]
    fn private_runs_with_the_designs_and_gives_their_efficiency() {
        let mut request = request(vec![1, 2]);
        request.variants = request.workload.all_variants();
        let reports = request.run(|_, _, _| {});
        assert_eq!(reports.len(), 8, "3 designs and private at 1 and 2 threads");
        assert!(reports.iter().all(|r| r.efficiency.is_some()));
        assert!(reports.iter().filter(|r| r.threads == 1 || r.variant == PRIVATE).all(|r| r.efficiency == Some(1.0)));
        let text = table(&reports);
        assert!(text.lines().next().unwrap().contains(" eff "), "{text}");
        assert_eq!(text.lines().filter(|l| l.starts_with("private ")).count(), 2, "{text}");
    }

    #[test]
    fn no_speedup_without_a_one_thread_cell() {
        let reports = request(vec![2]).run(|_, _, _| {});
        assert!(reports.iter().all(|r| r.speedup.is_none()));
    }

    #[test]
    fn json_has_the_documented_fields() {
        let reports = request(vec![1]).run(|_, _, _| {});
        let json = serde_json::to_value(&reports).unwrap();
        let cell = &json[0];
        for key in ["workload", "variant", "threads", "runs", "iterations", "ops_per_sec", "per_op_ns", "speedup"] {
            assert!(cell.get(key).is_some(), "missing {key}");
        }
        assert!(cell["efficiency"].is_null(), "no private cell in this run");
        for key in ["ops_per_sec_samples", "thread_per_op_us", "fairness", "elapsed_s", "cpu_user_s", "cpu_system_s"] {
            assert!(cell.get(key).is_some(), "missing {key}");
        }
        assert_eq!(cell["ops_per_sec_samples"].as_array().unwrap().len(), 2);
        for key in ["median", "mean", "variance", "sigma", "min", "max", "ci95"] {
            assert!(cell["ops_per_sec"].get(key).is_some(), "missing ops_per_sec.{key}");
            assert!(cell["per_op_ns"].get(key).is_some(), "missing per_op_ns.{key}");
        }
        assert!(cell.get("hold_us").is_none(), "prim-lockref takes no hold");
    }

    #[test]
    fn human_units() {
        assert_eq!(human(12_345_678.0), "12.35M");
        assert_eq!(human(999.0), "999.00");
        assert_eq!(human(1500.0), "1.50k");
    }
}
