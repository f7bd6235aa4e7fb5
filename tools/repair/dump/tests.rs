//! Unit tests of the dump analysis and plans: every damage kind found at
//! its offset, salvaged dumps loaded by the engine.

use std::collections::BTreeSet;
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use hozon::keyspace::Keyspace;
use hozon::rand::Rng;
use hozon::types::list::{End, List};
use hozon::types::{Blob, Value};

use super::*;

type KeySet = BTreeSet<DbKey>;

/// Far in the future: nothing the tests write expires while they run.
const LATER_MS: i64 = 4_000_000_000_000;

/// A dump.hoz of known keys in small blocks, with a list split across
/// several blocks: the file and, per key, the blocks its records lie in.
struct HozFixture {
    data: Vec<u8>,
    summary: snapshot::Summary,
    spans: Vec<(DbKey, (u32, u32))>,
}

/// (database, key).
type DbKey = (usize, Vec<u8>);

fn hoz_fixture(dir: &Path) -> HozFixture {
    let mut ks = Keyspace::new(16);
    for i in 0..300u32 {
        let db = (i % 3) as usize;
        let key = format!("key:{i:04}");
        let value = format!("{i}-{}", "v".repeat(150 + (i as usize * 7) % 90));
        ks.db_mut(db)
            .insert_new(key.as_bytes(), Value::Str(Blob::from(value.as_bytes())));
        if i % 5 == 0 {
            ks.db_mut(db)
                .set_expire(key.as_bytes(), LATER_MS + i64::from(i));
        }
    }
    let list: List = (0..600u32).map(|i| format!("element-{i:05}")).collect();
    ks.db_mut(1)
        .insert_new(b"big-list", Value::List(Box::new(list)));
    let path = dir.join("fixture.hoz");
    let io: Arc<dyn Io> = Arc::new(RealIo);
    let mut writer =
        FileWriter::create(io, &path, HeaderInfo::new(1_700_000_000_000, 16)).expect("create");
    let mut builder = BlockBuilder::with_block_size(4096);
    for db in 0..ks.db_count() {
        let d = ks.db(db);
        for (key, value) in d.iter() {
            for block in builder.push(db, key, value, d.expire_at(key)) {
                let buf = writer.write_block(block).expect("write");
                builder.recycle(buf);
            }
        }
    }
    if let Some(block) = builder.finish() {
        writer.write_block(block).expect("write");
    }
    writer.finish(builder.stats()).expect("finish");
    let data = std::fs::read(&path).expect("read");
    let mut spans = Vec::new();
    let summary = snapshot::scan_keys(&data, &snapshot::ReadOptions::default(), &mut |k| {
        spans.push((
            (k.db, k.key.to_vec()),
            (k.block, k.block + k.parts.saturating_sub(1)),
        ));
        std::ops::ControlFlow::Continue(())
    })
    .expect("an intact fixture");
    assert!(
        summary.blocks.len() >= 10,
        "{} blocks",
        summary.blocks.len()
    );
    assert!(spans.iter().any(|(_, (a, b))| b > a), "a split value");
    HozFixture {
        data,
        summary,
        spans,
    }
}

impl HozFixture {
    /// Every key none of whose records lies in a block `lost` says.
    fn keys_without(&self, lost: impl Fn(u32) -> bool) -> KeySet {
        self.spans
            .iter()
            .filter(|(_, (a, b))| !(*a..=*b).any(&lost))
            .map(|(k, _)| k.clone())
            .collect()
    }
}

fn write_input(dir: &Path, name: &str, data: &[u8]) -> PathBuf {
    let path = dir.join(name);
    std::fs::write(&path, data).expect("write input");
    path
}

/// Carries the plan out into `dir/out` and returns the new file.
fn materialise(plan: Plan, original: &[u8], dir: &Path) -> Vec<u8> {
    let out = dir.join("out");
    match plan.content.expect("a plan with content") {
        Content::Written(write) => write(&out).expect("the plan writes"),
        Content::Pieces(pieces) => {
            let mut bytes = Vec::new();
            hozon::tools::repair::model::write_pieces(&pieces, original, &mut bytes)
                .expect("pieces");
            std::fs::write(&out, bytes).expect("write");
        }
    }
    std::fs::read(&out).expect("read output")
}

