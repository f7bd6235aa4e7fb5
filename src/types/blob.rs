//! [`Blob`]: the byte string used for keys, values, fields and members.
//!
//! Most keys and values in a Redis workload are short (`user:1234`,
//! counters, tokens). A `Vec<u8>` costs 24 bytes plus a heap allocation of
//! at least 16 bytes for each of them. `Blob` is 16 bytes and keeps up to
//! [`INLINE_CAPACITY`] bytes inline, so a small key or value costs no
//! allocation at all; longer ones live in an exactly sized heap block
//! reached by a thin pointer, with the length (up to 4 GiB) in the blob
//! itself; longer still (never, under Redis's 512 MB `proto-max-bulk-len`
//! default) in a boxed slice behind that pointer.
//!
//! Every blob also carries 24 bits of *access metadata* ([`Blob::access`])
//! that only the keys of a database's main table use: the LRU clock or the
//! LFU counter of the key (Redis keeps the same 24 bits in each object).
//! Equality, hashing and order ignore them (docs/memory.md).
//!
//! Why 16 bytes: a table node is a key, a value and a link. With 24-byte
//! blobs a key's node was 56 bytes, in a 64-byte allocator block; with 16
//! it is 40, in a 48-byte block (and a sorted set's member node 32 where it
//! was 48). The first byte is a `Tag` enum whose unused values give
//! [`crate::types::Value`] its discriminant, so a value is 16 bytes too.

use std::borrow::Borrow;
use std::fmt;
use std::hash::{Hash, Hasher};
use std::ops::Deref;
use std::ptr::NonNull;

/// How many bytes a [`Blob`] stores without a heap allocation.
pub const INLINE_CAPACITY: usize = 12;

/// What a blob holds: its first byte. Inline lengths are the tag's value
/// (plain) or its value minus [`Tag::R0`] (raw); the heap forms say where
/// the bytes are. Its unused values are the niche `Value` and `Option`
/// use.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
#[repr(u8)]
#[rustfmt::skip]
enum Tag {
    I0 = 0, I1, I2, I3, I4, I5, I6, I7, I8, I9, I10, I11, I12,
    R0 = 16, R1, R2, R3, R4, R5, R6, R7, R8, R9, R10, R11, R12,
    /// Exactly sized block of `len` bytes at `ptr`.
    Heap = 32,
    /// The same, for a string changed in place ([`Blob::is_raw`]).
    RawHeap,
    /// `ptr` points to a `Box<[u8]>` (more than `u32::MAX` bytes).
    Huge,
    /// The same, raw.
    RawHuge,
}

#[rustfmt::skip]
const INLINE_TAGS: [Tag; INLINE_CAPACITY + 1] = [
    Tag::I0, Tag::I1, Tag::I2, Tag::I3, Tag::I4, Tag::I5, Tag::I6, Tag::I7, Tag::I8, Tag::I9,
    Tag::I10, Tag::I11, Tag::I12,
];

#[rustfmt::skip]
const RAW_INLINE_TAGS: [Tag; INLINE_CAPACITY + 1] = [
    Tag::R0, Tag::R1, Tag::R2, Tag::R3, Tag::R4, Tag::R5, Tag::R6, Tag::R7, Tag::R8, Tag::R9,
    Tag::R10, Tag::R11, Tag::R12,
];

/// Where the bytes are, in bytes 8..16 of a blob.
#[derive(Clone, Copy)]
#[repr(C)]
union Tail {
    /// Inline: string bytes 4..12.
    bytes: [u8; 8],
    /// Heap forms: the block.
    ptr: NonNull<u8>,
}

/// An immutable, compact byte string (16 bytes, small-string optimised).
///
/// Layout (`repr(C)`): the tag, three bytes of access metadata, then
/// either twelve inline bytes (`head` and `tail`), or the length
/// (`head`, a native-endian `u32`) and the pointer (`tail`).
#[repr(C)]
pub struct Blob {
    tag: Tag,
    meta: [u8; 3],
    head: [u8; 4],
    tail: Tail,
}

// SAFETY: a blob owns its heap block alone (no sharing, no interior
// mutability), as a `Box<[u8]>` would.
unsafe impl Send for Blob {}
// SAFETY: shared access only reads the bytes.
unsafe impl Sync for Blob {}

impl Blob {
    /// The empty byte string.
    pub const fn empty() -> Blob {
        Blob {
            tag: Tag::I0,
            meta: [0; 3],
            head: [0; 4],
            tail: Tail { bytes: [0; 8] },
        }
    }

