//! sv6's "conflict-free" property for cached path walks and the other hot
//! paths (kernel-notes §2 and §7): two threads on two CPUs running them
//! write no cache line the other touches. The verdicts come from
//! `vfscale_sync::conflict::check_pair`, which compares the lines every
//! audited atomic, lock and counted reference touched (the `audit`
//! feature, on for tests).

use std::sync::atomic::{AtomicUsize, Ordering};
use vfscale::config::WalkMode;
use vfscale::{
    AtFlags, Credentials, Errno, MountFlags, OpenFlags, Process, SetTime, Timespec, Vfs, VfsConfig, AT_FDCWD,
};
use vfscale_sync::audit;
use vfscale_sync::conflict::{self, Verdict};
use vfscale_sync::test_support::wait_for_clock_past;

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

/// The checker's verdict on `a` and `b` run side by side (after warm-up).
fn verdict(a: impl Fn() + Sync, b: impl Fn() + Sync) -> Verdict {
    let a = |_: usize| {
        a();
        Ok(())
    };
    let b = |_: usize| {
        b();
        Ok(())
    };
    conflict::check_pair(&a, &b).unwrap()
}

/// Asserts that two threads running `op` side by side do not conflict.
#[track_caller]
fn assert_conflict_free(what: &str, op: impl Fn() + Sync) {
    let v = verdict(&op, &op);
    assert!(v.conflict_free(), "{what}: {:#?}", v.conflicts);
}

#[test]
fn cached_walk_does_no_shared_writes() {
    const { assert!(audit::ENABLED, "tests build vfscale-sync with the audit feature") };
    let (_vfs, p) = tree(VfsConfig::default());
    assert_conflict_free("stat of a cached path", || assert_eq!(p.stat(DEEP).unwrap().size, 5));
    assert_conflict_free("dot and dotdot", || assert!(p.lstat("/usr/share/../share/./doc").is_ok()));
    assert_conflict_free("through a symlink", || assert!(p.stat("/usr/docs/vfscale/README").is_ok()));
    assert_conflict_free("negative dentry", || assert_eq!(p.stat("/usr/share/nothing"), Err(Errno::ENOENT)));
    p.chdir("/usr/share").unwrap();
    assert_conflict_free("relative to the cwd", || assert!(p.stat("doc/vfscale").is_ok()));
}

/// The control: the same walks in ref-walk mode are caught writing, so the
/// zero above is a measurement, not an instrument that sees nothing.
#[test]
fn ref_walk_of_the_same_path_is_seen_writing() {
    let (_vfs, p) = tree(VfsConfig { walk: WalkMode::RefOnly, ..VfsConfig::default() });
    let stat = || assert_eq!(p.stat(DEEP).unwrap().size, 5);
    let v = verdict(stat, stat);
    // A reference on each of the 5 dentries and inodes on the way.
    assert!(v.conflicts.len() >= 5, "{:#?}", v.conflicts);
    assert!(v.conflicts.iter().any(|c| c.sites.iter().any(|s| s.contains("namei.rs"))), "{:#?}", v.conflicts);
}

/// A walk that misses the cache leaves rcu-walk and is seen writing too.
#[test]
fn uncached_negative_lookups_take_the_directory_lock() {
    let (_vfs, p) =
        tree(VfsConfig { negative_dentries: vfscale::config::NegativeDentries::Uncached, ..VfsConfig::default() });
    let missing = || assert_eq!(p.stat("/usr/share/nothing"), Err(Errno::ENOENT));
    let v = verdict(missing, missing);
    assert!(v.a.lock_acquisitions() >= 2 && !v.conflict_free(), "{v:#?}");
}

#[test]
fn cached_kernfs_and_pid_walks_do_no_shared_writes() {
    use vfscale::kernfs::{Kernfs, KernfsConfig};
    use vfscale::procfs::{ProcConfig, Procfs, TaskInfo};
    let sys = Kernfs::new(KernfsConfig::rcu());
    let class = sys.create_dir(&sys.root(), "class", 0o755).unwrap();
    let net = sys.create_dir(&class, "net", 0o755).unwrap();
    sys.create_file(&net, "mtu", 0o444, || Ok(b"1500".to_vec()), None::<fn(&[u8]) -> vfscale::VfsResult<()>>).unwrap();
    let p = sys.vfs().process(Credentials::root());
    assert_conflict_free("kernfs path", || assert!(p.stat("/class/net/mtu").is_ok()));
    assert_conflict_free("kernfs negative", || assert_eq!(p.stat("/class/none"), Err(Errno::ENOENT)));

    let proc = Procfs::new(ProcConfig::rcu_revalidate());
    proc.add_task(4242, TaskInfo::new("sh", ["sh"])).unwrap();
    let p = proc.vfs().process(Credentials::root());
    assert_conflict_free("<pid> path", || assert!(p.stat("/4242/status").is_ok()));

    // The "before" designs leave rcu-walk at the first revalidation.
    let before = Procfs::new(ProcConfig::ref_revalidate());
    before.add_task(4242, TaskInfo::new("sh", ["sh"])).unwrap();
    let p = before.vfs().process(Credentials::root());
    let stat = || assert!(p.stat("/4242/status").is_ok());
    assert!(!verdict(stat, stat).conflict_free());
}

