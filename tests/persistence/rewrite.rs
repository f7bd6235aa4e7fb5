//! The background AOF rewrite (BGREWRITEAOF) through a real server: no
//! acknowledged write is lost across repeated rewrites under concurrent
//! writers (Redis's aof-race test), nor by a SIGKILL at any moment of a
//! rewrite; changes of every kind made while rewrites run replay to the
//! same keyspace; the rewritten file loads in hozon (native preamble) and
//! in Redis 7.0 (`aof-preamble none`); damage in the preamble refuses the
//! start; the exact replies and INFO fields of the BGREWRITEAOF/BGSAVE
//! interplay; the automatic trigger; BGREWRITEAOF with `appendonly no`,
//! CONFIG SET appendonly and SHUTDOWN during a rewrite.
//!
//! Commands that must run in one event-loop turn (a rewrite started by the
//! first still running for the others, however small the dataset) are
//! sent in one write: see [`pipeline`].

use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicI64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use hozon::rand::Rng;

use crate::crash::parse_int;
use crate::harness::{encode_command, show, start_hozon, start_redis, Conn, ServerProcess};
use crate::interop::{dump, run_workload};

/// The native snapshot magic a rewritten file with a native preamble
/// starts with.
const SNAPSHOT_MAGIC: &[u8] = b"\x89HZS\r\n\x1a\n";
/// The snapshot trailer's magic: the image ends right after it.
const TRAILER_MAGIC: &[u8] = b"HZSNPEND";
/// The line that starts the log part of a hozon AOF.
const LOG_HEADER: &[u8] = b"#hozon-aof 1\r\n";

const STARTED: &[u8] = b"+Background append only file rewriting started\r\n";
const SCHEDULED: &[u8] = b"+Background append only file rewriting scheduled\r\n";
const ALREADY: &[u8] = b"-ERR Background append only file rewriting already in progress\r\n";
const BGSAVE_REFUSED: &[u8] =
    b"-ERR Another child process is active (AOF?): can't BGSAVE right now. \
Use BGSAVE SCHEDULE in order to schedule a BGSAVE whenever possible.\r\n";

// ---------------------------------------------------------------------------
// Helpers

fn arg(dir: &Path) -> String {
    dir.to_string_lossy().into_owned()
}

fn bulk(value: &[u8]) -> Vec<u8> {
    let mut out = format!("${}\r\n", value.len()).into_bytes();
    out.extend_from_slice(value);
    out.extend_from_slice(b"\r\n");
    out
}

/// INFO persistence as text.
fn info(conn: &mut Conn) -> String {
    String::from_utf8_lossy(&conn.call(&[b"INFO", b"persistence"])).into_owned()
}

/// The value of `name` in INFO text.
fn field<'a>(info: &'a str, name: &str) -> &'a str {
    info.lines()
        .find_map(|line| line.strip_prefix(name)?.strip_prefix(':'))
        .unwrap_or_else(|| panic!("INFO has no field {name}:\n{info}"))
        .trim()
}

fn field_int(info: &str, name: &str) -> i64 {
    field(info, name)
        .parse()
        .unwrap_or_else(|_| panic!("INFO field {name} is not an integer:\n{info}"))
}

/// Polls INFO persistence until `done` holds (or panics after `timeout`
/// naming `what`); returns the INFO text that satisfied it.
fn wait_info(
    conn: &mut Conn,
    what: &str,
    timeout: Duration,
    done: impl Fn(&str) -> bool,
) -> String {
    let deadline = Instant::now() + timeout;
    loop {
        let text = info(conn);
        if done(&text) {
            return text;
        }
        assert!(
            Instant::now() < deadline,
            "timed out waiting for {what}:\n{text}"
        );
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// Waits until no rewrite runs or waits to run; returns INFO persistence.
fn wait_rewrite_done(conn: &mut Conn) -> String {
    wait_info(
        conn,
        "the AOF rewrite to end",
        Duration::from_secs(30),
        |i| field(i, "aof_rewrite_in_progress") == "0" && field(i, "aof_rewrite_scheduled") == "0",
    )
}

/// Sends every command in one write and reads one reply per command: the
/// server executes them in one event-loop turn, with no background slice
/// in between (so a rewrite started by the first is still running for the
/// others, however small the dataset).
fn pipeline(conn: &mut Conn, commands: &[&[&[u8]]]) -> Vec<Vec<u8>> {
    let bytes: Vec<u8> = commands.iter().flat_map(|c| encode_command(c)).collect();
    conn.send_raw(&bytes);
    commands.iter().map(|_| conn.read_reply()).collect()
}

/// `key:<i>` → `value:<i>:<padding>` for i in 0..n, pipelined as MSETs.
fn preload(conn: &mut Conn, n: usize, value_len: usize) {
    const PER_MSET: usize = 200;
    const MSETS_PER_WRITE: usize = 20;
    let mut i = 0;
    while i < n {
        let mut bytes = Vec::new();
        let mut replies = 0;
        while replies < MSETS_PER_WRITE && i < n {
            let end = (i + PER_MSET).min(n);
            let pairs: Vec<(Vec<u8>, Vec<u8>)> =
                (i..end).map(|k| (key(k), value(k, value_len))).collect();
            let mut args: Vec<&[u8]> = vec![b"MSET"];
            for (k, v) in &pairs {
                args.push(k);
                args.push(v);
            }
            bytes.extend(encode_command(&args));
            replies += 1;
            i = end;
        }
        conn.send_raw(&bytes);
        for _ in 0..replies {
            let reply = conn.read_reply();
            assert_eq!(reply, b"+OK\r\n", "MSET: {}", show(&reply));
        }
    }
}

fn key(i: usize) -> Vec<u8> {
    format!("key:{i}").into_bytes()
}

fn value(i: usize, len: usize) -> Vec<u8> {
    let mut v = format!("value:{i}:").into_bytes();
    v.resize(v.len().max(len), b'x');
    v
}

/// Checks that every preloaded key holds its value (MGET in chunks).
fn check_preloaded(conn: &mut Conn, n: usize, value_len: usize, context: &str) {
    const CHUNK: usize = 1000;
    for start in (0..n).step_by(CHUNK) {
        let end = (start + CHUNK).min(n);
        let keys: Vec<Vec<u8>> = (start..end).map(key).collect();
        let mut args: Vec<&[u8]> = vec![b"MGET"];
        args.extend(keys.iter().map(Vec::as_slice));
        let reply = conn.call(&args);
        let mut want = format!("*{}\r\n", end - start).into_bytes();
        for k in start..end {
            want.extend(bulk(&value(k, value_len)));
        }
        assert!(
            reply == want,
            "{context}: preloaded keys {start}..{end} differ"
        );
    }
}

/// Collections far above the compact-encoding limits and Redis's 64 items
/// per rewritten command, a large string and a big TTL'd set, in db 2.
fn write_big_values(conn: &mut Conn) {
    let call = |conn: &mut Conn, args: Vec<Vec<u8>>| {
        let refs: Vec<&[u8]> = args.iter().map(Vec::as_slice).collect();
        let reply = conn.call(&refs);
        assert!(!reply.starts_with(b"-"), "{}", show(&reply));
    };
    let words = |cmd: &str, key: &str, items: Vec<String>| -> Vec<Vec<u8>> {
        [cmd.to_string(), key.to_string()]
            .into_iter()
            .chain(items)
            .map(String::into_bytes)
            .collect()
    };
    call(conn, words("SELECT", "2", vec![]));
    call(
        conn,
        words(
            "RPUSH",
            "biglist",
            (0..1000).map(|i| format!("element-{i}")).collect(),
        ),
    );
    call(
        conn,
        words(
            "HSET",
            "bighash",
            (0..500)
                .flat_map(|i| [format!("field-{i}"), format!("v{i}")])
                .collect(),
        ),
    );
    call(
        conn,
        words(
            "SADD",
            "bigset",
            (0..700).map(|i| format!("member-{i}")).collect(),
        ),
    );
    call(
        conn,
        words(
            "SADD",
            "bigints",
            (0..600).map(|i| (i * 7 - 1000).to_string()).collect(),
        ),
    );
    let scores = ["-inf", "+inf", "1.5e300", "-0.125", "3", "0"];
    call(
        conn,
        words(
            "ZADD",
            "bigzset",
            (0..300)
                .flat_map(|i| {
                    let score = scores
                        .get(i)
                        .map_or_else(|| format!("{}.25", i as i64 - 150), |s| s.to_string());
                    [score, format!("m{i}")]
                })
                .collect(),
        ),
    );
    call(
        conn,
        vec![b"SET".to_vec(), b"bigstring".to_vec(), vec![b's'; 300_000]],
    );
    call(conn, words("PEXPIRE", "bigset", vec!["900000".into()]));
    call(conn, words("SELECT", "0", vec![]));
}

/// Names of the `temp-*` files in `dir`.
fn temp_files(dir: &Path) -> Vec<String> {
    std::fs::read_dir(dir)
        .expect("read the data directory")
        .filter_map(|e| e.ok())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|name| name.starts_with("temp-"))
        .collect()
}

fn aof_bytes(dir: &Path) -> Vec<u8> {
    std::fs::read(dir.join("appendonly.aof")).expect("read appendonly.aof")
}

fn aof_len(dir: &Path) -> u64 {
    std::fs::metadata(dir.join("appendonly.aof"))
        .expect("stat appendonly.aof")
        .len()
}

fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    haystack.windows(needle.len()).position(|w| w == needle)
}

