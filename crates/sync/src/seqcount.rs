//! Sequence counts: lock-free readers that retry when a writer got in the way
//! (the kernel's `seqcount_t` and `seqlock_t`, `include/linux/seqlock.h`).
//!
//! Invariant: the count is odd exactly while a writer is changing the data it
//! guards, and every write moves it on by 2. A reader samples an even count,
//! reads, and keeps what it read only if the count is still the same sample;
//! otherwise it retries. Readers write nothing shared, so any number of them
//! scale; a writer never waits for readers.
//!
//! This is what the dcache uses for `d_seq` (RCU path walk validates a whole
//! lookup step against it) and `rename_lock`. Use it for small data that is
//! read far more often than written. Do not use it when writes are frequent
//! (readers starve while the count keeps moving) or when a reader must act on
//! what it reads before validating it: everything read inside the section
//! can be torn until [`SeqCount::read_retry`] says otherwise.
//!
//! In Rust, reading plain memory while a writer stores to it is undefined
//! behaviour even if the value is thrown away afterwards, so the data a
//! [`SeqCount`] guards must itself live in atomics (loaded and stored
//! `Relaxed`). [`SeqLock`] packages that: it keeps a `Pod` value in atomic
//! words and serializes its writers with a spinlock.
//!
//! Memory ordering follows Hans Boehm, "Can seqlocks get along with
//! programming language memory models?" (MSPC 2012): the writer stores the odd
//! count, issues a release fence, stores the data, then stores the even count
//! with release; the reader loads the count with acquire, loads the data,
//! issues an acquire fence (Linux's `smp_rmb()`), then reloads the count. If
//! a reader saw any data store of a write, the fences pair up and the reload
//! sees that write's odd count (or later), so the reader retries.
//!
//! Under loom a reader that finds the count odd parks until the write's end
//! wakes it (`shim::spin_wait`) instead of spinning: only the length of that
//! wait changes, so models explore interleavings, not rounds.
//!
//! ```
//! use vfscale_sync::seqcount::SeqLock;
//!
//! #[derive(Clone, Copy, Debug, PartialEq, bytemuck::Pod, bytemuck::Zeroable)]
//! #[repr(C)]
//! struct Extent {
//!     start: u64,
//!     len: u64,
//! }
//!
//! let extent = SeqLock::new(Extent { start: 0, len: 4096 });
//! extent.update(|e| e.start += 4096);
//! assert_eq!(extent.read(), Extent { start: 4096, len: 4096 });
//! assert_eq!(extent.sequence(), 2);
//! ```

use crate::shim::{fence, wake_spinners, AtomicU32, AtomicU64, Ordering};
use crate::spin::{relax, SpinLock, TasLock};
use std::fmt;
use std::marker::PhantomData;
use std::mem::size_of;

/// A sequence count: readers retry when a write overlapped their read.
///
/// Writers must be serialized by the caller (an external lock, or a single
/// writer thread): two overlapping [`write_begin`](Self::write_begin)s would
/// make the count even while data is still changing. Debug builds panic on an
/// overlap they can see ("concurrent writers on a SeqCount").
///
/// ```
/// use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
/// use vfscale_sync::seqcount::SeqCount;
///
/// let seq = SeqCount::new();
/// let (lo, hi) = (AtomicU64::new(0), AtomicU64::new(0));
/// {
///     let _write = seq.write_begin(); // caller holds its writer lock here
///     lo.store(1, Relaxed);
///     hi.store(1, Relaxed);
/// }
/// let pair = loop {
///     let start = seq.read_begin();
///     let pair = (lo.load(Relaxed), hi.load(Relaxed));
///     if !seq.read_retry(start) {
///         break pair;
///     }
/// };
/// assert_eq!(pair, (1, 1));
/// ```
pub struct SeqCount {
    seq: AtomicU32,
}

impl SeqCount {
    /// A count of 0: no write in progress.
    pub fn new() -> Self {
        Self { seq: AtomicU32::new(0) }
    }

