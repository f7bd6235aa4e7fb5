//! cargo-fuzz target `resp_request`: the property check in
//! `fuzz/checks/resp_request.rs` (docs/fuzzing.md).

#![no_main]

#[global_allocator]
static ALLOC: checks::alloc::Counting = checks::alloc::Counting;

libfuzzer_sys::fuzz_target!(|data: &[u8]| checks::resp_request::check(data));
