//! sv6's "conflict-free" property for cached path walks (kernel-notes §2):
//! an rcu-walk of a path that is already in the dcache takes no lock,
//! changes no reference count and writes no shared word. The counts come
//! from `vfscale_sync::audit` (the `audit` feature, on for tests), which
//! every primitive and every reference the VFS takes report to.

use vfscale::config::WalkMode;
use vfscale::{Credentials, Errno, OpenFlags, Process, Vfs, VfsConfig};
use vfscale_sync::audit;

const DEEP: &str = "/usr/share/doc/vfscale/README";

fn tree(config: VfsConfig) -> (Vfs, Process) {
    let vfs = Vfs::new(config);
    let p = vfs.process(Credentials::root());
    for dir in ["/usr", "/usr/share", "/usr/share/doc", "/usr/share/doc/vfscale"] {
        p.mkdir(dir, 0o755).unwrap();
    }
    let fd = p.open(DEEP, OpenFlags::CREAT | OpenFlags::WRONLY, 0o644).unwrap();
    p.write(fd, b"hello").unwrap();
    p.close(fd).unwrap();
    p.symlink("share/doc", "/usr/docs").unwrap();
    (vfs, p)
}

/// The audit counts of `walk`, after one warm-up call that fills the cache.
fn counts_of(mut walk: impl FnMut()) -> audit::Counts {
    walk();
    let before = audit::counts();
    for _ in 0..100 {
        walk();
    }
    let after = audit::counts();
    audit::Counts {
        shared_writes: after.shared_writes - before.shared_writes,
        lock_acquisitions: after.lock_acquisitions - before.lock_acquisitions,
    }
}

#[test]
fn cached_walk_does_no_shared_writes() {
    const { assert!(audit::ENABLED, "tests build vfscale-sync with the audit feature") };
    let (_vfs, p) = tree(VfsConfig::default());
    let none = audit::Counts::default();
    assert_eq!(counts_of(|| assert_eq!(p.stat(DEEP).unwrap().size, 5)), none, "stat of a cached path");
    assert_eq!(counts_of(|| assert!(p.lstat("/usr/share/../share/./doc").is_ok())), none, "dot and dotdot");
    assert_eq!(counts_of(|| assert!(p.stat("/usr/docs/vfscale/README").is_ok())), none, "through a symlink");
    assert_eq!(counts_of(|| assert_eq!(p.stat("/usr/share/nothing"), Err(Errno::ENOENT))), none, "negative dentry");
    p.chdir("/usr/share").unwrap();
    assert_eq!(counts_of(|| assert!(p.stat("doc/vfscale").is_ok())), none, "relative to the cwd");
}

/// The control: the same walks in ref-walk mode are caught writing, so the
/// zero above is a measurement, not an instrument that sees nothing.
#[test]
fn ref_walk_of_the_same_path_is_seen_writing() {
    let (_vfs, p) = tree(VfsConfig { walk: WalkMode::RefOnly, ..VfsConfig::default() });
    let counts = counts_of(|| assert_eq!(p.stat(DEEP).unwrap().size, 5));
    // Per walk: a reference on each of the 5 dentries and inodes.
    assert!(counts.shared_writes >= 100 * 5, "{counts:?}");
}

/// A walk that misses the cache leaves rcu-walk and is seen writing too.
#[test]
fn uncached_negative_lookups_take_the_directory_lock() {
    let (_vfs, p) =
        tree(VfsConfig { negative_dentries: vfscale::config::NegativeDentries::Uncached, ..VfsConfig::default() });
    let counts = counts_of(|| assert_eq!(p.stat("/usr/share/nothing"), Err(Errno::ENOENT)));
    assert!(counts.lock_acquisitions >= 100, "{counts:?}");
}

#[test]
fn cached_kernfs_and_pid_walks_do_no_shared_writes() {
    use vfscale::kernfs::{Kernfs, KernfsConfig};
    use vfscale::procfs::{ProcConfig, Procfs, TaskInfo};
    let none = audit::Counts::default();

    let sys = Kernfs::new(KernfsConfig::rcu());
    let class = sys.create_dir(&sys.root(), "class", 0o755).unwrap();
    let net = sys.create_dir(&class, "net", 0o755).unwrap();
    sys.create_file(&net, "mtu", 0o444, || Ok(b"1500".to_vec()), None::<fn(&[u8]) -> vfscale::VfsResult<()>>).unwrap();
    let p = sys.vfs().process(Credentials::root());
    assert_eq!(counts_of(|| assert!(p.stat("/class/net/mtu").is_ok())), none, "kernfs path");
    assert_eq!(counts_of(|| assert_eq!(p.stat("/class/none"), Err(Errno::ENOENT))), none, "kernfs negative");

    let proc = Procfs::new(ProcConfig::rcu_revalidate());
    proc.add_task(4242, TaskInfo::new("sh", ["sh"])).unwrap();
    let p = proc.vfs().process(Credentials::root());
    assert_eq!(counts_of(|| assert!(p.stat("/4242/status").is_ok())), none, "<pid> path");

    // The "before" designs leave rcu-walk at the first revalidation.
    let before = Procfs::new(ProcConfig::ref_revalidate());
    before.add_task(4242, TaskInfo::new("sh", ["sh"])).unwrap();
    let p = before.vfs().process(Credentials::root());
    assert!(counts_of(|| assert!(p.stat("/4242/status").is_ok())).shared_writes > 0);
}

