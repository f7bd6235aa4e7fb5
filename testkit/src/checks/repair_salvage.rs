//! `repair_salvage`: what `hozon-repair` reads damaged files with. For an
//! AOF that is the tool's own planner (`hozon::tools::repair::aof`, the
//! library module the tool runs); for dumps, the library salvage
//! functions the tool's dump planner calls (`rdb::reader::salvage`,
//! `persist::snapshot::salvage_streaming`): the planner itself writes
//! the salvaged dump to a file by path, which a fuzz loop should not do.
//!
//! Input: one control byte, then a file. Bits 0–1 of the control byte
//! pick the reader: 0 the AOF planner, 1 RDB salvage (the last 8 bytes
//! replaced by the CRC-64 unless bit 2 is set, as in `rdb_read`), 2
//! dump.hoz salvage, 3 all three. Properties:
//! - nothing panics; salvage's heap stays within a bound proportional to
//!   the file;
//! - AOF: the file a `salvage` plan writes has no problem left for
//!   `check`, and the log in it walks without damage or torn tail; so
//!   does the file a `fix` plan writes, when `fix` plans one; a file
//!   `check` finds clean gets no salvage content;
//! - RDB and dump.hoz: a file that loads cleanly is salvaged whole (no
//!   damaged region, the same keys); what salvage keeps (the first of
//!   each key, as the tool keeps), written again with the library
//!   writer, loads cleanly to the same keys; salvage keeps no more keys
//!   than the file has room for.

use std::path::Path;
use std::sync::Arc;

use hozon::keyspace::Keyspace;
use hozon::persist::aof;
use hozon::persist::io::FaultyIo;
use hozon::persist::snapshot::{self, LoadedKey};
use hozon::rdb::reader;

use super::{alloc, canon, rdb_read};
use hozon::tools::repair::aof as repair_aof;
use hozon::tools::repair::model::{write_pieces, Content, Plan};

fn written(plan: &Plan, original: &[u8]) -> Option<Vec<u8>> {
    match &plan.content {
        None => None,
        Some(Content::Pieces(pieces)) => {
            let mut out = Vec::new();
            write_pieces(pieces, original, &mut out)
                .unwrap_or_else(|e| panic!("a plan's pieces do not fit the original: {e}"));
            Some(out)
        }
        Some(Content::Written(_)) => panic!("an AOF plan writes a whole new file"),
    }
}

fn assert_clean_aof(file: &[u8], what: &str) {
    let path = Path::new("fuzz.aof");
    let problems = repair_aof::check(path, file);
    assert!(
        problems.is_empty(),
        "{what} still has problems: {problems:?}"
    );
    let preamble = file.starts_with(&snapshot::MAGIC) || reader::is_rdb(file);
    if !preamble {
        match aof::walk(file, &mut |_| std::ops::ControlFlow::Continue(())) {
            Ok(report) => assert!(report.torn.is_none(), "{what} has a torn tail: {report:?}"),
            Err(e) => panic!("{what} does not walk: {e:?}"),
        }
    }
}

fn check_aof(file: &[u8]) {
    let path = Path::new("fuzz.aof");
    let problems = repair_aof::check(path, file);
    for allow_partial in [false, true] {
        if let Ok(plan) = repair_aof::plan_salvage(path, file, allow_partial) {
            match written(&plan, file) {
                Some(out) => assert_clean_aof(&out, "the salvaged AOF"),
                None => assert!(
                    problems.is_empty(),
                    "salvage changes nothing in a file with problems: {problems:?}"
                ),
            }
        }
    }
    if let Ok(plan) = repair_aof::plan_fix(path, file) {
        if let Some(out) = written(&plan, file) {
            assert_clean_aof(&out, "the fixed AOF");
        }
    }
    if problems.is_empty() {
        if let Ok(plan) = repair_aof::plan_salvage(path, file, false) {
            assert!(plan.content.is_none(), "a clean AOF gets salvage content");
        }
    }
}

fn first_of_each(keys: Vec<LoadedKey>) -> Vec<LoadedKey> {
    let mut seen = std::collections::HashSet::new();
    keys.into_iter()
        .filter(|k| seen.insert((k.db, k.key.to_vec())))
        .collect()
}

