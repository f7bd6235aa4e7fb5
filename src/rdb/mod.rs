//! Redis's own file formats: the RDB snapshot (versions 1–12, and Valkey's
//! `VALKEY080` header) and the compact encodings stored inside it
//! (listpack, ziplist, zipmap, intset, LZF-compressed strings).
//!
//! docs/rdb.md describes the format as this module implements it. The
//! pieces:
//!
//! - [`lzf`], [`listpack`], [`ziplist`], [`intset`], [`zipmap`]: decoders
//!   (and, where the writer needs them, encoders) of the compact encodings;
//!   every length is checked against the bytes present, so a hostile input
//!   yields an error, never a panic or an unbounded allocation;
//! - `reader`: a streaming parser of a whole RDB file or a DUMP payload;
//! - `writer`: RDB version 10 (loadable by Redis 7.0 and later).
//!
//! Nothing here knows about the engine; the engine's loaders and the tools
//! call into it.

use std::fmt;

use crate::types::num::format_i64;
use crate::types::Blob;

pub mod intset;
pub mod listpack;
pub mod lzf;
pub mod ziplist;
pub mod zipmap;

/// A malformed compact encoding (listpack, ziplist, zipmap, intset, LZF
/// data): what was wrong, in words. The RDB reader adds the file offset.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EncodingError(pub String);

impl EncodingError {
    /// An error with the given description.
    pub fn new(what: impl Into<String>) -> EncodingError {
        EncodingError(what.into())
    }
}

impl fmt::Display for EncodingError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for EncodingError {}

/// One element of a listpack or ziplist: the encodings store integers in
/// binary, so an element is either bytes or an integer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Item<'a> {
    /// A string element.
    Str(&'a [u8]),
    /// An integer element (Redis turns it back into its decimal text).
    Int(i64),
}

impl Item<'_> {
    /// The element as Redis returns it: the bytes, or the decimal text of
    /// the integer.
    pub fn to_blob(&self) -> Blob {
        match *self {
            Item::Str(s) => Blob::from(s),
            Item::Int(n) => Blob::from(format_i64(n, &mut [0u8; 20])),
        }
    }

    /// The element as an integer: the integer, or the string parsed with
    /// Redis's `string2ll` rules (None if it is not a canonical integer).
    pub fn as_i64(&self) -> Option<i64> {
        match *self {
            Item::Str(s) => crate::types::num::parse_i64(s),
            Item::Int(n) => Some(n),
        }
    }
}

pub mod reader;
pub mod writer;

/// The AUX field of the database the replication stream had selected
/// (docs/rdb.md, "The replication position in AUX fields").
pub const AUX_REPL_STREAM_DB: &str = "repl-stream-db";
/// The AUX field of the replication id.
pub const AUX_REPL_ID: &str = "repl-id";
/// The AUX field of the replication offset.
pub const AUX_REPL_OFFSET: &str = "repl-offset";

/// The replication position the AUX fields `aux` record: all three of
/// `repl-stream-db` (an integer that fits 32 bits), `repl-id` (40
/// hexadecimal digits) and `repl-offset` (an integer ≥ 0), names matched
/// without case, the last occurrence of each counting (as Redis reads
/// them). `None` when one is missing or malformed: the file still loads,
/// without a position (Redis ignores malformed values too).
pub fn position_from_aux(aux: &[(Blob, Blob)]) -> Option<crate::repl::ids::Position> {
    let last = |name: &str| {
        aux.iter()
            .rev()
            .find(|(n, _)| n.eq_ignore_ascii_case(name.as_bytes()))
            .map(|(_, v)| v)
    };
    let stream_db = crate::types::num::parse_i64(last(AUX_REPL_STREAM_DB)?)
        .and_then(|n| u32::try_from(n).ok())?;
    let replid = crate::repl::ids::ReplId::parse(last(AUX_REPL_ID)?)?;
    let offset = crate::types::num::parse_i64(last(AUX_REPL_OFFSET)?).filter(|&n| n >= 0)?;
    Some(crate::repl::ids::Position {
        replid,
        offset,
        stream_db,
    })
}

/// The RDB version this build writes (Redis 7.0's).
pub const WRITE_VERSION: u16 = 10;
/// The newest RDB version this build reads (Redis 7.4's).
pub const MAX_READ_VERSION: u16 = 12;
/// The newest Valkey RDB version (`VALKEY080`) this build reads.
pub const MAX_VALKEY_VERSION: u16 = 80;

/// Opcodes (bytes that take the place of a value type).
pub mod opcode {
    /// Slot information (Redis 7.4 cluster).
    pub const SLOT_INFO: u8 = 244;
    /// A function library (Redis 7.0+).
    pub const FUNCTION2: u8 = 245;
    /// A function library in the pre-release format.
    pub const FUNCTION_PRE_GA: u8 = 246;
    /// Module auxiliary data.
    pub const MODULE_AUX: u8 = 247;
    /// LRU idle time of the next key.
    pub const IDLE: u8 = 248;
    /// LFU frequency of the next key.
    pub const FREQ: u8 = 249;
    /// An auxiliary field (name, value).
    pub const AUX: u8 = 250;
    /// Hash table size hints for the current database.
    pub const RESIZEDB: u8 = 251;
    /// Expiry of the next key, Unix ms.
    pub const EXPIRETIME_MS: u8 = 252;
    /// Expiry of the next key, Unix seconds.
    pub const EXPIRETIME: u8 = 253;
    /// Database selector.
    pub const SELECTDB: u8 = 254;
    /// End of the keys; the checksum follows.
    pub const EOF: u8 = 255;
}

