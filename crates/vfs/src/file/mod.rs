//! Open file descriptions: what `open(2)` creates and file descriptors
//! share — the inode, the access mode and flags, the offset and the
//! directory-reading position.
//!
//! Invariant: a description's access mode never changes, so the checks
//! `read`/`write` make against it need no lock; the offset changes under
//! the description's own mutex and file contents under the inode's data
//! lock (always taken after the offset), so `read` and `write` on one
//! description are atomic with respect to each other, as Linux's
//! `f_pos_lock` makes them. Reading file data at an explicit offset
//! (`pread`) takes no lock at all: see [`crate::pages`].
//!
//! May import the base modules, the node types, `fs`, `dirlock`,
//! `mount` and `locks`.

pub(crate) mod open_ref;

use crate::errno::{Errno, VfsResult};
use crate::fs::{FileOps, Filesystem};
use crate::inode::{Body, ContentAttrs, Inode};
use crate::mount::MountRef;
use crate::pages::PageMap;
use crate::time::Timespec;
use crate::types::{falloc, DirEntry, FileType, OpenFlags, Stat, Whence};
use crate::Credentials;
use std::fmt;
use std::mem::ManuallyDrop;
use std::sync::Arc;
use vfscale_sync::audited::{AtomicBool, AtomicU64, Mutex, Ordering};
use vfscale_sync::pad::LinePad;
use vfscale_sync::poison::unpoisoned;

/// Entries a listing of a directory whose entries the VFS keeps reads at
/// a time.
const READ_AHEAD: usize = 4096;

/// Where the next `readdir` continues.
#[derive(Debug, Clone, PartialEq, Eq)]
enum DirPos {
    Dot,
    DotDot,
    /// After the entry with this cookie, in a directory whose entries the
    /// VFS keeps (2: after `..`, before every entry), with the entries
    /// that follow it read ahead.
    Cookie(u64, std::collections::VecDeque<(u64, DirEntry)>),
    /// After this name, in a directory its filesystem lists (in name
    /// order).
    After(Option<Box<[u8]>>),
}

impl DirPos {
    /// The position as `telldir` and `lseek` give it: 0 and 1 before and
    /// after `.`, then the cookie of the last entry read; none for a
    /// directory its filesystem lists.
    fn offset(&self) -> Option<u64> {
        match self {
            DirPos::Dot => Some(0),
            DirPos::DotDot => Some(1),
            DirPos::Cookie(cookie, _) => Some(*cookie),
            DirPos::After(_) => None,
        }
    }

    fn at_offset(offset: u64) -> DirPos {
        match offset {
            0 => DirPos::Dot,
            1 => DirPos::DotDot,
            cookie => DirPos::Cookie(cookie, Default::default()),
        }
    }
}

/// An open file description.
///
/// Padded, so two descriptions never share a line (see `Inode`).
#[repr(C)]
pub struct OpenFile {
    _head: LinePad,
    /// Dropped by `drop`, with `mount`, on one look-up of the CPU.
    inode: ManuallyDrop<open_ref::OpenRef>,
    /// The mount it was opened through (Linux's `f_path.mnt`): counted, so
    /// its `umount` is EBUSY while the file is open.
    mount: ManuallyDrop<MountRef>,
    /// The filesystem's open file, for files it serves.
    generated: Option<Box<dyn FileOps>>,
    /// The filesystem, which lists a directory whose names are not in the
    /// dcache (held by such directories only, so opening a file shares no
    /// count).
    generator: Option<Arc<dyn Filesystem>>,
    /// How readdir locks the directory: as the superblock's other readers
    /// of children do (`PerDirectory` for files).
    dir_locks: crate::dirlock::DirLocks,
    flags: OpenFlags,
    readable: bool,
    writable: bool,
    offset: Offset,
    dir_pos: Mutex<DirPos>,
    max_file_size: u64,
    /// Where its inode's flock list keeps this description's flock.
    flock_home: crate::locks::HomeShard,
    /// Where its inode's lease list keeps this description's lease.
    lease_home: crate::locks::HomeShard,
    /// Whether an OFD lock was ever asked for through it: set before the
    /// first request, so a description without one leaves the inode's
    /// record list alone when it goes.
    ofd_locks: AtomicBool,
    /// The record-lock owner shard of its OFD locks ([`lock_id`](Self::lock_id)).
    owner_shard: u8,
    /// The mount's write access, held while a regular file is open for
    /// writing (so a remount to read-only is EBUSY).
    pub(crate) write_access: Option<crate::mount::WriteAccess>,
    _tail: LinePad,
}

