//! Stops at every step, while the engine runs: a workload of writes, SAVE,
//! BGSAVE and BGREWRITEAOF on the fault-injecting file system, stopped (a
//! crash, or a power loss that undoes or keeps unsynced renames) just
//! before its Nth file-system operation, for every N the workload reaches;
//! then the machine restarts, a new engine opens the directory and what it
//! loads is checked against what was acknowledged before the stop:
//!
//! - a crash (`kill -9`) loses no acknowledged write under any policy;
//! - a power loss loses none under `appendfsync always`, and under
//!   `everysec` and `no` leaves a prefix of what was attempted;
//! - with snapshots only, what loads is the state of an attempted save, at
//!   least as new as the last acknowledged one;
//! - the directory always loads: a stop never leaves damage.
//!
//! The same sweep on a disk that lies about fsyncs (of data, or of
//! directories) must find a violation: that is what proves the sweep would
//! notice a missing fsync.

use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use hozon::config::{AppendFsync, SnapshotFormat};
use hozon::engine::now_ms;
use hozon::persist::io::{Fault, FaultyIo, PowerLoss, Stop};
use hozon::rand::Rng;
use hozon::{Config, Engine, Reply};

use crate::common::{durable_config, run, seed};

/// What the data directory promises.
#[derive(Debug, Clone, Copy)]
enum Mode {
    /// `appendonly yes` with this policy.
    Aof(AppendFsync),
    /// `appendonly no`: snapshots only (SAVE, BGSAVE), in this format,
    /// with or without (never reached) save points.
    Snapshot(SnapshotFormat, bool),
}

fn config(mode: Mode) -> Config {
    let dir = Path::new("/data");
    match mode {
        Mode::Aof(policy) => durable_config(dir, policy),
        Mode::Snapshot(format, save_points) => {
            let mut config = durable_config(dir, AppendFsync::Everysec);
            config.appendonly = false;
            config.snapshot_format = format;
            config.save = if save_points {
                vec![hozon::config::SavePoint {
                    seconds: 3600,
                    changes: 1,
                }]
            } else {
                Vec::new()
            };
            config
        }
    }
}

/// What the workload saw acknowledged.
#[derive(Debug, Default)]
struct History {
    /// Write pairs (SET key:i, INCR counter) attempted and acknowledged.
    attempted: u64,
    acknowledged: u64,
    /// Snapshots: the counter each save attempt captured, and whether it
    /// was acknowledged (SAVE's OK, or BGSAVE ending with status ok).
    saves: Vec<(u64, bool)>,
}

/// Runs background work (BGSAVE, a rewrite) until it ends.
fn drive(engine: &mut Engine) {
    let deadline = Instant::now() + Duration::from_secs(60);
    while engine.background_busy() {
        engine.background_step(Duration::from_millis(5), now_ms());
        assert!(Instant::now() < deadline, "a background job did not end");
    }
}

fn info_persistence(engine: &mut Engine) -> String {
    let mut s = engine.new_session();
    match run(engine, &mut s, &["INFO", "persistence"]) {
        Reply::Bulk(text) | Reply::Verbatim(_, text) => String::from_utf8_lossy(&text).into_owned(),
        other => panic!("INFO: {other:?}"),
    }
}

fn bgsave_ok(engine: &mut Engine) -> bool {
    info_persistence(engine).contains("rdb_last_bgsave_status:ok")
}

/// The workload of `seed`: write pairs, with SAVE, BGSAVE and (AOF modes)
/// BGREWRITEAOF among them, some of them with writes while they run. It
/// stops at the first write that is not acknowledged.
fn workload(engine: &mut Engine, mode: Mode, seed: u64) -> History {
    let mut rng = Rng::with_seed(seed);
    let mut s = engine.new_session();
    let mut h = History::default();
    for _ in 0..36 {
        match rng.below(10) {
            0 => {
                let ok = run(engine, &mut s, &["SAVE"]) == Reply::ok();
                h.saves.push((h.acknowledged, ok));
            }
            1 => {
                let started = run(engine, &mut s, &["BGSAVE"]);
                if !started.is_error() {
                    let at = h.acknowledged;
                    drive(engine);
                    let ok = bgsave_ok(engine);
                    h.saves.push((at, ok));
                }
            }
            2 if matches!(mode, Mode::Aof(_)) => {
                run(engine, &mut s, &["BGREWRITEAOF"]);
                // Writes while it runs: they are the rewrite's diff.
                engine.background_step(Duration::from_micros(200), now_ms());
                for _ in 0..rng.below(4) {
                    if !write_pair(engine, &mut s, &mut h) {
                        return h;
                    }
                }
                drive(engine);
            }
            _ => {
                if !write_pair(engine, &mut s, &mut h) {
                    return h;
                }
            }
        }
    }
    h
}

