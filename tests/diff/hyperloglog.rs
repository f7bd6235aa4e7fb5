//! Differential tests: HyperLogLog (PFADD, PFCOUNT, PFMERGE, PFDEBUG,
//! PFSELFTEST), RESP2 and RESP3.
//!
//! Besides the replies, the strings themselves are compared with GET: the
//! sparse and the dense representation, the cached cardinality and its
//! stale bit must be Redis's bytes exactly.

use crate::harness::{bulk_payload, check_both_protocols, show, Pair};

/// Sets `key` to `value` on both servers.
fn set_both(p: &mut Pair, key: &str, value: &[u8]) {
    p.check_bytes(&[b"SET", key.as_bytes(), value]);
}

/// Compares GET of every key of `keys` (the raw HyperLogLog strings).
#[track_caller]
fn check_strings(p: &mut Pair, keys: &[&str]) {
    for key in keys {
        p.check(&["GET", key]);
    }
}

/// Adds the elements `<prefix><from>..<prefix><to>` to `key` with a
/// script (100 per PFADD), on both servers, comparing the script's reply
/// (how many PFADDs returned 1).
#[track_caller]
fn add_range(p: &mut Pair, key: &str, prefix: &str, from: u64, to: u64) {
    const SCRIPT: &str = "local changed = 0 \
        local batch = {} \
        for i = tonumber(ARGV[2]), tonumber(ARGV[3]) do \
          batch[#batch + 1] = ARGV[1] .. i \
          if #batch == 100 or i == tonumber(ARGV[3]) then \
            changed = changed + redis.call('pfadd', KEYS[1], unpack(batch)) \
            batch = {} \
          end \
        end \
        return changed";
    let (from, to) = (from.to_string(), to.to_string());
    p.check(&["EVAL", SCRIPT, "1", key, prefix, &from, &to]);
}

const BASICS: &str = r#"
PFCOUNT missing
PFCOUNT missing other
PFADD h
GET h
PFCOUNT h
GET h
PFADD h
PFADD h a
GET h
PFADD h a
PFADD h b c d e f g
GET h
PFCOUNT h
GET h
PFCOUNT h
PFADD h a b
PFADD h zz
GET h
PFADD h2 a x y
PFCOUNT h h2
PFCOUNT h h2 missing
PFCOUNT h h
GET h2
PFADD h "" "a\x00b" "\xff\xfe"
PFCOUNT h
GET h
PFADD
PFCOUNT
PFMERGE
RPUSH list a
PFADD list a
PFCOUNT list
PFCOUNT h list
PFMERGE h list
PFMERGE list h
PFDEBUG encoding list
SET s "not a hyperloglog"
PFADD s a
PFCOUNT s
PFCOUNT h s
PFMERGE h s
PFMERGE s h
PFDEBUG encoding s
SET n 12345
PFADD n a
PFCOUNT n
SET short HYLL
PFCOUNT short
TYPE h
STRLEN h
"#;

#[test]
fn pfadd_and_pfcount_basics() {
    check_both_protocols(BASICS);
}

/// Counts of 10k, 100k and a million distinct elements, the union of
/// overlapping sets, and the strings behind them, compared exactly.
#[test]
fn many_elements_count_exactly() {
    let mut p = Pair::new();
    add_range(&mut p, "k10k", "e", 1, 10_000);
    p.check(&["PFDEBUG", "ENCODING", "k10k"]);
    p.check(&["PFCOUNT", "k10k"]);
    add_range(&mut p, "k100k", "e", 5_001, 105_000);
    p.check(&["PFCOUNT", "k100k"]);
    add_range(&mut p, "small", "s", 1, 500);
    p.check(&["PFDEBUG", "ENCODING", "small"]);
    p.check(&["PFCOUNT", "small"]);
    check_strings(&mut p, &["k10k", "k100k", "small"]);
    p.check(&["PFCOUNT", "k10k", "k100k"]);
    p.check(&["PFCOUNT", "k10k", "k100k", "small", "missing"]);
    p.check(&["PFCOUNT", "small", "small"]);
    add_range(&mut p, "big", "b", 1, 1_000_000);
    p.check(&["PFCOUNT", "big"]);
    p.check(&["PFCOUNT", "big", "small"]);
    check_strings(&mut p, &["big"]);
    // Sizes where the estimator's corrections matter most.
    for (i, n) in [1u64, 2, 3, 10, 50, 200, 1000, 3000, 20_000, 40_000]
        .into_iter()
        .enumerate()
    {
        let key = format!("n{i}");
        add_range(&mut p, &key, "x", 1, n);
        p.check(&["PFCOUNT", &key]);
        p.check(&["GET", &key]);
    }
}