    /// Starts a read section: waits while a write is in progress, then
    /// returns the (even) count to hand to [`read_retry`](Self::read_retry).
    #[inline]
    pub fn read_begin(&self) -> u32 {
        let mut spins = 0;
        loop {
            let seq = self.seq.load(Ordering::Acquire);
            if seq & 1 == 0 {
                return seq;
            }
            // Yielding now and then: the writer may be preempted.
            relax(&self.seq, seq, &mut spins);
        }
    }

    /// Ends a read section: `true` when a write overlapped it, so everything
    /// read since `start` must be discarded and the read repeated.
    #[inline]
    pub fn read_retry(&self, start: u32) -> bool {
        // Orders the data loads before the reload of the count (`smp_rmb`);
        // pairs with the release fence in `write_begin`.
        fence(Ordering::Acquire);
        self.seq.load(Ordering::Relaxed) != start
    }

    /// The count now, without waiting for a write to finish; odd while one is
    /// in progress.
    #[inline]
    pub fn raw_read(&self) -> u32 {
        self.seq.load(Ordering::Acquire)
    }

    /// Starts a write: the count becomes odd until the guard is dropped.
    ///
    /// The caller must hold whatever lock serializes the writers.
    #[inline]
    pub fn write_begin(&self) -> SeqWriteGuard<'_> {
        let seq = self.seq.load(Ordering::Relaxed);
        debug_assert!(seq & 1 == 0, "concurrent writers on a SeqCount");
        self.seq.store(seq.wrapping_add(1), Ordering::Relaxed);
        // Keeps the data stores after the odd count for any reader that sees
        // one of them; pairs with the acquire fence in `read_retry`.
        fence(Ordering::Release);
        SeqWriteGuard { count: self }
    }

    /// Starts a write with the count itself as the writers' lock (a
    /// `seqlock_t`'s spinlock and count in one word): waits while another
    /// write is in progress, then makes the count odd with one
    /// compare-and-swap, so writers that all start this way need no other
    /// lock. Do not mix it with [`write_begin`](Self::write_begin) on one
    /// count.
    #[inline]
    pub fn write_lock(&self) -> SeqWriteGuard<'_> {
        let mut spins = 0;
        loop {
            let seq = self.seq.load(Ordering::Relaxed);
            if seq & 1 == 1 {
                relax(&self.seq, seq, &mut spins);
                continue;
            }
            // Acquire: this write starts after the last one's data.
            if self.seq.compare_exchange(seq, seq.wrapping_add(1), Ordering::Acquire, Ordering::Relaxed).is_ok() {
                // As in `write_begin`: the data stores follow the odd count.
                fence(Ordering::Release);
                return SeqWriteGuard { count: self };
            }
        }
    }
}

impl Default for SeqCount {
    fn default() -> Self {
        Self::new()
    }
}

impl fmt::Debug for SeqCount {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SeqCount").field("seq", &self.raw_read()).finish()
    }
}

/// A write in progress on a [`SeqCount`]; dropping it ends the write.
#[must_use = "the write ends as soon as the guard is dropped"]
pub struct SeqWriteGuard<'a> {
    count: &'a SeqCount,
}

impl Drop for SeqWriteGuard<'_> {
    #[inline]
    fn drop(&mut self) {
        let seq = self.count.seq.load(Ordering::Relaxed);
        debug_assert!(seq & 1 == 1, "concurrent writers on a SeqCount");
        // Release: a reader that sees the even count sees all the data.
        self.count.seq.store(seq.wrapping_add(1), Ordering::Release);
        wake_spinners(&self.count.seq);
    }
}

impl fmt::Debug for SeqWriteGuard<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SeqWriteGuard").field("seq", &self.count.raw_read()).finish()
    }
}

