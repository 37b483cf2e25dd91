//! Seed 003 on the host: `proc-ps`, the walk `ps -fe` does. One operation
//! lists /proc, then for every process opens and reads its `stat`, `status`
//! and `cmdline` — every one of those walks goes through `/proc/<pid>`,
//! where the kernel before 5.16 left RCU walk. Processes that exit
//! mid-walk are skipped, as ps skips them.

use super::{check, close_raw, fs_magic, open_raw, Build, Built, HostWorkload, PROC_SUPER_MAGIC};
use crate::workloads::Subject;
use std::ffi::CString;
use std::io;
use std::path::Path;

pub(super) const PS: HostWorkload = HostWorkload {
    name: "proc-ps",
    about: "list /proc and read every process's stat, status and cmdline (op = one ps -fe walk)",
    default_iterations: 20,
    build: Build::Fixed(build),
};

/// The per-process files `ps -fe` reads.
const FILES: [&str; 3] = ["stat", "status", "cmdline"];

fn build() -> Result<Built, String> {
    require_procfs().map(|()| Built { subject: Box::new(PsSubject), note: None })
}

/// Whether /proc is procfs here, or why not in one line.
pub(crate) fn require_procfs() -> Result<(), String> {
    match fs_magic(Path::new("/proc")) {
        Ok(PROC_SUPER_MAGIC) => Ok(()),
        Ok(other) => Err(format!("/proc is not procfs here (file system magic {other:#x})")),
        Err(e) => Err(format!("no /proc here: {e}")),
    }
}

#[derive(Debug)]
struct PsSubject;

/// Reads a whole small file; `Ok(false)` when its process has gone.
fn read_file(path: &CString, buf: &mut [u8]) -> io::Result<bool> {
    let fd = match open_raw(path, libc::O_RDONLY, 0) {
        Ok(fd) => fd,
        Err(e) if matches!(e.kind(), io::ErrorKind::NotFound | io::ErrorKind::PermissionDenied) => return Ok(false),
        Err(e) => return Err(e),
    };
    let result = loop {
        // SAFETY: `buf` is writable for its length and `fd` is open.
        match check(unsafe { libc::read(fd, buf.as_mut_ptr().cast(), buf.len()) } as libc::c_int) {
            Ok(0) => break Ok(true),
            Ok(_) => {}
            // ESRCH: the task died between open and read.
            Err(e) if e.raw_os_error() == Some(libc::ESRCH) => break Ok(false),
            Err(e) => break Err(e),
        }
    };
    close_raw(fd);
    result
}

impl PsSubject {
    fn walk(&self, buf: &mut [u8]) -> io::Result<usize> {
        let mut seen = 0;
        for entry in std::fs::read_dir("/proc")? {
            let name = entry?.file_name();
            let Some(pid) = name.to_str().filter(|n| n.bytes().all(|b| b.is_ascii_digit())) else { continue };
            for file in FILES {
                let path = CString::new(format!("/proc/{pid}/{file}")).expect("no NUL in a pid path");
                if !read_file(&path, buf)? {
                    break;
                }
            }
            seen += 1;
        }
        Ok(seen)
    }
}

impl Subject for PsSubject {
    fn run_thread(&self, _thread: usize, iterations: u64) {
        let mut buf = vec![0u8; 4096];
        for _ in 0..iterations {
            match self.walk(&mut buf) {
                Ok(seen) => assert!(seen > 0, "/proc lists no process, not even this one"),
                Err(e) => panic!("walking /proc: {e}"),
            }
        }
    }
}
