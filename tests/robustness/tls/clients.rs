//! Real clients over TLS: redis-cli with and without client certificates
//! under each `tls-auth-clients` mode, redis-benchmark, redis-py; a
//! plain-text client on the TLS port. Each run against redis-server and
//! hozon-server with the same certificates.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::process::Command;
use std::time::Duration;

use testkit::certs::Certs;
use testkit::clients::{python_with_redis_py, repo_root, run_client};
use testkit::harness::Conn;

use super::{client_config, redis_cli, start_both, Identity, TlsClient, Versions};

/// redis-cli's certificate flags for `who`.
fn cli_identity(certs: &Certs, who: Identity) -> Vec<String> {
    let mut args = vec!["--cacert".to_string(), certs.path("ca.crt")];
    let name = match who {
        Identity::Anonymous => return args,
        Identity::Client => "client",
        Identity::Stranger => "stranger",
    };
    args.extend([
        "--cert".to_string(),
        certs.path(&format!("{name}.crt")),
        "--key".to_string(),
        certs.path(&format!("{name}.key")),
    ]);
    args
}

#[test]
fn redis_cli_is_served_or_refused_by_its_certificate_under_each_auth_mode_like_redis() {
    let certs = Certs::generate();
    let servers = start_both(&certs, &[]);
    // (tls-auth-clients, identity, served?)
    let cases = [
        ("yes", Identity::Client, true),
        ("yes", Identity::Anonymous, false),
        ("yes", Identity::Stranger, false),
        ("optional", Identity::Client, true),
        ("optional", Identity::Anonymous, true),
        ("optional", Identity::Stranger, false),
        ("no", Identity::Client, true),
        ("no", Identity::Anonymous, true),
    ];
    for server in &servers {
        let mut control = Conn::connect(server.port());
        for (mode, who, served) in cases {
            let set = control.call(&[b"CONFIG", b"SET", b"tls-auth-clients", mode.as_bytes()]);
            assert_eq!(
                set, b"+OK\r\n",
                "{}: CONFIG SET tls-auth-clients {mode}",
                server.name
            );
            let (ok, out, err) = redis_cli(
                server.tls_port,
                &cli_identity(&certs, who),
                &["SET", "cli:key", mode],
            );
            let label = format!("{} tls-auth-clients {mode}", server.name);
            if served {
                assert!(ok && out.trim() == "OK", "{label}: refused: {out}{err}");
                let (_, got, _) = redis_cli(
                    server.tls_port,
                    &cli_identity(&certs, who),
                    &["GET", "cli:key"],
                );
                assert_eq!(got.trim(), mode, "{label}");
            } else {
                assert!(
                    !ok && !out.contains("OK"),
                    "{label}: a client that must be refused was served: {out}{err}"
                );
            }
            // The rustls client agrees (TLS 1.2 and 1.3 both).
            for versions in [Versions::Tls12, Versions::Tls13] {
                let result =
                    TlsClient::connect(server.tls_port, client_config(&certs, who, versions));
                assert_eq!(
                    result.is_ok(),
                    served,
                    "{label}: rustls client: {:?}",
                    result.err()
                );
            }
        }
    }
}

#[test]
fn a_plain_text_client_on_the_tls_port_is_closed_unanswered_like_redis() {
    let certs = Certs::generate();
    let servers = start_both(&certs, &[]);
    for server in &servers {
        let mut sock = TcpStream::connect(("127.0.0.1", server.tls_port)).expect("connect");
        sock.set_read_timeout(Some(Duration::from_secs(10)))
            .expect("timeout");
        sock.write_all(b"*1\r\n$4\r\nPING\r\n").expect("write");
        let mut got = Vec::new();
        let mut chunk = [0u8; 1024];
        loop {
            match sock.read(&mut chunk) {
                Ok(0) => break,
                Ok(n) => got.extend_from_slice(&chunk[..n]),
                Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => break,
                Err(e) => panic!("{}: the connection was left open: {e}", server.name),
            }
        }
        // At most a TLS alert record (content type 21), never a reply.
        assert!(
            got.is_empty() || got[0] == 21,
            "{}: a plain-text client got {:?}",
            server.name,
            String::from_utf8_lossy(&got)
        );
        // The server still serves TLS and plain clients.
        let mut tls = TlsClient::connect(
            server.tls_port,
            client_config(&certs, Identity::Client, Versions::Both),
        )
        .expect("a TLS client after the plain one");
        assert_eq!(tls.call(&[b"ECHO", b"after"]), b"$5\r\nafter\r\n");
        assert_eq!(Conn::connect(server.port()).call(&[b"PING"]), b"+PONG\r\n");
    }
}

