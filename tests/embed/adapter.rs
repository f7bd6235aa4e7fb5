//! The redis crate's API on the embedded engine (feature `redis`): every
//! case runs through the crate on an embedded `Conn` and on a TCP
//! connection to a real redis-server, and the values (or errors) must be
//! equal. Then the async connection (tokio, current-thread runtime), the
//! persistence failures' mapping and a closed engine.

#![cfg(feature = "redis")]

use std::collections::{BTreeSet, HashMap};
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use hozon::config::{AppendFsync, PROTECTED_YES};
use hozon::embed::{Conn, Db};
use hozon::persist::io::{Fault, FaultyIo};
use redis::{Commands, ConnectionLike, ErrorKind, RedisError, RedisResult, Value};
use testkit::harness::{self, ServerProcess};

/// An error as the comparisons see it: everything the crate tells of it.
#[derive(Debug, PartialEq)]
struct Failure {
    kind: ErrorKind,
    code: Option<String>,
    detail: Option<String>,
    text: String,
}

fn failure(e: &RedisError) -> Failure {
    Failure {
        kind: e.kind(),
        code: e.code().map(str::to_string),
        detail: e.detail().map(str::to_string),
        text: e.to_string(),
    }
}

/// A result with its error made comparable.
fn comparable<T>(r: RedisResult<T>) -> Result<T, Failure> {
    r.map_err(|e| failure(&e))
}

/// An embedded connection and a connection to a real redis-server, each on
/// an empty keyspace.
struct Pair {
    embedded: Conn,
    server: redis::Connection,
    _db: Db,
    _redis: ServerProcess,
}

impl Pair {
    fn new() -> Pair {
        let redis = harness::start_redis(&["--enable-debug-command", "yes"]);
        let client = redis::Client::open(format!("redis://127.0.0.1:{}/", redis.port)).unwrap();
        let server = client.get_connection().expect("connect to redis-server");
        let db = Db::in_memory()
            .config(|c| c.enable_debug_command = PROTECTED_YES)
            .open()
            .unwrap();
        Pair {
            embedded: db.connect(),
            server,
            _db: db,
            _redis: redis,
        }
    }
}

/// Runs `$body` with `$c` bound to the embedded connection, then to the
/// server's, and asserts both give the same; evaluates to the embedded
/// one's.
macro_rules! same {
    ($pair:expr, |$c:ident| $body:expr) => {
        same!($pair, _, |$c| $body)
    };
    ($pair:expr, $t:ty, |$c:ident| $body:expr) => {{
        let pair: &mut Pair = $pair;
        let embedded: $t = {
            let $c = &mut pair.embedded;
            $body
        };
        let server: $t = {
            let $c = &mut pair.server;
            $body
        };
        assert_eq!(embedded, server, "{}", stringify!($body));
        embedded
    }};
}

/// A raw command's value, errors included as the crate returns them.
fn raw(c: &mut dyn ConnectionLike, args: &[&str]) -> Result<Value, Failure> {
    let mut cmd = redis::cmd(args[0]);
    for a in &args[1..] {
        cmd.arg(*a);
    }
    comparable(cmd.query::<Value>(c))
}

/// Runs each command line on both and compares the values.
fn lines(pair: &mut Pair, commands: &[&str]) {
    for line in commands {
        let args: Vec<&str> = line.split(' ').collect();
        let args = &args;
        let _ = same!(pair, |c| raw(c, args));
    }
}

