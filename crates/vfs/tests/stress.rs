//! Bounded concurrent stress of the VFS in several designs: lookups and
//! opens racing renames, unlinks, rmdirs and creates, with linearizability
//! checks that only assert what an atomic namespace guarantees.
//!
//! Every check brackets a lookup between two `SeqCst` loads of counters the
//! writers publish around their calls: a writer stores "started k" before
//! its call and "done k" after it returns. A `done` value read before a
//! lookup means that call returned before the lookup began (so the lookup
//! must see its effect); a `started` value read after a lookup that is
//! still below k means call k had not begun when the lookup ended (so the
//! lookup must not see its effect).
//!
//! Iterations come from `VFSCALE_STRESS_ITERS` (default sized for a few
//! seconds on two cores in a debug build).

use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering::SeqCst};
use std::sync::{Arc, Barrier};
use std::thread;
use std::time::Duration;
use vfscale::config::WalkMode;
use vfscale::{Credentials, Errno, FileType, OpenFlags, Process, Stat, Vfs, VfsConfig, VfsResult};
use vfscale_sync::test_support::wait_until;

fn iterations() -> usize {
    vfscale_sync::test_support::stress_iters(600)
}

fn root_of(vfs: &Vfs) -> Process {
    vfs.process(Credentials::root())
}

fn create(p: &Process, path: &str, contents: &[u8]) -> VfsResult<()> {
    let fd = p.open(path, OpenFlags::CREAT | OpenFlags::EXCL | OpenFlags::WRONLY, 0o644)?;
    assert_eq!(p.write(fd, contents), Ok(contents.len()), "write to new {path}");
    p.close(fd)
}

/// Removes everything below `dir` (depth first), as root.
fn remove_tree(p: &Process, dir: &str) {
    for entry in p.list_dir(dir).unwrap() {
        if entry.name == b"." || entry.name == b".." {
            continue;
        }
        let path = format!("{}/{}", dir.trim_end_matches('/'), String::from_utf8(entry.name).unwrap());
        if entry.file_type == FileType::Directory {
            remove_tree(p, &path);
            p.rmdir(&path).unwrap();
        } else {
            p.unlink(&path).unwrap();
        }
    }
}

/// Empties the filesystem and checks that nothing is left: one inode (the
/// root) and no dentries once `drop_caches` ran. `drop_caches` relies on
/// the releases deferred for rcu-walkers, which it waits for.
fn assert_empty_and_no_leaks(vfs: &Vfs) {
    let root = root_of(vfs);
    remove_tree(&root, "/");
    let names: Vec<_> = root.list_dir("/").unwrap().into_iter().map(|e| e.name).collect();
    assert_eq!(names, [b".".to_vec(), b"..".to_vec()]);
    drop(root);
    assert!(vfs.drop_caches(Duration::from_secs(60)), "{:?}: deferred releases never ran", vfs.config());
    let stats = vfs.statfs();
    assert_eq!(
        (stats.inodes, stats.dentries, stats.negative_dentries, stats.bytes),
        (1, 0, 0, 0),
        "{:?}: leaked after emptying the tree: {stats:?}",
        vfs.config()
    );
}

/// A writer's progress: `started` is stored before call k, `done` after it
/// returned, both as k (calls are numbered from 1).
#[derive(Default)]
struct Progress {
    started: AtomicUsize,
    done: AtomicUsize,
}

/// (a) Unlinks and creates are seen at once. The unlinker creates
/// `/u/f{g}` (holding g's bytes), publishes it, then unlinks it; names are
/// never reused.
struct UnlinkCheck {
    created: Progress,
    unlinked: Progress,
}

impl UnlinkCheck {
    fn path(g: usize) -> String {
        format!("/u/f{g}")
    }

    fn unlinker(&self, p: &Process, iters: usize) {
        for g in 0..iters {
            let path = Self::path(g);
            self.created.started.store(g + 1, SeqCst);
            create(p, &path, &(g as u64).to_le_bytes()).unwrap();
            self.created.done.store(g + 1, SeqCst);
            // Let lookers find it (and cache it) before it goes.
            for _ in 0..3 {
                assert!(p.stat(&path).is_ok());
            }
            self.unlinked.started.store(g + 1, SeqCst);
            p.unlink(&path).unwrap();
            self.unlinked.done.store(g + 1, SeqCst);
        }
    }

