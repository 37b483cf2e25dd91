//! # vfscale-fuse
//!
//! Serves a [`vfscale::Vfs`] to real programs through FUSE, so `ls`, `cp`,
//! `find` and the rest run against the in-memory VFS: `vfscale mount DIR`.
//!
//! The mount serves a mount namespace whose root mount is the VFS; with
//! `--demo` a kernfs tree is mounted on `sys/` and a procfs task table on
//! `proc/`, through the VFS's own mount calls ([`vfscale::Context::mount`]).
//!
//! Every FUSE request becomes the matching VFS call with the caller's
//! credentials (uid, gid, and supplementary groups read from the host's
//! `/proc`), and the VFS's errno goes back unchanged; walks cross mount
//! points as the VFS's do. A node id names a (mount, inode) position of the
//! namespace: the mount's slot in the top bits, the VFS inode number below
//! (the root is FUSE's id 1), so the same inode seen through two mounts has
//! two node ids (see the `nodes` module); the kernel's lookup counts keep a
//! node's inode alive until it forgets it, even after the last name is
//! gone.
//!
//! Where the kernel offers FUSE over io_uring ([`MountOptions::io_uring`], on by default), requests
//! come through a queue per CPU, each served by a thread on that CPU (see
//! the `ring` and `wire` modules). Otherwise they are handled on several
//! threads, each reading its own clone of the `/dev/fuse` fd; a thread that
//! has replied lingers, polling for the next request, for up to
//! [`MountOptions::linger`] while that pays (see the `linger` module), so a
//! busy client's next request finds it running instead of waking it. Both
//! ways reach the same handlers (the `fs` module).
//!
//! The kernel answers whatever it can from its caches (see the `fs`
//! module): every change to the served VFS goes through the mount, so the
//! kernel keeps its entries, attributes, negative entries and file pages
//! for a day, and with record locks in the kernel ([`RecordLocks::Kernel`],
//! the default) and no demo trees it opens, reads and closes an unchanged
//! file without a request. The demo trees change on their own and are never
//! cached.
//!
//! Not for: sharing a VFS that other code changes behind the mount's back —
//! the kernel would go on showing what it cached.
//!
//! ```no_run
//! use vfscale_fuse::{mount, MountOptions};
//!
//! let mounted = mount("/mnt/vfs".as_ref(), vfscale::Vfs::default(), &MountOptions::default())?;
//! std::fs::write("/mnt/vfs/hello", "hi\n").unwrap();
//! mounted.unmount()?;
//! # Ok::<(), vfscale_fuse::MountError>(())
//! ```
//!
//! Record locks (`fcntl`: POSIX and OFD) stay in the kernel by default, on
//! the mount's inodes as `flock` locks do, exactly as on tmpfs. With
//! [`RecordLocks::Vfs`] the kernel forwards them (`FUSE_POSIX_LOCKS`) and
//! the VFS's lock manager decides them, each kernel lock owner becoming a
//! VFS process; `flock` locks the kernel keeps in either case, since fuser
//! 0.18 cannot tell a forwarded `flock` from a record lock. A blocked
//! `F_SETLKW` ends with EINTR when a signal interrupts its caller (see the
//! `locks` module for how, without `FUSE_INTERRUPT`).
//!
//! `docs/mount.md` in the repository describes the mount's options,
//! caching, transports and differences from tmpfs; `docs/results/` holds
//! the measurements, each with its machine, date and command.

#![warn(missing_docs, missing_debug_implementations)]

mod abort;
mod caller;
pub mod capacity;
mod convert;
mod demo;
mod dev;
mod forgets;
mod fs;
#[cfg(test)]
mod fuzz_tests;
mod linger;
mod locks;
mod namespace;
mod nodes;
mod releases;
mod requests;
mod ring;
mod wire;

pub use linger::Lingers;
pub use requests::{Opcode, RequestCounts};

use fuser::{BackgroundSession, Config, MountOption, Session, SessionACL};
use std::fmt;
use std::path::{Path, PathBuf};
use std::str::FromStr;
use std::sync::Arc;
use std::time::Duration;
use vfscale::Vfs;

