//! The seed use cases written against the `redis` crate's API, run on
//! embedded hozon (feature `redis`; docs/embedding.md, "The redis crate's
//! API"): code written for a Redis server, with only the connection made
//! differently (`db.connect()` instead of `client.get_connection()`).
//!
//! - a session store with a sliding TTL (an atomic pipeline: HSET + EXPIRE,
//!   HGETALL + EXPIRE);
//! - a fixed-window rate limiter (INCR + EXPIRE NX) and a sliding-window
//!   one (`redis::Script`: EVALSHA, EVAL on NOSCRIPT);
//! - a leaderboard (ZADD, ZINCRBY, ZREVRANGE WITHSCORES, ZREVRANK);
//! - a lock with SET NX PX and a compare-and-delete script;
//! - a job queue on a stream with a consumer group, a worker that stops
//!   without acknowledging, the engine closed and reopened, the pending
//!   job claimed (XAUTOCLAIM) and acknowledged.
//!
//! The native-API versions, one per file, are in examples/README.md.
//! Run: `cargo run --features redis --example redis_api` (it asserts what
//! it shows and exits non-zero otherwise).

use std::collections::HashMap;

use hozon::embed::{Conn, Db};
use redis::streams::{StreamReadOptions, StreamReadReply};
use redis::{Commands, RedisResult, Script};

fn main() -> RedisResult<()> {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let db = Db::open(dir.path()).expect("open");
    let mut con = db.connect();
    sessions(&mut con)?;
    rate_limits(&mut con)?;
    leaderboard(&mut con)?;
    lock(&mut con)?;
    drop(con);
    job_queue(db, dir.path())?;
    println!("ok");
    Ok(())
}

fn sessions(con: &mut Conn) -> RedisResult<()> {
    let () = redis::pipe()
        .atomic()
        .hset_multiple("session:alice", &[("user_id", "42"), ("role", "admin")])
        .ignore()
        .expire("session:alice", 1800)
        .ignore()
        .query(con)?;
    let (fields, _): (HashMap<String, String>, bool) = redis::pipe()
        .atomic()
        .hgetall("session:alice")
        .expire("session:alice", 1800)
        .query(con)?;
    assert_eq!(fields["role"], "admin");
    let ttl: i64 = con.ttl("session:alice")?;
    assert!(ttl > 1790 && ttl <= 1800, "{ttl}");
    let gone: HashMap<String, String> = con.hgetall("session:nobody")?;
    assert!(gone.is_empty());
    println!("session store: alice's session read and its TTL renewed ({ttl} s)");
    Ok(())
}

const SLIDING_WINDOW: &str = r"
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', ARGV[1] - ARGV[2])
if redis.call('ZCARD', KEYS[1]) >= tonumber(ARGV[3]) then return 0 end
redis.call('ZADD', KEYS[1], ARGV[1], ARGV[4])
redis.call('PEXPIRE', KEYS[1], ARGV[2])
return 1";

fn rate_limits(con: &mut Conn) -> RedisResult<()> {
    // Fixed window: 5 requests per window.
    let mut admitted = 0;
    for _ in 0..8 {
        let (count, _): (i64, bool) = redis::pipe()
            .atomic()
            .incr("rate:fixed:alice", 1)
            .cmd("EXPIRE")
            .arg("rate:fixed:alice")
            .arg(60)
            .arg("NX")
            .query(con)?;
        admitted += usize::from(count <= 5);
    }
    assert_eq!(admitted, 5);
    // Sliding window of 1000 ms, 3 requests, on the caller's clock.
    let script = Script::new(SLIDING_WINDOW);
    let mut decisions = Vec::new();
    for (n, now_ms) in [0, 100, 200, 300, 1050, 1150].into_iter().enumerate() {
        let ok: i64 = script
            .key("rate:sliding:alice")
            .arg(now_ms)
            .arg(1000)
            .arg(3)
            .arg(format!("req{n}"))
            .invoke(con)?;
        decisions.push(ok == 1);
    }
    assert_eq!(decisions, [true, true, true, false, true, true]);
    println!("rate limiters: fixed window admitted {admitted} of 8, sliding window {decisions:?}");
    Ok(())
}

