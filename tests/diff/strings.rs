//! Differential tests: strings (GET … LCS), RESP2 and RESP3.
//!
//! Every reply is compared byte for byte with Redis. TTLs set by relative
//! options are compared with `TTL` (whole seconds, stable within a test)
//! or with a tolerance on `PTTL`; expiry in the past uses absolute times
//! (`PXAT 1`) so no test depends on the clock.

use quickcheck::{Arbitrary, Gen, TestResult};

use crate::harness::{
    array_elements, check_both_protocols, compare_sequence, identical, quickcheck_ops, show,
    with_thread_pair, Pair,
};

/// Parses an integer reply (`:123\r\n`).
fn int_reply(reply: &[u8]) -> i64 {
    let text = std::str::from_utf8(reply).expect("integer replies are ASCII");
    text.trim_start_matches(':')
        .trim_end()
        .parse()
        .unwrap_or_else(|_| panic!("not an integer reply: {}", show(reply)))
}

/// Asserts both servers report a PTTL within `tolerance_ms` of each other
/// (the two commands run a few ms apart).
#[track_caller]
fn check_pttl_close(p: &mut Pair, key: &str, tolerance_ms: i64) {
    let (r, h) = p.both(&["PTTL", key]);
    let (r, h) = (int_reply(&r), int_reply(&h));
    assert!(r >= 0 && h >= 0, "PTTL {key}: redis {r}, hozon {h}");
    assert!(
        (r - h).abs() <= tolerance_ms,
        "PTTL {key}: redis {r}, hozon {h}"
    );
}

const GET_SET_BASICS: &str = r#"
GET missing
SET k v
GET k
SET k ""
GET k
STRLEN k
SET k "hello world"
GET k
SET bin "a\x00b\r\nc"
GET bin
STRLEN bin
SET n 123
GET n
SET k v extra
SET
GET
GET a b
LPUSH list x
GET list
SET list v
GET list
TYPE list
"#;

#[test]
fn get_and_set_basics() {
    check_both_protocols(GET_SET_BASICS);
}

const SET_OPTIONS: &str = r#"
SET k v NX
SET k w NX
GET k
SET k w XX
GET k
SET missing w XX
EXISTS missing
SET k v NX XX
SET k v XX NX
SET k v nx nX
SET k v XX xx
SET k v GET
SET k w get GET
SET fresh v GET
SET k v2 NX GET
SET fresh2 v NX GET
SET missing2 v XX GET
EXISTS missing2
SET k v3 XX GET
GET k
SET k v KEEPTTL
SET k v KEEPTTL KEEPTTL
SET k v KEEPTTL EX 10
SET k v EX 10 KEEPTTL
SET k v EX 10 PX 100
SET k v PX 100 EX 10
SET k v EX 10 EXAT 99999999999
SET k v EXAT 99999999999 PXAT 99999999999000
SET k v PXAT 99999999999000 EX 10
SET k v EX
SET k v PX
SET k v EXAT
SET k v PXAT
SET k v EX 10 EX
SET k v GET EX
SET k v BOGUS
SET k v NX BOGUS
SET k v EX abc
SET k v EX 1.5
SET k v EX " 10"
SET k v EX 0
SET k v EX -1
SET k v PX 0
SET k v PX -100
SET k v EXAT 0
SET k v PXAT -5
SET k v EX 9223372036854775807
SET k v EX 9223372036854776
SET k v EX 9223372036854775
SET k v PX 9223372036854775807
SET k v EXAT 9223372036854776
SET k v EXAT 9223372036854775
SET k v PXAT 9223372036854775807
GET k
SET k v EX 9223372036854775808
SET k v EX 100
TTL k
SET k v EX 100 EX 200
TTL k
SET k w KEEPTTL
TTL k
GET k
SET k w
TTL k
SET k v PX 100000 NX
SET k v PX 100000 XX
TTL k
SET k v EXAT 99999999999
TTL k
SET k v PXAT 99999999999999
TTL k
SET k v EXAT 1
GET k
EXISTS k
SET k v PXAT 1 GET
SET k old
SET k new EX 100 GET
GET k
TTL k
SET k v XX GET KEEPTTL
TTL k
LPUSH list x
SET list v GET
SET list v NX GET
SET list v NX
SET list v XX
TYPE list
SET list v GET EX 0
SET list v GET EX abc
SET k "GET" GET
GET k
SET k v "KEEPTTL\x00junk"
SET k v "nx\x00"
GET k
"#;

