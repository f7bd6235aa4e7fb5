//! The hash type.
//!
//! Redis keeps a small hash as a listpack (fields and values side by side,
//! in insertion order) and converts it to a hash table once it has more
//! than `hash-max-listpack-entries` fields or a field or value longer than
//! `hash-max-listpack-value` bytes. It never converts back. Replies that
//! walk a small hash (HGETALL, HKEYS, HSCAN, …) come in listpack order, so
//! this type mirrors the two encodings: a [`Packed`] buffer kept in
//! listpack order (appends at the end, updates in place, deletions close
//! the gap), and a [`Dict`].
//!
//! [`Packed`] is one exactly sized heap block, re-allocated on each change
//! as Redis's listpack is: the number of pairs (`u32`, little-endian), then
//! each field and each value as a LEB128 length followed by its bytes. An
//! empty one allocates nothing. Lookups walk it from the start.

use std::fmt;
use std::ops::Range;

use super::{Blob, EncodingLimits};
use crate::keyspace::dict::{self, Dict};
use crate::rand::Rng;

/// A hash: a [`Packed`] buffer of pairs while small (insertion order, as
/// Redis replies), a [`Dict`] once it passes `hash-max-listpack-*`.
#[derive(Debug, Clone)]
pub enum Hash {
    /// Compact encoding: pairs in insertion order.
    Listpack(Packed),
    /// General encoding.
    Table(Box<Dict<Blob, Blob>>),
}

impl Default for Hash {
    fn default() -> Self {
        Hash::Listpack(Packed::default())
    }
}

impl Hash {
    /// An empty hash in the compact encoding.
    pub fn new() -> Hash {
        Hash::default()
    }

    /// Number of fields.
    pub fn len(&self) -> usize {
        match self {
            Hash::Listpack(p) => p.len(),
            Hash::Table(d) => d.len(),
        }
    }

    /// True when there are no fields.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// OBJECT ENCODING.
    pub fn encoding(&self) -> &'static str {
        match self {
            Hash::Listpack(_) => "listpack",
            Hash::Table(_) => "hashtable",
        }
    }

    /// The value of `field`.
    pub fn get(&self, field: &[u8]) -> Option<&[u8]> {
        match self {
            Hash::Listpack(p) => p.get(field),
            Hash::Table(d) => d.get(field).map(Blob::as_bytes),
        }
    }

    /// True when `field` is present.
    pub fn contains(&self, field: &[u8]) -> bool {
        self.get(field).is_some()
    }

    /// Converts to the hash-table encoding when any of `items` (fields or
    /// values about to be written) is longer than `hash-max-listpack-value`,
    /// before anything is written: Redis's `hashTypeTryConversion`, which
    /// HSET and HSETNX run on their arguments up front.
    pub fn convert_for_items<'a>(
        &mut self,
        items: impl IntoIterator<Item = &'a [u8]>,
        limits: &EncodingLimits,
    ) {
        if matches!(self, Hash::Listpack(_))
            && items
                .into_iter()
                .any(|i| i.len() > limits.hash_max_listpack_value)
        {
            self.convert_to_table();
        }
    }

    /// Sets `field` to `value`; returns true when the field is new.
    ///
    /// Follows Redis's `hashTypeSet`: a field or value too long for the
    /// listpack converts first; a new field is appended, an existing one is
    /// updated in place; the hash converts once it has more than
    /// `hash-max-listpack-entries` fields.
    pub fn set(&mut self, field: &[u8], value: impl AsRef<[u8]>, limits: &EncodingLimits) -> bool {
        let value = value.as_ref();
        if let Hash::Listpack(p) = self {
            if field.len() > limits.hash_max_listpack_value
                || value.len() > limits.hash_max_listpack_value
                || p.len() == MAX_PACKED
            {
                self.convert_to_table();
            }
        }
        match self {
            Hash::Listpack(p) => {
                if !p.set(field, value) {
                    return false;
                }
                if p.len() > limits.hash_max_listpack_entries {
                    self.convert_to_table();
                }
                true
            }
            Hash::Table(d) => match d.get_mut(field) {
                Some(slot) => {
                    *slot = Blob::new(value);
                    false
                }
                None => {
                    d.insert_new(Blob::new(field), Blob::new(value));
                    true
                }
            },
        }
    }

    /// Removes `field`; true when it was present. The listpack keeps the
    /// order of the remaining pairs.
    pub fn remove(&mut self, field: &[u8]) -> bool {
        match self {
            Hash::Listpack(p) => p.remove(field),
            Hash::Table(d) => d.remove(field).is_some(),
        }
    }

    /// Converts to the hash-table encoding (a no-op when already there).
    pub fn convert_to_table(&mut self) {
        if let Hash::Listpack(p) = self {
            let mut table = Dict::with_capacity(p.len());
            for (field, value) in p.iter() {
                table.insert_new(Blob::new(field), Blob::new(value));
            }
            *self = Hash::Table(Box::new(table));
        }
    }

    /// The pairs, in listpack order for the compact encoding and in table
    /// order otherwise.
    pub fn iter(&self) -> Iter<'_> {
        match self {
            Hash::Listpack(p) => Iter::Listpack(p.iter()),
            Hash::Table(d) => Iter::Table(d.iter()),
        }
    }

    /// A random pair, uniform over the fields in either encoding (by index
    /// in a listpack, [`Dict::random`] in a hash table), or `None` when the
    /// hash is empty.
    pub fn random_pair(&self, rng: &mut Rng) -> Option<(&[u8], &[u8])> {
        match self {
            Hash::Listpack(p) if p.is_empty() => None,
            Hash::Listpack(p) => p.iter().nth(rng.index(p.len())),
            Hash::Table(d) => d.random(rng).map(|(f, v)| (f.as_bytes(), v.as_bytes())),
        }
    }
}

