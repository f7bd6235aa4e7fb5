//! Replication, master side (issue 25; docs/replication.md §2, §3, §6, §8):
//! a real redis-server 7.0.15 replica (or a fake one over raw TCP) attached
//! to a master that is either redis-server (each scenario's own check: those
//! tests pass today) or hozon-server (the program under test).
//!
//! Every scenario is one function taking the master program; the `#[test]`
//! functions are its `_redis_master` and `_hozon_master` instances. A hozon
//! instance that fails against main's master side (d1e0d3d) is
//! `#[ignore]`d with the reason, so each can be enabled when its cause is
//! fixed: `cargo test --test repl -- --ignored <name>`. `REPL_TEST_LOGS=1`
//! prints every server's log (a failing test prints those of its servers).
//!
//! Files: `harness.rs` (servers, polling, INFO), `dataset.rs` (the dataset
//! and the key-by-key comparison), `fake_replica.rs` (the raw-TCP replica),
//! one file per scenario group; `selfcheck.rs` checks the comparison.

mod harness;
pub use testkit::value;

mod bad_input;
mod dataset;
mod failover;
mod fake_replica;
mod full_sync;
mod info;
mod liveness;
mod propagation;
mod protocol;
mod rdb_cli;
mod replica_errors;
mod resync;
mod selfcheck;
mod shutdown;
mod stream;
mod transfer;
mod wait;
