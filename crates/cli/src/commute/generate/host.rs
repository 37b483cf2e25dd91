//! Whether a generated case commutes, decided on the host's tmpfs: each
//! order runs on a fresh copy of the initial state, processes P and Q are
//! threads with file tables of their own (`unshare(CLONE_FILES)`, so POSIX
//! locks have two owners), and after the two calls the state is read back
//! while both still hold their descriptors and locks.
//!
//! The state compared: every name under the root with its type,
//! permission bits, size, link count, contents (a digest), extended
//! attributes `user.a` and `user.b`, and which names share an inode; every
//! setup descriptor's file offset; each file's record locks as
//! `F_OFD_GETLK` from a new description sees them at every byte where a
//! generated range begins or ends (type, range, and whether an OFD or a
//! POSIX lock; between two such bytes the table cannot change); and each
//! file's `flock`
//! (none, shared or exclusive). Times count where a call returns them: a
//! `stat`, `fstatat` or `fstat` must see each of its object's three times
//! changed, or not, since the initial state alike in both orders, so a
//! stat beside a chmod of its file does not commute. (The initial look
//! asks for the times, and the coarse clock then moves past them, so a
//! change shows as a new time with or without multigrain stamps.) Left
//! out, as POSIX leaves them open or as COMMUTER's model did: the values
//! of times (each call sets them to the current time), times in the final
//! state, inode numbers and device numbers, block counts, and the order
//! of a directory's entries.

use super::{resolve, Case, Setup, XATTR_A, XATTR_B};
use crate::commute::host_sys::{own_file_table, stat_times, wait_for_coarse_clock_past, HostSyscalls};
use crate::commute::sys::{digest, Call, Outcome, Syscalls};
use crate::host::ScratchDir;
use std::collections::BTreeMap;
use std::ffi::CString;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::MetadataExt;
use std::path::Path;
use std::sync::mpsc;
use std::sync::Arc;

/// Whether `case` commutes on the host: the outcomes of A and B when it
/// does, `None` when it does not.
pub fn decide(case: &Case) -> Result<Option<[Outcome; 2]>, String> {
    let (a_first, times_ab, state_ab) = run_order(case, false)?;
    let (b_first, times_ba, state_ba) = run_order(case, true)?;
    Ok((a_first == b_first && times_ab == times_ba && state_ab == state_ba).then_some(a_first))
}

/// What a stat-like call returned of the times: for each of the access,
/// modification and change time, whether it differs from what the same
/// call returned on the initial state (`None` for another call, or when
/// either failed: its outcome tells that).
type TimesSeen = Option<[bool; 3]>;

/// Runs the case's two calls in one order on a fresh state: A's and B's
/// outcomes and the times each saw, and the state after both.
fn run_order(case: &Case, b_first: bool) -> Result<([Outcome; 2], [TimesSeen; 2], State), String> {
    let dir = ScratchDir::new("commute-gen", None)?;
    let host: Arc<dyn Syscalls> = Arc::new(HostSyscalls::new(dir.path.clone(), None));
    let setup = Setup::build(&*host, &*host, 1)?;
    let result = (|| {
        let p = Process::start()?;
        let q = Process::start()?;
        let consumed = case.consumed();
        let sides = [(&case.a, b'a'), (&case.b, b'b')]
            .map(|(side, byte)| (resolve(side, &consumed, &setup, &*host, 0, byte), if side.in_q { &q } else { &p }));
        let times_now = |(call, runner): &(Call, &Process)| {
            let call = call.clone();
            runner.run(move |_| stat_times(&call), &host)
        };
        // The times a stat-like call sees on the initial state. Then the
        // coarse clock moves past them, so a change by either call shows
        // as a new time (kernels with multigrain stamps would stamp it
        // finely anyway: the look just taken asked for the times).
        let initial = [times_now(&sides[0])?, times_now(&sides[1])?];
        if let Some(latest) = initial.iter().flatten().flat_map(|t| [t[1], t[2]]).max() {
            wait_for_coarse_clock_past(latest);
        }
        let on = |k: usize| -> Result<(Outcome, TimesSeen), String> {
            let (call, runner) = &sides[k];
            let call = call.clone();
            let outcome = runner.run(move |s: &dyn Syscalls| s.call(&call), &host)?;
            let seen = match (initial[k], times_now(&sides[k])?) {
                (Some(before), Some(now)) => Some([0, 1, 2].map(|t| before[t] != now[t])),
                _ => None,
            };
            Ok((outcome, seen))
        };
        let ((a, a_times), (b, b_times)) = if b_first {
            let b = on(1)?;
            (on(0)?, b)
        } else {
            let a = on(0)?;
            (a, on(1)?)
        };
        // Read while P and Q still hold their descriptors and locks.
        let state = State::read(&dir.path, &setup)?;
        Ok(([a, b], [a_times, b_times], state))
    })();
    for fd in setup.all_fds().chain(setup.dirs.iter().flatten().copied()) {
        // Best effort: the scratch directory goes with `dir` anyway.
        let _ = host.close(fd);
    }
    result
}

