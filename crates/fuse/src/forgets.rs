//! `FORGET`s while the io_uring queues serve: batched, and drained where
//! they matter. The queues take every request but `FORGET`,
//! `BATCH_FORGET` and `INTERRUPT`, which stay on `/dev/fuse`; a client
//! that unlinks a file queues a `FORGET` there, and the kernel wakes a
//! sleeping reader for it, on a CPU that is usually idle. On the machine
//! measured that wake-up cost a create + close + unlink loop a third of
//! its time. So a reader that has served a forget rests for
//! [`FORGET_REST`] first: the forgets that come meanwhile wait in the
//! kernel, which hands them over as one `BATCH_FORGET`.
//!
//! fuser 0.18 hands a batch over one node at a time and does not say which
//! is the last, so the rest comes after the batch's first node, and the
//! rest of the batch waits with it. What a forget frees (an unlinked
//! file's space and inode) then comes back up to that much later, unless
//! someone asks: before a queue answers `STATFS`, and before it answers
//! ENOSPC (then serving the request again), it cuts every rest short,
//! waits until no forget has been served for [`BATCH_SETTLE`] (the rest of
//! a batch follows at once), and drains the forgets still waiting in the
//! kernel itself, from a non-blocking clone of the device; so `df` and the
//! space limit see, as on tmpfs, what was removed before.
//!
//! Invariant: the drain reads only its own clone of the connection, never
//! blocking, and answers whatever it reads: forgets go to the nodes,
//! interrupts need no answer, anything else gets ENOSYS; so no request is
//! left unanswered and no queue thread waits on the device. A rest ends
//! within [`FORGET_REST`], or as soon as a drain cuts it short.

use crate::fs::VfsFs;
use crate::wire::{self, OUT_HEADER};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::sync::{Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};

/// How long a `/dev/fuse` reader rests after serving a forget while the
/// queues serve.
pub(crate) const FORGET_REST: Duration = Duration::from_millis(5);

/// How long no forget may have been served before a drain takes the
/// nodes as settled: a batch's later nodes follow its first within
/// microseconds once its rest ends.
const BATCH_SETTLE: Duration = Duration::from_micros(200);

/// How long a drain waits for what the forgotten nodes held to be freed.
const COLLECT: Duration = Duration::from_millis(10);

/// `FUSE_DEV_IOC_CLONE`: `_IOR(229, 0, uint32_t)`.
const FUSE_DEV_IOC_CLONE: libc::c_ulong = 0x8004_e500;
const FORGET: u32 = 2;
const INTERRUPT: u32 = 36;
const BATCH_FORGET: u32 = 42;
/// `struct fuse_in_header`.
const IN_HEADER: usize = 40;

/// A non-blocking clone of the connection, to drain waiting forgets.
#[derive(Debug)]
pub(crate) struct Drain {
    device: OwnedFd,
    /// The read buffer: the kernel takes no read smaller than the largest
    /// write it may send.
    buffer: Mutex<Vec<u8>>,
    rests: Mutex<Rests>,
    /// Signalled when a drain cuts the rests short.
    cut: Condvar,
}

/// The `/dev/fuse` readers' rests.
#[derive(Debug)]
struct Rests {
    /// Readers resting now.
    resting: usize,
    /// Drains that cut rests short so far.
    cuts: u64,
    /// When a forget was last served.
    last_forget: Instant,
}

impl Drain {
    /// A clone of the connection of `session`, for reads of up to
    /// `max_write` bytes of data.
    pub fn open(session: &OwnedFd, max_write: usize) -> std::io::Result<Drain> {
        // SAFETY: a NUL-terminated path; the result is checked.
        let fd = unsafe { libc::open(c"/dev/fuse".as_ptr(), libc::O_RDWR | libc::O_CLOEXEC | libc::O_NONBLOCK) };
        if fd < 0 {
            return Err(std::io::Error::last_os_error());
        }
        // SAFETY: `fd` was just opened and is owned by nothing else.
        let device = unsafe { OwnedFd::from_raw_fd(fd) };
        let session_fd = session.as_raw_fd() as u32;
        // SAFETY: FUSE_DEV_IOC_CLONE reads a u32 fd from the pointer,
        // which points at a live local.
        if unsafe { libc::ioctl(device.as_raw_fd(), FUSE_DEV_IOC_CLONE, &session_fd) } != 0 {
            return Err(std::io::Error::last_os_error());
        }
        let buffer = Mutex::new(vec![0; (max_write + 4096).max(8192 + IN_HEADER)]);
        let rests = Mutex::new(Rests { resting: 0, cuts: 0, last_forget: Instant::now() });
        Ok(Drain { device, buffer, rests, cut: Condvar::new() })
    }

    fn rests(&self) -> MutexGuard<'_, Rests> {
        self.rests.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// A `/dev/fuse` reader served a forget; after the first node of a
    /// request it rests (see the module doc).
    pub fn served_forget(&self, first_of_request: bool) {
        let mut rests = self.rests();
        rests.last_forget = Instant::now();
        if first_of_request {
            rests.resting += 1;
            let cuts = rests.cuts;
            rests = self
                .cut
                .wait_timeout_while(rests, FORGET_REST, |r| r.cuts == cuts)
                .unwrap_or_else(|e| e.into_inner())
                .0;
            rests.resting -= 1;
            rests.last_forget = Instant::now();
        }
    }

