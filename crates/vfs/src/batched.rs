//! Numbers taken from a shared counter in per-thread batches, as Linux's
//! `get_next_ino()`: a thread writes the counter once a batch, not once a
//! number, and the numbers one thread takes in turn are consecutive
//! within its batch.
//!
//! Invariant: every number is handed out once; a thread's batch is the
//! range the counter gave it, `size` numbers from where the counter stood.
//!
//! May import nothing of the crate.

use std::cell::Cell;
use std::thread::LocalKey;
use vfscale_sync::audited::{AtomicU64, Ordering};

/// A thread's batch: its next number and the end of its range.
pub(crate) type Batch = Cell<(u64, u64)>;

/// The next number of this thread's `batch`, which takes `size` more from
/// `counter` when it is used up (or new). The conflict checker reports the
/// counter's write at the caller (`track_caller`), whose number it is.
#[track_caller]
pub(crate) fn next(counter: &AtomicU64, batch: &'static LocalKey<Batch>, size: u64) -> u64 {
    let (mut next, mut end) = batch.get();
    if next == end {
        next = counter.fetch_add(size, Ordering::Relaxed);
        end = next + size;
    }
    batch.set((next + 1, end));
    next
}
