//! A hozon replica as the target of FAILOVER: a redis-server master (and,
//! the same scenario, a hozon master) fails over to it with `PSYNC …
//! FAILOVER`; hozon takes over as master (the old master's id as its
//! secondary), the old master continues partially as its replica, and a
//! PSYNC FAILOVER with another id, or to a master, is refused with
//! Redis's errors.

use std::time::{Duration, Instant};

use testkit::harness::{start_hozon, start_redis, Conn, ServerProcess};

use crate::{call, hozon_replica, info_field, wait_caught_up, Value};

fn wait(secs: u64, what: &str, mut check: impl FnMut() -> Result<(), String>) {
    let deadline = Instant::now() + Duration::from_secs(secs);
    loop {
        match check() {
            Ok(()) => return,
            Err(state) => assert!(Instant::now() < deadline, "{what}: {state}"),
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn failover_to_hozon(master: ServerProcess) {
    let replica = hozon_replica(&master, &[]);
    let mut m = Conn::connect(master.port);
    let mut r = Conn::connect(replica.port);
    for i in 0..100 {
        call(&mut m, &["SET", &format!("k:{i}"), "v"]);
    }
    wait_caught_up(&mut m, &mut r);
    let port = replica.port.to_string();
    assert_eq!(
        call(&mut m, &["FAILOVER", "TO", "127.0.0.1", &port]),
        Value::Simple("OK".into())
    );
    wait(20, "the old master following hozon", || {
        let role = call(&mut Conn::connect(master.port), &["ROLE"]);
        let link = info_field(
            &mut Conn::connect(master.port),
            "replication",
            "master_link_status",
        );
        match (&role, link.as_deref()) {
            (Value::Array(items), Some("up"))
                if items[0] == Value::Bulk(b"slave".to_vec())
                    && items[2] == Value::Int(i64::from(replica.port)) =>
            {
                Ok(())
            }
            _ => Err(format!("{role:?} {link:?}")),
        }
    });
    assert_eq!(call(&mut r, &["ROLE"]).items()[0].text(), "master");
    assert_eq!(call(&mut r, &["DBSIZE"]), Value::Int(100));
    assert_eq!(
        info_field(&mut r, "stats", "sync_partial_ok").as_deref(),
        Some("1")
    );
    assert_eq!(
        info_field(&mut r, "stats", "sync_full").as_deref(),
        Some("0")
    );
    call(&mut r, &["SET", "after", "failover"]);
    wait(20, "the write on the old master", || {
        match call(&mut Conn::connect(master.port), &["GET", "after"]) {
            Value::Bulk(v) if v == b"failover" => Ok(()),
            other => Err(format!("{other:?}")),
        }
    });
}

#[test]
fn a_redis_master_fails_over_to_a_hozon_replica() {
    failover_to_hozon(start_redis(&["--repl-diskless-sync-delay", "0"]));
}

#[test]
fn a_hozon_master_fails_over_to_a_hozon_replica() {
    failover_to_hozon(start_hozon(&["--repl-diskless-sync-delay", "0"]));
}

#[test]
fn psync_failover_refusals_match_redis() {
    let mut replies = Vec::new();
    for kind in ["redis", "hozon"] {
        let master = start_redis(&["--repl-diskless-sync-delay", "0"]);
        let port = master.port.to_string();
        let replica = match kind {
            "redis" => start_redis(&["--replicaof", "127.0.0.1", &port]),
            _ => start_hozon(&["--replicaof", "127.0.0.1", &port]),
        };
        let mut m = Conn::connect(master.port);
        let mut r = Conn::connect(replica.port);
        wait_caught_up(&mut m, &mut r);
        let got = vec![
            call(&mut r, &["PSYNC", &"f".repeat(40), "1", "FAILOVER"]),
            call(&mut m, &["PSYNC", &"f".repeat(40), "1", "FAILOVER"]),
            call(&mut r, &["ROLE"]).items()[0].clone(),
        ];
        replies.push(got);
    }
    assert_eq!(replies[1], replies[0], "hozon (left), redis (right)");
}
