//! Writing RDB version 10 (Redis 7.0's format; docs/rdb.md, "Writing").
//!
//! Values are encoded the way Redis 7.0 encodes them, so a DUMP payload of
//! a string, a small hash, set or sorted set, or a list of one node is
//! byte for byte what Redis produces: compact collections become
//! listpacks and intsets, large ones the plain forms, strings are stored
//! as integers when they are short canonical integers and LZF-compressed
//! above 20 bytes when that saves space.

use std::cell::RefCell;

use super::{kind, listpack, lzf, opcode, Crc64, WRITE_VERSION};
use crate::repl::ids::Position;
use crate::types::hash::Hash;
use crate::types::list::List;
use crate::types::num::{parse_i64, G17_BYTES};
use crate::types::set::Set;
use crate::types::stream::{NodeLayout, Stream, StreamId};
use crate::types::zset::{listpack_score_entry, ScoreEntry, ZSet};
use crate::types::{Blob, EncodingLimits, Value};

/// The Redis version whose format hozon writes (the `redis-ver` AUX field).
pub const REDIS_VER: &str = "7.0.15";

/// Redis's `SIZE_ESTIMATE_OVERHEAD`: what a quicklist assumes one more
/// element adds to a node besides its bytes.
const SIZE_ESTIMATE_OVERHEAD: usize = 8;
/// Redis's `SIZE_SAFETY_LIMIT` for nodes limited by count.
const SIZE_SAFETY_LIMIT: usize = 8192;
/// Elements at least this large get a plain quicklist node.
const PACKED_THRESHOLD: usize = 1 << 30;

/// How values are encoded.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Encoder {
    /// LZF-compress strings longer than 20 bytes (`rdbcompression`).
    pub compress: bool,
    /// `list-max-listpack-size` decides the quicklist node size.
    pub list_max_listpack_size: i64,
    /// Which access record each key gets (IDLE under an LRU policy, FREQ
    /// under an LFU one, as Redis's `rdbSaveKeyValuePair`).
    pub key_access: KeyAccessRecord,
}

impl Default for Encoder {
    fn default() -> Self {
        Encoder {
            compress: true,
            list_max_listpack_size: EncodingLimits::default().list_max_listpack_size,
            key_access: KeyAccessRecord::None,
        }
    }
}

/// The access record written before each key, from the key's 24-bit
/// access field ([`crate::keyspace::access`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum KeyAccessRecord {
    /// None (no LRU or LFU policy).
    #[default]
    None,
    /// `IDLE` seconds, with the LRU clock at the save.
    Idle {
        /// The LRU clock when the save began.
        clock: u32,
    },
    /// `FREQ`, the counter decayed to the save's time.
    Freq {
        /// The LFU minutes when the save began.
        minutes: u32,
        /// `lfu-decay-time`.
        decay_time: u64,
    },
}

/// Appends an RDB length.
pub fn put_len(out: &mut Vec<u8>, n: u64) {
    if n < 1 << 6 {
        out.push(n as u8);
    } else if n < 1 << 14 {
        out.push(0x40 | (n >> 8) as u8);
        out.push(n as u8);
    } else if n <= u64::from(u32::MAX) {
        out.push(0x80);
        out.extend_from_slice(&(n as u32).to_be_bytes());
    } else {
        out.push(0x81);
        out.extend_from_slice(&n.to_be_bytes());
    }
}

/// Redis's `rdbEncodeInteger`: the special encodings of an integer that
/// fits 32 bits.
fn put_int_encoded(out: &mut Vec<u8>, v: i64) -> bool {
    if let Ok(v) = i8::try_from(v) {
        out.push(0xC0);
        out.push(v as u8);
    } else if let Ok(v) = i16::try_from(v) {
        out.push(0xC1);
        out.extend_from_slice(&v.to_le_bytes());
    } else if let Ok(v) = i32::try_from(v) {
        out.push(0xC2);
        out.extend_from_slice(&v.to_le_bytes());
    } else {
        return false;
    }
    true
}

/// [`put_len`]'s bytes for `n`, written in `buf`.
fn len_encoded(n: u64, buf: &mut [u8; 9]) -> &[u8] {
    if n < 1 << 6 {
        buf[0] = n as u8;
        &buf[..1]
    } else if n < 1 << 14 {
        buf[0] = 0x40 | (n >> 8) as u8;
        buf[1] = n as u8;
        &buf[..2]
    } else if n <= u64::from(u32::MAX) {
        buf[0] = 0x80;
        buf[1..5].copy_from_slice(&(n as u32).to_be_bytes());
        &buf[..5]
    } else {
        buf[0] = 0x81;
        buf[1..].copy_from_slice(&n.to_be_bytes());
        &buf[..]
    }
}

