//! Replication's durability promises on the master (docs/replication.md
//! §3.2, §4): a replica never holds a write the master's AOF could not
//! take, and the replication position recorded in the AOF lets a replica
//! continue after the master is killed and restarted.
//!
//! The replica here is a fake one speaking the protocol over a raw socket,
//! so the test sees exactly which stream bytes left the master and when.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

use crate::harness::{encode_command, signal, Conn};
use crate::outside_faults::Setup;

/// A fake replica: does a full sync, then collects the stream.
pub(crate) struct FakeReplica {
    stream: TcpStream,
    /// Bytes read and not yet consumed.
    buf: Vec<u8>,
    /// The id and offset of `+FULLRESYNC` / `+CONTINUE`.
    replid: String,
    /// The offset of the last stream byte received.
    offset: i64,
    /// Every stream byte received since the sync.
    pub(crate) received: Vec<u8>,
}

impl FakeReplica {
    fn connect(port: u16) -> TcpStream {
        let stream = TcpStream::connect(("127.0.0.1", port)).expect("connect to the master");
        stream
            .set_read_timeout(Some(Duration::from_millis(50)))
            .unwrap();
        stream
    }

    /// Reads more bytes (false when none came within the read timeout).
    fn fill(stream: &mut TcpStream, buf: &mut Vec<u8>) -> bool {
        let mut chunk = [0u8; 65536];
        match stream.read(&mut chunk) {
            Ok(0) => panic!("the master closed the replica's connection"),
            Ok(n) => {
                buf.extend_from_slice(&chunk[..n]);
                true
            }
            Err(e)
                if e.kind() == std::io::ErrorKind::WouldBlock
                    || e.kind() == std::io::ErrorKind::TimedOut =>
            {
                false
            }
            Err(e) => panic!("reading from the master: {e}"),
        }
    }

    /// Reads one line, skipping the keepalive newlines before it.
    fn line(stream: &mut TcpStream, buf: &mut Vec<u8>) -> String {
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            while buf.first() == Some(&b'\n') {
                buf.remove(0);
            }
            if let Some(end) = buf.windows(2).position(|w| w == b"\r\n") {
                let line = String::from_utf8_lossy(&buf[..end]).into_owned();
                buf.drain(..end + 2);
                return line;
            }
            assert!(Instant::now() < deadline, "no line from the master");
            Self::fill(stream, buf);
        }
    }

    /// `PSYNC ? -1` and the whole disk-form payload.
    pub(crate) fn full_sync(port: u16) -> FakeReplica {
        let mut stream = Self::connect(port);
        stream
            .write_all(&encode_command(&[b"PSYNC", b"?", b"-1"]))
            .unwrap();
        let mut buf = Vec::new();
        let reply = Self::line(&mut stream, &mut buf);
        let words: Vec<&str> = reply.split(' ').collect();
        assert_eq!(words.len(), 3, "{reply}");
        assert_eq!(words[0], "+FULLRESYNC", "{reply}");
        let replid = words[1].to_string();
        let offset: i64 = words[2].parse().unwrap();
        let header = Self::line(&mut stream, &mut buf);
        let len: usize = header
            .strip_prefix('$')
            .and_then(|n| n.parse().ok())
            .unwrap_or_else(|| panic!("a disk payload header, got {header:?}"));
        let deadline = Instant::now() + Duration::from_secs(20);
        while buf.len() < len {
            assert!(Instant::now() < deadline, "the payload did not arrive");
            Self::fill(&mut stream, &mut buf);
        }
        assert!(buf.starts_with(b"REDIS0010"), "an RDB 10 payload");
        buf.drain(..len);
        let mut replica = FakeReplica {
            stream,
            buf: Vec::new(),
            replid,
            offset,
            received: Vec::new(),
        };
        replica.take(buf);
        replica
    }

    fn take(&mut self, bytes: Vec<u8>) {
        self.offset += bytes.len() as i64;
        self.received.extend_from_slice(&bytes);
    }

    /// Collects the stream for `wait`.
    pub(crate) fn collect_for(&mut self, wait: Duration) {
        let deadline = Instant::now() + wait;
        while Instant::now() < deadline {
            self.buf.clear();
            if Self::fill(&mut self.stream, &mut self.buf) {
                let bytes = std::mem::take(&mut self.buf);
                self.take(bytes);
            }
        }
    }

    /// Collects until `needle` was received (panics after 20 s).
    pub(crate) fn collect_until(&mut self, needle: &[u8]) {
        let deadline = Instant::now() + Duration::from_secs(20);
        while !contains(&self.received, needle) {
            assert!(
                Instant::now() < deadline,
                "the stream never carried {:?}; got {:?}",
                String::from_utf8_lossy(needle),
                String::from_utf8_lossy(&self.received)
            );
            self.collect_for(Duration::from_millis(50));
        }
    }

    /// Acknowledges everything received (as a replica does each second).
    fn ack(&mut self) {
        let offset = self.offset.to_string();
        self.stream
            .write_all(&encode_command(&[b"REPLCONF", b"ACK", offset.as_bytes()]))
            .unwrap();
    }
}