    fn look(&self, p: &Process, round: usize) {
        // Unlinked before we start: must be gone, to stat and to open.
        let gone = self.unlinked.done.load(SeqCst);
        if gone > 0 {
            for g in [gone - 1, round % gone] {
                let path = Self::path(g);
                assert_eq!(p.stat(&path), Err(Errno::ENOENT), "{path} found after its unlink returned");
                assert_eq!(
                    p.open(&path, OpenFlags::RDONLY, 0).map(|fd| p.close(fd)),
                    Err(Errno::ENOENT),
                    "{path} opened after its unlink returned"
                );
            }
        }
        // Created before we start and not yet being unlinked when we end:
        // must be there, with its contents.
        let made = self.created.done.load(SeqCst);
        if made > 0 {
            let g = made - 1;
            let path = Self::path(g);
            let stat = p.stat(&path);
            let opened = p.open(&path, OpenFlags::RDONLY, 0);
            let contents = opened.map(|fd| {
                let mut buf = [0u8; 16];
                let n = p.read(fd, &mut buf).unwrap();
                p.close(fd).unwrap();
                buf[..n].to_vec()
            });
            if self.unlinked.started.load(SeqCst) <= g {
                assert_eq!(stat.map(|s| s.size), Ok(8), "{path} not found after its create returned");
                assert_eq!(contents, Ok((g as u64).to_le_bytes().to_vec()), "{path}: wrong file");
            } else {
                assert!(matches!(stat, Ok(_) | Err(Errno::ENOENT)), "{path}: {stat:?}");
            }
        }
        // The next name, usually missing: plants negative dentries that the
        // create must replace.
        let next = Self::path(self.created.started.load(SeqCst));
        let missing = p.stat(&next);
        assert!(matches!(missing, Ok(_) | Err(Errno::ENOENT)), "{next}: {missing:?}");
    }
}

/// (b) Renames are atomic. One object moves along a one-way chain of
/// names, `path(0) -> path(1) -> ...`; `probe(i)` is the path that finds
/// the watched inode while the object is at `path(i)`.
struct RenameChain {
    progress: Progress,
    path: fn(usize) -> String,
    probe: fn(usize) -> String,
    ino: AtomicUsize,
}

impl RenameChain {
    fn renamer(&self, p: &Process, iters: usize) {
        for i in 0..iters {
            self.progress.started.store(i + 1, SeqCst);
            p.rename((self.path)(i), (self.path)(i + 1)).unwrap();
            self.progress.done.store(i + 1, SeqCst);
        }
    }

    /// Whether the watched object is found at `probe(i)`: by a `stat`
    /// (which must find the watched inode), or by an rmdir of the probed
    /// file, which fails without a lock where the name is missing (ENOENT)
    /// and under the name's lock where it is there (ENOTDIR); anything
    /// else fails the test.
    fn find(&self, p: &Process, i: usize, by_rmdir: bool) -> bool {
        let path = (self.probe)(i);
        if by_rmdir {
            return match p.rmdir(&path) {
                Err(Errno::ENOTDIR) => true,
                Err(Errno::ENOENT) => false,
                other => panic!("rmdir {path}: {other:?}"),
            };
        }
        match p.stat(&path) {
            Ok(stat) => {
                assert_eq!(stat.ino as usize, self.ino.load(SeqCst), "{path}: another inode");
                true
            }
            Err(Errno::ENOENT) => false,
            Err(e) => panic!("{path}: {e:?}"),
        }
    }

    fn observe(&self, p: &Process, by_rmdir: bool) {
        let find = |i| self.find(p, i, by_rmdir);
        // Forward: the object is at k or k+1 throughout (k = done before,
        // started after <= k+1). If n_k is missing at t1 it was already at
        // k+1, so n_{k+1} must be there at t2 > t1: both missing would mean
        // the rename made the object vanish for a moment.
        let k = self.progress.done.load(SeqCst);
        let at_k = find(k);
        let at_next = find(k + 1);
        let started = self.progress.started.load(SeqCst);
        if started <= k + 1 {
            assert!(at_k || at_next, "rename {k}->{} made the object vanish", k + 1);
        }
        if started == k {
            assert!(
                at_k && !at_next,
                "object not at {k} while no rename ran (found there: {at_k}, at next: {at_next})"
            );
        }
        // Backward: once found at k+1 it never reappears at k (names are
        // never reused, renames only go forward).
        let k = self.progress.done.load(SeqCst);
        if find(k + 1) {
            assert!(!find(k), "object back at {k} after being found at {}", k + 1);
        }
        // Renamed away before we started: gone from the old name.
        if k > 0 {
            assert!(!find(k - 1), "object still at {} after the rename away returned", k - 1);
        }
    }
}

