//! Decoding records.

use super::encode::{le_u32, le_u64, Malformed, Reader};
use super::error::BlockDamage;
use super::format::{
    Part, ACCESS_FREQ, ACCESS_IDLE, ACCESS_MAX_IDLE, BLOCK_HEADER_LEN, BLOCK_MAGIC, CODEC_LZ4,
    CODEC_RAW, KIND_ACCESS, KIND_EXPIRE, KIND_PART_MASK, KIND_PART_SHIFT, KIND_TAG_MASK,
    LZ4_MAX_EXPANSION, SE_CONSUMER, SE_COUNTERS, SE_ENTRY, SE_GROUP, SE_NODE, SE_PENDING, TAG_HASH,
    TAG_LIST, TAG_SET_INTS, TAG_SET_STRINGS, TAG_STREAM, TAG_STRING, TAG_ZSET,
};
use super::options::ReadOptions;
use super::stats::BlockInfo;
use crate::types::build::{self, Rejected};
use crate::types::list::{End, List};
use crate::types::ordtree::cmp_key;
use crate::types::stream::{
    Consumer, ConsumerGroup, Fields, NodeLayout, PendingEntry, Stream, StreamId,
};
use crate::types::{Blob, EncodingLimits, Value};

use crate::keyspace::KeyAccess;
pub use crate::keyspace::LoadedKey;

/// One element of a stream record.
#[derive(Debug, Clone)]
pub(super) enum StreamElem {
    Node {
        master_id: StreamId,
        last_id: StreamId,
        live: u64,
        deleted: u64,
        body_bytes: u64,
        master_fields: Box<[Blob]>,
    },
    Entry(StreamId, Fields),
    Counters {
        last_id: StreamId,
        first_id: StreamId,
        max_deleted_entry_id: StreamId,
        entries_added: u64,
    },
    Group {
        name: Blob,
        last_id: StreamId,
        entries_read: i64,
    },
    Consumer {
        name: Blob,
        seen_time_ms: i64,
    },
    Pending {
        id: StreamId,
        delivery_time_ms: i64,
        delivery_count: u64,
        consumer: u64,
    },
}

/// The elements of a value read from one or more records, before the
/// value is built.
#[derive(Debug)]
pub(super) enum Builder {
    Str(Vec<u8>),
    List(List),
    Hash(Vec<(Blob, Blob)>),
    SetInts(Vec<i64>),
    SetStrings(Vec<Blob>),
    ZSet(Vec<(Blob, f64)>),
    Stream(Vec<StreamElem>),
}

impl Builder {
    pub(super) fn tag(&self) -> u8 {
        match self {
            Builder::Str(_) => TAG_STRING,
            Builder::List(_) => TAG_LIST,
            Builder::Hash(_) => TAG_HASH,
            Builder::SetInts(_) => TAG_SET_INTS,
            Builder::SetStrings(_) => TAG_SET_STRINGS,
            Builder::ZSet(_) => TAG_ZSET,
            Builder::Stream(_) => TAG_STREAM,
        }
    }

    /// Appends the elements of the next part of the same value.
    pub(super) fn append(&mut self, next: Builder) -> Result<(), Malformed> {
        match (self, next) {
            (Builder::Str(a), Builder::Str(b)) => a.extend_from_slice(&b),
            (Builder::List(a), Builder::List(b)) => {
                for item in b.iter() {
                    a.push(End::Tail, item);
                }
            }
            (Builder::Hash(a), Builder::Hash(b)) => a.extend(b),
            (Builder::SetInts(a), Builder::SetInts(b)) => a.extend(b),
            (Builder::SetStrings(a), Builder::SetStrings(b)) => a.extend(b),
            (Builder::ZSet(a), Builder::ZSet(b)) => a.extend(b),
            (Builder::Stream(a), Builder::Stream(b)) => a.extend(b),
            _ => return Err("parts of one value have different types"),
        }
        Ok(())
    }

