//! Redis 7.0.15's own `redis.conf` and Debian's `/etc/redis/redis.conf`
//! start hozon-server: every directive is applied (CONFIG GET shows what
//! redis-server shows for the same file) or named in exactly one warning
//! line; unknown or malformed directives refuse the start with Redis's
//! message; CONFIG REWRITE of the stock file restarts.
//!
//! The fixtures are copies of the two files (tests/ops/fixtures/), checked
//! against the originals when those are on the machine. The tests change
//! `port` and `dir` only, and `pidfile` (and Debian's `logfile`) to paths
//! inside the test's directory, so no test writes to /var/run or /var/log.

use std::collections::BTreeSet;

use super::common::*;

/// The active directives of the stock files hozon accepts without acting
/// on them (Debian's file has the same active directives).
const WARNED_IN_STOCK: &[&str] = &[
    "set-proc-title",
    "proc-title-template",
    "rdb-del-sync-files",
    "oom-score-adj-values",
    "dynamic-hz",
    "jemalloc-bg-thread",
];

/// Directives CONFIG GET shows differently on purpose: the test gave
/// each server its own port, directory and pid file.
const OWN_PER_SERVER: &[&str] = &["port", "dir", "pidfile", "logfile"];

fn stock_text() -> String {
    let text = read(&fixture("redis-7.0.15.conf"));
    assert!(
        text.len() > 100_000,
        "the stock redis.conf fixture is there"
    );
    // The same bytes as the tarball's, when scripts/redis-tcl fetched it.
    let tarball = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("target/redis-tcl/redis-7.0.15.tar.gz");
    if tarball.exists() {
        let out = std::process::Command::new("tar")
            .arg("xzOf")
            .arg(&tarball)
            .arg("redis-7.0.15/redis.conf")
            .output()
            .expect("tar");
        assert_eq!(
            String::from_utf8_lossy(&out.stdout),
            text,
            "fixture = tarball's redis.conf"
        );
    }
    text
}

fn debian_text() -> String {
    let text = read(&fixture("debian-redis.conf"));
    assert!(
        text.len() > 100_000,
        "the Debian redis.conf fixture is there"
    );
    let system = read(std::path::Path::new("/etc/redis/redis.conf"));
    if !system.is_empty() {
        assert_eq!(system, text, "fixture = /etc/redis/redis.conf");
    }
    text
}

#[test]
fn redis_stock_conf_is_applied_as_redis_applies_it() {
    let text = stock_text();
    let tmp = tempfile::tempdir().expect("tempdir");
    let mut servers = Vec::new();
    for (name, binary) in [
        ("redis", testkit::harness::redis_server_path()),
        ("hozon", hozon_server_path().to_string()),
    ] {
        let dir = tmp.path().join(name);
        std::fs::create_dir(&dir).unwrap();
        let port = unused_port();
        let conf = change_directives(
            &text,
            &[
                ("port", &port.to_string()),
                ("dir", &dir.to_string_lossy()),
                ("pidfile", &dir.join("server.pid").to_string_lossy()),
            ],
        );
        let path = dir.join("redis.conf");
        std::fs::write(&path, conf).unwrap();
        let proc = Proc::spawn(
            &binary,
            &[&path.to_string_lossy()],
            &[],
            &dir.join("out.log"),
        );
        wait_ready_tcp(port);
        servers.push((proc, port));
    }
    let (redis_port, hozon_port) = (servers[0].1, servers[1].1);
    let log = servers[1].0.output();

    // Each warning names one directive of the file, once.
    let warned: Vec<String> = inert_warnings(&log)
        .iter()
        .map(|l| warned_directive(l))
        .collect();
    let unique: BTreeSet<&String> = warned.iter().collect();
    assert_eq!(
        unique.len(),
        warned.len(),
        "one warning per directive: {warned:?}"
    );
    let expected: BTreeSet<String> = WARNED_IN_STOCK.iter().map(|s| s.to_string()).collect();
    assert_eq!(
        warned.iter().cloned().collect::<BTreeSet<_>>(),
        expected,
        "{log}"
    );

    // Every other directive is applied: CONFIG GET shows Redis's value.
    let directives: BTreeSet<String> = active_directives(&text).into_iter().collect();
    let mut compared = 0;
    for name in &directives {
        if expected.contains(name) || OWN_PER_SERVER.contains(&name.as_str()) {
            continue;
        }
        let theirs = cli_tcp(redis_port, &["CONFIG", "GET", name]);
        let ours = cli_tcp(hozon_port, &["CONFIG", "GET", name]);
        assert!(!theirs.is_empty(), "redis knows {name}");
        assert_eq!(ours, theirs, "CONFIG GET {name}");
        compared += 1;
    }
    assert!(compared > 50, "compared {compared} directives");
    // The pid file is written while the server runs.
    let pid = servers[1].0.child.id();
    let pidfile = tmp.path().join("hozon/server.pid");
    assert_eq!(read(&pidfile), format!("{pid}\n"));
}

