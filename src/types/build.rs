//! Building a value from the parts a file holds: the one set of rules
//! every loader applies (the `dump.hoz` loader, the RDB reader and
//! RESTORE), so a value is accepted, refused or encoded the same way
//! whichever file it came from.
//!
//! The rules:
//!
//! - a collection with no elements is not a value ([`Rejected::Empty`]):
//!   Redis never creates one. What that means is the format's to say: an
//!   RDB file may hold one (Redis skips the key), a `dump.hoz` never does
//!   (damage);
//! - two equal hash fields, set members or sorted-set members are damage,
//!   and so is a NaN score;
//! - the encoding is the one Redis 7.0 gives a loaded value: a hash is a
//!   listpack (in file order) within the limits, else a table; a set is an
//!   intset when every member is an integer and there are few enough, else
//!   a table; a sorted set is ordered by (score, member) and encoded by
//!   [`ZSet::from_sorted`].

use super::hash::{Hash, Packed};
use super::list::List;
use super::num::parse_i64;
use super::ordtree::cmp_key;
use super::set::{self, Set};
use super::zset::ZSet;
use super::{Blob, EncodingLimits};
use crate::keyspace::dict::Dict;
use std::fmt;

/// Why decoded parts are not a value.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Rejected {
    /// No elements (the type's name: "hash", "set", "sorted set", "list").
    Empty(&'static str),
    /// Two equal hash fields.
    DuplicateFields,
    /// Two equal set members.
    DuplicateMembers,
    /// Two equal sorted-set members.
    DuplicateZSetMembers,
    /// A sorted-set score that is NaN.
    NanScore,
}

impl Rejected {
    /// The rule broken, in words.
    pub fn message(self) -> &'static str {
        match self {
            Rejected::Empty("hash") => "empty hash",
            Rejected::Empty("set") => "empty set",
            Rejected::Empty("sorted set") => "empty sorted set",
            Rejected::Empty(_) => "empty list",
            Rejected::DuplicateFields => "duplicate hash fields detected",
            Rejected::DuplicateMembers => "duplicate set members detected",
            Rejected::DuplicateZSetMembers => "duplicate sorted set members detected",
            Rejected::NanScore => "sorted set with a NaN score",
        }
    }
}

impl fmt::Display for Rejected {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.message())
    }
}

/// True when two of `items` have equal keys (`key` gives an item's bytes).
pub fn has_duplicates<T>(items: &[T], key: impl Fn(&T) -> &[u8]) -> bool {
    if items.len() <= 16 {
        return items
            .iter()
            .enumerate()
            .any(|(i, a)| items[i + 1..].iter().any(|b| key(a) == key(b)));
    }
    // The keys' hashes sorted: no two equal means no duplicate (no table
    // to allocate for the common sizes); equal hashes are settled by the
    // keys themselves.
    use std::hash::BuildHasher;
    let state = foldhash::fast::FixedState::with_seed(0x6475_7073);
    let mut on_stack = [0u64; 128];
    let mut on_heap = Vec::new();
    let hashes: &mut [u64] = if items.len() <= on_stack.len() {
        &mut on_stack[..items.len()]
    } else {
        on_heap.resize(items.len(), 0);
        &mut on_heap
    };
    for (h, item) in hashes.iter_mut().zip(items) {
        *h = state.hash_one(key(item));
    }
    hashes.sort_unstable();
    if hashes.windows(2).all(|w| w[0] != w[1]) {
        return false;
    }
    let mut seen: std::collections::HashSet<&[u8], foldhash::fast::RandomState> =
        std::collections::HashSet::with_capacity_and_hasher(items.len(), Default::default());
    items.iter().any(|item| !seen.insert(key(item)))
}

