//! `kernfs-files` and `kernfs-missing`: seed 000's sysfs_benchmark on a
//! kernfs tree mounted on `/sys` of an in-memory root, so each walk
//! crosses the mount point as the seed's does. Case A: every thread opens,
//! reads 32 bytes from and closes one of max(1, T/2) distinct attribute
//! files; case B: every thread opens one missing path. Op = one open
//! (+ read + close).

use super::seed_mount::SeedMount;
use super::{Params, Subject, Workload};
use std::hint::black_box;
use std::sync::Mutex;
use vfscale::kernfs::{Kernfs, KernfsConfig};
use vfscale::{Errno, OpenFlags, VfsConfig};
use vfscale_sync::poison::unpoisoned;

pub(super) const FILES: Workload = Workload {
    name: "kernfs-files",
    about: "open, read 32 bytes, close one of max(1, T/2) sysfs-like attribute files (op = open + read + close)",
    variants: &["rcu", "rwsem", "before"],
    default_iterations: |_| 10_000,
    takes_hold: false,
    build: build_files,
};

pub(super) const MISSING: Workload = Workload {
    name: "kernfs-missing",
    about: "open one missing path of a sysfs-like tree, failing with ENOENT (op = one open)",
    variants: &["rcu", "rwsem", "before"],
    default_iterations: |_| 10_000,
    takes_hold: false,
    build: build_missing,
};

fn config(variant: &str) -> KernfsConfig {
    match variant {
        "rcu" => KernfsConfig::rcu(),
        "rwsem" => KernfsConfig::rwsem(),
        "before" => KernfsConfig::before(),
        other => unreachable!("variant {other} validated by the caller"),
    }
}

fn build_files(variant: &str, _params: &Params) -> Box<dyn Subject> {
    Box::new(SysfsSubject::new(config(variant), false))
}

fn build_missing(variant: &str, _params: &Params) -> Box<dyn Subject> {
    Box::new(SysfsSubject::new(config(variant), true))
}

/// Devices in the tree; threads use the first max(1, T/2).
const DEVICES: usize = 64;

/// A `/sys/devices/system/cpu/cpuN/...`-shaped tree, mounted on `/sys`.
struct SysfsSubject {
    mounted: SeedMount,
    missing: bool,
    distinct: Mutex<usize>,
}

impl SysfsSubject {
    fn new(config: KernfsConfig, missing: bool) -> SysfsSubject {
        type Store = fn(&[u8]) -> vfscale::VfsResult<()>;
        let sys = Kernfs::new(config);
        let mut dir = sys.root();
        for name in ["devices", "system", "cpu"] {
            dir = sys.create_dir(&dir, name, 0o755).expect("build the tree");
        }
        for n in 0..DEVICES {
            let cpu = sys.create_dir(&dir, &format!("cpu{n}"), 0o755).expect("build the tree");
            for attr in ["online", "crash_notes", "topology_id"] {
                let value = format!("{n} {attr}\n").into_bytes();
                sys.create_file(&cpu, attr, 0o444, move || Ok(value.clone()), None::<Store>).expect("build the tree");
            }
        }
        let root_config = VfsConfig { walk: sys.vfs().config().walk, ..VfsConfig::default() };
        let mounted = SeedMount::new(sys.vfs(), "sys", "sysfs", root_config);
        SysfsSubject { mounted, missing, distinct: Mutex::new(1) }
    }
}

impl Subject for SysfsSubject {
    fn prepare_run(&self, threads: usize) {
        *unpoisoned(self.distinct.lock()) = (threads / 2).clamp(1, DEVICES);
    }

    fn run_thread(&self, thread: usize, iterations: u64) {
        let distinct = *unpoisoned(self.distinct.lock());
        let path = if self.missing {
            "/sys/devices/system/cpu/cpu0/no_such_attribute".to_string()
        } else {
            format!("/sys/devices/system/cpu/cpu{}/online", thread % distinct)
        };
        let process = self.mounted.process();
        let mut buf = [0u8; 32];
        for _ in 0..iterations {
            match process.open(&path, OpenFlags::RDONLY, 0) {
                Ok(fd) => {
                    black_box(process.read(fd, &mut buf).expect("read an attribute"));
                    process.close(fd).expect("close an attribute");
                }
                Err(e) => assert!(self.missing && e == Errno::ENOENT, "open {path}: {e}"),
            }
        }
    }
}