pub(crate) fn contains(haystack: &[u8], needle: &[u8]) -> bool {
    haystack.windows(needle.len()).any(|w| w == needle)
}

#[test]
fn a_replica_never_receives_a_write_the_aof_could_not_take() {
    let setup = Setup::new();
    let server = setup.start_with(&["--repl-diskless-sync", "no"]);
    let mut replica = FakeReplica::full_sync(server.port);
    let mut client = Conn::connect(server.port);
    assert_eq!(client.call(&[b"SET", b"first", b"1"]), b"+OK\r\n");
    replica.collect_until(b"first");

    // Every AOF write fails from now on (ENOSPC): the write below is
    // applied in memory, but its batch stays unwritten.
    setup.arm(1_000_000, 0, 0);
    client.send_raw(&encode_command(&[b"SET", b"held", b"2"]));
    setup.wait_fired("write ENOSPC");
    replica.collect_for(Duration::from_millis(1500));
    assert!(
        !contains(&replica.received, b"held"),
        "the replica received a write the AOF does not hold: {:?}",
        String::from_utf8_lossy(&replica.received)
    );
    assert_eq!(
        client.try_read_reply(Duration::from_millis(10)),
        None,
        "a reply for a write whose batch is not written"
    );

    // The disk takes writes again: cron's retry writes the batch, and the
    // reply and the stream follow it.
    setup.arm(0, 0, 0);
    assert_eq!(client.read_reply(), b"+OK\r\n");
    replica.collect_until(b"held");
    server.kill9();
}

