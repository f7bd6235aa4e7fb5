//! Differential tests for client-side caching (CLIENT TRACKING, CACHING,
//! GETREDIR, TRACKINGINFO): every mode and error, RESP3 invalidation
//! pushes and their place after the command's own reply, RESP2 REDIRECT
//! to a client subscribed to `__redis__:invalidate`, a broken redirect,
//! BCAST prefixes, flushes, the `tracking-table-max-keys` eviction, the
//! INFO and CLIENT LIST fields, and random read/write sequences whose
//! invalidation messages are compared with Redis 7.0's.
//!
//! Client ids differ between the two servers, so commands naming an id
//! (REDIRECT) are sent with each side's own, and replies showing one are
//! compared with the id replaced.

mod support;

use std::time::{Duration, Instant};

use quickcheck::{Arbitrary, Gen, TestResult};

use crate::harness::{quickcheck_ops, show, start_redis, Conn, Pair};
use support::*;

// ---------------------------------------------------------------------------

/// Every subcommand's errors and replies, in both protocols: option
/// parsing, the mode conflicts, the prefix overlaps (including Redis's
/// error followed by +OK when two given prefixes past the first overlap),
/// CACHING in the wrong mode, GETREDIR and TRACKINGINFO in every mode.
#[test]
fn subcommands_and_errors() {
    let p = Pair::new();
    for resp3 in [false, true] {
        let mut c = Client::new(&p);
        let mut other = Client::new(&p);
        if resp3 {
            c.resp3();
        }
        let other_ids = other.ids();
        for cmd in [
            &["CLIENT", "TRACKING"][..],
            &["CLIENT", "TRACKING", "maybe"],
            &["CLIENT", "TRACKING", "on", "foo"],
            &["CLIENT", "TRACKING", "on", "REDIRECT"],
            &["CLIENT", "TRACKING", "on", "REDIRECT", "abc"],
            &["CLIENT", "TRACKING", "on", "REDIRECT", "999999"],
            &["CLIENT", "TRACKING", "on", "REDIRECT", "0"],
            &["CLIENT", "TRACKING", "on", "PREFIX", "a"],
            &["CLIENT", "TRACKING", "on", "BCAST", "OPTIN"],
            &["CLIENT", "TRACKING", "on", "BCAST", "OPTOUT"],
            &["CLIENT", "TRACKING", "on", "OPTIN", "OPTOUT"],
            &[
                "CLIENT", "TRACKING", "on", "BCAST", "PREFIX", "FOOBAR", "PREFIX", "FOO",
            ],
            &[
                "CLIENT", "TRACKING", "on", "BCAST", "PREFIX", "FOO", "PREFIX", "FOOBAR",
            ],
            &["CLIENT", "CACHING", "yes"],
            &["CLIENT", "CACHING", "no"],
            &["CLIENT", "CACHING"],
            &["CLIENT", "GETREDIR", "x"],
            &["CLIENT", "TRACKINGINFO", "x"],
            &["CLIENT", "GETREDIR"],
            &["CLIENT", "TRACKINGINFO"],
            &["CLIENT", "TRACKING", "off"],
            &["CLIENT", "TRACKING", "on"],
            &["CLIENT", "GETREDIR"],
            &["CLIENT", "TRACKINGINFO"],
            &["CLIENT", "TRACKING", "on", "BCAST"],
            &["CLIENT", "TRACKING", "on", "OPTIN"],
            &["CLIENT", "CACHING", "yes"],
            &["CLIENT", "CACHING", "no"],
            &["CLIENT", "CACHING", "maybe"],
            &["CLIENT", "TRACKING", "on", "OPTIN", "NOLOOP"],
            &["CLIENT", "TRACKINGINFO"],
            &["CLIENT", "CACHING", "yes"],
            &["CLIENT", "TRACKINGINFO"],
            &["CLIENT", "TRACKINGINFO"],
            &["CLIENT", "TRACKING", "on", "OPTOUT"],
            &["CLIENT", "TRACKING", "off"],
            &["CLIENT", "TRACKING", "on", "OPTOUT"],
            &["CLIENT", "CACHING", "yes"],
            &["CLIENT", "CACHING", "no"],
            &["CLIENT", "TRACKINGINFO"],
            &["CLIENT", "TRACKING", "off"],
            &[
                "CLIENT", "TRACKING", "on", "BCAST", "PREFIX", "FOO", "PREFIX", "BAR",
            ],
            &["CLIENT", "TRACKING", "on", "BCAST", "PREFIX", "FO"],
            &["CLIENT", "TRACKING", "on", "BCAST", "PREFIX", "BARB"],
            &["CLIENT", "TRACKING", "on"],
            &[
                "CLIENT", "TRACKING", "on", "BCAST", "PREFIX", "baz", "PREFIX", "qux",
            ],
            &["CLIENT", "TRACKINGINFO"],
            &["CLIENT", "TRACKING", "off"],
            &["CLIENT", "TRACKINGINFO"],
            &["CLIENT", "TRACKING", "on", "BCAST"],
            &["CLIENT", "TRACKINGINFO"],
            &["CLIENT", "TRACKING", "off"],
        ] {
            c.check(cmd);
        }
        // Past the first given prefix, an overlap between two given
        // prefixes is reported and then tracking is enabled anyway.
        c.check_n(
            &[
                "CLIENT", "TRACKING", "on", "BCAST", "PREFIX", "a", "PREFIX", "b", "PREFIX", "bc",
            ],
            2,
        );
        c.check(&["CLIENT", "TRACKINGINFO"]);
        c.check(&["CLIENT", "TRACKING", "off"]);
        // REDIRECT to another client, twice, and to itself.
        c.check_with_id(
            &[
                "CLIENT", "TRACKING", "on", "REDIRECT", "{}", "REDIRECT", "{}",
            ],
            &other_ids,
        );
        c.check_with_id(
            &["CLIENT", "TRACKING", "on", "REDIRECT", "{}", "NOLOOP"],
            &other_ids,
        );
        c.check_showing_id(&["CLIENT", "GETREDIR"], &other_ids);
        c.check_showing_id(&["CLIENT", "TRACKINGINFO"], &other_ids);
        c.check(&["CLIENT", "TRACKING", "off"]);
        c.check(&["CLIENT", "GETREDIR"]);
        let own = c.ids();
        c.check_with_id(&["CLIENT", "TRACKING", "on", "REDIRECT", "{}"], &own);
        c.check_showing_id(&["CLIENT", "GETREDIR"], &own);
        c.check(&["CLIENT", "TRACKING", "off"]);
        // RESET ends tracking.
        c.check(&["CLIENT", "TRACKING", "on", "BCAST", "PREFIX", "x"]);
        c.check(&["RESET"]);
        c.check(&["CLIENT", "TRACKINGINFO"]);
        assert_info_agrees(&mut c, ["0", "0", "0", "0"]);
    }
}