/// Where the log part starts in a file with a native preamble: right after
/// the snapshot trailer, whose last 8 bytes are its magic.
fn preamble_end(file: &[u8]) -> usize {
    assert!(
        file.starts_with(SNAPSHOT_MAGIC),
        "the file does not start with the snapshot magic: {}",
        show(&file[..file.len().min(16)])
    );
    find(file, TRAILER_MAGIC).expect("a snapshot trailer in the preamble") + TRAILER_MAGIC.len()
}

/// SIGKILL: the server gets no chance to flush anything.
fn kill9(server: &ServerProcess) {
    let pid = server.pid();
    let status = Command::new("kill")
        .args(["-9", &pid.to_string()])
        .status()
        .expect("run kill");
    assert!(status.success(), "kill -9 {pid} failed");
}

fn bgrewriteaof(conn: &mut Conn) {
    let reply = conn.call(&[b"BGREWRITEAOF"]);
    assert_eq!(reply, STARTED, "BGREWRITEAOF: {}", show(&reply));
}

// ---------------------------------------------------------------------------
// 1. Concurrent writers across repeated rewrites (Redis's aof-race test)

const RACE_CLIENTS: usize = 6;
const RACE_REWRITES: i64 = 10;
const RACE_PRELOAD: usize = 50_000;
const RACE_DBS: usize = 3;

/// What one writer had acknowledged when it stopped.
struct WriterTally {
    incrs: i64,
    last_seq: i64,
}

/// The database writer `id` writes in: several, so the diff copied after
/// the capture instant must carry its own SELECTs.
fn race_db(id: usize) -> usize {
    id % RACE_DBS
}

/// Writer `id`: in its database, INCR counter, then SET `c<id>:<seq>`
/// `<seq>`, until told to stop; counts only what was acknowledged.
fn race_writer(port: u16, id: usize, stop: Arc<AtomicBool>) -> WriterTally {
    let mut conn = Conn::connect(port);
    let db = race_db(id).to_string();
    assert_eq!(conn.call(&[b"SELECT", db.as_bytes()]), b"+OK\r\n");
    let mut tally = WriterTally {
        incrs: 0,
        last_seq: 0,
    };
    while !stop.load(Ordering::SeqCst) {
        let reply = conn.call(&[b"INCR", b"counter"]);
        assert!(reply.starts_with(b":"), "INCR: {}", show(&reply));
        tally.incrs += 1;
        let seq = (tally.last_seq + 1).to_string();
        let name = format!("c{id}:{seq}");
        let reply = conn.call(&[b"SET", name.as_bytes(), seq.as_bytes()]);
        assert_eq!(reply, b"+OK\r\n", "SET: {}", show(&reply));
        tally.last_seq += 1;
    }
    tally
}

fn no_write_lost_across_repeated_rewrites(preamble: &str) {
    let dir = tempfile::tempdir().unwrap();
    let d = arg(dir.path());
    let args = [
        "--appendonly",
        "yes",
        "--appendfsync",
        "everysec",
        "--aof-preamble",
        preamble,
        "--dir",
        &d,
    ];
    let server = start_hozon(&args);
    let mut conn = Conn::connect(server.port);
    // Some data, so each rewrite takes a while with the writers going on.
    preload(&mut conn, RACE_PRELOAD, 32);
    let stop = Arc::new(AtomicBool::new(false));
    let writers: Vec<_> = (0..RACE_CLIENTS)
        .map(|id| {
            let stop = Arc::clone(&stop);
            let port = server.port;
            std::thread::spawn(move || race_writer(port, id, stop))
        })
        .collect();
    let mut rng = Rng::with_seed(5);
    for round in 1..=RACE_REWRITES {
        std::thread::sleep(Duration::from_millis(rng.below(40)));
        bgrewriteaof(&mut conn);
        let text = wait_rewrite_done(&mut conn);
        assert_eq!(field_int(&text, "aof_rewrites"), round, "{text}");
        assert_eq!(field(&text, "aof_last_bgrewrite_status"), "ok", "{text}");
        assert_eq!(field_int(&text, "aof_rewrites_consecutive_failures"), 0);
    }
    // Some writes after the last rewrite, appended to the new file.
    std::thread::sleep(Duration::from_millis(30));
    stop.store(true, Ordering::SeqCst);
    let tallies: Vec<WriterTally> = writers
        .into_iter()
        .map(|w| w.join().expect("writer thread"))
        .collect();
    let total_incrs: i64 = tallies.iter().map(|t| t.incrs).sum();
    eprintln!("{preamble}: {total_incrs} acknowledged INCRs across {RACE_REWRITES} rewrites");
    assert!(
        tallies.iter().all(|t| t.last_seq > 0),
        "a writer got nothing done"
    );
    let file = aof_bytes(dir.path());
    match preamble {
        "native" => {
            let end = preamble_end(&file);
            assert!(
                file[end..].starts_with(LOG_HEADER),
                "no log header after the image"
            );
        }
        _ => assert!(file.starts_with(LOG_HEADER), "not a rewritten file"),
    }
    kill9(&server);
    drop(server);

    let restarted = start_hozon(&args);
    let mut conn = Conn::connect(restarted.port);
    check_preloaded(&mut conn, RACE_PRELOAD, 32, "after the restart");
    for db in 0..RACE_DBS {
        conn.call(&[b"SELECT", db.to_string().as_bytes()]);
        let writers: Vec<(usize, &WriterTally)> = tallies
            .iter()
            .enumerate()
            .filter(|(id, _)| race_db(*id) == db)
            .collect();
        let incrs: i64 = writers.iter().map(|(_, t)| t.incrs).sum();
        assert_eq!(
            parse_int(&conn.call(&[b"GET", b"counter"])),
            incrs,
            "db {db}: the counter is not the number of acknowledged INCRs"
        );
        let mut keys = 1 + writers.iter().map(|(_, t)| t.last_seq).sum::<i64>();
        if db == 0 {
            keys += RACE_PRELOAD as i64;
        }
        assert_eq!(
            parse_int(&conn.call(&[b"DBSIZE"])),
            keys,
            "db {db}: unexpected keys"
        );
        for (id, tally) in writers {
            let names: Vec<String> = (1..=tally.last_seq).map(|s| format!("c{id}:{s}")).collect();
            for (chunk_index, chunk) in names.chunks(1000).enumerate() {
                let mut args: Vec<&[u8]> = vec![b"MGET"];
                args.extend(chunk.iter().map(|n| n.as_bytes()));
                let reply = conn.call(&args);
                let mut want = format!("*{}\r\n", chunk.len()).into_bytes();
                for s in 0..chunk.len() {
                    want.extend(bulk((chunk_index * 1000 + s + 1).to_string().as_bytes()));
                }
                assert!(
                    reply == want,
                    "writer {id}: an acknowledged key is missing or wrong"
                );
            }
            let next = format!("c{id}:{}", tally.last_seq + 1);
            assert_eq!(
                conn.call(&[b"GET", next.as_bytes()]),
                b"$-1\r\n",
                "writer {id}: a key that was never sent exists"
            );
        }
    }
}

