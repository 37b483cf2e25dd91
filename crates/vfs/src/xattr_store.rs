//! The storage of an inode's extended attributes: a name-to-value map that
//! readers load under the epoch and writers replace whole, under a lock,
//! in a cell of its own that the first change makes, and the inode space
//! each entry is charged.
//!
//! Invariant: a published map never changes. A writer, holding the cell's
//! lock, publishes a changed copy and frees the one it replaced through
//! the epoch; so a reader sees every attribute whole, as of one change,
//! and writes nothing (getxattrs of one file share no written line, and a
//! getxattr reads no line that a write or truncate of the file writes).
//! The calls and their checks are the `xattr` module's.
//!
//! May import nothing of the crate.

use crossbeam_epoch::{Guard, Owned};
use std::collections::BTreeMap;
use std::fmt;
use vfscale_sync::audited::{EpochAtomic, Mutex, OnceLock, Ordering};
use vfscale_sync::poison::unpoisoned;

/// Bytes an attribute takes from the inode space, as shmem's
/// `simple_xattr_space` counts them: the value with a header, and the
/// name with its NUL.
pub(crate) fn space(name: &[u8], value_len: usize) -> u64 {
    const HEADER: usize = 40;
    ((HEADER + value_len).next_power_of_two().max(64) + name.len() + 1) as u64
}

/// Names to values.
pub(crate) type Map = BTreeMap<Box<[u8]>, Box<[u8]>>;

/// An inode's extended attributes: none until the first is set.
#[derive(Default)]
pub(crate) struct Xattrs {
    cell: OnceLock<Box<Cell>>,
}

/// The published map and its writers' lock, on a line of their own.
#[repr(align(64))]
#[derive(Default)]
struct Cell {
    writer: Mutex<()>,
    /// Never null once the cell is made.
    map: EpochAtomic<Map>,
}

impl Drop for Cell {
    fn drop(&mut self) {
        // SAFETY: the inode is going, so no reader holds the map.
        unsafe { drop(self.map.load(Ordering::Relaxed, crossbeam_epoch::unprotected()).into_owned()) };
    }
}

impl fmt::Debug for Xattrs {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Xattrs").field("count", &self.read(&crossbeam_epoch::pin(), Map::len)).finish()
    }
}

impl Xattrs {
    /// `f` of the map as of the last change (empty before the first),
    /// writing nothing.
    pub fn read<R>(&self, guard: &Guard, f: impl FnOnce(&Map) -> R) -> R {
        let Some(cell) = self.cell.get() else { return f(&Map::new()) };
        // SAFETY: a published map is freed through the epoch only after it
        // was replaced, and `guard` is pinned.
        f(unsafe { cell.map.load(Ordering::Acquire, guard).deref() })
    }

    /// Runs `f` on a copy of the map, under the writers' lock, and
    /// publishes the copy if `f` succeeds (readers keep the old one until
    /// then).
    pub fn change<E>(&self, f: impl FnOnce(&mut Map) -> Result<(), E>) -> Result<(), E> {
        let cell = self.cell.get_or_init(|| {
            let cell = Box::<Cell>::default();
            cell.map.store(Owned::new(Map::new()), Ordering::Release);
            cell
        });
        let _writer = unpoisoned(cell.writer.lock());
        let guard = crossbeam_epoch::pin();
        let old = cell.map.load(Ordering::Acquire, &guard);
        // SAFETY: the writers' lock is held, so `old` is the published map
        // and stays so; `guard` is pinned.
        let mut copy = unsafe { old.deref() }.clone();
        f(&mut copy)?;
        cell.map.store(Owned::new(copy), Ordering::Release);
        // SAFETY: `old` is no longer published; readers that loaded it are
        // pinned, and the epoch frees it after them.
        unsafe { guard.defer_destroy(old) };
        Ok(())
    }

    /// The inode space all of them take (given back when the inode goes).
    pub fn space(&self) -> u64 {
        self.read(&crossbeam_epoch::pin(), |map| map.iter().map(|(name, value)| space(name, value.len())).sum())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use vfscale_sync::audited::AtomicBool;

    /// Writers on two threads change one map, each copying it under the
    /// lock, so no change is lost; a reader beside them sees every value
    /// whole, and every name it once saw again (none is ever removed).
    #[test]
    fn concurrent_changes_all_land_and_readers_see_whole_values() {
        const PER_WRITER: usize = 200;
        let xattrs = Xattrs::default();
        let stop = AtomicBool::new(false);
        std::thread::scope(|s| {
            let reader = s.spawn(|| {
                let mut seen = 0;
                while !stop.load(Ordering::Acquire) {
                    let now = xattrs.read(&crossbeam_epoch::pin(), |map| {
                        for (name, value) in map {
                            assert_eq!(**value, *name.repeat(3), "a value seen whole");
                        }
                        map.len()
                    });
                    assert!(now >= seen, "names went from {seen} to {now}");
                    seen = now;
                }
            });
            let writers: Vec<_> = (0..2)
                .map(|w| {
                    let xattrs = &xattrs;
                    s.spawn(move || {
                        for i in 0..PER_WRITER {
                            let name = format!("user.{w}.{i}").into_bytes();
                            let value = name.repeat(3);
                            xattrs
                                .change(|map| -> Result<(), ()> {
                                    map.insert(name.into(), value.into());
                                    Ok(())
                                })
                                .unwrap();
                        }
                    })
                })
                .collect();
            for writer in writers {
                writer.join().unwrap();
            }
            stop.store(true, Ordering::Release);
            reader.join().unwrap();
        });
        assert_eq!(xattrs.read(&crossbeam_epoch::pin(), Map::len), 2 * PER_WRITER);
    }

    /// A change that fails publishes nothing.
    #[test]
    fn a_failed_change_leaves_the_map() {
        let xattrs = Xattrs::default();
        xattrs
            .change(|map| -> Result<(), ()> {
                map.insert(b"user.a".as_slice().into(), b"1".as_slice().into());
                Ok(())
            })
            .unwrap();
        assert_eq!(
            xattrs.change(|map| {
                map.clear();
                Err("refused")
            }),
            Err("refused")
        );
        assert_eq!(xattrs.read(&crossbeam_epoch::pin(), Map::len), 1);
    }
}