/// RESP3 default mode: another client's write sends one push with the key;
/// the client's own write gets its reply first, then the push; a key is
/// invalidated once until read again; NOLOOP drops own writes; MULTI/EXEC
/// writes come after EXEC's reply; a read inside EXEC is tracked.
#[test]
fn resp3_default_mode() {
    let p = Pair::new();
    let mut t = Client::new(&p);
    let mut w = Client::new(&p);
    t.resp3();
    t.check(&["CLIENT", "TRACKING", "on"]);
    w.check(&["MSET", "a", "1", "b", "2", "c", "3"]);
    t.check(&["GET", "a"]);
    t.check(&["MGET", "b", "c", "nokey"]);
    w.check(&["INCR", "a"]);
    assert_eq!(t.pending("INCR a"), vec![push_of(&["a"])]);
    w.check(&["INCR", "a"]);
    assert!(t.pending("INCR a again").is_empty());
    w.check(&["DEL", "b", "c", "nokey"]);
    assert_eq!(t.pending("DEL").len(), 2);
    // DEL of a missing key modified nothing: it is still tracked.
    w.check(&["SET", "nokey", "x"]);
    assert_eq!(t.pending("SET nokey"), vec![push_of(&["nokey"])]);
    // Own write: reply, then the push.
    t.check(&["HSET", "h", "f", "1"]);
    t.check(&["HGET", "h", "f"]);
    let frames = t.check_n(&["HDEL", "h", "f"], 2);
    assert_eq!(frames[1], push_of(&["h"]));
    // A transaction's invalidations follow EXEC's reply.
    t.check(&["MSET", "x", "1", "y", "2"]);
    t.check(&["GET", "x"]);
    t.check(&["MULTI"]);
    t.check(&["INCR", "x"]);
    t.check(&["GET", "y"]);
    let frames = t.check_n(&["EXEC"], 2);
    assert_eq!(frames[1], push_of(&["x"]));
    w.check(&["SET", "y", "3"]);
    assert_eq!(t.pending("SET y after GET in EXEC"), vec![push_of(&["y"])]);
    // NOLOOP: own writes are not reported, others' are.
    t.check(&["CLIENT", "TRACKING", "on", "NOLOOP"]);
    t.check(&["GET", "a"]);
    t.check(&["SET", "a", "own"]);
    assert!(t.pending("own SET under NOLOOP").is_empty());
    t.check(&["GET", "a"]);
    w.check(&["SET", "a", "other"]);
    assert_eq!(t.pending("other SET under NOLOOP"), vec![push_of(&["a"])]);
    // A read that fails (wrong type) still tracks its key.
    t.check(&["CLIENT", "TRACKING", "on"]);
    t.check(&["LPUSH", "l", "1"]);
    t.check(&["GET", "l"]);
    w.check(&["DEL", "l"]);
    assert_eq!(t.pending("DEL l"), vec![push_of(&["l"])]);
    // Tracking ignores databases: a key of another database invalidates.
    t.check(&["GET", "a"]);
    w.check(&["SELECT", "1"]);
    w.check(&["SET", "a", "db1"]);
    assert_eq!(t.pending("SET a in db 1"), vec![push_of(&["a"])]);
    // CLIENT REPLY OFF: the push is still written.
    t.check(&["GET", "a"]);
    t.send(&["CLIENT", "REPLY", "OFF"]);
    t.send(&["SET", "a", "quiet"]);
    t.check(&["CLIENT", "REPLY", "ON"]);
}

