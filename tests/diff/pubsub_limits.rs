//! A subscriber that stops reading must not make the server's memory grow
//! without bound: past `client-output-buffer-limit pubsub` it is
//! disconnected, on both servers alike.

use std::time::{Duration, Instant};

use crate::harness::{Conn, Pair};

/// Publishes `count` messages of `size` bytes on `channel`, pipelined, and
/// returns the receiver counts the publisher saw.
fn flood(publisher: &mut Conn, channel: &str, count: usize, size: usize) -> Vec<Vec<u8>> {
    let payload = vec![b'x'; size];
    let mut replies = Vec::with_capacity(count);
    for _ in 0..count {
        replies.push(publisher.call(&[b"PUBLISH", channel.as_bytes(), &payload]));
    }
    replies
}

/// Waits until no subscriber of `channel` is left (PUBSUB NUMSUB).
fn subscriber_gone(conn: &mut Conn, channel: &str) -> bool {
    let deadline = Instant::now() + Duration::from_secs(10);
    let expected = format!("*2\r\n${}\r\n{channel}\r\n:0\r\n", channel.len()).into_bytes();
    while Instant::now() < deadline {
        if conn.call(&[b"PUBSUB", b"NUMSUB", channel.as_bytes()]) == expected {
            return true;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    false
}

/// Bytes read from `conn` until the server closes it.
fn drain_until_closed(conn: &mut Conn) -> usize {
    conn.read_until_close().len()
}

#[test]
fn output_buffer_limit_is_configured_like_redis() {
    let mut p = Pair::new();
    p.check(&["CONFIG", "GET", "client-output-buffer-limit"]);
    p.check(&[
        "CONFIG",
        "SET",
        "client-output-buffer-limit",
        "pubsub 1mb 256kb 30",
    ]);
    p.check(&["CONFIG", "GET", "client-output-buffer-limit"]);
    p.check(&[
        "CONFIG",
        "SET",
        "client-output-buffer-limit",
        "normal 0 0 0 replica 10mb 5mb 10",
    ]);
    p.check(&["CONFIG", "GET", "client-output-buffer-limit"]);
    for bad in [
        "pubsub 1mb 256kb",
        "nosuch 1 1 1",
        "pubsub x 1 1",
        "pubsub 1 1 -1",
    ] {
        p.check(&["CONFIG", "SET", "client-output-buffer-limit", bad]);
    }
}

#[test]
fn a_subscriber_that_stops_reading_is_disconnected_at_the_hard_limit() {
    let mut p = Pair::new();
    for conn in [&mut p.r, &mut p.h] {
        assert_eq!(
            conn.call(&[
                b"CONFIG",
                b"SET",
                b"client-output-buffer-limit",
                b"pubsub 1mb 0 0"
            ]),
            b"+OK\r\n"
        );
    }
    let (mut sub_r, mut sub_h) = p.connect_more();
    for sub in [&mut sub_r, &mut sub_h] {
        sub.call(&[b"SUBSCRIBE", b"firehose"]);
    }
    // 16 MiB of messages: far beyond the limit plus what the kernel's
    // socket buffers absorb for a reader that never reads.
    let (mut pub_r, mut pub_h) = p.connect_more();
    let counts_r = flood(&mut pub_r, "firehose", 256, 64 * 1024);
    let counts_h = flood(&mut pub_h, "firehose", 256, 64 * 1024);
    assert_eq!(
        counts_r[0], b":1\r\n",
        "redis: the subscriber got the first message"
    );
    assert_eq!(
        counts_h[0], b":1\r\n",
        "hozon: the subscriber got the first message"
    );
    assert_eq!(
        counts_r.last(),
        Some(&b":0\r\n".to_vec()),
        "redis: the subscriber was dropped"
    );
    assert_eq!(
        counts_h.last(),
        Some(&b":0\r\n".to_vec()),
        "hozon: the subscriber was dropped"
    );
    assert!(subscriber_gone(&mut pub_h, "firehose"));
    assert!(subscriber_gone(&mut pub_r, "firehose"));
    // The dropped subscriber received only part of the flood, then EOF.
    let received_h = drain_until_closed(&mut sub_h);
    assert!(
        received_h < 16 * 1024 * 1024,
        "hozon sent everything to a client over its limit ({received_h} bytes)"
    );
    // The server is fine and the publisher unaffected.
    p.check(&["PING"]);
}

#[test]
fn a_subscriber_over_the_soft_limit_for_too_long_is_disconnected() {
    let mut p = Pair::new();
    for conn in [&mut p.r, &mut p.h] {
        assert_eq!(
            conn.call(&[
                b"CONFIG",
                b"SET",
                b"client-output-buffer-limit",
                b"pubsub 0 256kb 1"
            ]),
            b"+OK\r\n"
        );
    }
    let (mut sub_r, mut sub_h) = p.connect_more();
    for sub in [&mut sub_r, &mut sub_h] {
        sub.call(&[b"SUBSCRIBE", b"slow"]);
    }
    let (mut pub_r, mut pub_h) = p.connect_more();
    // Enough to stay over the soft limit after the socket buffers fill.
    flood(&mut pub_r, "slow", 128, 64 * 1024);
    flood(&mut pub_h, "slow", 128, 64 * 1024);
    std::thread::sleep(Duration::from_millis(1500));
    // The limit is checked when output is added: one more message.
    flood(&mut pub_r, "slow", 1, 16);
    flood(&mut pub_h, "slow", 1, 16);
    assert!(
        subscriber_gone(&mut pub_r, "slow"),
        "redis kept the subscriber"
    );
    assert!(
        subscriber_gone(&mut pub_h, "slow"),
        "hozon kept the subscriber"
    );
}
