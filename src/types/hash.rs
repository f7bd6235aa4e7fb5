//! The hash type.
//!
//! Redis keeps a small hash as a listpack (fields and values side by side,
//! in insertion order) and converts it to a hash table once it has more
//! than `hash-max-listpack-entries` fields or a field or value longer than
//! `hash-max-listpack-value` bytes. It never converts back. Replies that
//! walk a small hash (HGETALL, HKEYS, HSCAN, …) come in listpack order, so
//! this type mirrors the two encodings: a vector of pairs kept in listpack
//! order (appends at the end, updates in place, deletions close the gap),
//! and a [`Dict`].

use super::{Blob, EncodingLimits};
use crate::keyspace::dict::{self, Dict};
use crate::rand::Rng;

/// A hash: a listpack-like vector of pairs while small (insertion order, as
/// Redis replies), a [`Dict`] once it passes `hash-max-listpack-*`.
#[derive(Debug, Clone)]
pub enum Hash {
    /// Compact encoding: pairs in insertion order.
    Listpack(Vec<(Blob, Blob)>),
    /// General encoding.
    Table(Dict<Blob, Blob>),
}

impl Default for Hash {
    fn default() -> Self {
        Hash::Listpack(Vec::new())
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
            Hash::Listpack(v) => v.len(),
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
    pub fn get(&self, field: &[u8]) -> Option<&Blob> {
        match self {
            Hash::Listpack(v) => v
                .iter()
                .find(|(f, _)| f.as_bytes() == field)
                .map(|(_, value)| value),
            Hash::Table(d) => d.get(field),
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
    pub fn set(&mut self, field: &[u8], value: Blob, limits: &EncodingLimits) -> bool {
        if matches!(self, Hash::Listpack(_))
            && (field.len() > limits.hash_max_listpack_value
                || value.len() > limits.hash_max_listpack_value)
        {
            self.convert_to_table();
        }
        match self {
            Hash::Listpack(pairs) => {
                if let Some(slot) = pairs.iter_mut().find(|(f, _)| f.as_bytes() == field) {
                    slot.1 = value;
                    return false;
                }
                pairs.push((Blob::new(field), value));
                if pairs.len() > limits.hash_max_listpack_entries {
                    self.convert_to_table();
                }
                true
            }
            Hash::Table(d) => match d.get_mut(field) {
                Some(slot) => {
                    *slot = value;
                    false
                }
                None => {
                    d.insert_new(Blob::new(field), value);
                    true
                }
            },
        }
    }

    /// Removes `field`; true when it was present. The listpack keeps the
    /// order of the remaining pairs.
    pub fn remove(&mut self, field: &[u8]) -> bool {
        match self {
            Hash::Listpack(pairs) => match pairs.iter().position(|(f, _)| f.as_bytes() == field) {
                Some(i) => {
                    pairs.remove(i);
                    true
                }
                None => false,
            },
            Hash::Table(d) => d.remove(field).is_some(),
        }
    }

    /// Converts to the hash-table encoding (a no-op when already there).
    pub fn convert_to_table(&mut self) {
        if let Hash::Listpack(pairs) = self {
            let mut table = Dict::with_capacity(pairs.len());
            for (field, value) in std::mem::take(pairs) {
                table.insert_new(field, value);
            }
            *self = Hash::Table(table);
        }
    }

    /// The pairs, in listpack order for the compact encoding and in table
    /// order otherwise.
    pub fn iter(&self) -> Iter<'_> {
        match self {
            Hash::Listpack(pairs) => Iter::Listpack(pairs.iter()),
            Hash::Table(d) => Iter::Table(d.iter()),
        }
    }

    /// A random pair, uniform over the fields in either encoding (by index
    /// in a listpack, [`Dict::random`] in a hash table), or `None` when the
    /// hash is empty.
    pub fn random_pair(&self, rng: &mut Rng) -> Option<(&Blob, &Blob)> {
        match self {
            Hash::Listpack(pairs) if pairs.is_empty() => None,
            Hash::Listpack(pairs) => {
                let (f, v) = &pairs[rng.index(pairs.len())];
                Some((f, v))
            }
            Hash::Table(d) => d.random(rng),
        }
    }
}

/// Iterator over the pairs of a [`Hash`](enum@Hash).
pub enum Iter<'a> {
    /// Over a listpack, in order.
    Listpack(std::slice::Iter<'a, (Blob, Blob)>),
    /// Over a table.
    Table(dict::Iter<'a, Blob, Blob>),
}

impl<'a> Iterator for Iter<'a> {
    type Item = (&'a Blob, &'a Blob);

    fn next(&mut self) -> Option<Self::Item> {
        match self {
            Iter::Listpack(it) => it.next().map(|(f, v)| (f, v)),
            Iter::Table(it) => it.next(),
        }
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        match self {
            Iter::Listpack(it) => it.size_hint(),
            Iter::Table(it) => it.size_hint(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
}