/// Iterator over the pairs of a [`Hash`](enum@Hash).
pub enum Iter<'a> {
    /// Over a listpack, in order.
    Listpack(PackedIter<'a>),
    /// Over a table.
    Table(dict::Iter<'a, Blob, Blob>),
}

impl<'a> Iterator for Iter<'a> {
    type Item = (&'a [u8], &'a [u8]);

    fn next(&mut self) -> Option<Self::Item> {
        match self {
            Iter::Listpack(it) => it.next(),
            Iter::Table(it) => it.next().map(|(f, v)| (f.as_bytes(), v.as_bytes())),
        }
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        match self {
            Iter::Listpack(it) => it.size_hint(),
            Iter::Table(it) => it.size_hint(),
        }
    }
}

/// Bytes of [`Packed`]'s pair count.
const COUNT_BYTES: usize = 4;

/// Most pairs a [`Packed`] holds (its count is a `u32`); [`Hash::set`]
/// converts to a table before passing it.
const MAX_PACKED: usize = u32::MAX as usize;

/// A small hash's pairs in one exactly sized heap block, in insertion
/// order: empty, or the pair count (`u32`, little-endian) followed by each
/// field and value as a LEB128 length and its bytes.
#[derive(Clone, Default, PartialEq, Eq)]
pub struct Packed {
    buf: Box<[u8]>,
}

/// Where a pair lies in a [`Packed`] buffer.
struct Slot {
    /// From the field's length to the end of the value.
    pair: Range<usize>,
    /// The value's length and bytes.
    value: Range<usize>,
}

impl Packed {
    /// Packs `pairs` in order (the caller has checked that the fields are
    /// distinct).
    pub fn from_pairs<F, V>(pairs: impl IntoIterator<Item = (F, V)>) -> Packed
    where
        F: AsRef<[u8]>,
        V: AsRef<[u8]>,
    {
        let mut out = vec![0; COUNT_BYTES];
        let mut count = 0usize;
        for (f, v) in pairs {
            for s in [f.as_ref(), v.as_ref()] {
                let (len, n) = varint(s.len());
                out.extend_from_slice(&len[..n]);
                out.extend_from_slice(s);
            }
            count += 1;
        }
        if count == 0 {
            return Packed::default();
        }
        let count = u32::try_from(count).expect("a packed hash holds at most u32::MAX pairs");
        out[..COUNT_BYTES].copy_from_slice(&count.to_le_bytes());
        Packed {
            buf: out.into_boxed_slice(),
        }
    }

    /// Number of pairs.
    pub fn len(&self) -> usize {
        match self.buf.get(..COUNT_BYTES) {
            Some(count) => u32::from_le_bytes(count.try_into().expect("four bytes")) as usize,
            None => 0,
        }
    }

    /// True when there are no pairs.
    pub fn is_empty(&self) -> bool {
        self.buf.is_empty()
    }

    /// Bytes of the heap block.
    pub fn allocated(&self) -> usize {
        self.buf.len()
    }

    /// The pairs, in order.
    pub fn iter(&self) -> PackedIter<'_> {
        PackedIter {
            rest: self.buf.get(COUNT_BYTES..).unwrap_or_default(),
            left: self.len(),
        }
    }

    /// The value of `field`.
    pub fn get(&self, field: &[u8]) -> Option<&[u8]> {
        self.find(field).map(|slot| {
            let (start, len) = read_len(&self.buf, slot.value.start);
            &self.buf[start..start + len]
        })
    }

    /// Sets `field` to `value`, in place when present, appended otherwise;
    /// true when the field is new. One walk and at most one re-allocation.
    pub fn set(&mut self, field: &[u8], value: &[u8]) -> bool {
        let (vlen, vn) = varint(value.len());
        if let Some(slot) = self.find(field) {
            self.replace(slot.value, &[&vlen[..vn], value]);
            return false;
        }
        let count = self.len() + 1;
        let count = u32::try_from(count).expect("Hash::set converts before u32::MAX pairs");
        let (flen, fn_) = varint(field.len());
        let end = self.buf.len();
        let header = count.to_le_bytes();
        let header: &[u8] = if end == 0 { &header } else { &[] };
        self.replace(end..end, &[header, &flen[..fn_], field, &vlen[..vn], value]);
        self.buf[..COUNT_BYTES].copy_from_slice(&count.to_le_bytes());
        true
    }

    /// Removes `field`, closing the gap; true when it was present.
    pub fn remove(&mut self, field: &[u8]) -> bool {
        let Some(slot) = self.find(field) else {
            return false;
        };
        let count = self.len() - 1;
        if count == 0 {
            self.buf = Box::default();
            return true;
        }
        self.replace(slot.pair, &[]);
        self.buf[..COUNT_BYTES].copy_from_slice(&(count as u32).to_le_bytes());
        true
    }

    /// The pair whose field is `field`.
    fn find(&self, field: &[u8]) -> Option<Slot> {
        let buf = &self.buf[..];
        let mut pos = COUNT_BYTES.min(buf.len());
        while pos < buf.len() {
            let (fstart, flen) = read_len(buf, pos);
            let vpos = fstart + flen;
            let (vstart, vlen) = read_len(buf, vpos);
            let end = vstart + vlen;
            if flen == field.len() && &buf[fstart..vpos] == field {
                return Some(Slot {
                    pair: pos..end,
                    value: vpos..end,
                });
            }
            pos = end;
        }
        None
    }

    /// Replaces `range` of the buffer with `parts` (concatenated), leaving
    /// the buffer exactly sized: one re-allocation when the size changes,
    /// none otherwise.
    fn replace(&mut self, range: Range<usize>, parts: &[&[u8]]) {
        let with: usize = parts.iter().map(|p| p.len()).sum();
        let old_len = self.buf.len();
        let new_len = old_len - range.len() + with;
        let tail = range.end..old_len;
        let at = range.start + with;
        let buf = if new_len == old_len {
            &mut self.buf[..]
        } else {
            let mut v = std::mem::take(&mut self.buf).into_vec();
            if new_len > old_len {
                v.reserve_exact(new_len - old_len);
                v.resize(new_len, 0);
                v.copy_within(tail, at);
            } else {
                v.copy_within(tail, at);
                v.truncate(new_len);
            }
            self.buf = v.into_boxed_slice();
            &mut self.buf[..]
        };
        let mut pos = range.start;
        for p in parts {
            buf[pos..pos + p.len()].copy_from_slice(p);
            pos += p.len();
        }
    }
}

