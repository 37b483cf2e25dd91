//! An instance whose last handle goes gives back its whole tree (of its
//! own memory, or a kernfs or procfs tree's): every directory's `..`
//! counts a reference on its parent, which lists it, so the tree is a
//! cycle that the superblock's end breaks (Linux's
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

/// Drops `vfs` (an instance, or what owns one) and runs the release
/// barrier once, on a thread with a small stack, after a barrier here
/// hands over this thread's releases (its processes').
fn end(vfs: impl Send + 'static) {
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
    // The filesystems that provide their names: a kernfs tree (whose
    // directories link their parents by count) and a procfs task table,
    // walked so that their dcache holds dentries.
    let sys = vfscale::kernfs::Kernfs::new(vfscale::kernfs::KernfsConfig::rcu());
    let mut dir = sys.root();
    for level in 0..50 {
        dir = sys.create_dir(&dir, &format!("d{level}"), 0o755).unwrap();
        sys.create_file(&dir, "attr", 0o444, || Ok(b"1\n".to_vec()), None::<fn(&[u8]) -> vfscale::VfsResult<()>>)
            .unwrap();
    }
    let proc = vfscale::procfs::Procfs::new(vfscale::procfs::ProcConfig::rcu_revalidate());
    proc.add_task(7, vfscale::procfs::TaskInfo::new("task", ["task"])).unwrap();
    let mut roots = Vec::new();
    for vfs in [sys.vfs(), proc.vfs()] {
        let p = vfs.process(Credentials::root());
        assert!(!p.list_dir("/").unwrap().is_empty());
        roots.push(Arc::downgrade(vfs.root()));
    }
    let p = sys.vfs().process(Credentials::root());
    let deep: String = (0..50).map(|level| format!("/d{level}")).collect();
    assert!(p.stat(format!("{deep}/attr")).is_ok());
    let deepest = inode_at(&p, &deep);
    drop(p);
    let p = proc.vfs().process(Credentials::root());
    assert!(p.stat("/7/status").is_ok());
    drop(p);
    drop(dir);
    end(sys);
    end(proc);
    for (root, name) in roots.iter().zip(["kernfs", "procfs"]) {
        assert_eq!(root.strong_count(), 0, "{name}: the root outlived its instance");
    }
    assert_eq!(deepest.strong_count(), 0, "kernfs: a directory outlived its instance");

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
