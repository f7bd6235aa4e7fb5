//! Evictions on disk and on the wire (docs/memory.md): every key
//! `maxmemory` evicts reaches the AOF and the replicas as `DEL`, so the AOF
//! replayed (by hozon and by redis-server) and a redis-server replica hold
//! exactly the keyspace the master kept.

use std::time::{Duration, Instant};

use crate::harness::{start_hozon, start_redis, Conn};
use crate::interop::{dump, dump_in_redis};
use testkit::value::info_field;

/// A value of 1000 bytes.
const VALUE: [u8; 1000] = [b'v'; 1000];

fn info_u64(conn: &mut Conn, section: &str, field: &str) -> u64 {
    info_field(conn, section, field)
        .unwrap_or_else(|| panic!("INFO {section} has no {field}"))
        .parse()
        .expect("a number")
}

/// Limits memory to what is in use plus 2 MB under `policy`, then writes
/// 6000 keys of 1 KB (with TTLs far away: all of them under a volatile
/// policy, else half) and some reads;
/// returns how many keys were evicted, the limit lifted again.
fn evicting_load(conn: &mut Conn, policy: &str) -> u64 {
    let ok = b"+OK\r\n".to_vec();
    assert_eq!(
        conn.call(&[b"CONFIG", b"SET", b"maxmemory-policy", policy.as_bytes()]),
        ok
    );
    let limit = info_u64(conn, "memory", "used_memory") + 2 * 1024 * 1024;
    assert_eq!(
        conn.call(&[
            b"CONFIG",
            b"SET",
            b"maxmemory",
            limit.to_string().as_bytes()
        ]),
        ok
    );
    for i in 0..6000 {
        let key = format!("key:{i}");
        // Under a volatile policy every key has a TTL (the others could
        // not be evicted), else every other one.
        let reply = if i % 2 == 0 || policy.starts_with("volatile") {
            let ttl = (100_000 + (i * 7919) % 5000).to_string();
            conn.call(&[b"SET", key.as_bytes(), &VALUE, b"EX", ttl.as_bytes()])
        } else {
            conn.call(&[b"SET", key.as_bytes(), &VALUE])
        };
        assert_eq!(reply, ok, "{}", String::from_utf8_lossy(&reply));
        if i % 10 == 0 {
            conn.call(&[b"GET", format!("key:{}", i / 2).as_bytes()]);
        }
    }
    let evicted = info_u64(conn, "stats", "evicted_keys");
    assert!(evicted > 3000, "only {evicted} keys evicted");
    // No more evictions while the keyspace is compared.
    assert_eq!(conn.call(&[b"CONFIG", b"SET", b"maxmemory", b"0"]), ok);
    evicted
}

#[test]
fn evicted_keys_reach_the_aof_as_del_and_replay_gives_the_same_keyspace() {
    for policy in ["allkeys-lru", "volatile-ttl"] {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path().to_string_lossy().into_owned();
        let server = start_hozon(&["--appendonly", "yes", "--dir", &d]);
        let mut conn = Conn::connect(server.port);
        let evicted = evicting_load(&mut conn, policy);
        let before = dump(server.port);
        assert!(before.len() < 6000 - 3000);
        drop(server); // SIGKILL
        let aof = std::fs::read(dir.path().join("appendonly.aof")).unwrap();
        let dels = aof.windows(9).filter(|w| w == b"$3\r\nDEL\r\n").count() as u64;
        assert!(
            dels >= evicted,
            "{policy}: {dels} DELs for {evicted} evictions"
        );
        // Replayed without a limit: the log alone says what was evicted.
        let restarted = start_hozon(&["--appendonly", "yes", "--dir", &d]);
        let replayed = dump(restarted.port);
        assert!(
            replayed == before,
            "{policy}: hozon's replay has {} keys, {} before",
            replayed.len(),
            before.len()
        );
        let in_redis = dump_in_redis(&aof);
        assert!(
            in_redis == before,
            "{policy}: redis-server's replay has {} keys, {} before",
            in_redis.len(),
            before.len()
        );
    }
}

