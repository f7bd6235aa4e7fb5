//! Differential tests for transactions: MULTI / EXEC / DISCARD / WATCH /
//! UNWATCH, checked byte for byte against Redis 7.0 in RESP2 and RESP3,
//! including WATCH invalidation by other clients, by expiry and by
//! database-wide commands, and a random test of small transactions.

use std::time::Duration;

use quickcheck::{Arbitrary, Gen, TestResult};

use crate::harness::{
    array_elements, check_both_protocols, encode_command, quickcheck_ops, show, with_thread_pair,
    Conn, Pair,
};

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

    /// Sends to both servers and asserts identical raw replies.
    #[track_caller]
    fn check(&mut self, args: &[&str]) -> Vec<u8> {
        let bytes: Vec<&[u8]> = args.iter().map(|a| a.as_bytes()).collect();
        let r = self.r.call(&bytes);
        let h = self.h.call(&bytes);
        assert_same(args, &r, &h);
        r
    }

    /// One command per line, each reply compared.
    #[track_caller]
    fn script(&mut self, text: &str) {
        for words in script_lines(text) {
            let refs: Vec<&str> = words.iter().map(String::as_str).collect();
            self.check(&refs);
        }
    }

    fn resp3(&mut self) {
        self.r.call(&[b"HELLO", b"3"]);
        self.h.call(&[b"HELLO", b"3"]);
    }
}

#[track_caller]
fn assert_same(args: &[&str], r: &[u8], h: &[u8]) {
    assert!(
        r == h,
        "replies differ for {:?}\n  redis: {}\n  hozon: {}",
        args.join(" "),
        show(r),
        show(h)
    );
}

fn script_lines(text: &str) -> Vec<Vec<String>> {
    text.lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
        .map(|l| {
            crate::harness::split_line(l)
                .into_iter()
                .map(|a| String::from_utf8(a).expect("script lines are UTF-8"))
                .collect()
        })
        .collect()
}

/// Checks the command on both servers and that Redis answered `expected`
/// (so the test documents, and verifies, what it relies on).
#[track_caller]
fn check_is(p: &mut Pair, args: &[&str], expected: &str) {
    let r = p.check(args);
    assert_eq!(
        show(&r),
        show(expected.as_bytes()),
        "Redis itself answered {args:?} unexpectedly (the test's premise is wrong)"
    );
}

const NULL_ARRAY_RESP2: &str = "*-1\r\n";
const NULL_RESP3: &str = "_\r\n";

// ---------------------------------------------------------------------------
// Basics and errors.

#[test]
fn multi_exec_basics_and_queued_replies() {
    check_both_protocols(
        "RPUSH mylist a b c\n\
         MULTI\n\
         LRANGE mylist 0 -1\n\
         PING\n\
         PING hello\n\
         SET k v\n\
         GET k\n\
         EXEC\n\
         GET k\n\
         # An empty transaction.\n\
         MULTI\n\
         EXEC\n\
         # Commands are case-insensitive, QUEUED for each.\n\
         multi\n\
         incr counter\n\
         IncrBy counter 10\n\
         exec\n\
         # Commands that rewrite their arguments (SPOP is logged as SREM).\n\
         SADD myset a\n\
         MULTI\n\
         SPOP myset\n\
         EXISTS myset\n\
         EXEC\n\
         # DISCARD drops the queue.\n\
         MULTI\n\
         DEL mylist\n\
         DISCARD\n\
         LRANGE mylist 0 -1\n\
         EXEC\n",
    );
}

#[test]
fn transaction_command_errors_outside_and_inside_multi() {
    check_both_protocols(
        "EXEC\n\
         DISCARD\n\
         UNWATCH\n\
         MULTI extra\n\
         EXEC extra\n\
         DISCARD extra\n\
         WATCH\n\
         UNWATCH extra\n\
         # Nested MULTI is an error that does not abort the transaction.\n\
         MULTI\n\
         SET a 1\n\
         MULTI\n\
         SET b 2\n\
         EXEC\n\
         MGET a b\n\
         # WATCH inside MULTI: an error, the transaction still runs.\n\
         MULTI\n\
         WATCH a\n\
         INCR a\n\
         EXEC\n\
         # An arity error on EXEC inside MULTI flags the transaction.\n\
         MULTI\n\
         INCR a\n\
         EXEC extra\n\
         EXEC\n\
         GET a\n\
         # DISCARD with a wrong arity inside MULTI likewise.\n\
         MULTI\n\
         INCR a\n\
         DISCARD extra\n\
         EXEC\n\
         GET a\n\
         # MULTI with an argument inside MULTI.\n\
         MULTI\n\
         MULTI extra\n\
         EXEC\n",
    );
}

#[test]
fn queued_errors_abort_exec_with_execabort() {
    check_both_protocols(
        "DEL foo1 foo2\n\
         MULTI\n\
         SET foo1 bar1\n\
         NON-EXISTING-COMMAND a b\n\
         SET foo2 bar2\n\
         EXEC\n\
         EXISTS foo1 foo2\n\
         # The client left MULTI state.\n\
         PING\n\
         EXEC\n\
         # Wrong arity while queueing.\n\
         MULTI\n\
         SET foo1 bar1\n\
         SET foo2\n\
         GET\n\
         EXEC\n\
         EXISTS foo1 foo2\n\
         # Errors after the first one are still reported, and the queue keeps\n\
         # answering QUEUED for valid commands.\n\
         MULTI\n\
         NOPE\n\
         SET foo1 x\n\
         GET foo1 extra\n\
         DISCARD\n\
         EXISTS foo1\n\
         # A command not allowed inside a transaction.\n\
         MULTI\n\
         SET foo1 bar\n\
         SHUTDOWN\n\
         EXEC\n\
         GET foo1\n\
         # An unknown subcommand is a queueing error too; a syntax error\n\
         # found only when running (CLIENT LIST extra x) is not.\n\
         MULTI\n\
         OBJECT NOPE\n\
         SET foo1 1\n\
         EXEC\n\
         GET foo1\n\
         MULTI\n\
         SET foo1 1\n\
         CLIENT NOSUCH\n\
         EXEC\n\
         MULTI\n\
         SET foo1 2\n\
         OBJECT ENCODING foo1 extra\n\
         CLIENT GETNAME\n\
         EXEC\n\
         GET foo1\n",
    );
}

#[test]
fn execabort_clears_watched_keys() {
    let mut p = Pair::new();
    let mut other = Client::new(&p);
    p.check(&["SET", "x", "1"]);
    p.check(&["WATCH", "x"]);
    p.check(&["MULTI"]);
    p.check(&["NOPE"]);
    p.check(&["EXEC"]);
    // x is no longer watched: a change by another client does not matter.
    other.check(&["SET", "x", "2"]);
    p.check(&["MULTI"]);
    p.check(&["GET", "x"]);
    check_is(&mut p, &["EXEC"], "*1\r\n$1\r\n2\r\n");
}

