//! Unit tests of the AOF analysis and its plans.

use super::plan::problems_of;
use super::*;
use crate::persist::aof::{encode_command, BatchBuilder, FILE_HEADER};
use crate::tools::repair::model::{write_pieces, Content, Piece, Plan};
use crate::{Config, Engine, Reply};
use std::collections::BTreeMap;
use std::sync::Arc;

/// `check` as the tool runs it (the fast walk, then the analysis from
/// its restart point), asserted equal to the full analysis from the
/// start of the file: every test that checks a file checks that the
/// fast path changes nothing.
fn check(file: &Path, data: &[u8]) -> Vec<Problem> {
    let fast = super::check(file, data);
    let full = problems_of(&analyse(data, true), file);
    assert_eq!(fast, full, "fast check differs from the full analysis");
    fast
}

/// Every key of every database with its DUMP payload.
type State = BTreeMap<(usize, Vec<u8>), Vec<u8>>;
/// Commands, each with the database it runs in.
type Unit = Vec<(usize, Vec<String>)>;

fn cmd(db: usize, words: &str) -> (usize, Vec<String>) {
    (db, words.split(' ').map(str::to_string).collect())
}

fn run(engine: &mut Engine, session: &mut crate::Session, argv: &[&[u8]]) -> Reply {
    engine.execute(session, argv)
}

fn state(engine: &mut Engine) -> State {
    let mut s = engine.new_session();
    s.authenticated = true;
    let mut out = State::new();
    for db in 0..16usize {
        let dbs = db.to_string();
        run(engine, &mut s, &[b"SELECT", dbs.as_bytes()]);
        let Reply::Array(keys) = run(engine, &mut s, &[b"KEYS", b"*"]) else {
            panic!("KEYS did not answer an array");
        };
        for k in keys {
            let Reply::Bulk(k) = k else {
                panic!("a key is not a bulk")
            };
            let Reply::Bulk(v) = run(engine, &mut s, &[b"DUMP", &k]) else {
                panic!("DUMP failed")
            };
            out.insert((db, k), v);
        }
    }
    out
}

/// The state the commands of `units` make, applied by the engine.
fn expected<'u>(units: impl IntoIterator<Item = &'u Unit>) -> State {
    let mut engine = Engine::open(Config::in_memory()).expect("in-memory engine");
    let mut s = engine.new_session();
    s.authenticated = true;
    for unit in units {
        for (db, argv) in unit {
            let dbs = db.to_string();
            run(&mut engine, &mut s, &[b"SELECT", dbs.as_bytes()]);
            let argv: Vec<&[u8]> = argv.iter().map(|a| a.as_bytes()).collect();
            let reply = run(&mut engine, &mut s, &argv);
            assert!(!matches!(reply, Reply::Error(_)), "{argv:?}: {reply:?}");
        }
    }
    state(&mut engine)
}

/// Loads an AOF image as the server does; a torn tail is a failure
/// here (a repaired file has none).
fn load(data: &[u8]) -> Result<State, String> {
    let mut engine = Engine::open(Config::in_memory()).map_err(|e| e.to_string())?;
    let report = engine
        .load_aof_image(data, Path::new("repaired.aof"), true)
        .map_err(|e| e.to_string())?;
    if let Some(t) = report.torn {
        return Err(format!("torn tail left: {t:?}"));
    }
    Ok(state(&mut engine))
}

fn materialise(plan: &Plan, data: &[u8]) -> Vec<u8> {
    match &plan.content {
        None => data.to_vec(),
        Some(Content::Pieces(p)) => {
            let mut out = Vec::new();
            write_pieces(p, data, &mut out).expect("pieces inside the original");
            out
        }
        Some(Content::Written(_)) => panic!("an AOF plan writes pieces"),
    }
}

/// A hozon AOF, one batch per unit at `ts(i)`; the batches' ranges.
fn hozon_file(units: &[Unit], ts: impl Fn(usize) -> i64) -> (Vec<u8>, Vec<Range<usize>>) {
    hozon_log(FILE_HEADER.to_vec(), units, ts)
}

fn hozon_log(
    mut out: Vec<u8>,
    units: &[Unit],
    ts: impl Fn(usize) -> i64,
) -> (Vec<u8>, Vec<Range<usize>>) {
    let mut ranges = Vec::new();
    let mut selected = None;
    let mut b = BatchBuilder::new();
    for (i, unit) in units.iter().enumerate() {
        for (db, argv) in unit {
            let argv: Vec<&[u8]> = argv.iter().map(|a| a.as_bytes()).collect();
            b.push_command(*db, &argv, &mut selected);
        }
        let start = out.len();
        out.extend(b.finish(ts(i)));
        ranges.push(start..out.len());
    }
    (out, ranges)
}

