//! A small set of strings in one exactly sized heap block.
//!
//! Redis 7.2 keeps such a set in a listpack (`set-max-listpack-entries`
//! 128, `set-max-listpack-value` 64); Redis 7.0, whose behaviour hozon
//! follows, has no such encoding and reports `hashtable` for every set that
//! is not an intset, so [`super::Set`] reports that too. The block is
//! re-allocated on each change, as a listpack is: the member count (one
//! byte), then each member as its length (one byte) and its bytes, in
//! insertion order. An empty one allocates nothing. Lookups walk it.

use std::fmt;

/// Most members a [`Packed`] holds (its count is one byte).
pub const MAX_ENTRIES: usize = 128;

/// Longest member a [`Packed`] holds (its length is one byte).
pub const MAX_MEMBER: usize = 64;

/// A small set's members in insertion order: empty, or the count (one
/// byte) followed by each member's length (one byte) and bytes.
#[derive(Clone, Default, PartialEq, Eq)]
pub struct Packed {
    buf: Box<[u8]>,
}

impl Packed {
    /// True when `member` may be held in a packed set.
    pub fn fits(member: &[u8]) -> bool {
        member.len() <= MAX_MEMBER
    }

    /// Packs `members` in order. The caller has checked that they are
    /// distinct, at most [`MAX_ENTRIES`] and each [`Packed::fits`].
    pub fn from_members<'a>(members: impl IntoIterator<Item = &'a [u8]>) -> Packed {
        let mut out = vec![0u8];
        let mut count = 0usize;
        for m in members {
            debug_assert!(Packed::fits(m), "a packed member of {} bytes", m.len());
            out.push(m.len() as u8);
            out.extend_from_slice(m);
            count += 1;
        }
        assert!(count <= MAX_ENTRIES, "{count} members for a packed set");
        if count == 0 {
            return Packed::default();
        }
        out[0] = count as u8;
        Packed {
            buf: out.into_boxed_slice(),
        }
    }

    /// Number of members.
    pub fn len(&self) -> usize {
        self.buf.first().map_or(0, |&n| n as usize)
    }

    /// True when there are no members.
    pub fn is_empty(&self) -> bool {
        self.buf.is_empty()
    }

    /// Bytes of the heap block.
    pub fn allocated(&self) -> usize {
        self.buf.len()
    }

    /// The members, in insertion order.
    pub fn iter(&self) -> Iter<'_> {
        Iter {
            rest: self.buf.get(1..).unwrap_or_default(),
            left: self.len(),
        }
    }

    /// True when `member` is present.
    pub fn contains(&self, member: &[u8]) -> bool {
        self.find(member).is_some()
    }

    /// The member at `index` in insertion order (`index < len`).
    pub fn nth(&self, index: usize) -> &[u8] {
        self.iter()
            .nth(index)
            .expect("index within the packed set's members")
    }

    /// Appends `member`. The caller has checked that it is absent, that it
    /// [`Packed::fits`] and that the set holds fewer than [`MAX_ENTRIES`].
    pub fn push(&mut self, member: &[u8]) {
        assert!(Packed::fits(member) && self.len() < MAX_ENTRIES);
        let mut v = std::mem::take(&mut self.buf).into_vec();
        if v.is_empty() {
            v.push(0);
        }
        v.reserve_exact(1 + member.len());
        v.push(member.len() as u8);
        v.extend_from_slice(member);
        v[0] += 1;
        self.buf = v.into_boxed_slice();
    }

    /// Removes `member`, closing the gap; true when it was present.
    pub fn remove(&mut self, member: &[u8]) -> bool {
        let Some(at) = self.find(member) else {
            return false;
        };
        if self.len() == 1 {
            self.buf = Box::default();
            return true;
        }
        let mut v = std::mem::take(&mut self.buf).into_vec();
        v.drain(at..at + 1 + member.len());
        v[0] -= 1;
        self.buf = v.into_boxed_slice();
        true
    }

    /// Offset of `member`'s length byte.
    fn find(&self, member: &[u8]) -> Option<usize> {
        let buf = &self.buf[..];
        let mut pos = 1;
        while pos < buf.len() {
            let len = buf[pos] as usize;
            let start = pos + 1;
            if len == member.len() && &buf[start..start + len] == member {
                return Some(pos);
            }
            pos = start + len;
        }
        None
    }
}

