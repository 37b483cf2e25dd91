//! Timestamps as `struct timespec`.
//!
//! May import nothing of the crate.

use bytemuck::{Pod, Zeroable};

/// Seconds and nanoseconds since the Unix epoch, as `struct timespec`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default, Pod, Zeroable)]
#[repr(C)]
pub struct Timespec {
    /// Whole seconds (negative before 1970).
    pub sec: i64,
    /// Nanoseconds, `0..1_000_000_000`.
    pub nsec: i64,
}

impl Timespec {
    /// The current wall-clock time at the kernel's tick granularity
    /// (`CLOCK_REALTIME_COARSE`), as Linux stamps inodes
    /// (`current_time` uses the coarse clock too): a few nanoseconds to read.
    pub fn now() -> Timespec {
        let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
        // SAFETY: clock_gettime writes the timespec we own.
        unsafe { libc::clock_gettime(libc::CLOCK_REALTIME_COARSE, &mut ts) };
        Timespec { sec: ts.tv_sec, nsec: ts.tv_nsec }
    }

    /// Nanoseconds since the epoch, saturating past the 292 years an
    /// `i64` spans each way.
    pub fn as_nanos(self) -> i64 {
        let nanos = i128::from(self.sec) * 1_000_000_000 + i128::from(self.nsec);
        nanos.clamp(i128::from(i64::MIN), i128::from(i64::MAX)) as i64
    }

    /// The time `nanos` nanoseconds after the epoch (before it if negative).
    pub fn from_nanos(nanos: i64) -> Timespec {
        Timespec { sec: nanos.div_euclid(1_000_000_000), nsec: nanos.rem_euclid(1_000_000_000) }
    }
}
