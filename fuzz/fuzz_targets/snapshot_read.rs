//! cargo-fuzz target `snapshot_read`: the property check in
//! `testkit/src/checks/snapshot_read.rs` (docs/fuzzing.md).

#![no_main]

#[global_allocator]
static ALLOC: testkit::checks::alloc::Counting = testkit::checks::alloc::Counting;

libfuzzer_sys::fuzz_target!(|data: &[u8]| testkit::checks::snapshot_read::check(data));
