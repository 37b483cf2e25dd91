//! Sparse file data through the process interface: holes, `st_blocks`,
//! `SEEK_DATA`/`SEEK_HOLE`, `fallocate` and the file-size limit, with
//! Linux's (tmpfs's) errors.

use vfscale::falloc;
use vfscale::pages::{MAX_LFS_FILESIZE, PAGE_SIZE};
use vfscale::{Credentials, Errno, OpenFlags, Process, Vfs, VfsConfig, Whence};

fn setup() -> (Vfs, Process, i32) {
    let vfs = Vfs::default();
    let p = vfs.process(Credentials::root());
    let fd = p.open("/f", OpenFlags::CREAT | OpenFlags::RDWR, 0o644).unwrap();
    (vfs, p, fd)
}

#[test]
fn a_write_far_out_allocates_one_page() {
    let (_vfs, p, fd) = setup();
    // dd if=/dev/zero of=F bs=1 count=1 seek=3G
    assert_eq!(p.pwrite(fd, &[0], 3 << 30), Ok(1));
    let st = p.fstat(fd).unwrap();
    assert_eq!((st.size, st.blocks), ((3 << 30) + 1, 8));
    let mut buf = [1u8; 100];
    assert_eq!(p.pread(fd, &mut buf, 2 << 30), Ok(100));
    assert_eq!(buf, [0; 100]);
    assert_eq!(p.stat("/f").unwrap().blocks, 8);
}

#[test]
fn seek_data_and_hole_follow_pages() {
    let (_vfs, p, fd) = setup();
    let pg = PAGE_SIZE as i64;
    p.pwrite(fd, b"a", pg).unwrap();
    p.pwrite(fd, b"b", 10 * pg).unwrap();
    assert_eq!(p.lseek(fd, 0, Whence::Data), Ok(pg as u64));
    assert_eq!(p.lseek(fd, 0, Whence::Hole), Ok(0));
    assert_eq!(p.lseek(fd, pg, Whence::Hole), Ok(2 * pg as u64));
    assert_eq!(p.lseek(fd, 2 * pg, Whence::Data), Ok(10 * pg as u64));
    assert_eq!(p.lseek(fd, 10 * pg, Whence::Hole), Ok(10 * pg as u64 + 1));
    assert_eq!(p.lseek(fd, 10 * pg + 1, Whence::Data), Err(Errno::ENXIO));
    assert_eq!(p.lseek(fd, 10 * pg + 1, Whence::Hole), Err(Errno::ENXIO));
    assert_eq!(p.lseek(fd, -1, Whence::Data), Err(Errno::ENXIO));
}

#[test]
fn fallocate_modes_and_errors() {
    let (_vfs, p, fd) = setup();
    let f = p.open_file(fd).unwrap();
    let root = Credentials::root();
    let pg = PAGE_SIZE as i64;
    assert_eq!(f.fallocate(0, 0, 2 * pg, &root), Ok(()));
    assert_eq!((f.stat().size, f.stat().blocks), (2 * PAGE_SIZE, 16));
    assert_eq!(f.fallocate(falloc::KEEP_SIZE, 2 * pg, 2 * pg, &root), Ok(()));
    assert_eq!((f.stat().size, f.stat().blocks), (2 * PAGE_SIZE, 32));
    assert_eq!(f.fallocate(falloc::PUNCH_HOLE | falloc::KEEP_SIZE, 0, 3 * pg, &root), Ok(()));
    assert_eq!((f.stat().size, f.stat().blocks), (2 * PAGE_SIZE, 8));
    // Truncating below the reserved page frees it.
    p.ftruncate(fd, 1).unwrap();
    assert_eq!(f.stat().blocks, 0);

    assert_eq!(f.fallocate(falloc::PUNCH_HOLE, 0, 1, &root), Err(Errno::EOPNOTSUPP));
    assert_eq!(f.fallocate(0x10, 0, 1, &root), Err(Errno::EOPNOTSUPP));
    assert_eq!(f.fallocate(0, -1, 1, &root), Err(Errno::EINVAL));
    assert_eq!(f.fallocate(0, 0, 0, &root), Err(Errno::EINVAL));
    assert_eq!(f.fallocate(0, i64::MAX, 1, &root), Err(Errno::EFBIG));
    let ro = p.open("/f", OpenFlags::RDONLY, 0).unwrap();
    assert_eq!(p.open_file(ro).unwrap().fallocate(0, 0, 1, &root), Err(Errno::EBADF));
    p.mkdir("/d", 0o755).unwrap();
    let d = p.open("/d", OpenFlags::RDONLY | OpenFlags::DIRECTORY, 0).unwrap();
    assert_eq!(p.open_file(d).unwrap().fallocate(0, 0, 1, &root), Err(Errno::EBADF));
}

#[test]
fn the_file_size_limit_is_max_lfs_filesize() {
    let (_vfs, p, fd) = setup();
    assert_eq!(VfsConfig::default().max_file_size, MAX_LFS_FILESIZE);
    let max = MAX_LFS_FILESIZE as i64;
    assert_eq!(p.pwrite(fd, b"xyz", max - 1), Ok(1), "a write is cut at the limit");
    assert_eq!(p.pwrite(fd, b"x", max), Err(Errno::EFBIG));
    assert_eq!(p.fstat(fd).unwrap().size, MAX_LFS_FILESIZE);
    assert_eq!(p.ftruncate(fd, max), Ok(()));
    p.ftruncate(fd, 5 << 30).unwrap();
    assert_eq!(p.fstat(fd).unwrap().size, 5 << 30);
    assert_eq!(p.fstat(fd).unwrap().blocks, 0);

    let small = Vfs::new(VfsConfig { max_file_size: 1000, ..VfsConfig::default() });
    let q = small.process(Credentials::root());
    let fd = q.open("/g", OpenFlags::CREAT | OpenFlags::RDWR, 0o644).unwrap();
    assert_eq!(q.ftruncate(fd, 1001), Err(Errno::EFBIG));
    assert_eq!(q.pwrite(fd, &[1; 10], 995), Ok(5));
}

#[test]
fn truncate_then_grow_reads_zeros() {
    let (_vfs, p, fd) = setup();
    p.write(fd, &[9; 10_000]).unwrap();
    p.ftruncate(fd, 5000).unwrap();
    p.ftruncate(fd, 10_000).unwrap();
    let mut buf = vec![1u8; 10_000];
    assert_eq!(p.pread(fd, &mut buf, 0), Ok(10_000));
    assert!(buf[..5000].iter().all(|&b| b == 9));
    assert!(buf[5000..].iter().all(|&b| b == 0));
    assert_eq!(p.fstat(fd).unwrap().blocks, 16);
}