#[test]
fn a_replica_continues_after_the_master_is_killed_and_restarted() {
    let setup = Setup::new();
    // No keepalive PING during the test: the replica's count must stay
    // what it acknowledged when the master is killed.
    let args = [
        "--repl-diskless-sync",
        "no",
        "--appendfsync",
        "everysec",
        "--repl-ping-replica-period",
        "3600",
    ];
    let server = setup.start_with(&args);
    let mut replica = FakeReplica::full_sync(server.port);
    let mut client = Conn::connect(server.port);
    for i in 0..50 {
        let key = format!("k{i}");
        assert_eq!(client.call(&[b"SET", key.as_bytes(), b"v"]), b"+OK\r\n");
    }
    client.call(&[b"PUBLISH", b"news", b"hello"]);
    replica.collect_until(b"k49");
    replica.collect_until(b"hello");
    replica.ack();
    // The master's INFO agrees with what the replica counted.
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let info = String::from_utf8_lossy(&client.call(&[b"INFO", b"replication"])).into_owned();
        if info.contains(&format!("master_repl_offset:{}\r\n", replica.offset))
            && info.contains(&format!(",offset={},", replica.offset))
        {
            break;
        }
        assert!(Instant::now() < deadline, "offsets disagree: {info}");
        // Bytes still in flight (the first keepalive): take and ack them.
        replica.collect_for(Duration::from_millis(20));
        replica.ack();
    }
    let port = server.port;
    server.kill9();

    let server = setup.start_with(&[&args[..], &["--port", &port.to_string()]].concat());
    let mut stream = FakeReplica::connect(server.port);
    let next = (replica.offset + 1).to_string();
    stream
        .write_all(&encode_command(&[b"REPLCONF", b"capa", b"psync2"]))
        .unwrap();
    let mut buf = Vec::new();
    assert_eq!(FakeReplica::line(&mut stream, &mut buf), "+OK");
    stream
        .write_all(&encode_command(&[
            b"PSYNC",
            replica.replid.as_bytes(),
            next.as_bytes(),
        ]))
        .unwrap();
    let reply = FakeReplica::line(&mut stream, &mut buf);
    assert!(
        reply.starts_with("+CONTINUE ") && !reply.contains(&replica.replid),
        "a partial resync under a new id expected after the restart, got {reply:?}"
    );
    let mut check = Conn::connect(server.port);
    let info = String::from_utf8_lossy(&check.call(&[b"INFO", b"replication"])).into_owned();
    assert!(
        info.contains(&format!("master_replid2:{}\r\n", replica.replid)),
        "{info}"
    );
    assert!(
        info.contains(&format!("second_repl_offset:{next}\r\n")),
        "{info}"
    );
    let stats = String::from_utf8_lossy(&check.call(&[b"INFO", b"stats"])).into_owned();
    assert!(stats.contains("sync_partial_ok:1\r\n"), "{stats}");
    assert!(stats.contains("sync_full:0\r\n"), "{stats}");
    // And the stream goes on from there.
    assert_eq!(check.call(&[b"SET", b"after", b"1"]), b"+OK\r\n");
    let deadline = Instant::now() + Duration::from_secs(10);
    while !contains(&buf, b"after") {
        assert!(Instant::now() < deadline, "no stream after +CONTINUE");
        FakeReplica::fill(&mut stream, &mut buf);
    }
    server.kill9();
}

/// A hozon master and a redis-server replica that has synced, with a
/// connection to the replica.
fn hozon_master_with_redis_replica() -> (
    testkit::harness::ServerProcess,
    testkit::harness::ServerProcess,
    Conn,
) {
    let master = crate::harness::start_hozon(&["--repl-diskless-sync-delay", "0"]);
    let replica =
        crate::harness::start_redis(&["--replicaof", "127.0.0.1", &master.port.to_string()]);
    let mut probe = Conn::connect(replica.port);
    let deadline = Instant::now() + Duration::from_secs(20);
    while !String::from_utf8_lossy(&probe.call(&[b"INFO", b"replication"]))
        .contains("master_link_status:up")
    {
        assert!(Instant::now() < deadline, "the replica never synced");
        std::thread::sleep(Duration::from_millis(20));
    }
    (master, replica, probe)
}

/// How long the WAIT writer runs before the master is killed: seeded, so a
/// failure can be replayed with `HOZON_SEED`.
fn kill_after(round: u64) -> Duration {
    let mut rng = hozon::rand::Rng::with_seed(crate::common::seed(0x5eed_0025) ^ round);
    Duration::from_millis(200 + rng.below(600))
}

