//! kernfs trees: attribute semantics, active references, and changes
//! racing walkers, in all three designs of seed 000.

use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::thread;
use std::time::Duration;
use vfscale::kernfs::{Kernfs, KernfsConfig, MAX_WRITE};
use vfscale::{Credentials, Errno, FileType, OpenFlags};
use vfscale_sync::test_support::wait_until;

fn designs() -> [KernfsConfig; 3] {
    [KernfsConfig::before(), KernfsConfig::rwsem(), KernfsConfig::rcu()]
}

type Store = fn(&[u8]) -> Result<(), Errno>;

fn read_all(p: &vfscale::Process, path: &str) -> Result<Vec<u8>, Errno> {
    let fd = p.open(path, OpenFlags::RDONLY, 0)?;
    let mut buf = vec![0u8; 256];
    let n = p.read(fd, &mut buf);
    p.close(fd)?;
    buf.truncate(n?);
    Ok(buf)
}

/// `O_CREAT` of a name a generated tree has opens it, directly or through
/// a symlink; through a symlink whose target was removed it fails, as a
/// create in the tree does (a generated tree's directories keep no names
/// of their own: the create asks the tree, and so must the look-up
/// before it).
#[test]
fn creat_opens_existing_nodes_and_fails_on_a_dangling_link() {
    for config in designs() {
        let sys = Kernfs::new(config);
        let d = sys.create_dir(&sys.root(), "d", 0o755).unwrap();
        let mtu = sys.create_file(&d, "mtu", 0o444, || Ok(b"1500\n".to_vec()), None::<Store>).unwrap();
        sys.create_symlink(&sys.root(), "l", &mtu).unwrap();
        let p = sys.vfs().process(Credentials::root());
        let creat = |path: &str| p.open(path, OpenFlags::CREAT | OpenFlags::RDONLY, 0o644).and_then(|fd| p.close(fd));
        assert_eq!(creat("/d/mtu"), Ok(()), "{config:?}");
        assert_eq!(creat("/l"), Ok(()), "{config:?}");
        sys.remove(&mtu).unwrap();
        let dangling = creat("/l");
        assert_eq!(dangling, Err(Errno::EACCES), "{config:?}");
    }
}

#[test]
fn tree_of_dirs_files_and_symlinks_is_walkable() {
    for config in designs() {
        let sys = Kernfs::new(config);
        let devices = sys.create_dir(&sys.root(), "devices", 0o755).unwrap();
        let eth0 = sys.create_dir(&devices, "eth0", 0o755).unwrap();
        sys.create_file(&eth0, "mtu", 0o444, || Ok(b"1500\n".to_vec()), None::<Store>).unwrap();
        let class = sys.create_dir(&sys.root(), "class", 0o755).unwrap();
        sys.create_symlink(&class, "eth0", &eth0).unwrap();
        let p = sys.vfs().process(Credentials::root());
        assert_eq!(read_all(&p, "/devices/eth0/mtu").unwrap(), b"1500\n", "{config:?}");
        assert_eq!(p.readlink("/class/eth0").unwrap(), b"../devices/eth0");
        assert_eq!(read_all(&p, "/class/eth0/mtu").unwrap(), b"1500\n");
        assert_eq!(p.stat("/devices/eth0/mtu").unwrap().size, MAX_WRITE as u64);
        let names: Vec<_> = p.list_dir("/devices/eth0").unwrap().into_iter().map(|e| (e.name, e.file_type)).collect();
        assert_eq!(
            names,
            [
                (b".".to_vec(), FileType::Directory),
                (b"..".to_vec(), FileType::Directory),
                (b"mtu".to_vec(), FileType::Regular)
            ]
        );
        assert_eq!(p.stat("/devices/missing"), Err(Errno::ENOENT));
        assert_eq!(p.stat("/devices/missing"), Err(Errno::ENOENT), "a negative dentry in {config:?}");
        assert_eq!(p.mkdir("/devices/new", 0o755), Err(Errno::EPERM), "the tree changes through its API only");
    }
}

