//! Chained replication (docs/replication.md §5.6): a hozon replica serves
//! replicas of its own with its master's history. A top master (hozon or
//! redis-server), a hozon replica in the middle, a redis-server 7.0
//! replica at the bottom: the data, the ids and the offsets agree along
//! the chain; the middle's backlog holds the top's stream byte for byte; a
//! lost sub-replica link, a promotion of the middle, a new master id above
//! and a restart of the middle all end in partial resyncs; a middle
//! without its link refuses SYNC/PSYNC as a redis-server replica does.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

use testkit::harness::ServerProcess;
use testkit::harness::{hozon_server_path, start_hozon, start_on_port, start_redis, Conn};

use crate::{call, dataset, fill, hozon_replica, info_field, wait_caught_up, write_more, Value};

/// No keepalive PING from the top during a test: offsets stay put once the
/// writes stop, so equal offsets can be asserted.
const NO_PING: [&str; 2] = ["--repl-ping-replica-period", "3600"];

/// A redis-server replica of `master`.
fn redis_replica(master: &ServerProcess) -> ServerProcess {
    start_redis(&["--replicaof", "127.0.0.1", &master.port.to_string()])
}

fn field(conn: &mut Conn, section: &str, name: &str) -> String {
    info_field(conn, section, name).unwrap_or_else(|| panic!("INFO {section} has no {name}"))
}

fn offset(conn: &mut Conn) -> i64 {
    field(conn, "replication", "master_repl_offset")
        .parse()
        .expect("master_repl_offset is a number")
}

/// Waits until the whole chain applied everything the top produced.
fn wait_chain(top: &mut Conn, middle: &mut Conn, bottom: &mut Conn) {
    wait_caught_up(top, middle);
    wait_caught_up(middle, bottom);
}

/// Asserts the three servers agree: datasets key by key, offsets, and the
/// bottom reports the top's replication id.
fn assert_chain_agrees(top: &mut Conn, middle: &mut Conn, bottom: &mut Conn, when: &str) {
    let expected = dataset(top);
    assert!(expected.len() > 500, "{when}: the dataset was written");
    assert_eq!(dataset(middle), expected, "{when}: the middle's data");
    assert_eq!(dataset(bottom), expected, "{when}: the bottom's data");
    wait_offsets_equal(&mut [top, middle, bottom], when);
    let replid = field(top, "replication", "master_replid");
    assert_eq!(
        field(middle, "replication", "master_replid"),
        replid,
        "{when}"
    );
    assert_eq!(
        field(bottom, "replication", "master_replid"),
        replid,
        "{when}"
    );
}

