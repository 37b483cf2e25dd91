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
//! for writing are also counted in a count of writers of their own (Linux
//! `i_writecount`), all a read lease needs, so read leases leave the
//! per-CPU ref alone. The open
//! side counts first and then checks for leases, the lease side publishes
//! its lease and then reads the counts, each with a `SeqCst` fence between,
//! so one of them sees the other.
//!
//! The count of writers is split as the per-CPU ref is: an open for
//! writing counts on the slot of the CPU it runs on and its close takes it
//! off that same slot ([`PercpuCounter::add_at`]), so no slot ever reads
//! below zero and "every slot is zero" is exact, even while other opens
//! and closes run; the open that created the file counts in a shared
//! count beside it instead (its line is in the creator's cache, and a
//! file made, written and closed at once never pays for slots).
//!
//! May import nothing of the crate.

use vfscale_sync::audited::OnceLock;
use vfscale_sync::audited::{fence, AtomicBool, AtomicIsize, Ordering};
use vfscale_sync::pad::LinePad;
use vfscale_sync::percpu_counter::PercpuCounter;
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
    /// Keeps the counts of writers off the lines of the fields every open
    /// and `stat` read (this struct's others, the inode's attributes).
    _apart: LinePad,
    /// The count of writers (Linux `i_writecount`), which a read lease
    /// reads without switching the per-CPU ref, so that read leases of one
    /// file share no written line. First the open that created the file,
    /// counted in the creator's cache:
    creator_writers: AtomicIsize,
    /// then every other open for writing, on its CPU's slot; made by the
    /// first such open (8 bytes per possible CPU, kept while the inode is).
    writers: OnceLock<PercpuCounter>,
}

/// Where an open for writing counted itself ([`InodeOpens::count_writer`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum WriterSlot {
    /// Not open for writing.
    None,
    /// The shared count: the open that created the file.
    Creator,
    /// This CPU's slot.
    Cpu(u32),
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

    /// Counts an open for writing; the open that `created` the file in
    /// the shared count, any other on its CPU's slot. Then a `SeqCst`
    /// fence, the open's half of the pair with a new read lease (see
    /// [`open_for_write`](Self::open_for_write)): the count comes before
    /// every load of the open's lease check, whatever their ordering (the
    /// lock context's and lease shards' `OnceLock`s are only acquire
    /// loads).
    pub fn count_writer(&self, created: bool) -> WriterSlot {
        let slot = if created {
            self.creator_writers.fetch_add(1, Ordering::SeqCst);
            WriterSlot::Creator
        } else {
            WriterSlot::Cpu(self.writers.get_or_init(PercpuCounter::new).add(1) as u32)
        };
        fence(Ordering::SeqCst);
        slot
    }

    /// Takes back what [`count_writer`](Self::count_writer) counted.
    pub fn uncount_writer(&self, slot: WriterSlot) {
        match slot {
            WriterSlot::None => {}
            WriterSlot::Creator => {
                self.creator_writers.fetch_sub(1, Ordering::SeqCst);
            }
            WriterSlot::Cpu(cpu) => {
                self.writers.get().expect("an open counted on a slot made the slots").add_at(cpu as usize, -1);
            }
        }
    }

    /// Whether the inode is open for writing, exactly, for a read lease
    /// (after the lease is published: the fence pairs with the one an
    /// open makes after counting itself).
    pub fn open_for_write(&self) -> bool {
        fence(Ordering::SeqCst);
        self.creator_writers.load(Ordering::SeqCst) > 0 || self.writers.get().is_some_and(|w| !w.all_zero())
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

#[cfg(test)]
mod tests {
    use super::*;
    use vfscale_sync::cpu::with_virtual_cpu;

    /// Writers opened on one CPU and closed on another take their counts
    /// off the slots they were counted on: once all are closed every slot
    /// is zero and the inode reads as open for writing by nobody, and
    /// while one (or the creator's open) stays, it reads as open.
    #[test]
    fn writers_closed_on_another_cpu_leave_the_count_exact() {
        let opens = InodeOpens::default();
        assert!(!opens.open_for_write());
        let creator = opens.count_writer(true);
        let kept = with_virtual_cpu(0, || opens.count_writer(false));
        let moved: Vec<WriterSlot> = (0..3).map(|_| with_virtual_cpu(0, || opens.count_writer(false))).collect();
        for slot in moved {
            with_virtual_cpu(1, || opens.uncount_writer(slot));
        }
        assert!(opens.open_for_write(), "one writer and the creator are open");
        with_virtual_cpu(1, || opens.uncount_writer(kept));
        assert!(opens.open_for_write(), "the creator's open is open");
        opens.uncount_writer(creator);
        assert!(!opens.open_for_write(), "every writer closed");
        let slots = opens.writers.get().expect("made by the first open");
        assert!(slots.all_zero(), "a slot kept a count: {slots:?}");
    }
}
