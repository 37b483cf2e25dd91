//! `FORGET`s while the io_uring queues serve: batched, and drained where
//! they matter. The queues take every request but `FORGET`,
//! `BATCH_FORGET` and `INTERRUPT`, which stay on `/dev/fuse`; a client
//! that unlinks a file queues a `FORGET` there, and the kernel wakes a
//! sleeping reader for it, on a CPU that is usually idle, and that wake-up
//! is a large part of what a create + close + unlink loop costs (the
//! figures: `docs/results/mount-bench.md` in the repository, "Forgets,
//! before they rested"). So a reader that has served a forget rests for
//! [`FORGET_REST`] first; once every reader rests, the forgets that come
//! meanwhile wait in the kernel, which hands them over as one
//! `BATCH_FORGET`.
//!
//! fuser 0.18 hands a batch over one node at a time and does not say which
//! is the last, so the rest comes after the batch's first node, and the
//! rest of the batch waits with it. What a forget frees (an unlinked
//! file's space and inode) could then come back up to a rest later, so
//! before a queue answers `STATFS`, and before it answers ENOSPC (then
//! serving the request again), it drains: no rest begins while a drain
//! runs, the rests are cut short, and until forgets have settled (none
//! resting, none served for [`BATCH_SETTLE`]: a batch's later nodes follow
//! its first at once) it reads the forgets still in the kernel itself,
//! from a non-blocking clone of the device, then runs the releases the
//! nodes deferred. That is best effort, not exact: a reader that the
//! kernel has just woken for a forget, and that has not reached the VFS
//! yet after [`BATCH_SETTLE`], is not waited for (as before forgets
//! rested, when every forget raced the queues the same way). A `write`
//! that finds part of the space it needs still held returns short, as
//! any short write.
//!
//! Invariant: the drain reads only its own clone of the connection, never
//! blocking, and answers whatever it reads: forgets go to the nodes,
//! interrupts need no answer, anything else (which the kernel sends to
//! the queues while they serve) gets EIO; so no request is left
//! unanswered and no queue thread waits on the device. A rest ends within
//! [`FORGET_REST`], or as soon as a drain begins.
//!
//! On either transport a forget may also be in the middle of being served
//! on another thread when `STATFS`, or a request that failed with ENOSPC,
//! comes: the kernel hands forgets over before the requests queued after
//! them, so `rm` then `df` would race the reader that took the `FORGET`.
//! [`InService`] closes that race for every forget that has begun: a
//! reader enters it before it counts the forget, and what reports or
//! needs free space waits for the forgets begun before it (see
//! `Server::settle_forgets`). A forget the kernel has handed to a reader
//! that has not reached its handler yet is still not seen.

use crate::fs::Server;
use crate::wire::{self, InHeader, IN_HEADER, OUT_HEADER};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::sync::{Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};
use vfscale_sync::poison::unpoisoned;

/// How long a `/dev/fuse` reader rests after serving a forget while the
/// queues serve.
pub(crate) const FORGET_REST: Duration = Duration::from_millis(5);

/// How long no forget may have been served before a drain takes the
/// forgets as settled: a batch's later nodes follow its first within
/// microseconds once its rest ends.
const BATCH_SETTLE: Duration = Duration::from_micros(200);

/// The longest a drain waits for forgets to settle.
const SETTLE_AT_MOST: Duration = Duration::from_millis(10);

/// `FUSE_DEV_IOC_CLONE`: `_IOR(229, 0, uint32_t)`.
const FUSE_DEV_IOC_CLONE: u32 = 0x8004_e500;

/// The `/dev/fuse` readers' rests after forgets, and the drains that cut
/// them short.
#[derive(Debug)]
struct Rests {
    state: Mutex<RestState>,
    /// Signalled when a drain begins.
    cut: Condvar,
    /// How long a rest lasts unless cut ([`FORGET_REST`]).
    rest: Duration,
    /// The longest a drain waits for forgets to settle ([`SETTLE_AT_MOST`]).
    settle_at_most: Duration,
}

/// How a reader's [`Rests::served_forget`] went.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Rest {
    /// It did not rest: not a request's first node, or a drain ran.
    Skipped,
    /// It rested until a drain began.
    Cut,
    /// It rested for the whole rest.
    RanOut,
}

#[derive(Debug)]
struct RestState {
    /// Readers resting now.
    resting: usize,
    /// Drains running now: no rest begins meanwhile.
    draining: usize,
    /// Drains begun so far: a rest ends when this moves.
    drains: u64,
    /// When a forget was last served.
    last_forget: Instant,
}

impl Rests {
    fn new() -> Rests {
        Rests::with(FORGET_REST, SETTLE_AT_MOST)
    }

    /// Rests of `rest`, and drains that wait at most `settle_at_most`.
    fn with(rest: Duration, settle_at_most: Duration) -> Rests {
        let state = RestState { resting: 0, draining: 0, drains: 0, last_forget: Instant::now() };
        Rests { state: Mutex::new(state), cut: Condvar::new(), rest, settle_at_most }
    }

