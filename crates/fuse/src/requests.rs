//! How many requests of each kind a mount has served: what the kernel
//! could not answer from its own caches. A benchmark reads the counts
//! around a loop of operations to see how many round trips each one cost
//! (`vfscale mount-bench`), and the mount tests assert them.
//!
//! Each count is one relaxed atomic add per request, next to a round trip
//! through the kernel that costs far more.

use std::fmt;
use std::sync::atomic::{AtomicU64, Ordering};

/// A kind of FUSE request, as counted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Opcode {
    /// `LOOKUP`: a name the kernel had no valid entry for.
    Lookup,
    /// `FORGET`: counted per node forgotten (one `BATCH_FORGET` names many).
    Forget,
    /// `GETATTR`: attributes the kernel had no valid copy of.
    Getattr,
    /// `SETATTR`: chmod, chown, truncate, utimes.
    Setattr,
    /// `OPEN` of a file (not a directory).
    Open,
    /// `READ` of a file: data not in the page cache.
    Read,
    /// `WRITE` of a file.
    Write,
    /// `FLUSH`: a `close` of a file.
    Flush,
    /// `RELEASE`: the last close of an open file.
    Release,
    /// `CREATE`: an `open` with `O_CREAT` that made the file.
    Create,
    /// `UNLINK` and `RMDIR`.
    Unlink,
    /// `OPENDIR`, `READDIR` and `RELEASEDIR`.
    Dir,
    /// `MKDIR`, `MKNOD`, `SYMLINK`, `LINK` and `RENAME`.
    Namespace,
    /// Everything else: locks, xattrs, `STATFS`, `ACCESS`, `READLINK`,
    /// `FSYNC`, `LSEEK`, `FALLOCATE`.
    Other,
}

impl Opcode {
    /// Every kind, in the order counts are printed.
    pub const ALL: [Opcode; 14] = [
        Opcode::Lookup,
        Opcode::Forget,
        Opcode::Getattr,
        Opcode::Setattr,
        Opcode::Open,
        Opcode::Read,
        Opcode::Write,
        Opcode::Flush,
        Opcode::Release,
        Opcode::Create,
        Opcode::Unlink,
        Opcode::Dir,
        Opcode::Namespace,
        Opcode::Other,
    ];

    /// The name `Display` prints (the FUSE opcode's, or a group's).
    pub fn name(self) -> &'static str {
        match self {
            Opcode::Lookup => "LOOKUP",
            Opcode::Forget => "FORGET",
            Opcode::Getattr => "GETATTR",
            Opcode::Setattr => "SETATTR",
            Opcode::Open => "OPEN",
            Opcode::Read => "READ",
            Opcode::Write => "WRITE",
            Opcode::Flush => "FLUSH",
            Opcode::Release => "RELEASE",
            Opcode::Create => "CREATE",
            Opcode::Unlink => "UNLINK",
            Opcode::Dir => "DIR",
            Opcode::Namespace => "NAMESPACE",
            Opcode::Other => "OTHER",
        }
    }
}

/// The live counters of one mount.
#[derive(Debug, Default)]
pub(crate) struct Counters {
    counts: [AtomicU64; Opcode::ALL.len()],
    /// `FORGET` and `BATCH_FORGET` requests (`counts` has their nodes).
    forget_requests: AtomicU64,
}

impl Counters {
    /// One more request of kind `op`; returns [`Counters::total`] as it
    /// stood right after it, or higher when another count came at once.
    pub fn count(&self, op: Opcode) -> u64 {
        let before = self.total();
        self.counts[op as usize].fetch_add(1, Ordering::Relaxed);
        before + 1
    }

    /// One more `FORGET` or `BATCH_FORGET` request (its nodes are counted
    /// as [`Opcode::Forget`]).
    pub fn count_forget_request(&self) {
        self.forget_requests.fetch_add(1, Ordering::Relaxed);
    }

    /// Requests of every kind so far.
    pub fn total(&self) -> u64 {
        self.counts.iter().map(|c| c.load(Ordering::Relaxed)).sum()
    }

    /// The counts now.
    pub fn snapshot(&self) -> RequestCounts {
        RequestCounts {
            counts: std::array::from_fn(|i| self.counts[i].load(Ordering::Relaxed)),
            forget_requests: self.forget_requests.load(Ordering::Relaxed),
        }
    }
}

/// The requests a mount had served at one moment, by kind.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RequestCounts {
    counts: [u64; Opcode::ALL.len()],
    forget_requests: u64,
}

impl RequestCounts {
    /// Requests of kind `op` (nodes, for [`Opcode::Forget`]).
    pub fn get(&self, op: Opcode) -> u64 {
        self.counts[op as usize]
    }

    /// Requests of every kind (forgotten nodes counted one each).
    pub fn total(&self) -> u64 {
        self.counts.iter().sum()
    }

    /// `FORGET` and `BATCH_FORGET` requests, however many nodes each named.
    pub fn forget_requests(&self) -> u64 {
        self.forget_requests
    }

    /// What was served between `earlier` and `self`.
    pub fn since(&self, earlier: &RequestCounts) -> RequestCounts {
        RequestCounts {
            counts: std::array::from_fn(|i| self.counts[i].saturating_sub(earlier.counts[i])),
            forget_requests: self.forget_requests.saturating_sub(earlier.forget_requests),
        }
    }
}

impl fmt::Display for RequestCounts {
    /// The kinds with a count, `LOOKUP 1, CREATE 1`; `none` if there are none.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut any = false;
        for op in Opcode::ALL.into_iter().filter(|&op| self.get(op) > 0) {
            if any {
                f.write_str(", ")?;
            }
            write!(f, "{} {}", op.name(), self.get(op))?;
            any = true;
        }
        if !any {
            f.write_str("none")?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_add_up_and_subtract() {
        let counters = Counters::default();
        let before = counters.snapshot();
        counters.count(Opcode::Lookup);
        counters.count(Opcode::Create);
        assert_eq!(counters.count(Opcode::Lookup), 3, "count returns the total it made");
        counters.count(Opcode::Forget);
        counters.count(Opcode::Forget);
        counters.count_forget_request();
        let delta = counters.snapshot().since(&before);
        assert_eq!((delta.get(Opcode::Lookup), delta.get(Opcode::Create), delta.total()), (2, 1, 5));
        assert_eq!((delta.get(Opcode::Forget), delta.forget_requests()), (2, 1));
        assert_eq!(delta.to_string(), "LOOKUP 2, FORGET 2, CREATE 1");
        assert_eq!(RequestCounts::default().to_string(), "none");
    }
}