/// How to mount.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MountOptions {
    /// Mount the demo trees: a [`vfscale::kernfs::Kernfs`] `sys/` whose
    /// attributes show the VFS live, and a [`vfscale::procfs::Procfs`]
    /// `proc/` mirroring the host's processes.
    pub demo: bool,
    /// Threads reading requests from `/dev/fuse` (at least 1), each with
    /// its own clone of the fd: every request, or, while the io_uring
    /// queues serve, only `FORGET`s and `INTERRUPT`s.
    pub threads: usize,
    /// Let other users than the mounting one in (`allow_other`); the VFS
    /// then checks their permissions. A user other than root then mounts
    /// with `auto_unmount` too: `fusermount3` unmounts when the server's
    /// process ends, however it ends.
    pub allow_other: bool,
    /// For [`serve`]: the VFS's size limit in bytes (tmpfs's `size=`;
    /// [`vfscale::VfsConfig::size_limit`]); 0 for none.
    pub size_limit: u64,
    /// For [`serve`]: the VFS's inode limit (tmpfs's `nr_inodes=`); 0 for
    /// none.
    pub inode_limit: u64,
    /// Where record locks (`fcntl`) live, which decides whether opening and
    /// closing a file needs a request.
    pub locks: RecordLocks,
    /// How long a request thread that has replied polls for the next
    /// request before it blocks again ([`LINGER`] by default; zero: never).
    /// One thread lingers at a time, yielding the CPU between polls, and
    /// only while that pays: a linger ends when another thread begins a
    /// request, and after lingers that found nothing the next replies
    /// skip it. Only threads reading `/dev/fuse` linger, not the io_uring
    /// queues' (which share the client's CPU).
    pub linger: Duration,
    /// Serve through FUSE over io_uring where the kernel offers it (Linux
    /// 6.14+ with `echo Y > /sys/module/fuse/parameters/enable_uring`)
    /// and record locks are in the kernel: a queue per CPU, served by a
    /// thread on that CPU, so a request and its reply stay on the
    /// client's CPU and no queue is shared. Otherwise, and for `FORGET`s
    /// always, requests come through the `/dev/fuse` reads of
    /// [`MountOptions::threads`] threads (which rest after a forget, see
    /// the `forgets` module). On by default: no shared request queue and
    /// no thread spinning for the next request. `docs/mount.md` in the
    /// repository says why; `docs/results/mount-bench.md` has the figures.
    pub io_uring: bool,
}

/// [`LINGER`] in microseconds, as the command line takes it.
pub const LINGER_US: u64 = 50;

/// The default [`MountOptions::linger`]: several times the gap between a
/// reply and a busy client's next request (measured gaps:
/// `docs/results/mount-bench.md` in the repository), and a small fraction
/// of a scheduler tick.
pub const LINGER: Duration = Duration::from_micros(LINGER_US);

impl Default for MountOptions {
    /// A thread per CPU, no demo trees, only the mounting user, no limits,
    /// record locks in the kernel, io_uring where the kernel offers it,
    /// else the device with lingering [`LINGER`].
    fn default() -> Self {
        MountOptions {
            demo: false,
            threads: vfscale_sync::cpu::usable_cpus(),
            allow_other: false,
            size_limit: 0,
            inode_limit: 0,
            locks: RecordLocks::Kernel,
            linger: LINGER,
            io_uring: true,
        }
    }
}

/// Where record locks (`fcntl`: POSIX and OFD) are kept and decided.
///
/// Linux drops a process's POSIX locks on a file at *any* `close` of it,
/// and tells a FUSE server only through `FLUSH`; an OFD lock goes at the
/// last close of its open file, which the server learns only from
/// `RELEASE`. A server that holds record locks therefore needs `OPEN` (a
/// file opened without it is never released to the server) and a `FLUSH`
/// at every close (`FOPEN_NOFLUSH` cannot be given safely: a lock may be
/// taken through the very file after it was opened, and closing it must
/// drop the lock). Locks in the kernel need neither.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum RecordLocks {
    /// In the kernel, on the mount's inodes, as `flock` locks are and as
    /// on any local filesystem: the same code as on tmpfs decides them.
    /// The mount holds no lock, so files are opened and closed without a
    /// request (`FUSE_NO_OPEN_SUPPORT`, no `FLUSH`); the kernel checks
    /// permissions (`default_permissions`, in every mode) from the
    /// attributes it caches. With the demo trees, whose files need an `OPEN` for direct
    /// I/O, opens still ask, but closes do not.
    #[default]
    Kernel,
    /// In the VFS's lock manager (`FUSE_POSIX_LOCKS`): each kernel lock
    /// owner becomes a VFS process, and the locks show in the VFS's lock
    /// list (`sys/fs/vfscale/locks` with `--demo`). Every open sends
    /// `OPEN`, every close `FLUSH`, every last close `RELEASE`.
    Vfs,
}

