//! Tests of the `aof` subcommand: hozon AOFs built with known commands
//! and timestamps through the library, an AOF the engine wrote, and a
//! Redis 7 appendonlydir written by a real redis-server. Expectations
//! come from what was written (or from the file's bytes), never from the
//! tool's own output.

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use hozon::persist::aof::{self, BatchBuilder, FILE_HEADER};
use hozon::Effect;

use super::json::{self, Json};
use super::{inspect, saved_dump, written_aof, Redis, BIN};

/// 2026-11-30T00:55:00Z, a multiple of 300 s (timeline buckets align).
const T0: i64 = 1_796_000_100_000;

fn eff(db: usize, words: &[&str]) -> Effect {
    Effect {
        db,
        argv: words.iter().map(|w| w.as_bytes().to_vec()).collect(),
    }
}

/// The commands of [`known_file`] in file order: (db, argv).
fn known_commands() -> Vec<(u64, Vec<&'static str>)> {
    vec![
        (0, vec!["SELECT", "0"]),
        (0, vec!["SET", "a", "1"]),
        (0, vec!["SET", "b", "2"]),
        (0, vec!["INCR", "a"]),
        (3, vec!["SELECT", "3"]),
        (3, vec!["SET", "a", "5"]),
        (3, vec!["MULTI"]),
        (3, vec!["HSET", "h", "f", "v"]),
        (3, vec!["DEL", "b"]),
        (3, vec!["EXEC"]),
        (0, vec!["SELECT", "0"]),
        (0, vec!["SET", "a", "7"]),
    ]
}

/// A hozon AOF of four batches at T0, T0+1.5 s, T0+65 s and T0+1 h, and
/// the offset where each batch starts.
fn known_file() -> (Vec<u8>, Vec<usize>) {
    let batches: Vec<(i64, Vec<Vec<Effect>>)> = vec![
        (
            T0,
            vec![
                vec![eff(0, &["SET", "a", "1"])],
                vec![eff(0, &["SET", "b", "2"])],
            ],
        ),
        (
            T0 + 1500,
            vec![
                vec![eff(0, &["INCR", "a"])],
                vec![eff(3, &["SET", "a", "5"])],
            ],
        ),
        (
            T0 + 65_000,
            vec![vec![
                eff(3, &["HSET", "h", "f", "v"]),
                eff(3, &["DEL", "b"]),
            ]],
        ),
        (T0 + 3_600_000, vec![vec![eff(0, &["SET", "a", "7"])]]),
    ];
    let mut out = FILE_HEADER.to_vec();
    let mut starts = Vec::new();
    let mut db = None;
    for (ts, units) in batches {
        starts.push(out.len());
        let mut b = BatchBuilder::new();
        for unit in &units {
            b.push_unit(unit, &mut db);
        }
        out.extend(b.finish(ts));
    }
    (out, starts)
}

fn aof_json(args: &[&str]) -> (i32, Json) {
    let mut full = vec!["aof", "--json"];
    full.extend_from_slice(args);
    let (code, out, err) = inspect(&full);
    let doc = json::parse(&out).unwrap_or_else(|e| panic!("{full:?}: {e}\n{out}\n{err}"));
    (code, doc)
}

/// `aof --list --json`: (exit code, rows, stderr).
fn aof_list(args: &[&str]) -> (i32, Vec<Json>, String) {
    let mut full = vec!["aof", "--list", "--json"];
    full.extend_from_slice(args);
    let (code, out, err) = inspect(&full);
    let rows = out
        .lines()
        .map(|l| json::parse(l).unwrap_or_else(|e| panic!("{full:?}: {e}: {l}")))
        .collect();
    (code, rows, err)
}

fn histogram(doc: &Json) -> BTreeMap<String, u64> {
    doc.at("histogram")
        .arr()
        .iter()
        .map(|r| (r.at("command").str().to_string(), r.at("count").u64()))
        .collect()
}

