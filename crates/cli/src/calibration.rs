//! The machine's ceiling outside the process's shared state: how far
//! independent work over private memory scales here, measured at the
//! start of every `bench` and `reproduce` and printed with the machine
//! line.
//!
//! `private` (see the `workloads::private` module) gives each thread its
//! own instance of a design, but the instances still share the process's
//! allocator, crossbeam-epoch collector and per-CPU slot arena, so a
//! bottleneck there lowers `private` and the designs alike and leaves
//! their efficiency at 1. Here each thread probes and updates a hash table
//! of its own, allocated before the run and as big as `walk`'s tree
//! (4096 names), with no allocation, epoch pin or shared word during the
//! run: only cores, caches, memory and the scheduler stand between it and
//! perfect scaling. A workload whose `private` scales below 0.9 of this
//! is limited by something the process shares, and the run names it.

use crate::bench::CellReport;
use crate::harness::{run_cells, RunPlan};
use crate::stats::{median, RoundRatio};
use crate::workloads::{Subject, PRIVATE};
use crossbeam_utils::CachePadded;
use serde::Serialize;
use std::sync::{Mutex, RwLock};
use std::time::Duration;
use vfscale_sync::poison::unpoisoned;

/// How long a 1-thread run of the calibration lasts.
pub const RUN_TIME: Duration = Duration::from_millis(20);
/// Below this share of the calibration's speedup, `private` is limited by
/// what the process shares.
pub const CEILING_SHARE: f64 = 0.9;

/// Names in each thread's table: `walk`'s tree has as many files.
const NAMES: usize = 4096;
/// Slots of the open-addressed table: half full.
const SLOTS: usize = 2 * NAMES;
/// Lookups per operation, as `walk` looks up four components.
const LOOKUPS: usize = 4;

/// One thread's table: keys and values, open addressing, linear probing.
struct Table {
    keys: Box<[u64]>,
    values: Box<[u64]>,
    /// The thread's random state, kept between runs.
    state: u64,
}

impl Table {
    fn new(seed: u64) -> Table {
        let mut table = Table { keys: vec![0; SLOTS].into(), values: vec![0; SLOTS].into(), state: seed | 1 };
        for name in 1..=NAMES as u64 {
            let slot = table.find(name);
            table.keys[slot] = name;
        }
        table
    }

    /// The slot of `key`, or of the empty slot where it would go.
    fn find(&self, key: u64) -> usize {
        let mut slot = (key.wrapping_mul(0x9e37_79b9_7f4a_7c15) >> 51) as usize % SLOTS;
        while self.keys[slot] != key && self.keys[slot] != 0 {
            slot = (slot + 1) % SLOTS;
        }
        slot
    }

    /// One operation: four lookups of random names, then an update of the
    /// last one's value.
    fn operate(&mut self) {
        let mut slot = 0;
        for _ in 0..LOOKUPS {
            self.state ^= self.state << 13;
            self.state ^= self.state >> 7;
            self.state ^= self.state << 17;
            slot = self.find(self.state % NAMES as u64 + 1);
        }
        self.values[slot] = self.values[slot].wrapping_add(1);
    }
}

/// Private tables, one per thread, each on lines of its own.
struct PrivateTables {
    tables: RwLock<Vec<CachePadded<Mutex<Table>>>>,
}

impl Subject for PrivateTables {
    fn prepare_run(&self, threads: usize) {
        let mut tables = unpoisoned(self.tables.write());
        while tables.len() < threads {
            let seed = tables.len() as u64 + 1;
            tables.push(CachePadded::new(Mutex::new(Table::new(seed))));
        }
    }

    fn run_thread(&self, thread: usize, iterations: u64) {
        // Both locks are taken once per run, before the loop; the loop
        // touches only this thread's table.
        let tables = unpoisoned(self.tables.read());
        let mut table = unpoisoned(tables[thread].lock());
        for _ in 0..iterations {
            table.operate();
        }
        std::hint::black_box(&table.values);
    }
}

/// The speedup of the calibration at one thread count.
#[derive(Debug, Clone, Copy, Serialize)]
pub struct Speedup {
    /// Threads.
    pub threads: usize,
    /// Throughput at `threads` over throughput at 1, round by round.
    pub s: f64,
    /// 95% interval of `s`.
    pub ci95: [f64; 2],
}

/// What the calibration measured: the `calibration` object of the JSON.
#[derive(Debug, Clone, Serialize)]
pub struct Calibration {
    /// Speedup at 2 threads, when 2 threads were measured.
    pub s2: Option<f64>,
    /// Speedup at 16 threads, when 16 threads were measured.
    pub s16: Option<f64>,
    /// Every thread count's speedup, 1 thread excluded.
    pub speedups: Vec<Speedup>,
    /// Median operations per second of one thread.
    pub ops_per_sec_1: f64,
    /// Measured runs per thread count.
    pub runs: usize,
    /// Operations per thread per run.
    pub iterations: u64,
}

