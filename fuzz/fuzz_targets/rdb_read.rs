//! cargo-fuzz target `rdb_read`: the property check in
//! `fuzz/checks/rdb_read.rs` (docs/fuzzing.md).

#![no_main]

#[global_allocator]
static ALLOC: checks::alloc::Counting = checks::alloc::Counting;

libfuzzer_sys::fuzz_target!(|data: &[u8]| checks::rdb_read::check(data));
