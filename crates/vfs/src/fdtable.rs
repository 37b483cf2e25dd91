//! A process's file descriptor table (Linux `files_struct`), read without
//! a shared write: a look-up is a read-side section of the table's
//! [`Srcu`], which writes only the caller's CPU's slot, and reads the
//! descriptor's own line. So threads of one process using one descriptor,
//! or different ones, do not conflict (write no line another CPU reads), where Linux's
//! `fget` in a multithreaded process writes the open file's `f_count`.
//!
//! Invariant: the table is an array of slots ([`SrcuSlot`]s), each on its
//! own cache line, each holding null or a pointer from `Arc::into_raw`
//! that owns one count of its open file. A look-up borrows a slot's file
//! inside a read-side section and uses it (or takes a count of its own)
//! before the section ends; `remove` clears the slot and, if a look-up
//! borrowed the file, synchronizes before it hands the slot's count back,
//! so the file outlives every section that could have loaded it, and a
//! close still drops the last count (releasing the file's locks) before it
//! returns. A close of a descriptor no look-up used (an open and a close)
//! reads no other CPU's reader count. A table is never freed before the process: growing
//! publishes a larger copy (sharing the slots by `Arc`, so no file moves)
//! and keeps the old one, so a reader needs no pin to follow the table
//! pointer, and one that loaded an old table still finds every descriptor
//! in it (at most six tables, 16 to 1024 slots, under twice the final size
//! in all). Allocation (lowest free first, as POSIX requires) and growth
//! are serialized by `alloc`, which also keeps which slots are in use.
//!
//! The table, its [`Srcu`], its slots and the process's [`PosixMarks`]
//! are made at the first install: a process that never holds a descriptor
//! (a benchmark's short-lived processes) allocates none of them.
//!
//! May import `errno`, `file` and `posix_marks`.

use crate::errno::{Errno, VfsResult};
use crate::file::OpenFile;
use crate::posix_marks::PosixMarks;
use crossbeam_utils::CachePadded;
use std::mem::ManuallyDrop;
use std::sync::Arc;
use vfscale_sync::audited::{AtomicPtr, CountedArc, Mutex, OnceLock, Ordering};
use vfscale_sync::poison::unpoisoned;
use vfscale_sync::srcu_slot::SrcuSlot;
use vfscale_sync::Srcu;

/// Most descriptors one process may hold open (`RLIMIT_NOFILE`'s usual
/// soft limit).
pub const MAX_FDS: usize = 1024;

/// Slots of a new table; it doubles when full.
const FIRST_SIZE: usize = 16;

/// Null, or a pointer from `Arc::into_raw` owning one count of its file.
type Slot = Arc<CachePadded<SrcuSlot<OpenFile>>>;
type Table = Box<Vec<Slot>>;

fn new_slot() -> Slot {
    Arc::new(CachePadded::new(SrcuSlot::new()))
}

/// What only changes of the table touch.
#[derive(Default)]
struct Alloc {
    /// Which slots hold a file, one bit each, in place: a heap buffer
    /// would lie wherever the allocator put it, perhaps beside another
    /// process's, and every open and close writes it.
    used: [u64; MAX_FDS / 64],
    /// Tables replaced by larger ones, kept for readers that loaded them.
    retired: Vec<Table>,
}

impl Alloc {
    /// The lowest descriptor that holds no file, if any is left.
    fn lowest_free(&self) -> Option<usize> {
        let (word, bits) = self.used.iter().enumerate().find(|(_, bits)| **bits != u64::MAX)?;
        Some(word * 64 + bits.trailing_ones() as usize)
    }

    fn is_used(&self, index: usize) -> bool {
        self.used.get(index / 64).is_some_and(|bits| bits & (1 << (index % 64)) != 0)
    }

    fn set_used(&mut self, index: usize, used: bool) {
        let bit = 1 << (index % 64);
        if used {
            self.used[index / 64] |= bit;
        } else {
            self.used[index / 64] &= !bit;
        }
    }
}

/// The descriptor table (see the module doc): empty until the first
/// install makes its [`Descriptors`].
#[derive(Default)]
pub(crate) struct FdTable(OnceLock<Descriptors>);

