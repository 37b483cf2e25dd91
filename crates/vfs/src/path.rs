//! Path names as Linux's `getname` and `link_path_walk` see them: checked
//! once on entry, then cut into components for the walk.
//!
//! Invariant: a [`PathName`] is non-empty, holds no NUL byte and is shorter
//! than [`PATH_MAX`]; [`PathName::new`] returns `ENOENT`, `EINVAL` or
//! `ENAMETOOLONG` otherwise. A path is bytes, not UTF-8. Any run of slashes
//! separates components (a leading run, even `//`, means the root); `.` and
//! `..` are reported as [`Component::CurDir`] and [`Component::ParentDir`]
//! and left for the walk to resolve, because `..` of a symlink's target
//! is only known after following it.
//!
//! A component longer than [`NAME_MAX`] is not rejected up front. Linux
//! reports `ENAMETOOLONG` from the filesystem's `->lookup`, so a missing or
//! non-directory or unsearchable earlier component wins (`/missing/<300
//! bytes>` is `ENOENT`). The walk calls [`check_name_len`] where it would
//! look a name up in the filesystem, after the search-permission check on
//! the parent.
//!
//! Operations that add or remove an entry (mkdir, unlink, rename, ...) walk
//! to the parent and take the last component apart with
//! [`PathName::split_last`]; [`Last::require_normal`] gives the errno Linux
//! returns when that last component is `.`, `..` or the root.
//!
//! May import `errno`.
//!
//! ```
//! use vfscale::path::{Component, DirOp, Last, PathName};
//! use vfscale::Errno;
//!
//! let path = PathName::new(b"/usr//lib/./x/")?;
//! assert!(path.is_absolute() && path.has_trailing_slash());
//! let names: Vec<_> = path.components().collect();
//! assert_eq!(
//!     names,
//!     [Component::Normal(b"usr"), Component::Normal(b"lib"), Component::CurDir, Component::Normal(b"x")]
//! );
//!
//! let (parent, last) = PathName::new(b"a/b/.")?.split_last();
//! assert_eq!(parent.count(), 2);
//! assert_eq!(last, Last::Dot);
//! assert_eq!(last.require_normal(DirOp::Create), Err(Errno::EEXIST)); // mkdir("a/b/.")
//! assert_eq!(last.require_normal(DirOp::Rmdir), Err(Errno::EINVAL)); // rmdir("a/b/.")
//!
//! assert_eq!(PathName::new(b""), Err(Errno::ENOENT));
//! # Ok::<(), Errno>(())
//! ```

use crate::errno::{Errno, VfsResult};
use std::fmt;
use std::iter::FusedIterator;

/// Bytes in a path including its terminating NUL, so the longest path has
/// `PATH_MAX - 1` bytes.
pub const PATH_MAX: usize = 4096;

/// The longest name of one directory entry, in bytes.
pub const NAME_MAX: usize = 255;

/// Shows bytes as an escaped string, since paths are usually text.
struct Bytes<'a>(&'a [u8]);

impl fmt::Debug for Bytes<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "\"{}\"", self.0.escape_ascii())
    }
}

/// A path name that passed Linux's entry checks (see the
/// [module documentation](self)).
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct PathName<'a> {
    bytes: &'a [u8],
}

impl<'a> PathName<'a> {
    /// Checks `bytes` as a system call's path argument.
    ///
    /// `EINVAL` if it contains a NUL byte (C would silently cut the path
    /// there; Rust's `std` refuses the same way), else `ENAMETOOLONG` if it
    /// has [`PATH_MAX`] bytes or more, else `ENOENT` if it is empty.
    pub fn new(bytes: &'a [u8]) -> VfsResult<PathName<'a>> {
        if bytes.contains(&0) {
            Err(Errno::EINVAL)
        } else if bytes.len() >= PATH_MAX {
            Err(Errno::ENAMETOOLONG)
        } else if bytes.is_empty() {
            Err(Errno::ENOENT)
        } else {
            Ok(PathName { bytes })
        }
    }

    /// The path as given.
    pub fn as_bytes(self) -> &'a [u8] {
        self.bytes
    }

    /// Whether the walk starts at the root rather than the working
    /// directory.
    pub fn is_absolute(self) -> bool {
        self.bytes[0] == b'/'
    }

    /// Whether the path ends in `/` after at least one component, as in
    /// `a/b/`. Linux then requires the last component to be a directory
    /// (after following it if it is a symlink); `/` alone has no last
    /// component and so no trailing slash.
    pub fn has_trailing_slash(self) -> bool {
        self.bytes.ends_with(b"/") && self.bytes.iter().any(|&b| b != b'/')
    }

