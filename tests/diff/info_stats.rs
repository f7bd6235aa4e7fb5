//! Differential tests: INFO commandstats, errorstats, latencystats,
//! `total_error_replies`, the keyspace hit/miss counters, the
//! instantaneous metrics and CONFIG RESETSTAT, against redis-server.
//!
//! Times differ by nature: the comparisons take the counters (calls,
//! rejected_calls, failed_calls, counts) and the names, never `usec` or
//! the percentiles' values.

use std::collections::BTreeMap;

use crate::harness::{Conn, Pair};

/// An INFO section's `name:value` lines.
fn section(conn: &mut Conn, name: &str) -> BTreeMap<String, String> {
    let reply = conn.call(&[b"INFO", name.as_bytes()]);
    let text = String::from_utf8_lossy(&reply).into_owned();
    text.lines()
        .skip(1)
        .filter_map(|l| l.split_once(':'))
        .map(|(k, v)| (k.to_string(), v.trim_end().to_string()))
        .collect()
}

/// INFO commandstats without the times: name → `calls=…,rejected_calls=…,failed_calls=…`.
fn counters(conn: &mut Conn) -> BTreeMap<String, String> {
    section(conn, "commandstats")
        .into_iter()
        .map(|(name, value)| {
            let kept: Vec<&str> = value
                .split(',')
                .filter(|f| !f.starts_with("usec"))
                .collect();
            (name, kept.join(","))
        })
        .collect()
}

fn field(conn: &mut Conn, sect: &str, name: &str) -> String {
    section(conn, sect)
        .remove(name)
        .unwrap_or_else(|| panic!("INFO {sect} has no {name}"))
}

/// Runs `lines` on both servers (replies compared), then compares
/// commandstats' counters, errorstats and `total_error_replies`.
#[track_caller]
fn check_stats_after(p: &mut Pair, lines: &str) {
    p.check(&["CONFIG", "RESETSTAT"]);
    p.script(lines);
    let (r, h) = (counters(&mut p.r), counters(&mut p.h));
    assert_eq!(r, h, "commandstats after:\n{lines}");
    let (r, h) = (
        section(&mut p.r, "errorstats"),
        section(&mut p.h, "errorstats"),
    );
    assert_eq!(r, h, "errorstats after:\n{lines}");
    let (r, h) = (
        field(&mut p.r, "stats", "total_error_replies"),
        field(&mut p.h, "stats", "total_error_replies"),
    );
    assert_eq!(r, h, "total_error_replies after:\n{lines}");
}

#[test]
fn commandstats_count_calls_rejections_and_failures() {
    let mut p = Pair::new();
    check_stats_after(
        &mut p,
        r#"
SET a b
GET a
GET a b
SET k
NOSUCHCOMMAND x
CONFIG GET maxmemory
CONFIG NOSUCH
CONFIG
CLIENT GETNAME
LPUSH a x
HSET h f v
HGET h f
INCR h
"#,
    );
}

#[test]
fn errorstats_inside_multi_and_scripts() {
    let mut p = Pair::new();
    // Redis's unit/info cases: an error inside EXEC is the inner
    // command's; a queueing error aborts with EXECABORT.
    check_stats_after(
        &mut p,
        r#"
MULTI
SET a b
AUTH a
EXEC
EXEC
MULTI
SET
EXEC
"#,
    );
    check_stats_after(
        &mut p,
        r#"
EVAL "redis.pcall('XGROUP', 'CREATECONSUMER', 's1', 'mygroup', 'consumer') return 1" 0
EVAL "return redis.call('INCR', KEYS[1])" 1 h
EVAL "return redis.call('NOSUCH')" 0
EVAL "return redis.call('GET')" 0
EVAL "return redis.error_reply('MYERR custom')" 0
EVAL "return redis.pcall('INCR', KEYS[1])" 1 h
EVAL a
EVALSHA ffffffffffffffffffffffffffffffffffffffff 0
"#,
    );
    check_stats_after(
        &mut p,
        r#"
XADD mystream 1-1 f v
XGROUP CREATECONSUMER mystream mygroup consumer
SET s x
SADD s y
LPOP s
"#,
    );
}

