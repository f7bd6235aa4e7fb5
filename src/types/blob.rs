//! [`Blob`]: the byte string used for keys, values, fields and members.
//!
//! Most keys and values in a Redis workload are short (`user:1234`,
//! counters, 16-byte tokens). A `Vec<u8>` costs 24 bytes plus a heap
//! allocation of at least 32 bytes for each of them. `Blob` is 24 bytes and
//! keeps up to [`INLINE_CAPACITY`] bytes inline, so a small key or value
//! costs no allocation at all; longer ones live in a boxed slice (16 bytes
//! plus the heap block, no spare capacity).
//!
//! Every blob also carries 24 bits of *access metadata* ([`Blob::access`])
//! that only the keys of a database's main table use: the LRU clock or the
//! LFU counter of the key (Redis keeps the same 24 bits in each object).
//! They live in bytes the layout has anyway (the enum's tag leaves them
//! free), at the price of three bytes of inline capacity (19 instead of
//! 22); equality, hashing and order ignore them (docs/memory.md).

use std::borrow::Borrow;
use std::fmt;
use std::hash::{Hash, Hasher};
use std::ops::Deref;

/// How many bytes a [`Blob`] stores without a heap allocation.
pub const INLINE_CAPACITY: usize = 19;

/// An immutable, compact byte string (24 bytes, small-string optimised).
#[derive(Clone)]
pub struct Blob(Repr);

/// Flag in an inline blob's `len`: the string was changed in place
/// ([`Blob::is_raw`]).
const RAW_BIT: u8 = 0x80;

#[derive(Clone)]
enum Repr {
    Inline {
        /// The length, with [`RAW_BIT`] set for a raw string.
        len: u8,
        /// The access metadata ([`Blob::access`]), little-endian.
        meta: [u8; 3],
        bytes: [u8; INLINE_CAPACITY],
    },
    Heap {
        /// The access metadata, in what would be padding.
        meta: [u8; 3],
        bytes: Box<[u8]>,
    },
    /// A heap string changed in place ([`Blob::is_raw`]).
    RawHeap { meta: [u8; 3], bytes: Box<[u8]> },
}

impl Blob {
    /// The empty byte string.
    pub const fn empty() -> Blob {
        Blob(Repr::Inline {
            len: 0,
            meta: [0; 3],
            bytes: [0; INLINE_CAPACITY],
        })
    }

    /// Copies `bytes` into a new blob.
    pub fn new(bytes: &[u8]) -> Blob {
        if bytes.len() <= INLINE_CAPACITY {
            let mut inline = [0u8; INLINE_CAPACITY];
            inline[..bytes.len()].copy_from_slice(bytes);
            Blob(Repr::Inline {
                len: bytes.len() as u8,
                meta: [0; 3],
                bytes: inline,
            })
        } else {
            Blob(Repr::Heap {
                meta: [0; 3],
                bytes: bytes.into(),
            })
        }
    }

    /// Takes ownership of `bytes`, reusing its allocation when it is long.
    pub fn from_vec(bytes: Vec<u8>) -> Blob {
        if bytes.len() <= INLINE_CAPACITY {
            Blob::new(&bytes)
        } else {
            Blob(Repr::Heap {
                meta: [0; 3],
                bytes: bytes.into_boxed_slice(),
            })
        }
    }

    /// Takes ownership of `bytes` as a string changed in place (APPEND,
    /// SETRANGE, SETBIT, PFADD…): OBJECT ENCODING reports it as `raw`
    /// whatever its length, as Redis's `dbUnshareStringValue` makes it.
    /// Nothing else sees the difference: equality, hashing and order are
    /// the bytes'.
    pub fn raw_from_vec(bytes: Vec<u8>) -> Blob {
        let mut blob = Blob::from_vec(bytes);
        blob.0 = match blob.0 {
            Repr::Inline { len, meta, bytes } => Repr::Inline {
                len: len | RAW_BIT,
                meta,
                bytes,
            },
            Repr::Heap { meta, bytes } | Repr::RawHeap { meta, bytes } => {
                Repr::RawHeap { meta, bytes }
            }
        };
        blob
    }

    /// True for a string changed in place ([`Blob::raw_from_vec`]).
    pub fn is_raw(&self) -> bool {
        match &self.0 {
            Repr::Inline { len, .. } => len & RAW_BIT != 0,
            Repr::Heap { .. } => false,
            Repr::RawHeap { .. } => true,
        }
    }

    /// The decimal representation of `n` (as Redis stores integers).
    /// Formatted on the stack: integers fit inline, so this allocates
    /// nothing (INCR's hot path).
    pub fn from_i64(n: i64) -> Blob {
        Blob::new(crate::types::num::format_i64(n, &mut [0u8; 20]))
    }

    /// The bytes.
    pub fn as_bytes(&self) -> &[u8] {
        match &self.0 {
            Repr::Inline { len, bytes, .. } => &bytes[..(*len & !RAW_BIT) as usize],
            Repr::Heap { bytes, .. } | Repr::RawHeap { bytes, .. } => bytes,
        }
    }

    /// Copies the bytes into a `Vec`.
    pub fn to_vec(&self) -> Vec<u8> {
        self.as_bytes().to_vec()
    }

    /// Converts into a `Vec`, reusing the heap allocation when there is one.
    pub fn into_vec(self) -> Vec<u8> {
        match self.0 {
            Repr::Inline { len, bytes, .. } => bytes[..(len & !RAW_BIT) as usize].to_vec(),
            Repr::Heap { bytes, .. } | Repr::RawHeap { bytes, .. } => bytes.into_vec(),
        }
    }

    /// Where the bytes are when they are not inline (for a prefetch hint).
    pub fn heap_ptr(&self) -> Option<*const u8> {
        match &self.0 {
            Repr::Inline { .. } => None,
            Repr::Heap { bytes, .. } | Repr::RawHeap { bytes, .. } => Some(bytes.as_ptr()),
        }
    }

    /// Bytes allocated on the heap for this blob (0 when inline).
    pub fn heap_size(&self) -> usize {
        match &self.0 {
            Repr::Inline { .. } => 0,
            Repr::Heap { bytes, .. } | Repr::RawHeap { bytes, .. } => bytes.len(),
        }
    }

    /// The 24-bit access metadata: a key's LRU clock, or its LFU counter
    /// and decrement time (docs/memory.md). 0 for a new blob.
    pub fn access(&self) -> u32 {
        let m = match &self.0 {
            Repr::Inline { meta, .. } | Repr::Heap { meta, .. } | Repr::RawHeap { meta, .. } => {
                meta
            }
        };
        u32::from_le_bytes([m[0], m[1], m[2], 0])
    }

    /// Sets the access metadata (the low 24 bits of `value`). Equality,
    /// hashing and order do not see it, so a key in a table may change it.
    pub fn set_access(&mut self, value: u32) {
        let m = match &mut self.0 {
            Repr::Inline { meta, .. } | Repr::Heap { meta, .. } | Repr::RawHeap { meta, .. } => {
                meta
            }
        };
        let b = value.to_le_bytes();
        *m = [b[0], b[1], b[2]];
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
    fn blob_is_24_bytes() {
        assert_eq!(std::mem::size_of::<Blob>(), 24);
    }

    #[test]
    fn access_metadata_is_24_bits_in_every_form_and_ignored_by_equality() {
        for len in [0usize, 19, 20, 100] {
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
        for len in [0usize, 5, 19, 20, 22, 23, 44, 100] {
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
        for len in [0usize, 1, 18, 19, 20, 22, 23, 100, 4096] {
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
