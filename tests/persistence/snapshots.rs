//! Snapshots through the engine and the server: BGSAVE captures one
//! instant while writes go on, the startup order, save points, SHUTDOWN and
//! SIGTERM saves, and failures that must leave the previous `dump.hoz`
//! intact.

use std::sync::Arc;
use std::time::{Duration, Instant};

use hozon::config::{AppendFsync, SavePoint};
use hozon::persist::io::RealIo;
use hozon::{Config, Engine, Reply};

use crate::common::{dump, durable_config, open, run};
use crate::functions::info_field;
use crate::harness::{start_hozon, Conn};

/// Snapshots only: no AOF, a save point far away (so files are used).
fn snapshot_config(dir: &std::path::Path) -> Config {
    let mut config = Config::in_memory();
    config.dir = dir.to_path_buf();
    config.save = vec![SavePoint {
        seconds: 3600,
        changes: 1_000_000_000,
    }];
    config
}

/// Drives a running BGSAVE to its end.
fn finish_bgsave(engine: &mut Engine) {
    let deadline = Instant::now() + Duration::from_secs(60);
    while engine.save_in_progress() {
        assert!(Instant::now() < deadline, "BGSAVE did not finish");
        engine.background_step(Duration::from_millis(2), hozon::engine::now_ms());
    }
}

#[test]
fn bgsave_captures_the_instant_it_started_while_writes_go_on() {
    let dir = tempfile::tempdir().unwrap();
    let mut engine = open(snapshot_config(dir.path()), Arc::new(RealIo));
    let mut s = engine.new_session();
    const KEYS: usize = 20_000;
    for i in 0..KEYS {
        run(&mut engine, &mut s, &["SET", &format!("k{i}"), "before"]);
        if i % 100 == 0 {
            run(&mut engine, &mut s, &["RPUSH", &format!("l{i}"), "a", "b"]);
        }
    }
    run(&mut engine, &mut s, &["PEXPIREAT", "k7", "99999999999999"]);
    let expected = dump(&mut engine);
    assert_eq!(
        run(&mut engine, &mut s, &["BGSAVE"]),
        Reply::simple("Background saving started")
    );
    // Every kind of change, interleaved with slices of the save.
    let mut step = 0;
    for i in (0..KEYS).rev() {
        match i % 5 {
            0 => run(&mut engine, &mut s, &["SET", &format!("k{i}"), "after"]),
            1 => run(&mut engine, &mut s, &["DEL", &format!("k{i}")]),
            2 => run(&mut engine, &mut s, &["APPEND", &format!("k{i}"), "+"]),
            3 => run(&mut engine, &mut s, &["SET", &format!("new{i}"), "x"]),
            _ => run(&mut engine, &mut s, &["EXPIRE", &format!("k{i}"), "1000"]),
        };
        if i % 100 == 0 {
            run(&mut engine, &mut s, &["LPUSH", &format!("l{i}"), "z"]);
        }
        step += 1;
        if step % 50 == 0 {
            engine.background_step(Duration::from_micros(200), hozon::engine::now_ms());
        }
    }
    run(&mut engine, &mut s, &["PERSIST", "k7"]);
    finish_bgsave(&mut engine);
    let info = run(&mut engine, &mut s, &["INFO", "persistence"]);
    let (Reply::Verbatim(_, text) | Reply::Bulk(text)) = info else {
        panic!("INFO reply")
    };
    let text = String::from_utf8_lossy(&text).into_owned();
    assert!(text.contains("rdb_last_bgsave_status:ok"), "{text}");
    assert!(text.contains("rdb_bgsave_in_progress:0"), "{text}");
    drop(engine);
    let mut reopened = open(snapshot_config(dir.path()), Arc::new(RealIo));
    assert_eq!(
        dump(&mut reopened),
        expected,
        "the dump is not the keyspace at BGSAVE time"
    );
}

