//! Damaged and hostile RDB files (docs/rdb.md, "What a reader does with
//! damage").
//!
//! - Every fixture in `fixtures/rdb/` and a file hozon wrote: truncated at
//!   every offset, `load` and `scan` fail (never panic, never succeed);
//!   every single-bit flip (every byte of small files, a fixed sample of
//!   at least 2000 positions of larger ones) fails when the file carries a
//!   CRC, and never panics when it does not.
//! - Hand-made files with absurd lengths (a 2^32-byte string, 2^60 list
//!   elements, an LZF string claiming 2^40 bytes, 2^40 stream nodes, ...)
//!   fail within a time bound and without allocating: a counting global
//!   allocator measures the peak heap use of each read on its thread.
//! - Through hozon-server: a damaged `dump.rdb` (unknown type, version 13,
//!   `VALKEY081`, bad magic, bytes after the CRC, truncation, a flipped
//!   bit) refuses the start with exit status 1 and a message naming the
//!   file, and the file is left byte for byte as it was.

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use hozon::rdb::reader::{self, Checksum, RdbError, Summary};
use hozon::rdb::writer::{encode_file, Encoder};
use hozon::types::EncodingLimits;
use hozon::{Config, Engine, Reply};
use testkit::rdb_files::*;

// ---------------------------------------------------------------------------
// Heap accounting: the fuzz checks' counting allocator (one copy for both).

use testkit::checks::alloc;

#[global_allocator]
static ALLOCATOR: alloc::Counting = alloc::Counting;

/// Runs `f` and returns its result with the peak of heap bytes it held
/// at once (on this thread).
fn peak_heap<R>(f: impl FnOnce() -> R) -> (R, usize) {
    alloc::peak_of(f)
}

// ---------------------------------------------------------------------------
// Reading with the library, panics caught.

fn options() -> reader::Options {
    reader::Options {
        limits: EncodingLimits::default(),
        databases: 16,
        // Keep keys whatever their TTL: a flipped expiry must still be seen.
        skip_expired_before_ms: None,
        now_ms: 1_700_000_000_000,
    }
}

/// What one read did.
#[derive(Debug)]
enum Outcome {
    Loaded(Summary),
    Failed(RdbError),
    Panicked(String),
}

fn panic_text(payload: Box<dyn std::any::Any + Send>) -> String {
    payload
        .downcast_ref::<String>()
        .cloned()
        .or_else(|| payload.downcast_ref::<&str>().map(|s| s.to_string()))
        .unwrap_or_else(|| "non-string panic".into())
}

/// `reader::load` with a sink that keeps the keys (as the engine does,
/// refusing a key seen twice), panics caught.
fn load(data: &[u8]) -> Outcome {
    let options = options();
    let result = catch_unwind(AssertUnwindSafe(|| {
        let mut seen = std::collections::HashSet::new();
        let mut values = Vec::new();
        let summary = reader::load(data, &options, &mut |k| {
            if !seen.insert((k.db, k.key.clone())) {
                return Err("the key appears twice in the file".into());
            }
            values.push(k.value);
            Ok(())
        });
        drop(values);
        summary
    }));
    match result {
        Ok(Ok(summary)) => Outcome::Loaded(summary),
        Ok(Err(e)) => Outcome::Failed(e),
        Err(payload) => Outcome::Panicked(panic_text(payload)),
    }
}

/// `reader::scan`, panics caught; Ok carries the bytes read.
fn scan(data: &[u8]) -> Result<Result<usize, RdbError>, String> {
    catch_unwind(AssertUnwindSafe(|| reader::scan(data).map(|s| s.len))).map_err(panic_text)
}

// ---------------------------------------------------------------------------
// The files.

fn fixtures_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/rdb")
}

/// Every `fixtures/rdb/*.rdb` (read at run time: new fixtures join), and
/// a file hozon wrote.
fn all_files() -> Vec<(String, Vec<u8>)> {
    let mut files = Vec::new();
    if let Ok(dir) = std::fs::read_dir(fixtures_dir()) {
        for entry in dir.flatten() {
            let path = entry.path();
            if path.extension().is_some_and(|e| e == "rdb") {
                let data = std::fs::read(&path).expect("read a fixture");
                let name = path.file_name().expect("a file name").to_string_lossy();
                files.push((name.into_owned(), data));
            }
        }
    }
    files.sort();
    files.push(("hozon-written".into(), hozon_written_file()));
    files
}

