//! cargo-fuzz target `aof_load`: the property check in
//! `fuzz/checks/aof_load.rs` (docs/fuzzing.md).

#![no_main]

#[global_allocator]
static ALLOC: checks::alloc::Counting = checks::alloc::Counting;

libfuzzer_sys::fuzz_target!(|data: &[u8]| checks::aof_load::check(data));
