//! Differential tests: bitmaps (SETBIT, GETBIT, BITCOUNT, BITPOS, BITOP,
//! BITFIELD, BITFIELD_RO), RESP2 and RESP3.
//!
//! Every reply is compared byte for byte with Redis; after writes the
//! values themselves are compared with GET, so a wrong bit cannot hide
//! behind a matching reply.

use quickcheck::{Arbitrary, Gen, TestResult};

use crate::harness::{
    check_both_protocols, compare_sequence, identical, quickcheck_ops, start_hozon,
    with_thread_pair, Conn, Pair,
};

const SETBIT_GETBIT: &str = r#"
SETBIT k 7 1
GET k
GETBIT k 7
GETBIT k 6
GETBIT k 100
SETBIT k 7 1
SETBIT k 7 0
GET k
SETBIT k 0 1
SETBIT k 23 1
GET k
STRLEN k
GETBIT missing 0
SETBIT k -1 1
SETBIT k abc 1
SETBIT k 1.5 1
SETBIT k "" 1
SETBIT k 4294967296 1
SETBIT k 0 2
SETBIT k 0 -1
SETBIT k 0 x
SETBIT k 0 ""
GETBIT k -1
GETBIT k x
GETBIT k 4294967296
GETBIT k 4294967295
SET n 12345
GETBIT n 2
GETBIT n 3
SETBIT n 6 1
GET n
SET s "\xff\x00"
SETBIT s 15 1
GET s
LPUSH list a
SETBIT list 0 1
GETBIT list 0
GETBIT list x
SETBIT list x 1
SETBIT fresh 100 0
GET fresh
STRLEN fresh
SETBIT big 800000 1
STRLEN big
GETBIT big 800000
BITCOUNT big
SET ttl v EX 1000
SETBIT ttl 1 0
TTL ttl
"#;

#[test]
fn setbit_and_getbit() {
    check_both_protocols(SETBIT_GETBIT);
}

const BITCOUNT: &str = r#"
BITCOUNT missing
BITCOUNT missing 0
BITCOUNT missing a b c
SET s foobar
BITCOUNT s
BITCOUNT s 0 0
BITCOUNT s 1 1
BITCOUNT s 1 -2
BITCOUNT s -3 -1
BITCOUNT s -1 -3
BITCOUNT s -100 100
BITCOUNT s 100 200
BITCOUNT s 3 1
BITCOUNT s 0 -1 BYTE
BITCOUNT s 5 30 BIT
BITCOUNT s 0 47 bit
BITCOUNT s 1 1 BIT
BITCOUNT s 0 0 BIT
BITCOUNT s 7 8 BIT
BITCOUNT s -5 -1 BIT
BITCOUNT s -1 -5 BIT
BITCOUNT s -1 -5 FOO
BITCOUNT s 0 1 FOO
BITCOUNT s 0
BITCOUNT s 0 1 BIT extra
BITCOUNT s x 1
BITCOUNT s 1 x
BITCOUNT s 0 9223372036854775807
BITCOUNT s -9223372036854775808 -1 BIT
BITCOUNT s 9223372036854775807 9223372036854775807 BIT
SET e ""
BITCOUNT e
BITCOUNT e 0 -1
BITCOUNT e 0 0 BIT
SET n 1234567
BITCOUNT n
BITCOUNT n 1 3 bit
SET long "0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
BITCOUNT long
BITCOUNT long 3 57
BITCOUNT long 13 400 BIT
HSET h f v
BITCOUNT h
BITCOUNT h 0 1 BIT
"#;

#[test]
fn bitcount_ranges_and_units() {
    check_both_protocols(BITCOUNT);
}

