//! Error numbers: the one error type of the VFS, carrying Linux `errno`
//! values.
//!
//! Invariant: an [`Errno`] is never 0. Every fallible VFS operation returns
//! [`VfsResult`], and its error is exactly the `errno` Linux would have
//! returned for the same call, so tests can compare against the kernel and
//! the FUSE front end can pass the number straight through.
//!
//! The values come from `libc`, so they are the host's numbers; on Linux
//! they are the kernel's. The names and messages are a fixed table (the
//! glibc `strerror` texts) rather than calls to `strerror`, which may return
//! a buffer shared between threads. Use [`Errno`] only for errors a system
//! call could report; an internal bug is a panic, not an errno.
//!
//! May import nothing of the crate.
//!
//! ```
//! use vfscale::errno::{Errno, VfsResult};
//!
//! fn lookup(name: &str) -> VfsResult<u64> {
//!     match name {
//!         "etc" => Ok(2),
//!         _ => Err(Errno::ENOENT),
//!     }
//! }
//!
//! let err = lookup("missing").unwrap_err();
//! assert_eq!(err.raw(), 2);
//! assert_eq!(err.name(), "ENOENT");
//! assert_eq!(err.to_string(), "ENOENT: No such file or directory");
//! assert_eq!(format!("{err:?}"), "ENOENT");
//! assert_eq!(std::io::Error::from(err).raw_os_error(), Some(2));
//! ```

use std::fmt;
use std::io;
use std::num::NonZeroI32;

/// The result of a VFS operation: a value or a Linux error number.
pub type VfsResult<T> = Result<T, Errno>;

/// A Linux error number (`errno`), such as [`Errno::ENOENT`].
///
/// Non-zero, so `VfsResult<()>` is as small as an `i32`.
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[repr(transparent)]
pub struct Errno(NonZeroI32);

impl Errno {
    /// The error with number `raw`, as found in C's `errno` (positive).
    ///
    /// Numbers outside the table below are kept as they are; their
    /// [`name`](Self::name) is `"EUNKNOWN"`.
    ///
    /// # Panics
    ///
    /// If `raw` is 0, which means "no error". In debug builds, also if
    /// `raw` is negative: the kernel's `-ENOENT` convention must be negated
    /// by the caller.
    pub const fn from_raw(raw: i32) -> Errno {
        debug_assert!(raw >= 0, "negative errno: negate kernel-style -E* values first");
        match NonZeroI32::new(raw) {
            Some(raw) => Errno(raw),
            None => panic!("errno 0 is not an error"),
        }
    }

    /// The number, as C's `errno` would hold it.
    pub const fn raw(self) -> i32 {
        self.0.get()
    }

    /// The symbolic name, such as `"ENOENT"`, or `"EUNKNOWN"` for a number
    /// not in the table.
    ///
    /// Aliases share a number and report the name Linux's headers define
    /// first: [`Errno::EWOULDBLOCK`] is `"EAGAIN"`, [`Errno::ENOTSUP`] is
    /// `"EOPNOTSUPP"`.
    pub fn name(self) -> &'static str {
        describe(self.raw()).map_or("EUNKNOWN", |(name, _)| name)
    }

    /// The `strerror` text, such as `"No such file or directory"`, or
    /// `"Unknown error"` for a number not in the table.
    pub fn message(self) -> &'static str {
        describe(self.raw()).map_or("Unknown error", |(_, message)| message)
    }
}

macro_rules! errnos {
    ($($name:ident = $value:path, $message:literal;)*) => {
        impl Errno {
            $(
                #[doc = concat!("`", stringify!($name), "`: ", $message, ".")]
                pub const $name: Errno = Errno::from_raw($value);
            )*
        }

        /// Name and message of a known number.
        fn describe(raw: i32) -> Option<(&'static str, &'static str)> {
            match raw {
                $($value => Some((stringify!($name), $message)),)*
                _ => None,
            }
        }
    };
}