/// A file moving between three directories: every other rename is within
/// one directory (which takes no global rename lock or seqcount), the
/// others between two.
fn file_chain() -> RenameChain {
    fn path(i: usize) -> String {
        format!("/r{}/n{i}", i / 2 % 3)
    }
    RenameChain { progress: Progress::default(), path, probe: path, ino: AtomicUsize::new(0) }
}

/// A directory (with a file two levels down) moving between two parents,
/// every other time within one; lookups walk through it, so they race the
/// rename of an inner component.
fn dir_chain() -> RenameChain {
    fn path(i: usize) -> String {
        format!("/m{}/a{i}", i / 2 % 2)
    }
    fn probe(i: usize) -> String {
        format!("/m{}/a{i}/sub/f", i / 2 % 2)
    }
    RenameChain { progress: Progress::default(), path, probe, ino: AtomicUsize::new(0) }
}

/// Creates and unlinks files in directories that another thread keeps
/// removing and re-creating. A directory holding a file cannot be removed,
/// so every file this thread creates must be unlinkable by it; and a file
/// held open keeps its data after its name is gone.
fn creator(p: &Process, id: usize, iters: usize) {
    for i in 0..iters {
        let dir = format!("/c/d{}", i % 4);
        let path = format!("{dir}/t{id}_{i}");
        match create(p, &path, b"x") {
            Ok(()) => {
                let fd = p.open(&path, OpenFlags::RDWR, 0).unwrap();
                p.unlink(&path).unwrap_or_else(|e| panic!("unlink of my own {path}: {e:?}"));
                assert_eq!(p.stat(&path), Err(Errno::ENOENT));
                assert_eq!(p.pwrite(fd, b"yz", 1), Ok(2));
                let mut buf = [0u8; 4];
                assert_eq!(p.pread(fd, &mut buf, 0), Ok(3));
                assert_eq!(&buf[..3], b"xyz");
                assert_eq!(p.fstat(fd).map(|s| s.nlink), Ok(0));
                p.close(fd).unwrap();
            }
            // The directory was removed before or during the create.
            Err(Errno::ENOENT) => {}
            Err(e) => panic!("create {path}: {e:?}"),
        }
    }
}

fn dir_churner(p: &Process, iters: usize) {
    for i in 0..iters {
        let dir = format!("/c/d{}", i % 4);
        match p.rmdir(&dir) {
            Ok(()) | Err(Errno::ENOENT | Errno::ENOTEMPTY) => {}
            Err(e) => panic!("rmdir {dir}: {e:?}"),
        }
        match p.mkdir(&dir, 0o755) {
            Ok(()) | Err(Errno::EEXIST) => {}
            Err(e) => panic!("mkdir {dir}: {e:?}"),
        }
        let listing = p.list_dir("/c");
        assert!(matches!(listing, Ok(ref l) if l.len() <= 6), "/c: {listing:?}");
    }
}

struct CountOut(Arc<AtomicUsize>);

impl Drop for CountOut {
    fn drop(&mut self) {
        self.0.fetch_sub(1, SeqCst);
    }
}

