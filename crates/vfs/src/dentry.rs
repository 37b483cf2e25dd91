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
use vfscale_sync::audited::{AtomicBool, AtomicPtr, AtomicU32, AtomicU64, Ordering};
use vfscale_sync::lockref::LockRef;
use vfscale_sync::pad::LinePad;
use vfscale_sync::seqcount::SeqCount;

/// The state every name hash starts from: 0, so that the hash is one
/// fixed function of the name in every run (experiments and tests place
/// names the same way each time), until [`randomize_name_hash`] draws a
/// secret one.
static HASH_KEY: AtomicU64 = AtomicU64::new(0);
/// [`KEY_OPEN`] until the key is drawn or the first filesystem instance
/// is made, then [`KEY_FIXED`] for good (names hashed under the key are
/// kept from then on); [`KEY_DRAWING`] while [`randomize_name_hash`]
/// stores the key, which an instance being made waits out.
static HASH_KEY_STATE: AtomicU32 = AtomicU32::new(KEY_OPEN);
const KEY_OPEN: u32 = 0;
const KEY_DRAWING: u32 = 1;
const KEY_FIXED: u32 = 2;

/// Draws a secret starting state for the name hash, as Linux salts its
/// name hash with a kernel pointer that users cannot see, so that nobody
/// can choose names that share a directory's bucket or a dentry hash
/// chain (each look-up of such a name walks all the others, and each
/// create of one makes the walk longer). The hash is fixed and public
/// without it, and for names of up to 8 bytes it can be inverted: names
/// whose hashes agree on any chosen bits are found at once. Call it at
/// start-up, before the first [`Vfs`](crate::Vfs) or other filesystem
/// instance is made, as `vfscale mount` does; returns false, and changes
/// nothing, once one has been.
pub fn randomize_name_hash() -> bool {
    if HASH_KEY_STATE.compare_exchange(KEY_OPEN, KEY_DRAWING, Ordering::Acquire, Ordering::Acquire).is_err() {
        return false;
    }
    HASH_KEY.store(random_u64(), Ordering::Relaxed);
    HASH_KEY_STATE.store(KEY_FIXED, Ordering::Release);
    true
}

/// Fixes the name hash's key: a filesystem instance is being made. Waits
/// out a [`randomize_name_hash`] under way, so that the instance hashes
/// every name under the key drawn.
pub(crate) fn fix_name_hash_key() {
    // Read first: once fixed, making an instance writes nothing here (a
    // failed CAS would take the line that every name hash reads).
    if HASH_KEY_STATE.load(Ordering::Acquire) == KEY_FIXED {
        return;
    }
    loop {
        match HASH_KEY_STATE.compare_exchange(KEY_OPEN, KEY_FIXED, Ordering::Acquire, Ordering::Acquire) {
            Ok(_) | Err(KEY_FIXED) => return,
            Err(_) => std::thread::yield_now(),
        }
    }
}

/// Eight random bytes from the kernel, or, if `getrandom` fails, from
/// the standard library's randomly keyed hasher.
fn random_u64() -> u64 {
    let mut bytes = [0u8; 8];
    // SAFETY: `bytes` is valid for writes of its 8 bytes.
    let got = unsafe { libc::getrandom(bytes.as_mut_ptr().cast(), bytes.len(), 0) };
    if got == bytes.len() as isize {
        return u64::from_le_bytes(bytes);
    }
    use std::hash::{BuildHasher, Hasher};
    std::collections::hash_map::RandomState::new().build_hasher().finish()
}

/// Hash of a (parent, name) key: [`name_hash`] mixed with the parent
/// inode number.
pub(crate) fn hash_name(parent_ino: u64, name: &[u8]) -> u64 {
    key_hash(parent_ino, name_hash(name))
}

/// Hash of a (parent, name) key from the name's [`name_hash`], which a walk
/// has from scanning the path ([`scan_component`]).
#[inline]
pub(crate) fn key_hash(parent_ino: u64, name_hash: u64) -> u64 {
    let h = (name_hash ^ parent_ino.wrapping_mul(0x9e37_79b9_7f4a_7c15)).wrapping_mul(0xff51_afd7_ed55_8ccd);
    h ^ (h >> 32)
}

