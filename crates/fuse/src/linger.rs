//! Lingering after a reply: a request thread that has answered polls
//! `/dev/fuse` for a while before it goes back to its blocking read, so a
//! client that sends its next request at once (a create, then the unlink)
//! is served by a thread already running. With one request thread nothing
//! else is woken; with more, the kernel still wakes a sleeping reader for
//! each request, but the lingering thread gets there first, and the
//! client does not wait for that reader's CPU to come out of idle, which
//! on a virtual machine is a large part of the round trip (see
//! `docs/mount.md` in the repository, "`/dev/fuse` and lingering").
//!
//! The policy: spin only while it pays, and never against whoever needs
//! the CPU. One thread lingers at a time (the others go straight back to
//! their reads), for at most the mount's budget, yielding the CPU between
//! polls, so that a task waiting for this CPU (a client, another request
//! thread) runs first: the kernel's
//! `need_resched` test, seen from userspace. (It does not help a task on
//! another CPU, nor another guest of the same host.) A linger also ends
//! as soon as another thread begins a request (the kernel woke a sleeping
//! reader for it, maybe on the client's own CPU, and it got there first):
//! that thread lingers after its reply, where this one would poll in vain
//! while it serves every request. A linger that ends with no request is a
//! miss, and after `n` misses in a row the next `2^n - 1` replies that
//! find no thread lingering (up to [`MAX_SKIP`]) do not linger, so a mount
//! whose clients pause between requests spends at most one budget of CPU
//! per miss and far less in all, while a busy one lingers after every
//! reply.

use std::os::fd::{AsRawFd, OwnedFd};
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

use crate::requests::Counters;

/// The most replies in a row that skip lingering after misses.
pub(crate) const MAX_SKIP: u32 = 63;
// The backoff doubles up to it: one less than a power of two.
const _: () = assert!((MAX_SKIP + 1).is_power_of_two());

/// Whether and how long request threads linger (see the module doc).
#[derive(Debug)]
pub(crate) struct Linger {
    /// A duplicate of the session's `/dev/fuse` fd, to poll; set once the
    /// session exists. Every clone of the fd reads the one queue of
    /// requests, so any of them shows whether one is waiting. It closes
    /// with the session's file system, so it never keeps a connection
    /// whose server is gone.
    device: OnceLock<OwnedFd>,
    budget: Duration,
    /// Some thread is lingering (or deciding not to): only that thread
    /// touches `miss_streak`, `skip` and the tally.
    busy: AtomicBool,
    /// Lingers in a row that ended with no request.
    miss_streak: AtomicU32,
    /// Replies left that do not linger.
    skip: AtomicU32,
    /// The mount's request counts: one that changes while a thread
    /// lingers means another thread began a request.
    requests: Arc<Counters>,
    tally: Arc<Tally>,
}

/// The lingers of a mount so far, shared with its handle.
#[derive(Debug, Default)]
pub(crate) struct Tally {
    hits: AtomicU64,
    misses: AtomicU64,
    lost: AtomicU64,
}

impl Tally {
    /// The counts now.
    pub fn snapshot(&self) -> Lingers {
        let load = |count: &AtomicU64| count.load(Ordering::Relaxed);
        Lingers { hits: load(&self.hits), misses: load(&self.misses), lost: load(&self.lost) }
    }
}

/// How lingering went on a mount so far (see [`crate::Mounted::lingers`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Lingers {
    /// Lingers that found the next request waiting.
    pub hits: u64,
    /// Lingers whose budget ran out first.
    pub misses: u64,
    /// Lingers cut short because another thread began a request: it
    /// lingers after its reply instead.
    pub lost: u64,
}

/// How a linger ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Outcome {
    /// A request is waiting.
    Hit,
    /// The budget ran out.
    Miss,
    /// Another thread began a request.
    Lost,
    /// Not tried: lingering is off, another thread lingers, or misses
    /// said to skip this one.
    Skipped,
    /// The device reported an error or hang-up (unmounted).
    Gone,
}

impl Linger {
    /// Lingers of at most `budget` (zero: never linger) for a mount whose
    /// requests `requests` counts.
    pub fn new(budget: Duration, requests: Arc<Counters>) -> Linger {
        Linger {
            device: OnceLock::new(),
            budget,
            busy: AtomicBool::new(false),
            miss_streak: AtomicU32::new(0),
            skip: AtomicU32::new(0),
            requests,
            tally: Arc::default(),
        }
    }

    /// Polls `device` from now on; a second call is ignored.
    pub fn attach(&self, device: OwnedFd) {
        let _already = self.device.set(device);
    }