    fn state(&self) -> MutexGuard<'_, RestState> {
        unpoisoned(self.state.lock())
    }

    /// A reader served a forget; after a request's first node it rests
    /// (unless a drain runs).
    fn served_forget(&self, first_of_request: bool) -> Rest {
        let mut state = self.state();
        state.last_forget = Instant::now();
        if !first_of_request || state.draining != 0 {
            return Rest::Skipped;
        }
        state.resting += 1;
        let drains = state.drains;
        let (mut state, waited) = unpoisoned(self.cut.wait_timeout_while(state, self.rest, |s| s.drains == drains));
        state.resting -= 1;
        state.last_forget = Instant::now();
        if waited.timed_out() {
            Rest::RanOut
        } else {
            Rest::Cut
        }
    }

    /// Runs `drain` (which says whether it found anything) with the rests
    /// cut short and none beginning, until forgets have settled and a
    /// drain finds nothing, or [`SETTLE_AT_MOST`] has passed; whether any
    /// drain found something.
    fn drained(&self, mut drain: impl FnMut() -> bool) -> bool {
        let deadline = Instant::now() + self.settle_at_most;
        let mut state = self.state();
        state.draining += 1;
        state.drains += 1;
        self.cut.notify_all();
        let mut found = false;
        loop {
            let settled = state.resting == 0 && state.last_forget.elapsed() >= BATCH_SETTLE;
            drop(state);
            let more = drain();
            found |= more;
            if (settled && !more) || Instant::now() >= deadline {
                break;
            }
            if !more {
                std::thread::sleep(Duration::from_micros(50));
            }
            state = self.state();
        }
        self.state().draining -= 1;
        found
    }
}

/// A non-blocking clone of the connection, to drain waiting forgets.
#[derive(Debug)]
pub(crate) struct Drain {
    device: OwnedFd,
    /// The read buffer: the kernel takes no read smaller than the largest
    /// write it may send.
    buffer: Mutex<Vec<u8>>,
    rests: Rests,
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
        if unsafe { libc::ioctl(device.as_raw_fd(), FUSE_DEV_IOC_CLONE as _, &session_fd) } != 0 {
            return Err(std::io::Error::last_os_error());
        }
        Ok(Drain::on(device, max_write))
    }

    /// A drain reading `device`, a non-blocking clone of the connection
    /// (or, in tests, whatever stands in for one: see `fuzz_tests`), for
    /// reads of up to `max_write` bytes of data.
    pub(crate) fn on(device: OwnedFd, max_write: usize) -> Drain {
        let buffer = Mutex::new(vec![0; (max_write + 4096).max(8192 + IN_HEADER)]);
        Drain { device, buffer, rests: Rests::new() }
    }

    /// A `/dev/fuse` reader served a forget; after a request's first node
    /// it rests (see the module doc).
    pub fn served_forget(&self, first_of_request: bool) {
        let _how = self.rests.served_forget(first_of_request);
    }

    /// Serves the forgets the kernel has sent so far (see the module doc),
    /// then waits for the forgets other readers are serving and frees what
    /// the nodes held: if there were any, or `always`.
    pub fn drain_all(&self, fs: &Server, always: bool) {
        if self.rests.drained(|| self.drain(fs) > 0) || always {
            fs.settle_forgets();
        }
    }

    /// Serves every forget waiting in the kernel now (and answers anything
    /// else that waits); returns how many nodes were forgotten.
    fn drain(&self, fs: &Server) -> usize {
        let mut buffer = unpoisoned(self.buffer.lock());
        let mut forgotten = 0;
        loop {
            // SAFETY: the buffer is ours, locked, and as long as passed.
            let n = unsafe { libc::read(self.device.as_raw_fd(), buffer.as_mut_ptr().cast(), buffer.len()) };
            let Ok(n) = usize::try_from(n) else {
                let error = std::io::Error::last_os_error().raw_os_error();
                // EAGAIN: nothing waits; ENODEV: the connection is gone.
                debug_assert!(matches!(error, Some(libc::EAGAIN | libc::ENODEV | libc::EINTR)), "{error:?}");
                return forgotten;
            };
            forgotten += self.serve(fs, &buffer[..n]);
        }
    }

    /// Serves one request read from the clone.
    fn serve(&self, fs: &Server, request: &[u8]) -> usize {
        let Ok(h) = InHeader::parse(request) else { return 0 };
        let body = request.get(IN_HEADER..).unwrap_or_default();
        let forgets = match wire::forgets(&h, body) {
            Some(forgets) => forgets,
            None if h.opcode == wire::FUSE_INTERRUPT => Vec::new(),
            None => {
                let reply = wire::out_header(h.unique, Err(vfscale::Errno::EIO));
                // SAFETY: `reply` is a live local of the length passed.
                let _ = unsafe { libc::write(self.device.as_raw_fd(), reply.as_ptr().cast(), OUT_HEADER) };
                Vec::new()
            }
        };
        // Begun before it is counted, as on the /dev/fuse readers.
        let _serving = (!forgets.is_empty()).then(|| {
            let serving = fs.forgetting();
            fs.count_forget_request();
            serving
        });
        for &(node, nlookup) in &forgets {
            fs.count(crate::requests::Opcode::Forget);
            fs.forget_node(node, nlookup);
        }
        forgets.len()
    }
}