impl FromStr for RecordLocks {
    type Err = String;

    /// `kernel` or `vfs`.
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "kernel" => Ok(RecordLocks::Kernel),
            "vfs" => Ok(RecordLocks::Vfs),
            other => Err(format!("record locks live in the 'kernel' or the 'vfs', not '{other}'")),
        }
    }
}

impl fmt::Display for RecordLocks {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            RecordLocks::Kernel => "kernel",
            RecordLocks::Vfs => "vfs",
        })
    }
}

/// Why a mount or unmount failed; its `Display` is one line for a user.
#[derive(Debug)]
pub enum MountError {
    /// The mount point does not exist.
    Missing(PathBuf),
    /// The mount point is not a directory.
    NotADirectory(PathBuf),
    /// The mount point has entries, which the mount would hide.
    NotEmpty(PathBuf),
    /// `/dev/fuse` is missing or cannot be opened.
    FuseUnavailable(String),
    /// Bad options.
    Invalid(String),
    /// The kernel refused the mount or the unmount.
    Os(PathBuf, std::io::Error),
    /// The mount failed while serving: the connection was aborted (see
    /// [`Mounted::dead_queue`]).
    Aborted(PathBuf, String),
}

impl fmt::Display for MountError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            MountError::Missing(p) => write!(f, "mount point {} does not exist (create it with mkdir)", p.display()),
            MountError::NotADirectory(p) => write!(f, "mount point {} is not a directory", p.display()),
            MountError::NotEmpty(p) => {
                write!(f, "mount point {} is not empty; mount on an empty directory", p.display())
            }
            MountError::FuseUnavailable(why) => write!(f, "FUSE is unavailable: {why}"),
            MountError::Invalid(why) => f.write_str(why),
            MountError::Os(p, e) => write!(f, "{}: {e}", p.display()),
            MountError::Aborted(p, why) => write!(f, "{}: {why}", p.display()),
        }
    }
}

impl std::error::Error for MountError {}

/// A mounted VFS; unmounted by [`Mounted::unmount`] or on drop.
#[derive(Debug)]
pub struct Mounted {
    session: Option<BackgroundSession>,
    dir: PathBuf,
    requests: Arc<requests::Counters>,
    lingers: Arc<linger::Tally>,
    rings: Arc<ring::Rings>,
    refreshes: Option<Arc<std::sync::atomic::AtomicU64>>,
}

impl Mounted {
    /// The mount point.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The requests served so far, by kind.
    pub fn requests(&self) -> RequestCounts {
        self.requests.snapshot()
    }

    /// How request threads' lingers after replies went so far.
    pub fn lingers(&self) -> Lingers {
        self.lingers.snapshot()
    }

    /// How many times the demo `proc/` tree has followed the host's
    /// processes so far (`None` without [`MountOptions::demo`]). A process
    /// that started, or was reaped, before a refresh began shows in
    /// `proc/`, or is gone from it, once that refresh has ended: by the
    /// second refresh to end after the change.
    pub fn proc_refreshes(&self) -> Option<u64> {
        self.refreshes.as_ref().map(|r| r.load(std::sync::atomic::Ordering::Acquire))
    }

    /// Whether requests go through io_uring queues (see
    /// [`MountOptions::io_uring`]); known once the kernel's `INIT` was
    /// answered, which the first request on the mount waits for.
    pub fn io_uring(&self) -> bool {
        self.rings.serving()
    }

    /// The requests the io_uring queues served so far.
    pub fn io_uring_requests(&self) -> u64 {
        self.rings.served()
    }