/// Keys of every type and encoding, written by hozon's encoder.
fn hozon_written_file() -> Vec<u8> {
    let mut engine = Engine::open(Config::in_memory()).expect("an in-memory engine");
    let mut s = engine.new_session();
    s.authenticated = true;
    let mut script: Vec<Vec<String>> = Vec::new();
    let mut line = |words: &[&str]| script.push(words.iter().map(|w| w.to_string()).collect());
    line(&["SET", "int8", "-7"]);
    line(&["SET", "int32", "2000000000"]);
    line(&["SET", "raw", "hello world"]);
    line(&["SET", "lzf", &"abcabcabc".repeat(30)]);
    line(&["SET", "empty", ""]);
    line(&["PEXPIREAT", "raw", "99999999999999"]);
    line(&[
        "RPUSH",
        "list",
        "a",
        "1",
        "-300",
        "70000",
        "5000000000",
        "x",
    ]);
    let long_list: Vec<String> = (0..400).map(|i| format!("element-{i:04}")).collect();
    let mut rpush = vec!["RPUSH", "biglist"];
    rpush.extend(long_list.iter().map(String::as_str));
    line(&rpush);
    line(&["HSET", "hash", "f", "v", "n", "12"]);
    let fields: Vec<String> = (0..140).map(|i| format!("field{i}")).collect();
    let mut hset = vec!["HSET", "bighash"];
    for f in &fields {
        hset.push(f);
        hset.push("value");
    }
    line(&hset);
    line(&["SADD", "ints", "1", "2", "-70000", "5000000000"]);
    line(&["SADD", "strs", "a", "b", "c"]);
    line(&["ZADD", "z", "1.5", "a", "-inf", "b", "inf", "c"]);
    let mut zadd = vec!["ZADD", "bigz"];
    for f in &fields {
        zadd.push("2.5");
        zadd.push(f);
    }
    line(&zadd);
    // Values of 1 KB: a few entries fill a 4 KB node.
    for i in 1..=8 {
        let id = format!("{i}-1");
        let v = format!("{i}").repeat(1000);
        if i % 3 == 0 {
            line(&["XADD", "st", &id, "other", &v]);
        } else {
            line(&["XADD", "st", &id, "a", &v, "b", &v]);
        }
    }
    line(&["XDEL", "st", "2-1"]);
    line(&["XGROUP", "CREATE", "st", "g", "0"]);
    line(&[
        "XREADGROUP",
        "GROUP",
        "g",
        "alice",
        "COUNT",
        "3",
        "STREAMS",
        "st",
        ">",
    ]);
    line(&["XCLAIM", "st", "g", "bob", "0", "3-1", "RETRYCOUNT", "4"]);
    line(&["XGROUP", "CREATECONSUMER", "st", "g", "carol"]);
    line(&["SELECT", "5"]);
    line(&["SET", "in-db-5", "x"]);
    for words in &script {
        let args: Vec<&[u8]> = words.iter().map(|w| w.as_bytes()).collect();
        let reply = engine.execute(&mut s, &args);
        assert!(!matches!(reply, Reply::Error(_)), "{words:?}: {reply:?}");
    }
    let keyspace = engine.keyspace();
    let mut keys = Vec::new();
    for db in 0..keyspace.db_count() {
        for (key, value) in keyspace.db(db).iter() {
            keys.push((db, key, value, keyspace.db(db).expire_at(key)));
        }
    }
    encode_file(&Encoder::default(), 1_700_000_000_000, keys)
}

/// Positions to damage: every byte of files up to 4 KiB, else 2000: the
/// first and last 128 bytes (header, AUX fields, EOF, CRC) and 1744
/// spread evenly between them.
fn positions(len: usize) -> Vec<usize> {
    if len <= 4096 {
        return (0..len).collect();
    }
    let middle = len - 256;
    let p: Vec<usize> = (0..128)
        .chain((0..1744).map(|i| 128 + i * middle / 1744))
        .chain(len - 128..len)
        .collect();
    debug_assert!(p.windows(2).all(|w| w[0] < w[1]), "distinct positions");
    p
}

