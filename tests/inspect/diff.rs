//! Tests of the `diff` subcommand: the same data set written by hozon
//! (dump.hoz, AOF) and by a real Redis 7.0 (dump.rdb) compares identical;
//! known changes of every kind are reported exactly; damage and usage
//! errors give their exit codes.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::Arc;

use hozon::config::AppendFsync;
use hozon::persist::io::RealIo;
use hozon::Engine;

use super::json::{self, Json};
use super::{engine_config, inspect, Redis};

/// One command, binary-safe.
type Cmd = Vec<Vec<u8>>;

fn cmd(words: &[&[u8]]) -> Cmd {
    words.iter().map(|w| w.to_vec()).collect()
}

/// A command from space-separated words (no binary data).
fn words(line: &str) -> Cmd {
    line.split(' ').map(|w| w.as_bytes().to_vec()).collect()
}

/// A data set with every type in both encodings, binary keys, a key with
/// a backslash, expiries, a stream with deletions, groups, a consumer
/// without pending entries and a pending entry, an emptied stream, and a
/// second database.
fn base() -> Vec<Cmd> {
    let mut c = vec![
        words("SET s1 hello"),
        words("SET s2 12345"),
        cmd(&[b"SET", b"big", &[b'x'; 1000]]),
        cmd(&[b"SET", b"bin\x00\xffkey", b"\x01\x02\r\n"]),
        cmd(&[b"SET", b"back\\slash", b"v"]),
        words("SET ttl1 v PXAT 4102444800123"),
        words("SET ttl2 v PXAT 4102444800999"),
        words("RPUSH l a b c 1 2 3"),
        words("HSET h f1 v1 f2 v2 f3 3"),
        words("PEXPIREAT h 4102444801000"),
        words("HSET ho a 1 b 2 c 3"),
        words("SADD si 1 2 3 -5 100"),
        words("SADD ss x y z"),
        words("SADD ss2 x y z"),
        words("ZADD z 1 a 2.5 b -inf c inf d"),
        words("XADD st 1-1 f v"),
        words("XADD st 1-2 a b c d"),
        words("XADD st 2-0 x y"),
        words("XDEL st 1-2"),
        words("XGROUP CREATE st g1 0"),
        words("XGROUP CREATE st g2 $"),
        words("XREADGROUP GROUP g1 alice COUNT 1 STREAMS st >"),
        words("XGROUP CREATECONSUMER st g1 bob"),
        words("XADD st2 1-1 a b"),
        words("XGROUP CREATE st2 g 0"),
        words("XADD empty 5-5 f v"),
        words("XDEL empty 5-5"),
    ];
    let mut push = vec![b"RPUSH".to_vec(), b"biglist".to_vec()];
    let mut hset = vec![b"HSET".to_vec(), b"bighash".to_vec()];
    let mut sadd = vec![b"SADD".to_vec(), b"bigset".to_vec()];
    let mut zadd = vec![b"ZADD".to_vec(), b"bigz".to_vec()];
    for i in 0..600 {
        push.push(format!("item{i}").into_bytes());
        hset.push(format!("field{i}").into_bytes());
        hset.push(format!("value{i}").into_bytes());
        sadd.push(format!("m{i}").into_bytes());
        if i < 200 {
            zadd.push(format!("{}", f64::from(i) / 4.0).into_bytes());
            zadd.push(format!("zm{i}").into_bytes());
        }
    }
    c.extend([push, hset, sadd, zadd]);
    c.push(words("SELECT 2"));
    c.push(words("SET s1 other-db"));
    c.push(words("HSET h2 a 1"));
    c.push(words("SELECT 0"));
    c
}

/// `base()` then one change of every kind, plus rewrites that change
/// only the insertion order (`ho`, `ss2`: unchanged).
fn changed() -> Vec<Cmd> {
    let mut c = base();
    c.extend([
        words("SET s1 hello2"),
        words("LSET l 0 A"),
        words("HSET h f1 changed"),
        words("SADD si 7"),
        words("ZADD z 3 a"),
        words("XADD st 3-0 n m"),
        words("XGROUP CREATECONSUMER st2 g carol"),
        words("DEL s2"),
        words("SET newkey v"),
        words("PEXPIREAT ttl1 4102444805000"),
        words("PERSIST ttl2"),
        words("DEL ss"),
        words("HSET ss f v"),
        cmd(&[b"SET", b"big", &[b'y'; 1001], b"PXAT", b"4102444809000"]),
        words("DEL ho"),
        words("HSET ho c 3 a 1 b 2"),
        words("DEL ss2"),
        words("SADD ss2 z y x"),
        words("SELECT 2"),
        words("DEL s1"),
    ]);
    c
}

