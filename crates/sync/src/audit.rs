//! The cache-line audit: which lines of shared memory a thread reads and
//! writes, and where, so a test can ask sv6's question of two operations:
//! did one write a line the other touched? Such a line moves between the
//! CPUs on every call and stops the pair from scaling (`docs/design.md`,
//! "Conflict-free hot paths").
//!
//! Invariant: every atomic and lock of this crate, and of `vfscale` through
//! [`crate::audited`], reports each access here with its address and its
//! caller's source location, so a [`Trace`] lists every line the audited
//! types touched while it recorded. What it cannot see: plain memory
//! (fields read through `&` or written under a lock, whose lock access is
//! seen), the allocator, and code outside the shim (crossbeam-epoch's own
//! pin, `std`'s `Arc` counts where no [`crate::audited::CountedArc`] stands
//! in).
//!
//! Recording is compiled in only with the `audit` cargo feature; without
//! it [`record`] returns an empty trace and every hook is an empty inline
//! function. With it, an access costs one relaxed load of a read-shared
//! word while no thread records, so builds that ship the checker (the CLI)
//! keep their speed.
//!
//! ```
//! use vfscale_sync::{audit, LockRef};
//!
//! let count = LockRef::new(1);
//! let ((), trace) = audit::record(|| count.get());
//! if audit::ENABLED {
//!     assert_eq!(trace.written_lines(), 1, "the lockref's word");
//! } else {
//!     assert_eq!(trace.written_lines(), 0);
//! }
//! ```

use std::collections::BTreeMap;
use std::fmt;
use std::panic::Location;

/// Whether this build records (the `audit` feature).
pub const ENABLED: bool = cfg!(feature = "audit");

/// The unit of sharing the audit reports: a cache line of this many bytes
/// (the x86-64 and most arm64 line; adjacent-line prefetch is not modelled).
pub const LINE_SIZE: usize = 64;

/// Where an access was made: the caller of the audited method.
pub type Site = &'static Location<'static>;

/// One site's use of a line: where, and (for sites inside this crate,
/// with the `audit` feature) the call stack, to name the caller.
#[derive(Debug, Clone)]
struct SiteUse {
    site: Site,
    #[cfg(feature = "audit")]
    stack: Option<backtrace::Backtrace>,
}

impl SiteUse {
    fn new(site: Site) -> SiteUse {
        SiteUse {
            site,
            #[cfg(feature = "audit")]
            stack: source_path(site.file()).starts_with("crates/sync/").then(backtrace::Backtrace::new_unresolved),
        }
    }

    /// `crates/vfs/src/namespace.rs:171 > crates/sync/src/seqcount.rs:131`:
    /// the innermost caller outside this crate, then the site.
    fn name(&self) -> String {
        let site = site_name(self.site.file(), self.site.line());
        #[cfg(feature = "audit")]
        if let Some(mut stack) = self.stack.clone() {
            stack.resolve();
            let caller = stack.frames().iter().flat_map(|f| f.symbols()).find_map(|symbol| {
                let file = source_path(symbol.filename()?.to_str()?);
                let ours = file.starts_with("crates/") && !file.starts_with("crates/sync/");
                ours.then(|| format!("{file}:{}", symbol.lineno().unwrap_or(0)))
            });
            if let Some(caller) = caller {
                return format!("{caller} > {site}");
            }
        }
        site
    }
}

/// How one thread used one line while recording.
#[derive(Debug, Clone, Default)]
struct LineUse {
    read_sites: Vec<SiteUse>,
    write_sites: Vec<SiteUse>,
}

#[cfg_attr(not(feature = "audit"), allow(dead_code))]
impl LineUse {
    fn add(&mut self, write: bool, site: Site) {
        let sites = if write { &mut self.write_sites } else { &mut self.read_sites };
        if !sites.iter().any(|known| known.site == site) {
            sites.push(SiteUse::new(site));
        }
    }

    fn written(&self) -> bool {
        !self.write_sites.is_empty()
    }

