//! Differential tests: `maxmemory` and the eight eviction policies
//! (docs/memory.md), OBJECT IDLETIME/FREQ and RESTORE IDLETIME/FREQ.
//!
//! Memory figures differ between the servers, so each server gets a limit
//! relative to its own memory at the start, the same write load runs on
//! both (in parallel), and the same properties are asserted on both: which
//! kinds of keys go, that the memory stays near the limit, the OOM errors
//! byte for byte. The statistical checks (the hot set under LRU/LFU) hold on
//! Redis first, which shows the scenario checks what it says.

use crate::harness::{show, Conn, Pair};
use testkit::value::info_field;

/// Room above the memory at the start that the limit allows.
const HEADROOM: u64 = 2 * 1024 * 1024;
/// A value of 1000 bytes: the load is counted in keys of about 1 KB.
const VALUE: [u8; 1000] = [b'x'; 1000];

fn info_u64(conn: &mut Conn, section: &str, field: &str) -> u64 {
    info_field(conn, section, field)
        .unwrap_or_else(|| panic!("INFO {section} has no {field}"))
        .parse()
        .unwrap_or_else(|_| panic!("INFO {field} is not a number"))
}

fn used_memory(conn: &mut Conn) -> u64 {
    info_u64(conn, "memory", "used_memory")
}

fn evicted_keys(conn: &mut Conn) -> u64 {
    info_u64(conn, "stats", "evicted_keys")
}

#[track_caller]
fn ok(conn: &mut Conn, args: &[&str]) {
    let args: Vec<&[u8]> = args.iter().map(|a| a.as_bytes()).collect();
    let reply = conn.call(&args);
    assert_eq!(reply, b"+OK\r\n", "{}", show(&reply));
}

/// Sets `maxmemory` to the memory in use now plus [`HEADROOM`] under
/// `policy`; returns the limit.
fn limit_memory(conn: &mut Conn, policy: &str) -> u64 {
    ok(conn, &["CONFIG", "SET", "maxmemory-policy", policy]);
    let limit = used_memory(conn) + HEADROOM;
    ok(conn, &["CONFIG", "SET", "maxmemory", &limit.to_string()]);
    limit
}

/// Writes `count` keys `<prefix><i>` of 1 KB, pipelined, with `EX ttl(i)`
/// when `ttl` gives one; returns the error replies (OOM refusals).
fn write_keys(
    conn: &mut Conn,
    prefix: &str,
    count: usize,
    ttl: &dyn Fn(usize) -> Option<u64>,
) -> Vec<Vec<u8>> {
    let mut errors = Vec::new();
    for chunk in (0..count).collect::<Vec<_>>().chunks(100) {
        for &i in chunk {
            let key = format!("{prefix}{i}");
            let mut args: Vec<Vec<u8>> = vec![b"SET".to_vec(), key.into_bytes(), VALUE.to_vec()];
            if let Some(t) = ttl(i) {
                args.push(b"EX".to_vec());
                args.push(t.to_string().into_bytes());
            }
            let refs: Vec<&[u8]> = args.iter().map(Vec::as_slice).collect();
            conn.send_raw(&testkit::harness::encode_command(&refs));
        }
        for _ in chunk {
            let reply = conn.read_reply();
            if reply.starts_with(b"-") {
                errors.push(reply);
            }
        }
    }
    errors
}

/// How many of `<prefix>0..count` exist.
fn surviving(conn: &mut Conn, prefix: &str, count: usize) -> usize {
    (0..count)
        .filter(|i| {
            let key = format!("{prefix}{i}");
            conn.call(&[b"EXISTS", key.as_bytes()]) == b":1\r\n"
        })
        .count()
}

/// Runs `scenario` on Redis and on hozon at once; (redis, hozon).
fn on_both<T: Send>(p: &mut Pair, scenario: impl Fn(&mut Conn) -> T + Sync) -> (T, T) {
    let (r, h) = (&mut p.r, &mut p.h);
    std::thread::scope(|s| {
        let scenario = &scenario;
        let redis = s.spawn(move || scenario(r));
        let hozon = s.spawn(move || scenario(h));
        (
            redis.join().expect("the Redis side"),
            hozon.join().expect("the hozon side"),
        )
    })
}

const OOM: &[u8] = b"-OOM command not allowed when used memory > 'maxmemory'.\r\n";

