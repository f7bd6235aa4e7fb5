//! An estimate of the memory a key takes in a Redis 7.0 server, from what
//! `keys`/`memory` know without building values: the key's length, the
//! value's encoding, its element count and its serialized bytes. The
//! model follows what Redis's `MEMORY USAGE key SAMPLES 0` adds up
//! (`objectComputeSize` in object.c, plus the key's sds and dict entry),
//! with jemalloc's size classes; docs/inspect.md lists it. Not counted,
//! as MEMORY USAGE does not count them: the main table's bucket slot, the
//! expires table entry, allocator fragmentation.

/// The size jemalloc hands out for a request of `n` bytes: 8, 16, then
/// four classes per doubling (48, 64, 80, ... 128, 160, 192, 224, 256, ...).
pub fn jemalloc_class(n: u64) -> u64 {
    hozon::types::size_class::jemalloc(n as usize) as u64
}

/// Bytes of an sds string of `len` bytes: header (type, len, alloc for
/// the smallest type that holds `len`), the bytes, the terminating 0,
/// rounded to the allocation.
pub fn sds_size(len: u64) -> u64 {
    let header = match len {
        0..=255 => 3,
        256..=65_535 => 5,
        65_536..=4_294_967_295 => 9,
        _ => 17,
    };
    jemalloc_class(header + len + 1)
}

/// `sizeof(robj)`, `sizeof(dictEntry)`, `sizeof(dict)`, `sizeof(quicklist)`,
/// `sizeof(quicklistNode)` on 64-bit Redis 7.0.
const ROBJ: u64 = 16;
const DICT_ENTRY: u64 = 24;
const DICT: u64 = 56;
const QUICKLIST: u64 = 40;
const QUICKLIST_NODE: u64 = 32;
/// `sizeof(zset)` + `sizeof(zskiplist)`, and the header node with its 32
/// levels (allocated 32 + 32 × 16 = 544 bytes).
const ZSET_STRUCTS: u64 = 16 + 32;
const ZSL_HEADER: u64 = 544;
/// A skiplist node's allocation, averaged over its level (p = 1/4): 48
/// bytes for one level (3/4 of the nodes), 64 for two (3/16), 80 for
/// three, ...: about 53.
const ZSL_NODE: u64 = 53;
/// `sizeof(stream)`.
const STREAM: u64 = 104;
/// Bytes per stream node (`stream-node-max-bytes`).
const STREAM_NODE_BYTES: u64 = 4096;
/// Bytes per quicklist node (`list-max-listpack-size -2`: 8 KiB).
const QUICKLIST_NODE_BYTES: u64 = 8 << 10;

/// Table slots for `n` elements (a power of two, at least 4).
fn dict_slots(n: u64) -> u64 {
    n.max(4).next_power_of_two()
}

/// How a value's memory grows, by encoding.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Shape {
    /// A string: int, embstr or raw, from its length.
    Str,
    /// An integer string (`int`): inside the object.
    Int,
    /// One contiguous blob: listpack, ziplist, zipmap, intset.
    Blob,
    /// Blobs of about 8 KiB chained by nodes.
    Quicklist,
    /// A hash table of members (set).
    SetTable,
    /// A hash table of field/value pairs (hash).
    HashTable,
    /// A skiplist with a hash table (sorted set).
    Skiplist,
    /// Listpacks in a radix tree (stream).
    Stream,
    /// Anything else (modules): the serialized bytes.
    Opaque,
}

/// The shape of an encoding, whether named as OBJECT ENCODING does
/// (dump.hoz, AOF) or by the RDB type byte.
fn shape(logical_type: &str, encoding: &str) -> Shape {
    match encoding {
        "int" => Shape::Int,
        "embstr" | "raw" | "string" => Shape::Str,
        "quicklist" | "list_quicklist" | "list_quicklist_2" | "list" => Shape::Quicklist,
        "skiplist" | "zset" | "zset_2" => Shape::Skiplist,
        "hashtable" | "set" | "hash" => match logical_type {
            "hash" => Shape::HashTable,
            _ => Shape::SetTable,
        },
        "stream" | "stream_listpacks" | "stream_listpacks_2" | "stream_listpacks_3" => {
            Shape::Stream
        }
        "listpack"
        | "ziplist"
        | "intset"
        | "hash_zipmap"
        | "list_ziplist"
        | "set_intset"
        | "zset_ziplist"
        | "hash_ziplist"
        | "hash_listpack"
        | "zset_listpack"
        | "set_listpack"
        | "hash_listpack_ex"
        | "hash_listpack_ex_pre_ga" => Shape::Blob,
        _ => Shape::Opaque,
    }
}

