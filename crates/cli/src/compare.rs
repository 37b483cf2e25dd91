//! `vfscale compare A.json B.json`: the verdicts of `reproduce` between two
//! saved runs — two machines, two builds, or two kernels. Cells are matched
//! by workload, variant, thread count and hold time; B is judged against A
//! with the same rank test and bootstrap ratio as a before/after pair.
//!
//! Reads the JSON of `reproduce --json`, `bench --json` and `host --json`.

use crate::machine::Machine;
use crate::reproduce::{verdict_line, PairVerdict};
use crate::stats;
use serde::Deserialize;
use serde_json::Value;
use std::fmt::Write as _;
use std::path::Path;

/// The fields of a saved cell that a comparison needs.
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct SavedCell {
    /// Workload name.
    pub workload: String,
    /// Variant name.
    pub variant: String,
    /// Threads.
    pub threads: usize,
    /// `--hold-us`, for workloads that take it.
    #[serde(default)]
    pub hold_us: Option<u64>,
    /// Throughput of each measured run.
    pub ops_per_sec_samples: Vec<f64>,
}

/// A saved run: its machine (when recorded) and its cells.
#[derive(Debug, Clone)]
pub struct Saved {
    /// Where it ran (`reproduce` records it; `bench` does not).
    pub machine: Option<Machine>,
    /// Every cell found in the file.
    pub cells: Vec<SavedCell>,
}

/// Reads a saved run.
pub fn load(path: &Path) -> Result<Saved, String> {
    let text = std::fs::read_to_string(path).map_err(|e| format!("cannot read {}: {e}", path.display()))?;
    let value: Value = serde_json::from_str(&text).map_err(|e| format!("{} is not JSON: {e}", path.display()))?;
    parse(&value).map_err(|e| format!("{}: {e}", path.display()))
}

/// Finds the cells of a `bench` array or of a `reproduce` object.
pub fn parse(value: &Value) -> Result<Saved, String> {
    let mut raw = Vec::new();
    collect_cells(value, &mut raw);
    if raw.is_empty() {
        return Err("no cells (expected the JSON of vfscale reproduce, bench or host)".into());
    }
    let cells = raw
        .into_iter()
        .map(|v| SavedCell::deserialize(v).map_err(|e| format!("a cell lacks a field: {e}")))
        .collect::<Result<_, _>>()?;
    let machine = value.get("machine").and_then(|m| Machine::deserialize(m).ok());
    Ok(Saved { machine, cells })
}

fn collect_cells<'a>(value: &'a Value, out: &mut Vec<&'a Value>) {
    match value {
        Value::Array(items) if items.iter().all(|i| i.get("ops_per_sec_samples").is_some()) && !items.is_empty() => {
            out.extend(items)
        }
        Value::Array(items) => items.iter().for_each(|i| collect_cells(i, out)),
        Value::Object(map) => map.values().for_each(|v| collect_cells(v, out)),
        _ => {}
    }
}

/// Judges every cell of `b` against the matching cell of `a`.
pub fn verdicts(a: &Saved, b: &Saved) -> Vec<PairVerdict> {
    b.cells
        .iter()
        .filter_map(|cb| {
            let ca = a.cells.iter().find(|ca| {
                (&ca.workload, &ca.variant, ca.threads, ca.hold_us)
                    == (&cb.workload, &cb.variant, cb.threads, cb.hold_us)
            })?;
            let comparison = stats::compare(&ca.ops_per_sec_samples, &cb.ops_per_sec_samples)?;
            Some(PairVerdict {
                workload: cb.workload.clone(),
                hold_us: cb.hold_us,
                threads: cb.threads,
                before: format!("{} (A)", ca.variant),
                after: format!("{} (B)", cb.variant),
                comparison,
            })
        })
        .collect()
}

