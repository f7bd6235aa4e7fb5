//! Replication over TLS (docs/security.md, "TLS"): a hozon replica and a
//! redis-server replica with `tls-replication yes` sync from a hozon
//! master's TLS port and follow its stream; a hozon replica does the same
//! from a redis-server master. A replica whose client certificate another
//! CA signed, one that does not trust the master's CA, and one without
//! `tls-replication` pointed at the TLS port never get their link up,
//! hozon and redis-server alike, and come up once CONFIG SET gives them
//! the missing setting (so the refusal was the certificate's, or the
//! plain handshake's).
//!
//! Every server has a plain port too, for control and checks.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use testkit::certs::Certs;
use testkit::harness::{self, Conn, ServerProcess};

use crate::{call, dataset, fill, info_field, wait_caught_up, write_more, Value};

/// Which server binary.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Kind {
    Hozon,
    Redis,
}

/// A server with a plain port, a TLS port when it serves TLS, and its
/// log file.
struct Node {
    process: ServerProcess,
    tls_port: u16,
    kind: Kind,
    log: PathBuf,
    _logdir: tempfile::TempDir,
}

impl Node {
    /// The plain port.
    fn port(&self) -> u16 {
        self.process.port
    }

    /// What the server logged so far.
    fn log_text(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }
}

/// Starts a server of `kind` (with `serve_tls`, on a TLS port beside the
/// plain one with `server.crt` and the CA), diskless syncs without delay,
/// then `extra`; a few tries in case a port was taken meanwhile.
fn start(kind: Kind, certs: &Certs, serve_tls: bool, extra: &[String]) -> Node {
    let (binary, name) = match kind {
        Kind::Hozon => (harness::hozon_server_path().to_string(), "hozon-server"),
        Kind::Redis => (harness::redis_server_path(), "redis-server"),
    };
    for _ in 0..5 {
        let logdir = tempfile::tempdir().expect("temp dir for a log");
        let log = logdir.path().join("server.log");
        let tls_port = harness::unused_port();
        let mut args = if serve_tls {
            certs.server_args(tls_port)
        } else {
            Vec::new()
        };
        args.extend(
            [
                "--logfile",
                &log.to_string_lossy(),
                "--loglevel",
                "notice",
                "--repl-diskless-sync-delay",
                "0",
            ]
            .map(String::from),
        );
        if kind == Kind::Redis {
            args.extend(["--daemonize", "no"].map(String::from));
        }
        args.extend(extra.iter().cloned());
        let refs: Vec<&str> = args.iter().map(String::as_str).collect();
        if let Some(process) = harness::start_on_port(&binary, name, harness::unused_port(), &refs)
        {
            return Node {
                process,
                tls_port: if serve_tls { tls_port } else { 0 },
                kind,
                log,
                _logdir: logdir,
            };
        }
    }
    panic!("could not start {name}");
}

/// A replica's flags: REPLICAOF the master's TLS port `port`,
/// `tls-replication` as `replication`, `client.crt` as its certificate,
/// `ca` (a file of `certs`) as the CAs it trusts, and `client_cert` (a
/// name in `certs`) as `tls-client-cert-file`/`tls-client-key-file`.
fn replica_args(
    certs: &Certs,
    port: u16,
    replication: &str,
    client_cert: Option<&str>,
    ca: &str,
) -> Vec<String> {
    let mut args = vec![
        "--replicaof".to_string(),
        "127.0.0.1".to_string(),
        port.to_string(),
        "--tls-replication".to_string(),
        replication.to_string(),
        "--tls-cert-file".to_string(),
        certs.path("client.crt"),
        "--tls-key-file".to_string(),
        certs.path("client.key"),
        "--tls-ca-cert-file".to_string(),
        certs.path(ca),
    ];
    if let Some(name) = client_cert {
        args.extend([
            "--tls-client-cert-file".to_string(),
            certs.path(&format!("{name}.crt")),
            "--tls-client-key-file".to_string(),
            certs.path(&format!("{name}.key")),
        ]);
    }
    args
}

