//! Differential tests for Pub/Sub: SUBSCRIBE / UNSUBSCRIBE / PSUBSCRIBE /
//! PUNSUBSCRIBE / SSUBSCRIBE / SUNSUBSCRIBE replies, message delivery and
//! order, PUBLISH / SPUBLISH counts, PUBSUB introspection, the RESP2
//! subscribed-mode rules and RESP3 push messages, checked against Redis 7.0.
//!
//! Redis iterates hash tables in a few places (UNSUBSCRIBE without
//! arguments, PUBSUB CHANNELS, one message per matching pattern); there the
//! order is unspecified and the tests compare the sets.

use std::time::{Duration, Instant};

use quickcheck::{Arbitrary, Gen, TestResult};

use crate::harness::{
    array_elements, encode_command, quickcheck_ops, show, with_thread_pair, Conn, Pair,
};

/// How long a message may take to arrive before a test gives up on it.
const ARRIVAL_TIMEOUT: Duration = Duration::from_secs(2);

/// An extra client: one connection to each server.
struct Client {
    r: Conn,
    h: Conn,
}

impl Client {
    fn new(p: &Pair) -> Client {
        let (r, h) = p.connect_more();
        Client { r, h }
    }

    fn resp3(&mut self) {
        self.r.call(&[b"HELLO", b"3"]);
        self.h.call(&[b"HELLO", b"3"]);
    }

    /// Sends a command to both servers without reading anything.
    fn send(&mut self, args: &[&str]) {
        let bytes = encode(args);
        self.r.send_raw(&bytes);
        self.h.send_raw(&bytes);
    }

    /// Sends a command and compares its single reply.
    #[track_caller]
    fn check(&mut self, args: &[&str]) -> Vec<u8> {
        self.check_n(args, 1).pop().expect("one reply")
    }

    /// Sends a command that produces `n` replies (SUBSCRIBE a b c gives
    /// three) and compares them in order.
    #[track_caller]
    fn check_n(&mut self, args: &[&str], n: usize) -> Vec<Vec<u8>> {
        self.send(args);
        self.expect_same(n, &args.join(" "))
    }

    /// Reads `n` frames from each side and compares them in order.
    #[track_caller]
    fn expect_same(&mut self, n: usize, what: &str) -> Vec<Vec<u8>> {
        let r = read_n(&mut self.r, n, "redis", what);
        let h = read_n(&mut self.h, n, "hozon", what);
        assert_frames_equal(&r, &h, what);
        r
    }

    /// Reads `n` frames from each side; the same frames in any order.
    #[track_caller]
    fn expect_same_unordered(&mut self, n: usize, what: &str) -> Vec<Vec<u8>> {
        let r = read_n(&mut self.r, n, "redis", what);
        let h = read_n(&mut self.h, n, "hozon", what);
        let (mut rs, mut hs) = (r.clone(), h.clone());
        rs.sort();
        hs.sort();
        assert_frames_equal(&rs, &hs, &format!("{what} (sorted)"));
        r
    }

    /// Reads whatever arrives before the reply to a PING fence, on each
    /// side (the fence itself is not returned).
    fn drain_until_fence(&mut self) -> (Vec<Vec<u8>>, Vec<Vec<u8>>) {
        (fence(&mut self.r), fence(&mut self.h))
    }
}

fn encode(args: &[&str]) -> Vec<u8> {
    let bytes: Vec<&[u8]> = args.iter().map(|a| a.as_bytes()).collect();
    encode_command(&bytes)
}

/// Reads exactly `n` frames, each within [`ARRIVAL_TIMEOUT`].
#[track_caller]
fn read_n(conn: &mut Conn, n: usize, side: &str, what: &str) -> Vec<Vec<u8>> {
    let mut out = Vec::with_capacity(n);
    while out.len() < n {
        match conn.try_read_reply(ARRIVAL_TIMEOUT) {
            Some(frame) => out.push(frame),
            None => panic!(
                "{side}: expected {n} frames after {what:?}, got {} in {ARRIVAL_TIMEOUT:?}: {:?}",
                out.len(),
                out.iter().map(|f| show(f)).collect::<Vec<_>>()
            ),
        }
    }
    out
}

const FENCE: &str = "fence-7f3a";

/// Sends `PING <FENCE>` and returns the frames that arrive before its reply
/// (the reply is a bulk string, or ["pong", FENCE] in RESP2 subscribed
/// mode: either way not a Pub/Sub message).
fn fence(conn: &mut Conn) -> Vec<Vec<u8>> {
    crate::harness::frames_before_fence(conn, FENCE, ARRIVAL_TIMEOUT)
}

#[track_caller]
fn assert_frames_equal(r: &[Vec<u8>], h: &[Vec<u8>], what: &str) {
    if r != h {
        panic!(
            "frames differ after {what:?}\n  redis: {:?}\n  hozon: {:?}",
            r.iter().map(|f| show(f)).collect::<Vec<_>>(),
            h.iter().map(|f| show(f)).collect::<Vec<_>>()
        );
    }
}

/// Elements of an array or push frame.
fn array_elements_any(frame: &[u8]) -> Vec<Vec<u8>> {
    if frame.first() == Some(&b'>') {
        let mut as_array = frame.to_vec();
        as_array[0] = b'*';
        array_elements(&as_array)
    } else {
        array_elements(frame)
    }
}

/// Whether the notifications of an argument-less UNSUBSCRIBE agree
/// (channels come in hash order): same frame types and kinds, same counts
/// in the same order, the same channels in any order.
fn mass_unsubscribe_agrees(r: &[Vec<u8>], h: &[Vec<u8>]) -> bool {
    type Note = (Vec<u8>, Vec<u8>, Vec<u8>);
    let parse = |frames: &[Vec<u8>]| -> Option<Vec<Note>> {
        frames
            .iter()
            .map(|f| {
                let e = array_elements_any(f);
                (e.len() == 3).then(|| (e[0].clone(), e[1].clone(), e[2].clone()))
            })
            .collect()
    };
    let (Some(rn), Some(hn)) = (parse(r), parse(h)) else {
        return false;
    };
    let shape = |n: &[Note]| -> Vec<(Vec<u8>, Vec<u8>)> {
        n.iter().map(|(k, _, c)| (k.clone(), c.clone())).collect()
    };
    let channels = |n: &[Note]| -> Vec<Vec<u8>> {
        let mut c: Vec<Vec<u8>> = n.iter().map(|(_, ch, _)| ch.clone()).collect();
        c.sort();
        c
    };
    let types = |f: &[Vec<u8>]| -> Vec<u8> { f.iter().map(|x| x[0]).collect() };
    r.len() == h.len()
        && types(r) == types(h)
        && shape(&rn) == shape(&hn)
        && channels(&rn) == channels(&hn)
}

