//! Differential tests: connection and server commands (PING ECHO SELECT
//! HELLO AUTH QUIT RESET CLIENT COMMAND INFO TIME SHUTDOWN), the server's
//! connection limits, and the command line (CONFIG: config.rs).
//!
//! What legitimately differs from Redis, and is therefore not compared
//! byte for byte (everything else is):
//! - values that describe the process: INFO `server` values (pid, run_id,
//!   uptime, executable, …), memory and CPU figures, ports, client ids,
//!   CLIENT LIST `id addr laddr fd age idle qbuf qbuf-free rbs rbp omem
//!   tot-mem`;
//! - INFO `hozon_version` (an extra field of the server section), and the
//!   commandstats / errorstats / latencystats lines hozon does not keep;
//! - CLIENT LIST `cmd=` of *another* client whose last command was a
//!   subcommand (the engine records the subcommand's name only);
//! - COMMAND COUNT / LIST / INFO and DOCS without names: hozon reports the
//!   commands it implements (compared against Redis's restricted to them);
//! - CONFIG: `dir` (Redis reports its working directory), `dbfilename`
//!   (`dump.hoz`), hozon knows fewer parameters (those it has are
//!   compared), settings that need what hozon does not have are refused
//!   (`daemonize yes`);
//! - SHUTDOWN SAVE fails (nothing can be saved yet).

use std::io::Read;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use quickcheck::{Arbitrary, Gen, TestResult};

use super::config::{config_pair, config_pairs};
use crate::harness::{
    compare_sequence, encode_command, quickcheck_ops, show, split_line, start_hozon, start_redis,
    Conn, Pair,
};

// ---------------------------------------------------------------------------
// A small RESP value model, to compare replies whose parts legitimately
// differ or come in an unspecified order.

#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub(super) enum V {
    Simple(Vec<u8>),
    Error(Vec<u8>),
    Int(i64),
    Bulk(Vec<u8>),
    Null,
    Array(Vec<V>),
    Map(Vec<(V, V)>),
    Set(Vec<V>),
    Verbatim(Vec<u8>),
    Other(Vec<u8>),
}

pub(super) fn parse(reply: &[u8]) -> V {
    let (v, used) = parse_at(reply, 0);
    assert_eq!(used, reply.len(), "trailing bytes in {}", show(reply));
    v
}

fn parse_at(buf: &[u8], at: usize) -> (V, usize) {
    let end = at
        + buf[at..]
            .windows(2)
            .position(|w| w == b"\r\n")
            .expect("line end");
    let line = &buf[at + 1..end];
    let next = end + 2;
    let num = || {
        std::str::from_utf8(line)
            .expect("utf-8")
            .parse::<i64>()
            .expect("number")
    };
    match buf[at] {
        b'+' => (V::Simple(line.to_vec()), next),
        b'-' => (V::Error(line.to_vec()), next),
        b':' => (V::Int(num()), next),
        b'_' => (V::Null, next),
        b'$' | b'=' => {
            let n = num();
            if n < 0 {
                return (V::Null, next);
            }
            let body = buf[next..next + n as usize].to_vec();
            let v = if buf[at] == b'=' {
                V::Verbatim(body)
            } else {
                V::Bulk(body)
            };
            (v, next + n as usize + 2)
        }
        b'*' | b'~' | b'>' | b'%' => {
            let n = num();
            if n < 0 {
                return (V::Null, next);
            }
            let mut pos = next;
            let count = if buf[at] == b'%' { n * 2 } else { n };
            let mut items = Vec::new();
            for _ in 0..count {
                let (v, p) = parse_at(buf, pos);
                items.push(v);
                pos = p;
            }
            let v = match buf[at] {
                b'~' => V::Set(items),
                b'%' => V::Map(
                    items
                        .chunks(2)
                        .map(|c| (c[0].clone(), c[1].clone()))
                        .collect(),
                ),
                _ => V::Array(items),
            };
            (v, pos)
        }
        _ => (V::Other(line.to_vec()), next),
    }
}

pub(super) fn text(v: &V) -> String {
    match v {
        V::Bulk(b) | V::Simple(b) | V::Verbatim(b) | V::Error(b) => {
            String::from_utf8_lossy(b).into_owned()
        }
        other => format!("{other:?}"),
    }
}

/// Key/value pairs of a map reply (RESP3 map, or RESP2 flat array).
pub(super) fn pairs(v: &V) -> Vec<(V, V)> {
    match v {
        V::Map(p) => p.clone(),
        V::Array(items) => items
            .chunks(2)
            .map(|c| (c[0].clone(), c[1].clone()))
            .collect(),
        other => panic!("not a map: {other:?}"),
    }
}

/// A COMMAND INFO entry with its subcommands in name order (Redis lists
/// them in hash-table order, which changes from run to run), keeping only
/// the subcommands named in `known` (those hozon implements).
fn normalize_info(v: V, known: &[String]) -> V {
    match v {
        V::Array(mut items) if items.len() == 10 && matches!(items[0], V::Bulk(_)) => {
            if let V::Array(subs) = &mut items[9] {
                let mut kept: Vec<V> = subs
                    .drain(..)
                    .filter(|s| matches!(s, V::Array(f) if known.contains(&text(&f[0]))))
                    .map(|s| normalize_info(s, known))
                    .collect();
                kept.sort();
                *subs = kept;
            }
            V::Array(items)
        }
        other => other,
    }
}

/// Every entry of a COMMAND INFO reply, normalized.
fn normalize_info_reply(v: V, known: &[String]) -> V {
    match v {
        V::Array(entries) => V::Array(
            entries
                .into_iter()
                .map(|e| normalize_info(e, known))
                .collect(),
        ),
        other => other,
    }
}

/// A COMMAND DOCS entry with its subcommands (those in `known`) in name
/// order.
fn normalize_docs(v: V, known: &[String]) -> V {
    let fields: Vec<(V, V)> = pairs(&v)
        .into_iter()
        .map(|(k, val)| {
            if text(&k) == "subcommands" {
                let mut subs: Vec<(V, V)> = pairs(&val)
                    .into_iter()
                    .filter(|(n, _)| known.contains(&text(n)))
                    .map(|(n, d)| (n, normalize_docs(d, known)))
                    .collect();
                subs.sort();
                (k, V::Map(subs))
            } else {
                (k, val)
            }
        })
        .collect();
    V::Map(fields)
}

/// Every entry of a COMMAND DOCS reply, normalized.
fn normalize_docs_reply(v: V, known: &[String]) -> V {
    V::Map(
        pairs(&v)
            .into_iter()
            .map(|(name, doc)| (name, normalize_docs(doc, known)))
            .collect(),
    )
}

/// The `name:value` fields of each INFO section, in order.
fn info_sections(reply: &[u8]) -> Vec<(String, Vec<(String, String)>)> {
    let body = text(&parse(reply));
    let body = body.strip_prefix("txt:").unwrap_or(&body).to_string();
    let mut sections: Vec<(String, Vec<(String, String)>)> = Vec::new();
    for line in body.split("\r\n") {
        if let Some(title) = line.strip_prefix("# ") {
            sections.push((title.to_string(), Vec::new()));
        } else if let Some((k, v)) = line.split_once(':') {
            sections
                .last_mut()
                .expect("a field inside a section")
                .1
                .push((k.to_string(), v.to_string()));
        }
    }
    sections
}

