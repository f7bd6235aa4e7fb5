//! A canonical form of values and keyspaces that ignores encodings and
//! insertion order, for the round-trip properties (decode → encode →
//! decode gives the same data).

use std::collections::BTreeMap;

use hozon::keyspace::Keyspace;
use hozon::persist::snapshot::LoadedKey;
use hozon::types::stream::StreamId;
use hozon::types::Value;

/// Every key: (db, key) → (expiry, canonical value).
pub type Canon = BTreeMap<(usize, Vec<u8>), (Option<i64>, Vec<u8>)>;

fn put_u64(out: &mut Vec<u8>, v: u64) {
    out.extend_from_slice(&v.to_le_bytes());
}

fn put_bytes(out: &mut Vec<u8>, b: &[u8]) {
    put_u64(out, b.len() as u64);
    out.extend_from_slice(b);
}

fn put_id(out: &mut Vec<u8>, id: StreamId) {
    put_u64(out, id.ms);
    put_u64(out, id.seq);
}

/// The value's canonical bytes: the type, then its elements in a fixed
/// order (list order, sorted fields and members, stream entries by ID).
/// A zset's -0 counts as 0 (a listpack stores -0 as 0); stream delivery
/// and consumer seen times are included.
pub fn value(v: &Value) -> Vec<u8> {
    value_with(v, Clock::Kept)
}

/// Which stream times set by the clock of the run a comparison keeps.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Clock {
    /// Every time (values that were loaded, not replayed).
    Kept,
    /// Not the consumers' seen times: a replayed XCLAIM, like a replica's
    /// in Redis, sets them to the time it runs.
    SeenMasked,
    /// Neither seen times nor PEL delivery times: a raw XREADGROUP in a
    /// file (not one hozon wrote: it logs XCLAIM … TIME) delivers at the
    /// time it is replayed, so two loads a millisecond apart differ.
    Masked,
}

/// [`value`], with the stream times `clock` says.
pub fn value_with(v: &Value, clock: Clock) -> Vec<u8> {
    let mut out = Vec::new();
    out.extend_from_slice(v.type_name().as_bytes());
    out.push(0);
    match v {
        Value::Str(s) => put_bytes(&mut out, s),
        Value::List(l) => {
            put_u64(&mut out, l.len() as u64);
            for item in l.iter() {
                put_bytes(&mut out, item);
            }
        }
        Value::Hash(h) => {
            let mut pairs: Vec<(&[u8], &[u8])> = h.iter().collect();
            pairs.sort_unstable();
            put_u64(&mut out, pairs.len() as u64);
            for (f, v) in pairs {
                put_bytes(&mut out, f);
                put_bytes(&mut out, v);
            }
        }
        Value::Set(s) => {
            let mut members: Vec<Vec<u8>> = s.iter().map(|m| m.to_vec()).collect();
            members.sort_unstable();
            put_u64(&mut out, members.len() as u64);
            for m in &members {
                put_bytes(&mut out, m);
            }
        }
        Value::ZSet(z) => {
            let mut members: Vec<(&[u8], u64)> =
                z.iter().map(|(m, s)| (m, (s + 0.0).to_bits())).collect();
            members.sort_unstable();
            put_u64(&mut out, members.len() as u64);
            for (m, bits) in members {
                put_bytes(&mut out, m);
                put_u64(&mut out, bits);
            }
        }
        Value::Stream(s) => {
            put_u64(&mut out, s.len() as u64);
            for (id, fields) in s.range(StreamId::MIN, StreamId::MAX, false) {
                put_id(&mut out, id);
                put_u64(&mut out, fields.len() as u64);
                for (f, v) in fields.iter() {
                    put_bytes(&mut out, f);
                    put_bytes(&mut out, v);
                }
            }
            put_id(&mut out, s.last_id);
            put_id(&mut out, s.first_id);
            put_id(&mut out, s.max_deleted_entry_id);
            put_u64(&mut out, s.entries_added);
            put_u64(&mut out, s.groups.len() as u64);
            for (name, g) in &s.groups {
                put_bytes(&mut out, name);
                put_id(&mut out, g.last_id);
                put_u64(&mut out, g.entries_read as u64);
                put_u64(&mut out, g.pel.len() as u64);
                for (id, p) in &g.pel {
                    put_id(&mut out, *id);
                    if clock != Clock::Masked {
                        put_u64(&mut out, p.delivery_time_ms as u64);
                    }
                    put_u64(&mut out, p.delivery_count);
                    put_bytes(&mut out, &p.consumer);
                }
                put_u64(&mut out, g.consumers.len() as u64);
                for (cname, c) in &g.consumers {
                    put_bytes(&mut out, cname);
                    if clock == Clock::Kept {
                        put_u64(&mut out, c.seen_time_ms as u64);
                    }
                    put_u64(&mut out, c.pel.len() as u64);
                }
            }
        }
    }
    out
}

/// The canonical form of loaded keys. A key seen twice keeps its first
/// value (what the repair tool keeps).
pub fn of_keys<'a>(keys: impl IntoIterator<Item = &'a LoadedKey>) -> Canon {
    let mut canon = Canon::new();
    for k in keys {
        canon
            .entry((k.db, k.key.to_vec()))
            .or_insert_with(|| (k.expire_ms, value(&k.value)));
    }
    canon
}

/// The canonical form of a keyspace (expired keys not yet removed
/// included).
pub fn of_keyspace(keyspace: &Keyspace) -> Canon {
    of_keyspace_with(keyspace, Clock::Kept)
}

/// [`of_keyspace`], with the stream times `clock` says.
pub fn of_keyspace_with(keyspace: &Keyspace, clock: Clock) -> Canon {
    let mut canon = Canon::new();
    for index in 0..keyspace.db_count() {
        let db = keyspace.db(index);
        for (key, v) in db.iter() {
            canon.insert(
                (index, key.to_vec()),
                (db.expire_at(key), value_with(v, clock)),
            );
        }
    }
    canon
}

/// Panics with the first difference when `a` and `b` differ.
pub fn assert_same(what: &str, a: &Canon, b: &Canon) {
    if a == b {
        return;
    }
    for (k, va) in a {
        match b.get(k) {
            None => panic!(
                "{what}: key db {} {:?} is only in the first",
                k.0,
                show(&k.1)
            ),
            Some(vb) if vb != va => panic!(
                "{what}: key db {} {:?} differs: {:?} vs {:?}",
                k.0,
                show(&k.1),
                va,
                vb
            ),
            Some(_) => {}
        }
    }
    let extra = b.keys().find(|k| !a.contains_key(*k));
    panic!("{what}: key {extra:?} is only in the second");
}

/// A key as text for messages.
pub fn show(key: &[u8]) -> String {
    String::from_utf8_lossy(&key[..key.len().min(64)]).into_owned()
}

/// `canon` with every expiry time replaced by 0 (expiring or not is
/// kept): for loads of a log whose relative TTLs (`EXPIRE k 10`, `SET …
/// PX`) are resolved against the clock at each load.
pub fn expiry_times_masked(canon: &Canon) -> Canon {
    canon
        .iter()
        .map(|(k, (expire, v))| (k.clone(), (expire.map(|_| 0), v.clone())))
        .collect()
}
