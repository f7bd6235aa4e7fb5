//! The event loop keeps its properties under TLS: handshakes that stall or
//! carry garbage cost only their own connection, pipelined requests and
//! large values go through whole, and a TLS client that does not read its
//! replies is paused with its memory bounded while others are served.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

use testkit::certs::Certs;
use testkit::harness::{self, encode_command, Conn};

use super::{client_config, start_both, start_tls, Identity, TlsClient, TlsServer, Versions};
use crate::common::rss_kb;

/// The start of a TLS ClientHello record: a handshake record of 512
/// bytes of which only four follow.
const PARTIAL_HELLO: &[u8] = &[0x16, 0x03, 0x01, 0x02, 0x00, 0x01, 0x00, 0x01, 0xfc];

fn tls_client(certs: &Certs, server: &TlsServer) -> TlsClient {
    TlsClient::connect(
        server.tls_port,
        client_config(certs, Identity::Client, Versions::Both),
    )
    .unwrap_or_else(|e| panic!("{}: TLS client: {e}", server.name))
}

/// Whether the server closed `sock` within `within` (EOF or reset; bytes
/// it sends first, such as a TLS alert, are read past).
fn closed_within(sock: &mut TcpStream, within: Duration) -> bool {
    sock.set_read_timeout(Some(within)).expect("timeout");
    let mut chunk = [0u8; 4096];
    loop {
        match sock.read(&mut chunk) {
            Ok(0) => return true,
            Ok(_) => {}
            Err(e)
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                ) =>
            {
                return false
            }
            Err(_) => return true,
        }
    }
}

#[test]
fn stalled_and_garbage_handshakes_do_not_hold_up_other_clients_like_redis() {
    const STALLED: usize = 50;
    const GARBAGE: usize = 50;
    const PINGS: usize = 200;
    let certs = Certs::generate();
    let servers = start_both(&certs, &[]);
    for server in &servers {
        let mut probe = tls_client(&certs, server);
        let mut stalled: Vec<TcpStream> = (0..STALLED)
            .map(|_| {
                let mut s = TcpStream::connect(("127.0.0.1", server.tls_port)).expect("connect");
                s.write_all(PARTIAL_HELLO).expect("a partial hello");
                s
            })
            .collect();
        let mut garbage: Vec<TcpStream> = (0..GARBAGE)
            .map(|i| {
                let mut s = TcpStream::connect(("127.0.0.1", server.tls_port)).expect("connect");
                let junk: Vec<u8> = (0..1024u32).map(|b| (b * 7 + i as u32) as u8).collect();
                s.write_all(&junk).expect("garbage");
                s
            })
            .collect();
        // The probe is answered throughout, and new TLS clients complete
        // their handshakes while the stalled ones wait: a handshake that
        // blocked the loop would hang both.
        let mut slowest = Duration::ZERO;
        for i in 0..PINGS {
            let start = Instant::now();
            assert_eq!(probe.call(&[b"PING"]), b"+PONG\r\n", "{}", server.name);
            slowest = slowest.max(start.elapsed());
            if i % 50 == 0 {
                let mut late = tls_client(&certs, server);
                assert_eq!(late.call(&[b"ECHO", b"late"]), b"$4\r\nlate\r\n");
            }
        }
        for (i, sock) in garbage.iter_mut().enumerate() {
            assert!(
                closed_within(sock, Duration::from_secs(10)),
                "{}: garbage connection {i} was left open",
                server.name
            );
        }
        for sock in stalled.iter_mut().take(3) {
            assert!(
                !closed_within(sock, Duration::from_millis(200)),
                "{}: a stalled handshake was closed without a timeout",
                server.name
            );
        }
        // `timeout` closes the stalled ones as it closes idle clients.
        let mut control = Conn::connect(server.port());
        assert_eq!(
            control.call(&[b"CONFIG", b"SET", b"timeout", b"1"]),
            b"+OK\r\n"
        );
        for (i, sock) in stalled.iter_mut().enumerate() {
            assert!(
                closed_within(sock, Duration::from_secs(15)),
                "{}: stalled handshake {i} outlived timeout 1",
                server.name
            );
        }
        eprintln!(
            "{}: {PINGS} PINGs over TLS beside {STALLED} stalled and {GARBAGE} garbage handshakes, slowest {slowest:?}",
            server.name
        );
    }
}

