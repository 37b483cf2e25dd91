//! FUSE over io_uring (Linux 6.14+, with the `fuse` module's
//! `enable_uring` parameter set): a queue per possible CPU, each served by
//! a thread pinned to its CPU, so a request is handed over, and its
//! answer back, on the CPU the client runs on — no cross-CPU wake-up, no
//! waking an idle CPU from its halt.
//!
//! Invariant: a queue thread owns its ring and its slots' buffers. The
//! kernel reads and writes a slot's buffers only inside the thread's
//! `io_uring_enter` calls, and only while the slot is registered or
//! committed; the thread reads a request and writes its answer only
//! between those calls, after the slot's completion said the request is
//! there. A slot's buffers live as long as the thread, which exits only
//! when the connection is gone (every slot completed with an error).
//!
//! The queues take every request once each has a slot registered; until
//! then, and for `FORGET`, `BATCH_FORGET` and `INTERRUPT` always, fuser's
//! threads read them from `/dev/fuse` (see the `dev` module).

use crate::fs::VfsFs;
use crate::wire::{self, InHeader, IN_HEADER};
use fuser::{InitFlags, KernelConfig};
use io_uring::{cqueue, opcode, squeue, types, IoUring};
use std::os::fd::{AsRawFd, OwnedFd};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{mpsc, Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

/// Slots (requests in flight) per queue.
const DEPTH: usize = 4;
/// The largest write the kernel may send; a slot's payload holds it.
const MAX_WRITE: u32 = 1 << 20;
/// `FUSE_IO_URING_CMD_REGISTER`: a slot's buffers, and wait for a request.
const CMD_REGISTER: u32 = 1;
/// `FUSE_IO_URING_CMD_COMMIT_AND_FETCH`: an answer, and wait for the next.
const CMD_COMMIT_AND_FETCH: u32 = 2;
/// `struct fuse_uring_req_header`: the in/out header (128 bytes), the
/// opcode's header (128), `struct fuse_uring_ent_in_out` (32).
const HEADERS: usize = 288;
const OP_IN: usize = 128;
const ENT_IN_OUT: usize = 256;
/// A register sent before the kernel has taken `INIT`'s answer fails with
/// EAGAIN: it is sent again after this, for up to [`REGISTER_TIMEOUT`]
/// after the queue's start.
const REGISTER_RETRY: Duration = Duration::from_millis(1);
const REGISTER_TIMEOUT: Duration = Duration::from_secs(10);

type Ring = IoUring<squeue::Entry128, cqueue::Entry>;

/// The queues of a mount: whether they may serve, and once started their
/// threads.
#[derive(Debug)]
pub(crate) struct Rings {
    wanted: bool,
    /// From `INIT` until the device comes: where to send it, a queue
    /// thread each.
    waiting: Mutex<Vec<mpsc::Sender<Arc<OwnedFd>>>>,
    threads: Mutex<Vec<JoinHandle<bool>>>,
    /// Requests each queue served, each on its own cache lines.
    served: Vec<Arc<QueueCount>>,
    /// Whether the kernel agreed and the queue threads run.
    started: AtomicBool,
}

#[derive(Debug, Default)]
#[repr(align(128))]
struct QueueCount(AtomicU64);

impl Rings {
    /// Queues for a mount, if `wanted`.
    pub fn new(wanted: bool) -> Arc<Rings> {
        Arc::new(Rings {
            wanted,
            waiting: Mutex::new(Vec::new()),
            threads: Mutex::new(Vec::new()),
            served: (0..possible_cpus()).map(|_| Arc::default()).collect(),
            started: AtomicBool::new(false),
        })
    }

    /// At `INIT`, if wanted: if the kernel offers FUSE over io_uring and
    /// every queue's ring and thread could be made, asks for it and caps
    /// writes to what a slot holds. The threads wait for the device
    /// ([`Rings::hand`]); the kernel holds requests back until every
    /// queue has registered. False if not.
    pub fn start(&self, config: &mut KernelConfig, fs: &Arc<VfsFs>) -> bool {
        if !self.wanted || !config.capabilities().contains(InitFlags::FUSE_OVER_IO_URING) {
            return false;
        }
        // Made here, so a failure leaves the kernel using the device; each
        // is enabled by the thread that submits to it.
        let Ok(rings) = (0..self.served.len()).map(|_| ring()).collect::<std::io::Result<Vec<Ring>>>() else {
            return false;
        };
        let payload = (MAX_WRITE as usize).max(256 * page_size()).max(8192);
        let mut threads = Vec::with_capacity(rings.len());
        let mut waiting = Vec::with_capacity(rings.len());
        for (qid, (ring, count)) in rings.into_iter().zip(&self.served).enumerate() {
            let (fs, served) = (Arc::clone(fs), Arc::clone(count));
            let (hand, device) = mpsc::channel::<Arc<OwnedFd>>();
            let spawned = std::thread::Builder::new().name(format!("vfscale-ring-{qid}")).spawn(move || {
                let Ok(device) = device.recv() else { return false };
                Queue { qid: qid as u16, fs, device, served }.run(ring, payload)
            });
            match spawned {
                Ok(thread) => threads.push(thread),
                // The threads made so far end as their senders drop.
                Err(_) => return false,
            }
            waiting.push(hand);
        }
        if config.add_capabilities(InitFlags::FUSE_OVER_IO_URING).is_err() {
            return false;
        }
        let _previous = config.set_max_write(MAX_WRITE);
        *self.waiting.lock().unwrap_or_else(|e| e.into_inner()) = waiting;
        *self.threads.lock().unwrap_or_else(|e| e.into_inner()) = threads;
        self.started.store(true, Ordering::Relaxed);
        true
    }

    /// After `INIT`: gives `device`, a duplicate of the session's fd, to
    /// the queue threads if they started; else gives it back.
    pub fn hand(&self, device: OwnedFd) -> Option<OwnedFd> {
        let waiting = std::mem::take(&mut *self.waiting.lock().unwrap_or_else(|e| e.into_inner()));
        if waiting.is_empty() {
            return Some(device);
        }
        let device = Arc::new(device);
        for queue in waiting {
            let _ = queue.send(Arc::clone(&device));
        }
        None
    }

    /// Whether the kernel agreed to the queues at `INIT`: from when all
    /// have registered, they take every request.
    pub fn serving(&self) -> bool {
        self.started.load(Ordering::Relaxed)
    }

    /// Requests the queues served so far.
    pub fn served(&self) -> u64 {
        self.served.iter().map(|c| c.0.load(Ordering::Relaxed)).sum()
    }

    /// Waits for the queue threads, which end with the connection.
    pub fn join(&self) {
        for thread in std::mem::take(&mut *self.threads.lock().unwrap_or_else(|e| e.into_inner())) {
            let _ = thread.join();
        }
    }
}

/// A queue's ring: 128-byte entries (FUSE's command is 80 bytes), one
/// thread submitting, its completions' work run when it waits; disabled
/// until that thread enables it.
fn ring() -> std::io::Result<Ring> {
    Ring::builder().setup_single_issuer().setup_defer_taskrun().setup_r_disabled().build(2 * DEPTH as u32)
}

/// The number of possible CPUs: the kernel makes a queue for each.
fn possible_cpus() -> usize {
    let listed = std::fs::read_to_string("/sys/devices/system/cpu/possible").ok().and_then(|s| {
        s.trim().split(',').try_fold(0, |n, range| {
            let mut ends = range.split('-').map(|x| x.parse::<usize>().ok());
            let first = ends.next()??;
            let last = ends.next().unwrap_or(Some(first))?;
            Some(n + last.checked_sub(first)? + 1)
        })
    });
    // SAFETY: sysconf has no preconditions.
    listed.unwrap_or_else(|| unsafe { libc::sysconf(libc::_SC_NPROCESSORS_CONF) }.max(1) as usize)
}

fn page_size() -> usize {
    // SAFETY: sysconf has no preconditions.
    unsafe { libc::sysconf(libc::_SC_PAGESIZE) }.max(4096) as usize
}

/// One queue: its thread serves the requests of clients on CPU `qid`.
struct Queue {
    qid: u16,
    fs: Arc<VfsFs>,
    device: Arc<OwnedFd>,
    served: Arc<QueueCount>,
}

/// A request slot: the buffers registered with the kernel (see the
/// module's invariant for who touches them when).
struct Slot {
    headers: Box<[u8]>,
    payload: Box<[u8]>,
    /// Where the buffers are, for `REGISTER`; the kernel reads it while
    /// the command is submitted.
    iov: [libc::iovec; 2],
    live: bool,
}

impl Slot {
    fn new(payload: usize) -> Slot {
        let mut headers = vec![0u8; HEADERS].into_boxed_slice();
        let mut payload = vec![0u8; payload].into_boxed_slice();
        let iov = [
            libc::iovec { iov_base: headers.as_mut_ptr().cast(), iov_len: headers.len() },
            libc::iovec { iov_base: payload.as_mut_ptr().cast(), iov_len: payload.len() },
        ];
        Slot { headers, payload, iov, live: true }
    }
}

impl Queue {
    /// Registers the slots and serves until the connection is gone; false
    /// if the ring could not be enabled.
    fn run(self, mut ring: Ring, payload: usize) -> bool {
        pin_to_cpu(usize::from(self.qid));
        if ring.submitter().register_enable_rings().is_err() {
            return false;
        }
        let mut slots: Vec<Slot> = (0..DEPTH).map(|_| Slot::new(payload)).collect();
        for (i, slot) in slots.iter().enumerate() {
            self.push(&mut ring, self.command(CMD_REGISTER, 0, i, Some(&slot.iov)));
        }
        self.serve(&mut ring, &mut slots);
        true
    }

    /// Waits for requests in the slots, answers them, and sends the next
    /// commands, until every slot has ended.
    ///
    /// A register is taken silently (its completion is the first
    /// request). One sent before the kernel has taken `INIT`'s answer
    /// completes with EAGAIN and is sent again: the kernel holds requests
    /// back until every queue has a slot. Any other error ends the slot:
    /// the connection is gone (ENOTCONN), or the kernel refused the
    /// register and went back to the device.
    fn serve(&self, ring: &mut Ring, slots: &mut [Slot]) {
        let mut done = [(0u64, 0i32); DEPTH];
        let mut tidy = Vec::with_capacity(DEPTH);
        let deadline = std::time::Instant::now() + REGISTER_TIMEOUT;
        while slots.iter().any(|s| s.live) {
            match ring.submit_and_wait(1) {
                Ok(_) => {}
                Err(e) if e.raw_os_error() == Some(libc::EINTR) => continue,
                Err(_) => return,
            }
            let mut n = 0;
            for cqe in ring.completion().take(DEPTH) {
                done[n] = (cqe.user_data(), cqe.result());
                n += 1;
            }
            for &(i, result) in &done[..n] {
                let slot = &mut slots[i as usize];
                if result == -libc::EAGAIN && std::time::Instant::now() < deadline {
                    std::thread::sleep(REGISTER_RETRY);
                    self.push(ring, self.command(CMD_REGISTER, 0, i as usize, Some(&slot.iov)));
                    continue;
                }
                if result < 0 {
                    slot.live = false;
                    continue;
                }
                let (commit_id, then_tidy) = self.answer(slot);
                self.push(ring, self.command(CMD_COMMIT_AND_FETCH, commit_id, i as usize, None));
                tidy.extend(then_tidy);
            }
            if !tidy.is_empty() {
                // The answers go first; the tidying is off the clients' path.
                let _ = ring.submit();
                for dir in tidy.drain(..) {
                    self.fs.after_reply(dir);
                }
            }
        }
    }

    /// Serves the request in `slot` and writes its answer there; returns
    /// the request's commit id and the directory to tidy after.
    fn answer(&self, slot: &mut Slot) -> (u64, Option<u64>) {
        let headers = &mut slot.headers;
        let commit_id = u64::from_le_bytes(headers[ENT_IN_OUT + 8..ENT_IN_OUT + 16].try_into().expect("8 bytes"));
        let payload_len = u32::from_le_bytes(headers[ENT_IN_OUT + 16..ENT_IN_OUT + 20].try_into().expect("4 bytes"));
        let payload_len = (payload_len as usize).min(slot.payload.len());
        let (reply, unique, then_tidy) = match InHeader::parse(&headers[..IN_HEADER]) {
            Ok(h) => {
                let served = wire::serve(&self.fs, &h, &headers[OP_IN..OP_IN + OP_IN], &slot.payload[..payload_len]);
                self.fs.count(served.op);
                (served.reply.map(|a| wire::encode(&a)), h.unique, served.then_tidy)
            }
            Err(e) => (Err(e), commit_id, None),
        };
        self.served.0.store(self.served.0.load(Ordering::Relaxed) + 1, Ordering::Relaxed);
        let written = match &reply {
            Ok(bytes) if bytes.len() <= slot.payload.len() => {
                slot.payload[..bytes.len()].copy_from_slice(bytes);
                Ok(bytes.len())
            }
            Ok(_) => Err(vfscale::Errno::EIO),
            Err(e) => Err(*e),
        };
        headers[..wire::OUT_HEADER].copy_from_slice(&wire::out_header(unique, written));
        let payload_sz = written.unwrap_or(0) as u32;
        headers[ENT_IN_OUT + 16..ENT_IN_OUT + 20].copy_from_slice(&payload_sz.to_le_bytes());
        (commit_id, then_tidy)
    }

    /// The `IORING_OP_URING_CMD` for slot `i`: `cmd_op` with
    /// `struct fuse_uring_cmd_req` (flags, commit id, queue), and for a
    /// register the slot's two buffers.
    fn command(&self, cmd_op: u32, commit_id: u64, i: usize, iov: Option<&[libc::iovec; 2]>) -> squeue::Entry128 {
        let mut cmd = [0u8; 80];
        cmd[8..16].copy_from_slice(&commit_id.to_le_bytes());
        cmd[16..18].copy_from_slice(&self.qid.to_le_bytes());
        let mut op = opcode::UringCmd80::new(types::Fd(self.device.as_raw_fd()), cmd_op).cmd(cmd);
        if let Some(iov) = iov {
            op = op.addr(Some(iov.as_ptr() as u64));
        }
        let entry = op.build().user_data(i as u64);
        match iov {
            Some(iov) => with_len(entry, iov.len() as u32),
            None => entry,
        }
    }

    fn push(&self, ring: &mut Ring, entry: squeue::Entry128) {
        // SAFETY: a register's iovec array and the buffers it points to
        // belong to a slot that lives as long as the ring (the slots
        // outlive `serve`, which owns the ring's only use); a commit
        // points to nothing. The queue has room: 2 x DEPTH entries, at
        // most DEPTH pushed between submits.
        let pushed = unsafe { ring.submission().push(&entry) };
        debug_assert!(pushed.is_ok(), "the submission queue holds every slot's command");
    }
}

/// Sets the `len` field of a 128-byte SQE, which `UringCmd80` leaves 0:
/// FUSE's register takes the number of iovecs there.
fn with_len(entry: squeue::Entry128, len: u32) -> squeue::Entry128 {
    /// `struct io_uring_sqe`'s `len`: after opcode, flags, ioprio, fd
    /// (8 bytes), off (8) and addr (8).
    const LEN: usize = 24;
    // SAFETY: `Entry128` is `repr(C)`: a 64-byte `struct io_uring_sqe`
    // followed by 64 bytes, all plain integers (every bit pattern valid,
    // no padding), so it and `[u8; 128]` convert both ways; `transmute`
    // checks the sizes match.
    let mut bytes: [u8; 128] = unsafe { std::mem::transmute(entry) };
    bytes[LEN..LEN + 4].copy_from_slice(&len.to_le_bytes());
    // SAFETY: as above.
    unsafe { std::mem::transmute(bytes) }
}

/// Runs this thread on `cpu` only, if it may.
fn pin_to_cpu(cpu: usize) {
    // SAFETY: `set` is a zeroed cpu_set_t that CPU_SET fills within its
    // bounds (it ignores CPUs past them); sched_setaffinity only reads it.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        libc::CPU_SET(cpu, &mut set);
        libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_register_names_its_two_buffers() {
        let queue_slot = Slot::new(8192);
        let entry = with_len(
            opcode::UringCmd80::new(types::Fd(3), CMD_REGISTER).addr(Some(queue_slot.iov.as_ptr() as u64)).build(),
            2,
        );
        // SAFETY: as in `with_len`.
        let bytes: [u8; 128] = unsafe { std::mem::transmute(entry) };
        assert_eq!(u32::from_le_bytes(bytes[24..28].try_into().unwrap()), 2);
        assert_eq!(u64::from_le_bytes(bytes[16..24].try_into().unwrap()), queue_slot.iov.as_ptr() as u64);
        assert_eq!(u32::from_le_bytes(bytes[8..12].try_into().unwrap()), CMD_REGISTER);
        assert_eq!(i32::from_le_bytes(bytes[4..8].try_into().unwrap()), 3);
        assert_eq!(queue_slot.iov[0].iov_len, HEADERS);
        assert_eq!(queue_slot.iov[1].iov_len, 8192);
    }

    #[test]
    fn possible_cpus_covers_the_online_ones() {
        assert!(possible_cpus() >= crate::cpus());
    }
}
