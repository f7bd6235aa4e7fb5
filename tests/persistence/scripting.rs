//! Lua scripts against a real server process: real client libraries
//! (redis-py's `Lock`, ioredis's `defineCommand`) driven as child programs,
//! scripts' atomicity across SIGKILL and torn AOF tails (the AOF holds a
//! script's effects as one MULTI/EXEC block), and deterministic replay of
//! scripts that use randomness.
//!
//! The client programs live in tests/clients/ and need their pinned
//! dependencies installed (scripts/test does it): a venv in
//! target/pyclients and tests/clients/node/node_modules.
//!
//! `HOZON_SCRIPTING_SERVER=redis` runs the same tests against the real
//! redis-server, to check the tests' expectations themselves.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use hozon::rand::Rng;
use hozon::resp::reply_frame::frame_len;

use crate::crash::parse_int;
use crate::harness::{encode_command, show, start_hozon, start_redis, Conn, ServerProcess};
use crate::interop::dump;
use testkit::clients::{node_client_dir, python_with_redis_py, repo_root, run_client};

fn against_redis() -> bool {
    std::env::var("HOZON_SCRIPTING_SERVER").is_ok_and(|v| v == "redis")
}

/// Starts the server under test (hozon unless `HOZON_SCRIPTING_SERVER=redis`).
fn start(args: &[&str]) -> ServerProcess {
    if against_redis() {
        start_redis(args)
    } else {
        start_hozon(args)
    }
}

fn kill_9(server: ServerProcess) {
    let pid = server.pid();
    let status = Command::new("kill")
        .args(["-9", &pid.to_string()])
        .status()
        .expect("run kill");
    assert!(status.success(), "kill -9 {pid} failed");
    drop(server);
}

fn last_line(output: &str) -> &str {
    output.lines().last().unwrap_or("")
}

#[test]
fn redis_py_lock_acquires_extends_expires_and_refuses_non_owners() {
    let python = python_with_redis_py();
    let server = start(&[]);
    let mut command = Command::new(python);
    command
        .arg(repo_root().join("tests/clients/python/lock_client.py"))
        .args([&server.port.to_string(), "basic"]);
    let output = run_client(command, "lock_client.py basic", Duration::from_secs(60));
    eprintln!("redis-py Lock: {}", last_line(&output));
}

#[test]
fn redis_py_lock_keeps_contending_processes_mutually_exclusive() {
    let python = python_with_redis_py();
    let server = start(&[]);
    let mut command = Command::new(python);
    command
        .arg(repo_root().join("tests/clients/python/lock_client.py"))
        .args([&server.port.to_string(), "contend", "4", "3"]);
    let output = run_client(command, "lock_client.py contend", Duration::from_secs(60));
    // {"processes": 4, "sections": N, "per_process": [...], ...}
    eprintln!("redis-py Lock contention: {}", last_line(&output));
}

#[test]
fn ioredis_define_command_falls_back_to_eval_after_script_flush() {
    let dir = node_client_dir();
    let server = start(&[]);
    let mut command = Command::new("node");
    command
        .current_dir(&dir)
        .arg(dir.join("scripts_client.js"))
        .arg(server.port.to_string());
    let output = run_client(command, "node scripts_client.js", Duration::from_secs(60));
    eprintln!("ioredis: {}", last_line(&output));
}

// ---------------------------------------------------------------------------
// A connection whose failures are values: the server may die mid-request.

struct RawConn {
    stream: TcpStream,
    buf: Vec<u8>,
}

impl RawConn {
    fn connect(port: u16) -> std::io::Result<RawConn> {
        let stream = TcpStream::connect(("127.0.0.1", port))?;
        stream.set_read_timeout(Some(Duration::from_secs(20)))?;
        stream.set_nodelay(true)?;
        Ok(RawConn {
            stream,
            buf: Vec::new(),
        })
    }

    fn call(&mut self, args: &[&[u8]]) -> std::io::Result<Vec<u8>> {
        self.stream.write_all(&encode_command(args))?;
        let mut chunk = [0u8; 16384];
        loop {
            match frame_len(&self.buf) {
                Ok(Some(n)) => return Ok(self.buf.drain(..n).collect()),
                Ok(None) => {}
                Err(e) => return Err(std::io::Error::other(format!("malformed reply: {e}"))),
            }
            let n = self.stream.read(&mut chunk)?;
            if n == 0 {
                return Err(std::io::ErrorKind::UnexpectedEof.into());
            }
            self.buf.extend_from_slice(&chunk[..n]);
        }
    }
}

