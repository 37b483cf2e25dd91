//! Byte ranges of POSIX and OFD locks: `struct flock` to an inclusive
//! range (`flock_to_posix_lock`), and one owner's locks after a request
//! (the merge and split of `posix_lock_inode`).
//!
//! Invariant: one owner's locks on an inode never overlap, are sorted by
//! start, and two of the same type are never adjacent (they merge); an
//! end of [`OFFSET_MAX`] means "to end of file, however it grows".

use crate::errno::{Errno, VfsResult};

/// The largest offset (`OFFSET_MAX`); an end there means "to EOF".
pub(crate) const OFFSET_MAX: i64 = i64::MAX;

/// An inclusive byte range with a lock type.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Piece {
    pub write: bool,
    pub start: i64,
    pub end: i64,
}

impl Piece {
    pub(crate) fn overlaps(&self, start: i64, end: i64) -> bool {
        self.start <= end && start <= self.end
    }
}

/// The range `l_whence`/`l_start`/`l_len` name, `pos` giving the file
/// offset (`SEEK_CUR`) and `size` the file size (`SEEK_END`), each asked
/// only for its own whence (so a `SEEK_SET` request reads neither the
/// description's offset nor the inode's attributes, and shares no line
/// with a seek or a write), with
/// Linux's checks: EINVAL for a bad whence or a range starting before 0,
/// EOVERFLOW for one ending past `OFFSET_MAX`.
pub(crate) fn to_range(
    whence: i16,
    l_start: i64,
    l_len: i64,
    pos: impl FnOnce() -> i64,
    size: impl FnOnce() -> i64,
) -> VfsResult<(i64, i64)> {
    let base = match i32::from(whence) {
        libc::SEEK_SET => 0,
        libc::SEEK_CUR => pos(),
        libc::SEEK_END => size(),
        _ => return Err(Errno::EINVAL),
    };
    if l_start > OFFSET_MAX - base {
        return Err(Errno::EOVERFLOW);
    }
    let mut start = base + l_start;
    if start < 0 {
        return Err(Errno::EINVAL);
    }
    let end = if l_len > 0 {
        if l_len - 1 > OFFSET_MAX - start {
            return Err(Errno::EOVERFLOW);
        }
        start + (l_len - 1)
    } else if l_len < 0 {
        let end = start - 1;
        start = start.checked_add(l_len).ok_or(Errno::EINVAL)?;
        if start < 0 {
            return Err(Errno::EINVAL);
        }
        end
    } else {
        OFFSET_MAX
    };
    Ok((start, end))
}

/// `(l_start, l_len)` of a range, as `F_GETLK` reports it (`l_len` 0 for
/// "to EOF").
pub(crate) fn to_start_len(start: i64, end: i64) -> (i64, i64) {
    (start, if end == OFFSET_MAX { 0 } else { end - start + 1 })
}

/// One owner's locks (sorted, disjoint) after locking `[start, end]` for
/// `write`, or unlocking it when `write` is `None`: same-type locks that
/// overlap or touch the new one merge into it, other locks lose the part
/// the request covers (a lock around it splits in two).
pub(crate) fn apply<'a>(
    own: impl ExactSizeIterator<Item = &'a Piece>,
    write: Option<bool>,
    start: i64,
    end: i64,
) -> Vec<Piece> {
    let mut out = Vec::with_capacity(own.len() + 2);
    let mut merged = Piece { write: write.unwrap_or(false), start, end };
    for piece in own {
        let touches = piece.end >= merged.start.saturating_sub(1) && piece.start.saturating_sub(1) <= merged.end;
        if write == Some(piece.write) && touches {
            merged.start = merged.start.min(piece.start);
            merged.end = merged.end.max(piece.end);
        } else if !piece.overlaps(start, end) {
            out.push(*piece);
        } else {
            if piece.start < start {
                out.push(Piece { end: start - 1, ..*piece });
            }
            if piece.end > end {
                out.push(Piece { start: end + 1, ..*piece });
            }
        }
    }
    if write.is_some() {
        out.push(merged);
    }
    out.sort_by_key(|p| p.start);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    const SET: i16 = libc::SEEK_SET as i16;

    fn p(write: bool, start: i64, end: i64) -> Piece {
        Piece { write, start, end }
    }

    #[test]
    fn ranges_as_linux_computes_them() {
        assert_eq!(to_range(SET, 10, 5, || 0, || 0), Ok((10, 14)));
        assert_eq!(to_range(SET, 10, 0, || 0, || 0), Ok((10, OFFSET_MAX)));
        assert_eq!(to_range(SET, 10, -4, || 0, || 0), Ok((6, 9)));
        assert_eq!(to_range(SET, 10, -11, || 0, || 0), Err(Errno::EINVAL));
        assert_eq!(to_range(libc::SEEK_CUR as i16, -2, 1, || 5, || 0), Ok((3, 3)));
        assert_eq!(to_range(libc::SEEK_END as i16, 0, 1, || 0, || 100), Ok((100, 100)));
        assert_eq!(to_range(libc::SEEK_END as i16, -101, 1, || 0, || 100), Err(Errno::EINVAL));
        assert_eq!(to_range(7, 0, 0, || 0, || 0), Err(Errno::EINVAL));
        assert_eq!(to_range(SET, 1, i64::MAX, || 0, || 0), Ok((1, OFFSET_MAX)));
        assert_eq!(to_range(SET, 2, i64::MAX, || 0, || 0), Err(Errno::EOVERFLOW));
        assert_eq!(to_range(libc::SEEK_CUR as i16, i64::MAX, 1, || 1, || 0), Err(Errno::EOVERFLOW));
        let unasked = || -> i64 { panic!("a SEEK_SET range reads no offset or size") };
        assert_eq!(to_range(SET, 3, 2, unasked, unasked), Ok((3, 4)));
        assert_eq!(to_start_len(6, 9), (6, 4));
        assert_eq!(to_start_len(6, OFFSET_MAX), (6, 0));
    }

    #[test]
    fn same_type_merges_touching_and_overlapping() {
        let own = [p(false, 0, 4), p(false, 10, 14)];
        assert_eq!(apply(own.iter(), Some(false), 5, 9), [p(false, 0, 14)]);
        assert_eq!(apply(own.iter(), Some(false), 3, 11), [p(false, 0, 14)]);
        assert_eq!(apply(own.iter(), Some(false), 6, 8), [p(false, 0, 4), p(false, 6, 8), p(false, 10, 14)]);
    }

    #[test]
    fn other_type_and_unlock_split() {
        let own = [p(false, 0, 99)];
        assert_eq!(apply(own.iter(), Some(true), 10, 19), [p(false, 0, 9), p(true, 10, 19), p(false, 20, 99)]);
        assert_eq!(apply(own.iter(), None, 10, 19), [p(false, 0, 9), p(false, 20, 99)]);
        assert_eq!(apply(own.iter(), None, 0, OFFSET_MAX), []);
        assert_eq!(apply([p(true, 0, OFFSET_MAX)].iter(), Some(true), 5, 5), [p(true, 0, OFFSET_MAX)]);
        assert_eq!(apply([p(true, 5, OFFSET_MAX)].iter(), None, 0, 9), [p(true, 10, OFFSET_MAX)]);
    }
}