    fn merge(&mut self, other: LineUse) {
        for (ours, theirs) in [(&mut self.read_sites, other.read_sites), (&mut self.write_sites, other.write_sites)] {
            for site in theirs {
                if !ours.iter().any(|known| known.site == site.site) {
                    ours.push(site);
                }
            }
        }
    }
}

/// The lines one thread touched through audited types while [`record`]
/// ran, each with the sites that read and wrote it.
#[derive(Debug, Clone, Default)]
pub struct Trace {
    lines: BTreeMap<usize, LineUse>,
    locks: u64,
}

impl Trace {
    /// Lines written (a store or read-modify-write, failed CAS included:
    /// it takes the line exclusive all the same).
    pub fn written_lines(&self) -> usize {
        self.lines.values().filter(|u| u.written()).count()
    }

    /// Lines read or written.
    pub fn touched_lines(&self) -> usize {
        self.lines.len()
    }

    /// Locks taken (spinlocks, rwsems, mutexes, lockref locks), read locks
    /// included.
    pub fn lock_acquisitions(&self) -> u64 {
        self.locks
    }

    /// The sites that wrote any line, `file:line`, sorted.
    pub fn write_sites(&self) -> Vec<String> {
        let mut sites: Vec<String> =
            self.lines.values().flat_map(|u| u.write_sites.iter().map(SiteUse::name)).collect();
        sites.sort();
        sites.dedup();
        sites
    }

    /// Every line on which this trace and `other` conflict: one of the two
    /// wrote it and the other read or wrote it.
    pub fn conflicts(&self, other: &Trace) -> Vec<Conflict> {
        let mut found = Vec::new();
        for (line, ours) in &self.lines {
            let Some(theirs) = other.lines.get(line) else { continue };
            if !(ours.written() || theirs.written()) {
                continue;
            }
            let mut sites: Vec<String> = Vec::new();
            for (uses, kind) in [(&ours.write_sites, "write"), (&theirs.write_sites, "write")]
                .into_iter()
                .chain([(&ours.read_sites, "read"), (&theirs.read_sites, "read")])
            {
                sites.extend(uses.iter().map(|s| format!("{} ({kind})", s.name())));
            }
            sites.sort();
            sites.dedup();
            found.push(Conflict { line: *line, sites });
        }
        found
    }

    #[cfg_attr(not(feature = "audit"), allow(dead_code))]
    pub(crate) fn merge(&mut self, other: Trace) {
        for (line, uses) in other.lines {
            self.lines.entry(line).or_default().merge(uses);
        }
        self.locks += other.locks;
    }
}

/// A line two operations share with at least one write, and the sites that
/// touched it (`crates/vfs/src/dcache.rs:120 (write)`); a site inside
/// `vfscale-sync` is named after its innermost caller outside it
/// (`crates/vfs/src/namespace.rs:171 > crates/sync/src/seqcount.rs:131
/// (write)`), found from the call stack recorded with it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Conflict {
    /// The line's address divided by [`LINE_SIZE`].
    pub line: usize,
    /// Every site either operation used the line from, sorted.
    pub sites: Vec<String>,
}

impl fmt::Display for Conflict {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "line {:#x}: {}", self.line * LINE_SIZE, self.sites.join(", "))
    }
}

/// `crates/vfs/src/dcache.rs:120`, without the path up to `crates/`.
fn site_name(file: &str, line: u32) -> String {
    format!("{}:{line}", source_path(file))
}

/// `file` from `crates/` on, with each `dir/..` taken out: the audited
/// builds compile `crates/vfs-audit/../vfs/src/...`, which is
/// `crates/vfs/src/...`, the file a reader opens.
fn source_path(file: &str) -> String {
    let file = file.find("crates/").map_or(file, |at| &file[at..]);
    let mut parts: Vec<&str> = Vec::new();
    for part in file.split('/') {
        match part {
            ".." if parts.last().is_some_and(|last| *last != "..") => {
                parts.pop();
            }
            _ => parts.push(part),
        }
    }
    parts.join("/")
}

