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
//! there. A slot's buffers outlive the thread's ring, which the thread
//! drops when every slot has ended (the connection is gone, or the kernel
//! refused the registers) or `io_uring_enter` fails.
//!
//! Once the kernel agreed at `INIT`, it holds every request back until
//! each queue has a slot registered; then the queues take them all but
//! `FORGET`, `BATCH_FORGET` and `INTERRUPT`, which fuser's threads read
//! from `/dev/fuse` (see the `dev` module; how they rest, and how a queue
//! drains forgets itself, is the `forgets` module's). So a queue must not
//! stop while the mount lives: failures are ruled out before the kernel is
//! asked, a handler that panics answers EIO, and a queue that stops all
//! the same (an `io_uring_enter` error it cannot retry, a panic outside a
//! handler) aborts the connection (see the `abort` module), so its CPU's
//! clients, and every other, get ENOTCONN instead of waiting forever;
//! [`Rings::dead`] says which queue stopped and why.

use crate::abort::Connection;
use crate::forgets::Drain;
use crate::fs::Server;
use crate::wire::{self, InHeader, IN_HEADER};
use fuser::{InitFlags, KernelConfig};
use io_uring::{cqueue, opcode, squeue, types, IoUring};
use std::os::fd::{AsRawFd, OwnedFd};
use std::panic::AssertUnwindSafe;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{mpsc, Arc, Mutex, OnceLock};
use std::thread::JoinHandle;
use std::time::Duration;
use vfscale_sync::poison::unpoisoned;

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
/// A register sent before the kernel is done with `INIT` fails with
/// EAGAIN, and is sent again after this. (The device reaches the queues
/// after fuser has answered `INIT`, so this is a safeguard.)
const REGISTER_RETRY: Duration = Duration::from_millis(1);

type Ring = IoUring<squeue::Entry128, cqueue::Entry>;

/// The queues of a mount: whether they may serve, and once started their
/// threads.
#[derive(Debug)]
pub(crate) struct Rings {
    wanted: bool,
    /// From `INIT` until the device comes: where to send it, a queue
    /// thread each.
    waiting: Mutex<Vec<mpsc::Sender<Device>>>,
    /// The queues' clone of the device, to drain forgets (see the
    /// `forgets` module); set when the device comes, if it could be made.
    drain: OnceLock<Arc<Drain>>,
    threads: Mutex<Vec<JoinHandle<()>>>,
    /// Requests each queue served, each on its own cache lines.
    served: Vec<Arc<QueueCount>>,
    /// Whether the kernel offered FUSE over io_uring at `INIT`.
    offered: AtomicBool,
    /// Whether the kernel agreed and the queue threads run.
    started: AtomicBool,
    /// What the queues report back.
    health: Arc<Health>,
}

/// What a mount's queues share: whether one was refused or stopped, and
/// how to end the connection if one stops.
#[derive(Debug, Default)]
struct Health {
    /// A queue's register was refused: the kernel went back to the device.
    refused: AtomicBool,
    /// A queue stopped while the connection lived.
    stopping: AtomicBool,
    /// Why the first queue that stopped stopped, and what became of the
    /// connection, once it was aborted.
    dead: Mutex<Option<String>>,
    /// The mount's connection, known before any queue serves.
    connection: OnceLock<Connection>,
    /// Set by a test: each queue stops when its wait next ends, as on
    /// an `io_uring_enter` error it cannot retry.
    fault: AtomicBool,
}

