//! What the striped record-lock design adds, tested against the one-list
//! design where both must agree: owners in different stripes, locks
//! across stripe boundaries, conversions that never pass through
//! "unlocked" under contention, waiters woken when a lock shrinks out of
//! their range, and `F_GETLK`'s choice among several conflicts (Linux's
//! `flc_posix` order: owners in the order their locks appeared).

use std::sync::atomic::{AtomicBool, Ordering};
use vfscale::config::RecordLocks;
use vfscale::locks::*;
use vfscale::{Credentials, Errno, OpenFlags, Process, Vfs, VfsConfig};
use vfscale_sync::test_support::wait_until;

/// Stripes of 4 bytes, the one list, and the default 4 KiB stripes.
const DESIGNS: [RecordLocks; 3] = [RecordLocks::Striped { stripe_shift: 2 }, RecordLocks::List, RecordLocks::STRIPED];

/// Runs `test` in each design twice: on a fresh `/f`, and on one whose
/// locks have already spread over two stripes and gone (in the 4-byte
/// design it is then sharded from the start; otherwise it shards, if at
/// all, in the middle of the test).
fn each(test: impl Fn(&Vfs, RecordLocks)) {
    for design in DESIGNS {
        for spread in [false, true] {
            let vfs = Vfs::new(VfsConfig { record_locks: design, ..VfsConfig::default() });
            if spread {
                let p = vfs.process(Credentials::root());
                let fd = rw(&p, "/f");
                lock(&p, fd, F_WRLCK, 1000, 1).unwrap();
                lock(&p, fd, F_WRLCK, 1100, 1).unwrap();
                p.close(fd).unwrap();
            }
            assert!(vfs.locks().list().is_empty());
            test(&vfs, design);
        }
    }
}

fn rw(p: &Process, path: &str) -> i32 {
    p.open(path, OpenFlags::CREAT | OpenFlags::RDWR, 0o644).unwrap()
}

fn lock(p: &Process, fd: i32, t: i16, start: i64, len: i64) -> Result<(), Errno> {
    p.fcntl_setlk(fd, &Flock::new(t, start, len))
}

fn getlk(p: &Process, fd: i32, t: i16, start: i64, len: i64) -> (i16, i64, i64, i32) {
    let mut l = Flock::new(t, start, len);
    p.fcntl_getlk(fd, &mut l).unwrap();
    (l.l_type, l.l_start, l.l_len, l.l_pid)
}

/// `/proc/locks` as (kind, write, pid, start, end) in list order, sorted.
fn held(vfs: &Vfs) -> Vec<(LockKind, bool, i32, u64, Option<u64>)> {
    let mut all: Vec<_> = vfs.locks().list().iter().map(|l| (l.kind, l.write, l.pid, l.start, l.end)).collect();
    all.sort_by_key(|l| (l.2, l.3));
    all
}

#[test]
fn owners_in_different_stripes_do_not_meet() {
    each(|vfs, design| {
        let owners: Vec<Process> = (0..4).map(|_| vfs.process(Credentials::root())).collect();
        let fds: Vec<i32> = owners.iter().map(|p| rw(p, "/f")).collect();
        // Stripe k of 4 bytes for owner k, and again 64 stripes later (the
        // same slot): write locks of others beside them stay apart.
        for (k, (p, &fd)) in owners.iter().zip(&fds).enumerate() {
            lock(p, fd, F_WRLCK, 4 * k as i64, 3).unwrap();
            lock(p, fd, F_WRLCK, 256 + 4 * k as i64, 3).unwrap();
        }
        for (k, (p, &fd)) in owners.iter().zip(&fds).enumerate() {
            let next = (k + 1) % owners.len();
            assert_eq!(lock(p, fd, F_RDLCK, 4 * next as i64, 1), Err(Errno::EAGAIN), "{design:?}");
            assert_eq!(lock(p, fd, F_RDLCK, 256 + 4 * next as i64 + 2, 1), Err(Errno::EAGAIN), "{design:?}");
            assert_eq!(
                getlk(p, fd, F_RDLCK, 4 * next as i64 + 1, 1),
                (F_WRLCK, 4 * next as i64, 3, owners[next].pid())
            );
        }
        assert_eq!(vfs.locks().list().len(), 8);
        // A close drops its process's locks and no other's.
        owners[1].close(fds[1]).unwrap();
        assert_eq!(vfs.locks().list().len(), 6);
        lock(&owners[0], fds[0], F_WRLCK, 4, 3).unwrap();
        assert_eq!(lock(&owners[2], fds[2], F_WRLCK, 0, 0), Err(Errno::EAGAIN));
        // OFD locks of two descriptions of one process, in two stripes.
        let p = &owners[3];
        let (a, b) = (rw(p, "/g"), rw(p, "/g"));
        p.ofd_setlk(a, &Flock::new(F_WRLCK, 0, 4)).unwrap();
        p.ofd_setlk(b, &Flock::new(F_WRLCK, 4, 4)).unwrap();
        assert_eq!(p.ofd_setlk(b, &Flock::new(F_WRLCK, 3, 1)), Err(Errno::EAGAIN), "{design:?}");
        p.close(a).unwrap();
        p.ofd_setlk(b, &Flock::new(F_WRLCK, 0, 4)).unwrap();
        assert_eq!(held(vfs).iter().filter(|l| l.0 == LockKind::Ofd).count(), 1, "{design:?}: one merged OFD lock");
    });
}