#[track_caller]
fn assert_same_mass_unsubscribe(r: &[Vec<u8>], h: &[Vec<u8>], what: &str) {
    if !mass_unsubscribe_agrees(r, h) {
        panic!(
            "mass unsubscribe notifications differ after {what:?}\n  redis: {:?}\n  hozon: {:?}",
            r.iter().map(|f| show(f)).collect::<Vec<_>>(),
            h.iter().map(|f| show(f)).collect::<Vec<_>>()
        );
    }
}

/// Sends a mass (argument-less) unsubscribe command and compares its `n`
/// notifications as [`assert_same_mass_unsubscribe`] does.
#[track_caller]
fn check_mass_unsubscribe(c: &mut Client, command: &str, n: usize) {
    c.send(&[command]);
    let r = read_n(&mut c.r, n, "redis", command);
    let h = read_n(&mut c.h, n, "hozon", command);
    assert_same_mass_unsubscribe(&r, &h, command);
}

/// Asserts what Redis answered, so a test verifies its own premise.
#[track_caller]
fn assert_redis(frames: &[Vec<u8>], expected: &[&str]) {
    let got: Vec<String> = frames.iter().map(|f| show(f)).collect();
    let want: Vec<String> = expected.iter().map(|e| show(e.as_bytes())).collect();
    assert_eq!(got, want, "Redis itself answered unexpectedly");
}

fn both_protocols(mut test: impl FnMut(bool)) {
    test(false);
    test(true);
}

// ---------------------------------------------------------------------------
// Subscription replies.

#[test]
fn subscribe_and_unsubscribe_replies() {
    both_protocols(|resp3| {
        let p = Pair::new();
        let mut a = Client::new(&p);
        if resp3 {
            a.resp3();
        }
        let first = a.check_n(&["SUBSCRIBE", "chan1", "chan2", "chan3"], 3);
        if !resp3 {
            assert_redis(
                &first[..1],
                &["*3\r\n$9\r\nsubscribe\r\n$5\r\nchan1\r\n:1\r\n"],
            );
        }
        // Subscribing again: the count does not change; duplicates too.
        a.check_n(&["SUBSCRIBE", "chan1", "chan1", "chan4"], 3);
        a.check_n(&["UNSUBSCRIBE", "chan2"], 1);
        // Not subscribed: still one notification per argument.
        a.check_n(&["UNSUBSCRIBE", "nope", "chan2", "chan1"], 3);
        a.check_n(&["PSUBSCRIBE", "p.*", "q.*", "p.*"], 3);
        a.check_n(&["PUNSUBSCRIBE", "q.*", "zz*"], 2);
        // The channel count includes patterns and vice versa.
        a.check_n(&["UNSUBSCRIBE", "chan3"], 1);
        check_mass_unsubscribe(&mut a, "UNSUBSCRIBE", 1);
        a.check_n(&["SUBSCRIBE", "x", "y", "z"], 3);
        a.check_n(&["PSUBSCRIBE", "r*"], 1);
        // Patterns are kept in subscription order: deterministic.
        a.check_n(&["PUNSUBSCRIBE"], 2);
        check_mass_unsubscribe(&mut a, "UNSUBSCRIBE", 3);
        // Nothing left: one notification with a null channel and 0.
        let nothing = a.check_n(&["UNSUBSCRIBE"], 1);
        a.check_n(&["PUNSUBSCRIBE"], 1);
        a.check_n(&["SUNSUBSCRIBE"], 1);
        let expected = if resp3 {
            ">3\r\n$11\r\nunsubscribe\r\n_\r\n:0\r\n"
        } else {
            "*3\r\n$11\r\nunsubscribe\r\n$-1\r\n:0\r\n"
        };
        assert_redis(&nothing, &[expected]);
        // From a client that never subscribed, in the same way.
        let mut b = Client::new(&p);
        if resp3 {
            b.resp3();
        }
        b.check_n(&["UNSUBSCRIBE", "foo", "bar", "quux"], 3);
        b.check_n(&["PUNSUBSCRIBE", "foo.*", "bar.*"], 2);
        b.check(&["UNSUBSCRIBE"]);
        b.check(&["PUNSUBSCRIBE"]);
        // Back to normal mode: ordinary commands work.
        a.check(&["SET", "k", "v"]);
        a.check(&["PING"]);
    });
}

#[test]
fn subscribe_command_arity_errors() {
    let mut p = Pair::new();
    p.script(
        "SUBSCRIBE\n\
         PSUBSCRIBE\n\
         SSUBSCRIBE\n\
         PUBLISH\n\
         PUBLISH ch\n\
         PUBLISH ch a b\n\
         SPUBLISH ch\n\
         PUBLISH ch msg\n\
         SPUBLISH ch msg\n",
    );
}

// ---------------------------------------------------------------------------
// Delivery.

