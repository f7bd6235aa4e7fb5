//! Differential tests: streams (XADD, XLEN, XRANGE, XREVRANGE, XDEL,
//! XTRIM, XSETID, XREAD), RESP2 and RESP3.

use std::time::Duration;

use quickcheck::{Arbitrary, Gen, TestResult};

use crate::harness::{
    check_both_protocols, check_owned, compare_sequence, identical, quickcheck_ops, show,
    with_thread_pair, Pair,
};

#[test]
fn xadd_explicit_ids_and_their_errors() {
    check_both_protocols(
        "XADD s 1-1 f v\n\
         XADD s 1-2 a 1 b 2\n\
         XADD s 1-2 f v\n\
         XADD s 1-1 f v\n\
         XADD s 0-5 f v\n\
         XADD s 2 f v\n\
         XADD s 2 f v\n\
         XADD s 2-* f v\n\
         XADD s 2-* f v\n\
         XADD s 5-* f v\n\
         XADD s 0-0 f v\n\
         XADD new 0-0 f v\n\
         EXISTS new\n\
         XADD new 0 f v\n\
         XADD new 0-* f v\n\
         XADD new 0-* f v\n\
         XRANGE new - +\n\
         XADD s 18446744073709551615-18446744073709551614 f v\n\
         XADD s 18446744073709551615-* f v\n\
         XADD s 18446744073709551615-* f v\n\
         XADD s * f v\n\
         XADD s 18446744073709551616-0 f v\n\
         XADD s2 18446744073709551615-* f v\n\
         XADD s2 18446744073709551615-* f v\n\
         XADD s3 1-18446744073709551615 f v\n\
         XADD s3 1-* f v\n\
         XADD s3 2-* f v\n\
         XADD s -1 f v\n\
         XADD s abc f v\n\
         XADD s 1-a f v\n\
         XADD s - f v\n\
         XADD s + f v\n\
         XADD s *-1 f v\n\
         XADD s 1-** f v\n\
         XADD s '' f v\n\
         XADD s 1- f v\n\
         XADD s -1-1 f v\n\
         XADD z 00010-0007 f v\n\
         XADD z +20 f v\n\
         XADD z ' 30' f v\n\
         XADD z 40--0 f v\n\
         XADD z 50-+3 f v\n\
         XADD z 60--5 f v\n\
         XADD z 123456789012345678901234567890 f v\n\
         XRANGE z - +\n\
         XADD s 9-0 f\n\
         XADD s 9-0 f v g\n\
         XADD s 9-0\n\
         XADD s\n\
         XADD s MAXLEN 5\n\
         XADD s MAXLEN 5 9-0\n\
         SET str v\n\
         XADD str 1-1 f v\n\
         XADD str 0-0 f v\n\
         XADD s 10-0 f v f v2 f v3\n\
         XRANGE s 10 10\n\
         XLEN s\n\
         XLEN missing\n\
         XLEN str\n\
         XLEN\n\
         XLEN a b\n",
    );
}

/// A reply that is a bulk ID `<ms>-<seq>`.
fn id_of(reply: &[u8]) -> Option<(u64, u64)> {
    let text = std::str::from_utf8(reply).ok()?;
    let mut lines = text.split("\r\n");
    let header = lines.next()?;
    let body = lines.next()?;
    if !header.starts_with('$') {
        return None;
    }
    let (ms, seq) = body.split_once('-')?;
    Some((ms.parse().ok()?, seq.parse().ok()?))
}

fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .expect("clock after 1970")
        .as_millis() as u64
}

#[test]
fn xadd_auto_ids_use_the_clock_and_never_go_back() {
    let mut p = Pair::new();
    for _ in 0..2 {
        let before = now_ms();
        let (r, h) = p.both(&["XADD", "auto", "*", "f", "v"]);
        let after = now_ms();
        for reply in [&r, &h] {
            let (ms, _) = id_of(reply).unwrap_or_else(|| panic!("not an ID: {}", show(reply)));
            assert!(
                before <= ms && ms <= after,
                "{ms} not in {before}..={after}"
            );
        }
    }
    // A last ID in the future: `*` increments its sequence.
    p.check(&["XADD", "future", "99999999999999-5", "f", "v"]);
    p.check(&["XADD", "future", "*", "f", "v"]);
    p.check(&["XADD", "future", "*", "f", "v"]);
    p.check(&["XADD", "future", "99999999999999-*", "f", "v"]);
    p.check(&["XRANGE", "future", "-", "+"]);
    // After the last possible ID nothing can be added.
    p.check(&[
        "XADD",
        "full",
        "18446744073709551615-18446744073709551615",
        "f",
        "v",
    ]);
    p.check(&["XADD", "full", "*", "f", "v"]);
    p.check(&["XADD", "full", "18446744073709551615-*", "f", "v"]);
    p.check(&[
        "XADD",
        "seqmax",
        "18446744073709551614-18446744073709551615",
        "f",
        "v",
    ]);
    p.check(&["XADD", "seqmax", "*", "f", "v"]);
    p.check(&["XADD", "seqmax", "*", "f", "v"]);
    p.check(&["XADD", "seqmax2", "5-18446744073709551615", "f", "v"]);
    p.check(&["XADD", "seqmax2", "5-*", "f", "v"]);
    p.check(&["XADD", "seqmax2", "6-*", "f", "v"]);
}