impl Drop for OpenFile {
    /// The last reference went: its flock and OFD locks and its lease go,
    /// then its counts on the inode and the mount.
    fn drop(&mut self) {
        let ofd_locks = self.ofd_locks.load(Ordering::Acquire);
        self.inode.locks.file_released(self.lock_id(), &self.flock_home, &self.lease_home, ofd_locks);
        let cpu = vfscale_sync::cpu::current_cpu();
        // SAFETY: each field is taken once, here, and not used after.
        let (inode, mount) = unsafe { (ManuallyDrop::take(&mut self.inode), ManuallyDrop::take(&mut self.mount)) };
        inode.drop_on(cpu);
        mount.drop_on(cpu);
    }
}

/// The record-lock owner shard of the next description this thread opens:
/// the descriptions one thread opens in turn take consecutive shards.
fn next_owner_shard() -> u8 {
    thread_local!(static NEXT: std::cell::Cell<u8> = const { std::cell::Cell::new(0) });
    NEXT.with(|next| {
        let shard = next.get();
        next.set((shard + 1) % crate::locks::OWNER_SHARDS as u8);
        shard
    })
}

impl fmt::Debug for OpenFile {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("OpenFile").field("ino", &self.inode.ino()).field("flags", &self.flags).finish_non_exhaustive()
    }
}

impl OpenFile {
    /// The description as a lock owner (flock, OFD locks, leases): its
    /// address, stable while it is in its `Arc`, and reused only after its
    /// locks were released on drop, with its owner shard.
    pub(crate) fn lock_id(&self) -> crate::locks::FileId {
        crate::locks::FileId::new(self as *const OpenFile as usize, self.owner_shard)
    }

    pub(crate) fn flock_home(&self) -> &crate::locks::HomeShard {
        &self.flock_home
    }

    /// Whether its filesystem serves the file (its reads and writes run the
    /// filesystem's code, which may block).
    pub(crate) fn is_generated(&self) -> bool {
        self.generated.is_some()
    }

    pub(crate) fn lease_home(&self) -> &crate::locks::HomeShard {
        &self.lease_home
    }

    /// Notes that an OFD lock is asked for through the description (the
    /// first time only, a write of its own line).
    pub(crate) fn mark_ofd_locks(&self) {
        if !self.ofd_locks.load(Ordering::Relaxed) {
            self.ofd_locks.store(true, Ordering::Release);
        }
    }

    #[allow(clippy::too_many_arguments)]
    pub(crate) fn new(
        inode: open_ref::OpenRef,
        mount: MountRef,
        flags: OpenFlags,
        max_file_size: u64,
        generator: Option<Arc<dyn Filesystem>>,
        generated: Option<Box<dyn FileOps>>,
        dir_locks: crate::dirlock::DirLocks,
        write_access: Option<crate::mount::WriteAccess>,
    ) -> OpenFile {
        OpenFile {
            _head: LinePad::new(),
            inode: ManuallyDrop::new(inode),
            mount: ManuallyDrop::new(mount),
            generated,
            generator,
            dir_locks,
            flags,
            readable: flags.may_read(),
            writable: flags.may_write(),
            offset: Offset::default(),
            dir_pos: Mutex::new(DirPos::Dot),
            max_file_size,
            flock_home: crate::locks::HomeShard::default(),
            lease_home: crate::locks::HomeShard::default(),
            ofd_locks: AtomicBool::new(false),
            owner_shard: next_owner_shard(),
            write_access,
            _tail: LinePad::new(),
        }
    }

    /// The current offset (`SEEK_CUR` of a lock request).
    pub(crate) fn position(&self) -> u64 {
        self.offset.get()
    }

    /// The inode this description refers to.
    pub fn inode(&self) -> &Arc<Inode> {
        &self.inode
    }

    /// The mount it was opened through.
    pub fn mount(&self) -> &MountRef {
        &self.mount
    }

    /// The flags given to `open`.
    pub fn flags(&self) -> OpenFlags {
        self.flags
    }

    /// Whether it was opened for writing.
    pub fn is_writable(&self) -> bool {
        self.writable
    }

    /// Whether it was opened for reading.
    pub fn is_readable(&self) -> bool {
        self.readable
    }

