//! A regular file's data: a sparse radix tree of 4 KiB pages (Linux's page
//! cache `xarray` for a shmem inode), read without taking a lock or
//! writing shared memory.
//!
//! Only pages something was written to (or `fallocate` reserved) exist;
//! a missing page is a hole and reads as zeros. The tree grows in height
//! as larger offsets are written, up to [`MAX_LFS_FILESIZE`].
//!
//! # Protocol
//!
//! Readers are *conflict-free*: a read pins the epoch (a thread-local
//! store), samples the map's [`SeqCount`], walks from the root through
//! `Acquire` pointer loads, samples each page's own count before it copies
//! the page's words out with `Relaxed` loads, and keeps the copy only if
//! none of those counts has moved; otherwise it reads again. After
//! [`READ_TRIES`] lost races it takes the writer lock and the locks of the
//! pages it covers, waiting for them as writers do, so no stream of
//! writes keeps it retrying. The read of the size and
//! of every byte is thus one consistent snapshot: a read sees all of a
//! write or none of it, as under the rwsem this replaced.
//!
//! Changes of the tree or the size (a write that allocates a page or moves
//! the end, `truncate`, `fallocate`) serialize on the per-file writer lock
//! (`PageMap::lock`) and bracket what a reader could see with the map's
//! count. A write within the size to pages already written takes neither
//! (`PageMap::write_in_place`): it locks its pages (each page's count is
//! its lock, [`SeqCount::write_lock`]) in page order, then checks that the
//! map's count has not moved since it looked the pages up; writers in
//! place to different pages thus share no line. Every change of a page's
//! words holds the page's lock, so a change of the tree that zeroes part
//! of a page waits for a write in place to it, and one that unlinks a page
//! orders after the write that holds it (the write checked the map's count
//! first). Page words are atomics, never plain memory, so a reader racing
//! a writer performs only atomic loads (a torn copy is discarded by the
//! retry). Nodes are published fully initialized with a `Release` store
//! and never change level; a page or node unlinked from the tree is freed
//! through the epoch, after every reader that might still hold it has
//! unpinned.
//!
//! # Invariants
//!
//! - Every byte at or beyond `size` in a present page is zero, so growing
//!   the file (a write past the end, `truncate` up) needs no zeroing: what
//!   lies between the old and new end reads as zeros already.
//! - An inner node at level `L` (1 or more) covers `64^L` pages; its
//!   children are pages at level 1 and nodes of level `L - 1` above. A
//!   node is unlinked only when all its slots are empty.
//! - `pages` counts the present pages: `st_blocks` is `pages * 8`.
//!
//! This is the design the conflict-free hot paths share: the same epoch
//! plus sequence-count read that rcu-walk uses for dentries, applied to
//! file data.
//!
//! May import `errno`.

use crate::errno::{Errno, VfsResult};
use crossbeam_epoch::{Guard, Owned, Shared};
use std::fmt;
use vfscale_sync::audited::EpochAtomic;
use vfscale_sync::audited::{AtomicBool, AtomicU64, Ordering};
use vfscale_sync::pad::LinePad;
use vfscale_sync::rwsem::{RwSem, RwSemWriteGuard, SpinPolicy};
use vfscale_sync::seqcount::SeqCount;

/// Bytes per page.
pub const PAGE_SIZE: u64 = 4096;
const WORD: usize = 8;
const WORDS: usize = PAGE_SIZE as usize / WORD;
const BITS: u32 = 6;
const FANOUT: usize = 1 << BITS;

/// Linux's largest file on 64-bit (`MAX_LFS_FILESIZE`, `LLONG_MAX`).
pub const MAX_LFS_FILESIZE: u64 = i64::MAX as u64;

/// Lock-free read attempts before a reader takes the writer lock.
pub const READ_TRIES: usize = 4;

fn page_is_data(page: &Page) -> bool {
    page.written.load(Ordering::Relaxed)
}

/// Under `node` (covering pages from `base`), the first page at or after
/// `from` that is written (`written`) or not (missing, or only reserved).
fn first_written(node: &Node, base: u64, from: u64, written: bool, guard: &Guard) -> Option<u64> {
    let child_span = span(node.level - 1);
    let first = (from.saturating_sub(base) / child_span) as usize;
    for i in first..FANOUT {
        let child_base = base + i as u64 * child_span;
        let found = match &node.slots {
            Slots::Pages(pages) => {
                // SAFETY: pages are published initialized and freed only
                // through the epoch, which `guard` pins.
                (unsafe { pages[i].load(Ordering::Acquire, guard).as_ref() }.is_some_and(page_is_data) == written)
                    .then_some(child_base)
            }
            // SAFETY: nodes are published initialized and freed only through
            // the epoch, which `guard` pins.
            Slots::Nodes(nodes) => match unsafe { nodes[i].load(Ordering::Acquire, guard).as_ref() } {
                None => (!written).then(|| from.max(child_base)),
                Some(child) => first_written(child, child_base, from.max(child_base), written, guard),
            },
        };
        if found.is_some() {
            return found;
        }
    }
    None
}

/// Pages a tree of height `level` covers; levels stay at most 10, so this
/// never overflows.
fn span(level: u32) -> u64 {
    1u64 << (BITS * level)
}

/// Up to four items in place, more on the heap: the pages one read or
/// write covers, which is rarely more.
struct Few<T> {
    len: usize,
    inline: [Option<T>; 4],
    more: Vec<T>,
}

impl<T> Few<T> {
    fn new() -> Few<T> {
        Few { len: 0, inline: [None, None, None, None], more: Vec::new() }
    }

    fn push(&mut self, item: T) {
        match self.inline.get_mut(self.len) {
            Some(slot) => *slot = Some(item),
            None => self.more.push(item),
        }
        self.len += 1;
    }

    /// In the order pushed.
    fn iter(&self) -> impl Iterator<Item = &T> {
        self.inline[..self.len.min(4)].iter().flatten().chain(&self.more)
    }

    fn clear(&mut self) {
        self.inline[..self.len.min(4)].fill_with(|| None);
        self.more.clear();
        self.len = 0;
    }
}

