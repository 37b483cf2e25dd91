//! The split directory design (`DirLocking::Split`) against sequential
//! models: a directory's link count and times at `stat` while other CPUs
//! change it, rmdir racing creates, creates racing for one name, rename
//! over a name racing lookups, listing cookies across changes, and a
//! directory that outgrows its first table. Every wait is on state, never
//! on time; iteration counts come from `VFSCALE_STRESS_ITERS`.

use std::collections::BTreeSet;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::thread;
use vfscale::config::DirLocking;
use vfscale::{Credentials, Errno, OpenFlags, SetTime, Timespec, Vfs, VfsConfig, Whence};
use vfscale_sync::cpu::with_virtual_cpu;
use vfscale_sync::test_support::{stress_iters, xorshift64};

fn split() -> Vfs {
    Vfs::new(VfsConfig { dir_locking: DirLocking::Split, ..VfsConfig::default() })
}

/// Sequentially, on alternating CPUs: after every mkdir, rmdir, create,
/// unlink and rename, the directory's link count is the model's exactly,
/// and its times never go back; an explicit mtime replaces the per-CPU
/// times, older or not.
#[test]
fn link_count_and_times_follow_the_model_across_cpus() {
    let vfs = split();
    let p = vfs.process(Credentials::root());
    p.mkdir("/d", 0o755).unwrap();
    let (mut subdirs, mut files) = (BTreeSet::new(), BTreeSet::new());
    let mut last = p.stat("/d").unwrap();
    let mut seed = 0x9e37_79b9u64;
    for step in 0..stress_iters(2000) {
        let n = xorshift64(&mut seed) % 16;
        with_virtual_cpu(step % 2, || match seed % 5 {
            0 => {
                let made = p.mkdir(format!("/d/s{n}"), 0o755);
                assert_eq!(made.is_ok(), subdirs.insert(n), "mkdir s{n}");
            }
            1 => {
                let removed = p.rmdir(format!("/d/s{n}"));
                assert_eq!(removed.is_ok(), subdirs.remove(&n), "rmdir s{n}");
            }
            2 => match p.open(format!("/d/f{n}"), OpenFlags::CREAT | OpenFlags::EXCL | OpenFlags::WRONLY, 0o644) {
                Ok(fd) => {
                    assert!(files.insert(n));
                    p.close(fd).unwrap();
                }
                Err(e) => assert_eq!((e, files.contains(&n)), (Errno::EEXIST, true)),
            },
            3 => {
                let removed = p.unlink(format!("/d/f{n}"));
                assert_eq!(removed.is_ok(), files.remove(&n), "unlink f{n}");
            }
            _ => {
                // A subdirectory renamed over another (or to a new name).
                let to = (n + 1) % 16;
                let renamed = p.rename(format!("/d/s{n}"), format!("/d/s{to}"));
                if subdirs.contains(&n) {
                    renamed.unwrap();
                    subdirs.remove(&n);
                    subdirs.insert(to);
                } else {
                    assert_eq!(renamed, Err(Errno::ENOENT));
                }
            }
        });
        let now = p.stat("/d").unwrap();
        assert_eq!(now.nlink as usize, 2 + subdirs.len(), "step {step}");
        assert!(now.mtime >= last.mtime && now.ctime >= last.ctime, "step {step}: times went back");
        last = now;
    }
    let past = Timespec { sec: 1_000_000, nsec: 5 };
    p.utimens("/d", SetTime::Omit, SetTime::At(past)).unwrap();
    assert_eq!(p.stat("/d").unwrap().mtime, past, "an explicit time outweighs the per-CPU ones");
    with_virtual_cpu(1, || p.mkdir("/d/later", 0o755)).unwrap();
    assert!(p.stat("/d").unwrap().mtime > past);
}

