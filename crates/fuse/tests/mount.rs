//! Mounts a VFS in a temporary directory, drives it with real programs
//! (`tests/script.sh`), and compares every result with the same script run
//! on tmpfs. Where FUSE is unavailable or mounting is not permitted each
//! test is skipped, with the reason printed; under CI (`CI` set) that is a
//! failure, since there the mount tests must run. Any other mount error
//! fails everywhere.

use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};
use vfscale::Vfs;
use vfscale_fuse::{
    is_vfscale_mount, mount, mount_with, wait_unmounted, MountError, MountOptions, Mounted, Opcode, ReadOnlyMount,
    RecordLocks, RequestCounts,
};
use vfscale_sync::poison::unpoisoned;
use vfscale_sync::test_support::{machine_lock, KERNEL_CACHES_LOCK};

/// Held by every test, so a memory measurement sees no other test's use.
static SERIAL: std::sync::Mutex<()> = std::sync::Mutex::new(());

/// One test of this file at a time: in this process (`SERIAL`), and on
/// the machine ([`KERNEL_CACHES_LOCK`]), so that two suites at once (the
/// flake hunt, two checkouts) take turns. Both go with the test's guard.
struct Serial {
    _machine: Option<std::fs::File>,
    _process: std::sync::MutexGuard<'static, ()>,
}

fn serial() -> Serial {
    let process = unpoisoned(SERIAL.lock());
    Serial { _machine: machine_lock(KERNEL_CACHES_LOCK), _process: process }
}

/// Whether this runs under CI, where every mount test must run.
fn under_ci() -> bool {
    std::env::var("CI").is_ok_and(|v| !v.is_empty() && v != "false" && v != "0")
}

/// Mounts a fresh VFS, or explains why this machine cannot.
fn try_mount(dir: &Path, options: &MountOptions) -> Option<Mounted> {
    try_mount_vfs(dir, Vfs::default(), options)
}

/// Mounts `vfs`; `None`, with the reason printed, where this machine has
/// no FUSE (outside CI only); panics on any other error.
fn try_mount_vfs(dir: &Path, vfs: Vfs, options: &MountOptions) -> Option<Mounted> {
    match mount(dir, vfs, options) {
        Ok(m) => Some(m),
        Err(e @ MountError::FuseUnavailable(_)) if under_ci() => {
            panic!("CI is set, but the mount tests cannot run: {e}")
        }
        Err(e @ MountError::FuseUnavailable(_)) => {
            eprintln!("SKIPPED: {e} (with CI set, a failure)");
            None
        }
        Err(e) => panic!("mount failed: {e}"),
    }
}