    fn data(&self) -> VfsResult<&PageMap> {
        match &self.inode.body {
            Body::Regular(data) => Ok(data),
            Body::Directory(_) => Err(Errno::EISDIR),
            Body::Symlink(_) | Body::Generated | Body::Special(..) => Err(Errno::EINVAL),
        }
    }

    /// Reads at the current offset and advances it.
    pub fn read(&self, buf: &mut [u8]) -> VfsResult<usize> {
        self.offset.update(|at| {
            let n = self.pread(buf, at)?;
            Ok((n, at + n as u64))
        })
    }

    /// Reads at `offset` without moving the file offset.
    pub fn pread(&self, buf: &mut [u8], offset: u64) -> VfsResult<usize> {
        if !self.readable {
            return Err(Errno::EBADF);
        }
        if let Some(generated) = &self.generated {
            return generated.read(&self.inode, buf, offset);
        }
        let n = self.data()?.read(buf, offset);
        self.touch_atime();
        Ok(n)
    }

    /// Linux `relatime`: update the access time only when it is older than
    /// the last change or a day old, and not already now (the clock is
    /// coarse: a file read in the tick it was written keeps atime == mtime),
    /// so repeated reads write nothing shared (`atime_needs_update`). The
    /// content cell decides alone where it can: the time of the last
    /// change of the file's names or mode (the other cell's lines, never
    /// ahead of the clock) is read only when nothing on the content's own
    /// lines makes the access time stale and it is behind the clock. A
    /// read-only mount keeps the access time as it is.
    fn touch_atime(&self) {
        let a = self.inode.content();
        let now = Timespec::now();
        if a.atime == now {
            return;
        }
        // The per-CPU records of changes in place hold times of the clock,
        // so, like the other cell's, they are read only when the access
        // time is behind it.
        let stale = a.atime <= a.mtime
            || a.atime <= a.ctime
            || now.sec - a.atime.sec >= 24 * 3600
            || a.atime < now
                && (a.atime <= self.inode.meta().ctime
                    || self.inode.latest_percpu_change().is_some_and(|t| a.atime <= t));
        // A change through the mount (Linux `touch_atime` takes its write
        // access): none on a read-only mount (seen first without a count),
        // nor under a remount to one.
        if stale && self.mount.check_writable().is_ok() {
            if let Ok(_write) = self.mount.want_write() {
                self.inode.update_content(|a| a.atime = now);
            }
        }
    }

    /// Writes at the current offset (at the end with `O_APPEND`) and
    /// advances it.
    pub fn write(&self, buf: &[u8], cred: &Credentials) -> VfsResult<usize> {
        self.offset.update(|at| self.write_at(buf, at, cred))
    }

    /// Writes at `offset` without moving the file offset (`O_APPEND` still
    /// appends, as on Linux).
    pub fn pwrite(&self, buf: &[u8], offset: u64, cred: &Credentials) -> VfsResult<usize> {
        self.write_at(buf, offset, cred).map(|(n, _)| n)
    }

    /// Returns bytes written and the offset after them.
    fn write_at(&self, buf: &[u8], offset: u64, cred: &Credentials) -> VfsResult<(usize, u64)> {
        if !self.writable {
            return Err(Errno::EBADF);
        }
        if let Some(generated) = &self.generated {
            let n = generated.write(&self.inode, buf, offset)?;
            return Ok((n, offset + n as u64));
        }
        let pages = self.data()?;
        if buf.is_empty() {
            return Ok((0, offset));
        }
        let clipped = |start: u64| {
            if start >= self.max_file_size {
                return Err(Errno::EFBIG);
            }
            Ok(&buf[..buf.len().min(usize::try_from(self.max_file_size - start).unwrap_or(usize::MAX))])
        };
        if !self.flags.append() {
            if let Some(n) = self.write_in_place(pages, clipped(offset)?, offset, cred) {
                return Ok((n, offset + n as u64));
            }
        }
        let mut data = pages.lock(self.inode.space());
        let start = if self.flags.append() { data.size() } else { offset };
        let within = clipped(start)?;
        self.inode.remove_privileges(cred);
        let n = data.write(start, within)?;
        // Again after the data: a set-id bit a chmod set while it was
        // copied goes too, as if the chmod came first.
        self.inode.remove_privileges(cred);
        let size = data.size();
        let now = Timespec::now();
        // Under the writer lock, so sizes reach the attributes in order.
        self.inode.update_content(|a| {
            a.size = size;
            a.mtime = now;
            a.ctime = now;
        });
        drop(data);
        Ok((n, start + n as u64))
    }