// ---------------------------------------------------------------------------
// Crash atomicity: every call of this script is all or nothing after a
// SIGKILL and a restart from the AOF.

/// KEYS: a, b, l, h, s, the client's pad key; ARGV: client name, padding.
/// Returns how many calls this client has made (its field in h).
const COUNTING_SCRIPT: &str = "\
local a = redis.call('INCR', KEYS[1])
local b = redis.call('INCR', KEYS[2])
redis.call('RPUSH', KEYS[3], a)
local mine = redis.call('HINCRBY', KEYS[4], ARGV[1], 1)
redis.call('HSET', KEYS[4], 'last', a)
redis.call('SADD', KEYS[5], ARGV[1] .. ':' .. mine)
redis.call('SET', KEYS[6], ARGV[2] .. mine)
return mine
";

const CLIENTS: usize = 4;

/// Makes each script's AOF block a few hundred bytes, so a kill or a cut
/// is likely to land inside one.
fn padding() -> String {
    "p".repeat(200)
}

fn client_name(c: usize) -> String {
    format!("c{c}")
}

fn pad_key(c: usize) -> String {
    format!("pad:c{c}")
}

/// One call of the counting script for client `c`, as EVALSHA (even
/// clients) or EVAL (odd ones).
fn counting_call(conn: &mut RawConn, sha: &str, c: usize) -> std::io::Result<Vec<u8>> {
    let name = client_name(c);
    let pad = pad_key(c);
    let padding = padding();
    let (command, body): (&[u8], &[u8]) = if c.is_multiple_of(2) {
        (b"EVALSHA", sha.as_bytes())
    } else {
        (b"EVAL", COUNTING_SCRIPT.as_bytes())
    };
    conn.call(&[
        command,
        body,
        b"6",
        b"a",
        b"b",
        b"l",
        b"h",
        b"s",
        pad.as_bytes(),
        name.as_bytes(),
        padding.as_bytes(),
    ])
}

/// An integer reply, a bulk holding one, or 0 for a null bulk.
fn int_or_zero(reply: &[u8]) -> i64 {
    if reply == b"$-1\r\n" {
        0
    } else {
        parse_int(reply)
    }
}

fn bulk(value: &[u8]) -> Vec<u8> {
    let mut out = format!("${}\r\n", value.len()).into_bytes();
    out.extend_from_slice(value);
    out.extend_from_slice(b"\r\n");
    out
}

/// Checks that the keys written by the counting script agree with each
/// other (no script applied in part); returns each client's call count.
fn check_counting_keys(port: u16, context: &str) -> Vec<i64> {
    let mut conn = Conn::connect(port);
    let a = int_or_zero(&conn.call(&[b"GET", b"a"]));
    let b = int_or_zero(&conn.call(&[b"GET", b"b"]));
    assert_eq!(a, b, "{context}: a and b differ: a partial script");
    let list = conn.call(&[b"LRANGE", b"l", b"0", b"-1"]);
    let mut want = format!("*{a}\r\n").into_bytes();
    for i in 1..=a {
        want.extend(bulk(i.to_string().as_bytes()));
    }
    assert!(
        list == want,
        "{context}: l is not 1..={a}: {}",
        show(&list[..list.len().min(400)])
    );
    let last = int_or_zero(&conn.call(&[b"HGET", b"h", b"last"]));
    assert_eq!(last, a, "{context}: h.last {last} != a {a}");
    let scard = parse_int(&conn.call(&[b"SCARD", b"s"]));
    assert_eq!(scard, a, "{context}: SCARD s {scard} != a {a}");
    let mut counts = Vec::new();
    for c in 0..CLIENTS {
        let name = client_name(c);
        let mine = int_or_zero(&conn.call(&[b"HGET", b"h", name.as_bytes()]));
        let latest = format!("{name}:{mine}");
        let next = format!("{name}:{}", mine + 1);
        if mine > 0 {
            let has = parse_int(&conn.call(&[b"SISMEMBER", b"s", latest.as_bytes()]));
            assert_eq!(has, 1, "{context}: s lacks {latest}");
        }
        let has_next = parse_int(&conn.call(&[b"SISMEMBER", b"s", next.as_bytes()]));
        assert_eq!(
            has_next, 0,
            "{context}: s has {next} beyond h.{name} = {mine}"
        );
        let pad = conn.call(&[b"GET", pad_key(c).as_bytes()]);
        let want_pad = if mine > 0 {
            bulk(format!("{}{mine}", padding()).as_bytes())
        } else {
            b"$-1\r\n".to_vec()
        };
        assert!(
            pad == want_pad,
            "{context}: {} does not match h.{name} = {mine}: {}",
            pad_key(c),
            show(&pad)
        );
        counts.push(mine);
    }
    let sum: i64 = counts.iter().sum();
    assert_eq!(
        sum, a,
        "{context}: the clients' counts {counts:?} do not add up to a = {a}"
    );
    counts
}

