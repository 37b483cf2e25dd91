//! Mounts and mount namespaces: walks across mount points and back up
//! through `..`, stacked, bind and recursive bind mounts, per-mount flags,
//! `umount` busy and lazy, the per-mount errors (EXDEV, EROFS, EBUSY) in
//! Linux's order, `unshare`, `statfs` and `mountinfo`, and walks racing
//! `mount` and `umount`.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use vfscale::kernfs::{Kernfs, KernfsConfig};
use vfscale::procfs::{ProcConfig, Procfs, TaskInfo};
use vfscale::{
    AtFlags, Credentials, Errno, MountFlags, OpenFlags, OpenHow, Process, RenameFlags, ResolveFlags, SetTime, Timespec,
    UmountFlags, Vfs, VfsResult, AT_FDCWD,
};

/// A namespace whose root is an in-memory filesystem with `/mnt`, `/a/b`
/// and the file `/a/b/f`, and a root process in it.
fn namespace() -> (Vfs, Process) {
    let root_fs = Vfs::default();
    let ns = root_fs.new_namespace();
    let p = root_fs.process_in(&ns, Credentials::root());
    for dir in ["/mnt", "/a", "/a/b"] {
        p.mkdir(dir, 0o755).unwrap();
    }
    write(&p, "/a/b/f", b"under");
    (root_fs, p)
}

fn write(p: &Process, path: &str, data: &[u8]) {
    let fd = p.open(path, OpenFlags::CREAT | OpenFlags::WRONLY | OpenFlags::TRUNC, 0o644).unwrap();
    p.write(fd, data).unwrap();
    p.close(fd).unwrap();
}

fn read(p: &Process, path: &str) -> VfsResult<Vec<u8>> {
    let fd = p.open(path, OpenFlags::RDONLY, 0)?;
    let mut buf = vec![0; 64];
    let n = p.read(fd, &mut buf)?;
    p.close(fd)?;
    buf.truncate(n);
    Ok(buf)
}

/// An in-memory filesystem holding `hello` = "from other".
fn other_fs() -> Vfs {
    let fs = Vfs::default();
    let p = fs.process(Credentials::root());
    write(&p, "/hello", b"from other");
    p.mkdir("/sub", 0o755).unwrap();
    fs
}

#[test]
fn a_walk_crosses_a_mount_point_and_dotdot_climbs_back() {
    let (_root, p) = namespace();
    let covered = p.stat("/mnt").unwrap();
    p.mount(&other_fs(), "tmpfs", "/mnt", MountFlags::NONE).unwrap();
    assert_eq!(read(&p, "/mnt/hello").unwrap(), b"from other");
    assert_ne!(p.stat("/mnt").unwrap().ino, covered.ino, "the mount's root covers the directory");
    assert_eq!(p.stat("/mnt/..").unwrap().ino, p.stat("/").unwrap().ino);
    assert_eq!(p.stat("/mnt/sub/../../a/b/f").unwrap().size, 5);
    p.chdir("/mnt/sub").unwrap();
    assert_eq!(read(&p, "../hello").unwrap(), b"from other");
    assert_eq!(p.stat("../../a").unwrap().ino, p.stat("/a").unwrap().ino);
    // A symlink in one mount leads into another.
    p.symlink("/a/b", "/mnt/to-b").unwrap();
    assert_eq!(read(&p, "/mnt/to-b/f").unwrap(), b"under");
    p.chdir("/").unwrap();
    p.umount2("/mnt", UmountFlags::NONE).unwrap();
    assert_eq!(p.stat("/mnt").unwrap().ino, covered.ino);
    assert_eq!(p.stat("/mnt/hello"), Err(Errno::ENOENT));
}

#[test]
fn mounts_stack_and_unmount_from_the_top() {
    let (_root, p) = namespace();
    let (first, second) = (other_fs(), Vfs::default());
    p.mount(&first, "first", "/mnt", MountFlags::NONE).unwrap();
    p.mount(&second, "second", "/mnt", MountFlags::NONE).unwrap();
    assert_eq!(p.stat("/mnt/hello"), Err(Errno::ENOENT), "the second mount hides the first");
    assert_eq!(p.stat("/mnt/..").unwrap().ino, p.stat("/").unwrap().ino, "`..` climbs the whole stack");
    p.umount2("/mnt", UmountFlags::NONE).unwrap();
    assert_eq!(read(&p, "/mnt/hello").unwrap(), b"from other");
    p.umount2("/mnt", UmountFlags::NONE).unwrap();
    assert_eq!(p.stat("/mnt/hello"), Err(Errno::ENOENT));
    assert_eq!(p.umount2("/mnt", UmountFlags::NONE), Err(Errno::EINVAL), "not a mount root");
}

