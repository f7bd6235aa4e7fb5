//! Power loss, EIO and ENOSPC through the fault-injecting I/O backend, and
//! damaged files: recovery yields a prefix of acknowledged history and never
//! panics.

use std::path::Path;
use std::sync::Arc;

use hozon::config::AppendFsync;
use hozon::persist::io::{Fault, FaultyIo, PowerLoss};
use hozon::rand::Rng;
use hozon::{Engine, Reply};

use crate::common::{dump, durable_config, open, run};

const ENOSPC: i32 = 28;
const EIO: i32 = 5;

fn aof_path() -> &'static Path {
    Path::new("/data/appendonly.aof")
}

/// The counter values after `n` acknowledged INCRs of `counter` with a
/// `SET key:i` each: recovered state must equal one of these prefixes.
fn check_prefix(engine: &mut Engine, acknowledged: u64, attempted: u64) -> u64 {
    let mut session = engine.new_session();
    let counter = match run(engine, &mut session, &["GET", "counter"]) {
        Reply::Bulk(b) => String::from_utf8(b).unwrap().parse::<u64>().unwrap(),
        Reply::Null => 0,
        other => panic!("unexpected {other:?}"),
    };
    assert!(
        counter >= acknowledged,
        "lost acknowledged writes: counter {counter} < {acknowledged}"
    );
    assert!(
        counter <= attempted,
        "counter {counter} beyond attempted {attempted}"
    );
    // Prefix: keys 1..=counter exist, none after counter+1 (the SET of
    // pair counter+1 may have been logged without its INCR).
    for i in 1..=attempted {
        let present = run(engine, &mut session, &["EXISTS", &format!("key:{i}")]) == Reply::Int(1);
        if i <= counter {
            assert!(present, "key:{i} missing though counter is {counter}");
        } else if i > counter + 1 {
            assert!(
                !present,
                "key:{i} present though counter is {counter}: not a prefix"
            );
        }
    }
    counter
}

/// Runs `attempted` acknowledged write pairs as one MULTI-like unit each
/// (INCR + SET in separate commands) and returns how many were acknowledged.
fn write_load(engine: &mut Engine, attempted: u64) -> u64 {
    let mut session = engine.new_session();
    let mut acknowledged = 0;
    for i in 1..=attempted {
        let r1 = run(engine, &mut session, &["SET", &format!("key:{i}"), "v"]);
        let r2 = run(engine, &mut session, &["INCR", "counter"]);
        if !r1.is_error() && !r2.is_error() {
            acknowledged = i;
        } else {
            break;
        }
    }
    acknowledged
}

#[test]
fn power_loss_under_always_loses_nothing_acknowledged() {
    let mut rng = Rng::with_seed(crate::common::seed(7));
    for round in 0..40 {
        let io = Arc::new(FaultyIo::new());
        let config = durable_config(Path::new("/data"), AppendFsync::Always);
        let attempted = 1 + rng.below(30);
        // The power goes while the engine runs: dropping it first would
        // fsync everything and prove nothing about `always`.
        let mut engine = open(config.clone(), Arc::new(io.process()));
        let acknowledged = write_load(&mut engine, attempted);
        let mode = match round % 3 {
            0 => PowerLoss::DropUnsynced,
            1 => PowerLoss::Torn {
                keep: rng.below(200) as usize,
            },
            _ => PowerLoss::TornWithGarbage {
                keep: rng.below(200) as usize,
                garbage: 1 + rng.below(50) as usize,
            },
        };
        io.power_loss(mode);
        drop(engine); // its closing fsync fails: the machine is off
        let mut engine = open(config, Arc::new(io.process()));
        let counter = check_prefix(&mut engine, acknowledged, attempted);
        assert_eq!(
            counter, acknowledged,
            "under always every acknowledged write is durable"
        );
    }
}