impl FdTable {
    pub fn new() -> FdTable {
        FdTable::default()
    }

    /// Runs `f` on the file `fd` names; EBADF if there is none. See
    /// [`Descriptors::with`].
    pub fn with<R>(&self, fd: i32, f: impl FnOnce(&OpenFile) -> R) -> VfsResult<R> {
        self.0.get().ok_or(Errno::EBADF)?.with(fd, f)
    }

    /// The file `fd` names, counted (see [`CountedArc`]); EBADF if none.
    pub fn get(&self, fd: i32) -> VfsResult<CountedArc<OpenFile>> {
        // A closure, not the function itself: through a function value
        // `track_caller` sees no caller, and the audit would place the
        // count in core instead of here.
        #[allow(clippy::redundant_closure)]
        self.0.get().ok_or(Errno::EBADF)?.in_section(fd, |file| CountedArc::new(file))
    }

    /// Installs `file` at the lowest free descriptor; EMFILE when all
    /// [`MAX_FDS`] are taken.
    pub fn install(&self, file: Arc<OpenFile>) -> VfsResult<i32> {
        self.0.get_or_init(Descriptors::new).install(file)
    }

    /// Empties descriptor `fd` and returns its file; EBADF if none.
    pub fn remove(&self, fd: i32) -> VfsResult<Arc<OpenFile>> {
        self.0.get().ok_or(Errno::EBADF)?.remove(fd)
    }

    /// Marks `inode` (its address) as a file the process may hold POSIX
    /// locks on: before it asks for one (see [`PosixMarks`]).
    pub fn mark_posix(&self, inode: usize) {
        self.0.get_or_init(Descriptors::new).posix_marks.mark(inode);
    }

    /// Whether the process may hold POSIX locks on `inode`: a close of a
    /// file it never marked has none of its locks to drop.
    pub fn may_hold_posix(&self, inode: usize) -> bool {
        self.0.get().map_or(true, |d| d.posix_marks.may_hold(inode))
    }

    /// Empties every descriptor (exit), returning the files.
    pub fn take_all(&mut self) -> Vec<Arc<OpenFile>> {
        self.0.get_mut().map(Descriptors::take_all).unwrap_or_default()
    }
}

/// A table with slots (see the module doc).
struct Descriptors {
    /// The current table, from `Box::into_raw`; never null.
    slots: AtomicPtr<Vec<Slot>>,
    /// Look-ups are its read-side sections; `remove` synchronizes.
    lookups: Srcu,
    /// On a line of its own: every open and close writes it, while every
    /// look-up reads `slots` and the process's working directory.
    alloc: CachePadded<Mutex<Alloc>>,
    /// The files the process may hold POSIX locks on: read by its closes,
    /// written by its first lock of each file.
    posix_marks: PosixMarks,
}

impl Descriptors {
    fn new() -> Descriptors {
        let first: Table = Box::new((0..FIRST_SIZE).map(|_| new_slot()).collect());
        Descriptors {
            slots: AtomicPtr::new(Box::into_raw(first)),
            lookups: Srcu::new(),
            alloc: CachePadded::new(Mutex::new(Alloc::default())),
            posix_marks: PosixMarks::default(),
        }
    }

    fn slots(&self) -> &[Slot] {
        // SAFETY: the pointer is never null and every table it ever held
        // lives until the table itself drops (module doc).
        unsafe { &*self.slots.load(Ordering::Acquire) }
    }

    /// Runs `f` on the file `fd` names; EBADF if there is none. A file of
    /// this VFS's own memory is borrowed inside a read-side section, with
    /// no count taken, so `f` must not keep it nor wait long (a close of
    /// the descriptor, or of any other that a look-up borrowed, waits for
    /// the section). A file a
    /// filesystem serves (a kernfs attribute's `show`/`store` may block on
    /// anything) is counted instead, and `f` runs outside the section.
    fn with<R>(&self, fd: i32, f: impl FnOnce(&OpenFile) -> R) -> VfsResult<R> {
        let mut f = Some(f);
        let borrowed = self.in_section(fd, |file| match file.is_generated() {
            false => Ok(f.take().expect("called once")(file)),
            true => Err(CountedArc::new(file)),
        })?;
        Ok(borrowed.unwrap_or_else(|counted| f.take().expect("not called in the section")(&counted)))
    }