#[test]
fn noeviction_refuses_deny_oom_commands_and_never_evicts() {
    let mut p = Pair::new();
    let (r, h) = on_both(&mut p, |c| {
        limit_memory(c, "noeviction");
        let errors = write_keys(c, "k", 6000, &|_| None);
        (errors, evicted_keys(c))
    });
    for (name, (errors, evicted)) in [("redis", r), ("hozon", h)] {
        assert!(
            !errors.is_empty(),
            "{name}: the load never reached the limit"
        );
        assert!(
            errors.iter().all(|e| e == OOM),
            "{name}: {}",
            show(&errors[0])
        );
        assert_eq!(evicted, 0, "{name} evicted under noeviction");
    }
    // Clearly over the limit from now on (the memory near the limit moves
    // with the servers' own buffers): 1 MB below what is in use.
    on_both(&mut p, |c| {
        let limit = used_memory(c) - 1024 * 1024;
        ok(c, &["CONFIG", "SET", "maxmemory", &limit.to_string()]);
    });
    // Over the limit: the refusals and what still runs, byte for byte.
    p.check(&["SET", "k0", "again"]);
    p.check(&["GET", "missing"]);
    p.check(&["EXISTS", "k1"]);
    p.check(&["MULTI"]);
    p.check(&["GET", "k1"]);
    p.check(&["EXEC"]);
    p.check(&["EVAL", "return redis.call('set', 'x', 1)", "0"]);
    p.check(&["EVAL", "return redis.call('get', 'x')", "0"]);
    p.check(&["EVAL", "#!lua\nreturn redis.call('set', 'x', 1)", "0"]);
    p.check(&["EVAL", "#!lua flags=\nreturn 1", "0"]);
    p.check(&[
        "EVAL",
        "#!lua flags=no-writes\nreturn redis.call('get', 'k1')",
        "0",
    ]);
    p.check(&[
        "EVAL",
        "#!lua flags=allow-oom\nreturn redis.call('set', 'x', 1)",
        "0",
    ]);
    p.check(&["DEL", "x"]);
    p.check(&["INCR", "counter"]);
    // DEL is not deny-oom: freeing keys lets writes in again.
    let dels: Vec<String> = (0..3000).map(|i| format!("k{i}")).collect();
    let mut args = vec!["DEL"];
    args.extend(dels.iter().map(String::as_str));
    p.both(&args);
    p.check(&["SET", "fresh", "1"]);
}

#[test]
fn volatile_policies_evict_only_keys_with_a_ttl() {
    for policy in [
        "volatile-lru",
        "volatile-lfu",
        "volatile-random",
        "volatile-ttl",
    ] {
        let mut p = Pair::new();
        let (r, h) = on_both(&mut p, |c| {
            limit_memory(c, policy);
            // Half the limit in keys without a TTL, then a load of several
            // times the limit in keys with one.
            let fixed = write_keys(c, "fixed", 800, &|_| None);
            let errors = write_keys(c, "vol", 8000, &|i| Some(100_000 + i as u64));
            (fixed, errors, surviving(c, "fixed", 800), evicted_keys(c))
        });
        for (name, (fixed, errors, kept, evicted)) in [("redis", r), ("hozon", h)] {
            assert!(fixed.is_empty(), "{policy} {name}: {}", show(&fixed[0]));
            assert!(errors.is_empty(), "{policy} {name}: {}", show(&errors[0]));
            assert_eq!(kept, 800, "{policy} {name} evicted a key without a TTL");
            assert!(evicted > 4000, "{policy} {name}: only {evicted} evicted");
        }
        // Once only keys without a TTL are left, writes are refused.
        let (r, h) = on_both(&mut p, |c| {
            let errors = write_keys(c, "more", 4000, &|_| None);
            (errors.first().cloned(), surviving(c, "fixed", 800))
        });
        assert_eq!(r.0.as_deref(), Some(OOM), "{policy}: Redis");
        assert_eq!(h.0.as_deref(), Some(OOM), "{policy}: hozon");
        assert_eq!((r.1, h.1), (800, 800), "{policy}");
    }
}

