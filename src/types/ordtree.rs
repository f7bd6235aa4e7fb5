//! [`OrdTree`]: an order-statistic tree of `(score, member)` entries, the
//! ordered half of a large sorted set (Redis's skip list).
//!
//! # Why a counted B+ tree and not a skip list
//!
//! Redis keeps large sorted sets in a skip list whose links carry spans, so
//! that rank queries are O(log N). A skip list in safe Rust needs an arena
//! of nodes linked by indices, and every step of a search is a dependent
//! load from a different part of that arena. A B+ tree answers the same
//! queries (insert, delete, rank, select by rank, first position of a score
//! or lex bound, iteration both ways from any rank) in O(log N), in safe
//! Rust with plain `Vec`s, and with far fewer cache misses: a leaf holds up
//! to 64 entries next to each other, and an internal node keeps, next to
//! each child, the number of entries below it (the "count" that makes rank
//! queries logarithmic) and a separator key. There is one allocation per
//! leaf instead of one per entry, and no random level generator, so the
//! structure is deterministic.
//!
//! # Invariants
//!
//! * Entries are ordered by score, then by member bytes (Redis's order);
//!   scores are never NaN, and `0.0` and `-0.0` compare equal.
//! * Every child of an internal node carries `count`, the number of
//!   entries in its subtree.
//! * Every child except the first of its parent carries a separator `sep`
//!   with `last entry of the previous sibling < sep <= first entry of this
//!   child`. Separators are copies of keys that were once in the tree; they
//!   stay valid when entries are removed, so deletions never update them.
//!   The first child's separator is not used for searching (it may be
//!   stale on the leftmost path of the tree).
//! * Non-root nodes are never empty; the root may be an empty leaf.

use std::cmp::Ordering;

use super::Blob;

/// Most entries a leaf holds.
#[cfg(not(test))]
const LEAF_MAX: usize = 64;
/// Most children an internal node holds.
#[cfg(not(test))]
const INTERNAL_MAX: usize = 64;
/// A node with fewer entries (leaf) or children (internal) than this is
/// merged with or refilled from a sibling after a removal. A quarter of the
/// maximum keeps the height logarithmic while making rebalancing rare.
#[cfg(not(test))]
const MIN_FILL: usize = 16;

// Unit tests use tiny nodes so that small random inputs build deep trees
// and exercise every split, merge and refill path.
#[cfg(test)]
const LEAF_MAX: usize = 6;
#[cfg(test)]
const INTERNAL_MAX: usize = 4;
#[cfg(test)]
const MIN_FILL: usize = 2;

/// Compares two `(score, member)` keys in sorted-set order.
pub fn cmp_key(score_a: f64, member_a: &[u8], score_b: f64, member_b: &[u8]) -> Ordering {
    if score_a < score_b {
        Ordering::Less
    } else if score_a > score_b {
        Ordering::Greater
    } else {
        member_a.cmp(member_b)
    }
}

type Entry = (Blob, f64);

#[derive(Debug, Clone)]
enum Node {
    Leaf(Vec<Entry>),
    Internal(Vec<Child>),
}

#[derive(Debug, Clone)]
struct Child {
    sep_score: f64,
    sep_member: Blob,
    count: usize,
    node: Node,
}

impl Node {
    /// Entries of a leaf or children of an internal node.
    fn fanout(&self) -> usize {
        match self {
            Node::Leaf(entries) => entries.len(),
            Node::Internal(children) => children.len(),
        }
    }

    /// Number of entries in the subtree.
    fn total(&self) -> usize {
        match self {
            Node::Leaf(entries) => entries.len(),
            Node::Internal(children) => children.iter().map(|c| c.count).sum(),
        }
    }

    /// The smallest key the node's separator may take: its first entry or
    /// its first child's separator.
    fn first_key(&self) -> (f64, Blob) {
        match self {
            Node::Leaf(entries) => entries
                .first()
                .map(|(m, s)| (*s, m.clone()))
                .unwrap_or((f64::NEG_INFINITY, Blob::empty())),
            Node::Internal(children) => {
                let first = children.first().expect("internal nodes are never empty");
                (first.sep_score, first.sep_member.clone())
            }
        }
    }