#[test]
fn publish_delivers_messages_and_returns_receiver_counts() {
    both_protocols(|resp3| {
        let mut p = Pair::new();
        let mut a = Client::new(&p);
        if resp3 {
            a.resp3();
        }
        a.check_n(&["SUBSCRIBE", "chan1", "chan2"], 2);
        p.check(&["PUBLISH", "chan1", "hello"]);
        p.check(&["PUBLISH", "chan2", "world"]);
        let got = a.expect_same(2, "two PUBLISH");
        if !resp3 {
            assert_redis(
                &got[..1],
                &["*3\r\n$7\r\nmessage\r\n$5\r\nchan1\r\n$5\r\nhello\r\n"],
            );
        }
        a.check_n(&["UNSUBSCRIBE", "chan1"], 1);
        p.check(&["PUBLISH", "chan1", "hello"]);
        p.check(&["PUBLISH", "chan2", "world"]);
        a.expect_same(1, "PUBLISH after UNSUBSCRIBE chan1");
        a.check_n(&["UNSUBSCRIBE", "chan2"], 1);
        p.check(&["PUBLISH", "chan1", "hello"]);
        p.check(&["PUBLISH", "chan2", "world"]);
        let (r, h) = a.drain_until_fence();
        assert_frames_equal(&r, &h, "PUBLISH with no subscribers");
        assert!(r.is_empty(), "{r:?}");
        // Binary-safe channel and message, the empty channel, a large message.
        a.check_n(&["SUBSCRIBE", "", "bin\u{0}\r\nch"], 2);
        p.check(&["PUBLISH", "", ""]);
        p.check_bytes(&[b"PUBLISH", b"bin\x00\r\nch", b"\xff\x00\r\n"]);
        let big = "x".repeat(100_000);
        p.check(&["PUBLISH", "", &big]);
        a.expect_same(3, "binary and large messages");
    });
}

#[test]
fn every_subscriber_receives_and_is_counted() {
    let mut p = Pair::new();
    let mut a = Client::new(&p);
    let mut b = Client::new(&p);
    a.check(&["SUBSCRIBE", "chan1"]);
    b.check(&["SUBSCRIBE", "chan1"]);
    p.check(&["PUBLISH", "chan1", "hello"]);
    a.expect_same(1, "PUBLISH chan1 (first subscriber)");
    b.expect_same(1, "PUBLISH chan1 (second subscriber)");
    a.check(&["PSUBSCRIBE", "chan.*"]);
    b.check(&["PSUBSCRIBE", "chan.*"]);
    p.check(&["PUBLISH", "chan.foo", "hello"]);
    a.expect_same(1, "PUBLISH chan.foo (first)");
    b.expect_same(1, "PUBLISH chan.foo (second)");
    // A client closing its connection stops counting.
    drop(b);
    wait_for_same(
        &mut p,
        &["PUBSUB", "NUMSUB", "chan1"],
        "*2\r\n$5\r\nchan1\r\n:1\r\n",
    );
    p.check(&["PUBLISH", "chan1", "hello"]);
    p.check(&["PUBLISH", "chan.foo", "hello"]);
    p.check(&["PUBSUB", "NUMPAT"]);
    a.expect_same(2, "PUBLISH after the other subscriber left");
}

/// Polls `args` on both servers until both answer `expected` (a closed
/// connection is noticed by the server asynchronously).
#[track_caller]
fn wait_for_same(p: &mut Pair, args: &[&str], expected: &str) {
    let deadline = Instant::now() + ARRIVAL_TIMEOUT;
    loop {
        let (r, h) = p.both(args);
        if r == expected.as_bytes() && h == expected.as_bytes() {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "{args:?} never became {}: redis {}, hozon {}",
            show(expected.as_bytes()),
            show(&r),
            show(&h)
        );
        std::thread::sleep(Duration::from_millis(5));
    }
}

#[test]
fn many_subscribers_of_one_channel() {
    let mut p = Pair::new();
    let mut subscribers: Vec<Client> = (0..40).map(|_| Client::new(&p)).collect();
    for (i, s) in subscribers.iter_mut().enumerate() {
        if i % 2 == 1 {
            s.resp3();
        }
        if i % 3 == 0 {
            s.check(&["PSUBSCRIBE", "fan*"]);
        } else {
            s.check(&["SUBSCRIBE", "fanout"]);
        }
    }
    let count = p.check(&["PUBLISH", "fanout", "to-all"]);
    assert_redis(&[count], &[":40\r\n"]);
    p.check(&["PUBSUB", "NUMSUB", "fanout"]);
    for (i, s) in subscribers.iter_mut().enumerate() {
        s.expect_same(1, &format!("fan-out message to subscriber {i}"));
    }
}

#[test]
fn pattern_subscriptions_match_globs() {
    both_protocols(|resp3| {
        let mut p = Pair::new();
        let mut a = Client::new(&p);
        if resp3 {
            a.resp3();
        }
        a.check_n(&["PSUBSCRIBE", "foo.*", "bar.*"], 2);
        p.script(
            "PUBLISH foo.1 hello\n\
             PUBLISH bar.1 hello\n\
             PUBLISH foo1 hello\n\
             PUBLISH barfoo.1 hello\n\
             PUBLISH qux.1 hello\n",
        );
        let got = a.expect_same(2, "PUBLISH to patterns");
        if !resp3 {
            assert_redis(
                &got[..1],
                &["*4\r\n$8\r\npmessage\r\n$5\r\nfoo.*\r\n$5\r\nfoo.1\r\n$5\r\nhello\r\n"],
            );
        }
        a.check(&["PUNSUBSCRIBE", "foo.*"]);
        p.check(&["PUBLISH", "foo.1", "hello"]);
        p.check(&["PUBLISH", "bar.1", "hello"]);
        a.expect_same(1, "after PUNSUBSCRIBE foo.*");
        a.check(&["PUNSUBSCRIBE", "bar.*"]);
        // Glob features, one pattern per client so the order is fixed.
        let globs = [
            ("h?llo", &["hello", "hallo", "hllo", "heello"][..]),
            ("h[ae]llo", &["hello", "hallo", "hillo"][..]),
            ("h[^e]llo", &["hello", "hallo"][..]),
            ("h[a-b]llo", &["hallo", "hbllo", "hcllo"][..]),
            ("h\\*llo", &["h*llo", "hello"][..]),
            ("*", &["anything", ""][..]),
            ("", &["", "x"][..]),
            ("[", &["[", "x"][..]),
        ];
        for (glob, channels) in globs {
            a.check(&["PSUBSCRIBE", glob]);
            for ch in channels {
                p.check(&["PUBLISH", ch, "m"]);
            }
            let (r, h) = a.drain_until_fence();
            assert_frames_equal(&r, &h, &format!("publishing to glob {glob:?}"));
            a.check(&["PUNSUBSCRIBE", glob]);
        }
    });
}

