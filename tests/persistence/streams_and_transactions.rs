//! Durability of the issue-9 features: streams with consumer groups (the
//! worker scenario: a consumer dies holding jobs, the server is killed, a
//! second consumer claims the jobs after the restart), transactions under
//! SIGKILL (never half a MULTI/EXEC), blocking pops (logged as the pops that
//! served them), Pub/Sub (never in the file), and random stream/group
//! histories that must replay, directly and through a rewrite, to the same
//! `XINFO STREAM … FULL`.

use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicI64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use hozon::config::AppendFsync;
use hozon::rand::Rng;
use hozon::resp::reply_frame::frame_len;
use hozon::{Config, Engine, Reply};
use quickcheck::{Arbitrary, Gen, TestResult};

use crate::harness::{encode_command, show, start_hozon, Conn, ServerProcess};

// ---------------------------------------------------------------------------
// Replies as values (RESP2 over the network, `Reply` in process), so the
// same comparison and masking code serves both.

/// A decoded reply.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
enum V {
    Bulk(String),
    Int(i64),
    Simple(String),
    Err(String),
    Nil,
    Array(Vec<V>),
}

fn bulk(s: &str) -> V {
    V::Bulk(s.to_string())
}

fn ok() -> V {
    V::Simple("OK".into())
}

fn decode_at(buf: &[u8], pos: &mut usize) -> V {
    let end = buf[*pos..]
        .windows(2)
        .position(|w| w == b"\r\n")
        .unwrap_or_else(|| panic!("no line end in {}", show(buf)))
        + *pos;
    let kind = buf[*pos];
    let line = String::from_utf8_lossy(&buf[*pos + 1..end]).into_owned();
    *pos = end + 2;
    let number = |line: &str| -> i64 {
        line.parse()
            .unwrap_or_else(|_| panic!("bad number {line:?} in {}", show(buf)))
    };
    match kind {
        b'+' => V::Simple(line),
        b'-' => V::Err(line),
        b':' => V::Int(number(&line)),
        b'$' => {
            let n = number(&line);
            if n < 0 {
                return V::Nil;
            }
            let n = n as usize;
            let v = String::from_utf8_lossy(&buf[*pos..*pos + n]).into_owned();
            *pos += n + 2;
            V::Bulk(v)
        }
        b'*' => {
            let n = number(&line);
            if n < 0 {
                return V::Nil;
            }
            V::Array((0..n).map(|_| decode_at(buf, pos)).collect())
        }
        other => panic!("unexpected reply type {:?} in {}", other as char, show(buf)),
    }
}

fn decode(raw: &[u8]) -> V {
    let mut pos = 0;
    let v = decode_at(raw, &mut pos);
    assert_eq!(
        pos,
        raw.len(),
        "trailing bytes after a reply: {}",
        show(raw)
    );
    v
}

/// An in-process reply as the RESP2 client of a server would decode it.
fn from_reply(reply: Reply) -> V {
    decode(&reply.to_resp(2))
}

/// Indented, one value per line: readable diffs of nested XINFO replies.
fn pretty(v: &V) -> String {
    fn go(v: &V, depth: usize, out: &mut String) {
        let pad = "  ".repeat(depth);
        match v {
            V::Array(items) => {
                out.push_str(&format!("{pad}[\n"));
                for item in items {
                    go(item, depth + 1, out);
                }
                out.push_str(&format!("{pad}]\n"));
            }
            other => out.push_str(&format!("{pad}{other:?}\n")),
        }
    }
    let mut out = String::new();
    go(v, 0, &mut out);
    out
}

/// The first line where two pretty-printed values differ, with context.
fn first_difference(before: &V, after: &V) -> String {
    let (b, a) = (pretty(before), pretty(after));
    let (bl, al): (Vec<&str>, Vec<&str>) = (b.lines().collect(), a.lines().collect());
    let at = bl
        .iter()
        .zip(&al)
        .position(|(x, y)| x != y)
        .unwrap_or(bl.len().min(al.len()));
    let from = at.saturating_sub(12);
    format!(
        "first difference at line {at}\n--- before (lines {from}..)\n{}\n--- after (lines {from}..)\n{}",
        bl[from..bl.len().min(at + 6)].join("\n"),
        al[from..al.len().min(at + 6)].join("\n"),
    )
}

/// Fields whose values depend on when they are read or on the clock of the
/// replay: a consumer's seen/active time is set to "now" by the commands
/// that recreate it (as in Redis), idle times grow while we look.
const TIME_FIELDS: &[&str] = &["seen-time", "active-time", "idle", "inactive"];

/// Replaces the value after every `TIME_FIELDS` name in flat key/value
/// arrays (recursively).
fn mask_times(v: &mut V) {
    if let V::Array(items) = v {
        let mut i = 0;
        while i < items.len() {
            if let V::Bulk(name) = &items[i] {
                if TIME_FIELDS.contains(&name.as_str()) && i + 1 < items.len() {
                    items[i + 1] = V::Simple("<time>".into());
                    i += 2;
                    continue;
                }
            }
            mask_times(&mut items[i]);
            i += 1;
        }
    }
}

/// In an extended XPENDING reply (`[id, consumer, idle-ms, deliveries]`
/// per entry), masks the idle time.
fn mask_pending_idle(v: &mut V) {
    if let V::Array(entries) = v {
        for entry in entries {
            if let V::Array(fields) = entry {
                if fields.len() == 4 {
                    fields[2] = V::Simple("<idle>".into());
                }
            }
        }
    }
}

/// The value of `name` in a flat key/value array.
fn field<'a>(v: &'a V, name: &str) -> Option<&'a V> {
    let V::Array(items) = v else { return None };
    items
        .chunks(2)
        .find(|pair| pair[0] == bulk(name))
        .and_then(|pair| pair.get(1))
}

fn items(v: &V) -> &[V] {
    match v {
        V::Array(items) => items,
        other => panic!("not an array: {other:?}"),
    }
}

fn text(v: &V) -> &str {
    match v {
        V::Bulk(s) | V::Simple(s) => s,
        other => panic!("not a string: {other:?}"),
    }
}