#[test]
fn every_write_wait_acknowledged_is_on_the_promoted_replica_after_the_master_is_killed() {
    for round in 0..3 {
        let (master, _replica, mut probe) = hozon_master_with_redis_replica();
        let port = master.port;
        let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let writer = {
            let stop = std::sync::Arc::clone(&stop);
            std::thread::spawn(move || {
                let mut conn = FakeReplica::connect(port);
                conn.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
                let mut buf = Vec::new();
                let mut acknowledged = Vec::new();
                for i in 0.. {
                    if stop.load(std::sync::atomic::Ordering::SeqCst) {
                        break;
                    }
                    let key = format!("key:{i}");
                    let mut request = encode_command(&[b"SET", key.as_bytes(), b"v"]);
                    request.extend(encode_command(&[b"WAIT", b"1", b"0"]));
                    if conn.write_all(&request).is_err() {
                        break; // the master is gone
                    }
                    // Both replies are one line each: `+OK`, then `:<n>`.
                    let mut lines = Vec::new();
                    while lines.len() < 2 {
                        if let Some(end) = buf.windows(2).position(|w| w == b"\r\n") {
                            lines.push(buf.drain(..end + 2).collect::<Vec<u8>>());
                            continue;
                        }
                        let mut chunk = [0u8; 4096];
                        match conn.read(&mut chunk) {
                            Ok(n) if n > 0 => buf.extend_from_slice(&chunk[..n]),
                            _ => break,
                        }
                    }
                    if lines.len() < 2 {
                        break; // the master is gone
                    }
                    assert_eq!(lines[0], b"+OK\r\n");
                    if lines[1] == b":1\r\n" {
                        acknowledged.push(key);
                    }
                }
                acknowledged
            })
        };
        std::thread::sleep(kill_after(round));
        drop(master); // SIGKILL
        stop.store(true, std::sync::atomic::Ordering::SeqCst);
        let acknowledged = writer.join().expect("the writer");
        assert!(
            !acknowledged.is_empty(),
            "round {round}: nothing was acknowledged"
        );
        assert_eq!(probe.call(&[b"REPLICAOF", b"NO", b"ONE"]), b"+OK\r\n");
        for key in &acknowledged {
            assert_eq!(
                probe.call(&[b"EXISTS", key.as_bytes()]),
                b":1\r\n",
                "round {round}: {key} was acknowledged by WAIT 1 but the promoted replica lacks it \
                 ({} acknowledged)",
                acknowledged.len()
            );
        }
    }
}

#[test]
fn wait_does_not_count_a_replica_that_has_not_received_the_write() {
    let (master, replica, mut probe) = hozon_master_with_redis_replica();
    let mut client = Conn::connect(master.port);
    assert_eq!(client.call(&[b"SET", b"before", b"1"]), b"+OK\r\n");
    assert_eq!(client.call(&[b"WAIT", b"1", b"0"]), b":1\r\n");
    // The replica stops reading; a value larger than the sockets' buffers
    // keeps the next write's stream bytes in the master's memory.
    signal(replica.pid(), "-STOP");
    let big = vec![b'x'; 32 << 20];
    assert_eq!(client.call(&[b"SET", b"big", &big]), b"+OK\r\n");
    assert_eq!(client.call(&[b"SET", b"after", b"1"]), b"+OK\r\n");
    let acked = client.call(&[b"WAIT", b"1", b"300"]);
    drop(master); // SIGKILL: what the replica has not received is lost
    signal(replica.pid(), "-CONT");
    assert_eq!(
        acked, b":0\r\n",
        "WAIT counted a stopped replica that cannot have the write"
    );
    assert_eq!(probe.call(&[b"REPLICAOF", b"NO", b"ONE"]), b"+OK\r\n");
    assert_eq!(probe.call(&[b"EXISTS", b"before"]), b":1\r\n");
}

