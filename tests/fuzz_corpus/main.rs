//! Runs every cargo-fuzz target's property check (fuzz/) over its committed
//! corpus, so plain `cargo test` exercises what the fuzzers found.
//!
//! The checks are the very functions the fuzz targets call
//! (`testkit::checks`, testkit/src/checks/); the corpus of target `T` is
//! `fuzz/seeds/T/` (docs/fuzzing.md). The RDB targets also run over every
//! fixture of `fixtures/rdb/`. A check that fails names the input file.

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::{Path, PathBuf};

use testkit::checks;

#[global_allocator]
static ALLOC: checks::alloc::Counting = checks::alloc::Counting;

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn files_in(dir: &Path) -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|entry| entry.expect("a directory entry").path())
        .filter(|p| p.is_file())
        .collect();
    files.sort();
    files
}

/// Inputs of `target`: its corpus files, plus the RDB fixtures (each with
/// the control bytes that keep and that fix the checksum) for the targets
/// that read RDB files.
fn inputs(target: &str) -> Vec<(String, Vec<u8>)> {
    let dir = root().join("fuzz/seeds").join(target);
    let mut inputs: Vec<(String, Vec<u8>)> = files_in(&dir)
        .into_iter()
        .map(|p| {
            let data = std::fs::read(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()));
            (p.display().to_string(), data)
        })
        .collect();
    assert!(!inputs.is_empty(), "{} holds no corpus", dir.display());
    let fixture_ctl: &[u8] = match target {
        "rdb_read" => &[0, 1],
        "repair_salvage" => &[1, 5],
        _ => &[],
    };
    if !fixture_ctl.is_empty() {
        for p in files_in(&root().join("fixtures/rdb")) {
            if p.extension().is_some_and(|e| e == "rdb") {
                let file = std::fs::read(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()));
                for &ctl in fixture_ctl {
                    let mut data = vec![ctl];
                    data.extend_from_slice(&file);
                    inputs.push((format!("{} (control byte {ctl})", p.display()), data));
                }
            }
        }
    }
    inputs
}

fn run(target: &str) {
    let check = checks::TARGETS
        .iter()
        .find(|(name, _)| *name == target)
        .map(|(_, check)| *check)
        .expect("a target of checks::TARGETS");
    let mut failed = Vec::new();
    for (name, data) in inputs(target) {
        if catch_unwind(AssertUnwindSafe(|| check(&data))).is_err() {
            failed.push(name);
        }
    }
    assert!(failed.is_empty(), "{target}: the check fails on {failed:?}");
}

#[test]
fn every_target_has_a_corpus_test() {
    let names: Vec<&str> = checks::TARGETS.iter().map(|(name, _)| *name).collect();
    let mut targets: Vec<String> = files_in(&root().join("fuzz/fuzz_targets"))
        .iter()
        .filter_map(|p| p.file_stem().map(|s| s.to_string_lossy().into_owned()))
        .collect();
    targets.sort();
    let mut sorted = names.clone();
    sorted.sort();
    assert_eq!(targets, sorted, "fuzz/fuzz_targets vs checks::TARGETS");
}

#[test]
fn resp_request_corpus() {
    run("resp_request");
}

#[test]
fn command_args_corpus() {
    run("command_args");
}

#[test]
fn aof_load_corpus() {
    run("aof_load");
}

#[test]
fn snapshot_read_corpus() {
    run("snapshot_read");
}

#[test]
fn rdb_read_corpus() {
    run("rdb_read");
}

#[test]
fn repair_salvage_corpus() {
    run("repair_salvage");
}

#[test]
fn dump_restore_corpus() {
    run("dump_restore");
}
