//! Host-kernel drivers: the seed experiments' workloads run against the
//! machine's own Linux kernel (real sysfs, tmpfs, mmap, /proc and file
//! locks), so every reproduction shows the kernel beside vfscale.
//!
//! A driver is a [`Subject`] like any workload's, run by the same harness, so
//! its cells have the same statistics and JSON; its variant is always
//! [`VARIANT`]. Drivers share the name of the vfscale workload they mirror
//! (`kernfs-files`, `inode-exit`, `flock01`, ...), so a report can chart
//! them together. Building a driver probes the host with one trial
//! operation: a host without sysfs, tmpfs or the needed permission gives a
//! one-line reason, never a crash.
//!
//! ```
//! let driver = host::find("kernfs-missing").unwrap();
//! match driver.probe() {
//!     Ok(built) => { /* run built.subject with harness::run_cell */ }
//!     Err(reason) => eprintln!("host kernfs-missing skipped: {reason}"),
//! }
//! ```

mod locks;
mod mprotect;
mod procfs;
mod sysfs;
mod tmpfs;

pub(crate) use locks::posix;
pub(crate) use procfs::require_procfs;
pub(crate) use sysfs::require_sysfs;

use crate::workloads::Subject;
use std::any::Any;
use std::ffi::{CStr, CString};
use std::io;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;

/// The variant name of every host cell.
pub const VARIANT: &str = "host";

/// A host driver: a name shared with the vfscale workload it mirrors.
#[derive(Debug)]
pub struct HostWorkload {
    /// Name on the command line and in the JSON.
    pub name: &'static str,
    /// One line on what each operation does on the host.
    pub about: &'static str,
    /// Iterations per thread when `--iterations` is not given.
    pub default_iterations: u64,
    /// Sets the driver up on this host, or says why it cannot run.
    build: fn() -> Result<Built, String>,
}

/// A driver set up on this host.
pub struct Built {
    /// The subject the harness runs.
    pub subject: Box<dyn Subject>,
    /// Something a reader of the results should know (e.g. "not tmpfs").
    pub note: Option<String>,
}

impl std::fmt::Debug for Built {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Built").field("note", &self.note).finish_non_exhaustive()
    }
}

impl HostWorkload {
    /// Builds the driver and runs one trial operation on a fresh thread;
    /// `Err` is a one-line reason it cannot run here.
    pub fn probe(&self) -> Result<Built, String> {
        let built = quietly(self.build)??;
        quietly(|| {
            built.subject.prepare_run(1);
            std::thread::scope(|scope| {
                scope.spawn(|| built.subject.run_thread(0, 1)).join().unwrap_or_else(|p| std::panic::resume_unwind(p))
            })
        })?;
        Ok(built)
    }
}

/// Every host driver, in experiment order.
pub fn all() -> &'static [HostWorkload] {
    static ALL: [HostWorkload; 13] = [
        sysfs::FILES,
        sysfs::MISSING,
        tmpfs::INODE_EXIT,
        mprotect::STORM,
        procfs::PS,
        locks::FLOCK01,
        locks::FLOCK02,
        locks::POSIX01,
        locks::POSIX02,
        locks::POSIX03,
        locks::POSIX04,
        locks::LEASE01,
        locks::LEASE02,
    ];
    &ALL
}

/// The host driver called `name`.
pub fn find(name: &str) -> Option<&'static HostWorkload> {
    all().iter().find(|w| w.name == name)
}

/// Runs `f`, turning a panic into its message without printing it: drivers
/// report host failures (EACCES, ENOSYS, ...) by panicking in a worker
/// thread, and the caller wants one line, not a backtrace.
pub fn quietly<T>(f: impl FnOnce() -> T) -> Result<T, String> {
    // The hook is process-wide: callers take turns, so each restores the
    // hook it found rather than another caller's silent one.
    static TURN: Mutex<()> = Mutex::new(());
    let _turn = TURN.lock().unwrap_or_else(|e| e.into_inner());
    let previous = std::panic::take_hook();
    std::panic::set_hook(Box::new(|_| {}));
    let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(f));
    std::panic::set_hook(previous);
    result.map_err(panic_message)
}

fn panic_message(payload: Box<dyn Any + Send>) -> String {
    match payload.downcast::<String>() {
        Ok(s) => *s,
        Err(payload) => {
            payload.downcast_ref::<&str>().map_or_else(|| "the driver panicked".to_string(), |s| s.to_string())
        }
    }
}

/// `statfs(2)` magic numbers of the file systems the drivers expect.
const SYSFS_MAGIC: i64 = 0x6265_6572;
const TMPFS_MAGIC: i64 = 0x0102_1994;
const PROC_SUPER_MAGIC: i64 = 0x9fa0;

