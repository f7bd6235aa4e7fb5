//! Differential tests: the same commands go to a real `redis-server` and to
//! `hozon-server`; replies must match byte for byte (RESP2 and RESP3).
//!
//! One test binary (not one per file) keeps link time down; each module
//! covers one command family.

use testkit::harness;

mod acl;
mod acl_file;
mod bitops;
mod blocking;
mod config;
mod config_rewrite;
mod debug;
mod dump;
mod eviction;
mod exporter;
mod functions;
mod functions_busy;
mod functions_dump;
mod geo;
mod hash;
mod hyperloglog;
mod info_stats;
mod keys;
mod latency;
mod list;
mod loading;
mod lolwut;
mod memory;
mod migrate;
mod monitor;
mod multi;
mod multi_replica;
mod notify;
mod pause;
mod protocol;
mod pubsub;
mod pubsub_limits;
mod scripting;
mod scripting_busy;
mod server;
mod set;
mod slowlog;
mod sort;
mod stream;
mod stream_group;
mod stream_group_swapdb;
mod strings;
mod tracking;
mod usecases;
mod zset;
