//! The skip pass ([`scan`]) and the per-key walk ([`scan_keys`]): the
//! structure of a file walked without building values.

use std::borrow::Cow;

use super::*;

// ---------------------------------------------------------------------------
// The skip pass.

/// Per value type counts of a [`scan`].
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TypeCount {
    /// Keys of this type.
    pub keys: u64,
    /// Bytes their records take in the file (key and value).
    pub bytes: u64,
}

/// What [`scan`] found, without building any value.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ScanSummary {
    /// The header's version.
    pub version: u16,
    /// The header was Valkey's.
    pub valkey: bool,
    /// AUX fields.
    pub aux: Vec<(Blob, Blob)>,
    /// Function libraries.
    pub functions: u64,
    /// Keys per database index.
    pub keys_per_db: std::collections::BTreeMap<usize, u64>,
    /// Keys with an expiry.
    pub expiring: u64,
    /// Keys whose expiry had passed when the walk started (`now_ms` of
    /// the wall clock then; redis-check-rdb's "already expired").
    pub expired: u64,
    /// The wall-clock time [`ScanSummary::expired`] is relative to.
    pub scanned_at_ms: i64,
    /// Keys and bytes per value type byte.
    pub types: std::collections::BTreeMap<u8, TypeCount>,
    /// Checksum result.
    pub checksum: Option<Checksum>,
    /// Bytes through the checksum.
    pub len: usize,
    /// Keys a load skips because their collection is empty (Redis skips
    /// them too): counted by [`super::check_keys`] only, which does not
    /// visit them or count them as keys; the skip passes cannot tell.
    pub empty_skipped: u64,
}

impl ScanSummary {
    /// The replication position of the `repl-*` AUX fields read, when all
    /// three are present and well formed ([`crate::rdb::position_from_aux`]).
    pub fn position(&self) -> Option<crate::repl::ids::Position> {
        crate::rdb::position_from_aux(&self.aux)
    }
}

/// Walks a whole RDB file without building values: every length is read
/// and bounds-checked, compact encodings are skipped as strings (not
/// walked), LZF data is not decompressed; the CRC is verified. This is
/// the summary pass of the inspector.
pub fn scan(data: &[u8]) -> Result<ScanSummary, RdbError> {
    if data.len() < PARALLEL_MIN_BYTES || data[data.len() - 9] != opcode::EOF {
        return scan_with(data, None);
    }
    // The CRC of a whole file is computed on another thread meanwhile.
    std::thread::scope(|scope| {
        let whole = data.len() - 8;
        let job = scope.spawn(move || crate::rdb::crc64(&data[..whole]));
        scan_with(data, Some(job))
    })
}

fn scan_with(
    data: &[u8],
    mut crc_job: Option<std::thread::ScopedJoinHandle<'_, u64>>,
) -> Result<ScanSummary, RdbError> {
    let (version, valkey, header_len) = read_header(data)?;
    let mut out = ScanSummary {
        version,
        valkey,
        scanned_at_ms: crate::clock::now_ms(),
        ..ScanSummary::default()
    };
    let mut c = Cursor::new(data, header_len);
    let mut db = 0usize;
    let mut expire_ms: Option<i64> = None;
    // Counters indexed by database and type byte (no map per key).
    let mut per_db: Vec<u64> = Vec::new();
    let mut per_type: Vec<TypeCount> = vec![TypeCount::default(); 256];
    loop {
        let record_at = c.pos;
        match c.u8("a record type")? {
            opcode::EOF => break,
            t if scan_opcode(&mut c, t, record_at, &mut out, &mut db, &mut expire_ms)? => {}
            t => {
                c.skip_string("a key")?;
                skip_value(&mut c, t, valkey)?;
                // The database number comes from the file: only small ones
                // index the vector, so a damaged SELECTDB cannot size it.
                if db < 1 << 16 {
                    if per_db.len() <= db {
                        per_db.resize(db + 1, 0);
                    }
                    per_db[db] += 1;
                } else {
                    *out.keys_per_db.entry(db).or_default() += 1;
                }
                if let Some(at) = expire_ms.take() {
                    out.expiring += 1;
                    out.expired += u64::from(at < out.scanned_at_ms);
                }
                let entry = &mut per_type[usize::from(t)];
                entry.keys += 1;
                entry.bytes += (c.pos - record_at) as u64;
            }
        }
    }
    out.keys_per_db
        .extend(per_db.into_iter().enumerate().filter(|&(_, n)| n > 0));
    out.types = per_type
        .into_iter()
        .enumerate()
        .filter(|(_, c)| c.keys > 0)
        .map(|(t, c)| (t as u8, c))
        .collect();
    out.checksum = Some(verify_checksum(
        data,
        &mut c,
        version,
        &mut |covered| match crc_job.take() {
            Some(job) if covered + 8 == data.len() => job
                .join()
                .unwrap_or_else(|_| crate::rdb::crc64(&data[..covered])),
            _ => crate::rdb::crc64(&data[..covered]),
        },
    )?);
    out.len = c.pos;
    Ok(out)
}