/// The switch from sparse to dense at `hll-sparse-max-bytes`, element by
/// element, with the string compared after every PFADD.
#[test]
fn sparse_to_dense_at_hll_sparse_max_bytes() {
    let mut p = Pair::new();
    p.check(&["CONFIG", "GET", "hll-sparse-max-bytes"]);
    p.check(&["CONFIG", "SET", "hll-sparse-max-bytes", "-1"]);
    p.check(&["CONFIG", "SET", "hll-sparse-max-bytes", "abc"]);
    p.check(&["CONFIG", "SET", "hll-sparse-max-bytes", "1kb"]);
    p.check(&["CONFIG", "GET", "hll-sparse-max-bytes"]);
    for limit in ["0", "30", "200", "3000"] {
        p.check(&["CONFIG", "SET", "hll-sparse-max-bytes", limit]);
        let key = format!("h{limit}");
        let mut dense_at = None;
        for i in 0..1500 {
            let element = format!("el{i}");
            p.check(&["PFADD", &key, &element]);
            p.check(&["GET", &key]);
            let encoding = p.check(&["PFDEBUG", "ENCODING", &key]);
            if encoding == b"+dense\r\n" {
                dense_at = Some(i);
                break;
            }
        }
        p.check(&["PFCOUNT", &key]);
        if limit != "3000" {
            assert!(dense_at.is_some(), "limit {limit}: never dense");
        }
    }
}

/// PFMERGE into new and existing keys, sparse and dense, with the
/// destination among the sources and missing sources.
#[test]
fn pfmerge_new_and_existing_destinations() {
    let mut p = Pair::new();
    add_range(&mut p, "a", "x", 1, 100);
    add_range(&mut p, "b", "x", 50, 300);
    add_range(&mut p, "dense", "y", 1, 5000);
    p.check(&["PFMERGE", "new"]);
    check_strings(&mut p, &["new"]);
    p.check(&["PFMERGE", "m1", "a", "b"]);
    p.check(&["PFDEBUG", "ENCODING", "m1"]);
    check_strings(&mut p, &["m1"]);
    p.check(&["PFCOUNT", "m1"]);
    p.check(&["PFMERGE", "m1", "missing"]);
    check_strings(&mut p, &["m1"]);
    p.check(&["PFMERGE", "a", "b", "missing"]);
    check_strings(&mut p, &["a"]);
    p.check(&["PFCOUNT", "a"]);
    p.check(&["PFMERGE", "m2", "a", "dense"]);
    p.check(&["PFDEBUG", "ENCODING", "m2"]);
    check_strings(&mut p, &["m2"]);
    p.check(&["PFCOUNT", "m2"]);
    p.check(&["PFCOUNT", "a", "dense"]);
    // A sparse destination merged with a dense source becomes dense.
    add_range(&mut p, "sp", "z", 1, 20);
    p.check(&["PFCOUNT", "sp"]);
    p.check(&["PFMERGE", "sp", "dense"]);
    p.check(&["PFDEBUG", "ENCODING", "sp"]);
    check_strings(&mut p, &["sp"]);
    // Many sparse sources whose union outgrows the sparse limit.
    p.check(&["CONFIG", "SET", "hll-sparse-max-bytes", "400"]);
    add_range(&mut p, "c", "w", 1, 150);
    p.check(&["PFMERGE", "m3", "a", "c"]);
    p.check(&["PFDEBUG", "ENCODING", "m3"]);
    check_strings(&mut p, &["m3"]);
    p.check(&["PFMERGE", "m4", "c"]);
    check_strings(&mut p, &["m4"]);
    p.check(&["SET", "str", "plain"]);
    p.check(&["PFMERGE", "m5", "a", "str"]);
    p.check(&["EXISTS", "m5"]);
    p.check(&["PFMERGE", "str", "a"]);
    p.check(&["RPUSH", "l", "x"]);
    p.check(&["PFMERGE", "l", "a"]);
    p.check(&["PFMERGE", "m6", "l"]);
    p.check(&["EXISTS", "m6"]);
}

