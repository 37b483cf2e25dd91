//! procfs: a task table shown as `/proc`, in both revalidation designs of
//! seed 003.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread;
use vfscale::procfs::{ProcConfig, Procfs, TaskInfo};
use vfscale::{Credentials, Errno, OpenFlags};

fn designs() -> [ProcConfig; 2] {
    [ProcConfig::ref_revalidate(), ProcConfig::rcu_revalidate()]
}

fn read_all(p: &vfscale::Process, path: &str) -> Result<Vec<u8>, Errno> {
    let fd = p.open(path, OpenFlags::RDONLY, 0)?;
    let mut buf = vec![0u8; 1024];
    let n = p.read(fd, &mut buf);
    p.close(fd)?;
    buf.truncate(n?);
    Ok(buf)
}

#[test]
fn pid_directories_show_live_tasks() {
    for config in designs() {
        let proc = Procfs::new(config);
        proc.add_task(1, TaskInfo::new("init", ["/sbin/init"])).unwrap();
        let mut info = TaskInfo::new("bash", ["bash", "-l"]);
        info.uid = 1000;
        proc.add_task(200, info).unwrap();
        assert_eq!(proc.add_task(1, TaskInfo::new("x", ["x"])), Err(Errno::EEXIST));
        assert_eq!(proc.add_task(0, TaskInfo::new("x", ["x"])), Err(Errno::EINVAL));
        let p = proc.vfs().process(Credentials::root());
        let names: Vec<_> = p.list_dir("/").unwrap().into_iter().map(|e| e.name).collect();
        assert_eq!(names, [b".".to_vec(), b"..".to_vec(), b"1".to_vec(), b"200".to_vec()], "{config:?}");
        let names: Vec<_> = p.list_dir("/200").unwrap().into_iter().skip(2).map(|e| e.name).collect();
        assert_eq!(names, [b"cmdline".to_vec(), b"stat".to_vec(), b"status".to_vec()]);
        assert_eq!(read_all(&p, "/200/cmdline").unwrap(), b"bash\0-l\0");
        let stat = String::from_utf8(read_all(&p, "/200/stat").unwrap()).unwrap();
        assert!(stat.starts_with("200 (bash) S 1 "), "{stat}");
        assert_eq!(stat.split_whitespace().count(), 52, "proc(5) has 52 fields: {stat}");
        let status = String::from_utf8(read_all(&p, "/200/status").unwrap()).unwrap();
        assert!(status.contains("Name:\tbash\n") && status.contains("Uid:\t1000\t1000\t1000\t1000\n"), "{status}");
        assert_eq!(p.stat("/200").unwrap().uid, 1000);
        proc.update_task(200, |t| t.state = 'R').unwrap();
        assert!(String::from_utf8(read_all(&p, "/200/stat").unwrap()).unwrap().starts_with("200 (bash) R "));
        for missing in ["/3", "/01", "/+1", "/200/environ", "/self"] {
            assert_eq!(p.stat(missing), Err(Errno::ENOENT), "{missing}");
        }
        let fd = p.open("/200/stat", OpenFlags::WRONLY, 0).expect("root may open it for writing");
        assert_eq!(p.write(fd, b"x"), Err(Errno::EINVAL), "but it has no write method");
        p.close(fd).unwrap();
        let alice = proc.vfs().process(Credentials::user(1000, 1000, []));
        assert_eq!(alice.open("/200/stat", OpenFlags::WRONLY, 0), Err(Errno::EACCES));
    }
}

#[test]
fn a_dead_task_disappears_at_once_and_its_open_files_fail_with_esrch() {
    for config in designs() {
        let proc = Procfs::new(config);
        proc.add_task(7, TaskInfo::new("worker", ["worker"])).unwrap();
        let p = proc.vfs().process(Credentials::root());
        assert!(p.stat("/7/stat").is_ok());
        let fd = p.open("/7/status", OpenFlags::RDONLY, 0).unwrap();
        proc.exit_task(7).unwrap();
        assert_eq!(proc.exit_task(7), Err(Errno::ESRCH));
        assert_eq!(proc.update_task(7, |_| {}), Err(Errno::ESRCH));
        let mut buf = [0u8; 16];
        assert_eq!(p.read(fd, &mut buf), Err(Errno::ESRCH), "{config:?}");
        assert_eq!(p.stat("/7"), Err(Errno::ENOENT), "{config:?}: the cached dentry is revalidated");
        assert_eq!(p.stat("/7/stat"), Err(Errno::ENOENT));
        assert!(p.list_dir("/").unwrap().iter().all(|e| e.name != b"7"));
        proc.add_task(7, TaskInfo::new("reborn", ["reborn"])).unwrap();
        assert_eq!(read_all(&p, "/7/cmdline").unwrap(), b"reborn\0", "a new task with the same pid is a new directory");
        p.close(fd).unwrap();
    }
}