/// While threads mkdir names of their own in one directory, every `stat`
/// of it sees a link count between the mkdirs done before it began and
/// those begun before it ended, and never fewer than the last one saw.
#[test]
fn stat_under_concurrent_mkdirs_is_exact() {
    let vfs = split();
    let p = vfs.process(Credentials::root());
    p.mkdir("/d", 0o755).unwrap();
    let per_thread = stress_iters(600);
    let (begun, done) = (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0)));
    let writers: Vec<_> = (0..3)
        .map(|t| {
            let (vfs, begun, done) = (vfs.clone(), Arc::clone(&begun), Arc::clone(&done));
            thread::spawn(move || {
                let q = vfs.process(Credentials::root());
                for i in 0..per_thread {
                    begun.fetch_add(1, Ordering::SeqCst);
                    q.mkdir(format!("/d/t{t}-{i}"), 0o755).unwrap();
                    done.fetch_add(1, Ordering::SeqCst);
                }
            })
        })
        .collect();
    let mut seen = 0;
    while done.load(Ordering::SeqCst) < 3 * per_thread {
        let low = done.load(Ordering::SeqCst);
        let links = p.stat("/d").unwrap().nlink as usize - 2;
        let high = begun.load(Ordering::SeqCst);
        assert!((low..=high).contains(&links), "{links} subdirectories, {low} made, {high} begun");
        assert!(links >= seen, "went back from {seen} to {links}");
        seen = links;
    }
    for w in writers {
        w.join().unwrap();
    }
    assert_eq!(p.stat("/d").unwrap().nlink as usize, 2 + 3 * per_thread);
}

/// rmdir racing creates in the directory it removes: it fails with
/// ENOTEMPTY or removes an empty directory, and a create after a
/// successful rmdir fails with ENOENT; a directory is never removed with
/// an entry in it.
#[test]
fn rmdir_never_removes_a_directory_a_create_got_into() {
    let vfs = split();
    let p = vfs.process(Credentials::root());
    for round in 0..stress_iters(300) {
        let dir = format!("/r{round}");
        p.mkdir(&dir, 0o755).unwrap();
        let start = Arc::new(AtomicBool::new(false));
        let creator = {
            let (vfs, start, dir) = (vfs.clone(), Arc::clone(&start), dir.clone());
            thread::spawn(move || {
                let q = vfs.process(Credentials::root());
                while !start.load(Ordering::Acquire) {
                    std::hint::spin_loop();
                }
                let made = q.open(format!("{dir}/f{}", round % 7), OpenFlags::CREAT | OpenFlags::WRONLY, 0o644);
                made.map(|fd| q.close(fd).unwrap())
            })
        };
        start.store(true, Ordering::Release);
        let removed = p.rmdir(&dir);
        let created = creator.join().unwrap();
        match (removed, created) {
            (Ok(()), Err(Errno::ENOENT)) => assert_eq!(p.stat(&dir), Err(Errno::ENOENT)),
            (Err(Errno::ENOTEMPTY), Ok(())) => assert_eq!(p.list_dir(&dir).unwrap().len(), 3),
            other => panic!("round {round}: rmdir and create gave {other:?}"),
        }
    }
}

/// A rename over an existing name replaces it in one step: a thread
/// looking the name up meanwhile always finds it (the old file or the new).
#[test]
fn rename_over_a_name_never_leaves_it_missing() {
    let vfs = split();
    let p = vfs.process(Credentials::root());
    p.mkdir("/d", 0o755).unwrap();
    let fd = p.open("/d/target", OpenFlags::CREAT | OpenFlags::WRONLY, 0o644).unwrap();
    p.close(fd).unwrap();
    let done = Arc::new(AtomicBool::new(false));
    let looker = {
        let (vfs, done) = (vfs.clone(), Arc::clone(&done));
        thread::spawn(move || {
            let q = vfs.process(Credentials::root());
            let mut looks = 0;
            while !done.load(Ordering::Acquire) || looks == 0 {
                q.stat("/d/target").expect("the target is always there");
                assert!(q.list_dir("/d").unwrap().iter().any(|e| e.name == b"target"), "listed");
                looks += 1;
            }
        })
    };
    for i in 0..stress_iters(600) {
        let name = format!("/d/new{}", i % 5);
        let fd = p.open(&name, OpenFlags::CREAT | OpenFlags::WRONLY, 0o644).unwrap();
        p.close(fd).unwrap();
        p.rename(&name, "/d/target").unwrap();
    }
    done.store(true, Ordering::Release);
    looker.join().unwrap();
}

