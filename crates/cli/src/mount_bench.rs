//! `vfscale mount-bench`: how close a fresh `vfscale mount` comes to tmpfs,
//! measured side by side in one run, against the goals of the mount's
//! caching work.
//!
//! It mounts a fresh VFS (served by this process) and, as root, a fresh
//! tmpfs beside it (`TMP/vfscale-mount-bench-PID/{vfscale,tmpfs}`, so paths
//! on both are alike and cross one mount each; other users get a directory
//! in `/dev/shm`), then measures on both, their runs interleaved:
//!
//! 1. One thread, the time per operation of a `stat` of a cached file, a
//!    `stat` of a missing name, an open + read 32 B + close of an unchanged
//!    32-byte file, and a create + close + unlink (the same name each
//!    time), each with the mount's ratio to tmpfs and the requests it
//!    sent to the server per operation (what the kernel could not answer
//!    from its caches).
//! 2. Two client *processes* doing open + read 32 B + close: S2, the
//!    throughput of two over that of one, with a file per process (which
//!    the goal judges) and with one file both open (where the kernel's
//!    per-inode reference counts and locks bound even tmpfs).
//! 3. Unless `--goals-only`: the seed workloads' host drivers that take a
//!    directory (`inode-exit`, `walk`, `flock01`..`lease02`) at 1 and 2
//!    threads, with the mount's throughput over tmpfs's.
//!
//! Then it says which goals are met. The goals are ratios to tmpfs in the
//! same run, so they hold across machines whose absolute speeds differ.

use crate::bench::{self, CellReport, Cells};
use crate::harness::RunPlan;
use crate::host;
use crate::machine::Machine;
use crate::stats::{Bound, Judgement, RoundRatio};
use crate::workloads::Subject;
use clap::Args;
use std::ffi::CString;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use vfscale_fuse::{MountOptions, Mounted, RecordLocks};

/// Arguments of `vfscale mount-bench`.
#[derive(Debug, Args)]
pub struct MountBenchArgs {
    /// Measured runs per cell, after one warm-up run [default: 5; 3 with --quick].
    #[arg(long)]
    runs: Option<usize>,
    /// Three runs per cell and a fifth of the iterations (figures are noisier).
    #[arg(long)]
    quick: bool,
    /// Where the mount keeps record locks (as `vfscale mount --locks`).
    #[arg(long, default_value_t = RecordLocks::Kernel)]
    locks: RecordLocks,
    /// Mount with the demo trees (as `vfscale mount --demo`).
    #[arg(long)]
    demo: bool,
    /// Threads reading the mount's /dev/fuse (as `vfscale mount
    /// --threads`) [default: one per CPU].
    #[arg(long)]
    server_threads: Option<usize>,
    /// Only the goals (parts 1 and 2), not the seed workloads.
    #[arg(long)]
    goals_only: bool,
    /// Microseconds a server thread reading /dev/fuse lingers after a
    /// reply (as `vfscale mount --linger-us`); 0 never.
    #[arg(long, default_value_t = vfscale_fuse::LINGER_US)]
    linger_us: u64,
    /// Serve the mount through /dev/fuse reads even where the kernel
    /// offers FUSE over io_uring (as `vfscale mount --no-io-uring`).
    #[arg(long)]
    no_io_uring: bool,
}

/// A single-thread operation of part 1.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Op {
    Stat,
    StatMissing,
    OpenReadClose,
    CreateCloseUnlink,
}

impl Op {
    const ALL: [Op; 4] = [Op::Stat, Op::StatMissing, Op::OpenReadClose, Op::CreateCloseUnlink];

