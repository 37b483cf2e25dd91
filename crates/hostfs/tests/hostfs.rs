//! hostfs against the host: what a walk through the VFS sees of a host
//! directory is what `std::fs` sees of it, and every access is checked
//! with the caller's credentials, never the server's.
//!
//! The host files are made in a temporary directory and given owners with
//! `chown`, which needs root (as the tests run in CI); elsewhere the tests
//! that need other owners say so and pass without checking.

use std::ffi::CString;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::Path;
use std::sync::Arc;
use vfscale::cred::Access;
use vfscale::{
    Credentials, Errno, FileType, MountFlags, MountNamespace, OpenFlags, OpenHow, Process, ResolveFlags, Vfs,
    VfsConfig, AT_FDCWD,
};

const OWNER: u32 = 1000;
const OTHER: u32 = 1001;

fn is_root() -> bool {
    // SAFETY: geteuid has no preconditions.
    unsafe { libc::geteuid() == 0 }
}

fn chown(path: &Path, uid: u32, gid: u32) {
    let c = CString::new(path.as_os_str().as_bytes()).unwrap();
    // SAFETY: `c` is a NUL-terminated path that outlives the call.
    let rc = unsafe { libc::lchown(c.as_ptr(), uid, gid) };
    assert_eq!(rc, 0, "lchown {}: {}", path.display(), std::io::Error::last_os_error());
}

/// The host tree: `secret` (0600, of OWNER), `public` (0644, of root),
/// `sub/inner` (of OTHER), `link -> secret`, `dangling -> nowhere`.
fn host_tree() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    std::fs::write(root.join("secret"), b"the owner's only\n").unwrap();
    std::fs::set_permissions(root.join("secret"), std::fs::Permissions::from_mode(0o600)).unwrap();
    std::fs::write(root.join("public"), b"anyone\n").unwrap();
    std::fs::set_permissions(root.join("public"), std::fs::Permissions::from_mode(0o644)).unwrap();
    std::fs::create_dir(root.join("sub")).unwrap();
    std::fs::write(root.join("sub/inner"), b"inner\n").unwrap();
    std::os::unix::fs::symlink("secret", root.join("link")).unwrap();
    std::os::unix::fs::symlink("nowhere", root.join("dangling")).unwrap();
    std::fs::set_permissions(root, std::fs::Permissions::from_mode(0o755)).unwrap();
    if is_root() {
        chown(&root.join("secret"), OWNER, OWNER);
        chown(&root.join("sub/inner"), OTHER, OTHER);
        chown(&root.join("link"), OWNER, OWNER);
    }
    dir
}

/// A namespace with `/` in memory and the host tree on `/host`; the
/// processes are made in it.
struct Mounted {
    root_fs: Vfs,
    ns: Arc<MountNamespace>,
}

impl Mounted {
    fn new(host: &Path) -> Mounted {
        let root_fs = Vfs::default();
        let ns = root_fs.new_namespace();
        let admin = root_fs.process_in(&ns, Credentials::root());
        admin.mkdir("/host", 0o755).unwrap();
        let fs = vfscale_hostfs::new(host, VfsConfig::default()).unwrap();
        admin.mount(&fs, "hostfs", "/host", MountFlags::NONE).unwrap();
        Mounted { root_fs, ns }
    }

    fn process(&self, cred: Credentials) -> Process {
        self.root_fs.process_in(&self.ns, cred)
    }
}

fn read_all(p: &Process, path: &str) -> Result<Vec<u8>, Errno> {
    let fd = p.open(path, OpenFlags::RDONLY, 0)?;
    let mut out = Vec::new();
    let mut buf = [0u8; 7];
    loop {
        let n = p.read(fd, &mut buf)?;
        if n == 0 {
            break;
        }
        out.extend_from_slice(&buf[..n]);
    }
    p.close(fd)?;
    Ok(out)
}

#[test]
fn a_caller_reads_a_host_file_by_its_own_credentials_not_the_servers() {
    if !is_root() {
        eprintln!("skipped: giving host files other owners needs root");
        return;
    }
    let host = host_tree();
    let m = Mounted::new(host.path());
    // The server reads as root; the caller is someone else, with no
    // capabilities.
    let other = m.process(Credentials::user(OTHER, OTHER, []));
    assert_eq!(other.open("/host/secret", OpenFlags::RDONLY, 0), Err(Errno::EACCES));
    assert_eq!(read_all(&other, "/host/link"), Err(Errno::EACCES), "nor through a symlink");
    assert_eq!(read_all(&other, "/host/public").unwrap(), b"anyone\n");

    let owner = m.process(Credentials::user(OWNER, OWNER, []));
    assert_eq!(read_all(&owner, "/host/secret").unwrap(), b"the owner's only\n");
    assert_eq!(read_all(&owner, "/host/link").unwrap(), b"the owner's only\n");
    // The owner of a directory entry's file may not write it either: the
    // instance is read-only.
    assert_eq!(owner.open("/host/secret", OpenFlags::WRONLY, 0), Err(Errno::EROFS));
    assert_eq!(owner.chmod("/host/secret", 0o644), Err(Errno::EROFS));
}

