//! Differential tests for keyspace notifications (`notify-keyspace-events`):
//! a subscriber on each server listens with `PSUBSCRIBE __key*@*__:*`, the
//! same commands run on both, and the message streams must be identical,
//! frame for frame (event names, order, keys, databases), in RESP2 and
//! RESP3. Also CONFIG GET's rendering of the classes, expiry ("expired",
//! lazy and active), MULTI/EXEC and scripts, a subscriber that runs the
//! commands itself (RESP3), and random command sequences.

use std::time::{Duration, Instant};

use hozon::rand::Rng;

use crate::harness::{
    bulk_payload, encode_command, show, split_line, start_hozon, start_redis, test_seed, Conn, Pair,
};

/// How long a message may take to arrive before a test gives up on it.
const ARRIVAL_TIMEOUT: Duration = Duration::from_secs(5);

/// The pattern every subscriber listens on.
const PATTERN: &str = "__key*@*__:*";

/// A subscriber on each server.
struct Subscriber {
    r: Conn,
    h: Conn,
}

impl Subscriber {
    /// Connects to both servers and subscribes to every notification.
    fn new(p: &Pair, resp3: bool) -> Subscriber {
        let (mut r, mut h) = p.connect_more();
        if resp3 {
            r.call(&[b"HELLO", b"3"]);
            h.call(&[b"HELLO", b"3"]);
        }
        let sub: &[&[u8]] = &[b"PSUBSCRIBE", PATTERN.as_bytes()];
        let (rr, hr) = (r.call(sub), h.call(sub));
        assert_eq!(show(&rr), show(&hr), "PSUBSCRIBE replies differ");
        Subscriber { r, h }
    }

    /// The messages that arrived on each side until now (a PING fence),
    /// compared frame for frame; returns Redis's.
    #[track_caller]
    fn expect_same(&mut self, what: &str) -> Vec<Vec<u8>> {
        let r = fence(&mut self.r);
        let h = fence(&mut self.h);
        assert_frames_equal(&r, &h, what);
        r
    }
}

const FENCE: &str = "fence-9c1e";

/// Sends `PING <FENCE>` and returns the frames that arrive before its reply.
fn fence(conn: &mut Conn) -> Vec<Vec<u8>> {
    crate::harness::frames_before_fence(conn, FENCE, ARRIVAL_TIMEOUT)
}

#[track_caller]
fn assert_frames_equal(r: &[Vec<u8>], h: &[Vec<u8>], what: &str) {
    if r != h {
        let first = r.iter().zip(h).position(|(a, b)| a != b);
        panic!(
            "notifications differ after {what} (first difference at {first:?}; {} vs {} frames)\n  redis: {:?}\n  hozon: {:?}",
            r.len(),
            h.len(),
            r.iter().map(|f| show(f)).collect::<Vec<_>>(),
            h.iter().map(|f| show(f)).collect::<Vec<_>>()
        );
    }
}

/// The message frame Redis sends a pattern subscriber (RESP2).
fn pmessage(channel: &str, message: &str) -> String {
    let part = |s: &str| format!("${}\r\n{s}\r\n", s.len());
    format!(
        "*4\r\n{}{}{}{}",
        part("pmessage"),
        part(PATTERN),
        part(channel),
        part(message)
    )
}

/// Sets the classes on both servers (the replies must agree).
fn set_classes(p: &mut Pair, classes: &str) {
    let reply = p.check(&["CONFIG", "SET", "notify-keyspace-events", classes]);
    assert_eq!(show(&reply), show(b"+OK\r\n"), "CONFIG SET {classes}");
}

fn both_protocols(mut test: impl FnMut(bool)) {
    test(false);
    test(true);
}

// ---------------------------------------------------------------------------
// Configuration.

