//! The differential harness: a real `redis-server` and a `hozon-server`,
//! started fresh for each test on free ports, fed identical commands.

use std::cell::RefCell;
use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use hozon::resp::reply_frame::frame_len;
use quickcheck::{Arbitrary, Gen, QuickCheck, TestResult};

/// The seed of a randomised test: `HOZON_SEED` when set (to reproduce a
/// failure), else a fresh one. Printed, so a failing test's output names it.
pub fn test_seed() -> u64 {
    seed_or(hozon::rand::Rng::new().next_u64())
}

/// [`test_seed`] with a fixed `default` when `HOZON_SEED` is not set.
pub fn seed_or(default: u64) -> u64 {
    let seed = match std::env::var("HOZON_SEED") {
        Ok(v) => v
            .parse()
            .unwrap_or_else(|_| panic!("HOZON_SEED={v:?} is not a number")),
        Err(_) => default,
    };
    eprintln!("seed {seed} (reproduce with HOZON_SEED={seed})");
    seed
}

/// A QuickCheck runner with a generator of `size` seeded by [`test_seed`].
pub fn seeded_quickcheck(size: usize, tests: u64) -> QuickCheck {
    QuickCheck::new()
        .rng(Gen::from_size_and_seed(size, test_seed()))
        .tests(tests)
}

/// A server process, killed when dropped.
pub struct ServerProcess {
    child: Child,
    /// The port it listens on.
    pub port: u16,
    /// A private data directory (removed on drop), so no test touches ./data.
    _dir: Option<tempfile::TempDir>,
}

impl ServerProcess {
    /// The process id.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// True once the process has exited (it is reaped then).
    pub fn has_exited(&mut self) -> bool {
        matches!(self.child.try_wait(), Ok(Some(_)))
    }
}