/// The `k=v` fields of a CLIENT LIST/INFO line.
fn client_fields(line: &str) -> Vec<(String, String)> {
    line.split(' ')
        .map(|f| {
            let (k, v) = f.split_once('=').expect("k=v field");
            (k.to_string(), v.to_string())
        })
        .collect()
}

fn client_lines(reply: &[u8]) -> Vec<Vec<(String, String)>> {
    let body = text(&parse(reply));
    let body = body.strip_prefix("txt:").unwrap_or(&body).to_string();
    body.lines().map(client_fields).collect()
}

fn field<'a>(fields: &'a [(String, String)], name: &str) -> &'a str {
    &fields
        .iter()
        .find(|(k, _)| k == name)
        .unwrap_or_else(|| panic!("no field {name}"))
        .1
}

/// Redis's and hozon's reply to a command sent on their side only (for
/// arguments that differ per server, such as a client id).
fn both_each(p: &mut Pair, r_args: &[&str], h_args: &[&str]) -> (Vec<u8>, Vec<u8>) {
    (p.redis(r_args), p.hozon(h_args))
}

/// Reads until the server closes the connection, failing after `limit`.
fn closed_within(conn: &mut Conn, limit: Duration) -> (Vec<u8>, Duration) {
    let started = Instant::now();
    let got = conn.read_until_close();
    let took = started.elapsed();
    assert!(took <= limit, "connection still open after {took:?}");
    (got, took)
}

// ---------------------------------------------------------------------------
// PING ECHO SELECT TIME

const BASICS: &str = "
PING
PING hello
PING a b
ping \"\"
ECHO hi
ECHO \"\"
ECHO
ECHO a b
SELECT 1
SET k v
SELECT 0
GET k
SELECT 15
SELECT 16
SELECT -1
SELECT abc
SELECT 1.5
SELECT 4294967296
SELECT 2147483648
SELECT \" 1\"
SELECT
TIME x
";

#[test]
fn ping_echo_select() {
    let mut p = Pair::new();
    p.script(BASICS);
    p.resp3();
    p.script(BASICS);
}

#[test]
fn time_replies_seconds_and_microseconds() {
    let mut p = Pair::new();
    for resp3 in [false, true] {
        if resp3 {
            p.resp3();
        }
        let (r, h) = p.both(&["TIME"]);
        let (V::Array(r), V::Array(h)) = (parse(&r), parse(&h)) else {
            panic!("TIME is an array");
        };
        assert_eq!(r.len(), 2);
        assert_eq!(h.len(), 2);
        let num = |v: &V| text(v).parse::<i64>().expect("a number in a bulk string");
        assert!((num(&r[0]) - num(&h[0])).abs() <= 2, "seconds agree");
        assert!((0..1_000_000).contains(&num(&h[1])));
    }
}

// ---------------------------------------------------------------------------
// HELLO AUTH QUIT RESET

/// A HELLO reply with the connection id replaced (ids differ per server);
/// other replies as they are.
fn hello_without_id(reply: &[u8]) -> V {
    let v = parse(reply);
    let is_hello = match &v {
        V::Map(p) => p.iter().any(|(k, _)| text(k) == "id"),
        V::Array(items) => items.len() == 14 && text(&items[0]) == "server",
        _ => false,
    };
    if !is_hello {
        return v;
    }
    let fixed: Vec<(V, V)> = pairs(&v)
        .into_iter()
        .map(|(k, val)| {
            if text(&k) == "id" {
                (k, V::Int(0))
            } else {
                (k, val)
            }
        })
        .collect();
    V::Map(fixed)
}

#[test]
fn hello_switches_protocol_and_reports_the_server() {
    let mut p = Pair::new();
    for cmd in [
        "HELLO",
        "HELLO 2",
        "HELLO 3",
        "HELLO 2",
        "HELLO 4",
        "HELLO 1",
        "HELLO abc",
        "HELLO 3 FOO",
        "HELLO 3 AUTH default",
        "HELLO 3 SETNAME",
        "HELLO 3 SETNAME \"a b\"",
        "HELLO 3 SETNAME myname",
        "CLIENT GETNAME",
        "HELLO 2 AUTH default anything",
        "HELLO 2 AUTH bob anything",
        "HELLO 3 SETNAME other AUTH default x",
        "CLIENT GETNAME",
        "HELLO 2",
    ] {
        let args = split_line(cmd);
        let refs: Vec<&[u8]> = args.iter().map(|a| a.as_slice()).collect();
        let (r, h) = p.both_bytes(&refs);
        assert_eq!(
            hello_without_id(&r),
            hello_without_id(&h),
            "{cmd}\n  redis: {}\n  hozon: {}",
            show(&r),
            show(&h)
        );
        assert_eq!(r.first(), h.first(), "same reply type for {cmd}");
    }
}

#[test]
fn auth_without_a_password() {
    let mut p = Pair::new();
    let script = "
AUTH x
AUTH default x
AUTH bob x
AUTH a b c
AUTH
GET k
";
    p.script(script);
    p.resp3();
    p.script(script);
}

#[test]
fn auth_with_requirepass() {
    let mut p = Pair::with_args(&["--requirepass", "s3cret"], &["--requirepass", "s3cret"]);
    p.script(
        "
GET k
PING
CLIENT ID
HELLO 3
AUTH wrong
AUTH default wrong
AUTH bob s3cret
AUTH s3cre
AUTH s3cret1
AUTH s3cret
SET k v
GET k
AUTH default s3cret
",
    );
    let (mut r, mut h) = p.connect_more();
    for cmd in [
        "HELLO 3 AUTH default nope",
        "HELLO 3 AUTH default s3cret",
        "GET k",
        "RESET",
        "GET k",
    ] {
        let args = split_line(cmd);
        let refs: Vec<&[u8]> = args.iter().map(|a| a.as_slice()).collect();
        let (rr, hr) = (r.call(&refs), h.call(&refs));
        assert_eq!(
            hello_without_id(&rr),
            hello_without_id(&hr),
            "{cmd}\n  redis: {}\n  hozon: {}",
            show(&rr),
            show(&hr)
        );
    }
    // Removing the password: AUTH <password> is then refused; connections
    // made meanwhile need no AUTH.
    p.script("CONFIG SET requirepass \"\"\nAUTH s3cret\nAUTH default whatever");
    let (mut r, mut h) = p.connect_more();
    assert_eq!(
        show(&r.call(&[b"GET", b"k"])),
        show(&h.call(&[b"GET", b"k"]))
    );
    p.script("CONFIG SET requirepass again\nCONFIG GET requirepass");
    let (mut r, mut h) = p.connect_more();
    assert_eq!(
        show(&r.call(&[b"GET", b"k"])),
        show(&h.call(&[b"GET", b"k"]))
    );
}

#[test]
fn quit_replies_then_closes() {
    let p = Pair::new();
    let (mut r, mut h) = p.connect_more();
    let bytes = [encode_command(&[b"QUIT"]), encode_command(&[b"PING"])].concat();
    r.send_raw(&bytes);
    h.send_raw(&bytes);
    let (rr, _) = closed_within(&mut r, Duration::from_secs(5));
    let (hr, _) = closed_within(&mut h, Duration::from_secs(5));
    assert_eq!(show(&rr), show(&hr));
    assert_eq!(rr, b"+OK\r\n");
}

#[test]
fn reset_restores_a_fresh_connection() {
    let mut p = Pair::new();
    p.script("SELECT 3\nSET k v\nCLIENT SETNAME someone\nCLIENT NO-EVICT on");
    p.resp3();
    p.script("RESET\nCLIENT GETNAME\nGET k\nRESET x");
    let (r, h) = p.both(&["CLIENT", "INFO"]);
    let (r, h) = (client_lines(&r), client_lines(&h));
    for name in ["name", "db", "resp", "flags"] {
        assert_eq!(field(&r[0], name), field(&h[0], name), "{name}");
    }
}