#[test]
fn a_redis_replica_follows_the_evictions_of_a_hozon_master() {
    let master = start_hozon(&["--repl-diskless-sync-delay", "0"]);
    let replica = start_redis(&["--replicaof", "127.0.0.1", &master.port.to_string()]);
    let mut probe = Conn::connect(replica.port);
    let deadline = Instant::now() + Duration::from_secs(20);
    while !String::from_utf8_lossy(&probe.call(&[b"INFO", b"replication"]))
        .contains("master_link_status:up")
    {
        assert!(Instant::now() < deadline, "the replica never synced");
        std::thread::sleep(Duration::from_millis(20));
    }
    let mut conn = Conn::connect(master.port);
    evicting_load(&mut conn, "allkeys-random");
    let offset = info_u64(&mut conn, "replication", "master_repl_offset");
    let deadline = Instant::now() + Duration::from_secs(20);
    while info_u64(&mut probe, "replication", "master_repl_offset") < offset {
        assert!(Instant::now() < deadline, "the replica never caught up");
        std::thread::sleep(Duration::from_millis(20));
    }
    let (on_replica, on_master) = (dump(replica.port), dump(master.port));
    let keys = |d: &crate::interop::Dump| d.keys().cloned().collect::<Vec<_>>();
    assert!(
        on_replica == on_master,
        "the replica holds {} keys, the master {}; {} keys differ in presence",
        on_replica.len(),
        on_master.len(),
        keys(&on_replica)
            .iter()
            .filter(|k| !on_master.contains_key(*k))
            .count()
    );
}

/// `OBJECT <sub> key` as an integer.
fn object_int(conn: &mut Conn, sub: &str, key: &str) -> i64 {
    let reply = conn.call(&[b"OBJECT", sub.as_bytes(), key.as_bytes()]);
    let text = String::from_utf8_lossy(&reply).into_owned();
    text.strip_prefix(':')
        .and_then(|t| t.trim_end().parse().ok())
        .unwrap_or_else(|| panic!("OBJECT {sub} {key}: {text}"))
}

/// Writes `idle` (IDLETIME 5000 under an LRU policy) and `freq` (FREQ 77
/// under LFU) keys with RESTORE on `conn`, under `policy`.
fn restore_access_keys(conn: &mut Conn, policy: &str) {
    let ok = b"+OK\r\n".to_vec();
    assert_eq!(
        conn.call(&[b"CONFIG", b"SET", b"maxmemory-policy", policy.as_bytes()]),
        ok
    );
    assert_eq!(conn.call(&[b"SET", b"src", b"value"]), ok);
    let dump = conn.call(&[b"DUMP", b"src"]);
    let header_end = dump.windows(2).position(|w| w == b"\r\n").unwrap();
    let payload = &dump[header_end + 2..dump.len() - 2];
    let (key, option, amount): (&[u8], &[u8], &[u8]) = if policy.ends_with("lfu") {
        (b"freq", b"FREQ", b"77")
    } else {
        (b"idle", b"IDLETIME", b"5000")
    };
    let reply = conn.call(&[b"RESTORE", key, b"0", payload, option, amount]);
    assert_eq!(reply, ok, "{}", String::from_utf8_lossy(&reply));
}

#[test]
fn rdb_idle_and_freq_records_round_trip_with_redis() {
    // lfu-decay-time 0: no decay, so the counter read back is exact.
    for policy in ["allkeys-lru", "allkeys-lfu"] {
        let lfu = policy.ends_with("lfu");
        let settings = ["--maxmemory-policy", policy, "--lfu-decay-time", "0"];
        let check = |conn: &mut Conn, who: &str| {
            if lfu {
                assert_eq!(object_int(conn, "FREQ", "freq"), 77, "{who}");
            } else {
                let idle = object_int(conn, "IDLETIME", "idle");
                assert!((5000..=5003).contains(&idle), "{who}: idle {idle}");
            }
        };
        // hozon writes, redis-server reads.
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path().to_string_lossy().into_owned();
        let mut args = vec!["--save", "3600 1", "--snapshot-format", "rdb", "--dir", &d];
        args.extend(settings);
        let hozon = start_hozon(&args);
        let mut conn = Conn::connect(hozon.port);
        restore_access_keys(&mut conn, policy);
        assert_eq!(conn.call(&[b"SAVE"]), b"+OK\r\n");
        let mut args = vec!["--dir", &d, "--dbfilename", "dump.rdb"];
        args.extend(settings);
        let redis = start_redis(&args);
        check(
            &mut Conn::connect(redis.port),
            &format!("{policy}: Redis reading hozon's RDB"),
        );
        drop((hozon, redis));

        // redis-server writes, hozon reads.
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path().to_string_lossy().into_owned();
        let mut args = vec!["--dir", &d];
        args.extend(settings);
        let redis = start_redis(&args);
        let mut conn = Conn::connect(redis.port);
        restore_access_keys(&mut conn, policy);
        assert_eq!(conn.call(&[b"SAVE"]), b"+OK\r\n");
        drop(redis);
        let mut args = vec!["--save", "3600 1", "--dir", &d];
        args.extend(settings);
        let hozon = start_hozon(&args);
        let mut conn = Conn::connect(hozon.port);
        assert_eq!(
            conn.call(&[b"DBSIZE"]),
            b":2\r\n",
            "{policy}: hozon loaded Redis's RDB"
        );
        check(&mut conn, &format!("{policy}: hozon reading Redis's RDB"));
    }
}

