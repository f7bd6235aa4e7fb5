//! Databases, entries and expiry: pure memory, no I/O.
//!
//! A [`Db`] is two tables, as in Redis: `main` maps keys to values and
//! `expires` maps the keys that have a TTL to their absolute expiry time in
//! Unix milliseconds. Keeping expiry apart means keys without a TTL pay
//! nothing for it, and active expiry samples only keys that can expire.
//!
//! A [`Keyspace`] can take a point-in-time capture of itself (BGSAVE, AOF
//! rewrite) while clients keep writing, without fork and without copying
//! the keyspace up front: see `capture` for the mechanism. Every mutating
//! [`Db`] method starts with one branch on "is a capture running"; only when
//! it is does the method consult the capture (the `capture_before_*` hooks).

pub mod access;
pub(crate) mod capture;
pub mod dict;

use crate::rand::Rng;
use crate::types::{Blob, Value};
use dict::Dict;

/// A key read back from a file (a snapshot, an RDB file), as every loader
/// delivers it.
#[derive(Debug, Clone)]
pub struct LoadedKey {
    /// Its database.
    pub db: usize,
    /// The key.
    pub key: Blob,
    /// The value, in the encoding Redis would give it on load.
    pub value: Value,
    /// Absolute expiry, Unix ms.
    pub expire_ms: Option<i64>,
    /// The access record read with it (RDB IDLE or FREQ), if any.
    pub access: Option<KeyAccess>,
}

/// An access record of a key in a file: RDB's IDLE (seconds) or FREQ (the
/// LFU counter).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KeyAccess {
    /// Seconds since the last access.
    Idle(u64),
    /// The LFU counter.
    Freq(u8),
}

impl KeyAccess {
    /// The key's access field at `now_ms` when the record applies under
    /// the policy (`lfu`): FREQ under LFU, IDLE otherwise (Redis's
    /// `objectSetLRUOrLFU`); None when it does not.
    pub fn field(self, lfu: bool, now_ms: i64) -> Option<u32> {
        match self {
            KeyAccess::Freq(f) if lfu => Some(access::lfu_with_freq(f, now_ms)),
            KeyAccess::Idle(s) if !lfu => Some(access::lru_with_idle(s, now_ms)),
            _ => None,
        }
    }
}

/// One numbered database.
///
/// While a capture runs, the capture's state for this database travels
/// with it (SWAPDB, FLUSHDB's `std::mem::take`), and a capturing `Db` that
/// is cleared or dropped hands its unsaved records to the capture first.
#[derive(Debug)]
pub struct Db {
    main: Dict<Blob, Value>,
    expires: Dict<Blob, i64>,
    /// The running capture's progress over `main`, if any.
    capture: Option<Box<capture::DbCapture>>,
    /// The access field new keys start with ([`Keyspace::set_new_access`]).
    new_access: u32,
}

/// The prefetch steps of [`Db::prefetch_keys`] for up to 32 `keys` of
/// `table`, and of `also` when given (the TTL table beside a main table:
/// its steps go with the main table's, so both tables' misses overlap):
/// buckets; first nodes; their heap blocks and second nodes; the second
/// nodes' heap blocks. `value_block` names a value's heap block. Returns
/// how many keys it took (the steps after the first only run for two or
/// more).
fn prefetch_in<'k, V, W>(
    table: &Dict<Blob, V>,
    also: Option<&Dict<Blob, W>>,
    keys: impl Iterator<Item = &'k [u8]>,
    value_block: impl Fn(&V) -> Option<*const u8>,
) -> usize {
    let mut hashes = [0u64; 32];
    let mut also_hashes = [0u64; 32];
    let mut n = 0;
    for key in keys.take(hashes.len()) {
        hashes[n] = table.hash_of(key);
        table.prefetch_hashed(hashes[n], false);
        if let Some(other) = also {
            also_hashes[n] = other.hash_of(key);
            other.prefetch_hashed(also_hashes[n], false);
        }
        n += 1;
    }
    if n < 2 {
        return n;
    }
    for i in 0..n {
        table.prefetch_hashed(hashes[i], true);
        if let Some(other) = also {
            other.prefetch_hashed(also_hashes[i], true);
        }
    }
    // The nodes asked for above arrive together; a key longer than a Blob
    // holds inline, and the value, are one more block each.
    for i in 0..n {
        if let Some((key, value)) = table.first_entry_hashed(hashes[i]) {
            for p in [key.heap_ptr(), value_block(value)].into_iter().flatten() {
                dict::prefetch(p);
            }
            table.prefetch_second_hashed(hashes[i]);
        }
        if let Some((key, _)) = also.and_then(|other| other.first_entry_hashed(also_hashes[i])) {
            if let Some(p) = key.heap_ptr() {
                dict::prefetch(p);
            }
        }
    }
    // A key filed behind another in its bucket (a third of them at the
    // table's usual load): its node and blocks, one step later still.
    for &h in &hashes[..n] {
        if let Some((key, value)) = table.second_entry_hashed(h) {
            for p in [key.heap_ptr(), value_block(value)].into_iter().flatten() {
                dict::prefetch(p);
            }
        }
    }
    n
}

