//! Credentials and the Unix permission checks made against them, as Linux's
//! `generic_permission`, `setattr_prepare` and `check_sticky` make them.
//!
//! Invariant: a decision depends only on the inode's mode, owner and group
//! and the caller's [`Credentials`]; nothing here reads or changes an inode,
//! so the dcache can call these during a lock-free walk. There are no ACLs,
//! user namespaces or ID-mapped mounts. What overrides a refusal is the
//! caller's effective [`Capabilities`], never its uid: a uid-0 caller
//! without `CAP_DAC_OVERRIDE` is refused like anyone else, and a caller
//! of any uid holding `CAP_CHOWN` may give files away, as in Linux.
//!
//! The checks are the ones the VFS makes before calling into a filesystem.
//! Read-only mounts (`EROFS`) and immutable or append-only inodes are the
//! caller's business, as they are in Linux's `inode_permission`.
//!
//! May import `errno` and `mode`.
//!
//! ```
//! use vfscale::cred::{permission, Access, Credentials};
//! use vfscale::mode::S_IFREG;
//! use vfscale::Errno;
//!
//! let alice = Credentials::user(1000, 1000, [27]);
//! let secret = S_IFREG | 0o640; // owned by root, group 27
//! assert_eq!(permission(secret, 0, 27, &alice, Access::READ), Ok(()));
//! assert_eq!(permission(secret, 0, 27, &alice, Access::WRITE), Err(Errno::EACCES));
//! assert_eq!(permission(secret, 0, 27, &Credentials::root(), Access::WRITE), Ok(()));
//! ```

use crate::errno::{Errno, VfsResult};
use crate::mode::{is_dir, S_IALLUGO, S_ISGID, S_ISUID, S_ISVTX, S_IXGRP, S_IXUGO};
use std::fmt;
use std::ops::{BitOr, BitOrAssign};
use std::sync::Arc;

/// A set of Linux capabilities, by their `CAP_*` bit numbers: the
/// effective set (`CapEff`) a caller's checks consult.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct Capabilities(u64);

impl Capabilities {
    /// Give files away and change their group freely.
    pub const CHOWN: Capabilities = Capabilities(1 << 0);
    /// Bypass read, write and execute permission checks.
    pub const DAC_OVERRIDE: Capabilities = Capabilities(1 << 1);
    /// Bypass read permission on files and search and read on directories.
    pub const DAC_READ_SEARCH: Capabilities = Capabilities(1 << 2);
    /// Act as the owner of any file (chmod, utimes, sticky directories).
    pub const FOWNER: Capabilities = Capabilities(1 << 3);
    /// Keep set-user-ID and set-group-ID bits on write and chown.
    pub const FSETID: Capabilities = Capabilities(1 << 4);
    /// `chroot`.
    pub const SYS_CHROOT: Capabilities = Capabilities(1 << 18);
    /// Administration: `trusted.` and `security.` extended attributes.
    pub const SYS_ADMIN: Capabilities = Capabilities(1 << 21);
    /// Override resource limits.
    pub const SYS_RESOURCE: Capabilities = Capabilities(1 << 24);
    /// Make device nodes.
    pub const MKNOD: Capabilities = Capabilities(1 << 27);
    /// Take leases on files one does not own.
    pub const LEASE: Capabilities = Capabilities(1 << 28);
    /// Linux's `CAP_LAST_CAP`.
    const LAST: u32 = 40;

    /// No capability.
    pub const fn empty() -> Capabilities {
        Capabilities(0)
    }

    /// Every capability Linux defines (`CAP_CHOWN` to `CAP_CHECKPOINT_RESTORE`).
    pub const fn all() -> Capabilities {
        Capabilities((1 << (Self::LAST + 1)) - 1)
    }

    /// The set whose bits are `bits` (as `/proc/PID/status` prints
    /// `CapEff`), bits beyond the last capability dropped.
    pub const fn from_bits(bits: u64) -> Capabilities {
        Capabilities(bits & Self::all().0)
    }

    /// The bits, as `CapEff` prints them.
    pub const fn bits(self) -> u64 {
        self.0
    }

    /// Whether every capability of `other` is in `self`.
    pub const fn contains(self, other: Capabilities) -> bool {
        self.0 & other.0 == other.0
    }

