//! cargo-fuzz target `snapshot_read`: the property check in
//! `fuzz/checks/snapshot_read.rs` (docs/fuzzing.md).

#![no_main]

#[global_allocator]
static ALLOC: checks::alloc::Counting = checks::alloc::Counting;

libfuzzer_sys::fuzz_target!(|data: &[u8]| checks::snapshot_read::check(data));
