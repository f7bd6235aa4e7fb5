//! One embedded engine shared by many threads: `Db` is `Clone + Send +
//! Sync`, each thread takes a clone (and a `Conn` of its own for state
//! such as MULTI).
//!
//! 1. Four threads run a mix of commands (SET, GET, INCR, and MULTI/EXEC
//!    transactions) on shared and own keys; the totals add up.
//! 2. A consumer thread blocks in `BLPOP`; it blocks only its own thread,
//!    and another thread's `LPUSH` wakes it with the value.
//! 3. A subscriber receives, through `Conn::messages()`, what another
//!    thread `PUBLISH`es.
//! 4. Group commit under `appendfsync always`: every write returns only
//!    once fsynced, and concurrent writers share the fsyncs. Prints SET/s
//!    and writes per fsync for 1 and 4 threads (figures only: they depend
//!    on the disk and the machine's load).
//!
//! Run: `cargo run --release --example threads` (it asserts what it shows
//! and exits non-zero otherwise).

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{mpsc, Arc};
use std::time::{Duration, Instant};

use hozon::config::AppendFsync;
use hozon::embed::{Db, DbError};
use hozon::Reply;

const THREADS: usize = 4;

fn bulk(s: &str) -> Reply {
    Reply::Bulk(s.as_bytes().to_vec())
}

fn mixed_commands(db: &Db) -> Result<(), DbError> {
    const OPS: usize = 400;
    let workers: Vec<_> = (0..THREADS)
        .map(|t| {
            let db = db.clone();
            std::thread::spawn(move || -> Result<(), DbError> {
                let mut conn = db.connect();
                for i in 0..OPS {
                    let key = format!("user:{t}:{}", (i / 4) % 10);
                    match i % 4 {
                        0 => drop(conn.execute(&[
                            b"SET",
                            key.as_bytes(),
                            i.to_string().as_bytes(),
                        ])?),
                        1 => assert_eq!(
                            conn.execute(&[b"GET", key.as_bytes()])?,
                            bulk(&(i - 1).to_string())
                        ),
                        2 => drop(conn.execute(&[b"INCR", b"hits"])?),
                        _ => {
                            // Both or neither, and no other thread in between.
                            conn.execute(&[b"MULTI"])?;
                            conn.execute(&[
                                b"HINCRBY",
                                b"per-thread",
                                t.to_string().as_bytes(),
                                b"1",
                            ])?;
                            conn.execute(&[b"RPUSH", b"log", key.as_bytes()])?;
                            conn.execute(&[b"EXEC"])?;
                        }
                    }
                }
                Ok(())
            })
        })
        .collect();
    for worker in workers {
        worker.join().expect("no panic")?;
    }
    let each = OPS / 4;
    assert_eq!(
        db.execute(&[b"GET", b"hits"])?,
        bulk(&(THREADS * each).to_string())
    );
    assert_eq!(
        db.execute(&[b"LLEN", b"log"])?,
        Reply::Int((THREADS * each) as i64)
    );
    for t in 0..THREADS {
        let count = db.execute(&[b"HGET", b"per-thread", t.to_string().as_bytes()])?;
        assert_eq!(count, bulk(&each.to_string()));
    }
    println!(
        "1. {THREADS} threads × {OPS} mixed commands: hits = {0}, log length {0}, {each} transactions per thread",
        THREADS * each
    );
    Ok(())
}

fn blocking_pop(db: &Db) -> Result<(), DbError> {
    let consumer = {
        let db = db.clone();
        std::thread::spawn(move || db.execute(&[b"BLPOP", b"tasks", b"10"]))
    };
    std::thread::sleep(Duration::from_millis(100));
    // The consumer's thread is blocked, not the engine.
    assert_eq!(db.execute(&[b"LLEN", b"tasks"])?, Reply::Int(0));
    let producer = {
        let db = db.clone();
        std::thread::spawn(move || db.execute(&[b"LPUSH", b"tasks", b"resize img-1.png"]))
    };
    producer.join().expect("no panic")?;
    let popped = consumer.join().expect("no panic")?;
    // BLPOP answers the list's name and the value.
    assert_eq!(
        popped,
        Reply::Array(vec![bulk("tasks"), bulk("resize img-1.png")]),
        "woken with the value"
    );
    println!(
        "2. a thread blocked in BLPOP was woken by another thread's LPUSH of \"resize img-1.png\""
    );
    Ok(())
}