/// The rules without building (a checker): `items` are not empty
/// (`Empty(what)`) and no two have equal keys (`duplicate`).
pub fn check_unique<T>(
    items: &[T],
    key: impl Fn(&T) -> &[u8],
    what: &'static str,
    duplicate: Rejected,
) -> Result<(), Rejected> {
    if items.is_empty() {
        return Err(Rejected::Empty(what));
    }
    if has_duplicates(items, key) {
        return Err(duplicate);
    }
    Ok(())
}

/// The sorted-set rules without building: not empty, no NaN score, no
/// two equal members.
pub fn check_zset<M: AsRef<[u8]>>(entries: &[(M, f64)]) -> Result<(), Rejected> {
    if entries.is_empty() {
        return Err(Rejected::Empty("sorted set"));
    }
    if entries.iter().any(|(_, s)| s.is_nan()) {
        return Err(Rejected::NanScore);
    }
    check_unique(
        entries,
        |e| e.0.as_ref(),
        "sorted set",
        Rejected::DuplicateZSetMembers,
    )
}

/// A list: any elements but none.
pub fn list(list: List) -> Result<List, Rejected> {
    if list.is_empty() {
        return Err(Rejected::Empty("list"));
    }
    Ok(list)
}

/// A hash from its pairs in file order.
pub fn hash(pairs: Vec<(Blob, Blob)>, limits: &EncodingLimits) -> Result<Hash, Rejected> {
    if pairs.is_empty() {
        return Err(Rejected::Empty("hash"));
    }
    let compact = pairs.len() <= limits.hash_max_listpack_entries
        && pairs.iter().all(|(f, v)| {
            f.len() <= limits.hash_max_listpack_value && v.len() <= limits.hash_max_listpack_value
        });
    if compact {
        if has_duplicates(&pairs, |(f, _)| f.as_bytes()) {
            return Err(Rejected::DuplicateFields);
        }
        return Ok(Hash::Listpack(Packed::from_pairs(pairs)));
    }
    let mut table = Dict::with_capacity(pairs.len());
    for (f, v) in pairs {
        if table.insert(f, v).is_some() {
            return Err(Rejected::DuplicateFields);
        }
    }
    Ok(Hash::Table(Box::new(table)))
}

/// Most members of an intset (Redis caps `set-max-intset-entries` so).
fn intset_limit(limits: &EncodingLimits) -> usize {
    limits.set_max_intset_entries.min(1 << 30)
}

/// A set of integers given in ascending order (an intset's contents; the
/// caller has checked the order).
pub fn set_of_ints(ints: Vec<i64>, limits: &EncodingLimits) -> Result<Set, Rejected> {
    if ints.is_empty() {
        return Err(Rejected::Empty("set"));
    }
    let past_limit = ints.len() > intset_limit(limits);
    let mut set = Set::Intset(ints);
    if past_limit {
        // As an intset converts when it passes the limit.
        set.convert_intset(0);
    }
    Ok(set)
}

/// A set from its members in any order.
pub fn set(members: Vec<Blob>, limits: &EncodingLimits) -> Result<Set, Rejected> {
    if members.is_empty() {
        return Err(Rejected::Empty("set"));
    }
    if members.len() <= intset_limit(limits) {
        let ints: Option<Vec<i64>> = members.iter().map(|m| parse_i64(m)).collect();
        if let Some(mut ints) = ints {
            ints.sort_unstable();
            if ints.windows(2).any(|w| w[0] == w[1]) {
                return Err(Rejected::DuplicateMembers);
            }
            return Ok(Set::Intset(ints));
        }
    }
    if members.len() <= set::packed::MAX_ENTRIES && members.iter().all(|m| set::Packed::fits(m)) {
        if has_duplicates(&members, |m| m.as_bytes()) {
            return Err(Rejected::DuplicateMembers);
        }
        let packed = set::Packed::from_members(members.iter().map(|m| m.as_bytes()));
        return Ok(Set::Packed(packed));
    }
    let mut table = Dict::with_capacity(members.len());
    for m in members {
        if table.insert(m, ()).is_some() {
            return Err(Rejected::DuplicateMembers);
        }
    }
    Ok(Set::Table(Box::new(table)))
}

