//! What the robustness tests measure: the server's resident memory, and
//! whether another client is still answered promptly.

#![allow(dead_code)] // each test module uses a different part

use std::io::{ErrorKind, Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

/// How long a PING from a well-behaved client may take while another
/// client abuses the server: a liveness bound, not a performance target.
pub const LIVENESS: Duration = Duration::from_secs(2);

/// The resident set size of process `pid`, in KiB (VmRSS).
pub fn rss_kb(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).expect("read /proc status");
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .expect("VmRSS line")
}

/// Resets the peak resident set size of process `pid` (VmHWM), so
/// [`peak_rss_kb`] measures from now.
pub fn reset_peak_rss(pid: u32) {
    std::fs::write(format!("/proc/{pid}/clear_refs"), "5").expect("reset VmHWM via clear_refs");
}

/// The peak resident set size of process `pid` since its start or the
/// last [`reset_peak_rss`], in KiB (VmHWM).
pub fn peak_rss_kb(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).expect("read /proc status");
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .expect("VmHWM line")
}

/// A well-behaved client that pings the server while others abuse it.
pub struct Probe {
    stream: TcpStream,
    /// The slowest PING so far.
    pub slowest: Duration,
    /// PINGs answered.
    pub pings: usize,
}

impl Probe {
    /// Connects to 127.0.0.1:`port` (before the abuse starts, so the
    /// probe does not depend on accepting new connections).
    pub fn connect(port: u16) -> Probe {
        let stream = TcpStream::connect(("127.0.0.1", port)).expect("probe connects");
        stream.set_nodelay(true).expect("nodelay");
        stream
            .set_read_timeout(Some(LIVENESS * 5))
            .expect("read timeout");
        Probe {
            stream,
            slowest: Duration::ZERO,
            pings: 0,
        }
    }

    /// Sends PING and waits for +PONG; panics if it takes longer than
    /// [`LIVENESS`] (or never comes).
    #[track_caller]
    pub fn ping(&mut self) -> Duration {
        let start = Instant::now();
        self.stream
            .write_all(b"*1\r\n$4\r\nPING\r\n")
            .expect("probe writes PING");
        let mut reply = Vec::new();
        let mut chunk = [0u8; 64];
        while reply.len() < 7 {
            match self.stream.read(&mut chunk) {
                Ok(0) => panic!("server closed the probe connection"),
                Ok(n) => reply.extend_from_slice(&chunk[..n]),
                Err(e) => panic!("probe got no PONG within {:?}: {e}", LIVENESS * 5),
            }
        }
        assert_eq!(reply, b"+PONG\r\n", "probe reply");
        let took = start.elapsed();
        assert!(
            took <= LIVENESS,
            "PING took {took:?} while the server was being abused (bound {LIVENESS:?})"
        );
        self.slowest = self.slowest.max(took);
        self.pings += 1;
        took
    }

    /// Sends `command` (inline) and returns the reply bytes read until
    /// `done` says the reply is complete.
    pub fn call_inline(&mut self, command: &str) -> Vec<u8> {
        self.stream
            .write_all(format!("{command}\r\n").as_bytes())
            .expect("probe writes");
        let mut reply = Vec::new();
        let mut chunk = [0u8; 4096];
        loop {
            if let Ok(Some(n)) = hozon::resp::reply_frame::frame_len(&reply) {
                reply.truncate(n);
                return reply;
            }
            match self.stream.read(&mut chunk) {
                Ok(0) => panic!("server closed the probe connection"),
                Ok(n) => reply.extend_from_slice(&chunk[..n]),
                Err(e) => panic!("probe reply: {e}"),
            }
        }
    }

    /// `connected_clients` from INFO clients.
    pub fn connected_clients(&mut self) -> u64 {
        self.info_int("clients", "connected_clients")
    }

    /// The integer field `name` of INFO `section`.
    fn info_int(&mut self, section: &str, name: &str) -> u64 {
        let reply = self.call_inline(&format!("INFO {section}"));
        let text = String::from_utf8_lossy(&reply);
        text.lines()
            .find_map(|l| l.strip_prefix(name)?.strip_prefix(':'))
            .and_then(|v| v.trim().parse().ok())
            .unwrap_or_else(|| panic!("{name} in INFO {section}"))
    }

    /// `used_memory` from INFO memory: what the server has allocated now
    /// (its counting allocator), without what the allocator keeps after
    /// frees.
    pub fn used_memory(&mut self) -> u64 {
        self.info_int("memory", "used_memory")
    }

