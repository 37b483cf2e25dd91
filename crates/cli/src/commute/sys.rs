//! The system calls the pairs make, written once and run twice: on a
//! vfscale [`Process`] and, through libc, on the host kernel.
//!
//! Invariant: both implementations make the same call with the same
//! arguments and check the same outcome, so a pair's host cells time the
//! very syscalls its vfscale cells do. Paths are given relative to the
//! world's root (`d/f`) and resolved once, by [`Sys::path`], when a pair
//! is built, so no operation formats a path while it is timed.

use std::ffi::{CStr, CString};
use std::fmt::Display;
use std::sync::Arc;
use vfscale::locks::Flock;
use vfscale::{Errno, OpenFlags, Process, SetTime, Timespec, Whence};

/// A file descriptor of either system.
pub type Fd = i32;

/// Who owns a record lock: the process (`F_SETLK`) or the open file
/// description (`F_OFD_SETLK`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Owner {
    /// A POSIX lock of the calling process.
    Process,
    /// An OFD lock of the descriptor's open file description.
    Description,
}

/// One process of a system: its file table and lock owner, and the calls.
/// Every call fails with one line naming the call and its argument.
pub trait Sys: Send + Sync {
    /// `rel` (`d/f`, relative to the world's root) as this system names it.
    fn path(&self, rel: &str) -> CString;
    /// `stat(2)`: the file's size.
    fn stat(&self, path: &CStr) -> Result<u64, String>;
    /// `stat(2)` of a name that must not exist (fails unless ENOENT).
    fn missing(&self, path: &CStr) -> Result<(), String>;
    /// `fstat(2)`: the file's size.
    fn fstat(&self, fd: Fd) -> Result<u64, String>;
    /// `open(2)` with Linux flags.
    fn open(&self, path: &CStr, flags: i32, mode: u32) -> Result<Fd, String>;
    /// `close(2)`.
    fn close(&self, fd: Fd) -> Result<(), String>;
    /// `read(2)`: bytes read.
    fn read(&self, fd: Fd, buf: &mut [u8]) -> Result<usize, String>;
    /// `pread(2)`: bytes read.
    fn pread(&self, fd: Fd, buf: &mut [u8], offset: u64) -> Result<usize, String>;
    /// `pwrite(2)`: bytes written.
    fn pwrite(&self, fd: Fd, buf: &[u8], offset: u64) -> Result<usize, String>;
    /// `lseek(fd, offset, SEEK_SET)`.
    fn lseek(&self, fd: Fd, offset: u64) -> Result<u64, String>;
    /// `mkdir(2)`.
    fn mkdir(&self, path: &CStr, mode: u32) -> Result<(), String>;
    /// `unlink(2)`.
    fn unlink(&self, path: &CStr) -> Result<(), String>;
    /// `rename(2)`.
    fn rename(&self, from: &CStr, to: &CStr) -> Result<(), String>;
    /// `chmod(2)`.
    fn chmod(&self, path: &CStr, mode: u32) -> Result<(), String>;
    /// `utimensat(2)` setting only the access time, to `ahead` seconds
    /// from now.
    fn atime_ahead(&self, path: &CStr, ahead: i64) -> Result<(), String>;
    /// Opens the directory, reads every entry and closes it: the entries.
    fn readdir(&self, path: &CStr) -> Result<usize, String>;
    /// `flock(2)`.
    fn flock(&self, fd: Fd, op: i32) -> Result<(), String>;
    /// `F_SETLK` or `F_OFD_SETLK` of `l_type` on `len` bytes from `start`,
    /// never waiting.
    fn record_lock(&self, fd: Fd, owner: Owner, l_type: i16, start: i64, len: i64) -> Result<(), String>;
    /// `fcntl(fd, F_SETLEASE, arg)`.
    fn setlease(&self, fd: Fd, arg: i32) -> Result<(), String>;
}

/// The one line a failed call reports.
pub fn failed(call: &str, what: impl Display, error: impl Display) -> String {
    format!("{call} {what}: {error}")
}

fn shown(path: &CStr) -> std::borrow::Cow<'_, str> {
    path.to_string_lossy()
}

/// A vfscale process; `keep` holds what its file system needs alive (a
/// kernfs tree, a task table).
pub struct VfsSys {
    process: Process,
    _keep: Option<Arc<dyn std::any::Any + Send + Sync>>,
}

