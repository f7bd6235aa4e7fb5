//! Differential tests: LATENCY LATEST/HISTORY/RESET/GRAPH/DOCTOR/
//! HISTOGRAM/HELP and `latency-monitor-threshold`, against redis-server.
//!
//! Event times and latencies differ by nature: those replies are compared
//! by shape (event names, sample counts, the graph's header and width).

use testkit::value::{decode, Value};

use crate::harness::{check_both_protocols, Conn, Pair};

#[test]
fn subcommands_and_errors() {
    check_both_protocols(
        r#"
LATENCY HELP
LATENCY help
LATENCY
LATENCY NOSUCH
LATENCY LATEST extra
LATENCY DOCTOR extra
LATENCY HISTORY
LATENCY HISTORY command extra
LATENCY GRAPH
LATENCY GRAPH command
LATENCY GRAPH "we\x00ird"
LATENCY HISTORY nosuch
LATENCY RESET nosuch
LATENCY RESET
LATENCY LATEST
LATENCY DOCTOR
LATENCY HISTOGRAM nosuchcommand
CONFIG GET latency-monitor-threshold
CONFIG SET latency-monitor-threshold -1
CONFIG SET latency-monitor-threshold abc
CONFIG SET latency-monitor-threshold 0
CONFIG GET latency-tracking
CONFIG SET latency-tracking maybe
"#,
    );
}

/// A command that takes about 30 ms on either server.
const SLOW_SCRIPT: &str = "local t = redis.call('TIME') \
    local start = t[1] * 1000000 + t[2] \
    while true do \
      local now = redis.call('TIME') \
      if now[1] * 1000000 + now[2] - start > 30000 then return 1 end \
    end";

fn latest_names(conn: &mut Conn) -> Vec<String> {
    let reply = decode(&conn.call(&[b"LATENCY", b"LATEST"]));
    let mut names: Vec<String> = reply
        .items()
        .iter()
        .map(|e| {
            let f = e.items();
            assert_eq!(f.len(), 4, "{e:?}");
            assert!(f[1].int() > 1_600_000_000, "{e:?}");
            assert!(f[2].int() >= 1 && f[3].int() >= f[2].int(), "{e:?}");
            f[0].text()
        })
        .collect();
    names.sort();
    names
}

#[test]
fn command_events_match() {
    let mut p = Pair::new();
    p.check(&["CONFIG", "SET", "latency-monitor-threshold", "10"]);
    p.check(&["EVAL", SLOW_SCRIPT, "0"]);
    p.check(&["SET", "fast", "x"]);
    // A fast command (one of the script's TIME calls) may also be
    // preempted past the threshold on a loaded machine, on either server.
    let (r, h) = (latest_names(&mut p.r), latest_names(&mut p.h));
    for names in [&r, &h] {
        assert!(names.contains(&"command".to_string()), "{r:?} {h:?}");
        assert!(
            names.iter().all(|n| n == "command" || n == "fast-command"),
            "{names:?}"
        );
    }
    for conn in [&mut p.r, &mut p.h] {
        let history = decode(&conn.call(&[b"LATENCY", b"HISTORY", b"command"]));
        assert_eq!(history.items().len(), 1, "{history:?}");
        let graph = decode(&conn.call(&[b"LATENCY", b"GRAPH", b"command"])).text();
        let lines: Vec<&str> = graph.lines().collect();
        assert!(lines[0].starts_with("command - high "), "{graph}");
        assert_eq!(lines[1], "-".repeat(80), "{graph}");
        assert!(lines.len() >= 9, "4 rows, a blank line, the label: {graph}");
        let doctor = decode(&conn.call(&[b"LATENCY", b"DOCTOR"])).text();
        assert!(
            doctor.starts_with("Dave, I have observed latency spikes in this Redis instance."),
            "{doctor}"
        );
        assert!(doctor.contains("1. command: 1 latency spikes"), "{doctor}");
    }
    p.both(&["LATENCY", "RESET", "fast-command"]);
    p.check(&["LATENCY", "RESET", "COMMAND"]);
    p.check(&["LATENCY", "LATEST"]);
    p.check(&["LATENCY", "DOCTOR"]);
}

/// LATENCY HISTOGRAM reduced to command → calls (the buckets' bounds
/// follow the times measured), checking each distribution's shape.
fn histogram_calls(conn: &mut Conn, args: &[&str]) -> Vec<(String, i64)> {
    let mut argv: Vec<&[u8]> = vec![b"LATENCY", b"HISTOGRAM"];
    argv.extend(args.iter().map(|a| a.as_bytes()));
    let reply = decode(&conn.call(&argv));
    let items = reply.items();
    let mut out: Vec<(String, i64)> = items
        .chunks(2)
        .map(|pair| {
            let detail = pair[1].items();
            assert_eq!(detail[0].text(), "calls");
            assert_eq!(detail[2].text(), "histogram_usec");
            let buckets = detail[3].items();
            let last_count = buckets.last().map_or(0, Value::int);
            assert_eq!(last_count, detail[1].int(), "cumulative: {reply:?}");
            (pair[0].text(), detail[1].int())
        })
        .collect();
    out.sort();
    out
}

#[test]
fn histograms_per_command() {
    let mut p = Pair::new();
    p.script(
        r#"
CONFIG RESETSTAT
SET a b
SET a c
GET a
CONFIG GET maxmemory
CLIENT GETNAME
"#,
    );
    for args in [
        &["set", "get"][..],
        &["config"],
        &["config|get", "nosuch", "client|getname"],
        &["SET"],
        &[],
    ] {
        let (r, h) = (
            histogram_calls(&mut p.r, args),
            histogram_calls(&mut p.h, args),
        );
        assert_eq!(r, h, "LATENCY HISTOGRAM {args:?}");
    }
    p.check(&["CONFIG", "RESETSTAT"]);
    p.check(&["LATENCY", "HISTOGRAM", "set"]);
}
