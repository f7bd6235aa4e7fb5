//! The sorted-set type.
//!
//! Like Redis 7.0, a sorted set has two encodings, and which one it has is
//! visible to clients (OBJECT ENCODING, and the exact behaviour of some
//! edge cases), so the rules for choosing follow Redis's:
//!
//! * **listpack**: one packed byte block of `(score, member)` entries
//!   ordered by score, then member bytes, walked linearly (see the
//!   `packed` submodule for the layout), while the set has at most
//!   `zset-max-listpack-entries` members of at most `zset-max-listpack-value`
//!   bytes. Redis stores listpack scores as integers when they are integral,
//!   which turns `-0` into `0`; [`ZSet`] does the same.
//! * **skiplist**: a member→score [`Dict`] (O(1) ZSCORE, and ZSCAN cursors)
//!   plus an [`OrdTree`] ordered by `(score, member)` for ranks and ranges
//!   (a counted B+ tree rather than Redis's skip list; see its module).
//!   A set converts once it outgrows the listpack limits and never converts
//!   back, except that results built by *STORE commands start in whichever
//!   encoding fits them.

use std::cmp::Ordering;

mod packed;

use packed::Packed;

use super::num::{format_g17_into, G17_BYTES};
use super::ordtree::{self, cmp_key, OrdTree};
use super::{Blob, EncodingLimits};
use crate::keyspace::dict::Dict;
use crate::rand::Rng;

/// A sorted set of unique members, each with a score, ordered by score
/// and then by member bytes.
#[derive(Debug, Clone, Default)]
pub struct ZSet {
    repr: Repr,
}

#[derive(Debug, Clone)]
enum Repr {
    /// Ordered by (score, member); scores never `-0.0`.
    Listpack(Packed),
    /// General encoding.
    Skiplist(Box<Sorted>),
}

impl Default for Repr {
    fn default() -> Self {
        Repr::Listpack(Packed::default())
    }
}

impl ZSet {
    /// The member table of the skiplist encoding (member to score), for
    /// prefetch hints; None in the listpack encoding.
    pub fn member_table(&self) -> Option<&Dict<Blob, f64>> {
        match &self.repr {
            Repr::Skiplist(sorted) => Some(&sorted.dict),
            Repr::Listpack(_) => None,
        }
    }
}

#[derive(Debug, Clone, Default)]
struct Sorted {
    dict: Dict<Blob, f64>,
    tree: OrdTree,
}

impl Sorted {
    /// The general encoding of `entries`, whose members are unique.
    fn from_entries(entries: Vec<(Blob, f64)>) -> Sorted {
        let mut sorted = Sorted {
            dict: Dict::with_capacity(entries.len()),
            tree: OrdTree::new(),
        };
        for (member, score) in entries {
            sorted.dict.insert_new(member.clone(), score);
            sorted.tree.insert(member, score);
        }
        sorted
    }

    /// The general encoding of a listpack's entries.
    fn from_packed(packed: &Packed) -> Sorted {
        let mut sorted = Sorted {
            dict: Dict::with_capacity(packed.len()),
            tree: OrdTree::new(),
        };
        for (member, score) in packed::Iter::new(packed, 0, false) {
            sorted.dict.insert_new(Blob::new(member), score);
            sorted.tree.insert(Blob::new(member), score);
        }
        sorted
    }
}

/// The conditions of ZADD (and ZINCRBY, which is ZADD INCR).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct AddFlags {
    /// Add the score to the current one (0 for a new member).
    pub incr: bool,
    /// Only add new members.
    pub nx: bool,
    /// Only update existing members.
    pub xx: bool,
    /// Only update when the new score is greater.
    pub gt: bool,
    /// Only update when the new score is less.
    pub lt: bool,
}

/// What [`ZSet::add`] did.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct AddOutcome {
    /// The member was new.
    pub added: bool,
    /// An existing member's score changed.
    pub updated: bool,
    /// The operation was not skipped by NX/XX/GT/LT.
    pub processed: bool,
    /// The member's score after the operation, when processed (before the
    /// listpack turns `-0` into `0`, as Redis replies with it).
    pub score: f64,
}

/// The error of [`ZSet::add`]: the score, or the sum of an increment and
/// the current score, is NaN.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ScoreIsNan;

/// A range of elements in the sense of ZRANGEBYSCORE or ZRANGEBYLEX.
pub trait RangeSpec {
    /// True when the element is at or above the range's lower end.
    fn gte_min(&self, score: f64, member: &[u8]) -> bool;
    /// True when the element is at or below the range's upper end.
    fn lte_max(&self, score: f64, member: &[u8]) -> bool;
    /// True when no element can be in the range (min above max, or equal
    /// with an exclusive end).
    fn always_empty(&self) -> bool;
}

/// A score interval (`zrangespec`).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ScoreRange {
    /// Lower end.
    pub min: f64,
    /// Upper end.
    pub max: f64,
    /// The lower end is excluded (`(min`).
    pub min_exclusive: bool,
    /// The upper end is excluded (`(max`).
    pub max_exclusive: bool,
}

impl RangeSpec for ScoreRange {
    fn gte_min(&self, score: f64, _: &[u8]) -> bool {
        if self.min_exclusive {
            score > self.min
        } else {
            score >= self.min
        }
    }

    fn lte_max(&self, score: f64, _: &[u8]) -> bool {
        if self.max_exclusive {
            score < self.max
        } else {
            score <= self.max
        }
    }