/// OPTIN and OPTOUT with CLIENT CACHING: the choice covers the next
/// command (or transaction) only, and any CLIENT subcommand keeps it.
#[test]
fn optin_optout_caching() {
    let p = Pair::new();
    let mut t = Client::new(&p);
    let mut w = Client::new(&p);
    t.resp3();
    w.check(&["MSET", "k1", "1", "k2", "2", "k3", "3", "k4", "4"]);
    t.check(&["CLIENT", "TRACKING", "on", "OPTIN"]);
    t.check(&["GET", "k1"]);
    t.check(&["CLIENT", "CACHING", "yes"]);
    t.check(&["CLIENT", "GETREDIR"]);
    t.check(&["GET", "k2"]);
    t.check(&["GET", "k3"]);
    t.check(&["CLIENT", "CACHING", "yes"]);
    t.check(&["MULTI"]);
    t.check(&["GET", "k4"]);
    t.check(&["EXEC"]);
    t.check(&["CLIENT", "TRACKINGINFO"]);
    w.check(&["MSET", "k1", "x", "k2", "x", "k3", "x", "k4", "x"]);
    let got = t.pending("OPTIN writes");
    assert_eq!(got.len(), 2, "k2 and k4: {got:?}");
    t.check(&["CLIENT", "TRACKING", "off"]);
    t.check(&["CLIENT", "TRACKING", "on", "OPTOUT"]);
    t.check(&["GET", "k1"]);
    t.check(&["CLIENT", "CACHING", "no"]);
    t.check(&["GET", "k2"]);
    t.check(&["GET", "k3"]);
    w.check(&["MSET", "k1", "y", "k2", "y", "k3", "y"]);
    let got = t.pending("OPTOUT writes");
    assert_eq!(got.len(), 2, "k1 and k3: {got:?}");
}

