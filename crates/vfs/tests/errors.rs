//! Every error case of the VFS system calls, each checked in the scalable
//! design and in the "before" design, and each checked to leave the tree
//! exactly as it was (names, types, modes, owners, link counts, sizes and
//! timestamps, and the number of live inodes).
//!
//! Also: negative dentries never hide a name created after the miss, their
//! cap bounds the dcache, and `readdir` returns every name that exists for a
//! whole listing exactly once while other names come and go.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::thread;
use vfscale::config::NegativeDentries;
use vfscale::path::{NAME_MAX, PATH_MAX};
use vfscale::{
    Credentials, Errno, Fd, FileType, OpenFlags, Process, SetTime, Stat, Timespec, Vfs, VfsConfig, VfsResult, Whence,
    MAX_SYMLINKS,
};
use vfscale_sync::test_support::stress_iters;
use vfscale_sync::test_support::wait_until;

/// The scalable design and the "before" design of every variant.
fn configs() -> [VfsConfig; 2] {
    [VfsConfig::default(), VfsConfig::before()]
}

/// Runs `test` on a fresh filesystem of each config, with a root process.
fn in_each_config(test: impl Fn(&Vfs, &Process)) {
    for config in configs() {
        let vfs = Vfs::new(config);
        let root = vfs.process(Credentials::root());
        test(&vfs, &root);
    }
}

fn alice(vfs: &Vfs) -> Process {
    vfs.process(Credentials::user(1000, 1000, []))
}

fn bob(vfs: &Vfs) -> Process {
    vfs.process(Credentials::user(1001, 1001, []))
}

/// Everything a failed call must leave alone: every path's `lstat` (taken
/// by a separate root process, so no descriptor of the test is touched)
/// and the filesystem's inode and byte counts.
#[derive(Debug, PartialEq, Eq)]
struct Snapshot {
    tree: BTreeMap<Vec<u8>, VfsResult<Stat>>,
    inodes: usize,
    bytes: u64,
}

fn snapshot(vfs: &Vfs) -> Snapshot {
    let root = vfs.process(Credentials::root());
    let mut tree = BTreeMap::new();
    let mut pending = vec![b"/".to_vec()];
    while let Some(dir) = pending.pop() {
        tree.insert(dir.clone(), root.lstat(&dir));
        let Ok(entries) = root.list_dir(&dir) else { continue };
        for entry in entries {
            if entry.name == b"." || entry.name == b".." {
                continue;
            }
            let mut path = dir.clone();
            if path != b"/" {
                path.push(b'/');
            }
            path.extend_from_slice(&entry.name);
            if entry.file_type == FileType::Directory {
                pending.push(path);
            } else {
                tree.insert(path.clone(), root.lstat(&path));
            }
        }
    }
    let stats = vfs.statfs();
    Snapshot { tree, inodes: stats.inodes, bytes: stats.bytes }
}

/// Asserts that `op` fails with `expected` and changes nothing.
fn fails<T: std::fmt::Debug>(vfs: &Vfs, expected: Errno, what: &str, op: impl FnOnce() -> VfsResult<T>) {
    let before = snapshot(vfs);
    let result = op();
    assert_eq!(result.as_ref().err(), Some(&expected), "{what}: got {result:?} in {:?}", vfs.config());
    let after = snapshot(vfs);
    assert_eq!(before, after, "{what}: the failed call changed the tree in {:?}", vfs.config());
}

fn create_file(p: &Process, path: &str, perm: u32, contents: &[u8]) {
    let fd = p.open(path, OpenFlags::CREAT | OpenFlags::EXCL | OpenFlags::WRONLY, perm).unwrap();
    assert_eq!(p.write(fd, contents).unwrap(), contents.len());
    p.close(fd).unwrap();
}

fn names(p: &Process, dir: &str) -> Vec<Vec<u8>> {
    p.list_dir(dir).unwrap().into_iter().map(|e| e.name).collect()
}

fn offset(p: &Process, fd: Fd) -> u64 {
    p.lseek(fd, 0, Whence::Cur).unwrap()
}

// ---- path name checks ----

#[test]
fn empty_path_is_enoent() {
    in_each_config(|vfs, root| {
        fails(vfs, Errno::ENOENT, "stat(\"\")", || root.stat(""));
        fails(vfs, Errno::ENOENT, "lstat(\"\")", || root.lstat(""));
        fails(vfs, Errno::ENOENT, "mkdir(\"\")", || root.mkdir("", 0o755));
        fails(vfs, Errno::ENOENT, "open(\"\", O_CREAT)", || root.open("", OpenFlags::CREAT | OpenFlags::WRONLY, 0o644));
        fails(vfs, Errno::ENOENT, "unlink(\"\")", || root.unlink(""));
        fails(vfs, Errno::ENOENT, "rmdir(\"\")", || root.rmdir(""));
        fails(vfs, Errno::ENOENT, "symlink to \"\"", || root.symlink("", "/l"));
        fails(vfs, Errno::ENOENT, "rename(\"\", ...)", || root.rename("", "/x"));
    });
}

#[test]
fn nul_byte_is_einval() {
    in_each_config(|vfs, root| {
        root.mkdir("/a", 0o755).unwrap();
        fails(vfs, Errno::EINVAL, "stat with NUL", || root.stat(b"/a\0/b"));
        fails(vfs, Errno::EINVAL, "mkdir with NUL", || root.mkdir(b"/x\0y", 0o755));
        fails(vfs, Errno::EINVAL, "open O_CREAT with NUL", || {
            root.open(b"/f\0", OpenFlags::CREAT | OpenFlags::WRONLY, 0o644)
        });
        fails(vfs, Errno::EINVAL, "rmdir with NUL", || root.rmdir(b"/a\0"));
        fails(vfs, Errno::EINVAL, "symlink target with NUL", || root.symlink(b"/a\0b", "/l"));
        fails(vfs, Errno::EINVAL, "rename to a name with NUL", || root.rename("/a", b"/b\0"));
    });
}