    fn always_empty(&self) -> bool {
        self.min > self.max || (self.min == self.max && (self.min_exclusive || self.max_exclusive))
    }
}

/// One end of a lexicographic range (`-`, `+`, `[x` or `(x`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LexBound<'a> {
    /// `-`: below every string.
    Min,
    /// `+`: above every string.
    Max,
    /// `[x`: `x` included.
    Inclusive(&'a [u8]),
    /// `(x`: `x` excluded.
    Exclusive(&'a [u8]),
}

impl LexBound<'_> {
    /// `-` and `+` count as exclusive, as in Redis.
    fn exclusive(&self) -> bool {
        !matches!(self, LexBound::Inclusive(_))
    }
}

/// Redis's `sdscmplex`: `-` and `+` are below and above every string, and
/// equal only to themselves.
fn cmp_lex(a: &LexBound<'_>, b: &LexBound<'_>) -> Ordering {
    use LexBound::*;
    match (a, b) {
        (Min, Min) | (Max, Max) => Ordering::Equal,
        (Min, _) | (_, Max) => Ordering::Less,
        (Max, _) | (_, Min) => Ordering::Greater,
        (Inclusive(x) | Exclusive(x), Inclusive(y) | Exclusive(y)) => x.cmp(y),
    }
}

/// A lexicographic interval (`zlexrangespec`), meaningful when all
/// elements have the same score.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LexRange<'a> {
    /// Lower end.
    pub min: LexBound<'a>,
    /// Upper end.
    pub max: LexBound<'a>,
}

impl RangeSpec for LexRange<'_> {
    fn gte_min(&self, _: f64, member: &[u8]) -> bool {
        let c = cmp_lex(&LexBound::Inclusive(member), &self.min);
        if self.min.exclusive() {
            c == Ordering::Greater
        } else {
            c != Ordering::Less
        }
    }

    fn lte_max(&self, _: f64, member: &[u8]) -> bool {
        let c = cmp_lex(&LexBound::Inclusive(member), &self.max);
        if self.max.exclusive() {
            c == Ordering::Less
        } else {
            c != Ordering::Greater
        }
    }

    fn always_empty(&self) -> bool {
        match cmp_lex(&self.min, &self.max) {
            Ordering::Greater => true,
            Ordering::Equal => self.min.exclusive() || self.max.exclusive(),
            Ordering::Less => false,
        }
    }
}

/// The text of a score as a listpack stores it, which is what ZSCAN
/// returns for small sets: an integer when the score is integral and
/// within ±2^62 (Redis's `double2ll`), `%.17g` otherwise.
pub fn listpack_score_text(score: f64) -> String {
    match listpack_score_entry(score, &mut [0; G17_BYTES]) {
        ScoreEntry::Int(n) => n.to_string(),
        ScoreEntry::Text(text) => String::from_utf8_lossy(text).into_owned(),
    }
}

/// A score as a listpack stores it (see [`listpack_score_text`]).
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum ScoreEntry<'a> {
    /// An integral score: the listpack holds this integer.
    Int(i64),
    /// Any other: the listpack holds this `%.17g` text, which is never a
    /// canonical integer.
    Text(&'a [u8]),
}

/// [`listpack_score_text`] without allocating: the integer, or the text
/// written in `buf`.
pub fn listpack_score_entry(score: f64, buf: &mut [u8; G17_BYTES]) -> ScoreEntry<'_> {
    match integral(score) {
        Some(n) => ScoreEntry::Int(n),
        None => ScoreEntry::Text(format_g17_into(score, buf)),
    }
}

/// Redis's `double2ll`: the integer equal to `d` when `|d|` is at most
/// about 2^62 and `d` has no fraction.
fn integral(d: f64) -> Option<i64> {
    const LIMIT: f64 = (i64::MAX / 2) as f64;
    if !(-LIMIT..=LIMIT).contains(&d) {
        return None;
    }
    let n = d as i64;
    (n as f64 == d).then_some(n)
}

/// A listpack cannot hold `-0.0`: Redis stores the integer 0 instead.
fn listpack_score(score: f64) -> f64 {
    if score == 0.0 {
        0.0
    } else {
        score
    }
}

/// Decides ZADD's effect on an existing member with score `current`:
/// `Ok(None)` to skip (NX, GT, LT), `Ok(Some(score))` for the new score.
fn decide(current: f64, score: f64, flags: AddFlags) -> Result<Option<f64>, ScoreIsNan> {
    if flags.nx {
        return Ok(None);
    }
    let mut score = score;
    if flags.incr {
        score += current;
        if score.is_nan() {
            return Err(ScoreIsNan);
        }
    }
    if (flags.lt && score >= current) || (flags.gt && score <= current) {
        return Ok(None);
    }
    Ok(Some(score))
}

const SKIPPED: AddOutcome = AddOutcome {
    added: false,
    updated: false,
    processed: false,
    score: 0.0,
};

impl ZSet {
    /// An empty set in the listpack encoding.
    pub fn new() -> ZSet {
        ZSet::default()
    }

    /// An empty set in the encoding ZADD creates for a first member of
    /// `first_member_len` bytes (skiplist when it cannot be a listpack).
    pub fn for_first_member(first_member_len: usize, limits: &EncodingLimits) -> ZSet {
        if limits.zset_max_listpack_entries == 0
            || first_member_len > limits.zset_max_listpack_value
        {
            ZSet {
                repr: Repr::Skiplist(Box::default()),
            }
        } else {
            ZSet::new()
        }
    }

