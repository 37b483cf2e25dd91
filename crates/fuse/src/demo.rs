//! The `--demo` trees: `sys/` is a [`Kernfs`] tree whose attribute files
//! show live values of the served VFS, and `proc/` a [`Procfs`] task table
//! that mirrors the host's processes.
//!
//! Invariant: each tree is a VFS instance of its own, mounted through the
//! VFS's mount table ([`vfscale::Context::mount`], by [`Demo::mount`]) in
//! the served namespace, on `/sys` and `/proc`, directories of the served
//! VFS made for them, as a distribution mounts sysfs and proc (`nosuid`,
//! `nodev`, `noexec`); the task table holds every host process seen at the
//! last refresh, which runs once before the mount is served and then every
//! [`REFRESH`] on a background thread until the `Demo` is dropped.
//!
//! Not for: exact process data — a refresh reads each process's `stat`,
//! `status` and `cmdline` at one moment, and a process that starts and
//! exits between two refreshes is never seen.

use crate::namespace::{Caching, Namespace};
use std::collections::BTreeSet;
use std::fmt;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{mpsc, Arc};
use std::thread::JoinHandle;
use std::time::Duration;
use vfscale::kernfs::{Kernfs, KernfsConfig};
use vfscale::procfs::{ProcConfig, Procfs, TaskInfo};
use vfscale::{Errno, MountFlags, Vfs, VfsResult};

/// How often `proc/` follows the host's processes.
pub(crate) const REFRESH: Duration = Duration::from_millis(500);

/// The demo trees of one mount.
pub(crate) struct Demo {
    sys: Kernfs,
    proc: Arc<Procfs>,
    /// Dropping it stops the refresher, which `Drop` then joins.
    stop: Option<mpsc::Sender<()>>,
    refresher: Option<JoinHandle<()>>,
    /// Refreshes of `proc` done so far, the one before serving included:
    /// what a caller waits on to know `proc` has seen a change on the host
    /// (any refresh that began after it, so the second to end after it).
    refreshes: Arc<AtomicU64>,
}

impl fmt::Debug for Demo {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Demo").field("tasks", &self.proc.pids().len()).finish_non_exhaustive()
    }
}

/// One host process as `proc/` shows it; `None` once it is gone.
fn host_task(pid: u32) -> Option<TaskInfo> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command name is parenthesised and may hold spaces and parens.
    let (open, close) = (stat.find('(')?, stat.rfind(')')?);
    let comm = stat.get(open + 1..close)?;
    let fields: Vec<&str> = stat.get(close + 1..)?.split_whitespace().collect();
    // Counted from the state, field 3 of proc(5).
    let field = |n: usize| fields.get(n - 3).and_then(|f| f.parse::<u64>().ok());
    let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).ok()?;
    let args = cmdline.split(|&b| b == 0).filter(|a| !a.is_empty()).map(|a| String::from_utf8_lossy(a).into_owned());
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let uid =
        status.lines().find_map(|l| l.strip_prefix("Uid:")).and_then(|u| u.split_whitespace().next()?.parse().ok());
    let mut info = TaskInfo::new(comm, args);
    info.state = fields.first().and_then(|s| s.chars().next()).unwrap_or('?');
    info.ppid = field(4).unwrap_or(0) as u32;
    info.uid = uid.unwrap_or(0);
    info.threads = field(20).unwrap_or(1) as u32;
    info.rss_pages = field(24).unwrap_or(0);
    Some(info)
}

/// The host's process ids now.
fn host_pids() -> BTreeSet<u32> {
    std::fs::read_dir("/proc")
        .map(|dir| dir.filter_map(|e| e.ok()?.file_name().to_str()?.parse().ok()).collect())
        .unwrap_or_default()
}

/// Brings `proc`'s task table in line with the host: adds new processes,
/// updates the others, and exits those gone.
fn refresh(proc: &Procfs) {
    let host = host_pids();
    for pid in proc.pids() {
        if !host.contains(&pid) {
            // Gone since the listing: nothing to exit.
            let _ = proc.exit_task(pid);
        }
    }
    for pid in host {
        match host_task(pid) {
            Some(info) => {
                if proc.update_task(pid, |old| *old = info.clone()) == Err(Errno::ESRCH) {
                    let _ = proc.add_task(pid, info);
                }
            }
            None => {
                let _ = proc.exit_task(pid);
            }
        }
    }
}

/// Reads a decimal number written to an attribute.
fn parse(buf: &[u8]) -> VfsResult<u64> {
    std::str::from_utf8(buf).ok().and_then(|s| s.trim().parse().ok()).ok_or(Errno::EINVAL)
}