const BITPOS: &str = r#"
BITPOS missing 0
BITPOS missing 1
BITPOS missing 2
BITPOS missing x
BITPOS missing 1 0 0 0 0
SET ones "\xff\xff\xff"
BITPOS ones 0
BITPOS ones 1
BITPOS ones 0 0
BITPOS ones 0 0 -1
BITPOS ones 0 1
BITPOS ones 0 0 100
BITPOS ones 0 0 23 BIT
BITPOS ones 0 5 BIT
BITPOS ones 0 5 -1 BIT
BITPOS ones 0 5 6 BIT
BITPOS ones 1 5 6 BIT
SET zeros "\x00\x00\x00"
BITPOS zeros 1
BITPOS zeros 0
BITPOS zeros 1 1
BITPOS zeros 1 2 -1 BIT
BITPOS zeros 0 9 BIT
SET s "\x00\xff\xf0"
BITPOS s 0
BITPOS s 1
BITPOS s 1 0
BITPOS s 1 2
BITPOS s 0 1
BITPOS s 0 1 1
BITPOS s 0 1 2
BITPOS s 0 1 -1
BITPOS s 1 -1
BITPOS s 1 -2 -1
BITPOS s 0 -1 -3
BITPOS s 1 7 15 BIT
BITPOS s 1 9 15 BIT
BITPOS s 0 9 15 BIT
BITPOS s 0 9 19 BIT
BITPOS s 0 9 20 BIT
BITPOS s 0 8 8 BIT
BITPOS s 1 8 8 BIT
BITPOS s 1 3 3 BIT
BITPOS s 0 -3 -1 BIT
BITPOS s 1 -12 -5 BIT
BITPOS s 1 0 -1 byte
BITPOS s 1 0 -1 FOO
BITPOS s 1 0 -1 BIT extra
BITPOS s 1 x
BITPOS s 1 0 x
BITPOS s 1 0 1 x
BITPOS s 1 x 1 BIT
BITPOS s 1 100
BITPOS s 0 100
BITPOS s 1 -100 100 BIT
BITPOS s 1 9223372036854775807 -9223372036854775808 BIT
SET e ""
BITPOS e 0
BITPOS e 1
BITPOS e 0 0
BITPOS e 0 0 -1 BIT
SET n 10
BITPOS n 1
BITPOS n 0 1
SADD set a
BITPOS set 1
BITPOS set 1 x
BITPOS set 3
"#;

#[test]
fn bitpos_ranges_units_and_all_ones() {
    check_both_protocols(BITPOS);
}

const BITOP: &str = r#"
SET a "\xff\x0f\xaa"
SET b "\x0f"
SET c "hello world, a long string past the word-at-a-time path"
BITOP AND dest a b
GET dest
BITOP OR dest a b
GET dest
BITOP XOR dest a b c
GET dest
BITOP and dest c c c
GET dest
BITOP NOT dest a
GET dest
BITOP NOT dest c
GET dest
BITOP NOT dest a b
BITOP NOT dest
BITOP nand dest a
BITOP AND dest missing
EXISTS dest
SET dest x EX 100
BITOP OR dest a missing
TTL dest
GET dest
BITOP AND dest missing1 missing2
EXISTS dest
BITOP AND dest missing a
GET dest
BITOP XOR a a b
GET a
SET e ""
BITOP OR dest e
EXISTS dest
LPUSH list x
BITOP OR dest a list
BITOP OR list a
TYPE list
GET list
SET n 12
BITOP NOT dest n
GET dest
BITOP OR dest
"#;

#[test]
fn bitop_operations() {
    check_both_protocols(BITOP);
}

