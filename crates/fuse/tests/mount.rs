//! Mounts a VFS in a temporary directory, drives it with real programs
//! (`tests/script.sh`), and compares every result with the same script run
//! on tmpfs. Skipped, with the reason printed, where FUSE is unavailable or
//! mounting is not permitted.

use std::path::Path;
use std::process::Command;
use std::time::Duration;
use vfscale::Vfs;
use vfscale_fuse::{is_vfscale_mount, mount, wait_unmounted, MountError, MountOptions, Mounted};

/// Held by every test, so a memory measurement sees no other test's use.
static SERIAL: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn serial() -> std::sync::MutexGuard<'static, ()> {
    SERIAL.lock().unwrap_or_else(|e| e.into_inner())
}

/// Mounts, or explains why this machine cannot.
fn try_mount(dir: &Path, options: &MountOptions) -> Option<Mounted> {
    match mount(dir, Vfs::default(), options) {
        Ok(m) => Some(m),
        Err(e @ MountError::FuseUnavailable(_)) => {
            eprintln!("SKIPPED: {e}");
            None
        }
        Err(e) => panic!("mount failed: {e}"),
    }
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

#[test]
fn tools_see_what_they_see_on_tmpfs() {
    let _serial = serial();
    let mnt = tempfile::tempdir().unwrap();
    let Some(mounted) = try_mount(mnt.path(), &MountOptions::default()) else { return };
    assert!(is_vfscale_mount(mnt.path()));
    let ours = run_script(mnt.path());
    let reference = tmpfs_dir();
    let theirs = run_script(reference.path());
    mounted.unmount().expect("unmount");
    assert!(wait_unmounted(mnt.path(), Duration::from_secs(5)), "still mounted after unmount");
    let mismatches: Vec<String> = ours
        .lines()
        .zip(theirs.lines())
        .filter(|(a, b)| a != b)
        .map(|(a, b)| format!("  vfscale: {a}\n  tmpfs:   {b}"))
        .collect();
    assert!(
        mismatches.is_empty() && ours.lines().count() == theirs.lines().count(),
        "vfscale and tmpfs differ:\n{}\n--- vfscale ---\n{ours}\n--- tmpfs ---\n{theirs}",
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
    assert!(ours.contains("\nwaited\nrc=0") && ours.contains("\nshared\nrc=0"), "flock waits misbehaved:\n{ours}");
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
    // One request thread, warmed up first: each thread's request buffer
    // (16 MiB, zeroed when malloc reuses memory) is the front end's cost,
    // not the file's.
    let Some(mounted) = try_mount(mnt.path(), &MountOptions { threads: 1, ..MountOptions::default() }) else { return };
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
    let options = MountOptions { demo: true, threads: 2, ..MountOptions::default() };
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
    let held = Command::new("timeout")
        .args(["10", "python3", "-c", hold])
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
    // within a few refreshes, and `ps`-style reads see its command line.
    let me = std::process::id();
    let status = read(&mnt.path().join(format!("proc/{me}/status")));
    assert!(status.contains(&format!("Pid:\t{me}")), "{status}");
    let listed = |dir: &Path| -> Vec<String> {
        std::fs::read_dir(dir).unwrap().map(|e| e.unwrap().file_name().into_string().unwrap()).collect()
    };
    assert!(listed(&mnt.path().join("proc")).contains(&me.to_string()));
    let mut child = Command::new("sleep").arg("30").spawn().unwrap();
    let cmdline = mnt.path().join(format!("proc/{}/cmdline", child.id()));
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while !cmdline.exists() {
        assert!(std::time::Instant::now() < deadline, "child {} never appeared in proc/", child.id());
        std::thread::sleep(Duration::from_millis(50));
    }
    assert_eq!(read(&cmdline), "sleep\x0030\0");
    child.kill().unwrap();
    child.wait().unwrap();
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while cmdline.exists() {
        assert!(std::time::Instant::now() < deadline, "child {} never left proc/", child.id());
        std::thread::sleep(Duration::from_millis(50));
    }
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
    assert!(wait_unmounted(mnt.path(), Duration::from_secs(5)));
}

#[test]
fn unmount_from_outside_ends_the_session() {
    let _serial = serial();
    let mnt = tempfile::tempdir().unwrap();
    let Some(mounted) = try_mount(mnt.path(), &MountOptions::default()) else { return };
    std::fs::write(mnt.path().join("f"), "x").unwrap();
    vfscale_fuse::unmount(mnt.path()).expect("umount");
    let deadline = std::time::Instant::now() + Duration::from_secs(5);
    while !mounted.is_finished() {
        assert!(std::time::Instant::now() < deadline, "session still running after umount");
        std::thread::sleep(Duration::from_millis(20));
    }
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
/// ENOSPC after 8 MB, `df` shows the limits, and `rm` gives the space back.
#[test]
fn size_and_inode_limits_show_in_df_and_come_back() {
    let _serial = serial();
    let mnt = tempfile::tempdir().unwrap();
    let vfs = Vfs::new(vfscale::VfsConfig { size_limit: 8 << 20, inode_limit: 1000, ..Default::default() });
    let mounted = match mount(mnt.path(), vfs, &MountOptions::default()) {
        Ok(m) => m,
        Err(e) => return eprintln!("SKIPPED: {e}"),
    };
    assert_eq!(df(mnt.path()), (8192, 0, 8192, 1000, 999), "the root is one inode");
    let f = mnt.path().join("big");
    let err = std::fs::write(&f, vec![0u8; 16 << 20]).unwrap_err();
    assert_eq!(err.raw_os_error(), Some(libc::ENOSPC));
    assert_eq!(std::fs::metadata(&f).unwrap().len(), 8 << 20);
    assert_eq!(df(mnt.path()), (8192, 8192, 0, 1000, 998));
    std::fs::remove_file(&f).unwrap();
    assert_eq!(df(mnt.path()), (8192, 0, 8192, 1000, 999));
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
    let mounted = match mount(mnt.path(), vfs.clone(), &MountOptions::default()) {
        Ok(m) => m,
        Err(e) => return eprintln!("SKIPPED: {e}"),
    };
    std::fs::create_dir(mnt.path().join("d")).unwrap();
    let counts = || {
        vfs.reclaim(Duration::from_secs(1));
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
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    let mut after = counts();
    while after != before && std::time::Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(100));
        after = counts();
    }
    mounted.unmount().expect("unmount");
    assert_eq!(after, before, "(live inodes, dentries) after {files} files came and went");
}