    /// A write within the size to pages written before, without the
    /// writer lock ([`PageMap::write_in_place`]), its times on the calling
    /// CPU's record ([`Inode::data_changed_in_place`]): writes to
    /// different pages of one file share no line. `None` when it cannot.
    fn write_in_place(&self, pages: &PageMap, buf: &[u8], offset: u64, cred: &Credentials) -> Option<usize> {
        let now = Timespec::now();
        if !self.inode.may_change_in_place(now) {
            return None;
        }
        self.inode.remove_privileges(cred);
        let n = pages.write_in_place(offset, buf)?;
        // Again after the data, as below.
        self.inode.remove_privileges(cred);
        self.inode.data_changed_in_place(now);
        Some(n)
    }

    /// `lseek`: moves the offset; EINVAL if it would become negative. On
    /// a directory the offset is a listing position (`telldir`,
    /// `seekdir`): a cookie that stays valid while entries come and go;
    /// a directory its filesystem lists supports only a rewind.
    pub fn lseek(&self, offset: i64, whence: Whence) -> VfsResult<u64> {
        if self.inode.is_dir() {
            let mut pos = lock(&self.dir_pos);
            let new = match (whence, pos.offset()) {
                (Whence::Set, _) if offset == 0 => 0,
                (_, _) if self.generator.is_some() => return Err(Errno::EINVAL),
                (Whence::Set, _) => offset,
                (Whence::Cur, Some(at)) => (at as i64).checked_add(offset).ok_or(Errno::EOVERFLOW)?,
                _ => return Err(Errno::EINVAL),
            };
            let new = u64::try_from(new).map_err(|_| Errno::EINVAL)?;
            *pos = DirPos::at_offset(new);
            return Ok(new);
        }
        // A seek to where the offset is already writes nothing (two
        // rewinds of one description share no line).
        if whence == Whence::Set && u64::try_from(offset).is_ok_and(|at| at == self.offset.get()) {
            return Ok(offset as u64);
        }
        self.offset.update(|current| self.seek_from(current, offset, whence).map(|new| (new, new)))
    }

    /// Where `lseek(offset, whence)` from `current` moves a file's offset.
    fn seek_from(&self, current: u64, offset: i64, whence: Whence) -> VfsResult<u64> {
        let new = match whence {
            Whence::Set => offset,
            Whence::Cur => (current as i64).checked_add(offset).ok_or(Errno::EOVERFLOW)?,
            Whence::End => (self.inode.content().size as i64).checked_add(offset).ok_or(Errno::EOVERFLOW)?,
            Whence::Data | Whence::Hole => {
                let start = u64::try_from(offset).map_err(|_| Errno::ENXIO)?;
                match (self.data(), whence) {
                    (Ok(data), Whence::Data) => data.seek_data(start)? as i64,
                    (Ok(data), _) => data.seek_hole(start)? as i64,
                    // Other files are all data (Linux `generic_file_llseek`).
                    (Err(_), _) => {
                        let size = self.inode.content().size;
                        if start >= size {
                            return Err(Errno::ENXIO);
                        }
                        if whence == Whence::Data {
                            offset
                        } else {
                            size as i64
                        }
                    }
                }
            }
        };
        u64::try_from(new).map_err(|_| Errno::EINVAL)
    }

    /// `ftruncate`: EINVAL unless a regular file open for writing.
    pub fn truncate(&self, len: i64, cred: &Credentials) -> VfsResult<()> {
        if len < 0 || !self.writable {
            return Err(Errno::EINVAL);
        }
        let data = self.data().map_err(|_| Errno::EINVAL)?;
        truncate_data(&self.inode, data, len as u64, self.max_file_size, Some(cred))
    }

