//! Ticket spinlock: FIFO among waiters. Each locker takes the next ticket and
//! spins until `now_serving` reaches it; all waiters spin on one word.

use super::{relax, RawSpinLock};
use crate::shim::{wake_spinners, AtomicU32, Ordering};

/// A FIFO ticket spinlock.
#[derive(Debug, Default)]
pub struct TicketLock {
    next_ticket: AtomicU32,
    now_serving: AtomicU32,
}

// SAFETY: tickets are unique (fetch_add), and only the holder of the ticket
// equal to `now_serving` proceeds; it advances `now_serving` with release.
unsafe impl RawSpinLock for TicketLock {
    const NAME: &'static str = "ticket";

    fn lock(&self) {
        crate::audit::lock_acquired();
        let ticket = self.next_ticket.fetch_add(1, Ordering::Relaxed);
        let mut spins = 0;
        loop {
            let serving = self.now_serving.load(Ordering::Acquire);
            if serving == ticket {
                break;
            }
            relax(&self.now_serving, serving, &mut spins);
        }
    }

    fn try_lock(&self) -> bool {
        let serving = self.now_serving.load(Ordering::Relaxed);
        let acquired = self
            .next_ticket
            .compare_exchange(serving, serving.wrapping_add(1), Ordering::Acquire, Ordering::Relaxed)
            .is_ok();
        if acquired {
            crate::audit::lock_acquired();
        }
        acquired
    }

    unsafe fn unlock(&self) {
        let serving = self.now_serving.load(Ordering::Relaxed);
        debug_assert!(self.next_ticket.load(Ordering::Relaxed) != serving, "TicketLock: unlock of an unlocked lock");
        self.now_serving.store(serving.wrapping_add(1), Ordering::Release);
        wake_spinners(&self.now_serving);
    }

    fn is_locked(&self) -> bool {
        self.next_ticket.load(Ordering::Relaxed) != self.now_serving.load(Ordering::Relaxed)
    }
}
