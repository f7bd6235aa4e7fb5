//! AOF replay: whatever random commands did, a fresh engine replaying the
//! file reaches the identical keyspace (values, types, TTLs).

use std::sync::Arc;

use hozon::config::AppendFsync;
use hozon::persist::io::{FaultyIo, RealIo};
use hozon::rand::Rng;
use quickcheck::TestResult;

use crate::common::{dump, durable_config, open};

/// One random write (or read) command over every type, on a small key
/// space so commands collide, with long TTLs only (nothing may expire
/// between the run and the replay) and expiry in the past (which deletes).
pub fn random_command(rng: &mut Rng) -> Vec<String> {
    let key = |rng: &mut Rng, prefix: &str| format!("{prefix}{}", rng.below(4));
    let member = |rng: &mut Rng| format!("m{}", rng.below(6));
    let num = |rng: &mut Rng| (rng.below(200) as i64 - 100).to_string();
    let s = |v: &[&str]| v.iter().map(|x| x.to_string()).collect::<Vec<_>>();
    match rng.below(42) {
        0 => s(&["SET", &key(rng, "s"), &member(rng)]),
        1 => s(&["SET", &key(rng, "s"), &num(rng), "EX", "10000"]),
        2 => s(&["INCRBY", &key(rng, "n"), &num(rng)]),
        3 => s(&["INCRBYFLOAT", &key(rng, "f"), "1.5"]),
        4 => s(&["APPEND", &key(rng, "s"), &member(rng)]),
        5 => s(&["DEL", &key(rng, "s"), &key(rng, "l")]),
        6 => s(&["EXPIRE", &key(rng, "s"), "5000"]),
        7 => s(&["PERSIST", &key(rng, "s")]),
        8 => s(&["PEXPIREAT", &key(rng, "h"), "1000"]), // in the past: deletes
        9 => s(&["RENAME", &key(rng, "s"), &key(rng, "s")]),
        10 => s(&["LPUSH", &key(rng, "l"), &member(rng), &member(rng)]),
        11 => s(&["RPUSH", &key(rng, "l"), &member(rng)]),
        12 => s(&["LPOP", &key(rng, "l")]),
        13 => s(&["RPOP", &key(rng, "l"), "2"]),
        14 => s(&["LREM", &key(rng, "l"), "1", &member(rng)]),
        15 => s(&["LTRIM", &key(rng, "l"), "0", "3"]),
        16 => s(&["LMOVE", &key(rng, "l"), &key(rng, "l"), "LEFT", "RIGHT"]),
        17 => s(&["HSET", &key(rng, "h"), &member(rng), &num(rng)]),
        18 => s(&["HDEL", &key(rng, "h"), &member(rng)]),
        19 => s(&["HINCRBY", &key(rng, "h"), &member(rng), "3"]),
        20 => s(&["HINCRBYFLOAT", &key(rng, "h"), &member(rng), "0.25"]),
        21 => s(&["SADD", &key(rng, "t"), &member(rng), &num(rng)]),
        22 => s(&["SREM", &key(rng, "t"), &member(rng)]),
        23 => s(&["SPOP", &key(rng, "t")]),
        24 => s(&["SMOVE", &key(rng, "t"), &key(rng, "t"), &member(rng)]),
        25 => s(&[
            "SINTERSTORE",
            &key(rng, "t"),
            &key(rng, "t"),
            &key(rng, "t"),
        ]),
        26 => s(&["ZADD", &key(rng, "z"), &num(rng), &member(rng)]),
        27 => s(&["ZINCRBY", &key(rng, "z"), "2.5", &member(rng)]),
        28 => s(&["ZREM", &key(rng, "z"), &member(rng)]),
        29 => s(&["ZPOPMIN", &key(rng, "z")]),
        30 => s(&[
            "ZUNIONSTORE",
            &key(rng, "z"),
            "2",
            &key(rng, "z"),
            &key(rng, "t"),
        ]),
        31 => s(&["ZREMRANGEBYSCORE", &key(rng, "z"), "-10", "10"]),
        32 => s(&["SELECT", &rng.below(3).to_string()]),
        33 => s(&["MOVE", &key(rng, "s"), &rng.below(3).to_string()]),
        34 => s(&[
            "COPY",
            &key(rng, "h"),
            &key(rng, "h"),
            "DB",
            &rng.below(3).to_string(),
            "REPLACE",
        ]),
        35 => s(&["GETEX", &key(rng, "s"), "EX", "7000"]),
        36 => s(&["GETDEL", &key(rng, "s")]),
        37 => s(&["SETRANGE", &key(rng, "s"), "3", &member(rng)]),
        38 => s(&["SPOP", &key(rng, "t"), "2"]),
        // Geo sets are sorted sets: GEOADD is logged as the ZADD it ran.
        39 => s(&[
            "GEOADD",
            &key(rng, "z"),
            &num(rng),
            &(rng.below(160) as i64 - 80).to_string(),
            &member(rng),
        ]),
        40 => s(&[
            "GEOSEARCHSTORE",
            &key(rng, "z"),
            &key(rng, "z"),
            "FROMMEMBER",
            &member(rng),
            "BYRADIUS",
            "5000",
            "km",
            "STOREDIST",
        ]),
        _ => s(&[
            "ZMPOP",
            "2",
            &key(rng, "z"),
            &key(rng, "z"),
            "MAX",
            "COUNT",
            "2",
        ]),
    }
}