errnos! {
    EPERM = libc::EPERM, "Operation not permitted";
    ENOENT = libc::ENOENT, "No such file or directory";
    ESRCH = libc::ESRCH, "No such process";
    EINTR = libc::EINTR, "Interrupted system call";
    EIO = libc::EIO, "Input/output error";
    ENXIO = libc::ENXIO, "No such device or address";
    E2BIG = libc::E2BIG, "Argument list too long";
    EBADF = libc::EBADF, "Bad file descriptor";
    EAGAIN = libc::EAGAIN, "Resource temporarily unavailable";
    ENOMEM = libc::ENOMEM, "Cannot allocate memory";
    EACCES = libc::EACCES, "Permission denied";
    EFAULT = libc::EFAULT, "Bad address";
    EBUSY = libc::EBUSY, "Device or resource busy";
    EEXIST = libc::EEXIST, "File exists";
    EXDEV = libc::EXDEV, "Invalid cross-device link";
    ENODEV = libc::ENODEV, "No such device";
    ENOTDIR = libc::ENOTDIR, "Not a directory";
    EISDIR = libc::EISDIR, "Is a directory";
    EINVAL = libc::EINVAL, "Invalid argument";
    ENFILE = libc::ENFILE, "Too many open files in system";
    EMFILE = libc::EMFILE, "Too many open files";
    ENOTTY = libc::ENOTTY, "Inappropriate ioctl for device";
    ETXTBSY = libc::ETXTBSY, "Text file busy";
    EFBIG = libc::EFBIG, "File too large";
    ENOSPC = libc::ENOSPC, "No space left on device";
    ESPIPE = libc::ESPIPE, "Illegal seek";
    EROFS = libc::EROFS, "Read-only file system";
    EMLINK = libc::EMLINK, "Too many links";
    ERANGE = libc::ERANGE, "Numerical result out of range";
    EDEADLK = libc::EDEADLK, "Resource deadlock avoided";
    ENAMETOOLONG = libc::ENAMETOOLONG, "File name too long";
    ENOLCK = libc::ENOLCK, "No locks available";
    ENOSYS = libc::ENOSYS, "Function not implemented";
    ENOTEMPTY = libc::ENOTEMPTY, "Directory not empty";
    ELOOP = libc::ELOOP, "Too many levels of symbolic links";
    ENODATA = libc::ENODATA, "No data available";
    EOVERFLOW = libc::EOVERFLOW, "Value too large for defined data type";
    EOPNOTSUPP = libc::EOPNOTSUPP, "Operation not supported";
    ETIMEDOUT = libc::ETIMEDOUT, "Connection timed out";
    ESTALE = libc::ESTALE, "Stale file handle";
}

impl Errno {
    /// `EWOULDBLOCK`: the same number as [`Errno::EAGAIN`].
    pub const EWOULDBLOCK: Errno = Errno::from_raw(libc::EWOULDBLOCK);
    /// `EDEADLOCK`: the same number as [`Errno::EDEADLK`] on Linux.
    pub const EDEADLOCK: Errno = Errno::from_raw(libc::EDEADLOCK);
    /// `ENOTSUP`: the same number as [`Errno::EOPNOTSUPP`] on Linux.
    pub const ENOTSUP: Errno = Errno::from_raw(libc::ENOTSUP);
}

impl fmt::Debug for Errno {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match describe(self.raw()) {
            Some((name, _)) => f.write_str(name),
            None => write!(f, "Errno({})", self.raw()),
        }
    }
}

/// `"ENOENT: No such file or directory"`; an unknown number prints as
/// glibc does, `"Unknown error 1234"`.
impl fmt::Display for Errno {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match describe(self.raw()) {
            Some((name, message)) => write!(f, "{name}: {message}"),
            None => write!(f, "Unknown error {}", self.raw()),
        }
    }
}

impl std::error::Error for Errno {}

