//! End to end: `vfscale mount-bench` measures a fresh mount beside a fresh
//! tmpfs and judges the goals, and `vfscale host ... --dir` runs a driver
//! in several directories at once. The mount-bench test is skipped, with
//! the reason printed, where FUSE mounts are not possible.

mod common;
use serde_json::Value;
use std::process::{Command, Stdio};

#[test]
fn mount_bench_judges_every_goal() {
    if !common::can_mount("vfscale mount-bench") {
        return;
    }
    // mount-bench's rows count the requests the kernel's caches save.
    use vfscale_sync::test_support::{machine_lock, KERNEL_CACHES_LOCK};
    let _caches = machine_lock(KERNEL_CACHES_LOCK);
    let child = Command::new(env!("CARGO_BIN_EXE_vfscale"))
        .args(["mount-bench", "--quick", "--runs", "1", "--goals-only"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let ours = format!("vfscale-mount-bench-{}/", child.id());
    let output = child.wait_with_output().unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(output.status.success(), "{stdout}\n{}", String::from_utf8_lossy(&output.stderr));
    let row =
        |start: &str| stdout.lines().find(|l| l.starts_with(start)).unwrap_or_else(|| panic!("{start}:\n{stdout}"));
    for op in [
        "stat of a cached file",
        "stat of a missing name",
        "create + close + unlink",
        "S2, a file per process",
        "S2, one file",
    ] {
        // Each goal row carries its judgement; which one is the machine's
        // speed, which a test does not assert on.
        let judged = row(op).split("  ").map(str::trim).any(|cell| ["met", "not met", "inconclusive"].contains(&cell));
        assert!(judged, "no judgement in {}", row(op));
    }
    // Record locks in the kernel: an unchanged file is opened, read and
    // closed without a request, and a miss is cached.
    assert!(row("open + read 32 B + close").ends_with("none"), "{stdout}");
    assert!(row("stat of a missing name").ends_with("none"), "{stdout}");
    assert!(row("create + close + unlink").contains("CREATE 1.00"), "{stdout}");
    assert!(stdout.contains("goals met: ") && stdout.contains(" of 5, not met "), "{stdout}");
    let leftovers = std::fs::read_to_string("/proc/self/mounts").unwrap();
    assert!(!leftovers.contains(&ours), "mount-bench left a mount behind:\n{leftovers}");
}

#[test]
fn host_drivers_run_side_by_side_in_given_directories() {
    let (a, b) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let dirs = format!("{},{}", a.path().display(), b.path().display());
    let output = Command::new(env!("CARGO_BIN_EXE_vfscale"))
        .args(["host", "inode-exit", "--threads", "1,2", "--runs", "1", "--iterations", "20", "--json", "--dir"])
        .arg(&dirs)
        .output()
        .unwrap();
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    let cells: Value = serde_json::from_slice(&output.stdout).unwrap();
    let variants: Vec<&str> = cells.as_array().unwrap().iter().map(|c| c["variant"].as_str().unwrap()).collect();
    assert_eq!(variants.len(), 4);
    assert_eq!(variants[0], variants[1]);
    assert_eq!(variants[2], format!("{}-2", variants[0]), "two directories on one file system");
    assert_eq!(std::fs::read_dir(a.path()).unwrap().count(), 0, "the driver's files are gone");
    let refused =
        Command::new(env!("CARGO_BIN_EXE_vfscale")).args(["host", "kernfs-files", "--dir"]).arg(&dirs).output();
    let stderr = String::from_utf8_lossy(&refused.as_ref().unwrap().stderr).into_owned();
    assert!(!refused.unwrap().status.success() && stderr.contains("runs where its seed ran"), "{stderr}");
}

/// A mount-bench stopped by SIGTERM takes its mounts with it.
#[test]
fn a_stopped_mount_bench_leaves_no_mount() {
    if !common::can_mount("vfscale mount-bench") {
        return;
    }
    let mut child = Command::new(env!("CARGO_BIN_EXE_vfscale"))
        .arg("mount-bench")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let ours = format!("vfscale-mount-bench-{}/", child.id());
    let mounts = || std::fs::read_to_string("/proc/self/mounts").unwrap();
    // Hang guards, far past what a slow machine takes.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    while mounts().matches(&ours).count() < 2 {
        assert!(std::time::Instant::now() < deadline, "mount-bench never mounted:\n{}", mounts());
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    // Into the benchmark, so its threads have requests in flight on the
    // mount: the stop must abort those, not wait for them.
    std::thread::sleep(std::time::Duration::from_millis(300));
    // SAFETY: kill with a live child's pid and a valid signal.
    assert_eq!(unsafe { libc::kill(child.id() as libc::pid_t, libc::SIGTERM) }, 0);
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        assert!(std::time::Instant::now() < deadline, "mount-bench did not end within 60 s of SIGTERM");
        std::thread::sleep(std::time::Duration::from_millis(20));
    };
    assert_eq!(status.code(), Some(128 + libc::SIGTERM), "{status:?}");
    assert!(!mounts().contains(&ours), "left behind:\n{}", mounts());
    assert!(!std::env::temp_dir().join(ours.trim_end_matches('/')).exists());
}
