//! A hozon replica with `appendonly yes` records the position of what it
//! applied in its AOF: killed (SIGKILL) and restarted, it continues with a
//! partial resync from there (D7), and its data equals the master's.

use testkit::harness::{start_hozon, start_redis, Conn};

use crate::{assert_syncs, call, dataset, fill, wait_caught_up, write_more};

#[test]
fn a_killed_replica_continues_from_the_position_in_its_aof() {
    let master = start_redis(&["--repl-diskless-sync", "no"]);
    let mut m = Conn::connect(master.port);
    fill(&mut m);
    let dir = tempfile::tempdir().expect("temp dir");
    let dir_arg = dir.path().to_string_lossy().into_owned();
    let port = master.port.to_string();
    let args = [
        "--appendonly",
        "yes",
        "--dir",
        &dir_arg,
        "--replicaof",
        "127.0.0.1",
        &port,
    ];
    let replica = start_hozon(&args);
    let mut h = Conn::connect(replica.port);
    wait_caught_up(&mut m, &mut h);
    call(&mut m, &["SET", "streamed", "1"]);
    wait_caught_up(&mut m, &mut h);
    drop(h);
    drop(replica); // SIGKILL
    write_more(&mut m);
    let replica = start_hozon(&args);
    let mut h = Conn::connect(replica.port);
    wait_caught_up(&mut m, &mut h);
    assert_eq!(dataset(&mut h), dataset(&mut m));
    assert_syncs(&mut m, 1, 1);
}

#[test]
fn waitaof_counts_a_hozon_replica_once_its_aof_is_fsynced() {
    use crate::Value;
    for (fsync, counted) in [("always", 1), ("everysec", 1)] {
        let master = start_hozon(&["--repl-diskless-sync", "no"]);
        let mut m = Conn::connect(master.port);
        let port = master.port.to_string();
        let replica = start_hozon(&[
            "--appendonly",
            "yes",
            "--appendfsync",
            fsync,
            "--replicaof",
            "127.0.0.1",
            &port,
        ]);
        let mut h = Conn::connect(replica.port);
        call(&mut m, &["SET", "k", "v"]);
        wait_caught_up(&mut m, &mut h);
        call(&mut m, &["SET", "k", "w"]);
        assert_eq!(
            call(&mut m, &["WAITAOF", "0", "1", "5000"]),
            Value::Array(vec![Value::Int(0), Value::Int(counted)]),
            "appendfsync {fsync}"
        );
    }
    // Without an AOF the replica reports nothing durable.
    let master = start_hozon(&["--repl-diskless-sync", "no"]);
    let mut m = Conn::connect(master.port);
    let port = master.port.to_string();
    let replica = start_hozon(&["--replicaof", "127.0.0.1", &port]);
    let mut h = Conn::connect(replica.port);
    call(&mut m, &["SET", "k", "v"]);
    wait_caught_up(&mut m, &mut h);
    // A write after the sync (one before it has nothing to wait for).
    call(&mut m, &["SET", "k", "w"]);
    assert_eq!(
        call(&mut m, &["WAITAOF", "0", "1", "300"]),
        Value::Array(vec![Value::Int(0), Value::Int(0)])
    );
    assert_eq!(call(&mut m, &["WAIT", "1", "5000"]), Value::Int(1));
}