fn execute_all(engine: &mut Engine, cmds: &[Cmd]) {
    let mut s = engine.new_session();
    s.authenticated = true;
    for c in cmds {
        let args: Vec<&[u8]> = c.iter().map(Vec::as_slice).collect();
        let reply = engine.execute(&mut s, &args);
        assert!(!matches!(reply, hozon::Reply::Error(_)), "{c:?}: {reply:?}");
    }
}

/// The commands run by hozon, saved by SAVE: the dump.hoz.
fn hozon_dump(dir: &Path, cmds: &[Cmd]) -> PathBuf {
    let mut engine = Engine::open_with_io(engine_config(dir), Arc::new(RealIo)).expect("open");
    execute_all(&mut engine, cmds);
    execute_all(&mut engine, &[words("SAVE")]);
    drop(engine);
    dir.join("dump.hoz")
}

/// The commands run by hozon with the AOF on: the AOF.
fn hozon_aof(dir: &Path, cmds: &[Cmd]) -> PathBuf {
    let mut config = engine_config(dir);
    config.appendonly = true;
    config.appendfsync = AppendFsync::Always;
    let mut engine = Engine::open_with_io(config, Arc::new(RealIo)).expect("open");
    execute_all(&mut engine, cmds);
    drop(engine);
    dir.join("appendonly.aof")
}

/// The commands run by a real Redis 7.0, saved by SAVE: its dump.rdb.
fn redis_rdb(dir: &Path, cmds: &[Cmd]) -> PathBuf {
    redis_files(dir, cmds, false)
}

/// The commands run by a real Redis 7.0 (with its multi-part AOF on when
/// `aof`), then SAVE: its dump.rdb (the AOF is in `dir/appendonlydir`).
fn redis_files(dir: &Path, cmds: &[Cmd], aof: bool) -> PathBuf {
    let appendonly = if aof { "yes" } else { "no" };
    let redis = Redis::start(dir, &["--appendonly", appendonly]);
    let mut resp = Vec::new();
    for c in cmds {
        resp.extend_from_slice(format!("*{}\r\n", c.len()).as_bytes());
        for w in c {
            resp.extend_from_slice(format!("${}\r\n", w.len()).as_bytes());
            resp.extend_from_slice(w);
            resp.extend_from_slice(b"\r\n");
        }
    }
    let mut child = Command::new("redis-cli")
        .arg("-s")
        .arg(&redis.sock)
        .arg("--pipe")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("running redis-cli --pipe");
    child
        .stdin
        .take()
        .expect("piped stdin")
        .write_all(&resp)
        .expect("writing commands");
    let out = child.wait_with_output().expect("redis-cli --pipe");
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("errors: 0"), "{text}");
    assert_eq!(redis.cli(&["SAVE"]).trim(), "OK");
    redis.stop();
    dir.join("dump.rdb")
}

fn p(path: &Path) -> &str {
    path.to_str().expect("test paths are UTF-8")
}

/// `diff --json a b` plus `args`: (exit code, document).
fn diff_json(a: &Path, b: &Path, args: &[&str]) -> (i32, Json) {
    let mut all = vec!["diff", "--json", p(a), p(b)];
    all.extend_from_slice(args);
    let (code, out, err) = inspect(&all);
    let doc = json::parse(&out)
        .unwrap_or_else(|e| panic!("diff {all:?}: {e}\nstdout: {out}\nstderr: {err}"));
    (code, doc)
}

/// (db, key, change) of the listed differences.
fn listed(doc: &Json) -> Vec<(u64, String, String)> {
    doc.at("differences")
        .arr()
        .iter()
        .map(|r| {
            (
                r.at("db").u64(),
                r.at("key").str().to_string(),
                r.at("change").str().to_string(),
            )
        })
        .collect()
}

fn summary(doc: &Json) -> Vec<(&'static str, u64)> {
    let s = doc.at("summary");
    [
        "keys_a",
        "keys_b",
        "added",
        "removed",
        "changed",
        "type_changed",
        "value_changed",
        "ttl_changed",
        "unchanged",
    ]
    .into_iter()
    .map(|k| (k, s.at(k).u64()))
    .collect()
}