/// After warm-up, two processes on two CPUs running the hot paths on the
/// same file conflict on no line.
#[test]
fn hot_paths_do_no_shared_writes() {
    use vfscale::kernfs::{Kernfs, KernfsConfig};
    use vfscale::procfs::{ProcConfig, Procfs, TaskInfo};
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
    let created = a.stat(DEEP).unwrap();
    wait_for_clock_past(Timespec::now, created.mtime.max(created.ctime));
    let v = verdict(|| open_read_close(&a, DEEP), || open_read_close(&b, DEEP));
    assert!(v.conflict_free(), "open+read+close of one file by two processes: {:#?}", v.conflicts);
    let v =
        verdict(|| assert_eq!(a.stat("/usr/missing"), Err(Errno::ENOENT)), || assert!(b.stat("/usr/gone").is_err()));
    assert!(v.conflict_free(), "missing lookups: {:#?}", v.conflicts);
    assert_conflict_free("stat", || assert_eq!(b.stat(DEEP).unwrap().size, 5));
    let (fa, fb) = (a.open(DEEP, OpenFlags::RDONLY, 0).unwrap(), b.open(DEEP, OpenFlags::RDONLY, 0).unwrap());
    let pread = |p: &Process, fd| {
        let mut buf = [0u8; 8];
        assert_eq!(p.pread(fd, &mut buf, 1).unwrap(), 4);
    };
    let v = verdict(|| pread(&a, fa), || pread(&b, fb));
    assert!(v.conflict_free(), "a read of the file's data: {:#?}", v.conflicts);
    let v = verdict(|| assert_eq!(a.fstat(fa).unwrap().size, 5), || assert_eq!(b.fstat(fb).unwrap().size, 5));
    assert!(v.conflict_free(), "fstat: {:#?}", v.conflicts);
    // Opening for writing counts a writer (for read leases) on a line no
    // open for reading or stat of the file reads.
    let open_close = |p: &Process, flags| p.close(p.open(DEEP, flags, 0).unwrap()).unwrap();
    let v = verdict(|| open_close(&a, OpenFlags::WRONLY), || assert_eq!(b.stat(DEEP).unwrap().size, 5));
    assert!(v.conflict_free(), "open for writing beside stat: {:#?}", v.conflicts);
    let v = verdict(|| open_close(&a, OpenFlags::WRONLY), || open_close(&b, OpenFlags::RDONLY));
    assert!(v.conflict_free(), "open for writing beside open for reading: {:#?}", v.conflicts);

    let sys = Kernfs::new(KernfsConfig::rcu());
    let cpu = sys.create_dir(&sys.root(), "cpu", 0o755).unwrap();
    sys.create_file(&cpu, "online", 0o444, || Ok(b"0-1\n".to_vec()), None::<fn(&[u8]) -> vfscale::VfsResult<()>>)
        .unwrap();
    let (p, q) = (sys.vfs().process(Credentials::root()), sys.vfs().process(Credentials::root()));
    let v = verdict(|| open_read_close(&p, "/cpu/online"), || open_read_close(&q, "/cpu/online"));
    assert!(v.conflict_free(), "open+read+close of one kernfs attribute by two processes: {:#?}", v.conflicts);

    let proc = Procfs::new(ProcConfig::rcu_revalidate());
    proc.add_task(7, TaskInfo::new("init", ["init"])).unwrap();
    let (p, q) = (proc.vfs().process(Credentials::root()), proc.vfs().process(Credentials::root()));
    let v = verdict(|| open_read_close(&p, "/7/status"), || open_read_close(&q, "/7/status"));
    assert!(v.conflict_free(), "open+read+close of a /proc file: {:#?}", v.conflicts);

    // The same files through mounts of a namespace, as seed 000 and 003
    // walk them: `/sys` and `/proc` mounted on an in-memory root.
    let (root_fs, ns) = seed_namespace(&sys, &proc);
    let (p, q) = (root_fs.process_in(&ns, Credentials::root()), root_fs.process_in(&ns, Credentials::root()));
    let v = verdict(|| open_read_close(&p, "/sys/cpu/online"), || open_read_close(&q, "/sys/cpu/online"));
    assert!(v.conflict_free(), "open+read+close across the /sys mount: {:#?}", v.conflicts);
    let v = verdict(|| open_read_close(&p, "/proc/7/status"), || open_read_close(&q, "/proc/7/status"));
    assert!(v.conflict_free(), "open+read+close across the /proc mount: {:#?}", v.conflicts);
}

/// A namespace with `/` in memory, `sys` mounted on `/sys` and `proc` on
/// `/proc`.
fn seed_namespace(
    sys: &vfscale::kernfs::Kernfs,
    proc: &vfscale::procfs::Procfs,
) -> (Vfs, std::sync::Arc<vfscale::MountNamespace>) {
    let root_fs = Vfs::default();
    let ns = root_fs.new_namespace();
    let admin = root_fs.process_in(&ns, Credentials::root());
    admin.mkdir("/sys", 0o555).unwrap();
    admin.mkdir("/proc", 0o555).unwrap();
    admin.mount(sys.vfs(), "sysfs", "/sys", MountFlags::NOSUID | MountFlags::NODEV | MountFlags::NOEXEC).unwrap();
    admin.mount(proc.vfs(), "proc", "/proc", MountFlags::NOSUID | MountFlags::NODEV | MountFlags::NOEXEC).unwrap();
    (root_fs, ns)
}

/// Crossing a mount point in rcu-walk reads the mount table and the
/// namespace's gate and writes nothing shared: stats, missing names and
/// `..` across mount roots, a bind mount beside its source, and a walk in
/// one namespace beside `mount` and `umount` in another. The control: the
/// same walk in ref-walk is seen writing.
#[test]
fn walk_across_a_mount_does_no_shared_writes() {
    let (root_fs, p) = tree(VfsConfig::default());
    let ns = root_fs.new_namespace();
    let a = root_fs.process_in(&ns, Credentials::root());
    let b = root_fs.process_in(&ns, Credentials::root());
    let (other, admin) = tree(VfsConfig::default());
    drop(admin);
    a.mount(&other, "tmpfs", "/usr/share", MountFlags::NONE).unwrap();
    p.mkdir("/srv", 0o755).unwrap();
    a.bind_mount("/usr", "/srv", true).unwrap();
    const ACROSS: &str = "/usr/share/usr/share/doc/vfscale/README";
    assert_conflict_free("stat across a mount", || assert_eq!(a.stat(ACROSS).unwrap().size, 5));
    let v = verdict(|| assert!(a.stat(ACROSS).is_ok()), || assert!(b.stat(ACROSS).is_ok()));
    assert!(v.conflict_free(), "two processes across one mount: {:#?}", v.conflicts);
    let v = verdict(
        || assert_eq!(a.stat("/usr/share/missing"), Err(Errno::ENOENT)),
        || assert_eq!(b.stat("/usr/share/gone"), Err(Errno::ENOENT)),
    );
    assert!(v.conflict_free(), "missing names across a mount: {:#?}", v.conflicts);
    let v =
        verdict(|| assert!(a.stat("/usr/share/usr/../../share").is_ok()), || assert!(b.stat("/usr/share/..").is_ok()));
    assert!(v.conflict_free(), "`..` across mount roots: {:#?}", v.conflicts);
    let v = verdict(|| assert!(a.stat("/srv/share/usr").is_ok()), || assert!(b.stat("/usr/share/usr").is_ok()));
    assert!(v.conflict_free(), "a bind mount beside its source: {:#?}", v.conflicts);
    let open_close = |p: &Process, path: &str| p.close(p.open(path, OpenFlags::RDONLY, 0).unwrap()).unwrap();
    let v = verdict(|| open_close(&a, ACROSS), || open_close(&b, ACROSS));
    assert!(v.conflict_free(), "open+close of one file across a mount: {:#?}", v.conflicts);

    // `mount` and `umount` in another namespace touch nothing this one
    // walks (the other namespace's table and gate, and the mount's own).
    let elsewhere_ns = root_fs.new_namespace();
    let elsewhere = root_fs.process_in(&elsewhere_ns, Credentials::root());
    let scratch = Vfs::default();
    let remount = || {
        elsewhere.mount(&scratch, "tmpfs", "/srv", MountFlags::NONE).unwrap();
        elsewhere.umount2("/srv", vfscale::UmountFlags::NONE).unwrap();
    };
    let v = verdict(|| assert!(a.stat(ACROSS).is_ok()), remount);
    assert!(v.conflict_free(), "a walk beside mount+umount in another namespace: {:#?}", v.conflicts);

    let (root_fs, _p) = tree(VfsConfig { walk: WalkMode::RefOnly, ..VfsConfig::default() });
    let ns = root_fs.new_namespace();
    let (a, b) = (root_fs.process_in(&ns, Credentials::root()), root_fs.process_in(&ns, Credentials::root()));
    a.mount(
        &Vfs::new(VfsConfig { walk: WalkMode::RefOnly, ..VfsConfig::default() }),
        "tmpfs",
        "/usr",
        MountFlags::NONE,
    )
    .unwrap();
    let v = verdict(|| assert!(a.stat("/usr/..").is_ok()), || assert!(b.stat("/usr/..").is_ok()));
    assert!(!v.conflict_free(), "ref-walk across a mount is seen writing");
}