/// Where the space for pages comes from: the filesystem's `size=` limit.
pub(crate) trait PageBudget: Send + Sync {
    /// Takes one page from the budget; false when none is left (ENOSPC).
    fn charge(&self) -> bool;
    /// Gives `pages` back.
    fn uncharge(&self, pages: u64);
}

/// Padded, like every object two CPUs may use at once, so a neighbour on
/// the heap never shares its lines (the checker found a page's `written`
/// flag on the line of the next inode's attributes).
#[repr(C)]
struct Page {
    _head: LinePad,
    /// Odd while its words change, and the lock of every change of them
    /// ([`SeqCount::write_lock`]), which a reader that lost its races
    /// takes too.
    seq: SeqCount,
    /// Written to, not only reserved by `fallocate`: `SEEK_DATA` finds
    /// written pages only, as shmem's finds only up-to-date folios.
    written: AtomicBool,
    words: [AtomicU64; WORDS],
    _tail: LinePad,
}

/// An inner node of the tree. Level 1 holds pages; level `L > 1` holds
/// nodes of level `L - 1`. The root is always an inner node.
#[repr(C)]
struct Node {
    _head: LinePad,
    level: u32,
    slots: Slots,
    _tail: LinePad,
}

enum Slots {
    Pages([EpochAtomic<Page>; FANOUT]),
    Nodes([EpochAtomic<Node>; FANOUT]),
}

impl Node {
    fn new(level: u32) -> Owned<Node> {
        let slots = if level == 1 {
            Slots::Pages(std::array::from_fn(|_| EpochAtomic::null()))
        } else {
            Slots::Nodes(std::array::from_fn(|_| EpochAtomic::null()))
        };
        Owned::new(Node { _head: LinePad::new(), level, slots, _tail: LinePad::new() })
    }

    /// The slot of page `index` in this node.
    fn slot_of(&self, index: u64) -> usize {
        (index >> (BITS * (self.level - 1))) as usize % FANOUT
    }
}

impl Page {
    fn new() -> Owned<Page> {
        Owned::new(Page {
            _head: LinePad::new(),
            seq: SeqCount::new(),
            written: AtomicBool::new(false),
            words: std::array::from_fn(|_| AtomicU64::new(0)),
            _tail: LinePad::new(),
        })
    }
}

/// Frees what `slots` point to; the caller owns them alone.
fn free_slots<T>(slots: &mut [EpochAtomic<T>]) {
    for slot in slots {
        // SAFETY: a node is dropped either with its map (no reader left) or
        // through the epoch once empty, so each child is owned by this node
        // alone.
        unsafe {
            let child = slot.load(Ordering::Relaxed, crossbeam_epoch::unprotected());
            if !child.is_null() {
                drop(child.into_owned());
            }
        }
    }
}

impl Drop for Node {
    fn drop(&mut self) {
        match &mut self.slots {
            Slots::Pages(pages) => free_slots(pages),
            Slots::Nodes(nodes) => free_slots(nodes),
        }
    }
}

impl Page {
    /// Copies bytes `at..at + out.len()` of the page into `out`.
    fn copy_out(&self, at: usize, out: &mut [u8]) {
        let word = |i: usize| self.words[i].load(Ordering::Relaxed).to_ne_bytes();
        let end = at + out.len();
        // The part of a first word the read starts inside of.
        let head = ((WORD - at % WORD) % WORD).min(out.len());
        let (first, rest) = out.split_at_mut(head);
        if head > 0 {
            first.copy_from_slice(&word(at / WORD)[at % WORD..at % WORD + head]);
        }
        // Whole words, each one load and one fixed-size store.
        let mut chunks = rest.chunks_exact_mut(WORD);
        let start = (at + head) / WORD;
        for (i, chunk) in (&mut chunks).enumerate() {
            chunk.copy_from_slice(&word(start + i));
        }
        let tail = chunks.into_remainder();
        if !tail.is_empty() {
            let len = tail.len();
            tail.copy_from_slice(&word((end - len) / WORD)[..len]);
        }
    }

    /// Stores `data` at byte `at`; only the holder of the page's lock
    /// calls this.
    fn copy_in(&self, at: usize, data: &[u8]) {
        // Part of a word: merged with the bytes around it.
        let merge = |pos: usize, bytes: &[u8]| {
            let slot = &self.words[pos / WORD];
            let mut word = slot.load(Ordering::Relaxed).to_ne_bytes();
            word[pos % WORD..pos % WORD + bytes.len()].copy_from_slice(bytes);
            slot.store(u64::from_ne_bytes(word), Ordering::Relaxed);
        };
        let head = ((WORD - at % WORD) % WORD).min(data.len());
        let (first, rest) = data.split_at(head);
        if head > 0 {
            merge(at, first);
        }
        // Whole words, each one fixed-size load from `data` and one store.
        let mut chunks = rest.chunks_exact(WORD);
        let start = (at + head) / WORD;
        for (i, chunk) in (&mut chunks).enumerate() {
            let word: [u8; WORD] = chunk.try_into().expect("chunks_exact gives whole words");
            self.words[start + i].store(u64::from_ne_bytes(word), Ordering::Relaxed);
        }
        let tail = chunks.remainder();
        if !tail.is_empty() {
            merge(at + data.len() - tail.len(), tail);
        }
    }

    /// Zeroes bytes `at..at + len`; only the holder of the page's lock
    /// calls this.
    fn zero(&self, at: usize, len: usize) {
        let mut done = 0;
        while done < len {
            let pos = at + done;
            let slot = &self.words[pos / WORD];
            let from = pos % WORD;
            let n = (WORD - from).min(len - done);
            let mut word = slot.load(Ordering::Relaxed).to_ne_bytes();
            word[from..from + n].fill(0);
            slot.store(u64::from_ne_bytes(word), Ordering::Relaxed);
            done += n;
        }
    }
}

/// A regular file's data and size.
pub(crate) struct PageMap {
    root: EpochAtomic<Node>,
    /// The file's size in bytes; the authority for reads (the inode's
    /// attributes carry a copy for `stat`, set under the writer lock).
    size: AtomicU64,
    /// Present pages.
    pages: AtomicU64,
    /// Odd while a writer changes what readers could see.
    seq: SeqCount,
    /// Serializes writers (and readers that lost [`READ_TRIES`] races).
    writer: RwSem<()>,
}