/// Keys of `base()`: 21 in db 0, 2 in db 2.
const BASE_KEYS: u64 = 23;

#[test]
fn diff_of_the_same_data_in_dump_hoz_redis_rdb_and_aof_is_identical() {
    let hoz_dir = tempfile::tempdir().expect("tempdir");
    let rdb_dir = tempfile::tempdir().expect("tempdir");
    let aof_dir = tempfile::tempdir().expect("tempdir");
    let hoz = hozon_dump(hoz_dir.path(), &base());
    let rdb = redis_rdb(rdb_dir.path(), &base());
    let aof = hozon_aof(aof_dir.path(), &base());
    let redis_dir = tempfile::tempdir().expect("tempdir");
    redis_files(redis_dir.path(), &base(), true);
    let redis_aof = redis_dir.path().join("appendonlydir");
    for (a, b) in [
        (&rdb, &hoz),
        (&hoz, &rdb),
        (&hoz, &aof),
        (&aof, &rdb),
        (&redis_aof, &hoz),
    ] {
        let (code, doc) = diff_json(a, b, &[]);
        assert_eq!(code, 0, "{doc:?}");
        assert_eq!(
            doc.at("identical"),
            &Json::Bool(true),
            "{a:?} {b:?}: {doc:?}"
        );
        assert_eq!(doc.at("summary").at("keys_a").u64(), BASE_KEYS);
        assert_eq!(doc.at("summary").at("keys_b").u64(), BASE_KEYS);
        assert_eq!(doc.at("summary").at("unchanged").u64(), BASE_KEYS);
        assert!(doc.at("differences").arr().is_empty());
    }
    let (_, doc) = diff_json(&rdb, &hoz, &[]);
    assert_eq!(doc.at("a").at("format").str(), "rdb");
    assert_eq!(doc.at("b").at("format").str(), "dump.hoz");
    // The consumer seen times and delivery times are those of two runs
    // at different moments: only --stream-times sees them.
    let (code, doc) = diff_json(&rdb, &hoz, &["--stream-times"]);
    assert_eq!(code, 0);
    assert_eq!(listed(&doc), vec![(0, "st".into(), "value".into())]);
    // The text form says the same.
    let (code, text, _) = inspect(&["diff", p(&rdb), p(&hoz)]);
    assert_eq!(code, 0);
    assert!(text.contains("identical  yes"), "{text}");
    assert!(!text.contains("differences"), "{text}");
}