#[test]
fn no_acknowledged_write_lost_across_repeated_rewrites_native_preamble() {
    no_write_lost_across_repeated_rewrites("native");
}

#[test]
fn no_acknowledged_write_lost_across_repeated_rewrites_no_preamble() {
    no_write_lost_across_repeated_rewrites("none");
}

// ---------------------------------------------------------------------------
// Every kind of change while rewrites run

const MIX_DBS: u64 = 3;
const MIX_KEYS: u64 = 60;
const MIX_FILLER: usize = 8_000;
const MIX_REWRITES: i64 = 8;

/// A random change to a small key space of every type in db 0..MIX_DBS:
/// overwrites, deletes, renames, moves, copies, absolute expiries (far
/// future, or past: a delete), element changes in collections, and rarely
/// SWAPDB or FLUSHDB. Returns the database it must run in and the command.
fn random_change(rng: &mut Rng) -> (u64, Vec<Vec<u8>>) {
    let db = rng.below(MIX_DBS);
    let n = |rng: &mut Rng| rng.below(MIX_KEYS).to_string();
    let v = |rng: &mut Rng| format!("v{}", rng.below(1_000_000));
    let words: Vec<String> = match rng.below(24) {
        0 | 1 => vec!["SET".into(), format!("s:{}", n(rng)), v(rng)],
        2 => vec![
            "DEL".into(),
            format!("s:{}", n(rng)),
            format!("l:{}", n(rng)),
        ],
        3 => vec!["APPEND".into(), format!("s:{}", n(rng)), "+".into()],
        4 => vec!["INCR".into(), format!("n:{}", n(rng))],
        5 => vec![
            "PEXPIREAT".into(),
            format!("s:{}", n(rng)),
            "4102444800000".into(),
        ],
        6 => vec!["PEXPIREAT".into(), format!("h:{}", n(rng)), "1000".into()],
        7 => vec!["PERSIST".into(), format!("s:{}", n(rng))],
        8 => vec![
            "RENAME".into(),
            format!("s:{}", n(rng)),
            format!("s:{}", n(rng)),
        ],
        9 | 10 => vec!["LPUSH".into(), format!("l:{}", n(rng)), v(rng), v(rng)],
        11 => vec!["RPOP".into(), format!("l:{}", n(rng))],
        12 | 13 => vec![
            "HSET".into(),
            format!("h:{}", n(rng)),
            format!("f{}", rng.below(200)),
            v(rng),
        ],
        14 => vec![
            "HDEL".into(),
            format!("h:{}", n(rng)),
            format!("f{}", rng.below(200)),
        ],
        15 => vec![
            "SADD".into(),
            format!("set:{}", n(rng)),
            format!("m{}", rng.below(300)),
        ],
        16 => vec![
            "SREM".into(),
            format!("set:{}", n(rng)),
            format!("m{}", rng.below(300)),
        ],
        17 => vec![
            "ZADD".into(),
            format!("z:{}", n(rng)),
            format!("{}.5", rng.below(1000) as i64 - 500),
            format!("m{}", rng.below(300)),
        ],
        18 => vec![
            "ZREM".into(),
            format!("z:{}", n(rng)),
            format!("m{}", rng.below(300)),
        ],
        19 => vec![
            "MOVE".into(),
            format!("s:{}", n(rng)),
            rng.below(MIX_DBS).to_string(),
        ],
        20 => vec![
            "COPY".into(),
            format!("l:{}", n(rng)),
            format!("l:{}", n(rng)),
            "REPLACE".into(),
        ],
        21 => vec![
            "HINCRBYFLOAT".into(),
            format!("h:{}", n(rng)),
            "fl".into(),
            "0.5".into(),
        ],
        22 if rng.below(50) == 0 => vec!["SWAPDB".into(), "1".into(), "2".into()],
        23 if rng.below(200) == 0 => vec!["FLUSHDB".into()],
        _ => vec!["SET".into(), format!("s:{}", n(rng)), v(rng)],
    };
    (db, words.into_iter().map(String::into_bytes).collect())
}

/// Collections of every type in every database, some large.
fn populate_mixed(conn: &mut Conn) {
    let mut rng = Rng::with_seed(3);
    for db in 0..MIX_DBS {
        let mut bytes = encode_command(&[b"SELECT", db.to_string().as_bytes()]);
        let mut replies = 1;
        for i in 0..MIX_KEYS {
            let size = if i % 10 == 0 { 1000 } else { 20 };
            let mut lpush: Vec<Vec<u8>> = vec![b"RPUSH".to_vec(), format!("l:{i}").into_bytes()];
            let mut hset: Vec<Vec<u8>> = vec![b"HSET".to_vec(), format!("h:{i}").into_bytes()];
            let mut sadd: Vec<Vec<u8>> = vec![b"SADD".to_vec(), format!("set:{i}").into_bytes()];
            let mut zadd: Vec<Vec<u8>> = vec![b"ZADD".to_vec(), format!("z:{i}").into_bytes()];
            for k in 0..size {
                lpush.push(format!("e{k}").into_bytes());
                hset.extend([
                    format!("f{k}").into_bytes(),
                    format!("{}", rng.below(1000)).into_bytes(),
                ]);
                sadd.push(format!("m{k}").into_bytes());
                zadd.extend([
                    format!("{}", rng.below(1000)).into_bytes(),
                    format!("m{k}").into_bytes(),
                ]);
            }
            for command in [
                vec![
                    b"SET".to_vec(),
                    format!("s:{i}").into_bytes(),
                    format!("{i}").into_bytes(),
                ],
                lpush,
                hset,
                sadd,
                zadd,
            ] {
                let refs: Vec<&[u8]> = command.iter().map(Vec::as_slice).collect();
                bytes.extend(encode_command(&refs));
                replies += 1;
            }
        }
        bytes.extend(encode_command(&[b"PEXPIREAT", b"l:1", b"4102444800000"]));
        replies += 1;
        conn.send_raw(&bytes);
        for _ in 0..replies {
            let reply = conn.read_reply();
            assert!(!reply.starts_with(b"-"), "populate: {}", show(&reply));
        }
    }
    conn.call(&[b"SELECT", b"0"]);
}

/// A client sending batches of random changes until `stop`.
fn change_stream(port: u16, seed: u64, stop: Arc<AtomicBool>) -> std::thread::JoinHandle<u64> {
    std::thread::spawn(move || {
        let mut conn = Conn::connect(port);
        let mut rng = Rng::with_seed(seed);
        let mut sent = 0;
        while !stop.load(Ordering::SeqCst) {
            let mut bytes = Vec::new();
            for _ in 0..20 {
                let (db, command) = random_change(&mut rng);
                let refs: Vec<&[u8]> = command.iter().map(Vec::as_slice).collect();
                bytes.extend(encode_command(&[b"SELECT", db.to_string().as_bytes()]));
                bytes.extend(encode_command(&refs));
            }
            conn.send_raw(&bytes);
            for _ in 0..40 {
                let reply = conn.read_reply();
                // RENAME of a missing key, MOVE to its own database, a
                // type clash: fine here; a refused write (MISCONF) is not.
                assert!(
                    !reply.starts_with(b"-")
                        || reply.starts_with(b"-ERR ")
                        || reply.starts_with(b"-WRONGTYPE"),
                    "{}",
                    show(&reply)
                );
            }
            sent += 20;
        }
        sent
    })
}

