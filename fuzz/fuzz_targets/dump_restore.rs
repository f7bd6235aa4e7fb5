//! cargo-fuzz target `dump_restore`: the property check in
//! `fuzz/checks/dump_restore.rs` (docs/fuzzing.md).

#![no_main]

#[path = "../checks/mod.rs"]
mod checks;
// tools/repair's own modules, at the crate root where its aof.rs looks
// for `crate::model` (used by the `repair_salvage` check).
#[allow(dead_code)]
#[path = "../../tools/repair/model.rs"]
mod model;
#[allow(dead_code)]
#[path = "../../tools/repair/aof.rs"]
mod repair_aof;

#[global_allocator]
static ALLOC: checks::alloc::Counting = checks::alloc::Counting;

libfuzzer_sys::fuzz_target!(|data: &[u8]| checks::dump_restore::check(data));