#[test]
fn debian_conf_starts_daemonized_and_stops() {
    let text = debian_text();
    let dir = tempfile::tempdir().expect("tempdir");
    let port = unused_port();
    let pidfile = dir.path().join("redis-server.pid");
    let logfile = dir.path().join("redis-server.log");
    let conf = change_directives(
        &text,
        &[
            ("port", &port.to_string()),
            ("dir", &dir.path().to_string_lossy()),
            ("pidfile", &pidfile.to_string_lossy()),
            ("logfile", &logfile.to_string_lossy()),
        ],
    );
    assert!(
        conf.contains("\ndaemonize yes\n"),
        "Debian's file daemonizes"
    );
    let path = dir.path().join("redis.conf");
    std::fs::write(&path, conf).unwrap();
    // The parent returns once the daemon listens, with status 0.
    let mut parent = Proc::spawn(
        hozon_server_path(),
        &[&path.to_string_lossy()],
        &[],
        &dir.path().join("parent.out"),
    );
    assert_eq!(parent.wait_exit(), 0, "{}", parent.output());
    let pid: i32 = read(&pidfile)
        .trim()
        .parse()
        .expect("the pid file holds a pid");
    assert_ne!(
        pid as u32,
        parent.child.id(),
        "the daemon is another process"
    );
    assert!(alive(pid));
    wait_ready_tcp(port);
    assert_eq!(
        cli_tcp(port, &["CONFIG", "GET", "daemonize"]),
        "daemonize\nyes"
    );
    let log = read(&logfile);
    let warned: BTreeSet<String> = inert_warnings(&log)
        .iter()
        .map(|l| warned_directive(l))
        .collect();
    let expected: BTreeSet<String> = WARNED_IN_STOCK.iter().map(|s| s.to_string()).collect();
    assert_eq!(warned, expected, "{log}");
    // Its own session: no controlling terminal, session leader's child.
    // SAFETY: getsid on a pid.
    let sid = unsafe { libc::getsid(pid) };
    assert_ne!(sid, pid, "the daemon forked twice (not a session leader)");
    cli_tcp(port, &["SHUTDOWN", "NOSAVE"]);
    wait_for("the daemon to exit", || !alive(pid));
    assert!(!pidfile.exists(), "the pid file is removed at shutdown");
    let log = read(&logfile);
    assert!(log.contains("Removing the pid file."), "{log}");
}