#[test]
fn diff_reports_each_added_removed_and_changed_key_exactly() {
    let rdb_dir = tempfile::tempdir().expect("tempdir");
    let hoz_dir = tempfile::tempdir().expect("tempdir");
    let rdb = redis_rdb(rdb_dir.path(), &base());
    let hoz = hozon_dump(hoz_dir.path(), &changed());
    let (code, doc) = diff_json(&rdb, &hoz, &[]);
    assert_eq!(code, 0, "{doc:?}");
    assert_eq!(doc.at("identical"), &Json::Bool(false));
    let want: Vec<(u64, String, String)> = [
        (0, "big", "value+ttl"),
        (0, "h", "value"),
        (0, "l", "value"),
        (0, "newkey", "added"),
        (0, "s1", "value"),
        (0, "s2", "removed"),
        (0, "si", "value"),
        (0, "ss", "type"),
        (0, "st", "value"),
        (0, "st2", "value"),
        (0, "ttl1", "ttl"),
        (0, "ttl2", "ttl"),
        (0, "z", "value"),
        (2, "s1", "removed"),
    ]
    .into_iter()
    .map(|(db, k, c)| (db, k.to_string(), c.to_string()))
    .collect();
    assert_eq!(listed(&doc), want);
    assert_eq!(
        summary(&doc),
        vec![
            ("keys_a", BASE_KEYS),
            ("keys_b", BASE_KEYS - 1),
            ("added", 1),
            ("removed", 2),
            ("changed", 11),
            ("type_changed", 1),
            ("value_changed", 8),
            ("ttl_changed", 3),
            ("unchanged", BASE_KEYS - 13),
        ]
    );
    let row = |key: &str| -> Json {
        doc.at("differences")
            .arr()
            .iter()
            .find(|r| r.at("key").str() == key)
            .cloned()
            .expect("a listed key")
    };
    let ss = row("ss");
    assert_eq!(ss.at("type_a").str(), "set");
    assert_eq!(ss.at("type_b").str(), "hash");
    let big = row("big");
    assert_eq!(
        (big.at("length_a").u64(), big.at("length_b").u64()),
        (1000, 1001)
    );
    assert_eq!(big.at("expire_ms_a"), &Json::Null);
    assert_eq!(big.at("expire_ms_b").u64(), 4_102_444_809_000);
    let ttl1 = row("ttl1");
    assert_eq!(ttl1.at("expire_ms_a").u64(), 4_102_444_800_123);
    assert_eq!(ttl1.at("expire_ms_b").u64(), 4_102_444_805_000);
    let st = row("st");
    assert_eq!((st.at("length_a").u64(), st.at("length_b").u64()), (2, 3));
    assert_eq!(row("newkey").at("type_a"), &Json::Null);
    assert_eq!(row("s2").at("type_b"), &Json::Null);

    // --limit lists the first N (by db, then key); counts stay exact.
    let (_, limited) = diff_json(&rdb, &hoz, &["--limit", "3"]);
    assert_eq!(listed(&limited), want[..3].to_vec());
    assert_eq!(summary(&limited), summary(&doc));
    assert_eq!(limited.at("listed").u64(), 3);
    let (_, none) = diff_json(&rdb, &hoz, &["--limit", "0"]);
    assert!(listed(&none).is_empty());
    assert_eq!(summary(&none), summary(&doc));

    // A tolerance of 5 s hides ttl1's 4.877 s move, not a removed expiry.
    let (_, tolerant) = diff_json(&rdb, &hoz, &["--ttl-tolerance", "5000"]);
    let changes: Vec<(String, String)> = listed(&tolerant)
        .into_iter()
        .filter(|r| r.0 == 0)
        .map(|r| (r.1, r.2))
        .collect();
    assert!(!changes.iter().any(|c| c.0 == "ttl1"), "{changes:?}");
    assert!(changes.contains(&("ttl2".into(), "ttl".into())));
    assert!(changes.contains(&("big".into(), "value+ttl".into())));

    // The reverse direction swaps added and removed.
    let (_, back) = diff_json(&hoz, &rdb, &[]);
    let swapped: Vec<(u64, String, String)> = want
        .iter()
        .map(|(db, k, c)| {
            let c = match c.as_str() {
                "added" => "removed",
                "removed" => "added",
                other => other,
            };
            (*db, k.clone(), c.to_string())
        })
        .collect();
    assert_eq!(listed(&back), swapped);

    // Text: an aligned table with the same rows, keys escaped as `keys`
    // escapes them.
    let (code, text, _) = inspect(&["diff", p(&rdb), p(&hoz)]);
    assert_eq!(code, 0);
    assert!(text.contains("identical  no"), "{text}");
    assert!(text.contains("differences:\n"), "{text}");
    let line = |key: &str| -> String {
        text.lines()
            .find(|l| l.split_whitespace().nth(1) == Some(key))
            .unwrap_or_else(|| panic!("no row for {key}: {text}"))
            .to_string()
    };
    assert!(line("ss").contains("set -> hash"), "{text}");
    assert!(line("big").contains("1000 -> 1001"), "{text}");
    assert!(
        line("ttl1").contains("2100-01-01 00:00:00.123 UTC -> 2100-01-01 00:00:05.000 UTC"),
        "{text}"
    );
    assert!(line("ttl2").contains("-> -"), "{text}");
    let (_, text, _) = inspect(&["diff", p(&rdb), p(&hoz), "--limit", "2"]);
    assert!(text.contains("differences (first 2 of 14):"), "{text}");
}

#[test]
fn diff_sees_binary_keys_and_escapes_them() {
    let a_dir = tempfile::tempdir().expect("tempdir");
    let b_dir = tempfile::tempdir().expect("tempdir");
    let a = hozon_dump(a_dir.path(), &base());
    let mut cmds = base();
    cmds.push(cmd(&[b"SET", b"bin\x00\xffkey", b"\x01\x02\r\n!"]));
    cmds.push(cmd(&[b"DEL", b"back\\slash"]));
    let b = hozon_dump(b_dir.path(), &cmds);
    let (code, doc) = diff_json(&a, &b, &[]);
    assert_eq!(code, 0);
    assert_eq!(
        listed(&doc),
        vec![
            (0, "back\\\\slash".to_string(), "removed".to_string()),
            (0, "bin\\x00\\xffkey".to_string(), "value".to_string()),
        ]
    );
    let (_, text, _) = inspect(&["diff", p(&a), p(&b)]);
    assert!(text.contains(" bin\\x00\\xffkey "), "{text}");
    assert!(text.contains(" back\\\\slash "), "{text}");
}

