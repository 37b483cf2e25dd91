//! [`Syscalls`] on the host kernel: each call is the libc system call of the
//! same name on real tmpfs, sysfs or /proc.
//!
//! A host "process" shares this process's file table until the thread that
//! runs it calls [`own_file_table`]: the pairs that need their own file
//! tables (POSIX lock owners, descriptor allocation) say so, and the
//! measurement unshares in each worker thread before its first call.

use super::sys::{failed, names_digest, stat_digest, Call, Fd, Outcome, Owner, Syscalls};
use crate::host::{check, cstring, open_raw, posix};
use std::ffi::{CStr, CString, OsStr};
use std::io;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// Calls on the host, paths under `root`; `keep` holds a scratch
/// directory alive while any process of it is.
pub struct HostSyscalls {
    root: PathBuf,
    _keep: Option<Arc<dyn std::any::Any + Send + Sync>>,
}

impl HostSyscalls {
    /// A process whose relative paths start at `root`.
    pub fn new(root: PathBuf, keep: Option<Arc<dyn std::any::Any + Send + Sync>>) -> HostSyscalls {
        HostSyscalls { root, _keep: keep }
    }
}

/// Gives the calling thread a file table of its own (a copy of the one it
/// shared), as a separate process has: `unshare(CLONE_FILES)`.
pub fn own_file_table() -> Result<(), String> {
    // SAFETY: unshare acts on the calling thread only; it copies the file
    // table, which nothing else holds a pointer into.
    check(unsafe { libc::unshare(libc::CLONE_FILES) }).map(drop).map_err(|e| failed("unshare", "CLONE_FILES", e))
}

fn shown(path: &CStr) -> std::borrow::Cow<'_, str> {
    path.to_string_lossy()
}

/// The byte count of a read or write, or its `errno`.
fn check_len(rc: isize) -> io::Result<usize> {
    usize::try_from(rc).map_err(|_| io::Error::last_os_error())
}

fn stat_size(rc: libc::c_int, st: &libc::stat) -> io::Result<u64> {
    check(rc).map(|_| st.st_size as u64)
}

fn stat_path(path: &CStr) -> io::Result<u64> {
    // SAFETY: stat is plain data; zeroed is a valid value.
    let mut st: libc::stat = unsafe { std::mem::zeroed() };
    // SAFETY: `path` is a C string and `st` a buffer we own.
    let rc = unsafe { libc::stat(path.as_ptr(), &mut st) };
    stat_size(rc, &st)
}

impl Syscalls for HostSyscalls {
    fn path(&self, rel: &str) -> CString {
        cstring(&self.root.join(rel))
    }

    fn stat(&self, path: &CStr) -> Result<u64, String> {
        stat_path(path).map_err(|e| failed("stat", shown(path), e))
    }

    fn missing(&self, path: &CStr) -> Result<(), String> {
        match stat_path(path) {
            Err(e) if e.raw_os_error() == Some(libc::ENOENT) => Ok(()),
            Ok(_) => Err(failed("stat", shown(path), "exists, but should be missing")),
            Err(e) => Err(failed("stat", shown(path), e)),
        }
    }

    fn fstat(&self, fd: Fd) -> Result<u64, String> {
        // SAFETY: stat is plain data; zeroed is a valid value.
        let mut st: libc::stat = unsafe { std::mem::zeroed() };
        // SAFETY: `st` is a buffer we own; a bad fd is EBADF.
        let rc = unsafe { libc::fstat(fd, &mut st) };
        stat_size(rc, &st).map_err(|e| failed("fstat", fd, e))
    }

    fn open(&self, path: &CStr, flags: i32, mode: u32) -> Result<Fd, String> {
        open_raw(path, flags, mode).map_err(|e| failed("open", shown(path), e))
    }

    fn close(&self, fd: Fd) -> Result<(), String> {
        // SAFETY: closing a descriptor has no memory effects; the pair owns `fd`.
        check(unsafe { libc::close(fd) }).map(drop).map_err(|e| failed("close", fd, e))
    }

    fn read(&self, fd: Fd, buf: &mut [u8]) -> Result<usize, String> {
        // SAFETY: `buf` is writable for its length.
        check_len(unsafe { libc::read(fd, buf.as_mut_ptr().cast(), buf.len()) }).map_err(|e| failed("read", fd, e))
    }

    fn pread(&self, fd: Fd, buf: &mut [u8], offset: u64) -> Result<usize, String> {
        // SAFETY: `buf` is writable for its length.
        let rc = unsafe { libc::pread(fd, buf.as_mut_ptr().cast(), buf.len(), offset as libc::off_t) };
        check_len(rc).map_err(|e| failed("pread", fd, e))
    }

