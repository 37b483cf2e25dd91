//! `walk` on the host: vfscale's `walk` workload against a real file
//! system. The driver builds the same tree (8 x 8 x 8 directories, 4096
//! files, each holding a line of text) in a private directory on tmpfs or
//! under `--dir`, and every thread opens, reads 32 bytes of and closes one
//! file four components deep, the threads spread over the tree as in
//! `walk` (they share the upper directories). Nothing changes the tree
//! while it runs, so a file system that caches what did not change serves
//! every operation from memory: on a vfscale mount, how close the kernel's
//! caches bring FUSE to tmpfs.

use super::{check, close_raw, cstring, open_raw, Build, Built, HostWorkload, ScratchDir};
use crate::workloads::walk::{file_path, FILES};
use crate::workloads::Subject;
use std::ffi::CString;
use std::path::Path;

pub(super) const WALK: HostWorkload = HostWorkload {
    name: "walk",
    about: "open, read 32 bytes, close a file 4 components deep of a 4096-file tree (tmpfs, or --dir)",
    default_iterations: 20_000,
    build: Build::InDir(build),
};

fn build(under: Option<&Path>) -> Result<Built, String> {
    let dir = ScratchDir::new("walk", under)?;
    for i in 0..FILES {
        let path = dir.path.join(&file_path(i)[1..]);
        let parent = path.parent().expect("tree files have a parent");
        std::fs::create_dir_all(parent).map_err(|e| format!("cannot create {}: {e}", parent.display()))?;
        std::fs::write(&path, format!("value of attribute {i}\n"))
            .map_err(|e| format!("cannot write {}: {e}", path.display()))?;
    }
    let paths = (0..FILES).map(|i| cstring(&dir.path.join(&file_path(i)[1..]))).collect();
    let note = dir.note.clone();
    Ok(Built { subject: Box::new(TreeSubject { paths, _dir: dir }), note })
}

#[derive(Debug)]
struct TreeSubject {
    /// Every file of the tree, as `walk` numbers them.
    paths: Vec<CString>,
    /// Removes the tree when the subject goes.
    _dir: ScratchDir,
}

impl Subject for TreeSubject {
    fn run_thread(&self, thread: usize, iterations: u64) {
        let path = &self.paths[thread * 37 % FILES];
        let mut buf = [0u8; 32];
        for _ in 0..iterations {
            let fd = open_raw(path, libc::O_RDONLY, 0).unwrap_or_else(|e| panic!("open {path:?}: {e}"));
            // SAFETY: `buf` is a writable 32-byte buffer and `fd` is open.
            let read = check(unsafe { libc::read(fd, buf.as_mut_ptr().cast(), buf.len()) } as libc::c_int);
            close_raw(fd);
            if let Err(e) = read {
                panic!("read {path:?}: {e}");
            }
        }
    }
}
