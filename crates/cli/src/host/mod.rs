//! Host-kernel drivers: the seed experiments' workloads run against the
//! machine's own Linux kernel (real sysfs, tmpfs, mmap, /proc and file
//! locks), so every reproduction shows the kernel beside vfscale.
//!
//! A driver is a [`Subject`] like any workload's, run by the same harness, so
//! its cells have the same statistics and JSON; its variant is
//! [`VARIANT`], or, for a driver pointed at directories (`--dir`, see
//! [`HostWorkload::takes_dir`]), the file system of each (`tmpfs`,
//! `vfscale`, `ext4`), all measured in one run. Drivers share the name of
//! the vfscale workload they mirror (`kernfs-files`, `inode-exit`,
//! `flock01`, `walk`, ...), so a report can chart them together. Building a
//! driver probes the host with one trial operation: a host without sysfs,
//! tmpfs or the needed permission gives a one-line reason, never a crash.
//!
//! ```
//! let driver = host::find("kernfs-missing").unwrap();
//! match driver.probe() {
//!     Ok(built) => { /* run built.subject with harness::run_cell */ }
//!     Err(reason) => eprintln!("host kernfs-missing skipped: {reason}"),
//! }
//! ```

mod dirs;
mod files;
mod locks;
mod mprotect;
mod procfs;
mod sysfs;
mod tmpfs;
mod tree;

pub(crate) use locks::posix;
pub(crate) use procfs::require_procfs;
pub(crate) use sysfs::require_sysfs;

use crate::bench::{CellReport, Cells};
use crate::harness::RunPlan;
use crate::workloads::Subject;
use std::any::Any;
use std::cell::Cell;
use std::ffi::{CStr, CString};
use std::io;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Once;

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
    build: Build,
}

/// How a driver is set up.
#[derive(Debug, Clone, Copy)]
enum Build {
    /// Where its seed ran (/sys, /proc, an anonymous mapping).
    Fixed(fn() -> Result<Built, String>),
    /// In a private directory under the given one (tmpfs at /dev/shm when
    /// none is given).
    InDir(fn(Option<&Path>) -> Result<Built, String>),
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
    /// Whether `--dir` may point the driver at a directory: the file
    /// workloads (inode-exit, the lock tests, walk) can run on any file
    /// system.
    pub fn takes_dir(&self) -> bool {
        matches!(self.build, Build::InDir(_))
    }

    /// Builds the driver where it runs by default and runs one trial
    /// operation on a fresh thread; `Err` is a one-line reason it cannot
    /// run here.
    pub fn probe(&self) -> Result<Built, String> {
        self.probe_in(None)
    }

    /// [`HostWorkload::probe`], in a private directory under `dir` when
    /// given (a driver that does not [`take a directory`](Self::takes_dir)
    /// refuses one).
    pub fn probe_in(&self, dir: Option<&Path>) -> Result<Built, String> {
        let built = match (self.build, dir) {
            (Build::Fixed(build), None) => quietly(build)??,
            (Build::InDir(build), dir) => quietly(|| build(dir))??,
            (Build::Fixed(_), Some(_)) => {
                return Err(format!("{} runs where its seed ran, not in a directory of your choice", self.name))
            }
        };
        quietly(|| {
            built.subject.prepare_run(1);
            let quiet = Quiet::of_this_thread();
            std::thread::scope(|scope| {
                scope
                    .spawn(|| {
                        quiet.enter();
                        built.subject.prepare_thread(0, 1);
                        built.subject.run_thread(0, 1)
                    })
                    .join()
                    .unwrap_or_else(|p| std::panic::resume_unwind(p))
            })
        })?;
        Ok(built)
    }
}