impl<'a> IntoIterator for &'a Packed {
    type Item = (&'a [u8], &'a [u8]);
    type IntoIter = PackedIter<'a>;

    fn into_iter(self) -> PackedIter<'a> {
        self.iter()
    }
}

impl fmt::Debug for Packed {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_map()
            .entries(self.iter().map(|(k, v)| {
                (
                    String::from_utf8_lossy(k).into_owned(),
                    String::from_utf8_lossy(v).into_owned(),
                )
            }))
            .finish()
    }
}

/// Iterator over the pairs of a [`Packed`] buffer, in order.
#[derive(Clone)]
pub struct PackedIter<'a> {
    rest: &'a [u8],
    left: usize,
}

impl<'a> Iterator for PackedIter<'a> {
    type Item = (&'a [u8], &'a [u8]);

    fn next(&mut self) -> Option<Self::Item> {
        if self.rest.is_empty() {
            return None;
        }
        let (fstart, flen) = read_len(self.rest, 0);
        let (vstart, vlen) = read_len(self.rest, fstart + flen);
        let field = &self.rest[fstart..fstart + flen];
        let value = &self.rest[vstart..vstart + vlen];
        self.rest = &self.rest[vstart + vlen..];
        self.left -= 1;
        Some((field, value))
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        (self.left, Some(self.left))
    }
}

