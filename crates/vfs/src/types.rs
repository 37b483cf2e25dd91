//! Plain values the system calls take and return — open flags, `lseek`
//! origins, directory entries, file types, `stat` results, timestamp and
//! attribute arguments — with Linux's bit values where Linux has them.
//!
//! May import `errno`, `mode`, `time` and `cred`, so every layer (the
//! node types, open files, the filesystems, the system calls) can use these
//! values without importing one another.

use crate::cred::Access;
use crate::mode::{S_IFBLK, S_IFCHR, S_IFDIR, S_IFIFO, S_IFLNK, S_IFREG, S_IFSOCK};
use crate::time::Timespec;
use std::fmt;

/// `open(2)` flags, with Linux's bit values.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct OpenFlags(pub i32);

impl OpenFlags {
    /// Read only.
    pub const RDONLY: OpenFlags = OpenFlags(libc::O_RDONLY);
    /// Write only.
    pub const WRONLY: OpenFlags = OpenFlags(libc::O_WRONLY);
    /// Read and write.
    pub const RDWR: OpenFlags = OpenFlags(libc::O_RDWR);
    /// Create the file if it does not exist.
    pub const CREAT: OpenFlags = OpenFlags(libc::O_CREAT);
    /// With `CREAT`: fail with EEXIST if it exists.
    pub const EXCL: OpenFlags = OpenFlags(libc::O_EXCL);
    /// Truncate a regular file opened for writing.
    pub const TRUNC: OpenFlags = OpenFlags(libc::O_TRUNC);
    /// Every write appends.
    pub const APPEND: OpenFlags = OpenFlags(libc::O_APPEND);
    /// Fail with ENOTDIR unless it is a directory.
    pub const DIRECTORY: OpenFlags = OpenFlags(libc::O_DIRECTORY);
    /// Fail with ELOOP if the last component is a symlink.
    pub const NOFOLLOW: OpenFlags = OpenFlags(libc::O_NOFOLLOW);
    /// Do not block (lease breaks, locks).
    pub const NONBLOCK: OpenFlags = OpenFlags(libc::O_NONBLOCK);

    /// Whether all bits of `other` are set.
    pub fn contains(self, other: OpenFlags) -> bool {
        self.0 & other.0 == other.0 && (other.0 != 0 || self.0 & libc::O_ACCMODE == 0)
    }

    fn has(self, bit: OpenFlags) -> bool {
        self.0 & bit.0 != 0
    }

    /// The permission `open` checks. Linux's special access mode 3 asks
    /// for read and write permission but allows neither (for ioctls).
    pub(crate) fn permission_needed(self) -> Access {
        match self.0 & libc::O_ACCMODE {
            libc::O_RDONLY => Access::READ,
            libc::O_WRONLY => Access::WRITE,
            _ => Access::READ | Access::WRITE,
        }
    }

    pub(crate) fn may_read(self) -> bool {
        matches!(self.0 & libc::O_ACCMODE, libc::O_RDONLY | libc::O_RDWR)
    }

    pub(crate) fn may_write(self) -> bool {
        matches!(self.0 & libc::O_ACCMODE, libc::O_WRONLY | libc::O_RDWR)
    }

    pub(crate) fn creat(self) -> bool {
        self.has(Self::CREAT)
    }
    pub(crate) fn excl(self) -> bool {
        self.has(Self::EXCL)
    }
    pub(crate) fn trunc(self) -> bool {
        self.has(Self::TRUNC)
    }
    pub(crate) fn directory(self) -> bool {
        self.has(Self::DIRECTORY)
    }
    pub(crate) fn nofollow(self) -> bool {
        self.has(Self::NOFOLLOW)
    }
    pub(crate) fn append(self) -> bool {
        self.has(Self::APPEND)
    }
}

impl std::ops::BitOr for OpenFlags {
    type Output = OpenFlags;
    fn bitor(self, other: OpenFlags) -> OpenFlags {
        OpenFlags(self.0 | other.0)
    }
}

impl fmt::Debug for OpenFlags {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "OpenFlags({:#o})", self.0)
    }
}

/// The flags of the `*at` system calls (`AT_SYMLINK_NOFOLLOW`, ...), with
/// Linux's bit values. Each call accepts its own subset and answers EINVAL
/// for any other bit, as Linux does.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct AtFlags(pub i32);

impl AtFlags {
    /// No flag.
    pub const NONE: AtFlags = AtFlags(0);
    /// Do not follow a final symlink.
    pub const SYMLINK_NOFOLLOW: AtFlags = AtFlags(libc::AT_SYMLINK_NOFOLLOW);
    /// `unlinkat`: remove a directory, as `rmdir`.
    pub const REMOVEDIR: AtFlags = AtFlags(libc::AT_REMOVEDIR);
    /// `linkat`: follow a final symlink of the old path.
    pub const SYMLINK_FOLLOW: AtFlags = AtFlags(libc::AT_SYMLINK_FOLLOW);
    /// An empty path names the file `dirfd` refers to (which need not be a
    /// directory).
    pub const EMPTY_PATH: AtFlags = AtFlags(libc::AT_EMPTY_PATH);
    /// `faccessat`: check with the effective ids (the only ids a
    /// [`Credentials`](crate::Credentials) has).
    pub const EACCESS: AtFlags = AtFlags(libc::AT_EACCESS);