    fn into_child(self) -> Child {
        let (sep_score, sep_member) = self.first_key();
        Child {
            sep_score,
            sep_member,
            count: self.total(),
            node: self,
        }
    }
}

/// Index of the child of `children` whose subtree holds `(score, member)`:
/// the last child (other than the first) whose separator is not above it.
fn child_index(children: &[Child], score: f64, member: &[u8]) -> usize {
    children[1..].partition_point(|c| {
        cmp_key(c.sep_score, &c.sep_member, score, member) != Ordering::Greater
    })
}

/// The capacity, in items of `T`, of the allocator's size class for `n`
/// of them (at least `n`).
fn class_capacity<T>(n: usize) -> usize {
    let size = std::mem::size_of::<T>().max(1);
    crate::types::size_class::jemalloc(n * size) / size
}

/// Makes room in `v` for one more item: a full vector grows by a quarter
/// at least, to the allocator's size class, never past `max` items. Nodes
/// allocated at their full size (65 entries, a 2.5 KiB block) held about
/// 45 entries on average, and a large sorted set's root its 65 children for
/// a few (issue 31's memory figures).
fn grow_for_one<T>(v: &mut Vec<T>, max: usize) {
    if v.len() < v.capacity() {
        return;
    }
    let size = std::mem::size_of::<T>().max(1);
    let bytes = crate::types::size_class::grown(v.len() * size, (v.len() + 1) * size, max * size);
    v.reserve_exact(bytes / size - v.len());
}

/// Shrinks `v` to the size class of its items.
fn fit<T>(v: &mut Vec<T>) {
    let capacity = class_capacity::<T>(v.len());
    if v.capacity() > capacity {
        v.shrink_to(capacity);
    }
}

/// Shrinks `v` to its size class once half of its items' room or more is
/// spare (removals; growth leaves a quarter at most, so a node does not
/// shrink and grow back in turn).
fn shrink_if_sparse<T>(v: &mut Vec<T>) {
    if v.capacity() > class_capacity::<T>(v.len() + v.len() / 2 + 1) {
        fit(v);
    }
}

/// Moves the items of `v` from `at` on into a new vector of their size
/// class, and shrinks `v` to its own.
fn split_vec<T>(v: &mut Vec<T>, at: usize) -> Vec<T> {
    let mut right = Vec::with_capacity(class_capacity::<T>(v.len() - at));
    right.extend(v.drain(at..));
    fit(v);
    right
}

/// Where to split an over-full node of `len` items after an insertion at
/// `pos`: appends at the end (ascending scores such as timestamps, the
/// common case) leave the left node nearly full instead of half empty.
fn split_point(len: usize, pos: usize) -> usize {
    if pos + 1 == len {
        len - MIN_FILL
    } else {
        len / 2
    }
}

/// An order-statistic tree of `(member, score)` entries in sorted-set
/// order. Members must be unique (the sorted set's member→score table
/// guarantees it); the tree does not check.
#[derive(Debug, Clone)]
pub struct OrdTree {
    root: Node,
    len: usize,
}

impl Default for OrdTree {
    fn default() -> Self {
        OrdTree::new()
    }
}

impl OrdTree {
    /// An empty tree.
    pub fn new() -> OrdTree {
        OrdTree {
            root: Node::Leaf(Vec::new()),
            len: 0,
        }
    }

    /// Number of entries.
    pub fn len(&self) -> usize {
        self.len
    }

    /// True when there are no entries.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Removes every entry.
    pub fn clear(&mut self) {
        self.root = Node::Leaf(Vec::new());
        self.len = 0;
    }

    /// Inserts an entry whose member is not in the tree.
    pub fn insert(&mut self, member: Blob, score: f64) {
        debug_assert!(!score.is_nan(), "sorted-set scores are never NaN");
        if let Some(right) = insert_into(&mut self.root, member, score) {
            let left = std::mem::replace(&mut self.root, Node::Leaf(Vec::new()));
            let mut children = Vec::with_capacity(class_capacity::<Child>(2));
            children.push(left.into_child());
            children.push(right);
            self.root = Node::Internal(children);
        }
        self.len += 1;
    }

