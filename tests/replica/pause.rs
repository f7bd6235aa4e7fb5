//! CLIENT PAUSE on a replica holds the master's stream, as on a Redis
//! replica (Redis pauses its master client too; tests/unit/pause.tcl):
//! the bytes are read (`slave_read_repl_offset` moves) but not applied
//! (`slave_repl_offset` stops before the first write) until CLIENT
//! UNPAUSE. Checked with a
//! redis-server replica and a hozon replica of the same redis-server
//! master, side by side.

use std::time::{Duration, Instant};

use testkit::harness::{start_redis, Conn};

use crate::{call, hozon_replica, info_field, wait_caught_up, Value};

fn offset(conn: &mut Conn, field: &str) -> i64 {
    info_field(conn, "replication", field)
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| panic!("no {field}"))
}

#[test]
fn a_paused_replica_reads_the_stream_but_applies_it_only_after_unpause() {
    let master = start_redis(&["--repl-ping-replica-period", "3600"]);
    let mut m = Conn::connect(master.port);
    let port = master.port.to_string();
    let redis_replica = start_redis(&["--replicaof", "127.0.0.1", &port]);
    let hozon = hozon_replica(&master, &[]);
    let mut replicas = [
        ("redis", Conn::connect(redis_replica.port)),
        ("hozon", Conn::connect(hozon.port)),
    ];
    call(&mut m, &["SET", "foo", "bar"]);
    for (_, r) in &mut replicas {
        wait_caught_up(&mut m, r);
    }
    let before = offset(&mut m, "master_repl_offset");
    for (_, r) in &mut replicas {
        assert_eq!(
            call(r, &["CLIENT", "PAUSE", "100000", "WRITE"]),
            Value::Simple("OK".into())
        );
    }
    call(&mut m, &["SET", "foo2", "bar2"]);
    let after = offset(&mut m, "master_repl_offset");
    let mut applied = Vec::new();
    for (name, r) in &mut replicas {
        let deadline = Instant::now() + Duration::from_secs(10);
        while offset(r, "slave_read_repl_offset") != after {
            assert!(Instant::now() < deadline, "{name}: the stream never came");
            std::thread::sleep(Duration::from_millis(20));
        }
        std::thread::sleep(Duration::from_millis(100));
        // What precedes the first write (a SELECT) is applied; the SET is
        // not.
        let at = offset(r, "slave_repl_offset");
        assert!(
            (before..after).contains(&at),
            "{name}: applied to {at} while paused (from {before}, read {after})"
        );
        applied.push(at);
        assert_eq!(call(r, &["GET", "foo2"]), Value::Nil, "{name}");
    }
    assert_eq!(applied[0], applied[1], "applied offsets (redis, hozon)");
    for (name, r) in &mut replicas {
        call(r, &["CLIENT", "UNPAUSE"]);
        wait_caught_up(&mut m, r);
        assert_eq!(
            call(r, &["GET", "foo2"]),
            Value::Bulk(b"bar2".to_vec()),
            "{name}"
        );
    }
}