/// Runs `f` on the calling thread and returns what it returned with the
/// lines it touched. Nested calls record into the inner trace and add it to
/// the outer one when they end.
pub fn record<R>(f: impl FnOnce() -> R) -> (R, Trace) {
    #[cfg(feature = "audit")]
    return imp::record(f);
    #[cfg(not(feature = "audit"))]
    (f(), Trace::default())
}

/// Runs `f` without recording what it does: for deferred releases (the
/// kernel's RCU callbacks), which run on whichever thread next collects
/// garbage and are not part of the operation that happens to trigger them.
pub fn uncounted<R>(f: impl FnOnce() -> R) -> R {
    #[cfg(feature = "audit")]
    return imp::paused(f);
    #[cfg(not(feature = "audit"))]
    f()
}

/// Records a read of the line holding `addr`, for shared memory that no
/// audited type wraps.
#[inline(always)]
#[cfg_attr(feature = "audit", track_caller)]
pub fn read<T: ?Sized>(addr: *const T) {
    #[cfg(feature = "audit")]
    imp::touch(addr as *const u8 as usize, false, Location::caller());
    #[cfg(not(feature = "audit"))]
    let _ = addr;
}

/// Records a write of the line holding `addr` (see [`read`]).
#[inline(always)]
#[cfg_attr(feature = "audit", track_caller)]
pub fn write<T: ?Sized>(addr: *const T) {
    #[cfg(feature = "audit")]
    imp::touch(addr as *const u8 as usize, true, Location::caller());
    #[cfg(not(feature = "audit"))]
    let _ = addr;
}

/// Records one lock acquisition (its word's access is recorded by the
/// atomic it is made of).
#[inline(always)]
pub fn lock_acquired() {
    #[cfg(feature = "audit")]
    imp::lock_acquired();
}

/// Whether some thread is recording now: the cheap test the hooks make
/// before anything else (also used by [`crate::cpu`]'s virtual CPUs).
#[inline(always)]
#[cfg_attr(not(feature = "audit"), allow(dead_code))]
pub(crate) fn active() -> bool {
    #[cfg(feature = "audit")]
    return imp::RECORDING.load(std::sync::atomic::Ordering::Relaxed) != 0;
    #[cfg(not(feature = "audit"))]
    false
}

#[cfg(feature = "audit")]
mod imp {
    use super::{LineUse, Site, Trace, LINE_SIZE};
    use std::cell::{Cell, RefCell};
    use std::sync::atomic::{AtomicUsize, Ordering};

    /// Threads inside [`record`] or with a virtual CPU: while zero, a hook
    /// is one load of this read-mostly word.
    pub(crate) static RECORDING: AtomicUsize = AtomicUsize::new(0);

    std::thread_local! {
        /// The traces being recorded by this thread, innermost last.
        static TRACES: RefCell<Vec<Trace>> = const { RefCell::new(Vec::new()) };
        /// Depth of [`paused`] sections.
        static PAUSED: Cell<u32> = const { Cell::new(0) };
    }

    /// Keeps [`RECORDING`] raised while alive.
    pub(crate) struct Active;

    impl Active {
        pub(crate) fn raise() -> Active {
            RECORDING.fetch_add(1, Ordering::Relaxed);
            Active
        }
    }

    impl Drop for Active {
        fn drop(&mut self) {
            RECORDING.fetch_sub(1, Ordering::Relaxed);
        }
    }

    pub(super) fn record<R>(f: impl FnOnce() -> R) -> (R, Trace) {
        let _active = Active::raise();
        TRACES.with(|t| t.borrow_mut().push(Trace::default()));
        // Popped even if `f` unwinds, so a failed test leaves no trace open.
        struct Pop;
        impl Drop for Pop {
            fn drop(&mut self) {
                let _ = TRACES.try_with(|t| t.borrow_mut().pop());
            }
        }
        let pop = Pop;
        let result = f();
        std::mem::forget(pop);
        let trace = TRACES.with(|t| {
            let mut traces = t.borrow_mut();
            let trace = traces.pop().unwrap_or_default();
            if let Some(outer) = traces.last_mut() {
                outer.merge(trace.clone());
            }
            trace
        });
        (result, trace)
    }