impl Calibration {
    /// Measures the calibration at 1 thread and at each of `threads`, in
    /// rounds of `runs` runs; a 1-thread run lasts about `run_time`.
    pub fn measure(threads: &[usize], runs: usize, run_time: Duration) -> Calibration {
        let subject = PrivateTables { tables: RwLock::default() };
        let probe = 20_000;
        let probed = run_cells(&[(&subject, 1)], RunPlan::new(1, probe), |_, _| {});
        let probe_secs = probed[0].elapsed[0].as_secs_f64().max(1e-6);
        let iterations = ((probe as f64 * run_time.as_secs_f64() / probe_secs) as u64).max(1000);
        let counts: Vec<usize> = std::iter::once(1)
            .chain(threads.iter().copied())
            .collect::<std::collections::BTreeSet<_>>()
            .into_iter()
            .collect();
        let cells: Vec<(&dyn Subject, usize)> = counts.iter().map(|&t| (&subject as &dyn Subject, t)).collect();
        let measured: Vec<Vec<f64>> = run_cells(&cells, RunPlan::new(runs, iterations), |_, _| {})
            .iter()
            .map(|cell| cell.stats().ops_per_sec_samples)
            .collect();
        let speedups: Vec<Speedup> = counts
            .iter()
            .zip(&measured)
            .skip(1)
            .filter_map(|(&threads, at_t)| {
                let s = RoundRatio::of_rounds(&[at_t, &measured[0]], |c| c[0] / c[1])?;
                Some(Speedup { threads, s: s.median, ci95: s.ci95 })
            })
            .collect();
        let at = |threads: usize| speedups.iter().find(|s| s.threads == threads).map(|s| s.s);
        Calibration {
            s2: at(2),
            s16: at(16),
            ops_per_sec_1: median(&measured[0]).expect("runs >= 1"),
            speedups: speedups.clone(),
            runs,
            iterations,
        }
    }

    /// The speedup at `threads`, if measured.
    pub fn speedup(&self, threads: usize) -> Option<f64> {
        self.speedups.iter().find(|s| s.threads == threads).map(|s| s.s)
    }

    /// A line for each workload and thread count where `private` scales
    /// below [`CEILING_SHARE`] of the calibration: that workload's ceiling
    /// is lowered by what the process shares.
    pub fn ceiling_notes(&self, cells: &[CellReport]) -> Vec<String> {
        cells
            .iter()
            .filter(|c| c.variant == PRIVATE && c.threads > 1)
            .filter_map(|c| {
                let (s, ceiling) = (c.speedup?, self.speedup(c.threads)?);
                (s < CEILING_SHARE * ceiling).then(|| {
                    format!(
                        "{}: private S{} {s:.2} is {:.2} x the calibration's {ceiling:.2}: what the process \
                         shares (allocator, epoch, arena), or the machine's noise between the two, lowers this \
                         workload's ceiling",
                        c.workload,
                        c.threads,
                        s / ceiling
                    )
                })
            })
            .collect()
    }

    /// One line for the header of a run: `calibration (private memory per
    /// thread, nothing shared): S2 1.98 [1.95, 2.01], S16 1.99 [...]`.
    pub fn line(&self) -> String {
        let speedups: Vec<String> = self
            .speedups
            .iter()
            .map(|s| format!("S{} {}", s.threads, RoundRatio { median: s.s, ci95: s.ci95 }))
            .collect();
        format!(
            "calibration (a private table per thread, nothing shared; {:.1}M ops/s on 1 thread): {}",
            self.ops_per_sec_1 / 1e6,
            if speedups.is_empty() { "no thread count above 1".to_string() } else { speedups.join(", ") }
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_name_is_found_and_an_operation_writes_one_value() {
        let mut table = Table::new(7);
        for name in 1..=NAMES as u64 {
            assert_eq!(table.keys[table.find(name)], name);
        }
        assert_eq!(table.keys[table.find(NAMES as u64 + 1)], 0, "a missing name ends at an empty slot");
        for _ in 0..100 {
            table.operate();
        }
        assert_eq!(table.values.iter().sum::<u64>(), 100);
    }

    #[test]
    fn a_calibration_measures_each_thread_count() {
        let c = Calibration::measure(&[1, 2, 3], 2, Duration::from_millis(1));
        assert_eq!(c.speedups.iter().map(|s| s.threads).collect::<Vec<_>>(), [2, 3]);
        assert!(c.s2.is_some() && c.s16.is_none() && c.speedup(3).is_some());
        assert!(c.speedups.iter().all(|s| s.ci95[0] <= s.s && s.s <= s.ci95[1]));
        assert!(c.ops_per_sec_1 > 0.0 && c.iterations >= 1000);
        assert!(c.line().contains("S2 ") && c.line().contains("S3 "), "{}", c.line());
        let mut private = crate::bench::tests::rounds(PRIVATE, 2, &[1.0]);
        private.speedup = Some(0.5 * c.s2.unwrap());
        let notes = c.ceiling_notes(&[private.clone()]);
        assert!(
            notes.len() == 1 && notes[0].starts_with("w: private S2 ") && notes[0].contains(" 0.50 x "),
            "{notes:?}"
        );
        private.speedup = c.s2;
        assert!(c.ceiling_notes(&[private]).is_empty());
        let json = serde_json::to_value(&c).unwrap();
        for key in ["s2", "s16", "speedups", "ops_per_sec_1", "runs", "iterations"] {
            assert!(json.get(key).is_some(), "missing {key}");
        }
    }
}
