//! A directory's entries split by name hash, each bucket under its own
//! lock on lines of its own (sv6's and ScaleFS's hashed directory), in an
//! extendible hash table that grows one bucket at a time.
//!
//! Invariant: a bucket holds the entries whose name hashes agree with its
//! slot on the low `depth` bits, each in a slot of its own until it goes;
//! its slots change only under its lock, by single stores. A split copies
//! the bucket's pointers into its two halves and points its slots at them
//! (in place, or in a table twice the size), all under the bucket's lock,
//! and leaves the bucket as it was, marked replaced, so a writer that
//! finds its bucket replaced under the lock finds the halves in the table
//! it loads next, and a reader (which takes no lock) on the old bucket
//! finds every name it held until the split. Nodes, buckets, overflows
//! and tables are freed through the epoch.
//!
//! A directory's first entry makes its table: [`INITIAL_DEPTH`] bits, 64
//! buckets, so names in small directories rarely share a bucket (8 KiB,
//! the price of two lines per bucket). Past [`SPLIT_AT`] entries a bucket
//! splits, copying its pointers (no node is made, freed or written): it
//! rewrites its own slots, under the resize lock held for reading (such
//! splits run side by side, and the lock is per CPU, so they share no
//! line), or, if
//! its depth was the table's, makes a table twice the size under the
//! lock held for writing. The table doubles only
//! while it has fewer than [`SLOTS_PER_BUCKET`] slots per bucket, so names
//! whose hashes agree on many bits fill one bucket's overflow rather than
//! double the table once per name.
//! Creates and unlinks that split nothing take no lock but their bucket's,
//! in the old table or the new one, which share the buckets.

use super::{cookie_order, Entry};
use crate::dentry::Dentry;
use crate::reclaim::Reclaim;
use crossbeam_epoch::{Guard, Owned, Shared};
use std::collections::BinaryHeap;
use std::sync::Arc;
use vfscale_sync::audited::{
    AtomicBool, AtomicPtr, AtomicU32, AtomicU64, EpochAtomic, Mutex, MutexGuard, OnceLock, Ordering,
};
use vfscale_sync::pad::LinePad;
use vfscale_sync::percpu_rwsem::PerCpuRwSem;
use vfscale_sync::poison::unpoisoned;
use vfscale_sync::spin::{RawSpinLock, TasLock};

/// Depth of a directory's first table: 64 buckets.
pub(crate) const INITIAL_DEPTH: u32 = 6;
/// Entries a bucket takes before it splits.
pub(crate) const SPLIT_AT: usize = 8;
/// No bucket splits past this depth (names whose hashes agree on this
/// many bits share a bucket however many there are).
const MAX_DEPTH: u32 = 40;
/// A split doubles the table only while the table has fewer slots than
/// this many per distinct bucket. Hashes drawn at random stay far below it
/// (extendible hashing with 8-entry buckets keeps some 15 slots per bucket
/// at a million entries); names chosen so that their hashes agree on many
/// low bits would otherwise double the table on each insert, to 2^40
/// slots, and here fill their bucket's overflow instead.
const SLOTS_PER_BUCKET: usize = 64;

/// One entry, padded as dentries are, so no other object's bytes share
/// its lines: the allocator may place nodes that two CPUs made side by
/// side, and a look-up that reads one would then read a line that an
/// insert elsewhere writes. A node is written once, by the CPU that makes
/// it: buckets hold pointers to nodes, so nothing a bucket later does (an
/// unlink beside it, a split) writes a node's lines. (Padded, not
/// aligned: an aligned allocation cost some 600 instructions more in
/// glibc's allocator, and with mimalloc, the command's, aligned nodes
/// made no more operations a second.)
#[repr(C)]
struct Node {
    _head: LinePad,
    entry: Entry,
    hash: u64,
    _tail: LinePad,
}

impl Node {
    fn new(entry: Entry, hash: u64) -> Owned<Node> {
        Owned::new(Node { _head: LinePad::new(), entry, hash, _tail: LinePad::new() })
    }
}

/// Which of 64 classes (a hash's top six bits, which no bucket's depth
/// reaches) a bucket's names fall in, so that a look-up of a name the
/// bucket lacks reads the bucket's first line alone, not its nodes, whose lines
/// the CPUs that made them wrote (in one directory both CPUs' names share
/// every bucket in turn, and each node read was a line moved). Readers
/// read `present`; writers, under the bucket's lock, keep a 2-bit count
/// per class in `low` and `high`. A count that reaches 3 stays there, and
/// its class reads present until the bucket splits: look-ups then walk
/// the slots, as they would without the classes.
#[derive(Default)]
struct Classes {
    present: AtomicU64,
    low: AtomicU64,
    high: AtomicU64,
}

impl Classes {
    fn of(hash: u64) -> u64 {
        1 << (hash >> 58)
    }

    /// Whether a name of `hash` may be in the bucket: an insert counts the
    /// class before it links the node and an unlink uncounts it after, so
    /// a name in a slot always reads present.
    fn may_hold(&self, hash: u64) -> bool {
        self.present.load(Ordering::Acquire) & Self::of(hash) != 0
    }

    /// Counts a name just linked (under the bucket's lock).
    fn add(&self, hash: u64) {
        let class = Self::of(hash);
        let (low, high) = (self.low.load(Ordering::Relaxed), self.high.load(Ordering::Relaxed));
        match (low & class != 0, high & class != 0) {
            (true, true) => return,
            (true, false) => {
                self.low.store(low & !class, Ordering::Relaxed);
                self.high.store(high | class, Ordering::Relaxed);
            }
            (false, _) => self.low.store(low | class, Ordering::Relaxed),
        }
        let present = self.present.load(Ordering::Relaxed);
        if present & class == 0 {
            self.present.store(present | class, Ordering::Release);
        }
    }

    /// Uncounts a name just unlinked (under the bucket's lock).
    fn remove(&self, hash: u64) {
        let class = Self::of(hash);
        let (low, high) = (self.low.load(Ordering::Relaxed), self.high.load(Ordering::Relaxed));
        match (low & class != 0, high & class != 0) {
            (true, true) => {}
            (false, true) => {
                self.high.store(high & !class, Ordering::Relaxed);
                self.low.store(low | class, Ordering::Relaxed);
            }
            (true, false) => {
                self.low.store(low & !class, Ordering::Relaxed);
                let present = self.present.load(Ordering::Relaxed);
                self.present.store(present & !class, Ordering::Release);
            }
            (false, false) => debug_assert!(false, "split directory: uncounting a name never counted"),
        }
    }
}

/// Slots a bucket holds on its own second line: as many as it takes
/// before it splits.
const INLINE: usize = SPLIT_AT;

/// A bucket's inline slots, on a line of their own.
#[repr(C, align(64))]
struct Inline([EpochAtomic<Node>; INLINE]);

/// A bucket's slots past its inline ones, for the names of a bucket
/// refused a split (or a half that took all its bucket's names). When
/// full, it is replaced by one twice the size that holds the same
/// pointers in the same places; the old one, unchanged from then on, goes
/// through the epoch. Once unlinks empty it, it goes too.
struct Overflow {
    slots: Box<[EpochAtomic<Node>]>,
}

/// One bucket: its lock, how many low hash bits its entries share and
/// its classes on one line, the pointers to its nodes on the next. A name
/// keeps its slot until it goes (a rename over it stores the new node in
/// the same slot).
#[repr(C, align(64))]
struct Bucket {
    lock: TasLock,
    /// Set by a split, under the lock; the bucket then stays out of use,
    /// its slots as the split found them, until the epoch frees it.
    replaced: AtomicBool,
    depth: u32,
    /// The low `depth` bits every hash in the bucket has.
    bits: u64,
    /// Names in the slots. Written under `lock`.
    len: AtomicU32,
    /// Names the bucket takes before it tries to split again, once a
    /// split was refused for the table's size (0: [`SPLIT_AT`]), unless
    /// the table deepens past it first. Written under `lock`.
    split_past: AtomicU32,
    classes: Classes,
    /// Null while the inline slots hold every name.
    overflow: EpochAtomic<Overflow>,
    slots: Inline,
}

