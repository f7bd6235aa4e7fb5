//! The model: what each client's keys hold after its acknowledged writes,
//! and an interpreter of the commands the workload sends that gives both
//! the new state and the exact RESP2 reply.

use std::collections::{BTreeMap, BTreeSet, VecDeque};

use crate::resp::V;

/// A value of one key.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Val {
    /// A string.
    Str(Vec<u8>),
    /// A list, head first.
    List(VecDeque<Vec<u8>>),
    /// A hash.
    Hash(BTreeMap<Vec<u8>, Vec<u8>>),
    /// A set.
    Set(BTreeSet<Vec<u8>>),
    /// A sorted set with integer scores.
    Zset(BTreeMap<Vec<u8>, i64>),
    /// A stream.
    Stream(Stream),
}

/// A stream whose entry IDs are `<seq>-1`, with at most one group `g`.
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub struct Stream {
    /// seq → (field, value).
    pub entries: BTreeMap<u64, (Vec<u8>, Vec<u8>)>,
    /// The group `g`, if created.
    pub group: Option<Group>,
}

/// A consumer group: the last delivered seq (0 = `0-0`) and its PEL.
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub struct Group {
    /// seq of the last delivered ID (0 for `0-0`).
    pub last: u64,
    /// seq → (consumer, delivery count).
    pub pel: BTreeMap<u64, (Vec<u8>, i64)>,
}

/// A key: its value and its absolute expiry (ms), if any.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Entry {
    /// The value.
    pub val: Val,
    /// PEXPIRETIME, if the key has a TTL.
    pub expire: Option<i64>,
}

/// One client's keys.
pub type Model = BTreeMap<Vec<u8>, Entry>;

/// The ID text of a stream sequence number.
pub fn stream_id(seq: u64) -> Vec<u8> {
    format!("{seq}-1").into_bytes()
}

/// The sequence number of an ID `<seq>-1` (`0-0` is 0).
pub fn parse_stream_id(id: &[u8]) -> Option<u64> {
    let text = std::str::from_utf8(id).ok()?;
    if text == "0-0" {
        return Some(0);
    }
    let (ms, seq) = text.split_once('-')?;
    if seq != "1" {
        return None;
    }
    ms.parse().ok()
}

fn int(n: usize) -> V {
    V::Int(n as i64)
}

fn num(arg: &[u8]) -> i64 {
    std::str::from_utf8(arg)
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| panic!("model: not an integer argument {arg:?}"))
}

/// Removes `key` when its collection became empty (Redis deletes empty
/// lists, hashes, sets and sorted sets, never streams).
fn drop_if_empty(m: &mut Model, key: &[u8]) {
    let empty = match m.get(key).map(|e| &e.val) {
        Some(Val::List(l)) => l.is_empty(),
        Some(Val::Hash(h)) => h.is_empty(),
        Some(Val::Set(s)) => s.is_empty(),
        Some(Val::Zset(z)) => z.is_empty(),
        _ => false,
    };
    if empty {
        m.remove(key);
    }
}

macro_rules! get_or_insert {
    ($m:expr, $key:expr, $variant:ident, $init:expr) => {{
        let e = $m.entry($key.to_vec()).or_insert(Entry {
            val: Val::$variant($init),
            expire: None,
        });
        match &mut e.val {
            Val::$variant(x) => x,
            other => panic!("model: key {:?} holds {other:?}", $key),
        }
    }};
}

macro_rules! get_mut {
    ($m:expr, $key:expr, $variant:ident) => {
        match $m.get_mut($key).map(|e| &mut e.val) {
            Some(Val::$variant(x)) => Some(x),
            None => None,
            Some(other) => panic!("model: key {:?} holds {other:?}", $key),
        }
    };
}

