//! Differential tests: MONITOR. The same commands go to redis-server and
//! hozon-server while a monitor watches each; the monitors' lines are
//! compared with the timestamps and the clients' addresses masked
//! (`+<ts> [0 <client 1>] "set" "k" "v"`). Also the monitor client
//! itself: what it may send, CLIENT LIST's `O` flag, RESP3, RESET, QUIT.

use crate::harness::{show, split_line, Conn, Pair};

/// A monitor line with its timestamp and addresses masked; the address
/// aliases are numbered in order of first appearance in `aliases`.
fn mask(line: &[u8], aliases: &mut Vec<String>) -> String {
    let text = String::from_utf8_lossy(line).into_owned();
    let body = text
        .strip_prefix('+')
        .and_then(|t| t.strip_suffix("\r\n"))
        .unwrap_or_else(|| panic!("not a monitor line: {}", show(line)));
    let (ts, rest) = body.split_once(' ').expect("timestamp");
    let (sec, usec) = ts.split_once('.').expect("sec.usec");
    assert_eq!(usec.len(), 6, "{body}");
    assert!(usec.bytes().all(|b| b.is_ascii_digit()), "{body}");
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs() as i64;
    let sec: i64 = sec.parse().expect("seconds");
    assert!(
        (now - sec).abs() < 120,
        "timestamp {sec} is not now ({now})"
    );
    let rest = rest.strip_prefix('[').expect("bracket");
    let (bracket, args) = rest.split_once("] ").expect("closing bracket");
    let (db, origin) = bracket.split_once(' ').expect("db and origin");
    let origin = if origin == "lua" {
        "lua".to_string()
    } else {
        assert!(origin.starts_with("127.0.0.1:"), "{body}");
        let index = match aliases.iter().position(|a| a == origin) {
            Some(i) => i,
            None => {
                aliases.push(origin.to_string());
                aliases.len() - 1
            }
        };
        format!("<client {}>", index + 1)
    };
    format!("+<ts> [{db} {origin}] {args}")
}

/// One server's monitor and the masked lines it received up to (and
/// including) the line of `ECHO <fence>`.
fn lines_until_fence(monitor: &mut Conn, fence: &str, aliases: &mut Vec<String>) -> Vec<String> {
    let mut out = Vec::new();
    loop {
        let line = mask(&monitor.read_reply(), aliases);
        let done = line.ends_with(&format!("\"ECHO\" \"{fence}\""));
        out.push(line);
        if done {
            return out;
        }
    }
}

/// A monitor connection on `port` (in RESP3 when `resp3`).
fn monitor(port: u16, resp3: bool) -> Conn {
    let mut conn = Conn::connect(port);
    if resp3 {
        conn.call(&[b"HELLO", b"3"]);
    }
    assert_eq!(conn.call(&[b"MONITOR"]), b"+OK\r\n");
    conn
}

/// Runs `script` (one command a line; a leading `?` sends to both but
/// does not compare the replies) on both servers' main connections, then
/// compares what the monitors saw.
fn check_monitored(p: &mut Pair, resp3: bool, script: &str) {
    let mut mr = monitor(p.redis_server.port, resp3);
    let mut mh = monitor(p.hozon_server.port, resp3);
    for line in script.lines().map(str::trim) {
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let (compare, line) = match line.strip_prefix('?') {
            Some(rest) => (false, rest.trim()),
            None => (true, line),
        };
        let args = split_line(line);
        let refs: Vec<&[u8]> = args.iter().map(Vec::as_slice).collect();
        if compare {
            p.check_bytes(&refs);
        } else {
            p.both_bytes(&refs);
        }
    }
    p.check(&["ECHO", "fence"]);
    let (mut ar, mut ah) = (Vec::new(), Vec::new());
    let r = lines_until_fence(&mut mr, "fence", &mut ar);
    let h = lines_until_fence(&mut mh, "fence", &mut ah);
    assert_eq!(r, h, "monitor lines\nredis: {r:#?}\nhozon: {h:#?}");
}

