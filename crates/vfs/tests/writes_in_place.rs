//! Writes within a file's size to pages written before (and `fallocate`s
//! of ranges reserved already) stamp the file's times on the calling
//! CPU's record, which `stat` and a read's relatime check fold in: the
//! times `stat` shows are those of a sequential model, on any CPU, and an
//! explicit time set after replaces them.

use vfscale::falloc;
use vfscale::{Credentials, OpenFlags, Process, SetTime, Stat, Timespec, Vfs};
use vfscale_sync::cpu::with_virtual_cpu;
use vfscale_sync::test_support::wait_for_clock_past;

const LEN: usize = 3 * 4096;

fn file() -> (Vfs, Process, i32) {
    let vfs = Vfs::default();
    let p = vfs.process(Credentials::root());
    let fd = p.open("/f", OpenFlags::CREAT | OpenFlags::RDWR, 0o644).unwrap();
    assert_eq!(p.pwrite(fd, &[1; LEN], 0), Ok(LEN));
    (vfs, p, fd)
}

/// Runs `change` on `cpu` once the clock is past the file's times, and
/// checks that it set the modification and change times to the clock's
/// reading during it, leaving the size alone.
fn stamps_now(p: &Process, fd: i32, cpu: usize, change: impl FnOnce()) -> Stat {
    let before = p.fstat(fd).unwrap();
    wait_for_clock_past(Timespec::now, before.mtime.max(before.ctime));
    let start = Timespec::now();
    with_virtual_cpu(cpu, change);
    let end = Timespec::now();
    let after = p.fstat(fd).unwrap();
    assert!(after.mtime >= start && after.mtime <= end, "mtime {:?} not within [{start:?}, {end:?}]", after.mtime);
    assert!(after.ctime >= start && after.ctime <= end, "ctime {:?} not within [{start:?}, {end:?}]", after.ctime);
    assert_eq!(after.size, LEN as u64);
    after
}

#[test]
fn writes_in_place_on_any_cpu_stamp_the_files_times() {
    let (_vfs, p, fd) = file();
    for step in 0..6 {
        let at = (step * 4000) as i64 % LEN as i64;
        stamps_now(&p, fd, step % 2, || assert_eq!(p.pwrite(fd, b"abc", at), Ok(3)));
        let mut buf = [0; 3];
        assert_eq!(p.pread(fd, &mut buf, at), Ok(3));
        assert_eq!(&buf, b"abc");
    }
    // An explicit time replaces the per-CPU ones, however much later they are.
    let past = Timespec { sec: 1_000_000, nsec: 5 };
    p.utimens("/f", SetTime::Omit, SetTime::At(past)).unwrap();
    assert_eq!(p.fstat(fd).unwrap().mtime, past);
    stamps_now(&p, fd, 1, || assert_eq!(p.pwrite(fd, b"x", 10), Ok(1)));
}

/// Linux's `file_modified`: every `fallocate` sets both times, one that
/// reserves nothing new as well as one that grows the file.
#[test]
fn fallocate_stamps_both_times() {
    let (_vfs, p, fd) = file();
    let f = p.open_file(fd).unwrap();
    let root = Credentials::root();
    stamps_now(&p, fd, 1, || f.fallocate(0, 100, 4096, &root).unwrap());
    stamps_now(&p, fd, 0, || f.fallocate(falloc::KEEP_SIZE, 0, LEN as i64 + 4096, &root).unwrap());
    let before = p.fstat(fd).unwrap();
    wait_for_clock_past(Timespec::now, before.mtime.max(before.ctime));
    f.fallocate(0, 0, LEN as i64 + 1, &root).unwrap();
    let after = p.fstat(fd).unwrap();
    assert!(after.mtime > before.mtime && after.ctime > before.ctime);
    assert_eq!(after.size, LEN as u64 + 1);
}

/// A modification time set ahead of the clock is not outweighed by a
/// later write's stamp: the write shows the clock, as on Linux.
#[test]
fn a_write_after_a_time_ahead_of_the_clock_shows_the_clock() {
    let (_vfs, p, fd) = file();
    let ahead = Timespec { sec: Timespec::now().sec + 3600, nsec: 0 };
    p.utimens("/f", SetTime::Omit, SetTime::At(ahead)).unwrap();
    let start = Timespec::now();
    with_virtual_cpu(1, || assert_eq!(p.pwrite(fd, b"x", 10), Ok(1)));
    let mtime = p.fstat(fd).unwrap().mtime;
    assert!(mtime >= start && mtime < ahead, "mtime {mtime:?}");
}

/// relatime: a read after a write in place (on another CPU) updates an
/// access time that was later than the attributes' own times.
#[test]
fn a_read_after_a_write_in_place_updates_the_access_time() {
    let (_vfs, p, fd) = file();
    // An access time just ahead of the change time the `utimens` sets,
    // and a modification time before both.
    let now = Timespec::now().as_nanos();
    let (older, soon) = (Timespec::from_nanos(now - 20_000_000_000), Timespec::from_nanos(now + 30_000_000));
    p.utimens("/f", SetTime::At(soon), SetTime::At(older)).unwrap();
    wait_for_clock_past(Timespec::now, soon);
    let written = stamps_now(&p, fd, 1, || assert_eq!(p.pwrite(fd, b"x", 10), Ok(1)));
    assert_eq!(written.atime, soon);
    with_virtual_cpu(0, || assert_eq!(p.pread(fd, &mut [0; 4], 0), Ok(4)));
    assert!(p.fstat(fd).unwrap().atime >= written.mtime, "the read left the access time at {soon:?}");
}

/// An explicit modification time replaces the per-CPU times in one step:
/// a `stat` racing it never sees the records' times gone beside the old
/// cell, so the change time it shows never goes back.
#[test]
fn stat_never_sees_the_change_time_go_back_across_utimens() {
    use std::sync::atomic::{AtomicBool, Ordering};
    let (_vfs, p, fd) = file();
    let stop = AtomicBool::new(false);
    let past = Timespec { sec: 1_000_000, nsec: 0 };
    let rounds = vfscale_sync::test_support::stress_iters(300);
    std::thread::scope(|s| {
        let observer = s.spawn(|| {
            let mut last = p.fstat(fd).unwrap();
            while !stop.load(Ordering::Relaxed) {
                let now = p.fstat(fd).unwrap();
                assert!(now.ctime >= last.ctime, "ctime went back: {:?} -> {:?}", last.ctime, now.ctime);
                last = now;
            }
        });
        for _ in 0..rounds {
            wait_for_clock_past(Timespec::now, p.fstat(fd).unwrap().ctime);
            // In place: the times go to this CPU's record, past the cell's.
            with_virtual_cpu(1, || assert_eq!(p.pwrite(fd, b"x", 5), Ok(1)));
            p.utimens("/f", SetTime::Omit, SetTime::At(past)).unwrap();
        }
        stop.store(true, Ordering::Relaxed);
        observer.join().unwrap();
    });
}
