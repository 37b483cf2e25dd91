//! Extended attributes with tmpfs's rules and errors.

use vfscale::mode::{S_IFIFO, S_IFREG};
use vfscale::xattr::{XATTR_CREATE, XATTR_NAME_MAX, XATTR_REPLACE, XATTR_SIZE_MAX};
use vfscale::{Credentials, Errno, Timespec, Vfs};
use vfscale_sync::test_support::wait_for_clock_past;

fn setup() -> (Vfs, vfscale::Process, vfscale::Process) {
    let vfs = Vfs::default();
    let root = vfs.process(Credentials::root());
    root.chmod("/", 0o777).unwrap();
    let user = vfs.process(Credentials::user(1000, 1000, []));
    user.mknod("/f", S_IFREG | 0o644, 0).unwrap();
    (vfs, root, user)
}

fn get(p: &vfscale::Process, path: &str, name: &[u8]) -> Result<Vec<u8>, Errno> {
    let mut buf = vec![0; 70_000];
    let n = p.getxattr(path, name, &mut buf)?;
    buf.truncate(n);
    Ok(buf)
}

fn list(p: &vfscale::Process, path: &str) -> Vec<u8> {
    let mut buf = vec![0; 1000];
    let n = p.listxattr(path, &mut buf).unwrap();
    buf.truncate(n);
    buf
}

#[test]
fn set_get_list_remove_with_flags() {
    let (_vfs, _root, p) = setup();
    assert_eq!(get(&p, "/f", b"user.a"), Err(Errno::ENODATA));
    assert_eq!(p.setxattr("/f", b"user.a", b"1", XATTR_REPLACE), Err(Errno::ENODATA));
    p.setxattr("/f", b"user.a", b"1", XATTR_CREATE).unwrap();
    assert_eq!(p.setxattr("/f", b"user.a", b"2", XATTR_CREATE), Err(Errno::EEXIST));
    p.setxattr("/f", b"user.a", b"22", XATTR_REPLACE).unwrap();
    p.setxattr("/f", b"user.b", b"", 0).unwrap();
    assert_eq!(get(&p, "/f", b"user.a").unwrap(), b"22");
    assert_eq!(get(&p, "/f", b"user.b").unwrap(), b"");
    assert_eq!(list(&p, "/f"), b"user.a\0user.b\0");
    assert_eq!(p.listxattr("/f", &mut []), Ok(14));
    assert_eq!(p.listxattr("/f", &mut [0; 13]), Err(Errno::ERANGE));
    assert_eq!(p.getxattr("/f", b"user.a", &mut [0; 1]), Err(Errno::ERANGE));
    p.removexattr("/f", b"user.a").unwrap();
    assert_eq!(p.removexattr("/f", b"user.a"), Err(Errno::ENODATA));
    assert_eq!(list(&p, "/f"), b"user.b\0");
    assert_eq!(p.setxattr("/f", b"user.a", b"1", XATTR_CREATE | XATTR_REPLACE | 4), Err(Errno::EINVAL));
}

#[test]
fn names_sizes_and_namespaces() {
    let (_vfs, root, p) = setup();
    let long = [b"user.".as_slice(), &[b'n'; XATTR_NAME_MAX - 5]].concat();
    p.setxattr("/f", &long, b"v", 0).unwrap();
    let too_long = [long.as_slice(), b"x"].concat();
    assert_eq!(p.setxattr("/f", &too_long, b"v", 0), Err(Errno::ERANGE));
    assert_eq!(p.setxattr("/missing", &too_long, b"v", 0), Err(Errno::ERANGE), "checked before the lookup");
    assert_eq!(p.setxattr("/f", b"", b"v", 0), Err(Errno::ERANGE));
    assert_eq!(p.setxattr("/f", b"user.big", &vec![0; XATTR_SIZE_MAX + 1], 0), Err(Errno::E2BIG));
    p.setxattr("/f", b"user.big", &vec![7; XATTR_SIZE_MAX], 0).unwrap();
    assert_eq!(get(&p, "/f", b"user.big").unwrap().len(), XATTR_SIZE_MAX);
    assert_eq!(p.setxattr("/f", b"user.", b"v", 0), Err(Errno::EINVAL));
    assert_eq!(p.setxattr("/f", b"os2.x", b"v", 0), Err(Errno::EOPNOTSUPP));
    assert_eq!(get(&p, "/f", b"os2.x"), Err(Errno::EOPNOTSUPP));
    assert_eq!(root.setxattr("/f", b"system.posix_acl_access", b"v", 0), Err(Errno::EOPNOTSUPP));
    assert_eq!(p.setxattr("/missing", b"user.a", b"v", 0), Err(Errno::ENOENT));
}