/// Waits until `done` holds. The minute is a hang guard, far past what
/// any of these waits takes on a slow machine, and costs nothing when
/// `done` comes sooner.
fn wait_for(what: &str, mut done: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(60);
    while !done() {
        assert!(Instant::now() < deadline, "{what}: not within a minute");
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// How long an unmount may take to show in `/proc/self/mounts`: a hang
/// guard, as for [`wait_for`].
const UNMOUNTED_WITHIN: Duration = Duration::from_secs(60);

/// Waits until two more refreshes of the demo `proc/` tree have ended: the
/// second began after this call, so it saw the host as it is now.
fn proc_refreshed(mounted: &Mounted) {
    let refreshes = || mounted.proc_refreshes().expect("a mount with the demo trees");
    let since = refreshes();
    wait_for("two refreshes of proc/", || refreshes() >= since + 2);
}

fn run_script(dir: &Path) -> String {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/script.sh");
    let out = Command::new("bash").arg(script).current_dir(dir).output().expect("bash runs");
    assert!(out.status.success(), "script failed in {}: {}", dir.display(), String::from_utf8_lossy(&out.stderr));
    String::from_utf8(out.stdout).expect("script output is UTF-8")
}

/// A directory on tmpfs: /dev/shm where it is tmpfs.
fn tmpfs_dir() -> tempfile::TempDir {
    let mounts = std::fs::read_to_string("/proc/self/mounts").unwrap_or_default();
    assert!(
        mounts.lines().any(|l| l.split(' ').nth(1) == Some("/dev/shm") && l.split(' ').nth(2) == Some("tmpfs")),
        "the comparison needs /dev/shm on tmpfs"
    );
    tempfile::tempdir_in("/dev/shm").expect("temp dir on /dev/shm")
}

/// The script, through `/dev/fuse`, on a mount with record locks in the
/// kernel (files opened without a request) and on one with them in the
/// VFS (every open and close asks), against tmpfs.
#[test]
fn tools_see_what_they_see_on_tmpfs() {
    for locks in [RecordLocks::Kernel, RecordLocks::Vfs] {
        script_matches_tmpfs(&MountOptions { locks, io_uring: false, ..MountOptions::default() });
    }
}

/// Whether the kernel offers FUSE over io_uring (`enable_uring`).
fn kernel_offers_io_uring() -> bool {
    std::fs::read_to_string("/sys/module/fuse/parameters/enable_uring").is_ok_and(|v| v.trim() == "Y")
}

/// The script through the io_uring queues (the default), where the
/// kernel offers them (`.ci/run` turns `enable_uring` on): every request
/// but the forgets goes through a queue, and the tools see what they see
/// on tmpfs.
#[test]
fn tools_see_the_same_through_io_uring() {
    if !kernel_offers_io_uring() {
        eprintln!("SKIPPED: the fuse module's enable_uring is off (echo Y > /sys/module/fuse/parameters/enable_uring)");
        return;
    }
    script_matches_tmpfs(&MountOptions { io_uring: true, ..MountOptions::default() });
    // With the VFS's locks a blocked F_SETLKW is answered from another
    // thread: requests stay on the device.
    let _serial = serial();
    let mnt = tempfile::tempdir().unwrap();
    let options = MountOptions { io_uring: true, locks: RecordLocks::Vfs, ..MountOptions::default() };
    let Some(mounted) = try_mount(mnt.path(), &options) else { return };
    std::fs::write(mnt.path().join("f"), "x").unwrap();
    assert!(!mounted.io_uring());
    assert_eq!(mounted.io_uring_requests(), 0);
    mounted.unmount().expect("unmount");
}

fn script_matches_tmpfs(options: &MountOptions) {
    let _serial = serial();
    let mnt = tempfile::tempdir().unwrap();
    let Some(mounted) = try_mount(mnt.path(), options) else { return };
    assert!(is_vfscale_mount(mnt.path()));
    let ours = run_script(mnt.path());
    if options.io_uring {
        assert!(mounted.io_uring(), "the kernel offers io_uring, but the mount did not take it");
        assert!(mounted.io_uring_requests() > 0, "no request came through the queues");
        // A request the script did not wait for (a release) may be counted
        // before its queue's tally is: wait for the tallies to meet.
        wait_for("every request but the forgets to come through the queues", || {
            let (counted, forgets) = (mounted.requests().total(), mounted.requests().get(Opcode::Forget));
            mounted.io_uring_requests() + forgets >= counted
        });
    }
    let reference = tmpfs_dir();
    let theirs = run_script(reference.path());
    mounted.unmount().expect("unmount");
    assert!(wait_unmounted(mnt.path(), UNMOUNTED_WITHIN), "still mounted after unmount");
    let mismatches: Vec<String> = ours
        .lines()
        .zip(theirs.lines())
        .filter(|(a, b)| a != b)
        .map(|(a, b)| format!("  vfscale: {a}\n  tmpfs:   {b}"))
        .collect();
    assert!(
        mismatches.is_empty() && ours.lines().count() == theirs.lines().count(),
        "vfscale ({options:?}) and tmpfs differ:\n{}\n--- vfscale ---\n{ours}\n--- tmpfs ---\n{theirs}",
        mismatches.join("\n")
    );
    assert!(ours.contains("second=1") && ours.contains("after=0"), "flock did not conflict:\n{ours}");
    assert!(ours.contains("flock and fcntl independent: True True"), "flock and fcntl interfere:\n{ours}");
    assert!(ours.contains("setlkw interrupted: EINTR"), "F_SETLKW was not interrupted:\n{ours}");
    assert!(ours.contains("conflict 11\ngot it"), "fcntl locks did not conflict:\n{ours}");
    assert!(
        ours.contains("child blocked True\ngetlk True 0 2 5 True\nwaited"),
        "F_GETLK or F_SETLKW misbehaved:\n{ours}"
    );
    assert!(
        ours.contains("\nletting go\nwaited\nrc=0") && ours.contains("\nshared\nrc=0"),
        "flock waits misbehaved:\n{ours}"
    );
}

/// The mount process's resident memory, in KiB.
fn rss_kib() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap();
    let line = status.lines().find(|l| l.starts_with("VmRSS:")).unwrap();
    line.split_whitespace().nth(1).unwrap().parse().unwrap()
}

/// `dd if=/dev/zero of=F bs=1 count=1 seek=3G` on the mount: the file is
/// sparse, so serving it costs one page, not 3 GiB.
#[test]
fn a_byte_past_3g_costs_a_page() {
    let _serial = serial();
    let mnt = tempfile::tempdir().unwrap();
    // One request thread on /dev/fuse, warmed up first: each thread's
    // request buffer (16 MiB, zeroed when malloc reuses memory), like the
    // io_uring queues' slots (allocated as their threads start), is the
    // front end's cost, not the file's.
    let options = MountOptions { threads: 1, io_uring: false, ..MountOptions::default() };
    let Some(mounted) = try_mount(mnt.path(), &options) else { return };
    std::fs::write(mnt.path().join("warm"), [1; 100_000]).unwrap();
    let before = rss_kib();
    let status = Command::new("dd")
        .args(["if=/dev/zero", "bs=1", "count=1", "seek=3G", "status=none"])
        .arg(format!("of={}", mnt.path().join("F").display()))
        .status()
        .unwrap();
    assert!(status.success());
    let grown = rss_kib().saturating_sub(before);
    let meta = std::fs::metadata(mnt.path().join("F")).unwrap();
    mounted.unmount().expect("unmount");
    assert_eq!(meta.len(), (3 << 30) + 1);
    assert!(grown < 1024, "RSS grew by {grown} KiB");
}

#[test]
fn demo_trees_show_live_values() {
    let _serial = serial();
    let mnt = tempfile::tempdir().unwrap();
    let options = MountOptions { demo: true, threads: 2, locks: RecordLocks::Vfs, ..MountOptions::default() };
    let Some(mounted) = try_mount(mnt.path(), &options) else { return };
    let attr = mnt.path().join("sys/fs/vfscale/inodes");
    let read = |p: &Path| std::fs::read_to_string(p).unwrap_or_else(|e| panic!("{}: {e}", p.display()));
    let before: usize = read(&attr).trim().parse().unwrap();
    std::fs::create_dir(mnt.path().join("new")).unwrap();
    let after: usize = read(&attr).trim().parse().unwrap();
    assert_eq!(after, before + 1);
    let drop = mnt.path().join("sys/fs/vfscale/drop_caches");
    let status = Command::new("sh").arg("-c").arg("echo 2 > \"$1\"").arg("sh").arg(&drop).status().unwrap();
    assert!(status.success());
    assert_eq!(read(&drop), "2\n");
    // vfscale's lock manager decides record locks: its lock list shows a
    // POSIX lock while a process holds it, and nothing once it is gone.
    // (flock locks stay in the kernel.)
    let locks = mnt.path().join("sys/fs/vfscale/locks");
    let hold = "import fcntl, os, sys; fd = os.open(sys.argv[1], os.O_RDWR | os.O_CREAT, 0o644); \
                fcntl.lockf(fd, fcntl.LOCK_EX); print(open(sys.argv[2]).read(), end='')";
    // A hang guard for the holder, who exits once it has read the list.
    let held = Command::new("timeout")
        .args(["60", "python3", "-c", hold])
        .arg(mnt.path().join("lockf"))
        .arg(&locks)
        .output()
        .unwrap();
    let held = String::from_utf8(held.stdout).unwrap();
    assert!(held.starts_with("1: POSIX ") && held.contains(" WRITE "), "{held}");
    assert_eq!(read(&locks), "\n");
    let status = Command::new("flock").arg(mnt.path().join("lockf")).args(["cat"]).arg(&locks).output().unwrap();
    assert_eq!(String::from_utf8(status.stdout).unwrap(), "\n", "flock is the kernel's");
    // proc/ follows the host: this process is there, a new child appears
    // once a refresh has begun after it started, and `ps`-style reads see
    // its command line.
    let me = std::process::id();
    let status = read(&mnt.path().join(format!("proc/{me}/status")));
    assert!(status.contains(&format!("Pid:\t{me}")), "{status}");
    let listed = |dir: &Path| -> Vec<String> {
        std::fs::read_dir(dir).unwrap().map(|e| e.unwrap().file_name().into_string().unwrap()).collect()
    };
    assert!(listed(&mnt.path().join("proc")).contains(&me.to_string()));
    let mut child = Command::new("sleep").arg("30").spawn().unwrap();
    let cmdline = mnt.path().join(format!("proc/{}/cmdline", child.id()));
    proc_refreshed(&mounted);
    assert_eq!(read(&cmdline), "sleep\x0030\0");
    child.kill().unwrap();
    child.wait().unwrap();
    proc_refreshed(&mounted);
    assert!(!cmdline.exists(), "child {} still in proc/ after a refresh that began after it was reaped", child.id());
    assert_eq!(listed(&mnt.path().join("sys/fs")), ["vfscale"]);
    let err = std::fs::remove_dir(mnt.path().join("sys")).unwrap_err();
    assert_eq!(err.raw_os_error(), Some(libc::EBUSY));
    let err = std::fs::write(mnt.path().join("sys/fs/vfscale/new"), "x").unwrap_err();
    assert_eq!(err.raw_os_error(), Some(libc::EACCES));
    let err = std::fs::rename(mnt.path().join("new"), mnt.path().join("sys/new")).unwrap_err();
    assert_eq!(err.raw_os_error(), Some(libc::EXDEV));
    let err = std::fs::write(mnt.path().join("sys/fs/vfscale/inodes"), "1").unwrap_err();
    assert_eq!(err.raw_os_error(), Some(libc::EACCES));
    mounted.unmount().expect("unmount");
    assert!(wait_unmounted(mnt.path(), UNMOUNTED_WITHIN));
}

/// The demo trees are mounts of their own in the served namespace: `df`
/// of a path answers for its mount's filesystem, inode numbers of the
/// three filesystems never meet and stay put, and `..` of a tree's root is
/// the served root.
#[test]
fn demo_trees_are_mounts_of_their_own() {
    use std::os::unix::fs::MetadataExt;
    let _serial = serial();
    let mnt = tempfile::tempdir().unwrap();
    let vfs = Vfs::new(vfscale::VfsConfig { size_limit: 8 << 20, inode_limit: 1000, ..Default::default() });
    let options = MountOptions { demo: true, ..MountOptions::default() };
    let Some(mounted) = try_mount_vfs(mnt.path(), vfs, &options) else { return };
    // Total blocks and inodes, as `df` reads them.
    let df = |p: &Path| {
        let out = Command::new("stat").args(["-f", "-c", "%b %c"]).arg(p).output().unwrap();
        assert!(out.status.success(), "stat -f {}", p.display());
        String::from_utf8(out.stdout).unwrap().trim().to_string()
    };
    assert_eq!(df(mnt.path()), "2048 1000", "the served VFS's limits");
    assert_eq!(df(&mnt.path().join("sys")), "0 0", "kernfs has no limits");
    assert_eq!(df(&mnt.path().join(format!("proc/{}", std::process::id()))), "0 0");
    assert_eq!(df(&mnt.path().join("sys/fs/vfscale/inodes")), "0 0");
    std::fs::write(mnt.path().join("f"), "x").unwrap();
    let ino = |rel: &str| std::fs::metadata(mnt.path().join(rel)).unwrap().ino();
    let inos: Vec<u64> =
        ["", "f", "sys", "sys/fs", "sys/fs/vfscale/inodes", "proc", &format!("proc/{}", std::process::id())]
            .iter()
            .map(|rel| ino(rel))
            .collect();
    let mut distinct = inos.clone();
    distinct.sort_unstable();
    distinct.dedup();
    assert_eq!(distinct.len(), inos.len(), "{inos:?}");
    assert_eq!(ino("sys/.."), ino(""));
    assert_eq!(ino("proc/.."), ino(""));
    assert_eq!(ino("sys/fs"), inos[3], "an inode number stays put");
    mounted.unmount().expect("unmount");
}

/// Another instance mounted read-only in the served tree (as a host
/// directory will be bound): programs read it, nothing changes through
/// it, and what changes behind the mount's back shows at the next read.
#[test]
fn a_read_only_mount_serves_another_instance() {
    let _serial = serial();
    let mnt = tempfile::tempdir().unwrap();
    let other = Vfs::default();
    let p = other.process(vfscale::Credentials::root());
    p.mkdir("/dir", 0o755).unwrap();
    let fd = p.open("/dir/file", vfscale::OpenFlags::CREAT | vfscale::OpenFlags::WRONLY, 0o644).unwrap();
    p.write(fd, b"first\n").unwrap();
    let bind = ReadOnlyMount { fs: other.clone(), source: "other".into(), path: "/srv/other".into() };
    let mounted = match mount_with(mnt.path(), Vfs::default(), vec![bind], &MountOptions::default()) {
        Ok(m) => m,
        Err(e @ MountError::FuseUnavailable(_)) if !under_ci() => return eprintln!("SKIPPED: {e}"),
        Err(e) => panic!("mount failed: {e}"),
    };
    let file = mnt.path().join("srv/other/dir/file");
    assert_eq!(std::fs::read_to_string(&file).unwrap(), "first\n");
    let errno = |r: std::io::Result<()>| r.unwrap_err().raw_os_error();
    assert_eq!(errno(std::fs::write(&file, "x")), Some(libc::EROFS));
    assert_eq!(errno(std::fs::create_dir(mnt.path().join("srv/other/new"))), Some(libc::EROFS));
    assert_eq!(errno(std::fs::remove_file(&file)), Some(libc::EROFS));
    assert_eq!(errno(std::fs::remove_dir(mnt.path().join("srv/other"))), Some(libc::EBUSY));
    // Linux's order: another mount is EXDEV before a read-only one EROFS.
    let rename = |from: &str, to: &str| errno(std::fs::rename(mnt.path().join(from), mnt.path().join(to)));
    assert_eq!(rename("srv/other/dir", "moved"), Some(libc::EXDEV));
    assert_eq!(rename("srv/other/dir", "srv/other/moved"), Some(libc::EROFS));
    std::fs::write(mnt.path().join("top"), "t").unwrap();
    assert_eq!(errno(std::fs::hard_link(mnt.path().join("top"), mnt.path().join("srv/other/top"))), Some(libc::EXDEV));
    p.pwrite(fd, b"later\n", 0).unwrap();
    assert_eq!(std::fs::read_to_string(&file).unwrap(), "later\n", "nothing of it is cached");
    mounted.unmount().expect("unmount");
}

#[test]
fn unmount_from_outside_ends_the_session() {
    let _serial = serial();
    let mnt = tempfile::tempdir().unwrap();
    let options = MountOptions { io_uring: false, ..MountOptions::default() };
    let Some(mounted) = try_mount(mnt.path(), &options) else { return };
    std::fs::write(mnt.path().join("f"), "x").unwrap();
    vfscale_fuse::unmount(mnt.path()).expect("umount");
    wait_for("the session's end after umount", || mounted.is_finished());
    assert!(!is_vfscale_mount(mnt.path()));
    assert!(!mnt.path().join("f").exists());
    mounted.unmount().expect("joining an unmounted session");
}

/// `df`'s size, used and available 1K-blocks, and inodes and free ones.
fn df(dir: &Path) -> (u64, u64, u64, u64, u64) {
    let out = Command::new("df").args(["--output=size,used,avail,itotal,iavail", "-k"]).arg(dir).output().unwrap();
    let text = String::from_utf8(out.stdout).unwrap();
    let nums: Vec<u64> = text.lines().nth(1).unwrap().split_whitespace().map(|n| n.parse().unwrap()).collect();
    (nums[0], nums[1], nums[2], nums[3], nums[4])
}

/// `vfscale mount DIR --size 8M --inodes 1000`: writing 16 MB fails with
/// ENOSPC after 8 MB, `df` shows the limits, and `rm` gives the space back
/// as soon as the kernel has handed over its `FORGET`, also after many
/// unlinks.
#[test]
fn size_and_inode_limits_show_in_df_and_come_back() {
    let _serial = serial();
    let mnt = tempfile::tempdir().unwrap();
    let vfs = Vfs::new(vfscale::VfsConfig { size_limit: 8 << 20, inode_limit: 1000, ..Default::default() });
    let Some(mounted) = try_mount_vfs(mnt.path(), vfs, &MountOptions::default()) else { return };
    assert_eq!(df(mnt.path()), (8192, 0, 8192, 1000, 999), "the root is one inode");
    // The rounds below are about the queues' resting forgets.
    assert_eq!(mounted.io_uring(), kernel_offers_io_uring());
    // An unlinked file's space comes back with the kernel's FORGET for it,
    // which the kernel hands to a reader (or, with the io_uring queues,
    // keeps while the readers rest) after the unlink has returned. From
    // when a reader has begun serving it (it is counted), or while it is
    // still in the kernel (a drain reads it), STATFS and a write that found
    // no space wait for it; in between, the reader the kernel woke has not
    // reached the server's code, and nothing there can know of it. So each
    // check below waits for the forgets to be counted.
    let mut unlinked = 0;
    let forgotten = |unlinked: u64| {
        wait_for("the kernel's FORGETs of the unlinked files", || mounted.requests().get(Opcode::Forget) >= unlinked)
    };
    let f = mnt.path().join("big");
    let err = std::fs::write(&f, vec![0u8; 16 << 20]).unwrap_err();
    assert_eq!(err.raw_os_error(), Some(libc::ENOSPC));
    assert_eq!(std::fs::metadata(&f).unwrap().len(), 8 << 20);
    assert_eq!(df(mnt.path()), (8192, 8192, 0, 1000, 998));
    std::fs::remove_file(&f).unwrap();
    unlinked += 1;
    forgotten(unlinked);
    assert_eq!(df(mnt.path()), (8192, 0, 8192, 1000, 999));
    // After a run of unlinks, whose forgets may wait for a resting reader
    // (with the io_uring queues), `df` and the limit still see the space
    // of what was removed.
    for round in 0..3 {
        for i in 0..50 {
            let small = mnt.path().join(format!("small{i}"));
            std::fs::write(&small, b"x").unwrap();
            std::fs::remove_file(&small).unwrap();
            unlinked += 1;
        }
        forgotten(unlinked);
        std::fs::write(&f, vec![1u8; 8 << 20]).unwrap_or_else(|e| panic!("round {round}: {e}"));
        std::fs::remove_file(&f).unwrap();
        unlinked += 1;
        forgotten(unlinked);
        assert_eq!(df(mnt.path()), (8192, 0, 8192, 1000, 999), "round {round}");
    }
    mounted.unmount().expect("unmount");
}

/// Files created and unlinked on the mount leave nothing behind: once the
/// kernel has sent its FORGETs, the VFS's live inodes and dentries are back
/// where they started. `VFSCALE_FORGET_FILES` sets how many (100,000).
#[test]
fn memory_comes_back_after_unlink_and_forget() {
    let _serial = serial();
    let files: usize = std::env::var("VFSCALE_FORGET_FILES").ok().and_then(|n| n.parse().ok()).unwrap_or(100_000);
    let mnt = tempfile::tempdir().unwrap();
    let vfs = Vfs::default();
    let Some(mounted) = try_mount_vfs(mnt.path(), vfs.clone(), &MountOptions::default()) else { return };
    std::fs::create_dir(mnt.path().join("d")).unwrap();
    let counts = || {
        vfs.release_barrier(Duration::from_secs(1));
        let s = vfs.statfs();
        (s.inodes, s.dentries)
    };
    let before = counts();
    let dir = mnt.path().join("d");
    std::thread::scope(|scope| {
        for t in 0..4 {
            let dir = &dir;
            scope.spawn(move || {
                for i in (t..files).step_by(4) {
                    let f = dir.join(format!("f{i}"));
                    std::fs::write(&f, b"x").unwrap();
                    std::fs::remove_file(&f).unwrap();
                }
            });
        }
    });
    let deadline = Instant::now() + Duration::from_secs(60);
    let mut after = counts();
    while after != before && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(100));
        after = counts();
    }
    mounted.unmount().expect("unmount");
    assert_eq!(after, before, "(live inodes, dentries) after {files} files came and went");
}