    /// Whether every bit of `other` is set.
    pub fn contains(self, other: AtFlags) -> bool {
        self.0 & other.0 == other.0
    }

    /// EINVAL unless every bit set is one of `allowed`.
    pub(crate) fn only(self, allowed: AtFlags) -> crate::errno::VfsResult<AtFlags> {
        if self.0 & !allowed.0 != 0 {
            return Err(crate::errno::Errno::EINVAL);
        }
        Ok(self)
    }
}

impl std::ops::BitOr for AtFlags {
    type Output = AtFlags;
    fn bitor(self, other: AtFlags) -> AtFlags {
        AtFlags(self.0 | other.0)
    }
}

impl fmt::Debug for AtFlags {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "AtFlags({:#x})", self.0)
    }
}

/// `openat2`'s `RESOLVE_*` flags, with Linux's bit values.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct ResolveFlags(pub u64);

impl ResolveFlags {
    /// No restriction.
    pub const NONE: ResolveFlags = ResolveFlags(0);
    /// Cross no mount point. One instance has none to cross, so this
    /// refuses nothing yet.
    pub const NO_XDEV: ResolveFlags = ResolveFlags(0x01);
    /// Follow no "magic link" (`/proc/PID/fd/N` and the like); the
    /// library's procfs has none, so this refuses nothing yet.
    pub const NO_MAGICLINKS: ResolveFlags = ResolveFlags(0x02);
    /// Follow no symlink at all: ELOOP.
    pub const NO_SYMLINKS: ResolveFlags = ResolveFlags(0x04);
    /// Stay beneath `dirfd`: an absolute path or symlink, or a `..` out of
    /// it, is EXDEV.
    pub const BENEATH: ResolveFlags = ResolveFlags(0x08);
    /// Resolve as if `dirfd` were the root (`chroot` for one call).
    pub const IN_ROOT: ResolveFlags = ResolveFlags(0x10);
    /// Only from the dcache, without blocking: EAGAIN where that cannot
    /// be done.
    pub const CACHED: ResolveFlags = ResolveFlags(0x20);
    const ALL: u64 = 0x3f;

    /// Whether every bit of `other` is set.
    pub fn contains(self, other: ResolveFlags) -> bool {
        self.0 & other.0 == other.0
    }
}

impl std::ops::BitOr for ResolveFlags {
    type Output = ResolveFlags;
    fn bitor(self, other: ResolveFlags) -> ResolveFlags {
        ResolveFlags(self.0 | other.0)
    }
}

impl fmt::Debug for ResolveFlags {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "ResolveFlags({:#x})", self.0)
    }
}

/// `openat2`'s `struct open_how`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct OpenHow {
    /// The `open(2)` flags.
    pub flags: OpenFlags,
    /// Permission bits of a created file; must be 0 unless `O_CREAT`.
    pub mode: u64,
    /// How the path is resolved.
    pub resolve: ResolveFlags,
}

impl OpenHow {
    /// The checks of Linux `build_open_flags`, which `openat2` makes strict
    /// where `open` ignores what it does not know: EINVAL for an unknown
    /// open or resolve flag, a mode without `O_CREAT` (or a mode with bits
    /// beyond `07777`), or `RESOLVE_BENEATH` with `RESOLVE_IN_ROOT`.
    pub(crate) fn validate(&self) -> crate::errno::VfsResult<()> {
        use crate::errno::Errno;
        let known = libc::O_ACCMODE
            | libc::O_CREAT
            | libc::O_EXCL
            | libc::O_NOCTTY
            | libc::O_TRUNC
            | libc::O_APPEND
            | libc::O_NONBLOCK
            | libc::O_SYNC
            | libc::O_DSYNC
            | libc::O_ASYNC
            | libc::O_DIRECT
            | libc::O_LARGEFILE
            | libc::O_DIRECTORY
            | libc::O_NOFOLLOW
            | libc::O_NOATIME
            | libc::O_CLOEXEC
            | libc::O_PATH
            | libc::O_TMPFILE;
        if self.flags.0 & !known != 0 || self.resolve.0 & !ResolveFlags::ALL != 0 {
            return Err(Errno::EINVAL);
        }
        let will_create = self.flags.creat() || self.flags.0 & libc::O_TMPFILE == libc::O_TMPFILE;
        if will_create {
            if self.mode & !0o7777 != 0 {
                return Err(Errno::EINVAL);
            }
        } else if self.mode != 0 {
            return Err(Errno::EINVAL);
        }
        if self.resolve.contains(ResolveFlags::BENEATH | ResolveFlags::IN_ROOT) {
            return Err(Errno::EINVAL);
        }
        Ok(())
    }
}