#[test]
fn runtime_errors_inside_exec_do_not_abort_the_rest() {
    check_both_protocols(
        "DEL s l n\n\
         SET s hello\n\
         RPUSH l a\n\
         MULTI\n\
         INCR s\n\
         LPUSH s x\n\
         SET n 5\n\
         INCRBY n notanumber\n\
         LPOP s\n\
         HSET l f v\n\
         INCR n\n\
         SELECT 99\n\
         GET s\n\
         EXEC\n\
         GET n\n\
         LRANGE l 0 -1\n\
         # A syntax error known only when running is a runtime error too.\n\
         MULTI\n\
         SET s v NX XX\n\
         ZADD z INCR 1 a 2 b\n\
         EXPIRE s notanumber\n\
         GET s\n\
         EXEC\n",
    );
}

#[test]
fn exec_reply_shapes_in_resp2_and_resp3() {
    check_both_protocols(
        "DEL h z s l str\n\
         HSET h f1 v1 f2 v2\n\
         ZADD z 1.5 a 2 b\n\
         SADD s 3 1 2\n\
         SET str 10\n\
         MULTI\n\
         HGETALL h\n\
         ZSCORE z a\n\
         ZRANGE z 0 -1 WITHSCORES\n\
         SMEMBERS s\n\
         GET missing\n\
         LPOP missing\n\
         LPOP missing 2\n\
         HGET h nofield\n\
         EXISTS h\n\
         INCRBYFLOAT str 0.5\n\
         ZINCRBY z 1 a\n\
         HMGET h f1 nofield\n\
         SISMEMBER s 1\n\
         TYPE h\n\
         ECHO hi\n\
         EXEC\n\
         # A transaction of only errors and nulls.\n\
         MULTI\n\
         GET h\n\
         ZSCORE z nomember\n\
         EXEC\n",
    );
}

#[test]
fn pipelined_transaction_replies_arrive_in_order() {
    for resp3 in [false, true] {
        let mut p = Pair::new();
        if resp3 {
            p.resp3();
        }
        let mut bytes = Vec::new();
        let commands: Vec<Vec<&str>> = vec![
            vec!["MULTI"],
            vec!["SET", "a", "1"],
            vec!["INCR", "a"],
            vec!["NOPE"],
            vec!["GET", "a"],
            vec!["EXEC"],
            vec!["MULTI"],
            vec!["INCR", "a"],
            vec!["LPUSH", "a", "x"],
            vec!["EXEC"],
            vec!["GET", "a"],
        ];
        for c in &commands {
            let args: Vec<&[u8]> = c.iter().map(|a| a.as_bytes()).collect();
            bytes.extend(encode_command(&args));
        }
        p.r.send_raw(&bytes);
        p.h.send_raw(&bytes);
        for c in &commands {
            let r = p.r.read_reply();
            let h = p.h.read_reply();
            assert_same(c, &r, &h);
        }
    }
}

// ---------------------------------------------------------------------------
// WATCH.

#[test]
fn watched_key_modified_by_another_client_makes_exec_return_null() {
    for resp3 in [false, true] {
        let mut p = Pair::new();
        let mut other = Client::new(&p);
        let null = if resp3 {
            p.resp3();
            NULL_RESP3
        } else {
            NULL_ARRAY_RESP2
        };
        p.check(&["SET", "x", "30"]);
        p.check(&["WATCH", "x"]);
        other.check(&["SET", "x", "40"]);
        p.check(&["MULTI"]);
        p.check(&["INCR", "x"]);
        check_is(&mut p, &["EXEC"], null);
        p.check(&["GET", "x"]);
        // One modified key among five watched ones.
        p.check(&["WATCH", "a", "b", "x", "k", "z"]);
        other.check(&["SET", "x", "50"]);
        p.check(&["MULTI"]);
        p.check(&["PING"]);
        check_is(&mut p, &["EXEC"], null);
        // Watched keys not modified: EXEC runs.
        p.check(&["WATCH", "x", "y", "z"]);
        p.check(&["WATCH", "k"]);
        other.check(&["GET", "x"]);
        other.check(&["SET", "unrelated", "1"]);
        p.check(&["MULTI"]);
        p.check(&["INCR", "x"]);
        p.check(&["EXEC"]);
        // Another client's EXEC writing the key invalidates too.
        p.check(&["WATCH", "x"]);
        other.check(&["MULTI"]);
        other.check(&["INCR", "x"]);
        other.check(&["EXEC"]);
        p.check(&["MULTI"]);
        p.check(&["PING"]);
        check_is(&mut p, &["EXEC"], null);
        // A modification while the watching client is queueing counts.
        p.check(&["WATCH", "x"]);
        p.check(&["MULTI"]);
        p.check(&["PING"]);
        other.check(&["DEL", "x"]);
        p.check(&["PING"]);
        check_is(&mut p, &["EXEC"], null);
    }
}

#[test]
fn watch_on_missing_key_that_another_client_creates() {
    let mut p = Pair::new();
    let mut other = Client::new(&p);
    p.check(&["DEL", "x"]);
    p.check(&["WATCH", "x"]);
    other.check(&["SET", "x", "new"]);
    p.check(&["MULTI"]);
    p.check(&["SET", "x", "mine"]);
    check_is(&mut p, &["EXEC"], NULL_ARRAY_RESP2);
    p.check(&["GET", "x"]);
    // Created as another type, by an element-adding command.
    p.check(&["WATCH", "l"]);
    other.check(&["RPUSH", "l", "a"]);
    p.check(&["MULTI"]);
    p.check(&["PING"]);
    check_is(&mut p, &["EXEC"], NULL_ARRAY_RESP2);
}

/// What another client does to a watched key, and whether EXEC then fails.
struct Scenario {
    name: &'static str,
    /// Run (on the watching client, before WATCH) after FLUSHALL.
    setup: &'static str,
    /// WATCH arguments.
    watch: &'static [&'static str],
    /// Run by the other client between WATCH and EXEC.
    other: &'static str,
    /// Whether Redis's EXEC returns the null reply.
    aborted: bool,
}

