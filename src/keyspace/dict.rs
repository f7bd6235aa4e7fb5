//! [`Dict`]: a chained hash table with Redis's SCAN cursor guarantees and
//! incremental rehashing.
//!
//! Why not `std::collections::HashMap`: SCAN/HSCAN/SSCAN/ZSCAN promise that
//! every element present for the whole iteration is returned at least once,
//! even when the table grows or shrinks between calls. Redis gets this from
//! a power-of-two bucket array walked in reverse-binary cursor order; an
//! open-addressing table moves elements on resize and cannot give it. This
//! table keeps Redis's layout (buckets of singly linked nodes), so the same
//! cursor algorithm applies.
//!
//! Why incremental: moving a table of millions of keys to a bigger one in
//! one go stalls every client for tens of milliseconds. Like Redis, a resize
//! allocates the new table and then moves one bucket per write operation
//! (and more from [`Dict::rehash_for`] in the background), so no single
//! command pays for the whole move. While that runs, lookups check both
//! tables and new keys go to the new one.

use std::borrow::Borrow;
use std::hash::{BuildHasher, Hash};

use crate::rand::Rng;

type Link<K, V> = Option<Box<Node<K, V>>>;

struct Node<K, V> {
    key: K,
    value: V,
    next: Link<K, V>,
}

/// A hash table from `K` to `V` with SCAN cursors and random sampling.
pub struct Dict<K, V> {
    /// `tables[0]` is the table in use; while rehashing, its buckets below
    /// `rehash_index` have been moved to `tables[1]`.
    tables: [Vec<Link<K, V>>; 2],
    rehash_index: Option<usize>,
    /// Upper bounds on the chain lengths of `tables[0]` and `tables[1]`:
    /// no bucket of table `t` holds more than `chain_bound[t]` nodes. An
    /// insert counts the chain it adds to; a removal leaves the bound as
    /// it is (a loose bound only costs [`Dict::random`] more tries); a
    /// table starts at 0.
    chain_bound: [usize; 2],
    len: usize,
    /// While true, no resize starts and no bucket moves (a point-in-time
    /// capture walks the buckets by position; see `keyspace::capture`).
    resize_paused: bool,
    hasher: foldhash::quality::RandomState,
}

const MIN_BUCKETS: usize = 4;
/// Empty buckets one rehash step may skip before giving up (Redis: 10×).
const EMPTY_VISITS_PER_STEP: usize = 10;

impl<K: Hash + Eq, V> Default for Dict<K, V> {
    fn default() -> Self {
        Dict::new()
    }
}

/// A prefetch hint for the cache line at `p` (x86-64; elsewhere nothing).
#[inline(always)]
pub(crate) fn prefetch(p: *const u8) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: PREFETCHT0 is a hint: it never faults, whatever the address,
    // and reads nothing the program can observe.
    unsafe {
        std::arch::x86_64::_mm_prefetch::<{ std::arch::x86_64::_MM_HINT_T0 }>(p as *const i8);
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = p;
}

fn find<'a, K: Borrow<Q>, Q: Eq + ?Sized, V>(
    mut link: &'a Link<K, V>,
    key: &Q,
) -> Option<&'a Node<K, V>> {
    while let Some(node) = link {
        if node.key.borrow() == key {
            return Some(node);
        }
        link = &node.next;
    }
    None
}

fn find_entry_mut<'a, K: Borrow<Q>, Q: Eq + ?Sized, V>(
    mut link: &'a mut Link<K, V>,
    key: &Q,
) -> Option<(&'a mut K, &'a mut V)> {
    while let Some(node) = link {
        if node.key.borrow() == key {
            let Node { key, value, .. } = &mut **node;
            return Some((key, value));
        }
        link = &mut node.next;
    }
    None
}

fn unlink<K: Borrow<Q>, Q: Eq + ?Sized, V>(mut link: &mut Link<K, V>, key: &Q) -> Option<(K, V)> {
    loop {
        match link {
            None => return None,
            Some(node) if node.key.borrow() == key => {
                let mut node = link.take().expect("matched Some");
                *link = node.next.take();
                return Some((node.key, node.value));
            }
            Some(node) => link = &mut node.next,
        }
    }
}

/// Unlinks every node of `bucket` one at a time (a long chain dropped
/// recursively could overflow the stack).
fn drop_chain<K, V>(bucket: &mut Link<K, V>) {
    let mut link = bucket.take();
    while let Some(mut node) = link {
        link = node.next.take();
    }
}

/// Redis's reverse-binary cursor increment over the bits of `mask`.
fn next_cursor(cursor: u64, mask: u64) -> u64 {
    (cursor | !mask)
        .reverse_bits()
        .wrapping_add(1)
        .reverse_bits()
}

impl<K: Hash + Eq, V> Dict<K, V> {
    /// An empty table (allocates nothing until the first insert).
    pub fn new() -> Self {
        Dict {
            tables: [Vec::new(), Vec::new()],
            rehash_index: None,
            chain_bound: [0, 0],
            len: 0,
            resize_paused: false,
            hasher: foldhash::quality::RandomState::default(),
        }
    }

    /// An empty table with room for `capacity` elements before resizing.
    pub fn with_capacity(capacity: usize) -> Self {
        let mut d = Dict::new();
        if capacity > 0 {
            d.tables[0] = empty_buckets(capacity.next_power_of_two().max(MIN_BUCKETS));
        }
        d
    }

    /// Number of elements.
    pub fn len(&self) -> usize {
        self.len
    }

    /// True when there are no elements.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Number of buckets (both tables while rehashing).
    pub fn bucket_count(&self) -> usize {
        self.tables[0].len() + self.tables[1].len()
    }

    /// True while a resize is moving buckets to the new table.
    pub fn is_rehashing(&self) -> bool {
        self.rehash_index.is_some()
    }

    fn hash<Q: Hash + ?Sized>(&self, key: &Q) -> u64 {
        self.hasher.hash_one(key)
    }

    /// The bucket index of hash `h` in table `t` (which must be non-empty).
    fn index(&self, t: usize, h: u64) -> usize {
        (h as usize) & (self.tables[t].len() - 1)
    }