fn changes_during_rewrites_replay_to_the_same_keyspace(preamble: &str) {
    let dir = tempfile::tempdir().unwrap();
    let d = arg(dir.path());
    let args = [
        "--appendonly",
        "yes",
        "--aof-preamble",
        preamble,
        "--dir",
        &d,
    ];
    let server = start_hozon(&args);
    let mut conn = Conn::connect(server.port);
    populate_mixed(&mut conn);
    // Filler, so each capture takes a while with the changes going on.
    for db in [b"0", b"1"] {
        conn.call(&[b"SELECT", db]);
        preload(&mut conn, MIX_FILLER, 8);
    }
    conn.call(&[b"SELECT", b"0"]);
    let stop = Arc::new(AtomicBool::new(false));
    let streams: Vec<_> = (0..2)
        .map(|seed| change_stream(server.port, seed + 100, Arc::clone(&stop)))
        .collect();
    for round in 1..=MIX_REWRITES {
        std::thread::sleep(Duration::from_millis(10));
        bgrewriteaof(&mut conn);
        let text = wait_rewrite_done(&mut conn);
        assert_eq!(field_int(&text, "aof_rewrites"), round, "{text}");
        assert_eq!(field(&text, "aof_last_bgrewrite_status"), "ok", "{text}");
    }
    stop.store(true, Ordering::SeqCst);
    let sent: u64 = streams
        .into_iter()
        .map(|t| t.join().expect("change stream"))
        .sum();
    eprintln!("{preamble}: {sent} random changes across {MIX_REWRITES} rewrites");
    let before = dump(server.port);
    kill9(&server);
    drop(server);
    let restarted = start_hozon(&args);
    let after = dump(restarted.port);
    if after != before {
        let differing: Vec<_> = before
            .keys()
            .chain(after.keys())
            .filter(|k| before.get(*k) != after.get(*k))
            .take(5)
            .map(|k| (k, before.get(k), after.get(k)))
            .collect();
        panic!("the rewritten AOF replays to a different keyspace; first differences (key, before, after): {differing:#?}");
    }
}

#[test]
fn changes_of_every_kind_during_rewrites_replay_to_the_same_keyspace_native_preamble() {
    changes_during_rewrites_replay_to_the_same_keyspace("native");
}

#[test]
fn changes_of_every_kind_during_rewrites_replay_to_the_same_keyspace_no_preamble() {
    changes_during_rewrites_replay_to_the_same_keyspace("none");
}

// ---------------------------------------------------------------------------
// 2. SIGKILL at random moments of a rewrite, appendfsync always

const KILL_PRELOAD: usize = 200_000;
const KILL_ROUNDS: usize = 8;

/// Where a round's kill fell, from what it left in the directory.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum KillPhase {
    /// No temporary file: before the rewrite created it, or after the
    /// switch renamed it.
    NoTempFile,
    /// A temporary file whose image is not complete.
    Image,
    /// The whole image (trailer included) but no log header yet: the
    /// image's fsync.
    ImageWritten,
    /// The image and the log header: catching up, or switching.
    CatchUp,
}

fn kill_phase(dir: &Path) -> KillPhase {
    let Some(name) = temp_files(dir)
        .into_iter()
        .find(|n| n.starts_with("temp-rewrite-"))
    else {
        return KillPhase::NoTempFile;
    };
    let bytes = std::fs::read(dir.join(name)).unwrap_or_default();
    match find(&bytes, TRAILER_MAGIC) {
        None => KillPhase::Image,
        Some(at) if bytes[at + TRAILER_MAGIC.len()..].starts_with(LOG_HEADER) => KillPhase::CatchUp,
        Some(_) => KillPhase::ImageWritten,
    }
}

/// True when the `temp-rewrite-*` file in `dir` holds a whole image of at
/// least `image_len` bytes (its trailer is written).
fn temp_image_written(dir: &Path, image_len: u64) -> bool {
    use std::io::{Read, Seek, SeekFrom};
    let Some(name) = temp_files(dir)
        .into_iter()
        .find(|n| n.starts_with("temp-rewrite-"))
    else {
        return false;
    };
    let Ok(mut file) = std::fs::File::open(dir.join(name)) else {
        return false;
    };
    // The image of a later round is at least as long as the first one (the
    // list only grows): look for the trailer beyond that.
    let from = image_len.saturating_sub(64 << 10);
    let mut tail = Vec::new();
    if file.seek(SeekFrom::Start(from)).is_err() || file.read_to_end(&mut tail).is_err() {
        return false;
    }
    from + tail.len() as u64 >= image_len && find(&tail, TRAILER_MAGIC).is_some()
}

/// After a restart: the list is `1..=len` with acked ≤ len ≤ acked + 1,
/// every preloaded key is there and no temporary file is left.
fn check_after_kill(dir: &Path, conn: &mut Conn, acked: i64, round: usize) -> i64 {
    let len = parse_int(&conn.call(&[b"LLEN", b"list"]));
    assert!(
        len >= acked && len <= acked + 1,
        "round {round}: the list has {len} elements, {acked} were acknowledged"
    );
    let all = conn.call(&[b"LRANGE", b"list", b"0", b"-1"]);
    let mut want = format!("*{len}\r\n").into_bytes();
    for i in 1..=len {
        want.extend(bulk(i.to_string().as_bytes()));
    }
    assert!(
        all == want,
        "round {round}: the list is not the prefix 1..={len}"
    );
    let expected_keys = KILL_PRELOAD as i64 + i64::from(len > 0);
    assert_eq!(
        parse_int(&conn.call(&[b"DBSIZE"])),
        expected_keys,
        "round {round}: DBSIZE"
    );
    // Every preloaded key with its value: MGET them all in chunks.
    check_preloaded(conn, KILL_PRELOAD, 16, &format!("round {round}"));
    let left = temp_files(dir);
    assert!(
        left.is_empty(),
        "round {round}: temp files survived the restart: {left:?}"
    );
    len
}

/// How a round chooses its kill moment.
#[derive(Debug, Clone, Copy)]
enum KillAt {
    /// A random delay after BGREWRITEAOF, up to about one rewrite's length.
    RandomDelay,
    /// Just after the image's trailer is written: its fsync, the catch-up
    /// or the switch.
    AfterImage,
    /// As soon as INFO shows the rewrite done (the new file in use).
    AfterSwitch,
}

/// A client that RPUSHes 1, 2, 3, … to `list`, publishing in `acked` the
/// length each acknowledged push returned, until `stop` or the server dies.
fn list_writer(
    port: u16,
    acked: Arc<AtomicI64>,
    stop: Arc<AtomicBool>,
) -> std::thread::JoinHandle<Result<(), String>> {
    std::thread::spawn(move || {
        let mut conn = Conn::connect(port);
        while !stop.load(Ordering::SeqCst) {
            let next = acked.load(Ordering::SeqCst) + 1;
            let request = encode_command(&[b"RPUSH", b"list", next.to_string().as_bytes()]);
            let reply = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                conn.send_raw(&request);
                conn.read_reply()
            }));
            match reply {
                Ok(r) if r == format!(":{next}\r\n").as_bytes() => {
                    acked.store(next, Ordering::SeqCst)
                }
                Ok(r) => return Err(format!("RPUSH {next}: {}", show(&r))),
                Err(_) => return Ok(()), // killed mid-request
            }
        }
        Ok(())
    })
}