    /// Why requests go through `/dev/fuse` although the mount asked for
    /// the io_uring queues (`None` if they serve, or were not asked for:
    /// see [`MountOptions::io_uring`]).
    pub fn why_not_io_uring(&self) -> Option<&'static str> {
        if !self.rings.wanted() || self.rings.serving() {
            None
        } else if self.rings.offered() {
            Some("the io_uring queues could not start, or the kernel refused them")
        } else {
            Some(
                "the kernel offers no FUSE over io_uring here; as root, `echo Y > \
                 /sys/module/fuse/parameters/enable_uring` before mounting offers it on Linux 6.14+",
            )
        }
    }

    /// Which io_uring queue stopped while the mount lived, why, and how
    /// the connection was aborted (`None` while every queue serves, or
    /// none were used). A queue that stops aborts the mount's FUSE
    /// connection (through fusectl's `abort` file where fusectl is
    /// mounted, else by a forced unmount, which needs root), so every
    /// client call then fails with ENOTCONN instead of waiting for it;
    /// the session ends, and [`Mounted::unmount`] (or the drop) detaches
    /// the dead mount.
    pub fn dead_queue(&self) -> Option<String> {
        self.rings.dead()
    }

    /// Whether the session has ended (someone unmounted it, or the
    /// connection was aborted).
    pub fn is_finished(&self) -> bool {
        self.session.as_ref().is_none_or(|s| s.guard.is_finished())
    }

    /// Unmounts and waits for the request threads to finish.
    pub fn unmount(mut self) -> Result<(), MountError> {
        let session = self.session.take().expect("a mount is unmounted once");
        let dir = self.dir.clone();
        let ended = if session.guard.is_finished() { session.join() } else { session.umount_and_join() };
        // The queue threads end with the connection, which a failed
        // unmount (EBUSY) leaves alive.
        if ended.is_ok() {
            self.rings.join();
        }
        self.detach_if_aborted();
        ended.map_err(|e| MountError::Os(dir, e))
    }

    /// Detaches the mount if a dead queue aborted its connection: fuser
    /// takes an aborted connection for one already unmounted, and the
    /// mount would stay, answering ENOTCONN.
    fn detach_if_aborted(&self) {
        if self.rings.dead().is_some() && is_vfscale_mount(&self.dir) {
            let _ = detach(&self.dir);
        }
    }
}

impl Drop for Mounted {
    fn drop(&mut self) {
        if let Some(session) = self.session.take() {
            // Drop has no one to report to; the kernel cleans up a mount
            // whose server is gone when it is unmounted later.
            if session.umount_and_join().is_ok() {
                self.rings.join();
            }
            self.detach_if_aborted();
        }
    }
}

/// Checks that `dir` is an empty directory and `/dev/fuse` can be opened.
fn check_mount_point(dir: &Path) -> Result<(), MountError> {
    let meta = std::fs::metadata(dir).map_err(|_| MountError::Missing(dir.to_owned()))?;
    if !meta.is_dir() {
        return Err(MountError::NotADirectory(dir.to_owned()));
    }
    let mut entries = std::fs::read_dir(dir).map_err(|e| MountError::Os(dir.to_owned(), e))?;
    if entries.next().is_some() {
        return Err(MountError::NotEmpty(dir.to_owned()));
    }
    match std::fs::OpenOptions::new().read(true).write(true).open("/dev/fuse") {
        Ok(_) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            Err(MountError::FuseUnavailable("/dev/fuse does not exist (load the fuse module)".into()))
        }
        Err(e) => Err(MountError::FuseUnavailable(format!("cannot open /dev/fuse: {e}"))),
    }
}

/// A filesystem instance to mount read-only in the served tree, beside the
/// demo trees: what a read-only bind of a host directory (`vfscale mount
/// --bind-ro HOSTDIR:PATH`, a `vfscale-hostfs` instance) mounts.
#[derive(Debug, Clone)]
pub struct ReadOnlyMount {
    /// The instance.
    pub fs: Vfs,
    /// What the namespace's `mountinfo` shows as its source.
    pub source: String,
    /// Where: an absolute path of the served tree, its missing directories
    /// made first.
    pub path: String,
}

/// Mounts `vfs` on the empty directory `dir` and serves it in the
/// background until the returned handle unmounts it.
pub fn mount(dir: &Path, vfs: Vfs, options: &MountOptions) -> Result<Mounted, MountError> {
    mount_with(dir, vfs, Vec::new(), options)
}

