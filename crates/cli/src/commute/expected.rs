//! The pairs on which vfscale is known to conflict, each with its reason:
//! the lists `commutative_pairs_are_conflict_free` holds the checker to,
//! and the table and report print beside a conflicting pair. Edit them as
//! conflicts are fixed or accepted.

/// Pairs on which vfscale's design conflicts, and why. The test
/// `commutative_pairs_are_conflict_free` asserts that exactly these
/// conflict: remove a line when its conflict is fixed, add one (with the
/// reason) when a conflict is accepted.
pub const KNOWN_CONFLICTS: &[(&str, &str)] = &[
    ("create-one-dir", ONE_DIRECTORY),
    ("unlink-one-dir", ONE_DIRECTORY),
    ("mkdir-one-dir", ONE_DIRECTORY),
    (
        "pread-shared-fd",
        "both threads look the one descriptor up: its slot's spinlock and a count on the shared open file \
         (Linux's fget in a multithreaded process: f_count)",
    ),
    ("flock-shared-one-file", ONE_LOCK_CONTEXT),
    ("posix-disjoint-ranges", ONE_LOCK_CONTEXT),
    ("ofd-disjoint-ranges", ONE_LOCK_CONTEXT),
    (
        "lease-read-one-file",
        "F_SETLEASE counts the file's readers and writers exactly: both sides take the file's lock-context \
         spinlock and the switch lock of its per-CPU open counts, and write the lease list (Linux: flc_lock)",
    ),
];

const ONE_DIRECTORY: &str = "both change one directory: each holds a counted reference on it, takes its lock for \
                             writing, moves its revision and updates its times (and link count) in its attribute \
                             seqlock (Linux: d_lockref, i_rwsem and the inode's times)";

const ONE_LOCK_CONTEXT: &str = "the file's locks are one list under one spinlock, which both sides take though \
                                their locks never conflict (Linux: flc_lock)";

/// Pairs whose verdict depends on where objects land in memory or which
/// hash bucket a name falls in: when the two sides' words share a line,
/// that is false sharing, which the checker rightly reports, but only in
/// the runs where it happens (a few in a hundred). Each entry names the
/// source files whose sites every such conflicting line includes; the test
/// accepts either verdict for these, but no conflicting line without one
/// of them.
pub const LAYOUT_DEPENDENT: &[(&str, &[&str], &str)] = &[
    ("create-diff-dirs", NAMES_AND_ATTRIBUTES, NEIGHBOURS),
    ("unlink-diff-dirs", NAMES_AND_ATTRIBUTES, NEIGHBOURS),
    ("mkdir-diff-dirs", NAMES_AND_ATTRIBUTES, NEIGHBOURS),
    ("rename-diff-dirs", NAMES_AND_ATTRIBUTES, NEIGHBOURS),
    ("chmod-diff-files", NAMES_AND_ATTRIBUTES, NEIGHBOURS),
    ("pwrite-diff-files", NAMES_AND_ATTRIBUTES, NEIGHBOURS),
];

/// The dentry hash's stripe locks and an inode's attribute words (as the
/// sites of either build name them).
const NAMES_AND_ATTRIBUTES: &[&str] = &["vfs/src/dcache.rs", "sync/src/seqcount.rs"];

const NEIGHBOURS: &str = "the dentry hash packs many stripe locks into a line, so two names may hash to stripes on \
                          one line; an inode's attribute words are a separate small heap box, which the allocator \
                          may put on a line with another inode's";
