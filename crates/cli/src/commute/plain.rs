//! The vfscale side on the plain build, the one `bench` and `reproduce`
//! measure: the timing runs here.

use vfscale as vfs;

// The same file as the other build's: one source, two crates (as
// crates/vfs-audit builds crates/vfs's).
#[allow(clippy::duplicate_mod)]
#[path = "vfs_side.rs"]
mod side;

pub use side::{release_barrier, world};
