//! Reading RDB files and DUMP payloads (docs/rdb.md).
//!
//! [`load`] walks a whole file front to back, hands every key to a sink as
//! a hozon [`Value`] (in the encoding Redis would give it on load, under
//! the configured limits), and verifies the CRC-64 at the end. [`scan`]
//! walks the same structure without building values (the skip pass of the
//! inspector and the benchmark). [`decode_value`] reads one value of a
//! given type (RESTORE).
//!
//! Every read is bounded by the bytes present: a damaged or hostile input
//! produces an [`RdbError`] with the offset where reading failed, never a
//! panic, an endless loop, or an allocation beyond a small multiple of
//! the input's size.

use std::borrow::Cow;
use std::fmt;

use super::{intset, kind, listpack, lzf, opcode, ziplist, zipmap, EncodingError, Item};
use super::{MAX_READ_VERSION, MAX_VALKEY_VERSION};
use crate::keyspace::dict::Dict;
use crate::persist::snapshot::LoadedKey;
use crate::types::hash::Hash;
use crate::types::list::{End, List};
use crate::types::num::parse_i64;
use crate::types::ordtree::cmp_key;
use crate::types::set::Set;
use crate::types::stream::{
    Consumer, ConsumerGroup, Fields, PendingEntry, Stream, StreamId, ENTRIES_READ_INVALID,
};
use crate::types::zset::ZSet;
use crate::types::{Blob, EncodingLimits, Value};

mod check;
mod elements;
mod salvage;
mod scan;
mod stream;
pub use check::{check_file, check_keys, MAX_DATABASES};
pub use elements::{visit_elements, Declined, Element};
pub use salvage::{salvage, DamagedRegion, SalvageReport, RESYNC_RECORDS};
pub use scan::{logical_type, scan, scan_keys, KeyInfo, ScanSummary, TypeCount};
use stream::read_stream;

/// LZF cannot expand data more than about 88-fold (a 3-byte back
/// reference yields at most 264 bytes); a larger declared length is
/// damage, and the bound caps what a damaged length can allocate.
const LZF_MAX_EXPANSION: u64 = 100;

/// What kind of problem stopped a read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ErrorKind {
    /// The data does not start with an RDB header.
    NotRdb,
    /// A version (or Valkey version) newer than this build knows.
    UnsupportedVersion,
    /// The data ends before the structure does.
    Truncated,
    /// A length, encoding or structure is invalid.
    Corrupt,
    /// Valid for Redis, but something hozon cannot load (a pre-release
    /// module or function format, a module value that cannot be skipped).
    Unsupported,
    /// The stored CRC-64 differs from the computed one.
    Checksum,
    /// The sink refused a key (duplicate key, database out of range).
    Rejected,
}

/// Why reading an RDB file or payload failed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RdbError {
    /// The kind of problem.
    pub kind: ErrorKind,
    /// Byte offset in the input where the failing read started.
    pub offset: u64,
    /// What was wrong, in words.
    pub message: String,
    /// The database and key being read, when known.
    pub key: Option<(usize, Blob)>,
}

impl RdbError {
    fn new(kind: ErrorKind, offset: usize, message: impl Into<String>) -> RdbError {
        RdbError {
            kind,
            offset: offset as u64,
            message: message.into(),
            key: None,
        }
    }
}

impl fmt::Display for RdbError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.kind {
            ErrorKind::Truncated => write!(f, "truncated at offset {}", self.offset)?,
            _ => write!(f, "at offset {}", self.offset)?,
        }
        if let Some((db, key)) = &self.key {
            write!(f, " (db {db}, key '{}')", display_key(key))?;
        }
        write!(f, ": {}", self.message)
    }
}

impl std::error::Error for RdbError {}

/// A key for messages: printable ASCII as is, other bytes escaped, long
/// keys shortened.
pub fn display_key(key: &[u8]) -> String {
    let mut out = String::new();
    for &b in key.iter().take(64) {
        if (0x20..0x7f).contains(&b) && b != b'\\' && b != b'\'' {
            out.push(b as char);
        } else {
            out.push_str(&format!("\\x{b:02x}"));
        }
    }
    if key.len() > 64 {
        out.push_str("...");
    }
    out
}

/// How [`load`] builds and filters keys.
#[derive(Debug, Clone)]
pub struct Options {
    /// Encoding thresholds for the values built.
    pub limits: EncodingLimits,
    /// Databases the target has: a SELECTDB beyond is an error.
    pub databases: usize,
    /// Skip keys whose expiry is before this Unix ms time (Redis skips
    /// expired keys when it loads a file as a master); None keeps all
    /// (an AOF preamble keeps them, as Redis does).
    pub skip_expired_before_ms: Option<i64>,
    /// Hash fields whose TTL (types 22–25) is before this time are dropped.
    pub now_ms: i64,
}

/// How the file's checksum was checked.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Checksum {
    /// Verified equal.
    Verified,
    /// Stored as zero (written with `rdbchecksum no`): not checked.
    Unchecked,
    /// The version has no checksum (RDB 1–4).
    Absent,
}

/// What a file held besides its keys, and what loading it did.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Summary {
    /// The RDB version of the header.
    pub version: u16,
    /// The header was Valkey's (`VALKEY` + version).
    pub valkey: bool,
    /// AUX fields in file order (`redis-ver`, `ctime`, ...).
    pub aux: Vec<(Blob, Blob)>,
    /// Function library sources (FUNCTION2), in file order.
    pub functions: Vec<Blob>,
    /// Keys handed to the sink.
    pub keys: u64,
    /// Keys skipped because their expiry had passed.
    pub expired_skipped: u64,
    /// Keys skipped because their collection was empty (Redis skips them).
    pub empty_skipped: u64,
    /// Module values skipped (their key is not loaded) and module AUX
    /// records skipped, with the module names.
    pub modules_skipped: Vec<String>,
    /// Hash fields loaded without their TTL (hozon has no field expiry).
    pub field_ttls_dropped: u64,
    /// Hash fields dropped because their TTL had passed.
    pub expired_fields_dropped: u64,
    /// The checksum result (None until the end was reached).
    pub checksum: Option<Checksum>,
    /// Bytes of the file, through the checksum (where an AOF preamble ends).
    pub len: usize,
}

/// Result of the sink: Err refuses the key with a message (e.g. a
/// duplicate key), which stops the load.
pub type SinkResult = Result<(), String>;

// ---------------------------------------------------------------------------
// The cursor.

/// A length, or the special string encoding that took its place.
enum Len {
    Len(u64),
    Encoded(u8),
}

struct Cursor<'a> {
    data: &'a [u8],
    pos: usize,
}

impl<'a> Cursor<'a> {
    fn new(data: &'a [u8], pos: usize) -> Cursor<'a> {
        Cursor { data, pos }
    }

    fn remaining(&self) -> usize {
        self.data.len() - self.pos
    }

    #[cold]
    #[inline(never)]
    fn truncated(&self, what: &str) -> RdbError {
        RdbError::new(
            ErrorKind::Truncated,
            self.pos,
            format!("the data ends while reading {what}"),
        )
    }

    #[cold]
    fn corrupt(&self, at: usize, what: impl Into<String>) -> RdbError {
        RdbError::new(ErrorKind::Corrupt, at, what)
    }

    fn u8(&mut self, what: &str) -> Result<u8, RdbError> {
        let b = *self
            .data
            .get(self.pos)
            .ok_or_else(|| self.truncated(what))?;
        self.pos += 1;
        Ok(b)
    }

    fn take(&mut self, n: u64, what: &str) -> Result<&'a [u8], RdbError> {
        if n > self.remaining() as u64 {
            return Err(self.truncated(what));
        }
        let n = n as usize;
        let s = &self.data[self.pos..self.pos + n];
        self.pos += n;
        Ok(s)
    }

    fn array<const N: usize>(&mut self, what: &str) -> Result<[u8; N], RdbError> {
        let s = self.take(N as u64, what)?;
        let mut a = [0u8; N];
        a.copy_from_slice(s);
        Ok(a)
    }

    #[inline(always)]
    fn raw_len(&mut self, what: &str) -> Result<Len, RdbError> {
        // The common forms without per-byte checks when 9 bytes remain.
        if let Some(bytes) = self.data.get(self.pos..self.pos + 2) {
            let first = bytes[0];
            match first >> 6 {
                0 => {
                    self.pos += 1;
                    return Ok(Len::Len(u64::from(first & 0x3f)));
                }
                1 => {
                    self.pos += 2;
                    return Ok(Len::Len(
                        (u64::from(first & 0x3f) << 8) | u64::from(bytes[1]),
                    ));
                }
                3 => {
                    self.pos += 1;
                    return Ok(Len::Encoded(first & 0x3f));
                }
                _ => {}
            }
        }
        self.raw_len_slow(what)
    }

