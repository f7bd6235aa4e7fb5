//! Support code of the command-line tools `hozon-inspect` and
//! `hozon-repair`, and of the fuzz checks that exercise the repair tool:
//! what more than one of them needs, compiled once here instead of being
//! copied or included by path. Not a stable API: it changes with the tools.
//!
//! Nothing here needs the `tools` feature's crates (argument parsing,
//! regular expressions, progress bars); those stay in the binaries.

pub mod manifest;
pub mod repair;
pub mod report;
pub mod time;