#[test]
fn component_longer_than_255_bytes_is_enametoolong() {
    in_each_config(|vfs, root| {
        let ok = format!("/{}", "n".repeat(NAME_MAX));
        let long = format!("/{}", "n".repeat(NAME_MAX + 1));
        root.mkdir("/d", 0o755).unwrap();
        create_file(root, "/f", 0o644, b"");
        fails(vfs, Errno::ENAMETOOLONG, "stat", || root.stat(&long));
        fails(vfs, Errno::ENAMETOOLONG, "stat through it", || root.stat(format!("{long}/x")));
        fails(vfs, Errno::ENAMETOOLONG, "mkdir", || root.mkdir(&long, 0o755));
        fails(vfs, Errno::ENAMETOOLONG, "open O_CREAT", || {
            root.open(&long, OpenFlags::CREAT | OpenFlags::WRONLY, 0o644)
        });
        fails(vfs, Errno::ENAMETOOLONG, "symlink", || root.symlink("/f", &long));
        fails(vfs, Errno::ENAMETOOLONG, "link", || root.link("/f", &long));
        fails(vfs, Errno::ENAMETOOLONG, "rename to it", || root.rename("/f", &long));
        fails(vfs, Errno::ENAMETOOLONG, "unlink", || root.unlink(&long));
        fails(vfs, Errno::ENAMETOOLONG, "rmdir", || root.rmdir(&long));
        // 255 bytes is allowed.
        root.mkdir(&ok, 0o755).unwrap();
        assert!(root.stat(&ok).unwrap().mode & 0o170000 == 0o040000);
    });
}

#[test]
fn path_of_4096_bytes_is_enametoolong() {
    in_each_config(|vfs, root| {
        root.mkdir("/d", 0o755).unwrap();
        // "/d" preceded by slashes, PATH_MAX - 1 bytes in all: still valid.
        let longest = format!("{}d", "/".repeat(PATH_MAX - 2));
        assert_eq!(longest.len(), PATH_MAX - 1);
        assert!(root.stat(&longest).is_ok());
        let too_long = format!("{}d", "/".repeat(PATH_MAX - 1));
        assert_eq!(too_long.len(), PATH_MAX);
        fails(vfs, Errno::ENAMETOOLONG, "stat", || root.stat(&too_long));
        fails(vfs, Errno::ENAMETOOLONG, "rmdir", || root.rmdir(&too_long));
        let new = format!("{}new", "/".repeat(PATH_MAX));
        fails(vfs, Errno::ENAMETOOLONG, "mkdir", || root.mkdir(&new, 0o755));
        fails(vfs, Errno::ENAMETOOLONG, "open O_CREAT", || {
            root.open(&new, OpenFlags::CREAT | OpenFlags::WRONLY, 0o644)
        });
        fails(vfs, Errno::ENAMETOOLONG, "symlink target", || root.symlink(&too_long, "/l"));
    });
}

// ---- ENOTDIR ----

#[test]
fn enotdir_walk_through_a_file() {
    in_each_config(|vfs, root| {
        create_file(root, "/f", 0o644, b"x");
        fails(vfs, Errno::ENOTDIR, "stat /f/x", || root.stat("/f/x"));
        fails(vfs, Errno::ENOTDIR, "mkdir /f/x", || root.mkdir("/f/x", 0o755));
        fails(vfs, Errno::ENOTDIR, "open O_CREAT /f/x", || {
            root.open("/f/x", OpenFlags::CREAT | OpenFlags::WRONLY, 0o644)
        });
        fails(vfs, Errno::ENOTDIR, "stat /f/..", || root.stat("/f/.."));
    });
}

#[test]
fn enotdir_trailing_slash_on_a_file() {
    in_each_config(|vfs, root| {
        create_file(root, "/f", 0o644, b"x");
        root.symlink("/f", "/l").unwrap();
        fails(vfs, Errno::ENOTDIR, "stat /f/", || root.stat("/f/"));
        fails(vfs, Errno::ENOTDIR, "stat /l/", || root.stat("/l/"));
        fails(vfs, Errno::ENOTDIR, "open /f/", || root.open("/f/", OpenFlags::RDONLY, 0));
        fails(vfs, Errno::ENOTDIR, "unlink /f/", || root.unlink("/f/"));
        fails(vfs, Errno::ENOTDIR, "rename /f/ /g", || root.rename("/f/", "/g"));
    });
}

#[test]
fn enotdir_o_directory_on_a_file() {
    in_each_config(|vfs, root| {
        create_file(root, "/f", 0o644, b"x");
        fails(vfs, Errno::ENOTDIR, "open O_DIRECTORY", || root.open("/f", OpenFlags::DIRECTORY, 0));
        fails(vfs, Errno::ENOTDIR, "list_dir", || root.list_dir("/f"));
    });
}

#[test]
fn enotdir_rmdir_of_a_file() {
    in_each_config(|vfs, root| {
        create_file(root, "/f", 0o644, b"x");
        root.symlink("/", "/l").unwrap();
        fails(vfs, Errno::ENOTDIR, "rmdir /f", || root.rmdir("/f"));
        fails(vfs, Errno::ENOTDIR, "rmdir of a symlink to a directory", || root.rmdir("/l"));
    });
}

// ---- EISDIR ----

#[test]
fn eisdir_unlink_a_directory() {
    in_each_config(|vfs, root| {
        root.mkdir("/d", 0o755).unwrap();
        fails(vfs, Errno::EISDIR, "unlink /d", || root.unlink("/d"));
        fails(vfs, Errno::EISDIR, "unlink /d/", || root.unlink("/d/"));
        fails(vfs, Errno::EISDIR, "unlink /d/.", || root.unlink("/d/."));
    });
}

#[test]
fn eisdir_open_a_directory_for_write() {
    in_each_config(|vfs, root| {
        root.mkdir("/d", 0o755).unwrap();
        fails(vfs, Errno::EISDIR, "open O_WRONLY", || root.open("/d", OpenFlags::WRONLY, 0));
        fails(vfs, Errno::EISDIR, "open O_RDWR", || root.open("/d", OpenFlags::RDWR, 0));
        fails(vfs, Errno::EISDIR, "open / O_RDWR", || root.open("/", OpenFlags::RDWR, 0));
        // Reading is fine.
        let fd = root.open("/d", OpenFlags::RDONLY, 0).unwrap();
        root.close(fd).unwrap();
    });
}

#[test]
fn eisdir_o_creat_on_a_directory() {
    in_each_config(|vfs, root| {
        root.mkdir("/d", 0o755).unwrap();
        fails(vfs, Errno::EISDIR, "open /d O_CREAT", || root.open("/d", OpenFlags::CREAT | OpenFlags::RDONLY, 0o644));
        fails(vfs, Errno::EISDIR, "open /d/ O_CREAT", || root.open("/d/", OpenFlags::CREAT | OpenFlags::RDONLY, 0o644));
        fails(vfs, Errno::EISDIR, "open /new/ O_CREAT", || {
            root.open("/new/", OpenFlags::CREAT | OpenFlags::WRONLY, 0o644)
        });
    });
}

// ---- EEXIST ----