    /// Keeps `chain_bound[t]` an upper bound after one node was pushed
    /// onto bucket `b` of table `t`. The chain had at most the bound
    /// before, so it exceeds it only when the walk gets one node past the
    /// bound; the walk stops there.
    fn note_push(&mut self, t: usize, b: usize) {
        let bound = self.chain_bound[t];
        let mut link = &self.tables[t][b];
        let mut n = 0;
        while let Some(node) = link {
            n += 1;
            if n > bound {
                self.chain_bound[t] = n;
                return;
            }
            link = &node.next;
        }
    }

    /// Asks the CPU to start fetching the bucket `key` hashes to, for a
    /// caller about to insert or look up many keys (a bulk load): issued a
    /// few keys ahead, it overlaps that cache miss with the work between.
    /// Only a hint; does nothing while a resize runs or the table is empty.
    pub fn prefetch_bucket<Q>(&self, key: &Q)
    where
        K: Borrow<Q>,
        Q: Hash + ?Sized,
    {
        self.prefetch_hashed(self.hash(key), false);
    }

    /// Like [`Dict::prefetch_bucket`], one step further: the first node of
    /// `key`'s bucket (whose slot should have been prefetched a few keys
    /// earlier, or this read waits for it).
    pub fn prefetch_chain<Q>(&self, key: &Q)
    where
        K: Borrow<Q>,
        Q: Hash + ?Sized,
    {
        self.prefetch_hashed(self.hash(key), true);
    }

    /// The hash this table files `key` under, for
    /// [`Dict::prefetch_hashed`] (one hash for both prefetch steps).
    pub fn hash_of<Q>(&self, key: &Q) -> u64
    where
        K: Borrow<Q>,
        Q: Hash + ?Sized,
    {
        self.hash(key)
    }

    /// The slot of the bucket a key whose [`Dict::hash_of`] is `hash`
    /// files under, while no resize runs (the look-ahead's steps read
    /// nothing during one).
    fn prefetch_slot(&self, hash: u64) -> Option<&Link<K, V>> {
        if self.rehash_index.is_some() || self.tables[0].is_empty() {
            return None;
        }
        Some(&self.tables[0][self.index(0, hash)])
    }

    /// [`Dict::prefetch_bucket`] (`chain` false) or
    /// [`Dict::prefetch_chain`] (`chain` true) for a key whose
    /// [`Dict::hash_of`] is `hash`.
    pub fn prefetch_hashed(&self, hash: u64, chain: bool) {
        let Some(slot) = self.prefetch_slot(hash) else {
            return;
        };
        if !chain {
            prefetch(slot as *const Link<K, V> as *const u8);
        } else if let Some(node) = slot {
            prefetch(&**node as *const Node<K, V> as *const u8);
        }
    }

    /// The first entry of the bucket a key whose [`Dict::hash_of`] is
    /// `hash` files under (usually that key's), while no resize runs: the
    /// third prefetch step reads it to hint at the entry's heap blocks.
    pub(crate) fn first_entry_hashed(&self, hash: u64) -> Option<(&K, &V)> {
        let node = self.prefetch_slot(hash)?.as_deref()?;
        Some((&node.key, &node.value))
    }

    /// The second entry of the bucket a key whose [`Dict::hash_of`] is
    /// `hash` files under, while no resize runs (the look-ahead's fourth
    /// step: a key filed behind another in its bucket).
    pub(crate) fn second_entry_hashed(&self, hash: u64) -> Option<(&K, &V)> {
        let node = self.prefetch_slot(hash)?.as_deref()?.next.as_deref()?;
        Some((&node.key, &node.value))
    }

    /// Prefetches the second node of the bucket a key whose
    /// [`Dict::hash_of`] is `hash` files under (its first node read).
    pub(crate) fn prefetch_second_hashed(&self, hash: u64) {
        let second = self
            .prefetch_slot(hash)
            .and_then(|slot| slot.as_deref()?.next.as_deref());
        if let Some(node) = second {
            prefetch(node as *const Node<K, V> as *const u8);
        }
    }

    /// The value stored under `key`.
    pub fn get<Q>(&self, key: &Q) -> Option<&V>
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ?Sized,
    {
        self.get_key_value(key).map(|(_, v)| v)
    }

    /// The stored key and value for `key`.
    pub fn get_key_value<Q>(&self, key: &Q) -> Option<(&K, &V)>
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ?Sized,
    {
        if self.len == 0 {
            return None;
        }
        let h = self.hash(key);
        for t in 0..2 {
            if self.tables[t].is_empty() {
                continue;
            }
            if let Some(node) = find(&self.tables[t][self.index(t, h)], key) {
                return Some((&node.key, &node.value));
            }
            if self.rehash_index.is_none() {
                break;
            }
        }
        None
    }

    /// A mutable reference to the value stored under `key`.
    #[inline]
    pub fn get_mut<Q>(&mut self, key: &Q) -> Option<&mut V>
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ?Sized,
    {
        self.get_entry_mut(key).map(|(_, v)| v)
    }

    /// The stored key and its value, both mutable. The caller must leave
    /// the key's hash and equality as they are (a key's access metadata,
    /// which neither sees, is what this is for). Like every mutable
    /// lookup, it moves one bucket of a resize in progress (Redis's
    /// `dictFind` rehash step), so a table that is looked up and updated
    /// but no longer grows still finishes its resize: until then every
    /// lookup probes both tables and prefetch hints are off.
    pub(crate) fn get_entry_mut<Q>(&mut self, key: &Q) -> Option<(&mut K, &mut V)>
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ?Sized,
    {
        if self.len == 0 {
            return None;
        }
        if self.rehash_index.is_some() {
            self.rehash_step();
        }
        let h = self.hash(key);
        let i0 = (!self.tables[0].is_empty()).then(|| self.index(0, h));
        let i1 =
            (self.rehash_index.is_some() && !self.tables[1].is_empty()).then(|| self.index(1, h));
        let [t0, t1] = &mut self.tables;
        if let Some(i) = i0 {
            if let Some(e) = find_entry_mut(&mut t0[i], key) {
                return Some(e);
            }
        }
        i1.and_then(|i| find_entry_mut(&mut t1[i], key))
    }

    /// True when `key` is present.
    pub fn contains_key<Q>(&self, key: &Q) -> bool
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ?Sized,
    {
        self.get_key_value(key).is_some()
    }

