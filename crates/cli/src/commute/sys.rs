//! The system calls the pairs make, written once and run on three
//! systems: a vfscale `Process` of the plain build (timed) and of the
//! audited build (the checker), and, through libc, the host kernel.
//!
//! Invariant: both implementations make the same call with the same
//! arguments and check the same outcome, so a pair's host cells time the
//! very syscalls its vfscale cells do. Paths are given relative to the
//! world's root (`d/f`) and resolved once, by [`Syscalls::path`], when a pair
//! is built, so no operation formats a path while it is timed.

use std::ffi::{CStr, CString};
use std::fmt::Display;

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
pub trait Syscalls: Send + Sync {
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
    /// `unshare(CLONE_NEWNS)`: this process goes on in a copy of its
    /// mount namespace.
    fn unshare_mounts(&self) -> Result<(), String>;
    /// Mounts a fresh in-memory file system on the directory `target` and
    /// unmounts it again (`mount(2)`, `umount2(2)`).
    fn mount_and_umount(&self, target: &CStr) -> Result<(), String>;
}

/// The one line a failed call reports.
pub fn failed(call: &str, what: impl Display, error: impl Display) -> String {
    format!("{call} {what}: {error}")
}

/// A path as an error message shows it.
pub fn shown(path: &CStr) -> std::borrow::Cow<'_, str> {
    path.to_string_lossy()
}
