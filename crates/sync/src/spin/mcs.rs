//! Queued (MCS) spinlock: waiters form a FIFO queue of nodes and each spins
//! on its own node, so a release touches one waiter's cache line instead of
//! every waiter's (the idea behind the kernel's qspinlock and the rwsem OSQ).
//!
//! Invariant: the lock word is the tail of the queue (null when free); the
//! node at the head of the queue belongs to the holder. A node is linked in
//! by its successor and is reused only after that link is seen, so a
//! releaser never frees a node another thread is about to write.
//!
//! [`RawSpinLock::lock`] takes no node, so nodes come from a per-thread cache
//! of boxed nodes (one per lock the thread holds at once: an
//! [`LgLock`](crate::lglock::LgLock) in global mode holds one per CPU) and
//! the holder's node is kept in the lock for `unlock` to find. Use it where
//! many CPUs contend for one short critical section; uncontended, a
//! [`TicketLock`](super::TicketLock) is cheaper. Like every FIFO lock it
//! degrades badly when waiters outnumber CPUs: a preempted waiter stalls the
//! whole queue behind it until it runs again (waiters yield now and then,
//! see [`SPINS_BEFORE_YIELD`](super::SPINS_BEFORE_YIELD), which shortens
//! but does not remove the stall).
//!
//! Under loom a waiter parks until its flag (or, releasing, its link) is
//! stored, see [`spin`](super): the hand-over and link stores are each
//! followed by `shim::wake_spinners`, by address only, since the node may be
//! given back as soon as the store lands.
//!
//! ```
//! use vfscale_sync::spin::{McsLock, SpinLock};
//!
//! let counter: SpinLock<McsLock, u64> = SpinLock::new(0);
//! *counter.lock() += 1;
//! assert_eq!(*counter.lock(), 1);
//! ```

use super::{relax, RawSpinLock};
use crate::shim::{wake_spinners, AtomicBool, AtomicPtr, Ordering, UnsafeCell};
use crossbeam_utils::CachePadded;
use std::fmt;
use std::ptr;

/// One waiter's place in the queue; padded so the line a waiter spins on is
/// written only by its predecessor's hand-over.
struct Node {
    /// The successor, set by it once it has swapped itself into the tail.
    next: AtomicPtr<CachePadded<Node>>,
    /// True while the owner must wait; the predecessor clears it to hand over.
    locked: AtomicBool,
}

type NodePtr = *mut CachePadded<Node>;

impl Node {
    fn new() -> Self {
        Self { next: AtomicPtr::new(ptr::null_mut()), locked: AtomicBool::new(true) }
    }
}

/// Per-thread node cache: taking a node is a `Vec::pop`, not an allocation.
///
/// The cache grows to the most MCS locks its thread has held at once. Nodes
/// are plain heap boxes, so a node may be released into another thread's
/// cache, or freed if its thread's cache is already destroyed.
#[cfg(not(loom))]
mod nodes {
    use super::{Node, NodePtr};
    use crate::shim::Ordering;
    use crossbeam_utils::CachePadded;
    use std::cell::RefCell;
    use std::ptr;

    thread_local! {
        // Boxed: a node leaves the cache as a raw pointer that must stay put
        // while it is queued, so each node needs its own allocation.
        #[allow(clippy::vec_box)]
        static CACHE: RefCell<Vec<Box<CachePadded<Node>>>> = const { RefCell::new(Vec::new()) };
    }

    /// A node ready to enqueue: no successor, owner waiting.
    pub(super) fn take() -> NodePtr {
        match CACHE.try_with(|cache| cache.borrow_mut().pop()).ok().flatten() {
            Some(node) => {
                node.next.store(ptr::null_mut(), Ordering::Relaxed);
                node.locked.store(true, Ordering::Relaxed);
                Box::into_raw(node)
            }
            None => Box::into_raw(Box::new(CachePadded::new(Node::new()))),
        }
    }

