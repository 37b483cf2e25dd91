//! Per-CPU "dlock" lists (Waiman Long's `lib/dlock-list.c`, seed 001) and the
//! single-lock list they replace, behind one [`ConcurrentList`] trait.
//!
//! Invariant: every entry lives in exactly one head from `add` until `remove`
//! or `retain` takes it out, and it is only touched under that head's lock.
//! A [`ListHandle`] names `{list, head, slot, generation}`; a slot's generation
//! changes every time the slot is vacated, so a handle matches at most one
//! entry ever, and a stale or already-used handle removes nothing.
//!
//! [`PerCpuList`] keeps one cache-padded `{lock, entries}` head per possible
//! CPU: `add` locks the caller's CPU's head, `remove` locks the head recorded
//! in the handle (which may belong to another CPU: the thread may have
//! migrated, or another thread removes it). Use it when many CPUs add and
//! remove and iteration is rare, like the superblock's inode list, where every
//! inode creation and eviction took `s_inode_list_lock`. Iteration visits the
//! heads one at a time, so it costs a lock round trip per possible CPU even
//! for an empty list.
//!
//! [`GlobalList`] is the "before": one lock over one list (`s_inode_list_lock`
//! over `sb->s_inodes`). Prefer it when iteration dominates, when the list is
//! tiny, or when only one thread touches it: it needs no per-CPU memory.
//!
//! What an iteration ([`ConcurrentList::for_each`], [`ConcurrentList::retain`])
//! sees: it holds one head's lock at a time, and entries never move between
//! heads, so every entry present for the whole iteration is seen exactly once;
//! an entry added or removed while it runs may or may not be seen, and is never
//! seen twice. The closure runs under a head lock: it must not call back into
//! the same list (the spinlocks are not reentrant).
//!
//! Entries sit in a per-head slab (a vector of slots plus a free list), so
//! `add` does not allocate once a head has grown to its high-water mark; the
//! slab never shrinks, and iteration walks every slot up to that mark.
//!
//! ```
//! use vfscale_sync::dlock_list::{ConcurrentList, GlobalList, PerCpuList};
//!
//! let inodes: Box<dyn ConcurrentList<u64>> = Box::new(PerCpuList::<u64>::new());
//! let seven = inodes.add(7);
//! inodes.add(8);
//! let mut sum = 0;
//! inodes.for_each(&mut |ino| sum += ino);
//! assert_eq!(sum, 15);
//! assert_eq!(inodes.remove(seven), Some(7));
//! assert_eq!(inodes.remove(seven), None); // double removal is harmless
//! assert_eq!(inodes.retain(&mut |ino| *ino != 8), 1);
//! assert!(inodes.is_empty());
//!
//! let before: GlobalList<u64> = GlobalList::new();
//! before.add(1);
//! assert_eq!(before.len(), 1);
//! ```

use crate::cpu::{current_cpu, possible_cpus};
use crate::shim::{AtomicUsize, Ordering};
use crate::spin::{RawSpinLock, SpinLock, TasLock};
use crossbeam_utils::CachePadded;
use std::fmt;

/// A list that many threads add to and remove from concurrently.
///
/// Object safe, so a caller can pick the variant at run time and hold a
/// `Box<dyn ConcurrentList<T>>`.
pub trait ConcurrentList<T>: Send + Sync {
    /// Adds `value` and returns the handle that removes it.
    fn add(&self, value: T) -> ListHandle;

    /// Removes the entry `handle` names, from any thread.
    ///
    /// Returns `None` if it was already removed (by `remove` or `retain`):
    /// removing twice is safe and never removes another entry. A handle from
    /// a different list is a bug: debug builds panic, release builds return
    /// `None`.
    fn remove(&self, handle: ListHandle) -> Option<T>;

    /// Calls `f` on every entry; see the module doc for what a concurrent
    /// iteration sees. `f` runs under a head lock and must not use this list.
    fn for_each(&self, f: &mut dyn FnMut(&T));

    /// Removes the entries for which `f` returns `false` and returns how many
    /// it removed; their handles become stale. Same visiting rules as
    /// [`for_each`](Self::for_each). Removed values are dropped after the
    /// head lock is released, so their destructors may use the list.
    fn retain(&self, f: &mut dyn FnMut(&mut T) -> bool) -> usize;