const BITFIELD: &str = r##"
BITFIELD k
BITFIELD missing GET u8 0
BITFIELD k SET u8 0 255 GET u8 0
GET k
BITFIELD k INCRBY u8 0 10
BITFIELD k OVERFLOW SAT INCRBY u8 0 300
BITFIELD k OVERFLOW FAIL INCRBY u8 0 1
BITFIELD k OVERFLOW WRAP INCRBY u8 0 1 GET u8 0
BITFIELD k SET i8 0 -128 INCRBY i8 0 -1
BITFIELD k OVERFLOW SAT INCRBY i8 0 -1000 INCRBY i8 0 1000
BITFIELD k OVERFLOW FAIL SET i8 0 128 SET i8 0 127 INCRBY i8 0 1
BITFIELD k OVERFLOW sat SET u4 0 100 overflow WRAP SET u4 4 100 GET u8 0
BITFIELD k SET u5 7 23 GET u5 7 GET i5 7 GET u16 0
GET k
BITFIELD k SET i64 0 -1 GET i64 0 GET u63 0 GET u63 1
BITFIELD k INCRBY i64 0 -9223372036854775807
BITFIELD k INCRBY i64 0 -10
BITFIELD k OVERFLOW SAT INCRBY i64 0 -10
BITFIELD k OVERFLOW FAIL INCRBY i64 0 -10
BITFIELD k SET i64 0 9223372036854775807 OVERFLOW SAT INCRBY i64 0 1
BITFIELD k OVERFLOW WRAP INCRBY i64 0 1
BITFIELD k SET u63 0 9223372036854775807 INCRBY u63 0 1
BITFIELD k OVERFLOW SAT SET u63 0 -1 INCRBY u63 0 -5 INCRBY u63 0 -9223372036854775808
BITFIELD k SET u8 #2 200 GET u8 16 GET u8 #2 SET i4 #3 -3 GET i4 12
GET k
BITFIELD k SET u8 100 1
STRLEN k
BITFIELD k GET u64 0
BITFIELD k GET i65 0
BITFIELD k GET i0 0
BITFIELD k GET x8 0
BITFIELD k GET I8 0
BITFIELD k GET u 0
BITFIELD k GET "" 0
BITFIELD k GET u8 -1
BITFIELD k GET u8 x
BITFIELD k GET u8 #-1
BITFIELD k GET u8 #x
BITFIELD k GET u8 4294967296
BITFIELD k GET u8 4294967295
BITFIELD k GET u8 #536870912
BITFIELD k GET u8 #536870911
BITFIELD k GET u8 #9223372036854775807
BITFIELD k GET u8 "#"
BITFIELD k GET i8 "#1152921504606846976"
BITFIELD k SET u8 0 x
BITFIELD k INCRBY u8 0 1.5
BITFIELD k OVERFLOW BAD GET u8 0
BITFIELD k OVERFLOW
BITFIELD k GET u8
BITFIELD k SET u8 0
BITFIELD k INCRBY u8 0
BITFIELD k FOO u8 0
BITFIELD k GET u8 0 FOO
BITFIELD k OVERFLOW FAIL
BITFIELD k SET u8 0 1 GET u64 0
BITFIELD_RO k GET u8 0 GET i16 4
BITFIELD_RO k SET u8 0 1
BITFIELD_RO k INCRBY u8 0 1 GET u8 0
BITFIELD_RO k OVERFLOW SAT GET u8 0
BITFIELD_RO k
BITFIELD_RO missing GET u8 0
BITFIELD_RO k GET u64 0
BITFIELD fail OVERFLOW FAIL SET u8 0 300
EXISTS fail
GET fail
BITFIELD fail OVERFLOW FAIL SET u8 80 300
STRLEN fail
SET n 100
BITFIELD n GET u8 0 GET u8 8 INCRBY u8 16 1
GET n
LPUSH list a
BITFIELD list GET u8 0
BITFIELD list SET u8 0 1
BITFIELD_RO list GET u8 0
BITFIELD list
BITFIELD list GET u64 0
EVAL "return redis.call('bitfield', KEYS[1], 'OVERFLOW', 'FAIL', 'SET', 'u8', 0, 300, 'SET', 'i8', 8, -3)" 1 lua
EVAL "return redis.call('setbit', KEYS[1], 3, 1)" 1 lua
EVAL_RO "return redis.call('bitfield_ro', KEYS[1], 'GET', 'u16', 0)" 1 lua
EVAL_RO "return redis.pcall('bitfield', KEYS[1], 'SET', 'u8', 0, 1)" 1 lua
EVAL_RO "return redis.pcall('setbit', KEYS[1], 0, 1)" 1 lua
EVAL "return {redis.call('bitcount', KEYS[1]), redis.call('bitpos', KEYS[1], 1)}" 1 lua
GET lua
"##;

