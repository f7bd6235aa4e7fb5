//! A distributed lock on the embedded engine: `SET lock:<name> <token> NX
//! PX <ttl>` to acquire, a compare-and-delete Lua script (`EVAL`) to
//! release only one's own lock.
//!
//! 1. Why the token: holder A's lock expires while A still works, B takes
//!    the lock, and A's late release must not delete B's lock. A plain
//!    `DEL` would; the script answers 0 and leaves B's lock alone.
//! 2. Mutual exclusion: four threads contend for the lock to increment a
//!    counter with a non-atomic GET then SET; the final count shows no
//!    update was lost, and no two threads were ever inside together.
//!
//! Run: `cargo run --example lock` (it asserts what it shows and exits
//! non-zero otherwise).

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Barrier};
use std::time::Duration;

use hozon::embed::{Conn, Db, DbError};
use hozon::Reply;

/// Deletes KEYS[1] only when it still holds this holder's token ARGV[1].
const RELEASE: &str =
    "if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end return 0";

/// A unique token per acquisition (a UUID in a real deployment).
fn new_token() -> String {
    static NEXT: AtomicU64 = AtomicU64::new(1);
    format!(
        "{}-{}",
        std::process::id(),
        NEXT.fetch_add(1, Ordering::Relaxed)
    )
}

/// A held lock: its key and the token that proves ownership.
struct Held {
    key: String,
    token: String,
}

/// One attempt: Some if the lock was free.
fn try_acquire(conn: &mut Conn, name: &str, ttl_ms: u64) -> Result<Option<Held>, DbError> {
    let held = Held {
        key: format!("lock:{name}"),
        token: new_token(),
    };
    let ttl = ttl_ms.to_string();
    match conn.execute(&[
        b"SET",
        held.key.as_bytes(),
        held.token.as_bytes(),
        b"NX",
        b"PX",
        ttl.as_bytes(),
    ])? {
        Reply::Simple(_) => Ok(Some(held)), // OK
        Reply::Null => Ok(None),            // someone holds it
        other => panic!("SET NX: {other:?}"),
    }
}

/// Retries every millisecond until the lock is free; also says how many
/// attempts found it held.
fn acquire(conn: &mut Conn, name: &str, ttl_ms: u64) -> Result<(Held, usize), DbError> {
    let mut busy = 0;
    loop {
        if let Some(held) = try_acquire(conn, name, ttl_ms)? {
            return Ok((held, busy));
        }
        busy += 1;
        std::thread::sleep(Duration::from_millis(1));
    }
}

/// True if the lock was still ours and is now released.
fn release(conn: &mut Conn, held: &Held) -> Result<bool, DbError> {
    let reply = conn.execute(&[
        b"EVAL",
        RELEASE.as_bytes(),
        b"1",
        held.key.as_bytes(),
        held.token.as_bytes(),
    ])?;
    Ok(reply == Reply::Int(1))
}

fn main() -> Result<(), DbError> {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let db = Db::open(dir.path())?;
    let mut conn = db.connect();

    // 1. A's lock (500 ms) expires while A works for 600 ms.
    let a = try_acquire(&mut conn, "order:12345", 500)?.expect("the lock is free");
    assert!(
        try_acquire(&mut conn, "order:12345", 500)?.is_none(),
        "held by A"
    );
    std::thread::sleep(Duration::from_millis(600));
    let b = try_acquire(&mut conn, "order:12345", 30_000)?.expect("A's lock expired");
    println!("A's lock expired while A was working; B acquired it");
    assert!(!release(&mut conn, &a)?, "A's late release must fail");
    let value = conn.execute(&[b"GET", b"lock:order:12345"])?;
    assert_eq!(
        value,
        Reply::Bulk(b.token.clone().into_bytes()),
        "B still holds it"
    );
    println!("A's late release answered 0: B's lock is intact");
    assert!(release(&mut conn, &b)?);
    assert!(!release(&mut conn, &b)?, "released once only");
    println!("B released its own lock");

    // 2. Four threads, 50 increments each, GET then SET under the lock.
    const THREADS: usize = 4;
    const INCREMENTS: usize = 50;
    let inside = Arc::new(AtomicUsize::new(0));
    let start = Arc::new(Barrier::new(THREADS));
    let workers: Vec<_> = (0..THREADS)
        .map(|_| {
            let (db, inside, start) = (db.clone(), Arc::clone(&inside), Arc::clone(&start));
            std::thread::spawn(move || -> Result<usize, DbError> {
                let mut conn = db.connect();
                start.wait();
                let mut waited = 0;
                for _ in 0..INCREMENTS {
                    let (held, busy) = acquire(&mut conn, "counter", 5_000)?;
                    waited += busy;
                    assert_eq!(
                        inside.fetch_add(1, Ordering::SeqCst),
                        0,
                        "two holders at once"
                    );
                    let n = match conn.execute(&[b"GET", b"counter"])? {
                        Reply::Bulk(n) => String::from_utf8(n).unwrap().parse::<u64>().unwrap(),
                        _ => 0,
                    };
                    // The work: the others try to get in meanwhile.
                    std::thread::sleep(Duration::from_micros(100));
                    conn.execute(&[b"SET", b"counter", (n + 1).to_string().as_bytes()])?;
                    inside.fetch_sub(1, Ordering::SeqCst);
                    assert!(release(&mut conn, &held)?, "the lock was ours");
                }
                Ok(waited)
            })
        })
        .collect();
    for (t, worker) in workers.into_iter().enumerate() {
        let waited = worker.join().expect("no panic")?;
        println!("thread {t}: {INCREMENTS} increments, found the lock held {waited} times");
    }
    let expected = (THREADS * INCREMENTS).to_string();
    let total = conn.execute(&[b"GET", b"counter"])?;
    assert_eq!(
        total,
        Reply::Bulk(expected.clone().into_bytes()),
        "an update was lost"
    );
    println!("counter = {expected}: no update lost, never two holders at once");
    assert_eq!(conn.execute(&[b"EXISTS", b"lock:counter"])?, Reply::Int(0));
    db.close()?;
    println!("ok");
    Ok(())
}
