//! What the operations tests share: starting hozon-server (and
//! redis-server) from configuration files, waiting for conditions,
//! redis-cli over TCP or the Unix socket, reading the log.

use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

pub use testkit::harness::{hozon_server_path, unused_port};

/// Generous: the machine running the tests may be loaded. Only a
/// deadline for waiting, never an assertion about time.
pub const PATIENCE: Duration = Duration::from_secs(60);

/// The fixtures directory (stock configuration files).
pub fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/ops/fixtures")
        .join(name)
}

/// The repository's `contrib/` file `name`.
pub fn contrib(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("contrib")
        .join(name)
}

/// Waits until `cond` holds; panics naming `what` after [`PATIENCE`].
pub fn wait_for(what: &str, mut cond: impl FnMut() -> bool) {
    let start = Instant::now();
    while !cond() {
        assert!(start.elapsed() < PATIENCE, "gave up waiting for {what}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// `text` with the active (uncommented) line of each directive in
/// `changes` replaced by `name value`. Every directive must have exactly
/// one active line: the change is the only difference.
pub fn change_directives(text: &str, changes: &[(&str, &str)]) -> String {
    let mut lines: Vec<String> = text.lines().map(str::to_string).collect();
    for (name, value) in changes {
        let hits: Vec<usize> = lines
            .iter()
            .enumerate()
            .filter(|(_, l)| l.split_whitespace().next() == Some(name))
            .map(|(i, _)| i)
            .collect();
        assert_eq!(hits.len(), 1, "{name} has one active line");
        lines[hits[0]] = format!("{name} {value}");
    }
    lines.join("\n") + "\n"
}

/// The directives of a configuration text's active lines, in order.
pub fn active_directives(text: &str) -> Vec<String> {
    text.lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
        .filter_map(|l| l.split_whitespace().next())
        .map(str::to_ascii_lowercase)
        .collect()
}

/// A server process started by a test, killed (SIGKILL) when dropped if
/// still running; its standard output and error go to `out`.
pub struct Proc {
    pub child: Child,
    pub out: PathBuf,
}

impl Proc {
    /// Spawns `binary` with `args` and `env`, output to `out`.
    pub fn spawn(binary: &str, args: &[&str], env: &[(&str, &str)], out: &Path) -> Proc {
        let file = std::fs::File::create(out).expect("output file");
        let child = Command::new(binary)
            .args(args)
            .envs(env.iter().copied())
            .stdout(Stdio::from(file.try_clone().expect("dup")))
            .stderr(Stdio::from(file))
            .spawn()
            .unwrap_or_else(|e| panic!("spawn {binary}: {e}"));
        Proc {
            child,
            out: out.to_path_buf(),
        }
    }

    /// What it printed so far.
    pub fn output(&self) -> String {
        std::fs::read_to_string(&self.out).unwrap_or_default()
    }

    /// Waits for it to exit; its exit code.
    pub fn wait_exit(&mut self) -> i32 {
        let mut code = None;
        wait_for("the server to exit", || {
            code = self.child.try_wait().expect("try_wait");
            code.is_some()
        });
        code.and_then(|c| c.code()).unwrap_or(-1)
    }
}

impl Drop for Proc {
    fn drop(&mut self) {
        if let Ok(None) = self.child.try_wait() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

/// Runs redis-cli with `target` (`-p PORT` or `-s PATH`) and `args`;
/// its standard output (`--no-raw`: replies as redis-cli shows them to a
/// terminal would differ, so raw mode is used: one line per element).
pub fn cli(target: &[&str], args: &[&str]) -> String {
    let out = Command::new("redis-cli")
        .args(target)
        .args(args)
        .output()
        .expect("redis-cli (Debian's redis-tools) must be installed");
    String::from_utf8_lossy(&out.stdout).trim_end().to_string()
}

/// redis-cli over TCP to 127.0.0.1:`port`.
pub fn cli_tcp(port: u16, args: &[&str]) -> String {
    let port = port.to_string();
    cli(&["-h", "127.0.0.1", "-p", &port], args)
}

/// redis-cli over the Unix socket at `path`.
pub fn cli_unix(path: &Path, args: &[&str]) -> String {
    cli(&["-s", &path.to_string_lossy()], args)
}

/// Waits until the server on `port` answers PING with PONG and has
/// loaded its data.
pub fn wait_ready_tcp(port: u16) {
    wait_for("the server to answer and finish loading", || {
        cli_tcp(port, &["PING"]) == "PONG"
            && cli_tcp(port, &["INFO", "persistence"]).contains("loading:0")
    });
}

/// True while process `pid` exists.
pub fn alive(pid: i32) -> bool {
    // SAFETY: kill with signal 0 only checks the process exists.
    unsafe { libc::kill(pid, 0) == 0 }
}

/// Sends `sig` to `pid`.
pub fn signal(pid: i32, sig: i32) {
    // SAFETY: kill(2) with a pid and a signal number.
    unsafe {
        libc::kill(pid, sig);
    }
}

/// The lines of `log` that warn about a directive accepted without effect.
pub fn inert_warnings(log: &str) -> Vec<String> {
    log.lines()
        .filter(|l| l.contains("is accepted and has no effect"))
        .map(str::to_string)
        .collect()
}

/// The directive a warning line names (`'name value' …` → `name`).
pub fn warned_directive(line: &str) -> String {
    let start = line.find('\'').expect("a quoted directive") + 1;
    let rest = &line[start..];
    let end = rest.find([' ', '\'']).expect("end of the directive name");
    rest[..end].to_string()
}

/// Reads datagrams from `socket` until `done` says enough, or panics
/// after [`PATIENCE`].
pub fn read_datagrams(
    socket: &std::os::unix::net::UnixDatagram,
    what: &str,
    mut done: impl FnMut(&[String]) -> bool,
) -> Vec<String> {
    socket
        .set_read_timeout(Some(Duration::from_millis(200)))
        .expect("timeout");
    let mut got = Vec::new();
    let start = Instant::now();
    let mut buf = vec![0u8; 65536];
    while !done(&got) {
        assert!(
            start.elapsed() < PATIENCE,
            "gave up waiting for {what}; got {got:?}"
        );
        if let Ok(n) = socket.recv(&mut buf) {
            got.push(String::from_utf8_lossy(&buf[..n]).into_owned());
        }
    }
    got
}

/// Reads a whole file (empty when absent).
pub fn read(path: &Path) -> String {
    let mut text = String::new();
    if let Ok(mut f) = std::fs::File::open(path) {
        let _ = f.read_to_string(&mut text);
    }
    text
}
