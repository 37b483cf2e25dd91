//! Seed 000 on the host: sysfs_benchmark's loop against the real sysfs.
//! `kernfs-files`: each thread opens, reads 32 bytes of, and closes one of
//! ncpu/2 distinct attribute files (thread i uses file i mod n), five
//! components deep like Kent's; `kernfs-missing`: every thread opens the
//! same missing path, which must fail with ENOENT.

use super::{check, close_raw, cstring, fs_magic, open_raw, Build, Built, HostWorkload, SYSFS_MAGIC};
use crate::workloads::Subject;
use std::ffi::CString;
use std::io;
use std::path::{Path, PathBuf};

pub(super) const FILES: HostWorkload = HostWorkload {
    name: "kernfs-files",
    about: "open, read 32 bytes, close one of ncpu/2 distinct /sys/devices/system/cpu attributes",
    default_iterations: 10_000,
    build: Build::Fixed(build_files),
};

pub(super) const MISSING: HostWorkload = HostWorkload {
    name: "kernfs-missing",
    about: "open a missing path under /sys/devices/system/cpu (fails with ENOENT)",
    default_iterations: 10_000,
    build: Build::Fixed(build_missing),
};

const CPU_DIR: &str = "/sys/devices/system/cpu";
/// Attributes every CPU's topology directory has had since Linux 2.6.
const ATTRIBUTES: [&str; 4] = ["core_id", "physical_package_id", "core_siblings_list", "thread_siblings_list"];

/// Whether /sys is sysfs here, or why not in one line.
pub(crate) fn require_sysfs() -> Result<(), String> {
    match fs_magic(Path::new("/sys")) {
        Ok(SYSFS_MAGIC) => Ok(()),
        Ok(other) => Err(format!("/sys is not sysfs here (file system magic {other:#x})")),
        Err(e) => Err(format!("no /sys here: {e}")),
    }
}

/// Readable topology attributes, CPU by CPU.
fn attribute_files(wanted: usize) -> Vec<PathBuf> {
    let mut cpus: Vec<u32> = std::fs::read_dir(CPU_DIR)
        .map(|dir| dir.filter_map(|e| e.ok()?.file_name().to_str()?.strip_prefix("cpu")?.parse().ok()).collect())
        .unwrap_or_default();
    cpus.sort_unstable();
    ATTRIBUTES
        .iter()
        .flat_map(|attr| cpus.iter().map(move |cpu| PathBuf::from(format!("{CPU_DIR}/cpu{cpu}/topology/{attr}"))))
        .filter(|path| std::fs::read(path).is_ok())
        .take(wanted)
        .collect()
}

fn build_files() -> Result<Built, String> {
    require_sysfs()?;
    let wanted = (vfscale_sync::cpu::usable_cpus() / 2).max(1);
    let files = attribute_files(wanted);
    if files.is_empty() {
        return Err(format!("no readable CPU topology attribute under {CPU_DIR}"));
    }
    let note = (files.len() < wanted).then(|| format!("only {} of {wanted} sysfs files readable", files.len()));
    Ok(Built {
        subject: Box::new(SysfsSubject { paths: files.iter().map(|p| cstring(p)).collect(), missing: false }),
        note,
    })
}

fn build_missing() -> Result<Built, String> {
    require_sysfs()?;
    let path = PathBuf::from(format!("{CPU_DIR}/cpu0/topology/vfscale_missing"));
    Ok(Built { subject: Box::new(SysfsSubject { paths: vec![cstring(&path)], missing: true }), note: None })
}

#[derive(Debug)]
struct SysfsSubject {
    paths: Vec<CString>,
    missing: bool,
}

impl SysfsSubject {
    fn open_read_close(&self, path: &CString, buf: &mut [u8; 32]) -> io::Result<()> {
        let fd = open_raw(path, libc::O_RDONLY, 0)?;
        // SAFETY: `buf` is a writable 32-byte buffer and `fd` is open.
        let read = check(unsafe { libc::read(fd, buf.as_mut_ptr().cast(), buf.len()) } as libc::c_int);
        close_raw(fd);
        read.map(drop)
    }
}

impl Subject for SysfsSubject {
    fn run_thread(&self, thread: usize, iterations: u64) {
        let path = &self.paths[thread % self.paths.len()];
        let mut buf = [0u8; 32];
        for _ in 0..iterations {
            match self.open_read_close(path, &mut buf) {
                Ok(()) if !self.missing => {}
                Err(e) if self.missing && e.kind() == io::ErrorKind::NotFound => {}
                Ok(()) => panic!("{path:?} exists, but it should be missing"),
                Err(e) => panic!("{path:?}: {e}"),
            }
        }
    }
}