#[test]
fn strings_hashes_lists_sets_and_nulls() {
    let mut pair = Pair::new();
    lines(
        &mut pair,
        &[
            "SET s hello",
            "GET s",
            "GET missing",
            "APPEND s !",
            "STRLEN s",
            "SET n 10",
            "INCR n",
            "INCRBY n -4",
            "INCRBYFLOAT n 1.5",
            "INCRBYFLOAT n 3.0e3",
            "MGET s missing n",
            "SET s2 x NX",
            "SET s2 y NX",
            "SET s3 v GET",
            "HSET h a 1 b 2 c 3",
            "HGET h a",
            "HGET h zz",
            "HMGET h a zz c",
            "HINCRBYFLOAT h a 0.25",
            "HLEN h",
            "RPUSH l a b c d",
            "LRANGE l 0 -1",
            "LPOP l",
            "LPOP l 2",
            "LPOP nolist",
            "LPOP nolist 2",
            "BLPOP nolist 0.01",
            "SADD st 3 1 2",
            "SMEMBERS st",
            "SISMEMBER st 2",
            "SPOP nosuchset",
            "EXISTS s h missing",
            "TYPE h",
            "DEL s h l",
            "PING",
            "ECHO hi",
        ],
    );
}

#[test]
fn sorted_sets_with_scores_and_streams() {
    let mut pair = Pair::new();
    lines(
        &mut pair,
        &[
            "ZADD z 1.5 a 2 b 3.25 c -inf d",
            "ZRANGE z 0 -1 WITHSCORES",
            "ZSCORE z c",
            "ZSCORE z nothing",
            "ZINCRBY z 0.1 a",
            "ZRANK z b",
            "ZPOPMIN z",
            "ZRANGEBYSCORE z (2 +inf",
            "ZMSCORE z a zz",
            "XADD st 1-1 f v g w",
            "XADD st 2-1 f v2",
            "XADD st 3-0 f v3",
            "XRANGE st - +",
            "XRANGE st 2 + COUNT 1",
            "XREVRANGE st + - COUNT 2",
            "XLEN st",
            "XGROUP CREATE st g 0",
            "XREADGROUP GROUP g c1 COUNT 2 STREAMS st >",
            "XPENDING st g",
            "XACK st g 1-1",
            "XREADGROUP GROUP g c1 STREAMS st 0",
            "XREAD COUNT 1 STREAMS st 0",
            "XREAD STREAMS st 9-9",
            "XINFO GROUPS st",
        ],
    );
}

#[test]
fn error_replies_of_several_kinds() {
    let mut pair = Pair::new();
    lines(
        &mut pair,
        &[
            "SET k v",
            "LPUSH k x",
            "INCR k",
            "NOSUCHCOMMAND a b",
            "GET",
            "SET k v EX -1",
            "EVALSHA ffffffffffffffffffffffffffffffffffffffff 0",
            "EXEC",
            "DISCARD",
            "SELECT 99",
            "XADD st 0-0 f v",
            "XREADGROUP GROUP nog c STREAMS nostream >",
            "ZADD z x a",
            "HINCRBY k f 1",
            "OBJECT ENCODING missing",
        ],
    );
    let _ = same!(&mut pair, |c| raw(
        c,
        &["EVAL", "return redis.error_reply('MYERR custom')", "0"]
    ));
    let _ = same!(&mut pair, |c| raw(
        c,
        &["EVAL", "return redis.call('LPUSH', 'k', 'x')", "0"]
    ));
    // The typed view of an error: kind, code, detail.
    let e = same!(&mut pair, |c| comparable(c.lpush::<_, _, i64>("k", "x")));
    let e = e.unwrap_err();
    assert_eq!(e.code.as_deref(), Some("WRONGTYPE"));
}

