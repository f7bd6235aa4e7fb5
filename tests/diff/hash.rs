//! Differential tests: hashes (HSET … HRANDFIELD), RESP2 and RESP3.
//!
//! Small hashes are listpacks in Redis and their replies come in listpack
//! order, so those are compared byte for byte. Hash-table replies have no
//! defined order and are compared as sets of (field, value) pairs.

use std::collections::BTreeSet;

use quickcheck::{Arbitrary, Gen, TestResult};

use crate::harness::{
    array_elements, bulk_payload, check_both_protocols, compare_sequence, del_command,
    quickcheck_ops, same_elements, show, with_thread_pair, Conn, Pair,
};

/// The elements of a (field, value) reply (flat array or RESP3 map) as a
/// set of pairs, for hash-table replies whose order is not defined.
fn pairs(reply: &[u8]) -> BTreeSet<(Vec<u8>, Vec<u8>)> {
    let elements = array_elements(reply);
    assert!(
        elements.len().is_multiple_of(2),
        "odd number of elements: {}",
        show(reply)
    );
    elements
        .chunks(2)
        .map(|c| (c[0].clone(), c[1].clone()))
        .collect()
}

/// Sends `args` to both and compares the replies as sets of pairs, after
/// checking that the reply headers (type and length) are identical.
#[track_caller]
fn check_pairs_unordered(p: &mut Pair, args: &[&str]) {
    let (r, h) = p.both(args);
    let header =
        |b: &[u8]| b[..b.windows(2).position(|w| w == b"\r\n").expect("header") + 2].to_vec();
    assert_eq!(
        show(&header(&r)),
        show(&header(&h)),
        "reply headers for {args:?}"
    );
    assert_eq!(pairs(&r), pairs(&h), "pairs for {args:?}");
}

#[test]
fn field_commands_on_small_hashes() {
    check_both_protocols(
        "HSET h f1 v1\n\
         HSET h f2 v2 f3 v3\n\
         HSET h f1 new f4 v4\n\
         HSET h f4 same f4 again\n\
         HGET h f1\n\
         HGET h f4\n\
         HGET h nofield\n\
         HGET nokey f\n\
         HMGET h f1 nofield f2\n\
         HMGET h f1\n\
         HMGET nokey a b\n\
         HMSET h f5 v5 f6 v6\n\
         HMSET h f5 v55\n\
         HSETNX h f1 x\n\
         HSETNX h f7 v7\n\
         HSETNX newkey f v\n\
         HGETALL newkey\n\
         HGETALL h\n\
         HKEYS h\n\
         HVALS h\n\
         HGETALL nokey\n\
         HKEYS nokey\n\
         HVALS nokey\n\
         HLEN h\n\
         HLEN nokey\n\
         HEXISTS h f1\n\
         HEXISTS h nofield\n\
         HEXISTS nokey f\n\
         HSTRLEN h f1\n\
         HSTRLEN h nofield\n\
         HSTRLEN nokey f\n\
         HSET n i 123 neg -5 big 9223372036854775807 z 0 lead 0123 sp \" 1\" fl 1.50 huge 99999999999999999999\n\
         HSTRLEN n i\n\
         HSTRLEN n neg\n\
         HSTRLEN n big\n\
         HSTRLEN n lead\n\
         HSTRLEN n huge\n\
         HGETALL n\n\
         HDEL h f2 nofield f4\n\
         HDEL h nofield\n\
         HDEL nokey f\n\
         HGETALL h\n\
         HDEL newkey f\n\
         EXISTS newkey\n\
         HSET e \"\" \"\"\n\
         HGET e \"\"\n\
         HEXISTS e \"\"\n\
         HSTRLEN e \"\"\n\
         HGETALL e\n\
         HDEL h f1 f3 f5 f6 f7 f8\n\
         EXISTS h\n\
         TYPE n\n\
         HSET Case F v\n\
         HGET Case f\n\
         HGET case F\n",
    );
}