    fn name(self) -> &'static str {
        match self {
            Op::Stat => "stat of a cached file",
            Op::StatMissing => "stat of a missing name",
            Op::OpenReadClose => "open + read 32 B + close, unchanged file",
            Op::CreateCloseUnlink => "create + close + unlink",
        }
    }

    fn workload(self) -> &'static str {
        match self {
            Op::Stat => "mount-stat",
            Op::StatMissing => "mount-stat-missing",
            Op::OpenReadClose => "mount-open-read-close",
            Op::CreateCloseUnlink => "mount-create-unlink",
        }
    }

    fn goal(self) -> Bound {
        match self {
            Op::Stat => Bound::AtMost(1.5),
            Op::StatMissing => Bound::AtMost(2.0),
            Op::OpenReadClose => Bound::AtMost(3.0),
            Op::CreateCloseUnlink => Bound::AtMost(8.0),
        }
    }

    /// Operations per run: about a tenth of a second on tmpfs.
    fn iterations(self) -> u64 {
        match self {
            Op::CreateCloseUnlink => 10_000,
            _ => 50_000,
        }
    }
}

/// The files one operation works on, in one directory.
#[derive(Debug)]
struct Files {
    /// A 32-byte file nothing changes.
    file: CString,
    /// Another, for a second client process.
    other: CString,
    /// A name that does not exist.
    missing: CString,
    /// The name created and unlinked.
    created: CString,
}

impl Files {
    fn new(dir: &Path) -> Result<Files, String> {
        let (file, other) = (dir.join("file32"), dir.join("other32"));
        for f in [&file, &other] {
            std::fs::write(f, [b'x'; 32]).map_err(|e| format!("cannot write {}: {e}", f.display()))?;
        }
        let c = |p: PathBuf| CString::new(p.as_os_str().as_bytes()).map_err(|_| format!("{} has a NUL", p.display()));
        Ok(Files {
            file: c(file)?,
            other: c(other)?,
            missing: c(dir.join("missing"))?,
            created: c(dir.join("created"))?,
        })
    }
}

/// A negative return of a libc call, as the error it stands for.
fn check(rc: libc::c_int, what: &str, path: &CString) -> std::io::Result<libc::c_int> {
    if rc < 0 {
        let e = std::io::Error::last_os_error();
        Err(std::io::Error::new(e.kind(), format!("{what} {path:?}: {e}")))
    } else {
        Ok(rc)
    }
}

/// Does `op` once on `files`.
fn once(op: Op, files: &Files) -> std::io::Result<()> {
    match op {
        Op::Stat | Op::StatMissing => {
            let path = if op == Op::Stat { &files.file } else { &files.missing };
            // SAFETY: `path` is a NUL-terminated string and `st` a stat
            // buffer we own, both valid for the call.
            let rc = unsafe {
                let mut st: libc::stat = std::mem::zeroed();
                libc::stat(path.as_ptr(), &mut st)
            };
            match (op, check(rc, "stat", path)) {
                (Op::StatMissing, Err(e)) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
                (Op::StatMissing, Ok(_)) => Err(std::io::Error::other(format!("{path:?} exists"))),
                (_, result) => result.map(drop),
            }
        }
        Op::OpenReadClose => {
            // SAFETY: `files.file` is a NUL-terminated string.
            let fd = check(
                unsafe { libc::open(files.file.as_ptr(), libc::O_RDONLY | libc::O_CLOEXEC) },
                "open",
                &files.file,
            )?;
            let mut buf = [0u8; 32];
            // SAFETY: `buf` is writable for its length and `fd` is open.
            let read = unsafe { libc::read(fd, buf.as_mut_ptr().cast(), buf.len()) };
            // SAFETY: this function owns `fd` and does not use it after.
            unsafe { libc::close(fd) };
            check(read as libc::c_int, "read", &files.file).map(drop)
        }
        Op::CreateCloseUnlink => {
            let path = &files.created;
            let flags = libc::O_CREAT | libc::O_WRONLY | libc::O_TRUNC | libc::O_CLOEXEC;
            // SAFETY: `path` is a NUL-terminated string.
            let fd = check(unsafe { libc::open(path.as_ptr(), flags, 0o644 as libc::c_uint) }, "create", path)?;
            // SAFETY: this function owns `fd` and does not use it after.
            unsafe { libc::close(fd) };
            // SAFETY: `path` is a NUL-terminated string.
            check(unsafe { libc::unlink(path.as_ptr()) }, "unlink", path).map(drop)
        }
    }
}