#[test]
fn volatile_ttl_evicts_the_shortest_ttls_first() {
    let mut p = Pair::new();
    let (r, h) = on_both(&mut p, |c| {
        limit_memory(c, "volatile-ttl");
        // TTLs in scrambled order: key i expires after 10_000 + (i*7919 mod 4000) s.
        let ttl = |i: usize| Some(10_000 + ((i * 7919) % 4000) as u64);
        let errors = write_keys(c, "t", 4000, &ttl);
        let (mut short, mut long) = (0, 0);
        for i in 0..4000 {
            let key = format!("t{i}");
            if c.call(&[b"EXISTS", key.as_bytes()]) == b":1\r\n" {
                if ttl(i).unwrap() < 12_000 {
                    short += 1;
                } else {
                    long += 1;
                }
            }
        }
        (errors, short, long)
    });
    for (name, (errors, short, long)) in [("redis", r), ("hozon", h)] {
        assert!(errors.is_empty(), "{name}: {}", show(&errors[0]));
        assert!(short + long < 3000, "{name}: the load did not evict");
        // The survivors are mostly those with the longer TTLs.
        assert!(
            long > 3 * short,
            "{name}: {short} short and {long} long TTLs survive"
        );
    }
}

/// Fraction of the hot keys and of the cold keys left after a load under
/// `policy`, the hot keys read between the rounds of writes.
fn hot_and_cold(c: &mut Conn, policy: &str) -> (f64, f64, u64, u64) {
    let limit = limit_memory(c, policy);
    const HOT: usize = 200;
    write_keys(c, "hot", HOT, &|_| None);
    let mut max_used = 0;
    for round in 0..5 {
        if policy.ends_with("lru") {
            // The LRU clock counts seconds: the rounds must be seconds apart.
            std::thread::sleep(std::time::Duration::from_millis(1100));
        }
        for _ in 0..if policy.ends_with("lfu") { 10 } else { 1 } {
            for i in 0..HOT {
                c.call(&[b"GET", format!("hot{i}").as_bytes()]);
            }
        }
        let errors = write_keys(c, &format!("cold{round}-"), 1000, &|_| None);
        assert!(errors.is_empty(), "{policy}: {}", show(&errors[0]));
        max_used = max_used.max(used_memory(c));
    }
    let hot = surviving(c, "hot", HOT) as f64 / HOT as f64;
    let cold: usize = (0..5)
        .map(|round| surviving(c, &format!("cold{round}-"), 1000))
        .sum();
    (hot, cold as f64 / 5000.0, max_used, limit)
}

#[test]
fn lru_and_lfu_keep_a_hot_working_set_far_better_than_random() {
    for policy in ["allkeys-lru", "allkeys-lfu", "allkeys-random"] {
        let mut p = Pair::new();
        let (r, h) = on_both(&mut p, |c| hot_and_cold(c, policy));
        for (name, (hot, cold, max_used, limit)) in [("redis", r), ("hozon", h)] {
            assert!(
                cold < 0.5,
                "{policy} {name}: the load did not evict ({cold})"
            );
            // The memory stays within the limit plus a small margin.
            assert!(
                max_used <= limit + limit / 20,
                "{policy} {name}: used {max_used} over the limit {limit}"
            );
            if policy == "allkeys-random" {
                assert!(hot < 0.8, "{policy} {name}: hot {hot} cold {cold}");
            } else {
                assert!(
                    hot > 0.9 && hot > 2.0 * cold,
                    "{policy} {name}: hot {hot} cold {cold}"
                );
            }
        }
    }
}

#[test]
fn memory_stays_within_the_limit_under_every_policy() {
    for policy in [
        "volatile-lru",
        "volatile-lfu",
        "volatile-random",
        "volatile-ttl",
        "allkeys-lru",
        "allkeys-lfu",
        "allkeys-random",
    ] {
        let mut p = Pair::new();
        let (r, h) = on_both(&mut p, |c| {
            let limit = limit_memory(c, policy);
            let mut max_used = 0;
            for round in 0..4 {
                let errors = write_keys(c, &format!("r{round}-"), 2000, &|i| Some(1000 + i as u64));
                assert!(errors.is_empty(), "{policy}: {}", show(&errors[0]));
                max_used = max_used.max(used_memory(c));
            }
            (max_used, limit, evicted_keys(c))
        });
        for (name, (max_used, limit, evicted)) in [("redis", r), ("hozon", h)] {
            assert!(evicted > 4000, "{policy} {name}: {evicted} evicted");
            assert!(
                max_used <= limit + limit / 20,
                "{policy} {name}: used {max_used} over the limit {limit}"
            );
        }
    }
}