fn hoz_keys(data: &[u8]) -> KeySet {
    let loaded = snapshot::load(
        data,
        &snapshot::ReadOptions {
            now_ms: 0,
            ..snapshot::ReadOptions::default()
        },
    )
    .expect("loads");
    loaded.keys().map(|k| (k.db, k.key.to_vec())).collect()
}

/// Salvages `bad` (as `dir/name`) and returns the keys of the result.
fn hoz_salvaged(dir: &Path, bad: &[u8]) -> KeySet {
    let path = write_input(dir, "dump.hoz", bad);
    let plan = plan_salvage(&path, bad).expect("salvage is planned");
    hoz_keys(&materialise(plan, bad, dir))
}

#[test]
fn clean_dump_hoz_has_no_problems_and_nothing_to_do() {
    let dir = tempfile::tempdir().expect("tempdir");
    let f = hoz_fixture(dir.path());
    let path = write_input(dir.path(), "dump.hoz", &f.data);
    assert_eq!(check(&path, &f.data), vec![]);
    assert!(plan_fix(&path, &f.data).expect("clean").content.is_none());
    assert!(plan_salvage(&path, &f.data)
        .expect("clean")
        .content
        .is_none());
}

#[test]
fn damaged_block_payload_loses_exactly_that_blocks_keys() {
    let dir = tempfile::tempdir().expect("tempdir");
    let f = hoz_fixture(dir.path());
    // Every block holding a part of the split value (its first, a
    // middle and its last part), and a few others.
    let (first, last) = f
        .spans
        .iter()
        .find(|(_, (a, b))| b > a)
        .map(|(_, span)| *span)
        .expect("a split value");
    let mut victims = vec![0usize, 3, f.summary.blocks.len() - 1];
    victims.extend((first..=last).map(|b| b as usize));
    for k in victims {
        let b = f.summary.blocks[k];
        let mut bad = f.data.clone();
        bad[(b.offset + 40 + b.stored_len / 2) as usize] ^= 0x21;
        let path = write_input(dir.path(), "dump.hoz", &bad);
        let problems = check(&path, &bad);
        assert_eq!(problems.len(), 1, "{problems:?}");
        let p = &problems[0];
        assert_eq!(p.kind, ProblemKind::DamagedBlock);
        assert_eq!((p.start, p.end), (b.offset, b.end()));
        assert_eq!(p.remedy, Remedy::Salvage);
        assert_eq!(p.commands_or_keys, Some(u64::from(b.records)));
        assert!(p.detail.contains("payload checksum"), "{}", p.detail);
        let refusal = plan_fix(&path, &bad).expect_err("fix refuses");
        assert!(refusal.0.contains("salvage"), "{}", refusal.0);
        let plan = plan_salvage(&path, &bad).expect("planned");
        assert_eq!(plan.dropped.len(), 1);
        assert_eq!(plan.dropped[0].count, u64::from(b.records));
        let got = hoz_keys(&materialise(plan, &bad, dir.path()));
        assert_eq!(got, f.keys_without(|i| i == k as u32), "block {k}");
    }
}

#[test]
fn damaged_block_header_and_listed_keys() {
    let dir = tempfile::tempdir().expect("tempdir");
    let f = hoz_fixture(dir.path());
    let k = 4;
    let b = f.summary.blocks[k];
    let mut bad = f.data.clone();
    bad[b.offset as usize + 13] ^= 0x01; // the record count
    let path = write_input(dir.path(), "dump.hoz", &bad);
    let problems = check(&path, &bad);
    let p = problems
        .iter()
        .find(|p| p.start == b.offset)
        .expect("the damaged block");
    assert_eq!(p.kind, ProblemKind::DamagedBlock);
    // The payload is intact: its keys are readable and listed.
    let in_block: Vec<Vec<u8>> = f
        .spans
        .iter()
        .filter(|(_, (a, z))| (*a..=*z).contains(&(k as u32)))
        .map(|((db, key), _)| db_key(*db, key))
        .collect();
    assert!(!in_block.is_empty());
    for key in in_block.iter().take(MAX_LISTED) {
        assert!(p.keys.listed.contains(key), "{key:?} not in {:?}", p.keys);
    }
    assert_eq!(
        hoz_salvaged(dir.path(), &bad),
        f.keys_without(|i| i == k as u32)
    );
}

const MAX_LISTED: usize = hozon::tools::repair::model::MAX_LISTED_KEYS;