/// The requests `mounted` served while `op` ran `n` times, in a window in
/// which the kernel reclaimed nothing: where its cache shrinkers ran in the
/// window (`slabs_scanned` of /proc/vmstat moved: memory pressure on a busy
/// machine, which may drop the very entries whose requests are counted),
/// `op` runs once more to fill the caches again and the window is run
/// again, up to [`RECLAIM_RETRIES`] times (then the last window counts).
fn requests_of(mounted: &Mounted, n: usize, mut op: impl FnMut()) -> RequestCounts {
    let mut tries = 0;
    loop {
        let scanned = slabs_scanned();
        let before = mounted.requests();
        for _ in 0..n {
            op();
        }
        let served = mounted.requests().since(&before);
        tries += 1;
        if slabs_scanned() == scanned || tries == RECLAIM_RETRIES {
            return served;
        }
        op();
    }
}

/// Windows a request count is tried in before one in which the kernel
/// reclaimed its caches counts anyway.
const RECLAIM_RETRIES: usize = 10;

/// Objects the kernel's cache shrinkers have scanned (`slabs_scanned` of
/// /proc/vmstat), or 0 where it cannot be read.
fn slabs_scanned() -> u64 {
    let vmstat = std::fs::read_to_string("/proc/vmstat").unwrap_or_default();
    vmstat.lines().find_map(|line| line.strip_prefix("slabs_scanned ")?.trim().parse().ok()).unwrap_or(0)
}