#[test]
fn waitaof_reports_the_local_fsync_under_each_policy() {
    for (policy, expected) in [("always", ":1"), ("everysec", ":1"), ("no", ":0")] {
        let server = crate::harness::start_hozon(&["--appendonly", "yes", "--appendfsync", policy]);
        let mut client = Conn::connect(server.port);
        // Nothing written yet: nothing to wait for.
        assert_eq!(
            client.call(&[b"WAITAOF", b"1", b"0", b"0"]),
            b"*2\r\n:1\r\n:0\r\n",
            "{policy}"
        );
        // A write and WAITAOF in one pipeline: under `always` the turn's
        // fsync covers it; under `everysec` the next background fsync
        // (within about a second); under `no` no fsync comes.
        let mut pipeline = encode_command(&[b"SET", b"k", b"v"]);
        pipeline.extend(encode_command(&[b"WAITAOF", b"1", b"0", b"3000"]));
        client.send_raw(&pipeline);
        assert_eq!(client.read_reply(), b"+OK\r\n");
        let reply = String::from_utf8(client.read_reply()).unwrap();
        assert_eq!(reply, format!("*2\r\n{expected}\r\n:0\r\n"), "{policy}");
        // No replica fsynced it: asking for one times out with 0.
        let reply = client.call(&[b"WAITAOF", b"0", b"1", b"100"]);
        assert!(
            reply.ends_with(b":0\r\n"),
            "{policy}: {}",
            String::from_utf8_lossy(&reply)
        );
    }
    let server = crate::harness::start_hozon(&["--appendonly", "no"]);
    let mut client = Conn::connect(server.port);
    assert_eq!(
        client.call(&[b"WAITAOF", b"1", b"0", b"0"]),
        b"-ERR WAITAOF cannot be used when numlocal is set but appendonly is disabled.\r\n"
    );
    assert_eq!(
        client.call(&[b"WAITAOF", b"2", b"0", b"0"]),
        b"-ERR value is out of range, value must between 0 and 1\r\n"
    );
}

#[test]
fn a_replica_continues_after_a_restart_from_a_snapshot() {
    for format in ["native", "rdb"] {
        let (_dir, mut args) = restartable_args("no");
        args.extend(["--snapshot-format".to_string(), format.to_string()]);
        let master = crate::harness::start_hozon(&refs(&args));
        let mut replica = FakeReplica::full_sync(master.port);
        let mut client = Conn::connect(master.port);
        for i in 0..20 {
            let key = format!("k{i}");
            assert_eq!(client.call(&[b"SET", key.as_bytes(), b"v"]), b"+OK\r\n");
        }
        replica.collect_until(b"k19");
        // SAVE records the position of what it saved.
        assert_eq!(client.call(&[b"SAVE"]), b"+OK\r\n");
        let port = master.port;
        drop(master); // SIGKILL
        let restarted = restart_on(port, &args);
        let reply = psync_reply(restarted.port, &replica);
        assert_eq!(
            reply, "+CONTINUE",
            "{format}: a partial resync after the restart"
        );
    }
}

/// Arguments for a master restarted on the same data directory (returned
/// with it; removed on drop): `appendonly` as given, disk payloads, no
/// keepalive PING to move the offsets during the test.
fn restartable_args(appendonly: &str) -> (tempfile::TempDir, Vec<String>) {
    let dir = tempfile::tempdir().expect("temp dir");
    let args = [
        "--appendonly",
        appendonly,
        "--repl-diskless-sync",
        "no",
        "--repl-ping-replica-period",
        "3600",
        "--dir",
        &dir.path().to_string_lossy(),
    ]
    .map(String::from)
    .to_vec();
    (dir, args)
}

fn refs(args: &[String]) -> Vec<&str> {
    args.iter().map(String::as_str).collect()
}

/// Starts hozon on `port` (a restart) with `args`.
fn restart_on(port: u16, args: &[String]) -> testkit::harness::ServerProcess {
    let hozon = crate::harness::hozon_server_path();
    crate::harness::start_on_port(hozon, "hozon-server", port, &refs(args))
        .expect("restart on the same port")
}