#[test]
fn binary_fields_and_values() {
    let mut p = Pair::new();
    for resp3 in [false, true] {
        if resp3 {
            p.resp3();
            p.check(&["FLUSHALL"]);
        }
        p.check_bytes(&[
            b"HSET",
            b"b\x00in",
            b"f\x00\xff",
            b"v\r\n\x00",
            b"\x00",
            b"",
        ]);
        p.check_bytes(&[b"HGET", b"b\x00in", b"f\x00\xff"]);
        p.check_bytes(&[b"HGET", b"b\x00in", b"f"]);
        p.check_bytes(&[b"HGETALL", b"b\x00in"]);
        p.check_bytes(&[b"HSTRLEN", b"b\x00in", b"f\x00\xff"]);
        p.check_bytes(&[b"HSCAN", b"b\x00in", b"0", b"MATCH", b"f*"]);
        p.check_bytes(&[b"HDEL", b"b\x00in", b"\x00"]);
        p.check_bytes(&[b"HKEYS", b"b\x00in"]);
    }
}

#[test]
fn small_hashes_reply_in_listpack_order() {
    check_both_protocols(
        "HSET o a 1 b 2 c 3 d 4\n\
         HDEL o b\n\
         HSET o b 5 a 6\n\
         HGETALL o\n\
         HKEYS o\n\
         HVALS o\n\
         HSCAN o 0\n\
         HRANDFIELD o 4\n\
         HRANDFIELD o 100 WITHVALUES\n\
         HDEL o a d\n\
         HSETNX o a 7\n\
         HINCRBY o z 1\n\
         HINCRBYFLOAT o c 0.5\n\
         HGETALL o\n\
         HRANDFIELD o 9223372036854775807\n",
    );
}

#[test]
fn wrong_type_and_arity_errors() {
    check_both_protocols(
        "SET s str\n\
         HSET s f v\n\
         HSETNX s f v\n\
         HGET s f\n\
         HMGET s f g\n\
         HMSET s f v\n\
         HGETALL s\n\
         HDEL s f\n\
         HLEN s\n\
         HEXISTS s f\n\
         HKEYS s\n\
         HVALS s\n\
         HINCRBY s f 1\n\
         HINCRBYFLOAT s f 1\n\
         HSTRLEN s f\n\
         HSCAN s 0\n\
         HSCAN s 0 COUNT 0\n\
         HRANDFIELD s\n\
         HRANDFIELD s 1\n\
         HRANDFIELD s 0\n\
         HRANDFIELD s -1 WITHVALUES\n\
         HINCRBY s f x\n\
         HINCRBYFLOAT s f x\n\
         HSCAN s x\n\
         HRANDFIELD s x\n\
         HSET h\n\
         HSET h f\n\
         HSET h f v f2\n\
         HSET h f v f2 v2 f3\n\
         HMSET h f\n\
         HMSET h f v f2\n\
         HSETNX h f\n\
         HSETNX h f v x\n\
         HGET h\n\
         HGET h f x\n\
         HMGET h\n\
         HGETALL\n\
         HGETALL a b\n\
         HDEL h\n\
         HLEN\n\
         HLEN a b\n\
         HEXISTS h\n\
         HKEYS\n\
         HVALS a b\n\
         HINCRBY h f\n\
         HINCRBY h f 1 2\n\
         HINCRBYFLOAT h f\n\
         HSTRLEN h\n\
         HSCAN h\n\
         HRANDFIELD\n\
         EXISTS h\n\
         GET s\n",
    );
}

#[test]
fn hincrby_values_errors_and_overflow() {
    check_both_protocols(
        "HINCRBY h f 1\n\
         HINCRBY h f -11\n\
         HINCRBY h f 0\n\
         HGET h f\n\
         HSET h s abc big 9223372036854775807 small -9223372036854775808 sp \" 1\" lead 01 fl 1.5 neg0 -0 plus +1 e \"\"\n\
         HINCRBY h s 1\n\
         HINCRBY h big 1\n\
         HINCRBY h big 0\n\
         HINCRBY h big -1\n\
         HINCRBY h small -1\n\
         HINCRBY h small 1\n\
         HINCRBY h small -9223372036854775807\n\
         HINCRBY h sp 1\n\
         HINCRBY h lead 1\n\
         HINCRBY h fl 1\n\
         HINCRBY h neg0 1\n\
         HINCRBY h plus 1\n\
         HINCRBY h e 1\n\
         HINCRBY h f abc\n\
         HINCRBY h f 1.5\n\
         HINCRBY h f 9223372036854775808\n\
         HINCRBY h f -9223372036854775809\n\
         HINCRBY h f \"\"\n\
         HINCRBY h f \" 1\"\n\
         HINCRBY h f +1\n\
         HINCRBY h f 9223372036854775807\n\
         HINCRBY h f 9223372036854775807\n\
         HINCRBY nokey f 5\n\
         TYPE nokey\n\
         HINCRBY h2 f abc\n\
         EXISTS h2\n\
         HGETALL h\n",
    );
}

