//! The file systems a pair runs on, fresh for every state: vfscale's own
//! (a plain VFS, a kernfs tree, a procfs task table) and the host's
//! (a tmpfs scratch directory, /sys, /proc), laid out alike so that the
//! same relative path names the same kind of file in both.

use super::host_sys::HostSyscalls;
use super::sys::Syscalls;
use crate::host::{require_procfs, require_sysfs, ScratchDir};
use std::path::PathBuf;
use std::sync::Arc;

/// Which kind of file system a pair needs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fs {
    /// An empty in-memory file system: vfscale's VFS, the host's tmpfs.
    Tmpfs,
    /// A sysfs-like attribute tree: vfscale's kernfs, the host's /sys.
    Sysfs,
    /// A task table: vfscale's procfs, the host's /proc.
    Proc,
    /// An in-memory root with mounts on it ([`MOUNT_DIRS`]); vfscale only,
    /// as the host's side would change the machine's mount table.
    Mounts,
}

/// The directories of [`Fs::Mounts`]'s root: `m`, where a second
/// in-memory file system is mounted; `b`, where its directory `m/d` is
/// bound; `x`, empty, for mounts of the pairs' own.
pub const MOUNT_DIRS: [&str; 3] = ["/m", "/b", "/x"];

/// The sysfs attributes the pairs read, relative to the root: present on
/// every Linux host with two CPUs, and built into vfscale's kernfs tree.
pub const CPU_ATTRIBUTES: [&str; 2] =
    ["devices/system/cpu/cpu0/topology/core_id", "devices/system/cpu/cpu1/topology/core_id"];

/// The two pids the procfs pairs read: this process and its parent (or,
/// for pid 1, pid 2), which vfscale's task table holds too.
pub fn pids() -> [u32; 2] {
    let me = std::process::id();
    // SAFETY: getppid has no preconditions.
    let parent = u32::try_from(unsafe { libc::getppid() }).unwrap_or(0);
    let other = match parent {
        0 if me == 1 => 2,
        0 => 1,
        parent => parent,
    };
    [me, other]
}

/// Something a world's processes keep alive (a scratch directory, a tree).
pub type Keep = Arc<dyn std::any::Any + Send + Sync>;

/// A fresh file system: a maker of processes in it.
pub struct World {
    make: Box<dyn Fn() -> Arc<dyn Syscalls> + Send + Sync>,
}

impl World {
    /// A new process (file table, lock owner) in this file system.
    pub fn process(&self) -> Arc<dyn Syscalls> {
        (self.make)()
    }

    /// A world whose processes `make` makes.
    pub fn new(make: impl Fn() -> Arc<dyn Syscalls> + Send + Sync + 'static) -> World {
        World { make: Box::new(make) }
    }

    /// The host's file system of kind `fs` (tmpfs: a new scratch directory),
    /// or why this host has none.
    pub fn host(fs: Fs) -> Result<World, String> {
        let (root, keep): (PathBuf, Option<Keep>) = match fs {
            Fs::Tmpfs => {
                let dir = ScratchDir::new("commute", None)?;
                if let Some(note) = &dir.note {
                    return Err(note.clone());
                }
                (dir.path.clone(), Some(Arc::new(dir)))
            }
            Fs::Sysfs => (PathBuf::from("/sys"), require_sysfs().map(|()| None)?),
            Fs::Proc => (PathBuf::from("/proc"), require_procfs().map(|()| None)?),
            Fs::Mounts => return Err("vfscale only: on the host it would mount in the machine's namespace".into()),
        };
        Ok(World::new(move || Arc::new(HostSyscalls::new(root.clone(), keep.clone())) as Arc<dyn Syscalls>))
    }
}
