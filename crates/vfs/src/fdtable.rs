//! A process's file descriptor table (Linux `files_struct`), read without
//! a shared write: a look-up of one descriptor touches only that
//! descriptor's own line and its file's count, so threads using different
//! descriptors of one process do not conflict (kernel-notes §7).
//!
//! Invariant: the table is an epoch-protected array of slots, each slot on
//! its own cache line with its own spinlock around the file it holds; a
//! slot is shared (by `Arc`) between the table and any larger table that
//! replaced it, so growing never moves a file and a reader that loaded the
//! old table still finds the descriptor. Allocation (lowest free first, as
//! POSIX requires) and growth are serialized by `alloc`, which also keeps
//! which slots are in use, so installing never reads the slots readers
//! lock.

use crate::errno::{Errno, VfsResult};
use crate::file::OpenFile;
use crossbeam_epoch::Owned;
use crossbeam_utils::CachePadded;
use std::sync::Arc;
use vfscale_sync::audited::{CountedArc, EpochAtomic, Mutex, Ordering};
use vfscale_sync::spin::{SpinLock, TasLock};

/// Most descriptors one process may hold open (`RLIMIT_NOFILE`'s usual
/// soft limit).
pub const MAX_FDS: usize = 1024;

/// Slots of a new table; it doubles when full.
const FIRST_SIZE: usize = 16;

type Slot = Arc<CachePadded<SpinLock<TasLock, Option<Arc<OpenFile>>>>>;

fn new_slot() -> Slot {
    Arc::new(CachePadded::new(SpinLock::new(None)))
}

/// The descriptor table (see the module doc).
pub(crate) struct FdTable {
    slots: EpochAtomic<Vec<Slot>>,
    /// Which slots hold a file; taken by every change to the table.
    alloc: Mutex<Vec<bool>>,
}

impl FdTable {
    pub fn new() -> FdTable {
        FdTable {
            slots: EpochAtomic::new((0..FIRST_SIZE).map(|_| new_slot()).collect()),
            alloc: Mutex::new(Vec::new()),
        }
    }

    /// The file `fd` names, counted (see [`CountedArc`]); EBADF if none.
    pub fn get(&self, fd: i32) -> VfsResult<CountedArc<OpenFile>> {
        let index = usize::try_from(fd).map_err(|_| Errno::EBADF)?;
        let guard = crossbeam_epoch::pin();
        // SAFETY: the table pointer is never null (set in `new`, replaced
        // only by `install`), and a replaced table is freed through the
        // epoch, after this guard unpins.
        let slots = unsafe { self.slots.load(Ordering::Acquire, &guard).deref() };
        let slot = slots.get(index).ok_or(Errno::EBADF)?;
        let file = slot.lock();
        match file.as_ref() {
            Some(file) => Ok(CountedArc::new(file)),
            None => Err(Errno::EBADF),
        }
    }

    /// Installs `file` at the lowest free descriptor; EMFILE when all
    /// [`MAX_FDS`] are taken.
    pub fn install(&self, file: Arc<OpenFile>) -> VfsResult<i32> {
        let mut used = self.alloc.lock().unwrap_or_else(|e| e.into_inner());
        let index = match used.iter().position(|u| !u) {
            Some(index) => index,
            None if used.len() < MAX_FDS => used.len(),
            None => return Err(Errno::EMFILE),
        };
        let guard = crossbeam_epoch::pin();
        // SAFETY: as in `get`; only this function, under `alloc`, replaces it.
        let slots = unsafe { self.slots.load(Ordering::Acquire, &guard).deref() };
        if index >= slots.len() {
            let mut grown = slots.clone();
            grown.resize_with((slots.len() * 2).min(MAX_FDS), new_slot);
            let old = self.slots.swap(Owned::new(grown), Ordering::AcqRel, &guard);
            // SAFETY: the old table is unreachable now; readers that loaded
            // it hold guards, so it is freed only after they unpin.
            unsafe { guard.defer_destroy(old) };
        }
        // SAFETY: as above.
        let slots = unsafe { self.slots.load(Ordering::Acquire, &guard).deref() };
        *slots[index].lock() = Some(file);
        if index == used.len() {
            used.push(true);
        } else {
            used[index] = true;
        }
        Ok(index as i32)
    }

    /// Empties descriptor `fd` and returns its file; EBADF if none.
    pub fn remove(&self, fd: i32) -> VfsResult<Arc<OpenFile>> {
        let index = usize::try_from(fd).map_err(|_| Errno::EBADF)?;
        let mut used = self.alloc.lock().unwrap_or_else(|e| e.into_inner());
        if !used.get(index).copied().unwrap_or(false) {
            return Err(Errno::EBADF);
        }
        let guard = crossbeam_epoch::pin();
        // SAFETY: as in `get`.
        let slots = unsafe { self.slots.load(Ordering::Acquire, &guard).deref() };
        let file = slots[index].lock().take().ok_or(Errno::EBADF)?;
        used[index] = false;
        Ok(file)
    }

    /// Empties every descriptor (exit), returning the files.
    pub fn take_all(&mut self) -> Vec<Arc<OpenFile>> {
        let guard = crossbeam_epoch::pin();
        // SAFETY: as in `get`.
        let slots = unsafe { self.slots.load(Ordering::Acquire, &guard).deref() };
        let files = slots.iter().filter_map(|slot| slot.lock().take()).collect();
        self.alloc.get_mut().unwrap_or_else(|e| e.into_inner()).clear();
        files
    }
}

impl Drop for FdTable {
    fn drop(&mut self) {
        // SAFETY: `&mut self`: no reader holds the table any more.
        unsafe {
            let slots = std::mem::take(&mut self.slots);
            drop(slots.into_owned());
        }
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