    /// The components, first to last.
    pub fn components(self) -> Components<'a> {
        Components::new(self.bytes)
    }

    /// The components up to the parent of the last, and the last (Linux
    /// `path_parentat`'s `last` and `last_type`). Trailing slashes are
    /// dropped: `a/b/` splits into `a` and `b`; see
    /// [`has_trailing_slash`](Self::has_trailing_slash).
    pub fn split_last(self) -> (Components<'a>, Last<'a>) {
        let end = self.bytes.iter().rposition(|&b| b != b'/').map_or(0, |i| i + 1);
        let trimmed = &self.bytes[..end];
        if trimmed.is_empty() {
            return (Components::new(trimmed), Last::Root);
        }
        let start = trimmed.iter().rposition(|&b| b == b'/').map_or(0, |i| i + 1);
        let last = match &trimmed[start..] {
            b"." => Last::Dot,
            b".." => Last::DotDot,
            name => Last::Normal(name),
        };
        (Components::new(&trimmed[..start]), last)
    }
}

impl fmt::Debug for PathName<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("PathName").field(&Bytes(self.bytes)).finish()
    }
}

/// One step of a walk.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub enum Component<'a> {
    /// `.`: stay in this directory.
    CurDir,
    /// `..`: go to the parent (the root's parent is the root).
    ParentDir,
    /// A name to look up; not checked against [`NAME_MAX`] (see
    /// [`check_name_len`]).
    Normal(&'a [u8]),
}

impl fmt::Debug for Component<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Component::CurDir => f.write_str("CurDir"),
            Component::ParentDir => f.write_str("ParentDir"),
            Component::Normal(name) => f.debug_tuple("Normal").field(&Bytes(name)).finish(),
        }
    }
}

/// Iterator over the components of a path, skipping repeated slashes.
///
/// A walk that must treat the last component specially (follow a final
/// symlink or not, require a directory) asks
/// [`is_finished`](Self::is_finished) right after taking a component, as
/// Linux's `link_path_walk` checks for the end of the string.
#[derive(Clone)]
pub struct Components<'a> {
    /// What is left to walk, without leading slashes.
    rest: &'a [u8],
}

impl<'a> Components<'a> {
    fn new(path: &'a [u8]) -> Components<'a> {
        Components { rest: trim_leading_slashes(path) }
    }

    /// Whether no component is left.
    pub fn is_finished(&self) -> bool {
        self.rest.is_empty()
    }
}

fn trim_leading_slashes(path: &[u8]) -> &[u8] {
    let start = path.iter().position(|&b| b != b'/').unwrap_or(path.len());
    &path[start..]
}

impl<'a> Iterator for Components<'a> {
    type Item = Component<'a>;

    fn next(&mut self) -> Option<Component<'a>> {
        if self.rest.is_empty() {
            return None;
        }
        let end = self.rest.iter().position(|&b| b == b'/').unwrap_or(self.rest.len());
        let (name, rest) = self.rest.split_at(end);
        self.rest = trim_leading_slashes(rest);
        Some(match name {
            b"." => Component::CurDir,
            b".." => Component::ParentDir,
            name => Component::Normal(name),
        })
    }
}

impl FusedIterator for Components<'_> {}

impl fmt::Debug for Components<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("Components").field(&Bytes(self.rest)).finish()
    }
}

/// The last component of a path, by Linux's `last_type`.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub enum Last<'a> {
    /// No component at all: the path is only slashes (`LAST_ROOT`).
    Root,
    /// `.` (`LAST_DOT`).
    Dot,
    /// `..` (`LAST_DOTDOT`).
    DotDot,
    /// A name (`LAST_NORM`); not checked against [`NAME_MAX`].
    Normal(&'a [u8]),
}

impl<'a> Last<'a> {
    /// The name, if this is one; otherwise the errno Linux gives `op` for
    /// a last component of `.`, `..` or `/` (see [`DirOp`]).
    ///
    /// Linux makes this check after walking to the parent and (for rename)
    /// after the cross-mount `EXDEV` check, but before `EROFS` and before
    /// looking the name up.
    pub fn require_normal(self, op: DirOp) -> VfsResult<&'a [u8]> {
        let errno = match (self, op) {
            (Last::Normal(name), _) => return Ok(name),
            (_, DirOp::Create) => Errno::EEXIST,
            (_, DirOp::Unlink) => Errno::EISDIR,
            (Last::Dot, DirOp::Rmdir) => Errno::EINVAL,
            (Last::DotDot, DirOp::Rmdir) => Errno::ENOTEMPTY,
            (Last::Root, DirOp::Rmdir) => Errno::EBUSY,
            (_, DirOp::RenameFrom | DirOp::RenameTo) => Errno::EBUSY,
            (_, DirOp::RenameToNoReplace) => Errno::EEXIST,
        };
        Err(errno)
    }
}