fn check_rdb(file: &[u8]) {
    let mut options = rdb_read::options();
    // The tool's bound on SELECTDB while salvaging.
    options.databases = 1 << 16;
    let mut keys = Vec::new();
    let (salvaged, peak) = alloc::peak_of(|| {
        reader::salvage(file, &options, &mut |_, k| {
            keys.push(k);
            Ok(())
        })
    });
    alloc::assert_bounded("RDB salvage", peak, file.len(), 512);
    let Ok(report) = salvaged else {
        return;
    };
    // A record is at least a type byte, a key length and a value length.
    assert!(
        keys.len() * 3 <= file.len(),
        "{} keys from {} bytes",
        keys.len(),
        file.len()
    );
    let keys = first_of_each(keys);
    let kept = canon::of_keys(&keys);
    if let Ok((summary, loaded)) = rdb_read::load_all(file) {
        if summary.len == file.len() {
            assert!(
                report.damaged.is_empty(),
                "a clean file has damage: {:?}",
                report.damaged
            );
            canon::assert_same("load vs salvage", &canon::of_keys(&loaded), &kept);
        }
    }
    let rewritten = rdb_read::encode(&keys);
    let (_, again) = rdb_read::load_all_with(&rewritten, &options)
        .unwrap_or_else(|e| panic!("the salvaged keys, written, do not load: {e}"));
    canon::assert_same(
        "salvaged vs written and loaded",
        &kept,
        &canon::of_keys(&again),
    );
}

fn check_snapshot(file: &[u8]) {
    // Every key kept, default limits, decoded on this thread alone.
    let read = snapshot::ReadOptions::default();
    let mut keys = Vec::new();
    let (salvaged, peak) =
        alloc::peak_of(|| snapshot::salvage_streaming(file, &read, |block| keys.extend(block)));
    alloc::assert_bounded("dump.hoz salvage", peak, file.len(), 256);
    assert!(
        keys.len() * 3 <= file.len(),
        "{} keys from {} bytes",
        keys.len(),
        file.len()
    );
    let keys = first_of_each(keys);
    let kept = canon::of_keys(&keys);
    if let Ok(loaded) = snapshot::load(file, &read) {
        assert!(
            salvaged.damages.is_empty(),
            "a clean file has damage: {:?}",
            salvaged.damages
        );
        canon::assert_same("load vs salvage", &canon::of_keys(loaded.keys()), &kept);
    }
    let databases = keys.iter().map(|k| k.db + 1).max().unwrap_or(1);
    if databases > 1 << 12 {
        return;
    }
    let mut keyspace = Keyspace::new(databases);
    let loaded = snapshot::Loaded {
        blocks: vec![keys],
        ..snapshot::Loaded::default()
    };
    loaded
        .into_keyspace(&mut keyspace)
        .unwrap_or_else(|e| panic!("the salvaged keys do not go into a keyspace: {e}"));
    let io = Arc::new(FaultyIo::new());
    let dir = Path::new("/fuzz");
    snapshot::save_keyspace(&keyspace, i64::MIN, io.clone(), dir, "dump.hoz")
        .unwrap_or_else(|e| panic!("saving the salvaged keys fails: {e}"));
    let saved = io
        .contents(&dir.join("dump.hoz"))
        .expect("the saved file exists");
    let again = snapshot::load(&saved, &read)
        .unwrap_or_else(|e| panic!("the salvaged dump does not load: {e}"));
    canon::assert_same(
        "salvaged vs written and loaded",
        &kept,
        &canon::of_keys(again.keys()),
    );
}

/// The check (see the module documentation).
pub fn check(data: &[u8]) {
    let Some((&ctl, rest)) = data.split_first() else {
        return;
    };
    let which = ctl & 3;
    if which == 0 || which == 3 {
        check_aof(rest);
    }
    if which == 1 || which == 3 {
        let mut prefixed = vec![(ctl >> 2) & 1];
        prefixed.extend_from_slice(rest);
        check_rdb(&rdb_read::file_of(&prefixed));
    }
    if which == 2 || which == 3 {
        check_snapshot(rest);
    }
}