/// One operation on one file system, as the harness runs it.
#[derive(Debug)]
struct OpSubject<'a> {
    op: Op,
    files: &'a Files,
}

impl Subject for OpSubject<'_> {
    fn run_thread(&self, _thread: usize, iterations: u64) {
        for _ in 0..iterations {
            once(self.op, self.files).unwrap_or_else(|e| panic!("{e}"));
        }
    }
}

/// The two file systems side by side, unmounted and removed on drop.
struct Scene {
    /// Holds both mount points.
    base: PathBuf,
    /// The tmpfs directory: a fresh tmpfs mounted here, or one in /dev/shm.
    tmpfs: PathBuf,
    /// Whether this run mounted `tmpfs` (and unmounts it).
    tmpfs_mounted: bool,
    mount_point: PathBuf,
    mounted: Option<Mounted>,
}

impl Scene {
    fn new(options: &MountOptions) -> Result<Scene, String> {
        let base = scene_base();
        let mkdir = |dir: &Path| std::fs::create_dir(dir).map_err(|e| format!("cannot create {}: {e}", dir.display()));
        mkdir(&base)?;
        let mut scene = Scene {
            tmpfs: base.join("tmpfs"),
            mount_point: base.join("vfscale"),
            base,
            tmpfs_mounted: false,
            mounted: None,
        };
        mkdir(&scene.tmpfs)?;
        mkdir(&scene.mount_point)?;
        scene.tmpfs_mounted = mount_tmpfs(&scene.tmpfs);
        if !scene.tmpfs_mounted {
            let shm = Path::new("/dev/shm");
            if !host::on_tmpfs(shm) {
                return Err("cannot mount a tmpfs (not root) and /dev/shm is not tmpfs here".into());
            }
            std::fs::remove_dir(&scene.tmpfs).map_err(|e| e.to_string())?;
            scene.tmpfs = shm.join(scene.base.file_name().unwrap_or_default());
            mkdir(&scene.tmpfs)?;
        }
        let mounted = vfscale_fuse::mount(&scene.mount_point, vfscale::Vfs::default(), options)
            .map_err(|e| format!("cannot mount: {e}"))?;
        scene.mounted = Some(mounted);
        Ok(scene)
    }

    fn mounted(&self) -> &Mounted {
        self.mounted.as_ref().expect("mounted until dropped")
    }
}

/// The directory that holds this run's mount points.
fn scene_base() -> PathBuf {
    std::env::temp_dir().join(format!("vfscale-mount-bench-{}", std::process::id()))
}

/// Mounts a fresh tmpfs on `dir`; false if this process may not.
fn mount_tmpfs(dir: &Path) -> bool {
    let Ok(target) = CString::new(dir.as_os_str().as_bytes()) else { return false };
    // SAFETY: the strings are NUL-terminated and outlive the call; a null
    // data pointer asks for tmpfs's defaults.
    unsafe { libc::mount(c"tmpfs".as_ptr(), target.as_ptr(), c"tmpfs".as_ptr(), 0, std::ptr::null()) == 0 }
}

impl Drop for Scene {
    fn drop(&mut self) {
        // Best effort: the mounts and directories are this run's own.
        if let Some(mounted) = self.mounted.take() {
            let _ = std::fs::remove_dir_all(self.mount_point.join("bench"));
            let _ = mounted.unmount();
        }
        if self.tmpfs_mounted {
            if let Ok(target) = CString::new(self.tmpfs.as_os_str().as_bytes()) {
                // SAFETY: `target` is a NUL-terminated path that outlives
                // the call.
                unsafe { libc::umount2(target.as_ptr(), 0) };
            }
        } else {
            let _ = std::fs::remove_dir_all(&self.tmpfs);
        }
        let _ = std::fs::remove_dir_all(&self.base);
    }
}