/// [`mount`], with each of `read_only` mounted read-only (and `nosuid`,
/// `nodev`) on its path of the served tree, through the VFS's mount calls,
/// in the order given (after the demo trees); a mount that cannot be made
/// is a [`MountError::Invalid`] naming its source and path, and nothing is
/// mounted on `dir` then.
/// Such a filesystem may change behind the mount's back (a host
/// directory's does), so, as the demo trees, nothing of it is cached and
/// its files are read with direct I/O.
pub fn mount_with(
    dir: &Path,
    vfs: Vfs,
    read_only: Vec<ReadOnlyMount>,
    options: &MountOptions,
) -> Result<Mounted, MountError> {
    if options.threads == 0 {
        return Err(MountError::Invalid("--threads must be at least 1".into()));
    }
    check_mount_point(dir)?;
    // Before the mount: once mounted, resolving `dir` asks the server,
    // which serves nothing until the session is spawned below.
    let canonical = std::fs::canonicalize(dir).map_err(|e| MountError::Os(dir.to_owned(), e))?;
    let open_policy = fs::OpenPolicy::new(options);
    let fs = fs::Server::with_mounts(vfs, options.demo, read_only, open_policy, options.linger)?;
    let requests = fs.requests();
    let linger = fs.linger();
    let refreshes = fs.demo_refreshes();
    let lingers = linger.tally();
    // A blocked F_SETLKW is answered from another thread, which a queue
    // cannot take: with the VFS's locks, requests stay on the device.
    let rings = ring::Rings::new(options.io_uring && options.locks == RecordLocks::Kernel);
    let mut config = Config::default();
    // SAFETY: geteuid has no preconditions.
    config.mount_options = mount_options(unsafe { libc::geteuid() } == 0, options.allow_other);
    config.acl = if options.allow_other { SessionACL::All } else { SessionACL::Owner };
    config.n_threads = Some(options.threads);
    config.clone_fd = true;
    let session = Session::new(dev::Dev::new(Arc::new(fs), Arc::clone(&rings)), dir, &config).map_err(|e| {
        match e.raw_os_error() {
            Some(libc::EPERM) | Some(libc::EACCES) | Some(libc::ENODEV) => {
                MountError::FuseUnavailable(format!("mounting {} was refused: {e}", dir.display()))
            }
            _ => MountError::Os(dir.to_owned(), e),
        }
    })?;
    // INIT was answered: the queues, if they started, wait for the
    // device (and the kernel for them); else lingering polls it.
    match std::os::fd::AsFd::as_fd(&session).try_clone_to_owned() {
        Ok(device) => {
            if let Some(device) = rings.hand(device, abort::Connection::of(&canonical)) {
                linger.attach(device);
            }
        }
        // Without a duplicate threads never linger, but the queues
        // cannot start: the session unmounts as it drops.
        Err(e) if rings.serving() => return Err(MountError::Os(dir.to_owned(), e)),
        Err(_) => {}
    }
    let session = session.spawn().map_err(|e| MountError::Os(dir.to_owned(), e))?;
    Ok(Mounted { session: Some(session), dir: dir.to_owned(), requests, lingers, rings, refreshes })
}

/// The options of the mount itself, by whether root mounts (directly) or
/// another user (through `fusermount3`), and whether others may enter.
fn mount_options(root: bool, allow_other: bool) -> Vec<MountOption> {
    let mut options = vec![MountOption::FSName("vfscale".into()), MountOption::Subtype("vfscale".into())];
    if root {
        // Device nodes open and set-user-ID programs run, as on tmpfs;
        // only root may ask (fusermount3 forces nodev and nosuid for
        // others).
        options.extend([MountOption::Dev, MountOption::Suid]);
    } else if allow_other {
        // fusermount3 mounts for other users, and with auto_unmount stays
        // to unmount when the server's process ends, however it ends, so
        // a killed server leaves no dead mount. fuser 0.18 takes it only
        // with others let in (`allow_other`); root mounts without
        // fusermount3, which alone offers it.
        options.push(MountOption::AutoUnmount);
    }
    // The kernel checks permissions from the attributes it caches, in
    // every mode: it keeps entries for a day and walks through cached
    // directories without asking, so without this a walk it served from
    // its cache would skip the search permission of every directory on
    // the way. Opens that send no request need it too. Where an open or
    // another request does reach the server, the VFS checks again.
    options.push(MountOption::DefaultPermissions);
    options
}

