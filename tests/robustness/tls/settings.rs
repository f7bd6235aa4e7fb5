//! The `tls-*` settings against redis-server: CONFIG GET, CONFIG SET of a
//! new certificate (reloaded for new connections, old ones kept), refused
//! changes that leave the old configuration serving, the TLS port moved,
//! the protocol versions, and `port 0` for TLS only.

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use testkit::certs::Certs;
use testkit::harness::{self, array_elements, show, Conn};

use super::{client_config, der, start_both, Identity, TlsClient, Versions};

fn client(certs: &Certs) -> std::sync::Arc<rustls::ClientConfig> {
    client_config(certs, Identity::Client, Versions::Both)
}

#[test]
fn config_get_of_the_tls_settings_matches_redis() {
    let certs = Certs::generate();
    let servers = start_both(&certs, &["--tls-auth-clients", "optional"]);
    let mut got = Vec::new();
    for server in &servers {
        let mut conn = Conn::connect(server.port());
        let reply = conn.call(&[b"CONFIG", b"GET", b"tls-*"]);
        let items = array_elements(&reply);
        let mut pairs: Vec<(Vec<u8>, Vec<u8>)> = items
            .chunks(2)
            .map(|p| (p[0].clone(), p[1].clone()))
            .filter(|(name, _)| name != b"$8\r\ntls-port\r\n")
            .collect();
        pairs.sort();
        assert_eq!(pairs.len(), 19, "{}: {}", server.name, show(&reply));
        got.push(pairs);
    }
    assert_eq!(
        got[0], got[1],
        "CONFIG GET tls-*: redis-server vs hozon-server"
    );
}

#[test]
fn a_new_certificate_by_config_set_serves_new_connections_and_keeps_old_ones_like_redis() {
    let certs = Certs::generate();
    let servers = start_both(&certs, &[]);
    for server in &servers {
        let mut control = Conn::connect(server.port());
        let mut before = TlsClient::connect(server.tls_port, client(&certs)).expect("connect");
        assert_eq!(before.server_cert(), der(&certs, "server.crt"));
        let set = control.call(&[
            b"CONFIG",
            b"SET",
            b"tls-cert-file",
            certs.path("server2.crt").as_bytes(),
            b"tls-key-file",
            certs.path("server2.key").as_bytes(),
        ]);
        assert_eq!(set, b"+OK\r\n", "{}", server.name);
        let mut after = TlsClient::connect(server.tls_port, client(&certs)).expect("connect");
        assert_eq!(
            after.server_cert(),
            der(&certs, "server2.crt"),
            "{}: a new connection still got the old certificate",
            server.name
        );
        assert_eq!(before.call(&[b"SET", b"k", b"1"]), b"+OK\r\n");
        assert_eq!(after.call(&[b"GET", b"k"]), b"$1\r\n1\r\n");
    }
}

#[test]
fn refused_tls_changes_answer_like_redis_and_leave_the_old_configuration_serving() {
    let certs = Certs::generate();
    let servers = start_both(&certs, &[]);
    let missing = certs
        .dir()
        .join("missing.crt")
        .to_string_lossy()
        .into_owned();
    let changes: Vec<Vec<String>> = vec![
        vec!["tls-cert-file".into(), missing.clone()],
        vec!["tls-key-file".into(), missing.clone()],
        vec!["tls-ca-cert-file".into(), missing],
        // A key that is not the certificate's.
        vec!["tls-key-file".into(), certs.path("server2.key")],
        vec!["tls-protocols".into(), "TLSv9".into()],
        vec!["tls-ciphersuites".into(), "TLS_NO_SUCH_SUITE".into()],
        vec!["tls-ciphers".into(), "NO-SUCH-CIPHER".into()],
        // tls-auth-clients without a CA.
        vec![
            "tls-ca-cert-file".into(),
            String::new(),
            "tls-ca-cert-dir".into(),
            String::new(),
        ],
    ];
    for change in &changes {
        let mut args: Vec<&[u8]> = vec![b"CONFIG", b"SET"];
        args.extend(change.iter().map(|s| s.as_bytes()));
        let mut replies = Vec::new();
        for server in &servers {
            let mut control = Conn::connect(server.port());
            let reply = control.call(&args);
            // Still serving TLS with the old settings.
            let tls = TlsClient::connect(server.tls_port, client(&certs))
                .unwrap_or_else(|e| panic!("{} after {change:?}: {e}", server.name));
            assert_eq!(tls.server_cert(), der(&certs, "server.crt"));
            let value = control.call(&[b"CONFIG", b"GET", change[0].as_bytes()]);
            replies.push((reply, value));
        }
        assert_eq!(
            replies[0],
            replies[1],
            "CONFIG SET {change:?}: redis-server {} / {} vs hozon-server {} / {}",
            show(&replies[0].0),
            show(&replies[0].1),
            show(&replies[1].0),
            show(&replies[1].1)
        );
        assert!(replies[1].0.starts_with(b"-ERR"), "{change:?} was accepted");
    }
}

