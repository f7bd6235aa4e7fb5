use super::builder::{BlockBuilder, RawBlock};
use super::decode::{
    decode_block, decode_records, finish_stream, Builder, Item, PartRecord, Region, StreamElem,
};
use super::encode::le_u32;
use super::error::SnapshotError;
use super::format::Part;
use super::format::{
    ValueType, BLOCK_HEADER_LEN, BLOCK_MAGIC, BLOCK_TARGET_BYTES, KIND_EXPIRE, MAGIC,
    MIN_STRING_CHUNK, TAG_HASH, TAG_SET_STRINGS, TAG_STRING, TAG_ZSET, TRAILER_LEN,
};
use super::header::{check_index, decode_footer, read_summary};
use super::load::{load, load_into, Loaded};
use super::options::ReadOptions;
use super::salvage::{load_salvaging, readable_keys, salvage_streaming, Damage};
use super::scan::{elements_of, scan_keys};
use super::stats::{DbStats, HeaderInfo, Stats, Summary};
use super::stitch::{place_part, PartStep, Place, SplitHead, Stitcher};
use super::writer::{save_keyspace, save_keyspace_with_block_size, verify_compressed, FileWriter};
use crate::keyspace::Keyspace;
use crate::types::hash::Hash;
use crate::types::list::{End, List};
use crate::types::num::parse_i64;
use crate::types::set::Set;
use crate::types::stream::{Consumer, ConsumerGroup, Fields, PendingEntry, Stream, StreamId};
use crate::types::zset::ZSet;
use crate::types::{Blob, EncodingLimits, Value};
use std::collections::BTreeMap;
use std::ops::ControlFlow;
use std::path::Path;
use std::sync::Arc;

mod access;
mod damage;
mod position;
mod round_trips;
mod writing;

use crate::persist::io::{Fault, FaultyIo, Io, RealIo};

#[test]
fn the_writers_block_check_refuses_a_payload_that_does_not_decompress_to_its_records() {
    let raw: Vec<u8> = (0..20_000u32)
        .flat_map(|i| (i % 251).to_le_bytes())
        .collect();
    let payload = lz4_flex::block::compress(&raw);
    let mut scratch = Vec::new();
    assert!(verify_compressed(&payload, &raw, &mut scratch));
    let mut other = raw.clone();
    other[7_777] ^= 0x40;
    assert!(
        !verify_compressed(&payload, &other, &mut scratch),
        "other records"
    );
    assert!(
        !verify_compressed(&payload, &raw[..raw.len() - 1], &mut scratch),
        "shorter"
    );
    let mut longer = raw.clone();
    longer.push(0);
    assert!(
        !verify_compressed(&payload, &longer, &mut scratch),
        "longer"
    );
    let mut broken = payload.clone();
    let mid = broken.len() / 2;
    broken[mid] ^= 0xff;
    broken.truncate(broken.len() - 3);
    assert!(
        !verify_compressed(&broken, &raw, &mut scratch),
        "damaged payload"
    );
}
use crate::rand::Rng;
use crate::types::stream::ENTRIES_READ_INVALID;
use crate::types::zset::AddFlags;
use quickcheck::{QuickCheck, TestResult};

const NOW_MS: i64 = 1_700_000_000_000;

// -- Comparing keyspaces ------------------------------------------------

