//! An instance whose last handle goes gives back its whole tree: every
//! directory's `..` counts a reference on its parent, which lists it, so
//! the tree is a cycle that the superblock's end breaks (Linux's
//! `shrink_dcache_for_umount`); one process-wide release barrier waits
//! for it all, though what the superblock's end releases it defers; and
//! freeing a tree of any depth takes constant stack.
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

/// Runs `f` on a thread with 256 KiB of stack.
fn on_small_stack(f: impl FnOnce() + Send + 'static) {
    std::thread::Builder::new().stack_size(256 << 10).spawn(f).expect("a thread").join().expect("it finished");
}

/// Drops `vfs` and runs the release barrier once, on a thread with a small
/// stack, after a barrier here hands over this thread's releases (its
/// processes').
fn end(vfs: Vfs) {
    assert!(vfscale::release_barrier(Duration::from_secs(60)), "releases ran");
    on_small_stack(move || {
        drop(vfs);
        assert!(vfscale::release_barrier(Duration::from_secs(60)), "releases ran");
    });
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
    // A chain of 20,000 directories whose top outlives the instance, in
    // each design of entries: the last holder's drop frees the chain on
    // the small stack, which a drop recursing through each level would
    // overflow (megabytes).
    for dir_locking in [DirLocking::Split, DirLocking::RwSem] {
        let vfs = Vfs::new(VfsConfig { dir_locking, ..VfsConfig::default() });
        let p = vfs.process(Credentials::root());
        p.mkdir("/top", 0o755).unwrap();
        p.chdir("/top").unwrap();
        for _ in 0..20_000 {
            p.mkdir("n", 0o755).unwrap();
            p.chdir("n").unwrap();
        }
        let top = Arc::clone(p.open_description("/top", OpenFlags::RDONLY, 0).unwrap().inode());
        let deepest = inode_at(&p, ".");
        drop(p);
        end(vfs);
        assert_eq!(deepest.strong_count(), 1, "{dir_locking:?}: the chain is kept by its top");
        let weak_top = Arc::downgrade(&top);
        on_small_stack(move || drop(top));
        assert_eq!((weak_top.strong_count(), deepest.strong_count()), (0, 0), "{dir_locking:?}: the chain was freed");
    }
}
