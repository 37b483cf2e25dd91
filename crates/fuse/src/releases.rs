//! Waiting for the release of a file a close just flushed, so that a lock
//! request that follows a `close(2)` sees the file's OFD locks gone, as on
//! tmpfs. The kernel sends `FLUSH` before `close` returns but `RELEASE`
//! after, in the background: a request that would fail on a conflict
//! while such a release may be on its way waits for it (briefly), on a
//! thread of its own, so the request threads stay free to read it.
//!
//! Invariant: `count` grows at every release of a file that held locks,
//! under the mutex that also guards the flushed files, and a request
//! compares the count it took before its attempt, before anything else;
//! so a release that lands between an attempt and the wait is seen, as is
//! one that lands as the grace runs out, and no wait outlasts the grace
//! ([`RELEASE_GRACE`]) from the request.

use std::collections::HashMap;
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};
use vfscale::VfsResult;
use vfscale_sync::poison::unpoisoned;

/// How long a request that saw a conflict waits for releases, and how long
/// after a close its file's release is expected. On tmpfs the OFD locks of
/// a file closed for the last time are gone when `close` returns.
pub(crate) const RELEASE_GRACE: Duration = Duration::from_millis(200);

/// The flushed files whose release may be on its way, and the releases so
/// far.
#[derive(Debug)]
pub(crate) struct Releases {
    state: Mutex<State>,
    /// Signalled at every counted release while a request waits.
    released: Condvar,
    /// [`RELEASE_GRACE`], or what a test sets.
    grace: Duration,
}

impl Default for Releases {
    fn default() -> Releases {
        Releases::with_grace(RELEASE_GRACE)
    }
}

#[derive(Debug, Default)]
struct State {
    /// Open files (by address) with locks that a close flushed and whose
    /// release has not come, with when.
    flushed: HashMap<usize, Instant>,
    /// Releases of files that held locks.
    count: u64,
    /// Requests waiting for a release now.
    waiting: usize,
}

/// What a request that saw a conflict does next.
#[derive(Debug, PartialEq, Eq)]
enum Outlook {
    /// A release came since its attempt: try again.
    Retry,
    /// A release may come: wait at most this long for it.
    Wait(Duration),
    /// Nothing can change the answer: it stands.
    Final,
}

impl Releases {
    /// Requests that saw a conflict wait up to `grace` for releases.
    pub fn with_grace(grace: Duration) -> Releases {
        Releases { state: Mutex::default(), released: Condvar::new(), grace }
    }