const _: () = assert!(std::mem::size_of::<Bucket>() == 128, "a bucket is two lines");

impl Bucket {
    /// A new empty bucket, owned by the table whose slots will name it.
    fn new(depth: u32, bits: u64) -> *mut Bucket {
        let (lock, classes, overflow) = (TasLock::default(), Classes::default(), EpochAtomic::null());
        let (replaced, len, split_past) = (AtomicBool::new(false), AtomicU32::new(0), AtomicU32::new(0));
        let slots = Inline(std::array::from_fn(|_| EpochAtomic::null()));
        Box::into_raw(Box::new(Bucket { lock, replaced, depth, bits, len, split_past, classes, overflow, slots }))
    }

    /// The slots, inline first, then the overflow's as it is now.
    fn slots<'g>(&'g self, guard: &'g Guard) -> impl Iterator<Item = &'g EpochAtomic<Node>> {
        // SAFETY: an overflow is freed through the epoch once replaced or
        // taken away empty (or with its bucket), and `guard` is pinned.
        let overflow: &[EpochAtomic<Node>] =
            unsafe { self.overflow.load(Ordering::Acquire, guard).as_ref() }.map_or(&[], |o| &o.slots);
        self.slots.0.iter().chain(overflow)
    }

    /// Puts `node` in the first free slot, under the lock: a new node, or
    /// one of a bucket a split is dividing (the split holds both buckets'
    /// locks, and this one is not yet in any table's slot). The class is
    /// counted first: a listing that finds the node, and then looks its
    /// name up, must find the class present.
    fn link(&self, node: Shared<'_, Node>, guard: &Guard, reclaim: &Reclaim) {
        // SAFETY: the node is new, or in the locked bucket being split, so
        // it is neither unlinked nor freed meanwhile; `guard` is pinned.
        let linked = unsafe { node.deref() };
        self.classes.add(linked.hash);
        let free = self.slots(guard).find(|slot| slot.load(Ordering::Relaxed, guard).is_null());
        free.unwrap_or_else(|| self.grow(guard, reclaim)).store(node, Ordering::Release);
        #[cfg(test)]
        crate::test_pause::pause_at(crate::test_pause::Point::Published, &linked.hash.to_le_bytes());
        self.len.store(self.len.load(Ordering::Relaxed) + 1, Ordering::Relaxed);
    }

    /// Replaces the overflow, every slot of it taken (or none), by one
    /// twice its size ([`INLINE`] at first) holding its pointers; returns
    /// the first free slot. Under the lock.
    fn grow<'g>(&'g self, guard: &'g Guard, reclaim: &Reclaim) -> &'g EpochAtomic<Node> {
        let old = self.overflow.load(Ordering::Relaxed, guard);
        // SAFETY: the bucket is locked, so its overflow is not replaced
        // meanwhile; `guard` is pinned.
        let kept: &[EpochAtomic<Node>] = unsafe { old.as_ref() }.map_or(&[], |o| &o.slots);
        let slots: Box<[EpochAtomic<Node>]> = (0..(2 * kept.len()).max(INLINE))
            .map(|i| {
                let slot = EpochAtomic::null();
                if let Some(kept) = kept.get(i) {
                    slot.store(kept.load(Ordering::Relaxed, guard), Ordering::Relaxed);
                }
                slot
            })
            .collect();
        let grown = Owned::new(Overflow { slots }).into_shared(guard);
        self.overflow.store(grown, Ordering::Release);
        if !old.is_null() {
            // SAFETY: replaced just above; readers on it are pinned and it
            // frees no node.
            reclaim.defer(guard, unsafe { old.into_owned() });
        }
        // SAFETY: made just above; freed only through the epoch.
        &unsafe { grown.deref() }.slots[kept.len()]
    }

    /// Takes the overflow away once no slot of it holds a name (under the
    /// lock), so that the bucket's walks read its eight slots alone again.
    fn drop_empty_overflow(&self, guard: &Guard, reclaim: &Reclaim) {
        let overflow = self.overflow.load(Ordering::Relaxed, guard);
        // SAFETY: the bucket is locked, so its overflow is not replaced
        // meanwhile; `guard` is pinned.
        let Some(slots) = (unsafe { overflow.as_ref() }).map(|o| &o.slots) else {
            return;
        };
        if slots.iter().all(|slot| slot.load(Ordering::Relaxed, guard).is_null()) {
            self.overflow.store(Shared::null(), Ordering::Release);
            // SAFETY: no longer in the bucket; readers on it are pinned,
            // and it frees no node.
            reclaim.defer(guard, unsafe { overflow.into_owned() });
        }
    }

    /// The nodes, read without the lock. Beside an insert or an unlink, a
    /// name there throughout is found: it keeps its slot. Beside a split
    /// too: the split leaves the bucket's slots as they were.
    fn nodes<'g>(&'g self, guard: &'g Guard) -> impl Iterator<Item = &'g Node> {
        self.slots(guard).filter_map(move |slot| {
            // SAFETY: nodes are freed through the epoch after they leave
            // their slot, and `guard` is pinned.
            let node = unsafe { slot.load(Ordering::Acquire, guard).as_ref() }?;
            #[cfg(test)]
            crate::test_pause::pause_at(crate::test_pause::Point::Walked, &node.hash.to_le_bytes());
            Some(node)
        })
    }
}

impl Drop for Bucket {
    fn drop(&mut self) {
        // SAFETY: a bucket is dropped when its directory is, or through the
        // epoch once a split took it out of every slot: no reader is left.
        // A replaced bucket's nodes are its halves' now; any other's are
        // its own, each in one slot. Its overflow is its alone.
        unsafe {
            let guard = crossbeam_epoch::unprotected();
            if !self.replaced.load(Ordering::Relaxed) {
                for slot in self.slots(guard) {
                    let node = slot.load(Ordering::Relaxed, guard);
                    if !node.is_null() {
                        drop(node.into_owned());
                    }
                }
            }
            let overflow = self.overflow.load(Ordering::Relaxed, guard);
            if !overflow.is_null() {
                drop(overflow.into_owned());
            }
        }
    }
}

/// The slots of the extendible hash: `1 << depth` of them, slot `i`
/// naming the bucket of the hashes whose low bits are `i`. A split of a
/// bucket shallower than the table changes its slots in place; one as deep
/// as the table makes a table twice the size. Buckets belong to the
/// directory, not to a table: a table's drop frees none.
struct Table {
    depth: u32,
    slots: Box<[AtomicPtr<Bucket>]>,
}

impl Table {
    /// The slots that name `bucket` (or its halves, once it splits): those
    /// whose low `depth` bits are its own, lowest first.
    fn slots_of(&self, bucket: &Bucket) -> std::iter::StepBy<std::ops::Range<usize>> {
        (bucket.bits as usize..self.slots.len()).step_by(1 << bucket.depth)
    }

    fn slot(&self, hash: u64) -> &AtomicPtr<Bucket> {
        &self.slots[(hash & ((1u64 << self.depth) - 1)) as usize]
    }

    /// The bucket of `hash`, valid while `guard` is pinned.
    fn bucket<'g>(&self, hash: u64, _guard: &'g Guard) -> &'g Bucket {
        // SAFETY: a slot always names a live bucket; one a split replaces
        // is freed through the epoch, after `guard` unpins.
        unsafe { &*self.slot(hash).load(Ordering::Acquire) }
    }
}