/// The median time per operation of a one-thread cell, in microseconds.
fn per_op_us(report: &CellReport) -> f64 {
    report.stats.per_op_ns.median / 1e3
}

/// Set once a stop signal arrived: the run's files are going, and what
/// fails for that is not the run's failure.
static STOPPING: AtomicBool = AtomicBool::new(false);

/// Whether a stop signal arrived; if so, never returns (the signal's
/// watcher ends the process with the signal's exit code).
fn wait_if_stopping() {
    while STOPPING.load(Ordering::SeqCst) {
        std::thread::park();
    }
}

/// On SIGINT or SIGTERM, detaches this run's mounts (else a killed run
/// would leave a tmpfs and a dead FUSE mount behind) and exits with 128 +
/// the signal. Blocks the signals in the calling thread first, so every
/// thread started after (the mount's) leaves them to the watcher. A
/// benchmark thread that fails once the files go (a panic, or an error
/// the command returns) waits for that exit instead of ending the process
/// with its own code first.
fn unmount_on_signal(base: PathBuf) -> Result<(), String> {
    let report = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        wait_if_stopping();
        report(info)
    }));
    // SAFETY: `set` is a local sigset_t initialised by sigemptyset before
    // use; pthread_sigmask only changes this thread's mask.
    let set = unsafe {
        let mut set: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut set);
        libc::sigaddset(&mut set, libc::SIGINT);
        libc::sigaddset(&mut set, libc::SIGTERM);
        libc::pthread_sigmask(libc::SIG_BLOCK, &set, std::ptr::null_mut());
        set
    };
    let watcher = move || {
        let mut signal = 0;
        // SAFETY: `set` and `signal` are valid for the call.
        unsafe { libc::sigwait(&set, &mut signal) };
        STOPPING.store(true, Ordering::SeqCst);
        // MNT_FORCE makes FUSE abort the connection first (umount_begin):
        // a request this process's own benchmark threads have in flight
        // on the mount then fails, where it would otherwise wait, in an
        // uninterruptible sleep, for server threads that exit() kills, and
        // hold the process (and the test that stopped it) for good.
        for (dir, flags) in [("vfscale", libc::MNT_FORCE | libc::MNT_DETACH), ("tmpfs", libc::MNT_DETACH)] {
            if let Ok(path) = CString::new(base.join(dir).as_os_str().as_bytes()) {
                // SAFETY: `path` is a NUL-terminated string that outlives
                // the call.
                unsafe { libc::umount2(path.as_ptr(), flags) };
            }
        }
        let _ = std::fs::remove_dir_all(&base);
        let shm = Path::new("/dev/shm").join(base.file_name().unwrap_or_default());
        let _ = std::fs::remove_dir_all(shm);
        std::process::exit(128 + signal);
    };
    std::thread::Builder::new().name("mount-bench-signals".into()).spawn(watcher).map(drop).map_err(|e| e.to_string())
}

/// Runs `mount-bench`.
pub fn mount_bench_command(args: MountBenchArgs) -> Result<(), String> {
    let result = run(args);
    wait_if_stopping();
    result
}