#[test]
fn set_options_combinations_and_errors() {
    check_both_protocols(SET_OPTIONS);
}

#[test]
fn set_relative_expiry_matches_in_milliseconds() {
    let mut p = Pair::new();
    p.check(&["SET", "a", "v", "PX", "50000"]);
    check_pttl_close(&mut p, "a", 50);
    p.check(&["SET", "b", "v", "EX", "50"]);
    check_pttl_close(&mut p, "b", 50);
    p.check(&["SETEX", "c", "50", "v"]);
    check_pttl_close(&mut p, "c", 50);
    p.check(&["PSETEX", "d", "50000", "v"]);
    check_pttl_close(&mut p, "d", 50);
    p.check(&["GETEX", "d", "PX", "70000"]);
    check_pttl_close(&mut p, "d", 50);
    p.check(&["INCR", "counter"]);
    p.check(&["PEXPIRE", "counter", "60000"]);
    p.check(&["INCRBY", "counter", "5"]);
    check_pttl_close(&mut p, "counter", 50);
}

const SETNX_SETEX_GETSET: &str = r#"
SETNX k v
SETNX k w
GET k
SETNX
SETNX k
SETNX k v extra
LPUSH list x
SETNX list v
SETEX k 100 v
TTL k
GET k
SETEX k 0 v
SETEX k -10 v
SETEX k abc v
SETEX k 9223372036854775807 v
SETEX k 9223372036854775 v
SETEX k 10
SETEX list 100 v
TYPE list
GET k
PSETEX k 100000 w
TTL k
GET k
PSETEX k 0 w
PSETEX k -1 w
PSETEX k 1.5 w
PSETEX k 9223372036854775807 w
PSETEX k 100
GETSET k x
TTL k
GETSET k y
GETSET fresh z
GET fresh
GETSET list v
TYPE list
GETSET k
SET e v PXAT 1
SETNX e fresh
GET e
"#;

#[test]
fn setnx_setex_psetex_getset() {
    check_both_protocols(SETNX_SETEX_GETSET);
}

const GETDEL_GETEX: &str = r#"
SET k v
GETDEL k
GETDEL k
EXISTS k
GETDEL missing
LPUSH list x
GETDEL list
TYPE list
GETDEL
GETDEL a b
SET k v
GETEX k
GETEX missing
GETEX missing EX 10
GETEX missing EX 0
GETEX missing EX abc
GETEX missing BOGUS
GETEX list
GETEX list EX 10
GETEX list EX 0
GETEX list BOGUS
GETEX k EX 100
TTL k
GETEX k PERSIST
TTL k
GETEX k PERSIST
GETEX k PX 100000
TTL k
GETEX k EXAT 99999999999
TTL k
GETEX k PXAT 99999999999999
TTL k
GETEX k EX 0
GETEX k EX -1
GETEX k PX 0
GETEX k EXAT 0
GETEX k PXAT -1
GETEX k EX abc
GETEX k EX 9223372036854775807
GETEX k PX 9223372036854775807
GETEX k EXAT 9223372036854775807
GETEX k EX
GETEX k PERSIST EX 10
GETEX k EX 10 PERSIST
GETEX k EX 10 PX 100
GETEX k NX
GETEX k XX
GETEX k GET
GETEX k KEEPTTL
GETEX k PERSIST PERSIST
GETEX k EX 10 EX 20
TTL k
GETEX k EXAT 1
EXISTS k
SET k v
GETEX k PXAT 1
GET k
GETEX
"#;

