//! Guard padding: a line of bytes at each end of an object that two CPUs
//! may use, so no neighbour on the heap shares a line with its fields.
//!
//! Invariant: a [`LinePad`] is never read or written; with one as the first
//! and one as the last field of a `#[repr(C)]` struct, every line holding a
//! field of the struct holds nothing outside it (an `Arc`'s counts before
//! it included). This is what `____cacheline_aligned` buys the kernel's
//! slab objects, without an aligned allocation: glibc serves those through
//! `memalign`, which cost the open path 560 instructions per open
//! (callgrind, `bench walk`), where the pads cost 128 bytes.

use std::fmt;
use std::mem::MaybeUninit;

/// One cache line of padding (see the module doc).
#[derive(Clone, Copy)]
pub struct LinePad {
    _bytes: MaybeUninit<[u8; crate::audit::LINE_SIZE]>,
}

impl LinePad {
    /// Padding; its bytes are left uninitialized, since nothing reads them.
    pub const fn new() -> LinePad {
        LinePad { _bytes: MaybeUninit::uninit() }
    }
}

impl Default for LinePad {
    fn default() -> Self {
        LinePad::new()
    }
}

impl fmt::Debug for LinePad {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("LinePad")
    }
}