    /// Removes the entry `(score, member)`, returning its member.
    pub fn remove(&mut self, member: &[u8], score: f64) -> Option<Blob> {
        let removed = remove_from(&mut self.root, member, score)?;
        self.len -= 1;
        // A root with a single child is replaced by that child, so the
        // tree shrinks in height as it empties.
        loop {
            let single = matches!(&self.root, Node::Internal(children) if children.len() == 1);
            if !single {
                break;
            }
            let root = std::mem::replace(&mut self.root, Node::Leaf(Vec::new()));
            if let Node::Internal(mut children) = root {
                self.root = children.pop().expect("checked one child").node;
            }
        }
        Some(removed)
    }

    /// Changes the score of an entry, keeping its member allocation.
    pub fn update_score(&mut self, member: &[u8], old_score: f64, new_score: f64) {
        if update_in_place(&mut self.root, member, old_score, new_score) {
            return;
        }
        let blob = self
            .remove(member, old_score)
            .expect("update_score: the entry is in the tree");
        self.insert(blob, new_score);
    }

    /// The 0-based rank of `(score, member)`, if present.
    pub fn rank(&self, member: &[u8], score: f64) -> Option<usize> {
        let mut node = &self.root;
        let mut rank = 0;
        loop {
            match node {
                Node::Leaf(entries) => {
                    let pos = entries
                        .binary_search_by(|(m, s)| cmp_key(*s, m, score, member))
                        .ok()?;
                    return Some(rank + pos);
                }
                Node::Internal(children) => {
                    let idx = child_index(children, score, member);
                    rank += children[..idx].iter().map(|c| c.count).sum::<usize>();
                    node = &children[idx].node;
                }
            }
        }
    }

    /// The entry at 0-based `rank`.
    pub fn get(&self, rank: usize) -> Option<(&Blob, f64)> {
        if rank >= self.len {
            return None;
        }
        let mut node = &self.root;
        let mut rank = rank;
        loop {
            match node {
                Node::Leaf(entries) => return entries.get(rank).map(|(m, s)| (m, *s)),
                Node::Internal(children) => {
                    let mut idx = 0;
                    while rank >= children[idx].count {
                        rank -= children[idx].count;
                        idx += 1;
                    }
                    node = &children[idx].node;
                }
            }
        }
    }

    /// The number of leading entries for which `pred(score, member)` holds.
    /// `pred` must be monotone over the key order (true, then false), like
    /// "score below the range minimum"; for other predicates the result is
    /// some position, never a panic.
    pub fn count_while(&self, pred: impl Fn(f64, &[u8]) -> bool) -> usize {
        let mut node = &self.root;
        let mut rank = 0;
        loop {
            match node {
                Node::Leaf(entries) => return rank + entries.partition_point(|(m, s)| pred(*s, m)),
                Node::Internal(children) => {
                    let idx = children[1..].partition_point(|c| pred(c.sep_score, &c.sep_member));
                    rank += children[..idx].iter().map(|c| c.count).sum::<usize>();
                    node = &children[idx].node;
                }
            }
        }
    }