#[test]
fn classes_read_back_as_redis_prints_them() {
    let mut p = Pair::new();
    p.script(
        "CONFIG GET notify-keyspace-events\n\
         CONFIG SET notify-keyspace-events gKE\n\
         CONFIG GET notify-keyspace-events\n\
         CONFIG SET notify-keyspace-events $lshzxeKE\n\
         CONFIG GET notify-keyspace-events\n\
         CONFIG SET notify-keyspace-events KA\n\
         CONFIG GET notify-keyspace-events\n\
         CONFIG SET notify-keyspace-events EA\n\
         CONFIG GET notify-keyspace-events\n\
         CONFIG SET notify-keyspace-events AKE\n\
         CONFIG GET notify-keyspace-events\n\
         CONFIG SET notify-keyspace-events mnKdt\n\
         CONFIG GET notify-keyspace-events\n\
         CONFIG SET notify-keyspace-events AmnKE\n\
         CONFIG GET notify-keyspace-events\n\
         CONFIG SET notify-keyspace-events xxgg\n\
         CONFIG GET notify-keyspace-events\n\
         CONFIG SET notify-keyspace-events KEw\n\
         CONFIG SET notify-keyspace-events \"K E\"\n\
         CONFIG GET notify-keyspace-events\n\
         CONFIG SET notify-keyspace-events \"\"\n\
         CONFIG GET notify-keyspace-events\n\
         CONFIG GET notify-*\n",
    );
    let (r, _) = p.both(&["CONFIG", "GET", "notify-keyspace-events"]);
    assert_eq!(
        show(&r),
        show(b"*2\r\n$22\r\nnotify-keyspace-events\r\n$0\r\n\r\n"),
        "Redis itself answered unexpectedly"
    );
}

#[test]
fn classes_from_the_command_line() {
    let mut p = Pair::with_args(
        &["--notify-keyspace-events", "KEA"],
        &["--notify-keyspace-events", "KEA"],
    );
    let got = p.check(&["CONFIG", "GET", "notify-keyspace-events"]);
    assert_eq!(
        show(&got),
        show(b"*2\r\n$22\r\nnotify-keyspace-events\r\n$3\r\nAKE\r\n")
    );
    let mut s = Subscriber::new(&p, false);
    p.check(&["SET", "k", "v"]);
    let got = s.expect_same("SET with classes from the command line");
    assert_eq!(got.len(), 2);
}

// ---------------------------------------------------------------------------
// Events.

/// Every event of the commands hozon has, in one script (classes `AKEn`).
const EVERY_EVENT: &str = include_str!("notify_events.txt");

#[test]
fn every_event_as_redis_emits_it() {
    both_protocols(|resp3| {
        let mut p = Pair::new();
        let mut s = Subscriber::new(&p, resp3);
        set_classes(&mut p, "AKEn");
        p.script(EVERY_EVENT);
        // RESTORE, with a payload from DUMP.
        p.check(&["RPUSH", "src", "a", "b"]);
        let payload = p.redis(&["DUMP", "src"]);
        let payload = bulk_payload(&payload);
        for args in [
            vec![&b"RESTORE"[..], b"rs", b"0", &payload],
            vec![b"RESTORE", b"rs", b"0", &payload, b"REPLACE"],
            vec![b"RESTORE", b"rs2", b"100000", &payload],
            vec![b"RESTORE", b"rs", b"1", &payload, b"REPLACE", b"ABSTTL"],
        ] {
            p.check_bytes(&args);
        }
        let got = s.expect_same("the script of every event");
        if !resp3 {
            assert_eq!(
                show(&got[0]),
                show(pmessage("__keyspace@0__:s1", "new").as_bytes()),
                "Redis itself answered unexpectedly"
            );
        }
        assert!(got.len() > 300, "only {} notifications", got.len());
    });
}

#[test]
fn each_class_alone() {
    // Every class and channel kind on its own, over the same script.
    let mut p = Pair::new();
    let mut s = Subscriber::new(&p, false);
    for classes in [
        "Kg", "E$", "KEl", "Ks", "Eh", "Kz", "Ex", "Ee", "Kt", "En", "KEA", "Kd", "AE", "gK", "Km",
        "AKEnm",
    ] {
        set_classes(&mut p, classes);
        p.script(EVERY_EVENT);
        s.expect_same(&format!("the script with classes {classes}"));
    }
}

