//! A server loading its files at startup (it listens and answers
//! -LOADING meanwhile): a SHUTDOWN or SIGTERM during the load exits
//! without saving (a save would replace the files with the empty dataset
//! not yet loaded), an AOF's load reports its progress in bytes, and the
//! writes after the load are appended to the AOF it loaded.

use std::path::Path;
use std::time::{Duration, Instant};

use crate::harness::{
    hozon_server_path, signal, start_before_loaded, start_hozon, wait_until_loaded, Conn,
    ServerProcess,
};

const KEYS: usize = 20_000;

/// Fills `dir` with `KEYS` keys through a server with the given
/// persistence, stopped by SHUTDOWN (which saves, with save points).
fn fill(dir: &Path, persistence: &[&str]) {
    let d = dir.to_string_lossy();
    let server = start_hozon(&[&["--dir", &d][..], persistence].concat());
    let mut c = Conn::connect(server.port);
    for chunk in 0..KEYS / 1000 {
        let script = format!(
            "for i={},{} do redis.call('SET','k:'..i,i) end",
            chunk * 1000 + 1,
            chunk * 1000 + 1000
        );
        assert_eq!(c.call(&[b"EVAL", script.as_bytes(), b"0"]), b"$-1\r\n");
    }
    shut_down(&server, &mut c);
}

/// SHUTDOWN, then waits for the process to exit.
fn shut_down(server: &ServerProcess, c: &mut Conn) {
    c.send_raw(b"*1\r\n$8\r\nSHUTDOWN\r\n");
    let _ = c.read_until_close();
    wait_exit(server);
}

fn wait_exit(server: &ServerProcess) {
    let deadline = Instant::now() + Duration::from_secs(30);
    while std::net::TcpStream::connect(("127.0.0.1", server.port)).is_ok() {
        assert!(Instant::now() < deadline, "the server did not exit");
        std::thread::sleep(Duration::from_millis(10));
    }
}

fn dbsize_after_restart(dir: &Path, persistence: &[&str]) -> Vec<u8> {
    let d = dir.to_string_lossy();
    let server = start_hozon(&[&["--dir", &d][..], persistence].concat());
    Conn::connect(server.port).call(&[b"DBSIZE"])
}

fn loading(c: &mut Conn) -> bool {
    let reply = c.call(&[b"INFO", b"persistence"]);
    String::from_utf8_lossy(&reply).contains("\r\nloading:1\r\n")
}

/// A server with save points started on the snapshot in `dir`, slowed
/// down so that it is still loading when the test acts.
fn start_slow(dir: &Path, persistence: &[&str]) -> ServerProcess {
    let d = dir.to_string_lossy();
    let args = [&["--dir", &d, "--key-load-delay", "200"][..], persistence].concat();
    start_before_loaded(hozon_server_path(), "hozon-server", &args)
}

#[test]
fn shutdown_or_sigterm_while_loading_exits_without_saving_the_empty_dataset() {
    // Save points: SHUTDOWN and SIGTERM save a snapshot by default.
    let persistence = ["--appendonly", "no", "--save", "3600 1"];
    for how in ["SHUTDOWN", "SHUTDOWN SAVE", "SIGTERM"] {
        let dir = tempfile::tempdir().unwrap();
        fill(dir.path(), &persistence);
        let server = start_slow(dir.path(), &persistence);
        let mut c = Conn::connect(server.port);
        assert!(loading(&mut c), "{how}: the load ended before the test");
        assert_eq!(
            c.call(&[b"GET", b"k:1"]),
            b"-LOADING Redis is loading the dataset in memory\r\n"
        );
        if how == "SIGTERM" {
            signal(server.pid(), "-TERM");
        } else {
            let words: Vec<&[u8]> = how.split(' ').map(str::as_bytes).collect();
            c.send_raw(&testkit::harness::encode_command(&words));
            // Redis closes the connection without a reply when it exits.
            assert_eq!(c.read_until_close(), b"", "{how}");
        }
        wait_exit(&server);
        drop(server);
        assert_eq!(
            dbsize_after_restart(dir.path(), &persistence),
            format!(":{KEYS}\r\n").into_bytes(),
            "{how} while loading lost the snapshot"
        );
    }
}

#[test]
fn an_aof_load_reports_bytes_and_appends_the_writes_after_it() {
    let persistence = ["--appendonly", "yes", "--save", ""];
    let dir = tempfile::tempdir().unwrap();
    fill(dir.path(), &persistence);
    let aof_len = std::fs::metadata(dir.path().join("appendonly.aof"))
        .unwrap()
        .len();
    let server = start_slow(dir.path(), &persistence);
    let mut c = Conn::connect(server.port);
    let field = |c: &mut Conn, name: &str| -> Option<u64> {
        let reply = c.call(&[b"INFO", b"persistence"]);
        let prefix = format!("{name}:");
        String::from_utf8_lossy(&reply)
            .lines()
            .find_map(|l| l.strip_prefix(&prefix).and_then(|v| v.parse().ok()))
    };
    assert!(loading(&mut c), "the load ended before the test");
    assert_eq!(field(&mut c, "loading_total_bytes"), Some(aof_len));
    assert_eq!(
        c.call(&[b"SET", b"during", b"load"]),
        b"-LOADING Redis is loading the dataset in memory\r\n"
    );
    let first = field(&mut c, "loading_loaded_bytes").unwrap();
    std::thread::sleep(Duration::from_millis(300));
    let later = field(&mut c, "loading_loaded_bytes").unwrap();
    assert!(
        first < later && later < aof_len,
        "loaded bytes {first} then {later} of {aof_len}"
    );
    assert!(wait_until_loaded(server.port, Duration::from_secs(60)));
    assert_eq!(c.call(&[b"SET", b"after", b"load"]), b"+OK\r\n");
    assert_eq!(
        c.call(&[b"DBSIZE"]),
        format!(":{}\r\n", KEYS + 1).into_bytes()
    );

    shut_down(&server, &mut c);
    assert_eq!(
        dbsize_after_restart(dir.path(), &persistence),
        format!(":{}\r\n", KEYS + 1).into_bytes()
    );
}
