//! cargo-fuzz target `rdb_read`: the property check in
//! `testkit/src/checks/rdb_read.rs` (docs/fuzzing.md).

#![no_main]

#[global_allocator]
static ALLOC: testkit::checks::alloc::Counting = testkit::checks::alloc::Counting;

libfuzzer_sys::fuzz_target!(|data: &[u8]| testkit::checks::rdb_read::check(data));
