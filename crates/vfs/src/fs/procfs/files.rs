//! The per-task files and the text they show.

use crate::errno::{Errno, VfsResult};
use crate::fs::{FileOps, Snapshot};
use crate::inode::Inode;
use vfscale_sync::audited::Ordering;

/// What `/proc/<pid>` shows about a task.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TaskInfo {
    /// Command name (`comm`, at most 15 bytes shown).
    pub comm: String,
    /// Arguments, shown NUL-separated in `cmdline`.
    pub args: Vec<String>,
    /// One-letter state (`R`, `S`, `D`, `Z`, ...).
    pub state: char,
    /// Parent pid.
    pub ppid: u32,
    /// Owner.
    pub uid: u32,
    /// Threads.
    pub threads: u32,
    /// Resident set, in pages.
    pub rss_pages: u64,
}

impl TaskInfo {
    /// A sleeping task of root, its parent pid 1.
    pub fn new<I: IntoIterator<Item = S>, S: Into<String>>(comm: &str, args: I) -> TaskInfo {
        TaskInfo {
            comm: comm.chars().take(15).collect(),
            args: args.into_iter().map(Into::into).collect(),
            state: 'S',
            ppid: 1,
            uid: 0,
            threads: 1,
            rss_pages: 0,
        }
    }
}

/// The files of a `<pid>` directory.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum TaskFile {
    Cmdline,
    Stat,
    Status,
}

impl TaskFile {
    pub const ALL: [TaskFile; 3] = [TaskFile::Cmdline, TaskFile::Stat, TaskFile::Status];

    pub fn name(self) -> &'static str {
        match self {
            TaskFile::Cmdline => "cmdline",
            TaskFile::Stat => "stat",
            TaskFile::Status => "status",
        }
    }

    pub fn from_name(name: &[u8]) -> Option<TaskFile> {
        TaskFile::ALL.into_iter().find(|f| f.name().as_bytes() == name)
    }

    fn render(self, pid: u32, t: &TaskInfo) -> Vec<u8> {
        match self {
            TaskFile::Cmdline => t.args.iter().flat_map(|a| a.bytes().chain([0])).collect(),
            // The 52 fields of proc(5); counters we do not keep are 0.
            TaskFile::Stat => {
                let mut fields = vec![0u64; 49];
                fields[17] = u64::from(t.threads); // num_threads (field 20)
                fields[21] = t.rss_pages; // rss (field 24)
                let rest: Vec<String> = fields.iter().map(u64::to_string).collect();
                format!("{pid} ({}) {} {} {}\n", t.comm, t.state, t.ppid, rest[1..].join(" ")).into_bytes()
            }
            TaskFile::Status => format!(
                "Name:\t{}\nState:\t{}\nTgid:\t{pid}\nPid:\t{pid}\nPPid:\t{}\nUid:\t{u}\t{u}\t{u}\t{u}\nGid:\t{u}\t{u}\t{u}\t{u}\nVmRSS:\t{} kB\nThreads:\t{}\n",
                t.comm,
                t.state,
                t.ppid,
                t.rss_pages * 4,
                t.threads,
                u = t.uid,
            )
            .into_bytes(),
        }
    }
}

/// An open `<pid>/<file>`: the text rendered at the last read from offset
/// 0, like a seq_file. The task and file kind come from the inode.
#[derive(Debug, Default)]
pub(super) struct ProcFile {
    snapshot: Snapshot,
}

impl FileOps for ProcFile {
    fn read(&self, inode: &Inode, buf: &mut [u8], offset: u64) -> VfsResult<usize> {
        let (task, kind) = super::task_file(inode).ok_or(Errno::EINVAL)?;
        if !task.alive.load(Ordering::Acquire) {
            return Err(Errno::ESRCH);
        }
        self.snapshot.read(buf, offset, || Ok(task.with_info(|info| kind.render(task.pid, info))))
    }

    /// These files have no write method: Linux lets root open them for
    /// writing, and `write` fails with EINVAL.
    fn write(&self, _inode: &Inode, _buf: &[u8], _offset: u64) -> VfsResult<usize> {
        Err(Errno::EINVAL)
    }
}