fn key_ops(doc: &Json) -> BTreeMap<(u64, String), u64> {
    doc.at("keys")
        .at("top")
        .arr()
        .iter()
        .map(|r| {
            (
                (r.at("db").u64(), r.at("key").str().to_string()),
                r.at("ops").u64(),
            )
        })
        .collect()
}

fn argv_of(row: &Json) -> Vec<String> {
    row.at("argv")
        .arr()
        .iter()
        .map(|a| a.str().to_string())
        .collect()
}

/// Every listed row's offset is the `*` of a command whose encoding is
/// exactly the listed arguments (all test arguments are plain ASCII, so
/// escaping leaves them unchanged).
fn assert_rows_point_at_commands(data: &[u8], rows: &[Json]) {
    for row in rows {
        let at = row.at("offset").u64() as usize;
        let mut encoded = Vec::new();
        aof::encode_command(&mut encoded, &argv_of(row));
        assert_eq!(data[at], b'*', "{row:?}");
        assert_eq!(&data[at..at + encoded.len()], &encoded[..], "{row:?}");
        assert_eq!(row.at("bytes").u64() as usize, encoded.len());
    }
}

fn write(dir: &Path, name: &str, data: &[u8]) -> String {
    let path = dir.join(name);
    std::fs::write(&path, data).expect("writing a test file");
    path.to_str().expect("test paths are UTF-8").to_string()
}

#[test]
fn hozon_aof_statistics_match_the_written_batches() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (data, _) = known_file();
    let path = write(dir.path(), "known.aof", &data);
    let (code, doc) = aof_json(&[&path]);
    assert_eq!(code, 0, "{doc:?}");
    assert_eq!(doc.at("status").str(), "ok");
    let totals = doc.at("totals");
    assert_eq!(totals.at("commands").u64(), 7);
    assert_eq!(totals.at("select_multi_exec").u64(), 5);
    assert_eq!(totals.at("batches").u64(), 4);
    assert_eq!(totals.at("transactions").u64(), 1);
    assert_eq!(totals.at("no_timestamp").u64(), 0);
    assert_eq!(totals.at("bytes").u64(), {
        let mut all = Vec::new();
        for (_, argv) in known_commands() {
            aof::encode_command(&mut all, &argv);
        }
        all.len() as u64
    });
    let want: BTreeMap<String, u64> = [
        ("set", 4),
        ("select", 3),
        ("incr", 1),
        ("hset", 1),
        ("del", 1),
        ("multi", 1),
        ("exec", 1),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), v))
    .collect();
    assert_eq!(histogram(&doc), want);
    let want: BTreeMap<(u64, String), u64> = [
        ((0, "a"), 3),
        ((0, "b"), 1),
        ((3, "a"), 1),
        ((3, "h"), 1),
        ((3, "b"), 1),
    ]
    .into_iter()
    .map(|((db, k), v)| ((db, k.to_string()), v))
    .collect();
    assert_eq!(key_ops(&doc), want);
    assert_eq!(doc.at("keys").at("top").arr()[0].at("key").str(), "a");
    let span = doc.at("time_span");
    assert_eq!(span.at("first_ms").u64() as i64, T0);
    assert_eq!(span.at("last_ms").u64() as i64, T0 + 3_600_000);
    assert_eq!(span.at("first_utc").str(), "2026-11-30 00:55:00 UTC");
    // One hour: 5-minute buckets (the smallest width giving < 50 rows),
    // empty buckets listed in between.
    let tl = doc.at("timeline");
    assert_eq!(tl.at("bucket_seconds").u64(), 300);
    let rows = tl.at("rows").arr();
    assert_eq!(rows.len(), 13);
    assert_eq!(rows[0].at("start_ms").u64() as i64, T0);
    assert_eq!(rows[0].at("commands").u64(), 10);
    assert_eq!(rows[12].at("commands").u64(), 2);
    assert!(rows[1..12].iter().all(|r| r.at("commands").u64() == 0));
    // A given bucket width.
    let (_, doc) = aof_json(&[&path, "--bucket", "60"]);
    let rows = doc.at("timeline").at("rows").arr();
    assert_eq!(rows.len(), 61);
    assert_eq!(rows[0].at("commands").u64(), 6);
    assert_eq!(rows[1].at("commands").u64(), 4);
}