#[test]
fn sigkill_at_random_moments_of_a_rewrite_loses_no_acknowledged_write() {
    let dir = tempfile::tempdir().unwrap();
    let d = arg(dir.path());
    let args = [
        "--appendonly",
        "yes",
        "--appendfsync",
        "always",
        "--dir",
        &d,
    ];
    let server = start_hozon(&args);
    let mut conn = Conn::connect(server.port);
    preload(&mut conn, KILL_PRELOAD, 16);
    // How long a rewrite takes here and how big its image is, to aim the
    // kills.
    let started = Instant::now();
    bgrewriteaof(&mut conn);
    wait_rewrite_done(&mut conn);
    let rewrite_ms = started.elapsed().as_millis() as u64;
    let image_len = preamble_end(&aof_bytes(dir.path())) as u64;
    eprintln!("a rewrite of {KILL_PRELOAD} keys took {rewrite_ms} ms; image {image_len} bytes");
    drop(server);

    let mut rng = Rng::with_seed(11);
    let acked = Arc::new(AtomicI64::new(0));
    let mut phases = Vec::new();
    for round in 0..KILL_ROUNDS {
        let server = start_hozon(&args);
        let mut conn = Conn::connect(server.port);
        let len = check_after_kill(dir.path(), &mut conn, acked.load(Ordering::SeqCst), round);
        acked.store(len, Ordering::SeqCst);
        let stop = Arc::new(AtomicBool::new(false));
        let writer = list_writer(server.port, Arc::clone(&acked), Arc::clone(&stop));
        std::thread::sleep(Duration::from_millis(5 + rng.below(20)));
        let how = [KillAt::RandomDelay, KillAt::AfterImage, KillAt::AfterSwitch][round % 3];
        bgrewriteaof(&mut conn);
        let started = Instant::now();
        match how {
            KillAt::RandomDelay => {
                // The writer slows the rewrite down: spread over 1.5 times
                // the unloaded length.
                std::thread::sleep(Duration::from_millis(rng.below(rewrite_ms * 3 / 2 + 1)));
            }
            KillAt::AfterImage => {
                // Until the image's trailer is written (or the switch
                // already took the temporary name away).
                let deadline = Instant::now() + Duration::from_secs(30);
                while !temp_image_written(dir.path(), image_len)
                    && field(&info(&mut conn), "aof_rewrite_in_progress") == "1"
                {
                    assert!(
                        Instant::now() < deadline,
                        "round {round}: the image never got written"
                    );
                    std::thread::sleep(Duration::from_micros(200));
                }
                std::thread::sleep(Duration::from_micros(rng.below(3000)));
            }
            KillAt::AfterSwitch => {
                let text = wait_info(
                    &mut conn,
                    "the rewrite's switch",
                    Duration::from_secs(30),
                    |i| field(i, "aof_rewrite_in_progress") == "0",
                );
                assert_eq!(field(&text, "aof_last_bgrewrite_status"), "ok", "{text}");
                // Some writes appended to the new file before the kill.
                std::thread::sleep(Duration::from_millis(rng.below(20)));
            }
        }
        let elapsed_ms = started.elapsed().as_millis();
        kill9(&server);
        stop.store(true, Ordering::SeqCst);
        let outcome = writer.join().expect("writer thread");
        assert!(outcome.is_ok(), "round {round}: {outcome:?}");
        drop(server);
        let phase = kill_phase(dir.path());
        eprintln!("round {round}: {how:?}, killed {elapsed_ms} ms after BGREWRITEAOF: {phase:?}");
        phases.push(phase);
    }
    let server = start_hozon(&args);
    let mut conn = Conn::connect(server.port);
    check_after_kill(
        dir.path(),
        &mut conn,
        acked.load(Ordering::SeqCst),
        KILL_ROUNDS,
    );
    assert!(
        phases.contains(&KillPhase::Image),
        "no kill fell while the image was being written: {phases:?}"
    );
}

// ---------------------------------------------------------------------------
// 3. aof-preamble none: Redis 7.0 loads the rewritten file

#[test]
fn rewritten_aof_without_preamble_loads_in_redis_with_identical_keyspace() {
    let dir = tempfile::tempdir().unwrap();
    let d = arg(dir.path());
    let hozon = start_hozon(&[
        "--appendonly",
        "yes",
        "--appendfsync",
        "always",
        "--aof-preamble",
        "none",
        "--dir",
        &d,
    ]);
    run_workload(hozon.port);
    let mut conn = Conn::connect(hozon.port);
    write_big_values(&mut conn);
    assert!(find(&aof_bytes(dir.path()), b"gone").is_some());
    // A client that wrote in db 3 before the rewrite and goes on after it:
    // the diff must start with its own SELECT.
    let mut other = Conn::connect(hozon.port);
    assert_eq!(other.call(&[b"SELECT", b"3"]), b"+OK\r\n");
    assert_eq!(other.call(&[b"SET", b"before", b"db3"]), b"+OK\r\n");
    // Writes in the same turn as BGREWRITEAOF come after the capture
    // instant: they reach the new file as the copied diff.
    let replies = pipeline(
        &mut conn,
        &[
            &[b"BGREWRITEAOF"],
            &[b"SET", b"during", b"rewrite"],
            &[b"HSET", b"h", b"f9", b"during"],
            &[b"SELECT", b"7"],
            &[b"RPUSH", b"l7", b"x", b"y"],
        ],
    );
    assert_eq!(replies[0], STARTED);
    assert_eq!(other.call(&[b"SET", b"during", b"db3"]), b"+OK\r\n");
    let text = wait_rewrite_done(&mut conn);
    assert_eq!(field(&text, "aof_last_bgrewrite_status"), "ok");
    assert_eq!(conn.call(&[b"SET", b"after", b"rewrite"]), b"+OK\r\n");
    let before = dump(hozon.port);
    drop(hozon);
    let file = aof_bytes(dir.path());
    assert!(
        file.starts_with(LOG_HEADER),
        "not a rewritten file: {}",
        show(&file[..32.min(file.len())])
    );
    assert!(
        find(&file, b"gone").is_none(),
        "the rewritten file still has the history of a deleted key"
    );

    let redis_dir = tempfile::tempdir().unwrap();
    std::fs::write(redis_dir.path().join("appendonly.aof"), &file).unwrap();
    let rd = arg(redis_dir.path());
    let redis = start_redis(&[
        "--appendonly",
        "yes",
        "--appendfilename",
        "appendonly.aof",
        "--dir",
        &rd,
    ]);
    assert_eq!(
        dump(redis.port),
        before,
        "Redis loaded the rewritten AOF into a different keyspace"
    );
    let again = start_hozon(&["--appendonly", "yes", "--dir", &d]);
    assert_eq!(dump(again.port), before, "hozon's own reload differs");
}

// ---------------------------------------------------------------------------
// 4. The native preamble

#[test]
fn rewritten_aof_with_native_preamble_reloads_the_same_keyspace_and_is_smaller() {
    let dir = tempfile::tempdir().unwrap();
    let d = arg(dir.path());
    let args = [
        "--appendonly",
        "yes",
        "--appendfsync",
        "everysec",
        "--dir",
        &d,
    ];
    let server = start_hozon(&args);
    run_workload(server.port);
    let mut conn = Conn::connect(server.port);
    write_big_values(&mut conn);
    // A list bigger than a snapshot block (1 MiB): split across blocks.
    let element = vec![b'e'; 200];
    for chunk in 0..20 {
        let mut args: Vec<Vec<u8>> = vec![b"RPUSH".to_vec(), b"hugelist".to_vec()];
        args.extend(
            (0..500).map(|i| [format!("{chunk}:{i}:").into_bytes(), element.clone()].concat()),
        );
        let refs: Vec<&[u8]> = args.iter().map(Vec::as_slice).collect();
        assert!(conn.call(&refs).starts_with(b":"));
    }
    let mut other = Conn::connect(server.port);
    assert_eq!(other.call(&[b"SELECT", b"3"]), b"+OK\r\n");
    assert_eq!(other.call(&[b"SET", b"before", b"db3"]), b"+OK\r\n");
    // Many overwrites of the same keys: the history is much bigger than
    // the keyspace.
    for round in 0..40 {
        let v = format!("round-{round}-{}", "y".repeat(100));
        let commands: Vec<Vec<u8>> = (0..500)
            .map(|k| encode_command(&[b"SET", format!("over:{k}").as_bytes(), v.as_bytes()]))
            .collect();
        conn.send_raw(&commands.concat());
        for _ in 0..500 {
            assert_eq!(conn.read_reply(), b"+OK\r\n");
        }
    }
    let size_before = aof_len(dir.path());
    bgrewriteaof(&mut conn);
    let text = wait_rewrite_done(&mut conn);
    assert_eq!(field(&text, "aof_last_bgrewrite_status"), "ok");
    let size_after = aof_len(dir.path());
    assert!(
        size_after * 10 < size_before,
        "the rewritten file has {size_after} bytes, the history had {size_before}"
    );
    assert_eq!(
        field_int(&text, "aof_base_size") as u64,
        size_after,
        "{text}"
    );
    // Writes after the switch are appended to the new file (the db-3
    // client's with their own SELECT).
    conn.call(&[b"SET", b"after", b"switch"]);
    conn.call(&[b"DEL", b"over:7"]);
    assert_eq!(other.call(&[b"SET", b"after", b"db3"]), b"+OK\r\n");
    let before = dump(server.port);
    drop(server);

    let file = aof_bytes(dir.path());
    let end = preamble_end(&file);
    assert!(
        file[end..].starts_with(LOG_HEADER),
        "no `#hozon-aof 1` line right after the image: {}",
        show(&file[end..file.len().min(end + 32)])
    );
    assert!(
        find(&file[end..], b"after").is_some(),
        "the write after the switch is not in the log part"
    );

    let restarted = start_hozon(&args);
    assert_eq!(
        dump(restarted.port),
        before,
        "the rewritten file loads differently"
    );
}

