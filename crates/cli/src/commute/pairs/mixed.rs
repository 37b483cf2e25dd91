//! Pairs of two different operations, as COMMUTER's matrix pairs every
//! call with every other: a look-up beside a change of another name of
//! the same directory, changes in two directories, reads beside writes of
//! other files or other descriptions, and the two kinds of file lock on
//! one file.

use super::files::{lseek, pread, pwrite};
use super::locks::{flock, one_file_each, record};
use super::{dir_with_files, make_file, open_read_close, tmpfs, Names, Ops, Pair};
use crate::commute::sys::{Owner, Syscalls};
use vfscale::locks::LOCK_EX;

/// Bytes in the files read and written: two pages.
const SIZE: usize = 8 << 10;

pub(super) const PAIRS: &[Pair] = &[
    tmpfs(
        "stat-vs-create-one-dir",
        ["stat(d/x)", "open(d/a{i}, O_CREAT|O_EXCL)+close"],
        "The new name is not the one stat looks up, and stat returns the file's attributes, not the \
         directory's (whose times the create sets): each returns the same in either order.",
        |w, n| {
            let (p, q) = (w.process(), w.process());
            let [x] = dir_with_files(&*p, "d", ["x"], SIZE)?;
            let new = Names::new(&*q, "d/a{i}", n);
            Ok(Ops::own(p, move |p, _| p.stat(&x).map(drop), q, move |q, i| create(q, &new, i)))
        },
    ),
    tmpfs(
        "open-read-close-vs-unlink-one-dir",
        ["open+read+close(d/x)", "unlink(d/a{i})"],
        "The name removed is not the one opened, and reading the file returns its data, which the unlink of \
         another name does not touch: each returns the same in either order.",
        |w, n| {
            let (p, q) = (w.process(), w.process());
            let [x] = dir_with_files(&*p, "d", ["x"], SIZE)?;
            let gone = existing(&*q, "d/a{i}", n)?;
            Ok(Ops::own(p, move |p, _| open_read_close(p, &x), q, move |q, i| q.unlink(gone.get(i)?)))
        },
    ),
    tmpfs(
        "stat-vs-rename-one-dir",
        ["stat(d/x)", "rename(d/a{i}, d/b{i})"],
        "The rename moves other names of the directory, to names that are new, so stat finds the same file \
         with the same attributes in either order.",
        |w, n| {
            let (p, q) = (w.process(), w.process());
            let [x] = dir_with_files(&*p, "d", ["x"], SIZE)?;
            let (from, to) = (existing(&*q, "d/a{i}", n)?, Names::new(&*q, "d/b{i}", n));
            let rename = move |q: &dyn Syscalls, i| q.rename(from.get(i)?, to.get(i)?);
            Ok(Ops::own(p, move |p, _| p.stat(&x).map(drop), q, rename))
        },
    ),
    tmpfs(
        "stat-vs-mkdir-one-dir",
        ["stat(d/x)", "mkdir(d/a{i})"],
        "mkdir adds a new name and one to the directory's link count, neither of which stat of another \
         name returns: each returns the same in either order.",
        |w, n| {
            let (p, q) = (w.process(), w.process());
            let [x] = dir_with_files(&*p, "d", ["x"], SIZE)?;
            let new = Names::new(&*q, "d/a{i}", n);
            Ok(Ops::own(p, move |p, _| p.stat(&x).map(drop), q, move |q, i| q.mkdir(new.get(i)?, 0o755)))
        },
    ),
    tmpfs(
        "missing-vs-create-one-dir",
        ["stat(d/nope)", "open(d/a{i}, O_CREAT|O_EXCL)+close"],
        "The name created is not the missing one, so stat fails with ENOENT and the create succeeds in \
         either order.",
        |w, n| {
            let (p, q) = (w.process(), w.process());
            p.mkdir(&p.path("d"), 0o755)?;
            let nope = p.path("d/nope");
            let new = Names::new(&*q, "d/a{i}", n);
            Ok(Ops::own(p, move |p, _| p.missing(&nope), q, move |q, i| create(q, &new, i)))
        },
    ),
    tmpfs(
        "create-vs-unlink-diff-dirs",
        ["open(d1/a{i}, O_CREAT|O_EXCL)+close", "unlink(d2/b{i})"],
        "Each changes its own directory only: disjoint state.",
        |w, n| {
            let (p, q) = (w.process(), w.process());
            p.mkdir(&p.path("d1"), 0o755)?;
            p.mkdir(&p.path("d2"), 0o755)?;
            let new = Names::new(&*p, "d1/a{i}", n);
            let gone = existing(&*q, "d2/b{i}", n)?;
            Ok(Ops::own(p, move |p, i| create(p, &new, i), q, move |q, i| q.unlink(gone.get(i)?)))
        },
    ),
    tmpfs(
        "mkdir-vs-rename-diff-dirs",
        ["mkdir(d1/a{i})", "rename(d2/x{i}, d2/y{i})"],
        "Each changes its own directory only: disjoint state.",
        |w, n| {
            let p = w.process();
            p.mkdir(&p.path("d1"), 0o755)?;
            p.mkdir(&p.path("d2"), 0o755)?;
            let new = Names::new(&*p, "d1/a{i}", n);
            let (from, to) = (existing(&*p, "d2/x{i}", n)?, Names::new(&*p, "d2/y{i}", n));
            let rename = move |p: &dyn Syscalls, i| p.rename(from.get(i)?, to.get(i)?);
            Ok(Ops::shared(p, move |p, i| p.mkdir(new.get(i)?, 0o755), rename))
        },
    ),
    tmpfs(
        "readdir-vs-create-other-dir",
        ["readdir(d1)", "open(d2/a{i}, O_CREAT|O_EXCL)+close"],
        "The create changes only d2, and reading d1 changes nothing (its atime is past its last change, \
         relatime): each returns the same in either order.",
        |w, n| {
            let (p, q) = (w.process(), w.process());
            dir_with_files(&*p, "d1", ["x", "y", "z"], 64)?;
            let d1 = p.path("d1");
            p.atime_ahead(&d1, 3600)?;
            q.mkdir(&q.path("d2"), 0o755)?;
            let new = Names::new(&*q, "d2/a{i}", n);
            Ok(Ops::own(p, move |p, _| p.readdir(&d1).map(drop), q, move |q, i| create(q, &new, i)))
        },
    ),
    tmpfs(
        "pread-vs-pwrite-diff-files",
        ["pread(fd of d/a, 512, 0)", "pwrite(fd of d/b, 512, 0)"],
        "The write changes only d/b's bytes and times; the read returns d/a's bytes: disjoint state.",
        |w, _| {
            let (p, q) = (w.process(), w.process());
            let [a, b] = dir_with_files(&*p, "d", ["a", "b"], SIZE)?;
            let (fa, fb) = (p.open(&a, libc::O_RDONLY, 0)?, q.open(&b, libc::O_WRONLY, 0)?);
            Ok(Ops::own(p, move |p, _| pread(p, fa, 0), q, move |q, _| pwrite(q, fb, 0)))
        },
    ),
    tmpfs(
        "fstat-vs-pread-same-file",
        ["fstat(fd1 of d/f)", "pread(fd2 of d/f, 512, 0)"],
        "pread changes no data and no offset, and not the access time (already past mtime, relatime), so \
         fstat sees the same attributes and pread the same bytes in either order.",
        |w, _| {
            let (p, q) = (w.process(), w.process());
            let [f] = dir_with_files(&*p, "d", ["f"], SIZE)?;
            let (f1, f2) = (p.open(&f, libc::O_RDONLY, 0)?, q.open(&f, libc::O_RDONLY, 0)?);
            Ok(Ops::own(p, move |p, _| p.fstat(f1).map(drop), q, move |q, _| pread(q, f2, 0)))
        },
    ),
    tmpfs(
        "lseek-vs-pread-same-file",
        ["lseek(fd1 of d/f, i)", "pread(fd2 of d/f, 512, 0)"],
        "The two descriptors name different open file descriptions: lseek moves only its own offset, which \
         pread (of the other, at an explicit offset) neither reads nor moves.",
        |w, _| {
            let (p, q) = (w.process(), w.process());
            let [f] = dir_with_files(&*p, "d", ["f"], SIZE)?;
            let (f1, f2) = (p.open(&f, libc::O_RDONLY, 0)?, q.open(&f, libc::O_RDONLY, 0)?);
            Ok(Ops::own(p, move |p, i| lseek(p, f1, i), q, move |q, _| pread(q, f2, 0)))
        },
    ),
    tmpfs(
        "stat-vs-pwrite-diff-files",
        ["stat(d/a)", "pwrite(fd of d/b, 512, 0)"],
        "The write changes only d/b's bytes and times; stat returns d/a's attributes: disjoint state.",
        |w, _| {
            let (p, q) = (w.process(), w.process());
            let [a, b] = dir_with_files(&*p, "d", ["a", "b"], SIZE)?;
            let fb = q.open(&b, libc::O_WRONLY, 0)?;
            Ok(Ops::own(p, move |p, _| p.stat(&a).map(drop), q, move |q, _| pwrite(q, fb, 0)))
        },
    ),
    tmpfs(
        "open-read-close-vs-chmod-diff-files",
        ["open+read+close(d/a)", "chmod(d/b, 0640 or 0600)"],
        "chmod changes only d/b's mode and ctime; opening and reading d/a needs neither: disjoint state.",
        |w, _| {
            let (p, q) = (w.process(), w.process());
            let [a, b] = dir_with_files(&*p, "d", ["a", "b"], SIZE)?;
            let mode = |i: usize| if i % 2 == 0 { 0o640 } else { 0o600 };
            Ok(Ops::own(p, move |p, _| open_read_close(p, &a), q, move |q, i| q.chmod(&b, mode(i))))
        },
    ),
    tmpfs(
        "flock-vs-posix-one-file",
        ["flock(fd1 of d/f, LOCK_EX)+LOCK_UN", "F_SETLK(fd2 of d/f, F_WRLCK, whole)+F_UNLCK"],
        "On Linux flock locks and POSIX record locks never conflict with each other, so both succeed in \
         either order, and each owner ends holding nothing.",
        |w, _| {
            let posix = |p: &dyn Syscalls, fd| record(p, fd, Owner::Process, 0, 0);
            one_file_each(w, libc::O_RDWR, |p: &dyn Syscalls, fd| flock(p, fd, LOCK_EX), posix)
        },
    ),
];

/// `open(path, O_CREAT|O_EXCL|O_WRONLY)` of instance `i`, then `close`.
fn create(p: &dyn Syscalls, names: &Names, i: usize) -> Result<(), String> {
    let fd = p.open(names.get(i)?, libc::O_CREAT | libc::O_EXCL | libc::O_WRONLY, 0o644)?;
    p.close(fd)
}

/// The instance paths of `rel`, each created as an empty file.
fn existing(p: &dyn Syscalls, rel: &str, n: usize) -> Result<Names, String> {
    let names = Names::new(p, rel, n);
    for path in &names.0 {
        make_file(p, path, 0)?;
    }
    Ok(names)
}