/// Applies one command to `m` and returns the reply Redis 7.0 gives
/// (RESP2). Only the commands and argument shapes the workload generates
/// are known; anything else is a bug of the harness.
pub fn apply(m: &mut Model, args: &[Vec<u8>]) -> V {
    let name = String::from_utf8_lossy(&args[0]).to_ascii_uppercase();
    let key = args[1].as_slice();
    match name.as_str() {
        "SET" => {
            m.insert(
                key.to_vec(),
                Entry {
                    val: Val::Str(args[2].clone()),
                    expire: None,
                },
            );
            V::Simple("OK".into())
        }
        "APPEND" => {
            let s = get_or_insert!(m, key, Str, Vec::new());
            s.extend_from_slice(&args[2]);
            int(s.len())
        }
        "INCRBY" => {
            let s = get_or_insert!(m, key, Str, b"0".to_vec());
            let n = num(s) + num(&args[2]);
            *s = n.to_string().into_bytes();
            V::Int(n)
        }
        "DEL" => int(usize::from(m.remove(key).is_some())),
        "PEXPIREAT" => match m.get_mut(key) {
            Some(e) => {
                e.expire = Some(num(&args[2]));
                V::Int(1)
            }
            None => V::Int(0),
        },
        "PERSIST" => match m.get_mut(key) {
            Some(e) if e.expire.is_some() => {
                e.expire = None;
                V::Int(1)
            }
            _ => V::Int(0),
        },
        "RPUSH" => {
            let l = get_or_insert!(m, key, List, VecDeque::new());
            l.extend(args[2..].iter().cloned());
            int(l.len())
        }
        "LPOP" => {
            let popped = get_mut!(m, key, List).and_then(|l| l.pop_front());
            drop_if_empty(m, key);
            popped.map_or(V::Nil, V::Bulk)
        }
        "HSET" => {
            let h = get_or_insert!(m, key, Hash, BTreeMap::new());
            let mut added = 0;
            for pair in args[2..].chunks(2) {
                added += usize::from(h.insert(pair[0].clone(), pair[1].clone()).is_none());
            }
            int(added)
        }
        "HDEL" => {
            let removed = get_mut!(m, key, Hash).map_or(0, |h| {
                args[2..]
                    .iter()
                    .filter(|f| h.remove(f.as_slice()).is_some())
                    .count()
            });
            drop_if_empty(m, key);
            int(removed)
        }
        "HINCRBY" => {
            let h = get_or_insert!(m, key, Hash, BTreeMap::new());
            let field = h.entry(args[2].clone()).or_insert_with(|| b"0".to_vec());
            let n = num(field) + num(&args[3]);
            *field = n.to_string().into_bytes();
            V::Int(n)
        }
        "SADD" => {
            let s = get_or_insert!(m, key, Set, BTreeSet::new());
            int(args[2..].iter().filter(|x| s.insert(x.to_vec())).count())
        }
        "SREM" => {
            let removed = get_mut!(m, key, Set)
                .map_or(0, |s| args[2..].iter().filter(|x| s.remove(*x)).count());
            drop_if_empty(m, key);
            int(removed)
        }
        "ZADD" => {
            let z = get_or_insert!(m, key, Zset, BTreeMap::new());
            int(usize::from(
                z.insert(args[3].clone(), num(&args[2])).is_none(),
            ))
        }
        "ZINCRBY" => {
            let z = get_or_insert!(m, key, Zset, BTreeMap::new());
            let score = z.entry(args[3].clone()).or_insert(0);
            *score += num(&args[2]);
            V::Bulk(score.to_string().into_bytes())
        }
        "ZREM" => {
            let removed = get_mut!(m, key, Zset).map_or(0, |z| {
                args[2..].iter().filter(|x| z.remove(*x).is_some()).count()
            });
            drop_if_empty(m, key);
            int(removed)
        }
        "XADD" => {
            // XADD key <seq>-1 field value
            let seq = parse_stream_id(&args[2]).expect("XADD with a <seq>-1 id");
            let s = get_or_insert!(m, key, Stream, Stream::default());
            s.entries.insert(seq, (args[3].clone(), args[4].clone()));
            V::Bulk(args[2].clone())
        }
        "XTRIM" => {
            // XTRIM key MAXLEN n
            let max = num(&args[3]) as usize;
            let s = get_mut!(m, key, Stream).expect("XTRIM of an existing stream");
            let mut removed = 0;
            while s.entries.len() > max {
                s.entries.pop_first();
                removed += 1;
            }
            int(removed)
        }
        "XGROUP" => {
            // XGROUP CREATE key g 0 MKSTREAM, generated only without a group.
            let key = args[2].as_slice();
            let s = get_or_insert!(m, key, Stream, Stream::default());
            assert!(s.group.is_none(), "model: XGROUP CREATE over a group");
            s.group = Some(Group::default());
            V::Simple("OK".into())
        }
        "XREADGROUP" => {
            // XREADGROUP GROUP g <consumer> COUNT n STREAMS key >
            let consumer = args[3].clone();
            let count = num(&args[5]) as usize;
            let key = args[7].as_slice();
            let s = get_mut!(m, key, Stream).expect("XREADGROUP of an existing stream");
            let g = s.group.as_mut().expect("XREADGROUP with a group");
            let delivered: Vec<u64> = s
                .entries
                .range(g.last + 1..)
                .take(count)
                .map(|(seq, _)| *seq)
                .collect();
            if delivered.is_empty() {
                return V::NilArr;
            }
            let mut items = Vec::new();
            for seq in delivered {
                let (f, v) = &s.entries[&seq];
                g.pel.insert(seq, (consumer.clone(), 1));
                g.last = seq;
                items.push(V::Arr(vec![
                    V::Bulk(stream_id(seq)),
                    V::Arr(vec![V::Bulk(f.clone()), V::Bulk(v.clone())]),
                ]));
            }
            V::Arr(vec![V::Arr(vec![V::Bulk(key.to_vec()), V::Arr(items)])])
        }
        "XACK" => {
            // XACK key g id
            let seq = parse_stream_id(&args[3]).expect("XACK id");
            let s = get_mut!(m, key, Stream).expect("XACK of an existing stream");
            let g = s.group.as_mut().expect("XACK with a group");
            int(usize::from(g.pel.remove(&seq).is_some()))
        }
        other => panic!("model: unknown command {other}"),
    }
}
