//! Differential test of file locks against the host kernel: random
//! sequences of flock / OFD / POSIX operations (proptest, seeded, bounded)
//! run on vfscale and on real files in a temp dir, with identical outcomes
//! required; plus fixed cases for deadlock detection and lease breaks.
//!
//! Owners: three workers, each a process — a forked child on the host
//! (driven over pipes with fixed-size messages, so the child only makes
//! system calls between `fork` and `_exit`), a [`Process`] on vfscale. Each
//! worker opens each of two files twice, so flock and OFD locks of one
//! process on several descriptions, and POSIX locks taken through one
//! descriptor and dropped by closing another, are all exercised.
//!
//! Every vfscale design of a file's record locks runs each sequence: one
//! list, and stripes of 1 and 4 bytes (so the small ranges here cross
//! stripes, merge and split across them, and shard the file), and the
//! default 4 KiB stripes.

use proptest::prelude::*;
use proptest::test_runner::{Config, RngAlgorithm, TestRng, TestRunner};
use std::ffi::CString;
use std::time::{Duration, Instant};
use vfscale::config::RecordLocks;
use vfscale::locks::{Flock, Interrupt, F_RDLCK, F_UNLCK, F_WRLCK, LOCK_EX, LOCK_NB, LOCK_SH, LOCK_UN};
use vfscale::{Credentials, Errno, OpenFlags, Process, Vfs, VfsConfig};
use vfscale_sync::test_support::wait_until;

const WORKERS: usize = 3;
const FILES: usize = 2;
/// Descriptors per file per worker.
const DUPS: usize = 2;
const FDS: usize = FILES * DUPS;
/// How long a call that must be answered may take: only a hang guard, as
/// a call that does not block answers in microseconds, and a slow, busy
/// machine delays it by milliseconds at worst.
const ANSWER: Duration = Duration::from_secs(30);
/// The record-lock designs each case runs on.
const DESIGNS: [RecordLocks; 4] = [
    RecordLocks::List,
    RecordLocks::Striped { stripe_shift: 0 },
    RecordLocks::Striped { stripe_shift: 2 },
    RecordLocks::STRIPED,
];

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(i32)]
enum Op {
    Flock = 1,
    SetLk,
    GetLk,
    OfdSetLk,
    OfdGetLk,
    SetLkw,
    Reopen,
    SetLease,
    GetLease,
}