const COMMANDS: &str = r##"
SET foo bar
GET foo
SET "bin\x00\"\\\r\n\t\x07\x08\xff\x7f" "\xc3\xa9"
APPEND foo ""
SELECT 3
INCR counter
SELECT 0
MULTI
SET t 1
INCR t
SELECT 4
EXEC
SELECT 0
MULTI
NOSUCHCOMMAND a b
EXEC
GET
NOSUCHCOMMAND
CONFIG GET maxmemory
CLIENT SETNAME monitored
CLIENT GETNAME
?CLIENT LIST
?CLIENT INFO
EVAL "redis.call('set','k','v') return redis.call('get','k')" 0
EVAL "redis.call('select', 5) return redis.call('set', KEYS[1], ARGV[1])" 1 x y
EVAL "return redis.pcall('nosuch')" 0
EVAL "return 1" notanumber
EVALSHA 0000000000000000000000000000000000000000 0
EVALSHA short 0
SCRIPT LOAD "return redis.call('incr', 'loaded')"
EVALSHA 1a1b4f1d3b9da4d0b2c6b3ff2aa4b4e8b6f1e4e6 0
FUNCTION LOAD "#!lua name=monlib\nredis.register_function('monf', function(keys, args) return redis.call('set', keys[1], args[1]) end)"
FCALL monf 1 fk fv
FCALL nosuch 0
AUTH secret
AUTH someuser somepass
AUTH a b c
HELLO 9 AUTH a b
HELLO 2 SETNAME named AUTH
MIGRATE 127.0.0.1 1 nokey 0 100
MIGRATE 127.0.0.1 1 nokey 0 100 AUTH pw
MIGRATE 127.0.0.1 1 "" 0 100 COPY AUTH2 u p REPLACE KEYS nokey1 nokey2
MIGRATE 127.0.0.1 1 nokey 0 100 BADOPT AUTH pw
BLPOP emptylist 0.01
PUBLISH ch msg
OBJECT ENCODING foo
DBSIZE
PING
?HELLO 2 AUTH default anything
"##;

#[test]
fn monitors_see_the_same_lines_resp2() {
    let mut p = Pair::new();
    check_monitored(&mut p, false, COMMANDS);
}

#[test]
fn monitors_see_the_same_lines_resp3_clients() {
    let mut p = Pair::new();
    p.resp3();
    check_monitored(&mut p, true, COMMANDS);
}

/// The `flags=` field of a CLIENT LIST/INFO line naming client `id`.
fn flags_of(list: &[u8], id: &str) -> String {
    let text = String::from_utf8_lossy(list);
    let line = text
        .lines()
        .find(|l| {
            l.split(' ')
                .any(|f| f.trim_start_matches("txt:") == format!("id={id}"))
        })
        .unwrap_or_else(|| panic!("no client {id} in {text}"));
    line.split(' ')
        .find_map(|f| f.strip_prefix("flags="))
        .expect("flags field")
        .to_string()
}

/// The integer of a `:<n>` reply.
fn int(reply: &[u8]) -> String {
    String::from_utf8_lossy(reply)
        .trim_start_matches(':')
        .trim_end()
        .to_string()
}

#[test]
fn the_monitor_client_itself() {
    for resp3 in [false, true] {
        let mut p = Pair::new();
        let mut mons = [
            monitor(p.redis_server.port, resp3),
            monitor(p.hozon_server.port, resp3),
        ];
        let mut aliases = [Vec::new(), Vec::new()];
        let mut seen = Vec::new();
        for (m, aliases) in mons.iter_mut().zip(aliases.iter_mut()) {
            let mut got = Vec::new();
            // A second MONITOR has no reply: PING's is next, then its own
            // line (after the reply).
            m.send_raw(b"*1\r\n$7\r\nMONITOR\r\n");
            got.push(String::from_utf8_lossy(&m.call(&[b"PING"])).into_owned());
            got.push(mask(&m.read_reply(), aliases));
            // Keys are out of bounds (Redis marks monitors as replicas);
            // refused commands are not fed.
            got.push(String::from_utf8_lossy(&m.call(&[b"GET", b"k"])).into_owned());
            got.push(String::from_utf8_lossy(&m.call(&[b"SET", b"k", b"v"])).into_owned());
            got.push(String::from_utf8_lossy(&m.call(&[b"PUBLISH", b"c", b"m"])).into_owned());
            // CLIENT INFO: flag O, then its line.
            let id = int(&m.call(&[b"CLIENT", b"ID"]));
            got.push(mask(&m.read_reply(), aliases));
            let info = m.call(&[b"CLIENT", b"INFO"]);
            got.push(flags_of(&info, &id));
            got.push(mask(&m.read_reply(), aliases));
            seen.push((got, id));
        }
        let (r, h) = (&seen[0].0, &seen[1].0);
        assert_eq!(r, h, "resp3={resp3}");
        // Seen from another client: flag O in CLIENT LIST.
        let (r_list, h_list) = p.both(&["CLIENT", "LIST"]);
        assert_eq!(flags_of(&r_list, &seen[0].1), "O");
        assert_eq!(flags_of(&h_list, &seen[1].1), "O");
        // MONITOR inside a transaction is refused at EXEC.
        p.check(&["MULTI"]);
        p.check(&["MONITOR"]);
        p.check(&["EXEC"]);
        // RESET leaves monitor mode: no more lines.
        p.check(&["ECHO", "fence"]);
        let mut after = Vec::new();
        for (m, aliases) in mons.iter_mut().zip(aliases.iter_mut()) {
            after.push(lines_until_fence(m, "fence", aliases));
        }
        assert_eq!(after[0], after[1], "resp3={resp3}");
        for m in mons.iter_mut() {
            assert_eq!(m.call(&[b"RESET"]), b"+RESET\r\n");
        }
        p.check(&["SET", "after", "reset"]);
        for m in mons.iter_mut() {
            assert_eq!(m.call(&[b"PING"]), b"+PONG\r\n");
            assert!(m
                .call(&[b"CLIENT", b"INFO"])
                .windows(8)
                .any(|w| w == b"flags=N "));
        }
        // QUIT from a monitor.
        for port in [p.redis_server.port, p.hozon_server.port] {
            let mut m = monitor(port, resp3);
            assert_eq!(m.call(&[b"QUIT"]), b"+OK\r\n");
            assert_eq!(m.read_until_close(), b"");
        }
        let (r_list, h_list) = p.both(&["CLIENT", "LIST"]);
        for list in [r_list, h_list] {
            assert!(
                !String::from_utf8_lossy(&list).contains("flags=O"),
                "{}",
                show(&list)
            );
        }
    }
}