    /// Inserts or replaces; returns the previous value. An existing key
    /// object is kept (like Redis's `dictReplace`).
    pub fn insert(&mut self, key: K, value: V) -> Option<V> {
        if let Some(slot) = self.get_mut(&key) {
            return Some(std::mem::replace(slot, value));
        }
        self.insert_new(key, value);
        None
    }

    /// Inserts a key known to be absent (the caller checked), returning a
    /// reference to the stored value.
    pub fn insert_new(&mut self, key: K, value: V) -> &mut V {
        debug_assert!(!self.contains_key(&key), "insert_new on a present key");
        if self.rehash_index.is_some() {
            self.rehash_step();
        } else if self.len >= self.tables[0].len() && !self.resize_paused {
            // A paused table is never empty (`set_resize_paused`), so a
            // key always has a bucket to go to. Normally this doubles; a
            // table overfilled while paused grows to fit in one resize
            // (as Redis's `_dictExpand(d, used + 1)`).
            let target = (self.len + 1)
                .next_power_of_two()
                .max(self.tables[0].len() * 2)
                .max(MIN_BUCKETS);
            self.start_resize(target);
        }
        // New keys go to the table being filled.
        let t = if self.rehash_index.is_some() { 1 } else { 0 };
        let b = self.index(t, self.hash(&key));
        let next = self.tables[t][b].take();
        self.tables[t][b] = Some(Box::new(Node { key, value, next }));
        self.len += 1;
        self.note_push(t, b);
        &mut self.tables[t][b].as_mut().expect("just inserted").value
    }

    /// Inserts `key` unless it is present, probing the table once: the
    /// loader's path, where a duplicate key is an error to report rather
    /// than a value to replace. Gives the pair back when `key` exists.
    pub fn try_insert(&mut self, key: K, value: V) -> Result<&mut V, (K, V)> {
        if self.rehash_index.is_some() || self.len >= self.tables[0].len() {
            // Growing or rehashing: the general path handles both tables.
            if self.contains_key(&key) {
                return Err((key, value));
            }
            return Ok(self.insert_new(key, value));
        }
        let b = self.index(0, self.hash(&key));
        if find(&self.tables[0][b], &key).is_some() {
            return Err((key, value));
        }
        let next = self.tables[0][b].take();
        self.tables[0][b] = Some(Box::new(Node { key, value, next }));
        self.len += 1;
        self.note_push(0, b);
        Ok(&mut self.tables[0][b].as_mut().expect("just inserted").value)
    }

    /// Makes room for `additional` more elements without any resize: a
    /// running resize is finished and the table grown in one step. For
    /// bulk loads before serving, where incremental rehashing would only
    /// move every element twice. Does nothing while resizing is paused.
    pub fn reserve(&mut self, additional: usize) {
        if self.resize_paused {
            return;
        }
        while self.rehash_index.is_some() {
            self.rehash_step();
        }
        let wanted = self.len.saturating_add(additional);
        if wanted <= self.tables[0].len() {
            return;
        }
        self.start_resize(wanted.next_power_of_two().max(MIN_BUCKETS));
        while self.rehash_index.is_some() {
            self.rehash_step();
        }
    }

    /// The value under `key`, inserting `make()` first when absent.
    pub fn get_or_insert_with<Q>(&mut self, key: &Q, make: impl FnOnce() -> (K, V)) -> &mut V
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ?Sized,
    {
        if self.contains_key(key) {
            return self.get_mut(key).expect("checked present");
        }
        let (k, v) = make();
        self.insert_new(k, v)
    }

    /// Removes `key`, returning the stored key and value.
    pub fn remove<Q>(&mut self, key: &Q) -> Option<(K, V)>
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ?Sized,
    {
        if self.len == 0 {
            return None;
        }
        if self.rehash_index.is_some() {
            self.rehash_step();
        }
        let h = self.hash(key);
        let mut removed = None;
        for t in 0..2 {
            if self.tables[t].is_empty() {
                continue;
            }
            let b = self.index(t, h);
            removed = unlink(&mut self.tables[t][b], key);
            if removed.is_some() || self.rehash_index.is_none() {
                break;
            }
        }
        if removed.is_some() {
            self.len -= 1;
            self.maybe_shrink();
        }
        removed
    }

    /// Removes every element.
    pub fn clear(&mut self) {
        for table in &mut self.tables {
            for bucket in table.iter_mut() {
                drop_chain(bucket);
            }
            *table = Vec::new();
        }
        self.rehash_index = None;
        self.chain_bound = [0, 0];
        self.len = 0;
        // No buckets are left whose positions could be kept stable.
        self.resize_paused = false;
    }

    fn maybe_shrink(&mut self) {
        // Shrink below 1/8 fill (Redis resizes under 10%).
        if self.rehash_index.is_none()
            && !self.resize_paused
            && self.tables[0].len() > MIN_BUCKETS
            && self.len * 8 < self.tables[0].len()
        {
            let target = self.len.next_power_of_two().max(MIN_BUCKETS);
            self.start_resize(target);
        }
    }

    fn start_resize(&mut self, new_count: usize) {
        debug_assert!(
            new_count.is_power_of_two(),
            "bucket count is a power of two"
        );
        debug_assert!(self.rehash_index.is_none(), "one resize at a time");
        if self.tables[0].is_empty() {
            self.tables[0] = empty_buckets(new_count);
            self.chain_bound[0] = 0;
            return;
        }
        self.tables[1] = empty_buckets(new_count);
        self.chain_bound[1] = 0;
        self.rehash_index = Some(0);
        self.rehash_step();
    }

    /// Moves one bucket of the old table (visiting at most a few empty
    /// ones) to the new table; finishes the resize at the end.
    fn rehash_step(&mut self) {
        let Some(mut index) = self.rehash_index else {
            return;
        };
        if self.resize_paused {
            return;
        }
        let mut empty_visits = 0;
        while index < self.tables[0].len() && self.tables[0][index].is_none() {
            index += 1;
            empty_visits += 1;
            if empty_visits >= EMPTY_VISITS_PER_STEP {
                self.rehash_index = Some(index);
                return;
            }
        }
        if index < self.tables[0].len() {
            let mask = self.tables[1].len() - 1;
            let mut link = self.tables[0][index].take();
            while let Some(mut node) = link {
                link = node.next.take();
                let b = (self.hasher.hash_one(&node.key) as usize) & mask;
                node.next = self.tables[1][b].take();
                self.tables[1][b] = Some(node);
                self.note_push(1, b);
            }
            index += 1;
        }
        if index >= self.tables[0].len() {
            self.tables[0] = std::mem::take(&mut self.tables[1]);
            self.chain_bound = [self.chain_bound[1], 0];
            self.rehash_index = None;
        } else {
            self.rehash_index = Some(index);
        }
    }