impl fmt::Debug for PageMap {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PageMap").field("size", &self.size()).field("pages", &self.pages()).finish_non_exhaustive()
    }
}

impl Drop for PageMap {
    fn drop(&mut self) {
        // SAFETY: the map is being dropped, so no reader can reach the tree;
        // `Node`'s drop frees the children.
        unsafe {
            let root = self.root.load(Ordering::Relaxed, crossbeam_epoch::unprotected());
            if !root.is_null() {
                drop(root.into_owned());
            }
        }
    }
}

impl PageMap {
    /// An empty file. Its pages are charged to the budget each writer
    /// names ([`lock`](Self::lock)); whoever drops the map gives its
    /// [`pages`](Self::pages) back (the map holds no reference to the
    /// budget: one shared count per file would be written by every create
    /// and every final unlink).
    pub fn new() -> PageMap {
        PageMap {
            root: EpochAtomic::null(),
            size: AtomicU64::new(0),
            pages: AtomicU64::new(0),
            seq: SeqCount::new(),
            writer: RwSem::new((), SpinPolicy::Adaptive),
        }
    }

    /// The size in bytes.
    pub fn size(&self) -> u64 {
        self.size.load(Ordering::Acquire)
    }

    /// Present pages.
    pub fn pages(&self) -> u64 {
        self.pages.load(Ordering::Relaxed)
    }

    /// Allocated 512-byte units (`st_blocks`).
    pub fn blocks(&self) -> u64 {
        self.pages() * (PAGE_SIZE / 512)
    }

    /// Reads at `offset` into `buf`; returns the bytes read (0 at or past
    /// the end). Takes no lock and writes nothing shared unless writers
    /// keep overlapping it (see the module doc).
    pub fn read(&self, buf: &mut [u8], offset: u64) -> usize {
        let guard = crossbeam_epoch::pin();
        let mut seen = Few::new();
        for _ in 0..READ_TRIES {
            seen.clear();
            let start = self.seq.read_begin();
            let n = self.copy_out(buf, offset, &guard, |page| seen.push((page, page.seq.read_begin())));
            if seen.iter().all(|(page, count)| !page.seq.read_retry(*count)) && !self.seq.read_retry(start) {
                return n;
            }
        }
        // The writer lock stops changes of the tree and the size; writes
        // in place stop at the locks of the pages the copy holds.
        let _writer = self.writer.write();
        let mut held = Few::new();
        self.copy_out(buf, offset, &guard, |page| held.push(page.seq.write_lock()))
    }

    /// Copies out what `buf` covers from `offset`, calling `at_page` with
    /// each present page before copying from it.
    fn copy_out<'g>(&self, buf: &mut [u8], offset: u64, guard: &'g Guard, mut at_page: impl FnMut(&'g Page)) -> usize {
        let size = self.size.load(Ordering::Relaxed);
        if offset >= size {
            return 0;
        }
        let n = usize::try_from(size - offset).map_or(buf.len(), |left| left.min(buf.len()));
        let mut done = 0;
        while done < n {
            let pos = offset + done as u64;
            let at = (pos % PAGE_SIZE) as usize;
            let len = (PAGE_SIZE as usize - at).min(n - done);
            match self.lookup(pos / PAGE_SIZE, guard) {
                Some(page) => {
                    at_page(page);
                    page.copy_out(at, &mut buf[done..done + len]);
                }
                None => buf[done..done + len].fill(0),
            }
            done += len;
        }
        n
    }

