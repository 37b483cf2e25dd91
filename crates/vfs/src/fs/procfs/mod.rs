//! procfs: a directory whose children are generated from a live task
//! table — `<pid>/stat`, `<pid>/status`, `<pid>/cmdline`,
//! `<pid>/mountinfo`, `self` — as Linux's
//! `/proc` (seed 003; `docs/design.md`, "Seed 003").
//!
//! Invariant: a `<pid>` inode (and those of its files) points at its task;
//! the task's `alive` flag goes false, once, when it exits, and every
//! dentry of that task is invalid from then on. `readdir` lists the tasks
//! alive now; lookups make inodes on demand, as `proc_pid_lookup` does.
//!
//! Revalidating a `<pid>` dentry is one load of `alive`: no lock, no
//! reference, no shared write. With [`ProcConfig::rcu_revalidate`] it runs
//! in rcu-walk (Linux 5.16+); without it (`ProcConfig::ref_revalidate`, the
//! seed's "before") it refuses there, so every walk through a `<pid>`
//! directory restarts in ref-walk and takes references on the way.
//!
//! `<pid>/mountinfo` shows the task's mount namespace in Linux's format.
//! A task is a [`TaskInfo`], not a process, so its namespace is whatever
//! its [`TaskInfo::mounts`] view reaches: a [`MountView`] rendered at each
//! read from offset 0, typically the `mountinfo` of the [`Process`] the
//! task stands for (held weakly, so that neither keeps the other); a task
//! without a view has no `mountinfo`. The VFS hands a filesystem no
//! caller, so `self` is a symlink to the task [`Procfs::set_self`] names,
//! the process the instance is mounted for, rather than to each reader.
//!
//! [`Process`]: crate::Process
//!
//! May import the base modules, the node types, `fs` and `vfs`.
//!
//! ```
//! use vfscale::procfs::{ProcConfig, Procfs, TaskInfo};
//! use vfscale::{Credentials, Errno, OpenFlags};
//!
//! let proc = Procfs::new(ProcConfig::rcu_revalidate());
//! proc.add_task(42, TaskInfo::new("sleep", ["sleep", "10"]))?;
//! let p = proc.vfs().process(Credentials::root());
//! let mut buf = [0u8; 64];
//! let fd = p.open("/42/cmdline", OpenFlags::RDONLY, 0)?;
//! let n = p.read(fd, &mut buf)?;
//! assert_eq!(&buf[..n], b"sleep\x0010\0");
//! proc.exit_task(42)?;
//! assert_eq!(p.pread(fd, &mut buf, 0), Err(Errno::ESRCH));
//! assert_eq!(p.stat("/42"), Err(Errno::ENOENT));
//! # Ok::<(), Errno>(())
//! ```

mod files;

pub use files::{MountView, TaskInfo};

use crate::errno::{Errno, VfsResult};
use crate::fs::{FileOps, Filesystem, Guard, Instance, Revalidate};
use crate::inode::{Inode, NewInode};
use crate::types::{DirEntry, FileType, OpenFlags};
use crate::{Credentials, Vfs, VfsConfig};
use crossbeam_epoch::Owned;
use files::{ProcFile, TaskFile};
use std::collections::BTreeMap;
use std::fmt;
use std::sync::Arc;
use vfscale_sync::audited::EpochAtomic;
use vfscale_sync::audited::{AtomicBool, AtomicU32, Ordering};
use vfscale_sync::rwsem::{RwSem, SpinPolicy};

/// Where `<pid>` dentries are revalidated.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct ProcConfig {
    /// Decide in rcu-walk (`true`, Linux 5.16+) or refuse there (`false`).
    pub rcu_revalidate: bool,
}

impl ProcConfig {
    /// Before Linux 5.16: `pid_revalidate` returns `-ECHILD` in rcu-walk.
    pub fn ref_revalidate() -> Self {
        Self { rcu_revalidate: false }
    }

    /// Stephen Brennan's patch: revalidate in rcu-walk.
    pub fn rcu_revalidate() -> Self {
        Self { rcu_revalidate: true }
    }
}

/// A task of the table. Its information is replaced whole by updates and
/// read under the epoch, so readers of `/proc/<pid>/*` write nothing shared.
struct Task {
    pid: u32,
    alive: AtomicBool,
    info: EpochAtomic<TaskInfo>,
}

impl Task {
    fn new(pid: u32, info: TaskInfo) -> Task {
        Task { pid, alive: AtomicBool::new(true), info: EpochAtomic::new(info) }
    }

    /// Runs `f` on the current information.
    fn with_info<R>(&self, f: impl FnOnce(&TaskInfo) -> R) -> R {
        let guard = crossbeam_epoch::pin();
        // SAFETY: `info` is never null, and a replaced value is destroyed
        // through the epoch after this guard unpins.
        f(unsafe { self.info.load(Ordering::Acquire, &guard).deref() })
    }