    /// Background rehashing (cron): moves buckets for up to `budget`, so an
    /// idle or read-only table still finishes its resize.
    pub fn rehash_for(&mut self, budget: std::time::Duration) {
        if self.resize_paused {
            return;
        }
        let started = std::time::Instant::now();
        while self.rehash_index.is_some() && started.elapsed() < budget {
            for _ in 0..100 {
                self.rehash_step();
            }
        }
    }

    /// Iterates over all elements.
    pub fn iter(&self) -> Iter<'_, K, V> {
        Iter {
            tables: [&self.tables[0], &self.tables[1]],
            table: 0,
            bucket: 0,
            node: None,
            remaining: self.len,
        }
    }

    /// Iterates over the keys.
    pub fn keys(&self) -> impl Iterator<Item = &K> {
        self.iter().map(|(k, _)| k)
    }

    /// Iterates over the values.
    pub fn values(&self) -> impl Iterator<Item = &V> {
        self.iter().map(|(_, v)| v)
    }

    /// Visits every value mutably.
    pub fn for_each_mut(&mut self, mut f: impl FnMut(&K, &mut V)) {
        for table in &mut self.tables {
            for bucket in table.iter_mut() {
                let mut link = bucket;
                while let Some(node) = link {
                    f(&node.key, &mut node.value);
                    link = &mut node.next;
                }
            }
        }
    }

    /// Removes every element for which `keep` returns false.
    pub fn retain(&mut self, mut keep: impl FnMut(&K, &mut V) -> bool) {
        let mut removed = 0;
        for table in &mut self.tables {
            for bucket in table.iter_mut() {
                let mut link = bucket;
                loop {
                    let remove = match link {
                        None => break,
                        Some(node) => !keep(&node.key, &mut node.value),
                    };
                    if remove {
                        let mut node = link.take().expect("matched Some");
                        *link = node.next.take();
                        removed += 1;
                    } else {
                        link = &mut link.as_mut().expect("matched Some").next;
                    }
                }
            }
        }
        self.len -= removed;
        self.maybe_shrink();
    }

    /// One step of a SCAN: visits the elements of the bucket(s) at
    /// `cursor` and returns the next cursor (0 when the scan is complete).
    ///
    /// Elements present from the first call to the last are visited at
    /// least once, whatever resizes happen in between, also while a resize
    /// is under way (Redis's `dictScan`: the bucket of the smaller table,
    /// then every bucket of the larger table that expands from it).
    pub fn scan_step(&self, cursor: u64, mut visit: impl FnMut(&K, &V)) -> u64 {
        let mut visit_bucket = |bucket: &Link<K, V>| {
            let mut link = bucket;
            while let Some(node) = link {
                visit(&node.key, &node.value);
                link = &node.next;
            }
        };
        if self.rehash_index.is_none() {
            if self.tables[0].is_empty() {
                return 0;
            }
            let mask = (self.tables[0].len() - 1) as u64;
            visit_bucket(&self.tables[0][(cursor & mask) as usize]);
            return next_cursor(cursor, mask);
        }
        let (small, large) = if self.tables[0].len() <= self.tables[1].len() {
            (&self.tables[0], &self.tables[1])
        } else {
            (&self.tables[1], &self.tables[0])
        };
        let m0 = (small.len() - 1) as u64;
        let m1 = (large.len() - 1) as u64;
        let mut v = cursor;
        visit_bucket(&small[(v & m0) as usize]);
        loop {
            visit_bucket(&large[(v & m1) as usize]);
            v = next_cursor(v, m1);
            if v & (m0 ^ m1) == 0 {
                break;
            }
        }
        v
    }

    /// Pauses (or resumes) resizing and incremental rehashing, so that
    /// every element stays at its position (see [`Dict::positions`])
    /// until resumed: removals unlink in place, inserts go into an existing
    /// bucket. An empty table (no buckets yet) is never paused: it has no
    /// positions, and its first insert must allocate.
    pub(crate) fn set_resize_paused(&mut self, paused: bool) {
        self.resize_paused = paused && !self.tables[0].is_empty();
    }

    /// True while resizing is paused.
    #[cfg(test)]
    pub(crate) fn is_resize_paused(&self) -> bool {
        self.resize_paused
    }

    /// Number of positions (buckets of both tables). Position `p` is bucket
    /// `p` of the table in use when `p < tables[0].len()`, else bucket
    /// `p - tables[0].len()` of the table being filled by a resize. Stable
    /// only while resizing is paused.
    pub(crate) fn positions(&self) -> usize {
        self.tables[0].len() + self.tables[1].len()
    }

    /// The position of the bucket holding `key`, with the stored key and
    /// value, if present.
    pub(crate) fn locate<Q>(&self, key: &Q) -> Option<(usize, &K, &V)>
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ?Sized,
    {
        if self.len == 0 {
            return None;
        }
        let h = self.hash(key);
        let mut base = 0;
        for t in 0..2 {
            if !self.tables[t].is_empty() {
                let b = self.index(t, h);
                if let Some(node) = find(&self.tables[t][b], key) {
                    return Some((base + b, &node.key, &node.value));
                }
            }
            if self.rehash_index.is_none() {
                break;
            }
            base = self.tables[0].len();
        }
        None
    }

    /// The position an absent `key` would be inserted at, when resizing is
    /// paused (so no insert moves or allocates buckets).
    pub(crate) fn insert_position<Q>(&self, key: &Q) -> usize
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ?Sized,
    {
        debug_assert!(
            self.resize_paused,
            "insert positions are stable only while paused"
        );
        let h = self.hash(key);
        if self.rehash_index.is_some() {
            self.tables[0].len() + self.index(1, h)
        } else {
            self.index(0, h)
        }
    }

    /// True when one more element would take the load factor (elements per
    /// bucket of the table receiving inserts) past `ratio`: what Redis
    /// calls `dict_force_resize_ratio`, beyond which chains get long enough
    /// to slow every lookup.
    pub(crate) fn insert_would_overload(&self, ratio: usize) -> bool {
        let receiving = if self.rehash_index.is_some() {
            self.tables[1].len()
        } else {
            self.tables[0].len()
        };
        self.len + 1 > receiving.saturating_mul(ratio)
    }

    /// Visits the elements in the bucket at `position`.
    pub(crate) fn visit_position(&self, position: usize, mut visit: impl FnMut(&K, &V)) {
        let (t, b) = self.split_position(position);
        let mut link = &self.tables[t][b];
        while let Some(node) = link {
            visit(&node.key, &node.value);
            link = &node.next;
        }
    }

    /// Hints the CPU to fetch the first node of the bucket at `position`
    /// (out of range: nothing). A capture visits positions in order and
    /// prefetches a few ahead: the nodes are scattered over the heap, and
    /// reading each one cold was about a third of the capture's time.
    #[inline]
    pub(crate) fn prefetch_position(&self, position: usize) {
        let (t, b) = self.split_position(position);
        if let Some(Some(node)) = self.tables[t].get(b) {
            prefetch(&**node as *const Node<K, V> as *const u8);
        }
    }

    /// Moves the elements of the bucket at `position` out of the table.
    pub(crate) fn drain_position(&mut self, position: usize, mut take: impl FnMut(K, V)) {
        let (t, b) = self.split_position(position);
        let mut link = self.tables[t][b].take();
        while let Some(mut node) = link {
            link = node.next.take();
            self.len -= 1;
            let Node { key, value, .. } = *node;
            take(key, value);
        }
    }

    fn split_position(&self, position: usize) -> (usize, usize) {
        let first = self.tables[0].len();
        if position < first {
            (0, position)
        } else {
            (1, position - first)
        }
    }

    /// Visits up to `count` elements found near a random position, for
    /// sampling where speed matters more than a uniform draw (the idea of
    /// Redis's `dictGetSomeKeys`, which feeds its eviction pool): from a
    /// random bucket index, the buckets at that index in both tables, then
    /// at the next index, and so on, are visited with their whole chains,
    /// until `count` elements are visited or `10 × count` indices are
    /// spent. After a run of more than `max(count, 4)` empty buckets the
    /// walk starts again at a new random index, so sparse regions cost
    /// little. An element can be visited twice when the walk wraps or
    /// jumps back; elements after long empty runs are favoured. Cost: about
    /// `count` nodes and a few sequential bucket reads, against
    /// `count × slots / len` random reads for `count` calls of
    /// [`Dict::random`].
    pub fn sample_some(&self, rng: &mut Rng, count: usize, mut visit: impl FnMut(&K, &V)) {
        let count = count.min(self.len);
        if count == 0 {
            return;
        }
        let mask = self.tables[0].len().max(self.tables[1].len()) - 1;
        let jump_after = count.max(4);
        let mut index = rng.below(mask as u64 + 1) as usize;
        let (mut visited, mut empty_run) = (0, 0);
        for _ in 0..count.saturating_mul(10) {
            for t in 0..2 {
                if let (0, Some(moved)) = (t, self.rehash_index) {
                    // Buckets of the old table below the rehash index are
                    // empty: skip to it when the new table has no bucket
                    // at this index either.
                    if index < moved {
                        if index >= self.tables[1].len() {
                            index = moved;
                        } else {
                            continue;
                        }
                    }
                }
                let Some(bucket) = self.tables[t].get(index) else {
                    continue;
                };
                if bucket.is_none() {
                    empty_run += 1;
                    if empty_run > jump_after {
                        index = rng.below(mask as u64 + 1) as usize;
                        empty_run = 0;
                    }
                    continue;
                }
                empty_run = 0;
                let mut link = bucket;
                while let Some(node) = link {
                    visit(&node.key, &node.value);
                    visited += 1;
                    if visited == count {
                        return;
                    }
                    link = &node.next;
                }
            }
            index = (index + 1) & mask;
        }
    }

    /// A random element, uniform over the elements, or `None` when empty.
    ///
    /// Every bucket is seen as `chain_bound` slots, its chain's nodes in
    /// the first ones and the rest empty: a slot is drawn uniformly from
    /// the slots of both tables (those of buckets a running resize has
    /// already emptied left out), and drawn again while it is empty. Each
    /// element fills exactly one slot, so each is returned with the same
    /// probability, whatever the chain lengths and whether a resize is
    /// under way (picking a bucket and then one of its nodes would favour
    /// the nodes of short chains). The expected number of draws is the
    /// number of slots over the number of elements: about the longest
    /// chain over the load factor (8.4 for a million elements, whose
    /// longest chain is typically 8).
    pub fn random(&self, rng: &mut Rng) -> Option<(&K, &V)> {
        if self.len == 0 {
            return None;
        }
        // Buckets of the old table below the rehash index are empty.
        let first = self.rehash_index.unwrap_or(0);
        let [bound0, bound1] = self.chain_bound.map(|b| b as u64);
        let span0 = (self.tables[0].len() - first) as u64 * bound0;
        let span1 = self.tables[1].len() as u64 * bound1;
        debug_assert!(span0 + span1 > 0, "a non-empty table has slots");
        loop {
            let slot = rng.below(span0 + span1);
            let (mut link, mut depth) = if slot < span0 {
                let b = slot / bound0;
                (&self.tables[0][first + b as usize], slot - b * bound0)
            } else {
                let slot = slot - span0;
                let b = slot / bound1;
                (&self.tables[1][b as usize], slot - b * bound1)
            };
            while let Some(node) = link {
                if depth == 0 {
                    return Some((&node.key, &node.value));
                }
                depth -= 1;
                link = &node.next;
            }
        }
    }
}