#[test]
fn transactions_with_errors_inside() {
    let mut pair = Pair::new();
    lines(
        &mut pair,
        &[
            "SET k v",
            "MULTI",
            "INCR c",
            "LPUSH k x",
            "GET k",
            "EXEC",
            // A queued command refused: the EXEC aborts.
            "MULTI",
            "INCR c",
            "NOSUCHCOMMAND",
            "EXEC",
            "GET c",
        ],
    );
    // An atomic pipeline with an error inside the EXEC (its value stays
    // in the array), and one whose queueing fails (aborted).
    let _ = same!(&mut pair, |c| comparable(
        redis::pipe()
            .atomic()
            .incr("c", 1)
            .lpush("k", "x")
            .get("k")
            .query::<Value>(c)
    ));
    // A queued command refused: the crate's own TransactionAborted error
    // cannot be built outside the crate; the adapter's has its kind and
    // code (docs/embedding.md).
    let aborted = |c: &mut dyn ConnectionLike| {
        let e = redis::pipe()
            .atomic()
            .incr("c", 1)
            .cmd("NOSUCHCOMMAND")
            .get("c")
            .query::<Value>(c)
            .unwrap_err();
        (e.kind(), e.code().map(str::to_string))
    };
    assert_eq!(aborted(&mut pair.embedded), aborted(&mut pair.server));
    let _ = same!(&mut pair, |c| comparable(c.get::<_, i64>("c")));
    // redis::transaction: WATCH, then the atomic pipeline.
    let _ = same!(&mut pair, |c| comparable(
        redis::transaction(c, &["c"], |c, pipe| {
            let old: i64 = c.get("c")?;
            pipe.set("c", old * 10).ignore().get("c").query(c)
        })
        .map(|(v,): (i64,)| v)
    ));
    // A transaction whose WATCHed key another client changes retries.
    let mut retries = 0;
    let got: RedisResult<(String,)> = redis::transaction(&mut pair.embedded, &["w"], |c, pipe| {
        if retries == 0 {
            pair._db.execute(&[b"SET", b"w", b"other"]).unwrap();
        }
        retries += 1;
        pipe.set("w", "mine").ignore().get("w").query(c)
    });
    assert_eq!(got.unwrap(), ("mine".to_string(),));
    assert_eq!(retries, 2);
}

#[test]
fn pipelines_with_an_error_in_the_middle() {
    let mut pair = Pair::new();
    let _ = same!(&mut pair, |c| comparable(
        redis::pipe()
            .set("a", 1)
            .lpush("a", "x")
            .incr("a", 2)
            .get("missing")
            .query::<Value>(c)
    ));
    let _ = same!(&mut pair, |c| comparable(
        redis::pipe()
            .set("b", 1)
            .ignore()
            .incr("b", 1)
            .query::<(i64,)>(c)
    ));
    // Into a typed tuple: the error in the middle fails the conversion.
    let _ = same!(&mut pair, |c| comparable(
        redis::pipe()
            .get("a")
            .lpush("a", "x")
            .query::<(i64, i64)>(c)
    ));
    let _ = same!(&mut pair, |c| comparable(
        redis::pipe().query::<Vec<Value>>(c)
    ));
}

#[test]
fn scripts_run_by_sha_then_by_source() {
    let mut pair = Pair::new();
    let script = redis::Script::new("return {KEYS[1], ARGV[1], redis.call('INCR', KEYS[1])}");
    // EVALSHA fails with NOSCRIPT, then EVAL; then EVALSHA succeeds.
    for _ in 0..2 {
        let _ = same!(&mut pair, |c| comparable(
            script.key("n").arg("x").invoke::<Value>(c)
        ));
    }
    let failing = redis::Script::new("return redis.call('LPUSH', KEYS[1], 'x')");
    let _ = same!(&mut pair, |c| comparable(
        failing.key("n").invoke::<Value>(c)
    ));
    let floats = redis::Script::new("return {1.5, 'str', false, true}");
    let _ = same!(&mut pair, |c| comparable(floats.invoke::<Value>(c)));
}

