//! Per-CPU changes to an object's count and time that a reader folds into
//! an exact value: a directory's link count and its latest change time
//! beside the base attributes, so that creates and unlinks in one directory
//! on different CPUs write no common line; a file's latest modification
//! time beside its attributes, so that writes to different pages of it do
//! not either.
//!
//! Invariant: each CPU's record is a delta, a latest time and a version;
//! the version is odd exactly while one writer (the only one, by the
//! version's compare-and-swap) changes that record. A
//! [`snapshot`](PercpuChanges::snapshot) reads every version, the records,
//! then every version again, and accepts only when none was odd or moved:
//! then no record changed in between, so the sum and the maximum it
//! returns held together at one instant of that window. After
//! [`SNAPSHOT_TRIES`] such reads it takes every record's write section
//! itself, in CPU order, and reads them held.
//! [`clear_times_with`](PercpuChanges::clear_times_with) holds every
//! version odd while it changes the base, so a snapshot sees the times
//! and the base both before or both after.
//!
//! Cost: a line per CPU per object (64 bytes a CPU, aligned as the
//! kernel's `____cacheline_aligned` data is), of this object alone: a
//! snapshot reads those lines, twice, and no other object's (in the
//! per-CPU arena's rows, where slots of eight objects share a line, a
//! snapshot would read lines that other CPUs write for a mount's or a
//! file's count). A change is one compare-and-swap and three stores on
//! the caller's CPU's line.
//!
//! ```
//! use vfscale_sync::percpu_changes::PercpuChanges;
//!
//! let dir = PercpuChanges::new();
//! dir.record(1, 100);
//! dir.record(-1, 250);
//! let (delta, latest, base) = dir.snapshot(|| 2);
//! assert_eq!((delta, latest, base), (0, Some(250), 2));
//! dir.clear_times_with(|| ());
//! assert_eq!(dir.snapshot(|| ()).1, None);
//! ```

use crate::shim::{fence, wake_spinners, AtomicIsize, Ordering};
use crate::spin::relax;
use std::fmt;

/// Counts and times changed per CPU, folded by readers.
pub struct PercpuChanges {
    records: Box<[Record]>,
}

/// One CPU's changes.
#[derive(Default)]
#[repr(align(64))]
struct Record {
    version: AtomicIsize,
    delta: AtomicIsize,
    /// The latest time, offset so that 0 (a fresh record) is below every
    /// time.
    latest: AtomicIsize,
}

impl fmt::Debug for PercpuChanges {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let (delta, latest, ()) = self.snapshot(|| ());
        f.debug_struct("PercpuChanges").field("delta", &delta).field("latest", &latest).finish()
    }
}

impl Default for PercpuChanges {
    fn default() -> Self {
        PercpuChanges::new()
    }
}

/// A time in nanoseconds as its slot holds it: shifted so that the order
/// of times is the order of the slots' unsigned values, and 0 is none.
fn encode(time: i64) -> isize {
    (time as u64 ^ (1 << 63)) as isize
}

/// Most CPUs whose versions a snapshot keeps on the stack.
const STACK_CPUS: usize = 64;

/// Reads a snapshot tries before it holds the records still; one under
/// loom, so that its models explore the held read too.
pub const SNAPSHOT_TRIES: usize = if cfg!(loom) { 1 } else { 4 };

fn decode(slot: isize) -> Option<i64> {
    (slot != 0).then_some((slot as u64 ^ (1 << 63)) as i64)
}

impl PercpuChanges {
    /// No change recorded.
    pub fn new() -> PercpuChanges {
        PercpuChanges { records: (0..crate::cpu::possible_cpus()).map(|_| Record::default()).collect() }
    }

    /// Adds `delta` and raises the latest time to `time` (nanoseconds) on
    /// the caller's CPU.
    pub fn record(&self, delta: isize, time: i64) {
        self.record_on(crate::cpu::current_cpu(), delta, time);
    }

    /// [`record`](Self::record) on `cpu`'s record.
    pub fn record_on(&self, cpu: usize, delta: isize, time: i64) {
        let (_write, record) = self.write(cpu);
        record.delta.store(record.delta.load(Ordering::Relaxed) + delta, Ordering::Relaxed);
        let time = encode(time);
        if time as usize > record.latest.load(Ordering::Relaxed) as usize {
            record.latest.store(time, Ordering::Relaxed);
        }
    }