/// Appends `s` LZF-compressed as `rdbSaveLzfStringObject` does (0xC3, the
/// compressed length, the length, the data) when the data takes at most
/// `s.len() - 4` bytes, compressing straight into `out`; false (`out` as
/// it was) otherwise. `s` is longer than 4 bytes.
fn put_compressed(out: &mut Vec<u8>, s: &[u8]) -> bool {
    let max_len = s.len() - 4;
    let mark = out.len();
    out.push(0xC3);
    // Room for the compressed length at its largest (`max_len`), closed
    // up below when the actual length takes fewer bytes.
    let room = len_encoded(max_len as u64, &mut [0; 9]).len();
    let len_at = out.len();
    out.resize(len_at + room, 0);
    put_len(out, s.len() as u64);
    let data_at = out.len();
    if !lzf::compress(s, out, max_len) {
        out.truncate(mark);
        return false;
    }
    let mut buf = [0; 9];
    let len = len_encoded((out.len() - data_at) as u64, &mut buf);
    if len.len() < room {
        out.copy_within(len_at + room.., len_at + len.len());
        out.truncate(out.len() - (room - len.len()));
    }
    out[len_at..len_at + len.len()].copy_from_slice(len);
    true
}

impl Encoder {
    /// Appends a string the way `rdbSaveRawString` does.
    pub fn put_string(&self, out: &mut Vec<u8>, s: &[u8]) {
        if s.len() <= 11 {
            if let Some(v) = parse_i64(s) {
                if put_int_encoded(out, v) {
                    return;
                }
            }
        }
        if self.compress && s.len() > 20 && put_compressed(out, s) {
            return;
        }
        put_len(out, s.len() as u64);
        out.extend_from_slice(s);
    }

    /// The type byte Redis 7.0 writes for `value`.
    pub fn value_type(&self, value: &Value) -> u8 {
        match value {
            Value::Str(_) => kind::STRING,
            Value::List(_) => kind::LIST_QUICKLIST_2,
            Value::Hash(h) => match **h {
                Hash::Listpack(_) => kind::HASH_LISTPACK,
                Hash::Table(_) => kind::HASH,
            },
            Value::Set(s) => match **s {
                Set::Intset(_) => kind::SET_INTSET,
                Set::Packed(_) | Set::Table(_) => kind::SET,
            },
            Value::ZSet(z) => {
                if z.is_listpack() {
                    kind::ZSET_LISTPACK
                } else {
                    kind::ZSET_2
                }
            }
            Value::Stream(_) => kind::STREAM_LISTPACKS_2,
        }
    }

    /// Appends the body of `value` (after its type byte and key).
    pub fn put_value(&self, out: &mut Vec<u8>, value: &Value) {
        match value {
            Value::Str(s) => self.put_string(out, s),
            Value::List(l) => self.put_list(out, l),
            Value::Hash(h) => match &**h {
                Hash::Listpack(pairs) => self.put_listpack(out, |lp| {
                    for (f, v) in pairs {
                        lp.push_str(f);
                        lp.push_str(v);
                    }
                }),
                Hash::Table(_) => {
                    put_len(out, h.len() as u64);
                    for (f, v) in h.iter() {
                        self.put_string(out, f);
                        self.put_string(out, v);
                    }
                }
            },
            Value::Set(s) => match &**s {
                Set::Intset(ints) => with_scratch(|scratch| {
                    super::intset::encode_into(ints, &mut scratch.bytes);
                    self.put_string(out, &scratch.bytes);
                }),
                Set::Packed(_) | Set::Table(_) => {
                    put_len(out, s.len() as u64);
                    for m in s.iter() {
                        m.with_bytes(|b| self.put_string(out, b));
                    }
                }
            },
            Value::ZSet(z) => self.put_zset(out, z),
            Value::Stream(s) => self.put_stream(out, s),
        }
    }

    fn put_zset(&self, out: &mut Vec<u8>, z: &ZSet) {
        if z.is_listpack() {
            self.put_listpack(out, |lp| {
                let mut text = [0; G17_BYTES];
                for (member, score) in z.iter() {
                    lp.push_str(member);
                    match listpack_score_entry(score, &mut text) {
                        ScoreEntry::Int(n) => lp.push_int(n),
                        ScoreEntry::Text(t) => lp.push_str(t),
                    }
                }
            });
        } else {
            // From the greatest element down, as Redis writes skiplists
            // (its loader then inserts at the head in O(1)).
            put_len(out, z.len() as u64);
            for (member, score) in z.iter_from(z.len().saturating_sub(1), true) {
                self.put_string(out, member);
                out.extend_from_slice(&score.to_le_bytes());
            }
        }
    }

    /// A quicklist of listpack nodes split the way Redis fills nodes when
    /// elements are appended.
    fn put_list(&self, out: &mut Vec<u8>, l: &List) {
        with_scratch(|scratch| {
            let Scratch { bytes, nodes } = scratch;
            self.build_nodes(l, bytes, nodes);
            put_len(out, nodes.len() as u64);
            let mut start = 0;
            for &(container, end) in nodes.iter() {
                put_len(out, u64::from(container));
                self.put_string(out, &bytes[start..end]);
                start = end;
            }
        });
    }