#[test]
fn stat_shows_the_hosts_owners_modes_sizes_and_times() {
    let host = host_tree();
    let m = Mounted::new(host.path());
    let p = m.process(Credentials::root());
    for name in ["secret", "public", "sub", "sub/inner", "link", "dangling"] {
        let meta = std::fs::symlink_metadata(host.path().join(name)).unwrap();
        let st = p.lstat(format!("/host/{name}")).unwrap();
        assert_eq!(st.mode, meta.mode(), "{name}: mode");
        assert_eq!((st.uid, st.gid), (meta.uid(), meta.gid()), "{name}: owner");
        assert_eq!(st.size, meta.size(), "{name}: size");
        assert_eq!(u64::from(st.nlink), meta.nlink(), "{name}: links");
        assert_eq!((st.mtime.sec, st.mtime.nsec), (meta.mtime(), meta.mtime_nsec()), "{name}: mtime");
        assert_eq!((st.ctime.sec, st.ctime.nsec), (meta.ctime(), meta.ctime_nsec()), "{name}: ctime");
    }
    let meta = std::fs::metadata(host.path()).unwrap();
    let st = p.stat("/host").unwrap();
    assert_eq!((st.mode, st.uid, st.gid), (meta.mode(), meta.uid(), meta.gid()), "the root shows the host directory");
    // stat follows the symlink as the host's does.
    assert_eq!(p.stat("/host/link").unwrap().size, std::fs::metadata(host.path().join("link")).unwrap().size());
}

#[test]
fn readdir_lists_what_the_host_lists() {
    let host = host_tree();
    let m = Mounted::new(host.path());
    let p = m.process(Credentials::user(OTHER, OTHER, []));
    for dir in ["", "sub"] {
        let mut expected: Vec<(Vec<u8>, bool)> = std::fs::read_dir(host.path().join(dir))
            .unwrap()
            .map(|e| {
                let e = e.unwrap();
                (e.file_name().as_bytes().to_vec(), e.file_type().unwrap().is_dir())
            })
            .collect();
        expected.sort();
        let listed: Vec<(Vec<u8>, bool)> = p
            .list_dir(format!("/host/{dir}"))
            .unwrap()
            .into_iter()
            .filter(|e| e.name != b"." && e.name != b"..")
            .map(|e| (e.name, e.file_type == FileType::Directory))
            .collect();
        assert_eq!(listed, expected, "/host/{dir}");
    }
}

#[test]
fn readlink_and_missing_names_match_the_host() {
    let host = host_tree();
    let m = Mounted::new(host.path());
    let p = m.process(Credentials::user(OTHER, OTHER, []));
    for name in ["link", "dangling"] {
        let target = std::fs::read_link(host.path().join(name)).unwrap();
        assert_eq!(p.readlink(format!("/host/{name}")).unwrap(), target.as_os_str().as_bytes(), "{name}");
    }
    assert_eq!(p.readlink("/host/public"), Err(Errno::EINVAL), "not a symlink");
    assert_eq!(
        std::fs::symlink_metadata(host.path().join("missing")).unwrap_err().kind(),
        std::io::ErrorKind::NotFound
    );
    assert_eq!(p.stat("/host/missing"), Err(Errno::ENOENT));
    assert_eq!(p.stat("/host/sub/missing/deeper"), Err(Errno::ENOENT));
    assert_eq!(p.stat("/host/dangling"), Err(Errno::ENOENT), "a dangling symlink");
    assert_eq!(p.stat("/host/public/x"), Err(Errno::ENOTDIR));
}

