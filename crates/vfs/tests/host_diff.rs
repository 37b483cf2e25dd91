//! Differential test against the host kernel: the same random sequences of
//! namespace calls run on vfscale and, through `libc`, in a fresh temporary
//! directory on the host, which stands for vfscale's `/`. Every call must
//! give the same result (value or errno), and both trees must end the same.
//!
//! Host paths are the temporary directory's path followed by the generated
//! path, so nothing here changes the process's working directory. Nothing
//! may reach above the temporary directory: symlink targets are relative,
//! contain no `..` and name at least one entry (so a symlink always
//! resolves at least as deep as it sits), and a call whose path would take
//! `..` above the top is not made. The vfscale process has the host
//! process's credentials and vfscale's root is given the temporary
//! directory's owner and mode, so permission checks agree whether or not
//! the test runs as root.
//!
//! Only what does not depend on the host filesystem is compared: errnos,
//! names, types, sizes and link counts of non-directories, contents,
//! symlink targets, and which names share an inode. Directory sizes and
//! link counts, timestamps and permission bits (the host has a umask) are
//! not.
//!
//! Cases come from `PROPTEST_CASES` (default 64).
//!
//! The calls are the shared language of `common/ops.rs`; what is this
//! test's own is the host's side and the strategies.
#![cfg(target_os = "linux")]

#[path = "common/ops.rs"]
mod ops;

