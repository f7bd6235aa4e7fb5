//! Faults injected from outside the process into the real `hozon-server`
//! binary: an LD_PRELOAD library (`fault_shim.c`, built here with `cc`)
//! makes the AOF's write(2) fail with ENOSPC and its fdatasync, or a
//! directory's fsync, fail with EIO, when the test arms it. Under
//! `appendfsync always`:
//!
//! - a write whose batch failed to write and whose retried fsync failed
//!   never gets `+OK`;
//! - a failed directory fsync at the AOF rewrite's switch does not send
//!   later writes to the old, nameless file: they are refused;
//! - after any mix of those faults under load, SIGKILL and a restart find
//!   every acknowledged write.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

use hozon::rand::Rng;

use crate::common::seed;
use crate::harness::{encode_command, Conn};

/// Builds the shim once per test run (panics, loudly, without `cc`).
fn shim() -> &'static Path {
    static SHIM: OnceLock<PathBuf> = OnceLock::new();
    SHIM.get_or_init(|| {
        let out = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("hozon_fault_shim.so");
        let source = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/persistence/fault_shim.c");
        let status = Command::new("cc")
            .args(["-shared", "-fPIC", "-O1", "-o"])
            .arg(&out)
            .arg(&source)
            .args(["-ldl", "-lpthread"])
            .status()
            .unwrap_or_else(|e| panic!("running cc to build the fault shim: {e} (install gcc)"));
        assert!(status.success(), "cc failed to build {}", source.display());
        out
    })
}

/// hozon-server on a data directory, with the shim preloaded.
pub(crate) struct Server {
    child: Child,
    pub(crate) port: u16,
}

impl Server {
    fn start(dir: &Path, ctl: &Path, log: &Path, extra: &[&str]) -> Server {
        // `--port P` among the extra arguments: that port (a restart).
        let fixed = extra
            .windows(2)
            .find(|w| w[0] == "--port")
            .map(|w| w[1].parse::<u16>().expect("a port number"));
        for _ in 0..5 {
            let port = fixed.unwrap_or_else(|| {
                std::net::TcpListener::bind("127.0.0.1:0")
                    .unwrap()
                    .local_addr()
                    .unwrap()
                    .port()
            });
            let mut child = Command::new(env!("CARGO_BIN_EXE_hozon-server"))
                .args(["--port", &port.to_string(), "--bind", "127.0.0.1"])
                .args([
                    "--appendonly",
                    "yes",
                    "--appendfsync",
                    "always",
                    "--save",
                    "",
                ])
                .args(["--dir", &dir.to_string_lossy()])
                .args(extra)
                .env("LD_PRELOAD", shim())
                .env("HOZON_FAULT_CTL", ctl)
                .env("HOZON_FAULT_LOG", log)
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn()
                .expect("spawn hozon-server");
            let deadline = Instant::now() + Duration::from_secs(20);
            loop {
                if let Ok(Some(_)) = child.try_wait() {
                    break; // the port was taken: try another
                }
                if std::net::TcpStream::connect(("127.0.0.1", port)).is_ok() {
                    // It listens while its files load (-LOADING).
                    if testkit::harness::wait_until_loaded(port, Duration::from_secs(20)) {
                        return Server { child, port };
                    }
                    continue; // exited meanwhile (the load failed, or the port)
                }
                assert!(Instant::now() < deadline, "hozon-server did not start");
                std::thread::sleep(Duration::from_millis(5));
            }
        }
        panic!("could not start hozon-server");
    }