    /// Builds the value in the encoding Redis gives it when it loads one
    /// (docs/snapshot-format.md, "Rebuilding values"), by the rules of
    /// [`build`], after the format's own rule: a set's integers and a
    /// sorted set's elements are stored in ascending order.
    pub(super) fn finish(self, limits: &EncodingLimits) -> Result<Value, Malformed> {
        let rejected = Rejected::message;
        Ok(match self {
            Builder::Str(bytes) => Value::Str(Blob::from_vec(bytes)),
            Builder::List(l) => Value::List(Box::new(build::list(l).map_err(rejected)?)),
            Builder::Hash(pairs) => {
                Value::Hash(Box::new(build::hash(pairs, limits).map_err(rejected)?))
            }
            Builder::SetInts(ints) => {
                if ints.windows(2).any(|w| w[0] >= w[1]) {
                    return Err("set integers not ascending");
                }
                Value::Set(Box::new(
                    build::set_of_ints(ints, limits).map_err(rejected)?,
                ))
            }
            Builder::SetStrings(members) => {
                Value::Set(Box::new(build::set(members, limits).map_err(rejected)?))
            }
            Builder::ZSet(entries) => {
                let nan = entries.iter().any(|(_, s)| s.is_nan());
                if !nan
                    && entries.windows(2).any(|w| {
                        cmp_key(w[0].1, &w[0].0, w[1].1, &w[1].0) != std::cmp::Ordering::Less
                    })
                {
                    return Err("sorted-set elements not ascending");
                }
                Value::ZSet(Box::new(build::zset(entries, limits).map_err(rejected)?))
            }
            Builder::Stream(elems) => Value::Stream(Box::new(finish_stream(elems)?)),
        })
    }
}

pub(super) fn finish_stream(elems: Vec<StreamElem>) -> Result<Stream, Malformed> {
    struct OpenGroup {
        name: Blob,
        group: ConsumerGroup,
        names: Vec<Blob>,
        last_pending: Option<StreamId>,
    }
    fn close(s: &mut Stream, g: Option<OpenGroup>) -> Result<(), Malformed> {
        if let Some(g) = g {
            if s.groups.insert(g.name, g.group).is_some() {
                return Err("stream group repeated");
            }
        }
        Ok(())
    }
    let mut s = Stream::new();
    let mut counters = false;
    let mut with_nodes = false;
    let mut last_entry: Option<StreamId> = None;
    let mut open: Option<OpenGroup> = None;
    for e in elems {
        match e {
            StreamElem::Node {
                master_id,
                last_id,
                live,
                deleted,
                body_bytes,
                master_fields,
            } => {
                if counters {
                    return Err("stream node after the counters");
                }
                with_nodes = true;
                s.restore_node(NodeLayout {
                    master_id,
                    last_id,
                    live,
                    deleted,
                    body_bytes,
                    master_fields: &master_fields,
                })?;
            }
            StreamElem::Entry(id, fields) => {
                if counters {
                    return Err("stream entry after the counters");
                }
                if id == StreamId::MIN || last_entry.is_some_and(|p| id <= p) {
                    return Err("stream entry IDs not ascending");
                }
                if with_nodes {
                    s.restore_entry(id, fields)?;
                } else {
                    // A 1.0 file: the layout is rebuilt with the default
                    // node limits.
                    s.append(id, fields);
                }
                last_entry = Some(id);
            }
            StreamElem::Counters {
                last_id,
                first_id,
                max_deleted_entry_id,
                entries_added,
            } => {
                if counters {
                    return Err("stream counters repeated");
                }
                counters = true;
                if with_nodes {
                    s.check_restored()?;
                }
                s.last_id = last_id;
                s.first_id = first_id;
                s.max_deleted_entry_id = max_deleted_entry_id;
                s.entries_added = entries_added;
            }
            StreamElem::Group {
                name,
                last_id,
                entries_read,
            } => {
                if !counters {
                    return Err("stream group before the counters");
                }
                close(&mut s, open.take())?;
                open = Some(OpenGroup {
                    name,
                    group: ConsumerGroup {
                        last_id,
                        entries_read,
                        ..ConsumerGroup::default()
                    },
                    names: Vec::new(),
                    last_pending: None,
                });
            }
            StreamElem::Consumer { name, seen_time_ms } => {
                let g = open.as_mut().ok_or("stream consumer outside a group")?;
                let consumer = Consumer {
                    seen_time_ms,
                    ..Consumer::default()
                };
                if g.group.consumers.insert(name.clone(), consumer).is_some() {
                    return Err("stream consumer repeated");
                }
                g.names.push(name);
            }
            StreamElem::Pending {
                id,
                delivery_time_ms,
                delivery_count,
                consumer,
            } => {
                let g = open.as_mut().ok_or("pending entry outside a group")?;
                if g.last_pending.is_some_and(|p| id <= p) {
                    return Err("pending entry IDs not ascending");
                }
                g.last_pending = Some(id);
                let name = usize::try_from(consumer)
                    .ok()
                    .and_then(|i| g.names.get(i))
                    .ok_or("pending entry names a consumer that does not exist")?;
                g.group
                    .consumers
                    .get_mut(name)
                    .expect("every listed name was inserted")
                    .pel
                    .insert(id);
                g.group.pel.insert(
                    id,
                    PendingEntry {
                        delivery_time_ms,
                        delivery_count,
                        consumer: name.clone(),
                    },
                );
            }
        }
    }
    close(&mut s, open)?;
    if !counters {
        return Err("stream counters missing");
    }
    Ok(s)
}