/// Builds `fs/vfscale/` of `sys`: read-only attributes with `vfs`'s
/// counters and its lock list, and the writable `drop_caches`.
fn build_sys(sys: &Kernfs, vfs: &Vfs) -> VfsResult<()> {
    let fs = sys.create_dir(&sys.root(), "fs", 0o755)?;
    let dir = sys.create_dir(&fs, "vfscale", 0o755)?;
    type Show = fn(&Vfs) -> String;
    let counters: [(&str, Show); 5] = [
        ("inodes", |v| v.statfs().inodes.to_string()),
        ("bytes", |v| v.statfs().bytes.to_string()),
        ("dentries", |v| v.statfs().dentries.to_string()),
        ("negative_dentries", |v| v.statfs().negative_dentries.to_string()),
        ("locks", |v| v.locks().proc_locks().trim_end().to_string()),
    ];
    for (name, show) in counters {
        let vfs = vfs.clone();
        let show = move || Ok(format!("{}\n", show(&vfs)).into_bytes());
        sys.create_file(&dir, name, 0o444, show, None::<fn(&[u8]) -> VfsResult<()>>)?;
    }
    // Linux's /proc/sys/vm/drop_caches: 1 to 3, then reads back the last.
    let last = Arc::new(AtomicU64::new(0));
    let shown = Arc::clone(&last);
    let vfs = vfs.clone();
    let show = move || Ok(format!("{}\n", shown.load(Ordering::Relaxed)).into_bytes());
    let store = move |buf: &[u8]| {
        let value = parse(buf)?;
        if !(1..=3).contains(&value) {
            return Err(Errno::EINVAL);
        }
        vfs.drop_caches(Duration::from_secs(1));
        last.store(value, Ordering::Relaxed);
        Ok(())
    };
    sys.create_file(&dir, "drop_caches", 0o644, show, Some(store))?;
    Ok(())
}

impl Demo {
    /// Builds the trees for `vfs` and starts following the host's
    /// processes; [`Demo::mount`] mounts them.
    pub fn new(vfs: &Vfs) -> VfsResult<Demo> {
        let sys = Kernfs::new(KernfsConfig::rcu());
        build_sys(&sys, vfs)?;
        let proc = Arc::new(Procfs::new(ProcConfig::rcu_revalidate()));
        refresh(&proc);
        let refreshes = Arc::new(AtomicU64::new(1));
        let (stop, stopped) = mpsc::channel::<()>();
        let (follower, done) = (Arc::clone(&proc), Arc::clone(&refreshes));
        let refresher = std::thread::Builder::new()
            .name("vfscale-proc".into())
            .spawn(move || {
                while stopped.recv_timeout(REFRESH) == Err(mpsc::RecvTimeoutError::Timeout) {
                    refresh(&follower);
                    done.fetch_add(1, Ordering::Release);
                }
            })
            .map_err(|_| Errno::EAGAIN)?;
        Ok(Demo { sys, proc, stop: Some(stop), refresher: Some(refresher), refreshes })
    }

    /// The count of `proc`'s refreshes so far, which goes on growing.
    pub fn refreshes(&self) -> Arc<AtomicU64> {
        Arc::clone(&self.refreshes)
    }

    /// Mounts the trees in `ns`: `sys` on `/sys`, `proc` on `/proc`,
    /// making the directories (mode 0555) where they are missing.
    pub fn mount(&self, ns: &mut Namespace) -> VfsResult<()> {
        let flags = MountFlags::NOSUID | MountFlags::NODEV | MountFlags::NOEXEC;
        ns.mount(self.sys.vfs().clone(), "sysfs", "/sys", flags, Caching::Live)?;
        ns.mount(self.proc.vfs().clone(), "proc", "/proc", flags, Caching::Live)
    }
}

