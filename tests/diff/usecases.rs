//! Differential tests: the seed documents' use cases, end to end, as an
//! application would issue them (the session store, leaderboard and
//! sliding-window tests also live with their families; these add the
//! fixed-window rate limiter and the distributed lock, and run each pattern
//! in RESP2 and RESP3).
//!
//! The tests below the first three back docs/use-cases.md: its command
//! transcripts line for line (`*_transcript`), and its Lua scripts (lock
//! release and extension, atomic fixed- and sliding-window rate limits),
//! whose replies are asserted as the document shows them and compared
//! with Redis, in RESP2 and RESP3.

use crate::harness::{show, Pair};

/// Both replies are integers within `tolerance` of each other (PTTL-style
/// replies taken a few microseconds apart on two servers).
#[track_caller]
fn check_int_close(p: &mut Pair, args: &[&str], tolerance: i64) -> i64 {
    let (r, h) = p.both(args);
    let parse = |b: &[u8]| -> i64 {
        let text = String::from_utf8_lossy(b);
        text.trim_start_matches(':')
            .trim_end()
            .parse()
            .unwrap_or_else(|_| panic!("{args:?}: not an integer reply: {}", show(b)))
    };
    let (rv, hv) = (parse(&r), parse(&h));
    assert!(
        (rv - hv).abs() <= tolerance,
        "{args:?}: redis {rv}, hozon {hv}"
    );
    hv
}

#[test]
fn fixed_window_rate_limit() {
    for resp3 in [false, true] {
        let mut p = Pair::new();
        if resp3 {
            p.resp3();
        }
        // INCR ratelimit:{user}:{window}; EXPIRE on the first hit; refuse
        // above the limit of 5 per window.
        for hit in 1..=7 {
            let reply = p.check(&["INCR", "ratelimit:alice:28993011"]);
            if reply == b":1\r\n" {
                p.check(&["EXPIRE", "ratelimit:alice:28993011", "60"]);
            }
            let allowed = hit <= 5;
            assert_eq!(
                reply,
                format!(":{hit}\r\n").into_bytes(),
                "allowed={allowed}"
            );
        }
        p.check(&["TTL", "ratelimit:alice:28993011"]);
        p.check(&["GET", "ratelimit:alice:28993011"]);
        // A second user's window is independent; EXPIRE NX keeps the first TTL.
        p.script(
            "INCR ratelimit:bob:28993011\n\
             EXPIRE ratelimit:bob:28993011 60 NX\n\
             INCR ratelimit:bob:28993011\n\
             EXPIRE ratelimit:bob:28993011 60 NX\n\
             TTL ratelimit:bob:28993011\n",
        );
    }
}

#[test]
fn distributed_lock_acquire_inspect_release() {
    for resp3 in [false, true] {
        let mut p = Pair::new();
        if resp3 {
            p.resp3();
        }
        let owner = "7c9e6679-7425-40de-944b-e07fc1f90ae7";
        let other = "0b8a1e3c-2f57-4c8e-9a4d-6b2f1c0e9d33";
        // Acquire: only the first SET NX PX wins.
        p.check(&["SET", "lock:order:42", owner, "NX", "PX", "30000"]);
        p.check(&["SET", "lock:order:42", other, "NX", "PX", "30000"]);
        // Inspect: the owner, and the time left.
        p.check(&["GET", "lock:order:42"]);
        let left = check_int_close(&mut p, &["PTTL", "lock:order:42"], 50);
        assert!((29_000..=30_000).contains(&left), "PTTL {left}");
        // Extend only as the owner would (after checking GET), keep TTL semantics.
        p.check(&["PEXPIRE", "lock:order:42", "60000", "GT"]);
        check_int_close(&mut p, &["PTTL", "lock:order:42"], 50);
        // Release: compare-and-delete is done by the client here (scripting
        // comes later): GET, compare, DEL.
        p.check(&["GET", "lock:order:42"]);
        p.check(&["DEL", "lock:order:42"]);
        p.check(&["GET", "lock:order:42"]);
        p.check(&["PTTL", "lock:order:42"]);
        // Free again: the other owner acquires it; SET … GET shows who had it.
        p.check(&["SET", "lock:order:42", other, "NX", "PX", "30000"]);
        p.check(&["SET", "lock:order:42", owner, "XX", "GET", "KEEPTTL"]);
        // A lock that expires is free for the next owner.
        p.check(&["SET", "lock:short", owner, "NX", "PX", "1"]);
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(2);
        while p.hozon(&["EXISTS", "lock:short"]) != b":0\r\n"
            || p.redis(&["EXISTS", "lock:short"]) != b":0\r\n"
        {
            assert!(
                std::time::Instant::now() < deadline,
                "a 1 ms lock never expired"
            );
        }
        p.check(&["SET", "lock:short", other, "NX", "PX", "30000"]);
        p.check(&["GET", "lock:short"]);
    }
}