/// The skip passes' handling of a record that is not a key: reads it,
/// notes what the summary keeps, and returns false for a value type.
pub(super) fn scan_opcode(
    c: &mut Cursor<'_>,
    t: u8,
    record_at: usize,
    out: &mut ScanSummary,
    db: &mut usize,
    expire_ms: &mut Option<i64>,
) -> Result<bool, RdbError> {
    let Some(meta) = read_meta(c, t, record_at)? else {
        return Ok(false);
    };
    match meta {
        Meta::SelectDb(n) => *db = n as usize,
        Meta::Expire(at) => *expire_ms = Some(at),
        Meta::Aux(name, value) => out.aux.push((name, value)),
        Meta::Function(_) => out.functions += 1,
        Meta::Eof
        | Meta::ResizeDb { .. }
        | Meta::ModuleAux(_)
        | Meta::Idle(_)
        | Meta::Freq(_)
        | Meta::Ignored => {}
    }
    Ok(true)
}

pub(super) fn skip_value(c: &mut Cursor<'_>, t: u8, valkey: bool) -> Result<(), RdbError> {
    let at = c.pos;
    match t {
        kind::STRING
        | kind::HASH_ZIPMAP
        | kind::LIST_ZIPLIST
        | kind::SET_INTSET
        | kind::ZSET_ZIPLIST
        | kind::HASH_ZIPLIST
        | kind::HASH_LISTPACK
        | kind::ZSET_LISTPACK
        | kind::SET_LISTPACK
        | kind::HASH_LISTPACK_EX_PRE_GA => c.skip_string("a value")?,
        kind::HASH_LISTPACK_EX => {
            c.take(8, "a hash minimum expiry")?;
            c.skip_string("a value")?;
        }
        kind::LIST | kind::SET => {
            for _ in 0..c.count("a length", 1)? {
                c.skip_string("an element")?;
            }
        }
        kind::ZSET => {
            for _ in 0..c.count("a length", 2)? {
                c.skip_string("a member")?;
                c.string_double("a score")?;
            }
        }
        kind::ZSET_2 => {
            for _ in 0..c.count("a length", 9)? {
                c.skip_string("a member")?;
                c.take(8, "a score")?;
            }
        }
        kind::HASH => {
            for _ in 0..c.count("a length", 2)? {
                c.skip_string("a field")?;
                c.skip_string("a value")?;
            }
        }
        kind::HASH_METADATA_PRE_GA if valkey => {
            for _ in 0..c.count("a length", 10)? {
                c.skip_string("a field")?;
                c.skip_string("a value")?;
                c.take(8, "a field expiry")?;
            }
        }
        kind::HASH_METADATA | kind::HASH_METADATA_PRE_GA => {
            if t == kind::HASH_METADATA {
                c.take(8, "a hash minimum expiry")?;
            }
            for _ in 0..c.count("a length", 3)? {
                c.len("a field TTL")?;
                c.skip_string("a field")?;
                c.skip_string("a value")?;
            }
        }
        kind::LIST_QUICKLIST | kind::LIST_QUICKLIST_2 => {
            for _ in 0..c.count("a quicklist length", 1)? {
                if t == kind::LIST_QUICKLIST_2 {
                    c.len("a container type")?;
                }
                c.skip_string("a quicklist node")?;
            }
        }
        kind::STREAM_LISTPACKS | kind::STREAM_LISTPACKS_2 | kind::STREAM_LISTPACKS_3 => {
            for _ in 0..c.count("a stream node count", 2)? {
                c.skip_string("a stream node key")?;
                c.skip_string("a stream listpack")?;
            }
            c.len("a stream length")?;
            c.stream_id_lens("a stream last ID")?;
            if t >= kind::STREAM_LISTPACKS_2 {
                c.stream_id_lens("a stream first ID")?;
                c.stream_id_lens("a stream max deleted ID")?;
                c.len("a stream entries-added counter")?;
            }
            for _ in 0..c.count("a consumer group count", 3)? {
                c.skip_string("a group name")?;
                c.stream_id_lens("a group last ID")?;
                if t >= kind::STREAM_LISTPACKS_2 {
                    c.len("a group entries-read counter")?;
                }
                for _ in 0..c.count("a pending entries count", 17)? {
                    c.take(24, "a pending entry")?;
                    c.len("a delivery count")?;
                }
                for _ in 0..c.count("a consumer count", 10)? {
                    c.skip_string("a consumer name")?;
                    c.take(8, "a seen time")?;
                    if t >= kind::STREAM_LISTPACKS_3 {
                        c.take(8, "an active time")?;
                    }
                    let n = c.count("a consumer pending count", 16)?;
                    c.take(n * 16, "consumer pending IDs")?;
                }
            }
        }
        kind::MODULE_2 => {
            let id = c.len("a module id")?;
            skip_module_value(c, &module_name(id))?;
        }
        kind::MODULE_PRE_GA => {
            return Err(RdbError::new(
                ErrorKind::Unsupported,
                at,
                "pre-release module value format is not supported",
            ))
        }
        other => return Err(c.corrupt(at.saturating_sub(1), format!("unknown value type {other}"))),
    }
    Ok(())
}