#[test]
fn power_loss_under_everysec_and_no_recovers_a_prefix() {
    let mut rng = Rng::with_seed(crate::common::seed(11));
    for round in 0..40 {
        let policy = if round % 2 == 0 {
            AppendFsync::Everysec
        } else {
            AppendFsync::No
        };
        let io = Arc::new(FaultyIo::new());
        let config = durable_config(Path::new("/data"), policy);
        let attempted = 1 + rng.below(40);
        let mut engine = open(config.clone(), Arc::new(io.process()));
        write_load(&mut engine, attempted);
        io.power_loss(PowerLoss::Torn {
            keep: rng.below(2000) as usize,
        });
        drop(engine);
        let mut engine = open(config, Arc::new(io.process()));
        check_prefix(&mut engine, 0, attempted);
    }
}

#[test]
fn closing_an_engine_makes_its_writes_durable_under_every_policy() {
    for policy in [AppendFsync::Everysec, AppendFsync::No] {
        let io = Arc::new(FaultyIo::new());
        let config = durable_config(Path::new("/data"), policy);
        {
            let mut engine = open(config.clone(), io.clone());
            write_load(&mut engine, 25);
        }
        // Everything not fsynced is lost: only what the close synced stays.
        io.power_loss(PowerLoss::DropUnsynced);
        let mut engine = open(config, io);
        check_prefix(&mut engine, 25, 25);
    }
}

#[test]
fn enospc_on_write_refuses_writes_keeps_reads_and_resumes() {
    let io = Arc::new(FaultyIo::new());
    let config = durable_config(Path::new("/data"), AppendFsync::Always);
    let mut engine = open(config.clone(), io.clone());
    let mut s = engine.new_session();
    assert_eq!(run(&mut engine, &mut s, &["SET", "a", "1"]), Reply::ok());
    io.inject(Fault::FailWrite {
        nth: 1,
        errno: ENOSPC,
        sticky: true,
    });
    // The write runs, but its batch cannot be written: NOTDURABLE (applied,
    // kept for the retry; never to be repeated by the caller).
    let failed = run(&mut engine, &mut s, &["INCR", "b"]);
    match &failed {
        Reply::Error(e) => assert!(
            e.starts_with("NOTDURABLE applied in memory, but writing it to the AOF failed (No space left on device)"),
            "{e}"
        ),
        other => panic!("write during ENOSPC was acknowledged: {other:?}"),
    }
    // Further writes are refused before they run (MISCONF: not applied),
    // reads still work.
    match run(&mut engine, &mut s, &["INCR", "b"]) {
        Reply::Error(e) => assert!(
            e.starts_with("MISCONF Errors writing to the AOF file: No space left on device"),
            "{e}"
        ),
        other => panic!("write during ENOSPC was accepted: {other:?}"),
    }
    assert!(run(&mut engine, &mut s, &["SET", "c", "3"]).is_error());
    assert_eq!(
        run(&mut engine, &mut s, &["GET", "b"]),
        Reply::Bulk(b"1".to_vec()),
        "the NOTDURABLE write is applied once, the MISCONF one not at all"
    );
    assert_eq!(
        run(&mut engine, &mut s, &["GET", "a"]),
        Reply::Bulk(b"1".to_vec())
    );
    // The file holds no partial batch.
    let on_disk = io.contents(aof_path()).unwrap();
    assert!(on_disk.ends_with(b"\r\n"));
    // Space comes back: the background retry writes the kept batch.
    io.clear_faults();
    engine.cron_now();
    assert_eq!(run(&mut engine, &mut s, &["SET", "d", "4"]), Reply::ok());
    drop(engine);
    let mut reopened = open(config, io);
    let mut s = reopened.new_session();
    for (k, v) in [("a", "1"), ("b", "1"), ("d", "4")] {
        assert_eq!(
            run(&mut reopened, &mut s, &["GET", k]),
            Reply::Bulk(v.as_bytes().to_vec()),
            "key {k}"
        );
    }
}

