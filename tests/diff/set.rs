//! Differential tests: sets (SADD … SSCAN), RESP2 and RESP3.
//!
//! Intset replies (all-integer sets of at most 512 members) are compared
//! byte for byte, order included; hash-table replies are compared as
//! multisets (script lines starting with `~`). Random commands are compared
//! where Redis is deterministic (count ≥ size, count 0, errors) and checked
//! for size, distinctness and membership otherwise.

use std::collections::BTreeSet;

use quickcheck::{Arbitrary, Gen, TestResult};

use crate::harness::{
    array_elements, check_both_protocols, check_owned, compare_sequence, del_command,
    quickcheck_ops, show, with_thread_pair, Pair,
};

/// The payloads of the bulk strings in an aggregate reply.
fn bulk_payloads(reply: &[u8]) -> Vec<Vec<u8>> {
    array_elements(reply)
        .into_iter()
        .map(|e| {
            assert_eq!(e.first(), Some(&b'$'), "not a bulk: {}", show(&e));
            let start = e
                .windows(2)
                .position(|w| w == b"\r\n")
                .expect("bulk header")
                + 2;
            e[start..e.len() - 2].to_vec()
        })
        .collect()
}

/// SADD arguments for the integers `from..to`.
fn sadd_range(key: &str, from: i64, to: i64) -> Vec<String> {
    let mut args = vec!["SADD".to_string(), key.to_string()];
    args.extend((from..to).map(|i| i.to_string()));
    args
}

#[test]
fn add_remove_and_membership() {
    check_both_protocols(
        "SADD s 3 1 2\n\
         SADD s 2 3 4 -5 -5\n\
         SMEMBERS s\n\
         SCARD s\n\
         SISMEMBER s 4\n\
         SISMEMBER s 5\n\
         SISMEMBER s 04\n\
         SISMEMBER s x\n\
         SMISMEMBER s 1 x 4 1\n\
         SMISMEMBER missing a b\n\
         SISMEMBER missing a\n\
         SCARD missing\n\
         SMEMBERS missing\n\
         SREM s 2 zz 2 -5\n\
         SREM s x\n\
         SREM missing a\n\
         SMEMBERS s\n\
         SREM s 1 3 4 9\n\
         EXISTS s\n\
         SMEMBERS s\n\
         SADD b 9223372036854775807 -9223372036854775808 0\n\
         SMEMBERS b\n\
         OBJECT ENCODING b\n\
         SADD e \"\"\n\
         SMEMBERS e\n\
         SISMEMBER e \"\"\n\
         OBJECT ENCODING e\n\
         SADD bin \"a\\x00b\" \"\\xff\"\n\
         SISMEMBER bin \"a\\x00b\"\n\
         SCARD bin\n\
         SREM bin \"a\\x00b\" \"\\xff\" more\n\
         EXISTS bin\n",
    );
}

#[test]
fn non_canonical_integers_make_a_hashtable() {
    let mut p = Pair::new();
    for odd in [
        "+1",
        "01",
        "-0",
        " 1",
        "1 ",
        "1.0",
        "9223372036854775808",
        "-9223372036854775809",
        "0x10",
        "",
    ] {
        p.check(&["DEL", "s"]);
        p.check(&["SADD", "s", "1", "2"]);
        p.check(&["OBJECT", "ENCODING", "s"]);
        p.check(&["SADD", "s", odd]);
        p.check(&["OBJECT", "ENCODING", "s"]);
        p.check(&["SISMEMBER", "s", odd]);
        p.check(&["SISMEMBER", "s", "1"]);
        p.check_unordered(&["SMEMBERS", "s"]);
        // A set created with a non-integer starts as a hash table.
        p.check(&["DEL", "t"]);
        p.check(&["SADD", "t", odd, "1"]);
        p.check(&["OBJECT", "ENCODING", "t"]);
        p.check_unordered(&["SMEMBERS", "t"]);
    }
}

