//! Which sync a returning replica gets (docs/replication.md §4.4): a link
//! cut on the master's side continues from the backlog; a replica that
//! was away while more than the backlog was written syncs in full.

use crate::dataset::{assert_same, populate};
use crate::harness::{
    info_int, ok, script, start_replica, wait_synced, wait_until, Master, SyncMode, PATIENCE,
};
use testkit::harness::signal;

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

/// A master stopped (SIGTERM) while its replica lags waits for it
/// (`shutdown-timeout`), so after a restart from its AOF the replica
/// continues with `+CONTINUE` instead of a full sync.
#[test]
fn a_shutdown_waits_for_a_lagging_replica_so_it_continues_after_the_restart() {
    use testkit::harness::{hozon_server_path, start_on_port, start_redis};
    let dir = tempfile::tempdir().expect("data dir");
    let dir_arg = dir.path().to_string_lossy().into_owned();
    let args = ["--appendonly", "yes", "--dir", &dir_arg];
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let master =
        start_on_port(hozon_server_path(), "hozon-server", port, &args).expect("start the master");
    let replica = start_redis(&["--replicaof", "127.0.0.1", &port.to_string()]);
    let mut c = testkit::harness::Conn::connect(port);
    let mut rc = testkit::harness::Conn::connect(replica.port);
    let synced = |rc: &mut testkit::harness::Conn, c: &mut testkit::harness::Conn| {
        let r = String::from_utf8_lossy(&rc.call(&[b"INFO", b"replication"])).into_owned();
        let m = String::from_utf8_lossy(&c.call(&[b"INFO", b"replication"])).into_owned();
        let field = |text: &str, name: &str| {
            text.lines()
                .find_map(|l| l.strip_prefix(name).map(|v| v.trim().to_string()))
        };
        r.contains("master_link_status:up")
            && field(&r, "slave_repl_offset:") == field(&m, "master_repl_offset:")
    };
    wait_until(PATIENCE, "the replica synced", || {
        if synced(&mut rc, &mut c) {
            Ok(())
        } else {
            Err("not yet".to_string())
        }
    });
    signal(replica.pid(), "-STOP");
    // More than the sockets' buffers hold: the stream stays in the
    // master's memory until the replica reads it.
    let big = vec![b'x'; 32 << 20];
    assert_eq!(c.call(&[b"SET", b"big", &big]), b"+OK\r\n");
    for i in 0..50 {
        let key = format!("late:{i}");
        assert_eq!(c.call(&[b"SET", key.as_bytes(), b"v"]), b"+OK\r\n");
    }
    signal(master.pid(), "-TERM");
    std::thread::sleep(std::time::Duration::from_millis(500));
    signal(replica.pid(), "-CONT");
    // The master exits once the replica acknowledged everything.
    wait_until(
        PATIENCE,
        "the master exited",
        || match std::net::TcpStream::connect(("127.0.0.1", port)) {
            Err(_) => Ok(()),
            Ok(_) => Err("still listening".to_string()),
        },
    );
    drop(master);
    let master = start_on_port(hozon_server_path(), "hozon-server", port, &args)
        .expect("restart the master");
    let mut c = testkit::harness::Conn::connect(master.port);
    wait_until(PATIENCE, "the replica reconnected", || {
        let stats = String::from_utf8_lossy(&c.call(&[b"INFO", b"stats"])).into_owned();
        if stats.contains("sync_partial_ok:1\r\n") {
            Ok(())
        } else if stats.contains("sync_full:1\r\n") {
            panic!("the replica synced in full after the restart: {stats}");
        } else {
            Err("no sync yet".to_string())
        }
    });
    assert_eq!(rc.call(&[b"EXISTS", b"late:49"]), b":1\r\n");
}