#[test]
fn a_daemon_that_cannot_start_fails_its_parent() {
    let dir = tempfile::tempdir().expect("tempdir");
    // The port is taken: the daemon cannot listen.
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = taken.local_addr().unwrap().port().to_string();
    let mut parent = Proc::spawn(
        hozon_server_path(),
        &[
            "--port",
            &port,
            "--bind",
            "127.0.0.1",
            "--daemonize",
            "yes",
            "--save",
            "",
            "--appendonly",
            "no",
            "--dir",
            &dir.path().to_string_lossy(),
            "--pidfile",
            &dir.path().join("p.pid").to_string_lossy(),
        ],
        &[],
        &dir.path().join("parent.out"),
    );
    assert_eq!(parent.wait_exit(), 1);
    let out = parent.output();
    assert!(out.contains("Fatal:") && out.contains(&port), "{out}");
}

/// The message both servers print for a bad configuration line: the
/// last three lines of the fatal report (line number, line, reason).
fn refusal(binary: &str, conf: &str) -> String {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("bad.conf");
    std::fs::write(&path, conf).unwrap();
    let out = std::process::Command::new(binary)
        .arg(&path)
        .output()
        .expect("run the server");
    assert_eq!(out.status.code(), Some(1), "{binary} refuses {conf:?}");
    let text =
        String::from_utf8_lossy(&out.stderr).into_owned() + &String::from_utf8_lossy(&out.stdout);
    let lines: Vec<&str> = text.trim_end().lines().collect();
    lines[lines.len().saturating_sub(3)..].join("\n")
}

#[test]
fn unknown_and_malformed_directives_refuse_like_redis() {
    let redis = testkit::harness::redis_server_path();
    for conf in [
        "port 0\nno-such-directive yes\n",
        "tcp-backlog abc\n",
        "unixsocketperm 999\n",
        "supervised sometimes\n",
        "syslog-facility local9\n",
        "lazyfree-lazy-user-del maybe\n",
        "oom-score-adj-values 0 200\n",
        "oom-score-adj-values 0 2001 800\n",
        "proc-title-template \"{nothing}\"\n",
        "appenddirname a/b\n",
        "slowlog-max-len -1\n",
        "stream-node-max-bytes 1zb\n",
    ] {
        assert_eq!(
            refusal(hozon_server_path(), conf),
            refusal(&redis, conf),
            "the refusal of {conf:?}"
        );
    }
}

#[test]
fn config_rewrite_of_the_stock_file_restarts() {
    let text = stock_text();
    let dir = tempfile::tempdir().expect("tempdir");
    let port = unused_port();
    let conf = change_directives(
        &text,
        &[
            ("port", &port.to_string()),
            ("dir", &dir.path().to_string_lossy()),
            ("pidfile", &dir.path().join("s.pid").to_string_lossy()),
        ],
    );
    let path = dir.path().join("redis.conf");
    std::fs::write(&path, &conf).unwrap();
    let mut first = Proc::spawn(
        hozon_server_path(),
        &[&path.to_string_lossy()],
        &[],
        &dir.path().join("1.log"),
    );
    wait_ready_tcp(port);
    for (name, value) in [
        ("lazyfree-lazy-user-del", "yes"),
        ("maxclients", "1234"),
        ("oom-score-adj-values", "0 300 900"),
        ("hz", "20"),
    ] {
        assert_eq!(
            cli_tcp(port, &["CONFIG", "SET", name, value]),
            "OK",
            "{name}"
        );
    }
    assert_eq!(cli_tcp(port, &["CONFIG", "REWRITE"]), "OK");
    cli_tcp(port, &["SHUTDOWN", "NOSAVE"]);
    assert_eq!(first.wait_exit(), 0);

    let rewritten = read(&path);
    // Comments and order kept, values changed in place.
    assert!(rewritten.starts_with("# Redis configuration file example."));
    assert!(
        rewritten.contains("\nlazyfree-lazy-user-del yes\n"),
        "in place"
    );
    assert!(rewritten.contains("\noom-score-adj-values 0 300 900\n"));
    assert!(rewritten.contains("\nhz 20\n"));
    assert!(rewritten.contains("\nmaxclients 1234\n"));
    let old_order = active_directives(&conf);
    let new_order = active_directives(&rewritten);
    assert_eq!(&new_order[..old_order.len()], &old_order[..], "order kept");

    let second = Proc::spawn(
        hozon_server_path(),
        &[&path.to_string_lossy()],
        &[],
        &dir.path().join("2.log"),
    );
    wait_ready_tcp(port);
    assert_eq!(
        cli_tcp(port, &["CONFIG", "GET", "lazyfree-lazy-user-del"]),
        "lazyfree-lazy-user-del\nyes"
    );
    assert_eq!(
        cli_tcp(port, &["CONFIG", "GET", "maxclients"]),
        "maxclients\n1234"
    );
    assert_eq!(
        cli_tcp(port, &["CONFIG", "GET", "oom-score-adj-values"]),
        "oom-score-adj-values\n0 300 900"
    );
    // The restarted server warns about the directives it still does not act on.
    let warned: Vec<String> = inert_warnings(&second.output())
        .iter()
        .map(|l| warned_directive(l))
        .collect();
    assert!(
        warned.contains(&"lazyfree-lazy-user-del".to_string()),
        "{warned:?}"
    );
}