/// In each design, one process's `steps` (type, start, length) on a fresh
/// `/f` leave exactly its locks `want` (write, first byte, last byte).
fn one_owner_leaves(steps: &[(i16, i64, i64)], want: &[(bool, u64, u64)], what: &str) {
    each(|vfs, design| {
        let p = vfs.process(Credentials::root());
        let fd = rw(&p, "/f");
        for &(t, start, len) in steps {
            lock(&p, fd, t, start, len).unwrap();
        }
        let want: Vec<_> =
            want.iter().map(|&(w, first, last)| (LockKind::Posix, w, p.pid(), first, Some(last))).collect();
        assert_eq!(held(vfs), want, "{design:?}: {what}");
    });
}

/// A lock in a stripe where its owner holds a lock already merges with
/// the owner's lock just before it in the stripe before: one within that
/// stripe, or a wide one over several stripes.
#[test]
fn a_lock_beside_its_owners_lock_in_the_stripe_before_merges_with_it() {
    let steps = [(F_WRLCK, 11, 1), (F_WRLCK, 4, 4), (F_WRLCK, 8, 2)];
    one_owner_leaves(&steps, &[(true, 4, 9), (true, 11, 11)], "beside a lock in the stripe before");
    let steps = [(F_WRLCK, 23, 1), (F_WRLCK, 8, 12), (F_WRLCK, 20, 2)];
    one_owner_leaves(&steps, &[(true, 8, 21), (true, 23, 23)], "beside a wide lock");
}

/// In two stripes where its owner holds only read locks, a write lock
/// ending the first stripe, then one starting the next: they merge, as in
/// Linux (the first made the owner's write locks reach its stripe).
#[test]
fn a_lock_of_a_new_type_in_a_stripe_is_seen_by_its_neighbours() {
    let steps = [(F_RDLCK, 20, 1), (F_RDLCK, 26, 1), (F_WRLCK, 22, 2), (F_WRLCK, 24, 2)];
    one_owner_leaves(&steps, &[(false, 20, 20), (true, 22, 25), (false, 26, 26)], "write locks in read-locked stripes");
}

#[test]
fn locks_merge_and_split_across_stripes() {
    each(|vfs, design| {
        let (a, b) = (vfs.process(Credentials::root()), vfs.process(Credentials::root()));
        let (fa, fb) = (rw(&a, "/f"), rw(&b, "/f"));
        lock(&b, fb, F_RDLCK, 100, 1).unwrap();
        // Two locks ending and starting at a stripe boundary merge into one
        // across it; a third, adjacent on the other side, joins them.
        lock(&a, fa, F_WRLCK, 0, 4).unwrap();
        lock(&a, fa, F_WRLCK, 4, 4).unwrap();
        lock(&a, fa, F_WRLCK, 8, 2).unwrap();
        let pa = a.pid();
        assert_eq!(held(vfs)[..1], [(LockKind::Posix, true, pa, 0, Some(9))], "{design:?}");
        // Unlocking across the boundary splits it; a read lock in the
        // middle splits the rest by type.
        lock(&a, fa, F_UNLCK, 3, 2).unwrap();
        lock(&a, fa, F_RDLCK, 6, 1).unwrap();
        let want = [
            (LockKind::Posix, true, pa, 0, Some(2)),
            (LockKind::Posix, true, pa, 5, Some(5)),
            (LockKind::Posix, false, pa, 6, Some(6)),
            (LockKind::Posix, true, pa, 7, Some(9)),
        ];
        assert_eq!(held(vfs)[..4], want, "{design:?}");
        assert_eq!(getlk(&b, fb, F_WRLCK, 3, 2), (F_UNLCK, 3, 2, 0));
        assert_eq!(getlk(&b, fb, F_WRLCK, 4, 4), (F_WRLCK, 5, 1, pa));
        // A lock to EOF over all of it (once b's lock is gone), then an
        // unlock that leaves a piece within one stripe.
        assert_eq!(lock(&a, fa, F_WRLCK, 1, 0), Err(Errno::EAGAIN));
        lock(&b, fb, F_UNLCK, 100, 1).unwrap();
        lock(&a, fa, F_WRLCK, 1, 0).unwrap();
        assert_eq!(getlk(&b, fb, F_RDLCK, 99, 1), (F_WRLCK, 0, 0, pa), "merged with 0..2");
        assert_eq!(lock(&b, fb, F_RDLCK, 200, 1), Err(Errno::EAGAIN));
        lock(&a, fa, F_UNLCK, 3, 0).unwrap();
        assert_eq!(held(vfs)[..1], [(LockKind::Posix, true, pa, 0, Some(2))], "{design:?}");
        lock(&b, fb, F_WRLCK, 3, 1000).unwrap();
        a.close(fa).unwrap();
        assert_eq!(held(vfs), [(LockKind::Posix, true, b.pid(), 3, Some(1002))], "{design:?}");
    });
}

