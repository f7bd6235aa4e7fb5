//! Fairness of the commands that pick at random: SRANDMEMBER, SPOP,
//! ZRANDMEMBER, HRANDFIELD and RANDOMKEY, for every encoding and every
//! code path of the count. Each check draws many times and compares the
//! histogram of what came back with the uniform distribution (chi-square,
//! df = members − 1, at the limits Redis's test suite uses: 40 for ten
//! members); positive counts must also return distinct members, as many
//! as asked for (or the whole collection).
//!
//! The engine's generator is seeded from `HOZON_SEED` (printed when a
//! test fails); the hash tables' layouts come from the per-process hash
//! seed, so a failure on a table reproduces with the seed in most, not all,
//! runs.

use std::collections::{HashMap, HashSet};

use super::test_support::Fixture;
use crate::rand::fairness::{self, assert_uniform, Seed};
use crate::reply::Reply;
use crate::types::{Set, Value};

/// Draws per check for ten members: 1000 each (Redis's suite draws 100
/// each; more draws make a bias easier to see at the same limit).
const DRAWS: usize = 10_000;

/// Ten members of a set kept as a hash table (Redis's histogram test).
const SET_TABLE: [&str; 10] = [
    "1",
    "5",
    "10",
    "50",
    "125",
    "MARY",
    "PATRICIA",
    "LINDA",
    "BARBARA",
    "ELIZABETH",
];
/// Ten members of an intset.
const SET_INTS: [&str; 10] = ["0", "1", "2", "3", "4", "5", "6", "7", "8", "9"];

/// A member too long for a listpack (over the 64-byte default), which
/// makes a sorted set a skiplist and a hash a hash table.
fn long_member() -> String {
    "x".repeat(70)
}

/// Ten members: short ones (listpack) or one long one among them.
fn ten_members(long: bool) -> Vec<String> {
    let mut m: Vec<String> = ["a", "b", "c", "d", "e", "f", "g", "h", "i"]
        .iter()
        .map(|s| s.to_string())
        .collect();
    m.push(if long { long_member() } else { "j".into() });
    m
}

fn fixture(seed: &Seed) -> Fixture {
    let mut fx = Fixture::new();
    fx.engine.core().rng = seed.rng(0);
    fx
}

/// The bulk strings of a reply (one bulk, or an array or set of them).
fn bulks(reply: Reply) -> Vec<Vec<u8>> {
    match reply {
        Reply::Bulk(b) => vec![b],
        Reply::Array(items) | Reply::Set(items) => items
            .into_iter()
            .map(|r| match r {
                Reply::Bulk(b) => b,
                other => panic!("not a bulk string: {other:?}"),
            })
            .collect(),
        other => panic!("not bulk strings: {other:?}"),
    }
}

/// Counts draws per member; anything else is a failure.
struct Histogram {
    index: HashMap<Vec<u8>, usize>,
    counts: Vec<u64>,
}

impl Histogram {
    fn new(members: &[String]) -> Histogram {
        let index = members
            .iter()
            .enumerate()
            .map(|(i, m)| (m.as_bytes().to_vec(), i))
            .collect();
        Histogram {
            index,
            counts: vec![0; members.len()],
        }
    }

    fn add(&mut self, member: &[u8]) {
        match self.index.get(member) {
            Some(&i) => self.counts[i] += 1,
            None => panic!("drew {:?}, not a member", String::from_utf8_lossy(member)),
        }
    }

    fn total(&self) -> u64 {
        self.counts.iter().sum()
    }

    fn check(&self, what: &str) -> f64 {
        let chi = assert_uniform(what, &self.counts);
        eprintln!("{what}: chi-square {chi:.1}");
        chi
    }
}

fn strings(members: &[&str]) -> Vec<String> {
    members.iter().map(|s| s.to_string()).collect()
}

fn create_set(fx: &mut Fixture, key: &str, members: &[String]) {
    fx.run(&format!("DEL {key}"));
    fx.run(&format!("SADD {key} {}", members.join(" ")));
}

/// The two set encodings, with their members.
fn set_cases() -> Vec<(&'static str, Vec<String>)> {
    vec![
        ("intset", strings(&SET_INTS)),
        ("hashtable", strings(&SET_TABLE)),
    ]
}