#[test]
fn since_until_and_byte_ranges_select_the_right_commands() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (data, _) = known_file();
    let path = write(dir.path(), "known.aof", &data);
    // T0 + 1 s (as an RFC 3339 time with an offset) up to T0 + 1 h
    // (Unix ms, exclusive): the second and third batches.
    let until = (T0 + 3_600_000).to_string();
    let (code, doc) = aof_json(&[
        &path,
        "--since",
        "2026-11-30T01:55:01+01:00",
        "--until",
        &until,
    ]);
    assert_eq!(code, 0, "{doc:?}");
    let totals = doc.at("totals");
    assert_eq!(totals.at("commands").u64(), 4);
    assert_eq!(totals.at("select_multi_exec").u64(), 3);
    assert_eq!(totals.at("batches").u64(), 2);
    assert_eq!(totals.at("transactions").u64(), 1);
    assert_eq!(doc.at("time_span").at("first_ms").u64() as i64, T0 + 1500);
    assert_eq!(doc.at("time_span").at("last_ms").u64() as i64, T0 + 65_000);
    assert_eq!(doc.at("selection").at("since_ms").u64() as i64, T0 + 1000);

    // Every command, listed in order with its db and batch time.
    let (code, rows, _) = aof_list(&[&path]);
    assert_eq!(code, 0);
    let want = known_commands();
    assert_eq!(rows.len(), want.len());
    assert_rows_point_at_commands(&data, &rows);
    let batch_ts = [T0, T0, T0, T0 + 1500, T0 + 1500, T0 + 1500];
    for (i, (row, (db, argv))) in rows.iter().zip(&want).enumerate() {
        assert_eq!(argv_of(row), *argv, "row {i}");
        assert_eq!(row.at("db").u64(), *db, "row {i}");
        let ts = row.at("ts_ms").u64() as i64;
        let expected =
            batch_ts
                .get(i)
                .copied()
                .unwrap_or(if i < 10 { T0 + 65_000 } else { T0 + 3_600_000 });
        assert_eq!(ts, expected, "row {i}");
        assert_eq!(row.at("in_multi"), &Json::Bool((6..=9).contains(&i)));
    }

    // A byte range found in the file's bytes: from INCR up to EXEC.
    let find = |needle: &[u8]| {
        data.windows(needle.len())
            .position(|w| w == needle)
            .expect("the command is in the file")
    };
    let from = find(b"*2\r\n$4\r\nINCR\r\n").to_string();
    let to = find(b"*1\r\n$4\r\nEXEC\r\n").to_string();
    let (code, rows, _) = aof_list(&[&path, "--from-byte", &from, "--to-byte", &to]);
    assert_eq!(code, 0);
    let got: Vec<String> = rows.iter().map(|r| argv_of(r).join(" ")).collect();
    assert_eq!(
        got,
        [
            "INCR a",
            "SELECT 3",
            "SET a 5",
            "MULTI",
            "HSET h f v",
            "DEL b"
        ]
    );
    let (_, rows, _) = aof_list(&[&path, "--from-byte", &from, "--limit", "2"]);
    assert_eq!(rows.len(), 2);
    // The same range as statistics.
    let (_, doc) = aof_json(&[&path, "--from-byte", &from, "--to-byte", &to]);
    assert_eq!(doc.at("totals").at("commands").u64(), 4);

    // Text listing: a header, then one line per command.
    let (code, out, _) = inspect(&[
        "aof",
        "--list",
        &path,
        "--since",
        &(T0 + 3_600_000).to_string(),
    ]);
    assert_eq!(code, 0);
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(lines.len(), 3, "{out}");
    assert!(lines[0].contains("offset") && lines[0].contains("command"));
    assert!(
        lines[2].ends_with("2026-11-30 01:55:00 UTC  SET a 7"),
        "{out}"
    );
}