    /// An inline blob of `bytes` (at most [`INLINE_CAPACITY`]).
    fn inline(bytes: &[u8], raw: bool) -> Blob {
        let mut all = [0u8; INLINE_CAPACITY];
        all[..bytes.len()].copy_from_slice(bytes);
        let tags = if raw { &RAW_INLINE_TAGS } else { &INLINE_TAGS };
        Blob {
            tag: tags[bytes.len()],
            meta: [0; 3],
            head: all[..4].try_into().expect("four bytes"),
            tail: Tail {
                bytes: all[4..].try_into().expect("eight bytes"),
            },
        }
    }

    /// A heap blob owning `bytes` (longer than [`INLINE_CAPACITY`]).
    fn heap(bytes: Box<[u8]>, raw: bool) -> Blob {
        match u32::try_from(bytes.len()) {
            Ok(len) => {
                let ptr = Box::into_raw(bytes) as *mut u8;
                Blob {
                    tag: if raw { Tag::RawHeap } else { Tag::Heap },
                    meta: [0; 3],
                    head: len.to_ne_bytes(),
                    // SAFETY: `Box::into_raw` never returns null.
                    tail: Tail {
                        ptr: unsafe { NonNull::new_unchecked(ptr) },
                    },
                }
            }
            Err(_) => {
                let boxed = Box::into_raw(Box::new(bytes)) as *mut u8;
                Blob {
                    tag: if raw { Tag::RawHuge } else { Tag::Huge },
                    meta: [0; 3],
                    head: [0; 4],
                    // SAFETY: `Box::into_raw` never returns null.
                    tail: Tail {
                        ptr: unsafe { NonNull::new_unchecked(boxed) },
                    },
                }
            }
        }
    }

    /// Copies `bytes` into a new blob.
    pub fn new(bytes: &[u8]) -> Blob {
        if bytes.len() <= INLINE_CAPACITY {
            Blob::inline(bytes, false)
        } else {
            Blob::heap(bytes.into(), false)
        }
    }

    /// Takes ownership of `bytes`, reusing its allocation when it is long.
    pub fn from_vec(bytes: Vec<u8>) -> Blob {
        if bytes.len() <= INLINE_CAPACITY {
            Blob::inline(&bytes, false)
        } else {
            Blob::heap(bytes.into_boxed_slice(), false)
        }
    }

    /// Takes ownership of `bytes` as a string changed in place (APPEND,
    /// SETRANGE, SETBIT, PFADD…): OBJECT ENCODING reports it as `raw`
    /// whatever its length, as Redis's `dbUnshareStringValue` makes it.
    /// Nothing else sees the difference: equality, hashing and order are
    /// the bytes'.
    pub fn raw_from_vec(bytes: Vec<u8>) -> Blob {
        if bytes.len() <= INLINE_CAPACITY {
            Blob::inline(&bytes, true)
        } else {
            Blob::heap(bytes.into_boxed_slice(), true)
        }
    }

    /// True for a string changed in place ([`Blob::raw_from_vec`]).
    pub fn is_raw(&self) -> bool {
        matches!(self.tag, Tag::RawHeap | Tag::RawHuge) || self.inline_len(true).is_some()
    }

    /// The length of an inline blob (plain, or raw when `raw`).
    #[inline]
    fn inline_len(&self, raw: bool) -> Option<usize> {
        let t = self.tag as usize;
        if raw {
            (16..=16 + INLINE_CAPACITY).contains(&t).then(|| t - 16)
        } else {
            (t <= INLINE_CAPACITY).then_some(t)
        }
    }

    /// The block of a heap form: (pointer, length).
    #[inline]
    fn heap_parts(&self) -> (*mut u8, usize) {
        // SAFETY: called for the heap forms only, whose `tail` is the
        // pointer.
        let ptr = unsafe { self.tail.ptr }.as_ptr();
        match self.tag {
            Tag::Heap | Tag::RawHeap => (ptr, u32::from_ne_bytes(self.head) as usize),
            _ => {
                // SAFETY: a huge form's pointer is a live `Box<Box<[u8]>>`.
                let boxed = unsafe { &*(ptr as *const Box<[u8]>) };
                (boxed.as_ptr() as *mut u8, boxed.len())
            }
        }
    }

    /// True for the inline forms.
    #[inline]
    fn is_inline(&self) -> bool {
        (self.tag as u8) < Tag::Heap as u8
    }

