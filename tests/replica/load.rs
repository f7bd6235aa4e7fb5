//! The full sync's payload load (docs/replication.md §5.3): the three
//! `repl-diskless-load` modes against a redis-server master (disk and
//! diskless transfers), which path each took, damaged payloads from the
//! fake master in each mode, clients served during a large load, the
//! master keeping a replica whose load outlasts its `repl-timeout`, and a
//! load cancelled by REPLICAOF NO ONE or by the master going away.

use std::net::TcpListener;
use std::path::Path;
use std::time::{Duration, Instant};

use testkit::harness::{start_hozon, start_redis, Conn, ServerProcess};

use crate::fake_master::{flipped_payload, serve_attempt};
use crate::{call, dataset, fill, info_field, wait_caught_up, write_more, Value};

/// A hozon server with its own data directory and log file.
struct Replica {
    server: ServerProcess,
    dir: tempfile::TempDir,
}

impl Replica {
    fn start(extra: &[&str]) -> Replica {
        let dir = tempfile::tempdir().expect("temp dir");
        let dir_arg = dir.path().to_string_lossy().into_owned();
        let log_arg = dir
            .path()
            .join("replica.log")
            .to_string_lossy()
            .into_owned();
        let args = [&["--dir", &dir_arg, "--logfile", &log_arg][..], extra].concat();
        Replica {
            server: start_hozon(&args),
            dir,
        }
    }

    fn log(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("replica.log")).unwrap_or_default()
    }

    fn conn(&self) -> Conn {
        Conn::connect(self.server.port)
    }
}

/// Files in `dir` whose names start with `temp-sync`.
fn temp_sync_files(dir: &Path) -> Vec<String> {
    std::fs::read_dir(dir)
        .expect("dir")
        .filter_map(Result::ok)
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|name| name.starts_with("temp-sync"))
        .collect()
}

/// Points the replica behind `r` at `port`.
fn follow(r: &mut Conn, port: u16) {
    assert_eq!(
        call(r, &["REPLICAOF", "127.0.0.1", &port.to_string()]),
        Value::Simple("OK".into())
    );
}

/// True when INFO's text shows a payload load in progress (`loading:1`,
/// or `async_loading:1` when the old data is served meanwhile).
fn load_in_progress(info: &str) -> bool {
    info.contains("\r\nloading:1\r\n") || info.contains("async_loading:1\r\n")
}

/// Polls INFO until a payload load is in progress, and returns that
/// INFO's text. The reply itself is a client served during the load
/// (INFO has Redis's `loading` flag).
fn wait_for_load(r: &mut Conn) -> String {
    let deadline = Instant::now() + Duration::from_secs(120);
    loop {
        let Value::Bulk(text) = call(r, &["INFO"]) else {
            panic!("INFO");
        };
        let text = String::from_utf8_lossy(&text).into_owned();
        if load_in_progress(&text) {
            return text;
        }
        assert!(Instant::now() < deadline, "no load seen in INFO:\n{text}");
        std::thread::sleep(Duration::from_millis(2));
    }
}

