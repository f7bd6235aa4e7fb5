//! Persistence: the append-only file and its background rewrite, the native
//! snapshot, the data-directory lock, and the I/O layer they share. See
//! docs/persistence.md and docs/snapshot-format.md.

pub mod aof;
pub mod io;
pub mod lock;
pub mod rdb_file;
pub mod rewrite;
pub mod rewriter;
pub mod saver;
pub mod snapshot;
pub mod writer;
