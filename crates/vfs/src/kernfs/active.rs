//! Active references (Linux `kernfs_get_active` / `kernfs_drain`): a
//! node's `show`/`store` may only run while it holds one, and removal
//! waits until none is held.
//!
//! Invariant: `count` is the number of active references while the node is
//! live; removal adds [`DEACTIVATED`] (a large negative bias), after which
//! no new reference is granted, and the node is drained once the count
//! equals the bias exactly.

use std::sync::atomic::{AtomicI64, AtomicU32, Ordering};
use vfscale_sync::futex;

const DEACTIVATED: i64 = i64::MIN / 2;

#[derive(Debug, Default)]
pub(crate) struct Active {
    count: AtomicI64,
    /// Bumped when the last reference of a deactivated node goes, to wake
    /// the remover.
    drained: AtomicU32,
}

/// One active reference; dropping it releases it.
#[derive(Debug)]
pub(crate) struct ActiveRef<'a>(&'a Active);

impl Active {
    /// Whether the node has not been deactivated (one load: usable in
    /// rcu-walk).
    pub fn is_live(&self) -> bool {
        self.count.load(Ordering::Acquire) >= 0
    }

    /// Takes a reference unless the node is deactivated.
    pub fn get(&self) -> Option<ActiveRef<'_>> {
        let mut v = self.count.load(Ordering::Relaxed);
        loop {
            if v < 0 {
                return None;
            }
            match self.count.compare_exchange_weak(v, v + 1, Ordering::Acquire, Ordering::Relaxed) {
                Ok(_) => return Some(ActiveRef(self)),
                Err(now) => v = now,
            }
        }
    }

    /// Refuses new references from now on.
    pub fn deactivate(&self) {
        self.count.fetch_add(DEACTIVATED, Ordering::AcqRel);
    }

    /// Blocks until every reference taken before `deactivate` is released.
    pub fn drain(&self) {
        loop {
            let generation = self.drained.load(Ordering::Acquire);
            if self.count.load(Ordering::Acquire) == DEACTIVATED {
                return;
            }
            futex::wait(&self.drained, generation, None);
        }
    }
}

impl Drop for ActiveRef<'_> {
    fn drop(&mut self) {
        if self.0.count.fetch_sub(1, Ordering::Release) - 1 == DEACTIVATED {
            self.0.drained.fetch_add(1, Ordering::Release);
            futex::wake(&self.0.drained, u32::MAX);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    #[test]
    fn references_until_deactivated() {
        let a = Active::default();
        assert!(a.is_live());
        let r = a.get().expect("live");
        a.deactivate();
        assert!(!a.is_live());
        assert!(a.get().is_none());
        drop(r);
        a.drain();
    }

    #[test]
    fn drain_waits_for_the_holder() {
        let a = Arc::new(Active::default());
        let held = Arc::clone(&a);
        let (tx, rx) = std::sync::mpsc::channel();
        let holder = std::thread::spawn(move || {
            let r = held.get().unwrap();
            tx.send(()).unwrap();
            std::thread::sleep(std::time::Duration::from_millis(50));
            drop(r);
        });
        rx.recv().unwrap();
        a.deactivate();
        let start = std::time::Instant::now();
        a.drain();
        assert!(start.elapsed() >= std::time::Duration::from_millis(20), "drain returned while a reference was held");
        holder.join().unwrap();
    }
}