#[test]
fn getdel_and_getex() {
    check_both_protocols(GETDEL_GETEX);
}

const MULTI_KEY: &str = r#"
MSET a 1 b 2 c 3
MGET a b c missing
MGET a
MGET
MSET a
MSET a 1 b
MSET
MSET a 10 a 20
GET a
LPUSH list x
MGET a list b
MSET list v
TYPE list
SET t v EX 100
MSET t w
TTL t
MSETNX x 1 y 2
MGET x y
MSETNX x 5 z 6
MGET x z
MSETNX z 1 z 2
GET z
MSETNX q
MSETNX q 1 r
MSETNX list 1
MSETNX
SET e v PXAT 1
MSETNX e 1 f 2
MGET e f
"#;

#[test]
fn mget_mset_msetnx() {
    check_both_protocols(MULTI_KEY);
}

const COUNTERS: &str = r#"
INCR n
INCR n
DECR n
INCRBY n 10
DECRBY n 3
INCRBY n -20
DECRBY n -5
GET n
DECR fresh
INCRBY fresh2 -7
DECRBY fresh3 7
INCR
INCR a b
INCRBY n
INCRBY n 1 2
SET s abc
INCR s
DECR s
INCRBY s 1
SET s " 1"
INCR s
SET s "1 "
INCR s
SET s +1
INCR s
SET s 01
INCR s
SET s -0
INCR s
SET s 1.0
INCR s
SET s ""
INCR s
SET s 9223372036854775807
INCR s
INCRBY s 0
DECR s
GET s
SET s -9223372036854775808
DECR s
INCR s
SET s 9223372036854775808
INCR s
SET s -9223372036854775809
DECR s
INCRBY n abc
INCRBY n 1.5
INCRBY n 9223372036854775808
INCRBY n " 1"
DECRBY n -9223372036854775808
DECRBY n 9223372036854775807
DECRBY n 9223372036854775807
DECRBY n abc
SET m 100
INCRBY m 9223372036854775807
DECRBY m -9223372036854775807
INCRBY m -9223372036854775807
INCRBY m -9223372036854775807
LPUSH list x
INCR list
DECR list
INCRBY list 1
INCRBY list abc
DECRBY list 1
SET e 5 PXAT 1
INCR e
SET n 41 EX 100
INCR n
TTL n
"#;

#[test]
fn incr_decr_incrby_decrby() {
    check_both_protocols(COUNTERS);
}

const INCRBYFLOAT: &str = r#"
INCRBYFLOAT f 0.1
INCRBYFLOAT f 0.2
INCRBYFLOAT f 10.5
INCRBYFLOAT f -10.8
INCRBYFLOAT f 1e30
INCRBYFLOAT f -1e30
INCRBYFLOAT f 1.5e-10
INCRBYFLOAT f 3
GET f
SET g 10.50
INCRBYFLOAT g 0.1
SET g 5.0e3
INCRBYFLOAT g 2.0e2
SET g 3
INCRBYFLOAT g 0
INCRBYFLOAT g -3
INCRBYFLOAT g -1e-20
INCRBYFLOAT h 0.000003814697265625
INCRBYFLOAT h 0.000000000000000005
INCRBYFLOAT h 0.000000000000000015
INCRBYFLOAT h -12345678901234567890.123456789
INCRBYFLOAT big 1e400
INCRBYFLOAT big -1e400
INCRBYFLOAT big 1e4932
INCRBYFLOAT big 1e4932
INCRBYFLOAT huge 1.2e4932
INCRBYFLOAT tiny 1e-5000
INCRBYFLOAT tiny 0x1p-16445
INCRBYFLOAT tiny 3.6e-4951
INCRBYFLOAT hex 0x1.8p1
INCRBYFLOAT hex 0X10
INCRBYFLOAT hex 0x
INCRBYFLOAT forms .5
INCRBYFLOAT forms 5.
INCRBYFLOAT forms -.5e1
INCRBYFLOAT forms +3
INCRBYFLOAT forms 1E2
INCRBYFLOAT forms 1e+2
INCRBYFLOAT forms 1e-2
INCRBYFLOAT bad inf
INCRBYFLOAT bad -inf
INCRBYFLOAT bad +Infinity
INCRBYFLOAT bad nan
INCRBYFLOAT bad NaN
INCRBYFLOAT bad " 1"
INCRBYFLOAT bad "1 "
INCRBYFLOAT bad ""
INCRBYFLOAT bad 1e
INCRBYFLOAT bad 1e+
INCRBYFLOAT bad .
INCRBYFLOAT bad -
INCRBYFLOAT bad abc
INCRBYFLOAT bad 1.2.3
INCRBYFLOAT bad "1\x002"
EXISTS bad
SET s abc
INCRBYFLOAT s 1
SET s " 1"
INCRBYFLOAT s 1
SET s inf
INCRBYFLOAT s 1
INCRBYFLOAT s -inf
SET s 1e5000
INCRBYFLOAT s 1
LPUSH list x
INCRBYFLOAT list 1
INCRBYFLOAT list abc
INCRBYFLOAT
INCRBYFLOAT f
INCRBYFLOAT f 1 2
SET t 1 EX 100
INCRBYFLOAT t 1.5
TTL t
GET t
SET e 1 PXAT 1
INCRBYFLOAT e 2
"#;