#[test]
fn hincrbyfloat_matches_long_double_arithmetic() {
    check_both_protocols(
        "HINCRBYFLOAT f x 10.5\n\
         HINCRBYFLOAT f x 0.1\n\
         HINCRBYFLOAT f x -5\n\
         HINCRBYFLOAT f x 3.0e3\n\
         HINCRBYFLOAT f x 1e-3\n\
         HINCRBYFLOAT f y 0.1\n\
         HINCRBYFLOAT f y 0.2\n\
         HINCRBYFLOAT f y 0.3\n\
         HINCRBYFLOAT f y -0.6\n\
         HINCRBYFLOAT f y 1e3\n\
         HINCRBYFLOAT f z 1.23456789012345678901\n\
         HINCRBYFLOAT f z 1e-18\n\
         HINCRBYFLOAT f t -1e-18\n\
         HINCRBYFLOAT f neg -0.0\n\
         HINCRBYFLOAT f hex 0x1p-18\n\
         HINCRBYFLOAT f hex 0X1.8P1\n\
         HINCRBYFLOAT f int 5\n\
         HINCRBYFLOAT f int 5\n\
         HINCRBYFLOAT f int -10\n\
         HINCRBYFLOAT f exp +2.5E+2\n\
         HINCRBYFLOAT f dot .5\n\
         HINCRBYFLOAT f dot 5.\n\
         HINCRBYFLOAT f tiny 2e-4951\n\
         HINCRBYFLOAT f tiny 0x1p-16445\n\
         HINCRBYFLOAT f big 1e308\n\
         HINCRBYFLOAT f big 1e308\n\
         HINCRBYFLOAT f max 1.18973149535723176502e+4932\n\
         HINCRBYFLOAT f max 1e4932\n\
         HINCRBYFLOAT f lead 0007.25\n\
         HSET f s abc inf inf ninf -inf nan nan sp \" 1\" e \"\" i 12 hx 0x10\n\
         HINCRBYFLOAT f s 1\n\
         HINCRBYFLOAT f inf 1\n\
         HINCRBYFLOAT f ninf 1\n\
         HINCRBYFLOAT f nan 1\n\
         HINCRBYFLOAT f sp 1\n\
         HINCRBYFLOAT f e 1\n\
         HINCRBYFLOAT f i 0.5\n\
         HINCRBYFLOAT f hx 1\n\
         HINCRBYFLOAT f x inf\n\
         HINCRBYFLOAT f x -inf\n\
         HINCRBYFLOAT f x +Infinity\n\
         HINCRBYFLOAT f x nan\n\
         HINCRBYFLOAT f x abc\n\
         HINCRBYFLOAT f x \"\"\n\
         HINCRBYFLOAT f x \" 1\"\n\
         HINCRBYFLOAT f x \"1 \"\n\
         HINCRBYFLOAT f x 1e\n\
         HINCRBYFLOAT f x 0x\n\
         HINCRBYFLOAT f x 1e5000\n\
         HINCRBYFLOAT f x 1e-5000\n\
         HINCRBYFLOAT f x 1e-4951\n\
         HINCRBYFLOAT f x --1\n\
         HINCRBYFLOAT nokey f abc\n\
         EXISTS nokey\n\
         HINCRBYFLOAT nokey f 1.5\n\
         HGETALL nokey\n\
         OBJECT ENCODING f\n\
         HMGET f x y z t neg hex int exp dot tiny big max lead s inf ninf nan sp e i hx\n",
    );
}