#[test]
fn keymiss_events() {
    both_protocols(|resp3| {
        let mut p = Pair::new();
        let mut s = Subscriber::new(&p, resp3);
        set_classes(&mut p, "KEm");
        p.script(
            "GET nosuch\n\
             SET k v\n\
             GET k\n\
             MGET k a b\n\
             STRLEN nosuch\n\
             GETRANGE nosuch 0 1\n\
             HGET nosuch f\n\
             HGETALL nosuch\n\
             LRANGE nosuch 0 -1\n\
             LLEN nosuch\n\
             SMEMBERS nosuch\n\
             SISMEMBER nosuch a\n\
             ZRANGE nosuch 0 -1\n\
             ZSCORE nosuch a\n\
             XRANGE nosuch - +\n\
             EXISTS nosuch k\n\
             TYPE nosuch\n\
             TTL nosuch\n\
             OBJECT ENCODING nosuch\n\
             DUMP nosuch\n\
             SUNIONSTORE dst nosuch k2\n\
             SET k2 v PX 1\n",
        );
        std::thread::sleep(Duration::from_millis(20));
        p.script("GET k2\nGET k\n");
        let got = s.expect_same("reads of missing keys");
        if !resp3 {
            assert_eq!(
                show(&got[0]),
                show(pmessage("__keyspace@0__:nosuch", "keymiss").as_bytes()),
                "Redis itself answered unexpectedly"
            );
        }
    });
}

// ---------------------------------------------------------------------------
// Expiry.

#[test]
fn expired_keys_lazily_and_actively() {
    both_protocols(|resp3| {
        let mut p = Pair::new();
        let mut s = Subscriber::new(&p, resp3);
        set_classes(&mut p, "KEA");
        // Lazy expiry: a command finds the key past its TTL.
        p.check(&["SET", "lazy", "v", "PX", "1"]);
        p.check(&["RPUSH", "lazylist", "a"]);
        p.check(&["PEXPIRE", "lazylist", "1"]);
        std::thread::sleep(Duration::from_millis(20));
        p.script("GET lazy\nRPUSH lazylist b\nDEL lazylist\n");
        s.expect_same("lazy expiry");
        // Active expiry: nothing touches the keys; the servers' cron
        // removes them and publishes "expired" by itself (no command runs
        // meanwhile, so nothing else could flush the messages).
        p.script("SET a1 v PX 5\nSET a2 v PX 5\nSELECT 4\nSET a3 v PX 5\nSELECT 0\n");
        s.expect_same("SET with PX");
        let r = read_frames(&mut s.r, 6, "redis");
        let h = read_frames(&mut s.h, 6, "hozon");
        // The cron visits keys in hash order: compare as multisets.
        let (mut rs, mut hs) = (r.clone(), h.clone());
        rs.sort();
        hs.sort();
        assert_frames_equal(&rs, &hs, "active expiry (sorted)");
        let expired = r
            .iter()
            .filter(|f| f.ends_with(b"__keyevent@4__:expired\r\n$2\r\na3\r\n"))
            .count();
        assert_eq!(expired, 1, "Redis itself sent {r:?}");
        // Nothing more.
        assert_frames_equal(&fence(&mut s.r), &fence(&mut s.h), "after active expiry");
    });
}

/// Reads `n` frames that arrive without any command being sent.
fn read_frames(conn: &mut Conn, n: usize, side: &str) -> Vec<Vec<u8>> {
    let mut out = Vec::new();
    while out.len() < n {
        match conn.try_read_reply(ARRIVAL_TIMEOUT) {
            Some(frame) => out.push(frame),
            None => panic!(
                "{side}: {} of {n} frames arrived: {:?}",
                out.len(),
                out.iter().map(|f| show(f)).collect::<Vec<_>>()
            ),
        }
    }
    out
}

// ---------------------------------------------------------------------------
// Transactions, scripts, the subscriber itself.

#[test]
fn transactions_and_scripts_notify_as_each_command_runs() {
    both_protocols(|resp3| {
        let mut p = Pair::new();
        let mut s = Subscriber::new(&p, resp3);
        set_classes(&mut p, "KEAn");
        p.script(
            "MULTI\n\
             SET t1 v\n\
             LPUSH t2 a\n\
             DEL t1\n\
             EXEC\n\
             EVAL \"redis.call('set', KEYS[1], 'x'); redis.call('incr', KEYS[2]); return redis.call('del', KEYS[1])\" 2 e1 e2\n\
             EVAL \"return redis.call('lpop', KEYS[1])\" 1 t2\n",
        );
        s.expect_same("MULTI/EXEC and EVAL");
    });
}