/// A Redis AOF (lower-case names like Redis writes, `SELECT` when the
/// database changes, a `#TS:` line before each unit when `ts`); each
/// unit's range and the offset of its first command.
fn redis_file(
    units: &[Unit],
    ts: Option<&dyn Fn(usize) -> i64>,
) -> (Vec<u8>, Vec<(Range<usize>, usize)>) {
    redis_log(Vec::new(), units, ts)
}

fn redis_log(
    mut out: Vec<u8>,
    units: &[Unit],
    ts: Option<&dyn Fn(usize) -> i64>,
) -> (Vec<u8>, Vec<(Range<usize>, usize)>) {
    let mut ranges = Vec::new();
    let mut selected = None;
    for (i, unit) in units.iter().enumerate() {
        let start = out.len();
        if let Some(ts) = ts {
            out.extend_from_slice(format!("#TS:{}\r\n", ts(i)).as_bytes());
        }
        let first = out.len();
        for (db, argv) in unit {
            if selected != Some(*db) {
                encode_command(&mut out, &["select".to_string(), db.to_string()]);
                selected = Some(*db);
            }
            let mut argv = argv.clone();
            argv[0].make_ascii_lowercase();
            encode_command(&mut out, &argv);
        }
        ranges.push((start..out.len(), first));
    }
    (out, ranges)
}

fn sets(n: usize) -> Vec<Unit> {
    (0..n)
        .map(|i| vec![cmd(0, &format!("SET k{i} value{i}"))])
        .collect()
}

fn except(units: &[Unit], dropped: &[usize]) -> Vec<Unit> {
    units
        .iter()
        .enumerate()
        .filter(|(i, _)| !dropped.contains(i))
        .map(|(_, u)| u.clone())
        .collect()
}

fn file() -> &'static Path {
    Path::new("appendonly.aof")
}

fn keys(p: &Keys) -> Vec<String> {
    p.listed
        .iter()
        .map(|k| String::from_utf8_lossy(k).into_owned())
        .collect()
}

#[test]
fn hozon_checksum_mismatch_mid_file_is_one_region_and_salvage_keeps_the_rest() {
    let units = sets(5);
    let (mut data, ranges) = hozon_file(&units, |i| 1000 + i as i64);
    // A bit of the value "value2": the RESP still parses.
    data[ranges[2].start + 26] ^= 0x01;
    let problems = check(file(), &data);
    assert_eq!(problems.len(), 1, "{problems:?}");
    let p = &problems[0];
    assert_eq!(
        (p.start, p.end),
        (ranges[2].start as u64, ranges[2].end as u64)
    );
    assert_eq!(p.kind, ProblemKind::ChecksumMismatch);
    assert_eq!(p.remedy, Remedy::Salvage);
    assert_eq!(p.commands_or_keys, Some(1));
    assert_eq!(keys(&p.keys), ["k2"]);
    let refusal = plan_fix(file(), &data).unwrap_err();
    assert!(refusal.0.contains("salvage"), "{refusal:?}");
    let plan = plan_salvage(file(), &data, false).unwrap();
    assert_eq!(plan.dropped.len(), 1);
    assert_eq!(plan.dropped[0].count, 1);
    assert_eq!(
        load(&materialise(&plan, &data)).unwrap(),
        expected(&except(&units, &[2]))
    );
    // The damaged file itself is refused by the loader.
    assert!(load(&data).is_err());
}

#[test]
fn hozon_torn_tail_and_a_damaged_last_batch_are_cut_by_fix() {
    let units = sets(5);
    let (data, ranges) = hozon_file(&units, |i| 1000 + i as i64);
    let mut torn = data[..ranges[4].start + 10].to_vec();
    let mut flipped = data.clone();
    flipped[ranges[4].start + 20] ^= 0x04;
    for damaged in [&mut torn, &mut flipped] {
        let problems = check(file(), damaged);
        assert_eq!(problems.len(), 1, "{problems:?}");
        let p = &problems[0];
        assert_eq!(p.kind, ProblemKind::TornTail);
        assert_eq!(p.remedy, Remedy::Fix);
        assert_eq!(
            (p.start, p.end),
            (ranges[4].start as u64, damaged.len() as u64)
        );
        let plan = plan_fix(file(), damaged).unwrap();
        let Some(Content::Pieces(pieces)) = &plan.content else {
            panic!("no cut")
        };
        assert_eq!(pieces, &[Piece::Copy(0, ranges[4].start as u64)]);
        let want = expected(&units[..4]);
        assert_eq!(load(&materialise(&plan, damaged)).unwrap(), want);
        let salvaged = plan_salvage(file(), damaged, false).unwrap();
        assert_eq!(load(&materialise(&salvaged, damaged)).unwrap(), want);
    }
    // An intact file: nothing to do.
    assert!(check(file(), &data).is_empty());
    assert!(plan_fix(file(), &data).unwrap().content.is_none());
    assert!(plan_salvage(file(), &data, false)
        .unwrap()
        .content
        .is_none());
}