fn leaderboard(con: &mut Conn) -> RedisResult<()> {
    let players = [("ann", 50), ("bob", 70), ("cid", 60), ("dee", 40)];
    let added: i64 = con.zadd_multiple("board", &players.map(|(name, score)| (score, name)))?;
    assert_eq!(added, 4);
    let _: f64 = con.zincr("board", "dee", 35)?;
    let top: Vec<(String, f64)> = con.zrevrange_withscores("board", 0, 2)?;
    assert_eq!(
        top,
        [
            ("dee".into(), 75.0),
            ("bob".into(), 70.0),
            ("cid".into(), 60.0)
        ]
    );
    let rank: Option<usize> = con.zrevrank("board", "ann")?;
    assert_eq!(rank, Some(3));
    println!(
        "leaderboard: top 3 {top:?}, ann ranks {}",
        rank.unwrap() + 1
    );
    Ok(())
}

const RELEASE: &str = r"
if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end
return 0";

fn lock(con: &mut Conn) -> RedisResult<()> {
    let acquire = |con: &mut Conn, token: &str| -> RedisResult<bool> {
        let set: Option<String> = redis::cmd("SET")
            .arg("lock:report")
            .arg(token)
            .arg("NX")
            .arg("PX")
            .arg(30_000)
            .query(con)?;
        Ok(set.is_some())
    };
    let release = Script::new(RELEASE);
    assert!(acquire(con, "token-a")?);
    assert!(!acquire(con, "token-b")?, "held by A");
    let released: i64 = release.key("lock:report").arg("token-b").invoke(con)?;
    assert_eq!(released, 0, "B cannot release A's lock");
    let released: i64 = release.key("lock:report").arg("token-a").invoke(con)?;
    assert_eq!(released, 1);
    assert!(acquire(con, "token-b")?);
    println!("lock: only the holder's token releases it");
    Ok(())
}

fn job_queue(db: Db, dir: &std::path::Path) -> RedisResult<()> {
    let mut con = db.connect();
    let () = con.xgroup_create_mkstream("jobs", "workers", "$")?;
    for n in 0..3 {
        let _: String = con.xadd("jobs", "*", &[("task", format!("job-{n}"))])?;
    }
    // worker-1 takes two jobs, acknowledges one, then stops.
    let opts = StreamReadOptions::default()
        .group("workers", "worker-1")
        .count(2);
    let taken: StreamReadReply = con.xread_options(&["jobs"], &[">"], &opts)?;
    let ids: Vec<String> = taken.keys[0].ids.iter().map(|e| e.id.clone()).collect();
    assert_eq!(ids.len(), 2);
    let acked: i64 = con.xack("jobs", "workers", &[&ids[0]])?;
    assert_eq!(acked, 1);
    drop(con);
    db.close().expect("close");

    // After a restart the unacknowledged job is still pending.
    let db = Db::open(dir).expect("reopen");
    let mut con = db.connect();
    let claimed: redis::Value = redis::cmd("XAUTOCLAIM")
        .arg("jobs")
        .arg("workers")
        .arg("worker-2")
        .arg(0)
        .arg("0-0")
        .query(&mut con)?;
    let redis::Value::Array(parts) = claimed else {
        panic!("XAUTOCLAIM: {claimed:?}")
    };
    let claimed_ids: Vec<String> = match &parts[1] {
        redis::Value::Array(entries) => entries
            .iter()
            .map(|e| match e {
                redis::Value::Array(pair) => redis::from_redis_value_ref(&pair[0]).unwrap(),
                other => panic!("{other:?}"),
            })
            .collect(),
        other => panic!("{other:?}"),
    };
    assert_eq!(
        claimed_ids,
        [ids[1].clone()],
        "the job worker-1 never acked"
    );
    let opts = StreamReadOptions::default().group("workers", "worker-2");
    let rest: StreamReadReply = con.xread_options(&["jobs"], &[">"], &opts)?;
    let mut todo = claimed_ids;
    todo.extend(rest.keys[0].ids.iter().map(|e| e.id.clone()));
    let acked: i64 = con.xack("jobs", "workers", &todo)?;
    assert_eq!(acked, 2);
    let pending: redis::streams::StreamPendingReply = con.xpending("jobs", "workers")?;
    assert_eq!(pending.count(), 0);
    println!("job queue: the job pending across the restart was claimed; 3 of 3 done");
    drop(con);
    db.close().expect("close");
    Ok(())
}