    /// The quicklist Redis would hold for `l`: each node's container
    /// (1 plain, 2 packed) and size in bytes (DEBUG OBJECT's `ql_*`).
    pub fn quicklist_layout(&self, l: &List) -> Vec<(u8, usize)> {
        let (mut bytes, mut nodes) = (Vec::new(), Vec::new());
        self.build_nodes(l, &mut bytes, &mut nodes);
        let mut start = 0;
        nodes
            .into_iter()
            .map(|(container, end)| {
                let size = end - start;
                start = end;
                (container, size)
            })
            .collect()
    }

    /// Builds `l`'s quicklist nodes one after another in `bytes` (cleared
    /// first), each ending where its entry in `nodes` says.
    fn build_nodes(&self, l: &List, bytes: &mut Vec<u8>, nodes: &mut Vec<(u8, usize)>) {
        let fill = self.list_max_listpack_size;
        let max_bytes = match fill {
            -1 => 4096,
            -2 => 8192,
            -3 => 16384,
            -4 => 32768,
            f if f <= -5 => 65536,
            _ => SIZE_SAFETY_LIMIT,
        };
        let max_count = if fill > 0 { fill as usize } else { usize::MAX };
        let mut done = std::mem::take(bytes);
        done.clear();
        nodes.clear();
        let mut current: Option<listpack::Builder> = None;
        for item in l.iter() {
            if item.len() >= PACKED_THRESHOLD {
                if let Some(lp) = current.take() {
                    done = lp.finish();
                    nodes.push((2, done.len()));
                }
                done.extend_from_slice(item);
                nodes.push((1, done.len()));
                continue;
            }
            let fits = current.as_ref().is_some_and(|lp| {
                lp.bytes() + item.len() + SIZE_ESTIMATE_OVERHEAD <= max_bytes
                    && lp.len() < max_count
            });
            if !fits {
                if let Some(lp) = current.take() {
                    done = lp.finish();
                    nodes.push((2, done.len()));
                }
                current = Some(listpack::Builder::append_to(std::mem::take(&mut done)));
            }
            if let Some(lp) = current.as_mut() {
                lp.push_str(item);
            }
        }
        if let Some(lp) = current.take() {
            done = lp.finish();
            nodes.push((2, done.len()));
        }
        *bytes = done;
    }

    /// Appends, as a string, the listpack `fill` builds (in the thread's
    /// scratch buffer).
    fn put_listpack(&self, out: &mut Vec<u8>, fill: impl FnOnce(&mut listpack::Builder)) {
        with_scratch(|scratch| {
            let mut lp = listpack::Builder::append_to(std::mem::take(&mut scratch.bytes));
            fill(&mut lp);
            scratch.bytes = lp.finish();
            self.put_string(out, &scratch.bytes);
        });
    }

    /// STREAM_LISTPACKS_2: one listpack per node of the stream's layout,
    /// holding its live entries. hozon keeps no tombstone contents, so a
    /// node with live entries is written without its tombstones, and a node
    /// of tombstones only (an exact trim leaves one, and Redis keeps it)
    /// with as many tombstones as it had: its first and last IDs, IDs
    /// between counted up from the first, empty values.
    fn put_stream(&self, out: &mut Vec<u8>, s: &Stream) {
        let mut nodes: Vec<(StreamId, Vec<u8>)> = Vec::with_capacity(s.node_count());
        for node in s.node_layouts() {
            let (master_id, master_fields) = (node.master_id, node.master_fields);
            let entries: Vec<_> = s.range(master_id, node.last_id, false).collect();
            if entries.is_empty() {
                if let Some(lp) = tombstone_node(node) {
                    nodes.push((master_id, lp));
                }
                continue;
            }
            let mut lp = listpack::Builder::new();
            lp.push_int(entries.len() as i64);
            lp.push_int(0);
            push_master_fields(&mut lp, master_fields);
            for (id, fields) in entries {
                let same = fields.len() == master_fields.len()
                    && fields.iter().zip(master_fields).all(|((f, _), m)| f == m);
                lp.push_int(if same { 2 } else { 0 });
                lp.push_int(id.ms.wrapping_sub(master_id.ms) as i64);
                lp.push_int(id.seq.wrapping_sub(master_id.seq) as i64);
                if same {
                    for (_, v) in fields.iter() {
                        lp.push_str(v);
                    }
                    lp.push_int(fields.len() as i64 + 3);
                } else {
                    lp.push_int(fields.len() as i64);
                    for (f, v) in fields.iter() {
                        lp.push_str(f);
                        lp.push_str(v);
                    }
                    lp.push_int(2 * fields.len() as i64 + 4);
                }
            }
            nodes.push((master_id, lp.finish()));
        }
        put_len(out, nodes.len() as u64);
        for (master_id, lp) in nodes {
            self.put_string(out, &id_to_be(master_id));
            self.put_string(out, &lp);
        }
        put_len(out, s.len() as u64);
        put_id(out, s.last_id);
        put_id(out, s.first_id);
        put_id(out, s.max_deleted_entry_id);
        put_len(out, s.entries_added);
        put_len(out, s.groups.len() as u64);
        for (name, g) in &s.groups {
            self.put_string(out, name);
            put_id(out, g.last_id);
            put_len(out, g.entries_read as u64);
            put_len(out, g.pel.len() as u64);
            for (id, p) in &g.pel {
                out.extend_from_slice(&id_to_be(*id));
                out.extend_from_slice(&p.delivery_time_ms.to_le_bytes());
                put_len(out, p.delivery_count);
            }
            put_len(out, g.consumers.len() as u64);
            for (cname, consumer) in &g.consumers {
                self.put_string(out, cname);
                out.extend_from_slice(&consumer.seen_time_ms.to_le_bytes());
                put_len(out, consumer.pel.len() as u64);
                for id in &consumer.pel {
                    out.extend_from_slice(&id_to_be(*id));
                }
            }
        }
    }