/// ps-like walkers racing task exits and births (bounded): every read
/// either succeeds with the task's own data or fails with ENOENT/ESRCH.
#[test]
fn ps_walkers_race_exits() {
    let iterations: u32 = vfscale_sync::test_support::stress_iters(300);
    for config in designs() {
        let proc = Arc::new(Procfs::new(config));
        for pid in 1..=20 {
            proc.add_task(pid, TaskInfo::new(&format!("t{pid}"), [format!("t{pid}")])).unwrap();
        }
        let stop = Arc::new(AtomicBool::new(false));
        let walkers: Vec<_> = (0..2)
            .map(|_| {
                let (proc, stop) = (Arc::clone(&proc), Arc::clone(&stop));
                thread::spawn(move || {
                    let p = proc.vfs().process(Credentials::root());
                    while !stop.load(Ordering::SeqCst) {
                        for entry in p.list_dir("/").unwrap().into_iter().skip(2) {
                            let pid = String::from_utf8(entry.name).unwrap();
                            match read_all(&p, &format!("/{pid}/cmdline")) {
                                Ok(v) => assert_eq!(v, format!("t{pid}\0").into_bytes()),
                                Err(Errno::ENOENT | Errno::ESRCH) => {}
                                Err(e) => panic!("{pid}: {e}"),
                            }
                        }
                    }
                })
            })
            .collect();
        for i in 0..iterations {
            let pid = 1 + i % 20;
            proc.exit_task(pid).unwrap();
            proc.add_task(pid, TaskInfo::new(&format!("t{pid}"), [format!("t{pid}")])).unwrap();
        }
        stop.store(true, Ordering::SeqCst);
        for w in walkers {
            w.join().unwrap();
        }
        assert_eq!(proc.pids(), (1..=20).collect::<Vec<_>>());
    }
}

/// A task's `mountinfo` is the text of the namespace its view reaches, as
/// `Process::mountinfo` gives it; `self` names the task `set_self` chose.
#[test]
fn mountinfo_shows_each_tasks_own_namespace() {
    use vfscale::procfs::MountView;
    use vfscale::{MountFlags, Process, Vfs};

    /// A view of `p` that does not keep it (nor, through it, this procfs).
    fn view_of(p: &Arc<Process>) -> MountView {
        let weak = Arc::downgrade(p);
        MountView::new(move || weak.upgrade().ok_or(Errno::ESRCH)?.mountinfo())
    }

    for config in designs() {
        let root_fs = Vfs::default();
        let ns = root_fs.new_namespace();
        let p = Arc::new(root_fs.process_in(&ns, Credentials::root()));
        for dir in ["/proc", "/mnt"] {
            p.mkdir(dir, 0o755).unwrap();
        }
        p.mount(&Vfs::default(), "scratch", "/mnt", MountFlags::RDONLY).unwrap();
        let proc = Procfs::new(config);
        p.mount(proc.vfs(), "proc", "/proc", MountFlags::NONE).unwrap();

        // Another process, alone in a namespace of its own.
        let other_fs = Vfs::default();
        let q = Arc::new(other_fs.process_in(&other_fs.new_namespace(), Credentials::root()));

        let mut info = TaskInfo::new("sh", ["sh"]);
        info.mounts = Some(view_of(&p));
        proc.add_task(7, info).unwrap();
        let mut info = TaskInfo::new("other", ["other"]);
        info.mounts = Some(view_of(&q));
        proc.add_task(8, info).unwrap();
        proc.add_task(9, TaskInfo::new("bare", ["bare"])).unwrap();

        let text = String::from_utf8(read_all(&p, "/proc/7/mountinfo").unwrap()).unwrap();
        assert_eq!(text, p.mountinfo().unwrap(), "{config:?}");
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines.len(), 3, "/, /mnt and /proc: {text}");
        assert!(lines[1].contains(" / /mnt ro") && lines[1].ends_with(" - tmpfs scratch rw"), "{text}");
        assert!(lines[2].contains(" / /proc rw") && lines[2].ends_with(" - proc proc rw"), "{text}");
        let other = String::from_utf8(read_all(&p, "/proc/8/mountinfo").unwrap()).unwrap();
        assert_eq!(other, q.mountinfo().unwrap());
        assert_eq!(other.lines().count(), 1, "the other namespace has its root alone: {other}");

        // A task whose namespace nothing reaches has no mountinfo.
        assert_eq!(p.stat("/proc/9/mountinfo"), Err(Errno::ENOENT));
        let names =
            |dir: &str| -> Vec<Vec<u8>> { p.list_dir(dir).unwrap().into_iter().skip(2).map(|e| e.name).collect() };
        assert_eq!(names("/proc/9"), [b"cmdline".to_vec(), b"stat".to_vec(), b"status".to_vec()]);
        assert!(names("/proc/7").contains(&b"mountinfo".to_vec()));

        // `self`: absent until chosen, then a symlink to the task's directory.
        assert_eq!(p.lstat("/proc/self"), Err(Errno::ENOENT));
        assert_eq!(proc.set_self(Some(99)), Err(Errno::ESRCH));
        proc.set_self(Some(7)).unwrap();
        assert_eq!(p.readlink("/proc/self").unwrap(), b"7");
        assert!(names("/proc").contains(&b"self".to_vec()));
        assert_eq!(read_all(&p, "/proc/self/mountinfo").unwrap(), text.as_bytes());
        proc.set_self(Some(8)).unwrap();
        assert_eq!(p.readlink("/proc/self").unwrap(), b"8", "a cached self follows the change");
        assert_eq!(read_all(&p, "/proc/self/mountinfo").unwrap(), other.as_bytes());
        proc.set_self(None).unwrap();
        assert_eq!(p.lstat("/proc/self"), Err(Errno::ENOENT));

        // The view of a process that is gone: ESRCH, as a read of an
        // exited task's file.
        drop(q);
        assert_eq!(read_all(&p, "/proc/8/mountinfo"), Err(Errno::ESRCH));
    }
}
