//! Conversions between the VFS's types and FUSE's: times ([`Timespec`]
//! and [`SystemTime`], both ways, and a `SETATTR`'s time changes as fuser
//! hands them over, its conversion undone), file types, and the
//! attributes an entry or `GETATTR` reply carries, a negative entry's
//! included.
//!
//! Pure functions of their arguments; it imports no module of this crate,
//! only `vfscale`'s and `fuser`'s types, so the handlers (`fs`) and both
//! front ends (`dev`, `wire`) may use it.

use fuser::{FileAttr, INodeNo, TimeOrNow};
use std::time::{Duration, SystemTime, UNIX_EPOCH};
use vfscale::{FileType, SetTime, Stat, Timespec};

pub(crate) fn system_time(ts: Timespec) -> SystemTime {
    if ts.sec >= 0 {
        UNIX_EPOCH + Duration::new(ts.sec as u64, ts.nsec as u32)
    } else {
        UNIX_EPOCH - Duration::from_secs(ts.sec.unsigned_abs()) + Duration::from_nanos(ts.nsec as u64)
    }
}

pub(crate) fn timespec(t: SystemTime) -> Timespec {
    match t.duration_since(UNIX_EPOCH) {
        Ok(d) => Timespec { sec: d.as_secs() as i64, nsec: i64::from(d.subsec_nanos()) },
        Err(e) => {
            let d = e.duration();
            // At `i64::MIN` seconds `d` is 2^63 seconds, whose negation
            // is `i64::MIN` again (a plain `-` overflowed: a SETATTR to
            // that time panicked).
            let (sec, nsec) = ((d.as_secs() as i64).wrapping_neg(), i64::from(d.subsec_nanos()));
            if nsec == 0 {
                Timespec { sec, nsec }
            } else {
                Timespec { sec: sec - 1, nsec: 1_000_000_000 - nsec }
            }
        }
    }
}

/// A `SETATTR` time as fuser 0.18 hands it to the `/dev/fuse` front end,
/// as the time the kernel sent.
///
/// fuser turns the kernel's `(sec, nsec)` into `UNIX_EPOCH + (sec, nsec)`
/// for `sec >= 0`, which is right, but into `UNIX_EPOCH - (-sec, nsec)`
/// before 1970: `2 * nsec` early (`(-3, 250)`, 2.99999975 s before the
/// epoch, arrives as 3.00000025 s before it). Every time fuser makes is
/// undone exactly: one before the epoch came from a negative `sec`, and
/// its distance from the epoch is `(-sec, nsec)` as the kernel sent them
/// (the kernel's `nsec` is below a second, so `Duration::new` carried
/// nothing). At `i64::MIN` seconds the distance is 2^63 seconds, whose
/// negation wraps back to `i64::MIN`.
pub(crate) fn fuser_request_time(t: SystemTime) -> Timespec {
    match t.duration_since(UNIX_EPOCH) {
        Ok(d) => Timespec { sec: d.as_secs() as i64, nsec: i64::from(d.subsec_nanos()) },
        Err(e) => {
            let d = e.duration();
            Timespec { sec: (d.as_secs() as i64).wrapping_neg(), nsec: i64::from(d.subsec_nanos()) }
        }
    }
}

/// A `SETATTR` time change as fuser hands it over (see
/// [`fuser_request_time`]).
pub(crate) fn fuser_set_time(t: Option<TimeOrNow>) -> SetTime {
    match t {
        None => SetTime::Omit,
        Some(TimeOrNow::Now) => SetTime::Now,
        Some(TimeOrNow::SpecificTime(t)) => SetTime::At(fuser_request_time(t)),
    }
}

pub(crate) fn kind(t: FileType) -> fuser::FileType {
    match t {
        FileType::Directory => fuser::FileType::Directory,
        FileType::Regular => fuser::FileType::RegularFile,
        FileType::Symlink => fuser::FileType::Symlink,
        FileType::Fifo => fuser::FileType::NamedPipe,
        FileType::Socket => fuser::FileType::Socket,
        FileType::CharDevice => fuser::FileType::CharDevice,
        FileType::BlockDevice => fuser::FileType::BlockDevice,
    }
}

fn file_type(mode: u32) -> FileType {
    FileType::from_mode(mode).unwrap_or(FileType::Regular)
}