    /// Iterates from rank `start` towards the end (or, when `reverse`,
    /// towards the beginning). Yields nothing when `start` is out of range.
    pub fn iter_from(&self, start: usize, reverse: bool) -> Iter<'_> {
        let mut iter = Iter {
            stack: Vec::new(),
            leaf: &[],
            pos: 0,
            remaining: 0,
            reverse,
        };
        if start >= self.len {
            return iter;
        }
        iter.remaining = if reverse { start + 1 } else { self.len - start };
        let mut node = &self.root;
        let mut rank = start;
        loop {
            match node {
                Node::Leaf(entries) => {
                    iter.leaf = entries;
                    iter.pos = rank;
                    return iter;
                }
                Node::Internal(children) => {
                    let mut idx = 0;
                    while rank >= children[idx].count {
                        rank -= children[idx].count;
                        idx += 1;
                    }
                    iter.stack.push((children.as_slice(), idx));
                    node = &children[idx].node;
                }
            }
        }
    }

    /// Iterates over all entries in order.
    pub fn iter(&self) -> Iter<'_> {
        self.iter_from(0, false)
    }

    /// Removes the entries of ranks `start..end`, returning them in order.
    pub fn remove_range(&mut self, start: usize, end: usize) -> Vec<(Blob, f64)> {
        let end = end.min(self.len);
        if start >= end {
            return Vec::new();
        }
        if start == 0 && end == self.len {
            let old = std::mem::take(self);
            return old.into_entries();
        }
        let keys: Vec<(Blob, f64)> = self
            .iter_from(start, false)
            .take(end - start)
            .map(|(m, s)| (m.clone(), s))
            .collect();
        keys.into_iter()
            .map(|(m, s)| {
                let blob = self
                    .remove(&m, s)
                    .expect("remove_range: entry just read from the tree");
                (blob, s)
            })
            .collect()
    }

    /// Consumes the tree, returning its entries in order.
    pub fn into_entries(self) -> Vec<(Blob, f64)> {
        let mut out = Vec::with_capacity(self.len);
        collect_into(self.root, &mut out);
        out
    }

    /// Checks every structural invariant (tests and debug assertions).
    pub fn check_invariants(&self) -> Result<(), String> {
        let total = check_node(&self.root, true)?;
        if total != self.len {
            return Err(format!("len {} but {} entries", self.len, total));
        }
        let mut prev: Option<(f64, &Blob)> = None;
        for (m, s) in self.iter() {
            if let Some((ps, pm)) = prev {
                if cmp_key(ps, pm, s, m) != Ordering::Less {
                    return Err(format!("entries out of order at {m:?}"));
                }
            }
            prev = Some((s, m));
        }
        Ok(())
    }
}

fn collect_into(node: Node, out: &mut Vec<(Blob, f64)>) {
    match node {
        Node::Leaf(entries) => out.extend(entries),
        Node::Internal(children) => {
            for child in children {
                collect_into(child.node, out);
            }
        }
    }
}

/// Returns the number of entries below `node`, or what is wrong.
fn check_node(node: &Node, is_root: bool) -> Result<usize, String> {
    match node {
        Node::Leaf(entries) => {
            if !is_root && entries.is_empty() {
                return Err("empty non-root leaf".into());
            }
            if entries.len() > LEAF_MAX {
                return Err("over-full leaf".into());
            }
            Ok(entries.len())
        }
        Node::Internal(children) => {
            if children.is_empty()
                || children.len() > INTERNAL_MAX
                || (is_root && children.len() < 2)
            {
                return Err(format!("internal node with {} children", children.len()));
            }
            let mut total = 0;
            for (i, child) in children.iter().enumerate() {
                let below = check_node(&child.node, false)?;
                if below != child.count {
                    return Err(format!("count {} but {} entries below", child.count, below));
                }
                total += below;
                if i > 0 {
                    let (first_score, first_member) = first_entry(&child.node);
                    if cmp_key(
                        child.sep_score,
                        &child.sep_member,
                        first_score,
                        first_member,
                    ) == Ordering::Greater
                    {
                        return Err("separator above the child's first entry".into());
                    }
                    let (last_score, last_member) = last_entry(&children[i - 1].node);
                    if cmp_key(last_score, last_member, child.sep_score, &child.sep_member)
                        != Ordering::Less
                    {
                        return Err("separator not above the previous child's last entry".into());
                    }
                }
            }
            Ok(total)
        }
    }
}

fn first_entry(node: &Node) -> (f64, &Blob) {
    match node {
        Node::Leaf(entries) => {
            let (m, s) = entries.first().expect("non-root leaves are not empty");
            (*s, m)
        }
        Node::Internal(children) => first_entry(&children[0].node),
    }
}

fn last_entry(node: &Node) -> (f64, &Blob) {
    match node {
        Node::Leaf(entries) => {
            let (m, s) = entries.last().expect("non-root leaves are not empty");
            (*s, m)
        }
        Node::Internal(children) => last_entry(&children[children.len() - 1].node),
    }
}