    fn raw_len_slow(&mut self, what: &str) -> Result<Len, RdbError> {
        let first = self.u8(what)?;
        Ok(match first >> 6 {
            0 => Len::Len(u64::from(first & 0x3f)),
            1 => Len::Len((u64::from(first & 0x3f) << 8) | u64::from(self.u8(what)?)),
            2 => match first {
                0x80 => Len::Len(u64::from(u32::from_be_bytes(self.array(what)?))),
                0x81 => Len::Len(u64::from_be_bytes(self.array(what)?)),
                _ => {
                    return Err(self.corrupt(
                        self.pos - 1,
                        format!("invalid length prefix 0x{first:02x} while reading {what}"),
                    ))
                }
            },
            _ => Len::Encoded(first & 0x3f),
        })
    }

    /// A plain length (a special string encoding here is damage).
    fn len(&mut self, what: &str) -> Result<u64, RdbError> {
        let at = self.pos;
        match self.raw_len(what)? {
            Len::Len(n) => Ok(n),
            Len::Encoded(_) => {
                Err(self.corrupt(at, format!("unexpected string encoding in {what}")))
            }
        }
    }

    /// A count of items that each take at least `min_bytes`: checked
    /// against the bytes left so a damaged count fails at once.
    fn count(&mut self, what: &str, min_bytes: u64) -> Result<u64, RdbError> {
        let at = self.pos;
        let n = self.len(what)?;
        if n.saturating_mul(min_bytes) > self.remaining() as u64 {
            return Err(RdbError::new(
                ErrorKind::Truncated,
                at,
                format!("{what} says {n} but only {} bytes remain", self.remaining()),
            ));
        }
        Ok(n)
    }

    fn string(&mut self, what: &str) -> Result<Cow<'a, [u8]>, RdbError> {
        let at = self.pos;
        match self.raw_len(what)? {
            Len::Len(n) => Ok(Cow::Borrowed(self.take(n, what)?)),
            Len::Encoded(0) => Ok(Cow::Owned(int_text(i64::from(self.u8(what)? as i8)))),
            Len::Encoded(1) => Ok(Cow::Owned(int_text(i64::from(i16::from_le_bytes(
                self.array(what)?,
            ))))),
            Len::Encoded(2) => Ok(Cow::Owned(int_text(i64::from(i32::from_le_bytes(
                self.array(what)?,
            ))))),
            Len::Encoded(3) => {
                let clen = self.len(what)?;
                let ulen = self.len(what)?;
                if ulen > clen.saturating_mul(LZF_MAX_EXPANSION) {
                    return Err(self.corrupt(
                        at,
                        format!("LZF string of {clen} bytes claims {ulen} bytes uncompressed"),
                    ));
                }
                let data = self.take(clen, what)?;
                let out = lzf::decompress(data, ulen as usize)
                    .map_err(|e| self.corrupt(at, format!("{what}: LZF data: {e}")))?;
                Ok(Cow::Owned(out))
            }
            Len::Encoded(e) => {
                Err(self.corrupt(at, format!("unknown string encoding {e} in {what}")))
            }
        }
    }

    /// Reads a string as [`Cursor::string`] does (the same checks and
    /// errors, LZF data included), without producing it.
    fn check_string(&mut self, what: &str) -> Result<(), RdbError> {
        let at = self.pos;
        match self.raw_len(what)? {
            Len::Len(n) => {
                self.take(n, what)?;
            }
            Len::Encoded(0) => {
                self.u8(what)?;
            }
            Len::Encoded(1) => {
                self.array::<2>(what)?;
            }
            Len::Encoded(2) => {
                self.array::<4>(what)?;
            }
            Len::Encoded(3) => {
                let clen = self.len(what)?;
                let ulen = self.len(what)?;
                if ulen > clen.saturating_mul(LZF_MAX_EXPANSION) {
                    return Err(self.corrupt(
                        at,
                        format!("LZF string of {clen} bytes claims {ulen} bytes uncompressed"),
                    ));
                }
                let data = self.take(clen, what)?;
                lzf::check(data, ulen as usize)
                    .map_err(|e| self.corrupt(at, format!("{what}: LZF data: {e}")))?;
            }
            Len::Encoded(e) => {
                return Err(self.corrupt(at, format!("unknown string encoding {e} in {what}")))
            }
        }
        Ok(())
    }

    fn blob(&mut self, what: &str) -> Result<Blob, RdbError> {
        Ok(match self.string(what)? {
            Cow::Borrowed(b) => Blob::from(b),
            Cow::Owned(v) => Blob::from_vec(v),
        })
    }

    /// Skips a string; the common short forms without a detour.
    #[inline(always)]
    fn skip_string(&mut self, what: &str) -> Result<(), RdbError> {
        let len = self.data.len();
        if let Some(&first) = self.data.get(self.pos) {
            let end = match first {
                0x00..=0x3f => self.pos + 1 + usize::from(first),
                0x40..=0x7f => match self.data.get(self.pos + 1) {
                    Some(&low) => {
                        self.pos + 2 + ((usize::from(first & 0x3f) << 8) | usize::from(low))
                    }
                    None => usize::MAX,
                },
                0xc0 => self.pos + 2,
                0xc1 => self.pos + 3,
                0xc2 => self.pos + 5,
                _ => usize::MAX,
            };
            if end <= len {
                self.pos = end;
                return Ok(());
            }
        }
        self.skip_string_slow(what)
    }

    fn skip_string_slow(&mut self, what: &str) -> Result<(), RdbError> {
        match self.raw_len(what)? {
            Len::Len(n) => {
                self.take(n, what)?;
            }
            Len::Encoded(0) => {
                self.take(1, what)?;
            }
            Len::Encoded(1) => {
                self.take(2, what)?;
            }
            Len::Encoded(2) => {
                self.take(4, what)?;
            }
            Len::Encoded(3) => {
                let at = self.pos - 1;
                let clen = self.len(what)?;
                let ulen = self.len(what)?;
                if ulen > clen.saturating_mul(LZF_MAX_EXPANSION) {
                    return Err(self.corrupt(
                        at,
                        format!("LZF string of {clen} bytes claims {ulen} bytes uncompressed"),
                    ));
                }
                self.take(clen, what)?;
            }
            Len::Encoded(e) => {
                return Err(self.corrupt(
                    self.pos - 1,
                    format!("unknown string encoding {e} in {what}"),
                ))
            }
        }
        Ok(())
    }

    fn ms_time(&mut self, what: &str) -> Result<i64, RdbError> {
        Ok(i64::from_le_bytes(self.array(what)?))
    }

    fn binary_double(&mut self, what: &str) -> Result<f64, RdbError> {
        Ok(f64::from_le_bytes(self.array(what)?))
    }

    /// The old string form of a double: a length byte (253 NaN, 254 +inf,
    /// 255 -inf) and ASCII text.
    fn string_double(&mut self, what: &str) -> Result<f64, RdbError> {
        let at = self.pos;
        let n = self.u8(what)?;
        match n {
            253 => Ok(f64::NAN),
            254 => Ok(f64::INFINITY),
            255 => Ok(f64::NEG_INFINITY),
            _ => {
                let text = self.take(u64::from(n), what)?;
                parse_double(text).ok_or_else(|| {
                    self.corrupt(
                        at,
                        format!("{what}: '{}' is not a number", display_key(text)),
                    )
                })
            }
        }
    }

    fn stream_id_raw(&mut self, what: &str) -> Result<StreamId, RdbError> {
        let raw: [u8; 16] = self.array(what)?;
        Ok(id_from_be(&raw))
    }

    fn stream_id_lens(&mut self, what: &str) -> Result<StreamId, RdbError> {
        let ms = self.len(what)?;
        let seq = self.len(what)?;
        Ok(StreamId::new(ms, seq))
    }
}

fn int_text(n: i64) -> Vec<u8> {
    crate::types::num::format_i64(n, &mut [0u8; 20]).to_vec()
}

fn id_from_be(raw: &[u8; 16]) -> StreamId {
    let mut ms = [0u8; 8];
    let mut seq = [0u8; 8];
    ms.copy_from_slice(&raw[..8]);
    seq.copy_from_slice(&raw[8..]);
    StreamId::new(u64::from_be_bytes(ms), u64::from_be_bytes(seq))
}