#[test]
fn intset_converts_past_512_members_and_never_back() {
    let mut p = Pair::new();
    check_owned(&mut p, &sadd_range("s", -256, 256));
    p.script(
        "SCARD s\n\
         OBJECT ENCODING s\n\
         SMEMBERS s\n\
         SSCAN s 0\n\
         SRANDMEMBER s 512\n\
         SADD s 100\n\
         OBJECT ENCODING s\n\
         SADD s 256\n\
         OBJECT ENCODING s\n\
         SCARD s\n\
         ~SMEMBERS s\n\
         SREM s 256\n\
         OBJECT ENCODING s\n\
         ~SMEMBERS s\n\
         SADD t 1 2 x\n\
         SREM t x\n\
         OBJECT ENCODING t\n\
         ~SMEMBERS t\n\
         SISMEMBER t 1\n\
         SADD t 3\n\
         SCARD t\n",
    );
    // The set algebra builds fresh sets: a hash table of integers gives an
    // intset result (sorted reply) when it fits.
    p.script(
        "SUNION t\n\
         SDIFF t missing\n\
         SUNIONSTORE u t\n\
         OBJECT ENCODING u\n\
         SMEMBERS u\n\
         SINTERSTORE u t t\n\
         OBJECT ENCODING u\n\
         SMEMBERS u\n\
         SUNIONSTORE big s\n\
         OBJECT ENCODING big\n\
         SCARD big\n\
         SPOP t 100\n\
         EXISTS t\n",
    );
}

#[test]
fn wrong_arity_and_wrong_type() {
    check_both_protocols(
        "SET str v\n\
         SADD s 1\n\
         SADD\n\
         SADD s\n\
         SREM s\n\
         SMEMBERS\n\
         SMEMBERS s extra\n\
         SISMEMBER s\n\
         SISMEMBER s a b\n\
         SMISMEMBER s\n\
         SCARD\n\
         SCARD s s\n\
         SPOP\n\
         SPOP s 1 2\n\
         SRANDMEMBER\n\
         SRANDMEMBER s 1 2\n\
         SINTER\n\
         SINTERCARD 1\n\
         SUNION\n\
         SDIFF\n\
         SINTERSTORE d\n\
         SUNIONSTORE d\n\
         SDIFFSTORE d\n\
         SMOVE s d\n\
         SMOVE s d a b\n\
         SSCAN s\n\
         SADD str a\n\
         SREM str a\n\
         SMEMBERS str\n\
         SISMEMBER str a\n\
         SMISMEMBER str a\n\
         SCARD str\n\
         SPOP str\n\
         SPOP str 2\n\
         SPOP str 0\n\
         SRANDMEMBER str\n\
         SRANDMEMBER str 2\n\
         SRANDMEMBER str 0\n\
         SINTER str\n\
         SINTER s str\n\
         SINTER missing str\n\
         SINTER str missing\n\
         SINTERCARD 2 s str\n\
         SINTERCARD 2 missing str\n\
         SUNION s str\n\
         SUNION missing str s\n\
         SDIFF str s\n\
         SDIFF s str\n\
         SDIFF missing str\n\
         SINTERSTORE d s str\n\
         SINTERSTORE d missing str\n\
         SUNIONSTORE d s str\n\
         SDIFFSTORE d s str\n\
         SDIFFSTORE d missing str\n\
         EXISTS d\n\
         SMOVE str s a\n\
         SMOVE s str 1\n\
         SMOVE missing str 1\n\
         SMOVE str missing 1\n\
         SSCAN str 0\n\
         SSCAN str x\n\
         GET str\n\
         SMEMBERS s\n",
    );
}

#[test]
fn store_commands_overwrite_and_delete_the_destination() {
    check_both_protocols(
        "SADD a 1 2 3 4\n\
         SADD b 3 4 5\n\
         SADD c 4 5 6\n\
         SET d v\n\
         EXPIRE d 1000\n\
         SINTERSTORE d a b\n\
         TTL d\n\
         TYPE d\n\
         SMEMBERS d\n\
         OBJECT ENCODING d\n\
         SUNIONSTORE d a b c\n\
         SMEMBERS d\n\
         SDIFFSTORE d a b c\n\
         SMEMBERS d\n\
         SINTERSTORE d a missing\n\
         EXISTS d\n\
         SET d v\n\
         SINTERSTORE d a c b\n\
         SMEMBERS d\n\
         SINTERSTORE d a c missing\n\
         EXISTS d\n\
         SET d v\n\
         SDIFFSTORE d a a\n\
         EXISTS d\n\
         SET d v\n\
         SUNIONSTORE d missing other\n\
         EXISTS d\n\
         SINTERSTORE d missing\n\
         SDIFFSTORE d missing a\n\
         SUNIONSTORE a a b\n\
         SMEMBERS a\n\
         SINTERSTORE b a b\n\
         SMEMBERS b\n\
         SDIFFSTORE a a c\n\
         SMEMBERS a\n\
         SDIFFSTORE a a a\n\
         EXISTS a\n",
    );
}