fn load_script(port: u16, body: &str) -> String {
    let mut conn = Conn::connect(port);
    let reply = conn.call(&[b"SCRIPT", b"LOAD", body.as_bytes()]);
    let text = String::from_utf8_lossy(&reply).into_owned();
    let sha = text.lines().nth(1).unwrap_or("").to_string();
    assert!(
        text.starts_with("$40\r\n") && sha.len() == 40,
        "SCRIPT LOAD answered {text:?}"
    );
    sha
}

/// `rounds` cycles of: restart, check, run the counting script from
/// CLIENTS connections, SIGKILL at a random moment. Returns the largest
/// number of acknowledged calls missing after a restart.
fn counting_crash_rounds(policy: &str, seed: u64, rounds: usize) -> i64 {
    let dir = tempfile::tempdir().expect("temp dir");
    let dir_arg = dir.path().to_string_lossy().into_owned();
    let args = [
        "--appendonly",
        "yes",
        "--appendfsync",
        policy,
        "--dir",
        &dir_arg,
    ];
    let mut rng = Rng::with_seed(seed);
    // The last count each client saw acknowledged, across rounds.
    let acked = Arc::new(Mutex::new(vec![0i64; CLIENTS]));
    let mut worst_loss = 0;
    let mut total_calls = 0;
    for round in 0..rounds {
        let server = start(&args);
        let context = format!("{policy} round {round}");
        let counts = check_counting_keys(server.port, &context);
        {
            let mut acked = acked.lock().expect("acked lock");
            for c in 0..CLIENTS {
                worst_loss = worst_loss.max(acked[c] - counts[c]);
                // At most the one call in flight at the kill is extra.
                assert!(
                    counts[c] <= acked[c] + 1,
                    "{context}: client {c} made {} calls, {} acknowledged",
                    counts[c],
                    acked[c]
                );
                acked[c] = counts[c];
            }
            total_calls = counts.iter().sum::<i64>();
        }
        // The script cache does not survive a restart.
        let sha = load_script(server.port, COUNTING_SCRIPT);
        let stop = Arc::new(AtomicBool::new(false));
        let mut threads = Vec::new();
        for c in 0..CLIENTS {
            let port = server.port;
            let stop = Arc::clone(&stop);
            let acked = Arc::clone(&acked);
            let sha = sha.clone();
            threads.push(std::thread::spawn(move || -> Result<(), String> {
                let Ok(mut conn) = RawConn::connect(port) else {
                    return Ok(()); // killed before this client connected
                };
                while !stop.load(Ordering::SeqCst) {
                    let Ok(reply) = counting_call(&mut conn, &sha, c) else {
                        return Ok(()); // the server was killed mid-call
                    };
                    if reply.first() != Some(&b':') {
                        return Err(format!("client {c}: script answered {}", show(&reply)));
                    }
                    let mine = parse_int(&reply);
                    let mut acked = acked.lock().expect("acked lock");
                    if mine != acked[c] + 1 {
                        return Err(format!(
                            "client {c}: count {mine} after {} acknowledged",
                            acked[c]
                        ));
                    }
                    acked[c] = mine;
                }
                Ok(())
            }));
        }
        std::thread::sleep(Duration::from_millis(20 + rng.below(150)));
        kill_9(server);
        stop.store(true, Ordering::SeqCst);
        for t in threads {
            if let Err(e) = t.join().expect("client thread panicked") {
                panic!("{context}: {e}");
            }
        }
    }
    // A last restart checks the final kill too.
    let server = start(&args);
    let counts = check_counting_keys(server.port, &format!("{policy} final"));
    let acked = acked.lock().expect("acked lock");
    for c in 0..CLIENTS {
        worst_loss = worst_loss.max(acked[c] - counts[c]);
        assert!(
            counts[c] <= acked[c] + 1,
            "final: client {c} has extra calls"
        );
    }
    eprintln!(
        "{policy}: {rounds} kills, {} script calls survived (before the last round: {total_calls}), \
         worst acknowledged-but-lost: {worst_loss}",
        counts.iter().sum::<i64>()
    );
    worst_loss
}

