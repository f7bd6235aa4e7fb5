//! Stream consumer groups against Redis 7.0: XGROUP, XREADGROUP, XACK,
//! XPENDING, XCLAIM, XAUTOCLAIM and XINFO, every option and error, in RESP2
//! and RESP3, blocking XREADGROUP with other clients, and random sequences.
//!
//! Replies that carry times (idle times, delivery times, seen times) are
//! compared with a tolerance on those fields only; XINFO STREAM's
//! `radix-tree-nodes` (Redis's radix-tree internals) is not compared.

use std::time::{Duration, Instant};

use quickcheck::{Arbitrary, Gen, TestResult};

use super::harness::{
    check_both_protocols, compare_sequence, quickcheck_ops, show, split_line, with_thread_pair,
    Conn, Pair,
};

// ---------------------------------------------------------------------------
// Comparing replies with time fields.

/// A parsed RESP reply.
#[derive(Debug, Clone, PartialEq)]
enum V {
    /// Simple string, error, bulk, verbatim, double, big number: kind and text.
    Text(u8, Vec<u8>),
    Int(i64),
    /// `$-1`, `*-1`, `_`.
    Null(u8),
    /// Array, set, push, map (flattened): kind and elements.
    Agg(u8, Vec<V>),
    Bool(bool),
}

fn parse(bytes: &[u8]) -> V {
    let (v, used) = parse_at(bytes, 0);
    assert_eq!(used, bytes.len(), "one reply: {}", show(bytes));
    v
}

fn parse_at(b: &[u8], at: usize) -> (V, usize) {
    let line_end = at + b[at..].windows(2).position(|w| w == b"\r\n").expect("CRLF");
    let line = &b[at + 1..line_end];
    let next = line_end + 2;
    let text = std::str::from_utf8(line).expect("header is text");
    match b[at] {
        b'+' | b'-' | b',' | b'(' => (V::Text(b[at], line.to_vec()), next),
        b':' => (V::Int(text.parse().expect("integer")), next),
        b'_' => (V::Null(b'_'), next),
        b'#' => (V::Bool(line == b"t"), next),
        b'$' | b'=' | b'!' => {
            let n: i64 = text.parse().expect("length");
            if n < 0 {
                return (V::Null(b[at]), next);
            }
            let n = n as usize;
            (V::Text(b[at], b[next..next + n].to_vec()), next + n + 2)
        }
        kind @ (b'*' | b'~' | b'>' | b'%') => {
            let n: i64 = text.parse().expect("count");
            if n < 0 {
                return (V::Null(kind), next);
            }
            let n = if kind == b'%' {
                2 * n as usize
            } else {
                n as usize
            };
            let mut items = Vec::with_capacity(n);
            let mut pos = next;
            for _ in 0..n {
                let (v, p) = parse_at(b, pos);
                items.push(v);
                pos = p;
            }
            (V::Agg(kind, items), pos)
        }
        other => panic!("unknown RESP type {:?}", other as char),
    }
}

/// Milliseconds two time fields may differ by (the commands reach the two
/// servers a little apart).
const TIME_TOLERANCE_MS: i64 = 1000;

/// True when `r` and `h` agree: equal, except that integers in time
/// positions may differ by [`TIME_TOLERANCE_MS`] and the value of
/// `radix-tree-nodes` is not compared. Time positions: values of the map
/// keys `idle` and `seen-time`, absolute times (Unix ms after 2001), and
/// with `pending_idle` the third element of XPENDING's `[id, consumer,
/// idle, count]` rows.
fn agree(r: &V, h: &V, pending_idle: bool) -> bool {
    let close = |a: &V, b: &V| match (a, b) {
        (V::Int(x), V::Int(y)) => (x - y).abs() <= TIME_TOLERANCE_MS,
        _ => false,
    };
    match (r, h) {
        (V::Int(x), V::Int(y)) => x == y || (*x > 1_000_000_000_000 && close(r, h)),
        (V::Agg(kr, ir), V::Agg(kh, ih)) => {
            if kr != kh || ir.len() != ih.len() {
                return false;
            }
            if pending_idle
                && ir.len() == 4
                && matches!(ir[1], V::Text(..))
                && matches!(ir[2], V::Int(_))
            {
                return agree(&ir[0], &ih[0], false)
                    && agree(&ir[1], &ih[1], false)
                    && close(&ir[2], &ih[2])
                    && agree(&ir[3], &ih[3], false);
            }
            let mut i = 0;
            while i < ir.len() {
                let key_of_next = match &ir[i] {
                    V::Text(_, t) if i + 1 < ir.len() => Some(t.as_slice()),
                    _ => None,
                };
                if !agree(&ir[i], &ih[i], pending_idle) {
                    return false;
                }
                match key_of_next {
                    Some(b"radix-tree-nodes") => i += 2,
                    Some(b"idle" | b"seen-time") if matches!(ir[i + 1], V::Int(_)) => {
                        if !close(&ir[i + 1], &ih[i + 1]) {
                            return false;
                        }
                        i += 2;
                    }
                    _ => i += 1,
                }
            }
            true
        }
        _ => r == h,
    }
}

/// Sends `args` to both servers; the replies must agree as [`agree`] says.
#[track_caller]
fn check_timed(p: &mut Pair, args: &[&str]) -> Vec<u8> {
    let (r, h) = p.both(args);
    assert_timed(args, &r, &h);
    r
}

#[track_caller]
fn assert_timed(args: &[&str], r: &[u8], h: &[u8]) {
    if r == h {
        return;
    }
    let pending_idle = args
        .first()
        .is_some_and(|c| c.eq_ignore_ascii_case("XPENDING"));
    if !agree(&parse(r), &parse(h), pending_idle) {
        panic!(
            "replies differ for {:?}\n  redis: {}\n  hozon: {}",
            args.join(" "),
            show(r),
            show(h)
        );
    }
}

