//! The header and whole files: [`read_header`], [`load`] (the parse on
//! a thread beside the sink, the CRC-64 on a third), the checksum after
//! EOF, and module records (skipped).

use super::*;

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
        let mut crc = |covered: usize| crate::rdb::crc64(&data[..covered]);
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
            .then(|| scope.spawn(move || crate::rdb::crc64(&data[..whole])));
        let mut crc_job = crc_job;
        let crc = move |covered: usize| match crc_job.take() {
            Some(job) if covered == whole => job
                .join()
                .unwrap_or_else(|_| crate::rdb::crc64(&data[..covered])),
            _ => crate::rdb::crc64(&data[..covered]),
        };
        parse_beside_sink(scope, Cursor::new(data, 0), options, crc, sink, resize)
    })
}

/// [`load_with_hints`] of a payload still arriving: `window` is the
/// mapping it is read through, `feed` says how much of it has come (the
/// reader waits for the rest). The parse runs on a second thread beside
/// the sink; the CRC is computed at the end, over what was read.
pub fn load_streaming(
    window: &[u8],
    feed: &dyn Feed,
    options: &Options,
    sink: &mut dyn FnMut(LoadedKey) -> SinkResult,
    resize: &mut dyn FnMut(usize, u64, u64),
) -> Result<Summary, RdbError> {
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    if cores >= 2 {
        // Values built on every core, beside a walker and the sink.
        return super::parallel::load_parallel(window, feed, options, cores, sink, resize);
    }
    let stream = Streaming { window, feed };
    std::thread::scope(|scope| {
        let crc = move |covered: usize| crate::rdb::crc64(&window[..covered]);
        parse_beside_sink(
            scope,
            Cursor::streaming(stream, 0),
            options,
            crc,
            sink,
            resize,
        )
    })
}

