//! A directory's entries (its names and their dentries, the authoritative
//! contents beside the dcache), in two designs: one rwsem over the whole
//! directory (Linux's `i_rwsem`; [`Children`]) or split by name hash, a
//! lock per bucket and listings that take none
//! ([`split::SplitEntries`]).
//!
//! Invariant: a name is changed only under its lock (the directory's
//! rwsem held for write, or its bucket's lock), and every entry keeps the
//! cookie it was given when its name was made (or, replaced by a rename,
//! the cookie of the entry it replaced) until it goes, so a listing in
//! cookie order returns every entry present throughout it exactly once
//! and a cookie from `telldir` stays a valid place to resume.
//!
//! Cookies come from a per-CPU counter (CPU number in the low bits), so
//! creates on two CPUs share no counter. They start past 2, which stand
//! for the places after `.` and `..`.
//!
//! May import the base modules and `dentry`.

pub(crate) mod split;

use crate::dentry::Dentry;
use crossbeam_utils::CachePadded;
use std::cell::{Cell, RefCell};
use std::collections::BTreeMap;
use std::sync::Arc;
use vfscale_sync::audited::{AtomicU64, OnceLock, Ordering};

/// One name of a directory: its dentry and its place in listings.
#[derive(Clone)]
pub(crate) struct Entry {
    pub cookie: u64,
    pub dentry: Arc<Dentry>,
}

/// Orders entries by cookie (for the bounded heap of a listing).
pub(crate) struct ByCookie<'a>(pub &'a Entry);

impl PartialEq for ByCookie<'_> {
    fn eq(&self, other: &Self) -> bool {
        self.0.cookie == other.0.cookie
    }
}
impl Eq for ByCookie<'_> {}
impl PartialOrd for ByCookie<'_> {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}
impl Ord for ByCookie<'_> {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        self.0.cookie.cmp(&other.0.cookie)
    }
}

pub(crate) fn cookie_order(entry: &Entry) -> ByCookie<'_> {
    ByCookie(entry)
}

/// Bits of a cookie that name the CPU that made it.
const CPU_BITS: u32 = 12;

/// A new cookie, unique in the process: the next count of the calling
/// CPU's counter above the CPU's number.
pub(crate) fn next_cookie() -> u64 {
    // On a line of its own: every create reads it, and a static beside it
    // (an allocator's refill count, say) may be written.
    static COUNTERS: CachePadded<OnceLock<Box<[CachePadded<AtomicU64>]>>> = CachePadded::new(OnceLock::new());
    let counters = COUNTERS.get_or_init(|| {
        let cpus = vfscale_sync::cpu::possible_cpus().min(1 << CPU_BITS);
        (0..cpus).map(|_| CachePadded::new(AtomicU64::new(1))).collect()
    });
    let cpu = vfscale_sync::cpu::current_cpu() % counters.len();
    counters[cpu].fetch_add(1, Ordering::Relaxed) << CPU_BITS | cpu as u64
}

/// The entries of a directory in the rwsem design: by name, and by cookie
/// for listings.
#[derive(Default)]
pub(crate) struct Children {
    by_name: BTreeMap<Box<[u8]>, u64>,
    by_cookie: BTreeMap<u64, Arc<Dentry>>,
}

impl Children {
    pub fn get(&self, name: &[u8]) -> Option<&Arc<Dentry>> {
        self.by_cookie.get(self.by_name.get(name)?)
    }

    pub fn is_empty(&self) -> bool {
        self.by_name.is_empty()
    }

    /// Adds `entry`, or puts it in the place (and the cookie) of the entry
    /// of its name, which it returns.
    pub fn insert(&mut self, mut entry: Entry) -> Option<Entry> {
        let name: Box<[u8]> = entry.dentry.name.clone();
        if let Some(&cookie) = self.by_name.get(&name) {
            entry.cookie = cookie;
            let old = self.by_cookie.insert(cookie, entry.dentry).expect("both maps hold each name");
            return Some(Entry { cookie, dentry: old });
        }
        self.by_name.insert(name, entry.cookie);
        self.by_cookie.insert(entry.cookie, entry.dentry);
        None
    }

    pub fn remove(&mut self, name: &[u8]) -> Option<Entry> {
        let cookie = self.by_name.remove(name)?;
        let dentry = self.by_cookie.remove(&cookie).expect("both maps hold each name");
        Some(Entry { cookie, dentry })
    }

    /// Up to `max` entries whose cookies follow `after`, in cookie order.
    pub fn after(&self, after: u64, max: usize) -> impl Iterator<Item = (u64, &Arc<Dentry>)> {
        self.by_cookie.range(after.saturating_add(1)..).take(max).map(|(c, d)| (*c, d))
    }
}

/// Which design a directory's entries take.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Design {
    /// One rwsem over the directory ([`Children`]).
    Locked,
    /// Split by name hash ([`split::SplitEntries`]).
    Split,
}

/// The entries of one directory, with their lock(s).
pub(crate) enum Entries {
    Locked(vfscale_sync::rwsem::RwSem<Children>),
    Split(split::SplitEntries),
}

impl Entries {
    pub fn new(design: Design) -> Entries {
        match design {
            Design::Locked => Entries::Locked(vfscale_sync::rwsem::RwSem::new(
                Children::default(),
                vfscale_sync::rwsem::SpinPolicy::Adaptive,
            )),
            Design::Split => Entries::Split(split::SplitEntries::new()),
        }
    }

    /// The entries, leaving none, of the same design.
    pub fn take(&mut self) -> Entries {
        let design = match self {
            Entries::Locked(_) => Design::Locked,
            Entries::Split(_) => Design::Split,
        };
        std::mem::replace(self, Entries::new(design))
    }
}

thread_local! {
    /// The queue of the [`release`] under way on this thread (null while
    /// none is). A plain cell, which needs no destructor: entries may be
    /// released while the thread exits (crossbeam-epoch's last pin runs
    /// deferred releases).
    static RELEASING: Cell<*const RefCell<Vec<Entries>>> = const { Cell::new(std::ptr::null()) };
}

/// Drops the entries of a directory being freed in constant stack,
/// whatever the depth of the tree below (Linux's `shrink_dcache_parent`
/// walks a tree iteratively for the same reason): a directory freed by
/// dropping them hands its own entries to the outermost release on this
/// thread, which drops them after these, instead of dropping them in
/// place, one level of recursion per level of the tree. A tree is freed
/// whole when the last holder of its top directory lets go after the
/// superblock's end; a chain of 20,000 directories would need megabytes.
pub(crate) fn release(entries: Entries) {
    let outer = RELEASING.with(Cell::get);
    if !outer.is_null() {
        // SAFETY: set by a `release` further up this thread's stack, whose
        // queue outlives the pointer (its `Unset` clears it first).
        unsafe { &*outer }.borrow_mut().push(entries);
        return;
    }
    struct Unset;
    impl Drop for Unset {
        fn drop(&mut self) {
            RELEASING.with(|releasing| releasing.set(std::ptr::null()));
        }
    }
    let queue = RefCell::new(vec![entries]);
    RELEASING.with(|releasing| releasing.set(&queue));
    let _unset = Unset;
    loop {
        let next = queue.borrow_mut().pop();
        let Some(entries) = next else { break };
        drop(entries);
    }
}