#[test]
fn intersection_union_and_difference() {
    check_both_protocols(
        "SADD a 5 1 3 2 4\n\
         SADD b 4 3 9\n\
         SADD c 3 4 5\n\
         SADD w x y 3 4 z\n\
         SINTER a\n\
         SINTER a b\n\
         SINTER b a c\n\
         SINTER a missing\n\
         SINTER missing a\n\
         SINTER a a\n\
         ~SINTER w a\n\
         ~SINTER a w\n\
         ~SINTER w w\n\
         SUNION a b c\n\
         SUNION missing a\n\
         SUNION missing other\n\
         ~SUNION a w\n\
         SDIFF a b\n\
         SDIFF a b c\n\
         SDIFF a missing\n\
         SDIFF missing a\n\
         SDIFF a a\n\
         SDIFF a b a\n\
         SDIFF a w\n\
         ~SDIFF w a\n\
         ~SDIFF w b c\n\
         SINTERCARD 1 a\n\
         SINTERCARD 2 a b\n\
         SINTERCARD 3 a b c\n\
         SINTERCARD 2 a w\n\
         SINTERCARD 2 a missing\n\
         SINTERCARD 2 a b LIMIT 1\n\
         SINTERCARD 2 a b LIMIT 0\n\
         SINTERCARD 2 a b LIMIT 100\n\
         SINTERCARD 1 a limit 3 LIMIT 2\n",
    );
}

#[test]
fn sintercard_argument_errors() {
    check_both_protocols(
        "SADD a 1 2 3\n\
         SINTERCARD 0 a\n\
         SINTERCARD -1 a\n\
         SINTERCARD x a\n\
         SINTERCARD 1.5 a\n\
         SINTERCARD 9223372036854775808 a\n\
         SINTERCARD 2 a\n\
         SINTERCARD 3 a b\n\
         SINTERCARD 1 a LIMIT\n\
         SINTERCARD 1 a LIMIT -1\n\
         SINTERCARD 1 a LIMIT x\n\
         SINTERCARD 1 a LIMIT 1 extra\n\
         SINTERCARD 1 a FOO 1\n\
         SINTERCARD 1 a b\n\
         SINTERCARD 2 missing a LIMIT -1\n",
    );
}

#[test]
fn smove_between_sets() {
    check_both_protocols(
        "SADD src 1 2 3\n\
         SADD dst 3 x\n\
         SMOVE src dst 1\n\
         SMEMBERS src\n\
         ~SMEMBERS dst\n\
         SMOVE src dst 3\n\
         SMEMBERS src\n\
         SMOVE src dst 9\n\
         SMOVE missing dst 1\n\
         SMOVE src src 2\n\
         SMOVE src src 7\n\
         SMOVE src new 2\n\
         EXISTS src\n\
         SMEMBERS new\n\
         OBJECT ENCODING new\n\
         SMOVE dst new2 x\n\
         OBJECT ENCODING new2\n\
         SMEMBERS new2\n\
         SMOVE missing missing a\n\
         SMOVE new new 2\n",
    );
}