    /// The page at `index`, if present.
    fn lookup<'g>(&self, index: u64, guard: &'g Guard) -> Option<&'g Page> {
        // SAFETY: nodes and pages are published initialized and freed only
        // through the epoch, which `guard` pins (here and below).
        let mut node = unsafe { self.root.load(Ordering::Acquire, guard).as_ref() }?;
        if index >= span(node.level) {
            return None;
        }
        loop {
            let slot = node.slot_of(index);
            match &node.slots {
                // SAFETY: as for the root above.
                Slots::Pages(pages) => return unsafe { pages[slot].load(Ordering::Acquire, guard).as_ref() },
                // SAFETY: as for the root above.
                Slots::Nodes(nodes) => node = unsafe { nodes[slot].load(Ordering::Acquire, guard).as_ref() }?,
            }
        }
    }

    /// The first written page at or after `from`.
    fn next_present(&self, from: u64, guard: &Guard) -> Option<u64> {
        // SAFETY: see `lookup`.
        let root = unsafe { self.root.load(Ordering::Acquire, guard).as_ref() }?;
        if from >= span(root.level) {
            return None;
        }
        first_written(root, 0, from, true, guard)
    }

    /// The first page at or after `from` that is missing or only reserved.
    fn next_absent(&self, from: u64, guard: &Guard) -> u64 {
        // SAFETY: see `lookup`.
        let Some(root) = (unsafe { self.root.load(Ordering::Acquire, guard).as_ref() }) else { return from };
        let end = span(root.level);
        if from >= end {
            return from;
        }
        first_written(root, 0, from, false, guard).unwrap_or(end)
    }

    /// `SEEK_DATA`: the first byte at or after `offset` in a written page;
    /// ENXIO at or past the end or when only holes follow.
    pub fn seek_data(&self, offset: u64) -> VfsResult<u64> {
        let guard = crossbeam_epoch::pin();
        let size = self.size();
        if offset >= size {
            return Err(Errno::ENXIO);
        }
        let page = self.next_present(offset / PAGE_SIZE, &guard).ok_or(Errno::ENXIO)?;
        let pos = offset.max(page.saturating_mul(PAGE_SIZE));
        if pos >= size {
            return Err(Errno::ENXIO);
        }
        Ok(pos)
    }

    /// `SEEK_HOLE`: the first byte at or after `offset` in a hole (a
    /// missing or only reserved page), the end of the file counting as
    /// one; ENXIO at or past the end.
    pub fn seek_hole(&self, offset: u64) -> VfsResult<u64> {
        let guard = crossbeam_epoch::pin();
        let size = self.size();
        if offset >= size {
            return Err(Errno::ENXIO);
        }
        let page = self.next_absent(offset / PAGE_SIZE, &guard);
        Ok(offset.max(page.saturating_mul(PAGE_SIZE)).min(size))
    }

    /// Writes `data` at `offset` without the writer lock, when it ends
    /// within the size and every page it covers is written already (so
    /// it changes neither the tree, the size nor what `SEEK_DATA` finds):
    /// it takes those pages' locks in page order and only reads the map.
    /// Writes to different pages of one file thus share no line. `None`
    /// when it cannot; the caller then takes the writer lock.
    pub fn write_in_place(&self, offset: u64, data: &[u8]) -> Option<usize> {
        let guard = crossbeam_epoch::pin();
        let start = self.seq.raw_read();
        let end = offset.checked_add(data.len() as u64)?;
        if start & 1 == 1 || data.is_empty() || end > self.size.load(Ordering::Acquire) {
            return None;
        }
        let mut held = Few::new();
        for index in offset / PAGE_SIZE..end.div_ceil(PAGE_SIZE) {
            let page = self.lookup(index, &guard).filter(|page| page_is_data(page))?;
            held.push((page, page.seq.write_lock()));
        }
        // A change of the tree or size since `start` may have unlinked a
        // held page or moved the end; one after this waits for the locks
        // of the pages it changes.
        if self.seq.read_retry(start) {
            return None;
        }
        let mut done = 0;
        for (page, _locked) in held.iter() {
            let pos = offset + done as u64;
            let at = (pos % PAGE_SIZE) as usize;
            let len = (PAGE_SIZE as usize - at).min(data.len() - done);
            page.copy_in(at, &data[done..done + len]);
            done += len;
        }
        Some(done)
    }

    /// Whether `fallocate` of `offset..offset + len` would change nothing
    /// here: every page it covers is present and, unless `keep_size`, it
    /// ends within the size, with no change of the tree or size under way
    /// or made while it looked (else false: the caller takes the writer
    /// lock). Takes no lock, writes nothing and never waits.
    pub fn covers(&self, offset: u64, len: u64, keep_size: bool) -> bool {
        let guard = crossbeam_epoch::pin();
        let end = offset.saturating_add(len);
        let start = self.seq.raw_read();
        let covered = start & 1 == 0
            && (keep_size || end <= self.size.load(Ordering::Acquire))
            && (offset / PAGE_SIZE..end.div_ceil(PAGE_SIZE)).all(|index| self.lookup(index, &guard).is_some());
        covered && !self.seq.read_retry(start)
    }

    /// Takes the writer lock.
    pub fn lock<'a>(&'a self, budget: &'a dyn PageBudget) -> PageWriter<'a> {
        PageWriter { map: self, budget, _writer: self.writer.write() }
    }
}

/// The writer lock of a [`PageMap`], through which it is changed.
pub(crate) struct PageWriter<'a> {
    map: &'a PageMap,
    /// Where pages it allocates or frees are charged.
    budget: &'a dyn PageBudget,
    _writer: RwSemWriteGuard<'a, ()>,
}

impl fmt::Debug for PageWriter<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PageWriter").field("map", self.map).finish()
    }
}

