//! Pairs on existing files: stat, fstat, open+read+close, pread, pwrite,
//! lseek, chmod.

use super::{dir_with_files, open_read_close, tmpfs, Ops, Pair};

/// Bytes in the files the pairs read: four pages, so preads at
/// different offsets read different pages.
const SIZE: usize = 16 << 10;

pub(super) const PAIRS: &[Pair] = &[
    tmpfs(
        "stat-same-file",
        ["stat(d/f)", "stat(d/f)"],
        "stat changes nothing, so each returns the same attributes in either order.",
        |w, _| {
            let p = w.process();
            let [f] = dir_with_files(&*p, "d", ["f"], SIZE)?;
            let g = f.clone();
            Ok(Ops::shared(p, move |p, _| p.stat(&f).map(drop), move |p, _| p.stat(&g).map(drop)))
        },
    ),
    tmpfs(
        "stat-diff-files",
        ["stat(d/a)", "stat(d/b)"],
        "stat changes nothing, so each returns the same attributes in either order.",
        |w, _| {
            let p = w.process();
            let [a, b] = dir_with_files(&*p, "d", ["a", "b"], SIZE)?;
            Ok(Ops::shared(p, move |p, _| p.stat(&a).map(drop), move |p, _| p.stat(&b).map(drop)))
        },
    ),
    tmpfs(
        "fstat-same-file",
        ["fstat(fd1 of d/f)", "fstat(fd2 of d/f)"],
        "fstat changes nothing, so each returns the same attributes in either order.",
        |w, _| {
            let (p, q) = (w.process(), w.process());
            let [f] = dir_with_files(&*p, "d", ["f"], SIZE)?;
            let (fd1, fd2) = (p.open(&f, libc::O_RDONLY, 0)?, q.open(&f, libc::O_RDONLY, 0)?);
            Ok(Ops::own(p, move |p, _| p.fstat(fd1).map(drop), q, move |q, _| q.fstat(fd2).map(drop)))
        },
    ),
    tmpfs(
        "fstat-diff-files",
        ["fstat(fd of d/a)", "fstat(fd of d/b)"],
        "fstat changes nothing, so each returns the same attributes in either order.",
        |w, _| {
            let (p, q) = (w.process(), w.process());
            let [a, b] = dir_with_files(&*p, "d", ["a", "b"], SIZE)?;
            let (fd1, fd2) = (p.open(&a, libc::O_RDONLY, 0)?, q.open(&b, libc::O_RDONLY, 0)?);
            Ok(Ops::own(p, move |p, _| p.fstat(fd1).map(drop), q, move |q, _| q.fstat(fd2).map(drop)))
        },
    ),
    tmpfs(
        "open-read-close-same-file",
        ["open+read+close(d/f)", "open+read+close(d/f)"],
        "Each process gets its own descriptor and offset, reads the same unchanged data, and both leave nothing \
         open; atime is already past mtime (relatime), so neither read changes it.",
        |w, _| {
            let (p, q) = (w.process(), w.process());
            let [f] = dir_with_files(&*p, "d", ["f"], SIZE)?;
            let g = f.clone();
            Ok(Ops::own(p, move |p, _| open_read_close(p, &f), q, move |q, _| open_read_close(q, &g)))
        },
    ),
    tmpfs(
        "open-read-close-diff-dirs",
        ["open+read+close(d1/f)", "open+read+close(d2/f)"],
        "Different files in different directories, each read through a descriptor of its own process: \
         nothing either call changes is seen by the other.",
        |w, _| {
            let (p, q) = (w.process(), w.process());
            let [a] = dir_with_files(&*p, "d1", ["f"], SIZE)?;
            let [b] = dir_with_files(&*p, "d2", ["f"], SIZE)?;
            Ok(Ops::own(p, move |p, _| open_read_close(p, &a), q, move |q, _| open_read_close(q, &b)))
        },
    ),
    tmpfs(
        "open-read-close-one-dir",
        ["open+read+close(d/a)", "open+read+close(d/b)"],
        "Different files of one directory, each read through a descriptor of its own process: looking a \
         name up changes nothing, so neither call sees the other.",
        |w, _| {
            let (p, q) = (w.process(), w.process());
            let [a, b] = dir_with_files(&*p, "d", ["a", "b"], SIZE)?;
            Ok(Ops::own(p, move |p, _| open_read_close(p, &a), q, move |q, _| open_read_close(q, &b)))
        },
    ),
    tmpfs(
        "pread-own-fds",
        ["pread(fd1 of d/f, 512, 0)", "pread(fd2 of d/f, 512, 8192)"],
        "pread changes no offset and no data, so each returns the same bytes in either order.",
        |w, _| {
            let (p, q) = (w.process(), w.process());
            let [f] = dir_with_files(&*p, "d", ["f"], SIZE)?;
            let (fd1, fd2) = (p.open(&f, libc::O_RDONLY, 0)?, q.open(&f, libc::O_RDONLY, 0)?);
            Ok(Ops::own(p, move |p, _| pread(p, fd1, 0), q, move |q, _| pread(q, fd2, 8192)))
        },
    ),
    tmpfs(
        "pread-shared-fd",
        ["pread(fd, 512, 0)", "pread(fd, 512, 8192)"],
        "Two threads of one process pread one descriptor at different offsets: pread leaves the shared \
         offset alone, so each returns the same bytes in either order.",
        |w, _| {
            let p = w.process();
            let [f] = dir_with_files(&*p, "d", ["f"], SIZE)?;
            let fd = p.open(&f, libc::O_RDONLY, 0)?;
            Ok(Ops::shared(p, move |p, _| pread(p, fd, 0), move |p, _| pread(p, fd, 8192)))
        },
    ),
    tmpfs(
        "pwrite-diff-files",
        ["pwrite(fd of d/a, 512, 0)", "pwrite(fd of d/b, 512, 0)"],
        "Each overwrites bytes inside its own file (no size change) and sets that file's mtime and ctime: \
         disjoint state.",
        |w, _| {
            let (p, q) = (w.process(), w.process());
            let [a, b] = dir_with_files(&*p, "d", ["a", "b"], SIZE)?;
            let (fd1, fd2) = (p.open(&a, libc::O_WRONLY, 0)?, q.open(&b, libc::O_WRONLY, 0)?);
            Ok(Ops::own(p, move |p, _| pwrite(p, fd1, 0), q, move |q, _| pwrite(q, fd2, 0)))
        },
    ),
    tmpfs(
        "pwrite-same-file-diff-pages",
        ["pwrite(fd1 of d/f, 512, 0)", "pwrite(fd2 of d/f, 512, 8192)"],
        "Each overwrites bytes of its own page inside one file (no size change) and sets the file's mtime and \
         ctime to the clock: the bytes are disjoint, and either order leaves both writes' bytes and the later \
         call's times (FxMark's DWOM; Linux serializes the two on the inode's lock).",
        |w, _| {
            let (p, q) = (w.process(), w.process());
            let [f] = dir_with_files(&*p, "d", ["f"], SIZE)?;
            let (fd1, fd2) = (p.open(&f, libc::O_WRONLY, 0)?, q.open(&f, libc::O_WRONLY, 0)?);
            Ok(Ops::own(p, move |p, _| pwrite(p, fd1, 0), q, move |q, _| pwrite(q, fd2, 8192)))
        },
    ),
    tmpfs(
        "lseek-diff-fds",
        ["lseek(fd1 of d/f, i)", "lseek(fd2 of d/f, i)"],
        "Two threads of one process move the offsets of two different open file descriptions: \
         each offset belongs to its description alone.",
        |w, _| {
            let p = w.process();
            let [f] = dir_with_files(&*p, "d", ["f"], SIZE)?;
            let (fd1, fd2) = (p.open(&f, libc::O_RDONLY, 0)?, p.open(&f, libc::O_RDONLY, 0)?);
            Ok(Ops::shared(p, move |p, i| lseek(p, fd1, i), move |p, i| lseek(p, fd2, i)))
        },
    ),
    tmpfs(
        "stat-vs-pread",
        ["stat(d/f)", "pread(fd of d/f, 512, 0)"],
        "Neither changes the file (atime is already past mtime, relatime), so stat sees the same \
         attributes and pread the same bytes in either order.",
        |w, _| {
            let (p, q) = (w.process(), w.process());
            let [f] = dir_with_files(&*p, "d", ["f"], SIZE)?;
            let fd = q.open(&f, libc::O_RDONLY, 0)?;
            Ok(Ops::own(p, move |p, _| p.stat(&f).map(drop), q, move |q, _| pread(q, fd, 0)))
        },
    ),
    tmpfs(
        "chmod-diff-files",
        ["chmod(d/a, 0640 or 0600)", "chmod(d/b, 0640 or 0600)"],
        "Each sets the mode and ctime of its own inode: disjoint state.",
        |w, _| {
            let p = w.process();
            let [a, b] = dir_with_files(&*p, "d", ["a", "b"], SIZE)?;
            let mode = |i: usize| if i % 2 == 0 { 0o640 } else { 0o600 };
            Ok(Ops::shared(p, move |p, i| p.chmod(&a, mode(i)), move |p, i| p.chmod(&b, mode(i))))
        },
    ),
];

/// Reads 512 bytes at `offset`, which the file holds.
pub(super) fn pread(p: &dyn crate::commute::sys::Syscalls, fd: i32, offset: u64) -> Result<(), String> {
    let mut buf = [0u8; 512];
    match p.pread(fd, &mut buf, offset)? {
        512 => Ok(()),
        short => Err(format!("pread {fd}: {short} of 512 bytes")),
    }
}

/// Overwrites 512 bytes at `offset`, which the file holds.
pub(super) fn pwrite(p: &dyn crate::commute::sys::Syscalls, fd: i32, offset: u64) -> Result<(), String> {
    match p.pwrite(fd, &[b'y'; 512], offset)? {
        512 => Ok(()),
        short => Err(format!("pwrite {fd}: {short} of 512 bytes")),
    }
}

/// Moves the offset to a position that depends on the instance.
pub(super) fn lseek(p: &dyn crate::commute::sys::Syscalls, fd: i32, i: usize) -> Result<(), String> {
    let to = (i % 64) as u64;
    match p.lseek(fd, to)? {
        at if at == to => Ok(()),
        at => Err(format!("lseek {fd} to {to} went to {at}")),
    }
}