#[test]
fn xadd_nomkstream_and_trim_options() {
    check_both_protocols(
        "XADD s NOMKSTREAM 1-1 f v\n\
         EXISTS s\n\
         XADD s nomkstream * f v\n\
         XADD s 1-1 f v\n\
         XADD s NOMKSTREAM 2-1 f v\n\
         XADD s MAXLEN 2 3-1 f v\n\
         XADD s MAXLEN = 2 4-1 f v\n\
         XRANGE s - +\n\
         XADD s maxlen ~ 1 5-1 f v\n\
         XLEN s\n\
         XADD s MINID 5 6-1 f v\n\
         XRANGE s - +\n\
         XADD s MINID = 6-1 7-1 f v\n\
         XADD s MINID ~ 7 8-1 f v\n\
         XADD s MAXLEN ~ 1 LIMIT 10 9-1 f v\n\
         XADD s MAXLEN ~ 1 LIMIT 0 10-1 f v\n\
         XADD s NOMKSTREAM MAXLEN 1 11-1 f v\n\
         XRANGE s - +\n\
         XADD s MAXLEN 1 LIMIT 10 12-1 f v\n\
         XADD s MAXLEN = 1 LIMIT 10 12-1 f v\n\
         XADD s LIMIT 10 12-1 f v\n\
         XADD s LIMIT 0 12-1 f v\n\
         XADD s LIMIT -1 12-1 f v\n\
         XADD s LIMIT x 12-1 f v\n\
         XADD s MAXLEN 1 MINID 1 12-1 f v\n\
         XADD s MINID 1 MAXLEN 1 12-1 f v\n\
         XADD s MAXLEN -1 12-1 f v\n\
         XADD s MAXLEN x 12-1 f v\n\
         XADD s MAXLEN ~ x 12-1 f v\n\
         XADD s MAXLEN 9223372036854775808 12-1 f v\n\
         XADD s MINID x 12-1 f v\n\
         XADD s MINID - 12-1 f v\n\
         XADD s MINID + 12-1 f v\n\
         XADD s MINID ~ 12-1\n\
         XADD s MAXLEN ~\n\
         XADD s MAXLEN ~ 5\n\
         XADD s MAXLEN ~ 5 *\n\
         XADD s MAXLEN ~ 5 * f\n\
         XADD s MAXLEN 5 LIMIT\n\
         XADD s NOMKSTREAM\n\
         XADD s NOMKSTREAM NOMKSTREAM 12-1 f v\n\
         XADD s ~ 5 12-1 f v\n\
         XADD s MAXLEN 0 12-1 f v\n\
         XLEN s\n\
         XRANGE s - +\n\
         XADD s 13-1 f v\n\
         XADD fresh MAXLEN 0 1-1 f v\n\
         EXISTS fresh\n\
         XLEN fresh\n\
         XADD fresh2 MINID 5 1-1 f v\n\
         XLEN fresh2\n\
         XADD fresh3 MINID ~ 5 1-1 f v\n\
         XLEN fresh3\n\
         XADD fresh4 MAXLEN ~ 0 1-1 f v\n\
         XLEN fresh4\n",
    );
}

#[test]
fn xrange_and_xrevrange_bounds_counts_and_errors() {
    check_both_protocols(
        "XADD s 1-0 a 1\n\
         XADD s 1-1 b 2\n\
         XADD s 1-18446744073709551615 c 3\n\
         XADD s 2-0 d 4\n\
         XADD s 3-5 e 5 f 6\n\
         XADD s 18446744073709551615-0 g 7\n\
         XRANGE s - +\n\
         XREVRANGE s + -\n\
         XRANGE s 1 1\n\
         XRANGE s 1-1 2\n\
         XRANGE s (1-0 (2-0\n\
         XRANGE s (1 +\n\
         XRANGE s (1-18446744073709551615 +\n\
         XREVRANGE s (3-5 (1-0\n\
         XREVRANGE s 3 1\n\
         XRANGE s - + COUNT 2\n\
         XREVRANGE s + - COUNT 2\n\
         XRANGE s - + COUNT 0\n\
         XRANGE s - + COUNT -5\n\
         XRANGE s - + count 1 COUNT 3\n\
         XRANGE s - + COUNT\n\
         XRANGE s - + COUNT x\n\
         XRANGE s - + LIMIT 1\n\
         XRANGE s 5 1\n\
         XREVRANGE s 1 5\n\
         XRANGE s (- +\n\
         XRANGE s - (+\n\
         XRANGE s ( +\n\
         XRANGE s - (\n\
         XRANGE s (18446744073709551615-18446744073709551615 +\n\
         XRANGE s - (0-0\n\
         XREVRANGE s (0-0 -\n\
         XREVRANGE s + (18446744073709551615-18446744073709551615\n\
         XRANGE s (0 +\n\
         XRANGE s 0 (1\n\
         XRANGE s x +\n\
         XRANGE s - x\n\
         XREVRANGE s x y\n\
         XRANGE s 18446744073709551615 +\n\
         XRANGE missing - +\n\
         XRANGE missing - + COUNT 0\n\
         XRANGE missing x +\n\
         XREVRANGE missing + -\n\
         SET str v\n\
         XRANGE str - +\n\
         XRANGE str - + COUNT 0\n\
         XREVRANGE str + -\n\
         XRANGE s -\n\
         XREVRANGE s\n",
    );
}

