//! Capabilities, not uid 0, override the permission checks: each of
//! Linux's filesystem capabilities grants what `capable()` grants in the
//! kernel, to a caller of any uid, and a uid-0 caller without it is
//! refused like anyone else. And a refused `setattr` changes nothing.

use vfscale::cred::{Access, Capabilities};
use vfscale::mode::{S_IFCHR, S_ISGID, S_ISUID};
use vfscale::{Context, Credentials, Errno, OpenFlags, SetAttr, SetTime, Vfs};

const ALICE: u32 = 1000;
const BOB: u32 = 2000;

/// A VFS whose root directory is world-writable, holding `/f` (alice's,
/// 0600, "data") and `/d` (alice's sticky directory, 01777) with
/// `/d/g` (alice's).
fn setup() -> Vfs {
    let vfs = Vfs::default();
    let root = vfs.process(Credentials::root());
    root.chmod("/", 0o777).unwrap();
    let alice = vfs.process(Credentials::user(ALICE, ALICE, []));
    let fd = alice.open("/f", OpenFlags::CREAT | OpenFlags::WRONLY, 0o600).unwrap();
    alice.write(fd, b"data").unwrap();
    alice.close(fd).unwrap();
    alice.mkdir("/d", 0o777).unwrap();
    alice.chmod("/d", 0o1777).unwrap();
    alice.close(alice.open("/d/g", OpenFlags::CREAT | OpenFlags::WRONLY, 0o644).unwrap()).unwrap();
    vfs
}

fn root_without(caps: Capabilities) -> Credentials {
    Credentials::root().with_capabilities(Capabilities::all().without(caps))
}

fn bob_with(caps: Capabilities) -> Credentials {
    Credentials::user(BOB, BOB, []).with_capabilities(caps)
}

#[test]
fn dac_override_and_read_search_are_what_root_reads_and_writes_with() {
    let vfs = setup();
    let confined = vfs.process(root_without(Capabilities::DAC_OVERRIDE | Capabilities::DAC_READ_SEARCH));
    assert_eq!(confined.open("/f", OpenFlags::RDONLY, 0), Err(Errno::EACCES));
    assert_eq!(confined.open("/f", OpenFlags::WRONLY, 0), Err(Errno::EACCES));
    // CAP_DAC_READ_SEARCH alone reads, but does not write.
    let reader = vfs.process(root_without(Capabilities::DAC_OVERRIDE));
    assert!(reader.open("/f", OpenFlags::RDONLY, 0).is_ok());
    assert_eq!(reader.open("/f", OpenFlags::WRONLY, 0), Err(Errno::EACCES));
    // And any uid holding CAP_DAC_OVERRIDE writes.
    let bob = vfs.process(bob_with(Capabilities::DAC_OVERRIDE));
    assert!(bob.open("/f", OpenFlags::RDWR, 0).is_ok());
    assert_eq!(vfs.process(bob_with(Capabilities::empty())).open("/f", OpenFlags::RDONLY, 0), Err(Errno::EACCES));
}

#[test]
fn chown_needs_cap_chown_whoever_asks() {
    let vfs = setup();
    let root_no_chown = vfs.process(root_without(Capabilities::CHOWN));
    assert_eq!(root_no_chown.chown("/f", Some(BOB), None), Err(Errno::EPERM));
    let bob = vfs.process(bob_with(Capabilities::CHOWN));
    bob.chown("/f", Some(BOB), Some(BOB)).unwrap();
    let st = bob.stat("/f").unwrap();
    assert_eq!((st.uid, st.gid), (BOB, BOB));
}

#[test]
fn fowner_acts_as_the_owner() {
    let vfs = setup();
    let plain = vfs.process(bob_with(Capabilities::empty()));
    assert_eq!(plain.chmod("/f", 0o644), Err(Errno::EPERM));
    assert_eq!(plain.utimens("/f", SetTime::At(Default::default()), SetTime::Omit), Err(Errno::EPERM));
    assert_eq!(plain.unlink("/d/g"), Err(Errno::EPERM), "alice's sticky directory");
    let fowner = vfs.process(bob_with(Capabilities::FOWNER));
    fowner.chmod("/f", 0o644).unwrap();
    fowner.utimens("/f", SetTime::At(Default::default()), SetTime::Omit).unwrap();
    fowner.unlink("/d/g").unwrap();
    let root_no_fowner = vfs.process(root_without(Capabilities::FOWNER));
    assert_eq!(root_no_fowner.chmod("/f", 0o600), Err(Errno::EPERM));
}