    /// Number of entries: exact when no one is changing the list, otherwise
    /// a sum of per-head snapshots. O(heads), takes no lock.
    fn len(&self) -> usize;

    /// Whether [`len`](Self::len) is zero. O(heads), takes no lock.
    fn is_empty(&self) -> bool;
}

/// Names one entry of one list, for [`ConcurrentList::remove`].
///
/// The generation makes handles single-use: once the entry is removed its
/// slot gets a new generation, so a reused slot never matches an old handle.
/// The list id makes a handle from another list match nothing.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct ListHandle {
    list: u64,
    generation: u64,
    head: u32,
    slot: u32,
}

impl ListHandle {
    /// Index of the head the entry was added to.
    pub fn head(&self) -> usize {
        self.head as usize
    }
}

/// A fresh id for each list, stamped into its handles.
///
/// A plain `std` atomic rather than the shim's on purpose: it only has to hand
/// out distinct numbers, takes part in no protocol the loom models check, and
/// loom atomics cannot live in a `static`.
fn next_list_id() -> u64 {
    static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
}

struct Slot<T> {
    /// Bumped whenever the slot is vacated, so an occupied slot's generation
    /// equals that of exactly one handle ever issued.
    generation: u64,
    value: Option<T>,
}

/// The entries of one head: a slab, so adding reuses vacated slots.
struct Slab<T> {
    slots: Vec<Slot<T>>,
    free: Vec<u32>,
}

impl<T> Slab<T> {
    fn insert(&mut self, value: T) -> (u32, u64) {
        if let Some(slot) = self.free.pop() {
            let entry = &mut self.slots[slot as usize];
            debug_assert!(entry.value.is_none(), "dlock list: free slot {slot} is occupied");
            entry.value = Some(value);
            return (slot, entry.generation);
        }
        let slot = u32::try_from(self.slots.len()).expect("dlock list: a head holds 2^32 entries");
        self.slots.push(Slot { generation: 0, value: Some(value) });
        (slot, 0)
    }

    /// Takes the entry out if `generation` is still the slot's.
    fn take(&mut self, slot: u32, generation: u64) -> Option<T> {
        let entry = self.slots.get(slot as usize)?;
        (entry.generation == generation && entry.value.is_some()).then(|| self.vacate(slot))
    }

    fn vacate(&mut self, slot: u32) -> T {
        let entry = &mut self.slots[slot as usize];
        let value = entry.value.take().expect("dlock list: vacating an empty slot");
        entry.generation += 1;
        self.free.push(slot);
        value
    }

    fn for_each(&self, f: &mut dyn FnMut(&T)) {
        self.slots.iter().filter_map(|entry| entry.value.as_ref()).for_each(f);
    }
}

/// One `{lock, entries}` head (the kernel's `struct dlock_list_head`).
struct Head<T, R: RawSpinLock> {
    entries: SpinLock<R, Slab<T>>,
    /// Written only under `entries`' lock; read without it by `len`.
    len: AtomicUsize,
}

impl<T, R: RawSpinLock> Head<T, R> {
    fn new() -> Self {
        Self { entries: SpinLock::new(Slab { slots: Vec::new(), free: Vec::new() }), len: AtomicUsize::new(0) }
    }

    fn add(&self, list: u64, head: u32, value: T) -> ListHandle {
        let mut entries = self.entries.lock();
        let (slot, generation) = entries.insert(value);
        self.len.store(self.len.load(Ordering::Relaxed) + 1, Ordering::Relaxed);
        ListHandle { list, generation, head, slot }
    }

    /// The analog of dlock's "lock the node's head, then re-check the node is
    /// still on it": the generation is compared under the lock.
    fn remove(&self, handle: ListHandle) -> Option<T> {
        let mut entries = self.entries.lock();
        let value = entries.take(handle.slot, handle.generation)?;
        self.len.store(self.len.load(Ordering::Relaxed) - 1, Ordering::Relaxed);
        Some(value)
    }

    fn for_each(&self, f: &mut dyn FnMut(&T)) {
        self.entries.lock().for_each(f);
    }

