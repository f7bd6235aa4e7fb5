//! Differential tests for transactions and replication: EXEC on a replica
//! whose link is down, and what a transaction sends down the replication
//! stream (read by a replica-like client that sent SYNC, as Redis's Tcl
//! helper `attach_to_replication_stream` does), checked against Redis 7.0.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

use crate::harness::{encode_command, show, Conn, Pair};

/// Sends `args` to both servers on the given connections and asserts
/// that the two raw replies are the same and Redis's is `expected`.
#[track_caller]
fn check_is(r: &mut Conn, h: &mut Conn, args: &[&str], expected: &str) {
    let bytes: Vec<&[u8]> = args.iter().map(|a| a.as_bytes()).collect();
    let (rr, hr) = (r.call(&bytes), h.call(&bytes));
    assert_eq!(
        show(&rr),
        show(expected.as_bytes()),
        "Redis itself answered {args:?} unexpectedly (the test's premise is wrong)"
    );
    assert_eq!(show(&hr), show(&rr), "replies differ for {args:?}");
}

const MASTERDOWN_EXECABORT: &str = "-EXECABORT Transaction discarded because of: MASTERDOWN Link \
     with MASTER is down and replica-serve-stale-data is set to 'no'.\r\n";

/// Redis's unit/multi "exec with read commands and stale replica state
/// change": a transaction queued before the server became a replica with
/// its link down (`replica-serve-stale-data no`) is refused at EXEC when a
/// queued command lacks the `stale` flag (GET, PING), and runs when the
/// link is no longer needed (REPLICAOF NO ONE while queueing).
#[test]
fn exec_on_a_stale_replica_is_refused_when_a_queued_command_needs_data() {
    let mut p = Pair::new();
    let (mut r1, mut h1) = p.connect_more();
    let (r, h) = (&mut p.r, &mut p.h);
    check_is(
        r,
        h,
        &["CONFIG", "SET", "replica-serve-stale-data", "no"],
        "+OK\r\n",
    );
    check_is(r, h, &["SET", "xx", "1"], "+OK\r\n");
    for queued in [&["GET", "xx"][..], &["PING"]] {
        check_is(r, h, &["MULTI"], "+OK\r\n");
        check_is(r, h, queued, "+QUEUED\r\n");
        // An unresolvable master: the link stays down.
        check_is(
            &mut r1,
            &mut h1,
            &["REPLICAOF", "localhsot", "0"],
            "+OK\r\n",
        );
        check_is(r, h, &["EXEC"], MASTERDOWN_EXECABORT);
        // The transaction is gone.
        check_is(r, h, &["EXEC"], "-ERR EXEC without MULTI\r\n");
        check_is(&mut r1, &mut h1, &["REPLICAOF", "NO", "ONE"], "+OK\r\n");
    }
    // A transaction of commands allowed on a stale replica runs.
    check_is(
        &mut r1,
        &mut h1,
        &["REPLICAOF", "localhsot", "0"],
        "+OK\r\n",
    );
    check_is(r, h, &["MULTI"], "+OK\r\n");
    check_is(r, h, &["INFO", "nosuchsection"], "+QUEUED\r\n");
    check_is(r, h, &["EXEC"], "*1\r\n$0\r\n\r\n");
    // Queued while stale, the link no longer needed at EXEC.
    check_is(r, h, &["MULTI"], "+OK\r\n");
    check_is(&mut r1, &mut h1, &["REPLICAOF", "NO", "ONE"], "+OK\r\n");
    check_is(r, h, &["GET", "xx"], "+QUEUED\r\n");
    check_is(r, h, &["EXEC"], "*1\r\n$1\r\n1\r\n");
}

/// A replica-like client: it sent SYNC and consumed the payload; what
/// follows is the replication stream.
struct StreamReader {
    stream: TcpStream,
    buf: Vec<u8>,
}

