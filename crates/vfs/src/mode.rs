//! `st_mode` bits: file type in the top bits, then set-id and sticky bits,
//! then owner, group and other permissions.
//!
//! A mode is a plain `u32` laid out exactly as Linux's `st_mode`, so it can
//! be handed to `stat` callers and FUSE unchanged. The file type, once an
//! inode is created, never changes; only the [`S_IALLUGO`] bits may.
//! The values are the same octal constants on every Unix, so they are
//! written out here rather than taken from `libc`, whose `mode_t` width
//! differs between platforms.
//!
//! May import nothing of the crate.
//!
//! ```
//! use vfscale::mode::{self, S_IFDIR, S_ISVTX};
//!
//! let tmp = S_IFDIR | S_ISVTX | 0o777;
//! assert!(mode::is_dir(tmp));
//! assert_eq!(tmp & mode::S_IFMT, S_IFDIR);
//! assert_eq!(tmp & mode::S_IALLUGO, 0o1777);
//! ```

/// Mask of the file-type bits.
pub const S_IFMT: u32 = 0o170000;
/// Socket.
pub const S_IFSOCK: u32 = 0o140000;
/// Symbolic link.
pub const S_IFLNK: u32 = 0o120000;
/// Regular file.
pub const S_IFREG: u32 = 0o100000;
/// Block device.
pub const S_IFBLK: u32 = 0o060000;
/// Directory.
pub const S_IFDIR: u32 = 0o040000;
/// Character device.
pub const S_IFCHR: u32 = 0o020000;
/// FIFO.
pub const S_IFIFO: u32 = 0o010000;

/// Set user id on execution.
pub const S_ISUID: u32 = 0o4000;
/// Set group id on execution; on a directory, new entries inherit its group.
pub const S_ISGID: u32 = 0o2000;
/// Sticky: in a directory, only owners may delete or rename entries.
pub const S_ISVTX: u32 = 0o1000;

/// Owner read, write and execute.
pub const S_IRWXU: u32 = 0o700;
/// Group read, write and execute.
pub const S_IRWXG: u32 = 0o070;
/// Other read, write and execute.
pub const S_IRWXO: u32 = 0o007;
/// Execute for anyone (`S_IXUSR | S_IXGRP | S_IXOTH`).
pub const S_IXUGO: u32 = 0o111;
/// Group execute.
pub const S_IXGRP: u32 = 0o010;
/// Every bit `chmod` may change: set-id, sticky and permissions.
pub const S_IALLUGO: u32 = 0o7777;

/// Whether `mode` is a directory.
pub const fn is_dir(mode: u32) -> bool {
    mode & S_IFMT == S_IFDIR
}

/// Whether `mode` is a regular file.
pub const fn is_reg(mode: u32) -> bool {
    mode & S_IFMT == S_IFREG
}

/// Whether `mode` is a symbolic link.
pub const fn is_lnk(mode: u32) -> bool {
    mode & S_IFMT == S_IFLNK
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    // libc's mode_t is u32 on Linux but u16 elsewhere, so the widening is needed off Linux.
    #[allow(clippy::useless_conversion)]
    fn constants_match_libc() {
        let pairs = [
            (S_IFMT, libc::S_IFMT),
            (S_IFSOCK, libc::S_IFSOCK),
            (S_IFLNK, libc::S_IFLNK),
            (S_IFREG, libc::S_IFREG),
            (S_IFBLK, libc::S_IFBLK),
            (S_IFDIR, libc::S_IFDIR),
            (S_IFCHR, libc::S_IFCHR),
            (S_IFIFO, libc::S_IFIFO),
            (S_ISUID, libc::S_ISUID),
            (S_ISGID, libc::S_ISGID),
            (S_ISVTX, libc::S_ISVTX),
            (S_IRWXU, libc::S_IRWXU),
            (S_IRWXG, libc::S_IRWXG),
            (S_IRWXO, libc::S_IRWXO),
            (S_IXGRP, libc::S_IXGRP),
        ];
        for (ours, theirs) in pairs {
            assert_eq!(ours, u32::from(theirs));
        }
        assert_eq!(S_IXUGO, u32::from(libc::S_IXUSR | libc::S_IXGRP | libc::S_IXOTH));
    }

    #[test]
    fn is_dir_checks_type_bits_only() {
        assert!(is_dir(S_IFDIR | 0o755));
        assert!(!is_dir(S_IFREG | 0o755));
        // S_IFBLK shares a bit with S_IFDIR, so a plain `&` test would be wrong.
        assert!(!is_dir(S_IFBLK));
        assert!(!is_dir(S_IFSOCK));
    }

    #[test]
    fn is_reg_checks_type_bits_only() {
        assert!(is_reg(S_IFREG | S_ISUID | 0o4755));
        assert!(!is_reg(S_IFLNK));
        assert!(!is_reg(S_IFSOCK));
    }

    #[test]
    fn is_lnk_checks_type_bits_only() {
        assert!(is_lnk(S_IFLNK | 0o777));
        assert!(!is_lnk(S_IFREG));
        assert!(!is_lnk(S_IFSOCK));
    }
}
