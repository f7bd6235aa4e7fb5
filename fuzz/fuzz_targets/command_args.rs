//! cargo-fuzz target `command_args`: the property check in
//! `fuzz/checks/command_args.rs` (docs/fuzzing.md).

#![no_main]

#[global_allocator]
static ALLOC: checks::alloc::Counting = checks::alloc::Counting;

libfuzzer_sys::fuzz_target!(|data: &[u8]| checks::command_args::check(data));