/// One command to a worker; `#[repr(C)]` so a child can read it with one
/// `read` into a stack buffer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(C)]
struct Cmd {
    op: Op,
    fd: i32,
    arg: i32,
    lock: RawFlock,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[repr(C)]
struct RawFlock {
    l_type: i16,
    l_whence: i16,
    l_start: i64,
    l_len: i64,
    l_pid: i32,
}

/// A result: 0 or the errno, and the lock `F_GETLK` wrote back (with
/// `l_pid` mapped to a worker index, -1 for OFD locks).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[repr(C)]
struct Reply {
    err: i32,
    value: i32,
    lock: RawFlock,
}

fn to_flock(l: RawFlock) -> Flock {
    Flock { l_type: l.l_type, l_whence: l.l_whence, l_start: l.l_start, l_len: l.l_len, l_pid: l.l_pid }
}

fn from_flock(l: Flock) -> RawFlock {
    RawFlock { l_type: l.l_type, l_whence: l.l_whence, l_start: l.l_start, l_len: l.l_len, l_pid: l.l_pid }
}

// ---- host side -------------------------------------------------------------

struct HostWorker {
    pid: libc::pid_t,
    cmd: libc::c_int,
    reply: libc::c_int,
}

fn errno() -> i32 {
    std::io::Error::last_os_error().raw_os_error().unwrap_or(0)
}

/// The child's loop: only system calls on stack data until `_exit`.
fn child_loop(paths: &[CString; FILES], cmd_fd: libc::c_int, reply_fd: libc::c_int) -> ! {
    let mut fds = [-1; FDS];
    let open = |i: usize| {
        // SAFETY: a NUL-terminated path made before fork.
        unsafe { libc::open(paths[i / DUPS].as_ptr(), libc::O_RDWR) }
    };
    for (i, fd) in fds.iter_mut().enumerate() {
        *fd = open(i);
    }
    loop {
        let mut cmd = std::mem::MaybeUninit::<Cmd>::uninit();
        let size = std::mem::size_of::<Cmd>();
        // SAFETY: reads at most `size` bytes into the command buffer.
        let n = unsafe { libc::read(cmd_fd, cmd.as_mut_ptr().cast(), size) };
        if n != size as isize {
            // SAFETY: leaving the child without running destructors.
            unsafe { libc::_exit(1) };
        }
        // SAFETY: the parent wrote a whole, valid `Cmd`.
        let cmd = unsafe { cmd.assume_init() };
        let fd = fds[cmd.fd as usize];
        // SAFETY: `flock` is plain integers, for which all zeroes is valid.
        let mut fl: libc::flock = unsafe { std::mem::zeroed() };
        fl.l_type = cmd.lock.l_type;
        fl.l_whence = cmd.lock.l_whence;
        fl.l_start = cmd.lock.l_start;
        fl.l_len = cmd.lock.l_len;
        fl.l_pid = cmd.lock.l_pid;
        // SAFETY: plain system calls on descriptors this child owns.
        let ret = unsafe {
            match cmd.op {
                Op::Flock => libc::flock(fd, cmd.arg),
                Op::SetLk => libc::fcntl(fd, libc::F_SETLK, &mut fl),
                Op::SetLkw => libc::fcntl(fd, libc::F_SETLKW, &mut fl),
                Op::GetLk => libc::fcntl(fd, libc::F_GETLK, &mut fl),
                Op::OfdSetLk => libc::fcntl(fd, libc::F_OFD_SETLK, &mut fl),
                Op::OfdGetLk => libc::fcntl(fd, libc::F_OFD_GETLK, &mut fl),
                Op::SetLease => libc::fcntl(fd, libc::F_SETLEASE, cmd.arg),
                Op::GetLease => libc::fcntl(fd, libc::F_GETLEASE),
                Op::Reopen => {
                    libc::close(fd);
                    fds[cmd.fd as usize] = open(cmd.fd as usize);
                    0
                }
            }
        };
        let reply = Reply {
            err: if ret < 0 { errno() } else { 0 },
            value: ret.max(0),
            lock: RawFlock {
                l_type: fl.l_type,
                l_whence: fl.l_whence,
                l_start: fl.l_start,
                l_len: fl.l_len,
                l_pid: fl.l_pid,
            },
        };
        // SAFETY: writes the reply from the stack.
        unsafe { libc::write(reply_fd, (&reply as *const Reply).cast(), std::mem::size_of::<Reply>()) };
    }
}

impl HostWorker {
    fn spawn(paths: &[CString; FILES]) -> HostWorker {
        let (mut c, mut r) = ([0; 2], [0; 2]);
        // SAFETY: pipe fills the arrays; fork's child only runs `child_loop`.
        unsafe {
            assert_eq!(libc::pipe(c.as_mut_ptr()), 0);
            assert_eq!(libc::pipe(r.as_mut_ptr()), 0);
            let pid = libc::fork();
            assert!(pid >= 0, "fork");
            if pid == 0 {
                child_loop(paths, c[0], r[1]);
            }
            libc::close(c[0]);
            libc::close(r[1]);
            HostWorker { pid, cmd: c[1], reply: r[0] }
        }
    }

    fn send(&self, cmd: Cmd) {
        let size = std::mem::size_of::<Cmd>();
        // SAFETY: writes the command from the stack.
        assert_eq!(unsafe { libc::write(self.cmd, (&cmd as *const Cmd).cast(), size) }, size as isize);
    }

    /// Sends `cmd`, which must block in the kernel, and returns once the
    /// kernel lists this worker as waiting for a lock.
    fn send_blocking(&self, cmd: Cmd) {
        self.send(cmd);
        let start = Instant::now();
        while !host_waits(self.pid) {
            if let Some(reply) = self.recv(Duration::ZERO) {
                panic!("{cmd:?} did not block on the host: {reply:?}");
            }
            assert!(start.elapsed() < ANSWER, "{cmd:?} neither blocked nor answered on the host");
            std::thread::sleep(Duration::from_millis(1));
        }
    }