    /// Builds a set from entries sorted by (score, member) with unique
    /// members, in the encoding that fits them (Redis's *STORE results).
    pub fn from_sorted(entries: Vec<(Blob, f64)>, limits: &EncodingLimits) -> ZSet {
        debug_assert!(
            entries
                .windows(2)
                .all(|w| cmp_key(w[0].1, &w[0].0, w[1].1, &w[1].0) == Ordering::Less),
            "from_sorted needs sorted, unique entries"
        );
        let fits = entries.len() <= limits.zset_max_listpack_entries
            && entries
                .iter()
                .all(|(m, _)| m.len() <= limits.zset_max_listpack_value);
        if fits {
            let entries = entries
                .iter()
                .map(|(m, s)| (m.as_bytes(), listpack_score(*s)));
            return ZSet {
                repr: Repr::Listpack(Packed::from_sorted(entries)),
            };
        }
        ZSet {
            repr: Repr::Skiplist(Box::new(Sorted::from_entries(entries))),
        }
    }

    /// Number of members.
    pub fn len(&self) -> usize {
        match &self.repr {
            Repr::Listpack(v) => v.len(),
            Repr::Skiplist(z) => z.tree.len(),
        }
    }

    /// True when there are no members.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// OBJECT ENCODING.
    pub fn encoding(&self) -> &'static str {
        match &self.repr {
            Repr::Listpack(_) => "listpack",
            // Redis's name for the general encoding, whatever the ordered
            // structure behind it.
            Repr::Skiplist(_) => "skiplist",
        }
    }

    /// True in the listpack encoding.
    pub fn is_listpack(&self) -> bool {
        matches!(self.repr, Repr::Listpack(_))
    }

    /// Converts to the general encoding (no-op when already there).
    pub fn convert_to_skiplist(&mut self) {
        if let Repr::Listpack(p) = &self.repr {
            self.repr = Repr::Skiplist(Box::new(Sorted::from_packed(p)));
        }
    }

    /// The score of `member`.
    pub fn score(&self, member: &[u8]) -> Option<f64> {
        match &self.repr {
            Repr::Listpack(p) => p.find_member(member).map(|(_, e)| e.score),
            Repr::Skiplist(z) => z.dict.get(member).copied(),
        }
    }

    /// ZADD for one member (Redis's `zsetAdd`): adds it or updates its
    /// score under `flags`, converting to the general encoding when a new
    /// member does not fit the listpack limits.
    pub fn add(
        &mut self,
        member: &[u8],
        score: f64,
        flags: AddFlags,
        limits: &EncodingLimits,
    ) -> Result<AddOutcome, ScoreIsNan> {
        if score.is_nan() {
            return Err(ScoreIsNan);
        }
        if let Repr::Listpack(p) = &mut self.repr {
            // One walk finds the member and where it would go if new (a
            // new member's score is `score`, with or without INCR).
            let found = p.find(member, score);
            match found.hit {
                Some((_, entry)) => {
                    let current = entry.score;
                    let (start, end) = (entry.start, entry.end);
                    let Some(new_score) = decide(current, score, flags)? else {
                        return Ok(SKIPPED);
                    };
                    let updated = new_score != current;
                    if updated {
                        p.rescore(start, end, member, listpack_score(new_score));
                    }
                    return Ok(AddOutcome {
                        added: false,
                        updated,
                        processed: true,
                        score: new_score,
                    });
                }
                None if flags.xx => return Ok(SKIPPED),
                None => {
                    if p.len() < limits.zset_max_listpack_entries
                        && member.len() <= limits.zset_max_listpack_value
                    {
                        p.insert_at(found.insert_at, member, listpack_score(score));
                        return Ok(AddOutcome {
                            added: true,
                            updated: false,
                            processed: true,
                            score,
                        });
                    }
                    self.convert_to_skiplist();
                }
            }
        }
        let Repr::Skiplist(z) = &mut self.repr else {
            unreachable!("a listpack either returned or converted above");
        };
        match z.dict.get_mut(member) {
            Some(slot) => {
                let current = *slot;
                let Some(new_score) = decide(current, score, flags)? else {
                    return Ok(SKIPPED);
                };
                let updated = new_score != current;
                if updated {
                    *slot = new_score;
                    z.tree.update_score(member, current, new_score);
                }
                Ok(AddOutcome {
                    added: false,
                    updated,
                    processed: true,
                    score: new_score,
                })
            }
            None if flags.xx => Ok(SKIPPED),
            None => {
                z.dict.insert_new(Blob::new(member), score);
                z.tree.insert(Blob::new(member), score);
                Ok(AddOutcome {
                    added: true,
                    updated: false,
                    processed: true,
                    score,
                })
            }
        }
    }

    /// Removes `member`; true when it was present.
    pub fn remove(&mut self, member: &[u8]) -> bool {
        match &mut self.repr {
            Repr::Listpack(p) => match p.find_member(member) {
                Some((_, e)) => {
                    let (start, end) = (e.start, e.end);
                    p.remove_span(start, end, 1);
                    true
                }
                None => false,
            },
            Repr::Skiplist(z) => match z.dict.remove(member) {
                Some((_, score)) => {
                    z.tree
                        .remove(member, score)
                        .expect("the tree holds every member of the dict");
                    true
                }
                None => false,
            },
        }
    }

    /// The 0-based rank of `member` in ascending order.
    pub fn rank(&self, member: &[u8]) -> Option<usize> {
        match &self.repr {
            Repr::Listpack(p) => p.find_member(member).map(|(rank, _)| rank),
            Repr::Skiplist(z) => {
                let score = *z.dict.get(member)?;
                z.tree.rank(member, score)
            }
        }
    }

    /// The member and score at 0-based `rank`.
    pub fn get(&self, rank: usize) -> Option<(&[u8], f64)> {
        match &self.repr {
            Repr::Listpack(p) => p.get(rank).map(|e| (e.member, e.score)),
            Repr::Skiplist(z) => z.tree.get(rank).map(|(m, s)| (m.as_bytes(), s)),
        }
    }

    /// Iterates from rank `start` towards the highest scores (towards the
    /// lowest when `reverse`). Empty when `start` is out of range.
    pub fn iter_from(&self, start: usize, reverse: bool) -> Iter<'_> {
        match &self.repr {
            Repr::Listpack(p) => Iter(IterRepr::Listpack(packed::Iter::new(p, start, reverse))),
            Repr::Skiplist(z) => Iter(IterRepr::Tree(z.tree.iter_from(start, reverse))),
        }
    }

    /// Iterates over all members in ascending order.
    pub fn iter(&self) -> Iter<'_> {
        self.iter_from(0, false)
    }

    /// The rank of the first element in `range`, as Redis finds it (a
    /// linear scan for a listpack, which matters only for lex ranges over
    /// mixed scores, where Redis leaves the result unspecified).
    pub fn first_in_range(&self, range: &impl RangeSpec) -> Option<usize> {
        if !self.may_intersect(range) {
            return None;
        }
        let (pos, (member, score)) = match &self.repr {
            Repr::Listpack(p) => {
                let (pos, e) = p
                    .entries_from(0)
                    .enumerate()
                    .find(|(_, e)| range.gte_min(e.score, e.member))?;
                (pos, (e.member, e.score))
            }
            Repr::Skiplist(z) => {
                let pos = z.tree.count_while(|s, m| !range.gte_min(s, m));
                (pos, self.get(pos)?)
            }
        };
        range.lte_max(score, member).then_some(pos)
    }

    /// The rank of the last element in `range`.
    pub fn last_in_range(&self, range: &impl RangeSpec) -> Option<usize> {
        if !self.may_intersect(range) {
            return None;
        }
        let pos = match &self.repr {
            // The last entry at or below the maximum, as Redis's backward
            // scan finds it.
            Repr::Listpack(p) => {
                p.entries_from(0)
                    .enumerate()
                    .filter(|(_, e)| range.lte_max(e.score, e.member))
                    .last()?
                    .0
            }
            Repr::Skiplist(z) => z
                .tree
                .count_while(|s, m| range.lte_max(s, m))
                .checked_sub(1)?,
        };
        let (member, score) = self.get(pos)?;
        range.gte_min(score, member).then_some(pos)
    }

    /// Redis's `zslIsInRange`: false when the range is empty or lies
    /// entirely above or below the elements.
    fn may_intersect(&self, range: &impl RangeSpec) -> bool {
        if range.always_empty() {
            return false;
        }
        let (Some((last_m, last_s)), Some((first_m, first_s))) =
            (self.get(self.len().wrapping_sub(1)), self.get(0))
        else {
            return false;
        };
        range.gte_min(last_s, last_m) && range.lte_max(first_s, first_m)
    }

    /// Number of elements in `range` (ZCOUNT, ZLEXCOUNT).
    pub fn count_in_range(&self, range: &impl RangeSpec) -> usize {
        let Some(first) = self.first_in_range(range) else {
            return 0;
        };
        match &self.repr {
            Repr::Listpack(_) => self
                .iter_from(first, false)
                .take_while(|(m, s)| range.lte_max(*s, m))
                .count(),
            Repr::Skiplist(_) => {
                // Rank arithmetic, as Redis does for its skip list.
                let len = self.len();
                let mut count = len - first;
                if let Some(last) = self.last_in_range(range) {
                    count = count.saturating_sub(len - (last + 1));
                }
                count
            }
        }
    }

    /// Removes the elements in `range` (ZREMRANGEBYSCORE/LEX): from the
    /// first element at or above the minimum, while at or below the
    /// maximum. Returns how many were removed.
    pub fn remove_in_range(&mut self, range: &impl RangeSpec) -> usize {
        let start = match &self.repr {
            Repr::Listpack(_) => self.first_in_range(range),
            Repr::Skiplist(z) => Some(z.tree.count_while(|s, m| !range.gte_min(s, m))),
        };
        let Some(start) = start else { return 0 };
        let run = self
            .iter_from(start, false)
            .take_while(|(m, s)| range.lte_max(*s, m))
            .count();
        self.remove_ranks(start, start + run).len()
    }

    /// Removes the elements of ranks `start..end`, returning them in
    /// ascending order.
    pub fn remove_ranks(&mut self, start: usize, end: usize) -> Vec<(Blob, f64)> {
        let end = end.min(self.len());
        if start >= end {
            return Vec::new();
        }
        match &mut self.repr {
            Repr::Listpack(p) => {
                let from = p.offset_of(start).expect("start < len");
                let removed: Vec<(Blob, f64)> = p
                    .entries_from(from)
                    .take(end - start)
                    .map(|e| (Blob::new(e.member), e.score))
                    .collect();
                let to = p.offset_of(end).expect("end <= len");
                p.remove_span(from, to, end - start);
                removed
            }
            Repr::Skiplist(z) => {
                let removed = z.tree.remove_range(start, end);
                for (member, _) in &removed {
                    z.dict.remove(member.as_bytes());
                }
                removed
            }
        }
    }

    /// A random element, uniform over the elements in either encoding (by
    /// index in a listpack, [`Dict::random`] in the general encoding).
    pub fn random(&self, rng: &mut Rng) -> Option<(&[u8], f64)> {
        match &self.repr {
            Repr::Listpack(p) if p.len() == 0 => None,
            Repr::Listpack(p) => p.get(rng.index(p.len())).map(|e| (e.member, e.score)),
            Repr::Skiplist(z) => z.dict.random(rng).map(|(m, s)| (m.as_bytes(), *s)),
        }
    }

    /// One ZSCAN step over the general encoding's hash table: visits the
    /// elements of the bucket(s) at `cursor`, returns the next cursor.
    /// `None` for a listpack, which ZSCAN returns whole.
    pub fn scan_step(&self, cursor: u64, mut visit: impl FnMut(&[u8], f64)) -> Option<u64> {
        match &self.repr {
            Repr::Listpack(_) => None,
            Repr::Skiplist(z) => Some(z.dict.scan_step(cursor, |m, s| visit(m, *s))),
        }
    }

    /// Checks the internal invariants (tests).
    pub fn check_invariants(&self) -> Result<(), String> {
        match &self.repr {
            Repr::Listpack(p) => p.check(),
            Repr::Skiplist(z) => {
                z.tree.check_invariants()?;
                if z.dict.len() != z.tree.len() {
                    return Err("dict and tree sizes differ".into());
                }
                for (m, s) in z.tree.iter() {
                    if z.dict.get(m.as_bytes()) != Some(&s) {
                        return Err(format!("dict disagrees on {m:?}"));
                    }
                }
                Ok(())
            }
        }
    }
}

