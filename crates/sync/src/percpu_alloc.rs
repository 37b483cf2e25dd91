//! Per-CPU slots for per-object counters (Linux `alloc_percpu`): one
//! `AtomicIsize` per CPU for each object, laid out so that the slots of one
//! object are on different cache lines while one CPU's slots of many objects
//! share lines that only that CPU writes.
//!
//! Invariant: a [`Slots`] owns its index from `new` to drop; a fresh index's
//! slots read 0 on every CPU, and dropping a `Slots` zeroes them before the
//! index is reused. The arena never frees a chunk, so a slot reference stays
//! valid for the process's life.
//!
//! The arena is a two-level table of chunks, each holding one row of `CHUNK` slots
//! per CPU. Indices go out and come back through a per-thread cache that
//! trades with a global free list in batches, so making and freeing objects
//! writes no shared word in the common case. Under loom each `Slots` owns
//! its CPUs' slots instead (a `static` arena would outlive a model).
//!
//! Cost: 8 bytes per CPU per object, in chunks of 1024 objects that are
//! never returned to the allocator (a process that once had a million
//! per-CPU counters keeps their memory).
//! Not for objects that are created by the million and rarely shared: a
//! plain atomic inside the object is smaller.

#[cfg(not(loom))]
pub(crate) use arena::Slots;
#[cfg(loom)]
pub(crate) use owned::Slots;

#[cfg(not(loom))]
mod arena {
    //! The process-wide arena (see the module doc).

    use crate::audited::{AtomicIsize, AtomicPtr, Mutex, OnceLock, Ordering};
    use crate::poison::unpoisoned;
    use std::cell::RefCell;

    /// Slots per CPU row of a chunk (8 KiB rows, whole cache lines).
    const CHUNK: usize = 1024;
    /// Chunks per second-level table, and tables: 2^32 indices in all
    /// (every `u32`), with only the tables in use allocated.
    const TABLE: usize = 1 << 14;
    const TABLES: usize = 1 << 8;
    /// Indices a thread keeps before it returns half to the free list.
    const CACHE: usize = 64;

    /// One cache line of slots, so every CPU row starts on a line.
    #[repr(align(64))]
    struct Line([AtomicIsize; 8]);

    /// Pointers to the chunks of one second-level table.
    type Table = [AtomicPtr<Line>; TABLE];

    struct Arena {
        cpus: usize,
        tables: Box<[AtomicPtr<Table>]>,
        /// Free indices and the number of chunks allocated.
        free: Mutex<(Vec<u32>, usize)>,
    }

