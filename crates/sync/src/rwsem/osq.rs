//! The optimistic spin queue (OSQ) of [`SpinPolicy::Spin`](super::SpinPolicy::Spin):
//! an MCS-style queue that would-be spinners join, so only its head spins on
//! the rwsem's count word and the others each spin on their own node.
//!
//! Invariant: `tail` names the last node (null when empty); the head of the
//! queue owns the OSQ. A waiter leaves early (the kernel's `need_resched()`
//! case) by moving its node from WAITING to ABANDONED; the hand-over moves a
//! successor from WAITING to GRANTED. That one compare-exchange decides the
//! race, and whoever releases the OSQ passes an abandoned node on itself.
//!
//! Linux unlinks a leaving node in place (`osq_lock`'s three-step unqueue)
//! because its nodes are per-CPU statics. Here nodes are `Arc`s, so an
//! abandoned node simply stays in the queue, kept alive by the link to it,
//! until the releaser skips it: no unlink protocol, no node reuse hazards.
//! References: the tail holds one to the last node, a predecessor's `next`
//! holds one to its successor, and the owning thread holds one while it
//! waits or owns the OSQ.
//!
//! Under loom a waiter's patience is a `Deadline` of two steps, and a
//! releaser waiting for its successor's link parks until the link is stored
//! (`shim::spin_wait`): the waits end on the same events, only sooner.

use crate::shim::{spin_loop, spin_wait, wake_spinners, AtomicPtr, AtomicU32, Deadline, Ordering};
use std::ptr;
use std::sync::Arc;

const WAITING: u32 = 0;
const GRANTED: u32 = 1;
const ABANDONED: u32 = 2;

#[derive(Debug)]
struct Node {
    state: AtomicU32,
    /// The successor: a reference it gave us when it linked in.
    next: AtomicPtr<Node>,
}

/// A queue of writers waiting for their turn to spin.
#[derive(Debug)]
pub(super) struct Osq {
    tail: AtomicPtr<Node>,
}

/// Proof of owning the OSQ; give it back with [`Osq::unlock`].
#[derive(Debug)]
#[must_use = "the OSQ stays owned until the token is passed to unlock"]
pub(super) struct OsqToken(Arc<Node>);

impl Osq {
    pub(super) fn new() -> Self {
        Self { tail: AtomicPtr::new(ptr::null_mut()) }
    }

    /// Waits for the head of the queue until `deadline`; `None` if it
    /// passed first (the node is then abandoned and skipped by releasers).
    pub(super) fn lock(&self, deadline: &mut Deadline) -> Option<OsqToken> {
        let node = Arc::new(Node { state: AtomicU32::new(WAITING), next: AtomicPtr::new(ptr::null_mut()) });
        let for_tail = Arc::into_raw(Arc::clone(&node)).cast_mut();
        // AcqRel: release publishes the node's fields to the successor;
        // acquire pairs with the predecessor's publication of its own.
        let prev = self.tail.swap(for_tail, Ordering::AcqRel);
        if prev.is_null() {
            return Some(OsqToken(node));
        }
        // SAFETY: the swap moved the tail's reference to `prev` into our
        // hands (a releaser only takes it back when its CAS on the tail
        // succeeds, which our swap now prevents).
        let prev = unsafe { Arc::from_raw(prev) };
        prev.next.store(Arc::into_raw(Arc::clone(&node)).cast_mut(), Ordering::Release);
        wake_spinners(&prev.next);
        drop(prev);
        loop {
            if node.state.load(Ordering::Acquire) == GRANTED {
                return Some(OsqToken(node));
            }
            if deadline.expired() {
                return match node.state.compare_exchange(WAITING, ABANDONED, Ordering::Acquire, Ordering::Acquire) {
                    Ok(_) => None,
                    // The hand-over won the race: we own the OSQ after all.
                    Err(_) => Some(OsqToken(node)),
                };
            }
            spin_loop();
        }
    }

    /// Hands the OSQ to the first successor still waiting, or empties it.
    pub(super) fn unlock(&self, token: OsqToken) {
        let mut current = token.0;
        loop {
            let current_ptr = Arc::as_ptr(&current).cast_mut();
            if self.tail.compare_exchange(current_ptr, ptr::null_mut(), Ordering::Release, Ordering::Relaxed).is_ok() {
                // SAFETY: the CAS took the tail's reference to `current` back.
                drop(unsafe { Arc::from_raw(current_ptr) });
                return;
            }
            // A successor swapped the tail; its link is on the way. A
            // successor preempted in between stalls us, as in Linux.
            let next = loop {
                let next = current.next.load(Ordering::Acquire);
                if !next.is_null() {
                    break next;
                }
                spin_wait(&current.next, next);
            };
            // SAFETY: the successor stored a reference for us in `next`. Only
            // the releaser reads `next`, once, and `Node` has no `Drop`, so
            // the reference is ours to take.
            let next = unsafe { Arc::from_raw(next) };
            if next.state.compare_exchange(WAITING, GRANTED, Ordering::Release, Ordering::Relaxed).is_ok() {
                return;
            }
            // It gave up waiting: release the OSQ on its behalf.
            current = next;
        }
    }

