//! AOF interop with real Redis 7.0: a file written by hozon loads in
//! redis-server (as a legacy `appendonly.aof`), and the files Redis 7.0
//! writes (RESP base + incr with `#TS:` annotations) load in hozon; the
//! keyspaces are then compared key by key, TTLs included.

use std::collections::BTreeMap;
use std::path::Path;
use std::time::Duration;

use crate::harness::{start_hozon, start_redis, Conn};

/// A decoded RESP2 reply.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub enum Value {
    Bulk(Vec<u8>),
    Int(i64),
    Simple(String),
    Nil,
    Array(Vec<Value>),
}

fn decode(buf: &[u8], pos: &mut usize) -> Value {
    let end = buf[*pos..]
        .windows(2)
        .position(|w| w == b"\r\n")
        .expect("line")
        + *pos;
    let line = std::str::from_utf8(&buf[*pos + 1..end])
        .expect("utf8 header")
        .to_string();
    let kind = buf[*pos];
    *pos = end + 2;
    match kind {
        b'+' | b'-' => Value::Simple(line),
        b':' => Value::Int(line.parse().expect("int")),
        b'$' => {
            let n: i64 = line.parse().expect("len");
            if n < 0 {
                return Value::Nil;
            }
            let v = buf[*pos..*pos + n as usize].to_vec();
            *pos += n as usize + 2;
            Value::Bulk(v)
        }
        b'*' => {
            let n: i64 = line.parse().expect("count");
            if n < 0 {
                return Value::Nil;
            }
            Value::Array((0..n).map(|_| decode(buf, pos)).collect())
        }
        other => panic!("unexpected reply type {}", other as char),
    }
}

fn call(conn: &mut Conn, args: &[&[u8]]) -> Value {
    let raw = conn.call(args);
    decode(&raw, &mut 0)
}

pub type Dump = BTreeMap<(u8, Vec<u8>), (Vec<u8>, Value, Value)>;

/// Every key of databases 0..16: type, canonical value, PEXPIRETIME.
pub fn dump(port: u16) -> Dump {
    let mut conn = Conn::connect(port);
    let mut out = BTreeMap::new();
    for db in 0..16u8 {
        call(&mut conn, &[b"SELECT", db.to_string().as_bytes()]);
        let Value::Array(keys) = call(&mut conn, &[b"KEYS", b"*"]) else {
            panic!("KEYS")
        };
        for key in keys {
            let Value::Bulk(key) = key else { panic!("key") };
            let Value::Simple(kind) = call(&mut conn, &[b"TYPE", &key]) else {
                panic!("TYPE")
            };
            let value = match kind.as_str() {
                "string" => call(&mut conn, &[b"GET", &key]),
                "list" => call(&mut conn, &[b"LRANGE", &key, b"0", b"-1"]),
                "hash" | "set" => {
                    let cmd: &[u8] = if kind == "hash" {
                        b"HGETALL"
                    } else {
                        b"SMEMBERS"
                    };
                    let Value::Array(items) = call(&mut conn, &[cmd, &key]) else {
                        panic!("{kind}")
                    };
                    let mut items = if kind == "hash" {
                        items
                            .chunks(2)
                            .map(|c| Value::Array(c.to_vec()))
                            .collect::<Vec<_>>()
                    } else {
                        items
                    };
                    items.sort();
                    Value::Array(items)
                }
                "zset" => call(&mut conn, &[b"ZRANGE", &key, b"0", b"-1", b"WITHSCORES"]),
                other => panic!("type {other}"),
            };
            let ttl = call(&mut conn, &[b"PEXPIRETIME", &key]);
            out.insert((db, key), (kind.into_bytes(), value, ttl));
        }
    }
    out
}

/// Writes of every type, with TTLs, several databases, and commands whose
/// logged effect differs from the request.
const WORKLOAD: &str = "SET s1 hello
SET s2 world EX 100000
SET n 10
INCRBY n 5
INCRBYFLOAT f 1.5
INCRBYFLOAT f 0.25
APPEND s1 -there
SETRANGE s1 0 J
GETEX s1 PX 900000
RPUSH l a b c d e
LPOP l
LMOVE l l2 LEFT RIGHT
LTRIM l 0 1
HSET h f1 v1 f2 v2 f3 3
HINCRBY h f3 4
HINCRBYFLOAT h f4 2.5
HDEL h f1
SADD ints 1 2 3 4 5
SADD words apple banana cherry
SREM words banana
SPOP ints 2
SMOVE words ints cherry
SINTERSTORE inter ints words
ZADD z 1 a 2 b 3 c 4 d
ZINCRBY z 10 a
ZPOPMIN z
ZREM z c
ZUNIONSTORE zu 2 z ints WEIGHTS 2 1
EXPIRE h 500000
PEXPIRE z 700000
PERSIST s2
RENAME n counter
SET gone x
DEL gone
SET past x
PEXPIREAT past 1000
SELECT 3
SET other db3
HSET h3 a b
COPY h3 h3copy
MOVE other 4
SELECT 0
COPY h h5 DB 5
";

pub fn run_workload(port: u16) {
    let mut conn = Conn::connect(port);
    for line in WORKLOAD.lines() {
        let args = crate::harness::split_line(line);
        let refs: Vec<&[u8]> = args.iter().map(|a| a.as_slice()).collect();
        let reply = conn.call(&refs);
        assert!(
            !reply.starts_with(b"-"),
            "{line}: {}",
            String::from_utf8_lossy(&reply)
        );
    }
}