#[test]
fn hozon_unknown_command_is_its_own_region_and_its_batch_is_rewritten() {
    let mut units = sets(4);
    units[2] = vec![cmd(0, "SET a 1"), cmd(0, "FLUBBER x"), cmd(0, "SET b 2")];
    let (data, _) = hozon_file(&units, |i| 1000 + i as i64);
    let mut foo = Vec::new();
    encode_command(&mut foo, &["FLUBBER", "x"]);
    let at = find(&data, &foo).unwrap();
    let problems = check(file(), &data);
    assert_eq!(problems.len(), 1, "{problems:?}");
    assert_eq!(problems[0].kind, ProblemKind::UnknownCommand);
    assert_eq!(
        (problems[0].start, problems[0].end),
        (at as u64, (at + foo.len()) as u64)
    );
    assert_eq!(problems[0].commands_or_keys, Some(1));
    assert!(plan_fix(file(), &data).is_err());
    let plan = plan_salvage(file(), &data, false).unwrap();
    let mut want = units.clone();
    want[2].remove(1);
    assert_eq!(load(&materialise(&plan, &data)).unwrap(), expected(&want));
}

#[test]
fn hozon_salvage_puts_the_select_of_a_dropped_batch_back() {
    let units = vec![
        vec![cmd(0, "SET a 1")],
        vec![cmd(3, "SET b 2")],
        vec![cmd(3, "SET c 3")],
        vec![cmd(3, "SET d 4")],
    ];
    let (mut data, ranges) = hozon_file(&units, |i| 1000 + i as i64);
    // Damage the SET of batch 1, after its readable SELECT 3.
    let set_b = find(&data[ranges[1].clone()], b"SET\r\n").unwrap() + ranges[1].start;
    data[set_b + 1] ^= 0x01;
    let problems = check(file(), &data);
    assert_eq!(problems.len(), 1, "{problems:?}");
    assert_eq!(problems[0].start, ranges[1].start as u64);
    let plan = plan_salvage(file(), &data, false).unwrap();
    assert!(
        plan.notes.iter().any(|n| n.contains("SELECT 3")),
        "{:?}",
        plan.notes
    );
    let out = materialise(&plan, &data);
    assert_eq!(load(&out).unwrap(), expected(&except(&units, &[1])));
    // The SELECT is a verified batch of its own: no problem is left.
    assert!(check(file(), &out).is_empty());
}

#[test]
fn salvage_beats_truncation_a_damaged_batch_in_10k_commands_loses_only_its_commands() {
    let units: Vec<Unit> = (0..1000)
        .map(|b| {
            (0..10)
                .map(|c| cmd(b % 3, &format!("SET k{b}-{c} v{b}")))
                .collect()
        })
        .collect();
    let (mut data, ranges) = hozon_file(&units, |i| 1_000_000 + i as i64);
    // A digit of the batch's CRC.
    data[ranges[500].end - 4] ^= 0x01;
    let problems = check(file(), &data);
    assert_eq!(problems.len(), 1);
    assert_eq!(problems[0].commands_or_keys, Some(10));
    assert_eq!(problems[0].keys.total, 10);
    let plan = plan_salvage(file(), &data, false).unwrap();
    assert_eq!(plan.dropped.len(), 1);
    assert_eq!(plan.dropped[0].count, 10);
    let got = load(&materialise(&plan, &data)).unwrap();
    assert_eq!(got.len(), 9990);
    assert_eq!(got, expected(&except(&units, &[500])));
}

#[test]
fn hozon_damaged_header_line_is_replaced() {
    let units = sets(3);
    let (mut data, _) = hozon_file(&units, |i| 1000 + i as i64);
    data[3] ^= 0x01;
    assert!(load(&data).is_err());
    let problems = check(file(), &data);
    assert_eq!(problems.len(), 1, "{problems:?}");
    assert_eq!(problems[0].kind, ProblemKind::DamagedHeader);
    assert_eq!(
        (problems[0].start, problems[0].end),
        (0, FILE_HEADER.len() as u64)
    );
    let plan = plan_salvage(file(), &data, false).unwrap();
    let out = materialise(&plan, &data);
    assert!(out.starts_with(FILE_HEADER));
    assert_eq!(load(&out).unwrap(), expected(&units));
}