#[test]
fn channel_subscriber_is_served_before_pattern_subscriber() {
    both_protocols(|resp3| {
        let mut p = Pair::new();
        let mut a = Client::new(&p);
        if resp3 {
            a.resp3();
        }
        a.check(&["PSUBSCRIBE", "foo.*"]);
        a.check(&["SUBSCRIBE", "foo.bar"]);
        let count = p.check(&["PUBLISH", "foo.bar", "hello"]);
        assert_eq!(show(&count), ":2\\r\\n");
        let got = a.expect_same(2, "PUBLISH to a channel and a pattern");
        assert!(
            got[0].windows(7).any(|w| w == b"message") && !got[0].starts_with(b"*4"),
            "Redis sends the channel message first"
        );
    });
}

#[test]
fn several_matching_patterns_each_deliver_once() {
    both_protocols(|resp3| {
        let mut p = Pair::new();
        let mut a = Client::new(&p);
        if resp3 {
            a.resp3();
        }
        a.check_n(&["PSUBSCRIBE", "*", "n*", "news.*", "*.x", "other"], 5);
        a.check(&["SUBSCRIBE", "news.x"]);
        p.check(&["PUBLISH", "news.x", "m1"]);
        // The channel message first, then one per pattern in hash order.
        let r = read_n(&mut a.r, 5, "redis", "PUBLISH news.x");
        let h = read_n(&mut a.h, 5, "hozon", "PUBLISH news.x");
        assert_frames_equal(&r[..1], &h[..1], "the channel message comes first");
        let (mut rs, mut hs) = (r[1..].to_vec(), h[1..].to_vec());
        rs.sort();
        hs.sort();
        assert_frames_equal(&rs, &hs, "pattern messages (sorted)");
        p.check(&["PUBLISH", "nope", "m2"]);
        a.expect_same_unordered(2, "PUBLISH nope");
    });
}

#[test]
fn many_pipelined_messages_arrive_in_order() {
    both_protocols(|resp3| {
        let mut p = Pair::new();
        let mut a = Client::new(&p);
        if resp3 {
            a.resp3();
        }
        // The subscriber pipelines its own commands too.
        let mut batch = Vec::new();
        for args in [
            &["SUBSCRIBE", "c1", "c2"][..],
            &["PING"][..],
            &["PSUBSCRIBE", "c*"][..],
            &["PING", "x"][..],
            &["UNSUBSCRIBE", "c2"][..],
        ] {
            batch.extend(encode(args));
        }
        a.r.send_raw(&batch);
        a.h.send_raw(&batch);
        a.expect_same(6, "a pipelined subscription batch");
        // The publisher pipelines many messages.
        let mut batch = Vec::new();
        for i in 0..300 {
            let channel = if i % 3 == 0 { "c2" } else { "c1" };
            batch.extend(encode(&["PUBLISH", channel, &format!("message-{i}")]));
        }
        p.r.send_raw(&batch);
        p.h.send_raw(&batch);
        for i in 0..300 {
            let (r, h) = (p.r.read_reply(), p.h.read_reply());
            assert_frames_equal(&[r], &[h], &format!("pipelined PUBLISH #{i}"));
        }
        // 200 to c1 (message + pmessage each) and 100 to c2 (pmessage).
        let got = a.expect_same(500, "300 pipelined PUBLISH");
        assert!(got[0].windows(9).any(|w| w == b"message-0"));
        assert!(got[499].windows(11).any(|w| w == b"message-299"));
    });
}

// ---------------------------------------------------------------------------
// Introspection.

#[test]
fn pubsub_channels_numsub_numpat() {
    let mut p = Pair::new();
    let mut a = Client::new(&p);
    let mut b = Client::new(&p);
    p.script(
        "PUBSUB CHANNELS\n\
         PUBSUB NUMSUB\n\
         PUBSUB NUMSUB abc def\n\
         PUBSUB NUMPAT\n",
    );
    a.check_n(&["SUBSCRIBE", "news.tech", "news.art", "sport", ""], 4);
    b.check_n(&["SUBSCRIBE", "news.tech", "weather"], 2);
    a.check_n(&["PSUBSCRIBE", "foo*", "bar*"], 2);
    b.check_n(&["PSUBSCRIBE", "foo*", "baz*"], 2);
    p.script(
        "~PUBSUB CHANNELS\n\
         ~PUBSUB CHANNELS news.*\n\
         ~PUBSUB CHANNELS *t*\n\
         PUBSUB CHANNELS nomatch*\n\
         ~pubsub channels *\n\
         PUBSUB NUMSUB news.tech weather nope news.tech \"\"\n\
         PUBSUB NUMSUB foo*\n\
         PUBSUB NUMPAT\n",
    );
    // Unsubscribing removes channels nobody listens to any more.
    a.check(&["UNSUBSCRIBE", "news.tech"]);
    b.check_n(&["UNSUBSCRIBE", "weather", "news.tech"], 2);
    b.check_n(&["PUNSUBSCRIBE", "foo*"], 1);
    p.script(
        "~PUBSUB CHANNELS\n\
         PUBSUB NUMSUB news.tech weather sport\n\
         PUBSUB NUMPAT\n",
    );
    check_mass_unsubscribe(&mut a, "UNSUBSCRIBE", 3);
    a.check_n(&["PUNSUBSCRIBE"], 2);
    p.script(
        "PUBSUB CHANNELS\n\
         PUBSUB NUMPAT\n",
    );
    // In RESP3 the replies keep their types (arrays and integers).
    p.resp3();
    a.check(&["SUBSCRIBE", "x"]);
    p.script(
        "PUBSUB CHANNELS\n\
         PUBSUB NUMSUB x y\n\
         PUBSUB NUMPAT\n",
    );
}

/// The Pub/Sub lines of `INFO stats`.
fn info_pubsub_lines(info: &[u8]) -> Vec<String> {
    String::from_utf8_lossy(info)
        .lines()
        .filter(|l| l.starts_with("pubsub"))
        .map(String::from)
        .collect()
}

