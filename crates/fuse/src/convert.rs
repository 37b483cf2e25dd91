//! Conversions between the VFS's types and FUSE's: times ([`Timespec`]
//! and [`SystemTime`], both ways, and a `SETATTR`'s time changes), file
//! types, and the attributes an entry or `GETATTR` reply carries, a
//! negative entry's included.
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

pub(crate) fn set_time(t: Option<TimeOrNow>) -> SetTime {
    match t {
        None => SetTime::Omit,
        Some(TimeOrNow::Now) => SetTime::Now,
        Some(TimeOrNow::SpecificTime(t)) => SetTime::At(timespec(t)),
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
