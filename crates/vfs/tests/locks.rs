//! File-lock semantics on vfscale alone: flock, POSIX and OFD record locks,
//! deadlock detection, blocking waits, leases and the lock list, in every
//! lock-list design and every record-lock design (one list; stripes of 2
//! bytes, so small ranges cross them; 4 KiB stripes). `locks_vs_kernel`
//! compares the same calls with Linux; `record_stripes` tests what the
//! striped design adds.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{mpsc, Arc};
use std::time::{Duration, Instant};
use vfscale::config::{LockListKind, RecordLocks};
use vfscale::locks::*;
use vfscale::{Credentials, Errno, OpenFlags, Process, Vfs, VfsConfig};
use vfscale_sync::test_support::wait_until;

const KINDS: [LockListKind; 4] =
    [LockListKind::PerCpuRwSem, LockListKind::LgLockTas, LockListKind::LgLockQueued, LockListKind::GlobalLock];

/// A lease break time no phase that expects an answer can run out.
const LONG_BREAK: Duration = Duration::from_secs(60);

const RECORDS: [RecordLocks; 3] = [RecordLocks::List, RecordLocks::Striped { stripe_shift: 1 }, RecordLocks::STRIPED];

fn each_kind(test: impl Fn(&Vfs)) {
    for kind in KINDS {
        for record_locks in RECORDS {
            test(&Vfs::new(VfsConfig { lock_list: kind, record_locks, ..VfsConfig::default() }));
        }
    }
}

fn rw(p: &Process, path: &str) -> i32 {
    p.open(path, OpenFlags::CREAT | OpenFlags::RDWR, 0o644).unwrap()
}

fn getlk(p: &Process, fd: i32, t: i16, start: i64, len: i64) -> (i16, i64, i64, i32) {
    let mut l = Flock::new(t, start, len);
    p.fcntl_getlk(fd, &mut l).unwrap();
    (l.l_type, l.l_start, l.l_len, l.l_pid)
}

#[test]
fn flock_shared_exclusive_conversion_and_release() {
    each_kind(|vfs| {
        let p = vfs.process(Credentials::root());
        let (a, b) = (rw(&p, "/f"), rw(&p, "/f"));
        p.flock(a, LOCK_SH).unwrap();
        p.flock(b, LOCK_SH | LOCK_NB).unwrap();
        assert_eq!(p.flock(b, LOCK_EX | LOCK_NB), Err(Errno::EWOULDBLOCK));
        // The failed conversion released b's shared lock, as in Linux.
        assert_eq!(vfs.locks().list().len(), 1);
        p.flock(a, LOCK_EX | LOCK_NB).unwrap();
        let dup = p.dup(a).unwrap();
        p.close(a).unwrap();
        assert_eq!(p.flock(b, LOCK_SH | LOCK_NB), Err(Errno::EWOULDBLOCK), "the dup keeps the description");
        p.close(dup).unwrap();
        p.flock(b, LOCK_EX | LOCK_NB).unwrap();
        p.flock(b, LOCK_UN).unwrap();
        p.flock(b, LOCK_UN).unwrap();
        assert_eq!(p.flock(b, 0), Err(Errno::EINVAL));
        assert!(vfs.locks().list().is_empty());
    });
}