#[test]
fn short_write_is_cut_back_and_retried() {
    let io = Arc::new(FaultyIo::new());
    let config = durable_config(Path::new("/data"), AppendFsync::Always);
    let mut engine = open(config.clone(), io.clone());
    let mut s = engine.new_session();
    run(&mut engine, &mut s, &["SET", "a", "1"]);
    let clean_len = io.contents(aof_path()).unwrap().len();
    // write(2) writes 5 bytes then fails with EIO on the rest.
    io.inject(Fault::ShortWrite { nth: 1, bytes: 5 });
    io.inject(Fault::FailWrite {
        nth: 2,
        errno: EIO,
        sticky: false,
    });
    assert!(run(&mut engine, &mut s, &["SET", "b", "2"]).is_error());
    assert_eq!(
        io.contents(aof_path()).unwrap().len(),
        clean_len,
        "partial batch left in the file"
    );
    engine.cron_now();
    drop(engine);
    let mut reopened = open(config, io);
    let mut s = reopened.new_session();
    assert_eq!(
        run(&mut reopened, &mut s, &["GET", "b"]),
        Reply::Bulk(b"2".to_vec())
    );
}

#[test]
fn fsync_failure_poisons_until_restart() {
    let io = Arc::new(FaultyIo::new());
    let config = durable_config(Path::new("/data"), AppendFsync::Always);
    let mut engine = open(config.clone(), io.clone());
    let mut s = engine.new_session();
    run(&mut engine, &mut s, &["SET", "a", "1"]);
    io.inject(Fault::FailSync { nth: 1, errno: EIO });
    assert!(
        run(&mut engine, &mut s, &["SET", "b", "2"]).is_error(),
        "write acknowledged after failed fsync"
    );
    io.clear_faults();
    engine.cron_now();
    let refused = run(&mut engine, &mut s, &["SET", "c", "3"]);
    match refused {
        Reply::Error(e) => assert!(e.contains("fsync failed"), "{e}"),
        other => panic!("poisoned engine accepted a write: {other:?}"),
    }
    assert_eq!(
        run(&mut engine, &mut s, &["GET", "a"]),
        Reply::Bulk(b"1".to_vec())
    );
    drop(engine);
    // A restart starts clean (what was written is there or not; `a` is).
    let mut reopened = open(config, io);
    let mut s = reopened.new_session();
    assert_eq!(run(&mut reopened, &mut s, &["SET", "c", "3"]), Reply::ok());
    assert_eq!(
        run(&mut reopened, &mut s, &["GET", "a"]),
        Reply::Bulk(b"1".to_vec())
    );
}

fn small_aof() -> (Arc<FaultyIo>, hozon::Config, Vec<u8>) {
    let io = Arc::new(FaultyIo::new());
    let config = durable_config(Path::new("/data"), AppendFsync::Always);
    {
        let mut engine = open(config.clone(), io.clone());
        write_load(&mut engine, 8);
    }
    let data = io.contents(aof_path()).unwrap();
    (io, config, data)
}

#[test]
fn truncation_at_every_offset_loads_a_prefix_and_truncates_the_file() {
    let (io, config, data) = small_aof();
    for cut in 0..=data.len() {
        io.set_contents(aof_path(), data[..cut].to_vec());
        let mut engine = open(config.clone(), io.clone());
        check_prefix(&mut engine, 0, 8);
        let after = io.contents(aof_path()).unwrap();
        assert!(
            data.starts_with(&after),
            "cut {cut}: file not truncated to a prefix"
        );
    }
}

#[test]
fn torn_tail_is_refused_when_aof_load_truncated_is_no() {
    let (io, mut config, data) = small_aof();
    config.aof_load_truncated = false;
    io.set_contents(aof_path(), data[..data.len() - 3].to_vec());
    let err = match Engine::open_with_io(config, io) {
        Ok(_) => panic!("torn file loaded with aof-load-truncated no"),
        Err(e) => e.to_string(),
    };
    assert!(
        err.contains("torn write") && err.contains("hozon-repair check"),
        "{err}"
    );
}