#[test]
fn each_mode_syncs_from_redis_with_disk_and_diskless_transfers() {
    for master_diskless in ["no", "yes"] {
        for mode in ["disabled", "on-empty-db", "swapdb"] {
            let master = start_redis(&[
                "--repl-diskless-sync",
                master_diskless,
                "--repl-diskless-sync-delay",
                "0",
            ]);
            let mut m = Conn::connect(master.port);
            fill(&mut m);
            let replica = Replica::start(&["--repl-diskless-load", mode, "--appendonly", "yes"]);
            let mut r = replica.conn();
            assert_eq!(
                call(&mut r, &["CONFIG", "GET", "repl-diskless-load"]),
                Value::Array(vec![
                    Value::Bulk(b"repl-diskless-load".to_vec()),
                    Value::Bulk(mode.as_bytes().to_vec()),
                ])
            );
            follow(&mut r, master.port);
            wait_caught_up(&mut m, &mut r);
            let what = format!("mode {mode}, master diskless {master_diskless}");
            assert_eq!(dataset(&mut r), dataset(&mut m), "{what}: after the sync");
            write_more(&mut m);
            wait_caught_up(&mut m, &mut r);
            let expected = dataset(&mut m);
            assert_eq!(dataset(&mut r), expected, "{what}: after the stream");
            let log = replica.log();
            // The replica was empty: only `disabled` goes to disk.
            let target = if mode == "disabled" {
                "to disk"
            } else {
                "to parser"
            };
            assert!(
                log.lines()
                    .any(|l| l.contains("MASTER <-> REPLICA sync: receiving") && l.contains(target)),
                "{what}: no receiving line {target:?} in:\n{log}"
            );
            assert!(log.contains("MASTER <-> REPLICA sync: Loading DB in memory"));
            if mode == "swapdb" {
                assert!(
                    log.contains("MASTER <-> REPLICA sync: Swapping active DB with loaded DB"),
                    "{what}:\n{log}"
                );
            }
            assert!(temp_sync_files(replica.dir.path()).is_empty(), "{what}");
            // The AOF committed by the load, and the stream after it, bring
            // the same dataset back after a restart.
            let dir = replica.dir.path().to_string_lossy().into_owned();
            drop(r);
            let Replica { server, dir: keep } = replica;
            drop(server);
            let restarted = start_hozon(&["--dir", &dir, "--appendonly", "yes"]);
            let mut again = Conn::connect(restarted.port);
            assert_eq!(dataset(&mut again), expected, "{what}: after a restart");
            drop(keep);
        }
    }
}

#[test]
fn on_empty_db_with_keys_takes_the_file_path() {
    let master = start_redis(&["--repl-diskless-sync", "no"]);
    let mut m = Conn::connect(master.port);
    fill(&mut m);
    let replica = Replica::start(&["--repl-diskless-load", "on-empty-db"]);
    let mut r = replica.conn();
    call(&mut r, &["SET", "mine", "1"]);
    follow(&mut r, master.port);
    wait_caught_up(&mut m, &mut r);
    assert_eq!(dataset(&mut r), dataset(&mut m));
    let log = replica.log();
    assert!(
        log.lines()
            .any(|l| l.contains("MASTER <-> REPLICA sync: receiving") && l.contains("to disk")),
        "no receiving-to-disk line in:\n{log}"
    );
    assert!(!log.contains("to parser"), "{log}");
}

