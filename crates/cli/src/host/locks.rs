//! Seed 004 on the host: lockperf-style tests on tmpfs files (or files
//! under `--dir`). lockperf
//! (Jeff Layton) was not retrievable, so the tests are defined here, the
//! same way vfscale's own lock workloads define them:
//!
//! - `flock01` / `flock02`: `flock(LOCK_EX)` + `flock(LOCK_UN)` on one
//!   shared file (each thread its own open file description, so they
//!   contend) / on each thread's own file.
//! - `posix01` / `posix02`: a whole-file POSIX write lock taken with
//!   `F_SETLKW` and released, on one shared file / on own files.
//! - `posix03`: blocked waiters — each thread write-locks bytes [t, t+2) of
//!   one shared file, overlapping both neighbours, so chains of waiters form.
//! - `posix04`: deadlock detection — threads form rings of up to four; each
//!   locks its own byte, then waits (`F_SETLKW`) for the next one's byte, so
//!   every blocking request walks the ring's chain of owners and the one
//!   that would close the cycle gets `EDEADLK`, drops its byte, and lets
//!   the others through.
//! - `lease01` / `lease02`: set and remove a read lease (`F_SETLEASE`) on
//!   own files / on one shared file.
//!
//! POSIX locks belong to a process (its file table), so threads of one
//! process never conflict; each POSIX thread therefore first unshares its
//! file table (`unshare(CLONE_FILES)`), which makes it a lock owner of its
//! own, as lockperf's processes were.

use super::{check, close_raw, cstring, open_raw, Build, Built, HostWorkload, ScratchDir};
use crate::workloads::Subject;
use std::io;
use std::path::Path;
use std::sync::atomic::{AtomicUsize, Ordering};

/// What one operation does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Test {
    Flock,
    Posix,
    PosixChain,
    PosixDeadlock,
    Lease,
}

const fn test(
    name: &'static str,
    about: &'static str,
    build: fn(Option<&Path>) -> Result<Built, String>,
) -> HostWorkload {
    HostWorkload { name, about, default_iterations: 10_000, build: Build::InDir(build) }
}

pub(super) const FLOCK01: HostWorkload =
    test("flock01", "flock LOCK_EX + LOCK_UN on one shared file", |under| build(Test::Flock, true, under));
pub(super) const FLOCK02: HostWorkload =
    test("flock02", "flock LOCK_EX + LOCK_UN on each thread's own file", |under| build(Test::Flock, false, under));
pub(super) const POSIX01: HostWorkload =
    test("posix01", "POSIX F_SETLKW whole-file write lock + unlock on one shared file", |under| {
        build(Test::Posix, true, under)
    });
pub(super) const POSIX02: HostWorkload =
    test("posix02", "POSIX F_SETLKW whole-file write lock + unlock on own files", |under| {
        build(Test::Posix, false, under)
    });
pub(super) const POSIX03: HostWorkload =
    test("posix03", "POSIX write lock of bytes [t, t+2) of one file: waiter chains", |under| {
        build(Test::PosixChain, true, under)
    });
pub(super) const POSIX04: HostWorkload =
    test("posix04", "POSIX lock byte t, then byte t+1 (F_SETLKW): deadlock-detection walks", |under| {
        build(Test::PosixDeadlock, true, under)
    });
pub(super) const LEASE01: HostWorkload =
    test("lease01", "F_SETLEASE read lease + unlock on each thread's own file", |under| {
        build(Test::Lease, false, under)
    });
pub(super) const LEASE02: HostWorkload =
    test("lease02", "F_SETLEASE read lease + unlock on one shared file", |under| build(Test::Lease, true, under));

fn build(test: Test, shared: bool, under: Option<&Path>) -> Result<Built, String> {
    let dir = ScratchDir::new("locks", under)?;
    let note = dir.note.clone();
    Ok(Built { subject: Box::new(LockSubject { dir, test, shared, threads: AtomicUsize::new(1) }), note })
}

#[derive(Debug)]
struct LockSubject {
    dir: ScratchDir,
    test: Test,
    shared: bool,
    /// Threads of the current run (posix04 forms its rings from it).
    threads: AtomicUsize,
}