/// One owner turns its read lock over bytes 0..16 (four stripes of 4)
/// into a write lock and back, again and again, while others keep asking
/// for write locks on parts of it: a conversion never passes through
/// "unlocked", so none of them ever gets one. Readers meanwhile may or may
/// not get in; each lets go at once.
#[test]
fn conversions_are_atomic_under_contention() {
    let iters: usize = vfscale_sync::test_support::stress_iters(300);
    each(|vfs, design| {
        let holder = vfs.process(Credentials::root());
        let fd = rw(&holder, "/f");
        lock(&holder, fd, F_RDLCK, 0, 16).unwrap();
        let done = AtomicBool::new(false);
        std::thread::scope(|s| {
            for t in 0..3i64 {
                let done = &done;
                s.spawn(move || {
                    let p = vfs.process(Credentials::root());
                    let fd = rw(&p, "/f");
                    let mut i = 0i64;
                    while !done.load(Ordering::Acquire) {
                        let start = (t * 5 + i) % 15;
                        assert_eq!(lock(&p, fd, F_WRLCK, start, 2), Err(Errno::EAGAIN), "{design:?}");
                        if lock(&p, fd, F_RDLCK, start, 2).is_ok() {
                            lock(&p, fd, F_UNLCK, start, 2).unwrap();
                        }
                        i += 1;
                    }
                });
            }
            for i in 0..iters {
                let (start, len) = if i % 2 == 0 { (0, 16) } else { (3, 7) };
                holder.fcntl_setlkw(fd, &Flock::new(F_WRLCK, start, len), &Interrupt::never()).unwrap();
                lock(&holder, fd, F_RDLCK, 0, 16).unwrap();
            }
            done.store(true, Ordering::Release);
        });
        assert_eq!(held(vfs), [(LockKind::Posix, false, holder.pid(), 0, Some(15))], "{design:?}");
    });
}

#[test]
fn waiter_wakes_when_the_lock_shrinks_out_of_its_range() {
    each(|vfs, design| {
        let (a, b) = (vfs.process(Credentials::root()), vfs.process(Credentials::root()));
        let (fa, fb) = (rw(&a, "/f"), rw(&b, "/f"));
        lock(&a, fa, F_WRLCK, 0, 12).unwrap();
        std::thread::scope(|s| {
            let waiter = s.spawn(|| b.fcntl_setlkw(fb, &Flock::new(F_WRLCK, 9, 2), &Interrupt::never()));
            wait_until("a request blocks", || vfs.locks().blocked() > 0);
            // Shrinks to 0..4 (one stripe of 4): the waiter gets 9..10.
            lock(&a, fa, F_UNLCK, 4, 0).unwrap();
            assert_eq!(waiter.join().unwrap(), Ok(()), "{design:?}");
        });
        assert_eq!(getlk(&a, fa, F_RDLCK, 0, 0), (F_WRLCK, 9, 2, b.pid()));
        // A downgrade wakes a reader that waits on it.
        std::thread::scope(|s| {
            let waiter = s.spawn(|| a.fcntl_setlkw(fa, &Flock::new(F_RDLCK, 8, 8), &Interrupt::never()));
            wait_until("a request blocks", || vfs.locks().blocked() > 0);
            lock(&b, fb, F_RDLCK, 9, 2).unwrap();
            assert_eq!(waiter.join().unwrap(), Ok(()), "{design:?}");
        });
    });
}