/// A double as `strtod` reads it (scores stored as text).
fn parse_double(text: &[u8]) -> Option<f64> {
    // Plain decimals (an optional sign, digits and a point) read the same
    // through the general path below; they skip its checks and copies.
    let digits = text.strip_prefix(b"-").unwrap_or(text);
    if !digits.is_empty() && digits.iter().all(|b| b.is_ascii_digit() || *b == b'.') {
        if let Some(n) = std::str::from_utf8(text)
            .ok()
            .and_then(|s| s.parse::<f64>().ok())
        {
            return Some(n);
        }
    }
    let s = std::str::from_utf8(text).ok()?;
    // Every spelling of infinity ends in `f` or `y`: numbers skip the
    // comparisons.
    if matches!(text.last(), Some(b'f' | b'y')) {
        match s {
            "inf" | "+inf" | "infinity" => return Some(f64::INFINITY),
            "-inf" | "-infinity" => return Some(f64::NEG_INFINITY),
            _ => {}
        }
    }
    crate::types::num::parse_f64_any_range(text).or_else(|| s.trim().parse::<f64>().ok())
}

// ---------------------------------------------------------------------------
// The header.

/// Reads the header: returns (version, is_valkey, header length).
pub fn read_header(data: &[u8]) -> Result<(u16, bool, usize), RdbError> {
    let (digits, valkey, start) = if data.starts_with(b"REDIS") {
        (4, false, 5)
    } else if data.starts_with(b"VALKEY") {
        (3, true, 6)
    } else {
        return Err(RdbError::new(
            ErrorKind::NotRdb,
            0,
            "not an RDB file (no REDIS or VALKEY magic)",
        ));
    };
    let Some(text) = data.get(start..start + digits) else {
        return Err(RdbError::new(
            ErrorKind::Truncated,
            data.len(),
            "the header is incomplete",
        ));
    };
    if !text.iter().all(u8::is_ascii_digit) {
        return Err(RdbError::new(
            ErrorKind::NotRdb,
            start,
            format!("not an RDB file (version '{}')", display_key(text)),
        ));
    }
    let version = text.iter().fold(0u16, |v, d| v * 10 + u16::from(d - b'0'));
    let max = if valkey {
        MAX_VALKEY_VERSION
    } else {
        MAX_READ_VERSION
    };
    if version == 0 || version > max {
        return Err(RdbError::new(
            ErrorKind::UnsupportedVersion,
            start,
            format!(
                "unsupported {} RDB version {version} (this build reads 1 to {max})",
                if valkey { "Valkey" } else { "Redis" }
            ),
        ));
    }
    Ok((version, valkey, start + digits))
}

/// True when `data` starts like an RDB file (Redis or Valkey magic).
pub fn is_rdb(data: &[u8]) -> bool {
    data.starts_with(b"REDIS") || data.starts_with(b"VALKEY")
}

// ---------------------------------------------------------------------------
// Whole files.

/// Reads the RDB file at the start of `data`, hands every key to `sink`,
/// and verifies the checksum. Reading stops after the checksum:
/// [`Summary::len`] is where the file ends (an AOF continues there).
pub fn load(
    data: &[u8],
    options: &Options,
    sink: &mut dyn FnMut(LoadedKey) -> SinkResult,
) -> Result<Summary, RdbError> {
    load_with_hints(data, options, sink, &mut |_, _, _| {})
}

/// [`load`], also handing each RESIZEDB hint (database, keys, keys with
/// an expiry) to `resize` so the target can size its tables once.
///
/// A large file is parsed on a second thread while the calling thread
/// runs the sink (values are built while earlier keys are inserted), and
/// the CRC of a whole file is computed on a third meanwhile.
pub fn load_with_hints(
    data: &[u8],
    options: &Options,
    sink: &mut dyn FnMut(LoadedKey) -> SinkResult,
    resize: &mut dyn FnMut(usize, u64, u64),
) -> Result<Summary, RdbError> {
    if data.len() < PARALLEL_MIN_BYTES {
        let mut crc = |covered: usize| super::crc64(&data[..covered]);
        return parse(data, options, &mut crc, &mut |event| {
            match event {
                Event::Key(at, key) => {
                    let ident = format!("db {}, key '{}'", key.db, display_key(&key.key));
                    sink(key).map_err(|m| (at, format!("{m} ({ident})")))?
                }
                Event::Resize(db, keys, expiring) => resize(db, keys, expiring),
            }
            Ok(())
        });
    }
    std::thread::scope(|scope| {
        // The CRC of everything but the last 8 bytes: the stored CRC of a
        // whole file (an AOF preamble ends earlier and computes its own).
        // A whole RDB file ends with EOF and the CRC; anything else (an
        // AOF with an RDB preamble) computes its CRC when it gets there.
        let whole = data.len() - 8;
        let crc_job = (data[whole - 1] == opcode::EOF)
            .then(|| scope.spawn(move || super::crc64(&data[..whole])));
        let (tx, rx) = std::sync::mpsc::sync_channel::<Vec<Event>>(4);
        let parser = scope.spawn(move || {
            let mut crc_job = crc_job;
            let mut crc = |covered: usize| match crc_job.take() {
                Some(job) if covered == whole => job
                    .join()
                    .unwrap_or_else(|_| super::crc64(&data[..covered])),
                _ => super::crc64(&data[..covered]),
            };
            let mut batch = Vec::with_capacity(EVENT_BATCH);
            let result = parse(data, options, &mut crc, &mut |event| {
                batch.push(event);
                if batch.len() >= EVENT_BATCH {
                    let full = std::mem::replace(&mut batch, Vec::with_capacity(EVENT_BATCH));
                    // The receiver is gone only when the sink failed; its
                    // error is the one reported.
                    tx.send(full)
                        .map_err(|_| (0, "stopped: the sink refused a key".to_string()))?;
                }
                Ok(())
            });
            if !batch.is_empty() {
                let _ = tx.send(batch);
            }
            result
        });
        let mut refused: Option<RdbError> = None;
        'batches: for batch in rx.iter() {
            for event in batch {
                match event {
                    Event::Key(at, key) => {
                        let ident = (key.db, key.key.clone());
                        if let Err(message) = sink(key) {
                            refused = Some(RdbError {
                                kind: ErrorKind::Rejected,
                                offset: at as u64,
                                message,
                                key: Some(ident),
                            });
                            break 'batches;
                        }
                    }
                    Event::Resize(db, keys, expiring) => resize(db, keys, expiring),
                }
            }
        }
        drop(rx);
        let parsed = parser
            .join()
            .unwrap_or_else(|panic| std::panic::resume_unwind(panic));
        match refused {
            Some(e) => Err(e),
            None => parsed,
        }
    })
}

/// Files smaller than this are parsed on the calling thread.
const PARALLEL_MIN_BYTES: usize = 1 << 20;
/// Keys handed from the parser thread to the sink at a time.
const EVENT_BATCH: usize = 256;

/// What the parser hands on.
enum Event {
    /// A key read at this record offset.
    Key(usize, LoadedKey),
    /// A RESIZEDB hint.
    Resize(usize, u64, u64),
}

/// What the consumer of [`Event`]s says: Err((offset, message)) stops the
/// parse with a rejection.
type EmitResult = Result<(), (usize, String)>;