use ops::{
    components, data, fd_arg, name, open_flags, run_vfs, vfs_tree, Attr, Comparison, FdArg, Flags, Op, Out, Res, Tree,
};
use proptest::prelude::*;
use proptest::sample::select;
use proptest::test_runner::Config;
use std::collections::BTreeMap;
use std::ffi::{CString, OsStr};
use std::io;
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::os::unix::fs::{DirEntryExt, FileTypeExt, MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::sync::OnceLock;
use vfscale::{Credentials, Errno, FileType, Vfs};

// ---------------------------------------------------------------------------
// Which calls are made, and what of their results is compared.
// ---------------------------------------------------------------------------

impl Op {
    /// Whether the call stays inside the root: every path keeps `..` from
    /// going above it, and a new symlink's target is safe (see the module
    /// documentation).
    fn stays_inside(&self) -> bool {
        match self {
            Op::Mkdir(p, _)
            | Op::Rmdir(p)
            | Op::Unlink(p)
            | Op::Readlink(p)
            | Op::Open(p, ..)
            | Op::Stat(p)
            | Op::Lstat(p)
            | Op::Chmod(p, _)
            | Op::Chown { path: p, .. }
            | Op::ListDir(p) => path_stays_inside(p),
            Op::Rename { from: a, to: b, .. } | Op::Link(a, b) => path_stays_inside(a) && path_stays_inside(b),
            Op::Symlink { target, path } => target_is_safe(target) && path_stays_inside(path),
            Op::Write(..) | Op::Read(..) | Op::Close(_) | Op::Ftruncate(..) => true,
        }
    }
}

/// Whether `..` never goes above where `path` starts. Each name counts one
/// level down even if it is a symlink, which is safe because symlinks
/// always resolve at least that deep.
fn path_stays_inside(path: &str) -> bool {
    let mut depth = 0u32;
    for name in path.split('/').filter(|name| !name.is_empty()) {
        match name {
            "." => {}
            ".." if depth == 0 => return false,
            ".." => depth -= 1,
            _ => depth += 1,
        }
    }
    true
}

/// Relative, without `..`, and naming at least one entry.
fn target_is_safe(target: &str) -> bool {
    let names: Vec<&str> = target.split('/').filter(|name| !name.is_empty()).collect();
    !target.starts_with('/') && !names.contains(&"..") && names.iter().any(|&name| name != ".")
}

/// What of a result is the same on every filesystem: permission bits (the
/// host has a umask), owners, and a directory's size and link count are
/// zeroed, and a listing leaves out `.` and `..` (the top's `..` is outside
/// the temporary directory).
fn portable(out: Res<Out>) -> Res<Out> {
    Ok(match out? {
        Out::Attr(attr) => Out::Attr(portable_attr(attr)),
        Out::Entries(entries) => Out::Entries(entries.into_iter().filter(|e| e.0 != b"." && e.0 != b"..").collect()),
        out => out,
    })
}

fn portable_attr(attr: Attr) -> Attr {
    let is_dir = attr.file_type == FileType::Directory;
    Attr {
        perm: 0,
        uid: 0,
        gid: 0,
        size: if is_dir { 0 } else { attr.size },
        nlink: if is_dir { 0 } else { attr.nlink },
        ..attr
    }
}

fn portable_tree(tree: Tree) -> Tree {
    tree.into_iter().map(|(path, (attr, content))| (path, (portable_attr(attr), content))).collect()
}

// ---------------------------------------------------------------------------
// The host's side.
// ---------------------------------------------------------------------------

fn last_errno() -> Errno {
    Errno::from_raw(io::Error::last_os_error().raw_os_error().expect("a failed call sets errno"))
}

fn io_errno(e: io::Error) -> Errno {
    Errno::from_raw(e.raw_os_error().expect("an error from a system call"))
}

/// A system call's `-1`-means-errno return value.
fn sys(ret: i64) -> Res<i64> {
    if ret < 0 {
        Err(last_errno())
    } else {
        Ok(ret)
    }
}

fn std_type(file_type: std::fs::FileType) -> FileType {
    if file_type.is_dir() {
        FileType::Directory
    } else if file_type.is_symlink() {
        FileType::Symlink
    } else {
        assert!(file_type.is_file() && !file_type.is_fifo(), "only directories, files and symlinks are made");
        FileType::Regular
    }
}

/// The temporary directory standing for vfscale's root, and the host
/// descriptors opened alongside vfscale's, by vfscale descriptor number.
struct Host {
    dir: tempfile::TempDir,
    fds: BTreeMap<i32, i32>,
}

impl Drop for Host {
    fn drop(&mut self) {
        for &fd in self.fds.values() {
            // SAFETY: `fd` was returned by `open` and is closed only here or
            // by `Op::Close`, which removes it from the map.
            unsafe { libc::close(fd) };
        }
        // A directory the calls made unsearchable would keep the temporary
        // directory from being removed when the test does not run as root.
        self.make_traversable();
    }
}

impl Host {
    fn root(&self) -> &Path {
        self.dir.path()
    }

    fn path(&self, path: &str) -> PathBuf {
        let mut bytes = self.root().as_os_str().as_bytes().to_vec();
        bytes.push(b'/');
        bytes.extend_from_slice(path.as_bytes());
        PathBuf::from(OsStr::from_bytes(&bytes))
    }

    fn c_path(&self, path: &str) -> CString {
        CString::new(self.path(path).into_os_string().into_vec()).expect("generated paths hold no NUL")
    }

    /// The host descriptor for vfscale's `fd`, or -1 (EBADF) if none.
    fn fd(&self, fd: FdArg) -> i32 {
        self.fds.get(&fd.num()).copied().unwrap_or(-1)
    }

    fn stat(&self, path: &str, follow: bool) -> Res<Attr> {
        let path = self.path(path);
        let meta = if follow { std::fs::metadata(path) } else { std::fs::symlink_metadata(path) };
        let meta = meta.map_err(io_errno)?;
        Ok(Attr {
            file_type: std_type(meta.file_type()),
            perm: meta.mode() & 0o7777,
            nlink: u32::try_from(meta.nlink()).expect("a link count fits 32 bits"),
            uid: meta.uid(),
            gid: meta.gid(),
            size: meta.size(),
            ident: meta.ino(),
        })
    }

    /// Runs `op`; `vfs_fd` is what vfscale's `open` returned, if it did,
    /// and what a successful `open` here answers (or -1 if vfscale failed).
    fn run(&mut self, op: &Op, vfs_fd: Option<i32>) -> Res<Out> {
        let done = |ret: i64| sys(ret).map(|_| Out::Done);
        match op {
            Op::Mkdir(path, perm) => {
                let path = self.c_path(path);
                // SAFETY: `path` is a live C string.
                done(unsafe { libc::mkdir(path.as_ptr(), *perm) }.into())
            }
            Op::Rmdir(path) => {
                let path = self.c_path(path);
                // SAFETY: `path` is a live C string.
                done(unsafe { libc::rmdir(path.as_ptr()) }.into())
            }
            Op::Unlink(path) => {
                let path = self.c_path(path);
                // SAFETY: `path` is a live C string.
                done(unsafe { libc::unlink(path.as_ptr()) }.into())
            }
            Op::Rename { from, to, noreplace } => {
                let (from, to) = (self.c_path(from), self.c_path(to));
                let flags = if *noreplace { libc::RENAME_NOREPLACE } else { 0 };
                // SAFETY: both paths are live C strings; renameat2 takes
                // two descriptors, two paths and flags.
                let ret = unsafe {
                    libc::syscall(
                        libc::SYS_renameat2,
                        libc::AT_FDCWD,
                        from.as_ptr(),
                        libc::AT_FDCWD,
                        to.as_ptr(),
                        flags,
                    )
                };
                done(ret)
            }
            Op::Link(old, new) => {
                let (old, new) = (self.c_path(old), self.c_path(new));
                // SAFETY: both paths are live C strings.
                done(unsafe { libc::link(old.as_ptr(), new.as_ptr()) }.into())
            }
            Op::Symlink { target, path } => {
                let target = CString::new(target.as_str()).expect("generated targets hold no NUL");
                let path = self.c_path(path);
                // SAFETY: both are live C strings.
                done(unsafe { libc::symlink(target.as_ptr(), path.as_ptr()) }.into())
            }
            Op::Readlink(path) => {
                let path = self.c_path(path);
                let mut buf = vec![0u8; 4096];
                // SAFETY: `path` is a live C string and `buf` has the length
                // passed.
                let n = sys(unsafe { libc::readlink(path.as_ptr(), buf.as_mut_ptr().cast(), buf.len()) } as i64)?;
                buf.truncate(n as usize);
                Ok(Out::Bytes(buf))
            }
            Op::Open(path, flags, perm) => {
                let path = self.c_path(path);
                // SAFETY: `path` is a live C string; `open` reads the mode
                // as its variadic argument when O_CREAT is set.
                let fd = sys(unsafe { libc::open(path.as_ptr(), flags.0 | libc::O_CLOEXEC, *perm) }.into())? as i32;
                match vfs_fd {
                    Some(vfs_fd) => {
                        self.fds.insert(vfs_fd, fd);
                        Ok(Out::Fd(vfs_fd))
                    }
                    None => {
                        // SAFETY: `fd` was just opened and is not kept.
                        unsafe { libc::close(fd) };
                        Ok(Out::Fd(-1))
                    }
                }
            }
            Op::Write(fd, data) => {
                // SAFETY: `data` has the length passed; a wrong descriptor
                // is the kernel's to refuse.
                let n = sys(unsafe { libc::write(self.fd(*fd), data.as_ptr().cast(), data.len()) } as i64)?;
                Ok(Out::Count(n as usize))
            }
            Op::Read(fd, len) => {
                let mut buf = vec![0u8; *len];
                // SAFETY: `buf` has the length passed.
                let n = sys(unsafe { libc::read(self.fd(*fd), buf.as_mut_ptr().cast(), buf.len()) } as i64)?;
                buf.truncate(n as usize);
                Ok(Out::Bytes(buf))
            }
            Op::Close(fd) => {
                // SAFETY: the descriptor is one this test opened (then it
                // leaves the map) or -1.
                sys(unsafe { libc::close(self.fd(*fd)) }.into())?;
                self.fds.remove(&fd.num());
                Ok(Out::Done)
            }
            Op::Ftruncate(fd, len) => {
                // SAFETY: plain integers; the kernel checks them.
                done(unsafe { libc::ftruncate(self.fd(*fd), *len) }.into())
            }
            Op::Stat(path) => self.stat(path, true).map(Out::Attr),
            Op::Lstat(path) => self.stat(path, false).map(Out::Attr),
            Op::Chmod(path, perm) => {
                let path = self.c_path(path);
                // SAFETY: `path` is a live C string.
                done(unsafe { libc::chmod(path.as_ptr(), *perm) }.into())
            }
            Op::Chown { path, uid, gid, follow } => {
                let path = self.c_path(path);
                // -1 leaves an id as it is.
                let (uid, gid) = (uid.unwrap_or(u32::MAX), gid.unwrap_or(u32::MAX));
                // SAFETY: `path` is a live C string.
                let ret = unsafe {
                    if *follow {
                        libc::chown(path.as_ptr(), uid, gid)
                    } else {
                        libc::lchown(path.as_ptr(), uid, gid)
                    }
                };
                done(ret.into())
            }
            Op::ListDir(path) => {
                let mut entries = Vec::new();
                for entry in std::fs::read_dir(self.path(path)).map_err(io_errno)? {
                    let entry = entry.map_err(io_errno)?;
                    let file_type = std_type(entry.file_type().map_err(io_errno)?);
                    entries.push((entry.file_name().as_bytes().to_vec(), file_type, entry.ino()));
                }
                entries.sort_by(|a, b| a.0.cmp(&b.0));
                Ok(Out::Entries(entries))
            }
        }
    }

    /// Gives every directory owner read, write and search permission, top
    /// down, so that a caller that is not root can walk and remove them.
    fn make_traversable(&self) {
        let mut pending = vec![self.root().to_path_buf()];
        while let Some(dir) = pending.pop() {
            // Failures are ignored: the walk that follows reports them.
            let _ = std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o700));
            for entry in std::fs::read_dir(&dir).into_iter().flatten().flatten() {
                if entry.file_type().is_ok_and(|t| t.is_dir()) {
                    pending.push(entry.path());
                }
            }
        }
    }

    /// The host's counterpart of [`vfs_tree`], after
    /// [`make_traversable`](Self::make_traversable) (permission bits are
    /// not compared).
    fn tree(&self) -> Tree {
        self.make_traversable();
        let mut out = Tree::new();
        out.insert(".".to_string(), (self.stat(".", false).expect("lstat the top"), Vec::new()));
        let mut pending = vec![String::new()];
        while let Some(dir) = pending.pop() {
            for entry in std::fs::read_dir(self.path(&dir)).expect("list a directory") {
                let name = entry.expect("a directory entry").file_name().into_string().expect("ASCII names");
                let path = if dir.is_empty() { name } else { format!("{dir}/{name}") };
                let attr = self.stat(&path, false).expect("lstat a listed name");
                let content = match attr.file_type {
                    FileType::Directory => {
                        pending.push(path.clone());
                        Vec::new()
                    }
                    FileType::Symlink => {
                        std::fs::read_link(self.path(&path)).expect("readlink").into_os_string().into_vec()
                    }
                    FileType::Regular => std::fs::read(self.path(&path)).expect("read a listed file"),
                    FileType::Fifo | FileType::Socket | FileType::CharDevice | FileType::BlockDevice => {
                        unreachable!("the generated operations make no special files")
                    }
                };
                out.insert(path, (attr, content));
            }
        }
        out
    }
}

