//! The native snapshot, `dump.hoz`: keys in independently decodable,
//! LZ4-compressed, checksummed blocks, a footer that summarises the file
//! and a fixed-size trailer that points at it.
//!
//! docs/snapshot-format.md documents every byte and every failure case;
//! this module follows it. The pieces:
//!
//! - [`BlockBuilder`] (the thread that owns the keyspace) encodes records
//!   into ~1 MiB uncompressed blocks and keeps the statistics the footer
//!   carries;
//! - [`FileWriter`] (a background thread) compresses, checksums and
//!   appends blocks to a temp file, then writes footer and trailer;
//!   [`commit`] renames the temp file into place;
//! - [`save_keyspace`] does all of it for a keyspace (SAVE, tests);
//! - [`read_summary`] answers summary questions from trailer and footer;
//! - [`load`](fn@load) / [`load_into`] verify everything and decode blocks on
//!   several threads; [`load_salvaging`] keeps every intact block; every
//!   reader takes its threads, limits and time from one [`ReadOptions`].

mod builder;
mod decode;
mod encode;
mod error;
mod format;
mod header;
mod load;
mod options;
mod salvage;
mod scan;
mod stats;
mod stitch;
mod writer;

pub use builder::{BlockBuilder, RawBlock};
pub use decode::LoadedKey;
pub use error::{BlockDamage, SnapshotError};
pub use format::{
    ValueType, BLOCK_HEADER_LEN, BLOCK_TARGET_BYTES, FLAG_LZ4, FLAG_STREAM_NODES, FORMAT_MAJOR,
    FORMAT_MINOR, FORMAT_MINOR_WITHOUT_POSITION, MAGIC, TRAILER_LEN,
};
pub use header::{image_len, read_summary};
pub use load::{load, load_into, load_into_reporting, load_streaming, Loaded};
pub use options::ReadOptions;
pub use salvage::{load_salvaging, readable_keys, salvage_streaming, Damage, Salvaged};
pub use scan::{scan_keys, KeyRecord};
pub use stats::{BlockInfo, DbStats, HeaderInfo, Largest, Stats, Summary, TypeStats};
pub use writer::{commit, save_keyspace, save_keyspace_at, temp_path, FileWriter};

#[cfg(test)]
mod tests;