/// A window in which the kernel dropped its caches (here on purpose, as
/// memory pressure would) is run again: the stats of an unchanged file in
/// the window that counts send no request. Skipped unless this process may
/// write `/proc/sys/vm/drop_caches` (root).
#[test]
fn a_window_in_which_the_kernel_reclaimed_is_run_again() {
    let _serial = serial();
    let mnt = tempfile::tempdir().unwrap();
    let Some(mounted) = try_mount(mnt.path(), &MountOptions::default()) else { return };
    let file = mnt.path().join("f");
    std::fs::write(&file, "x").unwrap();
    assert_eq!(std::fs::metadata(&file).unwrap().len(), 1);
    let mut dropped = false;
    let stats = requests_of(&mounted, 10, || {
        if !dropped {
            dropped = true;
            if std::fs::write("/proc/sys/vm/drop_caches", "2").is_err() {
                return eprintln!("SKIPPED: cannot drop the kernel's caches");
            }
        }
        assert_eq!(std::fs::metadata(&file).unwrap().len(), 1);
    });
    assert_eq!(asked(&stats), 0, "{stats}");
    mounted.unmount().expect("unmount");
}

/// The requests in which the kernel asked something: all but its FORGETs,
/// which say only that it dropped nodes, and may come a moment after the
/// reclaim that dropped them, in the next window.
fn asked(served: &RequestCounts) -> u64 {
    served.total() - served.get(Opcode::Forget)
}

/// What did not change, the kernel answers from its caches: a stat of a
/// file or of a missing name sends no request, nor (with record locks in
/// the kernel) an open + read + close of an unchanged file; a create +
/// close + unlink of one name costs a lookup (the unlink dropped the
/// kernel's entry), a create and an unlink, and no flush unless the VFS
/// holds record locks. What changes through the mount, programs see.
#[test]
fn the_kernel_answers_what_did_not_change() {
    let _serial = serial();
    // Through the queues where the kernel offers them, and through
    // /dev/fuse.
    for (locks, io_uring) in [(RecordLocks::Kernel, true), (RecordLocks::Kernel, false), (RecordLocks::Vfs, false)] {
        let mnt = tempfile::tempdir().unwrap();
        let Some(mounted) = try_mount(mnt.path(), &MountOptions { locks, io_uring, ..MountOptions::default() }) else {
            return;
        };
        let (file, missing, new) = (mnt.path().join("f"), mnt.path().join("missing"), mnt.path().join("new"));
        std::fs::write(&file, [7u8; 32]).unwrap();
        let stat = |p: &Path| std::fs::metadata(p).map(|m| m.len());
        // A read from the server (not from pages) makes the kernel ask for
        // the new atime at the next stat.
        assert_eq!(std::fs::read(&file).unwrap(), [7u8; 32]);
        assert_eq!((stat(&file).unwrap(), stat(&missing).ok()), (32, None));
        // The kernel sends a file's RELEASE after its last close has
        // returned: every created file has one, and with the VFS's locks
        // every opened one (with them in the kernel, the one OPEN was
        // refused). None may land in the windows below.
        wait_for("the RELEASEs of the files closed so far", || {
            let r = mounted.requests();
            let opened = if locks == RecordLocks::Vfs { r.get(Opcode::Open) } else { 0 };
            r.get(Opcode::Release) >= r.get(Opcode::Create) + opened
        });
        let stats = requests_of(&mounted, 100, || assert_eq!(stat(&file).unwrap(), 32));
        assert_eq!(asked(&stats), 0, "{locks}: {stats}");
        let misses = requests_of(&mounted, 100, || assert!(stat(&missing).is_err()));
        assert_eq!(asked(&misses), 0, "{locks}: {misses}");
        let reads = requests_of(&mounted, 100, || assert_eq!(std::fs::read(&file).unwrap(), [7u8; 32]));
        assert_eq!(reads.get(Opcode::Read), 0, "{locks}: pages are kept across opens");
        match locks {
            RecordLocks::Kernel => assert_eq!(asked(&reads), 0, "{reads}"),
            RecordLocks::Vfs => {
                assert_eq!((reads.get(Opcode::Open), reads.get(Opcode::Flush)), (100, 100), "{reads}");
                assert_eq!(asked(&reads), 200 + reads.get(Opcode::Release), "{reads}");
            }
        }
        let created = requests_of(&mounted, 100, || {
            drop(std::fs::File::create(&new).unwrap());
            std::fs::remove_file(&new).unwrap();
        });
        for op in [Opcode::Lookup, Opcode::Create, Opcode::Unlink] {
            assert_eq!(created.get(op), 100, "{locks}: {created}");
        }
        let flushes = if locks == RecordLocks::Vfs { 100 } else { 0 };
        assert_eq!((created.get(Opcode::Flush), created.get(Opcode::Open)), (flushes, 0), "{locks}: {created}");
        // Changes through the mount show at once.
        std::fs::write(&file, "changed").unwrap();
        assert_eq!(std::fs::read_to_string(&file).unwrap(), "changed");
        std::fs::write(&missing, "here now").unwrap();
        assert_eq!(stat(&missing).unwrap(), 8);
        std::fs::rename(&missing, &file).unwrap();
        assert_eq!((std::fs::read_to_string(&file).unwrap(), stat(&missing).ok()), ("here now".into(), None));
        mounted.unmount().expect("unmount");
    }
}

