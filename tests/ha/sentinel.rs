//! Three `redis-sentinel` processes monitor a master with two replicas
//! (hozon, or mixed with redis-server). Under a steady write load the
//! master is SIGKILLed, or `SENTINEL FAILOVER` is asked for: Sentinel
//! promotes the preferred replica, the other replica follows it, every
//! write acknowledged by both replicas (WAIT 2) before the failover is on
//! the new master, and the old master (restarted on its own files
//! after a kill) is turned into a replica of the new one. A redis-py
//! client using Sentinel discovery writes through one of the failovers.

use std::path::{Path, PathBuf};
use std::process::{Child, Command};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use testkit::clients::{python_with_redis_py, repo_root, run_client};
use testkit::harness::{
    hozon_server_path, redis_server_path, start_hozon, start_on_port, start_redis, unused_port,
    Conn, ServerProcess,
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
/// down after 2 s), its files in `dir`.
///
/// Not 1 s: a sentinel reconnects to a switched master at most once per
/// ping period (1 s) but starts the down-after clock at the switch, so
/// with `down-after-milliseconds` equal to the ping period it may mark
/// the new master down before its first PING is even sent, and with the
/// old master's down votes still on record start a second failover
/// (sentinel.c: sentinelReconnectInstance, sentinelResetMaster). Redis's
/// own sentinel tests use 2000 too.
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
                 sentinel down-after-milliseconds mymaster 2000\n\
                 sentinel failover-timeout mymaster 10000\n",
                dir.display(),
                log.display()
            ),
        )
        .expect("write the sentinel's config");
        let mut command = Command::new(SENTINEL);
        command.arg(&conf);
        if let Some(child) = crate::spawn_listening(command, port) {
            return Sentinel { child, port, log };
        }
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

/// A command's reply from the server on `port`, or None when the
/// connection fails: Sentinel disconnects the clients of a server it
/// reconfigures (`CLIENT KILL TYPE normal`), and a restarting one is not
/// there yet.
fn try_call(port: u16, args: &[&str]) -> Option<Value> {
    std::net::TcpStream::connect(("127.0.0.1", port)).ok()?;
    let args: Vec<&[u8]> = args.iter().map(|a| a.as_bytes()).collect();
    let reply = Conn::connect(port).try_call(&args)?;
    Some(testkit::value::decode(&reply))
}

/// ROLE's first element and, on a replica, its master's port.
fn role(port: u16) -> Option<(String, Option<u16>)> {
    let Some(Value::Array(items)) = try_call(port, &["ROLE"]) else {
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

/// Which server program.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Kind {
    Hozon,
    Redis,
}

impl Kind {
    fn binary(self) -> String {
        match self {
            Kind::Hozon => hozon_server_path().to_string(),
            Kind::Redis => redis_server_path(),
        }
    }

    fn name(self) -> &'static str {
        match self {
            Kind::Hozon => "hozon-server",
            Kind::Redis => "redis-server",
        }
    }
}

/// A server of `kind` with the AOF on, in `dir` (kept across restarts).
fn server_in(kind: Kind, dir: &Path, extra: &[&str]) -> ServerProcess {
    let dir_arg = dir.to_string_lossy().into_owned();
    let args = [
        &[
            "--appendonly",
            "yes",
            "--dir",
            &dir_arg,
            "--repl-diskless-sync-delay",
            "0",
        ][..],
        extra,
    ]
    .concat();
    match kind {
        Kind::Hozon => start_hozon(&args),
        Kind::Redis => start_redis(&args),
    }
}

/// How the failover starts.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Trigger {
    /// SIGKILL of the master; later restarted on its own files.
    Kill,
    /// `SENTINEL FAILOVER mymaster` with the master running.
    Manual,
}

fn link_up(port: u16) -> bool {
    let Some(Value::Bulk(text)) = try_call(port, &["INFO", "replication"]) else {
        return false;
    };
    String::from_utf8_lossy(&text).contains("master_link_status:up\r\n")
}