/// One decoded record.
#[derive(Debug)]
pub(super) enum Item {
    /// A whole value.
    Whole(LoadedKey),
    /// A whole value whose expiry had passed.
    Expired,
    /// Part of a split value.
    Part(PartRecord),
}

/// One record of a split value: which part, whose, and its elements.
#[derive(Debug)]
pub(super) struct PartRecord {
    /// First, middle or last (never whole).
    pub(super) part: Part,
    pub(super) db: usize,
    pub(super) key: Blob,
    /// Only a first part carries the expiry.
    pub(super) expire_ms: Option<i64>,
    /// And the access record (format 1.4).
    pub(super) access: Option<KeyAccess>,
    /// The part's elements.
    pub(super) builder: Builder,
}

fn decode_body(r: &mut Reader<'_>, tag: u8) -> Result<Builder, Malformed> {
    if tag == TAG_STRING {
        return Ok(Builder::Str(r.bytes()?.to_vec()));
    }
    let count = r.u32_le()?;
    Ok(match tag {
        TAG_LIST => {
            let mut list = crate::types::list::Builder::default();
            for _ in 0..count {
                list.push(r.bytes()?);
            }
            Builder::List(list.finish())
        }
        TAG_HASH => {
            let mut pairs = Vec::with_capacity(r.capacity(count, 2));
            for _ in 0..count {
                let f = r.blob()?;
                pairs.push((f, r.blob()?));
            }
            Builder::Hash(pairs)
        }
        TAG_SET_STRINGS => {
            let mut members = Vec::with_capacity(r.capacity(count, 1));
            for _ in 0..count {
                members.push(r.blob()?);
            }
            Builder::SetStrings(members)
        }
        TAG_SET_INTS => {
            let mut ints = Vec::with_capacity(r.capacity(count, 1));
            let mut prev: Option<i64> = None;
            for _ in 0..count {
                let v = match prev {
                    None => r.zigzag()?,
                    Some(p) => {
                        let v = i128::from(p) + 1 + i128::from(r.varint()?);
                        i64::try_from(v).map_err(|_| "set integer overflows")?
                    }
                };
                ints.push(v);
                prev = Some(v);
            }
            Builder::SetInts(ints)
        }
        TAG_ZSET => {
            let mut entries = Vec::with_capacity(r.capacity(count, 9));
            for _ in 0..count {
                let m = r.blob()?;
                let score = f64::from_bits(u64::from_le_bytes(r.array()?));
                entries.push((m, score));
            }
            Builder::ZSet(entries)
        }
        TAG_STREAM => Builder::Stream(decode_stream_elems(r, count)?),
        _ => return Err("unknown type tag"),
    })
}