fn stress(config: VfsConfig) {
    let iters = iterations();
    // Renames are cheaper than the other writers' rounds: more of them keep
    // the chains moving for as long as the others run.
    let renames = 3 * iters;
    let vfs = Vfs::new(config);
    let root = root_of(&vfs);
    for dir in ["/u", "/r0", "/r1", "/r2", "/m0", "/m1", "/c", "/c/d0", "/c/d1", "/c/d2", "/c/d3"] {
        root.mkdir(dir, 0o755).unwrap();
    }
    let unlinks = Arc::new(UnlinkCheck { created: Progress::default(), unlinked: Progress::default() });
    let files = Arc::new(file_chain());
    create(&root, &(files.path)(0), b"moving").unwrap();
    let dirs = Arc::new(dir_chain());
    root.mkdir((dirs.path)(0), 0o755).unwrap();
    root.mkdir(format!("{}/sub", (dirs.path)(0)), 0o755).unwrap();
    create(&root, &(dirs.probe)(0), b"deep").unwrap();
    for chain in [&files, &dirs] {
        let ino: Stat = root.stat((chain.probe)(0)).unwrap();
        chain.ino.store(ino.ino as usize, SeqCst);
    }

    let writers_left = Arc::new(AtomicUsize::new(5));
    let stop = Arc::new(AtomicBool::new(false));
    let start = Arc::new(Barrier::new(8));
    let mut threads = Vec::new();
    let spawn =
        |threads: &mut Vec<thread::JoinHandle<usize>>, name: &str, body: Box<dyn FnOnce(&Process) -> usize + Send>| {
            let vfs = vfs.clone();
            let start = Arc::clone(&start);
            let handle = thread::Builder::new()
                .name(name.to_string())
                .spawn(move || {
                    let p = vfs.process(Credentials::root());
                    start.wait();
                    body(&p)
                })
                .unwrap();
            threads.push(handle);
        };
    // Writers: each counts itself out when it ends, even by panicking, so
    // the readers stop.
    let writer = |f: Box<dyn FnOnce(&Process) + Send>| -> Box<dyn FnOnce(&Process) -> usize + Send> {
        let left = CountOut(Arc::clone(&writers_left));
        Box::new(move |p| {
            let _left = left;
            f(p);
            1
        })
    };
    let u = Arc::clone(&unlinks);
    spawn(&mut threads, "unlinker", writer(Box::new(move |p| u.unlinker(p, iters))));
    let f = Arc::clone(&files);
    spawn(&mut threads, "file renamer", writer(Box::new(move |p| f.renamer(p, renames))));
    let d = Arc::clone(&dirs);
    spawn(&mut threads, "dir renamer", writer(Box::new(move |p| d.renamer(p, renames))));
    spawn(&mut threads, "creator", writer(Box::new(move |p| creator(p, 0, iters))));
    spawn(&mut threads, "dir churner", writer(Box::new(move |p| dir_churner(p, iters))));
    // Readers run until every writer is done.
    for id in 0..3 {
        let (u, f, d) = (Arc::clone(&unlinks), Arc::clone(&files), Arc::clone(&dirs));
        let (left, stop) = (Arc::clone(&writers_left), Arc::clone(&stop));
        spawn(
            &mut threads,
            &format!("reader {id}"),
            Box::new(move |p| {
                let mut rounds = 0;
                while left.load(SeqCst) > 0 && !stop.load(SeqCst) {
                    match (id + rounds) % 3 {
                        0 => u.look(p, rounds),
                        // Every other round probes by failing rmdirs.
                        1 => f.observe(p, rounds % 2 == 0),
                        _ => d.observe(p, rounds % 2 == 0),
                    }
                    rounds += 1;
                }
                rounds
            }),
        );
    }
    let mut panics = Vec::new();
    for handle in threads {
        let name = handle.thread().name().unwrap_or("?").to_string();
        match handle.join() {
            Ok(_) => {}
            Err(payload) => {
                // Stop the readers so the other joins return.
                stop.store(true, SeqCst);
                let message = payload
                    .downcast_ref::<String>()
                    .cloned()
                    .or_else(|| payload.downcast_ref::<&str>().map(|s| s.to_string()))
                    .unwrap_or_default();
                panics.push(format!("{name}: {message}"));
            }
        }
    }
    assert!(panics.is_empty(), "{config:?}: {panics:#?}");

    // Final state: the chains ended where the renamers left them, every
    // unlinked file is gone, and no directory of /c holds a file.
    assert_eq!(root.stat((files.probe)(renames)).map(|s| s.size), Ok(6));
    assert_eq!(root.stat((dirs.probe)(renames)).map(|s| s.size), Ok(4));
    let left: Vec<_> = root.list_dir("/u").unwrap().into_iter().map(|e| e.name).collect();
    assert_eq!(left, [b".".to_vec(), b"..".to_vec()]);
    for entry in root.list_dir("/c").unwrap().into_iter().skip(2) {
        let inner = root.list_dir(format!("/c/{}", String::from_utf8_lossy(&entry.name))).unwrap();
        assert_eq!(inner.len(), 2, "{config:?}: /c/{} not empty", String::from_utf8_lossy(&entry.name));
    }
    drop(root);
    assert_empty_and_no_leaks(&vfs);
}

#[test]
fn stress_default_config() {
    stress(VfsConfig::default());
}

#[test]
fn stress_before_config() {
    stress(VfsConfig::before());
}

/// rcu-walk over the global directory mutex and uncached negatives.
#[test]
fn stress_rcu_walk_with_before_locking() {
    stress(VfsConfig { walk: WalkMode::Rcu, ..VfsConfig::before() });
}

/// ref-walk with the scalable locks and cached negatives.
#[test]
fn stress_ref_walk_with_scalable_locking() {
    stress(VfsConfig { walk: WalkMode::RefOnly, ..VfsConfig::default() });
}