    /// Appends a key record: expiry (if any), type, key, value.
    pub fn put_key(&self, out: &mut Vec<u8>, key: &[u8], value: &Value, expire_ms: Option<i64>) {
        self.put_key_with_access(out, key, value, expire_ms, None);
    }

    /// [`Encoder::put_key`] with the key's access field, written as an
    /// IDLE or FREQ record after the expiry as [`Encoder::key_access`] says.
    pub fn put_key_with_access(
        &self,
        out: &mut Vec<u8>,
        key: &[u8],
        value: &Value,
        expire_ms: Option<i64>,
        access: Option<u32>,
    ) {
        if let Some(at) = expire_ms {
            out.push(opcode::EXPIRETIME_MS);
            out.extend_from_slice(&at.to_le_bytes());
        }
        if let Some(stored) = access {
            match self.key_access {
                KeyAccessRecord::None => {}
                KeyAccessRecord::Idle { clock } => {
                    out.push(opcode::IDLE);
                    put_len(out, crate::keyspace::access::idle_ms(clock, stored) / 1000);
                }
                KeyAccessRecord::Freq {
                    minutes,
                    decay_time,
                } => {
                    out.push(opcode::FREQ);
                    out.push(
                        crate::keyspace::access::lfu_decayed(stored, minutes, decay_time) as u8,
                    );
                }
            }
        }
        out.push(self.value_type(value));
        self.put_string(out, key);
        self.put_value(out, value);
    }

    /// Appends an AUX field.
    pub fn put_aux(&self, out: &mut Vec<u8>, name: &str, value: &[u8]) {
        out.push(opcode::AUX);
        self.put_string(out, name.as_bytes());
        self.put_string(out, value);
    }

    /// Appends the header and AUX fields of a file created at `ctime_ms`;
    /// `aof_base` marks an AOF preamble.
    pub fn put_header(&self, out: &mut Vec<u8>, ctime_ms: i64, used_mem: u64, aof_base: bool) {
        self.put_header_with_position(out, ctime_ms, used_mem, aof_base, None);
    }

    /// [`put_header`](Self::put_header), with the AUX fields of a
    /// replication position when there is one: `repl-stream-db`,
    /// `repl-id`, `repl-offset`, where Redis's `rdbSaveInfoAuxFields`
    /// puts them (after `used-mem`, before `aof-base`) and encoded as it
    /// encodes them (the numbers as integer strings). Without a position
    /// the bytes are [`put_header`](Self::put_header)'s.
    pub fn put_header_with_position(
        &self,
        out: &mut Vec<u8>,
        ctime_ms: i64,
        used_mem: u64,
        aof_base: bool,
        position: Option<&Position>,
    ) {
        out.extend_from_slice(format!("REDIS{WRITE_VERSION:04}").as_bytes());
        self.put_aux(out, "redis-ver", REDIS_VER.as_bytes());
        self.put_aux(out, "redis-bits", b"64");
        self.put_aux(out, "ctime", (ctime_ms / 1000).to_string().as_bytes());
        self.put_aux(out, "used-mem", used_mem.to_string().as_bytes());
        if let Some(p) = position {
            let db = p.stream_db.to_string();
            self.put_aux(out, super::AUX_REPL_STREAM_DB, db.as_bytes());
            self.put_aux(out, super::AUX_REPL_ID, p.replid.as_bytes());
            let offset = p.offset.to_string();
            self.put_aux(out, super::AUX_REPL_OFFSET, offset.as_bytes());
        }
        self.put_aux(out, "aof-base", if aof_base { b"1" } else { b"0" });
        self.put_aux(out, "hozon-ver", env!("CARGO_PKG_VERSION").as_bytes());
    }