/// `PSYNC <replid> <offset + 1>` to the server on `port`: its reply line,
/// the connection and what was read after the line.
fn psync(port: u16, replica: &FakeReplica) -> (String, TcpStream, Vec<u8>) {
    let mut stream = FakeReplica::connect(port);
    let next = (replica.offset + 1).to_string();
    stream
        .write_all(&encode_command(&[
            b"PSYNC",
            replica.replid.as_bytes(),
            next.as_bytes(),
        ]))
        .unwrap();
    let mut buf = Vec::new();
    let line = FakeReplica::line(&mut stream, &mut buf);
    (line, stream, buf)
}

/// The reply to `PSYNC <replid> <offset + 1>` from the server on `port`.
fn psync_reply(port: u16, replica: &FakeReplica) -> String {
    psync(port, replica).0
}

/// A master restarted from a snapshot deletes the keys that expired
/// meanwhile and puts their DELs in its backlog, so a replica continuing
/// from the snapshot's position (partial resync) deletes them too, as
/// Redis 7.0's rdbLoad does.
#[test]
fn keys_expired_before_the_restart_reach_a_continuing_replica_as_dels() {
    let (_dir, args) = restartable_args("no");
    let master = crate::harness::start_hozon(&refs(&args));
    let mut replica = FakeReplica::full_sync(master.port);
    let mut client = Conn::connect(master.port);
    assert_eq!(
        client.call(&[b"SET", b"short", b"v", b"PX", b"300"]),
        b"+OK\r\n"
    );
    assert_eq!(client.call(&[b"SET", b"kept", b"v"]), b"+OK\r\n");
    replica.collect_until(b"kept");
    assert_eq!(client.call(&[b"SAVE"]), b"+OK\r\n");
    std::thread::sleep(Duration::from_millis(500));
    let port = master.port;
    drop(master);
    let restarted = restart_on(port, &args);
    let mut client = Conn::connect(restarted.port);
    assert_eq!(client.call(&[b"DBSIZE"]), b":1\r\n");
    let persistence =
        String::from_utf8_lossy(&client.call(&[b"INFO", b"persistence"])).into_owned();
    assert!(
        persistence.contains("rdb_last_load_keys_expired:1\r\n"),
        "{persistence}"
    );
    assert!(
        persistence.contains("rdb_last_load_keys_loaded:1\r\n"),
        "{persistence}"
    );
    let (reply, mut stream, mut buf) = psync(restarted.port, &replica);
    assert_eq!(reply, "+CONTINUE");
    let del = b"*2\r\n$3\r\nDEL\r\n$5\r\nshort\r\n";
    let deadline = Instant::now() + Duration::from_secs(20);
    while !contains(&buf, del) {
        assert!(
            Instant::now() < deadline,
            "no DEL of the expired key; got {:?}",
            String::from_utf8_lossy(&buf)
        );
        FakeReplica::fill(&mut stream, &mut buf);
    }
}

#[test]
fn a_rewritten_aof_records_the_position_so_a_restart_continues() {
    let (_dir, args) = restartable_args("yes");
    let master = crate::harness::start_hozon(&refs(&args));
    let mut replica = FakeReplica::full_sync(master.port);
    let mut client = Conn::connect(master.port);
    for i in 0..20 {
        let key = format!("k{i}");
        assert_eq!(client.call(&[b"SET", key.as_bytes(), b"v"]), b"+OK\r\n");
    }
    replica.collect_until(b"k19");
    client.call(&[b"BGREWRITEAOF"]);
    let deadline = Instant::now() + Duration::from_secs(20);
    while !String::from_utf8_lossy(&client.call(&[b"INFO", b"persistence"]))
        .contains("aof_rewrite_in_progress:0")
    {
        assert!(Instant::now() < deadline, "the rewrite did not end");
        std::thread::sleep(Duration::from_millis(20));
    }
    let port = master.port;
    drop(master); // SIGKILL right after the switch: nothing written since
    let restarted = restart_on(port, &args);
    let reply = psync_reply(restarted.port, &replica);
    assert_eq!(reply, "+CONTINUE", "the rewritten AOF lost the position");
}