/// `qbuf=` of the client running CLIENT INFO: Redis trims its query buffer
/// after the batch, so the command sees its own bytes and those of the
/// commands sent with it in one write.
#[test]
fn qbuf_counts_the_batch_the_command_came_in() {
    let mut p = Pair::new();
    let info = b"*2\r\n$6\r\nCLIENT\r\n$4\r\nINFO\r\n";
    let ping = b"*1\r\n$4\r\nPING\r\n";
    for batch in [
        info.to_vec(),
        [&ping[..], &info[..]].concat(),
        [&info[..], &ping[..]].concat(),
    ] {
        let mut qbufs = Vec::new();
        for conn in [&mut p.r, &mut p.h] {
            conn.send_raw(&batch);
            let mut qbuf = None;
            for _ in 0..2 - usize::from(batch.len() == info.len()) {
                let reply = conn.read_reply();
                if reply.starts_with(b"$") {
                    let line = client_lines(&reply);
                    qbuf = Some(field(&line[0], "qbuf").to_string());
                }
            }
            qbufs.push(qbuf.expect("CLIENT INFO's reply"));
        }
        assert_eq!(qbufs[0], qbufs[1], "{}", show(&batch));
    }
}

// ---------------------------------------------------------------------------
// CLIENT

const CLIENT_SCRIPT: &str = "
CLIENT
CLIENT FOO
CLIENT HELP
client help
CLIENT HELP x
CLIENT GETNAME
CLIENT SETNAME
CLIENT SETNAME foo
CLIENT GETNAME
CLIENT SETNAME \"a b\"
CLIENT SETNAME \"a\\nb\"
CLIENT SETNAME \"caf\\xc3\\xa9\"
CLIENT GETNAME
CLIENT SETNAME \"\"
CLIENT GETNAME
CLIENT SETNAME ~!@#$%^&*()_+{}|:<>?
CLIENT GETNAME
CLIENT ID x
CLIENT INFO x
CLIENT NO-EVICT on
CLIENT NO-EVICT OFF
CLIENT NO-EVICT maybe
CLIENT NO-EVICT
CLIENT REPLY maybe
CLIENT REPLY ON
CLIENT REPLY
CLIENT LIST foo
CLIENT LIST TYPE foo
CLIENT LIST TYPE pubsub
CLIENT LIST TYPE master
CLIENT LIST TYPE replica
CLIENT LIST TYPE slave
CLIENT LIST ID
CLIENT LIST ID abc
CLIENT LIST ID 1 abc
CLIENT LIST ID 99999
CLIENT KILL
CLIENT KILL 1.2.3.4:5
CLIENT KILL ID
CLIENT KILL ID 0
CLIENT KILL ID -1
CLIENT KILL ID abc
CLIENT KILL ID 99999
CLIENT KILL ID 99999 TYPE foo
CLIENT KILL TYPE pubsub
CLIENT KILL TYPE master SKIPME no
CLIENT KILL USER bob
CLIENT KILL USER default ID 99999
CLIENT KILL SKIPME maybe
CLIENT KILL SKIPME
CLIENT KILL ADDR 1.2.3.4:5 LADDR 1.2.3.4:5
CLIENT KILL FOO bar
CLIENT KILL ID 99999 FOO
";

#[test]
fn client_subcommands_and_their_errors() {
    let mut p = Pair::new();
    p.script(CLIENT_SCRIPT);
    p.resp3();
    p.script(CLIENT_SCRIPT);
}

#[test]
fn client_id_is_an_integer_per_connection() {
    let mut p = Pair::new();
    let (r, h) = p.both(&["CLIENT", "ID"]);
    assert!(matches!(parse(&r), V::Int(_)) && matches!(parse(&h), V::Int(_)));
    let (hello_r, hello_h) = p.both(&["HELLO"]);
    let id_of = |v: V| {
        pairs(&v)
            .into_iter()
            .find(|(k, _)| text(k) == "id")
            .map(|(_, v)| v)
    };
    assert_eq!(
        id_of(parse(&hello_h)),
        Some(parse(&h)),
        "HELLO and CLIENT ID agree"
    );
    assert_eq!(id_of(parse(&hello_r)), Some(parse(&r)));
}

/// Fields compared by value in CLIENT LIST/INFO lines (the others describe
/// sockets and buffers: only their names and order are compared).
const CLIENT_VALUE_FIELDS: &[&str] = &[
    "name",
    "flags",
    "db",
    "sub",
    "psub",
    "ssub",
    "multi",
    "argv-mem",
    "multi-mem",
    "obl",
    "oll",
    "events",
    "cmd",
    "user",
    "redir",
    "resp",
];

#[track_caller]
fn assert_same_client_line(r: &[(String, String)], h: &[(String, String)]) {
    let names = |f: &[(String, String)]| f.iter().map(|(k, _)| k.clone()).collect::<Vec<_>>();
    assert_eq!(names(r), names(h), "CLIENT LIST fields and their order");
    for name in CLIENT_VALUE_FIELDS {
        assert_eq!(field(r, name), field(h, name), "field {name}");
    }
}

#[test]
fn client_list_and_info_have_redis_fields() {
    let mut p = Pair::new();
    for resp3 in [false, true] {
        if resp3 {
            p.resp3();
        }
        let (r, h) = p.both(&["CLIENT", "INFO"]);
        assert_eq!(r[0], h[0], "reply type");
        let (r, h) = (client_lines(&r), client_lines(&h));
        assert_eq!(r.len(), 1);
        assert_same_client_line(&r[0], &h[0]);
        assert_eq!(
            field(&h[0], "laddr"),
            format!("127.0.0.1:{}", p.hozon_server.port)
        );

        let (mut r2, mut h2) = p.connect_more();
        r2.call(&[b"SELECT", b"5"]);
        h2.call(&[b"SELECT", b"5"]);
        r2.call(&[b"HELLO", b"3", b"SETNAME", b"second"]);
        h2.call(&[b"HELLO", b"3", b"SETNAME", b"second"]);
        for args in [
            &["CLIENT", "LIST"][..],
            &["CLIENT", "LIST", "TYPE", "normal"],
            &["client", "list", "type", "NORMAL"],
        ] {
            let (r, h) = p.both(args);
            let (r, h) = (client_lines(&r), client_lines(&h));
            assert_eq!(r.len(), 2, "{args:?}");
            assert_eq!(h.len(), 2, "{args:?}");
            for (rl, hl) in r.iter().zip(&h) {
                assert_same_client_line(rl, hl);
            }
            // The other client's address is its socket's.
            let (r_info, h_info) = (
                client_lines(&r2.call(&[b"CLIENT", b"INFO"])),
                client_lines(&h2.call(&[b"CLIENT", b"INFO"])),
            );
            assert_eq!(field(&h[1], "addr"), field(&h_info[0], "addr"));
            assert_eq!(field(&r[1], "addr"), field(&r_info[0], "addr"));
        }
        // CLIENT LIST ID: in the order given, unknown ids skipped.
        let (rid, hid) = (client_id(&mut r2), client_id(&mut h2));
        let (r, h) = both_each(
            &mut p,
            &["CLIENT", "LIST", "ID", &rid, "424242", &rid],
            &["CLIENT", "LIST", "ID", &hid, "424242", &hid],
        );
        let (r, h) = (client_lines(&r), client_lines(&h));
        assert_eq!(r.len(), 2);
        assert_eq!(h.len(), 2);
        assert_same_client_line(&r[0], &h[0]);
        assert_eq!(field(&h[0], "name"), "second");
        assert_eq!(field(&h[0], "db"), "5");
        assert_eq!(field(&h[0], "resp"), "3");
        // Gone before the next round lists clients.
        quit(&mut r2);
        quit(&mut h2);
    }
}