#[test]
fn typed_conversions() {
    let mut pair = Pair::new();
    let _: () = same!(&mut pair, (), |c| c
        .rpush::<_, _, ()>("l", &["a", "b", "c"])
        .unwrap());
    let v: Vec<String> = same!(&mut pair, Vec<String>, |c| c.lrange("l", 0, -1).unwrap());
    assert_eq!(v, ["a", "b", "c"]);
    let _: () = same!(&mut pair, (), |c| c
        .hset_multiple::<_, _, _, ()>("h", &[("x", "1"), ("y", "2")])
        .unwrap());
    let h: HashMap<String, i64> =
        same!(&mut pair, HashMap<String, i64>, |c| c.hgetall("h").unwrap());
    assert_eq!(h, HashMap::from([("x".into(), 1), ("y".into(), 2)]));
    let none: Option<String> = same!(&mut pair, Option<String>, |c| c.get("nothing").unwrap());
    assert_eq!(none, None);
    let some: Option<i64> = same!(&mut pair, Option<i64>, |c| c.hget("h", "x").unwrap());
    assert_eq!(some, Some(1));
    let f: f64 = same!(&mut pair, f64, |c| c.incr("f", 2.5f64).unwrap());
    assert_eq!(f, 2.5);
    let b: bool = same!(&mut pair, bool, |c| c.exists("h").unwrap());
    assert!(b);
    let b: bool = same!(&mut pair, bool, |c| c.sismember("s", "x").unwrap());
    assert!(!b);
    let s: BTreeSet<String> = same!(&mut pair, BTreeSet<String>, |c| {
        let _: () = c.sadd("s", &["p", "q"]).unwrap();
        c.smembers("s").unwrap()
    });
    assert_eq!(s.len(), 2);
    let scores: Vec<(String, f64)> = same!(&mut pair, Vec<(String, f64)>, |c| {
        let _: () = c.zadd_multiple("z", &[(1.5, "a"), (0.25, "b")]).unwrap();
        c.zrange_withscores("z", 0, -1).unwrap()
    });
    assert_eq!(scores, [("b".to_string(), 0.25), ("a".to_string(), 1.5)]);
    // A wrong type: the same conversion error.
    let _ = same!(&mut pair, |c| comparable(c.get::<_, i64>("l")));
    let _ = same!(&mut pair, |c| comparable(c.hgetall::<_, Vec<i64>>("h")));
}

#[test]
fn resp3_after_hello_3() {
    let mut pair = Pair::new();
    // HELLO's own reply differs (server name, version, id): its shape only.
    for c in [
        &mut pair.embedded as &mut dyn ConnectionLike,
        &mut pair.server,
    ] {
        let hello = redis::cmd("HELLO").arg(3).query::<Value>(c).unwrap();
        assert!(matches!(hello, Value::Map(_)), "{hello:?}");
    }
    lines(
        &mut pair,
        &[
            "HSET h a 1 b 2",
            "HGETALL h",
            "HGET h missing",
            "SADD s 1 2 3",
            "SMEMBERS s",
            "ZADD z 1.5 a 2 b",
            "ZSCORE z a",
            "ZRANGE z 0 -1 WITHSCORES",
            "ZINCRBY z 0.5 a",
            "INCRBYFLOAT f 1.1",
            "LPOP nolist",
            "BLPOP nolist 0.01",
            "XADD st 1-1 f v",
            "XREAD STREAMS st 0",
            "DEBUG PROTOCOL double",
            "DEBUG PROTOCOL bignum",
            "DEBUG PROTOCOL true",
            "DEBUG PROTOCOL false",
            "DEBUG PROTOCOL null",
            "DEBUG PROTOCOL map",
            "DEBUG PROTOCOL set",
            "DEBUG PROTOCOL verbatim",
            "DEBUG PROTOCOL attrib",
            "DEBUG PROTOCOL push",
            "MULTI",
            "HGETALL h",
            "ZSCORE z b",
            "LPUSH h x",
            "EXEC",
            "LPUSH h x",
        ],
    );
    let m: HashMap<String, i64> =
        same!(&mut pair, HashMap<String, i64>, |c| c.hgetall("h").unwrap());
    assert_eq!(m.len(), 2);
    let f: f64 = same!(&mut pair, f64, |c| c.zscore("z", "a").unwrap());
    assert_eq!(f, 2.0);
    let _ = same!(&mut pair, |c| comparable(
        redis::pipe()
            .hgetall("h")
            .cmd("DEBUG")
            .arg("PROTOCOL")
            .arg("push")
            .zscore("z", "b")
            .query::<Value>(c)
    ));
}