#[test]
fn redis_benchmark_over_tls_completes_without_errors_like_redis() {
    let certs = Certs::generate();
    let servers = start_both(&certs, &[]);
    for server in &servers {
        let out = Command::new("redis-benchmark")
            .args(["--tls", "-p", &server.tls_port.to_string()])
            .args(cli_identity(&certs, Identity::Client))
            .args(["-t", "set,get,lpush,lrange_100", "-n", "4000", "-c", "8"])
            .args(["-P", "16", "-r", "1000", "--csv"])
            .output()
            .expect("run redis-benchmark (Debian's redis-tools)");
        let stdout = String::from_utf8_lossy(&out.stdout);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "{}: {stdout}{stderr}", server.name);
        assert!(
            !stderr.to_lowercase().contains("error"),
            "{}: {stderr}",
            server.name
        );
        // One CSV line per test, each with a throughput.
        for test in ["SET", "GET", "LPUSH", "LRANGE_100"] {
            let line = stdout
                .lines()
                .find(|l| l.starts_with(&format!("\"{test}")))
                .unwrap_or_else(|| panic!("{}: no {test} row in {stdout}", server.name));
            let rps: f64 = line
                .split(',')
                .nth(1)
                .and_then(|v| v.trim_matches('"').parse().ok())
                .unwrap_or_else(|| panic!("{}: {line}", server.name));
            assert!(rps > 0.0, "{}: {line}", server.name);
            eprintln!("{} over TLS: {line}", server.name);
        }
        let mut control = Conn::connect(server.port());
        let keys = control.call(&[b"DBSIZE"]);
        assert_ne!(
            keys, b":0\r\n",
            "{}: the benchmark wrote nothing",
            server.name
        );
    }
}

#[test]
fn redis_py_over_tls_runs_commands_pipelines_pubsub_and_a_large_value_like_redis() {
    let python = python_with_redis_py();
    let certs = Certs::generate();
    let servers = start_both(&certs, &[]);
    let mut summaries = Vec::new();
    for server in &servers {
        let mut command = Command::new(&python);
        command
            .arg(repo_root().join("tests/clients/python/tls_client.py"))
            .arg(server.tls_port.to_string())
            .args([
                certs.path("ca.crt"),
                certs.path("client.crt"),
                certs.path("client.key"),
            ]);
        let output = run_client(command, "tls_client.py", Duration::from_secs(120));
        let last = output.lines().last().unwrap_or_default().to_string();
        eprintln!("redis-py over TLS, {}: {last}", server.name);
        summaries.push(last);
    }
    assert_eq!(summaries[0], summaries[1], "redis-server vs hozon-server");
}

#[test]
fn a_tls_client_over_maxclients_is_closed_unanswered_like_redis() {
    // Redis checks maxclients before the handshake, and closes: nothing
    // can be sent yet (its acceptCommonHandler says so).
    let certs = Certs::generate();
    let servers = start_both(&certs, &[]);
    for server in &servers {
        let mut control = Conn::connect(server.port());
        assert_eq!(
            control.call(&[b"CONFIG", b"SET", b"maxclients", b"1"]),
            b"+OK\r\n"
        );
        let said = TlsClient::unprompted(
            server.tls_port,
            client_config(&certs, Identity::Client, Versions::Both),
        );
        assert!(
            said.as_ref().map_or(true, |s| s.is_empty()),
            "{}: a client over maxclients was told {said:?}",
            server.name
        );
        let rejected = control.call(&[b"INFO", b"stats"]);
        assert!(
            String::from_utf8_lossy(&rejected).contains("rejected_connections:1"),
            "{}: {}",
            server.name,
            String::from_utf8_lossy(&rejected)
        );
        assert_eq!(
            control.call(&[b"CONFIG", b"SET", b"maxclients", b"100"]),
            b"+OK\r\n"
        );
        let mut served = TlsClient::connect(
            server.tls_port,
            client_config(&certs, Identity::Client, Versions::Both),
        )
        .expect("served under the limit");
        assert_eq!(served.call(&[b"PING"]), b"+PONG\r\n");
    }
}

#[test]
fn protected_mode_refuses_a_remote_tls_client_over_tls_like_redis() {
    // A peer at 127.0.0.2 is not local to protected mode; with no
    // password Redis answers DENIED once the handshake is over.
    let certs = Certs::generate();
    let servers = start_both(
        &certs,
        &["--protected-mode", "yes", "--bind", "127.0.0.1 127.0.0.2"],
    );
    let mut said = Vec::new();
    for server in &servers {
        let sock = crate::security::connect_from_127_0_0_2(server.tls_port);
        let words = TlsClient::unprompted_over(
            sock,
            client_config(&certs, Identity::Client, Versions::Both),
        )
        .unwrap_or_else(|e| panic!("{}: {e}", server.name));
        said.push(String::from_utf8_lossy(&words).into_owned());
    }
    assert!(
        said[0].starts_with("-DENIED Redis is running in protected mode"),
        "redis-server: {}",
        said[0]
    );
    assert_eq!(said[0], said[1], "redis-server vs hozon-server");
}