fn decode_stream_elems(r: &mut Reader<'_>, count: u32) -> Result<Vec<StreamElem>, Malformed> {
    let mut elems = Vec::with_capacity(r.capacity(count, 3));
    let mut prev_entry: Option<StreamId> = None;
    let mut prev_fields: Option<usize> = None; // index of the previous entry
    let mut prev_pending: Option<StreamId> = None;
    for _ in 0..count {
        match r.u8()? {
            SE_NODE => {
                let master_id = r.abs_id()?;
                let last_id = r.abs_id()?;
                let live = r.varint()?;
                let deleted = r.varint()?;
                let body_bytes = r.varint()?;
                let n = r.varint()?;
                let mut master_fields =
                    Vec::with_capacity(r.capacity(n.min(u64::from(u32::MAX)) as u32, 1));
                for _ in 0..n {
                    master_fields.push(r.blob()?);
                }
                elems.push(StreamElem::Node {
                    master_id,
                    last_id,
                    live,
                    deleted,
                    body_bytes,
                    master_fields: master_fields.into_boxed_slice(),
                });
            }
            SE_ENTRY => {
                let id = r.id(prev_entry)?;
                let h = r.varint()?;
                let n = h >> 1;
                let same = h & 1 == 1;
                let mut fields =
                    Vec::with_capacity(r.capacity(n.min(u64::from(u32::MAX)) as u32, 1));
                if same {
                    let Some(StreamElem::Entry(_, prev)) = prev_fields.map(|i| &elems[i]) else {
                        return Err("stream entry reuses the fields of no entry");
                    };
                    if prev.len() as u64 != n {
                        return Err("stream entry field count differs from the previous entry");
                    }
                    let names: Vec<Blob> = prev.iter().map(|(f, _)| f.clone()).collect();
                    for f in names {
                        fields.push((f, r.blob()?));
                    }
                } else {
                    for _ in 0..n {
                        let f = r.blob()?;
                        fields.push((f, r.blob()?));
                    }
                }
                prev_entry = Some(id);
                prev_fields = Some(elems.len());
                elems.push(StreamElem::Entry(id, fields.into_boxed_slice()));
            }
            SE_COUNTERS => elems.push(StreamElem::Counters {
                last_id: r.abs_id()?,
                first_id: r.abs_id()?,
                max_deleted_entry_id: r.abs_id()?,
                entries_added: r.varint()?,
            }),
            SE_GROUP => {
                prev_pending = None;
                elems.push(StreamElem::Group {
                    name: r.blob()?,
                    last_id: r.abs_id()?,
                    entries_read: r.zigzag()?,
                });
            }
            SE_CONSUMER => elems.push(StreamElem::Consumer {
                name: r.blob()?,
                seen_time_ms: r.zigzag()?,
            }),
            SE_PENDING => {
                let id = r.id(prev_pending)?;
                prev_pending = Some(id);
                elems.push(StreamElem::Pending {
                    id,
                    delivery_time_ms: r.zigzag()?,
                    delivery_count: r.varint()?,
                    consumer: r.varint()?,
                });
            }
            _ => return Err("unknown stream element"),
        }
    }
    Ok(elems)
}

/// An access record (format 1.4): its kind, then the idle seconds
/// (`varint`, at most 2^24 − 1) or the LFU counter (`u8`).
fn decode_access(r: &mut Reader<'_>) -> Result<KeyAccess, Malformed> {
    match r.u8()? {
        ACCESS_IDLE => {
            let seconds = r.varint()?;
            if seconds > ACCESS_MAX_IDLE {
                return Err("access record: idle time past the LRU clock's range");
            }
            Ok(KeyAccess::Idle(seconds))
        }
        ACCESS_FREQ => Ok(KeyAccess::Freq(r.u8()?)),
        _ => Err("unknown access record kind"),
    }
}

