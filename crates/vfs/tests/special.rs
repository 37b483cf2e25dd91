//! Special files (`mknod` of FIFOs, sockets and devices) and the rules
//! pjdfstest checks beside them: owners and groups of new files, the
//! set-group-ID bit, and failed operations leaving ctime alone.

use vfscale::mode::{S_IFBLK, S_IFCHR, S_IFDIR, S_IFIFO, S_IFMT, S_IFREG, S_IFSOCK, S_ISGID};
use vfscale::{Credentials, Errno, FileType, OpenFlags, Timespec, Vfs};
use vfscale_sync::test_support::wait_for_clock_past;

fn world_writable() -> (Vfs, vfscale::Process) {
    let vfs = Vfs::default();
    let root = vfs.process(Credentials::root());
    root.chmod("/", 0o777).unwrap();
    (vfs, root)
}

#[test]
fn mknod_makes_every_type() {
    let (_vfs, root) = world_writable();
    for (name, kind, file_type, rdev) in [
        ("/fifo", S_IFIFO, FileType::Fifo, 0),
        ("/sock", S_IFSOCK, FileType::Socket, 0),
        ("/chr", S_IFCHR, FileType::CharDevice, libc::makedev(1, 3)),
        ("/blk", S_IFBLK, FileType::BlockDevice, libc::makedev(8, 1)),
        ("/reg", S_IFREG, FileType::Regular, 0),
        ("/zero", 0, FileType::Regular, 0),
    ] {
        // Non-devices ignore the device number.
        root.mknod(name, kind | 0o640, if rdev == 0 { libc::makedev(9, 9) } else { rdev }).unwrap();
        let st = root.lstat(name).unwrap();
        assert_eq!(FileType::from_mode(st.mode), Some(file_type), "{name}");
        assert_eq!((st.mode & !S_IFMT, st.rdev, st.size, st.nlink), (0o640, rdev, 0, 1), "{name}");
        assert_eq!(root.mknod(name, kind | 0o640, 0), Err(Errno::EEXIST), "{name}");
    }
    let listed: Vec<_> = root.list_dir("/").unwrap().into_iter().map(|e| e.file_type).collect();
    assert!(listed.contains(&FileType::Fifo) && listed.contains(&FileType::BlockDevice));
    assert_eq!(root.mknod("/dir", S_IFDIR | 0o755, 0), Err(Errno::EPERM));
    assert_eq!(root.mknod("/bad", 0o030000 | 0o644, 0), Err(Errno::EINVAL));
    assert_eq!(root.mknod("/missing/x", S_IFIFO | 0o644, 0), Err(Errno::ENOENT));
    assert_eq!(root.mknod("/fifo/x", S_IFIFO | 0o644, 0), Err(Errno::ENOTDIR));
    for name in ["/fifo", "/sock", "/chr", "/blk"] {
        root.unlink(name).unwrap();
    }
}

#[test]
fn devices_need_cap_mknod() {
    let (vfs, _root) = world_writable();
    let user = vfs.process(Credentials::user(1000, 1000, []));
    assert_eq!(user.mknod("/tty", S_IFCHR | 0o600, libc::makedev(5, 0)), Err(Errno::EPERM));
    assert_eq!(user.mknod("/sda", S_IFBLK | 0o600, libc::makedev(8, 0)), Err(Errno::EPERM));
    user.mknod("/fifo", S_IFIFO | 0o600, 0).unwrap();
    user.mknod("/sock", S_IFSOCK | 0o600, 0).unwrap();
    assert_eq!(user.stat("/fifo").unwrap().uid, 1000);
}

#[test]
fn opening_special_files() {
    let (_vfs, root) = world_writable();
    root.mknod("/fifo", S_IFIFO | 0o666, 0).unwrap();
    root.mknod("/sock", S_IFSOCK | 0o666, 0).unwrap();
    root.mknod("/null", S_IFCHR | 0o666, libc::makedev(1, 3)).unwrap();
    let nonblock = OpenFlags::NONBLOCK;
    assert_eq!(root.open("/fifo", OpenFlags::WRONLY | nonblock, 0), Err(Errno::ENXIO));
    let fd = root.open("/fifo", OpenFlags::RDONLY | nonblock, 0).unwrap();
    assert_eq!(root.read(fd, &mut [0; 4]), Err(Errno::EINVAL));
    assert_eq!(root.open("/sock", OpenFlags::RDWR, 0), Err(Errno::ENXIO));
    assert_eq!(root.open("/null", OpenFlags::RDWR, 0), Err(Errno::ENXIO));
    assert_eq!(root.truncate("/fifo", 0), Err(Errno::EINVAL));
    // Permission comes first.
    root.chmod("/sock", 0).unwrap();
    let user = root.vfs().process(Credentials::user(1000, 1000, []));
    assert_eq!(user.open("/sock", OpenFlags::RDWR, 0), Err(Errno::EACCES));
}

