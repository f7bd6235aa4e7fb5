//! cargo-fuzz target `command_args`: the property check in
//! `testkit/src/checks/command_args.rs` (docs/fuzzing.md).

#![no_main]

#[global_allocator]
static ALLOC: testkit::checks::alloc::Counting = testkit::checks::alloc::Counting;

libfuzzer_sys::fuzz_target!(|data: &[u8]| testkit::checks::command_args::check(data));
