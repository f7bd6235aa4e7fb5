//! A dataset of every type and encoding, and a key-by-key comparison of two
//! servers read through commands (SCAN on every database; no DUMP, so the
//! comparison does not depend on either side's encodings).

use std::collections::BTreeMap;

use crate::harness::{decode, ok, pipeline, script, show, Conn, Node, Value};

/// Small values of every type (listpack/intset encodings), TTLs, streams
/// with consumer groups and pending entries, several databases.
const SMALL: &str = r#"
SET s1 hello
SET s2 "with spaces and \x00\xff bytes"
SET n 10
INCRBY n 5
INCRBYFLOAT f 1.5
SET ttl_s v EX 100000
RPUSH l a b c d e
LPOP l
HSET h f1 v1 f2 v2 f3 3
HINCRBYFLOAT h f4 2.5
PEXPIRE h 500000
SADD ints 1 2 3 4 5 -7
SADD words apple banana cherry
ZADD z 1 a 2.5 b -3 c inf d -inf e
EXPIRE z 700000
XADD st 1-1 a 1
XADD st 2-1 b 2
XADD st 3-1 c 3 d 4
XADD st 4-1 e 5
XDEL st 2-1
XGROUP CREATE st g1 0
XGROUP CREATE st g2 $
XREADGROUP GROUP g1 alice COUNT 2 STREAMS st >
XREADGROUP GROUP g1 bob COUNT 1 STREAMS st >
XACK st g1 1-1
XGROUP CREATECONSUMER st g2 carol
XADD capped MAXLEN 3 5-1 x 1
XADD capped MAXLEN 3 5-2 x 2
SET past x
PEXPIREAT past 1000
SELECT 1
SET db1 one
HSET h1 a b
SELECT 5
LPUSH l5 x y z
SET ttl5 v PX 900000
SELECT 15
SADD s15 m
ZADD z15 1 m
SELECT 0
"#;

/// Sizes past the compact encodings, a value over one 64 KiB write, and
/// many small keys.
fn big_commands() -> Vec<Vec<Vec<u8>>> {
    let mut out: Vec<Vec<Vec<u8>>> = Vec::new();
    let c = |words: Vec<String>| -> Vec<Vec<u8>> {
        words.into_iter().map(String::into_bytes).collect()
    };
    for i in 0..2000 {
        out.push(c(vec![
            "SET".into(),
            format!("key:{i}"),
            format!("value-{i}"),
        ]));
    }
    for i in 0..1500 {
        out.push(c(vec![
            "RPUSH".into(),
            "biglist".into(),
            format!("item-{i}"),
        ]));
        out.push(c(vec!["SADD".into(), "bigset".into(), format!("m{i}")]));
    }
    for i in 0..700 {
        out.push(c(vec![
            "HSET".into(),
            "bighash".into(),
            format!("f{i}"),
            "x".repeat(i % 90),
        ]));
        out.push(c(vec![
            "ZADD".into(),
            "bigzset".into(),
            format!("{}", i as f64 / 7.0),
            format!("m{i}"),
        ]));
        out.push(c(vec![
            "SADD".into(),
            "bigints".into(),
            format!("{}", i * 1000),
        ]));
    }
    for i in 0..600 {
        out.push(c(vec![
            "XADD".into(),
            "bigstream".into(),
            format!("{}-1", i + 1),
            "i".into(),
            i.to_string(),
        ]));
    }
    out.push(c(vec![
        "XGROUP".into(),
        "CREATE".into(),
        "bigstream".into(),
        "grp".into(),
        "0".into(),
    ]));
    out.push(c(vec![
        "XREADGROUP".into(),
        "GROUP".into(),
        "grp".into(),
        "dave".into(),
        "COUNT".into(),
        "250".into(),
        "STREAMS".into(),
        "bigstream".into(),
        ">".into(),
    ]));
    out.push(c(vec![
        "SET".into(),
        "huge".into(),
        "0123456789abcdef".repeat(200 * 1024 / 16),
    ]));
    out.push(c(vec!["EXPIRE".into(), "bighash".into(), "300000".into()]));
    out
}