pub(super) fn decode_record(
    r: &mut Reader<'_>,
    limits: &EncodingLimits,
    now_ms: i64,
) -> Result<Item, Malformed> {
    let kind = r.u8()?;
    let tag = kind & KIND_TAG_MASK;
    if tag > TAG_STREAM {
        return Err("unknown type tag");
    }
    let part = Part::from_bits((kind & KIND_PART_MASK) >> KIND_PART_SHIFT);
    let db = usize::try_from(r.varint()?).map_err(|_| "database number too large")?;
    let key = r.bytes()?;
    let expire_ms = if kind & KIND_EXPIRE != 0 {
        if matches!(part, Part::Middle | Part::Last) {
            return Err("expiry on a continuation part");
        }
        Some(r.zigzag()?)
    } else {
        None
    };
    let access = if kind & KIND_ACCESS != 0 {
        if matches!(part, Part::Middle | Part::Last) {
            return Err("access record on a continuation part");
        }
        Some(decode_access(r)?)
    } else {
        None
    };
    if part == Part::Whole {
        // The common case builds the value straight from the bytes.
        let value = if tag == TAG_STRING {
            Value::Str(Blob::new(r.bytes()?))
        } else {
            decode_body(r, tag)?.finish(limits)?
        };
        if matches!(expire_ms, Some(at) if at < now_ms) {
            return Ok(Item::Expired);
        }
        return Ok(Item::Whole(LoadedKey {
            db,
            key: Blob::new(key),
            value,
            expire_ms,
            access,
        }));
    }
    Ok(Item::Part(PartRecord {
        part,
        db,
        key: Blob::new(key),
        expire_ms,
        access,
        builder: decode_body(r, tag)?,
    }))
}

/// A block's records, decoded.
#[derive(Debug, Default)]
pub(super) struct DecodedBlock {
    pub(super) items: Vec<Item>,
    /// Bytes of each item's record (in the decompressed block).
    pub(super) sizes: Vec<u64>,
    /// Why decoding stopped early (salvage keeps the items before it).
    pub(super) damage: Option<BlockDamage>,
}

pub(super) fn decode_records(
    raw: &[u8],
    records: u32,
    limits: &EncodingLimits,
    now_ms: i64,
) -> DecodedBlock {
    let mut r = Reader::new(raw);
    let mut out = DecodedBlock {
        items: Vec::with_capacity(r.capacity(records, 4)),
        sizes: Vec::with_capacity(r.capacity(records, 4)),
        damage: None,
    };
    for i in 0..records {
        let start = r.pos;
        match decode_record(&mut r, limits, now_ms) {
            Ok(item) => {
                out.items.push(item);
                out.sizes.push((r.pos - start) as u64);
            }
            Err(what) => {
                out.damage = Some(BlockDamage::Record {
                    record: i,
                    offset: start as u64,
                    what: format!("{what} (at byte {})", r.pos),
                });
                return out;
            }
        }
    }
    if r.remaining() != 0 {
        out.damage = Some(BlockDamage::Record {
            record: records,
            offset: r.pos as u64,
            what: format!("{} bytes after the last record", r.remaining()),
        });
    }
    out
}

/// A block header read from the file (CRC verified).
#[derive(Debug, Clone, Copy)]
pub(super) struct BlockHeader {
    pub(super) seq: u32,
    pub(super) file_id: u32,
    pub(super) info: BlockInfo,
}

pub(super) fn parse_block_header(data: &[u8], offset: u64) -> Result<BlockHeader, BlockDamage> {
    let at = usize::try_from(offset).map_err(|_| BlockDamage::OutOfBounds {
        end: offset,
        limit: data.len() as u64,
    })?;
    let end = at
        .checked_add(BLOCK_HEADER_LEN)
        .filter(|e| *e <= data.len());
    let Some(end) = end else {
        return Err(BlockDamage::OutOfBounds {
            end: offset.saturating_add(BLOCK_HEADER_LEN as u64),
            limit: data.len() as u64,
        });
    };
    let h = &data[at..end];
    if h[0..4] != BLOCK_MAGIC {
        return Err(BlockDamage::Header("block magic missing".into()));
    }
    let stored = le_u32(h, 36);
    let computed = crc32fast::hash(&h[..36]);
    if stored != computed {
        return Err(BlockDamage::Header(format!(
            "checksum mismatch (stored {stored:#010x}, computed {computed:#010x})"
        )));
    }
    Ok(BlockHeader {
        seq: le_u32(h, 8),
        file_id: le_u32(h, 4) >> 8,
        info: BlockInfo {
            offset,
            stored_len: le_u64(h, 16),
            raw_len: le_u64(h, 24),
            records: le_u32(h, 12),
            codec: h[4],
            payload_crc: le_u32(h, 32),
        },
    })
}