/// A request thread that replied lingers for the next request, and never
/// stops doing so for good: with one request thread (so no other thread
/// begins a request and no linger is lost), each reply lingers at most
/// once, and after misses at most 63 replies in a row (the linger module's
/// `MAX_SKIP`) skip it, so a busy client's replies linger at least once in
/// every 64. Whether a linger finds the next request waiting is the
/// scheduler's affair; the linger module's tests check hits and misses
/// on a pipe. With lingering off, none ever lingers, and the same loop
/// sends the same requests.
#[test]
fn request_threads_linger_for_a_busy_client() {
    let _serial = serial();
    let mut sent = Vec::new();
    for linger in [vfscale_fuse::LINGER, Duration::ZERO] {
        let mnt = tempfile::tempdir().unwrap();
        let options = MountOptions { linger, threads: 1, io_uring: false, ..MountOptions::default() };
        let Some(mounted) = try_mount(mnt.path(), &options) else { return };
        let new = mnt.path().join("new");
        let (before, requests_before) = (mounted.lingers(), mounted.requests());
        for _ in 0..200 {
            drop(std::fs::File::create(&new).unwrap());
            std::fs::remove_file(&new).unwrap();
        }
        // Lingers before requests: every linger counted is then of a
        // request counted by the second read, in the window or before it.
        let lingers = mounted.lingers();
        let requests = mounted.requests().since(&requests_before);
        let (hits, misses, lost) =
            (lingers.hits - before.hits, lingers.misses - before.misses, lingers.lost - before.lost);
        // Every request but a batch's later forgotten nodes ends with a
        // reply (or, for a forget, its end), after which it may linger.
        let replies = requests.total() - requests.get(Opcode::Forget) + requests.forget_requests();
        let lingered = hits + misses;
        if linger.is_zero() {
            assert_eq!((hits, misses, lost), (0, 0, 0));
        } else {
            let tally = format!("{hits} hits, {misses} misses, {lost} lost for {replies} replies ({requests})");
            assert_eq!(lost, 0, "a linger was lost with one request thread: {tally}");
            // A reply from before the window may linger into it.
            assert!(lingered <= replies + 1, "a reply lingered twice: {tally}");
            // The last reply's linger may end after the window.
            assert!(lingered >= replies.saturating_sub(1) / 64, "lingering stopped: {tally}");
        }
        sent.push([Opcode::Lookup, Opcode::Create, Opcode::Unlink].map(|op| requests.get(op)));
        mounted.unmount().expect("unmount");
    }
    assert_eq!(sent[0], sent[1], "lingering changes no request");
}

/// The kernel forgets many nodes at once (`BATCH_FORGET`) when it drops
/// its caches: a batch lingers once, not once per node. Skipped unless
/// this process may write `/proc/sys/vm/drop_caches` (root).
#[test]
fn a_batch_of_forgets_lingers_once() {
    let _serial = serial();
    let mnt = tempfile::tempdir().unwrap();
    let options = MountOptions { io_uring: false, ..MountOptions::default() };
    let Some(mounted) = try_mount(mnt.path(), &options) else { return };
    let files = 500;
    for i in 0..files {
        std::fs::write(mnt.path().join(format!("f{i}")), "x").unwrap();
    }
    let (lingers, before) = (mounted.lingers(), mounted.requests());
    if std::fs::write("/proc/sys/vm/drop_caches", "2").is_err() {
        return eprintln!("SKIPPED: cannot drop the kernel's caches");
    }
    let forgot = || mounted.requests().since(&before).get(Opcode::Forget);
    wait_for("the kernel to forget every node", || forgot() >= files);
    let (now, served) = (mounted.lingers(), mounted.requests().since(&before));
    let lingered = (now.hits + now.misses + now.lost) - (lingers.hits + lingers.misses + lingers.lost);
    // Each request lingers at most once, a forget request however many
    // nodes it names. A request counted before the first snapshots may
    // still have been served or lingering after them, one per request
    // thread at most. How many requests the kernel sent is its own affair.
    let requests = served.total() - served.get(Opcode::Forget) + served.forget_requests();
    assert!(
        lingered <= requests + options.threads as u64,
        "{lingered} lingers for {requests} requests ({} forget requests for {} nodes)",
        served.forget_requests(),
        forgot()
    );
    mounted.unmount().expect("unmount");
}

/// A file the kernel opened without a request keeps working after its
/// last name goes, as an open file does on tmpfs: its reads and writes go
/// through a description the mount opened while a name still reached it.
#[test]
fn open_files_outlive_their_names() {
    use std::io::{Read, Seek, SeekFrom, Write};
    use std::os::unix::fs::MetadataExt;
    let _serial = serial();
    let mnt = tempfile::tempdir().unwrap();
    let options = MountOptions { io_uring: false, ..MountOptions::default() };
    let Some(mounted) = try_mount(mnt.path(), &options) else { return };
    let (f, g) = (mnt.path().join("f"), mnt.path().join("g"));
    std::fs::write(&f, "hello").unwrap();
    std::fs::write(&g, "old g").unwrap();
    let open = |p: &Path| std::fs::OpenOptions::new().read(true).write(true).open(p).unwrap();
    let (mut unlinked, mut replaced) = (open(&f), open(&g));
    std::fs::remove_file(&f).unwrap();
    std::fs::write(mnt.path().join("h"), "new g").unwrap();
    std::fs::rename(mnt.path().join("h"), &g).unwrap();
    unlinked.seek(SeekFrom::End(0)).unwrap();
    unlinked.write_all(b", world").unwrap();
    let mut text = String::new();
    unlinked.seek(SeekFrom::Start(0)).unwrap();
    unlinked.read_to_string(&mut text).unwrap();
    assert_eq!(text, "hello, world");
    assert_eq!(unlinked.metadata().unwrap().nlink(), 0);
    text.clear();
    replaced.read_to_string(&mut text).unwrap();
    assert_eq!(text, "old g");
    assert_eq!(std::fs::read_to_string(&g).unwrap(), "new g");
    assert!(mounted.requests().get(Opcode::Open) <= 1, "one OPEN, answered ENOSYS, and no more");
    drop((unlinked, replaced));
    mounted.unmount().expect("unmount");
}

/// The demo trees change behind the kernel's back, and programs see it
/// within what docs/mount.md promises: `sys/` at the next read (nothing of
/// the trees is cached), `proc/` within a second of a process starting or
/// ending (one refresh, every half second, and its walk of the host's
/// /proc), even for names looked up, and missed, before. The refresh is
/// what is checked: the kernel caches nothing in between.
#[test]
fn demo_trees_never_go_stale() {
    let _serial = serial();
    let mnt = tempfile::tempdir().unwrap();
    let vfs = Vfs::default();
    let options = MountOptions { demo: true, ..MountOptions::default() };
    let Some(mounted) = try_mount_vfs(mnt.path(), vfs.clone(), &options) else { return };
    let inodes = mnt.path().join("sys/fs/vfscale/inodes");
    let count = || std::fs::read_to_string(&inodes).unwrap().trim().parse::<u64>().unwrap();
    let before = count();
    // Straight into the served VFS, which the sys/ tree reports on.
    vfs.process(vfscale::Credentials::root()).mkdir("/behind", 0o755).unwrap();
    assert_eq!(count(), before + 1, "sys/ showed a cached value");
    // Names of processes to come, missed first: the next pids after a
    // throwaway child's (unless other processes take them meanwhile).
    let mut probe = Command::new("true").spawn().unwrap();
    let first = probe.id() + 1;
    probe.wait().unwrap();
    let proc_entry = |pid: u32| mnt.path().join(format!("proc/{pid}"));
    for pid in first..first + 100 {
        // A lookup; for a pid not in use, a miss.
        let _ = proc_entry(pid).exists();
    }
    // Within one refresh: by the end of the first refresh that began
    // after the process started (or was reaped), counted, not timed.
    let mut child = Command::new("sleep").arg("30").spawn().unwrap();
    let entry = proc_entry(child.id());
    let missed_before = if (first..first + 100).contains(&child.id()) { ", a miss looked up before" } else { "" };
    proc_refreshed(&mounted);
    assert!(entry.exists(), "pid {} not in proc/ after a refresh since it started{missed_before}", child.id());
    assert_eq!(std::fs::read_to_string(entry.join("cmdline")).unwrap(), "sleep\x0030\0");
    child.kill().unwrap();
    child.wait().unwrap();
    proc_refreshed(&mounted);
    assert!(!entry.exists(), "pid {} still in proc/ after a refresh since it was reaped", child.id());
    mounted.unmount().expect("unmount");
}