    /// Returns a node to the cache.
    ///
    /// # Safety
    ///
    /// `node` came from [`take`] and no other thread can reach it any more.
    pub(super) unsafe fn give_back(node: NodePtr) {
        // SAFETY: the caller passes ownership of a pointer made by `Box::into_raw`.
        let node = unsafe { Box::from_raw(node) };
        // If the cache is gone (thread exit), the closure is dropped with the node.
        let _ = CACHE.try_with(move |cache| cache.borrow_mut().push(node));
    }
}

/// Under loom every acquisition gets a fresh node, so the model sees each
/// node's whole life and no thread-local state outlives an execution.
#[cfg(loom)]
mod nodes {
    use super::{Node, NodePtr};
    use crossbeam_utils::CachePadded;

    pub(super) fn take() -> NodePtr {
        Box::into_raw(Box::new(CachePadded::new(Node::new())))
    }

    /// # Safety
    ///
    /// `node` came from [`take`] and no other thread can reach it any more.
    pub(super) unsafe fn give_back(node: NodePtr) {
        // SAFETY: the caller passes ownership of a pointer made by `Box::into_raw`.
        drop(unsafe { Box::from_raw(node) });
    }
}

/// A queued (MCS) spinlock: FIFO, each waiter spinning on its own node.
pub struct McsLock {
    /// The last node in the queue; null when the lock is free.
    tail: AtomicPtr<CachePadded<Node>>,
    /// The holder's node, written after acquiring and read in `unlock`; only
    /// the holder touches it, and lock hand-over orders one holder's accesses
    /// before the next one's.
    holder: UnsafeCell<NodePtr>,
}

// SAFETY: the raw pointers are queue nodes owned by whichever thread holds or
// waits for the lock; they are only dereferenced under the queue protocol.
unsafe impl Send for McsLock {}
// SAFETY: as above; `holder` is only accessed by the lock holder.
unsafe impl Sync for McsLock {}

impl Default for McsLock {
    fn default() -> Self {
        Self { tail: AtomicPtr::new(ptr::null_mut()), holder: UnsafeCell::new(ptr::null_mut()) }
    }
}

impl McsLock {
    /// Records the new holder's node; called right after acquiring.
    fn acquired(&self, node: NodePtr) {
        // SAFETY: this thread has just acquired the lock, so it is the only
        // one allowed to touch `holder`.
        self.holder.with_mut(|holder| unsafe { *holder = node });
        crate::audit::lock_acquired();
    }
}

// SAFETY: the tail swap orders all lockers into one queue; only the head of
// the queue proceeds (it found a null tail, or its predecessor cleared its
// `locked` flag with release). A release either swings the tail back to null
// (release) or hands over to exactly one successor.
unsafe impl RawSpinLock for McsLock {
    const NAME: &'static str = "mcs";

    fn lock(&self) {
        let node = nodes::take();
        // AcqRel: release publishes our node's reset fields to the successor
        // that will link to it; acquire pairs with a releaser that nulled the tail.
        let prev = self.tail.swap(node, Ordering::AcqRel);
        if !prev.is_null() {
            // SAFETY: `prev` stays alive until its owner sees this link: its
            // unlock waits for `next` before giving the node back.
            let prev = unsafe { &*prev };
            let link: *const AtomicPtr<CachePadded<Node>> = &prev.next;
            prev.next.store(node, Ordering::Release);
            // By address: the owner may give `prev` back once it sees the link.
            wake_spinners(link);
            // SAFETY: `node` is ours until we give it back in `unlock`.
            let ours = unsafe { &*node };
            let mut spins = 0;
            while ours.locked.load(Ordering::Acquire) {
                relax(&ours.locked, true, &mut spins);
            }
        }
        self.acquired(node);
    }

    fn try_lock(&self) -> bool {
        if !self.tail.load(Ordering::Relaxed).is_null() {
            return false;
        }
        let node = nodes::take();
        // AcqRel for the same reasons as the swap in `lock`.
        match self.tail.compare_exchange(ptr::null_mut(), node, Ordering::AcqRel, Ordering::Relaxed) {
            Ok(_) => {
                self.acquired(node);
                true
            }
            Err(_) => {
                // SAFETY: the node was never published.
                unsafe { nodes::give_back(node) };
                false
            }
        }
    }