/// The file system type of `path` (`statfs` f_type).
fn fs_magic(path: &Path) -> io::Result<i64> {
    let c = cstring(path);
    // SAFETY: `c` is a valid C string and `buf` a zeroed statfs we own.
    let (rc, buf) = unsafe {
        let mut buf: libc::statfs = std::mem::zeroed();
        (libc::statfs(c.as_ptr(), &mut buf), buf)
    };
    if rc != 0 {
        return Err(io::Error::last_os_error());
    }
    #[allow(clippy::unnecessary_cast)] // f_type's width differs between targets
    Ok(buf.f_type as i64)
}

pub(crate) fn cstring(path: &Path) -> CString {
    CString::new(path.as_os_str().as_bytes()).expect("paths built here have no NUL byte")
}

/// A negative result of a libc call as the thread's `errno`.
pub(crate) fn check(rc: libc::c_int) -> io::Result<libc::c_int> {
    if rc < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(rc)
    }
}

/// `open(2)` with the raw flags the seed benchmarks use.
pub(crate) fn open_raw(path: &CStr, flags: libc::c_int, mode: libc::mode_t) -> io::Result<libc::c_int> {
    // SAFETY: `path` is a valid C string; open has no other memory effects.
    check(unsafe { libc::open(path.as_ptr(), flags | libc::O_CLOEXEC, mode as libc::c_uint) })
}

fn close_raw(fd: libc::c_int) {
    // SAFETY: the caller owns `fd` and does not use it afterwards.
    unsafe { libc::close(fd) };
}

/// A private directory for a driver's files, on tmpfs when the host has one
/// at /dev/shm, removed with everything in it on drop.
#[derive(Debug)]
pub(crate) struct ScratchDir {
    pub(crate) path: PathBuf,
    /// Set when the directory is not on tmpfs.
    pub(crate) note: Option<String>,
}

impl ScratchDir {
    pub(crate) fn new(purpose: &str) -> Result<ScratchDir, String> {
        static NEXT: AtomicU64 = AtomicU64::new(0);
        let unique = format!("vfscale-{purpose}-{}-{}", std::process::id(), NEXT.fetch_add(1, Ordering::Relaxed));
        let shm = Path::new("/dev/shm");
        let (base, note) = match fs_magic(shm) {
            Ok(TMPFS_MAGIC) => (shm.to_path_buf(), None),
            _ => {
                let tmp = std::env::temp_dir();
                let note = format!("no tmpfs at /dev/shm: files live in {} instead", tmp.display());
                (tmp, Some(note))
            }
        };
        let path = base.join(unique);
        std::fs::create_dir(&path).map_err(|e| format!("cannot create {}: {e}", path.display()))?;
        Ok(ScratchDir { path, note })
    }
}

impl Drop for ScratchDir {
    fn drop(&mut self) {
        // Best effort: a leftover directory in /dev/shm is harmless.
        let _ = std::fs::remove_dir_all(&self.path);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::harness::{run_cell, RunPlan};

    #[test]
    fn names_are_unique_and_mirror_workload_names() {
        let mut names: Vec<_> = all().iter().map(|w| w.name).collect();
        names.sort();
        names.dedup();
        assert_eq!(names.len(), all().len());
        assert!(find("kernfs-files").is_some() && find("lease02").is_some() && find("nope").is_none());
    }

    /// Every driver either runs a few cells here or says in one line why not.
    #[test]
    fn every_driver_runs_or_says_why_not() {
        for driver in all() {
            match driver.probe() {
                Ok(built) => {
                    for threads in [1, 3] {
                        let runs = run_cell(built.subject.as_ref(), threads, RunPlan { runs: 1, iterations: 4 });
                        assert_eq!(runs.thread_elapsed[0].len(), threads, "{}", driver.name);
                    }
                }
                Err(reason) => {
                    assert!(!reason.is_empty() && !reason.contains('\n'), "{}: {reason:?}", driver.name);
                    eprintln!("host {} skipped here: {reason}", driver.name);
                }
            }
        }
    }

    #[test]
    fn quietly_turns_panics_into_messages() {
        assert_eq!(quietly(|| 5), Ok(5));
        assert_eq!(quietly(|| panic!("no sysfs")), Err::<(), _>("no sysfs".to_string()));
        let n = 3;
        assert_eq!(quietly(|| panic!("{n} files")), Err::<(), _>("3 files".to_string()));
    }

    #[test]
    fn scratch_dir_is_removed_on_drop() {
        let dir = ScratchDir::new("test").unwrap();
        let path = dir.path.clone();
        std::fs::write(path.join("f"), b"x").unwrap();
        drop(dir);
        assert!(!path.exists());
    }
}
