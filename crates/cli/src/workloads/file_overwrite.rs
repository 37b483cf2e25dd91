//! `file-overwrite`: every thread overwrites its own 4 KiB page of ONE
//! shared file, as FxMark's DWOM does (Min et al., USENIX ATC 2016, which
//! found it scaling on none of ext4, XFS, btrfs, F2FS or tmpfs: each takes
//! the inode's lock for every write). The writes commute; the file is
//! shared. Each thread writes through a description of its own, in a
//! process of its own.

use super::{Subject, Workload};
use vfscale::config::FileWrites;
use vfscale::{Credentials, OpenFlags, Process, Vfs, VfsConfig};

pub(super) const WORKLOAD: Workload = Workload {
    name: "file-overwrite",
    about: "every thread overwrites its own 4 KiB page of one shared file (op = one pwrite of 4 KiB)",
    variants: VARIANTS,
    default_iterations: |_| 100_000,
    takes_hold: false,
    build: |variant, _| Box::new(SharedFile::new(variant)),
};

/// Writes in place, locking only their pages; every write under the
/// file's writer lock (Linux's `i_rwsem`).
const VARIANTS: &[&str] = &["in-place", "locked"];

/// The shared file.
const PATH: &str = "/shared";
const PAGE: usize = 4096;

struct SharedFile {
    admin: Process,
}

impl SharedFile {
    fn new(variant: &str) -> SharedFile {
        let file_writes = match variant {
            "in-place" => FileWrites::InPlace,
            "locked" => FileWrites::Locked,
            other => unreachable!("variant {other} validated by the caller"),
        };
        let vfs = Vfs::new(VfsConfig { file_writes, ..VfsConfig::default() });
        let admin = vfs.process(Credentials::root());
        let fd = admin.open(PATH, OpenFlags::CREAT | OpenFlags::WRONLY, 0o644).expect("making the shared file");
        admin.close(fd).expect("close");
        SharedFile { admin }
    }
}

impl Subject for SharedFile {
    /// Every thread's page written once, untimed: the run's writes
    /// overwrite data, as DWOM's do.
    fn prepare_run(&self, threads: usize) {
        let fd = self.admin.open(PATH, OpenFlags::WRONLY, 0).expect("opening the shared file");
        let size = self.admin.fstat(fd).expect("fstat").size as usize;
        if size < threads * PAGE {
            let grown = self.admin.pwrite(fd, &vec![0; threads * PAGE - size], size as i64);
            assert_eq!(grown, Ok(threads * PAGE - size), "filling the shared file");
        }
        self.admin.close(fd).expect("close");
    }

    fn run_thread(&self, thread: usize, iterations: u64) {
        let process = self.admin.vfs().process(Credentials::root());
        let fd = process.open(PATH, OpenFlags::WRONLY, 0).expect("opening the shared file");
        let page = [thread as u8; PAGE];
        let at = (thread * PAGE) as i64;
        for _ in 0..iterations {
            assert_eq!(process.pwrite(fd, &page, at), Ok(PAGE));
        }
        process.close(fd).expect("close");
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::harness::{run_cell, RunPlan};

    /// Each thread's page holds what it wrote; the file holds a page per
    /// thread of the largest run.
    #[test]
    fn each_thread_overwrites_its_own_page() {
        for variant in VARIANTS {
            let subject = SharedFile::new(variant);
            run_cell(&subject, 3, RunPlan::new(1, 20));
            assert_eq!(subject.admin.stat(PATH).unwrap().size, 3 * PAGE as u64, "{variant}");
            let fd = subject.admin.open(PATH, OpenFlags::RDONLY, 0).unwrap();
            for thread in 0..3 {
                let mut page = [0xAA; PAGE];
                assert_eq!(subject.admin.pread(fd, &mut page, (thread * PAGE) as i64), Ok(PAGE));
                assert!(page.iter().all(|&b| b == thread as u8), "{variant}: page {thread}");
            }
        }
    }
}