/// Like [`Pair::script`], but lines starting with `@` are compared with
/// [`check_timed`].
#[track_caller]
fn script(p: &mut Pair, text: &str) {
    for line in text.lines() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        match line.strip_prefix('@') {
            Some(rest) => {
                let words: Vec<String> = split_line(rest.trim())
                    .into_iter()
                    .map(|w| String::from_utf8(w).expect("timed lines are UTF-8"))
                    .collect();
                let refs: Vec<&str> = words.iter().map(String::as_str).collect();
                check_timed(p, &refs);
            }
            None => p.script(line),
        }
    }
}

/// Runs `text` (see [`script`]) in RESP2, then in RESP3 on database 1.
#[track_caller]
fn script_both_protocols(text: &str) {
    let mut p = Pair::new();
    script(&mut p, text);
    p.resp3();
    p.check(&["SELECT", "1"]);
    script(&mut p, text);
}

// ---------------------------------------------------------------------------
// XGROUP

const XGROUP_SCRIPT: &str = r#"
XADD s 1-1 a 1
XADD s 2-1 b 2
XADD s 3-1 c 3
XGROUP CREATE s g1 $
XGROUP CREATE s g2 0
XGROUP CREATE s g3 2
XGROUP CREATE s g4 0 ENTRIESREAD 1
XGROUP CREATE s g5 1-1 ENTRIESREAD -1
xgroup create s g6 0 entriesread 0 mkstream
XGROUP CREATE s g1 0
XGROUP CREATE s bad -
XGROUP CREATE s bad +
XGROUP CREATE s bad 1-x
XGROUP CREATE s bad 0 ENTRIESREAD -2
XGROUP CREATE s bad 0 ENTRIESREAD x
XGROUP CREATE s bad 0 ENTRIESREAD
XGROUP CREATE s bad 0 FOO
XGROUP CREATE s bad 0 MKSTREAM ENTRIESREAD 1 MKSTREAM
XGROUP CREATE s bad 0 MKSTREAM MKSTREAM MKSTREAM MKSTREAM
XGROUP CREATE missing g 0
XGROUP CREATE missing g $ MKSTREAM
XGROUP CREATE missing2 g 5-5 MKSTREAM ENTRIESREAD 3
XGROUP CREATE missing3 g x MKSTREAM
EXISTS missing missing2 missing3
XINFO GROUPS s
XINFO GROUPS missing
XINFO GROUPS missing2
XGROUP SETID s g1 0
XGROUP SETID s g2 $
XGROUP SETID s g3 - ENTRIESREAD 0
XGROUP SETID s g4 + ENTRIESREAD 10
XGROUP SETID s g5 2
XGROUP SETID s nope 0
XGROUP SETID s g1 x
XGROUP SETID s g1 0 ENTRIESREAD
XGROUP SETID s g1 0 ENTRIESREAD -5
XGROUP SETID s g1 0 MKSTREAM
XGROUP SETID s g1 0 ENTRIESREAD 1 ENTRIESREAD 2
XGROUP SETID nokey g1 0
XINFO GROUPS s
XGROUP CREATECONSUMER s g1 alice
XGROUP CREATECONSUMER s g1 alice
XGROUP CREATECONSUMER s g1 bob
XGROUP CREATECONSUMER s nope alice
XGROUP CREATECONSUMER nokey g1 alice
XGROUP DELCONSUMER s g1 alice
XGROUP DELCONSUMER s g1 alice
XGROUP DELCONSUMER s nope alice
XGROUP DESTROY s g6
XGROUP DESTROY s g6
XGROUP DESTROY nokey g6
XINFO GROUPS s
XGROUP HELP
xgroup help
XGROUP HELP extra
XGROUP
XGROUP FOO
XGROUP FOO s g
XGROUP CREATE s
XGROUP DESTROY s
XGROUP DESTROY s g1 extra
XGROUP CREATECONSUMER s g1
XGROUP DELCONSUMER s g1 a b
XGROUP SETID s g1
SET str v
XGROUP CREATE str g 0
XGROUP CREATE str g 0 MKSTREAM
XGROUP SETID str g 0
XGROUP DESTROY str g
XGROUP CREATECONSUMER str g c
"#;

#[test]
fn xgroup_subcommands_options_and_errors() {
    script_both_protocols(XGROUP_SCRIPT);
}

// ---------------------------------------------------------------------------
// XREADGROUP, XACK, XPENDING