#[test]
fn show_snapshot_store_and_callback_errors() {
    for config in designs() {
        let sys = Kernfs::new(config);
        let value = Arc::new(AtomicU64::new(1));
        let shown = Arc::clone(&value);
        let stored = Arc::clone(&value);
        sys.create_file(
            &sys.root(),
            "knob",
            0o644,
            move || Ok(format!("{}\n", shown.load(Ordering::SeqCst)).into_bytes()),
            Some(move |buf: &[u8]| {
                let text = std::str::from_utf8(buf).map_err(|_| Errno::EINVAL)?;
                stored.store(text.trim().parse().map_err(|_| Errno::EINVAL)?, Ordering::SeqCst);
                Ok(())
            }),
        )
        .unwrap();
        sys.create_file(&sys.root(), "broken", 0o444, || Err(Errno::EIO), None::<Store>).unwrap();
        let p = sys.vfs().process(Credentials::root());
        let fd = p.open("/knob", OpenFlags::RDWR, 0).unwrap();
        let mut buf = [0u8; 2];
        assert_eq!(p.read(fd, &mut buf).unwrap(), 2);
        value.store(9, Ordering::SeqCst);
        let mut rest = [0u8; 8];
        assert_eq!(p.read(fd, &mut rest).unwrap(), 0, "continues the snapshot taken at offset 0");
        assert_eq!(p.pread(fd, &mut rest, 0).unwrap(), 2, "a read at offset 0 calls show again");
        assert_eq!(&rest[..2], b"9\n");
        assert_eq!(p.pwrite(fd, b"77\n", 0).unwrap(), 3);
        assert_eq!(value.load(Ordering::SeqCst), 77);
        assert_eq!(p.pwrite(fd, b"", 0).unwrap(), 0, "an empty write does not call store");
        assert_eq!(p.pwrite(fd, b"not a number", 0), Err(Errno::EINVAL), "store's error reaches the caller");
        assert_eq!(p.pwrite(fd, &vec![b'1'; MAX_WRITE + 1], 0), Err(Errno::E2BIG));
        assert_eq!(value.load(Ordering::SeqCst), 77, "failed writes changed nothing");
        assert_eq!(read_all(&p, "/broken"), Err(Errno::EIO));
        assert_eq!(p.open("/broken", OpenFlags::WRONLY, 0), Err(Errno::EACCES), "mode 0444 has no store");
        let alice = sys.vfs().process(Credentials::user(1000, 1000, []));
        assert_eq!(alice.open("/knob", OpenFlags::WRONLY, 0), Err(Errno::EACCES));
        p.close(fd).unwrap();
    }
}

#[test]
fn removal_fails_new_opens_and_reads_of_open_files() {
    for config in designs() {
        let sys = Kernfs::new(config);
        let dir = sys.create_dir(&sys.root(), "dev", 0o755).unwrap();
        let node = sys.create_file(&dir, "attr", 0o444, || Ok(b"x".to_vec()), None::<Store>).unwrap();
        let p = sys.vfs().process(Credentials::root());
        let fd = p.open("/dev/attr", OpenFlags::RDONLY, 0).unwrap();
        sys.remove(&dir).unwrap();
        assert!(!node.is_active());
        let mut buf = [0u8; 4];
        assert_eq!(p.read(fd, &mut buf), Err(Errno::ENODEV), "{config:?}");
        assert_eq!(p.open("/dev/attr", OpenFlags::RDONLY, 0), Err(Errno::ENOENT));
        assert_eq!(p.stat("/dev"), Err(Errno::ENOENT));
        assert_eq!(sys.remove(&dir), Err(Errno::ENOENT));
        assert_eq!(sys.remove(&sys.root()), Err(Errno::EBUSY));
        p.close(fd).unwrap();
    }
}