/// What `nobody` (uid and gid 65534, no groups) gets when it opens,
/// stats and lists `paths[0]`, `paths[1]` and `paths[2]` through the
/// mount: each an errno, 0 for success. Forked, so the test's own
/// credentials stay root.
fn as_nobody(paths: [&Path; 3]) -> [i32; 3] {
    use std::os::unix::ffi::OsStrExt;
    let paths = paths.map(|p| std::ffi::CString::new(p.as_os_str().as_bytes()).unwrap());
    let mut fds = [0; 2];
    // SAFETY: `fds` has room for the two descriptors pipe(2) writes.
    assert_eq!(unsafe { libc::pipe(fds.as_mut_ptr()) }, 0);
    // SAFETY: the child calls only async-signal-safe functions (setgroups,
    // setgid, setuid, open, stat, write, _exit) on memory that exists
    // before the fork, and never returns.
    let pid = unsafe { libc::fork() };
    if pid == 0 {
        // SAFETY: as above; every pointer is to a live local or CString.
        unsafe {
            let mut errors = [0i32; 3];
            let dropped =
                libc::setgroups(0, std::ptr::null()) == 0 && libc::setgid(65534) == 0 && libc::setuid(65534) == 0;
            if !dropped {
                libc::_exit(2);
            }
            let errno = || *libc::__errno_location();
            let fd = libc::open(paths[0].as_ptr(), libc::O_RDONLY);
            errors[0] = if fd >= 0 { 0 } else { errno() };
            let mut st: libc::stat = std::mem::zeroed();
            errors[1] = if libc::stat(paths[1].as_ptr(), &mut st) == 0 { 0 } else { errno() };
            let dir = libc::open(paths[2].as_ptr(), libc::O_RDONLY | libc::O_DIRECTORY);
            errors[2] = if dir >= 0 { 0 } else { errno() };
            let bytes = std::mem::size_of_val(&errors);
            let written = libc::write(fds[1], errors.as_ptr().cast(), bytes) == bytes as isize;
            libc::_exit(if written { 0 } else { 3 });
        }
    }
    assert!(pid > 0, "fork: {}", std::io::Error::last_os_error());
    // SAFETY: plain syscalls on descriptors and a pid this test owns.
    unsafe {
        libc::close(fds[1]);
        let mut errors = [0i32; 3];
        let got = libc::read(fds[0], errors.as_mut_ptr().cast(), std::mem::size_of_val(&errors));
        libc::close(fds[0]);
        let mut status = 0;
        assert_eq!(libc::waitpid(pid, &mut status, 0), pid);
        assert!(libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0, "the child failed: {status:#x}");
        assert_eq!(got, std::mem::size_of_val(&errors) as isize);
        errors
    }
}

