//! Soak test with faults: a mixed workload over every type with many
//! clients, background saves and rewrites, SIGKILL and restart, checked
//! against a model of the acknowledged writes.
//!
//! Each client owns its keys (in its own database) and keeps an exact
//! model of them: every command's reply is checked against the model while
//! the server runs, and after every restart the whole keyspace must equal
//! the models (no key missing, none extra). A unit (one command, or a
//! MULTI/EXEC block) whose reply had not arrived when the server was killed
//! is in doubt: the state must equal the model either with or without it.
//! A SIGKILL loses nothing acknowledged under any fsync policy (the reply
//! leaves after `write(2)`; docs/persistence.md), so any other state is a
//! loss and fails the test; the report says how many units were lost and
//! under which policy.
//!
//! Faults, at random moments: BGSAVE, BGREWRITEAOF, `CONFIG SET
//! appendfsync` (in the mixed-policy run), a full disk (the data directory
//! is a small tmpfs that gets filled and then freed again), and the kill
//! itself (a quarter of the kills right after a BGREWRITEAOF).
//!
//! Scale: `HOZON_SOAK_ROUNDS` (default 10 per test), or `HOZON_SOAK_SECS`
//! for a run of at least that long; `HOZON_SOAK_CLIENTS` (8),
//! `HOZON_SOAK_BULK` (2000 static keys that make rewrites and saves take
//! some time), `HOZON_SOAK_SEED`, `HOZON_SOAK_TMPFS=0` to run on the
//! ordinary temp directory, `HOZON_SOAK_SERVER` for another server binary,
//! `HOZON_SOAK_TIMEOUT_SECS` (60) before a silent server counts as hung.
//! See docs/soak.md.

mod enospc;
mod model;
mod resp;

use std::collections::{BTreeSet, VecDeque};
use std::io::Write as _;
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicU8, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use hozon::rand::Rng;

use model::{apply, parse_stream_id, stream_id, Entry, Group, Model, Stream, Val};
use resp::{cmd, Client, V};

const ENOSPC: i32 = 28;
const POLICIES: [&str; 3] = ["always", "everysec", "no"];
/// Databases the clients are spread over (client `c` uses `c % DBS`).
const DBS: usize = 4;
/// Acknowledged states kept per client to measure a loss.
const HISTORY: usize = 32;

fn env_u64(name: &str) -> Option<u64> {
    std::env::var(name).ok().and_then(|v| v.parse().ok())
}

/// How long a reply (or a start) may take before the server counts as
/// hung: `HOZON_SOAK_TIMEOUT_SECS`, default 60 (a run at `nice -n 19` on a
/// busy machine may need more).
fn reply_timeout() -> Duration {
    Duration::from_secs(env_u64("HOZON_SOAK_TIMEOUT_SECS").unwrap_or(60))
}

fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .expect("clock")
        .as_millis() as i64
}

// ---------------------------------------------------------------------------
// The server process and its data directory.

/// A hozon-server process; SIGKILLed when dropped.
struct Server {
    child: Child,
    port: u16,
}

impl Server {
    /// Starts hozon-server on `dir` and waits until it has loaded its data.
    fn start(dir: &Path, log: &Path, args: &[String]) -> Server {
        for _attempt in 0..5 {
            let port = TcpListener::bind("127.0.0.1:0")
                .and_then(|l| l.local_addr())
                .expect("free port")
                .port();
            let logfile = std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(log)
                .expect("server log");
            let mut child = Command::new(server_binary())
                .args(["--port", &port.to_string(), "--bind", "127.0.0.1"])
                .args(["--dir", &dir.to_string_lossy()])
                .args(args)
                .stdout(logfile.try_clone().expect("log"))
                .stderr(logfile)
                .spawn()
                .expect("spawn hozon-server");
            let deadline = Instant::now() + reply_timeout();
            loop {
                if let Ok(Some(status)) = child.try_wait() {
                    if status.code() == Some(1) && port_taken(port) {
                        break; // the port was taken meanwhile: retry
                    }
                    panic!("hozon-server exited during startup ({status}); log: {log:?}");
                }
                if let Ok(mut c) = Client::connect(port, Duration::from_secs(5)) {
                    match c.call(&[b"PING"]) {
                        Ok(V::Err(e)) if e.starts_with("LOADING") => {}
                        Ok(_) => return Server { child, port },
                        Err(_) => {}
                    }
                }
                assert!(
                    Instant::now() < deadline,
                    "hozon-server did not become ready on port {port}; log: {log:?}"
                );
                std::thread::sleep(Duration::from_millis(5));
            }
        }
        panic!("could not start hozon-server");
    }

