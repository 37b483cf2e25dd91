//! `prim-mprotect`: seed 002's shape. Every thread takes one rwsem for
//! write, holds it for `--hold-us` of CPU work (mprotect under mmap_sem),
//! releases it, then does `--work-us` of work outside the lock. With long
//! holds and more threads than CPUs, spinning waiters steal the CPU the
//! owner needs: the 3.16 optimistic-spinning collapse.

use super::busy::BusyWork;
use super::private::padded;
use super::{Params, Subject, Workload};
use vfscale_sync::poison::unpoisoned;
use vfscale_sync::rwsem::{RwSem, SpinPolicy};

pub(super) const WORKLOAD: Workload = Workload {
    name: "prim-mprotect",
    about: "write-lock one rwsem, busy --hold-us inside, --work-us outside (op = one lock/unlock)",
    variants: &["adaptive", "block", "spin", "std-rwlock", "parking-lot"],
    default_iterations: |p| (20_000 / (p.hold_us + p.work_us + 1)).max(50),
    takes_hold: true,
    build,
};

fn build(variant: &str, params: &Params) -> Box<dyn Subject> {
    let hold = BusyWork::micros(params.hold_us);
    let work = BusyWork::micros(params.work_us);
    match variant {
        "adaptive" => padded(WriterSubject { lock: RwSem::new((), SpinPolicy::Adaptive), hold, work }),
        "block" => padded(WriterSubject { lock: RwSem::new((), SpinPolicy::Block), hold, work }),
        "spin" => padded(WriterSubject { lock: RwSem::new((), SpinPolicy::Spin), hold, work }),
        "std-rwlock" => padded(WriterSubject { lock: std::sync::RwLock::new(()), hold, work }),
        "parking-lot" => padded(WriterSubject { lock: parking_lot::RwLock::new(()), hold, work }),
        other => unreachable!("variant {other} validated by the caller"),
    }
}

/// A lock that can be held for writing around a closure.
trait WriteLock: Sync {
    fn with_write(&self, f: impl FnOnce());
}

impl WriteLock for RwSem<()> {
    fn with_write(&self, f: impl FnOnce()) {
        let _guard = self.write();
        f();
    }
}

impl WriteLock for std::sync::RwLock<()> {
    fn with_write(&self, f: impl FnOnce()) {
        let _guard = unpoisoned(self.write());
        f();
    }
}

impl WriteLock for parking_lot::RwLock<()> {
    fn with_write(&self, f: impl FnOnce()) {
        let _guard = self.write();
        f();
    }
}

struct WriterSubject<L> {
    lock: L,
    hold: BusyWork,
    work: BusyWork,
}

impl<L: WriteLock> Subject for WriterSubject<L> {
    fn run_thread(&self, _thread: usize, iterations: u64) {
        for _ in 0..iterations {
            self.lock.with_write(|| self.hold.run());
            self.work.run();
        }
    }
}
