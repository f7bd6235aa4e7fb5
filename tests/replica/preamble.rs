//! A replica's new AOF after a full sync with `appendonly yes` is the
//! payload itself as an RDB preamble (docs/replication.md §5.3, §5.7):
//! after a sync from a redis-server 7.0 master (disk and diskless
//! transfers, each `repl-diskless-load` path) `appendonly.aof` starts with
//! `REDIS`, the data equals the master's; killed (SIGKILL) after more
//! writes and restarted from that AOF, the replica has the master's data
//! and continues with a partial resync. The same from a hozon master.

use std::path::Path;

use testkit::harness::{start_hozon, start_redis, Conn};

use crate::{call, dataset, fill, info_field, wait_caught_up, write_more, Value};

/// The master's INFO stats counter `field` as a number.
fn stat(master: &mut Conn, field: &str) -> u64 {
    info_field(master, "stats", field)
        .unwrap_or_else(|| panic!("no {field} in INFO stats"))
        .parse()
        .expect("a number")
}

/// The first bytes of the AOF in `dir`.
fn aof_start(dir: &Path) -> Vec<u8> {
    let data = std::fs::read(dir.join("appendonly.aof")).expect("the replica's appendonly.aof");
    data[..data.len().min(9)].to_vec()
}

/// One sync from a redis-server master (`master_diskless`) to a hozon
/// replica in `mode`, holding a key of its own before the sync when
/// `old_key` (`on-empty-db` then takes the file path); `target` is the
/// receiving line's path (`to disk` or `to parser`).
fn sync_kill_restart(master_diskless: &str, mode: &str, old_key: bool, target: &str) {
    sync_kill_restart_from(false, master_diskless, mode, old_key, target);
}

/// [`sync_kill_restart`] from a redis-server master, or a hozon-server
/// one when `hozon_master`.
fn sync_kill_restart_from(
    hozon_master: bool,
    master_diskless: &str,
    mode: &str,
    old_key: bool,
    target: &str,
) {
    let what = format!(
        "hozon master {hozon_master}, mode {mode}, old key {old_key}, master diskless {master_diskless}"
    );
    let master_args = [
        "--repl-diskless-sync",
        master_diskless,
        "--repl-diskless-sync-delay",
        "0",
    ];
    let master = if hozon_master {
        start_hozon(&master_args)
    } else {
        start_redis(&master_args)
    };
    let mut m = Conn::connect(master.port);
    fill(&mut m);
    let dir = tempfile::tempdir().expect("temp dir");
    let dir_arg = dir.path().to_string_lossy().into_owned();
    let log = dir.path().join("replica.log");
    let log_arg = log.to_string_lossy().into_owned();
    let base = [
        "--dir",
        &dir_arg,
        "--logfile",
        &log_arg,
        "--appendonly",
        "yes",
        "--repl-diskless-load",
        mode,
    ];
    let replica = start_hozon(&base);
    let mut r = Conn::connect(replica.port);
    if old_key {
        call(&mut r, &["SET", "mine", "1"]);
    }
    let port = master.port.to_string();
    assert_eq!(
        call(&mut r, &["REPLICAOF", "127.0.0.1", &port]),
        Value::Simple("OK".into())
    );
    wait_caught_up(&mut m, &mut r);
    assert_eq!(dataset(&mut r), dataset(&mut m), "{what}: after the sync");
    let text = std::fs::read_to_string(&log).expect("the replica's log");
    assert!(
        text.lines()
            .any(|l| l.contains("MASTER <-> REPLICA sync: receiving") && l.contains(target)),
        "{what}: no receiving line {target:?} in:\n{text}"
    );
    assert!(
        !text.contains("could not become the new append only file's preamble"),
        "{what}: the preamble path failed:\n{text}"
    );
    assert_eq!(
        aof_start(dir.path()),
        b"REDIS0010",
        "{what}: the AOF is not the payload (an RDB 10 image)"
    );
    write_more(&mut m);
    wait_caught_up(&mut m, &mut r);
    assert_eq!(dataset(&mut r), dataset(&mut m), "{what}: after the stream");
    let full = stat(&mut m, "sync_full");
    let partial = stat(&mut m, "sync_partial_ok");
    drop(r);
    drop(replica); // SIGKILL
    call(&mut m, &["SET", "while-down", "1"]);
    call(&mut m, &["HSET", "h", "f9", "v9"]);
    let restart = [&base[..], &["--replicaof", "127.0.0.1", &port]].concat();
    let replica = start_hozon(&restart);
    let mut r = Conn::connect(replica.port);
    wait_caught_up(&mut m, &mut r);
    assert_eq!(
        dataset(&mut r),
        dataset(&mut m),
        "{what}: after the restart"
    );
    assert_eq!(stat(&mut m, "sync_full"), full, "{what}: a new full sync");
    assert_eq!(
        stat(&mut m, "sync_partial_ok"),
        partial + 1,
        "{what}: no partial resync after the restart"
    );
    assert_eq!(
        aof_start(dir.path()),
        b"REDIS0010",
        "{what}: after the restart"
    );
}

#[test]
fn the_new_aof_is_the_payload_and_a_killed_replica_continues_from_it() {
    for master_diskless in ["no", "yes"] {
        sync_kill_restart(master_diskless, "disabled", false, "to disk");
        sync_kill_restart(master_diskless, "on-empty-db", true, "to disk");
        sync_kill_restart(master_diskless, "on-empty-db", false, "to parser");
        sync_kill_restart(master_diskless, "swapdb", true, "to parser");
    }
}

#[test]
fn a_hozon_masters_payload_becomes_the_aof_too() {
    for master_diskless in ["no", "yes"] {
        sync_kill_restart_from(true, master_diskless, "disabled", false, "to disk");
        sync_kill_restart_from(true, master_diskless, "swapdb", true, "to parser");
    }
}