    pub(crate) fn kill9(mut self) {
        let _ = self.child.kill(); // SIGKILL
        let _ = self.child.wait();
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A data directory with the shim's control and log files.
pub(crate) struct Setup {
    dir: tempfile::TempDir,
    ctl: PathBuf,
    log: PathBuf,
}

impl Setup {
    pub(crate) fn new() -> Setup {
        let dir = tempfile::tempdir().expect("temp dir");
        let ctl = dir.path().join("faults.ctl");
        let log = dir.path().join("faults.log");
        let data = dir.path().join("data");
        std::fs::create_dir(&data).unwrap();
        let setup = Setup { dir, ctl, log };
        setup.arm(0, 0, 0);
        setup
    }

    fn data(&self) -> PathBuf {
        self.dir.path().join("data")
    }

    fn start(&self) -> Server {
        self.start_with(&[])
    }

    /// [`Setup::start`] with more arguments for the server.
    pub(crate) fn start_with(&self, extra: &[&str]) -> Server {
        Server::start(&self.data(), &self.ctl, &self.log, extra)
    }

    /// Arms the next `writes` AOF writes, `syncs` AOF fsyncs and `dirs`
    /// directory fsyncs to fail.
    /// Holds the shim's lock (`<ctl>.lock`) meanwhile, so that a server
    /// taking a failure at the same moment cannot write back the old count.
    pub(crate) fn arm(&self, writes: u32, syncs: u32, dirs: u32) {
        let lock = std::fs::OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(self.ctl.with_extension("ctl.lock"))
            .unwrap();
        lock.lock().unwrap();
        let tmp = self.ctl.with_extension("new");
        std::fs::write(&tmp, format!("{writes} {syncs} {dirs}\n")).unwrap();
        std::fs::rename(&tmp, &self.ctl).unwrap();
        lock.unlock().unwrap();
    }

    fn fired(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    pub(crate) fn wait_fired(&self, what: &str) {
        let deadline = Instant::now() + Duration::from_secs(10);
        while !self.fired().contains(what) {
            assert!(
                Instant::now() < deadline,
                "the shim never injected {what:?} (fired: {:?})",
                self.fired()
            );
            std::thread::sleep(Duration::from_millis(5));
        }
    }
}

#[test]
fn a_retried_write_whose_fsync_failed_never_gets_ok() {
    let setup = Setup::new();
    let server = setup.start();
    let mut writer = Conn::connect(server.port);
    let mut other = Conn::connect(server.port);
    assert_eq!(writer.call(&[b"SET", b"a", b"1"]), b"+OK\r\n");
    // The next AOF write fails (ENOSPC): the reply is held and cron
    // retries the batch; the retry's write succeeds and its fdatasync fails.
    setup.arm(1, 1, 0);
    writer.send_raw(&encode_command(&[b"SET", b"b", b"2"]));
    let got = writer.read_until_close();
    assert!(
        !got.starts_with(b"+OK"),
        "+OK for a write whose fsync failed: {:?}",
        String::from_utf8_lossy(&got)
    );
    setup.wait_fired("write ENOSPC");
    setup.wait_fired("fdatasync EIO");
    let refused = other.call(&[b"SET", b"c", b"3"]);
    assert!(
        refused.starts_with(b"-MISCONF"),
        "{}",
        String::from_utf8_lossy(&refused)
    );
    server.kill9();
    setup.arm(0, 0, 0);
    let server = setup.start();
    let mut check = Conn::connect(server.port);
    assert_eq!(check.call(&[b"GET", b"a"]), b"$1\r\n1\r\n");
}

#[test]
fn a_failed_directory_fsync_at_the_rewrite_switch_loses_no_acknowledged_write() {
    let setup = Setup::new();
    let server = setup.start();
    let mut conn = Conn::connect(server.port);
    let mut acked = Vec::new();
    for i in 0..200 {
        let key = format!("before:{i}");
        assert_eq!(conn.call(&[b"SET", key.as_bytes(), b"v"]), b"+OK\r\n");
        acked.push(key);
    }
    // The first directory fsync after BGREWRITEAOF is the switch's, after
    // the rename of the new file over appendonly.aof.
    setup.arm(0, 0, 1);
    conn.call(&[b"BGREWRITEAOF"]);
    setup.wait_fired("dirsync EIO");
    let deadline = Instant::now() + Duration::from_secs(20);
    while !String::from_utf8_lossy(&conn.call(&[b"INFO", b"persistence"]))
        .contains("aof_rewrite_in_progress:0")
    {
        assert!(Instant::now() < deadline, "the rewrite did not end");
    }
    let mut refused = 0;
    for i in 0..50 {
        let key = format!("after:{i}");
        let reply = conn.call(&[b"SET", key.as_bytes(), b"v"]);
        if reply == b"+OK\r\n" {
            acked.push(key);
        } else {
            assert!(
                reply.starts_with(b"-MISCONF"),
                "{}",
                String::from_utf8_lossy(&reply)
            );
            refused += 1;
        }
    }
    assert_eq!(refused, 50, "writes acknowledged after an unsynced switch");
    server.kill9();
    setup.arm(0, 0, 0);
    let server = setup.start();
    let mut check = Conn::connect(server.port);
    for key in &acked {
        assert_eq!(
            check.call(&[b"EXISTS", key.as_bytes()]),
            b":1\r\n",
            "acknowledged {key} lost"
        );
    }
}

fn rounds() -> u64 {
    std::env::var("HOZON_OUTSIDE_ROUNDS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(6)
}

/// Rounds of load with faults armed at random moments (failing writes,
/// failing fsyncs, failing directory fsyncs around BGREWRITEAOF), then
/// SIGKILL and a restart: every acknowledged push is there, and each
/// client's list is a prefix of what it pushed.
#[test]
fn faults_under_load_then_sigkill_lose_no_acknowledged_write() {
    const CLIENTS: usize = 4;
    let seed = seed(23);
    let mut rng = Rng::with_seed(seed);
    let setup = Setup::new();
    let acked: Arc<Mutex<Vec<i64>>> = Arc::new(Mutex::new(vec![0; CLIENTS]));
    let mut fired_total = 0;
    for round in 0..rounds() {
        setup.arm(0, 0, 0);
        let server = setup.start();
        let mut check = Conn::connect(server.port);
        for c in 0..CLIENTS {
            let list = format!("list{c}");
            let all = check.call(&[b"LRANGE", list.as_bytes(), b"0", b"-1"]);
            let items = crate::harness::array_elements(&all);
            let want = acked.lock().unwrap()[c];
            assert!(
                items.len() as i64 >= want,
                "seed {seed} round {round}: client {c} has {} items, {want} were acknowledged",
                items.len()
            );
            for (i, item) in items.iter().enumerate() {
                let text = String::from_utf8_lossy(item);
                assert!(
                    text.ends_with(&format!("\r\n{}\r\n", i + 1)),
                    "seed {seed} round {round}: client {c}'s list is not a prefix at {i}: {text:?}"
                );
            }
            acked.lock().unwrap()[c] = items.len() as i64;
        }
        let stop = Arc::new(AtomicBool::new(false));
        let threads: Vec<_> = (0..CLIENTS)
            .map(|c| {
                let (port, stop, acked) = (server.port, Arc::clone(&stop), Arc::clone(&acked));
                std::thread::spawn(move || {
                    let mut conn = Conn::connect(port);
                    let list = format!("list{c}");
                    while !stop.load(Ordering::SeqCst) {
                        let next = acked.lock().unwrap()[c] + 1;
                        let req = encode_command(&[
                            b"RPUSH",
                            list.as_bytes(),
                            next.to_string().as_bytes(),
                        ]);
                        conn.send_raw(&req);
                        match conn.try_read_reply(Duration::from_secs(5)) {
                            Some(r) if r == format!(":{next}\r\n").into_bytes() => {
                                acked.lock().unwrap()[c] = next
                            }
                            // Refused (MISCONF), disconnected or killed:
                            // nothing more from this client this round.
                            _ => return,
                        }
                    }
                })
            })
            .collect();
        std::thread::sleep(Duration::from_millis(20 + rng.below(80)));
        let (w, f, d) = match rng.below(4) {
            0 => (1, 0, 0),
            1 => (0, 1, 0),
            2 => (1, 1, 0),
            _ => (0, 0, 1),
        };
        setup.arm(w, f, d);
        if d > 0 || rng.below(10) < 3 {
            check.send_raw(&encode_command(&[b"BGREWRITEAOF"]));
        }
        std::thread::sleep(Duration::from_millis(50 + rng.below(150)));
        server.kill9();
        stop.store(true, Ordering::SeqCst);
        for t in threads {
            let _ = t.join();
        }
        fired_total = setup.fired().lines().count();
    }
    eprintln!(
        "seed {seed}: {} rounds, {fired_total} faults injected, acknowledged pushes {:?}",
        rounds(),
        acked.lock().unwrap()
    );
    assert!(
        fired_total > 0,
        "no fault was ever injected: the check proved nothing"
    );
}