/// Asks `line` (with a positive `count`) repeatedly, checking each reply
/// has min(count, size) distinct members, until about `DRAWS` members came
/// back; returns their histogram.
fn distinct_draws(fx: &mut Fixture, line: &str, count: usize, members: &[String]) -> Histogram {
    let mut h = Histogram::new(members);
    let want = count.min(members.len());
    for _ in 0..DRAWS.div_ceil(want) {
        let got = bulks(fx.run(line));
        assert_eq!(got.len(), want, "{line}: reply length");
        let distinct: HashSet<&Vec<u8>> = got.iter().collect();
        assert_eq!(distinct.len(), want, "{line}: repeated members in {got:?}");
        for m in &got {
            h.add(m);
        }
    }
    h
}

#[test]
fn srandmember_without_count_is_fair() {
    let seed = fairness::seed("command::random_tests::srandmember_without_count_is_fair");
    let mut fx = fixture(&seed);
    for (encoding, members) in set_cases() {
        create_set(&mut fx, "s", &members);
        assert_eq!(fx.encoding("s"), Some(encoding));
        let mut h = Histogram::new(&members);
        for _ in 0..DRAWS {
            for m in bulks(fx.run("SRANDMEMBER s")) {
                h.add(&m);
            }
        }
        h.check(&format!("SRANDMEMBER s ({encoding})"));
    }
}

#[test]
fn srandmember_negative_count_is_fair() {
    let seed = fairness::seed("command::random_tests::srandmember_negative_count_is_fair");
    let mut fx = fixture(&seed);
    for (encoding, members) in set_cases() {
        create_set(&mut fx, "s", &members);
        let mut h = Histogram::new(&members);
        let got = bulks(fx.run(&format!("SRANDMEMBER s -{DRAWS}")));
        assert_eq!(got.len(), DRAWS);
        for m in &got {
            h.add(m);
        }
        h.check(&format!("SRANDMEMBER s -{DRAWS} ({encoding})"));
    }
}

#[test]
fn srandmember_positive_counts_are_fair_and_distinct() {
    let seed =
        fairness::seed("command::random_tests::srandmember_positive_counts_are_fair_and_distinct");
    let mut fx = fixture(&seed);
    for (encoding, members) in set_cases() {
        create_set(&mut fx, "s", &members);
        // 1: one draw; 2 and 3: draws until distinct; 5, 8 and 9: a copy
        // minus random members; 10 and 50: the whole set.
        for count in [1, 2, 3, 5, 8, 9, 10, 50] {
            let line = format!("SRANDMEMBER s {count}");
            let h = distinct_draws(&mut fx, &line, count, &members);
            h.check(&format!("{line} ({encoding})"));
        }
    }
}

#[test]
fn spop_without_count_is_fair() {
    let seed = fairness::seed("command::random_tests::spop_without_count_is_fair");
    let mut fx = fixture(&seed);
    for (encoding, members) in set_cases() {
        create_set(&mut fx, "s", &members);
        let mut h = Histogram::new(&members);
        for _ in 0..DRAWS {
            let popped = bulks(fx.run("SPOP s"));
            assert_eq!(popped.len(), 1);
            h.add(&popped[0]);
            // Put it back: the same table, the member in a chain again.
            let back = format!("SADD s {}", String::from_utf8_lossy(&popped[0]));
            assert_eq!(fx.run(&back), Reply::Int(1));
        }
        assert_eq!(fx.encoding("s"), Some(encoding));
        fx.engine.take_effects();
        h.check(&format!("SPOP s ({encoding})"));
    }
}