/// A `Pod` value behind a [`SeqCount`], with its writers serialized by a
/// spinlock: readers copy the value out without locking and retry on a race.
///
/// The value is kept as 64-bit atomic words, never as plain memory, so a
/// reader racing a writer only ever performs atomic loads; a torn copy is
/// still a valid `T` (it is `Pod`) and is discarded by the retry.
pub struct SeqLock<T> {
    seq: SeqCount,
    /// The value's words, with [`PAD`] unused words before and after: the
    /// box is a small allocation of its own, and unpadded it shared lines
    /// with its heap neighbours (the conflict checker caught two inodes'
    /// attributes on one line).
    words: Box<[AtomicU64]>,
    /// Test-and-set rather than ticket: writers are rare, and a FIFO lock
    /// stalls every later writer behind a preempted waiter.
    writer: SpinLock<TasLock, ()>,
    _value: PhantomData<T>,
}

const WORD: usize = size_of::<u64>();

/// Words of padding at each end of a [`SeqLock`]'s box: a line, outside
/// loom (where they would only be more state to explore).
const PAD: usize = if cfg!(loom) { 0 } else { crate::audit::LINE_SIZE / WORD };

impl<T: bytemuck::Pod> SeqLock<T> {
    /// A seqlock holding `value`, with sequence 0.
    pub fn new(value: T) -> Self {
        let words = (0..size_of::<T>().div_ceil(WORD) + 2 * PAD).map(|_| AtomicU64::new(0)).collect();
        let lock = Self { seq: SeqCount::new(), words, writer: SpinLock::new(()), _value: PhantomData };
        lock.store(&value);
        lock
    }

    /// The words holding the value, without the padding.
    fn value_words(&self) -> &[AtomicU64] {
        &self.words[PAD..self.words.len() - PAD]
    }

    /// A consistent copy of the value, retrying while writes interfere.
    pub fn read(&self) -> T {
        loop {
            let start = self.seq.read_begin();
            let value = self.load();
            if !self.seq.read_retry(start) {
                return value;
            }
        }
    }

    /// One read attempt: `None` if a write was in progress or overlapped it.
    #[must_use]
    pub fn try_read(&self) -> Option<T> {
        let start = self.seq.raw_read();
        if start & 1 == 1 {
            return None;
        }
        let value = self.load();
        (!self.seq.read_retry(start)).then_some(value)
    }

    /// Replaces the value.
    pub fn write(&self, value: T) {
        let _writer = self.writer.lock();
        let _write = self.seq.write_begin();
        self.store(&value);
    }

    /// Changes the value in place with `f`. Readers keep reading the old
    /// value while `f` runs; only the store of the result makes them retry.
    pub fn update(&self, f: impl FnOnce(&mut T)) {
        let _writer = self.writer.lock();
        // The writer lock excludes other stores, so this load is stable.
        let mut value = self.load();
        f(&mut value);
        let _write = self.seq.write_begin();
        self.store(&value);
    }

    /// The sequence count now: even when no write is in progress, and moved
    /// on by 2 per completed write.
    pub fn sequence(&self) -> u32 {
        self.seq.raw_read()
    }

    fn load(&self) -> T {
        let mut value = T::zeroed();
        let bytes = bytemuck::bytes_of_mut(&mut value);
        for (chunk, word) in bytes.chunks_mut(WORD).zip(self.value_words()) {
            let word = word.load(Ordering::Relaxed).to_ne_bytes();
            chunk.copy_from_slice(&word[..chunk.len()]);
        }
        value
    }

    fn store(&self, value: &T) {
        let bytes = bytemuck::bytes_of(value);
        for (chunk, word) in bytes.chunks(WORD).zip(self.value_words()) {
            let mut padded = [0u8; WORD];
            padded[..chunk.len()].copy_from_slice(chunk);
            word.store(u64::from_ne_bytes(padded), Ordering::Relaxed);
        }
    }
}

impl<T: bytemuck::Pod> Default for SeqLock<T> {
    fn default() -> Self {
        Self::new(T::zeroed())
    }
}