#[test]
fn eexist_mkdir_existing() {
    in_each_config(|vfs, root| {
        root.mkdir("/d", 0o755).unwrap();
        create_file(root, "/f", 0o644, b"");
        fails(vfs, Errno::EEXIST, "mkdir /d", || root.mkdir("/d", 0o700));
        fails(vfs, Errno::EEXIST, "mkdir /f", || root.mkdir("/f", 0o700));
        fails(vfs, Errno::EEXIST, "mkdir /", || root.mkdir("/", 0o700));
        // Even without write permission on the parent, an existing name is EEXIST.
        fails(vfs, Errno::EEXIST, "mkdir /d by alice", || alice(vfs).mkdir("/d", 0o700));
    });
}

#[test]
fn eexist_o_creat_o_excl_existing() {
    in_each_config(|vfs, root| {
        create_file(root, "/f", 0o644, b"data");
        root.symlink("/missing", "/dangling").unwrap();
        let excl = OpenFlags::CREAT | OpenFlags::EXCL | OpenFlags::WRONLY;
        fails(vfs, Errno::EEXIST, "O_EXCL on a file", || root.open("/f", excl, 0o600));
        fails(vfs, Errno::EEXIST, "O_EXCL on a dangling symlink", || root.open("/dangling", excl, 0o600));
        fails(vfs, Errno::EEXIST, "O_EXCL with O_TRUNC", || root.open("/f", excl | OpenFlags::TRUNC, 0o600));
    });
}

#[test]
fn eexist_link_onto_existing() {
    in_each_config(|vfs, root| {
        create_file(root, "/f", 0o644, b"");
        create_file(root, "/g", 0o644, b"");
        root.mkdir("/d", 0o755).unwrap();
        fails(vfs, Errno::EEXIST, "link onto a file", || root.link("/f", "/g"));
        fails(vfs, Errno::EEXIST, "link onto itself", || root.link("/f", "/f"));
        fails(vfs, Errno::EEXIST, "link onto a directory", || root.link("/f", "/d"));
    });
}

#[test]
fn eexist_symlink_onto_existing() {
    in_each_config(|vfs, root| {
        create_file(root, "/f", 0o644, b"");
        root.symlink("/f", "/l").unwrap();
        fails(vfs, Errno::EEXIST, "symlink onto a file", || root.symlink("/x", "/f"));
        fails(vfs, Errno::EEXIST, "symlink onto a symlink", || root.symlink("/x", "/l"));
        fails(vfs, Errno::EEXIST, "symlink onto /", || root.symlink("/x", "/"));
    });
}

#[test]
fn eexist_mkdir_dot() {
    in_each_config(|vfs, root| {
        root.mkdir("/a", 0o755).unwrap();
        fails(vfs, Errno::EEXIST, "mkdir a/.", || root.mkdir("/a/.", 0o755));
        fails(vfs, Errno::EEXIST, "mkdir a/..", || root.mkdir("/a/..", 0o755));
        fails(vfs, Errno::EEXIST, "mkdir .", || root.mkdir(".", 0o755));
    });
}

// ---- ENOTEMPTY ----

#[test]
fn enotempty_rmdir_non_empty() {
    in_each_config(|vfs, root| {
        root.mkdir("/a", 0o755).unwrap();
        root.mkdir("/a/sub", 0o755).unwrap();
        root.mkdir("/b", 0o755).unwrap();
        create_file(root, "/b/f", 0o644, b"");
        fails(vfs, Errno::ENOTEMPTY, "rmdir with a subdirectory", || root.rmdir("/a"));
        fails(vfs, Errno::ENOTEMPTY, "rmdir with a file", || root.rmdir("/b"));
        // Still usable afterwards: creating inside it works.
        root.mkdir("/a/other", 0o755).unwrap();
    });
}

#[test]
fn enotempty_rename_dir_over_non_empty_dir() {
    in_each_config(|vfs, root| {
        root.mkdir("/src", 0o755).unwrap();
        root.mkdir("/dst", 0o755).unwrap();
        create_file(root, "/dst/f", 0o644, b"");
        root.mkdir("/x", 0o755).unwrap();
        root.mkdir("/x/dst", 0o755).unwrap();
        root.mkdir("/x/dst/inner", 0o755).unwrap();
        fails(vfs, Errno::ENOTEMPTY, "rename over a dir holding a file", || root.rename("/src", "/dst"));
        fails(vfs, Errno::ENOTEMPTY, "rename across dirs over a dir holding a dir", || root.rename("/src", "/x/dst"));
        // The target's ancestor contains the source.
        fails(vfs, Errno::ENOTEMPTY, "rename onto an ancestor", || root.rename("/x/dst/inner", "/x"));
    });
}

#[test]
fn enotempty_rmdir_dotdot() {
    in_each_config(|vfs, root| {
        root.mkdir("/a", 0o755).unwrap();
        root.mkdir("/a/b", 0o755).unwrap();
        fails(vfs, Errno::ENOTEMPTY, "rmdir a/b/..", || root.rmdir("/a/b/.."));
        fails(vfs, Errno::ENOTEMPTY, "rmdir a/..", || root.rmdir("/a/.."));
    });
}

// ---- EACCES ----

#[test]
fn eacces_no_search_permission_on_a_component() {
    in_each_config(|vfs, root| {
        root.mkdir("/locked", 0o766).unwrap();
        create_file(root, "/locked/f", 0o666, b"x");
        root.mkdir("/locked/sub", 0o777).unwrap();
        let alice = alice(vfs);
        fails(vfs, Errno::EACCES, "stat through it", || alice.stat("/locked/f"));
        fails(vfs, Errno::EACCES, "stat a missing name in it", || alice.stat("/locked/missing"));
        fails(vfs, Errno::EACCES, "open through it", || alice.open("/locked/f", OpenFlags::RDONLY, 0));
        fails(vfs, Errno::EACCES, "create in it", || {
            alice.open("/locked/new", OpenFlags::CREAT | OpenFlags::WRONLY, 0o644)
        });
        fails(vfs, Errno::EACCES, "mkdir below it", || alice.mkdir("/locked/sub/x", 0o755));
        fails(vfs, Errno::EACCES, "unlink in it", || alice.unlink("/locked/f"));
        fails(vfs, Errno::EACCES, "chdir into it", || alice.chdir("/locked"));
        // Root searches anything; alice may still list it (read bit set).
        assert!(root.stat("/locked/f").is_ok());
        assert_eq!(alice.list_dir("/locked").unwrap().len(), 4);
    });
}