impl LockSubject {
    fn file_name(&self, thread: usize) -> String {
        if self.shared {
            "shared".to_string()
        } else {
            format!("own{thread}")
        }
    }
}

/// A POSIX lock request (`type_` F_WRLCK or F_UNLCK) on `len` bytes from
/// `start`; `len` 0 means to the end of the file.
pub(crate) fn posix(fd: libc::c_int, cmd: libc::c_int, type_: libc::c_int, start: usize, len: usize) -> io::Result<()> {
    // SAFETY: flock is plain data; zeroed is a valid value.
    let mut lock: libc::flock = unsafe { std::mem::zeroed() };
    lock.l_type = type_ as libc::c_short;
    lock.l_whence = libc::SEEK_SET as libc::c_short;
    lock.l_start = start as libc::off_t;
    lock.l_len = len as libc::off_t;
    // SAFETY: `lock` is a valid flock for the duration of the call.
    check(unsafe { libc::fcntl(fd, cmd, &lock) }).map(drop)
}

/// Threads per deadlock ring in `posix04`.
const RING: usize = 4;

fn one_op(test: Test, fd: libc::c_int, thread: usize, threads: usize) -> io::Result<()> {
    match test {
        Test::Flock => {
            // SAFETY: flock takes an fd we own; no memory is passed.
            check(unsafe { libc::flock(fd, libc::LOCK_EX) })?;
            // SAFETY: as above.
            check(unsafe { libc::flock(fd, libc::LOCK_UN) }).map(drop)
        }
        Test::Posix => {
            posix(fd, libc::F_SETLKW, libc::F_WRLCK, 0, 0)?;
            posix(fd, libc::F_SETLK, libc::F_UNLCK, 0, 0)
        }
        Test::PosixChain => {
            posix(fd, libc::F_SETLKW, libc::F_WRLCK, thread, 2)?;
            posix(fd, libc::F_SETLK, libc::F_UNLCK, thread, 2)
        }
        Test::PosixDeadlock => {
            let ring = thread / RING * RING;
            let next = ring + (thread - ring + 1) % RING.min(threads - ring);
            posix(fd, libc::F_SETLKW, libc::F_WRLCK, thread, 1)?;
            match posix(fd, libc::F_SETLKW, libc::F_WRLCK, next, 1) {
                Err(e) if e.raw_os_error() != Some(libc::EDEADLK) => return Err(e),
                _ => {}
            }
            posix(fd, libc::F_SETLK, libc::F_UNLCK, thread, 1)?;
            posix(fd, libc::F_SETLK, libc::F_UNLCK, next, 1)
        }
        Test::Lease => {
            // SAFETY: fcntl with integer arguments on an fd we own.
            check(unsafe { libc::fcntl(fd, libc::F_SETLEASE, libc::F_RDLCK) })?;
            // SAFETY: as above.
            check(unsafe { libc::fcntl(fd, libc::F_SETLEASE, libc::F_UNLCK) }).map(drop)
        }
    }
}

impl Subject for LockSubject {
    fn prepare_run(&self, threads: usize) {
        self.threads.store(threads, Ordering::Relaxed);
        // The files exist and are closed before the run: a read lease needs
        // an inode with no writer. Made read-only, so none ever has one: a
        // child another thread forks (mount-bench's clients are forked
        // without exec) keeps a copy of every descriptor open at that
        // moment for its life, and a writable one made the lease EAGAIN.
        for t in 0..threads {
            let path = self.dir.path.join(self.file_name(t));
            let fd = open_raw(&cstring(&path), libc::O_RDONLY | libc::O_CREAT, 0o644)
                .unwrap_or_else(|e| panic!("create {}: {e}", path.display()));
            close_raw(fd);
        }
    }