fn quit(conn: &mut Conn) {
    conn.send_raw(&encode_command(&[b"QUIT"]));
    closed_within(conn, Duration::from_secs(5));
}

/// The id of the connection, as a string.
fn client_id(conn: &mut Conn) -> String {
    match parse(&conn.call(&[b"CLIENT", b"ID"])) {
        V::Int(id) => id.to_string(),
        other => panic!("CLIENT ID: {other:?}"),
    }
}

fn client_addr(conn: &mut Conn) -> String {
    field(&client_lines(&conn.call(&[b"CLIENT", b"INFO"]))[0], "addr").to_string()
}

#[test]
fn client_kill_closes_the_matching_connections() {
    let mut p = Pair::new();
    // By id (new form): the count, then the victim is disconnected.
    let (mut r2, mut h2) = p.connect_more();
    let (rid, hid) = (client_id(&mut r2), client_id(&mut h2));
    let (r, h) = both_each(
        &mut p,
        &["CLIENT", "KILL", "ID", &rid],
        &["CLIENT", "KILL", "ID", &hid],
    );
    assert_eq!(show(&r), show(&h));
    assert_eq!(r, b":1\r\n");
    closed_within(&mut r2, Duration::from_secs(5));
    closed_within(&mut h2, Duration::from_secs(5));

    // By address (old form): +OK.
    let (mut r2, mut h2) = p.connect_more();
    let (ra, ha) = (client_addr(&mut r2), client_addr(&mut h2));
    let (r, h) = both_each(&mut p, &["CLIENT", "KILL", &ra], &["CLIENT", "KILL", &ha]);
    assert_eq!(show(&r), show(&h));
    assert_eq!(r, b"+OK\r\n");
    closed_within(&mut r2, Duration::from_secs(5));
    closed_within(&mut h2, Duration::from_secs(5));

    // ADDR plus LADDR, and TYPE normal which skips the caller by default.
    let (mut r2, mut h2) = p.connect_more();
    let (mut r3, mut h3) = p.connect_more();
    let (ra, ha) = (client_addr(&mut r2), client_addr(&mut h2));
    let rl = format!("127.0.0.1:{}", p.redis_server.port);
    let hl = format!("127.0.0.1:{}", p.hozon_server.port);
    let (r, h) = both_each(
        &mut p,
        &["CLIENT", "KILL", "ADDR", &ra, "LADDR", &rl, "SKIPME", "yes"],
        &["CLIENT", "KILL", "ADDR", &ha, "LADDR", &hl, "SKIPME", "yes"],
    );
    assert_eq!(show(&r), show(&h));
    assert_eq!(r, b":1\r\n");
    closed_within(&mut r2, Duration::from_secs(5));
    closed_within(&mut h2, Duration::from_secs(5));
    let (r, h) = p.both(&["CLIENT", "KILL", "TYPE", "normal", "USER", "default"]);
    assert_eq!(show(&r), show(&h));
    assert_eq!(r, b":1\r\n");
    closed_within(&mut r3, Duration::from_secs(5));
    closed_within(&mut h3, Duration::from_secs(5));
    p.check(&["PING"]);

    // Killing oneself: the reply is written, then the connection closes.
    let (mut r4, mut h4) = p.connect_more();
    let (rid, hid) = (client_id(&mut r4), client_id(&mut h4));
    r4.send_raw(&encode_command(&[
        b"CLIENT",
        b"KILL",
        b"ID",
        rid.as_bytes(),
        b"SKIPME",
        b"no",
    ]));
    h4.send_raw(&encode_command(&[
        b"CLIENT",
        b"KILL",
        b"ID",
        hid.as_bytes(),
        b"SKIPME",
        b"no",
    ]));
    let (rr, _) = closed_within(&mut r4, Duration::from_secs(5));
    let (hr, _) = closed_within(&mut h4, Duration::from_secs(5));
    assert_eq!(show(&rr), show(&hr));
    assert_eq!(rr, b":1\r\n");
    let (mut r5, mut h5) = p.connect_more();
    let (ra, ha) = (client_addr(&mut r5), client_addr(&mut h5));
    r5.send_raw(&encode_command(&[b"CLIENT", b"KILL", ra.as_bytes()]));
    h5.send_raw(&encode_command(&[b"CLIENT", b"KILL", ha.as_bytes()]));
    let (rr, _) = closed_within(&mut r5, Duration::from_secs(5));
    let (hr, _) = closed_within(&mut h5, Duration::from_secs(5));
    assert_eq!(show(&rr), show(&hr));
}

#[test]
fn client_reply_off_and_skip_suppress_replies() {
    let p = Pair::new();
    let (mut r, mut h) = p.connect_more();
    let script: Vec<u8> = [
        "CLIENT REPLY OFF",
        "PING a",
        "SET k v",
        "CLIENT REPLY SKIP",
        "PING b",
        "CLIENT REPLY ON",
        "GET k",
        "CLIENT REPLY SKIP",
        "PING c",
        "PING d",
        "CLIENT REPLY SKIP",
        "CLIENT REPLY SKIP",
        "PING e",
        "PING f",
    ]
    .iter()
    .flat_map(|line| {
        let args = split_line(line);
        let refs: Vec<&[u8]> = args.iter().map(|a| a.as_slice()).collect();
        encode_command(&refs)
    })
    .collect();
    r.send_raw(&script);
    h.send_raw(&script);
    // The replies that are sent, in order; then a marker to prove nothing
    // else was sent in between.
    let mut got = Vec::new();
    for _ in 0..4 {
        let (rr, hr) = (r.read_reply(), h.read_reply());
        assert_eq!(show(&rr), show(&hr));
        got.push(rr);
    }
    assert_eq!(
        got,
        vec![
            b"+OK\r\n".to_vec(),
            b"$1\r\nv\r\n".to_vec(),
            b"$1\r\nd\r\n".to_vec(),
            b"$1\r\nf\r\n".to_vec()
        ]
    );
    assert_eq!(
        show(&r.call(&[b"PING", b"end"])),
        show(&h.call(&[b"PING", b"end"]))
    );
}

// ---------------------------------------------------------------------------
// COMMAND

/// Names of hozon's commands and subcommands.
/// Commands hozon takes from Redis versions after the 7.0 reference
/// (their metadata is 7.2's: docs/replication.md §3.6), left out of the
/// comparisons with redis-server 7.0.
const LATER_COMMANDS: &[&str] = &["waitaof"];

/// The commands hozon implements that Redis 7.0 has.
fn hozon_command_names(p: &mut Pair) -> Vec<String> {
    match parse(&p.hozon(&["COMMAND", "LIST"])) {
        V::Array(names) => names
            .iter()
            .map(text)
            .filter(|n| !LATER_COMMANDS.contains(&n.as_str()))
            .collect(),
        other => panic!("COMMAND LIST: {other:?}"),
    }
}