    unsafe fn unlock(&self) {
        debug_assert!(!self.tail.load(Ordering::Relaxed).is_null(), "McsLock: unlock of an unlocked lock");
        // SAFETY: the caller holds the lock, so `holder` is ours to read.
        let node = self.holder.with(|holder| unsafe { *holder });
        // SAFETY: the holder's node lives until we give it back below.
        let ours = unsafe { &*node };
        let mut next = ours.next.load(Ordering::Acquire);
        if next.is_null() {
            if self.tail.compare_exchange(node, ptr::null_mut(), Ordering::Release, Ordering::Relaxed).is_ok() {
                // SAFETY: the tail no longer names the node and no successor
                // swapped it out, so nobody else can reach it.
                unsafe { nodes::give_back(node) };
                return;
            }
            // A successor swapped itself into the tail but has not linked in
            // yet; its link is the last write to our node, so wait for it.
            let mut spins = 0;
            loop {
                next = ours.next.load(Ordering::Acquire);
                if !next.is_null() {
                    break;
                }
                relax(&ours.next, next, &mut spins);
            }
        }
        // SAFETY: the successor spins on its node until this store, so it is alive.
        let successor = unsafe { &*next };
        let flag: *const AtomicBool = &successor.locked;
        successor.locked.store(false, Ordering::Release);
        // By address: the successor may now take the lock, release it and
        // give its node back.
        wake_spinners(flag);
        // SAFETY: the successor has linked in (its last access to our node)
        // and the tail moved past it, so nobody else can reach it.
        unsafe { nodes::give_back(node) };
    }

    fn is_locked(&self) -> bool {
        !self.tail.load(Ordering::Relaxed).is_null()
    }
}

impl Drop for McsLock {
    fn drop(&mut self) {
        // Held at drop only if a guard was leaked; with `&mut self` there are
        // no waiters, so the holder's node is ours to reclaim.
        if self.is_locked() {
            let node = self.holder.with(|holder| {
                // SAFETY: `&mut self` rules out any concurrent access.
                unsafe { *holder }
            });
            // SAFETY: no waiter exists, so nobody else can reach the node.
            unsafe { nodes::give_back(node) };
        }
    }
}

impl fmt::Debug for McsLock {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("McsLock").field("locked", &self.is_locked()).finish()
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use crate::spin::SpinLock;
    use crate::test_support::Budget;
    use std::sync::atomic::AtomicUsize;
    use std::sync::{Arc, Barrier};

    #[test]
    fn lock_unlock_and_is_locked() {
        let lock = McsLock::default();
        assert!(!lock.is_locked());
        lock.lock();
        assert!(lock.is_locked());
        // SAFETY: locked just above.
        unsafe { lock.unlock() };
        assert!(!lock.is_locked());
        assert_eq!(McsLock::NAME, "mcs");
    }

    #[test]
    fn try_lock_fails_while_held() {
        let lock = McsLock::default();
        assert!(lock.try_lock());
        assert!(!lock.try_lock());
        // SAFETY: the first try_lock succeeded.
        unsafe { lock.unlock() };
        assert!(lock.try_lock());
        // SAFETY: held by the try_lock above.
        unsafe { lock.unlock() };
    }

    #[test]
    fn one_thread_holds_many_locks_released_in_any_order() {
        let locks: Vec<McsLock> = (0..8).map(|_| McsLock::default()).collect();
        for lock in &locks {
            lock.lock();
        }
        assert!(locks.iter().all(McsLock::is_locked));
        for lock in locks.iter().step_by(2).chain(locks.iter().skip(1).step_by(2)) {
            // SAFETY: every lock was taken above and each is released once.
            unsafe { lock.unlock() };
        }
        assert!(!locks.iter().any(McsLock::is_locked));
    }

    #[test]
    fn dropping_a_lock_held_by_a_leaked_guard_is_fine() {
        let lock: SpinLock<McsLock, u32> = SpinLock::new(7);
        std::mem::forget(lock.lock());
        assert!(lock.is_locked());
        drop(lock);
    }

