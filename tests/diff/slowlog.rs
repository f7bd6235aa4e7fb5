//! Differential tests: SLOWLOG GET/LEN/RESET/HELP, its parameters, the
//! entries' arguments (trimming, redaction, EXEC left out) and
//! client names, against redis-server.
//!
//! Ids, timestamps, durations and client ports differ by nature: entries
//! are compared with those fields normalised.

use testkit::value::{decode, Value};

use crate::harness::{Conn, Pair};

/// SLOWLOG GET -1 with each entry reduced to (arguments, client name),
/// checking the other fields' shape on the way.
fn entries(conn: &mut Conn) -> Vec<(Vec<Value>, Value)> {
    let reply = decode(&conn.call(&[b"SLOWLOG", b"GET", b"-1"]));
    let mut previous_id = i64::MAX;
    reply
        .items()
        .iter()
        .map(|entry| {
            let fields = entry.items();
            assert_eq!(fields.len(), 6, "{entry:?}");
            let id = fields[0].int();
            assert!(id < previous_id, "ids decrease, newest first: {reply:?}");
            previous_id = id;
            assert!(fields[1].int() > 1_600_000_000, "unix time: {entry:?}");
            assert!(fields[2].int() >= 0, "duration: {entry:?}");
            let peer = fields[4].text();
            assert!(peer.rsplit_once(':').is_some(), "peer address: {entry:?}");
            (fields[3].items().to_vec(), fields[5].clone())
        })
        .collect()
}

#[test]
fn subcommands_and_errors() {
    let mut p = Pair::new();
    p.script(
        r#"
SLOWLOG HELP
SLOWLOG help
SLOWLOG
SLOWLOG NOSUCH
SLOWLOG LEN extra
SLOWLOG RESET extra
SLOWLOG GET -2
SLOWLOG GET abc
SLOWLOG GET 1 2
SLOWLOG GET 0
SLOWLOG GET 99999999999999999999
SLOWLOG RESET
SLOWLOG LEN
SLOWLOG GET
CONFIG GET slowlog-log-slower-than
CONFIG GET slowlog-max-len
CONFIG SET slowlog-log-slower-than -2
CONFIG SET slowlog-log-slower-than abc
CONFIG SET slowlog-max-len -1
CONFIG SET slowlog-log-slower-than -1
CONFIG GET slowlog-log-slower-than
SET a b
SLOWLOG LEN
"#,
    );
}

#[test]
fn entries_match_redis() {
    let mut p = Pair::new();
    p.script(
        r#"
CONFIG SET slowlog-log-slower-than 0
SLOWLOG RESET
CLIENT SETNAME observer
SET k v
MULTI
SET k2 v2
INCR counter
EXEC
AUTH nosuchpassword
AUTH someone nosuchpassword
CONFIG SET masterauth secret
CONFIG SET requirepass ""
EVAL "return redis.call('SET', KEYS[1], 'x')" 1 fromscript
"#,
    );
    // HELLO's reply holds the connection's id, which differs.
    p.both(&["HELLO", "2", "AUTH", "default", "nopass"]);
    let many: Vec<String> = (0..40).map(|i| format!("a{i}")).collect();
    let mut args: Vec<&str> = vec!["SADD", "big"];
    args.extend(many.iter().map(String::as_str));
    p.check(&args);
    let long = "x".repeat(200);
    p.check(&["SET", "long", &long]);
    p.check(&["CLIENT", "SETNAME", ""]);
    p.check(&["GET", "k"]);
    let (r, h) = (entries(&mut p.r), entries(&mut p.h));
    assert_eq!(r, h);
    // What the comparison covered: trimming, names, EXEC and AUTH absent.
    let args_of = |e: &(Vec<Value>, Value)| e.0.iter().map(Value::text).collect::<Vec<_>>();
    let all: Vec<Vec<String>> = h.iter().map(args_of).collect();
    assert!(all
        .iter()
        .any(|a| a.len() == 32 && a[31] == "... (11 more arguments)"));
    assert!(all
        .iter()
        .any(|a| a.len() == 3 && a[2].ends_with("... (72 more bytes)")));
    assert!(all.iter().all(|a| !a[0].eq_ignore_ascii_case("exec")));
    assert!(all.iter().any(|a| a == &["AUTH", "(redacted)"]));
    assert!(all
        .iter()
        .any(|a| a == &["HELLO", "2", "AUTH", "(redacted)", "(redacted)"]));
    assert!(all
        .iter()
        .any(|a| a == &["CONFIG", "SET", "masterauth", "(redacted)"]));
    assert!(h.iter().any(|e| e.1.text() == "observer"));
}