#[test]
fn bind_mounts_show_one_tree_twice_and_rbind_copies_submounts() {
    let (_root, p) = namespace();
    p.mount(&other_fs(), "tmpfs", "/a/b", MountFlags::NONE).unwrap();
    p.mkdir("/plain", 0o755).unwrap();
    p.mkdir("/rec", 0o755).unwrap();
    p.bind_mount("/a", "/plain", false).unwrap();
    p.bind_mount("/a", "/rec", true).unwrap();
    assert_eq!(read(&p, "/plain/b/f").unwrap(), b"under", "a plain bind copies no submount");
    assert_eq!(read(&p, "/rec/b/hello").unwrap(), b"from other", "a recursive bind copies them");
    // One tree: a change through one path shows through the other.
    write(&p, "/plain/new", b"x");
    assert_eq!(p.stat("/a/new").unwrap().ino, p.stat("/plain/new").unwrap().ino);
    // A file bind mount.
    write(&p, "/a/target", b"t");
    p.bind_mount("/a/b/hello", "/a/target", false).unwrap();
    assert_eq!(read(&p, "/a/target").unwrap(), b"from other");
    assert_eq!(p.bind_mount("/a/b/hello", "/mnt", false), Err(Errno::ENOTDIR), "a file on a directory");
    assert_eq!(p.bind_mount("/mnt", "/a/target", false), Err(Errno::ENOTDIR), "a directory on a file");
}

#[test]
fn a_read_only_mount_refuses_changes_in_linux_order() {
    let (_root, p) = namespace();
    p.mkdir("/ro", 0o755).unwrap();
    p.bind_mount("/a", "/ro", false).unwrap();
    p.remount("/ro", MountFlags::RDONLY).unwrap();
    assert_eq!(read(&p, "/ro/b/f").unwrap(), b"under");
    assert_eq!(p.mkdir("/ro/new", 0o755), Err(Errno::EROFS));
    assert_eq!(p.mkdir("/ro/b", 0o755), Err(Errno::EEXIST), "filename_create: EEXIST first");
    assert_eq!(p.unlink("/ro/missing"), Err(Errno::EROFS), "do_unlinkat: EROFS before the lookup");
    assert_eq!(p.unlink("/ro/b/f"), Err(Errno::EROFS));
    assert_eq!(p.rmdir("/ro/b"), Err(Errno::EROFS));
    assert_eq!(p.rename("/ro/b/f", "/ro/b/g"), Err(Errno::EROFS));
    assert_eq!(p.chmod("/ro/b/f", 0o600), Err(Errno::EROFS));
    assert_eq!(p.truncate("/ro/b/f", 0), Err(Errno::EROFS));
    assert_eq!(p.truncate("/ro/b", 0), Err(Errno::EISDIR), "vfs_truncate: the type first");
    assert_eq!(p.setxattr("/ro/b/f", b"user.x", b"1", 0), Err(Errno::EROFS));
    assert_eq!(p.open("/ro/b/f", OpenFlags::WRONLY, 0), Err(Errno::EROFS));
    assert_eq!(p.open("/ro/b/f", OpenFlags::RDONLY | OpenFlags::TRUNC, 0), Err(Errno::EROFS));
    assert_eq!(p.open("/ro/b/g", OpenFlags::CREAT | OpenFlags::WRONLY, 0o644), Err(Errno::EROFS));
    assert_eq!(p.access("/ro/b/f", vfscale::cred::Access::WRITE), Err(Errno::EROFS));
    let user = p.vfs().process_in(&namespace_of(&p), Credentials::user(1000, 1000, []));
    assert_eq!(user.open("/ro/b/f", OpenFlags::WRONLY, 0), Err(Errno::EACCES), "permission before the mount");
    // The source mount is still writable; remount makes the bind writable.
    write(&p, "/a/b/f", b"changed");
    p.remount("/ro", MountFlags::NONE).unwrap();
    write(&p, "/ro/b/f", b"again");
    assert_eq!(read(&p, "/a/b/f").unwrap(), b"again");
    assert_eq!(p.statfs("/ro").unwrap().flags, MountFlags::NONE);
    p.remount("/ro", MountFlags::RDONLY | MountFlags::NOSUID).unwrap();
    assert_eq!(p.statfs("/ro/b").unwrap().flags, MountFlags::RDONLY | MountFlags::NOSUID);
    assert_eq!(p.statfs("/a").unwrap().flags, MountFlags::NONE);
}

/// The namespace `p` is in, for another process to join.
fn namespace_of(p: &Process) -> Arc<vfscale::MountNamespace> {
    p.mount_namespace().expect("in a namespace")
}

#[test]
fn nodev_and_noexec_refuse_devices_and_programs() {
    let (_root, p) = namespace();
    p.mknod("/a/null", libc::S_IFCHR | 0o666, libc::makedev(1, 3)).unwrap();
    write(&p, "/a/prog", b"#!");
    p.chmod("/a/prog", 0o755).unwrap();
    p.mkdir("/safe", 0o755).unwrap();
    p.bind_mount("/a", "/safe", false).unwrap();
    p.remount("/safe", MountFlags::NODEV | MountFlags::NOEXEC).unwrap();
    assert_eq!(p.open("/safe/null", OpenFlags::RDWR, 0), Err(Errno::EACCES));
    assert_eq!(p.open("/a/null", OpenFlags::RDWR, 0), Err(Errno::ENXIO), "no driver, but allowed");
    assert_eq!(p.access("/safe/prog", vfscale::cred::Access::EXEC), Err(Errno::EACCES));
    assert_eq!(p.access("/a/prog", vfscale::cred::Access::EXEC), Ok(()));
    assert_eq!(p.access("/safe", vfscale::cred::Access::EXEC), Ok(()), "directories are searched");
}

