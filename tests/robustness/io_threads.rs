//! `io-threads N`: the I/O threads that share a busy turn's reply writes
//! (docs/cores.md). Every client must get every reply, in order, whether
//! its socket takes a reply at once or fills up half way; a client that
//! asked to be closed is closed after its last reply; and the setting
//! reads and refuses changes as Redis's does.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::os::unix::net::UnixStream;
use std::thread;
use std::time::Duration;

use crate::harness::{encode_command, show, start_hozon, start_redis, Conn};

/// The field `name` of an INFO section, as a number.
fn info_number(conn: &mut Conn, section: &str, name: &str) -> u64 {
    let reply = conn.call(&[b"INFO", section.as_bytes()]);
    let text = String::from_utf8_lossy(&reply).into_owned();
    text.lines()
        .find_map(|l| l.strip_prefix(&format!("{name}:")))
        .unwrap_or_else(|| panic!("no {name} in INFO {section}: {text}"))
        .trim()
        .parse()
        .unwrap_or_else(|_| panic!("{name} is not a number: {text}"))
}

/// A bulk string reply of `value`.
fn bulk(value: &[u8]) -> Vec<u8> {
    let mut out = format!("${}\r\n", value.len()).into_bytes();
    out.extend_from_slice(value);
    out.extend_from_slice(b"\r\n");
    out
}

/// Client `c`'s pipelines on `conn`: rounds of INCRs of its own counter
/// mixed with GETs of a large value, each round's replies checked byte for
/// byte. Over a Unix socket (about 200 KiB of buffer) a large reply stops
/// half way and the rest goes out on later writable events.
fn pipelining_client(mut conn: impl Read + Write, c: usize, big: &[u8]) {
    let counter = format!("io:{c}");
    let mut count = 0u64;
    for round in 0..ROUNDS {
        let mut batch = Vec::new();
        let mut expected = Vec::new();
        for i in 0..BATCH {
            if is_get(c, round, i) {
                batch.extend(encode_command(&[b"GET", b"io:big"]));
                expected.extend(bulk(big));
            } else {
                batch.extend(encode_command(&[b"INCR", counter.as_bytes()]));
                count += 1;
                expected.extend(format!(":{count}\r\n").into_bytes());
            }
        }
        conn.write_all(&batch).expect("send a batch");
        let mut got = vec![0u8; expected.len()];
        conn.read_exact(&mut got).expect("read a batch's replies");
        if let Some(at) = got.iter().zip(&expected).position(|(g, e)| g != e) {
            panic!(
                "client {c}, round {round}: replies differ at byte {at} of {}: got {}",
                expected.len(),
                show(&got[at.saturating_sub(20)..(at + 40).min(got.len())])
            );
        }
    }
}

const CLIENTS: usize = 24;
const ROUNDS: usize = 20;
const BATCH: usize = 32;

/// Whether client `c`'s request `i` of `round` is a GET of the large value.
fn is_get(c: usize, round: usize, i: usize) -> bool {
    (round + i + c).is_multiple_of(16)
}

#[test]
fn every_client_gets_every_reply_in_order_with_io_threads() {
    let dir = tempfile::tempdir().expect("tempdir");
    let socket = dir.path().join("hozon.sock");
    let socket_arg = socket.to_str().expect("utf-8 path").to_string();
    let server = start_hozon(&["--io-threads", "3", "--unixsocket", &socket_arg]);
    let port = server.port;
    let mut admin = Conn::connect(port);
    let big: Vec<u8> = (0..300_000u32).map(|i| b'a' + (i % 26) as u8).collect();
    assert_eq!(admin.call(&[b"SET", b"io:big", &big]), b"+OK\r\n");
    let written_before = info_number(&mut admin, "stats", "total_writes_processed");
    // Half the clients over TCP, half over the Unix socket.
    let clients: Vec<_> = (0..CLIENTS)
        .map(|c| {
            let big = big.clone();
            let socket = socket.clone();
            thread::spawn(move || {
                if c % 2 == 0 {
                    let conn = TcpStream::connect(("127.0.0.1", port)).expect("connect");
                    conn.set_read_timeout(Some(Duration::from_secs(20)))
                        .expect("timeout");
                    pipelining_client(conn, c, &big)
                } else {
                    let conn = UnixStream::connect(&socket).expect("connect");
                    conn.set_read_timeout(Some(Duration::from_secs(20)))
                        .expect("timeout");
                    pipelining_client(conn, c, &big)
                }
            })
        })
        .collect();
    for client in clients {
        client.join().expect("a client failed");
    }
    // The turns were shared with the I/O threads: Redis's counter of the
    // clients written in such turns moved.
    let shared = info_number(&mut admin, "stats", "io_threaded_writes_processed");
    assert!(shared > 0, "no turn was shared with the I/O threads");
    assert_eq!(
        info_number(&mut admin, "stats", "io_threaded_reads_processed"),
        0
    );
    // Large replies went out in several writes (the path this test is
    // for): more writes than batches.
    let writes = info_number(&mut admin, "stats", "total_writes_processed") - written_before;
    assert!(
        writes > (CLIENTS * ROUNDS) as u64,
        "{writes} writes for {} batches: no reply was written in parts",
        CLIENTS * ROUNDS
    );
    // Each counter holds exactly the INCRs its client sent.
    for c in 0..CLIENTS {
        let incrs = (0..ROUNDS)
            .flat_map(|round| (0..BATCH).map(move |i| !is_get(c, round, i)))
            .filter(|&incr| incr)
            .count();
        assert_eq!(
            admin.call(&[b"GET", format!("io:{c}").as_bytes()]),
            bulk(incrs.to_string().as_bytes())
        );
    }
}