/// The parse proper: walks the file, emitting keys and hints.
fn parse(
    data: &[u8],
    options: &Options,
    crc: &mut dyn FnMut(usize) -> u64,
    emit: &mut dyn FnMut(Event) -> EmitResult,
) -> Result<Summary, RdbError> {
    let (version, valkey, header_len) = read_header(data)?;
    let mut summary = Summary {
        version,
        valkey,
        ..Summary::default()
    };
    let mut c = Cursor::new(data, header_len);
    let mut db = 0usize;
    let mut expire: Option<i64> = None;
    loop {
        let record_at = c.pos;
        let t = c.u8("a record type")?;
        match t {
            opcode::EOF => break,
            opcode::SELECTDB => {
                let n = c.len("a database number")?;
                if n >= options.databases as u64 {
                    return Err(RdbError::new(
                        ErrorKind::Rejected,
                        record_at,
                        format!(
                            "the file selects database {n} but only {} are configured",
                            options.databases
                        ),
                    ));
                }
                db = n as usize;
            }
            opcode::RESIZEDB => {
                let keys = c.len("a RESIZEDB size")?;
                let expiring = c.len("a RESIZEDB size")?;
                // A hint only: capped by what the rest of the file can hold.
                let cap = (c.remaining() / 3) as u64;
                emit(Event::Resize(db, keys.min(cap), expiring.min(cap))).map_err(reject)?;
            }
            opcode::EXPIRETIME_MS => expire = Some(c.ms_time("an expiry")?),
            opcode::EXPIRETIME => {
                let secs = i32::from_le_bytes(c.array("an expiry")?);
                expire = Some(i64::from(secs) * 1000);
            }
            opcode::AUX => {
                let name = c.blob("an AUX field name")?;
                let value = c.blob("an AUX field value")?;
                summary.aux.push((name, value));
            }
            opcode::IDLE => {
                c.len("an IDLE time")?;
            }
            opcode::FREQ => {
                c.u8("an LFU frequency")?;
            }
            opcode::SLOT_INFO => {
                for _ in 0..3 {
                    c.len("slot information")?;
                }
            }
            opcode::FUNCTION2 => summary.functions.push(c.blob("a function library")?),
            opcode::FUNCTION_PRE_GA => {
                return Err(RdbError::new(
                    ErrorKind::Unsupported,
                    record_at,
                    "pre-release function format (Redis 7.0 release candidates) is not supported",
                ))
            }
            opcode::MODULE_AUX => {
                let module_id = c.len("a module id")?;
                let name = module_name(module_id);
                read_module_aux_when(&mut c, &name)?;
                skip_module_value(&mut c, &name)?;
                summary.modules_skipped.push(name);
            }
            value_type => {
                let key = c.blob("a key")?;
                let key_expire = expire.take();
                let attach = |mut e: RdbError| {
                    e.key = Some((db, key.clone()));
                    e
                };
                if value_type == kind::MODULE_2 {
                    let module_id = c.len("a module id").map_err(attach)?;
                    let name = module_name(module_id);
                    skip_module_value(&mut c, &name).map_err(attach)?;
                    summary.modules_skipped.push(name);
                    continue;
                }
                let value =
                    read_value(&mut c, value_type, options, &mut summary).map_err(attach)?;
                let Some(value) = value else {
                    summary.empty_skipped += 1;
                    continue;
                };
                if let (Some(at), Some(before)) = (key_expire, options.skip_expired_before_ms) {
                    if at < before {
                        summary.expired_skipped += 1;
                        continue;
                    }
                }
                let loaded = LoadedKey {
                    db,
                    key,
                    value,
                    expire_ms: key_expire,
                };
                emit(Event::Key(record_at, loaded)).map_err(reject)?;
                summary.keys += 1;
            }
        }
    }
    summary.checksum = Some(verify_checksum(data, &mut c, version, crc)?);
    summary.len = c.pos;
    Ok(summary)
}

fn reject((offset, message): (usize, String)) -> RdbError {
    RdbError::new(ErrorKind::Rejected, offset, message)
}

/// Reads and checks the CRC after EOF (versions 5 and later).
fn verify_checksum(
    data: &[u8],
    c: &mut Cursor<'_>,
    version: u16,
    crc: &mut dyn FnMut(usize) -> u64,
) -> Result<Checksum, RdbError> {
    if version < 5 {
        return Ok(Checksum::Absent);
    }
    let covered = c.pos;
    let stored = u64::from_le_bytes(c.array("the checksum")?);
    if stored == 0 {
        return Ok(Checksum::Unchecked);
    }
    debug_assert!(covered <= data.len());
    let computed = crc(covered);
    if computed != stored {
        return Err(RdbError::new(
            ErrorKind::Checksum,
            covered,
            format!(
                "checksum mismatch: the file says {stored:016x}, the data gives {computed:016x}"
            ),
        ));
    }
    Ok(Checksum::Verified)
}

/// A module's name from its 64-bit id: nine characters of six bits each
/// (the low ten bits are the encoding version).
pub fn module_name(id: u64) -> String {
    const CHARSET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
    let mut name = String::with_capacity(9);
    let mut bits = id >> 10;
    let mut chars = [0u8; 9];
    for slot in chars.iter_mut().rev() {
        *slot = CHARSET[(bits & 63) as usize];
        bits >>= 6;
    }
    name.extend(chars.iter().map(|&b| b as char));
    name
}

/// Reads the "when" of a module AUX record: the UINT opcode, then the
/// value (Redis's `rdbLoadCheckModuleValue` callers check the same).
fn read_module_aux_when(c: &mut Cursor<'_>, name: &str) -> Result<(), RdbError> {
    let at = c.pos;
    if c.len("a module AUX 'when' opcode")? != 2 {
        return Err(c.corrupt(
            at,
            format!("module '{name}' AUX data does not start with its 'when' field"),
        ));
    }
    c.len("a module AUX 'when'")?;
    Ok(())
}

/// Skips a module value written with the module opcodes (Redis's
/// `rdbLoadCheckModuleValue`) up to its EOF opcode.
fn skip_module_value(c: &mut Cursor<'_>, name: &str) -> Result<(), RdbError> {
    loop {
        let at = c.pos;
        match c.len("a module opcode")? {
            0 => return Ok(()),
            1 | 2 => {
                c.len("a module integer")?;
            }
            3 => {
                c.take(4, "a module float")?;
            }
            4 => {
                c.take(8, "a module double")?;
            }
            5 => c.skip_string("a module string")?,
            other => {
                return Err(RdbError::new(
                    ErrorKind::Unsupported,
                    at,
                    format!(
                        "module '{name}' data uses opcode {other}: its length is not knowable, so it cannot be skipped"
                    ),
                ))
            }
        }
    }
}

// ---------------------------------------------------------------------------
// Values.

/// Decodes one value of type `value_type` from `data` (a DUMP payload's
/// body); returns it (None for an empty collection, which Redis also
/// refuses to create) and the bytes it took.
pub fn decode_value(
    data: &[u8],
    value_type: u8,
    options: &Options,
) -> Result<(Option<Value>, usize), RdbError> {
    let mut c = Cursor::new(data, 0);
    let mut summary = Summary::default();
    let value = read_value(&mut c, value_type, options, &mut summary)?;
    Ok((value, c.pos))
}

fn encoding_error(at: usize, what: &str, e: EncodingError) -> RdbError {
    RdbError::new(ErrorKind::Corrupt, at, format!("{what}: {e}"))
}

fn read_value(
    c: &mut Cursor<'_>,
    t: u8,
    options: &Options,
    summary: &mut Summary,
) -> Result<Option<Value>, RdbError> {
    read_value_as::<true>(c, t, options, summary)
}