/// The control for the test above: the same open+read+close in the
/// "before" design (ref-walk) is seen writing, so the zero there is a
/// measurement.
#[test]
fn ref_walk_open_read_close_is_seen_writing() {
    let (_vfs, p) = tree(VfsConfig { walk: WalkMode::RefOnly, ..VfsConfig::default() });
    let q = p.vfs().process(Credentials::root());
    let open_close = |p: &Process| {
        let fd = p.open(DEEP, OpenFlags::RDONLY, 0).unwrap();
        p.close(fd).unwrap();
    };
    let v = verdict(|| open_close(&p), || open_close(&q));
    assert!(v.conflicts.len() >= 5, "{:#?}", v.conflicts);
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
    let written = p.fstat(fd).unwrap();
    wait_for_clock_past(Timespec::now, written.mtime.max(written.ctime));
    let file = p.open_file(fd).unwrap();
    let mut buf = [0u8; 8192];
    let read = |at: u64, want: usize| {
        let mut buf = [0u8; 8192];
        assert_eq!(file.pread(&mut buf, at).unwrap(), want);
    };
    assert_conflict_free("the first page and a hole", || read(0, 8192));
    assert_conflict_free("a hole", || read(1 << 20, 8192));
    assert_conflict_free("data across pages", || read((100 << 20) + 4000, 6000));
    assert_conflict_free("past the end", || read(1 << 40, 0));
    assert_eq!(file.pread(&mut buf, (100 << 20) + 4000).unwrap(), 6000);
    assert!(buf[..6000].iter().all(|&b| b == 7));

    // The control: a write to a page the read copies from.
    let v = verdict(|| read(0, 8192), || assert_eq!(file.pwrite(b"x", 3, p.credentials()).unwrap(), 1));
    let on_the_page = v.conflicts.iter().any(|c| c.sites.iter().any(|s| s.contains("pages.rs")));
    assert!(on_the_page, "a write and a read of one page: {:#?}", v.conflicts);
}

/// The "before" design's one directory mutex serializes every directory
/// operation, readdir included: a listing of one directory and a create in
/// another meet on it. In the scalable design they share nothing.
#[test]
fn the_global_directory_mutex_serializes_readdir_against_a_create() {
    use vfscale::config::DirLocking;
    let listing_beside_a_create = |dir_locking: DirLocking| {
        let (vfs, p) = tree(VfsConfig { dir_locking, ..VfsConfig::default() });
        p.mkdir("/listed", 0o755).unwrap();
        p.mkdir("/created", 0o755).unwrap();
        let fd = p.open("/listed", OpenFlags::RDONLY | OpenFlags::DIRECTORY, 0).unwrap();
        let q = vfs.process(Credentials::root());
        let listing = || {
            p.lseek(fd, 0, vfscale::Whence::Set).unwrap();
            assert_eq!(p.readdir(fd, 16).unwrap().len(), 2, ". and ..");
        };
        let create = || {
            let made = q.open("/created/f", OpenFlags::CREAT | OpenFlags::WRONLY, 0o644).unwrap();
            q.close(made).unwrap();
            q.unlink("/created/f").unwrap();
        };
        verdict(listing, create)
    };
    let global = listing_beside_a_create(DirLocking::GlobalMutex);
    let sites: Vec<&String> = global.conflicts.iter().flat_map(|c| &c.sites).collect();
    assert!(sites.iter().any(|s| s.contains("dirlock.rs")), "the listing takes the global mutex: {sites:#?}");
    let per_directory = listing_beside_a_create(DirLocking::RwSem);
    assert!(per_directory.conflict_free(), "{:#?}", per_directory.conflicts);
}

/// The split directory design: creates and unlinks, and mkdirs and
/// rmdirs, of different names in one directory write no common line, with
/// every process its own (as the checker runs two processes); a new
/// directory's `..` counts on its CPU's slot of the parent's per-CPU ref.
/// The rwsem design's directory lock is caught.
#[test]
fn changes_of_different_names_in_one_split_directory_share_no_line() {
    use vfscale::config::DirLocking;
    let in_one_directory = |dir_locking: DirLocking, change: fn(&Process, &str)| {
        let (vfs, p) = tree(VfsConfig { dir_locking, ..VfsConfig::default() });
        p.mkdir("/shared", 0o755).unwrap();
        let q = vfs.process(Credentials::root());
        verdict(|| change(&p, "/shared/a"), || change(&q, "/shared/b"))
    };
    let files = |who: &Process, name: &str| {
        let made = who.open(name, OpenFlags::CREAT | OpenFlags::WRONLY, 0o644).unwrap();
        who.close(made).unwrap();
        who.unlink(name).unwrap();
    };
    let dirs = |who: &Process, name: &str| {
        who.mkdir(name, 0o755).unwrap();
        who.rmdir(name).unwrap();
    };
    let split = in_one_directory(DirLocking::Split, files);
    assert!(split.conflict_free(), "{:#?}", split.conflicts);
    let split = in_one_directory(DirLocking::Split, dirs);
    assert!(split.conflict_free(), "{:#?}", split.conflicts);
    let rwsem = in_one_directory(DirLocking::RwSem, files);
    let sites: Vec<&String> = rwsem.conflicts.iter().flat_map(|c| &c.sites).collect();
    assert!(sites.iter().any(|s| s.contains("rwsem")), "the directory's rwsem: {sites:#?}");
}

/// Moves of files between directories hold the superblock's rename lock
/// for reading, per CPU: moves of different files between the same two
/// split directories share no line. A move of a directory between
/// directories takes it for writing (Linux `s_vfs_rename_mutex`) and is
/// caught.
#[test]
fn moves_of_different_files_between_two_directories_share_no_line() {
    let (vfs, p) = tree(VfsConfig::default());
    let q = vfs.process(Credentials::root());
    for dir in ["/from", "/to"] {
        p.mkdir(dir, 0o755).unwrap();
    }
    for name in ["/from/a", "/from/b"] {
        let fd = p.open(name, OpenFlags::CREAT | OpenFlags::WRONLY, 0o644).unwrap();
        p.close(fd).unwrap();
    }
    let there_and_back = |who: &Process, from: &str, to: &str| {
        who.rename(from, to).unwrap();
        who.rename(to, from).unwrap();
    };
    let files = verdict(|| there_and_back(&p, "/from/a", "/to/a"), || there_and_back(&q, "/from/b", "/to/b"));
    assert!(files.conflict_free(), "{:#?}", files.conflicts);
    for dir in ["/from/da", "/from/db"] {
        p.mkdir(dir, 0o755).unwrap();
    }
    let dirs = verdict(|| there_and_back(&p, "/from/da", "/to/da"), || there_and_back(&q, "/from/db", "/to/db"));
    let sites: Vec<&String> = dirs.conflicts.iter().flat_map(|c| &c.sites).collect();
    assert!(sites.iter().any(|s| s.contains("percpu_rwsem")), "the rename lock, for writing: {sites:#?}");
}