    #[cfg(test)]
    fn is_empty(&self) -> bool {
        self.tail.load(Ordering::Relaxed).is_null()
    }
}

impl Drop for Osq {
    fn drop(&mut self) {
        // Tokens are only held inside a spin loop that borrows the rwsem, so
        // a dropped OSQ is empty.
        debug_assert!(self.tail.load(Ordering::Relaxed).is_null(), "Osq: dropped while in use");
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicUsize;
    use std::sync::Barrier;
    use std::time::Duration;

    fn forever() -> Deadline {
        Deadline::after(Duration::from_secs(3600))
    }

    #[test]
    fn lock_unlock_empty_queue() {
        let osq = Osq::new();
        let token = osq.lock(&mut forever()).expect("an empty OSQ is ours at once");
        assert!(!osq.is_empty());
        osq.unlock(token);
        assert!(osq.is_empty());
    }

    #[test]
    fn waiter_gives_up_at_its_deadline_and_is_skipped() {
        let osq = Osq::new();
        let head = osq.lock(&mut forever()).unwrap();
        std::thread::scope(|s| {
            s.spawn(|| assert!(osq.lock(&mut Deadline::after(Duration::from_millis(1))).is_none()));
        });
        // The abandoned node is still queued; unlock skips it and empties the OSQ.
        assert!(!osq.is_empty());
        osq.unlock(head);
        assert!(osq.is_empty());
    }

    /// Mutual exclusion among OSQ owners, with some waiters giving up.
    #[test]
    fn stress_one_owner_at_a_time() {
        const THREADS: usize = 8;
        let iters: usize = crate::test_support::stress_iters(2_000);
        let osq = Osq::new();
        let inside = AtomicUsize::new(0);
        let owned = AtomicUsize::new(0);
        let start = Barrier::new(THREADS);
        std::thread::scope(|s| {
            for t in 0..THREADS {
                let (osq, inside, owned, start) = (&osq, &inside, &owned, &start);
                s.spawn(move || {
                    start.wait();
                    for i in 0..iters {
                        let patience =
                            if (i + t) % 3 == 0 { Duration::from_micros(5) } else { Duration::from_secs(60) };
                        if let Some(token) = osq.lock(&mut Deadline::after(patience)) {
                            assert_eq!(inside.fetch_add(1, Ordering::Relaxed), 0, "two OSQ owners");
                            owned.fetch_add(1, Ordering::Relaxed);
                            inside.fetch_sub(1, Ordering::Relaxed);
                            osq.unlock(token);
                        }
                    }
                });
            }
        });
        assert!(osq.is_empty());
        assert!(owned.load(Ordering::Relaxed) >= iters, "patient lockers always get the OSQ");
    }
}

#[cfg(all(test, loom))]
mod loom_models {
    use super::*;
    use crate::shim::UnsafeCell;
    use loom::sync::Arc;
    use std::time::Duration;

    /// Two owners never overlap (loom checks the cell) and the queue ends
    /// empty, whether waiters hand over or abandon.
    fn exclusion(patience: Duration) {
        loom::model(move || {
            let osq = Arc::new(Osq::new());
            let cell = Arc::new(UnsafeCell::new(0u32));
            let (osq2, cell2) = (osq.clone(), cell.clone());
            let other = loom::thread::spawn(move || {
                if let Some(token) = osq2.lock(&mut Deadline::after(patience)) {
                    // SAFETY: the OSQ token excludes the other thread.
                    cell2.with_mut(|p| unsafe { *p += 1 });
                    osq2.unlock(token);
                }
            });
            // Under loom any non-zero patience runs out after two checks, so
            // either thread may be the one that gives up.
            if let Some(token) = osq.lock(&mut Deadline::after(Duration::from_secs(1))) {
                // SAFETY: as above.
                cell.with_mut(|p| unsafe { *p += 1 });
                osq.unlock(token);
            }
            other.join().unwrap();
            assert!(osq.is_empty());
        });
    }

    #[test]
    fn rwsem_osq_exclusion_patient() {
        exclusion(Duration::from_secs(1));
    }

    #[test]
    fn rwsem_osq_exclusion_abandoning() {
        exclusion(Duration::ZERO);
    }
}
