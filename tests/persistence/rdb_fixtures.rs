//! RDB import against Redis: every `fixtures/rdb/*.rdb` (the directory is
//! read at run time, so new fixtures join by being there) is loaded by
//! hozon-server as the `dump.rdb` of an empty directory, and its keyspace,
//! read over the protocol, must equal what Redis 7.0 shows for the same file.
//!
//! The expectation is the fixture's `.expect` file when there is one (files
//! Redis 7.0 cannot load: RDB 11 and 12, Valkey's, module data; and the
//! hand-built legacy files), otherwise the keyspace of a redis-server that
//! loaded the file. A second test checks the `.expect` files that say
//! `# redis-7.0: loads` against Redis itself, so the model behind them
//! (fixtures/rdb/build_legacy.py) is held to Redis's behaviour.
//!
//! The canonical text form (shared with fixtures/rdb/rdbfmt.py): one line
//! per key, sorted by (db, key bytes), `<db> <key> <type> <pexpiretime>
//! <value>`; byte strings quoted, `"` and `\` backslash-escaped, bytes
//! outside 0x20..0x7e as `\xHH`; integers bare; nil as `nil`; arrays as
//! `[a b]`. Values: GET; LRANGE; SMEMBERS sorted; HGETALL as sorted
//! [field value] pairs; ZRANGE WITHSCORES; for streams [XRANGE - +, XINFO
//! STREAM key FULL COUNT 0, XINFO GROUPS key]. Then, when FUNCTION LIST
//! WITHCODE has libraries, a `functions` line (libraries and their functions
//! sorted).

use std::path::{Path, PathBuf};

use crate::harness::{start_hozon, start_redis, Conn};

/// A decoded RESP2 reply.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
enum Resp {
    Bulk(Vec<u8>),
    Int(i64),
    Simple(String),
    Error(String),
    Nil,
    Array(Vec<Resp>),
}

fn decode(buf: &[u8], pos: &mut usize) -> Resp {
    let end = buf[*pos..]
        .windows(2)
        .position(|w| w == b"\r\n")
        .expect("a complete reply line")
        + *pos;
    let line = String::from_utf8_lossy(&buf[*pos + 1..end]).into_owned();
    let kind = buf[*pos];
    *pos = end + 2;
    match kind {
        b'+' => Resp::Simple(line),
        b'-' => Resp::Error(line),
        b':' => Resp::Int(line.parse().expect("integer reply")),
        b'$' => {
            let n: i64 = line.parse().expect("bulk length");
            let Ok(n) = usize::try_from(n) else {
                return Resp::Nil;
            };
            let value = buf[*pos..*pos + n].to_vec();
            *pos += n + 2;
            Resp::Bulk(value)
        }
        b'*' => {
            let n: i64 = line.parse().expect("array length");
            if n < 0 {
                return Resp::Nil;
            }
            Resp::Array((0..n).map(|_| decode(buf, pos)).collect())
        }
        other => panic!("unexpected RESP2 reply type {:?}", other as char),
    }
}

fn call(conn: &mut Conn, args: &[&[u8]]) -> Resp {
    decode(&conn.call(args), &mut 0)
}

/// A byte string in the canonical form.
fn esc(bytes: &[u8]) -> String {
    let mut out = String::with_capacity(bytes.len() + 2);
    out.push('"');
    for &b in bytes {
        match b {
            b'"' => out.push_str("\\\""),
            b'\\' => out.push_str("\\\\"),
            0x20..=0x7e => out.push(b as char),
            _ => out.push_str(&format!("\\x{b:02x}")),
        }
    }
    out.push('"');
    out
}

fn render(value: &Resp) -> String {
    match value {
        Resp::Bulk(b) => esc(b),
        Resp::Int(n) => n.to_string(),
        Resp::Simple(s) => format!("+{s}"),
        Resp::Error(e) => format!("-{e}"),
        Resp::Nil => "nil".to_string(),
        Resp::Array(items) => {
            let inner: Vec<String> = items.iter().map(render).collect();
            format!("[{}]", inner.join(" "))
        }
    }
}

