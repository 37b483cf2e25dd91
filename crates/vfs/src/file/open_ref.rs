//! The reference an open file description holds on its inode: it counts
//! the open in the inode's open counts (`opens::InodeOpens`) and keeps the
//! inode alive.
//!
//! Invariant: while an inode has links its per-CPU ref is live, and the ref
//! itself keeps one `Arc` on the inode (`keep`), so every per-CPU reference
//! keeps the inode's memory alive without touching its `Arc` count. Once
//! the ref is killed, opens take an ordinary `Arc` and count themselves in
//! the shared count, and the last per-CPU reference's put lets `keep` go
//! through the epoch.

use crate::inode::{opens_ref, Inode};
use crate::opens::{WriterSlot, OTHER, READ, WRITE};
use crate::reclaim::Reclaim;
use std::mem::ManuallyDrop;
use std::ops::Deref;
use std::sync::Arc;
use vfscale_sync::audited::CountedArc;
use vfscale_sync::audited::Ordering;

/// A counted reference to an open file's inode: per-CPU while the inode
/// is linked, an `Arc` otherwise. Derefs to the inode's `Arc`.
pub(crate) struct OpenRef {
    /// In per-CPU mode an `Arc` that owns no count (the inode's `keep`
    /// does); never dropped then.
    inode: ManuallyDrop<Arc<Inode>>,
    weight: isize,
    percpu: bool,
    writer: WriterSlot,
}

impl OpenRef {
    /// Counts an open of `inode` with this access (`readable`, `writable`).
    /// The open that created the file counts in the shared count: its
    /// line is still in the creator's cache, and a file made and closed
    /// at once (a build's object files, seed 001's exit benchmark) never
    /// pays for per-CPU slots it would not use. A per-CPU count is taken
    /// on `cpu`'s slot, which the caller has just looked up (see
    /// [`PercpuRef::get_on`]).
    pub fn new(
        inode: &Arc<Inode>,
        reclaim: &Arc<Reclaim>,
        readable: bool,
        writable: bool,
        created: bool,
        cpu: usize,
    ) -> OpenRef {
        let weight = match (readable, writable) {
            (_, true) => WRITE,
            (true, false) => READ,
            (false, false) => OTHER,
        };
        let writer = if writable { inode.opens.count_writer(created) } else { WriterSlot::None };
        if !created && opens_ref(inode, reclaim).tryget_live_many_on(cpu, weight) {
            // SAFETY: the live reference just taken keeps the ref's own
            // `Arc` (`keep`) until it is put, so the pointer stays valid and
            // this uncounted `Arc` is never dropped (see `Drop`).
            let borrowed = unsafe { Arc::from_raw(Arc::as_ptr(inode)) };
            return OpenRef { inode: ManuallyDrop::new(borrowed), weight, percpu: true, writer };
        }
        inode.opens.slow.fetch_add(weight, Ordering::SeqCst);
        OpenRef { inode: ManuallyDrop::new(CountedArc::new(inode).into_arc()), weight, percpu: false, writer }
    }
}

impl Deref for OpenRef {
    type Target = Arc<Inode>;
    fn deref(&self) -> &Arc<Inode> {
        &self.inode
    }
}

impl OpenRef {
    /// Drops the reference; a per-CPU count is put on `cpu`'s slot, which
    /// the caller has just looked up.
    pub fn drop_on(self, cpu: usize) {
        let mut this = ManuallyDrop::new(self);
        this.release(cpu);
    }

    fn release(&mut self, cpu: usize) {
        self.inode.opens.uncount_writer(self.writer);
        if self.percpu {
            let r = self.inode.opens.percpu.get().expect("a per-CPU reference has its ref");
            r.put_on(cpu, self.weight);
        } else {
            self.inode.opens.slow.fetch_sub(self.weight, Ordering::SeqCst);
            // SAFETY: in the `Arc` case the field owns its count and is
            // taken exactly once, here (`release` runs once: from `drop`,
            // or from `drop_on`, which keeps `drop` from running), and
            // dropped as the counted reference it is.
            drop(CountedArc::adopt(unsafe { ManuallyDrop::take(&mut self.inode) }));
        }
    }
}

impl Drop for OpenRef {
    fn drop(&mut self) {
        self.release(vfscale_sync::cpu::current_cpu());
    }
}