    /// `self` without the capabilities of `other`.
    pub const fn without(self, other: Capabilities) -> Capabilities {
        Capabilities(self.0 & !other.0)
    }
}

impl BitOr for Capabilities {
    type Output = Capabilities;
    fn bitor(self, other: Capabilities) -> Capabilities {
        Capabilities(self.0 | other.0)
    }
}

impl fmt::Debug for Capabilities {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if *self == Capabilities::all() {
            return f.write_str("Capabilities(all)");
        }
        write!(f, "Capabilities({:#x})", self.0)
    }
}

/// Who is asking: the fs uid, fs gid, supplementary groups and effective
/// capabilities of a caller.
///
/// Cloning is cheap: the group list is shared, as Linux shares
/// `struct group_info` between copies of a `struct cred`.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Credentials {
    uid: u32,
    gid: u32,
    /// Sorted and without duplicates, so membership is a binary search
    /// (Linux sorts `group_info` for the same reason).
    groups: Arc<[u32]>,
    caps: Capabilities,
}

impl Credentials {
    /// The superuser: uid 0, gid 0, no supplementary groups, every
    /// capability.
    pub fn root() -> Credentials {
        Credentials::user(0, 0, [])
    }

    /// A caller with fs uid `uid`, fs gid `gid` and the given supplementary
    /// groups (in any order, duplicates allowed), with the capabilities a
    /// process of that uid starts with: all of them for uid 0, none for
    /// anyone else. [`with_capabilities`](Self::with_capabilities) sets
    /// others.
    pub fn user(uid: u32, gid: u32, groups: impl IntoIterator<Item = u32>) -> Credentials {
        let mut groups: Vec<u32> = groups.into_iter().collect();
        groups.sort_unstable();
        groups.dedup();
        let caps = if uid == 0 { Capabilities::all() } else { Capabilities::empty() };
        Credentials { uid, gid, groups: groups.into(), caps }
    }

    /// These credentials with the effective capabilities `caps`.
    ///
    /// ```
    /// use vfscale::cred::{permission, Access, Capabilities, Credentials};
    /// use vfscale::mode::S_IFREG;
    /// use vfscale::Errno;
    ///
    /// let root = Credentials::root();
    /// let confined = root.clone().with_capabilities(Capabilities::all().without(Capabilities::DAC_OVERRIDE));
    /// let private = S_IFREG | 0o600; // owned by uid 1000
    /// assert_eq!(permission(private, 1000, 1000, &root, Access::WRITE), Ok(()));
    /// assert_eq!(permission(private, 1000, 1000, &confined, Access::WRITE), Err(Errno::EACCES));
    /// // CAP_DAC_READ_SEARCH still reads it.
    /// assert_eq!(permission(private, 1000, 1000, &confined, Access::READ), Ok(()));
    /// ```
    pub fn with_capabilities(self, caps: Capabilities) -> Credentials {
        Credentials { caps, ..self }
    }

    /// The effective capabilities.
    pub fn capabilities(&self) -> Capabilities {
        self.caps
    }

    /// Whether the caller holds `cap` (Linux `capable`).
    pub fn capable(&self, cap: Capabilities) -> bool {
        self.caps.contains(cap)
    }

    /// The fs uid.
    pub fn uid(&self) -> u32 {
        self.uid
    }

    /// The fs gid (primary group).
    pub fn gid(&self) -> u32 {
        self.gid
    }

    /// The supplementary groups, sorted and without duplicates.
    pub fn groups(&self) -> &[u32] {
        &self.groups
    }

    /// Whether the caller owns a file owned by `uid`, or holds
    /// `CAP_FOWNER` (Linux `inode_owner_or_capable`).
    pub fn owner_or_capable(&self, uid: u32) -> bool {
        self.uid == uid || self.capable(Capabilities::FOWNER)
    }

    /// Whether the caller is in group `gid` or holds `CAP_FSETID` (Linux
    /// `in_group_or_capable`): who may keep set-group-ID on a file of
    /// that group.
    pub fn in_group_or_capable(&self, gid: u32) -> bool {
        self.in_group(gid) || self.capable(Capabilities::FSETID)
    }