#[test]
fn incrbyfloat_values_and_errors() {
    check_both_protocols(INCRBYFLOAT);
}

#[test]
fn incrbyfloat_long_double_rounding() {
    // Sums whose f64 and long double results print differently, and long
    // chains where rounding errors accumulate: every step is compared.
    let mut p = Pair::new();
    let steps = [
        "0.1", "0.2", "0.3", "-0.7", "1.1", "2.2", "3.3", "1e-17", "1e17", "-1e17", "0.05",
    ];
    for round in 0..30 {
        for (i, step) in steps.iter().enumerate() {
            let key = format!("f{}", (round + i) % 3);
            p.check(&["INCRBYFLOAT", &key, step]);
        }
    }
    let long_input = format!("0.{}1", "0".repeat(4000));
    p.check(&["INCRBYFLOAT", "long", &long_input]);
    let too_long = "1".repeat(5120);
    p.check(&["INCRBYFLOAT", "long", &too_long]);
    let almost_too_long = format!("1.{}", "0".repeat(5117));
    p.check(&["INCRBYFLOAT", "long", &almost_too_long]);
}

const APPEND_STRLEN: &str = r#"
APPEND k hello
APPEND k " world"
GET k
STRLEN k
APPEND k ""
APPEND empty ""
EXISTS empty
GET empty
STRLEN empty
STRLEN missing
SET n 10
APPEND n 5
INCR n
GET n
APPEND bin "\x00\xff"
STRLEN bin
LPUSH list x
APPEND list x
STRLEN list
APPEND
APPEND k
APPEND k a b
STRLEN
STRLEN a b
SET t v EX 100
APPEND t w
TTL t
SET e v PXAT 1
APPEND e w
GET e
"#;

#[test]
fn append_and_strlen() {
    check_both_protocols(APPEND_STRLEN);
}