/// Fills the server behind `conn` with the dataset (ends in db 0).
pub fn populate(conn: &mut Conn) {
    script(conn, SMALL);
    pipeline(conn, &big_commands());
}

/// What a key holds, read through commands.
#[derive(Debug, Clone, PartialEq)]
pub struct Entry {
    pub kind: String,
    pub value: Value,
    /// PTTL: -1 without expiry.
    pub pttl: i64,
}

pub type Snapshot = BTreeMap<(u32, Vec<u8>), Entry>;

/// Whether consumer groups' `entries-read` and `lag` are compared. A full
/// sync carries them (RDB 10); the stream does not: Redis 7.0.15 propagates
/// XREADGROUP as XCLAIMs and `XGROUP SETID … ENTRIESREAD` that leave a
/// Redis replica's `entries-read` nil or behind its master's.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Counters {
    Exact,
    Skip,
}

fn call(conn: &mut Conn, args: &[&[u8]]) -> Value {
    let v = decode(&conn.call(args));
    if let Value::Error(e) = &v {
        let words: Vec<String> = args.iter().map(|a| show(a)).collect();
        panic!("{words:?}: {e}");
    }
    v
}

fn sorted(mut items: Vec<Value>) -> Value {
    items.sort();
    Value::Array(items)
}

/// A field/value list (XINFO's replies) as pairs, less `drop`ped fields.
fn fields_without(v: &Value, drop: &[&str]) -> Value {
    let items = v.items();
    Value::Array(
        items
            .chunks(2)
            .filter(|p| !drop.contains(&p[0].text().as_str()))
            .map(|p| Value::Array(p.to_vec()))
            .collect(),
    )
}

fn stream_value(conn: &mut Conn, key: &[u8], counters: Counters) -> Value {
    let entries = call(conn, &[b"XRANGE", key, b"-", b"+"]);
    // radix-tree-* describe the encoding, not the data.
    let info = fields_without(
        &call(conn, &[b"XINFO", b"STREAM", key]),
        &["radix-tree-keys", "radix-tree-nodes"],
    );
    let mut groups = Vec::new();
    for g in call(conn, &[b"XINFO", b"GROUPS", key]).items() {
        let name = match &g.items()[1] {
            Value::Bulk(b) => b.clone(),
            other => panic!("group name {other:?}"),
        };
        let ginfo = match counters {
            Counters::Exact => fields_without(g, &[]),
            Counters::Skip => fields_without(g, &["entries-read", "lag"]),
        };
        // [id, consumer, idle ms, deliveries]: idle is a clock reading.
        let pel: Vec<Value> = call(conn, &[b"XPENDING", key, &name, b"-", b"+", b"100000"])
            .items()
            .iter()
            .map(|p| {
                let p = p.items();
                Value::Array(vec![p[0].clone(), p[1].clone(), p[3].clone()])
            })
            .collect();
        let consumers: Vec<Value> = call(conn, &[b"XINFO", b"CONSUMERS", key, &name])
            .items()
            .iter()
            .map(|c| fields_without(c, &["idle", "inactive"]))
            .collect();
        groups.push(Value::Array(vec![
            ginfo,
            Value::Array(pel),
            sorted(consumers),
        ]));
    }
    Value::Array(vec![entries, info, Value::Array(groups)])
}

fn value_of(conn: &mut Conn, kind: &str, key: &[u8], counters: Counters) -> Value {
    match kind {
        "string" => call(conn, &[b"GET", key]),
        "list" => call(conn, &[b"LRANGE", key, b"0", b"-1"]),
        "hash" => sorted(
            call(conn, &[b"HGETALL", key])
                .items()
                .chunks(2)
                .map(|c| Value::Array(c.to_vec()))
                .collect(),
        ),
        "set" => sorted(call(conn, &[b"SMEMBERS", key]).items().to_vec()),
        "zset" => call(conn, &[b"ZRANGE", key, b"0", b"-1", b"WITHSCORES"]),
        "stream" => stream_value(conn, key, counters),
        other => panic!("unexpected type {other} for {}", show(key)),
    }
}

