//! End to end: SIGKILL to `vfscale mount DIR` while clients write and
//! read files on it. The kernel ends the connection with the server's last
//! device fd, so every client call returns, failing (ENOTCONN, or
//! ECONNABORTED for one in flight), and none hangs; the dead mount stays
//! until it is unmounted (`umount -l`), which the test then does.
//!
//! `MOUNT_KILL_RUNS` runs (3 by default), alternating the io_uring queues
//! (where the kernel offers them) and `/dev/fuse`. Skipped, with the
//! reason printed, where FUSE mounts are not possible, and a failure there
//! under CI.

mod common;
use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{mpsc, Arc};
use std::time::{Duration, Instant};

/// Client threads per run.
const CLIENTS: usize = 4;

/// The hang guard: far past what any wait here takes on a slow machine.
const GUARD: Duration = Duration::from_secs(60);

fn mounted(dir: &Path) -> bool {
    let dir = dir.to_str().unwrap();
    std::fs::read_to_string("/proc/self/mounts").unwrap_or_default().lines().any(|l| l.split(' ').nth(1) == Some(dir))
}

/// Waits until `done` holds; the guard only stops a bug from hanging.
fn wait_for(what: &str, mut done: impl FnMut() -> bool) {
    let deadline = Instant::now() + GUARD;
    while !done() {
        assert!(Instant::now() < deadline, "{what}: not within a minute");
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// `umount2(dir, flags)`.
fn umount(dir: &Path, flags: libc::c_int) -> std::io::Result<()> {
    let path = std::ffi::CString::new(dir.as_os_str().as_encoded_bytes()).unwrap();
    // SAFETY: `path` is NUL-terminated and outlives the call.
    if unsafe { libc::umount2(path.as_ptr(), flags) } == 0 {
        Ok(())
    } else {
        Err(std::io::Error::last_os_error())
    }
}

/// A client: writes its file and reads it back, over and over, counting
/// rounds, until a call fails; returns that call's error.
fn client(dir: PathBuf, id: usize, rounds: Arc<AtomicU64>) -> std::io::Error {
    let path = dir.join(format!("client-{id}"));
    let data: Vec<u8> = (0..8192).map(|i| (i * 7 + id) as u8).collect();
    loop {
        let written = std::fs::OpenOptions::new()
            .create(true)
            .truncate(true)
            .write(true)
            .open(&path)
            .and_then(|mut f| f.write_all(&data));
        if let Err(e) = written {
            return e;
        }
        let mut back = Vec::new();
        match std::fs::File::open(&path).and_then(|mut f| f.read_to_end(&mut back)) {
            Err(e) => return e,
            Ok(_) => assert_eq!(back, data, "client {id} read back what it did not write"),
        }
        if let Err(e) = std::fs::read_dir(&dir).map(|entries| entries.count()) {
            return e;
        }
        rounds.fetch_add(1, Ordering::Relaxed);
    }
}

/// A client's end: its number, and the errno and text of the call that
/// failed.
type End = (usize, Option<i32>, String);

/// One run: mount, clients busy, SIGKILL, every client's call returns.
/// Returns how the clients ended.
fn run(io_uring: bool) -> Vec<End> {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().canonicalize().unwrap();
    let mut server = Command::new(env!("CARGO_BIN_EXE_vfscale"));
    server.arg("mount").arg(&dir).stderr(Stdio::null());
    if !io_uring {
        server.arg("--no-io-uring");
    }
    let mut server = server.spawn().unwrap();
    wait_for("the mount", || mounted(&dir));
    let rounds: Vec<Arc<AtomicU64>> = (0..CLIENTS).map(|_| Arc::default()).collect();
    let (ended, ends) = mpsc::channel();
    for (id, count) in rounds.iter().enumerate() {
        let (dir, count, ended) = (dir.clone(), Arc::clone(count), ended.clone());
        std::thread::spawn(move || {
            let _ = ended.send((id, client(dir, id, count)));
        });
    }
    drop(ended);
    // Every client busy before the kill, so the kill lands among calls.
    wait_for("every client's first rounds", || rounds.iter().all(|r| r.load(Ordering::Relaxed) >= 3));
    // SAFETY: kill(2) on the server this test spawned.
    assert_eq!(unsafe { libc::kill(server.id() as i32, libc::SIGKILL) }, 0);
    let _ = server.wait();
    let deadline = Instant::now() + GUARD;
    let mut errors = Vec::new();
    while errors.len() < CLIENTS {
        match ends.recv_timeout(deadline.saturating_duration_since(Instant::now())) {
            Ok((id, e)) => errors.push((id, e.raw_os_error(), e.to_string())),
            Err(_) => {
                // Hung clients would hold this process until the
                // connection ends: a forced unmount aborts it.
                let _ = umount(&dir, libc::MNT_FORCE);
                let _ = umount(&dir, libc::MNT_DETACH);
                panic!("{} of {CLIENTS} clients hung after the kill: {errors:?}", CLIENTS - errors.len());
            }
        }
    }
    // The dead mount stays, answering ENOTCONN, until it is unmounted.
    let probe = std::fs::metadata(&dir).map(|_| ()).map_err(|e| e.raw_os_error());
    assert!(mounted(&dir), "the killed server's mount is gone");
    assert_eq!(probe, Err(Some(libc::ENOTCONN)), "a call on the dead mount");
    umount(&dir, libc::MNT_DETACH).expect("umount -l of the dead mount");
    assert!(!mounted(&dir));
    errors
}

fn errno_name(errno: Option<i32>) -> &'static str {
    match errno {
        Some(libc::ENOTCONN) => "ENOTCONN",
        Some(libc::ECONNABORTED) => "ECONNABORTED",
        Some(libc::ECANCELED) => "ECANCELED",
        _ => "other",
    }
}

#[test]
fn sigkill_while_clients_write_and_read_leaves_no_client_hanging() {
    if !common::can_mount("vfscale mount, then SIGKILL") {
        return;
    }
    let runs: usize = std::env::var("MOUNT_KILL_RUNS").ok().and_then(|n| n.parse().ok()).unwrap_or(3);
    let io_uring_offered =
        std::fs::read_to_string("/sys/module/fuse/parameters/enable_uring").is_ok_and(|v| v.trim() == "Y");
    for i in 0..runs {
        let io_uring = io_uring_offered && i % 2 == 0;
        let errors = run(io_uring);
        let transport = if io_uring { "io_uring" } else { "/dev/fuse" };
        let names: Vec<&str> = errors.iter().map(|(_, errno, _)| errno_name(*errno)).collect();
        eprintln!("run {}/{runs} ({transport}): all {CLIENTS} clients returned: {}", i + 1, names.join(" "));
        // The lost connection: ENOTCONN, or for a call in flight
        // ECONNABORTED, or ECANCELED where its io_uring queue closed.
        let lost = [libc::ENOTCONN, libc::ECONNABORTED, libc::ECANCELED];
        assert!(
            errors.iter().all(|(_, errno, _)| errno.is_some_and(|n| lost.contains(&n))),
            "a client failed otherwise than by the lost connection: {errors:?}"
        );
    }
}