#[test]
fn spop_with_count_is_fair_and_distinct() {
    let seed = fairness::seed("command::random_tests::spop_with_count_is_fair_and_distinct");
    let mut fx = fixture(&seed);
    for (encoding, members) in set_cases() {
        create_set(&mut fx, "s", &members);
        // 1, 2, 3 and 8: popped one by one; 9: the survivor is picked
        // instead; 10 and 20: the whole set.
        for count in [1, 2, 3, 8, 9, 10, 20] {
            let line = format!("SPOP s {count}");
            let mut h = Histogram::new(&members);
            let want = count.min(members.len());
            for _ in 0..DRAWS.div_ceil(want) {
                let popped = bulks(fx.run(&line));
                assert_eq!(popped.len(), want, "{line}: reply length");
                let distinct: HashSet<&Vec<u8>> = popped.iter().collect();
                assert_eq!(distinct.len(), want, "{line}: repeated members");
                for m in &popped {
                    h.add(m);
                }
                let back: Vec<String> = popped
                    .iter()
                    .map(|m| String::from_utf8_lossy(m).into_owned())
                    .collect();
                fx.run(&format!("SADD s {}", back.join(" ")));
                assert_eq!(fx.run("SCARD s"), Reply::Int(members.len() as i64));
            }
            fx.engine.take_effects();
            h.check(&format!("{line} ({encoding})"));
        }
    }
}

/// A sorted set of ten members, scores 1..=10: a listpack, or a skiplist
/// when one member is long.
fn create_zset(fx: &mut Fixture, members: &[String]) {
    fx.run("DEL z");
    let args: Vec<String> = members
        .iter()
        .enumerate()
        .map(|(i, m)| format!("{} {m}", i + 1))
        .collect();
    fx.run(&format!("ZADD z {}", args.join(" ")));
}

fn zset_cases() -> Vec<(&'static str, Vec<String>)> {
    vec![
        ("listpack", ten_members(false)),
        ("skiplist", ten_members(true)),
    ]
}

#[test]
fn zrandmember_without_count_is_fair() {
    let seed = fairness::seed("command::random_tests::zrandmember_without_count_is_fair");
    let mut fx = fixture(&seed);
    for (encoding, members) in zset_cases() {
        create_zset(&mut fx, &members);
        assert_eq!(fx.encoding("z"), Some(encoding));
        let mut h = Histogram::new(&members);
        for _ in 0..DRAWS {
            for m in bulks(fx.run("ZRANDMEMBER z")) {
                h.add(&m);
            }
        }
        h.check(&format!("ZRANDMEMBER z ({encoding})"));
    }
}

#[test]
fn zrandmember_negative_count_is_fair() {
    let seed = fairness::seed("command::random_tests::zrandmember_negative_count_is_fair");
    let mut fx = fixture(&seed);
    for (encoding, members) in zset_cases() {
        create_zset(&mut fx, &members);
        let line = format!("ZRANDMEMBER z -{DRAWS}");
        let mut h = Histogram::new(&members);
        for m in bulks(fx.run(&line)) {
            h.add(&m);
        }
        assert_eq!(h.total(), DRAWS as u64);
        h.check(&format!("{line} ({encoding})"));
        // With scores: each member next to its own score.
        let line = format!("ZRANDMEMBER z -{DRAWS} WITHSCORES");
        let Reply::Array(items) = fx.run(&line) else {
            panic!("{line}: not an array");
        };
        assert_eq!(items.len(), 2 * DRAWS);
        let mut h = Histogram::new(&members);
        for pair in items.chunks(2) {
            let Reply::Bulk(m) = &pair[0] else {
                panic!("{line}: member {:?}", pair[0]);
            };
            let rank = members.iter().position(|x| x.as_bytes() == m.as_slice());
            let rank = rank.expect("a member");
            assert_eq!(pair[1], Reply::Double((rank + 1) as f64), "{line}: score");
            h.add(m);
        }
        h.check(&format!("{line} ({encoding})"));
    }
}

#[test]
fn zrandmember_positive_counts_are_fair_and_distinct() {
    let seed =
        fairness::seed("command::random_tests::zrandmember_positive_counts_are_fair_and_distinct");
    let mut fx = fixture(&seed);
    for (encoding, members) in zset_cases() {
        create_zset(&mut fx, &members);
        for count in [1, 2, 3, 5, 8, 9, 10, 20] {
            let line = format!("ZRANDMEMBER z {count}");
            let h = distinct_draws(&mut fx, &line, count, &members);
            h.check(&format!("{line} ({encoding})"));
        }
    }
}