const SCENARIOS: &[Scenario] = &[
    Scenario {
        name: "DEL of the watched key",
        setup: "SET x 1",
        watch: &["x"],
        other: "DEL x",
        aborted: true,
    },
    Scenario {
        name: "DEL of a missing watched key (nothing deleted)",
        setup: "",
        watch: &["x"],
        other: "DEL x",
        aborted: false,
    },
    Scenario {
        name: "UNLINK of the watched key",
        setup: "SET x 1",
        watch: &["x"],
        other: "UNLINK x",
        aborted: true,
    },
    Scenario {
        name: "EXPIRE on the watched key",
        setup: "SET x 1",
        watch: &["x"],
        other: "EXPIRE x 10",
        aborted: true,
    },
    Scenario {
        name: "EXPIRE on a missing watched key",
        setup: "",
        watch: &["x"],
        other: "EXPIRE x 10",
        aborted: false,
    },
    Scenario {
        name: "PEXPIRE in the past deletes the key",
        setup: "SET x 1",
        watch: &["x"],
        other: "PEXPIRE x 0",
        aborted: true,
    },
    Scenario {
        name: "PERSIST on a key without a TTL changes nothing",
        setup: "SET x 1",
        watch: &["x"],
        other: "PERSIST x",
        aborted: false,
    },
    Scenario {
        name: "PERSIST removing a TTL",
        setup: "SET x 1 EX 100",
        watch: &["x"],
        other: "PERSIST x",
        aborted: true,
    },
    Scenario {
        name: "EXPIRE NX refused because of an existing TTL",
        setup: "SET x 1 EX 100",
        watch: &["x"],
        other: "EXPIRE x 50 NX",
        aborted: false,
    },
    Scenario {
        name: "SET to the same value",
        setup: "SET x 1",
        watch: &["x"],
        other: "SET x 1",
        aborted: true,
    },
    Scenario {
        name: "SET NX refused",
        setup: "SET x 1",
        watch: &["x"],
        other: "SET x 2 NX",
        aborted: false,
    },
    Scenario {
        name: "APPEND of an empty string",
        setup: "SET x 1",
        watch: &["x"],
        other: "APPEND x \"\"",
        aborted: true,
    },
    Scenario {
        name: "INCR failing on a non-integer",
        setup: "SET x abc",
        watch: &["x"],
        other: "INCR x",
        aborted: false,
    },
    Scenario {
        name: "a command failing with WRONGTYPE",
        setup: "SET x 1",
        watch: &["x"],
        other: "LPUSH x a",
        aborted: false,
    },
    Scenario {
        name: "SADD of an existing member",
        setup: "SADD s a",
        watch: &["s"],
        other: "SADD s a",
        aborted: false,
    },
    Scenario {
        name: "SADD of a new member",
        setup: "SADD s a",
        watch: &["s"],
        other: "SADD s b",
        aborted: true,
    },
    Scenario {
        name: "SREM of a missing member",
        setup: "SADD s a",
        watch: &["s"],
        other: "SREM s zz",
        aborted: false,
    },
    Scenario {
        name: "LPOP on a missing list",
        setup: "",
        watch: &["l"],
        other: "LPOP l",
        aborted: false,
    },
    Scenario {
        name: "RPUSH on a watched list",
        setup: "RPUSH l a",
        watch: &["l"],
        other: "RPUSH l b",
        aborted: true,
    },
    Scenario {
        name: "HDEL of a missing field",
        setup: "HSET h f v",
        watch: &["h"],
        other: "HDEL h nofield",
        aborted: false,
    },
    Scenario {
        name: "ZADD of an existing member with the same score",
        setup: "ZADD z 1 a",
        watch: &["z"],
        other: "ZADD z 1 a",
        aborted: false,
    },
    Scenario {
        name: "ZADD changing a score",
        setup: "ZADD z 1 a",
        watch: &["z"],
        other: "ZADD z 2 a",
        aborted: true,
    },
    Scenario {
        name: "RENAME of the watched key (source)",
        setup: "SET x 1",
        watch: &["x"],
        other: "RENAME x y",
        aborted: true,
    },
    Scenario {
        name: "RENAME onto the watched key (destination)",
        setup: "SET y 1",
        watch: &["x"],
        other: "RENAME y x",
        aborted: true,
    },
    Scenario {
        name: "RENAME of a key onto itself",
        setup: "SET x 1",
        watch: &["x"],
        other: "RENAME x x",
        aborted: false,
    },
    Scenario {
        name: "RENAMENX refused",
        setup: "SET x 1\nSET y 2",
        watch: &["x", "y"],
        other: "RENAMENX x y",
        aborted: false,
    },
    Scenario {
        name: "MOVE of the watched key to another database",
        setup: "SET x 1",
        watch: &["x"],
        other: "MOVE x 1",
        aborted: true,
    },
    Scenario {
        name: "COPY onto the watched key",
        setup: "SET y 1",
        watch: &["x"],
        other: "COPY y x",
        aborted: true,
    },
    Scenario {
        name: "COPY from the watched key (only read)",
        setup: "SET x 1",
        watch: &["x"],
        other: "COPY x y",
        aborted: false,
    },
    Scenario {
        name: "FLUSHDB with the watched key present",
        setup: "SET x 1",
        watch: &["x"],
        other: "FLUSHDB",
        aborted: true,
    },
    Scenario {
        name: "FLUSHDB with the watched key missing",
        setup: "SET y 1",
        watch: &["x"],
        other: "FLUSHDB",
        aborted: false,
    },
    Scenario {
        name: "FLUSHDB of another database",
        setup: "SET x 1",
        watch: &["x"],
        other: "SELECT 1\nFLUSHDB\nSELECT 0",
        aborted: false,
    },
    Scenario {
        name: "FLUSHALL with the watched key present",
        setup: "SET x 1",
        watch: &["x"],
        other: "FLUSHALL",
        aborted: true,
    },
    Scenario {
        name: "FLUSHALL with the watched key missing",
        setup: "SET y 1",
        watch: &["x"],
        other: "FLUSHALL",
        aborted: false,
    },
    Scenario {
        name: "SWAPDB with the watched key in the watched database",
        setup: "SET x 30",
        watch: &["x"],
        other: "SWAPDB 0 1",
        aborted: true,
    },
    Scenario {
        name: "SWAPDB bringing the watched key in from the other database",
        setup: "SELECT 1\nSET x 30\nSELECT 0",
        watch: &["x"],
        other: "SWAPDB 0 1",
        aborted: true,
    },
    Scenario {
        name: "SWAPDB with the watched key in neither database",
        setup: "SET y 1",
        watch: &["x"],
        other: "SWAPDB 0 1",
        aborted: false,
    },
    Scenario {
        name: "SWAPDB of two other databases",
        setup: "SET x 1",
        watch: &["x"],
        other: "SWAPDB 1 2",
        aborted: false,
    },
    Scenario {
        name: "the same key name modified in another database",
        setup: "SET x 1",
        watch: &["x"],
        other: "SELECT 1\nSET x 10\nSELECT 0",
        aborted: false,
    },
    Scenario {
        name: "reads only",
        setup: "SET x 1\nRPUSH l a",
        watch: &["x", "l"],
        other: "GET x\nEXISTS x\nTYPE x\nLRANGE l 0 -1\nTTL x\nDBSIZE",
        aborted: false,
    },
    Scenario {
        name: "SET GET on the watched key",
        setup: "SET x 1",
        watch: &["x"],
        other: "SET x 2 GET",
        aborted: true,
    },
    Scenario {
        name: "GETDEL on the watched key",
        setup: "SET x 1",
        watch: &["x"],
        other: "GETDEL x",
        aborted: true,
    },
    Scenario {
        name: "GETEX without options (only reads)",
        setup: "SET x 1",
        watch: &["x"],
        other: "GETEX x",
        aborted: false,
    },
    Scenario {
        name: "GETEX setting a TTL",
        setup: "SET x 1",
        watch: &["x"],
        other: "GETEX x EX 100",
        aborted: true,
    },
    Scenario {
        name: "LMOVE from the watched list",
        setup: "RPUSH l a b",
        watch: &["l"],
        other: "LMOVE l other LEFT RIGHT",
        aborted: true,
    },
    Scenario {
        name: "a transaction by the other client that is discarded",
        setup: "SET x 1",
        watch: &["x"],
        other: "MULTI\nSET x 2\nDISCARD",
        aborted: false,
    },
    Scenario {
        name: "a transaction by the other client that aborts",
        setup: "SET x 1",
        watch: &["x"],
        other: "MULTI\nSET x 2\nNOPE\nEXEC",
        aborted: false,
    },
    Scenario {
        name: "MOVE into the watched key's database",
        setup: "SELECT 1\nSET x 1\nSELECT 0",
        watch: &["x"],
        other: "SELECT 1\nMOVE x 0\nSELECT 0",
        aborted: true,
    },
    Scenario {
        name: "MOVE refused because the key exists in the target",
        setup: "SET x 1\nSELECT 1\nSET x 2\nSELECT 0",
        watch: &["x"],
        other: "MOVE x 1",
        aborted: false,
    },
    Scenario {
        name: "a live TTL on the watched key (no change)",
        setup: "SET x 1 PX 60000",
        watch: &["x"],
        other: "TTL x\nEXISTS x",
        aborted: false,
    },
    Scenario {
        name: "INCRBYFLOAT on the watched key",
        setup: "SET x 1",
        watch: &["x"],
        other: "INCRBYFLOAT x 0",
        aborted: true,
    },
    Scenario {
        name: "HINCRBY creating the watched hash",
        setup: "",
        watch: &["h"],
        other: "HINCRBY h f 1",
        aborted: true,
    },
    Scenario {
        name: "ZREM of a missing member",
        setup: "ZADD z 1 a",
        watch: &["z"],
        other: "ZREM z nope",
        aborted: false,
    },
    Scenario {
        name: "ZREMRANGEBYSCORE removing the last member",
        setup: "ZADD z 1 a",
        watch: &["z"],
        other: "ZREMRANGEBYSCORE z -inf +inf",
        aborted: true,
    },
    Scenario {
        name: "SPOP on the watched set",
        setup: "SADD s a",
        watch: &["s"],
        other: "SPOP s",
        aborted: true,
    },
    Scenario {
        name: "SMOVE of a member that is not there",
        setup: "SADD s a\nSADD t b",
        watch: &["s", "t"],
        other: "SMOVE s t zz",
        aborted: false,
    },
    Scenario {
        name: "LTRIM keeping everything",
        setup: "RPUSH l a b",
        watch: &["l"],
        other: "LTRIM l 0 -1",
        aborted: true,
    },
    Scenario {
        name: "LREM of a missing element",
        setup: "RPUSH l a b",
        watch: &["l"],
        other: "LREM l 0 zz",
        aborted: false,
    },
    Scenario {
        name: "HSETNX refused",
        setup: "HSET h f v",
        watch: &["h"],
        other: "HSETNX h f w",
        aborted: false,
    },
    Scenario {
        name: "SETRANGE with an empty string on a missing key",
        setup: "",
        watch: &["x"],
        other: "SETRANGE x 0 \"\"",
        aborted: false,
    },
    Scenario {
        name: "MSETNX refused",
        setup: "SET x 1",
        watch: &["x", "y"],
        other: "MSETNX y 1 x 2",
        aborted: false,
    },
    Scenario {
        name: "XADD to the watched stream",
        setup: "XADD st 1-1 f v",
        watch: &["st"],
        other: "XADD st 2-1 f v",
        aborted: true,
    },
    Scenario {
        name: "XGROUP CREATE on the watched stream (Redis does not signal it)",
        setup: "XADD st 1-1 f v",
        watch: &["st"],
        other: "XGROUP CREATE st g 0",
        aborted: false,
    },
    Scenario {
        name: "XGROUP CREATE MKSTREAM creating the watched stream",
        setup: "",
        watch: &["st"],
        other: "XGROUP CREATE st g $ MKSTREAM",
        aborted: true,
    },
    Scenario {
        name: "SINTERSTORE into the watched key",
        setup: "SADD s1 a\nSADD s2 b",
        watch: &["dest"],
        other: "SINTERSTORE dest s1 s2",
        aborted: false,
    },
    Scenario {
        name: "SINTERSTORE with an empty result deleting the watched key",
        setup: "SADD s1 a\nSADD s2 b\nSET dest x",
        watch: &["dest"],
        other: "SINTERSTORE dest s1 s2",
        aborted: true,
    },
];