#[test]
fn info_stats_counts_channels_and_patterns() {
    let mut p = Pair::new();
    let mut a = Client::new(&p);
    let mut b = Client::new(&p);
    let compare = |p: &mut Pair, stage: &str| {
        let (r, h) = p.both(&["INFO", "stats"]);
        let (r, h) = (info_pubsub_lines(&r), info_pubsub_lines(&h));
        assert_eq!(
            r, h,
            "INFO stats Pub/Sub lines {stage} (left redis, right hozon)"
        );
        assert_eq!(r.len(), 3, "{r:?}");
    };
    compare(&mut p, "with no subscriptions");
    a.check_n(&["SUBSCRIBE", "a", "b"], 2);
    b.check_n(&["SUBSCRIBE", "b", "c"], 2);
    a.check_n(&["PSUBSCRIBE", "x*", "y*"], 2);
    b.check(&["PSUBSCRIBE", "x*"]);
    a.check(&["SSUBSCRIBE", "s"]);
    compare(&mut p, "with channels, patterns and a shard channel");
    a.check(&["RESET"]);
    compare(&mut p, "after one client's RESET");
    drop(b);
    wait_for_same(&mut p, &["PUBSUB", "NUMPAT"], ":0\r\n");
    compare(&mut p, "after the other client left");
}

#[test]
fn channels_are_case_sensitive_and_shared_by_all_databases() {
    both_protocols(|resp3| {
        let mut p = Pair::new();
        let mut a = Client::new(&p);
        if resp3 {
            a.resp3();
            a.check(&["SELECT", "3"]);
        }
        a.check(&["SUBSCRIBE", "Chan"]);
        a.check(&["PSUBSCRIBE", "P*"]);
        p.script(
            "PUBLISH chan lower\n\
             PUBLISH CHAN upper\n\
             PUBLISH pattern lower\n\
             SELECT 5\n\
             PUBLISH Chan from-db-5\n\
             PUBLISH Pattern from-db-5\n\
             PUBSUB NUMSUB Chan chan\n",
        );
        a.expect_same(2, "messages published from another database");
        a.check(&["UNSUBSCRIBE", "chan"]);
        a.check(&["PUNSUBSCRIBE", "p*"]);
        p.check(&["PUBLISH", "Chan", "still"]);
        a.expect_same(1, "after unsubscribing other-case names");
    });
}

#[test]
fn pubsub_help_and_errors() {
    let mut p = Pair::new();
    p.script(
        "PUBSUB HELP\n\
         pubsub help\n\
         PUBSUB\n\
         PUBSUB FOO\n\
         PUBSUB foo bar\n\
         PUBSUB HELP extra\n\
         PUBSUB NUMPAT extra\n\
         PUBSUB CHANNELS a b\n\
         PUBSUB channels a b c\n\
         PUBSUB SHARDCHANNELS a b\n",
    );
    p.resp3();
    p.script("PUBSUB HELP\nPUBSUB FOO\nPUBSUB CHANNELS a b\n");
}

#[test]
fn client_list_shows_subscription_counts() {
    let p = Pair::new();
    let mut a = Client::new(&p);
    let mut observer = Client::new(&p);
    let rid = String::from_utf8_lossy(&a.r.call(&[b"CLIENT", b"ID"]))
        .trim_start_matches(':')
        .trim()
        .to_string();
    let hid = String::from_utf8_lossy(&a.h.call(&[b"CLIENT", b"ID"]))
        .trim_start_matches(':')
        .trim()
        .to_string();
    let compare = |observer: &mut Client, stage: &str| {
        let r = observer.r.call(&[b"CLIENT", b"LIST"]);
        let h = observer.h.call(&[b"CLIENT", b"LIST"]);
        assert_eq!(
            client_fields(&r, &rid),
            client_fields(&h, &hid),
            "CLIENT LIST fields {stage} (left redis, right hozon)"
        );
    };
    compare(&mut observer, "before subscribing");
    a.check_n(&["SUBSCRIBE", "a", "b"], 2);
    compare(&mut observer, "with two channels");
    a.check(&["PSUBSCRIBE", "p*"]);
    a.check(&["SSUBSCRIBE", "s"]);
    compare(
        &mut observer,
        "with channels, a pattern and a shard channel",
    );
    check_mass_unsubscribe(&mut a, "UNSUBSCRIBE", 2);
    a.check(&["PUNSUBSCRIBE"]);
    compare(&mut observer, "with only a shard channel left");
    a.check(&["SUNSUBSCRIBE"]);
    compare(&mut observer, "after unsubscribing from everything");
}

/// The number of clients a `CLIENT LIST` reply lists.
fn listed_clients(reply: &[u8]) -> usize {
    String::from_utf8_lossy(reply)
        .split(['\n', '\r'])
        .filter(|l| l.trim_start_matches("txt:").starts_with("id="))
        .count()
}

#[test]
fn client_type_pubsub_selects_subscribed_clients() {
    let mut p = Pair::new();
    let mut a = Client::new(&p);
    let mut b = Client::new(&p);
    let mut c = Client::new(&p);
    c.resp3();
    a.check(&["SUBSCRIBE", "x"]);
    b.check(&["PSUBSCRIBE", "y*"]);
    c.check(&["SSUBSCRIBE", "z"]);
    for kind in ["pubsub", "normal"] {
        let (r, h) = p.both(&["CLIENT", "LIST", "TYPE", kind]);
        assert_eq!(
            listed_clients(&r),
            listed_clients(&h),
            "CLIENT LIST TYPE {kind}\n  redis: {}\n  hozon: {}",
            show(&r),
            show(&h)
        );
    }
    let killed = p.check(&["CLIENT", "KILL", "TYPE", "pubsub"]);
    assert_redis(&[killed], &[":3\r\n"]);
    for client in [&mut a, &mut b, &mut c] {
        let (r, h) = (client.r.read_until_close(), client.h.read_until_close());
        assert_frames_equal(&[r], &[h], "a killed subscriber's connection");
    }
    wait_for_same(&mut p, &["PUBSUB", "NUMPAT"], ":0\r\n");
    p.script(
        "PUBLISH x m\n\
         SPUBLISH z m\n\
         CLIENT KILL TYPE pubsub\n",
    );
}

