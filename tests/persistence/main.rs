//! Persistence tests: AOF replay, power loss and I/O faults through the
//! fault-injecting backend, damaged files, crashes of a real server, and
//! file interop with Redis.

use testkit::harness;

mod common;

mod aof_faults;
mod aof_replay;
mod chain_durability;
mod crash;
mod debug_reload;
mod eviction;
mod functions;
mod interop;
mod loading;
mod outside_faults;
mod power_cut;
mod rdb_damage;
mod rdb_fixtures;
mod rdb_roundtrip;
mod repl_durability;
mod rewrite;
mod rewrite_faults;
mod runtime;
mod scripting;
mod server_faults;
mod snapshots;
mod sort_store;
mod startup;
mod streams_and_transactions;
mod typed_errors;
mod use_cases;
