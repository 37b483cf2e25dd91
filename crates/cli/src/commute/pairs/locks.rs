//! Pairs on file locks: flock, POSIX and OFD record locks, leases. Every
//! operation takes a lock and releases it, so each leaves the lock state
//! as it found it, and each side is a lock owner of its own (its own
//! process, its own open file description).

use super::{dir_with_files, tmpfs, Ops, Pair};
use crate::commute::sys::{Fd, Owner, Syscalls};
use crate::commute::world::World;
use vfscale::locks::{F_RDLCK, F_UNLCK, F_WRLCK, LOCK_EX, LOCK_SH, LOCK_UN};

pub(super) const PAIRS: &[Pair] = &[
    tmpfs(
        "flock-diff-files",
        ["flock(fd of d/a, LOCK_EX)+LOCK_UN", "flock(fd of d/b, LOCK_EX)+LOCK_UN"],
        "Locks of different files never conflict, and each call leaves its file unlocked: disjoint state.",
        |w, _| two_files(w, libc::O_RDWR, |p, fd| flock(p, fd, LOCK_EX)),
    ),
    tmpfs(
        "flock-shared-one-file",
        ["flock(fd1 of d/f, LOCK_SH)+LOCK_UN", "flock(fd2 of d/f, LOCK_SH)+LOCK_UN"],
        "Shared locks of one file are compatible, so both succeed at once in either order, and each \
         description ends unlocked.",
        |w, _| one_file(w, libc::O_RDONLY, |p, fd| flock(p, fd, LOCK_SH)),
    ),
    tmpfs(
        "posix-disjoint-ranges",
        ["F_SETLK(fd of d/f, F_WRLCK, 0..64)+F_UNLCK", "F_SETLK(fd of d/f, F_WRLCK, 4096..4160)+F_UNLCK"],
        "Write locks of two processes on disjoint byte ranges of one file do not conflict, so both succeed \
         in either order, and each process ends holding nothing.",
        |w, _| disjoint_ranges(w, Owner::Process),
    ),
    tmpfs(
        "posix-diff-files",
        ["F_SETLK(fd of d/a, F_WRLCK, whole)+F_UNLCK", "F_SETLK(fd of d/b, F_WRLCK, whole)+F_UNLCK"],
        "Locks of different files never conflict, and each call leaves its file unlocked: disjoint state.",
        |w, _| two_files(w, libc::O_RDWR, |p, fd| record(p, fd, Owner::Process, 0, 0)),
    ),
    tmpfs(
        "ofd-disjoint-ranges",
        ["F_OFD_SETLK(fd1 of d/f, F_WRLCK, 0..64)+F_UNLCK", "F_OFD_SETLK(fd2 of d/f, F_WRLCK, 4096..4160)+F_UNLCK"],
        "OFD write locks of two open file descriptions on disjoint byte ranges do not conflict, so both \
         succeed in either order, and each description ends holding nothing.",
        |w, _| disjoint_ranges(w, Owner::Description),
    ),
    tmpfs(
        "ofd-diff-files",
        ["F_OFD_SETLK(fd of d/a, F_WRLCK, whole)+F_UNLCK", "F_OFD_SETLK(fd of d/b, F_WRLCK, whole)+F_UNLCK"],
        "Locks of different files never conflict, and each call leaves its file unlocked: disjoint state.",
        |w, _| two_files(w, libc::O_RDWR, |p, fd| record(p, fd, Owner::Description, 0, 0)),
    ),
    tmpfs(
        "lease-read-diff-files",
        ["F_SETLEASE(fd of d/a, F_RDLCK)+F_UNLCK", "F_SETLEASE(fd of d/b, F_RDLCK)+F_UNLCK"],
        "Leases of different files never conflict, and each call ends with its file unleased: disjoint state.",
        |w, _| two_files(w, libc::O_RDONLY, lease),
    ),
    tmpfs(
        "lease-read-one-file",
        ["F_SETLEASE(fd1 of d/f, F_RDLCK)+F_UNLCK", "F_SETLEASE(fd2 of d/f, F_RDLCK)+F_UNLCK"],
        "Read leases of one file by two descriptions are compatible (nobody has it open for writing), so \
         both succeed in either order, and each description ends unleased.",
        |w, _| one_file(w, libc::O_RDONLY, lease),
    ),
];

/// What one side does with its descriptor.
pub(super) trait LockOp: Fn(&dyn Syscalls, Fd) -> Result<(), String> + Copy + Send + Sync + 'static {}
impl<F: Fn(&dyn Syscalls, Fd) -> Result<(), String> + Copy + Send + Sync + 'static> LockOp for F {}

/// Side A locks d/a, side B d/b, each through its own process's
/// descriptor opened with `flags`.
fn two_files(w: &World, flags: i32, op: impl LockOp) -> Result<Ops, String> {
    let (p, q) = (w.process(), w.process());
    let [a, b] = dir_with_files(&*p, "d", ["a", "b"], 8192)?;
    let (fa, fb) = (p.open(&a, flags, 0)?, q.open(&b, flags, 0)?);
    Ok(Ops::own(p, move |p, _| op(p, fa), q, move |q, _| op(q, fb)))
}

/// Both sides lock d/f, each through its own process's descriptor.
fn one_file(w: &World, flags: i32, op: impl LockOp) -> Result<Ops, String> {
    one_file_each(w, flags, op, op)
}

/// Side A runs `a`, side B `b`, on d/f, each through its own process's
/// descriptor.
pub(super) fn one_file_each(w: &World, flags: i32, a: impl LockOp, b: impl LockOp) -> Result<Ops, String> {
    let (p, q) = (w.process(), w.process());
    let [f] = dir_with_files(&*p, "d", ["f"], 8192)?;
    let (fa, fb) = (p.open(&f, flags, 0)?, q.open(&f, flags, 0)?);
    Ok(Ops::own(p, move |p, _| a(p, fa), q, move |q, _| b(q, fb)))
}

/// Write locks of `owner` on bytes 0..64 (side A) and 4096..4160 (side B)
/// of d/f.
fn disjoint_ranges(w: &World, owner: Owner) -> Result<Ops, String> {
    let range = |start| move |p: &dyn Syscalls, fd| record(p, fd, owner, start, 64);
    one_file_each(w, libc::O_RDWR, range(0), range(4096))
}

pub(super) fn flock(p: &dyn Syscalls, fd: Fd, how: i32) -> Result<(), String> {
    p.flock(fd, how)?;
    p.flock(fd, LOCK_UN)
}

/// A write lock of `len` bytes from `start` (0: to the end), then its
/// release.
pub(super) fn record(p: &dyn Syscalls, fd: Fd, owner: Owner, start: i64, len: i64) -> Result<(), String> {
    p.record_lock(fd, owner, F_WRLCK, start, len)?;
    p.record_lock(fd, owner, F_UNLCK, start, len)
}

fn lease(p: &dyn Syscalls, fd: Fd) -> Result<(), String> {
    p.setlease(fd, F_RDLCK.into())?;
    p.setlease(fd, F_UNLCK.into())
}
