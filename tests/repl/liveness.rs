//! Liveness on the master (docs/replication.md §2.4, §3.4): the PING
//! keepalive in the stream, the `\n` keepalive and `wait_bgsave` state
//! while a replica waits for its capture, the `repl-timeout` for an
//! online replica that stops ACKing (not for a SYNC one), and the output
//! limit for a replica that stops reading.

use std::time::Duration;

use crate::fake_replica::{parse_commands, split_units, FakeReplica};
use crate::harness::{info, info_int, ok, show, wait_until, Master, SyncMode, Value, PATIENCE};

/// With `repl-ping-replica-period 1` and no writes, the stream carries
/// PINGs only (14 bytes each, `*1\r\n$4\r\nping\r\n` in Redis's lower
/// case), counted in the master's offset.
fn keepalive_pings(master: Master) {
    let mut args = SyncMode::Disk.args();
    args.extend(["--repl-ping-replica-period", "1"]);
    let m = master.start(&args);
    let mut c = m.conn();
    let mut f = FakeReplica::connect(m.port());
    let start = f.attach(4242);
    let mut stream = Vec::new();
    wait_until(PATIENCE, "two PINGs", || {
        let acked = start + stream.len() as i64;
        f.send(&["REPLCONF", "ACK", &acked.to_string()]);
        stream.extend(f.take_available(Duration::from_millis(100)));
        let offset = info_int(&mut c, "replication", "master_repl_offset");
        let (units, used) = split_units(&stream);
        if units.len() >= 2 && used == stream.len() && start + stream.len() as i64 == offset {
            Ok(())
        } else {
            Err(format!("offset {offset}, start {start}: {}", show(&stream)))
        }
    });
    for unit in parse_commands(&stream) {
        assert!(
            unit.len() == 1 && unit[0].eq_ignore_ascii_case("ping"),
            "not a PING: {unit:?}"
        );
    }
    assert_eq!(stream.len() % 14, 0, "{}", show(&stream));
}

#[test]
fn keepalive_pings_redis_master() {
    keepalive_pings(Master::Redis);
}

#[test]
fn keepalive_pings_hozon_master() {
    keepalive_pings(Master::Hozon);
}

/// A replica waiting for a diskless capture (`repl-diskless-sync-delay 3`)
/// is listed `state=wait_bgsave`, is not in ROLE, and gets bare `\n`
/// keepalives before its `+FULLRESYNC`; then it goes online.
fn waiting_replica(master: Master) {
    let m = master.start(&[
        "--repl-diskless-sync",
        "yes",
        "--repl-diskless-sync-delay",
        "3",
    ]);
    let mut c = m.conn();
    ok(&mut c, &["SET", "k", "v"]);
    let mut f = FakeReplica::connect(m.port());
    f.handshake(4242);
    f.send(&["PSYNC", "?", "-1"]);
    wait_until(PATIENCE, "the replica listed as waiting", || {
        let fields = info(&mut c, "replication");
        match fields.get("slave0") {
            Some(line) if line == "ip=127.0.0.1,port=4242,state=wait_bgsave,offset=0,lag=0" => {
                Ok(())
            }
            other => Err(format!("slave0: {other:?}")),
        }
    });
    assert_eq!(info_int(&mut c, "replication", "connected_slaves"), 1);
    let role = ok(&mut c, &["ROLE"]);
    assert_eq!(
        role.items()[2],
        Value::Array(vec![]),
        "ROLE lists a waiting replica"
    );
    // Keepalive newlines, then the reply.
    let mut before = Vec::new();
    let line = wait_until(PATIENCE, "+FULLRESYNC", || {
        before.extend(f.take_available(Duration::from_millis(100)));
        match before.windows(2).position(|w| w == b"\r\n") {
            Some(end) => Ok(before[..end].to_vec()),
            None => Err(show(&before)),
        }
    });
    let newlines = line.iter().take_while(|&&b| b == b'\n').count();
    assert!(newlines >= 1, "no keepalive before {}", show(&line));
    assert!(
        line[newlines..].starts_with(b"+FULLRESYNC "),
        "{}",
        show(&line)
    );
}

#[test]
fn waiting_replica_redis_master() {
    waiting_replica(Master::Redis);
}

#[test]
fn waiting_replica_hozon_master() {
    waiting_replica(Master::Hozon);
}

/// `repl-timeout 2`: an online PSYNC replica that never ACKs again is
/// closed; a SYNC replica, silent as long, is not (pre-PSYNC replicas send
/// no ACKs).
fn silent_replica_times_out(master: Master) {
    let mut args = SyncMode::Disk.args();
    args.extend(["--repl-timeout", "2", "--repl-ping-replica-period", "1"]);
    let m = master.start(&args);
    let mut c = m.conn();
    ok(&mut c, &["SET", "k", "v"]);
    let mut old = FakeReplica::connect(m.port());
    old.handshake(4243);
    old.send(&["SYNC"]);
    old.payload();
    let mut f = FakeReplica::connect(m.port());
    f.attach(4242);
    assert_eq!(info_int(&mut c, "replication", "connected_slaves"), 2);
    // No more ACKs: dropped after 2 s (reading on, so output is no issue).
    let rest = f.until_closed();
    assert!(
        split_units(&rest).0.iter().all(|u| u.len() == 1),
        "{}",
        show(&rest)
    );
    wait_until(PATIENCE, "one replica left", || {
        let fields = info(&mut c, "replication");
        match fields.get("slave0") {
            Some(l) if fields["connected_slaves"] == "1" && l.contains("port=4243,") => Ok(()),
            _ => Err(format!("{fields:?}")),
        }
    });
    // The SYNC replica still gets the stream.
    ok(&mut c, &["SET", "after", "1"]);
    let mut got = Vec::new();
    wait_until(PATIENCE, "the write on the SYNC replica", || {
        got.extend(old.take_available(Duration::from_millis(50)));
        let (units, _) = split_units(&got);
        match units.iter().any(|u| u == &["SET", "after", "1"]) {
            true => Ok(()),
            false => Err(show(&got)),
        }
    });
}

#[test]
fn silent_replica_times_out_redis_master() {
    silent_replica_times_out(Master::Redis);
}

#[test]
fn silent_replica_times_out_hozon_master() {
    silent_replica_times_out(Master::Hozon);
}

/// `client-output-buffer-limit replica 1mb 0 0`: a replica that stops
/// reading while 32 MB of writes stream is closed; the master serves on.
fn stalled_replica_hits_output_limit(master: Master) {
    let mut args = SyncMode::Disk.args();
    args.extend(["--client-output-buffer-limit", "replica 1mb 0 0"]);
    let m = master.start(&args);
    let mut c = m.conn();
    let mut f = FakeReplica::connect(m.port());
    f.attach(4242);
    let value = "x".repeat(1 << 20);
    for i in 0..32 {
        ok(&mut c, &["SET", &format!("big{i}"), &value]);
    }
    wait_until(
        PATIENCE,
        "the stalled replica to be dropped",
        || match info_int(&mut c, "replication", "connected_slaves") {
            0 => Ok(()),
            n => Err(format!("connected_slaves:{n}")),
        },
    );
    assert_eq!(ok(&mut c, &["DBSIZE"]), Value::Int(32));
    assert!(
        m.log()
            .contains("scheduled to be closed ASAP for overcoming of output buffer limits"),
        "no output-limit line in the log"
    );
}

#[test]
fn stalled_replica_output_limit_redis_master() {
    stalled_replica_hits_output_limit(Master::Redis);
}

#[test]
fn stalled_replica_output_limit_hozon_master() {
    stalled_replica_hits_output_limit(Master::Hozon);
}