#[test]
fn damaged_footer_or_trailer_salvage_walks_the_blocks() {
    let dir = tempfile::tempdir().expect("tempdir");
    let f = hoz_fixture(dir.path());
    let all = f.keys_without(|_| false);
    for at in [f.summary.footer_offset as usize + 6, f.data.len() - 20] {
        let mut bad = f.data.clone();
        bad[at] ^= 0x08;
        let path = write_input(dir.path(), "dump.hoz", &bad);
        let problems = check(&path, &bad);
        assert_eq!(problems.len(), 1, "{problems:?}");
        assert_eq!(problems[0].kind, ProblemKind::DamagedFooter);
        assert_eq!(hoz_salvaged(dir.path(), &bad), all);
    }
    // The header too: every block is still found.
    let mut bad = f.data.clone();
    bad[30] ^= 0x40;
    let problems = check(&write_input(dir.path(), "dump.hoz", &bad), &bad);
    assert!(problems
        .iter()
        .any(|p| p.kind == ProblemKind::DamagedHeader));
    assert_eq!(hoz_salvaged(dir.path(), &bad), all);
}

#[test]
fn truncated_dump_hoz_keeps_the_complete_blocks() {
    let dir = tempfile::tempdir().expect("tempdir");
    let f = hoz_fixture(dir.path());
    let k = 6;
    let b = f.summary.blocks[k];
    let cut = (b.offset + 40 + b.stored_len / 3) as usize;
    let bad = &f.data[..cut];
    let path = write_input(dir.path(), "dump.hoz", bad);
    let problems = check(&path, bad);
    assert!(problems
        .iter()
        .any(|p| p.kind == ProblemKind::DamagedFooter));
    let p = problems
        .iter()
        .find(|p| p.kind == ProblemKind::DamagedBlock)
        .expect("the cut block");
    assert_eq!((p.start, p.end), (b.offset, cut as u64));
    assert_eq!(
        hoz_salvaged(dir.path(), bad),
        f.keys_without(|i| i >= k as u32)
    );
}

#[test]
fn trailing_bytes_after_a_dump_hoz_are_cut() {
    let dir = tempfile::tempdir().expect("tempdir");
    let f = hoz_fixture(dir.path());
    let mut bad = f.data.clone();
    bad.extend_from_slice(b"some trailing garbage");
    let path = write_input(dir.path(), "dump.hoz", &bad);
    let problems = check(&path, &bad);
    assert_eq!(problems.len(), 1, "{problems:?}");
    assert_eq!(problems[0].kind, ProblemKind::TrailingBytes);
    assert_eq!(
        (problems[0].start, problems[0].end),
        (f.data.len() as u64, bad.len() as u64)
    );
    let plan = plan_salvage(&path, &bad).expect("planned");
    assert!(matches!(plan.content, Some(Content::Pieces(_))));
    assert_eq!(materialise(plan, &bad, dir.path()), f.data);
}

#[test]
fn unknown_format_version_cannot_be_repaired() {
    let dir = tempfile::tempdir().expect("tempdir");
    let f = hoz_fixture(dir.path());
    let mut bad = f.data.clone();
    bad[8..10].copy_from_slice(&7u16.to_le_bytes());
    let header_len = u32::from_le_bytes([bad[16], bad[17], bad[18], bad[19]]) as usize;
    let crc = crc32fast::hash(&bad[..header_len - 4]);
    bad[header_len - 4..header_len].copy_from_slice(&crc.to_le_bytes());
    let path = write_input(dir.path(), "dump.hoz", &bad);
    let problems = check(&path, &bad);
    assert!(!problems.is_empty());
    assert!(
        problems.iter().any(|p| p.remedy == Remedy::None
            && p.kind == ProblemKind::DamagedHeader
            && p.detail.contains("7.")),
        "{problems:?}"
    );
    assert!(plan_salvage(&path, &bad).is_err());
    assert!(plan_fix(&path, &bad).is_err());
}

#[test]
fn salvage_refuses_to_run_on_a_changed_original() {
    let dir = tempfile::tempdir().expect("tempdir");
    let f = hoz_fixture(dir.path());
    let mut bad = f.data.clone();
    bad[f.summary.footer_offset as usize + 6] ^= 0x08;
    let path = write_input(dir.path(), "dump.hoz", &bad);
    let plan = plan_salvage(&path, &bad).expect("planned");
    write_input(dir.path(), "dump.hoz", &f.data);
    let Some(Content::Written(write)) = plan.content else {
        panic!("a written plan");
    };
    let err = write(&dir.path().join("out")).expect_err("changed");
    assert!(err.contains("changed"), "{err}");
}