#[test]
fn a_resp3_subscriber_sees_its_own_events_before_the_reply() {
    let p = Pair::new();
    let (mut r, mut h) = p.connect_more();
    for conn in [&mut r, &mut h] {
        conn.call(&[b"HELLO", b"3"]);
        conn.call(&[b"CONFIG", b"SET", b"notify-keyspace-events", b"KEA"]);
        conn.call(&[b"PSUBSCRIBE", PATTERN.as_bytes()]);
    }
    // Commands whose events Redis publishes before it adds the reply (some,
    // LPUSH or RPOP, add the reply first: docs/compatibility.md).
    let lines = [
        "SET k v",
        "INCR n",
        "MULTI",
        "SET k2 v",
        "DEL k",
        "EXEC",
        "DEL nothing",
        "DEL n k2",
    ];
    for line in lines {
        let args = split_line(line);
        let refs: Vec<&[u8]> = args.iter().map(Vec::as_slice).collect();
        r.send_raw(&encode_command(&refs));
        h.send_raw(&encode_command(&refs));
    }
    let (rf, hf) = (fence(&mut r), fence(&mut h));
    assert_frames_equal(&rf, &hf, "a RESP3 subscriber's own commands");
    assert!(
        rf[0].starts_with(b">4\r\n"),
        "Redis itself: {}",
        show(&rf[0])
    );
}

#[test]
fn blocked_clients_served_later_notify() {
    let mut p = Pair::new();
    let mut s = Subscriber::new(&p, false);
    set_classes(&mut p, "KEA");
    let (mut br, mut bh) = p.connect_more();
    for conn in [&mut br, &mut bh] {
        conn.send_raw(&encode_command(&[b"BLPOP", b"bl", b"0"]));
    }
    let (mut zr, mut zh) = p.connect_more();
    for conn in [&mut zr, &mut zh] {
        conn.send_raw(&encode_command(&[
            b"BLMOVE", b"bm", b"bm2", b"LEFT", b"RIGHT", b"0",
        ]));
    }
    // Let both block before the pushes.
    std::thread::sleep(Duration::from_millis(100));
    p.check(&["RPUSH", "bl", "a", "b"]);
    p.check(&["RPUSH", "bm", "x"]);
    assert_eq!(show(&br.read_reply()), show(&bh.read_reply()));
    assert_eq!(show(&zr.read_reply()), show(&zh.read_reply()));
    // hozon's messages must come without another command flushing them.
    let r = fence(&mut s.r);
    let h = read_frames(&mut s.h, r.len(), "hozon");
    assert_frames_equal(&r, &h, "blocked clients served");
    assert_frames_equal(&[], &fence(&mut s.h), "after the blocked clients");
    assert_eq!(r.len(), 12, "Redis itself sent {r:?}");
}

// ---------------------------------------------------------------------------
// Random sequences.