impl fmt::Debug for Packed {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_set()
            .entries(self.iter().map(String::from_utf8_lossy))
            .finish()
    }
}

/// Iterator over a [`Packed`] set's members, in insertion order.
#[derive(Clone)]
pub struct Iter<'a> {
    rest: &'a [u8],
    left: usize,
}

impl<'a> Iterator for Iter<'a> {
    type Item = &'a [u8];

    fn next(&mut self) -> Option<&'a [u8]> {
        let (&len, rest) = self.rest.split_first()?;
        let (member, rest) = rest.split_at(len as usize);
        self.rest = rest;
        self.left -= 1;
        Some(member)
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        (self.left, Some(self.left))
    }
}

impl ExactSizeIterator for Iter<'_> {}

#[cfg(test)]
mod tests {
    use super::*;
    use quickcheck::{Arbitrary, Gen, QuickCheck};

    #[test]
    fn members_keep_insertion_order_across_removals() {
        let mut p = Packed::from_members([&b"a"[..], b"bb", b"ccc"]);
        p.push(b"");
        assert_eq!(p.len(), 4);
        assert_eq!(p.allocated(), 1 + 2 + 3 + 4 + 1);
        assert!(p.remove(b"bb") && !p.remove(b"bb"));
        let members: Vec<&[u8]> = p.iter().collect();
        assert_eq!(members, [&b"a"[..], b"ccc", b""]);
        assert_eq!(p.nth(1), b"ccc");
        assert!(p.contains(b"") && !p.contains(b"c"));
        for m in members.clone() {
            let m = m.to_vec();
            assert!(p.clone().remove(&m));
        }
        let mut q = p.clone();
        for m in [&b"a"[..], b"ccc", b""] {
            assert!(q.remove(m));
        }
        assert!(q.is_empty() && q.allocated() == 0 && q == Packed::default());
    }

    #[test]
    fn holds_the_longest_member_and_the_most_members() {
        let long = vec![b'x'; MAX_MEMBER];
        assert!(Packed::fits(&long) && !Packed::fits(&[0; MAX_MEMBER + 1]));
        let mut p = Packed::default();
        p.push(&long);
        for i in 1..MAX_ENTRIES {
            p.push(format!("{i}").as_bytes());
        }
        assert_eq!(p.len(), MAX_ENTRIES);
        assert!(p.contains(&long) && p.contains(b"127"));
        assert_eq!(p.iter().len(), MAX_ENTRIES);
    }

    #[derive(Clone, Debug)]
    enum Op {
        Add(u8),
        Remove(u8),
    }

    impl Arbitrary for Op {
        fn arbitrary(g: &mut Gen) -> Op {
            let m = u8::arbitrary(g) % 40;
            if bool::arbitrary(g) {
                Op::Add(m)
            } else {
                Op::Remove(m)
            }
        }
    }

    /// Members of varied lengths, up to the longest.
    fn member(i: u8) -> Vec<u8> {
        vec![b'a' + i % 26; (i as usize * 7) % (MAX_MEMBER + 1)]
    }

    fn matches_model(ops: Vec<Op>) -> bool {
        let mut p = Packed::default();
        let mut model: Vec<Vec<u8>> = Vec::new();
        for op in ops {
            match op {
                Op::Add(i) => {
                    let m = member(i);
                    if !model.contains(&m) {
                        model.push(m.clone());
                        p.push(&m);
                    }
                }
                Op::Remove(i) => {
                    let m = member(i);
                    let was = model.iter().position(|x| *x == m);
                    if let Some(at) = was {
                        model.remove(at);
                    }
                    if p.remove(&m) != was.is_some() {
                        return false;
                    }
                }
            }
            let size: usize = model.iter().map(|m| 1 + m.len()).sum::<usize>();
            let expected = if model.is_empty() { 0 } else { 1 + size };
            if p.len() != model.len() || p.allocated() != expected {
                return false;
            }
        }
        p.iter().eq(model.iter().map(|m| &m[..]))
            && model.iter().all(|m| p.contains(m))
            && p == Packed::from_members(model.iter().map(|m| &m[..]))
    }

    #[test]
    fn packed_matches_a_vector_of_members() {
        QuickCheck::new()
            .tests(500)
            .quickcheck(matches_model as fn(Vec<Op>) -> bool);
    }
}