/// `F_GETLK` reports the first conflict in Linux's order: owners in the
/// order their first lock (since they last held none) appeared on the
/// file, each owner's locks by start; the striped design keeps it across
/// sharding and across stripes.
#[test]
fn getlk_reports_the_first_conflict_in_linux_order() {
    each(|vfs, design| {
        let ps: Vec<Process> = (0..4).map(|_| vfs.process(Credentials::root())).collect();
        let fds: Vec<i32> = ps.iter().map(|p| rw(p, "/f")).collect();
        let (probe, pfd) = (&ps[3], fds[3]);
        // Owner 0 first, at the highest offsets; owner 1 at the lowest.
        lock(&ps[0], fds[0], F_RDLCK, 4100, 2).unwrap();
        lock(&ps[0], fds[0], F_RDLCK, 40, 2).unwrap();
        lock(&ps[1], fds[1], F_RDLCK, 4, 2).unwrap();
        lock(&ps[2], fds[2], F_RDLCK, 20, 30).unwrap();
        assert_eq!(getlk(probe, pfd, F_WRLCK, 0, 0), (F_RDLCK, 40, 2, ps[0].pid()), "{design:?}");
        assert_eq!(getlk(probe, pfd, F_WRLCK, 0, 30), (F_RDLCK, 4, 2, ps[1].pid()), "{design:?}");
        // Owner 0 drops everything and comes back: now last.
        lock(&ps[0], fds[0], F_UNLCK, 0, 0).unwrap();
        lock(&ps[0], fds[0], F_RDLCK, 0, 2).unwrap();
        assert_eq!(getlk(probe, pfd, F_WRLCK, 0, 0), (F_RDLCK, 4, 2, ps[1].pid()), "{design:?}");
        // Owner 1 changes its lock but keeps its place.
        lock(&ps[1], fds[1], F_WRLCK, 4, 1).unwrap();
        assert_eq!(getlk(probe, pfd, F_RDLCK, 0, 0), (F_WRLCK, 4, 1, ps[1].pid()), "{design:?}");
        lock(&ps[1], fds[1], F_UNLCK, 4, 1).unwrap();
        assert_eq!(getlk(probe, pfd, F_WRLCK, 0, 0), (F_RDLCK, 5, 1, ps[1].pid()), "{design:?}");
        ps[1].close(fds[1]).unwrap();
        assert_eq!(getlk(probe, pfd, F_WRLCK, 0, 0), (F_RDLCK, 20, 30, ps[2].pid()), "{design:?}");
        assert_eq!(getlk(probe, pfd, F_WRLCK, 0, 10), (F_RDLCK, 0, 2, ps[0].pid()), "{design:?}");
    });
}

/// Threads of one process lock and unlock bytes in stripes where the
/// process keeps a lock (the one-slot path), beside a thread whose lock
/// across stripes merges with a kept lock and covers one thread's byte,
/// then splits off again (the owner-shard path): at the end the process
/// holds exactly its kept locks, and closing its descriptor drops them all
/// (its group knew every slot the threads left locks in).
#[test]
fn one_owners_threads_in_different_stripes_keep_its_locks_whole() {
    let iters: usize = vfscale_sync::test_support::stress_iters(300);
    for (design, stripe) in [(RecordLocks::Striped { stripe_shift: 2 }, 4i64), (RecordLocks::STRIPED, 4096)] {
        let vfs = Vfs::new(VfsConfig { record_locks: design, ..VfsConfig::default() });
        let p = vfs.process(Credentials::root());
        let fd = rw(&p, "/f");
        let kept: Vec<i64> = (0..3).map(|t| (2 * t + 1) * stripe).collect();
        for &at in &kept {
            lock(&p, fd, F_WRLCK, at, 1).unwrap();
        }
        std::thread::scope(|s| {
            for &at in &kept {
                let p = &p;
                s.spawn(move || {
                    for _ in 0..iters {
                        lock(p, fd, F_WRLCK, at + 2, 1).unwrap();
                        lock(p, fd, F_UNLCK, at + 2, 1).unwrap();
                    }
                });
            }
            let (p, last) = (&p, kept[2]);
            s.spawn(move || {
                for _ in 0..iters {
                    lock(p, fd, F_WRLCK, last + 1, 2 * stripe - 1).unwrap();
                    lock(p, fd, F_UNLCK, last + 1, 2 * stripe - 1).unwrap();
                }
            });
        });
        let pid = p.pid();
        let want: Vec<_> = kept.iter().map(|&at| (LockKind::Posix, true, pid, at as u64, Some(at as u64))).collect();
        assert_eq!(held(&vfs), want, "{design:?}");
        p.close(fd).unwrap();
        assert!(vfs.locks().list().is_empty(), "{design:?}: a close drops every lock of the process");
    }
}