#[test]
fn sigkill_never_leaves_part_of_a_script_and_loses_nothing_acknowledged_under_always() {
    let loss = counting_crash_rounds("always", 11, 8);
    assert_eq!(
        loss, 0,
        "acknowledged script calls lost under appendfsync always"
    );
}

#[test]
fn sigkill_never_leaves_part_of_a_script_under_everysec() {
    let loss = counting_crash_rounds("everysec", 12, 8);
    // kill -9 keeps what write(2) handed to the kernel; hozon writes the AOF
    // before it replies. (Redis may postpone an everysec write while an
    // fsync is slow, so this is only asserted for hozon.)
    if !against_redis() {
        assert_eq!(loss, 0, "acknowledged script calls lost under everysec");
    }
}

/// Every file under `dir` (recursively).
fn files_under(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut pending = vec![dir.to_path_buf()];
    while let Some(d) = pending.pop() {
        for entry in std::fs::read_dir(&d).expect("read a data dir") {
            let path = entry.expect("dir entry").path();
            if path.is_dir() {
                pending.push(path);
            } else {
                out.push(path);
            }
        }
    }
    out
}

/// The AOF file the server appended to last: hozon's appendonly.aof, or
/// Redis 7's newest incr file in appendonlydir.
fn appended_aof(dir: &Path) -> PathBuf {
    files_under(dir)
        .into_iter()
        .filter(|p| {
            let name = p.file_name().map(|n| n.to_string_lossy().into_owned());
            name.is_some_and(|n| n.ends_with(".aof") && !n.contains(".base."))
        })
        .max_by_key(|p| {
            let meta = std::fs::metadata(p).expect("AOF metadata");
            (meta.modified().expect("mtime"), meta.len())
        })
        .unwrap_or_else(|| panic!("no AOF file under {}", dir.display()))
}

fn copy_dir(from: &Path, to: &Path) {
    for file in files_under(from) {
        let rel = file.strip_prefix(from).expect("file under the dir");
        let target = to.join(rel);
        if let Some(parent) = target.parent() {
            std::fs::create_dir_all(parent).expect("create a dir in the copy");
        }
        std::fs::copy(&file, &target).expect("copy a data file");
    }
}