pub(crate) fn file_attr(id: u64, st: &Stat) -> FileAttr {
    FileAttr {
        ino: INodeNo(id),
        size: st.size,
        blocks: st.blocks,
        atime: system_time(st.atime),
        mtime: system_time(st.mtime),
        ctime: system_time(st.ctime),
        crtime: UNIX_EPOCH,
        kind: kind(file_type(st.mode)),
        perm: (st.mode & 0o7777) as u16,
        nlink: st.nlink,
        uid: st.uid,
        gid: st.gid,
        // FUSE carries the kernel's 32-bit encoding, which is `makedev`'s
        // for every device number that fits in it.
        rdev: st.rdev as u32,
        blksize: 4096,
        flags: 0,
    }
}

/// A negative entry's attributes: node id 0 says "no such name" and makes
/// the kernel keep the miss for the entry's timeout; the rest is unused.
pub(crate) fn negative_attr() -> FileAttr {
    FileAttr {
        ino: INodeNo(0),
        size: 0,
        blocks: 0,
        atime: UNIX_EPOCH,
        mtime: UNIX_EPOCH,
        ctime: UNIX_EPOCH,
        crtime: UNIX_EPOCH,
        kind: fuser::FileType::RegularFile,
        perm: 0,
        nlink: 0,
        uid: 0,
        gid: 0,
        rdev: 0,
        blksize: 4096,
        flags: 0,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use vfscale::{Credentials, OpenFlags, Vfs};

    #[test]
    fn timespec_round_trips_through_system_time() {
        for ts in [
            Timespec { sec: 0, nsec: 0 },
            Timespec { sec: 1_700_000_000, nsec: 5 },
            Timespec { sec: -3, nsec: 250 },
            Timespec { sec: i64::MIN, nsec: 0 },
            Timespec { sec: i64::MIN, nsec: 1 },
            Timespec { sec: i64::MAX, nsec: 999_999_999 },
        ] {
            assert_eq!(timespec(system_time(ts)), ts);
        }
    }

    /// What fuser 0.18's `system_time_from_time` makes of a `SETATTR`
    /// time the kernel sent, copied here with its overflow made explicit
    /// (the workspace builds fuser without overflow checks, so its
    /// `-secs` wraps at `i64::MIN`).
    fn as_fuser_hands_it_over(sec: i64, nsec: u32) -> SystemTime {
        if sec >= 0 {
            UNIX_EPOCH + Duration::new(sec as u64, nsec)
        } else {
            UNIX_EPOCH - Duration::new(sec.wrapping_neg() as u64, nsec)
        }
    }

    #[test]
    fn setattr_times_from_fuser_are_the_kernels() {
        for (sec, nsec) in [
            (0, 0),
            (0, 999_999_999),
            (1_700_000_000, 123_456_789),
            (i64::MAX, 999_999_999),
            (-1, 0),
            (-1, 1),
            (-3, 250),
            (-1_000_000_000, 500_000_000),
            (i64::MIN + 1, 999_999_999),
            (i64::MIN, 0),
        ] {
            let got = fuser_request_time(as_fuser_hands_it_over(sec, nsec));
            assert_eq!(got, Timespec { sec, nsec: i64::from(nsec) }, "({sec}, {nsec})");
        }
        // fuser's own value is 2 * nsec early before the epoch: the reason
        // for the conversion.
        assert_eq!(timespec(as_fuser_hands_it_over(-3, 250)), Timespec { sec: -4, nsec: 999_999_750 });
        let at = |sec| fuser_set_time(Some(TimeOrNow::SpecificTime(as_fuser_hands_it_over(sec, 7))));
        assert_eq!(at(-2), SetTime::At(Timespec { sec: -2, nsec: 7 }));
        assert_eq!(fuser_set_time(Some(TimeOrNow::Now)), SetTime::Now);
        assert_eq!(fuser_set_time(None), SetTime::Omit);
    }

    #[test]
    fn attributes_carry_stat_fields() {
        let vfs = Vfs::default();
        let p = vfs.process(Credentials::root());
        let fd = p.open("/f", OpenFlags::CREAT | OpenFlags::WRONLY, 0o640).unwrap();
        p.write(fd, &[7; 1000]).unwrap();
        let st = p.stat("/f").unwrap();
        let attr = file_attr(42, &st);
        assert_eq!((attr.ino, attr.size, attr.blocks, attr.perm, attr.nlink), (INodeNo(42), 1000, 8, 0o640, 1));
        assert_eq!(attr.kind, fuser::FileType::RegularFile);
        assert_eq!(attr.mtime, system_time(st.mtime));
    }
}
