//! `dir-create` and `dir-unlink` on the host: every thread creates (or
//! unlinks) names of its own in one shared directory on tmpfs (or under
//! `--dir`), FxMark's MWCM and MWUM; each run in a fresh directory, the
//! files to unlink made before the run, untimed.

use super::{close_raw, cstring, open_raw, Build, Built, HostWorkload, ScratchDir};
use crate::workloads::Subject;
use std::ffi::CString;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;

pub(super) const CREATE: HostWorkload = HostWorkload {
    name: "dir-create",
    about: "every thread creates new names of its own in one shared directory (tmpfs, or --dir)",
    default_iterations: 2_000,
    build: Build::InDir(|under| build(under, Op::Create)),
};

pub(super) const UNLINK: HostWorkload = HostWorkload {
    name: "dir-unlink",
    about: "every thread unlinks names of its own, made before the run, in one shared directory (tmpfs, or --dir)",
    default_iterations: 2_000,
    build: Build::InDir(|under| build(under, Op::Unlink)),
};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Op {
    Create,
    Unlink,
}

fn build(under: Option<&Path>, op: Op) -> Result<Built, String> {
    let scratch = ScratchDir::new(if op == Op::Create { "dir-create" } else { "dir-unlink" }, under)?;
    let note = scratch.note.clone();
    let subject = OneDir { scratch, op, run: AtomicU64::new(0), paths: Mutex::new(Vec::new()) };
    Ok(Built { subject: Box::new(subject), note })
}

#[derive(Debug)]
struct OneDir {
    scratch: ScratchDir,
    op: Op,
    /// The run under way: its directory is `r{run}`.
    run: AtomicU64,
    /// Per thread of the run, the paths it works on.
    paths: Mutex<Vec<Vec<CString>>>,
}

impl OneDir {
    fn dir(&self) -> PathBuf {
        self.scratch.path.join(format!("r{}", self.run.load(Ordering::Relaxed)))
    }
}

impl Subject for OneDir {
    fn prepare_run(&self, threads: usize) {
        // The last run's directory and what is left in it.
        let _ = std::fs::remove_dir_all(self.dir());
        self.run.fetch_add(1, Ordering::Relaxed);
        std::fs::create_dir(self.dir()).unwrap_or_else(|e| panic!("mkdir {}: {e}", self.dir().display()));
        *self.paths.lock().expect("paths") = vec![Vec::new(); threads];
    }

    fn prepare_thread(&self, thread: usize, iterations: u64) {
        let dir = self.dir();
        let paths: Vec<CString> = (0..iterations).map(|i| cstring(&dir.join(format!("t{thread}-{i}")))).collect();
        if self.op == Op::Unlink {
            for path in &paths {
                let fd = open_raw(path, libc::O_CREAT | libc::O_EXCL | libc::O_WRONLY, 0o644)
                    .unwrap_or_else(|e| panic!("create {path:?}: {e}"));
                close_raw(fd);
            }
        }
        self.paths.lock().expect("paths")[thread] = paths;
    }

    fn run_thread(&self, thread: usize, _iterations: u64) {
        let paths = std::mem::take(&mut self.paths.lock().expect("paths")[thread]);
        for path in &paths {
            match self.op {
                Op::Create => {
                    let fd = open_raw(path, libc::O_CREAT | libc::O_EXCL | libc::O_WRONLY, 0o644)
                        .unwrap_or_else(|e| panic!("create {path:?}: {e}"));
                    close_raw(fd);
                }
                Op::Unlink => {
                    // SAFETY: `path` is a valid C string.
                    if unsafe { libc::unlink(path.as_ptr()) } != 0 {
                        panic!("unlink {path:?}: {}", std::io::Error::last_os_error());
                    }
                }
            }
        }
    }
}