/// `telldir` cookies stay valid across creates and unlinks: resuming at
/// one returns exactly the entries after it that are still there, and a
/// directory grown far past its first table lists every name once.
#[test]
fn cookies_survive_changes_and_growth() {
    let vfs = split();
    let p = vfs.process(Credentials::root());
    p.mkdir("/d", 0o755).unwrap();
    let names: Vec<String> = (0..5000).map(|i| format!("n{i}")).collect();
    for name in &names {
        let fd = p.open(format!("/d/{name}"), OpenFlags::CREAT | OpenFlags::WRONLY, 0o644).unwrap();
        p.close(fd).unwrap();
    }
    let fd = p.open("/d", OpenFlags::DIRECTORY, 0).unwrap();
    let first = p.readdir(fd, 1002).unwrap();
    let cookie = p.lseek(fd, 0, Whence::Cur).unwrap();
    let rest_before: Vec<Vec<u8>> = p.readdir(fd, usize::MAX).unwrap().into_iter().map(|e| e.name).collect();
    // Remove every third name after the cookie and one before it, add new ones.
    for name in rest_before.iter().step_by(3) {
        p.unlink(format!("/d/{}", String::from_utf8_lossy(name))).unwrap();
    }
    p.unlink(format!("/d/{}", String::from_utf8_lossy(&first[500].name))).unwrap();
    for i in 0..100 {
        let made = p.open(format!("/d/late{i}"), OpenFlags::CREAT | OpenFlags::WRONLY, 0o644).unwrap();
        p.close(made).unwrap();
    }
    assert_eq!(p.lseek(fd, cookie as i64, Whence::Set).unwrap(), cookie);
    let rest_after: BTreeSet<Vec<u8>> = p.readdir(fd, usize::MAX).unwrap().into_iter().map(|e| e.name).collect();
    let kept: BTreeSet<Vec<u8>> = rest_before.iter().skip(1).step_by(3).cloned().collect();
    assert!(kept.is_subset(&rest_after), "every surviving entry after the cookie comes back");
    assert!(rest_after.iter().all(|n| kept.contains(n) || n.starts_with(b"late") || rest_before.contains(n)));
    assert!(!rest_after.iter().any(|n| first.iter().any(|e| e.name == *n)), "nothing before the cookie again");
    p.close(fd).unwrap();
    let listed = p.list_dir("/d").unwrap();
    let unique: BTreeSet<&[u8]> = listed.iter().map(|e| &e.name[..]).collect();
    assert_eq!(unique.len(), listed.len(), "each name once");
    assert_eq!(p.stat("/d").unwrap().nlink, 2);
}

/// A directory split over and over while threads create in it and
/// another lists it and looks names up: the names made before every
/// listing began are listed once each and always found, and at the end
/// every name is there once.
#[test]
fn listings_and_lookups_hold_while_buckets_split() {
    let vfs = split();
    let p = vfs.process(Credentials::root());
    p.mkdir("/d", 0o755).unwrap();
    let per_thread = stress_iters(600) * 3;
    let made: Arc<Vec<AtomicUsize>> = Arc::new((0..2).map(|_| AtomicUsize::new(0)).collect());
    let creators: Vec<_> = (0..2)
        .map(|t| {
            let (vfs, made) = (vfs.clone(), Arc::clone(&made));
            thread::spawn(move || {
                let q = vfs.process(Credentials::root());
                for i in 0..per_thread {
                    let fd = q.open(format!("/d/t{t}-{i}"), OpenFlags::CREAT | OpenFlags::WRONLY, 0o644).unwrap();
                    q.close(fd).unwrap();
                    made[t].store(i + 1, Ordering::Release);
                }
            })
        })
        .collect();
    let mut listings = 0;
    while made.iter().any(|m| m.load(Ordering::Acquire) < per_thread) || listings == 0 {
        let before: Vec<usize> = made.iter().map(|m| m.load(Ordering::Acquire)).collect();
        let listed = p.list_dir("/d").unwrap();
        let mut seen = BTreeSet::new();
        for entry in &listed {
            assert!(seen.insert(entry.name.clone()), "{:?} listed twice", String::from_utf8_lossy(&entry.name));
        }
        for (t, &count) in before.iter().enumerate() {
            for i in (0..count).step_by(97) {
                let name = format!("t{t}-{i}");
                assert!(seen.contains(name.as_bytes()), "{name}, made before the listing, not listed");
                p.stat(format!("/d/{name}")).expect("a made name is found");
            }
        }
        listings += 1;
    }
    for c in creators {
        c.join().unwrap();
    }
    assert_eq!(p.list_dir("/d").unwrap().len(), 2 + 2 * per_thread);
}

