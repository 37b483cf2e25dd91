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
        let iters = stress_iters(default);
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

/// The [`machine_lock`] that `vfscale-fuse`'s mount tests and the CLI's
/// mount-bench test hold: one mount test drops the kernel's caches, which
/// evicts every mount's entries, and the others count the requests those
/// entries save.
pub const KERNEL_CACHES_LOCK: &str = "vfscale-kernel-caches.lock";

/// Holds, until dropped, an exclusive `flock` on `name` in the temporary
/// directory: test processes that share something of the machine's (the
/// kernel's caches) take it around what must not overlap, so two suites
/// at once (the flake hunt, two checkouts) take turns. `None`, with the
/// reason printed, where the file cannot be opened (made by another user
/// in a directory that refuses that): the test then runs unserialized, as
/// it would alone.
pub fn machine_lock(name: &str) -> Option<std::fs::File> {
    use std::os::fd::AsRawFd;
    let path = std::env::temp_dir().join(name);
    // Read-only, as flock needs, and so a file another user made opens
    // too; made (by whoever is first) only where missing.
    let file = std::fs::File::open(&path).or_else(|e| match e.kind() {
        std::io::ErrorKind::NotFound => {
            std::fs::OpenOptions::new().read(true).write(true).create(true).truncate(false).open(&path)
        }
        _ => Err(e),
    });
    let file = match file {
        Ok(file) => file,
        Err(e) => {
            eprintln!("not serialized with other processes: cannot open {}: {e}", path.display());
            return None;
        }
    };
    // flock, not `File::lock`, which is newer than the crate's MSRV.
    loop {
        // SAFETY: flock on a descriptor `file` owns.
        if unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX) } == 0 {
            return Some(file);
        }
        let e = std::io::Error::last_os_error();
        assert_eq!(e.kind(), std::io::ErrorKind::Interrupted, "cannot lock {}: {e}", path.display());
    }
}

/// Waits, a millisecond at a time, until `now()` has moved past `t`: with
/// the coarse clock that stamps inodes, until a change from then on gets a
/// later stamp than `t`.
pub fn wait_for_clock_past<T: PartialOrd>(now: impl Fn() -> T, t: T) {
    while now() <= t {
        std::thread::sleep(std::time::Duration::from_millis(1));
    }
}

/// How many rounds a stress test runs: `VFSCALE_STRESS_ITERS` where it is
/// set (the flake hunt and slow machines bound the suite's time with it),
/// else `default`.
pub fn stress_iters<T: std::str::FromStr>(default: T) -> T {
    std::env::var("VFSCALE_STRESS_ITERS").ok().and_then(|v| v.parse().ok()).unwrap_or(default)
}

/// The next number of a test's cheap deterministic sequence (Marsaglia's
/// xorshift64, shifts 13, 7, 17): advances `state`, which must not be 0,
/// and returns it.
pub fn xorshift64(state: &mut u64) -> u64 {
    *state ^= *state << 13;
    *state ^= *state >> 7;
    *state ^= *state << 17;
    *state
}

/// The seed of a test's random cases: `PROPTEST_RNG_SEED` where it is set
/// (to try other cases), else `fixed`, so every run of the suite tries the
/// same cases and a failure it finds replays.
pub fn case_seed(fixed: u64) -> u64 {
    std::env::var("PROPTEST_RNG_SEED").ok().and_then(|v| v.parse().ok()).unwrap_or(fixed)
}
