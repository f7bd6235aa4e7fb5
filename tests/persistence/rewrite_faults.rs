//! The background AOF rewrite through the embedded engine and the
//! fault-injecting backend: the rewritten file replays to exactly the
//! keyspace at the switch (random workloads, rewrites at random points),
//! power loss at every stage of the protocol keeps every acknowledged
//! write, and ENOSPC/EIO during a rewrite leave the old AOF authoritative
//! and still written, with Redis's back-off before automatic retries.

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use hozon::config::{AofPreamble, AppendFsync};
use hozon::persist::io::{Fault, FaultyIo, Io, PowerLoss, Stop};
use hozon::rand::Rng;
use hozon::{Engine, Reply, Session};

use crate::common::{dump, durable_config, open, run};

const ENOSPC: i32 = 28;
const EIO: i32 = 5;
const DIR: &str = "/data";

fn aof_path() -> &'static Path {
    Path::new("/data/appendonly.aof")
}

fn config(policy: AppendFsync, preamble: AofPreamble) -> hozon::Config {
    let mut c = durable_config(Path::new(DIR), policy);
    c.aof_preamble = preamble;
    c
}

fn now_ms() -> i64 {
    hozon::engine::now_ms()
}

/// One background slice, as the server's event loop runs it.
fn step(engine: &mut Engine) -> Option<String> {
    engine.background_step(Duration::from_millis(1), now_ms())
}

fn rewriting(engine: &mut Engine) -> bool {
    engine.rewrite_in_progress()
}

/// Runs the rewrite in progress to its end.
fn finish_rewrite(engine: &mut Engine) {
    for _ in 0..1_000_000 {
        if !rewriting(engine) {
            return;
        }
        step(engine);
        std::thread::sleep(Duration::from_micros(200));
    }
    panic!("the rewrite did not finish");
}

/// A copy of the files `io` holds now, as a new file system: what a
/// restarted process would find (the old process's threads cannot touch
/// it any more).
fn frozen_copy(io: &FaultyIo) -> FaultyIo {
    let copy = FaultyIo::new();
    for name in io.list_dir(Path::new(DIR)).unwrap_or_default() {
        let path = Path::new(DIR).join(&name);
        if let Some(data) = io.contents(&path) {
            copy.set_contents(&path, data);
        }
    }
    copy
}

/// A random command over a small key space of every type (relative
/// expiries become absolute in the log; all far in the future).
fn random_command(rng: &mut Rng) -> Vec<String> {
    let key = |rng: &mut Rng, prefix: &str| format!("{prefix}{}", rng.below(12));
    let words: Vec<String> = match rng.below(16) {
        0 => vec!["SET".into(), key(rng, "s"), format!("v{}", rng.below(1000))],
        1 => vec!["INCR".into(), key(rng, "n")],
        2 => vec!["APPEND".into(), key(rng, "s"), "x".into()],
        3 => vec![
            "RPUSH".into(),
            key(rng, "l"),
            format!("{}", rng.below(50)),
            "e".into(),
        ],
        4 => vec!["LPOP".into(), key(rng, "l")],
        5 => vec![
            "HSET".into(),
            key(rng, "h"),
            format!("f{}", rng.below(200)),
            "v".into(),
        ],
        6 => vec!["HDEL".into(), key(rng, "h"), format!("f{}", rng.below(200))],
        7 => vec!["SADD".into(), key(rng, "t"), format!("{}", rng.below(600))],
        8 => vec!["SREM".into(), key(rng, "t"), format!("{}", rng.below(600))],
        9 => vec![
            "ZADD".into(),
            key(rng, "z"),
            format!("{}", rng.below(100) as i64 - 50),
            format!("m{}", rng.below(300)),
        ],
        10 => vec!["EXPIRE".into(), key(rng, "s"), "100000".into()],
        11 => {
            let prefix = if rng.below(2) == 0 { "l" } else { "h" };
            vec!["DEL".into(), key(rng, prefix)]
        }
        12 => vec!["SELECT".into(), format!("{}", rng.below(3))],
        13 => vec![
            "XADD".into(),
            key(rng, "x"),
            "*".into(),
            "f".into(),
            "v".into(),
        ],
        14 => vec!["PERSIST".into(), key(rng, "s")],
        _ => vec![
            "MSET".into(),
            key(rng, "s"),
            "a".into(),
            key(rng, "n"),
            "7".into(),
        ],
    };
    words
}

