//! Servers for the replication tests: a master (redis-server or
//! hozon-server: the program under test) and redis-server 7.0.15 replicas,
//! each with its own log file; a poller, INFO readers and a RESP decoder.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::{Duration, Instant};

pub use crate::value::{decode, Value};
pub use testkit::harness::{
    hozon_server_path, redis_server_path, show, split_line, start_hozon, start_on_port,
    start_redis, Conn, ServerProcess,
};

/// How long any replication milestone may take before a test fails. Never
/// a performance bound: a loaded machine must not fail a test.
pub const PATIENCE: Duration = Duration::from_secs(20);

/// The program playing the master.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Master {
    /// redis-server 7.0.15: validates each scenario itself.
    Redis,
    /// hozon-server: the program under test.
    Hozon,
}

/// The payload form the master is configured for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SyncMode {
    /// `repl-diskless-sync no`: `$<len>` and a file.
    Disk,
    /// `repl-diskless-sync yes`, `repl-diskless-sync-delay 0`: `$EOF:<mark>`.
    Diskless,
}

impl SyncMode {
    /// The master's startup arguments for this form.
    pub fn args(self) -> Vec<&'static str> {
        let diskless = match self {
            SyncMode::Disk => "no",
            SyncMode::Diskless => "yes",
        };
        vec![
            "--repl-diskless-sync",
            diskless,
            "--repl-diskless-sync-delay",
            "0",
        ]
    }
}

/// A running server with its log file; the log's tail is printed when a
/// test fails while the node is alive (always with `REPL_TEST_LOGS=1`).
pub struct Node {
    /// The process (killed on drop).
    pub process: ServerProcess,
    /// "master (hozon)", "replica", …: names the log when it is printed.
    pub name: String,
    log: PathBuf,
    _logdir: tempfile::TempDir,
}

impl Node {
    /// The port it listens on.
    pub fn port(&self) -> u16 {
        self.process.port
    }

    /// A fresh client connection.
    pub fn conn(&self) -> Conn {
        Conn::connect(self.port())
    }

    /// The log so far.
    pub fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }
}

impl Drop for Node {
    fn drop(&mut self) {
        if std::thread::panicking() || std::env::var_os("REPL_TEST_LOGS").is_some() {
            let log = self.log();
            let lines: Vec<&str> = log.lines().collect();
            let tail = &lines[lines.len().saturating_sub(60)..];
            eprintln!(
                "---- log of {} (port {}), last {} lines ----\n{}\n---- end of log ----",
                self.name,
                self.port(),
                tail.len(),
                tail.join("\n")
            );
        }
    }
}

/// Log arguments (notice level, to a file in a new temp dir).
fn log_args() -> (tempfile::TempDir, PathBuf, Vec<String>) {
    let dir = tempfile::tempdir().expect("log dir");
    let log = dir.path().join("server.log");
    let args = vec![
        "--loglevel".to_string(),
        "notice".to_string(),
        "--logfile".to_string(),
        log.to_string_lossy().into_owned(),
    ];
    (dir, log, args)
}

impl Master {
    /// Starts the master program with `extra` arguments (persistence off).
    pub fn start(self, extra: &[&str]) -> Node {
        let (dir, log, mut args) = log_args();
        args.extend(extra.iter().map(|a| a.to_string()));
        let refs: Vec<&str> = args.iter().map(String::as_str).collect();
        let (process, name) = match self {
            Master::Redis => (start_redis(&refs), "master (redis-server)"),
            Master::Hozon => match std::panic::catch_unwind(|| start_hozon(&refs)) {
                Ok(process) => (process, "master (hozon-server)"),
                Err(_) => panic!(
                    "hozon-server did not start with {refs:?}: {}",
                    startup_error(hozon_server_path(), &refs)
                ),
            },
        };
        Node {
            process,
            name: name.to_string(),
            log,
            _logdir: dir,
        }
    }
}