/// The fields of `CLIENT LIST` that describe Pub/Sub state, for client `id`.
fn client_fields(list_reply: &[u8], id: &str) -> Vec<String> {
    let text = String::from_utf8_lossy(list_reply);
    let line = text
        .split(['\n', '\r'])
        .map(|l| l.trim_start_matches("txt:"))
        .find(|l| l.split(' ').any(|f| f == format!("id={id}")))
        .unwrap_or_else(|| panic!("no client id={id} in {}", show(list_reply)));
    const WANTED: &[&str] = &["flags", "sub", "psub", "ssub", "multi", "cmd"];
    line.split(' ')
        .filter(|f| WANTED.iter().any(|w| f.starts_with(&format!("{w}="))))
        .map(String::from)
        .collect()
}

// ---------------------------------------------------------------------------
// Subscribed mode.

#[test]
fn resp2_subscribed_mode_allows_only_subscription_commands() {
    let p = Pair::new();
    let mut a = Client::new(&p);
    a.check(&["SUBSCRIBE", "somechannel"]);
    // PING answers ["pong", ""] or ["pong", arg].
    let ping = a.check(&["PING"]);
    assert_redis(&[ping], &["*2\r\n$4\r\npong\r\n$0\r\n\r\n"]);
    a.check(&["PING", "foo"]);
    a.check(&["ping", ""]);
    let refused = a.check(&["GET", "x"]);
    assert_redis(
        &[refused],
        &["-ERR Can't execute 'get': only (P|S)SUBSCRIBE / (P|S)UNSUBSCRIBE / PING / QUIT / RESET are allowed in this context\r\n"],
    );
    for cmd in [
        &["set", "x", "1"][..],
        &["PUBLISH", "somechannel", "m"][..],
        &["ECHO", "x"][..],
        &["SELECT", "1"][..],
        &["HELLO", "3"][..],
        &["CLIENT", "LIST"][..],
        &["client", "id"][..],
        &["PUBSUB", "NUMSUB", "somechannel"][..],
        &["PUBSUB", "NOPE"][..],
        &["MULTI"][..],
        &["INFO", "server"][..],
    ] {
        a.check(cmd);
    }
    // Arity and unknown-command errors come first.
    a.check(&["GET"]);
    a.check(&["PING", "a", "b"]);
    a.check(&["NOSUCHCOMMAND", "x"]);
    a.check(&["CLIENT", "NOSUCHSUB"]);
    // The subscription commands all work.
    a.check_n(&["SUBSCRIBE", "a", "b"], 2);
    a.check(&["PSUBSCRIBE", "p*"]);
    a.check(&["SSUBSCRIBE", "s"]);
    a.check(&["SUNSUBSCRIBE", "s"]);
    a.check(&["PUNSUBSCRIBE", "p*"]);
    a.check_n(&["UNSUBSCRIBE", "a", "b"], 2);
    // Still subscribed to somechannel.
    a.check(&["GET", "x"]);
    a.check(&["UNSUBSCRIBE", "somechannel"]);
    // Out of subscribed mode: PONG again.
    let pong = a.check(&["PING"]);
    assert_redis(&[pong], &["+PONG\r\n"]);
    a.check(&["GET", "x"]);
    // A shard subscription alone keeps the client in subscribed mode.
    a.check(&["SSUBSCRIBE", "s"]);
    a.check(&["UNSUBSCRIBE"]);
    a.check(&["PUNSUBSCRIBE"]);
    a.check(&["GET", "x"]);
    a.check(&["SUNSUBSCRIBE"]);
    a.check(&["GET", "x"]);
    // A pattern alone too.
    a.check(&["PSUBSCRIBE", "p*"]);
    a.check(&["GET", "x"]);
    a.check(&["UNSUBSCRIBE"]);
    a.check(&["GET", "x"]);
}

#[test]
fn quit_while_subscribed_closes_the_connection() {
    let mut p = Pair::new();
    let mut a = Client::new(&p);
    a.check(&["SUBSCRIBE", "ch"]);
    a.check(&["QUIT"]);
    let (r, h) = (a.r.read_until_close(), a.h.read_until_close());
    assert_frames_equal(&[r], &[h], "after QUIT");
    wait_for_same(&mut p, &["PUBLISH", "ch", "m"], ":0\r\n");
}

#[test]
fn reset_leaves_subscribed_mode() {
    both_protocols(|resp3| {
        let mut p = Pair::new();
        let mut a = Client::new(&p);
        if resp3 {
            a.resp3();
        }
        a.check_n(&["SUBSCRIBE", "c1", "c2"], 2);
        a.check(&["PSUBSCRIBE", "c*"]);
        a.check(&["SSUBSCRIBE", "s1"]);
        let reset = a.check(&["RESET"]);
        assert_redis(&[reset], &["+RESET\r\n"]);
        p.script(
            "PUBLISH c1 m\n\
             SPUBLISH s1 m\n\
             PUBSUB NUMSUB c1 c2\n\
             PUBSUB NUMPAT\n\
             PUBSUB CHANNELS\n\
             PUBSUB SHARDCHANNELS\n",
        );
        // RESET also returns to RESP2 and normal mode.
        a.check(&["GET", "x"]);
        a.check(&["PING"]);
        a.check(&["UNSUBSCRIBE"]);
        let (r, h) = a.drain_until_fence();
        assert_frames_equal(&r, &h, "after RESET (nothing pending)");
    });
}

