//! The compact encoding of a small sorted set: every entry back to back in
//! one exactly sized heap block, ordered by (score, member), re-allocated
//! on each change (as Redis's listpack is).
//!
//! An entry is its score, then the member's length as a LEB128 varint,
//! then the member's bytes. A score is either
//!
//! * an integer `n` with `|n| <= 2^53` (so `n as f64` is exact): the varint
//!   of `zigzag(n) << 1`, whose first byte is even: 1 byte up to ±31,
//!   2 up to ±2^12, 3 up to ±2^19, 4 up to ±2^26; or
//! * any other: the byte `0x01`, then the `f64`'s 8 bytes little-endian.
//!
//! `"user:1234"` with score 7 takes 11 bytes. There is no back-length:
//! reverse walks collect the entries' offsets first.
//!
//! The block never holds `-0.0`: its integer form reads back as `0.0`
//! (callers store `0.0` anyway, see `listpack_score`).

use crate::types::varint::{len as varint_len, read as read_varint, write as write_varint};

use std::cmp::Ordering;

use super::super::ordtree::cmp_key;

/// Marker byte of a score stored as 8 bytes.
const FLOAT_SCORE: u8 = 0x01;

/// Largest integer magnitude stored in integer form (exact as an `f64`).
const INT_SCORE_MAX: f64 = (1u64 << 53) as f64;

/// Entries packed in one block (see the module doc).
#[derive(Debug, Clone, Default)]
pub(super) struct Packed {
    buf: Box<[u8]>,
    len: usize,
}

/// One decoded entry of a [`Packed`]: where it lies and what it holds.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(super) struct Entry<'a> {
    /// Offset of the entry's first byte.
    pub start: usize,
    /// Offset just past the entry.
    pub end: usize,
    /// The member's bytes.
    pub member: &'a [u8],
    /// The score.
    pub score: f64,
}

/// Where [`Packed::find`] found a member, and where a new entry for it
/// would go.
pub(super) struct Found<'a> {
    /// The member's rank and entry, when present.
    pub hit: Option<(usize, Entry<'a>)>,
    /// The offset at which an entry for the member and the searched score
    /// would be inserted (ignoring the member's current entry).
    pub insert_at: usize,
}

/// The varint a score in integer form is stored as, if it has one.
fn int_form(score: f64) -> Option<u64> {
    if !(-INT_SCORE_MAX..=INT_SCORE_MAX).contains(&score) || score.fract() != 0.0 {
        return None;
    }
    let n = score as i64;
    let zigzag = ((n << 1) ^ (n >> 63)) as u64;
    Some(zigzag << 1)
}

/// Bytes the score takes.
fn score_len(score: f64) -> usize {
    match int_form(score) {
        Some(v) => varint_len(v),
        None => 9,
    }
}

/// Bytes an entry takes.
pub(super) fn entry_len(member: &[u8], score: f64) -> usize {
    score_len(score) + varint_len(member.len() as u64) + member.len()
}

/// Writes an entry into `dst`, which is exactly [`entry_len`] bytes.
fn write_entry(dst: &mut [u8], member: &[u8], score: f64) {
    let mut at = match int_form(score) {
        Some(v) => write_varint(dst, v),
        None => {
            dst[0] = FLOAT_SCORE;
            dst[1..9].copy_from_slice(&score.to_le_bytes());
            9
        }
    };
    at += write_varint(&mut dst[at..], member.len() as u64);
    dst[at..].copy_from_slice(member);
}

/// Reads the score at `pos`: (score, offset past it).
fn read_score(buf: &[u8], pos: usize) -> (f64, usize) {
    if buf[pos] == FLOAT_SCORE {
        let bytes: [u8; 8] = buf[pos + 1..pos + 9].try_into().expect("8 bytes");
        return (f64::from_le_bytes(bytes), pos + 9);
    }
    let (v, end) = read_varint(buf, pos);
    let zigzag = v >> 1;
    let n = (zigzag >> 1) as i64 ^ -((zigzag & 1) as i64);
    (n as f64, end)
}

/// The offset past the score at `pos`, without decoding it.
fn skip_score(buf: &[u8], pos: usize) -> usize {
    if buf[pos] == FLOAT_SCORE {
        return pos + 9;
    }
    let mut at = pos;
    while buf[at] & 0x80 != 0 {
        at += 1;
    }
    at + 1
}

/// Reads the member at `pos`: (member start, offset past it).
fn read_member(buf: &[u8], pos: usize) -> (usize, usize) {
    let (len, start) = read_varint(buf, pos);
    (start, start + len as usize)
}

