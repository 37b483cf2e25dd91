//! `vfscale bench`: runs every (variant, threads) cell of one workload and
//! reports each as a table row or a JSON object.

use crate::harness::{run_cell, CellStats, RunPlan};
use crate::workloads::{Params, Workload};
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
    /// Measured runs.
    pub runs: usize,
    /// Operations per thread per run.
    pub iterations: u64,
    /// `--hold-us`, for workloads that take it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub hold_us: Option<u64>,
    /// `--work-us`, for workloads that take it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub work_us: Option<u64>,
    /// Throughput and per-op time.
    #[serde(flatten)]
    pub stats: CellStats,
    /// Median throughput over the median at 1 thread of the same variant,
    /// when 1 thread was measured.
    pub speedup: Option<f64>,
}

impl BenchRequest {
    /// Runs every cell, variant-major, calling `progress` before each.
    pub fn run(&self, mut progress: impl FnMut(&str, usize)) -> Vec<CellReport> {
        let takes_hold = self.workload.takes_hold;
        let mut reports = Vec::new();
        for &variant in &self.variants {
            let subject = (self.workload.build)(variant, &self.params);
            let first = reports.len();
            for &threads in &self.threads {
                progress(variant, threads);
                let stats = run_cell(subject.as_ref(), threads, self.plan).stats();
                reports.push(CellReport {
                    workload: self.workload.name,
                    variant,
                    threads,
                    runs: self.plan.runs,
                    iterations: self.plan.iterations,
                    hold_us: takes_hold.then_some(self.params.hold_us),
                    work_us: takes_hold.then_some(self.params.work_us),
                    stats,
                    speedup: None,
                });
            }
            let base = reports[first..].iter().find(|r| r.threads == 1).map(|r| r.stats.ops_per_sec.median);
            for report in &mut reports[first..] {
                report.speedup = base.map(|b| report.stats.ops_per_sec.median / b);
            }
        }
        reports
    }
}

/// Renders reports as an aligned text table.
pub fn table(reports: &[CellReport]) -> String {
    let mut out = String::new();
    let header =
        ["variant", "threads", "median ops/s", "mean", "variance", "sigma", "min", "max", "ns/op", "S", "user s", "sys s"];
    let mut rows = vec![header.map(String::from).to_vec()];
    for r in reports {
        let o = &r.stats.ops_per_sec;
        rows.push(vec![
            r.variant.to_string(),
            r.threads.to_string(),
            human(o.median),
            human(o.mean),
            format!("{:.3e}", o.variance),
            human(o.sigma),
            human(o.min),
            human(o.max),
            format!("{:.1}", r.stats.per_op_ns.median),
            r.speedup.map_or("-".into(), |s| format!("{s:.2}")),
            format!("{:.3}", r.stats.cpu_user_s.median),
            format!("{:.3}", r.stats.cpu_system_s.median),
        ]);
    }
    let widths: Vec<usize> = (0..header.len()).map(|c| rows.iter().map(|r| r[c].len()).max().unwrap_or(0)).collect();
    for row in rows {
        let line: Vec<String> = row
            .iter()
            .enumerate()
            .map(|(c, cell)| if c == 0 { format!("{cell:<w$}", w = widths[c]) } else { format!("{cell:>w$}", w = widths[c]) })
            .collect();
        out.push_str(line.join("  ").trim_end());
        out.push('\n');
    }
    out
}

/// 12345678.0 -> "12.35M".
fn human(v: f64) -> String {
    let (scaled, unit) = match v.abs() {
        a if a >= 1e9 => (v / 1e9, "G"),
        a if a >= 1e6 => (v / 1e6, "M"),
        a if a >= 1e3 => (v / 1e3, "k"),
        _ => (v, ""),
    };
    format!("{scaled:.2}{unit}")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::workloads;

    fn request(threads: Vec<usize>) -> BenchRequest {
        BenchRequest {
            workload: workloads::find("prim-lockref").unwrap(),
            variants: vec!["atomic", "lockref"],
            threads,
            plan: RunPlan { runs: 2, iterations: 1000 },
            params: Params::default(),
        }
    }

    #[test]
    fn every_cell_is_reported_with_speedup_against_one_thread() {
        let mut seen = Vec::new();
        let reports = request(vec![1, 2]).run(|v, t| seen.push((v.to_string(), t)));
        assert_eq!(seen.len(), 4);
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

    #[test]
    fn no_speedup_without_a_one_thread_cell() {
        let reports = request(vec![2]).run(|_, _| {});
        assert!(reports.iter().all(|r| r.speedup.is_none()));
    }

    #[test]
    fn json_has_the_documented_fields() {
        let reports = request(vec![1]).run(|_, _| {});
        let json = serde_json::to_value(&reports).unwrap();
        let cell = &json[0];
        for key in ["workload", "variant", "threads", "runs", "iterations", "ops_per_sec", "per_op_ns", "speedup"] {
            assert!(cell.get(key).is_some(), "missing {key}");
        }
        for key in ["median", "mean", "variance", "sigma", "min", "max"] {
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