#[test]
fn fsetid_keeps_set_id_bits_on_write() {
    let vfs = setup();
    let alice = vfs.process(Credentials::user(ALICE, ALICE, []));
    alice.chmod("/f", 0o6777).unwrap();
    let write = |cred: Credentials| {
        let p = vfs.process(cred);
        let fd = p.open("/f", OpenFlags::WRONLY, 0).unwrap();
        p.write(fd, b"x").unwrap();
        p.close(fd).unwrap();
        p.stat("/f").unwrap().mode & (S_ISUID | S_ISGID)
    };
    assert_eq!(write(Credentials::root()), S_ISUID | S_ISGID, "root holds CAP_FSETID");
    assert_eq!(write(root_without(Capabilities::FSETID)), 0);
    alice.chmod("/f", 0o6777).unwrap();
    assert_eq!(write(bob_with(Capabilities::FSETID)), S_ISUID | S_ISGID);
    assert_eq!(write(root_without(Capabilities::FSETID)), 0, "bits set again after a write cleared them go too");
    alice.chmod("/f", 0o2755).unwrap();
    assert_eq!(write(root_without(Capabilities::FSETID)), 0, "set-group-ID of a group-executable file goes");
}

/// Linux's `file_modified`: every `fallocate` mode drops set-id bits as a
/// write does, one that reserves nothing new included.
#[test]
fn fallocate_drops_set_id_bits_without_fsetid() {
    use vfscale::falloc;
    let vfs = setup();
    let alice = vfs.process(Credentials::user(ALICE, ALICE, []));
    let p = vfs.process(root_without(Capabilities::FSETID));
    let fd = p.open("/f", OpenFlags::RDWR, 0).unwrap();
    p.pwrite(fd, &[1; 8192], 0).unwrap();
    let f = p.open_file(fd).unwrap();
    let cred = root_without(Capabilities::FSETID);
    for (what, mode, offset) in [
        ("a new reservation", 0, 8192),
        ("a reserved range", 0, 0),
        ("a hole punched", falloc::PUNCH_HOLE | falloc::KEEP_SIZE, 0),
    ] {
        alice.chmod("/f", 0o6777).unwrap();
        f.fallocate(mode, offset, 4096, &cred).unwrap();
        assert_eq!(p.stat("/f").unwrap().mode & (S_ISUID | S_ISGID), 0, "{what}");
    }
}

#[test]
fn mknod_lease_chroot_and_trusted_xattrs_each_need_their_capability() {
    let vfs = setup();
    let dev = S_IFCHR | 0o600;
    let without = |cap| vfs.process(root_without(cap));
    let with = |cap| vfs.process(bob_with(cap));
    assert_eq!(without(Capabilities::MKNOD).mknod("/null", dev, 0x103), Err(Errno::EPERM));
    with(Capabilities::MKNOD).mknod("/null", dev, 0x103).unwrap();
    assert_eq!(without(Capabilities::SYS_CHROOT).chroot("/d"), Err(Errno::EPERM));
    with(Capabilities::SYS_CHROOT).chroot("/d").unwrap();
    assert_eq!(without(Capabilities::SYS_ADMIN).setxattr("/d", b"trusted.k", b"v", 0), Err(Errno::EPERM));
    with(Capabilities::SYS_ADMIN).setxattr("/d", b"trusted.k", b"v", 0).unwrap();
    // F_SETLEASE on a file one does not own needs CAP_LEASE.
    let lessee = without(Capabilities::LEASE);
    let fd = lessee.open("/d/g", OpenFlags::RDONLY, 0).unwrap();
    assert_eq!(lessee.setlease(fd, libc::F_RDLCK), Err(Errno::EACCES));
    let holder = with(Capabilities::LEASE);
    let fd = holder.open("/d/g", OpenFlags::RDONLY, 0).unwrap();
    holder.setlease(fd, libc::F_RDLCK).unwrap();
}

