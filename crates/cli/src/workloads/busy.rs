//! Calibrated busy work: CPU work that takes about N microseconds when the
//! thread runs uninterrupted, and longer when it is preempted — like the
//! page-table work mprotect does under mmap_sem.

use std::hint::black_box;
use std::sync::OnceLock;
use std::time::Instant;

/// Loop rounds per microsecond on this machine, measured once.
fn rounds_per_us() -> u64 {
    static ROUNDS: OnceLock<u64> = OnceLock::new();
    *ROUNDS.get_or_init(|| {
        const PROBE: u64 = 200_000;
        let best = (0..5)
            .map(|_| {
                let start = Instant::now();
                spin_rounds(PROBE);
                start.elapsed()
            })
            .min()
            .expect("five probes");
        (PROBE as f64 / (best.as_secs_f64() * 1e6).max(1e-9)).max(1.0) as u64
    })
}

fn spin_rounds(rounds: u64) {
    let mut x = 1u64;
    for i in 0..rounds {
        x = black_box(x.wrapping_mul(6364136223846793005).wrapping_add(i));
    }
    black_box(x);
}

/// Busy work of `us` microseconds of CPU time.
#[derive(Debug, Clone, Copy)]
pub struct BusyWork {
    rounds: u64,
}

impl BusyWork {
    /// Work worth `us` microseconds (calibrates on first use).
    pub fn micros(us: u64) -> Self {
        Self { rounds: us * rounds_per_us() }
    }

    /// Does the work.
    pub fn run(self) {
        spin_rounds(self.rounds);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn zero_is_free_and_more_is_more() {
        assert_eq!(BusyWork::micros(0).rounds, 0);
        assert!(BusyWork::micros(10).rounds > BusyWork::micros(1).rounds);
        BusyWork::micros(5).run();
    }
}