fn exec(engine: &mut Engine, session: &mut Session, words: &[String]) -> Reply {
    let refs: Vec<&str> = words.iter().map(String::as_str).collect();
    run(engine, session, &refs)
}

/// Opens the engine a restart would open on a copy of `io`'s files.
fn reopen(io: &FaultyIo, cfg: &hozon::Config) -> (FaultyIo, Engine) {
    let copy = frozen_copy(io);
    let engine = open(cfg.clone(), Arc::new(copy.clone()));
    (copy, engine)
}

#[test]
fn rewritten_file_replays_to_the_keyspace_at_the_switch() {
    for seed in 0..24u64 {
        let mut rng = Rng::with_seed(seed);
        let preamble = match seed % 3 {
            0 => AofPreamble::Native,
            1 => AofPreamble::None,
            _ => AofPreamble::Rdb,
        };
        let cfg = config(AppendFsync::Everysec, preamble);
        let io = FaultyIo::new();
        let mut engine = open(cfg.clone(), Arc::new(io.clone()));
        let mut session = engine.new_session();
        for _ in 0..rng.below(400) {
            let cmd = random_command(&mut rng);
            exec(&mut engine, &mut session, &cmd);
        }
        let mut switches = 0;
        for _ in 0..3 {
            let reply = run(&mut engine, &mut session, &["BGREWRITEAOF"]);
            assert_eq!(
                reply,
                Reply::simple("Background append only file rewriting started"),
                "seed {seed}"
            );
            // Writes interleaved with the rewrite's slices, at random.
            while rewriting(&mut engine) {
                for _ in 0..rng.below(20) {
                    let cmd = random_command(&mut rng);
                    exec(&mut engine, &mut session, &cmd);
                }
                step(&mut engine);
            }
            assert!(engine.rewrite_last_ok(), "seed {seed}: rewrite failed");
            switches += 1;
            // The file as it is at the switch rebuilds the live keyspace.
            let expected = dump(&mut engine);
            let (_, mut loaded) = reopen(&io, &cfg);
            assert_eq!(
                dump(&mut loaded),
                expected,
                "seed {seed}, switch {switches}"
            );
            drop(loaded);
            for _ in 0..rng.below(100) {
                let cmd = random_command(&mut rng);
                exec(&mut engine, &mut session, &cmd);
            }
        }
        // And after more writes appended to the rewritten file.
        let expected = dump(&mut engine);
        let data = io.contents(aof_path()).expect("aof");
        match preamble {
            AofPreamble::Native => assert!(data.starts_with(&hozon::persist::snapshot::MAGIC)),
            AofPreamble::None => assert!(data.starts_with(b"#hozon-aof 1\r\n")),
            AofPreamble::Rdb => assert!(data.starts_with(b"REDIS0010")),
        }
        drop(engine);
        let mut loaded = open(cfg.clone(), Arc::new(io.clone()));
        assert_eq!(dump(&mut loaded), expected, "seed {seed}: final");
    }
}

/// Power loss after `steps` slices of a rewrite (under `always`): every
/// acknowledged write survives, the file loads, and no temporary file is
/// left after the restart.
fn power_loss_during_rewrite(steps: usize, mode: PowerLoss, preamble: AofPreamble) {
    let cfg = config(AppendFsync::Always, preamble);
    let io = FaultyIo::new();
    let mut engine = open(cfg.clone(), Arc::new(io.clone()));
    let mut session = engine.new_session();
    // Enough data for the image to take several slices.
    for i in 0..3000 {
        run(
            &mut engine,
            &mut session,
            &["SET", &format!("base:{i}"), &"x".repeat(100)],
        );
        run(
            &mut engine,
            &mut session,
            &["RPUSH", "big", &format!("{i}")],
        );
    }
    assert_eq!(
        run(&mut engine, &mut session, &["BGREWRITEAOF"]),
        Reply::simple("Background append only file rewriting started")
    );
    let mut acknowledged = 0u64;
    for _ in 0..steps {
        for _ in 0..5 {
            if run(&mut engine, &mut session, &["INCR", "counter"])
                != Reply::Int(acknowledged as i64 + 1)
            {
                panic!("INCR failed");
            }
            acknowledged += 1;
        }
        step(&mut engine);
        std::thread::sleep(Duration::from_micros(300));
    }
    io.power_loss(mode);
    let (copy, mut restarted) = reopen(&io, &cfg);
    let mut s = restarted.new_session();
    let counter = match run(&mut restarted, &mut s, &["GET", "counter"]) {
        Reply::Bulk(b) => String::from_utf8(b).unwrap().parse::<u64>().unwrap(),
        Reply::Null => 0,
        other => panic!("unexpected {other:?}"),
    };
    assert_eq!(
        counter, acknowledged,
        "steps {steps} {mode:?} {preamble:?}: acknowledged writes lost or invented"
    );
    assert_eq!(
        run(&mut restarted, &mut s, &["DBSIZE"]),
        Reply::Int(3001 + i64::from(acknowledged > 0)),
        "steps {steps}"
    );
    let names = copy.list_dir(Path::new(DIR)).unwrap();
    assert!(
        names.iter().all(|n| !n.starts_with("temp-")),
        "temporary files survived a restart: {names:?}"
    );
    drop(restarted);
    drop(engine);
}