#[test]
fn truncate_before_a_time_between_batches_yields_exactly_the_prefix_state() {
    let units: Vec<Unit> = (0..6)
        .map(|i| vec![cmd(0, &format!("SET k{i} v{i}")), cmd(0, "INCR n")])
        .collect();
    let (data, ranges) = hozon_file(&units, |i| 1_700_000_000_000 + 1000 * i as i64);
    for (before_ms, kept) in [
        (1_700_000_003_500, 4),
        (1_700_000_003_000, 3),
        (1_700_000_000_000, 0),
    ] {
        let plan = plan_truncate(file(), &data, before_ms).unwrap();
        assert_eq!(plan.dropped[0].start, ranges[kept].start as u64);
        assert_eq!(plan.dropped[0].count, 2 * (6 - kept) as u64);
        assert_eq!(
            load(&materialise(&plan, &data)).unwrap(),
            expected(&units[..kept])
        );
    }
    let plan = plan_truncate(file(), &data, 1_800_000_000_000).unwrap();
    assert!(plan.content.is_none());
    // Damage before the cut: salvage first.
    let mut damaged = data.clone();
    damaged[ranges[1].start + 20] ^= 0x01;
    assert!(plan_truncate(file(), &damaged, 1_700_000_003_500).is_err());
    // Damage right before the cut goes with it (its time is unknown).
    let plan = plan_truncate(file(), &damaged, 1_700_000_000_500).unwrap();
    assert_eq!(plan.dropped[0].start, ranges[1].start as u64);
    assert_eq!(
        load(&materialise(&plan, &damaged)).unwrap(),
        expected(&units[..1])
    );
    // Damage after the cut is cut away with the rest.
    let plan = plan_truncate(file(), &damaged, 1_700_000_000_000).unwrap();
    assert_eq!(
        load(&materialise(&plan, &damaged)).unwrap(),
        expected(&units[..0])
    );
}

#[test]
fn truncate_cuts_redis_files_at_ts_lines_and_refuses_files_without_them() {
    let units = sets(5);
    let ts = |i: usize| 1_700_000_000 + 10 * i as i64;
    let (data, ranges) = redis_file(&units, Some(&ts));
    let plan = plan_truncate(file(), &data, 1_700_000_025_000).unwrap();
    assert_eq!(plan.dropped[0].start, ranges[3].0.start as u64);
    assert_eq!(
        load(&materialise(&plan, &data)).unwrap(),
        expected(&units[..3])
    );
    // A #TS line inside a transaction: the cut goes before its MULTI.
    let mut txn = data[..ranges[1].0.end].to_vec();
    let multi_at = txn.len();
    encode_command(&mut txn, &["multi"]);
    txn.extend_from_slice(b"#TS:1700000099\r\n");
    encode_command(&mut txn, &["set", "t", "1"]);
    encode_command(&mut txn, &["exec"]);
    let plan = plan_truncate(file(), &txn, 1_700_000_050_000).unwrap();
    assert_eq!(plan.dropped[0].start, multi_at as u64);
    assert_eq!(
        load(&materialise(&plan, &txn)).unwrap(),
        expected(&units[..2])
    );
    let (plain, _) = redis_file(&units, None);
    let refusal = plan_truncate(file(), &plain, 1_700_000_025_000).unwrap_err();
    assert!(refusal.0.contains("no timestamps"), "{refusal:?}");
}

