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
    /// Makes a generated call (`commute --generate`).
    fn call(&self, call: &Call) -> Outcome;
}

/// The one line a failed call reports.
pub fn failed(call: &str, what: impl Display, error: impl Display) -> String {
    format!("{call} {what}: {error}")
}

/// A path as an error message shows it.
pub fn shown(path: &CStr) -> std::borrow::Cow<'_, str> {
    path.to_string_lossy()
}

/// What a generated call returned: a digest of its values (sizes, link
/// counts, bytes read, names listed), or its `errno`.
pub type Outcome = Result<u64, i32>;

/// One system call of `commute --generate`, its paths resolved by
/// [`Syscalls::path`] and its descriptors open. Each system runs it with
/// [`Syscalls::call`] and reports an [`Outcome`], so the host's results in
/// two orders can be compared value for value, and vfscale's errno against
/// the host's.
#[derive(Debug, Clone)]
pub enum Call {
    /// `stat(2)`: type, permission bits, size and link count.
    Stat(CString),
    /// `open(2)` with these flags (mode 0644), then `close(2)`.
    OpenClose(CString, i32),
    /// `unlink(2)`.
    Unlink(CString),
    /// `mkdir(2)`, mode 0755.
    Mkdir(CString),
    /// `rmdir(2)`.
    Rmdir(CString),
    /// `rename(2)`.
    Rename(CString, CString),
    /// `link(2)`.
    Link(CString, CString),
    /// `chmod(2)`.
    Chmod(CString, u32),
    /// Opens the directory, lists it, closes it: the names, sorted.
    Readdir(CString),
    /// `setxattr(2)` of this name and value, flags 0.
    Setxattr(CString, &'static CStr, &'static [u8]),
    /// `getxattr(2)`: the value.
    Getxattr(CString, &'static CStr),
    /// `fstatat(2)` of a name in the directory `Fd`, as [`Call::Stat`].
    Fstatat(Fd, CString),
    /// `openat(2)` of a name in the directory `Fd`, then `close(2)`.
    OpenatClose(Fd, CString, i32),
    /// `unlinkat(2)` with these flags.
    Unlinkat(Fd, CString, i32),
    /// `mkdirat(2)`, mode 0755.
    Mkdirat(Fd, CString),
    /// `fstat(2)`, as [`Call::Stat`].
    Fstat(Fd),
    /// `pread(2)` of `len` bytes at an offset: the bytes.
    Pread(Fd, u64, usize),
    /// `pwrite(2)` of `len` copies of a byte at an offset.
    Pwrite(Fd, u64, usize, u8),
    /// `ftruncate(2)`.
    Ftruncate(Fd, u64),
    /// `fallocate(2)`, mode 0, offset and length.
    Fallocate(Fd, u64, u64),
    /// `lseek(fd, offset, SEEK_SET)`.
    Lseek(Fd, u64),
    /// `flock(2)` with this operation.
    Flock(Fd, i32),
    /// `F_SETLK` or `F_OFD_SETLK` of a type on a range (start, length).
    RecordLock(Fd, Owner, i16, i64, i64),
}

/// FNV-1a over `parts`, each preceded by its length: the digest an
/// [`Outcome`] carries.
pub fn digest<'a>(parts: impl IntoIterator<Item = &'a [u8]>) -> u64 {
    let mut hash = 0xcbf2_9ce4_8422_2325u64;
    let mut eat = |bytes: &[u8]| {
        for &byte in bytes {
            hash = (hash ^ u64::from(byte)).wrapping_mul(0x0100_0000_01b3);
        }
    };
    for part in parts {
        eat(&(part.len() as u64).to_le_bytes());
        eat(part);
    }
    hash
}

/// The digest of a `stat` result: file type and permission bits, size and
/// link count (times and inode numbers are left out: see
/// `commute::generate`).
pub fn stat_digest(mode: u32, size: u64, nlink: u64) -> u64 {
    digest([&mode.to_le_bytes()[..], &size.to_le_bytes(), &nlink.to_le_bytes()])
}

/// The digest of a directory listing: its names, sorted.
pub fn names_digest(mut names: Vec<Vec<u8>>) -> u64 {
    names.sort();
    digest(names.iter().map(Vec::as_slice))
}
