//! The set type.
//!
//! Redis 7.0 keeps a set as an *intset* (a sorted array of integers) while
//! every member is an integer in `string2ll`'s canonical form and there are
//! at most `set-max-intset-entries`; past that it converts, once and for
//! good, to a hash table. The encoding is visible (OBJECT ENCODING, and the
//! reply order: an intset replies in ascending order), so the conversion
//! rules here follow Redis's `setTypeAdd` exactly.
//!
//! A set that is not an intset starts as a [`Packed`] block while it holds
//! at most [`packed::MAX_ENTRIES`] members of at most [`packed::MAX_MEMBER`]
//! bytes (Redis 7.2's listpack set, with its default limits), then
//! converts, for good, to a [`Dict`]. Redis 7.0 has no such encoding, so
//! OBJECT ENCODING reports `hashtable` for both, and a packed set replies
//! in insertion order where a table replies in bucket order (neither order
//! is one a client can rely on).

pub mod packed;

use super::num::{format_i64, parse_i64};
use super::Blob;
use crate::keyspace::dict::{self, Dict};
use crate::rand::Rng;
pub use packed::Packed;

/// Redis caps `set-max-intset-entries` at 2^30 because of intset internals.
const INTSET_HARD_LIMIT: usize = 1 << 30;

/// A set: a sorted vector of integers while every member is an integer and
/// there are at most `set-max-intset-entries` (Redis's intset), a
/// [`Packed`] block while small, a [`Dict`] otherwise.
#[derive(Debug, Clone)]
pub enum Set {
    /// Sorted, deduplicated integers, exactly sized.
    Intset(Vec<i64>),
    /// A small set with a member that is not an integer (reported as
    /// `hashtable`).
    Packed(Packed),
    /// General encoding.
    Table(Box<Dict<Blob, ()>>),
}

impl Default for Set {
    fn default() -> Self {
        Set::Intset(Vec::new())
    }
}

/// A member as a set yields it: an integer of an intset, or the bytes of a
/// hash-table member. Integers are only formatted when a caller needs bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Member<'a> {
    /// A member of an intset.
    Int(i64),
    /// A member of a hash table.
    Bytes(&'a [u8]),
}

impl Member<'_> {
    /// The member's bytes as a new `Vec` (decimal for integers).
    pub fn to_vec(&self) -> Vec<u8> {
        match *self {
            Member::Int(v) => {
                let mut out = Vec::with_capacity(20);
                super::num::write_i64(&mut out, v);
                out
            }
            Member::Bytes(b) => b.to_vec(),
        }
    }

    /// The member as a [`Blob`].
    pub fn to_blob(&self) -> Blob {
        match *self {
            Member::Int(v) => Blob::from_i64(v),
            Member::Bytes(b) => Blob::new(b),
        }
    }

    /// Calls `f` with the member's bytes, formatting integers on the stack.
    pub fn with_bytes<R>(&self, f: impl FnOnce(&[u8]) -> R) -> R {
        match *self {
            Member::Int(v) => {
                let mut buf = [0u8; 20];
                f(format_i64(v, &mut buf))
            }
            Member::Bytes(b) => f(b),
        }
    }
}