/// Mounts a fresh VFS (with the options' limits) on `dir` and serves it
/// until someone unmounts it (`vfscale umount DIR`) or until SIGINT or
/// SIGTERM, which detach it lazily: the files still open are served until
/// they are closed, and the function returns `Ok` then (at once on a
/// second signal). If an io_uring queue stops (see
/// [`Mounted::dead_queue`]), the connection is aborted, the mount
/// detached, and the function returns [`MountError::Aborted`].
pub fn serve(dir: &Path, options: &MountOptions) -> Result<(), MountError> {
    serve_with(dir, Vec::new(), options)
}

/// [`serve`], with each of `read_only` mounted read-only on its path of
/// the served tree, as [`mount_with`] mounts them.
pub fn serve_with(dir: &Path, read_only: Vec<ReadOnlyMount>, options: &MountOptions) -> Result<(), MountError> {
    let signals = [libc::SIGINT, libc::SIGTERM];
    // SAFETY: `set` is a local sigset_t initialised by sigemptyset before
    // use; blocking the signals in this thread before the request threads
    // start makes them inherit the mask, so only sigtimedwait below takes
    // the signals.
    let set = unsafe {
        let mut set: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut set);
        for s in signals {
            libc::sigaddset(&mut set, s);
        }
        libc::pthread_sigmask(libc::SIG_BLOCK, &set, std::ptr::null_mut());
        set
    };
    let config =
        vfscale::VfsConfig { size_limit: options.size_limit, inode_limit: options.inode_limit, ..Default::default() };
    let mounted = mount_with(dir, Vfs::new(config), read_only, options)?;
    let through = match (mounted.io_uring(), mounted.why_not_io_uring()) {
        (true, _) => " through io_uring queues, one per CPU".to_string(),
        (false, Some(why)) => format!(" through /dev/fuse ({why})"),
        (false, None) => String::new(),
    };
    eprintln!("vfscale: serving {}{through} (Ctrl-C or `vfscale umount {}` to stop)", dir.display(), dir.display());
    let timeout = libc::timespec { tv_sec: 0, tv_nsec: 100_000_000 };
    // SAFETY: `set` and `timeout` are valid for the call; a null info
    // pointer is allowed.
    let signalled = || signals.contains(&unsafe { libc::sigtimedwait(&set, std::ptr::null_mut(), &timeout) });
    let ended = || mounted.is_finished() || mounted.dead_queue().is_some();
    while !ended() {
        if signalled() {
            // Detached lazily, the mount point is free at once and no dead
            // mount stays behind; files still open go on being served
            // until they are closed, when the kernel ends the connection.
            // A second signal stops at once (the kernel then answers
            // what is left open with ENOTCONN).
            detach(dir)?;
            eprintln!("vfscale: detached {}; serving the files still open until they close", dir.display());
            while !ended() {
                if signalled() {
                    return Ok(());
                }
            }
        }
    }
    if let Some(why) = mounted.dead_queue() {
        // The unmount detaches the aborted mount; where the abort failed,
        // this process's exit ends the connection.
        let _ = mounted.unmount();
        return Err(MountError::Aborted(dir.to_owned(), why));
    }
    mounted.unmount()
}

/// Detaches the mount on `dir` lazily (`umount2(MNT_DETACH)`, or
/// `fusermount3 -u -z` for a user's mount).
fn detach(dir: &Path) -> Result<(), MountError> {
    unmount_with(dir, libc::MNT_DETACH)
}

/// Unmounts the vfscale mount on `dir` (`vfscale umount DIR`); the server
/// process then exits by itself.
pub fn unmount(dir: &Path) -> Result<(), MountError> {
    unmount_with(dir, 0)
}

