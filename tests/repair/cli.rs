//! Tests of the `hozon-repair` command line and its safety rules: exit
//! codes, dry runs that write nothing, `--apply` keeping a byte-identical
//! backup, `--output`, the engine's lock, the engine's own messages naming
//! commands that work, and a tool killed at random points never losing
//! the original.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use hozon::persist::aof::{BatchBuilder, FILE_HEADER};
use hozon::{Config, Engine, Reply, Session};

const BIN: &str = env!("CARGO_BIN_EXE_hozon-repair");

fn repair(args: &[&str]) -> Output {
    Command::new(BIN)
        .args(args)
        .output()
        .expect("hozon-repair runs")
}

fn text(out: &Output) -> String {
    format!(
        "exit {:?}\nstdout:\n{}\nstderr:\n{}",
        out.status.code(),
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

fn p(path: &Path) -> &str {
    path.to_str().expect("test paths are UTF-8")
}

/// A hozon AOF of `batches` batches of `per_batch` `SET k<n> <value>`
/// commands in db 0, batch `i` stamped `1_000_000 + i` ms. Returns the
/// bytes and each batch's byte range.
fn hozon_aof(
    batches: usize,
    per_batch: usize,
    value_bytes: usize,
) -> (Vec<u8>, Vec<(usize, usize)>) {
    let mut data = FILE_HEADER.to_vec();
    let mut ranges = Vec::new();
    let mut selected = None;
    let value = vec![b'v'; value_bytes];
    let mut n = 0;
    for i in 0..batches {
        let mut b = BatchBuilder::new();
        for _ in 0..per_batch {
            let key = format!("k{n}");
            b.push_command(0, &[b"SET", key.as_bytes(), &value], &mut selected);
            n += 1;
        }
        let start = data.len();
        data.extend_from_slice(&b.finish(1_000_000 + i as i64));
        ranges.push((start, data.len()));
    }
    (data, ranges)
}

/// Flips a byte inside the body of batch `i` (a checksum mismatch).
fn damage(data: &mut [u8], ranges: &[(usize, usize)], i: usize) {
    let (start, _) = ranges[i];
    data[start + 10] ^= 0x20;
}

fn config(dir: &Path) -> Config {
    let mut config = Config::in_memory();
    config.appendonly = true;
    config.dir = dir.to_path_buf();
    config
}

/// Opens an engine on `dir` and returns the value of every key `k0..kN`
/// that exists, or the open error.
fn engine_keys(dir: &Path, n: usize) -> Result<Vec<Option<Vec<u8>>>, String> {
    let mut engine = Engine::open(config(dir)).map_err(|e| e.to_string())?;
    let mut session = Session::new(1, true, 0);
    let mut out = Vec::new();
    for i in 0..n {
        let key = format!("k{i}");
        match engine.execute(&mut session, &[b"GET", key.as_bytes()]) {
            Reply::Bulk(v) => out.push(Some(v.to_vec())),
            Reply::Null => out.push(None),
            other => return Err(format!("GET {key}: {other:?}")),
        }
    }
    Ok(out)
}

fn listing(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = fs::read_dir(dir)
        .expect("dir lists")
        .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
}

fn backups(dir: &Path) -> Vec<PathBuf> {
    let mut found: Vec<PathBuf> = fs::read_dir(dir)
        .expect("dir lists")
        .map(|e| e.expect("entry").path())
        .filter(|p| {
            p.file_name()
                .is_some_and(|n| n.to_string_lossy().contains(".bak."))
        })
        .collect();
    found.sort();
    found
}

/// A data directory holding a hozon AOF of 4 batches × 5 commands whose
/// batch 1 is damaged (keys k5..k9 lost by a salvage).
fn damaged_dir() -> (tempfile::TempDir, PathBuf, Vec<u8>) {
    let dir = tempfile::tempdir().expect("temp dir");
    let (mut data, ranges) = hozon_aof(4, 5, 8);
    damage(&mut data, &ranges, 1);
    let file = dir.path().join("appendonly.aof");
    fs::write(&file, &data).expect("write");
    (dir, file, data)
}

#[test]
fn usage_errors_exit_2() {
    let (dir, file, _) = damaged_dir();
    for args in [
        vec![],
        vec!["frobnicate", p(&file)],
        vec!["check"],
        vec!["truncate", p(&file)],
        vec!["truncate", p(&file), "--before", "last tuesday"],
        vec!["salvage", p(&file), "--no-such-flag"],
    ] {
        let out = repair(&args);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {}", text(&out));
    }
    let missing = dir.path().join("missing.aof");
    let out = repair(&["check", p(&missing)]);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("missing.aof"),
        "{}",
        text(&out)
    );
    let out = repair(&["--help"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
}

#[test]
fn check_exits_0_on_a_clean_file_and_1_listing_damage() {
    let dir = tempfile::tempdir().expect("temp dir");
    let (data, ranges) = hozon_aof(3, 4, 8);
    let file = dir.path().join("appendonly.aof");
    fs::write(&file, &data).expect("write");
    let out = repair(&["check", p(&file)]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));

    let mut damaged = data.clone();
    damage(&mut damaged, &ranges, 1);
    fs::write(&file, &damaged).expect("write");
    let out = repair(&["check", p(&file)]);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(stdout.contains("checksum-mismatch"), "{}", text(&out));
    assert!(stdout.contains(&ranges[1].0.to_string()), "{}", text(&out));
    assert!(stdout.contains("salvage"), "{}", text(&out));

    let out = repair(&["check", p(&file), "--json"]);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    let json = String::from_utf8_lossy(&out.stdout);
    assert!(
        json.starts_with('{')
            && json.trim_end().ends_with('}')
            && json.trim_end().lines().count() == 1,
        "{}",
        text(&out)
    );
    assert!(json.contains("\"kind\":\"checksum-mismatch\""), "{json}");
    assert!(json.contains("\"keys\":[\"k4\""), "{json}");
}

#[test]
fn dry_run_writes_nothing() {
    let (dir, file, data) = damaged_dir();
    let before = listing(dir.path());
    for args in [
        vec!["salvage", p(&file)],
        vec!["fix", p(&file)],
        vec!["truncate", p(&file), "--before", "1000002"],
    ] {
        let out = repair(&args);
        assert_ne!(out.status.code(), Some(2), "{args:?}: {}", text(&out));
        assert_eq!(listing(dir.path()), before, "{args:?}");
        assert_eq!(fs::read(&file).expect("read"), data, "{args:?}");
    }
    let out = repair(&["salvage", p(&file)]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    assert!(
        String::from_utf8_lossy(&out.stdout).contains("dry run: nothing written; add --apply"),
        "{}",
        text(&out)
    );
    // --output is a destination for --apply, not a write of its own.
    let elsewhere = dir.path().join("salvaged.aof");
    let out = repair(&["salvage", p(&file), "--output", p(&elsewhere)]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    assert_eq!(listing(dir.path()), before);
}

#[test]
fn apply_keeps_a_byte_identical_backup_and_the_engine_loads_the_result() {
    let (dir, file, data) = damaged_dir();
    assert!(
        engine_keys(dir.path(), 20).is_err(),
        "the damaged file loaded"
    );
    let out = repair(&["salvage", p(&file), "--apply"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    let found = backups(dir.path());
    assert_eq!(found.len(), 1, "{:?}", listing(dir.path()));
    assert_eq!(fs::read(&found[0]).expect("read"), data);
    let name = found[0]
        .file_name()
        .expect("name")
        .to_string_lossy()
        .into_owned();
    let stamp = name.trim_start_matches("appendonly.aof.bak.");
    assert!(
        stamp.len() == 16 && stamp.as_bytes()[8] == b'T' && stamp.ends_with('Z'),
        "{name}"
    );
    assert_ne!(fs::read(&file).expect("read"), data);
    let keys = engine_keys(dir.path(), 20).expect("the salvaged file loads");
    for (i, v) in keys.iter().enumerate() {
        // Batch 1 (k5..k9) was damaged and is dropped; the rest is kept.
        assert_eq!(v.is_some(), !(5..10).contains(&i), "k{i}: {v:?}");
    }
    // Nothing left to do now: exit 0, nothing written.
    fs::remove_file(dir.path().join("LOCK")).ok();
    let before = listing(dir.path());
    let out = repair(&["salvage", p(&file), "--apply"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    assert_eq!(listing(dir.path()), before);
}

#[test]
fn output_leaves_the_original_untouched_and_never_overwrites() {
    let (dir, file, data) = damaged_dir();
    let out_dir = tempfile::tempdir().expect("temp dir");
    let dest = out_dir.path().join("appendonly.aof");
    let out = repair(&["salvage", p(&file), "--apply", "--output", p(&dest)]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    assert_eq!(fs::read(&file).expect("read"), data);
    assert_eq!(listing(dir.path()), ["appendonly.aof"]);
    assert_eq!(listing(out_dir.path()), ["appendonly.aof"]);
    engine_keys(out_dir.path(), 20).expect("the output loads");
    let written = fs::read(&dest).expect("read");

    let out = repair(&["salvage", p(&file), "--apply", "--output", p(&dest)]);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    assert_eq!(fs::read(&dest).expect("read"), written);
    assert_eq!(fs::read(&file).expect("read"), data);
}

#[test]
fn a_directory_an_engine_holds_is_refused_and_nothing_written() {
    let (dir, file, data) = damaged_dir();
    let lock = fs::File::create(dir.path().join("LOCK")).expect("lock file");
    lock.try_lock().expect("the test takes the lock");
    let before = listing(dir.path());
    let out = repair(&["salvage", p(&file), "--apply"]);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    assert!(
        String::from_utf8_lossy(&out.stdout).contains("stop it first"),
        "{}",
        text(&out)
    );
    assert_eq!(listing(dir.path()), before);
    assert_eq!(fs::read(&file).expect("read"), data);
    lock.unlock().expect("unlocks");
    let out = repair(&["salvage", p(&file), "--apply"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
}

#[test]
fn fix_cuts_a_torn_tail_and_refuses_damage_before_it() {
    let dir = tempfile::tempdir().expect("temp dir");
    let (data, ranges) = hozon_aof(3, 4, 8);
    let file = dir.path().join("appendonly.aof");
    let torn = &data[..data.len() - 7];
    fs::write(&file, torn).expect("write");
    let out = repair(&["fix", p(&file), "--apply"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    assert_eq!(fs::read(&file).expect("read"), &data[..ranges[2].0]);
    assert_eq!(fs::read(&backups(dir.path())[0]).expect("read"), torn);

    let mut damaged = data.clone();
    damage(&mut damaged, &ranges, 0);
    fs::write(&file, &damaged).expect("write");
    let out = repair(&["fix", p(&file), "--apply"]);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    assert!(
        String::from_utf8_lossy(&out.stdout).contains("salvage"),
        "{}",
        text(&out)
    );
    assert_eq!(fs::read(&file).expect("read"), damaged);
}

#[test]
fn truncate_before_a_time_keeps_the_batches_written_earlier() {
    let dir = tempfile::tempdir().expect("temp dir");
    let (data, ranges) = hozon_aof(4, 3, 8);
    let file = dir.path().join("appendonly.aof");
    fs::write(&file, &data).expect("write");
    // Batch i is stamped 1_000_000 + i ms: before 1_000_002 keeps 0 and 1.
    // 1970-01-01T00:16:40.002Z is 1_000_002 ms.
    let out = repair(&[
        "truncate",
        p(&file),
        "--before",
        "1970-01-01T00:16:40.002Z",
        "--apply",
    ]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    assert_eq!(fs::read(&file).expect("read"), &data[..ranges[2].0]);
    let keys = engine_keys(dir.path(), 12).expect("loads");
    assert_eq!(keys.iter().filter(|k| k.is_some()).count(), 6);
}

#[test]
fn engine_message_names_commands_that_do_what_they_say() {
    let (dir, file, _) = damaged_dir();
    let message = engine_keys(dir.path(), 1).expect_err("the damaged file is refused");
    // Every `hozon-repair ...` command the message names, as words.
    let commands: Vec<Vec<String>> = message
        .split('`')
        .filter(|part| part.starts_with("hozon-repair "))
        .map(|part| {
            part.split_whitespace()
                .skip(1)
                .map(str::to_string)
                .collect()
        })
        .collect();
    let check = commands
        .iter()
        .find(|c| c[0] == "check")
        .unwrap_or_else(|| panic!("no check command in: {message}"));
    let salvage = commands
        .iter()
        .find(|c| c[0] == "salvage")
        .unwrap_or_else(|| panic!("no salvage command in: {message}"));
    assert!(message.contains("--apply"), "{message}");
    assert_eq!(check[1], p(&file), "{message}");

    let args: Vec<&str> = check.iter().map(String::as_str).collect();
    let out = repair(&args);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    assert!(
        String::from_utf8_lossy(&out.stdout).contains("checksum-mismatch"),
        "{}",
        text(&out)
    );

    let mut args: Vec<&str> = salvage.iter().map(String::as_str).collect();
    let out = repair(&args);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    assert!(
        engine_keys(dir.path(), 1).is_err(),
        "a dry run changed the file"
    );
    if !args.contains(&"--apply") {
        args.push("--apply");
    }
    let out = repair(&args);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    engine_keys(dir.path(), 20).expect("the engine opens after the salvage");
}

/// xorshift64*: reproducible delays without a dependency.
struct Rng(u64);

impl Rng {
    fn below(&mut self, n: u64) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d) % n.max(1)
    }
}

#[test]
fn killing_apply_at_any_point_never_loses_the_original() {
    // ~50 MB: 400 batches of 125 commands with 1000-byte values.
    let (mut data, ranges) = hozon_aof(400, 125, 1000);
    damage(&mut data, &ranges, 200);
    let source = tempfile::tempdir().expect("temp dir");
    let original = source.path().join("appendonly.aof");
    fs::write(&original, &data).expect("write");

    // A full run, to learn the expected result and how long a run takes.
    let reference = tempfile::tempdir().expect("temp dir");
    let file = reference.path().join("appendonly.aof");
    fs::copy(&original, &file).expect("copy");
    let started = Instant::now();
    let out = repair(&["salvage", p(&file), "--apply"]);
    let full_ms = started.elapsed().as_millis() as u64;
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    let expected = fs::read(&file).expect("read");
    assert_ne!(expected, data);
    let keys = engine_keys(reference.path(), 1).expect("the salvaged file loads");
    assert!(keys[0].is_some());

    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    let (mut before, mut after) = (0, 0);
    for round in 0..15 {
        let dir = tempfile::tempdir().expect("temp dir");
        let file = dir.path().join("appendonly.aof");
        fs::copy(&original, &file).expect("copy");
        let delay_ms = rng.below(full_ms + 20);
        let mut child = Command::new(BIN)
            .args(["salvage", p(&file), "--apply"])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("spawns");
        std::thread::sleep(Duration::from_millis(delay_ms));
        child.kill().ok(); // SIGKILL; fails only when it already exited.
        child.wait().expect("reaped");
        let now =
            fs::read(&file).unwrap_or_else(|e| panic!("round {round}: the name is gone: {e}"));
        let found = backups(dir.path());
        if now == data {
            // Killed before the rename: the original is in place (a backup
            // link, if made, holds the same bytes).
            for b in &found {
                assert_eq!(fs::read(b).expect("read"), data, "round {round}");
            }
            before += 1;
        } else {
            assert!(
                now == expected,
                "round {round} ({delay_ms} ms): the name holds neither the original nor the complete result ({} bytes)",
                now.len()
            );
            assert_eq!(found.len(), 1, "round {round}: {:?}", listing(dir.path()));
            assert_eq!(fs::read(&found[0]).expect("read"), data, "round {round}");
            after += 1;
        }
    }
    eprintln!(
        "killed before the rename {before} times, after it {after} times (full run {full_ms} ms)"
    );
}

#[test]
fn temp_files_of_an_interrupted_run_are_reported_never_used() {
    let (dir, file, data) = damaged_dir();
    let stale = dir.path().join("appendonly.aof.repair-1.tmp");
    fs::write(&stale, b"half a file").expect("write");
    let out = repair(&["salvage", p(&file)]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    assert!(
        String::from_utf8_lossy(&out.stdout).contains("appendonly.aof.repair-1.tmp"),
        "{}",
        text(&out)
    );
    let out = repair(&["salvage", p(&file), "--apply"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    assert_eq!(fs::read(&stale).expect("read"), b"half a file");
    assert_eq!(fs::read(&backups(dir.path())[0]).expect("read"), data);
    engine_keys(dir.path(), 20).expect("the salvaged file loads");
}

/// A Redis 7 appendonlydir with two incr files of plain RESP with `#TS:`
/// lines (seconds): incr 1 sets a at 100 s and b at 200 s, incr 2 sets c
/// at 300 s.
fn redis_manifest_dir() -> tempfile::TempDir {
    let dir = tempfile::tempdir().expect("temp dir");
    let aof_dir = dir.path().join("appendonlydir");
    fs::create_dir(&aof_dir).expect("mkdir");
    let set = |ts: u64, key: &str| {
        format!("#TS:{ts}\r\n*3\r\n$3\r\nset\r\n$1\r\n{key}\r\n$1\r\n1\r\n").into_bytes()
    };
    let mut one = b"*2\r\n$6\r\nSELECT\r\n$1\r\n0\r\n".to_vec();
    one.extend(set(100, "a"));
    one.extend(set(200, "b"));
    fs::write(aof_dir.join("appendonly.aof.1.incr.aof"), one).expect("write");
    fs::write(aof_dir.join("appendonly.aof.2.incr.aof"), set(300, "c")).expect("write");
    fs::write(
        aof_dir.join("appendonly.aof.manifest"),
        "file appendonly.aof.1.incr.aof seq 1 type i\nfile appendonly.aof.2.incr.aof seq 2 type i\n",
    )
    .expect("write");
    dir
}

#[test]
fn truncate_on_a_manifest_cuts_one_file_and_writes_a_new_manifest() {
    let dir = redis_manifest_dir();
    let aof_dir = dir.path().join("appendonlydir");
    let manifest = aof_dir.join("appendonly.aof.manifest");
    let first = aof_dir.join("appendonly.aof.1.incr.aof");
    let (old_manifest, old_first) = (
        fs::read(&manifest).expect("read"),
        fs::read(&first).expect("read"),
    );
    let out = repair(&["check", p(dir.path())]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    // 150 s: keeps a, cuts b, drops incr 2 from the manifest.
    let out = repair(&["truncate", p(dir.path()), "--before", "150000", "--apply"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    assert_eq!(
        fs::read_to_string(&manifest).expect("read"),
        "file appendonly.aof.1.incr.aof seq 1 type i\n"
    );
    let cut = fs::read(&first).expect("read");
    assert!(old_first.starts_with(&cut) && cut.len() < old_first.len());
    assert!(String::from_utf8_lossy(&cut).contains("#TS:100\r\n"));
    assert!(!String::from_utf8_lossy(&cut).contains("#TS:200"));
    // Every original is still there: incr 2 under its name, the others as
    // backups.
    assert!(aof_dir.join("appendonly.aof.2.incr.aof").exists());
    let kept: Vec<Vec<u8>> = backups(&aof_dir)
        .iter()
        .map(|b| fs::read(b).expect("read"))
        .collect();
    assert!(
        kept.contains(&old_manifest) && kept.contains(&old_first),
        "{:?}",
        listing(&aof_dir)
    );
    // --output makes no sense for several files.
    let out = repair(&[
        "truncate",
        p(dir.path()),
        "--before",
        "50000",
        "--apply",
        "--output",
        "/tmp/x",
    ]);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
}

#[test]
fn a_file_without_times_cannot_be_truncated() {
    let dir = tempfile::tempdir().expect("temp dir");
    let file = dir.path().join("appendonly.aof");
    fs::write(&file, b"*3\r\n$3\r\nset\r\n$1\r\na\r\n$1\r\n1\r\n").expect("write");
    let out = repair(&[
        "truncate",
        p(&file),
        "--before",
        "2026-11-30T12:04:00Z",
        "--apply",
    ]);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    assert_eq!(listing(dir.path()), ["appendonly.aof"]);
}

#[test]
fn a_dump_rewritten_by_the_library_writer_is_applied_with_a_backup() {
    let dir = tempfile::tempdir().expect("temp dir");
    let file = dir.path().join("dump.rdb");
    // REDIS0009, SELECTDB 0, string a = 1, EOF, then a wrong checksum.
    let mut data = b"REDIS0009\xfe\x00\x00\x01a\x011\xff".to_vec();
    data.extend_from_slice(&[1, 2, 3, 4, 5, 6, 7, 8]);
    fs::write(&file, &data).expect("write");
    let out = repair(&["check", p(&file)]);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    let out = repair(&["fix", p(&file)]);
    assert_eq!(
        out.status.code(),
        Some(1),
        "dumps have no tail to fix: {}",
        text(&out)
    );
    let out = repair(&["salvage", p(&file), "--apply"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    assert_eq!(fs::read(&backups(dir.path())[0]).expect("read"), data);
    assert_eq!(listing(dir.path()).len(), 2, "{:?}", listing(dir.path()));
    let out = repair(&["check", p(&file)]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
}