    /// The reply, or `None` if none came within `timeout`.
    fn recv(&self, timeout: Duration) -> Option<Reply> {
        let mut poll = libc::pollfd { fd: self.reply, events: libc::POLLIN, revents: 0 };
        // SAFETY: one pollfd on the stack.
        if unsafe { libc::poll(&mut poll, 1, timeout.as_millis() as i32) } != 1 {
            return None;
        }
        let mut reply = Reply::default();
        let size = std::mem::size_of::<Reply>();
        // SAFETY: reads one reply into the stack buffer.
        assert_eq!(unsafe { libc::read(self.reply, (&mut reply as *mut Reply).cast(), size) }, size as isize);
        Some(reply)
    }
}

/// Whether the kernel lists `pid` as waiting for a lock: `/proc/locks`
/// shows each waiter under the lock it waits for, as
/// `4: -> POSIX  ADVISORY  WRITE <pid> ...`.
fn host_waits(pid: libc::pid_t) -> bool {
    let locks = std::fs::read_to_string("/proc/locks").expect("read /proc/locks");
    locks.lines().any(|line| {
        let mut words = line.split_whitespace().skip_while(|w| *w != "->");
        words.next().is_some() && words.nth(3).and_then(|w| w.parse().ok()) == Some(pid)
    })
}

impl Drop for HostWorker {
    fn drop(&mut self) {
        // SAFETY: ends the child we forked and reaps it.
        unsafe {
            libc::kill(self.pid, libc::SIGKILL);
            libc::waitpid(self.pid, std::ptr::null_mut(), 0);
            libc::close(self.cmd);
            libc::close(self.reply);
        }
    }
}

struct Host {
    _dir: tempfile::TempDir,
    paths: [CString; FILES],
    workers: Vec<HostWorker>,
}

impl Host {
    fn new() -> Host {
        let dir = tempfile::tempdir().unwrap();
        let paths: [CString; FILES] = std::array::from_fn(|i| {
            let p = dir.path().join(format!("f{i}"));
            std::fs::write(&p, b"").unwrap();
            CString::new(p.to_str().unwrap()).unwrap()
        });
        let workers = (0..WORKERS).map(|_| HostWorker::spawn(&paths)).collect();
        Host { _dir: dir, paths, workers }
    }

    fn run(&self, w: usize, cmd: Cmd, timeout: Duration) -> Option<Reply> {
        self.workers[w].send(cmd);
        self.workers[w].recv(timeout).map(|r| self.map_pid(r))
    }

    fn map_pid(&self, mut r: Reply) -> Reply {
        if r.lock.l_pid > 0 {
            r.lock.l_pid = self.workers.iter().position(|w| w.pid == r.lock.l_pid).map_or(-2, |i| i as i32);
        }
        r
    }
}

// ---- vfscale side ----------------------------------------------------------

struct Model {
    vfs: Vfs,
    procs: Vec<Process>,
    fds: Vec<[i32; FDS]>,
}

impl Model {
    fn new(record_locks: RecordLocks) -> Model {
        let vfs = Vfs::new(VfsConfig { record_locks, ..VfsConfig::default() });
        let root = vfs.process(Credentials::root());
        for f in 0..FILES {
            root.close(root.open(format!("/f{f}"), OpenFlags::CREAT | OpenFlags::RDWR, 0o644).unwrap()).unwrap();
        }
        let procs: Vec<Process> = (0..WORKERS).map(|_| vfs.process(Credentials::root())).collect();
        let fds = procs.iter().map(|p| std::array::from_fn(|i| Self::open(p, i))).collect();
        Model { vfs, procs, fds }
    }

    fn open(p: &Process, i: usize) -> i32 {
        p.open(format!("/f{}", i / DUPS), OpenFlags::RDWR, 0).unwrap()
    }

