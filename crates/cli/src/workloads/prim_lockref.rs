//! `prim-lockref`: every thread takes and drops a reference on one shared
//! count, the way every path walk did on a hot dentry before RCU walk
//! (seeds 000 and 003). Op = one get + one put.

use super::private::padded;
use super::{Params, Subject, Workload};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Mutex;
use vfscale_sync::lockref::LockRef;
use vfscale_sync::poison::unpoisoned;

pub(super) const WORKLOAD: Workload = Workload {
    name: "prim-lockref",
    about: "get then put a reference on one shared count (op = get + put)",
    variants: &["lockref", "mutex", "atomic"],
    default_iterations: |_| 500_000,
    takes_hold: false,
    build,
};

fn build(variant: &str, _params: &Params) -> Box<dyn Subject> {
    match variant {
        "lockref" => padded(RefSubject(LockRef::new(1))),
        "mutex" => padded(RefSubject(Mutex::new(1u32))),
        "atomic" => padded(RefSubject(AtomicU32::new(1))),
        other => unreachable!("variant {other} validated by the caller"),
    }
}

/// A reference count: take one, drop one.
trait RefCount: Sync {
    fn get(&self);
    fn put(&self);
}

impl RefCount for LockRef {
    fn get(&self) {
        LockRef::get(self);
    }
    fn put(&self) {
        // The count never falls to 1 here (the subject owns one reference),
        // so the lockless path decrements unless the lock is held.
        if let Some(mut guard) = self.put_or_lock() {
            guard.dec();
        }
    }
}

impl RefCount for Mutex<u32> {
    fn get(&self) {
        *unpoisoned(self.lock()) += 1;
    }
    fn put(&self) {
        *unpoisoned(self.lock()) -= 1;
    }
}

impl RefCount for AtomicU32 {
    fn get(&self) {
        self.fetch_add(1, Ordering::Acquire);
    }
    fn put(&self) {
        self.fetch_sub(1, Ordering::Release);
    }
}

struct RefSubject<R>(R);

impl<R: RefCount> Subject for RefSubject<R> {
    fn run_thread(&self, _thread: usize, iterations: u64) {
        for _ in 0..iterations {
            self.0.get();
            self.0.put();
        }
    }
}