fn write_pair(engine: &mut Engine, s: &mut hozon::Session, h: &mut History) -> bool {
    let i = h.attempted + 1;
    h.attempted = i;
    let set = run(engine, s, &["SET", &format!("key:{i}"), "v"]);
    if set.is_error() {
        return false;
    }
    let incr = run(engine, s, &["INCR", "counter"]);
    if incr != Reply::Int(i as i64) {
        return false;
    }
    h.acknowledged = i;
    true
}

/// The counter a reopened engine holds, after checking that its keys form
/// a prefix of the attempted history.
fn recovered(engine: &mut Engine, attempted: u64) -> Result<u64, String> {
    let mut s = engine.new_session();
    let counter = match run(engine, &mut s, &["GET", "counter"]) {
        Reply::Bulk(b) => String::from_utf8_lossy(&b)
            .parse::<u64>()
            .map_err(|e| format!("counter: {e}"))?,
        Reply::Null => 0,
        other => return Err(format!("GET counter: {other:?}")),
    };
    if counter > attempted {
        return Err(format!("counter {counter} beyond attempted {attempted}"));
    }
    for i in 1..=attempted + 1 {
        let present = run(engine, &mut s, &["EXISTS", &format!("key:{i}")]) == Reply::Int(1);
        // key:counter+1 may have been logged without its INCR.
        if (i <= counter && !present) || (i > counter + 1 && present) {
            return Err(format!(
                "not a prefix: key:{i} {} with counter {counter}",
                if present { "present" } else { "missing" }
            ));
        }
    }
    Ok(counter)
}

/// What the reopened directory must hold, given how the program stopped.
fn check(mode: Mode, how: Stop, h: &History, counter: u64) -> Result<(), String> {
    match mode {
        Mode::Aof(policy) => {
            let must_keep_all = matches!(how, Stop::Crash) || policy == AppendFsync::Always;
            if must_keep_all && counter < h.acknowledged {
                return Err(format!(
                    "lost acknowledged writes: counter {counter} < {} acknowledged",
                    h.acknowledged
                ));
            }
        }
        Mode::Snapshot(..) => {
            let last_acked = h
                .saves
                .iter()
                .filter(|(_, ok)| *ok)
                .map(|(at, _)| *at)
                .max();
            if counter != 0 && !h.saves.iter().any(|(at, _)| *at == counter) {
                return Err(format!(
                    "loaded counter {counter}, which no save captured ({:?})",
                    h.saves
                ));
            }
            if let Some(last) = last_acked {
                if counter < last {
                    return Err(format!(
                        "loaded counter {counter}, older than the acknowledged save of {last}"
                    ));
                }
            }
        }
    }
    Ok(())
}

/// How the Nth run stops: crashes and both kinds of power loss, with
/// unsynced bytes dropped, torn, or torn with garbage.
fn stop_for(n: u64) -> Stop {
    let torn = PowerLoss::Torn {
        keep: (n as usize * 37) % 300,
    };
    let garbage = PowerLoss::TornWithGarbage {
        keep: (n as usize * 13) % 200,
        garbage: 1 + (n as usize % 40),
    };
    match n % 5 {
        0 => Stop::Crash,
        1 => Stop::PowerLoss(PowerLoss::DropUnsynced),
        2 => Stop::PowerLoss(torn),
        3 => Stop::PowerLossKeepingNames(garbage),
        _ => Stop::PowerLossKeepingNames(PowerLoss::DropUnsynced),
    }
}

