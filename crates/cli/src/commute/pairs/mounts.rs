//! Pairs across a mount: walks under one mount point, through a bind
//! mount beside its source, through `..` at a mount root, and a walk in one
//! namespace beside a mount in another ([`Fs::Mounts`]'s tree).

use super::{dir_with_files, open_read_close, Ops, Pair};
use crate::commute::world::{Fs, World};

/// Both sides stat one path each, in their own processes.
fn stat_two(w: &World, files: &str, rel: [&str; 2]) -> Result<Ops, String> {
    let (p, q) = (w.process(), w.process());
    dir_with_files(&*p, files, ["a", "b"], 16)?;
    let (a, b) = (p.path(rel[0]), q.path(rel[1]));
    Ok(Ops::own(p, move |p, _| p.stat(&a).map(drop), q, move |q, _| q.stat(&b).map(drop)))
}

pub(super) const PAIRS: &[Pair] = &[
    Pair {
        name: "mount-open-read-close-diff-files",
        ops: ["open+read+close(m/d/r/a)", "open+read+close(m/d/r/b)"],
        commutes_because: "Reading changes nothing but the files' access times, which relatime leaves alone here, \
                           and the two files differ: each read returns the same in either order.",
        fs: Fs::Mounts,
        build: |w, _| {
            let (p, q) = (w.process(), w.process());
            let [a, b] = dir_with_files(&*p, "m/d/r", ["a", "b"], 16)?;
            Ok(Ops::own(p, move |p, _| open_read_close(p, &a), q, move |q, _| open_read_close(q, &b)))
        },
    },
    Pair {
        name: "mount-stat-bind-vs-source",
        ops: ["stat(b/s/a)", "stat(m/d/s/a)"],
        commutes_because: "A bind mount shows its source's files: both stats name one file, change nothing and \
                           return the same in either order.",
        fs: Fs::Mounts,
        build: |w, _| stat_two(w, "m/d/s", ["b/s/a", "m/d/s/a"]),
    },
    Pair {
        name: "mount-dotdot-vs-walk",
        ops: ["stat(m/../m/d/t/a)", "stat(m/d/t/b)"],
        commutes_because: "`..` at a mount root climbs to the parent mount and changes nothing; the stats name \
                           two files and return the same in either order.",
        fs: Fs::Mounts,
        build: |w, _| stat_two(w, "m/d/t", ["m/../m/d/t/a", "m/d/t/b"]),
    },
    Pair {
        name: "mount-walk-vs-mount-other-ns",
        ops: ["stat(m/d/w/a)", "mount+umount(x) in another namespace"],
        commutes_because: "A mount and its umount in another mount namespace leave this namespace's table as it \
                           was, and a stat changes nothing: each returns the same in either order.",
        fs: Fs::Mounts,
        build: |w, _| {
            let (p, q) = (w.process(), w.process());
            let [a, _] = dir_with_files(&*p, "m/d/w", ["a", "b"], 16)?;
            q.unshare_mounts()?;
            let x = q.path("x");
            Ok(Ops::own(p, move |p, _| p.stat(&a).map(drop), q, move |q, _| q.mount_and_umount(&x)))
        },
    },
];