fn run(args: MountBenchArgs) -> Result<(), String> {
    let runs = args.runs.unwrap_or(if args.quick { 3 } else { 5 });
    if runs == 0 {
        return Err("--runs must be at least 1".into());
    }
    unmount_on_signal(scene_base())?;
    let scale = if args.quick { 5 } else { 1 };
    let threads = args.server_threads.unwrap_or_else(vfscale_sync::cpu::usable_cpus);
    let linger = std::time::Duration::from_micros(args.linger_us);
    let options = MountOptions {
        demo: args.demo,
        threads,
        locks: args.locks,
        linger,
        io_uring: !args.no_io_uring,
        ..MountOptions::default()
    };
    let scene = Scene::new(&options)?;
    let bench_dirs = [scene.tmpfs.join("bench"), scene.mount_point.join("bench")];
    for dir in &bench_dirs {
        std::fs::create_dir(dir).map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
    }
    // Known once the kernel's INIT was answered, which the mkdir waited for.
    let serving = if scene.mounted().io_uring() {
        format!("served by io_uring queues, one per CPU, and {threads} threads for FORGETs")
    } else {
        let why = scene.mounted().why_not_io_uring().map(|why| format!("; {why}")).unwrap_or_default();
        format!("{threads} server threads lingering {} us{why}", args.linger_us)
    };
    let machine = Machine::this();
    println!(
        "vfscale mount-bench on {}, {} CPUs: a fresh `vfscale mount{}{}{}` ({serving}, record locks in the {}) beside \
         {}; {runs} runs per cell after a warm-up, runs interleaved",
        machine.kernel,
        machine.cpus,
        if args.demo { " --demo" } else { "" },
        if args.locks == RecordLocks::Vfs { " --locks vfs" } else { "" },
        if args.no_io_uring { " --no-io-uring" } else { "" },
        args.locks,
        if scene.tmpfs_mounted { "a fresh tmpfs".to_string() } else { format!("tmpfs ({})", scene.tmpfs.display()) },
    );
    let files = [Files::new(&bench_dirs[0])?, Files::new(&bench_dirs[1])?];
    let mut judged = Vec::new();

    println!(
        "\none thread, median time per operation; ratio = the mount's time over tmpfs's, round by round [95% CI]:"
    );
    let mut rows = vec![["operation", "tmpfs", "vfscale", "ratio", "goal", "met", "requests per op on the mount"]
        .map(String::from)
        .to_vec()];
    for op in Op::ALL {
        let subjects = [OpSubject { op, files: &files[0] }, OpSubject { op, files: &files[1] }];
        let cells = Cells { workload: op.workload(), hold: None, note: None };
        let plan = RunPlan::new(runs, op.iterations() / scale);
        let reports = host::quietly(|| {
            cells.measure(&[("tmpfs", &subjects[0]), ("vfscale", &subjects[1])], &[1], plan, |variant, _, run| {
                if run == 0 {
                    eprintln!("[mount-bench] {} on {variant}", op.name());
                }
            })
        })?;
        let (tmpfs, mount) = (per_op_us(&reports[0]), per_op_us(&reports[1]));
        let samples = [&reports[0].stats.ops_per_sec_samples[..], &reports[1].stats.ops_per_sec_samples[..]];
        let ratio = RoundRatio::of_rounds(&samples, |round| round[0] / round[1]).ok_or("a cell measured nothing")?;
        let requests = requests_per_op(scene.mounted(), op, &files[1])?;
        let judgement = op.goal().judge(ratio.ci95);
        judged.push(judgement);
        rows.push(vec![
            op.name().to_string(),
            format!("{tmpfs:.2} us"),
            format!("{mount:.2} us"),
            format!("{ratio}x"),
            op.goal().show("x"),
            judgement.to_string(),
            requests,
        ]);
    }
    print!("{}", table(rows));

    println!(
        "\ntwo processes doing open + read 32 B + close of a 32-byte file, S2 = throughput of two over one, round by \
         round [95% CI]:"
    );
    let s2 = processes_s2(&files, runs, 100_000 / scale)?;
    let goal = Bound::AtLeast(1.6);
    judged.push(goal.judge(s2[0][1].ci95));
    let mut rows = vec![["", "tmpfs", "vfscale", "goal", "met"].map(String::from).to_vec()];
    for (label, [tmpfs, mount]) in [("S2, a file per process", s2[0]), ("S2, one file for both", s2[1])] {
        rows.push(vec![
            label.into(),
            tmpfs.to_string(),
            mount.to_string(),
            goal.show(""),
            goal.judge(mount.ci95).to_string(),
        ]);
    }
    print!("{}", table(rows));
    println!("(the goal is judged on a file per process; on one file, the kernel's per-inode locks and counts bound tmpfs too)");
    println!("{}", goals_line(&judged));

    if !args.goals_only {
        seed_workloads(&scene, runs, scale)?;
    }
    let lingers = scene.mounted().lingers();
    let lingered = lingers.hits + lingers.misses + lingers.lost;
    if lingered > 0 {
        let share = |n: u64| 100.0 * n as f64 / lingered as f64;
        println!(
            "\nserver threads lingered after {lingered} replies: {:.1}% found the next request waiting, {:.1}% \
             ended as another thread took one, {:.1}% found none",
            share(lingers.hits),
            share(lingers.lost),
            share(lingers.misses)
        );
    }
    Ok(())
}