/// Root makes `P/D/f` inside `P` (0700) and reads it, so the kernel
/// caches every entry on the way; then another user tries it. The kernel
/// walks cached entries without asking the server, so it must check the
/// search permission of `P` itself: in every mode, as on tmpfs, the
/// other user is refused at `P`.
#[test]
fn a_cached_walk_checks_search_permission_in_every_mode() {
    let _serial = serial();
    // Each mode through /dev/fuse, and through the io_uring queues where
    // the kernel offers them (record locks in the VFS go through /dev/fuse
    // only).
    let modes = [
        MountOptions { io_uring: false, ..MountOptions::default() },
        MountOptions { io_uring: false, locks: RecordLocks::Vfs, ..MountOptions::default() },
        MountOptions { io_uring: false, demo: true, ..MountOptions::default() },
        MountOptions::default(),
        MountOptions { demo: true, ..MountOptions::default() },
    ];
    let reference = tmpfs_dir();
    let mnts: Vec<tempfile::TempDir> = modes.iter().map(|_| tempfile::tempdir().unwrap()).collect();
    let mut outcomes = Vec::new();
    for (dir, options) in [reference.path()]
        .into_iter()
        .chain(mnts.iter().map(|d| d.path()))
        .zip(std::iter::once(None).chain(modes.iter().map(Some)))
    {
        // Other users must reach the mount point's own directory.
        std::fs::set_permissions(dir, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
        let mounted = match options {
            Some(options) => {
                let Some(m) = try_mount(dir, &MountOptions { allow_other: true, ..options.clone() }) else { return };
                Some(m)
            }
            None => None,
        };
        let p = dir.join("P");
        std::fs::create_dir(&p).unwrap();
        std::fs::set_permissions(&p, std::os::unix::fs::PermissionsExt::from_mode(0o700)).unwrap();
        std::fs::create_dir(p.join("D")).unwrap();
        std::fs::write(p.join("D/f"), "secret").unwrap();
        assert_eq!(std::fs::read_to_string(p.join("D/f")).unwrap(), "secret");
        assert!(std::fs::metadata(p.join("D")).unwrap().is_dir());
        outcomes.push((options.map(|o| (o.locks, o.demo)), as_nobody([&p.join("D/f"), &p.join("D"), &p.join("D")])));
        std::fs::remove_dir_all(&p).unwrap();
        if let Some(m) = mounted {
            m.unmount().expect("unmount");
        }
    }
    for (mode, errors) in &outcomes {
        assert_eq!(
            *errors,
            [libc::EACCES; 3],
            "nobody's open, stat and opendir of P/D/f, P/D ({mode:?} on the mount; None: tmpfs)"
        );
    }
}

/// Runs `script` with `sh -c` as a caller `setpriv` makes (`args`, e.g.
/// `--reuid=2000`), in `dir`; whether it succeeded.
fn as_caller(dir: &Path, args: &[&str], script: &str) -> bool {
    let status = Command::new("setpriv")
        .args(args)
        .args(["--", "sh", "-c", script])
        .current_dir(dir)
        .stderr(std::process::Stdio::null())
        .status()
        .expect("run setpriv (util-linux)");
    status.success()
}

/// What a set of callers other than the owner may do, through the mount
/// in every mode and on tmpfs: the owner is uid 1000; uid 2000 is a
/// stranger, with and without `CAP_CHOWN`; root has dropped
/// `CAP_DAC_OVERRIDE` and `CAP_DAC_READ_SEARCH`. Each answer and the
/// files' modes and owners afterwards must be tmpfs's.
#[test]
fn other_users_and_capabilities_are_checked_as_on_tmpfs_in_every_mode() {
    let _serial = serial();
    let modes = [
        MountOptions { io_uring: false, ..MountOptions::default() },
        MountOptions { io_uring: false, locks: RecordLocks::Vfs, ..MountOptions::default() },
        MountOptions { io_uring: false, demo: true, ..MountOptions::default() },
        MountOptions::default(),
        MountOptions { demo: true, ..MountOptions::default() },
    ];
    let reference = tmpfs_dir();
    let mnts: Vec<tempfile::TempDir> = modes.iter().map(|_| tempfile::tempdir().unwrap()).collect();
    let stranger = ["--reuid=2000", "--regid=2000", "--clear-groups"];
    let stranger_chown =
        ["--reuid=2000", "--regid=2000", "--clear-groups", "--inh-caps=+chown", "--ambient-caps=+chown"];
    let confined_root = ["--bounding-set=-dac_override,-dac_read_search"];
    let mut outcomes = Vec::new();
    for (dir, options) in [reference.path()]
        .into_iter()
        .chain(mnts.iter().map(|d| d.path()))
        .zip(std::iter::once(None).chain(modes.iter().map(Some)))
    {
        std::fs::set_permissions(dir, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
        let mounted = match options {
            Some(options) => match try_mount(dir, &MountOptions { allow_other: true, ..options.clone() }) {
                Some(m) => Some(m),
                None => return,
            },
            None => None,
        };
        let setup = "mkdir w && chmod 1777 w && echo secret > w/private && chmod 600 w/private \
                     && echo x > w/setuid && chmod 6777 w/setuid && echo x > w/trunc && chmod 6777 w/trunc && echo y > w/mine && echo z > w/theirs \
                     && chown 1000:1000 w/private w/setuid w/trunc w/mine w/theirs";
        assert!(as_caller(dir, &[], setup), "set-up in {}", dir.display());
        let answers = [
            ("confined root reads a 0600 file", as_caller(dir, &confined_root, "cat w/private")),
            ("confined root writes it", as_caller(dir, &confined_root, "echo more >> w/private")),
            ("a stranger chowns without CAP_CHOWN", as_caller(dir, &stranger, "chown 2000 w/mine")),
            ("a stranger chowns with CAP_CHOWN", as_caller(dir, &stranger_chown, "chown 2000:2000 w/theirs")),
            ("a stranger writes a set-user-ID file", as_caller(dir, &stranger, "echo more >> w/setuid")),
            ("a stranger truncates a set-user-ID file", as_caller(dir, &stranger, ": > w/trunc")),
            ("a stranger unlinks in a sticky directory", as_caller(dir, &stranger, "rm -f w/mine")),
            ("a stranger reads the 0600 file", as_caller(dir, &stranger, "cat w/private")),
        ];
        use std::os::unix::fs::MetadataExt;
        let after: Vec<(String, u32, u32, u32)> = ["private", "setuid", "trunc", "mine", "theirs"]
            .iter()
            .map(|name| {
                let md = std::fs::metadata(dir.join("w").join(name)).unwrap();
                (name.to_string(), md.mode() & 0o7777, md.uid(), md.gid())
            })
            .collect();
        outcomes.push((options.map(|o| (o.locks, o.demo, o.io_uring)), answers, after));
        std::fs::remove_dir_all(dir.join("w")).unwrap();
        if let Some(m) = mounted {
            m.unmount().expect("unmount");
        }
    }
    let (_, expected_answers, expected_after) = &outcomes[0];
    for (mode, answers, after) in &outcomes[1..] {
        assert_eq!(answers, expected_answers, "answers in mode {mode:?} against tmpfs");
        assert_eq!(after, expected_after, "modes and owners afterwards in mode {mode:?} against tmpfs");
    }
}

/// A `utimensat` time: seconds and nanoseconds since the epoch.
type Time = (i64, i64);

/// `utimensat(AT_FDCWD, path, [atime, mtime], 0)`; `None` leaves a time
/// as it is (`UTIME_OMIT`).
fn set_times(path: &Path, atime: Option<Time>, mtime: Option<Time>) -> std::io::Result<()> {
    use std::os::unix::ffi::OsStrExt;
    let path = std::ffi::CString::new(path.as_os_str().as_bytes()).unwrap();
    let ts = |t: Option<Time>| match t {
        Some((sec, nsec)) => libc::timespec { tv_sec: sec, tv_nsec: nsec },
        None => libc::timespec { tv_sec: 0, tv_nsec: libc::UTIME_OMIT },
    };
    let times = [ts(atime), ts(mtime)];
    // SAFETY: `path` is NUL-terminated and `times` two timespecs, both
    // live for the call.
    if unsafe { libc::utimensat(libc::AT_FDCWD, path.as_ptr(), times.as_ptr(), 0) } == 0 {
        Ok(())
    } else {
        Err(std::io::Error::last_os_error())
    }
}

/// `setxattr`, `getxattr`, `listxattr` and `removexattr` of `path`, each
/// as one line of results.
fn xattr_calls(path: &Path) -> Vec<String> {
    use std::os::unix::ffi::OsStrExt;
    let path = std::ffi::CString::new(path.as_os_str().as_bytes()).unwrap();
    let (name, missing) = (c"user.agree", c"user.missing");
    let ret = |r: isize| if r < 0 { Err(std::io::Error::last_os_error()) } else { Ok(r) };
    let mut buf = [0u8; 256];
    // SAFETY (each call below): `path` and the names are NUL-terminated,
    // the value and `buf` are valid for the lengths given; all outlive
    // the calls.
    let set =
        |flags| ret(unsafe { libc::setxattr(path.as_ptr(), name.as_ptr(), b"v1".as_ptr().cast(), 2, flags) } as isize);
    let mut lines = vec![
        format!("setxattr create: {:?}", set(libc::XATTR_CREATE).map_err(|e| e.raw_os_error())),
        format!("setxattr create again: {:?}", set(libc::XATTR_CREATE).map_err(|e| e.raw_os_error())),
        format!("setxattr replace: {:?}", set(libc::XATTR_REPLACE).map_err(|e| e.raw_os_error())),
    ];
    // SAFETY: as above.
    let got = ret(unsafe { libc::getxattr(path.as_ptr(), name.as_ptr(), buf.as_mut_ptr().cast(), buf.len()) });
    lines.push(format!("getxattr: {:?}", got.map(|n| buf[..n as usize].to_vec()).map_err(|e| e.raw_os_error())));
    // SAFETY: as above.
    let listed = ret(unsafe { libc::listxattr(path.as_ptr(), buf.as_mut_ptr().cast(), buf.len()) });
    let mut names: Vec<String> = match listed {
        Ok(n) => buf[..n as usize]
            .split(|b| *b == 0)
            .filter(|s| !s.is_empty())
            .map(|s| String::from_utf8_lossy(s).into())
            .collect(),
        Err(e) => vec![format!("errno {:?}", e.raw_os_error())],
    };
    // Only the user namespace is the test's: security.* differs by host.
    names.retain(|n| n.starts_with("user.") || n.starts_with("errno"));
    lines.push(format!("listxattr: {names:?}"));
    // SAFETY: as above.
    let removed = ret(unsafe { libc::removexattr(path.as_ptr(), name.as_ptr()) } as isize);
    lines.push(format!("removexattr: {:?}", removed.map_err(|e| e.raw_os_error())));
    // SAFETY: as above.
    let gone = ret(unsafe { libc::getxattr(path.as_ptr(), missing.as_ptr(), buf.as_mut_ptr().cast(), buf.len()) });
    lines.push(format!("getxattr missing: {:?}", gone.map_err(|e| e.raw_os_error())));
    lines
}

/// The same calls on `dir`, each result (or errno) a line, then the
/// state they left: each entry's type and mode, size, link count, and
/// the times the calls set (a regular file's; the rest keep times of
/// their own making, which differ from run to run), and a size but a
/// directory's.
fn agreement_calls(dir: &Path) -> Vec<String> {
    use std::io::{Read, Seek, SeekFrom, Write};
    use std::os::unix::fs::{MetadataExt, OpenOptionsExt, PermissionsExt};
    let mut out = Vec::new();
    let errno = |e: std::io::Error| e.raw_os_error().map_or_else(|| e.to_string(), |n| format!("errno {n}"));
    let mut log = |what: &str, result: Result<String, std::io::Error>| {
        out.push(format!("{what}: {}", result.unwrap_or_else(errno)));
    };
    let (f, g, h, s) = (dir.join("f"), dir.join("g"), dir.join("h"), dir.join("s"));
    let opened = std::fs::OpenOptions::new().read(true).write(true).create_new(true).mode(0o644).open(&f);
    let mut file = opened.expect("create f");
    log("create again", std::fs::OpenOptions::new().write(true).create_new(true).open(&f).map(|_| "made".into()));
    log("write", file.write(b"hello world").map(|n| n.to_string()));
    let mut back = [0u8; 5];
    log(
        "read at 6",
        file.seek(SeekFrom::Start(6)).and_then(|_| file.read(&mut back)).map(|n| format!("{:?}", &back[..n])),
    );
    log("truncate", file.set_len(5).map(|()| "ok".into()));
    log("read all", std::fs::read(&f).map(|d| format!("{d:?}")));
    drop(file);
    log("stat size", std::fs::metadata(&f).map(|m| m.len().to_string()));
    // Times before 1970 with nanoseconds (the ones fuser 0.18 converts
    // wrongly), after, and the extremes.
    // (The kernel clamps a time to what the filesystem holds and zeroes
    // the nanoseconds of a time clamped: at i64::MIN or i64::MAX seconds
    // none reach the filesystem.)
    let times: [(Option<Time>, Option<Time>); 7] = [
        (Some((-3, 250)), Some((1_700_000_000, 123_456_789))),
        (Some((-1_000_000_000, 999_999_999)), Some((-1, 1))),
        (None, Some((-86_400, 500_000_000))),
        (Some((i64::MIN, 0)), Some((0, 1))),
        (Some((i64::MAX, 999_999_999)), Some((i64::MIN, 1))),
        (Some((1_234_567_890, 987_654_321)), None),
        (Some((-7, 999_999_999)), Some((-123_456_789, 42))),
    ];
    for (atime, mtime) in times {
        log(&format!("utimensat {atime:?} {mtime:?}"), set_times(&f, atime, mtime).map(|()| "ok".into()));
        let m = std::fs::metadata(&f);
        log("  times", m.map(|m| format!("{}.{} {}.{}", m.atime(), m.atime_nsec(), m.mtime(), m.mtime_nsec())));
    }
    log("utimensat missing", set_times(&dir.join("missing"), Some((-3, 250)), None).map(|()| "ok".into()));
    log("chmod", std::fs::set_permissions(&f, std::fs::Permissions::from_mode(0o600)).map(|()| "ok".into()));
    log("rename", std::fs::rename(&f, &g).map(|()| "ok".into()));
    log("rename missing", std::fs::rename(&f, &h).map(|()| "ok".into()));
    log("link", std::fs::hard_link(&g, &h).map(|()| "ok".into()));
    log("link again", std::fs::hard_link(&g, &h).map(|()| "ok".into()));
    log("nlink", std::fs::metadata(&g).map(|m| m.nlink().to_string()));
    log("symlink", std::os::unix::fs::symlink("g", &s).map(|()| "ok".into()));
    log("readlink", std::fs::read_link(&s).map(|t| t.display().to_string()));
    log("xattrs", Ok(xattr_calls(&g).join("; ")));
    log("mkdir", std::fs::create_dir(dir.join("d")).map(|()| "ok".into()));
    log("mkdir again", std::fs::create_dir(dir.join("d")).map(|()| "ok".into()));
    log("write in d", std::fs::write(dir.join("d/x"), "x").map(|()| "ok".into()));
    log("rmdir full", std::fs::remove_dir(dir.join("d")).map(|()| "ok".into()));
    log("utimensat d/x", set_times(&dir.join("d/x"), Some((-5, 5)), Some((5, 5))).map(|()| "ok".into()));
    log("mkdir e", std::fs::create_dir(dir.join("e")).map(|()| "ok".into()));
    log("rmdir e", std::fs::remove_dir(dir.join("e")).map(|()| "ok".into()));
    log("unlink h", std::fs::remove_file(&h).map(|()| "ok".into()));
    log("unlink h again", std::fs::remove_file(&h).map(|()| "ok".into()));
    log("rmdir a file", std::fs::remove_dir(&g).map(|()| "ok".into()));
    let mut names: Vec<_> = std::fs::read_dir(dir).unwrap().map(|e| e.unwrap().file_name()).collect();
    names.sort();
    log("readdir", Ok(format!("{names:?}")));
    // The state left.
    for name in ["g", "s", "d", "d/x"] {
        let shown = std::fs::symlink_metadata(dir.join(name)).map(|m| {
            // A directory's size is the filesystem's own (tmpfs counts
            // its entries' names).
            let size = if m.is_dir() { String::new() } else { format!(" size {}", m.size()) };
            let mut line = format!("mode {:o}{size} nlink {}", m.mode(), m.nlink());
            if m.is_file() {
                line += &format!(" atime {}.{} mtime {}.{}", m.atime(), m.atime_nsec(), m.mtime(), m.mtime_nsec());
            }
            line
        });
        log(&format!("state {name}"), shown);
    }
    out
}

/// [`agreement_calls`] on `dir` in a thread of its own: a reply that never
/// comes fails the test instead of hanging it.
fn agreement_calls_guarded(dir: &Path) -> Vec<String> {
    let (done, result) = std::sync::mpsc::channel();
    let (dir, dir_for_abort) = (dir.to_owned(), dir.to_owned());
    std::thread::spawn(move || {
        let _ = done.send(agreement_calls(&dir));
    });
    result.recv_timeout(Duration::from_secs(60)).unwrap_or_else(|_| {
        // A call left waiting holds its thread, and with it this process,
        // until the connection ends: a forced unmount aborts it.
        let path = std::ffi::CString::new(dir_for_abort.as_os_str().as_encoded_bytes()).unwrap();
        // SAFETY: `path` is NUL-terminated and outlives the call.
        unsafe { libc::umount2(path.as_ptr(), libc::MNT_FORCE) };
        panic!("the calls did not end within a minute")
    })
}

/// Both transports agree: the same calls through the io_uring queues and
/// through `/dev/fuse`, each on a fresh mount, get the same results and
/// leave the same state as on tmpfs, times before 1970 with nanoseconds
/// included (fuser's own conversion of a `SETATTR` time, which the
/// `/dev/fuse` front end undoes, stored them `2 * nsec` early). Where the
/// kernel does not offer io_uring, `/dev/fuse` alone is compared with
/// tmpfs, as the output says.
#[test]
fn transports_agree() {
    let _serial = serial();
    let reference = tmpfs_dir();
    let mut runs = vec![("tmpfs".to_string(), agreement_calls_guarded(reference.path()))];
    let transports: &[bool] = if kernel_offers_io_uring() {
        &[true, false]
    } else {
        eprintln!(
            "NOTE: the fuse module's enable_uring is off: only /dev/fuse is compared with tmpfs \
             (echo Y > /sys/module/fuse/parameters/enable_uring compares the io_uring queues too)"
        );
        &[false]
    };
    for &io_uring in transports {
        let mnt = tempfile::tempdir().unwrap();
        let options = MountOptions { io_uring, ..MountOptions::default() };
        let Some(mounted) = try_mount(mnt.path(), &options) else { return };
        let calls = agreement_calls_guarded(mnt.path());
        let name = if io_uring { "io_uring" } else { "/dev/fuse" };
        assert_eq!(mounted.io_uring(), io_uring, "{name}: {:?}", mounted.why_not_io_uring());
        if io_uring {
            assert!(mounted.io_uring_requests() > 0, "no request came through the queues");
        } else {
            assert_eq!(mounted.io_uring_requests(), 0, "a request came through a queue");
        }
        mounted.unmount().expect("unmount");
        assert!(wait_unmounted(mnt.path(), UNMOUNTED_WITHIN), "still mounted after unmount");
        runs.push((name.to_string(), calls));
    }
    let (first, expected) = &runs[0];
    for (name, got) in &runs[1..] {
        let mismatches: Vec<String> = expected
            .iter()
            .zip(got)
            .filter(|(a, b)| a != b)
            .map(|(a, b)| format!("  {first}: {a}\n  {name}: {b}"))
            .collect();
        assert!(
            mismatches.is_empty() && expected.len() == got.len(),
            "{name} and {first} differ:\n{}\n--- {name} ---\n{}",
            mismatches.join("\n"),
            got.join("\n")
        );
    }
    if let [_, (_, queues), (_, device)] = &runs[..] {
        assert_eq!(queues, device, "the io_uring queues and /dev/fuse differ");
    }
}
