//! The startup rule (docs/persistence.md, "Startup"), one table over every
//! combination: `appendonly` yes/no × save points set/empty ×
//! `snapshot-format` native/rdb × the files in the data directory (none,
//! hozon's AOF, dump.hoz, dump.rdb, a Redis 7 `appendonlydir/`, an AOF and a
//! snapshot together, a damaged one of each) → which file is loaded, with
//! its log line, or the refusal. For the combinations Redis has (no
//! dump.hoz, no snapshot-format), the same directory is given to a real
//! redis-server, whose result must be the one the table states for Redis.

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use hozon::config::{AppendFsync, SavePoint, SnapshotFormat};
use hozon::{Config, Engine};

use crate::common::run;
use crate::harness::{redis_server_path, Conn};

/// A data file a case puts in the directory; each holds one key named
/// after it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum File {
    /// hozon's `appendonly.aof` (key `from_aof`).
    Aof,
    /// `dump.hoz` (key `from_hoz`).
    Hoz,
    /// `dump.rdb`, written by hozon in Redis's format (key `from_rdb`).
    Rdb,
    /// A Redis 7 multi-part AOF written by redis-server (key `from_redis_aof`).
    RedisAofDir,
}

impl File {
    fn key(self) -> &'static str {
        match self {
            File::Aof => "from_aof",
            File::Hoz => "from_hoz",
            File::Rdb => "from_rdb",
            File::RedisAofDir => "from_redis_aof",
        }
    }

    /// The path a log line or refusal names.
    fn name(self) -> &'static str {
        match self {
            File::Aof => "appendonly.aof",
            File::Hoz => "dump.hoz",
            File::Rdb => "dump.rdb",
            File::RedisAofDir => "appendonlydir",
        }
    }
}

/// What starting on a directory does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Outcome {
    /// Loads this file (its key is there, nothing else).
    Loads(File),
    /// Starts with no keys.
    Empty,
    /// Refuses to start, naming this (damaged) file.
    Refuses(File),
}

/// The files present, each intact or damaged.
type Files = &'static [(File, bool)];

const FILE_SETS: &[Files] = &[
    &[],
    &[(File::Aof, false)],
    &[(File::Hoz, false)],
    &[(File::Rdb, false)],
    &[(File::RedisAofDir, false)],
    &[(File::Aof, false), (File::Hoz, false)],
    &[(File::Aof, false), (File::Rdb, false)],
    &[(File::Hoz, false), (File::Rdb, false)],
    &[(File::RedisAofDir, false), (File::Rdb, false)],
    &[(File::Aof, true)],
    &[(File::Hoz, true)],
    &[(File::Rdb, true)],
    &[(File::RedisAofDir, true)],
    &[(File::Aof, true), (File::Rdb, false)],
    &[(File::Aof, false), (File::Rdb, true)],
];

/// hozon's rule: with appendonly yes the AOF, else a Redis AOF directory
/// to import; then (and with appendonly no) the snapshot SAVE would write,
/// then the other; damage in the file chosen refuses the start.
fn hozon_expects(appendonly: bool, format: SnapshotFormat, files: Files) -> Outcome {
    let present = |f: File| files.iter().find(|(g, _)| *g == f).map(|(_, d)| *d);
    let pick = |f: File, damaged: bool| {
        if damaged {
            Outcome::Refuses(f)
        } else {
            Outcome::Loads(f)
        }
    };
    let mut order = Vec::new();
    if appendonly {
        order.extend([File::Aof, File::RedisAofDir]);
    }
    match format {
        SnapshotFormat::Native => order.extend([File::Hoz, File::Rdb]),
        SnapshotFormat::Rdb => order.extend([File::Rdb, File::Hoz]),
    }
    order
        .into_iter()
        .find_map(|f| present(f).map(|damaged| pick(f, damaged)))
        .unwrap_or(Outcome::Empty)
}

/// Redis 7.0's rule, where it differs: with appendonly yes only the AOF
/// (an `appendonlydir/`, or a plain `appendonly.aof` it upgrades) is read,
/// so a lone dump.rdb is ignored and the server starts empty (hozon loads
/// it and writes its first AOF from it).
fn redis_expects(appendonly: bool, files: Files) -> Outcome {
    let present = |f: File| files.iter().find(|(g, _)| *g == f).map(|(_, d)| *d);
    let order: &[File] = if appendonly {
        &[File::RedisAofDir, File::Aof]
    } else {
        &[File::Rdb]
    };
    order
        .iter()
        .find_map(|&f| {
            present(f).map(|damaged| {
                if damaged {
                    Outcome::Refuses(f)
                } else {
                    Outcome::Loads(f)
                }
            })
        })
        .unwrap_or(Outcome::Empty)
}