const RANGES: &str = r#"
SET k "This is a string"
GETRANGE k 0 3
GETRANGE k -3 -1
GETRANGE k 0 -1
GETRANGE k 10 100
GETRANGE k 100 200
GETRANGE k -100 -50
GETRANGE k -1 -3
GETRANGE k 5 3
GETRANGE k -5 5
GETRANGE k 0 0
GETRANGE k -1 -1
GETRANGE k -100 2
GETRANGE k 2 -100
GETRANGE k 9223372036854775807 9223372036854775807
GETRANGE k -9223372036854775808 9223372036854775807
GETRANGE k -9223372036854775808 -9223372036854775808
SUBSTR k 0 3
SUBSTR k -3 -1
GETRANGE missing 0 -1
GETRANGE missing a b
GETRANGE k a 1
GETRANGE k 1 b
GETRANGE k 1.5 2
SET empty ""
GETRANGE empty 0 -1
GETRANGE empty 0 0
GETRANGE empty -1 0
SET n 12345
GETRANGE n 1 2
LPUSH list x
GETRANGE list 0 1
GETRANGE list a 1
SUBSTR list 0 1
GETRANGE k 0
GETRANGE k 0 1 2
SUBSTR k 0
SETRANGE k 0 That
GET k
SETRANGE k 16 " here"
GET k
SETRANGE k 25 x
GET k
STRLEN k
SETRANGE k 0 ""
SETRANGE k 1000 ""
SETRANGE fresh 0 ""
EXISTS fresh
SETRANGE fresh 3 abc
GET fresh
SETRANGE fresh2 0 abc
GET fresh2
SETRANGE k -1 x
SETRANGE k -1 ""
SETRANGE missing -1 ""
SETRANGE k abc x
SETRANGE k 1.5 x
SETRANGE k 536870911 ""
SETRANGE k 536870912 x
SETRANGE k 536870911 xx
SETRANGE k 9223372036854775807 x
SETRANGE fresh3 536870912 x
EXISTS fresh3
SETRANGE fresh3 9223372036854775807 ab
SETRANGE n 1 X
GET n
INCR n
SETRANGE list 0 x
SETRANGE list 0 ""
SETRANGE list -1 x
SETRANGE list abc x
SETRANGE k 0
SETRANGE k 0 a b
SET t v EX 100
SETRANGE t 0 w
TTL t
"#;

#[test]
fn getrange_substr_setrange() {
    check_both_protocols(RANGES);
}

const LCS: &str = r#"
MSET key1 ohmytext key2 mynewtext
LCS key1 key2
LCS key1 key2 LEN
LCS key1 key2 IDX
LCS key1 key2 IDX MINMATCHLEN 4
LCS key1 key2 IDX MINMATCHLEN 4 WITHMATCHLEN
LCS key1 key2 IDX WITHMATCHLEN
LCS key1 key2 IDX MINMATCHLEN -5
LCS key1 key2 IDX MINMATCHLEN 0 WITHMATCHLEN
LCS key1 key2 LEN IDX
LCS key1 key2 IDX LEN
LCS key1 key2 LEN WITHMATCHLEN
LCS key1 key2 LEN MINMATCHLEN 2
LCS key1 key2 MINMATCHLEN
LCS key1 key2 MINMATCHLEN abc
LCS key1 key2 BOGUS
LCS key1 key2 idx withmatchlen minmatchlen 2
LCS key1 missing
LCS missing key1 IDX
LCS missing missing2 IDX WITHMATCHLEN
LCS missing missing2 LEN
MSET a ABCBDAB b BDCABA
LCS a b
LCS b a
LCS a b IDX WITHMATCHLEN
LCS b a IDX WITHMATCHLEN
MSET x aaaa y aa
LCS x y IDX
LCS y x IDX
MSET p "GTTCCTAATA" q "CGATAATTGAGA"
LCS p q
LCS p q IDX WITHMATCHLEN
MSET u "abc" v "xyz"
LCS u v
LCS u v IDX
LPUSH list x
LCS list key1
LCS key1 list
LCS key1 list BOGUS
LCS list key1 LEN IDX
LCS key1
LCS
SET n 12345
SET m 2a4
LCS n m IDX WITHMATCHLEN
"#;

#[test]
fn lcs_variants_and_errors() {
    check_both_protocols(LCS);
}