/// An OS error with the same number, so [`io::Error::kind`] maps as it
/// would for a real system call.
impl From<Errno> for io::Error {
    fn from(errno: Errno) -> io::Error {
        io::Error::from_raw_os_error(errno.raw())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn constants_have_linux_numbers() {
        let expected = [
            (Errno::EPERM, 1),
            (Errno::ENOENT, 2),
            (Errno::ESRCH, 3),
            (Errno::EINTR, 4),
            (Errno::EIO, 5),
            (Errno::E2BIG, 7),
            (Errno::EBADF, 9),
            (Errno::EAGAIN, 11),
            (Errno::EACCES, 13),
            (Errno::EFAULT, 14),
            (Errno::EBUSY, 16),
            (Errno::EEXIST, 17),
            (Errno::EXDEV, 18),
            (Errno::ENODEV, 19),
            (Errno::ENOTDIR, 20),
            (Errno::EISDIR, 21),
            (Errno::EINVAL, 22),
            (Errno::EFBIG, 27),
            (Errno::ENOSPC, 28),
            (Errno::ESPIPE, 29),
            (Errno::EROFS, 30),
            (Errno::EMLINK, 31),
            (Errno::EDEADLK, 35),
            (Errno::ENAMETOOLONG, 36),
            (Errno::ENOLCK, 37),
            (Errno::ENOSYS, 38),
            (Errno::ENOTEMPTY, 39),
            (Errno::ELOOP, 40),
            (Errno::EOVERFLOW, 75),
            (Errno::ETIMEDOUT, 110),
        ];
        for (errno, raw) in expected {
            assert_eq!(errno.raw(), raw, "{errno:?}");
        }
    }

    #[test]
    fn aliases_share_numbers_and_names() {
        assert_eq!(Errno::EWOULDBLOCK, Errno::EAGAIN);
        assert_eq!(Errno::EWOULDBLOCK.name(), "EAGAIN");
        assert_eq!(Errno::EDEADLOCK, Errno::EDEADLK);
        assert_eq!(Errno::ENOTSUP, Errno::EOPNOTSUPP);
        assert_eq!(Errno::ENOTSUP.name(), "EOPNOTSUPP");
    }

    #[test]
    fn from_raw_round_trips() {
        for raw in 1..200 {
            assert_eq!(Errno::from_raw(raw).raw(), raw);
        }
        assert_eq!(Errno::from_raw(libc::ENOENT), Errno::ENOENT);
    }

    #[test]
    #[should_panic(expected = "errno 0 is not an error")]
    fn from_raw_zero_panics() {
        Errno::from_raw(0);
    }

    #[test]
    #[cfg(debug_assertions)]
    #[should_panic(expected = "negative errno")]
    fn from_raw_negative_panics_in_debug() {
        Errno::from_raw(-libc::ENOENT);
    }

    #[test]
    fn name_of_known_and_unknown() {
        assert_eq!(Errno::ENOENT.name(), "ENOENT");
        assert_eq!(Errno::ENAMETOOLONG.name(), "ENAMETOOLONG");
        assert_eq!(Errno::E2BIG.name(), "E2BIG");
        assert_eq!(Errno::from_raw(4000).name(), "EUNKNOWN");
    }

    #[test]
    fn message_of_known_and_unknown() {
        assert_eq!(Errno::EACCES.message(), "Permission denied");
        assert_eq!(Errno::ELOOP.message(), "Too many levels of symbolic links");
        assert_eq!(Errno::from_raw(4000).message(), "Unknown error");
    }

    #[test]
    fn display_is_name_and_strerror() {
        assert_eq!(Errno::ENOENT.to_string(), "ENOENT: No such file or directory");
        assert_eq!(Errno::EXDEV.to_string(), "EXDEV: Invalid cross-device link");
        assert_eq!(Errno::from_raw(4000).to_string(), "Unknown error 4000");
    }

    #[test]
    fn debug_is_name() {
        assert_eq!(format!("{:?}", Errno::ENOTEMPTY), "ENOTEMPTY");
        assert_eq!(format!("{:?}", Err::<(), _>(Errno::EBUSY)), "Err(EBUSY)");
        assert_eq!(format!("{:?}", Errno::from_raw(4000)), "Errno(4000)");
    }

    #[test]
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    fn messages_match_glibc_strerror() {
        // std formats OS errors with the thread-safe strerror_r.
        for raw in 1..200 {
            let errno = Errno::from_raw(raw);
            if errno.name() == "EUNKNOWN" {
                continue;
            }
            let io = io::Error::from_raw_os_error(raw).to_string();
            assert!(io.starts_with(errno.message()), "{errno:?}: ours {:?}, libc {io:?}", errno.message());
        }
    }

    #[test]
    fn is_std_error() {
        let boxed: Box<dyn std::error::Error + Send + Sync> = Box::new(Errno::EIO);
        assert_eq!(boxed.to_string(), "EIO: Input/output error");
    }

    #[test]
    fn into_io_error_keeps_number_and_kind() {
        let err = io::Error::from(Errno::ENOENT);
        assert_eq!(err.raw_os_error(), Some(libc::ENOENT));
        assert_eq!(err.kind(), io::ErrorKind::NotFound);
        assert_eq!(io::Error::from(Errno::EACCES).kind(), io::ErrorKind::PermissionDenied);
    }

    #[test]
    fn vfs_result_of_unit_is_word_sized() {
        assert_eq!(std::mem::size_of::<VfsResult<()>>(), std::mem::size_of::<i32>());
    }
}
