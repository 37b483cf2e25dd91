//! Active references (Linux `kernfs_get_active` / `kernfs_drain`): a
//! node's `show`/`store` may only run while it holds one, and removal
//! waits until none is held.
//!
//! Invariant: the references are a [`PercpuRef`] whose initial reference
//! stands for the node being live; removal kills it (no new reference is
//! granted after that), and the node is drained once its release has run,
//! which sets `drained`. While the node is live, taking and dropping a
//! reference writes only the calling CPU's slot, so readers of one
//! attribute on many CPUs share no written line (Linux's `kn->active` is
//! one atomic every open and read changes).

use std::sync::Arc;
use vfscale_sync::audited::{AtomicU32, Ordering};
use vfscale_sync::{futex, PercpuRef};

#[derive(Debug)]
pub(crate) struct Active {
    count: PercpuRef,
    /// 1 once the last reference of a deactivated node went; the remover
    /// waits on it.
    drained: Arc<AtomicU32>,
}

impl Default for Active {
    fn default() -> Self {
        let drained = Arc::new(AtomicU32::new(0));
        let woken = Arc::clone(&drained);
        let count = PercpuRef::new(move || {
            woken.store(1, Ordering::Release);
            futex::wake(&woken, u32::MAX);
        });
        Active { count, drained }
    }
}

/// One active reference; dropping it releases it.
#[derive(Debug)]
pub(crate) struct ActiveRef<'a>(&'a Active);

impl Active {
    /// Whether the node has not been deactivated (one load: usable in
    /// rcu-walk).
    pub fn is_live(&self) -> bool {
        !self.count.is_dying()
    }

    /// Takes a reference unless the node is deactivated.
    pub fn get(&self) -> Option<ActiveRef<'_>> {
        self.count.tryget_live().then_some(ActiveRef(self))
    }

    /// Refuses new references from now on.
    pub fn deactivate(&self) {
        self.count.kill();
    }

    /// Blocks until every reference taken before `deactivate` is released.
    pub fn drain(&self) {
        while self.drained.load(Ordering::Acquire) == 0 {
            futex::wait(&self.drained, 0, None);
        }
    }
}

impl Drop for ActiveRef<'_> {
    fn drop(&mut self) {
        self.0.count.put();
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
        use vfscale_sync::audited::AtomicBool;
        let a = Arc::new(Active::default());
        let released = Arc::new(AtomicBool::new(false));
        let (held, done) = (Arc::clone(&a), Arc::clone(&released));
        let (tx, rx) = std::sync::mpsc::channel();
        let holder = std::thread::spawn(move || {
            let r = held.get().unwrap();
            tx.send(()).unwrap();
            // Makes it likely that drain() is asleep when the reference
            // goes; the check below holds however the threads run.
            std::thread::sleep(std::time::Duration::from_millis(20));
            done.store(true, Ordering::SeqCst);
            drop(r);
        });
        rx.recv().unwrap();
        a.deactivate();
        a.drain();
        assert!(released.load(Ordering::SeqCst), "drain returned while a reference was held");
        holder.join().unwrap();
    }
}