/// The requests the mount served per `op` on `files`, over 1000 of them.
fn requests_per_op(mounted: &Mounted, op: Op, files: &Files) -> Result<String, String> {
    const N: u64 = 1000;
    let before = mounted.requests();
    for _ in 0..N {
        once(op, files).map_err(|e| e.to_string())?;
    }
    let served = mounted.requests().since(&before);
    let per_op: Vec<String> = vfscale_fuse::Opcode::ALL
        .into_iter()
        .filter(|&o| served.get(o) > 0)
        .map(|o| format!("{} {:.2}", o.name(), served.get(o) as f64 / N as f64))
        .collect();
    Ok(if per_op.is_empty() { "none".into() } else { per_op.join(", ") })
}

/// S2 of open + read + close on tmpfs and on the mount, `[[tmpfs, mount]`
/// with a file per process, `[tmpfs, mount]` with one file for both`]`:
/// the aggregate throughput of two processes over that of one in the same
/// round, the median over `runs` rounds with its interval, all runs
/// interleaved after a warm-up.
fn processes_s2(files: &[Files; 2], runs: usize, iterations: u64) -> Result<[[RoundRatio; 2]; 2], String> {
    // rates[fs][case]: one throughput per run; case 0 is one process, 1
    // two on their own files, 2 two on one file.
    let mut rates: [[Vec<f64>; 3]; 2] = Default::default();
    for run in 0..=runs {
        for (fs, f) in files.iter().enumerate() {
            let cases: [&[&CString]; 3] = [&[&f.file], &[&f.file, &f.other], &[&f.file, &f.file]];
            for (case, paths) in cases.into_iter().enumerate() {
                let rate = processes_rate(paths, iterations)?;
                if run > 0 {
                    rates[fs][case].push(rate);
                }
            }
        }
    }
    let s2 = |fs: usize, case: usize| {
        RoundRatio::of_rounds(&[&rates[fs][case], &rates[fs][0]], |round| round[0] / round[1])
            .ok_or("a case measured nothing")
    };
    Ok([[s2(0, 1)?, s2(1, 1)?], [s2(0, 2)?, s2(1, 2)?]])
}

/// `goals met: 4 of 5, not met 0, inconclusive 1 (...)`: the tally of the
/// judgements, inconclusive ones named as such rather than as failures.
fn goals_line(judged: &[Judgement]) -> String {
    let [met, not_met, inconclusive] = Judgement::tally(judged.iter().copied());
    format!(
        "\ngoals met: {met} of {}, not met {not_met}, inconclusive {inconclusive} (a 95% interval that straddles its \
         bar; the last goal, pjdfstest with 0 failures, is .ci/pjdfstest's)",
        judged.len()
    )
}

/// The monotonic clock in nanoseconds (async-signal-safe).
fn now_ns() -> u64 {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: `ts` is a timespec we own; CLOCK_MONOTONIC always exists.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// A pipe: (read end, write end).
fn pipe() -> Result<[libc::c_int; 2], String> {
    let mut fds = [0; 2];
    // SAFETY: `fds` has room for the two descriptors pipe2 writes.
    if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
        return Err(format!("pipe: {}", std::io::Error::last_os_error()));
    }
    Ok(fds)
}