    /// Runs `f` on the file `fd` names inside a read-side section.
    fn in_section<R>(&self, fd: i32, f: impl FnOnce(&Arc<OpenFile>) -> R) -> VfsResult<R> {
        let index = usize::try_from(fd).map_err(|_| Errno::EBADF)?;
        let section = self.lookups.read_lock();
        let slot = self.slots().get(index).ok_or(Errno::EBADF)?;
        let file = slot.borrow(&section);
        if file.is_null() {
            return Err(Errno::EBADF);
        }
        // SAFETY: a non-null slot owns a count of the file, and `remove`
        // synchronizes with this section (the file is borrowed) before it
        // gives that count up, so the file lives until the section ends;
        // `ManuallyDrop` keeps this borrowed `Arc` from dropping a count it
        // does not own.
        let file = ManuallyDrop::new(unsafe { Arc::from_raw(file) });
        Ok(f(&file))
    }

    fn install(&self, file: Arc<OpenFile>) -> VfsResult<i32> {
        let mut alloc = unpoisoned(self.alloc.lock());
        let index = alloc.lowest_free().ok_or(Errno::EMFILE)?;
        let slots = self.slots();
        if index >= slots.len() {
            let mut grown = slots.to_vec();
            grown.resize_with((slots.len() * 2).min(MAX_FDS), new_slot);
            let old = self.slots.swap(Box::into_raw(Box::new(grown)), Ordering::AcqRel);
            // SAFETY: `old` came from `Box::into_raw` and is no longer
            // published; kept (not freed) for readers that loaded it.
            alloc.retired.push(unsafe { Box::from_raw(old) });
        }
        self.slots()[index].publish(Arc::into_raw(file).cast_mut());
        alloc.set_used(index, true);
        Ok(index as i32)
    }

    fn remove(&self, fd: i32) -> VfsResult<Arc<OpenFile>> {
        let index = usize::try_from(fd).map_err(|_| Errno::EBADF)?;
        let mut alloc = unpoisoned(self.alloc.lock());
        if !alloc.is_used(index) {
            return Err(Errno::EBADF);
        }
        let taken = self.slots()[index].take().expect("a used slot holds a file");
        alloc.set_used(index, false);
        drop(alloc);
        // Every look-up that may have borrowed the file has left after this
        // (those of the CPUs it was borrowed on: the others' counts are not
        // read).
        if !taken.readers.is_empty() {
            self.lookups.synchronize_cpus(taken.readers);
        }
        // SAFETY: the slot held the file, and only holders of `alloc`
        // change it; the pointer's count is ours now (module doc).
        Ok(unsafe { Arc::from_raw(taken.value) })
    }

    fn take_all(&mut self) -> Vec<Arc<OpenFile>> {
        let files = self.slots().iter().filter_map(take).collect();
        unpoisoned(self.alloc.get_mut()).used = Default::default();
        files
    }
}

/// The file a slot holds, taken out; for callers with the table to
/// themselves (no look-up can be running).
fn take(slot: &Slot) -> Option<Arc<OpenFile>> {
    // SAFETY: a non-null slot owns a count of its file (module doc), which
    // the slot gives up here; with no look-up running, nobody borrows it.
    slot.take().map(|taken| unsafe { Arc::from_raw(taken.value) })
}

impl Drop for Descriptors {
    fn drop(&mut self) {
        drop(self.take_all());
        // SAFETY: from `Box::into_raw`, and `&mut self`: no reader is left.
        drop(unsafe { Box::from_raw(*self.slots.get_mut()) });
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Credentials, OpenFlags, Vfs};
    use vfscale_sync::audited::AtomicBool;
    use vfscale_sync::test_support::wait_until;