#[test]
fn damage_mid_file_and_a_torn_tail_exit_1_with_the_offset() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (data, starts) = known_file();
    // A flipped byte inside the second batch: the batch fails its
    // checksum and intact batches follow: damage at the batch's start.
    let mut damaged = data.clone();
    damaged[starts[1] + 20] ^= 0x04;
    let path = write(dir.path(), "flipped.aof", &damaged);
    let (code, doc) = aof_json(&[&path]);
    assert_eq!(code, 1, "{doc:?}");
    assert_eq!(doc.at("status").str(), "damaged");
    let problem = &doc.at("problems").arr()[0];
    assert_eq!(problem.at("offset").u64() as usize, starts[1]);
    // The batch's damage is found by its checksum or its framing; the
    // intact batches after it make it damage, not a torn tail.
    let message = problem.at("message").str();
    assert!(message.contains("intact data follows"), "{message}");
    // What was read before the damage is reported.
    assert_eq!(doc.at("totals").at("commands").u64(), 2);
    let (code, rows, err) = aof_list(&[&path]);
    assert_eq!(code, 1);
    assert_eq!(rows.len(), 3);
    assert!(err.contains(&format!("offset {}", starts[1])), "{err}");
    let (code, out, err) = inspect(&["aof", &path]);
    assert_eq!(code, 1);
    assert!(out.contains("problems:"), "{out}");
    assert!(err.contains("problems"), "{err}");

    // A cut inside the last batch: a torn tail at its start.
    let path = write(dir.path(), "torn.aof", &data[..data.len() - 3]);
    let (code, doc) = aof_json(&[&path]);
    assert_eq!(code, 1, "{doc:?}");
    let file = &doc.at("files").arr()[0];
    assert_eq!(file.at("torn_tail").at("offset").u64() as usize, starts[3]);
    assert_eq!(
        doc.at("problems").arr()[0].at("offset").u64() as usize,
        starts[3]
    );
    assert_eq!(doc.at("totals").at("commands").u64(), 6);
    assert_eq!(doc.at("totals").at("batches").u64(), 3);
}

#[test]
fn a_dump_hoz_preamble_is_skipped_and_offsets_stay_absolute() {
    let dir = tempfile::tempdir().expect("tempdir");
    let dump = std::fs::read(saved_dump(dir.path())).expect("dump");
    let (log, _) = known_file();
    let data = [dump.as_slice(), log.as_slice()].concat();
    let path = write(dir.path(), "rewritten.aof", &data);
    let (code, doc) = aof_json(&[&path]);
    assert_eq!(code, 0, "{doc:?}");
    let file = &doc.at("files").arr()[0];
    assert_eq!(file.at("preamble").str(), "dump.hoz");
    assert_eq!(file.at("preamble_keys").u64(), 10);
    assert_eq!(file.at("preamble_bytes").u64() as usize, dump.len());
    assert_eq!(doc.at("totals").at("commands").u64(), 7);
    let (code, rows, _) = aof_list(&[&path]);
    assert_eq!(code, 0);
    assert_eq!(rows.len(), known_commands().len());
    assert!(rows[0].at("offset").u64() as usize > dump.len());
    assert_rows_point_at_commands(&data, &rows);
}

#[test]
fn an_engine_written_aof_matches_its_replay() {
    let dir = tempfile::tempdir().expect("tempdir");
    let before_ms = hozon::engine::now_ms();
    let data = written_aof(dir.path());
    let after_ms = hozon::engine::now_ms();
    // Independent account: replay the file, every key is argv[1].
    let mut names: BTreeMap<String, u64> = BTreeMap::new();
    let mut keys: BTreeMap<(u64, String), u64> = BTreeMap::new();
    let mut db = 0;
    let report = aof::replay(&data, &mut |argv| {
        let name = String::from_utf8_lossy(argv[0]).to_lowercase();
        if name == "select" {
            db = String::from_utf8_lossy(argv[1])
                .parse()
                .expect("a db number");
        } else {
            *keys
                .entry((db, String::from_utf8_lossy(argv[1]).into_owned()))
                .or_default() += 1;
        }
        *names.entry(name).or_default() += 1;
        Ok(())
    })
    .expect("the engine's AOF replays");
    let path = dir.path().join("appendonly.aof");
    let (code, doc) = aof_json(&[path.to_str().expect("UTF-8 path")]);
    assert_eq!(code, 0, "{doc:?}");
    assert_eq!(doc.at("totals").at("commands").u64(), report.commands);
    assert_eq!(doc.at("totals").at("batches").u64(), report.batches);
    let mut got = histogram(&doc);
    got.remove("multi");
    got.remove("exec");
    assert_eq!(got, names);
    assert_eq!(key_ops(&doc), keys);
    let span = doc.at("time_span");
    let (first, last) = (
        span.at("first_ms").u64() as i64,
        span.at("last_ms").u64() as i64,
    );
    assert!(
        before_ms <= first && first <= last && last <= after_ms,
        "{span:?}"
    );
}