    /// The counts of lingers, for the mount's handle.
    pub fn tally(&self) -> Arc<Tally> {
        Arc::clone(&self.tally)
    }

    /// Called after a request was answered: lingers if the policy says so.
    /// `begun` is what the mount's counts stood at when that request was
    /// counted ([`Counters::count`] returns it), so a request another
    /// thread began at any moment since, even before this call, ends the
    /// linger.
    pub fn after_reply(&self, begun: u64) -> Outcome {
        let Some(device) = self.device.get() else { return Outcome::Skipped };
        if self.budget.is_zero() || self.busy.swap(true, Ordering::Acquire) {
            return Outcome::Skipped;
        }
        // Checked while lingering is ours, so a miss that has just ended
        // is seen.
        if self.skip_this_one() {
            self.busy.store(false, Ordering::Release);
            return Outcome::Skipped;
        }
        // Another thread that began a request since this one was counted
        // (a sleeping reader woken for it, maybe on the client's CPU) ends
        // the linger: that thread lingers after its reply, instead of this
        // one polling in vain while it serves every request.
        let outcome = poll_until(device, self.budget, || self.requests.total() > begun);
        match outcome {
            Outcome::Hit => {
                self.miss_streak.store(0, Ordering::Relaxed);
                self.tally.hits.fetch_add(1, Ordering::Relaxed);
            }
            Outcome::Miss => {
                self.tally.misses.fetch_add(1, Ordering::Relaxed);
                let streak = (self.miss_streak.load(Ordering::Relaxed) + 1).min(MAX_SKIP.count_ones());
                self.miss_streak.store(streak, Ordering::Relaxed);
                self.skip.store((1 << streak) - 1, Ordering::Relaxed);
            }
            Outcome::Lost => {
                self.tally.lost.fetch_add(1, Ordering::Relaxed);
            }
            Outcome::Skipped | Outcome::Gone => {}
        }
        self.busy.store(false, Ordering::Release);
        outcome
    }

    fn skip_this_one(&self) -> bool {
        self.skip.fetch_update(Ordering::Relaxed, Ordering::Relaxed, |n| n.checked_sub(1)).is_ok()
    }
}

