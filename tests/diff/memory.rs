//! Differential tests: MEMORY USAGE/STATS/DOCTOR/MALLOC-STATS/PURGE/HELP,
//! against redis-server.
//!
//! MEMORY USAGE is an estimate of what Redis 7.0 reports; the tolerance
//! per kind of value is what docs/observability.md promises.

use testkit::value::{decode, Value};

use crate::harness::{check_both_protocols, Pair};

#[test]
fn subcommands_and_errors() {
    check_both_protocols(
        r#"
MEMORY HELP
MEMORY help
MEMORY
MEMORY NOSUCH
MEMORY USAGE
MEMORY USAGE missing
SET k v
MEMORY USAGE k SAMPLES
MEMORY USAGE k SAMPLES -1
MEMORY USAGE k SAMPLES abc
MEMORY USAGE k FOO 1
MEMORY USAGE missing SAMPLES 0
MEMORY PURGE
MEMORY PURGE extra
MEMORY STATS extra
MEMORY DOCTOR extra
MEMORY MALLOC-STATS extra
"#,
    );
}

/// MEMORY USAGE of `key` on both servers.
fn usage(p: &mut Pair, key: &str, samples: &str) -> (i64, i64) {
    let args = ["MEMORY", "USAGE", key, "SAMPLES", samples];
    let (r, h) = p.both(&args);
    (decode(&r).int(), decode(&h).int())
}

#[test]
fn usage_estimates_redis_per_type() {
    let mut p = Pair::new();
    let big = "v".repeat(300);
    let mut setup: Vec<Vec<String>> = vec![
        vec!["SET".into(), "s_small".into(), "bar".into()],
        vec!["SET".into(), "s_int".into(), "12345".into()],
        vec!["SET".into(), "s_embstr".into(), "x".repeat(40)],
        vec!["SET".into(), "s_raw".into(), big.clone()],
        vec![
            "RPUSH".into(),
            "l_small".into(),
            "a".into(),
            "bb".into(),
            "123".into(),
        ],
        vec![
            "HSET".into(),
            "h_small".into(),
            "f1".into(),
            "v1".into(),
            "f2".into(),
            "22".into(),
        ],
        vec![
            "SADD".into(),
            "set_int".into(),
            "1".into(),
            "2".into(),
            "300".into(),
        ],
        vec![
            "ZADD".into(),
            "z_small".into(),
            "1".into(),
            "a".into(),
            "2.5".into(),
            "b".into(),
        ],
    ];
    let mut list = vec!["RPUSH".to_string(), "l_big".into()];
    let mut hash = vec!["HSET".to_string(), "h_big".into()];
    let mut set = vec!["SADD".to_string(), "set_big".into()];
    let mut zset = vec!["ZADD".to_string(), "z_big".into()];
    for i in 0..2000 {
        list.push(format!("element-{i}"));
        hash.push(format!("field-{i}"));
        hash.push(format!("value-{i}"));
        set.push(format!("member-{i}"));
        zset.push(i.to_string());
        zset.push(format!("member-{i}"));
    }
    setup.extend([list, hash, set, zset]);
    for cmd in &setup {
        let refs: Vec<&str> = cmd.iter().map(String::as_str).collect();
        p.check(&refs);
    }
    for i in 0..50 {
        let id = format!("{}-1", i + 1);
        p.check(&["XADD", "x", &id, "name", "value", "n", &i.to_string()]);
    }
    // (key, how far from Redis's figure the estimate may be, in percent)
    let expectations = [
        ("s_small", 0),
        ("s_int", 0),
        ("s_embstr", 0),
        ("s_raw", 0),
        ("l_small", 0),
        ("h_small", 0),
        ("set_int", 0),
        ("z_small", 0),
        ("l_big", 10),
        ("h_big", 10),
        ("set_big", 10),
        ("z_big", 15),
        ("x", 50),
    ];
    let mut report = Vec::new();
    let mut failed = false;
    for (key, tolerance) in expectations {
        for samples in ["5", "0"] {
            let (r, h) = usage(&mut p, key, samples);
            let off = (h - r).abs() * 100 / r.max(1);
            report.push(format!(
                "{key} SAMPLES {samples}: redis {r}, hozon {h} ({off}%)"
            ));
            failed |= off > tolerance;
        }
    }
    let report = report.join("\n");
    eprintln!("{report}");
    assert!(
        !failed,
        "MEMORY USAGE outside the documented tolerance:\n{report}"
    );
}

/// MEMORY STATS's field names (the databases' entries included).
fn stats_fields(reply: &Value) -> Vec<String> {
    reply
        .items()
        .chunks(2)
        .flat_map(|pair| {
            let mut names = vec![pair[0].text()];
            if let Value::Array(inner) = &pair[1] {
                names.extend(inner.chunks(2).map(|f| format!("  {}", f[0].text())));
            }
            names
        })
        .collect()
}

#[test]
fn stats_doctor_malloc_stats() {
    let mut p = Pair::new();
    p.check(&["SET", "a", "b"]);
    p.check(&["SELECT", "3"]);
    p.check(&["SET", "a", "b"]);
    let (r, h) = p.both(&["MEMORY", "STATS"]);
    assert_eq!(stats_fields(&decode(&r)), stats_fields(&decode(&h)));
    let h = decode(&h);
    let field = |name: &str| {
        h.items()
            .chunks(2)
            .find(|pair| pair[0].text() == name)
            .map(|pair| pair[1].clone())
            .unwrap_or_else(|| panic!("no {name}"))
    };
    assert_eq!(field("keys.count"), Value::Int(2));
    assert!(field("total.allocated").int() > 0);
    for conn in [&mut p.r, &mut p.h] {
        let doctor = decode(&conn.call(&[b"MEMORY", b"DOCTOR"])).text();
        assert!(
            doctor.starts_with("Hi Sam") || doctor.starts_with("Sam,"),
            "{doctor}"
        );
        let malloc = decode(&conn.call(&[b"MEMORY", b"MALLOC-STATS"])).text();
        assert!(!malloc.is_empty());
    }
}