    /// Appends a function library record (FUNCTION2 and the source), as
    /// Redis's `rdbSaveFunctions` writes each library.
    pub fn put_function(&self, out: &mut Vec<u8>, code: &[u8]) {
        out.push(opcode::FUNCTION2);
        self.put_string(out, code);
    }

    /// Appends SELECTDB and RESIZEDB for a database.
    pub fn put_select(&self, out: &mut Vec<u8>, db: usize, keys: u64, expiring: u64) {
        out.push(opcode::SELECTDB);
        put_len(out, db as u64);
        out.push(opcode::RESIZEDB);
        put_len(out, keys);
        put_len(out, expiring);
    }
}

/// Buffers a thread reuses from value to value: a listpack or intset is
/// built here before it is written (compressed) as a string.
#[derive(Default)]
struct Scratch {
    bytes: Vec<u8>,
    /// A list's nodes: container kind and where each ends in `bytes`.
    nodes: Vec<(u8, usize)>,
}

/// Scratch buffers grown past this are freed after use rather than kept.
const SCRATCH_KEPT_BYTES: usize = 1 << 20;

thread_local! {
    static SCRATCH: RefCell<Scratch> = RefCell::default();
}

/// Runs `f` with the thread's scratch buffers, emptied. (Taken out for
/// the call: a nested call would get fresh ones.)
fn with_scratch<R>(f: impl FnOnce(&mut Scratch) -> R) -> R {
    let mut scratch = SCRATCH.try_with(RefCell::take).unwrap_or_default();
    scratch.bytes.clear();
    scratch.nodes.clear();
    let result = f(&mut scratch);
    if scratch.bytes.capacity() <= SCRATCH_KEPT_BYTES
        && scratch.nodes.capacity() <= SCRATCH_KEPT_BYTES / 16
    {
        let _ = SCRATCH.try_with(|kept| kept.replace(scratch));
    }
    result
}

fn id_to_be(id: StreamId) -> [u8; 16] {
    let mut raw = [0u8; 16];
    raw[..8].copy_from_slice(&id.ms.to_be_bytes());
    raw[8..].copy_from_slice(&id.seq.to_be_bytes());
    raw
}

fn put_id(out: &mut Vec<u8>, id: StreamId) {
    put_len(out, id.ms);
    put_len(out, id.seq);
}

/// Appends EOF and the CRC-64 of everything in the file (`crc` holds
/// every byte written before `out`, `out` the rest).
pub fn put_trailer(out: &mut Vec<u8>, crc: &mut Crc64, checksum: bool) {
    out.push(opcode::EOF);
    crc.update(out);
    let value = if checksum { crc.value() } else { 0 };
    out.extend_from_slice(&value.to_le_bytes());
}

/// A DUMP payload: type, value, the RDB version (2 bytes LE) and the
/// CRC-64 of all that (8 bytes LE).
pub fn dump_payload(encoder: &Encoder, value: &Value) -> Vec<u8> {
    let mut out = vec![encoder.value_type(value)];
    encoder.put_value(&mut out, value);
    out.extend_from_slice(&WRITE_VERSION.to_le_bytes());
    let crc = super::crc64(&out);
    out.extend_from_slice(&crc.to_le_bytes());
    out
}

/// Encodes a whole keyspace image in memory (tests, small tools): every
/// `(db, key, value, expire)` in order. Keys must come grouped by db.
pub fn encode_file<'a>(
    encoder: &Encoder,
    ctime_ms: i64,
    keys: impl IntoIterator<Item = (usize, &'a Blob, &'a Value, Option<i64>)>,
) -> Vec<u8> {
    let mut out = Vec::new();
    encoder.put_header(&mut out, ctime_ms, 0, false);
    let mut current_db = None;
    for (db, key, value, expire) in keys {
        if current_db != Some(db) {
            out.push(opcode::SELECTDB);
            put_len(&mut out, db as u64);
            current_db = Some(db);
        }
        encoder.put_key(&mut out, key, value, expire);
    }
    let mut crc = Crc64::default();
    put_trailer(&mut out, &mut crc, true);
    out
}

/// The master entry's fields: their count, the names, the terminating 0.
fn push_master_fields(lp: &mut listpack::Builder, master_fields: &[Blob]) {
    lp.push_int(master_fields.len() as i64);
    for f in master_fields {
        lp.push_str(f);
    }
    lp.push_int(0);
}