#[test]
fn lcs_of_longer_random_strings() {
    let mut p = Pair::new();
    let mut g = Gen::from_size_and_seed(60, crate::harness::test_seed());
    for round in 0..40 {
        let a: String = (0..u8::arbitrary(&mut g) % 60)
            .map(|_| *g.choose(&['a', 'b', 'c', 'd']).unwrap_or(&'a'))
            .collect();
        let b: String = (0..u8::arbitrary(&mut g) % 60)
            .map(|_| *g.choose(&['a', 'b', 'c', 'd']).unwrap_or(&'a'))
            .collect();
        p.check(&["MSET", "a", &a, "b", &b]);
        p.check(&["LCS", "a", "b"]);
        p.check(&["LCS", "a", "b", "LEN"]);
        let min = (round % 4).to_string();
        p.check(&["LCS", "a", "b", "IDX", "MINMATCHLEN", &min, "WITHMATCHLEN"]);
    }
}

#[test]
fn object_encoding_of_set_values() {
    // Values written by SET/MSET/INCR take the encoding their bytes imply.
    let script = r#"
SET a 12345
OBJECT ENCODING a
SET b -9223372036854775808
OBJECT ENCODING b
SET c 9223372036854775808
OBJECT ENCODING c
SET d 01
OBJECT ENCODING d
SET e abc
OBJECT ENCODING e
SET f 12345678901234567890123456789012345678901234
OBJECT ENCODING f
SET g 123456789012345678901234567890123456789012345
OBJECT ENCODING g
INCR counter
OBJECT ENCODING counter
MSET h 5 i xyz
OBJECT ENCODING h
OBJECT ENCODING i
GETSET a 77
OBJECT ENCODING a
SETEX j 100 42
OBJECT ENCODING j
"#;
    check_both_protocols(script);
}

#[test]
fn wrong_arity_for_every_string_command() {
    let mut p = Pair::new();
    for (name, good_argc) in [
        ("GET", 2),
        ("SET", 3),
        ("SETNX", 3),
        ("SETEX", 4),
        ("PSETEX", 4),
        ("GETSET", 3),
        ("GETDEL", 2),
        ("GETEX", 2),
        ("MGET", 2),
        ("MSET", 3),
        ("MSETNX", 3),
        ("INCR", 2),
        ("DECR", 2),
        ("INCRBY", 3),
        ("DECRBY", 3),
        ("INCRBYFLOAT", 3),
        ("APPEND", 3),
        ("STRLEN", 2),
        ("GETRANGE", 4),
        ("SUBSTR", 4),
        ("SETRANGE", 4),
        ("LCS", 3),
    ] {
        for argc in 1..good_argc + 2 {
            let mut args = vec![name.to_string()];
            args.extend((1..argc).map(|i| format!("a{i}")));
            let refs: Vec<&str> = args.iter().map(String::as_str).collect();
            p.check(&refs);
        }
        p.check(&["FLUSHALL"]);
    }
    p.check(&["get", "k"]);
    p.check(&["gEt", "k"]);
}

#[test]
fn command_info_of_string_commands() {
    let mut p = Pair::new();
    for name in [
        "get",
        "set",
        "setnx",
        "setex",
        "psetex",
        "getset",
        "getdel",
        "getex",
        "mget",
        "mset",
        "msetnx",
        "incr",
        "decr",
        "incrby",
        "decrby",
        "incrbyfloat",
        "append",
        "strlen",
        "getrange",
        "substr",
        "setrange",
        "lcs",
    ] {
        let (r, h) = p.both(&["COMMAND", "INFO", name]);
        // Name, arity, flags, first key, last key, step: the fields this
        // family's table defines (ACL categories, tips and key specs are
        // the command layer's).
        let head = |reply: &[u8]| -> Vec<String> {
            let entries = array_elements(reply);
            assert_eq!(entries.len(), 1, "COMMAND INFO {name}: {}", show(reply));
            array_elements(&entries[0])
                .iter()
                .take(6)
                .map(|e| show(e))
                .collect()
        };
        assert_eq!(head(&r), head(&h), "COMMAND INFO {name}");
    }
}

// ---------------------------------------------------------------------------
// Random sequences.

/// A small key space so commands meet each other's keys often.
const KEYS: &[&str] = &["k0", "k1", "k2", "k3"];