#[test]
fn hscan_options_errors_and_small_hashes() {
    check_both_protocols(
        "HSCAN nokey 0\n\
         HSCAN nokey abc\n\
         HSCAN nokey 0 COUNT 0\n\
         HSCAN nokey 0 BADOPT\n\
         HSET h a 1 b 2 ab 3 ba 4 100 x 1000 y A 5\n\
         HSCAN h 0\n\
         HSCAN h 0 MATCH a*\n\
         HSCAN h 0 MATCH *\n\
         HSCAN h 0 MATCH A*\n\
         HSCAN h 0 MATCH x\n\
         HSCAN h 0 MATCH 1*\n\
         HSCAN h 0 MATCH ?\n\
         HSCAN h 0 MATCH [ab]*\n\
         HSCAN h 0 match b* COUNT 1\n\
         HSCAN h 0 MATCH b* MATCH a*\n\
         HSCAN h 0 COUNT 1\n\
         HSCAN h 0 COUNT 1000000\n\
         HSCAN h 0 COUNT 0\n\
         HSCAN h 0 COUNT -1\n\
         HSCAN h 0 COUNT abc\n\
         HSCAN h 0 COUNT 9223372036854775808\n\
         HSCAN h 0 COUNT\n\
         HSCAN h 0 MATCH\n\
         HSCAN h 0 TYPE string\n\
         HSCAN h 0 foo bar\n\
         HSCAN h 0 NOVALUES\n\
         HSCAN h 5\n\
         HSCAN h -1\n\
         HSCAN h 18446744073709551615\n\
         HSCAN h 18446744073709551616\n\
         HSCAN h abc\n\
         HSCAN h \" 1\"\n\
         HSCAN h \"1 \"\n\
         HSCAN h 1.5\n\
         HSCAN h \"\"\n\
         HSCAN h +3\n\
         HSET e \"\" v\n\
         HSCAN e 0\n\
         HSCAN e 0 MATCH *\n\
         HSCAN e 0 MATCH ?*\n",
    );
}

#[test]
fn hrandfield_errors_and_deterministic_cases() {
    check_both_protocols(
        "HRANDFIELD nokey\n\
         HRANDFIELD nokey 5\n\
         HRANDFIELD nokey -5\n\
         HRANDFIELD nokey 5 WITHVALUES\n\
         HRANDFIELD nokey 0\n\
         HRANDFIELD nokey abc\n\
         HSET h a 1 b 2 c 3\n\
         HRANDFIELD h 0\n\
         HRANDFIELD h 0 WITHVALUES\n\
         HRANDFIELD h 3\n\
         HRANDFIELD h 3 WITHVALUES\n\
         HRANDFIELD h 4 withvalues\n\
         HRANDFIELD h 9223372036854775807\n\
         HRANDFIELD h 4611686018427387903 WITHVALUES\n\
         HRANDFIELD h abc\n\
         HRANDFIELD h 1.5\n\
         HRANDFIELD h \"\"\n\
         HRANDFIELD h 9223372036854775808\n\
         HRANDFIELD h -9223372036854775808\n\
         HRANDFIELD h -9223372036854775808 WITHVALUES\n\
         HRANDFIELD h 9223372036854775807 WITHVALUES\n\
         HRANDFIELD h 4611686018427387904 WITHVALUES\n\
         HRANDFIELD h -4611686018427387904 WITHVALUES\n\
         HRANDFIELD h 5 WITHSCORES\n\
         HRANDFIELD h 5 WITHVALUES extra\n\
         HRANDFIELD h abc WITHSCORES\n\
         HRANDFIELD h 5 \"\"\n\
         HSET one only v\n\
         HRANDFIELD one\n\
         HRANDFIELD one 1\n\
         HRANDFIELD one 1 WITHVALUES\n\
         HRANDFIELD one -3\n\
         HRANDFIELD one -3 WITHVALUES\n\
         HRANDFIELD one 2 WITHVALUES\n",
    );
}

/// The fields of hash `key` on one server (RESP2 HKEYS).
fn fields_of(conn: &mut Conn, key: &str) -> BTreeSet<Vec<u8>> {
    array_elements(&conn.call(&[b"HKEYS", key.as_bytes()]))
        .iter()
        .map(|e| bulk_payload(e))
        .collect()
}

