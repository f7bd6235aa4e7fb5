//! Scanning: a snapshot walked key by key, split values counted but never
//! assembled ([`scan_keys`]).

use super::decode::{Builder, Item, StreamElem};
use super::error::{BlockDamage, SnapshotError};
use super::format::{Part, ValueType};
use super::load::{block_error, check_key_count, unfinished_split, walk_verified};
use super::stats::Summary;
use crate::types::{Blob, EncodingLimits, Value};
use std::ops::ControlFlow;

/// What [`scan_keys`] reports of each key. A split value's parts are
/// counted, never assembled.
#[derive(Debug, Clone)]
pub struct KeyRecord {
    /// Its database.
    pub db: usize,
    /// The key.
    pub key: Blob,
    /// Its type.
    pub value_type: ValueType,
    /// What OBJECT ENCODING reports once loaded (for a split value, which
    /// is far beyond every compact-encoding limit: the general encoding).
    pub encoding: &'static str,
    /// Absolute expiry, Unix ms.
    pub expire_ms: Option<i64>,
    /// The block holding its (first) record.
    pub block: u32,
    /// Bytes of its records in the decompressed blocks (all parts).
    pub bytes: u64,
    /// Elements: list items, hash fields, set and sorted-set members,
    /// stream entries; a string's length in bytes.
    pub elements: u64,
    /// Records the value is stored in (1 unless it was split).
    pub parts: u32,
}

/// The elements [`KeyRecord::elements`] counts.
pub(super) fn elements_of(value: &Value) -> u64 {
    (match value {
        Value::Str(s) => s.len(),
        Value::List(l) => l.len(),
        Value::Hash(h) => h.len(),
        Value::Set(s) => s.len(),
        Value::ZSet(z) => z.len(),
        Value::Stream(s) => s.len(),
    }) as u64
}

impl Builder {
    /// Elements in this part (as [`elements_of`] counts them).
    fn elements(&self) -> u64 {
        (match self {
            Builder::Str(b) => b.len(),
            Builder::List(l) => l.len(),
            Builder::Hash(v) => v.len(),
            Builder::SetInts(v) => v.len(),
            Builder::SetStrings(v) => v.len(),
            Builder::ZSet(v) => v.len(),
            Builder::Stream(v) => v
                .iter()
                .filter(|e| matches!(e, StreamElem::Entry(..)))
                .count(),
        }) as u64
    }

    /// OBJECT ENCODING of a split (so large) value of this kind.
    fn split_encoding(&self) -> &'static str {
        match self {
            Builder::Str(_) => "raw",
            Builder::List(_) => "quicklist",
            Builder::Hash(_) | Builder::SetInts(_) | Builder::SetStrings(_) => "hashtable",
            Builder::ZSet(_) => "skiplist",
            Builder::Stream(_) => "stream",
        }
    }
}

/// Walks a snapshot key by key without assembling split values: every
/// check of [`load`](fn@super::load) is made (header, footer, trailer, each block's CRC,
/// every record, the key count), blocks are decoded by `workers` threads
/// (0: the caller), and `visit` sees each key in file order, expired ones
/// included. Memory holds a few decoded blocks. `visit` returning Break
/// ends the walk early with the summary. The first problem is the error,
/// after every key before it was visited.
pub fn scan_keys(
    data: &[u8],
    workers: usize,
    visit: &mut dyn FnMut(&KeyRecord) -> ControlFlow<()>,
) -> Result<Summary, SnapshotError> {
    let limits = EncodingLimits::default();
    let mut open: Option<KeyRecord> = None;
    let mut keys = 0u64;
    let mut stopped = false;
    let summary = walk_verified(data, &limits, workers, i64::MIN, |job, block| {
        let block_err = |damage: BlockDamage| block_error(job, damage);
        let n = block.items.len();
        for (i, (item, bytes)) in block.items.into_iter().zip(block.sizes).enumerate() {
            let split = |what: &str| block_err(BlockDamage::Split(what.to_string()));
            let done = match item {
                Item::Whole(k) => {
                    if open.is_some() {
                        return Err(split("a split value's next part is missing"));
                    }
                    KeyRecord {
                        db: k.db,
                        value_type: ValueType::of_value(&k.value),
                        encoding: k.value.encoding(),
                        elements: elements_of(&k.value),
                        key: k.key,
                        expire_ms: k.expire_ms,
                        block: job.seq,
                        bytes,
                        parts: 1,
                    }
                }
                Item::Expired => unreachable!("nothing expires before i64::MIN"),
                Item::Part {
                    part,
                    db,
                    key,
                    expire_ms,
                    builder,
                } => {
                    let first = part == Part::First;
                    if first != open.is_none() || (first && i + 1 != n) {
                        return Err(split("the parts of a split value are out of order"));
                    }
                    let rec = open.get_or_insert_with(|| KeyRecord {
                        db,
                        key: key.clone(),
                        value_type: ValueType::of_tag(builder.tag()),
                        encoding: builder.split_encoding(),
                        expire_ms,
                        block: job.seq,
                        bytes: 0,
                        elements: 0,
                        parts: 0,
                    });
                    if rec.db != db
                        || rec.key != key
                        || rec.value_type != ValueType::of_tag(builder.tag())
                    {
                        return Err(split("a part belongs to another key"));
                    }
                    rec.bytes += bytes;
                    rec.elements += builder.elements();
                    rec.parts += 1;
                    if part != Part::Last {
                        continue;
                    }
                    open.take().expect("a last part has an open value")
                }
            };
            keys += 1;
            if visit(&done).is_break() {
                stopped = true;
                return Ok(ControlFlow::Break(()));
            }
        }
        Ok(ControlFlow::Continue(()))
    })?;
    if stopped {
        return Ok(summary);
    }
    if let Some(o) = &open {
        return Err(unfinished_split(&summary, o.block, &o.key, o.db));
    }
    check_key_count(keys, &summary)?;
    Ok(summary)
}