/// The listpack of a node whose entries are all deleted (see
/// `put_stream`), or None when its recorded IDs leave no room for its
/// tombstones (a node an `XSETID` below its master ID appended to), which
/// is then left out.
fn tombstone_node(node: NodeLayout<'_>) -> Option<Vec<u8>> {
    if node.deleted == 0 || node.last_id < node.master_id {
        return None;
    }
    if (node.deleted == 1) != (node.last_id == node.master_id) {
        return None;
    }
    let mut ids = Vec::with_capacity(node.deleted.min(1 << 16) as usize);
    ids.push(node.master_id);
    let mut id = node.master_id;
    for _ in 2..node.deleted {
        id = id.next().filter(|next| *next < node.last_id)?;
        ids.push(id);
    }
    if node.deleted > 1 {
        ids.push(node.last_id);
    }
    let mut lp = listpack::Builder::new();
    lp.push_int(0);
    lp.push_int(node.deleted as i64);
    push_master_fields(&mut lp, node.master_fields);
    for id in ids {
        // Flags: deleted (1) | same fields as the master entry (2).
        lp.push_int(3);
        lp.push_int(id.ms.wrapping_sub(node.master_id.ms) as i64);
        lp.push_int(id.seq.wrapping_sub(node.master_id.seq) as i64);
        for _ in node.master_fields {
            lp.push_str(b"");
        }
        lp.push_int(node.master_fields.len() as i64 + 3);
    }
    Some(lp.finish())
}

/// Encoded bytes gathered before a write.
pub const CHUNK_BYTES: usize = 1 << 20;

/// Encodes key records into chunks, adding SELECTDB whenever the database
/// changes (records must come grouped by database).
pub struct RecordEncoder {
    /// The value encoder.
    pub encoder: Encoder,
    buf: Vec<u8>,
    db: Option<usize>,
    /// Keys encoded.
    pub keys: u64,
}

impl RecordEncoder {
    /// A record encoder that starts with the file header.
    pub fn with_header(encoder: Encoder, ctime_ms: i64, used_mem: u64, aof_base: bool) -> Self {
        Self::with_header_and_position(encoder, ctime_ms, used_mem, aof_base, None)
    }

    /// [`with_header`](Self::with_header), the header recording
    /// `position` ([`Encoder::put_header_with_position`]).
    pub fn with_header_and_position(
        encoder: Encoder,
        ctime_ms: i64,
        used_mem: u64,
        aof_base: bool,
        position: Option<&Position>,
    ) -> Self {
        let mut buf = Vec::with_capacity(CHUNK_BYTES + CHUNK_BYTES / 8);
        encoder.put_header_with_position(&mut buf, ctime_ms, used_mem, aof_base, position);
        RecordEncoder {
            encoder,
            buf,
            db: None,
            keys: 0,
        }
    }

    /// Encodes the function libraries (after the header, before any key,
    /// where Redis's `rdbSaveRio` writes them).
    pub fn put_functions(&mut self, codes: &[Vec<u8>]) {
        for code in codes {
            self.encoder.put_function(&mut self.buf, code);
        }
    }

    /// Encodes one key. `sizes` gives the RESIZEDB hint for a database
    /// when one starts.
    pub fn push(
        &mut self,
        db: usize,
        key: &[u8],
        value: &Value,
        expire_ms: Option<i64>,
        sizes: impl FnOnce(usize) -> (u64, u64),
    ) {
        self.push_with_access(db, key, None, value, expire_ms, sizes);
    }

    /// [`RecordEncoder::push`] of a key of the keyspace, with its access
    /// field (an IDLE or FREQ record as [`Encoder::key_access`] says).
    pub fn push_key(
        &mut self,
        db: usize,
        key: &Blob,
        value: &Value,
        expire_ms: Option<i64>,
        sizes: impl FnOnce(usize) -> (u64, u64),
    ) {
        self.push_with_access(db, key, Some(key.access()), value, expire_ms, sizes);
    }

    fn push_with_access(
        &mut self,
        db: usize,
        key: &[u8],
        access: Option<u32>,
        value: &Value,
        expire_ms: Option<i64>,
        sizes: impl FnOnce(usize) -> (u64, u64),
    ) {
        if self.db != Some(db) {
            let (keys, expiring) = sizes(db);
            self.encoder.put_select(&mut self.buf, db, keys, expiring);
            self.db = Some(db);
        }
        self.encoder
            .put_key_with_access(&mut self.buf, key, value, expire_ms, access);
        self.keys += 1;
    }

    /// The encoded bytes when at least a chunk has gathered.
    pub fn take_full(&mut self) -> Option<Vec<u8>> {
        (self.buf.len() >= CHUNK_BYTES).then(|| self.take())
    }

    /// Everything encoded so far.
    pub fn take(&mut self) -> Vec<u8> {
        std::mem::replace(
            &mut self.buf,
            Vec::with_capacity(CHUNK_BYTES + CHUNK_BYTES / 8),
        )
    }
}

#[cfg(test)]
mod tests {
    //! The encoder against a reference: the straightforward encoder this
    //! module had before its buffers were reused (a fresh Vec per
    //! listpack, compressed string and list node, scores as text), kept
    //! here to show the bytes have not changed.

    use super::*;
    use crate::keyspace::dict::Dict;
    use crate::rand::Rng;
    use crate::types::hash::Packed;
    use crate::types::list::End;
    use crate::types::zset::AddFlags;