/// A master of `master` kind and replicas of `replicas` kinds (the first
/// one preferred by `replica-priority`), three sentinels, a write load,
/// the failover by `trigger`, then the checks: every write both replicas
/// acknowledged (`WAIT 2`) on the new master, the first replica promoted,
/// the other one following it, the old master a replica of the new one. With `py_client`, a redis-py client using Sentinel discovery
/// writes through it.
fn failover(master_kind: Kind, replica_kinds: [Kind; 2], trigger: Trigger, py_client: bool) {
    let root = tempfile::tempdir().expect("temp dir");
    let dirs: Vec<PathBuf> = ["m", "r1", "r2", "s"]
        .iter()
        .map(|d| {
            let p = root.path().join(d);
            std::fs::create_dir(&p).expect("mkdir");
            p
        })
        .collect();
    let master = server_in(master_kind, &dirs[0], &[]);
    let old_port = master.port;
    let port_arg = old_port.to_string();
    let replicas = [
        server_in(
            replica_kinds[0],
            &dirs[1],
            &[
                "--replicaof",
                "127.0.0.1",
                &port_arg,
                "--replica-priority",
                "10",
            ],
        ),
        server_in(
            replica_kinds[1],
            &dirs[2],
            &[
                "--replicaof",
                "127.0.0.1",
                &port_arg,
                "--replica-priority",
                "100",
            ],
        ),
    ];
    let sentinels: Vec<Sentinel> = (0..3).map(|_| start_sentinel(&dirs[3], old_port)).collect();
    wait_for(30, "both replicas in sync", &sentinels, || {
        replicas.iter().all(|r| link_up(r.port))
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

    // A steady write load; the keys WAIT acknowledged are recorded.
    // Acknowledged by both replicas: Sentinel may promote either (by
    // priority, then by an offset up to a second old), so a write on one
    // replica only may be lost by the failover, with hozon as with Redis.
    let wait_for_replicas: &'static [u8] = b"2";
    let acked = Arc::new(Mutex::new(Vec::<String>::new()));
    let stop = Arc::new(AtomicBool::new(false));
    let writer = {
        let (acked, stop) = (Arc::clone(&acked), Arc::clone(&stop));
        std::thread::spawn(move || {
            let mut c = Conn::connect(old_port);
            let mut pending = Vec::new();
            let want = format!(":{}\r\n", String::from_utf8_lossy(wait_for_replicas));
            for i in 0.. {
                if stop.load(Ordering::Relaxed) {
                    return;
                }
                let key = format!("k:{i}");
                match c.try_call(&[b"SET", key.as_bytes(), b"v"]) {
                    Some(reply) if reply == b"+OK\r\n" => pending.push(key),
                    // A demoted master refuses writes (READONLY); a killed
                    // one closes the connection.
                    _ => return,
                }
                if i % 10 == 9 {
                    match c.try_call(&[b"WAIT", wait_for_replicas, b"200"]) {
                        Some(reply) if reply == want.as_bytes() => {
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
    let py_client = py_client.then(|| {
        let mut command = Command::new(python_with_redis_py());
        command
            .arg(repo_root().join("tests/clients/python/sentinel_client.py"))
            .arg(ports.join(","))
            .arg("40");
        std::thread::spawn(move || {
            run_client(command, "sentinel_client.py", Duration::from_secs(60))
        })
    });
    std::thread::sleep(Duration::from_millis(1500));
    assert!(
        !acked.lock().unwrap().is_empty(),
        "no write was acknowledged before the failover"
    );
    // After a kill, where each replica's stream stopped (nothing more
    // arrives): whether the other replica can continue from the promoted
    // one depends on it.
    let mut stopped_at: Option<[i64; 2]> = None;
    let master = match trigger {
        Trigger::Kill => {
            drop(master); // SIGKILL
            stop.store(true, Ordering::Relaxed);
            std::thread::sleep(Duration::from_millis(300));
            let offset = |port: u16| -> i64 {
                info_field(
                    &mut Conn::connect(port),
                    "replication",
                    "master_repl_offset",
                )
                .and_then(|v| v.parse().ok())
                .expect("master_repl_offset")
            };
            stopped_at = Some([offset(replicas[0].port), offset(replicas[1].port)]);
            None
        }
        Trigger::Manual => {
            let mut s = Conn::connect(sentinels[0].port);
            assert_eq!(
                call(&mut s, &["SENTINEL", "FAILOVER", "mymaster"]),
                Value::Simple("OK".into())
            );
            Some(master)
        }
    };

    wait_for(30, "+switch-master", &sentinels, || {
        sentinels
            .iter()
            .all(|s| master_port(s).is_some_and(|p| p != old_port))
    });
    stop.store(true, Ordering::Relaxed);
    writer.join().expect("the writer");
    let acked = acked.lock().unwrap().clone();
    let new_port = master_port(&sentinels[0]).expect("a new master");
    let (promoted, other) = (&replicas[0], &replicas[1]);
    assert_eq!(
        new_port, promoted.port,
        "the preferred replica was not promoted"
    );
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
    // The other replica follows the new master.
    wait_for(
        30,
        "the other replica following the new master",
        &sentinels,
        || role(other.port) == Some(("slave".into(), Some(new_port))) && link_up(other.port),
    );
    // Whether it continues partially depends on which of the two was
    // further along when the stream stopped (Sentinel promotes by
    // priority, then by the offset of its last INFO, up to a second old):
    // when the promoted replica had received at least as much, the other
    // continues (`+CONTINUE`, the promoted one's secondary id); when it
    // had received less, the other needs a full sync, from hozon as from
    // Redis. tests/repl/failover.rs and tests/replica/failover.rs assert
    // the `+CONTINUE` of a coordinated failover.
    if let Some([promoted_off, other_off]) = stopped_at {
        let stat = |name: &str| -> u64 {
            info_field(&mut Conn::connect(new_port), "stats", name)
                .and_then(|v| v.parse().ok())
                .expect("a sync counter")
        };
        eprintln!("offsets at the kill: promoted {promoted_off}, other {other_off}");
        if promoted_off >= other_off {
            assert!(
                stat("sync_partial_ok") >= 1,
                "the other replica (offset {other_off}) did not continue partially from the \
                 promoted one (offset {promoted_off}): sync_full {}",
                stat("sync_full")
            );
        } else {
            assert!(stat("sync_full") >= 1, "{promoted_off} < {other_off}");
        }
    }
    // Writes go to the new master and reach the other replica.
    call(&mut p, &["SET", "after", "failover"]);
    assert!(matches!(call(&mut p, &["WAIT", "1", "5000"]), Value::Int(n) if n >= 1));

    // The old master (restarted on its own files after a kill) is turned
    // into a replica of the new master.
    let old = match master {
        Some(running) => running,
        None => {
            let dir_arg = dirs[0].to_string_lossy().into_owned();
            let binary = master_kind.binary();
            start_on_port(
                &binary,
                master_kind.name(),
                old_port,
                &["--appendonly", "yes", "--dir", &dir_arg],
            )
            .expect("the old master restarts on its port")
        }
    };
    wait_for(
        40,
        "the old master turned into a replica",
        &sentinels,
        || role(old_port) == Some(("slave".into(), Some(new_port))) && link_up(old_port),
    );
    let mut o = Conn::connect(old.port);
    assert_eq!(
        call(&mut o, &["GET", "after"]),
        Value::Bulk(b"failover".to_vec())
    );
    if let Some(client) = py_client {
        // The redis-py client wrote on the old master, then on the new one.
        let output = client.join().expect("the redis-py client");
        let summary = output.lines().last().unwrap_or("");
        assert!(
            summary.contains(&format!("[\"127.0.0.1\", {old_port}]"))
                && summary.contains(&format!("[\"127.0.0.1\", {new_port}]")),
            "{output}"
        );
    }
}

#[test]
fn sentinel_fails_over_a_killed_hozon_master_without_losing_acknowledged_writes() {
    failover(Kind::Hozon, [Kind::Hozon, Kind::Hozon], Trigger::Kill, true);
}

#[test]
fn sentinel_failover_command_switches_hozon_servers_without_losing_acknowledged_writes() {
    failover(
        Kind::Hozon,
        [Kind::Hozon, Kind::Hozon],
        Trigger::Manual,
        false,
    );
}

#[test]
fn sentinel_promotes_a_redis_replica_of_a_killed_hozon_master() {
    failover(
        Kind::Hozon,
        [Kind::Redis, Kind::Hozon],
        Trigger::Kill,
        false,
    );
}

#[test]
fn sentinel_promotes_a_hozon_replica_of_a_killed_redis_master() {
    failover(
        Kind::Redis,
        [Kind::Hozon, Kind::Redis],
        Trigger::Kill,
        false,
    );
}