impl<T: bytemuck::Pod + fmt::Debug> fmt::Debug for SeqLock<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut d = f.debug_struct("SeqLock");
        d.field("seq", &self.sequence());
        match self.try_read() {
            Some(value) => d.field("value", &value),
            None => d.field("value", &format_args!("<writing>")),
        };
        d.finish()
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use crate::test_support::stress_iters;
    use std::sync::atomic::AtomicBool;
    use std::sync::{Arc, Mutex};
    use std::thread;

    #[derive(Clone, Copy, Debug, Default, PartialEq, bytemuck::Pod, bytemuck::Zeroable)]
    #[repr(C)]
    struct Quad {
        words: [u64; 4],
    }

    /// Not a multiple of 8 bytes: exercises the padded last word.
    #[derive(Clone, Copy, Debug, Default, PartialEq, bytemuck::Pod, bytemuck::Zeroable)]
    #[repr(C)]
    struct Odd {
        a: u32,
        b: u16,
        c: [u8; 6],
    }

    #[test]
    fn write_lock_serializes_writers_without_another_lock() {
        let shared = Arc::new((SeqCount::new(), AtomicU64::new(0), AtomicU64::new(0)));
        let iters = stress_iters(20_000);
        let writers: Vec<_> = (0..4)
            .map(|_| {
                let shared = Arc::clone(&shared);
                thread::spawn(move || {
                    let (seq, a, b) = &*shared;
                    for _ in 0..iters {
                        let _write = seq.write_lock();
                        // Not atomic increments: a second writer inside
                        // would lose updates.
                        a.store(a.load(Ordering::Relaxed) + 1, Ordering::Relaxed);
                        b.store(b.load(Ordering::Relaxed) + 1, Ordering::Relaxed);
                    }
                })
            })
            .collect();
        let (seq, a, b) = &*shared;
        let mut reads = 0;
        while reads < 1000 || writers.iter().any(|w| !w.is_finished()) {
            let start = seq.read_begin();
            let (x, y) = (a.load(Ordering::Relaxed), b.load(Ordering::Relaxed));
            if !seq.read_retry(start) {
                assert_eq!(x, y, "a read kept a torn pair");
            }
            reads += 1;
        }
        for w in writers {
            w.join().unwrap();
        }
        assert_eq!(a.load(Ordering::Relaxed), 4 * iters);
        assert_eq!(b.load(Ordering::Relaxed), 4 * iters);
        assert_eq!(seq.raw_read(), (8 * iters) as u32);
    }

    #[test]
    fn new_count_is_zero_and_even() {
        let seq = SeqCount::new();
        assert_eq!(seq.raw_read(), 0);
        assert_eq!(SeqCount::default().raw_read(), 0);
        assert_eq!(seq.read_begin(), 0);
    }

    #[test]
    fn write_makes_count_odd_then_even() {
        let seq = SeqCount::new();
        let guard = seq.write_begin();
        assert_eq!(seq.raw_read(), 1);
        assert!(format!("{guard:?}").contains("seq: 1"));
        drop(guard);
        assert_eq!(seq.raw_read(), 2);
        assert_eq!(seq.read_begin(), 2);
        assert_eq!(format!("{seq:?}"), "SeqCount { seq: 2 }");
    }

    #[test]
    fn read_retry_detects_overlapping_write() {
        let seq = SeqCount::new();
        let start = seq.read_begin();
        assert!(!seq.read_retry(start));
        drop(seq.write_begin());
        assert!(seq.read_retry(start));
        let start = seq.read_begin();
        let guard = seq.write_begin();
        assert!(seq.read_retry(start), "a write still in progress must force a retry");
        drop(guard);
        assert!(seq.read_retry(start));
    }

    #[test]
    fn count_wraps_around() {
        let seq = SeqCount { seq: AtomicU32::new(u32::MAX - 1) };
        let start = seq.read_begin();
        drop(seq.write_begin());
        assert_eq!(seq.raw_read(), 0);
        assert!(seq.read_retry(start));
    }

    #[test]
    fn read_begin_waits_for_writer() {
        let seq = Arc::new(SeqCount::new());
        let guard = seq.write_begin();
        let reader = {
            let seq = Arc::clone(&seq);
            thread::spawn(move || seq.read_begin())
        };
        thread::sleep(std::time::Duration::from_millis(20));
        assert!(!reader.is_finished());
        drop(guard);
        assert_eq!(reader.join().unwrap(), 2);
    }

    #[test]
    #[cfg(debug_assertions)]
    #[should_panic(expected = "concurrent writers on a SeqCount")]
    fn overlapping_writers_panic_in_debug() {
        let seq = SeqCount::new();
        let _first = seq.write_begin();
        let _second = seq.write_begin();
    }

    #[test]
    fn seqlock_read_write_update_sequence() {
        let lock = SeqLock::new(Quad { words: [1, 2, 3, 4] });
        assert_eq!(lock.sequence(), 0);
        assert_eq!(lock.read(), Quad { words: [1, 2, 3, 4] });
        lock.write(Quad { words: [5; 4] });
        assert_eq!(lock.sequence(), 2);
        lock.update(|q| q.words[3] = 9);
        assert_eq!(lock.sequence(), 4);
        assert_eq!(lock.try_read(), Some(Quad { words: [5, 5, 5, 9] }));
        assert_eq!(SeqLock::<Quad>::default().read(), Quad::default());
    }

    #[test]
    fn seqlock_try_read_fails_during_write() {
        let lock = SeqLock::new(7u64);
        let _write = lock.seq.write_begin();
        assert_eq!(lock.try_read(), None);
        assert!(format!("{lock:?}").contains("<writing>"));
    }

    #[test]
    fn seqlock_update_panic_leaves_value_and_count() {
        let lock = SeqLock::new(3u32);
        let caught = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            lock.update(|v| {
                *v = 99;
                panic!("boom");
            })
        }));
        assert!(caught.is_err());
        assert_eq!(lock.sequence(), 0);
        assert_eq!(lock.read(), 3);
        lock.write(4);
        assert_eq!(lock.read(), 4);
    }

    #[test]
    fn seqlock_sizes_round_trip() {
        let odd = Odd { a: 0xdead_beef, b: 0x1234, c: [1, 2, 3, 4, 5, 6] };
        let lock = SeqLock::new(odd);
        assert_eq!(lock.value_words().len(), 2);
        assert_eq!(lock.read(), odd);
        let unit = SeqLock::new(());
        assert_eq!(unit.value_words().len(), 0);
        unit.write(());
        assert_eq!(unit.try_read(), Some(()));
        let byte = SeqLock::new(0xabu8);
        assert_eq!(byte.read(), 0xab);
        assert_eq!(format!("{byte:?}"), "SeqLock { seq: 0, value: 171 }");
    }

    /// Writers keep all four words equal and increasing; readers must never
    /// see them differ or go backwards.
    #[test]
    fn seqlock_stress_no_torn_reads() {
        let iters = stress_iters(10_000);
        let lock = Arc::new(SeqLock::new(Quad::default()));
        let done = Arc::new(AtomicBool::new(false));
        let writers: Vec<_> = (0..2)
            .map(|_| {
                let lock = Arc::clone(&lock);
                thread::spawn(move || {
                    for _ in 0..iters {
                        lock.update(|q| q.words = [q.words[0] + 1; 4]);
                    }
                })
            })
            .collect();
        let readers: Vec<_> = (0..2)
            .map(|_| {
                let (lock, done) = (Arc::clone(&lock), Arc::clone(&done));
                thread::spawn(move || {
                    let mut last = 0;
                    while !done.load(Ordering::Relaxed) {
                        let q = lock.read();
                        assert!(q.words.iter().all(|&w| w == q.words[0]), "torn read {q:?}");
                        assert!(q.words[0] >= last, "went backwards");
                        last = q.words[0];
                        if let Some(q) = lock.try_read() {
                            assert!(q.words.iter().all(|&w| w == q.words[0]), "torn {q:?}");
                        }
                    }
                })
            })
            .collect();
        for w in writers {
            w.join().unwrap();
        }
        done.store(true, Ordering::Relaxed);
        for r in readers {
            r.join().unwrap();
        }
        assert_eq!(lock.read(), Quad { words: [2 * iters; 4] });
        assert_eq!(u64::from(lock.sequence()), (4 * iters) % (1 << 32));
    }

    /// A bare SeqCount over caller-owned atomics, writers serialized by a
    /// mutex as the API requires.
    #[test]
    fn seqcount_stress_external_writer_lock() {
        let iters = stress_iters(20_000);
        let shared = Arc::new((SeqCount::new(), Mutex::new(()), AtomicU64::new(0), AtomicU64::new(0)));
        let writers: Vec<_> = (0..2)
            .map(|_| {
                let shared = Arc::clone(&shared);
                thread::spawn(move || {
                    let (seq, lock, a, b) = &*shared;
                    for _ in 0..iters {
                        let _held = lock.lock().unwrap();
                        let _write = seq.write_begin();
                        let next = a.load(Ordering::Relaxed) + 1;
                        a.store(next, Ordering::Relaxed);
                        b.store(next, Ordering::Relaxed);
                    }
                })
            })
            .collect();
        let (seq, _, a, b) = &*shared;
        while !writers.iter().all(|w| w.is_finished()) {
            let start = seq.read_begin();
            let pair = (a.load(Ordering::Relaxed), b.load(Ordering::Relaxed));
            if !seq.read_retry(start) {
                assert_eq!(pair.0, pair.1, "torn pair accepted");
            }
        }
        for w in writers {
            w.join().unwrap();
        }
        // However the reads above fell, one with no writer left must be
        // accepted and see the last write.
        let start = seq.read_begin();
        let pair = (a.load(Ordering::Relaxed), b.load(Ordering::Relaxed));
        assert!(!seq.read_retry(start), "a read with no writer retried");
        assert_eq!(pair, (2 * iters, 2 * iters));
    }
}

