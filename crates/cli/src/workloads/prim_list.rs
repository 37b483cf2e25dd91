//! `prim-list`: seed 001's pattern on the list alone. Each thread adds items
//! and removes them again, keeping up to `WINDOW` of its own alive, so the
//! list is under the add/remove storm of inode creation and eviction.

use super::private::padded;
use super::{Params, Subject, Workload};
use std::collections::VecDeque;
use std::sync::Mutex;
use vfscale_sync::dlock_list::{ConcurrentList, GlobalList, ListHandle, PerCpuList};
use vfscale_sync::poison::unpoisoned;

pub(super) const WORKLOAD: Workload = Workload {
    name: "prim-list",
    about: "add one item to a shared list and remove an older one of this thread's (op = add + remove)",
    variants: &["percpu", "global", "std-mutex-vec"],
    default_iterations: |_| 200_000,
    takes_hold: false,
    build,
};

/// Items each thread keeps alive between its add and its remove.
const WINDOW: usize = 64;

fn build(variant: &str, _params: &Params) -> Box<dyn Subject> {
    match variant {
        "percpu" => padded(ListSubject(Dlock(PerCpuList::<u64>::new()))),
        "global" => padded(ListSubject(Dlock(GlobalList::<u64>::new()))),
        "std-mutex-vec" => padded(ListSubject(MutexVec::default())),
        other => unreachable!("variant {other} validated by the caller"),
    }
}

/// What the workload needs of a list: add, and remove by handle.
trait BenchList: Sync {
    type Handle: Copy;
    fn add(&self, value: u64) -> Self::Handle;
    fn remove(&self, handle: Self::Handle) -> bool;
}

/// Our lists, through their common trait.
struct Dlock<L>(L);

impl<L: ConcurrentList<u64>> BenchList for Dlock<L> {
    type Handle = ListHandle;
    fn add(&self, value: u64) -> ListHandle {
        self.0.add(value)
    }
    fn remove(&self, handle: ListHandle) -> bool {
        self.0.remove(handle).is_some()
    }
}

/// The peer: a `std::sync::Mutex` around a vector with a free-slot list.
#[derive(Default)]
struct MutexVec(Mutex<Slots>);

#[derive(Default)]
struct Slots {
    items: Vec<Option<u64>>,
    free: Vec<usize>,
}

impl BenchList for MutexVec {
    type Handle = usize;
    fn add(&self, value: u64) -> usize {
        let mut slots = unpoisoned(self.0.lock());
        match slots.free.pop() {
            Some(slot) => {
                slots.items[slot] = Some(value);
                slot
            }
            None => {
                slots.items.push(Some(value));
                slots.items.len() - 1
            }
        }
    }
    fn remove(&self, slot: usize) -> bool {
        let mut slots = unpoisoned(self.0.lock());
        let removed = slots.items[slot].take().is_some();
        if removed {
            slots.free.push(slot);
        }
        removed
    }
}

struct ListSubject<L>(L);

impl<L: BenchList> Subject for ListSubject<L> {
    fn run_thread(&self, thread: usize, iterations: u64) {
        let mut alive = VecDeque::with_capacity(WINDOW);
        for i in 0..iterations {
            alive.push_back(self.0.add((thread as u64) << 40 | i));
            if alive.len() == WINDOW {
                let oldest = alive.pop_front().expect("window is full");
                assert!(self.0.remove(oldest), "an item added by this thread was lost");
            }
        }
        for handle in alive {
            assert!(self.0.remove(handle), "an item added by this thread was lost");
        }
    }
}
