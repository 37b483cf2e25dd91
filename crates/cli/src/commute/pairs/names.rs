//! Pairs on names: create, unlink, mkdir and rename of different names
//! (in one directory and in two), readdir beside stat, missing lookups.

use super::{dir_with_files, make_file, tmpfs, Names, Ops, Pair};
use crate::commute::sys::Syscalls;
use crate::commute::world::World;
use std::sync::Arc;

pub(super) const PAIRS: &[Pair] = &[
    tmpfs(
        "create-one-dir",
        ["open(d/a{i}, O_CREAT|O_EXCL)+close", "open(d/b{i}, O_CREAT|O_EXCL)+close"],
        "Both names are new, so both O_EXCL creates succeed in either order and leave the same two entries; \
         each sets the directory's mtime and ctime to the current time, which neither returns (the clock is not \
         part of the state, as in COMMUTER's model).",
        |w, n| create(w, n, ["d", "d"]),
    ),
    tmpfs(
        "create-diff-dirs",
        ["open(d1/a{i}, O_CREAT|O_EXCL)+close", "open(d2/b{i}, O_CREAT|O_EXCL)+close"],
        "Each creates a new name in its own directory, in its own process: disjoint state.",
        |w, n| create(w, n, ["d1", "d2"]),
    ),
    tmpfs(
        "unlink-one-dir",
        ["unlink(d/a{i})", "unlink(d/b{i})"],
        "Each removes a different existing name of one directory: both succeed in either order and leave the \
         same entries (the directory's times are set to the current time, which neither returns).",
        |w, n| unlink(w, n, ["d", "d"]),
    ),
    tmpfs(
        "unlink-diff-dirs",
        ["unlink(d1/a{i})", "unlink(d2/b{i})"],
        "Each removes an existing name of its own directory: disjoint state.",
        |w, n| unlink(w, n, ["d1", "d2"]),
    ),
    tmpfs(
        "mkdir-one-dir",
        ["mkdir(d/a{i})", "mkdir(d/b{i})"],
        "Both names are new, so both succeed in either order; each adds one to the directory's link count, \
         and additions commute (its times are set to the current time, which neither returns).",
        |w, n| mkdir(w, n, ["d", "d"]),
    ),
    tmpfs(
        "mkdir-diff-dirs",
        ["mkdir(d1/a{i})", "mkdir(d2/b{i})"],
        "Each creates a new name in its own directory: disjoint state.",
        |w, n| mkdir(w, n, ["d1", "d2"]),
    ),
    tmpfs(
        "rename-diff-dirs",
        ["rename(d1/x{i}, d1/y{i})", "rename(d2/x{i}, d2/y{i})"],
        "Each renames within its own directory, to a new name: disjoint state.",
        |w, n| {
            let p = w.process();
            let mut sides = Vec::new();
            for dir in ["d1", "d2"] {
                p.mkdir(&p.path(dir), 0o755)?;
                let (from, to) =
                    (Names::new(&*p, &format!("{dir}/x{{i}}"), n), Names::new(&*p, &format!("{dir}/y{{i}}"), n));
                for path in &from.0 {
                    make_file(&*p, path, 0)?;
                }
                sides.push((from, to));
            }
            let (b, a) = (sides.pop().expect("two sides"), sides.pop().expect("two sides"));
            let rename = |(from, to): (Names, Names)| move |p: &dyn Syscalls, i| p.rename(from.get(i)?, to.get(i)?);
            Ok(Ops::shared(p, rename(a), rename(b)))
        },
    ),
    tmpfs(
        "readdir-vs-stat",
        ["readdir(d)", "stat(d/x)"],
        "Neither changes the directory or the file (reading a directory leaves its atime past its last \
         change, relatime), so each returns the same in either order.",
        |w, _| {
            let p = w.process();
            let [x, ..] = dir_with_files(&*p, "d", ["x", "y", "z"], 64)?;
            let d = p.path("d");
            p.atime_ahead(&d, 3600)?;
            Ok(Ops::shared(p, move |p, _| p.readdir(&d).map(drop), move |p, _| p.stat(&x).map(drop)))
        },
    ),
    tmpfs(
        "missing-same-name",
        ["stat(d/nope)", "stat(d/nope)"],
        "A failed lookup changes nothing, so both fail with ENOENT in either order.",
        |w, _| missing(w, ["d/nope", "d/nope"]),
    ),
    tmpfs(
        "missing-diff-names",
        ["stat(d/nope1)", "stat(d/nope2)"],
        "A failed lookup changes nothing, so both fail with ENOENT in either order.",
        |w, _| missing(w, ["d/nope1", "d/nope2"]),
    ),
];

/// O_CREAT|O_EXCL + close of instance names in `dirs` (one process each).
fn create(w: &World, n: usize, dirs: [&str; 2]) -> Result<Ops, String> {
    let (p, q) = (w.process(), w.process());
    let [a, b] = names(&p, n, dirs)?;
    let create = |names: Names| {
        move |p: &dyn Syscalls, i| {
            let fd = p.open(names.get(i)?, libc::O_CREAT | libc::O_EXCL | libc::O_WRONLY, 0o644)?;
            p.close(fd)
        }
    };
    Ok(Ops::own(p, create(a), q, create(b)))
}

/// unlink of instance files in `dirs`, created here.
fn unlink(w: &World, n: usize, dirs: [&str; 2]) -> Result<Ops, String> {
    let p = w.process();
    let sides = names(&p, n, dirs)?;
    for path in sides.iter().flat_map(|names| &names.0) {
        make_file(&*p, path, 0)?;
    }
    let [a, b] = sides;
    let unlink = |names: Names| move |p: &dyn Syscalls, i| p.unlink(names.get(i)?);
    Ok(Ops::shared(p, unlink(a), unlink(b)))
}

/// mkdir of instance names in `dirs`.
fn mkdir(w: &World, n: usize, dirs: [&str; 2]) -> Result<Ops, String> {
    let p = w.process();
    let [a, b] = names(&p, n, dirs)?;
    let mkdir = |names: Names| move |p: &dyn Syscalls, i| p.mkdir(names.get(i)?, 0o755);
    Ok(Ops::shared(p, mkdir(a), mkdir(b)))
}

/// Makes `dirs` and returns side A's instance names `a{i}` in the first,
/// side B's `b{i}` in the second.
fn names(p: &Arc<dyn Syscalls>, n: usize, dirs: [&str; 2]) -> Result<[Names; 2], String> {
    for dir in dirs.iter().take(if dirs[0] == dirs[1] { 1 } else { 2 }) {
        p.mkdir(&p.path(dir), 0o755)?;
    }
    Ok([Names::new(&**p, &format!("{}/a{{i}}", dirs[0]), n), Names::new(&**p, &format!("{}/b{{i}}", dirs[1]), n)])
}

/// stat of two missing names in an existing directory.
fn missing(w: &World, rel: [&str; 2]) -> Result<Ops, String> {
    let p = w.process();
    p.mkdir(&p.path("d"), 0o755)?;
    let [a, b] = rel.map(|r| p.path(r));
    Ok(Ops::shared(p, move |p, _| p.missing(&a), move |p, _| p.missing(&b)))
}
