//! Seed 001 on the host: `inode-exit`. Every thread creates its share of
//! files in its own directory on tmpfs (or under `--dir`; each a new inode
//! on the superblock's inode list), then unlinks them all and exits, like
//! the threads of Waiman Long's exit microbenchmark dropping their inodes;
//! op = create + unlink.

use super::{close_raw, cstring, open_raw, Build, Built, HostWorkload, ScratchDir};
use crate::workloads::Subject;
use std::ffi::CString;
use std::path::Path;

pub(super) const INODE_EXIT: HostWorkload = HostWorkload {
    name: "inode-exit",
    about:
        "each thread creates N files in its own directory (tmpfs, or --dir), then unlinks them (op = create + unlink)",
    default_iterations: 2_000,
    build: Build::InDir(build),
};

fn build(under: Option<&Path>) -> Result<Built, String> {
    let dir = ScratchDir::new("inode-exit", under)?;
    let note = dir.note.clone();
    Ok(Built { subject: Box::new(ExitSubject { dir }), note })
}

#[derive(Debug)]
struct ExitSubject {
    dir: ScratchDir,
}

impl Subject for ExitSubject {
    fn prepare_run(&self, threads: usize) {
        for t in 0..threads {
            let path = self.dir.path.join(format!("t{t}"));
            match std::fs::create_dir(&path) {
                Ok(()) => {}
                Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
                Err(e) => panic!("mkdir {}: {e}", path.display()),
            }
        }
    }

    fn run_thread(&self, thread: usize, iterations: u64) {
        let dir = self.dir.path.join(format!("t{thread}"));
        let paths: Vec<CString> = (0..iterations).map(|i| cstring(&dir.join(i.to_string()))).collect();
        for path in &paths {
            let fd = open_raw(path, libc::O_CREAT | libc::O_EXCL | libc::O_WRONLY, 0o644)
                .unwrap_or_else(|e| panic!("create {path:?}: {e}"));
            close_raw(fd);
        }
        for path in &paths {
            // SAFETY: `path` is a valid C string.
            if unsafe { libc::unlink(path.as_ptr()) } != 0 {
                panic!("unlink {path:?}: {}", std::io::Error::last_os_error());
            }
        }
    }
}