/// The aggregate throughput of one child process per path, each doing
/// `iterations` open + read 32 B + close of its path once all were
/// started: all their operations over the time from the first one's start
/// to the last one's end.
fn processes_rate(paths: &[&CString], iterations: u64) -> Result<f64, String> {
    let procs = paths.len();
    let [go_read, go_write] = pipe()?;
    let [done_read, done_write] = pipe().inspect_err(|_| {
        for fd in [go_read, go_write] {
            // SAFETY: our own pipe ends, closed once.
            unsafe { libc::close(fd) };
        }
    })?;
    let mut children = Vec::new();
    let mut forked = Ok(());
    for path in paths {
        // SAFETY: the child calls only async-signal-safe functions (read,
        // open, close, clock_gettime, write, _exit) on memory that exists
        // before the fork, so the locks the parent's other threads (the
        // mount's server) may hold cannot stop it; it never returns.
        let pid = unsafe { libc::fork() };
        if pid == 0 {
            client(go_read, done_write, path, iterations);
        }
        if pid < 0 {
            forked = Err(format!("fork: {}", std::io::Error::last_os_error()));
            break;
        }
        children.push(pid);
    }
    let go = vec![1u8; procs];
    let mut results = vec![[0u64; 2]; procs];
    // SAFETY: `go` and `results` are valid for the lengths given; the pipe
    // ends are ours, and the pids our own children. A pipe write of at
    // most PIPE_BUF bytes is atomic, so each child's 16 bytes arrive whole.
    let ok = unsafe {
        if forked.is_err() {
            // The children started so far wait on a pipe they hold the
            // write end of themselves: stop them, or they (and every
            // descriptor they inherited) live forever.
            for pid in &children {
                libc::kill(*pid, libc::SIGKILL);
            }
        }
        let wrote = forked.is_ok() && libc::write(go_write, go.as_ptr().cast(), procs) == procs as isize;
        let mut got = 0;
        while wrote && got < 16 * procs {
            let n = libc::read(done_read, results.as_mut_ptr().cast::<u8>().add(got).cast(), 16 * procs - got);
            if n <= 0 {
                break;
            }
            got += n as usize;
        }
        for pid in &children {
            libc::waitpid(*pid, std::ptr::null_mut(), 0);
        }
        for fd in [go_read, go_write, done_read, done_write] {
            libc::close(fd);
        }
        wrote && got == 16 * procs
    };
    forked?;
    let failed = results.iter().any(|&[start, end]| start == 0 || end < start);
    if !ok || failed {
        return Err(format!("a client process failed to open + read + close {paths:?}"));
    }
    let first = results.iter().map(|r| r[0]).min().unwrap_or(0);
    let last = results.iter().map(|r| r[1]).max().unwrap_or(0);
    Ok((procs as u64 * iterations) as f64 / ((last - first).max(1) as f64 / 1e9))
}

/// A client process: waits for the start, runs, reports (start, end) in
/// nanoseconds, or zeros on failure, and exits.
fn client(go: libc::c_int, done: libc::c_int, path: &CString, iterations: u64) -> ! {
    let mut byte = 0u8;
    let mut buf = [0u8; 32];
    // SAFETY: only async-signal-safe calls, on the descriptors and memory
    // this process inherited; `_exit` skips destructors and atexit
    // handlers that belong to the parent.
    unsafe {
        libc::read(go, (&mut byte as *mut u8).cast(), 1);
        let start = now_ns();
        let mut ok = true;
        for _ in 0..iterations {
            let fd = libc::open(path.as_ptr(), libc::O_RDONLY | libc::O_CLOEXEC);
            if fd < 0 || libc::read(fd, buf.as_mut_ptr().cast(), buf.len()) < 0 {
                ok = false;
                break;
            }
            libc::close(fd);
        }
        let result: [u64; 2] = if ok { [start, now_ns()] } else { [0, 0] };
        libc::write(done, result.as_ptr().cast(), 16);
        libc::_exit(0)
    }
}

