//! [`Dict`]: a chained hash table with Redis's SCAN cursor guarantees.
//!
//! Why not `std::collections::HashMap`: SCAN/HSCAN/SSCAN/ZSCAN promise that
//! every element present for the whole iteration is returned at least once,
//! even when the table grows or shrinks between calls. Redis gets this from
//! a power-of-two bucket array walked in reverse-binary cursor order; an
//! open-addressing table moves elements on resize and cannot give it. This
//! table keeps Redis's layout (buckets of singly linked nodes), so the same
//! cursor algorithm applies, and resizing only relinks nodes.
//!
//! Resizing is done in one step (not incrementally like Redis): relinking a
//! million nodes takes a few milliseconds.

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
    buckets: Vec<Link<K, V>>,
    len: usize,
    hasher: foldhash::quality::RandomState,
}

const MIN_BUCKETS: usize = 4;

impl<K: Hash + Eq, V> Default for Dict<K, V> {
    fn default() -> Self {
        Dict::new()
    }
}

impl<K: Hash + Eq, V> Dict<K, V> {
    /// An empty table (allocates nothing until the first insert).
    pub fn new() -> Self {
        Dict {
            buckets: Vec::new(),
            len: 0,
            hasher: foldhash::quality::RandomState::default(),
        }
    }