#[test]
fn pfdebug_subcommands() {
    let mut p = Pair::new();
    add_range(&mut p, "h", "x", 1, 30);
    p.check(&["PFDEBUG", "DECODE", "h"]);
    p.check(&["PFDEBUG", "encoding", "h"]);
    p.check(&["PFDEBUG", "GETREG", "h"]);
    // GETREG converted it.
    p.check(&["PFDEBUG", "ENCODING", "h"]);
    p.check(&["PFDEBUG", "DECODE", "h"]);
    check_strings(&mut p, &["h"]);
    p.check(&["PFDEBUG", "TODENSE", "h"]);
    add_range(&mut p, "h2", "x", 1, 3);
    p.check(&["PFDEBUG", "decode", "h2"]);
    p.check(&["PFDEBUG", "ToDense", "h2"]);
    p.check(&["PFDEBUG", "TODENSE", "h2"]);
    check_strings(&mut p, &["h2"]);
    p.check(&["PFCOUNT", "h2"]);
    p.check(&["PFDEBUG", "GETREG", "h2"]);
    p.check(&["PFDEBUG", "nosuch", "h2"]);
    p.check_bytes(&[b"PFDEBUG", b"getreg\x00x", b"h2"]);
    p.check_bytes(&[b"PFDEBUG", b"bad\r\nname", b"h2"]);
    p.check(&["PFDEBUG", "nosuch", "missing"]);
    p.check(&["PFDEBUG", "GETREG", "missing"]);
    p.check(&["PFDEBUG", "GETREG"]);
    p.check(&["PFDEBUG", "GETREG", "h2", "extra"]);
    p.check(&["SET", "s", "plain string"]);
    p.check(&["PFDEBUG", "GETREG", "s"]);
    p.check(&["PFDEBUG", "nosuch", "s"]);
    p.check(&["SADD", "set", "a"]);
    p.check(&["PFDEBUG", "ENCODING", "set"]);
    p.check(&["PFADD", "empty"]);
    p.check(&["PFDEBUG", "DECODE", "empty"]);
}