/// RESP2 REDIRECT to a client subscribed to `__redis__:invalidate`:
/// `message` frames with the key array, a flush's null; several clients
/// redirecting to one; RESP3 redirect targets get pushes; a redirect
/// target that quits makes the redirect broken (`R` flag,
/// `broken_redirect`, and a `tracking-redir-broken` push to a RESP3
/// client).
#[test]
fn redirect_and_broken_redirect() {
    let p = Pair::new();
    let mut target = Client::new(&p);
    let mut t = Client::new(&p);
    let mut t2 = Client::new(&p);
    let mut w = Client::new(&p);
    let ids = target.ids();
    target.check(&["SUBSCRIBE", "__redis__:invalidate"]);
    t.check_with_id(&["CLIENT", "TRACKING", "on", "REDIRECT", "{}"], &ids);
    t2.check_with_id(&["CLIENT", "TRACKING", "on", "REDIRECT", "{}"], &ids);
    w.check(&["MSET", "a", "1", "b", "2"]);
    t.check(&["GET", "a"]);
    t2.check(&["GET", "b"]);
    w.check(&["INCR", "b"]);
    w.check(&["INCR", "a"]);
    let got = target.pending("INCR b, INCR a");
    assert_eq!(got.len(), 2);
    // A RESP2 client not redirecting gets nothing.
    let mut plain = Client::new(&p);
    plain.check(&["CLIENT", "TRACKING", "on"]);
    plain.check(&["GET", "a"]);
    w.check(&["SET", "a", "2"]);
    assert!(plain.pending("RESP2 without redirect").is_empty());
    // Flushes reach the target as a null.
    t.check(&["GET", "a"]);
    w.check(&["FLUSHALL"]);
    let got = target.pending("FLUSHALL");
    assert_eq!(got.len(), 2, "one null per redirecting client: {got:?}");
    w.check(&["FLUSHDB"]);
    assert_eq!(target.pending("FLUSHDB").len(), 2);
    // INFO and CLIENT LIST while redirecting.
    let r = t.r.call(&[b"CLIENT", b"INFO"]);
    let h = t.h.call(&[b"CLIENT", b"INFO"]);
    let (rf, rr) = flags_and_redir(&r);
    let (hf, hr) = flags_and_redir(&h);
    assert_eq!((rf.as_str(), rr == ids.0), (hf.as_str(), hr == ids.1));
    assert_eq!(rf, "t");
    // The client switches to RESP3: still redirected.
    t.resp3();
    w.check(&["SET", "a", "1"]);
    t.check(&["GET", "a"]);
    w.check(&["SET", "a", "2"]);
    assert_eq!(target.pending("redirect after HELLO 3").len(), 1);
    // A RESP3 redirect target gets pushes.
    target.check(&["UNSUBSCRIBE"]);
    target.resp3();
    t.check(&["GET", "a"]);
    w.check(&["SET", "a", "3"]);
    assert_eq!(target.pending("RESP3 target"), vec![push_of(&["a"])]);
    // The target quits: the next invalidation finds the redirect broken.
    t.check(&["GET", "a"]);
    target.check(&["QUIT"]);
    w.check(&["SET", "a", "4"]);
    let r = fence(&mut t.r);
    let h = fence(&mut t.h);
    assert_eq!(r.len(), 1, "{r:?}");
    assert_frames_equal(
        &[replace_id(&r[0], &ids.0)],
        &[replace_id(&h[0], &ids.1)],
        "after the target quit",
    );
    assert!(show(&r[0]).contains("tracking-redir-broken"), "{r:?}");
    let r = t.r.call(&[b"CLIENT", b"TRACKINGINFO"]);
    let h = t.h.call(&[b"CLIENT", b"TRACKINGINFO"]);
    assert_eq!(
        replace_id(&r, &ids.0),
        replace_id(&h, &ids.1),
        "{} / {}",
        show(&r),
        show(&h)
    );
    assert!(show(&r).contains("broken_redirect"));
    let (rf, _) = flags_and_redir(&t.r.call(&[b"CLIENT", b"INFO"]));
    let (hf, _) = flags_and_redir(&t.h.call(&[b"CLIENT", b"INFO"]));
    assert_eq!((rf.as_str(), hf.as_str()), ("tR", "tR"));
    // Another client's CLIENT LIST shows the same.
    let t_ids = t.ids();
    let line_of = |list: &[u8], id: &str| -> (String, String) {
        let text = String::from_utf8_lossy(list).into_owned();
        let line = text
            .lines()
            .find(|l| l.starts_with(&format!("id={id} ")))
            .unwrap_or_else(|| panic!("no client {id} in {text}"))
            .to_string();
        flags_and_redir(line.as_bytes())
    };
    let r = line_of(&w.r.call(&[b"CLIENT", b"LIST"]), &t_ids.0);
    let h = line_of(&w.h.call(&[b"CLIENT", b"LIST"]), &t_ids.1);
    assert_eq!((r.0.as_str(), r.1 == ids.0), ("tR", true), "redis {r:?}");
    assert_eq!((h.0.as_str(), h.1 == ids.1), ("tR", true), "hozon {h:?}");
    // Own write with a broken redirect: the notice comes after the reply.
    t.check(&["GET", "b"]);
    t.send(&["SET", "b", "own"]);
    let r = read_n(&mut t.r, 2, "redis", "own SET");
    let h = read_n(&mut t.h, 2, "hozon", "own SET");
    assert_eq!(r[0], h[0]);
    assert_eq!(replace_id(&r[1], &ids.0), replace_id(&h[1], &ids.1));
    assert!(show(&r[1]).contains("tracking-redir-broken"));
}