#[test]
fn posix_ranges_merge_split_and_drop_on_close() {
    each_kind(|vfs| {
        let a = vfs.process(Credentials::root());
        let b = vfs.process(Credentials::root());
        let (fa, fa2, fb) = (rw(&a, "/f"), rw(&a, "/f"), rw(&b, "/f"));
        a.fcntl_setlk(fa, &Flock::new(F_WRLCK, 0, 10)).unwrap();
        a.fcntl_setlk(fa2, &Flock::new(F_WRLCK, 10, 10)).unwrap();
        assert_eq!(vfs.locks().list().len(), 1, "adjacent locks of one owner merge");
        assert_eq!(getlk(&b, fb, F_RDLCK, 15, 1), (F_WRLCK, 0, 20, a.pid()));
        a.fcntl_setlk(fa, &Flock::new(F_UNLCK, 5, 5)).unwrap();
        assert_eq!(vfs.locks().list().len(), 2, "unlocking the middle splits");
        assert_eq!(getlk(&b, fb, F_WRLCK, 5, 5).0, F_UNLCK);
        assert_eq!(getlk(&b, fb, F_WRLCK, 0, 0), (F_WRLCK, 0, 5, a.pid()));
        a.fcntl_setlk(fa, &Flock::new(F_RDLCK, 12, 0)).unwrap();
        assert_eq!(getlk(&b, fb, F_RDLCK, 30, 1), (F_UNLCK, 30, 1, 0), "no conflict leaves the range as given");
        assert_eq!(getlk(&b, fb, F_WRLCK, 30, 1), (F_RDLCK, 12, 0, a.pid()));
        assert_eq!(b.fcntl_setlk(fb, &Flock::new(F_RDLCK, 0, 1)), Err(Errno::EAGAIN));
        // Closing any descriptor drops all of a's POSIX locks on the file.
        a.close(fa2).unwrap();
        b.fcntl_setlk(fb, &Flock::new(F_WRLCK, 0, 0)).unwrap();
        assert_eq!(vfs.locks().list().len(), 1);
        drop(b);
        assert!(vfs.locks().list().is_empty(), "exit drops locks");
    });
}

#[test]
fn bad_requests() {
    let vfs = Vfs::default();
    let p = vfs.process(Credentials::root());
    let fd = rw(&p, "/f");
    let ro = p.open("/f", OpenFlags::RDONLY, 0).unwrap();
    let wo = p.open("/f", OpenFlags::WRONLY, 0).unwrap();
    let bad_whence = Flock { l_whence: 9, ..Flock::new(F_RDLCK, 0, 0) };
    assert_eq!(p.fcntl_setlk(fd, &bad_whence), Err(Errno::EINVAL));
    assert_eq!(p.fcntl_setlk(fd, &Flock::new(7, 0, 0)), Err(Errno::EINVAL));
    assert_eq!(p.fcntl_setlk(fd, &Flock::new(F_RDLCK, 5, -6)), Err(Errno::EINVAL));
    assert_eq!(p.fcntl_setlk(fd, &Flock::new(F_RDLCK, 2, i64::MAX)), Err(Errno::EOVERFLOW));
    p.fcntl_setlk(fd, &Flock::new(F_RDLCK, 1, i64::MAX)).unwrap();
    assert_eq!(p.fcntl_getlk(fd, &mut Flock::new(F_UNLCK, 0, 0)), Err(Errno::EINVAL));
    assert_eq!(p.fcntl_setlk(ro, &Flock::new(F_WRLCK, 0, 0)), Err(Errno::EBADF));
    assert_eq!(p.fcntl_setlk(wo, &Flock::new(F_RDLCK, 0, 0)), Err(Errno::EBADF));
    assert_eq!(p.ofd_setlk(fd, &Flock { l_pid: 1, ..Flock::new(F_RDLCK, 0, 0) }), Err(Errno::EINVAL));
    assert_eq!(p.fcntl_setlk(99, &Flock::new(F_RDLCK, 0, 0)), Err(Errno::EBADF));
    assert_eq!(p.setlease(fd, 5), Err(Errno::EINVAL));
    p.mkdir("/d", 0o755).unwrap();
    let dir = p.open("/d", OpenFlags::RDONLY | OpenFlags::DIRECTORY, 0).unwrap();
    assert_eq!(p.setlease(dir, F_RDLCK.into()), Err(Errno::EINVAL));
}