/// Reads one value as the loader does (every read and every rule:
/// encodings walked, counts matched, duplicates and NaN scores refused).
/// With `BUILD` the value is built; without, nothing is kept: Some(an
/// empty string) stands for a value the loader would build, None for
/// one it skips (an empty collection). The checking form is what
/// [`check_keys`] runs, so a check and a load fail at the same offset.
fn read_value_as<const BUILD: bool>(
    c: &mut Cursor<'_>,
    t: u8,
    options: &Options,
    summary: &mut Summary,
) -> Result<Option<Value>, RdbError> {
    let limits = &options.limits;
    let at = c.pos;
    // What a checked value that would be loaded is returned as.
    let checked = || Some(Value::Str(Blob::default()));
    let value = match t {
        kind::STRING => {
            if !BUILD {
                c.check_string("a string value")?;
                return Ok(checked());
            }
            Value::Str(blob_of(c.string("a string value")?))
        }
        kind::LIST => {
            let n = c.count("a list length", 1)?;
            let mut list = List::new();
            for _ in 0..n {
                if BUILD {
                    list.push(End::Tail, &c.string("a list element")?);
                } else {
                    c.check_string("a list element")?;
                }
            }
            if n == 0 {
                return Ok(None);
            }
            if !BUILD {
                return Ok(checked());
            }
            Value::List(Box::new(list))
        }
        kind::SET => {
            let n = c.count("a set length", 1)?;
            let mut members = Vec::with_capacity(n as usize);
            for _ in 0..n {
                members.push(c.string("a set member")?);
            }
            if !BUILD {
                return unique(&members, |m| &m[..], DUPLICATE_MEMBERS)
                    .map(|loaded| loaded.then(checked).flatten())
                    .map_err(|e| c.corrupt(at, e));
            }
            match build_set(members.into_iter().map(blob_of).collect(), limits) {
                Ok(Some(set)) => Value::Set(Box::new(set)),
                Ok(None) => return Ok(None),
                Err(e) => return Err(c.corrupt(at, e)),
            }
        }
        kind::ZSET | kind::ZSET_2 => {
            let n = c.count("a sorted set length", 2)?;
            let mut entries = Vec::with_capacity(n as usize);
            for _ in 0..n {
                let member = c.string("a sorted set member")?;
                let score = if t == kind::ZSET {
                    c.string_double("a score")?
                } else {
                    c.binary_double("a score")?
                };
                entries.push((member, score));
            }
            if !BUILD {
                return zset_rules(&entries)
                    .map(|loaded| loaded.then(checked).flatten())
                    .map_err(|e| c.corrupt(at, e));
            }
            let entries = entries.into_iter().map(|(m, s)| (blob_of(m), s)).collect();
            return build_zset(entries, limits).map_err(|e| c.corrupt(at, e));
        }
        kind::HASH => {
            let n = c.count("a hash length", 2)?;
            let mut pairs = Vec::with_capacity(n as usize);
            for _ in 0..n {
                let field = c.string("a hash field")?;
                let value = c.string("a hash value")?;
                pairs.push((field, value));
            }
            if !BUILD {
                return unique(&pairs, |p| &p.0[..], DUPLICATE_FIELDS)
                    .map(|loaded| loaded.then(checked).flatten())
                    .map_err(|e| c.corrupt(at, e));
            }
            let pairs = pairs
                .into_iter()
                .map(|(f, v)| (blob_of(f), blob_of(v)))
                .collect();
            return build_hash(pairs, limits).map_err(|e| c.corrupt(at, e));
        }
        kind::HASH_ZIPMAP => {
            let raw = c.string("a zipmap")?;
            let pairs = zipmap::entries(&raw).map_err(|e| encoding_error(at, "zipmap", e))?;
            if !BUILD {
                return unique(&pairs, |p| p.0, DUPLICATE_FIELDS)
                    .map(|loaded| loaded.then(checked).flatten())
                    .map_err(|e| c.corrupt(at, e));
            }
            let pairs = pairs
                .into_iter()
                .map(|(f, v)| (Blob::from(f), Blob::from(v)))
                .collect();
            return build_hash(pairs, limits).map_err(|e| c.corrupt(at, e));
        }
        kind::LIST_ZIPLIST => {
            let raw = c.string("a ziplist")?;
            let mut list = List::new();
            let mut n = 0usize;
            for item in ziplist::entries(&raw).map_err(|e| encoding_error(at, "ziplist", e))? {
                let item = item.map_err(|e| encoding_error(at, "ziplist", e))?;
                n += 1;
                if BUILD {
                    push_item(&mut list, item);
                }
            }
            if n == 0 {
                return Ok(None);
            }
            if !BUILD {
                return Ok(checked());
            }
            Value::List(Box::new(list))
        }
        kind::SET_INTSET => {
            let raw = c.string("an intset")?;
            let ints = intset::decode(&raw).map_err(|e| encoding_error(at, "intset", e))?;
            if ints.is_empty() {
                return Ok(None);
            }
            if !BUILD {
                return Ok(checked());
            }
            Value::Set(Box::new(set_from_ints(ints, limits)))
        }
        kind::SET_LISTPACK => {
            let raw = c.string("a set listpack")?;
            let items = collect_items(&raw, at, true)?;
            if !BUILD {
                let members: Vec<ItemText<'_>> = items.iter().map(ItemText::of).collect();
                return unique(&members, ItemText::bytes, DUPLICATE_MEMBERS)
                    .map(|loaded| loaded.then(checked).flatten())
                    .map_err(|e| c.corrupt(at, e));
            }
            let members = items.iter().map(Item::to_blob).collect();
            match build_set(members, limits) {
                Ok(Some(set)) => Value::Set(Box::new(set)),
                Ok(None) => return Ok(None),
                Err(e) => return Err(c.corrupt(at, e)),
            }
        }
        kind::ZSET_ZIPLIST | kind::ZSET_LISTPACK => {
            let raw = c.string("a sorted set encoding")?;
            let items = collect_items(&raw, at, t == kind::ZSET_LISTPACK)?;
            if items.len() % 2 != 0 {
                return Err(c.corrupt(at, "sorted set encoding has an odd number of elements"));
            }
            let mut entries = Vec::with_capacity(items.len() / 2);
            for pair in items.chunks(2) {
                let score = match pair[1] {
                    Item::Int(n) => n as f64,
                    Item::Str(s) => parse_double(s).ok_or_else(|| {
                        c.corrupt(at, format!("score '{}' is not a number", display_key(s)))
                    })?,
                };
                entries.push((item_bytes(&pair[0]), score));
            }
            if !BUILD {
                return zset_rules(&entries)
                    .map(|loaded| loaded.then(checked).flatten())
                    .map_err(|e| c.corrupt(at, e));
            }
            let entries = entries.into_iter().map(|(m, s)| (blob_of(m), s)).collect();
            // Redis keeps a loaded compact encoding compact unless it has
            // too many entries (long elements do not convert it).
            return build_zset(entries, &compact_limits(limits)).map_err(|e| c.corrupt(at, e));
        }
        kind::HASH_ZIPLIST | kind::HASH_LISTPACK => {
            let raw = c.string("a hash encoding")?;
            if !BUILD {
                // The same reads as below, keeping only the fields.
                let (name, iter): (
                    &str,
                    Box<dyn Iterator<Item = Result<Item<'_>, EncodingError>>>,
                ) = if t == kind::HASH_LISTPACK {
                    let e =
                        listpack::entries(&raw).map_err(|e| encoding_error(at, "listpack", e))?;
                    ("listpack", Box::new(e))
                } else {
                    let e = ziplist::entries(&raw).map_err(|e| encoding_error(at, "ziplist", e))?;
                    ("ziplist", Box::new(e))
                };
                let mut fields: Vec<ItemText<'_>> = Vec::new();
                let mut n = 0usize;
                for item in iter {
                    let item = item.map_err(|e| encoding_error(at, name, e))?;
                    if n.is_multiple_of(2) {
                        fields.push(ItemText::of(&item));
                    }
                    n += 1;
                }
                if !n.is_multiple_of(2) {
                    return Err(c.corrupt(at, "hash encoding has an odd number of elements"));
                }
                return unique(&fields, ItemText::bytes, DUPLICATE_FIELDS)
                    .map(|loaded| loaded.then(checked).flatten())
                    .map_err(|e| c.corrupt(at, e));
            }
            let items = collect_items(&raw, at, t == kind::HASH_LISTPACK)?;
            if items.len() % 2 != 0 {
                return Err(c.corrupt(at, "hash encoding has an odd number of elements"));
            }
            let pairs = items
                .chunks(2)
                .map(|p| (p[0].to_blob(), p[1].to_blob()))
                .collect();
            return build_hash(pairs, &compact_limits(limits)).map_err(|e| c.corrupt(at, e));
        }
        kind::HASH_LISTPACK_EX | kind::HASH_LISTPACK_EX_PRE_GA => {
            if t == kind::HASH_LISTPACK_EX {
                c.ms_time("a hash minimum expiry")?;
            }
            let raw = c.string("a hash listpack")?;
            let items = collect_items(&raw, at, true)?;
            if items.len() % 3 != 0 {
                return Err(c.corrupt(at, "hash-with-TTL listpack is not made of triples"));
            }
            let mut pairs = Vec::with_capacity(items.len() / 3);
            for triple in items.chunks(3) {
                let ttl = triple[2]
                    .as_i64()
                    .ok_or_else(|| c.corrupt(at, "hash field TTL is not an integer"))?;
                if keep_field(ttl, options, summary) {
                    pairs.push((triple[0].to_blob(), triple[1].to_blob()));
                }
            }
            return build_hash(pairs, limits).map_err(|e| c.corrupt(at, e));
        }
        kind::HASH_METADATA_PRE_GA if summary.valkey => {
            // Valkey's RDB_TYPE_HASH_2 (same byte): field, value and an
            // 8-byte LE absolute expiry in ms (-1 = none) per field.
            let n = c.count("a hash length", 10)?;
            let mut pairs = Vec::with_capacity(n as usize);
            for _ in 0..n {
                let field = c.blob("a hash field")?;
                let value = c.blob("a hash value")?;
                let expire_at = c.ms_time("a hash field expiry")?;
                if keep_field(expire_at.max(0), options, summary) {
                    pairs.push((field, value));
                }
            }
            return build_hash(pairs, limits).map_err(|e| c.corrupt(at, e));
        }
        kind::HASH_METADATA | kind::HASH_METADATA_PRE_GA => {
            let min_expire = if t == kind::HASH_METADATA {
                c.ms_time("a hash minimum expiry")?
            } else {
                0
            };
            let n = c.count("a hash length", 3)?;
            let mut pairs = Vec::with_capacity(n as usize);
            for _ in 0..n {
                let ttl = c.len("a hash field TTL")?;
                let expire_at = if t == kind::HASH_METADATA && ttl != 0 {
                    (ttl as i64).wrapping_add(min_expire).wrapping_sub(1)
                } else {
                    ttl as i64
                };
                let field = c.blob("a hash field")?;
                let value = c.blob("a hash value")?;
                if keep_field(expire_at, options, summary) {
                    pairs.push((field, value));
                }
            }
            return build_hash(pairs, limits).map_err(|e| c.corrupt(at, e));
        }
        kind::LIST_QUICKLIST | kind::LIST_QUICKLIST_2 => {
            let nodes = c.count("a quicklist length", 1)?;
            let mut list = List::new();
            let mut n = 0usize;
            for _ in 0..nodes {
                let container = if t == kind::LIST_QUICKLIST_2 {
                    c.len("a quicklist container type")?
                } else {
                    2
                };
                let node_at = c.pos;
                let raw = c.string("a quicklist node")?;
                match container {
                    1 => {
                        n += 1;
                        if BUILD {
                            list.push(End::Tail, &raw);
                        }
                    }
                    2 => {
                        let items: Box<dyn Iterator<Item = Result<Item<'_>, EncodingError>>> =
                            if t == kind::LIST_QUICKLIST_2 {
                                Box::new(
                                    listpack::entries(&raw)
                                        .map_err(|e| encoding_error(node_at, "listpack", e))?,
                                )
                            } else {
                                Box::new(
                                    ziplist::entries(&raw)
                                        .map_err(|e| encoding_error(node_at, "ziplist", e))?,
                                )
                            };
                        for item in items {
                            let item =
                                item.map_err(|e| encoding_error(node_at, "quicklist node", e))?;
                            n += 1;
                            if BUILD {
                                push_item(&mut list, item);
                            }
                        }
                    }
                    other => {
                        return Err(
                            c.corrupt(node_at, format!("unknown quicklist container {other}"))
                        )
                    }
                }
            }
            if n == 0 {
                return Ok(None);
            }
            if !BUILD {
                return Ok(checked());
            }
            Value::List(Box::new(list))
        }
        kind::STREAM_LISTPACKS | kind::STREAM_LISTPACKS_2 | kind::STREAM_LISTPACKS_3 => {
            Value::Stream(Box::new(read_stream(c, t)?))
        }
        kind::MODULE_PRE_GA => {
            return Err(RdbError::new(
                ErrorKind::Unsupported,
                at,
                "pre-release module value format is not supported",
            ))
        }
        other => return Err(c.corrupt(at.saturating_sub(1), format!("unknown value type {other}"))),
    };
    Ok(Some(value))
}