/// Issue goal: after warm-up, the hot paths write no shared word and take
/// no lock, even when two processes work on the same file.
#[test]
fn hot_paths_do_no_shared_writes() {
    use vfscale::kernfs::{Kernfs, KernfsConfig};
    use vfscale::procfs::{ProcConfig, Procfs, TaskInfo};
    let none = audit::Counts::default();
    let open_read_close = |p: &Process, path: &str| {
        let fd = p.open(path, OpenFlags::RDONLY, 0).unwrap();
        let mut buf = [0u8; 32];
        assert!(p.read(fd, &mut buf).unwrap() > 0);
        p.close(fd).unwrap();
    };

    let (vfs, a) = tree(VfsConfig::default());
    let b = vfs.process(Credentials::root());
    // Past the coarse clock's tick of the file's creation, so the warm-up
    // read makes the one relatime update.
    std::thread::sleep(std::time::Duration::from_millis(20));
    let both = || {
        open_read_close(&a, DEEP);
        open_read_close(&b, DEEP);
    };
    assert_eq!(counts_of(both), none, "open+read+close of one file by two processes");
    assert_eq!(counts_of(|| assert_eq!(a.stat("/usr/missing"), Err(Errno::ENOENT))), none, "a missing lookup");
    assert_eq!(counts_of(|| assert_eq!(b.stat(DEEP).unwrap().size, 5)), none, "stat");
    let fd = a.open(DEEP, OpenFlags::RDONLY, 0).unwrap();
    let mut buf = [0u8; 8];
    assert_eq!(counts_of(|| assert_eq!(a.pread(fd, &mut buf, 1).unwrap(), 4)), none, "a read of the file's data");
    assert_eq!(counts_of(|| assert_eq!(a.fstat(fd).unwrap().size, 5)), none, "fstat");

    let sys = Kernfs::new(KernfsConfig::rcu());
    let cpu = sys.create_dir(&sys.root(), "cpu", 0o755).unwrap();
    sys.create_file(&cpu, "online", 0o444, || Ok(b"0-1\n".to_vec()), None::<fn(&[u8]) -> vfscale::VfsResult<()>>)
        .unwrap();
    let (p, q) = (sys.vfs().process(Credentials::root()), sys.vfs().process(Credentials::root()));
    let both = || {
        open_read_close(&p, "/cpu/online");
        open_read_close(&q, "/cpu/online");
    };
    assert_eq!(counts_of(both), none, "open+read+close of one kernfs attribute by two processes");

    let proc = Procfs::new(ProcConfig::rcu_revalidate());
    proc.add_task(7, TaskInfo::new("init", ["init"])).unwrap();
    let p = proc.vfs().process(Credentials::root());
    assert_eq!(counts_of(|| open_read_close(&p, "/7/status")), none, "open+read+close of a /proc file");
}

/// The control for the test above: the same open+read+close in the
/// "before" design (ref-walk) is seen writing, so the zero there is a
/// measurement.
#[test]
fn ref_walk_open_read_close_is_seen_writing() {
    let (_vfs, p) = tree(VfsConfig { walk: WalkMode::RefOnly, ..VfsConfig::default() });
    let counts = counts_of(|| {
        let fd = p.open(DEEP, OpenFlags::RDONLY, 0).unwrap();
        p.close(fd).unwrap();
    });
    assert!(counts.shared_writes >= 100 * 5, "{counts:?}");
}

/// Reading a file's data (pread of a cached, open file) takes no lock and
/// writes nothing shared: the page map is read under the epoch and a
/// sequence count (`vfscale::pages`). The control: a write to the same
/// file is seen taking the per-file writer lock.
#[test]
fn pread_does_no_shared_writes() {
    let (_vfs, p) = tree(VfsConfig::default());
    let fd = p.open(DEEP, OpenFlags::RDWR, 0).unwrap();
    p.pwrite(fd, &[7; 10_000], 100 << 20).unwrap();
    // Past the coarse clock's tick, so the first read's relatime update
    // is the last one.
    std::thread::sleep(std::time::Duration::from_millis(20));
    let file = p.open_file(fd).unwrap();
    let none = audit::Counts::default();
    let mut buf = [0u8; 8192];
    let read = |at: u64, want: usize| {
        let mut buf = [0u8; 8192];
        assert_eq!(file.pread(&mut buf, at).unwrap(), want);
    };
    assert_eq!(counts_of(|| read(0, 8192)), none, "the first page and a hole");
    assert_eq!(counts_of(|| read(1 << 20, 8192)), none, "a hole");
    assert_eq!(counts_of(|| read((100 << 20) + 4000, 6000)), none, "data across pages");
    assert_eq!(counts_of(|| read(1 << 40, 0)), none, "past the end");
    assert_eq!(file.pread(&mut buf, (100 << 20) + 4000).unwrap(), 6000);
    assert!(buf[..6000].iter().all(|&b| b == 7));

    let writes = counts_of(|| assert_eq!(file.pwrite(b"x", 3, p.credentials()).unwrap(), 1));
    assert!(writes.lock_acquisitions >= 100 && writes.shared_writes >= 100, "{writes:?}");
}
