//! Blocking list and sorted-set commands (BLPOP, BRPOP, BLMOVE,
//! BRPOPLPUSH, BLMPOP, BZPOPMIN, BZPOPMAX, BZMPOP) against Redis: served at
//! once, errors, timeouts, wake-ups from other clients, the order clients
//! are served in, MULTI, disconnects and CLIENT UNBLOCK, in RESP2 and RESP3.
//!
//! Every waiting client is a pair of connections (one to each server) that
//! receives the same commands; its replies must match byte for byte.
//! Timing assertions are deliberately loose: a reply must not come before
//! the timeout, and must come well within a few seconds after it.

use std::time::{Duration, Instant};

use quickcheck::{Arbitrary, Gen, TestResult};

use super::harness::{
    check_both_protocols, compare_sequence, del_command, identical, quickcheck_ops, show,
    with_thread_pair, Conn, Pair,
};

/// A client of both servers: (Redis connection, hozon connection).
pub(super) struct Client {
    r: Conn,
    h: Conn,
}

impl Client {
    /// A new client of `p`'s servers, in RESP3 when `resp3`.
    pub(super) fn new(p: &Pair, resp3: bool) -> Client {
        let (r, h) = p.connect_more();
        let mut c = Client { r, h };
        if resp3 {
            c.r.call(&[b"HELLO", b"3"]);
            c.h.call(&[b"HELLO", b"3"]);
        }
        c
    }

    /// Sends `line` (split at spaces) to both servers without reading.
    pub(super) fn send(&mut self, line: &str) {
        let args: Vec<&[u8]> = line.split(' ').map(str::as_bytes).collect();
        let bytes = super::harness::encode_command(&args);
        self.r.send_raw(&bytes);
        self.h.send_raw(&bytes);
    }

    /// Sends `args` to both servers without reading.
    pub(super) fn send_args(&mut self, args: &[&str]) {
        let args: Vec<&[u8]> = args.iter().map(|a| a.as_bytes()).collect();
        let bytes = super::harness::encode_command(&args);
        self.r.send_raw(&bytes);
        self.h.send_raw(&bytes);
    }

    /// Sends `args` and checks the replies match.
    #[track_caller]
    pub(super) fn call_args(&mut self, args: &[&str]) -> Vec<u8> {
        self.send_args(args);
        self.reply()
    }

    /// Reads one reply from each server; they must be identical.
    #[track_caller]
    pub(super) fn reply(&mut self) -> Vec<u8> {
        let r = self.r.read_reply();
        let h = self.h.read_reply();
        assert_eq!(show(&r), show(&h), "replies differ (redis, hozon)");
        r
    }

    /// Sends `line` and checks the replies match.
    #[track_caller]
    pub(super) fn call(&mut self, line: &str) -> Vec<u8> {
        self.send(line);
        self.reply()
    }

    /// Asserts that neither server has answered yet (the client waits).
    #[track_caller]
    pub(super) fn assert_waiting(&mut self) {
        let wait = Duration::from_millis(150);
        if let Some(r) = self.r.try_read_reply(wait) {
            panic!("redis answered a waiting client: {}", show(&r));
        }
        if let Some(h) = self.h.try_read_reply(wait) {
            panic!("hozon answered a waiting client: {}", show(&h));
        }
    }
}

/// The `blocked_clients` field of INFO clients.
fn blocked_clients(conn: &mut Conn) -> Option<usize> {
    let info = conn.call(&[b"INFO", b"clients"]);
    let text = String::from_utf8_lossy(&info);
    text.lines()
        .find_map(|l| l.strip_prefix("blocked_clients:"))
        .and_then(|v| v.trim().parse().ok())
}