#[test]
fn a_bind_reports_the_targets_errors_then_eperm_then_the_sources() {
    let (_root, p) = namespace();
    // path_mount walks to the target, checks the capability, and only then
    // does do_loopback walk to the source.
    assert_eq!(p.bind_mount("/missing", "/a/b/f/x", false), Err(Errno::ENOTDIR));
    assert_eq!(p.bind_mount("/a/b/f/x", "/missing", true), Err(Errno::ENOENT));
    let user = p.vfs().process_in(&namespace_of(&p), Credentials::user(1000, 1000, []));
    assert_eq!(user.bind_mount("/missing", "/mnt", false), Err(Errno::EPERM));
    assert_eq!(user.bind_mount("/a", "/missing", false), Err(Errno::ENOENT));
}

#[test]
fn a_remount_read_only_is_ebusy_while_a_file_is_open_for_writing() {
    let (_root, p) = namespace();
    p.mkdir("/w", 0o755).unwrap();
    p.bind_mount("/a", "/w", false).unwrap();
    let reading = p.open("/w/b/f", OpenFlags::RDONLY, 0).unwrap();
    let writing = p.open("/w/b/f", OpenFlags::WRONLY, 0).unwrap();
    assert_eq!(p.remount("/w", MountFlags::RDONLY), Err(Errno::EBUSY), "mnt_make_readonly: a writer");
    assert_eq!(p.statfs("/w").unwrap().flags, MountFlags::NONE, "nothing changed");
    p.remount("/w", MountFlags::NOEXEC).unwrap();
    // The writer counts on the mount it was opened through only.
    p.remount("/", MountFlags::RDONLY).unwrap();
    p.remount("/", MountFlags::NONE).unwrap();
    let created = p.open("/w/new", OpenFlags::CREAT | OpenFlags::RDWR, 0o644).unwrap();
    p.close(writing).unwrap();
    assert_eq!(p.remount("/w", MountFlags::RDONLY), Err(Errno::EBUSY), "a file created for writing");
    p.close(created).unwrap();
    p.remount("/w", MountFlags::RDONLY).unwrap();
    assert_eq!(p.open("/w/b/f", OpenFlags::WRONLY, 0), Err(Errno::EROFS));
    p.close(reading).unwrap();
}

/// A read through a read-only mount leaves the access time as it is (Linux
/// `touch_atime` skips the update when it cannot get the mount's write
/// access); the same read through the mount made writable again updates
/// it.
#[test]
fn a_read_on_a_read_only_mount_keeps_the_access_time() {
    let (_root, p) = namespace();
    let old = Timespec { sec: 1, nsec: 0 };
    p.utimens("/a/b/f", SetTime::At(old), SetTime::Omit).unwrap();
    p.remount("/", MountFlags::RDONLY).unwrap();
    let fd = p.open("/a/b/f", OpenFlags::RDONLY, 0).unwrap();
    let mut buf = [0u8; 5];
    assert_eq!(p.pread(fd, &mut buf, 0), Ok(5));
    assert_eq!(p.stat("/a/b/f").unwrap().atime, old, "an access time written through a read-only mount");
    p.remount("/", MountFlags::NONE).unwrap();
    assert_eq!(p.pread(fd, &mut buf, 0), Ok(5));
    assert!(p.stat("/a/b/f").unwrap().atime > old, "a day-old access time left as it was");
    p.close(fd).unwrap();
}

#[test]
fn an_open_with_o_creat_of_an_existing_name_crosses_the_mount_on_it() {
    let (_root, p) = namespace();
    p.mount(&other_fs(), "tmpfs", "/mnt", MountFlags::NONE).unwrap();
    write(&p, "/a/target", b"covered");
    p.bind_mount("/mnt/hello", "/a/target", false).unwrap();
    let fd = p.open("/a/target", OpenFlags::CREAT | OpenFlags::RDONLY, 0o644).unwrap();
    let mut buf = [0; 16];
    let n = p.read(fd, &mut buf).unwrap();
    assert_eq!(&buf[..n], b"from other", "the file mounted on the name, not the one under it");
    p.close(fd).unwrap();
    // RESOLVE_NO_XDEV refuses the crossing before the type counts.
    let how = OpenHow { flags: OpenFlags::CREAT | OpenFlags::WRONLY, mode: 0o644, resolve: ResolveFlags::NO_XDEV };
    assert_eq!(p.openat2(AT_FDCWD, "/mnt", &how), Err(Errno::EXDEV));
    assert_eq!(p.openat2(AT_FDCWD, "/a/target", &how), Err(Errno::EXDEV));
    assert_eq!(p.openat2(AT_FDCWD, "/a/b", &how), Err(Errno::EISDIR));
}