/// The value of one key, as the canonical form shows it.
fn key_value(conn: &mut Conn, kind: &str, key: &[u8]) -> Resp {
    match kind {
        "string" => call(conn, &[b"GET", key]),
        "list" => call(conn, &[b"LRANGE", key, b"0", b"-1"]),
        "set" => match call(conn, &[b"SMEMBERS", key]) {
            Resp::Array(mut members) => {
                members.sort();
                Resp::Array(members)
            }
            other => other,
        },
        "hash" => match call(conn, &[b"HGETALL", key]) {
            Resp::Array(flat) => {
                let mut pairs: Vec<Resp> = flat
                    .chunks(2)
                    .map(|pair| Resp::Array(pair.to_vec()))
                    .collect();
                pairs.sort();
                Resp::Array(pairs)
            }
            other => other,
        },
        "zset" => call(conn, &[b"ZRANGE", key, b"0", b"-1", b"WITHSCORES"]),
        "stream" => Resp::Array(vec![
            call(conn, &[b"XRANGE", key, b"-", b"+"]),
            call(conn, &[b"XINFO", b"STREAM", key, b"FULL", b"COUNT", b"0"]),
            call(conn, &[b"XINFO", b"GROUPS", key]),
        ]),
        _ => Resp::Nil,
    }
}

/// FUNCTION LIST WITHCODE with libraries and each library's functions
/// sorted (both live in dicts in Redis), or None without libraries.
fn canonical_functions(reply: Resp) -> Option<Resp> {
    let Resp::Array(libraries) = reply else {
        return None;
    };
    if libraries.is_empty() {
        return None;
    }
    let mut libraries: Vec<Resp> = libraries
        .into_iter()
        .map(|library| match library {
            Resp::Array(mut fields) => {
                for i in (0..fields.len().saturating_sub(1)).step_by(2) {
                    if fields[i] == Resp::Bulk(b"functions".to_vec()) {
                        if let Resp::Array(functions) = &mut fields[i + 1] {
                            functions.sort_by_key(render);
                        }
                    }
                }
                Resp::Array(fields)
            }
            other => other,
        })
        .collect();
    libraries.sort_by_key(render);
    Some(Resp::Array(libraries))
}

/// The canonical text form of the keyspace of the server on `port`, one
/// string per line.
fn dump(port: u16) -> Vec<String> {
    let mut conn = Conn::connect(port);
    let mut keys: Vec<(u8, Vec<u8>, String)> = Vec::new();
    for db in 0..16u8 {
        call(&mut conn, &[b"SELECT", db.to_string().as_bytes()]);
        let names = match call(&mut conn, &[b"KEYS", b"*"]) {
            Resp::Array(names) => names,
            other => {
                keys.push((db, Vec::new(), format!("{db} KEYS {}", render(&other))));
                continue;
            }
        };
        for name in names {
            let Resp::Bulk(key) = name else {
                keys.push((db, Vec::new(), format!("{db} key {}", render(&name))));
                continue;
            };
            let kind = match call(&mut conn, &[b"TYPE", &key]) {
                Resp::Simple(kind) => kind,
                other => render(&other),
            };
            let value = key_value(&mut conn, &kind, &key);
            let ttl = call(&mut conn, &[b"PEXPIRETIME", &key]);
            let line = format!(
                "{db} {} {kind} {} {}",
                esc(&key),
                render(&ttl),
                render(&value)
            );
            keys.push((db, key, line));
        }
    }
    keys.sort();
    let mut lines: Vec<String> = keys.into_iter().map(|(_, _, line)| line).collect();
    call(&mut conn, &[b"SELECT", b"0"]);
    let functions = call(&mut conn, &[b"FUNCTION", b"LIST", b"WITHCODE"]);
    if let Some(functions) = canonical_functions(functions) {
        lines.push(format!("functions {}", render(&functions)));
    }
    lines
}