#[test]
fn setgid_directories_give_their_group_and_strip_setgid_from_outsiders() {
    let (vfs, root) = world_writable();
    root.mkdir("/shared", 0o777).unwrap();
    root.chown("/shared", None, Some(100)).unwrap();
    root.chmod("/shared", 0o2777).unwrap();
    let outsider = vfs.process(Credentials::user(1000, 1000, []));
    let member = vfs.process(Credentials::user(1001, 1001, [100]));
    outsider.mknod("/shared/a", S_IFREG | 0o2755, 0).unwrap();
    member.mknod("/shared/b", S_IFREG | 0o2755, 0).unwrap();
    outsider.mknod("/shared/c", S_IFREG | 0o2745, 0).unwrap();
    let fd = outsider.open("/shared/d", OpenFlags::CREAT | OpenFlags::WRONLY, 0o2775).unwrap();
    outsider.close(fd).unwrap();
    outsider.mkdir("/shared/sub", 0o755).unwrap();
    let st = |p: &str| root.stat(p).unwrap();
    assert_eq!((st("/shared/a").mode & 0o7777, st("/shared/a").gid), (0o755, 100));
    assert_eq!(st("/shared/b").mode & 0o7777, 0o2755);
    assert_eq!(st("/shared/c").mode & 0o7777, 0o2745, "not group-executable: kept");
    assert_eq!(st("/shared/d").mode & 0o7777, 0o775);
    assert_eq!((st("/shared/sub").mode & 0o7777, st("/shared/sub").gid), (0o2755, 100));
    assert_eq!(st("/shared/a").uid, 1000);
}

#[test]
fn chmod_clears_setgid_for_outsiders() {
    let (vfs, root) = world_writable();
    let user = vfs.process(Credentials::user(1000, 1000, []));
    user.mknod("/f", S_IFREG | 0o644, 0).unwrap();
    root.chown("/f", None, Some(100)).unwrap();
    user.chmod("/f", 0o2755).unwrap();
    assert_eq!(root.stat("/f").unwrap().mode & S_ISGID, 0);
}

#[test]
fn failed_operations_leave_ctime_alone() {
    let (vfs, root) = world_writable();
    root.mknod("/f", S_IFIFO | 0o644, 0).unwrap();
    root.mkdir("/d", 0o755).unwrap();
    let before = root.stat("/f").unwrap().ctime;
    let dir_before = root.stat("/d").unwrap().ctime;
    // Any change from here on would be seen in a later stamp.
    wait_for_clock_past(Timespec::now, before.max(dir_before));
    let user = vfs.process(Credentials::user(1000, 1000, []));
    assert_eq!(user.chmod("/f", 0o777), Err(Errno::EPERM));
    assert_eq!(user.chown("/f", Some(1000), None), Err(Errno::EPERM));
    assert_eq!(user.rename("/f", "/d/f"), Err(Errno::EACCES));
    assert_eq!(user.unlink("/d/none"), Err(Errno::ENOENT));
    assert_eq!(user.mknod("/d/x", S_IFIFO | 0o644, 0), Err(Errno::EACCES));
    assert_eq!(root.stat("/f").unwrap().ctime, before);
    assert_eq!(root.stat("/d").unwrap().ctime, dir_before);
}

#[test]
fn moving_a_directory_needs_write_permission_on_it() {
    let (vfs, root) = world_writable();
    let user = vfs.process(Credentials::user(1000, 1000, []));
    user.mkdir("/a", 0o755).unwrap();
    user.mkdir("/b", 0o755).unwrap();
    user.mkdir("/a/sub", 0o555).unwrap();
    assert_eq!(user.rename("/a/sub", "/b/sub"), Err(Errno::EACCES));
    user.rename("/a/sub", "/a/renamed").unwrap();
    root.rename("/a/renamed", "/b/sub").unwrap();
}