#[test]
fn tls_protocols_limits_the_versions_offered_like_redis() {
    let certs = Certs::generate();
    let servers = start_both(&certs, &[]);
    for server in &servers {
        let mut control = Conn::connect(server.port());
        for (setting, tls12, tls13) in [
            ("TLSv1.2", true, false),
            ("TLSv1.3", false, true),
            ("TLSv1.2 TLSv1.3", true, true),
        ] {
            let set = control.call(&[b"CONFIG", b"SET", b"tls-protocols", setting.as_bytes()]);
            assert_eq!(set, b"+OK\r\n", "{}: {setting}", server.name);
            for (versions, served) in [(Versions::Tls12, tls12), (Versions::Tls13, tls13)] {
                let result = TlsClient::connect(
                    server.tls_port,
                    client_config(&certs, Identity::Client, versions),
                );
                assert_eq!(
                    result.is_ok(),
                    served,
                    "{} tls-protocols {setting}",
                    server.name
                );
            }
        }
    }
}

#[test]
fn config_set_tls_port_moves_the_tls_listener_like_redis() {
    let certs = Certs::generate();
    let servers = start_both(&certs, &[]);
    for server in &servers {
        let mut control = Conn::connect(server.port());
        let new_port = harness::unused_port();
        let set = control.call(&[
            b"CONFIG",
            b"SET",
            b"tls-port",
            new_port.to_string().as_bytes(),
        ]);
        assert_eq!(set, b"+OK\r\n", "{}", server.name);
        let mut moved = TlsClient::connect(new_port, client(&certs)).expect("the new TLS port");
        assert_eq!(moved.call(&[b"PING"]), b"+PONG\r\n");
        assert!(
            std::net::TcpStream::connect(("127.0.0.1", server.tls_port)).is_err(),
            "{}: the old TLS port still accepts",
            server.name
        );
        // tls-port 0 closes it.
        assert_eq!(
            control.call(&[b"CONFIG", b"SET", b"tls-port", b"0"]),
            b"+OK\r\n"
        );
        assert!(std::net::TcpStream::connect(("127.0.0.1", new_port)).is_err());
        assert_eq!(control.call(&[b"PING"]), b"+PONG\r\n");
    }
}

/// The TCP ports process `pid` listens on (from /proc).
fn listening_ports(pid: u32) -> Vec<u16> {
    let mut inodes = Vec::new();
    for entry in std::fs::read_dir(format!("/proc/{pid}/fd")).expect("read /proc/pid/fd") {
        let Ok(target) = std::fs::read_link(entry.expect("fd entry").path()) else {
            continue;
        };
        let target = target.to_string_lossy().into_owned();
        if let Some(inode) = target
            .strip_prefix("socket:[")
            .and_then(|t| t.strip_suffix(']'))
        {
            inodes.push(inode.to_string());
        }
    }
    let mut ports = Vec::new();
    for table in ["tcp", "tcp6"] {
        let text = std::fs::read_to_string(format!("/proc/{pid}/net/{table}")).expect("net table");
        for line in text.lines().skip(1) {
            let fields: Vec<&str> = line.split_whitespace().collect();
            // local_address state ... inode (field 9); 0A is LISTEN.
            if fields.len() > 9 && fields[3] == "0A" && inodes.iter().any(|i| i == fields[9]) {
                let port = fields[1].rsplit(':').next().expect("port");
                ports.push(u16::from_str_radix(port, 16).expect("hex port"));
            }
        }
    }
    ports.sort();
    ports
}