#[test]
fn resp3_pushes_and_normal_commands_while_subscribed() {
    let mut p = Pair::new();
    let mut a = Client::new(&p);
    a.resp3();
    let sub = a.check(&["SUBSCRIBE", "ch"]);
    assert_redis(&[sub], &[">3\r\n$9\r\nsubscribe\r\n$2\r\nch\r\n:1\r\n"]);
    a.check(&["PSUBSCRIBE", "c*"]);
    // Normal commands work while subscribed.
    a.check(&["SET", "k", "v"]);
    a.check(&["GET", "k"]);
    a.check(&["HSET", "h", "f", "v"]);
    a.check(&["HGETALL", "h"]);
    let pong = a.check(&["PING"]);
    assert_redis(&[pong], &["+PONG\r\n"]);
    a.check(&["PING", "x"]);
    a.check(&["ECHO", "x"]);
    a.check(&["PUBSUB", "NUMSUB", "ch"]);
    // A message from another client arrives (as a push) before the reply
    // to the subscriber's next command.
    p.check(&["PUBLISH", "ch", "from-other"]);
    let got = a.check_n(&["GET", "k"], 3);
    assert_redis(
        &got[..1],
        &[">3\r\n$7\r\nmessage\r\n$2\r\nch\r\n$10\r\nfrom-other\r\n"],
    );
    // Publishing to its own channel: the pushes come before the count.
    let own = a.check_n(&["PUBLISH", "ch", "self"], 3);
    assert_redis(
        &own,
        &[
            ">3\r\n$7\r\nmessage\r\n$2\r\nch\r\n$4\r\nself\r\n",
            ">4\r\n$8\r\npmessage\r\n$2\r\nc*\r\n$2\r\nch\r\n$4\r\nself\r\n",
            ":2\r\n",
        ],
    );
    // A publish to a channel it is not subscribed to: just the count.
    a.check(&["PUBLISH", "other", "x"]);
    // Inside a transaction.
    a.check(&["MULTI"]);
    a.check(&["PUBLISH", "ch", "in-multi"]);
    a.check(&["GET", "k"]);
    // Redis delivers the pushes as the PUBLISH runs, so they sit inside
    // the EXEC array (legal in RESP3: pushes may come anywhere).
    a.send(&["EXEC"]);
    let (r, h) = a.drain_until_fence();
    assert_frames_equal(&r, &h, "EXEC of a transaction publishing to itself");
    a.check_n(&["UNSUBSCRIBE", "ch"], 1);
    a.check_n(&["PUNSUBSCRIBE"], 1);
    a.check(&["GET", "k"]);
}

#[test]
fn switching_protocol_while_subscribed() {
    let p = Pair::new();
    let mut a = Client::new(&p);
    a.resp3();
    a.check(&["SUBSCRIBE", "ch"]);
    // RESP3 allows HELLO while subscribed; back in RESP2 the rules apply.
    let (r, h) = (a.r.call(&[b"HELLO", b"2"]), a.h.call(&[b"HELLO", b"2"]));
    assert_eq!(
        r.first(),
        h.first(),
        "HELLO 2: {} vs {}",
        show(&r),
        show(&h)
    );
    a.check(&["GET", "x"]);
    a.check(&["PING"]);
    a.check(&["HELLO", "3"]);
    a.check(&["UNSUBSCRIBE"]);
    a.check(&["PING"]);
}

#[test]
fn notifications_and_messages_ignore_client_reply_off() {
    both_protocols(|resp3| {
        let mut p = Pair::new();
        let mut a = Client::new(&p);
        if resp3 {
            a.resp3();
        }
        // With replies off, Pub/Sub notifications and messages still come.
        a.send(&["CLIENT", "REPLY", "OFF"]);
        a.check(&["SUBSCRIBE", "channel"]);
        a.check(&["PSUBSCRIBE", "ch*"]);
        p.check(&["PUBLISH", "channel", "hello"]);
        a.expect_same(2, "PUBLISH to a client with replies off");
        a.check_n(&["UNSUBSCRIBE", "channel"], 1);
        a.check_n(&["PUNSUBSCRIBE", "ch*"], 1);
        // Ordinary replies stay suppressed: only the notification of the
        // SUBSCRIBE after the PING arrives.
        a.send(&["PING"]);
        a.check(&["SUBSCRIBE", "again"]);
        a.send(&["CLIENT", "REPLY", "SKIP"]);
        a.check(&["UNSUBSCRIBE"]);
        a.check(&["CLIENT", "REPLY", "ON"]);
        let (r, h) = a.drain_until_fence();
        assert_frames_equal(&r, &h, "after CLIENT REPLY ON");
    });
}

// ---------------------------------------------------------------------------
// Sharded channels.

#[test]
fn sharded_pubsub_without_cluster() {
    both_protocols(|resp3| {
        let mut p = Pair::new();
        let mut a = Client::new(&p);
        let mut b = Client::new(&p);
        if resp3 {
            a.resp3();
        }
        a.check_n(&["SSUBSCRIBE", "s1", "s2", "s1"], 3);
        b.check(&["SSUBSCRIBE", "s1"]);
        // Channel and pattern subscriptions are counted apart.
        a.check(&["SUBSCRIBE", "c1"]);
        a.check(&["PSUBSCRIBE", "s*"]);
        p.script(
            "SPUBLISH s1 hello\n\
             SPUBLISH s2 world\n\
             SPUBLISH s3 nobody\n\
             PUBLISH s1 not-sharded\n\
             ~PUBSUB SHARDCHANNELS\n\
             PUBSUB SHARDCHANNELS s2*\n\
             PUBSUB SHARDNUMSUB s1 s2 s3\n\
             PUBSUB SHARDNUMSUB\n\
             PUBSUB NUMSUB s1\n\
             PUBSUB CHANNELS\n",
        );
        // smessage s1, smessage s2, then the pattern's pmessage for PUBLISH s1.
        a.expect_same(3, "SPUBLISH and PUBLISH");
        b.expect_same(1, "SPUBLISH s1 to the second subscriber");
        a.check_n(&["SUNSUBSCRIBE", "s2", "nope"], 2);
        check_mass_unsubscribe(&mut a, "SUNSUBSCRIBE", 1);
        let nothing = a.check(&["SUNSUBSCRIBE"]);
        if !resp3 {
            assert_redis(&[nothing], &["*3\r\n$12\r\nsunsubscribe\r\n$-1\r\n:0\r\n"]);
        }
        a.check(&["UNSUBSCRIBE"]);
        a.check(&["PUNSUBSCRIBE"]);
        p.script(
            "PUBSUB SHARDNUMSUB s1 s2\n\
             SPUBLISH s1 m\n",
        );
        b.expect_same(1, "SPUBLISH s1 after the first subscriber left");
        a.check(&["GET", "x"]);
    });
}

// ---------------------------------------------------------------------------
// Random subscription and publication sequences.

const CHANNELS: &[&str] = &["c1", "c2", "news.x", "news.y", ""];
const PATTERNS: &[&str] = &["c*", "news.*", "*.x", "c?", "*"];

/// One step: a command by the subscriber or by a publisher.
#[derive(Clone, Debug)]
struct PubSubOp {
    subscriber: bool,
    words: Vec<String>,
}

