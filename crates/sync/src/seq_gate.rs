//! A [`PercpuRef`] taken inside a [`SeqCount`] read section, and counted
//! exactly inside a write section: Linux's `__legitimize_mnt` against
//! `do_umount` under the `mount_lock` seqlock.
//!
//! Invariant: a reader's [`get_unless_changed`] succeeds only if its get
//! is ordered before the writer's [`count_in_write`]; so either the writer
//! counts the reader's reference, or the reader sees the section changed
//! and takes none. Both sides put a `SeqCst` fence between their write
//! (the reader's get, the writer's odd count) and their read (the
//! reader's reload of the count, the writer's fold of the slots), the
//! store-then-load handshake of Dekker's algorithm.
//!
//! Why: a path walk in rcu-walk finds a mount in a table it read under
//! the seqcount, without a reference. To keep what it found (an open
//! file's mount), it takes a per-CPU reference and then checks that no
//! `umount` began since the walk started. `umount` opens a write section
//! and only then counts the references: a walk that got in first is
//! counted (the mount is busy), one that got in later sees the section
//! and walks again. Neither side writes a shared line in the common case
//! (the reader's get is on its CPU's slot).
//!
//! ```
//! use vfscale_sync::{seq_gate, PercpuRef, SeqCount};
//!
//! let (gate, users) = (SeqCount::new(), PercpuRef::new(|| {}));
//! let start = gate.read_begin();
//! assert!(seq_gate::get_unless_changed(&users, &gate, start)); // a walk keeps it
//! let section = gate.write_begin();
//! assert_eq!(seq_gate::count_in_write(&users, &section), 2); // the owner's and the walk's
//! drop(section);
//! assert!(!seq_gate::get_unless_changed(&users, &gate, start)); // a walk begun before
//! users.switch_to_percpu();
//! ```

use crate::percpu_ref::PercpuRef;
use crate::seqcount::{SeqCount, SeqWriteGuard};
use crate::shim::{fence, Ordering};

/// Takes a reference on `users`, and keeps it only if no write section of
/// `gate` has begun since `start` (from [`SeqCount::read_begin`]).
pub fn get_unless_changed(users: &PercpuRef, gate: &SeqCount, start: u32) -> bool {
    get_unless_changed_on(users, gate, start, crate::cpu::current_cpu())
}

fn get_unless_changed_on(users: &PercpuRef, gate: &SeqCount, start: u32, cpu: usize) -> bool {
    users.get_on(cpu, 1);
    if !confirm(gate, start) {
        users.put_on(cpu, 1);
        return false;
    }
    true
}

/// Whether the references taken since `start` (from
/// [`SeqCount::read_begin`]) are sure to be counted by every write section
/// not seen yet: no write section of `gate` has begun since `start`. For a
/// reader that takes its references as it goes (a walk that keeps the
/// mount it ended in), then confirms them all at once, and drops them if
/// this is false.
pub fn confirm(gate: &SeqCount, start: u32) -> bool {
    fence(Ordering::SeqCst);
    !gate.read_retry(start)
}

/// The number of references on `users`, exactly, while `section` of the
/// gate is open: every [`get_unless_changed`] that succeeds later began its
/// section after this one. Leaves `users` in atomic mode; the caller
/// switches it back ([`PercpuRef::switch_to_percpu`]) or kills it.
pub fn count_in_write(users: &PercpuRef, section: &SeqWriteGuard<'_>) -> usize {
    let _ = section;
    fence(Ordering::SeqCst);
    users.switch_to_atomic();
    users.atomic_count().expect("switched to atomic mode")
}

#[cfg(all(test, loom))]
mod loom_models {
    use super::*;
    use loom::sync::Arc;
    use loom::thread;

    /// A walk that began before an umount either is counted by it or
    /// takes no reference: never both uncounted and kept. In per-CPU mode
    /// the writer's fold of the walker's slot orders the two; in atomic
    /// mode (`atomic`) only the two `SeqCst` fences do.
    fn kept_references_are_counted(atomic: bool) {
        loom::model(move || {
            let gate = Arc::new(SeqCount::new());
            let users = Arc::new(PercpuRef::new(|| {}));
            if atomic {
                users.switch_to_atomic();
            }
            let start = gate.read_begin();
            let walker = {
                let (gate, users) = (Arc::clone(&gate), Arc::clone(&users));
                thread::spawn(move || get_unless_changed_on(&users, &gate, start, 1))
            };
            let counted = {
                let section = gate.write_begin();
                count_in_write(&users, &section)
            };
            let kept = walker.join().unwrap();
            assert!(!kept || counted == 2, "a reference kept past an umount that did not count it");
            users.switch_to_percpu();
        });
    }

    #[test]
    fn a_kept_reference_is_counted() {
        kept_references_are_counted(false);
    }

    #[test]
    fn a_kept_reference_is_counted_in_atomic_mode() {
        kept_references_are_counted(true);
    }
}
