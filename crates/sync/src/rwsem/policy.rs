//! How a writer waits for a taken [`RwSem`](super::RwSem): the spin policy,
//! its tuning knobs, and the process-wide "are CPUs oversubscribed?" signal
//! that [`SpinPolicy::Adaptive`] consults in place of the kernel's
//! `need_resched()` / owner-on-CPU checks.

use std::time::Duration;

/// What a writer does when the lock is taken, before it queues and sleeps.
///
/// Readers queue at once under `Block` and `Spin` (as in Linux since 5.11).
/// Under `Adaptive` a reader whose fast path failed first waits actively,
/// within the same budgets as a writer, for the writer in its way to be
/// done (Linux let readers spin from 5.3 to 5.10).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum SpinPolicy {
    /// Never spin: queue and sleep on a futex at once (the rwsem before
    /// Linux 3.16).
    Block,
    /// Linux 3.16 optimistic spinning: queue on an MCS-style OSQ so one
    /// writer spins on the lock word, and spin whatever the owner does
    /// (reader-held, unknown, long holds) until the lock is free or one
    /// scheduler tick ([`RwSemConfig::spin_budget`]) has passed. This is the
    /// variant that collapses in seed 002: with long holds and more threads
    /// than CPUs, spinners burn the CPU the owner needs.
    Spin,
    /// Spin only while it can pay off: one spinner at a time, only on a
    /// writer-held lock whose owner changes within
    /// [`RwSemConfig::owner_spin_budget`], never on a reader-held lock, never
    /// once a waiter asked for hand-off, for at most
    /// [`RwSemConfig::spin_budget`] in all. While more threads are runnable
    /// than there are CPUs, spin at most
    /// [`RwSemConfig::oversubscribed_spin_budget`] (about the cost of
    /// blocking), then yield and retry a few times before sleeping; writers
    /// that find another spinner then yield and retry too. A release leaves
    /// sleeping writers asleep while a spinner is there to take the lock.
    Adaptive,
}

impl SpinPolicy {
    /// Every policy, in the order benchmarks list them.
    pub const ALL: [SpinPolicy; 3] = [SpinPolicy::Block, SpinPolicy::Spin, SpinPolicy::Adaptive];

    /// Short lowercase name, as used by benchmark variants.
    pub fn name(self) -> &'static str {
        match self {
            SpinPolicy::Block => "block",
            SpinPolicy::Spin => "spin",
            SpinPolicy::Adaptive => "adaptive",
        }
    }
}

/// Tuning of one [`RwSem`](super::RwSem), fixed at construction.
///
/// [`RwSemConfig::new`] picks defaults that suit the policy; change single
/// fields with struct update syntax:
///
/// ```
/// use std::time::Duration;
/// use vfscale_sync::rwsem::{RwSemConfig, SpinPolicy};
///
/// let config = RwSemConfig { handoff_after: Duration::from_millis(1), ..RwSemConfig::new(SpinPolicy::Block) };
/// assert_eq!(config.policy, SpinPolicy::Block);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RwSemConfig {
    /// How writers wait before queueing.
    pub policy: SpinPolicy,
    /// A queued waiter at the front for longer than this reserves the lock
    /// for itself (the HANDOFF bit): no fast path, spinner or barging writer
    /// may take it until that waiter has. Linux uses 4 ms.
    pub handoff_after: Duration,
    /// Most time one acquisition spins. For [`SpinPolicy::Spin`] this is the
    /// stand-in for `need_resched()` firing: one scheduler tick.
    pub spin_budget: Duration,
    /// [`SpinPolicy::Adaptive`] stops spinning when the same write
    /// acquisition has held the lock for this long while it watched.
    pub owner_spin_budget: Duration,
    /// [`SpinPolicy::Adaptive`]'s spin budget while more threads are
    /// runnable than there are CPUs: about what a futex sleep and wake-up
    /// cost, so a spin that fails wastes no more than blocking at once would.
    pub oversubscribed_spin_budget: Duration,
}

impl RwSemConfig {
    /// One scheduler tick (CONFIG_HZ=250): how long a 3.16 spinner ran
    /// before `need_resched()` made it give up.
    pub const SCHED_TICK: Duration = Duration::from_millis(4);

    /// Defaults for `policy`: hand-off after 4 ms; `Spin` spins up to a
    /// tick; `Adaptive` up to 50 us in all, 20 us on one owner and 4 us
    /// while CPUs are oversubscribed.
    pub fn new(policy: SpinPolicy) -> Self {
        let (spin_budget, owner_spin_budget) = match policy {
            SpinPolicy::Block => (Duration::ZERO, Duration::ZERO),
            SpinPolicy::Spin => (Self::SCHED_TICK, Self::SCHED_TICK),
            SpinPolicy::Adaptive => (Duration::from_micros(50), Duration::from_micros(20)),
        };
        Self {
            policy,
            handoff_after: Duration::from_millis(4),
            spin_budget,
            owner_spin_budget,
            oversubscribed_spin_budget: Duration::from_micros(4),
        }
    }
}