impl StreamReader {
    /// Attaches to the server on `port` like the Tcl suite's
    /// `attach_to_replication_stream` (no keepalive PINGs meanwhile).
    fn attach(port: u16) -> StreamReader {
        let mut c = Conn::connect(port);
        c.call(&[b"CONFIG", b"SET", b"repl-ping-replica-period", b"3600"]);
        let mut stream = TcpStream::connect(("127.0.0.1", port)).expect("connect");
        stream
            .set_read_timeout(Some(Duration::from_millis(200)))
            .expect("timeout");
        stream.write_all(b"SYNC\r\n").expect("send SYNC");
        let mut reader = StreamReader {
            stream,
            buf: Vec::new(),
        };
        // Newlines (keepalives while the payload is prepared), then
        // `$<len>\r\n` and the payload, no CRLF after it.
        let deadline = Instant::now() + Duration::from_secs(20);
        let len = loop {
            while reader.buf.first() == Some(&b'\n') {
                reader.buf.remove(0);
            }
            if let Some(end) = reader.buf.windows(2).position(|w| w == b"\r\n") {
                let line = String::from_utf8_lossy(&reader.buf[..end]).into_owned();
                let len: usize = line
                    .strip_prefix('$')
                    .and_then(|n| n.parse().ok())
                    .unwrap_or_else(|| panic!("SYNC answered {line:?}"));
                reader.buf.drain(..end + 2);
                break len;
            }
            assert!(Instant::now() < deadline, "no SYNC payload");
            reader.fill();
        };
        while reader.buf.len() < len {
            assert!(Instant::now() < deadline, "SYNC payload incomplete");
            reader.fill();
        }
        reader.buf.drain(..len);
        reader
    }

    fn fill(&mut self) {
        let mut chunk = [0u8; 65536];
        match self.stream.read(&mut chunk) {
            Ok(0) => panic!("the server closed the replication stream"),
            Ok(n) => self.buf.extend_from_slice(&chunk[..n]),
            Err(_) => {} // timeout: try again
        }
    }

    /// The stream's bytes up to and including `last` (a command's RESP
    /// encoding), as text, without keepalive PINGs (a server may send one
    /// at its first cron after a replica attached, whatever the period).
    fn until(&mut self, last: &[u8]) -> String {
        let deadline = Instant::now() + Duration::from_secs(5);
        loop {
            if let Some(at) = self.buf.windows(last.len()).position(|w| w == last) {
                let bytes: Vec<u8> = self.buf.drain(..at + last.len()).collect();
                return show(&bytes).replace("*1\\r\\n$4\\r\\nPING\\r\\n", "");
            }
            assert!(
                Instant::now() < deadline,
                "the stream did not reach {}; got {}",
                show(last),
                show(&self.buf)
            );
            self.fill();
        }
    }
}

/// Attaches a stream reader to each server, runs `commands` on a new
/// connection to each (replies compared), then `SET endmark 1`, and
/// asserts that both streams are the same up to it; returns Redis's.
#[track_caller]
fn same_stream(p: &Pair, commands: &[&[&str]]) -> String {
    let mut r_stream = StreamReader::attach(p.redis_server.port);
    let mut h_stream = StreamReader::attach(p.hozon_server.port);
    let (mut r, mut h) = p.connect_more();
    let end: &[&str] = &["SET", "endmark", "1"];
    for args in commands.iter().chain([&end]) {
        let bytes: Vec<&[u8]> = args.iter().map(|a| a.as_bytes()).collect();
        let (rr, hr) = (r.call(&bytes), h.call(&bytes));
        assert_eq!(show(&hr), show(&rr), "replies differ for {args:?}");
    }
    let last = encode_command(&[b"SET", b"endmark", b"1"]);
    let (rs, hs) = (r_stream.until(&last), h_stream.until(&last));
    assert_eq!(hs, rs, "replication streams differ");
    rs
}

/// Redis's unit/multi "MULTI propagation of PUBLISH": PUBLISH is
/// propagated in the publisher's database, with a SELECT first when the
/// stream has not selected it (here: a stream just attached), inside a
/// transaction or not.
#[test]
fn publish_propagates_with_the_select_of_the_publishers_database() {
    let p = Pair::new();
    let stream = same_stream(
        &p,
        &[
            &["SELECT", "9"],
            &["MULTI"],
            &["PUBLISH", "bla", "bla"],
            &["EXEC"],
        ],
    );
    assert!(
        stream.starts_with(&show(&encode_command(&[b"SELECT", b"9"]))),
        "{stream}"
    );
    // Publisher in another database than the stream's; a transaction
    // whose first effect is a PUBLISH selects its database before MULTI.
    same_stream(
        &p,
        &[
            &["SET", "a", "1"],
            &["SELECT", "3"],
            &["PUBLISH", "ch", "x"],
            &["SELECT", "5"],
            &["MULTI"],
            &["PUBLISH", "ch", "y"],
            &["SELECT", "6"],
            &["SET", "b", "2"],
            &["EXEC"],
        ],
    );
}
