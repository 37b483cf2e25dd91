//! `proc-ps`: seed 003's workload. Every thread does what `ps -fe` does:
//! list `/proc`, then for each pid open, read and close `stat`, `status`
//! and `cmdline` — through the proc tree mounted on `/proc` of an
//! in-memory root, as on Linux. Op = one whole ps run over the task table.

use super::seed_mount::SeedMount;
use super::{Params, Subject, Workload};
use std::hint::black_box;
use vfscale::procfs::{ProcConfig, Procfs, TaskInfo};
use vfscale::{OpenFlags, VfsConfig};

pub(super) const WORKLOAD: Workload = Workload {
    name: "proc-ps",
    about:
        "readdir the proc root, then open/read/close stat, status and cmdline of each of 300 tasks (op = one ps run)",
    variants: &["rcu-revalidate", "ref-revalidate"],
    default_iterations: |_| 100,
    takes_hold: false,
    build,
};

/// Tasks in the table.
const TASKS: u32 = 300;

fn build(variant: &str, _params: &Params) -> Box<dyn Subject> {
    let config = match variant {
        "rcu-revalidate" => ProcConfig::rcu_revalidate(),
        "ref-revalidate" => ProcConfig::ref_revalidate(),
        other => unreachable!("variant {other} validated by the caller"),
    };
    let proc = Procfs::new(config);
    for pid in 1..=TASKS {
        let comm = format!("task{pid}");
        proc.add_task(pid, TaskInfo::new(&comm, [comm.clone(), "--serve".to_string()])).expect("fill the table");
    }
    Box::new(PsSubject { mounted: SeedMount::new(proc.vfs(), "proc", "proc", VfsConfig::default()) })
}

struct PsSubject {
    mounted: SeedMount,
}

impl Subject for PsSubject {
    fn run_thread(&self, _thread: usize, iterations: u64) {
        let process = self.mounted.process();
        let mut buf = [0u8; 1024];
        for _ in 0..iterations {
            let entries = process.list_dir("/proc").expect("list the proc root");
            for entry in entries.iter().skip(2) {
                let pid = std::str::from_utf8(&entry.name).expect("pids are decimal");
                for file in ["stat", "status", "cmdline"] {
                    let fd =
                        process.open(format!("/proc/{pid}/{file}"), OpenFlags::RDONLY, 0).expect("open a task file");
                    black_box(process.read(fd, &mut buf).expect("read a task file"));
                    process.close(fd).expect("close a task file");
                }
            }
        }
    }
}