/// Everything observable about stream `key` through commands, time fields
/// masked: `XINFO STREAM key FULL COUNT 0` (all entries, groups, PELs with
/// delivery times and counts, consumers), `XINFO GROUPS`, and per group
/// the XPENDING summary, the extended XPENDING and `XINFO CONSUMERS`.
fn stream_state(call: &mut dyn FnMut(&[&str]) -> V, key: &str) -> V {
    let kind = call(&["TYPE", key]);
    if kind != V::Simple("stream".into()) {
        return kind;
    }
    let mut full = call(&["XINFO", "STREAM", key, "FULL", "COUNT", "0"]);
    mask_times(&mut full);
    let groups = call(&["XINFO", "GROUPS", key]);
    let mut out = vec![full, groups.clone()];
    for group in items(&groups) {
        let name = text(field(group, "name").expect("XINFO GROUPS has name")).to_string();
        out.push(call(&["XPENDING", key, &name]));
        let mut extended = call(&["XPENDING", key, &name, "-", "+", "100000"]);
        mask_pending_idle(&mut extended);
        out.push(extended);
        let mut consumers = call(&["XINFO", "CONSUMERS", key, &name]);
        mask_times(&mut consumers);
        out.push(consumers);
    }
    V::Array(out)
}

// ---------------------------------------------------------------------------
// A real server on a data directory.

fn start(dir: &str, appendonly: bool, policy: &str) -> ServerProcess {
    start_hozon(&[
        "--appendonly",
        if appendonly { "yes" } else { "no" },
        "--appendfsync",
        policy,
        "--dir",
        dir,
    ])
}

/// SIGKILL: the server gets no chance to flush anything; returns once the
/// process is gone (and its directory lock with it).
fn sigkill(server: ServerProcess) {
    let pid = server.pid();
    let status = std::process::Command::new("kill")
        .args(["-9", &pid.to_string()])
        .status()
        .expect("run kill");
    assert!(status.success(), "kill -9 {pid} failed");
    drop(server); // reaps the process
}

fn call(conn: &mut Conn, args: &[&str]) -> V {
    let bytes: Vec<&[u8]> = args.iter().map(|a| a.as_bytes()).collect();
    decode(&conn.call(&bytes))
}

fn server_stream_state(conn: &mut Conn, key: &str) -> V {
    stream_state(&mut |args| call(conn, args), key)
}

/// Every key of database 0 with a canonical value read through commands.
fn dump_db0(conn: &mut Conn) -> BTreeMap<String, V> {
    let mut out = BTreeMap::new();
    let keys = call(conn, &["KEYS", "*"]);
    for key in items(&keys) {
        let key = text(key).to_string();
        let kind = call(conn, &["TYPE", &key]);
        let value = match text(&kind) {
            "string" => call(conn, &["GET", &key]),
            "list" => call(conn, &["LRANGE", &key, "0", "-1"]),
            "zset" => call(conn, &["ZRANGE", &key, "0", "-1", "WITHSCORES"]),
            "hash" | "set" => {
                let cmd = if text(&kind) == "hash" {
                    "HGETALL"
                } else {
                    "SMEMBERS"
                };
                let mut all = items(&call(conn, &[cmd, &key])).to_vec();
                all.sort();
                V::Array(all)
            }
            "stream" => server_stream_state(conn, &key),
            other => panic!("type {other} of {key}"),
        };
        let ttl = call(conn, &["PEXPIRETIME", &key]);
        out.insert(key, V::Array(vec![kind, value, ttl]));
    }
    out
}

fn assert_same_state(before: &V, after: &V, what: &str) {
    assert!(
        before == after,
        "{what}: state differs\n{}",
        first_difference(before, after)
    );
}

/// Waits until the server reports `n` blocked clients (so the next push
/// wakes a client that really waited rather than one served at once).
fn wait_blocked(conn: &mut Conn, n: usize) {
    let want = format!("blocked_clients:{n}\r\n");
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let info = call(conn, &["INFO", "clients"]);
        if text(&info).contains(&want) {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "never saw {want:?} in INFO clients: {info:?}"
        );
        std::thread::sleep(Duration::from_millis(2));
    }
}

fn aof_text(dir: &Path) -> String {
    let bytes = std::fs::read(dir.join("appendonly.aof")).expect("read appendonly.aof");
    String::from_utf8_lossy(&bytes).to_lowercase()
}

// ---------------------------------------------------------------------------
// 1. The worker scenario.

const JOBS_BEFORE: usize = 40;
const JOBS_AFTER: usize = 10;
/// Jobs a healthy consumer C reads and acknowledges first.
const C_JOBS: usize = 5;
/// Jobs consumer A reads and never acknowledges.
const A_JOBS: usize = 10;

/// `(id, job number)` of each entry of an array of `[id, [field, value…]]`.
fn jobs_of(entries: &V) -> Vec<(String, usize)> {
    items(entries)
        .iter()
        .map(|entry| {
            let e = items(entry);
            let job = field(&e[1], "job").unwrap_or_else(|| panic!("no job field in {entry:?}"));
            let job = text(job)
                .parse()
                .unwrap_or_else(|_| panic!("bad job number in {entry:?}"));
            (text(&e[0]).to_string(), job)
        })
        .collect()
}

/// The entries an XREADGROUP on the single stream `jobs` returned.
fn read_group(conn: &mut Conn, consumer: &str, count: usize) -> Vec<(String, usize)> {
    let reply = call(
        conn,
        &[
            "XREADGROUP",
            "GROUP",
            "workers",
            consumer,
            "COUNT",
            &count.to_string(),
            "STREAMS",
            "jobs",
            ">",
        ],
    );
    if reply == V::Nil {
        return Vec::new();
    }
    let streams = items(&reply);
    assert_eq!(streams.len(), 1, "{reply:?}");
    let stream = items(&streams[0]);
    assert_eq!(stream[0], bulk("jobs"));
    jobs_of(&stream[1])
}

fn ack(conn: &mut Conn, jobs: &[(String, usize)]) {
    let mut args = vec!["XACK", "jobs", "workers"];
    args.extend(jobs.iter().map(|(id, _)| id.as_str()));
    assert_eq!(
        call(conn, &args),
        V::Int(jobs.len() as i64),
        "XACK of {jobs:?}"
    );
}

fn add_job(conn: &mut Conn, ids: &mut Vec<String>) {
    let job = ids.len().to_string();
    let payload = format!("payload of job {job}");
    let reply = call(conn, &["XADD", "jobs", "*", "job", &job, "data", &payload]);
    ids.push(text(&reply).to_string());
}