    mod reference {
        use super::super::*;
        use crate::types::zset::listpack_score_text;

        pub fn put_string(e: &Encoder, out: &mut Vec<u8>, s: &[u8]) {
            if s.len() <= 11 {
                if let Some(v) = parse_i64(s) {
                    if put_int_encoded(out, v) {
                        return;
                    }
                }
            }
            if e.compress && s.len() > 20 {
                let mark = out.len();
                out.push(0xC3);
                let mut compressed = Vec::with_capacity(s.len());
                if lzf::compress(s, &mut compressed, s.len() - 4) {
                    put_len(out, compressed.len() as u64);
                    put_len(out, s.len() as u64);
                    out.extend_from_slice(&compressed);
                    return;
                }
                out.truncate(mark);
            }
            put_len(out, s.len() as u64);
            out.extend_from_slice(s);
        }

        pub fn put_key(
            e: &Encoder,
            out: &mut Vec<u8>,
            key: &[u8],
            value: &Value,
            expire_ms: Option<i64>,
        ) {
            if let Some(at) = expire_ms {
                out.push(opcode::EXPIRETIME_MS);
                out.extend_from_slice(&at.to_le_bytes());
            }
            out.push(e.value_type(value));
            put_string(e, out, key);
            put_value(e, out, value);
        }

        pub fn put_value(e: &Encoder, out: &mut Vec<u8>, value: &Value) {
            match value {
                Value::Str(s) => put_string(e, out, s),
                Value::List(l) => put_list(e, out, l),
                Value::Hash(h) => match &**h {
                    Hash::Listpack(pairs) => {
                        let mut lp = listpack::Builder::new();
                        for (f, v) in pairs {
                            lp.push_str(f);
                            lp.push_str(v);
                        }
                        put_string(e, out, &lp.finish());
                    }
                    Hash::Table(_) => {
                        put_len(out, h.len() as u64);
                        for (f, v) in h.iter() {
                            put_string(e, out, f);
                            put_string(e, out, v);
                        }
                    }
                },
                Value::Set(s) => match &**s {
                    Set::Intset(ints) => put_string(e, out, &crate::rdb::intset::encode(ints)),
                    Set::Packed(_) | Set::Table(_) => {
                        put_len(out, s.len() as u64);
                        for m in s.iter() {
                            m.with_bytes(|b| put_string(e, out, b));
                        }
                    }
                },
                Value::ZSet(z) => {
                    if z.is_listpack() {
                        let mut lp = listpack::Builder::new();
                        for (member, score) in z.iter() {
                            lp.push_str(member);
                            lp.push_str(listpack_score_text(score).as_bytes());
                        }
                        put_string(e, out, &lp.finish());
                    } else {
                        put_len(out, z.len() as u64);
                        for (member, score) in z.iter_from(z.len().saturating_sub(1), true) {
                            put_string(e, out, member);
                            out.extend_from_slice(&score.to_le_bytes());
                        }
                    }
                }
                Value::Stream(_) => e.put_value(out, value),
            }
        }

        fn put_list(e: &Encoder, out: &mut Vec<u8>, l: &List) {
            let fill = e.list_max_listpack_size;
            let max_bytes = match fill {
                -1 => 4096,
                -2 => 8192,
                -3 => 16384,
                -4 => 32768,
                f if f <= -5 => 65536,
                _ => SIZE_SAFETY_LIMIT,
            };
            let max_count = if fill > 0 { fill as usize } else { usize::MAX };
            let mut nodes: Vec<(u8, Vec<u8>)> = Vec::new();
            let mut current: Option<listpack::Builder> = None;
            for item in l.iter() {
                let fits = current.as_ref().is_some_and(|lp| {
                    lp.bytes() + item.len() + SIZE_ESTIMATE_OVERHEAD <= max_bytes
                        && lp.len() < max_count
                });
                if !fits {
                    if let Some(lp) = current.take() {
                        nodes.push((2, lp.finish()));
                    }
                    current = Some(listpack::Builder::new());
                }
                if let Some(lp) = current.as_mut() {
                    lp.push_str(item);
                }
            }
            if let Some(lp) = current.take() {
                nodes.push((2, lp.finish()));
            }
            put_len(out, nodes.len() as u64);
            for (container, bytes) in nodes {
                put_len(out, u64::from(container));
                put_string(e, out, &bytes);
            }
        }
    }

    /// Random bytes of `len`: digits, repetitive text, or noise.
    fn bytes(rng: &mut Rng, len: usize) -> Vec<u8> {
        match rng.below(4) {
            0 => (0..len).map(|_| b'0' + rng.below(10) as u8).collect(),
            1 => b"abcab:".iter().copied().cycle().take(len).collect(),
            2 => (0..len).map(|_| rng.next_u64() as u8).collect(),
            _ => (0..len).map(|_| b'a' + rng.below(3) as u8).collect(),
        }
    }