#[test]
fn eacces_no_write_permission_to_create() {
    in_each_config(|vfs, root| {
        root.mkdir("/ro", 0o555).unwrap();
        create_file(root, "/f", 0o644, b"");
        let alice = alice(vfs);
        fails(vfs, Errno::EACCES, "open O_CREAT", || {
            alice.open("/ro/new", OpenFlags::CREAT | OpenFlags::WRONLY, 0o644)
        });
        fails(vfs, Errno::EACCES, "mkdir", || alice.mkdir("/ro/new", 0o755));
        fails(vfs, Errno::EACCES, "symlink", || alice.symlink("/f", "/ro/new"));
        fails(vfs, Errno::EACCES, "link", || alice.link("/f", "/ro/new"));
        root.mkdir("/mine", 0o755).unwrap();
        root.chown("/mine", Some(1000), Some(1000)).unwrap();
        alice.mkdir("/mine/x", 0o755).unwrap();
        fails(vfs, Errno::EACCES, "rename into it", || alice.rename("/mine/x", "/ro/x"));
    });
}

#[test]
fn eacces_no_write_permission_to_unlink() {
    in_each_config(|vfs, root| {
        root.mkdir("/ro", 0o555).unwrap();
        create_file(root, "/ro/f", 0o666, b"x");
        root.mkdir("/ro/sub", 0o777).unwrap();
        let alice = alice(vfs);
        fails(vfs, Errno::EACCES, "unlink", || alice.unlink("/ro/f"));
        fails(vfs, Errno::EACCES, "rmdir", || alice.rmdir("/ro/sub"));
        // `may_delete` asks for permission before it looks at the type.
        fails(vfs, Errno::EACCES, "unlink of a directory", || alice.unlink("/ro/sub"));
        fails(vfs, Errno::EACCES, "rename away", || alice.rename("/ro/f", "/ro/sub/f"));
        // Root may.
        root.unlink("/ro/f").unwrap();
    });
}

#[test]
fn eacces_open_for_read_without_r_bit() {
    in_each_config(|vfs, root| {
        create_file(root, "/wo", 0o222, b"secret");
        create_file(root, "/mine", 0o044, b"secret");
        root.chown("/mine", Some(1000), Some(1000)).unwrap();
        let alice = alice(vfs);
        fails(vfs, Errno::EACCES, "open O_RDONLY", || alice.open("/wo", OpenFlags::RDONLY, 0));
        fails(vfs, Errno::EACCES, "open O_RDWR", || alice.open("/wo", OpenFlags::RDWR, 0));
        // The owner class is the only one consulted, even if others may read.
        fails(vfs, Errno::EACCES, "owner without r", || alice.open("/mine", OpenFlags::RDONLY, 0));
        fails(vfs, Errno::EACCES, "O_TRUNC needs w", || alice.open("/mine", OpenFlags::RDONLY | OpenFlags::TRUNC, 0));
        root.mkdir("/noread", 0o311).unwrap();
        fails(vfs, Errno::EACCES, "list a dir without r", || alice.list_dir("/noread"));
        // Write-only access is allowed and root reads anything.
        let fd = alice.open("/wo", OpenFlags::WRONLY, 0).unwrap();
        alice.close(fd).unwrap();
        let fd = root.open("/wo", OpenFlags::RDONLY, 0).unwrap();
        root.close(fd).unwrap();
    });
}

// ---- EPERM ----

#[test]
fn eperm_chmod_by_non_owner() {
    in_each_config(|vfs, root| {
        create_file(root, "/f", 0o666, b"");
        root.mkdir("/d", 0o777).unwrap();
        let alice = alice(vfs);
        fails(vfs, Errno::EPERM, "chmod a file", || alice.chmod("/f", 0o777));
        fails(vfs, Errno::EPERM, "chmod a dir", || alice.chmod("/d", 0o700));
        fails(vfs, Errno::EPERM, "chmod /", || alice.chmod("/", 0o777));
    });
}

#[test]
fn eperm_chown_by_non_owner() {
    in_each_config(|vfs, root| {
        create_file(root, "/f", 0o666, b"");
        create_file(root, "/hers", 0o644, b"");
        root.chown("/hers", Some(1000), Some(1000)).unwrap();
        let alice = alice(vfs);
        fails(vfs, Errno::EPERM, "take a file", || alice.chown("/f", Some(1000), None));
        fails(vfs, Errno::EPERM, "chgrp a foreign file", || alice.chown("/f", None, Some(1000)));
        fails(vfs, Errno::EPERM, "give a file away", || alice.chown("/hers", Some(1001), None));
        fails(vfs, Errno::EPERM, "chgrp to a group she is not in", || alice.chown("/hers", None, Some(5)));
        fails(vfs, Errno::EPERM, "chown by bob", || bob(vfs).chown("/hers", Some(1001), None));
    });
}

#[test]
fn eperm_unlink_in_sticky_dir_by_non_owner() {
    in_each_config(|vfs, root| {
        root.mkdir("/tmp", 0o777).unwrap();
        root.chmod("/tmp", 0o1777).unwrap();
        let alice = alice(vfs);
        let bob = bob(vfs);
        create_file(&alice, "/tmp/a", 0o666, b"alice's");
        alice.mkdir("/tmp/adir", 0o777).unwrap();
        fails(vfs, Errno::EPERM, "unlink", || bob.unlink("/tmp/a"));
        fails(vfs, Errno::EPERM, "rmdir", || bob.rmdir("/tmp/adir"));
        fails(vfs, Errno::EPERM, "unlink of a directory", || bob.unlink("/tmp/adir"));
        fails(vfs, Errno::EISDIR, "unlink of a directory/", || bob.unlink("/tmp/adir/"));
        fails(vfs, Errno::EPERM, "rename away", || bob.rename("/tmp/a", "/tmp/b"));
        create_file(&bob, "/tmp/bobs", 0o666, b"");
        fails(vfs, Errno::EPERM, "rename over", || bob.rename("/tmp/bobs", "/tmp/a"));
        // The owner may.
        alice.unlink("/tmp/a").unwrap();
        assert_eq!(root.stat("/tmp/a"), Err(Errno::ENOENT));
    });
}

#[test]
fn eperm_link_to_a_directory() {
    in_each_config(|vfs, root| {
        root.mkdir("/d", 0o755).unwrap();
        fails(vfs, Errno::EPERM, "link /d", || root.link("/d", "/d2"));
        fails(vfs, Errno::EPERM, "link /", || root.link("/", "/r"));
        fails(vfs, Errno::EPERM, "link /d/.", || root.link("/d/.", "/d3"));
    });
}