/// A change that must fail fails without a shared write: an unlink,
/// rmdir or rename of a missing name, or a mkdir of an existing one,
/// beside a look-up of that name shares no line in a split directory,
/// whose look-ups take no lock, and writes nothing but its CPU's own slots
/// of the mount's counts (its users, and its writers, which a change
/// counts for its length as Linux's `mnt_want_write` does). The rwsem
/// design decides under the directory's lock, as Linux does, and is
/// caught.
#[test]
fn changes_that_must_fail_write_nothing() {
    use vfscale::config::DirLocking;
    type Change = fn(&Process) -> Result<(), Errno>;
    let beside_a_lookup = |dir_locking: DirLocking, change: Change| {
        let (vfs, p) = tree(VfsConfig { dir_locking, ..VfsConfig::default() });
        p.mkdir("/d", 0o755).unwrap();
        p.mkdir("/d/here", 0o755).unwrap();
        let q = vfs.process(Credentials::root());
        verdict(|| assert!(matches!(p.stat("/d/gone"), Err(Errno::ENOENT))), || assert!(change(&q).is_err()))
    };
    let failing: [(&str, Change); 4] = [
        ("unlink", |q| q.unlink("/d/gone")),
        ("rmdir", |q| q.rmdir("/d/gone")),
        ("rename", |q| q.rename("/d/gone", "/d/other")),
        ("mkdir", |q| q.mkdir("/d/here", 0o755)),
    ];
    for (what, change) in failing {
        let split = beside_a_lookup(DirLocking::Split, change);
        assert!(split.conflict_free(), "{what}: {:#?}", split.conflicts);
        let sites = split.b.write_sites();
        assert!(only_the_mounts_counts(&sites), "{what} writes only its CPU's counts of the mount: {sites:#?}");
    }
    let rwsem = beside_a_lookup(DirLocking::RwSem, |q| q.unlink("/d/gone"));
    let sites = rwsem.b.write_sites();
    assert!(sites.iter().any(|s| s.contains("rwsem")), "the directory's rwsem: {sites:#?}");
    // An unlink of a directory (EISDIR) beside a chmod of it: outside a
    // sticky directory the unlink reads no owner, a word beside the mode.
    let (vfs, p) = tree(VfsConfig::default());
    p.mkdir("/d", 0o755).unwrap();
    p.mkdir("/d/s", 0o755).unwrap();
    let q = vfs.process(Credentials::root());
    let modes = AtomicUsize::new(0);
    let chmod = || q.chmod("/d/s", [0o700, 0o755][modes.fetch_add(1, Ordering::Relaxed) % 2]).unwrap();
    let v = verdict(|| assert_eq!(p.unlink("/d/s"), Err(Errno::EISDIR)), chmod);
    assert!(v.conflict_free(), "an unlink of a directory and a chmod of it: {:#?}", v.conflicts);
    // Two unlinks of one directory (EISDIR both) take no lock of its name.
    let eisdir = |who: &Process| assert_eq!(who.unlink("/d/s"), Err(Errno::EISDIR));
    let v = verdict(|| eisdir(&p), || eisdir(&q));
    assert!(v.conflict_free(), "two unlinks of a directory: {:#?}", v.conflicts);
    let sites = v.b.write_sites();
    assert!(only_the_mounts_counts(&sites), "only the mount's counts: {sites:#?}");
}

/// Whether every write site is a per-CPU slot of a mount's users or
/// writers (both counted from `mount.rs`).
fn only_the_mounts_counts(sites: &[String]) -> bool {
    sites.iter().all(|s| {
        s.starts_with("crates/vfs/src/mount.rs:") && (s.contains("percpu_ref") || s.contains("percpu_counter"))
    })
}

/// A file's lock list is left alone by a close that has no lock of its
/// own to drop: a process that never asked for a POSIX lock on the file,
/// through a description that never asked for an OFD lock, opens and
/// closes it beside another process's lock requests on it without a
/// common line. A process that once locked the file is caught taking the
/// list on its close (Linux `locks_remove_posix`).
#[test]
fn closes_without_locks_leave_the_lock_list_alone() {
    use vfscale::locks::{Flock, F_RDLCK};
    let (vfs, p) = tree(VfsConfig::default());
    let fd = p.open("/f", OpenFlags::CREAT | OpenFlags::RDWR, 0o644).unwrap();
    let ofd = p.open("/f", OpenFlags::RDWR, 0).unwrap();
    let posix_lock = || p.fcntl_setlk(fd, &Flock::new(F_RDLCK, 0, 16)).unwrap();
    let ofd_lock = || p.ofd_setlk(ofd, &Flock::new(F_RDLCK, 32, 16)).unwrap();
    posix_lock();
    ofd_lock();
    let q = vfs.process(Credentials::root());
    let open_close = |who: &Process| who.close(who.open("/f", OpenFlags::RDONLY, 0).unwrap()).unwrap();
    for (what, lock) in [("a POSIX lock", &posix_lock as &(dyn Fn() + Sync)), ("an OFD lock", &ofd_lock)] {
        let v = verdict(lock, || open_close(&q));
        assert!(v.conflict_free(), "{what}: {:#?}", v.conflicts);
    }
    let locked_once = vfs.process(Credentials::root());
    let held = locked_once.open("/f", OpenFlags::RDONLY, 0).unwrap();
    locked_once.fcntl_setlk(held, &Flock::new(F_RDLCK, 64, 16)).unwrap();
    locked_once.fcntl_setlk(held, &Flock::new(vfscale::locks::F_UNLCK, 64, 16)).unwrap();
    let v = verdict(posix_lock, || open_close(&locked_once));
    let sites: Vec<&String> = v.conflicts.iter().flat_map(|c| &c.sites).collect();
    assert!(sites.iter().any(|s| s.contains("records.rs")), "the record list, on close: {sites:#?}");
}

/// A seek to where the offset already is writes nothing, and a lock
/// request whose range starts at an absolute offset reads neither the
/// offset nor the size: two rewinds of one description, or a rewind and a
/// lock request through it, share no line. A change of the file's
/// attributes beside a lock request on it shares none either.
#[test]
fn seeks_writes_and_lock_requests_of_one_file_share_no_line() {
    use vfscale::locks::{Flock, F_RDLCK};
    use vfscale::Whence;
    let (vfs, p) = tree(VfsConfig::default());
    let fd = p.open("/f", OpenFlags::CREAT | OpenFlags::RDWR, 0o644).unwrap();
    let rewind = || assert_eq!(p.lseek(fd, 0, Whence::Set), Ok(0));
    assert_conflict_free("rewinds", rewind);
    let v = verdict(rewind, || p.ofd_setlk(fd, &Flock::new(F_RDLCK, 32, 16)).unwrap());
    assert!(v.conflict_free(), "a rewind and a lock request: {:#?}", v.conflicts);
    let q = vfs.process(Credentials::root());
    let other = q.open("/f", OpenFlags::RDWR, 0).unwrap();
    q.ofd_setlk(other, &Flock::new(F_RDLCK, 64, 16)).unwrap();
    let change = || {
        p.chmod("/f", 0o600).unwrap();
        p.chmod("/f", 0o644).unwrap();
    };
    let v = verdict(change, || q.ofd_setlk(other, &Flock::new(F_RDLCK, 64, 16)).unwrap());
    assert!(v.conflict_free(), "a change of the inode and a lock request: {:#?}", v.conflicts);
}

