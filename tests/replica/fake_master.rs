//! A fake master (a raw TCP listener in the test) that completes the
//! handshake and then sends a damaged payload: the hozon replica keeps its
//! old data, logs why, and tries again.

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::time::{Duration, Instant};

use testkit::harness::{start_hozon, start_redis, Conn};

use crate::{call, Value};

/// A valid RDB file with a few keys, as redis-server saves it.
pub(crate) fn redis_rdb() -> Vec<u8> {
    let dir = tempfile::tempdir().expect("temp dir");
    let dir_arg = dir.path().to_string_lossy().into_owned();
    let redis = start_redis(&["--dir", &dir_arg]);
    let mut c = Conn::connect(redis.port);
    for i in 0..50 {
        call(&mut c, &["SET", &format!("new{i}"), "from the fake master"]);
    }
    assert_eq!(call(&mut c, &["SAVE"]), Value::Simple("OK".into()));
    std::fs::read(dir.path().join("dump.rdb")).expect("dump.rdb")
}

/// Reads from `stream` until `needle` was received (case-insensitive).
fn read_until(stream: &mut TcpStream, seen: &mut Vec<u8>, needle: &[u8]) {
    let deadline = Instant::now() + Duration::from_secs(10);
    let mut chunk = [0u8; 4096];
    while !seen
        .to_ascii_lowercase()
        .windows(needle.len())
        .any(|w| w == needle.to_ascii_lowercase())
    {
        assert!(
            Instant::now() < deadline,
            "the replica never sent {needle:?}"
        );
        match stream.read(&mut chunk) {
            Ok(0) => panic!("the replica closed the connection"),
            Ok(n) => seen.extend_from_slice(&chunk[..n]),
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {}
            Err(e) if e.kind() == std::io::ErrorKind::TimedOut => {}
            Err(e) => panic!("reading from the replica: {e}"),
        }
    }
}

/// Serves one sync attempt: the handshake's replies, then `payload`
/// (framed by the caller). Returns the attempt's connection.
pub(crate) fn serve_attempt(listener: &TcpListener, payload: &[u8]) -> TcpStream {
    let (mut stream, _) = listener.accept().expect("the replica connects");
    stream
        .set_read_timeout(Some(Duration::from_millis(200)))
        .expect("timeout");
    let mut seen = Vec::new();
    read_until(&mut stream, &mut seen, b"PING\r\n");
    stream.write_all(b"+PONG\r\n").expect("write");
    read_until(&mut stream, &mut seen, b"psync2\r\n");
    stream.write_all(b"+OK\r\n+OK\r\n").expect("write");
    read_until(&mut stream, &mut seen, b"PSYNC\r\n");
    std::thread::sleep(Duration::from_millis(50));
    let id = "a".repeat(40);
    stream
        .write_all(format!("+FULLRESYNC {id} 100\r\n\n").as_bytes())
        .expect("write");
    stream.write_all(payload).expect("write");
    stream
}

/// Starts a hozon replica with data of its own, points it at a fake
/// master that sends `payload` twice, and checks the replica kept its
/// data, logged `expected_log` and came back for the second attempt.
fn damaged_payload_keeps_old_data(payload: Vec<u8>, expected_log: &str) {
    damaged_attempts_keep_old_data(payload, expected_log, false);
}

