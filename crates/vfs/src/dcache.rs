//! The dentry cache: a fixed-size hash table of dentries keyed by
//! (parent inode number, name), readable with no lock and no shared write.
//!
//! Invariant: every chain is a singly linked list whose links change only
//! under its stripe's spinlock, by single pointer stores, so a reader
//! walking it without the lock sees each link either before or after a
//! change, never a torn one. A removed dentry keeps its `hash_next`, so a
//! reader standing on it walks on; its memory is released through the
//! epoch, after every reader pinned before the removal has unpinned.
//!
//! Reclamation uses crossbeam-epoch rather than seize: pinning writes only
//! the calling thread's own epoch slot (no shared cache line), it is the
//! most widely used Rust EBR, and its deferred functions let an `Arc`
//! reference stand in for an RCU-delayed free.
//!
//! Negative dentries are bounded: they are queued in creation order on the
//! creating CPU's queue, and the oldest unused ones of a queue are evicted
//! once it holds more than its share of the configured cap (a per-CPU FIFO
//! shrinker, like the per-node LRU lists of Linux's `list_lru`; hits do not
//! reorder, so a hit writes nothing, and misses on different CPUs share no
//! queue or counter).
//!
//! May import `dentry` and `reclaim`.

use crate::dentry::{key_hash, name_hash, Dentry};
use crate::reclaim::Reclaim;
use crossbeam_epoch::Guard;
use crossbeam_utils::CachePadded;
use std::collections::VecDeque;
use std::sync::{Arc, Weak};
use vfscale_sync::audited::CountedArc;
use vfscale_sync::audited::Mutex;
use vfscale_sync::audited::{AtomicPtr, Ordering};
use vfscale_sync::poison::unpoisoned;
use vfscale_sync::spin::{SpinLock, SpinLockGuard, TasLock};
use vfscale_sync::PercpuCounter;

/// Chain heads per line of the table.
const HEADS_PER_LINE: usize = 7;

/// One cache line of the hash table: seven chain heads and the spinlock
/// that guards their chains. The lock shares its line with the heads it
/// guards, so writers of names in different lines never meet: with the
/// locks in an array of their own, sixteen of them shared a line, and the
/// conflict checker caught creates in different directories colliding
/// there a few times in a hundred.
#[derive(bytemuck::Zeroable)]
#[repr(C, align(64))]
struct HeadLine {
    lock: SpinLock<TasLock, ()>,
    heads: [AtomicPtr<Dentry>; HEADS_PER_LINE],
}

const _: () = assert!(std::mem::size_of::<HeadLine>() == 64);

/// One CPU's negative dentries, oldest first.
type NegativeQueue = VecDeque<Weak<Dentry>>;

/// The dentry hash table and its negative-dentry shrinker.
pub(crate) struct Dcache {
    /// The chain heads, seven to a line with their lock.
    lines: Box<[HeadLine]>,
    /// Lines minus one (their number is a power of two).
    mask: u64,
    /// One FIFO of negative dentries per CPU.
    negatives: Box<[CachePadded<Mutex<NegativeQueue>>]>,
    negative_count: PercpuCounter,
    /// Most negatives all queues keep together (each its share, see
    /// [`Dcache::queue_share`]).
    max_negatives: usize,
    reclaim: Arc<Reclaim>,
}

impl Dcache {
    pub fn new(buckets: usize, max_negatives: usize, reclaim: Arc<Reclaim>) -> Dcache {
        let lines = buckets.div_ceil(8).max(1).next_power_of_two();
        let cpus = vfscale_sync::cpu::possible_cpus();
        Dcache {
            // Unlocked locks and empty chains are zero bits: the table
            // is zeroed by the allocator in one pass (`alloc_zeroed`: a
            // memset at this alignment), not built line by line.
            lines: bytemuck::zeroed_slice_box(lines),
            mask: lines as u64 - 1,
            negatives: (0..cpus).map(|_| CachePadded::default()).collect(),
            negative_count: PercpuCounter::new(),
            max_negatives,
            reclaim,
        }
    }

    /// The line of `hash`'s chain: chosen by the hash's low bits, the head
    /// within it by its high bits.
    fn line(&self, hash: u64) -> &HeadLine {
        &self.lines[(hash & self.mask) as usize]
    }

    fn head(&self, hash: u64) -> &AtomicPtr<Dentry> {
        &self.line(hash).heads[((hash >> 32) % HEADS_PER_LINE as u64) as usize]
    }

