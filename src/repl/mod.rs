//! Redis 7.0's replication protocol, as master and as replica
//! (docs/replication.md): the pure parts, with no sockets and no files.
//! Replication ids and positions and their `#hzr` AOF line ([`ids`]); the
//! master's PSYNC decision and its replies ([`psync`]); the stream encoder,
//! a unit's effects as the RESP bytes Redis propagates ([`stream`]).
//!
//! This module sits in the files layer, beside `persist`: it encodes what
//! the AOF logs (`persist::aof::Effect`) for the stream and frames the RDB
//! payload the capture produces. The engine and the server drive it.

pub mod ids;
pub mod psync;
pub mod stream;
