//! DEBUG DIGEST and DEBUG DIGEST-VALUE: Redis 7.0's dataset signature
//! (debug.c `computeDatasetDigest`, `xorObjectDigest`), computed from the
//! values' logical contents the way Redis computes it, so the same data
//! gives the same 40 hex digits in hozon and in redis-server.
//!
//! - Unordered things (keys, set members, hash fields, sorted-set
//!   members) are combined with xor of their SHA1s ([`xor`]).
//! - Ordered things (a list's elements, a stream's entries, the parts of
//!   one key's digest) are chained: `d = SHA1(d xor SHA1(data))`
//!   ([`mix`]).
//! - A key's digest is `mix(key)`, `mix(type as a big-endian u32)`, the
//!   value, and `xor("!!expire!!")` when it has a TTL; the dataset's is
//!   the `xor` of its keys' digests (each goes through SHA1 again), each
//!   database first mixing its index. A sorted-set member's or a hash
//!   field's digest is `mix`ed from its two parts, then `xor`ed in.
//!   Keys already expired but not yet deleted count, as in Redis (it
//!   walks the main dictionary).

use crate::keyspace::Db;
use crate::types::set::Member;
use crate::types::Value;

/// A 20-byte SHA1 digest.
pub(super) type Digest = [u8; 20];

fn sha1(data: &[u8]) -> Digest {
    sha1_smol::Sha1::from(data).digest().bytes()
}

/// `digest ^= SHA1(data)` (Redis's `xorDigest`).
fn xor(digest: &mut Digest, data: &[u8]) {
    for (d, h) in digest.iter_mut().zip(sha1(data)) {
        *d ^= h;
    }
}

/// `digest = SHA1(digest ^ SHA1(data))` (Redis's `mixDigest`).
fn mix(digest: &mut Digest, data: &[u8]) {
    xor(digest, data);
    *digest = sha1(digest);
}

/// Redis's object type numbers (`OBJ_STRING` …), mixed into each key.
fn type_code(value: &Value) -> u32 {
    match value {
        Value::Str(_) => 0,
        Value::List(_) => 1,
        Value::Set(_) => 2,
        Value::ZSet(_) => 3,
        Value::Hash(_) => 4,
        Value::Stream(_) => 6,
    }
}

/// Mixes `value` (and the TTL marker) into `digest` (`xorObjectDigest`).
fn object_digest(digest: &mut Digest, value: &Value, has_expire: bool) {
    mix(digest, &type_code(value).to_be_bytes());
    match value {
        Value::Str(s) => mix(digest, s),
        Value::List(list) => {
            for element in list.iter() {
                mix(digest, element);
            }
        }
        Value::Set(set) => {
            for member in set.iter() {
                match member {
                    Member::Int(_) => xor(digest, &member.to_vec()),
                    Member::Bytes(bytes) => xor(digest, bytes),
                }
            }
        }
        Value::ZSet(zset) => {
            for (member, score) in zset.iter() {
                let mut element = [0u8; 20];
                mix(&mut element, member);
                mix(
                    &mut element,
                    crate::types::num::format_g17(score).as_bytes(),
                );
                xor(digest, &element);
            }
        }
        Value::Hash(hash) => {
            for (field, val) in hash.iter() {
                let mut element = [0u8; 20];
                mix(&mut element, field);
                mix(&mut element, val);
                xor(digest, &element);
            }
        }
        Value::Stream(stream) => {
            use crate::types::stream::StreamId;
            for (id, fields) in stream.range(StreamId::MIN, StreamId::MAX, false) {
                mix(digest, format!("{}.{}", id.ms, id.seq).as_bytes());
                for (field, val) in fields.iter() {
                    mix(digest, field);
                    mix(digest, val);
                }
            }
        }
    }
    if has_expire {
        xor(digest, b"!!expire!!");
    }
}

/// The digest of one key and its value (zero when absent).
pub(super) fn key_digest(db: &Db, key: &[u8]) -> Digest {
    let mut digest = [0u8; 20];
    if let Some(value) = db.get(key) {
        object_digest(&mut digest, value, db.expire_at(key).is_some());
    }
    digest
}

/// The digest of every database (`computeDatasetDigest`).
pub(super) fn dataset_digest<'a>(dbs: impl Iterator<Item = &'a Db>) -> Digest {
    let mut out = [0u8; 20];
    for (index, db) in dbs.enumerate() {
        if db.is_empty() {
            continue;
        }
        mix(&mut out, &(index as u32).to_be_bytes());
        for (key, value) in db.iter() {
            let mut digest = [0u8; 20];
            mix(&mut digest, key);
            object_digest(&mut digest, value, db.expire_at(key).is_some());
            xor(&mut out, &digest);
        }
    }
    out
}

/// Lowercase hex, as Redis prints digests.
pub(super) fn hex(digest: &Digest) -> String {
    digest.iter().map(|b| format!("{b:02x}")).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn empty_dataset_is_forty_zeros() {
        let db = Db::new();
        assert_eq!(hex(&dataset_digest([&db].into_iter())), "0".repeat(40));
    }

    #[test]
    fn set_order_does_not_matter_but_list_order_does() {
        let mut a = Db::new();
        let mut b = Db::new();
        a.set(b"k", Value::Str(b"v".as_slice().into()), false);
        a.set(b"j", Value::Str(b"w".as_slice().into()), false);
        b.set(b"j", Value::Str(b"w".as_slice().into()), false);
        b.set(b"k", Value::Str(b"v".as_slice().into()), false);
        let da = dataset_digest([&a].into_iter());
        assert_eq!(da, dataset_digest([&b].into_iter()));
        assert_ne!(da, [0u8; 20]);
        // A TTL changes the key's digest.
        a.set_expire(b"k", i64::MAX / 2);
        assert_ne!(key_digest(&a, b"k"), key_digest(&b, b"k"));
    }
}