impl Packed {
    /// Packs entries already sorted by (score, member), with unique
    /// members and no `-0.0`.
    pub fn from_sorted<'a>(entries: impl Iterator<Item = (&'a [u8], f64)> + Clone) -> Packed {
        let size: usize = entries.clone().map(|(m, s)| entry_len(m, s)).sum();
        let mut buf = vec![0; size].into_boxed_slice();
        let mut at = 0;
        let mut len = 0;
        for (member, score) in entries {
            let n = entry_len(member, score);
            write_entry(&mut buf[at..at + n], member, score);
            at += n;
            len += 1;
        }
        Packed { buf, len }
    }

    /// Number of entries.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Bytes of the block.
    #[cfg(test)]
    pub fn bytes(&self) -> usize {
        self.buf.len()
    }

    /// The entry starting at `pos` (which must start one).
    pub fn entry_at(&self, pos: usize) -> Entry<'_> {
        let (score, after) = read_score(&self.buf, pos);
        let (member_start, end) = read_member(&self.buf, after);
        Entry {
            start: pos,
            end,
            member: &self.buf[member_start..end],
            score,
        }
    }

    /// The entries in order, from the one at offset `pos`.
    pub fn entries_from(&self, pos: usize) -> impl Iterator<Item = Entry<'_>> + '_ {
        let mut at = pos;
        std::iter::from_fn(move || {
            if at >= self.buf.len() {
                return None;
            }
            let entry = self.entry_at(at);
            at = entry.end;
            Some(entry)
        })
    }

    /// The offset of the entry of `rank` (the block's size when `rank` is
    /// the length; `None` past it).
    pub fn offset_of(&self, rank: usize) -> Option<usize> {
        if rank > self.len {
            return None;
        }
        let mut at = 0;
        for _ in 0..rank {
            at = read_member(&self.buf, skip_score(&self.buf, at)).1;
        }
        Some(at)
    }

    /// The entry of `rank`.
    pub fn get(&self, rank: usize) -> Option<Entry<'_>> {
        if rank >= self.len {
            return None;
        }
        self.offset_of(rank).map(|at| self.entry_at(at))
    }

    /// The offsets of the entries of ranks `0..=last` (reverse walks).
    pub fn offsets_through(&self, last: usize) -> Vec<usize> {
        let n = (last + 1).min(self.len);
        let mut offsets = Vec::with_capacity(n);
        let mut at = 0;
        for _ in 0..n {
            offsets.push(at);
            at = read_member(&self.buf, skip_score(&self.buf, at)).1;
        }
        offsets
    }

    /// Looks `member` up; decodes only the scores it needs.
    pub fn find_member(&self, member: &[u8]) -> Option<(usize, Entry<'_>)> {
        let buf = &self.buf[..];
        let mut at = 0;
        let mut rank = 0;
        while at < buf.len() {
            let (start, end) = read_member(buf, skip_score(buf, at));
            if &buf[start..end] == member {
                return Some((rank, self.entry_at(at)));
            }
            at = end;
            rank += 1;
        }
        None
    }

    /// Looks `member` up and finds where an entry for (`score`, `member`)
    /// would go, in one walk.
    pub fn find(&self, member: &[u8], score: f64) -> Found<'_> {
        let mut hit = None;
        let mut insert_at = None;
        for (rank, entry) in self.entries_from(0).enumerate() {
            if insert_at.is_none()
                && cmp_key(entry.score, entry.member, score, member) != Ordering::Less
            {
                insert_at = Some(entry.start);
            }
            if entry.member == member {
                hit = Some((rank, entry));
            }
            if hit.is_some() && insert_at.is_some() {
                break;
            }
        }
        Found {
            hit,
            insert_at: insert_at.unwrap_or(self.buf.len()),
        }
    }

    /// The offset at which (`score`, `member`) would be inserted.
    fn insert_point(&self, member: &[u8], score: f64) -> usize {
        self.entries_from(0)
            .find(|e| cmp_key(e.score, e.member, score, member) != Ordering::Less)
            .map_or(self.buf.len(), |e| e.start)
    }

    /// Replaces the bytes `at..at + remove` by `insert` new bytes, returns
    /// them to be written. Reallocates the block to its exact new size.
    fn splice(&mut self, at: usize, remove: usize, insert: usize) -> &mut [u8] {
        let old = self.buf.len();
        let new = old - remove + insert;
        let mut v = std::mem::take(&mut self.buf).into_vec();
        if insert > remove {
            v.reserve_exact(insert - remove);
            v.resize(new, 0);
            v.copy_within(at + remove..old, at + insert);
        } else {
            v.copy_within(at + remove..old, at + insert);
            v.truncate(new);
        }
        self.buf = v.into_boxed_slice();
        &mut self.buf[at..at + insert]
    }

    /// Inserts a new entry at offset `at`, which must keep the order.
    pub fn insert_at(&mut self, at: usize, member: &[u8], score: f64) {
        let n = entry_len(member, score);
        write_entry(self.splice(at, 0, n), member, score);
        self.len += 1;
    }

    /// Inserts a new member (not present) in order.
    pub fn insert(&mut self, member: &[u8], score: f64) {
        let at = self.insert_point(member, score);
        self.insert_at(at, member, score);
    }

    /// Gives the entry at offset `start`..`end` (member `member`) the score
    /// `score`, moving it to its new place.
    pub fn rescore(&mut self, start: usize, end: usize, member: &[u8], score: f64) {
        self.remove_span(start, end, 1);
        self.insert(member, score);
    }

    /// Removes the `count` entries lying in `start..end`.
    pub fn remove_span(&mut self, start: usize, end: usize, count: usize) {
        self.splice(start, end - start, 0);
        self.len -= count;
    }

    /// Checks the structure: entries decode to the block's end, are in
    /// strictly increasing order and hold no `-0.0`.
    pub fn check(&self) -> Result<(), String> {
        let mut prev: Option<Entry<'_>> = None;
        let mut count = 0;
        let mut at = 0;
        while at < self.buf.len() {
            let e = self.entry_at(at);
            if e.end > self.buf.len() {
                return Err("packed entry past the block".into());
            }
            if let Some(p) = prev {
                if cmp_key(p.score, p.member, e.score, e.member) != Ordering::Less {
                    return Err("listpack out of order".into());
                }
            }
            if e.score == 0.0 && e.score.is_sign_negative() {
                return Err("listpack holds -0".into());
            }
            if e.end - e.start != entry_len(e.member, e.score) {
                return Err("packed entry not in its shortest form".into());
            }
            count += 1;
            at = e.end;
            prev = Some(e);
        }
        if count != self.len {
            return Err(format!("packed count {} but {count} entries", self.len));
        }
        Ok(())
    }
}