    /// Serves every forget the kernel has sent so far: cuts the rests
    /// short, lets the batches they held finish, drains the device, and
    /// frees what the nodes held.
    pub fn drain_all(&self, fs: &VfsFs) {
        // Rests that begin meanwhile are cut short too; a stream of
        // forgets that never settles is waited for at most two rests.
        let deadline = Instant::now() + 2 * FORGET_REST;
        let mut rests = self.rests();
        loop {
            rests.cuts += 1;
            self.cut.notify_all();
            let settled = rests.resting == 0 && rests.last_forget.elapsed() >= BATCH_SETTLE;
            if settled || Instant::now() >= deadline {
                break;
            }
            drop(rests);
            std::thread::sleep(Duration::from_micros(50));
            rests = self.rests();
        }
        drop(rests);
        self.drain(fs);
        fs.collect(COLLECT);
    }

    /// Serves every forget waiting in the kernel now (and answers anything
    /// else that waits); returns how many nodes were forgotten.
    fn drain(&self, fs: &VfsFs) -> usize {
        let mut buffer = self.buffer.lock().unwrap_or_else(|e| e.into_inner());
        let mut forgotten = 0;
        loop {
            // SAFETY: the buffer is ours, locked, and as long as passed.
            let n = unsafe { libc::read(self.device.as_raw_fd(), buffer.as_mut_ptr().cast(), buffer.len()) };
            let Ok(n) = usize::try_from(n) else { return forgotten };
            forgotten += self.serve(fs, &buffer[..n]);
        }
    }

    /// Serves one request read from the clone.
    fn serve(&self, fs: &VfsFs, request: &[u8]) -> usize {
        let Some((opcode, unique, node, body)) = split(request) else { return 0 };
        let forgets = match opcode {
            FORGET => u64_at(body, 0).map(|nlookup| vec![(node, nlookup)]).unwrap_or_default(),
            BATCH_FORGET => batch(body),
            INTERRUPT => Vec::new(),
            _ => {
                let reply = wire::out_header(unique, Err(vfscale::Errno::ENOSYS));
                // SAFETY: `reply` is a live local of the length passed.
                let _ = unsafe { libc::write(self.device.as_raw_fd(), reply.as_ptr().cast(), OUT_HEADER) };
                Vec::new()
            }
        };
        for &(node, nlookup) in &forgets {
            fs.count(crate::requests::Opcode::Forget);
            fs.forget_node(node, nlookup);
        }
        forgets.len()
    }
}

/// A request's opcode, unique id, node id and body.
fn split(request: &[u8]) -> Option<(u32, u64, u64, &[u8])> {
    let header = request.get(..IN_HEADER)?;
    let opcode = u32::from_le_bytes(header[4..8].try_into().ok()?);
    Some((opcode, u64_at(header, 8)?, u64_at(header, 16)?, &request[IN_HEADER..]))
}

fn u64_at(bytes: &[u8], at: usize) -> Option<u64> {
    Some(u64::from_le_bytes(bytes.get(at..at + 8)?.try_into().ok()?))
}

/// `struct fuse_batch_forget_in` and its `struct fuse_forget_one`s.
fn batch(body: &[u8]) -> Vec<(u64, u64)> {
    let Some(count) = body.get(..4).and_then(|b| b.try_into().ok()).map(u32::from_le_bytes) else { return Vec::new() };
    (0..count as usize).map_while(|i| Some((u64_at(body, 8 + 16 * i)?, u64_at(body, 16 + 16 * i)?))).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn request(opcode: u32, node: u64, body: &[u8]) -> Vec<u8> {
        let mut r = vec![0u8; IN_HEADER];
        r[..4].copy_from_slice(&((IN_HEADER + body.len()) as u32).to_le_bytes());
        r[4..8].copy_from_slice(&opcode.to_le_bytes());
        r[8..16].copy_from_slice(&7u64.to_le_bytes());
        r[16..24].copy_from_slice(&node.to_le_bytes());
        r.extend_from_slice(body);
        r
    }

    #[test]
    fn forgets_and_batches_parse() {
        let one = request(FORGET, 9, &3u64.to_le_bytes());
        let (opcode, unique, node, body) = split(&one).unwrap();
        assert_eq!((opcode, unique, node, u64_at(body, 0)), (FORGET, 7, 9, Some(3)));
        let mut body = vec![];
        body.extend_from_slice(&2u32.to_le_bytes());
        body.extend_from_slice(&0u32.to_le_bytes());
        for (node, nlookup) in [(5u64, 1u64), (6, 2)] {
            body.extend_from_slice(&node.to_le_bytes());
            body.extend_from_slice(&nlookup.to_le_bytes());
        }
        assert_eq!(batch(&body), [(5, 1), (6, 2)]);
        // A batch cut short yields what is whole, and a short header none.
        assert_eq!(batch(&body[..body.len() - 1]), [(5, 1)]);
        assert_eq!(split(&one[..IN_HEADER - 1]), None);
    }
}