#[test]
fn ofd_locks_belong_to_the_description() {
    each_kind(|vfs| {
        let p = vfs.process(Credentials::root());
        let (a, b) = (rw(&p, "/f"), rw(&p, "/f"));
        p.ofd_setlk(a, &Flock::new(F_WRLCK, 0, 10)).unwrap();
        assert_eq!(p.ofd_setlk(b, &Flock::new(F_RDLCK, 5, 1)), Err(Errno::EAGAIN));
        let mut probe = Flock::new(F_RDLCK, 5, 1);
        p.ofd_getlk(b, &mut probe).unwrap();
        assert_eq!((probe.l_type, probe.l_pid), (F_WRLCK, -1));
        // POSIX locks of the same process conflict with OFD locks.
        assert_eq!(p.fcntl_setlk(b, &Flock::new(F_RDLCK, 5, 1)), Err(Errno::EAGAIN));
        p.close(b).unwrap();
        assert_eq!(vfs.locks().list().len(), 1, "closing another fd keeps OFD locks");
        p.close(a).unwrap();
        assert!(vfs.locks().list().is_empty());
    });
}

#[test]
fn deadlock_is_detected() {
    each_kind(|vfs| {
        let a = vfs.process(Credentials::root());
        let b = vfs.process(Credentials::root());
        let (fa, fb) = (rw(&a, "/f"), rw(&b, "/f"));
        a.fcntl_setlk(fa, &Flock::new(F_WRLCK, 0, 1)).unwrap();
        b.fcntl_setlk(fb, &Flock::new(F_WRLCK, 1, 1)).unwrap();
        std::thread::scope(|s| {
            let waiter = s.spawn(|| a.fcntl_setlkw(fa, &Flock::new(F_WRLCK, 1, 1), &Interrupt::never()));
            wait_until("a blocked request", || vfs.locks().blocked() > 0);
            assert_eq!(b.fcntl_setlkw(fb, &Flock::new(F_WRLCK, 0, 1), &Interrupt::never()), Err(Errno::EDEADLK));
            b.fcntl_setlk(fb, &Flock::new(F_UNLCK, 1, 1)).unwrap();
            assert_eq!(waiter.join().unwrap(), Ok(()));
        });
        assert_eq!(getlk(&b, fb, F_RDLCK, 0, 0), (F_WRLCK, 0, 2, a.pid()));
    });
}

#[test]
fn a_lock_granted_after_its_descriptor_closed_is_released() {
    each_kind(|vfs| {
        let (holder, waiter) = (vfs.process(Credentials::root()), vfs.process(Credentials::root()));
        let (held, fd) = (rw(&holder, "/f"), rw(&waiter, "/f"));
        holder.fcntl_setlk(held, &Flock::new(F_WRLCK, 0, 1)).unwrap();
        std::thread::scope(|s| {
            let waiting = s.spawn(|| waiter.fcntl_setlkw(fd, &Flock::new(F_WRLCK, 0, 1), &Interrupt::never()));
            wait_until("the request to block", || vfs.locks().blocked() > 0);
            // Another thread of the waiting process closes the descriptor
            // the request waits through; the lock is granted after.
            waiter.close(fd).unwrap();
            holder.fcntl_setlk(held, &Flock::new(F_UNLCK, 0, 1)).unwrap();
            assert_eq!(waiting.join().unwrap(), Err(Errno::EBADF));
        });
        assert!(vfs.locks().list().is_empty(), "the lock granted after the close stays: {:?}", vfs.locks().list());
        assert_eq!(getlk(&holder, held, F_WRLCK, 0, 1).0, F_UNLCK);
    });
}

