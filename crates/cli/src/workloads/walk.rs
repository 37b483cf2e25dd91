//! `walk` and `walk-missing`: path walks on the VFS core, the shape of
//! seed 000's sysfs benchmark on a plain tree. Every thread repeatedly
//! opens, reads and closes a file four components deep (`walk`), or opens
//! a name that does not exist (`walk-missing`), in a tree of about 4700
//! entries.

use super::{Params, Subject, Workload};
use std::hint::black_box;
use vfscale::config::{DirLocking, NegativeDentries, WalkMode};
use vfscale::{Credentials, Errno, OpenFlags, Vfs, VfsConfig};

pub(super) const WALK: Workload = Workload {
    name: "walk",
    about: "open, read 32 bytes, close a file 4 components deep (op = open + read + close)",
    variants: &["rcu", "ref", "global-mutex"],
    default_iterations: |_| 100_000,
    takes_hold: false,
    build: build_walk,
};

pub(super) const WALK_MISSING: Workload = Workload {
    name: "walk-missing",
    about: "open a missing name 4 components deep, which fails with ENOENT (op = one open)",
    variants: &["cached", "uncached"],
    default_iterations: |_| 100_000,
    takes_hold: false,
    build: build_missing,
};

/// Fan-out of each tree level: FANOUT^3 directories deep, FANOUT^4 files.
const FANOUT: usize = 8;
pub(crate) const FILES: usize = FANOUT * FANOUT * FANOUT * FANOUT;

fn build_walk(variant: &str, _params: &Params) -> Box<dyn Subject> {
    let config = match variant {
        "rcu" => VfsConfig::default(),
        "ref" => VfsConfig { walk: WalkMode::RefOnly, ..VfsConfig::default() },
        "global-mutex" => {
            VfsConfig { walk: WalkMode::RefOnly, dir_locking: DirLocking::GlobalMutex, ..VfsConfig::default() }
        }
        other => unreachable!("variant {other} validated by the caller"),
    };
    Box::new(WalkSubject::new(config, false))
}

fn build_missing(variant: &str, _params: &Params) -> Box<dyn Subject> {
    let negative_dentries = match variant {
        "cached" => NegativeDentries::Cached,
        "uncached" => NegativeDentries::Uncached,
        other => unreachable!("variant {other} validated by the caller"),
    };
    Box::new(WalkSubject::new(VfsConfig { negative_dentries, ..VfsConfig::default() }, true))
}

/// The path of file `i` of the tree.
pub(crate) fn file_path(i: usize) -> String {
    let (a, b, c, d) = (i / FANOUT.pow(3) % FANOUT, i / FANOUT.pow(2) % FANOUT, i / FANOUT % FANOUT, i % FANOUT);
    format!("/a{a}/b{b}/c{c}/f{d}")
}

struct WalkSubject {
    vfs: Vfs,
    missing: bool,
}

impl WalkSubject {
    fn new(config: VfsConfig, missing: bool) -> WalkSubject {
        let vfs = Vfs::new(config);
        let root = vfs.process(Credentials::root());
        for i in 0..FILES {
            let path = file_path(i);
            for (end, _) in path.match_indices('/').skip(1) {
                match root.mkdir(&path[..end], 0o755) {
                    Ok(()) | Err(Errno::EEXIST) => {}
                    Err(e) => panic!("building the tree at {}: {e}", &path[..end]),
                }
            }
            let fd = root.open(&path, OpenFlags::CREAT | OpenFlags::WRONLY, 0o644).expect("create a tree file");
            root.write(fd, format!("value of attribute {i}\n").as_bytes()).expect("fill a tree file");
            root.close(fd).expect("close a tree file");
        }
        WalkSubject { vfs, missing }
    }
}

impl Subject for WalkSubject {
    fn run_thread(&self, thread: usize, iterations: u64) {
        let process = self.vfs.process(Credentials::root());
        // Spread threads over the tree; they share the upper directories.
        let path = if self.missing { "/a0/b1/c2/missing".to_string() } else { file_path(thread * 37 % FILES) };
        let mut buf = [0u8; 32];
        for _ in 0..iterations {
            match process.open(&path, OpenFlags::RDONLY, 0) {
                Ok(fd) => {
                    black_box(process.read(fd, &mut buf).expect("read a tree file"));
                    process.close(fd).expect("close a tree file");
                }
                Err(e) => assert!(self.missing && e == Errno::ENOENT, "open {path}: {e}"),
            }
        }
    }
}
