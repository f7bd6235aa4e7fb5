//! Tests of the `hozon-repair` binary as a user runs it: usage, dry runs,
//! `--apply` and `--output` safety, the data-directory lock, SIGKILL
//! during `--apply`, and the engine's messages naming commands that work.
//! The analysis of each file kind (every damage kind found at its offset;
//! fix/salvage/truncate results loaded by the engine) is tested next to
//! its code: `cargo test --lib tools::repair` (src/tools/repair/aof/) and
//! `cargo test --bin hozon-repair` (tools/repair/dump/).

mod cli;
