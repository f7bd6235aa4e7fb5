//! Scanning: a snapshot walked key by key, split values counted but never
//! assembled ([`scan_keys`]).

use super::decode::{Builder, Item, StreamElem};
use super::error::{display_key, BlockDamage, SnapshotError};
use super::format::{Part, ValueType};
use super::load::{index_jobs, verify_frame};
use super::stats::Summary;
use super::stitch::run_jobs;
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
    let (header, summary) = verify_frame(data)?;
    let jobs = index_jobs(&summary);
    let limits = EncodingLimits::default();
    let mut open: Option<KeyRecord> = None;
    let mut keys = 0u64;
    let mut failure: Option<SnapshotError> = None;
    let mut stopped = false;
    run_jobs(
        data,
        &jobs,
        Some(header.file_id),
        summary.footer_offset,
        &limits,
        workers,
        i64::MIN,
        |outcome| {
            let job = outcome.job;
            let block_err = |damage: BlockDamage| SnapshotError::Block {
                index: job.seq,
                offset: job.offset,
                keys: job.keys,
                damage,
            };
            let block = match outcome.result {
                Ok(b) => b,
                Err(damage) => {
                    failure = Some(block_err(damage));
                    return ControlFlow::Break(());
                }
            };
            if let Some(damage) = block.damage {
                failure = Some(block_err(damage));
                return ControlFlow::Break(());
            }
            let n = block.items.len();
            for (i, (item, bytes)) in block.items.into_iter().zip(block.sizes).enumerate() {
                let split = |what: &str| block_err(BlockDamage::Split(what.to_string()));
                let done = match item {
                    Item::Whole(k) => {
                        if open.is_some() {
                            failure = Some(split("a split value's next part is missing"));
                            return ControlFlow::Break(());
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
                            failure = Some(split("the parts of a split value are out of order"));
                            return ControlFlow::Break(());
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
                            failure = Some(split("a part belongs to another key"));
                            return ControlFlow::Break(());
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
                    return ControlFlow::Break(());
                }
            }
            ControlFlow::Continue(())
        },
    );
    if let Some(e) = failure {
        return Err(e);
    }
    if stopped {
        return Ok(summary);
    }
    if let Some(o) = &open {
        let seq = o.block;
        return Err(SnapshotError::Block {
            index: seq,
            offset: summary.blocks[seq as usize].offset,
            keys: u64::from(summary.blocks[seq as usize].records),
            damage: BlockDamage::Split(format!(
                "key \"{}\" of db {} is split but its last part is missing",
                display_key(&o.key),
                o.db
            )),
        });
    }
    if keys != summary.stats.keys {
        return Err(SnapshotError::Mismatch(format!(
            "the blocks hold {keys} keys, the footer says {}",
            summary.stats.keys
        )));
    }
    Ok(summary)
}