impl Default for Db {
    fn default() -> Db {
        Db {
            main: Dict::default(),
            expires: Dict::default(),
            capture: None,
            new_access: access::initial(false, crate::clock::now_ms()),
        }
    }
}

impl Clone for Db {
    /// A copy of the contents. A capture does not follow the copy: the copy
    /// is a new database that did not exist when the capture began.
    fn clone(&self) -> Db {
        Db {
            main: self.main.clone(),
            expires: self.expires.clone(),
            capture: None,
            new_access: self.new_access,
        }
    }
}

impl Drop for Db {
    fn drop(&mut self) {
        if self.capture.is_some() {
            self.capture_retire();
        }
    }
}

impl Db {
    /// An empty database.
    pub fn new() -> Db {
        Db::default()
    }

    /// Number of keys, including expired ones not yet removed.
    pub fn len(&self) -> usize {
        self.main.len()
    }

    /// True when the database holds no keys.
    pub fn is_empty(&self) -> bool {
        self.main.is_empty()
    }

    /// Number of keys with a TTL.
    pub fn expires_len(&self) -> usize {
        self.expires.len()
    }

    /// The value under `key`, ignoring expiry (callers check it first).
    pub fn get(&self, key: &[u8]) -> Option<&Value> {
        self.main.get(key)
    }

    /// The value under `key` mutably, ignoring expiry.
    pub fn get_mut(&mut self, key: &[u8]) -> Option<&mut Value> {
        if self.capture.is_some() {
            self.capture_before_change(key);
        }
        self.main.get_mut(key)
    }

    /// The stored key and value.
    pub fn get_key_value(&self, key: &[u8]) -> Option<(&Blob, &Value)> {
        self.main.get_key_value(key)
    }

    /// True when `key` exists (ignoring expiry).
    pub fn contains(&self, key: &[u8]) -> bool {
        self.main.contains_key(key)
    }

    /// Absolute expiry time of `key` in Unix ms, if it has one.
    pub fn expire_at(&self, key: &[u8]) -> Option<i64> {
        self.expires.get(key).copied()
    }

    /// True when `key` has a TTL that has passed at `now_ms` (Redis: expired
    /// once the clock is strictly past the expiry time).
    pub fn is_expired(&self, key: &[u8], now_ms: i64) -> bool {
        matches!(self.expires.get(key), Some(&at) if at < now_ms)
    }

    /// Stores `value` under `key`, replacing any value. When `keep_ttl` is
    /// false any TTL is removed (SET semantics); when true it is kept.
    pub fn set(&mut self, key: &[u8], value: Value, keep_ttl: bool) {
        if self.capture.is_some() {
            self.capture_before_write(key);
        }
        match self.main.get_mut(key) {
            Some(slot) => *slot = value,
            None => {
                let mut key = Blob::new(key);
                key.set_access(self.new_access);
                self.main.insert_new(key, value);
            }
        }
        if !keep_ttl && !self.expires.is_empty() {
            self.expires.remove(key);
        }
    }

    /// Inserts a key known to be absent.
    pub fn insert_new(&mut self, key: &[u8], value: Value) -> &mut Value {
        if self.capture.is_some() {
            self.capture_before_write(key);
        }
        let mut key = Blob::new(key);
        key.set_access(self.new_access);
        self.main.insert_new(key, value)
    }