    /// What a hung or failing server was doing: every thread's stack (when
    /// gdb is installed) and the end of its log.
    fn diagnose(&self, log: &Path) -> String {
        let stacks = Command::new("gdb")
            .args(["-p", &self.child.id().to_string(), "-batch", "-ex"])
            .arg("thread apply all bt")
            .stdin(Stdio::null())
            .output()
            .map(|o| String::from_utf8_lossy(&o.stdout).into_owned())
            .unwrap_or_else(|e| format!("(no gdb: {e})"));
        let text = std::fs::read_to_string(log).unwrap_or_default();
        let tail: Vec<&str> = text.lines().rev().take(40).collect();
        format!(
            "server threads:\n{stacks}\nserver log (last lines, newest first):\n{}",
            tail.join("\n")
        )
    }

    /// A command on the control connection; a failure (a server that does
    /// not answer in time) panics with what the server was doing.
    fn must(&self, ctl: &mut Client, log: &Path, args: &[&[u8]]) -> V {
        match ctl.call(args) {
            Ok(v) => v,
            Err(e) => panic!(
                "{:?}: {e}\n{}",
                args.iter()
                    .map(|a| String::from_utf8_lossy(a).into_owned())
                    .collect::<Vec<_>>(),
                self.diagnose(log)
            ),
        }
    }