/// Checks a random HRANDFIELD reply from one server: its RESP shape, its
/// size, that every field belongs to the hash (with its value), and
/// distinctness when the count is positive.
fn check_random_reply(
    conn: &mut Conn,
    key: &str,
    count: i64,
    with_values: bool,
    resp3: bool,
    size: usize,
) {
    let mut args: Vec<Vec<u8>> = vec![
        b"HRANDFIELD".to_vec(),
        key.as_bytes().to_vec(),
        count.to_string().into_bytes(),
    ];
    if with_values {
        args.push(b"WITHVALUES".to_vec());
    }
    let refs: Vec<&[u8]> = args.iter().map(Vec::as_slice).collect();
    let reply = conn.call(&refs);
    let expected_fields = if count < 0 {
        count.unsigned_abs() as usize
    } else {
        (count as usize).min(size)
    };
    let elements = array_elements(&reply);
    let mut fields = Vec::new();
    if with_values && resp3 {
        assert_eq!(
            elements.len(),
            expected_fields,
            "HRANDFIELD {count}: {}",
            show(&reply)
        );
        for pair in &elements {
            let inner = array_elements(pair);
            assert_eq!(
                inner.len(),
                2,
                "RESP3 pairs are two-element arrays: {}",
                show(&reply)
            );
            fields.push((bulk_payload(&inner[0]), Some(bulk_payload(&inner[1]))));
        }
    } else if with_values {
        assert_eq!(
            elements.len(),
            expected_fields * 2,
            "HRANDFIELD {count}: {}",
            show(&reply)
        );
        for pair in elements.chunks(2) {
            fields.push((bulk_payload(&pair[0]), Some(bulk_payload(&pair[1]))));
        }
    } else {
        assert_eq!(
            elements.len(),
            expected_fields,
            "HRANDFIELD {count}: {}",
            show(&reply)
        );
        for field in &elements {
            fields.push((bulk_payload(field), None));
        }
    }
    for (field, value) in &fields {
        let stored = conn.call(&[b"HGET", key.as_bytes(), field]);
        assert_eq!(
            stored.first(),
            Some(&b'$'),
            "field {} is in the hash",
            show(field)
        );
        if let Some(value) = value {
            assert_eq!(&bulk_payload(&stored), value, "value of {}", show(field));
        }
    }
    if count > 0 {
        let distinct: BTreeSet<_> = fields.iter().map(|(f, _)| f.clone()).collect();
        assert_eq!(
            distinct.len(),
            fields.len(),
            "positive counts give distinct fields: {}",
            show(&reply)
        );
    }
}

#[test]
fn hrandfield_random_replies_have_redis_shapes() {
    let mut p = Pair::new();
    let small: Vec<String> = (0..10)
        .flat_map(|i| [format!("f{i}"), format!("v{i}")])
        .collect();
    let large: Vec<String> = (0..600)
        .flat_map(|i| [format!("f{i}"), format!("v{i}")])
        .collect();
    for resp3 in [false, true] {
        if resp3 {
            p.resp3();
        }
        for (key, items) in [("small", &small), ("large", &large)] {
            let mut args = vec!["HSET", key];
            args.extend(items.iter().map(String::as_str));
            p.both(&args);
            let size = items.len() / 2;
            for count in [-25i64, -1, 1, 2, 3, 4, 9, 150, 250, 599, 600, 1000] {
                for with_values in [false, true] {
                    check_random_reply(&mut p.r, key, count, with_values, resp3, size);
                    check_random_reply(&mut p.h, key, count, with_values, resp3, size);
                }
            }
            let (r, h) = p.both(&["HRANDFIELD", key]);
            assert_eq!(r[0], h[0], "single-field form is a bulk");
            assert!(fields_of(&mut p.h, key).contains(&bulk_payload(&h)));
        }
    }
}