#[test]
fn a_recursive_bind_copies_the_mounts_depth_first() {
    let (_root, p) = namespace();
    p.mkdir("/plain", 0o755).unwrap();
    p.mount(&other_fs(), "first", "/mnt", MountFlags::NONE).unwrap();
    p.mount(&Vfs::default(), "third", "/a", MountFlags::NONE).unwrap();
    p.mount(&Vfs::default(), "second", "/mnt/sub", MountFlags::NONE).unwrap();
    p.bind_mount("/", "/plain", true).unwrap();
    // Linux `copy_tree` walks with `next_mnt`: each mount's children, in
    // the order they were mounted, right after it.
    let info = p.mountinfo().unwrap();
    let points: Vec<&str> = info.lines().map(|l| l.split(' ').nth(4).unwrap()).collect();
    assert_eq!(points[4..], ["/plain", "/plain/mnt", "/plain/mnt/sub", "/plain/a"], "{info}");
}

#[test]
fn an_o_creat_open_of_dotdot_checks_the_resolve_flags_before_eisdir() {
    let (_root, p) = namespace();
    p.mount(&other_fs(), "tmpfs", "/mnt", MountFlags::NONE).unwrap();
    let a = p.open("/a", OpenFlags::RDONLY | OpenFlags::DIRECTORY, 0).unwrap();
    let how = |resolve, excl| OpenHow {
        flags: OpenFlags::CREAT | OpenFlags::WRONLY | if excl { OpenFlags::EXCL } else { OpenFlags(0) },
        mode: 0o644,
        resolve,
    };
    assert_eq!(p.openat2(a, "..", &how(ResolveFlags::BENEATH, false)), Err(Errno::EXDEV));
    assert_eq!(p.openat2(a, "..", &how(ResolveFlags::BENEATH, true)), Err(Errno::EXDEV));
    assert_eq!(p.openat2(a, "b/..", &how(ResolveFlags::BENEATH, false)), Err(Errno::EISDIR));
    assert_eq!(p.openat2(AT_FDCWD, "/mnt/..", &how(ResolveFlags::NO_XDEV, false)), Err(Errno::EXDEV));
    assert_eq!(p.openat2(AT_FDCWD, "/mnt/..", &how(ResolveFlags::NONE, false)), Err(Errno::EISDIR));
    assert_eq!(p.openat2(AT_FDCWD, "/mnt/..", &how(ResolveFlags::NONE, true)), Err(Errno::EEXIST));
    p.close(a).unwrap();
}

#[test]
fn mountinfo_shows_a_file_mount_stacked_on_a_file_mount() {
    let (_root, p) = namespace();
    p.bind_mount("/a/b/f", "/a/b/f", false).unwrap();
    p.bind_mount("/a/b/f", "/a/b/f", false).unwrap();
    let info = p.mountinfo().unwrap();
    let points: Vec<&str> = info.lines().map(|l| l.split(' ').nth(4).unwrap()).collect();
    assert_eq!(points, ["/", "/a/b/f", "/a/b/f"], "{info}");
    // A bind of a file that is a mount's root shows that mount's root.
    write(&p, "/g", b"g");
    p.bind_mount("/a/b/f", "/g", false).unwrap();
    p.bind_mount("/g", "/g", false).unwrap();
    let info = p.mountinfo().unwrap();
    let roots: Vec<&str> = info.lines().map(|l| l.split(' ').nth(3).unwrap()).collect();
    assert_eq!(roots[3..], ["/a/b/f", "/a/b/f"], "{info}");
    // A target named through a symlink is listed where the file is.
    write(&p, "/h", b"h");
    p.symlink("h", "/to-h").unwrap();
    p.bind_mount("/a/b/f", "/to-h", false).unwrap();
    let info = p.mountinfo().unwrap();
    assert_eq!(info.lines().last().unwrap().split(' ').nth(4), Some("/h"), "{info}");
}

#[test]
fn a_mount_on_a_detached_mount_is_enoent() {
    let (_root, p) = namespace();
    p.mount(&other_fs(), "tmpfs", "/mnt", MountFlags::NONE).unwrap();
    p.chdir("/mnt").unwrap();
    p.umount2("/mnt", UmountFlags::DETACH).unwrap();
    // Linux `lock_mount`: the target's mount is in no namespace.
    assert_eq!(p.mount(&Vfs::default(), "tmpfs", "sub", MountFlags::NONE), Err(Errno::ENOENT));
    assert_eq!(p.mount(&Vfs::default(), "tmpfs", "hello", MountFlags::NONE), Err(Errno::ENOENT), "before ENOTDIR");
    assert_eq!(p.bind_mount("/a", ".", false), Err(Errno::ENOENT));
    assert_eq!(p.bind_mount(".", "/a", false), Err(Errno::EINVAL), "a detached source");
    assert_eq!(p.umount2(".", UmountFlags::NONE), Err(Errno::EINVAL));
    assert_eq!(p.remount(".", MountFlags::RDONLY), Err(Errno::EINVAL));
    p.chdir("/").unwrap();
}

