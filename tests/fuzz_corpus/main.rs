//! Runs every cargo-fuzz target's property check (fuzz/) over its committed
//! corpus, so plain `cargo test` exercises what the fuzzers found.