/// A run cut short by `maxmemory-eviction-tenacity` continues from the
/// server's timer (Redis's `evictionTimeProc`): with the smallest tenacity
/// (a run stops after 16 keys), lowering `maxmemory` far below the memory
/// in use brings it under the limit without another command.
#[test]
fn a_cut_eviction_run_continues_without_commands() {
    let mut p = Pair::new();
    let (r, h) = on_both(&mut p, |c| {
        ok(c, &["CONFIG", "SET", "maxmemory-policy", "allkeys-random"]);
        ok(c, &["CONFIG", "SET", "maxmemory-eviction-tenacity", "0"]);
        let errors = write_keys(c, "t", 6000, &|_| None);
        assert!(errors.is_empty(), "{}", show(&errors[0]));
        let limit = used_memory(c) - 3 * 1024 * 1024;
        // CONFIG SET evicts at once: 16 keys, then the time limit.
        ok(c, &["CONFIG", "SET", "maxmemory", &limit.to_string()]);
        std::thread::sleep(std::time::Duration::from_millis(1500));
        // INFO's own run (before it executes) evicts 16 keys at most.
        (used_memory(c), limit, evicted_keys(c))
    });
    for (name, (used, limit, evicted)) in [("redis", r), ("hozon", h)] {
        assert!(
            evicted > 1000,
            "{name}: {evicted} evicted: the cut run did not continue"
        );
        // INFO's figure includes what INFO itself holds while it runs
        // (its reply so far, its lines): the eviction before it stops at
        // the limit, so a few hundred bytes over are INFO's, not the
        // keyspace's. A run that did not continue is megabytes over.
        assert!(
            used <= limit + 16 * 1024,
            "{name}: used {used} over the limit {limit}"
        );
    }
}

#[test]
fn evicted_keyspace_events_and_info() {
    let mut p = Pair::new();
    let (mut sub_r, mut sub_h) = p.connect_more();
    for c in [&mut sub_r, &mut sub_h] {
        c.call(&[b"SUBSCRIBE", b"__keyevent@0__:evicted"]);
    }
    p.check(&["CONFIG", "SET", "notify-keyspace-events", "Ee"]);
    let (r, h) = on_both(&mut p, |c| {
        limit_memory(c, "allkeys-random");
        write_keys(c, "e", 4000, &|_| None);
        evicted_keys(c)
    });
    assert!(r > 0 && h > 0, "nothing evicted: {r} {h}");
    for (name, c) in [("redis", &mut sub_r), ("hozon", &mut sub_h)] {
        let message = c.read_reply();
        assert!(
            show(&message).contains("__keyevent@0__:evicted"),
            "{name}: {}",
            show(&message)
        );
    }
}

#[test]
fn object_idletime_and_freq_match_redis() {
    let mut p = Pair::new();
    p.check(&["SET", "k", "v"]);
    p.check(&["SET", "n", "5"]);
    p.check(&["OBJECT", "FREQ", "k"]);
    // Both LRU clocks count whole seconds, so a second
    // boundary between the touch and OBJECT IDLETIME may add one.
    let idle_is = |p: &mut Pair, key: &str, seconds: i64| {
        let (r, h) = p.both(&["OBJECT", "IDLETIME", key]);
        for (name, reply) in [("redis", &r), ("hozon", &h)] {
            let ok = [seconds, seconds + 1]
                .iter()
                .any(|s| reply == format!(":{s}\r\n").as_bytes());
            assert!(ok, "{name}: OBJECT IDLETIME {key}: {}", show(reply));
        }
    };
    idle_is(&mut p, "k", 0);
    std::thread::sleep(std::time::Duration::from_millis(2100));
    // Lookups that do not touch (EXISTS, TYPE, TTL, OBJECT) leave it.
    for cmd in ["EXISTS", "TYPE", "TTL", "PTTL"] {
        p.check(&[cmd, "k"]);
    }
    let (r, h) = p.both(&["OBJECT", "IDLETIME", "k"]);
    for (name, reply) in [("redis", &r), ("hozon", &h)] {
        let idle: i64 = std::str::from_utf8(&reply[1..reply.len() - 2])
            .unwrap()
            .parse()
            .unwrap_or_else(|_| panic!("{name}: {}", show(reply)));
        assert!((2..=4).contains(&idle), "{name}: idle {idle}");
    }
    // A read touches.
    p.check(&["GET", "k"]);
    idle_is(&mut p, "k", 0);
    p.check(&["TOUCH", "n"]);
    idle_is(&mut p, "n", 0);
    // RESTORE IDLETIME under LRU; FREQ ignored there.
    let payload = testkit_dump(&mut p, "k");
    p.check_bytes(&[b"RESTORE", b"r1", b"0", &payload, b"IDLETIME", b"1000"]);
    idle_is(&mut p, "r1", 1000);
    p.check_bytes(&[b"RESTORE", b"r2", b"0", &payload, b"FREQ", b"100"]);
    idle_is(&mut p, "r2", 0);
    // Under LFU: FREQ counts, IDLETIME is refused.
    p.check(&["CONFIG", "SET", "maxmemory-policy", "allkeys-lfu"]);
    p.check(&["OBJECT", "IDLETIME", "k"]);
    p.check(&["SET", "f", "v"]);
    p.check(&["OBJECT", "FREQ", "f"]);
    // The first access after creation always increments (5 → 6).
    p.check(&["GET", "f"]);
    p.check(&["OBJECT", "FREQ", "f"]);
    p.check_bytes(&[b"RESTORE", b"r3", b"0", &payload, b"FREQ", b"100"]);
    p.check(&["OBJECT", "FREQ", "r3"]);
    p.check_bytes(&[b"RESTORE", b"r4", b"0", &payload, b"IDLETIME", b"1000"]);
    p.check(&["OBJECT", "FREQ", "r4"]);
    p.check(&["OBJECT", "FREQ", "missing"]);
    // With an LFU policy and a limit, small integers are not shared.
    p.check(&["CONFIG", "SET", "maxmemory", "1gb"]);
    p.check(&["SET", "n2", "7"]);
    p.check(&["OBJECT", "REFCOUNT", "n2"]);
}

