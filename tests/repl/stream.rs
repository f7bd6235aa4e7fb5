//! The command stream after a full sync: writes of every kind reach the
//! replica (transactions, scripts, served blocking pops, lazy and active
//! expiry as DEL, FLUSHDB, SWAPDB, other databases), and PUBLISH reaches a
//! subscriber on the replica.

use std::time::Duration;

use crate::dataset::{assert_same_streamed, populate};
use crate::harness::{
    cmd, decode, ok, script, start_replica, wait_synced, wait_until, Conn, Master, SyncMode, Value,
    PATIENCE,
};

/// DBSIZE of `db` (counts expired keys not yet deleted: on a replica only
/// the master's DEL removes them).
fn dbsize(conn: &mut Conn, db: u32) -> i64 {
    ok(conn, &["SELECT", &db.to_string()]);
    let n = ok(conn, &["DBSIZE"]).int();
    ok(conn, &["SELECT", "0"]);
    n
}

/// Scenario 2: after the replica is online, every kind of write reaches it
/// and the offsets agree.
fn writes_after_sync(master: Master) {
    let m = master.start(&SyncMode::Disk.args());
    let mut c = m.conn();
    populate(&mut c);
    let r = start_replica(&m, &[]);
    wait_synced(&m, &[&r]);
    let mut rc = r.conn();

    script(
        &mut c,
        "SET a 1
        INCR n
        INCRBYFLOAT f 0.1
        LPUSH l new
        HSET h f9 v9
        SPOP words
        SADD ints 99
        ZINCRBY z 2 b
        GETDEL s1
        SET ttl_s v2 KEEPTTL
        XADD st 9-1 late 1
        XREADGROUP GROUP g1 alice COUNT 5 STREAMS st >
        XCLAIM st g1 bob 0 3-1
        XAUTOCLAIM st g1 carol 0 0-0
        EXPIRE key:3 100000
        PERSIST z",
    );
    // A transaction, a script writing two keys.
    assert_eq!(ok(&mut c, &["MULTI"]), Value::Simple("OK".into()));
    script(&mut c, "SET m1 1\nINCR m2\nLPUSH ml x\nDEL key:10");
    ok(&mut c, &["EXEC"]);
    let lua = "redis.call('set', KEYS[1], ARGV[1]); \
               redis.call('incrby', KEYS[2], 5); return 1";
    ok(&mut c, &["EVAL", lua, "2", "e1", "e2", "v"]);
    // A blocking pop served by a push from another client.
    let mut blocked = m.conn();
    blocked.send_raw(&testkit::harness::encode_command(&[b"BLPOP", b"bq", b"0"]));
    wait_until(PATIENCE, "the BLPOP to block", || {
        match ok(&mut c, &["INFO", "clients"])
            .text()
            .contains("blocked_clients:1")
        {
            true => Ok(()),
            false => Err("blocked_clients is not 1".into()),
        }
    });
    ok(&mut c, &["RPUSH", "bq", "one", "two"]);
    assert_eq!(
        decode(&blocked.read_reply()),
        Value::Array(vec![
            Value::Bulk(b"bq".to_vec()),
            Value::Bulk(b"one".to_vec())
        ])
    );
    // Other databases: FLUSHDB, SWAPDB, writes after SELECT.
    script(
        &mut c,
        "SELECT 1
        FLUSHDB
        SET after_flush 1
        SELECT 6
        SET in6 six
        RPUSH l6 a
        SELECT 7
        SET in7 seven
        SWAPDB 6 7
        SELECT 8
        SET in8 x
        SELECT 0",
    );
    // Expiry: one key deleted lazily (read on the master), one actively
    // (never touched); the replica only loses them by the master's DEL.
    script(
        &mut c,
        "SELECT 3\nSET lazy v PX 50\nSET active v PX 50\nSELECT 0\nPEXPIRE key:20 50",
    );
    wait_until(PATIENCE, "the master to expire the keys", || {
        ok(&mut c, &["SELECT", "3"]);
        let lazy = ok(&mut c, &["EXISTS", "lazy"]).int();
        ok(&mut c, &["SELECT", "0"]);
        let n3 = dbsize(&mut c, 3);
        let k20 = ok(&mut c, &["EXISTS", "key:20"]).int();
        match (lazy, n3, k20) {
            (0, 0, 0) => Ok(()),
            s => Err(format!("(EXISTS lazy, DBSIZE db3, EXISTS key:20) = {s:?}")),
        }
    });
    wait_until(
        PATIENCE,
        "the replica to get the expiries' DELs",
        || match dbsize(&mut rc, 3) {
            0 => Ok(()),
            n => Err(format!("DBSIZE of db 3 on the replica: {n}")),
        },
    );
    wait_synced(&m, &[&r]);
    assert_same_streamed(&m, &r);
    ok(&mut rc, &["SELECT", "7"]);
    assert_eq!(cmd(&mut rc, &["GET", "in6"]), Value::Bulk(b"six".to_vec()));
    ok(&mut rc, &["SELECT", "1"]);
    assert_eq!(
        ok(&mut rc, &["DBSIZE"]).int(),
        1,
        "FLUSHDB 1 on the replica"
    );
}