/// The forgets being served now (see the module doc): each holds a ticket
/// from when it began until its nodes are forgotten.
#[derive(Debug, Default)]
pub(crate) struct InService {
    state: Mutex<Tickets>,
    /// Signalled when a forget ends while someone waits.
    ended: Condvar,
}

#[derive(Debug, Default)]
struct Tickets {
    /// The next forget's ticket.
    next: u64,
    /// The tickets of the forgets being served.
    serving: Vec<u64>,
    /// Threads in [`InService::wait_for_begun`].
    waiting: usize,
}

/// A forget being served; it ends when this drops.
#[must_use = "the forget ends when this drops"]
#[derive(Debug)]
pub(crate) struct Serving<'a> {
    gate: &'a InService,
    ticket: u64,
}

impl InService {
    fn tickets(&self) -> MutexGuard<'_, Tickets> {
        unpoisoned(self.state.lock())
    }

    /// A forget begins; to be called before it is counted, so that whoever
    /// sees the count and waits also waits for it.
    pub fn begin(&self) -> Serving<'_> {
        let mut tickets = self.tickets();
        let ticket = tickets.next;
        tickets.next += 1;
        tickets.serving.push(ticket);
        Serving { gate: self, ticket }
    }

    /// Waits until every forget begun before this call has ended, or
    /// `timeout` has passed; whether they all ended. Forgets that begin
    /// meanwhile are not waited for, so a steady stream of them cannot
    /// hold it up.
    pub fn wait_for_begun(&self, timeout: Duration) -> bool {
        let mut tickets = self.tickets();
        let upto = tickets.next;
        tickets.waiting += 1;
        let (mut tickets, waited) = unpoisoned(
            self.ended.wait_timeout_while(tickets, timeout, |t| t.serving.iter().any(|&ticket| ticket < upto)),
        );
        tickets.waiting -= 1;
        !waited.timed_out()
    }

    /// Threads waiting for forgets to end now.
    #[cfg(test)]
    pub fn waiting(&self) -> usize {
        self.tickets().waiting
    }
}

impl Drop for Serving<'_> {
    fn drop(&mut self) {
        let mut tickets = self.gate.tickets();
        if let Some(i) = tickets.serving.iter().position(|&t| t == self.ticket) {
            tickets.serving.swap_remove(i);
        }
        let waiting = tickets.waiting > 0;
        drop(tickets);
        if waiting {
            self.gate.ended.notify_all();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;
    use vfscale_sync::test_support::wait_until;

    /// Longer than any test takes: a rest or a wait of this length that
    /// runs out means what should have ended it never came.
    const NEVER: Duration = Duration::from_secs(60);

    #[test]
    fn a_reader_rests_after_a_forget_only_at_a_requests_first_node() {
        let rests = Rests::new();
        assert_eq!(rests.served_forget(false), Rest::Skipped, "a batch's later node rested");
        assert_eq!(rests.served_forget(true), Rest::RanOut, "the first node did not rest");
        assert_eq!(rests.state().resting, 0);
    }

    #[test]
    fn a_drain_cuts_a_rest_short_and_waits_for_it() {
        let rests = Arc::new(Rests::with(NEVER, NEVER));
        let resting = {
            let rests = Arc::clone(&rests);
            std::thread::spawn(move || rests.served_forget(true))
        };
        wait_until("a rest begins", || rests.state().resting > 0);
        let mut drains = 0;
        let found = rests.drained(|| {
            drains += 1;
            drains == 1
        });
        assert!(found);
        // The drain may give up only after NEVER, so it returned because
        // the rest it cut had ended.
        assert_eq!(rests.state().resting, 0, "the drain ended before the rest it cut");
        assert!(drains >= 2, "it drained again after finding something");
        assert_eq!(resting.join().unwrap(), Rest::Cut, "the rest ran its course");
        // While a drain runs no rest begins.
        rests.state().draining += 1;
        assert_eq!(rests.served_forget(true), Rest::Skipped);
    }

    #[test]
    fn a_wait_for_forgets_covers_those_begun_before_it_only() {
        let gate = InService::default();
        let earlier = gate.begin();
        std::thread::scope(|s| {
            let waiter = s.spawn(|| gate.wait_for_begun(NEVER));
            wait_until("the wait begins", || gate.waiting() > 0);
            let later = gate.begin();
            drop(earlier);
            assert!(waiter.join().unwrap(), "the wait ran out with the earlier forget over");
            // The later forget, begun while the wait ran, still holds up
            // a wait that begins after it.
            assert!(!gate.wait_for_begun(Duration::ZERO));
            drop(later);
        });
        assert!(gate.wait_for_begun(Duration::ZERO), "nothing is being served");
    }
}