    /// A table allocates nothing until its first install; before that,
    /// every look-up and close is EBADF.
    #[test]
    fn a_table_is_made_at_its_first_install() {
        let vfs = Vfs::default();
        let file = vfs.process(Credentials::root()).open_description("/f", OpenFlags::CREAT | OpenFlags::RDWR, 0o644);
        let mut table = FdTable::new();
        assert!(table.0.get().is_none());
        assert_eq!(table.get(0).err(), Some(Errno::EBADF));
        assert_eq!(table.with(0, |_| ()).err(), Some(Errno::EBADF));
        assert_eq!(table.remove(0).err(), Some(Errno::EBADF));
        assert!(table.take_all().is_empty());
        assert!(table.0.get().is_none(), "look-ups made nothing");
        assert_eq!(table.install(file.unwrap()), Ok(0));
        assert!(table.0.get().is_some());
        assert!(table.remove(0).is_ok());
        assert_eq!(table.get(0).err(), Some(Errno::EBADF));
    }

    /// Descriptors are the lowest free, up to [`MAX_FDS`] (then EMFILE),
    /// and a closed one is handed out again, lowest first.
    #[test]
    fn descriptors_are_the_lowest_free_up_to_the_limit() {
        let vfs = Vfs::default();
        let file = vfs.process(Credentials::root()).open_description("/f", OpenFlags::CREAT | OpenFlags::RDWR, 0o644);
        let (file, table) = (file.unwrap(), FdTable::new());
        for fd in 0..MAX_FDS {
            assert_eq!(table.install(Arc::clone(&file)), Ok(fd as i32));
        }
        assert_eq!(table.install(Arc::clone(&file)), Err(Errno::EMFILE));
        for fd in [700, 64, 3] {
            assert!(table.remove(fd).is_ok());
        }
        assert_eq!(table.remove(64).err(), Some(Errno::EBADF), "closed already");
        assert_eq!(table.remove(MAX_FDS as i32).err(), Some(Errno::EBADF));
        assert_eq!(table.remove(-1).err(), Some(Errno::EBADF));
        for fd in [3, 64, 700] {
            assert_eq!(table.install(Arc::clone(&file)), Ok(fd));
        }
        assert_eq!(table.install(file), Err(Errno::EMFILE));
    }

    /// Which descriptors are in use lies on the lines of the lock that
    /// guards it, which only the process's opens and closes write: not in
    /// a heap buffer beside what another thread allocated (a size-class
    /// allocator puts two processes' small buffers side by side).
    #[test]
    fn the_descriptor_bitmap_lies_on_its_locks_own_lines() {
        let vfs = Vfs::default();
        let file = vfs.process(Credentials::root()).open_description("/f", OpenFlags::CREAT | OpenFlags::RDWR, 0o644);
        let table = FdTable::new();
        table.install(file.unwrap()).unwrap();
        let descriptors = table.0.get().unwrap();
        let lines = std::ptr::addr_of!(descriptors.alloc) as usize;
        let end = lines + std::mem::size_of_val(&descriptors.alloc);
        let alloc = unpoisoned(descriptors.alloc.lock());
        let bitmap = alloc.used.as_ptr() as usize;
        assert!(bitmap >= lines && bitmap + std::mem::size_of_val(&alloc.used[..]) <= end, "outside the lock's lines");
    }

    /// A filesystem with `/f` holding `contents`.
    fn with_file(contents: &[u8]) -> Vfs {
        let vfs = Vfs::default();
        let setup = vfs.process(Credentials::root());
        let fd = setup.open("/f", OpenFlags::CREAT | OpenFlags::WRONLY, 0o644).unwrap();
        setup.write(fd, contents).unwrap();
        setup.close(fd).unwrap();
        vfs
    }