#[test]
fn deterministic_spop_and_srandmember() {
    check_both_protocols(
        "SADD s 3 1 2\n\
         SRANDMEMBER s 3\n\
         SRANDMEMBER s 100\n\
         SRANDMEMBER s 0\n\
         SRANDMEMBER s -0\n\
         SRANDMEMBER missing\n\
         SRANDMEMBER missing 5\n\
         SRANDMEMBER missing -5\n\
         SRANDMEMBER missing 0\n\
         SRANDMEMBER s x\n\
         SRANDMEMBER s 1.5\n\
         SRANDMEMBER s -9223372036854775808\n\
         SRANDMEMBER s 9223372036854775808\n\
         SRANDMEMBER missing x\n\
         SPOP s 0\n\
         SPOP s -1\n\
         SPOP s x\n\
         SPOP missing -1\n\
         SPOP missing 0\n\
         SPOP missing 3\n\
         SPOP missing\n\
         SPOP s 3\n\
         EXISTS s\n\
         SADD s 9 8\n\
         SPOP s 9223372036854775807\n\
         SADD one only\n\
         SRANDMEMBER one\n\
         SRANDMEMBER one 1\n\
         SRANDMEMBER one -3\n\
         SPOP one\n\
         EXISTS one\n\
         SADD one 5\n\
         SPOP one 1\n\
         EXISTS one\n\
         SADD w a b c\n\
         ~SRANDMEMBER w 3\n\
         ~SPOP w 5\n\
         EXISTS w\n",
    );
}

/// Pops and samples a set on both servers and checks each side on its own:
/// sizes match Redis, members are distinct (unless repeats are allowed) and
/// drawn from the set, and popped members are gone.
#[test]
fn random_spop_and_srandmember_properties() {
    let mut p = Pair::new();
    for (key, members) in [
        ("ints", (0..40).map(|i| i.to_string()).collect::<Vec<_>>()),
        (
            "words",
            (0..40).map(|i| format!("m{i}")).collect::<Vec<_>>(),
        ),
        ("big", (0..600).map(|i| i.to_string()).collect::<Vec<_>>()),
    ] {
        let all: BTreeSet<Vec<u8>> = members.iter().map(|m| m.as_bytes().to_vec()).collect();
        let mut add = vec!["SADD".to_string(), key.to_string()];
        add.extend(members.iter().cloned());
        check_owned(&mut p, &add);
        // SRANDMEMBER with every strategy: one, few (draws), many (copy and
        // remove), negative (repeats).
        for count in ["1", "3", "25", "39", "-5", "-100"] {
            let (r, h) = p.both(&["SRANDMEMBER", key, count]);
            let (r, h) = (bulk_payloads(&r), bulk_payloads(&h));
            assert_eq!(r.len(), h.len(), "SRANDMEMBER {key} {count} sizes");
            for side in [&r, &h] {
                assert!(
                    side.iter().all(|m| all.contains(m)),
                    "SRANDMEMBER {key} {count}: foreign member"
                );
                if !count.starts_with('-') {
                    let distinct: BTreeSet<_> = side.iter().collect();
                    assert_eq!(
                        distinct.len(),
                        side.len(),
                        "SRANDMEMBER {key} {count}: repeats"
                    );
                }
            }
        }
        for _ in 0..5 {
            let (r, h) = p.both(&["SRANDMEMBER", key]);
            for side in [&r, &h] {
                assert!(side.starts_with(b"$"), "SRANDMEMBER {key}: {}", show(side));
            }
        }
        // SPOP: one, a few (pop each), most (keep the survivors).
        let mut remaining = (all.clone(), all.clone());
        for count in [None, Some("3"), Some("30")] {
            let args: Vec<&str> = match count {
                None => vec!["SPOP", key],
                Some(n) => vec!["SPOP", key, n],
            };
            let (r, h) = p.both(&args);
            let (r, h) = match count {
                None => (vec![single_bulk(&r)], vec![single_bulk(&h)]),
                Some(_) => (bulk_payloads(&r), bulk_payloads(&h)),
            };
            assert_eq!(r.len(), h.len(), "{args:?} sizes");
            for (side, left) in [(&r, &mut remaining.0), (&h, &mut remaining.1)] {
                for m in side.iter() {
                    assert!(
                        left.remove(m),
                        "{args:?} popped {} twice or from nowhere",
                        show(m)
                    );
                }
            }
            p.check(&["SCARD", key]);
        }
        let (r, h) = p.both(&["SMEMBERS", key]);
        assert_eq!(
            bulk_payloads(&r).into_iter().collect::<BTreeSet<_>>(),
            remaining.0
        );
        assert_eq!(
            bulk_payloads(&h).into_iter().collect::<BTreeSet<_>>(),
            remaining.1
        );
        // An intset stays sorted whatever was popped.
        if key == "ints" {
            let members = bulk_payloads(&h);
            let numbers: Vec<i64> = members
                .iter()
                .map(|m| {
                    std::str::from_utf8(m)
                        .expect("digits")
                        .parse()
                        .expect("integer")
                })
                .collect();
            assert!(
                numbers.windows(2).all(|w| w[0] < w[1]),
                "intset not sorted: {numbers:?}"
            );
        }
        p.check(&["OBJECT", "ENCODING", key]);
    }
}

