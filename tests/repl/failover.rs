//! FAILOVER (Redis 6.2's coordinated failover, as 7.0 has it) with two
//! redis-server replicas, against a redis-server master (which checks the
//! scenario) and a hozon-server master: argument errors and refusals
//! compared reply for reply; FAILOVER TO a replica under writes (the
//! master pauses writes, waits for the replica, becomes its replica with
//! `PSYNC … FAILOVER`), every write acknowledged before it on the new
//! master; FAILOVER ABORT and a TIMEOUT that expires without FORCE.

use crate::harness::*;

/// The replies of the refusals and argument errors, in order.
fn refusals(master: Master) -> Vec<Value> {
    let m = master.start(&["--repl-diskless-sync-delay", "0"]);
    let mut c = m.conn();
    let mut replies = Vec::new();
    // No replicas yet.
    for words in [
        &["FAILOVER"][..],
        &["FAILOVER", "ABORT"],
        &["FAILOVER", "TIMEOUT", "0"],
        &["FAILOVER", "TIMEOUT", "x"],
        &["FAILOVER", "TO", "127.0.0.1"],
        &["FAILOVER", "FORCE"],
        &["FAILOVER", "FORCE", "FORCE"],
        &["FAILOVER", "TIMEOUT", "10", "TIMEOUT", "10"],
        &["FAILOVER", "bogus"],
    ] {
        replies.push(cmd(&mut c, words));
    }
    let r = start_replica(&m, &[]);
    wait_synced(&m, &[&r]);
    let port = r.port().to_string();
    for words in [
        &["FAILOVER", "FORCE", "TIMEOUT", "100"][..],
        &["FAILOVER", "TO", "127.0.0.1", &port, "FORCE"],
        &["FAILOVER", "TO", "127.0.0.1", "1"],
        &["FAILOVER", "TO", "10.9.9.9", &port],
        &["FAILOVER", "TO", "127.0.0.1", "x"],
    ] {
        replies.push(cmd(&mut c, words));
    }
    // On the replica.
    replies.push(cmd(&mut r.conn(), &["FAILOVER"]));
    // A failover that waits for a replica held back (SIGSTOP) never
    // completes: ABORT ends it, and a TIMEOUT without FORCE too.
    testkit::harness::signal(r.process.pid(), "-STOP");
    ok(&mut c, &["SET", "k", "v"]);
    replies.push(cmd(&mut c, &["FAILOVER", "TO", "127.0.0.1", &port]));
    replies.push(cmd(&mut c, &["FAILOVER"]));
    replies.push(cmd(&mut c, &["REPLICAOF", "NO", "ONE"]));
    replies.push(Value::Bulk(
        info_field(&mut c, "replication", "master_failover_state")
            .unwrap_or_default()
            .into_bytes(),
    ));
    replies.push(cmd(&mut c, &["FAILOVER", "ABORT"]));
    replies.push(Value::Bulk(
        info_field(&mut c, "replication", "master_failover_state")
            .unwrap_or_default()
            .into_bytes(),
    ));
    replies.push(cmd(&mut c, &["FAILOVER", "TIMEOUT", "300"]));
    wait_until(
        PATIENCE,
        "the timeout to end the failover",
        || match info_field(&mut c, "replication", "master_failover_state").as_deref() {
            Some("no-failover") => Ok(()),
            other => Err(format!("{other:?}")),
        },
    );
    // Writes go on once it is over.
    replies.push(cmd(&mut c, &["SET", "k", "w"]));
    testkit::harness::signal(r.process.pid(), "-CONT");
    replies
}

#[test]
fn failover_refusals_and_aborts_match_redis() {
    let redis = refusals(Master::Redis);
    let hozon = refusals(Master::Hozon);
    assert_eq!(hozon, redis);
}

/// FAILOVER TO the first of two replicas while a client writes: the
/// master ends as a replica of it, every acknowledged write is on it.
fn failover_to_replica(master: Master) {
    let m = master.start(&["--repl-diskless-sync-delay", "0"]);
    let r1 = start_replica(&m, &[]);
    let r2 = start_replica(&m, &[]);
    wait_synced(&m, &[&r1, &r2]);
    let mut c = m.conn();
    let mut acked = Vec::new();
    for i in 0..200 {
        ok(&mut c, &["SET", &format!("k:{i}"), "v"]);
        acked.push(format!("k:{i}"));
    }
    let port = r1.port().to_string();
    assert_eq!(
        cmd(
            &mut c,
            &["FAILOVER", "TO", "127.0.0.1", &port, "TIMEOUT", "10000"]
        ),
        Value::Simple("OK".into())
    );
    wait_until(PATIENCE, "the old master to follow the new one", || {
        let role = cmd(&mut m.conn(), &["ROLE"]);
        let state = info_field(&mut m.conn(), "replication", "master_failover_state");
        let link = info_field(&mut m.conn(), "replication", "master_link_status");
        match (&role, state.as_deref(), link.as_deref()) {
            (Value::Array(items), Some("no-failover"), Some("up"))
                if items.first() == Some(&Value::Bulk(b"slave".to_vec()))
                    && items.get(2) == Some(&Value::Int(i64::from(r1.port()))) =>
            {
                Ok(())
            }
            _ => Err(format!("role {role:?}, state {state:?}, link {link:?}")),
        }
    });
    let mut n = r1.conn();
    assert_eq!(cmd(&mut n, &["ROLE"]).items()[0].text(), "master");
    for key in &acked {
        assert_eq!(cmd(&mut n, &["EXISTS", key]), Value::Int(1), "{key}");
    }
    // The new master took the old one with a partial resync.
    assert_eq!(info_int(&mut n, "stats", "sync_partial_ok"), 1);
    assert_eq!(info_int(&mut n, "stats", "sync_full"), 0);
    // The new master takes writes; the old one replicates them.
    ok(&mut n, &["SET", "after", "failover"]);
    wait_until(PATIENCE, "the write on the old master", || {
        match cmd(&mut m.conn(), &["GET", "after"]) {
            Value::Bulk(v) if v == b"failover" => Ok(()),
            other => Err(format!("{other:?}")),
        }
    });
    drop(r2);
}

#[test]
fn failover_to_a_replica_from_a_redis_master() {
    failover_to_replica(Master::Redis);
}

#[test]
fn failover_to_a_replica_from_a_hozon_master() {
    failover_to_replica(Master::Hozon);
}