// ---------------------------------------------------------------------------
// The per-key walk.

/// The value type a type byte encodes, as TYPE names it (`module` for
/// module values; every hash encoding, also with field TTLs, is `hash`).
pub fn logical_type(t: u8) -> &'static str {
    match t {
        kind::STRING => "string",
        kind::LIST | kind::LIST_ZIPLIST | kind::LIST_QUICKLIST | kind::LIST_QUICKLIST_2 => "list",
        kind::SET | kind::SET_INTSET | kind::SET_LISTPACK => "set",
        kind::ZSET | kind::ZSET_2 | kind::ZSET_ZIPLIST | kind::ZSET_LISTPACK => "zset",
        kind::STREAM_LISTPACKS | kind::STREAM_LISTPACKS_2 | kind::STREAM_LISTPACKS_3 => "stream",
        kind::MODULE_PRE_GA | kind::MODULE_2 => "module",
        _ => "hash",
    }
}

/// One key record as [`scan_keys`] sees it; nothing of the value is built.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KeyInfo<'a> {
    /// The database (the last SELECTDB before the record).
    pub db: usize,
    /// The key: borrowed from the input when stored raw, owned when it was
    /// LZF-compressed or integer-encoded.
    pub key: Cow<'a, [u8]>,
    /// The RDB value type byte ([`crate::rdb::kind`]).
    pub type_byte: u8,
    /// What TYPE reports ([`logical_type`]).
    pub logical_type: &'static str,
    /// Offset of the record's type byte in the input.
    pub offset: u64,
    /// Bytes of the record: type byte, key and value (as [`TypeCount`]
    /// counts them; expiry, IDLE and FREQ opcodes before it excluded).
    pub record_bytes: u64,
    /// Offset of the value (after the key): the value is the input from
    /// here to `offset + record_bytes`, what [`decode_value`] and
    /// [`visit_elements`] read.
    pub value_offset: u64,
    /// Absolute expiry in Unix ms (an EXPIRETIME in seconds is scaled).
    pub expire_ms: Option<i64>,
    /// Elements (list items, set/zset members, hash fields, stream
    /// entries) when the encoding states them up front: a plain
    /// collection's length, a listpack/ziplist/intset/zipmap header, the
    /// sum of uncompressed quicklist node headers, a stream's length.
    /// None for strings, modules, LZF-compressed compact values and
    /// headers that saturated (65535).
    pub elements: Option<u64>,
}

