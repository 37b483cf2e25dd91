//! The storage of an inode's extended attributes: one name-to-value map
//! under one lock, and the inode space each entry is charged.
//!
//! Invariant: the map changes only under its lock, so a reader of it sees
//! every attribute whole. The calls and their checks are the `xattr`
//! module's.
//!
//! May import nothing of the crate.

use std::collections::BTreeMap;
use std::fmt;
use vfscale_sync::audited::Mutex;
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

/// An inode's extended attributes.
#[derive(Default)]
pub(crate) struct Xattrs {
    map: Mutex<Map>,
}

impl fmt::Debug for Xattrs {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Xattrs").field("count", &self.lock().len()).finish()
    }
}

impl Xattrs {
    /// The map, locked.
    pub fn lock(&self) -> vfscale_sync::audited::MutexGuard<'_, Map> {
        unpoisoned(self.map.lock())
    }

    /// The inode space all of them take (given back when the inode goes).
    pub fn space(&self) -> u64 {
        self.lock().iter().map(|(name, value)| space(name, value.len())).sum()
    }
}