/// The entries of one directory, split by hash.
pub(crate) struct SplitEntries {
    /// Null until the first entry.
    table: EpochAtomic<Table>,
    /// Held by the create that makes the table, and by whatever locks
    /// the directory whole (an rmdir, a chmod) while it has none, so that
    /// none is made meanwhile.
    first: Mutex<()>,
    /// Taken for reading by a split that rewrites its bucket's slots, for
    /// writing by one that replaces the table; never by a create or
    /// unlink that splits nothing. Per CPU, so splits on different CPUs
    /// share no line, and made by the first split, so directories that
    /// never split (most) carry none.
    resize: OnceLock<PerCpuRwSem<()>>,
}

/// A bucket held locked (and readable: the guard keeps it from being
/// freed).
pub(crate) struct BucketGuard {
    bucket: *const Bucket,
    guard: Guard,
}

impl BucketGuard {
    fn bucket(&self) -> &Bucket {
        // SAFETY: taken from a slot while `guard` was pinned, and buckets
        // are freed through the epoch.
        unsafe { &*self.bucket }
    }
}

impl Drop for BucketGuard {
    fn drop(&mut self) {
        // SAFETY: this guard took the lock and releases it once.
        unsafe { self.bucket().lock.unlock() };
    }
}

impl SplitEntries {
    pub fn new() -> SplitEntries {
        SplitEntries { table: EpochAtomic::null(), first: Mutex::new(()), resize: OnceLock::new() }
    }

    /// The entry named `name` (whose hash is `hash`), locking nothing.
    pub fn get<'g>(&self, name: &[u8], hash: u64, guard: &'g Guard) -> Option<&'g Arc<Dentry>> {
        // SAFETY: tables are released through the epoch; `guard` is pinned.
        let table = unsafe { self.table.load(Ordering::Acquire, guard).as_ref()? };
        find(table.bucket(hash, guard), name, hash, guard).map(|node| &node.entry.dentry)
    }

    /// Locks the bucket of `hash`, making the table if there is none.
    /// Buckets locked together are locked in [`lock_order`].
    pub fn lock(&self, hash: u64) -> BucketGuard {
        let guard = crossbeam_epoch::pin();
        loop {
            let table = self.table.load(Ordering::Acquire, &guard);
            // SAFETY: as in `get`.
            let Some(table) = (unsafe { table.as_ref() }) else {
                self.make_table(&guard);
                continue;
            };
            let bucket: *const Bucket = table.bucket(hash, &guard);
            // SAFETY: as in `Table::bucket`.
            let held = unsafe { &*bucket };
            held.lock.lock();
            if !held.replaced.load(Ordering::Acquire) {
                return BucketGuard { bucket, guard };
            }
            // SAFETY: locked just above.
            unsafe { held.lock.unlock() };
        }
    }

    fn make_table(&self, guard: &Guard) {
        let _first = unpoisoned(self.first.lock());
        if self.table.load(Ordering::Acquire, guard).is_null() {
            let slots = (0..1 << INITIAL_DEPTH).map(|bits| AtomicPtr::new(Bucket::new(INITIAL_DEPTH, bits))).collect();
            self.table.store(Owned::new(Table { depth: INITIAL_DEPTH, slots }), Ordering::Release);
        }
    }

    /// Locks every bucket (for rmdir, a chmod), in lock order, in a table no
    /// split has replaced; `NoTable` while the directory has no table,
    /// holding the lock that keeps one from being made until it drops.
    pub fn lock_all(&self) -> AllBuckets<'_> {
        let guard = crossbeam_epoch::pin();
        loop {
            let first = unpoisoned(self.first.lock());
            // SAFETY: as in `get`.
            let Some(table) = (unsafe { self.table.load(Ordering::Acquire, &guard).as_ref() }) else {
                return AllBuckets::NoTable { _first: first };
            };
            drop(first);
            let mut buckets: Vec<(u64, *const Bucket)> =
                distinct(table, &guard).map(|(slot, b)| (lock_order(slot as u64), b as *const Bucket)).collect();
            buckets.sort_by_key(|(order, _)| *order);
            let mut held = Vec::with_capacity(buckets.len());
            for (_, bucket) in buckets {
                // SAFETY: as in `Table::bucket`; `guard` is still pinned.
                let locked = unsafe { &*bucket };
                locked.lock.lock();
                let replaced = locked.replaced.load(Ordering::Acquire);
                held.push(BucketGuard { bucket, guard: crossbeam_epoch::pin() });
                if replaced {
                    break;
                }
            }
            if held.iter().all(|g| !g.bucket().replaced.load(Ordering::Acquire)) {
                return AllBuckets::Locked(held);
            }
        }
    }

    /// Up to `max` entries whose cookies follow `after`, in cookie order,
    /// locking nothing.
    pub fn after<'g>(&self, after: u64, max: usize, guard: &'g Guard) -> Vec<&'g Entry> {
        // SAFETY: as in `get`.
        let Some(table) = (unsafe { self.table.load(Ordering::Acquire, guard).as_ref() }) else {
            return Vec::new();
        };
        let mut smallest: BinaryHeap<super::ByCookie<'g>> = BinaryHeap::with_capacity(max.min(256) + 1);
        let mut offer = |entry: &'g Entry| {
            let wanted = entry.cookie > after
                && (smallest.len() < max || smallest.peek().is_some_and(|top| entry.cookie < top.0.cookie));
            if wanted {
                smallest.push(cookie_order(entry));
                if smallest.len() > max {
                    smallest.pop();
                }
            }
        };
        for (_, bucket) in distinct(table, guard) {
            bucket.nodes(guard).for_each(|node| offer(&node.entry));
        }
        // A reader beside a split may meet an entry in the bucket split and
        // in its half: one cookie, listed once.
        let mut sorted: Vec<&Entry> = smallest.into_sorted_vec().into_iter().map(|e| e.0).collect();
        sorted.dedup_by_key(|e| e.cookie);
        sorted
    }
}

impl Drop for SplitEntries {
    fn drop(&mut self) {
        // SAFETY: the directory is going; no reader can reach its table or
        // buckets, each of which the table names (the replaced ones went
        // through the epoch), so each is freed once.
        unsafe {
            let guard = crossbeam_epoch::unprotected();
            let table = self.table.load(Ordering::Relaxed, guard);
            if table.is_null() {
                return;
            }
            let buckets: Vec<*const Bucket> = distinct(table.deref(), guard).map(|(_, b)| b as *const Bucket).collect();
            for bucket in buckets {
                drop(Box::from_raw(bucket.cast_mut()));
            }
            drop(table.into_owned());
        }
    }
}

/// Each bucket of `table` once: a bucket of depth `d` fills every slot
/// whose low `d` bits are its own, the first of them below `1 << d`. So
/// slot `i` can be its bucket's first only if slot `i` without its
/// highest bit (which agrees with `i` on every bit below it) names
/// another bucket: that comparison of two slots, read in order, skips
/// most slots of a large table without reading their bucket, and the
/// depth then decides. The comparison never skips a first slot, even
/// beside a split: a bucket whose first slot is `i` is deeper than `i`'s
/// highest bit, in which `below` differs from `i`, so it never sits in
/// `below` (a split puts new buckets in slots, never an existing one).
fn distinct<'g>(table: &'g Table, _guard: &'g Guard) -> impl Iterator<Item = (usize, &'g Bucket)> {
    table.slots.iter().enumerate().filter_map(|(i, slot)| {
        let bucket = slot.load(Ordering::Acquire);
        let below = i & !(1usize << i.checked_ilog2().unwrap_or(0));
        if i != 0 && std::ptr::eq(bucket, table.slots[below].load(Ordering::Acquire)) {
            return None;
        }
        // SAFETY: as in `Table::bucket`.
        let bucket = unsafe { &*bucket };
        (i < 1 << bucket.depth).then_some((i, bucket))
    })
}