/// Iterator over a set's members: ascending for an intset, bucket order for
/// a hash table.
pub enum Iter<'a> {
    /// Over an intset.
    Ints(std::slice::Iter<'a, i64>),
    /// Over a packed set.
    Packed(packed::Iter<'a>),
    /// Over a hash table.
    Table(dict::Iter<'a, Blob, ()>),
}

impl<'a> Iterator for Iter<'a> {
    type Item = Member<'a>;

    fn next(&mut self) -> Option<Member<'a>> {
        match self {
            Iter::Ints(it) => it.next().map(|&v| Member::Int(v)),
            Iter::Packed(it) => it.next().map(Member::Bytes),
            Iter::Table(it) => it.next().map(|(k, _)| Member::Bytes(k.as_bytes())),
        }
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        match self {
            Iter::Ints(it) => it.size_hint(),
            Iter::Packed(it) => it.size_hint(),
            Iter::Table(it) => it.size_hint(),
        }
    }
}

impl Set {
    /// An empty set of the encoding that can hold `first` (Redis's
    /// `setTypeCreate`): an intset for an integer, a packed set for a short
    /// string, a hash table otherwise.
    pub fn for_member(first: &[u8]) -> Set {
        if parse_i64(first).is_some() {
            Set::Intset(Vec::new())
        } else if Packed::fits(first) {
            Set::Packed(Packed::default())
        } else {
            Set::Table(Box::default())
        }
    }

    /// Number of members.
    pub fn len(&self) -> usize {
        match self {
            Set::Intset(v) => v.len(),
            Set::Packed(p) => p.len(),
            Set::Table(d) => d.len(),
        }
    }

    /// True when there are no members.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// OBJECT ENCODING.
    pub fn encoding(&self) -> &'static str {
        match self {
            Set::Intset(_) => "intset",
            Set::Packed(_) | Set::Table(_) => "hashtable",
        }
    }

    /// Converts an intset or a packed set to a hash table (no-op for a
    /// hash table).
    pub fn convert_to_table(&mut self) {
        match self {
            Set::Intset(ints) => *self = Set::Table(Box::new(ints_to_table(ints, 0))),
            Set::Packed(p) => {
                let mut table = Dict::with_capacity(p.len());
                for m in p.iter() {
                    table.insert_new(Blob::new(m), ());
                }
                *self = Set::Table(Box::new(table));
            }
            Set::Table(_) => {}
        }
    }

    /// Converts an intset that must take `extra` more members, or a member
    /// that is not an integer: to a packed set when they fit, to a hash
    /// table otherwise.
    pub fn convert_intset(&mut self, extra: usize) {
        let Set::Intset(ints) = self else {
            return;
        };
        if ints.len() + extra <= packed::MAX_ENTRIES {
            let members: Vec<Blob> = ints.iter().map(|&v| Blob::from_i64(v)).collect();
            *self = Set::Packed(Packed::from_members(members.iter().map(Blob::as_bytes)));
        } else {
            *self = Set::Table(Box::new(ints_to_table(ints, extra)));
        }
    }

    /// Adds `member`; true when it was not present. Converts to a hash
    /// table when the member is not an integer or the intset would exceed
    /// `max_intset_entries` (Redis's `setTypeAdd`).
    pub fn insert(&mut self, member: &[u8], max_intset_entries: usize) -> bool {
        match self {
            Set::Table(d) => insert_into_table(d, member),
            Set::Packed(p) => {
                if p.contains(member) {
                    return false;
                }
                if p.len() < packed::MAX_ENTRIES && Packed::fits(member) {
                    p.push(member);
                } else {
                    self.convert_to_table();
                    let Set::Table(d) = self else {
                        unreachable!("just converted to a table")
                    };
                    d.insert_new(Blob::new(member), ());
                }
                true
            }
            Set::Intset(_) => match parse_i64(member) {
                Some(v) => self.insert_int(v, max_intset_entries),
                None => {
                    self.convert_intset(1);
                    self.insert(member, max_intset_entries)
                }
            },
        }
    }

    /// Adds the integer `v` (as its decimal string for a hash table); true
    /// when it was not present.
    pub fn insert_int(&mut self, v: i64, max_intset_entries: usize) -> bool {
        match self {
            Set::Table(_) | Set::Packed(_) => {
                let mut buf = [0u8; 20];
                self.insert(format_i64(v, &mut buf), max_intset_entries)
            }
            Set::Intset(ints) => match ints.binary_search(&v) {
                Ok(_) => false,
                Err(pos) => {
                    // Exactly sized, as Redis's intset is: a doubling
                    // vector left small sets up to half empty.
                    ints.reserve_exact(1);
                    ints.insert(pos, v);
                    if ints.len() > max_intset_entries.min(INTSET_HARD_LIMIT) {
                        self.convert_intset(0);
                    }
                    true
                }
            },
        }
    }

    /// Adds a member taken from another set; true when it was not present.
    pub fn insert_member(&mut self, member: Member<'_>, max_intset_entries: usize) -> bool {
        match member {
            Member::Int(v) => self.insert_int(v, max_intset_entries),
            Member::Bytes(b) => self.insert(b, max_intset_entries),
        }
    }

    /// Removes `member`; true when it was present. A hash table stays a
    /// hash table (Redis never converts back).
    pub fn remove(&mut self, member: &[u8]) -> bool {
        match self {
            Set::Table(d) => d.remove(member).is_some(),
            Set::Packed(p) => p.remove(member),
            Set::Intset(ints) => match parse_i64(member) {
                Some(v) => remove_int(ints, v),
                None => false,
            },
        }
    }

    /// Removes a member taken from another set; true when it was present.
    pub fn remove_member(&mut self, member: Member<'_>) -> bool {
        match (self, member) {
            (Set::Intset(ints), Member::Int(v)) => remove_int(ints, v),
            (set, member) => member.with_bytes(|b| set.remove(b)),
        }
    }

    /// True when `member` is present.
    pub fn contains(&self, member: &[u8]) -> bool {
        match self {
            Set::Table(d) => d.contains_key(member),
            Set::Packed(p) => p.contains(member),
            Set::Intset(ints) => match parse_i64(member) {
                Some(v) => ints.binary_search(&v).is_ok(),
                None => false,
            },
        }
    }

    /// True when a member taken from another set is present.
    pub fn contains_member(&self, member: Member<'_>) -> bool {
        match (self, member) {
            (Set::Intset(ints), Member::Int(v)) => ints.binary_search(&v).is_ok(),
            (set, member) => member.with_bytes(|b| set.contains(b)),
        }
    }

    /// Iterates over the members (ascending for an intset).
    pub fn iter(&self) -> Iter<'_> {
        match self {
            Set::Intset(ints) => Iter::Ints(ints.iter()),
            Set::Packed(p) => Iter::Packed(p.iter()),
            Set::Table(d) => Iter::Table(d.iter()),
        }
    }

    /// A random member, uniform over the members in either encoding (by
    /// index in an intset, [`Dict::random`] in a hash table), or `None`
    /// when empty.
    pub fn random(&self, rng: &mut Rng) -> Option<Member<'_>> {
        match self {
            Set::Intset(ints) if ints.is_empty() => None,
            Set::Intset(ints) => Some(Member::Int(ints[rng.index(ints.len())])),
            Set::Packed(p) if p.is_empty() => None,
            Set::Packed(p) => Some(Member::Bytes(p.nth(rng.index(p.len())))),
            Set::Table(d) => d.random(rng).map(|(k, _)| Member::Bytes(k.as_bytes())),
        }
    }

    /// Removes and returns a random member (chosen as by [`Set::random`]),
    /// or `None` when empty.
    pub fn pop_random(&mut self, rng: &mut Rng) -> Option<Blob> {
        match self {
            Set::Intset(ints) if ints.is_empty() => None,
            Set::Intset(ints) => Some(Blob::from_i64(ints.remove(rng.index(ints.len())))),
            Set::Packed(p) if p.is_empty() => None,
            Set::Packed(p) => {
                let member = Blob::new(p.nth(rng.index(p.len())));
                p.remove(&member);
                Some(member)
            }
            Set::Table(d) => {
                let key = d.random(rng)?.0.clone();
                d.remove(key.as_bytes()).map(|(k, _)| k)
            }
        }
    }
}