/// BCAST: the empty prefix and given prefixes, one message per prefix per
/// client with the keys in byte order, NOLOOP dropping own keys, no
/// messages for keys remembered before BCAST, INFO's prefix count and the
/// `B` flag.
#[test]
fn bcast_prefixes() {
    let p = Pair::new();
    let mut t = Client::new(&p);
    let mut w = Client::new(&p);
    t.resp3();
    t.check(&["CLIENT", "TRACKING", "on"]);
    t.check(&["GET", "pre:1"]);
    t.check(&["CLIENT", "TRACKING", "off"]);
    t.check(&["CLIENT", "TRACKING", "on", "BCAST"]);
    w.check(&["MSET", "pre:1", "1", "zzz", "2", "aaa", "3"]);
    assert_eq!(
        t.pending("BCAST empty prefix"),
        vec![push_of(&["aaa", "pre:1", "zzz"])]
    );
    t.check(&["CLIENT", "TRACKING", "off"]);
    t.check(&[
        "CLIENT", "TRACKING", "on", "BCAST", "PREFIX", "a:", "PREFIX", "b:",
    ]);
    t.check(&["CLIENT", "TRACKING", "on", "BCAST", "PREFIX", "c:"]);
    let mut t2 = Client::new(&p);
    t2.resp3();
    t2.check(&[
        "CLIENT", "TRACKING", "on", "BCAST", "PREFIX", "a:", "NOLOOP",
    ]);
    assert_info_agrees(&mut t, ["2", "0", "0", "3"]);
    let r = t.r.call(&[b"CLIENT", b"INFO"]);
    let h = t.h.call(&[b"CLIENT", b"INFO"]);
    assert_eq!(flags_and_redir(&r), flags_and_redir(&h));
    assert_eq!(flags_and_redir(&r).0, "tB");
    w.check(&[
        "MSET", "b:2", "1", "a:1", "1", "x", "1", "c:9", "1", "a:0", "1",
    ]);
    assert_eq!(
        t.pending("BCAST prefixes"),
        vec![
            push_of(&["a:0", "a:1"]),
            push_of(&["b:2"]),
            push_of(&["c:9"])
        ]
    );
    assert_eq!(
        t2.pending("BCAST NOLOOP other"),
        vec![push_of(&["a:0", "a:1"])]
    );
    t2.check(&["SET", "a:own", "1"]);
    assert!(t2.pending("BCAST NOLOOP own").is_empty());
    assert_eq!(t.pending("t sees t2's write"), vec![push_of(&["a:own"])]);
    // Own write without NOLOOP: the message comes at the end of the turn.
    t.check(&["SET", "c:own", "1"]);
    assert_eq!(t.pending("BCAST own write"), vec![push_of(&["c:own"])]);
    t.check(&["CLIENT", "TRACKING", "off"]);
    assert_info_agrees(&mut t, ["1", "0", "0", "1"]);
    t2.check(&["QUIT"]);
    std::thread::sleep(Duration::from_millis(100));
    assert_info_agrees(&mut t, ["0", "0", "0", "0"]);
}