/// Every host driver, in experiment order.
pub fn all() -> &'static [HostWorkload] {
    static ALL: [HostWorkload; 17] = [
        sysfs::FILES,
        sysfs::MISSING,
        tree::WALK,
        tmpfs::INODE_EXIT,
        dirs::CREATE,
        dirs::UNLINK,
        files::OVERWRITE,
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

/// One directory a driver runs in, with the name its cells carry.
#[derive(Debug, Clone)]
pub struct Target {
    /// The variant name: the file system's (see [`label_dirs`]).
    pub label: &'static str,
    /// The directory; the driver works in a private one under it.
    pub dir: PathBuf,
}

/// Names each directory after its file system (`tmpfs`, `vfscale` for a
/// vfscale mount, `ext4`; `?` if /proc/self/mounts does not say), with
/// `-2`, `-3`, ... after a name already taken. The names are leaked: a
/// command labels a handful of directories once.
pub fn label_dirs(dirs: &[PathBuf]) -> Vec<Target> {
    let mounts = std::fs::read_to_string("/proc/self/mounts").unwrap_or_default();
    let mut taken: Vec<String> = Vec::new();
    dirs.iter()
        .map(|dir| {
            let base = file_system_name(&mounts, dir);
            let mut label = base.clone();
            let mut n = 1;
            while taken.contains(&label) {
                n += 1;
                label = format!("{base}-{n}");
            }
            taken.push(label.clone());
            Target { label: label.leak(), dir: dir.clone() }
        })
        .collect()
}

/// The type of the file system `dir` is on, from `/proc/self/mounts`
/// text: the entry with the longest mount point above it.
fn file_system_name(mounts: &str, dir: &Path) -> String {
    let dir = std::fs::canonicalize(dir).unwrap_or_else(|_| dir.to_path_buf());
    mounts
        .lines()
        .filter_map(|line| {
            let mut fields = line.split(' ');
            let (source, target, fstype) = (fields.next()?, fields.next()?, fields.next()?);
            let target = PathBuf::from(target.replace("\\040", " "));
            dir.starts_with(&target).then_some((target, source, fstype))
        })
        .max_by_key(|(target, _, _)| target.as_os_str().len())
        .map_or_else(
            || "?".to_string(),
            |(_, source, fstype)| {
                if source == "vfscale" && fstype.starts_with("fuse") {
                    "vfscale".to_string()
                } else {
                    fstype.to_string()
                }
            },
        )
}

/// Runs `driver` in each of `targets` (or, with none, where it runs by
/// default, as variant [`VARIANT`]), every cell's runs interleaved with
/// the others', and reports the cells; a target the driver cannot run in
/// is left out with a one-line reason in the second list. `Err` if it can
/// run nowhere, or failed while running.
pub fn measure(
    driver: &HostWorkload,
    targets: &[Target],
    threads: &[usize],
    plan: RunPlan,
    progress: impl FnMut(&str, usize, usize),
) -> Result<(Vec<CellReport>, Vec<String>), String> {
    let tried: Vec<(&'static str, Result<Built, String>)> = if targets.is_empty() {
        vec![(VARIANT, driver.probe())]
    } else {
        targets.iter().map(|t| (t.label, driver.probe_in(Some(&t.dir)))).collect()
    };
    let mut skipped = Vec::new();
    let mut built = Vec::new();
    for (label, result) in tried {
        match result {
            Ok(b) => built.push((label, b)),
            Err(reason) if targets.is_empty() => skipped.push(reason),
            Err(reason) => skipped.push(format!("{label}: {reason}")),
        }
    }
    if built.is_empty() {
        return Err(skipped.join("; "));
    }
    let notes: Vec<String> = built.iter().filter_map(|(_, b)| b.note.clone()).collect();
    let cells = Cells { workload: driver.name, hold: None, note: (!notes.is_empty()).then(|| notes.join("; ")) };
    let subjects: Vec<(&'static str, &dyn Subject)> = built.iter().map(|(l, b)| (*l, b.subject.as_ref())).collect();
    let reports = quietly(|| cells.measure(&subjects, threads, plan, progress))?;
    Ok((reports, skipped))
}

thread_local! {
    /// Whether this thread's panics go unprinted: it runs a host driver
    /// under [`quietly`], or a quiet thread spawned it ([`Quiet`]).
    static QUIET: Cell<bool> = const { Cell::new(false) };
}

/// Installs, once, the panic hook that prints nothing for a quiet thread
/// and hands every other panic to the hook it found: the hook is the
/// process's, and a test running beside a driver must keep its message.
fn install_quiet_hook() {
    static INSTALLED: Once = Once::new();
    INSTALLED.call_once(|| {
        let previous = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            if !QUIET.get() {
                previous(info);
            }
        }));
    });
}

/// Runs `f`, turning a panic into its message without printing it: drivers
/// report host failures (EACCES, ENOSYS, ...) by panicking in a worker
/// thread (spawned with this thread's [`Quiet`]), and the caller wants one
/// line, not a backtrace. Panics of other threads print as ever.
pub fn quietly<T>(f: impl FnOnce() -> T) -> Result<T, String> {
    install_quiet_hook();
    let was = QUIET.replace(true);
    let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(f));
    QUIET.set(was);
    result.map_err(panic_message)
}

/// A thread's quietness, carried to a thread it spawns: a driver's worker
/// panics as quietly as the caller of [`quietly`] asked.
#[derive(Clone, Copy)]
pub struct Quiet(bool);

impl Quiet {
    /// The calling thread's.
    pub fn of_this_thread() -> Quiet {
        Quiet(QUIET.get())
    }

