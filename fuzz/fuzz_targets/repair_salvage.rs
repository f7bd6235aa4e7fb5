//! cargo-fuzz target `repair_salvage`: the property check in
//! `fuzz/checks/repair_salvage.rs` (docs/fuzzing.md).

#![no_main]

#[global_allocator]
static ALLOC: checks::alloc::Counting = checks::alloc::Counting;

libfuzzer_sys::fuzz_target!(|data: &[u8]| checks::repair_salvage::check(data));