    fn pwrite(&self, fd: Fd, buf: &[u8], offset: u64) -> Result<usize, String> {
        // SAFETY: `buf` is readable for its length.
        let rc = unsafe { libc::pwrite(fd, buf.as_ptr().cast(), buf.len(), offset as libc::off_t) };
        check_len(rc).map_err(|e| failed("pwrite", fd, e))
    }

    fn lseek(&self, fd: Fd, offset: u64) -> Result<u64, String> {
        // SAFETY: lseek takes no pointers.
        let rc = unsafe { libc::lseek(fd, offset as libc::off_t, libc::SEEK_SET) };
        u64::try_from(rc).map_err(|_| failed("lseek", fd, io::Error::last_os_error()))
    }

    fn mkdir(&self, path: &CStr, mode: u32) -> Result<(), String> {
        // SAFETY: `path` is a C string.
        check(unsafe { libc::mkdir(path.as_ptr(), mode) }).map(drop).map_err(|e| failed("mkdir", shown(path), e))
    }

    fn unlink(&self, path: &CStr) -> Result<(), String> {
        // SAFETY: `path` is a C string.
        check(unsafe { libc::unlink(path.as_ptr()) }).map(drop).map_err(|e| failed("unlink", shown(path), e))
    }

    fn rename(&self, from: &CStr, to: &CStr) -> Result<(), String> {
        // SAFETY: both paths are C strings.
        check(unsafe { libc::rename(from.as_ptr(), to.as_ptr()) })
            .map(drop)
            .map_err(|e| failed("rename", shown(from), e))
    }

    fn chmod(&self, path: &CStr, mode: u32) -> Result<(), String> {
        // SAFETY: `path` is a C string.
        check(unsafe { libc::chmod(path.as_ptr(), mode) }).map(drop).map_err(|e| failed("chmod", shown(path), e))
    }

    fn atime_ahead(&self, path: &CStr, ahead: i64) -> Result<(), String> {
        // SAFETY: timespec is plain data; zeroed is a valid value.
        let mut now: libc::timespec = unsafe { std::mem::zeroed() };
        // SAFETY: `now` is a buffer we own.
        unsafe { libc::clock_gettime(libc::CLOCK_REALTIME, &mut now) };
        let atime = libc::timespec { tv_sec: now.tv_sec + ahead as libc::time_t, tv_nsec: 0 };
        let times = [atime, libc::timespec { tv_sec: 0, tv_nsec: libc::UTIME_OMIT }];
        // SAFETY: `path` is a C string and `times` two timespecs.
        check(unsafe { libc::utimensat(libc::AT_FDCWD, path.as_ptr(), times.as_ptr(), 0) })
            .map(drop)
            .map_err(|e| failed("utimensat", shown(path), e))
    }

    fn readdir(&self, path: &CStr) -> Result<usize, String> {
        let dir = Path::new(OsStr::from_bytes(path.to_bytes()));
        let entries = std::fs::read_dir(dir).map_err(|e| failed("readdir", shown(path), e))?;
        entries
            .map(|e| e.map(drop))
            .collect::<io::Result<Vec<()>>>()
            .map(|v| v.len())
            .map_err(|e| failed("readdir", shown(path), e))
    }

    fn flock(&self, fd: Fd, op: i32) -> Result<(), String> {
        // SAFETY: flock takes no pointers.
        check(unsafe { libc::flock(fd, op) }).map(drop).map_err(|e| failed("flock", fd, e))
    }

    fn record_lock(&self, fd: Fd, owner: Owner, l_type: i16, start: i64, len: i64) -> Result<(), String> {
        let (cmd, name) = match owner {
            Owner::Process => (libc::F_SETLK, "F_SETLK"),
            Owner::Description => (libc::F_OFD_SETLK, "F_OFD_SETLK"),
        };
        posix(fd, cmd, l_type.into(), start as usize, len as usize).map_err(|e| failed(name, fd, e))
    }

    fn setlease(&self, fd: Fd, arg: i32) -> Result<(), String> {
        // SAFETY: fcntl with integer arguments.
        check(unsafe { libc::fcntl(fd, libc::F_SETLEASE, arg) }).map(drop).map_err(|e| failed("F_SETLEASE", fd, e))
    }