#[test]
fn port_0_with_a_tls_port_serves_tls_only_like_redis() {
    let certs = Certs::generate();
    for (binary, name) in [
        (harness::redis_server_path(), "redis-server"),
        (harness::hozon_server_path().to_string(), "hozon-server"),
    ] {
        let dir = tempfile::tempdir().expect("dir");
        let tls_port = harness::unused_port();
        let mut child = Command::new(&binary)
            .args([
                "--port",
                "0",
                "--bind",
                "127.0.0.1",
                "--save",
                "",
                "--appendonly",
                "no",
            ])
            .args(["--dir", &dir.path().to_string_lossy()])
            .args(certs.server_args(tls_port))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("spawn");
        let deadline = Instant::now() + Duration::from_secs(20);
        let mut tls = loop {
            match TlsClient::connect(tls_port, client(&certs)) {
                Ok(c) => break c,
                Err(e) => {
                    assert!(Instant::now() < deadline, "{name} never served TLS: {e}");
                    assert!(child.try_wait().expect("wait").is_none(), "{name} exited");
                    std::thread::sleep(Duration::from_millis(20));
                }
            }
        };
        assert_eq!(
            tls.call(&[b"CONFIG", b"GET", b"port"]),
            b"*2\r\n$4\r\nport\r\n$1\r\n0\r\n"
        );
        assert_eq!(listening_ports(child.id()), vec![tls_port], "{name}");
        let _ = child.kill();
        let _ = child.wait();
    }
}

#[test]
fn an_encrypted_key_is_read_with_tls_key_file_pass_like_redis() {
    let certs = Certs::generate();
    let encrypted = certs.dir().join("server-encrypted.key");
    let made = Command::new("openssl")
        .args([
            "pkcs8",
            "-topk8",
            "-v2",
            "aes-256-cbc",
            "-passout",
            "pass:s3cret",
        ])
        .args(["-in", &certs.path("server.key"), "-out"])
        .arg(&encrypted)
        .output()
        .expect("run openssl");
    assert!(
        made.status.success(),
        "{}",
        String::from_utf8_lossy(&made.stderr)
    );
    let head = std::fs::read_to_string(&encrypted).expect("the encrypted key");
    assert!(
        head.starts_with("-----BEGIN ENCRYPTED PRIVATE KEY-----"),
        "{head}"
    );
    let encrypted = encrypted.to_string_lossy().into_owned();
    let servers = start_both(
        &certs,
        &[
            "--tls-key-file",
            &encrypted,
            "--tls-key-file-pass",
            "s3cret",
        ],
    );
    for server in &servers {
        let mut tls = TlsClient::connect(server.tls_port, client(&certs))
            .unwrap_or_else(|e| panic!("{}: {e}", server.name));
        assert_eq!(tls.server_cert(), der(&certs, "server.crt"));
        assert_eq!(tls.call(&[b"PING"]), b"+PONG\r\n");
    }
    // A wrong password is refused as any bad key is, the old key kept;
    // the right one with a reload works.
    let mut replies = Vec::new();
    for server in &servers {
        let mut control = Conn::connect(server.port());
        let wrong = control.call(&[b"CONFIG", b"SET", b"tls-key-file-pass", b"wrong"]);
        TlsClient::connect(server.tls_port, client(&certs))
            .unwrap_or_else(|e| panic!("{} after a wrong password: {e}", server.name));
        let right = control.call(&[
            b"CONFIG",
            b"SET",
            b"tls-key-file-pass",
            b"s3cret",
            b"tls-cert-file",
            certs.path("server.crt").as_bytes(),
        ]);
        replies.push((wrong, right));
    }
    assert_eq!(replies[0], replies[1], "redis-server vs hozon-server");
    assert!(
        replies[1].0.starts_with(b"-ERR"),
        "a wrong password was accepted"
    );
    assert_eq!(replies[1].1, b"+OK\r\n");
}
