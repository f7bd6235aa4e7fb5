//! Constants of the format (docs/snapshot-format.md) and the value types
//! the footer counts.

use crate::types::Value;

/// First 8 bytes of every snapshot.
pub const MAGIC: [u8; 8] = *b"\x89HZS\r\n\x1a\n";
/// Format major version this build writes and reads.
pub const FORMAT_MAJOR: u16 = 1;
/// Newest format minor version this build writes (it reads every minor
/// of 1.x): 1.2, for a file that records a replication position. A file
/// without one is written as [`FORMAT_MINOR_WITHOUT_POSITION`], byte for
/// byte as before 1.2 existed.
pub const FORMAT_MINOR: u16 = 2;

/// The minor version of a file written without a replication position.
pub const FORMAT_MINOR_WITHOUT_POSITION: u16 = 1;
/// The first minor version whose header holds the replication position
/// fields.
pub(super) const MINOR_WITH_POSITION: u16 = 2;
/// Bytes of the position fields when `repl_present` is 1: the id, the
/// offset (i64) and the stream database (u32).
pub(super) const POSITION_FIELDS_LEN: usize = crate::repl::ids::REPLID_LEN + 8 + 4;
/// Header flag: block payloads may be LZ4-compressed.
pub const FLAG_LZ4: u32 = 1;
/// Header flag: stream records may hold node elements (format 1.1), which
/// a 1.0 reader would take for damage; the flag makes it refuse the file
/// by name instead.
pub const FLAG_STREAM_NODES: u32 = 2;
/// Header flag: the footer ends with function libraries (format 1.3),
/// which a reader that does not know them would silently drop; the flag
/// makes it refuse the file by name instead.
pub const FLAG_FUNCTIONS: u32 = 4;
/// Header flag: records may carry a key's access record (kind bit 7,
/// format 1.4), which an older reader would take for damage; the flag
/// makes it refuse the file by name instead.
pub const FLAG_ACCESS: u32 = 8;
/// Every flag bit this build understands.
pub(super) const KNOWN_FLAGS: u32 = FLAG_LZ4 | FLAG_STREAM_NODES | FLAG_FUNCTIONS | FLAG_ACCESS;
/// The minor version of a file that holds function libraries.
pub const FORMAT_MINOR_WITH_FUNCTIONS: u16 = 3;
/// The minor version of a file whose records carry access records (the
/// keys' LRU idle time or LFU counter, written under an LRU or LFU
/// policy).
pub const FORMAT_MINOR_WITH_ACCESS: u16 = 4;
/// Header bytes before the engine version string.
pub(super) const HEADER_FIXED_LEN: usize = 37;
/// File ids are 24 bits (they fit the block header's spare bytes).
pub(super) const FILE_ID_MASK: u32 = 0x00ff_ffff;
/// Smallest possible header: fixed part, empty version, CRC.
pub(super) const HEADER_MIN_LEN: usize = HEADER_FIXED_LEN + 4;

/// Magic of a block header.
pub(super) const BLOCK_MAGIC: [u8; 4] = *b"HZBK";
/// Size of a block header.
pub const BLOCK_HEADER_LEN: usize = 40;
/// Block payload codecs.
pub(super) const CODEC_RAW: u8 = 0;
pub(super) const CODEC_LZ4: u8 = 1;
/// An LZ4 block expands at most about 255-fold; a larger declared size is
/// damage, and bounding it bounds what a damaged header can allocate.
pub(super) const LZ4_MAX_EXPANSION: u64 = 255;

/// Magic at the start of the footer.
pub(super) const FOOTER_MAGIC: [u8; 4] = *b"HZFT";
/// Size of the trailer at the end of the file.
pub const TRAILER_LEN: usize = 36;
/// Magic in the last 8 bytes of the file.
pub(super) const TRAILER_MAGIC: [u8; 8] = *b"HZSNPEND";