#[test]
fn waits_end_on_timeout_and_cancel_and_wake_in_order() {
    let vfs = Vfs::default();
    let holder = vfs.process(Credentials::root());
    let fd = rw(&holder, "/f");
    holder.fcntl_setlk(fd, &Flock::new(F_WRLCK, 0, 0)).unwrap();
    let other = vfs.process(Credentials::root());
    let ofd = rw(&other, "/f");
    let start = Instant::now();
    let timed = other.fcntl_setlkw(ofd, &Flock::new(F_RDLCK, 0, 0), &Interrupt::after(Duration::from_millis(30)));
    assert_eq!(timed, Err(Errno::EINTR));
    assert!(start.elapsed() >= Duration::from_millis(30));
    let token = CancelToken::new();
    std::thread::scope(|s| {
        let t = s.spawn(|| other.fcntl_setlkw(ofd, &Flock::new(F_RDLCK, 0, 0), &Interrupt::never().with_token(&token)));
        std::thread::sleep(Duration::from_millis(20));
        token.cancel();
        assert_eq!(t.join().unwrap(), Err(Errno::EINTR));
    });
    // flock waiters all get the lock in turn, none is lost.
    let (f0, order) = (rw(&holder, "/g"), Arc::new(AtomicUsize::new(0)));
    holder.flock(f0, LOCK_EX).unwrap();
    std::thread::scope(|s| {
        for _ in 0..4 {
            let (vfs, order) = (vfs.clone(), Arc::clone(&order));
            s.spawn(move || {
                let p = vfs.process(Credentials::root());
                let fd = rw(&p, "/g");
                p.flock(fd, LOCK_EX).unwrap();
                order.fetch_add(1, Ordering::SeqCst);
                p.flock(fd, LOCK_UN).unwrap();
            });
        }
        std::thread::sleep(Duration::from_millis(20));
        assert_eq!(order.load(Ordering::SeqCst), 0);
        holder.flock(f0, LOCK_UN).unwrap();
    });
    assert_eq!(order.load(Ordering::SeqCst), 4);
}

/// Four threads, each its own process with its own descriptor of /c,
/// each running `step(process, fd, thread, iteration, inside)` for the
/// stress iterations, in every lock-list design; no lock is left after.
fn contend(step: impl Fn(&Process, i32, usize, usize, &AtomicUsize) + Sync) {
    let iters: usize = vfscale_sync::test_support::stress_iters(300);
    each_kind(|vfs| {
        let inside = AtomicUsize::new(0);
        std::thread::scope(|s| {
            for t in 0..4 {
                let (vfs, inside, step) = (vfs.clone(), &inside, &step);
                s.spawn(move || {
                    let p = vfs.process(Credentials::root());
                    let fd = rw(&p, "/c");
                    for i in 0..iters {
                        step(&p, fd, t, i, inside);
                    }
                });
            }
        });
        assert!(vfs.locks().list().is_empty());
    });
}

#[test]
fn exclusion_under_contention() {
    contend(|p, fd, t, _, inside| {
        if t % 2 == 0 {
            p.flock(fd, LOCK_EX).unwrap();
        } else {
            p.fcntl_setlkw(fd, &Flock::new(F_WRLCK, 0, 0), &Interrupt::never()).unwrap();
        }
        // flock and POSIX locks do not exclude each other, so count each
        // family separately.
        let bit = if t % 2 == 0 { 1 } else { 1 << 16 };
        let before = inside.fetch_add(bit, Ordering::SeqCst);
        assert_eq!(before & (0xffff * bit), 0, "two holders of one exclusive lock");
        inside.fetch_sub(bit, Ordering::SeqCst);
        if t % 2 == 0 {
            p.flock(fd, LOCK_UN).unwrap();
        } else {
            p.fcntl_setlk(fd, &Flock::new(F_UNLCK, 0, 0)).unwrap();
        }
    });
}