/// Parses from `c` on a thread of `scope` while the calling thread runs
/// the sink (values are built while earlier keys are inserted).
fn parse_beside_sink<'scope, 'env: 'scope>(
    scope: &'scope std::thread::Scope<'scope, 'env>,
    c: Cursor<'env>,
    options: &'env Options,
    mut crc: impl FnMut(usize) -> u64 + Send + 'scope,
    sink: &mut dyn FnMut(LoadedKey) -> SinkResult,
    resize: &mut dyn FnMut(usize, u64, u64),
) -> Result<Summary, RdbError> {
    let (tx, rx) = std::sync::mpsc::sync_channel::<Vec<Event>>(4);
    let parser = scope.spawn(move || {
        let mut batch = Vec::with_capacity(EVENT_BATCH);
        let result = parse_from(c, options, &mut crc, &mut |event| {
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
}

/// Files smaller than this are parsed on the calling thread.
pub(super) const PARALLEL_MIN_BYTES: usize = 1 << 20;
/// Keys handed from the parser thread to the sink at a time.
const EVENT_BATCH: usize = 256;

/// What the parser hands on.
pub(super) enum Event {
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
    parse_from(Cursor::new(data, 0), options, crc, emit)
}

/// [`parse`] from a cursor at the start of the file (which may be a
/// payload still arriving).
fn parse_from(
    mut c: Cursor<'_>,
    options: &Options,
    crc: &mut dyn FnMut(usize) -> u64,
    emit: &mut dyn FnMut(Event) -> EmitResult,
) -> Result<Summary, RdbError> {
    let mut summary = begin_summary(&mut c)?;
    let mut db = 0usize;
    let mut expire: Option<i64> = None;
    let mut access = None;
    loop {
        let record_at = c.pos;
        let t = c.u8("a record type")?;
        if let Some(meta) = read_meta(&mut c, t, record_at)? {
            let hint = c.remaining_bound();
            match apply_meta(
                meta,
                record_at,
                hint,
                options,
                &mut db,
                &mut expire,
                &mut access,
                &mut summary,
            )? {
                MetaStep::End => break,
                MetaStep::Resize(db, keys, expiring) => {
                    emit(Event::Resize(db, keys, expiring)).map_err(reject)?
                }
                MetaStep::Next => {}
            }
            continue;
        }
        let value_type = t;
        let key = c.blob("a key")?;
        let key_expire = expire.take();
        let key_access = access.take();
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
        let value = read_value(&mut c, value_type, options, &mut summary).map_err(attach)?;
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
            access: key_access,
        };
        emit(Event::Key(record_at, loaded)).map_err(reject)?;
        summary.keys += 1;
    }
    end_summary(summary, &mut c, crc)
}

/// Reads the header at the cursor (waiting for it when the payload is
/// still arriving) and leaves the cursor after it; the summary begun.
pub(super) fn begin_summary(c: &mut Cursor<'_>) -> Result<Summary, RdbError> {
    // The longest header (`REDIS` or `VALKEY` and the version's digits).
    const HEADER_MAX: u64 = 9;
    if (c.remaining() as u64) < HEADER_MAX {
        c.grow(HEADER_MAX)?;
    }
    let (version, valkey, header_len) = read_header(c.data)?;
    c.pos = header_len;
    Ok(Summary {
        version,
        valkey,
        ..Summary::default()
    })
}

/// After EOF: the checksum verified, the length and the replication
/// position from the AUX fields; the summary done.
pub(super) fn end_summary(
    mut summary: Summary,
    c: &mut Cursor<'_>,
    crc: &mut dyn FnMut(usize) -> u64,
) -> Result<Summary, RdbError> {
    summary.checksum = Some(verify_checksum(c.data, c, summary.version, crc)?);
    summary.len = c.pos;
    summary.position = crate::rdb::position_from_aux(&summary.aux);
    Ok(summary)
}

/// What a record that is not a key means to a loader.
pub(super) enum MetaStep {
    /// EOF: the checksum follows.
    End,
    /// A RESIZEDB hint to hand on (database, keys, keys with an expiry),
    /// capped by what the rest of the file can hold.
    Resize(usize, u64, u64),
    /// Nothing to hand on.
    Next,
}

/// Applies a record [`read_meta`] read at `record_at` to a loader's state
/// (`bound`: the most bytes the rest of the file can hold): the database
/// selected (refused beyond `options.databases`), the next key's expiry
/// and access record (IDLE, FREQ),
/// the summary's AUX fields, functions and skipped modules.
// The loaders' state is passed piece by piece: each loader keeps it in
// its own locals.
#[allow(clippy::too_many_arguments)]
pub(super) fn apply_meta(
    meta: Meta,
    record_at: usize,
    bound: usize,
    options: &Options,
    db: &mut usize,
    expire: &mut Option<i64>,
    access: &mut Option<crate::keyspace::KeyAccess>,
    summary: &mut Summary,
) -> Result<MetaStep, RdbError> {
    match meta {
        Meta::Eof => return Ok(MetaStep::End),
        Meta::SelectDb(n) => {
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
            *db = n as usize;
        }
        Meta::ResizeDb { keys, expiring } => {
            // A hint only: capped by what the rest of the file can hold.
            let cap = (bound / 3) as u64;
            return Ok(MetaStep::Resize(*db, keys.min(cap), expiring.min(cap)));
        }
        Meta::Expire(at) => *expire = Some(at),
        Meta::Idle(secs) => *access = Some(crate::keyspace::KeyAccess::Idle(secs)),
        Meta::Freq(freq) => *access = Some(crate::keyspace::KeyAccess::Freq(freq)),
        Meta::Aux(name, value) => summary.aux.push((name, value)),
        Meta::Function(library) => summary.functions.push(library),
        Meta::ModuleAux(name) => summary.modules_skipped.push(name),
        Meta::Ignored => {}
    }
    Ok(MetaStep::Next)
}

fn reject((offset, message): (usize, String)) -> RdbError {
    RdbError::new(ErrorKind::Rejected, offset, message)
}

/// Reads and checks the CRC after EOF (versions 5 and later).
pub(super) fn verify_checksum(
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

/// A record that is not a key, read by [`read_meta`].
pub(super) enum Meta {
    /// The end of the records (the checksum follows).
    Eof,
    /// SELECTDB: the keys that follow are in this database.
    SelectDb(u64),
    /// RESIZEDB: a hint of the database's size, as written.
    ResizeDb {
        /// Keys in the database.
        keys: u64,
        /// Keys with an expiry.
        expiring: u64,
    },
    /// The next key's expiry, in Unix milliseconds.
    Expire(i64),
    /// An AUX field.
    Aux(Blob, Blob),
    /// A function library's code (FUNCTION2).
    Function(Blob),
    /// A module's AUX data, skipped; the module's name.
    ModuleAux(String),
    /// IDLE: the next key's idle time in seconds.
    Idle(u64),
    /// FREQ: the next key's LFU counter.
    Freq(u8),
    /// Slot information: read and not kept.
    Ignored,
}

/// Reads the record of type `t` (its byte at `record_at`) when it is not a
/// key; `None` for a value type (the key and its value follow). Every
/// reader of the file walks its records with this one function.
pub(super) fn read_meta(
    c: &mut Cursor<'_>,
    t: u8,
    record_at: usize,
) -> Result<Option<Meta>, RdbError> {
    Ok(Some(match t {
        opcode::EOF => Meta::Eof,
        opcode::SELECTDB => Meta::SelectDb(c.len("a database number")?),
        opcode::RESIZEDB => Meta::ResizeDb {
            keys: c.len("a RESIZEDB size")?,
            expiring: c.len("a RESIZEDB size")?,
        },
        opcode::EXPIRETIME_MS => Meta::Expire(c.ms_time("an expiry")?),
        opcode::EXPIRETIME => {
            let secs = i32::from_le_bytes(c.array("an expiry")?);
            Meta::Expire(i64::from(secs) * 1000)
        }
        opcode::AUX => {
            let name = c.blob("an AUX field name")?;
            Meta::Aux(name, c.blob("an AUX field value")?)
        }
        opcode::IDLE => Meta::Idle(c.len("an IDLE time")?),
        opcode::FREQ => Meta::Freq(c.u8("an LFU frequency")?),
        opcode::SLOT_INFO => {
            for _ in 0..3 {
                c.len("slot information")?;
            }
            Meta::Ignored
        }
        // Decoded (LZF included), not skipped: a library the loaders
        // cannot read is damage in every reader.
        opcode::FUNCTION2 => Meta::Function(c.blob("a function library")?),
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
            read_module_aux_when(c, &name)?;
            skip_module_value(c, &name)?;
            Meta::ModuleAux(name)
        }
        _ => return Ok(None),
    }))
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
pub(super) fn read_module_aux_when(c: &mut Cursor<'_>, name: &str) -> Result<(), RdbError> {
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
pub(super) fn skip_module_value(c: &mut Cursor<'_>, name: &str) -> Result<(), RdbError> {
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
