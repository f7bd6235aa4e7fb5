//! The seed documents' use cases through the embedded API: session store,
//! fixed- and sliding-window rate limiting, leaderboard and distributed
//! lock, each as docs/use-cases.md shows it (the document names these
//! tests), first in memory, then with a data directory and `appendonly
//! yes`, reopening the engine to show what survived.

use hozon::{Config, Engine, Reply};

use crate::common::dump;

/// The lock release of docs/use-cases.md (compare-and-delete).
const LOCK_RELEASE: &str = r#"if redis.call("get", KEYS[1]) == ARGV[1] then return redis.call("del", KEYS[1]) else return 0 end"#;

/// The lock extension of docs/use-cases.md (compare-and-PEXPIRE).
const LOCK_EXTEND: &str = r#"if redis.call("get", KEYS[1]) == ARGV[1] then return redis.call("pexpire", KEYS[1], ARGV[2]) else return 0 end"#;

/// The atomic fixed-window script of docs/use-cases.md.
const FIXED_WINDOW: &str = r#"local n = redis.call("INCR", KEYS[1])
if n == 1 then redis.call("EXPIRE", KEYS[1], ARGV[1]) end
if n > tonumber(ARGV[2]) then return {0, n} end
return {1, n}"#;

/// The atomic sliding-window script of docs/use-cases.md.
const SLIDING_WINDOW: &str = r#"redis.call("ZREMRANGEBYSCORE", KEYS[1], "-inf", ARGV[1] - ARGV[2])
local count = redis.call("ZCARD", KEYS[1])
if count < tonumber(ARGV[3]) then
  redis.call("ZADD", KEYS[1], ARGV[1], ARGV[4])
  redis.call("PEXPIRE", KEYS[1], ARGV[2])
  return {1, count + 1}
end
return {0, count}"#;

fn bulk(s: &str) -> Reply {
    Reply::Bulk(s.as_bytes().to_vec())
}

/// `{allowed, count}` as a script's Lua table comes back.
fn pair(allowed: i64, count: i64) -> Reply {
    Reply::Array(vec![Reply::Int(allowed), Reply::Int(count)])
}

/// An integer reply, or a panic naming the command.
#[track_caller]
fn int(reply: Reply, what: &str) -> i64 {
    match reply {
        Reply::Int(n) => n,
        other => panic!("{what}: expected an integer, got {other:?}"),
    }
}

#[test]
fn session_store_in_memory() {
    let mut engine = Engine::open(Config::in_memory()).expect("an in-memory engine opens");
    let mut session = engine.new_session();

    // Login: the session is a hash with a 30-minute TTL.
    let reply = engine.execute(
        &mut session,
        &[
            b"HSET",
            b"session:abc123",
            b"user_id",
            b"42",
            b"username",
            b"tanaka",
            b"role",
            b"admin",
        ],
    );
    assert_eq!(reply, Reply::Int(3));
    let reply = engine.execute(&mut session, &[b"EXPIRE", b"session:abc123", b"1800"]);
    assert_eq!(reply, Reply::Int(1));

    // Each request reads the session and slides its expiry.
    let reply = engine.execute(&mut session, &[b"HGETALL", b"session:abc123"]);
    assert_eq!(
        reply,
        Reply::Map(vec![
            (bulk("user_id"), bulk("42")),
            (bulk("username"), bulk("tanaka")),
            (bulk("role"), bulk("admin")),
        ])
    );
    let reply = engine.execute(&mut session, &[b"EXPIRE", b"session:abc123", b"1800"]);
    assert_eq!(reply, Reply::Int(1));
    let ttl_s = int(
        engine.execute(&mut session, &[b"TTL", b"session:abc123"]),
        "TTL",
    );
    assert!((1799..=1800).contains(&ttl_s), "TTL {ttl_s}");

    // A field-level update keeps the TTL.
    let reply = engine.execute(
        &mut session,
        &[b"HSET", b"session:abc123", b"role", b"user"],
    );
    assert_eq!(reply, Reply::Int(0));
    let reply = engine.execute(&mut session, &[b"HGET", b"session:abc123", b"role"]);
    assert_eq!(reply, bulk("user"));
    assert!(
        int(
            engine.execute(&mut session, &[b"TTL", b"session:abc123"]),
            "TTL"
        ) > 0
    );

    // Revoking a JWT until it would have expired anyway (its `exp`).
    let reply = engine.execute(
        &mut session,
        &[b"SET", b"blacklist:jti:9f2c", b"1", b"EXAT", b"4102444800"],
    );
    assert_eq!(reply, Reply::ok());
    let reply = engine.execute(&mut session, &[b"EXISTS", b"blacklist:jti:9f2c"]);
    assert_eq!(reply, Reply::Int(1));

    // Logout.
    let reply = engine.execute(&mut session, &[b"DEL", b"session:abc123"]);
    assert_eq!(reply, Reply::Int(1));
    let reply = engine.execute(&mut session, &[b"HGETALL", b"session:abc123"]);
    assert_eq!(reply, Reply::Map(vec![]));
}

