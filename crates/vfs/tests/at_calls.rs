//! The `*at` calls and `openat2` against the host kernel: one script of
//! calls, each with a `dirfd` (a directory, a regular file, a
//! subdirectory or no descriptor at all) and `AT_*` or `RESOLVE_*` flags,
//! run in order on a vfscale process and, through `libc`, in a temporary
//! directory of the host; every answer (the errno, or what a success
//! returned) and the final tree must agree.
//!
//! Both sides start from the same tree under `d/`:
//!
//! ```text
//! d/f            regular file, "hello"
//! d/sub/g        regular file
//! d/abs  -> /etc/hostname-of-vfscale   (absolute)
//! d/up   -> ../x                       (climbs out of d)
//! d/rel  -> sub/g
//! d/loop -> loop
//! d/dangling -> nothere
//! ```
//!
//! Absolute paths reach only `abs`'s missing target or a name that exists
//! nowhere, so the host's own tree never answers.

use std::ffi::CString;
use std::io;
use std::os::unix::ffi::OsStrExt;
use vfscale::{
    AtFlags, Credentials, Errno, Fd, FileType, OpenFlags, OpenHow, Process, RenameFlags, ResolveFlags, SetTime, Vfs,
};

/// Which `dirfd` a call passes.
#[derive(Debug, Clone, Copy)]
enum Dir {
    /// `d`, opened `O_DIRECTORY`.
    D,
    /// `d/f`, a regular file.
    F,
    /// `d/sub`.
    Sub,
    /// A number no descriptor has.
    Bad,
}