/// One random command on a small keyspace (types mixed on purpose, so
/// WRONGTYPE and deletions happen).
fn random_command(rng: &mut Rng) -> Vec<String> {
    let key = |rng: &mut Rng, prefix: &str| format!("{prefix}{}", rng.below(3));
    let any = |rng: &mut Rng| {
        let prefix = ["s", "l", "t", "h", "z", "x"][rng.index(6)];
        format!("{prefix}{}", rng.below(3))
    };
    let n = |rng: &mut Rng, max: u64| rng.below(max).to_string();
    let m = |rng: &mut Rng| ["a", "b", "c", "d"][rng.index(4)].to_string();
    let words: Vec<String> = match rng.below(40) {
        0 => vec!["SET".into(), key(rng, "s"), m(rng)],
        1 => vec!["INCRBY".into(), key(rng, "s"), n(rng, 5)],
        2 => vec!["APPEND".into(), key(rng, "s"), m(rng)],
        3 => vec!["SETRANGE".into(), key(rng, "s"), n(rng, 4), m(rng)],
        4 => vec!["GETDEL".into(), key(rng, "s")],
        5 => vec!["SETBIT".into(), key(rng, "s"), n(rng, 16), n(rng, 2)],
        6 => vec!["LPUSH".into(), key(rng, "l"), m(rng), m(rng)],
        7 => vec!["RPOP".into(), key(rng, "l")],
        8 => vec!["LREM".into(), key(rng, "l"), "0".into(), m(rng)],
        9 => vec!["LTRIM".into(), key(rng, "l"), "1".into(), n(rng, 3)],
        10 => vec![
            "LMOVE".into(),
            key(rng, "l"),
            key(rng, "l"),
            "LEFT".into(),
            "RIGHT".into(),
        ],
        11 => vec!["SADD".into(), key(rng, "t"), m(rng), m(rng)],
        12 => vec!["SREM".into(), key(rng, "t"), m(rng)],
        13 => vec!["SMOVE".into(), key(rng, "t"), key(rng, "t"), m(rng)],
        14 => vec![
            "SUNIONSTORE".into(),
            key(rng, "t"),
            key(rng, "t"),
            key(rng, "t"),
        ],
        15 => vec![
            "SINTERSTORE".into(),
            key(rng, "t"),
            key(rng, "t"),
            key(rng, "t"),
        ],
        16 => vec!["HSET".into(), key(rng, "h"), m(rng), m(rng)],
        17 => vec!["HDEL".into(), key(rng, "h"), m(rng)],
        18 => vec!["HINCRBY".into(), key(rng, "h"), m(rng), n(rng, 3)],
        19 => vec!["ZADD".into(), key(rng, "z"), n(rng, 5), m(rng)],
        20 => vec!["ZINCRBY".into(), key(rng, "z"), n(rng, 5), m(rng)],
        21 => vec!["ZREM".into(), key(rng, "z"), m(rng)],
        22 => vec!["ZPOPMIN".into(), key(rng, "z")],
        23 => vec![
            "ZREMRANGEBYSCORE".into(),
            key(rng, "z"),
            "0".into(),
            n(rng, 5),
        ],
        24 => vec![
            "ZUNIONSTORE".into(),
            key(rng, "z"),
            "2".into(),
            key(rng, "z"),
            key(rng, "z"),
        ],
        25 => vec!["XADD".into(), key(rng, "x"), "*".into(), m(rng), m(rng)],
        26 => vec!["XTRIM".into(), key(rng, "x"), "MAXLEN".into(), n(rng, 3)],
        27 => vec![
            "XGROUP".into(),
            "CREATE".into(),
            key(rng, "x"),
            "g".into(),
            "0".into(),
            "MKSTREAM".into(),
        ],
        28 => vec![
            "XGROUP".into(),
            "CREATECONSUMER".into(),
            key(rng, "x"),
            "g".into(),
            m(rng),
        ],
        29 => vec!["DEL".into(), any(rng), any(rng)],
        30 => vec!["RENAME".into(), any(rng), any(rng)],
        31 => vec!["EXPIRE".into(), any(rng), n(rng, 1000)],
        32 => vec!["PERSIST".into(), any(rng)],
        33 => vec!["COPY".into(), any(rng), any(rng), "REPLACE".into()],
        34 => vec!["MOVE".into(), any(rng), "1".into()],
        35 => vec!["EXPIRE".into(), any(rng), "0".into()],
        36 => vec![
            "SORT".into(),
            key(rng, "l"),
            "ALPHA".into(),
            "STORE".into(),
            key(rng, "l"),
        ],
        37 => vec!["HINCRBYFLOAT".into(), key(rng, "h"), m(rng), "1.5".into()],
        38 => vec!["MSET".into(), key(rng, "s"), m(rng), key(rng, "s"), m(rng)],
        _ => vec![
            "LINSERT".into(),
            key(rng, "l"),
            "BEFORE".into(),
            m(rng),
            m(rng),
        ],
    };
    words
}