#[test]
fn startup_prefers_the_aof_then_the_snapshot_and_writes_the_first_aof() {
    let dir = tempfile::tempdir().unwrap();
    // A snapshot with a=snapshot.
    {
        let mut engine = open(snapshot_config(dir.path()), Arc::new(RealIo));
        let mut s = engine.new_session();
        run(&mut engine, &mut s, &["SET", "a", "snapshot"]);
        run(&mut engine, &mut s, &["RPUSH", "l", "x", "y"]);
        assert_eq!(run(&mut engine, &mut s, &["SAVE"]), Reply::ok());
    }
    let list = || Reply::Array(vec![Reply::bulk(b"x"), Reply::bulk(b"y")]);
    // appendonly yes, no AOF yet: the snapshot is loaded and written out as
    // the first AOF before any write.
    let mut config = durable_config(dir.path(), AppendFsync::Always);
    config.save = snapshot_config(dir.path()).save;
    {
        let mut engine = open(config.clone(), Arc::new(RealIo));
        let mut s = engine.new_session();
        assert_eq!(
            run(&mut engine, &mut s, &["GET", "a"]),
            Reply::bulk(b"snapshot")
        );
        // Loaded once: the first AOF is not replayed on top of it (an
        // RPUSH replayed twice would double the list).
        assert_eq!(
            run(&mut engine, &mut s, &["LRANGE", "l", "0", "-1"]),
            list()
        );
        assert!(dir.path().join("appendonly.aof").exists());
        run(&mut engine, &mut s, &["SET", "b", "aof-only"]);
    }
    // Both files present: the AOF wins (it has b; the snapshot does not).
    {
        let mut engine = open(config.clone(), Arc::new(RealIo));
        let mut s = engine.new_session();
        assert_eq!(
            run(&mut engine, &mut s, &["GET", "a"]),
            Reply::bulk(b"snapshot")
        );
        assert_eq!(
            run(&mut engine, &mut s, &["GET", "b"]),
            Reply::bulk(b"aof-only")
        );
        assert_eq!(
            run(&mut engine, &mut s, &["LRANGE", "l", "0", "-1"]),
            list()
        );
    }
    // appendonly no: the snapshot alone.
    {
        let mut engine = open(snapshot_config(dir.path()), Arc::new(RealIo));
        let mut s = engine.new_session();
        assert_eq!(
            run(&mut engine, &mut s, &["GET", "a"]),
            Reply::bulk(b"snapshot")
        );
        assert_eq!(run(&mut engine, &mut s, &["GET", "b"]), Reply::Null);
    }
    // Neither file: empty.
    let empty = tempfile::tempdir().unwrap();
    let mut engine = open(snapshot_config(empty.path()), Arc::new(RealIo));
    let mut s = engine.new_session();
    assert_eq!(run(&mut engine, &mut s, &["DBSIZE"]), Reply::Int(0));
}

#[test]
fn cache_mode_touches_no_file() {
    let dir = tempfile::tempdir().unwrap();
    let mut config = Config::in_memory();
    config.dir = dir.path().to_path_buf();
    let mut engine = open(config, Arc::new(RealIo));
    let mut s = engine.new_session();
    run(&mut engine, &mut s, &["SET", "a", "1"]);
    drop(engine);
    assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
}

#[test]
fn a_damaged_snapshot_refuses_the_start_and_is_left_as_it_is() {
    let dir = tempfile::tempdir().unwrap();
    {
        let mut engine = open(snapshot_config(dir.path()), Arc::new(RealIo));
        let mut s = engine.new_session();
        for i in 0..1000 {
            run(&mut engine, &mut s, &["SET", &format!("k{i}"), "v"]);
        }
        assert_eq!(run(&mut engine, &mut s, &["SAVE"]), Reply::ok());
    }
    let path = dir.path().join("dump.hoz");
    let mut bytes = std::fs::read(&path).unwrap();
    let middle = bytes.len() / 2;
    bytes[middle] ^= 0x40;
    std::fs::write(&path, &bytes).unwrap();
    let error = match Engine::open(snapshot_config(dir.path())) {
        Ok(_) => panic!("a damaged snapshot was loaded"),
        Err(e) => e.to_string(),
    };
    assert!(error.contains("dump.hoz"), "{error}");
    assert_eq!(std::fs::read(&path).unwrap(), bytes, "the file was changed");
}

/// `dump.hoz` made a directory: renaming a new snapshot over it fails.
fn block_the_dump_name(dir: &std::path::Path) {
    std::fs::create_dir(dir.join("dump.hoz")).unwrap();
    std::fs::write(dir.join("dump.hoz").join("keep"), b"x").unwrap();
}

