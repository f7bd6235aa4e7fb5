//! Encoding records: the block builder.

use super::encode::{put_abs_id, put_bytes, put_id, put_varint, put_zigzag};
use super::format::{
    Part, ValueType, ACCESS_FREQ, ACCESS_IDLE, BLOCK_TARGET_BYTES, KIND_ACCESS, KIND_EXPIRE,
    KIND_PART_MASK, KIND_PART_SHIFT, LARGEST_KEY_PREFIX, MIN_STRING_CHUNK, SE_CONSUMER,
    SE_COUNTERS, SE_ENTRY, SE_GROUP, SE_NODE, SE_PENDING, TAG_HASH, TAG_LIST, TAG_SET_INTS,
    TAG_SET_STRINGS, TAG_STREAM, TAG_STRING, TAG_ZSET,
};
use super::stats::{Largest, Stats};
use crate::keyspace::KeyAccess;
use crate::rdb::writer::KeyAccessRecord;
use crate::types::set::{Member, Set};
use crate::types::stream::{Fields, Stream, StreamId};
use crate::types::{Blob, Value};

/// An uncompressed block: encoded records, ready for [`FileWriter`](super::FileWriter).
#[derive(Debug)]
pub struct RawBlock {
    /// The records, back to back.
    pub data: Vec<u8>,
    /// How many records (= keys) it holds.
    pub records: u32,
}

/// The record being written by [`BlockBuilder::push`].
struct OpenRecord {
    db: usize,
    tag: u8,
    part: Part,
    /// Position of the kind byte in the buffer.
    kind_pos: usize,
    /// Position of the element count (none for strings).
    count_pos: Option<usize>,
    /// Elements written in this record.
    count: u32,
    /// Buffer length when this record (part) started.
    mark: usize,
    /// Record bytes of earlier parts of the value.
    bytes: u64,
}

/// Encodes records into blocks of about [`BLOCK_TARGET_BYTES`]
/// uncompressed, on the thread that can read the keyspace, and keeps the
/// statistics the footer carries. Hand each block to a [`FileWriter`](super::FileWriter).
pub struct BlockBuilder {
    buf: Vec<u8>,
    records: u32,
    target: usize,
    stats: Stats,
    ready: Vec<RawBlock>,
    spare: Vec<Vec<u8>>,
    /// The access record [`BlockBuilder::push_key`] gives each key.
    key_access: KeyAccessRecord,
}

impl Default for BlockBuilder {
    fn default() -> Self {
        BlockBuilder::new()
    }
}

impl BlockBuilder {
    /// A builder closing blocks at [`BLOCK_TARGET_BYTES`].
    pub fn new() -> BlockBuilder {
        BlockBuilder::with_block_size(BLOCK_TARGET_BYTES)
    }

    /// A builder closing blocks at `target_bytes` (tests use small blocks
    /// to exercise split values).
    pub fn with_block_size(target_bytes: usize) -> BlockBuilder {
        let target = target_bytes.max(1);
        BlockBuilder {
            buf: Vec::with_capacity(target + target / 8),
            records: 0,
            target,
            stats: Stats::default(),
            ready: Vec::new(),
            spare: Vec::new(),
            key_access: KeyAccessRecord::None,
        }
    }

    /// The same builder, giving each key pushed with
    /// [`BlockBuilder::push_key`] the access record `key_access` says
    /// (the header must say the same: [`HeaderInfo::key_access`](super::HeaderInfo)).
    pub fn with_key_access(self, key_access: KeyAccessRecord) -> BlockBuilder {
        BlockBuilder { key_access, ..self }
    }

    /// [`BlockBuilder::push`] for a key of a keyspace, whose access field
    /// gives its access record (format 1.4) when the builder was made
    /// [`with_key_access`](BlockBuilder::with_key_access).
    pub fn push_key(
        &mut self,
        db: usize,
        key: &Blob,
        value: &Value,
        expire_ms: Option<i64>,
    ) -> Vec<RawBlock> {
        let stored = key.access();
        let access = match self.key_access {
            KeyAccessRecord::None => None,
            KeyAccessRecord::Idle { clock } => Some(KeyAccess::Idle(
                crate::keyspace::access::idle_ms(clock, stored) / 1000,
            )),
            KeyAccessRecord::Freq {
                minutes,
                decay_time,
            } => Some(KeyAccess::Freq(crate::keyspace::access::lfu_decayed(
                stored, minutes, decay_time,
            ) as u8)),
        };
        self.push_with(db, key, value, expire_ms, access)
    }

    /// The statistics of everything pushed so far (pass them to
    /// [`FileWriter::finish`](super::FileWriter::finish)).
    pub fn stats(&self) -> &Stats {
        &self.stats
    }