    /// The decimal representation of `n` (as Redis stores integers).
    /// Formatted on the stack: an integer of up to 12 characters (any
    /// counter below 10^12) fits inline, so this allocates nothing (INCR's
    /// hot path).
    pub fn from_i64(n: i64) -> Blob {
        Blob::new(crate::types::num::format_i64(n, &mut [0u8; 20]))
    }

    /// The bytes.
    #[inline]
    pub fn as_bytes(&self) -> &[u8] {
        let len = self.tag as usize;
        if len <= INLINE_CAPACITY {
            return self.inline_bytes(len);
        }
        if let Some(len) = self.inline_len(true) {
            return self.inline_bytes(len);
        }
        let (ptr, len) = self.heap_parts();
        // SAFETY: a heap form owns `len` initialised bytes at `ptr`, alive
        // as long as `self`.
        unsafe { std::slice::from_raw_parts(ptr, len) }
    }

    /// The first `len` of the twelve inline bytes.
    #[inline]
    fn inline_bytes(&self, len: usize) -> &[u8] {
        debug_assert!(len <= INLINE_CAPACITY);
        // SAFETY: `head` and `tail` are adjacent (`repr(C)`, offsets 4 and
        // 8) and, in an inline form, hold twelve initialised bytes; the
        // pointer comes from `&self`, which covers all sixteen.
        unsafe {
            let base = (self as *const Blob as *const u8).add(4);
            std::slice::from_raw_parts(base, len)
        }
    }

    /// Copies the bytes into a `Vec`.
    pub fn to_vec(&self) -> Vec<u8> {
        self.as_bytes().to_vec()
    }

    /// Converts into a `Vec`, reusing the heap allocation when there is one.
    pub fn into_vec(self) -> Vec<u8> {
        if self.is_inline() {
            return self.as_bytes().to_vec();
        }
        let this = std::mem::ManuallyDrop::new(self);
        // SAFETY: the block is taken out of a blob that will not be
        // dropped, so it is owned once.
        unsafe { this.take_box() }.into_vec()
    }

    /// The heap block as the `Box<[u8]>` it was made from.
    ///
    /// # Safety
    ///
    /// `self` must be a heap form, and must not be used or dropped after.
    unsafe fn take_box(&self) -> Box<[u8]> {
        let ptr = unsafe { self.tail.ptr }.as_ptr();
        match self.tag {
            Tag::Heap | Tag::RawHeap => {
                let len = u32::from_ne_bytes(self.head) as usize;
                unsafe { Box::from_raw(std::ptr::slice_from_raw_parts_mut(ptr, len)) }
            }
            _ => *unsafe { Box::from_raw(ptr as *mut Box<[u8]>) },
        }
    }

    /// Where the bytes are when they are not inline (for a prefetch hint).
    pub fn heap_ptr(&self) -> Option<*const u8> {
        if self.is_inline() {
            None
        } else {
            Some(self.heap_parts().0 as *const u8)
        }
    }

    /// Bytes allocated on the heap for this blob (0 when inline).
    pub fn heap_size(&self) -> usize {
        if self.is_inline() {
            0
        } else {
            self.heap_parts().1
        }
    }

    /// The 24-bit access metadata: a key's LRU clock, or its LFU counter
    /// and decrement time (docs/memory.md). 0 for a new blob.
    pub fn access(&self) -> u32 {
        let m = self.meta;
        u32::from_le_bytes([m[0], m[1], m[2], 0])
    }

    /// Sets the access metadata (the low 24 bits of `value`). Equality,
    /// hashing and order do not see it, so a key in a table may change it.
    pub fn set_access(&mut self, value: u32) {
        let b = value.to_le_bytes();
        self.meta = [b[0], b[1], b[2]];
    }
}

impl Clone for Blob {
    fn clone(&self) -> Blob {
        let mut copy = if self.is_inline() {
            Blob {
                tag: self.tag,
                meta: self.meta,
                head: self.head,
                tail: self.tail,
            }
        } else {
            Blob::heap(self.as_bytes().into(), self.is_raw())
        };
        copy.meta = self.meta;
        copy
    }
}

impl Drop for Blob {
    fn drop(&mut self) {
        if !self.is_inline() {
            // SAFETY: a heap form owns its block; it is not used after.
            drop(unsafe { self.take_box() });
        }
    }
}

impl Default for Blob {
    fn default() -> Self {
        Blob::empty()
    }
}

impl Deref for Blob {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        self.as_bytes()
    }
}

impl AsRef<[u8]> for Blob {
    fn as_ref(&self) -> &[u8] {
        self.as_bytes()
    }
}

impl Borrow<[u8]> for Blob {
    fn borrow(&self) -> &[u8] {
        self.as_bytes()
    }
}