impl ExactSizeIterator for PackedIter<'_> {}

/// `n` as a LEB128 varint: the bytes and how many of them are used.
fn varint(n: usize) -> ([u8; 10], usize) {
    let mut out = [0u8; 10];
    let used = super::varint::write(&mut out, n as u64);
    (out, used)
}

/// The LEB128 length at `pos`: where the string's bytes start and how many
/// there are.
#[inline]
fn read_len(buf: &[u8], pos: usize) -> (usize, usize) {
    let (n, start) = super::varint::read(buf, pos);
    (start, n as usize)
}

#[cfg(test)]
mod tests {
    use super::*;
    use quickcheck::{Arbitrary, Gen, QuickCheck};

    fn limits() -> EncodingLimits {
        EncodingLimits::default()
    }

    fn fields(h: &Hash) -> Vec<Vec<u8>> {
        h.iter().map(|(f, _)| f.to_vec()).collect()
    }

    #[test]
    fn listpack_keeps_insertion_order_across_updates_and_deletes() {
        let mut h = Hash::new();
        for f in ["a", "b", "c", "d"] {
            assert!(h.set(f.as_bytes(), Blob::from(f), &limits()));
        }
        assert!(!h.set(b"b", Blob::from("B"), &limits()));
        assert!(h.remove(b"a"));
        assert!(!h.remove(b"a"));
        assert!(h.set(b"a", Blob::from("A"), &limits()));
        assert_eq!(
            fields(&h),
            vec![b"b".to_vec(), b"c".to_vec(), b"d".to_vec(), b"a".to_vec()]
        );
        assert_eq!(h.get(b"b").map(|v| v.to_vec()), Some(b"B".to_vec()));
        assert_eq!(h.encoding(), "listpack");
    }

