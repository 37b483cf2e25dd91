//! Sleeping for a lock: a one-shot [`Waiter`] that a waker flags under its
//! own mutex, and the [`Interrupt`] that bounds a wait (a deadline, a
//! [`CancelToken`]), standing in for the signals that interrupt
//! `F_SETLKW`, `flock` and a lease-breaking `open` in Linux.
//!
//! Invariant: a waiter is queued (on its inode's wait queue, and on its
//! token) before the lock it waits for is released, and `wake` sets its
//! flag under the waiter's mutex, so a wake-up between "queued" and
//! "asleep" is seen when the sleeper takes that mutex: none is lost.

use std::fmt;
use std::sync::{Arc, Weak};
use std::time::Instant;
use vfscale_sync::audited::Condvar;
use vfscale_sync::audited::Mutex;
use vfscale_sync::poison::unpoisoned;

/// One blocked request. Woken at most once; a request that must wait again
/// queues a new one.
#[derive(Debug, Default)]
pub(crate) struct Waiter {
    woken: Mutex<bool>,
    cond: Condvar,
}

impl Waiter {
    /// Marks the waiter woken and wakes its thread if it sleeps.
    pub(crate) fn wake(&self) {
        *unpoisoned(self.woken.lock()) = true;
        self.cond.notify_one();
    }

    /// Sleeps until woken, the deadline passes or the token is cancelled.
    /// Returns whether it was woken (by a waker or a cancel).
    pub(crate) fn sleep(&self, deadline: Option<Instant>) -> bool {
        let mut woken = unpoisoned(self.woken.lock());
        while !*woken {
            match deadline {
                None => woken = unpoisoned(self.cond.wait(woken)),
                Some(deadline) => {
                    let now = Instant::now();
                    if now >= deadline {
                        return false;
                    }
                    woken = unpoisoned(self.cond.wait_timeout(woken, deadline - now)).0;
                }
            }
        }
        true
    }
}

/// Cancels blocking lock waits from another thread, like a signal
/// delivered to a process sleeping in `F_SETLKW`: every wait that uses the
/// token returns EINTR once it is cancelled. Clones share the token.
///
/// ```
/// use vfscale::locks::CancelToken;
///
/// let token = CancelToken::new();
/// assert!(!token.is_cancelled());
/// token.clone().cancel();
/// assert!(token.is_cancelled());
/// ```
#[derive(Clone, Default)]
pub struct CancelToken {
    inner: Arc<CancelInner>,
}

#[derive(Default)]
struct CancelInner {
    state: Mutex<CancelState>,
}

#[derive(Default)]
struct CancelState {
    cancelled: bool,
    sleepers: Vec<Weak<Waiter>>,
}

impl fmt::Debug for CancelToken {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CancelToken").field("cancelled", &self.is_cancelled()).finish()
    }
}

impl CancelToken {
    /// A token not yet cancelled.
    pub fn new() -> CancelToken {
        CancelToken::default()
    }

    /// Cancels every wait using this token, now and later.
    pub fn cancel(&self) {
        let sleepers = {
            let mut state = unpoisoned(self.inner.state.lock());
            state.cancelled = true;
            std::mem::take(&mut state.sleepers)
        };
        for sleeper in sleepers.iter().filter_map(Weak::upgrade) {
            sleeper.wake();
        }
    }

    /// Whether [`cancel`](Self::cancel) was called.
    pub fn is_cancelled(&self) -> bool {
        unpoisoned(self.inner.state.lock()).cancelled
    }

    /// Registers `waiter` to be woken by a cancel; false if already
    /// cancelled (then it is not registered).
    fn register(&self, waiter: &Arc<Waiter>) -> bool {
        let mut state = unpoisoned(self.inner.state.lock());
        if state.cancelled {
            return false;
        }
        state.sleepers.retain(|w| w.strong_count() > 0);
        state.sleepers.push(Arc::downgrade(waiter));
        true
    }
}

/// What may end a blocking lock wait early with EINTR: a deadline and a
/// cancel token. [`Interrupt::never`] waits as long as it takes.
///
/// ```
/// use std::time::Duration;
/// use vfscale::locks::{CancelToken, Interrupt};
///
/// let token = CancelToken::new();
/// let bounded = Interrupt::after(Duration::from_millis(10)).with_token(&token);
/// assert!(bounded.deadline().is_some());
/// assert!(Interrupt::never().deadline().is_none());
/// ```
#[derive(Debug, Clone, Copy, Default)]
pub struct Interrupt<'a> {
    deadline: Option<Instant>,
    token: Option<&'a CancelToken>,
}

impl<'a> Interrupt<'a> {
    /// No deadline, no token.
    pub fn never() -> Interrupt<'static> {
        Interrupt { deadline: None, token: None }
    }

    /// Gives up at `deadline`.
    pub fn at(deadline: Instant) -> Interrupt<'static> {
        Interrupt { deadline: Some(deadline), token: None }
    }

    /// Gives up after `timeout` from now.
    pub fn after(timeout: std::time::Duration) -> Interrupt<'static> {
        Interrupt::at(Instant::now() + timeout)
    }

    /// The same deadline, and gives up when `token` is cancelled.
    pub fn with_token<'b>(self, token: &'b CancelToken) -> Interrupt<'b> {
        Interrupt { deadline: self.deadline, token: Some(token) }
    }

    /// The deadline, if any.
    pub fn deadline(&self) -> Option<Instant> {
        self.deadline
    }

    /// Whether the wait must end now: the token is cancelled or the
    /// deadline has passed.
    pub(crate) fn fired(&self) -> bool {
        self.token.is_some_and(CancelToken::is_cancelled) || self.deadline.is_some_and(|d| Instant::now() >= d)
    }

    /// Sleeps on `waiter` until it is woken, the token is cancelled or
    /// `deadline` (the sooner of ours and the caller's) passes.
    pub(crate) fn sleep(&self, waiter: &Arc<Waiter>, deadline: Option<Instant>) {
        if let Some(token) = self.token {
            if !token.register(waiter) {
                return;
            }
        }
        let deadline = match (deadline, self.deadline) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
        waiter.sleep(deadline);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn wake_before_sleep_is_not_lost() {
        let waiter = Arc::new(Waiter::default());
        waiter.wake();
        assert!(waiter.sleep(None));
    }

    #[test]
    fn sleep_times_out() {
        let waiter = Waiter::default();
        assert!(!waiter.sleep(Some(Instant::now() + Duration::from_millis(5))));
    }

    #[test]
    fn cancel_wakes_a_sleeper() {
        let token = CancelToken::new();
        let waiter = Arc::new(Waiter::default());
        let intr = Interrupt::never().with_token(&token);
        std::thread::scope(|s| {
            s.spawn(|| {
                std::thread::sleep(Duration::from_millis(5));
                token.cancel();
            });
            intr.sleep(&waiter, None);
        });
        assert!(intr.fired());
    }

    #[test]
    fn cancelled_token_does_not_sleep() {
        let token = CancelToken::new();
        token.cancel();
        let waiter = Arc::new(Waiter::default());
        Interrupt::never().with_token(&token).sleep(&waiter, None);
        assert!(token.is_cancelled());
    }
}
