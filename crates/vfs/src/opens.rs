//! The reference an open file description holds on its inode, and the
//! inode's open counts (Linux `i_readcount` / `i_writecount`), kept in one
//! per-CPU reference ([`PercpuRef`]) so that opening and closing a file
//! many threads share writes only the opening CPU's slot.
//!
//! Invariant: while an inode has links its open ref is live, and the ref
//! itself keeps one `Arc` on the inode (`keep`), so every per-CPU reference
//! keeps the inode's memory alive without touching its `Arc` count. When the
//! last link goes (or the superblock goes), the ref is killed: from then on
//! opens take an ordinary `Arc` and count themselves in `slow`, and the
//! last per-CPU reference's put lets `keep` go through the epoch.
//!
//! An open counts with a weight by access mode ([`READ`], [`WRITE`],
//! [`OTHER`]), so the one count decodes into the reader and writer counts a
//! write lease needs; reading them switches the ref to atomic mode for good
//! (a file that had a write lease opens through the shared count). Opens
//! for writing are also counted in one shared count of their own, all a
//! read lease needs, so read leases leave the per-CPU ref alone. The open
//! side counts first and then checks for leases, the lease side publishes
//! its lease and then reads the counts, all `SeqCst`, so one of them sees
//! the other.

use crate::inode::Inode;
use crate::reclaim::Reclaim;
use std::mem::ManuallyDrop;
use std::ops::Deref;
use std::sync::Arc;
use vfscale_sync::audited::CountedArc;
use vfscale_sync::audited::{fence, AtomicIsize, Ordering};
use vfscale_sync::audited::{Mutex, OnceLock};
use vfscale_sync::pad::LinePad;
use vfscale_sync::PercpuRef;

/// Weight of an open for reading only (bit 0 is the initial reference).
const READ: isize = 2;
/// Weight of an open for writing.
const WRITE: isize = 1 << 20;
/// Weight of an open for neither (access mode 3).
const OTHER: isize = 1 << 40;
const CLASS_MASK: isize = WRITE - 1;

/// The open counts of one inode; the last field of its [`Inode`].
#[derive(Debug, Default)]
#[repr(C)]
pub(crate) struct InodeOpens {
    /// Made on the first open, so inodes never opened pay nothing.
    percpu: OnceLock<PercpuRef>,
    /// Opens counted outside the per-CPU ref (after it was killed).
    slow: AtomicIsize,
    /// Keeps `writers` off the lines of the fields every open and `stat`
    /// read (this struct's others, the inode's attributes).
    _apart: LinePad,
    /// Opens for writing, counted here as well (Linux `i_writecount`): a
    /// read lease needs only this count, so it reads it without switching
    /// the per-CPU ref, and read leases of one file share no written line.
    writers: AtomicIsize,
}

/// Readers and writers decoded from a weighted count.
fn decode(count: isize) -> (u32, u32) {
    (((count & CLASS_MASK) >> 1) as u32, ((count >> 20) & CLASS_MASK) as u32)
}