/// Heap a read of `len` bytes may hold at once: LZF strings legitimately
/// expand (up to about 100-fold); beyond that, values cost a small
/// multiple of their bytes.
fn heap_bound(len: usize) -> usize {
    256 * len + (4 << 20)
}

/// Runs `check` on every file, one thread per file; returns the failures.
fn for_every_file(check: fn(&str, &[u8]) -> Vec<String>) -> Vec<String> {
    let handles: Vec<_> = all_files()
        .into_iter()
        .map(|(name, data)| std::thread::spawn(move || check(&name, &data)))
        .collect();
    handles
        .into_iter()
        .flat_map(|h| {
            h.join()
                .unwrap_or_else(|_| vec!["a checker panicked".into()])
        })
        .collect()
}

fn assert_no_failures(failures: &[String]) {
    assert!(
        failures.is_empty(),
        "{} failures, the first ones:\n{}",
        failures.len(),
        failures
            .iter()
            .take(20)
            .cloned()
            .collect::<Vec<_>>()
            .join("\n")
    );
}

/// Whether the intact file carries a verified CRC.
fn has_crc(data: &[u8]) -> bool {
    matches!(load(data), Outcome::Loaded(s) if s.checksum == Some(Checksum::Verified) && s.len == data.len())
}

#[test]
fn fixtures_and_hozon_files_load_intact() {
    // The damage tests below only mean something if the intact files load.
    let files = all_files();
    assert!(
        files.len() >= 3,
        "no fixtures found in {:?}",
        fixtures_dir()
    );
    for (name, data) in &files {
        match load(data) {
            Outcome::Loaded(s) => assert_eq!(s.len, data.len(), "{name}: bytes after the CRC"),
            other => panic!("{name} does not load intact: {other:?}"),
        }
    }
}

#[test]
fn truncation_at_every_offset_fails_without_panicking() {
    fn check(name: &str, data: &[u8]) -> Vec<String> {
        let mut failures = Vec::new();
        for cut in 0..data.len() {
            let prefix = &data[..cut];
            let (outcome, peak) = peak_heap(|| load(prefix));
            match outcome {
                Outcome::Failed(_) => {}
                Outcome::Loaded(s) => {
                    failures.push(format!("{name}: cut at {cut}: loaded ({} keys)", s.keys))
                }
                Outcome::Panicked(p) => failures.push(format!("{name}: cut at {cut}: panic {p}")),
            }
            if peak > heap_bound(cut) {
                failures.push(format!("{name}: cut at {cut}: {peak} heap bytes"));
            }
            match scan(prefix) {
                Ok(Err(_)) => {}
                Ok(Ok(_)) => failures.push(format!("{name}: cut at {cut}: scan succeeded")),
                Err(p) => failures.push(format!("{name}: cut at {cut}: scan panicked: {p}")),
            }
        }
        failures
    }
    assert_no_failures(&for_every_file(check));
}

/// `check_keys` (the inspector's checking walk) on `data`: the offset it
/// fails at, or None; panics caught. `check_file` (the same walk without
/// a visitor) must agree with it exactly: error, or summary.
fn check_walk(data: &[u8]) -> Result<Option<u64>, String> {
    catch_unwind(AssertUnwindSafe(|| {
        let walked = reader::check_keys(data, &options(), &mut |_| {
            std::ops::ControlFlow::Continue(())
        });
        let mut checked = reader::check_file(data, &options());
        if let (Ok(a), Ok(b)) = (&walked, &mut checked) {
            b.scanned_at_ms = a.scanned_at_ms;
        }
        assert_eq!(
            format!("{walked:?}"),
            format!("{checked:?}"),
            "check_file disagrees with check_keys"
        );
        walked.err().map(|e| e.offset)
    }))
    .map_err(panic_text)
}

/// The CRC of `data` recomputed (a file of version 5 or later that ends
/// with EOF and a CRC), so that damage inside it reaches the decoders.
fn fixed_crc(mut data: Vec<u8>) -> Vec<u8> {
    if has_crc(&data) && data.len() >= 18 && data[data.len() - 9] == 0xFF {
        let body = data.len() - 8;
        let sum = hozon::rdb::crc64(&data[..body]);
        data[body..].copy_from_slice(&sum.to_le_bytes());
    }
    data
}