/// Inserts into the subtree; returns the new right sibling when the node
/// had to split.
fn insert_into(node: &mut Node, member: Blob, score: f64) -> Option<Child> {
    match node {
        Node::Leaf(entries) => {
            let pos =
                entries.partition_point(|(m, s)| cmp_key(*s, m, score, &member) == Ordering::Less);
            grow_for_one(entries, LEAF_MAX + 1);
            entries.insert(pos, (member, score));
            if entries.len() <= LEAF_MAX {
                return None;
            }
            let at = split_point(entries.len(), pos);
            Some(Node::Leaf(split_vec(entries, at)).into_child())
        }
        Node::Internal(children) => {
            let idx = child_index(children, score, &member);
            children[idx].count += 1;
            let new_right = insert_into(&mut children[idx].node, member, score)?;
            children[idx].count -= new_right.count;
            grow_for_one(children, INTERNAL_MAX + 1);
            children.insert(idx + 1, new_right);
            if children.len() <= INTERNAL_MAX {
                return None;
            }
            let at = split_point(children.len(), idx + 1);
            Some(Node::Internal(split_vec(children, at)).into_child())
        }
    }
}

/// Removes from the subtree, rebalancing children that fell below
/// [`MIN_FILL`].
fn remove_from(node: &mut Node, member: &[u8], score: f64) -> Option<Blob> {
    match node {
        Node::Leaf(entries) => {
            let pos = entries
                .binary_search_by(|(m, s)| cmp_key(*s, m, score, member))
                .ok()?;
            let removed = entries.remove(pos).0;
            shrink_if_sparse(entries);
            Some(removed)
        }
        Node::Internal(children) => {
            let idx = child_index(children, score, member);
            let removed = remove_from(&mut children[idx].node, member, score)?;
            children[idx].count -= 1;
            if children[idx].node.fanout() < MIN_FILL {
                rebalance(children, idx);
                shrink_if_sparse(children);
            }
            Some(removed)
        }
    }
}

/// Changes a score where the entry stays strictly between its neighbours
/// in the same leaf (neither first nor last there, so no separator can be
/// affected). Returns false when the caller must remove and re-insert.
fn update_in_place(node: &mut Node, member: &[u8], old_score: f64, new_score: f64) -> bool {
    match node {
        Node::Leaf(entries) => {
            let Ok(pos) = entries.binary_search_by(|(m, s)| cmp_key(*s, m, old_score, member))
            else {
                return false;
            };
            if pos == 0 || pos + 1 >= entries.len() {
                return false;
            }
            let (pm, ps) = &entries[pos - 1];
            let (nm, ns) = &entries[pos + 1];
            if cmp_key(*ps, pm, new_score, member) == Ordering::Less
                && cmp_key(new_score, member, *ns, nm) == Ordering::Less
            {
                entries[pos].1 = new_score;
                true
            } else {
                false
            }
        }
        Node::Internal(children) => {
            let idx = child_index(children, old_score, member);
            update_in_place(&mut children[idx].node, member, old_score, new_score)
        }
    }
}