/// `drop_caches` promises that what nothing uses is freed before it
/// returns, unless another thread stays pinned throughout. A thread that
/// merely keeps working on another filesystem (pinning and unpinning the
/// epoch for each call) must not stop that.
#[test]
fn drop_caches_frees_everything_while_another_vfs_is_busy() {
    let stop = Arc::new(AtomicBool::new(false));
    // Rounds the busy thread has done: drop_caches waits for the first, so
    // it always runs beside a thread that is pinning and unpinning.
    let rounds = Arc::new(AtomicU64::new(0));
    let busy = {
        let (stop, rounds) = (Arc::clone(&stop), Arc::clone(&rounds));
        thread::spawn(move || {
            let other = Vfs::default();
            let p = other.process(Credentials::root());
            let mut n = 0u64;
            while !stop.load(SeqCst) {
                create(&p, "/x", b"").unwrap();
                p.rename("/x", "/y").unwrap();
                p.unlink("/y").unwrap();
                n += 1;
                rounds.store(n, SeqCst);
            }
            n
        })
    };
    wait_until("a first round", || rounds.load(SeqCst) > 0);
    let vfs = Vfs::default();
    let p = root_of(&vfs);
    for i in 0..2000 {
        let path = format!("/f{i}");
        create(&p, &path, b"data").unwrap();
        p.rename(&path, "/g").unwrap();
        p.unlink("/g").unwrap();
    }
    drop(p);
    assert!(vfs.drop_caches(Duration::from_secs(60)));
    let stats = vfs.statfs();
    stop.store(true, SeqCst);
    assert!(busy.join().unwrap() > 0);
    assert_eq!((stats.inodes, stats.dentries, stats.bytes), (1, 0, 0), "not freed by one drop_caches: {stats:?}");
}

/// Readers open, read and close one file per-CPU style while another
/// thread unlinks and re-creates it (killing each inode's per-CPU open
/// count with readers still holding it): every read sees the whole write
/// or, before the creator wrote, an empty file,
/// an open either finds a file or fails with ENOENT, and once all are
/// closed every unlinked inode is freed.
#[test]
fn opens_racing_unlink_free_every_inode() {
    let vfs = Vfs::default();
    let p = root_of(&vfs);
    create(&p, "/hot", b"contents").unwrap();
    let stop = Arc::new(AtomicBool::new(false));
    // Successful opens so far: the unlinks start once a reader is opening.
    let opens = Arc::new(AtomicUsize::new(0));
    let readers: Vec<_> = (0..3)
        .map(|_| {
            let (vfs, stop, opens) = (vfs.clone(), Arc::clone(&stop), Arc::clone(&opens));
            thread::spawn(move || {
                let p = root_of(&vfs);
                let (mut opened, mut held) = (0usize, Vec::new());
                while !stop.load(SeqCst) {
                    match p.open("/hot", OpenFlags::RDONLY, 0) {
                        Ok(fd) => {
                            // A new file is empty until its creator's write.
                            let mut buf = [0u8; 16];
                            let n = p.read(fd, &mut buf).unwrap();
                            assert!(&buf[..n] == b"contents" || n == 0, "{:?}", &buf[..n]);
                            opened += 1;
                            opens.fetch_add(1, SeqCst);
                            // Keep a few open across the unlinks.
                            if opened % 7 == 0 && held.len() < 4 {
                                held.push(fd);
                            } else {
                                p.close(fd).unwrap();
                            }
                        }
                        Err(e) => assert_eq!(e, Errno::ENOENT),
                    }
                }
                for fd in held {
                    assert!(matches!(p.fstat(fd).unwrap().size, 0 | 8));
                    p.close(fd).unwrap();
                }
                opened
            })
        })
        .collect();
    // /hot exists until the first unlink, so some reader's open succeeds.
    wait_until("a first open", || opens.load(SeqCst) > 0);
    for _ in 0..iterations() {
        p.unlink("/hot").unwrap();
        create(&p, "/hot", b"contents").unwrap();
    }
    stop.store(true, SeqCst);
    let opened: usize = readers.into_iter().map(|r| r.join().unwrap()).sum();
    assert_eq!(opened, opens.load(SeqCst));
    p.unlink("/hot").unwrap();
    drop(p);
    assert!(vfs.drop_caches(Duration::from_secs(60)));
    let stats = vfs.statfs();
    assert_eq!((stats.inodes, stats.dentries, stats.bytes), (1, 0, 0), "unlinked inodes kept: {stats:?}");
}