fn worker_scenario(policy: &str, via_rewrite: bool) {
    let dir = tempfile::tempdir().expect("temp dir");
    let d = dir.path().to_string_lossy().into_owned();
    let server = start(&d, !via_rewrite, policy);
    let mut producer = Conn::connect(server.port);
    let mut ids = Vec::new();
    for _ in 0..JOBS_BEFORE {
        add_job(&mut producer, &mut ids);
    }
    assert_eq!(
        call(&mut producer, &["XGROUP", "CREATE", "jobs", "workers", "0"]),
        ok()
    );
    // (job number → times processed) over every consumer.
    let mut processed: BTreeMap<usize, usize> = BTreeMap::new();

    // C is a healthy worker: reads, processes, acknowledges.
    let mut c = Conn::connect(server.port);
    let c_jobs = read_group(&mut c, "C", C_JOBS);
    assert_eq!(
        c_jobs.iter().map(|(id, _)| id.clone()).collect::<Vec<_>>(),
        ids[..C_JOBS]
    );
    for (_, job) in &c_jobs {
        *processed.entry(*job).or_default() += 1;
    }
    ack(&mut c, &c_jobs);
    drop(c);

    // A takes jobs and dies without acknowledging: its connection closes.
    let mut a = Conn::connect(server.port);
    let a_jobs = read_group(&mut a, "A", A_JOBS);
    let a_ids: Vec<String> = a_jobs.iter().map(|(id, _)| id.clone()).collect();
    assert_eq!(a_ids, ids[C_JOBS..C_JOBS + A_JOBS]);
    drop(a);

    let before_rewrite = server_stream_state(&mut producer, "jobs");
    if via_rewrite {
        let aof = dir.path().join("appendonly.aof");
        assert!(!aof.exists(), "appendonly no wrote {}", aof.display());
        assert_eq!(
            call(&mut producer, &["CONFIG", "SET", "appendfsync", policy]),
            ok()
        );
        assert_eq!(
            call(&mut producer, &["CONFIG", "SET", "appendonly", "yes"]),
            ok()
        );
        // The switch-on is a background rewrite: wait for its switch.
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
        loop {
            let info =
                String::from_utf8_lossy(&producer.call(&[b"INFO", b"persistence"])).into_owned();
            if info.contains("aof_rewrite_in_progress:0") && aof.exists() {
                break;
            }
            assert!(
                std::time::Instant::now() < deadline,
                "CONFIG SET appendonly yes wrote no file: {info}"
            );
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
        assert_same_state(
            &before_rewrite,
            &server_stream_state(&mut producer, "jobs"),
            "the rewrite itself changed the stream",
        );
    }
    // More jobs arrive after A died (after the rewrite: logged on top of it).
    for _ in 0..JOBS_AFTER {
        add_job(&mut producer, &mut ids);
    }
    let before = server_stream_state(&mut producer, "jobs");
    drop(producer);

    sigkill(server);
    let server = start(&d, true, policy);
    let mut b = Conn::connect(server.port);
    assert_same_state(
        &before,
        &server_stream_state(&mut b, "jobs"),
        "XINFO STREAM FULL / XPENDING / XINFO after SIGKILL and replay",
    );

    // B finds A's jobs pending.
    assert_eq!(
        call(&mut b, &["XPENDING", "jobs", "workers"]),
        V::Array(vec![
            V::Int(A_JOBS as i64),
            bulk(&a_ids[0]),
            bulk(&a_ids[A_JOBS - 1]),
            V::Array(vec![V::Array(vec![bulk("A"), bulk(&A_JOBS.to_string())])]),
        ])
    );
    let check_extended = |b: &mut Conn, consumer: &str, deliveries: i64| {
        let extended = call(b, &["XPENDING", "jobs", "workers", "-", "+", "100"]);
        let entries = items(&extended);
        assert_eq!(entries.len(), A_JOBS, "{extended:?}");
        for (entry, id) in entries.iter().zip(&a_ids) {
            let e = items(entry);
            assert_eq!(e[0], bulk(id), "{extended:?}");
            assert_eq!(e[1], bulk(consumer), "{extended:?}");
            assert!(matches!(e[2], V::Int(idle) if idle >= 0), "{extended:?}");
            assert_eq!(e[3], V::Int(deliveries), "{extended:?}");
        }
    };
    check_extended(&mut b, "A", 1);

    // Past the min-idle-time, B claims them all.
    std::thread::sleep(Duration::from_millis(150));
    let claimed = call(
        &mut b,
        &[
            "XAUTOCLAIM",
            "jobs",
            "workers",
            "B",
            "100",
            "0-0",
            "COUNT",
            "100",
        ],
    );
    let parts = items(&claimed);
    assert_eq!(parts.len(), 3, "{claimed:?}");
    assert_eq!(parts[0], bulk("0-0"), "XAUTOCLAIM cursor: {claimed:?}");
    assert_eq!(jobs_of(&parts[1]), a_jobs, "XAUTOCLAIM entries");
    assert_eq!(parts[2], V::Array(vec![]), "XAUTOCLAIM deleted ids");
    check_extended(&mut b, "B", 2);
    // The payloads came back intact.
    for entry in items(&parts[1]) {
        let e = items(entry);
        let job = text(field(&e[1], "job").expect("job"));
        assert_eq!(
            field(&e[1], "data"),
            Some(&bulk(&format!("payload of job {job}")))
        );
    }
    for (_, job) in &a_jobs {
        *processed.entry(*job).or_default() += 1;
    }
    ack(&mut b, &a_jobs);

    // B then takes everything still undelivered.
    let rest = read_group(&mut b, "B", 1000);
    assert_eq!(
        rest.iter().map(|(id, _)| id.clone()).collect::<Vec<_>>(),
        ids[C_JOBS + A_JOBS..]
    );
    for (_, job) in &rest {
        *processed.entry(*job).or_default() += 1;
    }
    ack(&mut b, &rest);

    let total = JOBS_BEFORE + JOBS_AFTER;
    let missing: Vec<usize> = (0..total).filter(|j| !processed.contains_key(j)).collect();
    assert!(missing.is_empty(), "jobs never processed: {missing:?}");
    assert_eq!(
        processed.len(),
        total,
        "unknown jobs processed: {processed:?}"
    );

    let empty = V::Array(vec![V::Int(0), V::Nil, V::Nil, V::Nil]);
    assert_eq!(call(&mut b, &["XPENDING", "jobs", "workers"]), empty);
    let groups = call(&mut b, &["XINFO", "GROUPS", "jobs"]);
    let group = &items(&groups)[0];
    assert_eq!(items(&groups).len(), 1, "{groups:?}");
    assert_eq!(field(group, "name"), Some(&bulk("workers")), "{groups:?}");
    assert_eq!(field(group, "consumers"), Some(&V::Int(3)), "{groups:?}");
    assert_eq!(field(group, "pending"), Some(&V::Int(0)), "{groups:?}");
    assert_eq!(
        field(group, "last-delivered-id"),
        Some(&bulk(ids.last().expect("jobs were added"))),
        "{groups:?}"
    );
    assert_eq!(
        field(group, "entries-read"),
        Some(&V::Int(total as i64)),
        "{groups:?}"
    );
    assert_eq!(field(group, "lag"), Some(&V::Int(0)), "{groups:?}");
    let consumers = call(&mut b, &["XINFO", "CONSUMERS", "jobs", "workers"]);
    let names: Vec<&V> = items(&consumers)
        .iter()
        .map(|c| field(c, "name").expect("name"))
        .collect();
    assert_eq!(names, [&bulk("A"), &bulk("B"), &bulk("C")], "{consumers:?}");
    for consumer in items(&consumers) {
        assert_eq!(
            field(consumer, "pending"),
            Some(&V::Int(0)),
            "{consumers:?}"
        );
    }

    // The acknowledgements are durable too.
    let done = server_stream_state(&mut b, "jobs");
    drop(b);
    sigkill(server);
    let server = start(&d, true, policy);
    let mut check = Conn::connect(server.port);
    assert_same_state(
        &done,
        &server_stream_state(&mut check, "jobs"),
        "after processing, SIGKILL and replay",
    );
    assert_eq!(call(&mut check, &["XPENDING", "jobs", "workers"]), empty);
}

#[test]
fn dead_consumers_jobs_are_claimed_after_sigkill_under_always() {
    worker_scenario("always", false);
}

#[test]
fn dead_consumers_jobs_are_claimed_after_sigkill_under_everysec() {
    worker_scenario("everysec", false);
}

#[test]
fn dead_consumers_jobs_survive_a_rewrite_then_sigkill() {
    worker_scenario("always", true);
}

#[test]
fn dead_consumers_jobs_survive_a_rewrite_then_sigkill_under_everysec() {
    worker_scenario("everysec", true);
}

// ---------------------------------------------------------------------------
// 2. Transactions under SIGKILL.

/// A client that reports a closed connection instead of panicking (the
/// server is killed under it on purpose).
struct Raw {
    stream: TcpStream,
    buf: Vec<u8>,
}

impl Raw {
    fn connect(port: u16) -> Raw {
        let stream = TcpStream::connect(("127.0.0.1", port)).expect("connect");
        stream
            .set_read_timeout(Some(Duration::from_secs(20)))
            .expect("timeout");
        stream.set_nodelay(true).expect("nodelay");
        Raw {
            stream,
            buf: Vec::new(),
        }
    }

    fn send(&mut self, bytes: &[u8]) -> bool {
        self.stream.write_all(bytes).is_ok()
    }

    /// One reply, or `None` once the connection is gone.
    fn read_reply(&mut self) -> Option<V> {
        loop {
            match frame_len(&self.buf) {
                Ok(Some(n)) => {
                    let frame: Vec<u8> = self.buf.drain(..n).collect();
                    return Some(decode(&frame));
                }
                Ok(None) => {}
                Err(e) => panic!("malformed reply ({e}): {}", show(&self.buf)),
            }
            let mut chunk = [0u8; 65536];
            match self.stream.read(&mut chunk) {
                Ok(0) | Err(_) => return None,
                Ok(n) => self.buf.extend_from_slice(&chunk[..n]),
            }
        }
    }
}

/// Increments of each counter per MULTI block.
const INCRS_PER_BLOCK: i64 = 3;
const BLOCKS_PER_PIPELINE: usize = 16;

fn transaction_block() -> Vec<u8> {
    let mut out = encode_command(&[b"MULTI"]);
    for _ in 0..INCRS_PER_BLOCK {
        out.extend(encode_command(&[b"INCR", b"a"]));
        out.extend(encode_command(&[b"INCR", b"b"]));
    }
    out.extend(encode_command(&[b"EXEC"]));
    out
}

fn counter(v: &V) -> i64 {
    match v {
        V::Nil => 0,
        V::Bulk(s) => s.parse().unwrap_or_else(|_| panic!("not a counter: {s:?}")),
        other => panic!("not a counter: {other:?}"),
    }
}

/// Pipelines MULTI blocks until the connection dies; `acked` is the value
/// of `a` in the last EXEC reply received, `sent` counts blocks sent.
fn pipeline_transactions(port: u16, acked: &AtomicI64, sent: &AtomicI64, stop: &AtomicBool) {
    let mut conn = Raw::connect(port);
    let block = transaction_block();
    let pipeline = block.repeat(BLOCKS_PER_PIPELINE);
    while !stop.load(Ordering::SeqCst) {
        sent.fetch_add(BLOCKS_PER_PIPELINE as i64, Ordering::SeqCst);
        if !conn.send(&pipeline) {
            return;
        }
        for _ in 0..BLOCKS_PER_PIPELINE {
            let mut replies = Vec::new();
            for _ in 0..(2 + 2 * INCRS_PER_BLOCK) {
                match conn.read_reply() {
                    Some(r) => replies.push(r),
                    None => return,
                }
            }
            let queued = V::Simple("QUEUED".into());
            assert_eq!(replies[0], ok(), "MULTI");
            assert!(replies[1..replies.len() - 1].iter().all(|r| *r == queued));
            let exec = items(replies.last().expect("EXEC reply"));
            assert_eq!(exec.len(), 2 * INCRS_PER_BLOCK as usize);
            let (V::Int(a), V::Int(b)) = (&exec[exec.len() - 2], &exec[exec.len() - 1]) else {
                panic!("EXEC reply {exec:?}")
            };
            assert_eq!(a, b, "a transaction saw a != b");
            acked.store(*a, Ordering::SeqCst);
        }
    }
}

fn transactions_under_sigkill(policy: &str, seed: u64) {
    const ROUNDS: usize = 8;
    let dir = tempfile::tempdir().expect("temp dir");
    let d = dir.path().to_string_lossy().into_owned();
    let mut rng = Rng::with_seed(seed);
    let mut acked_total_blocks = 0;
    let mut acked_value = 0;
    let mut sent_value_max = 0;
    for round in 0..ROUNDS {
        let server = start(&d, true, policy);
        let mut check = Conn::connect(server.port);
        let a = counter(&call(&mut check, &["GET", "a"]));
        let b = counter(&call(&mut check, &["GET", "b"]));
        assert_eq!(
            a, b,
            "round {round} ({policy}): half a transaction recovered"
        );
        assert_eq!(
            a % INCRS_PER_BLOCK,
            0,
            "round {round} ({policy}): a = {a} is not a whole number of blocks"
        );
        assert!(
            a >= acked_value,
            "round {round} ({policy}): acknowledged EXEC lost: a = {a} < acknowledged {acked_value}"
        );
        assert!(
            a <= sent_value_max,
            "round {round} ({policy}): a = {a} beyond everything sent ({sent_value_max})"
        );
        drop(check);

        let acked = Arc::new(AtomicI64::new(a));
        let sent = Arc::new(AtomicI64::new(0));
        let stop = Arc::new(AtomicBool::new(false));
        let writer = {
            let (acked, sent, stop) = (Arc::clone(&acked), Arc::clone(&sent), Arc::clone(&stop));
            let port = server.port;
            std::thread::spawn(move || pipeline_transactions(port, &acked, &sent, &stop))
        };
        std::thread::sleep(Duration::from_millis(30 + rng.below(200)));
        sigkill(server);
        stop.store(true, Ordering::SeqCst);
        writer.join().expect("the transaction client failed");
        let acked_now = acked.load(Ordering::SeqCst);
        acked_total_blocks += (acked_now - a) / INCRS_PER_BLOCK;
        acked_value = acked_now;
        sent_value_max = a + sent.load(Ordering::SeqCst) * INCRS_PER_BLOCK;
    }
    let server = start(&d, true, policy);
    let mut check = Conn::connect(server.port);
    let a = counter(&call(&mut check, &["GET", "a"]));
    let b = counter(&call(&mut check, &["GET", "b"]));
    assert_eq!(a, b, "final ({policy}): half a transaction recovered");
    assert!(a >= acked_value, "final ({policy}): acknowledged EXEC lost");
    eprintln!("{policy}: {acked_total_blocks} acknowledged MULTI blocks over {ROUNDS} kills");
    assert!(
        acked_total_blocks > 0,
        "no transaction was acknowledged: the test proved nothing"
    );
}

#[test]
fn transactions_are_all_or_nothing_across_sigkill_under_always() {
    transactions_under_sigkill("always", 11);
}

/// Under everysec a kill -9 keeps everything `write(2)` handed to the
/// kernel, and replies are sent after the write: acknowledged EXECs
/// survive too (docs/persistence.md).
#[test]
fn transactions_are_all_or_nothing_across_sigkill_under_everysec() {
    transactions_under_sigkill("everysec", 12);
}

// ---------------------------------------------------------------------------
// 3. Blocking commands served after waiting.

#[test]
fn blocking_pops_served_after_waiting_replay_as_their_effects() {
    let dir = tempfile::tempdir().expect("temp dir");
    let d = dir.path().to_string_lossy().into_owned();
    let server = start(&d, true, "always");
    let mut pusher = Conn::connect(server.port);
    let mut waiter = Conn::connect(server.port);
    assert_eq!(call(&mut pusher, &["RPUSH", "dst", "d0"]), V::Int(1));
    assert_eq!(
        call(
            &mut pusher,
            &["XGROUP", "CREATE", "s", "g", "$", "MKSTREAM"]
        ),
        ok()
    );

    // Each case: the blocking command, the push that serves it, its reply.
    let cases: Vec<(Vec<&str>, Vec<&str>, V)> = vec![
        (
            vec!["BLPOP", "l", "0"],
            vec!["RPUSH", "l", "a", "b", "c"],
            V::Array(vec![bulk("l"), bulk("a")]),
        ),
        (
            vec!["BLMOVE", "src", "dst", "LEFT", "RIGHT", "0"],
            vec!["RPUSH", "src", "x", "y"],
            bulk("x"),
        ),
        (
            vec!["BRPOPLPUSH", "r2", "dst", "0"],
            vec!["RPUSH", "r2", "u", "w"],
            bulk("w"),
        ),
        (
            vec!["BLMPOP", "0", "1", "m", "LEFT", "COUNT", "2"],
            vec!["RPUSH", "m", "p", "q", "r"],
            V::Array(vec![bulk("m"), V::Array(vec![bulk("p"), bulk("q")])]),
        ),
        (
            vec!["BZPOPMIN", "z", "0"],
            vec!["ZADD", "z", "1", "m1", "2", "m2"],
            V::Array(vec![bulk("z"), bulk("m1"), bulk("1")]),
        ),
        (
            vec!["BZMPOP", "0", "1", "z2", "MAX", "COUNT", "1"],
            vec!["ZADD", "z2", "1", "a", "2", "b", "3", "c"],
            V::Array(vec![
                bulk("z2"),
                V::Array(vec![V::Array(vec![bulk("c"), bulk("3")])]),
            ]),
        ),
        (
            vec![
                "XREADGROUP",
                "GROUP",
                "g",
                "C",
                "BLOCK",
                "0",
                "COUNT",
                "10",
                "STREAMS",
                "s",
                ">",
            ],
            vec!["XADD", "s", "5-0", "f", "v"],
            V::Array(vec![V::Array(vec![
                bulk("s"),
                V::Array(vec![V::Array(vec![
                    bulk("5-0"),
                    V::Array(vec![bulk("f"), bulk("v")]),
                ])]),
            ])]),
        ),
    ];
    for (blocking, push, want) in &cases {
        let words: Vec<&[u8]> = blocking.iter().map(|w| w.as_bytes()).collect();
        waiter.send_raw(&encode_command(&words));
        wait_blocked(&mut pusher, 1);
        let pushed = call(&mut pusher, push);
        assert!(
            matches!(pushed, V::Int(_) | V::Bulk(_)),
            "{push:?}: {pushed:?}"
        );
        assert_eq!(
            decode(&waiter.read_reply()),
            *want,
            "{blocking:?} served by {push:?}"
        );
        wait_blocked(&mut pusher, 0);
    }
    // A block that times out changes nothing.
    assert_eq!(call(&mut waiter, &["BLPOP", "never", "0.05"]), V::Nil);

    let expected: [(&str, V); 8] = [
        ("l", V::Array(vec![bulk("b"), bulk("c")])),
        ("src", V::Array(vec![bulk("y")])),
        ("r2", V::Array(vec![bulk("u")])),
        // BLMOVE … RIGHT appended x; BRPOPLPUSH pushes at the head.
        ("dst", V::Array(vec![bulk("w"), bulk("d0"), bulk("x")])),
        ("m", V::Array(vec![bulk("r")])),
        ("z", V::Array(vec![bulk("m2"), bulk("2")])),
        (
            "z2",
            V::Array(vec![bulk("a"), bulk("1"), bulk("b"), bulk("2")]),
        ),
        ("never", V::Int(0)),
    ];
    let check_values = |conn: &mut Conn, when: &str| {
        for (key, want) in &expected {
            let got = if key.starts_with('z') {
                call(conn, &["ZRANGE", key, "0", "-1", "WITHSCORES"])
            } else if *key == "never" {
                call(conn, &["EXISTS", key])
            } else {
                call(conn, &["LRANGE", key, "0", "-1"])
            };
            assert_eq!(got, *want, "{when}: key {key}");
        }
        let pending = call(conn, &["XPENDING", "s", "g", "-", "+", "10"]);
        let entries = items(&pending);
        assert_eq!(entries.len(), 1, "{when}: PEL {pending:?}");
        let e = items(&entries[0]);
        assert_eq!(
            (&e[0], &e[1], &e[3]),
            (&bulk("5-0"), &bulk("C"), &V::Int(1))
        );
    };
    check_values(&mut pusher, "before the kill");
    let before = dump_db0(&mut pusher);
    drop((pusher, waiter));

    sigkill(server);
    let server = start(&d, true, "always");
    let mut conn = Conn::connect(server.port);
    let after = dump_db0(&mut conn);
    assert_same_state(
        &V::Array(
            before
                .into_iter()
                .map(|(k, v)| V::Array(vec![bulk(&k), v]))
                .collect(),
        ),
        &V::Array(
            after
                .into_iter()
                .map(|(k, v)| V::Array(vec![bulk(&k), v]))
                .collect(),
        ),
        "the dataset after replaying served blocking commands",
    );
    check_values(&mut conn, "after replay");

    // Logged as the non-blocking effects, never as the blocking requests.
    let aof = aof_text(dir.path());
    for name in [
        "blpop",
        "blmove",
        "brpoplpush",
        "blmpop",
        "bzpopmin",
        "bzmpop",
        "xreadgroup",
    ] {
        assert!(
            !aof.contains(name),
            "the AOF holds the blocking request {name}:\n{aof}"
        );
    }
}

// ---------------------------------------------------------------------------
// 4. Pub/Sub leaves no trace in the file.

#[test]
fn pubsub_is_never_persisted() {
    const CHANNEL: &str = "chan-hozon-pubsub-probe";
    const PATTERN: &str = "pat-hozon-pubsub-probe.*";
    const MESSAGES: usize = 200;
    let dir = tempfile::tempdir().expect("temp dir");
    let d = dir.path().to_string_lossy().into_owned();
    let server = start(&d, true, "always");
    let mut conn = Conn::connect(server.port);
    assert_eq!(call(&mut conn, &["SET", "k", "v"]), ok());
    assert_eq!(call(&mut conn, &["RPUSH", "l", "1", "2"]), V::Int(2));

    let mut sub = Conn::connect(server.port);
    assert_eq!(
        call(&mut sub, &["SUBSCRIBE", CHANNEL]),
        V::Array(vec![bulk("subscribe"), bulk(CHANNEL), V::Int(1)])
    );
    assert_eq!(
        call(&mut sub, &["PSUBSCRIBE", PATTERN]),
        V::Array(vec![bulk("psubscribe"), bulk(PATTERN), V::Int(2)])
    );
    for i in 0..MESSAGES {
        let message = format!("message {i}");
        assert_eq!(call(&mut conn, &["PUBLISH", CHANNEL, &message]), V::Int(1));
        assert_eq!(
            decode(&sub.read_reply()),
            V::Array(vec![bulk("message"), bulk(CHANNEL), bulk(&message)])
        );
    }
    let matched = "pat-hozon-pubsub-probe.1";
    assert_eq!(call(&mut conn, &["PUBLISH", matched, "pm"]), V::Int(1));
    assert_eq!(
        decode(&sub.read_reply()),
        V::Array(vec![
            bulk("pmessage"),
            bulk(PATTERN),
            bulk(matched),
            bulk("pm")
        ])
    );
    // A PUBLISH inside a transaction next to a write: the write is logged,
    // the PUBLISH is not.
    assert_eq!(call(&mut conn, &["MULTI"]), ok());
    call(&mut conn, &["SET", "k2", "v2"]);
    call(&mut conn, &["PUBLISH", CHANNEL, "in a transaction"]);
    assert_eq!(call(&mut conn, &["EXEC"]), V::Array(vec![ok(), V::Int(1)]));
    assert_eq!(
        decode(&sub.read_reply()),
        V::Array(vec![
            bulk("message"),
            bulk(CHANNEL),
            bulk("in a transaction")
        ])
    );
    assert_eq!(
        call(&mut conn, &["SPUBLISH", "shard-hozon-pubsub-probe", "x"]),
        V::Int(0)
    );
    assert_eq!(
        call(&mut conn, &["PUBSUB", "CHANNELS"]),
        V::Array(vec![bulk(CHANNEL)])
    );
    let before = dump_db0(&mut conn);
    drop((conn, sub));

    sigkill(server);
    let server = start(&d, true, "always");
    let mut conn = Conn::connect(server.port);
    assert_eq!(
        dump_db0(&mut conn),
        before,
        "dataset changed across restart"
    );
    assert_eq!(call(&mut conn, &["GET", "k2"]), bulk("v2"));
    assert_eq!(call(&mut conn, &["PUBSUB", "CHANNELS"]), V::Array(vec![]));
    assert_eq!(call(&mut conn, &["PUBSUB", "NUMPAT"]), V::Int(0));

    let aof = aof_text(dir.path());
    assert!(
        aof.contains("k2"),
        "the transaction's SET is not in the AOF"
    );
    for probe in ["pubsub-probe", "publish", "subscribe", "message "] {
        assert!(
            !aof.contains(probe),
            "the AOF holds Pub/Sub traffic ({probe:?}):\n{aof}"
        );
    }
}

// ---------------------------------------------------------------------------
// 5. Random stream/group histories replay exactly, directly and through the
//    rewrite.

const STREAM_KEYS: [&str; 2] = ["k0", "k1"];
/// The step that switches the AOF on in the rewrite variant.
const REWRITE: [&str; 4] = ["CONFIG", "SET", "appendonly", "yes"];

/// What the generator knows of each stream: the last ID it generated
/// (every XADD gets a greater one, so XADDs succeed) and the IDs it added,
/// so XDEL, XACK and XCLAIM mostly name real entries.
struct StreamModel {
    last: (u64, u64),
    added: Vec<(u64, u64)>,
}

impl StreamModel {
    fn new() -> StreamModel {
        StreamModel {
            last: (0, 0),
            added: Vec::new(),
        }
    }

    /// An ID that was added (and may since be gone), or now and then one
    /// that never was.
    fn some_id(&self, rng: &mut Rng) -> String {
        if self.added.is_empty() || rng.below(6) == 0 {
            return format!("{}-{}", rng.below(self.last.0 + 2), rng.below(2));
        }
        let (ms, seq) = self.added[rng.below(self.added.len() as u64) as usize];
        format!("{ms}-{seq}")
    }
}

/// Random stream and consumer-group commands over two keys, two groups and
/// three consumers, with explicit IDs (`ms-seq` or `ms-*`, both
/// deterministic) and only absolute claim times (`TIME`, or `IDLE`, which
/// is logged as `TIME`).
fn random_stream_command(rng: &mut Rng, models: &mut [StreamModel; 2]) -> Vec<String> {
    let k = rng.below(2) as usize;
    let key = STREAM_KEYS[k].to_string();
    let group = format!("g{}", rng.below(2));
    let consumer = format!("c{}", rng.below(3));
    let model = &mut models[k];
    let s = |v: &[&str]| v.iter().map(|x| x.to_string()).collect::<Vec<_>>();
    match rng.below(64) {
        0..=13 => {
            let (last_ms, last_seq) = model.last;
            let ms = last_ms + rng.below(2);
            let seq = if ms == last_ms { last_seq + 1 } else { 0 };
            model.last = (ms, seq);
            model.added.push((ms, seq));
            let id = match rng.below(3) {
                0 => format!("{ms}-*"),
                _ => format!("{ms}-{seq}"),
            };
            let mut cmd = s(&["XADD", &key]);
            match rng.below(10) {
                0 => cmd.extend(s(&["MAXLEN", "=", &rng.below(5).to_string()])),
                1 => cmd.push("NOMKSTREAM".into()),
                _ => {}
            }
            cmd.extend([
                id,
                format!("f{}", rng.below(3)),
                format!("v{}", rng.below(100)),
            ]);
            cmd
        }
        14 | 15 => {
            let mut cmd = s(&["XDEL", &key]);
            for _ in 0..1 + rng.below(2) {
                cmd.push(model.some_id(rng));
            }
            cmd
        }
        16 => s(&["XTRIM", &key, "MAXLEN", "=", &rng.below(6).to_string()]),
        17 => s(&["XTRIM", &key, "MINID", "=", &model.some_id(rng)]),
        18..=21 => {
            let start = match rng.below(4) {
                0 => "$".to_string(),
                1 => "0".to_string(),
                _ => model.some_id(rng),
            };
            let mut cmd = s(&["XGROUP", "CREATE", &key, &group, &start]);
            if rng.below(2) == 0 {
                cmd.push("MKSTREAM".into());
            }
            if rng.below(3) == 0 {
                cmd.extend(s(&["ENTRIESREAD", &rng.below(8).to_string()]));
            }
            cmd
        }
        22 | 23 => {
            let to = match rng.below(3) {
                0 => "$".to_string(),
                _ => model.some_id(rng),
            };
            let mut cmd = s(&["XGROUP", "SETID", &key, &group, &to]);
            if rng.below(2) == 0 {
                cmd.extend(s(&["ENTRIESREAD", &rng.below(8).to_string()]));
            }
            cmd
        }
        24 | 25 => s(&["XGROUP", "CREATECONSUMER", &key, &group, &consumer]),
        26 => s(&["XGROUP", "DELCONSUMER", &key, &group, &consumer]),
        27 => s(&["XGROUP", "DESTROY", &key, &group]),
        28 => {
            // Past the last ID, so later XADDs must go beyond it.
            let ms = model.last.0 + 1;
            model.last = (ms, 5);
            s(&["XSETID", &key, &format!("{ms}-5")])
        }
        29..=38 => {
            let mut cmd = s(&["XREADGROUP", "GROUP", &group, &consumer]);
            cmd.extend(s(&["COUNT", &(1 + rng.below(4)).to_string()]));
            if rng.below(6) == 0 {
                cmd.push("NOACK".into());
            }
            // `>` reads new entries; an ID re-reads the consumer's own
            // pending history (counted as another delivery).
            let from = if rng.below(4) == 0 { "0" } else { ">" };
            if rng.below(4) == 0 {
                cmd.extend(s(&["STREAMS", "k0", "k1", from, from]));
            } else {
                cmd.extend(s(&["STREAMS", &key, from]));
            }
            cmd
        }
        39..=43 => {
            let mut cmd = s(&["XACK", &key, &group]);
            for _ in 0..1 + rng.below(3) {
                cmd.push(model.some_id(rng));
            }
            cmd
        }
        44..=51 => {
            let mut cmd = s(&["XCLAIM", &key, &group, &consumer, "0"]);
            for _ in 0..1 + rng.below(2) {
                cmd.push(model.some_id(rng));
            }
            if rng.below(4) == 0 {
                cmd.extend(s(&["IDLE", &rng.below(100_000).to_string()]));
            } else {
                cmd.extend(s(&[
                    "TIME",
                    &(1_700_000_000_000 + rng.below(100_000)).to_string(),
                ]));
            }
            if rng.below(2) == 0 {
                cmd.extend(s(&["RETRYCOUNT", &rng.below(10).to_string()]));
            }
            if rng.below(2) == 0 {
                cmd.push("FORCE".into());
            }
            if rng.below(3) == 0 {
                cmd.push("JUSTID".into());
            }
            cmd
        }
        52..=58 => {
            let start = match rng.below(2) {
                0 => "0-0".to_string(),
                _ => model.some_id(rng),
            };
            let mut cmd = s(&["XAUTOCLAIM", &key, &group, &consumer, "0", &start]);
            cmd.extend(s(&["COUNT", &(1 + rng.below(4)).to_string()]));
            if rng.below(3) == 0 {
                cmd.push("JUSTID".into());
            }
            cmd
        }
        59 => s(&["DEL", &key]),
        _ => s(&["XLEN", &key]),
    }
}

fn random_history(seed: u64, len: usize, via_rewrite: bool) -> Vec<Vec<String>> {
    let mut rng = Rng::with_seed(seed);
    let mut models = [StreamModel::new(), StreamModel::new()];
    let mut ops: Vec<Vec<String>> = (0..len)
        .map(|_| random_stream_command(&mut rng, &mut models))
        .collect();
    if via_rewrite {
        // Mostly late, so the rewrite sees a built-up state; what follows
        // is logged on top of it.
        let at = len - rng.below(len as u64 / 4 + 1) as usize;
        ops.insert(at, REWRITE.iter().map(|s| s.to_string()).collect());
    }
    ops
}

fn engine_config(dir: &Path, appendonly: bool) -> Config {
    let mut config = Config::in_memory();
    config.appendonly = appendonly;
    config.appendfsync = AppendFsync::No;
    config.dir = dir.to_path_buf();
    config
}

fn engine_state(engine: &mut Engine) -> V {
    let mut session = engine.new_session();
    let mut call = |args: &[&str]| {
        let argv: Vec<&[u8]> = args.iter().map(|a| a.as_bytes()).collect();
        from_reply(engine.execute(&mut session, &argv))
    };
    V::Array(
        STREAM_KEYS
            .iter()
            .map(|key| stream_state(&mut call, key))
            .collect(),
    )
}

/// A temporary directory, on tmpfs when there is one: the property is
/// about what is logged and replayed, not about the medium, and the rewrite
/// step fsyncs a file and a directory on every run (slow on real disks).
fn fast_temp_dir() -> tempfile::TempDir {
    let shm = Path::new("/dev/shm");
    if shm.is_dir() {
        if let Ok(dir) = tempfile::tempdir_in(shm) {
            return dir;
        }
    }
    tempfile::tempdir().expect("temp dir")
}

/// Runs `ops` on an engine in a fresh directory (AOF on from the start, or
/// switched on by the `REWRITE` step), reopens it, and compares the state.
/// `Err` carries the history with each reply and the first difference.
fn replay_check(ops: &[Vec<String>], via_rewrite: bool) -> Result<(), String> {
    let dir = fast_temp_dir();
    let mut log = String::new();
    let before = {
        let mut engine = Engine::open(engine_config(dir.path(), !via_rewrite))
            .map_err(|e| format!("open: {e}"))?;
        let mut session = engine.new_session();
        for op in ops {
            let argv: Vec<&[u8]> = op.iter().map(|a| a.as_bytes()).collect();
            let reply = from_reply(engine.execute(&mut session, &argv));
            log.push_str(&format!("{}  -> {reply:?}\n", op.join(" ")));
            if op[..] == REWRITE[..] {
                if reply != ok() {
                    return Err(format!("{log}CONFIG SET appendonly yes failed"));
                }
                // The switch-on is a background rewrite: run it to its end.
                while engine.rewrite_in_progress() {
                    engine.background_step(
                        std::time::Duration::from_millis(5),
                        hozon::engine::now_ms(),
                    );
                    std::thread::sleep(std::time::Duration::from_micros(100));
                }
                if !engine.rewrite_last_ok() {
                    return Err(format!(
                        "{log}the rewrite of CONFIG SET appendonly yes failed"
                    ));
                }
            }
        }
        engine_state(&mut engine)
    };
    let mut reopened = Engine::open(engine_config(dir.path(), true))
        .map_err(|e| format!("{log}reopening (replaying the AOF) failed: {e}"))?;
    let after = engine_state(&mut reopened);
    if before != after {
        return Err(format!(
            "{log}state after replay differs: {}",
            first_difference(&before, &after)
        ));
    }
    Ok(())
}

/// Greedy minimisation of a failing history (drops chunks, then single
/// commands, while it still fails; never drops the REWRITE step).
fn minimise(mut ops: Vec<Vec<String>>, via_rewrite: bool) -> (Vec<Vec<String>>, String) {
    let mut failure = match replay_check(&ops, via_rewrite) {
        Err(e) => e,
        Ok(()) => return (ops, "did not fail again".into()),
    };
    let mut chunk = ops.len() / 2;
    let mut attempts = 0;
    while chunk >= 1 && attempts < 400 {
        let mut i = 0;
        while i + chunk <= ops.len() && attempts < 400 {
            if ops[i..i + chunk].iter().any(|op| op[..] == REWRITE[..]) {
                i += chunk;
                continue;
            }
            let mut fewer = ops.clone();
            fewer.drain(i..i + chunk);
            attempts += 1;
            match replay_check(&fewer, via_rewrite) {
                Err(e) => {
                    ops = fewer;
                    failure = e;
                }
                Ok(()) => i += chunk,
            }
        }
        chunk /= 2;
    }
    (ops, failure)
}

/// A history's seed. Not shrunk by QuickCheck: a neighbouring seed is an
/// unrelated history, and `minimise` already shrinks the failing one.
#[derive(Clone, Debug)]
struct Seed(u64);

impl Arbitrary for Seed {
    fn arbitrary(g: &mut Gen) -> Seed {
        Seed(u64::arbitrary(g))
    }
}

fn history_replays(Seed(seed): Seed, via_rewrite: bool) -> TestResult {
    let ops = random_history(seed, 120, via_rewrite);
    match replay_check(&ops, via_rewrite) {
        Ok(()) => TestResult::passed(),
        Err(_) => {
            let (small, failure) = minimise(ops, via_rewrite);
            TestResult::error(format!(
                "seed {seed} (via rewrite: {via_rewrite}), minimised to {} commands:\n{failure}",
                small.len()
            ))
        }
    }
}

#[test]
fn random_stream_group_histories_replay_to_identical_xinfo_full() {
    crate::harness::seeded_quickcheck(100, 60)
        .quickcheck((|seed| history_replays(seed, false)) as fn(Seed) -> TestResult);
}

#[test]
fn random_stream_group_histories_survive_the_rewrite() {
    crate::harness::seeded_quickcheck(100, 60)
        .quickcheck((|seed| history_replays(seed, true)) as fn(Seed) -> TestResult);
}

/// A history the rewrite once got wrong (seed 365028167620388456,
/// minimised): an exact XTRIM leaves a node holding only a deleted entry;
/// Redis keeps the node (XINFO's radix-tree-keys counts it), and so must
/// the snapshot the rewrite writes.
#[test]
fn a_node_of_deleted_entries_survives_the_rewrite() {
    let ops: Vec<Vec<String>> = [
        "XADD k1 4-0 f1 v1",
        "XADD k1 5-* f0 v2",
        "XDEL k1 5-0",
        "XTRIM k1 MINID = 5-0",
        "CONFIG SET appendonly yes",
    ]
    .iter()
    .map(|line| line.split(' ').map(str::to_string).collect())
    .collect();
    if let Err(failure) = replay_check(&ops, true) {
        panic!("{failure}");
    }
}

/// The smallest known history the rewrite gets wrong, kept as a fixed
/// case: a pending entry whose stream entry was trimmed (XTRIM does not
/// count as a deletion, so max-deleted-entry-id stays 0-0). Everything the
/// PEL says must come back, and the stream's counters must not move.
#[test]
fn a_trimmed_pending_entry_survives_the_rewrite_exactly() {
    let ops: Vec<Vec<String>> = [
        "XADD k0 1-0 f v1",
        "XADD k0 2-0 f v2",
        "XGROUP CREATE k0 g0 0",
        "XREADGROUP GROUP g0 c0 COUNT 10 STREAMS k0 >",
        "XTRIM k0 MAXLEN = 1",
        "CONFIG SET appendonly yes",
    ]
    .iter()
    .map(|line| line.split(' ').map(str::to_string).collect())
    .collect();
    if let Err(failure) = replay_check(&ops, true) {
        panic!("{failure}");
    }
}