/// Uncompressed bytes after which a block is closed. 256 KiB: the
/// compressed size is within 0.02% of 1 MiB blocks', and a BGSAVE's
/// writer thread compresses a block in one burst of CPU, which a client
/// sharing its core waits behind (PING p99 during a BGSAVE of 1M mixed
/// keys: 2.1 ms with 1 MiB blocks, 1.1 ms with 256 KiB).
pub const BLOCK_TARGET_BYTES: usize = 256 << 10;
/// A string longer than the block target is cut into chunks of at least
/// this size (a 16th of the target for smaller targets), so a nearly full
/// block does not produce tiny chunks.
pub(super) const MIN_STRING_CHUNK: usize = 64 << 10;
/// Longest key prefix the footer keeps for the largest value of a type.
pub(super) const LARGEST_KEY_PREFIX: usize = 64;

// Record kind byte.
pub(super) const TAG_STRING: u8 = 0;
pub(super) const TAG_LIST: u8 = 1;
pub(super) const TAG_HASH: u8 = 2;
pub(super) const TAG_SET_STRINGS: u8 = 3;
pub(super) const TAG_SET_INTS: u8 = 4;
pub(super) const TAG_ZSET: u8 = 5;
pub(super) const TAG_STREAM: u8 = 6;
pub(super) const KIND_TAG_MASK: u8 = 0x0f;
pub(super) const KIND_EXPIRE: u8 = 0x10;
pub(super) const KIND_PART_SHIFT: u8 = 5;
pub(super) const KIND_PART_MASK: u8 = 0x60;
/// Kind bit 7 (format 1.4): an access record follows the expiry.
pub(super) const KIND_ACCESS: u8 = 0x80;
/// Access record kinds: seconds idle (LRU), the LFU counter.
pub(super) const ACCESS_IDLE: u8 = 1;
pub(super) const ACCESS_FREQ: u8 = 2;
/// The largest idle time an access record may hold, in seconds: the LRU
/// clock's range (2^24 − 1).
pub(super) const ACCESS_MAX_IDLE: u64 = (1 << 24) - 1;

// Stream element tags.
pub(super) const SE_ENTRY: u8 = 0;
pub(super) const SE_COUNTERS: u8 = 1;
pub(super) const SE_GROUP: u8 = 2;
pub(super) const SE_CONSUMER: u8 = 3;
pub(super) const SE_PENDING: u8 = 4;
pub(super) const SE_NODE: u8 = 5;

/// Which part of a value a record holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Part {
    Whole = 0,
    First = 1,
    Middle = 2,
    Last = 3,
}

impl Part {
    pub(super) fn from_bits(bits: u8) -> Part {
        match bits & 3 {
            0 => Part::Whole,
            1 => Part::First,
            2 => Part::Middle,
            _ => Part::Last,
        }
    }
}

// ---------------------------------------------------------------------------
// Value types as the footer counts them.

/// The value types, in the order the footer lists them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum ValueType {
    /// Strings.
    String = 0,
    /// Lists.
    List = 1,
    /// Hashes.
    Hash = 2,
    /// Sets.
    Set = 3,
    /// Sorted sets.
    ZSet = 4,
    /// Streams.
    Stream = 5,
}

impl ValueType {
    /// Every type, in footer order.
    pub const ALL: [ValueType; 6] = [
        ValueType::String,
        ValueType::List,
        ValueType::Hash,
        ValueType::Set,
        ValueType::ZSet,
        ValueType::Stream,
    ];

    /// The name TYPE reports.
    pub fn name(self) -> &'static str {
        match self {
            ValueType::String => "string",
            ValueType::List => "list",
            ValueType::Hash => "hash",
            ValueType::Set => "set",
            ValueType::ZSet => "zset",
            ValueType::Stream => "stream",
        }
    }

    pub(super) fn of_value(value: &Value) -> ValueType {
        match value {
            Value::Str(_) => ValueType::String,
            Value::List(_) => ValueType::List,
            Value::Hash(_) => ValueType::Hash,
            Value::Set(_) => ValueType::Set,
            Value::ZSet(_) => ValueType::ZSet,
            Value::Stream(_) => ValueType::Stream,
        }
    }

    pub(super) fn of_tag(tag: u8) -> ValueType {
        match tag {
            TAG_STRING => ValueType::String,
            TAG_LIST => ValueType::List,
            TAG_HASH => ValueType::Hash,
            TAG_SET_STRINGS | TAG_SET_INTS => ValueType::Set,
            TAG_ZSET => ValueType::ZSet,
            _ => ValueType::Stream,
        }
    }
}
