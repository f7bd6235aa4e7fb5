//! Differential tests: MIGRATE and RESTORE-ASKING.
//!
//! MIGRATE runs between four servers: a redis-server and a hozon-server
//! as sources, a redis-server and a hozon-server as targets. Every
//! scenario runs four times, from each source to each target (redis →
//! redis is the reference; hozon → redis, redis → hozon and hozon → hozon
//! must do the same), each into a database of its own on the target; the
//! replies, what is left on the source and what arrived on the target
//! (DUMP payloads, TTLs) must be equal. The connections each source caches
//! per target live through the scenarios in the same order everywhere, so
//! their state (selected database, authentication, closed by the target)
//! is the same too.

use crate::harness::{
    bulk_payload, show, split_line, start_hozon, start_redis, unused_port, Conn, Pair,
    ServerProcess,
};

/// The four servers and a connection to each.
struct Servers {
    sources: [(ServerProcess, Conn); 2],
    targets: [(ServerProcess, Conn); 2],
}

fn start() -> Servers {
    let with_conn = |s: ServerProcess| {
        let c = Conn::connect(s.port);
        (s, c)
    };
    Servers {
        sources: [with_conn(start_redis(&[])), with_conn(start_hozon(&[]))],
        targets: [with_conn(start_redis(&[])), with_conn(start_hozon(&[]))],
    }
}

/// One scenario: commands for the source and for the target's database
/// before, the MIGRATEs (`{port}` and `{db}` replaced), the keys to
/// compare afterwards. A command starting with `?` runs without its
/// reply being compared.
struct Scenario<'a> {
    source: &'a str,
    target: &'a str,
    commands: &'a str,
    keys: &'a [&'a str],
}

/// Runs `line` (redis-cli quoting) on `conn`.
fn call(conn: &mut Conn, line: &str) -> Vec<u8> {
    let args = split_line(line);
    let refs: Vec<&[u8]> = args.iter().map(Vec::as_slice).collect();
    conn.call(&refs)
}

/// Runs each line of `text`.
fn run_lines(conn: &mut Conn, text: &str, port: u16, db: usize) -> Vec<String> {
    text.lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .map(|l| {
            // `?`: a reply that differs by nature (a count of connections).
            let (l, compare) = match l.strip_prefix('?') {
                Some(rest) => (rest, false),
                None => (l, true),
            };
            let line = l
                .replace("{port}", &port.to_string())
                .replace("{db}", &db.to_string());
            // The template is logged: ports and databases differ.
            let reply = show(&call(conn, &line));
            if compare {
                format!("{l} -> {reply}")
            } else {
                l.to_string()
            }
        })
        .collect()
}

/// DUMP and the TTL (in 20-second steps) of each key in the selected
/// database.
fn state(conn: &mut Conn, keys: &[&str]) -> Vec<String> {
    keys.iter()
        .map(|k| {
            // A set in a hash table dumps in its table's order, which
            // depends on the process's hash seed: its members instead.
            let kind = conn.call(&[b"TYPE", k.as_bytes()]);
            let dump = if kind == b"+set\r\n" {
                let mut members =
                    crate::harness::array_elements(&conn.call(&[b"SMEMBERS", k.as_bytes()]));
                members.sort();
                let encoding = conn.call(&[b"OBJECT", b"ENCODING", k.as_bytes()]);
                format!("set {} {}", show(&members.concat()), show(&encoding))
            } else {
                show(&conn.call(&[b"DUMP", k.as_bytes()]))
            };
            let pttl = String::from_utf8_lossy(&conn.call(&[b"PTTL", k.as_bytes()]))
                .trim()
                .trim_start_matches(':')
                .parse::<i64>()
                .expect("PTTL");
            let ttl = if pttl > 0 {
                format!("ttl step {}", (pttl - 1) / 20_000)
            } else {
                pttl.to_string()
            };
            format!("{k}: {dump} {ttl}")
        })
        .collect()
}

/// Runs `sc` from each source to each target and compares.
#[track_caller]
fn check(s: &mut Servers, sc: &Scenario) {
    let mut results = Vec::new();
    let mut db = 0;
    for t in 0..2 {
        for src in 0..2 {
            db += 1;
            let port = s.targets[t].0.port;
            let (_, target) = &mut s.targets[t];
            call(target, &format!("SELECT {db}"));
            call(target, "FLUSHDB");
            let target_setup = run_lines(target, sc.target, port, db);
            let (_, source) = &mut s.sources[src];
            call(source, "FLUSHALL");
            let source_setup = run_lines(source, sc.source, port, db);
            let replies = run_lines(source, sc.commands, port, db);
            let left = state(source, sc.keys);
            let (_, target) = &mut s.targets[t];
            call(target, &format!("SELECT {db}"));
            let arrived = state(target, sc.keys);
            let name = format!("{} -> {}", ["redis", "hozon"][src], ["redis", "hozon"][t]);
            results.push((name, [target_setup, source_setup, replies, left, arrived]));
        }
    }
    let (reference_name, reference) = &results[0];
    for (name, result) in &results[1..] {
        assert_eq!(
            reference, result,
            "{reference_name} (left) and {name} (right) differ"
        );
    }
}