    /// Forgets every CPU's latest time and runs `f` (which sets the
    /// explicit time that replaces them in the base), as one step: every
    /// record's version stays odd until `f` has returned, so a
    /// [`snapshot`](Self::snapshot) sees the times and what `f` changed
    /// both before or both after, never the times gone beside the old
    /// base. The deltas stay. Records are taken in CPU order.
    pub fn clear_times_with<R>(&self, f: impl FnOnce() -> R) -> R {
        let held = self.hold_all();
        for record in self.records.iter() {
            record.latest.store(0, Ordering::Relaxed);
        }
        let result = f();
        drop(held);
        result
    }

    /// Every record's write section, taken in CPU order (the order every
    /// holder of more than one takes them in): no record changes until
    /// they drop.
    fn hold_all(&self) -> Vec<WriteSection<'_>> {
        (0..self.records.len()).map(|cpu| self.write(cpu).0).collect()
    }

    /// The sum of the deltas, the latest time (none if no record has one)
    /// and what `read_base` returned, all as they were at one instant.
    /// `read_base` reads the state the deltas are relative to and may run
    /// more than once. After [`SNAPSHOT_TRIES`] reads that changes got in
    /// the way of, it holds every record still (their write sections, in
    /// CPU order) and reads once more, so writers that never pause
    /// cannot keep it retrying.
    pub fn snapshot<B>(&self, mut read_base: impl FnMut() -> B) -> (isize, Option<i64>, B) {
        let cpus = self.records.len();
        let (mut on_stack, mut on_heap) = ([0isize; STACK_CPUS], Vec::new());
        let before: &mut [isize] = if cpus <= STACK_CPUS {
            &mut on_stack[..cpus]
        } else {
            on_heap.resize(cpus, 0);
            &mut on_heap
        };
        for _ in 0..SNAPSHOT_TRIES {
            for (cpu, seen) in before.iter_mut().enumerate() {
                *seen = self.stable_version(cpu);
            }
            let (delta, latest) = self.fold();
            let base = read_base();
            fence(Ordering::Acquire);
            if self
                .records
                .iter()
                .zip(before.iter())
                .all(|(record, &seen)| record.version.load(Ordering::Relaxed) == seen)
            {
                return (delta, decode(latest), base);
            }
        }
        let held = self.hold_all();
        let (delta, latest) = self.fold();
        let base = read_base();
        drop(held);
        (delta, decode(latest), base)
    }

    /// The sum of the records' deltas and the largest of their times (as
    /// slots hold them), read as they are: the caller makes them one
    /// instant (versions unmoved, or every record held).
    fn fold(&self) -> (isize, isize) {
        let (mut delta, mut latest) = (0isize, 0isize);
        for record in self.records.iter() {
            delta = delta.wrapping_add(record.delta.load(Ordering::Relaxed));
            let time = record.latest.load(Ordering::Relaxed);
            if time as usize > latest as usize {
                latest = time;
            }
        }
        (delta, latest)
    }

    /// `cpu`'s version once no write to its record is in progress.
    fn stable_version(&self, cpu: usize) -> isize {
        let version = &self.records[cpu].version;
        let mut spins = 0;
        loop {
            let seen = version.load(Ordering::Acquire);
            if seen & 1 == 0 {
                return seen;
            }
            relax(version, seen, &mut spins);
        }
    }

    /// Makes `cpu`'s version odd (waiting out another writer there) until
    /// the returned guard drops; and `cpu`'s record.
    fn write(&self, cpu: usize) -> (WriteSection<'_>, &Record) {
        let record = &self.records[cpu % self.records.len()];
        let version = &record.version;
        let mut spins = 0;
        loop {
            let seen = version.load(Ordering::Relaxed);
            if seen & 1 == 1 {
                // Yielding now and then: the writer may be another thread
                // of this CPU, preempted in its section.
                relax(version, seen, &mut spins);
            } else if version.compare_exchange(seen, seen + 1, Ordering::Acquire, Ordering::Relaxed).is_ok() {
                // Acquire: the last writer's stores (its release of the
                // version) are what this one reads and adds to.
                // Orders the odd version before the record's stores.
                fence(Ordering::Release);
                return (WriteSection { version, even: seen + 2 }, record);
            }
        }
    }
}