#[test]
fn encoding_converts_at_the_listpack_limits() {
    let mut p = Pair::new();
    // Redis 7.0.15's compiled-in default is 512 entries (redis.conf ships 128).
    let fields: Vec<String> = (0..512)
        .flat_map(|i| [format!("f{i}"), format!("v{i}")])
        .collect();
    let mut args = vec!["HSET", "big"];
    args.extend(fields.iter().map(String::as_str));
    p.check(&args);
    p.check(&["OBJECT", "ENCODING", "big"]);
    p.check(&["HGETALL", "big"]);
    p.check(&["HSET", "big", "f0", "changed"]);
    p.check(&["OBJECT", "ENCODING", "big"]);
    p.check(&["HSET", "big", "f512", "x"]);
    p.check(&["OBJECT", "ENCODING", "big"]);
    p.check(&["HDEL", "big", "f512", "f1", "f2"]);
    p.check(&["OBJECT", "ENCODING", "big"]);
    p.check(&["HLEN", "big"]);
    check_pairs_unordered(&mut p, &["HGETALL", "big"]);
    p.check_unordered(&["HKEYS", "big"]);
    p.check_unordered(&["HVALS", "big"]);

    let at_limit = "x".repeat(64);
    let over = "y".repeat(65);
    let script = format!(
        "HSET v f {at_limit}\n\
         HSET v {at_limit} v\n\
         OBJECT ENCODING v\n\
         HSET v g {over}\n\
         OBJECT ENCODING v\n\
         HSET fld {over} v\n\
         OBJECT ENCODING fld\n\
         HSET multi a b c {over} d e\n\
         OBJECT ENCODING multi\n\
         HSET nx a b\n\
         HSETNX nx a {over}\n\
         OBJECT ENCODING nx\n\
         HSETNX nx c {over}\n\
         OBJECT ENCODING nx\n\
         HSETNX nx2 {over} v\n\
         OBJECT ENCODING nx2\n\
         HINCRBY inc {at_limit} 1\n\
         OBJECT ENCODING inc\n\
         HINCRBY inc {over} 1\n\
         OBJECT ENCODING inc\n\
         HINCRBYFLOAT flt f 1e60\n\
         OBJECT ENCODING flt\n\
         HINCRBYFLOAT flt f 1e100\n\
         OBJECT ENCODING flt\n\
         HGET flt f\n\
         HDEL v g\n\
         OBJECT ENCODING v\n"
    );
    p.script(&script);
    check_pairs_unordered(&mut p, &["HGETALL", "multi"]);

    let fields: Vec<String> = (0..513)
        .flat_map(|i| [format!("f{i}"), format!("v{i}")])
        .collect();
    let mut args = vec!["HSET", "oneshot"];
    args.extend(fields.iter().map(String::as_str));
    p.check(&args);
    p.check(&["OBJECT", "ENCODING", "oneshot"]);
    p.resp3();
    check_pairs_unordered(&mut p, &["HGETALL", "oneshot"]);
    // `v` is a hashtable now: one HSCAN call returns both fields, in an
    // order that depends on each server's hash function.
    let (r, h) = p.both(&["HSCAN", "v", "0"]);
    let (re, he) = (
        crate::harness::array_elements(&r),
        crate::harness::array_elements(&h),
    );
    assert_eq!(re[0], he[0], "HSCAN cursor");
    assert_eq!(pairs(&re[1]), pairs(&he[1]), "HSCAN fields");
}

#[test]
fn configured_limits_decide_the_encoding() {
    let args = [
        "--hash-max-listpack-entries",
        "4",
        "--hash-max-listpack-value",
        "8",
    ];
    let mut p = Pair::with_args(&args, &args);
    p.script(
        "HSET h a 1 b 2 c 3 d 4\n\
         OBJECT ENCODING h\n\
         HGETALL h\n\
         HSET h e 5\n\
         OBJECT ENCODING h\n\
         HSET v a 12345678\n\
         OBJECT ENCODING v\n\
         HSET v b 123456789\n\
         OBJECT ENCODING v\n\
         HINCRBYFLOAT w f 123456.125\n\
         OBJECT ENCODING w\n\
         HINCRBY x f 123456789\n\
         OBJECT ENCODING x\n",
    );
}