impl Drop for ServerProcess {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn free_port() -> u16 {
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind an ephemeral port");
    listener.local_addr().expect("local addr").port()
}

/// The redis-server binary, or a panic telling how to get it.
pub fn redis_server_path() -> String {
    for candidate in ["/usr/bin/redis-server", "/usr/local/bin/redis-server"] {
        if std::path::Path::new(candidate).exists() {
            return candidate.to_string();
        }
    }
    panic!(
        "redis-server not found: the differential tests need Redis 7.0 \
         (apt-get install -y redis-server redis-tools; the README's test command does this)"
    );
}

/// Waits until the server `child` answers on `port`. `Err` when another
/// process answers there, or when the child exits first (most likely a
/// parallel test's server took the port between `free_port` and our
/// bind, however long our start took): the caller starts again elsewhere.
fn wait_until_listening(
    port: u16,
    name: &str,
    child: &mut Child,
    password: Option<&str>,
) -> Result<(), String> {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        // Listening is not enough: a server loading its data answers
        // -LOADING until it is done. Ready means PING answers anything else.
        // With a password the server answers -NOAUTH before it checks
        // loading (as Redis does), so the probe authenticates first.
        if let Ok(mut stream) = TcpStream::connect(("127.0.0.1", port)) {
            let _ = stream.set_read_timeout(Some(Duration::from_secs(5)));
            let mut reply = [0u8; 64];
            let authenticated = match password {
                None => true,
                Some(pw) => {
                    let auth = encode_command(&[b"AUTH", pw.as_bytes()]);
                    stream.write_all(&auth).is_ok()
                        && matches!(stream.read(&mut reply), Ok(n) if n > 0)
                }
            };
            if authenticated && stream.write_all(b"*1\r\n$4\r\nPING\r\n").is_ok() {
                if let Ok(n) = stream.read(&mut reply) {
                    // +PONG, or -NOAUTH from a server with a password:
                    // anything but -LOADING means the data is loaded.
                    if n > 0 && !reply[..n].starts_with(b"-LOADING") {
                        return match server_pid(&mut stream) {
                            Some(pid) if pid != child.id() => {
                                Err(format!("process {pid} answers on port {port}"))
                            }
                            // A password keeps INFO from us: trust the port.
                            _ => Ok(()),
                        };
                    }
                }
            }
        }
        if let Ok(Some(status)) = child.try_wait() {
            return Err(format!(
                "{name} exited during startup on port {port}: {status}"
            ));
        }
        assert!(
            Instant::now() < deadline,
            "{name} did not start listening on {port}"
        );
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// Starts `binary` with `args` (after `--port P --bind 127.0.0.1`) and
/// returns as soon as it accepts connections, before it has loaded its
/// data: for tests of the loading phase. The caller's `args` name the
/// data directory.
pub fn start_before_loaded(binary: &str, name: &'static str, args: &[&str]) -> ServerProcess {
    for _ in 0..5 {
        let port = free_port();
        let mut child = Command::new(binary)
            .args(["--port", &port.to_string(), "--bind", "127.0.0.1"])
            .args(args)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap_or_else(|e| panic!("spawn {name}: {e}"));
        let deadline = Instant::now() + Duration::from_secs(10);
        while Instant::now() < deadline {
            if TcpStream::connect(("127.0.0.1", port)).is_ok() {
                return ServerProcess {
                    child,
                    port,
                    _dir: None,
                };
            }
            if let Ok(Some(_)) = child.try_wait() {
                break; // the port was taken: another one
            }
            std::thread::sleep(Duration::from_millis(2));
        }
        let _ = child.kill();
        let _ = child.wait();
    }
    panic!("could not start {name}");
}

/// Waits up to `within` until the server listening on `port` has loaded
/// its data: PING answers anything but `-LOADING` (a server loading its
/// files at startup accepts connections and answers -LOADING meanwhile).
/// False when it stops listening first (its load failed and it exited)
/// or the time runs out.
pub fn wait_until_loaded(port: u16, within: Duration) -> bool {
    let deadline = Instant::now() + within;
    while Instant::now() < deadline {
        let Ok(mut stream) = TcpStream::connect(("127.0.0.1", port)) else {
            return false;
        };
        let _ = stream.set_read_timeout(Some(Duration::from_secs(5)));
        let mut reply = [0u8; 64];
        if stream.write_all(b"*1\r\n$4\r\nPING\r\n").is_ok() {
            match stream.read(&mut reply) {
                Ok(n) if n > 0 && !reply[..n].starts_with(b"-LOADING") => return true,
                Ok(n) if n > 0 => {}
                // Closed without an answer: the server is exiting.
                _ => return false,
            }
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    false
}

/// The `process_id` of the server at the other end of `stream`, from
/// `INFO server`; None when it does not answer it (a password).
fn server_pid(stream: &mut TcpStream) -> Option<u32> {
    stream
        .write_all(b"*2\r\n$4\r\nINFO\r\n$6\r\nserver\r\n")
        .ok()?;
    let mut text = Vec::new();
    let mut chunk = [0u8; 4096];
    // The reply is one bulk string; process_id is in its first lines.
    while !text.windows(11).any(|w| w == b"process_id:") || !text.ends_with(b"\r\n") {
        let n = stream.read(&mut chunk).ok()?;
        if n == 0 || text.starts_with(b"-") {
            return None;
        }
        text.extend_from_slice(&chunk[..n]);
        if text.starts_with(b"-") {
            return None;
        }
    }
    let text = String::from_utf8_lossy(&text);
    let line = text.lines().find(|l| l.starts_with("process_id:"))?;
    line["process_id:".len()..].trim().parse().ok()
}

/// Starts redis-server with persistence off and `extra` arguments.
pub fn start_redis(extra: &[&str]) -> ServerProcess {
    let path = redis_server_path();
    let quiet = ["--daemonize", "no", "--loglevel", "warning"];
    start_server(&path, "redis-server", &[&quiet[..], extra].concat())
}

/// Starts hozon-server with persistence off and `extra` arguments.
pub fn start_hozon(extra: &[&str]) -> ServerProcess {
    start_server(hozon_server_path(), "hozon-server", extra)
}

/// The `hozon-server` binary that cargo built for the running test.
///
/// A crate of its own does not see the root package's
/// `CARGO_BIN_EXE_hozon-server` at compile time, so this looks at run
/// time: the variable as `cargo test` sets it in a test's environment,
/// else (a test executable run directly) the binary's place beside the
/// test executable's directory: `target/<profile>/hozon-server` for
/// `target/<profile>/deps/<test>`.
pub fn hozon_server_path() -> &'static str {
    static PATH: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    PATH.get_or_init(|| {
        if let Some(path) = std::env::var_os("CARGO_BIN_EXE_hozon-server") {
            return path.to_string_lossy().into_owned();
        }
        let exe = std::env::current_exe().expect("the test executable's path");
        let beside = exe
            .parent()
            .and_then(std::path::Path::parent)
            .map(|dir| dir.join("hozon-server"))
            .filter(|path| path.is_file());
        match beside {
            Some(path) => path.to_string_lossy().into_owned(),
            None => panic!(
                "hozon-server not found: CARGO_BIN_EXE_hozon-server is not set and no \
                 hozon-server is beside {} (run the tests with cargo test)",
                exe.display()
            ),
        }
    })
}

/// Starts `binary` on a free port with persistence off and a private data
/// directory (removed on drop); `extra` arguments come last, so they win.
fn start_server(binary: &str, name: &'static str, extra: &[&str]) -> ServerProcess {
    let mut failures = Vec::new();
    for _attempt in 0..5 {
        match try_start_on_port(binary, name, free_port(), extra) {
            Ok(server) => return server,
            Err(why) => failures.push(why),
        }
    }
    panic!("could not start {name}: {}", failures.join("; "));
}

/// Starts `binary` as [`start_server`] does, on `port`. None when it exits
/// at once (most likely the port was taken) or when the server answering
/// on the port is another process: then ours is stopped.
pub fn start_on_port(
    binary: &str,
    name: &'static str,
    port: u16,
    extra: &[&str],
) -> Option<ServerProcess> {
    try_start_on_port(binary, name, port, extra).ok()
}

/// [`start_on_port`], with the reason it did not start.
fn try_start_on_port(
    binary: &str,
    name: &'static str,
    port: u16,
    extra: &[&str],
) -> Result<ServerProcess, String> {
    let dir = tempfile::tempdir().expect("temp dir for a test server");
    let mut command = Command::new(binary);
    command
        .args(["--port", &port.to_string(), "--bind", "127.0.0.1"])
        .args(["--save", "", "--appendonly", "no"])
        .args(["--dir", &dir.path().to_string_lossy()])
        .args(extra);
    // A server given a password must be asked with it whether it loaded.
    let password = extra
        .iter()
        .position(|a| *a == "--requirepass")
        .and_then(|i| extra.get(i + 1))
        .filter(|pw| !pw.is_empty())
        .map(|pw| pw.to_string());
    spawn_listening(command, name, port, Some(dir), password.as_deref())
}

/// Starts `binary` with the configuration file `conf` as its only
/// argument (the file sets `port` to `port`, and its own `dir`). None
/// when it exits at once or another process answers on the port.
pub fn start_from_config(
    binary: &str,
    name: &'static str,
    port: u16,
    conf: &std::path::Path,
) -> Option<ServerProcess> {
    let mut command = Command::new(binary);
    command.arg(conf);
    spawn_listening(command, name, port, None, None).ok()
}

/// Spawns `command` (output discarded) and waits until it listens on
/// `port`. `Err` when it exits first or another process answers there
/// (ours is then stopped).
fn spawn_listening(
    mut command: Command,
    name: &'static str,
    port: u16,
    dir: Option<tempfile::TempDir>,
    password: Option<&str>,
) -> Result<ServerProcess, String> {
    let mut child = command
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap_or_else(|e| panic!("spawn {name}: {e}"));
    if let Err(why) = wait_until_listening(port, name, &mut child, password) {
        // Someone else's server on the port: ours cannot bind there.
        let _ = child.kill();
        let _ = child.wait();
        return Err(why);
    }
    Ok(ServerProcess {
        child,
        port,
        _dir: dir,
    })
}

/// A port nothing listens on now.
pub fn unused_port() -> u16 {
    free_port()
}

/// A client connection that reads one RESP reply per command.
pub struct Conn {
    stream: TcpStream,
    buf: Vec<u8>,
}

/// Encodes a command as a RESP multibulk request.
pub fn encode_command(args: &[&[u8]]) -> Vec<u8> {
    let mut out = format!("*{}\r\n", args.len()).into_bytes();
    for a in args {
        out.extend_from_slice(format!("${}\r\n", a.len()).as_bytes());
        out.extend_from_slice(a);
        out.extend_from_slice(b"\r\n");
    }
    out
}

impl Conn {
    /// Connects to 127.0.0.1:`port`.
    pub fn connect(port: u16) -> Conn {
        let stream = TcpStream::connect(("127.0.0.1", port)).expect("connect");
        stream
            .set_read_timeout(Some(Duration::from_secs(20)))
            .expect("timeout");
        stream.set_nodelay(true).expect("nodelay");
        Conn {
            stream,
            buf: Vec::new(),
        }
    }

    /// Sends a command and returns its raw reply.
    pub fn call(&mut self, args: &[&[u8]]) -> Vec<u8> {
        self.send_raw(&encode_command(args));
        self.read_reply()
    }

    /// Sends a command and returns its raw reply, or None when the
    /// connection fails (a server killed under a client's feet).
    pub fn try_call(&mut self, args: &[&[u8]]) -> Option<Vec<u8>> {
        self.stream.write_all(&encode_command(args)).ok()?;
        self.try_read_reply(Duration::from_secs(20))
    }

    /// Sends raw bytes.
    pub fn send_raw(&mut self, bytes: &[u8]) {
        self.stream.write_all(bytes).expect("write to server");
    }

    /// Reads exactly one reply.
    pub fn read_reply(&mut self) -> Vec<u8> {
        loop {
            match frame_len(&self.buf) {
                Ok(Some(n)) => return self.buf.drain(..n).collect(),
                Ok(None) => {}
                Err(e) => panic!("malformed reply ({e}): {}", show(&self.buf)),
            }
            let mut chunk = [0u8; 65536];
            match self.stream.read(&mut chunk) {
                Ok(0) => panic!(
                    "connection closed while waiting for a reply; got so far: {}",
                    show(&self.buf)
                ),
                Ok(n) => self.buf.extend_from_slice(&chunk[..n]),
                Err(e) => panic!("reading reply: {e}; got so far: {}", show(&self.buf)),
            }
        }
    }

    /// Reads one reply if one arrives within `wait`, else `None` (to show
    /// that a reply is being held back).
    pub fn try_read_reply(&mut self, wait: Duration) -> Option<Vec<u8>> {
        self.stream.set_read_timeout(Some(wait)).expect("timeout");
        let mut chunk = [0u8; 65536];
        let result = loop {
            if let Ok(Some(n)) = frame_len(&self.buf) {
                break Some(self.buf.drain(..n).collect());
            }
            match self.stream.read(&mut chunk) {
                Ok(0) => break None,
                Ok(n) => self.buf.extend_from_slice(&chunk[..n]),
                Err(_) => break None,
            }
        };
        self.stream
            .set_read_timeout(Some(Duration::from_secs(20)))
            .expect("timeout");
        result
    }

    /// Reads until the server closes the connection (or 5 s pass).
    pub fn read_until_close(&mut self) -> Vec<u8> {
        self.stream
            .set_read_timeout(Some(Duration::from_secs(5)))
            .expect("timeout");
        let mut all = std::mem::take(&mut self.buf);
        let mut chunk = [0u8; 65536];
        loop {
            match self.stream.read(&mut chunk) {
                Ok(0) => return all,
                Ok(n) => all.extend_from_slice(&chunk[..n]),
                Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => return all,
                Err(e) => panic!("reading until close: {e}; got so far: {}", show(&all)),
            }
        }
    }
}

/// Printable form of raw protocol bytes.
pub fn show(bytes: &[u8]) -> String {
    String::from_utf8_lossy(&bytes.escape_ascii().collect::<Vec<u8>>()).into_owned()
}

/// Sends `PING <fence>` on `conn` and returns the frames that arrive
/// before its reply (a bulk string, or `["pong", fence]` in RESP2
/// subscribed mode: either way not a Pub/Sub or push message). Panics
/// with what did arrive when no reply comes `within`.
pub fn frames_before_fence(conn: &mut Conn, fence: &str, within: Duration) -> Vec<Vec<u8>> {
    conn.send_raw(&encode_command(&[b"PING", fence.as_bytes()]));
    let bulk = format!("${}\r\n{fence}\r\n", fence.len()).into_bytes();
    let pong = format!("*2\r\n$4\r\npong\r\n${}\r\n{fence}\r\n", fence.len()).into_bytes();
    let deadline = Instant::now() + within;
    let mut out = Vec::new();
    loop {
        let frame = conn
            .try_read_reply(deadline.saturating_duration_since(Instant::now()))
            .unwrap_or_else(|| {
                panic!(
                    "no reply to the PING fence; got before it: {:?}",
                    out.iter().map(|f: &Vec<u8>| show(f)).collect::<Vec<_>>()
                )
            });
        if frame == bulk || frame == pong {
            return out;
        }
        out.push(frame);
    }
}

/// Splits a script line like redis-cli does (quotes, escapes).
pub fn split_line(line: &str) -> Vec<Vec<u8>> {
    hozon::resp::split_args(line.as_bytes())
        .unwrap_or_else(|| panic!("unbalanced quotes in script line: {line}"))
}

/// The payload of a bulk string reply (`$<len>\r\n<bytes>\r\n`): panics,
/// showing the reply, when it is anything else.
#[track_caller]
pub fn bulk_payload(reply: &[u8]) -> Vec<u8> {
    assert_eq!(reply.first(), Some(&b'$'), "not a bulk: {}", show(reply));
    let header_end = reply
        .windows(2)
        .position(|w| w == b"\r\n")
        .unwrap_or_else(|| panic!("no bulk header line: {}", show(reply)));
    let len: usize = std::str::from_utf8(&reply[1..header_end])
        .ok()
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("not a bulk with contents: {}", show(reply)));
    let body = header_end + 2;
    assert!(
        reply.len() >= body + len + 2 && &reply[body + len..body + len + 2] == b"\r\n",
        "a truncated bulk: {}",
        show(reply)
    );
    reply[body..body + len].to_vec()
}

/// The payloads of the bulk strings in a flat aggregate reply.
#[track_caller]
pub fn bulk_payloads(reply: &[u8]) -> Vec<Vec<u8>> {
    array_elements(reply)
        .iter()
        .map(|e| bulk_payload(e))
        .collect()
}

/// Splits a flat RESP array reply into its elements' raw encodings.
pub fn array_elements(reply: &[u8]) -> Vec<Vec<u8>> {
    assert!(
        matches!(reply.first(), Some(b'*' | b'~' | b'%')),
        "not an aggregate reply: {}",
        show(reply)
    );
    let header_end = reply
        .windows(2)
        .position(|w| w == b"\r\n")
        .expect("header line")
        + 2;
    let mut count: usize = std::str::from_utf8(&reply[1..header_end - 2])
        .expect("count")
        .parse()
        .unwrap_or(0);
    if reply[0] == b'%' {
        count *= 2;
    }
    let mut pos = header_end;
    let mut out = Vec::new();
    for _ in 0..count {
        let len = frame_len(&reply[pos..])
            .expect("valid element")
            .expect("complete element");
        out.push(reply[pos..pos + len].to_vec());
        pos += len;
    }
    out
}

/// A redis-server and a hozon-server with one connection to each.
pub struct Pair {
    /// Connection to Redis.
    pub r: Conn,
    /// Connection to hozon.
    pub h: Conn,
    /// The Redis process.
    pub redis_server: ServerProcess,
    /// The hozon process.
    pub hozon_server: ServerProcess,
}

impl Pair {
    /// Fresh servers, persistence off.
    pub fn new() -> Pair {
        Pair::with_args(&[], &[])
    }

    /// Fresh servers with extra arguments for each.
    pub fn with_args(redis_extra: &[&str], hozon_extra: &[&str]) -> Pair {
        let redis_server = start_redis(redis_extra);
        let hozon_server = start_hozon(hozon_extra);
        Pair {
            r: Conn::connect(redis_server.port),
            h: Conn::connect(hozon_server.port),
            redis_server,
            hozon_server,
        }
    }

    /// Another pair of connections to the same servers.
    pub fn connect_more(&self) -> (Conn, Conn) {
        (
            Conn::connect(self.redis_server.port),
            Conn::connect(self.hozon_server.port),
        )
    }

    /// Sends to both and returns (redis, hozon) raw replies.
    pub fn both_bytes(&mut self, args: &[&[u8]]) -> (Vec<u8>, Vec<u8>) {
        (self.r.call(args), self.h.call(args))
    }

    /// Sends to both and returns (redis, hozon) raw replies.
    pub fn both(&mut self, args: &[&str]) -> (Vec<u8>, Vec<u8>) {
        let args: Vec<&[u8]> = args.iter().map(|a| a.as_bytes()).collect();
        self.both_bytes(&args)
    }

    /// Sends to both and asserts the raw replies are identical.
    #[track_caller]
    pub fn check_bytes(&mut self, args: &[&[u8]]) -> Vec<u8> {
        let (r, h) = self.both_bytes(args);
        if r != h {
            let cmd: Vec<String> = args.iter().map(|a| show(a)).collect();
            panic!(
                "replies differ for {:?}\n  redis: {}\n  hozon: {}",
                cmd.join(" "),
                show(&r),
                show(&h)
            );
        }
        r
    }

    /// Sends to both and asserts the raw replies are identical.
    #[track_caller]
    pub fn check(&mut self, args: &[&str]) -> Vec<u8> {
        let args: Vec<&[u8]> = args.iter().map(|a| a.as_bytes()).collect();
        self.check_bytes(&args)
    }

    /// Sends to both; the replies must be aggregates with the same
    /// elements in any order (unordered collections, KEYS).
    #[track_caller]
    pub fn check_unordered(&mut self, args: &[&str]) -> Vec<u8> {
        let (r, h) = self.both(args);
        if r == h {
            return r;
        }
        let same_kind = r.first() == h.first();
        let mut re = if same_kind && matches!(r.first(), Some(b'*' | b'~')) {
            array_elements(&r)
        } else {
            vec![r.clone()]
        };
        let mut he = if same_kind && matches!(h.first(), Some(b'*' | b'~')) {
            array_elements(&h)
        } else {
            vec![h.clone()]
        };
        re.sort();
        he.sort();
        if re != he {
            panic!(
                "replies differ (unordered) for {:?}\n  redis: {}\n  hozon: {}",
                args.join(" "),
                show(&r),
                show(&h)
            );
        }
        r
    }

    /// Runs a script: one command per line (redis-cli quoting); blank lines
    /// and lines starting with `#` are skipped. Every reply must match, byte
    /// for byte, or as a multiset (see [`Pair::check_unordered`]) on lines
    /// starting with `~`.
    #[track_caller]
    pub fn script(&mut self, text: &str) {
        for line in text.lines() {
            let line = line.trim();
            if line.is_empty() || line.starts_with('#') {
                continue;
            }
            match line.strip_prefix('~') {
                Some(rest) => {
                    let args: Vec<String> = split_line(rest.trim())
                        .into_iter()
                        .map(|a| String::from_utf8(a).expect("unordered lines are UTF-8"))
                        .collect();
                    let refs: Vec<&str> = args.iter().map(String::as_str).collect();
                    self.check_unordered(&refs);
                }
                None => {
                    let args = split_line(line);
                    let refs: Vec<&[u8]> = args.iter().map(Vec::as_slice).collect();
                    self.check_bytes(&refs);
                }
            }
        }
    }

    /// Switches both connections to RESP3.
    pub fn resp3(&mut self) {
        self.r.call(&[b"HELLO", b"3"]);
        self.h.call(&[b"HELLO", b"3"]);
    }

    /// One command to Redis only.
    pub fn redis(&mut self, args: &[&str]) -> Vec<u8> {
        let args: Vec<&[u8]> = args.iter().map(|a| a.as_bytes()).collect();
        self.r.call(&args)
    }

    /// One command to hozon only.
    pub fn hozon(&mut self, args: &[&str]) -> Vec<u8> {
        let args: Vec<&[u8]> = args.iter().map(|a| a.as_bytes()).collect();
        self.h.call(&args)
    }
}

impl Default for Pair {
    fn default() -> Self {
        Pair::new()
    }
}

/// Checks `property` on `tests` random inputs of QuickCheck size `size`;
/// the random command-sequence tests of every module use it.
pub fn quickcheck_ops<T>(size: usize, tests: u64, property: fn(Vec<T>) -> TestResult)
where
    T: Arbitrary + std::fmt::Debug,
{
    seeded_quickcheck(size, tests).quickcheck(property);
}

/// Runs `f` on this thread's pair of servers, started on first use (in
/// RESP3 when `resp3`). QuickCheck calls a property many times per test and
/// each test runs on its own thread, so one pair serves a whole test.
pub fn with_thread_pair<R>(resp3: bool, f: impl FnOnce(&mut Pair) -> R) -> R {
    thread_local! {
        static PAIR: RefCell<Option<(Pair, bool)>> = const { RefCell::new(None) };
    }
    PAIR.with(|cell| {
        let mut slot = cell.borrow_mut();
        if slot.as_ref().is_some_and(|(_, r)| *r != resp3) {
            *slot = None;
        }
        let (p, _) = slot.get_or_insert_with(|| {
            let mut p = Pair::new();
            if resp3 {
                p.resp3();
            }
            (p, resp3)
        });
        f(p)
    })
}

/// Sends every command of `all` to both servers in turn; `same` decides
/// whether the two replies agree (it may query the servers). The first
/// disagreement is an error showing the commands so far, less the first
/// `setup` ones.
pub fn compare_sequence(
    p: &mut Pair,
    all: &[Vec<String>],
    setup: usize,
    mut same: impl FnMut(&mut Pair, &[String], &[u8], &[u8]) -> bool,
) -> TestResult {
    for (i, words) in all.iter().enumerate() {
        let args: Vec<&str> = words.iter().map(String::as_str).collect();
        let (r, h) = p.both(&args);
        if !same(p, words, &r, &h) {
            let history: Vec<String> = all[setup.min(i)..=i]
                .iter()
                .map(|w| format!("{w:?}"))
                .collect();
            return TestResult::error(format!(
                "replies differ for {:?}\n  redis: {}\n  hozon: {}\n  sequence{}:\n    {}",
                words.join(" "),
                show(&r),
                show(&h),
                if setup > 0 { " after setup" } else { "" },
                history.join("\n    ")
            ));
        }
    }
    TestResult::passed()
}

/// Byte-for-byte equality, the usual `same` for [`compare_sequence`].
pub fn identical(_: &mut Pair, _: &[String], r: &[u8], h: &[u8]) -> bool {
    r == h
}

/// `DEL` of every key in `keys`.
pub fn del_command(keys: &[&str]) -> Vec<String> {
    std::iter::once("DEL")
        .chain(keys.iter().copied())
        .map(String::from)
        .collect()
}

/// Sorts the elements of two aggregate replies and compares them.
pub fn same_elements(r: &[u8], h: &[u8]) -> bool {
    let mut re = array_elements(r);
    let mut he = array_elements(h);
    re.sort();
    he.sort();
    re == he
}

/// Runs `script` (see [`Pair::script`]) in RESP2, then again in RESP3 on
/// a fresh database (SELECT 1), every reply compared with Redis.
#[track_caller]
pub fn check_both_protocols(script: &str) {
    let mut p = Pair::new();
    p.script(script);
    p.resp3();
    p.check(&["SELECT", "1"]);
    p.script(script);
}

/// Sends a command built from owned strings to both servers and compares.
#[track_caller]
pub fn check_owned(p: &mut Pair, args: &[String]) -> Vec<u8> {
    let refs: Vec<&str> = args.iter().map(String::as_str).collect();
    p.check(&refs)
}

/// Sends `sig` (`-STOP`, `-CONT`, `-TERM`, …) to process `pid` with
/// kill(1); panics when that fails.
pub fn signal(pid: u32, sig: &str) {
    let status = Command::new("kill")
        .args([sig, &pid.to_string()])
        .status()
        .expect("run kill");
    assert!(status.success(), "kill {sig} {pid}");
}