/// Where the bucket of `hash` (or of the slot `hash` names) comes in the
/// order in which buckets are locked together: the hash's bits reversed.
/// A bucket holds the hashes that share its low bits, a range of this
/// order, so two buckets' ranges never interleave, and a split's halves
/// keep the place of the bucket they split.
pub(crate) fn lock_order(hash: u64) -> u64 {
    hash.reverse_bits()
}

fn find<'g>(bucket: &'g Bucket, name: &[u8], hash: u64, guard: &'g Guard) -> Option<&'g Node> {
    if !bucket.classes.may_hold(hash) {
        return None;
    }
    bucket.nodes(guard).find(|node| node.hash == hash && *node.entry.dentry.name == *name)
}

/// Every bucket of a directory, locked (or, with no table yet, the lock
/// that keeps one from being made).
pub(crate) enum AllBuckets<'a> {
    NoTable { _first: MutexGuard<'a, ()> },
    Locked(Vec<BucketGuard>),
}

impl AllBuckets<'_> {
    pub fn is_empty(&self) -> bool {
        match self {
            AllBuckets::NoTable { .. } => true,
            AllBuckets::Locked(held) => held.iter().all(|g| g.bucket().len.load(Ordering::Relaxed) == 0),
        }
    }
}

impl BucketGuard {
    /// Whether this bucket holds the name of `hash` too.
    pub fn covers(&self, hash: u64) -> bool {
        hash & ((1u64 << self.bucket().depth) - 1) == self.bucket().bits
    }

    pub fn get(&self, name: &[u8], hash: u64) -> Option<&Arc<Dentry>> {
        debug_assert!(!self.bucket().replaced.load(Ordering::Relaxed), "a look-up through a guard whose bucket split");
        find(self.bucket(), name, hash, &self.guard).map(|node| &node.entry.dentry)
    }

    /// The slot that holds the node of `name`, and that node.
    fn slot_of(&self, name: &[u8], hash: u64) -> Option<(&EpochAtomic<Node>, Shared<'_, Node>)> {
        // A replaced bucket's nodes are its halves': one taken out here
        // would stay in a half, and be freed twice.
        debug_assert!(!self.bucket().replaced.load(Ordering::Relaxed), "a change through a guard whose bucket split");
        self.bucket().slots(&self.guard).find_map(|slot| {
            let at = slot.load(Ordering::Relaxed, &self.guard);
            // SAFETY: the bucket is locked, so no node of it leaves its
            // slot, let alone is freed, while this guard lives.
            let node = unsafe { at.as_ref() }?;
            (node.hash == hash && *node.entry.dentry.name == *name).then_some((slot, at))
        })
    }

    /// Adds `entry`, whose name (hashing to `hash`) is not in the bucket;
    /// if that takes the bucket past [`SPLIT_AT`], splits it, putting the
    /// new name straight in its half (so an ordinary split never fills
    /// the inline slots and makes an overflow first). The bucket may be
    /// replaced afterwards: the guard is then only to be dropped.
    pub fn insert(&mut self, dir: &SplitEntries, entry: Entry, hash: u64, reclaim: &Reclaim) {
        let bucket = self.bucket();
        debug_assert!(!bucket.replaced.load(Ordering::Relaxed), "an insert through a guard whose bucket split");
        let node = Node::new(entry, hash).into_shared(&self.guard);
        let len = bucket.len.load(Ordering::Relaxed) as usize + 1;
        let split_past = bucket.split_past.load(Ordering::Relaxed) as usize;
        // A split refused for the table's size holds the bucket back only
        // while the table is as shallow as it: once other buckets deepen
        // the table, splitting this one doubles nothing.
        let splits = len > SPLIT_AT && (len > split_past || bucket.depth < dir.depth(&self.guard));
        if !(splits && dir.split(bucket, node, &self.guard, reclaim)) {
            bucket.link(node, &self.guard, reclaim);
        }
    }

    /// Puts `entry` in the place of the entry of the same name, in one
    /// store (a reader sees one or the other); returns the old one.
    pub fn replace(&mut self, entry: Entry, hash: u64, reclaim: &Reclaim) -> Option<Entry> {
        let (slot, old) = self.slot_of(&entry.dentry.name, hash)?;
        // SAFETY: `old` is in the locked bucket (see `slot_of`).
        let old_node = unsafe { old.deref() };
        let entry = Entry { cookie: old_node.entry.cookie, ..entry };
        slot.store(Node::new(entry, hash), Ordering::Release);
        let replaced = old_node.entry.clone();
        // SAFETY: out of its slot just above, so no new reader finds it;
        // readers already on it are pinned and outlive nothing of the
        // deferral.
        reclaim.defer(&self.guard, unsafe { old.into_owned() });
        Some(replaced)
    }

    /// Takes the entry of `name` out of the bucket.
    pub fn remove(&mut self, name: &[u8], hash: u64, reclaim: &Reclaim) -> Option<Entry> {
        let (slot, old) = self.slot_of(name, hash)?;
        // SAFETY: as in `replace`.
        let old_node = unsafe { old.deref() };
        slot.store(Shared::null(), Ordering::Release);
        let bucket = self.bucket();
        let len = bucket.len.load(Ordering::Relaxed) - 1;
        bucket.len.store(len, Ordering::Relaxed);
        bucket.classes.remove(hash);
        if len as usize <= SPLIT_AT {
            // Back within a bucket's size: a split refused at its old
            // length no longer holds it back.
            bucket.split_past.store(0, Ordering::Relaxed);
        }
        // Only the unlink of an overflow's name, with no more names than
        // the inline slots take, can leave the overflow empty.
        if len as usize <= INLINE && !bucket.slots.0.as_ptr_range().contains(&std::ptr::from_ref(slot)) {
            bucket.drop_empty_overflow(&self.guard, reclaim);
        }
        let removed = old_node.entry.clone();
        // SAFETY: as in `replace`.
        reclaim.defer(&self.guard, unsafe { old.into_owned() });
        Some(removed)
    }
}

impl SplitEntries {
    /// The depth of the current table (a locked bucket is in it, so there
    /// is one).
    fn depth(&self, guard: &Guard) -> u32 {
        // SAFETY: tables are freed through the epoch and `guard` is pinned.
        unsafe { self.table.load(Ordering::Acquire, guard).as_ref() }.map_or(0, |table| table.depth)
    }

