//! `file-overwrite` on the host: every thread overwrites its own 4 KiB
//! page of one shared file on tmpfs (or under `--dir`), FxMark's DWOM,
//! through a descriptor of its own.

use super::{close_raw, cstring, open_raw, Build, Built, HostWorkload, ScratchDir};
use crate::workloads::Subject;
use std::ffi::CString;
use std::path::Path;

pub(super) const OVERWRITE: HostWorkload = HostWorkload {
    name: "file-overwrite",
    about: "every thread overwrites its own 4 KiB page of one shared file (tmpfs, or --dir)",
    default_iterations: 20_000,
    build: Build::InDir(build),
};

const PAGE: usize = 4096;

fn build(under: Option<&Path>) -> Result<Built, String> {
    let scratch = ScratchDir::new("file-overwrite", under)?;
    let note = scratch.note.clone();
    let path = cstring(&scratch.path.join("shared"));
    let fd = open_raw(&path, libc::O_CREAT | libc::O_WRONLY, 0o644).map_err(|e| format!("create {path:?}: {e}"))?;
    close_raw(fd);
    Ok(Built { subject: Box::new(SharedFile { _scratch: scratch, path }), note })
}

#[derive(Debug)]
struct SharedFile {
    /// Removed with the driver.
    _scratch: ScratchDir,
    path: CString,
}

/// `pwrite` of all of `buf` at `at`, or a panic naming the error.
fn pwrite_all(fd: libc::c_int, buf: &[u8], at: usize) {
    // SAFETY: `buf` is valid for reads of its length.
    let n = unsafe { libc::pwrite(fd, buf.as_ptr().cast(), buf.len(), at as libc::off_t) };
    assert_eq!(n, buf.len() as isize, "pwrite: {}", std::io::Error::last_os_error());
}

impl Subject for SharedFile {
    /// Every thread's page written once, untimed.
    fn prepare_run(&self, threads: usize) {
        let fd = open_raw(&self.path, libc::O_WRONLY, 0).unwrap_or_else(|e| panic!("open {:?}: {e}", self.path));
        pwrite_all(fd, &vec![0; threads * PAGE], 0);
        close_raw(fd);
    }

    fn run_thread(&self, thread: usize, iterations: u64) {
        let fd = open_raw(&self.path, libc::O_WRONLY, 0).unwrap_or_else(|e| panic!("open {:?}: {e}", self.path));
        let page = [thread as u8; PAGE];
        for _ in 0..iterations {
            pwrite_all(fd, &page, thread * PAGE);
        }
        close_raw(fd);
    }
}