#[test]
fn watch_invalidation_by_each_kind_of_change() {
    for resp3 in [false, true] {
        let mut p = Pair::new();
        let mut other = Client::new(&p);
        if resp3 {
            p.resp3();
        }
        for s in SCENARIOS {
            p.check(&["FLUSHALL"]);
            p.check(&["SELECT", "0"]);
            other.check(&["SELECT", "0"]);
            p.script(s.setup);
            let mut watch = vec!["WATCH"];
            watch.extend_from_slice(s.watch);
            p.check(&watch);
            other.script(s.other);
            p.check(&["MULTI"]);
            p.check(&["PING"]);
            let (r, h) = p.both(&["EXEC"]);
            let redis_aborted = r == NULL_ARRAY_RESP2.as_bytes() || r == NULL_RESP3.as_bytes();
            assert_eq!(
                redis_aborted,
                s.aborted,
                "premise of scenario {:?} is wrong: Redis answered {}",
                s.name,
                show(&r)
            );
            assert!(
                r == h,
                "scenario {:?} (resp3={resp3}): EXEC replies differ\n  redis: {}\n  hozon: {}",
                s.name,
                show(&r),
                show(&h)
            );
        }
    }
}

#[test]
fn watch_remembers_the_database_of_the_key() {
    let mut p = Pair::new();
    p.script(
        "SELECT 5\n\
         SET x 30\n\
         WATCH x\n\
         SELECT 1\n\
         SET x 10\n\
         SELECT 5\n\
         MULTI\n\
         PING\n\
         EXEC\n\
         # Watched in 5, modified in 5 from another database selection.\n\
         WATCH x\n\
         SELECT 1\n\
         MOVE x 5\n\
         SELECT 5\n\
         SET x 1\n\
         SELECT 1\n\
         MULTI\n\
         PING\n\
         EXEC\n",
    );
}

#[test]
fn modification_by_the_same_client_before_multi_invalidates() {
    check_both_protocols(
        "SET x 30\n\
         WATCH x\n\
         SET x 40\n\
         MULTI\n\
         PING\n\
         EXEC\n\
         # The transaction's own writes to watched keys are fine.\n\
         WATCH x\n\
         MULTI\n\
         SET x 50\n\
         GET x\n\
         EXEC\n",
    );
}

