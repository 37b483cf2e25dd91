//! Capacity limits, as tmpfs's `size=` and `nr_inodes=`: ENOSPC past
//! them, writes cut at what fits, `statfs` reporting them, and the space
//! coming back on truncate and unlink.

use std::time::Duration;
use vfscale::pages::PAGE_SIZE;
use vfscale::space::BOGO_INODE_SIZE;
use vfscale::{Credentials, Errno, OpenFlags, Vfs, VfsConfig};

const PG: usize = PAGE_SIZE as usize;

fn limited(size: u64, inodes: u64) -> (Vfs, vfscale::Process) {
    let vfs = Vfs::new(VfsConfig { size_limit: size, inode_limit: inodes, ..VfsConfig::default() });
    let p = vfs.process(Credentials::root());
    (vfs, p)
}

#[test]
fn writes_stop_at_the_size_limit_and_space_comes_back() {
    let (vfs, p) = limited(8 * PAGE_SIZE, 0);
    let s = vfs.statfs();
    assert_eq!((s.block_size, s.blocks, s.blocks_free, s.files), (PAGE_SIZE, 8, 8, 0));
    let fd = p.open("/big", OpenFlags::CREAT | OpenFlags::RDWR, 0o644).unwrap();
    assert_eq!(p.write(fd, &vec![1; 16 * PG]), Ok(8 * PG), "what fits is written");
    assert_eq!(p.write(fd, b"more"), Err(Errno::ENOSPC));
    assert_eq!(p.fstat(fd).unwrap().size, 8 * PAGE_SIZE);
    assert_eq!(vfs.statfs().blocks_free, 0);
    // Rewriting allocated pages and growing into holes needs no space...
    assert_eq!(p.pwrite(fd, b"x", 0), Ok(1));
    p.ftruncate(fd, 100 * PAGE_SIZE as i64).unwrap();
    // ...but writing into a hole does.
    assert_eq!(p.pwrite(fd, b"x", 50 * PG as i64), Err(Errno::ENOSPC));
    let file = p.open_file(fd).unwrap();
    assert_eq!(file.fallocate(0, 0, 20 * PG as i64, &Credentials::root()), Err(Errno::ENOSPC));
    p.ftruncate(fd, 2 * PAGE_SIZE as i64).unwrap();
    assert_eq!(vfs.statfs().blocks_free, 6);
    p.close(fd).unwrap();
    drop(file);
    p.unlink("/big").unwrap();
    assert!(vfs.drop_caches(Duration::from_secs(60)));
    assert_eq!(vfs.statfs().blocks_free, 8);
}

#[test]
fn creating_stops_at_the_inode_limit() {
    let (vfs, p) = limited(0, 4);
    // The root is one.
    assert_eq!((vfs.statfs().files, vfs.statfs().files_free), (4, 3));
    p.mkdir("/d", 0o755).unwrap();
    p.mknod("/d/fifo", libc::S_IFIFO | 0o644, 0).unwrap();
    p.symlink("x", "/s").unwrap();
    assert_eq!(vfs.statfs().files_free, 0);
    assert_eq!(p.mkdir("/e", 0o755), Err(Errno::ENOSPC));
    assert_eq!(p.open("/f", OpenFlags::CREAT | OpenFlags::WRONLY, 0o644), Err(Errno::ENOSPC));
    assert_eq!(p.symlink("x", "/t"), Err(Errno::ENOSPC));
    assert_eq!(p.mkdir("/d", 0o755), Err(Errno::EEXIST), "existence is checked first");
    assert!(p.stat("/f").is_err());
    p.unlink("/s").unwrap();
    assert!(vfs.drop_caches(Duration::from_secs(60)));
    p.mknod("/f", libc::S_IFREG | 0o644, 0).unwrap();
}

/// A filesystem makes its inodes even past the inode limit (as kernfs
/// and procfs trees are built): those that did not fit were charged to
/// nothing, and going they give nothing back.
#[test]
fn inodes_made_past_the_limit_give_back_only_what_they_took() {
    use std::sync::Arc;
    use vfscale::inode::NewInode;
    use vfscale::FileType;
    let config = VfsConfig { inode_limit: 2, ..VfsConfig::default() };
    let mut made = Vec::new();
    let vfs = Vfs::with_filesystem(config, |instance| {
        made = (0..3).map(|_| instance.new_inode(NewInode::of(FileType::Regular, 0o644))).collect();
        Arc::new(vfscale::memfs::Memfs::new(&config))
    });
    assert_eq!(vfs.statfs().files_free, 0, "the root and the first made fill the limit");
    drop(made);
    assert!(vfs.drop_caches(Duration::from_secs(60)));
    assert_eq!((vfs.statfs().files, vfs.statfs().files_free), (2, 1), "the root's alone is still taken");
}