    /// Gives back a block's buffer (returned by
    /// [`FileWriter::write_block`](super::FileWriter::write_block)) so the next block reuses it.
    pub fn recycle(&mut self, mut buf: Vec<u8>) {
        if self.spare.len() < 4 && buf.capacity() >= self.target {
            buf.clear();
            self.spare.push(buf);
        }
    }

    /// Appends the record of `key` (in database `db`, holding `value`,
    /// expiring at the absolute time `expire_ms` if any). Returns the
    /// blocks this completed: usually none, one when the buffer reached
    /// the block size, several when a large value was split across
    /// blocks.
    pub fn push(
        &mut self,
        db: usize,
        key: &[u8],
        value: &Value,
        expire_ms: Option<i64>,
    ) -> Vec<RawBlock> {
        self.push_with(db, key, value, expire_ms, None)
    }

    /// [`BlockBuilder::push`] with the value's access record, if any.
    fn push_with(
        &mut self,
        db: usize,
        key: &[u8],
        value: &Value,
        expire_ms: Option<i64>,
        access: Option<KeyAccess>,
    ) -> Vec<RawBlock> {
        let (tag, elements) = match value {
            Value::Str(s) => (TAG_STRING, s.len() as u64),
            Value::List(l) => (TAG_LIST, l.len() as u64),
            Value::Hash(h) => (TAG_HASH, h.len() as u64),
            Value::Set(s) => match **s {
                Set::Intset(_) => (TAG_SET_INTS, s.len() as u64),
                Set::Packed(_) | Set::Table(_) => (TAG_SET_STRINGS, s.len() as u64),
            },
            Value::ZSet(z) => (TAG_ZSET, z.len() as u64),
            Value::Stream(s) => (TAG_STREAM, s.len() as u64),
        };
        let mut open = self.begin(db, key, tag, Part::Whole, expire_ms, access);
        match value {
            Value::Str(s) => self.write_string(&mut open, key, s),
            Value::List(l) => {
                let mut left = l.len();
                for item in l.iter() {
                    put_bytes(&mut self.buf, item);
                    left -= 1;
                    self.element_done(&mut open, key, left > 0);
                }
            }
            Value::Hash(h) => {
                let mut left = h.len();
                for (f, v) in h.iter() {
                    put_bytes(&mut self.buf, f);
                    put_bytes(&mut self.buf, v);
                    left -= 1;
                    self.element_done(&mut open, key, left > 0);
                }
            }
            Value::Set(s) => self.write_set(&mut open, key, s),
            Value::ZSet(z) => {
                let mut left = z.len();
                for (m, score) in z.iter() {
                    put_bytes(&mut self.buf, m);
                    self.buf.extend_from_slice(&score.to_bits().to_le_bytes());
                    left -= 1;
                    self.element_done(&mut open, key, left > 0);
                }
            }
            Value::Stream(s) => self.write_stream(&mut open, key, s),
        }
        self.end(&mut open);
        self.note_key(&open, key, ValueType::of_tag(tag), elements, expire_ms);
        if self.buf.len() >= self.target {
            self.close_block();
        }
        std::mem::take(&mut self.ready)
    }

    /// Closes the last block (none when nothing is pending).
    pub fn finish(&mut self) -> Option<RawBlock> {
        self.close_block();
        self.ready.pop()
    }

    fn begin(
        &mut self,
        db: usize,
        key: &[u8],
        tag: u8,
        part: Part,
        expire_ms: Option<i64>,
        access: Option<KeyAccess>,
    ) -> OpenRecord {
        let mark = self.buf.len();
        let mut kind = tag | ((part as u8) << KIND_PART_SHIFT);
        if expire_ms.is_some() {
            kind |= KIND_EXPIRE;
        }
        // Only a value's first record carries its access record (the
        // caller passes none for the others).
        if access.is_some() {
            kind |= KIND_ACCESS;
        }
        self.buf.push(kind);
        put_varint(&mut self.buf, db as u64);
        put_bytes(&mut self.buf, key);
        if let Some(at) = expire_ms {
            put_zigzag(&mut self.buf, at);
        }
        match access {
            Some(KeyAccess::Idle(seconds)) => {
                self.buf.push(ACCESS_IDLE);
                put_varint(&mut self.buf, seconds.min(super::format::ACCESS_MAX_IDLE));
            }
            Some(KeyAccess::Freq(counter)) => {
                self.buf.push(ACCESS_FREQ);
                self.buf.push(counter);
            }
            None => {}
        }
        let count_pos = (tag != TAG_STRING).then(|| {
            let at = self.buf.len();
            self.buf.extend_from_slice(&[0; 4]);
            at
        });
        self.records += 1;
        OpenRecord {
            db,
            tag,
            part,
            kind_pos: mark,
            count_pos,
            count: 0,
            mark,
            bytes: 0,
        }
    }