const XREADGROUP_SCRIPT: &str = r#"
XADD s 1-1 a 1
XADD s 2-1 b 2 c 3
XADD s 3-1 d 4
XADD s 4-1 e 5
XGROUP CREATE s g 0
XREADGROUP GROUP g alice COUNT 2 STREAMS s >
XREADGROUP GROUP g bob STREAMS s >
XREADGROUP GROUP g bob STREAMS s >
XREADGROUP GROUP g alice STREAMS s 0
XREADGROUP GROUP g alice COUNT 1 STREAMS s 1-1
XREADGROUP GROUP g alice STREAMS s 1
XREADGROUP GROUP g alice STREAMS s 18446744073709551615-18446744073709551615
XREADGROUP GROUP g carol STREAMS s 0
XREADGROUP GROUP g bob COUNT -5 STREAMS s 0-0
XPENDING s g
XINFO GROUPS s
@XINFO CONSUMERS s g
XDEL s 2-1
XREADGROUP GROUP g alice STREAMS s 0
XADD s 5-1 f 6
XADD s 6-1 g 7
XREADGROUP GROUP g dave NOACK COUNT 1 STREAMS s >
XPENDING s g
XINFO GROUPS s
XREADGROUP GROUP g dave noack STREAMS s >
XINFO GROUPS s
XADD t 1-1 x 1
XGROUP CREATE t g $
XADD t 2-1 y 2
XREADGROUP GROUP g erin STREAMS s t > >
XREADGROUP GROUP g erin STREAMS t s > 0
XREADGROUP GROUP g erin STREAMS t t > >
XADD t 3-1 z 3
XREADGROUP GROUP g erin STREAMS t t > >
XGROUP SETID s g 0
XREADGROUP GROUP g frank COUNT 2 STREAMS s >
XPENDING s g
XREADGROUP GROUP g alice BLOCK 0 COUNT 0 STREAMS s 0
XREADGROUP GROUP g alice STREAMS s $
XREADGROUP GROUP g alice STREAMS s -
XREADGROUP GROUP g alice STREAMS s +
XREADGROUP GROUP g alice STREAMS s 1-x
XREADGROUP GROUP g alice STREAMS s nokey > >
XREADGROUP GROUP g alice STREAMS nokey s > >
XREADGROUP GROUP nope alice STREAMS s >
XREADGROUP GROUP g alice STREAMS s > >
XREADGROUP GROUP g alice STREAMS s t >
XREADGROUP GROUP g alice COUNT x STREAMS s >
XREADGROUP GROUP g alice BLOCK x STREAMS s >
XREADGROUP GROUP g alice BLOCK -1 STREAMS s >
XREADGROUP GROUP g alice FOO STREAMS s >
XREADGROUP COUNT 1 BLOCK 1 NOACK STREAMS s >
XREADGROUP GROUP g alice COUNT 1 BLOCK 1 STREAMS
XREADGROUP GROUP g alice COUNT 1 BLOCK 1 NOACK
XREADGROUP GROUP g STREAMS s >
XREADGROUP GROUP g a STREAMS s
XREADGROUP GROUP g a b c STREAMS s >
SET str v
XREADGROUP GROUP g alice STREAMS str >
XREADGROUP GROUP g alice STREAMS s str > >
XACK s g 1-1 2-1 3-1 9-9
XACK s g 1-1
XACK s g 4
XACK s nope 1-1
XACK nokey g 1-1
XACK s g x
XACK s g 5-1 -
XACK str g 1-1
XACK s g
XPENDING s g
XINFO GROUPS s
"#;

#[test]
fn xreadgroup_and_xack_deliver_and_acknowledge_like_redis() {
    script_both_protocols(XREADGROUP_SCRIPT);
}