#[test]
fn errorstats_for_blocked_clients_unblocked_with_an_error() {
    let mut p = Pair::new();
    p.check(&["CONFIG", "RESETSTAT"]);
    let (mut r2, mut h2) = p.connect_more();
    let r_id = String::from_utf8(r2.call(&[b"CLIENT", b"ID"])).unwrap();
    let h_id = String::from_utf8(h2.call(&[b"CLIENT", b"ID"])).unwrap();
    let id_of = |reply: &str| reply.trim_start_matches(':').trim().to_string();
    r2.send_raw(b"*3\r\n$5\r\nBLPOP\r\n$2\r\nl1\r\n$1\r\n0\r\n");
    h2.send_raw(b"*3\r\n$5\r\nBLPOP\r\n$2\r\nl1\r\n$1\r\n0\r\n");
    std::thread::sleep(std::time::Duration::from_millis(200));
    let (r_id, h_id) = (id_of(&r_id), id_of(&h_id));
    p.r.call(&[b"CLIENT", b"UNBLOCK", r_id.as_bytes(), b"ERROR"]);
    p.h.call(&[b"CLIENT", b"UNBLOCK", h_id.as_bytes(), b"ERROR"]);
    assert_eq!(r2.read_reply(), h2.read_reply());
    // A served BLPOP: counted once, with its histogram sample.
    r2.send_raw(b"*3\r\n$5\r\nBLPOP\r\n$2\r\nl2\r\n$1\r\n0\r\n");
    h2.send_raw(b"*3\r\n$5\r\nBLPOP\r\n$2\r\nl2\r\n$1\r\n0\r\n");
    std::thread::sleep(std::time::Duration::from_millis(200));
    p.check(&["LPUSH", "l2", "x"]);
    assert_eq!(r2.read_reply(), h2.read_reply());
    let (r, h) = (counters(&mut p.r), counters(&mut p.h));
    assert_eq!(r, h);
    assert_eq!(
        r.get("cmdstat_blpop").map(String::as_str),
        Some("calls=2,rejected_calls=0,failed_calls=1")
    );
    let (r, h) = (
        section(&mut p.r, "errorstats"),
        section(&mut p.h, "errorstats"),
    );
    assert_eq!(r, h);
    let names = |s: BTreeMap<String, String>| s.into_keys().collect::<Vec<_>>();
    let (r, h) = (
        names(section(&mut p.r, "latencystats")),
        names(section(&mut p.h, "latencystats")),
    );
    assert_eq!(r, h, "latencystats entries");
    assert!(
        h.contains(&"latency_percentiles_usec_blpop".to_string()),
        "{h:?}"
    );
}

#[test]
fn latencystats_follow_the_parameters() {
    let mut p = Pair::new();
    p.script(
        r#"
CONFIG RESETSTAT
CONFIG GET latency-tracking
CONFIG GET latency-tracking-info-percentiles
CONFIG SET latency-tracking-info-percentiles "0.0 50.0 100.0"
CONFIG GET latency-tracking-info-percentiles
CONFIG SET latency-tracking-info-percentiles "10.0 50.0 a"
CONFIG SET latency-tracking-info-percentiles "10.0 50.0 101.0"
CONFIG GET latency-tracking-info-percentiles
CONFIG SET latency-tracking-info-percentiles 99.99
CONFIG GET latency-tracking-info-percentiles
SET a b
GET a
CLIENT GETNAME
"#,
    );
    let shape = |s: BTreeMap<String, String>| {
        s.into_iter()
            .map(|(k, v)| {
                let keys: Vec<String> = v
                    .split(',')
                    .map(|f| f.split('=').next().unwrap_or("").to_string())
                    .collect();
                (k, keys.join(","))
            })
            .collect::<BTreeMap<_, _>>()
    };
    let (r, h) = (
        shape(section(&mut p.r, "latencystats")),
        shape(section(&mut p.h, "latencystats")),
    );
    assert_eq!(r, h);
    assert_eq!(
        h.get("latency_percentiles_usec_client|getname")
            .map(String::as_str),
        Some("p99.99")
    );
    p.script(
        r#"
CONFIG SET latency-tracking no
SET a b
"#,
    );
    assert!(section(&mut p.h, "latencystats").is_empty());
    assert!(section(&mut p.r, "latencystats").is_empty());
    p.script(
        r#"
CONFIG SET latency-tracking yes
CONFIG SET latency-tracking-info-percentiles ""
CONFIG GET latency-tracking-info-percentiles
"#,
    );
}