    /// Replaces the information with `update` applied to a copy; callers
    /// are serialized by the task table's lock.
    fn update(&self, update: impl FnOnce(&mut TaskInfo)) {
        let mut next = self.with_info(TaskInfo::clone);
        update(&mut next);
        let guard = crossbeam_epoch::pin();
        let old = self.info.swap(Owned::new(next), Ordering::AcqRel, &guard);
        // SAFETY: the old value is unreachable now and destroyed after every
        // guard pinned now has unpinned.
        unsafe { guard.defer_destroy(old) };
    }
}

impl Drop for Task {
    fn drop(&mut self) {
        // SAFETY: the task is being dropped; nobody can read its info.
        unsafe { drop(self.info.load(Ordering::Relaxed, crossbeam_epoch::unprotected()).into_owned()) }
    }
}

/// What a procfs inode stands for (its `i_private`).
enum Entry {
    PidDir(Arc<Task>),
    File(Arc<Task>, TaskFile),
    /// `self`, naming this task's directory.
    SelfLink(Arc<Task>),
}

struct Shared {
    config: ProcConfig,
    tasks: RwSem<BTreeMap<u32, Arc<Task>>>,
    /// The pid `self` names; 0 for none.
    self_pid: AtomicU32,
    instance: Instance,
}

impl fmt::Debug for Shared {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Procfs").field("config", &self.config).finish_non_exhaustive()
    }
}

impl Shared {
    fn new_inode(&self, file_type: FileType, perm: u32, uid: u32, entry: Entry, dir: &Arc<Inode>) -> Arc<Inode> {
        let mut spec = NewInode::of(file_type, perm);
        // A directory knows its parent, for `..`.
        spec.parent = (file_type == FileType::Directory).then(|| Arc::clone(dir));
        spec.uid = uid;
        spec.gid = uid;
        spec.private = Some(Arc::new(entry));
        self.instance.new_inode(spec)
    }
}

impl Shared {
    /// `pid_revalidate`: whether the task behind `inode` is alive (and,
    /// for `self`, still the one `self` names). A load or two: no lock, no
    /// shared write.
    fn alive(&self, inode: &Inode) -> bool {
        match inode.private::<Entry>() {
            Some(Entry::PidDir(task) | Entry::File(task, _)) => task.alive.load(Ordering::Acquire),
            Some(Entry::SelfLink(task)) => {
                self.self_pid.load(Ordering::Acquire) == task.pid && task.alive.load(Ordering::Acquire)
            }
            None => false,
        }
    }
}

/// Revalidation is one load of the task's `alive` flag, in either walk
/// mode when [`ProcConfig::rcu_revalidate`] allows rcu-walk; negative
/// dentries are never kept (a pid may appear at any time) and permission
/// is the generic check.
impl Filesystem for Shared {
    fn revalidate_rcu(&self, _dir: &Inode, _name: &[u8], inode: &Inode, _guard: &Guard) -> Revalidate {
        if !self.config.rcu_revalidate {
            return Revalidate::NeedRefWalk;
        }
        Revalidate::decided(self.alive(inode))
    }

    fn revalidate(&self, _dir: &Inode, _name: &[u8], inode: &Inode) -> bool {
        self.alive(inode)
    }

    fn revalidate_negative_rcu(&self, _dir: &Inode, _neg_rev: u64) -> Revalidate {
        Revalidate::Invalid
    }

    fn lookup(&self, dir: &Arc<Inode>, name: &[u8]) -> VfsResult<Option<Arc<Inode>>> {
        match dir.private::<Entry>() {
            None if name == b"self" => {
                let pid = self.self_pid.load(Ordering::Acquire);
                let Some(task) = self.tasks.read().get(&pid).cloned() else { return Ok(None) };
                let mut spec = NewInode::of(FileType::Symlink, 0o777);
                spec.symlink_target = pid.to_string().into_bytes().into();
                spec.private = Some(Arc::new(Entry::SelfLink(task)));
                Ok(Some(self.instance.new_inode(spec)))
            }
            None => {
                let Some(pid) = parse_pid(name) else { return Ok(None) };
                let task = self.tasks.read().get(&pid).cloned();
                Ok(task.map(|task| {
                    let uid = task.with_info(|t| t.uid);
                    self.new_inode(FileType::Directory, 0o555, uid, Entry::PidDir(task), dir)
                }))
            }
            Some(Entry::PidDir(task)) => {
                if !task.alive.load(Ordering::Acquire) {
                    return Ok(None);
                }
                let kind = TaskFile::from_name(name).filter(|kind| task.with_info(|t| kind.exists_for(t)));
                Ok(kind.map(|kind| {
                    let uid = task.with_info(|t| t.uid);
                    self.new_inode(FileType::Regular, 0o444, uid, Entry::File(Arc::clone(task), kind), dir)
                }))
            }
            Some(Entry::File(..) | Entry::SelfLink(_)) => Err(Errno::ENOTDIR),
        }
    }