/// Linux `do_linkat` looks the new name up first (`filename_create`:
/// EEXIST if it exists, then ENOENT for a trailing slash), then
/// `vfs_link` checks write permission on its directory (`may_create`,
/// EACCES) and only then refuses a directory (EPERM).
#[test]
fn link_checks_the_new_name_before_refusing_a_directory() {
    in_each_config(|vfs, root| {
        root.mkdir("/d", 0o755).unwrap();
        create_file(root, "/f", 0o644, b"");
        create_file(root, "/g", 0o644, b"");
        root.mkdir("/ro", 0o555).unwrap();
        let alice = alice(vfs);
        root.mkdir("/hers", 0o755).unwrap();
        root.chown("/hers", Some(1000), Some(1000)).unwrap();
        fails(vfs, Errno::EEXIST, "link /d onto /f", || root.link("/d", "/f"));
        fails(vfs, Errno::EEXIST, "link /f onto /g/", || root.link("/f", "/g/"));
        fails(vfs, Errno::EACCES, "alice links her dir into /ro", || alice.link("/hers", "/ro/new"));
    });
}

/// `symlink("x", "new/")` is ENOENT on Linux (`filename_create`: a
/// trailing slash asks for a directory, which symlink does not make).
#[test]
fn enoent_symlink_with_a_trailing_slash() {
    in_each_config(|vfs, root| {
        create_file(root, "/f", 0o644, b"");
        fails(vfs, Errno::ENOENT, "symlink to new/", || root.symlink("/f", "/new/"));
        fails(vfs, Errno::EEXIST, "symlink to existing/", || root.symlink("/x", "/f/"));
    });
}

#[test]
fn eperm_utimens_explicit_times_by_non_owner() {
    in_each_config(|vfs, root| {
        create_file(root, "/f", 0o666, b"");
        let alice = alice(vfs);
        let t = SetTime::At(Timespec { sec: 1, nsec: 2 });
        fails(vfs, Errno::EPERM, "both explicit", || alice.utimens("/f", t, t));
        fails(vfs, Errno::EPERM, "atime explicit", || alice.utimens("/f", t, SetTime::Now));
        fails(vfs, Errno::EPERM, "mtime explicit", || alice.utimens("/f", SetTime::Omit, t));
        // UTIME_NOW needs only write permission.
        alice.utimens("/f", SetTime::Now, SetTime::Now).unwrap();
        // Without write permission even UTIME_NOW is refused.
        root.chmod("/f", 0o644).unwrap();
        fails(vfs, Errno::EACCES, "UTIME_NOW without w", || alice.utimens("/f", SetTime::Now, SetTime::Now));
        root.utimens("/f", t, t).unwrap();
        assert_eq!(root.stat("/f").unwrap().mtime, Timespec { sec: 1, nsec: 2 });
    });
}

// ---- EBUSY ----

#[test]
fn ebusy_rmdir_root() {
    in_each_config(|vfs, root| {
        fails(vfs, Errno::EBUSY, "rmdir /", || root.rmdir("/"));
        fails(vfs, Errno::EBUSY, "rmdir //", || root.rmdir("//"));
    });
}

#[test]
fn ebusy_rename_root_or_dot() {
    in_each_config(|vfs, root| {
        root.mkdir("/d", 0o755).unwrap();
        fails(vfs, Errno::EBUSY, "rename /", || root.rename("/", "/x"));
        fails(vfs, Errno::EBUSY, "rename .", || root.rename(".", "/x"));
        fails(vfs, Errno::EBUSY, "rename /d/.", || root.rename("/d/.", "/x"));
        fails(vfs, Errno::EBUSY, "rename to /", || root.rename("/d", "/"));
        fails(vfs, Errno::EBUSY, "rename to .", || root.rename("/d", "/d/."));
        fails(vfs, Errno::EBUSY, "rename ..", || root.rename("/d/..", "/x"));
    });
}

// ---- EINVAL ----

#[test]
fn einval_rename_dir_into_own_subtree() {
    in_each_config(|vfs, root| {
        root.mkdir("/a", 0o755).unwrap();
        root.mkdir("/a/b", 0o755).unwrap();
        root.mkdir("/a/b/c", 0o755).unwrap();
        fails(vfs, Errno::EINVAL, "into its child", || root.rename("/a", "/a/x"));
        fails(vfs, Errno::EINVAL, "into a grandchild", || root.rename("/a", "/a/b/x"));
        fails(vfs, Errno::EINVAL, "over its own descendant", || root.rename("/a", "/a/b/c"));
        fails(vfs, Errno::EINVAL, "into itself from inside", || root.rename("/a/b", "/a/b/c/d"));
    });
}

#[test]
fn einval_rmdir_dot() {
    in_each_config(|vfs, root| {
        root.mkdir("/a", 0o755).unwrap();
        fails(vfs, Errno::EINVAL, "rmdir /a/.", || root.rmdir("/a/."));
        fails(vfs, Errno::EINVAL, "rmdir .", || root.rmdir("."));
    });
}

#[test]
fn einval_readlink_of_a_non_symlink() {
    in_each_config(|vfs, root| {
        create_file(root, "/f", 0o644, b"x");
        root.mkdir("/d", 0o755).unwrap();
        fails(vfs, Errno::EINVAL, "readlink a file", || root.readlink("/f"));
        fails(vfs, Errno::EINVAL, "readlink a dir", || root.readlink("/d"));
        fails(vfs, Errno::EINVAL, "readlink /", || root.readlink("/"));
    });
}

#[test]
fn einval_lseek_to_negative() {
    in_each_config(|vfs, root| {
        create_file(root, "/f", 0o644, b"hello");
        let fd = root.open("/f", OpenFlags::RDONLY, 0).unwrap();
        assert_eq!(root.lseek(fd, 2, Whence::Set).unwrap(), 2);
        fails(vfs, Errno::EINVAL, "SEEK_SET -1", || root.lseek(fd, -1, Whence::Set));
        fails(vfs, Errno::EINVAL, "SEEK_CUR -3", || root.lseek(fd, -3, Whence::Cur));
        fails(vfs, Errno::EINVAL, "SEEK_END -6", || root.lseek(fd, -6, Whence::End));
        assert_eq!(offset(root, fd), 2, "a failed lseek moved the offset");
        let mut buf = [0u8; 8];
        assert_eq!(root.read(fd, &mut buf).unwrap(), 3);
        assert_eq!(&buf[..3], b"llo");
        fails(vfs, Errno::EINVAL, "pread at -1", || root.pread(fd, &mut buf, -1));
        root.close(fd).unwrap();
    });
}