/// A permission check that the mode alone does not decide (a write open
/// of a 0644 file) reads the mode and owner words, not the attributes
/// that every write and truncate of the file changes: an open and close
/// of a file share no line with a write to it by another process.
#[test]
fn permission_checks_share_no_line_with_writes_of_the_file() {
    let (vfs, p) = tree(VfsConfig::default());
    let fd = p.open("/f", OpenFlags::CREAT | OpenFlags::RDWR, 0o644).unwrap();
    let q = vfs.process(Credentials::root());
    let open_close = || {
        let other = q.open("/f", OpenFlags::WRONLY, 0).unwrap();
        q.close(other).unwrap();
    };
    let v = verdict(open_close, || assert_eq!(p.pwrite(fd, b"0123456789abcdef", 0), Ok(16)));
    assert!(v.conflict_free(), "a write open and a write: {:#?}", v.conflicts);
    let v = verdict(open_close, || p.ftruncate(fd, 16).unwrap());
    assert!(v.conflict_free(), "a write open and a truncate: {:#?}", v.conflicts);
}

/// A file's size and times live on lines apart from its mode, owner and
/// link count: a write, a truncate or an fallocate of a file shares no
/// line with a chmod of it, a link and unlink of another name of it or a
/// setxattr of it; nor does a read whose access time is ahead of the
/// clock (relatime then needs no change time of the other cell). A read
/// beside a write is caught: its relatime check reads the cell the write
/// writes.
#[test]
fn reads_and_writes_share_no_line_with_changes_of_the_files_names_and_mode() {
    let (vfs, p) = tree(VfsConfig::default());
    let fd = p.open("/f", OpenFlags::CREAT | OpenFlags::RDWR, 0o644).unwrap();
    assert_eq!(p.pwrite(fd, &[7u8; 64], 0), Ok(64));
    let q = vfs.process(Credentials::root());
    let write = || assert_eq!(p.pwrite(fd, b"0123456789abcdef", 0), Ok(16));
    let truncate = || p.ftruncate(fd, 64).unwrap();
    let fallocate = || p.fallocate(fd, 0, 0, 64).unwrap();
    let modes = AtomicUsize::new(0);
    let chmod = || q.chmod("/f", [0o640, 0o644][modes.fetch_add(1, Ordering::Relaxed) % 2]).unwrap();
    let link_unlink = || {
        q.link("/f", "/g").unwrap();
        q.unlink("/g").unwrap();
    };
    let setxattr = || q.setxattr("/f", b"user.a", b"v", 0).unwrap();
    for (what, change) in
        [("chmod", &chmod as &(dyn Fn() + Sync)), ("link+unlink", &link_unlink), ("setxattr", &setxattr)]
    {
        for (data, op) in [("write", &write as &(dyn Fn() + Sync)), ("truncate", &truncate), ("fallocate", &fallocate)]
        {
            let v = verdict(op, change);
            assert!(v.conflict_free(), "a {data} and a {what}: {:#?}", v.conflicts);
        }
    }
    let later = Timespec { sec: Timespec::now().sec + 3600, nsec: 0 };
    q.utimensat(AT_FDCWD, "/f", SetTime::At(later), SetTime::Omit, AtFlags::NONE).unwrap();
    let read = || assert_eq!(p.pread(fd, &mut [0u8; 16], 0), Ok(16));
    let v = verdict(read, chmod);
    assert!(v.conflict_free(), "a read (access time ahead of the clock) and a chmod: {:#?}", v.conflicts);
    let v = verdict(read, write);
    assert!(!v.conflict_free(), "a read and a write of one page share the page's lines");
}

/// A write within the size to pages written before takes neither the
/// file's writer lock nor its attribute cell: the locks of its pages, and
/// its times on the CPU's record. Two such writes to different pages of
/// one file share no line, from one description or two; nor does one
/// with a read of another page (its access time ahead of the clock), or
/// with an `fallocate` of a range reserved already, nor two such
/// `fallocate`s. A write that moves the end still takes the file's lock.
#[test]
fn writes_to_different_pages_of_one_file_share_no_line() {
    let (vfs, p) = tree(VfsConfig::default());
    let fd = p.open("/f", OpenFlags::CREAT | OpenFlags::RDWR, 0o644).unwrap();
    assert_eq!(p.pwrite(fd, &[7u8; 3 * 4096], 0), Ok(3 * 4096));
    let later = Timespec { sec: Timespec::now().sec + 3600, nsec: 0 };
    p.utimensat(AT_FDCWD, "/f", SetTime::At(later), SetTime::Omit, AtFlags::NONE).unwrap();
    let q = vfs.process(Credentials::root());
    let other = q.open("/f", OpenFlags::RDWR, 0).unwrap();
    let write = |at: i64| assert_eq!(p.pwrite(fd, b"0123456789abcdef", at), Ok(16));
    let write_other = |at: i64| assert_eq!(q.pwrite(other, b"0123456789abcdef", at), Ok(16));
    let v = verdict(|| write(100), || write(8300));
    assert!(v.conflict_free(), "writes to pages 0 and 2: {:#?}", v.conflicts);
    let v = verdict(|| write(4088), || write_other(8300));
    assert!(v.conflict_free(), "a write across pages 0 and 1, one to page 2 by another process: {:#?}", v.conflicts);
    let read = || assert_eq!(p.pread(fd, &mut [0u8; 16], 100), Ok(16));
    let v = verdict(read, || write_other(4200));
    assert!(v.conflict_free(), "a read of page 0, a write to page 1: {:#?}", v.conflicts);
    let reserve = |at: i64| p.fallocate(fd, 0, at, 16).unwrap();
    let v = verdict(|| reserve(100), || reserve(8300));
    assert!(v.conflict_free(), "fallocates of reserved ranges: {:#?}", v.conflicts);
    let v = verdict(|| write(100), || reserve(8300));
    assert!(v.conflict_free(), "a write and an fallocate of a reserved range: {:#?}", v.conflicts);
    let appended = AtomicUsize::new(3 * 4096);
    let append = || {
        let at = appended.fetch_add(16, Ordering::Relaxed) as i64;
        assert_eq!(p.pwrite(fd, b"0123456789abcdef", at), Ok(16));
    };
    let v = verdict(|| write(100), append);
    assert!(!v.conflict_free(), "a write in place and one that moves the end share the file's count");
}

/// The control: in the "before" design every write takes the file's
/// writer lock and attribute cell, so writes to different pages share
/// them, as under Linux's `i_rwsem`.
#[test]
fn locked_writes_to_different_pages_share_the_files_lock() {
    use vfscale::config::FileWrites;
    let (_vfs, p) = tree(VfsConfig { file_writes: FileWrites::Locked, ..VfsConfig::default() });
    let fd = p.open("/f", OpenFlags::CREAT | OpenFlags::RDWR, 0o644).unwrap();
    assert_eq!(p.pwrite(fd, &[7u8; 3 * 4096], 0), Ok(3 * 4096));
    let write = |at: i64| assert_eq!(p.pwrite(fd, b"0123456789abcdef", at), Ok(16));
    let v = verdict(|| write(100), || write(8300));
    let sites: Vec<&String> = v.conflicts.iter().flat_map(|c| &c.sites).collect();
    assert!(sites.iter().any(|s| s.contains("file/mod.rs")), "locked writes to pages 0 and 2: {sites:#?}");
    let v = verdict(|| p.fallocate(fd, 0, 100, 16).unwrap(), || p.fallocate(fd, 0, 8300, 16).unwrap());
    assert!(!v.conflict_free(), "locked fallocates of reserved ranges");
}

