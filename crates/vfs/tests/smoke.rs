mod common;

use common::all_configs;
use vfscale::{Credentials, Errno, OpenFlags, Vfs, Whence};

#[test]
fn basic_namespace_in_every_config() {
    for config in all_configs() {
        let vfs = Vfs::new(config);
        let p = vfs.process(Credentials::root());
        p.mkdir("/a", 0o755).unwrap();
        p.mkdir("/a/b", 0o755).unwrap();
        let fd = p.open("/a/b/f", OpenFlags::CREAT | OpenFlags::RDWR, 0o644).unwrap();
        assert_eq!(p.write(fd, b"hello").unwrap(), 5);
        assert_eq!(p.lseek(fd, 0, Whence::Set).unwrap(), 0);
        let mut buf = [0u8; 16];
        assert_eq!(p.read(fd, &mut buf).unwrap(), 5);
        assert_eq!(&buf[..5], b"hello");
        p.close(fd).unwrap();
        assert_eq!(p.stat("/a/b/f").unwrap().size, 5);
        assert_eq!(p.stat("/a/b/missing"), Err(Errno::ENOENT));
        assert_eq!(p.stat("/a/b/missing"), Err(Errno::ENOENT), "{config:?}: negative hit");
        p.rename("/a/b/f", "/a/g").unwrap();
        assert_eq!(p.stat("/a/b/f"), Err(Errno::ENOENT));
        assert_eq!(p.stat("/a/g").unwrap().size, 5);
        p.symlink("/a", "/link").unwrap();
        assert_eq!(p.stat("/link/g").unwrap().size, 5);
        assert_eq!(p.readlink("/link").unwrap(), b"/a");
        assert_eq!(p.rmdir("/a"), Err(Errno::ENOTEMPTY));
        p.unlink("/a/g").unwrap();
        p.rmdir("/a/b").unwrap();
        p.rmdir("/a").unwrap();
        p.unlink("/link").unwrap();
        let names: Vec<_> = p.list_dir("/").unwrap().into_iter().map(|e| e.name).collect();
        assert_eq!(names, vec![b".".to_vec(), b"..".to_vec()]);
        assert!(vfs.drop_caches(std::time::Duration::from_secs(60)));
        let stats = vfs.statfs();
        assert_eq!((stats.inodes, stats.dentries, stats.negative_dentries), (1, 0, 0), "{config:?}");
    }
}