const SOURCE_DATA: &str = "SET s v PX 100000
    RPUSH l a b c
    HSET h f v g w
    ZADD z 1 a 2.5 b
    SADD st x y 1
    SADD ints 1 2 3
    XADD x 1-1 f v
    SET n 12345
    SET big 0123456789012345678901234567890123456789012345678901234567890123456789";

#[test]
fn migrate_between_redis_and_hozon_in_every_direction() {
    let mut s = start();
    // Every type, single key and KEYS forms, NOKEY.
    check(
        &mut s,
        &Scenario {
            source: SOURCE_DATA,
            target: "",
            commands: r#"MIGRATE 127.0.0.1 {port} s {db} 5000
                MIGRATE 127.0.0.1 {port} "" {db} 5000 KEYS l h z st ints x missing n big
                MIGRATE 127.0.0.1 {port} missing {db} 5000
                MIGRATE 127.0.0.1 {port} "" {db} 5000 KEYS missing1 missing2
                MIGRATE 127.0.0.1 {port} "" {db} 5000 KEYS"#,
            keys: &["s", "l", "h", "z", "st", "ints", "x", "n", "big", "missing"],
        },
    );
    // COPY, REPLACE, BUSYKEY (the target's error, nothing deleted).
    check(
        &mut s,
        &Scenario {
            source: "SET a 1\nSET b 2\nSET c 3",
            target: "SET b old\nSET c old",
            commands: r#"MIGRATE 127.0.0.1 {port} a {db} 5000 COPY
                MIGRATE 127.0.0.1 {port} b {db} 5000
                MIGRATE 127.0.0.1 {port} b {db} 5000 copy replace
                MIGRATE 127.0.0.1 {port} "" {db} 5000 KEYS c a
                MIGRATE 127.0.0.1 {port} "" {db} 5000 REPLACE KEYS a c"#,
            keys: &["a", "b", "c"],
        },
    );
    // A refusal among accepted keys: the accepted ones are moved.
    check(
        &mut s,
        &Scenario {
            source: "SET p1 1\nSET p2 2\nSET p3 3",
            target: "SET p2 x",
            commands: r#"MIGRATE 127.0.0.1 {port} "" {db} 5000 KEYS p1 p2 p3"#,
            keys: &["p1", "p2", "p3"],
        },
    );
    // Authentication against a target without a password: the target's
    // errors forwarded; the default user takes any password.
    check(
        &mut s,
        &Scenario {
            source: "SET k 1\nSET k2 2",
            target: "",
            commands: r#"MIGRATE 127.0.0.1 {port} k {db} 5000 AUTH pw
                MIGRATE 127.0.0.1 {port} k2 {db} 5000 AUTH2 someone pw
                MIGRATE 127.0.0.1 {port} k {db} 5000 AUTH2 default anything"#,
            keys: &["k", "k2"],
        },
    );
    // A database the target does not have, then -1: Redis's connection
    // forgot its database after the error, and -1 is what it compares
    // with, so no SELECT is sent and the key lands in the last database
    // selected on that connection.
    check(
        &mut s,
        &Scenario {
            source: "SET k 1",
            target: "",
            commands: r#"MIGRATE 127.0.0.1 {port} k 99 5000
                MIGRATE 127.0.0.1 {port} k -1 5000"#,
            keys: &["k"],
        },
    );
    // The target closes the cached connections: the next MIGRATE finds
    // its connection dead at the first reply and reconnects once.
    check(
        &mut s,
        &Scenario {
            source: "SET k 1\nSET k2 2",
            target: "?CLIENT KILL TYPE normal SKIPME yes",
            commands: r#"MIGRATE 127.0.0.1 {port} k {db} 5000
                MIGRATE 127.0.0.1 {port} k2 {db} 5000"#,
            keys: &["k", "k2"],
        },
    );
    // A target with a password, on new connections: NOAUTH forwarded,
    // then AUTH and AUTH2 with right and wrong passwords.
    check(
        &mut s,
        &Scenario {
            source: "SET k 1\nSET k2 2\nSET k3 3",
            target: "CONFIG SET requirepass pw\n?CLIENT KILL TYPE normal SKIPME yes",
            commands: r#"MIGRATE 127.0.0.1 {port} k {db} 5000
                MIGRATE 127.0.0.1 {port} k {db} 5000 AUTH wrong
                MIGRATE 127.0.0.1 {port} k {db} 5000 AUTH pw
                MIGRATE 127.0.0.1 {port} k2 {db} 5000 AUTH2 default pw
                MIGRATE 127.0.0.1 {port} k3 {db} 5000 AUTH2 default nope"#,
            keys: &["k", "k2", "k3"],
        },
    );
    for (_, t) in s.targets.iter_mut() {
        call(t, "CONFIG SET requirepass \"\"");
    }
    // Each source caches one connection per target, closed by its cron
    // after 10 idle seconds.
    let cached = |c: &mut Conn| {
        let info = String::from_utf8_lossy(&c.call(&[b"INFO", b"stats"])).into_owned();
        info.lines()
            .find_map(|l| l.strip_prefix("migrate_cached_sockets:"))
            .expect("migrate_cached_sockets")
            .trim()
            .to_string()
    };
    for (_, c) in s.sources.iter_mut() {
        assert_eq!(cached(c), "2");
    }
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(40);
    for (_, c) in s.sources.iter_mut() {
        while cached(c) != "0" {
            assert!(
                std::time::Instant::now() < deadline,
                "cached connections not closed"
            );
            std::thread::sleep(std::time::Duration::from_millis(500));
        }
    }
}