fn publish_subscribe(db: &Db) -> Result<(), DbError> {
    let (ready_tx, ready) = mpsc::channel();
    let subscriber = {
        let db = db.clone();
        std::thread::spawn(move || -> Result<Vec<String>, DbError> {
            let mut conn = db.connect();
            let messages = conn.messages()?;
            conn.execute(&[b"SUBSCRIBE", b"orders"])?;
            ready_tx.send(()).unwrap();
            let receive = || {
                messages
                    .recv_timeout(Duration::from_secs(10))
                    .expect("a message")
            };
            Ok((0..3)
                .map(|_| String::from_utf8(receive()[2].clone()).unwrap())
                .collect())
        })
    };
    ready.recv().expect("subscribed");
    for order in ["order 1", "order 2", "order 3"] {
        // PUBLISH answers how many subscribers received it.
        assert_eq!(
            db.execute(&[b"PUBLISH", b"orders", order.as_bytes()])?,
            Reply::Int(1)
        );
    }
    let received = subscriber.join().expect("no panic")?;
    assert_eq!(received, ["order 1", "order 2", "order 3"]);
    println!("3. the subscriber received {received:?}");
    Ok(())
}

/// The AOF's fsync count, from INFO.
fn fsyncs(db: &Db) -> Result<u64, DbError> {
    let (Reply::Bulk(info) | Reply::Verbatim(_, info)) = db.execute(&[b"INFO", b"persistence"])?
    else {
        panic!("INFO answers a bulk string");
    };
    let info = String::from_utf8(info).unwrap();
    let line = info
        .lines()
        .find_map(|l| l.strip_prefix("hozon_aof_fsyncs:"));
    Ok(line
        .expect("hozon_aof_fsyncs in INFO")
        .trim()
        .parse()
        .unwrap())
}

/// SETs from `threads` threads for `run`, each returning once fsynced.
fn group_commit(db: &Db, threads: usize, run: Duration) -> Result<(u64, u64), DbError> {
    let (stop, done) = (
        Arc::new(AtomicBool::new(false)),
        Arc::new(AtomicU64::new(0)),
    );
    let before = fsyncs(db)?;
    let writers: Vec<_> = (0..threads)
        .map(|t| {
            let (db, stop, done) = (db.clone(), Arc::clone(&stop), Arc::clone(&done));
            std::thread::spawn(move || -> Result<(), DbError> {
                let mut conn = db.connect();
                while !stop.load(Ordering::Relaxed) {
                    let key = format!("{threads}:{t}:{}", done.fetch_add(1, Ordering::Relaxed));
                    conn.execute(&[b"SET", key.as_bytes(), b"v"])?;
                }
                Ok(())
            })
        })
        .collect();
    std::thread::sleep(run);
    stop.store(true, Ordering::Relaxed);
    for writer in writers {
        writer.join().expect("no panic")?;
    }
    Ok((done.load(Ordering::Relaxed), fsyncs(db)? - before))
}

fn main() -> Result<(), DbError> {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let db = Db::open(dir.path())?;
    mixed_commands(&db)?;
    blocking_pop(&db)?;
    publish_subscribe(&db)?;
    db.close()?;

    let dir = tempfile::tempdir().expect("a temporary directory");
    let db = Db::builder(dir.path()).fsync(AppendFsync::Always).open()?;
    let run = Duration::from_millis(500);
    let mut written = 0;
    println!("4. SET under appendfsync always, {run:?} per point:");
    for threads in [1, THREADS] {
        let started = Instant::now();
        let (sets, syncs) = group_commit(&db, threads, run)?;
        let per_second = sets as f64 / started.elapsed().as_secs_f64();
        let per_fsync = sets as f64 / syncs.max(1) as f64;
        println!("   {threads} thread(s): {per_second:>8.0} SET/s, {syncs} fsyncs, {per_fsync:.1} SETs per fsync");
        written += sets;
    }
    // Every acknowledged SET is there (and was fsynced before its reply).
    assert_eq!(db.execute(&[b"DBSIZE"])?, Reply::Int(written as i64));
    db.close()?;
    println!("ok");
    Ok(())
}