    /// Replaces `bucket` (locked by the caller, in the current table) by
    /// its two halves on the next hash bit, with `new` (a node being
    /// inserted) in its half; returns false, having moved nothing, if the
    /// bucket is as deep as buckets go or the table may not double (then
    /// noting in `split_past` when to try again).
    fn split(&self, bucket: &Bucket, new: Shared<'_, Node>, guard: &Guard, reclaim: &Reclaim) -> bool {
        if bucket.depth >= MAX_DEPTH {
            return false;
        }
        // Splits that rewrite their own slots run side by side (they share
        // no slot); one that doubles the table excludes every other.
        let doubling = |current: Shared<'_, Table>| {
            // SAFETY: the caller's bucket is in a table, so there is one;
            // tables are freed through the epoch and `guard` is pinned.
            bucket.depth >= unsafe { current.deref() }.depth
        };
        let resize = self.resize.get_or_init(|| PerCpuRwSem::new(()));
        let shared = resize.read();
        let _resize = if doubling(self.table.load(Ordering::Acquire, guard)) {
            drop(shared);
            Err(resize.write())
        } else {
            Ok(shared)
        };
        let current = self.table.load(Ordering::Acquire, guard);
        // SAFETY: as in `doubling`; the resize lock keeps it current.
        let table = unsafe { current.deref() };
        let depth = bucket.depth;
        if depth >= table.depth && table.slots.len() >= SLOTS_PER_BUCKET * distinct(table, guard).count() {
            // It takes more names instead (in its overflow), until it holds
            // twice what it holds with the new one.
            bucket.split_past.store(2 * (bucket.len.load(Ordering::Relaxed) + 1), Ordering::Relaxed);
            return false;
        }
        let halves = [Bucket::new(depth + 1, bucket.bits), Bucket::new(depth + 1, bucket.bits | 1 << depth)];
        // Locked until every slot names them: a writer that finds a half
        // through a slot rewritten already waits, so no split of a half
        // rewrites a slot this split has yet to rewrite (and has it
        // overwritten with the half).
        for half in halves {
            // SAFETY: the halves are not yet in any slot: this thread's alone.
            unsafe { &*half }.lock.lock();
        }
        let old: *const Bucket = bucket;
        let half_of = |slot: usize| halves[(slot >> depth) & 1];
        let doubled = (depth >= table.depth).then(|| {
            let slots = (0..1usize << (depth + 1))
                .map(|slot| {
                    let at = table.slots[slot & ((1 << depth) - 1)].load(Ordering::Relaxed);
                    AtomicPtr::new(if std::ptr::eq(at, old) { half_of(slot) } else { at })
                })
                .collect();
            Owned::new(Table { depth: depth + 1, slots })
        });
        // Marked for writers, which look under the lock; readers never
        // look: the split copies the pointers to the nodes into the halves
        // and leaves the bucket's own slots as they are, so a reader on
        // the bucket finds there every name it held until now. No node is
        // written, allocated or freed, and no dentry's count changes.
        bucket.replaced.store(true, Ordering::Relaxed);
        let kept = bucket.slots(guard).map(|slot| slot.load(Ordering::Relaxed, guard));
        for at in kept.filter(|at| !at.is_null()).chain([new]) {
            // SAFETY: the bucket is locked: its nodes stay in it, live; `new`
            // is the caller's, not yet in any bucket.
            let hash = unsafe { at.deref() }.hash;
            // SAFETY: the halves are not yet in any slot: this thread's alone.
            unsafe { &*halves[(hash >> depth) as usize & 1] }.link(at, guard, reclaim);
        }
        if let Some(doubled) = doubled {
            self.table.store(doubled, Ordering::Release);
            // SAFETY: the table was just replaced; readers pinned before
            // hold off its release, which frees no bucket.
            reclaim.defer(guard, unsafe { current.into_owned() });
        } else {
            // Its slots, in place, highest first: a listing (which scans
            // up) that finds the lowest slot on a half has then found every
            // higher slot on its half too, and one that finds it on the old
            // bucket walks that bucket, which holds every name of both
            // halves made before the split. So each name present throughout
            // the listing is found in the old bucket or in its half.
            for slot in table.slots_of(bucket).rev() {
                table.slots[slot].store(half_of(slot), Ordering::Release);
            }
        }
        for half in halves {
            // SAFETY: locked above by this thread; a half is freed only
            // through the epoch, after a later split, so it is live here.
            unsafe { (*half).lock.unlock() };
        }
        // SAFETY: no slot names the old bucket any more, and its nodes are
        // the halves' (its drop frees none of them); a reader or writer
        // that found it before is pinned and holds off the release.
        reclaim.defer(guard, unsafe { Box::from_raw(old.cast_mut()) });
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::dirents::next_cookie;
    use vfscale_sync::test_support::xorshift64;

    /// A listing, which takes no lock and reads no classes, finds a name
    /// an insert has just linked; a look-up of that name then finds it
    /// too, though the insert has not finished.
    #[test]
    fn a_name_a_listing_finds_is_found_by_a_look_up() {
        use crate::test_pause::{self as pause, Point};
        let _alone = pause::alone();
        let dir = Arc::new(SplitEntries::new());
        let reclaim = Arc::new(Reclaim::default());
        insert(&dir, 1 << 58 | 0xbeef << 6 | 5, &reclaim);
        // The same bucket, a class it does not have yet; a hash no other
        // test inserts (the pause is the whole binary's).
        let hash: u64 = 62 << 58 | 0xdead << 6 | 5;
        pause::arm(Point::Published, &hash.to_le_bytes());
        let inserter = {
            let (dir, reclaim) = (Arc::clone(&dir), Arc::clone(&reclaim));
            std::thread::spawn(move || insert(&dir, hash, &reclaim))
        };
        pause::wait_for_the_stop(|| inserter.is_finished());
        let guard = crossbeam_epoch::pin();
        let name = hash.to_string();
        let listed = dir.after(0, 100, &guard).iter().any(|e| *e.dentry.name == *name.as_bytes());
        let found = dir.get(name.as_bytes(), hash, &guard).is_some();
        pause::let_go();
        inserter.join().unwrap();
        assert!(listed, "the insert stopped after linking its node");
        assert!(found, "listed, then not found");
    }

    /// A new entry for the name `hash` spells, in decimal.
    fn entry(hash: u64) -> Entry {
        Entry { cookie: next_cookie(), dentry: Dentry::new(1, hash.to_string().as_bytes(), None, 0) }
    }

    fn insert(dir: &SplitEntries, hash: u64, reclaim: &Reclaim) {
        dir.lock(hash).insert(dir, entry(hash), hash, reclaim);
    }

    /// Unlinks the name of `hash`; whether it was there.
    fn unlink(dir: &SplitEntries, hash: u64, reclaim: &Reclaim) -> bool {
        dir.lock(hash).remove(hash.to_string().as_bytes(), hash, reclaim).is_some()
    }

    /// Renames the name of `hash` over itself (a new node in its slot);
    /// whether it was there.
    fn rename_over(dir: &SplitEntries, hash: u64, reclaim: &Reclaim) -> bool {
        dir.lock(hash).replace(entry(hash), hash, reclaim).is_some()
    }

    /// A look-up of a name its bucket lacks reads the table, its slot and
    /// the bucket's first line, and none of the eight nodes (each on lines the
    /// CPU that made it wrote): the name's class is not among the
    /// bucket's. One of a class the bucket has reads its nodes.
    #[test]
    fn a_look_up_of_a_missing_name_reads_no_node() {
        let dir = SplitEntries::new();
        let reclaim = Reclaim::default();
        // One bucket (low bits 5), eight classes (top six bits 0-7).
        for class in 0..8u64 {
            insert(&dir, class << 58 | 5, &reclaim);
        }
        let guard = crossbeam_epoch::pin();
        let look_up = |hash: u64| vfscale_sync::audit::record(|| dir.get(b"missing", hash, &guard).is_none());
        let (missing, trace) = look_up(63 << 58 | 5);
        assert!(missing);
        assert_eq!(trace.touched_lines(), 3, "the table, its slot, the bucket's first line");
        let (missing, trace) = look_up(3 << 58 | 1 << 40 | 5);
        assert!(missing);
        assert!(trace.touched_lines() > 3, "a name of a class present reads the nodes");
    }

    /// The classes against a model: names of one bucket come and go, two
    /// classes of two names (counts 0 to 2 and back) and one of four
    /// (whose count stays at three once there), and after every step each
    /// name is found exactly while it is in.
    #[test]
    fn the_classes_never_hide_a_name_in_the_bucket() {
        let dir = SplitEntries::new();
        let reclaim = Reclaim::default();
        // Eight names in one bucket (low bits 9).
        let classes = [1u64, 1, 2, 2, 3, 3, 3, 3];
        let hashes: Vec<u64> = (0..8).map(|k| classes[k] << 58 | (k as u64) << 20 | 9).collect();
        let mut state = 0x9e37_79b9_u64;
        let mut present = [false; 8];
        for step in 0..2_000 {
            let k = (xorshift64(&mut state) % 8) as usize;
            let hash = hashes[k];
            if present[k] {
                assert!(unlink(&dir, hash, &reclaim), "step {step}");
            } else {
                insert(&dir, hash, &reclaim);
            }
            present[k] = !present[k];
            let guard = crossbeam_epoch::pin();
            for (k, &hash) in hashes.iter().enumerate() {
                let found = dir.get(hash.to_string().as_bytes(), hash, &guard).is_some();
                assert_eq!(found, present[k], "step {step}: name {k}");
            }
        }
    }

