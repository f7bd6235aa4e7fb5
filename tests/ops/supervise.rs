//! The pid file, the log file reopened on SIGHUP (logrotate), syslog,
//! and `supervised systemd`/`auto` with a notification socket the test
//! binds itself (as systemd would: a datagram socket named by
//! `$NOTIFY_SOCKET`, a path or an abstract `@name`).

use std::os::unix::net::UnixDatagram;
use std::path::Path;

use super::common::*;

fn base_args(port: u16, dir: &Path) -> Vec<String> {
    [
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
    ]
    .iter()
    .map(|s| s.to_string())
    .collect()
}

fn spawn(args: &[String], env: &[(&str, &str)], out: &Path) -> Proc {
    let refs: Vec<&str> = args.iter().map(String::as_str).collect();
    Proc::spawn(hozon_server_path(), &refs, env, out)
}

#[test]
fn pidfile_is_written_at_start_and_removed_at_shutdown() {
    let dir = tempfile::tempdir().unwrap();
    let port = unused_port();
    let pidfile = dir.path().join("hozon.pid");
    let mut args = base_args(port, dir.path());
    args.extend(["--pidfile".into(), pidfile.to_string_lossy().into_owned()]);
    let mut proc = spawn(&args, &[], &dir.path().join("out.log"));
    wait_ready_tcp(port);
    assert_eq!(read(&pidfile), format!("{}\n", proc.child.id()));
    signal(proc.child.id() as i32, libc::SIGTERM);
    assert_eq!(proc.wait_exit(), 0);
    assert!(!pidfile.exists(), "removed at shutdown");
    assert!(proc.output().is_empty() || !proc.output().contains("Failed to write PID file"));
}

#[test]
fn logfile_is_reopened_on_sighup_for_logrotate() {
    let dir = tempfile::tempdir().unwrap();
    let port = unused_port();
    let log = dir.path().join("hozon.log");
    let rotated = dir.path().join("hozon.log.1");
    let mut args = base_args(port, dir.path());
    args.extend(["--logfile".into(), log.to_string_lossy().into_owned()]);
    let proc = spawn(&args, &[], &dir.path().join("out.log"));
    wait_ready_tcp(port);
    assert!(read(&log).contains("Ready to accept connections"));
    // logrotate's default: move the file, then signal the server.
    std::fs::rename(&log, &rotated).unwrap();
    signal(proc.child.id() as i32, libc::SIGHUP);
    wait_for("a new log file after SIGHUP", || {
        read(&log).contains("Received SIGHUP, log file reopened")
    });
    // Later lines go to the new file only.
    assert_eq!(cli_tcp(port, &["BGSAVE"]), "Background saving started");
    wait_for("the save's log line", || {
        read(&log).contains("Background saving started")
    });
    assert!(!read(&rotated).contains("Background saving started"));
    assert!(!read(&rotated).contains("SIGHUP"));
    // The server kept serving.
    assert_eq!(cli_tcp(port, &["PING"]), "PONG");
}

/// Binds the syslog socket: /dev/log itself when it is absent and this
/// test may create it, else a socket of the test's own named to the
/// server by `HOZON_SYSLOG_SOCKET`. Never skipped.
fn bind_syslog(
    dir: &Path,
) -> (
    UnixDatagram,
    Vec<(&'static str, String)>,
    Option<&'static str>,
) {
    let dev_log = Path::new("/dev/log");
    if !dev_log.exists() {
        if let Ok(socket) = UnixDatagram::bind(dev_log) {
            return (socket, Vec::new(), Some("/dev/log"));
        }
    }
    let path = dir.join("syslog.sock");
    let socket = UnixDatagram::bind(&path).expect("bind a syslog socket");
    (
        socket,
        vec![("HOZON_SYSLOG_SOCKET", path.to_string_lossy().into_owned())],
        None,
    )
}

#[test]
fn syslog_receives_the_log_lines() {
    let dir = tempfile::tempdir().unwrap();
    let (socket, env, bound) = bind_syslog(dir.path());
    let port = unused_port();
    let mut args = base_args(port, dir.path());
    args.extend(
        [
            "--syslog-enabled",
            "yes",
            "--syslog-ident",
            "hozon-test",
            "--syslog-facility",
            "local4",
        ]
        .map(String::from),
    );
    let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (*k, v.as_str())).collect();
    let proc = spawn(&args, &env, &dir.path().join("out.log"));
    wait_ready_tcp(port);
    let pid = proc.child.id();
    let got = read_datagrams(&socket, "syslog datagrams", |got| {
        got.iter()
            .any(|m| m.contains("Ready to accept connections"))
    });
    if let Some(path) = bound {
        let _ = std::fs::remove_file(path);
    }
    // local4 = 20: warning 20*8+4, notice 20*8+5; ident[pid]; the message
    // without the log file's own prefix.
    let starting = got
        .iter()
        .find(|m| m.contains("hozon is starting"))
        .unwrap_or_else(|| panic!("{got:?}"));
    assert!(starting.starts_with("<164>"), "{starting}");
    assert!(
        starting.contains(&format!(
            " hozon-test[{pid}]: oO0OoO0OoO0Oo hozon is starting"
        )),
        "{starting}"
    );
    let ready = got
        .iter()
        .find(|m| m.contains("Ready to accept connections"))
        .unwrap();
    assert!(ready.starts_with("<165>"), "{ready}");
    assert!(
        ready.ends_with(&format!("hozon-test[{pid}]: Ready to accept connections")),
        "{ready}"
    );
}