/// Waits until both servers report `n` blocked clients (the commands sent
/// were processed), for at most 5 s.
#[track_caller]
pub(super) fn wait_blocked(p: &mut Pair, n: usize) {
    let start = Instant::now();
    loop {
        let r = blocked_clients(&mut p.r);
        let h = blocked_clients(&mut p.h);
        if r == Some(n) && h == Some(n) {
            return;
        }
        if start.elapsed() > Duration::from_secs(5) {
            panic!("blocked_clients: expected {n}, redis {r:?}, hozon {h:?}");
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// Sends `line` from a new client, checks that it blocks, and waits until
/// both servers count it (with `before` clients already blocked).
#[track_caller]
fn blocked(p: &mut Pair, resp3: bool, line: &str, before: usize) -> Client {
    let mut c = Client::new(p, resp3);
    c.send(line);
    c.assert_waiting();
    wait_blocked(p, before + 1);
    c
}

// ---------------------------------------------------------------------------
// Without waiting.

const IMMEDIATE: &str = r#"
RPUSH l a b c d e
BLPOP none l 0
BRPOP l none 1.5
BLMPOP 0 2 none l LEFT COUNT 2
BLMPOP 0.01 1 l right
EXISTS l
RPUSH s x y z
BLMOVE s d LEFT RIGHT 0
blmove s d right Left 0
BRPOPLPUSH s d 0
LRANGE d 0 -1
EXISTS s
BLMOVE d d LEFT RIGHT 0
BRPOPLPUSH d d 0
LRANGE d 0 -1
ZADD z 1 a 2 b 3 c 4 d 5 e
BZPOPMIN none z 0
BZPOPMAX z 0
BZMPOP 0 2 none z MIN COUNT 2
BZMPOP 0 1 z max COUNT 10
EXISTS z
ZADD z 1.5 x
BZPOPMIN z 0
"#;

const WRONG_TYPES: &str = r#"
SET str v
BLPOP str 0
BLPOP none str 0
BRPOP str 1
BLMPOP 0 2 none str LEFT
BLMOVE str d LEFT LEFT 0
RPUSH s2 q
BLMOVE s2 str LEFT LEFT 0
BRPOPLPUSH s2 str 0
LLEN s2
BRPOPLPUSH str s2 0
BLPOP s2 str 0
BZPOPMIN str 0
BZPOPMAX none str 0
BZMPOP 0 1 str MIN
ZADD zz 1 a 2 b
RPUSH s2 q
BZPOPMIN s2 zz 0
BZMPOP 0 2 s2 zz MAX
BZPOPMIN zz s2 0
BLMPOP 0 2 zz s2 LEFT
"#;

const TIMEOUT_ERRORS: &str = r#"
BLPOP none abc
BLPOP none -1
BLPOP none -0.5
BLPOP none inf
BLPOP none 1e400
BLPOP none ""
BLPOP none nan
BRPOP none 1x
BLMOVE a b LEFT LEFT abc
BLMOVE a b LEFT LEFT -1
BLMOVE a b UP LEFT abc
BLMOVE a b LEFT DOWN 0
BRPOPLPUSH a b abc
BRPOPLPUSH a b -3
BZPOPMIN none abc
BZPOPMAX none -2
BLMPOP abc 1 none LEFT
BLMPOP -1 1 none LEFT
BZMPOP abc 1 none MIN
BZMPOP -0.5 1 none MIN
"#;

const MPOP_ERRORS: &str = r#"
BLMPOP abc 0 none LEFT
BLMPOP 0 0 none LEFT
BLMPOP 0 -1 none LEFT
BLMPOP 0 abc none LEFT
BLMPOP 0 2 none LEFT
BLMPOP 0 9223372036854775807 none LEFT
BLMPOP 0 1 none MIDDLE
BLMPOP 0 1 none LEFT COUNT 0
BLMPOP 0 1 none LEFT COUNT -1
BLMPOP 0 1 none LEFT COUNT abc
BLMPOP 0 1 none LEFT COUNT
BLMPOP 0 1 none LEFT COUNT 1 COUNT 1
BLMPOP 0 1 none LEFT FOO
BLMPOP abc 1 none LEFT COUNT 0
BLMPOP abc 1 none UP
BZMPOP abc 0 none MIN
BZMPOP 0 0 none MIN
BZMPOP 0 2 none MIN
BZMPOP 0 1 none LEFT
BZMPOP 0 1 none MIN COUNT 0
BZMPOP 0 1 none MAX COUNT
BZMPOP 0 1 none MAX COUNT 2 COUNT 2
BZMPOP 0 1 none MAX BAR
BZMPOP abc 1 none MIN COUNT -5
"#;

const ARITY_AND_INFO: &str = r#"
BLPOP none
BRPOP
BLMOVE a b LEFT LEFT
BLMOVE a b LEFT LEFT 0 extra
BRPOPLPUSH a b
BRPOPLPUSH a b 0 extra
BLMPOP 0 1 a
BZPOPMIN none
BZPOPMAX
BZMPOP 0 1 a
COMMAND INFO blpop brpop blmove brpoplpush blmpop bzpopmin bzpopmax bzmpop
COMMAND GETKEYS BLPOP a b c 0
COMMAND GETKEYS BLMOVE a b LEFT LEFT 0
COMMAND GETKEYS BRPOPLPUSH a b 0
COMMAND GETKEYS BLMPOP 0 2 a b LEFT
COMMAND GETKEYS BZPOPMAX a b 0
COMMAND GETKEYS BZMPOP 0 2 a b MIN COUNT 1
"#;

#[test]
fn blocking_commands_served_at_once_match_redis() {
    check_both_protocols(IMMEDIATE);
}

#[test]
fn blocking_commands_reject_wrong_types_before_blocking() {
    check_both_protocols(WRONG_TYPES);
}

#[test]
fn blocking_commands_argument_errors_match_redis() {
    check_both_protocols(&[TIMEOUT_ERRORS, MPOP_ERRORS, ARITY_AND_INFO].concat());
}

#[test]
fn blocking_commands_inside_multi_answer_the_timeout_reply_at_once() {
    let script = r#"
RPUSH full x
MULTI
BLPOP none 0
BRPOP none 1
BLMOVE none d LEFT LEFT 0
BRPOPLPUSH none d 0
BLMPOP 0 1 none LEFT
BZPOPMIN none 0
BZPOPMAX none 0
BZMPOP 0 1 none MIN COUNT 2
BLPOP full 0
BRPOPLPUSH d d 0
EXEC
MULTI
BLPOP none abc
EXEC
"#;
    check_both_protocols(script);
}

// ---------------------------------------------------------------------------
// Timeouts.

/// Sends `line` from `c` to both servers at once and checks both answer
/// the same, no sooner than `at_least` and within a few seconds more.
#[track_caller]
fn check_times_out(c: &mut Client, line: &str, at_least: Duration) -> Vec<u8> {
    let start = Instant::now();
    c.send(line);
    let r = c.r.read_reply();
    let redis_elapsed = start.elapsed();
    let h = c.h.read_reply();
    let hozon_elapsed = start.elapsed();
    assert_eq!(show(&r), show(&h), "timeout replies differ for {line}");
    // Milliseconds of slack for clock granularity.
    let floor = at_least.saturating_sub(Duration::from_millis(20));
    assert!(
        redis_elapsed >= floor,
        "redis answered {line} after {redis_elapsed:?}"
    );
    assert!(
        hozon_elapsed >= floor,
        "hozon answered {line} after {hozon_elapsed:?}"
    );
    assert!(
        hozon_elapsed < at_least + Duration::from_secs(3),
        "hozon answered {line} only after {hozon_elapsed:?}"
    );
    r
}

fn timeouts(resp3: bool) {
    let p = Pair::new();
    let mut c = Client::new(&p, resp3);
    let wait = Duration::from_millis(200);
    let null = if resp3 { "_\r\n" } else { "*-1\r\n" };
    for line in [
        "BLPOP none 0.2",
        "BRPOP none other 0.2",
        "BLMPOP 0.2 2 none other LEFT COUNT 3",
        "BZPOPMIN none 0.2",
        "BZPOPMAX none 0.2",
        "BZMPOP 0.2 1 none MAX",
        // A wait that times out answers a null array even for BLMOVE
        // (a null bulk only where it cannot block).
        "BLMOVE none d LEFT RIGHT 0.2",
        "BRPOPLPUSH none d 0.2",
    ] {
        let reply = check_times_out(&mut c, line, wait);
        assert_eq!(show(&reply), show(null.as_bytes()), "{line}");
    }
    // Seconds are rounded up to the millisecond; tiny timeouts still wait.
    check_times_out(&mut c, "BLPOP none 0.0001", Duration::ZERO);
    check_times_out(&mut c, "BLPOP none 1.25e-1", Duration::from_millis(125));
    // The wait neither changed nor created anything.
    c.call("DBSIZE");
}

#[test]
fn fractional_timeouts_answer_the_null_reply_after_the_wait() {
    timeouts(false);
}

#[test]
fn fractional_timeouts_answer_the_null_reply_after_the_wait_resp3() {
    timeouts(true);
}

// ---------------------------------------------------------------------------
// Wake-ups.

fn wake_ups(resp3: bool) {
    let mut p = Pair::new();
    let mut other = Client::new(&p, resp3);

    // A push wakes a list waiter; the pushing client sees the length
    // before the pop.
    let mut c = blocked(&mut p, resp3, "BLPOP q 0", 0);
    other.call("RPUSH q a b");
    c.reply();
    other.call("LRANGE q 0 -1");
    c.call("BRPOP q 0");
    other.call("EXISTS q");

    // BRPOP on several keys, woken by LPUSH on the second.
    c.send("BRPOP q1 q2 0");
    c.assert_waiting();
    wait_blocked(&mut p, 1);
    other.call("LPUSH q2 x y");
    c.reply();
    other.call("LRANGE q2 0 -1");

    // LMOVE into a waited key wakes the waiter.
    other.call("RPUSH src s1 s2");
    c.send("BLPOP dst 0");
    c.assert_waiting();
    wait_blocked(&mut p, 1);
    other.call("LMOVE src dst LEFT RIGHT");
    c.reply();
    other.call("LRANGE dst 0 -1");

    // BLMPOP takes up to COUNT from the key that received data.
    c.send("BLMPOP 0 2 m1 m2 RIGHT COUNT 2");
    c.assert_waiting();
    wait_blocked(&mut p, 1);
    other.call("RPUSH m2 1 2 3");
    c.reply();
    other.call("LRANGE m2 0 -1");

    // BLMOVE woken by a push; the element lands in the destination.
    c.send("BLMOVE mv dest RIGHT LEFT 0");
    c.assert_waiting();
    wait_blocked(&mut p, 1);
    other.call("RPUSH mv e1 e2");
    c.reply();
    other.call("LRANGE mv 0 -1");
    other.call("LRANGE dest 0 -1");
    c.send("BRPOPLPUSH mv2 dest 5");
    c.assert_waiting();
    wait_blocked(&mut p, 1);
    other.call("LPUSH mv2 e3");
    c.reply();
    other.call("LRANGE dest 0 -1");

    // Sorted sets: ZADD wakes BZPOPMIN, BZPOPMAX and BZMPOP.
    c.send("BZPOPMIN z1 z2 0");
    c.assert_waiting();
    wait_blocked(&mut p, 1);
    other.call("ZADD z2 3 c 1.5 a 2 b");
    c.reply();
    c.call("BZPOPMAX z2 0");
    other.call("ZRANGE z2 0 -1 WITHSCORES");
    c.send("BZMPOP 0 2 z3 z5 MAX COUNT 5");
    c.assert_waiting();
    wait_blocked(&mut p, 1);
    other.call("ZADD z3 1 a 2 b 3 c");
    c.reply();
    other.call("EXISTS z3");
    c.send("BZPOPMAX z4 0");
    c.assert_waiting();
    wait_blocked(&mut p, 1);
    other.call("ZINCRBY z4 2.5 m");
    c.reply();

    // Nothing is left blocked, nothing unexpected in the keyspace.
    wait_blocked(&mut p, 0);
    p.check(&["DBSIZE"]);
}

#[test]
fn pushes_and_zadds_from_another_client_wake_the_waiter() {
    wake_ups(false);
}

#[test]
fn pushes_and_zadds_from_another_client_wake_the_waiter_resp3() {
    wake_ups(true);
}

#[test]
fn waiting_clients_are_served_first_come_first_served() {
    let mut p = Pair::new();
    let mut other = Client::new(&p, false);
    let mut first = blocked(&mut p, false, "BLPOP q 0", 0);
    let mut second = blocked(&mut p, false, "BRPOP q 0", 1);
    let mut third = blocked(&mut p, true, "BLMPOP 0 1 q LEFT COUNT 2", 2);
    let mut fourth = blocked(&mut p, false, "BLPOP q 0", 3);
    other.call("RPUSH q a b c d");
    first.reply();
    second.reply();
    third.reply();
    // The list ran out: the last one still waits.
    fourth.assert_waiting();
    wait_blocked(&mut p, 1);
    other.call("EXISTS q");
    other.call("RPUSH q f");
    fourth.reply();

    // One element for two waiters on a sorted set: only the first is
    // served.
    let mut a = blocked(&mut p, false, "BZPOPMIN z 0", 0);
    let mut b = blocked(&mut p, false, "BZPOPMAX z 0.5", 1);
    other.call("ZADD z 1 m");
    a.reply();
    // b keeps waiting until its own timeout.
    b.reply();
    other.call("EXISTS z");
}

#[test]
fn a_client_waiting_on_several_keys_is_served_from_the_first_ready() {
    let mut p = Pair::new();
    let mut other = Client::new(&p, false);
    let mut c = blocked(&mut p, false, "BLPOP k1 k2 0", 0);
    other.call("MULTI");
    other.call("RPUSH k2 from-k2");
    other.call("RPUSH k1 from-k1");
    other.call("EXEC");
    c.reply();
    other.call("LRANGE k1 0 -1");
    other.call("LRANGE k2 0 -1");

    let mut z = blocked(&mut p, false, "BZMPOP 0 2 z1 z2 MIN COUNT 9", 0);
    other.call("MULTI");
    other.call("ZADD z2 1 a 2 b");
    other.call("ZADD z1 5 x");
    other.call("EXEC");
    z.reply();
    other.call("ZRANGE z1 0 -1");
    other.call("ZRANGE z2 0 -1");
}

#[test]
fn served_moves_wake_clients_waiting_on_the_destination() {
    let mut p = Pair::new();
    let mut other = Client::new(&p, false);
    let mut mover = blocked(&mut p, false, "BLMOVE a b LEFT RIGHT 0", 0);
    let mut second = blocked(&mut p, false, "BRPOPLPUSH b c 0", 1);
    let mut last = blocked(&mut p, false, "BLPOP c 0", 2);
    other.call("RPUSH a v");
    mover.reply();
    second.reply();
    last.reply();
    wait_blocked(&mut p, 0);
    p.check(&["DBSIZE"]);
}

#[test]
fn keys_of_another_type_do_not_wake_waiters() {
    let mut p = Pair::new();
    let mut other = Client::new(&p, false);
    let mut list = blocked(&mut p, false, "BLPOP k 0", 0);
    let mut zset = blocked(&mut p, false, "BZPOPMIN k 0", 1);
    other.call("SET k str");
    other.call("DEL k");
    other.call("ZADD k 1 m");
    zset.reply();
    list.assert_waiting();
    other.call("HSET k f v");
    other.call("DEL k");
    other.call("LPUSH k e");
    list.reply();

    // A destination that changed type unblocks BLMOVE with an error and
    // leaves the source's element where it was.
    let mut mover = blocked(&mut p, false, "BLMOVE src dst LEFT LEFT 0", 0);
    other.call("SET dst str");
    other.call("RPUSH src x");
    mover.reply();
    other.call("LRANGE src 0 -1");
    wait_blocked(&mut p, 0);
}

#[test]
fn a_waiting_client_that_disconnects_leaves_nothing_behind() {
    let mut p = Pair::new();
    let mut other = Client::new(&p, false);
    let gone = blocked(&mut p, false, "BLPOP q 0", 0);
    let gone_z = blocked(&mut p, false, "BZPOPMIN z 0", 1);
    drop(gone);
    drop(gone_z);
    wait_blocked(&mut p, 0);
    other.call("RPUSH q kept");
    other.call("ZADD z 1 kept");
    other.call("LRANGE q 0 -1");
    other.call("ZRANGE z 0 -1");
}

/// CLIENT ID of both connections of `c`.
fn client_ids(c: &mut Client) -> (String, String) {
    let id = |reply: Vec<u8>| String::from_utf8_lossy(&reply[1..reply.len() - 2]).into_owned();
    (
        id(c.r.call(&[b"CLIENT", b"ID"])),
        id(c.h.call(&[b"CLIENT", b"ID"])),
    )
}

/// CLIENT UNBLOCK of `ids` with `how` (empty for the default).
fn unblock(other: &mut Client, ids: &(String, String), how: &str) -> (Vec<u8>, Vec<u8>) {
    let mut r_args: Vec<&[u8]> = vec![b"CLIENT", b"UNBLOCK", ids.0.as_bytes()];
    let mut h_args: Vec<&[u8]> = vec![b"CLIENT", b"UNBLOCK", ids.1.as_bytes()];
    if !how.is_empty() {
        r_args.push(how.as_bytes());
        h_args.push(how.as_bytes());
    }
    (other.r.call(&r_args), other.h.call(&h_args))
}

fn client_unblock(resp3: bool) {
    let mut p = Pair::new();
    let mut other = Client::new(&p, resp3);
    for (line, how) in [
        ("BLPOP q 0", ""),
        ("BLMOVE q d LEFT LEFT 0", "TIMEOUT"),
        ("BZMPOP 0 1 z MIN", "timeout"),
        ("BRPOPLPUSH q d 0", "ERROR"),
        ("BZPOPMAX z 0", "error"),
    ] {
        let mut c = Client::new(&p, resp3);
        let ids = client_ids(&mut c);
        c.send(line);
        c.assert_waiting();
        wait_blocked(&mut p, 1);
        let (r, h) = unblock(&mut other, &ids, how);
        assert_eq!(show(&r), show(&h), "CLIENT UNBLOCK {how} of {line}");
        assert_eq!(show(&r), show(b":1\r\n"));
        let reply = c.reply();
        if how.eq_ignore_ascii_case("error") {
            assert_eq!(
                show(&reply),
                show(b"-UNBLOCKED client unblocked via CLIENT UNBLOCK\r\n")
            );
        }
        wait_blocked(&mut p, 0);
        // The client is usable again, and an unblocked client is not
        // blocked any more.
        c.call("PING");
        let (r, h) = unblock(&mut other, &ids, "");
        assert_eq!(
            (r.as_slice(), h.as_slice()),
            (&b":0\r\n"[..], &b":0\r\n"[..])
        );
    }
    // Data arriving later stays in the keyspace.
    other.call("RPUSH q x");
    other.call("LRANGE q 0 -1");
}

#[test]
fn client_unblock_answers_the_timeout_reply_or_the_unblocked_error() {
    client_unblock(false);
}

#[test]
fn client_unblock_answers_the_timeout_reply_or_the_unblocked_error_resp3() {
    client_unblock(true);
}

#[test]
fn a_waiting_client_with_a_timeout_is_still_served_by_a_push() {
    let mut p = Pair::new();
    let mut other = Client::new(&p, false);
    let mut c = blocked(&mut p, false, "BLPOP q 3", 0);
    other.call("RPUSH q x");
    let start = Instant::now();
    c.reply();
    assert!(start.elapsed() < Duration::from_secs(2));
    // The old deadline does not fire on the next command.
    c.send("BLPOP q 0.3");
    std::thread::sleep(Duration::from_millis(100));
    other.call("RPUSH q y");
    c.reply();
    c.call("PING");
}

// ---------------------------------------------------------------------------
// Random sequences.

const KEYS: &[&str] = &["ka", "kb", "kc"];

/// One command from a small space: pushes and ZADDs, every blocking
/// command with a 10 ms timeout (so an empty key costs little), and
/// writes of other types for WRONGTYPE paths.
#[derive(Debug, Clone)]
struct Op(Vec<String>);

fn pick<T: Copy>(g: &mut Gen, items: &[T]) -> T {
    *g.choose(items).expect("non-empty choice list")
}

impl Arbitrary for Op {
    fn arbitrary(g: &mut Gen) -> Op {
        let key = pick(g, KEYS).to_string();
        let key2 = pick(g, KEYS).to_string();
        let el = pick(g, &["x", "y", "z", "1", "2"]).to_string();
        let score = pick(g, &["1", "2.5", "-3", "1e3"]).to_string();
        let end = pick(g, &["LEFT", "RIGHT"]).to_string();
        let end2 = pick(g, &["left", "right"]).to_string();
        let count = pick(g, &["1", "2", "5"]).to_string();
        let timeout = "0.01".to_string();
        let words: Vec<String> = match u8::arbitrary(g) % 20 {
            0..=3 => vec![pick(g, &["LPUSH", "RPUSH"]).into(), key, el.clone(), el],
            4..=6 => vec!["ZADD".into(), key, score, el],
            7 => vec![pick(g, &["BLPOP", "BRPOP"]).into(), key, timeout],
            8 => vec![pick(g, &["BLPOP", "BRPOP"]).into(), key, key2, timeout],
            9 => vec!["BLMOVE".into(), key, key2, end, end2, timeout],
            10 => vec!["BRPOPLPUSH".into(), key, key2, timeout],
            11 => vec![
                "BLMPOP".into(),
                timeout,
                "2".into(),
                key,
                key2,
                end,
                "COUNT".into(),
                count,
            ],
            12 => vec![pick(g, &["BZPOPMIN", "BZPOPMAX"]).into(), key, timeout],
            13 => vec![
                pick(g, &["BZPOPMIN", "BZPOPMAX"]).into(),
                key,
                key2,
                timeout,
            ],
            14 => vec![
                "BZMPOP".into(),
                timeout,
                "2".into(),
                key,
                key2,
                pick(g, &["MIN", "MAX"]).into(),
                "COUNT".into(),
                count,
            ],
            15 => vec!["SET".into(), key, el],
            16 => vec!["DEL".into(), key],
            17 => vec!["LRANGE".into(), key, "0".into(), "-1".into()],
            18 => vec![
                "ZRANGE".into(),
                key,
                "0".into(),
                "-1".into(),
                "WITHSCORES".into(),
            ],
            _ => vec!["TYPE".into(), key],
        };
        Op(words)
    }

    fn shrink(&self) -> Box<dyn Iterator<Item = Op>> {
        Box::new(std::iter::empty())
    }
}

/// Runs `ops` from an empty keyspace and compares every reply, then the
/// final contents of every key.
fn random_sequence_matches(ops: Vec<Op>, resp3: bool) -> TestResult {
    let mut all = vec![del_command(KEYS)];
    all.extend(ops.into_iter().map(|op| op.0));
    for key in KEYS {
        all.push(vec!["TYPE".into(), key.to_string()]);
        all.push(vec![
            "LRANGE".into(),
            key.to_string(),
            "0".into(),
            "-1".into(),
        ]);
        all.push(vec![
            "ZRANGE".into(),
            key.to_string(),
            "0".into(),
            "-1".into(),
        ]);
    }
    with_thread_pair(resp3, |p| compare_sequence(p, &all, 0, identical))
}

#[test]
fn random_blocking_sequences_match_redis() {
    quickcheck_ops(30, 30, |ops: Vec<Op>| random_sequence_matches(ops, false));
}

#[test]
fn random_blocking_sequences_match_redis_resp3() {
    quickcheck_ops(30, 20, |ops: Vec<Op>| random_sequence_matches(ops, true));
}