#[test]
fn config_set_of_accepted_directives_behaves_as_in_redis() {
    let mut pair = testkit::harness::Pair::new();
    for args in [
        &["CONFIG", "SET", "lazyfree-lazy-user-del", "yes"][..],
        &["CONFIG", "GET", "lazyfree-lazy-user-del"],
        &["CONFIG", "SET", "slave-lazy-flush", "yes"],
        &["CONFIG", "GET", "replica-lazy-flush"],
        &["CONFIG", "SET", "always-show-logo", "yes"],
        &["CONFIG", "SET", "unixsocket", "/tmp/x.sock"],
        &["CONFIG", "SET", "unixsocketperm", "700"],
        &["CONFIG", "SET", "pidfile", "/tmp/x.pid"],
        &["CONFIG", "SET", "supervised", "systemd"],
        &["CONFIG", "SET", "syslog-enabled", "yes"],
        &["CONFIG", "SET", "tcp-backlog", "100"],
        &["CONFIG", "SET", "disable-thp", "no"],
        &["CONFIG", "SET", "appenddirname", "x"],
        &["CONFIG", "SET", "oom-score-adj", "relative"],
        &["CONFIG", "GET", "oom-score-adj"],
        &["CONFIG", "SET", "oom-score-adj", "sometimes"],
        &["CONFIG", "SET", "oom-score-adj-values", "1 2"],
        &["CONFIG", "SET", "oom-score-adj-values", "10 20 30"],
        &["CONFIG", "GET", "oom-score-adj-values"],
        &["CONFIG", "SET", "proc-title-template", "{title} {port}"],
        &["CONFIG", "GET", "proc-title-template"],
        &["CONFIG", "SET", "proc-title-template", "{nope}"],
        &["CONFIG", "SET", "acllog-max-len", "-1"],
        &["CONFIG", "SET", "acllog-max-len", "7"],
        &["CONFIG", "SET", "list-compress-depth", "3"],
        &["CONFIG", "SET", "dynamic-hz", "no", "activerehashing", "no"],
        &["CONFIG", "GET", "dynamic-hz"],
        &["CONFIG", "GET", "activerehashing"],
        &["CONFIG", "SET", "aof-use-rdb-preamble", "no"],
        &["CONFIG", "GET", "aof-use-rdb-preamble"],
        &["CONFIG", "GET", "unixsocketperm"],
        &["CONFIG", "GET", "jemalloc-bg-thread"],
        &["CONFIG", "GET", "set-proc-title"],
    ] {
        pair.check(args);
    }
    // Patterns: the same parameters, in each server's own order.
    pair.check_unordered(&["CONFIG", "GET", "syslog-*"]);
    pair.check_unordered(&["CONFIG", "GET", "lazyfree-*"]);
}
