//! Differential tests: the wire protocol (framing, inline commands,
//! pipelining, protocol errors and limits).

use crate::harness::{show, Conn, Pair};

/// Sends `bytes` to both servers on fresh connections and compares
/// everything received until each server closes the connection.
#[track_caller]
fn check_until_close(p: &Pair, bytes: &[u8]) -> Vec<u8> {
    let mut r = Conn::connect(p.redis_server.port);
    let mut h = Conn::connect(p.hozon_server.port);
    r.send_raw(bytes);
    h.send_raw(bytes);
    let (rr, hr) = (r.read_until_close(), h.read_until_close());
    assert_eq!(
        show(&rr),
        show(&hr),
        "input: {}",
        show(&bytes[..bytes.len().min(200)])
    );
    rr
}

/// Sends `bytes` to both and compares `replies` replies read back.
#[track_caller]
fn check_replies(p: &mut Pair, bytes: &[u8], replies: usize) {
    p.r.send_raw(bytes);
    p.h.send_raw(bytes);
    for i in 0..replies {
        let (rr, hr) = (p.r.read_reply(), p.h.read_reply());
        assert_eq!(
            show(&rr),
            show(&hr),
            "reply {i} to input {}",
            show(&bytes[..bytes.len().min(200)])
        );
    }
}

#[test]
fn ping_echo_and_unknown_command() {
    let mut p = Pair::new();
    p.script(
        "PING\n\
         PING hello\n\
         FOOBAR a b c\n\
         foobar\n\
         NOSUCH 0123456789012345678901234567890123456789012345678901234567890123456789 0123456789012345678901234567890123456789012345678901234567890123456789 x y\n",
    );
    let long = "x".repeat(300);
    p.check(&[long.as_str(), "a"]);
    p.check_bytes(&[b"foo\r\nbar", b"a\nb"]);
}

#[test]
fn inline_commands_and_quoting() {
    let mut p = Pair::new();
    check_replies(&mut p, b"PING\r\nPING\n", 2);
    check_replies(&mut p, b"SET a \"b c\\x41\\n\"\r\nGET a\r\n", 2);
    check_replies(&mut p, b"SET 'q' 'it\\'s'\r\nGET q\r\n", 2);
    // Empty lines are skipped; the following command still runs.
    check_replies(&mut p, b"\r\n\r\n   \r\nPING x\r\n", 1);
}

#[test]
fn pipelined_requests_reply_in_order() {
    let mut p = Pair::new();
    let mut batch = Vec::new();
    for i in 0..200 {
        batch.extend_from_slice(&crate::harness::encode_command(&[
            b"SET",
            format!("k{i}").as_bytes(),
            format!("{i}").as_bytes(),
        ]));
        batch.extend_from_slice(&crate::harness::encode_command(&[
            b"GET",
            format!("k{}", i / 2).as_bytes(),
        ]));
    }
    check_replies(&mut p, &batch, 400);
}

#[test]
fn request_dribbled_one_byte_at_a_time() {
    let p = Pair::new();
    let request =
        b"*3\r\n$3\r\nSET\r\n$3\r\nkey\r\n$5\r\nvalue\r\n*2\r\n$3\r\nGET\r\n$3\r\nkey\r\n";
    let mut r = Conn::connect(p.redis_server.port);
    let mut h = Conn::connect(p.hozon_server.port);
    for b in request {
        r.send_raw(&[*b]);
        h.send_raw(&[*b]);
    }
    for _ in 0..2 {
        assert_eq!(show(&r.read_reply()), show(&h.read_reply()));
    }
}

#[test]
fn empty_and_negative_multibulk_are_ignored() {
    let mut p = Pair::new();
    check_replies(&mut p, b"*0\r\n*-1\r\n*1\r\n$4\r\nPING\r\n", 1);
}

#[test]
fn protocol_errors_reply_and_close() {
    let p = Pair::new();
    for input in [
        &b"*abc\r\n"[..],
        b"*1\r\n+PING\r\n",
        b"*1\r\n:1\r\n",
        b"*1\r\n$-1\r\n",
        b"*1\r\n$abc\r\n",
        b"*1\r\n$536870913\r\n",
        b"*3000000000\r\n",
        b"SET \"unbalanced\r\n",
        b"SET 'a'b\r\n",
        b"PING\r\n*1\r\nx\r\n", // a good reply, then the error
    ] {
        check_until_close(&p, input);
    }
}

#[test]
fn oversized_inline_and_count_lines_are_refused() {
    let p = Pair::new();
    // More than 64 KiB without a newline: too big inline request.
    check_until_close(&p, &vec![b'a'; 70 * 1024]);
    // A count line longer than 64 KiB with no CR.
    let mut big_count = b"*".to_vec();
    big_count.extend(std::iter::repeat_n(b'1', 70 * 1024));
    check_until_close(&p, &big_count);
    let mut big_bulk_count = b"*1\r\n$".to_vec();
    big_bulk_count.extend(std::iter::repeat_n(b'1', 70 * 1024));
    check_until_close(&p, &big_bulk_count);
}

#[test]
fn declared_huge_request_allocates_only_what_arrives() {
    // A client announces the maximum sizes and sends a few bytes: both
    // servers keep waiting (no reply, connection open), and still answer
    // other clients.
    let mut p = Pair::new();
    let (mut r, mut h) = p.connect_more();
    r.send_raw(b"*2147483647\r\n$536870912\r\nabc");
    h.send_raw(b"*2147483647\r\n$536870912\r\nabc");
    p.check(&["PING"]);
    let rss_kb = hozon_rss_kb(&p);
    assert!(
        rss_kb < 200 * 1024,
        "hozon grew to {rss_kb} kB on a declared-but-unsent request"
    );
}

fn hozon_rss_kb(p: &Pair) -> u64 {
    let pid = p.hozon_server.pid();
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).expect("read /proc status");
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .expect("VmRSS line")
}

#[test]
fn unauthenticated_clients_get_small_limits() {
    let p = Pair::with_args(&["--requirepass", "secret"], &["--requirepass", "secret"]);
    check_until_close(&p, b"*11\r\n");
    check_until_close(&p, b"*2\r\n$16385\r\n");
    let mut r = Conn::connect(p.redis_server.port);
    let mut h = Conn::connect(p.hozon_server.port);
    for cmd in [
        &[&b"GET"[..], b"k"][..],
        &[b"AUTH", b"wrong"],
        &[b"AUTH", b"secret"],
        &[b"GET", b"k"],
    ] {
        assert_eq!(show(&r.call(cmd)), show(&h.call(cmd)));
    }
}

#[test]
fn binary_safe_keys_and_values() {
    let mut p = Pair::new();
    let key: Vec<u8> = (0u8..=255).collect();
    let value: Vec<u8> = (0u8..=255).rev().chain(b"\r\n\0".iter().copied()).collect();
    p.check_bytes(&[b"SET", &key, &value]);
    p.check_bytes(&[b"GET", &key]);
    p.check_bytes(&[b"SET", b"", b""]);
    p.check_bytes(&[b"GET", b""]);
}

#[test]
fn large_values_round_trip() {
    let mut p = Pair::new();
    let big = vec![b'z'; 3 * 1024 * 1024];
    p.check_bytes(&[b"SET", b"big", &big]);
    p.check_bytes(&[b"GET", b"big"]);
}