/// A sorted set from its entries in any order (Redis writes skiplists
/// from the greatest element down; a stable sort finds an ascending or a
/// descending order in one pass).
pub fn zset(mut entries: Vec<(Blob, f64)>, limits: &EncodingLimits) -> Result<ZSet, Rejected> {
    check_zset(&entries)?;
    entries.sort_by(|a, b| cmp_key(a.1, &a.0, b.1, &b.0));
    Ok(ZSet::from_sorted(entries, limits))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn b(s: &str) -> Blob {
        Blob::from(s.as_bytes())
    }

    #[test]
    fn every_builder_refuses_empty_and_duplicates_alike() {
        let limits = EncodingLimits::default();
        assert_eq!(hash(vec![], &limits).unwrap_err(), Rejected::Empty("hash"));
        assert_eq!(set(vec![], &limits).unwrap_err(), Rejected::Empty("set"));
        assert_eq!(
            set_of_ints(vec![], &limits).unwrap_err(),
            Rejected::Empty("set")
        );
        assert_eq!(
            zset(vec![], &limits).unwrap_err(),
            Rejected::Empty("sorted set")
        );
        assert_eq!(list(List::new()).unwrap_err(), Rejected::Empty("list"));
        let pairs = vec![(b("f"), b("1")), (b("f"), b("2"))];
        assert_eq!(hash(pairs, &limits).unwrap_err(), Rejected::DuplicateFields);
        let small = EncodingLimits {
            hash_max_listpack_entries: 0,
            set_max_intset_entries: 0,
            ..limits
        };
        let pairs = vec![(b("f"), b("1")), (b("f"), b("2"))];
        assert_eq!(hash(pairs, &small).unwrap_err(), Rejected::DuplicateFields);
        for l in [&limits, &small] {
            assert_eq!(
                set(vec![b("1"), b("1")], l).unwrap_err(),
                Rejected::DuplicateMembers
            );
            assert_eq!(
                set(vec![b("a"), b("a")], l).unwrap_err(),
                Rejected::DuplicateMembers
            );
        }
        assert_eq!(
            zset(vec![(b("a"), 1.0), (b("a"), 2.0)], &limits).unwrap_err(),
            Rejected::DuplicateZSetMembers
        );
        assert_eq!(
            zset(vec![(b("a"), f64::NAN)], &limits).unwrap_err(),
            Rejected::NanScore
        );
    }

    #[test]
    fn encodings_follow_the_limits() {
        let limits = EncodingLimits::default();
        assert!(matches!(
            set(vec![b("3"), b("1")], &limits),
            Ok(Set::Intset(v)) if v == [1, 3]
        ));
        assert!(matches!(set(vec![b("x")], &limits), Ok(Set::Packed(_))));
        let long = Blob::new(&[b'x'; 65]);
        assert!(matches!(set(vec![long], &limits), Ok(Set::Table(_))));
        let many: Vec<Blob> = (0..129)
            .map(|i| Blob::new(format!("m{i}").as_bytes()))
            .collect();
        assert!(matches!(set(many.clone(), &limits), Ok(Set::Table(_))));
        assert!(matches!(
            set(many[..128].to_vec(), &limits),
            Ok(Set::Packed(p)) if p.len() == 128
        ));
        assert_eq!(
            set(vec![b("x"), b("y"), b("x")], &limits).unwrap_err(),
            Rejected::DuplicateMembers
        );
        let low = EncodingLimits {
            set_max_intset_entries: 2,
            ..EncodingLimits::default()
        };
        assert!(matches!(
            set_of_ints(vec![1, 2, 3], &low),
            Ok(Set::Packed(p)) if p.iter().eq([&b"1"[..], b"2", b"3"])
        ));
        assert!(matches!(
            hash(vec![(b("f"), b("v"))], &limits),
            Ok(Hash::Listpack(_))
        ));
    }
}
