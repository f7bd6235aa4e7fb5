//! Statistics and the summary (the footer's content).

use super::format::{ValueType, BLOCK_HEADER_LEN};
use crate::repl::ids::Position;
use std::collections::BTreeMap;

/// Per-database counts.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct DbStats {
    /// Keys in the database.
    pub keys: u64,
    /// Keys with an expiry.
    pub expiring_keys: u64,
}

/// The value of a type with the most record bytes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Largest {
    /// Its database.
    pub db: usize,
    /// The key's full length.
    pub key_len: u64,
    /// The key's first bytes (at most 64).
    pub key_prefix: Vec<u8>,
    /// Uncompressed record bytes.
    pub bytes: u64,
    /// Elements (see [`TypeStats::elements`]).
    pub elements: u64,
}

/// Per-type counts.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TypeStats {
    /// Keys of this type.
    pub keys: u64,
    /// Strings: value bytes; lists, sets, sorted sets: members; hashes:
    /// fields; streams: entries.
    pub elements: u64,
    /// Uncompressed record bytes.
    pub bytes: u64,
    /// The largest value of this type.
    pub largest: Option<Largest>,
}

/// What a snapshot holds, as the footer records it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Stats {
    /// Total keys.
    pub keys: u64,
    /// Keys with an expiry.
    pub expiring_keys: u64,
    /// Earliest expiry, Unix ms.
    pub min_expire_ms: Option<i64>,
    /// Latest expiry, Unix ms.
    pub max_expire_ms: Option<i64>,
    /// Values split across blocks.
    pub split_values: u64,
    /// Non-empty databases.
    pub dbs: BTreeMap<usize, DbStats>,
    /// Per type, indexed by `ValueType as usize`.
    pub types: [TypeStats; 6],
}

impl Stats {
    /// The counts of one type.
    pub fn of(&self, t: ValueType) -> &TypeStats {
        &self.types[t as usize]
    }
}

/// One block as the index records it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BlockInfo {
    /// File offset of the block header.
    pub offset: u64,
    /// Payload bytes in the file.
    pub stored_len: u64,
    /// Payload bytes after decompression.
    pub raw_len: u64,
    /// Records, which is also the number of keys the block holds.
    pub records: u32,
    /// 0 = raw, 1 = LZ4.
    pub codec: u8,
    /// CRC-32 of the stored payload.
    pub payload_crc: u32,
}

impl BlockInfo {
    /// File offset just past the block.
    pub fn end(&self) -> u64 {
        self.offset
            .saturating_add(BLOCK_HEADER_LEN as u64)
            .saturating_add(self.stored_len)
    }
}

/// Everything the footer and trailer say about a snapshot.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Summary {
    /// Format major version.
    pub format_major: u16,
    /// Format minor version.
    pub format_minor: u16,
    /// When the snapshot was taken, Unix ms.
    pub created_ms: i64,
    /// How many databases the saving engine had.
    pub databases: u32,
    /// The saving engine's version.
    pub engine_version: String,
    /// Key counts, per database and per type.
    pub stats: Stats,
    /// Sum of the blocks' uncompressed sizes.
    pub raw_bytes: u64,
    /// Sum of the blocks' stored sizes.
    pub stored_bytes: u64,
    /// The block index, in file order.
    pub blocks: Vec<BlockInfo>,
    /// File size.
    pub file_len: u64,
    /// Where the footer starts.
    pub footer_offset: u64,
    /// Footer size.
    pub footer_len: u64,
    /// The header's replication position (format 1.2). Set by the
    /// writer's [`finish`](super::FileWriter::finish) and by the readers
    /// that verify the header (`load`, `load_into`, `load_streaming`,
    /// `scan_keys`; the salvage readers when the header is intact);
    /// [`read_summary`](super::read_summary) reads only trailer and
    /// footer and leaves it `None`.
    pub position: Option<Position>,
    /// The function libraries' sources (format 1.3; the footer's last
    /// field), in the order written.
    pub functions: Vec<Vec<u8>>,
}

/// What the header records besides versions and flags.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HeaderInfo {
    /// When the snapshot was taken, Unix ms.
    pub created_ms: i64,
    /// How many databases the saving engine has.
    pub databases: u32,
    /// The saving engine's version (at most 255 bytes are kept).
    pub engine_version: String,
    /// The replication position the dataset stands at: `Some` makes the
    /// file format 1.2 with the position in its header, `None` a 1.1 file
    /// without one (docs/snapshot-format.md, "The replication position").
    pub position: Option<Position>,
    /// The function libraries' sources to record (written at the
    /// footer's end; non-empty makes the file 1.3 with `FLAG_FUNCTIONS`).
    /// Empty when read from a header: they are in the footer.
    pub functions: Vec<Vec<u8>>,
    /// The access record each key gets (format 1.4 with `FLAG_ACCESS`
    /// unless `None`): its idle time under an LRU policy, its LFU counter
    /// under LFU, from the key's access field and this clock. `None` when
    /// read from a header (the records describe themselves).
    pub key_access: crate::rdb::writer::KeyAccessRecord,
}

impl HeaderInfo {
    /// A header for this build of hozon.
    pub fn new(created_ms: i64, databases: usize) -> HeaderInfo {
        HeaderInfo {
            created_ms,
            databases: u32::try_from(databases).unwrap_or(u32::MAX),
            engine_version: env!("CARGO_PKG_VERSION").to_string(),
            position: None,
            functions: Vec::new(),
            key_access: crate::rdb::writer::KeyAccessRecord::None,
        }
    }

    /// The same header, giving each key the access record `key_access`.
    pub fn with_key_access(self, key_access: crate::rdb::writer::KeyAccessRecord) -> HeaderInfo {
        HeaderInfo { key_access, ..self }
    }

    /// The same header, recording `position`.
    pub fn with_position(self, position: Option<Position>) -> HeaderInfo {
        HeaderInfo { position, ..self }
    }

    /// The format minor version a file with this header is written as.
    pub fn format_minor(&self) -> u16 {
        if self.key_access != crate::rdb::writer::KeyAccessRecord::None {
            return super::format::FORMAT_MINOR_WITH_ACCESS;
        }
        if !self.functions.is_empty() {
            return super::format::FORMAT_MINOR_WITH_FUNCTIONS;
        }
        match self.position {
            Some(_) => super::format::FORMAT_MINOR,
            None => super::format::FORMAT_MINOR_WITHOUT_POSITION,
        }
    }

    /// The same header, recording the function libraries `functions`.
    pub fn with_functions(self, functions: Vec<Vec<u8>>) -> HeaderInfo {
        HeaderInfo { functions, ..self }
    }
}