/// `umount2(dir, flags)`, or the setuid helper where this user may not.
fn unmount_with(dir: &Path, flags: libc::c_int) -> Result<(), MountError> {
    let path = std::ffi::CString::new(dir.as_os_str().as_encoded_bytes())
        .map_err(|_| MountError::Invalid(format!("{} contains a NUL byte", dir.display())))?;
    if !is_vfscale_mount(dir) {
        return Err(MountError::Invalid(format!("{} is not a vfscale mount", dir.display())));
    }
    // SAFETY: `path` is a NUL-terminated string that outlives the call.
    if unsafe { libc::umount2(path.as_ptr(), flags) } == 0 {
        return Ok(());
    }
    let err = std::io::Error::last_os_error();
    if err.raw_os_error() != Some(libc::EPERM) {
        return Err(MountError::Os(dir.to_owned(), err));
    }
    // Not root: the setuid helper may unmount what this user mounted.
    for helper in ["fusermount3", "fusermount"] {
        let lazy: &[&str] = if flags & libc::MNT_DETACH != 0 { &["-z"] } else { &[] };
        if let Ok(status) = std::process::Command::new(helper).arg("-u").args(lazy).arg(dir).status() {
            return if status.success() {
                Ok(())
            } else {
                Err(MountError::Os(dir.to_owned(), std::io::Error::other(format!("{helper} -u failed"))))
            };
        }
    }
    Err(MountError::Os(dir.to_owned(), err))
}

/// Whether `/proc/self/mounts` lists a vfscale mount on `dir`, a dead one
/// (whose server is gone, so `dir` itself cannot be resolved) included.
pub fn is_vfscale_mount(dir: &Path) -> bool {
    let resolved = std::fs::canonicalize(dir).or_else(|e| match (dir.parent(), dir.file_name()) {
        (Some(parent), Some(name)) => {
            let parent = if parent.as_os_str().is_empty() { Path::new(".") } else { parent };
            std::fs::canonicalize(parent).map(|p| p.join(name))
        }
        _ => Err(e),
    });
    let Ok(dir) = resolved else { return false };
    let Ok(mounts) = std::fs::read_to_string("/proc/self/mounts") else { return false };
    mounts.lines().any(|line| {
        let mut fields = line.split(' ');
        let (source, target) = (fields.next(), fields.next());
        source == Some("vfscale")
            && target.map(unescape_mount_path).as_deref() == Some(dir.as_os_str().as_encoded_bytes())
    })
}

/// Undoes the octal escapes (`\040` for a space) of `/proc/self/mounts`.
fn unescape_mount_path(field: &str) -> Vec<u8> {
    let bytes = field.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let octal = bytes.get(i + 1..i + 4).and_then(|d| u8::from_str_radix(std::str::from_utf8(d).ok()?, 8).ok());
        match (bytes[i], octal) {
            (b'\\', Some(byte)) => {
                out.push(byte);
                i += 4;
            }
            (b, _) => {
                out.push(b);
                i += 1;
            }
        }
    }
    out
}

/// How long [`wait_unmounted`] waits by default.
pub const UNMOUNT_WAIT: Duration = Duration::from_secs(5);