/// Moves of files between directories run side by side (only a move of a
/// directory excludes the others), so their locks need one total order.
/// Three threads move one file around a cycle of directories laid out to
/// close a cycle under "ancestors first, then inode number": `a` holds
/// `b`, while `b` < `c` < `a` by inode number, and every move's two names
/// hash alike. The moves neither deadlock nor lose or copy the file, in
/// every directory design.
#[test]
fn file_moves_around_a_cycle_of_directories_neither_deadlock_nor_lose_the_file() {
    for dir_locking in [DirLocking::Split, DirLocking::RwSem, DirLocking::GlobalMutex] {
        let vfs = Vfs::new(VfsConfig { dir_locking, ..VfsConfig::default() });
        let p = vfs.process(Credentials::root());
        for dir in ["/b", "/c", "/a"] {
            p.mkdir(dir, 0o755).unwrap();
        }
        p.rename("/b", "/a/b").unwrap();
        let ino = |path: &str| p.stat(path).unwrap().ino;
        assert!(ino("/a/b") < ino("/c") && ino("/c") < ino("/a"), "the layout the test needs");
        let fd = p.open("/a/x", OpenFlags::CREAT | OpenFlags::WRONLY, 0o644).unwrap();
        p.close(fd).unwrap();
        let moves = [("/a/x", "/a/b/x"), ("/a/b/x", "/c/x"), ("/c/x", "/a/x")];
        let movers: Vec<_> = moves
            .into_iter()
            .enumerate()
            .map(|(cpu, (from, to))| {
                let vfs = vfs.clone();
                thread::spawn(move || {
                    let q = vfs.process(Credentials::root());
                    let mut moved = 0;
                    for _ in 0..stress_iters(3000) {
                        match with_virtual_cpu(cpu, || q.rename(from, to)) {
                            Ok(()) => moved += 1,
                            Err(e) => assert_eq!(e, Errno::ENOENT, "{from} -> {to}"),
                        }
                    }
                    moved
                })
            })
            .collect();
        // A deadlock would hang the suite; fail it instead. The movers take
        // milliseconds, so five minutes is a margin no busy machine nears.
        let (finished, all_moved) = std::sync::mpsc::channel();
        thread::spawn(move || {
            let moved: usize = movers.into_iter().map(|m| m.join().unwrap()).sum();
            finished.send(moved).unwrap();
        });
        let moved = all_moved
            .recv_timeout(std::time::Duration::from_secs(300))
            .unwrap_or_else(|_| panic!("{dir_locking:?}: the movers deadlocked (or one panicked)"));
        let places = ["/a/x", "/a/b/x", "/c/x"].into_iter().filter(|path| p.stat(path).is_ok()).count();
        assert_eq!(places, 1, "{dir_locking:?}: the file is in exactly one place after {moved} moves");
    }
}

/// A removed directory reads a link count of 0, however its records of
/// subdirectories made and removed on other CPUs stand; and its `..`,
/// which counts per CPU on the parent, keeps the parent after the parent
/// is removed too, so a walk up from it finds the removed parent.
#[test]
fn removed_directories_read_no_links_and_keep_their_parent() {
    for dir_locking in [DirLocking::Split, DirLocking::RwSem] {
        let vfs = Vfs::new(VfsConfig { dir_locking, ..VfsConfig::default() });
        let p = vfs.process(Credentials::root());
        p.mkdir("/a", 0o755).unwrap();
        p.mkdir("/a/b", 0o755).unwrap();
        for cpu in 0..4 {
            with_virtual_cpu(cpu, || p.mkdir(format!("/a/b/s{cpu}"), 0o755)).unwrap();
        }
        for cpu in 0..4 {
            with_virtual_cpu(3 - cpu, || p.rmdir(format!("/a/b/s{cpu}"))).unwrap();
        }
        let b = p.open("/a/b", OpenFlags::RDONLY | OpenFlags::DIRECTORY, 0).unwrap();
        let a_ino = p.stat("/a").unwrap().ino;
        with_virtual_cpu(1, || p.rmdir("/a/b")).unwrap();
        assert_eq!(p.fstat(b).unwrap().nlink, 0, "{dir_locking:?}: removed");
        p.rmdir("/a").unwrap();
        assert_eq!(p.stat("/a").unwrap_err(), Errno::ENOENT);
        let up = p.openat(b, "..", OpenFlags::RDONLY | OpenFlags::DIRECTORY, 0).unwrap();
        let parent = p.fstat(up).unwrap();
        assert_eq!((parent.ino, parent.nlink), (a_ino, 0), "{dir_locking:?}: `..` of a removed directory");
        p.close(up).unwrap();
        p.close(b).unwrap();
    }
}