/// The limits a loaded listpack or ziplist hash or sorted set is held to:
/// Redis 7.0 converts such a value by its entry count only.
fn compact_limits(limits: &EncodingLimits) -> EncodingLimits {
    EncodingLimits {
        hash_max_listpack_value: usize::MAX,
        zset_max_listpack_value: usize::MAX,
        ..*limits
    }
}

/// Whether a hash field with this TTL (0 = none) is loaded; counts the
/// fields whose TTL is dropped or which expired.
fn keep_field(expire_at: i64, options: &Options, summary: &mut Summary) -> bool {
    if expire_at == 0 {
        return true;
    }
    if expire_at < options.now_ms {
        summary.expired_fields_dropped += 1;
        return false;
    }
    summary.field_ttls_dropped += 1;
    true
}

fn push_item(list: &mut List, item: Item<'_>) {
    match item {
        Item::Str(s) => list.push(End::Tail, s),
        Item::Int(n) => list.push(End::Tail, &int_text(n)),
    }
}

fn collect_items<'a>(
    raw: &'a [u8],
    at: usize,
    is_listpack: bool,
) -> Result<Vec<Item<'a>>, RdbError> {
    let (name, iter): (
        &str,
        Box<dyn Iterator<Item = Result<Item<'a>, EncodingError>>>,
    ) = if is_listpack {
        (
            "listpack",
            Box::new(listpack::entries(raw).map_err(|e| encoding_error(at, "listpack", e))?),
        )
    } else {
        (
            "ziplist",
            Box::new(ziplist::entries(raw).map_err(|e| encoding_error(at, "ziplist", e))?),
        )
    };
    iter.map(|item| item.map_err(|e| encoding_error(at, name, e)))
        .collect()
}

/// A decoded string as a [`Blob`] (no copy when it was decompressed).
fn blob_of(s: Cow<'_, [u8]>) -> Blob {
    match s {
        Cow::Borrowed(b) => Blob::from(b),
        Cow::Owned(v) => Blob::from_vec(v),
    }
}

/// A listpack or ziplist entry's bytes (an integer as its decimal text,
/// which is what a loaded value holds).
fn item_bytes<'a>(item: &Item<'a>) -> Cow<'a, [u8]> {
    match *item {
        Item::Str(s) => Cow::Borrowed(s),
        Item::Int(n) => Cow::Owned(int_text(n)),
    }
}

/// An element's text without an allocation (for the checks): the
/// bytes, or an integer's decimal digits held in place.
enum ItemText<'a> {
    Bytes(&'a [u8]),
    Int([u8; 20], u8),
}

impl<'a> ItemText<'a> {
    fn of(item: &Item<'a>) -> ItemText<'a> {
        match *item {
            Item::Str(s) => ItemText::Bytes(s),
            Item::Int(n) => {
                let mut buf = [0u8; 20];
                let len = crate::types::num::format_i64(n, &mut buf).len();
                ItemText::Int(buf, (20 - len) as u8)
            }
        }
    }

    fn bytes(&self) -> &[u8] {
        match self {
            ItemText::Bytes(s) => s,
            ItemText::Int(buf, from) => &buf[usize::from(*from)..],
        }
    }
}

const DUPLICATE_FIELDS: &str = "duplicate hash fields detected";
const DUPLICATE_MEMBERS: &str = "duplicate set members detected";
const DUPLICATE_ZSET_MEMBERS: &str = "duplicate sorted set members detected";

/// The rule every loaded hash, set and sorted set obeys, for the loader
/// and the checker alike: no elements means no key (Ok(false): Redis
/// does not create an empty collection either); two equal elements
/// (fields, members) are damage.
fn unique<T>(items: &[T], key: impl Fn(&T) -> &[u8], duplicate: &str) -> Result<bool, String> {
    if items.is_empty() {
        return Ok(false);
    }
    if has_duplicates(items, key) {
        return Err(duplicate.into());
    }
    Ok(true)
}

/// [`unique`] for a sorted set's members, and no NaN score.
fn zset_rules<M: AsRef<[u8]>>(entries: &[(M, f64)]) -> Result<bool, String> {
    if entries.iter().any(|(_, s)| s.is_nan()) {
        return Err("sorted set with a NaN score".into());
    }
    unique(entries, |e| e.0.as_ref(), DUPLICATE_ZSET_MEMBERS)
}

/// True when two of `items` have equal keys.
fn has_duplicates<T>(items: &[T], key: impl Fn(&T) -> &[u8]) -> bool {
    if items.len() <= 16 {
        return items
            .iter()
            .enumerate()
            .any(|(i, a)| items[i + 1..].iter().any(|b| key(a) == key(b)));
    }
    // The keys' hashes sorted: no two equal means no duplicate (no table
    // to allocate for the common sizes); equal hashes are settled by the
    // keys themselves.
    use std::hash::BuildHasher;
    let state = foldhash::fast::FixedState::with_seed(0x6475_7073);
    let mut on_stack = [0u64; 128];
    let mut on_heap = Vec::new();
    let hashes: &mut [u64] = if items.len() <= on_stack.len() {
        &mut on_stack[..items.len()]
    } else {
        on_heap.resize(items.len(), 0);
        &mut on_heap
    };
    for (h, item) in hashes.iter_mut().zip(items) {
        *h = state.hash_one(key(item));
    }
    hashes.sort_unstable();
    if hashes.windows(2).all(|w| w[0] != w[1]) {
        return false;
    }
    let mut seen: std::collections::HashSet<&[u8], foldhash::fast::RandomState> =
        std::collections::HashSet::with_capacity_and_hasher(items.len(), Default::default());
    items.iter().any(|item| !seen.insert(key(item)))
}

/// A hash as Redis 7.0 builds it on load: a listpack (file order) within
/// the limits, else a table. Empty: None.
fn build_hash(pairs: Vec<(Blob, Blob)>, limits: &EncodingLimits) -> Result<Option<Value>, String> {
    if !unique(&pairs, |(f, _)| f.as_bytes(), DUPLICATE_FIELDS)? {
        return Ok(None);
    }
    let compact = pairs.len() <= limits.hash_max_listpack_entries
        && pairs.iter().all(|(f, v)| {
            f.len() <= limits.hash_max_listpack_value && v.len() <= limits.hash_max_listpack_value
        });
    if compact {
        return Ok(Some(Value::Hash(Box::new(Hash::Listpack(pairs)))));
    }
    let mut table = Dict::with_capacity(pairs.len());
    for (f, v) in pairs {
        table.insert_new(f, v);
    }
    Ok(Some(Value::Hash(Box::new(Hash::Table(table)))))
}

fn intset_limit(limits: &EncodingLimits) -> usize {
    limits.set_max_intset_entries.min(1 << 30)
}

fn set_from_ints(ints: Vec<i64>, limits: &EncodingLimits) -> Set {
    if ints.len() <= intset_limit(limits) {
        return Set::Intset(ints);
    }
    let mut table = Dict::with_capacity(ints.len());
    for v in ints {
        table.insert_new(Blob::from_i64(v), ());
    }
    Set::Table(table)
}

/// A set as Redis 7.0 builds it on load: an intset when every member is
/// an integer and there are few enough, else a table.
fn build_set(members: Vec<Blob>, limits: &EncodingLimits) -> Result<Option<Set>, String> {
    if !unique(&members, Blob::as_bytes, DUPLICATE_MEMBERS)? {
        return Ok(None);
    }
    if members.len() <= intset_limit(limits) {
        let ints: Option<Vec<i64>> = members.iter().map(|m| parse_i64(m)).collect();
        if let Some(mut ints) = ints {
            ints.sort_unstable();
            return Ok(Some(Set::Intset(ints)));
        }
    }
    let mut table = Dict::with_capacity(members.len());
    for m in members {
        table.insert_new(m, ());
    }
    Ok(Some(Set::Table(table)))
}

/// A sorted set from entries in any order (Redis writes skiplists from
/// the greatest element down).
fn build_zset(
    mut entries: Vec<(Blob, f64)>,
    limits: &EncodingLimits,
) -> Result<Option<Value>, String> {
    if !zset_rules(&entries)? {
        return Ok(None);
    }
    // Stable sort finds an ascending or descending file order in one pass.
    entries.sort_by(|a, b| cmp_key(a.1, &a.0, b.1, &b.0));
    Ok(Some(Value::ZSet(Box::new(ZSet::from_sorted(
        entries, limits,
    )))))
}

#[cfg(test)]
mod tests {
    use std::ops::ControlFlow;