impl fmt::Debug for Last<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Last::Root => f.write_str("Root"),
            Last::Dot => f.write_str("Dot"),
            Last::DotDot => f.write_str("DotDot"),
            Last::Normal(name) => f.debug_tuple("Normal").field(&Bytes(name)).finish(),
        }
    }
}

/// An operation on the directory entry named by a path's last component.
/// Linux refuses `.`, `..` and `/` there, with an errno that depends on the
/// operation (`fs/namei.c`):
///
/// | operation | `.` | `..` | `/` |
/// |---|---|---|---|
/// | [`Create`](DirOp::Create) | `EEXIST` | `EEXIST` | `EEXIST` |
/// | [`Unlink`](DirOp::Unlink) | `EISDIR` | `EISDIR` | `EISDIR` |
/// | [`Rmdir`](DirOp::Rmdir) | `EINVAL` | `ENOTEMPTY` | `EBUSY` |
/// | [`RenameFrom`](DirOp::RenameFrom), [`RenameTo`](DirOp::RenameTo) | `EBUSY` | `EBUSY` | `EBUSY` |
/// | [`RenameToNoReplace`](DirOp::RenameToNoReplace) | `EEXIST` | `EEXIST` | `EEXIST` |
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum DirOp {
    /// `mkdir`, `mknod`, `symlink`'s new name, `link`'s new name
    /// (`filename_create`).
    Create,
    /// `unlink` (`do_unlinkat`).
    Unlink,
    /// `rmdir` (`do_rmdir`).
    Rmdir,
    /// `rename`'s source (`do_renameat2`); checked before the target.
    RenameFrom,
    /// `rename`'s target, also with `RENAME_EXCHANGE`.
    RenameTo,
    /// `rename`'s target with `RENAME_NOREPLACE`.
    RenameToNoReplace,
}

/// `ENAMETOOLONG` if `name` is longer than [`NAME_MAX`] bytes, as a
/// filesystem's `->lookup` (`simple_lookup` for tmpfs) reports it.
pub fn check_name_len(name: &[u8]) -> VfsResult<()> {
    if name.len() > NAME_MAX {
        Err(Errno::ENAMETOOLONG)
    } else {
        Ok(())
    }
}

/// Checks a single name for a new entry, as `mkdir` or `creat` of that name
/// relative to a directory would.
///
/// `ENOENT` if empty; `EINVAL` if it holds a NUL byte or a `/` (then it is
/// a path, not a name; Linux has no errno for this, and `EINVAL` is what
/// the NUL case already gives); `EEXIST` for `.` and `..` (what
/// `mkdir("dir/.")` returns; other operations differ, see [`DirOp`]);
/// `ENAMETOOLONG` beyond [`NAME_MAX`] bytes.
pub fn validate_name(name: &[u8]) -> VfsResult<()> {
    if name.is_empty() {
        return Err(Errno::ENOENT);
    }
    if name.iter().any(|&b| b == 0 || b == b'/') {
        return Err(Errno::EINVAL);
    }
    if name == b"." || name == b".." {
        return Err(Errno::EEXIST);
    }
    check_name_len(name)
}

#[cfg(test)]
mod tests {
    use super::*;
    use Component::{CurDir, Normal, ParentDir};