#[test]
fn unwatch_and_watch_state_after_exec_and_discard() {
    let mut p = Pair::new();
    let mut other = Client::new(&p);
    // UNWATCH forgets the keys and the dirty flag.
    p.check(&["SET", "x", "30"]);
    p.check(&["WATCH", "x"]);
    other.check(&["SET", "x", "40"]);
    p.check(&["UNWATCH"]);
    p.check(&["MULTI"]);
    p.check(&["PING"]);
    check_is(&mut p, &["EXEC"], "*1\r\n+PONG\r\n");
    check_is(&mut p, &["UNWATCH"], "+OK\r\n");
    // After a successful EXEC the key is no longer watched.
    p.check(&["WATCH", "x"]);
    p.check(&["MULTI"]);
    p.check(&["PING"]);
    p.check(&["EXEC"]);
    other.check(&["SET", "x", "41"]);
    p.check(&["MULTI"]);
    p.check(&["PING"]);
    check_is(&mut p, &["EXEC"], "*1\r\n+PONG\r\n");
    // After a failed EXEC too.
    p.check(&["WATCH", "x"]);
    other.check(&["SET", "x", "42"]);
    p.check(&["MULTI"]);
    p.check(&["PING"]);
    check_is(&mut p, &["EXEC"], NULL_ARRAY_RESP2);
    other.check(&["SET", "x", "43"]);
    p.check(&["MULTI"]);
    p.check(&["PING"]);
    check_is(&mut p, &["EXEC"], "*1\r\n+PONG\r\n");
    // DISCARD clears the dirty flag and unwatches.
    p.check(&["WATCH", "x"]);
    other.check(&["SET", "x", "10"]);
    p.check(&["MULTI"]);
    p.check(&["DISCARD"]);
    p.check(&["MULTI"]);
    p.check(&["INCR", "x"]);
    check_is(&mut p, &["EXEC"], "*1\r\n:11\r\n");
    p.check(&["WATCH", "x"]);
    p.check(&["MULTI"]);
    p.check(&["DISCARD"]);
    other.check(&["SET", "x", "10"]);
    p.check(&["MULTI"]);
    p.check(&["INCR", "x"]);
    check_is(&mut p, &["EXEC"], "*1\r\n:11\r\n");
    // WATCH on an already dirty client answers OK and stays dirty; watching
    // the same key twice is harmless.
    p.check(&["WATCH", "x", "x"]);
    other.check(&["SET", "x", "1"]);
    p.check(&["WATCH", "y"]);
    p.check(&["MULTI"]);
    p.check(&["PING"]);
    check_is(&mut p, &["EXEC"], NULL_ARRAY_RESP2);
    // Several clients watching one key are all invalidated.
    let mut third = Client::new(&p);
    p.check(&["WATCH", "x"]);
    third.check(&["WATCH", "x"]);
    other.check(&["INCR", "x"]);
    third.check(&["MULTI"]);
    third.check(&["PING"]);
    let r = third.check(&["EXEC"]);
    assert_eq!(show(&r), show(NULL_ARRAY_RESP2.as_bytes()));
    p.check(&["MULTI"]);
    p.check(&["PING"]);
    check_is(&mut p, &["EXEC"], NULL_ARRAY_RESP2);
    // RESET unwatches too.
    p.check(&["WATCH", "x"]);
    other.check(&["INCR", "x"]);
    p.check(&["RESET"]);
    p.check(&["MULTI"]);
    p.check(&["PING"]);
    check_is(&mut p, &["EXEC"], "*1\r\n+PONG\r\n");
}

#[test]
fn watched_key_that_expires_makes_exec_fail() {
    for resp3 in [false, true] {
        let mut p = Pair::new();
        let null = if resp3 {
            p.resp3();
            NULL_RESP3
        } else {
            NULL_ARRAY_RESP2
        };
        // The key is alive when watched and expires before EXEC (whether it
        // is then deleted actively or found expired at EXEC, EXEC fails).
        p.check(&["SET", "x", "1", "PX", "200"]);
        p.check(&["WATCH", "x"]);
        std::thread::sleep(Duration::from_millis(300));
        p.check(&["MULTI"]);
        p.check(&["INCR", "x"]);
        check_is(&mut p, &["EXEC"], null);
        p.check(&["EXISTS", "x"]);
        // Same with a TTL set by EXPIRE after WATCH by the client itself:
        // the EXPIRE already touches the key.
        p.check(&["SET", "y", "1"]);
        p.check(&["WATCH", "y"]);
        p.check(&["PEXPIRE", "y", "40"]);
        p.check(&["MULTI"]);
        p.check(&["PING"]);
        check_is(&mut p, &["EXEC"], null);
        // Expiring while queued: alive at WATCH and MULTI, gone at EXEC.
        p.check(&["SET", "z", "1", "PX", "200"]);
        p.check(&["WATCH", "z"]);
        p.check(&["MULTI"]);
        p.check(&["PING"]);
        std::thread::sleep(Duration::from_millis(300));
        check_is(&mut p, &["EXEC"], null);
    }
}

#[test]
fn watching_an_already_expired_key_does_not_fail_exec() {
    let mut p = Pair::new();
    let mut other = Client::new(&p);
    // Stale when watched: no logical change when it is later deleted.
    p.check(&["SET", "x", "foo", "PX", "1"]);
    std::thread::sleep(Duration::from_millis(10));
    p.check(&["WATCH", "x"]);
    p.check(&["MULTI"]);
    p.check(&["PING"]);
    check_is(&mut p, &["EXEC"], "*1\r\n+PONG\r\n");
    // Deleted by a lookup in between.
    p.check(&["SET", "x", "foo", "PX", "1"]);
    std::thread::sleep(Duration::from_millis(10));
    p.check(&["WATCH", "x"]);
    other.check(&["EXISTS", "x"]);
    p.check(&["MULTI"]);
    p.check(&["PING"]);
    check_is(&mut p, &["EXEC"], "*1\r\n+PONG\r\n");
    // FLUSHDB while watching a stale key.
    p.check(&["SET", "x", "foo", "PX", "1"]);
    std::thread::sleep(Duration::from_millis(10));
    p.check(&["WATCH", "x"]);
    other.check(&["FLUSHDB"]);
    p.check(&["MULTI"]);
    p.check(&["PING"]);
    check_is(&mut p, &["EXEC"], "*1\r\n+PONG\r\n");
    // But recreating the stale key is a change.
    p.check(&["SET", "x", "foo", "PX", "1"]);
    std::thread::sleep(Duration::from_millis(10));
    p.check(&["WATCH", "x"]);
    other.check(&["SET", "x", "bar"]);
    p.check(&["MULTI"]);
    p.check(&["PING"]);
    check_is(&mut p, &["EXEC"], NULL_ARRAY_RESP2);
    // SWAPDB replacing a stale key with nothing, and nothing with a stale key.
    p.check(&["FLUSHALL"]);
    p.check(&["SELECT", "1"]);
    p.check(&["SET", "x", "foo", "PX", "1"]);
    std::thread::sleep(Duration::from_millis(10));
    p.check(&["WATCH", "x"]);
    other.check(&["SWAPDB", "0", "1"]);
    p.check(&["MULTI"]);
    p.check(&["PING"]);
    check_is(&mut p, &["EXEC"], "*1\r\n+PONG\r\n");
    p.check(&["FLUSHALL"]);
    p.check(&["SELECT", "0"]);
    p.check(&["SET", "x", "foo", "PX", "1"]);
    std::thread::sleep(Duration::from_millis(10));
    p.check(&["SELECT", "1"]);
    p.check(&["WATCH", "x"]);
    other.check(&["SWAPDB", "0", "1"]);
    p.check(&["MULTI"]);
    p.check(&["PING"]);
    check_is(&mut p, &["EXEC"], "*1\r\n+PONG\r\n");
}