/// The flock list is split per CPU: shared flocks taken on two CPUs, an
/// exclusive request on either, a lock dropped on another CPU than the one
/// it was taken on, conversions, and waiters woken across shards.
#[test]
fn flock_shards_see_each_other_across_cpus() {
    use vfscale_sync::cpu::with_virtual_cpu as on_cpu;
    each_kind(|vfs| {
        let p = vfs.process(Credentials::root());
        let (a, b, c) = (rw(&p, "/f"), rw(&p, "/f"), rw(&p, "/f"));
        on_cpu(0, || p.flock(a, LOCK_SH)).unwrap();
        on_cpu(1, || p.flock(b, LOCK_SH)).unwrap();
        assert_eq!(on_cpu(0, || p.flock(c, LOCK_EX | LOCK_NB)), Err(Errno::EWOULDBLOCK));
        on_cpu(1, || p.flock(a, LOCK_SH)).unwrap();
        assert_eq!(vfs.locks().list().len(), 2, "a second LOCK_SH of a description, on another CPU, is the same lock");
        on_cpu(1, || p.flock(a, LOCK_UN)).unwrap();
        assert_eq!(on_cpu(1, || p.flock(c, LOCK_EX | LOCK_NB)), Err(Errno::EWOULDBLOCK), "b still holds its lock");
        on_cpu(0, || p.flock(b, LOCK_UN)).unwrap();
        on_cpu(1, || p.flock(c, LOCK_EX | LOCK_NB)).unwrap();
        for cpu in [0, 1] {
            assert_eq!(on_cpu(cpu, || p.flock(a, LOCK_SH | LOCK_NB)), Err(Errno::EWOULDBLOCK), "cpu {cpu}");
        }
        on_cpu(0, || p.flock(c, LOCK_SH)).unwrap();
        on_cpu(1, || p.flock(a, LOCK_SH | LOCK_NB)).unwrap();
        assert_eq!(vfs.locks().list().iter().filter(|l| !l.write).count(), 2);
        // An exclusive waiter behind a shared lock on one CPU, woken by its
        // release on the other; a shared waiter behind an exclusive one.
        std::thread::scope(|s| {
            on_cpu(0, || p.flock(c, LOCK_UN)).unwrap();
            let waiter = s.spawn(|| on_cpu(0, || p.flock(b, LOCK_EX)));
            std::thread::sleep(Duration::from_millis(20));
            assert!(!waiter.is_finished());
            on_cpu(0, || p.flock(a, LOCK_UN)).unwrap();
            waiter.join().unwrap().unwrap();
            let waiter = s.spawn(|| on_cpu(1, || p.flock(a, LOCK_SH)));
            std::thread::sleep(Duration::from_millis(20));
            assert!(!waiter.is_finished());
            on_cpu(1, || p.flock(b, LOCK_UN)).unwrap();
            waiter.join().unwrap().unwrap();
        });
        p.close(a).unwrap();
        assert!(vfs.locks().list().is_empty(), "the last close drops a flock taken on another CPU");
        assert_eq!(on_cpu(1, || p.flock(b, LOCK_EX | LOCK_NB)), Ok(()));
        p.close(b).unwrap();
        p.close(c).unwrap();
    });
}

/// Shared and exclusive flocks of four descriptions, each taken on one
/// CPU and dropped on the other: an exclusive holder is alone, a shared
/// one only beside shared ones.
#[test]
fn flock_shared_and_exclusive_exclude_across_cpus() {
    use vfscale_sync::cpu::with_virtual_cpu as on_cpu;
    const WRITER: usize = 1 << 16;
    contend(|p, fd, t, i, inside| {
        let exclusive = (t + i) % 3 == 0;
        let (how, bit) = if exclusive { (LOCK_EX, WRITER) } else { (LOCK_SH, 1) };
        on_cpu(t + i, || p.flock(fd, how)).unwrap();
        let before = inside.fetch_add(bit, Ordering::SeqCst);
        match exclusive {
            true => assert_eq!(before, 0, "an exclusive flock beside another holder"),
            false => assert_eq!(before & !(WRITER - 1), 0, "a shared flock beside an exclusive one"),
        }
        inside.fetch_sub(bit, Ordering::SeqCst);
        on_cpu(t + i + 1, || p.flock(fd, LOCK_UN)).unwrap();
    });
}