/// Refills or merges `children[idx]`, which fell below [`MIN_FILL`], with
/// an adjacent sibling.
fn rebalance(children: &mut Vec<Child>, idx: usize) {
    if children.len() < 2 {
        return;
    }
    let (left, right) = if idx + 1 < children.len() {
        (idx, idx + 1)
    } else {
        (idx - 1, idx)
    };
    let max = match children[left].node {
        Node::Leaf(_) => LEAF_MAX,
        Node::Internal(_) => INTERNAL_MAX,
    };
    let total = children[left].node.fanout() + children[right].node.fanout();
    if total <= max {
        let removed = children.remove(right);
        let target = &mut children[left];
        target.count += removed.count;
        match (&mut target.node, removed.node) {
            (Node::Leaf(a), Node::Leaf(b)) => {
                a.extend(b);
                fit(a);
            }
            (Node::Internal(a), Node::Internal(b)) => {
                a.extend(b);
                fit(a);
            }
            _ => unreachable!("siblings are at the same height"),
        }
        return;
    }
    // Even out the two siblings; the right one's separator becomes its new
    // first key, which is above everything now in the left one.
    let want_left = total / 2;
    let (head, tail) = children.split_at_mut(right);
    let l = &mut head[left];
    let r = &mut tail[0];
    let moved: usize = match (&mut l.node, &mut r.node) {
        (Node::Leaf(a), Node::Leaf(b)) => {
            if a.len() < want_left {
                let n = want_left - a.len();
                a.extend(b.drain(..n));
            } else {
                let n = a.len() - want_left;
                let tail: Vec<Entry> = a.drain(a.len() - n..).collect();
                b.splice(0..0, tail);
            }
            shrink_if_sparse(a);
            shrink_if_sparse(b);
            a.len()
        }
        (Node::Internal(a), Node::Internal(b)) => {
            if a.len() < want_left {
                let n = want_left - a.len();
                a.extend(b.drain(..n));
            } else {
                let n = a.len() - want_left;
                let tail: Vec<Child> = a.drain(a.len() - n..).collect();
                b.splice(0..0, tail);
            }
            shrink_if_sparse(a);
            shrink_if_sparse(b);
            a.iter().map(|c| c.count).sum()
        }
        _ => unreachable!("siblings are at the same height"),
    };
    let sum = l.count + r.count;
    l.count = moved;
    r.count = sum - moved;
    let (sep_score, sep_member) = r.node.first_key();
    r.sep_score = sep_score;
    r.sep_member = sep_member;
}

/// Iterator over a range of an [`OrdTree`], forwards or backwards.
pub struct Iter<'a> {
    stack: Vec<(&'a [Child], usize)>,
    leaf: &'a [Entry],
    pos: usize,
    remaining: usize,
    reverse: bool,
}

impl<'a> Iter<'a> {
    /// Moves to the first entry of the next leaf (or the last entry of the
    /// previous leaf when reversed).
    fn step_leaf(&mut self) {
        while let Some((children, idx)) = self.stack.pop() {
            let next = if self.reverse {
                idx.checked_sub(1)
            } else if idx + 1 < children.len() {
                Some(idx + 1)
            } else {
                None
            };
            let Some(next) = next else { continue };
            self.stack.push((children, next));
            let mut node = &children[next].node;
            loop {
                match node {
                    Node::Leaf(entries) => {
                        self.leaf = entries;
                        self.pos = if self.reverse { entries.len() - 1 } else { 0 };
                        return;
                    }
                    Node::Internal(kids) => {
                        let i = if self.reverse { kids.len() - 1 } else { 0 };
                        self.stack.push((kids.as_slice(), i));
                        node = &kids[i].node;
                    }
                }
            }
        }
    }
}

impl<'a> Iterator for Iter<'a> {
    type Item = (&'a Blob, f64);

    fn next(&mut self) -> Option<Self::Item> {
        if self.remaining == 0 {
            return None;
        }
        if self.pos >= self.leaf.len() {
            self.step_leaf();
        }
        let (member, score) = &self.leaf[self.pos];
        self.remaining -= 1;
        if self.reverse {
            if self.pos == 0 {
                // Past the start of this leaf: park beyond its end so the
                // next call steps to the previous leaf.
                self.pos = usize::MAX;
            } else {
                self.pos -= 1;
            }
        } else {
            self.pos += 1;
        }
        Some((member, *score))
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        (self.remaining, Some(self.remaining))
    }
}

impl ExactSizeIterator for Iter<'_> {}

#[cfg(test)]
mod tests {
    use super::*;
    use quickcheck::{quickcheck, TestResult};
    use std::collections::BTreeSet;

    /// Model key: scores are small integers here, so `i64` orders them
    /// exactly like the tree's `f64`.
    type ModelKey = (i64, Vec<u8>);

    fn member(n: u16) -> Vec<u8> {
        format!("m{n}").into_bytes()
    }