    fn state(&self) -> MutexGuard<'_, State> {
        unpoisoned(self.state.lock())
    }

    /// A close flushed open file `key`, which holds locks.
    pub fn flushed(&self, key: usize) {
        self.state().flushed.insert(key, Instant::now());
    }

    /// Open file `key` was released; `held_locks`: it had locked, so the
    /// release may have ended a conflict.
    pub fn released(&self, key: usize, held_locks: bool) {
        let mut state = self.state();
        state.flushed.remove(&key);
        if held_locks {
            state.count += 1;
            let waiting = state.waiting > 0;
            drop(state);
            if waiting {
                self.released.notify_all();
            }
        }
    }

    /// The releases so far, taken before an attempt.
    pub fn count(&self) -> u64 {
        self.state().count
    }

    /// For a request `asked` at a time when `count` releases had come.
    fn outlook(&self, state: &mut State, count: u64, asked: Instant) -> Outlook {
        // A release that came is worth a try even when the grace has run
        // out since: a waiter it woke may get its CPU only after that.
        if state.count != count {
            return Outlook::Retry;
        }
        let left = self.grace.saturating_sub(asked.elapsed());
        if left.is_zero() {
            return Outlook::Final;
        }
        state.flushed.retain(|_, at| at.elapsed() < self.grace);
        match state.flushed.values().max() {
            Some(latest) => Outlook::Wait(left.min(self.grace.saturating_sub(latest.elapsed()))),
            None => Outlook::Final,
        }
    }

    /// Waits while a release may come; whether one came since `count`, so
    /// that the request `asked` then is worth trying again.
    fn settle(&self, count: u64, asked: Instant) -> bool {
        let mut state = self.state();
        loop {
            match self.outlook(&mut state, count, asked) {
                Outlook::Retry => return true,
                Outlook::Final => return false,
                Outlook::Wait(left) => {
                    state.waiting += 1;
                    state = unpoisoned(self.released.wait_timeout(state, left)).0;
                    state.waiting -= 1;
                }
            }
        }
    }

    /// Answers a request that must not block: `attempt` now, and `done`
    /// with its result, unless `conflict` says it failed on a lock that a
    /// release on its way may take away; then a thread of its own waits
    /// for releases and tries again, and answers (or this thread does, if
    /// no thread can be made).
    pub fn answer<T: Send + 'static>(
        self: &Arc<Self>,
        attempt: impl Fn() -> VfsResult<T> + Send + 'static,
        conflict: fn(&VfsResult<T>) -> bool,
        done: impl FnOnce(VfsResult<T>) + Send + 'static,
    ) {
        let asked = Instant::now();
        let mut count = self.count();
        let mut result = attempt();
        loop {
            if !conflict(&result) {
                return done(result);
            }
            let outlook = self.outlook(&mut self.state(), count, asked);
            match outlook {
                Outlook::Retry => {
                    count = self.count();
                    result = attempt();
                }
                Outlook::Final => return done(result),
                Outlook::Wait(_) => break,
            }
        }
        let job = Arc::new(Mutex::new(Some((attempt, done, result))));
        let releases = Arc::clone(self);
        let waiting = {
            let job = Arc::clone(&job);
            move || releases.wait_and_answer(&job, count, asked, conflict)
        };
        if std::thread::Builder::new().name("vfscale-lock-release".into()).spawn(waiting).is_err() {
            self.wait_and_answer(&job, count, asked, conflict);
        }
    }

    /// The waiting part of [`Releases::answer`], for whichever thread
    /// takes the job.
    #[allow(clippy::type_complexity)]
    fn wait_and_answer<T, A: Fn() -> VfsResult<T>, D: FnOnce(VfsResult<T>)>(
        &self,
        job: &Mutex<Option<(A, D, VfsResult<T>)>>,
        mut count: u64,
        asked: Instant,
        conflict: fn(&VfsResult<T>) -> bool,
    ) {
        let Some((attempt, done, mut result)) = unpoisoned(job.lock()).take() else { return };
        while conflict(&result) && self.settle(count, asked) {
            count = self.count();
            result = attempt();
        }
        done(result);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicU32, Ordering};
    use std::sync::mpsc;
    use vfscale::Errno;
    use vfscale_sync::test_support::wait_until;

    /// A grace no test outlasts: a wait that runs it out means the release
    /// that should have ended it was missed.
    const LONG: Duration = Duration::from_secs(60);

    fn busy(r: &VfsResult<()>) -> bool {
        *r == Err(Errno::EAGAIN)
    }

    /// An attempt that fails until `releases` has counted a release.
    fn until_released(releases: &Arc<Releases>) -> impl Fn() -> VfsResult<()> + Send + 'static {
        let releases = Arc::clone(releases);
        move || if releases.count() > 0 { Ok(()) } else { Err(Errno::EAGAIN) }
    }

    impl Releases {
        /// Requests waiting for a release now.
        pub(crate) fn waiting(&self) -> usize {
            self.state().waiting
        }
    }

    #[test]
    fn an_ordinary_conflict_is_answered_at_once() {
        let releases = Arc::new(Releases::with_grace(LONG));
        let (tx, rx) = mpsc::channel();
        releases.answer(until_released(&releases), busy, move |r| tx.send(r).unwrap());
        assert_eq!(rx.try_recv(), Ok(Err(Errno::EAGAIN)), "nothing flushed: no wait");
    }

    #[test]
    fn a_conflict_waits_off_the_request_thread_for_the_release() {
        let releases = Arc::new(Releases::with_grace(LONG));
        releases.flushed(1);
        let (tx, rx) = mpsc::channel();
        releases.answer(until_released(&releases), busy, move |r| tx.send(r).unwrap());
        assert!(rx.try_recv().is_err(), "answered before the release came");
        // This thread is free to take the release, as a request thread is.
        wait_until("the answer waits for the release", || releases.waiting() > 0);
        releases.released(1, true);
        assert_eq!(rx.recv_timeout(2 * LONG), Ok(Ok(())));
    }

    #[test]
    fn a_release_between_the_conflict_and_the_wait_is_not_missed() {
        let releases = Arc::new(Releases::with_grace(LONG));
        releases.flushed(1);
        let tries = Arc::new(AtomicU32::new(0));
        let attempt = {
            let (releases, tries) = (Arc::clone(&releases), Arc::clone(&tries));
            move || {
                if tries.fetch_add(1, Ordering::Relaxed) > 0 {
                    return Ok(());
                }
                // The conflict is seen; then the release lands, before
                // any wait has begun.
                releases.released(1, true);
                Err(Errno::EAGAIN)
            }
        };
        let (tx, rx) = mpsc::channel();
        releases.answer(attempt, busy, move |r| tx.send(r).unwrap());
        assert_eq!(rx.try_recv(), Ok(Ok(())), "tried again at once, on this thread");
        assert_eq!(tries.load(Ordering::Relaxed), 2);
    }

    /// A waiter woken by a release may run only once the grace is over; the
    /// release still counts.
    #[test]
    fn a_release_that_came_counts_after_the_grace_ran_out() {
        let grace = Duration::from_millis(1);
        let releases = Releases::with_grace(grace);
        releases.flushed(1);
        let asked = Instant::now();
        let count = releases.count();
        releases.released(1, true);
        while asked.elapsed() <= grace {
            std::thread::yield_now();
        }
        assert!(releases.settle(count, asked), "the release was dropped as the grace ran out");
        // Nothing came since: the answer stands.
        assert!(!releases.settle(releases.count(), asked));
    }

    #[test]
    fn no_wait_outlasts_the_grace() {
        let releases = Arc::new(Releases::default());
        releases.flushed(1);
        let (tx, rx) = mpsc::channel();
        let start = Instant::now();
        releases.answer(until_released(&releases), busy, move |r| tx.send(r).unwrap());
        // Closes that keep coming (a dup'd descriptor's) do not stretch it:
        // a wait they stretched would never end. The deadline only catches
        // that, so it is far past the grace, which a busy machine may
        // overrun by a scheduling delay or two.
        let deadline = start + LONG;
        let answer = loop {
            if let Ok(answer) = rx.try_recv() {
                break answer;
            }
            assert!(
                Instant::now() < deadline,
                "still waiting {:?} after a grace of {RELEASE_GRACE:?}",
                start.elapsed()
            );
            releases.flushed(2);
            std::thread::sleep(Duration::from_millis(10));
        };
        assert_eq!(answer, Err(Errno::EAGAIN));
        assert!(start.elapsed() >= RELEASE_GRACE);
        // A release of a file that held no locks ends nothing.
        releases.released(2, false);
        assert_eq!(releases.count(), 0);
    }
}