    #[test]
    fn converts_after_max_entries() {
        let mut h = Hash::new();
        let max = limits().hash_max_listpack_entries;
        for i in 0..max {
            h.set(
                format!("f{i}").as_bytes(),
                Blob::from_i64(i as i64),
                &limits(),
            );
        }
        assert_eq!(h.encoding(), "listpack");
        h.set(b"f0", Blob::from("x"), &limits());
        assert_eq!(h.encoding(), "listpack", "an update does not grow the hash");
        h.set(format!("f{max}").as_bytes(), Blob::from("x"), &limits());
        assert_eq!(h.encoding(), "hashtable");
        assert_eq!(h.len(), max + 1);
        for i in 1..=max {
            h.remove(format!("f{i}").as_bytes());
        }
        assert_eq!(h.encoding(), "hashtable", "never converts back");
        assert_eq!(h.get(b"f0").map(|v| v.to_vec()), Some(b"x".to_vec()));
    }

    #[test]
    fn converts_on_long_field_or_value() {
        let long = vec![b'x'; 65];
        let edge = vec![b'x'; 64];
        let mut h = Hash::new();
        h.set(&edge, Blob::new(&edge), &limits());
        assert_eq!(h.encoding(), "listpack");
        h.set(b"v", Blob::new(&long), &limits());
        assert_eq!(h.encoding(), "hashtable");

        let mut h = Hash::new();
        h.set(&long, Blob::from("v"), &limits());
        assert_eq!(h.encoding(), "hashtable");

        let mut h = Hash::new();
        h.convert_for_items([&b"a"[..], &edge], &limits());
        assert_eq!(h.encoding(), "listpack");
        h.convert_for_items([&b"a"[..], &long], &limits());
        assert_eq!(h.encoding(), "hashtable");
    }

    #[test]
    fn random_pair_is_a_member() {
        let mut rng = Rng::with_seed(3);
        let mut h = Hash::new();
        assert!(h.random_pair(&mut rng).is_none());
        h.set(b"a", Blob::from("1"), &limits());
        h.set(b"b", Blob::from("2"), &limits());
        for _ in 0..20 {
            let (f, v) = h.random_pair(&mut rng).expect("non-empty");
            assert_eq!(h.get(f), Some(v));
        }
        h.convert_to_table();
        let (f, v) = h.random_pair(&mut rng).expect("non-empty");
        assert_eq!(h.get(f), Some(v));
    }

    /// The size [`Packed`] must have for `pairs`: the count, then each
    /// string's LEB128 length and bytes.
    fn packed_size(pairs: &[(Vec<u8>, Vec<u8>)]) -> usize {
        if pairs.is_empty() {
            return 0;
        }
        let leb = |n: usize| varint(n).1 + n;
        COUNT_BYTES
            + pairs
                .iter()
                .map(|(f, v)| leb(f.len()) + leb(v.len()))
                .sum::<usize>()
    }

    fn contents(p: &Packed) -> Vec<(Vec<u8>, Vec<u8>)> {
        p.iter().map(|(f, v)| (f.to_vec(), v.to_vec())).collect()
    }

    #[test]
    fn hash_is_two_words() {
        assert_eq!(std::mem::size_of::<Hash>(), 16);
    }

    #[test]
    fn varints_round_trip_at_their_boundaries() {
        for n in [
            0,
            1,
            127,
            128,
            16_383,
            16_384,
            2_097_151,
            2_097_152,
            usize::MAX,
        ] {
            let (bytes, len) = varint(n);
            let expected = match n {
                0..=127 => 1,
                128..=16_383 => 2,
                16_384..=2_097_151 => 3,
                2_097_152 => 4,
                _ => 10,
            };
            assert_eq!(len, expected, "{n}");
            assert_eq!(read_len(&bytes[..len], 0), (len, n), "{n}");
        }
    }