/// Polls `device` without blocking until a request waits, `budget`
/// passes or `lost` says so.
fn poll_until(device: &OwnedFd, budget: Duration, lost: impl Fn() -> bool) -> Outcome {
    let start = Instant::now();
    loop {
        let mut fd = libc::pollfd { fd: device.as_raw_fd(), events: libc::POLLIN, revents: 0 };
        // SAFETY: one valid pollfd, timeout 0 (never blocks).
        let n = unsafe { libc::poll(&mut fd, 1, 0) };
        if n > 0 {
            return if fd.revents & libc::POLLIN != 0 { Outcome::Hit } else { Outcome::Gone };
        }
        if n < 0 && std::io::Error::last_os_error().raw_os_error() != Some(libc::EINTR) {
            return Outcome::Gone;
        }
        if lost() {
            return Outcome::Lost;
        }
        if start.elapsed() >= budget {
            return Outcome::Miss;
        }
        // A task waiting for this CPU (a client, another request thread)
        // gets it at once.
        std::thread::yield_now();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::fd::FromRawFd;
    use vfscale_sync::test_support::wait_until;

    /// A pipe: the read end stands in for the device, the write end sends
    /// "requests".
    fn pipe() -> (OwnedFd, std::fs::File) {
        let mut fds = [0; 2];
        // SAFETY: `fds` has room for the two descriptors pipe(2) returns.
        assert_eq!(unsafe { libc::pipe(fds.as_mut_ptr()) }, 0);
        // SAFETY: both descriptors are fresh and owned by nothing else.
        unsafe { (OwnedFd::from_raw_fd(fds[0]), std::fs::File::from_raw_fd(fds[1])) }
    }

    /// A budget no linger that expects its request can run out of, however
    /// long a busy machine keeps the requesting thread from running: each
    /// such linger ends at its request, so the length costs nothing.
    const LONG_LINGER: Duration = Duration::from_secs(60);

    fn lingering_on(budget: Duration) -> (Linger, std::fs::File) {
        let (device, requests) = pipe();
        let linger = Linger::new(budget, Arc::default());
        linger.attach(device);
        (linger, requests)
    }

    #[test]
    fn a_waiting_request_ends_the_linger_at_once() {
        use std::io::Write;
        let (linger, mut requests) = lingering_on(LONG_LINGER);
        requests.write_all(b"r").unwrap();
        assert_eq!(linger.after_reply(0), Outcome::Hit);
        assert_eq!(linger.after_reply(0), Outcome::Hit, "a hit lets the next reply linger too");
        assert_eq!(linger.tally.snapshot(), Lingers { hits: 2, misses: 0, lost: 0 });
    }

    /// After n misses in a row the next 2^n - 1 replies skip lingering, up
    /// to MAX_SKIP; a hit starts the count again.
    #[test]
    fn misses_make_the_next_replies_skip_more_and_more() {
        use std::io::Write;
        let (linger, mut requests) = lingering_on(Duration::from_micros(1));
        let mut outcomes = Vec::new();
        for _ in 0..(1 + 1 + 1 + 3 + 1 + 7) {
            outcomes.push(linger.after_reply(0));
        }
        let (miss, skip) = (Outcome::Miss, Outcome::Skipped);
        let expected = [vec![miss, skip, miss], vec![skip; 3], vec![miss], vec![skip; 7]].concat();
        assert_eq!(outcomes, expected);
        assert_eq!(linger.tally.snapshot(), Lingers { hits: 0, misses: 3, lost: 0 });
        for _ in 0..10 {
            while linger.after_reply(0) == Outcome::Skipped {}
        }
        assert_eq!(linger.skip.load(Ordering::Relaxed), MAX_SKIP, "the skip stops growing");
        while linger.after_reply(0) == Outcome::Skipped {}
        requests.write_all(b"r").unwrap();
        while linger.after_reply(0) == Outcome::Skipped {}
        assert_eq!(linger.after_reply(0), Outcome::Hit, "a hit resets the misses");
        assert_eq!(linger.skip.load(Ordering::Relaxed), 0);
    }

    #[test]
    fn one_thread_lingers_at_a_time() {
        use std::io::Write;
        let (linger, mut requests) = lingering_on(LONG_LINGER);
        std::thread::scope(|s| {
            let first = s.spawn(|| linger.after_reply(0));
            wait_until("the linger begins", || linger.busy.load(Ordering::Acquire));
            assert_eq!(linger.after_reply(0), Outcome::Skipped, "the second thread goes back to its read");
            requests.write_all(b"r").unwrap();
            assert_eq!(first.join().unwrap(), Outcome::Hit);
        });
        assert!(!linger.busy.load(Ordering::Acquire));
    }

    /// A request another thread begins ends the linger, which counts as
    /// lost and changes no backoff: the next reply lingers again.
    #[test]
    fn a_request_begun_elsewhere_ends_the_linger() {
        let (linger, _requests) = lingering_on(LONG_LINGER);
        std::thread::scope(|s| {
            let begun = linger.requests.count(crate::Opcode::Getattr);
            let linger = &linger;
            let lingering = s.spawn(move || linger.after_reply(begun));
            wait_until("the linger begins", || linger.busy.load(Ordering::Acquire));
            linger.requests.count(crate::Opcode::Lookup);
            assert_eq!(lingering.join().unwrap(), Outcome::Lost);
        });
        assert_eq!(linger.tally.snapshot(), Lingers { hits: 0, misses: 0, lost: 1 });
        assert_eq!(linger.skip.load(Ordering::Relaxed), 0);
    }

    /// A request another thread began after this one was counted but
    /// before its linger started (the linger's own view of the counts
    /// would already include it) still ends the linger.
    #[test]
    fn a_request_begun_before_the_linger_ends_it() {
        use std::io::Write;
        let (linger, mut requests) = lingering_on(LONG_LINGER);
        let begun = linger.requests.count(crate::Opcode::Getattr);
        linger.requests.count(crate::Opcode::Lookup);
        assert_eq!(linger.after_reply(begun), Outcome::Lost);
        // The request's own count does not: it lingers until the next.
        let begun = linger.requests.count(crate::Opcode::Getattr);
        requests.write_all(b"r").unwrap();
        assert_eq!(linger.after_reply(begun), Outcome::Hit);
    }

    #[test]
    fn a_hung_up_device_ends_the_linger() {
        let (linger, requests) = lingering_on(LONG_LINGER);
        drop(requests);
        assert_eq!(linger.after_reply(0), Outcome::Gone);
    }

    #[test]
    fn no_device_or_no_budget_never_lingers() {
        assert_eq!(Linger::new(Duration::from_secs(1), Arc::default()).after_reply(0), Outcome::Skipped);
        let (linger, _requests) = lingering_on(Duration::ZERO);
        assert_eq!(linger.after_reply(0), Outcome::Skipped);
    }
}