    fn unshare_mounts(&self) -> Result<(), String> {
        // SAFETY: unshare acts on the calling thread's own namespaces.
        check(unsafe { libc::unshare(libc::CLONE_NEWNS) }).map(drop).map_err(|e| failed("unshare", "CLONE_NEWNS", e))
    }

    fn mount_and_umount(&self, target: &CStr) -> Result<(), String> {
        // SAFETY: every pointer is a C string or null, as mount(2) takes
        // them; tmpfs needs no data.
        let mounted = unsafe { libc::mount(c"none".as_ptr(), target.as_ptr(), c"tmpfs".as_ptr(), 0, std::ptr::null()) };
        check(mounted).map_err(|e| failed("mount", shown(target), e))?;
        // SAFETY: `target` is a C string.
        check(unsafe { libc::umount2(target.as_ptr(), 0) }).map(drop).map_err(|e| failed("umount2", shown(target), e))
    }
    fn call(&self, call: &Call) -> Outcome {
        host_call(call).map_err(|e| e.raw_os_error().unwrap_or(libc::EIO))
    }
}

/// The host side of [`Syscalls::call`].
fn host_call(call: &Call) -> io::Result<u64> {
    let done = |rc: libc::c_int| check(rc).map(|_| 0);
    match call {
        Call::Stat(_) | Call::Fstatat(..) | Call::Fstat(_) => {
            stat_call(call).expect("a stat call").map(|st| digest_of(&st))
        }
        Call::OpenClose(path, flags) => {
            let fd = open_raw(path, *flags, 0o644)?;
            // SAFETY: C strings, buffers of ours sized as passed, the case's descriptors.
            done(unsafe { libc::close(fd) })
        }
        Call::OpenatClose(dir, name, flags) => {
            // SAFETY: C strings, buffers of ours sized as passed, the case's descriptors.
            let fd = check(unsafe { libc::openat(*dir, name.as_ptr(), *flags | libc::O_CLOEXEC, 0o644) })?;
            // SAFETY: C strings, buffers of ours sized as passed, the case's descriptors.
            done(unsafe { libc::close(fd) })
        }
        // SAFETY: C strings, buffers of ours sized as passed, the case's descriptors.
        Call::Unlink(path) => done(unsafe { libc::unlink(path.as_ptr()) }),
        // SAFETY: C strings, buffers of ours sized as passed, the case's descriptors.
        Call::Unlinkat(dir, name, flags) => done(unsafe { libc::unlinkat(*dir, name.as_ptr(), *flags) }),
        // SAFETY: C strings, buffers of ours sized as passed, the case's descriptors.
        Call::Mkdir(path) => done(unsafe { libc::mkdir(path.as_ptr(), 0o755) }),
        // SAFETY: C strings, buffers of ours sized as passed, the case's descriptors.
        Call::Mkdirat(dir, name) => done(unsafe { libc::mkdirat(*dir, name.as_ptr(), 0o755) }),
        // SAFETY: C strings, buffers of ours sized as passed, the case's descriptors.
        Call::Rmdir(path) => done(unsafe { libc::rmdir(path.as_ptr()) }),
        // SAFETY: C strings, buffers of ours sized as passed, the case's descriptors.
        Call::Rename(from, to) => done(unsafe { libc::rename(from.as_ptr(), to.as_ptr()) }),
        // SAFETY: C strings, buffers of ours sized as passed, the case's descriptors.
        Call::Link(from, to) => done(unsafe { libc::link(from.as_ptr(), to.as_ptr()) }),
        // SAFETY: C strings, buffers of ours sized as passed, the case's descriptors.
        Call::Chmod(path, mode) => done(unsafe { libc::chmod(path.as_ptr(), *mode) }),
        Call::Readdir(path) => {
            let dir = Path::new(OsStr::from_bytes(path.to_bytes()));
            let names = std::fs::read_dir(dir)?
                .map(|entry| entry.map(|e| e.file_name().as_bytes().to_vec()))
                .collect::<io::Result<Vec<_>>>()?;
            Ok(names_digest(names))
        }
        Call::Setxattr(path, name, value) => {
            // SAFETY: C strings, buffers of ours sized as passed, the case's descriptors.
            done(unsafe { libc::setxattr(path.as_ptr(), name.as_ptr(), value.as_ptr().cast(), value.len(), 0) })
        }
        Call::Getxattr(path, name) => {
            let mut buf = [0u8; 64];
            // SAFETY: C strings, buffers of ours sized as passed, the case's descriptors.
            let n = unsafe { libc::getxattr(path.as_ptr(), name.as_ptr(), buf.as_mut_ptr().cast(), buf.len()) };
            Ok(super::sys::digest([&buf[..check_len(n)?]]))
        }
        Call::Pread(fd, offset, len) => {
            let mut buf = vec![0u8; *len];
            // SAFETY: C strings, buffers of ours sized as passed, the case's descriptors.
            let n = unsafe { libc::pread(*fd, buf.as_mut_ptr().cast(), buf.len(), *offset as libc::off_t) };
            Ok(super::sys::digest([&buf[..check_len(n)?]]))
        }
        Call::Pwrite(fd, offset, len, byte) => {
            let buf = vec![*byte; *len];
            // SAFETY: C strings, buffers of ours sized as passed, the case's descriptors.
            let n = unsafe { libc::pwrite(*fd, buf.as_ptr().cast(), buf.len(), *offset as libc::off_t) };
            check_len(n).map(|n| n as u64)
        }
        // SAFETY: C strings, buffers of ours sized as passed, the case's descriptors.
        Call::Ftruncate(fd, len) => done(unsafe { libc::ftruncate(*fd, *len as libc::off_t) }),
        Call::Fallocate(fd, offset, len) => {
            // SAFETY: C strings, buffers of ours sized as passed, the case's descriptors.
            done(unsafe { libc::fallocate(*fd, 0, *offset as libc::off_t, *len as libc::off_t) })
        }
        Call::Lseek(fd, offset) => {
            // SAFETY: C strings, buffers of ours sized as passed, the case's descriptors.
            let at = unsafe { libc::lseek(*fd, *offset as libc::off_t, libc::SEEK_SET) };
            u64::try_from(at).map_err(|_| io::Error::last_os_error())
        }
        // SAFETY: C strings, buffers of ours sized as passed, the case's descriptors.
        Call::Flock(fd, op) => done(unsafe { libc::flock(*fd, *op) }),
        Call::RecordLock(fd, owner, l_type, start, len) => {
            let cmd = match owner {
                Owner::Process => libc::F_SETLK,
                Owner::Description => libc::F_OFD_SETLK,
            };
            posix(*fd, cmd, (*l_type).into(), *start as usize, *len as usize).map(|()| 0)
        }
    }
}