#[test]
fn bitfield_and_bitfield_ro() {
    check_both_protocols(BITFIELD);
}

#[test]
fn bitfield_overflow_at_every_width() {
    // Every width, signed and unsigned, every overflow mode, around the
    // limits; the stored value is compared after each command.
    let mut p = Pair::new();
    for bits in 1..=64u32 {
        for signed in [true, false] {
            if !signed && bits == 64 {
                continue;
            }
            let ty = format!("{}{bits}", if signed { 'i' } else { 'u' });
            let (min, max): (i128, i128) = if signed {
                (-(1i128 << (bits - 1)), (1i128 << (bits - 1)) - 1)
            } else {
                (0, (1i128 << bits) - 1)
            };
            let values = [min, max, min - 1, max + 1, 0, -1, max / 2 + 1];
            for mode in ["WRAP", "SAT", "FAIL"] {
                for &v in &values {
                    if v < i128::from(i64::MIN) || v > i128::from(i64::MAX) {
                        continue;
                    }
                    let v = v.to_string();
                    let offset = (bits % 7).to_string();
                    p.check(&["BITFIELD", "k", "OVERFLOW", mode, "SET", &ty, &offset, &v]);
                    p.check(&["GET", "k"]);
                    for incr in ["1", "-1", "-9223372036854775808", "9223372036854775807", &v] {
                        p.check(&[
                            "BITFIELD", "k", "OVERFLOW", mode, "INCRBY", &ty, &offset, incr, "GET",
                            &ty, &offset,
                        ]);
                    }
                    p.check(&["GET", "k"]);
                }
            }
        }
    }
}

#[test]
fn huge_offsets_within_proto_max_bulk_len() {
    let mut p = Pair::new();
    p.script(
        r#"
CONFIG SET proto-max-bulk-len 1mb
SETBIT k 8388607 1
STRLEN k
SETBIT k 8388608 1
BITFIELD k SET u8 8388600 255
BITFIELD k SET u8 8388607 255
STRLEN k
BITFIELD k GET u8 8388607
BITCOUNT k
BITPOS k 1 -1
BITPOS k 0 1000 -1
BITFIELD k SET u8 #1048576 1
GETBIT k 8388608
SETRANGE k 1048575 x
CONFIG SET proto-max-bulk-len 512mb
SETBIT k 8388608 1
STRLEN k
"#,
    );
}

#[test]
fn wrong_arity_for_every_bitmap_command() {
    let mut p = Pair::new();
    for (name, good_argc) in [
        ("SETBIT", 4),
        ("GETBIT", 3),
        ("BITCOUNT", 2),
        ("BITPOS", 3),
        ("BITOP", 4),
        ("BITFIELD", 2),
        ("BITFIELD_RO", 2),
    ] {
        for argc in 1..good_argc + 1 {
            let mut args = vec![name.to_string()];
            args.extend((1..argc).map(|i| format!("a{i}")));
            let refs: Vec<&str> = args.iter().map(String::as_str).collect();
            p.check(&refs);
        }
        p.check(&["FLUSHALL"]);
    }
    for name in [
        "setbit",
        "bitcount",
        "bitpos",
        "bitop",
        "bitfield",
        "bitfield_ro",
    ] {
        p.check(&["COMMAND", "INFO", name]);
        p.check(&["COMMAND", "GETKEYS", name, "k", "1", "1", "x"]);
    }
    p.check(&["COMMAND", "GETKEYS", "BITOP", "AND", "d", "s1", "s2"]);
    p.check(&["COMMAND", "GETKEYS", "BITFIELD", "k", "GET", "u8", "0"]);
}

#[test]
fn object_encoding_of_long_bitmaps() {
    // A SETBIT string is `raw` in Redis whatever its length; hozon derives
    // the encoding from the bytes (docs/compatibility.md), which agrees
    // beyond 44 bytes.
    check_both_protocols(
        r#"
SETBIT k 400 1
OBJECT ENCODING k
BITOP NOT d k
OBJECT ENCODING d
BITFIELD f SET u8 #60 1
OBJECT ENCODING f
"#,
    );
}

