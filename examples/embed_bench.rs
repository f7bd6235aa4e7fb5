//! Measures the embedded handle (`hozon::Db`, docs/embedding.md):
//!
//! 1. SET from 1, 2, 4 and 8 threads under `appendfsync always` on the
//!    disk of the data directory (group commit: the threads share
//!    write + fsync), with the fsyncs counted from INFO;
//! 2. the same load on a `Mutex<Engine>` (each command's write and fsync
//!    under the lock), 1 and 8 threads: the baseline without group commit;
//! 3. single-thread GET, SET and INCR under `everysec` (the default).
//!
//! Usage: cargo run --release --example embed_bench -- [seconds per point] [dir]
//! (`THREADS=8,1` runs other points, in that order)
//!
//! The directory defaults to a temporary one under the current directory
//! (the disk, not a tmpfs). Prints one line per point.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use hozon::config::AppendFsync;
use hozon::embed::Db;
use hozon::Reply;

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let seconds: f64 = args.first().map_or(3.0, |s| s.parse().expect("seconds"));
    let base = args.get(1).map_or_else(
        || std::env::current_dir().unwrap(),
        std::path::PathBuf::from,
    );
    let run = Duration::from_secs_f64(seconds);

    let points: Vec<usize> = std::env::var("THREADS").map_or_else(
        |_| vec![1, 2, 4, 8],
        |list| {
            list.split(',')
                .map(|n| n.parse().expect("THREADS"))
                .collect()
        },
    );
    let mut one_thread = 0.0;
    for threads in points {
        let dir = tempfile::tempdir_in(&base).unwrap();
        let db = Db::builder(dir.path())
            .fsync(AppendFsync::Always)
            .config(|c| c.save.clear())
            .open()
            .unwrap();
        let fsyncs_before = fsyncs(&db);
        let stop = Arc::new(AtomicBool::new(false));
        let done = Arc::new(AtomicU64::new(0));
        let started = Instant::now();
        let handles: Vec<_> = (0..threads)
            .map(|t| {
                let (db, stop, done) = (db.clone(), Arc::clone(&stop), Arc::clone(&done));
                std::thread::spawn(move || {
                    let mut conn = db.connect();
                    let mut i = 0u64;
                    while !stop.load(Ordering::Relaxed) {
                        let key = format!("k{t}:{}", i % 10_000);
                        conn.execute(&[b"SET", key.as_bytes(), b"value-of-some-bytes"])
                            .unwrap();
                        i += 1;
                    }
                    done.fetch_add(i, Ordering::Relaxed);
                })
            })
            .collect();
        std::thread::sleep(run);
        stop.store(true, Ordering::Relaxed);
        for h in handles {
            h.join().unwrap();
        }
        let elapsed = started.elapsed().as_secs_f64();
        let ops = done.load(Ordering::Relaxed) as f64 / elapsed;
        let syncs = fsyncs(&db) - fsyncs_before;
        if one_thread == 0.0 {
            one_thread = ops;
        }
        println!(
            "always SET threads={threads}: {ops:.0} ops/s ({:.2}x the first point), {:.0} fsyncs/s, {:.1} writes per fsync",
            ops / one_thread,
            syncs as f64 / elapsed,
            done.load(Ordering::Relaxed) as f64 / syncs.max(1) as f64
        );
        db.close().unwrap();
    }

    // The baseline: the same load on an `Engine` behind a `Mutex`, each
    // `execute` writing and fsyncing its own batch under the lock.
    for threads in [1usize, 8] {
        let dir = tempfile::tempdir_in(&base).unwrap();
        let mut config = hozon::Config::in_memory();
        config.dir = dir.path().to_path_buf();
        config.appendonly = true;
        config.appendfsync = AppendFsync::Always;
        let engine = Arc::new(std::sync::Mutex::new(hozon::Engine::open(config).unwrap()));
        let stop = Arc::new(AtomicBool::new(false));
        let done = Arc::new(AtomicU64::new(0));
        let started = Instant::now();
        let handles: Vec<_> = (0..threads)
            .map(|t| {
                let (engine, stop, done) =
                    (Arc::clone(&engine), Arc::clone(&stop), Arc::clone(&done));
                std::thread::spawn(move || {
                    let mut session = engine.lock().unwrap().new_session();
                    let mut i = 0u64;
                    while !stop.load(Ordering::Relaxed) {
                        let key = format!("k{t}:{}", i % 10_000);
                        let argv = [&b"SET"[..], key.as_bytes(), b"value-of-some-bytes"];
                        engine.lock().unwrap().execute(&mut session, &argv);
                        i += 1;
                    }
                    done.fetch_add(i, Ordering::Relaxed);
                })
            })
            .collect();
        std::thread::sleep(run);
        stop.store(true, Ordering::Relaxed);
        for h in handles {
            h.join().unwrap();
        }
        let ops = done.load(Ordering::Relaxed) as f64 / started.elapsed().as_secs_f64();
        println!(
            "always SET threads={threads}, Mutex<Engine> (fsync under the lock): {ops:.0} ops/s"
        );
    }

    let dir = tempfile::tempdir_in(&base).unwrap();
    let db = Db::builder(dir.path())
        .config(|c| c.save.clear())
        .open()
        .unwrap();
    let mut conn = db.connect();
    conn.execute(&[b"SET", b"k", b"value-of-some-bytes"])
        .unwrap();
    for (name, argv) in [
        ("GET", vec![&b"GET"[..], b"k"]),
        ("SET", vec![&b"SET"[..], b"k", b"value-of-some-bytes"]),
        ("INCR", vec![&b"INCR"[..], b"n"]),
    ] {
        let started = Instant::now();
        let mut n = 0u64;
        while started.elapsed() < run {
            for _ in 0..1000 {
                conn.execute(&argv).unwrap();
            }
            n += 1000;
        }
        let ops = n as f64 / started.elapsed().as_secs_f64();
        println!("everysec {name} one thread (Conn::execute): {ops:.0} ops/s");
    }
    drop(conn);
    db.close().unwrap();
}

/// Fsyncs of the AOF so far (INFO's `hozon_aof_fsyncs`).
fn fsyncs(db: &Db) -> u64 {
    let info = match db.execute(&[b"INFO", b"everything"]).unwrap() {
        Reply::Bulk(info) | Reply::Verbatim(_, info) => info,
        other => panic!("INFO: {other:?}"),
    };
    let text = String::from_utf8(info).unwrap();
    text.lines()
        .find_map(|l| {
            let (name, value) = l.split_once(':')?;
            (name == "hozon_aof_fsyncs")
                .then(|| value.trim().parse().ok())
                .flatten()
        })
        .unwrap_or_else(|| panic!("no fsync count in INFO:\n{text}"))
}