#[test]
fn rename_is_seen_by_walkers_at_once() {
    for config in designs() {
        let sys = Kernfs::new(config);
        let a = sys.create_dir(&sys.root(), "a", 0o755).unwrap();
        let b = sys.create_dir(&sys.root(), "b", 0o755).unwrap();
        let f = sys.create_file(&a, "f", 0o444, || Ok(b"f".to_vec()), None::<Store>).unwrap();
        let p = sys.vfs().process(Credentials::root());
        assert!(p.stat("/a/f").is_ok());
        assert!(p.stat("/b/g").is_err());
        sys.rename(&f, &b, "g").unwrap();
        assert_eq!(p.stat("/a/f"), Err(Errno::ENOENT), "{config:?}");
        assert_eq!(p.stat("/b/g").unwrap().ino, f.ino());
        assert_eq!(sys.rename(&b, &b, "x"), Err(Errno::EINVAL));
        assert_eq!(sys.rename(&f, &a, "../x"), Err(Errno::EINVAL));
        sys.create_file(&a, "h", 0o444, || Ok(Vec::new()), None::<Store>).unwrap();
        assert_eq!(sys.rename(&f, &a, "h"), Err(Errno::EEXIST));
    }
}

/// Active-reference drain: removal while 2+ threads read. Once `remove`
/// has returned, no `show` may start, and removal completes.
#[test]
fn removal_drains_concurrent_readers() {
    for config in designs() {
        let sys = Arc::new(Kernfs::new(config));
        let removed = Arc::new(AtomicBool::new(false));
        let late_show = Arc::new(AtomicBool::new(false));
        let (flag, late) = (Arc::clone(&removed), Arc::clone(&late_show));
        sys.create_file(
            &sys.root(),
            "slow",
            0o444,
            move || {
                if flag.load(Ordering::SeqCst) {
                    late.store(true, Ordering::SeqCst);
                }
                thread::sleep(Duration::from_micros(200));
                Ok(b"v".to_vec())
            },
            None::<Store>,
        )
        .unwrap();
        const READERS: usize = 3;
        // Readers that have read once: the removal waits for all of them, so
        // it always races readers inside or between `show` calls.
        let started = Arc::new(AtomicUsize::new(0));
        let readers: Vec<_> = (0..READERS)
            .map(|_| {
                let (sys, started) = (Arc::clone(&sys), Arc::clone(&started));
                thread::spawn(move || {
                    let p = sys.vfs().process(Credentials::root());
                    let mut ok = 0;
                    loop {
                        match read_all(&p, "/slow") {
                            Ok(v) => {
                                assert_eq!(v, b"v");
                                ok += 1;
                                if ok == 1 {
                                    started.fetch_add(1, Ordering::SeqCst);
                                }
                            }
                            Err(Errno::ENOENT | Errno::ENODEV) => return ok,
                            Err(e) => panic!("unexpected {e}"),
                        }
                    }
                })
            })
            .collect();
        wait_until("every reader starts", || started.load(Ordering::SeqCst) >= READERS);
        let handle = sys.lookup(&sys.root(), "slow").expect("the attribute exists");
        sys.remove(&handle).unwrap();
        removed.store(true, Ordering::SeqCst);
        let reads: Vec<usize> = readers.into_iter().map(|r| r.join().unwrap()).collect();
        assert!(reads.iter().all(|&n| n > 0), "{config:?}: every reader read before the removal: {reads:?}");
        assert!(!late_show.load(Ordering::SeqCst), "{config:?}: show ran after remove returned");
    }
}