/// Damaged strings: every command's error, and what the string holds
/// after it.
#[test]
fn corrupted_hyperloglogs() {
    let mut p = Pair::new();
    add_range(&mut p, "good", "x", 1, 20);
    p.check(&["PFADD", "good", "y"]);
    let sparse = bulk_payload(&p.check(&["GET", "good"]));
    add_range(&mut p, "gooddense", "x", 1, 5000);
    let dense = bulk_payload(&p.check(&["GET", "gooddense"]));
    assert_eq!(dense.len(), 16 + 12288);

    let mut cases: Vec<(&str, Vec<u8>)> = Vec::new();
    // Sparse: one opcode cut off, an extra ZERO, an extra VAL after the
    // registers, an XZERO cut in half, nothing but the header.
    cases.push(("cut", sparse[..sparse.len() - 1].to_vec()));
    let mut extra_zero = sparse.clone();
    extra_zero.push(0x00);
    cases.push(("extrazero", extra_zero));
    let mut extra_val = sparse.clone();
    extra_val.push(0x80);
    cases.push(("extraval", extra_val));
    let mut half_xzero = sparse.clone();
    let last = half_xzero.len() - 1;
    half_xzero.truncate(last);
    cases.push(("halfxzero", half_xzero));
    cases.push(("headeronly", sparse[..16].to_vec()));
    let mut overflow = sparse[..16].to_vec();
    overflow.extend_from_slice(&[0x7f, 0xff, 0x7f, 0xff]);
    cases.push(("overflow", overflow));
    // Header damage.
    let mut bad_magic = sparse.clone();
    bad_magic[0] = b'h';
    cases.push(("badmagic", bad_magic));
    let mut bad_encoding = sparse.clone();
    bad_encoding[4] = 2;
    cases.push(("badencoding", bad_encoding));
    let mut sparse_as_dense = sparse.clone();
    sparse_as_dense[4] = 0;
    cases.push(("sparseasdense", sparse_as_dense));
    cases.push(("denseshort", dense[..dense.len() - 1].to_vec()));
    let mut dense_long = dense.clone();
    dense_long.push(0);
    cases.push(("denselong", dense_long));
    cases.push(("tooshort", b"HYLL\x01\x00\x00".to_vec()));
    // Dense registers beyond what a hash can give, a valid cached value
    // planted by hand, a stale one on a sparse string.
    let mut high_registers = dense.clone();
    for b in &mut high_registers[16..2000] {
        *b = 0xff;
    }
    high_registers[15] |= 0x80;
    cases.push(("highregs", high_registers));
    let mut planted = sparse.clone();
    planted[8..16].copy_from_slice(&42u64.to_le_bytes());
    cases.push(("planted", planted));
    let mut stale_sparse = dense.clone();
    stale_sparse[4] = 1;
    stale_sparse[15] |= 0x80;
    cases.push(("denseassparse", stale_sparse));

    for (name, value) in &cases {
        set_both(&mut p, name, value);
        p.check(&["PFCOUNT", name]);
        p.check(&["GET", name]);
        p.check(&["PFCOUNT", name, "good"]);
        p.check(&["PFCOUNT", "good", name]);
        p.check(&["PFMERGE", "dest", name]);
        p.check(&["GET", "dest"]);
        p.check(&["PFMERGE", name, "good"]);
        p.check(&["GET", name]);
        set_both(&mut p, name, value);
        p.check(&["PFADD", name, "a", "b", "c", "d", "e"]);
        p.check(&["GET", name]);
        set_both(&mut p, name, value);
        for sub in ["ENCODING", "DECODE", "TODENSE", "GETREG"] {
            p.check(&["PFDEBUG", sub, name]);
        }
        p.check(&["GET", name]);
        p.check(&["DEL", "dest"]);
    }
}

/// An HLL written by Redis counts the same in hozon after DUMP/RESTORE,
/// and the reverse.
#[test]
fn dump_restore_between_servers() {
    let mut p = Pair::new();
    add_range(&mut p, "sparse", "x", 1, 200);
    add_range(&mut p, "dense", "x", 1, 30_000);
    p.check(&["PFCOUNT", "dense"]);
    for key in ["sparse", "dense"] {
        let from_redis = bulk_payload(&p.redis(&["DUMP", key]));
        let from_hozon = bulk_payload(&p.hozon(&["DUMP", key]));
        let copy = format!("{key}-copy");
        let r =
            p.r.call(&[b"RESTORE", copy.as_bytes(), b"0", from_hozon.as_slice()]);
        let h =
            p.h.call(&[b"RESTORE", copy.as_bytes(), b"0", from_redis.as_slice()]);
        assert_eq!((show(&r), show(&h)), (show(b"+OK\r\n"), show(b"+OK\r\n")));
        p.check(&["GET", &copy]);
        p.check(&["PFCOUNT", &copy]);
        p.check(&["PFADD", &copy, "one", "more"]);
        p.check(&["PFCOUNT", &copy]);
        p.check(&["PFCOUNT", &copy, key]);
        p.check(&["GET", &copy]);
    }
}

#[test]
fn pfselftest_passes() {
    let mut p = Pair::new();
    p.check(&["PFSELFTEST"]);
    p.check(&["PFSELFTEST", "extra"]);
}