#[test]
fn torn_aof_tail_never_replays_part_of_a_script() {
    const CALLS: i64 = 40;
    let dir = tempfile::tempdir().expect("temp dir");
    let dir_arg = dir.path().to_string_lossy().into_owned();
    let server = start(&[
        "--appendonly",
        "yes",
        "--appendfsync",
        "always",
        "--dir",
        &dir_arg,
    ]);
    let sha = load_script(server.port, COUNTING_SCRIPT);
    let mut conn = RawConn::connect(server.port).expect("connect");
    for i in 1..=CALLS {
        let reply = counting_call(&mut conn, &sha, 0).expect("call the script");
        assert_eq!(parse_int(&reply), i, "call {i}: {}", show(&reply));
    }
    drop(conn);
    kill_9(server);
    let aof = appended_aof(dir.path());
    let rel = aof.strip_prefix(dir.path()).expect("AOF under the dir");
    let len = std::fs::metadata(&aof).expect("AOF size").len();
    // One script's block is MULTI, seven commands with a 200-byte value,
    // EXEC: about 450 bytes. Cuts inside the last block and a few more.
    let cuts: Vec<u64> = [
        1, 2, 3, 5, 9, 17, 40, 90, 150, 230, 330, 420, 500, 700, 1000, 1500,
    ]
    .into_iter()
    .filter(|&cut| cut < len)
    .collect();
    let mut survivors = Vec::new();
    for cut in cuts {
        let copy = tempfile::tempdir().expect("temp dir");
        copy_dir(dir.path(), copy.path());
        let file = std::fs::OpenOptions::new()
            .write(true)
            .open(copy.path().join(rel))
            .expect("open the copied AOF");
        file.set_len(len - cut).expect("truncate the AOF");
        drop(file);
        let copy_arg = copy.path().to_string_lossy().into_owned();
        let server = start(&["--appendonly", "yes", "--dir", &copy_arg]);
        let context = format!("AOF cut by {cut} of {len} bytes");
        let counts = check_counting_keys(server.port, &context);
        let survived = counts[0];
        survivors.push((cut, survived));
        // Each block is over 250 bytes: a cut of `cut` bytes can take at
        // most cut / 250 + 1 calls with it.
        let lost_max = cut as i64 / 250 + 1;
        assert!(
            (CALLS - lost_max..=CALLS).contains(&survived),
            "{context}: {survived} of {CALLS} calls survived"
        );
        if against_redis() {
            // Redis 7.0.15 truncates a torn tail after the last whole
            // command, which may leave the torn script's MULTI open in the
            // file; the next script's block then joins that transaction on
            // the following load (a partial script replayed). hozon must
            // not: the reload below is checked for hozon only.
            continue;
        }
        // The server goes on appending after the cut, and a second load
        // sees the survivors plus the new call, nothing of the torn one.
        let mut conn = RawConn::connect(server.port).expect("connect");
        let reply = counting_call(&mut conn, &sha, 1).expect("call after the cut");
        assert_eq!(parse_int(&reply), 1, "{context}: {}", show(&reply));
        drop(conn);
        kill_9(server);
        let server = start(&["--appendonly", "yes", "--dir", &copy_arg]);
        let counts = check_counting_keys(server.port, &format!("{context}, reloaded"));
        assert_eq!(counts[..2], [survived, 1], "{context}: after reloading");
    }
    eprintln!("torn AOF tail: (bytes cut, calls of {CALLS} kept): {survivors:?}");
}

// ---------------------------------------------------------------------------
// Replay determinism: scripts draw random numbers and random members, and
// the AOF replays their effects, not the scripts.

/// KEYS: s (set), picks (list), z (zset), h (hash), t (set), r (string),
/// big (a set beyond the listpack/intset limits); ARGV: seed, iteration.
const RANDOM_SCRIPT: &str = "\
local unseeded = math.random(1000000)
math.randomseed(tonumber(ARGV[1]))
local seeded = math.random(1000000)
redis.call('RPUSH', KEYS[2], unseeded, seeded, string.format('%.17g', math.random()))
for i = 1, 3 do
  redis.call('SADD', KEYS[1], 'm' .. math.random(40))
  redis.call('SADD', KEYS[7], math.random(100000), 'x' .. math.random(100000))
end
local m = redis.call('SRANDMEMBER', KEYS[1])
if m then redis.call('HSET', KEYS[4], m, ARGV[2]) end
local popped = redis.call('SPOP', KEYS[1])
if popped then redis.call('ZADD', KEYS[3], math.random(1000), popped) end
for _, x in ipairs(redis.call('SPOP', KEYS[1], 2)) do redis.call('SADD', KEYS[5], x) end
for _, x in ipairs(redis.call('SPOP', KEYS[7], 3)) do redis.call('RPUSH', KEYS[2], x) end
local some = redis.call('SRANDMEMBER', KEYS[5], -3)
if #some > 0 then redis.call('RPUSH', KEYS[2], unpack(some)) end
local moved = redis.call('SRANDMEMBER', KEYS[7])
if moved then redis.call('SMOVE', KEYS[7], KEYS[5], moved) end
local f = redis.call('HRANDFIELD', KEYS[4])
if f and f ~= 'time' then redis.call('HINCRBY', KEYS[4], f, math.random(9)) end
local zm = redis.call('ZRANDMEMBER', KEYS[3])
if zm then redis.call('ZINCRBY', KEYS[3], math.random(), zm) end
redis.call('SET', KEYS[6], seeded, 'PX', 100000 + math.random(1000000))
redis.call('PEXPIRE', KEYS[4], 500000 + math.random(100000))
local t = redis.call('TIME')
redis.call('HSET', KEYS[4], 'time', t[1] .. '.' .. t[2])
local k = redis.call('RANDOMKEY')
if k then redis.call('RPUSH', KEYS[2], k) end
return seeded
";