    /// Names whose hashes agree on their low 20 bits (a caller who knows
    /// the hash can choose such names) would split their bucket lopsidedly
    /// on every insert, each split doubling the table: 2^21 slots for 40
    /// names. The table doubles only while it has fewer than
    /// [`SLOTS_PER_BUCKET`] slots per bucket; past that the bucket's
    /// overflow grows instead, and every name is still found; once its
    /// names are unlinked, the overflow goes, and grows again for more.
    #[test]
    fn names_agreeing_on_many_hash_bits_do_not_double_the_table_for_each() {
        let dir = SplitEntries::new();
        let reclaim = Reclaim::default();
        let hashes: Vec<u64> = (0..40u64).map(|k| k << 20 | 5).collect();
        for &hash in &hashes {
            insert(&dir, hash, &reclaim);
        }
        let guard = crossbeam_epoch::pin();
        // SAFETY: as in `get`.
        let table = unsafe { dir.table.load(Ordering::Acquire, &guard).deref() };
        let buckets = distinct(table, &guard).count();
        // The last doubling allowed may take the table to twice the bound.
        assert!(
            table.slots.len() <= 2 * SLOTS_PER_BUCKET * buckets,
            "40 names made a table of depth {} over {buckets} buckets",
            table.depth
        );
        for &hash in &hashes {
            assert!(dir.get(hash.to_string().as_bytes(), hash, &guard).is_some(), "{hash} is lost");
        }
        // Back within a bucket's size, the bucket splits as any other.
        for &hash in &hashes[4..] {
            assert!(unlink(&dir, hash, &reclaim));
        }
        let held = distinct(table, &guard).filter(|(_, b)| b.split_past.load(Ordering::Relaxed) != 0).count();
        assert_eq!(held, 0, "a bucket of four names still waits for more names to split");
        let overflows = distinct(table, &guard).filter(|(_, b)| !b.overflow.load(Ordering::Acquire, &guard).is_null());
        assert_eq!(overflows.count(), 0, "the emptied overflow stayed");
        // And past eight names again, a new one grows.
        for &hash in &hashes[4..12] {
            insert(&dir, hash, &reclaim);
        }
        for &hash in &hashes[..12] {
            assert!(dir.get(hash.to_string().as_bytes(), hash, &guard).is_some(), "{hash} is lost after the regrowth");
        }
    }

    /// A split puts the pointers to its bucket's nodes in the halves:
    /// while the old bucket still waits for the epoch, every dentry is
    /// counted once (a copy of the nodes counted each dentry again, a
    /// write of a line of every dentry in the bucket, most of them made by
    /// other CPUs), and once the directory and its old buckets are gone,
    /// every dentry is freed, once (an old bucket frees no node).
    #[test]
    fn a_split_moves_its_dentries_without_counting_them() {
        let dir = SplitEntries::new();
        let reclaim = Reclaim::default();
        let hashes: Vec<u64> = (0..64u64).map(|k| k << 6 | 9).collect();
        let guard = crossbeam_epoch::pin();
        for &hash in &hashes {
            insert(&dir, hash, &reclaim);
        }
        assert!(dir.depth(&guard) > INITIAL_DEPTH, "64 names in one bucket split it");
        let dentries: Vec<std::sync::Weak<Dentry>> = hashes
            .iter()
            .map(|&hash| {
                let dentry = dir.get(hash.to_string().as_bytes(), hash, &guard).expect("every name is found");
                assert_eq!(Arc::strong_count(dentry), 1, "{hash} is counted by an old bucket too");
                Arc::downgrade(dentry)
            })
            .collect();
        drop(guard);
        drop(dir);
        assert!(reclaim.barrier(std::time::Duration::from_secs(600)), "the old buckets were never freed");
        assert!(dentries.iter().all(|d| d.upgrade().is_none()), "a dentry outlived its directory");
    }

    /// The name that takes a bucket past [`SPLIT_AT`] goes straight to its
    /// half: the bucket split never makes an overflow for it (two
    /// allocations, written under the lock and thrown away with the
    /// bucket), and every name is found after.
    #[test]
    fn an_ordinary_split_makes_no_overflow() {
        let dir = SplitEntries::new();
        let reclaim = Reclaim::default();
        // Nine names of one bucket (low bits 21), four and five to a half.
        let hashes: Vec<u64> = (0..=SPLIT_AT as u64).map(|k| k << 20 | (k & 1) << 6 | 21).collect();
        for &hash in &hashes[..SPLIT_AT] {
            insert(&dir, hash, &reclaim);
        }
        let guard = crossbeam_epoch::pin();
        // SAFETY: as in `get`; `guard` keeps the bucket from being freed.
        let bucket = unsafe { dir.table.load(Ordering::Acquire, &guard).deref() }.bucket(hashes[0], &guard);
        insert(&dir, hashes[SPLIT_AT], &reclaim);
        assert!(bucket.replaced.load(Ordering::Relaxed), "the ninth name split the bucket");
        assert!(bucket.overflow.load(Ordering::Acquire, &guard).is_null(), "the split bucket made an overflow");
        for &hash in &hashes {
            assert!(dir.get(hash.to_string().as_bytes(), hash, &guard).is_some(), "{hash} is lost");
        }
    }

    /// A bucket refused a split for the table's size splits at its next
    /// insert once other buckets have deepened the table, rather than
    /// taking twice the names it was refused at.
    #[test]
    fn a_bucket_refused_a_split_splits_once_the_table_deepens_past_it() {
        let dir = SplitEntries::new();
        let reclaim = Reclaim::default();
        for k in 0..40u64 {
            insert(&dir, k << 20 | 5, &reclaim);
        }
        let bucket_of = |hash: u64| {
            let guard = crossbeam_epoch::pin();
            let lock = dir.lock(hash);
            let (depth, refused) = (lock.bucket().depth, lock.bucket().split_past.load(Ordering::Relaxed));
            drop(lock);
            (depth, refused, dir.depth(&guard))
        };
        let (refused_at, split_past, _) = bucket_of(5);
        assert!(split_past > 0, "40 names agreeing on 20 bits were refused a split");
        // Names elsewhere deepen the table past the refused bucket.
        let mut state = 0x2545_f491_4f6c_dd1d_u64;
        while bucket_of(5).2 <= refused_at {
            insert(&dir, xorshift64(&mut state) & !0xf | 6, &reclaim);
        }
        insert(&dir, 40 << 20 | 5, &reclaim);
        let (depth, _, table) = bucket_of(5);
        assert!(depth > refused_at, "the bucket stayed at depth {depth} in a table of depth {table}");
        let guard = crossbeam_epoch::pin();
        for k in 0..=40u64 {
            let hash = k << 20 | 5;
            assert!(dir.get(hash.to_string().as_bytes(), hash, &guard).is_some(), "{hash} is lost");
        }
    }

    /// Hashes drawn at random never meet the bound: the table doubles as
    /// extendible hashing does, and no split is refused.
    #[test]
    fn random_hashes_never_meet_the_tables_bound() {
        let dir = SplitEntries::new();
        let reclaim = Reclaim::default();
        let mut state = 0x2545_f491_4f6c_dd1d_u64;
        for _ in 0..50_000 {
            insert(&dir, xorshift64(&mut state), &reclaim);
        }
        let guard = crossbeam_epoch::pin();
        // SAFETY: as in `get`.
        let table = unsafe { dir.table.load(Ordering::Acquire, &guard).deref() };
        let refused = distinct(table, &guard).filter(|(_, b)| b.split_past.load(Ordering::Relaxed) != 0).count();
        assert_eq!(refused, 0, "splits refused in a table of depth {}", table.depth);
    }