#[test]
fn fixed_window_rate_limit_in_memory() {
    let mut engine = Engine::open(Config::in_memory()).expect("an in-memory engine opens");
    let mut session = engine.new_session();
    let limit = 3;

    // With commands: INCR, then EXPIRE NX (sets the TTL only if there is
    // none, so a lost EXPIRE is repaired by the next request).
    let key = b"ratelimit:user42:2026-08-09T12:00";
    for hit in 1..=5 {
        let count = int(engine.execute(&mut session, &[b"INCR", key]), "INCR");
        engine.execute(&mut session, &[b"EXPIRE", key, b"60", b"NX"]);
        assert_eq!(count, hit);
        let allowed = count <= limit;
        assert_eq!(allowed, hit <= 3);
    }
    let ttl_s = int(engine.execute(&mut session, &[b"TTL", key]), "TTL");
    assert!((59..=60).contains(&ttl_s), "TTL {ttl_s}");

    // With the atomic script: one round trip, {allowed, count}.
    let key = b"ratelimit:user43:2026-08-09T12:00";
    let script = FIXED_WINDOW.as_bytes();
    for (hit, allowed) in [(1, 1), (2, 1), (3, 1), (4, 0)] {
        let reply = engine.execute(&mut session, &[b"EVAL", script, b"1", key, b"60", b"3"]);
        assert_eq!(reply, pair(allowed, hit));
    }
    let ttl_s = int(engine.execute(&mut session, &[b"TTL", key]), "TTL");
    assert!((59..=60).contains(&ttl_s), "TTL {ttl_s}");
}

#[test]
fn sliding_window_rate_limit_in_memory() {
    let mut engine = Engine::open(Config::in_memory()).expect("an in-memory engine opens");
    let mut session = engine.new_session();

    // With commands (the seed's sequence): drop what left the window,
    // count, add when under the limit, refresh the key's expiry.
    let key = b"ratelimit:user42";
    let (window_ms, limit) = (60_000_i64, 2_i64);
    let mut admitted = Vec::new();
    for (now_ms, id) in [
        (1_786_348_800_000_i64, "req-1"),
        (1_786_348_810_000, "req-2"),
        (1_786_348_820_000, "req-3"),
        (1_786_348_860_000, "req-4"),
    ] {
        let oldest = (now_ms - window_ms).to_string();
        engine.execute(
            &mut session,
            &[b"ZREMRANGEBYSCORE", key, b"-inf", oldest.as_bytes()],
        );
        let count = int(engine.execute(&mut session, &[b"ZCARD", key]), "ZCARD");
        if count < limit {
            let now = now_ms.to_string();
            engine.execute(&mut session, &[b"ZADD", key, now.as_bytes(), id.as_bytes()]);
            engine.execute(&mut session, &[b"PEXPIRE", key, b"60000"]);
            admitted.push(id);
        }
    }
    assert_eq!(admitted, ["req-1", "req-2", "req-4"]);

    // With the atomic script: the same decisions in one round trip each.
    let key = b"ratelimit:user43";
    let script = SLIDING_WINDOW.as_bytes();
    for (now_ms, id, allowed, count) in [
        ("1786348800000", "req-1", 1, 1),
        ("1786348810000", "req-2", 1, 2),
        ("1786348820000", "req-3", 0, 2),
        ("1786348860000", "req-4", 1, 2),
    ] {
        let reply = engine.execute(
            &mut session,
            &[
                b"EVAL",
                script,
                b"1",
                key,
                now_ms.as_bytes(),
                b"60000",
                b"2",
                id.as_bytes(),
            ],
        );
        assert_eq!(reply, pair(allowed, count), "{id}");
    }
    let reply = engine.execute(&mut session, &[b"ZRANGE", key, b"0", b"-1"]);
    assert_eq!(reply, Reply::Array(vec![bulk("req-2"), bulk("req-4")]));
}