impl InodeOpens {
    /// The per-CPU ref of `inode`, made live on first use. One made after
    /// the last link went is killed at once (the unlink may not have seen
    /// it), so it never keeps an unlinked inode.
    fn percpu<'i>(inode: &'i Arc<Inode>, reclaim: &Arc<Reclaim>) -> &'i PercpuRef {
        let opens = &inode.opens;
        if let Some(r) = opens.percpu.get() {
            return r;
        }
        let mut made = false;
        let r = opens.percpu.get_or_init(|| {
            made = true;
            let keep = Mutex::new(Some(Arc::clone(inode)));
            let reclaim = Arc::clone(reclaim);
            PercpuRef::new(move || {
                if let Some(inode) = keep.lock().unwrap_or_else(|e| e.into_inner()).take() {
                    // The release runs inside the inode it may free: let
                    // the epoch drop it after this call has returned (and
                    // `drop_caches` wait for that).
                    reclaim.defer(&crossbeam_epoch::pin(), inode);
                }
            })
        });
        // Pairs with the fence in `kill`: either the unlink saw the ref,
        // or this sees the unlink.
        fence(Ordering::SeqCst);
        if made && inode.stat().nlink == 0 {
            r.kill();
        }
        r
    }

    /// The last link of the inode went (or its superblock did): opens from
    /// now on are counted in the shared count.
    pub fn kill(&self) {
        fence(Ordering::SeqCst);
        if let Some(r) = self.percpu.get() {
            r.kill();
        }
    }

    /// Whether the inode is open for writing, exactly, for a read lease
    /// (`SeqCst`, after the lease is published).
    pub fn open_for_write(&self) -> bool {
        self.writers.load(Ordering::SeqCst) > 0
    }

    /// Exact reader and writer counts, for a write lease (`SeqCst`, after
    /// the lease is published).
    pub fn counts(&self) -> (u32, u32) {
        let percpu = self.percpu.get().map_or(0, |r| {
            r.switch_to_atomic();
            r.atomic_count().map_or(0, |c| c as isize)
        });
        let (r1, w1) = decode(percpu);
        let (r2, w2) = decode(self.slow.load(Ordering::SeqCst));
        (r1 + r2, w1 + w2)
    }
}

/// A counted reference to an open file's inode: per-CPU while the inode
/// is linked, an `Arc` otherwise. Derefs to the inode's `Arc`.
pub(crate) struct OpenRef {
    /// In per-CPU mode an `Arc` that owns no count (the inode's `keep`
    /// does); never dropped then.
    inode: ManuallyDrop<Arc<Inode>>,
    weight: isize,
    percpu: bool,
}

impl OpenRef {
    /// Counts an open of `inode` with this access (`readable`, `writable`).
    /// The open that created the file counts in the shared count: its
    /// line is still in the creator's cache, and a file made and closed
    /// at once (a build's object files, seed 001's exit benchmark) never
    /// pays for per-CPU slots it would not use.
    pub fn new(inode: &Arc<Inode>, reclaim: &Arc<Reclaim>, readable: bool, writable: bool, created: bool) -> OpenRef {
        let weight = match (readable, writable) {
            (_, true) => WRITE,
            (true, false) => READ,
            (false, false) => OTHER,
        };
        if writable {
            inode.opens.writers.fetch_add(1, Ordering::SeqCst);
            // The open's half of the pair with a new read lease: the count
            // comes before every load of the lease check, whatever their
            // ordering (the lock context's and lease shards' `OnceLock`s
            // are only acquire loads).
            fence(Ordering::SeqCst);
        }
        if !created && InodeOpens::percpu(inode, reclaim).tryget_live_many(weight) {
            // SAFETY: the live reference just taken keeps the ref's own
            // `Arc` (`keep`) until it is put, so the pointer stays valid and
            // this uncounted `Arc` is never dropped (see `Drop`).
            let borrowed = unsafe { Arc::from_raw(Arc::as_ptr(inode)) };
            return OpenRef { inode: ManuallyDrop::new(borrowed), weight, percpu: true };
        }
        inode.opens.slow.fetch_add(weight, Ordering::SeqCst);
        OpenRef { inode: ManuallyDrop::new(CountedArc::new(inode).into_arc()), weight, percpu: false }
    }
}

impl Deref for OpenRef {
    type Target = Arc<Inode>;
    fn deref(&self) -> &Arc<Inode> {
        &self.inode
    }
}

impl Drop for OpenRef {
    fn drop(&mut self) {
        if self.weight == WRITE {
            self.inode.opens.writers.fetch_sub(1, Ordering::SeqCst);
        }
        if self.percpu {
            let r = self.inode.opens.percpu.get().expect("a per-CPU reference has its ref");
            r.put_many(self.weight);
        } else {
            self.inode.opens.slow.fetch_sub(self.weight, Ordering::SeqCst);
            // SAFETY: in the `Arc` case the field owns its count and is
            // taken exactly once, here, and dropped as the counted
            // reference it is.
            drop(CountedArc::adopt(unsafe { ManuallyDrop::take(&mut self.inode) }));
        }
    }
}