/// SELECT moves `get_db`; `check_connection` and `is_open` follow the
/// Db's state.
#[test]
fn select_is_tracked_and_a_closed_db_is_seen() {
    let db = Db::in_memory().open().unwrap();
    let mut conn = db.connect();
    assert_eq!(conn.get_db(), 0);
    let _: () = redis::cmd("SELECT").arg(3).query(&mut conn).unwrap();
    assert_eq!(conn.get_db(), 3);
    let _: () = conn.set("k", "v").unwrap();
    assert_eq!(
        db.execute(&[b"EXISTS", b"k"]).unwrap(),
        hozon::Reply::Int(0)
    );
    assert!(conn.check_connection());
    assert!(conn.is_open());
    db.close().unwrap();
    assert!(!conn.is_open());
    assert!(!conn.check_connection());
    let e = conn.get::<_, Option<String>>("k").unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Io);
    assert!(e.is_connection_dropped(), "{e:?}");
    // In a pipeline, every command fails the same way.
    let e = redis::pipe()
        .get("k")
        .get("k")
        .query::<Value>(&mut conn)
        .unwrap_err();
    assert!(e.is_connection_dropped(), "{e:?}");
}

/// `Refused` and `NotDurable` become the error replies MISCONF and
/// NOTDURABLE (kind Extension), as a server would send them.
#[test]
fn persistence_failures_map_to_distinct_errors() {
    let io = FaultyIo::new();
    let db = Db::builder(Path::new("/db"))
        .io(Arc::new(io.process()))
        .fsync(AppendFsync::Always)
        .config(|c| c.save.clear())
        .open()
        .unwrap();
    let mut conn = db.connect();
    let _: () = conn.set("a", 1).unwrap();
    io.inject(Fault::FailSync { nth: 1, errno: 5 });
    let e = conn.set::<_, _, ()>("b", 2).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Extension, "{e:?}");
    assert_eq!(e.code(), Some("NOTDURABLE"), "{e:?}");
    assert!(e.detail().unwrap().contains("fsync failed"), "{e:?}");
    let e = conn.set::<_, _, ()>("c", 3).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Extension, "{e:?}");
    assert_eq!(e.code(), Some("MISCONF"), "{e:?}");
    // Reads still work; a command error stays a command error.
    let a: i64 = conn.get("a").unwrap();
    assert_eq!(a, 1);
    let c: Option<i64> = conn.get("c").unwrap();
    assert_eq!(c, None);
    let e = redis::cmd("NOSUCHCOMMAND")
        .query::<()>(&mut conn)
        .unwrap_err();
    assert_eq!(e.code(), Some("ERR"));
    // In a pipeline the refusal is the failing command's error, at its
    // index.
    let e = redis::pipe()
        .get("a")
        .set("d", 4)
        .query::<Value>(&mut conn)
        .unwrap_err();
    let errors = e.into_server_errors().unwrap();
    assert_eq!(errors.len(), 1);
    assert_eq!(errors[0].0, 1);
    assert_eq!(errors[0].1.code(), "MISCONF");
}

fn current_thread() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()
        .unwrap()
}