impl PageWriter<'_> {
    /// The size in bytes.
    pub fn size(&self) -> u64 {
        self.map.size.load(Ordering::Relaxed)
    }

    /// Writes `data` at `offset`, allocating pages; returns the bytes
    /// written, fewer than asked only when the budget ran out (none at all
    /// is ENOSPC). The caller has checked the file-size limit.
    pub fn write(&mut self, offset: u64, data: &[u8]) -> VfsResult<usize> {
        let guard = crossbeam_epoch::pin();
        let map = self.map;
        let _write = map.seq.write_begin();
        let mut done = 0;
        while done < data.len() {
            let pos = offset + done as u64;
            let at = (pos % PAGE_SIZE) as usize;
            let len = (PAGE_SIZE as usize - at).min(data.len() - done);
            let Some(page) = self.page(pos / PAGE_SIZE, &guard) else { break };
            let _locked = page.seq.write_lock();
            page.copy_in(at, &data[done..done + len]);
            page.written.store(true, Ordering::Relaxed);
            done += len;
        }
        if done == 0 && !data.is_empty() {
            return Err(Errno::ENOSPC);
        }
        let end = offset + done as u64;
        if end > self.size() {
            map.size.store(end, Ordering::Release);
        }
        Ok(done)
    }

    /// The page at `index`, created (with the tree grown to reach it) if
    /// missing; `None` when the budget has no page left.
    fn page<'g>(&mut self, index: u64, guard: &'g Guard) -> Option<&'g Page> {
        let map = self.map;
        let mut need = 1;
        while index >= span(need) {
            need += 1;
        }
        let mut root = map.root.load(Ordering::Acquire, guard);
        // SAFETY: only this writer changes the tree, and nodes are freed
        // through the epoch `guard` pins (here and below).
        match unsafe { root.as_ref() } {
            None => {
                root = Node::new(need).into_shared(guard);
                map.root.store(root, Ordering::Release);
            }
            Some(node) if node.level < need => {
                for level in node.level + 1..=need {
                    let grown = Node::new(level);
                    if let Slots::Nodes(nodes) = &grown.slots {
                        nodes[0].store(root, Ordering::Relaxed);
                    }
                    root = grown.into_shared(guard);
                }
                map.root.store(root, Ordering::Release);
            }
            Some(_) => {}
        }
        // SAFETY: as above; the match leaves `root` non-null.
        let mut node = unsafe { root.deref() };
        loop {
            let slot = node.slot_of(index);
            match &node.slots {
                Slots::Pages(pages) => {
                    // SAFETY: as above.
                    if let Some(page) = unsafe { pages[slot].load(Ordering::Acquire, guard).as_ref() } {
                        return Some(page);
                    }
                    return self.new_page(&pages[slot], guard);
                }
                Slots::Nodes(nodes) => {
                    let child = nodes[slot].load(Ordering::Acquire, guard);
                    // SAFETY: as above.
                    node = match unsafe { child.as_ref() } {
                        Some(child) => child,
                        None => {
                            let child = Node::new(node.level - 1).into_shared(guard);
                            nodes[slot].store(child, Ordering::Release);
                            // SAFETY: just allocated, freed only through the epoch.
                            unsafe { child.deref() }
                        }
                    };
                }
            }
        }
    }

    fn new_page<'g>(&mut self, slot: &EpochAtomic<Page>, guard: &'g Guard) -> Option<&'g Page> {
        if !self.budget.charge() {
            return None;
        }
        let page = Page::new().into_shared(guard);
        slot.store(page, Ordering::Release);
        self.map.pages.fetch_add(1, Ordering::Relaxed);
        // SAFETY: just published; freed only through the epoch.
        Some(unsafe { page.deref() })
    }

    /// Sets the size (truncate): growing exposes zeros (and keeps pages
    /// `fallocate` reserved past the end); shrinking frees every page past
    /// the new end, reserved ones included, and zeroes the rest of the
    /// last one.
    pub fn set_size(&mut self, len: u64) {
        let guard = crossbeam_epoch::pin();
        let map = self.map;
        let _write = map.seq.write_begin();
        if len < self.size() {
            self.zero_partial(len, PAGE_SIZE - len % PAGE_SIZE, &guard);
            self.remove_pages(len.div_ceil(PAGE_SIZE), u64::MAX, &guard);
        }
        map.size.store(len, Ordering::Release);
    }

    /// `FALLOC_FL_PUNCH_HOLE`: zeroes `offset..offset + len` and frees the
    /// pages wholly inside it; the size stays.
    pub fn punch_hole(&mut self, offset: u64, len: u64) {
        let guard = crossbeam_epoch::pin();
        let end = offset.saturating_add(len);
        let _write = self.map.seq.write_begin();
        let first_whole = offset.div_ceil(PAGE_SIZE);
        let end_whole = end / PAGE_SIZE;
        if first_whole > end_whole {
            // Inside one page.
            self.zero_partial(offset, len, &guard);
            return;
        }
        self.zero_partial(offset, first_whole * PAGE_SIZE - offset, &guard);
        self.zero_partial(end_whole * PAGE_SIZE, end - end_whole * PAGE_SIZE, &guard);
        if end_whole > first_whole {
            self.remove_pages(first_whole, end_whole - 1, &guard);
        }
    }

    /// Zeroes `len` bytes from `offset`, all within one page, if present.
    fn zero_partial(&mut self, offset: u64, len: u64, guard: &Guard) {
        let at = offset % PAGE_SIZE;
        let len = len.min(PAGE_SIZE - at);
        if len == 0 || len == PAGE_SIZE {
            return;
        }
        if let Some(page) = self.map.lookup(offset / PAGE_SIZE, guard) {
            let _locked = page.seq.write_lock();
            page.zero(at as usize, len as usize);
        }
    }

    /// Allocates (zeroed) pages for `offset..offset + len`, then grows the
    /// size to its end unless `keep_size`. On ENOSPC the pages this call
    /// allocated are freed again and nothing changes, as shmem does.
    pub fn allocate(&mut self, offset: u64, len: u64, keep_size: bool) -> VfsResult<()> {
        let guard = crossbeam_epoch::pin();
        let map = self.map;
        let end = offset.saturating_add(len);
        let mut added = Vec::new();
        // Zero pages appearing (and going again on ENOSPC) change no byte
        // a reader sees, but [`PageMap::covers`] must not take a page
        // this call may still take back for a reservation: the count is
        // odd from the first page added to the end.
        let mut write = None;
        for index in offset / PAGE_SIZE..end.div_ceil(PAGE_SIZE) {
            if map.lookup(index, &guard).is_some() {
                continue;
            }
            write.get_or_insert_with(|| map.seq.write_begin());
            if self.page(index, &guard).is_none() {
                for index in added {
                    self.remove_pages(index, index, &guard);
                }
                return Err(Errno::ENOSPC);
            }
            added.push(index);
        }
        if !keep_size && end > self.size() {
            write.get_or_insert_with(|| map.seq.write_begin());
            map.size.store(end, Ordering::Release);
        }
        Ok(())
    }

    /// Frees the present pages with indexes in `first..=last`, and the
    /// inner nodes that leaves empty.
    fn remove_pages(&mut self, first: u64, last: u64, guard: &Guard) {
        /// Prunes the node in `slot`; whether it is empty (and so gone).
        fn prune(slot: &EpochAtomic<Node>, base: u64, first: u64, last: u64, guard: &Guard, freed: &mut u64) -> bool {
            let shared = slot.load(Ordering::Acquire, guard);
            // SAFETY: only the writer changes the tree; nodes are freed
            // through the epoch.
            let Some(node) = (unsafe { shared.as_ref() }) else { return true };
            let child_span = span(node.level - 1);
            let mut empty = true;
            for i in 0..FANOUT {
                let child_base = base + i as u64 * child_span;
                let in_range = child_base + (child_span - 1) >= first && child_base <= last;
                match &node.slots {
                    Slots::Pages(pages) => {
                        let page = pages[i].load(Ordering::Acquire, guard);
                        if in_range && !page.is_null() {
                            pages[i].store(Shared::null(), Ordering::Release);
                            *freed += 1;
                            // SAFETY: unlinked above; freed after every
                            // reader that could hold it has unpinned.
                            unsafe { guard.defer_destroy(page) };
                        } else {
                            empty &= page.is_null();
                        }
                    }
                    Slots::Nodes(nodes) if in_range => {
                        empty &= prune(&nodes[i], child_base, first, last, guard, freed);
                    }
                    Slots::Nodes(nodes) => empty &= nodes[i].load(Ordering::Relaxed, guard).is_null(),
                }
            }
            if empty {
                slot.store(Shared::null(), Ordering::Release);
                // SAFETY: unlinked above, and its slots are all empty, so
                // this frees exactly `node`, after every reader that could
                // hold it has unpinned.
                unsafe { guard.defer_destroy(shared) };
            }
            empty
        }
        let mut freed = 0;
        prune(&self.map.root, 0, first, last, guard, &mut freed);
        if freed > 0 {
            self.map.pages.fetch_sub(freed, Ordering::Relaxed);
            self.budget.uncharge(freed);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use proptest::test_runner::RngSeed;
    use std::sync::{mpsc, Arc};
    use vfscale_sync::audited::AtomicU64;
    use vfscale_sync::test_support::stress_iters;

    fn map() -> PageMap {
        PageMap::new()
    }

    /// The budget of the tests that do not count pages.
    fn unlimited() -> &'static crate::space::Space {
        static UNLIMITED: vfscale_sync::audited::OnceLock<crate::space::Space> = vfscale_sync::audited::OnceLock::new();
        UNLIMITED.get_or_init(|| crate::space::Space::new(0, 0))
    }

    fn read_all(map: &PageMap) -> Vec<u8> {
        let mut buf = vec![0xAA; map.size() as usize];
        assert_eq!(map.read(&mut buf, 0), buf.len());
        buf
    }

    #[test]
    fn holes_read_as_zeros_and_use_no_pages() {
        let m = map();
        assert_eq!(m.lock(unlimited()).write(100 << 20, b"x"), Ok(1));
        assert_eq!(m.size(), (100 << 20) + 1);
        assert_eq!(m.pages(), 1);
        assert_eq!(m.blocks(), 8);
        let mut buf = [0xAA; 10];
        assert_eq!(m.read(&mut buf, 4096), 10);
        assert_eq!(buf, [0; 10]);
        assert_eq!(m.read(&mut buf, (100 << 20) - 5), 6);
        assert_eq!(&buf[..6], b"\0\0\0\0\0x");
        assert_eq!(m.read(&mut buf, m.size()), 0);
    }

    #[test]
    fn writes_at_the_largest_offsets() {
        let m = map();
        let last = MAX_LFS_FILESIZE - 3;
        assert_eq!(m.lock(unlimited()).write(last, b"end"), Ok(3));
        assert_eq!(m.size(), MAX_LFS_FILESIZE);
        let mut buf = [0; 5];
        assert_eq!(m.read(&mut buf, last - 2), 5);
        assert_eq!(&buf, b"\0\0end");
        assert_eq!(m.lock(unlimited()).write(0, b"start"), Ok(5));
        assert_eq!(m.pages(), 2);
        assert_eq!(m.seek_data(5), Ok(5));
        assert_eq!(m.seek_data(PAGE_SIZE), Ok(last / PAGE_SIZE * PAGE_SIZE));
        assert_eq!(m.seek_hole(0), Ok(PAGE_SIZE));
        m.lock(unlimited()).set_size(0);
        assert_eq!(m.pages(), 0);
    }

    #[test]
    fn truncate_down_zeroes_the_tail_and_frees_pages() {
        let m = map();
        m.lock(unlimited()).write(0, &[7; 3 * PAGE_SIZE as usize]).unwrap();
        assert_eq!(m.pages(), 3);
        m.lock(unlimited()).set_size(10);
        assert_eq!(m.pages(), 1);
        m.lock(unlimited()).set_size(2 * PAGE_SIZE);
        let data = read_all(&m);
        assert!(data[..10].iter().all(|&b| b == 7));
        assert!(data[10..].iter().all(|&b| b == 0));
    }

    #[test]
    fn seek_data_and_hole() {
        let m = map();
        let p = PAGE_SIZE;
        m.lock(unlimited()).write(p, &[1; 10]).unwrap();
        m.lock(unlimited()).write(5 * p, &[1; 10]).unwrap();
        let size = 5 * p + 10;
        assert_eq!(m.seek_data(0), Ok(p));
        assert_eq!(m.seek_data(p + 3), Ok(p + 3));
        assert_eq!(m.seek_data(2 * p), Ok(5 * p));
        assert_eq!(m.seek_data(size), Err(Errno::ENXIO));
        assert_eq!(m.seek_hole(0), Ok(0));
        assert_eq!(m.seek_hole(p), Ok(2 * p));
        assert_eq!(m.seek_hole(5 * p), Ok(size));
        assert_eq!(m.seek_hole(size), Err(Errno::ENXIO));
        assert_eq!(map().seek_hole(0), Err(Errno::ENXIO));
    }

    #[test]
    fn fallocate_modes() {
        let m = map();
        m.lock(unlimited()).allocate(0, 3 * PAGE_SIZE, true).unwrap();
        assert_eq!((m.size(), m.pages()), (0, 3));
        m.lock(unlimited()).allocate(PAGE_SIZE, 10, false).unwrap();
        assert_eq!((m.size(), m.pages()), (PAGE_SIZE + 10, 3));
        assert_eq!(m.seek_data(0), Err(Errno::ENXIO), "reserved pages are holes to SEEK_DATA");
        assert_eq!(m.seek_hole(0), Ok(0));
        m.lock(unlimited()).write(0, &[9; 2 * PAGE_SIZE as usize]).unwrap();
        m.lock(unlimited()).punch_hole(10, 2 * PAGE_SIZE);
        assert_eq!(m.pages(), 2, "only page 1 lay wholly inside the hole");
        let data = read_all(&m);
        assert!(data[..10].iter().all(|&b| b == 9));
        assert!(data[10..].iter().all(|&b| b == 0));
        assert_eq!(m.size(), 2 * PAGE_SIZE);
    }

    struct Limited(AtomicU64);
    impl PageBudget for Limited {
        fn charge(&self) -> bool {
            self.0.fetch_update(Ordering::Relaxed, Ordering::Relaxed, |n| n.checked_sub(1)).is_ok()
        }
        fn uncharge(&self, pages: u64) {
            self.0.fetch_add(pages, Ordering::Relaxed);
        }
    }

    #[test]
    fn a_budget_limits_writes_and_comes_back() {
        let budget = Limited(AtomicU64::new(2));
        let m = PageMap::new();
        assert_eq!(m.lock(&budget).write(100, &[1; 3 * PAGE_SIZE as usize]), Ok(2 * PAGE_SIZE as usize - 100));
        assert_eq!(m.lock(&budget).write(10 * PAGE_SIZE, b"x"), Err(Errno::ENOSPC));
        assert_eq!(m.lock(&budget).allocate(0, 10 * PAGE_SIZE, true), Err(Errno::ENOSPC));
        assert_eq!(m.pages(), 2, "a failed fallocate gives back what it took");
        m.lock(&budget).set_size(0);
        assert_eq!(budget.0.load(Ordering::Relaxed), 2);
        m.lock(&budget).write(0, b"y").unwrap();
        // The owner gives a dropped map's pages back.
        budget.uncharge(m.pages());
        assert_eq!(budget.0.load(Ordering::Relaxed), 2);
    }

    /// Two writers over the same three pages, each write one byte value
    /// throughout, made by `write` (given the writer's number), while the
    /// test reads: every read sees all of one write.
    fn reads_stay_whole(write: fn(&PageMap, u8, &[u8])) {
        let m = Arc::new(map());
        let len = 3 * PAGE_SIZE as usize;
        m.lock(unlimited()).write(0, &vec![0; len]).unwrap();
        let rounds = stress_iters(2000);
        let writers: Vec<_> = (0..2u8)
            .map(|w| {
                let m = Arc::clone(&m);
                std::thread::spawn(move || {
                    for round in 0..rounds {
                        write(&m, w, &vec![(round % 100) as u8 * 2 + w + 1; len]);
                    }
                })
            })
            .collect();
        read_whole_until_done(&m, len, writers);
    }

    /// A writer in place and one with the lock (the one in place taking
    /// the lock whenever the map is changing).
    #[test]
    fn readers_see_whole_writes() {
        reads_stay_whole(|m, w, data| {
            if w == 0 || m.write_in_place(0, data).is_none() {
                m.lock(unlimited()).write(0, data).unwrap();
            }
        });
    }

    /// Reads the first `len` bytes of `m` until every writer has ended,
    /// and once after: each read must see one byte value throughout.
    fn read_whole_until_done(m: &PageMap, len: usize, writers: Vec<std::thread::JoinHandle<()>>) {
        let mut buf = vec![0; len];
        let mut read_whole = || {
            assert_eq!(m.read(&mut buf, 0), len);
            assert!(buf.iter().all(|&b| b == buf[0]), "a torn read");
        };
        while writers.iter().any(|w| !w.is_finished()) {
            read_whole();
        }
        for w in writers {
            w.join().unwrap();
        }
        read_whole();
    }

    /// A change with the writer lock waits for the lock of a page a write
    /// in place holds: while the test holds page 1's lock, a write of
    /// pages 0 to 2 fills page 0 and leaves page 1 alone.
    #[test]
    fn a_write_with_the_lock_waits_for_a_page_held_in_place() {
        let m = Arc::new(map());
        let len = 3 * PAGE_SIZE as usize;
        m.lock(unlimited()).write(0, &vec![1; len]).unwrap();
        let guard = crossbeam_epoch::pin();
        let (first, second) = (m.lookup(0, &guard).unwrap(), m.lookup(1, &guard).unwrap());
        let held = second.seq.write_lock();
        let writer = {
            let m = Arc::clone(&m);
            std::thread::spawn(move || m.lock(unlimited()).write(0, &vec![2; len]).unwrap())
        };
        while first.words[WORDS - 1].load(Ordering::Acquire) != u64::from_ne_bytes([2; 8]) {
            std::thread::yield_now();
        }
        for _ in 0..stress_iters(100_000) {
            assert_eq!(second.words[0].load(Ordering::Acquire), u64::from_ne_bytes([1; 8]), "page 1 written unlocked");
        }
        drop(held);
        assert_eq!(writer.join().unwrap(), len);
        let mut buf = vec![0; len];
        assert_eq!(m.read(&mut buf, 0), len);
        assert!(buf.iter().all(|&b| b == 2));
    }

    /// A budget whose second charge tells the test it is there, waits
    /// for its word, then fails.
    struct Gate {
        calls: AtomicU64,
        entered: mpsc::SyncSender<()>,
        release: vfscale_sync::audited::Mutex<mpsc::Receiver<()>>,
    }

    impl PageBudget for Gate {
        fn charge(&self) -> bool {
            if self.calls.fetch_add(1, Ordering::Relaxed) == 1 {
                self.entered.send(()).unwrap();
                self.release.lock().unwrap().recv().unwrap();
                return false;
            }
            true
        }
        fn uncharge(&self, _pages: u64) {}
    }

    /// An `fallocate` that runs out of space takes back the pages it
    /// added: while it has one of them, `covers` does not count it as a
    /// reservation (the range then takes the writer lock, and is
    /// reserved, or fails, for real).
    #[test]
    fn covers_does_not_count_the_pages_of_an_allocate_under_way() {
        let m = Arc::new(map());
        for index in [0, 1, 3] {
            m.lock(unlimited()).write(index * PAGE_SIZE, &[7; 8]).unwrap();
        }
        assert!(!m.covers(0, 3 * PAGE_SIZE, true), "page 2 is a hole");
        let ((entered, at_gate), (release, released)) = (mpsc::sync_channel(0), mpsc::sync_channel(0));
        let gate =
            Arc::new(Gate { calls: AtomicU64::new(0), entered, release: vfscale_sync::audited::Mutex::new(released) });
        let allocate = {
            let (m, gate) = (Arc::clone(&m), Arc::clone(&gate));
            // Adds page 2 (the first charge), then fails at page 4.
            std::thread::spawn(move || m.lock(&*gate).allocate(0, 6 * PAGE_SIZE, true))
        };
        at_gate.recv().unwrap();
        let covered = m.covers(0, 3 * PAGE_SIZE, true);
        release.send(()).unwrap();
        assert_eq!(allocate.join().unwrap(), Err(Errno::ENOSPC));
        assert!(m.lookup(2, &crossbeam_epoch::pin()).is_none(), "taken back");
        assert!(!covered, "covers counted a page the failing allocate took back");
    }

    /// Two writers in place: never pages of two writes.
    #[test]
    fn readers_see_whole_writes_in_place() {
        reads_stay_whole(|m, _, data| {
            assert_eq!(m.write_in_place(0, data), Some(data.len()), "nothing else changes the map");
        });
    }

    /// Writes in place over pages that a truncate takes away, or zeroes
    /// past its end inside a page, and gives back as holes: a read sees
    /// one write whole, the bytes past the shorter size as zeros or not at
    /// all, never two writes' bytes.
    #[test]
    fn writes_in_place_order_with_truncates() {
        let m = Arc::new(map());
        let len = 4 * PAGE_SIZE as usize;
        let half = len / 2 + 100;
        m.lock(unlimited()).write(0, &vec![1; len]).unwrap();
        let rounds = stress_iters(300);
        let writer = {
            let m = Arc::clone(&m);
            std::thread::spawn(move || {
                for round in 0..rounds {
                    let data = vec![(round % 250) as u8 + 2; len];
                    if m.write_in_place(0, &data).is_none() {
                        m.lock(unlimited()).write(0, &data).unwrap();
                    }
                }
            })
        };
        let truncater = {
            let m = Arc::clone(&m);
            std::thread::spawn(move || {
                for _ in 0..rounds {
                    m.lock(unlimited()).set_size(half as u64);
                    m.lock(unlimited()).set_size(len as u64);
                }
            })
        };
        let mut buf = vec![0; len];
        while !writer.is_finished() || !truncater.is_finished() {
            let n = m.read(&mut buf, 0);
            assert!(n == half || n == len, "read {n} bytes");
            let first = buf[0];
            assert!(buf[..half].iter().all(|&b| b == first), "a torn first half");
            assert!(
                buf[half..n].iter().all(|&b| b == first) || buf[half..n].iter().all(|&b| b == 0),
                "a torn second half"
            );
        }
        writer.join().unwrap();
        truncater.join().unwrap();
    }

    #[derive(Debug, Clone)]
    enum Op {
        Write(u64, Vec<u8>),
        Truncate(u64),
        Punch(u64, u64),
        Allocate(u64, u64, bool),
    }

    fn op() -> impl Strategy<Value = Op> {
        let off = 0..6 * PAGE_SIZE;
        prop_oneof![
            (off.clone(), prop::collection::vec(any::<u8>(), 1..5000)).prop_map(|(o, d)| Op::Write(o, d)),
            off.clone().prop_map(Op::Truncate),
            (off.clone(), 1..3 * PAGE_SIZE).prop_map(|(o, l)| Op::Punch(o, l)),
            (off, 1..3 * PAGE_SIZE, any::<bool>()).prop_map(|(o, l, k)| Op::Allocate(o, l, k)),
        ]
    }

    proptest! {
        #![proptest_config(ProptestConfig {
            rng_seed: RngSeed::Fixed(vfscale_sync::test_support::case_seed(0x9a6e5)),
            ..ProptestConfig::default()
        })]

        /// Against a dense `Vec` model: same bytes, same size, pages only
        /// where data was written or allocated, and seeks that agree with
        /// the pages.
        #[test]
        fn matches_a_dense_model(ops in prop::collection::vec(op(), 1..30)) {
            let m = map();
            let mut model: Vec<u8> = Vec::new();
            for op in ops {
                match op {
                    Op::Write(o, d) => {
                        // In place where it may be; with the lock where not.
                        let end = o as usize + d.len();
                        let in_place = end <= model.len()
                            && (o / PAGE_SIZE..(end as u64).div_ceil(PAGE_SIZE))
                                .all(|i| m.lookup(i, &crossbeam_epoch::pin()).is_some_and(page_is_data));
                        match m.write_in_place(o, &d) {
                            Some(n) => prop_assert!(in_place && n == d.len()),
                            None => {
                                prop_assert!(!in_place);
                                m.lock(unlimited()).write(o, &d).unwrap();
                            }
                        }
                        if model.len() < end { model.resize(end, 0); }
                        model[o as usize..end].copy_from_slice(&d);
                    }
                    Op::Truncate(l) => { m.lock(unlimited()).set_size(l); model.resize(l as usize, 0); }
                    Op::Punch(o, l) => {
                        m.lock(unlimited()).punch_hole(o, l);
                        let end = ((o + l) as usize).min(model.len());
                        if (o as usize) < end { model[o as usize..end].fill(0); }
                    }
                    Op::Allocate(o, l, keep) => {
                        let covered = (keep || o + l <= model.len() as u64)
                            && (o / PAGE_SIZE..(o + l).div_ceil(PAGE_SIZE)).all(|i| m.lookup(i, &crossbeam_epoch::pin()).is_some());
                        prop_assert_eq!(m.covers(o, l, keep), covered);
                        let pages = m.pages();
                        m.lock(unlimited()).allocate(o, l, keep).unwrap();
                        if covered { prop_assert_eq!(m.pages(), pages); }
                        if !keep && model.len() < (o + l) as usize { model.resize((o + l) as usize, 0); }
                    }
                }
                prop_assert_eq!(m.size(), model.len() as u64);
                prop_assert_eq!(read_all(&m), model.clone());
                // Reads that start and end inside words and pages.
                for (off, len) in [(1, 7), (3, 9), (5, 3), (4093, 10), (4095, 1), (6001, 8200)] {
                    let mut buf = vec![0xAA; len];
                    let n = m.read(&mut buf, off as u64);
                    let want = model.get(off..).map_or(&[][..], |rest| &rest[..len.min(rest.len())]);
                    prop_assert_eq!(&buf[..n], want);
                }
            }
            let guard = crossbeam_epoch::pin();
            let mut present = 0;
            for index in 0..8 * PAGE_SIZE / PAGE_SIZE + 8 {
                if m.lookup(index, &guard).is_some() { present += 1; }
            }
            prop_assert_eq!(present, m.pages());
            let size = m.size();
            for off in (0..size).step_by(1000) {
                let hole = m.seek_hole(off).unwrap();
                prop_assert!(hole >= off && hole <= size);
                let written = |at: u64| m.lookup(at / PAGE_SIZE, &guard).is_some_and(|p| p.written.load(Ordering::Relaxed));
                if hole < size {
                    prop_assert!(!written(hole));
                }
                match m.seek_data(off) {
                    Ok(data) => prop_assert!(data >= off && data < size && written(data)),
                    Err(_) => prop_assert!((off..size).step_by(512).all(|at| !written(at))),
                }
            }
        }
    }
}
