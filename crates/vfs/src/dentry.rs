//! Dentries: the name -> inode links of the namespace, and the cache
//! entries an rcu-walk reads without locks.
//!
//! Invariant: a dentry's key (parent inode number, name) and its inode (or
//! its absence, for a negative dentry) never change after creation; a
//! rename or a create over a negative makes a *new* dentry. What changes is
//! whether it is hashed, under `seq` (odd while it is being unhashed), and
//! how many users hold it, in `lockref`. Memory is owned by `Arc`s; the
//! dcache's own reference is released through the epoch, so a reader pinned
//! before the unhash can still read it.
//!
//! May import `inode`.

use crate::inode::Inode;
use std::fmt;
use std::sync::Arc;
use vfscale_sync::audited::CountedArc;
use vfscale_sync::audited::{AtomicBool, AtomicPtr, Ordering};
use vfscale_sync::lockref::LockRef;
use vfscale_sync::pad::LinePad;
use vfscale_sync::seqcount::SeqCount;

/// Hash of a (parent, name) key: FNV-1a over the name, mixed with the
/// parent inode number.
pub(crate) fn hash_name(parent_ino: u64, name: &[u8]) -> u64 {
    let mut h = 0xcbf2_9ce4_8422_2325u64 ^ parent_ino.wrapping_mul(0x9e37_79b9_7f4a_7c15);
    for &b in name {
        h = (h ^ u64::from(b)).wrapping_mul(0x0000_0100_0000_01b3);
    }
    h ^ (h >> 29)
}

/// A cached name in a directory: positive (has an inode) or negative.
///
/// Padded, so two dentries never share a line (see `Inode`).
#[repr(C)]
pub struct Dentry {
    _head: LinePad,
    pub(crate) parent_ino: u64,
    pub(crate) name: Box<[u8]>,
    pub(crate) inode: Option<Arc<Inode>>,
    /// For a negative: the parent directory's revision when the miss was
    /// recorded (checked only in a generator's tree).
    pub(crate) neg_rev: u64,
    /// Odd while the dentry is being unhashed (`d_seq`).
    pub(crate) seq: SeqCount,
    /// Users of the dentry (`d_lockref`); dead once evicted.
    pub(crate) lockref: LockRef,
    unhashed: AtomicBool,
    /// Next dentry in the same hash chain (an owned `Arc` pointer).
    pub(crate) hash_next: AtomicPtr<Dentry>,
    pub(crate) hash: u64,
    _tail: LinePad,
}

impl fmt::Debug for Dentry {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Dentry")
            .field("parent_ino", &self.parent_ino)
            .field("name", &String::from_utf8_lossy(&self.name))
            .field("ino", &self.inode.as_ref().map(|i| i.ino()))
            .field("unhashed", &self.is_unhashed())
            .finish()
    }
}

impl Dentry {
    pub(crate) fn new(parent_ino: u64, name: &[u8], inode: Option<Arc<Inode>>, neg_rev: u64) -> Arc<Dentry> {
        Arc::new(Dentry {
            _head: LinePad::new(),
            parent_ino,
            hash: hash_name(parent_ino, name),
            name: name.into(),
            inode,
            neg_rev,
            seq: SeqCount::new(),
            lockref: LockRef::new(0),
            unhashed: AtomicBool::new(false),
            hash_next: AtomicPtr::new(std::ptr::null_mut()),
            _tail: LinePad::new(),
        })
    }

    /// Whether the dentry has left the dcache (unlinked, renamed away,
    /// replaced or evicted).
    pub fn is_unhashed(&self) -> bool {
        self.unhashed.load(Ordering::Acquire)
    }

    pub(crate) fn set_unhashed(&self) {
        self.unhashed.store(true, Ordering::Release);
    }
}

impl Drop for Dentry {
    /// A generator's inode (kernfs, procfs) has this one name, and a later
    /// lookup makes a new inode: open files stop keeping this one per CPU.
    /// (A kernfs rename gives the same inode a new dentry; opens of it then
    /// count in the shared count, which is correct, only not per CPU.)
    fn drop(&mut self) {
        if let Some(inode) = self.inode.as_ref().filter(|inode| inode.has_private()) {
            inode.opens.kill();
        }
    }
}

/// A counted reference on a dentry, as ref-walk takes one per component:
/// `lockref_get_not_dead` on creation, a put on drop.
pub(crate) struct DentryRef {
    dentry: CountedArc<Dentry>,
}

impl DentryRef {
    /// Takes a reference unless the dentry is dead (evicted).
    pub fn try_get(dentry: CountedArc<Dentry>) -> Option<DentryRef> {
        dentry.lockref.get_not_dead().then_some(DentryRef { dentry })
    }

    pub fn dentry(&self) -> &Arc<Dentry> {
        &self.dentry
    }
}

impl Drop for DentryRef {
    fn drop(&mut self) {
        if let Some(mut locked) = self.dentry.lockref.put_or_lock() {
            locked.dec();
        }
    }
}
