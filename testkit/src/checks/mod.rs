//! The property checks of every fuzz target, in one place: each
//! `fuzz/fuzz_targets/<target>.rs` calls `testkit::checks::<target>::check`,
//! and the `fuzz_corpus` test (tests/fuzz_corpus/main.rs) runs the same
//! function over the committed corpus in `fuzz/seeds/<target>/`. A check
//! panics when a property fails; a decoder reporting damage is not a
//! failure.

pub mod alloc;
pub mod canon;

pub mod aof_load;
pub mod command_args;
pub mod dump_restore;
pub mod rdb_read;
pub mod repair_salvage;
pub mod resp_request;
pub mod snapshot_read;

/// A target's property check: panics when a property fails.
pub type Check = fn(&[u8]);

/// Every target: its name (the directory of its corpus) and its check.
pub const TARGETS: &[(&str, Check)] = &[
    ("resp_request", resp_request::check),
    ("command_args", command_args::check),
    ("aof_load", aof_load::check),
    ("snapshot_read", snapshot_read::check),
    ("rdb_read", rdb_read::check),
    ("repair_salvage", repair_salvage::check),
    ("dump_restore", dump_restore::check),
];

/// The fixed clock every check uses, so a run depends on its input only
/// (2026-01-01T00:00:00Z in Unix ms).
pub const NOW_MS: i64 = 1_767_225_600_000;