#[test]
fn command_info_and_docs_match_redis_for_every_command() {
    let mut p = Pair::new();
    let names = hozon_command_names(&mut p);
    assert!(
        names.iter().any(|n| n == "config|get"),
        "subcommands are listed"
    );
    let mut mismatches = Vec::new();
    for resp3 in [false, true] {
        if resp3 {
            p.resp3();
        }
        for name in &names {
            let (r, h) = p.both(&["COMMAND", "INFO", name]);
            if normalize_info_reply(parse(&r), &names) != normalize_info_reply(parse(&h), &names) {
                mismatches.push(format!(
                    "COMMAND INFO {name}\n  redis: {}\n  hozon: {}",
                    show(&r),
                    show(&h)
                ));
            }
            let (r, h) = p.both(&["COMMAND", "DOCS", name]);
            if normalize_docs_reply(parse(&r), &names) != normalize_docs_reply(parse(&h), &names) {
                mismatches.push(format!(
                    "COMMAND DOCS {name}\n  redis: {}\n  hozon: {}",
                    show(&r),
                    show(&h)
                ));
            }
        }
    }
    assert!(
        mismatches.is_empty(),
        "{} mismatches:\n{}",
        mismatches.len(),
        mismatches.join("\n")
    );
}

#[test]
fn command_without_names_reports_the_implemented_commands() {
    let mut p = Pair::new();
    let names = hozon_command_names(&mut p);
    let top: Vec<&String> = names.iter().filter(|n| !n.contains('|')).collect();
    let (r, h) = p.both(&["COMMAND", "COUNT"]);
    assert_eq!(parse(&h), V::Int((top.len() + LATER_COMMANDS.len()) as i64));
    assert!(matches!(parse(&r), V::Int(n) if n as usize >= top.len()));
    for args in [&["COMMAND"][..], &["COMMAND", "INFO"]] {
        let (r, h) = p.both(args);
        let entries = |v: V| -> Vec<V> {
            match normalize_info_reply(v, &names) {
                V::Array(items) => items,
                other => panic!("{other:?}"),
            }
        };
        let (r, mut h) = (entries(parse(&r)), entries(parse(&h)));
        h.retain(|entry| {
            !matches!(entry, V::Array(fields)
                if fields.first().is_some_and(|n| LATER_COMMANDS.contains(&text(n).as_str())))
        });
        assert_eq!(h.len(), top.len());
        for entry in &h {
            assert!(
                r.contains(entry),
                "{args:?}: Redis has the same entry: {entry:?}"
            );
        }
    }
    let (r, h) = p.both(&["COMMAND", "DOCS"]);
    let (r, mut h) = (pairs(&parse(&r)), pairs(&parse(&h)));
    h.retain(|(name, _)| !LATER_COMMANDS.contains(&text(name).as_str()));
    assert_eq!(h.len(), top.len());
    for (name, doc) in h {
        let theirs = r
            .iter()
            .find(|(n, _)| *n == name)
            .map(|(_, d)| normalize_docs(d.clone(), &names));
        assert_eq!(
            theirs,
            Some(normalize_docs(doc, &names)),
            "COMMAND DOCS entry {}",
            text(&name)
        );
    }
}

#[test]
fn command_list_filters() {
    let mut p = Pair::new();
    let names = hozon_command_names(&mut p);
    for filter in [
        &["COMMAND", "LIST", "FILTERBY", "PATTERN", "c*"][..],
        &["COMMAND", "LIST", "FILTERBY", "PATTERN", "*|*"],
        &["COMMAND", "LIST", "FILTERBY", "pattern", "CONFIG|G?T"],
        &["COMMAND", "LIST", "FILTERBY", "ACLCAT", "connection"],
        &["COMMAND", "LIST", "FILTERBY", "aclcat", "DANGEROUS"],
        &["COMMAND", "LIST", "FILTERBY", "ACLCAT", "read"],
        &["COMMAND", "LIST", "FILTERBY", "ACLCAT", "nosuch"],
        &["COMMAND", "LIST", "FILTERBY", "MODULE", "foo"],
    ] {
        let (r, h) = p.both(filter);
        let list = |v: V| -> Vec<String> {
            let V::Array(items) = v else { panic!("array") };
            let mut all: Vec<String> = items.iter().map(text).collect();
            all.sort();
            all
        };
        let theirs: Vec<String> = list(parse(&r))
            .into_iter()
            .filter(|n| names.contains(n))
            .collect();
        let ours: Vec<String> = list(parse(&h))
            .into_iter()
            .filter(|n| !LATER_COMMANDS.contains(&n.as_str()))
            .collect();
        assert_eq!(theirs, ours, "{filter:?}");
    }
    p.script(
        "
COMMAND LIST FILTERBY
COMMAND LIST FILTERBY PATTERN
COMMAND LIST FILTERBY FOO bar
COMMAND LIST FILTERBY PATTERN a b
COMMAND LIST foo
",
    );
}

const COMMAND_SCRIPT: &str = "
COMMAND HELP
command help
COMMAND HELP x
COMMAND FOO
COMMAND COUNT x
COMMAND INFO nosuch
COMMAND INFO nosuch get
COMMAND INFO GET
COMMAND INFO config|GET
COMMAND INFO config|nosuch
COMMAND INFO get|x
COMMAND INFO a|b|c
COMMAND DOCS nosuch
COMMAND DOCS GET nosuch Ping
COMMAND DOCS client|kill
COMMAND GETKEYS
COMMAND GETKEYS get
COMMAND GETKEYS nosuch k
COMMAND GETKEYS ping x
COMMAND GETKEYS get k
COMMAND GETKEYS GET k
COMMAND GETKEYS get a b
COMMAND GETKEYS set k v
COMMAND GETKEYS set k v GET
COMMAND GETKEYS config get x
COMMAND GETKEYS client kill x
COMMAND GETKEYSANDFLAGS get k
COMMAND GETKEYSANDFLAGS set k v
COMMAND GETKEYSANDFLAGS ping
";

#[test]
fn command_subcommands_and_errors() {
    let mut p = Pair::new();
    p.script(COMMAND_SCRIPT);
    p.resp3();
    p.script(COMMAND_SCRIPT);
}

#[test]
fn command_getkeys_for_implemented_key_commands() {
    let mut p = Pair::new();
    let names = hozon_command_names(&mut p);
    let cases: &[&str] = &[
        "del a b c",
        "exists a b",
        "mset a 1 b 2",
        "mget a b c",
        "rename a b",
        "zunionstore d 2 a b",
        "zunionstore d 0 a",
        "zinterstore d 2 a b WEIGHTS 1 2",
        "sinterstore d a b",
        "smove a b m",
        "lmove a b left right",
        "blpop a b 0",
        "hset h f v",
        "object encoding k",
        "copy a b",
        "lmpop 2 a b left",
        "sintercard 2 a b",
        "zadd z 1 m",
        "expire k 10",
        "getex k",
    ];
    for case in cases {
        let words: Vec<&str> = case.split(' ').collect();
        let full = if words.len() > 1
            && names
                .iter()
                .any(|n| *n == format!("{}|{}", words[0], words[1]))
        {
            format!("{}|{}", words[0], words[1])
        } else {
            words[0].to_string()
        };
        if !names.contains(&full) {
            continue;
        }
        let mut args = vec!["COMMAND", "GETKEYS"];
        args.extend(&words);
        p.check(&args);
        args[1] = "GETKEYSANDFLAGS";
        p.check(&args);
    }
}

// ---------------------------------------------------------------------------
// INFO