impl PartialEq for Blob {
    fn eq(&self, other: &Self) -> bool {
        self.as_bytes() == other.as_bytes()
    }
}

impl Eq for Blob {}

impl PartialEq<[u8]> for Blob {
    fn eq(&self, other: &[u8]) -> bool {
        self.as_bytes() == other
    }
}

impl PartialOrd for Blob {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for Blob {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        self.as_bytes().cmp(other.as_bytes())
    }
}

impl Hash for Blob {
    // Must hash exactly like `[u8]` so `Borrow<[u8]>` lookups work.
    fn hash<H: Hasher>(&self, state: &mut H) {
        self.as_bytes().hash(state)
    }
}

impl From<&[u8]> for Blob {
    fn from(b: &[u8]) -> Self {
        Blob::new(b)
    }
}

impl From<Vec<u8>> for Blob {
    fn from(b: Vec<u8>) -> Self {
        Blob::from_vec(b)
    }
}

impl From<&str> for Blob {
    fn from(s: &str) -> Self {
        Blob::new(s.as_bytes())
    }
}

impl fmt::Debug for Blob {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "b\"{}\"", self.as_bytes().escape_ascii())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn blob_is_16_bytes_and_leaves_a_niche() {
        assert_eq!(std::mem::size_of::<Blob>(), 16);
        assert_eq!(std::mem::size_of::<Option<Blob>>(), 16);
        assert_eq!(std::mem::size_of::<crate::types::Value>(), 16);
    }

    #[test]
    fn every_length_round_trips_in_every_form() {
        for len in 0..=40usize {
            let data: Vec<u8> = (0..len).map(|i| (i * 7 + 1) as u8).collect();
            for raw in [false, true] {
                let mut b = if raw {
                    Blob::raw_from_vec(data.clone())
                } else {
                    Blob::new(&data)
                };
                b.set_access(0xab_cdef);
                assert_eq!(b.as_bytes(), &data[..], "{len} {raw}");
                assert_eq!(b.is_raw(), raw);
                let c = b.clone();
                assert_eq!(
                    (c.as_bytes(), c.is_raw(), c.access()),
                    (&data[..], raw, 0xab_cdef)
                );
                assert_eq!(b.heap_ptr().is_some(), len > INLINE_CAPACITY);
                assert_eq!(b.into_vec(), data);
                assert_eq!(c.len(), len);
            }
        }
    }

    #[test]
    fn access_metadata_is_24_bits_in_every_form_and_ignored_by_equality() {
        for len in [0usize, 12, 13, 19, 20, 100] {
            let data: Vec<u8> = (0..len).map(|i| i as u8).collect();
            for mut b in [Blob::new(&data), Blob::raw_from_vec(data.clone())] {
                assert_eq!(b.access(), 0);
                b.set_access(0x1234_5678);
                assert_eq!(b.access(), 0x34_5678);
                assert_eq!(b.as_bytes(), &data[..]);
                assert_eq!(b, Blob::new(&data));
                assert_eq!(b.clone().access(), 0x34_5678);
            }
        }
    }

    #[test]
    fn raw_strings_keep_their_bytes_and_compare_equal() {
        for len in [0usize, 5, 12, 13, 19, 20, 22, 23, 44, 100] {
            let data: Vec<u8> = (0..len).map(|i| i as u8).collect();
            let raw = Blob::raw_from_vec(data.clone());
            let plain = Blob::from_vec(data.clone());
            assert!(raw.is_raw() && !plain.is_raw());
            assert_eq!(raw.as_bytes(), &data[..]);
            assert_eq!(raw, plain);
            assert_eq!(raw.clone().into_vec(), data);
            assert_eq!(raw.heap_size(), plain.heap_size());
        }
    }

    #[test]
    fn inline_and_heap_round_trip() {
        for len in [0usize, 1, 11, 12, 13, 18, 19, 20, 22, 23, 100, 4096] {
            let data: Vec<u8> = (0..len).map(|i| (i % 251) as u8).collect();
            let b = Blob::new(&data);
            assert_eq!(b.as_bytes(), &data[..]);
            assert_eq!(b.heap_size(), if len <= INLINE_CAPACITY { 0 } else { len });
            assert_eq!(Blob::from_vec(data.clone()).into_vec(), data);
        }
    }

    #[test]
    fn from_i64_is_decimal() {
        assert_eq!(Blob::from_i64(-42).as_bytes(), b"-42");
        assert_eq!(Blob::from_i64(i64::MIN).as_bytes(), b"-9223372036854775808");
    }
}
