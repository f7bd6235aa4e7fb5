//! A replica whose master's command fails (Redis 7.0's
//! `propagation-error-behavior`): a redis-server replica and a hozon
//! replica of the same master (redis-server, or hozon with DEBUG
//! REPLICATE) log the same CRITICAL line, count it in
//! `unexpected_error_replies`, and go on under `ignore` (a writable
//! replica's data diverges as Redis allows); under `panic-on-replicas` a
//! read-only replica stops.

use crate::harness::{cmd, info_int, ok, wait_synced, wait_until, Master, Node, Value, PATIENCE};

/// The text after "== CRITICAL == " of each CRITICAL line in `node`'s log.
fn critical_lines(node: &Node) -> Vec<String> {
    node.log()
        .lines()
        .filter_map(|l| l.split_once("== CRITICAL == ").map(|(_, t)| t.to_string()))
        .collect()
}

fn hozon_replica_of(master: &Node) -> Node {
    let port = master.port().to_string();
    let mut node = Master::Hozon.start(&["--replicaof", "127.0.0.1", &port]);
    node.name = format!("hozon replica of port {port}");
    node
}

fn failing_master_commands(kind: Master) {
    let master = kind.start(&["--enable-debug-command", "yes"]);
    let redis = crate::harness::start_replica(&master, &[]);
    let hozon = hozon_replica_of(&master);
    wait_synced(&master, &[&redis, &hozon]);
    let mut m = master.conn();
    let replicas = [&redis, &hozon];

    // A command the replicas do not know.
    ok(&mut m, &["DEBUG", "REPLICATE", "fake-command-1"]);
    ok(&mut m, &["SET", "foo", "bar2"]);
    assert_eq!(cmd(&mut m, &["WAIT", "2", "5000"]), Value::Int(2));
    for node in replicas {
        let mut c = node.conn();
        assert_eq!(
            info_int(&mut c, "stats", "unexpected_error_replies"),
            1,
            "{}",
            node.name
        );
        assert_eq!(cmd(&mut c, &["GET", "foo"]), Value::Bulk(b"bar2".to_vec()));
    }
    assert_eq!(critical_lines(&hozon), critical_lines(&redis));
    assert_eq!(critical_lines(&hozon).len(), 1);
    assert!(critical_lines(&hozon)[0].contains("fake-command-1"));

    // A writable replica's own write makes the master's INCRBY fail there.
    for node in replicas {
        let mut c = node.conn();
        ok(&mut c, &["CONFIG", "SET", "replica-read-only", "no"]);
        ok(&mut c, &["SET", "number2", "foo"]);
    }
    assert_eq!(cmd(&mut m, &["INCRBY", "number2", "1"]), Value::Int(1));
    assert_eq!(cmd(&mut m, &["WAIT", "2", "5000"]), Value::Int(2));
    for node in replicas {
        let mut c = node.conn();
        assert_eq!(
            cmd(&mut c, &["GET", "number2"]),
            Value::Bulk(b"foo".to_vec())
        );
        assert_eq!(
            info_int(&mut c, "stats", "unexpected_error_replies"),
            2,
            "{}",
            node.name
        );
    }
    assert_eq!(critical_lines(&hozon), critical_lines(&redis));
    assert!(critical_lines(&hozon)[1].ends_with("after processing the command 'incrby'"));

    // Read-only again, and told to stop on such an error: both do.
    let mut stopping = [redis, hozon];
    for node in &stopping {
        let mut c = node.conn();
        ok(&mut c, &["CONFIG", "SET", "replica-read-only", "yes"]);
        ok(
            &mut c,
            &[
                "CONFIG",
                "SET",
                "propagation-error-behavior",
                "panic-on-replicas",
            ],
        );
        assert_eq!(
            cmd(&mut c, &["CONFIG", "GET", "propagation-error-behavior"]),
            Value::Array(vec![
                Value::Bulk(b"propagation-error-behavior".to_vec()),
                Value::Bulk(b"panic-on-replicas".to_vec()),
            ])
        );
    }
    ok(&mut m, &["DEBUG", "REPLICATE", "fake-command-2"]);
    for node in &mut stopping {
        let name = node.name.clone();
        wait_until(PATIENCE, "the replica to stop", || {
            if node.process.has_exited() {
                Ok(())
            } else {
                Err(format!("{name} still runs"))
            }
        });
        let log = node.log();
        assert!(
            log.contains(
                "This replica panicked sending an error to its master after processing the command '<unknown>'"
            ),
            "{name}: no panic line"
        );
    }
}

#[test]
fn failing_master_commands_redis_master() {
    failing_master_commands(Master::Redis);
}

#[test]
fn failing_master_commands_hozon_master() {
    failing_master_commands(Master::Hozon);
}