#[test]
fn leaderboard_in_memory() {
    let mut engine = Engine::open(Config::in_memory()).expect("an in-memory engine opens");
    let mut session = engine.new_session();

    for (score, player) in [
        (&b"1500"[..], &b"player:alice"[..]),
        (b"2300", b"player:bob"),
        (b"1800", b"player:carol"),
    ] {
        let reply = engine.execute(&mut session, &[b"ZADD", b"ranking:game", score, player]);
        assert_eq!(reply, Reply::Int(1));
    }
    // RESP2 (a new session's protocol): member, score, member, score, …
    let reply = engine.execute(
        &mut session,
        &[b"ZREVRANGE", b"ranking:game", b"0", b"2", b"WITHSCORES"],
    );
    assert_eq!(
        reply,
        Reply::Array(vec![
            bulk("player:bob"),
            Reply::Double(2300.0),
            bulk("player:carol"),
            Reply::Double(1800.0),
            bulk("player:alice"),
            Reply::Double(1500.0),
        ])
    );
    let reply = engine.execute(
        &mut session,
        &[b"ZREVRANK", b"ranking:game", b"player:carol"],
    );
    assert_eq!(reply, Reply::Int(1));

    // Overwrite a score, add to another.
    let reply = engine.execute(
        &mut session,
        &[b"ZADD", b"ranking:game", b"2500", b"player:alice"],
    );
    assert_eq!(reply, Reply::Int(0));
    let reply = engine.execute(
        &mut session,
        &[b"ZINCRBY", b"ranking:game", b"200", b"player:carol"],
    );
    assert_eq!(reply, Reply::Double(2000.0));
    let reply = engine.execute(
        &mut session,
        &[b"ZREVRANK", b"ranking:game", b"player:alice"],
    );
    assert_eq!(reply, Reply::Int(0));
    let reply = engine.execute(&mut session, &[b"ZSCORE", b"ranking:game", b"player:carol"]);
    assert_eq!(reply, Reply::Double(2000.0));
    let reply = engine.execute(
        &mut session,
        &[b"ZREVRANK", b"ranking:game", b"player:nobody"],
    );
    assert_eq!(reply, Reply::Null);

    // RESP3 (after HELLO 3): one [member, score] pair per entry.
    engine.execute(&mut session, &[b"HELLO", b"3"]);
    let reply = engine.execute(
        &mut session,
        &[b"ZREVRANGE", b"ranking:game", b"0", b"2", b"WITHSCORES"],
    );
    assert_eq!(
        reply,
        Reply::Array(vec![
            Reply::Array(vec![bulk("player:alice"), Reply::Double(2500.0)]),
            Reply::Array(vec![bulk("player:bob"), Reply::Double(2300.0)]),
            Reply::Array(vec![bulk("player:carol"), Reply::Double(2000.0)]),
        ])
    );
}

