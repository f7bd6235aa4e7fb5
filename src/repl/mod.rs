//! Redis 7.0's replication protocol, as master and as replica
//! (docs/replication.md): the pure parts, with no sockets and no files.
//! Replication ids and positions and their `#repl` AOF line ([`ids`]); the
//! master's PSYNC decision and its replies ([`psync`]); the stream encoder,
//! a unit's effects as the RESP bytes Redis propagates ([`stream`]). The
//! full sync payload's framing: the master's `$<len>` and `$EOF:<mark>`
//! headers, the replica's line reader, length counter and EOF scanner
//! ([`payload`]). The replica's handshake with its master, a sans-IO state
//! machine with Redis's replies and log lines ([`handshake`]). The shared
//! replication buffer, the backlog and the replicas' cursors into it
//! ([`buffer`]). The full sync payload, captured a slice at a time
//! ([`capture`]).
//!
//! This module sits in the files layer, beside `persist`: it encodes what
//! the AOF logs (`persist::aof::Effect`) for the stream and frames the RDB
//! payload the capture produces. The engine and the server drive it.

pub mod buffer;
pub mod capture;
pub mod handshake;
pub mod ids;
pub mod payload;
pub mod psync;
pub mod stream;