    /// Makes the calling (newly spawned) thread as quiet.
    pub fn enter(self) {
        QUIET.set(self.0);
    }
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

/// Whether `path` is on tmpfs.
pub fn on_tmpfs(path: &Path) -> bool {
    fs_magic(path).ok() == Some(TMPFS_MAGIC)
}

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

/// A private directory for a driver's files, under the directory the
/// driver was pointed at, else on tmpfs when the host has one at /dev/shm,
/// removed with everything in it on drop.
#[derive(Debug)]
pub(crate) struct ScratchDir {
    pub(crate) path: PathBuf,
    /// Set when the directory is not on tmpfs though no other was asked for.
    pub(crate) note: Option<String>,
}

impl ScratchDir {
    pub(crate) fn new(purpose: &str, under: Option<&Path>) -> Result<ScratchDir, String> {
        static NEXT: AtomicU64 = AtomicU64::new(0);
        let unique = format!("vfscale-{purpose}-{}-{}", std::process::id(), NEXT.fetch_add(1, Ordering::Relaxed));
        let shm = Path::new("/dev/shm");
        let (base, note) = match (under, fs_magic(shm)) {
            (Some(dir), _) => (dir.to_path_buf(), None),
            (None, Ok(TMPFS_MAGIC)) => (shm.to_path_buf(), None),
            (None, _) => {
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
                        let runs = run_cell(built.subject.as_ref(), threads, RunPlan::new(1, 4));
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

    /// The hook is the process's, and a test beside a driver must keep
    /// its message: in a child process of this test binary, one thread
    /// panics while another runs a driver under `quietly`, whose own
    /// (worker's) panic stays silent.
    #[test]
    fn a_panic_beside_a_quiet_driver_keeps_its_message() {
        const CHILD: &str = "VFSCALE_QUIET_HOOK_CHILD";
        if std::env::var_os(CHILD).is_some() {
            let (inside, panicked) = (std::sync::Barrier::new(2), std::sync::Barrier::new(2));
            std::thread::scope(|s| {
                s.spawn(|| {
                    inside.wait();
                    let loud = std::panic::catch_unwind(|| panic!("a loud failure beside the driver"));
                    assert!(loud.is_err());
                    panicked.wait();
                });
                let driver = quietly(|| {
                    inside.wait();
                    panicked.wait();
                    let quiet = Quiet::of_this_thread();
                    std::thread::scope(|w| {
                        w.spawn(move || {
                            quiet.enter();
                            panic!("a quiet driver failure")
                        })
                        .join()
                    })
                    .map_err(std::panic::resume_unwind)
                });
                assert_eq!(driver.err().as_deref(), Some("a quiet driver failure"));
            });
            return;
        }
        let name = "host::tests::a_panic_beside_a_quiet_driver_keeps_its_message";
        let exe = std::env::current_exe().expect("the test binary");
        let child = std::process::Command::new(exe)
            .args(["--exact", name, "--nocapture", "--test-threads", "1"])
            .env(CHILD, "1")
            .output()
            .expect("run the test binary");
        let stderr = String::from_utf8_lossy(&child.stderr);
        assert!(child.status.success(), "the child failed:\n{stderr}");
        assert!(
            stderr.contains("a loud failure beside the driver"),
            "the other thread's panic went unprinted:\n{stderr}"
        );
        assert!(!stderr.contains("a quiet driver failure"), "the driver's worker panic printed:\n{stderr}");
    }

    #[test]
    fn scratch_dir_is_removed_on_drop() {
        let dir = ScratchDir::new("test", None).unwrap();
        let path = dir.path.clone();
        std::fs::write(path.join("f"), b"x").unwrap();
        drop(dir);
        assert!(!path.exists());
        let base = std::env::temp_dir();
        let inside = ScratchDir::new("test", Some(&base)).unwrap();
        assert!(inside.path.starts_with(&base) && inside.note.is_none());
        assert!(ScratchDir::new("test", Some(Path::new("/nonexistent/vfscale")))
            .unwrap_err()
            .contains("cannot create"));
    }

    #[test]
    fn directories_are_labelled_by_their_file_system() {
        let mounts = "proc /proc proc rw 0 0\ntmpfs /dev/shm tmpfs rw 0 0\n/dev/vda / ext4 rw 0 0\n\
                      vfscale /tmp/my\\040mnt fuse rw 0 0\n";
        assert_eq!(file_system_name(mounts, Path::new("/dev/shm/x")), "tmpfs");
        assert_eq!(file_system_name(mounts, Path::new("/home/x")), "ext4");
        assert_eq!(file_system_name(mounts, Path::new("/tmp/my mnt/a")), "vfscale");
        assert_eq!(file_system_name("", Path::new("/x")), "?");
        let labels = label_dirs(&[PathBuf::from("/dev/shm"), PathBuf::from("/dev/shm")]);
        assert_eq!(labels.iter().map(|t| t.label).collect::<Vec<_>>(), ["tmpfs", "tmpfs-2"]);
    }

    /// The directory drivers run in an ordinary directory given to them,
    /// labelled by its file system, all in one measurement.
    #[test]
    fn dir_drivers_run_in_the_given_directories() {
        let dirs = [std::env::temp_dir(), std::env::temp_dir()];
        let targets = label_dirs(&dirs);
        for driver in all().iter().filter(|d| d.takes_dir()) {
            let plan = RunPlan::new(1, 3);
            match measure(driver, &targets, &[1, 2], plan, |_, _, _| {}) {
                Ok((reports, skipped)) => {
                    assert_eq!(reports.len(), 4, "{}: skipped {skipped:?}", driver.name);
                    assert!(reports.iter().all(|r| r.variant == targets[0].label || r.variant == targets[1].label));
                }
                // Leases need a file system and privileges that allow them.
                Err(reason) => eprintln!("host {} skipped here: {reason}", driver.name),
            }
        }
        let sysfs = find("kernfs-files").unwrap();
        assert!(!sysfs.takes_dir());
        assert!(sysfs.probe_in(Some(&dirs[0])).unwrap_err().contains("where its seed ran"));
    }
}