#[cfg(all(test, loom))]
mod loom_models {
    //! Every role runs in a spawned thread and the main thread only joins:
    //! loom 0.7 stops exploring when a spawned thread starts with a load
    //! while the main thread races it (tokio-rs/loom#392).

    use super::*;
    use loom::sync::Arc;
    use loom::thread;

    #[derive(Clone, Copy, Debug, PartialEq, bytemuck::Pod, bytemuck::Zeroable)]
    #[repr(C)]
    struct Pair {
        a: u64,
        b: u64,
    }

    /// One read section over a pair: the count it began at, the pair, and
    /// whether a write overlapped it.
    fn read_pair(seq: &SeqCount, a: &AtomicU64, b: &AtomicU64) -> (u32, (u64, u64), bool) {
        let start = seq.read_begin();
        let pair = (a.load(Ordering::Relaxed), b.load(Ordering::Relaxed));
        (start, pair, seq.read_retry(start))
    }

    /// Runs `f` on what `shared` points to, in a spawned thread.
    fn spawn_on<T: Send + Sync + 'static>(
        shared: &Arc<T>,
        f: impl FnOnce(&T) + Send + 'static,
    ) -> thread::JoinHandle<()> {
        let shared = Arc::clone(shared);
        thread::spawn(move || f(&shared))
    }

    /// A reader that keeps a section's data (read_retry false) saw exactly
    /// one write's data, and any data from a write it did not wait for makes
    /// read_retry report the overlap.
    #[test]
    fn seqcount_read_retry_detects_concurrent_write() {
        loom::model(|| {
            let shared = Arc::new((SeqCount::new(), AtomicU64::new(0), AtomicU64::new(0)));
            let writer = spawn_on(&shared, |(seq, a, b)| {
                let _write = seq.write_begin();
                a.store(1, Ordering::Relaxed);
                b.store(1, Ordering::Relaxed);
            });
            let reader = spawn_on(&shared, |(seq, a, b)| {
                let (start, (x, y), retry) = read_pair(seq, a, b);
                if !retry {
                    let expected = if start == 0 { 0 } else { 1 };
                    assert_eq!((x, y), (expected, expected), "accepted torn or stale data");
                }
                if start == 0 && (x, y) != (0, 0) {
                    assert!(retry, "saw a concurrent write's data without a retry");
                }
            });
            writer.join().unwrap();
            reader.join().unwrap();
            assert_eq!(shared.0.raw_read(), 2);
        });
    }

    /// Two writers that take the count itself as their lock never
    /// overlap, and a reader that keeps its section saw whole writes.
    #[test]
    fn seqcount_write_lock_excludes_writers() {
        loom::model(|| {
            let shared = Arc::new((SeqCount::new(), AtomicU64::new(0), AtomicU64::new(0)));
            let writers: Vec<_> = (0..2)
                .map(|_| {
                    spawn_on(&shared, |(seq, a, b)| {
                        let _write = seq.write_lock();
                        a.store(a.load(Ordering::Relaxed) + 1, Ordering::Relaxed);
                        b.store(b.load(Ordering::Relaxed) + 1, Ordering::Relaxed);
                    })
                })
                .collect();
            let reader = spawn_on(&shared, |(seq, a, b)| {
                let (start, (x, y), retry) = read_pair(seq, a, b);
                if !retry {
                    assert_eq!((x, y), (u64::from(start / 2), u64::from(start / 2)), "torn or stale");
                }
            });
            for w in writers {
                w.join().unwrap();
            }
            reader.join().unwrap();
            let (seq, a, b) = &*shared;
            assert_eq!((a.load(Ordering::Relaxed), b.load(Ordering::Relaxed)), (2, 2), "a write was lost");
            assert_eq!(seq.raw_read(), 4);
        });
    }

    /// A writer updates a pair twice while a reader reads: the reader
    /// never returns a torn pair.
    #[test]
    fn seqlock_reader_never_sees_torn_pair() {
        loom::model(|| {
            let lock = Arc::new(SeqLock::new(Pair { a: 0, b: 0 }));
            let writer = spawn_on(&lock, |lock| {
                for _ in 0..2 {
                    lock.update(|p| *p = Pair { a: p.a + 1, b: p.b + 1 });
                }
            });
            let reader = spawn_on(&lock, |lock| {
                let seen = lock.read();
                assert_eq!(seen.a, seen.b, "torn read {seen:?}");
            });
            writer.join().unwrap();
            reader.join().unwrap();
            assert_eq!(lock.read(), Pair { a: 2, b: 2 });
        });
    }

    /// Two writers updating concurrently are serialized by the internal
    /// lock: no update is lost and the count ends even.
    #[test]
    fn seqlock_writers_are_serialized() {
        loom::model(|| {
            let lock = Arc::new(SeqLock::new(Pair { a: 0, b: 0 }));
            let writers: Vec<_> =
                (0..2).map(|_| spawn_on(&lock, |lock| lock.update(|p| *p = Pair { a: p.a + 1, b: p.b + 1 }))).collect();
            for w in writers {
                w.join().unwrap();
            }
            assert_eq!(lock.read(), Pair { a: 2, b: 2 });
            assert_eq!(lock.sequence(), 4);
        });
    }

    /// One writer, a reader using try_read: either `None` or a whole value.
    #[test]
    fn seqlock_try_read_is_all_or_nothing() {
        loom::model(|| {
            let lock = Arc::new(SeqLock::new(Pair { a: 0, b: 0 }));
            let writer = spawn_on(&lock, |lock| lock.write(Pair { a: 7, b: 7 }));
            let reader = spawn_on(&lock, |lock| {
                if let Some(p) = lock.try_read() {
                    assert!(p == Pair { a: 0, b: 0 } || p == Pair { a: 7, b: 7 }, "torn {p:?}");
                }
            });
            writer.join().unwrap();
            reader.join().unwrap();
            assert_eq!(lock.try_read(), Some(Pair { a: 7, b: 7 }));
        });
    }
}
