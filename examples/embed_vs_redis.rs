//! Single-thread GET/SET/INCR throughput through (a) the native
//! `Conn::execute`, (b) the redis crate on an embedded `Conn`, (c) the
//! redis crate over loopback TCP to a redis-server this program starts.
//!
//! `cargo run --release --features redis --example embed_vs_redis -- [seconds per point]`
//!
//! Both engines keep nothing on disk: the embedded one is
//! `Db::in_memory()` (no AOF, no snapshot), redis-server runs with
//! `--appendonly no --save ""`.

use std::time::{Duration, Instant};

use hozon::embed::Db;
use redis::ConnectionLike;

/// Runs `op(i)` for `secs` seconds; operations per second.
fn measure(secs: f64, mut op: impl FnMut(u64)) -> f64 {
    let limit = Duration::from_secs_f64(secs);
    let started = Instant::now();
    let mut done = 0u64;
    loop {
        for _ in 0..256 {
            op(done);
            done += 1;
        }
        let elapsed = started.elapsed();
        if elapsed >= limit {
            return done as f64 / elapsed.as_secs_f64();
        }
    }
}

/// GET, SET and INCR through the redis crate on `con`.
fn crate_ops(secs: f64, con: &mut dyn ConnectionLike) -> [f64; 3] {
    let _: () = redis::cmd("SET").arg("k").arg("v").query(con).unwrap();
    let get = measure(secs, |_| {
        let _: Option<Vec<u8>> = redis::cmd("GET").arg("k").query(con).unwrap();
    });
    let set = measure(secs, |i| {
        let _: () = redis::cmd("SET")
            .arg(i % 1000)
            .arg("value")
            .query(con)
            .unwrap();
    });
    let incr = measure(secs, |_| {
        let _: i64 = redis::cmd("INCR").arg("n").query(con).unwrap();
    });
    [get, set, incr]
}

fn main() {
    let secs: f64 = std::env::args()
        .nth(1)
        .map(|s| s.parse().expect("seconds per point"))
        .unwrap_or(2.0);
    let db = Db::in_memory().open().unwrap();

    let mut conn = db.connect();
    conn.execute(&[b"SET", b"k", b"v"]).unwrap();
    let native_get = measure(secs, |_| {
        conn.execute(&[b"GET", b"k"]).unwrap();
    });
    let native_set = measure(secs, |i| {
        let key = (i % 1000).to_string();
        conn.execute(&[b"SET", key.as_bytes(), b"value"]).unwrap();
    });
    let native_incr = measure(secs, |_| {
        conn.execute(&[b"INCR", b"n"]).unwrap();
    });
    let native = [native_get, native_set, native_incr];

    let mut conn = db.connect();
    let embedded = crate_ops(secs, &mut conn);

    let server = testkit::harness::start_redis(&["--appendonly", "no", "--save", ""]);
    let client = redis::Client::open(format!("redis://127.0.0.1:{}/", server.port)).unwrap();
    let mut tcp = client.get_connection().unwrap();
    let loopback = crate_ops(secs, &mut tcp);
    let version: String = redis::cmd("INFO")
        .arg("server")
        .query::<String>(&mut tcp)
        .unwrap()
        .lines()
        .find_map(|l| l.strip_prefix("redis_version:").map(str::to_string))
        .unwrap_or_default();

    println!("{secs} s per point, one thread");
    println!("embedded: Db::in_memory() (no AOF, no snapshot)");
    println!("redis-server {version} on 127.0.0.1: --appendonly no --save \"\"");
    println!(
        "{:<5} {:>14} {:>14} {:>14} {:>10} {:>10}",
        "op", "native", "crate embed", "crate TCP", "embed/TCP", "native/embed"
    );
    for (i, name) in ["GET", "SET", "INCR"].iter().enumerate() {
        println!(
            "{:<5} {:>14.0} {:>14.0} {:>14.0} {:>9.1}x {:>11.2}x",
            name,
            native[i],
            embedded[i],
            loopback[i],
            embedded[i] / loopback[i],
            native[i] / embedded[i]
        );
    }
}
