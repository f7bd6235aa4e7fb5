use super::*;
use crate::command::test_support::{db0_effects, run};
use crate::{Config, Engine};

#[test]
fn strict_floats_reject_overflow_and_underflow() {
    assert_eq!(parse_strict_float(b"1.5"), Some(1.5));
    assert_eq!(parse_strict_float(b"-inf"), Some(f64::NEG_INFINITY));
    assert_eq!(parse_strict_float(b"0.000"), Some(0.0));
    assert_eq!(parse_strict_float(b"1e400"), None);
    assert_eq!(parse_strict_float(b"1e-400"), None);
    assert_eq!(parse_strict_float(b" 1"), None);
    assert_eq!(parse_strtod(b""), Some(0.0));
    assert_eq!(parse_strtod(b" 1"), Some(1.0));
    assert_eq!(parse_strtod(b"1e400"), Some(f64::INFINITY));
    assert_eq!(parse_strtod(b" "), None);
    assert_eq!(parse_strtod(b"nan"), None);
}

#[test]
fn writes_are_logged_as_redis_propagates_them() {
    let mut engine = Engine::open(Config::in_memory()).expect("an in-memory config is valid");
    let mut s = engine.new_session();
    run(&mut engine, &mut s, "ZADD z 1 a 2 b 3 c");
    run(&mut engine, &mut s, "ZADD z NX 5 a");
    run(&mut engine, &mut s, "ZINCRBY z 2 a");
    assert_eq!(
        db0_effects(&mut engine),
        vec!["ZADD z 1 a 2 b 3 c", "ZINCRBY z 2 a"]
    );

    assert_eq!(
        run(&mut engine, &mut s, "ZMPOP 2 nokey z MAX COUNT 5"),
        Reply::Array(vec![
            Reply::bulk(b"z"),
            Reply::Array(vec![
                // Equal scores order by member: c is above a.
                Reply::Array(vec![Reply::bulk(b"c"), Reply::Double(3.0)]),
                Reply::Array(vec![Reply::bulk(b"a"), Reply::Double(3.0)]),
                Reply::Array(vec![Reply::bulk(b"b"), Reply::Double(2.0)]),
            ]),
        ])
    );
    assert_eq!(db0_effects(&mut engine), vec!["ZPOPMAX z 3"]);

    run(&mut engine, &mut s, "ZADD src 1 x");
    run(&mut engine, &mut s, "ZUNIONSTORE dst 1 src");
    run(&mut engine, &mut s, "ZINTERSTORE dst 2 src nokey");
    run(&mut engine, &mut s, "ZINTERSTORE dst 2 src nokey");
    assert_eq!(
        db0_effects(&mut engine),
        vec!["ZADD src 1 x", "ZUNIONSTORE dst 1 src", "DEL dst"]
    );
    run(&mut engine, &mut s, "ZPOPMIN src 10");
    run(&mut engine, &mut s, "ZPOPMIN src 10");
    assert_eq!(db0_effects(&mut engine), vec!["ZPOPMIN src 10"]);
    run(&mut engine, &mut s, "ZREMRANGEBYSCORE nokey -inf +inf");
    run(&mut engine, &mut s, "ZADD z 1 a");
    run(&mut engine, &mut s, "ZINCRBY z 0 a");
    run(&mut engine, &mut s, "ZREM z nosuch");
    assert_eq!(db0_effects(&mut engine), vec!["ZADD z 1 a"]);
    run(&mut engine, &mut s, "ZRANGESTORE dst z 0 -1");
    run(&mut engine, &mut s, "ZRANGESTORE dst z 5 10");
    run(&mut engine, &mut s, "ZRANGESTORE dst z 5 10");
    assert_eq!(
        db0_effects(&mut engine),
        vec!["ZRANGESTORE dst z 0 -1", "DEL dst"]
    );
}

/// Runs `line` for a new session of `engine`, which blocks.
fn block(engine: &mut Engine, line: &str) -> crate::command::Session {
    let mut other = engine.new_session();
    run(engine, &mut other, line);
    assert!(other.blocked.is_some(), "{line} blocks");
    other
}

/// Serves the sessions in `waiting` blocked on keys that became ready,
/// as the host does; returns the replies of those served.
fn serve(engine: &mut Engine, waiting: &mut [&mut crate::command::Session]) -> Vec<Reply> {
    let mut replies = Vec::new();
    while engine.has_ready_keys() {
        for (db, key, ids) in engine.take_ready_keys() {
            for id in ids {
                if let Some(s) = waiting.iter_mut().find(|s| s.id == id) {
                    replies.extend(engine.serve_blocked(s, db, &key));
                }
            }
        }
    }
    replies
}

fn pair(member: &str, score: f64) -> Reply {
    Reply::Array(vec![Reply::bulk(member.as_bytes()), Reply::Double(score)])
}