    fn run(&mut self, w: usize, cmd: Cmd, intr: &Interrupt<'_>) -> Reply {
        let p = &self.procs[w];
        let fd = self.fds[w][cmd.fd as usize];
        let mut lock = to_flock(cmd.lock);
        let mut value = 0;
        let result = match cmd.op {
            Op::Flock => p.flock_interruptible(fd, cmd.arg, intr),
            Op::SetLk => p.fcntl_setlk(fd, &lock),
            Op::SetLkw => p.fcntl_setlkw(fd, &lock, intr),
            Op::GetLk => p.fcntl_getlk(fd, &mut lock),
            Op::OfdSetLk => p.ofd_setlk(fd, &lock),
            Op::OfdGetLk => p.ofd_getlk(fd, &mut lock),
            Op::SetLease => p.setlease(fd, cmd.arg),
            Op::GetLease => p.getlease(fd).map(|t| value = t.into()),
            Op::Reopen => {
                p.close(fd).unwrap();
                self.fds[w][cmd.fd as usize] = Self::open(p, cmd.fd as usize);
                Ok(())
            }
        };
        if lock.l_pid > 0 {
            lock.l_pid = self.procs.iter().position(|p| p.pid() == lock.l_pid).map_or(-2, |i| i as i32);
        }
        Reply { err: result.err().map_or(0, Errno::raw), value, lock: from_flock(lock) }
    }
}

// ---- random sequences ------------------------------------------------------

fn cmd(op: Op, fd: usize, arg: i32, lock: RawFlock) -> Cmd {
    Cmd { op, fd: fd as i32, arg, lock }
}

fn arb_step() -> impl Strategy<Value = (usize, Cmd)> {
    let range = (prop_oneof![Just(F_RDLCK), Just(F_WRLCK), Just(F_UNLCK)], 0i64..12, -3i64..8, 0i16..3)
        .prop_map(|(l_type, l_start, l_len, l_whence)| RawFlock { l_type, l_whence, l_start, l_len, l_pid: 0 });
    let flock_op = prop_oneof![Just(LOCK_SH), Just(LOCK_EX), Just(LOCK_UN)];
    let op = prop_oneof![
        3 => flock_op.prop_map(|o| (Op::Flock, o | LOCK_NB)),
        4 => Just((Op::SetLk, 0)),
        2 => Just((Op::GetLk, 0)),
        3 => Just((Op::OfdSetLk, 0)),
        2 => Just((Op::OfdGetLk, 0)),
        1 => Just((Op::Reopen, 0)),
    ];
    (0..WORKERS, 0..FDS, op, range).prop_map(|(w, fd, (op, arg), lock)| (w, cmd(op, fd, arg, lock)))
}

#[test]
fn random_sequences_match_the_kernel() {
    let config = Config { cases: 256, failure_persistence: None, ..Config::default() };
    let rng = TestRng::from_seed(RngAlgorithm::ChaCha, &[4; 32]);
    let mut runner = TestRunner::new_with_rng(config, rng);
    runner
        .run(&proptest::collection::vec(arb_step(), 1..40), |steps| {
            let host = Host::new();
            let mut models = DESIGNS.map(Model::new);
            for (i, (w, cmd)) in steps.iter().enumerate() {
                // SEEK_CUR/SEEK_END are relative to offset 0 and size 0 on
                // both sides: no data is ever written.
                let want = host.run(*w, *cmd, ANSWER).expect("non-blocking op blocked");
                for (design, model) in DESIGNS.iter().zip(&mut models) {
                    let got = model.run(*w, *cmd, &Interrupt::never());
                    prop_assert_eq!(got, want, "{:?}: step {} of {:?}", design, i, steps);
                }
            }
            drop(host.paths);
            Ok(())
        })
        .unwrap();
}

// ---- fixed cases -----------------------------------------------------------

fn setlk(op: Op, fd: usize, t: i16, start: i64, len: i64) -> Cmd {
    cmd(op, fd, 0, from_flock(Flock::new(t, start, len)))
}

#[test]
fn deadlock_cycles_match_the_kernel() {
    for design in DESIGNS {
        deadlock_cycle(design);
    }
}

fn deadlock_cycle(design: RecordLocks) {
    let host = Host::new();
    let mut model = Model::new(design);
    // Each worker takes byte w, then waits for byte w+1; the last closes
    // the cycle and gets EDEADLK on both.
    for w in 0..WORKERS {
        let c = setlk(Op::SetLk, 0, F_WRLCK, w as i64, 1);
        assert_eq!(host.run(w, c, ANSWER).expect("answered").err, 0);
        assert_eq!(model.run(w, c, &Interrupt::never()).err, 0);
    }
    std::thread::scope(|s| {
        let model = &mut model;
        let Model { vfs, procs, fds } = model;
        let mut waiting = Vec::new();
        for w in 0..WORKERS - 1 {
            let c = setlk(Op::SetLkw, 0, F_WRLCK, w as i64 + 1, 1);
            host.workers[w].send_blocking(c);
            let (p, fd) = (&procs[w], fds[w][0]);
            waiting.push(s.spawn(move || p.fcntl_setlkw(fd, &to_flock(c.lock), &Interrupt::never())));
            wait_until("the request blocks", || vfs.locks().blocked() > w);
        }
        let last = WORKERS - 1;
        let c = setlk(Op::SetLkw, 0, F_WRLCK, 0, 1);
        assert_eq!(host.run(last, c, ANSWER).expect("answered").err, libc::EDEADLK);
        let (p, fd) = (&procs[last], fds[last][0]);
        assert_eq!(p.fcntl_setlkw(fd, &to_flock(c.lock), &Interrupt::never()), Err(Errno::EDEADLK));
        // The last worker lets go: the chain unwinds on both sides.
        let unlock = setlk(Op::SetLk, 0, F_UNLCK, 0, 0);
        assert_eq!(host.run(last, unlock, ANSWER).expect("answered").err, 0);
        p.fcntl_setlk(fd, &to_flock(unlock.lock)).unwrap();
        for w in (0..WORKERS - 1).rev() {
            assert_eq!(host.workers[w].recv(ANSWER).map(|r| r.err), Some(0), "worker {w} got its lock");
            assert_eq!(waiting.pop().unwrap().join().unwrap(), Ok(()));
            assert_eq!(host.run(w, unlock, ANSWER).expect("answered").err, 0);
            procs[w].fcntl_setlk(fds[w][0], &to_flock(unlock.lock)).unwrap();
        }
    });
}

#[test]
fn lease_cases_match_the_kernel() {
    let host = Host::new();
    let mut model = Model::new(RecordLocks::STRIPED);
    let mut both = |w: usize, c: Cmd| {
        let want = host.run(w, c, ANSWER).expect("lease ops do not block here");
        let got = model.run(w, c, &Interrupt::never());
        assert_eq!((got.err, got.value), (want.err, want.value), "{c:?} by worker {w}");
        got
    };
    let lease = |fd: usize, arg: i16| cmd(Op::SetLease, fd, arg.into(), RawFlock::default());
    let get = |fd: usize| cmd(Op::GetLease, fd, 0, RawFlock::default());
    // Every worker has the files open read-write: no lease is possible.
    both(0, lease(0, F_RDLCK));
    both(0, lease(0, F_WRLCK));
    both(0, lease(0, 9));
    both(0, lease(0, F_UNLCK));
    both(0, get(0));
    assert_eq!(host.run(0, get(0), ANSWER).expect("answered").value, i32::from(F_UNLCK));
}

#[test]
fn bad_input_matches_the_kernel() {
    let host = Host::new();
    let mut models = DESIGNS.map(Model::new);
    let raw = |l_type, l_whence, l_start, l_len, l_pid| RawFlock { l_type, l_whence, l_start, l_len, l_pid };
    let cases = [
        cmd(Op::SetLk, 0, 0, raw(F_RDLCK, 3, 0, 0, 0)),
        cmd(Op::SetLk, 0, 0, raw(7, 0, 0, 0, 0)),
        cmd(Op::SetLk, 0, 0, raw(F_RDLCK, 0, 1, i64::MAX, 0)),
        cmd(Op::SetLk, 0, 0, raw(F_RDLCK, 0, 2, i64::MAX, 0)),
        cmd(Op::SetLk, 0, 0, raw(F_RDLCK, 0, 5, -6, 0)),
        cmd(Op::SetLk, 0, 0, raw(F_RDLCK, 1, i64::MAX, 1, 0)),
        cmd(Op::GetLk, 1, 0, raw(F_UNLCK, 0, 0, 0, 0)),
        cmd(Op::OfdSetLk, 1, 0, raw(F_RDLCK, 0, 0, 0, 1)),
        cmd(Op::OfdGetLk, 1, 0, raw(F_RDLCK, 0, 0, 0, 1)),
        cmd(Op::OfdGetLk, 1, 0, raw(F_UNLCK, 0, 0, 0, 0)),
        cmd(Op::Flock, 0, 0, RawFlock::default()),
        cmd(Op::Flock, 0, LOCK_SH | LOCK_EX, RawFlock::default()),
    ];
    for c in cases {
        let want = host.run(1, c, ANSWER).expect("does not block");
        for (design, model) in DESIGNS.iter().zip(&mut models) {
            assert_eq!(model.run(1, c, &Interrupt::never()), want, "{design:?}: {c:?}");
        }
    }
}