/// Iterator over a rank range of a [`Packed`], yielding `(member, score)`.
#[derive(Debug, Clone)]
pub(super) struct Iter<'a> {
    packed: &'a Packed,
    /// Forward: offset of the next entry.
    pos: usize,
    /// Reverse: offsets of the entries still to yield, last one first.
    back: Vec<usize>,
    remaining: usize,
    reverse: bool,
}

impl<'a> Iter<'a> {
    /// From rank `start` upwards (downwards when `reverse`).
    pub fn new(packed: &'a Packed, start: usize, reverse: bool) -> Iter<'a> {
        let mut it = Iter {
            packed,
            pos: 0,
            back: Vec::new(),
            remaining: 0,
            reverse,
        };
        if start >= packed.len {
            return it;
        }
        if reverse {
            it.back = packed.offsets_through(start);
            it.remaining = start + 1;
        } else {
            it.pos = packed.offset_of(start).expect("start is a rank");
            it.remaining = packed.len - start;
        }
        it
    }
}

impl<'a> Iterator for Iter<'a> {
    type Item = (&'a [u8], f64);

    fn next(&mut self) -> Option<Self::Item> {
        if self.remaining == 0 {
            return None;
        }
        self.remaining -= 1;
        let at = if self.reverse {
            self.back.pop().expect("an offset per remaining entry")
        } else {
            self.pos
        };
        let e = self.packed.entry_at(at);
        self.pos = e.end;
        Some((e.member, e.score))
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        (self.remaining, Some(self.remaining))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pack(entries: &[(&[u8], f64)]) -> Packed {
        Packed::from_sorted(entries.iter().copied())
    }

    fn contents(p: &Packed) -> Vec<(Vec<u8>, f64)> {
        Iter::new(p, 0, false)
            .map(|(m, s)| (m.to_vec(), s))
            .collect()
    }

    #[test]
    fn scores_round_trip_in_their_shortest_form() {
        let cases: &[(f64, usize)] = &[
            (0.0, 1),
            (1.0, 1),
            (-1.0, 1),
            (31.0, 1),
            (-32.0, 1),
            (32.0, 2),
            (1_000_000.0, 4),
            (-1_000_000.0, 4),
            (INT_SCORE_MAX, 8),
            (-INT_SCORE_MAX, 8),
            (INT_SCORE_MAX * 2.0, 9),
            (0.5, 9),
            (-1.25, 9),
            (f64::INFINITY, 9),
            (f64::NEG_INFINITY, 9),
            (f64::MIN_POSITIVE, 9),
            (1e300, 9),
        ];
        for &(score, bytes) in cases {
            assert_eq!(score_len(score), bytes, "{score}");
            let mut buf = vec![0; entry_len(b"m", score)];
            write_entry(&mut buf, b"m", score);
            let (got, end) = read_score(&buf, 0);
            assert_eq!(got.to_bits(), score.to_bits(), "{score}");
            assert_eq!(end, bytes);
            assert_eq!(skip_score(&buf, 0), bytes);
        }
        // -0.0 reads back as 0.0 (the listpack never holds it anyway).
        assert_eq!(read_score(&[0], 0).0.to_bits(), 0.0f64.to_bits());
        let mut rng = crate::rand::Rng::with_seed(9);
        for _ in 0..100_000 {
            let score = match rng.below(3) {
                0 => f64::from_bits(rng.next_u64()),
                1 => (rng.next_u64() as i64 >> rng.below(64)) as f64,
                _ => (rng.next_u64() as i64 >> (10 + rng.below(54))) as f64,
            };
            if score.is_nan() || (score == 0.0 && score.is_sign_negative()) {
                continue;
            }
            let mut buf = vec![0; entry_len(b"", score)];
            write_entry(&mut buf, b"", score);
            assert_eq!(read_score(&buf, 0), (score, buf.len() - 1), "{score}");
            assert_eq!(skip_score(&buf, 0), buf.len() - 1);
        }
    }

    #[test]
    fn member_lengths_cross_the_varint_boundaries() {
        for len in [0, 1, 127, 128, 129, 16_383, 16_384, 70_000] {
            let member = vec![b'x'; len];
            let other = vec![b'y'; 3];
            let p = pack(&[(&member, 1.0), (&other, 1.5)]);
            let header = varint_len(len as u64);
            assert_eq!(p.bytes(), 1 + header + len + 9 + 1 + 3, "{len}");
            assert_eq!(
                header,
                1 + usize::from(len >= 128) + usize::from(len >= 16_384)
            );
            assert_eq!(contents(&p), vec![(member.clone(), 1.0), (other, 1.5)]);
            assert_eq!(p.find_member(&member).unwrap().0, 0);
            assert_eq!(p.get(1).unwrap().member, b"yyy");
            p.check().unwrap();
        }
    }

    #[test]
    fn inserts_updates_and_removes_keep_the_block_exact() {
        let mut p = Packed::default();
        for (m, s) in [("c", 3.0), ("a", 1.0), ("e", 5.0), ("b", 2.0), ("d", 4.0)] {
            p.insert(m.as_bytes(), s);
            p.check().unwrap();
        }
        let names =
            |p: &Packed| -> String { Iter::new(p, 0, false).map(|(m, _)| m[0] as char).collect() };
        assert_eq!(names(&p), "abcde");
        assert_eq!(p.bytes(), 5 * 3);
        // Move "b" to the end and "e" to the start (score changes).
        let (_, b) = p.find_member(b"b").unwrap();
        p.rescore(b.start, b.end, b"b", 9.5);
        let (_, e) = p.find_member(b"e").unwrap();
        p.rescore(e.start, e.end, b"e", -1.0);
        assert_eq!(names(&p), "eacdb");
        assert_eq!(p.bytes(), 4 * 3 + 11);
        p.check().unwrap();
        // Reverse walks.
        let rev: String = Iter::new(&p, 4, true).map(|(m, _)| m[0] as char).collect();
        assert_eq!(rev, "bdcae");
        let rev: String = Iter::new(&p, 2, true).map(|(m, _)| m[0] as char).collect();
        assert_eq!(rev, "cae");
        assert_eq!(Iter::new(&p, 5, true).count(), 0);
        // Deletes at the head, the middle and the tail.
        for (member, left) in [("e", "acdb"), ("c", "adb"), ("b", "ad"), ("a", "d")] {
            let (_, e) = p.find_member(member.as_bytes()).unwrap();
            p.remove_span(e.start, e.end, 1);
            p.check().unwrap();
            assert_eq!(names(&p), left);
        }
        let (_, d) = p.find_member(b"d").unwrap();
        p.remove_span(d.start, d.end, 1);
        assert_eq!(p.len(), 0);
        assert_eq!(p.bytes(), 0);
        p.check().unwrap();
    }

    #[test]
    fn find_gives_the_insertion_point_in_one_walk() {
        let p = pack(&[(b"a", 1.0), (b"b", 2.0), (b"c", 2.0), (b"d", 3.0)]);
        let f = p.find(b"bb", 2.0);
        assert!(f.hit.is_none());
        assert_eq!(f.insert_at, p.offset_of(2).unwrap());
        let f = p.find(b"a", 2.5);
        assert_eq!(f.hit.unwrap().0, 0);
        assert_eq!(f.insert_at, p.offset_of(3).unwrap());
        let f = p.find(b"z", 4.0);
        assert_eq!(f.insert_at, p.bytes());
        assert_eq!(p.offset_of(4), Some(p.bytes()));
        assert_eq!(p.offset_of(5), None);
    }
}