    /// Moves the entries `f` rejects into `removed` and returns how many;
    /// the lock is released before the caller drops them. Each removal is
    /// complete (slab and `len`) before `f` runs again, so a panicking `f`
    /// leaves the head consistent.
    fn retain(&self, f: &mut dyn FnMut(&mut T) -> bool, removed: &mut Vec<T>) -> usize {
        let mut entries = self.entries.lock();
        let mut count = 0;
        for slot in 0..entries.slots.len() as u32 {
            let Some(value) = entries.slots[slot as usize].value.as_mut() else { continue };
            if !f(value) {
                removed.push(entries.vacate(slot));
                self.len.store(self.len.load(Ordering::Relaxed) - 1, Ordering::Relaxed);
                count += 1;
            }
        }
        count
    }

    fn len(&self) -> usize {
        self.len.load(Ordering::Relaxed)
    }
}

/// Debug builds panic on a handle from another list; release builds treat it
/// as matching nothing.
fn owns(list: u64, handle: &ListHandle) -> bool {
    debug_assert_eq!(handle.list, list, "dlock list: handle {handle:?} belongs to another list");
    handle.list == list
}

/// The dlock list: one cache-padded `{lock, entries}` head per possible CPU.
///
/// See the [module doc](self) for the iteration guarantees. `R` is the
/// spinlock flavour of every head; the default is test-and-set because a
/// userspace holder can be preempted, and a FIFO (ticket) lock then makes
/// every later waiter wait for it and for each other in turn.
pub struct PerCpuList<T, R: RawSpinLock = TasLock> {
    id: u64,
    heads: Box<[CachePadded<Head<T, R>>]>,
}

impl<T, R: RawSpinLock> PerCpuList<T, R> {
    /// An empty list with one head per possible CPU.
    pub fn new() -> Self {
        Self::with_heads(possible_cpus())
    }

    /// An empty list with `heads` heads; `add` picks `current_cpu() % heads`.
    ///
    /// # Panics
    ///
    /// If `heads` is zero or does not fit in a `u32`.
    pub fn with_heads(heads: usize) -> Self {
        assert!(heads > 0, "PerCpuList needs at least one head");
        assert!(u32::try_from(heads).is_ok(), "PerCpuList: {heads} heads do not fit in a handle");
        Self { id: next_list_id(), heads: (0..heads).map(|_| CachePadded::new(Head::new())).collect() }
    }

    /// Number of heads.
    pub fn heads(&self) -> usize {
        self.heads.len()
    }

    /// Adds `value` to head `head` rather than the current CPU's, for callers
    /// that pin themselves (and for models that choose heads explicitly).
    ///
    /// # Panics
    ///
    /// If `head >= self.heads()`.
    pub fn add_on(&self, head: usize, value: T) -> ListHandle {
        assert!(head < self.heads.len(), "PerCpuList: head {head} of {}", self.heads.len());
        self.heads[head].add(self.id, head as u32, value)
    }

    fn total_len(&self) -> usize {
        self.heads.iter().map(|head| head.len()).sum()
    }
}

impl<T, R: RawSpinLock> Default for PerCpuList<T, R> {
    fn default() -> Self {
        Self::new()
    }
}

impl<T: Send, R: RawSpinLock> ConcurrentList<T> for PerCpuList<T, R> {
    fn add(&self, value: T) -> ListHandle {
        self.add_on(current_cpu() % self.heads.len(), value)
    }

    fn remove(&self, handle: ListHandle) -> Option<T> {
        if !owns(self.id, &handle) {
            return None;
        }
        self.heads[handle.head()].remove(handle)
    }

    fn for_each(&self, f: &mut dyn FnMut(&T)) {
        for head in self.heads.iter() {
            head.for_each(f);
        }
    }

    fn retain(&self, f: &mut dyn FnMut(&mut T) -> bool) -> usize {
        let mut removed = Vec::new();
        let mut count = 0;
        for head in self.heads.iter() {
            count += head.retain(f, &mut removed);
            removed.clear();
        }
        count
    }

    fn len(&self) -> usize {
        self.total_len()
    }

    fn is_empty(&self) -> bool {
        self.heads.iter().all(|head| head.len() == 0)
    }
}

impl<T, R: RawSpinLock> fmt::Debug for PerCpuList<T, R> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PerCpuList")
            .field("flavour", &R::NAME)
            .field("heads", &self.heads.len())
            .field("len", &self.total_len())
            .finish()
    }
}

/// The "before": one lock over one list, like `s_inode_list_lock` over
/// `sb->s_inodes`. Every operation takes the same lock.
pub struct GlobalList<T, R: RawSpinLock = TasLock> {
    id: u64,
    head: Head<T, R>,
}

