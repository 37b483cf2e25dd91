//! The vfscale side on the audited build (`vfscale-audit`: the same
//! sources with every atomic and lock reporting to the cache-line audit):
//! the checker runs here.

use vfscale_audit as vfs;

// The same file as the other build's: one source, two crates (as
// crates/vfs-audit builds crates/vfs's).
#[allow(clippy::duplicate_mod)]
#[path = "vfs_side.rs"]
mod side;

pub use side::{release_barrier, world};