#[test]
fn session_store_leaderboard_and_sliding_window_together() {
    for resp3 in [false, true] {
        let mut p = Pair::new();
        if resp3 {
            p.resp3();
        }
        p.script(
            "HSET session:9f2c user alice role admin cart 3\n\
             EXPIRE session:9f2c 1800\n\
             HGETALL session:9f2c\n\
             HINCRBY session:9f2c cart 1\n\
             HGET session:9f2c cart\n\
             TTL session:9f2c\n\
             ZADD leaderboard 1200 alice 900 bob 1500 carol\n\
             ZINCRBY leaderboard 400 bob\n\
             ZREVRANGE leaderboard 0 2 WITHSCORES\n\
             ZREVRANK leaderboard bob\n\
             ZSCORE leaderboard bob\n\
             ZREMRANGEBYSCORE ratelimit:sliding:alice 0 1700000000000\n\
             ZCARD ratelimit:sliding:alice\n\
             ZADD ratelimit:sliding:alice 1700000060000 req-1\n\
             ZADD ratelimit:sliding:alice 1700000060500 req-2\n\
             ZREMRANGEBYSCORE ratelimit:sliding:alice 0 1700000000500\n\
             ZCARD ratelimit:sliding:alice\n\
             EXPIRE ratelimit:sliding:alice 60\n\
             TTL ratelimit:sliding:alice\n",
        );
    }
}

// ---------------------------------------------------------------------------
// The scripted (Lua) side of the use cases, as docs/use-cases.md shows them.
// Every script text here is the one in the document, byte for byte (the
// SHA1 digests asserted below depend on it).

/// The seed documents' safe lock release: delete the lock only when it
/// still holds the caller's token (compare-and-delete).
const LOCK_RELEASE: &str = r#"if redis.call("get", KEYS[1]) == ARGV[1] then return redis.call("del", KEYS[1]) else return 0 end"#;

/// SHA1 of [`LOCK_RELEASE`] (what SCRIPT LOAD answers and EVALSHA takes).
const LOCK_RELEASE_SHA: &str = "cf0e94b2e9ffc7e04395cf88f7583fc309985910";

/// Compare-and-extend (the seed's "watchdog"): a new PEXPIRE only while
/// the lock still holds the caller's token.
const LOCK_EXTEND: &str = r#"if redis.call("get", KEYS[1]) == ARGV[1] then return redis.call("pexpire", KEYS[1], ARGV[2]) else return 0 end"#;

/// SHA1 of [`LOCK_EXTEND`].
const LOCK_EXTEND_SHA: &str = "a7aba3bc5d6e99b3003da8b9d80a63b9f4092ecf";

/// Fixed-window rate limit, atomic: KEYS[1] the window's counter, ARGV[1]
/// the window in seconds, ARGV[2] the limit. Returns {allowed, count}.
const FIXED_WINDOW: &str = r#"local n = redis.call("INCR", KEYS[1])
if n == 1 then redis.call("EXPIRE", KEYS[1], ARGV[1]) end
if n > tonumber(ARGV[2]) then return {0, n} end
return {1, n}"#;

/// SHA1 of [`FIXED_WINDOW`].
const FIXED_WINDOW_SHA: &str = "b9de49c0f3271c0f0d1ad0e56c850417ae63741d";

/// Sliding-window rate limit, atomic: KEYS[1] the user's sorted set,
/// ARGV[1] now in ms, ARGV[2] the window in ms, ARGV[3] the limit, ARGV[4]
/// a unique request id. Returns {allowed, requests in the window}.
const SLIDING_WINDOW: &str = r#"redis.call("ZREMRANGEBYSCORE", KEYS[1], "-inf", ARGV[1] - ARGV[2])
local count = redis.call("ZCARD", KEYS[1])
if count < tonumber(ARGV[3]) then
  redis.call("ZADD", KEYS[1], ARGV[1], ARGV[4])
  redis.call("PEXPIRE", KEYS[1], ARGV[2])
  return {1, count + 1}
end
return {0, count}"#;

/// SHA1 of [`SLIDING_WINDOW`].
const SLIDING_WINDOW_SHA: &str = "d37751b18ba8ea1f7dd1fb78389eb35a18f4e682";

/// How far apart the two servers' PTTL replies may be: they are taken one
/// after the other, and a loaded machine can delay the second one.
const PTTL_TOLERANCE_MS: i64 = 250;

/// The lock owner's token (a UUID per acquisition, as in the seed).
const OWNER: &str = "64f3b18d-4f05-4e78-9e6b-67a32b2e811c";
/// Another process's token.
const INTRUDER: &str = "0b8a1e3c-2f57-4c8e-9a4d-6b2f1c0e9d33";