#[test]
fn a_failed_bgsave_stops_writes_until_a_save_succeeds() {
    let dir = tempfile::tempdir().unwrap();
    let mut engine = open(snapshot_config(dir.path()), Arc::new(RealIo));
    let mut s = engine.new_session();
    run(&mut engine, &mut s, &["SET", "a", "1"]);
    block_the_dump_name(dir.path());
    run(&mut engine, &mut s, &["BGSAVE"]);
    finish_bgsave(&mut engine);
    let refused = run(&mut engine, &mut s, &["SET", "a", "2"]);
    assert!(
        matches!(&refused, Reply::Error(e) if e.starts_with("MISCONF")),
        "{refused:?}"
    );
    assert_eq!(run(&mut engine, &mut s, &["GET", "a"]), Reply::bulk(b"1"));
    // No temporary file is left behind.
    let leftovers: Vec<_> = std::fs::read_dir(dir.path())
        .unwrap()
        .filter_map(|e| e.ok())
        .filter(|e| e.file_name().to_string_lossy().starts_with("temp-"))
        .collect();
    assert!(leftovers.is_empty(), "{leftovers:?}");
    std::fs::remove_dir_all(dir.path().join("dump.hoz")).unwrap();
    assert_eq!(run(&mut engine, &mut s, &["SAVE"]), Reply::ok());
    assert_eq!(run(&mut engine, &mut s, &["SET", "a", "2"]), Reply::ok());
    // With stop-writes-on-bgsave-error no, a failure does not stop writes.
    run(
        &mut engine,
        &mut s,
        &["CONFIG", "SET", "stop-writes-on-bgsave-error", "no"],
    );
    std::fs::remove_file(dir.path().join("dump.hoz")).unwrap();
    block_the_dump_name(dir.path());
    run(&mut engine, &mut s, &["BGSAVE"]);
    finish_bgsave(&mut engine);
    assert_eq!(run(&mut engine, &mut s, &["SET", "a", "3"]), Reply::ok());
}

#[test]
fn save_points_trigger_a_background_save() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path().to_string_lossy().into_owned();
    let server = start_hozon(&["--dir", &d, "--save", "1 2"]);
    let mut conn = Conn::connect(server.port);
    conn.call(&[b"SET", b"a", b"1"]);
    conn.call(&[b"SET", b"b", b"2"]);
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let info = conn.call(&[b"INFO", b"persistence"]);
        if String::from_utf8_lossy(&info).contains("rdb_changes_since_last_save:0") {
            break;
        }
        assert!(Instant::now() < deadline, "no save after the save point");
        std::thread::sleep(Duration::from_millis(100));
    }
    assert!(dir.path().join("dump.hoz").exists());
    drop(server);
    let restarted = start_hozon(&["--dir", &d, "--save", "1 2"]);
    let mut conn = Conn::connect(restarted.port);
    assert_eq!(conn.call(&[b"GET", b"b"]), b"$1\r\n2\r\n");
}

/// `count` keys `key:<i>` of 100-byte values, pipelined.
fn fill(conn: &mut Conn, count: usize) {
    let value = vec![b'v'; 100];
    let mut pipeline = Vec::new();
    for i in 0..count {
        let key = format!("key:{i}");
        pipeline.extend(crate::harness::encode_command(&[
            b"SET",
            key.as_bytes(),
            &value,
        ]));
    }
    conn.send_raw(&pipeline);
    for _ in 0..count {
        conn.read_reply();
    }
}

/// User plus system CPU time of process `pid` so far.
fn cpu_time(pid: u32) -> Duration {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).expect("/proc/PID/stat");
    // Fields after the parenthesised name: state is the 3rd field, utime
    // the 14th, stime the 15th.
    let rest = &stat[stat.rfind(')').expect("comm") + 2..];
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let ticks: u64 = fields[11].parse::<u64>().unwrap() + fields[12].parse::<u64>().unwrap();
    Duration::from_millis(ticks * 10) // USER_HZ is 100 on Linux
}