/// The async connection: AsyncCommands, pipelines, scripts; SELECT
/// tracked.
#[test]
fn async_commands_pipelines_and_scripts() {
    use redis::aio::ConnectionLike as _;
    use redis::AsyncCommands;
    let db = Db::in_memory().open().unwrap();
    current_thread().block_on(async {
        let mut conn = db.connect_async();
        let _: () = conn.set("k", 41).await.unwrap();
        let n: i64 = conn.incr("k", 1).await.unwrap();
        assert_eq!(n, 42);
        let missing: Option<String> = conn.get("nothing").await.unwrap();
        assert_eq!(missing, None);
        let e = conn.lpush::<_, _, i64>("k", "x").await.unwrap_err();
        assert_eq!(e.code(), Some("WRONGTYPE"));
        let (a, b): (i64, Option<String>) = redis::pipe()
            .atomic()
            .get("k")
            .get("none")
            .query_async(&mut conn)
            .await
            .unwrap();
        assert_eq!((a, b), (42, None));
        let e = redis::pipe()
            .atomic()
            .get("k")
            .cmd("NOSUCHCOMMAND")
            .query_async::<Value>(&mut conn)
            .await
            .unwrap_err();
        assert_eq!(e.code(), Some("EXECABORT"), "{e:?}");
        let script = redis::Script::new("return redis.call('INCRBY', KEYS[1], ARGV[1])");
        let n: i64 = script
            .key("k")
            .arg(8)
            .invoke_async(&mut conn)
            .await
            .unwrap();
        assert_eq!(n, 50);
        let _: () = redis::cmd("SELECT")
            .arg(2)
            .query_async(&mut conn)
            .await
            .unwrap();
        assert_eq!(conn.get_db(), 2);
        let n: Option<i64> = conn.get("k").await.unwrap();
        assert_eq!(n, None);
    });
}

/// A BLPOP on the async connection waits on its own thread: the
/// current-thread runtime keeps running other tasks (a ticker, other
/// commands) meanwhile, and a push from another thread wakes it.
#[test]
fn async_blpop_leaves_the_runtime_responsive() {
    use redis::AsyncCommands;
    let db = Db::in_memory().open().unwrap();
    let pusher_db = db.clone();
    current_thread().block_on(async {
        let mut waiter = db.connect_async();
        let mut other = db.connect_async();
        let pop = tokio::spawn(async move {
            let got: Option<(String, String)> = waiter.blpop("q", 0.0).await.unwrap();
            got
        });
        // The runtime's only thread runs this while BLPOP waits.
        let mut ticks = 0;
        for _ in 0..5 {
            tokio::time::sleep(Duration::from_millis(10)).await;
            ticks += 1;
        }
        assert_eq!(ticks, 5);
        let pong: String = redis::cmd("PING").query_async(&mut other).await.unwrap();
        assert_eq!(pong, "PONG");
        assert!(!pop.is_finished());
        // A push from another OS thread serves it.
        std::thread::spawn(move || {
            pusher_db.execute(&[b"RPUSH", b"q", b"job"]).unwrap();
        })
        .join()
        .unwrap();
        let got = pop.await.unwrap();
        assert_eq!(got, Some(("q".to_string(), "job".to_string())));
        // And a push from another task on the same runtime.
        let mut waiter = db.connect_async();
        let pop = tokio::spawn(async move {
            let got: Option<(String, String)> = waiter.blpop("q2", 5.0).await.unwrap();
            got
        });
        tokio::time::sleep(Duration::from_millis(20)).await;
        let _: () = other.rpush("q2", "second").await.unwrap();
        assert_eq!(
            pop.await.unwrap(),
            Some(("q2".to_string(), "second".to_string()))
        );
    });
}

/// A closed Db: the async connection's commands fail as a dropped
/// connection's, and a BLPOP waiting at the close ends with that error.
#[test]
fn async_closed_db() {
    use redis::AsyncCommands;
    let db = Db::in_memory().open().unwrap();
    let closer = db.clone();
    current_thread().block_on(async {
        let mut waiter = db.connect_async();
        let mut conn = db.connect_async();
        assert!(conn.is_open());
        let pop =
            tokio::spawn(
                async move { waiter.blpop::<_, Option<(String, String)>>("q", 0.0).await },
            );
        tokio::time::sleep(Duration::from_millis(50)).await;
        closer.close().unwrap();
        let e = pop.await.unwrap().unwrap_err();
        assert!(e.is_connection_dropped(), "{e:?}");
        let e = conn.get::<_, Option<String>>("k").await.unwrap_err();
        assert!(e.is_connection_dropped(), "{e:?}");
        assert!(!conn.is_open());
    });
}