    fn arena() -> &'static Arena {
        static ARENA: OnceLock<Arena> = OnceLock::new();
        ARENA.get_or_init(|| Arena {
            cpus: crate::cpu::possible_cpus(),
            tables: (0..TABLES).map(|_| AtomicPtr::default()).collect(),
            free: Mutex::new((Vec::new(), 0)),
        })
    }

    impl Arena {
        /// Moves up to `n` free indices into `out`, growing the arena by a
        /// chunk when the free list is empty.
        fn refill(&self, out: &mut Vec<u32>, n: usize) {
            let mut free = unpoisoned(self.free.lock());
            if free.0.is_empty() {
                let chunk = free.1;
                // 2^32 objects would need 32 GiB of slots per CPU first.
                assert!(chunk < TABLES * TABLE, "percpu arena: every u32 index is in use");
                let table = &self.tables[chunk / TABLE];
                if table.load(Ordering::Relaxed).is_null() {
                    let fresh: Box<Table> = Box::new(std::array::from_fn(|_| AtomicPtr::default()));
                    table.store(Box::into_raw(fresh), Ordering::Release);
                }
                let rows: Box<[Line]> = (0..CHUNK / 8 * self.cpus).map(|_| Line(Default::default())).collect();
                // SAFETY: the table was published above or earlier (under
                // this lock) and is never freed.
                let chunks = unsafe { &*table.load(Ordering::Relaxed) };
                chunks[chunk % TABLE].store(Box::into_raw(rows).cast(), Ordering::Release);
                free.1 += 1;
                free.0.extend((chunk * CHUNK..(chunk + 1) * CHUNK).rev().map(|i| i as u32));
            }
            let keep = free.0.len().saturating_sub(n);
            out.extend(free.0.drain(keep..));
        }

        fn give_back(&self, indices: impl Iterator<Item = u32>) {
            unpoisoned(self.free.lock()).0.extend(indices);
        }

        /// Object `index`'s slot in CPU 0's row; CPU `c`'s is `c * CHUNK`
        /// slots further on (the rows of a chunk are consecutive).
        fn first_slot(&self, index: u32) -> &AtomicIsize {
            let (chunk, at) = (index as usize / CHUNK, index as usize % CHUNK);
            // SAFETY: `index` was handed out by `refill`, which published
            // its table before its chunk; tables are never freed.
            let chunks = unsafe { &*self.tables[chunk / TABLE].load(Ordering::Acquire) };
            let rows = chunks[chunk % TABLE].load(Ordering::Acquire);
            // SAFETY: `refill` published the chunk (CHUNK / 8 * cpus lines,
            // never freed) before handing out `index`; `at < CHUNK`.
            unsafe { &(*rows.add(at / 8)).0[at % 8] }
        }
    }

    /// A thread's cache of free indices; its indices go back when it exits.
    struct Cache(Vec<u32>);

    impl Drop for Cache {
        fn drop(&mut self) {
            arena().give_back(self.0.drain(..));
        }
    }

    thread_local!(static CACHE_OF_THREAD: RefCell<Cache> = const { RefCell::new(Cache(Vec::new())) });

    /// One object's slots: an index into the arena, and its slot in the
    /// first CPU's row (the others follow at a stride of a row), so a
    /// get is one multiply-add away from the slot.
    pub(crate) struct Slots {
        index: u32,
        cpus: u32,
        first: std::ptr::NonNull<AtomicIsize>,
    }

    // SAFETY: `first` points into the arena, which lives for the process
    // and is only accessed through atomics.
    unsafe impl Send for Slots {}
    // SAFETY: as above.
    unsafe impl Sync for Slots {}

    impl Slots {
        pub fn new() -> Slots {
            let take = |cache: &mut Cache| {
                if cache.0.is_empty() {
                    arena().refill(&mut cache.0, CACHE / 2);
                }
                cache.0.pop().expect("refill adds indices")
            };
            let index = CACHE_OF_THREAD
                .try_with(|cache| take(&mut cache.borrow_mut()))
                .unwrap_or_else(|_| take(&mut Cache(Vec::new())));
            let arena = arena();
            let first = std::ptr::NonNull::from(arena.first_slot(index));
            Slots { index, cpus: arena.cpus as u32, first }
        }

        pub fn len(&self) -> usize {
            self.cpus as usize
        }

        #[inline]
        pub fn get(&self, cpu: usize) -> &AtomicIsize {
            let cpus = self.cpus as usize;
            let row = if cpu < cpus { cpu } else { cpu % cpus };
            // SAFETY: the slot of CPU `row` is `row` rows after CPU 0's in
            // the same chunk (see `Arena::slot`), inside the chunk because
            // `row < cpus`; the arena is never freed.
            unsafe { &*self.first.as_ptr().add(row * CHUNK) }
        }
    }

    impl Drop for Slots {
        fn drop(&mut self) {
            // Nobody else holds this object now: reset its slots for the
            // next owner (folded ones read FOLDED, live ones 0 once
            // balanced, but a migrated get/put pair may leave +1/-1).
            for cpu in 0..self.len() {
                self.get(cpu).store(0, Ordering::Relaxed);
            }
            let index = self.index;
            let give = |cache: &mut Cache| {
                cache.0.push(index);
                if cache.0.len() > CACHE {
                    let half = cache.0.len() - CACHE / 2;
                    arena().give_back(cache.0.drain(half..));
                }
            };
            if CACHE_OF_THREAD.try_with(|cache| give(&mut cache.borrow_mut())).is_err() {
                arena().give_back(std::iter::once(index));
            }
        }
    }
}

#[cfg(loom)]
mod owned {
    //! Under loom each ref owns its two CPUs' slots.

    use crate::shim::AtomicIsize;

    pub(crate) struct Slots(Box<[AtomicIsize]>);

    impl Slots {
        pub fn new() -> Slots {
            Slots((0..crate::cpu::possible_cpus()).map(|_| AtomicIsize::new(0)).collect())
        }

        pub fn len(&self) -> usize {
            self.0.len()
        }

        pub fn get(&self, cpu: usize) -> &AtomicIsize {
            &self.0[cpu % self.0.len()]
        }
    }
}