#[test]
fn writes_signal_watch_and_no_op_writes_do_not() {
    let mut p = Pair::new();
    let (mut r2, mut h2) = p.connect_more();
    let mut round = |p: &mut Pair, write: &[&str]| {
        p.check(&["WATCH", "k"]);
        p.check(&["MULTI"]);
        p.check(&["GET", "k"]);
        let args: Vec<&[u8]> = write.iter().map(|a| a.as_bytes()).collect();
        assert_eq!(r2.call(&args), h2.call(&args), "{write:?}");
        p.check(&["EXEC"]);
    };
    round(&mut p, &["SETBIT", "k", "3", "1"]);
    round(&mut p, &["SETBIT", "k", "3", "1"]);
    round(&mut p, &["SETBIT", "k", "3", "0"]);
    round(&mut p, &["BITFIELD", "k", "GET", "u8", "0"]);
    round(&mut p, &["BITFIELD", "k", "SET", "u8", "0", "0"]);
    round(&mut p, &["BITFIELD", "k", "SET", "u8", "0", "7"]);
    round(
        &mut p,
        &[
            "BITFIELD", "k", "OVERFLOW", "FAIL", "INCRBY", "u8", "0", "300",
        ],
    );
    // Growing the string is a change even when the bits written are 0.
    round(&mut p, &["BITFIELD", "k", "SET", "u8", "200", "0"]);
    round(&mut p, &["SETBIT", "k", "3000", "0"]);
    round(&mut p, &["SETBIT", "k", "3000", "0"]);
    round(&mut p, &["BITOP", "NOT", "k", "k"]);
    round(&mut p, &["BITOP", "AND", "k", "missing"]);
    round(&mut p, &["BITOP", "AND", "k", "missing"]);
    round(&mut p, &["BITCOUNT", "k"]);
}

#[test]
fn bitmap_writes_survive_a_restart_from_the_aof() {
    let dir = tempfile::tempdir().expect("temp dir");
    let path = dir.path().to_string_lossy().into_owned();
    let args = [
        "--appendonly",
        "yes",
        "--appendfsync",
        "always",
        "--dir",
        &path,
    ];
    let mut p = Pair::with_args(&[], &args);
    p.script(
        r#"
SETBIT a 7 1
SETBIT a 100 1
SETBIT a 100 1
SETBIT a 3 0
BITFIELD b SET i16 3 -1000 INCRBY u5 #9 40 OVERFLOW FAIL INCRBY u8 0 1000
BITFIELD b OVERFLOW SAT INCRBY i8 #4 -500
BITFIELD_RO b GET i16 3
SET c "some text"
BITOP XOR d a b c
BITOP NOT e c
SET f x
BITOP AND f missing
SELECT 3
SETBIT g 1000 1
SELECT 0
"#,
    );
    let keys = ["a", "b", "c", "d", "e", "f"];
    let want: Vec<Vec<u8>> = keys.iter().map(|k| p.redis(&["GET", k])).collect();
    let want_g = {
        p.redis(&["SELECT", "3"]);
        p.redis(&["GET", "g"])
    };
    drop(p);
    let hozon = start_hozon(&args);
    let mut h = Conn::connect(hozon.port);
    for (key, want) in keys.iter().zip(&want) {
        assert_eq!(&h.call(&[b"GET", key.as_bytes()]), want, "GET {key}");
    }
    h.call(&[b"SELECT", b"3"]);
    assert_eq!(h.call(&[b"GET", b"g"]), want_g, "GET g");
}

/// One random bitmap command (or a string command that shapes the keys).
#[derive(Clone, Debug)]
struct Op(Vec<String>);

const KEYS: &[&str] = &["a", "b", "c"];