#[test]
fn xdel_xlen_and_xsetid() {
    check_both_protocols(
        "XADD s 1-0 f v\n\
         XADD s 2-0 f v\n\
         XADD s 3-0 f v\n\
         XADD s 4-0 f v\n\
         XDEL s 2-0\n\
         XDEL s 2-0 3 9-9\n\
         XDEL s 1-0 x\n\
         XDEL s -\n\
         XDEL s +\n\
         XLEN s\n\
         XRANGE s - +\n\
         XDEL missing x\n\
         XDEL missing 1-0\n\
         SET str v\n\
         XDEL str 1-0\n\
         XDEL s\n\
         XSETID s 5-0\n\
         XADD s 5-0 f v\n\
         XADD s 5-* f v\n\
         XSETID s 3-0\n\
         XSETID s 18446744073709551615-18446744073709551615\n\
         XADD s * f v\n\
         XSETID s 10-0\n\
         XSETID s 10-0 ENTRIESADDED 1\n\
         XSETID s 10-0 ENTRIESADDED 2\n\
         XSETID s 10-0 ENTRIESADDED -1\n\
         XSETID s 10-0 ENTRIESADDED x\n\
         XSETID s 10-0 MAXDELETEDID 11-0\n\
         XSETID s 10-0 MAXDELETEDID 9-0 ENTRIESADDED 100\n\
         XSETID s 10-0 MAXDELETEDID 10-0\n\
         XSETID s 10-0 MAXDELETEDID x\n\
         XSETID s 10-0 MAXDELETEDID +\n\
         XSETID s 10-0 ENTRIESADDED\n\
         XSETID s 10-0 FOO 1\n\
         XSETID s - \n\
         XSETID s x\n\
         XSETID s 10\n\
         XSETID missing 1-0\n\
         XSETID missing x\n\
         XSETID missing 1-0 ENTRIESADDED -1\n\
         XSETID str 1-0\n\
         XSETID s\n\
         XDEL s 4-0 5-0\n\
         XLEN s\n\
         XSETID s 0-1\n\
         XSETID s 0-0 ENTRIESADDED 0 MAXDELETEDID 0-0\n\
         XADD s 0-* f v\n\
         XADD s 1-0 f v\n\
         XRANGE s - +\n",
    );
}

#[test]
fn xtrim_strategies_options_and_errors() {
    let mut script = String::new();
    for i in 1..=30 {
        script.push_str(&format!("XADD s {i}-0 f v\n"));
    }
    script.push_str(
        "XTRIM s MAXLEN 25\n\
         XTRIM s MAXLEN = 20\n\
         XTRIM s MAXLEN ~ 5\n\
         XTRIM s MINID 15\n\
         XTRIM s MINID = 16-0\n\
         XTRIM s MINID ~ 100\n\
         XTRIM s MAXLEN ~ 0 LIMIT 1\n\
         XTRIM s MAXLEN ~ 0 LIMIT 0\n\
         XLEN s\n\
         XTRIM s MAXLEN 100\n\
         XTRIM s MAXLEN 5 LIMIT 1\n\
         XTRIM s MINID 5 LIMIT 1\n\
         XTRIM s LIMIT 1\n\
         XTRIM s LIMIT 0\n\
         XTRIM s NOMKSTREAM\n\
         XTRIM s MAXLEN\n\
         XTRIM s MAXLEN -1\n\
         XTRIM s MAXLEN x\n\
         XTRIM s MAXLEN 1 MINID 1\n\
         XTRIM s MINID 1 MAXLEN 1\n\
         XTRIM s MINID -\n\
         XTRIM s MINID x\n\
         XTRIM s MAXLEN ~ 1 LIMIT -1\n\
         XTRIM s MAXLEN ~ 1 LIMIT x\n\
         XTRIM s MAXLEN ~ 1 FOO\n\
         XTRIM s FOO\n\
         XTRIM s *\n\
         XTRIM missing MAXLEN 0\n\
         XTRIM missing FOO\n\
         SET str v\n\
         XTRIM str MAXLEN 0\n\
         XTRIM str MAXLEN x\n\
         XTRIM s\n\
         XTRIM s maxlen 0\n\
         XLEN s\n\
         EXISTS s\n\
         XRANGE s - +\n",
    );
    check_both_protocols(&script);
}

#[test]
fn xread_without_block() {
    check_both_protocols(
        "XADD a 1-0 f v\n\
         XADD a 2-0 g w\n\
         XADD b 5-0 x y\n\
         XREAD STREAMS a 0\n\
         XREAD STREAMS a b 0 0\n\
         XREAD STREAMS a b 1 5\n\
         XREAD STREAMS a b 2 5\n\
         XREAD STREAMS a b $ $\n\
         XREAD STREAMS a missing b 0 0 0\n\
         XREAD COUNT 1 STREAMS a b 0 0\n\
         XREAD COUNT 0 STREAMS a 0\n\
         XREAD COUNT -1 STREAMS a 0\n\
         XREAD count 1 count 2 STREAMS a 0\n\
         XREAD STREAMS a 1\n\
         XREAD STREAMS a 1-0\n\
         XREAD STREAMS a a 0 1\n\
         XREAD STREAMS missing 0\n\
         XREAD STREAMS missing $\n\
         XREAD STREAMS a 18446744073709551615-18446744073709551615\n\
         XREAD STREAMS a b 0\n\
         XREAD STREAMS a\n\
         XREAD STREAMS\n\
         XREAD COUNT x STREAMS a 0\n\
         XREAD COUNT\n\
         XREAD FOO STREAMS a 0\n\
         XREAD GROUP g c STREAMS a 0\n\
         XREAD NOACK STREAMS a 0\n\
         XREAD STREAMS a >\n\
         XREAD STREAMS a -\n\
         XREAD STREAMS a +\n\
         XREAD STREAMS a x\n\
         XREAD BLOCK x STREAMS a 0\n\
         XREAD BLOCK -1 STREAMS a 0\n\
         XREAD BLOCK 1.5 STREAMS a 0\n\
         XREAD BLOCK 0 STREAMS a 0\n\
         XREAD BLOCK 10 STREAMS a $\n\
         XREAD BLOCK 10 STREAMS missing $\n\
         SET str v\n\
         XREAD STREAMS str 0\n\
         XREAD STREAMS a str 0 x\n\
         XREAD STREAMS a str x 0\n\
         XREAD STREAMS str $\n\
         XDEL a 2-0\n\
         XREAD STREAMS a 1-0\n\
         XREAD STREAMS a 0-0\n\
         XDEL a 1-0\n\
         XREAD STREAMS a 0-0\n\
         XREAD\n\
         XREAD STREAMS a b\n\
         MULTI\n\
         XREAD BLOCK 0 STREAMS a $\n\
         XREAD BLOCK 0 STREAMS b 0\n\
         EXEC\n",
    );
}