/// Walks an RDB file like [`scan`] and calls `visit` for every key record,
/// in file order. Memory stays bounded by the largest key (values are
/// skipped, never built or decompressed). `visit` returning
/// `ControlFlow::Break` ends the walk early: the summary then covers the
/// keys seen so far and has no checksum (`checksum` None, `len` the
/// offset reached). Damage ends the walk with the error after every key
/// before it was visited.
pub fn scan_keys<'a>(
    data: &'a [u8],
    visit: &mut dyn FnMut(&KeyInfo<'a>) -> std::ops::ControlFlow<()>,
) -> Result<ScanSummary, RdbError> {
    with_running_crc(data, &mut |passed, crc_of| {
        scan_keys_with(data, visit, passed, crc_of)
    })
}

/// What a walk calls as it goes: it has reached this offset.
pub(super) type Passed<'f> = &'f mut dyn FnMut(usize);
/// What a walk calls at the end: the CRC of the first `len` bytes.
pub(super) type CrcOf<'f> = &'f mut dyn FnMut(usize) -> u64;

/// Runs `walk` with a CRC-64 that runs behind it over the bytes it has
/// passed: no second pass over the file at the end, and a caller may give
/// back the pages the walk has passed (the CRC trails it by a few MiB at
/// most). With a second core the CRC runs there, else inline in steps.
/// `walk` gets `passed(pos)` (the walk reached `pos`) and `crc_of(len)`
/// (the CRC of the first `len` bytes, asked once at the end).
pub(super) fn with_running_crc<R>(
    data: &[u8],
    walk: &mut dyn FnMut(Passed<'_>, CrcOf<'_>) -> R,
) -> R {
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    if data.len() < PARALLEL_MIN_BYTES || cores < 2 {
        let mut crc = crate::rdb::Crc64::default();
        let mut crc_pos = 0usize;
        let crc = std::cell::RefCell::new((&mut crc, &mut crc_pos));
        return walk(
            &mut |pos| {
                let mut guard = crc.borrow_mut();
                let (digest, done) = &mut *guard;
                if pos - **done >= CRC_STEP_BYTES {
                    digest.update(&data[**done..pos]);
                    **done = pos;
                }
            },
            &mut |covered| {
                let mut guard = crc.borrow_mut();
                let (digest, done) = &mut *guard;
                if covered < **done {
                    return crate::rdb::crc64(&data[..covered]);
                }
                digest.update(&data[**done..covered]);
                digest.value()
            },
        );
    }
    use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
    // The walk publishes how far it got; the CRC thread follows. `end`
    // set means the walk is over: the CRC covers exactly `reached` then.
    let reached = AtomicUsize::new(0);
    let end = AtomicBool::new(false);
    std::thread::scope(|scope| {
        let follower = scope.spawn(|| {
            let mut digest = crate::rdb::Crc64::default();
            let mut pos = 0usize;
            loop {
                let over = end.load(Ordering::Acquire);
                let upto = reached.load(Ordering::Acquire);
                if upto > pos {
                    digest.update(&data[pos..upto]);
                    pos = upto;
                } else if over {
                    return (digest.value(), pos);
                } else {
                    std::thread::park_timeout(std::time::Duration::from_micros(200));
                }
            }
        });
        /// Ends the follower whichever way the walk ends.
        struct Over<'a>(&'a AtomicBool);
        impl Drop for Over<'_> {
            fn drop(&mut self) {
                self.0.store(true, Ordering::Release);
            }
        }
        let over = Over(&end);
        let published = std::cell::Cell::new(0usize);
        let mut follower = Some(follower);
        let result = walk(
            &mut |pos| {
                if pos - published.get() >= CRC_PUBLISH_BYTES {
                    published.set(pos);
                    reached.store(pos, Ordering::Release);
                }
            },
            &mut |covered| {
                if covered < published.get() {
                    return crate::rdb::crc64(&data[..covered]);
                }
                reached.store(covered, Ordering::Release);
                end.store(true, Ordering::Release);
                match follower.take().map(|f| {
                    f.thread().unpark();
                    f.join()
                }) {
                    Some(Ok((crc, pos))) if pos == covered => crc,
                    _ => crate::rdb::crc64(&data[..covered]),
                }
            },
        );
        drop(over);
        result
    })
}