type Job = Box<dyn FnOnce() + Send>;

/// A thread standing for a process: it has a file table of its own (a
/// copy of this process's when it started, so it holds the setup's
/// descriptors) and keeps it, with its locks, until dropped.
struct Process {
    jobs: Option<mpsc::Sender<Job>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Process {
    fn start() -> Result<Process, String> {
        let (jobs, queue) = mpsc::channel::<Job>();
        let (ready, started) = mpsc::channel();
        let thread = std::thread::spawn(move || {
            let _ = ready.send(own_file_table());
            for job in queue {
                job();
            }
        });
        started.recv().map_err(|_| "a process thread died".to_string())??;
        Ok(Process { jobs: Some(jobs), thread: Some(thread) })
    }

    /// Runs `f` on this process's thread, with the host's calls.
    fn run<R: Send + 'static>(
        &self,
        f: impl FnOnce(&dyn Syscalls) -> R + Send + 'static,
        host: &Arc<dyn Syscalls>,
    ) -> Result<R, String> {
        let (reply, answer) = mpsc::channel();
        let host = Arc::clone(host);
        let job: Job = Box::new(move || {
            let _ = reply.send(f(&*host));
        });
        self.jobs.as_ref().and_then(|jobs| jobs.send(job).ok()).ok_or("a process thread is gone")?;
        answer.recv().map_err(|_| "a call panicked".to_string())
    }
}