/// Scans `key` to completion on one server with `extra` options and
/// returns the (field, value) pairs seen; every reply must be well formed.
fn full_scan(conn: &mut Conn, key: &str, extra: &[&str]) -> BTreeSet<(Vec<u8>, Vec<u8>)> {
    let mut seen = BTreeSet::new();
    let mut cursor = b"0".to_vec();
    for _ in 0..100_000 {
        let mut args: Vec<&[u8]> = vec![b"HSCAN", key.as_bytes(), &cursor];
        args.extend(extra.iter().map(|a| a.as_bytes()));
        let reply = conn.call(&args);
        let parts = array_elements(&reply);
        assert_eq!(
            parts.len(),
            2,
            "HSCAN replies with cursor and items: {}",
            show(&reply)
        );
        for pair in array_elements(&parts[1]).chunks(2) {
            seen.insert((bulk_payload(&pair[0]), bulk_payload(&pair[1])));
        }
        cursor = bulk_payload(&parts[0]);
        if cursor == b"0" {
            return seen;
        }
    }
    panic!("HSCAN did not finish");
}

#[test]
fn hscan_of_a_hash_table_returns_every_pair() {
    let mut p = Pair::new();
    let fields: Vec<String> = (0..2000)
        .flat_map(|i| [format!("field:{i}"), format!("{i}")])
        .collect();
    let mut args = vec!["HSET", "big"];
    args.extend(fields.iter().map(String::as_str));
    p.check(&args);
    for extra in [
        &[][..],
        &["COUNT", "3"],
        &["COUNT", "1000"],
        &["MATCH", "field:1*"],
        &["MATCH", "*7", "COUNT", "50"],
    ] {
        let redis = full_scan(&mut p.r, "big", extra);
        let hozon = full_scan(&mut p.h, "big", extra);
        assert_eq!(redis.len(), hozon.len(), "HSCAN {extra:?}");
        assert!(redis == hozon, "HSCAN {extra:?} returned different pairs");
    }
    // Errors are checked after the cursor and the key, like Redis.
    p.script(
        "HSCAN big 0 COUNT 0\n\
         HSCAN big 0 MATCH\n\
         HSCAN big x\n",
    );
}

#[test]
fn session_store_use_case() {
    let mut p = Pair::new();
    for resp3 in [false, true] {
        if resp3 {
            p.resp3();
        }
        p.script(
            "HSET session:8f1c2a user alice role admin csrf 9b1f last_seen 1700000000\n\
             EXPIRE session:8f1c2a 1800\n\
             HGETALL session:8f1c2a\n\
             TTL session:8f1c2a\n\
             HGET session:8f1c2a user\n\
             HMGET session:8f1c2a user role missing\n\
             HSET session:8f1c2a last_seen 1700000100\n\
             TTL session:8f1c2a\n\
             HINCRBY session:8f1c2a hits 1\n\
             HINCRBY session:8f1c2a hits 1\n\
             HDEL session:8f1c2a csrf\n\
             HGETALL session:8f1c2a\n\
             TTL session:8f1c2a\n\
             EXPIRE session:8f1c2a 3600\n\
             TTL session:8f1c2a\n\
             DEL session:8f1c2a\n\
             HGETALL session:8f1c2a\n\
             TTL session:8f1c2a\n\
             HSET session:short user bob\n\
             PEXPIRE session:short 30\n",
        );
        // Let the short session expire (the condition is the passage of
        // time itself), then both servers must have forgotten it.
        std::thread::sleep(std::time::Duration::from_millis(80));
        p.script(
            "HGETALL session:short\n\
             HGET session:short user\n\
             HLEN session:short\n\
             TTL session:short\n\
             EXISTS session:short\n",
        );
    }
}

// ---------------------------------------------------------------------------
// Random command sequences.

const KEYS: &[&str] = &["h1", "h2", "s"];
const FIELDS: &[&str] = &["a", "b", "c", "d", "e", "12", ""];
const VALUES: &[&str] = &[
    "1",
    "-3",
    "0",
    "x",
    "10.5",
    "9223372036854775807",
    "",
    "0.1",
    "1e3",
    "abc",
];
const INCRS: &[&str] = &[
    "1",
    "-1",
    "100",
    "9223372036854775807",
    "-9223372036854775808",
    "x",
    "0",
];
const FLOAT_INCRS: &[&str] = &[
    "0.1", "0.2", "-1.5", "1e3", "3.14159", "1e-3", "0x1p-3", "inf", "x", "-0.3",
];

/// One command of a random sequence.
#[derive(Debug, Clone)]
struct Op(Vec<String>);