/// Value types (the byte before a key).
pub mod kind {
    /// A string.
    pub const STRING: u8 = 0;
    /// A list of strings.
    pub const LIST: u8 = 1;
    /// A set of strings.
    pub const SET: u8 = 2;
    /// A sorted set with string-encoded scores.
    pub const ZSET: u8 = 3;
    /// A hash of field/value strings.
    pub const HASH: u8 = 4;
    /// A sorted set with binary scores.
    pub const ZSET_2: u8 = 5;
    /// A module value in the pre-release format (refused).
    pub const MODULE_PRE_GA: u8 = 6;
    /// A module value.
    pub const MODULE_2: u8 = 7;
    /// A hash as a zipmap.
    pub const HASH_ZIPMAP: u8 = 9;
    /// A list as a ziplist.
    pub const LIST_ZIPLIST: u8 = 10;
    /// A set of integers as an intset.
    pub const SET_INTSET: u8 = 11;
    /// A sorted set as a ziplist.
    pub const ZSET_ZIPLIST: u8 = 12;
    /// A hash as a ziplist.
    pub const HASH_ZIPLIST: u8 = 13;
    /// A list as a quicklist of ziplists.
    pub const LIST_QUICKLIST: u8 = 14;
    /// A stream (version 1).
    pub const STREAM_LISTPACKS: u8 = 15;
    /// A hash as a listpack.
    pub const HASH_LISTPACK: u8 = 16;
    /// A sorted set as a listpack.
    pub const ZSET_LISTPACK: u8 = 17;
    /// A list as a quicklist of listpacks and plain nodes.
    pub const LIST_QUICKLIST_2: u8 = 18;
    /// A stream (version 2: first ID, max deleted ID, entries added).
    pub const STREAM_LISTPACKS_2: u8 = 19;
    /// A set as a listpack (Redis 7.2).
    pub const SET_LISTPACK: u8 = 20;
    /// A stream (version 3: consumer active time; Redis 7.2).
    pub const STREAM_LISTPACKS_3: u8 = 21;
    /// A hash with field TTLs, pre-release format.
    pub const HASH_METADATA_PRE_GA: u8 = 22;
    /// A listpack hash with field TTLs, pre-release format.
    pub const HASH_LISTPACK_EX_PRE_GA: u8 = 23;
    /// A hash with field TTLs (Redis 7.4).
    pub const HASH_METADATA: u8 = 24;
    /// A listpack hash with field TTLs (Redis 7.4).
    pub const HASH_LISTPACK_EX: u8 = 25;

    /// Redis's name for a value type byte, for messages and the inspector.
    pub fn name(t: u8) -> Option<&'static str> {
        Some(match t {
            STRING => "string",
            LIST => "list",
            SET => "set",
            ZSET => "zset",
            HASH => "hash",
            ZSET_2 => "zset_2",
            MODULE_PRE_GA => "module_pre_ga",
            MODULE_2 => "module_2",
            HASH_ZIPMAP => "hash_zipmap",
            LIST_ZIPLIST => "list_ziplist",
            SET_INTSET => "set_intset",
            ZSET_ZIPLIST => "zset_ziplist",
            HASH_ZIPLIST => "hash_ziplist",
            LIST_QUICKLIST => "list_quicklist",
            STREAM_LISTPACKS => "stream_listpacks",
            HASH_LISTPACK => "hash_listpack",
            ZSET_LISTPACK => "zset_listpack",
            LIST_QUICKLIST_2 => "list_quicklist_2",
            STREAM_LISTPACKS_2 => "stream_listpacks_2",
            SET_LISTPACK => "set_listpack",
            STREAM_LISTPACKS_3 => "stream_listpacks_3",
            HASH_METADATA_PRE_GA => "hash_metadata_pre_ga",
            HASH_LISTPACK_EX_PRE_GA => "hash_listpack_ex_pre_ga",
            HASH_METADATA => "hash_metadata",
            HASH_LISTPACK_EX => "hash_listpack_ex",
            _ => return None,
        })
    }
}

/// CRC-64/Redis ("Jones": reflected, polynomial 0xad93d23594c935a9, no
/// init or final xor) of `bytes`, as RDB files and DUMP payloads carry
/// it. `crc-fast` computes it with carry-less multiplication (about 6.5
/// GB/s here, against 1.2 GB/s for the table-driven `crc` crate), which is
/// what lets the skip pass verify a file at over 1 GB/s.
pub fn crc64(bytes: &[u8]) -> u64 {
    crc_fast::checksum(crc_fast::CrcAlgorithm::Crc64Redis, bytes)
}

/// A running CRC-64/Redis over bytes written piece by piece.
#[derive(Clone, Copy)]
pub struct Crc64(crc_fast::Digest);

impl Default for Crc64 {
    fn default() -> Self {
        Crc64(crc_fast::Digest::new(crc_fast::CrcAlgorithm::Crc64Redis))
    }
}

impl Crc64 {
    /// Adds `bytes`.
    pub fn update(&mut self, bytes: &[u8]) {
        self.0.update(bytes);
    }

    /// The CRC of everything added so far.
    pub fn value(&self) -> u64 {
        self.0.finalize()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn crc64_is_redis_jones_crc() {
        // The catalogue's check value of CRC-64/REDIS, and Redis's own
        // crc64 self-test input (src/crc64.c).
        assert_eq!(crc64(b"123456789"), 0xe9c6_d914_c4b8_d9ca);
        let text = b"This is a test of the emergency broadcast system.";
        let mut running = Crc64::default();
        running.update(&text[..10]);
        running.update(&text[10..]);
        assert_eq!(running.value(), crc64(text));
        assert_eq!(crc64(b""), 0);
    }
}
