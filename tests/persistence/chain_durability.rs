//! D3 along a chain (docs/replication.md §5.6): a hozon replica forwards
//! its master's stream to its own replicas only after its own AOF took
//! the turn's batch. The middle server runs under the fault shim; its
//! sub-replica is a fake one on a raw socket, so the test sees exactly
//! which bytes left the middle and when.

use std::time::{Duration, Instant};

use crate::harness::{start_hozon, Conn};
use crate::outside_faults::Setup;
use crate::repl_durability::{contains, FakeReplica};

/// One INFO replication field of the server on `port`.
fn replication_field(conn: &mut Conn, name: &str) -> String {
    let reply = conn.call(&[b"INFO", b"replication"]);
    let text = String::from_utf8_lossy(&reply).into_owned();
    text.lines()
        .find_map(|l| l.strip_prefix(&format!("{name}:")).map(str::to_string))
        .unwrap_or_default()
}

#[test]
fn a_sub_replica_never_receives_a_write_the_middle_aof_could_not_take() {
    let top = start_hozon(&["--repl-ping-replica-period", "3600"]);
    let mut t = Conn::connect(top.port);
    let setup = Setup::new();
    let top_port = top.port.to_string();
    let middle = setup.start_with(&[
        "--repl-diskless-sync",
        "no",
        "--replicaof",
        "127.0.0.1",
        &top_port,
    ]);
    let mut m = Conn::connect(middle.port);
    let deadline = Instant::now() + Duration::from_secs(20);
    while replication_field(&mut m, "master_link_status") != "up" {
        assert!(Instant::now() < deadline, "the middle's link never came up");
        std::thread::sleep(Duration::from_millis(20));
    }
    let mut sub = FakeReplica::full_sync(middle.port);
    assert_eq!(t.call(&[b"SET", b"first", b"1"]), b"+OK\r\n");
    sub.collect_until(b"first");

    // Every AOF write of the middle fails from now on (ENOSPC): the top's
    // write below is applied on the middle, but its batch stays unwritten
    // there, and so the stream holding it stays on the middle.
    setup.arm(1_000_000, 0, 0);
    assert_eq!(t.call(&[b"SET", b"held", b"2"]), b"+OK\r\n");
    setup.wait_fired("write ENOSPC");
    sub.collect_for(Duration::from_millis(1500));
    assert!(
        !contains(&sub.received, b"held"),
        "the sub-replica received a write the middle's AOF does not hold: {:?}",
        String::from_utf8_lossy(&sub.received)
    );

    // The middle's disk takes writes again: cron's retry writes the batch
    // and the stream follows it.
    setup.arm(0, 0, 0);
    sub.collect_until(b"held");
    middle.kill9();
}