    /// Readers of one descriptor never miss it while another thread grows
    /// the table and closes other descriptors; descriptors are reused
    /// lowest first.
    #[test]
    fn lookups_race_growth_and_closes() {
        let vfs = with_file(b"kept");
        for _ in 0..50 {
            let p = vfs.process(Credentials::root());
            let kept = p.open("/f", OpenFlags::RDONLY, 0).unwrap();
            let done = AtomicBool::new(false);
            std::thread::scope(|s| {
                s.spawn(|| {
                    let mut buf = [0u8; 4];
                    while !done.load(Ordering::Relaxed) {
                        assert_eq!(p.pread(kept, &mut buf, 0), Ok(4));
                        assert_eq!(&buf, b"kept");
                    }
                });
                let fds: Vec<i32> = (0..3 * FIRST_SIZE).map(|_| p.open("/f", OpenFlags::RDONLY, 0).unwrap()).collect();
                assert_eq!(fds, (1..=3 * FIRST_SIZE as i32).collect::<Vec<_>>());
                for &fd in fds.iter().step_by(2) {
                    p.close(fd).unwrap();
                }
                assert_eq!(p.open("/f", OpenFlags::RDONLY, 0), Ok(1), "the lowest free descriptor");
                done.store(true, Ordering::Relaxed);
            });
        }
    }

    /// A close while other threads of the process read through the same
    /// descriptor waits for their look-ups and then drops the last count
    /// itself: the description's flock is gone when close returns, and
    /// the readers see EBADF from then on.
    #[test]
    fn close_under_borrowed_reads_releases_at_once() {
        use crate::locks::{LOCK_EX, LOCK_NB};
        let vfs = Vfs::default();
        let other = vfs.process(Credentials::root());
        let watch = other.open("/f", OpenFlags::CREAT | OpenFlags::RDWR, 0o644).unwrap();
        other.write(watch, b"data").unwrap();
        for _ in 0..50 {
            let p = vfs.process(Credentials::root());
            let fd = p.open("/f", OpenFlags::RDONLY, 0).unwrap();
            p.flock(fd, LOCK_EX).unwrap();
            let reads = AtomicBool::new(false);
            std::thread::scope(|s| {
                for _ in 0..2 {
                    s.spawn(|| {
                        let mut buf = [0u8; 4];
                        loop {
                            match p.pread(fd, &mut buf, 0) {
                                Ok(n) => assert_eq!(&buf[..n], b"data"),
                                Err(e) => return assert_eq!(e, Errno::EBADF),
                            }
                            reads.store(true, Ordering::Relaxed);
                        }
                    });
                }
                wait_until("a first read", || reads.load(Ordering::Relaxed));
                p.close(fd).unwrap();
                assert_eq!(other.flock(watch, LOCK_EX | LOCK_NB), Ok(()), "released by the close itself");
                other.flock(watch, crate::locks::LOCK_UN).unwrap();
            });
        }
    }

    /// Closes of descriptors no look-up used skip the grace period, and
    /// racing look-ups of the same descriptor number, which may be the
    /// first to borrow each new file, neither lose a close's release nor
    /// read a released file: each new open's exclusive flock is granted,
    /// so every earlier close released its flock before returning.
    #[test]
    fn first_borrows_race_closes_that_skip_the_grace_period() {
        use crate::locks::{LOCK_EX, LOCK_NB};
        let vfs = with_file(b"data");
        let p = vfs.process(Credentials::root());
        let done = AtomicBool::new(false);
        std::thread::scope(|s| {
            s.spawn(|| {
                let mut buf = [0u8; 4];
                while !done.load(Ordering::Relaxed) {
                    match p.pread(0, &mut buf, 0) {
                        Ok(n) => assert_eq!(&buf[..n], b"data"),
                        Err(e) => assert_eq!(e, Errno::EBADF),
                    }
                }
            });
            for i in 0..2000 {
                let fd = p.open("/f", OpenFlags::RDONLY, 0).unwrap();
                assert_eq!(fd, 0);
                // Every other file is borrowed by its own flock; the rest
                // only by the reader, if it got there first.
                if i % 2 == 0 {
                    assert_eq!(p.flock(fd, LOCK_EX | LOCK_NB), Ok(()), "the last close released its flock");
                }
                p.close(fd).unwrap();
            }
            done.store(true, Ordering::Relaxed);
        });
    }

    #[test]
    fn bad_descriptors_are_ebadf() {
        let table = FdTable::new();
        for fd in [-1, 0, 5, 100_000, i32::MAX] {
            assert_eq!(table.get(fd).err(), Some(Errno::EBADF));
            assert_eq!(table.remove(fd).err(), Some(Errno::EBADF));
        }
    }
}