    /// `fallocate(2)`: `mode` 0 reserves pages for `offset..offset + len`
    /// and grows the file to cover it; [`falloc::KEEP_SIZE`] reserves
    /// without growing; [`falloc::PUNCH_HOLE`] (with `KEEP_SIZE`) frees
    /// the range, which then reads as zeros. Every mode sets the
    /// modification and change times and drops set-id bits as a write
    /// does (Linux's `file_modified`); one that finds everything reserved
    /// already takes no lock and stamps them on the calling CPU's record.
    /// Errors as Linux's shmem: EBADF
    /// unless open for writing, ENODEV on anything but a regular file,
    /// EOPNOTSUPP for other modes, EFBIG past the file-size limit, ENOSPC
    /// (leaving nothing allocated) when the space runs out.
    pub fn fallocate(&self, mode: i32, offset: i64, len: i64, cred: &Credentials) -> VfsResult<()> {
        // The order of Linux's `vfs_fallocate` checks.
        if offset < 0 || len <= 0 {
            return Err(Errno::EINVAL);
        }
        let punch = falloc::PUNCH_HOLE | falloc::KEEP_SIZE;
        if mode & !punch != 0 || (mode & falloc::PUNCH_HOLE != 0 && mode != punch) {
            return Err(Errno::EOPNOTSUPP);
        }
        if !self.writable {
            return Err(Errno::EBADF);
        }
        let data = match self.data() {
            Ok(data) if self.generated.is_none() => data,
            Err(Errno::EISDIR) => return Err(Errno::EISDIR),
            _ => return Err(Errno::ENODEV),
        };
        let end = offset.checked_add(len).ok_or(Errno::EFBIG)? as u64;
        if end > self.max_file_size {
            return Err(Errno::EFBIG);
        }
        let (offset, len) = (offset as u64, len as u64);
        let now = Timespec::now();
        let keep_size = mode & falloc::KEEP_SIZE != 0;
        if mode != punch && self.inode.may_change_in_place(now) && data.covers(offset, len, keep_size) {
            self.inode.remove_privileges(cred);
            self.inode.data_changed_in_place(now);
            return Ok(());
        }
        let mut pages = data.lock(self.inode.space());
        if mode == punch {
            pages.punch_hole(offset, len);
            self.inode.remove_privileges(cred);
            self.inode.update_content(|a| {
                a.mtime = now;
                a.ctime = now;
            });
            return Ok(());
        }
        pages.allocate(offset, len, keep_size)?;
        self.inode.remove_privileges(cred);
        let size = pages.size();
        self.inode.update_content(|a| {
            a.size = size;
            a.mtime = now;
            a.ctime = now;
        });
        Ok(())
    }

    /// `fstat`.
    pub fn stat(&self) -> Stat {
        self.inode.stat()
    }

    /// Up to `max` further directory entries; an empty result means the
    /// end. Entries come in name order after `.` and `..`, so an entry that
    /// exists for the whole listing is returned exactly once, even while
    /// others are added and removed.
    pub fn readdir(&self, max: usize) -> VfsResult<Vec<DirEntry>> {
        let dir = self.inode.dir()?;
        if dir.is_dead() {
            return Err(Errno::ENOENT);
        }
        let mut pos = lock(&self.dir_pos);
        let mut out = Vec::new();
        while out.len() < max {
            match &mut *pos {
                DirPos::Dot => {
                    out.push(DirEntry { name: b".".to_vec(), ino: self.inode.ino(), file_type: FileType::Directory });
                    *pos = DirPos::DotDot;
                }
                DirPos::DotDot => {
                    let guard = crossbeam_epoch::pin();
                    let parent = dir.parent(&guard).map_or(self.inode.ino(), |p| p.ino());
                    out.push(DirEntry { name: b"..".to_vec(), ino: parent, file_type: FileType::Directory });
                    *pos = if self.generator.is_some() { DirPos::After(None) } else { DirPos::at_offset(2) };
                }
                DirPos::After(last) if self.generator.is_some() => {
                    let generator = self.generator.as_ref().expect("matched above");
                    let entries = generator.readdir(&self.inode)?;
                    let start = match last {
                        None => 0,
                        Some(last) => entries.partition_point(|e| e.name.as_slice() <= &**last),
                    };
                    let batch: Vec<DirEntry> = entries.into_iter().skip(start).take(max - out.len()).collect();
                    match batch.last() {
                        Some(e) => *pos = DirPos::After(Some(e.name.clone().into_boxed_slice())),
                        None => break,
                    }
                    out.extend(batch);
                }
                DirPos::After(_) => unreachable!("only a listed directory reads by name"),
                DirPos::Cookie(after, ahead) => {
                    // Read ahead: one pass over a split directory finds the
                    // next entries wherever they are, so a listing reads a
                    // chunk at a time. An entry removed after it was read
                    // ahead may still be returned, as POSIX allows.
                    if ahead.is_empty() {
                        ahead.extend(self.dir_locks.list_after(dir, *after, READ_AHEAD));
                    }
                    let Some((cookie, entry)) = ahead.pop_front() else { break };
                    *after = cookie;
                    out.push(entry);
                }
            }
        }
        Ok(out)
    }
}