#[test]
fn streams_as_keys_type_encoding_copy_rename_and_command_info() {
    check_both_protocols(
        "XADD s 1-0 f v\n\
         XADD s 2-0 g w\n\
         TYPE s\n\
         OBJECT ENCODING s\n\
         EXISTS s\n\
         COPY s c\n\
         XRANGE c - +\n\
         XADD c 3-0 h x\n\
         XLEN s\n\
         XLEN c\n\
         RENAME c r\n\
         XRANGE r - +\n\
         EXISTS c\n\
         XDEL s 1-0 2-0\n\
         EXISTS s\n\
         TYPE s\n\
         XLEN s\n\
         XADD s 1-0 f v\n\
         XADD s 3-0 f v\n\
         XTRIM s MAXLEN 0\n\
         EXISTS s\n\
         XLEN s\n\
         DEL s r\n\
         EXISTS s r\n\
         XADD s 1-0 f v\n\
         EXPIRE s 100\n\
         TTL s\n\
         XADD s 2-0 f v\n\
         TTL s\n\
         SET s v\n\
         TYPE s\n\
         XADD s 1-0 f v\n\
         LPUSH l x\n\
         XLEN l\n\
         XADD l 1-0 f v\n\
         COMMAND INFO xadd xlen xrange xrevrange xdel xtrim xsetid xread\n\
         COMMAND GETKEYS XREAD COUNT 1 STREAMS a b 0 0\n\
         COMMAND GETKEYS XADD s * f v\n",
    );
}

/// A small deterministic generator (the layout tests need many varied but
/// reproducible entries).
struct Lcg(u64);

impl Lcg {
    fn next(&mut self, below: u64) -> u64 {
        self.0 = self
            .0
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1_442_695_040_888_963_407);
        (self.0 >> 33) % below
    }
}

/// A value whose listpack encoding varies: short and long strings across
/// the 63/64, 127/128 and 4095/4096 encoding edges, and integers of every
/// width (stored as integers) or in non-canonical form (stored as strings).
fn layout_value(r: &mut Lcg, small_only: bool) -> String {
    let kind = if small_only {
        5 + r.next(7)
    } else {
        r.next(12)
    };
    match kind {
        0 => "v".to_string(),
        1 => "x".repeat([62, 63, 64, 65][r.next(4) as usize]),
        2 => "y".repeat([124, 125, 126, 127, 128][r.next(5) as usize]),
        3 => "z".repeat(200 + r.next(900) as usize),
        4 => "w".repeat([4090, 4096, 5000][r.next(3) as usize]),
        5 => ["0", "127", "128", "-1", "4095", "-4096", "40000", "8388608"][r.next(8) as usize]
            .to_string(),
        6 => ["2147483648", "-9223372036854775808", "9223372036854775807"][r.next(3) as usize]
            .to_string(),
        7 => ["007", "-0", "+5", "9223372036854775808", "1.5", ""][r.next(6) as usize].to_string(),
        _ => format!("val-{}", r.next(1000)),
    }
}

/// XADD commands with explicit IDs: sequence steps, millisecond gaps of
/// every integer width, sequence numbers going down across milliseconds,
/// and field sets that sometimes match the node's master entry.
fn layout_adds(key: &str, seed: u64, count: usize) -> Vec<Vec<String>> {
    layout_adds_after(key, seed, count, (1, 0), false)
}

/// [`layout_adds`] continuing after the ID `(ms, seq)`, with only small
/// values when `small_only`.
fn layout_adds_after(
    key: &str,
    seed: u64,
    count: usize,
    (mut ms, mut seq): (u64, u64),
    small_only: bool,
) -> Vec<Vec<String>> {
    let mut r = Lcg(seed);
    let mut out = Vec::new();
    for _ in 0..count {
        match r.next(6) {
            0 => seq += 1 + r.next(3),
            1 => {
                ms += [1, 200, 70_000, 1 << 31, 1 << 40][r.next(5) as usize];
                seq = r.next(3);
            }
            2 => {
                ms += 1;
                seq = 0;
            }
            _ => seq += 1,
        }
        let mut cmd = vec!["XADD".to_string(), key.to_string(), format!("{ms}-{seq}")];
        let fields: &[&str] = match r.next(5) {
            0 => &["a", "b"],
            1 => &["a"],
            2 => &["field-with-a-long-name", "12"],
            3 => &["a", "b", "c", "d"],
            _ => &["f"],
        };
        for f in fields {
            cmd.push(f.to_string());
            cmd.push(layout_value(&mut r, small_only));
        }
        out.push(cmd);
    }
    out
}

/// Sends `cmds` to both servers and compares the replies.
fn check_all(p: &mut Pair, cmds: &[Vec<String>]) {
    for cmd in cmds {
        check_owned(p, cmd);
    }
}

/// Reveals every node boundary of `key` (destroying it): `XTRIM MINID ~
/// <id>` for each entry in turn removes the nodes that end before it, so
/// the replies show where each node ends.
fn probe_node_boundaries(p: &mut Pair, key: &str) {
    let ids = crate::harness::array_elements(&p.redis(&["XRANGE", key, "-", "+"]));
    let ids: Vec<String> = ids
        .iter()
        .filter_map(|entry| {
            let inner = crate::harness::array_elements(entry);
            let id = inner.first()?;
            let text = String::from_utf8_lossy(id).into_owned();
            text.split("\r\n").nth(1).map(str::to_string)
        })
        .collect();
    assert!(!ids.is_empty(), "no entries to probe in {key}");
    for id in &ids {
        p.check(&["XTRIM", key, "MINID", "~", id]);
    }
    p.check(&["XTRIM", key, "MAXLEN", "~", "0"]);
    p.check(&["XLEN", key]);
}