/// Runs `f` on a fresh pair in RESP2, then on another in RESP3, with the
/// protocol's encoding of a null bulk reply.
fn in_both_protocols(f: impl Fn(&mut Pair, &'static [u8])) {
    for resp3 in [false, true] {
        let mut p = Pair::new();
        let nil: &[u8] = if resp3 {
            p.resp3();
            b"_\r\n"
        } else {
            b"$-1\r\n"
        };
        f(&mut p, nil);
    }
}

/// Checks a command against Redis and also asserts the reply the
/// document shows, so the document is proven even where hozon lags.
#[track_caller]
fn expect(p: &mut Pair, args: &[&str], reply: &[u8]) {
    let (r, h) = p.both(args);
    assert_eq!(
        show(&r),
        show(reply),
        "{args:?}: Redis's reply differs from docs/use-cases.md"
    );
    assert_eq!(
        show(&h),
        show(&r),
        "{args:?}: hozon's reply differs from Redis's"
    );
}

/// Waits until `key` has expired on both servers.
fn wait_until_expired(p: &mut Pair, key: &str) {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(3);
    while p.hozon(&["EXISTS", key]) != b":0\r\n" || p.redis(&["EXISTS", key]) != b":0\r\n" {
        assert!(std::time::Instant::now() < deadline, "{key} never expired");
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
}

#[test]
fn lock_release_script_deletes_only_the_owners_lock() {
    in_both_protocols(|p, nil| {
        let key = "lock:order:12345";
        expect(p, &["SET", key, OWNER, "NX", "PX", "30000"], b"+OK\r\n");
        // A second process cannot take it.
        expect(p, &["SET", key, INTRUDER, "NX", "PX", "30000"], nil);
        // A non-owner's release is refused and leaves the lock alone.
        expect(p, &["EVAL", LOCK_RELEASE, "1", key, INTRUDER], b":0\r\n");
        p.check(&["GET", key]);
        check_int_close(p, &["PTTL", key], PTTL_TOLERANCE_MS);
        // The owner's release deletes it; a second release finds nothing.
        expect(p, &["EVAL", LOCK_RELEASE, "1", key, OWNER], b":1\r\n");
        expect(p, &["EXISTS", key], b":0\r\n");
        expect(p, &["EVAL", LOCK_RELEASE, "1", key, OWNER], b":0\r\n");
        // Free again: the next process acquires it.
        expect(p, &["SET", key, INTRUDER, "NX", "PX", "30000"], b"+OK\r\n");
        expect(p, &["EVAL", LOCK_RELEASE, "1", key, INTRUDER], b":1\r\n");
    });
}

#[test]
fn lock_release_script_after_expiry_spares_the_next_owner() {
    // The seed's failure story: A's lock expires while A still works, B
    // takes the lock, then A "releases": the token check must spare B's.
    in_both_protocols(|p, nil| {
        let key = "lock:order:12345";
        expect(p, &["SET", key, OWNER, "NX", "PX", "50"], b"+OK\r\n");
        wait_until_expired(p, key);
        expect(p, &["EVAL", LOCK_RELEASE, "1", key, OWNER], b":0\r\n");
        expect(p, &["SET", key, INTRUDER, "NX", "PX", "30000"], b"+OK\r\n");
        expect(p, &["EVAL", LOCK_RELEASE, "1", key, OWNER], b":0\r\n");
        expect(
            p,
            &["EVAL", LOCK_EXTEND, "1", key, OWNER, "30000"],
            b":0\r\n",
        );
        let owner = format!("${}\r\n{INTRUDER}\r\n", INTRUDER.len());
        expect(p, &["GET", key], owner.as_bytes());
        expect(p, &["EVAL", LOCK_RELEASE, "1", key, INTRUDER], b":1\r\n");
        expect(p, &["GET", key], nil);
    });
}

#[test]
fn lock_extend_script_renews_only_for_the_owner() {
    in_both_protocols(|p, nil| {
        let key = "lock:order:12345";
        expect(p, &["SET", key, OWNER, "NX", "PX", "30000"], b"+OK\r\n");
        expect(
            p,
            &["EVAL", LOCK_EXTEND, "1", key, OWNER, "60000"],
            b":1\r\n",
        );
        let left = check_int_close(p, &["PTTL", key], PTTL_TOLERANCE_MS);
        assert!((59_000..=60_000).contains(&left), "PTTL {left}");
        // Not the owner: the TTL stays what the owner set.
        expect(
            p,
            &["EVAL", LOCK_EXTEND, "1", key, INTRUDER, "90000"],
            b":0\r\n",
        );
        let left = check_int_close(p, &["PTTL", key], PTTL_TOLERANCE_MS);
        assert!((59_000..=60_000).contains(&left), "PTTL {left}");
        // A bad duration is the script's error, the lock is untouched.
        expect(
            p,
            &["EVAL", LOCK_EXTEND, "1", key, OWNER, "soon"],
            format!(
                "-ERR value is not an integer or out of range script: {LOCK_EXTEND_SHA}, on @user_script:1.\r\n"
            )
            .as_bytes(),
        );
        check_int_close(p, &["PTTL", key], PTTL_TOLERANCE_MS);
        // Released, there is nothing left to extend.
        expect(p, &["EVAL", LOCK_RELEASE, "1", key, OWNER], b":1\r\n");
        expect(
            p,
            &["EVAL", LOCK_EXTEND, "1", key, OWNER, "60000"],
            b":0\r\n",
        );
        expect(p, &["PTTL", key], b":-2\r\n");
        expect(p, &["GET", key], nil);
    });
}

#[test]
fn lock_scripts_through_script_load_and_evalsha() {
    // What client libraries do (go-redis's Script.Run): EVALSHA first,
    // EVAL on NOSCRIPT, which also caches the script for the next EVALSHA.
    in_both_protocols(|p, nil| {
        let key = "lock:user:12345";
        let sha_reply = |sha: &str| format!("$40\r\n{sha}\r\n");
        expect(p, &["SET", key, OWNER, "NX", "PX", "30000"], b"+OK\r\n");
        expect(
            p,
            &["EVALSHA", LOCK_RELEASE_SHA, "1", key, OWNER],
            b"-NOSCRIPT No matching script. Please use EVAL.\r\n",
        );
        expect(p, &["EVAL", LOCK_RELEASE, "1", key, INTRUDER], b":0\r\n");
        expect(p, &["SCRIPT", "EXISTS", LOCK_RELEASE_SHA], b"*1\r\n:1\r\n");
        expect(
            p,
            &["EVALSHA", LOCK_RELEASE_SHA, "1", key, OWNER],
            b":1\r\n",
        );
        // SCRIPT LOAD answers the digest the document shows for each script.
        for (script, sha) in [
            (LOCK_RELEASE, LOCK_RELEASE_SHA),
            (LOCK_EXTEND, LOCK_EXTEND_SHA),
            (FIXED_WINDOW, FIXED_WINDOW_SHA),
            (SLIDING_WINDOW, SLIDING_WINDOW_SHA),
        ] {
            expect(p, &["SCRIPT", "LOAD", script], sha_reply(sha).as_bytes());
        }
        expect(p, &["SET", key, OWNER, "NX", "PX", "30000"], b"+OK\r\n");
        expect(
            p,
            &["EVALSHA", LOCK_EXTEND_SHA, "1", key, OWNER, "45000"],
            b":1\r\n",
        );
        check_int_close(p, &["PTTL", key], PTTL_TOLERANCE_MS);
        expect(
            p,
            &["EVALSHA", LOCK_RELEASE_SHA, "1", key, OWNER],
            b":1\r\n",
        );
        expect(p, &["SCRIPT", "FLUSH"], b"+OK\r\n");
        expect(
            p,
            &["EVALSHA", LOCK_RELEASE_SHA, "1", key, OWNER],
            b"-NOSCRIPT No matching script. Please use EVAL.\r\n",
        );
        expect(p, &["GET", key], nil);
    });
}

#[test]
fn lock_release_script_errors_the_seed_text_and_a_colliding_key() {
    in_both_protocols(|p, nil| {
        // The seed text shows `KEYS` and `ARGV` without `[1]` (lost in
        // extraction); as written, Redis refuses the table argument.
        let seed = "if redis.call('get', KEYS) == ARGV then return redis.call('del', KEYS) else return 0 end";
        expect(
            p,
            &["EVAL", seed, "1", "lock:user:12345", OWNER],
            b"-ERR Lua redis lib command arguments must be strings or integers script: 201baf3779b51d9d8fe6af0c6b7901160d9854bf, on @user_script:1.\r\n",
        );
        // Why the `lock:` prefix: a lock named like a cached hash collides.
        expect(p, &["HSET", "user:12345", "name", "tanaka"], b":1\r\n");
        expect(p, &["SET", "user:12345", OWNER, "NX", "PX", "30000"], nil);
        expect(
            p,
            &["EVAL", LOCK_RELEASE, "1", "user:12345", OWNER],
            format!(
                "-WRONGTYPE Operation against a key holding the wrong kind of value script: {LOCK_RELEASE_SHA}, on @user_script:1.\r\n"
            )
            .as_bytes(),
        );
        expect(p, &["HGET", "user:12345", "name"], b"$6\r\ntanaka\r\n");
    });
}

#[test]
fn fixed_window_script_counts_and_refuses_over_the_limit() {
    in_both_protocols(|p, _| {
        let key = "ratelimit:user42:2026-08-09T12:00";
        for (hit, allowed) in [(1, 1), (2, 1), (3, 1), (4, 0), (5, 0)] {
            let reply = format!("*2\r\n:{allowed}\r\n:{hit}\r\n");
            expect(
                p,
                &["EVAL", FIXED_WINDOW, "1", key, "60", "3"],
                reply.as_bytes(),
            );
        }
        // Only the first hit set the expiry.
        let ttl = check_int_close(p, &["TTL", key], 1);
        assert!((59..=60).contains(&ttl), "TTL {ttl}");
        expect(p, &["GET", key], b"$1\r\n5\r\n");
        // Another user's window is independent.
        expect(
            p,
            &[
                "EVAL",
                FIXED_WINDOW,
                "1",
                "ratelimit:user43:2026-08-09T12:00",
                "60",
                "3",
            ],
            b"*2\r\n:1\r\n:1\r\n",
        );
        // Through EVALSHA, as a client library sends it after SCRIPT LOAD.
        p.check(&["SCRIPT", "LOAD", FIXED_WINDOW]);
        expect(
            p,
            &["EVALSHA", FIXED_WINDOW_SHA, "1", key, "60", "3"],
            b"*2\r\n:0\r\n:6\r\n",
        );
        // A limit that is not a number is the script's runtime error.
        expect(
            p,
            &["EVAL", FIXED_WINDOW, "1", "ratelimit:x", "60", "many"],
            format!(
                "-ERR user_script:3: attempt to compare nil with number script: {FIXED_WINDOW_SHA}, on @user_script:3.\r\n"
            )
            .as_bytes(),
        );
        // A window that expired starts again at 1 with a fresh TTL.
        expect(
            p,
            &["EVAL", FIXED_WINDOW, "1", "ratelimit:short", "1", "3"],
            b"*2\r\n:1\r\n:1\r\n",
        );
        p.check(&["PEXPIRE", "ratelimit:short", "20"]);
        wait_until_expired(p, "ratelimit:short");
        expect(
            p,
            &["EVAL", FIXED_WINDOW, "1", "ratelimit:short", "1", "3"],
            b"*2\r\n:1\r\n:1\r\n",
        );
        check_int_close(p, &["TTL", "ratelimit:short"], 1);
    });
}

#[test]
fn sliding_window_script_admits_within_the_window() {
    in_both_protocols(|p, nil| {
        let key = "ratelimit:user42";
        // Limit 2 per 60 s; the client supplies now (ms) and a request id.
        let steps = [
            ("1786348800000", "req-1", "*2\r\n:1\r\n:1\r\n"),
            ("1786348810000", "req-2", "*2\r\n:1\r\n:2\r\n"),
            ("1786348820000", "req-3", "*2\r\n:0\r\n:2\r\n"),
            // 60 s after req-1: req-1 left the window, req-2 is still in it.
            ("1786348860000", "req-4", "*2\r\n:1\r\n:2\r\n"),
        ];
        for (now_ms, id, reply) in steps {
            expect(
                p,
                &["EVAL", SLIDING_WINDOW, "1", key, now_ms, "60000", "2", id],
                reply.as_bytes(),
            );
        }
        p.check(&["ZRANGE", key, "0", "-1", "WITHSCORES"]);
        let left = check_int_close(p, &["PTTL", key], PTTL_TOLERANCE_MS);
        assert!((59_000..=60_000).contains(&left), "PTTL {left}");
        // A refused request left no entry behind.
        expect(p, &["ZSCORE", key, "req-3"], nil);
        p.check(&["SCRIPT", "LOAD", SLIDING_WINDOW]);
        expect(
            p,
            &[
                "EVALSHA",
                SLIDING_WINDOW_SHA,
                "1",
                key,
                "1786348930000",
                "60000",
                "2",
                "req-5",
            ],
            b"*2\r\n:1\r\n:1\r\n",
        );
        p.check(&["ZRANGE", key, "0", "-1", "WITHSCORES"]);
        // The same key holding a string is the script's WRONGTYPE error.
        p.check(&["SET", "ratelimit:str", "1"]);
        expect(
            p,
            &["EVAL", SLIDING_WINDOW, "1", "ratelimit:str", "1786348800000", "60000", "2", "r"],
            format!(
                "-WRONGTYPE Operation against a key holding the wrong kind of value script: {SLIDING_WINDOW_SHA}, on @user_script:1.\r\n"
            )
            .as_bytes(),
        );
    });
}

// ---------------------------------------------------------------------------
// The command transcripts of docs/use-cases.md, line for line: in RESP2 each
// reply must be the one the document shows (as raw RESP) and Redis's; in
// RESP3 hozon's must be Redis's.

/// Runs `lines` (redis-cli quoting, with the RESP2 reply each gets) on a
/// RESP2 pair, then on a RESP3 pair comparing with Redis only.
#[track_caller]
fn transcript(lines: &[(&str, &str)]) {
    in_both_protocols(|p, nil| {
        let resp3 = nil == b"_\r\n";
        for (line, reply) in lines {
            let args = crate::harness::split_line(line);
            let refs: Vec<&[u8]> = args.iter().map(Vec::as_slice).collect();
            if resp3 {
                p.check_bytes(&refs);
                continue;
            }
            let (r, h) = p.both_bytes(&refs);
            assert_eq!(
                show(&r),
                show(reply.as_bytes()),
                "{line}: Redis's reply differs from docs/use-cases.md"
            );
            assert_eq!(
                show(&h),
                show(&r),
                "{line}: hozon's reply differs from Redis's"
            );
        }
    });
}

#[test]
fn session_store_transcript() {
    transcript(&[
        ("HSET session:abc123 user_id 42 username tanaka role admin", ":3\r\n"),
        ("EXPIRE session:abc123 1800", ":1\r\n"),
        (
            "HGETALL session:abc123",
            "*6\r\n$7\r\nuser_id\r\n$2\r\n42\r\n$8\r\nusername\r\n$6\r\ntanaka\r\n$4\r\nrole\r\n$5\r\nadmin\r\n",
        ),
        ("EXPIRE session:abc123 1800", ":1\r\n"),
        ("TTL session:abc123", ":1800\r\n"),
        ("HSET session:abc123 role user", ":0\r\n"),
        ("HGET session:abc123 role", "$4\r\nuser\r\n"),
        ("TTL session:abc123", ":1800\r\n"),
        ("SET blacklist:jti:9f2c 1 EXAT 4102444800", "+OK\r\n"),
        ("EXISTS blacklist:jti:9f2c", ":1\r\n"),
        ("DEL session:abc123", ":1\r\n"),
        ("HGETALL session:abc123", "*0\r\n"),
        ("EXISTS session:abc123", ":0\r\n"),
        // Login as one transaction: never a session without its TTL.
        ("MULTI", "+OK\r\n"),
        ("HSET session:def456 user_id 43 username suzuki", "+QUEUED\r\n"),
        ("EXPIRE session:def456 1800", "+QUEUED\r\n"),
        ("EXEC", "*2\r\n:2\r\n:1\r\n"),
        ("TTL session:def456", ":1800\r\n"),
    ]);
}

#[test]
fn fixed_window_commands_transcript() {
    transcript(&[
        ("INCR ratelimit:user42:2026-08-09T12:00", ":1\r\n"),
        ("EXPIRE ratelimit:user42:2026-08-09T12:00 60 NX", ":1\r\n"),
        ("INCR ratelimit:user42:2026-08-09T12:00", ":2\r\n"),
        ("EXPIRE ratelimit:user42:2026-08-09T12:00 60 NX", ":0\r\n"),
        ("TTL ratelimit:user42:2026-08-09T12:00", ":60\r\n"),
        ("GET ratelimit:user42:2026-08-09T12:00", "$1\r\n2\r\n"),
    ]);
}

#[test]
fn sliding_window_commands_transcript() {
    transcript(&[
        // req-1 at 1786348800000 ms; limit 2 per 60000 ms.
        (
            "ZREMRANGEBYSCORE ratelimit:user42 -inf 1786348740000",
            ":0\r\n",
        ),
        ("ZCARD ratelimit:user42", ":0\r\n"),
        ("ZADD ratelimit:user42 1786348800000 req-1", ":1\r\n"),
        ("PEXPIRE ratelimit:user42 60000", ":1\r\n"),
        // req-2, 10 s later.
        (
            "ZREMRANGEBYSCORE ratelimit:user42 -inf 1786348750000",
            ":0\r\n",
        ),
        ("ZCARD ratelimit:user42", ":1\r\n"),
        ("ZADD ratelimit:user42 1786348810000 req-2", ":1\r\n"),
        ("PEXPIRE ratelimit:user42 60000", ":1\r\n"),
        // req-3, 20 s after req-1: at the limit, refused (nothing added).
        (
            "ZREMRANGEBYSCORE ratelimit:user42 -inf 1786348760000",
            ":0\r\n",
        ),
        ("ZCARD ratelimit:user42", ":2\r\n"),
        // req-4, 60 s after req-1: req-1 has left the window.
        (
            "ZREMRANGEBYSCORE ratelimit:user42 -inf 1786348800000",
            ":1\r\n",
        ),
        ("ZCARD ratelimit:user42", ":1\r\n"),
        ("ZADD ratelimit:user42 1786348860000 req-4", ":1\r\n"),
        ("PEXPIRE ratelimit:user42 60000", ":1\r\n"),
        (
            "ZRANGE ratelimit:user42 0 -1 WITHSCORES",
            "*4\r\n$5\r\nreq-2\r\n$13\r\n1786348810000\r\n$5\r\nreq-4\r\n$13\r\n1786348860000\r\n",
        ),
    ]);
}

#[test]
fn leaderboard_transcript() {
    transcript(&[
        ("ZADD ranking:game 1500 player:alice", ":1\r\n"),
        ("ZADD ranking:game 2300 player:bob", ":1\r\n"),
        ("ZADD ranking:game 1800 player:carol", ":1\r\n"),
        (
            "ZREVRANGE ranking:game 0 2 WITHSCORES",
            "*6\r\n$10\r\nplayer:bob\r\n$4\r\n2300\r\n$12\r\nplayer:carol\r\n$4\r\n1800\r\n$12\r\nplayer:alice\r\n$4\r\n1500\r\n",
        ),
        ("ZREVRANK ranking:game player:carol", ":1\r\n"),
        ("ZADD ranking:game 2500 player:alice", ":0\r\n"),
        ("ZINCRBY ranking:game 200 player:carol", "$4\r\n2000\r\n"),
        (
            "ZREVRANGE ranking:game 0 2 WITHSCORES",
            "*6\r\n$12\r\nplayer:alice\r\n$4\r\n2500\r\n$10\r\nplayer:bob\r\n$4\r\n2300\r\n$12\r\nplayer:carol\r\n$4\r\n2000\r\n",
        ),
        ("ZSCORE ranking:game player:carol", "$4\r\n2000\r\n"),
        ("ZREVRANK ranking:game player:carol", ":2\r\n"),
        ("ZREVRANK ranking:game player:nobody", "$-1\r\n"),
    ]);
}

#[test]
fn lock_transcript() {
    let release = format!("EVAL '{LOCK_RELEASE}' 1 lock:order:12345");
    let extend = format!("EVAL '{LOCK_EXTEND}' 1 lock:order:12345");
    transcript(&[
        (
            "SET lock:order:12345 64f3b18d-4f05-4e78-9e6b-67a32b2e811c NX PX 30000",
            "+OK\r\n",
        ),
        (
            "SET lock:order:12345 0b8a1e3c-2f57-4c8e-9a4d-6b2f1c0e9d33 NX PX 30000",
            "$-1\r\n",
        ),
        (
            &format!("{extend} 64f3b18d-4f05-4e78-9e6b-67a32b2e811c 60000"),
            ":1\r\n",
        ),
        (
            &format!("{release} 0b8a1e3c-2f57-4c8e-9a4d-6b2f1c0e9d33"),
            ":0\r\n",
        ),
        (
            &format!("{release} 64f3b18d-4f05-4e78-9e6b-67a32b2e811c"),
            ":1\r\n",
        ),
        (
            &format!("{release} 64f3b18d-4f05-4e78-9e6b-67a32b2e811c"),
            ":0\r\n",
        ),
        ("GET lock:order:12345", "$-1\r\n"),
    ]);
}

#[test]
fn daily_active_users_and_unique_visitors_transcript() {
    transcript(&[
        ("SETBIT dau:2026-12-05 1001 1", ":0\r\n"),
        ("SETBIT dau:2026-12-05 1002 1", ":0\r\n"),
        ("SETBIT dau:2026-12-05 1001 1", ":1\r\n"),
        ("SETBIT dau:2026-12-06 1001 1", ":0\r\n"),
        ("SETBIT dau:2026-12-06 2048 1", ":0\r\n"),
        ("GETBIT dau:2026-12-06 1002", ":0\r\n"),
        ("BITCOUNT dau:2026-12-05", ":2\r\n"),
        (
            "BITOP OR active:2026-12-05:06 dau:2026-12-05 dau:2026-12-06",
            ":257\r\n",
        ),
        ("BITCOUNT active:2026-12-05:06", ":3\r\n"),
        (
            "BITOP AND both:2026-12-05:06 dau:2026-12-05 dau:2026-12-06",
            ":257\r\n",
        ),
        ("BITCOUNT both:2026-12-05:06", ":1\r\n"),
        ("BITPOS both:2026-12-05:06 1", ":1001\r\n"),
        ("PFADD visitors:2026-12-05 alice bob carol", ":1\r\n"),
        ("PFADD visitors:2026-12-05 alice", ":0\r\n"),
        ("PFADD visitors:2026-12-06 bob dave", ":1\r\n"),
        ("PFCOUNT visitors:2026-12-05", ":3\r\n"),
        ("PFCOUNT visitors:2026-12-05 visitors:2026-12-06", ":4\r\n"),
        (
            "PFMERGE visitors:week visitors:2026-12-05 visitors:2026-12-06",
            "+OK\r\n",
        ),
        ("PFCOUNT visitors:week", ":4\r\n"),
    ]);
}

#[test]
fn nearby_search_transcript() {
    transcript(&[
        (
            "GEOADD shops 13.361389 38.115556 palermo-1 15.087269 37.502669 catania-1 13.583333 37.316667 agrigento-1",
            ":3\r\n",
        ),
        ("GEOADD shops 13.361389 38.115556 palermo-1", ":0\r\n"),
        ("GEODIST shops palermo-1 catania-1 km", "$8\r\n166.2742\r\n"),
        (
            "GEOSEARCH shops FROMLONLAT 15 37 BYRADIUS 200 km ASC WITHDIST",
            "*3\r\n*2\r\n$9\r\ncatania-1\r\n$7\r\n56.4413\r\n*2\r\n$11\r\nagrigento-1\r\n$8\r\n130.4235\r\n*2\r\n$9\r\npalermo-1\r\n$8\r\n190.4424\r\n",
        ),
        (
            "GEOSEARCH shops FROMMEMBER palermo-1 BYBOX 400 400 km ASC COUNT 2",
            "*2\r\n$9\r\npalermo-1\r\n$11\r\nagrigento-1\r\n",
        ),
        (
            "GEOSEARCHSTORE near:user42 shops FROMLONLAT 13.5 37.5 BYRADIUS 100 km STOREDIST",
            ":2\r\n",
        ),
        (
            "ZRANGE near:user42 0 -1 WITHSCORES",
            "*4\r\n$11\r\nagrigento-1\r\n$18\r\n21.679719899956392\r\n$9\r\npalermo-1\r\n$18\r\n69.541108480979659\r\n",
        ),
        (
            "GEOPOS shops agrigento-1",
            "*1\r\n*2\r\n$19\r\n13.5833314061164856\r\n$20\r\n37.31666804993816555\r\n",
        ),
        ("GEOHASH shops palermo-1", "*1\r\n$11\r\nsqc8b49rny0\r\n"),
    ]);
}

/// The library of docs/use-cases.md §7, as one redis-cli-quoted argument.
const APP_LIBRARY: &str = r##""#!lua name=app\n\nlocal function rate_limit(keys, args)\n  local n = redis.call('INCR', keys[1])\n  if n == 1 then redis.call('EXPIRE', keys[1], args[1]) end\n  if n > tonumber(args[2]) then return 0 end\n  return 1\nend\n\nlocal function unlock(keys, args)\n  if redis.call('GET', keys[1]) == args[1] then\n    return redis.call('DEL', keys[1])\n  end\n  return 0\nend\n\nredis.register_function('rate_limit', rate_limit)\nredis.register_function('unlock', unlock)""##;

#[test]
fn functions_rate_limiter_and_lock_transcript() {
    let load = format!("FUNCTION LOAD {APP_LIBRARY}");
    transcript(&[
        (&load, "$3\r\napp\r\n"),
        ("FCALL rate_limit 1 rl:alice 60 2", ":1\r\n"),
        ("FCALL rate_limit 1 rl:alice 60 2", ":1\r\n"),
        ("FCALL rate_limit 1 rl:alice 60 2", ":0\r\n"),
        ("TTL rl:alice", ":60\r\n"),
        ("SET lock:order:1 token-a NX PX 30000", "+OK\r\n"),
        ("FCALL unlock 1 lock:order:1 token-b", ":0\r\n"),
        ("FCALL unlock 1 lock:order:1 token-a", ":1\r\n"),
        ("GET lock:order:1", "$-1\r\n"),
    ]);
}

#[test]
fn cache_invalidation_transcript() {
    let mut p = Pair::new();
    let (mut redis_b, mut hozon_b) = p.connect_more();
    p.resp3();
    p.check(&["CLIENT", "TRACKING", "ON"]);
    p.check(&["SET", "user:1:name", "ada"]);
    assert_eq!(p.check(&["GET", "user:1:name"]), b"$3\r\nada\r\n");
    for b in [&mut redis_b, &mut hozon_b] {
        assert_eq!(
            b.call(&[b"SET", b"user:1:name", b"ada-lovelace"]),
            b"+OK\r\n"
        );
    }
    let push = b">2\r\n$10\r\ninvalidate\r\n*1\r\n$11\r\nuser:1:name\r\n";
    for a in [&mut p.r, &mut p.h] {
        assert_eq!(show(&a.read_reply()), show(push), "the invalidation push");
    }
    assert_eq!(p.check(&["GET", "user:1:name"]), b"$12\r\nada-lovelace\r\n");
}
