//! A filesystem's capacity: tmpfs's `size=` and `nr_inodes=` limits
//! ([`crate::VfsConfig::size_limit`], [`crate::VfsConfig::inode_limit`]).
//!
//! Pages are charged as file data is allocated (a write into a hole,
//! `fallocate`) and given back when freed (truncate, hole punch, the last
//! reference to an unlinked file going). Inodes and extended attributes
//! share one "inode space", as in shmem: each inode, and each hard link
//! beyond an inode's first, takes [`BOGO_INODE_SIZE`] bytes of
//! `inode_limit * BOGO_INODE_SIZE`, and each extended attribute what it
//! stores. Past a limit, the allocation fails with ENOSPC and nothing is
//! charged.
//!
//! Invariant: `used_pages` (or, without a size limit, the per-CPU
//! `unlimited_pages`) counts the pages of every live regular file of
//! the filesystem; `free_ispace` is the inode space not taken by live
//! inodes and their extended attributes. A limit of 0 means none, and an
//! unlimited inode space is not counted at all.
//!
//! May import `errno` and `pages`.

use crate::errno::{Errno, VfsResult};
use crate::pages::{PageBudget, PAGE_SIZE};
use vfscale_sync::audited::{AtomicU64, Ordering};
use vfscale_sync::PercpuCounter;

/// What one inode takes from the inode space (shmem's `BOGO_INODE_SIZE`).
pub const BOGO_INODE_SIZE: u64 = 1024;

/// The capacity and what is used of it.
#[derive(Debug)]
pub(crate) struct Space {
    /// Most pages, 0 for no limit.
    max_pages: u64,
    used_pages: AtomicU64,
    /// The count without a limit: nothing needs it exact while it
    /// changes, so writers of different files share no counter (Linux
    /// keeps `used_blocks` in a `percpu_counter` too).
    unlimited_pages: PercpuCounter,
    /// Most inodes, 0 for no limit (then `free_ispace` is not kept).
    max_inodes: u64,
    free_ispace: AtomicU64,
}

/// What `statfs` reports of the capacity.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Usage {
    pub max_pages: u64,
    pub used_pages: u64,
    pub max_inodes: u64,
    pub free_inodes: u64,
}

impl Space {
    /// A capacity of `size` bytes (rounded up to pages) and `inodes`
    /// inodes; 0 means no limit.
    pub fn new(size: u64, inodes: u64) -> Space {
        Space {
            max_pages: size.div_ceil(PAGE_SIZE),
            used_pages: AtomicU64::new(0),
            unlimited_pages: PercpuCounter::new(),
            max_inodes: inodes,
            free_ispace: AtomicU64::new(inodes.saturating_mul(BOGO_INODE_SIZE)),
        }
    }

    /// Takes `bytes` of inode space (ENOSPC if fewer are left).
    pub fn take_ispace(&self, bytes: u64) -> VfsResult<()> {
        if self.max_inodes == 0 {
            return Ok(());
        }
        self.free_ispace
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |free| free.checked_sub(bytes))
            .map(drop)
            .map_err(|_| Errno::ENOSPC)
    }

    /// Gives `bytes` of inode space back.
    pub fn give_ispace(&self, bytes: u64) {
        if self.max_inodes != 0 {
            self.free_ispace.fetch_add(bytes, Ordering::Relaxed);
        }
    }

    /// Whether there is an inode limit (otherwise the inode space is not
    /// counted).
    pub fn limits_inodes(&self) -> bool {
        self.max_inodes != 0
    }

    /// Reserves one inode (ENOSPC past `nr_inodes`).
    pub fn reserve_inode(&self) -> VfsResult<()> {
        self.take_ispace(BOGO_INODE_SIZE)
    }

    /// The limits and use, for `statfs`.
    pub fn usage(&self) -> Usage {
        Usage {
            max_pages: self.max_pages,
            used_pages: if self.max_pages == 0 {
                u64::try_from(self.unlimited_pages.sum()).unwrap_or(0)
            } else {
                self.used_pages.load(Ordering::Relaxed)
            },
            max_inodes: self.max_inodes,
            free_inodes: self.free_ispace.load(Ordering::Relaxed) / BOGO_INODE_SIZE,
        }
    }
}

impl PageBudget for Space {
    fn charge(&self) -> bool {
        if self.max_pages == 0 {
            self.unlimited_pages.add(1);
            return true;
        }
        self.used_pages
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |used| (used < self.max_pages).then_some(used + 1))
            .is_ok()
    }

    fn uncharge(&self, pages: u64) {
        if self.max_pages == 0 {
            self.unlimited_pages.add(-(pages as isize));
        } else {
            self.used_pages.fetch_sub(pages, Ordering::Relaxed);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pages_stop_at_the_limit_and_come_back() {
        let space = Space::new(3 * PAGE_SIZE - 1, 0);
        assert!(space.charge() && space.charge() && space.charge());
        assert!(!space.charge());
        space.uncharge(2);
        assert!(space.charge());
        assert_eq!(space.usage().used_pages, 2);
        let unlimited = Space::new(0, 0);
        assert!((0..10).all(|_| unlimited.charge()));
        assert_eq!(unlimited.usage().used_pages, 10);
    }

    #[test]
    fn inodes_and_attributes_share_the_inode_space() {
        let space = Space::new(0, 2);
        space.reserve_inode().unwrap();
        space.take_ispace(100).unwrap();
        assert_eq!(space.usage().free_inodes, 0);
        assert_eq!(space.reserve_inode(), Err(Errno::ENOSPC));
        space.give_ispace(100);
        space.reserve_inode().unwrap();
        assert_eq!(space.take_ispace(1), Err(Errno::ENOSPC));
        let unlimited = Space::new(0, 0);
        assert!((0..10).all(|_| unlimited.reserve_inode().is_ok()));
    }
}