/// The sweep: one clean run to count the operations, then one run stopped
/// before each of them (and one past the end). `lying` makes the disk lie
/// about fsyncs of data and of directories. Returns how many stopped runs
/// were checked, or the first violation.
fn sweep(mode: Mode, seed: u64, lying: (bool, bool)) -> Result<u64, String> {
    let clean = FaultyIo::new();
    let ops = {
        let mut engine = Engine::open_with_io(config(mode), Arc::new(clean.process()))
            .map_err(|e| format!("open: {e}"))?;
        workload(&mut engine, mode, seed);
        clean.operations()
    };
    for n in 1..=ops + 1 {
        let io = FaultyIo::new();
        io.set_lying_disk(lying.0, lying.1);
        let how = stop_for(n);
        io.inject(Fault::Stop { nth_op: n, how });
        // A stop during the first open fails it: nothing was acknowledged.
        let history = match Engine::open_with_io(config(mode), Arc::new(io.process())) {
            Ok(mut engine) => workload(&mut engine, mode, seed),
            Err(_) if io.is_off() => History::default(),
            Err(e) => return Err(format!("stop at op {n} ({how:?}): first open failed: {e}")),
        };
        if !io.is_off() {
            // The workload ended before op n: stop now.
            io.stop_now(how);
        }
        io.power_on();
        let context = format!("{mode:?}, stop before op {n} of {ops} ({how:?}), {history:?}");
        let mut engine = Engine::open_with_io(config(mode), Arc::new(io.process()))
            .map_err(|e| format!("{context}: the directory does not load: {e}"))?;
        let counter =
            recovered(&mut engine, history.attempted).map_err(|e| format!("{context}: {e}"))?;
        check(mode, how, &history, counter).map_err(|e| format!("{context}: {e}"))?;
    }
    Ok(ops + 1)
}