#[test]
fn umount_of_dot_reaches_a_mount_on_the_working_directory() {
    let (_root, p) = namespace();
    p.chdir("/a").unwrap();
    p.bind_mount("/", ".", false).unwrap();
    // The working directory is under the new mount, which `.` does not
    // cross; umount's walk does (Linux `LOOKUP_MOUNTPOINT`).
    assert_ne!(p.stat(".").unwrap().ino, p.stat("/").unwrap().ino);
    assert_eq!(p.stat("/a").unwrap().ino, p.stat("/").unwrap().ino);
    p.umount2(".", UmountFlags::NONE).unwrap();
    assert_eq!(p.mountinfo().unwrap().lines().count(), 1);
    p.chdir("/").unwrap();
}

#[test]
fn mountinfo_shows_a_bind_mounts_root_where_it_is_now() {
    let (_root, p) = namespace();
    p.bind_mount("/a/b", "/mnt", false).unwrap();
    write(&p, "/file", b"x");
    p.bind_mount("/a/b/f", "/file", false).unwrap();
    p.rename("/a/b", "/moved").unwrap();
    let info = p.mountinfo().unwrap();
    let roots: Vec<&str> = info.lines().map(|l| l.split(' ').nth(3).unwrap()).collect();
    assert_eq!(roots, ["/", "/moved", "/moved/f"], "{info}");
    p.link("/moved/f", "/moved/a").unwrap();
    let info = p.mountinfo().unwrap();
    assert_eq!(info.lines().last().unwrap().split(' ').nth(3), Some("/moved/f"), "the name it has, of its links");
    p.unlink("/moved/a").unwrap();
    p.rename("/moved/f", "/moved/g").unwrap();
    let info = p.mountinfo().unwrap();
    assert_eq!(info.lines().last().unwrap().split(' ').nth(3), Some("/moved/g"), "{info}");
    p.rename("/moved/g", "/a/h").unwrap();
    let info = p.mountinfo().unwrap();
    assert_eq!(info.lines().last().unwrap().split(' ').nth(3), Some("/a/h"), "{info}");
    // A removed root is shown as Linux `dentry_path` shows it.
    p.mkdir("/gone", 0o755).unwrap();
    p.bind_mount("/gone", "/a", false).unwrap();
    p.rmdir("/gone").unwrap();
    let info = p.mountinfo().unwrap();
    assert_eq!(info.lines().last().unwrap().split(' ').nth(3), Some("/gone//deleted"), "{info}");
}

#[test]
fn dotdot_at_a_covered_walk_root_goes_onto_the_mount() {
    let (_root, p) = namespace();
    let a = p.open("/a", OpenFlags::RDONLY | OpenFlags::DIRECTORY, 0).unwrap();
    p.mount(&other_fs(), "tmpfs", "/a", MountFlags::NONE).unwrap();
    let on_top = p.stat("/a").unwrap().ino;
    let how = |resolve| OpenHow { flags: OpenFlags::RDONLY, mode: 0, resolve };
    // `..` stays at the root (the covered directory), then steps onto what
    // is mounted there, as Linux `follow_dotdot` and `step_into` do.
    let fd = p.openat2(a, "..", &how(ResolveFlags::IN_ROOT)).unwrap();
    assert_eq!(p.fstat(fd).unwrap().ino, on_top);
    p.close(fd).unwrap();
    let fd = p.openat2(a, "b/../..", &how(ResolveFlags::IN_ROOT)).unwrap();
    assert_eq!(p.fstat(fd).unwrap().ino, on_top);
    p.close(fd).unwrap();
    let fd = p.openat2(a, ".", &how(ResolveFlags::IN_ROOT)).unwrap();
    assert_ne!(p.fstat(fd).unwrap().ino, on_top, "`.` does not step onto it");
    p.close(fd).unwrap();
    assert_eq!(p.openat2(a, "..", &how(ResolveFlags::IN_ROOT | ResolveFlags::NO_XDEV)), Err(Errno::EXDEV));
    assert_eq!(p.openat2(a, "..", &how(ResolveFlags::BENEATH)), Err(Errno::EXDEV));
    p.close(a).unwrap();
}

#[test]
fn no_xdev_refuses_an_absolute_symlink_until_the_walk_has_a_root() {
    let (_root, p) = namespace();
    p.symlink("/a", "/a/c").unwrap();
    p.chdir("/a").unwrap();
    let how = OpenHow { flags: OpenFlags::RDONLY, mode: 0, resolve: ResolveFlags::NO_XDEV };
    // Linux `nd_jump_root`: a relative walk has no `nd->root` before its
    // first `..`, and without one RESOLVE_NO_XDEV refuses the jump.
    assert_eq!(p.openat2(AT_FDCWD, "c", &how), Err(Errno::EXDEV));
    for path in ["../a/c", "/a/c", "b/../c"] {
        let fd = p.openat2(AT_FDCWD, path, &how).unwrap();
        assert_eq!(p.fstat(fd).unwrap().ino, p.stat("/a").unwrap().ino, "{path}");
        p.close(fd).unwrap();
    }
    p.chdir("/").unwrap();
}