/// What `binary` prints when it is started with `args` and exits (a
/// configuration error goes to stderr, which the harness discards).
fn startup_error(binary: &str, args: &[&str]) -> String {
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("a free port");
    let dir = tempfile::tempdir().expect("temp dir");
    let mut child = std::process::Command::new(binary)
        .args([
            "--port",
            &port.to_string(),
            "--save",
            "",
            "--appendonly",
            "no",
        ])
        .args(["--dir", &dir.path().to_string_lossy()])
        .args(args)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("spawn hozon-server");
    let deadline = Instant::now() + Duration::from_secs(3);
    while Instant::now() < deadline {
        if let Ok(Some(_)) = child.try_wait() {
            let out = child.wait_with_output().expect("its output");
            return String::from_utf8_lossy(&out.stderr).into_owned()
                + &String::from_utf8_lossy(&out.stdout);
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let _ = child.kill();
    let _ = child.wait();
    "it ran when started again (not a configuration error)".to_string()
}

fn replica_args(master: &Node, extra: &[&str]) -> (tempfile::TempDir, PathBuf, Vec<String>) {
    let (dir, log, mut args) = log_args();
    args.extend([
        "--replicaof".to_string(),
        "127.0.0.1".to_string(),
        master.port().to_string(),
    ]);
    args.extend(extra.iter().map(|a| a.to_string()));
    (dir, log, args)
}

/// Starts a redis-server replica of `master` (no persistence).
pub fn start_replica(master: &Node, extra: &[&str]) -> Node {
    let (dir, log, args) = replica_args(master, extra);
    let refs: Vec<&str> = args.iter().map(String::as_str).collect();
    Node {
        process: start_redis(&refs),
        name: format!("replica of port {}", master.port()),
        log,
        _logdir: dir,
    }
}

/// Starts a redis-server replica of `master` on `port` (a restart).
pub fn start_replica_on(master: &Node, port: u16, extra: &[&str]) -> Node {
    let (dir, log, mut args) = replica_args(master, extra);
    let mut all = vec!["--daemonize".to_string(), "no".to_string()];
    all.append(&mut args);
    let refs: Vec<&str> = all.iter().map(String::as_str).collect();
    let path = redis_server_path();
    let process = wait_until(PATIENCE, "the replica to restart on its port", || {
        start_on_port(&path, "redis-server", port, &refs).ok_or("port busy".to_string())
    });
    Node {
        process,
        name: format!("restarted replica of port {}", master.port()),
        log,
        _logdir: dir,
    }
}

/// Polls `probe` every 20 ms until it returns `Ok`, or panics after
/// `timeout` with the last `Err` (the state it was waiting on).
#[track_caller]
pub fn wait_until<T>(
    timeout: Duration,
    what: &str,
    mut probe: impl FnMut() -> Result<T, String>,
) -> T {
    let deadline = Instant::now() + timeout;
    loop {
        match probe() {
            Ok(v) => return v,
            Err(last) => {
                if Instant::now() >= deadline {
                    panic!("timed out after {timeout:?} waiting for {what}; last state: {last}");
                }
            }
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Runs a command given as words and decodes its reply.
pub fn cmd(conn: &mut Conn, words: &[&str]) -> Value {
    let args: Vec<&[u8]> = words.iter().map(|w| w.as_bytes()).collect();
    decode(&conn.call(&args))
}

/// Runs a command that must not fail; returns its reply.
#[track_caller]
pub fn ok(conn: &mut Conn, words: &[&str]) -> Value {
    let v = cmd(conn, words);
    if let Value::Error(e) = &v {
        panic!("{words:?} failed: {e}");
    }
    v
}

/// Runs one command per line (redis-cli quoting); none may fail.
#[track_caller]
pub fn script(conn: &mut Conn, text: &str) {
    for line in text.lines().map(str::trim) {
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let args = split_line(line);
        let refs: Vec<&[u8]> = args.iter().map(Vec::as_slice).collect();
        let reply = conn.call(&refs);
        assert!(!reply.starts_with(b"-"), "{line}: {}", show(&reply));
    }
}

/// Sends every command before reading any reply; none may fail.
#[track_caller]
pub fn pipeline(conn: &mut Conn, commands: &[Vec<Vec<u8>>]) {
    for chunk in commands.chunks(500) {
        let mut bytes = Vec::new();
        for c in chunk {
            let refs: Vec<&[u8]> = c.iter().map(Vec::as_slice).collect();
            bytes.extend(testkit::harness::encode_command(&refs));
        }
        conn.send_raw(&bytes);
        for c in chunk {
            let reply = conn.read_reply();
            assert!(
                !reply.starts_with(b"-"),
                "{:?}: {}",
                show(&c[0]),
                show(&reply)
            );
        }
    }
}

/// One INFO section as field → value.
pub fn info(conn: &mut Conn, section: &str) -> BTreeMap<String, String> {
    let text = ok(conn, &["INFO", section]).text();
    text.lines()
        .filter_map(|l| l.split_once(':'))
        .map(|(k, v)| (k.to_string(), v.trim().to_string()))
        .collect()
}

/// One INFO field, None when the section does not have it.
pub fn info_field(conn: &mut Conn, section: &str, field: &str) -> Option<String> {
    info(conn, section).remove(field)
}

/// An INFO field that must be present and an integer.
#[track_caller]
pub fn info_int(conn: &mut Conn, section: &str, field: &str) -> i64 {
    let v =
        info_field(conn, section, field).unwrap_or_else(|| panic!("INFO {section} has no {field}"));
    v.parse()
        .unwrap_or_else(|_| panic!("INFO {section} {field}:{v} is not an integer"))
}

/// Waits until every replica's link to `master` is up, its load finished
/// and its offset equal to the master's (read before and after it, so no
/// write or PING slipped in between). Returns the common offset.
#[track_caller]
pub fn wait_synced(master: &Node, replicas: &[&Node]) -> i64 {
    let mut m = master.conn();
    let mut offset = 0;
    for replica in replicas {
        let mut r = replica.conn();
        offset = wait_until(PATIENCE, "the replica to catch up", || {
            let before = info_int(&mut m, "replication", "master_repl_offset");
            let ri = info(&mut r, "replication");
            let after = info_int(&mut m, "replication", "master_repl_offset");
            let state = format!(
                "master offset {before}..{after}, replica (port {}): link {:?}, \
                 sync_in_progress {:?}, offset {:?}",
                replica.port(),
                ri.get("master_link_status"),
                ri.get("master_sync_in_progress"),
                ri.get("master_repl_offset")
            );
            let up = ri.get("master_link_status").map(String::as_str) == Some("up")
                && ri.get("master_sync_in_progress").map(String::as_str) == Some("0");
            let roff: Option<i64> = ri.get("master_repl_offset").and_then(|v| v.parse().ok());
            // And online on the master's side (after a diskless sync Redis
            // waits for the replica's first ACK), which FAILOVER checks.
            let online = format!("port={},state=online", replica.port());
            let listed = info(&mut m, "replication")
                .values()
                .any(|v| v.contains(&online));
            if up && listed && before == after && roff == Some(after) {
                Ok(after)
            } else {
                Err(state)
            }
        });
    }
    offset
}

/// Runs `redis-cli -p <port> <flag> <file>` (`--rdb`, `--functions-rdb`),
/// which must report a successful transfer; returns what it printed.
#[track_caller]
pub fn redis_cli_transfer(port: u16, flag: &str, file: &std::path::Path) -> String {
    let out = std::process::Command::new("redis-cli")
        .args(["-p", &port.to_string(), flag])
        .arg(file)
        .output()
        .expect("run redis-cli (apt-get install redis-tools)");
    let said =
        String::from_utf8_lossy(&out.stderr).into_owned() + &String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success() && said.contains("Transfer finished with success"),
        "redis-cli {flag} failed ({}): {said}",
        out.status
    );
    said
}
