//! The embedded handle (`hozon::embed`, docs/embedding.md): threads, the
//! group commit's durability under power loss, close and drop, the
//! upkeep thread, blocking commands and Pub/Sub, typed errors.

mod adapter;

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use hozon::config::AppendFsync;
use hozon::embed::{Db, DbError};
use hozon::persist::io::{Fault, FaultyIo, PowerLoss};
use hozon::Reply;

mod waits;

/// A handle on the fault-injecting file system at `/db`, AOF only (no
/// save points: what survives is what the AOF holds).
fn faulty(io: &FaultyIo, policy: AppendFsync) -> Db {
    Db::builder(Path::new("/db"))
        .io(Arc::new(io.process()))
        .fsync(policy)
        .config(|c| c.save.clear())
        .open()
        .unwrap_or_else(|e| panic!("open: {e}"))
}

fn bulk(reply: Reply) -> Option<String> {
    match reply {
        Reply::Bulk(b) => Some(String::from_utf8(b).unwrap()),
        Reply::Null => None,
        other => panic!("not a bulk: {other:?}"),
    }
}

fn get(db: &Db, key: &str) -> Option<String> {
    bulk(db.execute(&[b"GET", key.as_bytes()]).unwrap())
}

/// Eight threads run a mix of commands on shared and own keys; the final
/// state equals the model's, before and after a reopen.
#[test]
fn many_threads_mixed_commands_match_the_model() {
    let dir = tempfile::tempdir().unwrap();
    let open = || {
        Db::builder(dir.path())
            .fsync(AppendFsync::Always)
            .open()
            .unwrap()
    };
    let db = open();
    const THREADS: usize = 8;
    const OPS: usize = 300;
    let handles: Vec<_> = (0..THREADS)
        .map(|t| {
            let db = db.clone();
            std::thread::spawn(move || {
                let mut conn = db.connect();
                let mut own = BTreeMap::new();
                for i in 0..OPS {
                    let key = format!("t{t}:{}", i % 17);
                    let value = format!("{t}-{i}");
                    match i % 5 {
                        0 | 1 => {
                            conn.execute(&[b"SET", key.as_bytes(), value.as_bytes()])
                                .unwrap();
                            own.insert(key, value);
                        }
                        2 => {
                            conn.execute(&[b"INCR", b"counter"]).unwrap();
                        }
                        3 => {
                            conn.execute(&[b"RPUSH", b"list", value.as_bytes()])
                                .unwrap();
                        }
                        _ => {
                            // A transaction: both or neither, atomically.
                            conn.execute(&[b"MULTI"]).unwrap();
                            conn.execute(&[b"HINCRBY", b"h", b"a", b"1"]).unwrap();
                            conn.execute(&[b"HINCRBY", b"h", b"b", b"1"]).unwrap();
                            let exec = conn.execute(&[b"EXEC"]).unwrap();
                            let Reply::Array(items) = exec else {
                                panic!("{exec:?}")
                            };
                            assert_eq!(items.len(), 2);
                        }
                    }
                    // A command error is typed and changes nothing.
                    if i == 7 {
                        match conn.execute(&[b"LPUSH", b"counter", b"x"]) {
                            Err(DbError::Command(e)) => assert_eq!(e.code(), "WRONGTYPE"),
                            other => panic!("{other:?}"),
                        }
                    }
                }
                own
            })
        })
        .collect();
    let mut model = BTreeMap::new();
    for h in handles {
        model.extend(h.join().unwrap());
    }
    let per_kind = (THREADS * OPS / 5) as i64;
    let check = |db: &Db| {
        for (key, value) in &model {
            assert_eq!(get(db, key).as_deref(), Some(value.as_str()), "{key}");
        }
        assert_eq!(
            db.execute(&[b"GET", b"counter"]).unwrap(),
            Reply::Bulk(per_kind.to_string().into_bytes())
        );
        assert_eq!(
            db.execute(&[b"LLEN", b"list"]).unwrap(),
            Reply::Int(per_kind)
        );
        for field in [&b"a"[..], b"b"] {
            assert_eq!(
                db.execute(&[b"HGET", b"h", field]).unwrap(),
                Reply::Bulk(per_kind.to_string().into_bytes())
            );
        }
        let keys = model.len() as i64 + 3;
        assert_eq!(db.execute(&[b"DBSIZE"]).unwrap(), Reply::Int(keys));
    };
    check(&db);
    db.close().unwrap();
    assert!(matches!(db.execute(&[b"PING"]), Err(DbError::Closed)));
    let db = open();
    check(&db);
}

