//! cargo-fuzz target `dump_restore`: the property check in
//! `testkit/src/checks/dump_restore.rs` (docs/fuzzing.md).

#![no_main]

#[global_allocator]
static ALLOC: testkit::checks::alloc::Counting = testkit::checks::alloc::Counting;

libfuzzer_sys::fuzz_target!(|data: &[u8]| testkit::checks::dump_restore::check(data));