/// Sets a regular file's size, zero-filling growth (truncate, `O_TRUNC`),
/// clearing the set-id bits a write by `killer` would clear, where there
/// is one (a `setattr` clears them itself, in its update of the mode and
/// owner).
pub(crate) fn truncate_data(
    inode: &Inode,
    data: &PageMap,
    len: u64,
    max_file_size: u64,
    killer: Option<&Credentials>,
) -> VfsResult<()> {
    truncate_then(inode, data, len, max_file_size, killer, false, |_, _| {})
}

/// [`truncate_data`], then `times` on the size and times it set (with
/// the time it set them to), in the same update of them (a `setattr` that
/// names times too, so that no other truncate lands between the two);
/// where `sets_mtime`, an explicit modification time replaces the per-CPU
/// ones in that step.
pub(crate) fn truncate_then(
    inode: &Inode,
    data: &PageMap,
    len: u64,
    max_file_size: u64,
    killer: Option<&Credentials>,
    sets_mtime: bool,
    times: impl FnOnce(&mut ContentAttrs, Timespec),
) -> VfsResult<()> {
    if len > max_file_size {
        return Err(Errno::EFBIG);
    }
    let mut pages = data.lock(inode.space());
    if let Some(cred) = killer {
        inode.remove_privileges(cred);
    }
    pages.set_size(len);
    inode.update_content_setting(sets_mtime, |a| {
        // Read inside the update (where `sets_mtime`, with the per-CPU
        // records held), so that none of their times is later.
        let now = Timespec::now();
        a.size = len;
        a.mtime = now;
        a.ctime = now;
        times(a, now);
    });
    #[cfg(test)]
    crate::test_pause::pause_at(crate::test_pause::Point::SizeAndTimes, &inode.ino().to_le_bytes());
    drop(pages);
    Ok(())
}

/// A description's offset: changed only under its mutex (Linux
/// `f_pos_lock`, so a `read` or `write` and the offset it advances are one
/// step), read without it (a lock request's `SEEK_CUR`, a seek to where
/// the offset already is).
#[derive(Default)]
struct Offset {
    lock: Mutex<()>,
    at: AtomicU64,
}

impl Offset {
    fn get(&self) -> u64 {
        self.at.load(Ordering::Acquire)
    }

    /// Runs `f` on the offset under the mutex; `f` gives its result and
    /// the new offset.
    fn update<R>(&self, f: impl FnOnce(u64) -> VfsResult<(R, u64)>) -> VfsResult<R> {
        let _locked = lock(&self.lock);
        let (result, new) = f(self.at.load(Ordering::Relaxed))?;
        self.at.store(new, Ordering::Release);
        Ok(result)
    }
}

fn lock<T>(m: &Mutex<T>) -> vfscale_sync::audited::MutexGuard<'_, T> {
    unpoisoned(m.lock())
}

#[cfg(test)]
mod tests {
    use super::OpenFile;
    use crate::{Context, Credentials, OpenFlags, Vfs};

    /// Two descriptions one thread opens in turn take different record-lock
    /// owner shards, wherever the allocator puts them (with a hash of the
    /// address, the two OFD owners shared a shard's line one time in 64,
    /// as other allocations between them moved the second).
    #[test]
    fn descriptions_opened_in_turn_take_different_owner_shards() {
        let vfs = Vfs::default();
        let root = Credentials::root();
        let at_root = Context::new(&vfs, &root, vfs.root());
        let open = || at_root.open("f", OpenFlags::CREAT | OpenFlags::RDWR, 0o644).expect("open f");
        // Everything stays allocated to the end, so each block comes from
        // fresh memory and the second description lands further on.
        let mut kept = Vec::new();
        for others in 0..4 * crate::locks::OWNER_SHARDS {
            let first = open();
            // Blocks the size of an `Arc<OpenFile>` (two counts before it).
            let size = std::mem::size_of::<OpenFile>() + 2 * std::mem::size_of::<usize>();
            let between: Vec<_> = (0..others).map(|_| vec![0u8; size]).collect();
            let second = open();
            assert_ne!(
                first.lock_id().owner_shard(),
                second.lock_id().owner_shard(),
                "{others} allocations between them"
            );
            kept.push((first, between, second));
        }
    }
}
