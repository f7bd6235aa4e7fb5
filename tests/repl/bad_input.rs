//! Scenario 8: bad or odd input from a would-be replica. The expected bytes
//! are Redis 7.0.15's replies, recorded from redis-server and checked
//! against it by each `_redis_master` test, so the hozon instances are
//! byte-exact differentials. Each request goes on a fresh connection (a
//! successful SYNC/PSYNC turns the connection into a replica).

use crate::fake_replica::FakeReplica;
use crate::harness::{info_int, ok, show, wait_until, Conn, Master, SyncMode, Value, PATIENCE};

const INT_ERR: &[u8] = b"-ERR value is not an integer or out of range\r\n";
const SYNTAX: &[u8] = b"-ERR syntax error\r\n";

#[track_caller]
fn expect(port: u16, requests: &[&[&str]], replies: &[&[u8]]) {
    let mut conn = Conn::connect(port);
    for req in requests {
        let args: Vec<&[u8]> = req.iter().map(|a| a.as_bytes()).collect();
        conn.send_raw(&testkit::harness::encode_command(&args));
    }
    for (i, want) in replies.iter().enumerate() {
        let got = conn.read_reply();
        assert_eq!(
            show(&got),
            show(want),
            "reply {i} to {requests:?} (long arguments shortened in this message)"
        );
    }
}

/// REPLCONF's argument checks and the options a replica sends.
fn replconf_replies(master: Master) {
    let m = master.start(&[]);
    let p = m.port();
    let long = "a".repeat(256);
    let short = "a".repeat(255);
    let cases: &[(&[&str], &[u8])] = &[
        (&["REPLCONF"], b"+OK\r\n"),
        (&["REPLCONF", "a"], SYNTAX),
        (&["REPLCONF", "listening-port", "1", "foo"], SYNTAX),
        (&["REPLCONF", "listening-port", "abc"], INT_ERR),
        (
            &["REPLCONF", "foo", "bar"],
            b"-ERR Unrecognized REPLCONF option: foo\r\n",
        ),
        (&["REPLCONF", "LISTENING-PORT", "6380"], b"+OK\r\n"),
        (&["REPLCONF", "listening-port", "99999"], b"+OK\r\n"),
        (
            &[
                "REPLCONF",
                "listening-port",
                "1",
                "capa",
                "eof",
                "capa",
                "psync2",
                "capa",
                "x",
            ],
            b"+OK\r\n",
        ),
        (&["REPLCONF", "ip-address", &short], b"+OK\r\n"),
        (
            &["REPLCONF", "ip-address", &long],
            b"-ERR REPLCONF ip-address provided by replica instance is too long: 256 bytes\r\n",
        ),
        (&["REPLCONF", "rdb-only", "0"], b"+OK\r\n"),
        (&["REPLCONF", "rdb-only", "x"], INT_ERR),
        (
            &["REPLCONF", "rdb-only", "2"],
            b"-ERR value is out of range, value must between 0 and 1\r\n",
        ),
        // Pairs are checked in order: the first bad one answers.
        (
            &["REPLCONF", "capa", "eof", "foo", "1"],
            b"-ERR Unrecognized REPLCONF option: foo\r\n",
        ),
    ];
    for (req, want) in cases {
        expect(p, &[req], &[want]);
    }
}

#[test]
fn replconf_replies_redis_master() {
    replconf_replies(Master::Redis);
}

#[test]
fn replconf_replies_hozon_master() {
    replconf_replies(Master::Hozon);
}

/// PSYNC's and SYNC's argument checks.
fn psync_argument_errors(master: Master) {
    let m = master.start(&[]);
    let p = m.port();
    let cases: &[(&[&str], &[u8])] = &[
        (&["PSYNC", "?", "notanumber"], INT_ERR),
        (&["PSYNC", "?", "9223372036854775808"], INT_ERR),
        (
            &["PSYNC"],
            b"-ERR wrong number of arguments for 'psync' command\r\n",
        ),
        (
            &["PSYNC", "?"],
            b"-ERR wrong number of arguments for 'psync' command\r\n",
        ),
        (
            &["SYNC", "extra"],
            b"-ERR wrong number of arguments for 'sync' command\r\n",
        ),
        (
            &["PSYNC", "?", "-1", "FAILOVER"],
            b"-ERR PSYNC FAILOVER can't be sent to a master.\r\n",
        ),
    ];
    for (req, want) in cases {
        expect(p, &[req], &[want]);
    }
}