/// Switches database inside the script: the AOF must carry the SELECTs.
const OTHER_DB_SCRIPT: &str = "\
redis.call('SELECT', ARGV[1])
redis.call('SADD', KEYS[1], math.random(50), math.random(50))
local x = redis.call('SPOP', KEYS[1])
redis.call('SET', KEYS[2], x, 'EX', 1000 + math.random(1000))
redis.call('INCRBYFLOAT', KEYS[3], math.random())
return x
";

fn run_random_scripts(port: u16, from: usize, to: usize) {
    let sha = load_script(port, RANDOM_SCRIPT);
    let other_sha = load_script(port, OTHER_DB_SCRIPT);
    let mut conns = [Conn::connect(port), Conn::connect(port)];
    let mut seeds = Rng::with_seed(from as u64);
    for i in from..to {
        let conn = &mut conns[i % 2];
        let seed = (seeds.below(1 << 30)).to_string();
        let iteration = i.to_string();
        let keys: [&[u8]; 7] = [b"s", b"picks", b"z", b"h", b"t", b"r", b"big"];
        let mut args: Vec<&[u8]> = vec![b"EVALSHA", sha.as_bytes(), b"7"];
        args.extend(keys);
        args.extend([seed.as_bytes(), iteration.as_bytes()]);
        let reply = conn.call(&args);
        assert_eq!(reply.first(), Some(&b':'), "call {i}: {}", show(&reply));
        if i.is_multiple_of(5) {
            let db = (1 + i % 3).to_string();
            let reply = conn.call(&[
                b"EVALSHA",
                other_sha.as_bytes(),
                b"3",
                b"os",
                b"ox",
                b"of",
                db.as_bytes(),
            ]);
            assert!(
                reply.starts_with(b"$"),
                "other-db call {i}: {}",
                show(&reply)
            );
        }
    }
}

fn info_field(port: u16, section: &str, name: &str) -> String {
    let mut conn = Conn::connect(port);
    let reply = conn.call(&[b"INFO", section.as_bytes()]);
    let text = String::from_utf8_lossy(&reply).into_owned();
    let prefix = format!("{name}:");
    text.lines()
        .find_map(|line| line.strip_prefix(&prefix))
        .unwrap_or_else(|| panic!("INFO {section} has no {name}: {text}"))
        .trim()
        .to_string()
}

#[test]
fn scripts_with_randomness_replay_identically_from_the_aof() {
    let dir = tempfile::tempdir().expect("temp dir");
    let dir_arg = dir.path().to_string_lossy().into_owned();
    let args = [
        "--appendonly",
        "yes",
        "--appendfsync",
        "always",
        "--dir",
        &dir_arg,
    ];
    let server = start(&args);
    run_random_scripts(server.port, 0, 300);
    let before = dump(server.port);
    assert!(
        before.len() >= 10,
        "the scripts wrote too little: {before:?}"
    );
    kill_9(server);

    let server = start(&args);
    let after = dump(server.port);
    assert!(
        after == before,
        "the dataset replayed from the AOF differs from the one before the kill"
    );

    // Again across an AOF rewrite, with scripts before and after it.
    run_random_scripts(server.port, 300, 450);
    let mut conn = Conn::connect(server.port);
    let reply = conn.call(&[b"BGREWRITEAOF"]);
    assert!(reply.starts_with(b"+"), "BGREWRITEAOF: {}", show(&reply));
    run_random_scripts(server.port, 450, 550);
    let deadline = Instant::now() + Duration::from_secs(20);
    while info_field(server.port, "persistence", "aof_rewrite_in_progress") != "0"
        || info_field(server.port, "persistence", "aof_rewrite_scheduled") != "0"
    {
        assert!(Instant::now() < deadline, "the AOF rewrite did not finish");
        std::thread::sleep(Duration::from_millis(10));
    }
    run_random_scripts(server.port, 550, 600);
    let before = dump(server.port);
    kill_9(server);
    let server = start(&args);
    let after = dump(server.port);
    assert!(
        after == before,
        "the dataset replayed from the rewritten AOF differs from the one before the kill"
    );
}
