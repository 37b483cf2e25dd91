//! `dir-create` and `dir-unlink`: every thread creates (or unlinks) names
//! of its own in ONE directory, as FxMark's MWCM and MWUM do (Min et al.,
//! USENIX ATC 2016, which found them scaling on none of ext4, XFS, btrfs,
//! F2FS or tmpfs): the names commute, the directory is shared. Each run
//! works in a fresh directory; the files a `dir-unlink` thread removes are
//! made before the run starts, untimed, and a `dir-create` run's files are
//! removed after it.

use super::{Subject, Workload};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;
use vfscale::config::DirLocking;
use vfscale::{Credentials, OpenFlags, Process, Vfs, VfsConfig};

pub(super) const CREATE: Workload = Workload {
    name: "dir-create",
    about: "every thread creates new names of its own in one shared directory (op = open O_CREAT|O_EXCL + close)",
    variants: VARIANTS,
    default_iterations: |_| 20_000,
    takes_hold: false,
    build: |variant, _| build(variant, Op::Create),
};

pub(super) const UNLINK: Workload = Workload {
    name: "dir-unlink",
    about: "every thread unlinks names of its own, made before the run, in one shared directory (op = unlink)",
    variants: VARIANTS,
    default_iterations: |_| 20_000,
    takes_hold: false,
    build: |variant, _| build(variant, Op::Unlink),
};

/// The directory designs: names split by hash with a lock per bucket
/// (sv6's hashed directory), one rwsem per directory (Linux's
/// `i_rwsem`), then one mutex for every directory (kernfs before 5.15).
const VARIANTS: &[&str] = &["split", "rwsem", "global"];

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Op {
    Create,
    Unlink,
}

fn build(variant: &str, op: Op) -> Box<dyn Subject> {
    Box::new(one_dir(variant, op))
}

fn one_dir(variant: &str, op: Op) -> OneDir {
    let dir_locking = match variant {
        "split" => DirLocking::Split,
        "rwsem" => DirLocking::RwSem,
        "global" => DirLocking::GlobalMutex,
        other => unreachable!("variant {other} validated by the caller"),
    };
    let vfs = Vfs::new(VfsConfig { dir_locking, ..VfsConfig::default() });
    let admin = vfs.process(Credentials::root());
    OneDir { admin, op, run: AtomicU64::new(0), paths: Mutex::new(Vec::new()) }
}

struct OneDir {
    admin: Process,
    op: Op,
    /// The run under way: its directory is `/r{run}`.
    run: AtomicU64,
    /// Per thread of the run, the paths it works on, made before the run.
    paths: Mutex<Vec<Vec<String>>>,
}

impl OneDir {
    fn dir(&self) -> String {
        format!("/r{}", self.run.load(Ordering::Relaxed))
    }

    /// Removes the directory of the run before, and what it holds.
    fn clear_last_run(&self) {
        let dir = self.dir();
        let Ok(entries) = self.admin.list_dir(&dir) else { return };
        for entry in entries.iter().filter(|e| e.name != b"." && e.name != b"..") {
            let mut path = format!("{dir}/").into_bytes();
            path.extend_from_slice(&entry.name);
            self.admin.unlink(&path).expect("removing a file of the last run");
        }
        self.admin.rmdir(&dir).expect("removing the last run's directory");
    }
}

impl Subject for OneDir {
    fn prepare_run(&self, threads: usize) {
        self.clear_last_run();
        self.run.fetch_add(1, Ordering::Relaxed);
        self.admin.mkdir(self.dir(), 0o755).expect("making the run's directory");
        *self.paths.lock().expect("paths") = vec![Vec::new(); threads];
    }

    fn prepare_thread(&self, thread: usize, iterations: u64) {
        let dir = self.dir();
        let paths: Vec<String> = (0..iterations).map(|i| format!("{dir}/t{thread}-{i}")).collect();
        if self.op == Op::Unlink {
            let process = self.admin.vfs().process(Credentials::root());
            for path in &paths {
                let fd = process.open(path, OpenFlags::CREAT | OpenFlags::EXCL | OpenFlags::WRONLY, 0o644);
                process.close(fd.expect("making a file to unlink")).expect("close");
            }
        }
        self.paths.lock().expect("paths")[thread] = paths;
    }

    fn run_thread(&self, thread: usize, _iterations: u64) {
        let paths = std::mem::take(&mut self.paths.lock().expect("paths")[thread]);
        let process = self.admin.vfs().process(Credentials::root());
        match self.op {
            Op::Create => {
                for path in &paths {
                    let fd = process.open(path, OpenFlags::CREAT | OpenFlags::EXCL | OpenFlags::WRONLY, 0o644);
                    process.close(fd.expect("create")).expect("close");
                }
            }
            Op::Unlink => {
                for path in &paths {
                    process.unlink(path).expect("unlink");
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::harness::{run_cell, RunPlan};

    /// What a run leaves in its one directory: every thread's names after
    /// `dir-create`, none after `dir-unlink`; the next run starts afresh.
    #[test]
    fn a_run_works_on_one_directory_of_its_own() {
        for (op, left) in [(Op::Create, 2 * 50), (Op::Unlink, 0)] {
            for variant in VARIANTS {
                let subject = one_dir(variant, op);
                run_cell(&subject, 2, RunPlan::new(1, 50));
                let entries = subject.admin.list_dir(subject.dir()).expect("the run's directory");
                let names = entries.iter().filter(|e| e.name != b"." && e.name != b"..").count();
                assert_eq!(names, left, "{op:?} {variant}");
                // A warm-up and one measured run, each in a directory of its own.
                assert_eq!(subject.run.load(Ordering::Relaxed), 2, "{op:?} {variant}");
                assert_eq!(subject.admin.stat("/r1"), Err(vfscale::Errno::ENOENT), "the warm-up's directory is gone");
            }
        }
    }
}
