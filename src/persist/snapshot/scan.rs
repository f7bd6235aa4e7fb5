//! Scanning: a snapshot walked key by key, split values counted but never
//! assembled ([`scan_keys`]).

use super::decode::{Builder, Item, StreamElem};
use super::error::{BlockDamage, SnapshotError};
use super::format::ValueType;
use super::load::{block_error, check_key_count, unfinished_split, walk_verified};
use super::options::ReadOptions;
use super::stats::Summary;
use super::stitch::{place_part, PartStep, Place, SplitHead};
use crate::types::{Blob, Value};
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
/// check of [`load`](fn@super::load) is made (header, footer, trailer,
/// each block's CRC, every record, the order of a split value's parts,
/// the key count), blocks are decoded with `options`, and `visit` sees
/// each key in file order, except those whose expiry is before
/// `options.now_ms` (the default, `i64::MIN`, visits every key). Memory
/// holds a few decoded blocks. `visit` returning Break ends the walk
/// early with the summary. The first problem is the error, after every
/// key before it was visited.
pub fn scan_keys(
    data: &[u8],
    options: &ReadOptions,
    visit: &mut dyn FnMut(&KeyRecord) -> ControlFlow<()>,
) -> Result<Summary, SnapshotError> {
    /// A split value being counted.
    struct Open {
        head: SplitHead,
        record: KeyRecord,
    }
    let mut open: Option<Open> = None;
    let mut keys = 0u64;
    let mut stopped = false;
    let summary = walk_verified(data, options, |job, block| {
        let split = |detail: String| block_error(job, BlockDamage::Split(detail));
        let records = block.items.len();
        for (index, (item, bytes)) in block.items.into_iter().zip(block.sizes).enumerate() {
            let done = match item {
                Item::Whole(k) => {
                    if let Some(o) = &open {
                        return Err(split(o.head.lost("its next part is missing")));
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
                Item::Expired => {
                    if let Some(o) = &open {
                        return Err(split(o.head.lost("its next part is missing")));
                    }
                    keys += 1;
                    continue;
                }
                Item::Part(part) => {
                    let at = Place {
                        seq: job.seq,
                        index,
                        records,
                    };
                    let step = place_part(open.as_ref().map(|o| &o.head), at, &part);
                    if let Some(o) = &open {
                        if !matches!(step, Ok(PartStep::Continues | PartStep::Completes)) {
                            return Err(split(o.head.lost("its next part is missing")));
                        }
                    }
                    let step = step.map_err(split)?;
                    if step == PartStep::Opens {
                        let tag = part.builder.tag();
                        open = Some(Open {
                            head: SplitHead::new(at, part.db, part.key.clone(), tag),
                            record: KeyRecord {
                                db: part.db,
                                key: part.key,
                                value_type: ValueType::of_tag(tag),
                                encoding: part.builder.split_encoding(),
                                expire_ms: part.expire_ms,
                                block: job.seq,
                                bytes: 0,
                                elements: 0,
                                parts: 0,
                            },
                        });
                    }
                    let o = open.as_mut().expect("a continuation has an open value");
                    o.head.took(at);
                    o.record.bytes += bytes;
                    o.record.elements += part.builder.elements();
                    o.record.parts += 1;
                    if step != PartStep::Completes {
                        continue;
                    }
                    let done = open.take().expect("completed just now").record;
                    if matches!(done.expire_ms, Some(t) if t < options.now_ms) {
                        keys += 1;
                        continue;
                    }
                    done
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
        return Err(unfinished_split(&summary, &o.head));
    }
    check_key_count(keys, &summary)?;
    Ok(summary)
}