#[test]
fn max_len_and_reset() {
    let mut p = Pair::new();
    p.script(
        r#"
CONFIG SET slowlog-log-slower-than 0
CONFIG SET slowlog-max-len 3
SET a 1
SET b 2
SET c 3
SET d 4
SLOWLOG LEN
CONFIG SET slowlog-max-len 1
SLOWLOG LEN
"#,
    );
    let (r, h) = (entries(&mut p.r), entries(&mut p.h));
    assert_eq!(r, h);
    p.script(
        r#"
SLOWLOG RESET
CONFIG SET slowlog-log-slower-than 100000000
SET e 5
SLOWLOG LEN
"#,
    );
}

/// The entry of a blocked command, made when it is served (or times out)
/// outside its client's turn, carries that client's address and name, as
/// Redis's `updateStatsOnUnblock` logs them.
#[test]
fn blocked_commands_log_their_own_client() {
    let mut p = Pair::new();
    for (name, mut waiter) in [("redis", p.connect_more().0), ("hozon", p.connect_more().1)] {
        let other = if name == "redis" { &mut p.r } else { &mut p.h };
        other.call(&[b"CONFIG", b"SET", b"slowlog-log-slower-than", b"0"]);
        waiter.call(&[b"CLIENT", b"SETNAME", b"waiter"]);
        let info = String::from_utf8(waiter.call(&[b"CLIENT", b"INFO"])).unwrap();
        let addr = info
            .split(' ')
            .find_map(|f| f.strip_prefix("addr="))
            .expect("CLIENT INFO addr")
            .to_string();
        other.call(&[b"SLOWLOG", b"RESET"]);
        // Served by another client's push.
        waiter.send_raw(&testkit::harness::encode_command(&[b"BLPOP", b"q", b"0"]));
        std::thread::sleep(std::time::Duration::from_millis(100));
        other.call(&[b"RPUSH", b"q", b"x"]);
        assert_eq!(
            waiter.read_reply(),
            b"*2\r\n$1\r\nq\r\n$1\r\nx\r\n",
            "{name}"
        );
        // Unblocked by CLIENT UNBLOCK (Redis 7.0 logs no entry for a
        // timeout).
        let id = String::from_utf8(waiter.call(&[b"CLIENT", b"ID"])).unwrap();
        let id = id.trim_start_matches(':').trim_end().to_string();
        waiter.send_raw(&testkit::harness::encode_command(&[b"BLPOP", b"q2", b"0"]));
        std::thread::sleep(std::time::Duration::from_millis(100));
        let reply = other.call(&[b"CLIENT", b"UNBLOCK", id.as_bytes(), b"ERROR"]);
        assert_eq!(reply, b":1\r\n", "{name}");
        waiter.read_reply();
        let reply = decode(&other.call(&[b"SLOWLOG", b"GET", b"-1"]));
        // The entries of the waiter's blocked commands: the served BLPOP,
        // then the unblocked one (Redis logs that one with no arguments:
        // its argv is gone by then; hozon keeps them).
        let logged: Vec<(String, String, String)> = reply
            .items()
            .iter()
            .rev()
            .map(|e| {
                let f = e.items();
                let cmd = f[3].items().first().map(Value::text).unwrap_or_default();
                (cmd, f[4].text().to_string(), f[5].text().to_string())
            })
            .filter(|(cmd, peer, _)| peer == &addr && cmd != "CLIENT")
            .collect();
        assert_eq!(logged.len(), 2, "{name}: {reply:?}");
        assert_eq!(logged[0].0, "BLPOP", "{name}: {reply:?}");
        for (_, _, client_name) in &logged {
            assert_eq!(client_name, "waiter", "{name}: {reply:?}");
        }
    }
}