/// Linux's access mode 3: read and write permission are checked, and the
/// descriptor can neither read nor write (EBADF).
#[test]
fn access_mode_3_needs_read_write_permission_and_gives_no_io() {
    in_each_config(|vfs, root| {
        create_file(root, "/f", 0o644, b"x");
        let mode3 = OpenFlags(3);
        let fd = root.open("/f", mode3, 0).unwrap();
        let mut buf = [0u8; 4];
        fails(vfs, Errno::EBADF, "read on mode 3", || root.read(fd, &mut buf));
        fails(vfs, Errno::EBADF, "write on mode 3", || root.write(fd, b"y"));
        root.close(fd).unwrap();
        root.chmod("/f", 0o444).unwrap();
        let alice = vfs.process(Credentials::user(1000, 1000, []));
        fails(vfs, Errno::EACCES, "mode 3 without write permission", || alice.open("/f", mode3, 0));
        assert_eq!(root.stat("/f").unwrap().size, 1);
    });
}

#[test]
fn einval_ftruncate_negative_or_readonly() {
    in_each_config(|vfs, root| {
        create_file(root, "/f", 0o644, b"hello");
        let rw = root.open("/f", OpenFlags::RDWR, 0).unwrap();
        let ro = root.open("/f", OpenFlags::RDONLY, 0).unwrap();
        fails(vfs, Errno::EINVAL, "negative length", || root.ftruncate(rw, -1));
        fails(vfs, Errno::EINVAL, "read-only descriptor", || root.ftruncate(ro, 0));
        fails(vfs, Errno::EINVAL, "read-only descriptor, growing", || root.ftruncate(ro, 10));
        let dir = root.open("/", OpenFlags::RDONLY, 0).unwrap();
        fails(vfs, Errno::EINVAL, "a directory", || root.ftruncate(dir, 0));
        let mut buf = [0u8; 8];
        assert_eq!(root.pread(ro, &mut buf, 0).unwrap(), 5);
        assert_eq!(&buf[..5], b"hello");
        for fd in [rw, ro, dir] {
            root.close(fd).unwrap();
        }
    });
}

/// Linux `do_sys_ftruncate` rejects a negative length before it looks the
/// descriptor up.
#[test]
fn einval_ftruncate_negative_length_before_ebadf() {
    in_each_config(|vfs, root| {
        fails(vfs, Errno::EINVAL, "ftruncate(bad fd, -1)", || root.ftruncate(77, -1));
    });
}

// ---- ELOOP ----

#[test]
fn eloop_symlink_cycle() {
    in_each_config(|vfs, root| {
        root.symlink("/l2", "/l1").unwrap();
        root.symlink("l1", "/l2").unwrap();
        root.symlink("self", "/self").unwrap();
        fails(vfs, Errno::ELOOP, "stat /l1", || root.stat("/l1"));
        fails(vfs, Errno::ELOOP, "stat through /l2", || root.stat("/l2/x"));
        fails(vfs, Errno::ELOOP, "stat /self", || root.stat("/self"));
        fails(vfs, Errno::ELOOP, "open /l1", || root.open("/l1", OpenFlags::RDONLY, 0));
        fails(vfs, Errno::ELOOP, "open /l1 O_CREAT", || root.open("/l1", OpenFlags::CREAT | OpenFlags::WRONLY, 0o644));
        fails(vfs, Errno::ELOOP, "mkdir through the cycle", || root.mkdir("/l1/x", 0o755));
        assert_eq!(root.readlink("/l1").unwrap(), b"/l2");
        assert!(root.lstat("/l1").is_ok());
    });
}

#[test]
fn eloop_chain_of_more_than_40_links() {
    in_each_config(|vfs, root| {
        create_file(root, "/t", 0o644, b"target");
        root.symlink("t", "/c1").unwrap();
        for i in 2..=MAX_SYMLINKS + 1 {
            root.symlink(format!("c{}", i - 1), format!("/c{i}")).unwrap();
        }
        // 40 links are followed, the 41st is one too many.
        assert_eq!(root.stat(format!("/c{MAX_SYMLINKS}")).unwrap().size, 6);
        let over = format!("/c{}", MAX_SYMLINKS + 1);
        fails(vfs, Errno::ELOOP, "stat", || root.stat(&over));
        fails(vfs, Errno::ELOOP, "open", || root.open(&over, OpenFlags::RDONLY, 0));
        fails(vfs, Errno::ELOOP, "chmod", || root.chmod(&over, 0o600));
        // The limit counts links per walk, not per symlink: e20/../e20 is
        // 40 links, e21/../e20 is 41.
        root.mkdir("/dt", 0o755).unwrap();
        root.symlink("dt", "/e1").unwrap();
        for i in 2..=MAX_SYMLINKS / 2 + 1 {
            root.symlink(format!("e{}", i - 1), format!("/e{i}")).unwrap();
        }
        let half = MAX_SYMLINKS / 2;
        assert_eq!(root.stat(format!("/e{half}/../e{half}")).unwrap().ino, root.stat("/dt").unwrap().ino);
        fails(vfs, Errno::ELOOP, "two chains in one path", || root.stat(format!("/e{}/../e{half}", half + 1)));
        // With `O_CREAT` too: half the links on the way to a final link
        // whose chain is the other half and one more.
        root.symlink(".", "/s").unwrap();
        let through = format!("{}/c{}", "/s".repeat(half as usize), half + 1);
        fails(vfs, Errno::ELOOP, "open", || root.open(&through, OpenFlags::RDONLY, 0));
        fails(vfs, Errno::ELOOP, "open O_CREAT", || root.open(&through, OpenFlags::CREAT | OpenFlags::RDONLY, 0o644));
    });
}

#[test]
fn eloop_o_nofollow_on_a_symlink() {
    in_each_config(|vfs, root| {
        root.mkdir("/d", 0o755).unwrap();
        create_file(root, "/d/f", 0o644, b"x");
        root.symlink("/d/f", "/lf").unwrap();
        root.symlink("/d", "/ld").unwrap();
        root.symlink("/d/missing", "/dangling").unwrap();
        let nofollow = OpenFlags::NOFOLLOW;
        fails(vfs, Errno::ELOOP, "O_RDONLY", || root.open("/lf", nofollow, 0));
        fails(vfs, Errno::ELOOP, "O_WRONLY", || root.open("/lf", nofollow | OpenFlags::WRONLY, 0));
        fails(vfs, Errno::ELOOP, "to a dir", || root.open("/ld", nofollow, 0));
        fails(vfs, Errno::ELOOP, "O_CREAT", || {
            root.open("/lf", nofollow | OpenFlags::CREAT | OpenFlags::WRONLY, 0o644)
        });
        fails(vfs, Errno::ELOOP, "O_CREAT dangling", || {
            root.open("/dangling", nofollow | OpenFlags::CREAT | OpenFlags::WRONLY, 0o644)
        });
        // A symlink before the last component is still followed.
        let fd = root.open("/ld/f", nofollow, 0).unwrap();
        root.close(fd).unwrap();
    });
}