/// Where one file's blocks lie and whose they are: what every block
/// read from it must agree with.
#[derive(Debug, Clone, Copy)]
pub(super) struct Region {
    /// The file's id (from its header), when known: a block carrying
    /// another id belongs to another snapshot.
    pub(super) file_id: Option<u32>,
    /// The end of the region the blocks lie in (the footer's offset, or
    /// the file's end).
    pub(super) end: u64,
}

/// Verifies and decodes the block whose header is at `offset`;
/// `expected` is its number and the index's entry (strict loading).
/// Records are decoded with `options`' limits and time (its workers are
/// the caller's business). `scratch` is a reusable buffer.
pub(super) fn decode_block(
    data: &[u8],
    offset: u64,
    expected: Option<(u32, &BlockInfo)>,
    region: Region,
    options: &ReadOptions,
    scratch: &mut Vec<u8>,
) -> Result<DecodedBlock, BlockDamage> {
    let header = parse_block_header(data, offset)?;
    if let Some(id) = region.file_id.filter(|&id| id != header.file_id) {
        return Err(BlockDamage::Header(format!(
            "the block belongs to another snapshot (file id {:#08x}, expected {id:#08x})",
            header.file_id,
        )));
    }
    let info = header.info;
    if let Some((seq, want)) = expected {
        if header.seq != seq || info != *want {
            return Err(BlockDamage::IndexMismatch(format!(
                "header says block {} with {} records, {} stored / {} raw bytes, codec {}, crc {:#010x}; index says block {seq} with {} records, {} / {} bytes, codec {}, crc {:#010x}",
                header.seq, info.records, info.stored_len, info.raw_len, info.codec, info.payload_crc,
                want.records, want.stored_len, want.raw_len, want.codec, want.payload_crc
            )));
        }
    }
    let end = info.end();
    if end > region.end {
        return Err(BlockDamage::OutOfBounds {
            end,
            limit: region.end,
        });
    }
    let start = (offset as usize) + BLOCK_HEADER_LEN;
    let payload = &data[start..end as usize];
    let computed = crc32fast::hash(payload);
    if computed != info.payload_crc {
        return Err(BlockDamage::PayloadChecksum {
            stored: info.payload_crc,
            computed,
        });
    }
    let raw: &[u8] = match info.codec {
        CODEC_RAW => {
            if info.raw_len != info.stored_len {
                return Err(BlockDamage::WrongSize {
                    expected: info.raw_len,
                    actual: info.stored_len,
                });
            }
            payload
        }
        CODEC_LZ4 => {
            let bound = info
                .stored_len
                .saturating_mul(LZ4_MAX_EXPANSION)
                .saturating_add(64);
            if info.raw_len > bound {
                return Err(BlockDamage::WrongSize {
                    expected: info.raw_len,
                    actual: bound,
                });
            }
            let raw_len = usize::try_from(info.raw_len).map_err(|_| BlockDamage::WrongSize {
                expected: info.raw_len,
                actual: 0,
            })?;
            scratch.clear();
            scratch.resize(raw_len, 0);
            let n = lz4_flex::block::decompress_into(payload, scratch)
                .map_err(|e| BlockDamage::Decompress(e.to_string()))?;
            if n != raw_len {
                return Err(BlockDamage::WrongSize {
                    expected: info.raw_len,
                    actual: n as u64,
                });
            }
            scratch
        }
        other => return Err(BlockDamage::Header(format!("unknown codec {other}"))),
    };
    Ok(decode_records(
        raw,
        info.records,
        &options.limits,
        options.now_ms,
    ))
}