#[test]
fn psync_argument_errors_redis_master() {
    psync_argument_errors(Master::Redis);
}

#[test]
fn psync_argument_errors_hozon_master() {
    psync_argument_errors(Master::Hozon);
}

/// `REPLCONF ACK` and `GETACK` from a client that is not a replica get no
/// reply at all (the PING after them is answered first).
fn acks_get_no_reply(master: Master) {
    let m = master.start(&[]);
    expect(
        m.port(),
        &[
            &["REPLCONF", "ACK", "5"],
            &["REPLCONF", "ack", "x"],
            &["REPLCONF", "ack", "1", "fack", "2"],
            &["REPLCONF", "GETACK", "*"],
            &["PING"],
        ],
        &[b"+PONG\r\n"],
    );
}

#[test]
fn acks_get_no_reply_redis_master() {
    acks_get_no_reply(Master::Redis);
}

#[test]
fn acks_get_no_reply_hozon_master() {
    acks_get_no_reply(Master::Hozon);
}

/// SYNC and PSYNC are refused in MULTI (REPLCONF is queued and runs); none
/// of the three runs from a script.
fn refused_in_multi_and_scripts(master: Master) {
    let m = master.start(&[]);
    let p = m.port();
    let not_in_multi: &[u8] = b"-ERR Command not allowed inside a transaction\r\n";
    let aborted: &[u8] = b"-EXECABORT Transaction discarded because of previous errors.\r\n";
    for req in [&["SYNC"][..], &["PSYNC", "?", "-1"]] {
        expect(
            p,
            &[&["MULTI"], req, &["EXEC"]],
            &[b"+OK\r\n", not_in_multi, aborted],
        );
    }
    expect(
        p,
        &[&["MULTI"], &["REPLCONF", "capa", "eof"], &["EXEC"]],
        &[b"+OK\r\n", b"+QUEUED\r\n", b"*1\r\n+OK\r\n"],
    );
    let mut conn = Conn::connect(p);
    for body in [
        "return redis.call('replconf','capa','eof')",
        "return redis.call('sync')",
        "return redis.call('psync','?','-1')",
    ] {
        let sha = ok(&mut conn, &["SCRIPT", "LOAD", body]).text();
        let want = format!(
            "-ERR This Redis command is not allowed from script script: {sha}, on @user_script:1.\r\n"
        );
        expect(p, &[&["EVAL", body, "0"]], &[want.as_bytes()]);
    }
}

#[test]
fn refused_in_multi_and_scripts_redis_master() {
    refused_in_multi_and_scripts(Master::Redis);
}

#[test]
fn refused_in_multi_and_scripts_hozon_master() {
    refused_in_multi_and_scripts(Master::Hozon);
}

/// A replica that sends garbage after its sync loses its connection;
/// nothing else changes: the master serves, counts no replica, and syncs
/// the next one.
fn garbage_from_a_replica(master: Master) {
    let m = master.start(&SyncMode::Disk.args());
    let mut c = m.conn();
    ok(&mut c, &["SET", "k", "v"]);
    let mut f = FakeReplica::connect(m.port());
    f.attach(4242);
    assert_eq!(info_int(&mut c, "replication", "connected_slaves"), 1);
    f.send_raw(b"*1\r\n$abc\r\n");
    // The connection ends; whatever the master wrote before is stream.
    let rest = f.until_closed();
    assert!(
        !rest.windows(5).any(|w| w == b"-ERR "),
        "the master answered a replica: {}",
        show(&rest)
    );
    wait_until(
        PATIENCE,
        "the master to drop the replica",
        || match info_int(&mut c, "replication", "connected_slaves") {
            0 => Ok(()),
            n => Err(format!("connected_slaves:{n}")),
        },
    );
    assert_eq!(ok(&mut c, &["GET", "k"]), Value::Bulk(b"v".to_vec()));
    FakeReplica::connect(m.port()).attach(4243);
    assert_eq!(info_int(&mut c, "stats", "sync_full"), 2);
}

#[test]
fn garbage_from_a_replica_redis_master() {
    garbage_from_a_replica(Master::Redis);
}

#[test]
fn garbage_from_a_replica_hozon_master() {
    garbage_from_a_replica(Master::Hozon);
}