// ---- EBADF ----

#[test]
fn ebadf_read_write_close_a_bad_or_closed_fd() {
    in_each_config(|vfs, root| {
        create_file(root, "/f", 0o644, b"hello");
        let closed = root.open("/f", OpenFlags::RDWR, 0).unwrap();
        root.close(closed).unwrap();
        let mut buf = [0u8; 4];
        for fd in [-1, closed, 3, 1000, Fd::MAX, Fd::MIN] {
            fails(vfs, Errno::EBADF, "read", || root.read(fd, &mut buf));
            fails(vfs, Errno::EBADF, "write", || root.write(fd, b"x"));
            fails(vfs, Errno::EBADF, "pwrite", || root.pwrite(fd, b"x", 0));
            fails(vfs, Errno::EBADF, "close", || root.close(fd));
            fails(vfs, Errno::EBADF, "fstat", || root.fstat(fd));
            fails(vfs, Errno::EBADF, "lseek", || root.lseek(fd, 0, Whence::Set));
            fails(vfs, Errno::EBADF, "dup", || root.dup(fd));
        }
        // Another process's descriptor means nothing here.
        let other = vfs.process(Credentials::root());
        let theirs = other.open("/f", OpenFlags::RDONLY, 0).unwrap();
        fails(vfs, Errno::EBADF, "someone else's fd", || root.read(theirs, &mut buf));
        other.close(theirs).unwrap();
    });
}

#[test]
fn ebadf_write_on_o_rdonly_fd() {
    in_each_config(|vfs, root| {
        create_file(root, "/f", 0o666, b"hello");
        let fd = root.open("/f", OpenFlags::RDONLY, 0).unwrap();
        fails(vfs, Errno::EBADF, "write", || root.write(fd, b"XX"));
        fails(vfs, Errno::EBADF, "pwrite", || root.pwrite(fd, b"XX", 0));
        fails(vfs, Errno::EBADF, "empty write", || root.write(fd, b""));
        assert_eq!(offset(root, fd), 0);
        let mut buf = [0u8; 8];
        assert_eq!(root.read(fd, &mut buf).unwrap(), 5);
        assert_eq!(&buf[..5], b"hello");
        root.close(fd).unwrap();
    });
}

#[test]
fn ebadf_read_on_o_wronly_fd() {
    in_each_config(|vfs, root| {
        create_file(root, "/f", 0o666, b"hello");
        let fd = root.open("/f", OpenFlags::WRONLY, 0).unwrap();
        assert_eq!(root.lseek(fd, 1, Whence::Set).unwrap(), 1);
        let mut buf = [0u8; 8];
        fails(vfs, Errno::EBADF, "read", || root.read(fd, &mut buf));
        fails(vfs, Errno::EBADF, "pread", || root.pread(fd, &mut buf, 0));
        assert_eq!(buf, [0; 8]);
        assert_eq!(offset(root, fd), 1, "a failed read moved the offset");
        root.close(fd).unwrap();
    });
}

// ---- negative dentries ----

#[test]
fn negative_dentry_never_hides_a_created_name() {
    in_each_config(|_, root| {
        root.mkdir("/d", 0o755).unwrap();
        type Create = fn(&Process, &str) -> VfsResult<()>;
        let creators: [(&str, Create); 5] = [
            ("open O_CREAT", |p, path| {
                p.open(path, OpenFlags::CREAT | OpenFlags::WRONLY, 0o644).and_then(|fd| p.close(fd))
            }),
            ("mkdir", |p, path| p.mkdir(path, 0o755)),
            ("symlink", |p, path| p.symlink("/d", path)),
            ("link", |p, path| {
                p.open("/d/.src", OpenFlags::CREAT | OpenFlags::WRONLY, 0o644).and_then(|fd| p.close(fd))?;
                p.link("/d/.src", path)
            }),
            ("rename", |p, path| {
                p.open("/d/.moved", OpenFlags::CREAT | OpenFlags::WRONLY, 0o644).and_then(|fd| p.close(fd))?;
                p.rename("/d/.moved", path)
            }),
        ];
        for (how, create) in creators {
            let path = format!("/d/{}", how.replace(' ', "_"));
            // Miss twice: the second is answered by the negative dentry.
            for _ in 0..2 {
                assert_eq!(root.stat(&path), Err(Errno::ENOENT), "{how}");
                assert_eq!(root.lstat(format!("{path}/x")), Err(Errno::ENOENT), "{how}");
            }
            create(root, &path).unwrap();
            assert!(root.lstat(&path).is_ok(), "{how}: a negative dentry hid the new name");
            assert!(names(root, "/d").contains(&path.as_bytes()[3..].to_vec()), "{how}");
            // And a removal is seen at once too.
            if root.lstat(&path).unwrap().mode & 0o170000 == 0o040000 {
                root.rmdir(&path).unwrap();
            } else {
                root.unlink(&path).unwrap();
            }
            assert_eq!(root.lstat(&path), Err(Errno::ENOENT), "{how}: removed name still visible");
        }
    });
}

#[test]
fn negative_dentry_cap_bounds_memory() {
    let mut variants = Vec::new();
    for config in configs() {
        for negative_dentries in [NegativeDentries::Cached, NegativeDentries::Uncached] {
            variants.push(VfsConfig { negative_dentries, max_negative_dentries: 100, ..config });
        }
    }
    for config in variants {
        let vfs = Vfs::new(config);
        let p = vfs.process(Credentials::root());
        p.mkdir("/d", 0o755).unwrap();
        for i in 0..10_000 {
            assert_eq!(p.stat(format!("/d/missing{i}")), Err(Errno::ENOENT));
            if i % 1000 == 0 {
                assert!(vfs.statfs().negative_dentries <= 100, "{config:?} after {i} misses");
            }
        }
        // Recent misses are still answered correctly, and old ones too.
        assert_eq!(p.stat("/d/missing9999"), Err(Errno::ENOENT));
        assert_eq!(p.stat("/d/missing0"), Err(Errno::ENOENT));
        let stats = vfs.statfs();
        assert!(stats.negative_dentries <= 100, "{config:?}: {stats:?}");
        assert!(stats.dentries <= 100 + 1, "{config:?}: {stats:?}");
        // Split directories answer a miss from their entries, without a
        // lock and without a negative dentry.
        let planted = config.negative_dentries == NegativeDentries::Cached
            && config.dir_locking != vfscale::config::DirLocking::Split;
        if planted {
            assert!(stats.negative_dentries > 0, "{config:?}: {stats:?}");
        } else {
            assert_eq!(stats.negative_dentries, 0, "{config:?}: {stats:?}");
        }
        // A name created after its negative was evicted or kept is visible.
        p.mkdir("/d/missing9999", 0o755).unwrap();
        p.mkdir("/d/missing0", 0o755).unwrap();
        assert!(p.stat("/d/missing9999").is_ok() && p.stat("/d/missing0").is_ok());
        p.rmdir("/d/missing9999").unwrap();
        p.rmdir("/d/missing0").unwrap();
        p.rmdir("/d").unwrap();
        assert_nothing_left(&vfs);
    }
}