impl<T, R: RawSpinLock> GlobalList<T, R> {
    /// An empty list.
    pub fn new() -> Self {
        Self { id: next_list_id(), head: Head::new() }
    }
}

impl<T, R: RawSpinLock> Default for GlobalList<T, R> {
    fn default() -> Self {
        Self::new()
    }
}

impl<T: Send, R: RawSpinLock> ConcurrentList<T> for GlobalList<T, R> {
    fn add(&self, value: T) -> ListHandle {
        self.head.add(self.id, 0, value)
    }

    fn remove(&self, handle: ListHandle) -> Option<T> {
        if !owns(self.id, &handle) {
            return None;
        }
        self.head.remove(handle)
    }

    fn for_each(&self, f: &mut dyn FnMut(&T)) {
        self.head.for_each(f);
    }

    fn retain(&self, f: &mut dyn FnMut(&mut T) -> bool) -> usize {
        let mut removed = Vec::new();
        self.head.retain(f, &mut removed)
    }

    fn len(&self) -> usize {
        self.head.len()
    }

    fn is_empty(&self) -> bool {
        self.head.len() == 0
    }
}

impl<T, R: RawSpinLock> fmt::Debug for GlobalList<T, R> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("GlobalList").field("flavour", &R::NAME).field("len", &self.head.len()).finish()
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use crate::shim::AtomicBool;
    use crate::spin::{TasLock, TicketLock};
    use crate::test_support::stress_iters;
    use std::sync::{Arc, Barrier, Mutex, Weak};

    /// Every variant the VFS may pick, behind the trait.
    fn lists() -> Vec<(&'static str, Arc<dyn ConcurrentList<u64>>)> {
        let mut lists = tas_lists();
        lists.extend(ticket_lists());
        lists
    }

    fn tas_lists() -> Vec<(&'static str, Arc<dyn ConcurrentList<u64>>)> {
        vec![
            ("per-cpu tas", Arc::new(PerCpuList::<u64, TasLock>::new())),
            ("per-cpu tas, 3 heads", Arc::new(PerCpuList::<u64, TasLock>::with_heads(3))),
            ("global tas", Arc::new(GlobalList::<u64, TasLock>::new())),
        ]
    }

    /// The default flavour. Stress runs give these two threads and a tenth of
    /// the work: a ticket lock hands over to the next waiter in line even
    /// while that waiter is descheduled, so on a busy machine a contended
    /// handoff can cost a whole scheduling round (the limit `spin` documents).
    /// That tests the lock, not the list; the TAS runs oversubscribe.
    fn ticket_lists() -> Vec<(&'static str, Arc<dyn ConcurrentList<u64>>)> {
        vec![
            ("per-cpu ticket", Arc::new(PerCpuList::<u64>::new())),
            ("global ticket", Arc::new(GlobalList::<u64>::new())),
        ]
    }

    fn contents(list: &dyn ConcurrentList<u64>) -> Vec<u64> {
        let mut seen = Vec::new();
        list.for_each(&mut |v| seen.push(*v));
        seen.sort_unstable();
        seen
    }

    #[test]
    fn new_and_default_have_one_head_per_possible_cpu() {
        assert_eq!(PerCpuList::<u8>::new().heads(), possible_cpus());
        assert_eq!(PerCpuList::<u8>::default().heads(), possible_cpus());
        assert!(GlobalList::<u8>::default().is_empty());
    }

    #[test]
    fn add_picks_a_valid_head_and_add_on_the_chosen_one() {
        let list = PerCpuList::<u64>::with_heads(4);
        assert_eq!(list.heads(), 4);
        assert!(list.add(1).head() < 4);
        for head in 0..4 {
            assert_eq!(list.add_on(head, head as u64).head(), head);
        }
        assert_eq!(list.len(), 5);
        assert_eq!(GlobalList::<u64>::new().add(1).head(), 0);
    }

    #[test]
    #[should_panic(expected = "at least one head")]
    fn with_zero_heads_panics() {
        PerCpuList::<u64>::with_heads(0);
    }

    #[test]
    #[should_panic(expected = "head 2 of 2")]
    fn add_on_a_missing_head_panics() {
        PerCpuList::<u64>::with_heads(2).add_on(2, 0);
    }

    #[test]
    fn remove_returns_the_value_once() {
        for (name, list) in lists() {
            let a = list.add(1);
            let b = list.add(2);
            assert_ne!(a, b, "{name}");
            assert_eq!(list.remove(a), Some(1), "{name}");
            assert_eq!(list.remove(a), None, "{name}");
            assert_eq!(contents(&*list), [2], "{name}");
            assert_eq!(list.remove(b), Some(2), "{name}");
            assert_eq!(list.remove(b), None, "{name}");
        }
    }

    #[test]
    fn stale_handle_does_not_remove_the_entry_that_reused_its_slot() {
        for (name, list) in lists() {
            let old = list.add(1);
            assert_eq!(list.remove(old), Some(1));
            let new = list.add(2);
            assert_eq!(list.remove(old), None, "{name}");
            assert_eq!(contents(&*list), [2], "{name}");
            assert_eq!(list.remove(new), Some(2), "{name}");
        }
    }

    #[test]
    fn add_reuses_vacated_slots() {
        let list = GlobalList::<u64>::new();
        for i in 0..100 {
            let handle = list.add(i);
            assert_eq!(list.remove(handle), Some(i));
        }
        assert_eq!(list.head.entries.lock().slots.len(), 1);
    }

    #[test]
    fn for_each_sees_every_entry_once_across_heads() {
        let list = PerCpuList::<u64>::with_heads(3);
        for v in 0..30 {
            list.add_on(v as usize % 3, v);
        }
        assert_eq!(contents(&list), (0..30).collect::<Vec<_>>());
        let empty = GlobalList::<u64>::new();
        assert!(contents(&empty).is_empty());
    }

    #[test]
    fn retain_removes_rejected_entries_and_stales_their_handles() {
        for (name, list) in lists() {
            let handles: Vec<_> = (0..10).map(|v| list.add(v)).collect();
            let removed = list.retain(&mut |v| {
                *v += 100;
                *v % 2 == 0
            });
            assert_eq!(removed, 5, "{name}");
            assert_eq!(list.len(), 5, "{name}");
            assert_eq!(contents(&*list), [100, 102, 104, 106, 108], "{name}");
            for (v, handle) in handles.into_iter().enumerate() {
                let expect = (v % 2 == 0).then_some(v as u64 + 100);
                assert_eq!(list.remove(handle), expect, "{name}: value {v}");
            }
            assert_eq!(list.retain(&mut |_| false), 0, "{name}");
        }
    }

    #[test]
    fn len_and_is_empty_track_adds_and_removes() {
        for (name, list) in lists() {
            assert!(list.is_empty(), "{name}");
            assert_eq!(list.len(), 0, "{name}");
            let handles: Vec<_> = (0..5).map(|v| list.add(v)).collect();
            assert_eq!(list.len(), 5, "{name}");
            assert!(!list.is_empty(), "{name}");
            for handle in handles {
                list.remove(handle);
            }
            assert!(list.is_empty(), "{name}");
        }
    }

    #[test]
    #[cfg_attr(debug_assertions, should_panic(expected = "belongs to another list"))]
    fn handle_from_another_list_matches_nothing() {
        let a = PerCpuList::<u64>::with_heads(2);
        let b = GlobalList::<u64>::new();
        let foreign = a.add_on(1, 1);
        b.add(2);
        assert_eq!(b.remove(foreign), None);
        assert_eq!(a.remove(b.add(3)), None);
        assert_eq!((a.len(), b.len()), (1, 2));
    }

    #[test]
    fn retain_survives_a_panicking_closure() {
        for (name, list) in lists() {
            let handles: Vec<_> = (0..4).map(|v| list.add(v)).collect();
            let mut calls = 0;
            let outcome = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                list.retain(&mut |_| {
                    calls += 1;
                    assert!(calls < 3, "closure panics on its third entry");
                    false
                })
            }));
            assert!(outcome.is_err(), "{name}");
            assert_eq!(list.len(), 2, "{name}");
            assert_eq!(contents(&*list).len(), 2, "{name}");
            let left = handles.into_iter().filter_map(|h| list.remove(h)).count();
            assert_eq!(left, 2, "{name}");
            assert!(list.is_empty(), "{name}");
        }
    }

    /// Fails, instead of deadlocking, if a value is dropped under the lock.
    #[derive(Debug)]
    struct ChecksLockOnDrop(Weak<GlobalList<ChecksLockOnDrop>>);

    impl Drop for ChecksLockOnDrop {
        fn drop(&mut self) {
            if let Some(list) = self.0.upgrade() {
                assert!(!list.head.entries.is_locked(), "value dropped under the head lock");
            }
        }
    }

    #[test]
    fn retain_drops_removed_values_outside_the_lock() {
        let list = Arc::new(GlobalList::new());
        list.add(ChecksLockOnDrop(Arc::downgrade(&list)));
        list.add(ChecksLockOnDrop(Arc::downgrade(&list)));
        assert_eq!(list.retain(&mut |_| false), 2);

        let per_cpu: PerCpuList<_> = PerCpuList::with_heads(2);
        let witness = Arc::new(GlobalList::new());
        per_cpu.add_on(1, ChecksLockOnDrop(Arc::downgrade(&witness)));
        assert_eq!(per_cpu.retain(&mut |_| false), 1);
    }

    #[test]
    fn dropping_a_list_drops_its_entries() {
        let value = Arc::new(());
        let per_cpu = PerCpuList::<Arc<()>>::with_heads(2);
        per_cpu.add_on(1, value.clone());
        let global = GlobalList::<Arc<()>>::new();
        global.add(value.clone());
        assert_eq!(Arc::strong_count(&value), 3);
        drop((per_cpu, global));
        assert_eq!(Arc::strong_count(&value), 1);
    }

    #[test]
    fn debug_names_the_flavour_and_length() {
        let list = PerCpuList::<u64, TasLock>::with_heads(2);
        list.add(1);
        assert_eq!(format!("{list:?}"), r#"PerCpuList { flavour: "tas", heads: 2, len: 1 }"#);
        let global = GlobalList::<u64, TicketLock>::new();
        assert_eq!(format!("{global:?}"), r#"GlobalList { flavour: "ticket", len: 0 }"#);
        assert_eq!(format!("{:?}", GlobalList::<u64>::new()), r#"GlobalList { flavour: "tas", len: 0 }"#);
        assert!(format!("{:?}", global.add(1)).starts_with("ListHandle"));
    }

    /// Each thread adds its own values, then removes them while racing its
    /// neighbour for half of them: every value comes back exactly once.
    fn add_remove_stress(name: &str, list: Arc<dyn ConcurrentList<u64>>, threads: usize, per_thread: usize) {
        let barrier = Arc::new(Barrier::new(threads));
        let published: Arc<Vec<Mutex<Vec<ListHandle>>>> =
            Arc::new((0..threads).map(|_| Mutex::new(Vec::new())).collect());
        let workers: Vec<_> = (0..threads)
            .map(|t| {
                let (list, barrier, published) = (list.clone(), barrier.clone(), published.clone());
                std::thread::spawn(move || {
                    let base = (t * per_thread) as u64;
                    let own: Vec<_> = (0..per_thread as u64).map(|i| list.add(base + i)).collect();
                    *published[t].lock().unwrap() = own.clone();
                    barrier.wait();
                    let theirs = published[(t + 1) % threads].lock().unwrap().clone();
                    let mut got = Vec::new();
                    for (i, handle) in own.into_iter().enumerate() {
                        got.extend(list.remove(handle));
                        if i % 2 == 1 {
                            got.extend(list.remove(theirs[i]));
                        }
                    }
                    got
                })
            })
            .collect();
        let mut all: Vec<u64> = workers.into_iter().flat_map(|w| w.join().unwrap()).collect();
        all.sort_unstable();
        assert_eq!(all, (0..(threads * per_thread) as u64).collect::<Vec<_>>(), "{name}: lost or duplicated");
        assert_eq!(list.len(), 0, "{name}");
        assert!(list.is_empty(), "{name}");
    }

    #[test]
    fn stress_add_remove_no_lost_items() {
        let per_thread = stress_iters(1_000);
        for (name, list) in tas_lists() {
            add_remove_stress(name, list, 8, per_thread);
        }
        for (name, list) in ticket_lists() {
            add_remove_stress(name, list, 2, per_thread / 10);
        }
    }

    /// Entries added before and removed after every iteration ("stable") are
    /// seen exactly once by each `for_each`/`retain` while others churn.
    fn churn_stress(name: &str, list: Arc<dyn ConcurrentList<u64>>, churners: usize, rounds: usize) {
        const STABLE: u64 = 64;
        const CHURN_BASE: u64 = 1 << 32;
        let stable: Vec<_> = (0..STABLE).map(|v| list.add(v)).collect();
        let stop = Arc::new(AtomicBool::new(false));
        let workers: Vec<_> = (0..churners as u64)
            .map(|t| {
                let (list, stop) = (list.clone(), stop.clone());
                std::thread::spawn(move || {
                    let mut next = CHURN_BASE * (t + 1);
                    while !stop.load(Ordering::Relaxed) {
                        let batch: Vec<_> = (0..4).map(|i| (next + i, list.add(next + i))).collect();
                        for (value, handle) in batch {
                            assert_eq!(list.remove(handle), Some(value));
                        }
                        next += 4;
                    }
                })
            })
            .collect();
        for round in 0..rounds {
            let mut seen = vec![0u32; STABLE as usize];
            let mut count = |v: u64| {
                if v < STABLE {
                    seen[v as usize] += 1;
                }
            };
            if round % 2 == 0 {
                list.for_each(&mut |v| count(*v));
            } else {
                assert_eq!(
                    list.retain(&mut |v| {
                        count(*v);
                        true
                    }),
                    0,
                    "{name}"
                );
            }
            assert!(seen.iter().all(|&n| n == 1), "{name} round {round}: stable entries seen {seen:?}");
        }
        stop.store(true, Ordering::Relaxed);
        workers.into_iter().for_each(|w| w.join().unwrap());
        for (v, handle) in stable.into_iter().enumerate() {
            assert_eq!(list.remove(handle), Some(v as u64));
        }
        assert!(list.is_empty());
    }

    #[test]
    fn stress_iteration_sees_stable_entries_once_under_churn() {
        let rounds = stress_iters(1_000) / 10;
        for (name, list) in tas_lists() {
            churn_stress(name, list, 4, rounds);
        }
        for (name, list) in ticket_lists() {
            churn_stress(name, list, 1, rounds / 10);
        }
    }

    /// Owners remove their entries while `retain` removes every third value:
    /// each value is taken by exactly one of them.
    fn retain_race_stress(name: &str, list: Arc<dyn ConcurrentList<u64>>, threads: usize, per_thread: usize) {
        let done = Arc::new(AtomicBool::new(false));
        let retainer = {
            let (list, done) = (list.clone(), done.clone());
            std::thread::spawn(move || {
                let mut taken = Vec::new();
                let mut sweep = |list: &dyn ConcurrentList<u64>| {
                    let mut now = Vec::new();
                    let removed = list.retain(&mut |v| {
                        let keep = *v % 3 != 0;
                        if !keep {
                            now.push(*v);
                        }
                        keep
                    });
                    assert_eq!(removed, now.len());
                    taken.extend(now);
                };
                // Sweeps are spaced out as in real use (iteration is rare):
                // back to back they would starve the owners of the lock.
                while !done.load(Ordering::Relaxed) {
                    sweep(&*list);
                    std::thread::sleep(std::time::Duration::from_micros(100));
                }
                sweep(&*list);
                taken
            })
        };
        let owners: Vec<_> = (0..threads)
            .map(|t| {
                let list = list.clone();
                std::thread::spawn(move || {
                    let base = (t * per_thread) as u64;
                    let handles: Vec<_> = (0..per_thread as u64).map(|i| list.add(base + i)).collect();
                    handles.into_iter().filter_map(|h| list.remove(h)).collect::<Vec<_>>()
                })
            })
            .collect();
        let mut all: Vec<u64> = owners.into_iter().flat_map(|o| o.join().unwrap()).collect();
        done.store(true, Ordering::Relaxed);
        all.extend(retainer.join().unwrap());
        all.sort_unstable();
        assert_eq!(all, (0..(threads * per_thread) as u64).collect::<Vec<_>>(), "{name}: lost or duplicated");
        assert!(list.is_empty());
    }

    #[test]
    fn stress_retain_races_remove_without_losing_items() {
        let per_thread = stress_iters(1_000);
        for (name, list) in tas_lists() {
            retain_race_stress(name, list, 8, per_thread);
        }
        for (name, list) in ticket_lists() {
            retain_race_stress(name, list, 1, per_thread / 10);
        }
    }
}

#[cfg(all(test, loom))]
mod loom_models {
    use super::*;
    use loom::sync::Arc;
    use loom::thread;

    fn sorted(list: &dyn ConcurrentList<u32>) -> Vec<u32> {
        let mut seen = Vec::new();
        list.for_each(&mut |v| seen.push(*v));
        seen.sort_unstable();
        seen
    }

    /// One thread adds to head 0 and hands the handle to a second, which
    /// removes it while the first adds again; a third iterates throughout.
    fn remove_from_another_thread_while_iterating<L: ConcurrentList<u32> + 'static>(new: fn() -> L) {
        loom::model(move || {
            let list = Arc::new(new());
            let stable = list.add(1);
            let adder = {
                let list = list.clone();
                thread::spawn(move || {
                    let handle = list.add(2);
                    let remover = {
                        let list = list.clone();
                        thread::spawn(move || assert_eq!(list.remove(handle), Some(2)))
                    };
                    let late = list.add(3);
                    remover.join().unwrap();
                    late
                })
            };
            let mut seen = Vec::new();
            list.for_each(&mut |v| seen.push(*v));
            let late = adder.join().unwrap();
            let count = |x: u32| seen.iter().filter(|&&v| v == x).count();
            assert_eq!(count(1), 1, "stable entry seen {seen:?}");
            assert!(count(2) <= 1 && count(3) <= 1, "seen twice: {seen:?}");
            assert_eq!(sorted(&*list), [1, 3]);
            assert_eq!(list.len(), 2);
            assert_eq!(list.remove(late), Some(3));
            assert_eq!(list.remove(stable), Some(1));
            assert!(list.is_empty());
        });
    }

    #[test]
    fn per_cpu_remove_from_another_thread_while_iterating() {
        remove_from_another_thread_while_iterating(|| PerCpuList::<u32>::with_heads(2));
    }

    #[test]
    fn global_remove_from_another_thread_while_iterating() {
        remove_from_another_thread_while_iterating(GlobalList::<u32>::new);
    }

    #[test]
    fn per_cpu_add_on_two_heads_races_retain() {
        loom::model(|| {
            let list = Arc::new(PerCpuList::<u32>::with_heads(2));
            let doomed = list.add_on(1, 10);
            list.add_on(0, 11);
            let on_0 = {
                let list = list.clone();
                thread::spawn(move || list.add_on(0, 2))
            };
            let on_1 = {
                let list = list.clone();
                thread::spawn(move || list.add_on(1, 3))
            };
            let removed = list.retain(&mut |v| *v % 2 == 1);
            let (even, odd) = (on_0.join().unwrap(), on_1.join().unwrap());
            assert!(removed == 1 || removed == 2, "retain removed {removed}");
            assert_eq!(list.remove(doomed), None);
            let even_left = (removed == 1).then_some(2);
            assert_eq!(list.len(), 2 + usize::from(even_left.is_some()));
            assert_eq!(list.remove(even), even_left);
            assert_eq!(list.remove(odd), Some(3));
            assert_eq!(sorted(&*list), [11]);
        });
    }

    /// Two threads remove the same handle; the one that gets it first adds
    /// again at once, so the slot may be reused under the other's stale
    /// handle: exactly one removal succeeds and the new entry survives.
    fn double_remove_returns_some_once<L: ConcurrentList<u32> + 'static>(new: fn() -> L) {
        loom::model(move || {
            let list = Arc::new(new());
            let handle = list.add(7);
            let other = {
                let list = list.clone();
                thread::spawn(move || list.remove(handle))
            };
            let mine = list.remove(handle);
            let reuser = list.add(8);
            let theirs = other.join().unwrap();
            assert!(matches!((mine, theirs), (Some(7), None) | (None, Some(7))), "{mine:?} {theirs:?}");
            assert_eq!(list.len(), 1);
            assert_eq!(list.remove(handle), None);
            assert_eq!(list.remove(reuser), Some(8));
        });
    }

    #[test]
    fn per_cpu_double_remove_returns_some_once() {
        double_remove_returns_some_once(|| PerCpuList::<u32>::with_heads(2));
    }

    #[test]
    fn global_double_remove_returns_some_once() {
        double_remove_returns_some_once(GlobalList::<u32>::new);
    }
}
