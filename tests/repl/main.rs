//! Replication, master side (issue 25; docs/replication.md §2, §3, §6, §8):
//! a real redis-server 7.0.15 replica attached to a master that is either
//! redis-server (each scenario's own check: those tests pass today) or
//! hozon-server (the program under test: ignored until the master side is
//! merged, one test per scenario so they can be enabled one by one).
//!
//! Every scenario is one function taking the master program; the `#[test]`
//! functions are its `_redis_master` and `_hozon_master` instances.

mod harness;

mod bad_input;
mod dataset;
mod fake_replica;
mod full_sync;
mod info;
mod liveness;
mod protocol;
mod rdb_cli;
mod selfcheck;
mod stream;
mod transfer;
mod wait;
