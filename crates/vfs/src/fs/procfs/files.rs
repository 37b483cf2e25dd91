//! The per-task files and the text they show.

use crate::errno::{Errno, VfsResult};
use crate::fs::{FileOps, Snapshot};
use crate::inode::Inode;
use std::fmt;
use std::sync::Arc;
use vfscale_sync::audited::Ordering;

/// What a task's `mountinfo` shows: the text of its mount namespace, as
/// seen from its root, rendered at each read from offset 0 — typically
/// [`Process::mountinfo`](crate::Process::mountinfo) of the process the
/// task stands for. Equal when it is the same view.
#[derive(Clone)]
pub struct MountView(Arc<dyn Fn() -> VfsResult<String> + Send + Sync>);

impl MountView {
    /// A view rendered by `render`. A view that holds the process it shows
    /// keeps that process's namespace, and so this procfs if it is mounted
    /// there: hold the process weakly (`Weak<Process>`, answering ESRCH
    /// once it is gone) to let both go.
    pub fn new(render: impl Fn() -> VfsResult<String> + Send + Sync + 'static) -> MountView {
        MountView(Arc::new(render))
    }

    fn render(&self) -> VfsResult<String> {
        (self.0)()
    }
}

impl fmt::Debug for MountView {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("MountView")
    }
}

impl PartialEq for MountView {
    fn eq(&self, other: &MountView) -> bool {
        Arc::ptr_eq(&self.0, &other.0)
    }
}

impl Eq for MountView {}

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
    /// The mount namespace `mountinfo` shows; without one, the task has
    /// no `mountinfo` file (ENOENT).
    pub mounts: Option<MountView>,
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
            mounts: None,
        }
    }
}

/// The files of a `<pid>` directory.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum TaskFile {
    Cmdline,
    Mountinfo,
    Stat,
    Status,
}

impl TaskFile {
    pub const ALL: [TaskFile; 4] = [TaskFile::Cmdline, TaskFile::Mountinfo, TaskFile::Stat, TaskFile::Status];

    pub fn name(self) -> &'static str {
        match self {
            TaskFile::Cmdline => "cmdline",
            TaskFile::Mountinfo => "mountinfo",
            TaskFile::Stat => "stat",
            TaskFile::Status => "status",
        }
    }

    pub fn from_name(name: &[u8]) -> Option<TaskFile> {
        TaskFile::ALL.into_iter().find(|f| f.name().as_bytes() == name)
    }

    /// Whether the task `t` has this file.
    pub fn exists_for(self, t: &TaskInfo) -> bool {
        self != TaskFile::Mountinfo || t.mounts.is_some()
    }

    /// The text of this file; `mountinfo`'s is its view's, rendered by
    /// [`render_mounts`].
    fn render(self, pid: u32, t: &TaskInfo) -> Vec<u8> {
        match self {
            TaskFile::Mountinfo => Vec::new(),
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

/// The text of a `mountinfo` view, rendered outside the epoch section
/// (it walks the namespace).
fn render_mounts(view: Option<MountView>) -> VfsResult<Vec<u8>> {
    Ok(view.ok_or(Errno::ENOENT)?.render()?.into_bytes())
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
        self.snapshot.read(buf, offset, || match kind {
            TaskFile::Mountinfo => render_mounts(task.with_info(|info| info.mounts.clone())),
            _ => Ok(task.with_info(|info| kind.render(task.pid, info))),
        })
    }

    /// These files have no write method: Linux lets root open them for
    /// writing, and `write` fails with EINVAL.
    fn write(&self, _inode: &Inode, _buf: &[u8], _offset: u64) -> VfsResult<usize> {
        Err(Errno::EINVAL)
    }
}