#[test]
fn random_sequences_notify_alike() {
    let seed = test_seed();
    for (round, resp3) in [(0u64, false), (1, true), (2, false)] {
        let mut rng = Rng::with_seed(seed.wrapping_add(round));
        let mut p = Pair::new();
        let mut s = Subscriber::new(&p, resp3);
        set_classes(&mut p, "AKEnm");
        let mut history = Vec::new();
        for _ in 0..300 {
            let words = random_command(&mut rng);
            let refs: Vec<&str> = words.iter().map(String::as_str).collect();
            // XADD * answers a time-based ID: the replies may differ there.
            if words[0] == "XADD" {
                p.both(&refs);
            } else {
                p.check(&refs);
            }
            history.push(words.join(" "));
        }
        let r = fence(&mut s.r);
        let h = fence(&mut s.h);
        if r != h {
            let first = r.iter().zip(&h).position(|(a, b)| a != b);
            panic!(
                "seed {seed} round {round}: notifications differ (first at {first:?})\n  redis: {:?}\n  hozon: {:?}\n  commands: {history:?}",
                r.iter().map(|f| show(f)).collect::<Vec<_>>(),
                h.iter().map(|f| show(f)).collect::<Vec<_>>(),
            );
        }
        assert!(
            r.len() > 200,
            "seed {seed} round {round}: Redis sent only {} notifications",
            r.len()
        );
        eprintln!("seed {seed} round {round}: {} notifications alike", r.len());
    }
}

// ---------------------------------------------------------------------------
// Replicas.

#[test]
fn a_replica_notifies_what_it_applies() {
    let mut masters = Pair::new();
    let redis_replica = start_redis(&[
        "--replicaof",
        "127.0.0.1",
        &masters.redis_server.port.to_string(),
    ]);
    let hozon_replica = start_hozon(&[
        "--replicaof",
        "127.0.0.1",
        &masters.hozon_server.port.to_string(),
    ]);
    let mut replicas = Subscriber {
        r: Conn::connect(redis_replica.port),
        h: Conn::connect(hozon_replica.port),
    };
    for (conn, side) in [(&mut replicas.r, "redis"), (&mut replicas.h, "hozon")] {
        wait_for_link(conn, side);
        conn.call(&[b"CONFIG", b"SET", b"notify-keyspace-events", b"KEAn"]);
        conn.call(&[b"PSUBSCRIBE", PATTERN.as_bytes()]);
    }
    masters.script(
        "SET k v\n\
         LPUSH l a b\n\
         RPOP l\n\
         EXPIRE l 100\n\
         INCRBYFLOAT f 1.5\n\
         SADD s a\n\
         SPOP s\n\
         DEL k\n\
         XADD x 1-1 f v\n\
         SET e v PX 30\n",
    );
    // The masters' active expiry deletes `e` and sends DEL to the replicas.
    // Wait for it on both (a fixed sleep was too short on a loaded machine).
    for (conn, side) in [(&mut masters.r, "redis"), (&mut masters.h, "hozon")] {
        wait_for_expiry(conn, side);
    }
    masters.check(&["WAIT", "1", "5000"]);
    let got = replicas.expect_same("the replicas applying their masters' stream");
    let expiry_del = pmessage("__keyevent@0__:del", "e");
    assert!(
        got.iter().any(|f| f == expiry_del.as_bytes()),
        "Redis itself sent {:?}",
        got.iter().map(|f| show(f)).collect::<Vec<_>>()
    );
    drop((redis_replica, hozon_replica));
}

/// Waits until a master's active expiry has deleted a key.
fn wait_for_expiry(conn: &mut Conn, side: &str) {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let info = String::from_utf8_lossy(&conn.call(&[b"INFO", b"stats"])).into_owned();
        if !info.contains("\r\nexpired_keys:0\r\n") {
            assert!(info.contains("\r\nexpired_keys:"), "{side}: {info}");
            return;
        }
        assert!(
            Instant::now() < deadline,
            "{side}: the master never expired its key"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Waits until a replica's link to its master is up.
fn wait_for_link(conn: &mut Conn, side: &str) {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let info = conn.call(&[b"INFO", b"replication"]);
        if String::from_utf8_lossy(&info).contains("master_link_status:up") {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "{side}: the replica never synced"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}