#[test]
fn sigkill_during_bgsave_keeps_the_previous_snapshot() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path().to_string_lossy().into_owned();
    let server = start_hozon(&["--dir", &d, "--save", "3600 1"]);
    let mut conn = Conn::connect(server.port);
    conn.call(&[b"SET", b"generation", b"1"]);
    assert_eq!(conn.call(&[b"SAVE"]), b"+OK\r\n");
    fill(&mut conn, 2000);
    conn.call(&[b"SET", b"generation", b"2"]);
    // 10 ms per key: the save is certainly running when the kill comes.
    assert_eq!(
        conn.call(&[b"CONFIG", b"SET", b"rdb-key-save-delay", b"10000"]),
        b"+OK\r\n"
    );
    assert_eq!(conn.call(&[b"BGSAVE"]), b"+Background saving started\r\n");
    std::thread::sleep(Duration::from_millis(200));
    assert_eq!(info_field(&mut conn, "rdb_bgsave_in_progress"), "1");
    drop(server); // SIGKILL mid-save
    let restarted = start_hozon(&["--dir", &d, "--save", "3600 1"]);
    let mut conn = Conn::connect(restarted.port);
    // The previous snapshot, whole.
    assert_eq!(conn.call(&[b"GET", b"generation"]), b"$1\r\n1\r\n");
    assert_eq!(conn.call(&[b"DBSIZE"]), b":1\r\n");
    let leftovers: Vec<_> = std::fs::read_dir(dir.path())
        .unwrap()
        .filter_map(|e| e.ok())
        .filter(|e| e.file_name().to_string_lossy().starts_with("temp-"))
        .collect();
    assert!(
        leftovers.is_empty(),
        "temp files survived the restart: {leftovers:?}"
    );
}

/// `rdb-key-save-delay` (Redis's test setting) slows a BGSAVE to a pace
/// without stopping the server: clients are served, the command thread
/// sleeps between keys instead of spinning, and lowering the delay lets
/// the save finish with the instant it started.
#[test]
fn rdb_key_save_delay_paces_a_bgsave_and_lifting_it_finishes_the_save() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path().to_string_lossy().into_owned();
    let server = start_hozon(&["--dir", &d, "--save", "3600 1"]);
    let mut conn = Conn::connect(server.port);
    fill(&mut conn, 1000);
    conn.call(&[b"SET", b"generation", b"1"]);
    assert_eq!(
        conn.call(&[b"CONFIG", b"SET", b"rdb-key-save-delay", b"5000"]),
        b"+OK\r\n"
    );
    assert_eq!(
        conn.call(&[b"CONFIG", b"GET", b"rdb-key-save-delay"]),
        b"*2\r\n$18\r\nrdb-key-save-delay\r\n$4\r\n5000\r\n"
    );
    assert_eq!(conn.call(&[b"BGSAVE"]), b"+Background saving started\r\n");
    // Written after the save began: not in the snapshot.
    conn.call(&[b"SET", b"generation", b"2"]);
    let cpu_before = cpu_time(server.pid());
    std::thread::sleep(Duration::from_secs(1));
    let cpu = cpu_time(server.pid()) - cpu_before;
    // 1001 keys at 5 ms: five seconds; one has passed.
    assert_eq!(info_field(&mut conn, "rdb_bgsave_in_progress"), "1");
    assert_eq!(conn.call(&[b"PING"]), b"+PONG\r\n");
    assert_eq!(conn.call(&[b"INCR", b"counter"]), b":1\r\n");
    // A command thread spinning between paced keys would use the whole
    // second (a quarter of it on a crowded machine); sleeping uses
    // milliseconds.
    assert!(
        cpu < Duration::from_millis(150),
        "{cpu:?} of CPU in 1 s of a paced save"
    );
    assert_eq!(
        conn.call(&[b"CONFIG", b"SET", b"rdb-key-save-delay", b"0"]),
        b"+OK\r\n"
    );
    let deadline = Instant::now() + Duration::from_secs(30);
    while info_field(&mut conn, "rdb_bgsave_in_progress") != "0" {
        assert!(
            Instant::now() < deadline,
            "the save did not finish once the delay was lifted"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    assert_eq!(info_field(&mut conn, "rdb_last_bgsave_status"), "ok");
    drop(server);
    let restarted = start_hozon(&["--dir", &d, "--save", "3600 1"]);
    let mut conn = Conn::connect(restarted.port);
    assert_eq!(conn.call(&[b"GET", b"generation"]), b"$1\r\n1\r\n");
    assert_eq!(conn.call(&[b"DBSIZE"]), b":1001\r\n");
}

#[test]
fn shutdown_saves_and_a_failed_save_keeps_the_server_up() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path().to_string_lossy().into_owned();
    let server = start_hozon(&["--dir", &d, "--save", "3600 1"]);
    let mut conn = Conn::connect(server.port);
    conn.call(&[b"SET", b"a", b"1"]);
    block_the_dump_name(dir.path());
    assert_eq!(
        conn.call(&[b"SHUTDOWN"]),
        b"-ERR Errors trying to SHUTDOWN. Check logs.\r\n"
    );
    assert_eq!(conn.call(&[b"PING"]), b"+PONG\r\n");
    std::fs::remove_dir_all(dir.path().join("dump.hoz")).unwrap();
    conn.send_raw(&crate::harness::encode_command(&[b"SHUTDOWN"]));
    let rest = conn.read_until_close();
    assert!(rest.is_empty(), "SHUTDOWN replied: {rest:?}");
    drop(server);
    let restarted = start_hozon(&["--dir", &d, "--save", "3600 1"]);
    let mut conn = Conn::connect(restarted.port);
    assert_eq!(conn.call(&[b"GET", b"a"]), b"$1\r\n1\r\n");
    // SHUTDOWN NOSAVE exits without saving.
    conn.call(&[b"SET", b"a", b"2"]);
    conn.send_raw(&crate::harness::encode_command(&[b"SHUTDOWN", b"NOSAVE"]));
    conn.read_until_close();
    drop(restarted);
    let again = start_hozon(&["--dir", &d, "--save", "3600 1"]);
    let mut conn = Conn::connect(again.port);
    assert_eq!(conn.call(&[b"GET", b"a"]), b"$1\r\n1\r\n");
}