/// The cap holds for a thread that runs on every CPU in turn, filling
/// every CPU's queue of negatives: the queues' shares sum to the cap, also
/// when it is not a multiple of the CPUs.
#[test]
fn negative_dentry_cap_holds_across_cpus() {
    let cpus = vfscale_sync::cpu::possible_cpus();
    let max = 50 * cpus + 1;
    let config = VfsConfig {
        dir_locking: vfscale::config::DirLocking::RwSem,
        negative_dentries: NegativeDentries::Cached,
        max_negative_dentries: max,
        ..VfsConfig::default()
    };
    let vfs = Vfs::new(config);
    let p = vfs.process(Credentials::root());
    p.mkdir("/d", 0o755).unwrap();
    for cpu in 0..cpus {
        vfscale_sync::cpu::with_virtual_cpu(cpu, || {
            for i in 0..2 * max {
                assert_eq!(p.stat(format!("/d/missing{cpu}.{i}")), Err(Errno::ENOENT));
            }
        });
    }
    let stats = vfs.statfs();
    assert!(stats.negative_dentries <= max, "{stats:?} against a cap of {max}");
    assert!(stats.negative_dentries > 0, "{stats:?}");
}

/// After everything was removed: one inode (the root) and no dentries once
/// `drop_caches` has waited for the deferred releases.
fn assert_nothing_left(vfs: &Vfs) {
    assert!(vfs.drop_caches(std::time::Duration::from_secs(60)), "{:?}: deferred releases never ran", vfs.config());
    let stats = vfs.statfs();
    assert_eq!(
        (stats.inodes, stats.dentries, stats.negative_dentries),
        (1, 0, 0),
        "{:?}: left behind: {stats:?}",
        vfs.config()
    );
}

// ---- readdir while the directory changes ----

#[test]
fn readdir_sees_stable_names_exactly_once_while_others_change() {
    for config in configs() {
        let vfs = Vfs::new(config);
        let root = vfs.process(Credentials::root());
        root.mkdir("/d", 0o755).unwrap();
        // readdir resumes after the last entry returned, in name order
        // (the rwsem designs' maps) or cookie order (the split design's
        // creation order), so the churned names are placed everywhere in
        // those orders: "a_*" before all stable names, "stable_NNNx" right
        // after one of them, "tmp_*" and "z_*" after them all, and every
        // churned name made again after them all. A churned name made
        // again after the listing passed it is a new entry, which POSIX
        // lets the listing return again (as Linux's tmpfs does since its
        // offsets became stable in 6.6); a name present throughout is
        // returned exactly once.
        let stable: BTreeSet<Vec<u8>> = (0..150).map(|i| format!("stable_{i:03}").into_bytes()).collect();
        for name in &stable {
            create_file(&root, &format!("/d/{}", String::from_utf8_lossy(name)), 0o644, b"");
        }
        let listings = stress_iters(200);
        let done = Arc::new(AtomicBool::new(false));
        // Rounds the churn thread has finished: the listings start after
        // the first, so they always race a churning directory.
        let rounds = Arc::new(AtomicU64::new(0));
        let churn = {
            let vfs = vfs.clone();
            let (done, rounds) = (Arc::clone(&done), Arc::clone(&rounds));
            thread::spawn(move || {
                let p = vfs.process(Credentials::root());
                let mut round = 0u64;
                while !done.load(Ordering::Relaxed) {
                    for i in 0..20 {
                        let name = match i % 4 {
                            0 => format!("/d/a_{i}"),
                            1 => format!("/d/z_{i}"),
                            2 => format!("/d/stable_{:03}x", (round as usize * 7 + i) % 150),
                            _ => format!("/d/tmp_{i}"),
                        };
                        p.open(&name, OpenFlags::CREAT | OpenFlags::WRONLY, 0o644).and_then(|fd| p.close(fd)).unwrap();
                        if i % 3 == 0 {
                            p.unlink(&name).unwrap();
                        }
                    }
                    for i in 0..20 {
                        let name = match i % 4 {
                            0 => format!("/d/a_{i}"),
                            1 => format!("/d/z_{i}"),
                            2 => format!("/d/stable_{:03}x", (round as usize * 7 + i) % 150),
                            _ => format!("/d/tmp_{i}"),
                        };
                        match p.unlink(&name) {
                            Ok(()) | Err(Errno::ENOENT) => {}
                            Err(e) => panic!("unlink {name}: {e:?}"),
                        }
                    }
                    round += 1;
                    rounds.store(round, Ordering::Relaxed);
                }
                round
            })
        };
        wait_until("a first round", || rounds.load(Ordering::Relaxed) > 0);
        for listing in 0..listings {
            // Alternate small batches (many resumptions) and list_dir.
            let entries = if listing % 2 == 0 {
                let fd = root.open("/d", OpenFlags::DIRECTORY, 0).unwrap();
                let mut all = Vec::new();
                loop {
                    let batch = root.readdir(fd, 1 + listing % 7).unwrap();
                    if batch.is_empty() {
                        break;
                    }
                    all.extend(batch);
                }
                root.close(fd).unwrap();
                all
            } else {
                root.list_dir("/d").unwrap()
            };
            let mut seen = BTreeSet::new();
            for entry in &entries {
                let present_throughout = stable.contains(&entry.name) || entry.name == b"." || entry.name == b"..";
                assert!(
                    seen.insert(entry.name.clone()) || !present_throughout,
                    "{config:?}: listing {listing} returned {:?} twice",
                    String::from_utf8_lossy(&entry.name)
                );
            }
            for name in &stable {
                assert!(
                    seen.contains(name),
                    "{config:?}: listing {listing} missed {:?}",
                    String::from_utf8_lossy(name)
                );
            }
            assert!(seen.contains(&b"."[..]) && seen.contains(&b".."[..]));
        }
        done.store(true, Ordering::Relaxed);
        let rounds = churn.join().unwrap();
        assert!(rounds > 0, "the churn thread never ran");
        let after: BTreeSet<_> = names(&root, "/d").into_iter().filter(|n| n != b"." && n != b"..").collect();
        assert_eq!(after, stable, "{config:?}: churn left names behind");
    }
}