    fn run_thread(&self, thread: usize, iterations: u64) {
        let posix_test = matches!(self.test, Test::Posix | Test::PosixChain | Test::PosixDeadlock);
        // SAFETY: unshare on the calling thread only; it copies this
        // thread's file table, which nothing else holds a pointer into.
        if posix_test && unsafe { libc::unshare(libc::CLONE_FILES) } != 0 {
            panic!("unshare(CLONE_FILES) for a private POSIX lock owner: {}", io::Error::last_os_error());
        }
        let path = cstring(&self.dir.path.join(self.file_name(thread)));
        let mode = if self.test == Test::Lease { libc::O_RDONLY } else { libc::O_RDWR };
        let fd = open_raw(&path, mode, 0).unwrap_or_else(|e| panic!("open {path:?}: {e}"));
        let threads = self.threads.load(Ordering::Relaxed);
        let result = (0..iterations).try_for_each(|_| one_op(self.test, fd, thread, threads));
        close_raw(fd);
        if let Err(e) = result {
            panic!("{:?} on {path:?}: {e}", self.test);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The lock files are made and closed without ever being open for
    /// writing (inotify tells a close of a writable descriptor from
    /// another's), so no descriptor a forked child inherits can hold off a
    /// read lease. The test waits for all three closes: a child another
    /// test forks while a file is open delays its close event until the
    /// child lets the descriptor go.
    #[test]
    fn lock_files_are_never_open_for_writing() {
        use std::collections::BTreeSet;
        let dir = ScratchDir::new("locks", None).expect("a lock directory");
        let subject = LockSubject { dir, test: Test::Lease, shared: false, threads: AtomicUsize::new(1) };
        // SAFETY: inotify_init1 with valid flags.
        let inotify = check(unsafe { libc::inotify_init1(libc::IN_CLOEXEC) }).expect("inotify");
        let watched = cstring(&subject.dir.path);
        // SAFETY: a valid descriptor and C string.
        let watch = unsafe {
            libc::inotify_add_watch(inotify, watched.as_ptr(), libc::IN_CLOSE_WRITE | libc::IN_CLOSE_NOWRITE)
        };
        assert!(watch >= 0, "inotify_add_watch: {}", io::Error::last_os_error());
        subject.prepare_run(3);
        let made: BTreeSet<String> = (0..3).map(|t| subject.file_name(t)).collect();
        let mut closed = BTreeSet::new();
        let mut events = [0u8; 4096];
        // Not a timing bound: a child lets its descriptors go when its
        // test ends, seconds later; the deadline only turns a hang (a
        // child that never ends) into a failure that names the files.
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(600);
        while !made.is_subset(&closed) {
            let left = deadline.saturating_duration_since(std::time::Instant::now());
            assert!(!left.is_zero(), "no close event of {:?} in 600 s", made.difference(&closed).collect::<Vec<_>>());
            let mut ready = libc::pollfd { fd: inotify, events: libc::POLLIN, revents: 0 };
            // SAFETY: one valid pollfd.
            if unsafe { libc::poll(&mut ready, 1, left.as_millis().min(1000) as libc::c_int) } <= 0 {
                continue;
            }
            // SAFETY: `events` is valid for its length.
            let n = unsafe { libc::read(inotify, events.as_mut_ptr().cast(), events.len()) };
            if n < 0 && io::Error::last_os_error().kind() == io::ErrorKind::Interrupted {
                continue;
            }
            assert!(n > 0, "reading close events: {}", io::Error::last_os_error());
            let mut offset = 0;
            while offset < n as usize {
                let header = std::mem::size_of::<libc::inotify_event>();
                // SAFETY: the kernel wrote whole inotify_event records; the
                // header is read unaligned from the byte buffer.
                let event: libc::inotify_event =
                    unsafe { std::ptr::read_unaligned(events.as_ptr().add(offset).cast()) };
                assert_eq!(event.mask & libc::IN_Q_OVERFLOW, 0, "the event queue overflowed");
                let name = &events[offset + header..offset + header + event.len as usize];
                let name = String::from_utf8_lossy(name).trim_end_matches('\0').to_string();
                offset += header + event.len as usize;
                if name.is_empty() {
                    continue; // the directory itself, not a file in it
                }
                assert_eq!(event.mask & libc::IN_CLOSE_WRITE, 0, "{name} was open for writing");
                closed.insert(name);
            }
        }
        close_raw(inotify);
    }
}