/// A `stat` buffer to fill.
/// The buffer a stat-like call (`stat`, `fstatat`, `fstat`) fills, or
/// `None` for any other call.
fn stat_call(call: &Call) -> Option<io::Result<libc::stat>> {
    let mut st = zeroed_stat();
    let rc = match call {
        // SAFETY: C strings, a buffer of ours, the case's descriptors.
        Call::Stat(path) => unsafe { libc::stat(path.as_ptr(), &mut st) },
        // SAFETY: as above.
        Call::Fstatat(dir, name) => unsafe { libc::fstatat(*dir, name.as_ptr(), &mut st, 0) },
        // SAFETY: as above.
        Call::Fstat(fd) => unsafe { libc::fstat(*fd, &mut st) },
        _ => return None,
    };
    Some(check(rc).map(|_| st))
}

/// The access, modification and change times a stat-like call returns
/// on the host now, as (seconds, nanoseconds); `None` for another call or
/// a call that fails.
pub fn stat_times(call: &Call) -> Option<[(i64, i64); 3]> {
    let st = stat_call(call)?.ok()?;
    Some([(st.st_atime, st.st_atime_nsec), (st.st_mtime, st.st_mtime_nsec), (st.st_ctime, st.st_ctime_nsec)])
}

/// Waits until the host's coarse clock, which stamps inodes that no
/// `stat` asked about since their last change, has passed `t`: a change
/// from then on gets a time other than `t`.
pub fn wait_for_coarse_clock_past(t: (i64, i64)) {
    loop {
        // SAFETY: timespec is plain data; zeroed is a valid value.
        let mut now: libc::timespec = unsafe { std::mem::zeroed() };
        // SAFETY: `now` is ours.
        unsafe { libc::clock_gettime(libc::CLOCK_REALTIME_COARSE, &mut now) };
        if (now.tv_sec, now.tv_nsec) > t {
            return;
        }
        std::thread::sleep(std::time::Duration::from_micros(200));
    }
}

fn zeroed_stat() -> libc::stat {
    // SAFETY: stat is plain data; zeroed is a valid value.
    unsafe { std::mem::zeroed() }
}

/// A `stat` buffer's [`stat_digest`].
fn digest_of(st: &libc::stat) -> u64 {
    #[allow(clippy::useless_conversion)] // nlink_t's width differs between targets
    stat_digest(st.st_mode, st.st_size as u64, u64::from(st.st_nlink))
}