#[test]
fn renames_and_links_across_mounts_are_exdev() {
    let (_root, p) = namespace();
    p.mount(&other_fs(), "tmpfs", "/mnt", MountFlags::NONE).unwrap();
    assert_eq!(p.rename("/a/b/f", "/mnt/f"), Err(Errno::EXDEV));
    assert_eq!(p.link("/a/b/f", "/mnt/f"), Err(Errno::EXDEV));
    // Two mounts of one filesystem are still two mounts.
    p.mkdir("/again", 0o755).unwrap();
    p.bind_mount("/a", "/again", false).unwrap();
    assert_eq!(p.rename("/a/b/f", "/again/f"), Err(Errno::EXDEV));
    assert_eq!(p.link("/a/b/f", "/again/b/g"), Err(Errno::EXDEV));
    assert_eq!(p.link("/a/b/f", "/again/b/f"), Err(Errno::EEXIST), "do_linkat: EEXIST before EXDEV");
    // Inside one mount, fine; with dirfds in two mounts, EXDEV.
    p.rename("/mnt/hello", "/mnt/sub/hello").unwrap();
    let (a, m) = (p.open("/a", OpenFlags::RDONLY, 0).unwrap(), p.open("/mnt", OpenFlags::RDONLY, 0).unwrap());
    assert_eq!(p.renameat2(a, "b/f", m, "f", RenameFlags::default()), Err(Errno::EXDEV));
    assert_eq!(p.linkat(a, "b/f", m, "f", AtFlags::NONE), Err(Errno::EXDEV));
    p.linkat(a, "b/f", a, "f2", AtFlags::NONE).unwrap();
}

#[test]
fn umount_is_ebusy_while_used_and_detach_waits_for_the_users() {
    let (_root, p) = namespace();
    p.mount(&other_fs(), "tmpfs", "/mnt", MountFlags::NONE).unwrap();
    let fd = p.open("/mnt/hello", OpenFlags::RDONLY, 0).unwrap();
    assert_eq!(p.umount2("/mnt", UmountFlags::NONE), Err(Errno::EBUSY), "an open file");
    assert_eq!(p.umount2("/mnt", UmountFlags::FORCE), Err(Errno::EBUSY), "no requests to abort");
    p.close(fd).unwrap();
    p.chdir("/mnt/sub").unwrap();
    assert_eq!(p.umount2("/mnt", UmountFlags::NONE), Err(Errno::EBUSY), "a working directory");
    p.chdir("/").unwrap();
    p.mount(&Vfs::default(), "tmpfs", "/mnt/sub", MountFlags::NONE).unwrap();
    assert_eq!(p.umount2("/mnt", UmountFlags::NONE), Err(Errno::EBUSY), "a submount");
    assert_eq!(p.rmdir("/mnt/sub"), Err(Errno::EBUSY), "a mount point cannot go");
    assert_eq!(p.rename("/mnt/sub", "/mnt/moved"), Err(Errno::EBUSY));
    p.umount2("/mnt/sub", UmountFlags::NONE).unwrap();

    // Lazy: out of the namespace at once; an open file and a working
    // directory inside keep working, and `..` stays at the detached root.
    let fd = p.open("/mnt/hello", OpenFlags::RDONLY, 0).unwrap();
    p.chdir("/mnt/sub").unwrap();
    // `umount -fl`: forced and lazy at once, as Linux allows.
    p.umount2("/mnt", UmountFlags::FORCE | UmountFlags::DETACH).unwrap();
    assert_eq!(p.stat("/mnt/hello"), Err(Errno::ENOENT));
    let mut buf = [0; 10];
    assert_eq!(p.read(fd, &mut buf).unwrap(), 10);
    assert_eq!(read(&p, "../hello").unwrap(), b"from other");
    assert_eq!(read(&p, "../../../hello").unwrap(), b"from other", "the detached root is its own parent");
    p.close(fd).unwrap();
    assert_eq!(p.umount2("/", UmountFlags::NONE), Err(Errno::EBUSY), "the namespace's root");
    assert_eq!(p.umount2("/", UmountFlags::DETACH), Err(Errno::EINVAL));
    assert_eq!(p.umount2("/mnt", UmountFlags(0x100)), Err(Errno::EINVAL), "an unknown flag");
}

#[test]
fn only_a_mount_administrator_mounts() {
    let (root_fs, p) = namespace();
    let ns = namespace_of(&p);
    let user = root_fs.process_in(&ns, Credentials::user(1000, 1000, []));
    assert_eq!(user.mount(&Vfs::default(), "tmpfs", "/mnt", MountFlags::NONE), Err(Errno::EPERM));
    assert_eq!(user.mount(&Vfs::default(), "tmpfs", "/missing", MountFlags::NONE), Err(Errno::ENOENT), "walk first");
    p.mount(&other_fs(), "tmpfs", "/mnt", MountFlags::NONE).unwrap();
    assert_eq!(user.umount2("/mnt", UmountFlags::NONE), Err(Errno::EPERM));
    assert_eq!(user.unshare_mount_namespace(), Err(Errno::EPERM));
    assert_eq!(p.mount(&Vfs::default(), "tmpfs", "/mnt", MountFlags(libc::MS_BIND as u32)), Err(Errno::EINVAL));
    // Outside any namespace there is nothing to mount on.
    let lone = Vfs::default().process(Credentials::root());
    assert_eq!(lone.mount(&Vfs::default(), "tmpfs", "/", MountFlags::NONE), Err(Errno::EINVAL));
}