#[test]
fn extended_attributes_take_inode_space() {
    let (vfs, p) = limited(0, 2);
    p.mknod("/f", libc::S_IFREG | 0o644, 0).unwrap();
    assert_eq!(p.setxattr("/f", b"user.a", b"v", 0), Err(Errno::ENOSPC));
    p.unlink("/f").unwrap();
    assert!(vfs.drop_caches(Duration::from_secs(60)));
    let (vfs, p) = limited(0, 3);
    p.mknod("/f", libc::S_IFREG | 0o644, 0).unwrap();
    p.setxattr("/f", b"user.a", &[0; 200], 0).unwrap();
    assert_eq!(vfs.statfs().files_free, 0, "the attribute took part of the last inode's space");
    assert_eq!(p.mknod("/g", libc::S_IFREG | 0o644, 0), Err(Errno::ENOSPC));
    p.removexattr("/f", b"user.a").unwrap();
    assert_eq!(vfs.statfs().files_free, 1);
    const { assert!(BOGO_INODE_SIZE > 200) };
}

#[test]
fn no_limit_is_the_default() {
    let vfs = Vfs::default();
    let p = vfs.process(Credentials::root());
    let fd = p.open("/f", OpenFlags::CREAT | OpenFlags::RDWR, 0o644).unwrap();
    p.pwrite(fd, b"x", 1 << 40).unwrap();
    let s = vfs.statfs();
    assert_eq!((s.blocks, s.blocks_free, s.blocks_used, s.files, s.files_free), (0, 0, 1, 0, 0));
}

#[test]
fn hard_links_take_inodes_as_on_tmpfs() {
    let (vfs, p) = limited(0, 4);
    p.mknod("/f", libc::S_IFREG | 0o644, 0).unwrap();
    p.link("/f", "/g").unwrap();
    p.mknod("/x", libc::S_IFREG | 0o644, 0).unwrap();
    assert_eq!(vfs.statfs().files_free, 0);
    assert_eq!(p.link("/f", "/h"), Err(Errno::ENOSPC));
    // Renaming over a link gives that link back...
    p.rename("/x", "/g").unwrap();
    assert_eq!((vfs.statfs().files_free, p.stat("/f").unwrap().nlink), (1, 1));
    // ...as unlinking one does; the last link goes with its inode.
    p.link("/f", "/h").unwrap();
    p.unlink("/h").unwrap();
    p.unlink("/g").unwrap();
    assert!(vfs.drop_caches(Duration::from_secs(60)));
    assert_eq!(vfs.statfs().files_free, 2);
}

/// A link of a file racing the unlink of its last name either comes first
/// (the file keeps the new name) or fails with ENOENT; it never brings a
/// file back from a link count of 0 (its inode was then charged twice and
/// given back once): after both have run their rounds and every name is
/// gone, the inode limit is whole again.
#[test]
fn a_link_racing_the_last_unlink_gives_every_inode_back() {
    // Room for every round's inodes: they come back through the epoch.
    let (vfs, p) = limited(0, 1 << 20);
    let free = vfs.statfs().files_free;
    let rounds = vfscale_sync::test_support::stress_iters(20_000);
    let q = vfs.process(Credentials::root());
    std::thread::scope(|s| {
        s.spawn(|| {
            for _ in 0..rounds {
                p.mknod("/f", libc::S_IFREG | 0o644, 0).unwrap();
                p.unlink("/f").unwrap();
            }
        });
        s.spawn(|| {
            for _ in 0..rounds {
                match q.link("/f", "/g") {
                    Ok(()) => q.unlink("/g").unwrap(),
                    Err(e) => assert_eq!(e, Errno::ENOENT),
                }
            }
        });
    });
    assert!(vfs.drop_caches(Duration::from_secs(60)));
    assert_eq!(vfs.statfs().files_free, free);
}