#[test]
fn power_loss_at_every_stage_of_a_rewrite_keeps_acknowledged_writes() {
    for preamble in [AofPreamble::Native, AofPreamble::None, AofPreamble::Rdb] {
        for steps in [0, 1, 2, 3, 5, 8, 13, 21, 40, 80, 200] {
            power_loss_during_rewrite(steps, PowerLoss::DropUnsynced, preamble);
            power_loss_during_rewrite(
                steps,
                PowerLoss::TornWithGarbage {
                    keep: 100,
                    garbage: 17,
                },
                preamble,
            );
        }
    }
}

#[test]
fn enospc_during_a_rewrite_leaves_the_old_aof_in_charge_and_backs_off() {
    let mut cfg = config(AppendFsync::Always, AofPreamble::Native);
    cfg.auto_aof_rewrite_min_size = 1;
    cfg.auto_aof_rewrite_percentage = 0;
    let io = FaultyIo::new();
    let mut engine = open(cfg.clone(), Arc::new(io.clone()));
    let mut session = engine.new_session();
    for i in 0..2000 {
        run(&mut engine, &mut session, &["SET", &format!("k{i}"), "v"]);
    }
    let old = io.contents(aof_path()).expect("aof");
    for errno in [ENOSPC, EIO] {
        assert_eq!(
            run(&mut engine, &mut session, &["BGREWRITEAOF"]),
            Reply::simple("Background append only file rewriting started")
        );
        // The rewriter's next write fails (nothing else writes meanwhile).
        io.inject(Fault::FailWrite {
            nth: 1,
            errno,
            sticky: false,
        });
        finish_rewrite(&mut engine);
        assert!(
            !engine.rewrite_last_ok(),
            "errno {errno}: the rewrite must fail"
        );
        assert_eq!(
            io.contents(aof_path()).as_deref(),
            Some(&old[..]),
            "old AOF untouched"
        );
        let names = io.list_dir(Path::new(DIR)).unwrap();
        assert!(
            names.iter().all(|n| !n.starts_with("temp-")),
            "temp file removed: {names:?}"
        );
    }
    let info = match run(&mut engine, &mut session, &["INFO", "persistence"]) {
        Reply::Verbatim(_, text) | Reply::Bulk(text) => String::from_utf8(text).unwrap(),
        other => panic!("INFO: {other:?}"),
    };
    assert!(info.contains("aof_last_bgrewrite_status:err"), "{info}");
    assert!(
        info.contains("aof_rewrites_consecutive_failures:2"),
        "{info}"
    );
    // The old AOF keeps being written and stays authoritative.
    assert_eq!(
        run(&mut engine, &mut session, &["SET", "after", "1"]),
        Reply::ok()
    );
    let (_, mut loaded) = reopen(&io, &cfg);
    assert_eq!(dump(&mut loaded), dump(&mut engine));
    drop(loaded);

    // Automatic rewrites: a third failure enters Redis's back-off (1
    // minute, then 2, 4, …); no attempt is made before it passes.
    assert_eq!(
        run(
            &mut engine,
            &mut session,
            &["CONFIG", "SET", "auto-aof-rewrite-percentage", "1"]
        ),
        Reply::ok()
    );
    io.inject(Fault::FailWrite {
        nth: 1,
        errno: ENOSPC,
        sticky: true,
    });
    let t0 = now_ms();
    let line = engine.background_step(Duration::from_millis(1), t0);
    assert!(
        line.as_deref()
            .is_some_and(|l| l.contains("automatic rewriting")),
        "{line:?}"
    );
    while rewriting(&mut engine) {
        engine.background_step(Duration::from_millis(1), t0);
        std::thread::sleep(Duration::from_micros(200));
    }
    assert_eq!(engine.rewrite_consecutive_failures(), 3);
    io.clear_faults();
    let line = engine.background_step(Duration::from_millis(1), t0 + 1000);
    assert!(
        line.as_deref()
            .is_some_and(|l| l.contains("will retry in 1 minutes")),
        "{line:?}"
    );
    engine.background_step(Duration::from_millis(1), t0 + 30_000);
    assert!(!rewriting(&mut engine), "no retry within the back-off");
    engine.background_step(Duration::from_millis(1), t0 + 62_000);
    assert!(rewriting(&mut engine), "retried after the back-off");
    while rewriting(&mut engine) {
        engine.background_step(Duration::from_millis(1), t0 + 62_000);
        std::thread::sleep(Duration::from_micros(200));
    }
    assert!(engine.rewrite_last_ok());
    assert_eq!(engine.rewrite_consecutive_failures(), 0);
    let expected = dump(&mut engine);
    let (_, mut loaded) = reopen(&io, &cfg);
    assert_eq!(dump(&mut loaded), expected);
}