fn fixture_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/rdb")
}

/// Every `*.rdb` under fixtures/rdb, sorted by name.
fn fixtures() -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(fixture_dir())
        .expect("fixtures/rdb exists")
        .map(|entry| entry.expect("directory entry").path())
        .filter(|path| path.extension().is_some_and(|ext| ext == "rdb"))
        .collect();
    files.sort();
    assert!(
        files.len() >= 20,
        "expected the RDB fixtures in {}",
        fixture_dir().display()
    );
    files
}

fn name_of(fixture: &Path) -> String {
    fixture
        .file_name()
        .expect("a file name")
        .to_string_lossy()
        .into_owned()
}

/// The `.expect` file of a fixture: its header lines and its key lines.
struct Expect {
    redis_loads: bool,
    lines: Vec<String>,
}

fn read_expect(fixture: &Path) -> Option<Expect> {
    let text = std::fs::read_to_string(fixture.with_extension("expect")).ok()?;
    Some(Expect {
        redis_loads: text.lines().any(|l| l.trim() == "# redis-7.0: loads"),
        lines: text
            .lines()
            .filter(|l| !l.is_empty() && !l.starts_with('#'))
            .map(str::to_string)
            .collect(),
    })
}

/// Redis 7.0's keyspace after loading `fixture` as its dbfilename.
fn redis_dump(fixture: &Path) -> Vec<String> {
    let dir = tempfile::tempdir().expect("temp dir");
    std::fs::copy(fixture, dir.path().join("x.rdb")).expect("copy the fixture");
    let d = dir.path().to_string_lossy().into_owned();
    let redis = start_redis(&["--dir", &d, "--dbfilename", "x.rdb"]);
    dump(redis.port)
}

/// hozon's keyspace after importing `fixture` as the `dump.rdb` of an
/// otherwise empty directory.
fn hozon_dump(fixture: &Path) -> Vec<String> {
    let dir = tempfile::tempdir().expect("temp dir");
    std::fs::copy(fixture, dir.path().join("dump.rdb")).expect("copy the fixture");
    let d = dir.path().to_string_lossy().into_owned();
    let hozon = start_hozon(&["--save", "3600 1", "--dir", &d]);
    dump(hozon.port)
}

/// Why hozon-server would not start on `fixture`: its last log lines
/// (the harness discards a server's output).
fn hozon_startup_log(fixture: &Path) -> String {
    let dir = tempfile::tempdir().expect("temp dir");
    std::fs::copy(fixture, dir.path().join("dump.rdb")).expect("copy the fixture");
    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_hozon-server"))
        .args([
            "--port",
            "0",
            "--save",
            "3600 1",
            "--appendonly",
            "no",
            "--dir",
        ])
        .arg(dir.path())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("spawn hozon-server");
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
    while child.try_wait().expect("poll hozon-server").is_none() {
        if std::time::Instant::now() > deadline {
            let _ = child.kill();
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    let output = child.wait_with_output().expect("hozon-server output");
    let text = String::from_utf8_lossy(&[output.stdout, output.stderr].concat()).into_owned();
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(2)..].join("\n    ")
}

/// None when equal, else a description of the first differences: a key
/// whose value differs is shown around the first differing character.
fn difference(name: &str, what: &str, expected: &[String], got: &[String]) -> Option<String> {
    if expected == got {
        return None;
    }
    let mut out = format!(
        "{name}: {what} ({} lines expected, {} found)",
        expected.len(),
        got.len()
    );
    // "<db> <key> " identifies a key's line (keys are escaped: no spaces).
    let key_of =
        |line: &str| -> String { line.splitn(3, ' ').take(2).collect::<Vec<_>>().join(" ") };
    for line in expected.iter().filter(|l| !got.contains(l)).take(4) {
        match got.iter().find(|g| key_of(g) == key_of(line)) {
            Some(other) => {
                let at = line
                    .bytes()
                    .zip(other.bytes())
                    .position(|(a, b)| a != b)
                    .unwrap_or(line.len().min(other.len()));
                out.push_str(&format!(
                    "\n    {} differs at char {at}:\n      expected: ...{}\n      found:    ...{}",
                    key_of(line),
                    window(line, at),
                    window(other, at)
                ));
            }
            None => out.push_str(&format!("\n    missing:  {}", clip(line))),
        }
    }
    for line in got
        .iter()
        .filter(|g| !expected.iter().any(|e| key_of(e) == key_of(g)))
        .take(4)
    {
        out.push_str(&format!("\n    extra:    {}", clip(line)));
    }
    Some(out)
}

/// Up to 100 characters of `line` before and 200 after byte `at`.
fn window(line: &str, at: usize) -> String {
    let mut start = at.saturating_sub(100);
    while !line.is_char_boundary(start) {
        start -= 1;
    }
    let mut end = (at + 200).min(line.len());
    while !line.is_char_boundary(end) {
        end += 1;
    }
    line[start..end].to_string()
}

fn clip(line: &str) -> String {
    if line.len() <= 600 {
        return line.to_string();
    }
    let mut end = 600;
    while !line.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}... ({} chars)", &line[..end], line.len())
}