impl VfsSys {
    /// A process of `process`'s file system that keeps `keep` alive.
    pub fn new(process: Process, keep: Option<Arc<dyn std::any::Any + Send + Sync>>) -> VfsSys {
        VfsSys { process, _keep: keep }
    }
}

impl Sys for VfsSys {
    fn path(&self, rel: &str) -> CString {
        CString::new(format!("/{rel}")).expect("pair paths have no NUL byte")
    }

    fn stat(&self, path: &CStr) -> Result<u64, String> {
        self.process.stat(path.to_bytes()).map(|s| s.size).map_err(|e| failed("stat", shown(path), e))
    }

    fn missing(&self, path: &CStr) -> Result<(), String> {
        match self.process.stat(path.to_bytes()) {
            Err(Errno::ENOENT) => Ok(()),
            Ok(_) => Err(failed("stat", shown(path), "exists, but should be missing")),
            Err(e) => Err(failed("stat", shown(path), e)),
        }
    }

    fn fstat(&self, fd: Fd) -> Result<u64, String> {
        self.process.fstat(fd).map(|s| s.size).map_err(|e| failed("fstat", fd, e))
    }

    fn open(&self, path: &CStr, flags: i32, mode: u32) -> Result<Fd, String> {
        self.process.open(path.to_bytes(), OpenFlags(flags), mode).map_err(|e| failed("open", shown(path), e))
    }

    fn close(&self, fd: Fd) -> Result<(), String> {
        self.process.close(fd).map_err(|e| failed("close", fd, e))
    }

    fn read(&self, fd: Fd, buf: &mut [u8]) -> Result<usize, String> {
        self.process.read(fd, buf).map_err(|e| failed("read", fd, e))
    }

    fn pread(&self, fd: Fd, buf: &mut [u8], offset: u64) -> Result<usize, String> {
        self.process.pread(fd, buf, offset as i64).map_err(|e| failed("pread", fd, e))
    }

    fn pwrite(&self, fd: Fd, buf: &[u8], offset: u64) -> Result<usize, String> {
        self.process.pwrite(fd, buf, offset as i64).map_err(|e| failed("pwrite", fd, e))
    }

    fn lseek(&self, fd: Fd, offset: u64) -> Result<u64, String> {
        self.process.lseek(fd, offset as i64, Whence::Set).map_err(|e| failed("lseek", fd, e))
    }

    fn mkdir(&self, path: &CStr, mode: u32) -> Result<(), String> {
        self.process.mkdir(path.to_bytes(), mode).map_err(|e| failed("mkdir", shown(path), e))
    }

    fn unlink(&self, path: &CStr) -> Result<(), String> {
        self.process.unlink(path.to_bytes()).map_err(|e| failed("unlink", shown(path), e))
    }

    fn rename(&self, from: &CStr, to: &CStr) -> Result<(), String> {
        self.process.rename(from.to_bytes(), to.to_bytes()).map_err(|e| failed("rename", shown(from), e))
    }

    fn chmod(&self, path: &CStr, mode: u32) -> Result<(), String> {
        self.process.chmod(path.to_bytes(), mode).map_err(|e| failed("chmod", shown(path), e))
    }

    fn atime_ahead(&self, path: &CStr, ahead: i64) -> Result<(), String> {
        let mut at = Timespec::now();
        at.sec += ahead;
        self.process
            .utimens(path.to_bytes(), SetTime::At(at), SetTime::Omit)
            .map_err(|e| failed("utimensat", shown(path), e))
    }

    fn readdir(&self, path: &CStr) -> Result<usize, String> {
        self.process
            .list_dir(path.to_bytes())
            .map(|entries| entries.len())
            .map_err(|e| failed("readdir", shown(path), e))
    }

    fn flock(&self, fd: Fd, op: i32) -> Result<(), String> {
        self.process.flock(fd, op).map_err(|e| failed("flock", fd, e))
    }

    fn record_lock(&self, fd: Fd, owner: Owner, l_type: i16, start: i64, len: i64) -> Result<(), String> {
        let lock = Flock::new(l_type, start, len);
        match owner {
            Owner::Process => self.process.fcntl_setlk(fd, &lock).map_err(|e| failed("F_SETLK", fd, e)),
            Owner::Description => self.process.ofd_setlk(fd, &lock).map_err(|e| failed("F_OFD_SETLK", fd, e)),
        }
    }

    fn setlease(&self, fd: Fd, arg: i32) -> Result<(), String> {
        self.process.setlease(fd, arg).map_err(|e| failed("F_SETLEASE", fd, e))
    }
}