impl Health {
    /// Queue `qid` stopped while the connection lived: aborts the
    /// connection, so no request waits for the queue forever, and then
    /// records why (the first queue to stop does both; the rest end with
    /// the connection).
    fn died(&self, qid: u16, why: &str) {
        if self.stopping.swap(true, Ordering::AcqRel) {
            return;
        }
        let aborted = match self.connection.get() {
            Some(connection) => connection.abort(),
            None => Err("the mount's connection is not known".into()),
        };
        let how = match aborted {
            Ok(how) => format!("the connection was aborted {how}, so its clients get ENOTCONN"),
            Err(e) => {
                format!("the connection could not be aborted ({e}); requests wait until the server exits")
            }
        };
        *unpoisoned(self.dead.lock()) = Some(format!("the io_uring queue of CPU {qid} stopped: {why}; {how}"));
    }
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
            drain: OnceLock::new(),
            threads: Mutex::new(Vec::new()),
            served: (0..possible_cpus().unwrap_or(0)).map(|_| Arc::default()).collect(),
            offered: AtomicBool::new(false),
            started: AtomicBool::new(false),
            health: Arc::default(),
        })
    }

    /// At `INIT`, if wanted: if the kernel offers FUSE over io_uring and
    /// every queue's ring and thread could be made, asks for it and caps
    /// writes to what a slot holds. The threads wait for the device
    /// ([`Rings::hand`]); the kernel holds requests back until every
    /// queue has registered. False if not.
    pub fn start(&self, config: &mut KernelConfig, fs: &Arc<Server>) -> bool {
        let offered = config.capabilities().contains(InitFlags::FUSE_OVER_IO_URING);
        self.offered.store(offered, Ordering::Relaxed);
        if !self.wanted || !offered || self.served.is_empty() {
            return false;
        }
        // Made and enabled (each by the thread that submits to it) before
        // the kernel is asked, so a failure leaves it using the device.
        let Ok(rings) = (0..self.served.len()).map(|_| ring()).collect::<std::io::Result<Vec<Ring>>>() else {
            return false;
        };
        let payload = (MAX_WRITE as usize).max(256 * page_size()).max(8192);
        let mut threads = Vec::with_capacity(rings.len());
        let mut waiting = Vec::with_capacity(rings.len());
        let (enabled, enables) = mpsc::channel::<bool>();
        for (qid, (ring, count)) in rings.into_iter().zip(&self.served).enumerate() {
            let queue = (qid as u16, Arc::clone(fs), Arc::clone(count), Arc::clone(&self.health));
            let (hand, device) = mpsc::channel::<Device>();
            let enabled = enabled.clone();
            let spawned = std::thread::Builder::new().name(format!("vfscale-ring-{qid}")).spawn(move || {
                let (qid, fs, served, health) = queue;
                pin_to_cpu(usize::from(qid));
                let ok = ring.submitter().register_enable_rings().is_ok();
                let _ = enabled.send(ok);
                let Ok((device, drain)) = device.recv() else { return };
                if !ok {
                    return;
                }
                let queue = Queue { qid, fs, device, drain, served, health: Arc::clone(&health) };
                match std::panic::catch_unwind(AssertUnwindSafe(|| queue.run(ring, payload))) {
                    Ok(Ok(())) => {}
                    Ok(Err(why)) => health.died(qid, &why),
                    Err(_) => health.died(qid, "its thread panicked"),
                }
            });
            match spawned {
                Ok(thread) => threads.push(thread),
                // The threads made so far end as their senders drop.
                Err(_) => return false,
            }
            waiting.push(hand);
        }
        drop(enabled);
        if !(0..threads.len()).all(|_| enables.recv() == Ok(true)) {
            return false;
        }
        if config.add_capabilities(InitFlags::FUSE_OVER_IO_URING).is_err() {
            return false;
        }
        let _previous = config.set_max_write(MAX_WRITE);
        *unpoisoned(self.waiting.lock()) = waiting;
        *unpoisoned(self.threads.lock()) = threads;
        self.started.store(true, Ordering::Relaxed);
        true
    }

    /// After `INIT`: gives `device`, a duplicate of the session's fd, to
    /// the queue threads if they started, with `connection`, which a
    /// queue that stops aborts; else gives the device back.
    pub fn hand(&self, device: OwnedFd, connection: Connection) -> Option<OwnedFd> {
        let _ = self.health.connection.set(connection);
        let waiting = std::mem::take(&mut *unpoisoned(self.waiting.lock()));
        if waiting.is_empty() {
            return Some(device);
        }
        let drain = Drain::open(&device, MAX_WRITE as usize).ok().map(Arc::new);
        if let Some(drain) = &drain {
            let _ = self.drain.set(Arc::clone(drain));
        }
        let device = Arc::new(device);
        for queue in waiting {
            let _ = queue.send((Arc::clone(&device), drain.clone()));
        }
        None
    }

    /// Where a `/dev/fuse` reader that served a forget rests (see the
    /// `forgets` module), while the queues serve and can drain forgets.
    pub fn forget_rest(&self) -> Option<&Drain> {
        self.drain.get().filter(|_| self.serving()).map(|d| &**d)
    }

    /// Whether the queues serve: the kernel agreed at `INIT` and refused
    /// no register since (from when all have registered, they take every
    /// request but the forgets).
    pub fn serving(&self) -> bool {
        self.started.load(Ordering::Relaxed) && !self.health.refused.load(Ordering::Relaxed)
    }

    /// Which queue stopped while the connection lived, why, and whether
    /// the connection could be aborted; `None` while every queue serves
    /// (or ended with the connection).
    pub fn dead(&self) -> Option<String> {
        unpoisoned(self.health.dead.lock()).clone()
    }

    /// Makes every queue stop when its wait next ends, as on an
    /// `io_uring_enter` error it cannot retry: a queue stops once a
    /// request wakes it, leaving that request unanswered.
    #[cfg(test)]
    pub fn fail_queues(&self) {
        self.health.fault.store(true, Ordering::Relaxed);
    }

    /// Whether the mount asked for the queues.
    pub fn wanted(&self) -> bool {
        self.wanted
    }

    /// Whether the kernel offered FUSE over io_uring at `INIT`.
    pub fn offered(&self) -> bool {
        self.offered.load(Ordering::Relaxed)
    }

    /// Requests the queues served so far.
    pub fn served(&self) -> u64 {
        self.served.iter().map(|c| c.0.load(Ordering::Relaxed)).sum()
    }

    /// Waits for the queue threads, which end with the connection.
    pub fn join(&self) {
        for thread in std::mem::take(&mut *unpoisoned(self.threads.lock())) {
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

/// The number of possible CPUs, for which the kernel makes a queue each;
/// `None` if the kernel does not say (then the queues are not used: one
/// left unregistered would hold every request back). Not the per-CPU
/// slot count of `vfscale_sync::cpu`, which falls back to a guess.
fn possible_cpus() -> Option<usize> {
    let listed = std::fs::read_to_string("/sys/devices/system/cpu/possible").ok()?;
    listed.trim().split(',').try_fold(0, |n, range| {
        let mut ends = range.split('-').map(|x| x.parse::<usize>().ok());
        let first = ends.next()??;
        let last = ends.next().unwrap_or(Some(first))?;
        Some(n + last.checked_sub(first)? + 1)
    })
}

fn page_size() -> usize {
    // SAFETY: sysconf has no preconditions.
    unsafe { libc::sysconf(libc::_SC_PAGESIZE) }.max(4096) as usize
}

/// What a queue thread gets once the device has come: a duplicate of the
/// session's fd, and the clone that drains forgets, if it could be made.
type Device = (Arc<OwnedFd>, Option<Arc<Drain>>);

/// One queue: its thread serves the requests of clients on CPU `qid`.
struct Queue {
    qid: u16,
    fs: Arc<Server>,
    device: Arc<OwnedFd>,
    drain: Option<Arc<Drain>>,
    served: Arc<QueueCount>,
    health: Arc<Health>,
}

/// A request slot: the buffers registered with the kernel (see the
/// module's invariant for who touches them when).
struct Slot {
    headers: Box<[u8]>,
    payload: Box<[u8]>,
    /// Where the buffers are, for `REGISTER`; the kernel reads it while
    /// the command is submitted.
    iov: [libc::iovec; 2],
    /// Not yet ended by an error completion.
    live: bool,
    /// Has held a request: its register was taken.
    fetched: bool,
}

impl Slot {
    fn new(payload: usize) -> Slot {
        let mut headers = vec![0u8; HEADERS].into_boxed_slice();
        let mut payload = vec![0u8; payload].into_boxed_slice();
        let iov = [
            libc::iovec { iov_base: headers.as_mut_ptr().cast(), iov_len: headers.len() },
            libc::iovec { iov_base: payload.as_mut_ptr().cast(), iov_len: payload.len() },
        ];
        Slot { headers, payload, iov, live: true, fetched: false }
    }
}

impl Queue {
    /// Registers the slots and serves until the connection is gone (its
    /// thread was pinned and the ring enabled at the start); an error if
    /// the queue stopped before.
    fn run(self, ring: Ring, payload: usize) -> Result<(), String> {
        let mut slots: Vec<Slot> = (0..DEPTH).map(|_| Slot::new(payload)).collect();
        // Declared after the slots, so it drops first: the kernel lets go
        // of the buffers before they are freed.
        let mut ring = ring;
        for (i, slot) in slots.iter().enumerate() {
            self.push(&mut ring, self.command(CMD_REGISTER, 0, i, Some(&slot.iov)));
        }
        self.serve(&mut ring, &mut slots)
    }

    /// Waits for requests in the slots, answers them, and sends the next
    /// commands, until every slot has ended.
    ///
    /// A register is taken silently (its completion is the first
    /// request); one that completes with EAGAIN (the kernel not yet done
    /// with `INIT`) is sent again. ENOTCONN or ECONNABORTED ends a slot:
    /// the connection is gone. Another error on a register means the
    /// kernel refused it and went back to the device (`serving` says so
    /// from then on). A handler that panics answers EIO: a queue that
    /// stopped would leave its CPU's clients waiting. An error of
    /// `io_uring_enter` other than EINTR, EAGAIN or EBUSY stops the queue
    /// with that error (its thread then aborts the connection).
    fn serve(&self, ring: &mut Ring, slots: &mut [Slot]) -> Result<(), String> {
        let mut done = [(0u64, 0i32); DEPTH];
        let mut tidy = Vec::with_capacity(DEPTH);
        while slots.iter().any(|s| s.live) {
            match ring.submit_and_wait(1) {
                Ok(_) if self.health.fault.load(Ordering::Relaxed) => {
                    return Err("a fault injected by a test".into());
                }
                Ok(_) => {}
                Err(e) if matches!(e.raw_os_error(), Some(libc::EINTR | libc::EAGAIN | libc::EBUSY)) => continue,
                Err(e) => return Err(format!("io_uring_enter failed: {e}")),
            }
            let mut n = 0;
            for cqe in ring.completion().take(DEPTH) {
                done[n] = (cqe.user_data(), cqe.result());
                n += 1;
            }
            for &(i, result) in &done[..n] {
                let slot = &mut slots[i as usize];
                if result == -libc::EAGAIN {
                    std::thread::sleep(REGISTER_RETRY);
                    self.push(ring, self.command(CMD_REGISTER, 0, i as usize, Some(&slot.iov)));
                    continue;
                }
                if result < 0 {
                    if !slot.fetched && !matches!(-result, libc::ENOTCONN | libc::ECONNABORTED) {
                        self.health.refused.store(true, Ordering::Relaxed);
                    }
                    slot.live = false;
                    continue;
                }
                slot.fetched = true;
                let (commit_id, then_tidy) = self.answer(slot);
                self.push(ring, self.command(CMD_COMMIT_AND_FETCH, commit_id, i as usize, None));
                tidy.extend(then_tidy);
            }
            if !tidy.is_empty() {
                // The answers go first; the tidying is off the clients' path.
                let _ = ring.submit();
                for dir in tidy.drain(..) {
                    self.fs.hand_on_releases(dir);
                }
            }
        }
        Ok(())
    }

    /// Serves a request; first drains the forgets waiting on the device
    /// before a `STATFS`, and before serving again a request that failed
    /// with ENOSPC (see the `forgets` module), so both see what they
    /// freed.
    fn serve_request(&self, h: &InHeader, op_in: &[u8], args: &[u8], room: usize) -> wire::Handled {
        let drain = |always| self.drain.as_ref().map(|d| d.drain_all(&self.fs, always)).is_some();
        if h.opcode == wire::FUSE_STATFS {
            drain(false);
        }
        let served = wire::serve(&self.fs, h, op_in, args, room);
        if matches!(served.reply, Err(vfscale::Errno::ENOSPC)) && drain(true) {
            return wire::serve(&self.fs, h, op_in, args, room);
        }
        served
    }

    /// Serves the request in `slot` and writes its answer there; returns
    /// the request's commit id and the directory to tidy after.
    fn answer(&self, slot: &mut Slot) -> (u64, Option<u64>) {
        let headers = &mut slot.headers;
        let commit_id = u64::from_le_bytes(headers[ENT_IN_OUT + 8..ENT_IN_OUT + 16].try_into().expect("8 bytes"));
        let payload_len = u32::from_le_bytes(headers[ENT_IN_OUT + 16..ENT_IN_OUT + 20].try_into().expect("4 bytes"));
        let payload_len = (payload_len as usize).min(slot.payload.len());
        let room = slot.payload.len();
        let (reply, unique, then_tidy) = match InHeader::parse(&headers[..IN_HEADER]) {
            Ok(h) => {
                let (op_in, args) = (&headers[OP_IN..OP_IN + OP_IN], &slot.payload[..payload_len]);
                let served = std::panic::catch_unwind(AssertUnwindSafe(|| self.serve_request(&h, op_in, args, room)));
                match served {
                    Ok(served) => {
                        self.fs.count(served.op);
                        (served.reply.map(|a| wire::encode(&a)), h.unique, served.then_tidy)
                    }
                    Err(_) => (Err(vfscale::Errno::EIO), h.unique, None),
                }
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

/// Runs this thread on `cpu` only, if it may. The mask is sized for
/// `cpu`, so any CPU number the kernel knows works (libc's fixed
/// `cpu_set_t` holds 1024); a CPU the thread may not use leaves its
/// affinity as it was.
fn pin_to_cpu(cpu: usize) {
    let mask = cpu_mask(cpu);
    // SAFETY: `mask` is an initialised buffer of `size_of_val(&mask)`
    // bytes that sched_setaffinity only reads; its layout (an array of
    // unsigned longs, bit n of word n / 64 for CPU n) is the kernel's.
    unsafe {
        libc::sched_setaffinity(0, std::mem::size_of_val(mask.as_slice()), mask.as_ptr().cast::<libc::cpu_set_t>());
    }
}

/// The kernel's CPU mask with only `cpu` set, in as many words as it
/// needs.
fn cpu_mask(cpu: usize) -> Vec<libc::c_ulong> {
    let bits = libc::c_ulong::BITS as usize;
    let mut mask = vec![0; cpu / bits + 1];
    mask[cpu / bits] = 1 << (cpu % bits);
    mask
}

/// A queue's [`Queue::answer`] without a ring or a kernel, for the tests
/// that feed it slots of their own making (`fuzz_tests`): `answer` reads
/// and writes only the slot, the server and the drain, never the device.
#[cfg(test)]
mod affinity_tests {
    use super::*;

    #[test]
    fn a_cpu_past_libcs_set_gets_a_mask_of_its_own_size() {
        assert_eq!(cpu_mask(0), vec![1]);
        assert_eq!(cpu_mask(65), vec![0, 2]);
        let far = cpu_mask(4100);
        assert_eq!(far.len(), 4100 / 64 + 1);
        assert_eq!(far.iter().map(|w| w.count_ones()).sum::<u32>(), 1);
        assert_eq!(far[4100 / 64], 1 << (4100 % 64));
    }

    #[test]
    fn pinning_to_a_cpu_the_machine_lacks_leaves_the_thread_as_it_was() {
        std::thread::spawn(|| {
            let before = std::fs::read_to_string("/proc/thread-self/status").unwrap();
            let allowed = |status: &str| status.lines().find(|l| l.starts_with("Cpus_allowed_list")).map(str::to_owned);
            pin_to_cpu(5000);
            let after = std::fs::read_to_string("/proc/thread-self/status").unwrap();
            assert_eq!(allowed(&before), allowed(&after));
        })
        .join()
        .unwrap();
    }
}

#[cfg(test)]
pub(crate) mod detached {
    use super::*;

    /// The slot's headers (`struct fuse_uring_req_header`), and where the
    /// opcode's header and `struct fuse_uring_ent_in_out` begin in them.
    pub(crate) const HEADERS: usize = super::HEADERS;
    pub(crate) const OP_IN: usize = super::OP_IN;
    pub(crate) const ENT_IN_OUT: usize = super::ENT_IN_OUT;

    /// A slot after its answer, with what `answer` returned.
    #[derive(Debug)]
    pub(crate) struct Answered {
        pub headers: Box<[u8]>,
        pub payload: Box<[u8]>,
        pub commit_id: u64,
        pub then_tidy: Option<u64>,
    }

    /// Answers, as queue 0 of `fs` draining forgets through `drain`, the
    /// request in a slot whose headers begin with `headers` and whose
    /// payload buffer of `room` bytes begins with `payload` (the rest of
    /// both zero, what does not fit left out). Its device is `/dev/null`.
    pub(crate) fn answer(
        fs: &Arc<Server>,
        drain: Option<Arc<Drain>>,
        headers: &[u8],
        payload: &[u8],
        room: usize,
    ) -> Answered {
        let device = Arc::new(OwnedFd::from(std::fs::File::open("/dev/null").expect("/dev/null opens")));
        let queue = Queue { qid: 0, fs: Arc::clone(fs), device, drain, served: Arc::default(), health: Arc::default() };
        let mut slot = Slot::new(room);
        let n = headers.len().min(HEADERS);
        slot.headers[..n].copy_from_slice(&headers[..n]);
        let n = payload.len().min(room);
        slot.payload[..n].copy_from_slice(&payload[..n]);
        let (commit_id, then_tidy) = queue.answer(&mut slot);
        Answered { headers: slot.headers, payload: slot.payload, commit_id, then_tidy }
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
        assert!(possible_cpus().is_some_and(|n| n >= vfscale_sync::cpu::usable_cpus()));
    }
}