    /// Prefetch hints for a bulk load about to insert `key` (see
    /// [`Dict::prefetch_bucket`]): `near` false a few keys ahead (the
    /// bucket), true a step before (its first node).
    pub fn prefetch_for_insert(&self, key: &[u8], near: bool) {
        if near {
            self.main.prefetch_chain(key);
        } else {
            self.main.prefetch_bucket(key);
        }
    }

    /// Prefetch hints for a pipelined client's next requests, given each
    /// one's second, third and fourth arguments (its key, and for most
    /// collection commands the member or field; at most 16 requests).
    /// Every key's bucket first, then every bucket's first node, then that
    /// node's key and value blocks when they are on the heap, so the
    /// batch's cache misses overlap instead of each command waiting for
    /// its own. A key equal to the one before it is skipped. When the
    /// whole batch is on one key holding a hash table (a set or hash past
    /// its listpack or intset form), the third arguments are prefetched in
    /// that table the same way; for a sorted set's member table, the third
    /// and fourth (ZSCORE's member, ZADD's after its score).
    ///
    /// Returns false when the look-ahead had nothing to overlap: every
    /// request on one key that holds no member table (a list, a string, a
    /// small encoding, no key), a pattern the caller may stop looking for
    /// a while; true otherwise (and for fewer than two requests).
    pub fn prefetch_keys(&self, args: &[[&[u8]; 3]]) -> bool {
        let mut previous: Option<&[u8]> = None;
        let ttls = (!self.expires.is_empty()).then_some(&self.expires);
        let distinct = prefetch_in(
            &self.main,
            ttls,
            args.iter().map(|a| a[0]).filter(|&key| {
                let new = previous != Some(key);
                previous = Some(key);
                new
            }),
            |value: &Value| value.heap_ptr(),
        );
        if distinct != 1 || args.len() < 2 {
            return true;
        }
        let third = args.iter().map(|a| a[1]).filter(|m| !m.is_empty());
        match self.main.get(args[0][0]) {
            Some(Value::Set(set)) => {
                if let crate::types::Set::Table(table) = &**set {
                    prefetch_in(table, None::<&Dict<Blob, ()>>, third, |_: &()| None);
                    return true;
                }
            }
            Some(Value::Hash(hash)) => {
                if let crate::types::Hash::Table(table) = &**hash {
                    prefetch_in(table, None::<&Dict<Blob, ()>>, third, |value: &Blob| {
                        value.heap_ptr()
                    });
                    return true;
                }
            }
            Some(Value::ZSet(zset)) => {
                if let Some(table) = zset.member_table() {
                    let both = args
                        .iter()
                        .flat_map(|a| [a[1], a[2]])
                        .filter(|m| !m.is_empty());
                    prefetch_in(table, None::<&Dict<Blob, ()>>, both, |_: &f64| None);
                    return true;
                }
            }
            _ => {}
        }
        false
    }

    /// Inserts a loaded key with its optional absolute expiry and access
    /// field ([`KeyAccess::field`]; None: a new key's), unless the
    /// key is already present: then nothing changes and the key comes back
    /// as the error (a dump holding one key twice is damaged). One probe of
    /// each table, no key copy.
    pub fn insert_loaded(
        &mut self,
        mut key: Blob,
        value: Value,
        expire_ms: Option<i64>,
        access: Option<u32>,
    ) -> Result<(), Blob> {
        key.set_access(access.unwrap_or(self.new_access));
        if self.capture.is_some() {
            // A capture watches every write; the general path tells it.
            if self.main.contains_key(key.as_ref()) {
                return Err(key);
            }
            self.insert_new(&key, value);
            self.set_access(&key, key.access());
            if let Some(at) = expire_ms {
                self.set_expire(&key, at);
            }
            return Ok(());
        }
        match expire_ms {
            None => self
                .main
                .try_insert(key, value)
                .map(|_| ())
                .map_err(|(k, _)| k),
            Some(at) => {
                // The expiry table holds its own copy of the key, as
                // everywhere in `Db`.
                let ttl_key = key.clone();
                self.main.try_insert(key, value).map_err(|(k, _)| k)?;
                if let Some(slot) = self.expires.get_mut(ttl_key.as_ref()) {
                    *slot = at;
                } else {
                    self.expires.insert_new(ttl_key, at);
                }
                Ok(())
            }
        }
    }