#[test]
fn approximate_trimming_removes_the_same_nodes_as_redis() {
    let mut p = Pair::new();
    // Small identical entries: 100 per node.
    let mut small = Vec::new();
    for i in 1..=350 {
        small.push(vec![
            "XADD".into(),
            "small".into(),
            format!("{i}-0"),
            "f".into(),
            "v".into(),
        ]);
    }
    check_all(&mut p, &small);
    p.check(&["XTRIM", "small", "MAXLEN", "~", "300"]);
    p.check(&["XTRIM", "small", "MAXLEN", "~", "200"]);
    p.check(&["XTRIM", "small", "MAXLEN", "~", "10", "LIMIT", "99"]);
    p.check(&["XTRIM", "small", "MAXLEN", "~", "10", "LIMIT", "100"]);
    p.check(&["XTRIM", "small", "MINID", "~", "300"]);
    p.check(&["XTRIM", "small", "MINID", "~", "301"]);
    p.check(&["XLEN", "small"]);
    // Varied entries, so nodes end on the byte limit as well.
    for seed in 1..=6 {
        let key = format!("varied{seed}");
        check_all(&mut p, &layout_adds(&key, seed, 400));
        probe_node_boundaries(&mut p, &key);
    }
}

#[test]
fn tombstones_count_towards_node_capacity_and_bytes() {
    let mut p = Pair::new();
    for seed in 11..=14 {
        let key = format!("t{seed}");
        let adds = layout_adds(&key, seed, 300);
        let mut r = Lcg(seed * 7);
        for (n, cmd) in adds.iter().enumerate() {
            check_owned(&mut p, cmd);
            // Delete some entries (some nodes lose every entry), and now
            // and then trim exactly, which leaves tombstones in the head
            // node and changes its counters.
            if r.next(3) == 0 {
                let victim = &adds[r.next(n as u64 + 1) as usize][2];
                p.check(&["XDEL", &key, victim]);
            }
            if r.next(40) == 0 {
                let len = 250 - r.next(100);
                p.check(&["XTRIM", &key, "MAXLEN", &len.to_string()]);
            }
            if r.next(60) == 0 {
                let min = &adds[r.next(n as u64 + 1) as usize][2];
                p.check(&["XTRIM", &key, "MINID", min]);
            }
        }
        p.check(&["XLEN", &key]);
        p.check(&["XRANGE", &key, "-", "+", "COUNT", "3"]);
        probe_node_boundaries(&mut p, &key);
    }
}

/// Nodes that end within a byte of the 4096-byte limit: three big entries
/// of a slowly growing size, then small entries of every shape until a new
/// node starts; over the range of sizes every byte offset of the limit is
/// met, so an error of one byte in the listpack size model shows.
#[test]
fn node_byte_limit_is_exact() {
    let mut p = Pair::new();
    for seed in 0..12 {
        for pad in 0..24 {
            let key = format!("edge{seed}-{pad}");
            let big = "b".repeat(1300 + pad);
            let mut cmds = Vec::new();
            for i in 1..=3 {
                cmds.push(vec![
                    "XADD".into(),
                    key.clone(),
                    format!("{i}-0"),
                    "f".into(),
                    big.clone(),
                ]);
            }
            cmds.extend(layout_adds_after(
                &key,
                seed * 100 + pad as u64,
                30,
                (3, 0),
                true,
            ));
            check_all(&mut p, &cmds);
            probe_node_boundaries(&mut p, &key);
        }
    }
}

// ---------------------------------------------------------------------------
// XREAD BLOCK: other clients' writes wake the waiting one.

/// A client of both servers: (Redis connection, hozon connection).
struct Client {
    r: crate::harness::Conn,
    h: crate::harness::Conn,
}

impl Client {
    fn new(p: &Pair, resp3: bool) -> Client {
        let (r, h) = p.connect_more();
        let mut c = Client { r, h };
        if resp3 {
            c.r.call(&[b"HELLO", b"3"]);
            c.h.call(&[b"HELLO", b"3"]);
        }
        c
    }

    /// Sends `line` (split at spaces) to both servers without reading.
    fn send(&mut self, line: &str) {
        let args: Vec<&[u8]> = line.split(' ').map(str::as_bytes).collect();
        let bytes = crate::harness::encode_command(&args);
        self.r.send_raw(&bytes);
        self.h.send_raw(&bytes);
    }

    /// Reads one reply from each server; they must be identical.
    #[track_caller]
    fn reply(&mut self) -> Vec<u8> {
        let r = self.r.read_reply();
        let h = self.h.read_reply();
        assert_eq!(show(&r), show(&h), "replies differ (redis, hozon)");
        r
    }

    /// Asserts that neither server has answered yet.
    #[track_caller]
    fn assert_waiting(&mut self) {
        let wait = Duration::from_millis(100);
        if let Some(r) = self.r.try_read_reply(wait) {
            panic!("redis answered a waiting client: {}", show(&r));
        }
        if let Some(h) = self.h.try_read_reply(wait) {
            panic!("hozon answered a waiting client: {}", show(&h));
        }
    }
}

/// The `blocked_clients` field of INFO clients.
fn blocked_clients(conn: &mut crate::harness::Conn) -> Option<usize> {
    let info = conn.call(&[b"INFO", b"clients"]);
    let text = String::from_utf8_lossy(&info);
    text.lines()
        .find_map(|l| l.strip_prefix("blocked_clients:"))
        .and_then(|v| v.trim().parse().ok())
}

