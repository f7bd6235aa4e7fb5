//! Redis 7.0's replication protocol, as master and as replica
//! (docs/replication.md): the pure parts, with no sockets and no files.
//! Replication ids and positions and their `#hzr` AOF line ([`ids`]); the
//! shared replication buffer, the backlog and the replicas' cursors into it
//! ([`buffer`]).
//!
//! This module sits in the files layer, beside `persist`: it encodes what
//! the AOF logs (`persist::aof::Effect`) for the stream and frames the RDB
//! payload the capture produces. The engine and the server drive it.

pub mod buffer;
pub mod ids;
