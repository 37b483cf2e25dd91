//! Seed 002 on the host: `prim-mprotect`, an mmap_lock storm on one address
//! space, the shape of xfs_repair's threads. Even-numbered threads flip their
//! own page of one shared mapping to read-only and back (two `mprotect`
//! calls, each splitting or merging the VMA under mmap_lock for write);
//! odd-numbered threads drop their page and fault it back in (`madvise`
//! plus a write fault, under mmap_lock for read). One thread alone only
//! flips. Op = one flip pair, or one drop and re-fault.

use super::{Build, Built, HostWorkload};
use crate::workloads::Subject;
use std::io;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;
use vfscale_sync::poison::unpoisoned;

pub(super) const STORM: HostWorkload = HostWorkload {
    name: "prim-mprotect",
    about: "even threads mprotect their page of one mapping RO and back, odd threads re-fault theirs (mmap_lock storm)",
    default_iterations: 5_000,
    build: Build::Fixed(build),
};

fn build() -> Result<Built, String> {
    Ok(Built { subject: Box::new(StormSubject::default()), note: None })
}

/// An anonymous private mapping of whole pages, unmapped on drop.
#[derive(Debug)]
struct Mapping {
    base: *mut libc::c_void,
    len: usize,
}

// SAFETY: the mapping is plain memory; threads touch disjoint pages of it.
unsafe impl Send for Mapping {}

impl Mapping {
    fn new(len: usize) -> io::Result<Mapping> {
        // SAFETY: an anonymous mapping at a kernel-chosen address aliases nothing.
        let base = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                -1,
                0,
            )
        };
        if base == libc::MAP_FAILED {
            return Err(io::Error::last_os_error());
        }
        Ok(Mapping { base, len })
    }
}

impl Drop for Mapping {
    fn drop(&mut self) {
        // SAFETY: `base..base+len` is our mapping and no thread uses it now
        // (it is only replaced between runs).
        unsafe { libc::munmap(self.base, self.len) };
    }
}

#[derive(Debug, Default)]
struct StormSubject {
    /// The current run's mapping: one page per thread.
    mapping: Mutex<Option<Mapping>>,
    /// Its base address, read by the threads of the run.
    base: AtomicUsize,
}

fn page_size() -> usize {
    // SAFETY: sysconf has no memory effects.
    unsafe { libc::sysconf(libc::_SC_PAGESIZE) as usize }
}

impl Subject for StormSubject {
    fn prepare_run(&self, threads: usize) {
        let mapping = Mapping::new(threads * page_size()).unwrap_or_else(|e| panic!("mmap: {e}"));
        self.base.store(mapping.base as usize, Ordering::Release);
        *unpoisoned(self.mapping.lock()) = Some(mapping);
    }

    fn run_thread(&self, thread: usize, iterations: u64) {
        let size = page_size();
        let page = (self.base.load(Ordering::Acquire) + thread * size) as *mut libc::c_void;
        for i in 0..iterations {
            if thread % 2 == 0 {
                for prot in [libc::PROT_READ, libc::PROT_READ | libc::PROT_WRITE] {
                    // SAFETY: `page` is this thread's page of the live mapping.
                    if unsafe { libc::mprotect(page, size, prot) } != 0 {
                        panic!("mprotect: {}", io::Error::last_os_error());
                    }
                }
            } else {
                // SAFETY: `page` is this thread's own page of the live
                // mapping, writable (only even threads flip protections, and
                // only their own pages); DONTNEED on anonymous memory just
                // zero-fills it on the next touch.
                unsafe {
                    if libc::madvise(page, size, libc::MADV_DONTNEED) != 0 {
                        panic!("madvise: {}", io::Error::last_os_error());
                    }
                    page.cast::<u8>().write_volatile(i as u8);
                }
            }
        }
    }
}