/// The estimated `MEMORY USAGE` of a key of `key_len` bytes whose value
/// has this type and encoding, `elements` elements (None: unknown) and
/// takes `bytes` serialized (its record, key included).
pub fn memory_usage(
    key_len: u64,
    logical_type: &str,
    encoding: &str,
    elements: Option<u64>,
    bytes: u64,
) -> u64 {
    // The record holds the key (with a length prefix) and a type byte.
    let value_bytes = bytes.saturating_sub(key_len + 2).max(1);
    let n = elements.unwrap_or(1).max(1);
    let value = match shape(logical_type, encoding) {
        Shape::Int => ROBJ,
        Shape::Str => {
            // The value's own length prefix is 1 byte up to 63, 2 up to
            // 16383, else 5.
            let prefix = match value_bytes {
                0..=64 => 1,
                65..=16_385 => 2,
                _ => 5,
            };
            let len = value_bytes.saturating_sub(prefix);
            if len <= 44 {
                jemalloc_class(ROBJ + 3 + len + 1)
            } else {
                ROBJ + sds_size(len)
            }
        }
        Shape::Blob => ROBJ + jemalloc_class(value_bytes),
        Shape::Quicklist => {
            let nodes = value_bytes.div_ceil(QUICKLIST_NODE_BYTES).max(1);
            let per_node = value_bytes / nodes;
            ROBJ + QUICKLIST + nodes * (QUICKLIST_NODE + jemalloc_class(per_node))
        }
        Shape::SetTable => {
            // Each member: a length prefix and its bytes.
            let member = (value_bytes / n).saturating_sub(1);
            ROBJ + DICT + 8 * dict_slots(n) + n * (DICT_ENTRY + sds_size(member))
        }
        Shape::HashTable => {
            let pair = (value_bytes / n).saturating_sub(2);
            let half = pair / 2;
            ROBJ + DICT
                + 8 * dict_slots(n)
                + n * (DICT_ENTRY + sds_size(half) + sds_size(pair - half))
        }
        Shape::Skiplist => {
            // Each member: a length prefix, its bytes, an 8-byte score.
            let member = (value_bytes / n).saturating_sub(9);
            ROBJ + ZSET_STRUCTS
                + DICT
                + 8 * dict_slots(n)
                + jemalloc_class(ZSL_HEADER)
                + n * (sds_size(member) + DICT_ENTRY + ZSL_NODE)
        }
        Shape::Stream => {
            // Listpacks of up to `stream-node-max-bytes` (4 KiB) or
            // `stream-node-max-entries` (100), shrunk to fit once full but
            // the last, which keeps the 4 KiB it was created with; a
            // radix-tree node (~64 bytes) each.
            let nodes = value_bytes
                .div_ceil(STREAM_NODE_BYTES)
                .max(n.div_ceil(100))
                .max(1);
            let per_node = jemalloc_class(value_bytes / nodes);
            ROBJ + STREAM + nodes * 64 + (nodes - 1) * per_node + STREAM_NODE_BYTES
        }
        Shape::Opaque => ROBJ + value_bytes,
    };
    sds_size(key_len) + DICT_ENTRY + value
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn jemalloc_classes() {
        let got: Vec<u64> = [
            1, 8, 9, 16, 17, 24, 33, 128, 129, 160, 161, 256, 257, 320, 4097,
        ]
        .iter()
        .map(|&n| jemalloc_class(n))
        .collect();
        assert_eq!(
            got,
            [8, 8, 16, 16, 32, 32, 48, 128, 160, 160, 192, 256, 320, 320, 5120]
        );
    }

    #[test]
    fn strings_follow_redis_encodings() {
        // "k" -> "v": embstr of 1 byte: class(16 + 3 + 1 + 1) = 32, the key
        // sds 8, its dict entry 24 (MEMORY USAGE says 56 in Redis 7.0).
        assert_eq!(memory_usage(1, "string", "embstr", None, 1 + 2 + 2), 64);
        assert_eq!(memory_usage(1, "string", "int", None, 4), 8 + 24 + 16);
    }
}