/// Waits until both servers report `n` blocked clients, for at most 5 s.
#[track_caller]
fn wait_blocked(p: &mut Pair, n: usize) {
    let start = std::time::Instant::now();
    loop {
        let r = blocked_clients(&mut p.r);
        let h = blocked_clients(&mut p.h);
        if r == Some(n) && h == Some(n) {
            return;
        }
        assert!(
            start.elapsed() < Duration::from_secs(5),
            "blocked_clients: expected {n}, redis {r:?}, hozon {h:?}"
        );
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// Sends `line` from a new client, checks that it waits, and waits until
/// both servers count it among `before + 1` blocked clients.
#[track_caller]
fn blocked(p: &mut Pair, resp3: bool, line: &str, before: usize) -> Client {
    let mut c = Client::new(p, resp3);
    c.send(line);
    c.assert_waiting();
    wait_blocked(p, before + 1);
    c
}

fn xread_block_scenarios(resp3: bool) {
    let mut p = Pair::new();
    if resp3 {
        p.resp3();
    }
    // `$` on a missing key waits for anything.
    let mut c = blocked(&mut p, resp3, "XREAD BLOCK 0 STREAMS s $", 0);
    p.check(&["XADD", "s", "1-0", "f", "v"]);
    c.reply();

    // `$` means the last ID when the command arrived, not when served.
    p.check(&["XADD", "s", "2-0", "f", "v"]);
    let mut c = blocked(&mut p, resp3, "XREAD COUNT 5 BLOCK 0 STREAMS s $", 0);
    p.check(&["XADD", "s", "3-0", "g", "w"]);
    c.reply();

    // Several keys: served from the one that received data.
    let mut c = blocked(&mut p, resp3, "XREAD BLOCK 0 STREAMS a s b $ $ $", 0);
    p.check(&["XADD", "b", "7-0", "x", "y"]);
    c.reply();

    // A write that does not go past the ID waited for keeps waiting.
    let mut c = blocked(&mut p, resp3, "XREAD BLOCK 0 STREAMS s 10-0", 0);
    p.check(&["XADD", "s", "5-0", "f", "v"]);
    c.assert_waiting();
    p.check(&["XADD", "s", "11-0", "f", "v"]);
    c.reply();

    // Two clients on one key are both served by one entry.
    let mut c1 = blocked(&mut p, resp3, "XREAD BLOCK 0 STREAMS s $", 0);
    let mut c2 = blocked(&mut p, resp3, "XREAD BLOCK 0 STREAMS s 11-0", 1);
    p.check(&["XADD", "s", "12-0", "f", "v"]);
    c1.reply();
    c2.reply();

    // The key changing type does not wake; a stream created again does.
    let mut c = blocked(&mut p, resp3, "XREAD BLOCK 0 STREAMS s $", 0);
    p.check(&["DEL", "s"]);
    p.check(&["SET", "s", "string"]);
    c.assert_waiting();
    p.check(&["DEL", "s"]);
    // A new stream whose last ID is below the one waited for: still waits.
    p.check(&["XADD", "s", "1-0", "f", "v"]);
    c.assert_waiting();
    p.check(&["XADD", "s", "13-0", "f", "v"]);
    c.reply();

    // An empty stream waited on from 0: the next entry serves it.
    p.check(&["XDEL", "s", "1-0", "13-0"]);
    let mut c = blocked(&mut p, resp3, "XREAD BLOCK 0 STREAMS s 0", 0);
    p.check(&["XADD", "s", "14-0", "f", "v"]);
    c.reply();

    // An entry added and deleted in one transaction still moves the last
    // ID: the waiting client gets an empty list of entries.
    let mut c = blocked(&mut p, resp3, "XREAD BLOCK 0 STREAMS s $", 0);
    p.check(&["MULTI"]);
    p.check(&["XADD", "s", "15-0", "f", "v"]);
    p.check(&["XDEL", "s", "15-0"]);
    p.check(&["EXEC"]);
    c.reply();

    // XSETID moves the last ID but wakes nobody (nor does it touch WATCHed
    // keys); the next XADD serves the waiting client.
    let mut c = blocked(&mut p, resp3, "XREAD BLOCK 0 STREAMS s $", 0);
    let mut watcher = Client::new(&p, resp3);
    watcher.send("WATCH s");
    watcher.reply();
    p.check(&["XSETID", "s", "100-0"]);
    c.assert_waiting();
    watcher.send("MULTI");
    watcher.reply();
    watcher.send("PING");
    watcher.reply();
    watcher.send("EXEC");
    watcher.reply();
    p.check(&["XADD", "s", "101-0", "f", "v"]);
    c.reply();

    // A key named twice: the first ID given for it decides.
    let mut c = blocked(&mut p, resp3, "XREAD BLOCK 0 STREAMS s s 200-0 $", 0);
    p.check(&["XADD", "s", "150-0", "f", "v"]);
    c.assert_waiting();
    p.check(&["XADD", "s", "201-0", "f", "v"]);
    c.reply();

    // Without COUNT, a woken client gets at most 1000 entries.
    p.check(&["DEL", "s"]);
    let mut c = blocked(&mut p, resp3, "XREAD BLOCK 0 STREAMS s 0", 0);
    p.check(&["MULTI"]);
    for i in 1..=1100 {
        p.check(&["XADD", "s", &format!("{i}-0"), "f", "v"]);
    }
    p.check(&["EXEC"]);
    c.reply();
    // With COUNT, that count.
    let mut c = blocked(&mut p, resp3, "XREAD COUNT 3 BLOCK 0 STREAMS s $", 0);
    p.check(&["MULTI"]);
    for i in 2000..2010 {
        p.check(&["XADD", "s", &format!("{i}-0"), "f", "v"]);
    }
    p.check(&["EXEC"]);
    c.reply();

    // A stream renamed (or copied) onto the key waited for wakes it.
    p.check(&["XADD", "src", "5-0", "f", "v"]);
    let mut c = blocked(&mut p, resp3, "XREAD BLOCK 0 STREAMS dst $", 0);
    p.check(&["RENAME", "src", "dst"]);
    c.reply();
    let mut c = blocked(&mut p, resp3, "XREAD BLOCK 0 STREAMS cp $", 0);
    p.check(&["COPY", "dst", "cp"]);
    c.reply();

    // A timeout answers with a null array.
    let mut c = Client::new(&p, resp3);
    c.send("XREAD BLOCK 50 STREAMS s $");
    c.reply();
    // Data there already: served at once even with BLOCK.
    let mut c = Client::new(&p, resp3);
    c.send("XREAD BLOCK 0 COUNT 2 STREAMS s 0");
    c.reply();
}

#[test]
fn xread_block_is_woken_by_writes_resp2() {
    xread_block_scenarios(false);
}

#[test]
fn xread_block_is_woken_by_writes_resp3() {
    xread_block_scenarios(true);
}

// ---------------------------------------------------------------------------
// Random command sequences with explicit IDs.

const KEYS: &[&str] = &["s1", "s2", "str"];

/// One stream command with arguments from a small space, so sequences hit
/// existing and missing IDs, tombstones, node splits (big values) and
/// every trimming path.
#[derive(Debug, Clone)]
struct Op(Vec<String>);

fn pick<T: Copy>(g: &mut Gen, items: &[T]) -> T {
    *g.choose(items).expect("non-empty choice list")
}

fn small(g: &mut Gen, below: u8) -> u8 {
    u8::arbitrary(g) % below
}

/// An ID, sometimes incomplete or out of range.
fn random_id(g: &mut Gen) -> String {
    match small(g, 10) {
        0 => small(g, 40).to_string(),
        1 => pick(
            g,
            &[
                "0-0",
                "0-1",
                "18446744073709551615-18446744073709551615",
                "x",
            ],
        )
        .to_string(),
        _ => format!("{}-{}", small(g, 40), small(g, 4)),
    }
}

fn random_value(g: &mut Gen) -> String {
    match small(g, 8) {
        0 => "B".repeat(1500),
        1 => "C".repeat(700 + usize::from(small(g, 200))),
        2 => (i64::from(small(g, 200)) * 1000 - 3).to_string(),
        _ => pick(g, &["a", "b", "v", "", "12"]).to_string(),
    }
}

fn trim_args(g: &mut Gen, out: &mut Vec<String>) {
    if small(g, 2) == 0 {
        out.push("MAXLEN".into());
        match small(g, 3) {
            0 => out.push("~".into()),
            1 => out.push("=".into()),
            _ => {}
        }
        out.push(small(g, 12).to_string());
    } else {
        out.push("MINID".into());
        match small(g, 3) {
            0 => out.push("~".into()),
            1 => out.push("=".into()),
            _ => {}
        }
        out.push(random_id(g));
    }
    if small(g, 4) == 0 {
        out.push("LIMIT".into());
        out.push(small(g, 6).to_string());
    }
}

impl Arbitrary for Op {
    fn arbitrary(g: &mut Gen) -> Op {
        let key = pick(g, KEYS).to_string();
        let words: Vec<String> = match small(g, 20) {
            0..=6 => {
                let mut v = vec!["XADD".to_string(), key];
                if small(g, 4) == 0 {
                    trim_args(g, &mut v);
                }
                if small(g, 10) == 0 {
                    v.push("NOMKSTREAM".into());
                }
                v.push(if small(g, 5) == 0 {
                    format!("{}-*", small(g, 40))
                } else {
                    random_id(g)
                });
                for _ in 0..=small(g, 2) {
                    v.push(pick(g, &["f", "g", "h"]).to_string());
                    v.push(random_value(g));
                }
                v
            }
            7 | 8 => {
                let mut v = vec!["XDEL".to_string(), key];
                for _ in 0..=small(g, 3) {
                    v.push(random_id(g));
                }
                v
            }
            9 | 10 => {
                let mut v = vec!["XTRIM".to_string(), key];
                trim_args(g, &mut v);
                v
            }
            11 | 12 => {
                let cmd = pick(g, &["XRANGE", "XREVRANGE"]).to_string();
                let bound = |g: &mut Gen| match small(g, 5) {
                    0 => pick(g, &["-", "+"]).to_string(),
                    1 => format!("({}", random_id(g)),
                    _ => random_id(g),
                };
                let mut v = vec![cmd, key, bound(g), bound(g)];
                if small(g, 3) == 0 {
                    v.extend(["COUNT".to_string(), small(g, 5).to_string()]);
                }
                v
            }
            13 => {
                let mut v = vec!["XREAD".to_string()];
                if small(g, 2) == 0 {
                    v.extend(["COUNT".to_string(), small(g, 4).to_string()]);
                }
                v.extend([
                    "STREAMS".to_string(),
                    "s1".into(),
                    "s2".into(),
                    random_id(g),
                    random_id(g),
                ]);
                v
            }
            14 => vec!["XLEN".into(), key],
            15 => {
                let mut v = vec!["XSETID".to_string(), key, random_id(g)];
                if small(g, 2) == 0 {
                    v.extend(["ENTRIESADDED".to_string(), small(g, 30).to_string()]);
                }
                if small(g, 2) == 0 {
                    v.extend(["MAXDELETEDID".to_string(), random_id(g)]);
                }
                v
            }
            16 => vec!["DEL".into(), key],
            17 => vec!["SET".into(), key, "x".into()],
            _ => vec!["XRANGE".into(), key, "-".into(), "+".into()],
        };
        Op(words)
    }

    fn shrink(&self) -> Box<dyn Iterator<Item = Op>> {
        Box::new(std::iter::empty())
    }
}

/// Runs `ops` from an empty keyspace and compares every reply, then each
/// stream's contents and its node layout (destructively probed).
fn random_sequence_matches(ops: Vec<Op>, resp3: bool) -> TestResult {
    let mut all = vec![crate::harness::del_command(KEYS)];
    all.extend(ops.into_iter().map(|op| op.0));
    for key in KEYS {
        all.push(vec![
            "XRANGE".into(),
            key.to_string(),
            "-".into(),
            "+".into(),
        ]);
        all.push(vec!["XLEN".into(), key.to_string()]);
        // Whole-node trims from the head reveal where the nodes end.
        for keep in [8, 4, 2, 1, 0] {
            all.push(vec![
                "XTRIM".into(),
                key.to_string(),
                "MAXLEN".into(),
                "~".into(),
                keep.to_string(),
            ]);
        }
    }
    with_thread_pair(resp3, |p| compare_sequence(p, &all, 0, identical))
}

#[test]
fn random_command_sequences_match_redis_resp2() {
    quickcheck_ops(60, 150, |ops: Vec<Op>| random_sequence_matches(ops, false));
}

#[test]
fn random_command_sequences_match_redis_resp3() {
    quickcheck_ops(60, 80, |ops: Vec<Op>| random_sequence_matches(ops, true));
}

/// XSETID on a stream emptied by trimming may set the last ID below the
/// node that still holds its tombstones; entries added then sort before
/// that node's first one. Redis copes; so must hozon, the same way.
#[test]
fn entries_below_a_tombstone_node_after_xsetid() {
    check_both_protocols(
        "XADD w 1-0 f v\n\
         XADD w 2-0 f v\n\
         XADD w 3-0 f v\n\
         XDEL w 3-0\n\
         XTRIM w MINID 3\n\
         XLEN w\n\
         XSETID w 0-5\n\
         XADD w 0-6 f v\n\
         XADD w 0-7 f v\n\
         XRANGE w - +\n\
         XREVRANGE w + -\n\
         XRANGE w 0-7 0-7\n\
         XTRIM w MAXLEN 1\n\
         XRANGE w - +\n\
         XDEL w 0-7\n\
         XLEN w\n\
         XADD w 0-8 f v\n\
         XTRIM w MINID ~ 5\n\
         XRANGE w - +\n\
         XLEN w\n",
    );
}

#[test]
fn option_parsing_corners() {
    check_both_protocols(
        "XADD s MaXlEn ~ 5 LIMIT 10 NOMKSTREAM 1-1 f v\n\
         XADD s LIMIT 5 MAXLEN ~ 1 2-1 f v\n\
         XADD s LIMIT 5 LIMIT 0 MAXLEN 1 3-1 f v\n\
         XADD s MAXLEN ~ 0 LIMIT 0 4-1 f v\n\
         XLEN s\n\
         XADD s MAXLEN\n\
         XADD s MAXLEN 1 f v\n\
         XADD s MAXLEN = 1 = f v\n\
         XADD s MINID ~ 2 * \n\
         XADD s = 5 6-0 f v\n\
         XADD s maxlen ~ maxlen 7-0 f v\n\
         XADD s 7-0 f v MAXLEN 1\n\
         XADD s nomkstream limit 1 7-0 f v\n\
         XTRIM s MAXLEN ~\n\
         XTRIM s MAXLEN =\n\
         XTRIM s MINID =\n\
         XTRIM s MAXLEN = ~ 1\n\
         XTRIM s MINID ~ 0\n\
         XTRIM s MINID 0-0\n\
         XTRIM s MAXLEN 0 LIMIT 0\n\
         XTRIM s MAXLEN ~ 0 LIMIT 0 LIMIT 1\n\
         XTRIM s LIMIT 1 MAXLEN ~ 0\n\
         XREAD STREAMS COUNT 1 a 0\n\
         XREAD COUNT 1 COUNT x STREAMS a 0\n\
         XREAD BLOCK 1 BLOCK x STREAMS a 0\n\
         XREAD streams a 0 COUNT 1\n\
         XREAD GROUP g STREAMS a 0\n\
         XREAD NOACK\n\
         XSETID s 9-0 entriesadded 5 maxdeletedid 1-0\n\
         XSETID s 9-0 ENTRIESADDED 5 ENTRIESADDED\n\
         XSETID s 1 2\n\
         XRANGE s - + COUNT 1 COUNT\n\
         XRANGE s - + COUNT 1 2\n\
         XREVRANGE s + - count 1\n",
    );
}

#[test]
fn streams_move_between_databases() {
    let mut p = Pair::new();
    p.script(
        "XADD s 1-0 f v\n\
         XADD s 2-0 g w\n\
         XDEL s 1-0\n\
         MOVE s 5\n\
         EXISTS s\n\
         SELECT 5\n\
         XRANGE s - +\n\
         XLEN s\n\
         XADD s 2-0 f v\n\
         XADD s 3-0 f v\n\
         SWAPDB 0 5\n\
         SELECT 0\n\
         XRANGE s - +\n",
    );
}

/// `stream-node-max-entries` and `stream-node-max-bytes` shape the nodes
/// XADD builds, which approximate trimming (`~`, whole nodes only) and
/// the LIMIT default (100 nodes' worth) reveal.
#[test]
fn stream_node_limits_are_real_parameters() {
    let mut p = Pair::new();
    p.script(
        r#"
~CONFIG GET stream-node-max-*
CONFIG SET stream-node-max-entries 3
CONFIG SET stream-node-max-bytes 1kb
~CONFIG GET stream-node-max-*
CONFIG SET stream-node-max-entries -1
CONFIG SET stream-node-max-bytes abc
XADD s 1-1 f v
XADD s 2-1 f v
XADD s 3-1 f v
XADD s 4-1 f v
XADD s 5-1 f v
XADD s 6-1 f v
XADD s 7-1 f v
XTRIM s MAXLEN ~ 2
XLEN s
XRANGE s - +
CONFIG SET stream-node-max-entries 0
CONFIG SET stream-node-max-bytes 40
XADD b 1-1 field "a value of some length"
XADD b 2-1 field "a value of some length"
XADD b 3-1 field "a value of some length"
XADD b 4-1 field "a value of some length"
XTRIM b MAXLEN ~ 1
XLEN b
CONFIG SET stream-node-max-entries 1
CONFIG SET stream-node-max-bytes 0
XADD c 1-1 f v
XADD c 2-1 f v
XADD c 3-1 f v
XADD c MAXLEN ~ 1 4-1 f v
XLEN c
"#,
    );
}