#[test]
fn a_client_that_quits_gets_its_replies_before_the_close_with_io_threads() {
    let server = start_hozon(&["--io-threads", "2"]);
    let port = server.port;
    // Enough clients at once that their turn is shared (two per thread).
    let clients: Vec<_> = (0..16)
        .map(|c| {
            thread::spawn(move || {
                let mut conn = Conn::connect(port);
                let key = format!("quit:{c}");
                let mut batch = Vec::new();
                for _ in 0..200 {
                    batch.extend(encode_command(&[b"INCR", key.as_bytes()]));
                }
                batch.extend(encode_command(&[b"QUIT"]));
                conn.send_raw(&batch);
                let mut want = Vec::new();
                for i in 1..=200 {
                    want.extend(format!(":{i}\r\n").into_bytes());
                }
                want.extend(b"+OK\r\n");
                let got = conn.read_until_close();
                assert!(got == want, "client {c}: got {}", show(&got));
            })
        })
        .collect();
    for client in clients {
        client.join().expect("a client failed");
    }
}

#[test]
fn io_threads_is_read_and_immutable_as_in_redis() {
    let redis = start_redis(&["--io-threads", "2"]);
    let hozon = start_hozon(&["--io-threads", "2"]);
    let mut r = Conn::connect(redis.port);
    let mut h = Conn::connect(hozon.port);
    for args in [
        &[&b"CONFIG"[..], b"GET", b"io-threads"][..],
        &[b"CONFIG", b"SET", b"io-threads", b"4"],
        &[b"CONFIG", b"SET", b"io-threads", b"1"],
    ] {
        assert_eq!(
            show(&h.call(args)),
            show(&r.call(args)),
            "{}",
            show(&encode_command(args))
        );
    }
    // An idle server's turns have one client to write to: not shared.
    assert_eq!(info_number(&mut h, "server", "io_threads_active"), 0);
    assert_eq!(info_number(&mut r, "server", "io_threads_active"), 0);
}

#[test]
fn every_subscriber_gets_every_message_in_order_with_io_threads() {
    let server = start_hozon(&["--io-threads", "2"]);
    let port = server.port;
    let mut subscribers: Vec<Conn> = (0..30)
        .map(|_| {
            let mut conn = Conn::connect(port);
            assert_eq!(
                show(&conn.call(&[b"SUBSCRIBE", b"news"])),
                show(b"*3\r\n$9\r\nsubscribe\r\n$4\r\nnews\r\n:1\r\n")
            );
            conn
        })
        .collect();
    // One publisher, pipelined: each turn fans its messages out to the
    // thirty subscribers, a turn shared with the I/O thread.
    let mut publisher = Conn::connect(port);
    let mut batch = Vec::new();
    for i in 0..500 {
        batch.extend(encode_command(&[
            b"PUBLISH",
            b"news",
            format!("message {i}").as_bytes(),
        ]));
    }
    publisher.send_raw(&batch);
    for _ in 0..500 {
        assert_eq!(publisher.read_reply(), b":30\r\n");
    }
    for (s, conn) in subscribers.iter_mut().enumerate() {
        for i in 0..500 {
            let text = format!("message {i}");
            let want = format!(
                "*3\r\n$7\r\nmessage\r\n$4\r\nnews\r\n${}\r\n{text}\r\n",
                text.len()
            );
            let got = conn.read_reply();
            assert!(
                got == want.as_bytes(),
                "subscriber {s}, message {i}: got {}",
                show(&got)
            );
        }
    }
    let mut admin = Conn::connect(port);
    assert!(info_number(&mut admin, "stats", "io_threaded_writes_processed") > 0);
}