    /// Whether `gid` is the primary group or a supplementary group (Linux
    /// `in_group_p`).
    pub fn in_group(&self, gid: u32) -> bool {
        self.gid == gid || self.groups.binary_search(&gid).is_ok()
    }
}

/// The access a caller asks for: a set of [`READ`](Access::READ),
/// [`WRITE`](Access::WRITE) and [`EXEC`](Access::EXEC), with Linux's
/// `MAY_READ`, `MAY_WRITE` and `MAY_EXEC` values.
///
/// `EXEC` on a directory means search. The empty set asks only whether the
/// file exists (`access(F_OK)`) and is always granted.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct Access(u8);

impl Access {
    /// Read a file or list a directory.
    pub const READ: Access = Access(4);
    /// Write a file or add and remove directory entries.
    pub const WRITE: Access = Access(2);
    /// Execute a file or search a directory.
    pub const EXEC: Access = Access(1);

    /// No access at all.
    pub const fn empty() -> Access {
        Access(0)
    }

    /// The bits, `rwx` as an octal digit.
    pub const fn bits(self) -> u32 {
        self.0 as u32
    }

    /// Whether nothing is asked for.
    pub const fn is_empty(self) -> bool {
        self.0 == 0
    }

    /// Whether every access in `other` is also in `self`.
    pub const fn contains(self, other: Access) -> bool {
        self.0 & other.0 == other.0
    }

    /// Both sets together (also `self | other`).
    pub const fn union(self, other: Access) -> Access {
        Access(self.0 | other.0)
    }
}

impl BitOr for Access {
    type Output = Access;

    fn bitor(self, other: Access) -> Access {
        self.union(other)
    }
}

impl BitOrAssign for Access {
    fn bitor_assign(&mut self, other: Access) {
        *self = self.union(other);
    }
}

/// `READ | WRITE`, or `(empty)`.
impl fmt::Debug for Access {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.is_empty() {
            return f.write_str("(empty)");
        }
        let names = [(Access::READ, "READ"), (Access::WRITE, "WRITE"), (Access::EXEC, "EXEC")];
        let mut first = true;
        for (access, name) in names {
            if self.contains(access) {
                if !first {
                    f.write_str(" | ")?;
                }
                f.write_str(name)?;
                first = false;
            }
        }
        Ok(())
    }
}

/// Whether `cred` may access an inode with st_mode `mode`, owner
/// `owner_uid` and group `owner_gid` as `mask` asks (Linux
/// `generic_permission`). `EACCES` if not.
///
/// Exactly one class of bits is consulted: the owner's if the caller owns
/// the inode (even when the group or other bits would allow more), else the
/// group's if the caller is in the inode's group, else other's. A refusal
/// is then overridden as Linux's capabilities override it:
/// `CAP_DAC_READ_SEARCH` reads any file and reads and searches any
/// directory; `CAP_DAC_OVERRIDE` also writes anything, but executes a
/// non-directory only if at least one execute bit is set.
pub fn permission(mode: u32, owner_uid: u32, owner_gid: u32, cred: &Credentials, mask: Access) -> VfsResult<()> {
    let class_bits = if cred.uid == owner_uid {
        mode >> 6
    } else if cred.in_group(owner_gid) {
        mode >> 3
    } else {
        mode
    };
    if mask.bits() & !class_bits & 0o7 == 0 {
        return Ok(());
    }
    let read_search = if is_dir(mode) { !mask.contains(Access::WRITE) } else { mask == Access::READ };
    if read_search && cred.capable(Capabilities::DAC_READ_SEARCH) {
        return Ok(());
    }
    // CAP_DAC_OVERRIDE, except that executing needs some execute bit, so
    // nobody runs a file nobody marked as a program.
    let overridable = is_dir(mode) || !mask.contains(Access::EXEC) || mode & S_IXUGO != 0;
    if overridable && cred.capable(Capabilities::DAC_OVERRIDE) {
        Ok(())
    } else {
        Err(Errno::EACCES)
    }
}

