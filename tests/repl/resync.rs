//! Which sync a returning replica gets (docs/replication.md §4.4): a link
//! cut on the master's side continues from the backlog; a replica that
//! was away while more than the backlog was written syncs in full.

use crate::dataset::{assert_same, populate};
use crate::harness::{
    info_int, ok, script, start_replica, wait_synced, wait_until, Master, SyncMode, PATIENCE,
};

fn signal(pid: u32, sig: &str) {
    let status = std::process::Command::new("kill")
        .args([sig, &pid.to_string()])
        .status()
        .expect("run kill");
    assert!(status.success(), "kill {sig} {pid}");
}

/// `CLIENT KILL TYPE replica` on the master: the replica reconnects and
/// continues (`sync_partial_ok` +1, still one full sync).
fn killed_on_the_master_continues(master: Master) {
    let m = master.start(&SyncMode::Disk.args());
    let mut c = m.conn();
    populate(&mut c);
    let r = start_replica(&m, &[]);
    wait_synced(&m, &[&r]);
    assert_eq!(
        crate::harness::cmd(&mut c, &["CLIENT", "KILL", "TYPE", "replica"]),
        crate::value::Value::Int(1)
    );
    script(&mut c, "SET during_gap 1\nINCR n");
    wait_until(PATIENCE, "a partial resync", || {
        match info_int(&mut c, "stats", "sync_partial_ok") {
            1 => Ok(()),
            n => Err(format!("sync_partial_ok:{n}")),
        }
    });
    wait_synced(&m, &[&r]);
    assert_same(&m, &r);
    assert_eq!(info_int(&mut c, "stats", "sync_full"), 1);
}

/// The replica is stopped while its link is cut and more than the backlog
/// (16 KiB, the smallest) is written: its PSYNC offset is no longer in the
/// backlog, so it gets a second full sync and ends with the same data.
fn backlog_overrun_syncs_in_full(master: Master) {
    let mut args = SyncMode::Disk.args();
    args.extend(["--repl-backlog-size", "16384"]);
    let m = master.start(&args);
    let mut c = m.conn();
    populate(&mut c);
    let r = start_replica(&m, &[]);
    wait_synced(&m, &[&r]);
    signal(r.process.pid(), "-STOP");
    assert_eq!(
        crate::harness::cmd(&mut c, &["CLIENT", "KILL", "TYPE", "replica"]),
        crate::value::Value::Int(1)
    );
    let value = "x".repeat(1000);
    for i in 0..100 {
        ok(&mut c, &["SET", &format!("overrun:{i}"), &value]);
    }
    signal(r.process.pid(), "-CONT");
    wait_until(PATIENCE, "a second full sync", || {
        match info_int(&mut c, "stats", "sync_full") {
            2 => Ok(()),
            n => Err(format!("sync_full:{n}")),
        }
    });
    wait_synced(&m, &[&r]);
    assert_same(&m, &r);
    assert_eq!(info_int(&mut c, "stats", "sync_partial_ok"), 0);
    assert!(
        m.log().contains("for lack of backlog"),
        "the master did not log why it refused the partial resync"
    );
}

#[test]
fn killed_on_the_master_redis_master() {
    killed_on_the_master_continues(Master::Redis);
}

#[test]
fn killed_on_the_master_hozon_master() {
    killed_on_the_master_continues(Master::Hozon);
}

#[test]
fn backlog_overrun_redis_master() {
    backlog_overrun_syncs_in_full(Master::Redis);
}

#[test]
fn backlog_overrun_hozon_master() {
    backlog_overrun_syncs_in_full(Master::Hozon);
}