/// Sends `args` on `conn` without waiting for a reply (CLIENT REPLY OFF
/// and SKIP have none), then gives the server time to run it.
fn send_only(conn: &mut Conn, args: &[&[u8]]) {
    conn.send_raw(&testkit::harness::encode_command(args));
    std::thread::sleep(std::time::Duration::from_millis(100));
}

/// A monitor's output limit is the `normal` class's (Redis's getClientType
/// exposes monitors as normal clients), it is never paused by CLIENT
/// PAUSE (Redis marks it a replica), and CLIENT REPLY OFF/SKIP silence
/// its lines as they silence replies.
#[test]
fn monitor_limits_pause_and_reply_modes() {
    let mut p = Pair::new();
    // A pubsub limit of one byte does not apply to monitors.
    p.check(&[
        "CONFIG",
        "SET",
        "client-output-buffer-limit",
        "pubsub 1 0 0",
    ]);
    let mut mons = [
        monitor(p.redis_server.port, false),
        monitor(p.hozon_server.port, false),
    ];
    let mut aliases = [Vec::new(), Vec::new()];
    for i in 0..20 {
        p.check(&["SET", &format!("k{i}"), "v"]);
    }
    p.check(&["ECHO", "fence"]);
    let seen: Vec<Vec<String>> = mons
        .iter_mut()
        .zip(aliases.iter_mut())
        .map(|(m, a)| lines_until_fence(m, "fence", a))
        .collect();
    assert_eq!(seen[0].len(), 21, "redis: {:#?}", seen[0]);
    assert_eq!(seen[0], seen[1]);

    // CLIENT PAUSE ALL: the monitor's own commands still run.
    p.check(&["CLIENT", "PAUSE", "3000", "ALL"]);
    let mut paused = Vec::new();
    for (m, a) in mons.iter_mut().zip(aliases.iter_mut()) {
        let started = std::time::Instant::now();
        let reply = m.call(&[b"PING"]);
        let waited = started.elapsed();
        assert!(
            waited < std::time::Duration::from_millis(1500),
            "{waited:?}"
        );
        paused.push((show(&reply), mask(&m.read_reply(), a)));
    }
    assert_eq!(paused[0], paused[1]);
    p.check(&["CLIENT", "UNPAUSE"]);

    // CLIENT REPLY OFF, then ON; SKIP drops the lines until the monitor's
    // next command has run.
    for m in mons.iter_mut() {
        send_only(m, &[b"CLIENT", b"REPLY", b"OFF"]);
    }
    p.check(&["SET", "during", "off"]);
    let mut replies = Vec::new();
    for m in mons.iter_mut() {
        replies.push(show(&m.call(&[b"CLIENT", b"REPLY", b"ON"])));
    }
    assert_eq!(replies[0], replies[1]);
    p.check(&["SET", "after", "on"]);
    for m in mons.iter_mut() {
        send_only(m, &[b"CLIENT", b"REPLY", b"SKIP"]);
    }
    p.check(&["SET", "during", "skip"]);
    for m in mons.iter_mut() {
        send_only(m, &[b"PING"]);
    }
    p.check(&["SET", "after", "skip"]);
    p.check(&["ECHO", "fence2"]);
    let seen: Vec<Vec<String>> = mons
        .iter_mut()
        .zip(aliases.iter_mut())
        .map(|(m, a)| lines_until_fence(m, "fence2", a))
        .collect();
    assert!(
        !seen[0].iter().any(|l| l.contains("\"during\"")),
        "redis: {:#?}",
        seen[0]
    );
    assert_eq!(seen[0], seen[1]);
}
