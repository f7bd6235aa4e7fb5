//! Differential tests: the seed documents' use cases, end to end, as an
//! application would issue them (the session store, leaderboard and
//! sliding-window tests also live with their families; these add the
//! fixed-window rate limiter and the distributed lock, and run each pattern
//! in RESP2 and RESP3).

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