    /// Polls `connected_clients` until it is `count` (true) or `within`
    /// passes (false).
    pub fn wait_for_clients(&mut self, count: u64, within: Duration) -> bool {
        let deadline = Instant::now() + within;
        loop {
            if self.connected_clients() == count {
                return true;
            }
            if Instant::now() > deadline {
                return false;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

/// What a client that never reads managed to do.
pub struct Flood {
    /// The connection, still open on our side.
    pub stream: TcpStream,
    /// Bytes of requests the server's side accepted.
    pub bytes_sent: usize,
    /// The server closed the connection (a write failed).
    pub closed_by_server: bool,
}

/// Writes `request` again and again on a new connection without reading
/// anything, until the server stops taking bytes for `stall`, closes the
/// connection, `max_bytes` were sent or `max_time` passed.
pub fn flood_without_reading(
    port: u16,
    request: &[u8],
    max_bytes: usize,
    stall: Duration,
    max_time: Duration,
) -> Flood {
    let mut stream = TcpStream::connect(("127.0.0.1", port)).expect("flooder connects");
    stream.set_nonblocking(true).expect("nonblocking");
    let copies = (64 * 1024 / request.len()).max(1);
    let block: Vec<u8> = request.repeat(copies);
    let start = Instant::now();
    let mut bytes_sent = 0usize;
    let mut offset = 0usize;
    let mut stalled_since: Option<Instant> = None;
    let mut closed_by_server = false;
    while bytes_sent < max_bytes && start.elapsed() < max_time {
        let end = block.len().min(offset + (max_bytes - bytes_sent));
        match stream.write(&block[offset..end]) {
            Ok(0) => {
                closed_by_server = true;
                break;
            }
            Ok(n) => {
                bytes_sent += n;
                offset = (offset + n) % block.len();
                stalled_since = None;
            }
            Err(e) if e.kind() == ErrorKind::WouldBlock => {
                let since = *stalled_since.get_or_insert_with(Instant::now);
                if since.elapsed() >= stall {
                    break;
                }
                // Backing off while the server does not read: the
                // condition measured is the stall itself.
                std::thread::sleep(Duration::from_millis(2));
            }
            Err(e) if e.kind() == ErrorKind::Interrupted => {}
            Err(_) => {
                closed_by_server = true;
                break;
            }
        }
    }
    stream.set_nonblocking(false).expect("blocking again");
    Flood {
        stream,
        bytes_sent,
        closed_by_server,
    }
}

/// Reads from `stream` until the peer closes it (true) or `within`
/// passes (false).
pub fn closed_within(stream: &mut TcpStream, within: Duration) -> bool {
    let deadline = Instant::now() + within;
    let mut chunk = vec![0u8; 256 * 1024];
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return false;
        }
        stream.set_read_timeout(Some(left)).expect("timeout");
        match stream.read(&mut chunk) {
            Ok(0) => return true,
            Ok(_) => {}
            Err(e) if e.kind() == ErrorKind::ConnectionReset => return true,
            Err(e) if e.kind() == ErrorKind::Interrupted => {}
            Err(_) => return false,
        }
    }
}

/// A server process started by a test under a shell `ulimit -n`, killed
/// when dropped.
pub struct Spawned {
    child: std::process::Child,
    /// The port it listens on.
    pub port: u16,
    _dir: tempfile::TempDir,
}

impl Drop for Spawned {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Starts `binary` (persistence off, a private data directory, a free
/// port on 127.0.0.1, then `args`) with its open-files limit set to
/// `open_files` (soft and hard), and waits until it answers PING.
pub fn spawn_with_open_files(binary: &str, open_files: u32, args: &[&str]) -> Spawned {
    // An exit during startup is most likely another test's server taking
    // the port first: start again on another.
    let mut failures = Vec::new();
    for _attempt in 0..5 {
        match try_spawn_with_open_files(binary, open_files, args) {
            Ok(server) => return server,
            Err(why) => failures.push(why),
        }
    }
    panic!("{binary} did not start: {}", failures.join("; "));
}

fn try_spawn_with_open_files(
    binary: &str,
    open_files: u32,
    args: &[&str],
) -> Result<Spawned, String> {
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .expect("ephemeral port")
        .local_addr()
        .expect("addr")
        .port();
    let dir = tempfile::tempdir().expect("temp dir");
    let port_arg = port.to_string();
    let dir_arg = dir.path().to_string_lossy().into_owned();
    let mut command = std::process::Command::new("sh");
    command
        .arg("-c")
        .arg(format!("ulimit -n {open_files} && exec \"$0\" \"$@\""))
        .arg(binary)
        .args(["--port", &port_arg, "--bind", "127.0.0.1"])
        .args(["--save", "", "--appendonly", "no", "--dir", &dir_arg])
        .args(args)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null());
    let child = command.spawn().expect("spawn the server");
    let mut server = Spawned {
        child,
        port,
        _dir: dir,
    };
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        if let Ok(mut s) = TcpStream::connect(("127.0.0.1", port)) {
            let _ = s.set_read_timeout(Some(Duration::from_secs(2)));
            let mut reply = [0u8; 7];
            if s.write_all(b"*1\r\n$4\r\nPING\r\n").is_ok() && s.read_exact(&mut reply).is_ok() {
                return Ok(server);
            }
        }
        if let Ok(Some(status)) = server.child.try_wait() {
            return Err(format!("exited during startup on port {port}: {status}"));
        }
        assert!(Instant::now() < deadline, "{binary} did not start");
        std::thread::sleep(Duration::from_millis(10));
    }
}
