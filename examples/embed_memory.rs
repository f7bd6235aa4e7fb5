//! Memory per key of the embedded handle against the server's: loads the
//! same keys (`SET key:<n> <16-byte value>`, string values, no expiry)
//! into an in-memory `Db` in this process and into a `hozon-server`
//! started on a free port, and prints the growth of each process's RSS
//! per key (docs/embedding.md, "Measurements").
//!
//! Usage: cargo run --release --example embed_memory -- [keys] [hozon-server path]
//! (defaults: 1000000, target/release/hozon-server; build it first)

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use hozon::embed::Db;

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let keys: u64 = args.first().map_or(1_000_000, |s| s.parse().expect("keys"));
    let server = args
        .get(1)
        .cloned()
        .unwrap_or_else(|| "target/release/hozon-server".into());

    let embedded = embedded_growth(keys);
    let served = server_growth(keys, &server);
    println!("keys: {keys}");
    println!(
        "embedded Db:  {:>10} bytes of RSS, {:.1} bytes/key",
        embedded,
        embedded as f64 / keys as f64
    );
    println!(
        "hozon-server: {:>10} bytes of RSS, {:.1} bytes/key",
        served,
        served as f64 / keys as f64
    );
    println!(
        "ratio embedded/server: {:.3}",
        embedded as f64 / served as f64
    );
}

fn value(n: u64) -> String {
    format!("{:016}", n)
}

/// RSS growth of this process while an in-memory `Db` takes the keys.
fn embedded_growth(keys: u64) -> u64 {
    let db = Db::in_memory().open().unwrap();
    let before = rss(std::process::id());
    let mut conn = db.connect();
    for n in 0..keys {
        let key = format!("key:{n}");
        conn.execute(&[b"SET", key.as_bytes(), value(n).as_bytes()])
            .unwrap();
    }
    let after = rss(std::process::id());
    drop(conn);
    db.close().unwrap();
    after.saturating_sub(before)
}

/// RSS growth of a `hozon-server` (no persistence) while it takes the
/// keys over one pipelined connection.
fn server_growth(keys: u64, path: &str) -> u64 {
    let port = TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let dir = tempfile::tempdir().unwrap();
    let mut child = Command::new(path)
        .args([
            "--port",
            &port.to_string(),
            "--appendonly",
            "no",
            "--save",
            "",
        ])
        .arg("--dir")
        .arg(dir.path())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap_or_else(|e| panic!("starting {path}: {e} (build it: cargo build --release)"));
    let started = Instant::now();
    let stream = loop {
        match TcpStream::connect(("127.0.0.1", port)) {
            Ok(s) => break s,
            Err(_) if started.elapsed() < Duration::from_secs(10) => {
                std::thread::sleep(Duration::from_millis(20))
            }
            Err(e) => panic!("{path} did not start: {e}"),
        }
    };
    let mut reader = BufReader::new(stream.try_clone().unwrap());
    let mut writer = stream;
    let ping = |w: &mut TcpStream, r: &mut BufReader<TcpStream>| {
        w.write_all(b"PING\r\n").unwrap();
        let mut line = String::new();
        r.read_line(&mut line).unwrap();
    };
    ping(&mut writer, &mut reader);
    let before = rss(child.id());
    let batch = 1000;
    let mut n = 0;
    while n < keys {
        let mut out = Vec::new();
        let end = (n + batch).min(keys);
        for i in n..end {
            let key = format!("key:{i}");
            let value = value(i);
            write!(
                out,
                "*3\r\n$3\r\nSET\r\n${}\r\n{key}\r\n${}\r\n{value}\r\n",
                key.len(),
                value.len()
            )
            .unwrap();
        }
        writer.write_all(&out).unwrap();
        let mut expect = (end - n) as usize * 5; // "+OK\r\n"
        let mut buf = [0u8; 65536];
        while expect > 0 {
            let got = reader.read(&mut buf[..expect.min(65536)]).unwrap();
            assert!(got > 0, "server closed");
            expect -= got;
        }
        n = end;
    }
    ping(&mut writer, &mut reader);
    let after = rss(child.id());
    let _ = child.kill();
    let _ = child.wait();
    after.saturating_sub(before)
}

fn rss(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let line = status
        .lines()
        .find(|l| l.starts_with("VmRSS:"))
        .expect("VmRSS");
    line.split_whitespace()
        .nth(1)
        .unwrap()
        .parse::<u64>()
        .unwrap()
        * 1024
}