    /// Seals the record: its element count and part bits.
    fn seal(&mut self, open: &mut OpenRecord, part: Part) {
        if let Some(at) = open.count_pos {
            self.buf[at..at + 4].copy_from_slice(&open.count.to_le_bytes());
        }
        let kind = &mut self.buf[open.kind_pos];
        *kind = (*kind & !KIND_PART_MASK) | ((part as u8) << KIND_PART_SHIFT);
        open.bytes += (self.buf.len() - open.mark) as u64;
    }

    /// Counts an element; when the block is full and elements remain,
    /// ends this part, closes the block and continues the value in a new
    /// one. Returns true when it split (delta encodings restart).
    fn element_done(&mut self, open: &mut OpenRecord, key: &[u8], more: bool) -> bool {
        open.count += 1;
        if !more || self.buf.len() < self.target {
            return false;
        }
        self.split(open, key);
        true
    }

    fn split(&mut self, open: &mut OpenRecord, key: &[u8]) {
        let part = if open.part == Part::Whole {
            Part::First
        } else {
            Part::Middle
        };
        self.seal(open, part);
        if open.part == Part::Whole {
            self.stats.split_values += 1;
        }
        self.close_block();
        let bytes = open.bytes;
        *open = self.begin(open.db, key, open.tag, Part::Middle, None, None);
        open.bytes = bytes;
    }

    fn end(&mut self, open: &mut OpenRecord) {
        let part = if open.part == Part::Whole {
            Part::Whole
        } else {
            Part::Last
        };
        self.seal(open, part);
    }

    fn close_block(&mut self) {
        if self.records == 0 {
            return;
        }
        let next = self
            .spare
            .pop()
            .unwrap_or_else(|| Vec::with_capacity(self.target + self.target / 8));
        let data = std::mem::replace(&mut self.buf, next);
        self.ready.push(RawBlock {
            data,
            records: self.records,
        });
        self.records = 0;
    }

    fn write_string(&mut self, open: &mut OpenRecord, key: &[u8], s: &[u8]) {
        if s.len() <= self.target {
            put_bytes(&mut self.buf, s);
            return;
        }
        let mut rest = s;
        loop {
            let min_chunk = MIN_STRING_CHUNK.min(self.target / 16).max(1);
            let room = self.target.saturating_sub(self.buf.len()).max(min_chunk);
            let (chunk, tail) = rest.split_at(rest.len().min(room));
            put_bytes(&mut self.buf, chunk);
            rest = tail;
            if rest.is_empty() {
                return;
            }
            self.split(open, key);
        }
    }

    fn write_set(&mut self, open: &mut OpenRecord, key: &[u8], s: &Set) {
        let mut left = s.len();
        match s {
            Set::Intset(ints) => {
                let mut prev: Option<i64> = None;
                for &v in ints {
                    match prev {
                        None => put_zigzag(&mut self.buf, v),
                        // Strictly ascending: the gap minus one fits u64.
                        Some(p) => put_varint(&mut self.buf, (v as u64).wrapping_sub(p as u64) - 1),
                    }
                    prev = Some(v);
                    left -= 1;
                    if self.element_done(open, key, left > 0) {
                        prev = None;
                    }
                }
            }
            Set::Packed(_) | Set::Table(_) => {
                for m in s.iter() {
                    if let Member::Bytes(b) = m {
                        put_bytes(&mut self.buf, b);
                    } else {
                        m.with_bytes(|b| put_bytes(&mut self.buf, b));
                    }
                    left -= 1;
                    self.element_done(open, key, left > 0);
                }
            }
        }
    }