#[test]
fn pipelined_requests_and_large_values_go_through_tls_whole_like_redis() {
    const REQUESTS: usize = 20_000;
    let certs = Certs::generate();
    let servers = start_both(&certs, &[]);
    let mut transcripts = Vec::new();
    for server in &servers {
        let mut client = tls_client(&certs, server);
        let mut batch = Vec::new();
        for i in 0..REQUESTS {
            batch.extend(encode_command(&[
                b"SET",
                format!("p:{i}").as_bytes(),
                format!("value-{i}").as_bytes(),
            ]));
        }
        for i in 0..REQUESTS {
            batch.extend(encode_command(&[b"GET", format!("p:{i}").as_bytes()]));
        }
        client.send(&batch);
        let mut transcript = Vec::new();
        for _ in 0..2 * REQUESTS {
            transcript.extend(client.read_reply());
        }
        // Values larger than a TLS record (16 KiB) and than rustls's
        // buffer, both ways.
        for size in [16 * 1024 + 1, 300 * 1024, 12 * 1024 * 1024] {
            let value: Vec<u8> = (0..size).map(|i| (i % 251) as u8).collect();
            assert_eq!(client.call(&[b"SET", b"big", &value]), b"+OK\r\n");
            let reply = client.call(&[b"GET", b"big"]);
            assert_eq!(
                harness::bulk_payload(&reply),
                value,
                "{}: {size} bytes",
                server.name
            );
            transcript.extend(format!("{size} ok\n").as_bytes());
        }
        transcripts.push(transcript);
    }
    assert!(
        transcripts[0] == transcripts[1],
        "the replies differ between redis-server and hozon-server"
    );
}

#[test]
fn the_end_of_a_reply_left_in_tls_buffers_goes_out_when_the_reader_comes_back_like_redis() {
    // A client with a small receive window asks for a reply and reads
    // nothing for a while: the server's socket fills and, for reply sizes
    // a little above what the socket holds, the last part waits encrypted
    // in rustls. It must go out once the client reads (the client stays
    // writable while rustls holds output). Sizes sweep up to MAX in steps
    // smaller than rustls's 64 KiB, so that some reply ends there whatever
    // the kernel's send buffer (about 4 MiB here: its autotuning limit).
    const STEP: usize = 56 * 1024;
    const MAX: usize = 8 * 1024 * 1024;
    let certs = Certs::generate();
    let servers = start_both(&certs, &[]);
    for server in &servers {
        let sock = super::connect_with_small_receive_buffer(server.tls_port, 4096);
        sock.set_read_timeout(Some(Duration::from_secs(5)))
            .expect("timeout");
        let config = client_config(&certs, Identity::Client, Versions::Both);
        let mut client = TlsClient::over(sock, config).expect("TLS over a small window");
        let value: Vec<u8> = (0..MAX).map(|i| (i % 253) as u8).collect();
        assert_eq!(client.call(&[b"SET", b"big", &value]), b"+OK\r\n");
        for size in (STEP..=MAX).step_by(STEP) {
            let end = (size - 1).to_string();
            client.send(&encode_command(&[
                b"GETRANGE",
                b"big",
                b"0",
                end.as_bytes(),
            ]));
            std::thread::sleep(Duration::from_millis(25));
            let reply = client
                .read_reply_paced(256 * 1024, Duration::ZERO)
                .unwrap_or_else(|e| panic!("{}: a {size}-byte reply: {e}", server.name));
            assert!(
                harness::bulk_payload(&reply) == value[..size],
                "{}: {size}",
                server.name
            );
        }
    }
}

#[test]
fn a_tls_client_that_does_not_read_is_paused_with_bounded_memory_while_others_are_served() {
    // As on plain TCP (tests/robustness/abusive.rs): hozon stops executing
    // a client's input while its output waits, so memory stays bounded
    // by the pause threshold, the socket buffers and rustls's 64 KiB.
    const GETS: usize = 400;
    let certs = Certs::generate();
    let server = start_tls(harness::hozon_server_path(), "hozon-server", &certs, &[]);
    let mut other = tls_client(&certs, &server);
    let value = vec![b'v'; 1024 * 1024];
    assert_eq!(other.call(&[b"SET", b"big", &value]), b"+OK\r\n");
    let rss_before = rss_kb(server.process.pid());
    let mut flooder = tls_client(&certs, &server);
    // 400 GETs are a few KiB of requests and 400 MiB of replies.
    flooder.send(&encode_command(&[b"GET", b"big"]).repeat(GETS));
    std::thread::sleep(Duration::from_millis(300));
    // Meanwhile the other client is served.
    for _ in 0..20 {
        assert_eq!(other.call(&[b"PING"]), b"+PONG\r\n");
    }
    let grown_kb = rss_kb(server.process.pid()).saturating_sub(rss_before);
    assert!(
        grown_kb < 64 * 1024,
        "hozon grew by {grown_kb} KiB for a TLS client with {GETS} unread 1 MiB replies"
    );
    // Then it reads, and every reply arrives whole.
    for i in 0..GETS {
        let reply = flooder.read_reply();
        assert_eq!(harness::bulk_payload(&reply), value, "reply {i}");
    }
    eprintln!("TLS flooder: {GETS} unread 1 MiB replies, RSS +{grown_kb} KiB");
}