/// FLUSHALL and FLUSHDB send every tracking client a null invalidation
/// (RESP3 `_`), after the flushing client's own reply, even inside a
/// transaction; the table is emptied.
#[test]
fn flush_invalidates_everything() {
    let p = Pair::new();
    let mut t = Client::new(&p);
    let mut b = Client::new(&p);
    let mut w = Client::new(&p);
    t.resp3();
    b.resp3();
    t.check(&["CLIENT", "TRACKING", "on"]);
    b.check(&["CLIENT", "TRACKING", "on", "BCAST"]);
    w.check(&["MSET", "a", "1", "b", "2"]);
    assert_eq!(b.pending("MSET").len(), 1);
    t.check(&["MGET", "a", "b"]);
    w.check(&["FLUSHALL"]);
    assert_eq!(
        t.pending("FLUSHALL"),
        vec![b">2\r\n$10\r\ninvalidate\r\n_\r\n".to_vec()]
    );
    assert_eq!(b.pending("FLUSHALL bcast").len(), 1);
    assert_info_agrees(&mut w, ["2", "0", "0", "1"]);
    w.check(&["FLUSHDB", "ASYNC"]);
    assert_eq!(t.pending("FLUSHDB").len(), 1);
    b.pending("FLUSHDB bcast");
    // Own flush: reply then null; inside MULTI after EXEC's reply.
    t.check(&["SET", "a", "1"]);
    t.check(&["GET", "a"]);
    let frames = t.check_n(&["FLUSHALL"], 2);
    assert_eq!(frames[1], b">2\r\n$10\r\ninvalidate\r\n_\r\n".to_vec());
    b.pending("own FLUSHALL bcast");
    t.check(&["MULTI"]);
    t.check(&["SET", "a", "1"]);
    t.check(&["FLUSHDB"]);
    t.check(&["SET", "b", "1"]);
    t.check_n(&["EXEC"], 2);
    b.pending("EXEC bcast");
    assert_info_agrees(&mut w, ["2", "0", "0", "1"]);
}

/// `tracking-table-max-keys`: past the limit, keys are invalidated (the
/// servers pick different keys: the counts and the table's size are
/// compared) until the table is within it again.
#[test]
fn table_limit_evicts() {
    let p = Pair::new();
    let mut t = Client::new(&p);
    let mut admin = Client::new(&p);
    t.resp3();
    t.check(&["CLIENT", "TRACKING", "on"]);
    admin.check(&["CONFIG", "GET", "tracking-table-max-keys"]);
    let keys: Vec<String> = (0..20).map(|i| format!("key:{i}")).collect();
    let mut mget = vec!["MGET"];
    mget.extend(keys.iter().map(String::as_str));
    t.check(&mget);
    assert_info_agrees(&mut admin, ["1", "20", "20", "0"]);
    admin.check(&["CONFIG", "SET", "tracking-table-max-keys", "5"]);
    admin.check(&["CONFIG", "GET", "tracking-table-max-keys"]);
    let (r, h) = t.pending_at_least(15, "the table over its limit");
    assert_eq!((r.len(), h.len()), (15, 15), "{r:?} / {h:?}");
    assert_info_agrees(&mut admin, ["1", "5", "5", "0"]);
    // Every message names one key that was read.
    for frame in r.iter().chain(&h) {
        assert!(
            keys.iter().any(|k| *frame == push_of(&[k])),
            "{}",
            show(frame)
        );
    }
    admin.check(&["CONFIG", "SET", "tracking-table-max-keys", "0"]);
    t.check(&mget);
    assert_info_agrees(&mut admin, ["1", "20", "20", "0"]);
    admin.check(&["CONFIG", "SET", "tracking-table-max-keys", "1000000"]);
}

