//! hozon as a replica (docs/replication.md §5): of a real redis-server
//! 7.0.15 master (disk and diskless payloads), compared key by key with
//! the master after the sync and after writes of every kind; its refusals
//! byte for byte against a redis-server replica of the same master;
//! promotion; its own AOF after a sync; a fake master sending a
//! damaged payload (the old data stays, the replica retries); and chains
//! (a hozon replica serving replicas of its own).

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use testkit::harness::{start_hozon, start_redis, Conn, ServerProcess};

mod fake_master;
mod load;
mod pause;
mod preamble;

pub use testkit::value::Value;

pub use testkit::value::{call, info_field};

/// Waits until the replica's link is up and it applied everything the
/// master produced (its `slave_repl_offset` equals the master's
/// `master_repl_offset`), or panics after 30 seconds.
pub fn wait_caught_up(master: &mut Conn, replica: &mut Conn) {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let up = info_field(replica, "replication", "master_link_status");
        let theirs = info_field(master, "replication", "master_repl_offset");
        let ours = info_field(replica, "replication", "slave_repl_offset");
        if up.as_deref() == Some("up") && theirs.is_some() && theirs == ours {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "the replica did not catch up: link {up:?}, master offset {theirs:?}, replica offset {ours:?}"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Every key of every database with its type, its value in a comparable
/// form and whether it has a TTL.
pub fn dataset(conn: &mut Conn) -> BTreeMap<(usize, Vec<u8>), (String, Value, bool)> {
    let mut out = BTreeMap::new();
    for db in 0..16 {
        call(conn, &["SELECT", &db.to_string()]);
        let Value::Array(keys) = call(conn, &["KEYS", "*"]) else {
            panic!("KEYS");
        };
        for key in keys {
            let Value::Bulk(key) = key else { panic!("key") };
            let k = String::from_utf8_lossy(&key).into_owned();
            let Value::Simple(kind) = call(conn, &["TYPE", &k]) else {
                panic!("TYPE")
            };
            let value = match kind.as_str() {
                "string" => call(conn, &["GET", &k]),
                "list" => call(conn, &["LRANGE", &k, "0", "-1"]),
                "hash" => sorted(call(conn, &["HGETALL", &k])),
                "set" => sorted(call(conn, &["SMEMBERS", &k])),
                "zset" => call(conn, &["ZRANGE", &k, "0", "-1", "WITHSCORES"]),
                "stream" => Value::Array(vec![
                    call(conn, &["XRANGE", &k, "-", "+"]),
                    call(conn, &["XINFO", "GROUPS", &k]),
                ]),
                other => panic!("type {other}"),
            };
            let Value::Int(ttl) = call(conn, &["PTTL", &k]) else {
                panic!("PTTL")
            };
            out.insert((db, key), (kind, value, ttl >= 0));
        }
    }
    call(conn, &["SELECT", "0"]);
    out
}

/// HGETALL's pairs and SMEMBERS's members in a fixed order.
fn sorted(value: Value) -> Value {
    let Value::Array(items) = value else {
        return value;
    };
    let mut items = items;
    items.sort();
    Value::Array(items)
}

/// Writes a dataset of every type, with TTLs, in databases 0 and 2.
pub fn fill(master: &mut Conn) {
    let commands: &[&[&str]] = &[
        &["SET", "s", "hello"],
        &["SET", "n", "42"],
        &["SET", "ttl", "v", "EX", "1000"],
        &["RPUSH", "l", "a", "b", "c", "1", "2"],
        &["HSET", "h", "f1", "v1", "f2", "2"],
        &["SADD", "st", "x", "y", "z"],
        &["SADD", "ints", "1", "2", "3"],
        &["ZADD", "z", "1", "a", "2.5", "b", "-3", "c"],
        &["XADD", "x", "1-1", "f", "v"],
        &["XADD", "x", "2-1", "g", "w"],
        &["XGROUP", "CREATE", "x", "grp", "0"],
        &[
            "XREADGROUP",
            "GROUP",
            "grp",
            "c1",
            "COUNT",
            "1",
            "STREAMS",
            "x",
            ">",
        ],
        &["PEXPIRE", "h", "900000"],
        &["SELECT", "2"],
        &["SET", "in2", "two"],
        &["LPUSH", "l2", "q"],
        &["SELECT", "0"],
    ];
    for command in commands {
        call(master, command);
    }
    // Many keys and a large value, so the payload is not tiny.
    for i in 0..500 {
        call(master, &["SET", &format!("k{i}"), &"v".repeat(i % 300)]);
    }
    call(master, &["SET", "big", &"b".repeat(200_000)]);
}

/// Writes of every kind the stream carries.
pub fn write_more(master: &mut Conn) {
    let commands: &[&[&str]] = &[
        &["SET", "s", "changed"],
        &["INCR", "n"],
        &["INCRBYFLOAT", "n", "0.5"],
        &["MULTI"],
        &["RPUSH", "l", "m1"],
        &["HSET", "h", "f3", "v3"],
        &["EXEC"],
        &[
            "EVAL",
            "redis.call('SET', KEYS[1], ARGV[1]); return redis.call('SADD', 'st', 'w')",
            "1",
            "fromlua",
            "lv",
        ],
        &["SET", "short", "gone", "PX", "50"],
        &["EXPIRE", "k1", "100000"],
        &["ZINCRBY", "z", "10", "a"],
        &["XADD", "x", "3-1", "h", "u"],
        &["SELECT", "2"],
        &["FLUSHDB"],
        &["SET", "after-flush", "1"],
        &["SELECT", "5"],
        &["SET", "in5", "five"],
        &["SELECT", "0"],
        &["DEL", "k2", "k3"],
    ];
    for command in commands {
        let reply = call(master, command);
        assert!(!matches!(reply, Value::Error(_)), "{command:?}: {reply:?}");
    }
    // The key with 50 ms to live expires on the master, whose DEL reaches
    // the replica.
    let deadline = Instant::now() + Duration::from_secs(10);
    while call(master, &["EXISTS", "short"]) != Value::Int(0) {
        assert!(
            Instant::now() < deadline,
            "the master did not expire 'short'"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// The master's INFO stats count `full` full syncs and `partial`
/// accepted partial ones.
#[track_caller]
pub fn assert_syncs(master: &mut Conn, full: u64, partial: u64) {
    let count = |conn: &mut Conn, field: &str| info_field(conn, "stats", field);
    assert_eq!(
        (count(master, "sync_full"), count(master, "sync_partial_ok")),
        (Some(full.to_string()), Some(partial.to_string()))
    );
}

/// A hozon replica of `master`.
pub fn hozon_replica(master: &ServerProcess, extra: &[&str]) -> ServerProcess {
    let port = master.port.to_string();
    let args = [&["--replicaof", "127.0.0.1", &port][..], extra].concat();
    start_hozon(&args)
}

/// The whole check against a redis-server master started with
/// `master_args`.
fn sync_and_stream(master_args: &[&str]) {
    let master = start_redis(master_args);
    let mut m = Conn::connect(master.port);
    fill(&mut m);
    let replica = hozon_replica(&master, &[]);
    let mut r = Conn::connect(replica.port);
    wait_caught_up(&mut m, &mut r);
    let expected = dataset(&mut m);
    assert!(expected.len() > 500, "the dataset was written");
    assert_eq!(dataset(&mut r), expected, "after the full sync");
    write_more(&mut m);
    wait_caught_up(&mut m, &mut r);
    let expected = dataset(&mut m);
    assert!(expected.contains_key(&(0, b"fromlua".to_vec())));
    assert!(!expected.contains_key(&(0, b"short".to_vec())));
    assert_eq!(dataset(&mut r), expected, "after the stream");
    assert_eq!(
        call(&mut r, &["ROLE"]),
        Value::Array(vec![
            Value::Bulk(b"slave".to_vec()),
            Value::Bulk(b"127.0.0.1".to_vec()),
            Value::Int(i64::from(master.port)),
            Value::Bulk(b"connected".to_vec()),
            Value::Int(
                info_field(&mut m, "replication", "master_repl_offset")
                    .expect("offset")
                    .parse()
                    .expect("number")
            ),
        ])
    );
    // The master counts the replica online, acknowledging its offset.
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let slave0 = info_field(&mut m, "replication", "slave0").unwrap_or_default();
        let offset = info_field(&mut m, "replication", "master_repl_offset").expect("offset");
        if slave0.contains("state=online") && slave0.contains(&format!("offset={offset},")) {
            break;
        }
        assert!(Instant::now() < deadline, "no ACK of {offset}: {slave0}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn redis_master_disk_payload_then_stream() {
    sync_and_stream(&["--repl-diskless-sync", "no"]);
}

#[test]
fn redis_master_diskless_payload_then_stream() {
    sync_and_stream(&[
        "--repl-diskless-sync",
        "yes",
        "--repl-diskless-sync-delay",
        "0",
    ]);
}

mod announce;
mod chain;
mod failover;
mod promotion;
mod refusals;
mod restart;
mod tls;

#[test]
fn a_lost_link_continues_with_a_partial_resync() {
    let master = start_redis(&["--repl-diskless-sync", "no"]);
    let mut m = Conn::connect(master.port);
    fill(&mut m);
    let replica = hozon_replica(&master, &[]);
    let mut r = Conn::connect(replica.port);
    wait_caught_up(&mut m, &mut r);
    assert_eq!(
        call(&mut m, &["CLIENT", "KILL", "TYPE", "replica"]),
        Value::Int(1)
    );
    write_more(&mut m);
    wait_caught_up(&mut m, &mut r);
    assert_eq!(dataset(&mut r), dataset(&mut m));
    assert_syncs(&mut m, 1, 1);
}

/// The replica lists its master link as a client (flag `M`, type
/// `master`) and CLIENT KILL closes it, as Redis's replica does; each
/// kill, while the master streams large writes (so that a command is
/// often half read), continues with a partial resync from the end of the
/// last applied command, and the data stays the master's.
#[test]
fn killing_the_master_client_mid_stream_continues_with_partial_resyncs() {
    let master = start_redis(&["--repl-diskless-sync", "no", "--repl-backlog-size", "256mb"]);
    let mut m = Conn::connect(master.port);
    fill(&mut m);
    let replica = hozon_replica(&master, &[]);
    let mut r = Conn::connect(replica.port);
    wait_caught_up(&mut m, &mut r);
    let Value::Bulk(list) = call(&mut r, &["CLIENT", "LIST", "TYPE", "master"]) else {
        panic!("CLIENT LIST")
    };
    let list = String::from_utf8(list).unwrap();
    assert_eq!(list.lines().count(), 1, "{list}");
    assert!(
        list.contains(&format!(" addr=127.0.0.1:{} ", master.port)) && list.contains(" flags=M "),
        "{list}"
    );
    let writer = {
        let port = master.port;
        std::thread::spawn(move || {
            let mut w = Conn::connect(port);
            let value = "v".repeat(60_000);
            for i in 0..600 {
                call(
                    &mut w,
                    &["SET", &format!("big:{}", i % 50), &format!("{i}{value}")],
                );
                call(&mut w, &["INCR", "counter"]);
            }
        })
    };
    let mut kills = 0;
    let deadline = Instant::now() + Duration::from_secs(30);
    while kills < 5 && !writer.is_finished() {
        assert!(Instant::now() < deadline, "{kills} kills");
        match call(&mut r, &["CLIENT", "KILL", "TYPE", "master"]) {
            Value::Int(1) => kills += 1,
            // The link is being re-established.
            Value::Int(0) => {}
            other => panic!("CLIENT KILL: {other:?}"),
        }
        std::thread::sleep(Duration::from_millis(30));
    }
    writer.join().unwrap();
    assert!(
        kills >= 2,
        "only {kills} kills happened while the master wrote"
    );
    wait_caught_up(&mut m, &mut r);
    assert_eq!(dataset(&mut r), dataset(&mut m));
    let partial: u64 = info_field(&mut m, "stats", "sync_partial_ok")
        .unwrap()
        .parse()
        .unwrap();
    assert_eq!(
        info_field(&mut m, "stats", "sync_full").as_deref(),
        Some("1")
    );
    assert_eq!(partial, kills, "every kill continued");
}

#[test]
fn hozon_master_to_hozon_replica_disk_and_diskless() {
    for diskless in ["no", "yes"] {
        let master = start_hozon(&[
            "--repl-diskless-sync",
            diskless,
            "--repl-diskless-sync-delay",
            "0",
        ]);
        let mut m = Conn::connect(master.port);
        fill(&mut m);
        let replica = hozon_replica(&master, &[]);
        let mut r = Conn::connect(replica.port);
        wait_caught_up(&mut m, &mut r);
        assert_eq!(dataset(&mut r), dataset(&mut m), "diskless {diskless}");
        write_more(&mut m);
        wait_caught_up(&mut m, &mut r);
        assert_eq!(dataset(&mut r), dataset(&mut m), "diskless {diskless}");
    }
}

#[test]
fn a_master_with_replicas_that_becomes_a_replica_keeps_them_through_the_chain() {
    // Redis 7.0's `replicationSetMaster`: the replicas stay; the full
    // sync from the new master closes them, and they resync through us.
    let hozon = start_hozon(&["--repl-diskless-sync", "no"]);
    let mut h = Conn::connect(hozon.port);
    call(&mut h, &["SET", "mine", "1"]);
    let port = hozon.port.to_string();
    let below = start_redis(&["--replicaof", "127.0.0.1", &port]);
    let mut b = Conn::connect(below.port);
    wait_caught_up(&mut h, &mut b);
    let master = start_redis(&[]);
    let mut m = Conn::connect(master.port);
    fill(&mut m);
    let master_port = master.port.to_string();
    assert_eq!(
        call(&mut h, &["REPLICAOF", "127.0.0.1", &master_port]),
        Value::Simple("OK".into())
    );
    wait_caught_up(&mut m, &mut h);
    assert_eq!(dataset(&mut h), dataset(&mut m));
    assert_eq!(
        info_field(&mut h, "replication", "repl_backlog_active").as_deref(),
        Some("1")
    );
    let replid = info_field(&mut m, "replication", "master_replid");
    let deadline = Instant::now() + Duration::from_secs(30);
    while info_field(&mut b, "replication", "master_replid") != replid {
        assert!(
            Instant::now() < deadline,
            "the replica below did not resync"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    wait_caught_up(&mut h, &mut b);
    assert_eq!(dataset(&mut b), dataset(&mut m));
    assert_eq!(
        info_field(&mut h, "replication", "connected_slaves").as_deref(),
        Some("1")
    )
}