/// `lseek` origins.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Whence {
    /// From the start (`SEEK_SET`).
    Set,
    /// From the current offset (`SEEK_CUR`).
    Cur,
    /// From the end (`SEEK_END`).
    End,
    /// To the next byte of data at or after the offset (`SEEK_DATA`).
    Data,
    /// To the next hole at or after the offset (`SEEK_HOLE`); the end of
    /// the file counts as a hole.
    Hole,
}

/// One entry returned by `readdir`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DirEntry {
    /// The name (including `.` and `..`).
    pub name: Vec<u8>,
    /// Inode number.
    pub ino: u64,
    /// Type of the inode.
    pub file_type: FileType,
}

/// What `stat(2)` returns.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Stat {
    /// Inode number, unique within the process.
    pub ino: u64,
    /// File type and permission bits (`S_IFMT | 0o7777`).
    pub mode: u32,
    /// Hard links.
    pub nlink: u32,
    /// Owner.
    pub uid: u32,
    /// Group.
    pub gid: u32,
    /// Bytes (for symlinks, the target's length).
    pub size: u64,
    /// Allocated 512-byte units: eight per present page of a regular file.
    pub blocks: u64,
    /// The device a character or block device node stands for (a `dev_t`
    /// as `makedev` encodes it); 0 for other types.
    pub rdev: u64,
    /// Last access.
    pub atime: Timespec,
    /// Last content change.
    pub mtime: Timespec,
    /// Last attribute change.
    pub ctime: Timespec,
}

/// The kind of an inode, from its mode.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum FileType {
    /// A directory.
    Directory,
    /// A regular file.
    Regular,
    /// A symbolic link.
    Symlink,
    /// A named pipe.
    Fifo,
    /// A unix-domain socket's name.
    Socket,
    /// A character device node.
    CharDevice,
    /// A block device node.
    BlockDevice,
}

impl FileType {
    /// The `S_IFMT` bits of this type.
    pub fn mode_bits(self) -> u32 {
        match self {
            FileType::Directory => S_IFDIR,
            FileType::Regular => S_IFREG,
            FileType::Symlink => S_IFLNK,
            FileType::Fifo => S_IFIFO,
            FileType::Socket => S_IFSOCK,
            FileType::CharDevice => S_IFCHR,
            FileType::BlockDevice => S_IFBLK,
        }
    }

    /// The type `S_IFMT` bits name, if any.
    pub fn from_mode(mode: u32) -> Option<FileType> {
        Some(match mode & crate::mode::S_IFMT {
            S_IFDIR => FileType::Directory,
            S_IFREG => FileType::Regular,
            S_IFLNK => FileType::Symlink,
            S_IFIFO => FileType::Fifo,
            S_IFSOCK => FileType::Socket,
            S_IFCHR => FileType::CharDevice,
            S_IFBLK => FileType::BlockDevice,
            _ => return None,
        })
    }

    /// Whether this is a device node (which only `CAP_MKNOD` may make).
    pub fn is_device(self) -> bool {
        matches!(self, FileType::CharDevice | FileType::BlockDevice)
    }
}

/// A timestamp argument of [`utimens`](crate::Process::utimens).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SetTime {
    /// The current time (`UTIME_NOW`).
    Now,
    /// Leave it as it is (`UTIME_OMIT`).
    Omit,
    /// This time.
    At(Timespec),
}

/// `renameat2` flags.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct RenameFlags {
    /// Fail with `EEXIST` instead of replacing an existing target.
    pub noreplace: bool,
}

/// The attributes [`Context::setattr`](crate::Context::setattr) changes; `None` / `Omit` leave one
/// alone.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SetAttr {
    /// New permission bits (`chmod`).
    pub mode: Option<u32>,
    /// New owner (`chown`).
    pub uid: Option<u32>,
    /// New group (`chown`).
    pub gid: Option<u32>,
    /// New size (`truncate`); negative is EINVAL.
    pub size: Option<i64>,
    /// New access time.
    pub atime: SetTime,
    /// New modification time.
    pub mtime: SetTime,
}

impl Default for SetAttr {
    fn default() -> Self {
        SetAttr { mode: None, uid: None, gid: None, size: None, atime: SetTime::Omit, mtime: SetTime::Omit }
    }
}

/// `fallocate` modes, with Linux's bit values.
pub mod falloc {
    /// Do not change the file size.
    pub const KEEP_SIZE: i32 = 0x01;
    /// Free the range (with `KEEP_SIZE`).
    pub const PUNCH_HOLE: i32 = 0x02;
}