/// A hash table holding `ints` (as decimal strings), with room for `extra`
/// more members.
fn ints_to_table(ints: &[i64], extra: usize) -> Dict<Blob, ()> {
    let mut table = Dict::with_capacity(ints.len() + extra);
    for &v in ints {
        table.insert_new(Blob::from_i64(v), ());
    }
    table
}

fn insert_into_table(d: &mut Dict<Blob, ()>, member: &[u8]) -> bool {
    // A mutable lookup: it advances a resize in progress.
    if d.get_mut(member).is_some() {
        return false;
    }
    d.insert_new(Blob::new(member), ());
    true
}

fn remove_int(ints: &mut Vec<i64>, v: i64) -> bool {
    match ints.binary_search(&v) {
        Ok(pos) => {
            ints.remove(pos);
            true
        }
        Err(_) => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn members(set: &Set) -> Vec<Vec<u8>> {
        set.iter().map(|m| m.to_vec()).collect()
    }

    #[test]
    fn integers_stay_sorted_in_an_intset() {
        let mut s = Set::for_member(b"3");
        for m in ["3", "-1", "10", "3", "0"] {
            s.insert(m.as_bytes(), 512);
        }
        assert_eq!(s.encoding(), "intset");
        assert_eq!(
            members(&s),
            vec![b"-1".to_vec(), b"0".to_vec(), b"3".to_vec(), b"10".to_vec()]
        );
    }

    #[test]
    fn non_canonical_integers_convert_to_a_table() {
        for odd in ["+1", "01", "-0", " 1", "1.0", "9223372036854775808"] {
            let mut s = Set::default();
            assert!(s.insert(b"5", 512));
            assert!(s.insert(odd.as_bytes(), 512), "{odd}");
            assert_eq!(s.encoding(), "hashtable", "{odd}");
            assert!(s.contains(b"5") && s.contains(odd.as_bytes()));
        }
    }

    #[test]
    fn intset_converts_past_the_limit() {
        let mut s = Set::default();
        for v in 0..3 {
            s.insert_int(v, 3);
        }
        assert_eq!(s.encoding(), "intset");
        assert!(!s.insert_int(2, 3));
        assert_eq!(s.encoding(), "intset");
        assert!(s.insert_int(3, 3));
        assert_eq!(s.encoding(), "hashtable");
        assert_eq!(s.len(), 4);
        assert!(s.contains(b"3") && s.contains_member(Member::Int(0)));
        assert!(s.remove_member(Member::Int(0)));
        assert_eq!(s.encoding(), "hashtable");
    }

    #[test]
    fn a_small_string_set_is_packed_until_it_grows_past_the_limits() {
        let mut s = Set::for_member(b"a");
        assert!(matches!(s, Set::Packed(_)));
        for i in 0..packed::MAX_ENTRIES {
            assert!(s.insert(format!("m{i}").as_bytes(), 512));
        }
        assert!(!s.insert(b"m7", 512));
        assert!(matches!(&s, Set::Packed(p) if p.len() == packed::MAX_ENTRIES));
        assert_eq!(s.encoding(), "hashtable");
        assert!(s.insert(b"one more", 512));
        assert!(matches!(&s, Set::Table(d) if d.len() == packed::MAX_ENTRIES + 1));
        assert!(s.contains(b"m0") && s.contains(b"one more"));

        let mut s = Set::for_member(b"a");
        s.insert(b"a", 512);
        s.insert_int(-5, 512);
        assert!(s.contains_member(Member::Int(-5)) && s.contains(b"-5"));
        assert!(s.insert(&[b'x'; packed::MAX_MEMBER + 1], 512));
        assert!(matches!(&s, Set::Table(d) if d.len() == 3));
        assert!(matches!(Set::for_member(&[b'x'; 65]), Set::Table(_)));
    }

    #[test]
    fn an_intset_takes_a_string_as_a_packed_set_or_a_table() {
        let mut s = Set::default();
        for v in [3, 1, 2] {
            s.insert_int(v, 512);
        }
        assert!(s.insert(b"x", 512));
        assert_eq!(
            members(&s),
            vec![b"1".to_vec(), b"2".to_vec(), b"3".to_vec(), b"x".to_vec()]
        );
        assert!(matches!(s, Set::Packed(_)));
        let mut big = Set::default();
        for v in 0..packed::MAX_ENTRIES as i64 {
            big.insert_int(v, 512);
        }
        assert!(big.insert(b"x", 512));
        assert!(matches!(&big, Set::Table(d) if d.len() == packed::MAX_ENTRIES + 1));
        // Past set-max-intset-entries, as Redis converts.
        let mut low = Set::default();
        for v in 0..4 {
            low.insert_int(v, 3);
        }
        assert!(matches!(&low, Set::Packed(p) if p.len() == 4));
        assert_eq!(low.encoding(), "hashtable");
    }

    #[test]
    fn an_intset_is_exactly_sized() {
        let mut s = Set::default();
        for v in 0..37 {
            s.insert_int(v * 3, 512);
        }
        assert!(matches!(&s, Set::Intset(v) if v.capacity() == 37));
    }

    #[test]
    fn members_compare_across_encodings() {
        let mut ints = Set::default();
        ints.insert(b"-42", 512);
        let mut table = Set::for_member(b"x");
        table.insert(b"-42", 512);
        assert!(table.contains_member(Member::Int(-42)));
        assert!(ints.contains_member(Member::Bytes(b"-42")));
        assert!(!ints.contains_member(Member::Bytes(b"x")));
        assert!(!ints.remove(b"x"));
        assert_eq!(format_i64(i64::MIN, &mut [0; 20]), b"-9223372036854775808");
    }

    #[test]
    fn pop_random_empties_the_set() {
        let mut rng = Rng::with_seed(3);
        for first in ["1", "a"] {
            let mut s = Set::for_member(first.as_bytes());
            for m in ["1", "2", "a", "3"] {
                if first == "1" && m == "a" {
                    continue;
                }
                s.insert(m.as_bytes(), 512);
            }
            let n = s.len();
            let mut popped: Vec<Blob> = (0..n).map(|_| s.pop_random(&mut rng).unwrap()).collect();
            popped.sort();
            popped.dedup();
            assert_eq!(popped.len(), n);
            assert!(
                s.is_empty() && s.pop_random(&mut rng).is_none() && s.random(&mut rng).is_none()
            );
        }
    }
}
