//! Helpers shared by the unit tests of several primitives.

/// Per-thread stress budget: `VFSCALE_STRESS_ITERS` iterations (default
/// `default`), cut short after 500 ms so an oversubscribed machine cannot
/// stretch the test (FIFO spinlocks stall whenever the next waiter is
/// preempted). Checks count the work actually done.
#[derive(Clone, Copy)]
pub(crate) struct Budget {
    iters: usize,
    until: std::time::Instant,
}

impl Budget {
    pub(crate) fn new(default: usize) -> Self {
        let iters = std::env::var("VFSCALE_STRESS_ITERS").ok().and_then(|s| s.parse().ok()).unwrap_or(default);
        Self { iters, until: std::time::Instant::now() + std::time::Duration::from_millis(500) }
    }

    pub(crate) fn allows(&self, i: usize) -> bool {
        i < self.iters && (i % 32 != 0 || std::time::Instant::now() < self.until)
    }
}