/// Values that exercise integers, floats, text, empty and binary strings.
const VALUES: &[&str] = &[
    "0",
    "1",
    "-1",
    "42",
    "9223372036854775807",
    "-9223372036854775808",
    "1.5",
    "0.1",
    "-2.25",
    "1e3",
    "abc",
    "",
    " 7",
    "x\x00y",
    "10",
    "007",
    "hello world",
];

/// Expire options that never depend on the clock: far future or past.
const EXPIRES: &[&[&str]] = &[
    &[],
    &["EX", "1000"],
    &["PX", "5000000"],
    &["EXAT", "99999999999"],
    &["PXAT", "99999999999000"],
    &["PXAT", "1"],
    &["EX", "0"],
    &["KEEPTTL"],
];

/// One random command against the string family (plus a few commands of
/// other families to meet wrong types and TTLs).
#[derive(Debug, Clone)]
struct Op(Vec<String>);

impl Arbitrary for Op {
    fn arbitrary(g: &mut Gen) -> Op {
        let key = |g: &mut Gen| g.choose(KEYS).expect("KEYS is not empty").to_string();
        let value = |g: &mut Gen| g.choose(VALUES).expect("VALUES is not empty").to_string();
        let int = |g: &mut Gen| (i64::from(i8::arbitrary(g)) / 4).to_string();
        let mut args: Vec<String> = Vec::new();
        let pick = u8::arbitrary(g) % 27;
        match pick {
            0 => args.extend(["GET".into(), key(g)]),
            1 | 2 => {
                args.extend(["SET".into(), key(g), value(g)]);
                for _ in 0..u8::arbitrary(g) % 3 {
                    match u8::arbitrary(g) % 4 {
                        0 => args.push("NX".into()),
                        1 => args.push("XX".into()),
                        2 => args.push("GET".into()),
                        _ => args.extend(
                            g.choose(EXPIRES)
                                .expect("EXPIRES is not empty")
                                .iter()
                                .map(|s| s.to_string()),
                        ),
                    }
                }
            }
            3 => args.extend(["SETNX".into(), key(g), value(g)]),
            4 => args.extend([
                "SETEX".into(),
                key(g),
                g.choose(&["1000", "0", "-1", "x"])
                    .expect("non-empty")
                    .to_string(),
                value(g),
            ]),
            5 => args.extend([
                "PSETEX".into(),
                key(g),
                g.choose(&["1000000", "0", "x"])
                    .expect("non-empty")
                    .to_string(),
                value(g),
            ]),
            6 => args.extend(["GETSET".into(), key(g), value(g)]),
            7 => args.extend(["GETDEL".into(), key(g)]),
            8 => {
                args.extend(["GETEX".into(), key(g)]);
                match u8::arbitrary(g) % 3 {
                    0 => args.push("PERSIST".into()),
                    1 => args.extend(
                        g.choose(EXPIRES)
                            .expect("EXPIRES is not empty")
                            .iter()
                            .map(|s| s.to_string()),
                    ),
                    _ => {}
                }
            }
            9 => {
                args.push("MGET".into());
                for _ in 0..1 + u8::arbitrary(g) % 4 {
                    args.push(key(g));
                }
            }
            10 | 11 => {
                args.push(if pick == 10 { "MSET" } else { "MSETNX" }.into());
                for _ in 0..1 + u8::arbitrary(g) % 3 {
                    args.push(key(g));
                    args.push(value(g));
                }
            }
            12 | 13 => args.extend([if pick == 12 { "INCR" } else { "DECR" }.into(), key(g)]),
            14 => args.extend([
                "INCRBY".into(),
                key(g),
                g.choose(&["5", "-3", "9223372036854775807", "x", "1.5"])
                    .expect("non-empty")
                    .to_string(),
            ]),
            15 => args.extend([
                "DECRBY".into(),
                key(g),
                g.choose(&["5", "-3", "-9223372036854775808", "x"])
                    .expect("non-empty")
                    .to_string(),
            ]),
            16 => args.extend([
                "INCRBYFLOAT".into(),
                key(g),
                g.choose(&["0.1", "-1.5", "3", "1e3", "abc", "inf", "2.5e-3", "0.7"])
                    .expect("non-empty")
                    .to_string(),
            ]),
            17 => args.extend(["APPEND".into(), key(g), value(g)]),
            18 => args.extend(["STRLEN".into(), key(g)]),
            19 => args.extend([
                g.choose(&["GETRANGE", "SUBSTR"])
                    .expect("non-empty")
                    .to_string(),
                key(g),
                int(g),
                int(g),
            ]),
            20 => args.extend([
                "SETRANGE".into(),
                key(g),
                (u8::arbitrary(g) % 12).to_string(),
                value(g),
            ]),
            21 => {
                args.extend(["LCS".into(), key(g), key(g)]);
                match u8::arbitrary(g) % 4 {
                    0 => args.push("LEN".into()),
                    1 => args.extend(["IDX".into(), "WITHMATCHLEN".into()]),
                    2 => args.extend(["IDX".into(), "MINMATCHLEN".into(), "2".into()]),
                    _ => {}
                }
            }
            22 => args.extend(["RPUSH".into(), key(g), value(g)]),
            23 => args.extend(["TTL".into(), key(g)]),
            24 => args.extend(["DEL".into(), key(g)]),
            25 => args.extend(["EXISTS".into(), key(g)]),
            _ => args.extend(["TYPE".into(), key(g)]),
        }
        Op(args)
    }

