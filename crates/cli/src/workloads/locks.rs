//! Seed 004's lockperf analogs (`docs/design.md`, "Seed 004: file locks"):
//! `flock01`/`flock02`, `posix01`..`posix04`, `lease01`/`lease02`, each in
//! the four designs of the system-wide lock list. `*01` = every thread
//! contends on one file's lock, `*02` = each thread locks its own file;
//! `posix03` = threads lock overlapping two-byte ranges of one file so they
//! block and wake often; `posix04` = threads of rings of four hold a byte
//! and wait for the next one's, so deadlock detection runs (one of a ring
//! gets EDEADLK); `lease01`/`lease02` = set and remove a read lease on a
//! private/shared file. Reported like the seed: per-run time, plus S2.
//! `posix05` = each thread locks its own 64 bytes of one shared
//! file, a 4 KiB stripe apart, in the record-lock designs: `striped`,
//! `striped-spread` (the file's locks already spread over two stripes, so
//! even one thread runs sharded) and `list`.

use super::{Subject, Workload};
use std::sync::RwLock;
use vfscale::config::{LockListKind, RecordLocks};
use vfscale::locks::{Flock, Interrupt, F_RDLCK, F_UNLCK, F_WRLCK, LOCK_EX, LOCK_UN};
use vfscale::{Credentials, Errno, OpenFlags, Process, Vfs, VfsConfig};
use vfscale_sync::poison::unpoisoned;

const VARIANTS: &[&str] = &["percpu-rwsem", "lglock-tas", "lglock-queued", "global-lock"];
const RECORD_VARIANTS: &[&str] = &["striped", "striped-spread", "list"];

/// Names of the workloads here, whose table shows per-run time.
pub(crate) const NAMES: [&str; 9] =
    ["flock01", "flock02", "posix01", "posix02", "posix03", "posix04", "posix05", "lease01", "lease02"];

macro_rules! workload {
    ($const:ident, $name:literal, $about:literal, $iters:expr) => {
        pub(super) const $const: Workload = Workload {
            name: $name,
            about: $about,
            variants: VARIANTS,
            default_iterations: |_| $iters,
            takes_hold: false,
            build: |variant, _| build($name, variant),
        };
    };
}

workload!(FLOCK01, "flock01", "flock(LOCK_EX) + flock(LOCK_UN) on one shared file", 20_000);
workload!(FLOCK02, "flock02", "flock(LOCK_EX) + flock(LOCK_UN) on this thread's own file", 50_000);
workload!(POSIX01, "posix01", "F_SETLKW write lock + unlock of one shared file", 20_000);
workload!(POSIX02, "posix02", "F_SETLKW write lock + unlock of this thread's own file", 50_000);
workload!(POSIX03, "posix03", "F_SETLKW + unlock of a 2-byte range overlapping the neighbours' in one file", 10_000);
workload!(POSIX04, "posix04", "hold own byte, F_SETLKW the next thread's byte (rings of 4: deadlock checks)", 5_000);
pub(super) const POSIX05: Workload = Workload {
    name: "posix05",
    about: "F_SETLKW write lock + unlock of this thread's own 64 bytes, 4 KiB apart, of one shared file",
    variants: RECORD_VARIANTS,
    default_iterations: |_| 50_000,
    takes_hold: false,
    build: |variant, _| {
        let record_locks = if variant == "list" { RecordLocks::List } else { RecordLocks::STRIPED };
        Box::new(LockSubject {
            name: "posix05",
            vfs: Vfs::new(VfsConfig { record_locks, ..VfsConfig::default() }),
            spread: variant == "striped-spread",
            tasks: RwLock::default(),
        })
    },
};
workload!(LEASE01, "lease01", "F_SETLEASE read + F_UNLCK on this thread's own file", 50_000);
workload!(LEASE02, "lease02", "F_SETLEASE read + F_UNLCK on one shared file", 50_000);

fn build(name: &'static str, variant: &str) -> Box<dyn Subject> {
    let kind = match variant {
        "percpu-rwsem" => LockListKind::PerCpuRwSem,
        "lglock-tas" => LockListKind::LgLockTas,
        "lglock-queued" => LockListKind::LgLockQueued,
        "global-lock" => LockListKind::GlobalLock,
        other => unreachable!("variant {other} validated by the caller"),
    };
    Box::new(LockSubject {
        name,
        vfs: Vfs::new(VfsConfig { lock_list: kind, ..VfsConfig::default() }),
        spread: false,
        tasks: RwLock::default(),
    })
}

