//! `unixsocket` / `unixsocketperm`: a Unix-domain listener beside TCP,
//! its clients served like TCP clients and shown as Redis shows them,
//! `port 0` with only the socket, the file removed at shutdown. The
//! clients are the real redis-cli (`-s`) and a raw socket.

use std::io::{Read, Write};
use std::os::unix::fs::PermissionsExt;
use std::os::unix::net::UnixStream;
use std::path::Path;

use super::common::*;

/// The `name=value` field of a CLIENT LIST line.
fn field<'a>(line: &'a str, name: &str) -> &'a str {
    line.split(' ')
        .find_map(|f| f.strip_prefix(name).and_then(|v| v.strip_prefix('=')))
        .unwrap_or_else(|| panic!("no {name} in {line}"))
}

/// Starts `binary` with a Unix socket at `dir/s.sock` (mode 700) beside
/// TCP on a free port; (process, port, socket path).
fn start_with_socket(binary: &str, dir: &Path) -> (Proc, u16, std::path::PathBuf) {
    let port = unused_port();
    let sock = dir.join("s.sock");
    let proc = Proc::spawn(
        binary,
        &[
            "--port",
            &port.to_string(),
            "--bind",
            "127.0.0.1",
            "--save",
            "",
            "--appendonly",
            "no",
            "--dir",
            &dir.to_string_lossy(),
            "--unixsocket",
            &sock.to_string_lossy(),
            "--unixsocketperm",
            "700",
        ],
        &[],
        &dir.join("out.log"),
    );
    wait_ready_tcp(port);
    (proc, port, sock)
}

#[test]
fn unix_clients_are_served_and_listed_as_in_redis() {
    let tmp = tempfile::tempdir().unwrap();
    let mut lines = Vec::new();
    for (name, binary) in [
        ("redis", testkit::harness::redis_server_path()),
        ("hozon", hozon_server_path().to_string()),
    ] {
        let dir = tmp.path().join(name);
        std::fs::create_dir(&dir).unwrap();
        let (mut proc, port, sock) = start_with_socket(&binary, &dir);
        let mode = std::fs::metadata(&sock).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o700, "{name}: unixsocketperm");
        assert_eq!(cli_unix(&sock, &["PING"]), "PONG");
        assert_eq!(cli_unix(&sock, &["SET", "k", "v"]), "OK");
        assert_eq!(cli_tcp(port, &["GET", "k"]), "v", "{name}: one keyspace");
        assert_eq!(
            cli_unix(&sock, &["CONFIG", "GET", "unixsocket"]),
            format!("unixsocket\n{}", sock.display())
        );
        assert_eq!(
            cli_unix(&sock, &["CONFIG", "GET", "unixsocketperm"]),
            "unixsocketperm\n700"
        );
        // Pipelined requests over a raw socket.
        let mut raw = UnixStream::connect(&sock).unwrap();
        raw.write_all(b"*1\r\n$4\r\nPING\r\n*2\r\n$4\r\nECHO\r\n$2\r\nhi\r\n")
            .unwrap();
        let mut got = Vec::new();
        let mut buf = [0u8; 64];
        while got.len() < b"+PONG\r\n$2\r\nhi\r\n".len() {
            let n = raw.read(&mut buf).unwrap();
            assert!(n > 0, "{name} closed the connection");
            got.extend_from_slice(&buf[..n]);
        }
        assert_eq!(got, b"+PONG\r\n$2\r\nhi\r\n");
        // CLIENT LIST seen by a Unix client: its own line.
        let list = cli_unix(&sock, &["CLIENT", "LIST"]);
        let own = list
            .lines()
            .find(|l| field(l, "cmd") == "client|list")
            .unwrap_or_else(|| panic!("{list}"))
            .to_string();
        let path = sock.to_string_lossy().into_owned();
        assert_eq!(field(&own, "addr"), format!("{path}:0"));
        assert_eq!(field(&own, "laddr"), format!("{path}:0"));
        lines.push(own.replace(&path, "PATH"));
        // SHUTDOWN over the socket removes the socket file.
        cli_unix(&sock, &["SHUTDOWN", "NOSAVE"]);
        assert_eq!(proc.wait_exit(), 0);
        assert!(!sock.exists(), "{name} removed its socket file");
        drop(raw);
    }
    // The fields that do not depend on ids and timing agree.
    for key in [
        "addr", "laddr", "flags", "db", "sub", "psub", "multi", "cmd", "resp",
    ] {
        assert_eq!(field(&lines[0], key), field(&lines[1], key), "{key}");
    }
}