/// Waits until `dir` is no longer a vfscale mount; false on timeout.
pub fn wait_unmounted(dir: &Path, timeout: Duration) -> bool {
    let deadline = std::time::Instant::now() + timeout;
    while is_vfscale_mount(dir) {
        if std::time::Instant::now() >= deadline {
            return false;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    true
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mount_point_checks_have_one_line_errors() {
        let tmp = tempfile::tempdir().unwrap();
        let missing = tmp.path().join("missing");
        let err = mount(&missing, Vfs::default(), &MountOptions::default()).unwrap_err();
        assert!(matches!(err, MountError::Missing(_)), "{err}");
        assert!(err.to_string().contains("does not exist"));
        let file = tmp.path().join("file");
        std::fs::write(&file, "x").unwrap();
        assert!(matches!(mount(&file, Vfs::default(), &MountOptions::default()), Err(MountError::NotADirectory(_))));
        let err = mount(tmp.path(), Vfs::default(), &MountOptions::default()).unwrap_err();
        assert!(matches!(err, MountError::NotEmpty(_)));
        assert!(!err.to_string().contains('\n'));
        let zero = MountOptions { threads: 0, ..MountOptions::default() };
        assert!(matches!(mount(tmp.path(), Vfs::default(), &zero), Err(MountError::Invalid(_))));
    }

    #[test]
    fn only_a_mount_through_fusermount3_that_lets_others_in_unmounts_itself() {
        let auto = |root, allow_other| mount_options(root, allow_other).contains(&MountOption::AutoUnmount);
        assert!(auto(false, true));
        assert!(!auto(false, false), "fuser refuses auto_unmount for the owner alone");
        assert!(!auto(true, true) && !auto(true, false), "root mounts without fusermount3");
        assert!(mount_options(true, false).contains(&MountOption::Suid));
        assert!(mount_options(false, true).contains(&MountOption::DefaultPermissions));
    }

    #[test]
    fn mount_paths_are_unescaped() {
        assert_eq!(unescape_mount_path(r"/tmp/a\040b"), b"/tmp/a b");
        assert_eq!(unescape_mount_path(r"/plain"), b"/plain");
        assert_eq!(unescape_mount_path(r"/x\\"), br"/x\\");
    }

    /// A queue that stops while the mount lives aborts the connection:
    /// the call it left unanswered, and every later one, fail instead of
    /// waiting forever, the mount says which queue stopped, and
    /// unmounting leaves no dead mount. Skipped where the kernel offers no
    /// io_uring or this machine cannot mount (a failure under CI, as in
    /// `tests/mount.rs`).
    #[test]
    fn a_queue_that_stops_aborts_the_connection() {
        if !std::fs::read_to_string("/sys/module/fuse/parameters/enable_uring").is_ok_and(|v| v.trim() == "Y") {
            eprintln!("SKIPPED: the fuse module's enable_uring is off");
            return;
        }
        let under_ci = std::env::var("CI").is_ok_and(|v| !v.is_empty() && v != "false" && v != "0");
        let tmp = tempfile::tempdir().unwrap();
        let mounted = match mount(tmp.path(), Vfs::default(), &MountOptions::default()) {
            Ok(m) => m,
            Err(e @ MountError::FuseUnavailable(_)) if !under_ci => {
                eprintln!("SKIPPED: {e} (with CI set, a failure)");
                return;
            }
            Err(e) => panic!("mount failed: {e}"),
        };
        std::fs::create_dir(tmp.path().join("before")).unwrap();
        assert!(mounted.io_uring(), "{:?}", mounted.why_not_io_uring());
        assert_eq!(mounted.dead_queue(), None);
        mounted.rings.fail_queues();
        // Each call runs on a thread of its own: one left waiting holds
        // its thread, and with it this process, until the connection
        // ends, so the test aborts the connection after a minute (a hang
        // guard, not a bound).
        let call_in = |path: std::path::PathBuf, call: fn(&std::path::Path) -> std::io::Result<()>| {
            let (done, result) = std::sync::mpsc::channel();
            std::thread::spawn(move || {
                let _ = done.send(call(&path).map_err(|e| e.raw_os_error()));
            });
            result.recv_timeout(Duration::from_secs(60)).unwrap_or_else(|_| {
                let _ = abort::Connection::of(&std::fs::canonicalize(tmp.path()).unwrap()).abort();
                panic!("a call did not return within a minute");
            })
        };
        // The first call wakes its CPU's queue, which stops before it
        // answers. The kernel ends the unanswered request as the queue's
        // ring closes (ECANCELED) or as the connection is aborted.
        let first = call_in(tmp.path().join("after"), |p| std::fs::create_dir(p));
        assert!(matches!(first, Err(Some(libc::ENOTCONN | libc::ECONNABORTED | libc::ECANCELED))), "{first:?}");
        let deadline = std::time::Instant::now() + Duration::from_secs(60);
        while mounted.dead_queue().is_none() || !mounted.is_finished() {
            assert!(std::time::Instant::now() < deadline, "no abort and end within a minute");
            std::thread::sleep(Duration::from_millis(5));
        }
        // The queue says it stopped only once the connection is aborted:
        // every call from then on fails at once.
        let second = call_in(tmp.path().join("later"), |p| std::fs::write(p, "x"));
        assert_eq!(second, Err(Some(libc::ENOTCONN)));
        let why = mounted.dead_queue().expect("a queue stopped");
        assert!(why.contains("injected") && why.contains("aborted"), "{why}");
        assert!(mounted.unmount().is_ok());
        assert!(wait_unmounted(tmp.path(), Duration::from_secs(60)), "the dead mount stayed");
    }

    #[test]
    fn unmount_refuses_what_is_not_a_vfscale_mount() {
        let tmp = tempfile::tempdir().unwrap();
        assert!(!is_vfscale_mount(tmp.path()));
        assert!(matches!(unmount(tmp.path()), Err(MountError::Invalid(_))));
        assert!(wait_unmounted(tmp.path(), Duration::ZERO));
    }
}