#[test]
fn the_checking_walk_fails_exactly_where_the_loader_fails() {
    // One rule (issue 32): what `hozon-inspect info` checks is what a load
    // checks. Every cut, and every bit flip (with the CRC recomputed so
    // the flip is judged by the decoders, not the checksum), of every
    // file: the checking walk and `load` fail or pass together, at the
    // same offset.
    fn check(name: &str, data: &[u8]) -> Vec<String> {
        let mut failures = Vec::new();
        let mut judge = |what: String, bad: &[u8]| {
            let loaded = match load(bad) {
                Outcome::Loaded(_) => None,
                Outcome::Failed(e) => Some(e.offset),
                Outcome::Panicked(p) => {
                    failures.push(format!("{what}: load panicked: {p}"));
                    return;
                }
            };
            match check_walk(bad) {
                Ok(checked) if checked == loaded => {}
                Ok(checked) => failures.push(format!(
                    "{what}: check_keys says {checked:?}, load {loaded:?}"
                )),
                Err(p) => failures.push(format!("{what}: check_keys panicked: {p}")),
            }
        };
        for cut in 0..data.len() {
            judge(format!("{name}: cut at {cut}"), &data[..cut]);
        }
        for at in positions(data.len()) {
            for bit in [0, 3, 6] {
                let mut bad = data.to_vec();
                bad[at] ^= 1 << bit;
                judge(format!("{name}: bit {bit} of byte {at}"), &fixed_crc(bad));
            }
        }
        judge(format!("{name}: intact"), data);
        failures
    }
    let mut failures = for_every_file(check);
    for (what, file, _) in hostile_files() {
        let loaded = match load(&file) {
            Outcome::Failed(e) => Some(e.offset),
            _ => None,
        };
        if check_walk(&file) != Ok(loaded) {
            failures.push(format!(
                "hostile {what}: {:?} vs {loaded:?}",
                check_walk(&file)
            ));
        }
    }
    assert_no_failures(&failures);
}

#[test]
fn every_bit_flip_is_caught_by_the_crc_and_never_panics() {
    fn check(name: &str, data: &[u8]) -> Vec<String> {
        let crc = has_crc(data);
        let mut failures = Vec::new();
        let mut copy = data.to_vec();
        for pos in positions(data.len()) {
            for bit in 0..8 {
                copy[pos] ^= 1 << bit;
                let (outcome, peak) = peak_heap(|| load(&copy));
                match outcome {
                    Outcome::Panicked(p) => {
                        failures.push(format!("{name}: bit {bit} of byte {pos}: panic {p}"))
                    }
                    // A flipped version digit can turn a CRC file into a
                    // version without CRC (< 5): the reader then stops at
                    // EOF and the 8 CRC bytes are left over, which the
                    // engine refuses ("bytes follow its checksum").
                    Outcome::Loaded(s) if crc && s.len == copy.len() => failures.push(format!(
                        "{name}: bit {bit} of byte {pos}: loaded ({} keys, checksum {:?}, {} of {} bytes)",
                        s.keys,
                        s.checksum,
                        s.len,
                        copy.len()
                    )),
                    _ => {}
                }
                if peak > heap_bound(data.len()) {
                    failures.push(format!(
                        "{name}: bit {bit} of byte {pos}: {peak} heap bytes"
                    ));
                }
                match scan(&copy) {
                    Err(p) => failures.push(format!(
                        "{name}: bit {bit} of byte {pos}: scan panicked: {p}"
                    )),
                    Ok(Ok(len)) if crc && len == copy.len() => failures.push(format!(
                        "{name}: bit {bit} of byte {pos}: scan succeeded ({len} bytes)"
                    )),
                    _ => {}
                }
                copy[pos] ^= 1 << bit;
            }
        }
        failures
    }
    assert_no_failures(&for_every_file(check));
}

// ---------------------------------------------------------------------------
// Hand-made hostile files.

/// Runs `f` on its own thread and waits at most `limit`; returns its
/// result and peak heap, or None on timeout.
fn bounded<R: Send + 'static>(
    limit: Duration,
    f: impl FnOnce() -> R + Send + 'static,
) -> Option<(R, usize)> {
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(peak_heap(f));
    });
    rx.recv_timeout(limit).ok()
}