fn single_bulk(reply: &[u8]) -> Vec<u8> {
    assert_eq!(reply.first(), Some(&b'$'), "not a bulk: {}", show(reply));
    let start = reply
        .windows(2)
        .position(|w| w == b"\r\n")
        .expect("bulk header")
        + 2;
    reply[start..reply.len() - 2].to_vec()
}

#[test]
fn sscan_options_and_errors() {
    check_both_protocols(
        "SADD s 3 1 2 10 20\n\
         SSCAN s 0\n\
         SSCAN s 0 COUNT 1\n\
         SSCAN s 0 MATCH 1*\n\
         SSCAN s 0 match 2? count 100\n\
         SSCAN s 0 MATCH *\n\
         SSCAN s 5\n\
         SSCAN s 0 COUNT 0\n\
         SSCAN s 0 COUNT -1\n\
         SSCAN s 0 COUNT x\n\
         SSCAN s 0 MATCH\n\
         SSCAN s 0 TYPE set\n\
         SSCAN s 0 FOO bar\n\
         SSCAN s x\n\
         SSCAN s -1\n\
         SSCAN s 18446744073709551616\n\
         SSCAN s \" 1\"\n\
         SSCAN missing 0\n\
         SSCAN missing 0 COUNT 0\n\
         SSCAN missing x\n\
         SADD w alpha beta gamma\n\
         SSCAN w 0 COUNT 100 MATCH zz*\n",
    );
}

/// Full SSCAN iterations of a large hash-table set return every member on
/// both servers (cursors differ: the tables hash differently).
#[test]
fn sscan_iterates_a_hashtable_completely() {
    let mut p = Pair::new();
    let mut add = vec!["SADD".to_string(), "big".to_string()];
    add.extend((0..1000).map(|i| format!("member:{i}")));
    check_owned(&mut p, &add);
    p.check(&["OBJECT", "ENCODING", "big"]);
    for (pattern, expected) in [(None, 1000), (Some("member:1*"), 111)] {
        let mut seen = (BTreeSet::new(), BTreeSet::new());
        for (conn, seen) in [(&mut p.r, &mut seen.0), (&mut p.h, &mut seen.1)] {
            let mut cursor = b"0".to_vec();
            let mut calls = 0;
            loop {
                let mut args: Vec<&[u8]> = vec![b"SSCAN", b"big", &cursor, b"COUNT", b"7"];
                if let Some(pattern) = pattern {
                    args.extend([b"MATCH".as_slice(), pattern.as_bytes()]);
                }
                let reply = conn.call(&args);
                let parts = array_elements(&reply);
                assert_eq!(parts.len(), 2, "SSCAN reply: {}", show(&reply));
                cursor = single_bulk(&parts[0]);
                seen.extend(bulk_payloads(&parts[1]));
                calls += 1;
                assert!(calls < 10_000, "SSCAN never finished");
                if cursor == b"0" {
                    break;
                }
            }
        }
        assert_eq!(seen.0.len(), expected, "redis SSCAN {pattern:?}");
        let missing: Vec<String> = seen.0.difference(&seen.1).map(|m| show(m)).collect();
        let extra: Vec<String> = seen.1.difference(&seen.0).map(|m| show(m)).collect();
        assert!(
            missing.is_empty() && extra.is_empty(),
            "hozon SSCAN {pattern:?}: missing {missing:?}, extra {extra:?}"
        );
    }
}