fn empty_buckets<K, V>(count: usize) -> Vec<Link<K, V>> {
    let mut buckets = Vec::with_capacity(count);
    buckets.resize_with(count, || None);
    buckets
}

impl<K, V> Drop for Dict<K, V> {
    fn drop(&mut self) {
        if self.len == 0 {
            // Nothing to unlink (a drained capture source still has its
            // bucket array: no need to walk a million empty buckets).
            return;
        }
        for table in &mut self.tables {
            for bucket in table.iter_mut() {
                drop_chain(bucket);
            }
        }
    }
}

impl<K: Hash + Eq + Clone, V: Clone> Clone for Dict<K, V> {
    fn clone(&self) -> Self {
        let mut d = Dict::with_capacity(self.len);
        for (k, v) in self.iter() {
            d.insert_new(k.clone(), v.clone());
        }
        d
    }
}

impl<K: Hash + Eq + std::fmt::Debug, V: std::fmt::Debug> std::fmt::Debug for Dict<K, V> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_map().entries(self.iter()).finish()
    }
}

/// Iterator over a [`Dict`].
pub struct Iter<'a, K, V> {
    tables: [&'a [Link<K, V>]; 2],
    table: usize,
    bucket: usize,
    node: Option<&'a Node<K, V>>,
    remaining: usize,
}

