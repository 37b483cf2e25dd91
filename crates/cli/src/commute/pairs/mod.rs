//! The pair table: operations that commute under POSIX, by COMMUTER's
//! classes (files, names, locks, pairs of two different calls, pseudo
//! file systems, paths across mounts), each with one
//! sentence on why, and the builder of its state.
//!
//! A builder makes the state in a fresh [`World`] (vfscale's or the
//! host's, the same code for both) and returns the two operations. It
//! prepares `instances` instances per side: instance `i` of an operation
//! that consumes something (a name to create, a file to unlink) uses the
//! `i`-th of its own objects, so repeated runs stay distinct.

mod files;
mod locks;
mod mixed;
mod mounts;
mod names;
mod pseudo;

use super::sys::Syscalls;
use super::world::{Fs, World};
use std::ffi::{CStr, CString};
use std::sync::Arc;

/// One side of a pair: runs instance `i`, or says why it failed.
pub type OpFn = Box<dyn Fn(usize) -> Result<(), String> + Send + Sync>;

/// A pair's two operations on one prepared state, which they own.
pub struct Ops {
    /// The first operation (thread 0 of a 2-thread run).
    pub a: OpFn,
    /// The second operation (thread 1).
    pub b: OpFn,
    /// Whether each side runs as a process of its own (own file table and
    /// lock owner): on the host, each thread then unshares its file table.
    pub own_file_tables: bool,
}

impl Ops {
    /// Both sides in the one process `p` (one file table).
    fn shared(
        p: Arc<dyn Syscalls>,
        a: impl Fn(&dyn Syscalls, usize) -> Result<(), String> + Send + Sync + 'static,
        b: impl Fn(&dyn Syscalls, usize) -> Result<(), String> + Send + Sync + 'static,
    ) -> Ops {
        let q = Arc::clone(&p);
        Ops { a: Box::new(move |i| a(&*p, i)), b: Box::new(move |i| b(&*q, i)), own_file_tables: false }
    }

    /// Side A in process `p`, side B in process `q`.
    fn own(
        p: Arc<dyn Syscalls>,
        a: impl Fn(&dyn Syscalls, usize) -> Result<(), String> + Send + Sync + 'static,
        q: Arc<dyn Syscalls>,
        b: impl Fn(&dyn Syscalls, usize) -> Result<(), String> + Send + Sync + 'static,
    ) -> Ops {
        Ops { a: Box::new(move |i| a(&*p, i)), b: Box::new(move |i| b(&*q, i)), own_file_tables: true }
    }
}

/// A pair of operations that commute, and how to set it up.
#[derive(Debug, Clone, Copy)]
pub struct Pair {
    /// Name on the command line and in the JSON.
    pub name: &'static str,
    /// The two operations, as calls (`stat(d/a)`).
    pub ops: [&'static str; 2],
    /// Why they commute under POSIX, in one sentence.
    pub commutes_because: &'static str,
    /// The file system the pair runs on.
    pub fs: Fs,
    /// Sets the state up in a fresh world, with `instances` instances per
    /// side, and returns the operations.
    pub build: fn(world: &World, instances: usize) -> Result<Ops, String>,
}

/// A pair on [`Fs::Tmpfs`].
const fn tmpfs(
    name: &'static str,
    ops: [&'static str; 2],
    commutes_because: &'static str,
    build: fn(&World, usize) -> Result<Ops, String>,
) -> Pair {
    Pair { name, ops, commutes_because, fs: Fs::Tmpfs, build }
}

/// Every pair, by class.
pub fn all() -> Vec<&'static Pair> {
    [files::PAIRS, names::PAIRS, locks::PAIRS, mixed::PAIRS, pseudo::PAIRS, mounts::PAIRS]
        .into_iter()
        .flatten()
        .collect()
}

/// Instance paths: `rel` with `{i}` replaced by each instance number.
struct Names(Vec<CString>);

impl Names {
    fn new(p: &dyn Syscalls, rel: &str, instances: usize) -> Names {
        Names((0..instances).map(|i| p.path(&rel.replace("{i}", &i.to_string()))).collect())
    }

    fn get(&self, i: usize) -> Result<&CStr, String> {
        self.0.get(i).map(CString::as_c_str).ok_or_else(|| format!("instance {i} of {} prepared", self.0.len()))
    }
}

/// Creates the regular file `path` with `size` bytes of data, its access
/// time an hour ahead: as if it had been read since it last changed, so
/// that `relatime` updates nothing when it is read (otherwise the first
/// read of each clock tick would, and whether the checker's recorded
/// instance met a new tick would decide its verdict).
pub(super) fn make_file(p: &dyn Syscalls, path: &CStr, size: usize) -> Result<(), String> {
    let fd = p.open(path, libc::O_CREAT | libc::O_EXCL | libc::O_WRONLY, 0o644)?;
    let written = p.pwrite(fd, &vec![b'x'; size], 0);
    p.close(fd)?;
    written?;
    p.atime_ahead(path, 3600)
}

/// Creates the directory `rel` and in it the files `names`, each `size`
/// bytes; returns the files' paths.
fn dir_with_files<const N: usize>(
    p: &dyn Syscalls,
    rel: &str,
    names: [&str; N],
    size: usize,
) -> Result<[CString; N], String> {
    p.mkdir(&p.path(rel), 0o755)?;
    let paths = names.map(|name| p.path(&format!("{rel}/{name}")));
    for path in &paths {
        make_file(p, path, size)?;
    }
    Ok(paths)
}

/// `open(path, O_RDONLY)`, one `read` of up to 64 bytes (which must find
/// data), `close`.
fn open_read_close(p: &dyn Syscalls, path: &CStr) -> Result<(), String> {
    let fd = p.open(path, libc::O_RDONLY, 0)?;
    let mut buf = [0u8; 64];
    let read = p.read(fd, &mut buf);
    p.close(fd)?;
    match read? {
        0 => Err(format!("read {}: no data", path.to_string_lossy())),
        _ => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_unique_and_classes_are_covered() {
        let pairs = all();
        let mut names: Vec<_> = pairs.iter().map(|p| p.name).collect();
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), pairs.len(), "pair names are unique");
        assert!(pairs.len() >= 30, "the issue asks for 30 pairs at least, there are {}", pairs.len());
        for class in [
            "stat",
            "fstat",
            "open",
            "O_CREAT",
            "unlink",
            "mkdir",
            "rename",
            "readdir",
            "pread",
            "pwrite",
            "lseek",
            "flock",
            "F_SETLK",
            "F_OFD_SETLK",
            "F_SETLEASE",
        ] {
            assert!(pairs.iter().any(|p| p.ops.iter().any(|op| op.contains(class))), "no pair covers {class}");
        }
        for fs in [Fs::Tmpfs, Fs::Sysfs, Fs::Proc, Fs::Mounts] {
            assert!(pairs.iter().any(|p| p.fs == fs), "no pair on {fs:?}");
        }
        assert!(pairs.iter().all(|p| p.commutes_because.ends_with('.') && !p.name.contains(' ')));
    }

    #[test]
    fn names_reject_an_instance_not_prepared() {
        let world = crate::commute::plain::world(Fs::Tmpfs).unwrap();
        let names = Names::new(&*world.process(), "d/a{i}", 2);
        assert_eq!(names.get(1).unwrap().to_bytes(), b"/d/a1");
        assert_eq!(names.get(2).unwrap_err(), "instance 2 of 2 prepared");
    }
}