    fn write_stream(&mut self, open: &mut OpenRecord, key: &[u8], s: &Stream) {
        // Consumers named by pending entries but missing from the group
        // (an engine invariant says there are none) are written too, so
        // no pending entry is lost.
        let missing: Vec<Vec<&Blob>> = s
            .groups
            .values()
            .map(|g| {
                let mut names: Vec<&Blob> = g
                    .pel
                    .values()
                    .map(|p| &p.consumer)
                    .filter(|c| !g.consumers.contains_key(*c))
                    .collect();
                names.sort();
                names.dedup();
                names
            })
            .collect();
        debug_assert!(
            missing.iter().all(Vec::is_empty),
            "every pending entry's consumer is in its group"
        );
        let mut left = s.len()
            + s.node_count()
            + 1
            + s.groups
                .values()
                .zip(&missing)
                .map(|(g, m)| 1 + g.consumers.len() + m.len() + g.pel.len())
                .sum::<usize>();
        for node in s.node_layouts() {
            self.buf.push(SE_NODE);
            put_abs_id(&mut self.buf, node.master_id);
            put_abs_id(&mut self.buf, node.last_id);
            put_varint(&mut self.buf, node.live);
            put_varint(&mut self.buf, node.deleted);
            put_varint(&mut self.buf, node.body_bytes);
            put_varint(&mut self.buf, node.master_fields.len() as u64);
            for f in node.master_fields {
                put_bytes(&mut self.buf, f);
            }
            left -= 1;
            self.element_done(open, key, left > 0);
        }
        let mut prev_id: Option<StreamId> = None;
        let mut prev_fields: Option<&Fields> = None;
        for (id, fields) in s.range(StreamId::MIN, StreamId::MAX, false) {
            self.buf.push(SE_ENTRY);
            put_id(&mut self.buf, prev_id, id);
            let same = prev_fields.is_some_and(|p| {
                p.len() == fields.len() && p.iter().zip(fields.iter()).all(|(a, b)| a.0 == b.0)
            });
            put_varint(
                &mut self.buf,
                ((fields.len() as u64) << 1) | u64::from(same),
            );
            for (f, v) in fields.iter() {
                if !same {
                    put_bytes(&mut self.buf, f);
                }
                put_bytes(&mut self.buf, v);
            }
            prev_id = Some(id);
            prev_fields = Some(fields);
            left -= 1;
            if self.element_done(open, key, left > 0) {
                prev_id = None;
                prev_fields = None;
            }
        }
        self.buf.push(SE_COUNTERS);
        put_abs_id(&mut self.buf, s.last_id);
        put_abs_id(&mut self.buf, s.first_id);
        put_abs_id(&mut self.buf, s.max_deleted_entry_id);
        put_varint(&mut self.buf, s.entries_added);
        left -= 1;
        self.element_done(open, key, left > 0);
        for ((name, g), extra) in s.groups.iter().zip(&missing) {
            self.buf.push(SE_GROUP);
            put_bytes(&mut self.buf, name);
            put_abs_id(&mut self.buf, g.last_id);
            put_zigzag(&mut self.buf, g.entries_read);
            left -= 1;
            self.element_done(open, key, left > 0);
            for (cname, c) in &g.consumers {
                self.buf.push(SE_CONSUMER);
                put_bytes(&mut self.buf, cname);
                put_zigzag(&mut self.buf, c.seen_time_ms);
                left -= 1;
                self.element_done(open, key, left > 0);
            }
            for cname in extra {
                self.buf.push(SE_CONSUMER);
                put_bytes(&mut self.buf, cname);
                put_zigzag(&mut self.buf, 0);
                left -= 1;
                self.element_done(open, key, left > 0);
            }
            let mut prev_pending: Option<StreamId> = None;
            for (id, p) in &g.pel {
                let index = match g.consumers.keys().position(|c| *c == p.consumer) {
                    Some(i) => i,
                    None => {
                        g.consumers.len()
                            + extra
                                .iter()
                                .position(|c| **c == p.consumer)
                                .expect("missing consumers were collected above")
                    }
                };
                self.buf.push(SE_PENDING);
                put_id(&mut self.buf, prev_pending, *id);
                put_zigzag(&mut self.buf, p.delivery_time_ms);
                put_varint(&mut self.buf, p.delivery_count);
                put_varint(&mut self.buf, index as u64);
                prev_pending = Some(*id);
                left -= 1;
                if self.element_done(open, key, left > 0) {
                    prev_pending = None;
                }
            }
        }
    }

    fn note_key(
        &mut self,
        open: &OpenRecord,
        key: &[u8],
        t: ValueType,
        elements: u64,
        expire_ms: Option<i64>,
    ) {
        let stats = &mut self.stats;
        stats.keys += 1;
        let db = stats.dbs.entry(open.db).or_default();
        db.keys += 1;
        if let Some(at) = expire_ms {
            db.expiring_keys += 1;
            stats.expiring_keys += 1;
            stats.min_expire_ms = Some(stats.min_expire_ms.map_or(at, |m| m.min(at)));
            stats.max_expire_ms = Some(stats.max_expire_ms.map_or(at, |m| m.max(at)));
        }
        let ts = &mut stats.types[t as usize];
        ts.keys += 1;
        ts.elements += elements;
        ts.bytes += open.bytes;
        if ts.largest.as_ref().is_none_or(|l| open.bytes > l.bytes) {
            ts.largest = Some(Largest {
                db: open.db,
                key_len: key.len() as u64,
                key_prefix: key[..key.len().min(LARGEST_KEY_PREFIX)].to_vec(),
                bytes: open.bytes,
                elements,
            });
        }
    }
}
