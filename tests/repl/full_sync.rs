//! Full synchronisation of an existing dataset (disk and diskless forms),
//! two replicas at once, a replica killed and restarted, and a dropped link
//! continued from the backlog.

use crate::dataset::{assert_same, populate};
use crate::harness::{
    info_int, ok, script, start_replica, start_replica_on, wait_synced, wait_until, Master,
    SyncMode, PATIENCE,
};

/// The line a redis-server replica logs for each payload form.
fn assert_payload_form(replica_log: &str, mode: SyncMode) {
    let streamed = replica_log.contains("receiving streamed RDB from master with EOF");
    let sized = replica_log.contains("bytes from master to disk");
    let ok = match mode {
        SyncMode::Disk => sized && !streamed,
        SyncMode::Diskless => streamed && !sized,
    };
    assert!(
        ok,
        "the replica did not receive a {mode:?} payload (streamed: {streamed}, sized: {sized})"
    );
}

/// Scenario 1: a replica attaches to a master holding every type, TTLs and
/// several databases; it ends with the same keys and offset, and the
/// master counts one full sync.
fn full_sync_of_existing_dataset(master: Master, mode: SyncMode) {
    let m = master.start(&mode.args());
    let mut c = m.conn();
    populate(&mut c);
    assert_eq!(info_int(&mut c, "stats", "sync_full"), 0);
    let r = start_replica(&m, &[]);
    wait_synced(&m, &[&r]);
    let keys = assert_same(&m, &r);
    assert!(keys > 2000, "only {keys} keys compared");
    assert_payload_form(&r.log(), mode);
    assert_eq!(info_int(&mut c, "stats", "sync_full"), 1);
    assert_eq!(info_int(&mut c, "stats", "sync_partial_ok"), 0);
    assert_eq!(info_int(&mut c, "stats", "sync_partial_err"), 0);
    // CONFIG RESETSTAT resets the sync counters too (Redis's
    // resetServerStats).
    assert_eq!(c.call(&[b"CONFIG", b"RESETSTAT"]), b"+OK\r\n");
    assert_eq!(info_int(&mut c, "stats", "sync_full"), 0);
    assert_eq!(info_int(&mut c, "stats", "total_net_repl_output_bytes"), 0);
}

#[test]
fn full_sync_disk_redis_master() {
    full_sync_of_existing_dataset(Master::Redis, SyncMode::Disk);
}

#[test]
fn full_sync_disk_hozon_master() {
    full_sync_of_existing_dataset(Master::Hozon, SyncMode::Disk);
}

#[test]
fn full_sync_diskless_redis_master() {
    full_sync_of_existing_dataset(Master::Redis, SyncMode::Diskless);
}

#[test]
fn full_sync_diskless_hozon_master() {
    full_sync_of_existing_dataset(Master::Hozon, SyncMode::Diskless);
}

/// Scenario 5: two replicas attached at once both get the dataset and the
/// writes after it. Diskless, the master waits for both
/// (`repl-diskless-sync-max-replicas 2`, a long delay) and serves them from
/// one capture.
fn two_replicas_at_once(master: Master, mode: SyncMode) {
    let args = match mode {
        SyncMode::Disk => mode.args(),
        SyncMode::Diskless => vec![
            "--repl-diskless-sync",
            "yes",
            "--repl-diskless-sync-delay",
            "15",
            "--repl-diskless-sync-max-replicas",
            "2",
        ],
    };
    let m = master.start(&args);
    let mut c = m.conn();
    populate(&mut c);
    let r1 = start_replica(&m, &[]);
    let r2 = start_replica(&m, &[]);
    wait_synced(&m, &[&r1, &r2]);
    assert_same(&m, &r1);
    assert_same(&m, &r2);
    assert_payload_form(&r1.log(), mode);
    assert_payload_form(&r2.log(), mode);
    assert_eq!(info_int(&mut c, "stats", "sync_full"), 2);
    assert_eq!(info_int(&mut c, "replication", "connected_slaves"), 2);
    if mode == SyncMode::Diskless {
        let captures = m.log().matches("Starting BGSAVE for SYNC").count();
        assert_eq!(captures, 1, "both replicas should share one capture");
    }
    script(
        &mut c,
        "SET after 1\nDEL key:7\nRPUSH biglist tail\nSELECT 5\nSET x y",
    );
    wait_synced(&m, &[&r1, &r2]);
    assert_same(&m, &r1);
    assert_same(&m, &r2);
}

