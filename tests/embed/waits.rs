//! Waits that end from elsewhere: CLIENT UNBLOCK from another thread,
//! WAIT and WAITAOF in-process (docs/embedding.md, "Threading model").

use std::time::{Duration, Instant};

use hozon::config::AppendFsync;
use hozon::embed::{Db, DbError};
use hozon::Reply;

/// Polls CLIENT LIST-free: until `id` is blocked (CLIENT UNBLOCK of a
/// client that is not blocked answers 0, so the unblocker retries).
fn unblock(db: &Db, id: i64, reason: &[u8]) {
    let id = id.to_string();
    let started = Instant::now();
    loop {
        match db
            .execute(&[b"CLIENT", b"UNBLOCK", id.as_bytes(), reason])
            .unwrap()
        {
            Reply::Int(1) => return,
            Reply::Int(0) => {
                assert!(
                    started.elapsed() < Duration::from_secs(10),
                    "client {id} never blocked"
                );
                std::thread::sleep(Duration::from_millis(5));
            }
            other => panic!("CLIENT UNBLOCK: {other:?}"),
        }
    }
}

/// CLIENT UNBLOCK from another thread ends a BLPOP that would wait
/// forever: with its timeout reply, or with the UNBLOCKED error.
#[test]
fn client_unblock_ends_another_threads_wait() {
    let db = Db::in_memory().open().unwrap();
    for (reason, expect_error) in [(&b"TIMEOUT"[..], false), (&b"ERROR"[..], true)] {
        let mut conn = db.connect();
        let Reply::Int(id) = conn.execute(&[b"CLIENT", b"ID"]).unwrap() else {
            panic!("CLIENT ID")
        };
        let waiter = std::thread::spawn(move || {
            let reply = conn.execute(&[b"BLPOP", b"q", b"0"]);
            // The connection is usable again afterwards.
            assert_eq!(conn.execute(&[b"PING"]).unwrap(), Reply::simple("PONG"));
            reply
        });
        unblock(&db, id, reason);
        match (waiter.join().unwrap(), expect_error) {
            (Ok(Reply::NullArray), false) => {}
            (Err(DbError::Command(e)), true) => {
                assert_eq!(e.code(), "UNBLOCKED");
                assert_eq!(e.message(), "UNBLOCKED client unblocked via CLIENT UNBLOCK");
            }
            (other, _) => panic!("{other:?}"),
        }
    }
    // Nobody is blocked now.
    assert_eq!(
        db.execute(&[b"CLIENT", b"UNBLOCK", b"1", b"ERROR"])
            .unwrap(),
        Reply::Int(0)
    );
    // A push after the unblock is not taken by the gone waiter.
    db.execute(&[b"RPUSH", b"q", b"x"]).unwrap();
    assert_eq!(db.execute(&[b"LLEN", b"q"]).unwrap(), Reply::Int(1));
}

/// WAIT with no replicas answers 0 at once when it asks for none, and
/// after its timeout (blocking only its thread) when it asks for one.
/// WAITAOF 1 0 0 returns once the caller's write is fsynced under
/// `everysec`: the upkeep thread's fsync ends the wait.
#[test]
fn wait_and_waitaof_block_only_their_thread() {
    let dir = tempfile::tempdir().unwrap();
    let db = Db::builder(dir.path())
        .fsync(AppendFsync::Everysec)
        .open()
        .unwrap();
    let mut conn = db.connect();
    conn.execute(&[b"SET", b"k", b"v"]).unwrap();
    assert_eq!(conn.execute(&[b"WAIT", b"0", b"0"]).unwrap(), Reply::Int(0));
    let waiter = std::thread::spawn(move || {
        let started = Instant::now();
        let reply = conn.execute(&[b"WAIT", b"1", b"300"]).unwrap();
        (reply, started.elapsed(), conn)
    });
    // Other threads run meanwhile.
    for _ in 0..10 {
        db.execute(&[b"INCR", b"n"]).unwrap();
    }
    let (reply, waited, mut conn) = waiter.join().unwrap();
    assert_eq!(reply, Reply::Int(0));
    assert!(waited >= Duration::from_millis(290), "{waited:?}");

    conn.execute(&[b"SET", b"k", b"w"]).unwrap();
    // Without the fsync's wake-up this waits forever.
    assert_eq!(
        conn.execute(&[b"WAITAOF", b"1", b"0", b"0"]).unwrap(),
        Reply::Array(vec![Reply::Int(1), Reply::Int(0)])
    );
}