/// Whether `cred` may `chmod` an inode with st_mode `mode`, owner
/// `owner_uid` and group `owner_gid` to the permission bits `new_perm`
/// (Linux `chmod_common` and `setattr_prepare`). Returns the st_mode to
/// store, or `EPERM` if the caller is neither the owner nor holds
/// `CAP_FOWNER`.
///
/// Bits of `new_perm` outside [`S_IALLUGO`] are ignored, so the file type is
/// kept. If the caller is not in the inode's group and lacks `CAP_FSETID`,
/// `S_ISGID` is silently dropped (on directories too), so nobody can make a
/// program that runs with a group they do not have.
pub fn may_chmod(mode: u32, owner_uid: u32, owner_gid: u32, cred: &Credentials, new_perm: u32) -> VfsResult<u32> {
    if !cred.owner_or_capable(owner_uid) {
        return Err(Errno::EPERM);
    }
    let mut perm = new_perm & S_IALLUGO;
    if !cred.in_group_or_capable(owner_gid) {
        perm &= !S_ISGID;
    }
    Ok(mode & !S_IALLUGO | perm)
}

/// Whether `cred` may `chown` an inode with st_mode `mode`, owner
/// `owner_uid` and group `owner_gid` to `new_uid` and `new_gid` (`None`
/// leaves that id alone, as `-1` does for `chown(2)`). Linux `chown_ok`,
/// `chgrp_ok` and the set-id clearing of `chown_common`.
///
/// Only a holder of `CAP_CHOWN` may give a file away; the owner may
/// "change" the uid to itself. The owner may change the group to one it is
/// in (or keep it); `CAP_CHOWN` sets any group. Anything else is `EPERM`.
///
/// Returns the st_mode to store. As in Linux, even when no id changes and
/// whatever the caller holds, a non-directory loses `S_ISUID`, and loses
/// `S_ISGID` if it is group-executable or if the caller is neither in its
/// current group nor holds `CAP_FSETID`, or, where it loses `S_ISUID`, in
/// its new group. (Without group execute, `S_ISGID` marks mandatory
/// locking rather than a set-gid program, so Linux leaves it to those who
/// could set it.)
pub fn may_chown(
    mode: u32,
    owner_uid: u32,
    owner_gid: u32,
    cred: &Credentials,
    new_uid: Option<u32>,
    new_gid: Option<u32>,
) -> VfsResult<u32> {
    let owner = cred.uid == owner_uid;
    let chown = cred.capable(Capabilities::CHOWN);
    let may_set_uid = |uid: u32| chown || (owner && uid == owner_uid);
    let may_set_gid = |gid: u32| chown || (owner && (gid == owner_gid || cred.in_group(gid)));
    if new_uid.is_some_and(|uid| !may_set_uid(uid)) || new_gid.is_some_and(|gid| !may_set_gid(gid)) {
        return Err(Errno::EPERM);
    }
    if is_dir(mode) {
        return Ok(mode);
    }
    let mut new_mode = mode & !S_ISUID;
    if mode & S_IXGRP != 0 || !cred.in_group_or_capable(owner_gid) {
        new_mode &= !S_ISGID;
    }
    // Killing set-user-ID makes the chown a mode change, and Linux's
    // `setattr_copy` then keeps set-group-ID only for a caller in the
    // file's new group (or holding `CAP_FSETID`).
    if mode & S_ISUID != 0 && !cred.in_group_or_capable(new_gid.unwrap_or(owner_gid)) {
        new_mode &= !S_ISGID;
    }
    // Clearing a set-id bit is a mode change, which only the owner (or a
    // holder of CAP_FOWNER) may make (`setattr_prepare` with
    // ATTR_KILL_S*ID).
    if new_mode != mode && !cred.owner_or_capable(owner_uid) {
        return Err(Errno::EPERM);
    }
    Ok(new_mode)
}