#[test]
fn distributed_lock_in_memory() {
    let mut engine = Engine::open(Config::in_memory()).expect("an in-memory engine opens");
    let mut session = engine.new_session();
    let key = b"lock:order:12345";
    let token = "64f3b18d-4f05-4e78-9e6b-67a32b2e811c"; // uuid per acquisition
    let other = "0b8a1e3c-2f57-4c8e-9a4d-6b2f1c0e9d33";

    // Acquire: only the first SET NX PX succeeds.
    let acquire = |engine: &mut Engine, session: &mut hozon::Session, who: &str| {
        engine.execute(
            session,
            &[b"SET", key, who.as_bytes(), b"NX", b"PX", b"30000"],
        )
    };
    assert_eq!(acquire(&mut engine, &mut session, token), Reply::ok());
    assert_eq!(acquire(&mut engine, &mut session, other), Reply::Null);

    // Extend (compare-and-PEXPIRE) and release (compare-and-delete), both
    // refused for a token that does not hold the lock.
    let extend = LOCK_EXTEND.as_bytes();
    let release = LOCK_RELEASE.as_bytes();
    let reply = engine.execute(
        &mut session,
        &[b"EVAL", extend, b"1", key, other.as_bytes(), b"60000"],
    );
    assert_eq!(reply, Reply::Int(0));
    let reply = engine.execute(
        &mut session,
        &[b"EVAL", extend, b"1", key, token.as_bytes(), b"60000"],
    );
    assert_eq!(reply, Reply::Int(1));
    let left_ms = int(engine.execute(&mut session, &[b"PTTL", key]), "PTTL");
    assert!((59_000..=60_000).contains(&left_ms), "PTTL {left_ms}");
    let reply = engine.execute(
        &mut session,
        &[b"EVAL", release, b"1", key, other.as_bytes()],
    );
    assert_eq!(reply, Reply::Int(0));
    let reply = engine.execute(
        &mut session,
        &[b"EVAL", release, b"1", key, token.as_bytes()],
    );
    assert_eq!(reply, Reply::Int(1));
    assert_eq!(engine.execute(&mut session, &[b"GET", key]), Reply::Null);

    // After expiry the next owner's lock is safe from the old owner.
    let short = b"lock:short";
    let reply = engine.execute(
        &mut session,
        &[b"SET", short, token.as_bytes(), b"NX", b"PX", b"20"],
    );
    assert_eq!(reply, Reply::ok());
    std::thread::sleep(std::time::Duration::from_millis(40));
    let reply = engine.execute(
        &mut session,
        &[b"SET", short, other.as_bytes(), b"NX", b"PX", b"30000"],
    );
    assert_eq!(reply, Reply::ok());
    let reply = engine.execute(
        &mut session,
        &[b"EVAL", release, b"1", short, token.as_bytes()],
    );
    assert_eq!(reply, Reply::Int(0));
    assert_eq!(engine.execute(&mut session, &[b"GET", short]), bulk(other));

    // The release is logged as its effect (DEL), never as the script.
    let effects: Vec<Vec<String>> = engine
        .take_effects()
        .into_iter()
        .map(|e| {
            e.argv
                .iter()
                .map(|a| String::from_utf8_lossy(a).to_ascii_uppercase())
                .collect()
        })
        .collect();
    assert!(effects.iter().all(|argv| argv[0] != "EVAL"), "{effects:?}");
    assert!(
        effects.contains(&vec!["DEL".to_string(), "LOCK:ORDER:12345".to_string()]),
        "{effects:?}"
    );
}