#[derive(Debug, Clone)]
enum Call {
    Openat2 { at: Dir, path: &'static str, flags: i32, mode: u64, resolve: u64 },
    Fstatat { at: Dir, path: &'static str, flags: i32 },
    Mkdirat { at: Dir, path: &'static str },
    Unlinkat { at: Dir, path: &'static str, flags: i32 },
    Linkat { old_at: Dir, old: &'static str, new_at: Dir, new: &'static str, flags: i32 },
    Renameat2 { old_at: Dir, old: &'static str, new_at: Dir, new: &'static str, noreplace: bool },
    Symlinkat { target: &'static str, at: Dir, path: &'static str },
    Readlinkat { at: Dir, path: &'static str },
    Fchmodat { at: Dir, path: &'static str, mode: u32, flags: i32 },
    Fchownat { at: Dir, path: &'static str, flags: i32 },
    Utimensat { at: Dir, path: &'static str, flags: i32 },
    Faccessat { at: Dir, path: &'static str, mask: i32, flags: i32 },
}

/// What a successful call returned, on either side.
type Out = Result<String, Errno>;

const NOFOLLOW: i32 = libc::AT_SYMLINK_NOFOLLOW;
const EMPTY: i32 = libc::AT_EMPTY_PATH;
const BENEATH: u64 = ResolveFlags::BENEATH.0;
const IN_ROOT: u64 = ResolveFlags::IN_ROOT.0;
const NO_SYMLINKS: u64 = ResolveFlags::NO_SYMLINKS.0;

fn script(root: bool) -> Vec<Call> {
    use Call::*;
    use Dir::*;
    let open = |at, path, flags, resolve| Openat2 { at, path, flags, mode: 0, resolve };
    let mut calls = vec![
        open(D, "f", libc::O_RDONLY, 0),
        open(D, "sub/../f", libc::O_RDONLY, BENEATH),
        open(D, "../d/f", libc::O_RDONLY, BENEATH),
        open(D, "/nowhere-vfscale", libc::O_RDONLY, BENEATH),
        open(D, "/nowhere-vfscale", libc::O_RDONLY, IN_ROOT),
        open(D, "/f", libc::O_RDONLY, IN_ROOT),
        open(D, "/../../f", libc::O_RDONLY, IN_ROOT),
        open(D, "abs", libc::O_RDONLY, BENEATH),
        open(D, "abs", libc::O_RDONLY, IN_ROOT),
        open(D, "up", libc::O_RDONLY, BENEATH),
        open(D, "up", libc::O_RDONLY, IN_ROOT),
        open(D, "rel", libc::O_RDONLY, NO_SYMLINKS),
        open(D, "rel", libc::O_RDONLY, 0),
        open(D, "rel", libc::O_RDONLY | libc::O_NOFOLLOW, 0),
        open(D, "loop", libc::O_RDONLY, 0),
        open(D, "sub", libc::O_RDONLY | libc::O_DIRECTORY, NO_SYMLINKS | BENEATH),
        open(Sub, "..", libc::O_RDONLY, BENEATH),
        open(Sub, "../f", libc::O_RDONLY, IN_ROOT),
        open(Sub, "g", libc::O_RDONLY, BENEATH),
        open(F, "x", libc::O_RDONLY, 0),
        open(F, "x", libc::O_RDONLY, BENEATH),
        open(Bad, "f", libc::O_RDONLY, 0),
        open(Bad, "/nowhere-vfscale", libc::O_RDONLY, 0),
        Openat2 { at: D, path: "f", flags: libc::O_RDONLY, mode: 0o644, resolve: 0 },
        Openat2 { at: D, path: "n", flags: libc::O_CREAT | libc::O_WRONLY, mode: 0o10644, resolve: 0 },
        open(D, "f", libc::O_RDONLY, BENEATH | IN_ROOT),
        open(D, "f", libc::O_RDONLY, 0x40),
        open(D, "f", libc::O_RDONLY | 0x1000_0000, 0),
        Openat2 {
            at: D,
            path: "new",
            flags: libc::O_CREAT | libc::O_WRONLY,
            mode: 0o600,
            resolve: ResolveFlags::CACHED.0,
        },
        open(D, "f", libc::O_RDONLY | libc::O_TRUNC, ResolveFlags::CACHED.0),
        Openat2 { at: D, path: "dangling", flags: libc::O_CREAT | libc::O_WRONLY, mode: 0o600, resolve: BENEATH },
        Openat2 { at: D, path: "rel", flags: libc::O_CREAT | libc::O_WRONLY, mode: 0o600, resolve: NO_SYMLINKS },
        Fstatat { at: D, path: "nothere", flags: 0 },
        Fstatat { at: D, path: "", flags: 0 },
        Fstatat { at: D, path: "", flags: EMPTY },
        Fstatat { at: F, path: "", flags: EMPTY },
        Fstatat { at: F, path: ".", flags: 0 },
        Fstatat { at: D, path: "rel", flags: NOFOLLOW },
        Fstatat { at: D, path: "rel", flags: 0 },
        Fstatat { at: D, path: "f", flags: libc::AT_REMOVEDIR },
        Fstatat { at: Bad, path: "/nowhere-vfscale", flags: 0 },
        Fstatat { at: Bad, path: "", flags: EMPTY },
        Mkdirat { at: D, path: "m" },
        Mkdirat { at: Sub, path: "m" },
        Mkdirat { at: D, path: "m" },
        Mkdirat { at: F, path: "m" },
        Mkdirat { at: D, path: "" },
        Unlinkat { at: D, path: "m", flags: 0 },
        Unlinkat { at: D, path: "f", flags: libc::AT_REMOVEDIR },
        Unlinkat { at: D, path: "f", flags: NOFOLLOW },
        Unlinkat { at: D, path: "m", flags: libc::AT_REMOVEDIR },
        Unlinkat { at: Sub, path: "m", flags: libc::AT_REMOVEDIR },
        Linkat { old_at: D, old: "f", new_at: Sub, new: "f2", flags: 0 },
        Linkat { old_at: D, old: "rel", new_at: Sub, new: "rl", flags: 0 },
        Linkat { old_at: D, old: "rel", new_at: Sub, new: "rf", flags: libc::AT_SYMLINK_FOLLOW },
        Linkat { old_at: D, old: "f", new_at: F, new: "x", flags: 0 },
        Linkat { old_at: D, old: "f", new_at: Sub, new: "y", flags: NOFOLLOW },
        Fstatat { at: D, path: "f", flags: 0 },
        Fstatat { at: Sub, path: "rl", flags: NOFOLLOW },
        Renameat2 { old_at: Sub, old: "f2", new_at: D, new: "moved", noreplace: false },
        Renameat2 { old_at: D, old: "moved", new_at: Sub, new: "g", noreplace: true },
        Renameat2 { old_at: D, old: "moved", new_at: F, new: "x", noreplace: false },
        Renameat2 { old_at: Bad, old: "moved", new_at: D, new: "x", noreplace: false },
        Symlinkat { target: "t", at: D, path: "s2" },
        Symlinkat { target: "t", at: F, path: "s3" },
        Readlinkat { at: D, path: "rel" },
        Readlinkat { at: D, path: "s2" },
        Readlinkat { at: D, path: "f" },
        Readlinkat { at: D, path: "" },
        Fchmodat { at: D, path: "f", mode: 0o600, flags: 0 },
        Fchmodat { at: D, path: "rel", mode: 0o600, flags: NOFOLLOW },
        Fchmodat { at: F, path: "", mode: 0o640, flags: EMPTY },
        Fchmodat { at: D, path: "f", mode: 0o640, flags: libc::AT_REMOVEDIR },
        Fstatat { at: D, path: "f", flags: 0 },
        Fchownat { at: F, path: "", flags: EMPTY },
        Fchownat { at: D, path: "rel", flags: NOFOLLOW },
        Fchownat { at: D, path: "f", flags: libc::AT_SYMLINK_FOLLOW },
        Utimensat { at: D, path: "f", flags: 0 },
        Utimensat { at: F, path: "", flags: EMPTY },
        Utimensat { at: D, path: "f", flags: libc::AT_REMOVEDIR },
        Faccessat { at: D, path: "f", mask: libc::R_OK, flags: 0 },
        Faccessat { at: D, path: "rel", mask: libc::R_OK, flags: libc::AT_EACCESS | NOFOLLOW },
        Faccessat { at: F, path: "", mask: libc::W_OK, flags: EMPTY },
        Faccessat { at: D, path: "f", mask: libc::R_OK, flags: libc::AT_REMOVEDIR },
    ];
    if root {
        // CAP_DAC_READ_SEARCH; without it Linux 6.10+ still lets the
        // opener link its own file, which vfscale does not model.
        calls.push(Linkat { old_at: F, old: "", new_at: D, new: "viaempty", flags: EMPTY });
    }
    calls.push(Linkat { old_at: F, old: "", new_at: D, new: "viaempty2", flags: 0 });
    calls
}

// ---------------------------------------------------------------------------
// The host side.
// ---------------------------------------------------------------------------

struct Host {
    _dir: tempfile::TempDir,
    d: i32,
    f: i32,
    sub: i32,
}

fn host_errno() -> Errno {
    Errno::from_raw(io::Error::last_os_error().raw_os_error().expect("a failed call sets errno"))
}

fn c(path: &str) -> CString {
    CString::new(path).expect("no NUL in a scripted path")
}

/// `-1` is an error with errno, anything else a success.
fn checked(ret: libc::c_long) -> Result<libc::c_long, Errno> {
    if ret < 0 {
        Err(host_errno())
    } else {
        Ok(ret)
    }
}

fn file_type(mode: u32) -> FileType {
    FileType::from_mode(mode).expect("a known file type")
}

fn describe_stat(mode: u32, size: u64, nlink: u64) -> String {
    format!("{:?} {:o} size {size} nlink {nlink}", file_type(mode), mode & 0o7777)
}

impl Host {
    fn new() -> Host {
        let dir = tempfile::tempdir().expect("create a temporary directory");
        let d = dir.path().join("d");
        std::fs::create_dir(&d).unwrap();
        std::fs::write(d.join("f"), "hello").unwrap();
        std::fs::create_dir(d.join("sub")).unwrap();
        std::fs::write(d.join("sub/g"), "").unwrap();
        for (target, name) in SYMLINKS {
            std::os::unix::fs::symlink(target, d.join(name)).unwrap();
        }
        let open = |path: &std::path::Path, flags| {
            let path = CString::new(path.as_os_str().as_bytes()).unwrap();
            // SAFETY: `path` is a NUL-terminated string that outlives the call.
            let fd = unsafe { libc::open(path.as_ptr(), flags | libc::O_CLOEXEC) };
            assert!(fd >= 0, "open {path:?}: {}", host_errno());
            fd
        };
        let (dfd, f, sub) =
            (open(&d, libc::O_DIRECTORY), open(&d.join("f"), libc::O_RDWR), open(&d.join("sub"), libc::O_DIRECTORY));
        Host { _dir: dir, d: dfd, f, sub }
    }

    fn fd(&self, at: Dir) -> i32 {
        match at {
            Dir::D => self.d,
            Dir::F => self.f,
            Dir::Sub => self.sub,
            Dir::Bad => 9999,
        }
    }

    fn fstatat(&self, at: i32, path: &str, flags: i32) -> Out {
        // SAFETY: all-zero bytes are a valid `stat`.
        let mut st: libc::stat = unsafe { std::mem::zeroed() };
        // SAFETY: the path is NUL-terminated and `st` is writable.
        checked(unsafe { libc::fstatat(at, c(path).as_ptr(), &mut st, flags) } as libc::c_long)?;
        Ok(describe_stat(st.st_mode, st.st_size as u64, st.st_nlink))
    }

    fn run(&self, call: &Call) -> Out {
        let ok = |ret: libc::c_int| checked(ret as libc::c_long).map(|_| "ok".to_string());
        // SAFETY (every block below): each path is a NUL-terminated string
        // that outlives its call, and each out-pointer is writable.
        match *call {
            Call::Openat2 { at, path, flags, mode, resolve } => {
                #[repr(C)]
                struct How {
                    flags: u64,
                    mode: u64,
                    resolve: u64,
                }
                let how = How { flags: flags as u32 as u64 | libc::O_CLOEXEC as u64, mode, resolve };
                let path = c(path);
                let fd = checked(unsafe {
                    libc::syscall(libc::SYS_openat2, self.fd(at), path.as_ptr(), &how, std::mem::size_of::<How>())
                })? as i32;
                let described = self.fstatat(fd, "", EMPTY);
                unsafe { libc::close(fd) };
                described
            }
            Call::Fstatat { at, path, flags } => self.fstatat(self.fd(at), path, flags),
            Call::Mkdirat { at, path } => ok(unsafe { libc::mkdirat(self.fd(at), c(path).as_ptr(), 0o755) }),
            Call::Unlinkat { at, path, flags } => ok(unsafe { libc::unlinkat(self.fd(at), c(path).as_ptr(), flags) }),
            Call::Linkat { old_at, old, new_at, new, flags } => {
                ok(unsafe { libc::linkat(self.fd(old_at), c(old).as_ptr(), self.fd(new_at), c(new).as_ptr(), flags) })
            }
            Call::Renameat2 { old_at, old, new_at, new, noreplace } => {
                let flags = if noreplace { libc::RENAME_NOREPLACE } else { 0 };
                ok(unsafe {
                    libc::renameat2(self.fd(old_at), c(old).as_ptr(), self.fd(new_at), c(new).as_ptr(), flags)
                })
            }
            Call::Symlinkat { target, at, path } => {
                ok(unsafe { libc::symlinkat(c(target).as_ptr(), self.fd(at), c(path).as_ptr()) })
            }
            Call::Readlinkat { at, path } => {
                let mut buf = [0u8; 256];
                let n = checked(unsafe {
                    libc::readlinkat(self.fd(at), c(path).as_ptr(), buf.as_mut_ptr().cast(), buf.len())
                } as libc::c_long)?;
                Ok(String::from_utf8_lossy(&buf[..n as usize]).into_owned())
            }
            Call::Fchmodat { at, path, mode, flags } => {
                checked(unsafe { libc::syscall(libc::SYS_fchmodat2, self.fd(at), c(path).as_ptr(), mode, flags) })
                    .map(|_| "ok".to_string())
            }
            Call::Fchownat { at, path, flags } => {
                ok(unsafe { libc::fchownat(self.fd(at), c(path).as_ptr(), u32::MAX, u32::MAX, flags) })
            }
            Call::Utimensat { at, path, flags } => {
                let now = [libc::timespec { tv_sec: 0, tv_nsec: libc::UTIME_NOW }; 2];
                ok(unsafe { libc::utimensat(self.fd(at), c(path).as_ptr(), now.as_ptr(), flags) })
            }
            Call::Faccessat { at, path, mask, flags } => {
                checked(unsafe { libc::syscall(libc::SYS_faccessat2, self.fd(at), c(path).as_ptr(), mask, flags) })
                    .map(|_| "ok".to_string())
            }
        }
    }
}

impl Drop for Host {
    fn drop(&mut self) {
        for fd in [self.d, self.f, self.sub] {
            // SAFETY: these descriptors were opened by `Host::new` and are
            // closed once.
            unsafe { libc::close(fd) };
        }
    }
}

const SYMLINKS: [(&str, &str); 5] =
    [("/etc/hostname-of-vfscale", "abs"), ("../x", "up"), ("sub/g", "rel"), ("loop", "loop"), ("nothere", "dangling")];

// ---------------------------------------------------------------------------
// The vfscale side.
// ---------------------------------------------------------------------------

struct Ours {
    p: Process,
    d: Fd,
    f: Fd,
    sub: Fd,
}

impl Ours {
    fn new(cred: Credentials) -> Ours {
        let vfs = Vfs::default();
        let admin = vfs.process(Credentials::root());
        admin.chmod("/", 0o777).unwrap();
        let p = vfs.process(cred);
        p.mkdir("/d", 0o755).unwrap();
        let f = p.open("/d/f", OpenFlags::CREAT | OpenFlags::RDWR, 0o644).unwrap();
        p.write(f, b"hello").unwrap();
        p.mkdir("/d/sub", 0o755).unwrap();
        p.close(p.open("/d/sub/g", OpenFlags::CREAT | OpenFlags::WRONLY, 0o644).unwrap()).unwrap();
        for (target, name) in SYMLINKS {
            p.symlink(target, format!("/d/{name}")).unwrap();
        }
        let d = p.open("/d", OpenFlags::DIRECTORY, 0).unwrap();
        let sub = p.open("/d/sub", OpenFlags::DIRECTORY, 0).unwrap();
        Ours { p, d, f, sub }
    }

    fn fd(&self, at: Dir) -> Fd {
        match at {
            Dir::D => self.d,
            Dir::F => self.f,
            Dir::Sub => self.sub,
            Dir::Bad => 999,
        }
    }

    fn fstatat(&self, at: Fd, path: &str, flags: i32) -> Out {
        let st = self.p.fstatat(at, path, AtFlags(flags))?;
        Ok(describe_stat(st.mode, st.size, u64::from(st.nlink)))
    }

    fn run(&self, call: &Call) -> Out {
        let p = &self.p;
        let ok = |r: Result<(), Errno>| r.map(|()| "ok".to_string());
        match *call {
            Call::Openat2 { at, path, flags, mode, resolve } => {
                let how = OpenHow { flags: OpenFlags(flags), mode, resolve: ResolveFlags(resolve) };
                let fd = p.openat2(self.fd(at), path, &how)?;
                let described = self.fstatat(fd, "", EMPTY);
                p.close(fd).unwrap();
                described
            }
            Call::Fstatat { at, path, flags } => self.fstatat(self.fd(at), path, flags),
            Call::Mkdirat { at, path } => ok(p.mkdirat(self.fd(at), path, 0o755)),
            Call::Unlinkat { at, path, flags } => ok(p.unlinkat(self.fd(at), path, AtFlags(flags))),
            Call::Linkat { old_at, old, new_at, new, flags } => {
                ok(p.linkat(self.fd(old_at), old, self.fd(new_at), new, AtFlags(flags)))
            }
            Call::Renameat2 { old_at, old, new_at, new, noreplace } => {
                ok(p.renameat2(self.fd(old_at), old, self.fd(new_at), new, RenameFlags { noreplace }))
            }
            Call::Symlinkat { target, at, path } => ok(p.symlinkat(target, self.fd(at), path)),
            Call::Readlinkat { at, path } => {
                p.readlinkat(self.fd(at), path).map(|t| String::from_utf8_lossy(&t).into_owned())
            }
            Call::Fchmodat { at, path, mode, flags } => ok(p.fchmodat(self.fd(at), path, mode, AtFlags(flags))),
            Call::Fchownat { at, path, flags } => ok(p.fchownat(self.fd(at), path, None, None, AtFlags(flags))),
            Call::Utimensat { at, path, flags } => {
                ok(p.utimensat(self.fd(at), path, SetTime::Now, SetTime::Now, AtFlags(flags)))
            }
            Call::Faccessat { at, path, mask, flags } => {
                use vfscale::cred::Access;
                let mask = [(libc::R_OK, Access::READ), (libc::W_OK, Access::WRITE), (libc::X_OK, Access::EXEC)]
                    .into_iter()
                    .filter(|(bit, _)| mask & bit != 0)
                    .fold(Access::empty(), |all, (_, access)| all.union(access));
                ok(p.faccessat(self.fd(at), path, mask, AtFlags(flags)))
            }
        }
    }
}

fn host_credentials() -> Credentials {
    // SAFETY: these calls only read the caller's ids.
    let (uid, gid) = unsafe { (libc::geteuid(), libc::getegid()) };
    if uid == 0 {
        Credentials::root()
    } else {
        Credentials::user(uid, gid, [gid])
    }
}

/// Every name under `d/` with its stat summary, on vfscale.
fn our_tree(p: &Process, dir: &str, out: &mut Vec<String>) {
    let mut names: Vec<String> = p
        .list_dir(dir)
        .unwrap()
        .into_iter()
        .map(|e| String::from_utf8(e.name.to_vec()).unwrap())
        .filter(|n| n != "." && n != "..")
        .collect();
    names.sort();
    for name in names {
        let path = format!("{dir}/{name}");
        let st = p.lstat(&path).unwrap();
        out.push(format!("{path}: {}", describe_stat(st.mode, st.size, u64::from(st.nlink))));
        if FileType::from_mode(st.mode) == Some(FileType::Directory) {
            our_tree(p, &path, out);
        }
    }
}

/// The same on the host.
fn host_tree(base: &std::path::Path, dir: &str, out: &mut Vec<String>) {
    use std::os::unix::fs::MetadataExt;
    let mut names: Vec<String> = std::fs::read_dir(base.join(dir.trim_start_matches('/')))
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    names.sort();
    for name in names {
        let path = format!("{dir}/{name}");
        let md = std::fs::symlink_metadata(base.join(path.trim_start_matches('/'))).unwrap();
        out.push(format!("{path}: {}", describe_stat(md.mode(), md.size(), md.nlink())));
        if md.is_dir() {
            host_tree(base, &path, out);
        }
    }
}

#[test]
fn at_calls_match_the_kernel() {
    let host = Host::new();
    let ours = Ours::new(host_credentials());
    // SAFETY: reads the caller's effective uid.
    let root = unsafe { libc::geteuid() } == 0;
    let mut differences = Vec::new();
    for call in script(root) {
        let (expected, got) = (host.run(&call), ours.run(&call));
        // Directory sizes are the filesystem's own (ext4 counts blocks).
        let comparable = |out: &Out| out.as_ref().map(|s| s.replace_size_of_dirs()).map_err(|e| *e);
        if comparable(&expected) != comparable(&got) {
            differences.push(format!("{call:?}: host {expected:?}, vfscale {got:?}"));
        }
    }
    let (mut theirs, mut mine) = (Vec::new(), Vec::new());
    host_tree(host._dir.path(), "/d", &mut theirs);
    our_tree(&ours.p, "/d", &mut mine);
    let strip = |lines: Vec<String>| lines.into_iter().map(|l| l.replace_size_of_dirs()).collect::<Vec<_>>();
    assert_eq!(strip(mine), strip(theirs), "the trees differ at the end");
    assert!(differences.is_empty(), "{} of the calls differ:\n{}", differences.len(), differences.join("\n"));
}

trait DirSize {
    fn replace_size_of_dirs(&self) -> String;
}

impl DirSize for String {
    /// A directory's line without its size.
    fn replace_size_of_dirs(&self) -> String {
        match self.find("Directory") {
            Some(_) => {
                self.split(" size ").next().unwrap().to_string()
                    + &self.split(" nlink ").nth(1).map(|n| format!(" nlink {n}")).unwrap_or_default()
            }
            None => self.clone(),
        }
    }
}

#[test]
fn chroot_and_fchdir_confine_and_move_the_walk() {
    let vfs = Vfs::default();
    let p = vfs.process(Credentials::root());
    p.mkdir("/jail", 0o755).unwrap();
    p.mkdir("/jail/inner", 0o755).unwrap();
    p.mkdir("/outside", 0o755).unwrap();
    let jail = p.open("/jail", OpenFlags::DIRECTORY, 0).unwrap();
    p.chroot("/jail").unwrap();
    // The working directory is still "/", outside the new root: `..` from
    // it is the real root, and so is what relative paths see.
    assert!(p.stat("outside").is_ok());
    assert_eq!(p.stat("/outside"), Err(Errno::ENOENT));
    p.fchdir(jail).unwrap();
    assert_eq!(p.stat("../../..").unwrap().ino, p.stat("/").unwrap().ino);
    assert_eq!(p.stat("inner").unwrap().ino, p.stat("/inner").unwrap().ino);
    // fchdir: ENOTDIR for a file, EBADF for no descriptor.
    let file = p.open("/f", OpenFlags::CREAT | OpenFlags::WRONLY, 0o644).unwrap();
    assert_eq!(p.fchdir(file), Err(Errno::ENOTDIR));
    assert_eq!(p.fchdir(999), Err(Errno::EBADF));
    // chroot needs search permission first, then CAP_SYS_CHROOT.
    p.mkdir("/locked", 0o700).unwrap();
    p.chmod("/", 0o777).unwrap();
    let user = vfs.process(Credentials::user(1000, 1000, []));
    assert_eq!(user.chroot("/jail/locked"), Err(Errno::EACCES));
    assert_eq!(user.chroot("/jail/inner"), Err(Errno::EPERM));
    assert_eq!(user.chroot("/jail/missing"), Err(Errno::ENOENT));
}

#[test]
fn resolve_cached_answers_from_the_dcache_or_eagain() {
    let cached = OpenHow { flags: OpenFlags::RDONLY, mode: 0, resolve: ResolveFlags::CACHED };
    let vfs = Vfs::default();
    let p = vfs.process(Credentials::root());
    p.mkdir("/a", 0o755).unwrap();
    p.close(p.open("/a/f", OpenFlags::CREAT | OpenFlags::WRONLY, 0o644).unwrap()).unwrap();
    // Created names are in the dcache: rcu-walk resolves them alone.
    let fd = p.openat2(vfscale::AT_FDCWD, "/a/f", &cached).unwrap();
    p.close(fd).unwrap();
    // So are directories, opened for listing.
    let dir = OpenHow { flags: OpenFlags::RDONLY | OpenFlags::DIRECTORY, ..cached };
    for path in ["/a", "/", "/a/.."] {
        let fd = p.openat2(vfscale::AT_FDCWD, path, &dir).unwrap();
        p.close(fd).unwrap();
    }
    assert_eq!(p.openat2(vfscale::AT_FDCWD, "/a/f", &dir), Err(Errno::ENOTDIR));
    // A name the dcache has not seen needs ref-walk: EAGAIN, and the
    // same open without RESOLVE_CACHED succeeds and leaves it cached.
    let rcu_off = Vfs::new(vfscale::VfsConfig { walk: vfscale::config::WalkMode::RefOnly, ..Default::default() });
    let q = rcu_off.process(Credentials::root());
    q.close(q.open("/g", OpenFlags::CREAT | OpenFlags::WRONLY, 0o644).unwrap()).unwrap();
    assert_eq!(q.openat2(vfscale::AT_FDCWD, "/g", &cached), Err(Errno::EAGAIN));
    assert!(q.openat2(vfscale::AT_FDCWD, "/g", &OpenHow { resolve: ResolveFlags::NONE, ..cached }).is_ok());
}