impl Default for RwSemConfig {
    /// [`RwSemConfig::new`] with [`SpinPolicy::Adaptive`].
    fn default() -> Self {
        Self::new(SpinPolicy::Adaptive)
    }
}

/// Whether more threads are runnable than this process has CPUs: then a
/// spinner only delays the threads it keeps off a CPU, the lock owner among
/// them. Under loom it is always false, so models are deterministic.
pub(super) fn cpus_oversubscribed() -> bool {
    #[cfg(loom)]
    return false;
    #[cfg(not(loom))]
    return load::oversubscribed();
}

/// The kernel asks the scheduler; userspace samples the system's runnable
/// count ("running" in `/proc/loadavg`'s `running/total` field) at most once
/// per millisecond, process-wide, and compares it with the CPUs this process
/// may use. One sample costs three syscalls, so the cost per spin decision is
/// a clock read. These statics are a cache outside the lock protocol, which
/// is why they use std atomics directly and do not exist under loom.
#[cfg(not(loom))]
mod load {
    use std::io::Read;
    use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
    use std::sync::OnceLock;
    use std::time::Instant;

    const SAMPLE_EVERY_NS: u64 = 1_000_000;

    /// Time origin for `NEXT_SAMPLE_NS`, and the CPUs this process may use.
    static START: OnceLock<(Instant, u64)> = OnceLock::new();
    static NEXT_SAMPLE_NS: AtomicU64 = AtomicU64::new(0);
    static OVERSUBSCRIBED: AtomicBool = AtomicBool::new(false);

    pub(super) fn oversubscribed() -> bool {
        let (start, cpus) = START.get_or_init(|| {
            let cpus = crate::cpu::usable_cpus() as u64;
            (Instant::now(), cpus)
        });
        let now = start.elapsed().as_nanos() as u64;
        let next = NEXT_SAMPLE_NS.load(Ordering::Relaxed);
        // One sampler per period: the rest use the last answer.
        if now >= next
            && NEXT_SAMPLE_NS
                .compare_exchange(next, now + SAMPLE_EVERY_NS, Ordering::Relaxed, Ordering::Relaxed)
                .is_ok()
        {
            if let Some(running) = runnable_threads() {
                OVERSUBSCRIBED.store(running > *cpus, Ordering::Relaxed);
            }
        }
        OVERSUBSCRIBED.load(Ordering::Relaxed)
    }

    fn runnable_threads() -> Option<u64> {
        let mut buf = [0u8; 128];
        let len = std::fs::File::open("/proc/loadavg").ok()?.read(&mut buf).ok()?;
        parse_running(&buf[..len])
    }

    /// `"0.61 0.29 0.12 3/93 4288\n"` -> `Some(3)`.
    pub(super) fn parse_running(loadavg: &[u8]) -> Option<u64> {
        let field = loadavg.split(u8::is_ascii_whitespace).filter(|f| !f.is_empty()).nth(3)?;
        let running = field.split(|&b| b == b'/').next()?;
        std::str::from_utf8(running).ok()?.parse().ok()
    }

    #[cfg(test)]
    mod tests {
        use super::*;

        #[test]
        fn parses_the_running_field() {
            assert_eq!(parse_running(b"0.61 0.29 0.12 3/93 4288\n"), Some(3));
            assert_eq!(parse_running(b"12.00 8.50 4.10 17/1024 99"), Some(17));
            assert_eq!(parse_running(b"0.61 0.29 0.12"), None);
            assert_eq!(parse_running(b"a b c x/1 2"), None);
        }

        #[test]
        fn this_system_reports_a_running_count() {
            // We are running, so a readable /proc/loadavg says at least 1.
            if let Some(running) = runnable_threads() {
                assert!(running >= 1);
            }
        }
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    #[test]
    fn names_and_all() {
        let names: Vec<_> = SpinPolicy::ALL.iter().map(|p| p.name()).collect();
        assert_eq!(names, ["block", "spin", "adaptive"]);
    }

    #[test]
    fn defaults_per_policy() {
        let block = RwSemConfig::new(SpinPolicy::Block);
        assert_eq!(block.handoff_after, Duration::from_millis(4));
        assert_eq!(block.spin_budget, Duration::ZERO);
        let spin = RwSemConfig::new(SpinPolicy::Spin);
        assert_eq!(spin.spin_budget, RwSemConfig::SCHED_TICK);
        let adaptive = RwSemConfig::default();
        assert_eq!(adaptive.policy, SpinPolicy::Adaptive);
        assert!(adaptive.owner_spin_budget <= adaptive.spin_budget);
        assert!(adaptive.spin_budget < RwSemConfig::SCHED_TICK);
        assert!(adaptive.oversubscribed_spin_budget <= adaptive.owner_spin_budget);
    }
}