    pub(super) fn paused<R>(f: impl FnOnce() -> R) -> R {
        PAUSED.with(|p| p.set(p.get() + 1));
        struct Resume;
        impl Drop for Resume {
            fn drop(&mut self) {
                let _ = PAUSED.try_with(|p| p.set(p.get() - 1));
            }
        }
        let _resume = Resume;
        f()
    }

    #[inline(always)]
    pub(super) fn touch(addr: usize, write: bool, site: Site) {
        if RECORDING.load(Ordering::Relaxed) != 0 {
            touch_recording(addr, write, site);
        }
    }

    #[cold]
    #[inline(never)]
    fn touch_recording(addr: usize, write: bool, site: Site) {
        if PAUSED.try_with(Cell::get).unwrap_or(1) != 0 {
            return;
        }
        let _ = TRACES.try_with(|t| {
            if let Some(trace) = t.borrow_mut().last_mut() {
                trace.lines.entry(addr / LINE_SIZE).or_insert_with(LineUse::default).add(write, site);
            }
        });
    }

    #[inline(always)]
    pub(super) fn lock_acquired() {
        if RECORDING.load(Ordering::Relaxed) != 0 && PAUSED.try_with(Cell::get).unwrap_or(1) == 0 {
            let _ = TRACES.try_with(|t| {
                if let Some(trace) = t.borrow_mut().last_mut() {
                    trace.locks += 1;
                }
            });
        }
    }
}

#[cfg(feature = "audit")]
pub(crate) use imp::Active;

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    #[test]
    fn a_write_conflicts_with_a_read_of_the_same_line_only() {
        let words = crossbeam_utils::CachePadded::new([0u64; 2]);
        let other = crossbeam_utils::CachePadded::new(0u64);
        let ((), writer) = record(|| write(&words[0]));
        let ((), reader) = record(|| read(&words[1]));
        let ((), elsewhere) = record(|| read(&*other));
        if ENABLED {
            let conflicts = writer.conflicts(&reader);
            assert_eq!(conflicts.len(), 1, "{conflicts:?}");
            assert!(conflicts[0].sites.iter().any(|s| s.contains("audit.rs") && s.ends_with("(write)")));
            assert!(conflicts[0].sites.iter().any(|s| s.ends_with("(read)")));
            assert_eq!(reader.conflicts(&writer).len(), 1, "symmetric");
        }
        assert!(writer.conflicts(&elsewhere).is_empty());
        assert!(reader.conflicts(&reader.clone()).is_empty(), "two reads never conflict");
    }

    #[test]
    fn sites_are_named_by_the_file_a_reader_opens() {
        let built_twice = "/work/p/crates/sync-audit/../sync/src/spin/tas.rs";
        assert_eq!(site_name(built_twice, 23), "crates/sync/src/spin/tas.rs:23");
        assert_eq!(source_path("crates/vfs-audit/../vfs/src/namei.rs"), "crates/vfs/src/namei.rs");
        assert_eq!(source_path("crates/vfs/src/namei.rs"), "crates/vfs/src/namei.rs");
        assert_eq!(source_path("../x/y.rs"), "../x/y.rs", "nothing to take a leading .. out of");
    }

    #[test]
    fn uncounted_and_nested_recording() {
        let word = 0u64;
        let ((), outer) = record(|| {
            uncounted(|| write(&word));
            let ((), inner) = record(|| read(&word));
            assert_eq!(inner.touched_lines(), usize::from(ENABLED));
            lock_acquired();
        });
        assert_eq!(outer.written_lines(), 0, "the uncounted write is not seen");
        assert_eq!(outer.touched_lines(), usize::from(ENABLED), "the inner read reaches the outer trace");
        assert_eq!(outer.lock_acquisitions(), u64::from(ENABLED));
    }
}