    /// An empty table with room for `capacity` elements before resizing.
    pub fn with_capacity(capacity: usize) -> Self {
        let mut d = Dict::new();
        if capacity > 0 {
            d.resize(capacity.next_power_of_two().max(MIN_BUCKETS));
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

    /// Number of buckets (for INFO / DEBUG-style reporting).
    pub fn bucket_count(&self) -> usize {
        self.buckets.len()
    }

    fn hash<Q: Hash + ?Sized>(&self, key: &Q) -> u64 {
        self.hasher.hash_one(key)
    }

    fn bucket_of<Q: Hash + ?Sized>(&self, key: &Q) -> usize {
        (self.hash(key) as usize) & (self.buckets.len() - 1)
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
        let mut link = &self.buckets[self.bucket_of(key)];
        while let Some(node) = link {
            if node.key.borrow() == key {
                return Some((&node.key, &node.value));
            }
            link = &node.next;
        }
        None
    }

    /// A mutable reference to the value stored under `key`.
    pub fn get_mut<Q>(&mut self, key: &Q) -> Option<&mut V>
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ?Sized,
    {
        if self.len == 0 {
            return None;
        }
        let b = self.bucket_of(key);
        let mut link = &mut self.buckets[b];
        while let Some(node) = link {
            if node.key.borrow() == key {
                return Some(&mut node.value);
            }
            link = &mut node.next;
        }
        None
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
        if self.len >= self.buckets.len() {
            self.resize((self.buckets.len() * 2).max(MIN_BUCKETS));
        }
        let b = self.bucket_of(&key);
        let next = self.buckets[b].take();
        self.buckets[b] = Some(Box::new(Node { key, value, next }));
        self.len += 1;
        &mut self.buckets[b].as_mut().expect("just inserted").value
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
        let b = self.bucket_of(key);
        let mut link = &mut self.buckets[b];
        loop {
            match link {
                None => return None,
                Some(node) if node.key.borrow() == key => {
                    let mut node = link.take().expect("matched Some");
                    *link = node.next.take();
                    self.len -= 1;
                    self.maybe_shrink();
                    return Some((node.key, node.value));
                }
                Some(node) => link = &mut node.next,
            }
        }
    }

    /// Removes every element.
    pub fn clear(&mut self) {
        self.drop_all();
        self.buckets = Vec::new();
        self.len = 0;
    }

    // Dropping a long chain recursively could overflow the stack; unlink
    // nodes one at a time instead.
    fn drop_all(&mut self) {
        for bucket in &mut self.buckets {
            let mut link = bucket.take();
            while let Some(mut node) = link {
                link = node.next.take();
            }
        }
    }

    fn maybe_shrink(&mut self) {
        // Shrink below 1/8 fill (Redis resizes under 10%).
        if self.buckets.len() > MIN_BUCKETS && self.len * 8 < self.buckets.len() {
            let target = self.len.next_power_of_two().max(MIN_BUCKETS);
            self.resize(target);
        }
    }

    fn resize(&mut self, new_count: usize) {
        debug_assert!(
            new_count.is_power_of_two(),
            "bucket count is a power of two"
        );
        let old = std::mem::take(&mut self.buckets);
        self.buckets.resize_with(new_count, || None);
        let mask = new_count - 1;
        for mut link in old {
            while let Some(mut node) = link {
                link = node.next.take();
                let b = (self.hasher.hash_one(&node.key) as usize) & mask;
                node.next = self.buckets[b].take();
                self.buckets[b] = Some(node);
            }
        }
    }

    /// Iterates over all elements in bucket order.
    pub fn iter(&self) -> Iter<'_, K, V> {
        Iter {
            buckets: &self.buckets,
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
        for bucket in &mut self.buckets {
            let mut link = bucket;
            while let Some(node) = link {
                f(&node.key, &mut node.value);
                link = &mut node.next;
            }
        }
    }

    /// Removes every element for which `keep` returns false.
    pub fn retain(&mut self, mut keep: impl FnMut(&K, &mut V) -> bool) {
        let mut removed = 0;
        for bucket in &mut self.buckets {
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
        self.len -= removed;
        self.maybe_shrink();
    }

    /// One step of a SCAN: visits the elements of the bucket(s) at
    /// `cursor` and returns the next cursor (0 when the scan is complete).
    ///
    /// Elements present from the first call to the last are visited at
    /// least once, whatever resizes happen in between (the reverse-binary
    /// cursor of Redis's `dictScan`).
    pub fn scan_step(&self, cursor: u64, mut visit: impl FnMut(&K, &V)) -> u64 {
        if self.buckets.is_empty() {
            return 0;
        }
        let mask = (self.buckets.len() - 1) as u64;
        let mut link = &self.buckets[(cursor & mask) as usize];
        while let Some(node) = link {
            visit(&node.key, &node.value);
            link = &node.next;
        }
        // Increment the reversed cursor: set the unmasked high bits, reverse,
        // add one, reverse back.
        let mut v = cursor | !mask;
        v = v.reverse_bits();
        v = v.wrapping_add(1);
        v.reverse_bits()
    }

    /// A random element, or `None` when empty. Picks a random non-empty
    /// bucket, then a random node of its chain (Redis's approach: not
    /// perfectly uniform for long chains, which the load factor keeps rare).
    pub fn random(&self, rng: &mut Rng) -> Option<(&K, &V)> {
        if self.len == 0 {
            return None;
        }
        let mask = self.buckets.len() - 1;
        loop {
            let b = (rng.next_u64() as usize) & mask;
            if let Some(head) = &self.buckets[b] {
                let mut chain_len = 0usize;
                let mut link = &self.buckets[b];
                while let Some(node) = link {
                    chain_len += 1;
                    link = &node.next;
                }
                let mut pick = rng.index(chain_len);
                let mut node = head;
                while pick > 0 {
                    node = node.next.as_ref().expect("pick < chain length");
                    pick -= 1;
                }
                return Some((&node.key, &node.value));
            }
        }
    }
}

impl<K, V> Drop for Dict<K, V> {
    fn drop(&mut self) {
        for bucket in &mut self.buckets {
            let mut link = bucket.take();
            while let Some(mut node) = link {
                link = node.next.take();
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
    buckets: &'a [Link<K, V>],
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
            if self.bucket >= self.buckets.len() {
                return None;
            }
            self.node = self.buckets[self.bucket].as_deref();
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
    use std::collections::{BTreeMap, HashSet};

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
}