/// Which lookups refresh a key's access clock (Redis's `lookupKey`, and
/// the lookups made with `LOOKUP_NOTOUCH` or straight from the table that
/// do not): every key below is created, left idle, then used by one
/// command; OBJECT IDLETIME then says on both servers whether it was
/// touched.
#[test]
fn which_lookups_touch_the_access_clock_matches_redis() {
    let mut p = Pair::new();
    let setup: &[&[&str]] = &[
        &["GEOADD", "g1", "0.1", "0.1", "a", "0.2", "0.2", "b"],
        &["COPY", "g1", "g2"],
        &["COPY", "g1", "g3"],
        &["COPY", "g1", "g4"],
        &["COPY", "g1", "g5"],
        &["COPY", "g1", "g6"],
        &["COPY", "g1", "g7"],
        &["COPY", "g1", "g8"],
        &["ZADD", "z1", "1", "a", "2", "b"],
        &["COPY", "z1", "z2"],
        &["COPY", "z1", "z3"],
        &["COPY", "z1", "z4"],
        &["COPY", "z1", "z5"],
        &["COPY", "z1", "z6"],
        &["COPY", "z1", "z7"],
        &["COPY", "z1", "z8"],
        &["COPY", "z1", "z9"],
        &["COPY", "z1", "z10"],
        &["SET", "k1", "hello"],
        &["COPY", "k1", "k2"],
        &["COPY", "k1", "k3"],
        &["COPY", "k1", "k4"],
        &["COPY", "k1", "k5"],
        &["COPY", "k1", "k6"],
        &["COPY", "k1", "k7"],
        &["COPY", "k1", "k8"],
        &["COPY", "k1", "k9"],
        &["COPY", "k1", "k10"],
        &["COPY", "k1", "k11"],
        &["COPY", "k1", "k12"],
        &["COPY", "k1", "k13"],
        &["COPY", "k1", "k14"],
        &["COPY", "k1", "k15"],
        &["COPY", "k1", "k16"],
        &["PFADD", "h1", "a", "b"],
        &["COPY", "h1", "h2"],
        &["RPUSH", "l1", "3", "1", "2"],
        &["COPY", "l1", "l2"],
        &["SADD", "s1", "a", "b"],
        &["COPY", "s1", "s2"],
    ];
    for cmd in setup {
        p.check(cmd);
    }
    std::thread::sleep(std::time::Duration::from_millis(3100));
    // (command, the key whose clock it may refresh)
    let cases: &[(&[&str], &str)] = &[
        (
            &[
                "GEOSEARCH",
                "g1",
                "FROMLONLAT",
                "0",
                "0",
                "BYRADIUS",
                "100",
                "km",
            ],
            "g1",
        ),
        (&["GEORADIUS", "g2", "0", "0", "100", "km"], "g2"),
        (
            &[
                "GEOSEARCHSTORE",
                "gd",
                "g3",
                "FROMLONLAT",
                "0",
                "0",
                "BYRADIUS",
                "100",
                "km",
            ],
            "g3",
        ),
        (&["GEODIST", "g4", "a", "b"], "g4"),
        (&["GEOPOS", "g5", "a"], "g5"),
        (&["GEOHASH", "g6", "a"], "g6"),
        (&["GEORADIUSBYMEMBER", "g7", "a", "100", "km"], "g7"),
        (
            &[
                "GEOSEARCH",
                "g8",
                "FROMMEMBER",
                "a",
                "BYBOX",
                "100",
                "100",
                "km",
            ],
            "g8",
        ),
        (&["ZUNIONSTORE", "zd", "2", "z1", "z2"], "z1"),
        (&["ZINTERCARD", "2", "z3", "z2"], "z3"),
        (&["ZRANGESTORE", "zd2", "z4", "0", "-1"], "z4"),
        (&["ZDIFF", "2", "z5", "z2"], "z5"),
        (&["ZRANDMEMBER", "z6"], "z6"),
        (&["ZMSCORE", "z7", "a"], "z7"),
        (&["ZSCAN", "z8", "0"], "z8"),
        (&["ZLEXCOUNT", "z9", "-", "+"], "z9"),
        (&["ZINTER", "2", "z10", "z2"], "z10"),
        (&["COPY", "k1", "kd"], "k1"),
        (&["RENAME", "k2", "k2new"], "k2new"),
        (&["DUMP", "k3"], "k3"),
        (&["OBJECT", "ENCODING", "k4"], "k4"),
        (&["MEMORY", "USAGE", "k5"], "k5"),
        (&["STRLEN", "k6"], "k6"),
        (&["EXPIRE", "k7", "100"], "k7"),
        (&["PERSIST", "k8"], "k8"),
        (&["TTL", "k9"], "k9"),
        (&["DEBUG", "OBJECT", "k10"], "k10"),
        (&["MOVE", "k11", "1"], "k11"),
        (&["RENAMENX", "k12", "k12new"], "k12new"),
        (&["TYPE", "k13"], "k13"),
        (&["SET", "k14", "x", "NX"], "k14"),
        (&["MSETNX", "k15", "x", "new15", "y"], "k15"),
        (&["SET", "k16", "x", "NX", "GET"], "k16"),
        (&["PFCOUNT", "h1"], "h1"),
        (&["PFMERGE", "hd", "h2"], "h2"),
        (&["SORT", "l1"], "l1"),
        (&["LPOS", "l2", "1"], "l2"),
        (&["SINTERCARD", "1", "s1"], "s1"),
        (&["SSCAN", "s2", "0"], "s2"),
    ];
    for (cmd, _) in cases {
        p.both(cmd);
    }
    let mut differences = Vec::new();
    for (cmd, key) in cases {
        // MOVE's key is in database 1 now.
        let select = if cmd[0] == "MOVE" { "1" } else { "0" };
        p.check(&["SELECT", select]);
        let (r, h) = p.both(&["OBJECT", "IDLETIME", key]);
        let touched = |reply: &[u8]| -> bool {
            let idle: i64 = std::str::from_utf8(&reply[1..reply.len() - 2])
                .ok()
                .and_then(|s| s.parse().ok())
                .unwrap_or_else(|| panic!("{cmd:?}: {}", show(reply)));
            idle < 2
        };
        let (rt, ht) = (touched(&r), touched(&h));
        if rt != ht {
            differences.push(format!("{cmd:?}: redis touched {rt}, hozon {ht}"));
        }
    }
    p.check(&["SELECT", "0"]);
    assert!(differences.is_empty(), "{differences:#?}");
}

/// DUMP of `key` on Redis (the payloads are interchangeable).
fn testkit_dump(p: &mut Pair, key: &str) -> Vec<u8> {
    let reply = p.redis(&["DUMP", key]);
    let header_end = reply.windows(2).position(|w| w == b"\r\n").unwrap();
    let len: usize = std::str::from_utf8(&reply[1..header_end])
        .unwrap()
        .parse()
        .unwrap();
    reply[header_end + 2..header_end + 2 + len].to_vec()
}
