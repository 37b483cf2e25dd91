//! Stop points for tests: a test arms a point and a key (a name, a path,
//! an inode number), and the next operation that reaches that point with
//! that key stops there until the test lets it go, so that a test orders
//! two operations on the state it means rather than on a timing window.
//!
//! Invariant: `STATE` is 0 (idle), 1 (armed for `ARMED`), 2 (an operation
//! stopped) or 3 (let go). Only the operation that stops moves it from 1
//! to 2, and only the test moves it on from 2; a test holds the guard of
//! [`alone`] while it arms, since the points are the whole binary's, and
//! dropping the guard disarms the point and lets go whatever stopped, so
//! a test that failed leaves nothing armed.
//!
//! May import nothing of the crate.

use vfscale_sync::audited::{AtomicU32, AtomicU64, Mutex, MutexGuard, Ordering::SeqCst};
use vfscale_sync::poison::unpoisoned;

static STATE: AtomicU32 = AtomicU32::new(0);
static ARMED: AtomicU64 = AtomicU64::new(0);
static ONE_AT_A_TIME: Mutex<()> = Mutex::new(());

/// Where an operation may stop.
#[derive(Clone, Copy)]
pub(crate) enum Point {
    /// A create's, between its read of the directory's mode and owner
    /// and its checks, before its name's lock.
    TheCheck,
    /// A create's, after its checks, before it locks its name.
    BeforeTheLock,
    /// Holding the mount's write access, just before the change lands.
    Landing,
    /// An attribute change's, between its checks and its first update.
    AttrCommit,
    /// A split directory's store of a node in a slot (an insert's, or a
    /// split's copy into a half), between storing it and counting it. In
    /// a split (the name that makes one included) the stop holds the
    /// bucket's and its halves' locks, and the resize lock, and the node
    /// is in no table yet: a test that stops there must not lock the
    /// bucket, nor expect readers to find the node, before letting go.
    Published,
    /// A truncate's, once its size and times landed, still holding its
    /// file's data writer lock.
    SizeAndTimes,
    /// A walk of a split directory's bucket (a look-up's or a listing's),
    /// at a node it has just read (the key: the node's hash).
    Walked,
}

fn key_of(point: Point, key: &[u8]) -> u64 {
    // FNV-1a, then the point in the top byte.
    let hash = key.iter().fold(0xcbf2_9ce4_8422_2325_u64, |h, &b| (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3));
    hash ^ (point as u64) << 56
}

/// The right to arm, held for the whole test: dropped, it disarms.
pub(crate) struct Alone {
    _one: MutexGuard<'static, ()>,
}

impl Drop for Alone {
    fn drop(&mut self) {
        STATE.store(0, SeqCst);
    }
}

pub(crate) fn alone() -> Alone {
    Alone { _one: unpoisoned(ONE_AT_A_TIME.lock()) }
}

/// Asks the next operation that reaches `point` with `key` to stop there;
/// lets go an operation stopped now, which may stop again at the new
/// point.
pub(crate) fn arm(point: Point, key: &[u8]) {
    ARMED.store(key_of(point, key), SeqCst);
    STATE.store(1, SeqCst);
}

/// Waits until an operation has stopped, or `gone` says that it never
/// will (its thread ended), and then disarms the point, so that none of
/// the test's own operations stops at it.
pub(crate) fn wait_for_the_stop(gone: impl Fn() -> bool) {
    while STATE.load(SeqCst) != 2 && !gone() {
        std::thread::yield_now();
    }
    let _ = STATE.compare_exchange(1, 0, SeqCst, SeqCst);
}

/// Yields while `done` is false, some 10,000 times at most: time for an
/// operation that should be waiting on a stopped one to show that it is
/// not (it finishes, and the test's assertions on it fail). A passing
/// test never depends on it: what should wait has not finished either way.
pub(crate) fn give_time(done: impl Fn() -> bool) {
    for _ in 0..10_000 {
        if done() {
            return;
        }
        std::thread::yield_now();
    }
}

/// Lets the stopped operation go, and stops no other.
pub(crate) fn let_go() {
    STATE.store(3, SeqCst);
}

/// Stops here while a test asks for `point` and `key` (see the module
/// doc); uncounted by the line audit.
pub(crate) fn pause_at(point: Point, key: &[u8]) {
    vfscale_sync::audit::uncounted(|| {
        if ARMED.load(SeqCst) == key_of(point, key) && STATE.compare_exchange(1, 2, SeqCst, SeqCst).is_ok() {
            while STATE.load(SeqCst) == 2 {
                std::thread::yield_now();
            }
        }
    });
}