#[test]
fn two_replicas_disk_redis_master() {
    two_replicas_at_once(Master::Redis, SyncMode::Disk);
}

#[test]
fn two_replicas_disk_hozon_master() {
    two_replicas_at_once(Master::Hozon, SyncMode::Disk);
}

#[test]
fn two_replicas_diskless_redis_master() {
    two_replicas_at_once(Master::Redis, SyncMode::Diskless);
}

#[test]
fn two_replicas_diskless_hozon_master() {
    two_replicas_at_once(Master::Hozon, SyncMode::Diskless);
}

/// Scenario 6: a replica without persistence, SIGKILLed and restarted on
/// its port, has no cached master: it syncs fully again and gets the writes
/// made while it was down.
fn replica_killed_and_restarted(master: Master) {
    let m = master.start(&SyncMode::Diskless.args());
    let mut c = m.conn();
    populate(&mut c);
    let r = start_replica(&m, &[]);
    wait_synced(&m, &[&r]);
    assert_eq!(info_int(&mut c, "stats", "sync_full"), 1);
    let port = r.port();
    drop(r); // SIGKILL
    wait_until(
        PATIENCE,
        "the master to drop the dead replica",
        || match info_int(&mut c, "replication", "connected_slaves") {
            0 => Ok(()),
            n => Err(format!("connected_slaves:{n}")),
        },
    );
    script(
        &mut c,
        "SET while_down 1\nDEL key:1\nLPUSH l down\nSELECT 1\nSET db1 changed",
    );
    let r = start_replica_on(&m, port, &[]);
    wait_synced(&m, &[&r]);
    assert_same(&m, &r);
    assert_eq!(info_int(&mut c, "stats", "sync_full"), 2);
    assert_eq!(info_int(&mut c, "stats", "sync_partial_ok"), 0);
    assert_eq!(info_int(&mut c, "replication", "connected_slaves"), 1);
}

#[test]
fn replica_restart_redis_master() {
    replica_killed_and_restarted(Master::Redis);
}

#[test]
fn replica_restart_hozon_master() {
    replica_killed_and_restarted(Master::Hozon);
}

/// A replica whose link is cut (`CLIENT KILL TYPE master` on the replica)
/// keeps its cached master and continues from the backlog: `+CONTINUE`,
/// `sync_partial_ok` +1, no second full sync, and the writes made while
/// the link was down arrive.
fn link_dropped_continues(master: Master) {
    let m = master.start(&SyncMode::Diskless.args());
    let mut c = m.conn();
    populate(&mut c);
    let r = start_replica(&m, &[]);
    wait_synced(&m, &[&r]);
    let mut rc = r.conn();
    ok(&mut rc, &["CLIENT", "KILL", "TYPE", "master"]);
    script(&mut c, "SET during_gap 1\nINCR n\nSELECT 2\nSET other_db 1");
    wait_until(PATIENCE, "a partial resync", || {
        match info_int(&mut c, "stats", "sync_partial_ok") {
            1 => Ok(()),
            n => Err(format!("sync_partial_ok:{n}")),
        }
    });
    wait_synced(&m, &[&r]);
    assert_same(&m, &r);
    assert_eq!(info_int(&mut c, "stats", "sync_full"), 1);
    assert_eq!(info_int(&mut c, "stats", "sync_partial_err"), 0);
    assert!(
        r.log()
            .contains("Successful partial resynchronization with master"),
        "the replica did not log a partial resync"
    );
}

#[test]
fn link_dropped_redis_master() {
    link_dropped_continues(Master::Redis);
}

#[test]
fn link_dropped_hozon_master() {
    link_dropped_continues(Master::Hozon);
}