/// Runs `check` on every fixture, a few at a time, and fails with every
/// fixture's problem (a panic inside a check counts as one).
fn check_all(fixtures: &[PathBuf], check: fn(&Path) -> Option<String>) {
    let mut failures = Vec::new();
    for chunk in fixtures.chunks(8) {
        std::thread::scope(|scope| {
            let handles: Vec<_> = chunk
                .iter()
                .map(|fixture| (fixture, scope.spawn(move || check(fixture))))
                .collect();
            for (fixture, handle) in handles {
                match handle.join() {
                    Ok(None) => {}
                    Ok(Some(problem)) => failures.push(problem),
                    Err(panic) => {
                        let message = panic
                            .downcast_ref::<String>()
                            .cloned()
                            .or_else(|| panic.downcast_ref::<&str>().map(|s| s.to_string()))
                            .unwrap_or_default();
                        failures.push(format!("{}: panicked: {message}", name_of(fixture)));
                    }
                }
            }
        });
    }
    assert!(
        failures.is_empty(),
        "{} of {} fixtures failed:\n{}",
        failures.len(),
        fixtures.len(),
        failures.join("\n")
    );
}

#[test]
fn hozon_imports_every_rdb_fixture_into_the_keyspace_redis_shows() {
    check_all(&fixtures(), |fixture| {
        let name = name_of(fixture);
        // The function libraries too (their `functions` line).
        let (expected, source) = match read_expect(fixture) {
            Some(expect) => (expect.lines, "its .expect"),
            None => (redis_dump(fixture), "Redis 7.0's load"),
        };
        let started = std::panic::catch_unwind(|| hozon_dump(fixture));
        let Ok(got) = started else {
            return Some(format!(
                "{name}: hozon-server failed (panic above); started alone on it, it logs:\n    {}",
                hozon_startup_log(fixture)
            ));
        };
        difference(
            &name,
            &format!("hozon's import differs from {source}"),
            &expected,
            &got,
        )
    });
}

#[test]
fn redis_loads_the_legacy_fixtures_into_their_expect_keyspace() {
    let loadable: Vec<PathBuf> = fixtures()
        .into_iter()
        .filter(|f| read_expect(f).is_some_and(|e| e.redis_loads))
        .collect();
    assert!(
        loadable.len() >= 6,
        "expected the legacy fixtures that Redis 7.0 loads"
    );
    check_all(&loadable, |fixture| {
        let expect = read_expect(fixture).expect("filtered on its .expect");
        difference(
            &name_of(fixture),
            "Redis 7.0's load differs from the .expect (rerun fixtures/rdb/build_legacy.py)",
            &expect.lines,
            &redis_dump(fixture),
        )
    });
}