/// A hash of ten fields (values v1..v10): a listpack, or a hash table when
/// one field is long.
fn create_hash(fx: &mut Fixture, fields: &[String]) {
    fx.run("DEL h");
    let args: Vec<String> = fields
        .iter()
        .enumerate()
        .map(|(i, f)| format!("{f} v{}", i + 1))
        .collect();
    fx.run(&format!("HSET h {}", args.join(" ")));
}

fn hash_cases() -> Vec<(&'static str, Vec<String>)> {
    vec![
        ("listpack", ten_members(false)),
        ("hashtable", ten_members(true)),
    ]
}

#[test]
fn hrandfield_without_count_is_fair() {
    let seed = fairness::seed("command::random_tests::hrandfield_without_count_is_fair");
    let mut fx = fixture(&seed);
    for (encoding, fields) in hash_cases() {
        create_hash(&mut fx, &fields);
        assert_eq!(fx.encoding("h"), Some(encoding));
        let mut h = Histogram::new(&fields);
        for _ in 0..DRAWS {
            for f in bulks(fx.run("HRANDFIELD h")) {
                h.add(&f);
            }
        }
        h.check(&format!("HRANDFIELD h ({encoding})"));
    }
}

#[test]
fn hrandfield_negative_count_is_fair() {
    let seed = fairness::seed("command::random_tests::hrandfield_negative_count_is_fair");
    let mut fx = fixture(&seed);
    for (encoding, fields) in hash_cases() {
        create_hash(&mut fx, &fields);
        let line = format!("HRANDFIELD h -{DRAWS}");
        let mut h = Histogram::new(&fields);
        for f in bulks(fx.run(&line)) {
            h.add(&f);
        }
        assert_eq!(h.total(), DRAWS as u64);
        h.check(&format!("{line} ({encoding})"));
        let line = format!("HRANDFIELD h -{DRAWS} WITHVALUES");
        let got = bulks(fx.run(&line));
        assert_eq!(got.len(), 2 * DRAWS);
        let mut h = Histogram::new(&fields);
        for pair in got.chunks(2) {
            let i = fields
                .iter()
                .position(|x| x.as_bytes() == pair[0].as_slice());
            let i = i.expect("a field");
            assert_eq!(pair[1], format!("v{}", i + 1).into_bytes(), "{line}: value");
            h.add(&pair[0]);
        }
        h.check(&format!("{line} ({encoding})"));
    }
}

#[test]
fn hrandfield_positive_counts_are_fair_and_distinct() {
    let seed =
        fairness::seed("command::random_tests::hrandfield_positive_counts_are_fair_and_distinct");
    let mut fx = fixture(&seed);
    for (encoding, fields) in hash_cases() {
        create_hash(&mut fx, &fields);
        for count in [1, 2, 3, 5, 8, 9, 10, 20] {
            let line = format!("HRANDFIELD h {count}");
            let h = distinct_draws(&mut fx, &line, count, &fields);
            h.check(&format!("{line} ({encoding})"));
        }
    }
}

#[test]
fn randomkey_is_fair() {
    let seed = fairness::seed("command::random_tests::randomkey_is_fair");
    let mut fx = fixture(&seed);
    let keys = ten_members(false);
    for k in &keys {
        fx.run(&format!("SET {k} 1"));
    }
    let mut h = Histogram::new(&keys);
    for _ in 0..DRAWS {
        for k in bulks(fx.run("RANDOMKEY")) {
            h.add(&k);
        }
    }
    h.check("RANDOMKEY");
}