/// One intact copy of every kind of file, made once.
struct Templates {
    dir: tempfile::TempDir,
}

fn engine_config(dir: &Path) -> Config {
    let mut config = Config::in_memory();
    config.dir = dir.to_path_buf();
    config
}

impl Templates {
    fn make() -> Templates {
        let dir = tempfile::tempdir().expect("temp dir");
        // hozon's AOF.
        let aof = dir.path().join("aof");
        std::fs::create_dir(&aof).unwrap();
        let mut config = engine_config(&aof);
        config.appendonly = true;
        config.appendfsync = AppendFsync::Always;
        let mut engine = Engine::open(config).expect("open");
        let mut s = engine.new_session();
        // Two batches: damage in the first is corruption, not a torn tail.
        run(&mut engine, &mut s, &["SET", File::Aof.key(), "v"]);
        run(&mut engine, &mut s, &["SET", File::Aof.key(), "v"]);
        drop(engine);
        // The snapshots.
        for (sub, file, format) in [
            ("hoz", File::Hoz, SnapshotFormat::Native),
            ("rdb", File::Rdb, SnapshotFormat::Rdb),
        ] {
            let path = dir.path().join(sub);
            std::fs::create_dir(&path).unwrap();
            let mut config = engine_config(&path);
            config.snapshot_format = format;
            let mut engine = Engine::open(config).expect("open");
            let mut s = engine.new_session();
            run(&mut engine, &mut s, &["SET", file.key(), "v"]);
            assert_eq!(run(&mut engine, &mut s, &["SAVE"]), hozon::Reply::ok());
        }
        // A Redis 7 multi-part AOF, written by redis-server itself.
        let redis = dir.path().join("redis");
        std::fs::create_dir(&redis).unwrap();
        let mut server = RedisRun::start(&redis, &["--appendonly", "yes", "--save", ""]);
        let conn = server
            .conn
            .as_mut()
            .expect("redis-server starts on an empty directory");
        for _ in 0..2 {
            conn.call(&[b"SET", File::RedisAofDir.key().as_bytes(), b"v"]);
        }
        drop(server);
        Templates { dir }
    }

    /// Puts `file` (damaged when asked) into `target`.
    fn place(&self, file: File, damaged: bool, target: &Path) {
        let t = self.dir.path();
        match file {
            File::Aof => copy_damaged(
                &t.join("aof/appendonly.aof"),
                &target.join("appendonly.aof"),
                damaged,
            ),
            File::Hoz => copy_damaged(&t.join("hoz/dump.hoz"), &target.join("dump.hoz"), damaged),
            File::Rdb => copy_damaged(&t.join("rdb/dump.rdb"), &target.join("dump.rdb"), damaged),
            File::RedisAofDir => {
                let from = t.join("redis/appendonlydir");
                let to = target.join("appendonlydir");
                std::fs::create_dir(&to).unwrap();
                for entry in std::fs::read_dir(&from).unwrap() {
                    let entry = entry.unwrap();
                    let name = entry.file_name().to_string_lossy().into_owned();
                    // Damage the incr file: a command cut in the middle of
                    // the file, followed by another command.
                    let incr = name.contains(".incr.");
                    copy_damaged(&entry.path(), &to.join(&name), damaged && incr);
                }
            }
        }
    }
}

/// Copies a file; damaged: a byte in the middle of its data is changed
/// (so every reader's checksum or parser sees it, and none can call it a
/// torn tail).
fn copy_damaged(from: &Path, to: &Path, damaged: bool) {
    let mut data = std::fs::read(from).unwrap_or_else(|e| panic!("{}: {e}", from.display()));
    if damaged {
        let key_at = data
            .windows(5)
            .position(|w| w == b"from_")
            .unwrap_or_else(|| panic!("no key in {}", from.display()));
        data[key_at] ^= 0x20;
        data[key_at - 3] = b'X'; // the bulk length's digits
    }
    std::fs::write(to, data).unwrap();
}