#[test]
fn fuzzed_dump_hoz_never_panics_and_salvage_output_loads() {
    let dir = tempfile::tempdir().expect("tempdir");
    let f = hoz_fixture(dir.path());
    let all = f.keys_without(|_| false);
    let mut rng = Rng::with_seed(11);
    for round in 0..40 {
        let mut bad = f.data.clone();
        for _ in 0..1 + round % 4 {
            let at = (rng.next_u64() as usize) % bad.len();
            bad[at] ^= 1 << (rng.next_u64() % 8);
        }
        if round % 3 == 0 {
            bad.truncate((rng.next_u64() as usize) % bad.len());
        }
        let path = write_input(dir.path(), "dump.hoz", &bad);
        let problems = check(&path, &bad);
        if let Ok(plan) = plan_salvage(&path, &bad) {
            if plan.content.is_some() {
                let got = hoz_keys(&materialise(plan, &bad, dir.path()));
                assert!(got.is_subset(&all), "round {round}");
            } else {
                assert!(problems.is_empty());
            }
        }
    }
}

// -----------------------------------------------------------------------
// RDB.

fn rdb_keys(data: &[u8]) -> KeySet {
    let options = reader::Options {
        limits: EncodingLimits::default(),
        databases: 16,
        skip_expired_before_ms: None,
        now_ms: 0,
    };
    let mut keys = KeySet::new();
    reader::load(data, &options, &mut |k| {
        keys.insert((k.db, k.key.to_vec()));
        Ok(())
    })
    .expect("loads");
    keys
}

/// Offsets and keys of every key record.
fn rdb_records(data: &[u8]) -> Vec<(u64, u8, DbKey)> {
    let mut out = Vec::new();
    reader::scan_keys(data, &mut |k| {
        out.push((k.offset, k.type_byte, (k.db, k.key.to_vec())));
        std::ops::ControlFlow::Continue(())
    })
    .expect("an intact file");
    out
}

/// A redis-server on a unix socket in `dir`, stopped when dropped.
struct Redis {
    child: std::process::Child,
    socket: PathBuf,
}

