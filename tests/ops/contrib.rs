//! The files shipped in contrib/ start a server: `hozon.conf` as it is
//! (port and dir changed), and the systemd unit's ExecStart run as
//! systemd would run it. There is no systemd in CI: the test plays its
//! part, parsing ExecStart and running it with `$NOTIFY_SOCKET` set to a
//! datagram socket the test owns, waiting for READY=1, then stopping the
//! server with the unit's KillSignal and waiting for STOPPING=1.

use std::os::unix::net::UnixDatagram;

use super::common::*;

/// contrib/hozon.conf with `port` and `dir` changed, written into `dir`.
fn sample_conf(dir: &std::path::Path, port: u16) -> std::path::PathBuf {
    let text = read(&contrib("hozon.conf"));
    assert!(!text.is_empty(), "contrib/hozon.conf exists");
    let conf = change_directives(
        &text,
        &[("port", &port.to_string()), ("dir", &dir.to_string_lossy())],
    );
    let path = dir.join("hozon.conf");
    std::fs::write(&path, conf).unwrap();
    path
}

#[test]
fn contrib_hozon_conf_starts_without_warnings() {
    let dir = tempfile::tempdir().unwrap();
    let port = unused_port();
    let path = sample_conf(dir.path(), port);
    let proc = Proc::spawn(
        hozon_server_path(),
        &[&path.to_string_lossy()],
        &[],
        &dir.path().join("out.log"),
    );
    wait_ready_tcp(port);
    let log = proc.output();
    assert!(inert_warnings(&log).is_empty(), "{log}");
    // Every directive it writes is a parameter CONFIG GET shows.
    let text = read(&path);
    for name in active_directives(&text) {
        let got = cli_tcp(port, &["CONFIG", "GET", &name]);
        assert_eq!(
            got.lines().next(),
            Some(name.as_str()),
            "CONFIG GET {name}: {got:?}"
        );
    }
    assert_eq!(
        cli_tcp(port, &["CONFIG", "GET", "appendonly"]),
        "appendonly\nyes"
    );
    assert_eq!(cli_tcp(port, &["SET", "k", "v"]), "OK");
}

/// The value of `key` in the unit's [Service] section.
fn unit_value(unit: &str, key: &str) -> String {
    unit.lines()
        .find_map(|l| l.strip_prefix(&format!("{key}=")))
        .unwrap_or_else(|| panic!("the unit sets {key}"))
        .to_string()
}

#[test]
fn contrib_systemd_unit_starts_the_server_as_systemd_would() {
    let unit = read(&contrib("hozon-server.service"));
    assert_eq!(unit_value(&unit, "Type"), "notify");
    assert_eq!(unit_value(&unit, "KillSignal"), "SIGTERM");
    let exec: Vec<String> = unit_value(&unit, "ExecStart")
        .split_whitespace()
        .map(String::from)
        .collect();
    assert_eq!(exec[0], "/usr/bin/hozon-server");
    assert_eq!(exec[1], "/etc/hozon/hozon.conf");

    let dir = tempfile::tempdir().unwrap();
    let port = unused_port();
    let conf = sample_conf(dir.path(), port);
    // The installed paths, replaced by the built binary and the test's copy
    // of the configuration; every other argument as the unit gives it.
    let mut args: Vec<String> = exec[1..].to_vec();
    args[0] = conf.to_string_lossy().into_owned();
    let notify_path = dir.path().join("notify.sock");
    let notify = UnixDatagram::bind(&notify_path).unwrap();
    let refs: Vec<&str> = args.iter().map(String::as_str).collect();
    let mut proc = Proc::spawn(
        hozon_server_path(),
        &refs,
        &[("NOTIFY_SOCKET", &notify_path.to_string_lossy())],
        &dir.path().join("out.log"),
    );
    read_datagrams(&notify, "READY=1", |got| {
        got.iter().any(|m| m == "READY=1\n")
    });
    assert_eq!(cli_tcp(port, &["PING"]), "PONG");
    assert_eq!(
        cli_tcp(port, &["CONFIG", "GET", "supervised"]),
        "supervised\nsystemd"
    );
    // ExecReload: SIGHUP to the main process; the server keeps running.
    signal(proc.child.id() as i32, libc::SIGHUP);
    assert_eq!(cli_tcp(port, &["PING"]), "PONG");
    signal(proc.child.id() as i32, libc::SIGTERM);
    read_datagrams(&notify, "STOPPING=1", |got| {
        got.iter().any(|m| m == "STOPPING=1\n")
    });
    assert_eq!(proc.wait_exit(), 0);
    assert!(
        dir.path().join("appendonly.aof").exists(),
        "the unit's server kept its data in dir"
    );
}