#[test]
fn command_info_for_the_set_family() {
    let mut p = Pair::new();
    for name in [
        "sadd",
        "srem",
        "smembers",
        "sismember",
        "smismember",
        "scard",
        "spop",
        "srandmember",
        "sinter",
        "sintercard",
        "sunion",
        "sdiff",
        "sinterstore",
        "sunionstore",
        "sdiffstore",
        "smove",
        "sscan",
    ] {
        let (r, h) = p.both(&["COMMAND", "INFO", name]);
        // Name, arity, flags, first key, last key, step: the first six fields.
        let (r, h) = (array_elements(&r), array_elements(&h));
        let (r, h) = (array_elements(&r[0]), array_elements(&h[0]));
        assert_eq!(r[..6], h[..6], "COMMAND INFO {name}");
    }
}

// ---------------------------------------------------------------------------
// Random command sequences.

const KEYS: &[&str] = &["a", "b", "c"];
const MEMBERS: &[&str] = &["1", "2", "3", "-7", "10", "x", "y", "01", ""];

#[derive(Clone, Debug)]
struct Op(Vec<String>);

fn pick<'a>(g: &mut Gen, items: &[&'a str]) -> &'a str {
    g.choose(items).expect("non-empty choice")
}

fn members(g: &mut Gen, max: usize) -> Vec<String> {
    let n = 1 + usize::arbitrary(g) % max;
    (0..n).map(|_| pick(g, MEMBERS).to_string()).collect()
}

fn keys(g: &mut Gen) -> Vec<String> {
    let n = 1 + usize::arbitrary(g) % 3;
    (0..n).map(|_| pick(g, KEYS).to_string()).collect()
}

impl Arbitrary for Op {
    fn arbitrary(g: &mut Gen) -> Op {
        let key = pick(g, KEYS).to_string();
        let key2 = pick(g, KEYS).to_string();
        let member = pick(g, MEMBERS).to_string();
        let mut words: Vec<String> = match u8::arbitrary(g) % 26 {
            0..=4 | 22 => vec!["SADD".into(), key],
            5 | 6 => vec!["SREM".into(), key],
            7 => vec!["SISMEMBER".into(), key, member],
            8 => vec!["SMISMEMBER".into(), key],
            9 => vec!["SCARD".into(), key],
            10 => vec!["SMEMBERS".into(), key],
            11 | 23 => vec!["SINTER".into()],
            12 | 24 => vec!["SUNION".into()],
            13 | 25 => vec!["SDIFF".into()],
            14 => vec![
                pick(g, &["SINTERSTORE", "SUNIONSTORE", "SDIFFSTORE"]).into(),
                key,
            ],
            15 => {
                let ks = keys(g);
                let mut v = vec!["SINTERCARD".into(), ks.len().to_string()];
                v.extend(ks);
                if bool::arbitrary(g) {
                    v.extend(["LIMIT".into(), (u8::arbitrary(g) % 4).to_string()]);
                }
                return Op(v);
            }
            16 => vec!["SMOVE".into(), key, key2, member],
            17 => vec!["SPOP".into(), key, pick(g, &["0", "100"]).into()],
            18 => vec!["SRANDMEMBER".into(), key, pick(g, &["0", "100"]).into()],
            19 => vec![
                "SSCAN".into(),
                key,
                "0".into(),
                "COUNT".into(),
                "100".into(),
            ],
            20 => vec!["SET".into(), key, member],
            _ => vec!["DEL".into(), key],
        };
        match words[0].as_str() {
            "SADD" => words.extend(members(g, 6)),
            "SREM" | "SMISMEMBER" => words.extend(members(g, 3)),
            "SINTER" | "SUNION" | "SDIFF" | "SINTERSTORE" | "SUNIONSTORE" | "SDIFFSTORE" => {
                words.extend(keys(g))
            }
            "SSCAN" if bool::arbitrary(g) => {
                words.extend(["MATCH".into(), pick(g, &["1*", "?", "[xy]", "*0*"]).into()])
            }
            _ => {}
        }
        Op(words)
    }
}

/// The keys whose encoding decides the order of `words`' reply.
fn order_sources(words: &[String]) -> &[String] {
    match words[0].as_str() {
        "SMEMBERS" | "SRANDMEMBER" | "SSCAN" => &words[1..2],
        "SINTER" => &words[1..],
        _ => &[],
    }
}