/// redis-server on a directory: its connection, or None when it refused
/// to start.
struct RedisRun {
    child: std::process::Child,
    conn: Option<Conn>,
}

impl RedisRun {
    fn start(dir: &Path, args: &[&str]) -> RedisRun {
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let mut child = Command::new(redis_server_path())
            .args(["--port", &port.to_string(), "--bind", "127.0.0.1"])
            .args(["--daemonize", "no", "--dir", &dir.to_string_lossy()])
            .args(args)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("spawn redis-server");
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            if let Ok(Some(_)) = child.try_wait() {
                return RedisRun { child, conn: None };
            }
            // Redis listens while it loads (-LOADING) and exits when the
            // load fails: ready means PING answers anything else.
            if let Ok(mut stream) = std::net::TcpStream::connect(("127.0.0.1", port)) {
                use std::io::{Read, Write};
                let _ = stream.set_read_timeout(Some(Duration::from_secs(5)));
                let mut reply = [0u8; 64];
                let answered = stream.write_all(b"*1\r\n$4\r\nPING\r\n").is_ok()
                    && stream
                        .read(&mut reply)
                        .is_ok_and(|n| n > 0 && !reply[..n].starts_with(b"-LOADING"));
                if answered {
                    return RedisRun {
                        child,
                        conn: Some(Conn::connect(port)),
                    };
                }
            }
            assert!(Instant::now() < deadline, "redis-server did not start");
            std::thread::sleep(Duration::from_millis(5));
        }
    }
}

