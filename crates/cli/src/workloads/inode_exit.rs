//! `inode-exit`: seed 001's exit microbenchmark on the VFS core. Every
//! thread creates its share of files (each a new inode on the
//! superblock's inode list), then deletes them all, as exiting threads
//! drop their /proc inodes; op = one create + one delete.

use super::{Params, Subject, Workload};
use vfscale::config::{DirLocking, InodeListKind};
use vfscale::{Credentials, OpenFlags, Vfs, VfsConfig};

pub(super) const WORKLOAD: Workload = Workload {
    name: "inode-exit",
    about: "each thread creates N files in its own directory (the one-dir variants: all in one shared directory), \
            then unlinks them (op = create + unlink)",
    variants: &["percpu", "global", "one-dir", "one-dir-rwsem"],
    default_iterations: |_| 20_000,
    takes_hold: false,
    build,
};

fn build(variant: &str, _params: &Params) -> Box<dyn Subject> {
    let (inode_list, dir_locking, shared_dir) = match variant {
        "percpu" => (InodeListKind::PerCpu, DirLocking::Split, false),
        "global" => (InodeListKind::Global, DirLocking::Split, false),
        "one-dir" => (InodeListKind::PerCpu, DirLocking::Split, true),
        "one-dir-rwsem" => (InodeListKind::PerCpu, DirLocking::RwSem, true),
        other => unreachable!("variant {other} validated by the caller"),
    };
    let vfs = Vfs::new(VfsConfig { inode_list, dir_locking, ..VfsConfig::default() });
    Box::new(ExitSubject { vfs, shared_dir })
}

struct ExitSubject {
    vfs: Vfs,
    /// Every thread's files in `/shared` (split or rwsem directory)
    /// instead of a directory of its own.
    shared_dir: bool,
}

impl ExitSubject {
    fn dir(&self, thread: usize) -> String {
        if self.shared_dir {
            "/shared".to_string()
        } else {
            format!("/t{thread}")
        }
    }
}

impl Subject for ExitSubject {
    fn prepare_run(&self, threads: usize) {
        let root = self.vfs.process(Credentials::root());
        for t in 0..threads {
            match root.mkdir(self.dir(t), 0o755) {
                Ok(()) | Err(vfscale::Errno::EEXIST) => {}
                Err(e) => panic!("mkdir {}: {e}", self.dir(t)),
            }
        }
    }

    fn run_thread(&self, thread: usize, iterations: u64) {
        let process = self.vfs.process(Credentials::root());
        let dir = self.dir(thread);
        let paths: Vec<String> = (0..iterations).map(|i| format!("{dir}/{thread}-{i}")).collect();
        for path in &paths {
            let fd = process.open(path, OpenFlags::CREAT | OpenFlags::EXCL | OpenFlags::WRONLY, 0o644).expect("create");
            process.close(fd).expect("close");
        }
        for path in &paths {
            process.unlink(path).expect("unlink");
        }
    }
}
