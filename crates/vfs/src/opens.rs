//! An inode's open counts (Linux `i_readcount` / `i_writecount`), kept in
//! one per-CPU reference ([`PercpuRef`]) so that opening and closing a
//! file many threads share writes only the opening CPU's slot. The
//! reference an open file holds, which takes and puts these counts, is
//! `file::open_ref::OpenRef`.
//!
//! Invariant: while an inode has links its per-CPU ref is live; when the
//! last link goes (or the superblock goes), the ref is killed, and from
//! then on opens count themselves in `slow`.
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
//!
//! May import nothing of the crate.

use vfscale_sync::audited::OnceLock;
use vfscale_sync::audited::{fence, AtomicBool, AtomicIsize, Ordering};
use vfscale_sync::pad::LinePad;
use vfscale_sync::PercpuRef;

/// Weight of an open for reading only (bit 0 is the initial reference).
pub(crate) const READ: isize = 2;
/// Weight of an open for writing.
pub(crate) const WRITE: isize = 1 << 20;
/// Weight of an open for neither (access mode 3).
pub(crate) const OTHER: isize = 1 << 40;
/// Weight of a child directory's `..` (`inode::ParentLink`). Only leases
/// decode the counts, and only a regular file takes a lease, so a
/// directory's counts need no classes: the smallest weight, which leaves
/// room for 2^61 subdirectories.
pub(crate) const DOTDOT: isize = READ;
const CLASS_MASK: isize = WRITE - 1;

/// The open counts of one inode; the last field of its `Inode`.
#[derive(Debug, Default)]
#[repr(C)]
pub(crate) struct InodeOpens {
    /// Made on the first open, so inodes never opened pay nothing.
    pub(crate) percpu: OnceLock<PercpuRef>,
    /// Opens counted outside the per-CPU ref (after it was killed).
    pub(crate) slow: AtomicIsize,
    /// Set (for good) before the first lease request on the inode: an
    /// open that finds it clear, after counting itself, has no lease to
    /// break, and reads no lock state (the request, which sets it first,
    /// then sees the open counted).
    leased: AtomicBool,
    /// Keeps `writers` off the lines of the fields every open and `stat`
    /// read (this struct's others, the inode's attributes).
    _apart: LinePad,
    /// Opens for writing, counted here as well (Linux `i_writecount`): a
    /// read lease needs only this count, so it reads it without switching
    /// the per-CPU ref, and read leases of one file share no written line.
    pub(crate) writers: AtomicIsize,
}

/// Readers and writers decoded from a weighted count.
fn decode(count: isize) -> (u32, u32) {
    (((count & CLASS_MASK) >> 1) as u32, ((count >> 20) & CLASS_MASK) as u32)
}

impl InodeOpens {
    /// The superblock went, or the one dentry of a generator's inode:
    /// opens from now on are counted in the shared count.
    pub fn kill(&self) {
        if let Some(r) = self.seen_percpu() {
            r.kill();
        }
    }

    /// The last link of the inode went: marks the per-CPU ref dying and
    /// returns it, for the caller to finish the kill after a grace period
    /// ([`PercpuRef::start_kill`]); `None` if there is none, or another
    /// kill began first.
    pub fn start_kill(&self) -> Option<&PercpuRef> {
        self.seen_percpu().filter(|r| r.start_kill())
    }

    /// The per-CPU ref, read after a `SeqCst` fence that pairs with the
    /// one in `inode::opens_ref`: either a kill sees a ref made beside it,
    /// or the ref's maker sees the link count at 0 and kills it itself.
    fn seen_percpu(&self) -> Option<&PercpuRef> {
        fence(Ordering::SeqCst);
        self.percpu.get()
    }

    /// A lease is about to be asked for: opens from now on look for
    /// leases to break (`SeqCst`, before the request reads the counts).
    pub fn note_lease(&self) {
        // Stored once: lease requests of one file after the first share no
        // written line here.
        if !self.leased.load(Ordering::SeqCst) {
            self.leased.store(true, Ordering::SeqCst);
        }
    }

    /// Whether a lease was ever asked for on the inode (`SeqCst`, after
    /// the open counted itself).
    pub fn maybe_leased(&self) -> bool {
        self.leased.load(Ordering::SeqCst)
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