impl Drop for RedisRun {
    fn drop(&mut self) {
        if let Some(conn) = self.conn.as_mut() {
            conn.send_raw(&crate::harness::encode_command(&[b"SHUTDOWN", b"NOSAVE"]));
        }
        let deadline = Instant::now() + Duration::from_secs(5);
        while !matches!(self.child.try_wait(), Ok(Some(_))) && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(5));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn keys_of(reply: &[u8]) -> Vec<String> {
    let mut keys: Vec<String> = crate::harness::array_elements(reply)
        .into_iter()
        .map(|frame| {
            // `$<len>\r\n<key>\r\n`
            let text = String::from_utf8_lossy(&frame).into_owned();
            let body = text.split_once("\r\n").map_or("", |(_, rest)| rest);
            body.trim_end_matches("\r\n").to_string()
        })
        .collect();
    keys.sort();
    keys
}

fn expected_keys(outcome: Outcome) -> Vec<String> {
    match outcome {
        Outcome::Loads(f) => vec![f.key().to_string()],
        _ => Vec::new(),
    }
}

#[test]
fn startup_loads_what_the_rule_says_for_every_combination() {
    let templates = Templates::make();
    let (mut checked, mut against_redis) = (0, 0);
    for appendonly in [true, false] {
        for save_points in [true, false] {
            for format in [SnapshotFormat::Native, SnapshotFormat::Rdb] {
                for &files in FILE_SETS {
                    let case = format!(
                        "appendonly {appendonly}, save points {save_points}, {format:?}, files {files:?}"
                    );
                    let dir = tempfile::tempdir().unwrap();
                    for &(file, damaged) in files {
                        templates.place(file, damaged, dir.path());
                    }
                    let mut config = engine_config(dir.path());
                    config.appendonly = appendonly;
                    config.snapshot_format = format;
                    if save_points {
                        config.save = vec![SavePoint {
                            seconds: 3600,
                            changes: 1,
                        }];
                    }
                    let expected = hozon_expects(appendonly, format, files);
                    match (Engine::open(config), expected) {
                        (Ok(mut engine), Outcome::Loads(_) | Outcome::Empty) => {
                            let notices = engine.take_notices().join("\n");
                            let mut s = engine.new_session();
                            let keys = run(&mut engine, &mut s, &["KEYS", "*"]);
                            let mut keys: Vec<String> = match keys {
                                hozon::Reply::Array(items) => items
                                    .into_iter()
                                    .map(|k| match k {
                                        hozon::Reply::Bulk(b) => String::from_utf8(b).unwrap(),
                                        other => panic!("{other:?}"),
                                    })
                                    .collect(),
                                other => panic!("{case}: KEYS: {other:?}"),
                            };
                            keys.sort();
                            assert_eq!(
                                keys,
                                expected_keys(expected),
                                "{case}: loaded keys\n{notices}"
                            );
                            // The log says what was loaded, from which
                            // file, how many keys, how long it took.
                            let line = match expected {
                                Outcome::Loads(f) => notices.lines().find(|l| {
                                    l.contains(f.name())
                                        && l.contains("1 keys")
                                        && l.contains("seconds")
                                }),
                                _ => notices.lines().find(|l| l.contains("starting with 0 keys")),
                            };
                            assert!(
                                line.is_some(),
                                "{case}: no log line for {expected:?} in\n{notices}"
                            );
                            if !appendonly
                                && files
                                    .iter()
                                    .any(|(f, _)| matches!(f, File::Aof | File::RedisAofDir))
                            {
                                assert!(
                                    notices.contains("was not loaded because appendonly is no"),
                                    "{case}: an unread AOF is not mentioned:\n{notices}"
                                );
                            }
                        }
                        (Err(e), Outcome::Refuses(f)) => {
                            let text = e.to_string();
                            assert!(
                                text.contains(f.name()),
                                "{case}: the refusal does not name {}: {text}",
                                f.name()
                            );
                        }
                        (Ok(_), expected) => panic!("{case}: started, expected {expected:?}"),
                        (Err(e), expected) => {
                            panic!("{case}: refused ({e}), expected {expected:?}")
                        }
                    }
                    // Redis, where it has the combination.
                    let redis_has = format == SnapshotFormat::Rdb
                        && !files.iter().any(|(f, _)| *f == File::Hoz);
                    if redis_has {
                        let redis_dir = tempfile::tempdir().unwrap();
                        for &(file, damaged) in files {
                            templates.place(file, damaged, redis_dir.path());
                        }
                        let save = if save_points { "3600 1" } else { "" };
                        let appendonly_arg = if appendonly { "yes" } else { "no" };
                        let mut redis = RedisRun::start(
                            redis_dir.path(),
                            &["--appendonly", appendonly_arg, "--save", save],
                        );
                        let got = match redis.conn.as_mut() {
                            None => "refused".to_string(),
                            Some(conn) => format!("{:?}", keys_of(&conn.call(&[b"KEYS", b"*"]))),
                        };
                        let want = match redis_expects(appendonly, files) {
                            Outcome::Refuses(_) => "refused".to_string(),
                            other => format!("{:?}", expected_keys(other)),
                        };
                        assert_eq!(got, want, "{case}: redis-server");
                        against_redis += 1;
                    }
                    checked += 1;
                }
            }
        }
    }
    eprintln!("{checked} combinations checked, {against_redis} of them against redis-server");
    assert!(
        against_redis >= 40,
        "too few combinations checked against redis-server"
    );
}

/// The reproduction: `appendonly no`, `save ""`, SAVE, a crash,
/// a restart with the same flags: the snapshot is loaded, not ignored.
#[test]
fn a_cache_with_a_saved_snapshot_restarts_with_it() {
    let dir = tempfile::tempdir().unwrap();
    {
        let mut engine = Engine::open(engine_config(dir.path())).expect("open");
        let mut s = engine.new_session();
        run(&mut engine, &mut s, &["SET", "k", "v"]);
        assert_eq!(run(&mut engine, &mut s, &["SAVE"]), hozon::Reply::ok());
        std::mem::forget(engine); // a crash: nothing runs at exit
    }
    let mut engine = Engine::open(engine_config(dir.path())).expect("reopen");
    let mut s = engine.new_session();
    assert_eq!(
        run(&mut engine, &mut s, &["GET", "k"]),
        hozon::Reply::Bulk(b"v".to_vec())
    );
}

/// `Config::in_memory()` has no data directory: it reads nothing (not even
/// a `dump.hoz` in the working directory) and SAVE fails (Redis's bare
/// `ERR`; the log line says there is no data directory).
#[test]
fn an_in_memory_engine_reads_and_writes_no_file() {
    let mut engine = Engine::open(Config::in_memory()).expect("open");
    let notices = engine.take_notices().join("\n");
    assert!(notices.contains("No data directory"), "{notices}");
    let mut s = engine.new_session();
    assert!(
        run(&mut engine, &mut s, &["SAVE"]).is_error(),
        "SAVE without a data directory"
    );
}