// ---------------------------------------------------------------------------
// Comparing.
// ---------------------------------------------------------------------------

/// vfscale credentials equal to this process's effective ids and groups.
fn host_credentials() -> Credentials {
    // SAFETY: these calls only read the caller's credentials.
    let (uid, gid) = unsafe { (libc::geteuid(), libc::getegid()) };
    if uid == 0 {
        return Credentials::root();
    }
    let mut groups = vec![0; 256];
    // SAFETY: `groups` has room for the number of entries passed.
    let n = unsafe { libc::getgroups(groups.len() as i32, groups.as_mut_ptr()) };
    groups.truncate(usize::try_from(n).expect("at most 256 supplementary groups"));
    Credentials::user(uid, gid, groups)
}

/// Runs `ops` on a fresh vfscale and a fresh temporary directory; the
/// first difference is returned as a message naming the call.
fn check(ops: &[Op], noreplace_supported: bool) -> Result<(), String> {
    let mut host = Host { dir: tempfile::tempdir().expect("create a temporary directory"), fds: BTreeMap::new() };
    let vfs = Vfs::default();
    let top = std::fs::metadata(host.root()).expect("stat the temporary directory");
    let admin = vfs.process(Credentials::root());
    admin.chown("/", Some(top.uid()), Some(top.gid())).expect("chown vfscale's root");
    admin.chmod("/", top.mode() & 0o7777).expect("chmod vfscale's root");
    let p = vfs.process(host_credentials());
    let mut comparison = Comparison::new("the host");
    let mut latest = -1;
    for (i, op) in ops.iter().enumerate() {
        let existing: Vec<String> = vfs_tree(&admin).into_keys().collect();
        let op = &op.resolved(latest, &existing);
        if !op.stays_inside() || (matches!(op, Op::Rename { noreplace: true, .. }) && !noreplace_supported) {
            continue;
        }
        let actual = run_vfs(&p, op);
        let vfs_fd = match &actual {
            Ok(Out::Fd(fd)) => Some(*fd),
            _ => None,
        };
        let expected = host.run(op, vfs_fd);
        let removed = matches!((op, &actual), (Op::Unlink(_) | Op::Rmdir(_) | Op::Rename { .. }, Ok(_)));
        comparison.results(portable(expected), portable(actual)).map_err(|e| format!("call #{i} {op:?}: {e}"))?;
        if let Some(fd) = vfs_fd {
            latest = fd;
        }
        if removed {
            // The host may reuse a freed inode number for a new file.
            comparison = Comparison::new("the host");
        }
    }
    comparison.trees(portable_tree(host.tree()), portable_tree(vfs_tree(&admin)))
}