    use super::*;
    use crate::rdb::writer::{encode_file, Encoder};
    use scan::CRC_STEP_BYTES;

    /// A file with one key of each kind in databases 0 and 2: (db, key,
    /// value, expiry ms). Keys are long enough that LZF applies to one.
    fn sample() -> Vec<u8> {
        let limits = EncodingLimits::default();
        let mut list = List::new();
        for item in ["a", "b", "c"] {
            list.push(End::Tail, item.as_bytes());
        }
        let mut hash = Hash::new();
        hash.set(b"f1", Blob::from(&b"v1"[..]), &limits);
        hash.set(b"f2", Blob::from(&b"v2"[..]), &limits);
        let mut set = Set::default();
        for m in ["1", "2", "3", "4"] {
            set.insert(m.as_bytes(), 512);
        }
        let mut big = Set::default();
        for i in 0..600 {
            big.insert(i.to_string().as_bytes(), 512);
        }
        let keys: Vec<(usize, Blob, Value, Option<i64>)> = vec![
            (
                0,
                Blob::from(&b"str"[..]),
                Value::Str(Blob::from(&b"v"[..])),
                Some(1_800_000_000_123),
            ),
            (
                0,
                Blob::from(&b"12345"[..]),
                Value::Str(Blob::from(&b"int key"[..])),
                None,
            ),
            (
                0,
                Blob::from(&[b'z'; 64][..]),
                Value::Str(Blob::from(&b"lzf key"[..])),
                None,
            ),
            (
                0,
                Blob::from(&b"list"[..]),
                Value::List(Box::new(list)),
                None,
            ),
            (
                2,
                Blob::from(&b"hash"[..]),
                Value::Hash(Box::new(hash)),
                None,
            ),
            (
                2,
                Blob::from(&b"set"[..]),
                Value::Set(Box::new(set)),
                Some(1),
            ),
            (2, Blob::from(&b"big"[..]), Value::Set(Box::new(big)), None),
        ];
        encode_file(
            &Encoder::default(),
            1_700_000_000_000,
            keys.iter().map(|(db, k, v, e)| (*db, k, v, *e)),
        )
    }

    fn collect(data: &[u8]) -> (Vec<KeyInfo<'static>>, Result<ScanSummary, RdbError>) {
        let mut seen = Vec::new();
        let result = scan_keys(data, &mut |k| {
            seen.push(KeyInfo {
                key: Cow::Owned(k.key.to_vec()),
                ..k.clone()
            });
            ControlFlow::Continue(())
        });
        (seen, result)
    }

    #[test]
    fn scan_keys_checks_the_crc_of_files_larger_than_its_running_step() {
        // Incompressible strings (LZF gives up on them), 16 MB in all, so
        // the running CRC is updated several times before the end.
        let mut rng = crate::rand::Rng::with_seed(7);
        let keys: Vec<(Blob, Value)> = (0..4000)
            .map(|i| {
                let value: Vec<u8> = (0..4096).map(|_| rng.below(256) as u8).collect();
                (
                    Blob::from(format!("k{i}").as_bytes()),
                    Value::Str(Blob::from(&value[..])),
                )
            })
            .collect();
        let data = encode_file(
            &Encoder::default(),
            1_700_000_000_000,
            keys.iter().map(|(k, v)| (0, k, v, None)),
        );
        assert!(data.len() > 3 * CRC_STEP_BYTES);
        let (seen, result) = collect(&data);
        assert_eq!(seen.len(), 4000);
        assert_eq!(result.expect("valid").checksum, Some(Checksum::Verified));
        // A flipped byte anywhere in a value is caught by the CRC.
        for at in [100, data.len() / 2, data.len() - 20] {
            let mut bad = data.clone();
            bad[at] ^= 0x01;
            assert!(collect(&bad).1.is_err(), "flip at {at}");
        }
    }

    #[test]
    fn scan_keys_reports_every_key_with_its_facts() {
        let data = sample();
        let (seen, result) = collect(&data);
        let summary = result.expect("a valid file");
        let names: Vec<(usize, &[u8], &str)> = seen
            .iter()
            .map(|k| (k.db, &k.key[..], k.logical_type))
            .collect();
        assert_eq!(
            names,
            vec![
                (0, &b"str"[..], "string"),
                (0, &b"12345"[..], "string"),
                (0, &[b'z'; 64][..], "string"),
                (0, &b"list"[..], "list"),
                (2, &b"hash"[..], "hash"),
                (2, &b"set"[..], "set"),
                (2, &b"big"[..], "set"),
            ]
        );
        assert_eq!(seen[0].expire_ms, Some(1_800_000_000_123));
        assert_eq!(seen[5].expire_ms, Some(1));
        assert!(seen.iter().filter(|k| k.expire_ms.is_some()).count() == 2);
        // Raw keys are borrowed; integer-encoded and LZF ones are not.
        let elements: Vec<Option<u64>> = seen.iter().map(|k| k.elements).collect();
        assert_eq!(
            elements,
            vec![None, None, None, Some(3), Some(2), Some(4), Some(600)]
        );
        assert_eq!(seen[5].type_byte, kind::SET_INTSET);
        assert_eq!(seen[6].type_byte, kind::SET);
        // The same totals as the skip pass, byte for byte.
        let plain = scan(&data).expect("a valid file");
        // (Each walk reads the clock for its own "expired".)
        let summary = ScanSummary {
            scanned_at_ms: plain.scanned_at_ms,
            ..summary
        };
        assert_eq!(summary, plain);
        let bytes: u64 = seen.iter().map(|k| k.record_bytes).sum();
        assert_eq!(bytes, plain.types.values().map(|t| t.bytes).sum::<u64>());
        for k in &seen {
            assert_eq!(data[k.offset as usize], k.type_byte);
        }
    }

    #[test]
    fn scan_keys_borrows_raw_keys_and_decodes_encoded_ones() {
        let data = sample();
        let mut borrowed = Vec::new();
        scan_keys(&data, &mut |k| {
            borrowed.push(matches!(k.key, Cow::Borrowed(_)));
            ControlFlow::Continue(())
        })
        .expect("a valid file");
        assert_eq!(borrowed, [true, false, false, true, true, true, true]);
    }

