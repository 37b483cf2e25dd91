//! End to end: `vfscale mount DIR --bind-ro HOSTDIR:PATH`, as a user runs
//! it. A bad `--bind-ro` is refused with a one-line error naming the
//! problem and exit status 2, and nothing is mounted; a good one shows the
//! host directory at PATH (beside `--demo`'s trees) with the host's
//! contents, owners and modes, live, checks each caller's permission, and
//! refuses changes with EROFS. The mounting cases are skipped, with the
//! reason printed, where FUSE mounts are not possible (not root, no
//! /dev/fuse), and a failure there under CI.

mod common;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// The mount server, unmounted and reaped on drop.
struct Server {
    child: Child,
    dir: PathBuf,
}

impl Drop for Server {
    fn drop(&mut self) {
        if self.child.try_wait().ok().flatten().is_none() {
            let _ = Command::new(env!("CARGO_BIN_EXE_vfscale")).arg("umount").arg(&self.dir).status();
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

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

/// Runs `vfscale mount DIR ARGS...` on a fresh empty directory, which
/// must fail: returns its standard error, after checking that it exited
/// with status 2 and left nothing mounted. A server that mounts after
/// all is unmounted and fails the test.
fn refused(args: &[&str]) -> String {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("mnt");
    std::fs::create_dir(&dir).unwrap();
    let log = tmp.path().join("stderr");
    let child = Command::new(env!("CARGO_BIN_EXE_vfscale"))
        .arg("mount")
        .arg(&dir)
        .args(args)
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(&log).unwrap())
        .spawn()
        .unwrap();
    let mut server = Server { child, dir };
    let mut status = None;
    wait_for("the refusal", || {
        status = server.child.try_wait().unwrap();
        status.is_some() || mounted(&server.dir)
    });
    let stderr = std::fs::read_to_string(&log).unwrap();
    assert!(!mounted(&server.dir), "`vfscale mount {args:?}` mounted:\n{stderr}");
    assert_eq!(status.unwrap().code(), Some(2), "`vfscale mount {args:?}`:\n{stderr}");
    stderr
}

#[test]
fn bad_binds_are_refused_with_the_reason_and_nothing_is_mounted() {
    let host = tempfile::tempdir().unwrap();
    let h = host.path().to_str().unwrap();
    let file = host.path().join("file");
    std::fs::write(&file, "x").unwrap();
    let missing = host.path().join("missing");
    let cases: Vec<(String, &str)> = vec![
        (h.to_string(), "no ':' between HOSTDIR and PATH"),
        (":/host".into(), "HOSTDIR (before the ':') is empty"),
        (format!("{h}:"), "PATH (after the ':') is empty"),
        (format!("{h}:host"), "PATH 'host' is not absolute"),
        (format!("{h}:/"), "served tree's root"),
        (format!("{h}:/a/../b"), "'.' or '..'"),
        (format!("{}:/host", missing.display()), "does not exist"),
        (format!("{}:/host", file.display()), "is not a directory"),
    ];
    for (value, why) in &cases {
        let stderr = refused(&["--bind-ro", value]);
        assert!(stderr.contains("--bind-ro <HOSTDIR:PATH>") && stderr.contains(why), "{value}: {stderr}");
    }
    let twice = refused(&["--bind-ro", &format!("{h}:/h"), "--bind-ro", &format!("{h}:/h/")]);
    assert!(twice.contains("PATH /h is given twice"), "{twice}");
    let demo = refused(&["--demo", "--bind-ro", &format!("{h}:/proc/host")]);
    assert!(demo.contains("where --demo mounts procfs"), "{demo}");
}

#[test]
fn a_bind_that_cannot_be_made_in_the_served_tree_is_refused() {
    if !common::can_mount("vfscale mount --bind-ro, a PATH that cannot be made") {
        return;
    }
    let host = tempfile::tempdir().unwrap();
    std::fs::write(host.path().join("file"), "x").unwrap();
    let h = host.path().canonicalize().unwrap();
    let h = h.to_str().unwrap();
    // /outer is read-only and has no `missing` to mount on.
    let stderr = refused(&["--bind-ro", &format!("{h}:/outer"), "--bind-ro", &format!("{h}:/outer/missing")]);
    assert_eq!(
        stderr.trim(),
        format!(
            "vfscale: cannot mount {h} read-only on /outer/missing of the served tree: EROFS: Read-only file system"
        )
    );
    // /outer/file is there, but not a directory.
    let stderr = refused(&["--bind-ro", &format!("{h}:/outer"), "--bind-ro", &format!("{h}:/outer/file")]);
    assert_eq!(
        stderr.trim(),
        format!("vfscale: cannot mount {h} read-only on /outer/file of the served tree: ENOTDIR: Not a directory")
    );
}

#[test]
fn a_bound_host_directory_shows_the_hosts_files_and_refuses_changes() {
    if !common::can_mount("vfscale mount --demo --bind-ro") {
        return;
    }
    let host = tempfile::tempdir().unwrap();
    std::fs::set_permissions(host.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    let secret = host.path().join("secret");
    std::fs::write(&secret, "for 1234 and group 2345\n").unwrap();
    std::fs::set_permissions(&secret, std::fs::Permissions::from_mode(0o640)).unwrap();
    std::os::unix::fs::chown(&secret, Some(1234), Some(2345)).unwrap();
    let public = host.path().join("public");
    std::fs::write(&public, "for all\n").unwrap();
    std::fs::set_permissions(&public, std::fs::Permissions::from_mode(0o644)).unwrap();

    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().canonicalize().unwrap();
    let bind = format!("{}:/host", host.path().display());
    let child = Command::new(env!("CARGO_BIN_EXE_vfscale"))
        .arg("mount")
        .arg(&path)
        .args(["--demo", "--allow-other", "--bind-ro", &bind])
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut server = Server { child, dir: path.clone() };
    wait_for("the mount", || mounted(&path));

    // The host's files, owners and modes; the demo trees beside them.
    let bound = path.join("host");
    assert_eq!(std::fs::read_to_string(bound.join("secret")).unwrap(), "for 1234 and group 2345\n");
    let meta = std::fs::metadata(bound.join("secret")).unwrap();
    assert_eq!((meta.mode() & 0o7777, meta.uid(), meta.gid()), (0o640, 1234, 2345));
    assert_eq!(std::fs::metadata(bound.join("public")).unwrap().mode() & 0o7777, 0o644);
    assert_eq!(std::fs::metadata(&bound).unwrap().mode() & 0o7777, 0o755, "the host directory's own mode");
    assert!(path.join("sys/fs/vfscale").is_dir() && path.join("proc").is_dir());
    // Live: a change on the host shows at the next read.
    std::fs::write(&public, "for all, changed\n").unwrap();
    assert_eq!(std::fs::read_to_string(bound.join("public")).unwrap(), "for all, changed\n");

    // Changes are EROFS, as Linux reports them for a read-only mount.
    let errno = |r: std::io::Result<()>| r.unwrap_err().raw_os_error();
    assert_eq!(errno(std::fs::File::create(bound.join("new")).map(drop)), Some(libc::EROFS));
    assert_eq!(errno(std::fs::OpenOptions::new().write(true).open(bound.join("public")).map(drop)), Some(libc::EROFS));
    assert_eq!(errno(std::fs::create_dir(bound.join("dir"))), Some(libc::EROFS));
    assert_eq!(errno(std::fs::remove_file(bound.join("public"))), Some(libc::EROFS));
    assert_eq!(std::fs::read_to_string(&public).unwrap(), "for all, changed\n", "the host file is untouched");
    // The served tree around the bind stays writable.
    std::fs::write(path.join("top"), "t").unwrap();

    // Another user reads what the host's modes let them read, and no more.
    let cat = |file: &str| {
        Command::new("cat").arg(bound.join(file)).uid(65534).gid(65534).stdout(Stdio::piped()).output().unwrap()
    };
    let public_out = cat("public");
    assert!(public_out.status.success(), "{public_out:?}");
    assert_eq!(public_out.stdout, b"for all, changed\n");
    let secret_out = cat("secret");
    assert!(!secret_out.status.success(), "{secret_out:?}");
    assert!(String::from_utf8_lossy(&secret_out.stderr).contains("Permission denied"), "{secret_out:?}");

    let umount = Command::new(env!("CARGO_BIN_EXE_vfscale")).arg("umount").arg(&path).status().unwrap();
    assert!(umount.success());
    let mut status = None;
    wait_for("the server's exit after umount", || {
        status = server.child.try_wait().unwrap();
        status.is_some()
    });
    assert!(status.unwrap().success(), "exit status {status:?}");
}