/// Iterator over a range of a [`ZSet`], yielding `(member, score)`.
pub struct Iter<'a>(IterRepr<'a>);

enum IterRepr<'a> {
    /// Over a listpack.
    Listpack(packed::Iter<'a>),
    /// Over the general encoding.
    Tree(ordtree::Iter<'a>),
}

impl<'a> Iterator for Iter<'a> {
    type Item = (&'a [u8], f64);

    fn next(&mut self) -> Option<Self::Item> {
        match &mut self.0 {
            IterRepr::Listpack(it) => it.next(),
            IterRepr::Tree(it) => it.next().map(|(m, s)| (m.as_bytes(), s)),
        }
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        match &self.0 {
            IterRepr::Listpack(it) => it.size_hint(),
            IterRepr::Tree(it) => it.size_hint(),
        }
    }
}

impl ExactSizeIterator for Iter<'_> {}

#[cfg(test)]
mod tests {
    use super::*;

    fn limits() -> EncodingLimits {
        EncodingLimits::default()
    }

    fn members(z: &ZSet) -> Vec<Vec<u8>> {
        z.iter().map(|(m, _)| m.to_vec()).collect()
    }

    #[test]
    fn listpack_orders_by_score_then_member_and_converts_past_the_limits() {
        let mut z = ZSet::new();
        let l = limits();
        for (m, s) in [("b", 1.0), ("a", 1.0), ("c", 0.5)] {
            z.add(m.as_bytes(), s, AddFlags::default(), &l).unwrap();
        }
        assert_eq!(
            members(&z),
            vec![b"c".to_vec(), b"a".to_vec(), b"b".to_vec()]
        );
        assert_eq!(z.encoding(), "listpack");
        for i in 0..125 {
            z.add(
                format!("m{i}").as_bytes(),
                f64::from(i),
                AddFlags::default(),
                &l,
            )
            .unwrap();
        }
        assert_eq!(z.len(), 128);
        assert_eq!(z.encoding(), "listpack");
        z.add(b"one-more", 3.0, AddFlags::default(), &l).unwrap();
        assert_eq!(z.encoding(), "skiplist");
        z.check_invariants().unwrap();
        let mut long = ZSet::new();
        long.add(&[b'x'; 65], 1.0, AddFlags::default(), &l).unwrap();
        assert_eq!(long.encoding(), "skiplist");
    }

    #[test]
    fn negative_zero_becomes_zero_only_in_a_listpack() {
        let l = limits();
        let mut small = ZSet::new();
        let out = small.add(b"a", -0.0, AddFlags::default(), &l).unwrap();
        assert!(out.score.is_sign_negative(), "the reply keeps -0");
        assert!(small.score(b"a").unwrap().is_sign_positive());
        let mut big = ZSet::for_first_member(100, &l);
        big.add(b"a", -0.0, AddFlags::default(), &l).unwrap();
        assert!(big.score(b"a").unwrap().is_sign_negative());
    }

    /// Redis compares scores with `<` and `==`, so `-0` and `0` tie and
    /// the member bytes decide; the general encoding keeps `-0` as given.
    /// Rebuilding from the iteration order (what the snapshot loader does)
    /// gives back the same order and score bits.
    #[test]
    fn negative_and_positive_zero_tie_and_order_by_member() {
        let l = limits();
        let f = AddFlags::default();
        for filler in [0, 200] {
            let mut z = ZSet::new();
            for i in 0..filler {
                z.add(format!("m{i:03}").as_bytes(), f64::from(i % 3) - 1.0, f, &l)
                    .unwrap();
            }
            for (m, s) in [
                ("a", -0.0),
                ("b", 0.0),
                ("c", -0.0),
                ("zz", -0.0),
                ("aa", 0.0),
            ] {
                z.add(m.as_bytes(), s, f, &l).unwrap();
            }
            z.check_invariants().unwrap();
            let zeros: Vec<(Vec<u8>, bool)> = z
                .iter()
                .filter(|(_, s)| *s == 0.0)
                .map(|(m, s)| (m.to_vec(), s.is_sign_negative()))
                .collect();
            let names: Vec<&[u8]> = zeros.iter().map(|(m, _)| m.as_slice()).collect();
            if filler > 0 {
                let mut all: Vec<Vec<u8>> = (0..filler)
                    .filter(|i| i % 3 == 1)
                    .map(|i| format!("m{i:03}").into_bytes())
                    .collect();
                all.extend([b"a".to_vec(), b"aa".to_vec(), b"b".to_vec()]);
                all.extend([b"c".to_vec(), b"zz".to_vec()]);
                all.sort();
                assert_eq!(names, all.iter().map(Vec::as_slice).collect::<Vec<_>>());
                assert_eq!(z.encoding(), "skiplist");
                // The general encoding keeps the sign it was given.
                for (m, neg) in &zeros {
                    let given_neg = matches!(m.as_slice(), b"a" | b"c" | b"zz");
                    assert_eq!(*neg, given_neg, "{m:?}");
                }
            } else {
                assert_eq!(names, [&b"a"[..], b"aa", b"b", b"c", b"zz"]);
                assert_eq!(z.encoding(), "listpack");
                assert!(zeros.iter().all(|(_, neg)| !neg), "a listpack stores 0");
            }
            // Ranks and score ranges treat -0 and 0 as one score.
            let r = ScoreRange {
                min: 0.0,
                max: -0.0,
                min_exclusive: false,
                max_exclusive: false,
            };
            assert_eq!(z.count_in_range(&r), zeros.len());
            let first = z.first_in_range(&r).unwrap();
            assert_eq!(z.get(first).unwrap().0, zeros[0].0.as_slice());
            assert_eq!(z.rank(b"c"), z.rank(b"b").map(|r| r + 1));
            // Updating to the other zero changes nothing (Redis's
            // `score != curscore`), so the stored sign stays.
            let before = z.score(b"a").unwrap().to_bits();
            let out = z.add(b"a", 0.0, f, &l).unwrap();
            assert!(!out.updated);
            assert_eq!(z.score(b"a").unwrap().to_bits(), before);
            // What the snapshot loader does: rebuild from the saved order.
            let entries: Vec<(Blob, f64)> = z.iter().map(|(m, s)| (Blob::new(m), s)).collect();
            let rebuilt = ZSet::from_sorted(entries, &l);
            rebuilt.check_invariants().unwrap();
            let bits = |z: &ZSet| -> Vec<(Vec<u8>, u64)> {
                z.iter().map(|(m, s)| (m.to_vec(), s.to_bits())).collect()
            };
            assert_eq!(bits(&rebuilt), bits(&z));
        }
    }

    /// Random ZADD / ZINCRBY / ZREM / ZREMRANGEBYRANK / ZREMRANGEBYSCORE
    /// runs with many `-0` and `0` scores, small and large, against a model
    /// ordered the way Redis orders (`<` on scores, then member bytes).
    #[test]
    fn zero_signs_never_disturb_the_order() {
        fn prop(seed: u64) -> bool {
            let l = limits();
            let mut rng = Rng::with_seed(seed);
            let mut z = ZSet::new();
            // member -> score as stored.
            let mut model: Vec<(Vec<u8>, f64)> = Vec::new();
            // Redis's order, written independently of `cmp_key`.
            let redis_order = |a: &(Vec<u8>, f64), b: &(Vec<u8>, f64)| {
                a.1.partial_cmp(&b.1)
                    .expect("no NaN")
                    .then_with(|| a.0.cmp(&b.0))
            };
            let scores = [-0.0, 0.0, -0.0, 0.0, 1.0, -1.0, f64::INFINITY, 0.5];
            let space = if rng.below(2) == 0 { 20 } else { 300 };
            for _ in 0..600 {
                let member = format!("m{}", rng.below(space)).into_bytes();
                let score = scores[rng.index(scores.len())];
                match rng.below(40) {
                    0..=31 => {
                        let incr = rng.below(4) == 0;
                        let flags = AddFlags {
                            incr,
                            ..AddFlags::default()
                        };
                        let out = z
                            .add(&member, score, flags, &l)
                            .expect("no -inf among the scores, so no NaN sum");
                        match model.iter_mut().find(|(m, _)| *m == member) {
                            Some((_, s)) => {
                                let new = if incr { *s + score } else { score };
                                assert_eq!(out.updated, new != *s);
                                if new != *s {
                                    *s = new;
                                }
                            }
                            None => model.push((member, score)),
                        }
                    }
                    32..=36 => {
                        let present = model.iter().position(|(m, _)| *m == member);
                        assert_eq!(z.remove(&member), present.is_some());
                        if let Some(i) = present {
                            model.remove(i);
                        }
                    }
                    37 | 38 => {
                        let start = rng.index(model.len() + 1);
                        let end = start + rng.index(4);
                        z.remove_ranks(start, end);
                        model.sort_by(redis_order);
                        model.drain(start.min(model.len())..end.min(model.len()));
                    }
                    _ => {
                        let r = ScoreRange {
                            min: score,
                            max: 0.0,
                            min_exclusive: rng.below(2) == 0,
                            max_exclusive: rng.below(2) == 0,
                        };
                        let n = model.len();
                        model.retain(|(_, s)| !(r.gte_min(*s, b"") && r.lte_max(*s, b"")));
                        assert_eq!(z.remove_in_range(&r), n - model.len());
                    }
                }
                if z.is_listpack() {
                    for (_, s) in &mut model {
                        *s = listpack_score(*s);
                    }
                }
            }
            z.check_invariants().unwrap();
            let mut want: Vec<(Vec<u8>, f64)> = model;
            want.sort_by(redis_order);
            let want: Vec<(Vec<u8>, u64)> =
                want.into_iter().map(|(m, s)| (m, s.to_bits())).collect();
            let got: Vec<(Vec<u8>, u64)> =
                z.iter().map(|(m, s)| (m.to_vec(), s.to_bits())).collect();
            // Rebuilt from its order, as the snapshot loader does, it keeps
            // order and score bits (but a listpack stores -0 as 0).
            let entries: Vec<(Blob, f64)> = z.iter().map(|(m, s)| (Blob::new(m), s)).collect();
            let rebuilt = ZSet::from_sorted(entries, &l);
            rebuilt.check_invariants().unwrap();
            let rebuilt_want: Vec<(Vec<u8>, u64)> = got
                .iter()
                .map(|(m, bits)| match rebuilt.is_listpack() {
                    true => (m.clone(), listpack_score(f64::from_bits(*bits)).to_bits()),
                    false => (m.clone(), *bits),
                })
                .collect();
            let rebuilt: Vec<(Vec<u8>, u64)> = rebuilt
                .iter()
                .map(|(m, s)| (m.to_vec(), s.to_bits()))
                .collect();
            got == want && rebuilt == rebuilt_want
        }
        quickcheck::QuickCheck::new()
            .tests(200)
            .quickcheck(prop as fn(u64) -> bool);
    }

    /// Random ZADD / ZINCRBY / ZREM / ZRANK / ZRANGE / ZREVRANGE / ZSCORE
    /// runs on a listpack against a model (a sorted vector of (member,
    /// score)), with members across the length varint's 1- and 2-byte forms
    /// and scores in both of the packed block's score forms.
    #[test]
    fn packed_listpack_matches_a_sorted_vector() {
        fn prop(seed: u64) -> bool {
            // Up to 300 distinct members (60 numbers × 5 lengths): the set
            // must stay a listpack whatever the draw.
            let l = EncodingLimits {
                zset_max_listpack_value: 200,
                zset_max_listpack_entries: 1024,
                ..limits()
            };
            let mut rng = Rng::with_seed(seed);
            let mut z = ZSet::new();
            let mut model: Vec<(Vec<u8>, f64)> = Vec::new();
            let scores = [
                0.0, 1.0, -1.0, 31.0, -32.0, 32.0, 1e6, -2.5, 0.125, 9e15, 1e300,
            ];
            let sort = |m: &mut Vec<(Vec<u8>, f64)>| {
                m.sort_by(|a, b| a.1.partial_cmp(&b.1).unwrap().then_with(|| a.0.cmp(&b.0)))
            };
            for _ in 0..300 {
                let i = rng.below(60);
                let len = [1, 5, 127, 128, 200][rng.index(5)];
                let mut member = format!("{i}:").into_bytes();
                member.resize(len.max(member.len()), b'x');
                let score = scores[rng.index(scores.len())];
                match rng.below(10) {
                    0..=4 => {
                        let incr = rng.below(3) == 0;
                        let flags = AddFlags {
                            incr,
                            ..AddFlags::default()
                        };
                        let out = z.add(&member, score, flags, &l).unwrap();
                        match model.iter_mut().find(|(m, _)| *m == member) {
                            Some((_, s)) => {
                                let new = if incr { *s + score } else { score };
                                assert_eq!(out.updated, new != *s);
                                *s = new;
                            }
                            None => model.push((member.clone(), score)),
                        }
                    }
                    5 | 6 => {
                        let at = model.iter().position(|(m, _)| *m == member);
                        assert_eq!(z.remove(&member), at.is_some());
                        if let Some(at) = at {
                            model.remove(at);
                        }
                    }
                    _ => {
                        sort(&mut model);
                        let rank = model.iter().position(|(m, _)| *m == member);
                        assert_eq!(z.rank(&member), rank);
                        assert_eq!(z.score(&member), rank.map(|r| model[r].1));
                        let start = rng.index(model.len() + 2);
                        let fwd: Vec<(Vec<u8>, f64)> = z
                            .iter_from(start, false)
                            .map(|(m, s)| (m.to_vec(), s))
                            .collect();
                        assert_eq!(fwd, model.get(start..).unwrap_or_default());
                        let rev: Vec<(Vec<u8>, f64)> = z
                            .iter_from(start, true)
                            .map(|(m, s)| (m.to_vec(), s))
                            .collect();
                        let mut want = model.get(..=start).unwrap_or_default().to_vec();
                        want.reverse();
                        assert_eq!(rev, want);
                        assert_eq!(
                            z.get(start).map(|(m, s)| (m.to_vec(), s)),
                            model.get(start).cloned()
                        );
                    }
                }
                assert_eq!(z.encoding(), "listpack");
                z.check_invariants().unwrap();
            }
            sort(&mut model);
            let got: Vec<(Vec<u8>, f64)> = z.iter().map(|(m, s)| (m.to_vec(), s)).collect();
            got == model
        }
        quickcheck::QuickCheck::new()
            .tests(200)
            .quickcheck(prop as fn(u64) -> bool);
    }

    #[test]
    fn add_flags_follow_zsetadd() {
        let l = limits();
        for mut z in [ZSet::new(), ZSet::for_first_member(1000, &l)] {
            let f = AddFlags::default();
            assert!(z.add(b"a", 5.0, f, &l).unwrap().added);
            let nx = AddFlags { nx: true, ..f };
            assert!(!z.add(b"a", 6.0, nx, &l).unwrap().processed);
            let gt = AddFlags { gt: true, ..f };
            assert!(!z.add(b"a", 4.0, gt, &l).unwrap().processed);
            assert!(z.add(b"a", 7.0, gt, &l).unwrap().updated);
            let incr = AddFlags { incr: true, ..f };
            assert_eq!(z.add(b"a", 1.5, incr, &l).unwrap().score, 8.5);
            z.add(b"b", f64::INFINITY, f, &l).unwrap();
            assert_eq!(z.add(b"b", f64::NEG_INFINITY, incr, &l), Err(ScoreIsNan));
            let xx = AddFlags { xx: true, ..f };
            assert!(!z.add(b"new", 1.0, xx, &l).unwrap().processed);
            assert_eq!(z.len(), 2);
            z.check_invariants().unwrap();
        }
    }

    #[test]
    fn ranges_agree_between_encodings() {
        let l = limits();
        let mut small = ZSet::new();
        let mut big = ZSet::for_first_member(1000, &l);
        for i in 0..100 {
            let m = format!("{:03}", i);
            small
                .add(m.as_bytes(), f64::from(i / 3), AddFlags::default(), &l)
                .unwrap();
            big.add(m.as_bytes(), f64::from(i / 3), AddFlags::default(), &l)
                .unwrap();
        }
        for min in -1..36 {
            for width in 0..5 {
                for (min_exclusive, max_exclusive) in
                    [(false, false), (true, false), (false, true), (true, true)]
                {
                    let r = ScoreRange {
                        min: f64::from(min),
                        max: f64::from(min + width),
                        min_exclusive,
                        max_exclusive,
                    };
                    assert_eq!(small.first_in_range(&r), big.first_in_range(&r));
                    assert_eq!(small.last_in_range(&r), big.last_in_range(&r));
                    assert_eq!(small.count_in_range(&r), big.count_in_range(&r));
                }
            }
        }
        let r = ScoreRange {
            min: 10.0,
            max: 20.0,
            min_exclusive: true,
            max_exclusive: false,
        };
        assert_eq!(small.remove_in_range(&r), big.remove_in_range(&r));
        assert_eq!(members(&small), members(&big));
        big.check_invariants().unwrap();
    }

    #[test]
    fn lex_ranges_with_equal_scores() {
        let l = limits();
        let mut big = ZSet::for_first_member(1000, &l);
        for c in b'a'..=b'z' {
            big.add(&[c], 0.0, AddFlags::default(), &l).unwrap();
        }
        let r = LexRange {
            min: LexBound::Exclusive(b"c"),
            max: LexBound::Inclusive(b"f"),
        };
        assert_eq!(big.first_in_range(&r), Some(3));
        assert_eq!(big.count_in_range(&r), 3);
        let all = LexRange {
            min: LexBound::Min,
            max: LexBound::Max,
        };
        assert_eq!(big.count_in_range(&all), 26);
        let none = LexRange {
            min: LexBound::Max,
            max: LexBound::Max,
        };
        assert!(none.always_empty());
    }

    #[test]
    fn listpack_score_text_matches_d2string() {
        assert_eq!(listpack_score_text(3.0), "3");
        assert_eq!(listpack_score_text(1e17), "100000000000000000");
        assert_eq!(listpack_score_text(1e19), "1e+19");
        assert_eq!(listpack_score_text(1.5), "1.5");
        assert_eq!(listpack_score_text(f64::NEG_INFINITY), "-inf");
    }

    #[test]
    fn listpack_score_entries_are_the_text_a_listpack_parses() {
        let mut rng = Rng::with_seed(5);
        let mut buf = [0; G17_BYTES];
        for i in 0..100_000 {
            let score = match i % 4 {
                0 => f64::from_bits(rng.next_u64()),
                1 => (rng.next_u64() as i64 >> rng.below(64)) as f64,
                2 => (rng.next_u64() as i64 >> rng.below(64)) as f64 / 8.0,
                _ => rng.below(1 << 30) as f64 / 7.0,
            };
            if score.is_nan() {
                continue;
            }
            let text = listpack_score_text(score);
            match listpack_score_entry(score, &mut buf) {
                // A listpack stores the canonical decimal form as this integer.
                ScoreEntry::Int(n) => assert_eq!(text, n.to_string()),
                ScoreEntry::Text(t) => {
                    assert_eq!(t, text.as_bytes());
                    assert_eq!(crate::types::num::parse_i64(t), None, "{text}");
                }
            }
        }
    }
}