#[test]
fn fsync_failure_of_the_new_file_fails_the_rewrite_not_the_server() {
    // `appendfsync no`: the rewriter's are the only fsyncs, so the fault
    // reaches the new file.
    let cfg = config(AppendFsync::No, AofPreamble::None);
    let io = FaultyIo::new();
    let mut engine = open(cfg.clone(), Arc::new(io.clone()));
    let mut session = engine.new_session();
    for i in 0..500 {
        run(&mut engine, &mut session, &["SET", &format!("k{i}"), "v"]);
    }
    assert_eq!(
        run(&mut engine, &mut session, &["BGREWRITEAOF"]),
        Reply::simple("Background append only file rewriting started")
    );
    io.inject(Fault::FailSync { nth: 1, errno: EIO });
    finish_rewrite(&mut engine);
    assert!(!engine.rewrite_last_ok());
    assert_eq!(
        run(&mut engine, &mut session, &["SET", "after", "1"]),
        Reply::ok()
    );
    let expected = dump(&mut engine);
    engine.sync().expect("sync");
    let (_, mut loaded) = reopen(&io, &cfg);
    assert_eq!(dump(&mut loaded), expected);
}

/// Issue 23, item 2: the rewrite renamed the new file into place and then
/// the directory fsync failed. The switch has happened: writes must not go
/// to the old (now nameless) file, and nothing written after it may be
/// acknowledged as durable, since a power loss may give the name back to
/// the old file. Checked after a crash and after both kinds of power loss.
#[test]
fn a_failed_directory_fsync_at_the_switch_loses_no_acknowledged_write() {
    for stop in [
        Stop::Crash,
        Stop::PowerLoss(PowerLoss::DropUnsynced),
        Stop::PowerLossKeepingNames(PowerLoss::DropUnsynced),
    ] {
        let io = FaultyIo::new();
        let config = durable_config(Path::new("/data"), AppendFsync::Always);
        let mut acknowledged = Vec::new();
        {
            let mut engine = open(config.clone(), Arc::new(io.process()));
            let mut s = engine.new_session();
            for i in 0..20 {
                let key = format!("before:{i}");
                assert_eq!(run(&mut engine, &mut s, &["SET", &key, "v"]), Reply::ok());
                acknowledged.push(key);
            }
            // The only directory fsync of the switch is the one after the
            // rename.
            io.inject(Fault::FailDirSync { nth: 1, errno: 5 });
            assert!(!run(&mut engine, &mut s, &["BGREWRITEAOF"]).is_error());
            let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
            while engine.background_busy() {
                engine
                    .background_step(std::time::Duration::from_millis(5), hozon::engine::now_ms());
                assert!(
                    std::time::Instant::now() < deadline,
                    "the rewrite did not end"
                );
            }
            let mut refused = 0;
            for i in 0..20 {
                let key = format!("after:{i}");
                match run(&mut engine, &mut s, &["SET", &key, "v"]) {
                    Reply::Error(e) => {
                        assert!(e.starts_with("MISCONF"), "{e}");
                        refused += 1;
                    }
                    _ => acknowledged.push(key),
                }
            }
            assert_eq!(
                refused, 20,
                "{stop:?}: writes acknowledged after an unsynced switch"
            );
        }
        io.stop_now(stop);
        let mut engine = open(config, Arc::new(io.process()));
        let mut s = engine.new_session();
        for key in &acknowledged {
            assert_eq!(
                run(&mut engine, &mut s, &["EXISTS", key]),
                Reply::Int(1),
                "{stop:?}: acknowledged {key} lost"
            );
        }
    }
}
