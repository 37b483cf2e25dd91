//! The pairs on which vfscale is known to conflict, each with its reason:
//! the list `commutative_pairs_are_conflict_free` holds the checker to,
//! and the table and report print beside a conflicting pair. Edit it as
//! conflicts are fixed or accepted.

/// Pairs on which vfscale's design conflicts, and why. The test
/// `commutative_pairs_are_conflict_free` asserts that exactly these
/// conflict: remove a line when its conflict is fixed, add one (with the
/// reason) when a conflict is accepted.
pub const KNOWN_CONFLICTS: &[(&str, &str)] = &[];
