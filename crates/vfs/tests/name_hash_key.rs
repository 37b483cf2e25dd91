//! The name hash's secret key (`vfscale::randomize_name_hash`): drawn
//! before the first instance, it places every name the same way for the
//! whole process, and it cannot change once an instance exists. One test
//! alone in its binary: the key is the process's.

use vfscale::{Credentials, Errno, OpenFlags, Vfs};

#[test]
fn a_key_drawn_before_the_first_instance_holds_for_every_name() {
    assert!(vfscale::randomize_name_hash(), "no instance was made yet");
    let vfs = Vfs::default();
    assert!(!vfscale::randomize_name_hash(), "an instance exists: its names are hashed under the key");
    let p = vfs.process(Credentials::root());
    p.mkdir("/d", 0o755).unwrap();
    // Enough names to split the directory's buckets and grow its table.
    let mut names: Vec<String> = (0..2000).map(|n| format!("/d/f{n}")).collect();
    for name in &names {
        p.close(p.open(name, OpenFlags::CREAT | OpenFlags::EXCL | OpenFlags::WRONLY, 0o644).unwrap()).unwrap();
    }
    for n in (0..2000).step_by(3) {
        p.rename(format!("/d/f{n}"), format!("/d/g{n}")).unwrap();
        names[n] = format!("/d/g{n}");
    }
    for n in (1..2000).step_by(7) {
        p.unlink(&names[n]).unwrap();
        assert_eq!(p.stat(&names[n]), Err(Errno::ENOENT));
    }
    let kept: Vec<&String> = (0..2000).filter(|n| n % 7 != 1).map(|n| &names[n]).collect();
    for name in &kept {
        assert!(p.stat(name.as_str()).is_ok(), "{name} is lost");
    }
    let mut listed: Vec<String> = p
        .list_dir("/d")
        .unwrap()
        .iter()
        .filter(|e| e.name != b"." && e.name != b"..")
        .map(|e| format!("/d/{}", String::from_utf8_lossy(&e.name)))
        .collect();
    listed.sort();
    let mut expected: Vec<String> = kept.into_iter().cloned().collect();
    expected.sort();
    assert_eq!(listed, expected);
}