/// Threads write under `always` while the power goes: every write
/// acknowledged before the cut is there after it (whatever the torn
/// tail). Shared fsyncs (group commit) and all.
#[test]
fn power_cut_under_always_loses_nothing_acknowledged() {
    for round in 0..6u64 {
        let io = FaultyIo::new();
        let db = faulty(&io, AppendFsync::Always);
        let acked = Arc::new(Mutex::new(Vec::new()));
        let handles: Vec<_> = (0..4)
            .map(|t| {
                let db = db.clone();
                let acked = Arc::clone(&acked);
                std::thread::spawn(move || {
                    for i in 0.. {
                        let key = format!("k{t}:{i}");
                        match db.execute(&[b"SET", key.as_bytes(), b"v"]) {
                            Ok(_) => acked.lock().unwrap().push(key),
                            Err(e) => {
                                assert!(e.is_persistence(), "{e}");
                                return;
                            }
                        }
                    }
                })
            })
            .collect();
        std::thread::sleep(Duration::from_millis(30 + round * 15));
        let mode = match round % 3 {
            0 => PowerLoss::DropUnsynced,
            1 => PowerLoss::Torn { keep: 100 },
            _ => PowerLoss::TornWithGarbage {
                keep: 50,
                garbage: 20,
            },
        };
        io.power_loss(mode);
        for h in handles {
            h.join().unwrap();
        }
        // Its closing fsync fails: the machine was off.
        drop(db);
        let acked = acked.lock().unwrap().clone();
        assert!(
            acked.len() > 10,
            "round {round}: only {} writes",
            acked.len()
        );
        let db = faulty(&io, AppendFsync::Always);
        for key in &acked {
            assert_eq!(
                get(&db, key).as_deref(),
                Some("v"),
                "round {round}: {key} lost"
            );
        }
    }
}

/// Under `always` a read never returns a value a power cut could still
/// take back: a GET of a key whose SET is being fsynced waits for that
/// fsync (as the server's replies wait for the turn's).
#[test]
fn a_read_waits_for_the_fsync_of_what_it_sees() {
    let io = FaultyIo::new();
    let db = faulty(&io, AppendFsync::Always);
    io.inject(Fault::SlowSync {
        nth: 1,
        delay_ms: 300,
    });
    let writer = {
        let db = db.clone();
        std::thread::spawn(move || db.execute(&[b"SET", b"x", b"v"]))
    };
    std::thread::sleep(Duration::from_millis(50));
    let seen = get(&db, "x");
    assert_eq!(seen.as_deref(), Some("v"), "the SET ran first");
    io.power_loss(PowerLoss::DropUnsynced);
    let _ = writer.join().unwrap();
    drop(db);
    let db = faulty(&io, AppendFsync::Always);
    assert_eq!(get(&db, "x"), seen, "a value a reader saw was lost");
}

/// Under `always`, concurrent callers share fsyncs: far fewer fsyncs than
/// writes.
#[test]
fn concurrent_writers_share_fsyncs_under_always() {
    let io = FaultyIo::new();
    // Every fsync takes a while, as on a real disk.
    for nth in 1..=2000 {
        io.inject(Fault::SlowSync { nth, delay_ms: 1 });
    }
    let db = faulty(&io, AppendFsync::Always);
    let (_, syncs_before) = io.counts();
    let handles: Vec<_> = (0..8)
        .map(|t| {
            let db = db.clone();
            std::thread::spawn(move || {
                for i in 0..100 {
                    let key = format!("k{t}:{i}");
                    db.execute(&[b"SET", key.as_bytes(), b"v"]).unwrap();
                }
            })
        })
        .collect();
    for h in handles {
        h.join().unwrap();
    }
    let (_, syncs) = io.counts();
    let fsyncs = syncs - syncs_before;
    assert!(fsyncs >= 1);
    assert!(
        fsyncs < 400,
        "800 writes took {fsyncs} fsyncs: no group commit"
    );
}