// ---------------------------------------------------------------------------
// 5. Damage in the preamble

#[test]
fn damage_in_the_preamble_refuses_the_start_and_leaves_the_file_alone() {
    let dir = tempfile::tempdir().unwrap();
    let d = arg(dir.path());
    let server = start_hozon(&[
        "--appendonly",
        "yes",
        "--appendfsync",
        "always",
        "--dir",
        &d,
    ]);
    let mut conn = Conn::connect(server.port);
    preload(&mut conn, 5_000, 64);
    bgrewriteaof(&mut conn);
    wait_rewrite_done(&mut conn);
    conn.call(&[b"SET", b"after", b"rewrite"]);
    drop(server);

    let path = dir.path().join("appendonly.aof");
    let mut bytes = std::fs::read(&path).unwrap();
    assert!(bytes.starts_with(SNAPSHOT_MAGIC));
    // Block 0 starts at header_len (u32 LE at offset 16); its 40-byte
    // header holds stored_len (u64 LE at 16); flip a payload byte.
    let header_len = u32::from_le_bytes(bytes[16..20].try_into().unwrap()) as usize;
    assert_eq!(
        &bytes[header_len..header_len + 4],
        b"HZBK",
        "block 0 is not after the header"
    );
    let stored_len =
        u64::from_le_bytes(bytes[header_len + 16..header_len + 24].try_into().unwrap()) as usize;
    assert!(stored_len > 0);
    let at = header_len + 40 + stored_len / 2;
    bytes[at] ^= 0x20;
    std::fs::write(&path, &bytes).unwrap();

    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
        .to_string();
    let mut child = Command::new(env!("CARGO_BIN_EXE_hozon-server"))
        .args(["--port", &port, "--bind", "127.0.0.1", "--save", ""])
        .args(["--appendonly", "yes", "--dir", &d])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn hozon-server");
    let deadline = Instant::now() + Duration::from_secs(10);
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!("hozon-server started on a file with a damaged preamble");
        }
        std::thread::sleep(Duration::from_millis(10));
    };
    let output = child.wait_with_output().unwrap();
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    assert!(!status.success(), "exit status {status}; output:\n{text}");
    assert!(
        text.contains(&path.display().to_string()),
        "the file is not named:\n{text}"
    );
    assert!(
        text.contains("hozon-repair"),
        "no hozon-repair hint:\n{text}"
    );
    assert!(
        std::fs::read(&path).unwrap() == bytes,
        "the damaged file was changed"
    );
}

// ---------------------------------------------------------------------------
// 6. Interplay with BGSAVE, and the exact replies

#[test]
fn bgrewriteaof_and_bgsave_interplay_replies_and_scheduling() {
    let dir = tempfile::tempdir().unwrap();
    let d = arg(dir.path());
    let server = start_hozon(&["--appendonly", "yes", "--dir", &d, "--save", ""]);
    let mut conn = Conn::connect(server.port);
    preload(&mut conn, 50_000, 32);

    // During a rewrite: a second BGREWRITEAOF, BGSAVE, BGSAVE SCHEDULE.
    let replies = pipeline(
        &mut conn,
        &[
            &[b"BGREWRITEAOF"],
            &[b"BGREWRITEAOF"],
            &[b"BGSAVE"],
            &[b"BGSAVE", b"SCHEDULE"],
            &[b"INFO", b"persistence"],
        ],
    );
    assert_eq!(replies[0], STARTED, "{}", show(&replies[0]));
    assert_eq!(replies[1], ALREADY, "{}", show(&replies[1]));
    assert_eq!(replies[2], BGSAVE_REFUSED, "{}", show(&replies[2]));
    assert_eq!(
        replies[3],
        b"+Background saving scheduled\r\n",
        "{}",
        show(&replies[3])
    );
    let text = String::from_utf8_lossy(&replies[4]).into_owned();
    assert_eq!(field(&text, "aof_rewrite_in_progress"), "1", "{text}");
    assert_eq!(field(&text, "rdb_bgsave_in_progress"), "0", "{text}");
    // The scheduled BGSAVE runs once the rewrite is done.
    let text = wait_info(
        &mut conn,
        "the scheduled BGSAVE",
        Duration::from_secs(30),
        |i| field(i, "rdb_saves") == "1" && field(i, "rdb_bgsave_in_progress") == "0",
    );
    assert_eq!(field(&text, "aof_rewrites"), "1", "{text}");
    assert_eq!(field(&text, "rdb_last_bgsave_status"), "ok", "{text}");
    assert!(
        dir.path().join("dump.hoz").exists(),
        "no dump.hoz after the scheduled BGSAVE"
    );

    // During a BGSAVE: BGREWRITEAOF is scheduled and runs after it.
    // A second BGREWRITEAOF while it waits is scheduled again (no error:
    // Redis refuses only while the rewrite itself runs).
    let replies = pipeline(
        &mut conn,
        &[
            &[b"BGSAVE"],
            &[b"BGREWRITEAOF"],
            &[b"BGREWRITEAOF"],
            &[b"INFO", b"persistence"],
        ],
    );
    assert_eq!(
        replies[0],
        b"+Background saving started\r\n",
        "{}",
        show(&replies[0])
    );
    assert_eq!(replies[1], SCHEDULED, "{}", show(&replies[1]));
    assert_eq!(replies[2], SCHEDULED, "{}", show(&replies[2]));
    let text = String::from_utf8_lossy(&replies[3]).into_owned();
    assert_eq!(field(&text, "aof_rewrite_scheduled"), "1", "{text}");
    assert_eq!(field(&text, "aof_rewrite_in_progress"), "0", "{text}");
    assert_eq!(field(&text, "rdb_bgsave_in_progress"), "1", "{text}");
    let text = wait_info(
        &mut conn,
        "the scheduled rewrite",
        Duration::from_secs(30),
        |i| field(i, "aof_rewrites") == "2",
    );
    assert_eq!(field(&text, "rdb_saves"), "2", "{text}");
    let text = wait_rewrite_done(&mut conn);
    assert_eq!(
        field(&text, "aof_rewrites"),
        "2",
        "a scheduled rewrite ran twice:\n{text}"
    );
    assert_eq!(field(&text, "aof_last_bgrewrite_status"), "ok", "{text}");

    // Inside MULTI/EXEC, BGREWRITEAOF is scheduled (Redis's in_exec rule).
    let replies = pipeline(
        &mut conn,
        &[
            &[b"MULTI"],
            &[b"BGREWRITEAOF"],
            &[b"EXEC"],
            &[b"INFO", b"persistence"],
        ],
    );
    assert_eq!(replies[1], b"+QUEUED\r\n");
    assert_eq!(
        replies[2],
        [b"*1\r\n".as_slice(), SCHEDULED].concat(),
        "{}",
        show(&replies[2])
    );
    let text = wait_rewrite_done(&mut conn);
    assert_eq!(field(&text, "aof_rewrites"), "3", "{text}");

    // The file is still whole: restart and compare.
    let before = parse_int(&conn.call(&[b"DBSIZE"]));
    drop(server);
    let restarted = start_hozon(&["--appendonly", "yes", "--dir", &d, "--save", ""]);
    let mut conn = Conn::connect(restarted.port);
    assert_eq!(parse_int(&conn.call(&[b"DBSIZE"])), before);
    check_preloaded(&mut conn, 50_000, 32, "after the restart");
}