    /// Eight names of one bucket (low bits `bucket`), split on bit 6 into
    /// halves of four by their parity, in a table made one bit deeper
    /// first where `in_place` (so that the ninth name's split rewrites the
    /// bucket's slots) or as deep as the bucket (so that it doubles the
    /// table). The first name inserted, in the bucket's first slot, is of
    /// half 0; the last, in its last inline slot, of half 1.
    fn bucket_of_eight(seed: u64, bucket: u64, in_place: bool, reclaim: &Reclaim) -> (Arc<SplitEntries>, Vec<u64>) {
        let dir = Arc::new(SplitEntries::new());
        if in_place {
            for k in 0..=SPLIT_AT as u64 {
                insert(&dir, (seed + 0x80 + k) << 20 | (k & 1) << 6 | (bucket + 1), reclaim);
            }
        }
        let hashes: Vec<u64> = (0..SPLIT_AT as u64).map(|k| (seed + k) << 20 | (k & 1) << 6 | bucket).collect();
        for &hash in &hashes {
            insert(&dir, hash, reclaim);
        }
        let depth = dir.depth(&crossbeam_epoch::pin());
        assert_eq!(depth, INITIAL_DEPTH + u32::from(in_place), "the table the test needs");
        (dir, hashes)
    }

    /// Joins `walker`, failing rather than hanging if it has not finished
    /// within `secs` seconds (far more than it takes).
    fn join_soon<T>(walker: std::thread::JoinHandle<T>, secs: u64) -> T {
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(secs);
        while !walker.is_finished() {
            assert!(std::time::Instant::now() < deadline, "the walk never finished");
            std::thread::sleep(std::time::Duration::from_millis(1));
        }
        walker.join().unwrap()
    }