/// A PFCOUNT that refreshes the cached cardinality modifies the key
/// (WATCH fires, the change counts); one that reads the cache does not;
/// PFDEBUG TODENSE changes the string without signalling the key.
#[test]
fn watch_and_changes_counted() {
    let mut p = Pair::new();
    let changes = |p: &mut Pair| {
        let field = |reply: Vec<u8>| {
            String::from_utf8(bulk_payload(&reply))
                .unwrap()
                .lines()
                .find_map(|l| {
                    l.strip_prefix("rdb_changes_since_last_save:")
                        .map(String::from)
                })
                .unwrap()
        };
        let (r, h) = p.both(&["INFO", "persistence"]);
        (field(r), field(h))
    };
    p.check(&["PFADD", "h", "a", "b", "c"]);
    let before = changes(&mut p);
    p.script(
        "WATCH h
         PFCOUNT h
         MULTI
         PING
         EXEC",
    );
    let after = changes(&mut p);
    assert_eq!(
        after.0.parse::<u64>().unwrap(),
        before.0.parse::<u64>().unwrap() + 1
    );
    assert_eq!(
        after.1.parse::<u64>().unwrap(),
        before.1.parse::<u64>().unwrap() + 1
    );
    p.script(
        "WATCH h
         PFCOUNT h
         MULTI
         PING
         EXEC
         WATCH h
         PFDEBUG TODENSE h
         MULTI
         PING
         EXEC
         WATCH h
         PFADD h a
         MULTI
         PING
         EXEC
         WATCH h
         PFADD h newone
         MULTI
         PING
         EXEC
         WATCH m
         PFMERGE m h
         MULTI
         PING
         EXEC
         MULTI
         PFADD t x
         PFCOUNT t
         PFCOUNT t
         EXEC
         GET t",
    );
    let end = changes(&mut p);
    assert_eq!(end.0, end.1);
}

/// Keyspace hits and misses: PFCOUNT and PFMERGE's sources are read
/// lookups (counted), PFADD, PFMERGE's destination and PFDEBUG are write
/// lookups (not counted).
#[test]
fn keyspace_hits_and_misses_are_counted_as_redis_counts_them() {
    let mut p = Pair::new();
    p.script(
        "PFADD h a b
         PFADD h c
         PFADD other x
         PFCOUNT h
         PFCOUNT h
         PFCOUNT missing
         PFCOUNT h other missing
         PFMERGE dest h missing
         PFMERGE dest
         PFDEBUG ENCODING h
         PFDEBUG ENCODING missing",
    );
    let stats = |reply: Vec<u8>| {
        String::from_utf8(bulk_payload(&reply))
            .unwrap()
            .lines()
            .filter(|l| l.starts_with("keyspace_hits:") || l.starts_with("keyspace_misses:"))
            .map(String::from)
            .collect::<Vec<_>>()
    };
    let (r, h) = p.both(&["INFO", "stats"]);
    let (r, h) = (stats(r), stats(h));
    assert_eq!(r.len(), 2, "{r:?}");
    assert_eq!(r, h);
}

/// A seeded random mix of PFADD, PFMERGE, PFCOUNT and PFDEBUG TODENSE over
/// a few keys at several sparse limits, every reply and every string
/// compared: the in-place sparse edits (splits, merges of adjacent VALs,
/// conversions) must leave Redis's bytes.
#[test]
fn random_operations_leave_redis_bytes() {
    let mut p = Pair::new();
    let mut state = crate::harness::seed_or(0x5eed_4411);
    let mut next = move |bound: u64| {
        state = state
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1_442_695_040_888_963_407);
        (state >> 33) % bound
    };
    let keys = ["k0", "k1", "k2", "k3"];
    for round in 0..1500 {
        if round % 300 == 0 {
            let limit = ["40", "120", "400", "3000"][next(4) as usize];
            p.check(&["CONFIG", "SET", "hll-sparse-max-bytes", limit]);
        }
        let key = keys[next(4) as usize];
        match next(10) {
            0..=5 => {
                let n = 1 + next(12);
                let elements: Vec<String> = (0..n).map(|_| format!("e{}", next(3000))).collect();
                let mut args = vec!["PFADD", key];
                args.extend(elements.iter().map(String::as_str));
                p.check(&args);
            }
            6 => {
                let other = keys[next(4) as usize];
                p.check(&["PFMERGE", key, other]);
            }
            7 => {
                let other = keys[next(4) as usize];
                p.check(&["PFCOUNT", key, other]);
            }
            8 => {
                p.check(&["PFCOUNT", key]);
            }
            _ => {
                if next(4) == 0 {
                    p.check(&["PFDEBUG", "TODENSE", key]);
                } else {
                    p.check(&["DEL", key]);
                }
            }
        }
        p.check(&["GET", key]);
    }
}