    fn shrink(&self) -> Box<dyn Iterator<Item = Op>> {
        Box::new(std::iter::empty())
    }
}

/// Runs `ops` on both servers from an empty keyspace, comparing every
/// reply.
fn random_sequence(ops: Vec<Op>, resp3: bool) -> TestResult {
    let mut all = vec![vec!["FLUSHALL".to_string()]];
    all.extend(ops.into_iter().map(|op| op.0));
    with_thread_pair(resp3, |p| compare_sequence(p, &all, 1, identical))
}

#[test]
fn random_string_command_sequences_match_redis_resp2() {
    quickcheck_ops(40, 300, |ops: Vec<Op>| random_sequence(ops, false));
}

#[test]
fn random_string_command_sequences_match_redis_resp3() {
    quickcheck_ops(40, 200, |ops: Vec<Op>| random_sequence(ops, true));
}

/// OBJECT ENCODING of strings: `int` and `embstr` by value, `raw` past 44
/// bytes and after every command that changes a string in place (Redis's
/// `dbUnshareStringValue` or a raw object: APPEND, SETRANGE, SETBIT,
/// BITFIELD, BITOP, the PF commands), whatever its length; SET and the
/// counters make it `int`/`embstr` again.
#[test]
fn object_encoding_follows_in_place_changes() {
    let mut p = Pair::new();
    p.script(
        r#"
SET s 12
OBJECT ENCODING s
APPEND s 3
OBJECT ENCODING s
GET s
SET s abc
OBJECT ENCODING s
SETRANGE s 1 x
OBJECT ENCODING s
SETRANGE fresh 0 x
OBJECT ENCODING fresh
APPEND new1 abc
OBJECT ENCODING new1
APPEND new2 123
OBJECT ENCODING new2
SET s 12
INCR s
OBJECT ENCODING s
SET s 1.5
INCRBYFLOAT s 1
OBJECT ENCODING s
SETBIT b 7 1
OBJECT ENCODING b
SET b2 x
SETBIT b2 0 0
OBJECT ENCODING b2
BITFIELD bf SET u8 0 255
OBJECT ENCODING bf
SET x1 a
SET x2 b
BITOP OR dest x1 x2
OBJECT ENCODING dest
PFADD h a b c
OBJECT ENCODING h
SET h2copy 1
DEL h2copy
PFMERGE h3 h
OBJECT ENCODING h3
SET s aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa
OBJECT ENCODING s
APPEND s 1
SET s 7
OBJECT ENCODING s
GETRANGE s 0 0
OBJECT ENCODING s
"#,
    );
}