/// Read leases taken and dropped on two CPUs while two other processes
/// open the file for writing: a lease granted is gone by the time a
/// writer is seen inside, and every open that waits for a lease is woken
/// when the lease goes (the break time is far longer than any wait).
#[test]
fn read_leases_and_writing_opens_under_contention() {
    use vfscale_sync::cpu::with_virtual_cpu as on_cpu;
    let iters: usize = vfscale_sync::test_support::stress_iters(300);
    each_kind(|vfs| {
        vfs.locks().set_lease_break_time(Duration::from_secs(30));
        let setup = vfs.process(Credentials::root());
        setup.close(rw(&setup, "/c")).unwrap();
        let inside = AtomicUsize::new(0);
        std::thread::scope(|s| {
            for t in 0..2 {
                let (vfs, inside) = (vfs.clone(), &inside);
                s.spawn(move || {
                    let p = vfs.process(Credentials::root());
                    let fd = p.open("/c", OpenFlags::RDONLY, 0).unwrap();
                    for _ in 0..iters {
                        match on_cpu(t, || p.setlease(fd, F_RDLCK.into())) {
                            Ok(()) => {
                                if inside.load(Ordering::SeqCst) > 0 {
                                    assert_eq!(p.getlease(fd), Ok(F_UNLCK), "a lease beside an open writer");
                                }
                                let _ = on_cpu(t + 1, || p.setlease(fd, F_UNLCK.into()));
                            }
                            Err(e) => assert_eq!(e, Errno::EAGAIN),
                        }
                    }
                    p.close(fd).unwrap();
                });
            }
            for t in 0..2 {
                let (vfs, inside) = (vfs.clone(), &inside);
                s.spawn(move || {
                    let p = vfs.process(Credentials::root());
                    for _ in 0..iters / 4 {
                        let start = Instant::now();
                        let fd = on_cpu(t, || p.open("/c", OpenFlags::WRONLY, 0)).unwrap();
                        // A lost wake-up keeps the writer asleep for the 30 s
                        // break time; a woken one waits only for a runnable
                        // holder's next `setlease`, milliseconds even on a
                        // slow, busy machine, so 10 s is a margin of 1000x.
                        assert!(start.elapsed() < Duration::from_secs(10), "a writer slept past the lease's release");
                        inside.fetch_add(1, Ordering::SeqCst);
                        std::thread::yield_now();
                        inside.fetch_sub(1, Ordering::SeqCst);
                        p.close(fd).unwrap();
                    }
                });
            }
        });
        assert!(vfs.locks().list().is_empty());
    });
}

#[test]
fn leases_break_on_conflicting_open() {
    let vfs = Vfs::default();
    // Until the phase that tests it, the break time must not run out: the
    // holder answers a break long after it started on a slow machine.
    vfs.locks().set_lease_break_time(LONG_BREAK);
    let holder = vfs.process(Credentials::root());
    let fd = rw(&holder, "/l");
    assert_eq!(holder.setlease(fd, F_RDLCK.into()), Err(Errno::EAGAIN), "open for writing");
    holder.setlease(fd, F_WRLCK.into()).unwrap();
    assert_eq!(holder.getlease(fd), Ok(F_WRLCK));
    let (tx, rx) = mpsc::channel();
    holder.setlease_notify(fd, F_WRLCK.into(), Some(Arc::new(move |b: LeaseBreak| tx.send(b).unwrap()))).unwrap();
    let opener = vfs.process(Credentials::root());
    assert_eq!(opener.open("/l", OpenFlags::RDONLY | OpenFlags::NONBLOCK, 0), Err(Errno::EWOULDBLOCK));
    assert_eq!(rx.try_recv().unwrap().target, F_RDLCK);
    assert_eq!(holder.getlease(fd), Ok(F_RDLCK), "being downgraded");
    // The holder answers: the reader gets in at once.
    std::thread::scope(|s| {
        let t = s.spawn(|| {
            let start = Instant::now();
            let fd = opener.open("/l", OpenFlags::RDONLY, 0).unwrap();
            (start.elapsed(), fd)
        });
        std::thread::sleep(Duration::from_millis(10));
        holder.setlease(fd, F_UNLCK.into()).unwrap();
        let (waited, rfd) = t.join().unwrap();
        // Only a lost wake-up leaves the reader asleep until the break
        // time; a woken one waits for the 10 ms pause and a wake-up.
        assert!(waited < LONG_BREAK / 2, "the reader slept past the answer: {waited:?}");
        opener.close(rfd).unwrap();
    });
    // Nobody answers: the lease goes after the break time.
    vfs.locks().set_lease_break_time(Duration::from_millis(50));
    holder.setlease(fd, F_WRLCK.into()).unwrap();
    let start = Instant::now();
    let wfd = opener.open("/l", OpenFlags::WRONLY, 0).unwrap();
    assert!(start.elapsed() >= Duration::from_millis(40), "{:?}", start.elapsed());
    assert_eq!(holder.getlease(fd), Ok(F_UNLCK));
    assert_eq!(holder.setlease(fd, F_WRLCK.into()), Err(Errno::EAGAIN), "another description is open");
    assert_eq!(holder.setlease(fd, F_UNLCK.into()), Err(Errno::EAGAIN), "no lease to remove");
    opener.close(wfd).unwrap();
    let alice = vfs.process(Credentials::user(1000, 1000, []));
    let afd = alice.open("/l", OpenFlags::RDONLY, 0);
    assert_eq!(afd.and_then(|fd| alice.setlease(fd, F_RDLCK.into())), Err(Errno::EACCES));
}

