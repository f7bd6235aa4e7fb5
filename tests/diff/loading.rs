//! A server loading its data at startup, against redis-server loading the
//! same RDB file: connections are accepted at once, the commands with
//! Redis's `loading` flag are served, the others answer -LOADING (inside
//! MULTI too), INFO shows `loading:1` with the `loading_*` fields; then
//! the data is served. `key-load-delay` (Redis's test setting, which
//! hozon has too) makes the load last a few seconds on both.

use std::path::Path;
use std::time::{Duration, Instant};

use crate::harness::{
    hozon_server_path, redis_server_path, show, start_before_loaded, start_redis, Conn,
    ServerProcess,
};

/// Keys in the file; with `KEY_DELAY_US` each, the load lasts seconds.
const KEYS: usize = 20_000;
const KEY_DELAY_US: &str = "200";

/// An RDB file of `KEYS` string keys (`k:<i>` = `<i>`), written by
/// redis-server, copied to `dir/dump.rdb`.
fn write_rdb(dirs: &[&Path]) {
    let redis = start_redis(&[]);
    let mut c = Conn::connect(redis.port);
    let fill = format!("for i=1,{KEYS} do redis.call('SET','k:'..i,i) end");
    assert_eq!(c.call(&[b"EVAL", fill.as_bytes(), b"0"]), b"$-1\r\n");
    assert_eq!(c.call(&[b"SAVE"]), b"+OK\r\n");
    let reply = c.call(&[b"CONFIG", b"GET", b"dir"]);
    let text = String::from_utf8_lossy(&reply).into_owned();
    let dir = text.lines().nth(4).expect("CONFIG GET dir").to_string();
    for d in dirs {
        std::fs::copy(Path::new(&dir).join("dump.rdb"), d.join("dump.rdb")).expect("copy dump.rdb");
    }
}

/// Starts `binary` on the RDB file in `dir`, returning once it accepts
/// connections (not once it has loaded).
fn start_loading(binary: &str, dir: &Path) -> ServerProcess {
    let dir = dir.to_string_lossy();
    let args = [
        "--dir",
        &dir,
        "--dbfilename",
        "dump.rdb",
        "--appendonly",
        "no",
        "--save",
        "",
        "--key-load-delay",
        KEY_DELAY_US,
        "--loading-process-events-interval-bytes",
        "1024",
    ];
    start_before_loaded(binary, "a server", &args)
}

/// The field names of an INFO section's reply, in order.
fn field_names(reply: &[u8]) -> Vec<String> {
    String::from_utf8_lossy(reply)
        .lines()
        .skip(1)
        .filter_map(|l| l.split_once(':').map(|(k, _)| k.to_string()))
        .collect()
}

fn info_field(c: &mut Conn, section: &str, name: &str) -> Option<String> {
    let reply = c.call(&[b"INFO", section.as_bytes()]);
    let prefix = format!("{name}:");
    String::from_utf8_lossy(&reply)
        .lines()
        .find_map(|l| l.strip_prefix(&prefix).map(str::to_string))
}

fn wait_loaded(c: &mut Conn) {
    let deadline = Instant::now() + Duration::from_secs(60);
    while info_field(c, "persistence", "loading").as_deref() != Some("0") {
        assert!(Instant::now() < deadline, "the load did not end");
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn a_loading_server_answers_like_redis_then_serves_the_data() {
    let (rd, hd) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    write_rdb(&[rd.path(), hd.path()]);
    let redis_bin = redis_server_path();
    let redis = start_loading(&redis_bin, rd.path());
    let hozon = start_loading(hozon_server_path(), hd.path());
    let (mut r, mut h) = (Conn::connect(redis.port), Conn::connect(hozon.port));
    let (mut r2, mut h2) = (Conn::connect(redis.port), Conn::connect(hozon.port));

    let script: &[&[&str]] = &[
        &["PING"],
        &["GET", "k:1"],
        &["DBSIZE"],
        &["SET", "new", "v"],
        &["EVAL", "return 1", "0"],
        &["ECHO", "hi"],
        &["CLIENT", "SETNAME", "loader"],
        &["CLIENT", "GETNAME"],
        &["CONFIG", "GET", "databases"],
        &["CONFIG", "GET", "key-load-delay"],
        &["SELECT", "1"],
        &["SELECT", "0"],
        &["PUBLISH", "ch", "m"],
        &["ROLE"],
        &["MULTI"],
        &["SET", "new", "v"],
        &["PING"],
        &["EXEC"],
        &["MULTI"],
        &["ECHO", "queued"],
        &["EXEC"],
        &["NOSUCHCOMMAND"],
        &["GET"],
    ];
    for args in script {
        let bytes: Vec<&[u8]> = args.iter().map(|a| a.as_bytes()).collect();
        let (rr, hr) = (r.call(&bytes), h.call(&bytes));
        assert_eq!(
            show(&hr),
            show(&rr),
            "{args:?} while loading: hozon differs from redis"
        );
    }
    // Both still loading (the checks above are about a loading server).
    for (c, who) in [(&mut r2, "redis"), (&mut h2, "hozon")] {
        assert_eq!(
            info_field(c, "persistence", "loading").as_deref(),
            Some("1"),
            "{who} finished loading during the checks: make the load longer"
        );
    }
    // INFO persistence: the same fields, loading_* included.
    let (ri, hi) = (
        r.call(&[b"INFO", b"persistence"]),
        h.call(&[b"INFO", b"persistence"]),
    );
    let (rf, hf) = (field_names(&ri), field_names(&hi));
    let loading_fields: Vec<&String> = rf.iter().filter(|f| f.starts_with("loading_")).collect();
    assert_eq!(loading_fields.len(), 6, "{}", show(&ri));
    for f in &loading_fields {
        assert!(hf.contains(f), "hozon's INFO lacks {f}: {}", show(&hi));
    }
    let total: u64 = info_field(&mut h, "persistence", "loading_total_bytes")
        .and_then(|v| v.parse().ok())
        .expect("loading_total_bytes");
    let size = std::fs::metadata(hd.path().join("dump.rdb")).unwrap().len();
    assert_eq!(total, size, "loading_total_bytes is the file's size");
    let perc = |c: &mut Conn| -> f64 {
        info_field(c, "persistence", "loading_loaded_perc")
            .and_then(|v| v.parse().ok())
            .expect("loading_loaded_perc")
    };
    let first = perc(&mut h);
    std::thread::sleep(Duration::from_millis(500));
    let later = perc(&mut h);
    assert!(
        later > first && later < 100.0,
        "progress did not advance: {first} then {later}"
    );

    // Then the data.
    wait_loaded(&mut r2);
    wait_loaded(&mut h2);
    for args in [
        &["PING"][..],
        &["DBSIZE"],
        &["GET", "k:1"],
        &["CLIENT", "GETNAME"],
        &["SET", "new", "v"],
        &["GET", "new"],
    ] {
        let bytes: Vec<&[u8]> = args.iter().map(|a| a.as_bytes()).collect();
        assert_eq!(show(&h.call(&bytes)), show(&r.call(&bytes)), "{args:?}");
    }
    let last = format!("k:{KEYS}");
    assert_eq!(
        h.call(&[b"GET", last.as_bytes()]),
        format!("${}\r\n{KEYS}\r\n", KEYS.to_string().len()).into_bytes()
    );
}