fn pick<'a>(g: &mut Gen, items: &[&'a str]) -> &'a str {
    g.choose(items).copied().expect("non-empty choice")
}

impl Arbitrary for Op {
    fn arbitrary(g: &mut Gen) -> Op {
        let key = pick(g, KEYS).to_string();
        let field = |g: &mut Gen| pick(g, FIELDS).to_string();
        let value = |g: &mut Gen| {
            // Now and then a value too long for the listpack.
            if u8::arbitrary(g) % 40 == 0 {
                "L".repeat(65)
            } else {
                pick(g, VALUES).to_string()
            }
        };
        let words: Vec<String> = match u8::arbitrary(g) % 22 {
            0..=3 => {
                let mut w = vec!["HSET".to_string(), key];
                for _ in 0..(1 + usize::arbitrary(g) % 3) {
                    w.push(field(g));
                    w.push(value(g));
                }
                w
            }
            4 => vec!["HSETNX".into(), key, field(g), value(g)],
            5 => vec!["HMSET".into(), key, field(g), value(g)],
            6 => vec!["HGET".into(), key, field(g)],
            7 => vec!["HMGET".into(), key, field(g), field(g)],
            8 => vec!["HDEL".into(), key, field(g), field(g)],
            9 => vec!["HLEN".into(), key],
            10 => vec!["HEXISTS".into(), key, field(g)],
            11 => vec!["HINCRBY".into(), key, field(g), pick(g, INCRS).into()],
            12 => vec![
                "HINCRBYFLOAT".into(),
                key,
                field(g),
                pick(g, FLOAT_INCRS).into(),
            ],
            13 => vec!["HSTRLEN".into(), key, field(g)],
            14 => vec!["HGETALL".into(), key],
            15 => vec!["HKEYS".into(), key],
            16 => vec!["HVALS".into(), key],
            17 => vec![
                "HSCAN".into(),
                key,
                "0".into(),
                "MATCH".into(),
                pick(g, &["*", "?", "[a-c]", "1*"]).into(),
            ],
            18 => vec![
                "HRANDFIELD".into(),
                key,
                pick(g, &["0", "50", "-0"]).into(),
                "WITHVALUES".into(),
            ],
            19 => vec!["SET".into(), "s".into(), value(g)],
            20 => vec!["DEL".into(), key],
            _ => vec!["HRANDFIELD".into(), key, "100".into()],
        };
        Op(words)
    }
}

/// True for replies whose order follows the hash's internal layout.
fn order_dependent(words: &[String]) -> bool {
    matches!(
        words[0].as_str(),
        "HGETALL" | "HKEYS" | "HVALS" | "HSCAN" | "HRANDFIELD"
    )
}

/// Runs `ops` from an empty keyspace and compares every reply (hash-table
/// replies as sets of elements), then the final contents of every key.
fn random_sequence_matches(ops: Vec<Op>, resp3: bool) -> TestResult {
    let mut all = vec![del_command(KEYS)];
    all.extend(ops.into_iter().map(|op| op.0));
    for key in KEYS {
        all.push(vec!["HGETALL".into(), key.to_string()]);
        all.push(vec!["OBJECT".into(), "ENCODING".into(), key.to_string()]);
    }
    with_thread_pair(resp3, |p| {
        compare_sequence(p, &all, 0, |p, words, r, h| {
            if r == h {
                return true;
            }
            // A hash table has no defined order: compare the elements.
            let table = words.len() > 1
                && order_dependent(words)
                && p.redis(&["OBJECT", "ENCODING", &words[1]])
                    .ends_with(b"hashtable\r\n");
            if !table || r.first() != h.first() {
                return false;
            }
            if words[0] == "HSCAN" {
                // The elements only: the cursors may differ.
                same_elements(&array_elements(r)[1], &array_elements(h)[1])
            } else {
                same_elements(r, h)
            }
        })
    })
}

#[test]
fn random_command_sequences_match_redis_resp2() {
    quickcheck_ops(60, 150, |ops: Vec<Op>| random_sequence_matches(ops, false));
}

#[test]
fn random_command_sequences_match_redis_resp3() {
    quickcheck_ops(60, 100, |ops: Vec<Op>| random_sequence_matches(ops, true));
}