/// Waits until the master's INFO replication lists one replica per port
/// of `replicas` (the port it announces is its plain one) online, having
/// acknowledged the master's whole offset; panics after 10 seconds.
fn wait_online(master: &mut Conn, replicas: &[&Node]) {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let Value::Bulk(text) = call(master, &["INFO", "replication"]) else {
            panic!("INFO")
        };
        let text = String::from_utf8_lossy(&text).into_owned();
        let offset = info_field(master, "replication", "master_repl_offset").expect("offset");
        let all = replicas.iter().all(|r| {
            text.lines().any(|l| {
                l.starts_with("slave")
                    && l.contains(&format!(",port={},", r.port()))
                    && l.contains(",state=online,")
                    && l.contains(&format!(",offset={offset},"))
            })
        });
        let count = info_field(master, "replication", "connected_slaves");
        if all && count == Some(replicas.len().to_string()) {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "the master does not list the replicas online at {offset}:\n{text}"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Large values written to `master` after the stream started, so the TLS
/// link carries records well beyond one socket buffer.
fn write_large(master: &mut Conn) {
    for i in 0..4 {
        let value = format!("{i}{}", "L".repeat((1 << 20) + i * 1000));
        assert_eq!(
            call(master, &["SET", &format!("large:{i}"), &value]),
            Value::Simple("OK".into())
        );
    }
}

/// The replicas' data equals the master's once they caught up.
#[track_caller]
fn assert_same_data(master: &mut Conn, replicas: &mut [(&Node, Conn)], when: &str) {
    for (node, conn) in replicas.iter_mut() {
        wait_caught_up(master, conn);
        let expected = dataset(master);
        assert_eq!(dataset(conn), expected, "{:?} replica, {when}", node.kind);
    }
}

#[test]
fn a_hozon_master_serves_a_hozon_and_a_redis_replica_over_tls() {
    let certs = Certs::generate();
    let master = start(Kind::Hozon, &certs, true, &[]);
    let mut m = Conn::connect(master.port());
    fill(&mut m);
    let args = replica_args(&certs, master.tls_port, "yes", None, "ca.crt");
    let hozon = start(Kind::Hozon, &certs, false, &args);
    let redis = start(Kind::Redis, &certs, false, &args);
    let mut replicas = [
        (&hozon, Conn::connect(hozon.port())),
        (&redis, Conn::connect(redis.port())),
    ];
    let before = dataset(&mut m);
    assert!(before.len() > 500, "the dataset was written");
    assert_same_data(&mut m, &mut replicas, "after the full sync");
    write_more(&mut m);
    write_large(&mut m);
    assert_same_data(&mut m, &mut replicas, "after the stream");
    let after = dataset(&mut m);
    assert!(after.contains_key(&(0, b"fromlua".to_vec())));
    assert!(after.contains_key(&(0, b"large:3".to_vec())));
    assert!(!after.contains_key(&(0, b"short".to_vec())));
    for (node, conn) in replicas.iter_mut() {
        assert_eq!(
            info_field(conn, "replication", "master_port"),
            Some(master.tls_port.to_string()),
            "{:?}",
            node.kind
        );
    }
    wait_online(&mut m, &[&hozon, &redis]);
    assert_eq!(
        info_field(&mut m, "stats", "sync_partial_ok").as_deref(),
        Some("0")
    );
}

#[test]
fn a_hozon_replica_of_a_redis_master_over_tls() {
    let certs = Certs::generate();
    for diskless in ["yes", "no"] {
        let extra = ["--repl-diskless-sync", diskless].map(String::from);
        let master = start(Kind::Redis, &certs, true, &extra);
        let mut m = Conn::connect(master.port());
        fill(&mut m);
        let args = replica_args(&certs, master.tls_port, "yes", None, "ca.crt");
        let hozon = start(Kind::Hozon, &certs, false, &args);
        let mut replicas = [(&hozon, Conn::connect(hozon.port()))];
        let when = format!("diskless {diskless}");
        assert_same_data(
            &mut m,
            &mut replicas,
            &format!("{when}, after the full sync"),
        );
        write_more(&mut m);
        write_large(&mut m);
        assert_same_data(&mut m, &mut replicas, &format!("{when}, after the stream"));
        wait_online(&mut m, &[&hozon]);
    }
}

/// For `secs` seconds, polls that no replica's link is up and that the
/// master counts no replica.
fn stays_down(master: &mut Conn, replicas: &mut [(&Node, Conn)], secs: u64) {
    let until = Instant::now() + Duration::from_secs(secs);
    while Instant::now() < until {
        for (node, conn) in replicas.iter_mut() {
            assert_eq!(
                info_field(conn, "replication", "master_link_status").as_deref(),
                Some("down"),
                "{:?} replica's link came up; its log:\n{}",
                node.kind,
                node.log_text()
            );
        }
        assert_eq!(
            info_field(master, "replication", "connected_slaves").as_deref(),
            Some("0")
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// Gives each replica a setting with CONFIG SET and waits until it
/// synced `master`'s data.
fn fix_and_sync(master: &mut Conn, replicas: &mut [(&Node, Conn)], setting: &[&str]) {
    for (node, conn) in replicas.iter_mut() {
        let command = [&["CONFIG", "SET"][..], setting].concat();
        assert_eq!(
            call(conn, &command),
            Value::Simple("OK".into()),
            "{:?}",
            node.kind
        );
    }
    assert_same_data(master, replicas, &format!("after CONFIG SET {setting:?}"));
}

#[test]
fn replicas_refused_for_their_certificates_stay_down_as_redis_replicas_do() {
    let certs = Certs::generate();
    let master = start(Kind::Hozon, &certs, true, &[]);
    let mut m = Conn::connect(master.port());
    call(&mut m, &["SET", "k", "v"]);
    // Client certificates from another CA: the master refuses them.
    let stranger = replica_args(&certs, master.tls_port, "yes", Some("stranger"), "ca.crt");
    let strangers = [
        start(Kind::Hozon, &certs, false, &stranger),
        start(Kind::Redis, &certs, false, &stranger),
    ];
    // Trusting only the other CA: they refuse the master's certificate.
    let distrust = replica_args(&certs, master.tls_port, "yes", None, "other-ca.crt");
    let distrustful = [
        start(Kind::Hozon, &certs, false, &distrust),
        start(Kind::Redis, &certs, false, &distrust),
    ];
    let mut replicas: Vec<(&Node, Conn)> = strangers
        .iter()
        .chain(distrustful.iter())
        .map(|n| (n, Conn::connect(n.port())))
        .collect();
    stays_down(&mut m, &mut replicas, 3);
    // The hozon replicas kept trying, and say why they failed: the
    // master's alert, their own check of its certificate.
    for (node, _) in &replicas {
        if node.kind == Kind::Hozon {
            let log = node.log_text();
            assert!(log.matches("Connecting to MASTER").count() >= 2, "{log}");
        }
    }
    let refused = strangers[0].log_text();
    assert!(refused.contains("received fatal alert"), "{refused}");
    let refusing = distrustful[0].log_text();
    assert!(
        refusing.contains("invalid peer certificate: UnknownIssuer"),
        "{refusing}"
    );
    // With the right setting each comes up: the certificate was the
    // only reason.
    let (strangers_up, distrustful_up) = replicas.split_at_mut(2);
    fix_and_sync(
        &mut m,
        strangers_up,
        &[
            "tls-client-cert-file",
            &certs.path("client.crt"),
            "tls-client-key-file",
            &certs.path("client.key"),
        ],
    );
    fix_and_sync(
        &mut m,
        distrustful_up,
        &["tls-ca-cert-file", &certs.path("ca.crt")],
    );
    let all: Vec<&Node> = strangers.iter().chain(distrustful.iter()).collect();
    wait_online(&mut m, &all);
}

#[test]
fn plain_replicas_on_the_tls_port_stay_down_as_redis_replicas_do() {
    let certs = Certs::generate();
    let master = start(Kind::Hozon, &certs, true, &[]);
    let mut m = Conn::connect(master.port());
    call(&mut m, &["SET", "k", "v"]);
    let plain = replica_args(&certs, master.tls_port, "no", None, "ca.crt");
    let nodes = [
        start(Kind::Hozon, &certs, false, &plain),
        start(Kind::Redis, &certs, false, &plain),
    ];
    let mut replicas: Vec<(&Node, Conn)> =
        nodes.iter().map(|n| (n, Conn::connect(n.port()))).collect();
    stays_down(&mut m, &mut replicas, 3);
    let log = nodes[0].log_text();
    assert!(log.matches("Connecting to MASTER").count() >= 2, "{log}");
    // Over TLS the same replicas come up.
    fix_and_sync(&mut m, &mut replicas, &["tls-replication", "yes"]);
    wait_online(&mut m, &[&nodes[0], &nodes[1]]);
}