/// The text `vfscale compare` prints.
pub fn render(a: &Saved, b: &Saved, a_name: &str, b_name: &str) -> String {
    let mut out = String::new();
    let machine = |m: &Option<Machine>| {
        m.as_ref()
            .map_or("machine not recorded".to_string(), |m| format!("{}, {} CPUs, {}", m.kernel, m.cpus, m.cpu_model))
    };
    let _ = writeln!(out, "A: {a_name} ({})", machine(&a.machine));
    let _ = writeln!(out, "B: {b_name} ({})", machine(&b.machine));
    let all = verdicts(a, b);
    let _ = writeln!(out, "B vs A: throughput ratio [bootstrap 95% CI], Mann-Whitney U at 95%:");
    for v in &all {
        let hold = v.hold_us.map_or(String::new(), |h| format!(" hold {h}us"));
        let _ = writeln!(out, "  {}{hold} {}", v.workload, verdict_line(v));
    }
    let unmatched = b.cells.len() - all.len();
    if all.is_empty() {
        let _ = writeln!(out, "  no cell of B matches a cell of A (same workload, variant, threads, hold)");
    } else if unmatched > 0 {
        let _ = writeln!(out, "  ({unmatched} cells of B have no comparable cell in A)");
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn cell(variant: &str, samples: &[f64]) -> Value {
        json!({"workload": "walk", "variant": variant, "threads": 2, "ops_per_sec_samples": samples, "ops_per_sec": {}})
    }

    #[test]
    fn finds_cells_in_bench_arrays_and_reproduce_objects() {
        let bench = json!([cell("rcu", &[1.0, 2.0])]);
        assert_eq!(parse(&bench).unwrap().cells.len(), 1);
        let repro = json!({"machine": {"kernel": "Linux 6", "cpus": 2, "cpu_model": "x", "arch": "x86_64"},
            "experiments": [{"cases": [{"cells": [cell("rcu", &[1.0]), cell("ref", &[2.0])]}]}]});
        let saved = parse(&repro).unwrap();
        assert_eq!(saved.cells.len(), 2);
        assert_eq!(saved.machine.unwrap().cpus, 2);
        assert!(parse(&json!({"x": 1})).is_err());
    }

    #[test]
    fn runs_with_and_without_private_and_efficiency_compare() {
        let old = parse(&json!([cell("rcu", &[10.0, 11.0, 10.5, 10.2])])).unwrap();
        let mut rcu = cell("rcu", &[10.1, 10.9, 10.4, 10.3]);
        rcu["efficiency"] = json!(0.93);
        let mut private = cell("private", &[20.0, 21.0, 20.5, 20.2]);
        private["efficiency"] = json!(1.0);
        let new = parse(&json!([rcu, private])).unwrap();
        let text = render(&old, &new, "old.json", "new.json");
        assert_eq!(verdicts(&old, &new).len(), 1, "{text}");
        assert!(text.contains("(1 cells of B have no comparable cell in A)"), "{text}");
        assert_eq!(verdicts(&new, &new).len(), 2, "private (B) vs private (A) compares two machines' ceilings");
    }

    #[test]
    fn b_is_judged_against_a_cell_by_cell() {
        let a = parse(&json!([cell("rcu", &[10.0, 11.0, 10.5, 10.2]), cell("ref", &[5.0, 5.1, 4.9, 5.2])])).unwrap();
        let b = parse(&json!([cell("rcu", &[20.0, 21.0, 20.5, 20.2]), cell("ref", &[5.05, 5.0, 5.15, 4.95])])).unwrap();
        let v = verdicts(&a, &b);
        assert_eq!(v.len(), 2);
        assert_eq!(v[0].comparison.verdict, stats::Verdict::Faster);
        assert_eq!(v[1].comparison.verdict, stats::Verdict::NoSignificantDifference);
        let text = render(&a, &b, "a.json", "b.json");
        assert!(text.contains("rcu (B) vs rcu (A)") && text.contains("faster"), "{text}");
        assert!(text.contains("machine not recorded"));
    }
}