    #[test]
    fn scan_keys_stops_on_break_and_on_damage_after_earlier_keys() {
        let data = sample();
        let mut n = 0;
        let summary = scan_keys(&data, &mut |_| {
            n += 1;
            if n == 2 {
                ControlFlow::Break(())
            } else {
                ControlFlow::Continue(())
            }
        })
        .expect("a valid file");
        assert_eq!(n, 2);
        assert_eq!(summary.checksum, None);
        assert_eq!(summary.keys_per_db.values().sum::<u64>(), 2);
        // Cut inside the big set: the six keys before it are seen.
        let (full, _) = collect(&data);
        let cut = full[6].offset as usize + 20;
        let (seen, result) = collect(&data[..cut]);
        assert_eq!(seen.len(), 6);
        let e = result.expect_err("a truncated file");
        assert_eq!(e.kind, ErrorKind::Truncated);
        assert!(e.offset as usize <= cut);
        // A flipped byte in the trailer: every key seen, then the checksum fails.
        let mut flipped = data.clone();
        let last = flipped.len() - 1;
        flipped[last] ^= 1;
        let (seen, result) = collect(&flipped);
        assert_eq!(seen.len(), 7);
        assert_eq!(result.expect_err("a bad CRC").kind, ErrorKind::Checksum);
    }

    /// 40 small hashes (listpacks) in db 0 and 3, keyed `h:<i>`.
    fn hashes() -> Vec<u8> {
        let limits = EncodingLimits::default();
        let keys: Vec<(usize, Blob, Value)> = (0..40)
            .map(|i| {
                let mut h = Hash::new();
                for f in 0..3 {
                    h.set(
                        format!("field{f}").as_bytes(),
                        Blob::from(format!("value {i}/{f}").as_bytes()),
                        &limits,
                    );
                }
                let db = if i < 20 { 0 } else { 3 };
                (
                    db,
                    Blob::from(format!("h:{i}").as_bytes()),
                    Value::Hash(Box::new(h)),
                )
            })
            .collect();
        encode_file(
            &Encoder::default(),
            1_700_000_000_000,
            keys.iter().map(|(db, k, v)| (*db, k, v, None)),
        )
    }

    fn salvage_options() -> Options {
        Options {
            limits: EncodingLimits::default(),
            databases: 16,
            skip_expired_before_ms: None,
            now_ms: 0,
        }
    }

    fn salvaged(data: &[u8]) -> (Vec<(usize, Vec<u8>)>, SalvageReport) {
        let mut keys = Vec::new();
        let report = salvage(data, &salvage_options(), &mut |_, k| {
            keys.push((k.db, k.key.to_vec()));
            Ok(())
        })
        .expect("the header is intact");
        (keys, report)
    }

    fn record_offsets(data: &[u8]) -> Vec<(u64, (usize, Vec<u8>))> {
        let (seen, result) = collect(data);
        result.expect("a valid file");
        seen.iter()
            .map(|k| (k.offset, (k.db, k.key.to_vec())))
            .collect()
    }

    #[test]
    fn salvage_of_an_intact_file_reads_what_load_reads() {
        let data = sample();
        let (keys, report) = salvaged(&data);
        let want: Vec<_> = record_offsets(&data).into_iter().map(|(_, k)| k).collect();
        assert_eq!(keys, want);
        assert!(report.damaged.is_empty());
        assert_eq!(report.checksum, Some(Ok(Checksum::Verified)));
        assert_eq!(report.len, data.len() as u64);
        assert_eq!(report.eof_at, Some(data.len() as u64 - 9));
    }

    /// Found by the `repair_salvage` fuzz target: salvage read a Valkey
    /// file's type 21 (a hash with field TTLs) as Redis 7.4-rc's type 21,
    /// so an intact Valkey 9 file came out with its hash as damage.
    #[test]
    fn salvage_of_an_intact_valkey_file_reads_what_load_reads() {
        let data = std::fs::read(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/fixtures/rdb/valkey9.rdb"
        ))
        .expect("the valkey9.rdb fixture");
        let mut loaded = Vec::new();
        load(&data, &salvage_options(), &mut |k| {
            loaded.push((k.db, k.key.to_vec()));
            Ok(())
        })
        .expect("the fixture loads");
        let (keys, report) = salvaged(&data);
        assert!(report.damaged.is_empty(), "{:?}", report.damaged);
        assert!(loaded.contains(&(0, b"hash:hfe".to_vec())), "{loaded:?}");
        assert_eq!(keys, loaded);
    }

    #[test]
    fn salvage_resynchronises_after_a_damaged_record() {
        let data = hashes();
        let records = record_offsets(&data);
        for victim in [0usize, 10, 25, 39] {
            let (start, _) = records[victim];
            let mut bad = data.clone();
            // The listpack's total-bytes field, just after the key and the
            // string length of the listpack: the record no longer decodes.
            let key_len = 1 + format!("h:{victim}").len();
            bad[start as usize + 1 + key_len + 1] ^= 0x5a;
            let (keys, report) = salvaged(&bad);
            let want: Vec<_> = records
                .iter()
                .enumerate()
                .filter(|(i, _)| *i != victim)
                .map(|(_, (_, k))| k.clone())
                .collect();
            assert_eq!(keys, want, "victim {victim}");
            assert_eq!(report.damaged.len(), 1, "{:?}", report.damaged);
            let region = &report.damaged[0];
            assert_eq!(region.start, start);
            assert!(region.resumed);
            let next = records
                .get(victim + 1)
                .map_or(data.len() as u64 - 9, |r| r.0);
            // Resumed at the next record (a SELECTDB may come first).
            assert!(region.end <= next && region.end > start, "{region:?}");
            assert_eq!(
                region.error.key.as_ref().map(|(_, k)| k.to_vec()),
                Some(format!("h:{victim}").into_bytes())
            );
            assert!(matches!(report.checksum, Some(Err(_))));
        }
    }

    #[test]
    fn salvage_of_a_truncated_file_keeps_the_records_before_the_cut() {
        let data = hashes();
        let records = record_offsets(&data);
        let cut = records[30].0 as usize + 7;
        let (keys, report) = salvaged(&data[..cut]);
        let want: Vec<_> = records[..30].iter().map(|(_, k)| k.clone()).collect();
        assert_eq!(keys, want);
        assert_eq!(report.damaged.len(), 1);
        assert_eq!(report.damaged[0].start, records[30].0);
        assert_eq!(report.damaged[0].end, cut as u64);
        assert!(!report.damaged[0].resumed);
        assert_eq!(report.checksum, None);
        // Cut inside the checksum.
        let (keys, report) = salvaged(&data[..data.len() - 3]);
        assert_eq!(keys.len(), 40);
        assert!(report.damaged.is_empty());
        assert!(matches!(report.checksum, Some(Err(ref e)) if e.kind == ErrorKind::Truncated));
    }

    #[test]
    fn salvage_reports_a_wrong_checksum_and_keeps_every_key() {
        let mut data = hashes();
        let n = data.len();
        data[n - 2] ^= 1;
        let (keys, report) = salvaged(&data);
        assert_eq!(keys.len(), 40);
        assert!(report.damaged.is_empty());
        assert!(matches!(report.checksum, Some(Err(ref e)) if e.kind == ErrorKind::Checksum));
        // Trailing bytes are left to the caller: `len` is where the image ends.
        let mut longer = hashes();
        longer.extend_from_slice(b"junk");
        let (_, report) = salvaged(&longer);
        assert_eq!(report.len, longer.len() as u64 - 4);
        assert_eq!(report.checksum, Some(Ok(Checksum::Verified)));
    }

    #[test]
    fn salvage_never_panics_on_damaged_files() {
        let data = hashes();
        let mut rng = crate::rand::Rng::with_seed(7);
        for round in 0..300 {
            let mut bad = data.clone();
            for _ in 0..1 + round % 3 {
                let at = 9 + (rng.next_u64() as usize) % (bad.len() - 9);
                bad[at] = rng.next_u64() as u8;
            }
            if round % 4 == 0 {
                let cut = 9 + (rng.next_u64() as usize) % (bad.len() - 9);
                bad.truncate(cut);
            }
            let (keys, report) = salvaged(&bad);
            assert!(keys.len() <= 41, "round {round}");
            for r in &report.damaged {
                assert!(r.start < r.end || r.end == bad.len() as u64, "{r:?}");
            }
        }
    }
}