impl Arbitrary for Op {
    fn arbitrary(g: &mut Gen) -> Op {
        let pick = |g: &mut Gen, from: &[&str]| g.choose(from).expect("non-empty").to_string();
        let key = |g: &mut Gen| pick(g, KEYS);
        let small = |g: &mut Gen| (i64::from(i8::arbitrary(g)) / 3).to_string();
        let offset = |g: &mut Gen| (u8::arbitrary(g) % 80).to_string();
        let mut args: Vec<String> = Vec::new();
        match u8::arbitrary(g) % 13 {
            0 | 1 => args.extend(["SETBIT".into(), key(g), offset(g), pick(g, &["0", "1"])]),
            2 => args.extend(["GETBIT".into(), key(g), offset(g)]),
            3 => {
                args.extend(["BITCOUNT".into(), key(g)]);
                if bool::arbitrary(g) {
                    args.extend([small(g), small(g)]);
                    if bool::arbitrary(g) {
                        args.push(pick(g, &["BIT", "BYTE"]));
                    }
                }
            }
            4 | 5 => {
                args.extend(["BITPOS".into(), key(g), pick(g, &["0", "1"])]);
                match u8::arbitrary(g) % 4 {
                    0 => {}
                    1 => args.push(small(g)),
                    2 => args.extend([small(g), small(g)]),
                    _ => args.extend([small(g), small(g), pick(g, &["BIT", "BYTE"])]),
                }
            }
            6 => {
                let op = pick(g, &["AND", "OR", "XOR", "NOT"]);
                let n = if op == "NOT" {
                    1
                } else {
                    1 + u8::arbitrary(g) % 3
                };
                args.extend(["BITOP".into(), op, key(g)]);
                args.extend((0..n).map(|_| key(g)));
            }
            7..=9 => {
                args.extend(["BITFIELD".into(), key(g)]);
                for _ in 0..1 + u8::arbitrary(g) % 3 {
                    let signed = bool::arbitrary(g);
                    let width = 1 + u8::arbitrary(g) % if signed { 64 } else { 63 };
                    let ty = format!("{}{width}", if signed { 'i' } else { 'u' });
                    let at = if bool::arbitrary(g) {
                        offset(g)
                    } else {
                        format!("#{}", u8::arbitrary(g) % 5)
                    };
                    let value = pick(
                        g,
                        &[
                            "0",
                            "1",
                            "-1",
                            "100",
                            "-100",
                            "9223372036854775807",
                            "-9223372036854775808",
                            "65535",
                        ],
                    );
                    match u8::arbitrary(g) % 4 {
                        0 => args.extend(["GET".into(), ty, at]),
                        1 => args.extend(["SET".into(), ty, at, value]),
                        2 => args.extend(["INCRBY".into(), ty, at, value]),
                        _ => args.extend(["OVERFLOW".into(), pick(g, &["WRAP", "SAT", "FAIL"])]),
                    }
                }
            }
            10 => args.extend([
                "SET".into(),
                key(g),
                pick(g, &["", "x", "\u{7f}\u{7f}", "12", "hello world"]),
            ]),
            11 => args.extend(["GET".into(), key(g)]),
            _ => args.extend(["RPUSH".into(), key(g), "v".into()]),
        }
        Op(args)
    }

    fn shrink(&self) -> Box<dyn Iterator<Item = Op>> {
        Box::new(std::iter::empty())
    }
}

/// Runs `ops` on both servers from an empty keyspace, comparing every
/// reply and, after each command, every key's value.
fn random_sequence(ops: Vec<Op>, resp3: bool) -> TestResult {
    let mut all = vec![vec!["FLUSHALL".to_string()]];
    for op in ops {
        all.push(op.0);
        all.push(vec!["MGET".into(), "a".into(), "b".into(), "c".into()]);
    }
    with_thread_pair(resp3, |p| compare_sequence(p, &all, 1, identical))
}

#[test]
fn random_bitmap_command_sequences_match_redis_resp2() {
    quickcheck_ops(40, 200, |ops: Vec<Op>| random_sequence(ops, false));
}

#[test]
fn random_bitmap_command_sequences_match_redis_resp3() {
    quickcheck_ops(40, 100, |ops: Vec<Op>| random_sequence(ops, true));
}