/// Fields whose values are compared (the others describe the process).
const INFO_VALUE_FIELDS: &[&str] = &[
    "redis_version",
    "redis_mode",
    "arch_bits",
    "process_supervised",
    "io_threads_active",
    "hz",
    "configured_hz",
    "connected_clients",
    "cluster_connections",
    "maxclients",
    "blocked_clients",
    "tracking_clients",
    "clients_in_timeout_table",
    "maxmemory",
    "maxmemory_human",
    "maxmemory_policy",
    "loading",
    "async_loading",
    "rdb_changes_since_last_save",
    "rdb_bgsave_in_progress",
    "rdb_last_bgsave_status",
    "aof_enabled",
    "aof_rewrite_in_progress",
    "aof_last_write_status",
    "keyspace_hits",
    "keyspace_misses",
    "expired_keys",
    "evicted_keys",
    "pubsub_channels",
    "role",
    "connected_slaves",
    "master_failover_state",
    "master_repl_offset",
    "second_repl_offset",
    "repl_backlog_active",
    "repl_backlog_size",
    "cluster_enabled",
];

/// Section titles and field names hozon does not report like Redis.
fn comparable(section: &str, name: &str) -> bool {
    // hozon's own fields: its version, the `hozon_aof_*` figures
    // (docs/observability.md), and the AOF rewrite's diff backlog (Redis 6
    // had `aof_rewrite_buffer_length`; 7.0 dropped it).
    !matches!(section, "Commandstats" | "Errorstats" | "Latencystats")
        && !name.starts_with("hozon_")
        && name != "aof_rewrite_buffer_length"
}

#[track_caller]
pub(super) fn assert_same_info(r: &[u8], h: &[u8], what: &str) {
    assert_eq!(r.first(), h.first(), "{what}: reply type");
    let (rs, hs) = (info_sections(r), info_sections(h));
    let titles = |s: &[(String, Vec<(String, String)>)]| {
        s.iter().map(|(t, _)| t.clone()).collect::<Vec<_>>()
    };
    assert_eq!(titles(&rs), titles(&hs), "{what}: sections");
    for ((title, rf), (_, hf)) in rs.iter().zip(&hs) {
        let names = |f: &[(String, String)]| -> Vec<String> {
            f.iter()
                .filter(|(k, _)| comparable(title, k))
                .map(|(k, _)| k.clone())
                .collect()
        };
        assert_eq!(names(rf), names(hf), "{what}: fields of # {title}");
        for (name, value) in rf {
            if INFO_VALUE_FIELDS.contains(&name.as_str()) || title == "Keyspace" {
                let ours = hf.iter().find(|(k, _)| k == name).map(|(_, v)| v.as_str());
                assert_eq!(ours, Some(value.as_str()), "{what}: value of {name}");
            }
        }
    }
}

#[test]
fn info_sections_and_fields_match_redis() {
    let mut p = Pair::new();
    p.script("SET a 1\nSET b 2\nGET a\nGET nosuch\nSELECT 3\nSET c 3\nSELECT 0");
    for resp3 in [false, true] {
        if resp3 {
            p.resp3();
        }
        for args in [
            &["INFO"][..],
            &["INFO", "default"],
            &["INFO", "all"],
            &["INFO", "everything"],
            &["INFO", "ALL", "server"],
            &["INFO", "server"],
            &["INFO", "SERVER"],
            &["INFO", "server", "clients", "keyspace"],
            &["INFO", "keyspace", "server"],
            &["INFO", "clients"],
            &["INFO", "memory"],
            &["INFO", "persistence"],
            &["INFO", "stats"],
            &["INFO", "replication"],
            &["INFO", "cpu"],
            &["INFO", "modules"],
            &["INFO", "commandstats"],
            &["INFO", "errorstats"],
            &["INFO", "latencystats"],
            &["INFO", "cluster"],
            &["INFO", "keyspace"],
            &["INFO", "default", "commandstats"],
            &["INFO", "nosuch"],
            &["INFO", "nosuch", "cluster"],
        ] {
            let (r, h) = p.both(args);
            assert_same_info(&r, &h, &args.join(" "));
        }
    }
    // Empty output is still a (verbatim) string.
    p.check(&["INFO", "nosuch"]);
}

#[test]
fn info_persistence_with_the_append_only_file() {
    let (rdir, hdir) = (
        tempfile::tempdir().expect("tempdir"),
        tempfile::tempdir().expect("tempdir"),
    );
    let (rdir, hdir) = (
        rdir.path().to_string_lossy().into_owned(),
        hdir.path().to_string_lossy().into_owned(),
    );
    let mut p = Pair::with_args(
        &["--appendonly", "yes", "--dir", &rdir],
        &["--appendonly", "yes", "--dir", &hdir],
    );
    p.script("SET a 1\nCONFIG SET appendfsync always\nSET b 2\nCONFIG SET appendfsync everysec\nCONFIG SET appendonly yes");
    let (r, h) = p.both(&["INFO", "persistence"]);
    assert_same_info(&r, &h, "INFO persistence");
    let fields = &info_sections(&h)[0].1;
    let value = |name: &str| {
        fields
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.clone())
    };
    assert_eq!(value("aof_enabled").as_deref(), Some("1"));
    assert!(value("aof_current_size").is_some_and(|v| v.parse::<u64>().unwrap_or(0) > 0));
}

#[test]
fn info_keyspace_counts_keys_and_expiries_per_database() {
    let mut p = Pair::new();
    p.script("SET a 1\nSET b 2 EX 1000\nSELECT 15\nSET z 1\nSELECT 0");
    let (r, h) = p.both(&["INFO", "keyspace"]);
    let (rs, hs) = (info_sections(&r), info_sections(&h));
    // avg_ttl is an estimate in both; compare the counts.
    let strip = |v: &str| v.split(",avg_ttl").next().unwrap_or("").to_string();
    let counts = |s: &[(String, Vec<(String, String)>)]| -> Vec<(String, String)> {
        s[0].1.iter().map(|(k, v)| (k.clone(), strip(v))).collect()
    };
    assert_eq!(counts(&rs), counts(&hs));
    assert_eq!(hs[0].1[0].0, "db0");
    let ttl: i64 = hs[0].1[0].1.rsplit('=').next().unwrap().parse().unwrap();
    assert!((990_000..=1_000_000).contains(&ttl), "avg_ttl {ttl}");
}

// ---------------------------------------------------------------------------
// SHUTDOWN, limits, the command line

#[test]
fn shutdown_argument_errors() {
    let mut p = Pair::new();
    p.script(
        "
SHUTDOWN FOO
SHUTDOWN NOSAVE SAVE
SHUTDOWN ABORT NOW
SHUTDOWN ABORT NOSAVE
SHUTDOWN ABORT
SHUTDOWN abort abort
",
    );
    // Save points are honoured: CONFIG SET save is accepted like Redis.
    p.check(&["CONFIG", "SET", "save", "100 1"]);
    p.check(&["CONFIG", "GET", "save"]);
}

/// A hozon-server started by the test itself (to see its output and exit
/// status).
struct OwnServer {
    child: std::process::Child,
    port: u16,
}

