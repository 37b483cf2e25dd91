//! End to end: SIGTERM to `vfscale mount DIR` while a file on it is open.
//! The mount is detached at once (no dead mount stays behind, the mount
//! point is free), the open file goes on working, and when it is closed
//! the server exits with status 0. Skipped, with the reason printed, where
//! FUSE mounts are not possible, and a failure there under CI.

mod common;
use std::io::{Read, Seek, SeekFrom, Write};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

fn mounted(dir: &Path) -> bool {
    let dir = dir.to_str().unwrap();
    std::fs::read_to_string("/proc/self/mounts").unwrap_or_default().lines().any(|l| l.split(' ').nth(1) == Some(dir))
}

/// Waits until `done` holds; the minute is a hang guard only.
fn wait_for(what: &str, mut done: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(60);
    while !done() {
        assert!(Instant::now() < deadline, "{what}: not within a minute");
        std::thread::sleep(Duration::from_millis(10));
    }
}

#[test]
fn sigterm_on_a_busy_mount_detaches_it_and_exits_zero_once_it_is_idle() {
    if !common::can_mount("vfscale mount, then SIGTERM") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().canonicalize().unwrap();
    let mut child =
        Command::new(env!("CARGO_BIN_EXE_vfscale")).arg("mount").arg(&path).stderr(Stdio::null()).spawn().unwrap();
    wait_for("the mount", || mounted(&path));
    let mut file =
        std::fs::OpenOptions::new().create(true).truncate(true).read(true).write(true).open(path.join("f")).unwrap();
    file.write_all(b"before").unwrap();
    // SAFETY: kill(2) on the server this test spawned.
    assert_eq!(unsafe { libc::kill(child.id() as i32, libc::SIGTERM) }, 0);
    wait_for("the lazy detach", || !mounted(&path));
    assert!(child.try_wait().unwrap().is_none(), "the server exited while a file was open");
    // The open file is still served.
    file.write_all(b" after").unwrap();
    let mut back = String::new();
    file.seek(SeekFrom::Start(0)).unwrap();
    file.read_to_string(&mut back).unwrap();
    assert_eq!(back, "before after");
    drop(file);
    let mut status = None;
    wait_for("the server's exit after the last close", || {
        status = child.try_wait().unwrap();
        status.is_some()
    });
    assert!(status.unwrap().success(), "exit status {:?}", status);
    assert!(!mounted(&path));
}