#[test]
fn flushall_while_one_client_watches_several_keys() {
    let mut p = Pair::new();
    p.script(
        "MSET a a b b\n\
         WATCH b a\n\
         FLUSHALL\n\
         PING\n\
         MULTI\n\
         PING\n\
         EXEC\n",
    );
}

// ---------------------------------------------------------------------------
// Other commands inside transactions.

#[test]
fn select_inside_multi_changes_the_database_for_what_follows() {
    check_both_protocols(
        "MULTI\n\
         SELECT 2\n\
         SET a in2\n\
         SELECT 3\n\
         SET a in3\n\
         GET a\n\
         EXEC\n\
         # The client stays in the last selected database.\n\
         GET a\n\
         SELECT 2\n\
         GET a\n\
         MULTI\n\
         SELECT 1000\n\
         GET a\n\
         EXEC\n\
         MULTI\n\
         SWAPDB 2 3\n\
         GET a\n\
         EXEC\n",
    );
}

#[test]
fn blocking_list_and_zset_commands_inside_multi_do_not_block() {
    check_both_protocols(
        "DEL el ez l z dst\n\
         MULTI\n\
         BLPOP el 0\n\
         BRPOP el 0\n\
         BRPOPLPUSH el dst 0\n\
         BLMOVE el dst LEFT LEFT 0\n\
         BLMPOP 0 1 el LEFT\n\
         BZPOPMIN ez 0\n\
         BZPOPMAX ez 0\n\
         BZMPOP 0 1 ez MIN\n\
         BLPOP el -1\n\
         BLPOP el notanumber\n\
         EXEC\n\
         # With data they are served at once.\n\
         RPUSH l a b c\n\
         ZADD z 1 a 2 b\n\
         MULTI\n\
         BLPOP l 0\n\
         BRPOP l 0\n\
         BLMOVE l dst LEFT LEFT 0\n\
         BLPOP l 0\n\
         BZPOPMIN z 0\n\
         BZPOPMAX z 0\n\
         BZPOPMAX z 0\n\
         EXEC\n\
         LRANGE dst 0 -1\n\
         EXISTS l z\n\
         # A push earlier in the same transaction serves a later pop.\n\
         MULTI\n\
         RPUSH l x\n\
         BLPOP l 5\n\
         BLPOP l 5\n\
         EXEC\n",
    );
}

#[test]
fn blocking_stream_reads_inside_multi_do_not_block() {
    check_both_protocols(
        "DEL s\n\
         XGROUP CREATE s g $ MKSTREAM\n\
         MULTI\n\
         XREAD BLOCK 0 STREAMS s $\n\
         XREADGROUP GROUP g c BLOCK 0 STREAMS s >\n\
         EXEC\n",
    );
}

/// The fields of `CLIENT LIST` that describe transaction and Pub/Sub state,
/// for the client with `id`.
fn client_fields(list_reply: &[u8], id: &str) -> Vec<String> {
    let text = String::from_utf8_lossy(list_reply);
    let line = text
        .split(['\n', '\r'])
        .map(|l| l.trim_start_matches("txt:"))
        .find(|l| l.split(' ').any(|f| f == format!("id={id}")))
        .unwrap_or_else(|| panic!("no client id={id} in {}", show(list_reply)));
    const WANTED: &[&str] = &["flags", "db", "sub", "psub", "ssub", "multi", "cmd"];
    line.split(' ')
        .filter(|f| WANTED.iter().any(|w| f.starts_with(&format!("{w}="))))
        .map(String::from)
        .collect()
}

fn client_id(reply: &[u8]) -> String {
    String::from_utf8_lossy(reply)
        .trim_start_matches(':')
        .trim()
        .to_string()
}

#[test]
fn client_list_shows_multi_state() {
    let mut p = Pair::new();
    let mut observer = Client::new(&p);
    let rid = client_id(&p.r.call(&[b"CLIENT", b"ID"]));
    let hid = client_id(&p.h.call(&[b"CLIENT", b"ID"]));
    let compare = |observer: &mut Client, stage: &str| {
        let r = observer.r.call(&[b"CLIENT", b"LIST"]);
        let h = observer.h.call(&[b"CLIENT", b"LIST"]);
        let (rf, hf) = (client_fields(&r, &rid), client_fields(&h, &hid));
        assert_eq!(
            rf, hf,
            "CLIENT LIST fields {stage} (left redis, right hozon)"
        );
        rf
    };
    let before = compare(&mut observer, "before MULTI");
    assert!(before.contains(&"multi=-1".to_string()), "{before:?}");
    p.check(&["MULTI"]);
    compare(&mut observer, "right after MULTI");
    p.check(&["SET", "x", "1"]);
    p.check(&["GET", "x"]);
    let during = compare(&mut observer, "with two queued commands");
    assert!(during.contains(&"multi=2".to_string()), "{during:?}");
    // CLIENT LIST and CLIENT INFO run inside EXEC see the client mid-EXEC.
    p.check(&["CLIENT", "SETNAME", "tx"]);
    p.check(&["EXEC"]);
    compare(&mut observer, "after EXEC");
    // A dirty (invalidated) WATCH shows as flag d, with and without MULTI.
    p.check(&["WATCH", "x"]);
    compare(&mut observer, "after WATCH");
    observer.check(&["SET", "x", "2"]);
    let dirty = compare(&mut observer, "after the watched key changed");
    assert!(dirty.contains(&"flags=d".to_string()), "{dirty:?}");
    p.check(&["MULTI"]);
    compare(&mut observer, "dirty and in MULTI");
    // Redis does not queue commands of a transaction already bound to fail.
    p.check(&["PING"]);
    compare(&mut observer, "dirty, in MULTI, one command sent");
    p.check(&["EXEC"]);
    compare(&mut observer, "after the failed EXEC");
    // An aborted (EXECABORT-bound) transaction.
    p.check(&["MULTI"]);
    p.check(&["NOPE"]);
    compare(&mut observer, "in a transaction with a queueing error");
    p.check(&["SET", "y", "1"]);
    compare(&mut observer, "a valid command after the queueing error");
    p.check(&["DISCARD"]);
    compare(&mut observer, "after DISCARD");
}

#[test]
fn client_info_inside_exec_reports_the_transaction() {
    let mut p = Pair::new();
    for resp3 in [false, true] {
        if resp3 {
            p.resp3();
        }
        p.check(&["MULTI"]);
        p.check(&["PING"]);
        p.check(&["CLIENT", "INFO"]);
        let (r, h) = p.both(&["EXEC"]);
        let (re, he) = (array_elements(&r), array_elements(&h));
        assert_eq!(re.len(), he.len(), "{} vs {}", show(&r), show(&h));
        assert_eq!(re[0], he[0]);
        let rid = client_id(&p.r.call(&[b"CLIENT", b"ID"]));
        let hid = client_id(&p.h.call(&[b"CLIENT", b"ID"]));
        assert_eq!(
            client_fields(&re[1], &rid),
            client_fields(&he[1], &hid),
            "CLIENT INFO inside EXEC (left redis, right hozon)"
        );
    }
}