#[test]
fn blocking_pops_served_at_once_are_logged_as_plain_pops() {
    let mut engine = Engine::open(Config::in_memory()).expect("an in-memory config is valid");
    let mut s = engine.new_session();
    run(&mut engine, &mut s, "ZADD z 1 a 2 b 3 c 4 d");
    run(&mut engine, &mut s, "SET str v");
    db0_effects(&mut engine);
    assert_eq!(
        run(&mut engine, &mut s, "BZPOPMIN none z 0"),
        Reply::Array(vec![
            Reply::bulk(b"z"),
            Reply::bulk(b"a"),
            Reply::Double(1.0)
        ])
    );
    assert_eq!(
        run(&mut engine, &mut s, "bzpopmax z str 0.5"),
        Reply::Array(vec![
            Reply::bulk(b"z"),
            Reply::bulk(b"d"),
            Reply::Double(4.0)
        ])
    );
    assert_eq!(
        run(&mut engine, &mut s, "BZMPOP 0 2 none z MAX COUNT 5"),
        Reply::Array(vec![
            Reply::bulk(b"z"),
            Reply::Array(vec![pair("c", 3.0), pair("b", 2.0)])
        ])
    );
    for line in ["BZPOPMIN none str 0", "BZMPOP 0 2 str z MIN"] {
        assert_eq!(
            run(&mut engine, &mut s, line),
            Reply::err(WRONGTYPE),
            "{line}"
        );
    }
    assert_eq!(
        db0_effects(&mut engine),
        ["ZPOPMIN z", "ZPOPMAX z", "ZPOPMAX z 2"]
    );
}

#[test]
fn blocking_pops_served_after_waiting_are_logged_as_plain_pops() {
    let mut engine = Engine::open(Config::in_memory()).expect("an in-memory config is valid");
    let mut s = engine.new_session();
    let mut min = block(&mut engine, "BZPOPMIN y1 y2 0");
    let mut mpop = block(&mut engine, "BZMPOP 1.5 1 y2 MAX COUNT 5");
    let mut late = block(&mut engine, "BZPOPMAX y2 0");
    {
        let state = mpop.blocked.as_ref().expect("blocked");
        assert_eq!(state.request.kind, BlockKind::ZSet);
        assert_eq!(state.request.keys, [Blob::new(b"y2")]);
        assert_eq!(state.request.timeout_reply, Reply::NullArray);
        assert!(state.request.deadline_ms.is_some());
    }
    // A key of another type wakes nobody.
    run(&mut engine, &mut s, "RPUSH y2 x");
    assert!(serve(&mut engine, &mut [&mut min, &mut mpop, &mut late]).is_empty());
    run(&mut engine, &mut s, "DEL y2");
    db0_effects(&mut engine);
    run(&mut engine, &mut s, "ZADD y2 1 a 2 b 3 c");
    assert_eq!(
        serve(&mut engine, &mut [&mut min, &mut mpop, &mut late]),
        [
            Reply::Array(vec![
                Reply::bulk(b"y2"),
                Reply::bulk(b"a"),
                Reply::Double(1.0)
            ]),
            Reply::Array(vec![
                Reply::bulk(b"y2"),
                Reply::Array(vec![pair("c", 3.0), pair("b", 2.0)])
            ]),
        ]
    );
    // The set is gone: the last one waits on.
    assert!(late.blocked.is_some());
    assert_eq!(
        db0_effects(&mut engine),
        ["ZADD y2 1 a 2 b 3 c", "ZPOPMIN y2", "ZPOPMAX y2 2"]
    );
}

#[test]
fn sliding_window_and_leaderboard_in_both_encodings() {
    let mut engine = Engine::open(Config::in_memory()).expect("an in-memory config is valid");
    let mut s = engine.new_session();
    for i in 0..300 {
        run(&mut engine, &mut s, &format!("ZADD w {i} req{i}"));
    }
    assert_eq!(
        run(&mut engine, &mut s, "ZREMRANGEBYSCORE w -inf (250"),
        Reply::Int(250)
    );
    assert_eq!(run(&mut engine, &mut s, "ZCARD w"), Reply::Int(50));
    assert_eq!(run(&mut engine, &mut s, "ZREVRANK w req299"), Reply::Int(0));
    assert_eq!(run(&mut engine, &mut s, "ZRANK w req250"), Reply::Int(0));
    assert_eq!(
        run(&mut engine, &mut s, "ZREVRANGE w 0 1 WITHSCORES"),
        Reply::Array(vec![
            Reply::bulk(b"req299"),
            Reply::Double(299.0),
            Reply::bulk(b"req298"),
            Reply::Double(298.0),
        ])
    );
    if let Some(Value::ZSet(z)) = engine.core().keyspace.db(0).get(b"w") {
        assert_eq!(z.encoding(), "skiplist");
        z.check_invariants().unwrap();
    } else {
        panic!("w is a sorted set");
    }
}