    fn lock(&self, hash: u64) -> SpinLockGuard<'_, TasLock, ()> {
        self.line(hash).lock.lock()
    }

    /// Finds the hashed dentry for (parent, name). Takes no lock and writes
    /// nothing; the result may be unhashed concurrently (check `seq`).
    pub fn lookup<'g>(&self, parent_ino: u64, name: &[u8], guard: &'g Guard) -> Option<&'g Dentry> {
        self.lookup_hashed(parent_ino, name, name_hash(name), guard)
    }

    /// [`lookup`](Self::lookup) of a name whose [`name_hash`] the caller
    /// has (a walk makes it as it scans the path).
    #[inline]
    pub fn lookup_hashed<'g>(
        &self,
        parent_ino: u64,
        name: &[u8],
        name_hash: u64,
        _guard: &'g Guard,
    ) -> Option<&'g Dentry> {
        let hash = key_hash(parent_ino, name_hash);
        let mut p = self.head(hash).load(Ordering::Acquire);
        while !p.is_null() {
            // SAFETY: chain pointers are owned `Arc`s whose release is
            // deferred through the epoch; the guard is pinned, so every node
            // reachable now stays allocated for 'g.
            let d = unsafe { &*p };
            if d.hash == hash && d.parent_ino == parent_ino && *d.name == *name {
                return Some(d);
            }
            p = d.hash_next.load(Ordering::Acquire);
        }
        None
    }

    /// An owned reference to a dentry found by [`lookup`](Self::lookup).
    pub fn to_arc(dentry: &Dentry) -> CountedArc<Dentry> {
        let p: *const Dentry = dentry;
        // SAFETY: `dentry` was reached through a chain under a pinned guard,
        // so the chain's `Arc` (from `Arc::into_raw`) is not yet released and
        // the strong count is at least one.
        let borrowed = std::mem::ManuallyDrop::new(unsafe { Arc::from_raw(p) });
        CountedArc::new(&borrowed)
    }

    /// Hashes `dentry`, replacing the dentry with the same key if there is
    /// one (a negative, or a positive being renamed over); returns the
    /// replaced one, now unhashed. A negative never replaces a positive:
    /// it records a miss that a create of the name may have overtaken. The
    /// caller holds the name's lock (its bucket, or its directory's for
    /// write), except when inserting a negative.
    pub fn insert(&self, dentry: Arc<Dentry>, guard: &Guard) -> Option<Arc<Dentry>> {
        let negative = dentry.inode.is_none();
        let hash = dentry.hash;
        let new = Arc::into_raw(dentry).cast_mut();
        // SAFETY: `new` is the pointer just made from an owned Arc.
        let key = unsafe { &*new };
        let _locked = self.lock(hash);
        let mut link = self.head(hash);
        loop {
            let p = link.load(Ordering::Acquire);
            if p.is_null() {
                key.hash_next.store(std::ptr::null_mut(), Ordering::Relaxed);
                link.store(new, Ordering::Release);
                drop(_locked);
                if negative {
                    self.note_negative(key);
                }
                return None;
            }
            // SAFETY: under the stripe lock, chain nodes cannot be released.
            let d = unsafe { &*p };
            if d.hash == key.hash && d.parent_ino == key.parent_ino && d.name == key.name {
                if negative && d.inode.is_some() {
                    // A create won the race with the miss this negative
                    // records: the name exists, and its dentry stays.
                    drop(_locked);
                    // SAFETY: `new` came from `Arc::into_raw` above and was
                    // never linked.
                    drop(unsafe { Arc::from_raw(new) });
                    return None;
                }
                key.hash_next.store(d.hash_next.load(Ordering::Acquire), Ordering::Relaxed);
                let old = self.unlink_locked(link, d, new, guard);
                drop(_locked);
                if negative {
                    self.note_negative(key);
                }
                return Some(old);
            }
            link = &d.hash_next;
        }
    }

    /// Removes `dentry` from its chain if it is still there; returns whether
    /// it was. The caller holds the parent's directory lock for write (or
    /// owns a dead negative).
    pub fn remove(&self, dentry: &Dentry, guard: &Guard) -> bool {
        let _locked = self.lock(dentry.hash);
        let mut link = self.head(dentry.hash);
        loop {
            let p = link.load(Ordering::Acquire);
            if p.is_null() {
                return false;
            }
            if std::ptr::eq(p, dentry) {
                let next = dentry.hash_next.load(Ordering::Acquire);
                drop(self.unlink_locked(link, dentry, next, guard));
                return true;
            }
            // SAFETY: under the stripe lock, chain nodes cannot be released.
            link = unsafe { &(*p).hash_next };
        }
    }

    /// Replaces `old` (pointed to by `link`) with `next` and unhashes it;
    /// the chain's reference to `old` is released through the epoch. Stripe
    /// lock held.
    fn unlink_locked(&self, link: &AtomicPtr<Dentry>, old: &Dentry, next: *mut Dentry, guard: &Guard) -> Arc<Dentry> {
        let write = old.seq.write_begin();
        link.store(next, Ordering::Release);
        old.set_unhashed();
        drop(write);
        if old.inode.is_none() {
            self.negative_count.add(-1);
        }
        // SAFETY: the chain owned one strong count of `old` (from
        // `Arc::into_raw`); it is no longer reachable from the chain.
        let chain_ref = unsafe { Arc::from_raw(old as *const Dentry) };
        let result = Arc::clone(&chain_ref);
        self.reclaim.defer(guard, chain_ref);
        result
    }

    fn note_negative(&self, dentry: &Dentry) {
        let index = self.negative_count.add(1) % self.negatives.len();
        let mut queue = unpoisoned(self.negatives[index].lock());
        queue.push_back(Arc::downgrade(&Self::to_arc(dentry)));
        let share = self.queue_share(index);
        if queue.len() > share {
            self.shrink_negatives(&mut queue, share);
        }
    }

    /// Most negatives queue `index` keeps: the cap split so the shares sum
    /// to it exactly, so a thread that runs on every CPU in turn (and fills
    /// every queue) still keeps no more than the cap.
    fn queue_share(&self, index: usize) -> usize {
        let queues = self.negatives.len();
        self.max_negatives / queues + usize::from(index < self.max_negatives % queues)
    }

    /// Evicts the oldest unused negative dentries of `queue` until it holds
    /// at most `keep` (dentries someone holds stay, at the front).
    fn shrink_negatives(&self, queue: &mut NegativeQueue, keep: usize) {
        let guard = crossbeam_epoch::pin();
        let mut busy = Vec::new();
        while queue.len() > keep {
            let Some(weak) = queue.pop_front() else { break };
            let Some(dentry) = weak.upgrade() else { continue };
            if dentry.is_unhashed() {
                continue;
            }
            let mut locked = dentry.lockref.lock();
            if locked.count() > 0 {
                drop(locked);
                busy.push(weak);
                continue;
            }
            locked.mark_dead();
            drop(locked);
            self.remove(&dentry, &guard);
        }
        for weak in busy.into_iter().rev() {
            queue.push_front(weak);
        }
        queue.retain(|w| w.strong_count() > 0);
    }

    /// Evicts every negative dentry nobody holds.
    pub fn evict_unused_negatives(&self) {
        for queue in self.negatives.iter() {
            let mut queue = unpoisoned(queue.lock());
            self.shrink_negatives(&mut queue, 0);
        }
    }

    /// Number of negative dentries now hashed (a sum over CPUs, exact when
    /// no dentry is being added or removed).
    pub fn negative_count(&self) -> usize {
        usize::try_from(self.negative_count.sum()).unwrap_or(0)
    }

    /// Number of hashed dentries (positive and negative); walks every
    /// bucket, for tests and statistics.
    pub fn len(&self) -> usize {
        let _guard = crossbeam_epoch::pin();
        let mut n = 0;
        for head in self.lines.iter().flat_map(|line| &line.heads) {
            let mut p = head.load(Ordering::Acquire);
            while !p.is_null() {
                n += 1;
                // SAFETY: as in `lookup`, the pinned guard keeps chain nodes
                // allocated.
                p = unsafe { &*p }.hash_next.load(Ordering::Acquire);
            }
        }
        n
    }
}

impl Drop for Dcache {
    fn drop(&mut self) {
        for head in self.lines.iter_mut().flat_map(|line| &mut line.heads) {
            let mut p = *head.get_mut();
            while !p.is_null() {
                // SAFETY: the table is being dropped, so no reader holds
                // these nodes; each chain pointer owns one strong count.
                let d = unsafe { Arc::from_raw(p) };
                p = d.hash_next.load(Ordering::Acquire);
            }
        }
    }
}