#[test]
fn port_zero_with_a_unix_socket_listens_on_the_socket_only() {
    let dir = tempfile::tempdir().unwrap();
    let sock = dir.path().join("only.sock");
    let mut proc = Proc::spawn(
        hozon_server_path(),
        &[
            "--port",
            "0",
            "--save",
            "",
            "--appendonly",
            "no",
            "--dir",
            &dir.path().to_string_lossy(),
            "--unixsocket",
            &sock.to_string_lossy(),
        ],
        &[],
        &dir.path().join("out.log"),
    );
    wait_for("the socket to answer", || {
        cli_unix(&sock, &["PING"]) == "PONG"
    });
    wait_for("the load to finish", || {
        cli_unix(&sock, &["INFO", "persistence"]).contains("loading:0")
    });
    let log = proc.output();
    assert!(!log.contains("Listening on tcp"), "{log}");
    assert!(
        log.contains(&format!(
            "The server is now ready to accept connections at {}",
            sock.display()
        )),
        "{log}"
    );
    assert_eq!(cli_unix(&sock, &["CONFIG", "GET", "port"]), "port\n0");
    // SIGTERM: a clean exit, the socket file removed.
    signal(proc.child.id() as i32, libc::SIGTERM);
    assert_eq!(proc.wait_exit(), 0);
    assert!(!sock.exists());
    assert!(proc.output().contains("Removing the unix socket file."));
}

#[test]
fn a_stale_socket_file_is_replaced_and_a_bad_path_refuses_the_start() {
    let dir = tempfile::tempdir().unwrap();
    let sock = dir.path().join("stale.sock");
    // A socket file left by a killed server.
    drop(std::os::unix::net::UnixListener::bind(&sock).unwrap());
    assert!(sock.exists());
    let port = unused_port();
    let _proc = Proc::spawn(
        hozon_server_path(),
        &[
            "--port",
            &port.to_string(),
            "--bind",
            "127.0.0.1",
            "--save",
            "",
            "--appendonly",
            "no",
            "--dir",
            &dir.path().to_string_lossy(),
            "--unixsocket",
            &sock.to_string_lossy(),
        ],
        &[],
        &dir.path().join("out.log"),
    );
    wait_ready_tcp(port);
    assert_eq!(cli_unix(&sock, &["PING"]), "PONG");

    let missing = dir.path().join("no/such/dir/x.sock");
    let mut failed = Proc::spawn(
        hozon_server_path(),
        &[
            "--port",
            &unused_port().to_string(),
            "--bind",
            "127.0.0.1",
            "--save",
            "",
            "--appendonly",
            "no",
            "--dir",
            &dir.path().to_string_lossy(),
            "--unixsocket",
            &missing.to_string_lossy(),
        ],
        &[],
        &dir.path().join("failed.log"),
    );
    assert_eq!(failed.wait_exit(), 1);
    assert!(
        failed
            .output()
            .contains("Failed opening Unix socket: No such file or directory"),
        "{}",
        failed.output()
    );
}

#[test]
fn a_unix_client_connecting_during_a_busy_script_is_answered_busy() {
    let dir = tempfile::tempdir().unwrap();
    let (_proc, port, sock) = start_with_socket(hozon_server_path(), dir.path());
    assert_eq!(
        cli_tcp(port, &["CONFIG", "SET", "busy-reply-threshold", "10"]),
        "OK"
    );
    // A script that runs until killed, from a TCP client.
    let busy = std::thread::spawn(move || cli_tcp(port, &["EVAL", "while true do end", "0"]));
    // Each attempt is a new connection, read with a deadline (a server
    // that did not accept it would leave redis-cli waiting forever).
    wait_for("a new Unix client answered -BUSY", || {
        let mut c = UnixStream::connect(&sock).unwrap();
        c.set_read_timeout(Some(std::time::Duration::from_secs(2)))
            .unwrap();
        c.write_all(b"*1\r\n$4\r\nPING\r\n").unwrap();
        let mut buf = [0u8; 64];
        matches!(c.read(&mut buf), Ok(n) if buf[..n].starts_with(b"-BUSY"))
    });
    // A new Unix connection is accepted and answered while the script runs.
    assert_eq!(cli_unix(&sock, &["SCRIPT", "KILL"]), "OK");
    let killed = busy.join().unwrap();
    assert!(killed.contains("Script killed by user"), "{killed}");
    assert_eq!(cli_unix(&sock, &["PING"]), "PONG");
}