/// A split directory's `stat` folds its per-CPU link count and time
/// records, each CPU's on a line of its own: it shares no line with opens
/// and closes of files (whose counts and their mount's are per-CPU slots
/// in the arena's rows), nor with changes of another directory's records.
#[test]
fn stats_of_a_split_directory_share_no_line_with_work_elsewhere() {
    let (_vfs, p) = tree(VfsConfig::default());
    for dir in ["/d", "/e"] {
        p.mkdir(dir, 0o755).unwrap();
    }
    for file in ["/d/x", "/e/f"] {
        p.close(p.open(file, OpenFlags::CREAT | OpenFlags::RDWR, 0o644).unwrap()).unwrap();
    }
    let stat = || assert_eq!(p.stat("/d").unwrap().nlink, 2);
    let open_close = || p.close(p.open("/e/f", OpenFlags::RDONLY, 0).unwrap()).unwrap();
    let v = verdict(stat, open_close);
    assert!(v.conflict_free(), "a stat and an open and close elsewhere: {:#?}", v.conflicts);
    let change_elsewhere = || {
        p.mkdir("/e/sub", 0o755).unwrap();
        p.rmdir("/e/sub").unwrap();
    };
    let v = verdict(stat, change_elsewhere);
    assert!(v.conflict_free(), "a stat and a change of another directory: {:#?}", v.conflicts);
}

/// A file's first lock request makes its lock context, on a line apart
/// from the open counts; an open learns from those counts' line whether
/// a lease was ever asked for, and a close of a description that holds no
/// flock, lease or OFD lock reads no lock state: a first lock of a file
/// shares no line with an open and close of it, or with its unlink.
#[test]
fn first_locks_share_no_line_with_opens_closes_and_unlinks() {
    use std::sync::atomic::{AtomicUsize, Ordering};
    use vfscale::locks::{Flock, F_RDLCK, LOCK_NB, LOCK_SH};
    let (vfs, p) = tree(VfsConfig::default());
    let q = vfs.process(Credentials::root());
    // Each side's k-th run works on file k (warm-ups included).
    const FILES: usize = 8;
    let name = |k: usize| format!("/f{k}");
    let fds: Vec<_> = (0..FILES).map(|k| p.open(name(k), OpenFlags::CREAT | OpenFlags::RDWR, 0o644).unwrap()).collect();
    let next = |counter: &AtomicUsize| counter.fetch_add(1, Ordering::Relaxed);
    let (locked, opened) = (AtomicUsize::new(0), AtomicUsize::new(0));
    let first_lock = || p.fcntl_setlk(fds[next(&locked)], &Flock::new(F_RDLCK, 0, 16)).unwrap();
    let open_close = || q.close(q.open(name(next(&opened)), OpenFlags::RDONLY, 0).unwrap()).unwrap();
    let v = verdict(first_lock, open_close);
    assert!(v.conflict_free(), "a first record lock and an open and close: {:#?}", v.conflicts);
    let (flocked, unlinked) = (AtomicUsize::new(4), AtomicUsize::new(4));
    let first_flock = || p.flock(fds[next(&flocked)], LOCK_SH | LOCK_NB).unwrap();
    let unlink = || q.unlink(name(next(&unlinked))).unwrap();
    let v = verdict(first_flock, unlink);
    assert!(v.conflict_free(), "a first flock and an unlink: {:#?}", v.conflicts);
}

/// An unlink of a file that is open (its open counts per CPU) marks the
/// counts dying and leaves their fold, which visits every CPU's slot, to a
/// grace period: it shares no line with an open and close of another
/// file, whose slot sits beside the unlinked file's in the per-CPU arena.
#[test]
fn an_unlink_of_an_open_file_shares_no_line_with_opens_of_others() {
    use std::sync::atomic::{AtomicUsize, Ordering};
    let (vfs, p) = tree(VfsConfig::default());
    let q = vfs.process(Credentials::root());
    // Each side's k-th run works on file k (warm-ups included).
    const FILES: usize = 8;
    let (doomed, other) = (|k: usize| format!("/u{k}"), |k: usize| format!("/o{k}"));
    let mut held = Vec::new();
    for k in 0..FILES {
        for path in [doomed(k), other(k)] {
            q.close(q.open(&path, OpenFlags::CREAT | OpenFlags::WRONLY, 0o644).unwrap()).unwrap();
            // Not the creating open: this one counts per CPU, and the
            // two files' slots are made one after the other.
            held.push(p.open(&path, OpenFlags::RDONLY, 0).unwrap());
        }
    }
    let next = |counter: &AtomicUsize| counter.fetch_add(1, Ordering::Relaxed);
    let (unlinked, opened) = (AtomicUsize::new(0), AtomicUsize::new(0));
    let unlink = || p.unlink(doomed(next(&unlinked))).unwrap();
    let open_close = || q.close(q.open(other(next(&opened)), OpenFlags::RDONLY, 0).unwrap()).unwrap();
    let v = verdict(unlink, open_close);
    assert!(v.conflict_free(), "an unlink of an open file and an open and close of another: {:#?}", v.conflicts);
    for fd in held {
        p.close(fd).unwrap();
    }
    assert!(vfs.release_barrier(std::time::Duration::from_secs(600)), "deferred releases never ran");
}

/// A getxattr reads the file's attribute map under the epoch, at the end
/// of an rcu-walk, with no lock and no count: getxattrs of one file share
/// no line, nor does one with a write or a truncate of the file. A
/// setxattr, which replaces the map, is caught.
#[test]
fn getxattrs_share_no_line_with_each_other_or_writes_of_the_file() {
    let (vfs, p) = tree(VfsConfig::default());
    let fd = p.open("/f", OpenFlags::CREAT | OpenFlags::RDWR, 0o644).unwrap();
    p.setxattr("/f", b"user.a", b"value", 0).unwrap();
    let q = vfs.process(Credentials::root());
    let get = |who: &Process| {
        let mut buf = [0u8; 8];
        assert_eq!(who.getxattr("/f", b"user.a", &mut buf), Ok(5));
    };
    let v = verdict(|| get(&p), || get(&q));
    assert!(v.conflict_free(), "two getxattrs: {:#?}", v.conflicts);
    let v = verdict(|| get(&q), || assert_eq!(p.pwrite(fd, b"0123456789abcdef", 0), Ok(16)));
    assert!(v.conflict_free(), "a getxattr and a write: {:#?}", v.conflicts);
    let v = verdict(|| get(&q), || p.ftruncate(fd, 16).unwrap());
    assert!(v.conflict_free(), "a getxattr and a truncate: {:#?}", v.conflicts);
    let v = verdict(|| get(&q), || p.setxattr("/f", b"user.b", b"v", 0).unwrap());
    let sites: Vec<&String> = v.conflicts.iter().flat_map(|c| &c.sites).collect();
    assert!(sites.iter().any(|s| s.contains("xattr_store.rs")), "a setxattr replaces the map: {sites:#?}");
}