/// Waits until INFO persistence shows no BGSAVE or rewrite running.
fn wait_background_done(conn: &mut Conn) {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let saving = info_field(conn, "persistence", "rdb_bgsave_in_progress");
        let rewriting = info_field(conn, "persistence", "aof_rewrite_in_progress");
        if saving.as_deref() == Some("0") && rewriting.as_deref() == Some("0") {
            return;
        }
        assert!(Instant::now() < deadline, "background work did not end");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// The format minor version in a dump.hoz header.
fn minor_version(path: &std::path::Path) -> u16 {
    let data = std::fs::read(path).unwrap();
    u16::from_le_bytes([data[10], data[11]])
}

/// dump.hoz (format 1.4) keeps each key's access record: after a restart
/// OBJECT IDLETIME and OBJECT FREQ say what they said before, whether the
/// file came from SAVE, BGSAVE or an AOF rewrite's native preamble.
#[test]
fn dump_hoz_keeps_idle_and_freq_across_restarts() {
    for policy in ["allkeys-lru", "allkeys-lfu"] {
        let lfu = policy.ends_with("lfu");
        for how in ["SAVE", "BGSAVE", "BGREWRITEAOF"] {
            let dir = tempfile::tempdir().unwrap();
            let d = dir.path().to_string_lossy().into_owned();
            let aof = if how == "BGREWRITEAOF" { "yes" } else { "no" };
            let args = [
                "--save",
                "3600 1",
                "--dir",
                &d,
                "--appendonly",
                aof,
                "--maxmemory-policy",
                policy,
                "--lfu-decay-time",
                "0",
            ];
            let server = start_hozon(&args);
            let mut conn = Conn::connect(server.port);
            restore_access_keys(&mut conn, policy);
            let reply = conn.call(&[how.as_bytes()]);
            assert!(
                reply.starts_with(b"+"),
                "{how}: {}",
                String::from_utf8_lossy(&reply)
            );
            wait_background_done(&mut conn);
            drop(server); // SIGKILL
            if how != "BGREWRITEAOF" {
                assert_eq!(
                    minor_version(&dir.path().join("dump.hoz")),
                    4,
                    "{policy} {how}"
                );
            }
            let server = start_hozon(&args);
            let mut conn = Conn::connect(server.port);
            assert_eq!(conn.call(&[b"DBSIZE"]), b":2\r\n", "{policy} {how}");
            if lfu {
                assert_eq!(object_int(&mut conn, "FREQ", "freq"), 77, "{policy} {how}");
            } else {
                let idle = object_int(&mut conn, "IDLETIME", "idle");
                assert!((5000..=5003).contains(&idle), "{policy} {how}: idle {idle}");
            }
        }
    }
}

/// A file written without access records (no LRU/LFU policy: format 1.1,
/// what every older writer wrote) loads under an LRU or LFU policy, its
/// keys starting as new keys do.
#[test]
fn a_dump_hoz_without_access_records_loads_under_lru_and_lfu() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path().to_string_lossy().into_owned();
    let server = start_hozon(&["--save", "3600 1", "--dir", &d]);
    let mut conn = Conn::connect(server.port);
    assert_eq!(conn.call(&[b"SET", b"k", b"v"]), b"+OK\r\n");
    assert_eq!(conn.call(&[b"SAVE"]), b"+OK\r\n");
    drop(server);
    assert_eq!(minor_version(&dir.path().join("dump.hoz")), 1);
    for policy in ["allkeys-lru", "allkeys-lfu"] {
        let server = start_hozon(&[
            "--save",
            "3600 1",
            "--dir",
            &d,
            "--maxmemory-policy",
            policy,
            "--lfu-decay-time",
            "0",
        ]);
        let mut conn = Conn::connect(server.port);
        if policy.ends_with("lfu") {
            // LFU_INIT_VAL, as for a key just created.
            assert_eq!(object_int(&mut conn, "FREQ", "k"), 5);
        } else {
            assert!(object_int(&mut conn, "IDLETIME", "k") <= 2);
        }
    }
}