/// A truncate by a writer without CAP_FSETID drops set-id bits as a write
/// does (Linux `do_truncate`'s kill flags), judged on the file as it was:
/// through `truncate(2)`, and through a `setattr` that changes the size
/// and the group at once, where set-group-ID (without group execute) is
/// judged on the old group, which the writer is in, not on the new one. A
/// `setattr` that gives a mode with the size keeps that mode whole. Each
/// change lands its size too.
#[test]
fn a_truncate_drops_set_id_bits_judged_before_the_change() {
    let vfs = setup();
    let root = vfs.process(Credentials::root());
    let f = root.resolve("/f", true).unwrap();
    let setid = |f: &vfscale::inode::Inode| f.stat().mode & (S_ISUID | S_ISGID);
    root.chmod("/f", 0o6777).unwrap();
    vfs.process(root_without(Capabilities::FSETID)).truncate("/f", 2).unwrap();
    assert_eq!((setid(&f), f.stat().size), (0, 2), "truncate(2)");
    // A member of the file's group, allowed to give it to another group.
    let member =
        Credentials::user(BOB, BOB, [ALICE]).with_capabilities(Capabilities::CHOWN | Capabilities::DAC_OVERRIDE);
    let ctx = Context::new(&vfs, &member, vfs.root());
    root.chmod("/f", 0o2666).unwrap();
    ctx.setattr(&f, SetAttr { size: Some(3), gid: Some(3000), ..SetAttr::default() }).unwrap();
    assert_eq!((setid(&f), f.stat().gid, f.stat().size), (S_ISGID, 3000, 3), "judged on the old group");
    // Back to a group root is in, so that the chmod itself keeps
    // set-group-ID without CAP_FSETID.
    root.chown("/f", None, Some(0)).unwrap();
    root.chmod("/f", 0o6777).unwrap();
    let attr = SetAttr { size: Some(0), mode: Some(0o6755), ..SetAttr::default() };
    let writer = root_without(Capabilities::FSETID);
    Context::new(&vfs, &writer, vfs.root()).setattr(&f, attr).unwrap();
    assert_eq!((f.stat().mode & 0o7777, f.stat().size), (0o6755, 0), "a mode given with the size");
}

#[test]
fn a_refused_setattr_changes_nothing() {
    let vfs = setup();
    let f = vfs.process(Credentials::root()).resolve("/f", true).unwrap();
    let before = f.stat();
    // Bob may write the file (CAP_DAC_OVERRIDE), so the size change alone
    // would pass, but he may not give it to himself: nothing happens.
    let bob = bob_with(Capabilities::DAC_OVERRIDE);
    let ctx = Context::new(&vfs, &bob, vfs.root());
    let attr = SetAttr { size: Some(0), uid: Some(BOB), mode: Some(0o777), ..SetAttr::default() };
    assert_eq!(ctx.setattr(&f, attr), Err(Errno::EPERM));
    assert_eq!(f.stat(), before);
    // A time change refused after a passing size and mode: the same.
    let alice = Credentials::user(ALICE, ALICE, []);
    let ctx = Context::new(&vfs, &alice, vfs.root());
    let attr = SetAttr { size: Some(1), mode: Some(0o644), ..SetAttr::default() };
    ctx.setattr(&f, attr).unwrap();
    let after = f.stat();
    assert_eq!((after.size, after.mode & 0o7777), (1, 0o644));
    let bobs = Context::new(&vfs, &bob, vfs.root());
    let attr = SetAttr { size: Some(0), atime: SetTime::At(Default::default()), ..SetAttr::default() };
    assert_eq!(bobs.setattr(&f, attr), Err(Errno::EPERM));
    assert_eq!(f.stat(), after);
    // The access check uses the capabilities too.
    assert_eq!(ctx.access("/f", Access::READ, vfscale::AtFlags::NONE), Ok(()));
}

/// Permission checks read the owner and group as the last `chown` left
/// them (the inode keeps a copy of both beside the mode, which a check
/// reads instead of the attributes every write changes).
#[test]
fn permission_checks_follow_chown_and_chgrp() {
    let vfs = setup();
    let root = vfs.process(Credentials::root());
    let bob = vfs.process(Credentials::user(BOB, BOB, [BOB]));
    root.chmod("/f", 0o640).unwrap();
    assert_eq!(bob.open("/f", OpenFlags::WRONLY, 0), Err(Errno::EACCES));
    root.chown("/f", Some(BOB), None).unwrap();
    bob.close(bob.open("/f", OpenFlags::WRONLY, 0).unwrap()).unwrap();
    root.chown("/f", Some(ALICE), Some(BOB)).unwrap();
    assert_eq!(bob.open("/f", OpenFlags::WRONLY, 0), Err(Errno::EACCES));
    bob.close(bob.open("/f", OpenFlags::RDONLY, 0).unwrap()).unwrap();
    root.chown("/f", None, Some(ALICE)).unwrap();
    assert_eq!(bob.open("/f", OpenFlags::RDONLY, 0), Err(Errno::EACCES));
}