    #[test]
    fn long_strings_cross_the_length_boundaries() {
        let lens = [0, 1, 127, 128, 16_383, 16_384];
        let limits = EncodingLimits {
            hash_max_listpack_value: 16_384,
            ..EncodingLimits::default()
        };
        let mut h = Hash::new();
        let mut model = Vec::new();
        for (i, &n) in lens.iter().enumerate() {
            let field: Vec<u8> = (0..n).map(|j| (j % 7) as u8 + b'a').collect();
            let value = vec![b'0' + i as u8; lens[lens.len() - 1 - i]];
            assert!(h.set(&field, &value, &limits));
            model.push((field, value));
        }
        let Hash::Listpack(p) = &h else {
            panic!("16384-byte strings fit these limits");
        };
        assert_eq!(contents(p), model);
        assert_eq!(p.allocated(), packed_size(&model));
        // Each value to each length, in place.
        for (i, &n) in lens.iter().enumerate() {
            for &m in &lens {
                let value = vec![b'v'; m];
                assert!(!h.set(&model[i].0, &value, &limits), "{n} -> {m}");
                model[i].1 = value;
                let Hash::Listpack(p) = &h else {
                    panic!("still a listpack");
                };
                assert_eq!(contents(p), model, "{n} -> {m}");
                assert_eq!(p.allocated(), packed_size(&model));
                assert_eq!(h.get(&model[i].0), Some(&model[i].1[..]));
            }
        }
        for (f, _) in model.clone() {
            assert!(h.remove(&f));
            model.remove(0);
            let Hash::Listpack(p) = &h else {
                panic!("still a listpack");
            };
            assert_eq!(contents(p), model);
            assert_eq!(p.allocated(), packed_size(&model));
        }
        assert!(h.is_empty());
    }

    #[test]
    fn updates_in_the_middle_keep_the_neighbours() {
        let mut p = Packed::from_pairs([("a", "1"), ("bb", "22"), ("c", "3")]);
        let pairs = |p: &Packed| {
            p.iter()
                .map(|(f, v)| {
                    (
                        String::from_utf8(f.to_vec()).unwrap(),
                        String::from_utf8(v.to_vec()).unwrap(),
                    )
                })
                .collect::<Vec<_>>()
        };
        let expect = |v: &[(&str, &str)]| {
            v.iter()
                .map(|(f, v)| (f.to_string(), v.to_string()))
                .collect::<Vec<_>>()
        };
        assert_eq!(p.allocated(), 4 + 2 * 2 + 3 * 2 + 2 * 2);
        let long = "x".repeat(200);
        assert!(!p.set(b"bb", long.as_bytes()));
        assert_eq!(pairs(&p), expect(&[("a", "1"), ("bb", &long), ("c", "3")]));
        assert_eq!(p.allocated(), 4 + 2 * 2 + 3 + 2 + 200 + 2 * 2);
        assert!(!p.set(b"bb", b""));
        assert_eq!(pairs(&p), expect(&[("a", "1"), ("bb", ""), ("c", "3")]));
        assert_eq!(p.allocated(), 4 + 2 * 2 + 3 + 1 + 2 * 2);
        assert!(!p.set(b"bb", b"9"));
        assert_eq!(pairs(&p), expect(&[("a", "1"), ("bb", "9"), ("c", "3")]));
        assert_eq!(p.get(b"c"), Some(&b"3"[..]));
        assert_eq!(p.get(b"b"), None);
        assert_eq!(p.len(), 3);
    }

    #[test]
    fn deletes_close_the_gap_at_either_end_and_inside() {
        let base = [("a", "1"), ("b", "2"), ("c", "3"), ("d", "4")];
        for (gone, left) in [
            ("a", "bcd"),
            ("b", "acd"),
            ("c", "abd"),
            ("d", "abc"),
            ("z", "abcd"),
        ] {
            let mut p = Packed::from_pairs(base);
            assert_eq!(p.remove(gone.as_bytes()), gone != "z");
            let fields: String = p
                .iter()
                .map(|(f, _)| String::from_utf8(f.to_vec()).unwrap())
                .collect();
            assert_eq!(fields, left);
            assert_eq!(p.len(), left.len());
            assert_eq!(p.allocated(), 4 + 4 * left.len());
            for (f, v) in base {
                let expected = (f != gone).then_some(v.as_bytes());
                assert_eq!(p.get(f.as_bytes()), expected);
            }
        }
        let mut p = Packed::from_pairs([("only", "one")]);
        assert!(p.remove(b"only"));
        assert!(p.is_empty());
        assert_eq!(p.allocated(), 0);
        assert_eq!(p.iter().count(), 0);
        assert_eq!(Packed::from_pairs(Vec::<(&[u8], &[u8])>::new()), p);
    }