/// Part 3: the seed workloads' directory drivers on tmpfs and on the mount.
fn seed_workloads(scene: &Scene, runs: usize, scale: u64) -> Result<(), String> {
    let targets = host::label_dirs(&[scene.tmpfs.clone(), scene.mount_point.clone()]);
    println!("\nseed workloads (host drivers) on tmpfs and on the mount, 1 and 2 threads:");
    for driver in host::all().iter().filter(|d| d.takes_dir()) {
        let plan = RunPlan::new(runs, (driver.default_iterations / scale).max(1));
        let (reports, skipped) = host::measure(driver, &targets, &[1, 2], plan, |variant, threads, run| {
            if run == 0 {
                eprintln!("[mount-bench] {} on {variant} x{threads}", driver.name);
            }
        })
        .map_err(|e| format!("{}: {e}", driver.name))?;
        println!("\n{}: {}; {} iterations per thread", driver.name, driver.about, plan.iterations);
        print!("{}", bench::table(&reports));
        for reason in skipped {
            println!("skipped in {reason}");
        }
        let ratios: Vec<String> = [1, 2]
            .into_iter()
            .filter_map(|t| {
                let of = |label: &str| reports.iter().find(|r| r.variant == label && r.threads == t);
                let (tmpfs, mount) = (of(targets[0].label)?, of(targets[1].label)?);
                Some(format!("x{t} {:.2}", mount.stats.ops_per_sec.median / tmpfs.stats.ops_per_sec.median))
            })
            .collect();
        if !ratios.is_empty() {
            println!("vfscale / tmpfs throughput: {}", ratios.join(", "));
        }
    }
    Ok(())
}

/// Left-aligned first column, the others right-aligned, two spaces apart.
fn table(rows: Vec<Vec<String>>) -> String {
    let widths: Vec<usize> = (0..rows[0].len()).map(|c| rows.iter().map(|r| r[c].len()).max().unwrap_or(0)).collect();
    let mut out = String::new();
    for row in rows {
        let cells: Vec<String> = row
            .iter()
            .enumerate()
            .map(|(c, cell)| {
                if c == 0 || c + 1 == row.len() {
                    format!("{cell:<w$}", w = widths[c])
                } else {
                    format!("{cell:>w$}", w = widths[c])
                }
            })
            .collect();
        out.push_str(cells.join("  ").trim_end());
        out.push('\n');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn goals_are_tallied_with_the_inconclusive_apart() {
        let line = goals_line(&[Judgement::Met, Judgement::Inconclusive, Judgement::Met, Judgement::NotMet]);
        assert!(line.contains("goals met: 2 of 4, not met 1, inconclusive 1 ("), "{line}");
        assert_eq!(Op::CreateCloseUnlink.goal().show("x"), "<= 8x");
    }

    /// Every operation runs on an ordinary directory, and so does the
    /// two-process measurement.
    #[test]
    fn operations_and_clients_run_in_a_directory() {
        let dir = tempfile::tempdir().unwrap();
        let files = Files::new(dir.path()).unwrap();
        for op in Op::ALL {
            for _ in 0..3 {
                once(op, &files).unwrap_or_else(|e| panic!("{}: {e}", op.name()));
            }
        }
        assert!(!dir.path().join("created").exists());
        for paths in [&[&files.file][..], &[&files.file, &files.other], &[&files.file, &files.file]] {
            assert!(processes_rate(paths, 100).unwrap() > 0.0);
        }
        let gone = CString::new(dir.path().join("gone").as_os_str().as_bytes()).unwrap();
        assert!(processes_rate(&[&files.file, &gone], 10).unwrap_err().contains("failed"));
    }

    #[test]
    fn tables_align_columns() {
        let rows = vec![vec!["a".into(), "1".into(), "x".into()], vec!["bbb".into(), "22".into(), "y".into()]];
        assert_eq!(table(rows), "a     1  x\nbbb  22  y\n");
    }
}
