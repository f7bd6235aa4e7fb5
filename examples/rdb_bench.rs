//! Times the RDB reader on one file (used by `scripts/bench --only-rdb`):
//! the skip pass ([`hozon::rdb::reader::scan`]: every length checked, no
//! value built, CRC verified) and the full validating load
//! ([`hozon::rdb::reader::load`]: every value built and freed, as
//! `redis-check-rdb` does), and the same load into a keyspace. Prints one
//! JSON object.
//!
//! Usage: cargo run --release --example rdb_bench -- <file.rdb> [rounds]

use std::time::Instant;

use hozon::keyspace::Keyspace;
use hozon::rdb::reader::{load_with_hints, scan, Options};
use hozon::types::EncodingLimits;

fn main() {
    let mut args = std::env::args().skip(1);
    let Some(path) = args.next() else {
        eprintln!("usage: rdb_bench <file.rdb> [rounds]");
        std::process::exit(2);
    };
    let rounds: usize = args.next().and_then(|r| r.parse().ok()).unwrap_or(3);
    let file = std::fs::File::open(&path).unwrap_or_else(|e| {
        eprintln!("rdb_bench: cannot open {path}: {e}");
        std::process::exit(2);
    });
    // SAFETY: the benchmark owns the file for its duration; nothing
    // truncates it while mapped.
    let data = unsafe { memmap2::Mmap::map(&file) }.unwrap_or_else(|e| {
        eprintln!("rdb_bench: cannot map {path}: {e}");
        std::process::exit(2);
    });
    let mut scan_secs = Vec::new();
    let mut load_secs = Vec::new();
    let mut check_secs = Vec::new();
    let mut keys = 0;
    for _ in 0..rounds {
        let started = Instant::now();
        let summary = scan(&data).unwrap_or_else(|e| {
            eprintln!("rdb_bench: scan failed: {e}");
            std::process::exit(1);
        });
        scan_secs.push(started.elapsed().as_secs_f64());
        keys = summary.keys_per_db.values().sum::<u64>();

        let options = Options {
            limits: EncodingLimits::default(),
            databases: 16,
            skip_expired_before_ms: None,
            now_ms: 0,
        };
        // The validating load redis-check-rdb does: every value built,
        // then freed.
        let started = Instant::now();
        load_with_hints(
            &data,
            &options,
            &mut |k| {
                drop(k);
                Ok(())
            },
            &mut |_, _, _| {},
        )
        .unwrap_or_else(|e| {
            eprintln!("rdb_bench: load failed: {e}");
            std::process::exit(1);
        });
        check_secs.push(started.elapsed().as_secs_f64());

        let keyspace = std::cell::RefCell::new(Keyspace::new(16));
        let started = Instant::now();
        load_with_hints(
            &data,
            &options,
            &mut |k| {
                keyspace
                    .borrow_mut()
                    .db_mut(k.db)
                    .insert_loaded(k.key, k.value, k.expire_ms, None)
                    .map_err(|_| "duplicate key".to_string())
            },
            &mut |db, keys, expiring| {
                keyspace
                    .borrow_mut()
                    .db_mut(db)
                    .reserve(keys as usize, expiring as usize)
            },
        )
        .unwrap_or_else(|e| {
            eprintln!("rdb_bench: load failed: {e}");
            std::process::exit(1);
        });
        load_secs.push(started.elapsed().as_secs_f64());
        // Freeing the keyspace is not part of the load (dropped after
        // the clock stopped).
        drop(keyspace);
    }
    let median = |v: &mut Vec<f64>| {
        v.sort_by(f64::total_cmp);
        v[v.len() / 2]
    };
    println!(
        "{{\"bytes\": {}, \"keys\": {keys}, \"scan_secs\": {:.4}, \"check_secs\": {:.4}, \"load_secs\": {:.4}}}",
        data.len(),
        median(&mut scan_secs),
        median(&mut check_secs),
        median(&mut load_secs)
    );
}