/// Every damage kind on a Redis file, with and without `#TS:` lines.
fn redis_damage_kinds(ts: Option<&dyn Fn(usize) -> i64>) {
    let units = sets(5);
    let (data, ranges) = redis_file(&units, ts);
    let first_cmd = |i: usize| ranges[i].1;
    assert!(check(file(), &data).is_empty());

    // Malformed RESP in the middle: from the damaged command to the
    // next unit (its #TS: line or its command).
    let mut damaged = data.clone();
    damaged[first_cmd(2)] = b'+';
    let problems = check(file(), &damaged);
    assert_eq!(problems.len(), 1, "{problems:?}");
    let p = &problems[0];
    assert_eq!(p.kind, ProblemKind::MalformedResp);
    assert_eq!(
        (p.start, p.end),
        (first_cmd(2) as u64, ranges[3].0.start as u64)
    );
    assert!(plan_fix(file(), &damaged).is_err());
    let plan = plan_salvage(file(), &damaged, false).unwrap();
    assert_eq!(
        load(&materialise(&plan, &damaged)).unwrap(),
        expected(&except(&units, &[2]))
    );

    // A torn tail: the last command cut short.
    let torn = &data[..data.len() - 5];
    let problems = check(file(), torn);
    assert_eq!(problems.len(), 1, "{problems:?}");
    assert_eq!(problems[0].kind, ProblemKind::TornTail);
    assert_eq!(problems[0].start, first_cmd(4) as u64);
    let plan = plan_fix(file(), torn).unwrap();
    assert_eq!(
        load(&materialise(&plan, torn)).unwrap(),
        expected(&units[..4])
    );

    // An unknown command between intact ones.
    let mut unknown = data[..ranges[2].0.end].to_vec();
    let at = unknown.len();
    encode_command(&mut unknown, &["flubber", "x", "y"]);
    let end = unknown.len();
    unknown.extend_from_slice(&data[ranges[3].0.start..]);
    let problems = check(file(), &unknown);
    assert_eq!(problems.len(), 1, "{problems:?}");
    assert_eq!(problems[0].kind, ProblemKind::UnknownCommand);
    assert_eq!(
        (problems[0].start, problems[0].end),
        (at as u64, end as u64)
    );
    assert!(plan_fix(file(), &unknown).is_err());
    let plan = plan_salvage(file(), &unknown, false).unwrap();
    assert_eq!(
        load(&materialise(&plan, &unknown)).unwrap(),
        expected(&units)
    );

    // An unfinished MULTI at the end.
    let mut multi = data.clone();
    let at = multi.len();
    encode_command(&mut multi, &["multi"]);
    encode_command(&mut multi, &["set", "x", "1"]);
    let problems = check(file(), &multi);
    assert_eq!(problems.len(), 1, "{problems:?}");
    assert_eq!(problems[0].kind, ProblemKind::UnfinishedMulti);
    assert_eq!(problems[0].remedy, Remedy::Fix);
    assert_eq!(problems[0].start, at as u64);
    let plan = plan_fix(file(), &multi).unwrap();
    assert_eq!(load(&materialise(&plan, &multi)).unwrap(), expected(&units));

    // Damage inside MULTI … EXEC: refused unless allowed.
    let mut txn = data.clone();
    encode_command(&mut txn, &["multi"]);
    let bad = txn.len();
    encode_command(&mut txn, &["set", "x", "1"]);
    encode_command(&mut txn, &["set", "y", "2"]);
    encode_command(&mut txn, &["exec"]);
    txn[bad + 1] = b'z';
    let problems = check(file(), &txn);
    assert_eq!(problems.len(), 1, "{problems:?}");
    assert_eq!(problems[0].start, bad as u64);
    let refusal = plan_salvage(file(), &txn, false).unwrap_err();
    assert!(
        refusal.0.contains("--allow-partial-transactions"),
        "{refusal:?}"
    );
    let plan = plan_salvage(file(), &txn, true).unwrap();
    assert!(
        plan.notes.iter().any(|n| n.contains("kept in part")),
        "{:?}",
        plan.notes
    );
    let mut want = units.clone();
    want.push(vec![cmd(0, "SET y 2")]);
    assert_eq!(load(&materialise(&plan, &txn)).unwrap(), expected(&want));
}

#[test]
fn redis6_plain_files_every_damage_kind() {
    redis_damage_kinds(None);
}

#[test]
fn redis7_files_with_ts_lines_every_damage_kind() {
    redis_damage_kinds(Some(&|i| 1_700_000_000 + i as i64));
}

#[test]
fn redis_salvage_puts_select_back_after_a_transaction_whose_exec_was_lost() {
    let units = vec![vec![cmd(0, "SET a 1")]];
    let (mut data, _) = redis_file(&units, None);
    let multi = data.len();
    encode_command(&mut data, &["multi"]);
    encode_command(&mut data, &["select", "5"]);
    encode_command(&mut data, &["set", "b", "2"]);
    // The EXEC is damaged beyond reading.
    data.extend_from_slice(b"*1\r\n$4\r\nEX");
    let after = data.len();
    data.extend_from_slice(b"C\r\n");
    encode_command(&mut data, &["set", "c", "3"]);
    let problems = check(file(), &data);
    assert_eq!(problems.len(), 1, "{problems:?}");
    assert_eq!(problems[0].kind, ProblemKind::UnfinishedMulti);
    assert_eq!(problems[0].remedy, Remedy::Salvage);
    assert_eq!(problems[0].start, multi as u64);
    assert!(problems[0].end as usize > after);
    assert_eq!(problems[0].commands_or_keys, Some(1));
    let plan = plan_salvage(file(), &data, false).unwrap();
    assert!(
        plan.notes.iter().any(|n| n.contains("SELECT 5")),
        "{:?}",
        plan.notes
    );
    // The transaction is dropped; `c` stays in the database it was
    // written to.
    let want = expected(&[vec![cmd(0, "SET a 1")], vec![cmd(5, "SET c 3")]]);
    assert_eq!(load(&materialise(&plan, &data)).unwrap(), want);
}