    fn check_against(tree: &OrdTree, model: &BTreeSet<ModelKey>) {
        tree.check_invariants().expect("tree invariants");
        assert_eq!(tree.len(), model.len());
        let entries: Vec<ModelKey> = tree.iter().map(|(m, s)| (s as i64, m.to_vec())).collect();
        let expected: Vec<ModelKey> = model.iter().cloned().collect();
        assert_eq!(entries, expected);
    }

    #[derive(Debug, Clone)]
    enum Op {
        Insert(u16, i8),
        Remove(u16),
        Update(u16, i8),
    }

    impl quickcheck::Arbitrary for Op {
        fn arbitrary(g: &mut quickcheck::Gen) -> Op {
            let m = u16::arbitrary(g) % 600;
            match u8::arbitrary(g) % 4 {
                0 | 1 => Op::Insert(m, i8::arbitrary(g) % 20),
                2 => Op::Remove(m),
                _ => Op::Update(m, i8::arbitrary(g) % 20),
            }
        }
    }

    /// A longer sequence than quickcheck's default size gives.
    #[derive(Debug, Clone)]
    struct Ops(Vec<Op>);

    impl quickcheck::Arbitrary for Ops {
        fn arbitrary(g: &mut quickcheck::Gen) -> Ops {
            let len = usize::arbitrary(g) % 1500;
            Ops((0..len).map(|_| Op::arbitrary(g)).collect())
        }

        fn shrink(&self) -> Box<dyn Iterator<Item = Ops>> {
            Box::new(self.0.shrink().map(Ops))
        }
    }

    fn run_ops(ops: &[Op]) -> (OrdTree, BTreeSet<ModelKey>) {
        let mut tree = OrdTree::new();
        let mut model: BTreeSet<ModelKey> = BTreeSet::new();
        let mut scores = std::collections::HashMap::new();
        for op in ops {
            match *op {
                Op::Insert(m, s) => {
                    if let std::collections::hash_map::Entry::Vacant(e) = scores.entry(m) {
                        e.insert(i64::from(s));
                        tree.insert(Blob::new(&member(m)), f64::from(s));
                        model.insert((i64::from(s), member(m)));
                    }
                }
                Op::Remove(m) => {
                    if let Some(s) = scores.remove(&m) {
                        let got = tree.remove(&member(m), s as f64).expect("present");
                        assert_eq!(got.as_bytes(), &member(m)[..]);
                        model.remove(&(s, member(m)));
                    } else {
                        assert!(tree.remove(&member(m), 0.0).is_none());
                    }
                }
                Op::Update(m, s) => {
                    if let Some(old) = scores.insert(m, i64::from(s)) {
                        tree.update_score(&member(m), old as f64, f64::from(s));
                        model.remove(&(old, member(m)));
                        model.insert((i64::from(s), member(m)));
                    } else {
                        scores.remove(&m);
                    }
                }
            }
        }
        (tree, model)
    }

    quickcheck! {
        fn random_operations_match_a_btreeset(ops: Ops) -> TestResult {
            let (tree, model) = run_ops(&ops.0);
            check_against(&tree, &model);
            let sorted: Vec<&ModelKey> = model.iter().collect();
            for (rank, (s, m)) in sorted.iter().enumerate() {
                assert_eq!(tree.rank(m, *s as f64), Some(rank));
                let (gm, gs) = tree.get(rank).expect("rank in range");
                assert_eq!((gs as i64, gm.to_vec()), ((*s), m.clone()));
            }
            for bound in -21i64..21 {
                let below = tree.count_while(|s, _| (s as i64) < bound);
                assert_eq!(below, sorted.iter().filter(|(s, _)| *s < bound).count());
            }
            TestResult::passed()
        }

        fn iteration_from_any_rank_both_ways(ops: Ops, start: usize) -> TestResult {
            let (tree, model) = run_ops(&ops.0);
            let sorted: Vec<ModelKey> = model.into_iter().collect();
            if sorted.is_empty() {
                return TestResult::discard();
            }
            let start = start % sorted.len();
            let fwd: Vec<ModelKey> = tree.iter_from(start, false).map(|(m, s)| (s as i64, m.to_vec())).collect();
            assert_eq!(fwd, sorted[start..].to_vec());
            let back: Vec<ModelKey> = tree.iter_from(start, true).map(|(m, s)| (s as i64, m.to_vec())).collect();
            let mut expected = sorted[..=start].to_vec();
            expected.reverse();
            assert_eq!(back, expected);
            TestResult::passed()
        }
    }

