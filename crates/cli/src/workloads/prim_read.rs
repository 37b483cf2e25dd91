//! `prim-read`: a read-mostly lock, the shape of `file_lock_list` and of a
//! directory lock under path walks: 99 of every 100 operations read a small
//! protected value, one writes it; the critical sections are tiny, so the
//! cost measured is the lock's own cache-line traffic.

use super::private::padded;
use super::{Params, Subject, Workload};
use crossbeam_utils::sync::ShardedLock;
use std::hint::black_box;
use vfscale_sync::lglock::LgPerCpu;
use vfscale_sync::percpu_rwsem::PerCpuRwSem;
use vfscale_sync::poison::unpoisoned;
use vfscale_sync::rwsem::{RwSem, SpinPolicy};
use vfscale_sync::spin::TasLock;

pub(super) const WORKLOAD: Workload = Workload {
    name: "prim-read",
    about: "read a lock-protected value; every 100th op writes it instead",
    variants: &["lglock", "percpu-rwsem", "rwsem", "std-rwlock", "parking-lot", "sharded-lock"],
    default_iterations: |_| 500_000,
    takes_hold: false,
    build,
};

/// One write per this many operations.
const WRITE_EVERY: u64 = 100;

fn build(variant: &str, _params: &Params) -> Box<dyn Subject> {
    match variant {
        "lglock" => padded(ReadSubject(LgPerCpu::<TasLock, u64>::new())),
        "percpu-rwsem" => padded(ReadSubject(PerCpuRwSem::new(0u64))),
        "rwsem" => padded(ReadSubject(RwSem::new(0u64, SpinPolicy::Adaptive))),
        "std-rwlock" => padded(ReadSubject(std::sync::RwLock::new(0u64))),
        "parking-lot" => padded(ReadSubject(parking_lot::RwLock::new(0u64))),
        "sharded-lock" => padded(ReadSubject(ShardedLock::new(0u64))),
        other => unreachable!("variant {other} validated by the caller"),
    }
}

/// A value behind a reader-writer lock.
trait ReadMostly: Sync {
    fn read(&self) -> u64;
    fn write(&self, value: u64);
}

/// lglock: readers take their CPU's lock and read their CPU's copy; a writer
/// takes the global mode and updates every copy. Test-and-set slots: with
/// more threads than CPUs, threads of one CPU share a slot, and a FIFO
/// (ticket) slot lock stalls behind a preempted waiter (measured: 0.2M ops/s
/// at 16 threads against 80M with test-and-set).
impl ReadMostly for LgPerCpu<TasLock, u64> {
    fn read(&self) -> u64 {
        *self.local_lock()
    }
    fn write(&self, value: u64) {
        for slot in self.global_lock().iter_mut() {
            *slot = value;
        }
    }
}

impl ReadMostly for PerCpuRwSem<u64> {
    fn read(&self) -> u64 {
        *PerCpuRwSem::read(self)
    }
    fn write(&self, value: u64) {
        *PerCpuRwSem::write(self) = value;
    }
}

impl ReadMostly for RwSem<u64> {
    fn read(&self) -> u64 {
        *RwSem::read(self)
    }
    fn write(&self, value: u64) {
        *RwSem::write(self) = value;
    }
}

impl ReadMostly for std::sync::RwLock<u64> {
    fn read(&self) -> u64 {
        *unpoisoned(std::sync::RwLock::read(self))
    }
    fn write(&self, value: u64) {
        *unpoisoned(std::sync::RwLock::write(self)) = value;
    }
}

impl ReadMostly for parking_lot::RwLock<u64> {
    fn read(&self) -> u64 {
        *parking_lot::RwLock::read(self)
    }
    fn write(&self, value: u64) {
        *parking_lot::RwLock::write(self) = value;
    }
}

impl ReadMostly for ShardedLock<u64> {
    fn read(&self) -> u64 {
        *unpoisoned(ShardedLock::read(self))
    }
    fn write(&self, value: u64) {
        *unpoisoned(ShardedLock::write(self)) = value;
    }
}

struct ReadSubject<L>(L);

impl<L: ReadMostly> Subject for ReadSubject<L> {
    fn run_thread(&self, thread: usize, iterations: u64) {
        for i in 0..iterations {
            if i % WRITE_EVERY == WRITE_EVERY - 1 {
                self.0.write(thread as u64 ^ i);
            } else {
                black_box(self.0.read());
            }
        }
    }
}