/// Dropping the last handle (no close call) with writes not yet fsynced
/// makes them durable, under every policy.
#[test]
fn drop_fsyncs_pending_writes() {
    for policy in [AppendFsync::Everysec, AppendFsync::No, AppendFsync::Always] {
        let io = FaultyIo::new();
        let db = faulty(&io, policy);
        let conn_db = db.clone();
        let mut conn = conn_db.connect();
        for i in 0..50 {
            let key = format!("k{i}");
            conn.execute(&[b"SET", key.as_bytes(), b"v"]).unwrap();
        }
        drop(conn);
        drop(conn_db);
        drop(db);
        io.power_loss(PowerLoss::DropUnsynced);
        let db = faulty(&io, policy);
        assert_eq!(
            db.execute(&[b"DBSIZE"]).unwrap(),
            Reply::Int(50),
            "{policy:?}"
        );
    }
}

/// `close` while other threads' writes wait for their fsync: each one
/// either was acknowledged (and survives a power loss right after) or
/// got an error.
#[test]
fn close_with_writes_in_flight_loses_nothing_acknowledged() {
    let io = FaultyIo::new();
    for nth in 1..=5000 {
        io.inject(Fault::SlowSync { nth, delay_ms: 2 });
    }
    let db = faulty(&io, AppendFsync::Always);
    let acked = Arc::new(Mutex::new(Vec::new()));
    let handles: Vec<_> = (0..4)
        .map(|t| {
            let db = db.clone();
            let acked = Arc::clone(&acked);
            std::thread::spawn(move || {
                for i in 0.. {
                    let key = format!("k{t}:{i}");
                    match db.execute(&[b"SET", key.as_bytes(), b"v"]) {
                        Ok(_) => acked.lock().unwrap().push(key),
                        Err(DbError::Closed) => return,
                        Err(e) => panic!("{e}"),
                    }
                }
            })
        })
        .collect();
    std::thread::sleep(Duration::from_millis(100));
    db.close().unwrap();
    io.power_loss(PowerLoss::DropUnsynced);
    for h in handles {
        h.join().unwrap();
    }
    let acked = acked.lock().unwrap().clone();
    let db = faulty(&io, AppendFsync::Always);
    for key in &acked {
        assert_eq!(get(&db, key).as_deref(), Some("v"), "{key} lost");
    }
}

/// An idle engine under `everysec` has fsynced its last write within 2 s
/// with no call at all (the upkeep thread).
#[test]
fn idle_everysec_fsyncs_within_two_seconds() {
    let io = FaultyIo::new();
    let db = faulty(&io, AppendFsync::Everysec);
    // The first write is fsynced at once (no fsync for a second); the
    // second, once that fsync is done, waits for the next second's.
    db.execute(&[b"SET", b"a", b"1"]).unwrap();
    std::thread::sleep(Duration::from_millis(50));
    db.execute(&[b"SET", b"b", b"2"]).unwrap();
    std::thread::sleep(Duration::from_millis(1950));
    io.power_loss(PowerLoss::DropUnsynced);
    drop(db);
    let db = faulty(&io, AppendFsync::Everysec);
    assert_eq!(get(&db, "a").as_deref(), Some("1"));
    assert_eq!(get(&db, "b").as_deref(), Some("2"));
}