/// Whether the host filesystem of temporary directories supports
/// `RENAME_NOREPLACE` (some overlay and network filesystems do not).
fn host_supports_noreplace() -> bool {
    let dir = tempfile::tempdir().expect("create a temporary directory");
    let from = CString::new(dir.path().join("from").into_os_string().into_vec()).expect("no NUL");
    let to = CString::new(dir.path().join("to").into_os_string().into_vec()).expect("no NUL");
    std::fs::write(dir.path().join("from"), b"").expect("create a file");
    // SAFETY: both paths are live CStrings.
    let ret = unsafe {
        libc::syscall(
            libc::SYS_renameat2,
            libc::AT_FDCWD,
            from.as_ptr(),
            libc::AT_FDCWD,
            to.as_ptr(),
            libc::RENAME_NOREPLACE,
        )
    };
    ret == 0
}

// ---------------------------------------------------------------------------
// Generating calls.
// ---------------------------------------------------------------------------

/// A random path (sometimes absolute, sometimes with a trailing slash), or
/// an existing one, perhaps with something after it.
fn path() -> impl Strategy<Value = String> {
    let component = prop_oneof![12 => name(), 1 => Just("."), 1 => Just("..")];
    let joined = (prop::bool::weighted(0.15), components(component), prop::bool::weighted(0.08)).prop_map(
        |(absolute, names, slash)| {
            format!("{}{names}{}", if absolute { "/" } else { "" }, if slash { "/" } else { "" })
        },
    );
    let fixed = prop_oneof![8 => Just(""), 1 => Just("/"), 1 => Just("/."), 1 => Just("/..")];
    let suffix = prop_oneof![11 => fixed.prop_map(str::to_string), 3 => name().prop_map(|n| format!("/{n}"))];
    let existing = (0..64usize, suffix).prop_map(|(k, suffix)| format!("@{k}{suffix}"));
    prop_oneof![20 => joined, 20 => existing]
}