// ---------------------------------------------------------------------------
// 7. The automatic rewrite

/// Overwrites `over:0..100` with 1000-byte values `rounds` times.
fn overwrite(conn: &mut Conn, rounds: usize, tag: usize) {
    for round in 0..rounds {
        let v = format!("{tag}-{round}-{}", "z".repeat(1000));
        let commands: Vec<Vec<u8>> = (0..100)
            .map(|k| encode_command(&[b"SET", format!("over:{k}").as_bytes(), v.as_bytes()]))
            .collect();
        conn.send_raw(&commands.concat());
        for _ in 0..100 {
            assert_eq!(conn.read_reply(), b"+OK\r\n");
        }
    }
}

#[test]
fn automatic_rewrite_on_growth_and_percentage_zero_disables_it() {
    let dir = tempfile::tempdir().unwrap();
    let d = arg(dir.path());
    let server = start_hozon(&["--appendonly", "yes", "--dir", &d]);
    let mut conn = Conn::connect(server.port);
    assert_eq!(
        conn.call(&[b"CONFIG", b"SET", b"auto-aof-rewrite-min-size", b"1mb"]),
        b"+OK\r\n"
    );
    assert_eq!(
        conn.call(&[b"CONFIG", b"SET", b"auto-aof-rewrite-percentage", b"100"]),
        b"+OK\r\n"
    );
    // 100 keys of 1 kB: the keyspace stays ~100 kB (a few kB compressed)
    // while the file grows ~100 kB per round.
    let mut peak = 0;
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        overwrite(&mut conn, 1, 0);
        peak = peak.max(aof_len(dir.path()));
        // Stop writing once it started, so the diff stays small.
        let text = info(&mut conn);
        if field(&text, "aof_rewrite_in_progress") == "1" || field_int(&text, "aof_rewrites") >= 1 {
            break;
        }
        assert!(
            peak < 8 << 20,
            "no automatic rewrite though the file reached {peak} bytes"
        );
        assert!(Instant::now() < deadline, "no automatic rewrite");
    }
    assert!(
        peak > 1 << 20,
        "a rewrite started below auto-aof-rewrite-min-size ({peak} bytes)"
    );
    let text = wait_rewrite_done(&mut conn);
    assert_eq!(field(&text, "aof_last_bgrewrite_status"), "ok", "{text}");
    assert!(field_int(&text, "aof_rewrites") >= 1, "{text}");
    let size = aof_len(dir.path());
    let base = field_int(&text, "aof_base_size") as u64;
    assert!(
        size < 1 << 20,
        "the file did not shrink: {size} bytes (peak {peak})"
    );
    assert!(
        base > 0 && base <= size,
        "aof_base_size {base}, file {size}"
    );
    assert_eq!(field_int(&text, "aof_current_size") as u64, size, "{text}");

    // Percentage 0: no automatic rewrite however large the file grows.
    assert_eq!(
        conn.call(&[b"CONFIG", b"SET", b"auto-aof-rewrite-percentage", b"0"]),
        b"+OK\r\n"
    );
    let rewrites = field_int(&text, "aof_rewrites");
    overwrite(&mut conn, 30, 1);
    std::thread::sleep(Duration::from_millis(300));
    let text = info(&mut conn);
    assert_eq!(field_int(&text, "aof_rewrites"), rewrites, "{text}");
    assert_eq!(field(&text, "aof_rewrite_in_progress"), "0", "{text}");
    let grown = aof_len(dir.path());
    assert!(grown > 3_000_000, "the file has only {grown} bytes");

    // Back to 100: the growth since the last rewrite triggers one at once.
    assert_eq!(
        conn.call(&[b"CONFIG", b"SET", b"auto-aof-rewrite-percentage", b"100"]),
        b"+OK\r\n"
    );
    let text = wait_info(
        &mut conn,
        "a rewrite after re-enabling",
        Duration::from_secs(10),
        |i| field_int(i, "aof_rewrites") > rewrites && field(i, "aof_rewrite_in_progress") == "0",
    );
    assert_eq!(field(&text, "aof_last_bgrewrite_status"), "ok", "{text}");
    assert!(
        aof_len(dir.path()) < grown / 4,
        "the file did not shrink after the second rewrite"
    );
}

// ---------------------------------------------------------------------------
// 8. BGREWRITEAOF with appendonly no at runtime

#[test]
fn bgrewriteaof_with_appendonly_off_writes_the_current_keyspace_to_the_aof() {
    let dir = tempfile::tempdir().unwrap();
    let d = arg(dir.path());
    let server = start_hozon(&["--appendonly", "yes", "--dir", &d]);
    let mut conn = Conn::connect(server.port);
    run_workload(server.port);
    assert_eq!(
        conn.call(&[b"CONFIG", b"SET", b"appendonly", b"no"]),
        b"+OK\r\n"
    );
    // Not logged (the AOF is off), but in the keyspace the rewrite writes.
    assert_eq!(conn.call(&[b"SET", b"while", b"off"]), b"+OK\r\n");
    assert_eq!(conn.call(&[b"DEL", b"s2"]), b":1\r\n");
    let old = aof_bytes(dir.path());
    assert!(
        find(&old, b"while").is_none(),
        "a write was logged with appendonly no"
    );
    bgrewriteaof(&mut conn);
    let text = wait_rewrite_done(&mut conn);
    assert_eq!(field(&text, "aof_last_bgrewrite_status"), "ok", "{text}");
    assert_eq!(field(&text, "aof_rewrites"), "1", "{text}");
    assert_eq!(field(&text, "aof_enabled"), "0", "{text}");
    let expected = dump(server.port);
    let rewritten = aof_bytes(dir.path());
    assert!(rewritten != old, "appendonly.aof was not rewritten");
    assert!(
        rewritten.starts_with(SNAPSHOT_MAGIC),
        "not a rewritten file"
    );
    // Still off: later writes are not appended.
    assert_eq!(conn.call(&[b"SET", b"later", b"not-logged"]), b"+OK\r\n");
    std::thread::sleep(Duration::from_millis(50));
    assert!(
        aof_bytes(dir.path()) == rewritten,
        "a write was logged after the rewrite"
    );
    drop(server);
    let restarted = start_hozon(&["--appendonly", "yes", "--dir", &d]);
    assert_eq!(
        dump(restarted.port),
        expected,
        "appendonly.aof is not the keyspace at BGREWRITEAOF time"
    );
}

#[test]
fn config_set_appendonly_no_stops_a_running_rewrite() {
    let dir = tempfile::tempdir().unwrap();
    let d = arg(dir.path());
    let server = start_hozon(&["--appendonly", "yes", "--dir", &d]);
    let mut conn = Conn::connect(server.port);
    preload(&mut conn, 20_000, 32);
    let old = aof_bytes(dir.path());
    let replies = pipeline(
        &mut conn,
        &[
            &[b"BGREWRITEAOF"],
            &[b"CONFIG", b"SET", b"appendonly", b"no"],
            &[b"INFO", b"persistence"],
        ],
    );
    assert_eq!(replies[0], STARTED, "{}", show(&replies[0]));
    assert_eq!(replies[1], b"+OK\r\n", "{}", show(&replies[1]));
    let text = String::from_utf8_lossy(&replies[2]).into_owned();
    assert_eq!(field(&text, "aof_rewrite_in_progress"), "0", "{text}");
    assert_eq!(field(&text, "aof_enabled"), "0", "{text}");
    // The aborted rewrite's thread removes its temporary file.
    let deadline = Instant::now() + Duration::from_secs(10);
    while !temp_files(dir.path()).is_empty() {
        assert!(
            Instant::now() < deadline,
            "the aborted rewrite left {:?}",
            temp_files(dir.path())
        );
        std::thread::sleep(Duration::from_millis(10));
    }
    assert!(
        aof_bytes(dir.path()) == old,
        "the aborted rewrite changed appendonly.aof"
    );
    drop(server);
    let restarted = start_hozon(&["--appendonly", "yes", "--dir", &d]);
    let mut conn = Conn::connect(restarted.port);
    check_preloaded(&mut conn, 20_000, 32, "after the aborted rewrite");
}

