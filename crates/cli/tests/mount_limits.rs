//! End to end: `vfscale mount DIR --size 8M --inodes 1000`, as a user
//! runs it. Writing 16 MB fails with ENOSPC after 8 MiB, `df` shows the
//! limits, and `rm` gives the space back. Skipped, with the reason printed,
//! where FUSE mounts are not possible (not root, no /dev/fuse), and a
//! failure there under CI.

mod common;
use std::path::Path;
use std::process::{Child, Command};
use std::time::{Duration, Instant};

/// The mount server, unmounted and reaped on drop.
struct Server {
    child: Child,
    dir: std::path::PathBuf,
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = Command::new(env!("CARGO_BIN_EXE_vfscale")).arg("umount").arg(&self.dir).status();
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn mounted(dir: &Path) -> bool {
    let dir = dir.to_str().unwrap();
    std::fs::read_to_string("/proc/self/mounts").unwrap_or_default().lines().any(|l| l.split(' ').nth(1) == Some(dir))
}

/// `df`'s size, used and available 1K-blocks, and total and free inodes.
fn df(dir: &Path) -> (u64, u64, u64, u64, u64) {
    let out = Command::new("df").args(["--output=size,used,avail,itotal,iavail", "-k"]).arg(dir).output().unwrap();
    let text = String::from_utf8(out.stdout).unwrap();
    let nums: Vec<u64> = text.lines().nth(1).unwrap().split_whitespace().map(|n| n.parse().unwrap()).collect();
    (nums[0], nums[1], nums[2], nums[3], nums[4])
}

#[test]
fn size_limit_as_a_user_sees_it() {
    if !common::can_mount("vfscale mount --size") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let child = Command::new(env!("CARGO_BIN_EXE_vfscale"))
        .arg("mount")
        .arg(dir.path())
        .args(["--size", "8M", "--inodes", "1000"])
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let server = Server { child, dir: dir.path().canonicalize().unwrap() };
    let deadline = Instant::now() + Duration::from_secs(60);
    while !mounted(&server.dir) {
        assert!(Instant::now() < deadline, "vfscale mount did not mount {}", server.dir.display());
        std::thread::sleep(Duration::from_millis(20));
    }
    assert_eq!(df(&server.dir), (8192, 0, 8192, 1000, 999));
    let out = Command::new("dd")
        .args(["if=/dev/zero", "bs=1M", "count=16", "status=none"])
        .arg(format!("of={}", server.dir.join("f").display()))
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("No space left on device"), "{out:?}");
    assert_eq!(std::fs::metadata(server.dir.join("f")).unwrap().len(), 8 << 20);
    assert_eq!(df(&server.dir).1, 8192);
    std::fs::remove_file(server.dir.join("f")).unwrap();
    // The kernel sends the FORGET that frees the file after `rm` returns,
    // and the server (another process here) can wait only for forgets it
    // has begun to serve: wait for the space to come back.
    let deadline = Instant::now() + Duration::from_secs(60);
    while df(&server.dir) != (8192, 0, 8192, 1000, 999) && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(10));
    }
    assert_eq!(df(&server.dir), (8192, 0, 8192, 1000, 999));
    let bad = Command::new(env!("CARGO_BIN_EXE_vfscale")).args(["mount", "/nonexistent", "--size", "8MB"]).output();
    assert!(String::from_utf8_lossy(&bad.unwrap().stderr).contains("unknown suffix"));
}
