//! Queued (MCS) spinlock. (in progress)