// Names are hashed eight bytes at a time, as Linux's `hash_name` does: each
// full little-endian word of the name, then the rest of it zero-padded to a
// word (a zero word when nothing is left), then the length. A path scan
// finds the end of a component in the same words it hashes.

const ONES: u64 = 0x0101_0101_0101_0101;
const HIGHS: u64 = 0x8080_8080_8080_8080;
const SLASHES: u64 = ONES * b'/' as u64;

#[inline]
fn mix(h: u64, word: u64) -> u64 {
    (h ^ word).wrapping_mul(0x9e37_79b9_7f4a_7c15).rotate_left(27)
}

/// Folds the length in and spreads every bit of the state over the low
/// bits a directory's buckets use and the top bits its hash classes use.
/// Two rounds of multiply and fold, as a 64-bit finalizer needs: with one,
/// the low bits depended on too few of the others, and names that differ
/// in a digit (`f1_7`, `f2_7`) shared a bucket twice as often as random.
#[inline]
fn finish(h: u64, len: usize) -> u64 {
    let h = (h ^ len as u64).wrapping_mul(0xc4ce_b9fe_1a85_ec53);
    let h = (h ^ (h >> 32)).wrapping_mul(0x9e37_79b9_7f4a_7c15);
    h ^ (h >> 29)
}

/// The eight bytes of `bytes` from `at` as a little-endian word.
#[inline]
fn word_at(bytes: &[u8], at: usize) -> u64 {
    let mut word = [0; 8];
    word.copy_from_slice(&bytes[at..at + 8]);
    u64::from_le_bytes(word)
}

/// The last `n` (< 8) bytes of `bytes` as a little-endian word, zero-padded.
#[inline]
fn tail_word(bytes: &[u8], n: usize) -> u64 {
    if n == 0 {
        0
    } else if bytes.len() >= 8 {
        // One load of the last word, shifted down past the bytes before.
        word_at(bytes, bytes.len() - 8) >> (8 * (8 - n))
    } else {
        bytes[bytes.len() - n..].iter().rev().fold(0, |w, &b| w << 8 | u64::from(b))
    }
}

/// Hash of a name by itself, as a dentry's key is made of it.
pub(crate) fn name_hash(name: &[u8]) -> u64 {
    hash_from(HASH_KEY.load(Ordering::Relaxed), name)
}

/// [`name_hash`] from the starting state `key`.
fn hash_from(key: u64, name: &[u8]) -> u64 {
    let mut h = key;
    let mut words = name.chunks_exact(8);
    for word in &mut words {
        h = mix(h, word_at(word, 0));
    }
    finish(mix(h, tail_word(name, words.remainder().len())), name.len())
}

/// The index of the first `/` among the bytes of `word` (little-endian).
#[inline]
fn first_slash(word: u64) -> Option<usize> {
    let x = word ^ SLASHES;
    // The high bit of each byte of `x` that is zero: exact for the lowest
    // such byte, the only one used (a borrow runs only upwards from it).
    let zeros = x.wrapping_sub(ONES) & !x & HIGHS;
    (zeros != 0).then(|| zeros.trailing_zeros() as usize / 8)
}

/// The low `n` (< 8) bytes of `word`.
#[inline]
fn low_bytes(word: u64, n: usize) -> u64 {
    word & ((1u64 << (8 * n)) - 1)
}

/// The component of `buf` that starts at `start`: where it ends (at the
/// next `/`, or the end of `buf`) and its [`name_hash`], from one pass over
/// it eight bytes at a time.
#[inline]
pub(crate) fn scan_component(buf: &[u8], start: usize) -> (usize, u64) {
    scan_from(HASH_KEY.load(Ordering::Relaxed), buf, start)
}