fn scan_keys_with<'a>(
    data: &'a [u8],
    visit: &mut dyn FnMut(&KeyInfo<'a>) -> std::ops::ControlFlow<()>,
    passed: &mut dyn FnMut(usize),
    crc_of: &mut dyn FnMut(usize) -> u64,
) -> Result<ScanSummary, RdbError> {
    let (version, valkey, header_len) = read_header(data)?;
    let mut out = ScanSummary {
        version,
        valkey,
        scanned_at_ms: crate::clock::now_ms(),
        ..ScanSummary::default()
    };
    let mut c = Cursor::new(data, header_len);
    let mut db = 0usize;
    let mut expire_ms: Option<i64> = None;
    loop {
        passed(c.pos);
        let record_at = c.pos;
        match c.u8("a record type")? {
            opcode::EOF => break,
            t if scan_opcode(&mut c, t, record_at, &mut out, &mut db, &mut expire_ms)? => {}
            t => {
                let key = c.string("a key")?;
                let value_at = c.pos;
                let elements = element_count(&c, t);
                skip_value(&mut c, t, valkey).map_err(|mut e| {
                    e.key = Some((db, Blob::from(&key[..])));
                    e
                })?;
                let record_bytes = (c.pos - record_at) as u64;
                *out.keys_per_db.entry(db).or_default() += 1;
                if let Some(at) = expire_ms {
                    out.expiring += 1;
                    out.expired += u64::from(at < out.scanned_at_ms);
                }
                let entry = out.types.entry(t).or_default();
                entry.keys += 1;
                entry.bytes += record_bytes;
                let info = KeyInfo {
                    db,
                    key,
                    type_byte: t,
                    logical_type: logical_type(t),
                    offset: record_at as u64,
                    record_bytes,
                    value_offset: value_at as u64,
                    expire_ms: expire_ms.take(),
                    elements,
                };
                if visit(&info).is_break() {
                    out.len = c.pos;
                    return Ok(out);
                }
            }
        }
    }
    out.checksum = Some(verify_checksum(data, &mut c, version, crc_of)?);
    out.len = c.pos;
    Ok(out)
}

/// How far [`scan_keys`]'s inline running CRC trails the walk at most.
pub(super) const CRC_STEP_BYTES: usize = 4 << 20;
/// How often the walk tells [`scan_keys`]'s CRC thread where it is.
const CRC_PUBLISH_BYTES: usize = 1 << 20;