/// Walkers racing adds, removes and renames (bounded): lookups return
/// either the node or ENOENT, never a removed node's contents after its
/// removal returned, and nothing panics.
#[test]
fn walkers_race_tree_changes() {
    let iterations: usize = vfscale_sync::test_support::stress_iters(300);
    for config in designs() {
        let sys = Arc::new(Kernfs::new(config));
        let stop = Arc::new(AtomicBool::new(false));
        let dir = sys.create_dir(&sys.root(), "d", 0o755).unwrap();
        let walkers: Vec<_> = (0..2)
            .map(|_| {
                let (sys, stop) = (Arc::clone(&sys), Arc::clone(&stop));
                thread::spawn(move || {
                    let p = sys.vfs().process(Credentials::root());
                    let mut found = 0usize;
                    while !stop.load(Ordering::SeqCst) {
                        for name in ["/d/x/attr", "/d/y/attr", "/d/missing"] {
                            match read_all(&p, name) {
                                Ok(v) => {
                                    assert_eq!(v, b"live");
                                    found += 1;
                                }
                                Err(Errno::ENOENT | Errno::ENODEV) => {}
                                Err(e) => panic!("{name}: {e}"),
                            }
                        }
                    }
                    found
                })
            })
            .collect();
        for i in 0..iterations {
            let x = sys.create_dir(&dir, "x", 0o755).unwrap();
            sys.create_file(&x, "attr", 0o444, || Ok(b"live".to_vec()), None::<Store>).unwrap();
            if i % 2 == 0 {
                sys.rename(&x, &dir, "y").unwrap();
            }
            sys.remove(&x).unwrap();
        }
        stop.store(true, Ordering::SeqCst);
        for w in walkers {
            w.join().unwrap();
        }
        let p = sys.vfs().process(Credentials::root());
        assert_eq!(p.stat("/d/x"), Err(Errno::ENOENT));
        assert_eq!(p.stat("/d/y"), Err(Errno::ENOENT));
        let names: Vec<_> = p.list_dir("/d").unwrap().into_iter().map(|e| e.name).collect();
        assert_eq!(names, [b".".to_vec(), b"..".to_vec()]);
    }
}

/// A `show` that blocks does not hold up a close in its process: a read
/// of an attribute counts its open file rather than borrowing it inside
/// the descriptor table's read-side section, which every close waits for.
#[test]
fn a_blocked_show_does_not_hold_up_a_close() {
    let sys = Kernfs::new(KernfsConfig::rcu());
    let (entered, release) = (Arc::new(AtomicBool::new(false)), Arc::new(AtomicBool::new(false)));
    let show = {
        let (entered, release) = (Arc::clone(&entered), Arc::clone(&release));
        move || {
            entered.store(true, Ordering::SeqCst);
            while !release.load(Ordering::SeqCst) {
                thread::sleep(Duration::from_millis(1));
            }
            Ok(b"late\n".to_vec())
        }
    };
    sys.create_file(&sys.root(), "slow", 0o444, show, None::<fn(&[u8]) -> vfscale::VfsResult<()>>).unwrap();
    sys.create_file(&sys.root(), "quick", 0o444, || Ok(b"now\n".to_vec()), None::<fn(&[u8]) -> vfscale::VfsResult<()>>)
        .unwrap();
    let p = Arc::new(sys.vfs().process(Credentials::root()));
    let (slow, quick) =
        (p.open("/slow", OpenFlags::RDONLY, 0).unwrap(), p.open("/quick", OpenFlags::RDONLY, 0).unwrap());
    let reader = {
        let p = Arc::clone(&p);
        thread::spawn(move || {
            let mut buf = [0u8; 16];
            p.read(slow, &mut buf).map(|n| buf[..n].to_vec())
        })
    };
    wait_until("the read enters the attribute", || entered.load(Ordering::SeqCst));
    let (tx, rx) = std::sync::mpsc::channel();
    let closer = {
        let p = Arc::clone(&p);
        thread::spawn(move || tx.send(p.close(quick)).unwrap())
    };
    // The show blocks until `release`, so a close that waits for it never
    // returns in time; a close that does not takes microseconds, and 30 s
    // is far beyond any scheduling delay of a slow, busy machine.
    let closed = rx.recv_timeout(Duration::from_secs(30));
    release.store(true, Ordering::SeqCst);
    assert_eq!(closed, Ok(Ok(())), "the close waited for the blocked show");
    closer.join().unwrap();
    assert_eq!(reader.join().unwrap().unwrap(), b"late\n");
}