    /// Starts `walk` (a look-up or a listing of `dir`) on a thread of its
    /// own and returns once it has stopped at the node of hash `stop`,
    /// until [`crate::test_pause::let_go`].
    fn stopped_walk<T: Send + 'static>(
        dir: &Arc<SplitEntries>,
        stop: u64,
        walk: impl FnOnce(&SplitEntries) -> T + Send + 'static,
    ) -> std::thread::JoinHandle<T> {
        use crate::test_pause::{self as pause, Point};
        pause::arm(Point::Walked, &stop.to_le_bytes());
        let walker = {
            let dir = Arc::clone(dir);
            std::thread::spawn(move || walk(&dir))
        };
        pause::wait_for_the_stop(|| walker.is_finished());
        assert!(!walker.is_finished(), "the walk never stopped at the node of {stop}");
        walker
    }

    /// A look-up of the name of hash `wanted` in `dir`.
    fn look_up(wanted: u64) -> impl FnOnce(&SplitEntries) -> bool + Send + 'static {
        move |dir| dir.get(wanted.to_string().as_bytes(), wanted, &crossbeam_epoch::pin()).is_some()
    }

    /// Stops `walk` (a look-up or a listing, on a thread of its own) at
    /// the first slot of [`bucket_of_eight`]'s bucket, splits the
    /// bucket with a ninth name meanwhile, and returns what the walk
    /// returned once let go, with the eight names.
    fn walk_beside_a_split<T: Send + 'static>(
        seed: u64,
        bucket: u64,
        in_place: bool,
        walk: impl FnOnce(&SplitEntries) -> T + Send + 'static,
    ) -> (T, Vec<u64>) {
        let reclaim = Reclaim::default();
        let (dir, hashes) = bucket_of_eight(seed, bucket, in_place, &reclaim);
        let walker = stopped_walk(&dir, hashes[0], walk);
        insert(&dir, (seed + 0xf) << 20 | bucket, &reclaim);
        crate::test_pause::let_go();
        let walked = join_soon(walker, 120);
        let split_done = dir.lock(hashes[0]).bucket().depth > INITIAL_DEPTH;
        assert!(split_done, "in place {in_place}: the ninth name split the bucket");
        (walked, hashes)
    }

    /// A look-up stopped at a bucket's first slot while an insert splits
    /// the bucket, doubling the table or rewriting the bucket's slots,
    /// goes on over the bucket's slots, which the split left as they
    /// were, and finds a name of the other half in the last one, present
    /// throughout (a split that emptied the bucket as it moved its names
    /// would hide it).
    #[test]
    fn a_look_up_beside_a_split_finds_every_name_of_the_bucket() {
        let _alone = crate::test_pause::alone();
        // Hashes no other test uses (the pause is the whole binary's).
        for (seed, in_place) in [(0x5ee0, false), (0x5ef0, true)] {
            let wanted = (seed + SPLIT_AT as u64 - 1) << 20 | 1 << 6 | 11;
            let (found, _) = walk_beside_a_split(seed, 11, in_place, look_up(wanted));
            assert!(found, "in place {in_place}: a name present throughout the look-up was missed");
        }
    }

    /// A listing stopped at a bucket's first slot while an insert splits
    /// the bucket (either way) lists every name of the bucket all the
    /// same, each once (the names of a half it meets too are listed once).
    #[test]
    fn a_listing_beside_a_split_lists_every_name_once() {
        let _alone = crate::test_pause::alone();
        for (seed, in_place) in [(0x7ab0, false), (0x7ac0, true)] {
            let (listed, hashes) = walk_beside_a_split(seed, 13, in_place, |dir| {
                let guard = crossbeam_epoch::pin();
                dir.after(0, 100, &guard).iter().map(|e| e.dentry.name.to_vec()).collect::<Vec<_>>()
            });
            for hash in &hashes {
                let count = listed.iter().filter(|name| **name == *hash.to_string().as_bytes()).count();
                assert_eq!(count, 1, "in place {in_place}: {hash}, in the bucket throughout, listed {count} times");
            }
        }
    }

    /// A look-up stopped at a bucket's fourth slot while names before it
    /// change (one unlinked, its slot filled by a new name, another renamed
    /// over itself) goes on and finds the name in the last slot: a name
    /// keeps its slot until it goes (an unlink that filled its hole with
    /// the last name would hide that name).
    #[test]
    fn a_look_up_beside_unlinks_and_renames_finds_every_name() {
        use crate::test_pause as pause;
        let _alone = pause::alone();
        let reclaim = Reclaim::default();
        // Hashes no other test uses (the pause is the whole binary's).
        let (dir, hashes) = bucket_of_eight(0x4d10, 15, false, &reclaim);
        let walker = stopped_walk(&dir, hashes[3], look_up(hashes[SPLIT_AT - 1]));
        let gone = hashes[1];
        assert!(unlink(&dir, gone, &reclaim));
        insert(&dir, 0x4d1f << 20 | 15, &reclaim);
        assert!(rename_over(&dir, hashes[2], &reclaim));
        pause::let_go();
        assert!(join_soon(walker, 120), "a name present throughout the look-up was missed");
    }

    /// A look-up stopped at a bucket's first slot while an insert replaces
    /// the bucket's full overflow by one twice the size goes on over the
    /// overflow it loaded, which the insert left as it was, and finds the
    /// name in its last slot (an insert that emptied the old overflow as
    /// it copied it would hide the name).
    #[test]
    fn a_look_up_beside_a_growing_overflow_finds_every_name() {
        use crate::test_pause as pause;
        let _alone = pause::alone();
        let reclaim = Reclaim::default();
        let dir = Arc::new(SplitEntries::new());
        // Names agreeing on their low 20 bits: their bucket is refused a
        // split and keeps all 40, 8 inline and 32 in a full overflow.
        // Hashes no other test uses (the pause is the whole binary's).
        let hashes: Vec<u64> = (0..41u64).map(|k| (0x3c00 + k) << 20 | 7).collect();
        for &hash in &hashes[..40] {
            insert(&dir, hash, &reclaim);
        }
        let overflow_slots = || {
            let held = dir.lock(hashes[0]);
            held.bucket().slots(&held.guard).count() - INLINE
        };
        assert_eq!(overflow_slots(), 32, "the full overflow the test needs");
        let walker = stopped_walk(&dir, hashes[0], look_up(hashes[39]));
        insert(&dir, hashes[40], &reclaim);
        pause::let_go();
        let found = join_soon(walker, 120);
        assert_eq!(overflow_slots(), 64, "the 41st name grew the overflow");
        assert!(found, "a name present throughout the look-up was missed");
    }

    /// Two threads insert while a third looks names up and lists the
    /// directory, over and over, as the table grows from 64 buckets to
    /// over a thousand, by splits in place and doublings. Beside each
    /// insert a thread also makes a passing name and unlinks the one it
    /// made two inserts before (the holes they leave are filled again),
    /// and every third insert renames a name it made (earlier, or just) over
    /// itself (a new node in its slot). Every name inserted before a
    /// look-up or a listing began is found by it, and a listing lists no
    /// name twice.
    #[test]
    fn look_ups_and_listings_beside_splits_miss_no_name() {
        let per_thread = vfscale_sync::test_support::stress_iters(4_000);
        let dir = Arc::new(SplitEntries::new());
        let reclaim = Arc::new(Reclaim::default());
        let hashes: Arc<Vec<Vec<u64>>> = Arc::new(
            (0..2u64)
                .map(|t| {
                    let mut state = 0x9e37_79b9_7f4a_7c15 ^ t;
                    (0..per_thread).map(|_| xorshift64(&mut state)).collect()
                })
                .collect(),
        );
        let made: Arc<Vec<AtomicU32>> = Arc::new((0..2).map(|_| AtomicU32::new(0)).collect());
        // Set by an inserter that panics, so that the reader stops and the
        // panic is reported.
        let failed = Arc::new(AtomicBool::new(false));
        struct FlagIfPanicking(Arc<AtomicBool>);
        impl Drop for FlagIfPanicking {
            fn drop(&mut self) {
                if std::thread::panicking() {
                    self.0.store(true, Ordering::Release);
                }
            }
        }
        let inserters: Vec<_> = (0..2)
            .map(|t| {
                let (dir, reclaim, hashes, made) = (dir.clone(), reclaim.clone(), hashes.clone(), made.clone());
                let flag = FlagIfPanicking(failed.clone());
                std::thread::spawn(move || {
                    let _flag = flag;
                    // Passing names: their own bit 63, so no other name.
                    let mut passing = std::collections::VecDeque::new();
                    let mut state = 0x2545_f491_4f6c_dd1d_u64 ^ t as u64;
                    for (i, &hash) in hashes[t].iter().enumerate() {
                        insert(&dir, hash | 1 << 63, &reclaim);
                        made[t].store(i as u32 + 1, Ordering::Release);
                        let pass = xorshift64(&mut state) & !(1 << 63);
                        insert(&dir, pass, &reclaim);
                        passing.push_back(pass);
                        if passing.len() > 2 {
                            let gone = passing.pop_front().unwrap();
                            assert!(unlink(&dir, gone, &reclaim));
                        }
                        if i % 3 == 0 {
                            assert!(rename_over(&dir, hashes[t][i / 2] | 1 << 63, &reclaim));
                        }
                    }
                })
            })
            .collect();
        let reader = std::thread::spawn(move || {
            let mut rounds = 0;
            let inserting = || made.iter().any(|m| m.load(Ordering::Acquire) < per_thread as u32);
            while (inserting() && !failed.load(Ordering::Acquire)) || rounds == 0 {
                let before: Vec<usize> = made.iter().map(|m| m.load(Ordering::Acquire) as usize).collect();
                let guard = crossbeam_epoch::pin();
                let listed = dir.after(0, usize::MAX, &guard);
                let names: std::collections::HashSet<&[u8]> = listed.iter().map(|e| &*e.dentry.name).collect();
                assert_eq!(names.len(), listed.len(), "round {rounds}: a name listed twice");
                for (mine, &count) in hashes.iter().zip(&before) {
                    for hash in mine[..count].iter().map(|h| h | 1 << 63) {
                        let name = hash.to_string();
                        assert!(names.contains(name.as_bytes()), "round {rounds}: {name}, made before, not listed");
                        assert!(dir.get(name.as_bytes(), hash, &guard).is_some(), "round {rounds}: {name} not found");
                    }
                }
                rounds += 1;
            }
        });
        // The reader runs until both inserters are done or one panicked
        // (whose panic the join reports); a walk that never ends fails it
        // at the deadline.
        join_soon(reader, 600);
        inserters.into_iter().for_each(|i| i.join().unwrap());
    }

    /// Splits of a bucket and of its halves overlap: hashes that agree on
    /// their low 13 bits split every bucket of their chain lopsidedly, so
    /// the insert after a split splits the half again, and they name the
    /// highest slot of a shallow bucket in a deep table, which a split
    /// rewrites first and then many lower ones. Afterwards no slot of the
    /// table names a replaced bucket (one that did would send every
    /// writer of its names round the retry of `lock` for ever) and every
    /// name is found.
    #[test]
    fn overlapping_splits_of_a_bucket_and_its_halves_leave_no_slot_on_a_replaced_bucket() {
        let rounds = vfscale_sync::test_support::stress_iters(200);
        for round in 0..rounds {
            let dir = Arc::new(SplitEntries::new());
            let reclaim = Arc::new(Reclaim::default());
            // Deepen the table through the bucket of slot 1.
            for k in 0..40u64 {
                insert(&dir, k << 12 | 1, &reclaim);
            }
            let high_slot = 0b111_1110_0000_0000_u64 >> 1; // 8064: bits 7-12 set, bits 0-6 clear
            let (done, finished) = std::sync::mpsc::channel();
            let writers: Vec<_> = (0..3u64)
                .map(|t| {
                    let (dir, reclaim, done) = (Arc::clone(&dir), Arc::clone(&reclaim), done.clone());
                    std::thread::spawn(move || {
                        for i in 0..40u64 {
                            insert(&dir, (t * 1000 + i + 1) << 13 | high_slot, &reclaim);
                        }
                        done.send(()).unwrap();
                    })
                })
                .collect();
            for _ in &writers {
                // A slot left on a replaced bucket makes a writer retry for
                // ever: fail rather than hang (the writers take microseconds).
                finished
                    .recv_timeout(std::time::Duration::from_secs(120))
                    .unwrap_or_else(|_| panic!("round {round}: a writer never finished (or panicked)"));
            }
            writers.into_iter().for_each(|w| w.join().unwrap());
            let guard = crossbeam_epoch::pin();
            // SAFETY: as in `get`.
            let table = unsafe { dir.table.load(Ordering::Acquire, &guard).deref() };
            for (slot, bucket) in table.slots.iter().enumerate() {
                // SAFETY: as in `Table::bucket`.
                let bucket = unsafe { &*bucket.load(Ordering::Acquire) };
                assert!(!bucket.replaced.load(Ordering::Acquire), "round {round}: slot {slot} names a replaced bucket");
            }
            for t in 0..3u64 {
                for i in 0..40u64 {
                    let hash = (t * 1000 + i + 1) << 13 | high_slot;
                    assert!(dir.get(hash.to_string().as_bytes(), hash, &guard).is_some(), "round {round}: {hash}");
                }
            }
        }
    }
}