/// The element count of the value at `c` (which is not moved), when the
/// encoding states it up front; damage is left for [`skip_value`] to find.
pub(super) fn element_count(c: &Cursor<'_>, t: u8) -> Option<u64> {
    let mut p = Cursor::new(c.data, c.pos);
    let peek = |p: &mut Cursor<'_>| -> Option<u64> {
        match p.raw_len("a length").ok()? {
            Len::Len(n) => Some(n),
            Len::Encoded(_) => None,
        }
    };
    match t {
        kind::LIST | kind::SET | kind::ZSET | kind::ZSET_2 | kind::HASH => peek(&mut p),
        kind::HASH_METADATA_PRE_GA => peek(&mut p),
        kind::HASH_METADATA => {
            p.take(8, "a hash minimum expiry").ok()?;
            peek(&mut p)
        }
        kind::LIST_ZIPLIST => compact_header(&mut p, Compact::Ziplist, 1),
        kind::ZSET_ZIPLIST | kind::HASH_ZIPLIST => compact_header(&mut p, Compact::Ziplist, 2),
        kind::SET_LISTPACK => compact_header(&mut p, Compact::Listpack, 1),
        kind::ZSET_LISTPACK | kind::HASH_LISTPACK => compact_header(&mut p, Compact::Listpack, 2),
        kind::HASH_LISTPACK_EX_PRE_GA => compact_header(&mut p, Compact::Listpack, 3),
        kind::HASH_LISTPACK_EX => {
            p.take(8, "a hash minimum expiry").ok()?;
            compact_header(&mut p, Compact::Listpack, 3)
        }
        kind::SET_INTSET => compact_header(&mut p, Compact::Intset, 1),
        kind::HASH_ZIPMAP => compact_header(&mut p, Compact::Zipmap, 1),
        kind::LIST_QUICKLIST | kind::LIST_QUICKLIST_2 => quicklist_count(&mut p, t),
        kind::STREAM_LISTPACKS | kind::STREAM_LISTPACKS_2 | kind::STREAM_LISTPACKS_3 => {
            // The length follows the nodes: walking them costs what the
            // skip pass costs again, still without building anything.
            let nodes = peek(&mut p)?;
            for _ in 0..nodes {
                p.skip_string("a stream node key").ok()?;
                p.skip_string("a stream listpack").ok()?;
            }
            peek(&mut p)
        }
        _ => None,
    }
}

#[derive(Clone, Copy)]
enum Compact {
    Ziplist,
    Listpack,
    Intset,
    Zipmap,
}

/// The element count in a compact encoding's header, divided by the
/// entries per element; None when the blob is LZF-compressed or the
/// header's count saturated.
fn compact_header(p: &mut Cursor<'_>, form: Compact, per_element: u64) -> Option<u64> {
    let Len::Len(n) = p.raw_len("a value").ok()? else {
        return None;
    };
    let blob = p.take(n, "a value").ok()?;
    let n = match form {
        Compact::Ziplist => {
            let n = u16::from_le_bytes(blob.get(8..10)?.try_into().ok()?);
            (n != u16::MAX).then_some(u64::from(n))?
        }
        Compact::Listpack => {
            let n = u16::from_le_bytes(blob.get(4..6)?.try_into().ok()?);
            (n != u16::MAX).then_some(u64::from(n))?
        }
        Compact::Intset => u64::from(u32::from_le_bytes(blob.get(4..8)?.try_into().ok()?)),
        Compact::Zipmap => {
            let n = *blob.first()?;
            (n < 254).then_some(u64::from(n))?
        }
    };
    Some(n / per_element)
}

/// The sum of a quicklist's node counts (a PLAIN node is one item).
fn quicklist_count(p: &mut Cursor<'_>, t: u8) -> Option<u64> {
    let Len::Len(nodes) = p.raw_len("a quicklist length").ok()? else {
        return None;
    };
    let mut total = 0u64;
    for _ in 0..nodes {
        let container = if t == kind::LIST_QUICKLIST_2 {
            match p.raw_len("a container type").ok()? {
                Len::Len(n) => n,
                Len::Encoded(_) => return None,
            }
        } else {
            0
        };
        let n = if container == 1 {
            p.skip_string("a quicklist node").ok()?;
            1
        } else if t == kind::LIST_QUICKLIST_2 {
            compact_header(p, Compact::Listpack, 1)?
        } else {
            compact_header(p, Compact::Ziplist, 1)?
        };
        total += n;
    }
    Some(total)
}