/// Every key of databases 0..16 (found with SCAN), and each db's DBSIZE
/// (which also counts keys expired but not yet deleted).
pub fn snapshot(port: u16, counters: Counters) -> (Snapshot, Vec<i64>) {
    let mut conn = Conn::connect(port);
    let mut out = Snapshot::new();
    let mut sizes = Vec::new();
    for db in 0..16u32 {
        ok(&mut conn, &["SELECT", &db.to_string()]);
        sizes.push(ok(&mut conn, &["DBSIZE"]).int());
        let mut cursor = b"0".to_vec();
        loop {
            let reply = call(&mut conn, &[b"SCAN", &cursor, b"COUNT", b"1000"]);
            let [next, keys] = reply.items() else {
                panic!("SCAN reply {reply:?}")
            };
            for key in keys.items() {
                let Value::Bulk(key) = key else {
                    panic!("key {key:?}")
                };
                let kind = call(&mut conn, &[b"TYPE", key]).text();
                if kind == "none" {
                    continue; // expired between SCAN and TYPE
                }
                let value = value_of(&mut conn, &kind, key, counters);
                let pttl = call(&mut conn, &[b"PTTL", key]).int();
                out.insert((db, key.clone()), Entry { kind, value, pttl });
            }
            cursor = match next {
                Value::Bulk(b) => b.clone(),
                other => panic!("cursor {other:?}"),
            };
            if cursor == b"0" {
                break;
            }
        }
    }
    (out, sizes)
}

/// At most 1,500 characters of `text`.
fn clip(text: String) -> String {
    match text.char_indices().nth(1500) {
        Some((at, _)) => format!("{}…", &text[..at]),
        None => text,
    }
}

/// Two entries agree: same type and value, and both persistent or both
/// with TTLs within 2 s of each other.
fn same_entry(a: &Entry, b: &Entry) -> bool {
    let ttl_ok = if a.pttl < 0 || b.pttl < 0 {
        a.pttl == b.pttl
    } else {
        (a.pttl - b.pttl).abs() <= 2000
    };
    a.kind == b.kind && a.value == b.value && ttl_ok
}

/// Asserts that `replica` holds exactly `master`'s keys (see [`snapshot`]);
/// returns the number of keys compared.
#[track_caller]
pub fn assert_same(master: &Node, replica: &Node) -> usize {
    assert_same_ports(master.port(), replica.port(), Counters::Exact)
}

/// [`assert_same`] after stream commands on consumer groups (see
/// [`Counters`]).
#[track_caller]
pub fn assert_same_streamed(master: &Node, replica: &Node) -> usize {
    assert_same_ports(master.port(), replica.port(), Counters::Skip)
}

/// [`assert_same`] for servers given by port (`replica` may be any copy).
#[track_caller]
pub fn assert_same_ports(master: u16, replica: u16, counters: Counters) -> usize {
    let (m, msizes) = snapshot(master, counters);
    let (r, rsizes) = snapshot(replica, counters);
    let mut problems = Vec::new();
    for (k, me) in &m {
        match r.get(k) {
            None => problems.push(format!("db {} {}: missing on the replica", k.0, show(&k.1))),
            Some(re) if !same_entry(me, re) => problems.push(format!(
                "db {} {}: master {}\n      replica {}",
                k.0,
                show(&k.1),
                clip(format!("{me:?}")),
                clip(format!("{re:?}"))
            )),
            Some(_) => {}
        }
    }
    for k in r.keys().filter(|k| !m.contains_key(*k)) {
        problems.push(format!("db {} {}: only on the replica", k.0, show(&k.1)));
    }
    if msizes != rsizes {
        problems.push(format!(
            "DBSIZE per db: master {msizes:?}, replica {rsizes:?}"
        ));
    }
    if !problems.is_empty() {
        let n = problems.len();
        problems.truncate(20);
        panic!(
            "the replica (port {replica}) differs from the master (port {master}) in {n} ways:\n  {}",
            problems.join("\n  ")
        );
    }
    m.len()
}
