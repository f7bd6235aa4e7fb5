//! cargo-fuzz target `repair_salvage`: the property check in
//! `testkit/src/checks/repair_salvage.rs` (docs/fuzzing.md).

#![no_main]

#[global_allocator]
static ALLOC: testkit::checks::alloc::Counting = testkit::checks::alloc::Counting;

libfuzzer_sys::fuzz_target!(|data: &[u8]| testkit::checks::repair_salvage::check(data));