#[test]
fn shutdown_during_a_rewrite_keeps_every_write() {
    let dir = tempfile::tempdir().unwrap();
    let d = arg(dir.path());
    let args = ["--appendonly", "yes", "--dir", &d];
    let server = start_hozon(&args);
    let mut conn = Conn::connect(server.port);
    preload(&mut conn, 100_000, 16);
    let old = aof_bytes(dir.path());
    let replies = pipeline(
        &mut conn,
        &[&[b"BGREWRITEAOF"], &[b"SET", b"last", b"write"]],
    );
    assert_eq!(replies[0], STARTED);
    conn.send_raw(&encode_command(&[b"SHUTDOWN"]));
    assert_eq!(conn.read_until_close(), b"", "SHUTDOWN replied");
    drop(server);
    // The rewrite was stopped, not finished: the old file, plus the write.
    let file = aof_bytes(dir.path());
    assert!(
        file.starts_with(&old),
        "the old AOF was replaced or changed"
    );
    let restarted = start_hozon(&args);
    let mut conn = Conn::connect(restarted.port);
    check_preloaded(&mut conn, 100_000, 16, "after SHUTDOWN during a rewrite");
    assert_eq!(conn.call(&[b"GET", b"last"]), b"$5\r\nwrite\r\n");
    let left = temp_files(dir.path());
    assert!(left.is_empty(), "temp files after the restart: {left:?}");
}

#[test]
fn rewrite_parameters_have_redis_defaults_and_aof_preamble_switches_at_runtime() {
    let redis = start_redis(&[]);
    let mut r = Conn::connect(redis.port);
    let dir = tempfile::tempdir().unwrap();
    let d = arg(dir.path());
    let server = start_hozon(&["--appendonly", "yes", "--dir", &d]);
    let mut h = Conn::connect(server.port);
    for name in [
        "auto-aof-rewrite-percentage",
        "auto-aof-rewrite-min-size",
        "no-appendfsync-on-rewrite",
        "aof-rewrite-incremental-fsync",
    ] {
        let get: [&[u8]; 3] = [b"CONFIG", b"GET", name.as_bytes()];
        assert_eq!(
            show(&h.call(&get)),
            show(&r.call(&get)),
            "CONFIG GET {name}"
        );
    }
    assert_eq!(
        h.call(&[b"CONFIG", b"GET", b"aof-preamble"]),
        b"*2\r\n$12\r\naof-preamble\r\n$6\r\nnative\r\n"
    );
    h.call(&[b"SET", b"k", b"v"]);
    assert_eq!(
        h.call(&[b"CONFIG", b"SET", b"aof-preamble", b"none"]),
        b"+OK\r\n"
    );
    bgrewriteaof(&mut h);
    wait_rewrite_done(&mut h);
    assert!(
        aof_bytes(dir.path()).starts_with(LOG_HEADER),
        "aof-preamble none ignored"
    );
    assert_eq!(
        h.call(&[b"CONFIG", b"SET", b"aof-preamble", b"native"]),
        b"+OK\r\n"
    );
    bgrewriteaof(&mut h);
    wait_rewrite_done(&mut h);
    assert!(
        aof_bytes(dir.path()).starts_with(SNAPSHOT_MAGIC),
        "aof-preamble native ignored"
    );
    // The fsync settings take effect at runtime and rewrites still work.
    for (name, value) in [
        ("no-appendfsync-on-rewrite", "yes"),
        ("aof-rewrite-incremental-fsync", "no"),
    ] {
        let set: [&[u8]; 4] = [b"CONFIG", b"SET", name.as_bytes(), value.as_bytes()];
        assert_eq!(
            show(&h.call(&set)),
            show(&r.call(&set)),
            "CONFIG SET {name} {value}"
        );
    }
    let replies = pipeline(&mut h, &[&[b"BGREWRITEAOF"], &[b"SET", b"k", b"during"]]);
    assert_eq!(replies[0], STARTED);
    let text = wait_rewrite_done(&mut h);
    assert_eq!(field(&text, "aof_last_bgrewrite_status"), "ok", "{text}");
    drop(server);
    let restarted = start_hozon(&["--appendonly", "yes", "--dir", &d]);
    let mut h = Conn::connect(restarted.port);
    assert_eq!(h.call(&[b"GET", b"k"]), b"$6\r\nduring\r\n");
}

#[test]
fn config_set_appendonly_yes_during_a_rewrite_replaces_it() {
    let dir = tempfile::tempdir().unwrap();
    let d = arg(dir.path());
    let server = start_hozon(&["--appendonly", "no", "--dir", &d]);
    let mut conn = Conn::connect(server.port);
    preload(&mut conn, 20_000, 32);
    // Redis 7.0 (startAppendOnly): "AOF was enabled but there is already
    // an AOF rewriting in background. Stopping background AOF and starting
    // a rewrite now."
    let replies = pipeline(
        &mut conn,
        &[
            &[b"BGREWRITEAOF"],
            &[b"CONFIG", b"SET", b"appendonly", b"yes"],
            &[b"SET", b"after", b"enable"],
        ],
    );
    assert_eq!(replies[0], STARTED, "{}", show(&replies[0]));
    assert_eq!(replies[1], b"+OK\r\n", "{}", show(&replies[1]));
    assert_eq!(replies[2], b"+OK\r\n", "{}", show(&replies[2]));
    let text = wait_rewrite_done(&mut conn);
    assert_eq!(field(&text, "aof_enabled"), "1", "{text}");
    assert_eq!(field(&text, "aof_last_bgrewrite_status"), "ok", "{text}");
    assert_eq!(conn.call(&[b"SET", b"after", b"switch"]), b"+OK\r\n");
    kill9(&server);
    drop(server);
    let restarted = start_hozon(&["--appendonly", "yes", "--dir", &d]);
    let mut conn = Conn::connect(restarted.port);
    check_preloaded(&mut conn, 20_000, 32, "after enabling the AOF mid-rewrite");
    assert_eq!(conn.call(&[b"GET", b"after"]), b"$6\r\nswitch\r\n");
}

#[test]
fn shutdown_is_refused_while_the_first_aof_is_being_written() {
    // Redis 7.0 (prepareForShutdown): "Writing initial AOF, can't exit."
    // Exiting then would leave only the temporary log: the data written
    // before CONFIG SET appendonly yes would not be in any AOF.
    let dir = tempfile::tempdir().unwrap();
    let d = arg(dir.path());
    let server = start_hozon(&["--appendonly", "no", "--save", "", "--dir", &d]);
    let mut conn = Conn::connect(server.port);
    preload(&mut conn, 20_000, 32);
    let replies = pipeline(
        &mut conn,
        &[
            &[b"CONFIG", b"SET", b"appendonly", b"yes"],
            &[b"SET", b"k", b"v"],
            &[b"SHUTDOWN"],
        ],
    );
    assert_eq!(replies[0], b"+OK\r\n", "{}", show(&replies[0]));
    assert_eq!(replies[1], b"+OK\r\n", "{}", show(&replies[1]));
    assert_eq!(
        replies[2],
        b"-ERR Errors trying to SHUTDOWN. Check logs.\r\n",
        "{}",
        show(&replies[2])
    );
    let text = wait_rewrite_done(&mut conn);
    assert_eq!(field(&text, "aof_last_bgrewrite_status"), "ok", "{text}");
    // Once the AOF is in place SHUTDOWN works (no reply: the server exits).
    conn.send_raw(&encode_command(&[b"SHUTDOWN"]));
    assert_eq!(conn.read_until_close(), b"");
    drop(server);
    let restarted = start_hozon(&["--appendonly", "yes", "--dir", &d]);
    let mut conn = Conn::connect(restarted.port);
    check_preloaded(&mut conn, 20_000, 32, "after the refused shutdown");
    assert_eq!(conn.call(&[b"GET", b"k"]), b"$1\r\nv\r\n");
}