#[test]
fn quit_inside_multi_closes_without_executing() {
    let mut p = Pair::new();
    let mut victim = Client::new(&p);
    victim.check(&["MULTI"]);
    victim.check(&["SET", "k", "v"]);
    let r = victim.r.call(&[b"QUIT"]);
    let h = victim.h.call(&[b"QUIT"]);
    assert_same(&["QUIT"], &r, &h);
    let (r, h) = (victim.r.read_until_close(), victim.h.read_until_close());
    assert_same(&["(after QUIT)"], &r, &h);
    p.check(&["EXISTS", "k"]);
    // A connection dropped inside MULTI leaves no trace either.
    let mut dropped = Client::new(&p);
    dropped.check(&["WATCH", "k"]);
    dropped.check(&["MULTI"]);
    dropped.check(&["SET", "k", "v"]);
    drop(dropped);
    p.check(&["SET", "k", "mine"]);
    p.check(&["GET", "k"]);
}

/// Replaces the client id in a HELLO reply (`id` field) by a placeholder.
fn without_client_id(reply: &[u8], id: &str) -> Vec<u8> {
    let needle = format!("$2\r\nid\r\n:{id}\r\n").into_bytes();
    let mut out = reply.to_vec();
    if let Some(at) = out
        .windows(needle.len())
        .position(|w| w == needle.as_slice())
    {
        out.splice(
            at..at + needle.len(),
            b"$2\r\nid\r\n:ID\r\n".iter().copied(),
        );
    }
    out
}

#[test]
fn hello_inside_multi_switches_protocol_mid_exec() {
    let mut p = Pair::new();
    let rid = client_id(&p.r.call(&[b"CLIENT", b"ID"]));
    let hid = client_id(&p.h.call(&[b"CLIENT", b"ID"]));
    p.check(&["HSET", "h", "f", "v"]);
    for version in ["3", "2", "4", "3"] {
        p.check(&["MULTI"]);
        p.check(&["HGETALL", "h"]);
        p.check(&["HELLO", version]);
        p.check(&["HGETALL", "h"]);
        p.check(&["ZSCORE", "nozset", "m"]);
        let (r, h) = p.both(&["EXEC"]);
        let (r, h) = (without_client_id(&r, &rid), without_client_id(&h, &hid));
        assert_same(&["EXEC", "(with HELLO", version, ")"], &r, &h);
        p.check(&["HGETALL", "h"]);
    }
}

#[test]
fn reset_inside_multi_discards_the_transaction() {
    check_both_protocols(
        "DEL k\n\
         MULTI\n\
         SET k v\n\
         RESET\n\
         EXEC\n\
         EXISTS k\n",
    );
}

#[test]
fn subscribe_inside_multi_enters_subscribed_mode() {
    let mut p = Pair::new();
    p.check(&["MULTI"]);
    p.check(&["SUBSCRIBE", "ch"]);
    p.check(&["PUBSUB", "NUMSUB", "ch"]);
    p.check(&["EXEC"]);
    // Now in RESP2 subscribed mode.
    p.check(&["GET", "x"]);
    p.check(&["PING"]);
    p.check(&["MULTI"]);
    p.check(&["UNSUBSCRIBE", "ch"]);
    p.check(&["MULTI"]);
    p.check(&["SET", "x", "1"]);
    p.check(&["PUBLISH", "ch", "m"]);
    p.check(&["EXEC"]);
    // Several channels: Redis counts one EXEC entry per command but sends
    // one notification per channel, so the notifications for b and c come
    // after the EXEC array (as separate frames).
    p.check(&["MULTI"]);
    p.check(&["SUBSCRIBE", "a", "b", "c"]);
    p.check(&["EXEC"]);
    for extra in ["b", "c"] {
        let (r, h) = (p.r.read_reply(), p.h.read_reply());
        assert_same(&["(notification for", extra, ")"], &r, &h);
    }
    p.check(&["PING"]);
    p.check(&["UNSUBSCRIBE", "c"]);
    p.check(&["PUNSUBSCRIBE"]);
}

#[test]
fn transaction_commands_in_resp2_subscribed_mode_are_refused() {
    let mut p = Pair::new();
    p.check(&["SUBSCRIBE", "ch"]);
    p.check(&["MULTI"]);
    p.check(&["WATCH", "x"]);
    p.check(&["UNWATCH"]);
    p.check(&["EXEC"]);
    p.check(&["DISCARD"]);
    // RESP3 has no such restriction.
    p.check(&["UNSUBSCRIBE"]);
    p.resp3();
    p.check(&["SUBSCRIBE", "ch"]);
    p.check(&["WATCH", "x"]);
    p.check(&["MULTI"]);
    p.check(&["SET", "x", "1"]);
    p.check(&["EXEC"]);
}

// ---------------------------------------------------------------------------
// Random small transactions, two clients.

const KEYS: &[&str] = &["a", "b", "c"];
const VALUES: &[&str] = &["1", "10", "x", ""];

/// One command: by the transaction's client (`main`) or by another client.
#[derive(Clone, Debug)]
struct Step {
    main: bool,
    words: Vec<String>,
}

/// A transaction: what happens before WATCH, the WATCHed keys, what happens
/// between WATCH and MULTI, the queued commands (interleaved with other
/// clients' commands), and how it ends.
#[derive(Clone, Debug)]
struct Tx {
    setup: Vec<Vec<String>>,
    watch: Vec<String>,
    between: Vec<Step>,
    queued: Vec<Step>,
    discard: bool,
}

fn pick<'a>(g: &mut Gen, items: &[&'a str]) -> &'a str {
    g.choose(items).expect("non-empty choice")
}