/// Whether `cred` may unlink, rmdir or rename away an entry in a
/// directory with st_mode `dir_mode` (Linux `check_sticky`); `owners`
/// gives the directory's owner and the entry's. In a sticky directory
/// (`S_ISVTX`, like `/tmp`) only the entry's owner, the directory's owner
/// or a holder of `CAP_FOWNER` may; anyone else gets `EPERM`. A directory
/// without the sticky bit imposes nothing here (write and search
/// permission on it are checked separately), and `owners` is not called:
/// the owners are words that a `chmod` of either writes beside the mode.
pub fn may_delete_in_sticky(dir_mode: u32, owners: impl FnOnce() -> (u32, u32), cred: &Credentials) -> VfsResult<()> {
    if dir_mode & S_ISVTX == 0 {
        return Ok(());
    }
    let (dir_uid, file_uid) = owners();
    if cred.uid == dir_uid || cred.owner_or_capable(file_uid) {
        Ok(())
    } else {
        Err(Errno::EPERM)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mode::{S_IFDIR, S_IFREG};

    const R: Access = Access::READ;
    const W: Access = Access::WRITE;
    const X: Access = Access::EXEC;

    fn alice() -> Credentials {
        Credentials::user(1000, 100, [20, 10, 20])
    }

    #[test]
    fn root_is_uid_zero_without_groups() {
        let root = Credentials::root();
        assert_eq!(root.capabilities(), Capabilities::all());
        assert_eq!((root.uid(), root.gid(), root.groups()), (0, 0, &[][..]));
    }

    #[test]
    fn user_sorts_and_dedups_groups() {
        let alice = alice();
        assert_eq!(alice.capabilities(), Capabilities::empty());
        assert_eq!((alice.uid(), alice.gid(), alice.groups()), (1000, 100, &[10, 20][..]));
        assert!(Credentials::user(0, 5, []).capable(Capabilities::DAC_OVERRIDE));
    }

    #[test]
    fn in_group_checks_primary_and_supplementary() {
        let alice = alice();
        assert!(alice.in_group(100));
        assert!(alice.in_group(10));
        assert!(alice.in_group(20));
        assert!(!alice.in_group(15));
        assert!(!alice.in_group(0));
    }

    #[test]
    fn access_set_operations() {
        assert!(Access::empty().is_empty());
        assert_eq!(Access::default(), Access::empty());
        let rw = R | W;
        assert_eq!(rw.bits(), 6);
        assert!(rw.contains(R) && rw.contains(W) && !rw.contains(X));
        assert!(rw.contains(Access::empty()));
        let mut all = rw;
        all |= X;
        assert_eq!(all, R.union(W).union(X));
        assert_eq!(all.bits(), 7);
    }

    #[test]
    fn access_debug_lists_names() {
        assert_eq!(format!("{:?}", R | X), "READ | EXEC");
        assert_eq!(format!("{:?}", W), "WRITE");
        assert_eq!(format!("{:?}", Access::empty()), "(empty)");
    }

    #[test]
    fn empty_mask_is_always_granted() {
        assert_eq!(permission(S_IFREG, 0, 0, &alice(), Access::empty()), Ok(()));
    }

    #[test]
    fn owner_uses_owner_bits() {
        let f = S_IFREG | 0o600;
        assert_eq!(permission(f, 1000, 0, &alice(), R | W), Ok(()));
        assert_eq!(permission(f, 1000, 0, &alice(), X), Err(Errno::EACCES));
    }

    #[test]
    fn owner_is_denied_even_if_group_and_other_allow() {
        let f = S_IFREG | 0o077;
        assert_eq!(permission(f, 1000, 100, &alice(), R), Err(Errno::EACCES));
    }

    #[test]
    fn group_member_uses_group_bits() {
        let f = S_IFREG | 0o640;
        assert_eq!(permission(f, 0, 100, &alice(), R), Ok(()));
        assert_eq!(permission(f, 0, 10, &alice(), R), Ok(()));
        assert_eq!(permission(f, 0, 10, &alice(), W), Err(Errno::EACCES));
    }

    #[test]
    fn group_member_is_denied_even_if_other_allows() {
        let f = S_IFREG | 0o607;
        assert_eq!(permission(f, 0, 20, &alice(), R), Err(Errno::EACCES));
    }

    #[test]
    fn other_uses_other_bits() {
        let f = S_IFREG | 0o774;
        assert_eq!(permission(f, 0, 0, &alice(), R), Ok(()));
        assert_eq!(permission(f, 0, 0, &alice(), W), Err(Errno::EACCES));
        assert_eq!(permission(f, 0, 0, &alice(), X), Err(Errno::EACCES));
    }

    #[test]
    fn every_bit_of_the_mask_is_needed() {
        let f = S_IFREG | 0o500;
        assert_eq!(permission(f, 1000, 0, &alice(), R | X), Ok(()));
        assert_eq!(permission(f, 1000, 0, &alice(), R | W), Err(Errno::EACCES));
    }

    #[test]
    fn root_reads_and_writes_anything() {
        let root = Credentials::root();
        assert_eq!(permission(S_IFREG, 1000, 1000, &root, R | W), Ok(()));
        assert_eq!(permission(S_IFDIR, 1000, 1000, &root, R | W), Ok(()));
    }

    #[test]
    fn root_searches_any_directory() {
        let root = Credentials::root();
        assert_eq!(permission(S_IFDIR, 1000, 1000, &root, X), Ok(()));
        assert_eq!(permission(S_IFDIR, 1000, 1000, &root, R | W | X), Ok(()));
    }

    #[test]
    fn root_executes_only_if_some_exec_bit_is_set() {
        let root = Credentials::root();
        assert_eq!(permission(S_IFREG | 0o666, 0, 0, &root, X), Err(Errno::EACCES));
        assert_eq!(permission(S_IFREG | 0o666, 0, 0, &root, R | X), Err(Errno::EACCES));
        assert_eq!(permission(S_IFREG | 0o001, 1000, 1000, &root, X), Ok(()));
        assert_eq!(permission(S_IFREG | 0o010, 1000, 1000, &root, R | X), Ok(()));
    }

    #[test]
    fn chmod_by_owner_sets_permission_bits_and_keeps_type() {
        let f = S_IFREG | 0o644;
        assert_eq!(may_chmod(f, 1000, 100, &alice(), 0o2755), Ok(S_IFREG | 0o2755));
        assert_eq!(may_chmod(f, 1000, 100, &alice(), S_IFDIR | 0o700), Ok(S_IFREG | 0o700));
    }

    #[test]
    fn chmod_by_non_owner_is_eperm() {
        assert_eq!(may_chmod(S_IFREG | 0o666, 0, 100, &alice(), 0o777), Err(Errno::EPERM));
    }

    #[test]
    fn chmod_by_root_of_any_file_keeps_setgid() {
        let root = Credentials::root();
        assert_eq!(may_chmod(S_IFREG, 1000, 1000, &root, 0o6755), Ok(S_IFREG | 0o6755));
    }

    #[test]
    fn chmod_by_owner_outside_group_clears_setgid() {
        assert_eq!(may_chmod(S_IFREG, 1000, 555, &alice(), 0o6755), Ok(S_IFREG | 0o4755));
        assert_eq!(may_chmod(S_IFDIR, 1000, 555, &alice(), 0o3775), Ok(S_IFDIR | 0o1775));
    }

    #[test]
    fn chown_uid_only_by_root() {
        let f = S_IFREG | 0o644;
        assert_eq!(may_chown(f, 1000, 100, &alice(), Some(1001), None), Err(Errno::EPERM));
        assert_eq!(may_chown(f, 1000, 100, &Credentials::root(), Some(1001), None), Ok(f));
    }

    #[test]
    fn chown_owner_may_keep_own_uid() {
        let f = S_IFREG | 0o644;
        assert_eq!(may_chown(f, 1000, 100, &alice(), Some(1000), None), Ok(f));
        assert_eq!(may_chown(f, 2000, 100, &alice(), Some(2000), None), Err(Errno::EPERM));
    }

    #[test]
    fn chown_owner_may_change_gid_to_own_group() {
        let f = S_IFREG | 0o644;
        assert_eq!(may_chown(f, 1000, 100, &alice(), None, Some(20)), Ok(f));
        assert_eq!(may_chown(f, 1000, 555, &alice(), None, Some(555)), Ok(f));
        assert_eq!(may_chown(f, 1000, 100, &alice(), Some(1000), Some(10)), Ok(f));
    }

    #[test]
    fn chown_owner_to_foreign_group_is_eperm() {
        let f = S_IFREG | 0o644;
        assert_eq!(may_chown(f, 1000, 100, &alice(), None, Some(555)), Err(Errno::EPERM));
    }

    #[test]
    fn chgrp_by_non_owner_is_eperm_even_to_own_group() {
        let f = S_IFREG | 0o644;
        assert_eq!(may_chown(f, 0, 100, &alice(), None, Some(100)), Err(Errno::EPERM));
        assert_eq!(may_chown(f, 0, 100, &Credentials::root(), None, Some(555)), Ok(f));
    }

    #[test]
    fn chown_with_no_ids_is_allowed_for_anyone() {
        assert_eq!(may_chown(S_IFREG | 0o644, 0, 0, &alice(), None, None), Ok(S_IFREG | 0o644));
    }

    #[test]
    fn chown_clears_setuid_even_by_root() {
        let f = S_IFREG | 0o4755;
        assert_eq!(may_chown(f, 1000, 100, &Credentials::root(), Some(0), None), Ok(S_IFREG | 0o755));
        assert_eq!(may_chown(f, 1000, 100, &alice(), None, None), Ok(S_IFREG | 0o755));
    }

    #[test]
    fn chown_clears_setgid_of_group_executable() {
        let f = S_IFREG | 0o2755;
        assert_eq!(may_chown(f, 1000, 100, &Credentials::root(), None, Some(5)), Ok(S_IFREG | 0o755));
    }

    #[test]
    fn chown_keeps_mandatory_lock_setgid_for_group_member_or_root() {
        let f = S_IFREG | 0o2644;
        assert_eq!(may_chown(f, 1000, 100, &alice(), None, Some(10)), Ok(f));
        assert_eq!(may_chown(f, 1000, 555, &Credentials::root(), None, Some(5)), Ok(f));
        assert_eq!(may_chown(f, 1000, 555, &alice(), None, Some(10)), Ok(S_IFREG | 0o644));
    }

    /// As the host kernel does (Linux 6.18, tmpfs, `setpriv --groups=1000
    /// --inh-caps=-fsetid --bounding-set=-fsetid chgrp 3000 f` by root, so
    /// with CAP_CHOWN, without CAP_FSETID, in the file's group 1000 only):
    /// 06666 becomes 0666, 02666 stays 02666, and a caller in both groups
    /// keeps 02666 of 06666.
    #[test]
    fn a_chown_that_kills_setuid_judges_setgid_on_the_new_group() {
        let in_old = Credentials::user(1000, 100, [20]).with_capabilities(Capabilities::CHOWN);
        let in_both = Credentials::user(1000, 100, [3000]).with_capabilities(Capabilities::CHOWN);
        let (both, setgid) = (S_IFREG | 0o6666, S_IFREG | 0o2666);
        assert_eq!(may_chown(both, 1000, 100, &in_old, None, Some(3000)), Ok(S_IFREG | 0o666));
        assert_eq!(may_chown(setgid, 1000, 100, &in_old, None, Some(3000)), Ok(setgid));
        assert_eq!(may_chown(both, 1000, 100, &in_both, None, Some(3000)), Ok(setgid));
    }

    #[test]
    fn chown_of_directory_keeps_setid_bits() {
        let d = S_IFDIR | 0o6775;
        assert_eq!(may_chown(d, 1000, 100, &Credentials::root(), Some(0), Some(0)), Ok(d));
    }

    #[test]
    fn non_sticky_dir_allows_any_delete() {
        let owners = || unreachable!("a directory without the sticky bit reads no owner");
        assert_eq!(may_delete_in_sticky(S_IFDIR | 0o777, owners, &alice()), Ok(()));
    }

    #[test]
    fn sticky_dir_allows_file_owner_dir_owner_and_root() {
        let tmp = S_IFDIR | 0o1777;
        assert_eq!(may_delete_in_sticky(tmp, || (0, 1000), &alice()), Ok(()));
        assert_eq!(may_delete_in_sticky(tmp, || (1000, 0), &alice()), Ok(()));
        assert_eq!(may_delete_in_sticky(tmp, || (5, 6), &Credentials::root()), Ok(()));
    }

    #[test]
    fn sticky_dir_denies_others_with_eperm() {
        assert_eq!(may_delete_in_sticky(S_IFDIR | 0o1777, || (0, 2000), &alice()), Err(Errno::EPERM));
    }
}