fn replay_matches(seed: u64) -> TestResult {
    let io = Arc::new(FaultyIo::new());
    let dir = std::path::Path::new("/data");
    let config = durable_config(dir, AppendFsync::Everysec);
    let mut rng = Rng::with_seed(seed);
    let before = {
        let mut engine = open(config.clone(), io.clone());
        let mut session = engine.new_session();
        for _ in 0..150 {
            let cmd = random_command(&mut rng);
            let args: Vec<&[u8]> = cmd.iter().map(|a| a.as_bytes()).collect();
            engine.execute(&mut session, &args);
        }
        dump(&mut engine)
    };
    let mut reopened = open(config, io);
    let after = dump(&mut reopened);
    if before != after {
        return TestResult::error(format!(
            "seed {seed}: replayed keyspace differs\n before: {before:?}\n after: {after:?}"
        ));
    }
    TestResult::passed()
}

#[test]
fn random_commands_replay_to_identical_keyspace() {
    crate::harness::seeded_quickcheck(100, 60).quickcheck(replay_matches as fn(u64) -> TestResult);
}

#[test]
fn real_files_replay_and_reopen_appends() {
    let dir = tempfile::tempdir().unwrap();
    let config = durable_config(dir.path(), AppendFsync::Always);
    let mut rng = Rng::with_seed(42);
    let mut expected = None;
    // Three generations: each reopens, checks, and appends more.
    for _generation in 0..3 {
        let mut engine = open(config.clone(), Arc::new(RealIo));
        if let Some(expected) = &expected {
            assert_eq!(&dump(&mut engine), expected);
        }
        let mut session = engine.new_session();
        for _ in 0..100 {
            let cmd = random_command(&mut rng);
            let args: Vec<&[u8]> = cmd.iter().map(|a| a.as_bytes()).collect();
            engine.execute(&mut session, &args);
        }
        expected = Some(dump(&mut engine));
    }
    let text = std::fs::read(dir.path().join("appendonly.aof")).unwrap();
    assert!(text.starts_with(b"#hozon-aof 1\r\n"));
}

#[test]
fn second_engine_on_same_directory_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let config = durable_config(dir.path(), AppendFsync::Everysec);
    let _first = open(config.clone(), Arc::new(RealIo));
    let err = match hozon::Engine::open(config) {
        Ok(_) => panic!("second open of a locked directory succeeded"),
        Err(e) => e.to_string(),
    };
    assert!(err.contains("in use by another hozon process"), "{err}");
    assert!(err.contains(&std::process::id().to_string()), "{err}");
}

#[test]
fn stale_temp_files_are_removed_at_startup() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("temp-rewrite-123.aof"), b"junk").unwrap();
    let config = durable_config(dir.path(), AppendFsync::Everysec);
    let _engine = open(config, Arc::new(RealIo));
    assert!(!dir.path().join("temp-rewrite-123.aof").exists());
}