/// True when every element of a flat aggregate reply is an integer in
/// canonical form (then a fresh result set is an intset: sorted).
fn all_canonical_integers(reply: &[u8]) -> bool {
    bulk_payloads(reply).iter().all(|m| {
        std::str::from_utf8(m)
            .ok()
            .and_then(|s| s.parse::<i64>().ok())
            .is_some_and(|v| v.to_string().as_bytes() == m.as_slice())
    })
}

/// Compares one reply: byte for byte when Redis's order is deterministic
/// (intset sources, all-integer algebra results), as a multiset otherwise.
fn replies_match(p: &mut Pair, words: &[String], r: &[u8], h: &[u8]) -> bool {
    if r == h {
        return true;
    }
    if r.first() != h.first() || !matches!(r.first(), Some(b'*' | b'~')) {
        return false;
    }
    let ordered = match words[0].as_str() {
        "SUNION" | "SDIFF" => all_canonical_integers(r),
        "SPOP" => all_canonical_integers(r),
        _ => order_sources(words).iter().all(|k| {
            let encoding = p.redis(&["OBJECT", "ENCODING", k]);
            encoding.as_slice() == b"$6\r\nintset\r\n"
        }),
    };
    if ordered {
        return false;
    }
    let (r, h) = if words[0] == "SSCAN" {
        let (r, h) = (array_elements(r), array_elements(h));
        if r[0] != h[0] {
            return false;
        }
        (r[1].clone(), h[1].clone())
    } else {
        (r.to_vec(), h.to_vec())
    };
    let mut re = array_elements(&r);
    let mut he = array_elements(&h);
    re.sort();
    he.sort();
    re == he
}

/// Runs `ops` from an empty keyspace and compares every reply, then the
/// final contents and encoding of every key.
fn random_sequence_matches(ops: Vec<Op>, resp3: bool) -> TestResult {
    let mut all = vec![del_command(KEYS)];
    all.extend(ops.into_iter().map(|op| op.0));
    for key in KEYS {
        all.push(vec!["SMEMBERS".into(), key.to_string()]);
        all.push(vec!["OBJECT".into(), "ENCODING".into(), key.to_string()]);
        all.push(vec!["TYPE".into(), key.to_string()]);
    }
    with_thread_pair(resp3, |p| compare_sequence(p, &all, 0, replies_match))
}

#[test]
fn random_command_sequences_match_redis_resp2() {
    quickcheck_ops(40, 150, |ops: Vec<Op>| random_sequence_matches(ops, false));
}

#[test]
fn random_command_sequences_match_redis_resp3() {
    quickcheck_ops(40, 100, |ops: Vec<Op>| random_sequence_matches(ops, true));
}

#[test]
fn ttls_survive_in_place_changes_and_expired_sets_are_missing() {
    let mut p = Pair::new();
    p.script(
        "SADD s 1 2 3 4 5 6 7 8 9 10\n\
         EXPIRE s 1000\n",
    );
    // Popping most members rebuilds the set from the survivors; the TTL
    // stays. Which members go is random: compare the sizes only.
    let (r, h) = p.both(&["SPOP", "s", "9"]);
    assert_eq!(bulk_payloads(&r).len(), bulk_payloads(&h).len());
    p.script(
        "TTL s\n\
         SCARD s\n\
         SADD s 20\n\
         SREM s 20\n\
         SADD d x\n\
         EXPIRE d 1000\n\
         SMOVE s d 99\n\
         TTL d\n\
         SADD t 5\n\
         SMOVE t d 5\n\
         TTL d\n\
         SUNIONSTORE d d\n\
         TTL d\n\
         SINTERCARD 2 s LIMIT\n\
         SADD gone 1 2\n\
         SADD other 2 3\n\
         PEXPIRE gone 1\n",
    );
    std::thread::sleep(std::time::Duration::from_millis(20));
    p.script(
        "SCARD gone\n\
         SINTER other gone\n\
         SUNION other gone\n\
         SDIFF gone other\n\
         SMOVE gone other 1\n\
         SPOP gone\n\
         SRANDMEMBER gone 2\n\
         SSCAN gone 0\n\
         SADD gone 7\n\
         TTL gone\n\
         SMEMBERS gone\n",
    );
}