    /// The access field of `key` (docs/memory.md), if present.
    pub fn access(&self, key: &[u8]) -> Option<u32> {
        self.main.get_key_value(key).map(|(k, _)| k.access())
    }

    /// Sets the access field of `key`; false when it is absent.
    pub fn set_access(&mut self, key: &[u8], value: u32) -> bool {
        self.update_access(key, |_| value)
    }

    /// Replaces the access field of `key` by `f` of it, in one probe;
    /// false when the key is absent. Not a change of the value: a running
    /// capture is not told.
    pub fn update_access(&mut self, key: &[u8], f: impl FnOnce(u32) -> u32) -> bool {
        match self.main.get_entry_mut(key) {
            Some((k, _)) => {
                let new = f(k.access());
                k.set_access(new);
                true
            }
            None => false,
        }
    }

    /// The value under `key` with its access field replaced by `f` of it
    /// (a read's lookup), in one probe. Not a change of the value.
    pub fn get_touching(&mut self, key: &[u8], f: impl FnOnce(u32) -> u32) -> Option<&Value> {
        let (k, v) = self.main.get_entry_mut(key)?;
        let new = f(k.access());
        k.set_access(new);
        Some(v)
    }

    /// The value under `key` mutably with its access field replaced by `f`
    /// of it (a write's lookup), in one probe.
    pub fn get_mut_touching(
        &mut self,
        key: &[u8],
        f: impl FnOnce(u32) -> u32,
    ) -> Option<&mut Value> {
        if self.capture.is_some() {
            self.capture_before_change(key);
        }
        let (k, v) = self.main.get_entry_mut(key)?;
        let new = f(k.access());
        k.set_access(new);
        Some(v)
    }

    /// Up to `count` keys sampled from the main table, or from the keys
    /// with a TTL when `volatile` (eviction's candidates), each with its
    /// access field and expiry.
    pub fn sample_for_eviction(
        &self,
        rng: &mut Rng,
        count: usize,
        volatile: bool,
    ) -> Vec<(Blob, u32, Option<i64>)> {
        let mut out = Vec::with_capacity(count);
        // A table no larger than the sample: every key (Redis's
        // dictGetSomeKeys returns them all then).
        if volatile && count >= self.expires.len() {
            for (k, &at) in self.expires.iter() {
                out.push((k.clone(), self.access(k).unwrap_or(0), Some(at)));
            }
            return out;
        }
        if !volatile && count >= self.main.len() {
            for (k, _) in self.main.iter() {
                out.push((k.clone(), k.access(), None));
            }
            return out;
        }
        // Neighbouring keys from a random position (Dict::sample_some):
        // a few sequential reads where uniform draws cost a cache miss
        // each, as Redis samples for its pool.
        if volatile {
            self.expires.sample_some(rng, count, |k, &at| {
                out.push((k.clone(), self.access(k).unwrap_or(0), Some(at)));
            });
        } else {
            self.main
                .sample_some(rng, count, |k, _| out.push((k.clone(), k.access(), None)));
        }
        out
    }

    /// One key drawn uniformly from the main table, or from the keys with
    /// a TTL when `volatile` (the random eviction policies' candidate).
    pub fn random_for_eviction(&self, rng: &mut Rng, volatile: bool) -> Option<Blob> {
        if volatile {
            self.expires.random(rng).map(|(k, _)| k.clone())
        } else {
            self.main.random(rng).map(|(k, _)| k.clone())
        }
    }

    /// Makes room for `keys` more keys, `expiring` of them with a TTL,
    /// without incremental resizes (bulk loading before serving).
    pub fn reserve(&mut self, keys: usize, expiring: usize) {
        self.main.reserve(keys);
        self.expires.reserve(expiring);
    }

    /// Removes `key` and its TTL, returning the value.
    pub fn remove(&mut self, key: &[u8]) -> Option<Value> {
        if self.capture.is_some() {
            self.capture_before_change(key);
        }
        let (_, value) = self.main.remove(key)?;
        if !self.expires.is_empty() {
            self.expires.remove(key);
        }
        Some(value)
    }