impl OwnServer {
    fn start(extra: &[&str]) -> OwnServer {
        let port = {
            let l = std::net::TcpListener::bind("127.0.0.1:0").expect("free port");
            l.local_addr().expect("addr").port()
        };
        let child = Command::new(env!("CARGO_BIN_EXE_hozon-server"))
            .args([
                "--port",
                &port.to_string(),
                "--appendonly",
                "no",
                "--save",
                "",
            ])
            .args(extra)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn hozon-server");
        let deadline = Instant::now() + Duration::from_secs(10);
        while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
            assert!(Instant::now() < deadline, "hozon-server did not start");
            std::thread::sleep(Duration::from_millis(5));
        }
        assert!(
            crate::harness::wait_until_loaded(port, Duration::from_secs(10)),
            "hozon-server did not load its data"
        );
        OwnServer { child, port }
    }

    /// Waits for the process to exit; returns its status code and output.
    fn wait(mut self) -> (Option<i32>, String) {
        let deadline = Instant::now() + Duration::from_secs(10);
        let status = loop {
            if let Some(status) = self.child.try_wait().expect("wait") {
                break status;
            }
            assert!(Instant::now() < deadline, "hozon-server did not exit");
            std::thread::sleep(Duration::from_millis(5));
        };
        let mut out = String::new();
        if let Some(mut stdout) = self.child.stdout.take() {
            stdout.read_to_string(&mut out).expect("read stdout");
        }
        (status.code(), out)
    }
}

impl Drop for OwnServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[test]
fn shutdown_exits_cleanly_without_replying() {
    let server = OwnServer::start(&[]);
    let mut conn = Conn::connect(server.port);
    conn.send_raw(&encode_command(&[b"SHUTDOWN", b"NOSAVE"]));
    let (got, _) = closed_within(&mut conn, Duration::from_secs(5));
    assert!(got.is_empty(), "no reply: {}", show(&got));
    let (code, out) = server.wait();
    assert_eq!(code, Some(0));
    let user = out
        .find("# User requested shutdown...")
        .expect("shutdown logged");
    let bye = out
        .find("# Redis is now ready to exit, bye bye...")
        .expect("exit logged");
    assert!(user < bye, "{out}");
    assert!(out.contains("* Ready to accept connections"), "{out}");
}

#[test]
fn sigterm_and_sigint_shut_down_cleanly() {
    for signal in ["-TERM", "-INT"] {
        let server = OwnServer::start(&[]);
        let status = Command::new("kill")
            .arg(signal)
            .arg(server.child.id().to_string())
            .status()
            .expect("kill");
        assert!(status.success());
        let (code, out) = server.wait();
        assert_eq!(code, Some(0), "{signal}");
        let name = if signal == "-TERM" {
            "SIGTERM"
        } else {
            "SIGINT"
        };
        let received = out
            .find(&format!("Received {name} scheduling shutdown..."))
            .expect("signal logged");
        let bye = out
            .find("Redis is now ready to exit, bye bye...")
            .expect("exit logged");
        assert!(received < bye, "{out}");
    }
}

/// Connects, sends PING and returns whatever comes back before the reply
/// is complete or the connection closes.
fn served_ping(port: u16) -> Vec<u8> {
    use std::io::Write;
    let mut s = std::net::TcpStream::connect(("127.0.0.1", port)).expect("connect");
    s.set_read_timeout(Some(Duration::from_secs(5)))
        .expect("timeout");
    s.write_all(&encode_command(&[b"PING"])).expect("write");
    let mut got = Vec::new();
    let mut buf = [0u8; 256];
    while !got.ends_with(b"\r\n") {
        match s.read(&mut buf) {
            Ok(0) | Err(_) => break,
            Ok(n) => got.extend_from_slice(&buf[..n]),
        }
    }
    got
}

/// Waits until a connection to `port` is served (not refused for
/// `maxclients`), so the clients that follow are counted from zero.
fn wait_for_slot(port: u16) {
    let deadline = Instant::now() + Duration::from_secs(5);
    while served_ping(port) != b"+PONG\r\n" {
        assert!(
            Instant::now() < deadline,
            "port {port} never serves a client"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
}

#[test]
fn maxclients_refuses_extra_connections() {
    let redis = start_redis(&["--maxclients", "2"]);
    let hozon = start_hozon(&["--maxclients", "2"]);
    for port in [redis.port, hozon.port] {
        // The harness's readiness probe may still count for a moment.
        wait_for_slot(port);
        let mut a = Conn::connect(port);
        let mut b = Conn::connect(port);
        assert_eq!(a.call(&[b"PING"]), b"+PONG\r\n");
        assert_eq!(b.call(&[b"PING"]), b"+PONG\r\n");
        let mut c = Conn::connect(port);
        let (got, _) = closed_within(&mut c, Duration::from_secs(5));
        assert_eq!(
            show(&got),
            show(b"-ERR max number of clients reached\r\n"),
            "port {port}"
        );
        // A slot frees up when a client leaves.
        quit(&mut a);
        assert_eq!(served_ping(port), b"+PONG\r\n");
    }
    let mut conn = Conn::connect(hozon.port);
    let info = conn.call(&[b"INFO", b"stats"]);
    let stats = info_sections(&info);
    let rejected = stats[0]
        .1
        .iter()
        .find(|(k, _)| k == "rejected_connections")
        .map(|(_, v)| v.clone());
    assert!(rejected.is_some_and(|v| v.parse::<u64>().unwrap_or(0) >= 1));
}

#[test]
fn idle_clients_are_closed_after_timeout() {
    let redis = start_redis(&["--timeout", "1"]);
    let hozon = start_hozon(&["--timeout", "1"]);
    let mut r = Conn::connect(redis.port);
    let mut h = Conn::connect(hozon.port);
    assert_eq!(r.call(&[b"PING"]), h.call(&[b"PING"]));
    let started = Instant::now();
    // Both wait at once, each measuring from the same start.
    let (rtook, htook) = std::thread::scope(|scope| {
        let redis_side = scope.spawn(|| {
            let got = r.read_until_close();
            (got, started.elapsed())
        });
        let hozon_got = h.read_until_close();
        let htook = started.elapsed();
        let (redis_got, rtook) = redis_side.join().expect("reader thread");
        assert_eq!(show(&redis_got), show(&hozon_got));
        (rtook, htook)
    });
    assert!(
        rtook >= Duration::from_millis(900),
        "redis closed after {rtook:?}"
    );
    assert!(
        htook >= Duration::from_millis(900),
        "hozon closed after {htook:?}"
    );
    assert!(
        htook <= Duration::from_millis(2500),
        "hozon closed after {htook:?}"
    );
}

fn run_hozon(args: &[&str]) -> (Option<i32>, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_hozon-server"))
        .args(args)
        .output()
        .expect("run hozon-server");
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stderr).into_owned() + &String::from_utf8_lossy(&out.stdout),
    )
}

#[test]
fn command_line_errors_exit_with_status_1() {
    // Redis's wording for bad values and directives, with the line.
    let (code, out) = run_hozon(&["--port", "abc"]);
    assert_eq!(code, Some(1));
    assert!(out.contains("*** FATAL CONFIG FILE ERROR"), "{out}");
    assert!(
        out.contains(">>> 'port \"abc\"'\nargument couldn't be parsed into an integer"),
        "{out}"
    );
    let (code, out) = run_hozon(&["--appendonly", "no", "--nosuch", "1"]);
    assert_eq!(code, Some(1));
    assert!(
        out.contains("Bad directive or wrong number of arguments"),
        "{out}"
    );
    let (code, out) = run_hozon(&["/nonexistent/hozon.conf"]);
    assert_eq!(code, Some(1));
    assert!(
        out.contains("can't open config file '/nonexistent/hozon.conf': No such file or directory"),
        "{out}"
    );
    let (code, out) = run_hozon(&["--version"]);
    assert_eq!(code, Some(0));
    assert!(out.contains("hozon-server v="), "{out}");
}