fn pick<'a>(g: &mut Gen, items: &[&'a str]) -> &'a str {
    g.choose(items).expect("non-empty choice")
}

fn some(g: &mut Gen, items: &[&str], min: usize) -> Vec<String> {
    let n = min + usize::arbitrary(g) % 3;
    (0..n).map(|_| pick(g, items).to_string()).collect()
}

impl Arbitrary for PubSubOp {
    fn arbitrary(g: &mut Gen) -> PubSubOp {
        let word = |w: &str| vec![w.to_string()];
        let with = |mut v: Vec<String>, rest: Vec<String>| {
            v.extend(rest);
            v
        };
        let (subscriber, words) = match u8::arbitrary(g) % 16 {
            0..=1 => (true, with(word("SUBSCRIBE"), some(g, CHANNELS, 1))),
            2 => (true, with(word("UNSUBSCRIBE"), some(g, CHANNELS, 0))),
            3 => (true, with(word("PSUBSCRIBE"), some(g, PATTERNS, 1))),
            4 => (true, with(word("PUNSUBSCRIBE"), some(g, PATTERNS, 0))),
            5 => (true, with(word("SSUBSCRIBE"), some(g, CHANNELS, 1))),
            6 => (true, with(word("SUNSUBSCRIBE"), some(g, CHANNELS, 0))),
            7 => (true, vec!["GET".into(), "k".into()]),
            8..=11 => (
                false,
                vec![
                    "PUBLISH".into(),
                    pick(g, CHANNELS).into(),
                    pick(g, &["m", "", "hello"]).into(),
                ],
            ),
            12 => (
                false,
                vec![
                    "SPUBLISH".into(),
                    pick(g, CHANNELS).into(),
                    pick(g, &["m", "s"]).into(),
                ],
            ),
            13 => (
                false,
                with(vec!["PUBSUB".into(), "NUMSUB".into()], some(g, CHANNELS, 0)),
            ),
            14 => (false, vec!["PUBSUB".into(), "NUMPAT".into()]),
            _ => (
                false,
                vec!["PUBSUB".into(), "CHANNELS".into(), pick(g, PATTERNS).into()],
            ),
        };
        PubSubOp { subscriber, words }
    }
}

/// Whether two batches of frames (all a subscriber received up to a
/// fence) agree, allowing Redis's hash orders: frames of a mass
/// unsubscribe compare as in [`mass_unsubscribe_agrees`], pattern
/// messages for one publication as a multiset.
fn batches_agree(words: &[String], r: &[Vec<u8>], h: &[Vec<u8>]) -> bool {
    if r == h {
        return true;
    }
    if r.len() != h.len() {
        return false;
    }
    let mass_unsubscribe = words.len() == 1
        && matches!(
            words[0].as_str(),
            "UNSUBSCRIBE" | "SUNSUBSCRIBE" | "PUNSUBSCRIBE"
        );
    if mass_unsubscribe {
        return mass_unsubscribe_agrees(r, h);
    }
    // Messages of one PUBLISH: the channel message (if any) first, then
    // pattern messages in any order.
    let first_is_pattern = |f: &[Vec<u8>]| {
        f.first()
            .is_some_and(|x| x.windows(8).any(|w| w == b"pmessage"))
    };
    if first_is_pattern(r) != first_is_pattern(h) {
        return false;
    }
    let (mut rs, mut hs) = (r.to_vec(), h.to_vec());
    rs.sort();
    hs.sort();
    rs == hs
}

fn run_pubsub_ops(
    p: &mut Pair,
    sub: &mut Client,
    ops: &[PubSubOp],
    resp3: bool,
) -> Result<(), String> {
    let mut history = Vec::new();
    for op in ops {
        history.push(format!(
            "{} {}",
            if op.subscriber { "sub:" } else { "pub:" },
            op.words.join(" ")
        ));
        let fail = |what: &str, r: &[Vec<u8>], h: &[Vec<u8>], history: &[String]| {
            Err(format!(
                "{what} differ (resp3={resp3})\n  redis: {:?}\n  hozon: {:?}\n  sequence:\n    {}",
                r.iter().map(|f| show(f)).collect::<Vec<_>>(),
                h.iter().map(|f| show(f)).collect::<Vec<_>>(),
                history.join("\n    ")
            ))
        };
        let args: Vec<&str> = op.words.iter().map(String::as_str).collect();
        if op.subscriber {
            sub.send(&args);
        } else {
            let (r, h) = p.both(&args);
            let same = if op.words[1] == "CHANNELS" {
                r == h || crate::harness::same_elements(&r, &h)
            } else {
                r == h
            };
            if !same {
                return fail("publisher replies", &[r], &[h], &history);
            }
        }
        let (r, h) = sub.drain_until_fence();
        if !batches_agree(&op.words, &r, &h) {
            return fail("subscriber frames", &r, &h, &history);
        }
    }
    Ok(())
}

fn random_pubsub_matches(ops: Vec<PubSubOp>, resp3: bool) -> TestResult {
    with_thread_pair(false, |p| {
        let mut sub = Client::new(p);
        if resp3 {
            sub.resp3();
        }
        let result = run_pubsub_ops(p, &mut sub, &ops, resp3);
        // Leave no subscription behind for the next case: the server would
        // notice the closed connection only later and count it meanwhile.
        sub.send(&["RESET"]);
        for conn in [&mut sub.r, &mut sub.h] {
            while let Some(frame) = conn.try_read_reply(ARRIVAL_TIMEOUT) {
                if frame == b"+RESET\r\n" {
                    break;
                }
            }
        }
        match result {
            Ok(()) => TestResult::passed(),
            Err(e) => TestResult::error(e),
        }
    })
}

#[test]
fn random_subscriptions_and_publications_match_redis_resp2() {
    quickcheck_ops(30, 60, |ops: Vec<PubSubOp>| {
        random_pubsub_matches(ops, false)
    });
}

#[test]
fn random_subscriptions_and_publications_match_redis_resp3() {
    quickcheck_ops(30, 60, |ops: Vec<PubSubOp>| {
        random_pubsub_matches(ops, true)
    });
}
