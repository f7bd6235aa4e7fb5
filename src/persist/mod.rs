//! Persistence: the append-only file, the data-directory lock, and the I/O
//! layer they share. See docs/persistence.md.

pub mod aof;
pub mod io;
pub mod lock;
pub mod rewrite;
pub mod saver;
pub mod snapshot;
pub mod writer;