/// The nice value of each thread of process `pid` named `name`.
fn thread_nices(pid: u32, name: &str) -> Vec<i32> {
    let mut found = Vec::new();
    let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
        return found;
    };
    for task in tasks.flatten() {
        let comm = std::fs::read_to_string(task.path().join("comm")).unwrap_or_default();
        if comm.trim_end() != name {
            continue;
        }
        let Ok(stat) = std::fs::read_to_string(task.path().join("stat")) else {
            continue; // it ended meanwhile
        };
        // Fields after the parenthesised name: state is the 3rd field,
        // nice the 19th.
        let rest = &stat[stat.rfind(')').expect("comm") + 2..];
        found.push(rest.split_whitespace().nth(16).unwrap().parse().unwrap());
    }
    found
}

/// Waits until process `pid` has one thread named `name` at nice
/// `wanted` (a new thread lowers its own priority first thing); fails
/// after 10 s naming what it saw.
fn wait_for_thread_at(pid: u32, name: &str, wanted: i32) {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let nices = thread_nices(pid, name);
        if nices == [wanted] {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "threads named {name}: nice values {nices:?}, wanted [{wanted}]"
        );
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// BGSAVE's and BGREWRITEAOF's writer threads run ten nice steps below
/// the command thread (docs/cores.md, "During a capture"), which keeps
/// its own: a client woken by its reply then takes a core from a writer
/// at once.
#[test]
fn background_writers_run_ten_nice_steps_below_the_command_thread() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path().to_string_lossy().into_owned();
    let server = start_hozon(&["--dir", &d, "--save", "3600 1", "--appendonly", "yes"]);
    let pid = server.pid();
    let main_nice = thread_nices(pid, "hozon-server");
    assert_eq!(main_nice.len(), 1, "the command thread: {main_nice:?}");
    let wanted = (main_nice[0] + 10).min(19);
    let mut conn = Conn::connect(server.port);
    fill(&mut conn, 1000);
    let paced = |conn: &mut Conn, delay: &[u8]| {
        assert_eq!(
            conn.call(&[b"CONFIG", b"SET", b"rdb-key-save-delay", delay]),
            b"+OK\r\n"
        );
    };
    let finished = |conn: &mut Conn, field: &str| {
        let deadline = Instant::now() + Duration::from_secs(30);
        while info_field(conn, field) != "0" {
            assert!(Instant::now() < deadline, "{field} stayed 1");
            std::thread::sleep(Duration::from_millis(10));
        }
    };
    // 10 ms per key: the jobs' threads live long enough to be looked at.
    paced(&mut conn, b"10000");
    assert_eq!(conn.call(&[b"BGSAVE"]), b"+Background saving started\r\n");
    wait_for_thread_at(pid, "hozon-bgsave", wanted);
    paced(&mut conn, b"0");
    finished(&mut conn, "rdb_bgsave_in_progress");
    paced(&mut conn, b"10000");
    assert_eq!(
        conn.call(&[b"BGREWRITEAOF"]),
        b"+Background append only file rewriting started\r\n"
    );
    // The kernel keeps 15 bytes of a thread's name.
    wait_for_thread_at(pid, "hozon-aof-rewri", wanted);
    paced(&mut conn, b"0");
    finished(&mut conn, "aof_rewrite_in_progress");
    assert_eq!(thread_nices(pid, "hozon-server"), main_nice);
}
