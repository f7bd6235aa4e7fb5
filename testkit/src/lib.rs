//! What the test suites of the root package (tests/) and the cargo-fuzz
//! targets (fuzz/) share, compiled once as an ordinary crate (a
//! dev-dependency of `hozon`, a dependency of the fuzz crate):
//!
//! - [`harness`]: a real `redis-server` and a `hozon-server` started side
//!   by side and fed the same commands (the `diff`, `persistence` and
//!   `robustness` suites); behind the `harness` feature, on by default.
//! - [`rdb_files`]: hand-made RDB files, hostile and refused ones (the
//!   `persistence` and `inspect` suites).
//! - [`value`]: RESP2 replies decoded into values (the `repl` and
//!   `replica` suites).
//! - [`clients`]: the pinned real client programs (redis-py, ioredis).
//! - [`certs`]: TLS certificates made with openssl.
//! - [`checks`]: the property check of every fuzz target, which the
//!   `fuzz_corpus` suite runs over the committed corpus (docs/fuzzing.md).

#[cfg(feature = "harness")]
pub mod certs;
pub mod checks;
#[cfg(feature = "harness")]
pub mod clients;
#[cfg(feature = "harness")]
pub mod harness;
pub mod rdb_files;
#[cfg(feature = "harness")]
pub mod value;
