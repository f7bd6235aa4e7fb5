//! Value types: strings, lists, hashes, sets, sorted sets and streams, each with the
//! compact and the general encoding Redis uses (so OBJECT ENCODING and the
//! reply order of small collections match Redis exactly).
//!
//! Nothing here does I/O or knows about keys, clients or files.

pub mod bits;
pub mod blob;
pub(crate) mod build;
pub mod geohash;
pub mod hash;
pub mod hll;
pub mod list;
pub(crate) mod long_double;
pub mod num;
pub mod ordtree;
pub mod set;
pub mod size_class;
pub mod stream;
pub(crate) mod varint;
pub mod zset;

pub use blob::Blob;
pub use hash::Hash;
pub use list::List;
pub use set::Set;
pub use stream::Stream;
pub use zset::ZSet;

/// A value stored under a key.
#[derive(Debug, Clone)]
pub enum Value {
    /// A string (binary safe, up to `proto-max-bulk-len` / 512 MB).
    Str(Blob),
    /// A list (quicklist in Redis).
    List(Box<List>),
    /// A hash of fields to values.
    Hash(Box<Hash>),
    /// A set of members.
    Set(Box<Set>),
    /// A sorted set of members ordered by score.
    ZSet(Box<ZSet>),
    /// A stream of entries with consumer groups.
    Stream(Box<Stream>),
}

impl Value {
    /// The heap block a lookup of this value reads first, if any: a
    /// string's bytes, a collection's header (for a prefetch hint).
    pub fn heap_ptr(&self) -> Option<*const u8> {
        match self {
            Value::Str(b) => b.heap_ptr(),
            Value::List(l) => Some(&**l as *const List as *const u8),
            Value::Hash(h) => Some(&**h as *const Hash as *const u8),
            Value::Set(s) => Some(&**s as *const Set as *const u8),
            Value::ZSet(z) => Some(&**z as *const ZSet as *const u8),
            Value::Stream(s) => Some(&**s as *const Stream as *const u8),
        }
    }

    /// The name TYPE reports.
    pub fn type_name(&self) -> &'static str {
        match self {
            Value::Str(_) => "string",
            Value::List(_) => "list",
            Value::Hash(_) => "hash",
            Value::Set(_) => "set",
            Value::ZSet(_) => "zset",
            Value::Stream(_) => "stream",
        }
    }

    /// What the type's length command reports: STRLEN, LLEN, HLEN, SCARD,
    /// ZCARD, XLEN.
    pub fn length(&self) -> usize {
        match self {
            Value::Str(s) => s.len(),
            Value::List(l) => l.len(),
            Value::Hash(h) => h.len(),
            Value::Set(s) => s.len(),
            Value::ZSet(z) => z.len(),
            Value::Stream(s) => s.len(),
        }
    }

    /// The name OBJECT ENCODING reports, following Redis 7.0's rules.
    pub fn encoding(&self) -> &'static str {
        match self {
            Value::Str(s) if s.is_raw() => "raw",
            Value::Str(s) => string_encoding(s),
            Value::List(l) => l.encoding(),
            Value::Hash(h) => h.encoding(),
            Value::Set(s) => s.encoding(),
            Value::ZSet(z) => z.encoding(),
            Value::Stream(_) => "stream",
        }
    }
}

/// OBJECT ENCODING of a string value: `int` for canonical integers of at
/// most 20 characters, `embstr` up to 44 bytes, `raw` beyond.
pub fn string_encoding(s: &[u8]) -> &'static str {
    if s.len() <= 20 && num::parse_i64(s).is_some() {
        "int"
    } else if s.len() <= 44 {
        "embstr"
    } else {
        "raw"
    }
}

/// The error Redis returns when a command meets a key of the wrong type.
pub const WRONGTYPE: &str = "WRONGTYPE Operation against a key holding the wrong kind of value";

/// Thresholds at which a compact encoding converts to the general one
/// (Redis's `*-max-listpack-*` / `set-max-intset-entries` parameters).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EncodingLimits {
    /// `hash-max-listpack-entries` (512: Redis 7.0.15's built-in default).
    pub hash_max_listpack_entries: usize,
    /// `hash-max-listpack-value` (64 bytes).
    pub hash_max_listpack_value: usize,
    /// `set-max-intset-entries` (512).
    pub set_max_intset_entries: usize,
    /// `zset-max-listpack-entries` (128).
    pub zset_max_listpack_entries: usize,
    /// `zset-max-listpack-value` (64 bytes).
    pub zset_max_listpack_value: usize,
    /// `list-max-listpack-size` (-2).
    pub list_max_listpack_size: i64,
}

impl Default for EncodingLimits {
    fn default() -> Self {
        EncodingLimits {
            hash_max_listpack_entries: 512,
            hash_max_listpack_value: 64,
            set_max_intset_entries: 512,
            zset_max_listpack_entries: 128,
            zset_max_listpack_value: 64,
            list_max_listpack_size: -2,
        }
    }
}