/// Keys expire with no call (active expiry by the upkeep thread): the
/// keyspace, read without lazy expiry, no longer holds them.
#[test]
fn keys_expire_without_any_call() {
    let db = Db::in_memory().open().unwrap();
    for i in 0..20 {
        let key = format!("k{i}");
        db.execute(&[b"SET", key.as_bytes(), b"v", b"PX", b"50"])
            .unwrap();
    }
    db.execute(&[b"SET", b"stays", b"v"]).unwrap();
    let held = |db: &Db| db.with_engine(|e| e.keyspace().db(0).len()).unwrap();
    assert_eq!(held(&db), 21);
    let started = Instant::now();
    while held(&db) > 1 {
        assert!(
            started.elapsed() < Duration::from_secs(3),
            "{} keys still held",
            held(&db)
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// BLPOP blocks only its thread, is served by another thread's push, and
/// honours its timeout; the served pop is durable like any write.
#[test]
fn blocking_pop_is_woken_by_another_thread() {
    let dir = tempfile::tempdir().unwrap();
    let db = Db::builder(dir.path())
        .fsync(AppendFsync::Always)
        .open()
        .unwrap();
    let waiter = {
        let db = db.clone();
        std::thread::spawn(move || db.execute(&[b"BLPOP", b"q", b"0"]).unwrap())
    };
    std::thread::sleep(Duration::from_millis(100));
    // Other threads run meanwhile.
    assert_eq!(db.execute(&[b"PING"]).unwrap(), Reply::simple("PONG"));
    db.execute(&[b"RPUSH", b"q", b"job"]).unwrap();
    let reply = waiter.join().unwrap();
    assert_eq!(
        reply,
        Reply::Array(vec![Reply::bulk(b"q"), Reply::bulk(b"job")])
    );
    assert_eq!(db.execute(&[b"LLEN", b"q"]).unwrap(), Reply::Int(0));
    let started = Instant::now();
    let reply = db.execute(&[b"BLPOP", b"empty", b"0.2"]).unwrap();
    assert_eq!(reply, Reply::NullArray);
    let waited = started.elapsed();
    assert!(
        waited >= Duration::from_millis(190) && waited < Duration::from_secs(2),
        "{waited:?}"
    );
    db.close().unwrap();
    // The pop was logged as LPOP: the reopened list is empty.
    let db = Db::open(dir.path()).unwrap();
    assert_eq!(db.execute(&[b"LLEN", b"q"]).unwrap(), Reply::Int(0));
}

/// A closing engine ends a blocked thread's wait with `Closed`.
#[test]
fn close_ends_a_blocked_wait() {
    let db = Db::in_memory().open().unwrap();
    let waiter = {
        let db = db.clone();
        std::thread::spawn(move || db.execute(&[b"BLPOP", b"q", b"0"]))
    };
    std::thread::sleep(Duration::from_millis(100));
    db.close().unwrap();
    assert!(matches!(waiter.join().unwrap(), Err(DbError::Closed)));
}

/// SUBSCRIBE on a connection, messages from another thread's PUBLISH on
/// its receiver.
#[test]
fn subscribe_gives_a_receiver_of_messages() {
    let db = Db::in_memory().open().unwrap();
    let mut conn = db.connect();
    let messages = conn.messages().unwrap();
    conn.execute(&[b"SUBSCRIBE", b"news"]).unwrap();
    let publisher = {
        let db = db.clone();
        std::thread::spawn(move || db.execute(&[b"PUBLISH", b"news", b"hello"]).unwrap())
    };
    assert_eq!(publisher.join().unwrap(), Reply::Int(1));
    let message = messages.recv_timeout(Duration::from_secs(2)).unwrap();
    assert_eq!(
        message,
        vec![b"message".to_vec(), b"news".to_vec(), b"hello".to_vec()]
    );
}

/// A failed fsync under `always`: the write that ran is `NotDurable`
/// (poisoned), the next one is `Refused` (MISCONF) and changes nothing,
/// reads still work, a command error stays a command error.
#[test]
fn persistence_failures_are_typed() {
    let io = FaultyIo::new();
    let db = faulty(&io, AppendFsync::Always);
    db.execute(&[b"SET", b"a", b"1"]).unwrap();
    io.inject(Fault::FailSync { nth: 1, errno: 5 });
    match db.execute(&[b"SET", b"b", b"2"]) {
        Err(DbError::NotDurable { poisoned: true, .. }) => {}
        other => panic!("{other:?}"),
    }
    match db.execute(&[b"SET", b"c", b"3"]) {
        Err(e @ DbError::Refused(_)) => assert!(e.is_persistence()),
        other => panic!("{other:?}"),
    }
    assert_eq!(get(&db, "c"), None);
    assert_eq!(get(&db, "a").as_deref(), Some("1"));
    match db.execute(&[b"NOSUCHCOMMAND"]) {
        Err(DbError::Command(e)) => assert_eq!(e.code(), "ERR"),
        other => panic!("{other:?}"),
    }
}

/// A second handle on a locked directory fails to open, typed.
#[test]
fn open_errors_are_typed() {
    let dir = tempfile::tempdir().unwrap();
    let db = Db::open(dir.path()).unwrap();
    match Db::open(dir.path()) {
        Err(DbError::Open(e)) => assert!(matches!(*e, hozon::Error::Locked(_)), "{e}"),
        Err(e) => panic!("{e}"),
        Ok(_) => panic!("opened twice"),
    }
    db.close().unwrap();
    // Released by close.
    Db::open(dir.path()).unwrap();
}
