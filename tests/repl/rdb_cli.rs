//! Scenario 7: `redis-cli --rdb` against the master (`REPLCONF capa eof`,
//! `REPLCONF rdb-only 1`, then an inline `SYNC`): the file passes
//! redis-check-rdb and loads in a fresh redis-server with the master's keys;
//! the master is left without a replica and keeps serving.

use crate::dataset::{assert_same_ports, populate, Counters};
use crate::fake_replica::{aux, check_rdb};
use crate::harness::{
    info, info_int, ok, redis_cli_transfer, start_redis, wait_until, Master, SyncMode, Value,
    PATIENCE,
};

fn redis_cli_rdb(master: Master, mode: SyncMode) {
    let m = master.start(&mode.args());
    let mut c = m.conn();
    populate(&mut c);
    let keys: i64 = (0..16)
        .map(|db| {
            ok(&mut c, &["SELECT", &db.to_string()]);
            ok(&mut c, &["DBSIZE"]).int()
        })
        .sum();
    ok(&mut c, &["SELECT", "0"]);

    let dir = tempfile::tempdir().expect("temp dir");
    let file = dir.path().join("cli.rdb");
    let said = redis_cli_transfer(m.port(), "--rdb", &file);
    let form = if mode == SyncMode::Diskless {
        "until EOF marker"
    } else {
        "bytes to '"
    };
    assert!(said.contains(form), "expected the {mode:?} form: {said}");

    let payload = std::fs::read(&file).expect("the rdb file");
    let checked = check_rdb(&payload);
    assert!(
        checked.contains(&format!("[info] {keys} keys read")),
        "expected {keys} keys:\n{checked}"
    );
    let replid = info(&mut c, "replication")["master_replid"].clone();
    assert_eq!(aux(&checked, "repl-id"), replid);

    let loaded = start_redis(&[
        "--dir",
        &dir.path().to_string_lossy(),
        "--dbfilename",
        "cli.rdb",
    ]);
    assert_same_ports(m.port(), loaded.port, Counters::Exact);

    // The rdb-only client counted as a full sync, never stayed a replica.
    assert_eq!(info_int(&mut c, "stats", "sync_full"), 1);
    wait_until(
        PATIENCE,
        "the rdb-only client to be gone",
        || match info_int(&mut c, "replication", "connected_slaves") {
            0 => Ok(()),
            n => Err(format!("connected_slaves:{n}")),
        },
    );
    assert_eq!(
        ok(&mut c, &["SET", "still", "writable"]),
        Value::Simple("OK".into())
    );
}

#[test]
fn redis_cli_rdb_disk_redis_master() {
    redis_cli_rdb(Master::Redis, SyncMode::Disk);
}

#[test]
fn redis_cli_rdb_disk_hozon_master() {
    redis_cli_rdb(Master::Hozon, SyncMode::Disk);
}

#[test]
fn redis_cli_rdb_diskless_redis_master() {
    redis_cli_rdb(Master::Redis, SyncMode::Diskless);
}

#[test]
fn redis_cli_rdb_diskless_hozon_master() {
    redis_cli_rdb(Master::Hozon, SyncMode::Diskless);
}