/// The fake master sends `payload` twice to a replica in `mode` holding
/// `old` keys (none: an empty replica); the replica keeps exactly its old
/// data, logs `expected`, retries, and leaves no temporary file.
fn damaged_payload_in_mode(mode: &str, old: bool, payload: &[u8], expected: &[&str]) {
    let replica = Replica::start(&["--repl-diskless-load", mode, "--appendonly", "yes"]);
    let mut h = replica.conn();
    if old {
        call(&mut h, &["SET", "old", "kept"]);
        call(&mut h, &["RPUSH", "oldlist", "1", "2"]);
    }
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
    follow(&mut h, listener.local_addr().expect("addr").port());
    let first = serve_attempt(&listener, payload);
    let second = serve_attempt(&listener, payload);
    drop((first, second));
    let log = replica.log();
    for line in expected {
        assert!(log.contains(line), "mode {mode}: no {line:?} in:\n{log}");
    }
    assert_eq!(call(&mut h, &["EXISTS", "new1"]), Value::Int(0));
    if old {
        assert_eq!(call(&mut h, &["GET", "old"]), Value::Bulk(b"kept".to_vec()));
        assert_eq!(call(&mut h, &["LLEN", "oldlist"]), Value::Int(2));
        assert_eq!(call(&mut h, &["DBSIZE"]), Value::Int(2));
    } else {
        assert_eq!(call(&mut h, &["DBSIZE"]), Value::Int(0));
    }
    // Whatever the first attempt's load left is gone (the second attempt
    // may still be receiving into a file of its own).
    call(&mut h, &["REPLICAOF", "NO", "ONE"]);
    let deadline = Instant::now() + Duration::from_secs(20);
    while !temp_sync_files(replica.dir.path()).is_empty() {
        assert!(
            Instant::now() < deadline,
            "mode {mode}: left behind: {:?}",
            temp_sync_files(replica.dir.path())
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    if old {
        assert_eq!(call(&mut h, &["DBSIZE"]), Value::Int(2));
    }
}

#[test]
fn a_damaged_payload_keeps_the_old_data_in_every_mode() {
    let payload = flipped_payload();
    let from_disk = "Failed trying to load the MASTER synchronization DB from disk";
    let from_socket = "Failed trying to load the MASTER synchronization DB from socket";
    let discarding = "MASTER <-> REPLICA sync: Discarding temporary DB in background";
    damaged_payload_in_mode("disabled", true, &payload, &[from_disk]);
    damaged_payload_in_mode("on-empty-db", true, &payload, &[from_disk]);
    damaged_payload_in_mode("on-empty-db", false, &payload, &[from_socket]);
    damaged_payload_in_mode("swapdb", true, &payload, &[from_socket, discarding]);
}

/// Held by the tests whose loads are large: a load keeps both cores of a
/// 2-core machine busy, and two at once starve each other's event loop
/// (a replica that cannot send its once-a-second newline is dropped by a
/// master with `repl-timeout 1`).
fn large_load_slot() -> std::sync::MutexGuard<'static, ()> {
    static SLOT: std::sync::Mutex<()> = std::sync::Mutex::new(());
    SLOT.lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// A redis-server master (disk transfers, `extra`) holding `keys` keys.
fn big_master(keys: u64, extra: &[&str]) -> ServerProcess {
    let base = [
        "--repl-diskless-sync",
        "no",
        "--enable-debug-command",
        "yes",
    ];
    let master = start_redis(&[&base[..], extra].concat());
    let mut m = Conn::connect(master.port);
    let populated = call(
        &mut m,
        &["DEBUG", "POPULATE", &keys.to_string(), "key", "20"],
    );
    assert_eq!(populated, Value::Simple("OK".into()));
    master
}

const LOADING: &str = "LOADING Redis is loading the dataset in memory";

#[test]
fn a_full_sync_load_answers_loading_except_a_swapdb_resync_of_the_same_history() {
    let _slot = large_load_slot();
    let master = big_master(300_000, &["--repl-backlog-size", "16384"]);
    let mut m = Conn::connect(master.port);
    // A first sync in each mode, from a replica holding its own data:
    // Redis flushes it and answers -LOADING to what lacks the `loading`
    // flag while it loads; so does hozon (which keeps the old data until
    // the load succeeds, unseen).
    for mode in ["disabled", "on-empty-db", "swapdb"] {
        // A pause once in 10 keys: a load of a few seconds to look at.
        let replica = Replica::start(&[
            "--repl-diskless-load",
            mode,
            "--appendonly",
            "yes",
            "--key-load-delay",
            "-10",
        ]);
        let mut r = replica.conn();
        call(&mut r, &["SET", "old", "kept"]);
        follow(&mut r, master.port);
        let info = wait_for_load(&mut r);
        assert!(info.contains("\r\nloading:1\r\n"), "{mode}: {info}");
        assert!(info.contains("async_loading:0\r\n"), "{mode}: {info}");
        assert!(info.contains("loading_total_bytes:"), "{mode}: {info}");
        assert_eq!(
            call(&mut r, &["PING"]),
            Value::Error(LOADING.into()),
            "{mode}"
        );
        assert_eq!(call(&mut r, &["GET", "old"]), Value::Error(LOADING.into()));
        assert_eq!(call(&mut r, &["ECHO", "e"]), Value::Bulk(b"e".to_vec()));
        wait_caught_up(&mut m, &mut r);
        assert_eq!(call(&mut r, &["DBSIZE"]), Value::Int(300_000), "{mode}");
        assert_eq!(call(&mut r, &["EXISTS", "old"]), Value::Int(0));
        if mode != "swapdb" {
            continue;
        }
        // A full resync of the history it already follows (the backlog
        // no longer covers it): with swapdb, Redis's async loading, the
        // old data served meanwhile and SAVE-like commands refused.
        // One transaction, so the replica cannot come back in between.
        let filler = "for i=1,2000 do redis.call('SET','f:'..i,string.rep('x',100)) end";
        call(&mut m, &["MULTI"]);
        call(&mut m, &["CLIENT", "KILL", "TYPE", "replica"]);
        call(&mut m, &["EVAL", filler, "0"]);
        assert!(matches!(call(&mut m, &["EXEC"]), Value::Array(r) if r[0] == Value::Int(1)));
        let info = wait_for_load(&mut r);
        assert!(info.contains("async_loading:1\r\n"), "{info}");
        assert!(info.contains("\r\nloading:0\r\n"), "{info}");
        assert_eq!(call(&mut r, &["PING"]), Value::Simple("PONG".into()));
        assert_eq!(call(&mut r, &["DBSIZE"]), Value::Int(300_000));
        assert_eq!(call(&mut r, &["BGSAVE"]), Value::Error(LOADING.into()));
        wait_caught_up(&mut m, &mut r);
        assert_eq!(call(&mut r, &["DBSIZE"]), Value::Int(302_000));
    }
    // Without stale data, clients get MASTERDOWN during the load, as
    // during the rest of the sync (Redis checks it before -LOADING).
    let replica = Replica::start(&["--replica-serve-stale-data", "no"]);
    let mut r = replica.conn();
    call(&mut r, &["SET", "old", "kept"]);
    follow(&mut r, master.port);
    wait_for_load(&mut r);
    assert_eq!(
        call(&mut r, &["GET", "old"]),
        Value::Error(
            "MASTERDOWN Link with MASTER is down and replica-serve-stale-data is set to 'no'."
                .into()
        )
    );
    wait_caught_up(&mut m, &mut r);
    assert_eq!(call(&mut r, &["DBSIZE"]), Value::Int(302_000));
}

/// Follows the master behind `m` from a new replica (`appendonly yes`)
/// and returns it with how long its load was seen in progress, in whole
/// seconds of its own clock (INFO's `loading_start_time` against
/// `server_time_usec`).
fn timed_load(port: u16) -> (Replica, i64) {
    let replica = Replica::start(&["--appendonly", "yes"]);
    let mut r = replica.conn();
    follow(&mut r, port);
    wait_for_load(&mut r);
    let mut longest = 0;
    loop {
        let Value::Bulk(text) = call(&mut r, &["INFO"]) else {
            panic!("INFO")
        };
        let text = String::from_utf8_lossy(&text).into_owned();
        if !load_in_progress(&text) {
            let log = replica.log();
            // A master that drops us mid-load ends the load early.
            assert!(
                !log.contains("the load in progress is abandoned"),
                "the link was lost during the load (after {longest}s):\n{log}"
            );
            return (replica, longest);
        }
        let field = |name: &str| {
            text.lines()
                .find_map(|l| l.strip_prefix(name))
                .and_then(|v| v.trim().parse::<i64>().ok())
        };
        let (Some(start), Some(now)) = (field("loading_start_time:"), field("server_time_usec:"))
        else {
            panic!("no loading_start_time or server_time_usec:\n{text}");
        };
        longest = longest.max(now / 1_000_000 - start);
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn the_master_keeps_a_replica_whose_load_outlasts_its_repl_timeout() {
    let _slot = large_load_slot();
    let dir = tempfile::tempdir().expect("temp dir");
    let master_log = dir.path().join("master.log");
    let master_log_arg = master_log.to_string_lossy().into_owned();
    // The load must outlast the master's `repl-timeout` (1 s) by enough
    // that a replica sending nothing would be dropped: at least 3 s. How
    // long a load takes depends on the machine, so the dataset grows
    // until one does (or the test fails, saying so).
    let mut keys = 2_000_000;
    let master = big_master(keys, &["--repl-timeout", "1", "--logfile", &master_log_arg]);
    let mut m = Conn::connect(master.port);
    let mut attempts = 0;
    let (replica, keys) = loop {
        let (replica, seconds) = timed_load(master.port);
        if seconds >= 3 {
            break (replica, keys);
        }
        attempts += 1;
        assert!(
            attempts < 3,
            "precondition: a load of {keys} keys lasted only {seconds}s, not long enough \
             to outlast the master's repl-timeout"
        );
        drop(replica);
        keys *= 2;
        let populated = call(
            &mut m,
            &["DEBUG", "POPULATE", &keys.to_string(), "key", "20"],
        );
        assert_eq!(populated, Value::Simple("OK".into()));
    };
    let mut r = replica.conn();
    wait_caught_up(&mut m, &mut r);
    assert_eq!(call(&mut r, &["DBSIZE"]), Value::Int(keys as i64));
    let text = std::fs::read_to_string(&master_log).unwrap_or_default();
    assert!(
        !text.contains("Disconnecting timedout replica"),
        "the master dropped the replica:\n{text}"
    );
    // One full sync per replica started: none was repeated.
    assert_eq!(
        info_field(&mut m, "stats", "sync_full"),
        Some((attempts + 1).to_string())
    );
}

#[test]
fn replicaof_during_a_load_is_refused_as_redis_refuses_it() {
    let _slot = large_load_slot();
    // REPLICAOF lacks the `loading` flag (and has `no_async_loading`):
    // Redis answers -LOADING until its load is over, and so does hozon.
    // (Before the load, during the transfer, REPLICAOF cancels the sync
    // and a load already reading the arriving file.)
    let master = big_master(1_000_000, &[]);
    let replica = Replica::start(&["--repl-diskless-load", "swapdb", "--appendonly", "yes"]);
    let mut r = replica.conn();
    call(&mut r, &["SET", "old", "kept"]);
    follow(&mut r, master.port);
    wait_for_load(&mut r);
    assert_eq!(
        call(&mut r, &["REPLICAOF", "NO", "ONE"]),
        Value::Error(LOADING.into())
    );
    let mut m = Conn::connect(master.port);
    wait_caught_up(&mut m, &mut r);
    assert_eq!(
        call(&mut r, &["REPLICAOF", "NO", "ONE"]),
        Value::Simple("OK".into())
    );
    assert_eq!(call(&mut r, &["DBSIZE"]), Value::Int(1_000_000));
    assert!(temp_sync_files(replica.dir.path()).is_empty());
}

#[test]
fn a_lost_link_during_a_load_cancels_it_and_keeps_the_old_data() {
    let _slot = large_load_slot();
    let master = big_master(1_000_000, &[]);
    let replica = Replica::start(&["--appendonly", "yes"]);
    let mut r = replica.conn();
    call(&mut r, &["SET", "old", "kept"]);
    follow(&mut r, master.port);
    wait_for_load(&mut r);
    // The payload's file is there while it loads (`disabled`).
    assert!(
        temp_sync_files(replica.dir.path())
            .iter()
            .any(|f| f.ends_with(".rdb")),
        "no payload file during the load"
    );
    drop(master);
    let deadline = Instant::now() + Duration::from_secs(60);
    while !replica
        .log()
        .contains("MASTER <-> REPLICA sync: the load in progress is abandoned")
    {
        assert!(
            Instant::now() < deadline,
            "the load was not abandoned:\n{}",
            replica.log()
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    assert_eq!(
        info_field(&mut r, "persistence", "async_loading").as_deref(),
        Some("0")
    );
    while !temp_sync_files(replica.dir.path()).is_empty() {
        assert!(Instant::now() < deadline, "temporary files left behind");
        std::thread::sleep(Duration::from_millis(20));
    }
    assert_eq!(call(&mut r, &["DBSIZE"]), Value::Int(1));
    assert_eq!(call(&mut r, &["GET", "old"]), Value::Bulk(b"kept".to_vec()));
}