/// A thousand members: hash tables of 1024 buckets whose chains have all
/// lengths from 0 to 5 or so, 100 draws per member.
#[test]
fn large_tables_are_fair() {
    let seed = fairness::seed("command::random_tests::large_tables_are_fair");
    let mut fx = fixture(&seed);
    let n = 1000;
    let draws = 100 * n;
    let members: Vec<String> = (0..n).map(|i| format!("m:{i}")).collect();

    create_set(&mut fx, "s", &members);
    let mut h = Histogram::new(&members);
    for m in bulks(fx.run(&format!("SRANDMEMBER s -{draws}"))) {
        h.add(&m);
    }
    h.check("SRANDMEMBER s -100000 (1000 members)");

    // Path 4 of a positive count: draws until distinct.
    let h = distinct_draws_n(&mut fx, "SRANDMEMBER s 10", 10, &members, draws);
    h.check("SRANDMEMBER s 10 (1000 members)");

    let mut h = Histogram::new(&members);
    for _ in 0..draws / 2 {
        let popped = bulks(fx.run("SPOP s"));
        h.add(&popped[0]);
        fx.run(&format!("SADD s {}", String::from_utf8_lossy(&popped[0])));
    }
    fx.engine.take_effects();
    h.check("SPOP s (1000 members, 50 draws each)");

    fx.run("DEL z");
    let args: Vec<String> = members.iter().map(|m| format!("1 {m}")).collect();
    fx.run(&format!("ZADD z {}", args.join(" ")));
    assert_eq!(fx.encoding("z"), Some("skiplist"));
    let mut h = Histogram::new(&members);
    for m in bulks(fx.run(&format!("ZRANDMEMBER z -{draws}"))) {
        h.add(&m);
    }
    h.check("ZRANDMEMBER z -100000 (1000 members)");

    fx.run("DEL h");
    let args: Vec<String> = members.iter().map(|m| format!("{m} 1")).collect();
    fx.run(&format!("HSET h {}", args.join(" ")));
    assert_eq!(fx.encoding("h"), Some("hashtable"));
    let mut h = Histogram::new(&members);
    for f in bulks(fx.run(&format!("HRANDFIELD h -{draws}"))) {
        h.add(&f);
    }
    h.check("HRANDFIELD h -100000 (1000 fields)");
    let h = distinct_draws_n(&mut fx, "HRANDFIELD h 10", 10, &members, draws);
    h.check("HRANDFIELD h 10 (1000 fields)");

    // RANDOMKEY over a keyspace of exactly these keys.
    fx.run("FLUSHALL");
    for k in &members {
        fx.run(&format!("SET {k} 1"));
    }
    let mut h = Histogram::new(&members);
    for _ in 0..draws / 2 {
        for k in bulks(fx.run("RANDOMKEY")) {
            h.add(&k);
        }
    }
    h.check("RANDOMKEY (1000 keys, 50 draws each)");
}

/// Like [`distinct_draws`] for `total` members in all.
fn distinct_draws_n(
    fx: &mut Fixture,
    line: &str,
    count: usize,
    members: &[String],
    total: usize,
) -> Histogram {
    let mut h = Histogram::new(members);
    for _ in 0..total / count {
        let got = bulks(fx.run(line));
        assert_eq!(got.len(), count, "{line}: reply length");
        let distinct: HashSet<&Vec<u8>> = got.iter().collect();
        assert_eq!(distinct.len(), count, "{line}: repeated members");
        for m in &got {
            h.add(m);
        }
    }
    h
}

/// A set whose hash table is in the middle of a resize (reads do not move
/// buckets, so it stays there): both tables hold members.
#[test]
fn a_set_being_resized_is_fair() {
    let seed = fairness::seed("command::random_tests::a_set_being_resized_is_fair");
    let mut fx = fixture(&seed);
    // 1024 members fill 1024 buckets; the 1025th starts the move to 2048.
    let members: Vec<String> = (0..1025).map(|i| format!("m:{i}")).collect();
    create_set(&mut fx, "s", &members[..1024]);
    fx.run(&format!("SADD s {}", members[1024]));
    let rehashing = |fx: &mut Fixture| match fx.engine.core().keyspace.db(0).get(b"s".as_slice()) {
        Some(Value::Set(set)) => match &**set {
            Set::Table(d) => d.is_rehashing(),
            Set::Intset(_) | Set::Packed(_) => panic!("s is a hash-table set"),
        },
        _ => panic!("s is a hash-table set"),
    };
    assert!(rehashing(&mut fx), "the table is being resized");
    let draws = 100 * members.len();
    let mut h = Histogram::new(&members);
    for m in bulks(fx.run(&format!("SRANDMEMBER s -{draws}"))) {
        h.add(&m);
    }
    assert!(rehashing(&mut fx), "still being resized");
    h.check("SRANDMEMBER s -102500 (1025 members, table being resized)");
}
