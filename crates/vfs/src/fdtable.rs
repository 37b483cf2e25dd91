//! A process's file descriptor table (Linux `files_struct`), read without
//! a shared write: a look-up of one descriptor touches only that
//! descriptor's own line and its file's count, so threads using different
//! descriptors of one process do not conflict (kernel-notes §7).
//!
//! Invariant: the table is an array of slots, each slot on its own cache
//! line with its own spinlock around the file it holds. A table is never
//! freed before the process: growing publishes a larger copy (sharing the
//! slots by `Arc`, so no file moves) and keeps the old one, so a reader
//! needs no lock and no epoch pin to follow the table pointer, and one that
//! loaded an old table still finds every descriptor in it (at most six
//! tables, 16 to 1024 slots, under twice the final size in all).
//! Allocation (lowest free first, as POSIX requires) and growth are
//! serialized by `alloc`, which also keeps which slots are in use, so
//! installing never reads the slots readers lock.

use crate::errno::{Errno, VfsResult};
use crate::file::OpenFile;
use crossbeam_utils::CachePadded;
use std::sync::Arc;
use vfscale_sync::audited::{AtomicPtr, CountedArc, Mutex, Ordering};
use vfscale_sync::spin::{SpinLock, TasLock};

/// Most descriptors one process may hold open (`RLIMIT_NOFILE`'s usual
/// soft limit).
pub const MAX_FDS: usize = 1024;

/// Slots of a new table; it doubles when full.
const FIRST_SIZE: usize = 16;

type Slot = Arc<CachePadded<SpinLock<TasLock, Option<Arc<OpenFile>>>>>;
type Table = Box<Vec<Slot>>;

fn new_slot() -> Slot {
    Arc::new(CachePadded::new(SpinLock::new(None)))
}

/// What only changes of the table touch.
struct Alloc {
    /// Which slots hold a file.
    used: Vec<bool>,
    /// Tables replaced by larger ones, kept for readers that loaded them.
    retired: Vec<Table>,
}

/// The descriptor table (see the module doc).
pub(crate) struct FdTable {
    /// The current table, from `Box::into_raw`; never null.
    slots: AtomicPtr<Vec<Slot>>,
    /// On a line of its own: every open and close writes it, while every
    /// look-up reads `slots` and the process's working directory.
    alloc: CachePadded<Mutex<Alloc>>,
}

impl FdTable {
    pub fn new() -> FdTable {
        let first: Table = Box::new((0..FIRST_SIZE).map(|_| new_slot()).collect());
        FdTable {
            slots: AtomicPtr::new(Box::into_raw(first)),
            alloc: CachePadded::new(Mutex::new(Alloc { used: Vec::new(), retired: Vec::new() })),
        }
    }

    fn slots(&self) -> &[Slot] {
        // SAFETY: the pointer is never null and every table it ever held
        // lives until the table itself drops (module doc).
        unsafe { &*self.slots.load(Ordering::Acquire) }
    }

    /// The file `fd` names, counted (see [`CountedArc`]); EBADF if none.
    pub fn get(&self, fd: i32) -> VfsResult<CountedArc<OpenFile>> {
        let index = usize::try_from(fd).map_err(|_| Errno::EBADF)?;
        let slot = self.slots().get(index).ok_or(Errno::EBADF)?;
        let file = slot.lock();
        match file.as_ref() {
            Some(file) => Ok(CountedArc::new(file)),
            None => Err(Errno::EBADF),
        }
    }

    /// Installs `file` at the lowest free descriptor; EMFILE when all
    /// [`MAX_FDS`] are taken.
    pub fn install(&self, file: Arc<OpenFile>) -> VfsResult<i32> {
        let mut alloc = self.alloc.lock().unwrap_or_else(|e| e.into_inner());
        let index = match alloc.used.iter().position(|u| !u) {
            Some(index) => index,
            None if alloc.used.len() < MAX_FDS => alloc.used.len(),
            None => return Err(Errno::EMFILE),
        };
        let slots = self.slots();
        if index >= slots.len() {
            let mut grown = slots.to_vec();
            grown.resize_with((slots.len() * 2).min(MAX_FDS), new_slot);
            let old = self.slots.swap(Box::into_raw(Box::new(grown)), Ordering::AcqRel);
            // SAFETY: `old` came from `Box::into_raw` and is no longer
            // published; kept (not freed) for readers that loaded it.
            alloc.retired.push(unsafe { Box::from_raw(old) });
        }
        *self.slots()[index].lock() = Some(file);
        if index == alloc.used.len() {
            alloc.used.push(true);
        } else {
            alloc.used[index] = true;
        }
        Ok(index as i32)
    }

    /// Empties descriptor `fd` and returns its file; EBADF if none.
    pub fn remove(&self, fd: i32) -> VfsResult<Arc<OpenFile>> {
        let index = usize::try_from(fd).map_err(|_| Errno::EBADF)?;
        let mut alloc = self.alloc.lock().unwrap_or_else(|e| e.into_inner());
        if !alloc.used.get(index).copied().unwrap_or(false) {
            return Err(Errno::EBADF);
        }
        let file = self.slots()[index].lock().take().ok_or(Errno::EBADF)?;
        alloc.used[index] = false;
        Ok(file)
    }

    /// Empties every descriptor (exit), returning the files.
    pub fn take_all(&mut self) -> Vec<Arc<OpenFile>> {
        let files = self.slots().iter().filter_map(|slot| slot.lock().take()).collect();
        self.alloc.get_mut().unwrap_or_else(|e| e.into_inner()).used.clear();
        files
    }
}

impl Drop for FdTable {
    fn drop(&mut self) {
        // SAFETY: from `Box::into_raw`, and `&mut self`: no reader is left.
        drop(unsafe { Box::from_raw(*self.slots.get_mut()) });
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Credentials, OpenFlags, Vfs};
    use vfscale_sync::audited::AtomicBool;

    /// Readers of one descriptor never miss it while another thread grows
    /// the table and closes other descriptors; descriptors are reused
    /// lowest first.
    #[test]
    fn lookups_race_growth_and_closes() {
        let vfs = Vfs::default();
        let setup = vfs.process(Credentials::root());
        let fd = setup.open("/f", OpenFlags::CREAT | OpenFlags::WRONLY, 0o644).unwrap();
        setup.write(fd, b"kept").unwrap();
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

    #[test]
    fn bad_descriptors_are_ebadf() {
        let table = FdTable::new();
        for fd in [-1, 0, 5, 100_000, i32::MAX] {
            assert_eq!(table.get(fd).err(), Some(Errno::EBADF));
            assert_eq!(table.remove(fd).err(), Some(Errno::EBADF));
        }
    }
}