#[test]
fn writes_after_sync_redis_master() {
    writes_after_sync(Master::Redis);
}

#[test]
fn writes_after_sync_hozon_master() {
    writes_after_sync(Master::Hozon);
}

fn message(kind: &str, parts: &[&str]) -> Value {
    let mut items = vec![Value::Bulk(kind.as_bytes().to_vec())];
    items.extend(parts.iter().map(|p| Value::Bulk(p.as_bytes().to_vec())));
    Value::Array(items)
}

/// Scenario 3: PUBLISH on the master (direct, in MULTI, from a script)
/// reaches SUBSCRIBE and PSUBSCRIBE clients of the replica, in order; the
/// master's own reply counts only its own subscribers.
fn publish_reaches_replica(master: Master) {
    let m = master.start(&SyncMode::Disk.args());
    let mut c = m.conn();
    let r = start_replica(&m, &[]);
    wait_synced(&m, &[&r]);
    let mut sub = r.conn();
    assert_eq!(
        decode(&sub.call(&[b"SUBSCRIBE", b"news"])),
        Value::Array(vec![
            Value::Bulk(b"subscribe".to_vec()),
            Value::Bulk(b"news".to_vec()),
            Value::Int(1)
        ])
    );
    let mut psub = r.conn();
    psub.call(&[b"PSUBSCRIBE", b"n*"]);
    assert_eq!(ok(&mut c, &["PUBLISH", "news", "one"]), Value::Int(0));
    ok(&mut c, &["MULTI"]);
    ok(&mut c, &["PUBLISH", "news", "two"]);
    ok(&mut c, &["SET", "k", "v"]);
    ok(&mut c, &["EXEC"]);
    ok(
        &mut c,
        &["EVAL", "redis.call('publish', 'news', 'three')", "0"],
    );
    ok(&mut c, &["PUBLISH", "other", "not for us"]);
    for text in ["one", "two", "three"] {
        assert_eq!(
            decode(&sub.read_reply()),
            message("message", &["news", text])
        );
        assert_eq!(
            decode(&psub.read_reply()),
            message("pmessage", &["n*", "news", text])
        );
    }
    // Nothing else arrived on the subscription, and the offsets agree.
    assert_eq!(sub.try_read_reply(Duration::from_millis(100)), None);
    wait_synced(&m, &[&r]);
}

#[test]
fn publish_reaches_replica_redis_master() {
    publish_reaches_replica(Master::Redis);
}

#[test]
fn publish_reaches_replica_hozon_master() {
    publish_reaches_replica(Master::Hozon);
}