#[test]
fn the_key_table_is_capped_and_folded_totals_add_up() {
    let dir = tempfile::tempdir().expect("tempdir");
    // Plain RESP without timestamps: 1000 cold keys touched once, and 5
    // hot keys touched 100 times each in between. The hot keys sort
    // before the cold ones, so ties never fold them: their counts stay
    // exact while the cold keys are folded.
    let mut data = Vec::new();
    for i in 0..1000 {
        aof::encode_command(&mut data, &["INCR".to_string(), format!("z:cold{i}")]);
        if i % 2 == 0 {
            aof::encode_command(
                &mut data,
                &["INCR".to_string(), format!("a:hot{}", (i / 2) % 5)],
            );
        }
    }
    let total_ops = 1500;
    let path = write(dir.path(), "many.aof", &data);
    let (code, doc) = aof_json(&[&path, "--key-cap", "16", "--top", "5"]);
    assert_eq!(code, 0, "{doc:?}");
    let keys = doc.at("keys");
    assert_eq!(keys.at("cap_hit"), &Json::Bool(true));
    assert!(keys.at("tracked").u64() <= 16);
    let top: Vec<(String, u64)> = keys
        .at("top")
        .arr()
        .iter()
        .map(|r| (r.at("key").str().to_string(), r.at("ops").u64()))
        .collect();
    let want: Vec<(String, u64)> = (0..5).map(|n| (format!("a:hot{n}"), 100)).collect();
    assert_eq!(top, want);
    // Every key operation is either in the table or folded.
    let (_, full) = aof_json(&[&path, "--key-cap", "16", "--top", "16"]);
    let listed: u64 = full
        .at("keys")
        .at("top")
        .arr()
        .iter()
        .map(|r| r.at("ops").u64())
        .sum();
    assert_eq!(listed + full.at("keys").at("folded_ops").u64(), total_ops);
    assert_eq!(doc.at("totals").at("no_timestamp").u64(), total_ops);
    assert_eq!(doc.at("time_span"), &Json::Null);
}

#[test]
fn usage_errors_exit_2_and_other_content_is_a_problem() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (data, _) = known_file();
    let path = write(dir.path(), "known.aof", &data);
    for args in [
        vec!["aof", &path, "--since", "yesterday"],
        vec!["aof", &path, "--limit", "3"],
        vec!["aof", &path, "--file", "x.aof"],
        vec!["aof", "/nonexistent/file.aof"],
    ] {
        let (code, _, err) = inspect(&args);
        assert_eq!(code, 2, "{args:?}: {err}");
    }
    // Not an AOF at all: a problem at offset 0, as `info` reports it.
    let path = write(dir.path(), "text.txt", b"hello\r\n");
    let (code, doc) = aof_json(&[&path]);
    assert_eq!(code, 1, "{doc:?}");
    assert_eq!(doc.at("problems").arr()[0].at("offset").u64(), 0);
    // An RDB file alone: a preamble with an empty log.
    let rdb = super::fixtures().join("mixed_db_ttl.rdb");
    let (code, doc) = aof_json(&[rdb.to_str().expect("UTF-8 path")]);
    assert_eq!(code, 0, "{doc:?}");
    assert_eq!(doc.at("files").arr()[0].at("preamble").str(), "rdb");
    assert_eq!(doc.at("totals").at("commands").u64(), 0);
}

