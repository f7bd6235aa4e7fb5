//! cargo-fuzz target `aof_load`: the property check in
//! `testkit/src/checks/aof_load.rs` (docs/fuzzing.md).

#![no_main]

#[global_allocator]
static ALLOC: testkit::checks::alloc::Counting = testkit::checks::alloc::Counting;

libfuzzer_sys::fuzz_target!(|data: &[u8]| testkit::checks::aof_load::check(data));