/// A notification socket as systemd's: a datagram socket at a path.
fn notify_socket(dir: &Path) -> (UnixDatagram, String) {
    let path = dir.join("notify.sock");
    let socket = UnixDatagram::bind(&path).expect("bind the notify socket");
    (socket, path.to_string_lossy().into_owned())
}

#[test]
fn supervised_systemd_notifies_ready_and_stopping() {
    let dir = tempfile::tempdir().unwrap();
    let (socket, path) = notify_socket(dir.path());
    let port = unused_port();
    let mut args = base_args(port, dir.path());
    args.extend(["--supervised", "systemd", "--daemonize", "yes"].map(String::from));
    let mut proc = spawn(
        &args,
        &[("NOTIFY_SOCKET", &path)],
        &dir.path().join("out.log"),
    );
    let got = read_datagrams(&socket, "READY=1", |got| {
        got.iter().any(|m| m == "READY=1\n")
    });
    assert!(
        got.contains(&"STATUS=Ready to accept connections\n".to_string()),
        "{got:?}"
    );
    let ready_at = got.iter().position(|m| m == "READY=1\n").unwrap();
    let status_at = got
        .iter()
        .position(|m| m == "STATUS=Ready to accept connections\n")
        .unwrap();
    assert!(status_at < ready_at, "STATUS then READY, as Redis: {got:?}");
    // Supervised: `daemonize yes` does not fork (the same process runs).
    assert_eq!(cli_tcp(port, &["PING"]), "PONG");
    assert!(
        matches!(proc.child.try_wait(), Ok(None)),
        "not daemonized under systemd"
    );
    signal(proc.child.id() as i32, libc::SIGTERM);
    read_datagrams(&socket, "STOPPING=1", |got| {
        got.iter().any(|m| m == "STOPPING=1\n")
    });
    assert_eq!(proc.wait_exit(), 0);
    assert!(
        proc.output().contains("Supervised by systemd."),
        "{}",
        proc.output()
    );
}

#[test]
fn supervised_auto_finds_an_abstract_notify_socket() {
    use std::os::linux::net::SocketAddrExt;
    let dir = tempfile::tempdir().unwrap();
    let name = format!("hozon-ops-test-{}-{}", std::process::id(), unused_port());
    let addr = std::os::unix::net::SocketAddr::from_abstract_name(name.as_bytes()).unwrap();
    let socket = UnixDatagram::bind_addr(&addr).expect("bind an abstract socket");
    let port = unused_port();
    let mut args = base_args(port, dir.path());
    args.extend(["--supervised", "auto"].map(String::from));
    let mut proc = spawn(
        &args,
        &[("NOTIFY_SOCKET", &format!("@{name}"))],
        &dir.path().join("out.log"),
    );
    let got = read_datagrams(&socket, "READY=1", |got| {
        got.iter().any(|m| m == "READY=1\n")
    });
    assert!(got.iter().any(|m| m.starts_with("STATUS=")), "{got:?}");
    // `auto` resolved, as Redis shows it.
    assert_eq!(
        cli_tcp(port, &["CONFIG", "GET", "supervised"]),
        "supervised\nsystemd"
    );
    assert!(cli_tcp(port, &["INFO", "server"]).contains("process_supervised:systemd"));
    cli_tcp(port, &["SHUTDOWN", "NOSAVE"]);
    read_datagrams(&socket, "STOPPING=1", |got| {
        got.iter().any(|m| m == "STOPPING=1\n")
    });
    assert_eq!(proc.wait_exit(), 0);
}

#[test]
fn supervised_systemd_without_a_socket_runs_and_says_so() {
    let dir = tempfile::tempdir().unwrap();
    let port = unused_port();
    let mut args = base_args(port, dir.path());
    args.extend(["--supervised", "systemd"].map(String::from));
    let proc = Proc::spawn(
        hozon_server_path(),
        &args.iter().map(String::as_str).collect::<Vec<_>>(),
        &[],
        &dir.path().join("out.log"),
    );
    let _ = &proc;
    wait_ready_tcp(port);
    assert!(proc
        .output()
        .contains("systemd supervision requested or auto-detected, but no socket found!"));
}