/// Waits until every server reports the same `master_repl_offset` (the
/// first one read again last): a keepalive PING may still be on its way
/// when the data already agrees.
fn wait_offsets_equal(conns: &mut [&mut Conn], when: &str) {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let mut last = conns.iter_mut().map(|c| offset(c)).collect::<Vec<_>>();
        last.push(offset(conns[0]));
        if last.iter().all(|o| *o == last[0]) {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "{when}: master_repl_offset never agreed: {last:?}"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Waits until `cond` holds, or panics with `what` after 30 seconds.
fn wait_for(what: &str, mut cond: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(30);
    while !cond() {
        assert!(Instant::now() < deadline, "timed out waiting for: {what}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// The stream bytes `port`'s backlog holds from `from` (the offset of the
/// first byte wanted) on, `len` of them, asked with `PSYNC <replid>
/// <from>`: the first line must be a `+CONTINUE`.
fn backlog_bytes(port: u16, replid: &str, from: i64, len: usize) -> Vec<u8> {
    let mut socket = TcpStream::connect(("127.0.0.1", port)).expect("connect");
    socket
        .set_read_timeout(Some(Duration::from_secs(10)))
        .expect("timeout");
    socket
        .write_all(&testkit::harness::encode_command(&[
            b"PSYNC",
            replid.as_bytes(),
            from.to_string().as_bytes(),
        ]))
        .expect("write PSYNC");
    let mut line = Vec::new();
    let mut byte = [0u8; 1];
    while !line.ends_with(b"\r\n") {
        socket.read_exact(&mut byte).expect("the PSYNC reply line");
        line.push(byte[0]);
    }
    assert!(
        line.starts_with(b"+CONTINUE"),
        "PSYNC on port {port}: {}",
        String::from_utf8_lossy(&line)
    );
    let mut bytes = vec![0u8; len];
    socket.read_exact(&mut bytes).expect("the backlog's bytes");
    bytes
}

/// The chain's check with `top` as the top master: a full sync along the
/// chain, writes of every kind, then the middle's backlog compared byte
/// for byte with the top's over the writes.
fn chain_agrees(top: ServerProcess) {
    let mut t = Conn::connect(top.port);
    fill(&mut t);
    let middle = hozon_replica(&top, &[]);
    let mut m = Conn::connect(middle.port);
    wait_caught_up(&mut t, &mut m);
    let bottom = redis_replica(&middle);
    let mut b = Conn::connect(bottom.port);
    wait_chain(&mut t, &mut m, &mut b);
    assert_chain_agrees(&mut t, &mut m, &mut b, "after the full syncs");
    assert_eq!(field(&mut m, "stats", "sync_full"), "1");
    let before = offset(&mut t);
    write_more(&mut t);
    wait_chain(&mut t, &mut m, &mut b);
    assert_chain_agrees(&mut t, &mut m, &mut b, "after the writes");
    // The middle counts the bottom, as Redis's INFO and ROLE show it.
    assert_eq!(field(&mut m, "replication", "connected_slaves"), "1");
    let slave0 = field(&mut m, "replication", "slave0");
    assert!(
        slave0.contains(&format!("port={},state=online", bottom.port)),
        "{slave0}"
    );
    assert_eq!(field(&mut m, "replication", "role"), "slave");
    let Value::Array(role) = call(&mut m, &["ROLE"]) else {
        panic!("ROLE")
    };
    assert_eq!(role[0], Value::Bulk(b"slave".to_vec()));
    assert_eq!(role[3], Value::Bulk(b"connected".to_vec()));
    // The middle forwarded the top's stream verbatim.
    let replid = field(&mut t, "replication", "master_replid");
    let len = (offset(&mut t) - before) as usize;
    assert!(len > 100, "the writes made a stream");
    let from_top = backlog_bytes(top.port, &replid, before + 1, len);
    let from_middle = backlog_bytes(middle.port, &replid, before + 1, len);
    assert!(
        from_middle == from_top,
        "the middle's backlog differs from the top's:\n top: {}\n mid: {}",
        testkit::harness::show(&from_top),
        testkit::harness::show(&from_middle)
    );
}

#[test]
fn hozon_master_hozon_replica_redis_replica() {
    chain_agrees(start_hozon(
        &[&["--repl-diskless-sync", "no"][..], &NO_PING].concat(),
    ));
}

#[test]
fn redis_master_hozon_replica_redis_replica() {
    chain_agrees(start_redis(
        &[&["--repl-diskless-sync", "no"][..], &NO_PING].concat(),
    ));
}

/// A chain hozon → hozon → redis-server, caught up.
struct Chain {
    top: ServerProcess,
    middle: ServerProcess,
    bottom: ServerProcess,
    t: Conn,
    m: Conn,
    b: Conn,
}

fn chain(middle_args: &[&str]) -> Chain {
    let top = start_hozon(&[&["--repl-diskless-sync", "no"][..], &NO_PING].concat());
    let mut t = Conn::connect(top.port);
    fill(&mut t);
    let middle = hozon_replica(&top, middle_args);
    let mut m = Conn::connect(middle.port);
    wait_caught_up(&mut t, &mut m);
    let bottom = redis_replica(&middle);
    let mut b = Conn::connect(bottom.port);
    wait_chain(&mut t, &mut m, &mut b);
    Chain {
        top,
        middle,
        bottom,
        t,
        m,
        b,
    }
}

#[test]
fn a_killed_sub_replica_link_continues_partially() {
    let Chain {
        top: _top,
        middle: _middle,
        bottom: _bottom,
        mut t,
        mut m,
        mut b,
    } = chain(&[]);
    assert_eq!(field(&mut m, "stats", "sync_full"), "1");
    assert_eq!(field(&mut m, "stats", "sync_partial_ok"), "0");
    assert_eq!(
        call(&mut m, &["CLIENT", "KILL", "TYPE", "replica"]),
        Value::Int(1)
    );
    write_more(&mut t);
    wait_for("the bottom's partial resync", || {
        field(&mut m, "stats", "sync_partial_ok") == "1"
    });
    wait_chain(&mut t, &mut m, &mut b);
    assert_chain_agrees(&mut t, &mut m, &mut b, "after the partial resync");
    assert_eq!(field(&mut m, "stats", "sync_full"), "1");
}

#[test]
fn promoting_the_middle_lets_the_bottom_continue() {
    let Chain {
        top,
        middle: _middle,
        bottom: _bottom,
        t,
        mut m,
        mut b,
    } = chain(&[]);
    let old_id = field(&mut m, "replication", "master_replid");
    drop(t);
    drop(top); // the top dies
    assert_eq!(
        call(&mut m, &["REPLICAOF", "NO", "ONE"]),
        Value::Simple("OK".into())
    );
    assert_eq!(field(&mut m, "replication", "master_replid2"), old_id);
    let new_id = field(&mut m, "replication", "master_replid");
    assert_ne!(new_id, old_id);
    // Its backlog was kept: the bottom, closed to learn the new id,
    // continues.
    assert_eq!(field(&mut m, "replication", "repl_backlog_active"), "1");
    wait_for("the bottom's partial resync", || {
        field(&mut m, "stats", "sync_partial_ok") == "1"
    });
    assert_eq!(field(&mut m, "stats", "sync_full"), "1");
    write_more(&mut m);
    wait_caught_up(&mut m, &mut b);
    assert_eq!(dataset(&mut b), dataset(&mut m));
    assert_eq!(field(&mut b, "replication", "master_replid"), new_id);
    wait_offsets_equal(&mut [&mut m, &mut b], "after the promotion");
}

#[test]
fn a_new_master_id_above_reaches_the_bottom_by_partial_resyncs() {
    let Chain {
        top,
        middle: _middle,
        bottom: _bottom,
        mut t,
        mut m,
        mut b,
    } = chain(&[]);
    // A second replica of the top, promoted once the top dies: it
    // continues the top's history under a new id.
    let other = redis_replica(&top);
    let mut o = Conn::connect(other.port);
    wait_caught_up(&mut t, &mut o);
    let top_id = field(&mut t, "replication", "master_replid");
    drop(t);
    drop(top);
    assert_eq!(
        call(&mut o, &["REPLICAOF", "NO", "ONE"]),
        Value::Simple("OK".into())
    );
    let new_id = field(&mut o, "replication", "master_replid");
    let port = other.port.to_string();
    assert_eq!(
        call(&mut m, &["REPLICAOF", "127.0.0.1", &port]),
        Value::Simple("OK".into())
    );
    write_more(&mut o);
    wait_for("the middle's new id", || {
        field(&mut m, "replication", "master_replid") == new_id
    });
    assert_eq!(field(&mut m, "replication", "master_replid2"), top_id);
    wait_chain(&mut o, &mut m, &mut b);
    assert_eq!(field(&mut o, "stats", "sync_partial_ok"), "1");
    assert_eq!(field(&mut o, "stats", "sync_full"), "0");
    // The middle closed the bottom to tell it the new id; it continued.
    assert_eq!(field(&mut m, "stats", "sync_partial_ok"), "1");
    assert_eq!(field(&mut m, "stats", "sync_full"), "1");
    assert_eq!(field(&mut b, "replication", "master_replid"), new_id);
    assert_eq!(dataset(&mut b), dataset(&mut o));
    wait_offsets_equal(&mut [&mut o, &mut m, &mut b], "after the new id");
}

#[test]
fn a_restarted_middle_lets_the_bottom_continue() {
    let dir = tempfile::tempdir().expect("temp dir");
    let dir_arg = dir.path().to_string_lossy().into_owned();
    let middle_args = ["--appendonly", "yes", "--dir", &dir_arg];
    let Chain {
        top,
        middle,
        bottom: _bottom,
        mut t,
        m,
        mut b,
    } = chain(&middle_args);
    let port = middle.port;
    drop(m);
    drop(middle); // SIGKILL
    write_more(&mut t);
    let top_port = top.port.to_string();
    let args = [&middle_args[..], &["--replicaof", "127.0.0.1", &top_port]].concat();
    let mut restarted = None;
    for _ in 0..50 {
        restarted = start_on_port(hozon_server_path(), "hozon-server", port, &args);
        if restarted.is_some() {
            break;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    let _middle = restarted.expect("the middle restarts on its port");
    let mut m = Conn::connect(port);
    wait_chain(&mut t, &mut m, &mut b);
    assert_chain_agrees(&mut t, &mut m, &mut b, "after the middle's restart");
    // The middle continued with the top, the bottom with the middle.
    assert_eq!(field(&mut t, "stats", "sync_full"), "1");
    assert_eq!(field(&mut t, "stats", "sync_partial_ok"), "1");
    assert_eq!(field(&mut m, "stats", "sync_full"), "0");
    assert_eq!(field(&mut m, "stats", "sync_partial_ok"), "1");
}

/// SYNC and PSYNC as a new sub-replica sends them, raw replies.
fn sync_replies(conn: &mut Conn) -> Vec<String> {
    let psync: &[&[u8]] = &[b"PSYNC", b"?", b"-1"];
    let sync: &[&[u8]] = &[b"SYNC"];
    [psync, sync]
        .iter()
        .map(|args| String::from_utf8_lossy(&conn.call(args)).into_owned())
        .collect()
}

#[test]
fn a_middle_without_its_link_refuses_sub_replicas_as_redis_does() {
    let top = start_redis(&["--repl-diskless-sync", "no"]);
    let mut t = Conn::connect(top.port);
    call(&mut t, &["SET", "k", "v"]);
    let hozon = hozon_replica(&top, &[]);
    let redis = redis_replica(&top);
    let (mut h, mut r) = (Conn::connect(hozon.port), Conn::connect(redis.port));
    wait_caught_up(&mut t, &mut h);
    wait_caught_up(&mut t, &mut r);
    drop(t);
    drop(top);
    for conn in [&mut h, &mut r] {
        wait_for("the link down", || {
            field(conn, "replication", "master_link_status") == "down"
        });
    }
    let (mut h2, mut r2) = (Conn::connect(hozon.port), Conn::connect(redis.port));
    let hozon_replies = sync_replies(&mut h2);
    assert_eq!(hozon_replies, sync_replies(&mut r2));
    assert_eq!(
        hozon_replies[0],
        "-NOMASTERLINK Can't SYNC while not connected with my master\r\n"
    );
    assert_eq!(field(&mut h, "replication", "connected_slaves"), "0");
}

#[test]
fn hozon_all_along_with_a_diskless_middle() {
    let top = start_hozon(&[&["--repl-diskless-sync", "no"][..], &NO_PING].concat());
    let mut t = Conn::connect(top.port);
    fill(&mut t);
    let middle = hozon_replica(
        &top,
        &[
            "--repl-diskless-sync",
            "yes",
            "--repl-diskless-sync-delay",
            "0",
        ],
    );
    let mut m = Conn::connect(middle.port);
    wait_caught_up(&mut t, &mut m);
    let bottom = hozon_replica(&middle, &[]);
    let mut b = Conn::connect(bottom.port);
    wait_chain(&mut t, &mut m, &mut b);
    assert_chain_agrees(&mut t, &mut m, &mut b, "after the full syncs");
    write_more(&mut t);
    wait_chain(&mut t, &mut m, &mut b);
    assert_chain_agrees(&mut t, &mut m, &mut b, "after the writes");
    // The bottom's link killed on the middle: it continues.
    assert_eq!(
        call(&mut m, &["CLIENT", "KILL", "TYPE", "replica"]),
        Value::Int(1)
    );
    call(&mut t, &["SET", "after-kill", "1"]);
    wait_for("the bottom's partial resync", || {
        field(&mut m, "stats", "sync_partial_ok") == "1"
    });
    wait_chain(&mut t, &mut m, &mut b);
    assert_chain_agrees(&mut t, &mut m, &mut b, "after the partial resync");
}

#[test]
fn a_sub_replica_synced_while_the_stream_is_in_another_database_applies_there() {
    // The top's stream selected database 5 before the bottom's full sync
    // from the middle and does not select it again after: the payload the
    // middle captured must carry database 5 as the stream's.
    let top = start_hozon(&[&["--repl-diskless-sync", "no"][..], &NO_PING].concat());
    let mut t = Conn::connect(top.port);
    fill(&mut t);
    let middle = hozon_replica(&top, &[]);
    let mut m = Conn::connect(middle.port);
    wait_caught_up(&mut t, &mut m);
    call(&mut t, &["SELECT", "5"]);
    call(&mut t, &["SET", "before", "1"]);
    wait_caught_up(&mut t, &mut m);
    let bottom = redis_replica(&middle);
    let mut b = Conn::connect(bottom.port);
    wait_chain(&mut t, &mut m, &mut b);
    call(&mut t, &["SET", "after", "2"]);
    call(&mut t, &["SELECT", "0"]);
    wait_chain(&mut t, &mut m, &mut b);
    assert_chain_agrees(&mut t, &mut m, &mut b, "after the write in database 5");
    call(&mut b, &["SELECT", "5"]);
    assert_eq!(call(&mut b, &["GET", "after"]), Value::Bulk(b"2".to_vec()));
}