const XPENDING_SCRIPT: &str = r#"
XPENDING s g
XGROUP CREATE s g $ MKSTREAM
XPENDING s g
XPENDING s g - + 10
XADD s 1-1 a 1
XADD s 2-1 b 2
XADD s 3-1 c 3
XADD s 4-1 d 4
XREADGROUP GROUP g alice COUNT 2 STREAMS s >
XREADGROUP GROUP g bob STREAMS s >
XGROUP CREATECONSUMER s g idle
XPENDING s g
@XPENDING s g - + 10
@XPENDING s g - + 2
@XPENDING s g - + 0
@XPENDING s g - + -3
@XPENDING s g 2 3 10
@XPENDING s g (1-1 (4-1 10
@XPENDING s g (2-1 + 10
@XPENDING s g 3-1 2-1 10
@XPENDING s g - + 10 bob
@XPENDING s g - + 1 bob
@XPENDING s g - + 10 idle
@XPENDING s g - + 10 nobody
@XPENDING s g IDLE 0 - + 10
XPENDING s g IDLE 100000 - + 10
@XPENDING s g IDLE -5 - + 10 alice
XPENDING s g IDLE 100000 - + 10 alice
@XPENDING s g - + 10 alice extra
@XPENDING s g - + 10 alice extra more
XPENDING s g IDLE 1 - + 10 alice extra
XPENDING s g (- + 10
XPENDING s g - (+ 10
XPENDING s g (18446744073709551615-18446744073709551615 + 10
XPENDING s g - (0-0 10
XPENDING s g ( + 10
XPENDING s g - ( 10
XPENDING s g x + 10
XPENDING s g - x 10
XPENDING s g - + x
XPENDING s g IDLE x - + 10
XPENDING s g IDLE 10 - +
XPENDING s g - +
XPENDING s g -
XPENDING s g IDLE 1 - + 10 a b
XPENDING s nope
XPENDING s nope - + 10
XPENDING nokey g
XPENDING nokey g - + x
SET str v
XPENDING str g
XPENDING s
"#;

#[test]
fn xpending_summary_extended_idle_and_errors() {
    script_both_protocols(XPENDING_SCRIPT);
}

// ---------------------------------------------------------------------------
// XCLAIM, XAUTOCLAIM

const XCLAIM_SCRIPT: &str = r#"
XADD s 1-1 a 1
XADD s 2-1 b 2
XADD s 3-1 c 3
XADD s 4-1 d 4
XADD s 5-1 e 5
XGROUP CREATE s g 0
XREADGROUP GROUP g alice STREAMS s >
XCLAIM s g bob 0 1-1
XCLAIM s g bob 0 1-1 2-1 JUSTID
XCLAIM s g bob 3600000 3-1
XCLAIM s g bob -5 3-1 RETRYCOUNT 9
XCLAIM s g bob 0 4-1 IDLE 5000 JUSTID
XCLAIM s g carol 4000 4-1 JUSTID
XCLAIM s g carol 0 5-1 TIME 1000000 RETRYCOUNT 3
XCLAIM s g carol 0 9-9 6-6
XCLAIM s g carol 0 5-1 TIME 99999999999999 JUSTID
XCLAIM s g carol 0 5-1 TIME -1 JUSTID
XCLAIM s g carol 0 5-1 IDLE -1000 JUSTID
XCLAIM s g carol 0 5-1 RETRYCOUNT -1 JUSTID
XPENDING s g
@XPENDING s g - + 10
@XINFO STREAM s FULL
XADD s 6-1 f 6
XCLAIM s g dave 0 6-1
XCLAIM s g dave 0 6-1 FORCE JUSTID
XCLAIM s g erin 0 6-1 FORCE
XCLAIM s g erin 0 7-7 FORCE
XCLAIM s g erin 0 6 LASTID 6-1
XCLAIM s g erin 0 LASTID 9-9
XINFO GROUPS s
XCLAIM s g erin 0 FORCE JUSTID
XDEL s 1-1 2-1
XCLAIM s g frank 0 1-1 2-1 3-1 JUSTID
XPENDING s g
XCLAIM s g frank 0 1-1 IDLE x
XCLAIM s g frank 0 1-1 TIME x
XCLAIM s g frank 0 1-1 RETRYCOUNT x
XCLAIM s g frank 0 1-1 LASTID x
XCLAIM s g frank 0 1-1 LASTID -
XCLAIM s g frank 0 1-1 FOO
XCLAIM s g frank 0 1-1 IDLE
XCLAIM s g frank 0 1-1 JUSTID 2-1
XCLAIM s g frank x 1-1
XCLAIM s g frank 0 x
XCLAIM s nope frank 0 1-1
XCLAIM nokey g frank 0 1-1
XCLAIM nokey g frank x 1-1
SET str v
XCLAIM str g frank 0 1-1
XCLAIM s g frank 0
"#;

#[test]
fn xclaim_options_ownership_and_errors() {
    script_both_protocols(XCLAIM_SCRIPT);
}

const XAUTOCLAIM_SCRIPT: &str = r#"
XADD s 1-1 a 1
XADD s 2-1 b 2
XADD s 3-1 c 3
XADD s 4-1 d 4
XADD s 5-1 e 5
XGROUP CREATE s g 0
XAUTOCLAIM s g bob 0 0
XREADGROUP GROUP g alice STREAMS s >
XAUTOCLAIM s g bob 0 0 COUNT 2
XAUTOCLAIM s g bob 0 3-1 COUNT 1 JUSTID
XAUTOCLAIM s g bob 0 (3-1 COUNT 1
XAUTOCLAIM s g bob 3600000 0
XAUTOCLAIM s g bob -1 - COUNT 10 JUSTID
XAUTOCLAIM s g carol 0 + JUSTID
XPENDING s g
XDEL s 2-1 4-1
XAUTOCLAIM s g carol 0 0 COUNT 2
XAUTOCLAIM s g carol 0 0 COUNT 3
XPENDING s g
XAUTOCLAIM s g carol 0 (18446744073709551615-18446744073709551615
XAUTOCLAIM s g carol 0 (-
XAUTOCLAIM s g carol 0 x
XAUTOCLAIM s g carol x 0
XAUTOCLAIM s g carol 0 0 COUNT 0
XAUTOCLAIM s g carol 0 0 COUNT -1
XAUTOCLAIM s g carol 0 0 COUNT x
XAUTOCLAIM s g carol 0 0 COUNT 576460752303423488
XAUTOCLAIM s g carol 0 0 COUNT 576460752303423487
XAUTOCLAIM s g carol 0 0 COUNT 1000000
XAUTOCLAIM s g carol 0 0 COUNT
XAUTOCLAIM s g carol 0 0 FOO
XAUTOCLAIM s nope carol 0 0
XAUTOCLAIM nokey g carol 0 0
XAUTOCLAIM nokey g carol 0 0 FOO
SET str v
XAUTOCLAIM str g carol 0 0
XAUTOCLAIM s g carol 0
"#;

#[test]
fn xautoclaim_cursor_deleted_entries_and_errors() {
    script_both_protocols(XAUTOCLAIM_SCRIPT);
}

/// XAUTOCLAIM's attempts limit (ten per COUNT) and its cursor over a PEL
/// of entries that are not idle enough.
#[test]
fn xautoclaim_stops_after_ten_attempts_per_count() {
    let mut p = Pair::new();
    for i in 1..=30 {
        p.check(&["XADD", "s", &format!("{i}-0"), "f", "v"]);
    }
    p.check(&["XGROUP", "CREATE", "s", "g", "0"]);
    p.check(&["XREADGROUP", "GROUP", "g", "a", "STREAMS", "s", ">"]);
    p.check(&[
        "XCLAIM", "s", "g", "a", "0", "7-0", "19-0", "IDLE", "100000", "JUSTID",
    ]);
    p.check(&["XAUTOCLAIM", "s", "g", "b", "50000", "0", "COUNT", "1"]);
    p.check(&[
        "XAUTOCLAIM",
        "s",
        "g",
        "b",
        "50000",
        "0",
        "COUNT",
        "1",
        "JUSTID",
    ]);
    p.check(&["XAUTOCLAIM", "s", "g", "b", "50000", "11-0", "COUNT", "1"]);
    p.check(&["XAUTOCLAIM", "s", "g", "b", "50000", "0", "COUNT", "2"]);
    p.check(&["XPENDING", "s", "g"]);
}

// ---------------------------------------------------------------------------
// XINFO, entries-read and lag

const XINFO_SCRIPT: &str = r#"
XINFO STREAM s
XINFO GROUPS s
XINFO CONSUMERS s g
XGROUP CREATE s g $ MKSTREAM
XINFO STREAM s
XINFO STREAM s FULL
XADD s 1-1 a 1
XADD s 2-1 b 2 c 3
XADD s 3-1 d 4
XINFO STREAM s
XINFO STREAM s FULL
XREADGROUP GROUP g alice COUNT 1 STREAMS s >
XREADGROUP GROUP g bob STREAMS s >
XGROUP CREATECONSUMER s g idle
XGROUP CREATE s g2 0
@XINFO STREAM s FULL
@XINFO STREAM s FULL COUNT 1
@XINFO STREAM s FULL COUNT 0
@XINFO STREAM s FULL COUNT -3
@xinfo stream s full count 2
XINFO STREAM s FULL COUNT x
XINFO STREAM s FULL COUNT
XINFO STREAM s FULL COUNT 1 extra
XINFO STREAM s COUNT 1
XINFO STREAM s FOO
XINFO STREAM s FULL FOO 1
XINFO GROUPS s
@XINFO CONSUMERS s g
XINFO CONSUMERS s g2
XINFO CONSUMERS s nope
XINFO CONSUMERS nokey g
XINFO GROUPS nokey
XINFO STREAM nokey
XINFO GROUPS s extra
XINFO CONSUMERS s
XINFO HELP
xinfo help
XINFO HELP extra
XINFO
XINFO FOO
XINFO FOO s
XINFO STREAM
SET str v
XINFO STREAM str
XINFO GROUPS str
XINFO CONSUMERS str g
"#;

#[test]
fn xinfo_stream_groups_consumers_and_errors() {
    script_both_protocols(XINFO_SCRIPT);
}

/// Entries-read and lag through deletions, trimming, XSETID and SETID, as
/// XINFO GROUPS and XINFO STREAM FULL report them.
const LAG_SCRIPT: &str = r#"
XGROUP CREATE s before $ MKSTREAM
XINFO GROUPS s
XADD s 1-0 f v
XADD s 2-0 f v
XADD s 3-0 f v
XADD s 4-0 f v
XADD s 5-0 f v
XGROUP CREATE s start 0
XGROUP CREATE s first 1-0
XGROUP CREATE s middle 3-0
XGROUP CREATE s last $
XGROUP CREATE s future 9-0
XGROUP CREATE s known 0 ENTRIESREAD 0
XINFO GROUPS s
XREADGROUP GROUP before c COUNT 2 STREAMS s >
XREADGROUP GROUP middle c COUNT 1 STREAMS s >
XINFO GROUPS s
XDEL s 4-0
XINFO GROUPS s
XREADGROUP GROUP start c COUNT 1 STREAMS s >
XREADGROUP GROUP known c COUNT 4 STREAMS s >
XINFO GROUPS s
XDEL s 1-0
XINFO GROUPS s
XTRIM s MAXLEN 1
XINFO GROUPS s
XADD s 6-0 f v
XINFO GROUPS s
XREADGROUP GROUP start c STREAMS s >
XREADGROUP GROUP future c STREAMS s >
XINFO GROUPS s
XSETID s 10-0 ENTRIESADDED 20 MAXDELETEDID 7-0
XINFO GROUPS s
XGROUP SETID s first 6-0 ENTRIESREAD 3
XGROUP SETID s last 10-0
XINFO GROUPS s
XINFO STREAM s
XDEL s 6-0
XINFO GROUPS s
XINFO STREAM s
"#;

#[test]
fn entries_read_and_lag_follow_redis() {
    script_both_protocols(LAG_SCRIPT);
}

/// Keys and group names with spaces, newlines and NUL bytes in errors and
/// replies.
#[test]
fn binary_names_in_replies_and_errors() {
    let mut p = Pair::new();
    p.check_bytes(&[b"XADD", b"k\x00x", b"1-1", b"f", b"v"]);
    p.check_bytes(&[b"XGROUP", b"CREATE", b"k\x00x", b"g\x00\r\n", b"0"]);
    p.check_bytes(&[
        b"XREADGROUP",
        b"GROUP",
        b"g\x00\r\n",
        b"c\x00",
        b"STREAMS",
        b"k\x00x",
        b">",
    ]);
    p.check_bytes(&[
        b"XREADGROUP",
        b"GROUP",
        b"no\x00pe",
        b"c",
        b"STREAMS",
        b"k\x00x",
        b">",
    ]);
    p.check_bytes(&[
        b"XREADGROUP",
        b"GROUP",
        b"g",
        b"c",
        b"STREAMS",
        b"k\x00x",
        b">\x00junk",
    ]);
    p.check_bytes(&[b"XPENDING", b"k\x00x", b"g\x00\r\n"]);
    p.check_bytes(&[b"XPENDING", b"k\r\nx", b"g"]);
    p.check_bytes(&[b"XGROUP", b"SETID", b"k\x00x", b"n\x00o", b"0"]);
    p.check_bytes(&[b"XGROUP", b"SETID", b"k\x00x", b"g\x00\r\n", b"$\x00junk"]);
    p.check_bytes(&[
        b"XCLAIM",
        b"k\x00x",
        b"g\x00\r\n",
        b"d",
        b"0",
        b"1-1",
        b"FO\x00O",
    ]);
    p.check_bytes(&[
        b"XCLAIM",
        b"k\x00x",
        b"g\x00\r\n",
        b"d",
        b"0",
        b"1-1",
        b"JUSTID\x00x",
    ]);
    // Idle times: compared with a tolerance.
    check_timed(&mut p, &["XINFO", "CONSUMERS", "k\0x", "g\0\r\n"]);
    p.check_bytes(&[b"XINFO", b"CONSUMERS", b"k\x00x", b"zz\x00\n"]);
    // Seen and delivery times: compared with a tolerance too.
    check_timed(&mut p, &["XINFO", "STREAM", "k\0x", "FULL\0", "COUNT", "1"]);
}

/// Group commands do not touch WATCHed keys in Redis 7.0 (only XGROUP
/// CREATE … MKSTREAM creating the key does).
#[test]
fn group_commands_leave_watched_keys_untouched() {
    check_both_protocols(
        r#"
XADD s 1-1 a 1
XADD s 2-1 b 2
XGROUP CREATE s g0 0
WATCH s
XGROUP CREATE s g 0
XGROUP SETID s g 0
XGROUP CREATECONSUMER s g c
XREADGROUP GROUP g c STREAMS s >
XREADGROUP GROUP g c STREAMS s 0
XACK s g 1-1
XCLAIM s g d 0 2-1
XAUTOCLAIM s g e 0 0
XGROUP DELCONSUMER s g e
XGROUP DESTROY s g0
MULTI
PING
EXEC
WATCH new
XGROUP CREATE new g $ MKSTREAM
MULTI
PING
EXEC
"#,
    );
}

/// COMMAND INFO for every command and subcommand of the family.
#[test]
fn command_info_matches() {
    let mut p = Pair::new();
    for name in [
        "xreadgroup",
        "xack",
        "xpending",
        "xclaim",
        "xautoclaim",
        "xgroup|create",
        "xgroup|setid",
        "xgroup|destroy",
        "xgroup|createconsumer",
        "xgroup|delconsumer",
        "xgroup|help",
        "xinfo|stream",
        "xinfo|groups",
        "xinfo|consumers",
        "xinfo|help",
    ] {
        let (r, h) = p.both(&["COMMAND", "INFO", name]);
        // Redis 7.0 lists ACL categories and key specs the table here
        // may not have: compare name, arity, flags and key positions.
        let (V::Agg(_, r), V::Agg(_, h)) = (parse(&r), parse(&h)) else {
            panic!("COMMAND INFO {name}: not arrays");
        };
        let (V::Agg(_, r), V::Agg(_, h)) = (&r[0], &h[0]) else {
            panic!("COMMAND INFO {name}: no entry: {h:?}");
        };
        assert_eq!(r[..6], h[..6], "COMMAND INFO {name}");
    }
}

// ---------------------------------------------------------------------------
// Blocking XREADGROUP

/// A client of both servers: (Redis connection, hozon connection).
pub(super) struct Client {
    r: Conn,
    h: Conn,
}

impl Client {
    pub(super) fn new(p: &Pair, resp3: bool) -> Client {
        let (r, h) = p.connect_more();
        let mut c = Client { r, h };
        if resp3 {
            c.r.call(&[b"HELLO", b"3"]);
            c.h.call(&[b"HELLO", b"3"]);
        }
        c
    }

    pub(super) fn send(&mut self, line: &str) {
        let args: Vec<&[u8]> = line.split(' ').map(str::as_bytes).collect();
        let bytes = super::harness::encode_command(&args);
        self.r.send_raw(&bytes);
        self.h.send_raw(&bytes);
    }

    #[track_caller]
    pub(super) fn reply(&mut self) -> Vec<u8> {
        let r = self.r.read_reply();
        let h = self.h.read_reply();
        assert_eq!(show(&r), show(&h), "replies differ (redis, hozon)");
        r
    }

    #[track_caller]
    pub(super) fn call(&mut self, line: &str) -> Vec<u8> {
        self.send(line);
        self.reply()
    }

    #[track_caller]
    pub(super) fn assert_waiting(&mut self) {
        let wait = Duration::from_millis(150);
        if let Some(r) = self.r.try_read_reply(wait) {
            panic!("redis answered a waiting client: {}", show(&r));
        }
        if let Some(h) = self.h.try_read_reply(wait) {
            panic!("hozon answered a waiting client: {}", show(&h));
        }
    }
}

fn blocked_clients(conn: &mut Conn) -> Option<usize> {
    let info = conn.call(&[b"INFO", b"clients"]);
    let text = String::from_utf8_lossy(&info);
    text.lines()
        .find_map(|l| l.strip_prefix("blocked_clients:"))
        .and_then(|v| v.trim().parse().ok())
}

/// Waits until both servers report `n` blocked clients, for at most 5 s.
#[track_caller]
pub(super) fn wait_blocked(p: &mut Pair, n: usize) {
    let start = Instant::now();
    loop {
        let r = blocked_clients(&mut p.r);
        let h = blocked_clients(&mut p.h);
        if r == Some(n) && h == Some(n) {
            return;
        }
        if start.elapsed() > Duration::from_secs(5) {
            panic!("blocked_clients: expected {n}, redis {r:?}, hozon {h:?}");
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// Sends `line` from a new client, checks that it blocks, and waits until
/// both servers count it.
#[track_caller]
fn blocked(p: &mut Pair, resp3: bool, line: &str, before: usize) -> Client {
    let mut c = Client::new(p, resp3);
    c.send(line);
    c.assert_waiting();
    wait_blocked(p, before + 1);
    c
}

fn blocking_wakeups(resp3: bool) {
    let mut p = Pair::new();
    if resp3 {
        p.resp3();
    }
    p.script(
        "XADD s 1-1 old 0\n\
         XGROUP CREATE s g $\n\
         XGROUP CREATE t g $ MKSTREAM",
    );
    // Served by an XADD on the second key; COUNT defaults to 1000 there.
    let mut a = blocked(
        &mut p,
        resp3,
        "XREADGROUP GROUP g alice BLOCK 0 STREAMS s t > >",
        0,
    );
    p.check(&["XADD", "t", "1-1", "f", "v"]);
    a.reply();
    wait_blocked(&mut p, 0);
    p.check(&["XPENDING", "t", "g"]);
    // Two readers of one group: the first takes the entry, the second
    // keeps waiting (the group's ID moved past it).
    let mut b = blocked(
        &mut p,
        resp3,
        "XREADGROUP GROUP g bob COUNT 5 BLOCK 0 STREAMS t >",
        0,
    );
    let mut c = blocked(
        &mut p,
        resp3,
        "XREADGROUP GROUP g carol NOACK BLOCK 0 STREAMS t >",
        1,
    );
    p.check(&["XADD", "t", "2-1", "f", "v"]);
    b.reply();
    c.assert_waiting();
    p.check(&["XADD", "t", "3-1", "f", "v", "g", "w"]);
    c.reply();
    wait_blocked(&mut p, 0);
    p.check(&["XPENDING", "t", "g"]);
    p.check(&["XINFO", "GROUPS", "t"]);
    check_timed(&mut p, &["XINFO", "CONSUMERS", "t", "g"]);
    // A timeout answers a null array.
    let mut d = Client::new(&p, resp3);
    d.call("XREADGROUP GROUP g dave BLOCK 100 STREAMS t >");
    // Destroying the group, deleting the key or replacing it with another
    // type fails the waiting readers.
    let mut e = blocked(
        &mut p,
        resp3,
        "XREADGROUP GROUP g erin BLOCK 0 STREAMS t >",
        0,
    );
    p.check(&["XGROUP", "DESTROY", "t", "g"]);
    e.reply();
    p.check(&["XGROUP", "CREATE", "t", "g", "$"]);
    let mut f = blocked(
        &mut p,
        resp3,
        "XREADGROUP GROUP g frank BLOCK 0 STREAMS t >",
        0,
    );
    p.check(&["DEL", "t"]);
    f.reply();
    p.check(&["XGROUP", "CREATE", "t", "g", "$", "MKSTREAM"]);
    let mut h = blocked(
        &mut p,
        resp3,
        "XREADGROUP GROUP g henry BLOCK 0 STREAMS t >",
        0,
    );
    p.check(&["SET", "t", "string"]);
    h.reply();
    // An XADD trimmed away at once moves the last ID without leaving an
    // entry: a waiting reader is served an empty list, as in Redis.
    p.check(&["DEL", "t"]);
    p.check(&["XGROUP", "CREATE", "t", "g", "$", "MKSTREAM"]);
    let mut i = blocked(
        &mut p,
        resp3,
        "XREADGROUP GROUP g ivy BLOCK 0 STREAMS t >",
        0,
    );
    p.check(&["XADD", "t", "MAXLEN", "0", "5-5", "f", "v"]);
    i.reply();
    p.check(&["XINFO", "GROUPS", "t"]);
    // Entries added by one transaction: a reader with COUNT gets that many,
    // one without gets at most 1000 (Redis's default for a blocked read).
    p.check(&["XGROUP", "CREATE", "t", "g2", "$"]);
    let mut k = blocked(
        &mut p,
        resp3,
        "XREADGROUP GROUP g kay COUNT 2 BLOCK 0 STREAMS t >",
        0,
    );
    let mut l = blocked(
        &mut p,
        resp3,
        "XREADGROUP GROUP g2 lee BLOCK 0 STREAMS t >",
        1,
    );
    p.check(&["MULTI"]);
    for i in 0..1005 {
        p.check(&["XADD", "t", "*", "n", &i.to_string()]);
    }
    let (r, h) = p.both(&["EXEC"]);
    let count = |reply: &[u8]| match parse(reply) {
        V::Agg(_, items) => items.len(),
        other => panic!("EXEC: {other:?}"),
    };
    assert_eq!((count(&r), count(&h)), (1005, 1005));
    let (kr, kh) = (k.r.read_reply(), k.h.read_reply());
    let (lr, lh) = (l.r.read_reply(), l.h.read_reply());
    // The IDs come from each server's clock: compare the entry counts.
    let entries = |reply: &[u8]| -> usize {
        let V::Agg(_, outer) = parse(reply) else {
            panic!("not an array: {}", show(reply))
        };
        let inner = match &outer[..] {
            [V::Agg(_, pair)] => pair[1].clone(),
            [_, entries] => entries.clone(),
            _ => panic!("one stream expected: {}", show(reply)),
        };
        let V::Agg(_, items) = inner else {
            panic!("entries: {}", show(reply))
        };
        items.len()
    };
    assert_eq!((entries(&kr), entries(&kh)), (2, 2));
    assert_eq!((entries(&lr), entries(&lh)), (1000, 1000));
    p.check(&["XGROUP", "CREATE", "t", "g3", "$"]);
    // Inside MULTI a reader that would block answers a null array.
    p.check(&["MULTI"]);
    p.check(&[
        "XREADGROUP",
        "GROUP",
        "g3",
        "kim",
        "BLOCK",
        "0",
        "STREAMS",
        "t",
        ">",
    ]);
    p.check(&["EXEC"]);
    wait_blocked(&mut p, 0);
}

#[test]
fn blocking_xreadgroup_wakes_fails_and_times_out_like_redis_resp2() {
    blocking_wakeups(false);
}

#[test]
fn blocking_xreadgroup_wakes_fails_and_times_out_like_redis_resp3() {
    blocking_wakeups(true);
}

// ---------------------------------------------------------------------------
// Random sequences

const GROUPS: &[&str] = &["g1", "g2"];
const CONSUMERS: &[&str] = &["c1", "c2", "c3"];

/// One group command (or XADD/XDEL/XTRIM) on a single stream key with
/// explicit small IDs, so that sequences hit the PEL, deletions and
/// reassignment often.
#[derive(Debug, Clone)]
struct Op(Vec<String>);

fn pick<T: Copy>(g: &mut Gen, items: &[T]) -> T {
    *g.choose(items).expect("non-empty choice list")
}

/// An ID among the first few dozen (`ms-seq`), sometimes `0` or an
/// exclusive `(ms` bound (an error where only plain IDs are allowed).
fn id(g: &mut Gen) -> String {
    match u8::arbitrary(g) % 12 {
        0 => "0".into(),
        1 => format!("({}", u8::arbitrary(g) % 12),
        _ => format!("{}-{}", u8::arbitrary(g) % 12, u8::arbitrary(g) % 2),
    }
}

fn small(g: &mut Gen) -> String {
    (i64::from(u8::arbitrary(g) % 6) - 1).to_string()
}

impl Arbitrary for Op {
    fn arbitrary(g: &mut Gen) -> Op {
        let group = pick(g, GROUPS).to_string();
        let consumer = pick(g, CONSUMERS).to_string();
        let k = "s".to_string();
        let words: Vec<String> = match u8::arbitrary(g) % 20 {
            // Mostly a growing ID (see [`random_sequence_matches`]).
            0..=3 => {
                let at = if u8::arbitrary(g) % 5 == 0 {
                    id(g)
                } else {
                    "NEXT".into()
                };
                vec!["XADD".into(), k, at, "f".into(), small(g)]
            }
            4 => vec!["XDEL".into(), k, id(g), id(g)],
            5 if bool::arbitrary(g) => vec!["XTRIM".into(), k, "MAXLEN".into(), small(g)],
            5 => vec!["XINFO".into(), "CONSUMERS".into(), k, group],
            6 => {
                let start = pick(g, &["$", "0", "3-0", "20-0"]).to_string();
                let mut v = vec!["XGROUP".into(), "CREATE".into(), k, group, start];
                if bool::arbitrary(g) {
                    v.push("MKSTREAM".into());
                }
                v
            }
            7 => vec!["XGROUP".into(), "SETID".into(), k, group, id(g)],
            8 => vec![
                "XGROUP".into(),
                pick(g, &["CREATECONSUMER", "DELCONSUMER"]).into(),
                k,
                group,
                consumer,
            ],
            9 if u8::arbitrary(g) % 4 == 0 => vec!["XGROUP".into(), "DESTROY".into(), k, group],
            9 => vec!["XGROUP".into(), "CREATE".into(), k, group, "0".into()],
            10..=12 => {
                let mut v = vec!["XREADGROUP".into(), "GROUP".into(), group, consumer];
                if bool::arbitrary(g) {
                    v.extend(["COUNT".into(), small(g)]);
                }
                if u8::arbitrary(g) % 4 == 0 {
                    v.push("NOACK".into());
                }
                let from = if bool::arbitrary(g) {
                    ">".to_string()
                } else {
                    id(g)
                };
                v.extend(["STREAMS".into(), k, from]);
                v
            }
            13 => vec!["XACK".into(), k, group, id(g), id(g)],
            14 => {
                let mut v = vec![
                    "XCLAIM".into(),
                    k,
                    group,
                    consumer,
                    "0".into(),
                    id(g),
                    id(g),
                ];
                if bool::arbitrary(g) {
                    v.push("JUSTID".into());
                }
                if bool::arbitrary(g) {
                    v.push("FORCE".into());
                }
                if bool::arbitrary(g) {
                    v.extend(["RETRYCOUNT".into(), small(g)]);
                }
                if u8::arbitrary(g) % 4 == 0 {
                    v.extend(["LASTID".into(), id(g)]);
                }
                v
            }
            15 => {
                let mut v = vec!["XAUTOCLAIM".into(), k, group, consumer, "0".into(), id(g)];
                if bool::arbitrary(g) {
                    v.extend(["COUNT".into(), small(g)]);
                }
                if bool::arbitrary(g) {
                    v.push("JUSTID".into());
                }
                v
            }
            16 => vec!["XPENDING".into(), k, group],
            17 => vec![
                "XPENDING".into(),
                k,
                group,
                "-".into(),
                "+".into(),
                "10".into(),
                consumer,
            ],
            18 => vec!["XINFO".into(), "GROUPS".into(), k],
            _ => vec![
                "XINFO".into(),
                "STREAM".into(),
                k,
                "FULL".into(),
                "COUNT".into(),
                "0".into(),
            ],
        };
        Op(words)
    }

    fn shrink(&self) -> Box<dyn Iterator<Item = Op>> {
        Box::new(std::iter::empty())
    }
}

/// Commands run before each random sequence: a few entries, both groups.
const SETUP: &[&str] = &[
    "DEL s",
    "XADD s 1-0 f 1",
    "XADD s 2-0 f 2",
    "XADD s 3-0 f 3",
    "XADD s 4-0 f 4",
    "XADD s 5-0 f 5",
    "XADD s 6-0 f 6",
    "XGROUP CREATE s g1 0",
    "XGROUP CREATE s g2 2-0",
];

fn random_sequence_matches(ops: Vec<Op>, resp3: bool) -> TestResult {
    let mut all: Vec<Vec<String>> = SETUP
        .iter()
        .map(|line| line.split(' ').map(String::from).collect())
        .collect();
    // `NEXT` becomes an ID greater than any earlier one (`<ms>-*` with a
    // growing ms), so that most XADDs succeed.
    all.extend(ops.into_iter().enumerate().map(|(i, op)| {
        op.0.into_iter()
            .map(|w| {
                if w == "NEXT" {
                    format!("{}-*", 12 + i)
                } else {
                    w
                }
            })
            .collect()
    }));
    all.push(
        ["XINFO", "STREAM", "s", "FULL", "COUNT", "0"]
            .map(String::from)
            .to_vec(),
    );
    with_thread_pair(resp3, |p| {
        compare_sequence(p, &all, SETUP.len(), |_, words, r, h| {
            let pending_idle = words[0] == "XPENDING";
            r == h || agree(&parse(r), &parse(h), pending_idle)
        })
    })
}

#[test]
fn random_group_sequences_match_redis_resp2() {
    quickcheck_ops(60, 100, |ops: Vec<Op>| random_sequence_matches(ops, false));
}

#[test]
fn random_group_sequences_match_redis_resp3() {
    quickcheck_ops(60, 60, |ops: Vec<Op>| random_sequence_matches(ops, true));
}

/// The same scripts checked with [`check_both_protocols`] where no reply
/// carries a time, as a guard that [`script`] compares strictly.
#[test]
fn untimed_lines_are_compared_byte_for_byte() {
    check_both_protocols("XGROUP CREATE s g $ MKSTREAM\nXINFO GROUPS s\nXPENDING s g");
}