#[test]
fn keyspace_hits_and_misses() {
    let mut p = Pair::new();
    let lines = r#"
SET s v
HSET h f v
RPUSH l a b
SADD st m
ZADD z 1 m
XADD x 1-1 f v
GET s
GET missing
MGET s missing s
EXISTS s missing
TYPE s
TYPE missing
STRLEN s
APPEND s x
INCR missing2
HGET h f
HGET nohash f
HGETALL h
LRANGE l 0 -1
LLEN nolist
SISMEMBER st m
SMEMBERS nosuch
ZSCORE z m
ZRANGE z 0 -1
XRANGE x - +
TTL s
PTTL missing
OBJECT ENCODING s
DUMP s
GETRANGE s 0 1
SETRANGE s 1 y
GETDEL s
GETEX h
COPY h h2
RENAME h2 h3
SORT l ALPHA
LPOS l a
"#;
    p.check(&["CONFIG", "RESETSTAT"]);
    for line in lines.lines().filter(|l| !l.trim().is_empty()) {
        p.script(line);
        let (r, h) = (
            (
                field(&mut p.r, "stats", "keyspace_hits"),
                field(&mut p.r, "stats", "keyspace_misses"),
            ),
            (
                field(&mut p.h, "stats", "keyspace_hits"),
                field(&mut p.h, "stats", "keyspace_misses"),
            ),
        );
        assert_eq!(r, h, "(hits, misses) after {line}");
    }
}

#[test]
fn resetstat_clears_the_tables() {
    let mut p = Pair::new();
    p.script(
        r#"
SET a b
GET a b
NOSUCH
CONFIG RESETSTAT
"#,
    );
    let (r, h) = (counters(&mut p.r), counters(&mut p.h));
    assert_eq!(r, h);
    assert_eq!(h.len(), 1, "{h:?}");
    assert!(section(&mut p.h, "errorstats").is_empty());
    assert_eq!(field(&mut p.h, "stats", "total_error_replies"), "0");
    assert_eq!(field(&mut p.h, "stats", "keyspace_hits"), "0");
}

#[test]
fn instantaneous_metrics_move_under_load() {
    let mut p = Pair::new();
    // Pipelined PINGs for a while: the cron samples every 100 ms, INFO
    // averages the last 16 samples.
    let batch: Vec<u8> = b"*1\r\n$4\r\nPING\r\n".repeat(1000);
    let until = std::time::Instant::now() + std::time::Duration::from_millis(1200);
    while std::time::Instant::now() < until {
        p.h.send_raw(&batch);
        for _ in 0..1000 {
            p.h.read_reply();
        }
    }
    let stats = section(&mut p.h, "stats");
    let ops: u64 = stats["instantaneous_ops_per_sec"].parse().unwrap();
    let input: f64 = stats["instantaneous_input_kbps"].parse().unwrap();
    let output: f64 = stats["instantaneous_output_kbps"].parse().unwrap();
    assert!(ops > 0, "{stats:?}");
    assert!(input > 0.0 && output > 0.0, "{stats:?}");
    assert_eq!(stats["instantaneous_input_repl_kbps"], "0.00");
    // The same fields, in the same order, as Redis's.
    let names = |c: &mut Conn| {
        section(c, "stats")
            .into_keys()
            .filter(|k| k.starts_with("instantaneous"))
            .collect::<Vec<_>>()
    };
    assert_eq!(names(&mut p.r), names(&mut p.h));
}