/// The lease list is split per CPU: read leases taken on two CPUs, found
/// and dropped from the other CPU, a write lease refused beside them, a
/// break of one, which stops new leases on every CPU, a lease
/// removed by its break time, and the last close dropping a lease.
#[test]
fn lease_shards_see_each_other_across_cpus() {
    use vfscale_sync::cpu::with_virtual_cpu as on_cpu;
    each_kind(|vfs| {
        // b's lease must still be there when it is given up below.
        vfs.locks().set_lease_break_time(LONG_BREAK);
        let p = vfs.process(Credentials::root());
        p.close(p.open("/l", OpenFlags::CREAT | OpenFlags::RDONLY, 0o644).unwrap()).unwrap();
        let ro = || p.open("/l", OpenFlags::RDONLY, 0).unwrap();
        let (a, b, c) = (ro(), ro(), ro());
        on_cpu(0, || p.setlease(a, F_RDLCK.into())).unwrap();
        on_cpu(1, || p.setlease(b, F_RDLCK.into())).unwrap();
        assert_eq!(vfs.locks().list().len(), 2);
        assert_eq!(on_cpu(1, || p.getlease(a)), Ok(F_RDLCK), "found from the other CPU");
        for cpu in [0, 1] {
            assert_eq!(on_cpu(cpu, || p.setlease(a, F_WRLCK.into())), Err(Errno::EAGAIN), "b's lease, cpu {cpu}");
        }
        on_cpu(1, || p.setlease(a, F_RDLCK.into())).unwrap();
        assert_eq!(vfs.locks().list().len(), 2, "a second F_RDLCK on another CPU is the same lease");

        // A break of b's lease (shard 1) alone: no new lease on either CPU.
        let (tx, rx) = mpsc::channel();
        let notify = Some(Arc::new(move |l: LeaseBreak| tx.send(l.target).unwrap()) as _);
        on_cpu(1, || p.setlease_notify(b, F_RDLCK.into(), notify)).unwrap();
        on_cpu(1, || p.setlease(a, F_UNLCK.into())).unwrap();
        let writer = vfs.process(Credentials::root());
        assert_eq!(writer.open("/l", OpenFlags::WRONLY | OpenFlags::NONBLOCK, 0), Err(Errno::EWOULDBLOCK));
        assert_eq!(rx.try_iter().collect::<Vec<_>>(), [F_UNLCK], "the holder is told");
        for cpu in [0, 1] {
            assert_eq!(on_cpu(cpu, || p.setlease(c, F_RDLCK.into())), Err(Errno::EAGAIN), "a break is under way");
            assert_eq!(on_cpu(cpu, || p.getlease(b)), Ok(F_UNLCK), "being broken");
        }
        on_cpu(0, || p.setlease(b, F_UNLCK.into())).unwrap();
        let w = writer.open("/l", OpenFlags::WRONLY | OpenFlags::NONBLOCK, 0).expect("no lease left to wait for");
        assert_eq!(p.setlease(c, F_RDLCK.into()), Err(Errno::EAGAIN), "open for writing");
        writer.close(w).unwrap();
        on_cpu(1, || p.setlease(c, F_RDLCK.into())).unwrap();

        // Nobody answers: the break time removes c's lease, taken on CPU
        // 1, and c can lease again, from CPU 0.
        vfs.locks().set_lease_break_time(Duration::from_millis(50));
        let start = Instant::now();
        let w = on_cpu(0, || writer.open("/l", OpenFlags::WRONLY, 0)).unwrap();
        assert!(start.elapsed() >= Duration::from_millis(40), "{:?}", start.elapsed());
        writer.close(w).unwrap();
        assert_eq!(on_cpu(0, || p.getlease(c)), Ok(F_UNLCK));
        assert_eq!(on_cpu(0, || p.setlease(c, F_UNLCK.into())), Err(Errno::EAGAIN), "no lease to remove");
        on_cpu(0, || p.setlease(c, F_RDLCK.into())).unwrap();
        on_cpu(1, || p.setlease(a, F_RDLCK.into())).unwrap();
        p.close(c).unwrap();
        p.close(a).unwrap();
        assert!(vfs.locks().list().is_empty(), "the last close drops a lease taken on either CPU");
        p.close(b).unwrap();
    });
}

