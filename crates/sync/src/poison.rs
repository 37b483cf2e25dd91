//! Lock poisoning, ignored in one place.
//!
//! A thread that panics while holding a `Mutex` or `RwLock` poisons it.
//! Every lock in vfscale guards state that each holder leaves consistent
//! at every step (a panic can only come from a bug, never half-way through
//! an update), so the next holder takes the data as it is: [`unpoisoned`].

use std::sync::{LockResult, PoisonError};

/// The guard (or whatever the call returns) of `result`, poisoned or not:
/// `unpoisoned(mutex.lock())`, `unpoisoned(condvar.wait(guard))`.
pub fn unpoisoned<G>(result: LockResult<G>) -> G {
    result.unwrap_or_else(PoisonError::into_inner)
}