/// Expired keys are invalidated (the cron's active expiry), and a script
/// that reads tracks its declared keys.
#[test]
fn expiry_and_scripts() {
    let p = Pair::new();
    let mut t = Client::new(&p);
    let mut w = Client::new(&p);
    t.resp3();
    t.check(&["CLIENT", "TRACKING", "on"]);
    w.check(&["SET", "e", "1", "PX", "50"]);
    t.check(&["GET", "e"]);
    let (r, h) = t.pending_at_least(1, "expiry of e");
    assert_eq!(r, vec![push_of(&["e"])]);
    assert_eq!(h, r);
    // BCAST NOLOOP: a key the client's own read finds expired is reported
    // (an expiry has no modifying client).
    let mut b = Client::new(&p);
    b.resp3();
    b.check(&[
        "CLIENT", "TRACKING", "on", "BCAST", "NOLOOP", "PREFIX", "lz:",
    ]);
    b.check(&["SET", "lz:1", "v", "PX", "20"]);
    assert!(b.pending("own SET under BCAST NOLOOP").is_empty());
    std::thread::sleep(Duration::from_millis(40));
    b.check(&["GET", "lz:1"]);
    assert_eq!(b.pending("own lazy expiry"), vec![push_of(&["lz:1"])]);
    // A script without reads tracks nothing; with a read, its keys.
    t.check(&["EVAL", "redis.call('set', 's3', 'bar')", "2", "s1", "s2"]);
    w.check(&["MSET", "s1", "1", "s2", "2"]);
    assert!(t.pending("script without reads").is_empty());
    t.check(&["EVAL", "redis.call('get', 's3')", "2", "s1", "s2"]);
    w.check(&["MSET", "s2", "1", "s1", "2"]);
    assert_eq!(
        t.pending("script with a read"),
        vec![push_of(&["s2"]), push_of(&["s1"])]
    );
    t.check(&["EVAL_RO", "redis.call('ping')", "2", "s1", "s2"]);
    w.check(&["MSET", "s2", "1", "s1", "2"]);
    assert!(t.pending("EVAL_RO without reads").is_empty());
    t.check(&["EVAL_RO", "redis.call('get', 's1')", "2", "s1", "s2"]);
    w.check(&["MSET", "s2", "1", "s1", "2"]);
    assert_eq!(t.pending("EVAL_RO with a read").len(), 2);
    // A script that reads then writes a declared key: the caller is told
    // after the script's reply (the keys were recorded at the read).
    let frames = t.check_n(
        &[
            "EVAL",
            "redis.call('get', KEYS[1]); redis.call('set', KEYS[1], 'y')",
            "1",
            "s9",
        ],
        2,
    );
    assert_eq!(frames[1], push_of(&["s9"]));
}