impl Drop for Process {
    fn drop(&mut self) {
        drop(self.jobs.take());
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

/// The state two orders are compared on (see the module documentation).
#[derive(Debug, PartialEq, Eq)]
struct State {
    /// Per name, relative to the root: what it is.
    names: BTreeMap<Vec<u8>, Entry>,
    /// The setup descriptors' offsets.
    offsets: Vec<i64>,
}

/// A lock `F_OFD_GETLK` reported: type, start, length, and whether an
/// OFD lock (else a POSIX one).
type Probed = (i16, i64, i64, bool);

#[derive(Debug, PartialEq, Eq)]
struct Entry {
    mode: u32,
    size: u64,
    nlink: u64,
    /// The first name (in sorted order) of the same inode.
    inode_of: Vec<u8>,
    contents: u64,
    xattrs: [Option<Vec<u8>>; 2],
    /// At each of [`super::lock_boundaries`] of a regular file: the lock
    /// `F_OFD_GETLK` reports for the byte there.
    locks: Vec<Probed>,
    /// `flock`: 0 none, 1 shared, 2 exclusive.
    flock: u8,
}

impl State {
    fn read(root: &Path, setup: &Setup) -> Result<State, String> {
        let mut names = BTreeMap::new();
        let mut first_of_inode = BTreeMap::new();
        walk(root, root, &mut names, &mut first_of_inode).map_err(|e| format!("reading the state: {e}"))?;
        let offsets = setup
            .all_fds()
            // SAFETY: lseek takes no pointers; the descriptors are open.
            .map(|fd| unsafe { libc::lseek(fd, 0, libc::SEEK_CUR) })
            .collect();
        Ok(State { names, offsets })
    }
}

fn walk(
    root: &Path,
    dir: &Path,
    names: &mut BTreeMap<Vec<u8>, Entry>,
    first_of_inode: &mut BTreeMap<u64, Vec<u8>>,
) -> std::io::Result<()> {
    let mut entries: Vec<_> = std::fs::read_dir(dir)?.collect::<std::io::Result<_>>()?;
    entries.sort_by_key(|e| e.file_name());
    for entry in entries {
        let path = entry.path();
        let meta = std::fs::symlink_metadata(&path)?;
        let rel = path.strip_prefix(root).unwrap_or(&path).as_os_str().as_bytes().to_vec();
        let inode_of = first_of_inode.entry(meta.ino()).or_insert_with(|| rel.clone()).clone();
        let file = meta.file_type().is_file();
        let c_path = CString::new(path.as_os_str().as_bytes()).map_err(std::io::Error::other)?;
        let contents = if file { digest([&std::fs::read(&path)?[..]]) } else { 0 };
        let (locks, flock) = if file { probe_locks(&c_path)? } else { (Vec::new(), 0) };
        let xattrs = [xattr(&c_path, XATTR_A), xattr(&c_path, XATTR_B)];
        let size = if meta.is_dir() { 0 } else { meta.size() };
        names.insert(
            rel,
            Entry { mode: meta.mode(), size, nlink: meta.nlink(), inode_of, contents, xattrs, locks, flock },
        );
        if meta.is_dir() {
            walk(root, &path, names, first_of_inode)?;
        }
    }
    Ok(())
}

/// The value of the extended attribute `name`, if set.
fn xattr(path: &CString, name: &std::ffi::CStr) -> Option<Vec<u8>> {
    let mut buf = [0u8; 64];
    // SAFETY: both strings are C strings; `buf` is ours for its length.
    let n = unsafe { libc::lgetxattr(path.as_ptr(), name.as_ptr(), buf.as_mut_ptr().cast(), buf.len()) };
    usize::try_from(n).ok().map(|n| buf[..n].to_vec())
}

/// The record locks of the file, as `F_OFD_GETLK` from a new description
/// sees them at each byte where one can begin or end, and its `flock`
/// state.
fn probe_locks(path: &CString) -> std::io::Result<(Vec<Probed>, u8)> {
    let fd = crate::host::open_raw(path, libc::O_RDWR, 0)?;
    let mut locks = Vec::new();
    for byte in super::lock_boundaries() {
        // SAFETY: flock is plain data; zeroed is a valid value.
        let mut lock: libc::flock = unsafe { std::mem::zeroed() };
        lock.l_type = libc::F_WRLCK as libc::c_short;
        lock.l_whence = libc::SEEK_SET as libc::c_short;
        lock.l_start = byte as i64;
        lock.l_len = 1;
        // SAFETY: `lock` is a valid flock for the call.
        crate::host::check(unsafe { libc::fcntl(fd, libc::F_OFD_GETLK, &mut lock) })?;
        locks.push((lock.l_type, lock.l_start, lock.l_len, lock.l_pid == -1));
    }
    let try_flock = |op: libc::c_int| {
        // SAFETY: flock takes no pointers; `fd` is ours.
        let taken = unsafe { libc::flock(fd, op | libc::LOCK_NB) } == 0;
        if taken {
            // SAFETY: as above.
            unsafe { libc::flock(fd, libc::LOCK_UN) };
        }
        taken
    };
    let flock = if try_flock(libc::LOCK_EX) {
        0
    } else if try_flock(libc::LOCK_SH) {
        1
    } else {
        2
    };
    // SAFETY: `fd` is ours and not used again.
    unsafe { libc::close(fd) };
    Ok((locks, flock))
}
