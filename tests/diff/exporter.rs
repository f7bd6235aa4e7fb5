//! prometheus-redis-exporter (Debian's `prometheus-redis-exporter`, the
//! exporter Redis dashboards are built on) scraping hozon-server: the
//! scrape succeeds, and every metric it exports for a redis-server 7.0
//! given the same workload is there for hozon with a value, except the
//! few listed in [`CANNOT_HAVE`] with the reason (docs/observability.md).

use std::collections::{BTreeMap, BTreeSet};
use std::io::{Read, Write};
use std::net::TcpStream;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::harness::{unused_port, Conn, Pair};

/// The exporter's binary as Debian installs it.
const EXPORTER: &str = "/usr/bin/prometheus-redis-exporter";

/// Metrics the exporter produces for Redis that hozon cannot have, with
/// why. Each is checked to be really exported for Redis (a stale entry
/// fails the test). None today: `redis_config_io_threads`, the last one,
/// came with `io-threads`.
const CANNOT_HAVE: &[(&str, &str)] = &[];

/// The exporter process, killed on drop.
struct Exporter {
    child: Child,
    port: u16,
}

impl Drop for Exporter {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn start_exporter(redis_port: u16) -> Exporter {
    start_exporter_with(redis_port, &[])
}

/// The exporter with `extra` arguments (a user and password).
fn start_exporter_with(redis_port: u16, extra: &[&str]) -> Exporter {
    assert!(
        std::path::Path::new(EXPORTER).exists(),
        "{EXPORTER} is missing: install Debian's prometheus-redis-exporter \
         (scripts/test does)"
    );
    let port = unused_port();
    let child = Command::new(EXPORTER)
        .args([
            "-redis.addr",
            &format!("redis://127.0.0.1:{redis_port}"),
            "-web.listen-address",
            &format!("127.0.0.1:{port}"),
            "-include-system-metrics",
            "-export-client-list",
            "-include-config-metrics",
            "-check-single-keys",
            "db0=k,db0=l",
            "-check-single-streams",
            "db0=x",
            "-count-keys",
            "db0=k*",
            "-ping-on-connect",
        ])
        .args(extra)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("start prometheus-redis-exporter");
    Exporter { child, port }
}

/// GET /metrics, retried until the exporter listens.
fn scrape(exporter: &Exporter) -> String {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        if let Ok(mut stream) = TcpStream::connect(("127.0.0.1", exporter.port)) {
            stream
                .write_all(b"GET /metrics HTTP/1.0\r\nHost: localhost\r\n\r\n")
                .unwrap();
            let mut body = String::new();
            stream.read_to_string(&mut body).unwrap();
            if let Some((_, metrics)) = body.split_once("\r\n\r\n") {
                return metrics.to_string();
            }
        }
        assert!(Instant::now() < deadline, "the exporter never answered");
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// The scrape's `redis_*` samples: family name → [(labels, value)].
fn samples(text: &str) -> BTreeMap<String, Vec<(String, String)>> {
    let mut out: BTreeMap<String, Vec<(String, String)>> = BTreeMap::new();
    for line in text.lines() {
        if line.starts_with('#') || line.trim().is_empty() || !line.starts_with("redis_") {
            continue;
        }
        let (series, value) = line.rsplit_once(' ').expect("name value");
        let (name, labels) = match series.split_once('{') {
            Some((n, l)) => (n, l.trim_end_matches('}')),
            None => (series, ""),
        };
        out.entry(name.to_string())
            .or_default()
            .push((labels.to_string(), value.to_string()));
    }
    out
}

/// The same workload on a server: keys of each kind, an error, a slowlog
/// entry, a latency event, a blocked-then-served command.
fn workload(conn: &mut Conn) {
    const SLOW: &str = "local t = redis.call('TIME') \
        local start = t[1] * 1000000 + t[2] \
        while true do \
          local now = redis.call('TIME') \
          if now[1] * 1000000 + now[2] - start > 20000 then return 1 end \
        end";
    for line in [
        vec!["CONFIG", "SET", "slowlog-log-slower-than", "0"],
        vec!["CONFIG", "SET", "latency-monitor-threshold", "5"],
        vec!["SET", "k", "v"],
        vec!["SET", "k2", "v", "EX", "1000"],
        vec!["GET", "k"],
        vec!["GET", "missing"],
        vec!["RPUSH", "l", "a", "b"],
        vec!["HSET", "h", "f", "v"],
        vec!["XADD", "x", "1-1", "f", "v"],
        vec!["XGROUP", "CREATE", "x", "g", "0"],
        vec!["XREADGROUP", "GROUP", "g", "c", "STREAMS", "x", ">"],
        vec!["INCR", "h"],
        vec!["NOSUCHCOMMAND"],
        vec!["EVAL", SLOW, "0"],
        vec!["SELECT", "1"],
        vec!["SET", "other", "db"],
        vec!["SELECT", "0"],
        vec!["CLIENT", "SETNAME", "workload"],
    ] {
        let args: Vec<&[u8]> = line.iter().map(|a| a.as_bytes()).collect();
        conn.call(&args);
    }
}

#[test]
fn exporter_scrapes_hozon_like_redis() {
    let mut p = Pair::new();
    workload(&mut p.r);
    workload(&mut p.h);
    let redis_exporter = start_exporter(p.redis_server.port);
    let hozon_exporter = start_exporter(p.hozon_server.port);
    // Two scrapes each: the second sees the exporter's own client.
    let _ = (scrape(&redis_exporter), scrape(&hozon_exporter));
    let redis = samples(&scrape(&redis_exporter));
    let hozon_text = scrape(&hozon_exporter);
    let hozon = samples(&hozon_text);

    assert_eq!(hozon["redis_up"], vec![(String::new(), "1".to_string())]);
    assert_eq!(redis["redis_up"], vec![(String::new(), "1".to_string())]);
    assert_eq!(
        hozon["redis_exporter_last_scrape_error"][0].1, "0",
        "{:?}",
        hozon["redis_exporter_last_scrape_error"]
    );
    for (name, series) in &hozon {
        for (labels, value) in series {
            assert!(
                value.parse::<f64>().is_ok(),
                "{name}{{{labels}}} has no numeric value: {value:?}"
            );
        }
    }
    let allowed: BTreeSet<&str> = CANNOT_HAVE.iter().map(|(n, _)| *n).collect();
    for name in &allowed {
        assert!(
            redis.contains_key(*name),
            "{name} is allowed missing but Redis does not export it either"
        );
    }
    assert_nothing_missing(&redis, &hozon, &allowed);
    // Label sets that name fields (INFO commandstats, errorstats, db
    // keyspace, latency percentiles, slowlog) have the workload's entries.
    for family in [
        "redis_commands_total",
        "redis_errors_total",
        "redis_db_keys",
        "redis_latency_percentiles_usec",
        "redis_commands_failed_calls_total",
        "redis_commands_rejected_calls_total",
    ] {
        let labels = |m: &BTreeMap<String, Vec<(String, String)>>| {
            m.get(family)
                .map(|s| s.iter().map(|(l, _)| l.clone()).collect::<BTreeSet<_>>())
                .unwrap_or_default()
        };
        let (r, h) = (labels(&redis), labels(&hozon));
        let absent: Vec<&String> = r.difference(&h).collect();
        assert!(
            absent.is_empty(),
            "{family}: labels missing for hozon: {absent:?}"
        );
    }
}

type Samples = BTreeMap<String, Vec<(String, String)>>;

/// Every metric family exported for Redis is exported for hozon, but the
/// `allowed` ones.
#[track_caller]
fn assert_nothing_missing(redis: &Samples, hozon: &Samples, allowed: &BTreeSet<&str>) {
    let missing: Vec<&String> = redis
        .keys()
        .filter(|n| !hozon.contains_key(*n) && !allowed.contains(n.as_str()))
        .collect();
    assert!(
        missing.is_empty(),
        "exported for redis-server, missing for hozon: {missing:#?}"
    );
}

/// The monitoring user of docs/security.md's example: the exporter,
/// logged in as it, scrapes the same metric families from both servers
/// without an error.
#[test]
fn the_documented_exporter_user_can_scrape_everything() {
    let mut p = Pair::new();
    p.check(&[
        "ACL",
        "SETUSER",
        "exporter",
        "on",
        ">exp-secret",
        "-@all",
        "+@read",
        "+client|list",
        "+info",
        "+config|get",
        "+ping",
        "+slowlog|get",
        "+slowlog|len",
        "+latency|latest",
        "+memory|usage",
        "+select",
        "+auth",
        "+hello",
        "+client|setname",
        "~*",
    ]);
    workload(&mut p.r);
    workload(&mut p.h);
    let login = ["-redis.user", "exporter", "-redis.password", "exp-secret"];
    let redis_exporter = start_exporter_with(p.redis_server.port, &login);
    let hozon_exporter = start_exporter_with(p.hozon_server.port, &login);
    let _ = (scrape(&redis_exporter), scrape(&hozon_exporter));
    let redis = samples(&scrape(&redis_exporter));
    let hozon = samples(&scrape(&hozon_exporter));
    for (name, m) in [("redis", &redis), ("hozon", &hozon)] {
        assert_eq!(
            m["redis_up"],
            vec![(String::new(), "1".to_string())],
            "{name}"
        );
        assert_eq!(
            m["redis_exporter_last_scrape_error"][0].1, "0",
            "{name}: {:?}",
            m["redis_exporter_last_scrape_error"]
        );
    }
    let allowed: BTreeSet<&str> = CANNOT_HAVE.iter().map(|(n, _)| *n).collect();
    assert_nothing_missing(&redis, &hozon, &allowed);
    // Nothing was refused: the rules cover what the exporter runs.
    for log in [p.redis(&["ACL", "LOG"]), p.hozon(&["ACL", "LOG"])] {
        assert_eq!(log, b"*0\r\n", "{}", testkit::harness::show(&log));
    }
}