#[test]
fn unshare_copies_the_namespace_and_later_mounts_stay_private() {
    let (root_fs, p) = namespace();
    p.mount(&other_fs(), "tmpfs", "/mnt", MountFlags::NONE).unwrap();
    let q = root_fs.process_in(&namespace_of(&p), Credentials::root());
    q.chdir("/mnt/sub").unwrap();
    q.unshare_mount_namespace().unwrap();
    assert_eq!(read(&q, "/mnt/hello").unwrap(), b"from other", "the copy has the mounts");
    assert_eq!(read(&q, "../hello").unwrap(), b"from other", "the working directory moved to the copy");
    q.mount(&Vfs::default(), "tmpfs", "/a", MountFlags::NONE).unwrap();
    assert_eq!(q.stat("/a/b"), Err(Errno::ENOENT));
    assert!(p.stat("/a/b").is_ok(), "not in the first namespace");
    p.umount2("/mnt", UmountFlags::NONE).unwrap();
    assert_eq!(read(&q, "/mnt/hello").unwrap(), b"from other", "nor its umount in the copy");
}

#[test]
fn openat2_confines_walks_to_one_mount_with_no_xdev() {
    let (_root, p) = namespace();
    p.mount(&other_fs(), "tmpfs", "/mnt", MountFlags::NONE).unwrap();
    p.symlink("/mnt/hello", "/a/link").unwrap();
    let how = |resolve| OpenHow { flags: OpenFlags::RDONLY, mode: 0, resolve };
    let a = p.open("/a", OpenFlags::RDONLY, 0).unwrap();
    assert_eq!(p.openat2(AT_FDCWD, "/mnt/hello", &how(ResolveFlags::NO_XDEV)), Err(Errno::EXDEV));
    assert_eq!(p.openat2(a, "link", &how(ResolveFlags::NO_XDEV)), Err(Errno::EXDEV));
    assert_eq!(p.openat2(a, "../mnt", &how(ResolveFlags::NO_XDEV)), Err(Errno::EXDEV));
    let m = p.open("/mnt", OpenFlags::RDONLY, 0).unwrap();
    assert_eq!(p.openat2(m, "..", &how(ResolveFlags::NO_XDEV)), Err(Errno::EXDEV), "up out of the mount");
    assert!(p.openat2(m, "hello", &how(ResolveFlags::NO_XDEV)).is_ok());
    assert!(p.openat2(a, "link", &how(ResolveFlags::NONE)).is_ok());
    assert_eq!(p.openat2(m, "../a", &how(ResolveFlags::BENEATH)), Err(Errno::EXDEV));
}

#[test]
fn chroot_into_a_mount_stops_dotdot_there() {
    let (_root, p) = namespace();
    p.mount(&other_fs(), "tmpfs", "/mnt", MountFlags::NONE).unwrap();
    p.chroot("/mnt").unwrap();
    p.chdir("/").unwrap();
    assert_eq!(read(&p, "/../../hello").unwrap(), b"from other");
    assert_eq!(p.stat("/a"), Err(Errno::ENOENT));
    let info = p.mountinfo().unwrap();
    assert_eq!(info.lines().count(), 1, "only the mounts under the root: {info}");
    assert!(info.contains(" / / rw,relatime - tmpfs tmpfs rw"), "{info}");
}

#[test]
fn mountinfo_lists_mounts_in_linux_format() {
    let (_root, p) = namespace();
    p.mkdir("/sys", 0o555).unwrap();
    p.mkdir("/proc", 0o555).unwrap();
    p.mkdir("/odd name", 0o755).unwrap();
    let sys = Kernfs::new(KernfsConfig::rcu());
    let proc = Procfs::new(ProcConfig::rcu_revalidate());
    p.mount(sys.vfs(), "sysfs", "/sys", MountFlags::NOSUID | MountFlags::NODEV | MountFlags::NOEXEC).unwrap();
    p.mount(proc.vfs(), "proc", "/proc", MountFlags::NOSUID | MountFlags::NODEV | MountFlags::NOEXEC).unwrap();
    p.bind_mount("/a/b", "/odd name", false).unwrap();
    p.remount("/odd name", MountFlags::RDONLY).unwrap();
    write(&p, "/a/target", b"");
    p.bind_mount("/a/b/f", "/a/target", false).unwrap();
    let info = p.mountinfo().unwrap();
    let lines: Vec<Vec<&str>> = info.lines().map(|l| l.split(' ').collect()).collect();
    assert_eq!(lines.len(), 5, "{info}");
    let root_id = lines[0][0];
    assert_eq!(lines[0][1], root_id, "the root is its own parent");
    for (line, (root, point, options, fs_type)) in lines.iter().zip([
        ("/", "/", "rw,relatime", "tmpfs"),
        ("/", "/sys", "rw,nosuid,nodev,noexec,relatime", "sysfs"),
        ("/", "/proc", "rw,nosuid,nodev,noexec,relatime", "proc"),
        ("/a/b", "/odd\\040name", "ro,relatime", "tmpfs"),
        ("/a/b/f", "/a/target", "rw,relatime", "tmpfs"),
    ]) {
        assert_eq!((line[3], line[4], line[5], line[6], line[7]), (root, point, options, "-", fs_type), "{info}");
        assert!(line[2].starts_with("0:"), "an anonymous device: {info}");
        assert_eq!(line.len(), 10, "{info}");
    }
    assert_eq!(lines[1][1], root_id, "/sys is on the root mount");
}

