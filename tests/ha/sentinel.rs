//! Three `redis-sentinel` processes monitor a hozon master with two hozon
//! replicas. The master is SIGKILLed under a steady write load: Sentinel
//! promotes a replica, the other replica follows it with a partial
//! resync, every write `WAIT 1` acknowledged before the kill is on the
//! new master, and the old master, restarted on its own files, is turned
//! into a replica of the new one. A redis-py client using Sentinel
//! discovery writes through the failover.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use testkit::clients::{python_with_redis_py, repo_root, run_client};
use testkit::harness::{
    hozon_server_path, start_hozon, start_on_port, unused_port, Conn, ServerProcess,
};

use crate::{call, info_field, Value};

/// A running `redis-sentinel` (killed on drop), with its config file.
struct Sentinel {
    child: Child,
    port: u16,
    log: PathBuf,
}

impl Drop for Sentinel {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

const SENTINEL: &str = "/usr/bin/redis-sentinel";

/// Starts a sentinel monitoring `master_port` as `mymaster` (quorum 2,
/// down after 1 s), its files in `dir`.
fn start_sentinel(dir: &Path, master_port: u16) -> Sentinel {
    assert!(
        Path::new(SENTINEL).exists(),
        "{SENTINEL} is missing: install Debian's redis-sentinel (scripts/test does)"
    );
    for _ in 0..5 {
        let port = unused_port();
        let conf = dir.join(format!("sentinel-{port}.conf"));
        let log = dir.join(format!("sentinel-{port}.log"));
        std::fs::write(
            &conf,
            format!(
                "port {port}\nbind 127.0.0.1\ndir {}\nlogfile {}\n\
                 sentinel monitor mymaster 127.0.0.1 {master_port} 2\n\
                 sentinel down-after-milliseconds mymaster 1000\n\
                 sentinel failover-timeout mymaster 10000\n",
                dir.display(),
                log.display()
            ),
        )
        .expect("write the sentinel's config");
        let child = Command::new(SENTINEL)
            .arg(&conf)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("spawn redis-sentinel");
        let mut sentinel = Sentinel { child, port, log };
        let deadline = Instant::now() + Duration::from_secs(5);
        while Instant::now() < deadline {
            if let Ok(Some(_)) = sentinel.child.try_wait() {
                break;
            }
            if std::net::TcpStream::connect(("127.0.0.1", port)).is_ok() {
                return sentinel;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        drop(sentinel);
    }
    panic!("could not start redis-sentinel");
}

/// Waits up to `secs` for `check`, panicking with `what` and the
/// sentinels' logs.
fn wait_for(secs: u64, what: &str, sentinels: &[Sentinel], mut check: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(secs);
    while !check() {
        if Instant::now() > deadline {
            let logs: Vec<String> = sentinels
                .iter()
                .map(|s| std::fs::read_to_string(&s.log).unwrap_or_default())
                .collect();
            panic!(
                "{what} did not happen within {secs} s; sentinel logs:\n{}",
                logs.join("\n---\n")
            );
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// The number of entries SENTINEL `what` mymaster lists.
fn listed(sentinel: &Sentinel, what: &str) -> usize {
    let mut c = Conn::connect(sentinel.port);
    match call(&mut c, &["SENTINEL", what, "mymaster"]) {
        Value::Array(items) => items.len(),
        other => panic!("SENTINEL {what}: {other:?}"),
    }
}

/// The master's port as `sentinel` knows it.
fn master_port(sentinel: &Sentinel) -> Option<u16> {
    let mut c = Conn::connect(sentinel.port);
    match call(&mut c, &["SENTINEL", "GET-MASTER-ADDR-BY-NAME", "mymaster"]) {
        Value::Array(items) => match items.get(1) {
            Some(Value::Bulk(port)) => String::from_utf8_lossy(port).parse().ok(),
            _ => None,
        },
        _ => None,
    }
}

/// ROLE's first element and, on a replica, its master's port.
fn role(port: u16) -> Option<(String, Option<u16>)> {
    let stream = std::net::TcpStream::connect(("127.0.0.1", port)).ok()?;
    drop(stream);
    let mut c = Conn::connect(port);
    let Value::Array(items) = call(&mut c, &["ROLE"]) else {
        return None;
    };
    let name = match items.first() {
        Some(Value::Bulk(b)) => String::from_utf8_lossy(b).into_owned(),
        _ => return None,
    };
    let master = match items.get(2) {
        Some(Value::Int(p)) => Some(*p as u16),
        _ => None,
    };
    Some((name, master))
}

/// A hozon server with the AOF on, in `dir` (kept across restarts).
fn hozon_in(dir: &Path, extra: &[&str]) -> ServerProcess {
    let dir_arg = dir.to_string_lossy().into_owned();
    let args = [&["--appendonly", "yes", "--dir", &dir_arg][..], extra].concat();
    start_hozon(&args)
}

#[test]
fn sentinel_fails_over_a_killed_hozon_master_without_losing_acknowledged_writes() {
    let root = tempfile::tempdir().expect("temp dir");
    let dirs: Vec<PathBuf> = ["m", "r1", "r2", "s"]
        .iter()
        .map(|d| {
            let p = root.path().join(d);
            std::fs::create_dir(&p).expect("mkdir");
            p
        })
        .collect();
    let master = hozon_in(&dirs[0], &["--repl-diskless-sync-delay", "0"]);
    let old_port = master.port;
    let port_arg = old_port.to_string();
    let replicas = [
        hozon_in(&dirs[1], &["--replicaof", "127.0.0.1", &port_arg]),
        hozon_in(&dirs[2], &["--replicaof", "127.0.0.1", &port_arg]),
    ];
    let sentinels: Vec<Sentinel> = (0..3).map(|_| start_sentinel(&dirs[3], old_port)).collect();
    wait_for(30, "both replicas in sync", &sentinels, || {
        replicas.iter().all(|r| {
            info_field(
                &mut Conn::connect(r.port),
                "replication",
                "master_link_status",
            )
            .as_deref()
                == Some("up")
        })
    });
    wait_for(
        30,
        "discovery of both replicas and the other sentinels",
        &sentinels,
        || {
            sentinels
                .iter()
                .all(|s| listed(s, "REPLICAS") == 2 && listed(s, "SENTINELS") == 2)
        },
    );

    // A steady write load; the keys WAIT 1 acknowledged are recorded.
    let acked = Arc::new(Mutex::new(Vec::<String>::new()));
    let stop = Arc::new(AtomicBool::new(false));
    let writer = {
        let (acked, stop) = (Arc::clone(&acked), Arc::clone(&stop));
        std::thread::spawn(move || {
            let Ok(stream) = std::net::TcpStream::connect(("127.0.0.1", old_port)) else {
                return;
            };
            drop(stream);
            let mut c = Conn::connect(old_port);
            let mut pending = Vec::new();
            for i in 0.. {
                if stop.load(Ordering::Relaxed) {
                    return;
                }
                let key = format!("k:{i}");
                let raw = c.try_call(&[b"SET", key.as_bytes(), b"v"]);

                if raw.is_none() {
                    return;
                }
                pending.push(key);
                if i % 10 == 9 {
                    match c.try_call(&[b"WAIT", b"1", b"200"]) {
                        Some(reply) if reply.starts_with(b":") && reply != b":0\r\n" => {
                            acked.lock().unwrap().append(&mut pending);
                        }
                        Some(_) => pending.clear(),
                        None => return,
                    }
                }
            }
        })
    };
    // A redis-py client that finds the master through the sentinels.
    let ports: Vec<String> = sentinels.iter().map(|s| s.port.to_string()).collect();
    let py_client = {
        let mut command = Command::new(python_with_redis_py());
        command
            .arg(repo_root().join("tests/clients/python/sentinel_client.py"))
            .arg(ports.join(","))
            .arg("40");
        std::thread::spawn(move || {
            run_client(command, "sentinel_client.py", Duration::from_secs(60))
        })
    };
    std::thread::sleep(Duration::from_millis(1500));
    let before_kill = acked.lock().unwrap().len();
    assert!(before_kill > 0, "no write was acknowledged before the kill");
    drop(master); // SIGKILL
    stop.store(true, Ordering::Relaxed);
    writer.join().expect("the writer");
    let acked = acked.lock().unwrap().clone();

    wait_for(30, "+switch-master", &sentinels, || {
        sentinels
            .iter()
            .all(|s| master_port(s).is_some_and(|p| p != old_port))
    });
    let new_port = master_port(&sentinels[0]).expect("a new master");
    let (promoted, other) = if replicas[0].port == new_port {
        (&replicas[0], &replicas[1])
    } else {
        (&replicas[1], &replicas[0])
    };
    assert_eq!(promoted.port, new_port);
    let mut p = Conn::connect(new_port);
    // Every acknowledged write is on the new master.
    let missing: Vec<&String> = acked
        .iter()
        .filter(|k| call(&mut p, &["EXISTS", k]) != Value::Int(1))
        .collect();
    assert!(
        missing.is_empty(),
        "{} of {} acknowledged keys lost: {:?}",
        missing.len(),
        acked.len(),
        &missing[..missing.len().min(5)]
    );
    // The other replica follows the new master, with a partial resync.
    wait_for(
        30,
        "the other replica following the new master",
        &sentinels,
        || {
            role(other.port) == Some(("slave".into(), Some(new_port)))
                && info_field(
                    &mut Conn::connect(other.port),
                    "replication",
                    "master_link_status",
                )
                .as_deref()
                    == Some("up")
        },
    );
    let partial = info_field(&mut p, "stats", "sync_partial_ok").unwrap_or_default();
    assert_eq!(partial, "1", "the other replica did not continue partially");
    // Writes go to the new master and reach the other replica.
    call(&mut p, &["SET", "after", "failover"]);
    assert_eq!(call(&mut p, &["WAIT", "1", "5000"]), Value::Int(1));

    // The old master comes back on its own files: Sentinel turns it into
    // a replica of the new master.
    let dir_arg = dirs[0].to_string_lossy().into_owned();
    let restarted = start_on_port(
        hozon_server_path(),
        "hozon-server",
        old_port,
        &["--appendonly", "yes", "--dir", &dir_arg],
    )
    .expect("the old master restarts on its port");
    wait_for(
        40,
        "the old master turned into a replica",
        &sentinels,
        || {
            role(old_port) == Some(("slave".into(), Some(new_port)))
                && info_field(
                    &mut Conn::connect(old_port),
                    "replication",
                    "master_link_status",
                )
                .as_deref()
                    == Some("up")
        },
    );
    let mut o = Conn::connect(restarted.port);
    assert_eq!(
        call(&mut o, &["GET", "after"]),
        Value::Bulk(b"failover".to_vec())
    );
    // The redis-py client wrote on the old master, then on the new one.
    let output = py_client.join().expect("the redis-py client");
    let summary = output.lines().last().unwrap_or("");
    assert!(
        summary.contains(&format!("[\"127.0.0.1\", {old_port}]"))
            && summary.contains(&format!("[\"127.0.0.1\", {new_port}]")),
        "{output}"
    );
}