impl<'a, K, V> Iterator for Iter<'a, K, V> {
    type Item = (&'a K, &'a V);

    fn next(&mut self) -> Option<Self::Item> {
        loop {
            if let Some(node) = self.node {
                self.node = node.next.as_deref();
                self.remaining -= 1;
                return Some((&node.key, &node.value));
            }
            while self.bucket >= self.tables[self.table].len() {
                if self.table == 1 {
                    return None;
                }
                self.table = 1;
                self.bucket = 0;
            }
            self.node = self.tables[self.table][self.bucket].as_deref();
            self.bucket += 1;
        }
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        (self.remaining, Some(self.remaining))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rand::fairness;
    use std::collections::{BTreeMap, HashSet};

    #[test]
    fn a_resize_finishes_under_lookups_alone() {
        // A table that grows once, then is only looked up and updated (a
        // set or hash whose members exist): each mutable lookup moves a
        // bucket, as Redis's dictFind does, so the resize ends and the
        // lookups stop probing two tables.
        let mut d: Dict<u64, u64> = Dict::new();
        let mut n = 0;
        while !d.is_rehashing() {
            d.insert(n, n);
            n += 1;
        }
        let buckets = d.bucket_count();
        for i in 0..(buckets as u64 * 4) {
            *d.get_mut(&(i % n)).expect("present") += 1;
        }
        assert!(!d.is_rehashing(), "the resize never finished");
        assert_eq!(d.len(), n as usize);
        for k in 0..n {
            assert!(d.get(&k).is_some());
        }
    }

    #[test]
    fn keyspace_entry_keeps_its_size_with_the_access_field() {
        // A key's node: the key (16 bytes, with the 24-bit access field
        // after its tag), the value (16) and the chain link (8): 40 bytes,
        // a 48-byte allocator block (docs/memory.md). A sorted set's member
        // node is 32.
        use crate::types::{Blob, Value};
        assert_eq!(std::mem::size_of::<Blob>(), 16);
        assert_eq!(std::mem::size_of::<Value>(), 16);
        assert_eq!(std::mem::size_of::<Node<Blob, Value>>(), 40);
        assert_eq!(std::mem::size_of::<Node<Blob, f64>>(), 32);
    }

    #[test]
    fn prefetch_hints_change_nothing_in_any_state() {
        let mut d: Dict<Vec<u8>, u32> = Dict::new();
        // Empty, filling, mid-resize, after removals: hints for present
        // and absent keys leave every key where it was.
        d.prefetch_bucket(&b"x"[..]);
        d.prefetch_chain(&b"x"[..]);
        for i in 0..2000u32 {
            let key = format!("k{i}").into_bytes();
            d.prefetch_bucket(&key[..]);
            d.prefetch_chain(&key[..]);
            d.insert(key, i);
            d.prefetch_chain(&b"absent"[..]);
        }
        for i in (0..2000u32).step_by(3) {
            d.remove(format!("k{i}").as_bytes());
            d.prefetch_bucket(format!("k{i}").as_bytes());
        }
        for i in 0..2000u32 {
            let want = (i % 3 != 0).then_some(i);
            assert_eq!(d.get(format!("k{i}").as_bytes()).copied(), want);
        }
    }

    #[test]
    fn insert_get_remove_against_model() {
        let mut rng = Rng::with_seed(7);
        let mut d: Dict<u64, u64> = Dict::new();
        let mut model = BTreeMap::new();
        for i in 0..20_000u64 {
            let k = rng.below(3000);
            match rng.below(3) {
                0 | 1 => assert_eq!(d.insert(k, i), model.insert(k, i)),
                _ => assert_eq!(d.remove(&k).map(|(_, v)| v), model.remove(&k)),
            }
            assert_eq!(d.len(), model.len());
        }
        for (k, v) in &model {
            assert_eq!(d.get(k), Some(v));
        }
        assert_eq!(d.iter().count(), model.len());
    }

    #[test]
    fn try_insert_refuses_duplicates_in_every_table_state() {
        let mut rng = Rng::with_seed(11);
        let mut d: Dict<u64, u64> = Dict::new();
        let mut model = BTreeMap::new();
        for i in 0..20_000u64 {
            let k = rng.below(5000);
            if rng.below(4) == 0 {
                assert_eq!(d.remove(&k).map(|(_, v)| v), model.remove(&k));
            } else {
                let got = d.try_insert(k, i).map(|v| *v);
                match model.get(&k) {
                    Some(_) => assert_eq!(got, Err((k, i)), "duplicate {k} refused"),
                    None => {
                        assert_eq!(got, Ok(i));
                        model.insert(k, i);
                    }
                }
            }
            assert_eq!(d.len(), model.len());
        }
        for (k, v) in &model {
            assert_eq!(d.get(k), Some(v));
        }
    }

    #[test]
    fn reserve_finishes_rehashing_and_prevents_resizes() {
        let mut d: Dict<u64, u64> = Dict::new();
        for k in 0..100u64 {
            d.insert_new(k, k);
        }
        // 100 keys in 128 buckets; the 129th insert starts a resize.
        for k in 100..129u64 {
            d.insert_new(k, k);
        }
        assert!(d.is_rehashing());
        d.reserve(10_000);
        assert!(!d.is_rehashing());
        let buckets = d.bucket_count();
        assert!(buckets >= 10_129);
        for k in 129..10_129u64 {
            assert!(d.try_insert(k, k).is_ok());
            assert!(!d.is_rehashing(), "no resize within the reservation");
        }
        assert_eq!(d.bucket_count(), buckets);
        for k in 0..10_129u64 {
            assert_eq!(d.get(&k), Some(&k));
        }
        // A reservation already covered changes nothing.
        d.reserve(0);
        assert_eq!(d.bucket_count(), buckets);
    }

    #[test]
    fn scan_visits_everything_across_resizes() {
        let mut d: Dict<u64, ()> = Dict::new();
        for k in 0..1000u64 {
            d.insert(k, ());
        }
        let mut seen = HashSet::new();
        let mut cursor = 0;
        let mut step = 0;
        loop {
            cursor = d.scan_step(cursor, |k, _| {
                seen.insert(*k);
            });
            step += 1;
            // Grow and shrink the table while the scan runs; keys 0..500
            // stay present the whole time and must all be seen.
            if step == 50 {
                for k in 1000..5000u64 {
                    d.insert(k, ());
                }
            }
            if step == 300 {
                for k in 500..5000u64 {
                    d.remove(&k);
                }
            }
            if cursor == 0 {
                break;
            }
        }
        for k in 0..500u64 {
            assert!(seen.contains(&k), "key {k} missed by scan");
        }
    }

    #[test]
    fn scan_and_iteration_see_everything_while_rehashing() {
        let mut d: Dict<u64, ()> = Dict::new();
        // Grow until a resize is in progress, then scan and iterate mid-move.
        let mut k = 0u64;
        while !d.is_rehashing() || d.len() < 1000 {
            d.insert(k, ());
            k += 1;
        }
        assert!(d.is_rehashing());
        assert_eq!(d.iter().count(), d.len());
        let mut seen = HashSet::new();
        let mut cursor = 0;
        let mut steps = 0;
        loop {
            cursor = d.scan_step(cursor, |key, _| {
                seen.insert(*key);
            });
            // Keep writing: buckets move between the calls.
            d.insert(1_000_000 + steps, ());
            steps += 1;
            if cursor == 0 {
                break;
            }
        }
        for key in 0..k {
            assert!(seen.contains(&key), "key {key} missed while rehashing");
        }
        d.rehash_for(std::time::Duration::from_secs(1));
        assert!(!d.is_rehashing());
        for key in 0..k {
            assert!(d.contains_key(&key));
        }
    }

    #[test]
    fn random_returns_members() {
        let mut rng = Rng::with_seed(1);
        let mut d: Dict<u64, ()> = Dict::new();
        assert!(d.random(&mut rng).is_none());
        for k in 0..10u64 {
            d.insert(k, ());
        }
        let mut seen = HashSet::new();
        for _ in 0..1000 {
            seen.insert(*d.random(&mut rng).unwrap().0);
        }
        assert_eq!(seen.len(), 10);
    }

    /// Draws `calls` samples of `count`, checks each visits at most
    /// `min(count, len)` present elements, and returns what was seen and
    /// the share of the asked-for elements visited.
    fn sample_some_checked(
        d: &Dict<u64, ()>,
        rng: &mut Rng,
        count: usize,
        calls: usize,
    ) -> (HashSet<u64>, f64) {
        let mut seen = HashSet::new();
        let mut visited = 0;
        for _ in 0..calls {
            let mut got = Vec::new();
            d.sample_some(rng, count, |k, _| got.push(*k));
            assert!(
                got.len() <= count.min(d.len()),
                "{} in a sample of {count}",
                got.len()
            );
            visited += got.len();
            for k in got {
                assert!(d.contains_key(&k), "sampled {k}, not in the table");
                seen.insert(k);
            }
        }
        let asked = (calls * count.min(d.len())).max(1);
        (seen, visited as f64 / asked as f64)
    }

    #[test]
    fn sample_some_visits_count_members_and_reaches_every_one() {
        let mut rng = Rng::with_seed(7);
        let mut d: Dict<u64, ()> = Dict::new();
        assert!(sample_some_checked(&d, &mut rng, 5, 3).0.is_empty());
        for k in 0..3u64 {
            d.insert(k, ());
        }
        // More asked than held: all of them (the walk wraps).
        let (seen, share) = sample_some_checked(&d, &mut rng, 10, 50);
        assert_eq!((seen.len(), share), (3, 1.0));
        for k in 3..5000u64 {
            d.insert(k, ());
        }
        d.rehash_for(std::time::Duration::from_secs(1));
        assert!(!d.is_rehashing());
        let (seen, share) = sample_some_checked(&d, &mut rng, 5, 5000);
        assert_eq!(share, 1.0, "a dense table fills every sample");
        assert!(seen.len() > 4000, "{} of 5000 sampled", seen.len());
        // Sparse after removals (one in ten left): the walk jumps over
        // empty runs, and still fills most samples.
        for k in 0..5000u64 {
            if k % 10 != 0 {
                d.remove(&k);
            }
        }
        let (seen, share) = sample_some_checked(&d, &mut rng, 5, 5000);
        assert_eq!(
            seen.len(),
            d.len(),
            "every element is sampled at some point"
        );
        assert!(share > 0.6, "{share} of the asked-for elements visited");
    }

    #[test]
    fn sample_some_sees_both_tables_while_rehashing() {
        let mut rng = Rng::with_seed(9);
        let mut d: Dict<u64, ()> = Dict::new();
        let mut k = 0u64;
        while !d.is_rehashing() || d.len() < 1000 {
            d.insert(k, ());
            k += 1;
        }
        let mut stage = 0;
        while d.is_rehashing() {
            let (seen, share) = sample_some_checked(&d, &mut rng, 5, 4000);
            assert!(
                seen.len() * 100 >= d.len() * 95,
                "stage {stage}: {} sampled",
                seen.len()
            );
            let in_new_table = seen
                .iter()
                .filter(|k| d.locate(*k).unwrap().0 >= d.tables[0].len())
                .count();
            assert!(
                in_new_table > 0,
                "stage {stage}: nothing from the new table"
            );
            assert!(
                share > 0.9,
                "stage {stage}: {share} of the asked-for elements"
            );
            for _ in 0..50 {
                d.rehash_step();
            }
            stage += 1;
        }
        assert!(stage >= 2, "the resize took {stage} stages");
    }

    /// The longest chain of each table.
    fn longest_chains<K, V>(d: &Dict<K, V>) -> [usize; 2] {
        let mut longest = [0; 2];
        for (t, table) in d.tables.iter().enumerate() {
            for bucket in table {
                let mut n = 0;
                let mut link = bucket;
                while let Some(node) = link {
                    n += 1;
                    link = &node.next;
                }
                longest[t] = longest[t].max(n);
            }
        }
        longest
    }

    #[test]
    fn chain_bounds_cover_every_chain() {
        let seed = fairness::seed("keyspace::dict::tests::chain_bounds_cover_every_chain");
        let mut rng = seed.rng(0);
        let mut d: Dict<u64, ()> = Dict::new();
        for step in 0..30_000u32 {
            let k = rng.below(2000);
            match rng.below(12) {
                0..=4 => {
                    d.insert(k, ());
                }
                5 => {
                    let _ = d.try_insert(k, ());
                }
                6..=8 => {
                    d.remove(&k);
                }
                9 => d.set_resize_paused(rng.below(3) == 0),
                10 => d.rehash_step(),
                _ => match rng.below(40) {
                    0 => d.clear(),
                    1 => d.reserve(rng.index(500)),
                    2 => d.retain(|k, _| k % 3 != 0),
                    3 if d.positions() > 0 => {
                        d.set_resize_paused(true);
                        d.drain_position(rng.index(d.positions()), |_, _| {});
                    }
                    _ => {}
                },
            }
            let longest = longest_chains(&d);
            assert!(
                longest[0] <= d.chain_bound[0] && longest[1] <= d.chain_bound[1],
                "step {step}: chains {longest:?} over bounds {:?}",
                d.chain_bound
            );
            if !d.is_rehashing() {
                assert_eq!(d.chain_bound[1], 0, "step {step}: no second table");
            }
        }
    }

    /// Draws `per_element` times the number of elements from `d` and
    /// checks the histogram against the uniform distribution.
    fn check_uniform(d: &Dict<u64, ()>, rng: &mut Rng, per_element: usize, what: &str) -> f64 {
        let keys: Vec<u64> = d.keys().copied().collect();
        let index: std::collections::HashMap<u64, usize> =
            keys.iter().enumerate().map(|(i, &k)| (k, i)).collect();
        let mut counts = vec![0u64; keys.len()];
        for _ in 0..per_element * keys.len() {
            let (k, _) = d.random(rng).expect("not empty");
            counts[index[k]] += 1;
        }
        let chi = fairness::assert_uniform(what, &counts);
        eprintln!("{what}: chi-square {chi:.1}");
        chi
    }

    /// A table held at `buckets` buckets (resizing paused, as during a
    /// point-in-time capture) whose bucket `i` holds `lengths[i]` keys.
    fn table_with_chains(lengths: &[usize]) -> Dict<u64, ()> {
        let mut d: Dict<u64, ()> = Dict::with_capacity(lengths.len());
        assert_eq!(d.tables[0].len(), lengths.len());
        d.set_resize_paused(true);
        let mut filled = vec![0usize; lengths.len()];
        let mut k = 0u64;
        while filled != lengths {
            let b = d.index(0, d.hash(&k));
            if filled[b] < lengths[b] {
                d.insert(k, ());
                filled[b] += 1;
            }
            k += 1;
        }
        d
    }

    #[test]
    fn random_is_uniform_over_chains_of_different_lengths() {
        let seed = fairness::seed(
            "keyspace::dict::tests::random_is_uniform_over_chains_of_different_lengths",
        );
        let mut rng = seed.rng(0);
        let d = table_with_chains(&[1, 3, 9, 27]);
        assert_eq!(d.len(), 40);
        check_uniform(&d, &mut rng, 1000, "chains of 1, 3, 9 and 27");
        let d = table_with_chains(&[0, 5, 0, 1, 30, 0, 2, 2]);
        check_uniform(&d, &mut rng, 1000, "chains of 0 to 30");
    }

    #[test]
    fn random_is_uniform_while_rehashing() {
        let seed = fairness::seed("keyspace::dict::tests::random_is_uniform_while_rehashing");
        let mut rng = seed.rng(0);
        // Long chains, then resizing resumes: the next insert starts the
        // move to 64 buckets (moving the first bucket); check at each stage.
        let mut d = table_with_chains(&[1, 3, 9, 27]);
        d.set_resize_paused(false);
        d.insert(1_000_000, ());
        let mut stage = 0;
        while d.is_rehashing() {
            check_uniform(&d, &mut rng, 500, &format!("rehashing, stage {stage}"));
            d.rehash_step();
            stage += 1;
        }
        assert!(stage >= 2, "the resize took {stage} steps");
        check_uniform(&d, &mut rng, 500, "after the resize");
    }

    /// Random table states: sizes, chain lengths of an overfilled paused
    /// table, removals, and a resize stopped anywhere.
    #[test]
    fn random_is_uniform_in_random_table_states() {
        let seed =
            fairness::seed("keyspace::dict::tests::random_is_uniform_in_random_table_states");
        let mut rng = seed.rng(0);
        for round in 0..12 {
            let mut d: Dict<u64, ()> = Dict::new();
            let n = 20 + rng.index(300);
            // Paused at a few buckets (long chains), or growing normally.
            let paused_at = (rng.below(2) == 0).then(|| 1 + rng.index(n / 4));
            let mut k = 0u64;
            while d.len() < n {
                if Some(d.len()) == paused_at {
                    d.set_resize_paused(true);
                }
                d.insert(rng.next_u64() | 1, ());
                k += 1;
            }
            // Remove some (removals never resize while paused).
            let victims: Vec<u64> = d.keys().copied().filter(|_| rng.below(4) == 0).collect();
            for v in victims {
                d.remove(&v);
            }
            d.set_resize_paused(false);
            // Insert until a resize starts, then stop it at a random step.
            while !d.is_rehashing() && d.len() < 4 * n {
                d.insert(rng.next_u64() & !1, ());
                k += 1;
            }
            for _ in 0..rng.index(8) {
                d.rehash_step();
            }
            let what = format!(
                "round {round}: {} elements, {} buckets, rehashing {}, {k} inserts",
                d.len(),
                d.bucket_count(),
                d.is_rehashing()
            );
            check_uniform(&d, &mut rng, 200, &what);
        }
    }
}
