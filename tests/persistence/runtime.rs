//! Switching the append-only file on and off at runtime (CONFIG SET
//! appendonly): turning it on starts a background rewrite that writes the
//! current dataset out, so once it is in place the file alone rebuilds the
//! keyspace after a crash.

use crate::harness::{start_hozon, Conn};
use crate::interop::{dump, run_workload};

#[test]
fn config_set_appendonly_yes_writes_the_dataset_then_logs() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path().to_string_lossy().into_owned();
    let server = start_hozon(&["--appendonly", "no", "--dir", &d]);
    run_workload(server.port);
    assert!(
        !dir.path().join("appendonly.aof").exists(),
        "cache mode wrote a file"
    );
    let mut conn = Conn::connect(server.port);
    assert_eq!(
        conn.call(&[b"CONFIG", b"SET", b"appendonly", b"yes"]),
        b"+OK\r\n"
    );
    // Written while the first rewrite may still run: carried over by it.
    assert_eq!(conn.call(&[b"SET", b"during", b"rewrite"]), b"+OK\r\n");
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    loop {
        let info = String::from_utf8_lossy(&conn.call(&[b"INFO", b"persistence"])).into_owned();
        if info.contains("aof_rewrites:1\r\n") && info.contains("aof_rewrite_in_progress:0") {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "no rewrite after CONFIG SET appendonly yes: {info}"
        );
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    assert!(dir.path().join("appendonly.aof").exists());
    let names: Vec<String> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert!(
        names.iter().all(|n| !n.starts_with("temp-")),
        "the temporary log is removed after the switch: {names:?}"
    );
    assert_eq!(conn.call(&[b"SET", b"after", b"switch"]), b"+OK\r\n");
    assert_eq!(
        conn.call(&[b"CONFIG", b"GET", b"appendonly"]),
        b"*2\r\n$10\r\nappendonly\r\n$3\r\nyes\r\n"
    );
    let before = dump(server.port);
    drop(server); // SIGKILL
    let restarted = start_hozon(&["--appendonly", "yes", "--dir", &d]);
    assert_eq!(dump(restarted.port), before);
}

#[test]
fn config_set_appendonly_no_stops_logging_and_releases_the_directory() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path().to_string_lossy().into_owned();
    let server = start_hozon(&["--appendonly", "yes", "--dir", &d]);
    let mut conn = Conn::connect(server.port);
    conn.call(&[b"SET", b"kept", b"1"]);
    assert_eq!(
        conn.call(&[b"CONFIG", b"SET", b"appendonly", b"no"]),
        b"+OK\r\n"
    );
    let size = std::fs::metadata(dir.path().join("appendonly.aof"))
        .unwrap()
        .len();
    conn.call(&[b"SET", b"not-logged", b"2"]);
    assert_eq!(
        std::fs::metadata(dir.path().join("appendonly.aof"))
            .unwrap()
            .len(),
        size
    );
    // The directory is free: another server can use it while this one runs.
    let other = start_hozon(&["--appendonly", "yes", "--dir", &d]);
    let mut c2 = Conn::connect(other.port);
    assert_eq!(c2.call(&[b"GET", b"kept"]), b"$1\r\n1\r\n");
    assert_eq!(c2.call(&[b"GET", b"not-logged"]), b"$-1\r\n");
}