    #[test]
    fn debug_shows_state() {
        let lock = McsLock::default();
        assert_eq!(format!("{lock:?}"), "McsLock { locked: false }");
        lock.lock();
        assert_eq!(format!("{lock:?}"), "McsLock { locked: true }");
        // SAFETY: locked just above.
        unsafe { lock.unlock() };
    }

    #[cfg(debug_assertions)]
    #[test]
    #[should_panic(expected = "unlock of an unlocked lock")]
    fn unlock_of_unlocked_lock_panics() {
        let lock = McsLock::default();
        // SAFETY: deliberately wrong; the debug check panics before any access.
        unsafe { lock.unlock() };
    }

    /// Mutual exclusion: a non-atomic counter under the lock, plus a check
    /// that nobody else is inside while a thread holds it.
    #[test]
    fn stress_mutual_exclusion() {
        const THREADS: usize = 8;
        let budget = Budget::new(5_000);
        let counter = Arc::new(SpinLock::<McsLock, u64>::new(0));
        let inside = Arc::new(AtomicUsize::new(0));
        let start = Arc::new(Barrier::new(THREADS));
        let handles: Vec<_> = (0..THREADS)
            .map(|t| {
                let (counter, inside, start) = (counter.clone(), inside.clone(), start.clone());
                std::thread::spawn(move || {
                    start.wait();
                    let mut i = 0;
                    while budget.allows(i) {
                        let mut guard = if (i + t) % 4 == 0 {
                            loop {
                                if let Some(guard) = counter.try_lock() {
                                    break guard;
                                }
                                std::thread::yield_now();
                            }
                        } else {
                            counter.lock()
                        };
                        assert_eq!(inside.fetch_add(1, std::sync::atomic::Ordering::Relaxed), 0);
                        *guard += 1;
                        inside.fetch_sub(1, std::sync::atomic::Ordering::Relaxed);
                        i += 1;
                    }
                    i as u64
                })
            })
            .collect();
        let done: u64 = handles.into_iter().map(|h| h.join().unwrap()).sum();
        assert_eq!(*counter.lock(), done);
        assert!(!counter.is_locked());
    }
}

#[cfg(all(test, loom))]
mod loom_models {
    //! Waiters park under loom until their node's flag or link is stored
    //! (`shim::spin_wait`), so several may wait at once without making the
    //! search unbounded.

    use super::*;
    use crate::spin::SpinLock;
    use loom::sync::Arc;
    use loom::thread;

    fn try_increment(counter: &SpinLock<McsLock, u32>) -> u32 {
        match counter.try_lock() {
            Some(mut guard) => {
                *guard += 1;
                1
            }
            None => 0,
        }
    }

    #[test]
    fn mcs_mutual_exclusion_two_lockers() {
        loom::model(|| {
            let counter = Arc::new(SpinLock::<McsLock, u32>::new(0));
            let other = counter.clone();
            let locker = thread::spawn(move || *other.lock() += 1);
            *counter.lock() += 1;
            locker.join().unwrap();
            assert_eq!(*counter.lock(), 2);
        });
    }

    /// One queued locker (the only thread that can spin, on its node or on
    /// the hand-over) against two `try_lock`ers: whoever holds the lock when
    /// the locker queues must hand over through the successor link.
    #[test]
    fn mcs_mutual_exclusion_locker_and_two_try_lockers() {
        loom::model(|| {
            let counter = Arc::new(SpinLock::<McsLock, u32>::new(0));
            let triers: Vec<_> = (0..2)
                .map(|_| {
                    let counter = counter.clone();
                    thread::spawn(move || try_increment(&counter))
                })
                .collect();
            *counter.lock() += 1;
            let tried: u32 = triers.into_iter().map(|t| t.join().unwrap()).sum();
            assert_eq!(*counter.lock(), 1 + tried);
            assert!(!counter.is_locked());
        });
    }

    #[test]
    fn mcs_try_lock_against_locker() {
        loom::model(|| {
            let counter = Arc::new(SpinLock::<McsLock, u32>::new(0));
            let other = counter.clone();
            let locker = thread::spawn(move || *other.lock() += 1);
            let tried = try_increment(&counter);
            locker.join().unwrap();
            assert_eq!(*counter.lock(), 1 + tried);
        });
    }
}