#[test]
fn trusted_needs_cap_sys_admin_and_is_listed_only_for_it() {
    let (_vfs, root, user) = setup();
    assert_eq!(user.setxattr("/f", b"trusted.t", b"v", 0), Err(Errno::EPERM));
    root.setxattr("/f", b"trusted.t", b"v", 0).unwrap();
    user.setxattr("/f", b"user.u", b"v", 0).unwrap();
    assert_eq!(get(&user, "/f", b"trusted.t"), Err(Errno::ENODATA));
    assert_eq!(get(&root, "/f", b"trusted.t").unwrap(), b"v");
    assert_eq!(list(&user, "/f"), b"user.u\0");
    assert_eq!(list(&root, "/f"), b"trusted.t\0user.u\0");
    assert_eq!(user.removexattr("/f", b"trusted.t"), Err(Errno::EPERM));
    // security.*: anyone reads, only root writes.
    assert_eq!(user.setxattr("/f", b"security.s", b"v", 0), Err(Errno::EPERM));
    root.setxattr("/f", b"security.s", b"v", 0).unwrap();
    assert_eq!(get(&user, "/f", b"security.s").unwrap(), b"v");
}

#[test]
fn user_attributes_follow_permissions_and_file_types() {
    let (vfs, root, owner) = setup();
    let other = vfs.process(Credentials::user(2000, 2000, []));
    assert_eq!(other.setxattr("/f", b"user.a", b"v", 0), Err(Errno::EACCES));
    owner.setxattr("/f", b"user.a", b"v", 0).unwrap();
    assert_eq!(get(&other, "/f", b"user.a").unwrap(), b"v");
    owner.chmod("/f", 0o600).unwrap();
    assert_eq!(get(&other, "/f", b"user.a"), Err(Errno::EACCES));
    assert_eq!(other.listxattr("/f", &mut [0; 100]), Ok(7), "listing needs no permission");

    owner.mknod("/fifo", S_IFIFO | 0o666, 0).unwrap();
    assert_eq!(owner.setxattr("/fifo", b"user.a", b"v", 0), Err(Errno::EPERM));
    assert_eq!(get(&owner, "/fifo", b"user.a"), Err(Errno::ENODATA));
    root.setxattr("/fifo", b"trusted.a", b"v", 0).unwrap();
    owner.symlink("f", "/link").unwrap();
    assert_eq!(owner.lsetxattr("/link", b"user.a", b"v", 0), Err(Errno::EPERM));
    assert_eq!(get(&owner, "/link", b"user.a").unwrap(), b"v", "getxattr follows the link");

    // A sticky directory: only its owner writes user attributes.
    root.mkdir("/tmp", 0o1777).unwrap();
    assert_eq!(owner.setxattr("/tmp", b"user.a", b"v", 0), Err(Errno::EPERM));
    root.setxattr("/tmp", b"user.a", b"v", 0).unwrap();
    assert_eq!(get(&owner, "/tmp", b"user.a").unwrap(), b"v");
}

#[test]
fn changes_touch_ctime_and_failures_do_not() {
    let (vfs, _root, p) = setup();
    let before = p.stat("/f").unwrap().ctime;
    wait_for_clock_past(Timespec::now, before);
    let other = vfs.process(Credentials::user(2000, 2000, []));
    assert!(other.setxattr("/f", b"user.a", b"v", 0).is_err());
    assert!(p.removexattr("/f", b"user.none").is_err());
    assert_eq!(p.stat("/f").unwrap().ctime, before);
    p.setxattr("/f", b"user.a", b"v", 0).unwrap();
    let set = p.stat("/f").unwrap().ctime;
    assert!(set > before);
    wait_for_clock_past(Timespec::now, set);
    p.removexattr("/f", b"user.a").unwrap();
    assert!(p.stat("/f").unwrap().ctime > set);
}