    #[test]
    fn large_tree_ranks_ranges_and_removal() {
        let mut tree = OrdTree::new();
        let mut model = BTreeSet::new();
        // Pseudo-random insertion order with many equal scores.
        for i in 0..20_000u32 {
            // Multiplying by a number coprime with 20 000 permutes 0..20 000.
            let k = ((u64::from(i) * 2_654_435_761) % 20_000) as u16;
            let score = i64::from(k % 97);
            tree.insert(Blob::new(&member(k)), score as f64);
            model.insert((score, member(k)));
        }
        check_against(&tree, &model);
        let removed = tree.remove_range(100, 5_100);
        assert_eq!(removed.len(), 5_000);
        let sorted: Vec<ModelKey> = model.iter().cloned().collect();
        for (i, (m, s)) in removed.iter().enumerate() {
            assert_eq!((*s as i64, m.to_vec()), sorted[100 + i]);
            model.remove(&(*s as i64, m.to_vec()));
        }
        check_against(&tree, &model);
        // Ascending appends (timestamps) then removal from the front
        // (sliding windows).
        let mut t = OrdTree::new();
        for i in 0..10_000u32 {
            t.insert(Blob::new(&i.to_be_bytes()), f64::from(i));
        }
        t.check_invariants().expect("invariants after appends");
        for i in 0..9_990u32 {
            assert!(t.remove(&i.to_be_bytes(), f64::from(i)).is_some());
        }
        t.check_invariants()
            .expect("invariants after front removals");
        assert_eq!(t.len(), 10);
        assert_eq!(t.remove_range(0, 10).len(), 10);
        assert!(t.is_empty());
    }

    /// Every node's capacity is within `1/spare` of its items (and one
    /// more), rounded to their size class.
    fn check_capacities(node: &Node, spare: usize) {
        let check = |v_len: usize, v_cap: usize, limit: usize| {
            assert!(v_cap <= limit, "{v_len} items in a capacity of {v_cap}");
        };
        fn limit<T>(v: &[T], spare: usize) -> usize {
            class_capacity::<T>(v.len() + v.len() / spare + 1)
        }
        match node {
            Node::Leaf(entries) => check(entries.len(), entries.capacity(), limit(entries, spare)),
            Node::Internal(children) => {
                check(children.len(), children.capacity(), limit(children, spare));
                children
                    .iter()
                    .for_each(|c| check_capacities(&c.node, spare));
            }
        }
    }

    #[test]
    fn nodes_hold_little_spare_room() {
        let mut t = OrdTree::new();
        let mut x = 7u64;
        for i in 0..3_000u64 {
            x = x.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1);
            t.insert(Blob::new(&i.to_be_bytes()), (x >> 40) as f64);
            check_capacities(&t.root, 4);
        }
        let mut a = OrdTree::new();
        for i in 0..3_000u32 {
            a.insert(Blob::new(&i.to_be_bytes()), f64::from(i));
        }
        check_capacities(&a.root, 4);
        for i in (0..3_000u32).step_by(3) {
            a.remove(&i.to_be_bytes(), f64::from(i));
            check_capacities(&a.root, 2);
        }
    }

    #[test]
    fn zero_and_negative_zero_are_one_score() {
        let mut t = OrdTree::new();
        t.insert(Blob::from("b"), 0.0);
        t.insert(Blob::from("a"), -0.0);
        let order: Vec<Vec<u8>> = t.iter().map(|(m, _)| m.to_vec()).collect();
        assert_eq!(order, vec![b"a".to_vec(), b"b".to_vec()]);
        assert_eq!(t.rank(b"b", -0.0), Some(1));
    }
}
