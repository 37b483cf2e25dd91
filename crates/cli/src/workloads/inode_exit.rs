//! `inode-exit`: seed 001's exit microbenchmark on the VFS core. Every
//! thread creates its share of files (each a new inode on the
//! superblock's inode list), then deletes them all, as exiting threads
//! drop their /proc inodes; op = one create + one delete.

use super::{Params, Subject, Workload};
use vfscale::config::InodeListKind;
use vfscale::{Credentials, OpenFlags, Vfs, VfsConfig};

pub(super) const WORKLOAD: Workload = Workload {
    name: "inode-exit",
    about: "each thread creates N files in its own directory, then unlinks them (op = create + unlink)",
    variants: &["percpu", "global"],
    default_iterations: |_| 20_000,
    takes_hold: false,
    build,
};

fn build(variant: &str, _params: &Params) -> Box<dyn Subject> {
    let inode_list = match variant {
        "percpu" => InodeListKind::PerCpu,
        "global" => InodeListKind::Global,
        other => unreachable!("variant {other} validated by the caller"),
    };
    Box::new(ExitSubject { vfs: Vfs::new(VfsConfig { inode_list, ..VfsConfig::default() }) })
}

struct ExitSubject {
    vfs: Vfs,
}

impl Subject for ExitSubject {
    fn prepare_run(&self, threads: usize) {
        let root = self.vfs.process(Credentials::root());
        for t in 0..threads {
            match root.mkdir(format!("/t{t}"), 0o755) {
                Ok(()) | Err(vfscale::Errno::EEXIST) => {}
                Err(e) => panic!("mkdir /t{t}: {e}"),
            }
        }
    }

    fn run_thread(&self, thread: usize, iterations: u64) {
        let process = self.vfs.process(Credentials::root());
        let paths: Vec<String> = (0..iterations).map(|i| format!("/t{thread}/{i}")).collect();
        for path in &paths {
            let fd = process.open(path, OpenFlags::CREAT | OpenFlags::EXCL | OpenFlags::WRONLY, 0o644).expect("create");
            process.close(fd).expect("close");
        }
        for path in &paths {
            process.unlink(path).expect("unlink");
        }
    }
}