/// [`scan_component`] from the starting state `key`.
#[inline]
fn scan_from(key: u64, buf: &[u8], start: usize) -> (usize, u64) {
    let mut h = key;
    let mut at = start;
    while at + 8 <= buf.len() {
        let word = word_at(buf, at);
        if let Some(n) = first_slash(word) {
            let end = at + n;
            return (end, finish(mix(h, low_bytes(word, n)), end - start));
        }
        h = mix(h, word);
        at += 8;
    }
    let left = buf.len() - at;
    // Zero-padded: the padding is never taken for a `/`.
    let word = tail_word(buf, left);
    let n = first_slash(word).unwrap_or(left);
    let end = at + n;
    (end, finish(mix(h, low_bytes(word, n)), end - start))
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

#[cfg(test)]
mod tests {
    use super::*;

    /// Names of every length up to 40 of bytes from all of 1..=255 but
    /// `/`, each scanned at several offsets of a buffer, before a slash or
    /// at its end.
    #[test]
    fn a_scanned_component_hashes_as_the_name_alone() {
        let mut seed = 0x2545_f491_4f6c_dd1du64;
        let mut byte = || loop {
            let b = (vfscale_sync::test_support::xorshift64(&mut seed) >> 56) as u8;
            if b != 0 && b != b'/' {
                return b;
            }
        };
        for len in 0..=40 {
            let name: Vec<u8> = (0..len).map(|_| byte()).collect();
            for offset in 0..10 {
                for after in [&b""[..], b"/", b"/x", b"//next/component/"] {
                    let mut buf: Vec<u8> = (0..offset).map(|i| if i % 3 == 0 { b'/' } else { byte() }).collect();
                    buf.extend_from_slice(&name);
                    buf.extend_from_slice(after);
                    let (end, hash) = scan_component(&buf, offset);
                    assert_eq!(end, offset + len, "the end of {name:?} in {buf:?}");
                    assert_eq!(hash, name_hash(&name), "the hash of {name:?} in {buf:?}");
                    let key = 0x9e37_79b9_7f4a_7c15;
                    assert_eq!(scan_from(key, &buf, offset), (end, hash_from(key, &name)), "keyed");
                }
            }
        }
    }

    #[test]
    fn similar_names_hash_apart() {
        let mut keys = std::collections::HashSet::new();
        let mut lines = std::collections::HashSet::new();
        for n in 0..4096 {
            let name = format!("cpu{n}");
            let key = hash_name(1, name.as_bytes());
            assert!(keys.insert(key), "{name} collides");
            lines.insert(key & 1023);
        }
        // A fair spread over 1024 low-bit buckets fills most of them.
        assert!(lines.len() > 900, "{} of 1024 buckets used", lines.len());
        assert_ne!(name_hash(b"a"), name_hash(b"a\0"));
        assert_ne!(name_hash(b""), name_hash(b"\0\0\0\0\0\0\0\0"));
        assert_ne!(hash_name(1, b"x"), hash_name(2, b"x"));
    }

    /// Names made alike (a kind, a slot, an instance) share a bucket (the
    /// low six bits) one pair in 64, and a class (the top six) one pair in
    /// 64, at each of eight starting states, as random names do.
    #[test]
    fn names_differing_in_a_digit_share_buckets_and_classes_as_random_names_do() {
        let stems = ["f1", "f2", "s1", "s2", "n1", "n2"];
        let (mut pairs, mut buckets, mut classes) = (0u32, 0u32, 0u32);
        for key in 0..8 {
            for i in 0..500 {
                let hashes: Vec<u64> =
                    stems.iter().map(|stem| hash_from(key, format!("{stem}_{i}").as_bytes())).collect();
                for (a, first) in hashes.iter().enumerate() {
                    for second in &hashes[a + 1..] {
                        pairs += 1;
                        buckets += u32::from(first & 63 == second & 63);
                        classes += u32::from(first >> 58 == second >> 58);
                    }
                }
            }
        }
        let expected = pairs / 64; // 937; one standard deviation is 30
        for (what, shared) in [("bucket", buckets), ("class", classes)] {
            assert!(
                (expected * 8 / 10..=expected * 12 / 10).contains(&shared),
                "{shared} of {pairs} pairs share a {what}, {expected} expected"
            );
        }
    }

    /// Under another key, names that share their low hash bits under the
    /// first mostly do not: which names share a bucket is the key's.
    #[test]
    fn another_key_places_names_elsewhere() {
        let (k1, k2) = (0, random_u64() | 1);
        let names: Vec<String> = (0..4096).map(|n| format!("f{n}")).collect();
        let low = |key: u64, name: &String| hash_from(key, name.as_bytes()) & 63;
        let first = &names[0];
        let together: Vec<&String> = names.iter().filter(|n| low(k1, n) == low(k1, first)).collect();
        assert!(together.len() > 30, "about one name in 64 shares the first's bucket");
        let still = together.iter().filter(|n| low(k2, n) == low(k2, first)).count();
        assert!(still < together.len() / 4, "{still} of {} still together", together.len());
    }
}