    fn fs_type(&self) -> &'static str {
        "proc"
    }

    fn caches_negatives(&self) -> bool {
        false
    }

    fn readdir(&self, dir: &Inode) -> VfsResult<Vec<DirEntry>> {
        let mut entries: Vec<DirEntry> = match dir.private::<Entry>() {
            None => {
                let tasks = self.tasks.read();
                let mut entries: Vec<DirEntry> = tasks
                    .values()
                    .map(|t| DirEntry { name: t.pid.to_string().into_bytes(), ino: 0, file_type: FileType::Directory })
                    .collect();
                if tasks.contains_key(&self.self_pid.load(Ordering::Acquire)) {
                    entries.push(DirEntry { name: b"self".to_vec(), ino: 0, file_type: FileType::Symlink });
                }
                entries
            }
            Some(Entry::PidDir(task)) if task.alive.load(Ordering::Acquire) => TaskFile::ALL
                .iter()
                .filter(|f| task.with_info(|t| f.exists_for(t)))
                .map(|f| DirEntry { name: f.name().as_bytes().to_vec(), ino: 0, file_type: FileType::Regular })
                .collect(),
            Some(_) => return Err(Errno::ENOENT),
        };
        entries.sort_by(|a, b| a.name.cmp(&b.name));
        Ok(entries)
    }

    fn open(&self, inode: &Arc<Inode>, _flags: OpenFlags, _cred: &Credentials) -> VfsResult<Box<dyn FileOps>> {
        task_file(inode).ok_or(Errno::EINVAL)?;
        Ok(Box::<ProcFile>::default())
    }
}

/// The task and file kind of a `<pid>/<file>` inode.
fn task_file(inode: &Inode) -> Option<(&Task, TaskFile)> {
    match inode.private::<Entry>()? {
        Entry::File(task, kind) => Some((task, *kind)),
        Entry::PidDir(_) | Entry::SelfLink(_) => None,
    }
}

/// A pid as `/proc` spells it: decimal, no sign, no leading zero.
fn parse_pid(name: &[u8]) -> Option<u32> {
    if name.is_empty() || (name[0] == b'0' && name.len() > 1) || !name.iter().all(u8::is_ascii_digit) {
        return None;
    }
    std::str::from_utf8(name).ok()?.parse().ok()
}

/// A task table and the [`Vfs`] that shows it as `/proc`.
#[derive(Debug)]
pub struct Procfs {
    vfs: Vfs,
    shared: Arc<Shared>,
}

impl Procfs {
    /// An empty task table.
    pub fn new(config: ProcConfig) -> Procfs {
        let mut shared = None;
        let vfs = Vfs::with_filesystem(VfsConfig::default(), |instance| {
            let made = Arc::new(Shared {
                config,
                tasks: RwSem::new(BTreeMap::new(), SpinPolicy::Adaptive),
                self_pid: AtomicU32::new(0),
                instance: instance.clone(),
            });
            shared = Some(Arc::clone(&made));
            made
        });
        Procfs { vfs, shared: shared.expect("the generator was made") }
    }

    /// The filesystem readers walk; its root is the `/proc` directory.
    pub fn vfs(&self) -> &Vfs {
        &self.vfs
    }

    /// Adds a live task; EEXIST if `pid` is taken, EINVAL for pid 0.
    pub fn add_task(&self, pid: u32, info: TaskInfo) -> VfsResult<()> {
        if pid == 0 {
            return Err(Errno::EINVAL);
        }
        let mut tasks = self.shared.tasks.write();
        if tasks.contains_key(&pid) {
            return Err(Errno::EEXIST);
        }
        tasks.insert(pid, Arc::new(Task::new(pid, info)));
        Ok(())
    }

    /// Changes a live task's information; ESRCH if there is none.
    pub fn update_task(&self, pid: u32, update: impl FnOnce(&mut TaskInfo)) -> VfsResult<()> {
        let tasks = self.shared.tasks.write();
        tasks.get(&pid).ok_or(Errno::ESRCH)?.update(update);
        Ok(())
    }

    /// The task exits: its directory disappears for new lookups at once,
    /// and reads of its files already open fail with ESRCH.
    pub fn exit_task(&self, pid: u32) -> VfsResult<()> {
        let task = self.shared.tasks.write().remove(&pid).ok_or(Errno::ESRCH)?;
        task.alive.store(false, Ordering::Release);
        Ok(())
    }

    /// Makes `self` a symlink to the directory of `pid` (none: `self` does
    /// not exist); ESRCH if there is no such task. The VFS hands a
    /// filesystem no caller, so `self` names the task the instance is
    /// set up for (a sandbox mounts one procfs per process it runs), not
    /// the reader as Linux's does.
    pub fn set_self(&self, pid: Option<u32>) -> VfsResult<()> {
        let tasks = self.shared.tasks.write();
        let pid = pid.unwrap_or(0);
        if pid != 0 && !tasks.contains_key(&pid) {
            return Err(Errno::ESRCH);
        }
        self.shared.self_pid.store(pid, Ordering::Release);
        Ok(())
    }

    /// The live pids, in order.
    pub fn pids(&self) -> Vec<u32> {
        self.shared.tasks.read().keys().copied().collect()
    }
}