#[test]
fn bit_flips_are_detected_never_loaded_silently() {
    let (io, config, data) = small_aof();
    let full = {
        io.set_contents(aof_path(), data.clone());
        let mut e = open(config.clone(), io.clone());
        dump(&mut e)
    };
    let mut rng = Rng::with_seed(3);
    for _ in 0..300 {
        let mut damaged = data.clone();
        let at = 14 + rng.index(damaged.len() - 14); // past the header
        damaged[at] ^= 1 << rng.below(8);
        io.set_contents(aof_path(), damaged);
        match Engine::open_with_io(config.clone(), io.clone()) {
            Ok(mut engine) => {
                // Loaded: only as a torn tail, so the state is a strict prefix.
                let state = dump(&mut engine);
                assert_ne!(state, full, "a flipped bit at {at} loaded as if intact");
                check_prefix(&mut engine, 0, 8);
            }
            Err(e) => {
                let text = e.to_string();
                assert!(
                    text.contains("offset") && text.contains("hozon-repair"),
                    "{text}"
                );
            }
        }
    }
}

#[test]
fn garbage_spliced_mid_file_is_corruption_with_offset() {
    let (io, config, data) = small_aof();
    let mid = data.len() / 2;
    let mut damaged = data[..mid].to_vec();
    damaged.extend_from_slice(b"garbage garbage\r\n");
    damaged.extend_from_slice(&data[mid..]);
    io.set_contents(aof_path(), damaged);
    let err = match Engine::open_with_io(config, io) {
        Ok(_) => panic!("spliced garbage loaded"),
        Err(e) => e.to_string(),
    };
    assert!(
        err.contains("at offset") && err.contains("hozon-repair salvage"),
        "{err}"
    );
}

#[test]
fn unknown_command_in_the_log_refuses_to_start() {
    let io = Arc::new(FaultyIo::new());
    let config = durable_config(Path::new("/data"), AppendFsync::Always);
    let mut body = Vec::new();
    hozon::persist::aof::encode_command(&mut body, &["NOSUCHCOMMAND", "x"]);
    let mut file = hozon::persist::aof::FILE_HEADER.to_vec();
    file.extend_from_slice(&body);
    file.extend(hozon::persist::aof::annotation_line(&body, 1));
    io.set_contents(aof_path(), file);
    let err = match Engine::open_with_io(config, io) {
        Ok(_) => panic!("unknown command loaded"),
        Err(e) => e.to_string(),
    };
    assert!(err.contains("unknown command 'NOSUCHCOMMAND'"), "{err}");
}

#[test]
fn everysec_writes_wait_for_an_fsync_slower_than_two_seconds() {
    let io = Arc::new(FaultyIo::new());
    let config = durable_config(Path::new("/data"), AppendFsync::Everysec);
    let mut engine = open(config, io.clone());
    let mut s = engine.new_session();
    // The first write starts a background fsync that takes 2.6 s.
    io.inject(Fault::SlowSync {
        nth: 1,
        delay_ms: 2600,
    });
    assert_eq!(run(&mut engine, &mut s, &["SET", "k0", "v"]), Reply::ok());
    let started = std::time::Instant::now();
    let status = |e: &mut Engine| e.aof_status().expect("aof on");
    assert!(
        status(&mut engine).pending_bio_fsync,
        "the background fsync did not start"
    );
    // Writes keep going without waiting while the fsync is younger than 2 s.
    let mut i = 1;
    while started.elapsed() < std::time::Duration::from_millis(1500) {
        assert_eq!(
            run(&mut engine, &mut s, &["SET", &format!("k{i}"), "v"]),
            Reply::ok()
        );
        assert_eq!(
            status(&mut engine).delayed_fsync,
            0,
            "a write waited for a young fsync"
        );
        i += 1;
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    // Past 2 s, the next write waits for the fsync to finish (the loss
    // window stays bounded) and the wait is counted.
    while started.elapsed() < std::time::Duration::from_millis(2100) {
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    assert_eq!(run(&mut engine, &mut s, &["SET", "late", "v"]), Reply::ok());
    assert_eq!(status(&mut engine).delayed_fsync, 1);
    // It returned only once the slow fsync (2.6 s from the first write) was done.
    assert!(
        started.elapsed() >= std::time::Duration::from_millis(2500),
        "{:?}",
        started.elapsed()
    );
}
