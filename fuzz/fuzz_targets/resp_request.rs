//! cargo-fuzz target `resp_request`: the property check in
//! `testkit/src/checks/resp_request.rs` (docs/fuzzing.md).

#![no_main]

#[global_allocator]
static ALLOC: testkit::checks::alloc::Counting = testkit::checks::alloc::Counting;

libfuzzer_sys::fuzz_target!(|data: &[u8]| testkit::checks::resp_request::check(data));