    /// Sets the absolute expiry of an existing key. Returns false when the
    /// key does not exist.
    pub fn set_expire(&mut self, key: &[u8], at_ms: i64) -> bool {
        if !self.main.contains_key(key) {
            return false;
        }
        if self.capture.is_some() {
            self.capture_before_change(key);
        }
        match self.expires.get_mut(key) {
            Some(slot) => *slot = at_ms,
            None => {
                self.expires.insert_new(Blob::new(key), at_ms);
            }
        }
        true
    }

    /// Removes the TTL of `key`; true when it had one.
    pub fn remove_expire(&mut self, key: &[u8]) -> bool {
        if self.capture.is_some() && self.expires.contains_key(key) {
            self.capture_before_change(key);
        }
        self.expires.remove(key).is_some()
    }

    /// Removes every key. A running capture keeps the removed records (it
    /// takes the old tables over, in O(1)) and still emits them.
    pub fn clear(&mut self) {
        if self.capture.is_some() {
            self.capture_retire();
        }
        self.main.clear();
        self.expires.clear();
    }

    /// Iterates over keys and values (including expired, not yet removed).
    pub fn iter(&self) -> impl Iterator<Item = (&Blob, &Value)> {
        self.main.iter()
    }

    /// The main table, for SCAN cursors.
    pub fn main(&self) -> &Dict<Blob, Value> {
        &self.main
    }

    /// A random key, uniform over the keys ([`Dict::random`]); possibly
    /// expired (the caller checks).
    pub fn random_key(&self, rng: &mut Rng) -> Option<&Blob> {
        self.main.random(rng).map(|(k, _)| k)
    }

    /// Every key whose TTL has passed at `now_ms` (a full walk of the keys
    /// with a TTL: for a load, not for serving).
    pub fn expired_keys(&self, now_ms: i64) -> Vec<Blob> {
        self.expires
            .iter()
            .filter(|(_, &at)| at < now_ms)
            .map(|(k, _)| k.clone())
            .collect()
    }

    /// Samples up to `samples` keys with a TTL and returns those expired at
    /// `now_ms` (not removed: the caller deletes and propagates them).
    pub fn sample_expired(&self, rng: &mut Rng, samples: usize, now_ms: i64) -> Vec<Blob> {
        let mut expired = Vec::new();
        let n = samples.min(self.expires.len());
        for _ in 0..n {
            if let Some((k, &at)) = self.expires.random(rng) {
                if at < now_ms && !expired.contains(k) {
                    expired.push(k.clone());
                }
            }
        }
        expired
    }

    /// Continues an incremental resize of the key tables for up to
    /// `budget` (Redis's active rehashing, run from cron).
    pub fn rehash_for(&mut self, budget: std::time::Duration) {
        if self.main.is_rehashing() {
            self.main.rehash_for(budget);
        }
        if self.expires.is_rehashing() {
            self.expires.rehash_for(budget);
        }
    }

    /// Swaps the contents of two databases (SWAPDB, FLUSH in place). A
    /// running capture's state moves with the contents, so each database's
    /// records are still reported under the index it had when the capture
    /// began.
    pub fn swap(&mut self, other: &mut Db) {
        std::mem::swap(self, other);
    }
}

/// All numbered databases (16 by default).
#[derive(Debug)]
pub struct Keyspace {
    dbs: Vec<Db>,
    /// The running point-in-time capture, if any.
    capture: Option<capture::KeyspaceCapture>,
    /// `rdb-key-save-delay`'s pace for captures ([`Keyspace::set_capture_key_delay`]).
    capture_pace: capture::Pace,
    /// The access fields follow an LFU policy ([`Keyspace::set_access_mode`]).
    lfu: bool,
}

impl Drop for Keyspace {
    fn drop(&mut self) {
        // Ends a running capture first, so the databases dropped next do
        // not hand their tables to it (a database taken out of the keyspace
        // and still alive would otherwise keep them all in memory).
        self.end_capture();
    }
}

impl Clone for Keyspace {
    /// A copy of the contents; a running capture does not follow the copy.
    fn clone(&self) -> Keyspace {
        Keyspace {
            dbs: self.dbs.clone(),
            capture: None,
            capture_pace: capture::Pace::default(),
            lfu: self.lfu,
        }
    }
}

