//! A session store on the embedded engine: each session is a hash
//! (`session:<id>`) with a sliding expiry.
//!
//! - login: HSET + EXPIRE in one MULTI/EXEC, so a session never exists
//!   without its TTL;
//! - each request: HGETALL + EXPIRE in one MULTI/EXEC (read the session,
//!   slide its expiry forward);
//! - an idle session disappears on its own: the `Db`'s background upkeep
//!   thread expires keys with no call at all. The example subscribes to
//!   the `expired` keyspace notifications (`Conn::messages()`) and sees the
//!   idle session's expiry arrive while nobody touches it, then checks the
//!   keyspace itself (`Db::with_engine`, a read that expires nothing).
//!
//! The TTL is 2 s to keep the run short (30 minutes in an application).
//!
//! Run: `cargo run --example session_store` (it asserts what it shows and
//! exits non-zero otherwise).

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use hozon::embed::{Conn, Db, DbError};
use hozon::Reply;

const TTL_SECONDS: &str = "2";

fn text(reply: &Reply) -> String {
    match reply {
        Reply::Bulk(b) => String::from_utf8_lossy(b).into_owned(),
        other => panic!("expected a bulk string, got {other:?}"),
    }
}

/// Creates the session and its TTL atomically.
fn login(conn: &mut Conn, id: &str, fields: &[(&str, &str)]) -> Result<(), DbError> {
    let key = format!("session:{id}");
    let mut hset: Vec<&[u8]> = vec![b"HSET", key.as_bytes()];
    for (field, value) in fields {
        hset.extend([field.as_bytes(), value.as_bytes()]);
    }
    conn.execute(&[b"MULTI"])?;
    conn.execute(&hset)?;
    conn.execute(&[b"EXPIRE", key.as_bytes(), TTL_SECONDS.as_bytes()])?;
    conn.execute(&[b"EXEC"])?;
    Ok(())
}

/// A request: the session's fields (None once it expired or was logged
/// out), its expiry slid forward in the same transaction.
fn touch(conn: &mut Conn, id: &str) -> Result<Option<BTreeMap<String, String>>, DbError> {
    let key = format!("session:{id}");
    conn.execute(&[b"MULTI"])?;
    conn.execute(&[b"HGETALL", key.as_bytes()])?;
    conn.execute(&[b"EXPIRE", key.as_bytes(), TTL_SECONDS.as_bytes()])?;
    let Reply::Array(results) = conn.execute(&[b"EXEC"])? else {
        panic!("EXEC answers an array");
    };
    // HGETALL is a map (RESP2 sends it as a flat array).
    let Reply::Map(pairs) = &results[0] else {
        panic!("HGETALL: {:?}", results[0]);
    };
    if pairs.is_empty() {
        return Ok(None); // expired or logged out: EXPIRE found nothing either
    }
    Ok(Some(
        pairs.iter().map(|(f, v)| (text(f), text(v))).collect(),
    ))
}

fn main() -> Result<(), DbError> {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let db = Db::open(dir.path())?;
    db.execute(&[b"CONFIG", b"SET", b"notify-keyspace-events", b"Ex"])?;

    // A listener for expired keys (e.g. to clean up what a session owned).
    let mut listener = db.connect();
    let expired = listener.messages()?;
    listener.execute(&[b"SUBSCRIBE", b"__keyevent@0__:expired"])?;

    let mut conn = db.connect();
    login(&mut conn, "alice", &[("user_id", "42"), ("role", "admin")])?;
    login(&mut conn, "bob", &[("user_id", "43"), ("role", "user")])?;
    println!("logged in alice and bob, TTL {TTL_SECONDS} s each");

    // Alice makes a request every 200 ms for 4 s (twice her TTL); Bob
    // stays idle.
    let started = Instant::now();
    let mut bob_expired_after = None;
    while started.elapsed() < Duration::from_secs(4) || bob_expired_after.is_none() {
        assert!(
            started.elapsed() < Duration::from_secs(10),
            "bob never expired"
        );
        let session = touch(&mut conn, "alice")?.expect("an active session stays");
        assert_eq!(session["user_id"], "42");
        if let Ok(message) = expired.recv_timeout(Duration::from_millis(200)) {
            assert_eq!(message[0], b"message");
            assert_eq!(message[2], b"session:bob", "only the idle session expires");
            bob_expired_after = Some(started.elapsed());
        }
    }
    let after = bob_expired_after.expect("bob's idle session expired with no call");
    println!("bob's idle session expired on its own after {after:?} (upkeep thread)");
    let held = |key: &[u8]| db.with_engine(|e| e.keyspace().db(0).contains(key));
    assert!(
        !held(b"session:bob")?,
        "removed from the keyspace, not just hidden"
    );
    assert!(held(b"session:alice")?);
    println!(
        "alice's session, used every 200 ms, is still there after {:?}",
        started.elapsed()
    );

    // A field update keeps the TTL; logout deletes the session.
    conn.execute(&[b"HSET", b"session:alice", b"role", b"user"])?;
    let ttl = conn.execute(&[b"PTTL", b"session:alice"])?;
    assert!(
        matches!(ttl, Reply::Int(ms) if ms > 0 && ms <= 2000),
        "{ttl:?}"
    );
    assert_eq!(touch(&mut conn, "alice")?.unwrap()["role"], "user");
    conn.execute(&[b"DEL", b"session:alice"])?;
    assert_eq!(touch(&mut conn, "alice")?, None);
    println!("alice logged out: her session is gone");

    // A session is gone for the application, whichever way it ended.
    assert_eq!(touch(&mut conn, "bob")?, None);
    db.close()?;
    println!("ok");
    Ok(())
}