#[test]
fn diff_exits_1_on_a_damaged_input_and_2_on_missing_files_and_bad_usage() {
    let dir = tempfile::tempdir().expect("tempdir");
    let good = hozon_dump(dir.path(), &base());
    let data = std::fs::read(&good).expect("dump");
    let cut = dir.path().join("cut.hoz");
    std::fs::write(&cut, &data[..data.len() - 10]).expect("write");
    for (a, b) in [(&good, &cut), (&cut, &good)] {
        let (code, out, err) = inspect(&["diff", p(a), p(b)]);
        assert_eq!(code, 1, "{out} {err}");
        assert!(out.is_empty(), "{out}");
        let which = if *a == cut { "A" } else { "B" };
        assert!(
            err.starts_with(&format!(
                "hozon-inspect: {which}: ({}) is damaged: ",
                p(&cut)
            )),
            "{err}"
        );
    }
    let (code, out, err) = inspect(&["diff", "--json", p(&good), "/nonexistent/dump.rdb"]);
    assert_eq!(code, 2, "{out}");
    assert!(
        err.starts_with("hozon-inspect: B: /nonexistent/dump.rdb"),
        "{err}"
    );
    assert_eq!(inspect(&["diff", p(&good)]).0, 2);
    assert_eq!(inspect(&["diff", p(&good), p(&good), "--limit", "x"]).0, 2);
    assert_eq!(
        inspect(&["diff", p(&good), p(&good), "--ttl-tolerance", "-1"]).0,
        2
    );
    let (code, _, err) = inspect(&["diff", "-", "-"]);
    assert_eq!(code, 2);
    assert!(err.contains("stdin"), "{err}");
    // One input from stdin.
    let out = Command::new(super::BIN)
        .args(["diff", "--json", "-", p(&good)])
        .stdin(std::fs::File::open(&good).expect("open dump"))
        .output()
        .expect("running hozon-inspect");
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    let doc = json::parse(&String::from_utf8_lossy(&out.stdout)).expect("JSON");
    assert_eq!(doc.at("identical"), &Json::Bool(true));
    assert_eq!(doc.at("a").at("path").str(), "-");
    // A file compared with itself.
    let (code, doc) = diff_json(&good, &good, &[]);
    assert_eq!(code, 0);
    assert_eq!(doc.at("identical"), &Json::Bool(true));
}

#[test]
fn diff_into_a_closed_pipe_ends_quietly() {
    use hozon::rdb::writer::{encode_file, Encoder};
    use hozon::types::{Blob, Value};
    // Enough differences to fill any pipe buffer.
    let keys: Vec<(Blob, Value)> = (0..5000)
        .map(|i| {
            (
                Blob::from(format!("key:{i}").as_str()),
                Value::Str(Blob::from("v")),
            )
        })
        .collect();
    let data = encode_file(
        &Encoder::default(),
        1_700_000_000_000,
        keys.iter().map(|(k, v)| (0usize, k, v, None)),
    );
    let dir = tempfile::tempdir().expect("tempdir");
    let many = dir.path().join("many.rdb");
    std::fs::write(&many, &data).expect("write");
    let empty = super::fixtures().join("empty.rdb");
    let (code, doc) = diff_json(&empty, &many, &["--limit", "2"]);
    assert_eq!(code, 0);
    assert_eq!(doc.at("summary").at("added").u64(), 5000);
    assert_eq!(
        listed(&doc),
        vec![
            (0, "key:0".into(), "added".into()),
            (0, "key:1".into(), "added".into())
        ]
    );
    let (a, b) = (
        empty.to_str().expect("UTF-8"),
        many.to_str().expect("UTF-8"),
    );
    super::assert_quiet_on_a_closed_pipe(&["diff", a, b]);
    super::assert_quiet_on_a_closed_pipe(&["diff", a, b, "--json"]);
}