/// Every pattern with the default durable configuration (`appendonly yes`,
/// `appendfsync everysec`) in a data directory; the engine is closed and
/// reopened, and the keyspace (values and absolute expiry times) is the
/// same, except for the lock that expired while the engine was closed.
#[test]
fn use_cases_survive_reopen_with_appendonly() {
    let dir = tempfile::tempdir().expect("a temporary directory");
    // The documented defaults, with the data directory of the application.
    let config = Config {
        dir: dir.path().to_path_buf(),
        ..Config::default()
    };
    assert!(config.appendonly, "the default is appendonly yes");
    assert_eq!(config.appendfsync, hozon::config::AppendFsync::Everysec);

    let mut engine = Engine::open(config.clone()).expect("the engine opens on a new directory");
    let mut session = engine.new_session();
    let token = "64f3b18d-4f05-4e78-9e6b-67a32b2e811c";
    let run = |engine: &mut Engine, session: &mut hozon::Session, args: &[&[u8]]| {
        engine.execute(session, args)
    };
    // Session store.
    run(
        &mut engine,
        &mut session,
        &[
            b"HSET",
            b"session:abc123",
            b"user_id",
            b"42",
            b"role",
            b"admin",
        ],
    );
    run(
        &mut engine,
        &mut session,
        &[b"EXPIRE", b"session:abc123", b"1800"],
    );
    // Fixed window, by command and by script.
    run(
        &mut engine,
        &mut session,
        &[b"INCR", b"ratelimit:user42:2026-08-09T12:00"],
    );
    run(
        &mut engine,
        &mut session,
        &[
            b"EXPIRE",
            b"ratelimit:user42:2026-08-09T12:00",
            b"60",
            b"NX",
        ],
    );
    for _ in 0..2 {
        let reply = run(
            &mut engine,
            &mut session,
            &[
                b"EVAL",
                FIXED_WINDOW.as_bytes(),
                b"1",
                b"ratelimit:user43:2026-08-09T12:00",
                b"60",
                b"3",
            ],
        );
        assert!(matches!(reply, Reply::Array(_)), "{reply:?}");
    }
    // Sliding window by script (ZADD and PEXPIRE: one MULTI/EXEC unit in the log).
    let now_ms = hozon::engine::now_ms().to_string();
    let reply = run(
        &mut engine,
        &mut session,
        &[
            b"EVAL",
            SLIDING_WINDOW.as_bytes(),
            b"1",
            b"ratelimit:user42",
            now_ms.as_bytes(),
            b"60000",
            b"2",
            b"req-1",
        ],
    );
    assert_eq!(reply, pair(1, 1));
    // Leaderboard.
    run(
        &mut engine,
        &mut session,
        &[
            b"ZADD",
            b"ranking:game",
            b"1500",
            b"player:alice",
            b"2300",
            b"player:bob",
        ],
    );
    run(
        &mut engine,
        &mut session,
        &[b"ZINCRBY", b"ranking:game", b"900", b"player:alice"],
    );
    // Locks: one held, one released by script, one about to expire.
    let reply = run(
        &mut engine,
        &mut session,
        &[
            b"SET",
            b"lock:order:1",
            token.as_bytes(),
            b"NX",
            b"PX",
            b"30000",
        ],
    );
    assert_eq!(reply, Reply::ok());
    run(
        &mut engine,
        &mut session,
        &[
            b"SET",
            b"lock:order:2",
            token.as_bytes(),
            b"NX",
            b"PX",
            b"30000",
        ],
    );
    let reply = run(
        &mut engine,
        &mut session,
        &[
            b"EVAL",
            LOCK_RELEASE.as_bytes(),
            b"1",
            b"lock:order:2",
            token.as_bytes(),
        ],
    );
    assert_eq!(reply, Reply::Int(1));
    run(
        &mut engine,
        &mut session,
        &[
            b"SET",
            b"lock:order:3",
            token.as_bytes(),
            b"NX",
            b"PX",
            b"500",
        ],
    );
    let lock_3_acquired = std::time::Instant::now();
    let reply = run(
        &mut engine,
        &mut session,
        &[
            b"EVAL",
            LOCK_EXTEND.as_bytes(),
            b"1",
            b"lock:order:1",
            token.as_bytes(),
            b"45000",
        ],
    );
    assert_eq!(reply, Reply::Int(1));

    let mut before = dump(&mut engine);
    // Every acknowledged write is already in the file (write(2) before
    // execute returns); sync makes it survive power loss too.
    engine.sync().expect("fsync succeeds");
    drop(engine);

    // The log holds effects, never the scripts: EXPIRE/PEXPIRE became
    // absolute PEXPIREAT, and no EVAL is replayed.
    let aof = std::fs::read(dir.path().join("appendonly.aof")).expect("the AOF exists");
    let text = String::from_utf8_lossy(&aof).to_ascii_uppercase();
    assert!(
        !text.contains("\r\nEVAL\r\n"),
        "the AOF logs scripts' effects, not EVAL"
    );
    assert!(
        text.contains("\r\nMULTI\r\n"),
        "the sliding-window script's writes are one MULTI/EXEC unit"
    );
    assert!(
        text.contains("\r\nPEXPIREAT\r\n"),
        "relative expiry is logged as absolute"
    );

    // lock:order:3 (PX 500) expires while the engine is closed: expiry is
    // wall-clock time, downtime counts.
    let closed_for =
        std::time::Duration::from_millis(600).saturating_sub(lock_3_acquired.elapsed());
    std::thread::sleep(closed_for);
    let mut engine = Engine::open(config).expect("the engine reopens its directory");
    let after = dump(&mut engine);
    let expired = before.remove(&(0, "lock:order:3".to_string()));
    assert!(expired.is_some(), "lock:order:3 was there before closing");
    assert_eq!(after, before);
    assert!(
        !after.contains_key(&(0, "lock:order:2".to_string())),
        "released"
    );

    // The reopened engine goes on: the script counts on from the log.
    let mut session = engine.new_session();
    let reply = engine.execute(
        &mut session,
        &[
            b"EVAL",
            FIXED_WINDOW.as_bytes(),
            b"1",
            b"ratelimit:user43:2026-08-09T12:00",
            b"60",
            b"3",
        ],
    );
    assert_eq!(reply, pair(1, 3));
    let reply = engine.execute(
        &mut session,
        &[
            b"EVAL",
            LOCK_RELEASE.as_bytes(),
            b"1",
            b"lock:order:1",
            token.as_bytes(),
        ],
    );
    assert_eq!(reply, Reply::Int(1));
}
