//! An instance whose last handle goes gives back its whole tree: every
//! directory's `..` counts a reference on its parent, which lists it, so
//! the tree is a cycle that the superblock's end breaks (Linux's
//! `shrink_dcache_for_umount`); and one process-wide release barrier
//! waits for it all, though what the superblock's end releases it defers.
//!
//! One test in this binary: the barrier waits for releases deferred on the
//! calling thread or handed over by others, and a test running beside it
//! could collect a release and keep those it defers in its own queue.

use std::sync::{Arc, Weak};
use std::time::Duration;
use vfscale::config::DirLocking;
use vfscale::inode::Inode;
use vfscale::{Credentials, OpenFlags, Process, Vfs, VfsConfig};

/// The inode at `path`, through a description that is closed again.
fn inode_at(p: &Process, path: &str) -> Weak<Inode> {
    let file = p.open_description(path, OpenFlags::RDONLY, 0).expect("open");
    Arc::downgrade(file.inode())
}

/// Drops `vfs` and runs the release barrier once, on a thread with 256 KiB
/// of stack, after a barrier here hands over this thread's releases (its
/// processes').
fn end(vfs: Vfs) {
    assert!(vfscale::release_barrier(Duration::from_secs(60)), "releases ran");
    std::thread::Builder::new()
        .stack_size(256 << 10)
        .spawn(move || {
            drop(vfs);
            assert!(vfscale::release_barrier(Duration::from_secs(60)), "releases ran");
        })
        .expect("a thread")
        .join()
        .expect("the instance's end finished");
}

#[test]
fn the_last_handle_of_an_instance_frees_its_tree() {
    for dir_locking in [DirLocking::Split, DirLocking::RwSem, DirLocking::GlobalMutex] {
        let vfs = Vfs::new(VfsConfig { dir_locking, ..VfsConfig::default() });
        let p = vfs.process(Credentials::root());
        p.mkdir("/d", 0o755).unwrap();
        p.mkdir("/d/e", 0o755).unwrap();
        for i in 0..100 {
            p.mkdir(format!("/d/e/sub{i}"), 0o755).unwrap();
            let fd = p.open(format!("/d/f{i}"), OpenFlags::CREAT | OpenFlags::WRONLY, 0o644).unwrap();
            p.write(fd, b"data").unwrap();
            p.close(fd).unwrap();
        }
        assert!(p.stat("/d/e/missing").is_err());
        let paths = ["/", "/d", "/d/e/sub99", "/d/f7"];
        let inodes: Vec<Weak<Inode>> = paths.iter().map(|path| inode_at(&p, path)).collect();
        drop(p);
        end(vfs);
        for (inode, path) in inodes.iter().zip(paths) {
            assert_eq!(inode.strong_count(), 0, "{dir_locking:?}: {path} outlived its instance");
        }
    }
    // A chain of 20,000 directories, freed on the small stack: each
    // directory with a subdirectory is freed by a release of its own (its
    // `..` count's), not by its parent's drop, so no drop recurses through
    // the levels, which would need megabytes.
    let vfs = Vfs::new(VfsConfig::default());
    let p = vfs.process(Credentials::root());
    p.mkdir("/top", 0o755).unwrap();
    p.chdir("/top").unwrap();
    for _ in 0..20_000 {
        p.mkdir("n", 0o755).unwrap();
        p.chdir("n").unwrap();
    }
    let (root, deepest) = (inode_at(&p, "/"), inode_at(&p, "."));
    drop(p);
    end(vfs);
    assert_eq!((root.strong_count(), deepest.strong_count()), (0, 0), "the chain was freed");
}