/// A random command on the small key space; `allow_bad` adds queueing errors
/// (unknown command, wrong arity), `in_multi` the blocking BLPOP (which
/// never blocks inside MULTI).
fn random_command(g: &mut Gen, allow_bad: bool, in_multi: bool) -> Vec<String> {
    let k = pick(g, KEYS).to_string();
    let k2 = pick(g, KEYS).to_string();
    let v = pick(g, VALUES).to_string();
    let m = pick(g, &["1", "2", "3"]).to_string();
    let s = |words: &[&str]| words.iter().map(|w| w.to_string()).collect::<Vec<String>>();
    let choice = u8::arbitrary(g) % if allow_bad { 40 } else { 37 };
    match choice {
        0 => s(&["SET", &k, &v]),
        1 => s(&["GET", &k]),
        2 => s(&["INCR", &k]),
        3 => s(&["DEL", &k]),
        4 => s(&["EXISTS", &k, &k2]),
        5 => s(&["APPEND", &k, &v]),
        6 => s(&["EXPIRE", &k, "100"]),
        7 => s(&["PERSIST", &k]),
        8 => s(&["TTL", &k]),
        9 => s(&["LPUSH", &k, &v]),
        10 => s(&["RPOP", &k]),
        11 => s(&["SADD", &k, &m]),
        12 => s(&["SREM", &k, &m]),
        13 => s(&["SMEMBERS", &k]),
        14 => s(&["TYPE", &k]),
        15 => s(&["RENAME", &k, &k2]),
        16 => s(&["SETNX", &k, &v]),
        17 => s(&["SET", &k, &v, "XX"]),
        18 => s(&["HSET", &k, "f", &v]),
        19 => s(&["HDEL", &k, "f"]),
        20 => s(&["HGETALL", &k]),
        21 => s(&["LRANGE", &k, "0", "-1"]),
        22 => s(&["INCRBY", &k, pick(g, &["1", "x"])]),
        23 => s(&["MSET", &k, &v, &k2, &v]),
        24 => s(&["COPY", &k, &k2]),
        25 => s(&["PEXPIRE", &k, "0"]),
        26 => s(&["GETDEL", &k]),
        27 => s(&["LMOVE", &k, &k2, "LEFT", "RIGHT"]),
        28 => s(&["SINTERSTORE", &k, &k2]),
        29 => s(&["ZADD", &k, &m, "a"]),
        30 => s(&["ZSCORE", &k, "a"]),
        31 => s(&["PING"]),
        32 => s(&["RENAMENX", &k, &k2]),
        33 => s(&["MOVE", &k, "1"]),
        34 => s(&[pick(g, &["FLUSHDB", "DBSIZE"])]),
        35 => s(&["SWAPDB", "0", pick(g, &["0", "1"])]),
        36 if in_multi => s(&["BLPOP", &k, "1"]),
        36 => s(&["LLEN", &k]),
        37 => s(&["NOPE", &k]),
        38 => s(&["GET"]),
        _ => s(&["SET", &k]),
    }
}

fn steps(g: &mut Gen, max: usize, in_multi: bool, allow_bad: bool, main_share: u8) -> Vec<Step> {
    let n = usize::arbitrary(g) % (max + 1);
    (0..n)
        .map(|_| {
            let main = u8::arbitrary(g) % 100 < main_share;
            // Only the transaction's client queues (bad or blocking) commands.
            let words = random_command(g, allow_bad && main, in_multi && main);
            Step { main, words }
        })
        .collect()
}

impl Arbitrary for Tx {
    fn arbitrary(g: &mut Gen) -> Tx {
        let setup = (0..usize::arbitrary(g) % 5)
            .map(|_| random_command(g, false, false))
            .collect();
        let watch = (0..usize::arbitrary(g) % 3)
            .map(|_| pick(g, KEYS).to_string())
            .collect();
        let between = steps(g, 3, false, false, 30);
        let allow_bad = u8::arbitrary(g) % 4 == 0;
        let queued = steps(g, 6, true, allow_bad, 80);
        Tx {
            setup,
            watch,
            between,
            queued,
            discard: u8::arbitrary(g) % 8 == 0,
        }
    }

    fn shrink(&self) -> Box<dyn Iterator<Item = Tx>> {
        let base = self.clone();
        let mut out = Vec::new();
        for i in 0..self.queued.len() {
            let mut t = base.clone();
            t.queued.remove(i);
            out.push(t);
        }
        for i in 0..self.between.len() {
            let mut t = base.clone();
            t.between.remove(i);
            out.push(t);
        }
        for i in 0..self.setup.len() {
            let mut t = base.clone();
            t.setup.remove(i);
            out.push(t);
        }
        if !self.watch.is_empty() {
            let mut t = base.clone();
            t.watch.pop();
            out.push(t);
        }
        Box::new(out.into_iter())
    }
}

/// Runs one transaction on both servers (main client = the pair's, other
/// client = `other`), comparing every reply; then the resulting keyspace.
fn run_tx(p: &mut Pair, other: &mut Client, tx: &Tx, resp3: bool) -> Result<(), String> {
    let mut history: Vec<String> = Vec::new();
    let mut step = |p: &mut Pair, other: &mut Client, main: bool, words: &[String]| {
        let args: Vec<&[u8]> = words.iter().map(|w| w.as_bytes()).collect();
        let (r, h) = if main {
            (p.r.call(&args), p.h.call(&args))
        } else {
            (other.r.call(&args), other.h.call(&args))
        };
        history.push(format!(
            "{} {}",
            if main { "main: " } else { "other:" },
            words.join(" ")
        ));
        if r == h {
            Ok(())
        } else {
            Err(format!(
                "replies differ (resp3={resp3})\n  redis: {}\n  hozon: {}\n  sequence:\n    {}",
                show(&r),
                show(&h),
                history.join("\n    ")
            ))
        }
    };
    let w = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<Vec<String>>();
    // A clean state whatever the previous case left behind.
    for c in [&mut p.r, &mut p.h, &mut other.r, &mut other.h] {
        c.call(&[b"DISCARD"]);
        c.call(&[b"UNWATCH"]);
        c.call(&[b"SELECT", b"0"]);
    }
    step(p, other, true, &w(&["FLUSHALL"]))?;
    for words in &tx.setup {
        step(p, other, false, words)?;
    }
    if !tx.watch.is_empty() {
        let mut watch = vec!["WATCH".to_string()];
        watch.extend(tx.watch.iter().cloned());
        step(p, other, true, &watch)?;
    }
    for s in &tx.between {
        step(p, other, s.main, &s.words)?;
    }
    step(p, other, true, &w(&["MULTI"]))?;
    for s in &tx.queued {
        step(p, other, s.main, &s.words)?;
    }
    step(
        p,
        other,
        true,
        &w(&[if tx.discard { "DISCARD" } else { "EXEC" }]),
    )?;
    for db in ["0", "1"] {
        step(p, other, false, &w(&["SELECT", db]))?;
        for k in KEYS {
            step(p, other, false, &w(&["TYPE", k]))?;
            step(p, other, false, &w(&["TTL", k]))?;
        }
        step(p, other, false, &w(&["DBSIZE"]))?;
    }
    Ok(())
}

fn random_transactions_match(tx: Tx, resp3: bool) -> TestResult {
    with_thread_pair(resp3, |p| {
        let mut other = Client::new(p);
        if resp3 {
            other.resp3();
        }
        match run_tx(p, &mut other, &tx, resp3) {
            Ok(()) => TestResult::passed(),
            Err(e) => TestResult::error(e),
        }
    })
}

#[test]
fn random_transactions_match_redis_resp2() {
    quickcheck_ops(8, 40, |txs: Vec<Tx>| {
        for tx in txs {
            let r = random_transactions_match(tx, false);
            if r.is_failure() {
                return r;
            }
        }
        TestResult::passed()
    });
}

#[test]
fn random_transactions_match_redis_resp3() {
    quickcheck_ops(8, 30, |txs: Vec<Tx>| {
        for tx in txs {
            let r = random_transactions_match(tx, true);
            if r.is_failure() {
                return r;
            }
        }
        TestResult::passed()
    });
}