/// A path for a new name: any path, or a name in an existing directory.
fn new_path() -> impl Strategy<Value = String> {
    let fresh = prop_oneof![name(), Just("d"), Just("e")];
    prop_oneof![path(), (0..64usize, fresh).prop_map(|(k, name)| format!("@{k}/{name}"))]
}

/// A relative symlink target without `..`, sometimes with `.` or a
/// trailing slash, sometimes pointing at itself.
fn target() -> impl Strategy<Value = String> {
    let component = prop_oneof![8 => name(), 1 => Just(".")];
    (components(component), prop::bool::weighted(0.1))
        .prop_map(|(names, slash)| format!("{names}{}", if slash { "/" } else { "" }))
}

/// Calls that build a tree: directories, files with contents, symlinks.
fn setup_op() -> impl Strategy<Value = Vec<Op>> {
    let inside = (0..64usize, name()).prop_map(|(k, name)| format!("@{k}/{name}"));
    let plain = move || prop_oneof![components(name()), inside.clone()];
    let creat = Flags(libc::O_WRONLY | libc::O_CREAT);
    prop_oneof![
        3 => plain().prop_map(|p| vec![Op::Mkdir(p, 0o755)]),
        5 => (plain(), data()).prop_map(move |(p, d)| vec![Op::Open(p, creat, 0o644), Op::Write(FdArg::Latest, d)]),
        1 => (target(), plain()).prop_map(|(target, path)| vec![Op::Symlink { target, path }]),
    ]
}