#[test]
fn absurd_lengths_fail_at_once_without_allocating() {
    let mut failures = Vec::new();
    for (what, file, loads) in hostile_files() {
        let data = file.clone();
        let started = Instant::now();
        let Some((outcome, peak)) = bounded(Duration::from_secs(1), move || load(&data)) else {
            failures.push(format!("{what}: load still running after 1 s"));
            continue;
        };
        let elapsed = started.elapsed();
        match (&outcome, loads) {
            (Outcome::Failed(_), false) | (Outcome::Loaded(_), true) => {}
            _ => failures.push(format!("{what}: {outcome:?}")),
        }
        if peak > 1 << 20 {
            failures.push(format!("{what}: load held {peak} heap bytes"));
        }
        let data = file.clone();
        match bounded(Duration::from_secs(1), move || scan(&data)) {
            None => failures.push(format!("{what}: scan still running after 1 s")),
            Some((Err(p), _)) => failures.push(format!("{what}: scan panicked: {p}")),
            Some((Ok(result), peak)) => {
                // scan does not walk compact encodings or check database
                // numbers: only the lengths it reads must fail.
                if peak > 1 << 20 {
                    failures.push(format!("{what}: scan held {peak} heap bytes"));
                }
                if result.is_ok() && !loads && !scan_skips(what) {
                    failures.push(format!("{what}: scan succeeded"));
                }
            }
        }
        assert!(elapsed < Duration::from_secs(2), "{what}: {elapsed:?}");
    }
    assert_no_failures(&failures);
}

/// Damage `scan` cannot see: it skips compact encodings (listpacks,
/// ziplists, intsets, zipmaps, stream nodes) and LZF data as opaque
/// strings (so an LZF length is not checked against its data), and does
/// not know how many databases there are.
fn scan_skips(what: &str) -> bool {
    [
        "intset",
        "listpack",
        "ziplist",
        "zipmap",
        "SELECTDB",
        "stream node",
        "stream entry",
        "LZF",
    ]
    .iter()
    .any(|w| what.contains(w))
}

/// DUMP payload bodies (RESTORE's `decode_value`) with absurd counts.
#[test]
fn restore_payload_bodies_with_absurd_counts_fail_at_once() {
    let huge = len64(1 << 60);
    let cases: Vec<(u8, Vec<u8>)> = vec![
        (0, cat(&[&len64(1 << 40), b"ab"])),
        (1, cat(&[&huge, &string(b"a")])),
        (2, cat(&[&huge, &string(b"a")])),
        (4, cat(&[&huge, &string(b"a"), &string(b"b")])),
        (5, cat(&[&huge, &string(b"a"), &[0; 8]])),
        (18, cat(&[&huge, &[2], &string(b"a")])),
        (19, cat(&[&len64(1 << 40), &string(&[0; 16])])),
        (0, cat(&[&[0xC3, 4], &len64(1 << 40), b"\x01ab\x00"])),
    ];
    for (value_type, body) in cases {
        let shown = format!("type {value_type}, body {body:02x?}");
        let result = bounded(Duration::from_secs(1), move || {
            catch_unwind(AssertUnwindSafe(|| {
                reader::decode_value(&body, value_type, &options()).map(|(_, n)| n)
            }))
            .map_err(panic_text)
        });
        let Some((result, peak)) = result else {
            panic!("{shown}: still running after 1 s")
        };
        assert!(matches!(result, Ok(Err(_))), "{shown}: {result:?}");
        assert!(peak < 1 << 20, "{shown}: {peak} heap bytes");
    }
}

#[test]
fn unknown_types_versions_and_magic_are_refused_by_the_library() {
    for (what, file, kind) in refused_files() {
        match load(&file) {
            Outcome::Failed(e) => assert_eq!(e.kind, kind, "{what}: {e}"),
            other => panic!("{what}: {other:?}"),
        }
    }
    // Bytes after the CRC: the library stops at the CRC (an AOF may go
    // on there) and says where; the engine refuses such a dump.rdb.
    let mut trailing = rdb_file(&record(0, &string(b"v")));
    let end = trailing.len();
    trailing.extend_from_slice(b"junk");
    match load(&trailing) {
        Outcome::Loaded(s) => assert_eq!(s.len, end),
        other => panic!("bytes after the CRC: {other:?}"),
    }
}

