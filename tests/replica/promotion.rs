//! Promotion (docs/replication.md §5.6): a hozon replica promoted with
//! `REPLICAOF NO ONE` keeps its old master's id as its secondary id, so
//! the old master's other replicas continue with it (`+CONTINUE`).

use std::time::{Duration, Instant};

use testkit::harness::{start_redis, Conn};

use crate::{call, dataset, fill, hozon_replica, info_field, wait_caught_up, write_more, Value};

#[test]
fn the_old_masters_other_replica_continues_with_the_promoted_hozon_replica() {
    let master = start_redis(&["--repl-diskless-sync", "no"]);
    let mut m = Conn::connect(master.port);
    fill(&mut m);
    let promoted = hozon_replica(&master, &[]);
    let mut h = Conn::connect(promoted.port);
    let other = start_redis(&["--replicaof", "127.0.0.1", &master.port.to_string()]);
    let mut r = Conn::connect(other.port);
    wait_caught_up(&mut m, &mut h);
    wait_caught_up(&mut m, &mut r);
    let replid = info_field(&mut m, "replication", "master_replid").expect("master_replid");
    drop(m);
    drop(master); // the master dies
    assert_eq!(
        call(&mut h, &["REPLICAOF", "NO", "ONE"]),
        Value::Simple("OK".into())
    );
    assert_eq!(
        info_field(&mut h, "replication", "master_replid2").as_deref(),
        Some(replid.as_str())
    );
    let port = promoted.port.to_string();
    assert_eq!(
        call(&mut r, &["REPLICAOF", "127.0.0.1", &port]),
        Value::Simple("OK".into())
    );
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let partial = info_field(&mut h, "stats", "sync_partial_ok");
        let full = info_field(&mut h, "stats", "sync_full");
        assert_eq!(
            full.as_deref(),
            Some("0"),
            "the other replica synced in full"
        );
        if partial.as_deref() == Some("1") {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the other replica never continued"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    // Writes on the promoted replica reach the other one.
    write_more(&mut h);
    wait_caught_up(&mut h, &mut r);
    assert_eq!(dataset(&mut r), dataset(&mut h));
}
