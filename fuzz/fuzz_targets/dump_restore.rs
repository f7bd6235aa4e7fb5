//! cargo-fuzz target `dump_restore`: the property check in
//! `fuzz/checks/dump_restore.rs` (docs/fuzzing.md).

#![no_main]

#[global_allocator]
static ALLOC: checks::alloc::Counting = checks::alloc::Counting;

libfuzzer_sys::fuzz_target!(|data: &[u8]| checks::dump_restore::check(data));
