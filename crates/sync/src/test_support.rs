//! Helpers for tests: shared by the unit tests of several primitives, and
//! (with the `audit` feature, which the other crates' tests turn on) by
//! the tests of the crates built on them.

/// Per-thread stress budget: `VFSCALE_STRESS_ITERS` iterations (default
/// `default`), cut short after 500 ms so an oversubscribed machine cannot
/// stretch the test (FIFO spinlocks stall whenever the next waiter is
/// preempted). Checks count the work actually done.
#[cfg(test)]
#[derive(Clone, Copy)]
pub(crate) struct Budget {
    iters: usize,
    until: std::time::Instant,
}

#[cfg(test)]
impl Budget {
    pub(crate) fn new(default: usize) -> Self {
        let iters = std::env::var("VFSCALE_STRESS_ITERS").ok().and_then(|s| s.parse().ok()).unwrap_or(default);
        Self { iters, until: std::time::Instant::now() + std::time::Duration::from_millis(500) }
    }

    pub(crate) fn allows(&self, i: usize) -> bool {
        i < self.iters && (i % 32 != 0 || std::time::Instant::now() < self.until)
    }
}

/// Waits until `state` holds, a state the test brings about (a thread
/// blocked, a reader inside). The minute is only a hang guard: it turns a
/// state that never comes (the other thread failed first) into a failure
/// naming `what`, and costs nothing when the state comes.
pub fn wait_until(what: &str, mut state: impl FnMut() -> bool) {
    let start = std::time::Instant::now();
    while !state() {
        assert!(start.elapsed() < std::time::Duration::from_secs(60), "waited a minute until {what}");
        std::thread::yield_now();
    }
}