fn op() -> impl Strategy<Value = Op> {
    let perm = select(vec![0o755, 0o700, 0o644, 0o1777]);
    prop_oneof![
        6 => (new_path(), perm.clone()).prop_map(|(p, m)| Op::Mkdir(p, m)),
        2 => path().prop_map(Op::Rmdir),
        2 => path().prop_map(Op::Unlink),
        4 => (path(), new_path(), prop::bool::weighted(0.3))
            .prop_map(|(from, to, noreplace)| Op::Rename { from, to, noreplace }),
        2 => (path(), new_path()).prop_map(|(a, b)| Op::Link(a, b)),
        3 => (target(), new_path()).prop_map(|(target, path)| Op::Symlink { target, path }),
        1 => path().prop_map(Op::Readlink),
        6 => (new_path(), open_flags(), select(vec![0o644, 0o600])).prop_map(|(p, f, m)| Op::Open(p, f, m)),
        3 => (fd_arg(), data()).prop_map(|(fd, d)| Op::Write(fd, d)),
        3 => (fd_arg(), 0..8usize).prop_map(|(fd, n)| Op::Read(fd, n)),
        1 => fd_arg().prop_map(Op::Close),
        2 => (fd_arg(), select(vec![-1i64, 0, 2, 7])).prop_map(|(fd, n)| Op::Ftruncate(fd, n)),
        2 => path().prop_map(Op::Stat),
        2 => path().prop_map(Op::Lstat),
        1 => (path(), perm).prop_map(|(p, m)| Op::Chmod(p, m)),
        1 => path().prop_map(Op::ListDir),
    ]
}

fn ops() -> impl Strategy<Value = Vec<Op>> {
    let setup = prop::collection::vec(setup_op(), 2..10);
    (setup, prop::collection::vec(op(), 1..50))
        .prop_map(|(setup, ops)| setup.into_iter().flatten().chain(ops).collect())
}

proptest! {
    #![proptest_config(Config {
        cases: ops::cases(),
        rng_seed: ops::seed(),
        failure_persistence: None,
        ..Config::default()
    })]

    #[test]
    fn namespace_matches_host_kernel(ops in ops()) {
        static NOREPLACE: OnceLock<bool> = OnceLock::new();
        let noreplace = *NOREPLACE.get_or_init(|| {
            let supported = host_supports_noreplace();
            if !supported {
                eprintln!("note: the host filesystem lacks RENAME_NOREPLACE; those renames are not compared");
            }
            supported
        });
        let result = check(&ops, noreplace);
        prop_assert!(result.is_ok(), "{}", result.unwrap_err());
    }
}