/// As replicas: a full sync replaces the dataset, which every tracking
/// client hears as a null invalidation; the master's writes then
/// invalidate what a client read from the replica.
#[test]
fn replica_full_sync_and_stream() {
    let p = Pair::new();
    let master = start_redis(&[]);
    let mut m = Conn::connect(master.port);
    m.call(&[b"SET", b"k", b"from-master"]);
    let mut t = Client::new(&p);
    t.resp3();
    t.check(&["CLIENT", "TRACKING", "on"]);
    t.check(&["SET", "k", "local"]);
    t.check(&["GET", "k"]);
    let port = master.port.to_string();
    let mut admin = Client::new(&p);
    admin.check(&["REPLICAOF", "127.0.0.1", &port]);
    let wait_up = |conn: &mut Conn, side: &str| {
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            let info = conn.call(&[b"INFO", b"replication"]);
            if show(&info).contains("master_link_status:up") {
                return;
            }
            assert!(
                Instant::now() < deadline,
                "{side}: no sync: {}",
                show(&info)
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    };
    wait_up(&mut admin.r, "redis");
    wait_up(&mut admin.h, "hozon");
    let got = t.pending("full sync");
    assert!(
        got.contains(&b">2\r\n$10\r\ninvalidate\r\n_\r\n".to_vec()),
        "{got:?}"
    );
    t.check(&["GET", "k"]);
    m.call(&[b"SET", b"k", b"again"]);
    let (r, h) = t.pending_at_least(1, "the master's SET");
    assert_eq!(r, vec![push_of(&["k"])]);
    assert_eq!(h, r);
    admin.check(&["REPLICAOF", "NO", "ONE"]);
}

// ---------------------------------------------------------------------------
// Random sequences

/// One step of a random sequence: the tracking client reads or writes, or
/// another client writes.
#[derive(Debug, Clone)]
enum Op {
    Read(Vec<u8>),
    OwnWrite(Vec<u8>),
    OtherWrite(Vec<u8>),
    Flush,
    Caching,
}

const KEYS: &[&str] = &["k:a", "k:b", "k:c", "j:a", "j:b"];

impl Arbitrary for Op {
    fn arbitrary(g: &mut Gen) -> Op {
        let key = |g: &mut Gen| (*g.choose(KEYS).unwrap()).as_bytes().to_vec();
        match u8::arbitrary(g) % 20 {
            0..=6 => Op::Read(key(g)),
            7..=9 => Op::OwnWrite(key(g)),
            10..=17 => Op::OtherWrite(key(g)),
            18 => Op::Caching,
            _ => Op::Flush,
        }
    }
}

/// Random reads and writes by a tracking client (default mode, OPTIN,
/// OPTOUT, NOLOOP, BCAST with a prefix; RESP3) and another client: after
/// every step the tracking client's frames (reply and pushes) are
/// compared with Redis's.
#[test]
fn random_sequences_match_redis() {
    fn property(ops: Vec<Op>) -> TestResult {
        thread_local! {
            static PAIR: std::cell::RefCell<Option<Pair>> = const { std::cell::RefCell::new(None) };
        }
        PAIR.with(|cell| {
            let mut slot = cell.borrow_mut();
            let p = slot.get_or_insert_with(Pair::new);
            let modes: &[&[&str]] = &[
                &[],
                &["NOLOOP"],
                &["OPTIN"],
                &["OPTOUT"],
                &["BCAST", "PREFIX", "k:"],
                &["BCAST", "NOLOOP"],
            ];
            for mode in modes {
                let mut t = Client::new(p);
                let mut w = Client::new(p);
                t.resp3();
                let mut cmd = vec!["CLIENT", "TRACKING", "on"];
                cmd.extend_from_slice(mode);
                t.check(&cmd);
                let caching = if mode.contains(&"OPTIN") { "yes" } else { "no" };
                let optional = mode.contains(&"OPTIN") || mode.contains(&"OPTOUT");
                for (i, op) in ops.iter().enumerate() {
                    let what = format!("mode {mode:?}, step {i} {op:?} of {ops:?}");
                    let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                        match op {
                            Op::Read(k) => {
                                let k = std::str::from_utf8(k).unwrap();
                                t.check(&["MGET", k, "j:a"]);
                            }
                            Op::OwnWrite(k) => {
                                let k = std::str::from_utf8(k).unwrap();
                                t.check(&["INCR", k]);
                            }
                            Op::OtherWrite(k) => {
                                let k = std::str::from_utf8(k).unwrap();
                                w.check(&["INCR", k]);
                            }
                            Op::Caching if optional => {
                                t.check(&["CLIENT", "CACHING", caching]);
                            }
                            Op::Caching => {}
                            Op::Flush => {
                                w.check(&["FLUSHDB"]);
                            }
                        }
                        t.pending(&what);
                        let fields = tracking_info_fields(&mut w);
                        for (r, h) in &fields {
                            assert_eq!(r, h, "INFO tracking fields {fields:?}");
                        }
                    }));
                    if let Err(e) = result {
                        let msg = e
                            .downcast_ref::<String>()
                            .cloned()
                            .or_else(|| e.downcast_ref::<&str>().map(|s| s.to_string()))
                            .unwrap_or_default();
                        *slot = None;
                        return TestResult::error(format!("{what}: {msg}"));
                    }
                }
                t.check(&["CLIENT", "TRACKING", "off"]);
                w.check(&["FLUSHALL"]);
            }
            TestResult::passed()
        })
    }
    quickcheck_ops(30, 25, property as fn(Vec<Op>) -> TestResult);
}