impl Keyspace {
    /// `count` empty databases.
    pub fn new(count: usize) -> Keyspace {
        Keyspace {
            dbs: (0..count).map(|_| Db::new()).collect(),
            capture: None,
            capture_pace: capture::Pace::default(),
            lfu: false,
        }
    }

    /// The same keyspace with its access fields in the mode
    /// [`Keyspace::set_access_mode`] sets.
    pub fn with_access_mode(mut self, lfu: bool, now_ms: i64) -> Keyspace {
        self.set_access_mode(lfu, now_ms);
        self
    }

    /// Whether the access fields follow an LFU policy (else LRU), and the
    /// field new keys start with at `now_ms` ([`access::initial`]; the
    /// core refreshes it with its clock and on a change of policy).
    pub fn set_access_mode(&mut self, lfu: bool, now_ms: i64) {
        self.lfu = lfu;
        self.set_new_access(access::initial(lfu, now_ms));
    }

    /// The access field a key loaded from a file with the access record
    /// `record` gets now, in this keyspace's mode ([`KeyAccess::field`]:
    /// None when the record does not apply to the mode).
    pub fn loaded_access(&self, record: KeyAccess) -> Option<u32> {
        record.field(self.lfu, crate::clock::now_ms())
    }

    /// Number of databases.
    pub fn db_count(&self) -> usize {
        self.dbs.len()
    }

    /// Database `index` (must be < `db_count`).
    pub fn db(&self, index: usize) -> &Db {
        &self.dbs[index]
    }

    /// Database `index` mutably.
    pub fn db_mut(&mut self, index: usize) -> &mut Db {
        &mut self.dbs[index]
    }

    /// Two distinct databases mutably (MOVE, COPY … DB).
    pub fn two_dbs_mut(&mut self, a: usize, b: usize) -> (&mut Db, &mut Db) {
        assert_ne!(a, b, "two_dbs_mut needs two different databases");
        if a < b {
            let (lo, hi) = self.dbs.split_at_mut(b);
            (&mut lo[a], &mut hi[0])
        } else {
            let (lo, hi) = self.dbs.split_at_mut(a);
            (&mut hi[0], &mut lo[b])
        }
    }

    /// Iterates over the databases.
    pub fn iter(&self) -> impl Iterator<Item = &Db> {
        self.dbs.iter()
    }

    /// Removes every key of every database.
    pub fn clear(&mut self) {
        for db in &mut self.dbs {
            db.clear();
        }
    }

    /// Total number of keys.
    pub fn total_keys(&self) -> usize {
        self.dbs.iter().map(Db::len).sum()
    }

    /// Sets the access field keys created from now on start with
    /// ([`access::initial`]; the core refreshes it with its clock).
    pub fn set_new_access(&mut self, value: u32) {
        for db in &mut self.dbs {
            db.new_access = value;
        }
    }
}

#[cfg(test)]
mod prefetch_tests {
    use super::*;
    use crate::types::{List, Set};

    #[test]
    fn a_look_ahead_says_whether_it_had_anything_to_overlap() {
        let mut db = Db::new();
        db.set(
            b"queue",
            Value::List(Box::new(List::from_iter(["a", "b"]))),
            false,
        );
        db.set(b"counter", Value::Str(Blob::new(b"1")), false);
        let mut table = Set::for_member(b"x");
        table.convert_to_table();
        db.set(b"members", Value::Set(Box::new(table)), false);
        let on = |key: &'static [u8]| [[key, &b"m"[..], &b""[..]]; 16];
        // One key with nothing under it to prefetch: nothing to overlap.
        assert!(!db.prefetch_keys(&on(b"queue")));
        assert!(!db.prefetch_keys(&on(b"counter")));
        assert!(!db.prefetch_keys(&on(b"absent")));
        // One key holding a member table: its members are prefetched.
        assert!(db.prefetch_keys(&on(b"members")));
        // Several keys: their buckets are.
        let mut mixed = on(b"queue");
        mixed[7][0] = b"counter";
        assert!(db.prefetch_keys(&mixed));
        // A single request is never a reason to stop looking.
        assert!(db.prefetch_keys(&on(b"queue")[..1]));
    }
}