    #[derive(Clone, Debug)]
    enum Op {
        Set(u8, Vec<u8>),
        Remove(u8),
        Get(u8),
    }

    impl Arbitrary for Op {
        fn arbitrary(g: &mut Gen) -> Op {
            // Few fields, so that sets update and removes hit; values up
            // to 200 bytes, across the one-byte length's limit.
            let field = u8::arbitrary(g) % 12;
            match u8::arbitrary(g) % 5 {
                0 | 1 => {
                    let len = usize::arbitrary(g) % 201;
                    Op::Set(field, (0..len).map(|_| u8::arbitrary(g)).collect())
                }
                2 | 3 => Op::Remove(field),
                _ => Op::Get(field),
            }
        }
    }

    /// A field name of 0 to 150 bytes, from its number.
    fn field_name(i: u8) -> Vec<u8> {
        vec![b'f' + i; usize::from(i) * 13]
    }

    /// The packed buffer and a hash against a vector of pairs: same
    /// contents in the same order while the hash is a listpack, same
    /// contents once it is a table, exact sizes throughout.
    fn matches_model(ops: Vec<Op>) -> bool {
        let limits = EncodingLimits {
            hash_max_listpack_entries: 8,
            hash_max_listpack_value: 180,
            ..EncodingLimits::default()
        };
        let mut packed = Packed::default();
        let mut hash = Hash::new();
        let mut model: Vec<(Vec<u8>, Vec<u8>)> = Vec::new();
        for op in ops {
            match op {
                Op::Set(i, value) => {
                    let field = field_name(i);
                    let pos = model.iter().position(|(f, _)| *f == field);
                    let new = pos.is_none();
                    match pos {
                        Some(p) => model[p].1 = value.clone(),
                        None => model.push((field.clone(), value.clone())),
                    }
                    if packed.set(&field, &value) != new || hash.set(&field, &value, &limits) != new
                    {
                        return false;
                    }
                }
                Op::Remove(i) => {
                    let field = field_name(i);
                    let pos = model.iter().position(|(f, _)| *f == field);
                    if let Some(p) = pos {
                        model.remove(p);
                    }
                    if packed.remove(&field) != pos.is_some()
                        || hash.remove(&field) != pos.is_some()
                    {
                        return false;
                    }
                }
                Op::Get(i) => {
                    let field = field_name(i);
                    let want = model.iter().find(|(f, _)| *f == field).map(|(_, v)| &v[..]);
                    if packed.get(&field) != want || hash.get(&field) != want {
                        return false;
                    }
                }
            }
            let too_big = model.len() > limits.hash_max_listpack_entries
                || model
                    .iter()
                    .any(|(f, v)| f.len().max(v.len()) > limits.hash_max_listpack_value);
            if contents(&packed) != model
                || packed.len() != model.len()
                || packed.allocated() != packed_size(&model)
                || hash.len() != model.len()
                || (too_big && hash.encoding() != "hashtable")
            {
                return false;
            }
            let mut in_hash: Vec<_> = hash.iter().map(|(f, v)| (f.to_vec(), v.to_vec())).collect();
            if hash.encoding() == "hashtable" {
                let mut sorted = model.clone();
                sorted.sort();
                in_hash.sort();
                if in_hash != sorted {
                    return false;
                }
            } else if in_hash != model {
                return false;
            }
        }
        true
    }

    #[test]
    fn packed_matches_a_vector_of_pairs() {
        QuickCheck::new()
            .rng(Gen::new(300))
            .tests(500)
            .quickcheck(matches_model as fn(Vec<Op>) -> bool);
    }
}