/// The keyspace redis-server has after loading `aof` as its AOF.
pub fn dump_in_redis(aof: &[u8]) -> Dump {
    let redis_dir = tempfile::tempdir().unwrap();
    std::fs::write(redis_dir.path().join("appendonly.aof"), aof).unwrap();
    let rd = redis_dir.path().to_string_lossy().into_owned();
    let redis = start_redis(&[
        "--appendonly",
        "yes",
        "--appendfilename",
        "appendonly.aof",
        "--dir",
        &rd,
    ]);
    dump(redis.port)
}

#[test]
fn hozon_aof_loads_in_redis_with_identical_keyspace() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path().to_string_lossy().into_owned();
    let hozon = start_hozon(&[
        "--appendonly",
        "yes",
        "--appendfsync",
        "always",
        "--dir",
        &d,
    ]);
    run_workload(hozon.port);
    let before = dump(hozon.port);
    drop(hozon); // SIGKILL: under always every acknowledged write is on disk
    let aof = std::fs::read(dir.path().join("appendonly.aof")).unwrap();

    let in_redis = dump_in_redis(&aof);
    assert_eq!(
        in_redis, before,
        "Redis loaded hozon's AOF into a different keyspace"
    );

    let hozon_again = start_hozon(&["--appendonly", "yes", "--dir", &d]);
    assert_eq!(dump(hozon_again.port), before, "hozon's own replay differs");
}

fn redis_aof_image(dir: &Path) -> Vec<u8> {
    let aof_dir = dir.join("appendonlydir");
    let manifest = std::fs::read_to_string(aof_dir.join("appendonly.aof.manifest")).unwrap();
    let mut image = Vec::new();
    // Base first, then incr files in sequence order, as Redis loads them.
    let mut files: Vec<(u8, u64, String)> = manifest
        .lines()
        .filter_map(|line| {
            let words: Vec<&str> = line.split_whitespace().collect();
            let name = words.get(1)?.to_string();
            let seq: u64 = words.get(3)?.parse().ok()?;
            let kind = if *words.get(5)? == "b" { 0 } else { 1 };
            Some((kind, seq, name))
        })
        .collect();
    files.sort();
    for (_, _, name) in files {
        image.extend(std::fs::read(aof_dir.join(name)).unwrap());
    }
    image
}

#[test]
fn redis_aof_loads_in_hozon_with_identical_keyspace() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path().to_string_lossy().into_owned();
    let redis = start_redis(&[
        "--appendonly",
        "yes",
        "--appendfsync",
        "always",
        "--aof-use-rdb-preamble",
        "no",
        "--aof-timestamp-enabled",
        "yes",
        "--dir",
        &d,
    ]);
    run_workload(redis.port);
    let before = dump(redis.port);
    // Let Redis finish its own AOF rewrite-free write path, then stop it.
    let mut conn = Conn::connect(redis.port);
    conn.send_raw(b"*2\r\n$8\r\nSHUTDOWN\r\n$6\r\nNOSAVE\r\n");
    std::thread::sleep(Duration::from_millis(100));
    drop(redis);
    let image = redis_aof_image(dir.path());
    assert!(
        image.windows(4).any(|w| w == b"#TS:"),
        "expected Redis 7 timestamp annotations"
    );

    let hozon_dir = tempfile::tempdir().unwrap();
    std::fs::write(hozon_dir.path().join("appendonly.aof"), &image).unwrap();
    let hd = hozon_dir.path().to_string_lossy().into_owned();
    let hozon = start_hozon(&["--appendonly", "yes", "--dir", &hd]);
    assert_eq!(
        dump(hozon.port),
        before,
        "hozon loaded Redis's AOF into a different keyspace"
    );
    // hozon appends to it in its own checksummed format, and still loads it.
    let mut conn = Conn::connect(hozon.port);
    conn.call(&[b"SET", b"after", b"import"]);
    drop(hozon);
    let reloaded = start_hozon(&["--appendonly", "yes", "--dir", &hd]);
    let mut expected = before.clone();
    expected.insert(
        (0, b"after".to_vec()),
        (
            b"string".to_vec(),
            Value::Bulk(b"import".to_vec()),
            Value::Int(-1),
        ),
    );
    assert_eq!(dump(reloaded.port), expected);
}

/// A hozon AOF whose batches end with replication position lines
/// (`#repl …`, docs/replication.md "Where") loads in Redis 7.0, which
/// skips `#` lines, and in hozon, which reads them: the same keyspace.
#[test]
fn position_lines_in_hozon_aof_load_in_redis_and_hozon() {
    use hozon::persist::aof::{annotation_line, encode_command, FILE_HEADER};
    let mut aof = FILE_HEADER.to_vec();
    for (i, ts) in [(0u32, 1_000i64), (1, 2_000), (2, 3_000)] {
        let mut body = Vec::new();
        encode_command(&mut body, &[&b"SELECT"[..], b"0"]);
        let key = format!("k{i}");
        encode_command(&mut body, &[&b"SET"[..], key.as_bytes(), b"v"]);
        body.extend_from_slice(
            format!(
                "#repl 0123456789abcdef0123456789abcdef01234567 {} 0\r\n",
                40 * (i + 1)
            )
            .as_bytes(),
        );
        aof.extend_from_slice(&body);
        aof.extend(annotation_line(&body, ts));
    }
    let in_redis = dump_in_redis(&aof);
    assert_eq!(in_redis.len(), 3, "{in_redis:?}");

    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("appendonly.aof"), &aof).unwrap();
    let d = dir.path().to_string_lossy().into_owned();
    let hozon = start_hozon(&["--appendonly", "yes", "--dir", &d]);
    assert_eq!(dump(hozon.port), in_redis);
}