/// One task: its own process (POSIX owner) and descriptor.
struct Task {
    process: Process,
    fd: i32,
}

struct LockSubject {
    name: &'static str,
    vfs: Vfs,
    /// `posix05`: spread the shared file's locks over two stripes first.
    spread: bool,
    /// Written by `prepare_run` only; each thread reads its own task.
    tasks: RwLock<Vec<Task>>,
}

/// Threads per `posix04` ring: well under the deadlock detector's chain
/// limit, so every cycle is found.
const RING: usize = 4;

/// The default record-lock stripe: `posix05`'s threads lock this far apart.
const STRIPE: i64 = 4096;

impl Subject for LockSubject {
    fn prepare_run(&self, threads: usize) {
        let root = self.vfs.process(Credentials::root());
        let private = matches!(self.name, "flock02" | "posix02" | "lease01");
        let mut tasks = unpoisoned(self.tasks.write());
        tasks.clear();
        for t in 0..threads {
            let path = if private { format!("/file{t}") } else { "/shared".to_string() };
            let flags = if self.name.starts_with("lease") { OpenFlags::RDONLY } else { OpenFlags::RDWR };
            root.close(root.open(&path, OpenFlags::CREAT | OpenFlags::RDWR, 0o644).expect("create")).expect("close");
            let process = self.vfs.process(Credentials::root());
            let fd = process.open(&path, flags, 0).expect("open");
            tasks.push(Task { process, fd });
        }
        if self.spread {
            let fd = root.open("/shared", OpenFlags::RDWR, 0).expect("open");
            for start in [0, STRIPE] {
                root.fcntl_setlk(fd, &Flock::new(F_WRLCK, start, 1)).expect("spread");
            }
            root.close(fd).expect("close");
        }
    }

    fn run_thread(&self, thread: usize, iterations: u64) {
        let tasks = unpoisoned(self.tasks.read());
        let (p, fd) = (&tasks[thread].process, tasks[thread].fd);
        let never = Interrupt::never();
        let whole = |t| Flock::new(t, 0, 0);
        for i in 0..iterations {
            match self.name {
                "flock01" | "flock02" => {
                    p.flock(fd, LOCK_EX).expect("flock");
                    p.flock(fd, LOCK_UN).expect("unlock");
                }
                "posix01" | "posix02" => {
                    p.fcntl_setlkw(fd, &whole(F_WRLCK), &never).expect("setlkw");
                    p.fcntl_setlk(fd, &whole(F_UNLCK)).expect("unlock");
                }
                "posix05" => {
                    let own = |t| Flock::new(t, thread as i64 * STRIPE, 64);
                    p.fcntl_setlkw(fd, &own(F_WRLCK), &never).expect("setlkw");
                    p.fcntl_setlk(fd, &own(F_UNLCK)).expect("unlock");
                }
                "posix03" => {
                    let start = ((thread as u64 + i) % (tasks.len() as u64 + 1)) as i64;
                    p.fcntl_setlkw(fd, &Flock::new(F_WRLCK, start, 2), &never).expect("setlkw");
                    p.fcntl_setlk(fd, &Flock::new(F_UNLCK, start, 2)).expect("unlock");
                }
                "posix04" => {
                    let ring = thread / RING * RING;
                    let members = RING.min(tasks.len() - ring);
                    let next = ring + (thread - ring + 1) % members;
                    p.fcntl_setlkw(fd, &Flock::new(F_WRLCK, thread as i64, 1), &never).expect("own byte");
                    match p.fcntl_setlkw(fd, &Flock::new(F_WRLCK, next as i64, 1), &never) {
                        Ok(()) | Err(Errno::EDEADLK) => {}
                        Err(e) => panic!("posix04: {e}"),
                    }
                    p.fcntl_setlk(fd, &whole(F_UNLCK)).expect("unlock");
                }
                "lease01" | "lease02" => {
                    p.setlease(fd, F_RDLCK.into()).expect("setlease");
                    p.setlease(fd, F_UNLCK.into()).expect("unlock lease");
                }
                other => unreachable!("workload {other}"),
            }
        }
    }
}