/// An unlink of a directory racing an rmdir of it and then a chmod of its
/// parent answers as some order of the three would: with the parent going
/// from writable to not, EISDIR or ENOENT (never EACCES: by the time the
/// parent is not writable the name is gone, which a look-up finds before
/// any permission check); the other way round, EACCES or ENOENT (never
/// EISDIR). The unlink's lock-free answer read the parent's mode after
/// its look-up, and gave both impossible answers until it checked that
/// the name had held the same entry throughout (7-40 in 200,000 rounds).
#[test]
fn an_unlink_of_a_directory_racing_its_rmdir_answers_in_some_order() {
    let vfs = Arc::new(split());
    let root = vfs.process(Credentials::root());
    root.mkdir("/d", 0o777).unwrap();
    let alice = vfs.process(Credentials::user(1000, 1000, []));
    let (go, went) = std::sync::mpsc::channel::<u32>();
    let (done, finished) = std::sync::mpsc::channel::<()>();
    let remover = {
        let vfs = Arc::clone(&vfs);
        thread::spawn(move || {
            let root = vfs.process(Credentials::root());
            while let Ok(mode_after) = went.recv() {
                root.rmdir("/d/s").unwrap();
                root.chmod("/d", mode_after).unwrap();
                done.send(()).unwrap();
            }
        })
    };
    for round in 0..stress_iters(20_000) {
        let (before, after, impossible) =
            if round % 2 == 0 { (0o777, 0o555, Errno::EACCES) } else { (0o555, 0o777, Errno::EISDIR) };
        root.chmod("/d", before).unwrap();
        root.mkdir("/d/s", 0o777).unwrap();
        go.send(after).unwrap();
        loop {
            match alice.unlink("/d/s") {
                Err(Errno::ENOENT) => break,
                Err(e) if e == impossible => panic!("round {round}: {e:?} from /d {before:o} -> {after:o}"),
                Err(Errno::EISDIR | Errno::EACCES) => {}
                other => panic!("round {round}: {other:?}"),
            }
        }
        finished.recv().unwrap();
    }
    drop(go);
    remover.join().unwrap();
}

/// Two threads create the same names (directories and files) with just
/// enough inodes left for one of each: a create that finds its name
/// missing makes its inode before locking the name, so the one that loses
/// the race has made an inode too, but only a create that finds the name
/// still missing under the lock charges the inode limit. Exactly one of
/// each pair succeeds, the other fails with EEXIST, never ENOSPC, and the
/// loser's inode is gone.
#[test]
fn creates_racing_for_one_name_leave_one_inode() {
    const NAMES: usize = 200;
    let limit = NAMES as u64 + 2;
    let vfs = Vfs::new(VfsConfig { dir_locking: DirLocking::Split, inode_limit: limit, ..VfsConfig::default() });
    let p = vfs.process(Credentials::root());
    for round in 0..stress_iters(20) {
        p.mkdir("/r", 0o755).unwrap();
        assert_eq!(vfs.statfs().files_free, NAMES as u64, "round {round}: the root, the directory and nothing else");
        let start = Arc::new(std::sync::Barrier::new(2));
        let racers: Vec<_> = (0..2)
            .map(|_| {
                let (vfs, start) = (vfs.clone(), Arc::clone(&start));
                thread::spawn(move || {
                    let q = vfs.process(Credentials::root());
                    start.wait();
                    (0..NAMES)
                        .map(|i| {
                            let path = format!("/r/n{i}");
                            if i % 2 == 0 {
                                q.mkdir(&path, 0o755)
                            } else {
                                let flags = OpenFlags::CREAT | OpenFlags::EXCL | OpenFlags::WRONLY;
                                q.open(&path, flags, 0o644).map(|fd| q.close(fd).unwrap())
                            }
                        })
                        .collect::<Vec<_>>()
                })
            })
            .collect();
        let results: Vec<Vec<_>> = racers.into_iter().map(|t| t.join().unwrap()).collect();
        for (i, pair) in results[0].iter().zip(&results[1]).enumerate() {
            match pair {
                (Ok(()), Err(Errno::EEXIST)) | (Err(Errno::EEXIST), Ok(())) => {}
                other => panic!("round {round}, name {i}: {other:?}"),
            }
        }
        assert_eq!(vfs.statfs().files_free, 0, "round {round}: one inode per name");
        for i in 0..NAMES {
            let path = format!("/r/n{i}");
            if i % 2 == 0 { p.rmdir(&path) } else { p.unlink(&path) }.unwrap();
        }
        p.rmdir("/r").unwrap();
        // Removed inodes give their space back once no walker can see them.
        assert!(vfs.release_barrier(std::time::Duration::from_secs(60)), "round {round}: releases ran");
    }
}