impl Redis {
    fn start(dir: &Path, dbfilename: &str, extra: &[&str]) -> Redis {
        let socket = dir.join("redis.sock");
        let mut args: Vec<String> = [
            "--port",
            "0",
            "--unixsocket",
            socket.to_str().expect("utf-8 path"),
            "--dir",
            dir.to_str().expect("utf-8 path"),
            "--dbfilename",
            dbfilename,
            "--save",
            "",
            "--appendonly",
            "no",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        args.extend(extra.iter().map(|s| s.to_string()));
        let child = Command::new("redis-server")
            .args(&args)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("redis-server runs");
        let redis = Redis { child, socket };
        let deadline = Instant::now() + Duration::from_secs(10);
        while redis.cli(&["PING"]) != "PONG" {
            assert!(Instant::now() < deadline, "redis-server did not start");
            std::thread::sleep(Duration::from_millis(20));
        }
        redis
    }

    fn cli(&self, args: &[&str]) -> String {
        let out = Command::new("redis-cli")
            .arg("-s")
            .arg(&self.socket)
            .args(args)
            .output()
            .expect("redis-cli runs");
        String::from_utf8_lossy(&out.stdout).trim().to_string()
    }
}

impl Drop for Redis {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// An RDB written by redis-server: strings, and small hashes (listpacks,
/// uncompressed so a flipped byte lands where the test puts it).
fn redis_fixture(dir: &Path) -> Vec<u8> {
    let redis = Redis::start(
        dir,
        "source.rdb",
        &["--enable-debug-command", "yes", "--rdbcompression", "no"],
    );
    assert_eq!(redis.cli(&["DEBUG", "POPULATE", "300", "key", "20"]), "OK");
    for i in 0..60 {
        let key = format!("hash:{i}");
        redis.cli(&["HSET", &key, "f1", &format!("a{i}"), "f2", "bbbbbbbb"]);
    }
    for i in 0..20 {
        let key = format!("list:{i}");
        redis.cli(&["RPUSH", &key, "x", "y", &i.to_string()]);
    }
    redis.cli(&["SELECT", "2"]);
    redis.cli(&["DEBUG", "POPULATE", "50", "other", "10"]);
    redis.cli(&["-n", "2", "PEXPIREAT", "other:1", &LATER_MS.to_string()]);
    assert_eq!(redis.cli(&["SAVE"]), "OK");
    std::fs::read(dir.join("source.rdb")).expect("the saved RDB")
}

/// The output must pass redis-check-rdb and load into a real Redis with
/// `keys` keys.
fn redis_accepts(dir: &Path, data: &[u8], keys: usize) {
    let check_dir = dir.join("check");
    std::fs::create_dir_all(&check_dir).expect("mkdir");
    let path = check_dir.join("salvaged.rdb");
    std::fs::write(&path, data).expect("write");
    let status = Command::new("redis-check-rdb")
        .arg(&path)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .expect("redis-check-rdb runs");
    assert!(status.success(), "redis-check-rdb refuses the output");
    let redis = Redis::start(&check_dir, "salvaged.rdb", &[]);
    let dbsize: usize = ["0", "2"]
        .iter()
        .map(|db| {
            redis
                .cli(&["-n", db, "DBSIZE"])
                .parse::<usize>()
                .unwrap_or(0)
        })
        .sum();
    assert_eq!(dbsize, keys);
}

#[test]
fn rdb_flipped_value_byte_loses_only_that_record() {
    let dir = tempfile::tempdir().expect("tempdir");
    let data = redis_fixture(dir.path());
    let records = rdb_records(&data);
    let all: KeySet = records.iter().map(|(_, _, k)| k.clone()).collect();
    assert_eq!(all.len(), 430);
    // A hash record in the middle of the file.
    let hashes: Vec<_> = records
        .iter()
        .enumerate()
        .filter(|(_, (_, t, _))| *t == hozon::rdb::kind::HASH_LISTPACK)
        .collect();
    let (index, (offset, _, (db, key))) = hashes[hashes.len() / 2];
    // Type byte, key length and key, listpack string length, then the
    // listpack's total-bytes field: flip its low byte.
    let at = *offset as usize + 1 + 1 + key.len() + 1;
    let mut bad = data.clone();
    bad[at] ^= 0x55;
    let path = write_input(dir.path(), "dump.rdb", &bad);
    let problems = check(&path, &bad);
    let p = problems
        .iter()
        .find(|p| p.kind == ProblemKind::DamagedRecord)
        .expect("a damaged record");
    assert_eq!(p.start, *offset);
    assert_eq!(p.end, records[index + 1].0, "resumed at the next record");
    assert_eq!(p.keys.listed, vec![db_key(*db, key)]);
    assert!(problems
        .iter()
        .any(|p| p.kind == ProblemKind::ChecksumMismatch));
    assert!(plan_fix(&path, &bad).is_err());
    let plan = plan_salvage(&path, &bad).expect("planned");
    let out = materialise(plan, &bad, dir.path());
    let mut want = all.clone();
    want.remove(&(*db, key.clone()));
    assert_eq!(rdb_keys(&out), want);
    redis_accepts(dir.path(), &out, want.len());
}

#[test]
fn rdb_truncated_keeps_the_records_before_the_cut() {
    let dir = tempfile::tempdir().expect("tempdir");
    let data = redis_fixture(dir.path());
    let records = rdb_records(&data);
    let cut_record = records.len() * 2 / 3;
    let cut = records[cut_record].0 as usize + 3;
    let bad = &data[..cut];
    let path = write_input(dir.path(), "dump.rdb", bad);
    let problems = check(&path, bad);
    assert_eq!(problems.len(), 1, "{problems:?}");
    assert_eq!(problems[0].start, records[cut_record].0);
    assert_eq!(problems[0].end, cut as u64);
    let out = materialise(plan_salvage(&path, bad).expect("planned"), bad, dir.path());
    let want: KeySet = records[..cut_record]
        .iter()
        .map(|(_, _, k)| k.clone())
        .collect();
    assert_eq!(rdb_keys(&out), want);
    redis_accepts(dir.path(), &out, want.len());
}

#[test]
fn rdb_bad_checksum_and_trailing_bytes() {
    let dir = tempfile::tempdir().expect("tempdir");
    let data = redis_fixture(dir.path());
    let all: KeySet = rdb_records(&data).into_iter().map(|(_, _, k)| k).collect();
    let mut bad = data.clone();
    let n = bad.len();
    bad[n - 3] ^= 0x10;
    let path = write_input(dir.path(), "dump.rdb", &bad);
    let problems = check(&path, &bad);
    assert_eq!(problems.len(), 1, "{problems:?}");
    assert_eq!(problems[0].kind, ProblemKind::ChecksumMismatch);
    assert_eq!(
        (problems[0].start, problems[0].end),
        (n as u64 - 8, n as u64)
    );
    let out = materialise(
        plan_salvage(&path, &bad).expect("planned"),
        &bad,
        dir.path(),
    );
    assert_eq!(rdb_keys(&out), all);
    redis_accepts(dir.path(), &out, all.len());

    let mut longer = data.clone();
    longer.extend_from_slice(b"\r\ntrailing");
    let path = write_input(dir.path(), "dump.rdb", &longer);
    let problems = check(&path, &longer);
    assert_eq!(problems.len(), 1, "{problems:?}");
    assert_eq!(problems[0].kind, ProblemKind::TrailingBytes);
    assert_eq!(problems[0].start, data.len() as u64);
    let plan = plan_salvage(&path, &longer).expect("planned");
    assert_eq!(materialise(plan, &longer, dir.path()), data);
}

#[test]
fn clean_rdb_and_unsupported_version() {
    let dir = tempfile::tempdir().expect("tempdir");
    let data = hozon_rdb();
    let path = write_input(dir.path(), "dump.rdb", &data);
    assert_eq!(check(&path, &data), vec![]);
    assert!(plan_salvage(&path, &data).expect("clean").content.is_none());
    assert!(plan_fix(&path, &data).expect("clean").content.is_none());
    let mut bad = data.clone();
    bad[5..9].copy_from_slice(b"0099");
    let path = write_input(dir.path(), "dump.rdb", &bad);
    let problems = check(&path, &bad);
    assert_eq!(problems.len(), 1);
    assert_eq!(problems[0].remedy, Remedy::None);
    assert!(plan_salvage(&path, &bad).is_err());
}

/// A small RDB written by hozon's writer: strings, lists and hashes.
fn hozon_rdb() -> Vec<u8> {
    let limits = EncodingLimits::default();
    let mut keys: Vec<(usize, Blob, Value, Option<i64>)> = Vec::new();
    for i in 0..120u32 {
        let key = Blob::from(format!("k{i}").as_bytes());
        let value = match i % 3 {
            0 => Value::Str(Blob::from(format!("value {i}").as_bytes())),
            1 => {
                let mut l = List::new();
                for j in 0..4 {
                    l.push(End::Tail, format!("e{i}.{j}").as_bytes());
                }
                Value::List(Box::new(l))
            }
            _ => {
                let mut h = hozon::types::hash::Hash::new();
                h.set(b"f", Blob::from(format!("{i}").as_bytes()), &limits);
                h.set(b"g", Blob::from(&b"x"[..]), &limits);
                Value::Hash(Box::new(h))
            }
        };
        let expire = (i % 7 == 0).then_some(LATER_MS);
        keys.push(((i / 60) as usize, key, value, expire));
    }
    hozon::rdb::writer::encode_file(
        &Encoder::default(),
        1_700_000_000_000,
        keys.iter().map(|(db, k, v, e)| (*db, k, v, *e)),
    )
}

#[test]
fn fuzzed_rdb_never_panics_and_salvage_output_loads() {
    let dir = tempfile::tempdir().expect("tempdir");
    let data = hozon_rdb();
    let all: KeySet = rdb_records(&data).into_iter().map(|(_, _, k)| k).collect();
    let mut rng = Rng::with_seed(5);
    let mut salvaged = 0;
    for round in 0..150 {
        let mut bad = data.clone();
        for _ in 0..1 + round % 3 {
            let at = 9 + (rng.next_u64() as usize) % (bad.len() - 9);
            bad[at] = rng.next_u64() as u8;
        }
        if round % 4 == 0 {
            bad.truncate(9 + (rng.next_u64() as usize) % (bad.len() - 9));
        }
        let path = write_input(dir.path(), "dump.rdb", &bad);
        let problems = check(&path, &bad);
        match plan_salvage(&path, &bad) {
            Ok(plan) if plan.content.is_some() => {
                let out = materialise(plan, &bad, dir.path());
                let got = rdb_keys(&out);
                // A resynchronisation can misread a damaged key's name,
                // never invent more keys than a record can hold.
                assert!(got.len() <= all.len() + problems.len(), "round {round}");
                salvaged += 1;
            }
            Ok(_) => assert!(problems.is_empty(), "round {round}"),
            Err(_) => {}
        }
    }
    assert!(salvaged > 100);
}