/// A snapshot of keys p0..p2 (and a hash) saved by the engine, in the
/// given format; the units that make them.
fn snapshot(rdb: bool) -> (Vec<u8>, Unit) {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut config = Config::in_memory();
    config.dir = dir.path().to_path_buf();
    if rdb {
        config.snapshot_format = crate::config::SnapshotFormat::Rdb;
    }
    let unit = vec![
        cmd(0, "SET p0 zero"),
        cmd(0, "SET p1 one"),
        cmd(2, "HSET h f v g w"),
    ];
    let mut engine =
        Engine::open_with_io(config, Arc::new(crate::persist::io::RealIo)).expect("engine");
    let mut s = engine.new_session();
    s.authenticated = true;
    for (db, argv) in &unit {
        let dbs = db.to_string();
        run(&mut engine, &mut s, &[b"SELECT", dbs.as_bytes()]);
        let argv: Vec<&[u8]> = argv.iter().map(|a| a.as_bytes()).collect();
        run(&mut engine, &mut s, &argv);
    }
    let reply = run(&mut engine, &mut s, &[b"SAVE"]);
    assert!(matches!(reply, Reply::Simple(_)), "{reply:?}");
    let name = if rdb { "dump.rdb" } else { "dump.hoz" };
    drop(engine);
    (std::fs::read(dir.path().join(name)).expect("saved"), unit)
}

#[test]
fn dump_hoz_preamble_then_a_damaged_batch_reports_absolute_offsets_and_salvages() {
    let (image, preamble_unit) = snapshot(false);
    let mut log = image.clone();
    log.extend_from_slice(FILE_HEADER);
    let units = sets(4);
    let (mut data, ranges) = hozon_log(log, &units, |i| 5000 + i as i64);
    assert_eq!(
        load(&data).unwrap(),
        expected([&preamble_unit].into_iter().chain(&units))
    );
    data[ranges[1].start + 20] ^= 0x02;
    let problems = check(file(), &data);
    assert_eq!(problems.len(), 1, "{problems:?}");
    assert!(ranges[1].start > image.len());
    assert_eq!(
        (problems[0].start, problems[0].end),
        (ranges[1].start as u64, ranges[1].end as u64)
    );
    let plan = plan_salvage(file(), &data, false).unwrap();
    let kept = except(&units, &[1]);
    let want = expected([&preamble_unit].into_iter().chain(&kept));
    let out = materialise(&plan, &data);
    assert_eq!(load(&out).unwrap(), want);
    // As the server loads it from its directory.
    let dir = tempfile::tempdir().expect("tempdir");
    std::fs::write(dir.path().join("appendonly.aof"), &out).expect("write");
    let mut config = Config::in_memory();
    config.appendonly = true;
    config.dir = dir.path().to_path_buf();
    config.appendfilename = "appendonly.aof".into();
    let mut engine = Engine::open_with_io(config, Arc::new(crate::persist::io::RealIo))
        .expect("the server opens the salvaged file");
    assert_eq!(state(&mut engine), want);
}

#[test]
fn rdb_preamble_then_redis_resp_with_damage_salvages() {
    let (image, preamble_unit) = snapshot(true);
    let units = sets(4);
    let ts = |i: usize| 1_700_000_000 + i as i64;
    let (mut data, ranges) = redis_log(image.clone(), &units, Some(&ts));
    data[ranges[2].1 + 1] = b'x';
    let problems = check(file(), &data);
    assert_eq!(problems.len(), 1, "{problems:?}");
    assert_eq!(
        (problems[0].start, problems[0].end),
        (ranges[2].1 as u64, ranges[3].0.start as u64)
    );
    let plan = plan_salvage(file(), &data, false).unwrap();
    let kept = except(&units, &[2]);
    assert_eq!(
        load(&materialise(&plan, &data)).unwrap(),
        expected([&preamble_unit].into_iter().chain(&kept))
    );
    // The preamble is kept by truncate.
    let plan = plan_truncate(file(), &data, 0).unwrap();
    assert_eq!(plan.dropped[0].start, image.len() as u64);
}