/// Sweeps `HOZON_POWER_CUT_SEEDS` workloads (1 by default; the long run,
/// scripts/soak-long, takes more), from `HOZON_SEED` or `default_seed` on.
fn sweep_must_pass(mode: Mode, default_seed: u64) {
    let first = seed(default_seed);
    let seeds: u64 = std::env::var("HOZON_POWER_CUT_SEEDS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(1);
    let mut runs = 0;
    for seed in first..first + seeds {
        match sweep(mode, seed, (false, false)) {
            Ok(n) => runs += n,
            Err(violation) => panic!("seed {seed} (HOZON_SEED={seed}): {violation}"),
        }
    }
    eprintln!("{mode:?}: {seeds} workloads, {runs} stopped runs checked, no violation");
}

#[test]
fn stops_at_every_step_under_always() {
    sweep_must_pass(Mode::Aof(AppendFsync::Always), 101);
}

#[test]
fn stops_at_every_step_under_everysec() {
    sweep_must_pass(Mode::Aof(AppendFsync::Everysec), 102);
}

#[test]
fn stops_at_every_step_under_no() {
    sweep_must_pass(Mode::Aof(AppendFsync::No), 103);
}

#[test]
fn stops_at_every_step_with_native_snapshots_only() {
    sweep_must_pass(Mode::Snapshot(SnapshotFormat::Native, false), 104);
}

#[test]
fn stops_at_every_step_with_rdb_snapshots_and_save_points() {
    sweep_must_pass(Mode::Snapshot(SnapshotFormat::Rdb, true), 105);
}

/// The sweeps have teeth: on a disk whose fsyncs (of data, or of
/// directories) do nothing, as if the code skipped them, the sweeps of
/// `always` and of snapshots find lost acknowledged writes.
fn assert_sweeps_notice(lying: (bool, bool), what: &str) {
    let seed = seed(101);
    for mode in [
        Mode::Aof(AppendFsync::Always),
        Mode::Snapshot(SnapshotFormat::Native, false),
    ] {
        let found = sweep(mode, seed, lying);
        assert!(
            found.is_err(),
            "{mode:?}: skipping every {what} went unnoticed: {found:?}"
        );
    }
}

#[test]
fn the_sweep_notices_a_missing_data_fsync() {
    assert_sweeps_notice((true, false), "data fsync");
}

#[test]
fn the_sweep_notices_a_missing_directory_fsync() {
    assert_sweeps_notice((false, true), "directory fsync");
}

/// Keeps the workload honest: it reaches saves, background saves and
/// rewrites, so the sweeps stop inside each of them.
#[test]
fn the_workload_exercises_every_step() {
    let io = FaultyIo::new();
    let mut engine =
        Engine::open_with_io(config(Mode::Aof(AppendFsync::Always)), Arc::new(io)).expect("open");
    let h = workload(&mut engine, Mode::Aof(AppendFsync::Always), 101);
    let info = info_persistence(&mut engine);
    assert!(h.saves.len() >= 2, "{h:?}");
    assert!(h.acknowledged >= 15, "{h:?}");
    assert!(
        !info.contains("aof_rewrites:0\r\n"),
        "no rewrite ran: {info}"
    );
}

/// The same stops with the server running: a client over TCP makes write
/// pairs, BGSAVE and BGREWRITEAOF on a `hozon::server::Server` whose
/// engine runs on the fault-injecting file system (group commit: replies
/// leave after the turn's batch is written, and fsynced under `always`).
/// Acknowledged means the client read the reply.
fn server_sweep(policy: AppendFsync, seed: u64, lying: (bool, bool)) -> Result<u64, String> {
    let mode = Mode::Aof(policy);
    let run_server = |io: &FaultyIo| -> Result<History, String> {
        let mut config = config(mode);
        config.port = 0;
        config.bind = vec!["127.0.0.1".into()];
        let engine = match Engine::open_with_io(config, Arc::new(io.process())) {
            Ok(engine) => engine,
            Err(_) if io.is_off() => return Ok(History::default()),
            Err(e) => return Err(format!("open: {e}")),
        };
        let shutdown = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let mut server = hozon::server::Server::bind(engine, Arc::clone(&shutdown))
            .map_err(|e| e.to_string())?;
        let port = server.local_addrs()[0].port();
        let thread = std::thread::spawn(move || server.run());
        let mut conn = crate::harness::Conn::connect(port);
        let mut rng = Rng::with_seed(seed);
        let mut h = History::default();
        for _ in 0..30 {
            match rng.below(10) {
                0 | 1 => {
                    let job: &[u8] = if rng.below(2) == 0 {
                        b"BGSAVE"
                    } else {
                        b"BGREWRITEAOF"
                    };
                    if call_or_closed(&mut conn, io, &[job]).is_none() {
                        break;
                    }
                }
                _ => {
                    let i = h.attempted + 1;
                    h.attempted = i;
                    let key = format!("key:{i}");
                    let set = call_or_closed(&mut conn, io, &[b"SET", key.as_bytes(), b"v"]);
                    if set.as_deref() != Some(b"+OK\r\n".as_slice()) {
                        break;
                    }
                    let incr = call_or_closed(&mut conn, io, &[b"INCR", b"counter"]);
                    if incr != Some(format!(":{i}\r\n").into_bytes()) {
                        break;
                    }
                    h.acknowledged = i;
                }
            }
        }
        shutdown.store(true, std::sync::atomic::Ordering::SeqCst);
        thread
            .join()
            .map_err(|_| "the server thread panicked".to_string())?
            .map_err(|e| format!("the server failed: {e}"))?;
        Ok(h)
    };
    let clean = FaultyIo::new();
    run_server(&clean)?;
    let ops = clean.operations();
    for n in 1..=ops + 1 {
        let io = FaultyIo::new();
        io.set_lying_disk(lying.0, lying.1);
        let how = stop_for(n);
        io.inject(Fault::Stop { nth_op: n, how });
        let history = run_server(&io).map_err(|e| format!("stop at op {n}: {e}"))?;
        if !io.is_off() {
            io.stop_now(how);
        }
        io.power_on();
        let context =
            format!("server, {policy:?}, stop before op {n} of {ops} ({how:?}), {history:?}");
        let mut engine = Engine::open_with_io(config(mode), Arc::new(io.process()))
            .map_err(|e| format!("{context}: the directory does not load: {e}"))?;
        let counter =
            recovered(&mut engine, history.attempted).map_err(|e| format!("{context}: {e}"))?;
        check(mode, how, &history, counter).map_err(|e| format!("{context}: {e}"))?;
    }
    Ok(ops + 1)
}

/// A reply, or None when the server closed the connection (it does so to
/// clients whose write could not be made durable) or holds the reply while
/// the machine is stopped (a held write's retry cannot succeed then).
fn call_or_closed(
    conn: &mut crate::harness::Conn,
    io: &FaultyIo,
    args: &[&[u8]],
) -> Option<Vec<u8>> {
    conn.send_raw(&crate::harness::encode_command(args));
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        if let Some(reply) = conn.try_read_reply(Duration::from_millis(50)) {
            return Some(reply);
        }
        if io.is_off() || Instant::now() > deadline {
            return None;
        }
    }
}

#[test]
fn stops_at_every_step_of_a_running_server() {
    let seed = seed(201);
    for policy in [AppendFsync::Always, AppendFsync::Everysec, AppendFsync::No] {
        match server_sweep(policy, seed, (false, false)) {
            Ok(runs) => eprintln!("server {policy:?}: {runs} stopped runs checked"),
            Err(violation) => panic!("seed {seed}: {violation}"),
        }
    }
}

/// The server sweep has teeth too: under `always`, a disk whose data
/// fsyncs (or directory fsyncs) do nothing loses acknowledged writes.
#[test]
fn the_server_sweep_notices_missing_fsyncs() {
    let seed = seed(201);
    for (lying, what) in [
        ((true, false), "data fsync"),
        ((false, true), "directory fsync"),
    ] {
        let found = server_sweep(AppendFsync::Always, seed, lying);
        assert!(
            found.is_err(),
            "skipping every {what} went unnoticed by the server sweep: {found:?}"
        );
    }
}
