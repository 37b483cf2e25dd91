//! Which files a process may hold POSIX record locks on, so that its close
//! of a file it never locked leaves the file's lock list alone. Linux's
//! `locks_remove_posix` takes the file's `flc_lock` on every close once
//! the file has a POSIX lock of anyone, so one process's locks make every
//! other process's close of the file write their line.
//!
//! Invariant: a process marks a file (by its inode's address) before it
//! asks for a POSIX lock on it, and a mark is never taken back; so a file
//! the process holds a lock on is marked, and a close that finds no mark
//! has no lock of the process to drop. A mark fills one slot of a short
//! window of slots chosen by the address's hash, each slot on a line of
//! its own and written once (empty to marked), so threads of one process
//! marking different files share no line, and a close reads only its own
//! file's window. A file whose window is full of other files' marks is
//! taken to be marked: its closes take the lock list, as before. An
//! address reused by a later inode only makes a mark stand for both.
//!
//! May import nothing of the crate.

use vfscale_sync::audited::{AtomicUsize, Ordering};

/// Slots in all: a process marks up to this many files before windows
/// begin to fill (1 KiB, made with its descriptor table).
const SLOTS: usize = 16;
/// Slots a file's mark may take, from the one its hash picks.
const WINDOW: usize = 4;

/// A slot on a line of its own: 0, or the inode address it marks.
#[repr(align(64))]
#[derive(Default)]
struct Slot(AtomicUsize);

/// One process's marks (see the module doc).
#[derive(Default)]
pub(crate) struct PosixMarks {
    slots: [Slot; SLOTS],
}

impl PosixMarks {
    /// Marks `inode` (its address) as a file the process may hold POSIX
    /// locks on; a file already marked writes nothing.
    pub fn mark(&self, inode: usize) {
        for slot in window(inode) {
            let slot = &self.slots[slot].0;
            let mut seen = slot.load(Ordering::Acquire);
            if seen == 0 {
                seen = slot.compare_exchange(0, inode, Ordering::AcqRel, Ordering::Acquire).err().unwrap_or(inode);
            }
            if seen == inode {
                return;
            }
        }
        // The window is full of other files: `may_hold` says yes for it.
    }

    /// Whether the process may hold POSIX locks on `inode`: false only
    /// where its window has no mark of it and a free slot (see the module
    /// doc).
    pub fn may_hold(&self, inode: usize) -> bool {
        for slot in window(inode) {
            match self.slots[slot].0.load(Ordering::Acquire) {
                0 => return false,
                seen if seen == inode => return true,
                _ => {}
            }
        }
        true
    }
}

/// The slots `inode`'s mark may take, in order.
fn window(inode: usize) -> impl Iterator<Item = usize> {
    // Fibonacci hashing of the address, past the alignment's zero bits.
    let first = ((inode as u64 >> 4).wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 60) as usize;
    (0..WINDOW).map(move |i| (first + i) % SLOTS)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_file_is_held_once_marked_and_not_before() {
        let marks = PosixMarks::default();
        assert!(!marks.may_hold(0x1000));
        marks.mark(0x1000);
        marks.mark(0x1000);
        assert!(marks.may_hold(0x1000));
        assert!(!marks.may_hold(0x2000));
        assert_eq!(marks.slots.iter().filter(|s| s.0.load(Ordering::Relaxed) != 0).count(), 1, "marked once");
    }

    /// Past the slots a window has, a file is taken to be marked: never a
    /// "no" for a file whose mark did not fit.
    #[test]
    fn a_full_window_says_maybe() {
        let marks = PosixMarks::default();
        let files: Vec<usize> = (1..=200).map(|i| i * 0x340).collect();
        for &file in &files {
            marks.mark(file);
        }
        assert!(files.iter().all(|&f| marks.may_hold(f)), "every marked file is held");
        assert!(marks.slots.iter().all(|s| s.0.load(Ordering::Relaxed) != 0), "every slot is taken");
    }

    /// Threads marking different files at once lose no mark.
    #[test]
    fn concurrent_marks_all_land() {
        let marks = PosixMarks::default();
        let files: [usize; 8] = std::array::from_fn(|i| (i + 1) * 0x1_0000);
        std::thread::scope(|s| {
            for chunk in files.chunks(2) {
                s.spawn(|| chunk.iter().for_each(|&f| marks.mark(f)));
            }
        });
        assert!(files.iter().all(|&f| marks.may_hold(f)));
    }
}