#[test]
fn every_change_is_erofs() {
    let host = host_tree();
    let m = Mounted::new(host.path());
    let p = m.process(Credentials::root());
    assert_eq!(p.mkdir("/host/new", 0o755), Err(Errno::EROFS));
    assert_eq!(p.open("/host/new", OpenFlags::CREAT | OpenFlags::WRONLY, 0o644), Err(Errno::EROFS));
    assert_eq!(p.open("/host/public", OpenFlags::RDWR, 0), Err(Errno::EROFS));
    assert_eq!(p.unlink("/host/public"), Err(Errno::EROFS));
    assert_eq!(p.rmdir("/host/sub"), Err(Errno::EROFS));
    assert_eq!(p.rename("/host/public", "/host/moved"), Err(Errno::EROFS));
    assert_eq!(p.symlink("x", "/host/newlink"), Err(Errno::EROFS));
    assert_eq!(p.chown("/host/public", Some(1), None), Err(Errno::EROFS));
    assert_eq!(p.truncate("/host/public", 0), Err(Errno::EROFS));
    assert_eq!(p.setxattr("/host/public", b"user.x", b"1", 0), Err(Errno::EROFS));
    assert_eq!(p.access("/host/public", Access::WRITE), Err(Errno::EROFS));
    assert_eq!(p.access("/host/public", Access::READ), Ok(()));
    assert_eq!(std::fs::read(host.path().join("public")).unwrap(), b"anyone\n", "the host file is untouched");
    assert!(!host.path().join("new").exists());
}

/// A name that exists is EEXIST before the instance is found read-only,
/// as on a read-only tmpfs (`filename_create` looks the name up first),
/// whether or not a walk has cached it yet.
#[test]
fn an_existing_name_is_eexist_before_erofs() {
    let host = host_tree();
    let m = Mounted::new(host.path());
    let p = m.process(Credentials::root());
    assert_eq!(p.mkdir("/host/sub", 0o755), Err(Errno::EEXIST));
    assert_eq!(p.mkdir("/host/public", 0o755), Err(Errno::EEXIST));
    assert_eq!(p.mkdir("/host/dangling", 0o755), Err(Errno::EEXIST));
    assert_eq!(p.mkdir("/host/public/", 0o755), Err(Errno::EEXIST));
    assert_eq!(p.symlink("x", "/host/public"), Err(Errno::EEXIST));
    assert_eq!(p.mknod("/host/public", libc::S_IFIFO | 0o644, 0), Err(Errno::EEXIST));
    assert_eq!(p.link("/host/public", "/host/sub"), Err(Errno::EEXIST));
    assert_eq!(p.link("/host/public", "/host/new"), Err(Errno::EROFS));
    assert_eq!(p.mkdir("/host/sub/new", 0o755), Err(Errno::EROFS));
}

#[test]
fn a_host_change_is_seen_by_the_next_walk() {
    let host = host_tree();
    let m = Mounted::new(host.path());
    let p = m.process(Credentials::root());
    assert_eq!(p.stat("/host/public").unwrap().size, 7);
    std::fs::write(host.path().join("public"), b"anyone at all\n").unwrap();
    assert_eq!(p.stat("/host/public").unwrap().size, 14);
    assert_eq!(read_all(&p, "/host/public").unwrap(), b"anyone at all\n");
    std::fs::remove_file(host.path().join("public")).unwrap();
    assert_eq!(p.stat("/host/public"), Err(Errno::ENOENT));
    std::fs::write(host.path().join("late"), b"").unwrap();
    assert_eq!(p.stat("/host/late").unwrap().size, 0, "a name made after a miss");
}

#[test]
fn a_missing_or_non_directory_host_path_is_refused() {
    let host = host_tree();
    assert_eq!(vfscale_hostfs::new(host.path().join("missing"), VfsConfig::default()).err(), Some(Errno::ENOENT));
    assert_eq!(vfscale_hostfs::new(host.path().join("public"), VfsConfig::default()).err(), Some(Errno::ENOTDIR));
}

/// Revalidating a host name needs a host `lstat`, which rcu-walk may not
/// make: a walk that must finish in rcu-walk cannot, and says so.
#[test]
fn a_walk_into_the_host_leaves_rcu_walk() {
    let host = host_tree();
    let m = Mounted::new(host.path());
    let p = m.process(Credentials::root());
    p.stat("/host/public").unwrap();
    let how = OpenHow { flags: OpenFlags::RDONLY, mode: 0, resolve: ResolveFlags::CACHED };
    assert_eq!(p.openat2(AT_FDCWD, "/host/public", &how), Err(Errno::EAGAIN));
    // Beside it, a name in memory is resolved from the dcache alone.
    p.close(p.open("/local", OpenFlags::CREAT | OpenFlags::WRONLY, 0o644).unwrap()).unwrap();
    let fd = p.openat2(AT_FDCWD, "/local", &how).unwrap();
    p.close(fd).unwrap();
}