#[test]
fn proc_locks_lists_every_kind() {
    each_kind(|vfs| {
        let p = vfs.process(Credentials::root());
        let fd = rw(&p, "/p");
        let ro = p.open("/q", OpenFlags::CREAT | OpenFlags::RDONLY, 0o644).unwrap();
        p.flock(fd, LOCK_SH).unwrap();
        p.fcntl_setlk(fd, &Flock::new(F_WRLCK, 3, 4)).unwrap();
        p.ofd_setlk(fd, &Flock::new(F_RDLCK, 100, 0)).unwrap();
        p.setlease(ro, F_RDLCK.into()).unwrap();
        let text = vfs.locks().proc_locks();
        assert_eq!(text.lines().count(), 4, "{text}");
        for word in ["FLOCK", "POSIX", "OFDLCK", "LEASE", " 3 6", " 100 EOF"] {
            assert!(text.contains(word), "{word} missing from\n{text}");
        }
        p.close(fd).unwrap();
        p.close(ro).unwrap();
        assert_eq!(vfs.locks().proc_locks(), "");
    });
}

#[test]
fn description_locks_skip_the_mode_check_and_close_like_a_descriptor() {
    use vfscale::syscalls::locks::{getlk, posix_close, setlk, AccessModeCheck::Skip, RecordOwner::Posix};
    each_kind(|vfs| {
        let (a, b) = (vfs.process(Credentials::root()), vfs.process(Credentials::root()));
        a.close(rw(&a, "/d")).unwrap();
        let ro = a.open_description("/d", OpenFlags::RDONLY, 0).unwrap();
        // A write lock through a read-only description: EBADF by
        // descriptor, allowed without the check (FUSE's flock).
        let fd = a.open("/d", OpenFlags::RDONLY, 0).unwrap();
        assert_eq!(a.fcntl_setlk(fd, &Flock::new(F_WRLCK, 0, 0)), Err(Errno::EBADF));
        let locks = vfs.locks();
        setlk(locks, &ro, (a.pid(), Posix), &Flock::new(F_WRLCK, 0, 10), None, Skip).unwrap();
        assert_eq!(setlk(locks, &ro, (b.pid(), Posix), &Flock::new(F_RDLCK, 5, 1), None, Skip), Err(Errno::EAGAIN));
        let mut probe = Flock::new(F_RDLCK, 5, 1);
        getlk(locks, &ro, b.pid(), Posix, &mut probe).unwrap();
        assert_eq!((probe.l_type, probe.l_start, probe.l_len, probe.l_pid), (F_WRLCK, 0, 10, a.pid()));
        let waiting = Interrupt::after(Duration::from_millis(20));
        let read = Flock::new(F_RDLCK, 5, 1);
        assert_eq!(setlk(locks, &ro, (b.pid(), Posix), &read, Some(&waiting), Skip), Err(Errno::EINTR));
        posix_close(&ro, a.pid());
        setlk(locks, &ro, (b.pid(), Posix), &read, Some(&Interrupt::never()), Skip).unwrap();
        assert_eq!(vfs.locks().list().len(), 1);
        posix_close(&ro, b.pid());
        assert!(vfs.locks().list().is_empty());
    });
}