/// [`damaged_payload_keeps_old_data`]; with `close`, each attempt's
/// connection is closed once the payload is sent (a master that goes away
/// halfway).
fn damaged_attempts_keep_old_data(payload: Vec<u8>, expected_log: &str, close: bool) {
    let dir = tempfile::tempdir().expect("temp dir");
    let log = dir.path().join("replica.log");
    let log_arg = log.to_string_lossy().into_owned();
    let replica = start_hozon(&["--logfile", &log_arg]);
    let mut h = Conn::connect(replica.port);
    call(&mut h, &["SET", "old", "kept"]);
    call(&mut h, &["RPUSH", "oldlist", "1", "2"]);
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
    let port = listener.local_addr().expect("addr").port().to_string();
    assert_eq!(
        call(&mut h, &["REPLICAOF", "127.0.0.1", &port]),
        Value::Simple("OK".into())
    );
    let first = serve_attempt(&listener, &payload);
    let first = (!close).then_some(first);
    // The replica gives up on the payload and connects again.
    let second = serve_attempt(&listener, &payload);
    drop((first, second));
    let text = std::fs::read_to_string(&log).expect("the log");
    assert!(
        text.contains(expected_log),
        "no {expected_log:?} in:\n{text}"
    );
    assert!(
        text.contains(&format!(
            "Reconnecting to MASTER 127.0.0.1:{port} after failure"
        )),
        "no retry in:\n{text}"
    );
    assert_eq!(call(&mut h, &["GET", "old"]), Value::Bulk(b"kept".to_vec()));
    assert_eq!(call(&mut h, &["LLEN", "oldlist"]), Value::Int(2));
    assert_eq!(call(&mut h, &["EXISTS", "new1"]), Value::Int(0));
    assert_eq!(call(&mut h, &["DBSIZE"]), Value::Int(2));
    // No temporary payload file is left behind (the last attempt's goes
    // once the replica saw its end).
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let leftovers: Vec<_> = std::fs::read_dir(dir.path())
            .expect("dir")
            .filter_map(Result::ok)
            .filter(|e| e.file_name().to_string_lossy().starts_with("temp-sync"))
            .collect();
        if leftovers.is_empty() {
            break;
        }
        assert!(Instant::now() < deadline, "left behind: {leftovers:?}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn a_payload_with_a_flipped_byte_keeps_the_old_data_and_retries() {
    let payload = flipped_payload();
    damaged_payload_keeps_old_data(
        payload,
        "Failed trying to load the MASTER synchronization DB from disk",
    );
}

#[test]
fn a_truncated_eof_form_payload_keeps_the_old_data_and_retries() {
    let rdb = redis_rdb();
    let mark = "m".repeat(40);
    let mut payload = format!("$EOF:{mark}\r\n").into_bytes();
    // The file without its last 20 bytes, then the mark: the RDB ends too
    // early.
    payload.extend_from_slice(&rdb[..rdb.len() - 20]);
    payload.extend_from_slice(mark.as_bytes());
    damaged_payload_keeps_old_data(
        payload,
        "Failed trying to load the MASTER synchronization DB from disk",
    );
}

#[test]
fn a_bad_dollar_line_keeps_the_old_data_and_retries() {
    damaged_payload_keeps_old_data(
        b"hello\r\n".to_vec(),
        "Bad protocol from MASTER, the first byte is not '$' (we received 'hello')",
    );
}

/// A disk-form payload (`$<len>` and Redis's RDB) with one byte of a
/// value flipped: only the checksum can tell.
pub fn flipped_payload() -> Vec<u8> {
    let mut rdb = redis_rdb();
    let at = rdb
        .windows(4)
        .position(|w| w == b"from")
        .expect("a value in the file");
    rdb[at] ^= 0x20;
    let mut payload = format!("${}\r\n", rdb.len()).into_bytes();
    payload.extend_from_slice(&rdb);
    payload
}

/// Sends `payload` in `pieces` parts, `pause` apart (the replica reads
/// the file while it arrives).
fn drip(stream: &mut TcpStream, payload: &[u8], pieces: usize, pause: Duration) {
    for part in payload.chunks(payload.len().div_ceil(pieces)) {
        stream.write_all(part).expect("write");
        std::thread::sleep(pause);
    }
}

/// A replica of a fake master that sends a valid payload slowly, in both
/// forms: the load that reads the file while it arrives waits for every
/// part and ends with the master's data.
#[test]
fn a_payload_sent_in_slow_parts_loads_while_it_arrives() {
    let rdb = redis_rdb();
    let mark = "k".repeat(40);
    let mut mark_form = format!("$EOF:{mark}\r\n").into_bytes();
    mark_form.extend_from_slice(&rdb);
    mark_form.extend_from_slice(mark.as_bytes());
    let mut length_form = format!("${}\r\n", rdb.len()).into_bytes();
    length_form.extend_from_slice(&rdb);
    for payload in [length_form, mark_form] {
        let replica = start_hozon(&[]);
        let mut h = Conn::connect(replica.port);
        call(&mut h, &["SET", "old", "replaced"]);
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
        let port = listener.local_addr().expect("addr").port().to_string();
        call(&mut h, &["REPLICAOF", "127.0.0.1", &port]);
        let mut stream = serve_attempt(&listener, &[]);
        drip(&mut stream, &payload, 12, Duration::from_millis(40));
        let deadline = Instant::now() + Duration::from_secs(10);
        while call(&mut h, &["EXISTS", "new49"]) != Value::Int(1) {
            assert!(Instant::now() < deadline, "the payload never loaded");
            std::thread::sleep(Duration::from_millis(20));
        }
        assert_eq!(call(&mut h, &["DBSIZE"]), Value::Int(50));
        assert_eq!(call(&mut h, &["EXISTS", "old"]), Value::Int(0));
        assert_eq!(
            call(&mut h, &["GET", "new7"]),
            Value::Bulk(b"from the fake master".to_vec())
        );
        drop(stream);
    }
}

#[test]
fn bytes_after_the_checksum_in_a_length_form_payload_keep_the_old_data() {
    let mut rdb = redis_rdb();
    rdb.extend_from_slice(b"junk");
    let mut payload = format!("${}\r\n", rdb.len()).into_bytes();
    payload.extend_from_slice(&rdb);
    damaged_payload_keeps_old_data(payload, "4 bytes follow the RDB checksum");
}

/// The master goes away halfway through a length-form payload: the load
/// reading it stops, the old data stays, no temporary file is left.
#[test]
fn a_payload_cut_by_a_closed_link_keeps_the_old_data() {
    let rdb = redis_rdb();
    let mut payload = format!("${}\r\n", rdb.len()).into_bytes();
    payload.extend_from_slice(&rdb[..rdb.len() / 2]);
    damaged_attempts_keep_old_data(payload, "Reconnecting to MASTER", true);
}