#[test]
fn seed_paths_cross_sysfs_and_proc_mounts() {
    let (_root, p) = namespace();
    p.mkdir("/sys", 0o555).unwrap();
    p.mkdir("/proc", 0o555).unwrap();
    let sys = Kernfs::new(KernfsConfig::rcu());
    let devices = sys.create_dir(&sys.root(), "devices", 0o755).unwrap();
    let system = sys.create_dir(&devices, "system", 0o755).unwrap();
    let cpu = sys.create_dir(&system, "cpu", 0o755).unwrap();
    sys.create_file(&cpu, "online", 0o444, || Ok(b"0-1\n".to_vec()), None::<fn(&[u8]) -> VfsResult<()>>).unwrap();
    let proc = Procfs::new(ProcConfig::rcu_revalidate());
    proc.add_task(42, TaskInfo::new("sh", ["sh"])).unwrap();
    p.mount(sys.vfs(), "sysfs", "/sys", MountFlags::NONE).unwrap();
    p.mount(proc.vfs(), "proc", "/proc", MountFlags::NONE).unwrap();
    assert_eq!(read(&p, "/sys/devices/system/cpu/online").unwrap(), b"0-1\n");
    assert_eq!(p.stat("/sys/devices/system/cpu/missing"), Err(Errno::ENOENT));
    assert!(read(&p, "/proc/42/status").unwrap().starts_with(b"Name:\tsh"));
    assert_eq!(p.stat("/proc/42/../../sys/devices").unwrap().ino, p.stat("/sys/devices").unwrap().ino);
    assert_eq!(p.statfs("/sys/devices").unwrap().flags, MountFlags::NONE);
}

/// Walks through a mount point while another thread mounts and lazily
/// unmounts there: each walk sees the covered directory or the mount,
/// whole, never an error of its own; a file kept open across the umount
/// stays readable.
#[test]
fn walks_racing_mount_and_umount_see_one_side_or_the_other() {
    let rounds: usize = std::env::var("VFSCALE_MOUNT_RACE_ROUNDS").ok().and_then(|v| v.parse().ok()).unwrap_or(300);
    let (root_fs, p) = namespace();
    write(&p, "/mnt/hello", b"covered");
    let ns = namespace_of(&p);
    let done = Arc::new(AtomicBool::new(false));
    // Walkers that have walked once: the mounts start after both have (or
    // one has failed), so both are running when the mounts begin.
    let walking = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let walkers: Vec<_> = (0..2)
        .map(|_| {
            let (walker, done) = (root_fs.process_in(&ns, Credentials::root()), Arc::clone(&done));
            let walking = Arc::clone(&walking);
            std::thread::spawn(move || {
                let mut seen = [0usize; 2];
                loop {
                    let fd = walker.open("/mnt/hello", OpenFlags::RDONLY, 0).expect("one side or the other");
                    let mut buf = [0u8; 16];
                    let n = walker.read(fd, &mut buf).unwrap();
                    walker.close(fd).unwrap();
                    match &buf[..n] {
                        b"covered" => seen[0] += 1,
                        b"from other" => seen[1] += 1,
                        other => panic!("a walk saw {other:?}"),
                    }
                    if seen[0] + seen[1] == 1 {
                        walking.fetch_add(1, Ordering::Release);
                    }
                    if done.load(Ordering::Acquire) {
                        break;
                    }
                }
                seen
            })
        })
        .collect();
    while walking.load(Ordering::Acquire) < 2 && !walkers.iter().any(|w| w.is_finished()) {
        std::thread::yield_now();
    }
    let other = other_fs();
    for _ in 0..rounds {
        p.mount(&other, "tmpfs", "/mnt", MountFlags::NONE).unwrap();
        p.umount2("/mnt", UmountFlags::DETACH).unwrap();
    }
    done.store(true, Ordering::Release);
    for walker in walkers {
        walker.join().unwrap();
    }
    assert_eq!(read(&p, "/mnt/hello").unwrap(), b"covered");
    assert_eq!(p.mountinfo().unwrap().lines().count(), 1);
}