/// A removexattr of a missing name, an `XATTR_CREATE` setxattr of a
/// present one and an `XATTR_REPLACE` of a missing one fail at the end of
/// their walk, on a read of the published attributes, before any count
/// or lock: two of them share no line, nor one with a getxattr of the
/// file. A removexattr that succeeds, which replaces the map, is caught.
#[test]
fn failing_xattr_changes_share_no_line() {
    use vfscale::xattr::{XATTR_CREATE, XATTR_REPLACE};
    let (vfs, p) = tree(VfsConfig::default());
    p.close(p.open("/f", OpenFlags::CREAT | OpenFlags::RDWR, 0o644).unwrap()).unwrap();
    p.setxattr("/f", b"user.a", b"value", 0).unwrap();
    let q = vfs.process(Credentials::root());
    let remove_missing = |who: &Process| assert_eq!(who.removexattr("/f", b"user.missing"), Err(Errno::ENODATA));
    let create_present =
        |who: &Process| assert_eq!(who.setxattr("/f", b"user.a", b"v", XATTR_CREATE), Err(Errno::EEXIST));
    let replace_missing =
        |who: &Process| assert_eq!(who.setxattr("/f", b"user.missing", b"v", XATTR_REPLACE), Err(Errno::ENODATA));
    let v = verdict(|| remove_missing(&p), || remove_missing(&q));
    assert!(v.conflict_free(), "two removexattrs of a missing name: {:#?}", v.conflicts);
    let v = verdict(|| create_present(&p), || replace_missing(&q));
    assert!(v.conflict_free(), "two failing setxattrs: {:#?}", v.conflicts);
    let get = || assert_eq!(q.getxattr("/f", b"user.a", &mut [0u8; 8]), Ok(5));
    let v = verdict(|| remove_missing(&p), get);
    assert!(v.conflict_free(), "a failing removexattr and a getxattr: {:#?}", v.conflicts);
    let set_and_remove = || {
        p.setxattr("/f", b"user.b", b"v", 0).unwrap();
        p.removexattr("/f", b"user.b").unwrap();
    };
    let v = verdict(set_and_remove, get);
    let sites: Vec<&String> = v.conflicts.iter().flat_map(|c| &c.sites).collect();
    assert!(sites.iter().any(|s| s.contains("xattr_store.rs")), "a removexattr replaces the map: {sites:#?}");
}

/// An `O_CREAT` open of a name that exists is an open of it (Linux 6.12's
/// opportunistic look-up): counted per CPU in rcu-walk, with no count on
/// the directory or the file. Two of them share no line, for reading or
/// for writing (each open for writing counts on its CPU's slot of the
/// file's count of writers, where Linux shares `i_writecount`), nor one
/// for writing with a `link` and `unlink` of another name of the file.
#[test]
fn creat_opens_of_an_existing_file_share_no_line() {
    let (vfs, p) = tree(VfsConfig::default());
    p.mkdir("/d", 0o755).unwrap();
    p.close(p.open("/d/f", OpenFlags::CREAT | OpenFlags::WRONLY, 0o644).unwrap()).unwrap();
    let q = vfs.process(Credentials::root());
    let open_creat = |who: &Process, access: OpenFlags| {
        let fd = who.open("/d/f", OpenFlags::CREAT | access, 0o644).unwrap();
        who.close(fd).unwrap();
    };
    let v = verdict(|| open_creat(&p, OpenFlags::RDONLY), || open_creat(&q, OpenFlags::RDONLY));
    assert!(v.conflict_free(), "two O_CREAT opens of one file: {:#?}", v.conflicts);
    let v = verdict(|| open_creat(&p, OpenFlags::WRONLY), || open_creat(&q, OpenFlags::RDWR));
    assert!(v.conflict_free(), "two O_CREAT opens of one file for writing: {:#?}", v.conflicts);
    let link_unlink = || {
        q.link("/d/f", "/d/g").unwrap();
        q.unlink("/d/g").unwrap();
    };
    let v = verdict(|| open_creat(&p, OpenFlags::WRONLY), link_unlink);
    assert!(v.conflict_free(), "an O_CREAT open and a link and unlink: {:#?}", v.conflicts);
}

/// Only a walk that climbs (`..`, in its path or in a symlink's target)
/// reads the rename seqcount that a move of a directory between
/// directories writes: a stat of a path without `..` beside such a move
/// shares no line with it, and a stat through `..` or through a symlink
/// to a path with `..` is caught reading it.
#[test]
fn only_climbing_walks_read_the_rename_count() {
    let (vfs, p) = tree(VfsConfig::default());
    for dir in ["/from", "/to", "/from/moving"] {
        p.mkdir(dir, 0o755).unwrap();
    }
    p.symlink("../usr/share", "/from/up").unwrap();
    let q = vfs.process(Credentials::root());
    let move_and_back = || {
        q.rename("/from/moving", "/to/moving").unwrap();
        q.rename("/to/moving", "/from/moving").unwrap();
    };
    let v = verdict(|| assert!(p.stat(DEEP).is_ok()), move_and_back);
    assert!(v.conflict_free(), "a walk that does not climb: {:#?}", v.conflicts);
    for climbing in ["/usr/share/../share/doc", "/from/up/doc"] {
        let v = verdict(|| assert!(p.stat(climbing).is_ok()), move_and_back);
        let sites: Vec<&String> = v.conflicts.iter().flat_map(|c| &c.sites).collect();
        assert!(sites.iter().any(|s| s.contains("seqcount")), "{climbing}: the rename count: {sites:#?}");
    }
}

/// A first look-up of a missing name (no negative dentry for it yet) ends
/// in rcu-walk where the directory's split entries tell it is missing: two
/// processes' stats of a name never looked up, or a stat beside a failing
/// unlink of it, share no line. Two exclusive creates of an existing name
/// fail without counting its inode. The rwsem design's miss goes to
/// ref-walk and is caught counting references.
#[test]
fn first_misses_and_failing_exclusive_creates_share_no_line() {
    use vfscale::config::DirLocking;
    let pair = |dir_locking: DirLocking, a: fn(&Process, usize), b: fn(&Process, usize)| {
        let (vfs, p) = tree(VfsConfig { dir_locking, ..VfsConfig::default() });
        p.mkdir("/d", 0o755).unwrap();
        p.close(p.open("/d/f", OpenFlags::CREAT | OpenFlags::WRONLY, 0o644).unwrap()).unwrap();
        let q = vfs.process(Credentials::root());
        let a = |i| {
            a(&p, i);
            Ok(())
        };
        let b = |i| {
            b(&q, i);
            Ok(())
        };
        conflict::check_pair(&a, &b).unwrap()
    };
    let stat_missing: fn(&Process, usize) = |p, i| assert_eq!(p.stat(format!("/d/miss{i}")), Err(Errno::ENOENT));
    let unlink_missing: fn(&Process, usize) = |p, i| assert_eq!(p.unlink(format!("/d/miss{i}")), Err(Errno::ENOENT));
    let exclusive: fn(&Process, usize) = |p, _| {
        let flags = OpenFlags::CREAT | OpenFlags::EXCL | OpenFlags::WRONLY;
        assert_eq!(p.open("/d/f", flags, 0o644), Err(Errno::EEXIST));
    };
    for (what, a, b) in [
        ("two first misses", stat_missing, stat_missing),
        ("a miss and an unlink", stat_missing, unlink_missing),
        ("exclusive creates", exclusive, exclusive),
    ] {
        let v = pair(DirLocking::Split, a, b);
        assert!(v.conflict_free(), "{what}: {:#?}", v.conflicts);
    }
    let rwsem = pair(DirLocking::RwSem, stat_missing, stat_missing);
    let sites: Vec<&String> = rwsem.conflicts.iter().flat_map(|c| &c.sites).collect();
    assert!(sites.iter().any(|s| s.contains("namei.rs") || s.contains("dentry.rs")), "ref-walk's counts: {sites:#?}");
}