/// Errors MIGRATE gives before or without a target.
const ERRORS: &str = r#"
SET k v
MIGRATE 127.0.0.1 1 k 0
MIGRATE 127.0.0.1 1 k 0 100 BADOPT
MIGRATE 127.0.0.1 1 k 0 100 COPY BADOPT
MIGRATE 127.0.0.1 1 k 0 100 AUTH
MIGRATE 127.0.0.1 1 k 0 100 AUTH2 u
MIGRATE 127.0.0.1 1 k 0 100 KEYS a
MIGRATE 127.0.0.1 1 k 0 100 keys
MIGRATE 127.0.0.1 1 k 0 notint
MIGRATE 127.0.0.1 1 k notint 100
MIGRATE 127.0.0.1 1 k notint notint
MIGRATE 127.0.0.1 1 k 0 1.5
MIGRATE 127.0.0.1 1 missing 0 100
MIGRATE 127.0.0.1 1 "" 0 100 KEYS
MIGRATE 127.0.0.1 1 "" 0 100 COPY KEYS missing
MIGRATE 127.0.0.1 notaport k 0 100
MIGRATE nosuchhost.invalid 6379 k 0 100
MIGRATE 127.0.0.1 1 k 0 0
MIGRATE 127.0.0.1 1 k 0 -5 COPY REPLACE
EXISTS k
"#;

#[test]
fn migrate_errors_match() {
    let mut p = Pair::new();
    let closed = unused_port().to_string();
    let unreachable = format!("SET k v\nMIGRATE 127.0.0.1 {closed} k 0 100\nEXISTS k\n");
    for resp3 in [false, true] {
        if resp3 {
            p.resp3();
        }
        p.script(ERRORS);
        p.script(&unreachable);
    }
}

#[test]
fn restore_asking_is_restore_with_the_asking_flag() {
    let mut p = Pair::new();
    p.script(
        r#"
        COMMAND INFO restore-asking
        COMMAND DOCS restore-asking
        COMMAND INFO migrate
        COMMAND DOCS migrate
        COMMAND GETKEYS MIGRATE 127.0.0.1 1 k 0 100
        COMMAND GETKEYS MIGRATE 127.0.0.1 1 "" 0 100 KEYS a b
        RPUSH l a b c
        SET s v
        ZADD z 1 a
        RESTORE-ASKING x 0 "\x0e\x01\x0f\x0f\x00\x00\x00\x01\x00\x81a\x02\xff\n\x00garbage"
        RESTORE-ASKING s2
        "#,
    );
    for key in ["l", "s", "z"] {
        let payload = bulk_payload(&p.check(&["DUMP", key]));
        let copy = format!("{key}-copy");
        for extra in [
            &[][..],
            &[&b"REPLACE"[..]][..],
            &[&b"BADOPT"[..]][..],
            &[&b"ABSTTL"[..], b"REPLACE"][..],
        ] {
            let mut args: Vec<&[u8]> = vec![b"RESTORE-ASKING", copy.as_bytes(), b"0", &payload];
            args.extend_from_slice(extra);
            p.check_bytes(&args);
        }
        p.check_bytes(&[b"RESTORE-ASKING", key.as_bytes(), b"0", &payload]);
        p.check_bytes(&[b"RESTORE-ASKING", b"neg", b"-1", &payload]);
        p.check_bytes(&[b"restore-asking", b"ttl", b"100000", &payload, b"REPLACE"]);
        p.check(&["TYPE", &copy]);
        p.check(&["DUMP", &copy]);
    }
    p.check(&["LRANGE", "l-copy", "0", "-1"]);
}