#[test]
fn a_closed_pipe_ends_the_listing_quietly() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut data = Vec::new();
    for i in 0..100_000 {
        aof::encode_command(
            &mut data,
            &["SET".to_string(), format!("key:{i}"), "v".into()],
        );
    }
    let path = write(dir.path(), "big.aof", &data);
    let mut child = Command::new(BIN)
        .args(["aof", "--list", &path])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("running hozon-inspect");
    let mut first = String::new();
    BufReader::new(child.stdout.take().expect("piped stdout"))
        .read_line(&mut first)
        .expect("reading the first line");
    // The reader is dropped here: the pipe closes.
    let out = child.wait_with_output().expect("waiting");
    assert!(first.contains("offset"), "{first}");
    assert_eq!(out.status.code(), Some(0));
    assert!(
        out.stderr.is_empty(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Feeds `script` (one command per line) to redis-cli on one connection.
fn cli_script(redis: &Redis, script: &str) {
    use std::io::Write;
    let mut child = Command::new("redis-cli")
        .arg("-s")
        .arg(&redis.sock)
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .spawn()
        .expect("running redis-cli");
    child
        .stdin
        .take()
        .expect("piped stdin")
        .write_all(script.as_bytes())
        .expect("writing to redis-cli");
    assert!(child.wait().expect("redis-cli").success());
}

#[test]
fn a_redis_7_appendonlydir_with_timestamps() {
    let dir = tempfile::tempdir().expect("tempdir");
    let redis = Redis::start(
        dir.path(),
        &[
            "--appendonly",
            "yes",
            "--aof-timestamp-enabled",
            "yes",
            "--appendfsync",
            "always",
        ],
    );
    cli_script(
        &redis,
        "SET a 1\nMSET b 2 c 3\nSELECT 2\nINCR n\nSELECT 1\nMULTI\nSET x 1\nINCR x\nEXEC\n",
    );
    // Wait for the next second so the later commands get a later #TS.
    let now = SystemTime::now().duration_since(UNIX_EPOCH).expect("clock");
    std::thread::sleep(Duration::from_millis(1010 - u64::from(now.subsec_millis())));
    let second_s = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .expect("clock")
        .as_secs();
    cli_script(&redis, "SET a 2\nDEL c\nSET \"sp ace\" x\n");

    let aofdir = dir.path().join("appendonlydir");
    let incr_name = std::fs::read_dir(&aofdir)
        .expect("appendonlydir")
        .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
        .find(|n| n.ends_with(".incr.aof"))
        .expect("an incr file");
    let incr = std::fs::read(aofdir.join(&incr_name)).expect("incr file");
    let text = String::from_utf8_lossy(&incr);
    let selects = text.matches("*2\r\n$6\r\nSELECT\r\n").count() as u64;
    assert!(text.contains(&format!("#TS:{second_s}\r\n")), "{text}");

    let d = aofdir.to_str().expect("UTF-8 path");
    let (code, doc) = aof_json(&[d]);
    assert_eq!(code, 0, "{doc:?}");
    assert_eq!(doc.at("format").str(), "redis-aof-manifest");
    let files = doc.at("files").arr();
    assert_eq!(files[0].at("role").str(), "base");
    assert_eq!(files[0].at("preamble").str(), "rdb");
    assert_eq!(files[0].at("preamble_keys").u64(), 0);
    let totals = doc.at("totals");
    assert_eq!(totals.at("commands").u64(), 8);
    assert_eq!(totals.at("transactions").u64(), 1);
    assert_eq!(totals.at("select_multi_exec").u64(), selects + 2);
    let hist = histogram(&doc);
    assert_eq!(hist["set"], 4);
    assert_eq!(hist["incr"], 2);
    assert_eq!(hist["mset"], 1);
    assert_eq!(hist["del"], 1);
    assert_eq!(hist["select"], selects);
    let want: BTreeMap<(u64, String), u64> = [
        ((0, "a"), 2),
        ((0, "b"), 1),
        ((0, "c"), 2),
        ((2, "n"), 1),
        ((1, "x"), 2),
        ((0, "sp ace"), 1),
    ]
    .into_iter()
    .map(|((db, k), v)| ((db, k.to_string()), v))
    .collect();
    assert_eq!(key_ops(&doc), want);

    let since = (second_s * 1000).to_string();
    let (_, after) = aof_json(&[d, "--since", &since]);
    assert_eq!(after.at("totals").at("commands").u64(), 3);
    let (_, before) = aof_json(&[d, "--until", &since]);
    assert_eq!(before.at("totals").at("commands").u64(), 5);
    assert_eq!(before.at("totals").at("transactions").u64(), 1);

    // The listing: offsets into the incr file, times from the last #TS
    // line before each command.
    let (code, rows, _) = aof_list(&[d, "--file", &incr_name]);
    assert_eq!(code, 0);
    assert_eq!(rows.len() as u64, 8 + selects + 2);
    assert_rows_point_at_commands(&incr, &rows);
    for row in &rows {
        assert_eq!(row.at("file").str(), incr_name);
        let at = row.at("offset").u64() as usize;
        let ts_at = text[..at].rfind("#TS:").expect("a #TS line before") + 4;
        let secs: u64 = text[ts_at..ts_at + text[ts_at..].find('\r').expect("CRLF")]
            .parse()
            .expect("seconds");
        assert_eq!(row.at("ts_ms").u64(), secs * 1000, "{row:?}");
    }
    let last = rows.last().expect("rows");
    assert_eq!(argv_of(last), ["SET", "sp ace", "x"]);
    assert_eq!(last.at("db").u64(), 0);
    // Byte offsets with several files need --file.
    let (code, _, _) = inspect(&["aof", d, "--from-byte", "10"]);
    assert_eq!(code, 2);

    // Text: the histogram as an aligned table.
    let (code, out, _) = inspect(&["aof", d]);
    assert_eq!(code, 0);
    let set_row = out
        .lines()
        .skip_while(|l| !l.starts_with("histogram:"))
        .find(|l| l.split_whitespace().next() == Some("set"))
        .expect("a set row");
    assert_eq!(set_row.split_whitespace().nth(1), Some("4"), "{out}");

    // After a rewrite the base is an RDB holding the keyspace (a, b and
    // "sp ace" in db 0, x in db 1, n in db 2) and the new incr file is
    // empty.
    redis.cli(&["BGREWRITEAOF"]);
    let manifest = aofdir.join("appendonly.aof.manifest");
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    loop {
        let text = std::fs::read_to_string(&manifest).expect("manifest");
        let done = redis
            .cli(&["INFO", "persistence"])
            .contains("aof_rewrite_in_progress:0");
        if done && text.contains("seq 2 type b") {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "the rewrite did not finish: {text}"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    redis.stop();
    let (code, doc) = aof_json(&[d]);
    assert_eq!(code, 0, "{doc:?}");
    let files = doc.at("files").arr();
    assert_eq!(files.len(), 2, "{doc:?}");
    assert_eq!(files[0].at("preamble").str(), "rdb");
    assert_eq!(files[0].at("preamble_keys").u64(), 5);
    assert_eq!(doc.at("totals").at("commands").u64(), 0);
}

#[test]
fn cut_or_flipped_files_exit_0_or_1_and_still_give_json() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (data, _) = known_file();
    let mut cases = Vec::new();
    for at in (0..data.len()).step_by(11) {
        cases.push(data[..at].to_vec());
        let mut flipped = data.clone();
        flipped[at] ^= 0x21;
        cases.push(flipped);
    }
    for (i, case) in cases.iter().enumerate() {
        let path = write(dir.path(), "case.aof", case);
        let (code, out, err) = inspect(&["aof", "--json", &path]);
        assert!(code == 0 || code == 1, "case {i}: {code} {err}");
        let doc = json::parse(&out).unwrap_or_else(|e| panic!("case {i}: {e}: {out}"));
        assert_eq!(code == 1, !doc.at("problems").arr().is_empty(), "case {i}");
    }
}
