//! Salvage: reading every record of a damaged file that can be read
//! (`hozon-repair salvage`, docs/repair.md).

use super::*;

// ---------------------------------------------------------------------------
// Salvage: reading past damage.

/// Records that must decode in a row from an offset before [`salvage`]
/// resumes reading there (docs/repair.md: an RDB has no framing, so a
/// resynchronisation point is a guess that this many records confirm).
pub const RESYNC_RECORDS: usize = 16;

/// A region of an RDB file that [`salvage`] could not read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DamagedRegion {
    /// Offset of the record whose reading failed.
    pub start: u64,
    /// Where reading resumed (exclusive), or the end of the data.
    pub end: u64,
    /// Why the record at `start` did not decode (its `key`, when the
    /// failure came after the key was read, names the key lost).
    pub error: RdbError,
    /// True when reading resumed at `end`; false when nothing after
    /// `start` could be read (the region runs to the end of the data).
    pub resumed: bool,
}

/// What [`salvage`] found besides the keys it handed on.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct SalvageReport {
    /// The RDB version of the header.
    pub version: u16,
    /// The header was Valkey's.
    pub valkey: bool,
    /// AUX fields read, in file order.
    pub aux: Vec<(Blob, Blob)>,
    /// Function library sources (FUNCTION2) read, in file order.
    pub functions: Vec<Blob>,
    /// Keys handed to the sink.
    pub keys: u64,
    /// Keys skipped because their collection was empty.
    pub empty_skipped: u64,
    /// Module values and module AUX records skipped (their keys are not
    /// loaded), with the module names.
    pub modules_skipped: Vec<String>,
    /// The regions that could not be read, in file order.
    pub damaged: Vec<DamagedRegion>,
    /// Offset of the EOF opcode, when reading reached it.
    pub eof_at: Option<u64>,
    /// The checksum after EOF: Ok when verified, unchecked or absent; Err
    /// when it differs or is cut short. None when EOF was not reached.
    pub checksum: Option<Result<Checksum, RdbError>>,
    /// Where the image ends (after the checksum; the end of the data when
    /// EOF was not reached). Bytes after it are trailing bytes.
    pub len: u64,
}

/// One record read by [`next_record`].
enum Record {
    /// The EOF opcode.
    Eof,
    /// A key and its value.
    Key(LoadedKey),
    /// Anything else: an opcode, a skipped module value, an empty
    /// collection.
    Other,
}

/// Reads the record at the cursor (the same structure [`load`] reads,
/// with `db` and `expire` the state opcodes carry to the next key).
fn next_record(
    c: &mut Cursor<'_>,
    options: &Options,
    summary: &mut SalvageReport,
    db: &mut usize,
    expire: &mut Option<i64>,
) -> Result<Record, RdbError> {
    let record_at = c.pos;
    let t = c.u8("a record type")?;
    if let Some(meta) = read_meta(c, t, record_at)? {
        match meta {
            Meta::Eof => return Ok(Record::Eof),
            Meta::SelectDb(n) => {
                if n >= options.databases as u64 {
                    return Err(RdbError::new(
                        ErrorKind::Corrupt,
                        record_at,
                        format!(
                            "the file selects database {n} but at most {} are accepted",
                            options.databases
                        ),
                    ));
                }
                *db = n as usize;
            }
            Meta::Expire(at) => *expire = Some(at),
            Meta::Aux(name, value) => summary.aux.push((name, value)),
            Meta::Function(library) => summary.functions.push(library),
            Meta::ModuleAux(name) => summary.modules_skipped.push(name),
            Meta::ResizeDb { .. } | Meta::Idle(_) | Meta::Freq(_) | Meta::Ignored => {}
        }
        return Ok(Record::Other);
    }
    let value_type = t;
    let key = c.blob("a key")?;
    let key_expire = expire.take();
    let at_db = *db;
    let attach = |mut e: RdbError| {
        e.key = Some((at_db, key.clone()));
        e
    };
    if value_type == kind::MODULE_2 {
        let module_id = c.len("a module id").map_err(attach)?;
        let name = module_name(module_id);
        skip_module_value(c, &name).map_err(attach)?;
        summary.modules_skipped.push(name);
        return Ok(Record::Other);
    }
    // Type 21 means another encoding in a Valkey file: the value
    // reader needs to know whose file it reads, as in `load`.
    let mut scratch = Summary {
        valkey: summary.valkey,
        ..Summary::default()
    };
    let value = read_value(c, value_type, options, &mut scratch).map_err(attach)?;
    let Some(value) = value else {
        summary.empty_skipped += 1;
        return Ok(Record::Other);
    };
    Ok(Record::Key(LoadedKey {
        db: at_db,
        key,
        value,
        expire_ms: key_expire,
        access: None,
    }))
}