impl Drop for Demo {
    fn drop(&mut self) {
        drop(self.stop.take());
        if let Some(refresher) = self.refresher.take() {
            // A panicked refresher has nothing left to clean up.
            let _ = refresher.join();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use vfscale::{Credentials, OpenFlags, Process};

    /// The served `vfs` with the demo trees mounted, and a root process in
    /// its namespace.
    fn mounted(vfs: &Vfs) -> (Namespace, Demo, Process) {
        let demo = Demo::new(vfs).unwrap();
        let mut ns = Namespace::new(vfs.clone(), Caching::Live).unwrap();
        demo.mount(&mut ns).unwrap();
        let p = vfs.process_in(ns.mount_namespace(), Credentials::root());
        (ns, demo, p)
    }

    fn read(p: &Process, path: &str) -> VfsResult<String> {
        let fd = p.open(path, OpenFlags::RDONLY, 0)?;
        let mut buf = vec![0; 4096];
        let n = p.read(fd, &mut buf);
        p.close(fd)?;
        let n = n?;
        Ok(String::from_utf8_lossy(&buf[..n]).into_owned())
    }

    #[test]
    fn sys_attributes_show_live_values() {
        let vfs = Vfs::default();
        let (_ns, demo, p) = mounted(&vfs);
        assert_eq!(p.stat("/sys").unwrap().ino, demo.sys.vfs().root().ino(), "the mount is crossed");
        assert_eq!(p.stat("/sys/..").unwrap().ino, vfs.root().ino());
        assert!(p.statfs("/sys").unwrap().flags.options().contains("nosuid,nodev,noexec"));
        let before: usize = read(&p, "/sys/fs/vfscale/inodes").unwrap().trim().parse().unwrap();
        vfs.process(Credentials::root()).mkdir("/x", 0o755).unwrap();
        let after: usize = read(&p, "/sys/fs/vfscale/inodes").unwrap().trim().parse().unwrap();
        assert_eq!(after, before + 1);
        let fd = p.open("/f", OpenFlags::CREAT | OpenFlags::RDWR, 0o644).unwrap();
        p.flock(fd, vfscale::locks::LOCK_EX).unwrap();
        assert!(read(&p, "/sys/fs/vfscale/locks").unwrap().starts_with("1: FLOCK"));
    }

    #[test]
    fn drop_caches_is_the_one_writable_attribute() {
        let vfs = Vfs::default();
        let (ns, _demo, root) = mounted(&vfs);
        let fd = root.open("/sys/fs/vfscale/drop_caches", OpenFlags::WRONLY, 0).unwrap();
        assert_eq!(root.write(fd, b"2\n"), Ok(2));
        assert_eq!(read(&root, "/sys/fs/vfscale/drop_caches").unwrap(), "2\n");
        assert_eq!(root.pwrite(fd, b"7", 0), Err(Errno::EINVAL));
        let alice = vfs.process_in(ns.mount_namespace(), Credentials::user(1000, 1000, []));
        assert_eq!(alice.open("/sys/fs/vfscale/drop_caches", OpenFlags::WRONLY, 0).unwrap_err(), Errno::EACCES);
        assert_eq!(alice.open("/sys/fs/vfscale/inodes", OpenFlags::WRONLY, 0).unwrap_err(), Errno::EACCES);
    }

    #[test]
    fn proc_follows_the_host() {
        let vfs = Vfs::default();
        let (_ns, demo, p) = mounted(&vfs);
        let me = std::process::id();
        let status = read(&p, &format!("/proc/{me}/status")).unwrap();
        assert!(status.contains(&format!("Pid:\t{me}")), "{status}");
        let cmdline = read(&p, &format!("/proc/{me}/cmdline")).unwrap();
        let exe = std::env::args().next().unwrap();
        assert!(cmdline.starts_with(&exe), "{cmdline:?}");
        let mut child = std::process::Command::new("sleep").arg("30").spawn().unwrap();
        let pid = child.id();
        let refreshes = demo.refreshes();
        // Two refreshes that end from now: the second began after the
        // change on the host.
        let refreshed = || {
            let since = refreshes.load(Ordering::Acquire);
            // A hang guard: a refresh comes every REFRESH.
            let deadline = std::time::Instant::now() + Duration::from_secs(60);
            while refreshes.load(Ordering::Acquire) < since + 2 {
                assert!(std::time::Instant::now() < deadline, "proc/ stopped refreshing");
                std::thread::sleep(REFRESH / 5);
            }
        };
        refreshed();
        assert!(read(&p, &format!("/proc/{pid}/stat")).unwrap().starts_with(&format!("{pid} (sleep) ")));
        child.kill().unwrap();
        child.wait().unwrap();
        refreshed();
        assert_eq!(read(&p, &format!("/proc/{pid}/stat")).unwrap_err(), Errno::ENOENT, "pid {pid} not gone");
    }

    #[test]
    fn host_tasks_are_read_from_proc() {
        let info = host_task(std::process::id()).unwrap();
        assert_eq!(info.uid, my_uid());
        assert!(info.threads >= 1 && info.ppid > 0);
        assert!(host_task(u32::MAX).is_none());
        assert_eq!(parse(b" 3\n"), Ok(3));
        assert_eq!(parse(b"x"), Err(Errno::EINVAL));
    }

    /// This process's uid, from the host's `/proc`.
    fn my_uid() -> u32 {
        use std::os::unix::fs::MetadataExt;
        std::fs::metadata("/proc/self").unwrap().uid()
    }
}