    /// SIGKILL, then reap.
    fn kill(mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The server binary: this build's, or `HOZON_SOAK_SERVER` (a copy, so a
/// long run is not disturbed by rebuilds of the shared target directory).
fn server_binary() -> String {
    std::env::var("HOZON_SOAK_SERVER")
        .unwrap_or_else(|_| env!("CARGO_BIN_EXE_hozon-server").to_string())
}

fn port_taken(port: u16) -> bool {
    TcpListener::bind(("127.0.0.1", port)).is_err()
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The data directory: a small tmpfs when one can be mounted (so the disk
/// can be filled), else a plain temp directory. Unmounted when dropped.
struct DataDir {
    dir: tempfile::TempDir,
    tmpfs: bool,
}

impl DataDir {
    fn new(size_mb: u64) -> DataDir {
        let dir = tempfile::tempdir().expect("temp dir");
        if std::env::var("HOZON_SOAK_TMPFS").as_deref() == Ok("0") {
            return DataDir { dir, tmpfs: false };
        }
        let mounted = Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={size_mb}m"), "tmpfs"])
            .arg(dir.path())
            .stderr(Stdio::null())
            .status()
            .is_ok_and(|s| s.success());
        // A missing precondition fails the test, loudly: a full-disk test
        // that quietly ran without a full disk would prove nothing.
        assert!(
            mounted,
            "could not mount a tmpfs on {:?} (needs root, or mount permission): the full-disk \
             faults need one. Run as root (CI does), or set HOZON_SOAK_TMPFS=0 to run without \
             the full-disk faults on purpose",
            dir.path()
        );
        DataDir {
            dir,
            tmpfs: mounted,
        }
    }

    fn path(&self) -> &Path {
        self.dir.path()
    }

    fn filler(&self) -> PathBuf {
        self.path().join("zz-filler")
    }

    /// Fills the file system to the last page; returns the bytes written.
    fn fill(&self) -> u64 {
        let mut f = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(self.filler())
            .expect("create the filler");
        let mut total = 0;
        for chunk in [1 << 16, 4096, 512, 1] {
            let buf = vec![0x5au8; chunk];
            loop {
                match f.write(&buf) {
                    Ok(0) => break,
                    Ok(n) => total += n as u64,
                    Err(e) if e.raw_os_error() == Some(ENOSPC) => break,
                    Err(e) => panic!("filling the tmpfs: {e}"),
                }
            }
        }
        total
    }

    fn unfill(&self) {
        match std::fs::remove_file(self.filler()) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => panic!("removing the filler: {e}"),
        }
    }
}

impl Drop for DataDir {
    fn drop(&mut self) {
        if self.tmpfs {
            let ok = Command::new("umount")
                .arg(self.dir.path())
                .status()
                .is_ok_and(|s| s.success());
            if !ok {
                let _ = Command::new("umount")
                    .arg("-l")
                    .arg(self.dir.path())
                    .status();
            }
        }
    }
}

// ---------------------------------------------------------------------------
// Clients.

/// Counters of one client (summed over clients for the report).
#[derive(Default, Clone, Debug)]
struct Stats {
    units: u64,
    commands: u64,
    multi: u64,
    refused_aof: u64,
    refused_save: u64,
    in_doubt_applied: u64,
    in_doubt_absent: u64,
    acked_by_policy: [u64; 3],
}

impl Stats {
    fn add(&mut self, o: &Stats) {
        self.units += o.units;
        self.commands += o.commands;
        self.multi += o.multi;
        self.refused_aof += o.refused_aof;
        self.refused_save += o.refused_save;
        self.in_doubt_applied += o.in_doubt_applied;
        self.in_doubt_absent += o.in_doubt_absent;
        for i in 0..3 {
            self.acked_by_policy[i] += o.acked_by_policy[i];
        }
    }
}

/// One client: its keys, the model of its acknowledged writes and the
/// unit in flight.
struct ClientState {
    id: usize,
    db: usize,
    model: Model,
    /// The model with the unit whose reply had not arrived (in doubt).
    pending: Option<Model>,
    /// Earlier acknowledged states, newest last.
    history: VecDeque<Model>,
    next_seq: u64,
    expire_base: i64,
    rng: Rng,
    stats: Stats,
}

/// What every thread of a round shares.
struct Shared {
    killed: AtomicBool,
    /// Index into POLICIES of the policy in force (as last confirmed).
    policy: AtomicU8,
}

impl ClientState {
    fn key(&self, name: &str) -> Vec<u8> {
        format!("c{}:{name}", self.id).into_bytes()
    }

    /// Every key this client may write.
    fn universe(&self) -> Vec<Vec<u8>> {
        ["s0", "s1", "n", "l", "h", "t", "z", "x"]
            .iter()
            .map(|k| self.key(k))
            .collect()
    }

    fn value(&mut self) -> Vec<u8> {
        let len = if self.rng.below(40) == 0 {
            1 + self.rng.below(3000)
        } else {
            1 + self.rng.below(24)
        };
        (0..len).map(|_| self.rng.below(256) as u8).collect()
    }

    fn pick(&mut self, prefix: &str, n: u64) -> Vec<u8> {
        format!("{prefix}{}", self.rng.below(n)).into_bytes()
    }

    /// One command, valid against `m`.
    fn gen_op(&mut self, m: &Model) -> Vec<Vec<u8>> {
        let r = self.rng.below(100);
        let which = if self.rng.below(2) == 0 { "s0" } else { "s1" };
        let s = self.key(which);
        let (l, h, t, z, x) = (
            self.key("l"),
            self.key("h"),
            self.key("t"),
            self.key("z"),
            self.key("x"),
        );
        let stream = match m.get(&x).map(|e| &e.val) {
            Some(Val::Stream(st)) => Some(st.clone()),
            _ => None,
        };
        let list_len = match m.get(&l).map(|e| &e.val) {
            Some(Val::List(v)) => v.len(),
            _ => 0,
        };
        let delta = |rng: &mut Rng| (rng.below(2001) as i64 - 1000).to_string().into_bytes();
        match r {
            0..=7 => vec![b"SET".to_vec(), s, self.value()],
            8..=13 => {
                let big = matches!(m.get(&s).map(|e| &e.val), Some(Val::Str(v)) if v.len() > 65536);
                let verb: &[u8] = if big { b"SET" } else { b"APPEND" };
                vec![verb.to_vec(), s, self.value()]
            }
            14..=19 => vec![b"INCRBY".to_vec(), self.key("n"), delta(&mut self.rng)],
            20..=29 if list_len < 100 => {
                let mut c = vec![b"RPUSH".to_vec(), l, self.value()];
                if self.rng.below(3) == 0 {
                    c.push(self.value());
                }
                c
            }
            20..=36 => vec![b"LPOP".to_vec(), l],
            37..=44 => vec![b"HSET".to_vec(), h, self.pick("f", 8), self.value()],
            45..=48 => {
                let field = if self.rng.below(9) == 8 {
                    b"n".to_vec()
                } else {
                    self.pick("f", 8)
                };
                vec![b"HDEL".to_vec(), h, field]
            }
            49..=52 => vec![b"HINCRBY".to_vec(), h, b"n".to_vec(), delta(&mut self.rng)],
            53..=58 => vec![b"SADD".to_vec(), t, self.pick("m", 16)],
            59..=62 => vec![b"SREM".to_vec(), t, self.pick("m", 16)],
            63..=67 => {
                let score = (self.rng.below(201) as i64 - 100).to_string().into_bytes();
                vec![b"ZADD".to_vec(), z, score, self.pick("m", 16)]
            }
            68..=71 => {
                let d = (self.rng.below(11) as i64 - 5).to_string().into_bytes();
                vec![b"ZINCRBY".to_vec(), z, d, self.pick("m", 16)]
            }
            72..=74 => vec![b"ZREM".to_vec(), z, self.pick("m", 16)],
            83..=87 if stream.as_ref().is_some_and(|st| st.group.is_some()) => {
                let consumer = self.pick("consumer", 2);
                let count = (1 + self.rng.below(3)).to_string().into_bytes();
                cmd(&[
                    b"XREADGROUP",
                    b"GROUP",
                    b"g",
                    &consumer,
                    b"COUNT",
                    &count,
                    b"STREAMS",
                    &x,
                    b">",
                ])
            }
            83..=87 => cmd(&[b"XGROUP", b"CREATE", &x, b"g", b"0", b"MKSTREAM"]),
            88..=90 if stream.as_ref().is_some_and(|st| st.group.is_some()) => {
                let pel: Vec<u64> = stream.unwrap().group.unwrap().pel.into_keys().collect();
                let seq = if !pel.is_empty() && self.rng.below(5) != 0 {
                    pel[self.rng.index(pel.len())]
                } else {
                    1 + self.rng.below(self.next_seq + 1)
                };
                cmd(&[b"XACK", &x, b"g", &stream_id(seq)])
            }
            91..=92 if stream.as_ref().is_some_and(|st| st.entries.len() > 10) => {
                let max = self.rng.below(11).to_string().into_bytes();
                cmd(&[b"XTRIM", &x, b"MAXLEN", &max])
            }
            75..=92 => {
                self.next_seq += 1;
                let field = self.pick("f", 4);
                let value = self.value();
                cmd(&[b"XADD", &x, &stream_id(self.next_seq), &field, &value])
            }
            93..=99 => {
                let keys = self.universe();
                let key = keys[self.rng.index(keys.len())].clone();
                if r <= 95 {
                    let at = (self.expire_base + self.rng.below(1_000_000) as i64)
                        .to_string()
                        .into_bytes();
                    vec![b"PEXPIREAT".to_vec(), key, at]
                } else if r <= 97 {
                    vec![b"PERSIST".to_vec(), key]
                } else {
                    vec![b"DEL".to_vec(), key]
                }
            }
            _ => unreachable!(),
        }
    }

    /// The client's loop for one round, until the kill (an I/O error
    /// before the kill, or a reply the model does not expect, is an error).
    fn run(&mut self, port: u16, shared: &Shared) -> Result<(), String> {
        let id = self.id;
        let fail = |what: String| -> Result<(), String> {
            if shared.killed.load(Ordering::SeqCst) {
                Ok(())
            } else {
                Err(format!(
                    "client {id}: {what} (the server was not being killed)"
                ))
            }
        };
        let mut conn = match Client::connect(port, reply_timeout()) {
            Ok(c) => c,
            Err(e) => return fail(format!("connect: {e}")),
        };
        match conn.call(&[b"SELECT", self.db.to_string().as_bytes()]) {
            Ok(V::Simple(ok)) if ok == "OK" => {}
            Ok(other) => return Err(format!("client {}: SELECT: {other:?}", self.id)),
            Err(e) => return fail(format!("SELECT: {e}")),
        }
        while !shared.killed.load(Ordering::SeqCst) {
            let n = if self.rng.below(8) == 0 {
                2 + self.rng.below(3)
            } else {
                1
            };
            let mut after = self.model.clone();
            let mut unit = Vec::new();
            let mut expected = Vec::new();
            for _ in 0..n {
                let op = self.gen_op(&after);
                expected.push(apply(&mut after, &op));
                unit.push(op);
            }
            let multi = n > 1;
            let mut wire = Vec::new();
            if multi {
                wire.push(cmd(&[b"MULTI"]));
            }
            wire.extend(unit.iter().cloned());
            if multi {
                wire.push(cmd(&[b"EXEC"]));
            }
            // In doubt from the moment it is sent.
            self.pending = Some(after.clone());
            if let Err(e) = conn.send(&wire) {
                return fail(format!("send: {e}"));
            }
            let mut replies = Vec::new();
            for _ in 0..wire.len() {
                match conn.read() {
                    Ok(v) => replies.push(v),
                    Err(e) => return fail(format!("reading a reply: {e}")),
                }
            }
            let result = if multi {
                let exec = replies.pop().expect("EXEC reply");
                let queued_ok = replies[0] == V::Simple("OK".into())
                    && replies[1..]
                        .iter()
                        .all(|r| *r == V::Simple("QUEUED".into()));
                let queued_refusal = replies[1..].iter().find_map(|r| match r {
                    V::Err(q) if refusal(q) => Some(q.clone()),
                    _ => None,
                });
                match exec {
                    V::Arr(items) if queued_ok => Ok(V::Arr(items)),
                    V::Err(e) if refusal(&e) => Err(e),
                    V::Err(e) if e.starts_with("EXECABORT") && queued_refusal.is_some() => {
                        Err(queued_refusal.expect("checked"))
                    }
                    other => {
                        return Err(format!(
                            "client {}: MULTI {unit:?} got {replies:?} then {other:?}",
                            self.id
                        ))
                    }
                }
            } else {
                match replies.pop().expect("reply") {
                    V::Err(e) if refusal(&e) => Err(e),
                    other => Ok(other),
                }
            };
            self.pending = None;
            match result {
                Err(text) => {
                    if text.starts_with("MISCONF Errors writing to the AOF") {
                        self.stats.refused_aof += 1;
                    } else {
                        self.stats.refused_save += 1;
                    }
                    // The disk is full: do not spin.
                    std::thread::sleep(Duration::from_millis(2));
                }
                Ok(got) => {
                    let want = if multi {
                        V::Arr(expected)
                    } else {
                        expected.pop().expect("one")
                    };
                    if got != want {
                        return Err(format!(
                            "client {}: {} gave {got:?}, the model says {want:?}",
                            self.id,
                            show_unit(&unit)
                        ));
                    }
                    self.history
                        .push_back(std::mem::replace(&mut self.model, after));
                    if self.history.len() > HISTORY {
                        self.history.pop_front();
                    }
                    self.stats.units += 1;
                    self.stats.commands += n;
                    self.stats.multi += u64::from(multi);
                    self.stats.acked_by_policy[shared.policy.load(Ordering::SeqCst) as usize] += 1;
                }
            }
        }
        Ok(())
    }
}

/// A write refused because the server cannot persist (nothing applied).
fn refusal(e: &str) -> bool {
    e.starts_with("MISCONF Errors writing to the AOF file: No space left on device")
        || e.starts_with("MISCONF Redis is configured to save RDB snapshots")
}

fn show_unit(unit: &[Vec<Vec<u8>>]) -> String {
    unit.iter()
        .map(|c| {
            c.iter()
                .map(|a| {
                    if a.len() > 40 {
                        format!("<{} bytes>", a.len())
                    } else {
                        String::from_utf8_lossy(a).into_owned()
                    }
                })
                .collect::<Vec<_>>()
                .join(" ")
        })
        .collect::<Vec<_>>()
        .join("; ")
}

// ---------------------------------------------------------------------------
// Reading the server's state.

fn read_key(conn: &mut Client, key: &[u8]) -> Option<Entry> {
    let kind = conn.must(&[b"TYPE", key]).bytes();
    let val = match kind.as_slice() {
        b"none" => return None,
        b"string" => Val::Str(conn.must(&[b"GET", key]).bytes()),
        b"list" => Val::List(
            conn.must(&[b"LRANGE", key, b"0", b"-1"])
                .arr()
                .iter()
                .map(V::bytes)
                .collect(),
        ),
        b"hash" => Val::Hash(
            conn.must(&[b"HGETALL", key])
                .arr()
                .chunks(2)
                .map(|p| (p[0].bytes(), p[1].bytes()))
                .collect(),
        ),
        b"set" => Val::Set(
            conn.must(&[b"SMEMBERS", key])
                .arr()
                .iter()
                .map(V::bytes)
                .collect(),
        ),
        b"zset" => Val::Zset(
            conn.must(&[b"ZRANGE", key, b"0", b"-1", b"WITHSCORES"])
                .arr()
                .chunks(2)
                .map(|p| {
                    let score = String::from_utf8_lossy(&p[1].bytes()).into_owned();
                    (p[0].bytes(), score.parse().unwrap_or(i64::MIN))
                })
                .collect(),
        ),
        b"stream" => Val::Stream(read_stream(conn, key)),
        other => panic!("unexpected type {}", String::from_utf8_lossy(other)),
    };
    let expire = match conn.must(&[b"PEXPIRETIME", key]).int() {
        -1 => None,
        ms => Some(ms),
    };
    Some(Entry { val, expire })
}

fn read_stream(conn: &mut Client, key: &[u8]) -> Stream {
    let bad = u64::MAX; // an ID the workload never makes: a mismatch
    let entries = conn
        .must(&[b"XRANGE", key, b"-", b"+"])
        .arr()
        .iter()
        .map(|e| {
            let e = e.arr();
            let fv = e[1].arr();
            (
                parse_stream_id(&e[0].bytes()).unwrap_or(bad),
                (fv[0].bytes(), fv[1].bytes()),
            )
        })
        .collect();
    let groups = conn.must(&[b"XINFO", b"GROUPS", key]);
    let group = groups.arr().first().map(|g| {
        let fields = g.arr();
        let field = |name: &str| {
            fields
                .chunks(2)
                .find(|p| p[0].bytes() == name.as_bytes())
                .map(|p| p[1].clone())
                .unwrap_or_else(|| panic!("XINFO GROUPS without {name}"))
        };
        assert_eq!(field("name"), V::Bulk(b"g".to_vec()), "group name");
        let last = parse_stream_id(&field("last-delivered-id").bytes()).unwrap_or(bad);
        let pel = conn
            .must(&[b"XPENDING", key, b"g", b"-", b"+", b"100000"])
            .arr()
            .iter()
            .map(|p| {
                let p = p.arr();
                (
                    parse_stream_id(&p[0].bytes()).unwrap_or(bad),
                    (p[1].bytes(), p[3].int()),
                )
            })
            .collect();
        Group { last, pel }
    });
    assert!(groups.arr().len() <= 1, "more than one group on {key:?}");
    Stream { entries, group }
}

fn bulk_key(i: u64) -> Vec<u8> {
    format!("bulk:{i}").into_bytes()
}

fn bulk_value(seed: u64, i: u64) -> Vec<u8> {
    let mut rng = Rng::with_seed(seed ^ i.wrapping_mul(0x9E37_79B9));
    (0..200).map(|_| b'a' + rng.below(26) as u8).collect()
}

/// The differences between two models, for a failure message.
fn describe_diff(want: &Model, got: &Model) -> String {
    let keys: BTreeSet<&Vec<u8>> = want.keys().chain(got.keys()).collect();
    let mut out = Vec::new();
    for k in keys {
        let (w, g) = (want.get(k), got.get(k));
        if w != g {
            let short = |e: Option<&Entry>| {
                let text = format!("{e:?}");
                if text.len() > 600 {
                    format!("{}…", &text[..600])
                } else {
                    text
                }
            };
            out.push(format!(
                "  {}: model {} / server {}",
                String::from_utf8_lossy(k),
                short(w),
                short(g)
            ));
        }
    }
    out.join("\n")
}

/// After a restart: the keyspace must be the models' (each client's
/// acknowledged state, or that plus its unit in doubt) and the bulk keys.
fn verify(
    conn: &mut Client,
    clients: &mut [ClientState],
    bulk: u64,
    seed: u64,
    policy: &str,
) -> Result<(), String> {
    for db in 0..DBS {
        conn.must(&[b"SELECT", db.to_string().as_bytes()]);
        let mut allowed: BTreeSet<Vec<u8>> = BTreeSet::new();
        for c in clients.iter().filter(|c| c.db == db) {
            allowed.extend(c.universe());
        }
        if db == 0 {
            allowed.extend((0..bulk).map(bulk_key));
        }
        let keys = conn.must(&[b"KEYS", b"*"]);
        let extra: Vec<String> = keys
            .arr()
            .iter()
            .map(V::bytes)
            .filter(|k| !allowed.contains(k))
            .map(|k| String::from_utf8_lossy(&k).into_owned())
            .collect();
        if !extra.is_empty() {
            return Err(format!("db {db}: keys nobody wrote: {extra:?}"));
        }
        if db == 0 {
            for start in (0..bulk).step_by(500) {
                let keys: Vec<Vec<u8>> = (start..bulk.min(start + 500)).map(bulk_key).collect();
                let mut args: Vec<&[u8]> = vec![b"MGET"];
                args.extend(keys.iter().map(Vec::as_slice));
                let got = conn.must(&args);
                for (i, v) in (start..).zip(got.arr()) {
                    if *v != V::Bulk(bulk_value(seed, i)) {
                        return Err(format!("bulk:{i} is {v:?}"));
                    }
                }
            }
        }
        for c in clients.iter_mut().filter(|c| c.db == db) {
            let mut actual = Model::new();
            for key in c.universe() {
                if let Some(e) = read_key(conn, &key) {
                    actual.insert(key, e);
                }
            }
            if actual == c.model {
                if c.pending.take().is_some() {
                    c.stats.in_doubt_absent += 1;
                }
                continue;
            }
            if c.pending.as_ref() == Some(&actual) {
                c.history.push_back(std::mem::replace(&mut c.model, actual));
                c.pending = None;
                c.stats.in_doubt_applied += 1;
                continue;
            }
            let lost = c
                .history
                .iter()
                .rev()
                .position(|h| *h == actual)
                .map(|back| back + 1);
            return Err(format!(
                "client {} (db {db}, appendfsync {policy} at restart): {}\n{}",
                c.id,
                match lost {
                    Some(n) => format!("the state is {n} acknowledged unit(s) behind: LOST"),
                    None => format!(
                        "the state equals no acknowledged state of the last {HISTORY} \
                         (not a prefix, or more than {HISTORY} lost)"
                    ),
                },
                describe_diff(&c.model, &actual)
            ));
        }
    }
    Ok(())
}

// ---------------------------------------------------------------------------
// The soak.

#[derive(Default, Debug)]
struct Report {
    rounds: u64,
    restarts: u64,
    bgsave: u64,
    bgsave_refused: u64,
    rewrites: u64,
    rewrites_refused: u64,
    policy_changes: u64,
    disk_full: u64,
    kills_after_rewrite: u64,
    kills_during_rewrite: u64,
    kills_during_bgsave: u64,
    kills_while_full: u64,
    clients: Stats,
}

fn info_field(info: &V, name: &str) -> Option<String> {
    let text = String::from_utf8_lossy(&info.bytes()).into_owned();
    text.lines()
        .find_map(|l| l.strip_prefix(&format!("{name}:")).map(str::to_string))
}

/// Runs the soak; `mixed` changes appendfsync at random (else `always`).
fn soak(name: &str, mixed: bool) -> Report {
    let seed = env_u64("HOZON_SOAK_SEED").unwrap_or_else(|| Rng::new().next_u64());
    let secs = env_u64("HOZON_SOAK_SECS");
    let min_rounds = env_u64("HOZON_SOAK_ROUNDS").unwrap_or(if secs.is_some() { 0 } else { 10 });
    let n_clients = env_u64("HOZON_SOAK_CLIENTS").unwrap_or(8) as usize;
    let bulk = env_u64("HOZON_SOAK_BULK").unwrap_or(2000);
    eprintln!(
        "soak {name}: seed {seed} (HOZON_SOAK_SEED), rounds >= {min_rounds}, secs {secs:?}, \
         clients {n_clients}, bulk keys {bulk}"
    );
    let mut rng = Rng::with_seed(seed);
    // Declared first, dropped (unmounted) last, after every server.
    let data = DataDir::new(48);
    let logs = tempfile::tempdir().expect("log dir");
    let log = logs.path().join("server.log");
    let expire_base = now_ms() + 30 * 24 * 3600 * 1000;
    let mut clients: Vec<ClientState> = (0..n_clients)
        .map(|id| ClientState {
            id,
            db: id % DBS,
            model: Model::new(),
            pending: None,
            history: VecDeque::new(),
            next_seq: 0,
            expire_base,
            rng: Rng::with_seed(seed.wrapping_add(1 + id as u64)),
            stats: Stats::default(),
        })
        .collect();
    let mut report = Report::default();
    let started = Instant::now();
    let mut policy = 0usize;
    let mut first = true;
    loop {
        let elapsed = started.elapsed().as_secs();
        if report.rounds >= min_rounds && secs.is_none_or(|s| elapsed >= s) {
            break;
        }
        if mixed {
            policy = rng.index(POLICIES.len());
        }
        let preamble = ["native", "none", "rdb"][rng.index(3)];
        // With save points a failed BGSAVE stops writes until one succeeds;
        // `1 1` also saves by itself every second.
        let save = ["", "3600 1", "1 1"][rng.index(3)];
        let args: Vec<String> = [
            "--appendonly",
            "yes",
            "--appendfsync",
            POLICIES[policy],
            "--save",
            save,
            "--aof-preamble",
            preamble,
            "--auto-aof-rewrite-min-size",
            "2mb",
            "--loglevel",
            "notice",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        data.unfill();
        let server = Server::start(data.path(), &log, &args);
        let mut ctl = Client::connect(server.port, reply_timeout()).expect("connect");
        if first {
            for start in (0..bulk).step_by(500) {
                let items: Vec<(Vec<u8>, Vec<u8>)> = (start..bulk.min(start + 500))
                    .map(|i| (bulk_key(i), bulk_value(seed, i)))
                    .collect();
                let mut a: Vec<&[u8]> = vec![b"MSET"];
                for (k, v) in &items {
                    a.push(k);
                    a.push(v);
                }
                assert_eq!(ctl.must(&a), V::Simple("OK".into()));
            }
            first = false;
        } else {
            report.restarts += 1;
            if let Err(e) = verify(&mut ctl, &mut clients, bulk, seed, POLICIES[policy]) {
                let tail = std::fs::read_to_string(&log).unwrap_or_default();
                let tail: Vec<&str> = tail.lines().rev().take(40).collect();
                panic!(
                    "soak {name} (seed {seed}) after restart {} (round {}): {e}\n\
                     server log (last lines, newest first):\n{}",
                    report.restarts,
                    report.rounds,
                    tail.join("\n")
                );
            }
        }
        let shared = Arc::new(Shared {
            killed: AtomicBool::new(false),
            policy: AtomicU8::new(policy as u8),
        });
        let port = server.port;
        let threads: Vec<_> = clients
            .drain(..)
            .map(|c| {
                let shared = Arc::clone(&shared);
                std::thread::spawn(move || {
                    let mut c = c;
                    let result = c.run(port, &shared);
                    (c, result)
                })
            })
            .collect();

        // The faults, until the round's end.
        let deadline = Instant::now() + Duration::from_millis(200 + rng.below(1300));
        let mut full_until: Option<Instant> = None;
        while Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(5 + rng.below(60)));
            match rng.below(100) {
                0..=24 => match server.must(&mut ctl, &log, &[b"BGSAVE"]) {
                    V::Simple(_) => report.bgsave += 1,
                    V::Err(e) if e.starts_with("ERR ") => report.bgsave_refused += 1,
                    other => panic!("BGSAVE: {other:?}"),
                },
                25..=49 => match server.must(&mut ctl, &log, &[b"BGREWRITEAOF"]) {
                    V::Simple(_) => report.rewrites += 1,
                    V::Err(e) if e.starts_with("ERR ") => report.rewrites_refused += 1,
                    other => panic!("BGREWRITEAOF: {other:?}"),
                },
                50..=59 if mixed => {
                    let p = rng.index(POLICIES.len());
                    let reply = server.must(
                        &mut ctl,
                        &log,
                        &[b"CONFIG", b"SET", b"appendfsync", POLICIES[p].as_bytes()],
                    );
                    assert_eq!(reply, V::Simple("OK".into()), "CONFIG SET appendfsync");
                    policy = p;
                    shared.policy.store(p as u8, Ordering::SeqCst);
                    report.policy_changes += 1;
                }
                60..=67 if data.tmpfs && full_until.is_none() => {
                    data.fill();
                    report.disk_full += 1;
                    full_until = Some(Instant::now() + Duration::from_millis(20 + rng.below(400)));
                }
                _ => {}
            }
            if full_until.is_some_and(|t| Instant::now() >= t) {
                data.unfill();
                full_until = None;
            }
        }
        if rng.below(4) == 0 {
            // Aim the kill at a rewrite.
            if let V::Simple(_) = server.must(&mut ctl, &log, &[b"BGREWRITEAOF"]) {
                report.rewrites += 1;
                report.kills_after_rewrite += 1;
            }
            std::thread::sleep(Duration::from_millis(rng.below(40)));
        }
        let info = server.must(&mut ctl, &log, &[b"INFO", b"persistence"]);
        report.kills_during_rewrite +=
            u64::from(info_field(&info, "aof_rewrite_in_progress").as_deref() == Some("1"));
        report.kills_during_bgsave +=
            u64::from(info_field(&info, "rdb_bgsave_in_progress").as_deref() == Some("1"));
        report.kills_while_full += u64::from(full_until.is_some());
        shared.killed.store(true, Ordering::SeqCst);
        server.kill();
        for t in threads {
            let (c, result) = t.join().expect("client thread panicked");
            if let Err(e) = result {
                panic!("soak {name} (seed {seed}), round {}: {e}", report.rounds);
            }
            clients.push(c);
        }
        clients.sort_by_key(|c| c.id);
        report.rounds += 1;
    }
    // The last check, on a clean start.
    data.unfill();
    let server = Server::start(
        data.path(),
        &log,
        &["--appendonly", "yes", "--save", ""].map(String::from),
    );
    let mut ctl = Client::connect(server.port, reply_timeout()).expect("connect");
    report.restarts += 1;
    if let Err(e) = verify(&mut ctl, &mut clients, bulk, seed, POLICIES[policy]) {
        panic!("soak {name} (seed {seed}) at the final restart: {e}");
    }
    server.kill();
    for c in &clients {
        report.clients.add(&c.stats);
    }
    let s = &report.clients;
    eprintln!(
        "soak {name} (seed {seed}): {} rounds in {:.0} s, {} restarts after SIGKILL, \
         {} clients: {} units acknowledged ({} commands, {} MULTI/EXEC; by policy in force: \
         always {}, everysec {}, no {}), refused with MISCONF: {} (AOF write failed) + {} (BGSAVE failed), in doubt at the kill: {} \
         applied / {} not; BGSAVE {} (+{} refused), BGREWRITEAOF {} (+{} refused), \
         {} appendfsync changes, {} disk-full episodes (tmpfs: {}); kills: {} right after \
         BGREWRITEAOF, {} during a rewrite, {} during a BGSAVE, {} with the disk full; \
         acknowledged units lost: 0",
        report.rounds,
        started.elapsed().as_secs_f64(),
        report.restarts,
        n_clients,
        s.units,
        s.commands,
        s.multi,
        s.acked_by_policy[0],
        s.acked_by_policy[1],
        s.acked_by_policy[2],
        s.refused_aof,
        s.refused_save,
        s.in_doubt_applied,
        s.in_doubt_absent,
        report.bgsave,
        report.bgsave_refused,
        report.rewrites,
        report.rewrites_refused,
        report.policy_changes,
        report.disk_full,
        data.tmpfs,
        report.kills_after_rewrite,
        report.kills_during_rewrite,
        report.kills_during_bgsave,
        report.kills_while_full,
    );
    report
}

#[test]
fn soak_always_loses_no_acknowledged_write() {
    let r = soak("always", false);
    assert!(r.restarts > r.rounds.min(1), "no restart happened");
    assert!(r.clients.units > 0, "no write was acknowledged");
}

#[test]
fn soak_with_appendfsync_changes_loses_no_acknowledged_write() {
    let r = soak("mixed", true);
    assert!(r.clients.units > 0, "no write was acknowledged");
}