/// True when reading from `at` (with database `db` selected) decodes
/// [`RESYNC_RECORDS`] records in a row, or decodes every record up to an
/// EOF opcode that ends the image where a whole file ends (only the
/// checksum after it, `checksum_len` bytes).
fn resyncs_at(
    data: &[u8],
    at: usize,
    options: &Options,
    (db, valkey): (usize, bool),
    checksum_len: usize,
) -> bool {
    let mut c = Cursor::new(data, at);
    let mut trial = SalvageReport {
        valkey,
        ..SalvageReport::default()
    };
    let (mut db, mut expire) = (db, None);
    for _ in 0..RESYNC_RECORDS {
        match next_record(&mut c, options, &mut trial, &mut db, &mut expire) {
            Ok(Record::Eof) => return c.remaining() == checksum_len,
            Ok(_) => {}
            Err(_) => return false,
        }
    }
    true
}

impl SalvageReport {
    /// The replication position of the `repl-*` AUX fields read, when all
    /// three are present and well formed ([`crate::rdb::position_from_aux`]).
    pub fn position(&self) -> Option<crate::repl::ids::Position> {
        crate::rdb::position_from_aux(&self.aux)
    }
}

/// Reads every record of the RDB file in `data` that can be read, as
/// `hozon-repair salvage` does (docs/repair.md): keys go to `sink` with
/// the offset of their record, in file order. When a record does not
/// decode, each later offset is tried as a record start, and reading
/// resumes at the first from which [`RESYNC_RECORDS`] records (or all
/// records up to the EOF opcode at the end of the file) decode; the
/// region between is reported. Values are built with `options.limits`;
/// `options.databases` bounds SELECTDB (a larger number is damage);
/// `skip_expired_before_ms` is ignored (every key is handed on) and hash
/// fields whose TTL passed before `options.now_ms` are dropped as in
/// [`load`]. Err only when the header cannot be read (not an RDB, an
/// unsupported version) or `sink` refuses a key (its message, kind
/// [`ErrorKind::Rejected`]). Memory: one value at a time.
pub fn salvage(
    data: &[u8],
    options: &Options,
    sink: &mut dyn FnMut(u64, LoadedKey) -> SinkResult,
) -> Result<SalvageReport, RdbError> {
    let (version, valkey, header_len) = read_header(data)?;
    let mut report = SalvageReport {
        version,
        valkey,
        len: data.len() as u64,
        ..SalvageReport::default()
    };
    let checksum_len = if version >= 5 { 8 } else { 0 };
    let mut c = Cursor::new(data, header_len);
    let mut db = 0usize;
    let mut expire: Option<i64> = None;
    loop {
        let record_at = c.pos;
        match next_record(&mut c, options, &mut report, &mut db, &mut expire) {
            Ok(Record::Eof) => {
                report.eof_at = Some(record_at as u64);
                break;
            }
            Ok(Record::Other) => {}
            Ok(Record::Key(key)) => {
                let ident = (key.db, key.key.clone());
                sink(record_at as u64, key).map_err(|message| RdbError {
                    kind: ErrorKind::Rejected,
                    offset: record_at as u64,
                    message,
                    key: Some(ident),
                })?;
                report.keys += 1;
            }
            Err(error) => {
                expire = None;
                let resume = (record_at + 1..data.len())
                    .find(|&at| resyncs_at(data, at, options, (db, valkey), checksum_len));
                report.damaged.push(DamagedRegion {
                    start: record_at as u64,
                    end: resume.unwrap_or(data.len()) as u64,
                    error,
                    resumed: resume.is_some(),
                });
                match resume {
                    Some(at) => c.pos = at,
                    None => return Ok(report),
                }
            }
        }
    }
    if version < 5 {
        report.checksum = Some(Ok(Checksum::Absent));
        report.len = c.pos as u64;
        return Ok(report);
    }
    let covered = c.pos;
    let checked = match c.array::<8>("the checksum") {
        Err(e) => Err(e),
        Ok(stored) => {
            let stored = u64::from_le_bytes(stored);
            let computed = crate::rdb::crc64(&data[..covered]);
            if stored == 0 {
                Ok(Checksum::Unchecked)
            } else if stored == computed {
                Ok(Checksum::Verified)
            } else {
                Err(RdbError::new(
                    ErrorKind::Checksum,
                    covered,
                    format!(
                        "checksum mismatch: the file says {stored:016x}, the data gives {computed:016x}"
                    ),
                ))
            }
        }
    };
    report.checksum = Some(checked);
    report.len = c.pos as u64;
    Ok(report)
}