#[test]
fn a_damaged_preamble_is_reported_and_the_log_after_it_still_checked() {
    let (mut image, _) = snapshot(false);
    let len = image.len();
    image[len / 2] ^= 0x01;
    image.extend_from_slice(FILE_HEADER);
    let units = sets(4);
    let (mut data, ranges) = hozon_log(image, &units, |i| 5000 + i as i64);
    data[ranges[1].start + 20] ^= 0x02;
    let problems = check(file(), &data);
    assert_eq!(problems.len(), 2, "{problems:?}");
    assert_eq!(problems[0].kind, ProblemKind::DamagedPreamble);
    assert_eq!((problems[0].start, problems[0].end), (0, len as u64));
    assert_eq!(problems[1].start, ranges[1].start as u64);
    let refusal = plan_salvage(file(), &data, true).unwrap_err();
    assert!(refusal.0.contains("preamble"), "{refusal:?}");
    assert!(plan_fix(file(), &data).is_err());
}

#[test]
fn a_file_that_starts_like_no_aof_is_not_cut_away() {
    let (image, _) = snapshot(true);
    let mut data = image.clone();
    data[0] ^= 0x01; // "REDIS" damaged: no longer recognised as RDB
    let (data, _) = redis_log(data, &sets(2), None);
    let problems = check(file(), &data);
    assert_eq!(problems[0].start, 0);
    assert_eq!(problems[0].remedy, Remedy::None);
    assert!(plan_fix(file(), &data).is_err());
    assert!(plan_salvage(file(), &data, true).is_err());
    assert!(plan_fix(file(), b"garbage").is_err());
}