/// A write to one CPU's record: its version is odd until this drops.
struct WriteSection<'a> {
    version: &'a AtomicIsize,
    even: isize,
}

impl Drop for WriteSection<'_> {
    fn drop(&mut self) {
        self.version.store(self.even, Ordering::Release);
        wake_spinners(self.version);
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    #[test]
    fn deltas_sum_and_times_take_the_latest_across_cpus() {
        let changes = PercpuChanges::new();
        let cpus = changes.records.len();
        changes.record_on(0, 3, -5);
        changes.record_on(cpus - 1, -1, -7);
        changes.record_on(0, 0, i64::MIN + 1);
        assert_eq!(changes.snapshot(|| ()).0, 2);
        assert_eq!(changes.snapshot(|| ()).1, Some(-5), "times before 1970 order as times");
        assert_eq!(changes.clear_times_with(|| 9), 9);
        assert_eq!(changes.snapshot(|| 7), (2, None, 7));
    }
}

#[cfg(all(test, loom))]
mod loom_models {
    use super::*;
    use loom::sync::Arc;
    use loom::thread;

    /// One thread records +1 on CPU 0, then +2 on CPU 1: a snapshot sees
    /// a state that existed (sum 0, 1 or 3, never CPU 1's change without
    /// CPU 0's), and a later snapshot never an earlier time.
    #[test]
    fn a_snapshot_sees_one_instant() {
        loom::model(|| {
            let changes = Arc::new(PercpuChanges::new());
            let writer = {
                let changes = Arc::clone(&changes);
                thread::spawn(move || {
                    changes.record_on(0, 1, 10);
                    changes.record_on(1, 2, 20);
                })
            };
            let reader = {
                let changes = Arc::clone(&changes);
                thread::spawn(move || (changes.snapshot(|| ()), changes.snapshot(|| ())))
            };
            let ((first, first_time, ()), (second, second_time, ())) = reader.join().unwrap();
            for (sum, time) in [(first, first_time), (second, second_time)] {
                let expected_time = match sum {
                    0 => None,
                    1 => Some(10),
                    3 => Some(20),
                    _ => panic!("sum {sum} never existed"),
                };
                assert_eq!(time, expected_time, "the time beside sum {sum}");
            }
            assert!(first <= second, "went back from {first} to {second}");
            writer.join().unwrap();
            assert_eq!(changes.snapshot(|| ()), (3, Some(20), ()));
        });
    }

    /// A snapshot racing a clear of the times that also sets the base (an
    /// explicit time replacing the per-CPU ones) sees the time and the old
    /// base, or no time and the new base: never no time beside the old
    /// base.
    #[test]
    fn a_clear_and_its_base_are_one_step() {
        loom::model(|| {
            let changes = Arc::new(PercpuChanges::new());
            let base = Arc::new(crate::shim::AtomicU64::new(0));
            changes.record_on(1, 0, 10);
            let clear = {
                let (changes, base) = (Arc::clone(&changes), Arc::clone(&base));
                thread::spawn(move || changes.clear_times_with(|| base.store(1, Ordering::Relaxed)))
            };
            let reader = {
                let (changes, base) = (Arc::clone(&changes), Arc::clone(&base));
                thread::spawn(move || changes.snapshot(|| base.load(Ordering::Relaxed)))
            };
            let (_, time, seen) = reader.join().unwrap();
            assert!(matches!((time, seen), (Some(10), 0) | (None, 1)), "time {time:?} beside base {seen}");
            clear.join().unwrap();
        });
    }

    /// Two writers share one CPU's record (a thread preempted there): the
    /// version's compare-and-swap keeps both changes.
    #[test]
    fn writers_on_one_cpu_both_count() {
        loom::model(|| {
            let changes = Arc::new(PercpuChanges::new());
            let other = {
                let changes = Arc::clone(&changes);
                thread::spawn(move || changes.record_on(0, 1, 5))
            };
            changes.record_on(0, 2, 3);
            other.join().unwrap();
            assert_eq!(changes.snapshot(|| ()), (3, Some(5), ()));
        });
    }
}