#[test]
fn config_file_and_flags_configure_the_server() {
    let dir = tempfile::tempdir().expect("tempdir");
    let file = dir.path().join("hozon.conf");
    std::fs::write(
        &file,
        "# test configuration\nappendonly no\nsave \"\"\nmaxclients 77\nrequirepass \"top secret\"\nhash-max-ziplist-entries 3\nloglevel warning\n",
    )
    .expect("write config");
    let port = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").expect("free port");
        l.local_addr().expect("addr").port()
    };
    let mut child = Command::new(env!("CARGO_BIN_EXE_hozon-server"))
        .args([
            file.to_str().expect("utf-8 path"),
            "--port",
            &port.to_string(),
            "--maxclients",
            "88",
        ])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn");
    let deadline = Instant::now() + Duration::from_secs(10);
    while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
        assert!(Instant::now() < deadline, "did not start");
        std::thread::sleep(Duration::from_millis(5));
    }
    assert!(crate::harness::wait_until_loaded(
        port,
        Duration::from_secs(10)
    ));
    let mut conn = Conn::connect(port);
    assert!(conn
        .call(&[b"CONFIG", b"GET", b"maxclients"])
        .starts_with(b"-NOAUTH"));
    assert_eq!(conn.call(&[b"AUTH", b"top secret"]), b"+OK\r\n");
    let got = config_pairs(&conn.call(&[
        b"CONFIG",
        b"GET",
        b"maxclients",
        b"hash-max-listpack-entries",
        b"loglevel",
    ]));
    assert_eq!(
        got,
        vec![
            ("hash-max-listpack-entries".into(), "3".into()),
            ("loglevel".into(), "warning".into()),
            ("maxclients".into(), "88".into()),
        ]
    );
    let info = info_sections(&conn.call(&[b"INFO", b"server"]));
    let config_file = info[0]
        .1
        .iter()
        .find(|(k, _)| k == "config_file")
        .map(|(_, v)| v.clone())
        .unwrap_or_default();
    assert!(
        config_file.ends_with("hozon.conf") && config_file.starts_with('/'),
        "{config_file}"
    );
    let _ = child.kill();
    let _ = child.wait();
}

// ---------------------------------------------------------------------------
// Random sequences

/// One random connection-level command.
#[derive(Debug, Clone)]
struct Op(Vec<String>);

fn pick<'a>(g: &mut Gen, items: &[&'a str]) -> &'a str {
    g.choose(items).copied().unwrap_or(items[0])
}

const PARAMS: &[&str] = &[
    "timeout",
    "hz",
    "maxclients",
    "hash-max-ziplist-entries",
    "hash-max-listpack-value",
    "list-max-listpack-size",
    "set-max-intset-entries",
    "zset-max-listpack-entries",
    "proto-max-bulk-len",
    "appendfsync",
    "loglevel",
    "protected-mode",
    "maxmemory-policy",
    "tcp-keepalive",
    "busy-reply-threshold",
    "nosuch",
];
const VALUES: &[&str] = &[
    "0",
    "1",
    "-1",
    "7",
    "100",
    "2mb",
    "1k",
    "abc",
    "yes",
    "no",
    "YES",
    "always",
    "everysec",
    "no",
    "notice",
    "debug",
    "allkeys-lru",
    "noeviction",
    "99999999999999999999",
    "",
    "1.5",
];

impl Arbitrary for Op {
    fn arbitrary(g: &mut Gen) -> Op {
        let words: Vec<String> = match u8::arbitrary(g) % 12 {
            0 | 1 => vec![
                "CONFIG".into(),
                "SET".into(),
                pick(g, PARAMS).into(),
                pick(g, VALUES).into(),
            ],
            2 => vec![
                "CONFIG".into(),
                "SET".into(),
                pick(g, PARAMS).into(),
                pick(g, VALUES).into(),
                pick(g, PARAMS).into(),
                pick(g, VALUES).into(),
            ],
            3 | 4 => vec!["CONFIG".into(), "GET".into(), pick(g, PARAMS).into()],
            5 => vec![
                "CONFIG".into(),
                "GET".into(),
                pick(g, &["*max*", "h?", "*size", "*list*", "[lm]*"]).into(),
            ],
            6 => vec![
                "CLIENT".into(),
                "SETNAME".into(),
                pick(g, &["a", "", "b c", "x-y", "é"]).into(),
            ],
            7 => vec!["CLIENT".into(), "GETNAME".into()],
            8 => vec![
                "SELECT".into(),
                pick(g, &["0", "1", "15", "16", "-1", "x"]).into(),
            ],
            9 => vec!["ECHO".into(), pick(g, VALUES).into()],
            10 => vec!["PING".into()],
            _ => vec!["HELLO".into(), pick(g, &["2", "3", "4", "x"]).into()],
        };
        Op(words)
    }
}

/// Runs `ops` on fresh servers and compares every reply (CONFIG GET
/// patterns as sorted pairs of the parameters hozon has, HELLO without the
/// id).
fn random_sequence_matches(ops: Vec<Op>, resp3: bool) -> TestResult {
    let mut p = config_pair();
    let known: Vec<String> = config_pairs(&p.hozon(&["CONFIG", "GET", "*"]))
        .into_iter()
        .map(|(k, _)| k)
        .collect();
    let same_config = |r: &[u8], h: &[u8]| {
        let theirs: Vec<(String, String)> = config_pairs(r)
            .into_iter()
            .filter(|(k, _)| known.contains(k))
            .collect();
        r.first() == h.first() && theirs == config_pairs(h)
    };
    if resp3 {
        p.resp3();
    }
    let all: Vec<Vec<String>> = ops.into_iter().map(|op| op.0).collect();
    compare_sequence(&mut p, &all, 0, |_, args, r, h| {
        r == h
            || (args[0] == "CONFIG" && args[1] == "GET" && same_config(r, h))
            || (args[0] == "HELLO" && hello_without_id(r) == hello_without_id(h))
    })
}

#[test]
fn random_connection_and_config_sequences_match_redis_resp2() {
    quickcheck_ops(40, 12, |ops: Vec<Op>| random_sequence_matches(ops, false));
}

#[test]
fn random_connection_and_config_sequences_match_redis_resp3() {
    quickcheck_ops(40, 8, |ops: Vec<Op>| random_sequence_matches(ops, true));
}

/// ROLE on a master without replicas, as Redis 7.0 answers it, and INFO's
/// replication ids: 40 hex digits, stable, no secondary id.
#[test]
fn role_and_replication_ids_of_a_master() {
    let mut p = Pair::new();
    p.check(&["ROLE"]);
    p.check(&["ROLE", "x"]);
    p.resp3();
    p.check(&["ROLE"]);
    let (_, h) = p.both(&["INFO", "replication"]);
    let (_, again) = p.both(&["INFO", "replication"]);
    assert_eq!(h, again, "the replication ids changed between two INFOs");
    let fields = &info_sections(&h)[0].1;
    let replid = field(fields, "master_replid");
    assert_eq!(replid.len(), 40, "{replid}");
    assert!(replid
        .bytes()
        .all(|b| b.is_ascii_hexdigit() && !b.is_ascii_uppercase()));
    assert_eq!(field(fields, "master_replid2"), "0".repeat(40));
    assert_eq!(field(fields, "second_repl_offset"), "-1");
    let (_, server) = p.both(&["INFO", "server"]);
    assert_ne!(field(&info_sections(&server)[0].1, "run_id"), replid);
}