    /// A string that is often an integer or a short one.
    fn element(rng: &mut Rng) -> Vec<u8> {
        match rng.below(6) {
            0 => (rng.next_u64() as i64 >> rng.below(64))
                .to_string()
                .into_bytes(),
            1 => Vec::new(),
            2 => {
                let n = rng.below(12) as usize;
                bytes(rng, n)
            }
            3 => {
                let n = rng.below(100) as usize;
                bytes(rng, n)
            }
            4 => {
                let n = 4000 + rng.below(200) as usize;
                bytes(rng, n)
            }
            _ => {
                let n = rng.below(30) as usize;
                bytes(rng, n)
            }
        }
    }

    fn length(rng: &mut Rng) -> usize {
        match rng.below(10) {
            0 => rng.below(3000) as usize,
            1 => rng.below(300) as usize,
            _ => 1 + rng.below(40) as usize,
        }
    }

    fn score(rng: &mut Rng) -> f64 {
        match rng.below(10) {
            0 => Some(f64::from_bits(rng.next_u64()))
                .filter(|s| !s.is_nan())
                .unwrap_or(0.5),
            1 => [
                0.0,
                -0.0,
                f64::INFINITY,
                f64::NEG_INFINITY,
                1e17,
                4.7e18,
                -1e19,
            ][rng.index(7)],
            2 => (rng.next_u64() as i64 >> rng.below(64)) as f64,
            3 => rng.below(1_000_000) as f64 / 7.0,
            4 => rng.below(1_000) as f64 / 16.0,
            5 => (rng.next_u64() as i64) as f64 / 3.0,
            _ => rng.below(1_000_000) as f64 - 500_000.0,
        }
    }

    fn value(rng: &mut Rng) -> Value {
        let limits = EncodingLimits::default();
        match rng.below(8) {
            0 => Value::Str(Blob::from_vec(element(rng))),
            1 => Value::Str(Blob::from_vec({
                let n = rng.below(70_000) as usize;
                bytes(rng, n)
            })),
            2 => {
                let mut l = List::new();
                for _ in 0..length(rng) {
                    l.push(End::Tail, &element(rng));
                }
                Value::List(Box::new(l))
            }
            3 => {
                let n = length(rng);
                let pairs: Vec<_> = (0..n).map(|_| (element(rng), element(rng))).collect();
                Value::Hash(Box::new(Hash::Listpack(Packed::from_pairs(pairs))))
            }
            4 => {
                let mut d = Dict::new();
                for i in 0..length(rng) {
                    let mut field = element(rng);
                    field.extend_from_slice(format!("#{i}").as_bytes());
                    d.insert_new(Blob::from_vec(field), Blob::from_vec(element(rng)));
                }
                Value::Hash(Box::new(Hash::Table(Box::new(d))))
            }
            5 => {
                let wide = rng.below(3);
                let mut ints: Vec<i64> = (0..length(rng))
                    .map(|_| match wide {
                        0 => i64::from(rng.next_u64() as i16),
                        1 => i64::from(rng.next_u64() as i32),
                        _ => rng.next_u64() as i64,
                    })
                    .collect();
                ints.sort_unstable();
                ints.dedup();
                Value::Set(Box::new(Set::Intset(ints)))
            }
            6 => {
                let mut s = Set::default();
                for _ in 0..length(rng) {
                    s.insert(&element(rng), limits.set_max_intset_entries);
                }
                Value::Set(Box::new(s))
            }
            _ => {
                let mut z = ZSet::new();
                let small = rng.below(2) == 0;
                for _ in 0..length(rng) {
                    let mut member = element(rng);
                    if small {
                        member.truncate(20);
                    }
                    z.add(&member, score(rng), AddFlags::default(), &limits)
                        .expect("no NaN score");
                }
                Value::ZSet(Box::new(z))
            }
        }
    }

    #[test]
    fn records_are_the_reference_encoders_bytes() {
        let mut rng = Rng::with_seed(20_261_205);
        let encoders = [
            Encoder::default(),
            Encoder {
                compress: false,
                ..Encoder::default()
            },
            Encoder {
                list_max_listpack_size: -1,
                ..Encoder::default()
            },
            Encoder {
                list_max_listpack_size: -5,
                ..Encoder::default()
            },
            Encoder {
                list_max_listpack_size: 3,
                ..Encoder::default()
            },
        ];
        for round in 0..3_000 {
            let v = value(&mut rng);
            let key = element(&mut rng);
            let expire = (round % 3 == 0).then(|| rng.next_u64() as i64);
            for e in &encoders {
                let mut ours = vec![0xAA];
                e.put_key(&mut ours, &key, &v, expire);
                let mut theirs = vec![0xAA];
                reference::put_key(e, &mut theirs, &key, &v, expire);
                assert!(ours == theirs, "round {round}, {e:?}: {v:?}");
            }
        }
    }
}