// ---------------------------------------------------------------------------
// Through hozon-server.

fn free_port() -> u16 {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind an ephemeral port");
    listener.local_addr().expect("local addr").port()
}

/// Starts hozon-server on `dir` with `extra` arguments and expects it to
/// exit by itself within 10 s; returns (exit code, stdout + stderr).
fn start_expecting_exit(dir: &Path, extra: &[&str]) -> (Option<i32>, String) {
    let port = free_port().to_string();
    let d = dir.to_string_lossy().into_owned();
    let mut child = Command::new(env!("CARGO_BIN_EXE_hozon-server"))
        .args(["--port", &port, "--bind", "127.0.0.1", "--dir", &d])
        .args(extra)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn hozon-server");
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        if child.try_wait().expect("wait for hozon-server").is_some() {
            break;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let out = child.wait_with_output().expect("collect output");
            panic!(
                "hozon-server started on a damaged file: {}",
                String::from_utf8_lossy(&out.stdout)
            );
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    let out = child.wait_with_output().expect("collect output");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    (out.status.code(), text)
}

/// Writes `file` as `dump.rdb` of a fresh directory, starts hozon-server
/// with `extra` and checks that it refuses to start, naming the file, and
/// leaves it as it was; returns the server's output.
fn refuses_to_start(what: &str, file: &[u8], extra: &[&str]) -> String {
    let dir = tempfile::tempdir().expect("a temp dir");
    let path = dir.path().join("dump.rdb");
    std::fs::write(&path, file).expect("write dump.rdb");
    let (code, output) = start_expecting_exit(dir.path(), extra);
    assert_eq!(code, Some(1), "{what}: exit status; output:\n{output}");
    assert!(
        output.contains(&path.display().to_string()),
        "{what}: the message does not name {}:\n{output}",
        path.display()
    );
    assert_eq!(
        std::fs::read(&path).expect("dump.rdb still there"),
        file,
        "{what}: dump.rdb was changed"
    );
    let mut names: Vec<String> = std::fs::read_dir(dir.path())
        .expect("list the dir")
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n != "LOCK")
        .collect();
    names.sort();
    assert_eq!(names, ["dump.rdb"], "{what}: files were created");
    output
}

#[test]
fn hozon_server_refuses_a_refused_dump_rdb_and_leaves_it_alone() {
    let mut cases: Vec<(String, Vec<u8>)> = refused_files()
        .into_iter()
        .map(|(what, file, _)| (what.to_string(), file))
        .collect();
    let mut trailing = rdb_file(&record(0, &string(b"v")));
    trailing.extend_from_slice(b"junk");
    cases.push(("bytes after the CRC".into(), trailing));
    let handles: Vec<_> = cases
        .into_iter()
        .map(|(what, file)| {
            std::thread::spawn(move || {
                let output = refuses_to_start(&what, &file, &["--save", "3600 1"]);
                if what == "bytes after the CRC" {
                    assert!(output.contains("follow its checksum"), "{output}");
                }
            })
        })
        .collect();
    for h in handles {
        h.join().expect("a refusal check failed (see above)");
    }
}

#[test]
fn hozon_server_refuses_a_damaged_dump_rdb_and_leaves_it_alone() {
    let original =
        std::fs::read(fixtures_dir().join("streams.rdb")).unwrap_or_else(|_| hozon_written_file());
    let mut flipped = original.clone();
    let middle = flipped.len() / 2;
    flipped[middle] ^= 0x04;
    let truncated = original[..original.len() - 20].to_vec();
    let cases = [
        ("a flipped bit", flipped, vec!["--save", "3600 1"]),
        (
            "a truncated file",
            truncated.clone(),
            vec!["--save", "3600 1"],
        ),
        // With appendonly yes and no AOF yet the dump would be loaded and
        // written out as the first AOF: refused before anything is written.
        (
            "a truncated file, appendonly yes",
            truncated,
            vec!["--appendonly", "yes", "--save", ""],
        ),
    ];
    let handles: Vec<_> = cases
        .into_iter()
        .map(|(what, file, extra)| {
            std::thread::spawn(move || {
                refuses_to_start(what, &file, &extra);
            })
        })
        .collect();
    for h in handles {
        h.join().expect("a refusal check failed (see above)");
    }
}