    fn path(bytes: &[u8]) -> PathName<'_> {
        PathName::new(bytes).unwrap()
    }

    fn components(bytes: &[u8]) -> Vec<Component<'_>> {
        path(bytes).components().collect()
    }

    #[test]
    fn empty_path_is_enoent() {
        assert_eq!(PathName::new(b""), Err(Errno::ENOENT));
    }

    #[test]
    fn nul_in_path_is_einval() {
        assert_eq!(PathName::new(b"a\0b"), Err(Errno::EINVAL));
        assert_eq!(PathName::new(b"\0"), Err(Errno::EINVAL));
    }

    #[test]
    fn nul_wins_over_too_long() {
        let mut long = vec![b'a'; PATH_MAX];
        long[0] = 0;
        assert_eq!(PathName::new(&long), Err(Errno::EINVAL));
    }

    #[test]
    fn path_of_path_max_bytes_is_enametoolong() {
        let long = [b'/'; PATH_MAX];
        assert_eq!(PathName::new(&long), Err(Errno::ENAMETOOLONG));
        assert_eq!(PathName::new(&long[..PATH_MAX - 1]).map(|p| p.as_bytes().len()), Ok(PATH_MAX - 1));
    }

    #[test]
    fn as_bytes_returns_input() {
        assert_eq!(path(b"a//b/").as_bytes(), b"a//b/");
    }

    #[test]
    fn is_absolute_checks_leading_slash() {
        assert!(path(b"/").is_absolute());
        assert!(path(b"//a").is_absolute());
        assert!(!path(b"a/b").is_absolute());
        assert!(!path(b"./a").is_absolute());
    }

    #[test]
    fn has_trailing_slash_needs_a_component() {
        assert!(path(b"a/").has_trailing_slash());
        assert!(path(b"/a/b//").has_trailing_slash());
        assert!(path(b"a/./").has_trailing_slash());
        assert!(!path(b"a/b").has_trailing_slash());
        assert!(!path(b"/").has_trailing_slash());
        assert!(!path(b"///").has_trailing_slash());
    }

    #[test]
    fn components_skip_repeated_slashes() {
        assert_eq!(components(b"//a///b//"), [Normal(b"a"), Normal(b"b")]);
        assert_eq!(components(b"a/b"), [Normal(b"a"), Normal(b"b")]);
    }

    #[test]
    fn components_of_root_are_empty() {
        assert_eq!(components(b"/"), []);
        assert_eq!(components(b"////"), []);
    }

    #[test]
    fn components_report_dot_and_dotdot() {
        assert_eq!(components(b"./../a/.."), [CurDir, ParentDir, Normal(b"a"), ParentDir]);
        assert_eq!(components(b"..."), [Normal(b"...")]);
        assert_eq!(components(b".a/..b"), [Normal(b".a"), Normal(b"..b")]);
    }

    #[test]
    fn components_keep_non_utf8_bytes() {
        assert_eq!(components(b"\xff/\xc3("), [Normal(b"\xff"), Normal(b"\xc3(")]);
    }

    #[test]
    fn components_do_not_check_name_max() {
        let mut long = vec![b'x'; NAME_MAX + 1];
        long.extend_from_slice(b"/y");
        assert_eq!(components(&long), [Normal(&long[..NAME_MAX + 1]), Normal(b"y")]);
    }

    #[test]
    fn components_is_finished_after_last() {
        let mut walk = path(b"a//b/").components();
        assert!(!walk.is_finished());
        assert_eq!(walk.next(), Some(Normal(b"a")));
        assert!(!walk.is_finished());
        assert_eq!(walk.next(), Some(Normal(b"b")));
        assert!(walk.is_finished());
        assert_eq!(walk.next(), None);
        assert_eq!(walk.next(), None);
        assert!(path(b"/").components().is_finished());
    }

    #[test]
    fn split_last_of_normal_name() {
        let (parent, last) = path(b"/a//b/c").split_last();
        assert_eq!(parent.collect::<Vec<_>>(), [Normal(b"a"), Normal(b"b")]);
        assert_eq!(last, Last::Normal(b"c"));
    }

    #[test]
    fn split_last_of_single_name_has_no_parent() {
        let (parent, last) = path(b"c").split_last();
        assert!(parent.is_finished());
        assert_eq!(last, Last::Normal(b"c"));
        let (parent, last) = path(b"/c").split_last();
        assert!(parent.is_finished());
        assert_eq!(last, Last::Normal(b"c"));
    }

    #[test]
    fn split_last_drops_trailing_slashes() {
        let (parent, last) = path(b"a/b//").split_last();
        assert_eq!(parent.collect::<Vec<_>>(), [Normal(b"a")]);
        assert_eq!(last, Last::Normal(b"b"));
    }

    #[test]
    fn split_last_of_dots_and_root() {
        assert_eq!(path(b".").split_last().1, Last::Dot);
        assert_eq!(path(b"a/./").split_last().1, Last::Dot);
        assert_eq!(path(b"a/..").split_last().1, Last::DotDot);
        let (parent, last) = path(b"//").split_last();
        assert!(parent.is_finished());
        assert_eq!(last, Last::Root);
    }

    #[test]
    fn require_normal_returns_name() {
        for op in [DirOp::Create, DirOp::Unlink, DirOp::Rmdir, DirOp::RenameFrom, DirOp::RenameTo] {
            assert_eq!(Last::Normal(b"x").require_normal(op), Ok(&b"x"[..]));
        }
    }

    #[test]
    fn create_of_dot_dotdot_or_root_is_eexist() {
        for last in [Last::Dot, Last::DotDot, Last::Root] {
            assert_eq!(last.require_normal(DirOp::Create), Err(Errno::EEXIST));
        }
    }

    #[test]
    fn unlink_of_dot_dotdot_or_root_is_eisdir() {
        for last in [Last::Dot, Last::DotDot, Last::Root] {
            assert_eq!(last.require_normal(DirOp::Unlink), Err(Errno::EISDIR));
        }
    }

    #[test]
    fn rmdir_of_dot_is_einval_dotdot_enotempty_root_ebusy() {
        assert_eq!(Last::Dot.require_normal(DirOp::Rmdir), Err(Errno::EINVAL));
        assert_eq!(Last::DotDot.require_normal(DirOp::Rmdir), Err(Errno::ENOTEMPTY));
        assert_eq!(Last::Root.require_normal(DirOp::Rmdir), Err(Errno::EBUSY));
    }

    #[test]
    fn rename_of_dot_dotdot_or_root_is_ebusy() {
        for last in [Last::Dot, Last::DotDot, Last::Root] {
            assert_eq!(last.require_normal(DirOp::RenameFrom), Err(Errno::EBUSY));
            assert_eq!(last.require_normal(DirOp::RenameTo), Err(Errno::EBUSY));
        }
    }

    #[test]
    fn rename_noreplace_onto_dot_dotdot_or_root_is_eexist() {
        for last in [Last::Dot, Last::DotDot, Last::Root] {
            assert_eq!(last.require_normal(DirOp::RenameToNoReplace), Err(Errno::EEXIST));
        }
    }

    #[test]
    fn check_name_len_allows_name_max() {
        assert_eq!(check_name_len(&[b'x'; NAME_MAX]), Ok(()));
        assert_eq!(check_name_len(b""), Ok(()));
    }

    #[test]
    fn name_over_name_max_is_enametoolong() {
        assert_eq!(check_name_len(&[b'x'; NAME_MAX + 1]), Err(Errno::ENAMETOOLONG));
    }

    #[test]
    fn validate_name_accepts_plain_names() {
        assert_eq!(validate_name(b"a"), Ok(()));
        assert_eq!(validate_name(b"..."), Ok(()));
        assert_eq!(validate_name(b".hidden"), Ok(()));
        assert_eq!(validate_name(&[b'x'; NAME_MAX]), Ok(()));
        assert_eq!(validate_name(b"\xff\xfe"), Ok(()));
    }

    #[test]
    fn validate_empty_name_is_enoent() {
        assert_eq!(validate_name(b""), Err(Errno::ENOENT));
    }

    #[test]
    fn validate_name_with_slash_or_nul_is_einval() {
        assert_eq!(validate_name(b"a/b"), Err(Errno::EINVAL));
        assert_eq!(validate_name(b"a/"), Err(Errno::EINVAL));
        assert_eq!(validate_name(b"/"), Err(Errno::EINVAL));
        assert_eq!(validate_name(b"a\0"), Err(Errno::EINVAL));
    }

    #[test]
    fn validate_name_of_dot_or_dotdot_is_eexist() {
        assert_eq!(validate_name(b"."), Err(Errno::EEXIST));
        assert_eq!(validate_name(b".."), Err(Errno::EEXIST));
    }

    #[test]
    fn validate_long_name_is_enametoolong() {
        assert_eq!(validate_name(&[b'x'; NAME_MAX + 1]), Err(Errno::ENAMETOOLONG));
    }

    #[test]
    fn debug_shows_escaped_text() {
        assert_eq!(format!("{:?}", path(b"/a/\xff")), r#"PathName("/a/\xff")"#);
        assert_eq!(format!("{:?}", Normal(b"x")), r#"Normal("x")"#);
        assert_eq!(format!("{:?}", [CurDir, ParentDir]), "[CurDir, ParentDir]");
        assert_eq!(format!("{:?}", path(b"a//b").components()), r#"Components("a//b")"#);
        assert_eq!(format!("{:?}", Last::Normal(b"x")), r#"Normal("x")"#);
        assert_eq!(format!("{:?}", [Last::Root, Last::Dot, Last::DotDot]), "[Root, Dot, DotDot]");
    }
}
