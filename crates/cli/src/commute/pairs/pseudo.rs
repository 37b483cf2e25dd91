//! Pairs on pseudo file systems: sysfs attribute reads and a missing
//! attribute (vfscale's kernfs, the host's /sys), task files (vfscale's
//! procfs, the host's /proc).

use super::{open_read_close, Ops, Pair};
use crate::commute::world::{pids, Fs, World, CPU_ATTRIBUTES};
use std::ffi::CString;

/// Both sides open, read and close one path each, in their own processes.
fn read_two(w: &World, rel: [&str; 2]) -> Result<Ops, String> {
    let (p, q) = (w.process(), w.process());
    let (a, b) = (p.path(rel[0]), q.path(rel[1]));
    Ok(Ops::own(p, move |p, _| open_read_close(p, &a), q, move |q, _| open_read_close(q, &b)))
}

/// A name missing from the directory of the attribute `rel`.
fn missing_beside(rel: &str) -> String {
    let dir = rel.rsplit_once('/').map_or("", |(dir, _)| dir);
    format!("{dir}/vfscale_missing")
}

/// `<pid>/status` of the `n`-th of [`pids`].
fn status(n: usize) -> String {
    format!("{}/status", pids()[n])
}

pub(super) const PAIRS: &[Pair] = &[
    Pair {
        name: "kernfs-read-same",
        ops: ["open+read+close(cpu0/topology/core_id)", "open+read+close(cpu0/topology/core_id)"],
        commutes_because: "Reading an attribute changes nothing, so each process reads the same value in either \
                           order and closes its own descriptor.",
        fs: Fs::Sysfs,
        build: |w, _| read_two(w, [CPU_ATTRIBUTES[0], CPU_ATTRIBUTES[0]]),
    },
    Pair {
        name: "kernfs-read-diff",
        ops: ["open+read+close(cpu0/topology/core_id)", "open+read+close(cpu1/topology/core_id)"],
        commutes_because: "Reading an attribute changes nothing, and these are different attributes: each read \
                           returns the same in either order.",
        fs: Fs::Sysfs,
        build: |w, _| read_two(w, CPU_ATTRIBUTES),
    },
    Pair {
        name: "kernfs-missing",
        ops: ["stat(cpu0/topology/vfscale_missing)", "stat(cpu0/topology/vfscale_missing)"],
        commutes_because: "A failed lookup changes nothing, so both fail with ENOENT in either order.",
        fs: Fs::Sysfs,
        build: |w, _| {
            let p = w.process();
            let path: CString = p.path(&missing_beside(CPU_ATTRIBUTES[0]));
            let same = path.clone();
            Ok(Ops::shared(p, move |p, _| p.missing(&path), move |p, _| p.missing(&same)))
        },
    },
    Pair {
        name: "kernfs-read-vs-missing",
        ops: ["open+read+close(cpu0/topology/core_id)", "stat(cpu0/topology/vfscale_missing)"],
        commutes_because: "Neither changes anything: the read returns the attribute's value and the look-up fails \
                           with ENOENT in either order.",
        fs: Fs::Sysfs,
        build: |w, _| {
            let (p, q) = (w.process(), w.process());
            let attribute = p.path(CPU_ATTRIBUTES[0]);
            let missing = q.path(&missing_beside(CPU_ATTRIBUTES[0]));
            Ok(Ops::own(p, move |p, _| open_read_close(p, &attribute), q, move |q, _| q.missing(&missing)))
        },
    },
    Pair {
        name: "proc-read-same-pid",
        ops: ["open+read+close(<pid>/status)", "open+read+close(<pid>/status)"],
        commutes_because: "Reading a task's status changes nothing, so each process reads the same in either order \
                           and closes its own descriptor.",
        fs: Fs::Proc,
        build: |w, _| read_two(w, [&status(0), &status(0)]),
    },
    Pair {
        name: "proc-read-diff-pids",
        ops: ["open+read+close(<pid>/status)", "open+read+close(<ppid>/status)"],
        commutes_because: "Reading a task's status changes nothing, and these are different tasks: each read \
                           returns the same in either order.",
        fs: Fs::Proc,
        build: |w, _| read_two(w, [&status(0), &status(1)]),
    },
];