/// A close of a descriptor no look-up borrowed waits for no reader: an
/// open and close in a process beside reads and stats through another of
/// its descriptors share no line. Non-blocking lock requests borrow their
/// description instead of counting it, so two through one description
/// share no count (two record locks in one stripe still share its lock).
/// A close of a descriptor that was read waits for the readers of the
/// CPUs it was read on alone: an open, read and close (`getdents`) beside
/// reads through another descriptor shares no line with them, and a close
/// of a descriptor read on the other CPU is caught reading that CPU's
/// reader count (its grace period).
#[test]
fn closes_of_unborrowed_descriptors_and_nonblocking_lock_requests_share_no_line() {
    use vfscale::locks::{Flock, F_RDLCK, LOCK_NB, LOCK_SH};
    let (_vfs, p) = tree(VfsConfig::default());
    let fd = p.open("/f", OpenFlags::CREAT | OpenFlags::RDWR, 0o644).unwrap();
    p.write(fd, b"data").unwrap();
    let read = || {
        let mut buf = [0u8; 4];
        assert_eq!(p.pread(fd, &mut buf, 0), Ok(4));
        assert_eq!(p.fstat(fd).unwrap().size, 4);
    };
    let open_close = || p.close(p.open(DEEP, OpenFlags::RDONLY, 0).unwrap()).unwrap();
    let v = verdict(read, open_close);
    assert!(v.conflict_free(), "an open and close beside reads: {:#?}", v.conflicts);
    let lock = || p.fcntl_setlk(fd, &Flock::new(F_RDLCK, 0, 16)).unwrap();
    let flock = || p.flock(fd, LOCK_SH | LOCK_NB).unwrap();
    for (what, request) in [("record locks", &lock as &(dyn Fn() + Sync)), ("flocks", &flock)] {
        // Two record locks of one stripe still share its list's lock.
        let v = verdict(request, request);
        let sites: Vec<&String> = v.conflicts.iter().flat_map(|c| &c.sites).collect();
        let counted = |s: &&&String| s.contains("process/mod.rs") || s.contains("fdtable.rs");
        assert!(!sites.iter().any(|s| counted(&s)), "{what} count their description: {sites:#?}");
    }
    let open_read_close = || {
        let other = p.open(DEEP, OpenFlags::RDONLY, 0).unwrap();
        assert!(p.fstat(other).is_ok());
        p.close(other).unwrap();
    };
    let v = verdict(read, open_read_close);
    assert!(v.conflict_free(), "an open, read and close beside reads: {:#?}", v.conflicts);
    // Descriptors opened and read on one CPU, closed on the other: each
    // run of the reader leaves two, each run of the closer takes one, so
    // the closer always has one, whichever ran first.
    let read_elsewhere = std::sync::Mutex::new(Vec::new());
    let open_and_read = || {
        for _ in 0..2 {
            let other = p.open(DEEP, OpenFlags::RDONLY, 0).unwrap();
            assert!(p.fstat(other).is_ok());
            read_elsewhere.lock().unwrap().push(other);
        }
    };
    let close = || p.close(read_elsewhere.lock().unwrap().pop().expect("one left")).unwrap();
    let v = verdict(open_and_read, close);
    let sites: Vec<&String> = v.conflicts.iter().flat_map(|c| &c.sites).collect();
    assert!(sites.iter().any(|s| s.contains("srcu.rs")), "the close's grace period: {sites:#?}");
}

/// Requests of one lock owner in stripes where it holds locks already, a
/// page or more apart, take their stripe's slot alone: two threads of one
/// process locking and unlocking ranges in different pages share no line,
/// nor do two re-locks of held ranges (one ending at a page boundary), nor
/// one description's OFD locks, nor a read and a write lock touching at a
/// page boundary. A lock in a page where the owner holds
/// none changes the owner's group (which stripes hold its locks) under its
/// owner shard's lock: two such, in two pages, are caught.
#[test]
fn one_owners_locks_in_different_pages_share_no_line() {
    use vfscale::locks::{Flock, F_RDLCK, F_UNLCK, F_WRLCK};
    let (_vfs, p) = tree(VfsConfig::default());
    let fd = p.open("/f", OpenFlags::CREAT | OpenFlags::RDWR, 0o644).unwrap();
    let posix = |t: i16, start: i64| p.fcntl_setlk(fd, &Flock::new(t, start, 16)).unwrap();
    let ofd = |t: i16, start: i64| p.ofd_setlk(fd, &Flock::new(t, start, 16)).unwrap();
    // Locks in pages 0 and 2: the file shards, each owner holds a lock in both.
    posix(F_WRLCK, 4080);
    posix(F_WRLCK, 8192);
    ofd(F_WRLCK, 1024);
    ofd(F_WRLCK, 9216);
    let cycle = |set: &(dyn Fn(i16, i64) + Sync), start: i64| {
        set(F_WRLCK, start);
        set(F_UNLCK, start);
    };
    let v = verdict(|| cycle(&posix, 100), || cycle(&posix, 8300));
    assert!(v.conflict_free(), "one process's lock and unlock in two pages: {:#?}", v.conflicts);
    let v = verdict(|| posix(F_WRLCK, 4080), || posix(F_WRLCK, 8192));
    assert!(v.conflict_free(), "one process's re-locks of held ranges: {:#?}", v.conflicts);
    let v = verdict(|| cycle(&ofd, 200), || cycle(&ofd, 8400));
    assert!(v.conflict_free(), "one description's OFD locks in two pages: {:#?}", v.conflicts);
    // A read lock ending a page, beside a write lock starting the next:
    // locks of two types never merge.
    posix(F_RDLCK, 20464);
    posix(F_WRLCK, 20480);
    let v = verdict(|| posix(F_RDLCK, 20464), || posix(F_WRLCK, 20480));
    assert!(v.conflict_free(), "one process's read and write locks touching at a page boundary: {:#?}", v.conflicts);
    // Pages 1 and 3 hold none of the process's locks: each lock there is
    // the first, and its unlock the last.
    let v = verdict(|| cycle(&posix, 4096 + 100), || cycle(&posix, 3 * 4096 + 100));
    let sites: Vec<&String> = v.conflicts.iter().flat_map(|c| &c.sites).collect();
    assert!(sites.iter().any(|s| s.contains("locks/context/striped.rs")), "first locks in two pages: {sites:#?}");
}
