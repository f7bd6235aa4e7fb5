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
use crate::keyspace::LoadedKey;
use crate::types::build::{self, Rejected};
use crate::types::list::Builder as ListBuilder;
use crate::types::set::Set;
use crate::types::stream::{
    Consumer, ConsumerGroup, Fields, PendingEntry, Stream, StreamId, ENTRIES_READ_INVALID,
};
use crate::types::{Blob, EncodingLimits, Value};

mod check;
mod elements;
mod file;
mod parallel;
mod salvage;
mod scan;
mod stream;
pub use check::{check_file, check_keys, MAX_DATABASES};
pub use elements::{visit_elements, Declined, Element};
pub use file::{is_rdb, load, load_streaming, load_with_hints, module_name, read_header};
use file::{read_meta, skip_module_value, verify_checksum, Meta, PARALLEL_MIN_BYTES};
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
    /// The replication position of the `repl-*` AUX fields, when all
    /// three are present and well formed ([`super::position_from_aux`]).
    pub position: Option<crate::repl::ids::Position>,
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

/// A payload that is still arriving (a replica's full sync read while
/// it is received): the reader blocks in [`Feed::wait_for`] when it needs
/// bytes that have not come yet.
pub trait Feed: Sync {
    /// Blocks until the first `end` bytes have arrived or no more will
    /// come; returns how many have arrived (fewer than `end` only when no
    /// more will), or why the reading must stop (the payload was
    /// abandoned).
    fn wait_for(&self, end: usize) -> Result<usize, String>;
}

/// Where a streaming read gets its bytes: `window` is the mapping the
/// whole payload will be read through (its first bytes valid as far as
/// the feed says), `feed` says how far that is.
#[derive(Clone, Copy)]
struct Streaming<'a> {
    window: &'a [u8],
    feed: &'a dyn Feed,
}

struct Cursor<'a> {
    /// The bytes readable now (all of them unless streaming).
    data: &'a [u8],
    pos: usize,
    /// A payload still arriving: `data` grows within its window.
    stream: Option<Streaming<'a>>,
}

impl<'a> Cursor<'a> {
    fn new(data: &'a [u8], pos: usize) -> Cursor<'a> {
        Cursor {
            data,
            pos,
            stream: None,
        }
    }

    /// A cursor over a payload still arriving.
    fn streaming(stream: Streaming<'a>, pos: usize) -> Cursor<'a> {
        Cursor {
            data: &stream.window[..0],
            pos,
            stream: Some(stream),
        }
    }

    /// Waits until `n` bytes past the position are readable (streaming);
    /// false when they never will be (or when not streaming, since all
    /// bytes are there).
    #[cold]
    #[inline(never)]
    fn grow(&mut self, n: u64) -> Result<bool, RdbError> {
        let Some(stream) = self.stream else {
            return Ok(false);
        };
        let want = usize::try_from((self.pos as u64).saturating_add(n))
            .unwrap_or(usize::MAX)
            .min(stream.window.len());
        let got = stream.feed.wait_for(want).map_err(|reason| {
            RdbError::new(
                ErrorKind::Truncated,
                self.pos,
                format!("the payload stopped arriving: {reason}"),
            )
        })?;
        self.data = &stream.window[..got.min(stream.window.len())];
        Ok(self.remaining() as u64 >= n)
    }

    /// An upper bound of the bytes left, for capping size hints: the
    /// bytes present, or for a payload still arriving those plus 64 MiB.
    fn remaining_bound(&self) -> usize {
        match self.stream {
            None => self.remaining(),
            Some(_) => self.remaining().saturating_add(64 << 20),
        }
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
        let b = match self.data.get(self.pos) {
            Some(&b) => b,
            None => {
                if !self.grow(1)? {
                    return Err(self.truncated(what));
                }
                self.data[self.pos]
            }
        };
        self.pos += 1;
        Ok(b)
    }

    fn take(&mut self, n: u64, what: &str) -> Result<&'a [u8], RdbError> {
        if n > self.remaining() as u64 && !self.grow(n)? {
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
        let need = n.saturating_mul(min_bytes);
        if need > self.remaining() as u64 && !self.grow(need)? {
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

/// Decodes one RDB string (any encoding: raw, integer, LZF) from the
/// start of `data`; returns it and the bytes it took (FUNCTION RESTORE's
/// library sources).
pub fn decode_string(data: &[u8]) -> Result<(Vec<u8>, usize), RdbError> {
    let mut c = Cursor::new(data, 0);
    let blob = c.blob("a string")?;
    Ok((blob.as_bytes().to_vec(), c.pos))
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
            let mut list = ListBuilder::default();
            for _ in 0..n {
                if BUILD {
                    list.push(&c.string("a list element")?);
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
            Value::List(Box::new(list.finish()))
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
            let mut list = ListBuilder::default();
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
            Value::List(Box::new(list.finish()))
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
            let mut list = ListBuilder::default();
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
                            list.push(&raw);
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
            Value::List(Box::new(list.finish()))
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

fn push_item(list: &mut ListBuilder, item: Item<'_>) {
    match item {
        Item::Str(s) => list.push(s),
        Item::Int(n) => list.push(&int_text(n)),
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

const DUPLICATE_FIELDS: Rejected = Rejected::DuplicateFields;
const DUPLICATE_MEMBERS: Rejected = Rejected::DuplicateMembers;

/// The rules of [`build`] as the RDB reader applies them, for the loader
/// and the checker alike: an empty collection is no key (Ok(None), as
/// Redis skips it), any other broken rule is damage (its message).
fn loaded<T>(built: Result<T, Rejected>) -> Result<Option<T>, String> {
    match built {
        Ok(v) => Ok(Some(v)),
        Err(Rejected::Empty(_)) => Ok(None),
        Err(e) => Err(e.message().into()),
    }
}

/// The checker's form of the rules for hash fields and set members:
/// Ok(false) for an empty collection (not loaded).
fn unique<T>(items: &[T], key: impl Fn(&T) -> &[u8], duplicate: Rejected) -> Result<bool, String> {
    loaded(build::check_unique(items, key, "", duplicate)).map(|v| v.is_some())
}

/// [`unique`] for a sorted set's members, and no NaN score.
fn zset_rules<M: AsRef<[u8]>>(entries: &[(M, f64)]) -> Result<bool, String> {
    loaded(build::check_zset(entries)).map(|v| v.is_some())
}

/// A hash as Redis 7.0 builds it on load. Empty: None.
fn build_hash(pairs: Vec<(Blob, Blob)>, limits: &EncodingLimits) -> Result<Option<Value>, String> {
    loaded(build::hash(pairs, limits)).map(|h| h.map(|h| Value::Hash(Box::new(h))))
}

/// An intset's members (ascending, checked by its decoder; not empty,
/// checked by the caller) as a set.
fn set_from_ints(ints: Vec<i64>, limits: &EncodingLimits) -> Set {
    build::set_of_ints(ints, limits).unwrap_or_else(|_| Set::Intset(Vec::new()))
}

/// A set as Redis 7.0 builds it on load. Empty: None.
fn build_set(members: Vec<Blob>, limits: &EncodingLimits) -> Result<Option<Set>, String> {
    loaded(build::set(members, limits))
}

/// A sorted set from entries in any order. Empty: None.
fn build_zset(entries: Vec<(Blob, f64)>, limits: &EncodingLimits) -> Result<Option<Value>, String> {
    loaded(build::zset(entries, limits)).map(|z| z.map(|z| Value::ZSet(Box::new(z))))
}

#[cfg(test)]
mod tests;