/// An AOF written by a real Redis 7 (`#TS:` lines on), when
/// `redis-server` is installed: damaged in the middle, it salvages
/// to exactly the other commands.
#[test]
fn a_real_redis7_aof_with_ts_lines_salvages() {
    use std::process::{Command, Stdio};
    let dir = tempfile::tempdir().expect("tempdir");
    let sock = dir.path().join("s.sock");
    let started = Command::new("redis-server")
        .args(["--port", "0", "--save", "", "--daemonize", "yes"])
        .args(["--appendonly", "yes", "--aof-timestamp-enabled", "yes"])
        .args(["--appendfsync", "always"])
        .arg("--dir")
        .arg(dir.path())
        .arg("--unixsocket")
        .arg(&sock)
        .stdout(Stdio::null())
        .status();
    if !started.is_ok_and(|s| s.success()) {
        eprintln!("redis-server is not available: skipped");
        return;
    }
    let cli = |input: &str| {
        let mut child = Command::new("redis-cli")
            .arg("-s")
            .arg(&sock)
            .stdin(Stdio::piped())
            .stdout(Stdio::null())
            .spawn()
            .expect("redis-cli");
        use std::io::Write;
        let mut stdin = child.stdin.take().expect("piped stdin");
        stdin
            .write_all(input.as_bytes())
            .expect("write to redis-cli");
        drop(stdin);
        child.wait().expect("redis-cli ran")
    };
    for _ in 0..100 {
        if sock.exists() {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    cli("SET a 1\nSET b 2\nRPUSH l x y\nSELECT 3\nSET c 3\n");
    cli("SHUTDOWN NOSAVE\n");
    let incr = dir.path().join("appendonlydir/appendonly.aof.1.incr.aof");
    let data = std::fs::read(&incr).expect("Redis wrote its incr AOF");
    assert!(
        data.starts_with(b"#TS:"),
        "{:?}",
        String::from_utf8_lossy(&data)
    );
    let mut set_b = Vec::new();
    encode_command(&mut set_b, &["SET", "b", "2"]);
    let at = find(&data, &set_b).expect("SET b in the file");
    let mut damaged = data.clone();
    damaged[at + 4] = b'x';
    let problems = check(file(), &damaged);
    assert_eq!(problems.len(), 1, "{problems:?}");
    assert_eq!(
        (problems[0].start, problems[0].end),
        (at as u64, (at + set_b.len()) as u64)
    );
    let plan = plan_salvage(file(), &damaged, false).unwrap();
    let want = expected(&[vec![
        cmd(0, "SET a 1"),
        cmd(0, "RPUSH l x y"),
        cmd(3, "SET c 3"),
    ]]);
    assert_eq!(load(&materialise(&plan, &damaged)).unwrap(), want);
    let plan = plan_truncate(file(), &data, 0).unwrap();
    assert_eq!(load(&materialise(&plan, &data)).unwrap(), State::new());
}

#[test]
fn an_unknown_command_in_an_unfinished_multi_at_the_end_is_cut_with_it() {
    let units = sets(2);
    let (mut data, _) = redis_file(&units, None);
    let multi = data.len();
    encode_command(&mut data, &["multi"]);
    encode_command(&mut data, &["set", "x", "1"]);
    encode_command(&mut data, &["flubber"]);
    encode_command(&mut data, &["set", "y", "2"]);
    let problems = check(file(), &data);
    assert_eq!(problems.len(), 1, "{problems:?}");
    assert_eq!(problems[0].kind, ProblemKind::UnfinishedMulti);
    assert_eq!(
        (problems[0].start, problems[0].end),
        (multi as u64, data.len() as u64)
    );
    assert_eq!(problems[0].commands_or_keys, Some(3));
    let plan = plan_fix(file(), &data).unwrap();
    assert_eq!(load(&materialise(&plan, &data)).unwrap(), expected(&units));
}

/// A small deterministic generator (xorshift).
struct Rng(u64);

impl Rng {
    fn below(&mut self, n: usize) -> usize {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        (self.0 % n as u64) as usize
    }
}

#[test]
fn random_damage_never_panics_and_every_plan_made_loads() {
    let hozon_units = vec![
        vec![cmd(0, "SET a 1"), cmd(0, "APPEND a xy")],
        vec![cmd(1, "SET b 2")],
        vec![cmd(1, "DEL a b"), cmd(0, "SET c 3")],
        vec![cmd(0, "APPEND c zz")],
    ];
    let (hozon, _) = hozon_file(&hozon_units, |i| 1_700_000_000_000 + 1000 * i as i64);
    let plain_units = vec![
        vec![cmd(0, "SET a 1"), cmd(0, "APPEND a xy")],
        vec![cmd(1, "SET b 2")],
        vec![cmd(1, "DEL a b"), cmd(0, "SET c 3")],
    ];
    let ts = |i: usize| 1_700_000_000 + i as i64;
    let (mut plain, _) = redis_file(&plain_units, Some(&ts));
    encode_command(&mut plain, &["multi"]);
    encode_command(&mut plain, &["set", "t", "1"]);
    encode_command(&mut plain, &["append", "t", "2"]);
    encode_command(&mut plain, &["exec"]);
    // A Redis file hozon appended to, and a file with a preamble.
    let mut mixed = plain.clone();
    mixed.extend_from_slice(&hozon);
    let (mut preambled, _) = snapshot(false);
    preambled.extend_from_slice(&hozon);
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    let mut salvaged = 0;
    for original in [&hozon, &plain, &mixed, &preambled] {
        for round in 0..2000 {
            let mut data = original.clone();
            match rng.below(4) {
                0 => data.truncate(rng.below(data.len())),
                _ => {
                    for _ in 0..=rng.below(3) {
                        let at = rng.below(data.len());
                        data[at] ^= 1 << rng.below(8);
                    }
                }
            }
            let what = format!("round {round}: {:?}", String::from_utf8_lossy(&data));
            let problems = check(file(), &data);
            for p in &problems {
                assert!(
                    p.start <= p.end && p.end <= data.len() as u64,
                    "{what}: {p:?}"
                );
            }
            // check agrees with the loader.
            assert_eq!(
                problems.is_empty(),
                load(&data).is_ok(),
                "{what}: {problems:?} {:?}",
                load(&data)
            );
            let plans = [
                plan_fix(file(), &data),
                plan_salvage(file(), &data, false),
                plan_salvage(file(), &data, true),
                plan_truncate(file(), &data, 1_700_000_001_500),
            ];
            for plan in plans.iter().flatten() {
                let out = materialise(plan, &data);
                if plan.content.is_some() {
                    salvaged += 1;
                    assert!(load(&out).is_ok(), "{what}: {plan:?}: {:?}", load(&out));
                    let left = check(file(), &out);
                    assert!(left.is_empty(), "{what}: {plan:?} leaves {left:?}");
                }
            }
        }
    }
    assert!(salvaged > 100, "{salvaged}");
    // Pure noise, made of the bytes RESP is made of.
    let alphabet = b"*$#\r\n0123-SETselectmultiexc hz1TS:";
    for _ in 0..2000 {
        let len = rng.below(120);
        let data: Vec<u8> = (0..len)
            .map(|_| alphabet[rng.below(alphabet.len())])
            .collect();
        let _ = check(file(), &data);
        for plan in [
            plan_fix(file(), &data),
            plan_salvage(file(), &data, true),
            plan_truncate(file(), &data, 5000),
        ]
        .iter()
        .flatten()
        {
            if plan.content.is_some() {
                let out = materialise(plan, &data);
                assert!(load(&out).is_ok(), "{data:?}: {plan:?}");
            }
        }
    }
}