/// A value in a comparable form, with its encoding. Hash-table
/// collections are compared sorted; compact ones in order.
#[derive(Debug, Clone, PartialEq)]
enum Canon {
    Str(Vec<u8>),
    List(Vec<Vec<u8>>),
    Hash(&'static str, Vec<(Vec<u8>, Vec<u8>)>),
    Set(&'static str, Vec<Vec<u8>>),
    ZSet(&'static str, Vec<(Vec<u8>, u64)>),
    Stream(Box<CanonStream>),
}

type CanonGroup = (
    Vec<u8>,
    StreamId,
    i64,
    Vec<(StreamId, i64, u64, Vec<u8>)>,
    Vec<(Vec<u8>, i64, Vec<StreamId>)>,
);

type CanonEntry = (StreamId, Vec<(Vec<u8>, Vec<u8>)>);

/// A node's master ID, last ID, live and deleted counts, body bytes
/// and master fields.
type CanonNode = (StreamId, StreamId, u64, u64, u64, Vec<Vec<u8>>);

#[derive(Debug, Clone, PartialEq)]
struct CanonStream {
    nodes: Vec<CanonNode>,
    entries: Vec<CanonEntry>,
    last_id: StreamId,
    first_id: StreamId,
    max_deleted: StreamId,
    entries_added: u64,
    groups: Vec<CanonGroup>,
}

fn canon(v: &Value) -> Canon {
    match v {
        Value::Str(s) => Canon::Str(s.to_vec()),
        Value::List(l) => Canon::List(l.iter().map(<[u8]>::to_vec).collect()),
        Value::Hash(h) => {
            let mut pairs: Vec<_> = h.iter().map(|(f, v)| (f.to_vec(), v.to_vec())).collect();
            if h.encoding() != "listpack" {
                pairs.sort();
            }
            Canon::Hash(h.encoding(), pairs)
        }
        Value::Set(s) => {
            let mut m: Vec<_> = s.iter().map(|m| m.to_vec()).collect();
            if s.encoding() != "intset" {
                m.sort();
            }
            Canon::Set(s.encoding(), m)
        }
        Value::ZSet(z) => Canon::ZSet(
            z.encoding(),
            z.iter().map(|(m, s)| (m.to_vec(), s.to_bits())).collect(),
        ),
        Value::Stream(s) => Canon::Stream(Box::new(CanonStream {
            nodes: s
                .node_layouts()
                .map(|n| {
                    (
                        n.master_id,
                        n.last_id,
                        n.live,
                        n.deleted,
                        n.body_bytes,
                        n.master_fields.iter().map(|f| f.to_vec()).collect(),
                    )
                })
                .collect(),
            entries: s
                .range(StreamId::MIN, StreamId::MAX, false)
                .map(|(id, f)| {
                    (
                        id,
                        f.iter().map(|(a, b)| (a.to_vec(), b.to_vec())).collect(),
                    )
                })
                .collect(),
            last_id: s.last_id,
            first_id: s.first_id,
            max_deleted: s.max_deleted_entry_id,
            entries_added: s.entries_added,
            groups: s
                .groups
                .iter()
                .map(|(name, g)| {
                    (
                        name.to_vec(),
                        g.last_id,
                        g.entries_read,
                        g.pel
                            .iter()
                            .map(|(id, p)| {
                                (
                                    *id,
                                    p.delivery_time_ms,
                                    p.delivery_count,
                                    p.consumer.to_vec(),
                                )
                            })
                            .collect(),
                        g.consumers
                            .iter()
                            .map(|(n, c)| {
                                (n.to_vec(), c.seen_time_ms, c.pel.iter().copied().collect())
                            })
                            .collect(),
                    )
                })
                .collect(),
        })),
    }
}

/// A value, its encoding and its expiry.
type DumpValue = (Canon, &'static str, Option<i64>);

type Dump = BTreeMap<(usize, Vec<u8>), DumpValue>;

/// Every live key at `now_ms` with its value, encoding and expiry
/// (`i64::MIN`: every key, as a save writes them).
fn dump(ks: &Keyspace, now_ms: i64) -> Dump {
    let mut out = BTreeMap::new();
    for i in 0..ks.db_count() {
        let db = ks.db(i);
        for (k, v) in db.iter() {
            let at = db.expire_at(k);
            if matches!(at, Some(t) if t < now_ms) {
                continue;
            }
            out.insert((i, k.to_vec()), (canon(v), v.encoding(), at));
        }
    }
    out
}

fn dump_loaded(loaded: &Loaded) -> Dump {
    loaded
        .keys()
        .map(|k| {
            (
                (k.db, k.key.to_vec()),
                (canon(&k.value), k.value.encoding(), k.expire_ms),
            )
        })
        .collect()
}

// -- What a load must give ------------------------------------------------

/// The encoding the loader must pick for a hash of `pairs` (see
/// "Rebuilding values" in docs/snapshot-format.md): decided by the
/// contents and the loading limits, not by the saved encoding.
fn loaded_hash_encoding(pairs: &[(Vec<u8>, Vec<u8>)], l: &EncodingLimits) -> &'static str {
    let compact = pairs.len() <= l.hash_max_listpack_entries
        && pairs.iter().all(|(f, v)| {
            f.len() <= l.hash_max_listpack_value && v.len() <= l.hash_max_listpack_value
        });
    if compact {
        "listpack"
    } else {
        "hashtable"
    }
}

fn loaded_set_encoding(members: &[Vec<u8>], l: &EncodingLimits) -> &'static str {
    if members.len() <= l.set_max_intset_entries && members.iter().all(|m| parse_i64(m).is_some()) {
        "intset"
    } else {
        "hashtable"
    }
}

fn loaded_zset_encoding(entries: &[(Vec<u8>, u64)], l: &EncodingLimits) -> &'static str {
    if entries.len() <= l.zset_max_listpack_entries
        && entries
            .iter()
            .all(|(m, _)| m.len() <= l.zset_max_listpack_value)
    {
        "listpack"
    } else {
        "skiplist"
    }
}

fn sorted<T: Ord + Clone>(items: &[T]) -> Vec<T> {
    let mut v = items.to_vec();
    v.sort();
    v
}

/// Checks that `got` is what loading the saved value `saved` must give
/// with limits `l`. Contents, scores (bits), stream state and expiry
/// must be equal. The encoding must be the one the loader promises for
/// the contents, which differs from the saved one for a collection that
/// was converted and then shrank (it comes back compact, as after
/// Redis's DEBUG RELOAD). Order is checked only where it is defined on
/// both sides: a listpack hash saved as a listpack keeps its order, an
/// intset and a sorted set are ordered by value; a hash table's order is
/// not, so a hash or set converted either way is compared sorted.
fn check_value(saved: &DumpValue, got: &DumpValue, l: &EncodingLimits) -> Result<(), String> {
    let ((saved_value, saved_enc, saved_ttl), (got_value, got_enc, got_ttl)) = (saved, got);
    if saved_ttl != got_ttl {
        return Err(format!("expiry {saved_ttl:?} came back as {got_ttl:?}"));
    }
    let want_enc = match (saved_value, got_value) {
        (Canon::Hash(se, sp), Canon::Hash(ge, gp)) => {
            let same = if *se == "listpack" && *ge == "listpack" {
                sp == gp
            } else {
                sorted(sp) == sorted(gp)
            };
            if !same {
                return Err(format!("hash {sp:?} came back as {gp:?}"));
            }
            loaded_hash_encoding(sp, l)
        }
        (Canon::Set(se, sm), Canon::Set(ge, gm)) => {
            let same = if se == ge {
                sm == gm
            } else {
                sorted(sm) == sorted(gm)
            };
            if !same {
                return Err(format!("set {sm:?} came back as {gm:?}"));
            }
            loaded_set_encoding(sm, l)
        }
        (Canon::ZSet(_, sz), Canon::ZSet(_, gz)) => {
            let enc = loaded_zset_encoding(sz, l);
            // A listpack stores -0 as 0, as Redis does; the skiplist
            // keeps the score as given.
            let neg_zero = (-0.0f64).to_bits();
            let want: Vec<_> = sz
                .iter()
                .map(|(m, bits)| match enc {
                    "listpack" if *bits == neg_zero => (m.clone(), 0f64.to_bits()),
                    _ => (m.clone(), *bits),
                })
                .collect();
            if want != *gz {
                return Err(format!("sorted set {want:?} came back as {gz:?}"));
            }
            enc
        }
        _ => {
            if saved_value != got_value {
                return Err(format!("{saved_value:?} came back as {got_value:?}"));
            }
            saved_enc
        }
    };
    let value_enc = match got_value {
        Canon::Hash(e, _) | Canon::Set(e, _) | Canon::ZSet(e, _) => *e,
        _ => got_enc,
    };
    if *got_enc != want_enc || value_enc != want_enc {
        return Err(format!(
            "encoding {saved_enc} came back as {got_enc}, the loader promises {want_enc}"
        ));
    }
    Ok(())
}

/// Checks that `got` holds exactly the keys of `saved`, each as
/// [`check_value`] requires; names the first difference.
fn compare_loaded(saved: &Dump, got: &Dump, l: &EncodingLimits) -> Result<(), String> {
    for (k, v) in saved {
        let Some(g) = got.get(k) else {
            return Err(format!("key {k:?} lost"));
        };
        check_value(v, g, l).map_err(|e| format!("key {k:?}: {e}"))?;
    }
    match got.keys().find(|k| !saved.contains_key(*k)) {
        Some(k) => Err(format!("key {k:?} loaded but not saved")),
        None => Ok(()),
    }
}

fn assert_loads_as(saved: &Dump, got: &Dump, l: &EncodingLimits, context: &str) {
    if let Err(e) = compare_loaded(saved, got, l) {
        panic!("{context}: {e}");
    }
}

// -- Random keyspaces ---------------------------------------------------

fn bytes(rng: &mut Rng, max_len: usize) -> Vec<u8> {
    let len = match rng.below(8) {
        0 => 0,
        1 => max_len,
        _ => rng.index(max_len + 1),
    };
    (0..len).map(|_| rng.below(256) as u8).collect()
}

fn element(rng: &mut Rng, long: bool) -> Vec<u8> {
    match rng.below(4) {
        0 => (rng.below(2000) as i64 - 1000).to_string().into_bytes(),
        1 if long => bytes(rng, 100),
        _ => format!("e{}", rng.below(5000)).into_bytes(),
    }
}

fn score(rng: &mut Rng) -> f64 {
    match rng.below(8) {
        0 => -0.0,
        1 => f64::INFINITY,
        2 => f64::NEG_INFINITY,
        3 => (rng.below(100) as f64) / 7.0,
        _ => rng.below(50) as f64 - 25.0,
    }
}

fn size(rng: &mut Rng) -> usize {
    match rng.below(6) {
        0 => 1,
        1 => 100 + rng.index(100),
        2 => 400 + rng.index(300), // across the 512 thresholds
        _ => 1 + rng.index(20),
    }
}

fn random_stream(rng: &mut Rng) -> Stream {
    let mut s = Stream::new();
    let mut ms = 1 + rng.below(1000);
    let n = if rng.below(5) == 0 { 0 } else { size(rng) };
    let shared: Vec<Vec<u8>> = (0..3).map(|i| format!("f{i}").into_bytes()).collect();
    let mut ids = Vec::new();
    // Small nodes now and then, so that streams have many nodes and
    // trimming leaves nodes of tombstones only.
    let limits = crate::types::stream::NodeLimits {
        max_entries: if rng.below(2) == 0 {
            1 + rng.below(4)
        } else {
            100
        },
        max_bytes: 4096,
    };
    for _ in 0..n {
        ms += rng.below(3);
        let seq = if rng.below(2) == 0 { 0 } else { rng.below(4) };
        let id = s
            .next_id(Some(StreamId::new(ms, seq)), true, 0)
            .unwrap_or_else(|| s.last_id.next().expect("small IDs"));
        let nf = 1 + rng.index(3);
        let same = rng.below(3) != 0;
        let fields: Fields = (0..nf)
            .map(|i| {
                let f = if same {
                    shared[i].clone()
                } else {
                    element(rng, true)
                };
                (Blob::from(f), Blob::from(bytes(rng, 30)))
            })
            .collect();
        s.append_with_limits(id, fields, limits);
        ids.push(id);
    }
    // Deletions and trimming (which leave dangling pending entries).
    for id in &ids {
        if rng.below(6) == 0 {
            s.remove(*id);
        }
    }
    if rng.below(4) == 0 && !ids.is_empty() {
        s.trim(
            crate::types::stream::TrimStrategy::MaxLen(rng.below(ids.len() as u64)),
            false,
            0,
        );
    }
    for g in 0..rng.below(4) {
        let mut group = ConsumerGroup {
            last_id: s.last_id,
            entries_read: if rng.below(3) == 0 {
                ENTRIES_READ_INVALID
            } else {
                rng.below(100) as i64
            },
            ..ConsumerGroup::default()
        };
        let consumers: Vec<Blob> = (0..rng.below(4))
            .map(|c| Blob::from(format!("c{c}").as_bytes()))
            .collect();
        for c in &consumers {
            group.consumers.insert(
                c.clone(),
                Consumer {
                    seen_time_ms: NOW_MS - rng.below(10_000) as i64,
                    ..Consumer::default()
                },
            );
        }
        if !consumers.is_empty() {
            for id in &ids {
                if rng.below(2) == 0 {
                    let c = consumers[rng.index(consumers.len())].clone();
                    group
                        .consumers
                        .get_mut(&c)
                        .expect("inserted above")
                        .pel
                        .insert(*id);
                    group.pel.insert(
                        *id,
                        PendingEntry {
                            delivery_time_ms: NOW_MS - rng.below(100_000) as i64,
                            delivery_count: 1 + rng.below(5),
                            consumer: c,
                        },
                    );
                }
            }
        }
        let name = if g == 0 {
            Blob::empty()
        } else {
            Blob::from(bytes(rng, 10))
        };
        s.groups.insert(name, group);
    }
    if rng.below(3) == 0 {
        s.entries_added += rng.below(10);
        s.max_deleted_entry_id = StreamId::new(ms, 7);
    }
    s
}

fn random_value(rng: &mut Rng, limits: &EncodingLimits) -> Value {
    match rng.below(7) {
        0 | 1 => {
            let s = match rng.below(4) {
                0 => (rng.next_u64() as i64).to_string().into_bytes(),
                1 => bytes(rng, 3000),
                _ => bytes(rng, 50),
            };
            Value::Str(Blob::from(s))
        }
        2 => {
            let n = size(rng);
            Value::List(Box::new((0..n).map(|_| bytes(rng, 40)).collect()))
        }
        3 => {
            let mut h = Hash::new();
            let long = rng.below(4) == 0;
            for _ in 0..size(rng) {
                let v = if long && rng.below(50) == 0 {
                    bytes(rng, 100)
                } else {
                    bytes(rng, 20)
                };
                h.set(&element(rng, false), Blob::from(v), limits);
            }
            Value::Hash(Box::new(h))
        }
        4 => {
            let ints = rng.below(2) == 0;
            let first = element(rng, false);
            let mut s = Set::for_member(&first);
            s.insert(&first, limits.set_max_intset_entries);
            for _ in 0..size(rng) {
                let m = if ints {
                    (rng.next_u64() as i64 >> rng.below(60))
                        .to_string()
                        .into_bytes()
                } else {
                    element(rng, true)
                };
                s.insert(&m, limits.set_max_intset_entries);
            }
            Value::Set(Box::new(s))
        }
        5 => {
            let long = rng.below(3) == 0;
            let first = element(rng, long);
            let mut z = ZSet::for_first_member(first.len(), limits);
            z.add(&first, score(rng), AddFlags::default(), limits)
                .expect("not NaN");
            for _ in 0..size(rng) {
                z.add(&element(rng, long), score(rng), AddFlags::default(), limits)
                    .expect("not NaN");
            }
            Value::ZSet(Box::new(z))
        }
        _ => Value::Stream(Box::new(random_stream(rng))),
    }
}

fn random_keyspace(seed: u64, keys: usize) -> Keyspace {
    let limits = EncodingLimits::default();
    let mut rng = Rng::with_seed(seed);
    let mut ks = Keyspace::new(16);
    for _ in 0..keys {
        let db = match rng.below(4) {
            0 => rng.index(16),
            _ => 0,
        };
        let key = bytes(&mut rng, 30);
        if ks.db(db).contains(&key) {
            continue;
        }
        let value = random_value(&mut rng, &limits);
        ks.db_mut(db).insert_new(&key, value);
        match rng.below(5) {
            0 => {
                ks.db_mut(db)
                    .set_expire(&key, NOW_MS + 1 + rng.below(1_000_000) as i64);
            }
            1 => {
                // Already expired: saved (as Redis 7.0 saves such keys),
                // skipped at load.
                ks.db_mut(db).set_expire(&key, NOW_MS - 1);
            }
            _ => {}
        }
    }
    ks
}

/// The one rule for where a split value's parts lie, which the stitcher
/// and `scan_keys` both apply.
#[test]
fn split_parts_follow_one_rule() {
    let part = |part, key: &[u8]| PartRecord {
        part,
        db: 0,
        key: Blob::new(key),
        expire_ms: None,
        access: None,
        builder: Builder::Str(vec![1]),
    };
    let at = |seq, index, records| Place {
        seq,
        index,
        records,
    };
    let first = part(Part::First, b"k");
    // A first part is its block's last record.
    assert_eq!(place_part(None, at(0, 2, 3), &first), Ok(PartStep::Opens));
    assert!(place_part(None, at(0, 1, 3), &first).is_err());
    // A middle part is the next block's only record, a last part its
    // first, of the same key and type.
    let head = SplitHead::new(at(0, 2, 3), 0, Blob::new(b"k"), TAG_STRING);
    let middle = part(Part::Middle, b"k");
    let last = part(Part::Last, b"k");
    let open = Some(&head);
    assert_eq!(
        place_part(open, at(1, 0, 1), &middle),
        Ok(PartStep::Continues)
    );
    assert!(place_part(open, at(1, 0, 2), &middle).is_err());
    assert_eq!(
        place_part(open, at(1, 0, 5), &last),
        Ok(PartStep::Completes)
    );
    assert!(place_part(open, at(1, 1, 5), &last).is_err());
    assert!(place_part(open, at(2, 0, 5), &last).is_err());
    assert!(place_part(open, at(1, 0, 5), &part(Part::Last, b"other")).is_err());
    let mut list = part(Part::Last, b"k");
    list.builder = Builder::List(List::new());
    assert!(place_part(open, at(1, 0, 5), &list).is_err());
    assert!(place_part(None, at(1, 0, 5), &last).is_err());
}

// -- Helpers ------------------------------------------------------------

fn save_mem(ks: &Keyspace, block_bytes: usize) -> (FaultyIo, Vec<u8>, Summary) {
    let io = FaultyIo::new();
    let summary = save_keyspace_with_block_size(
        ks,
        NOW_MS,
        Arc::new(io.clone()),
        Path::new("/d"),
        "dump.hoz",
        block_bytes,
    )
    .expect("save");
    let data = io.contents(Path::new("/d/dump.hoz")).expect("file exists");
    (io, data, summary)
}

fn limits() -> EncodingLimits {
    EncodingLimits::default()
}

/// Read options: `workers` decoding threads besides the caller.
fn read(workers: usize, limits: EncodingLimits, now_ms: i64) -> ReadOptions {
    ReadOptions {
        workers,
        limits,
        now_ms,
    }
}

fn round_trip_seed(seed: u64, keys: usize, block_bytes: usize) -> TestResult {
    let ks = random_keyspace(seed, keys);
    let expected = dump(&ks, NOW_MS);
    let saved = dump(&ks, i64::MIN).len();
    let (_, data, summary) = save_mem(&ks, block_bytes);
    assert_eq!(summary.stats.keys, saved as u64);
    let loaded = load(&data, &read(3, limits(), NOW_MS)).expect("load");
    assert_eq!(loaded.expired_skipped, (saved - expected.len()) as u64);
    let context = format!("seed {seed}");
    assert_loads_as(&expected, &dump_loaded(&loaded), &limits(), &context);
    let mut ks2 = Keyspace::new(16);
    loaded.into_keyspace(&mut ks2).expect("insert");
    assert_loads_as(&expected, &dump(&ks2, NOW_MS), &limits(), &context);
    check_scan_keys(&data, &summary, &context);
    TestResult::passed()
}

/// `scan_keys` sees what `load` loads (expired keys included), in the
/// same order, with the records' bytes adding up to the blocks'.
fn check_scan_keys(data: &[u8], summary: &Summary, context: &str) {
    let all = load(data, &read(2, limits(), i64::MIN)).expect("load");
    let want: Vec<_> = all
        .keys()
        .map(|k| {
            let t = ValueType::of_value(&k.value);
            (k.db, k.key.clone(), t, elements_of(&k.value), k.expire_ms)
        })
        .collect();
    for workers in [0, 2] {
        let mut got = Vec::new();
        let mut bytes = 0;
        let scanned = scan_keys(data, &read(workers, limits(), i64::MIN), &mut |k| {
            bytes += k.bytes;
            if k.parts == 1 {
                let loaded = all.keys().nth(got.len()).expect("as many keys");
                assert_eq!(k.encoding, loaded.value.encoding(), "{context}");
            }
            got.push((k.db, k.key.clone(), k.value_type, k.elements, k.expire_ms));
            ControlFlow::Continue(())
        })
        .expect("scan");
        assert_eq!(&scanned, summary, "{context}");
        assert_eq!(got, want, "{context}, {workers} workers");
        let raw: u64 = summary.blocks.iter().map(|b| b.raw_len).sum();
        assert_eq!(bytes, raw, "{context}");
    }
    // With a time, scan_keys leaves out the keys load leaves out (whole
    // or split), and still counts them against the footer.
    let mut expiries: Vec<i64> = all.keys().filter_map(|k| k.expire_ms).collect();
    expiries.sort_unstable();
    if let Some(&middle) = expiries.get(expiries.len() / 2) {
        let at = middle + 1;
        let live = load(data, &read(0, limits(), at)).expect("load");
        let want: Vec<_> = live.keys().map(|k| (k.db, k.key.clone())).collect();
        let mut got = Vec::new();
        scan_keys(data, &read(1, limits(), at), &mut |k| {
            got.push((k.db, k.key.clone()));
            ControlFlow::Continue(())
        })
        .expect("scan at a time");
        assert_eq!(got, want, "{context}, at {at}");
    }
    // Damage is found as load finds it.
    let mut bad = data.to_vec();
    if let Some(b) = summary.blocks.first() {
        bad[b.offset as usize + BLOCK_HEADER_LEN] ^= 0x40;
        let options = read(1, limits(), i64::MIN);
        assert!(scan_keys(&bad, &options, &mut |_| ControlFlow::Continue(())).is_err());
    }
}
