//! dump.hoz and RDB analysis and repair plans (docs/repair.md).
//!
//! **dump.hoz**: blocks are independent. The library's salvaging reader
//! ([`snapshot::salvage_streaming`]) finds every damaged region (header,
//! blocks, footer, trailer; without a usable index it walks the block
//! headers), and each becomes a problem with the keys it loses (from the
//! index) and the keys its readable records show
//! ([`snapshot::readable_keys`]). Salvage writes every key of every intact
//! block to a new dump.hoz.
//!
//! **RDB**: one stream. The library's salvage walk ([`reader::salvage`])
//! reads up to a damaged record, resynchronises (the first later offset
//! from which 16 records, or all records to the EOF opcode, decode) and
//! goes on; every region it skips is a problem, as are a wrong CRC-64 and
//! bytes after the image. Salvage writes every key read to a new RDB
//! (version 10, hozon's writer).
//!
//! **Memory.** The salvage closures do not hold the keys: they map the
//! original again by its path when they run and stream its keys straight
//! into the writer (a few blocks, or one value, at a time), so files of
//! any size are salvaged in bounded memory. The original must still be
//! the file that was planned on: its length and CRC-32 are checked first.
//! Only the RDB walks keep something per key: a 16-byte fingerprint, to
//! drop a duplicate a resynchronisation might produce (Redis refuses a
//! file with a duplicate key).

use std::collections::HashSet;
use std::fs::File;
use std::hash::BuildHasher;
use std::path::Path;
use std::sync::Arc;

use hozon::persist::io::{Io, RealIo};
use hozon::persist::snapshot::{
    self, BlockBuilder, Damage, FileWriter, HeaderInfo, LoadedKey, SnapshotError,
};
use hozon::rdb::file::{RdbFile, RecordEncoder};
use hozon::rdb::reader::{self, Checksum, DamagedRegion, ErrorKind, SalvageReport};
use hozon::rdb::writer::Encoder;
use hozon::types::EncodingLimits;

use hozon::tools::repair::model::{
    Content, Dropped, Keys, Piece, Plan, Problem, ProblemKind, Refusal, Remedy,
};

/// Databases a salvaged RDB may select: beyond this a SELECTDB is taken
/// for damage (Redis's own limit is the configured `databases`; no real
/// deployment comes near this, while random bytes usually do).
const RDB_MAX_DATABASES: usize = reader::MAX_DATABASES;

/// Databases recorded in a salvaged dump.hoz whose original header and
/// footer are both unreadable (Redis's default).
const DEFAULT_DATABASES: u32 = 16;

// ---------------------------------------------------------------------------
// The public API.

/// Every problem in the dump `data` (a dump.hoz or an RDB file), named
/// `file`, in file order.
pub fn check(file: &Path, data: &[u8]) -> Vec<Problem> {
    if is_rdb_like(data) {
        match rdb_analyse(data) {
            Ok((a, _)) => a.problems(file),
            Err(p) => vec![p.problem(file)],
        }
    } else {
        hoz_analyse(data).problems(file, data)
    }
}

/// `fix`: a dump has no tail to cut. Ok with no content when the dump is
/// clean; otherwise a refusal naming `salvage` (or saying that nothing
/// can repair it, for an unknown format version).
pub fn plan_fix(file: &Path, data: &[u8]) -> Result<Plan, Refusal> {
    let problems = check(file, data);
    let Some(first) = problems.first() else {
        return Ok(empty_plan(file));
    };
    if let Some(p) = problems.iter().find(|p| p.remedy == Remedy::None) {
        return Err(Refusal(format!(
            "{}: {} at bytes {}..{}: {}; no repair applies",
            file.display(),
            p.kind.name(),
            p.start,
            p.end,
            p.detail
        )));
    }
    Err(Refusal(format!(
        "{}: {} at bytes {}..{} ({}{}); a dump has no torn tail for `fix` to cut. \
         Run `hozon-repair salvage {}` to keep every intact key.",
        file.display(),
        first.kind.name(),
        first.start,
        first.end,
        first.detail,
        match problems.len() {
            1 => String::new(),
            n => format!(", and {} more problems", n - 1),
        },
        file.display()
    )))
}

/// `salvage`: a new dump with every intact key, written by the plan's
/// closure (which maps `file` again: it must be the file `data` was read
/// from), and the loss report. Ok with no content when the dump is clean.
pub fn plan_salvage(file: &Path, data: &[u8]) -> Result<Plan, Refusal> {
    if is_rdb_like(data) {
        rdb_plan_salvage(file, data)
    } else {
        hoz_plan_salvage(file, data)
    }
}

// ---------------------------------------------------------------------------
// Shared pieces.

/// RDB magic, or a file that cannot be a dump.hoz while its first bytes
/// look like an RDB header (so a damaged RDB magic is reported as an RDB
/// problem, not as a snapshot without blocks).
fn is_rdb_like(data: &[u8]) -> bool {
    if reader::is_rdb(data) {
        return true;
    }
    if data.starts_with(&snapshot::MAGIC) || data.ends_with(b"HZSNPEND") {
        return false;
    }
    // "REDIS" with a byte or two flipped, then the version digits.
    data.len() >= 9
        && data[5..9].iter().all(u8::is_ascii_digit)
        && data[..5]
            .iter()
            .zip(b"REDIS")
            .filter(|(a, b)| a != b)
            .count()
            <= 2
}

fn empty_plan(file: &Path) -> Plan {
    Plan {
        file: file.to_path_buf(),
        content: None,
        dropped: Vec::new(),
        notes: Vec::new(),
    }
}

fn workers() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get().min(8))
}

/// A problem without keys.
fn problem(
    file: &Path,
    (start, end): (u64, u64),
    kind: ProblemKind,
    detail: String,
    remedy: Remedy,
) -> Problem {
    Problem {
        file: file.to_path_buf(),
        start,
        end,
        kind,
        detail,
        commands_or_keys: None,
        keys: Keys::default(),
        remedy,
    }
}

/// Identifies the original when a closure runs: its length and CRC-32.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Fingerprint {
    len: u64,
    crc: u32,
}

impl Fingerprint {
    fn of(data: &[u8]) -> Fingerprint {
        Fingerprint {
            len: data.len() as u64,
            crc: crc32fast::hash(data),
        }
    }
}

/// The original, mapped again when a plan is carried out.
struct Original {
    map: Option<memmap2::Mmap>,
}

impl Original {
    /// Maps `path` and checks it is still the file planned on.
    fn open(path: &Path, planned: Fingerprint) -> Result<Original, String> {
        let file = File::open(path).map_err(|e| format!("{}: {e}", path.display()))?;
        let len = file
            .metadata()
            .map_err(|e| format!("{}: {e}", path.display()))?
            .len();
        let map = if len == 0 {
            None
        } else {
            // SAFETY: read-only and private to this process. Another process
            // truncating the file meanwhile could fault; the fingerprint
            // check below catches every other change made before the map.
            Some(
                unsafe { memmap2::Mmap::map(&file) }
                    .map_err(|e| format!("{}: cannot map: {e}", path.display()))?,
            )
        };
        let original = Original { map };
        if Fingerprint::of(original.bytes()) != planned {
            return Err(format!(
                "{} changed since the repair was planned; run the repair again",
                path.display()
            ));
        }
        Ok(original)
    }

    fn bytes(&self) -> &[u8] {
        self.map.as_deref().unwrap_or(&[])
    }
}

// ---------------------------------------------------------------------------
// dump.hoz.

/// What the salvaging reader found in a dump.hoz.
struct HozAnalysis {
    /// Where the snapshot image ends (bytes after it are trailing bytes);
    /// the file's length when that is not known.
    image_len: usize,
    damages: Vec<Damage>,
    summary: Option<snapshot::Summary>,
    keys: u64,
    unsupported: bool,
}

fn hoz_analyse(data: &[u8]) -> HozAnalysis {
    // A complete image followed by other bytes: the image is judged alone
    // and the rest is one problem (without this the missing trailer at
    // the very end would hide that the image is whole).
    let image_len = match snapshot::image_len(data) {
        Ok(n) if n < data.len() => n,
        _ => data.len(),
    };
    let image = &data[..image_len];
    let mut keys = 0u64;
    let salvaged = snapshot::salvage_streaming(
        image,
        EncodingLimits::default(),
        workers(),
        i64::MIN,
        |block| keys += block.len() as u64,
    );
    let unsupported = salvaged.damages.iter().any(|d| {
        matches!(
            d.error,
            SnapshotError::UnsupportedVersion { .. } | SnapshotError::UnsupportedFlags { .. }
        )
    });
    HozAnalysis {
        image_len,
        damages: salvaged.damages,
        summary: salvaged.summary,
        keys,
        unsupported,
    }
}

impl HozAnalysis {
    fn problems(&self, file: &Path, data: &[u8]) -> Vec<Problem> {
        let mut damages: Vec<&Damage> = self.damages.iter().collect();
        damages.sort_by_key(|d| (d.offset, is_split_loss(d)));
        let mut out: Vec<Problem> = Vec::new();
        for d in damages {
            // A split value lost with a damaged block is part of that
            // block's loss (its key is one of the block's records): said
            // in the block's problem, not counted again.
            match out.last_mut() {
                Some(last) if is_split_loss(d) && last.start <= d.offset => {
                    if let SnapshotError::Block { index, damage, .. } = &d.error {
                        last.detail.push_str(&format!("; block {index}: {damage}"));
                    }
                }
                _ => out.push(hoz_problem(file, data, d)),
            }
        }
        if self.image_len < data.len() {
            out.push(problem(
                file,
                (self.image_len as u64, data.len() as u64),
                ProblemKind::TrailingBytes,
                format!(
                    "{} bytes after the end of the snapshot (its trailer ends at {})",
                    data.len() - self.image_len,
                    self.image_len
                ),
                Remedy::Salvage,
            ));
        }
        out.sort_by_key(|p| (p.start, p.end));
        out
    }
}

fn hoz_problem(file: &Path, data: &[u8], d: &Damage) -> Problem {
    let (kind, remedy) = match &d.error {
        SnapshotError::UnsupportedVersion { .. } | SnapshotError::UnsupportedFlags { .. } => {
            (ProblemKind::DamagedHeader, Remedy::None)
        }
        SnapshotError::NotASnapshot(_) | SnapshotError::Header { .. } => {
            (ProblemKind::DamagedHeader, Remedy::Salvage)
        }
        SnapshotError::Truncated { .. }
        | SnapshotError::Trailer { .. }
        | SnapshotError::Footer { .. } => (ProblemKind::DamagedFooter, Remedy::Salvage),
        _ => (ProblemKind::DamagedBlock, Remedy::Salvage),
    };
    let mut keys = Keys::default();
    let is_block = matches!(d.error, SnapshotError::Block { .. });
    if is_block && d.len > 0 {
        for (db, key) in snapshot::readable_keys(data, d.offset) {
            keys.add(&db_key(db, &key));
        }
    }
    if let Some(lost) = d.keys_lost {
        keys.total = keys.total.max(lost);
    }
    let mut detail = match &d.error {
        SnapshotError::Block { index, damage, .. } => format!("block {index}: {damage}"),
        other => without_hint(other.to_string()),
    };
    if remedy == Remedy::None {
        detail.push_str("; this build cannot read it, so nothing is salvaged");
    }
    Problem {
        file: file.to_path_buf(),
        start: d.offset,
        // A block cut short claims bytes past the end of the file.
        end: d
            .offset
            .saturating_add(d.len)
            .min(data.len() as u64)
            .max(d.offset),
        kind,
        detail,
        commands_or_keys: if is_block { d.keys_lost } else { None },
        keys,
        remedy,
    }
}

/// The library's messages end with advice to run this tool: cut it.
fn without_hint(mut text: String) -> String {
    if let Some(at) = text.find("; run `hozon-repair") {
        text.truncate(at);
    }
    text
}

/// A split value lost because a block holding another of its parts is
/// damaged: reported by the library as a region of no length.
fn is_split_loss(d: &Damage) -> bool {
    d.len == 0
        && matches!(
            d.error,
            SnapshotError::Block {
                damage: snapshot::BlockDamage::Split(_),
                ..
            }
        )
}

/// A key as listed: prefixed with its database when it is not 0.
fn db_key(db: usize, key: &[u8]) -> Vec<u8> {
    if db == 0 {
        key.to_vec()
    } else {
        let mut out = format!("{db}:").into_bytes();
        out.extend_from_slice(key);
        out
    }
}

fn hoz_plan_salvage(file: &Path, data: &[u8]) -> Result<Plan, Refusal> {
    let analysis = hoz_analyse(data);
    if analysis.unsupported {
        let what = analysis
            .damages
            .first()
            .map_or_else(String::new, |d| d.error.to_string());
        return Err(Refusal(format!(
            "{}: {what}; salvage does not guess at a format this build does not read",
            file.display()
        )));
    }
    let problems = analysis.problems(file, data);
    if problems.is_empty() {
        return Ok(empty_plan(file));
    }
    let mut plan = empty_plan(file);
    plan.dropped = problems
        .iter()
        .map(|p| Dropped {
            start: p.start,
            end: p.end,
            reason: p.kind.name().to_string(),
            count: p.keys.total,
            keys: p.keys.clone(),
        })
        .collect();
    let lost: u64 = plan.dropped.iter().map(|d| d.count).sum();
    if analysis.damages.is_empty() {
        // Only bytes after a whole, verified image: keep the image as is.
        plan.notes.push(format!(
            "the snapshot image (bytes 0..{}) is intact and kept as it is",
            analysis.image_len
        ));
        plan.content = Some(Content::Pieces(vec![Piece::Copy(
            0,
            analysis.image_len as u64,
        )]));
        return Ok(plan);
    }
    plan.notes.push(format!(
        "{} keys of the intact blocks are written to a new dump.hoz; {lost} keys are lost",
        analysis.keys
    ));
    if analysis.summary.is_none() {
        plan.notes.push(
            "the index (footer) is unusable: blocks were found by walking their headers, \
             so keys in unreadable gaps are not counted"
                .to_string(),
        );
    }
    let header = HeaderInfo {
        created_ms: analysis
            .summary
            .as_ref()
            .map_or_else(hozon::engine::now_ms, |s| s.created_ms),
        databases: analysis
            .summary
            .as_ref()
            .map_or(DEFAULT_DATABASES, |s| s.databases.max(1)),
        engine_version: env!("CARGO_PKG_VERSION").to_string(),
    };
    let source = file.to_path_buf();
    let planned = Fingerprint::of(data);
    let image_len = analysis.image_len;
    let expected_keys = analysis.keys;
    plan.content = Some(Content::Written(Box::new(move |out: &Path| {
        let original = Original::open(&source, planned)?;
        let written = write_hoz(&original.bytes()[..image_len], header, out)?;
        if written != expected_keys {
            return Err(format!(
                "wrote {written} keys where the plan counted {expected_keys}"
            ));
        }
        Ok(())
    })));
    Ok(plan)
}

/// Streams every intact key of the image into a new dump.hoz at `out`
/// (fsynced by the writer). Returns the keys written.
fn write_hoz(image: &[u8], header: HeaderInfo, out: &Path) -> Result<u64, String> {
    let io: Arc<dyn Io> = Arc::new(RealIo);
    let mut writer = FileWriter::create(io, out, header).map_err(|e| e.to_string())?;
    let mut builder = BlockBuilder::new();
    let mut failure: Option<String> = None;
    let mut written = 0u64;
    snapshot::salvage_streaming(
        image,
        EncodingLimits::default(),
        workers(),
        i64::MIN,
        |keys: Vec<LoadedKey>| {
            if failure.is_some() {
                return;
            }
            for k in keys {
                for block in builder.push(k.db, &k.key, &k.value, k.expire_ms) {
                    match writer.write_block(block) {
                        Ok(buf) => builder.recycle(buf),
                        Err(e) => {
                            failure = Some(e.to_string());
                            return;
                        }
                    }
                }
                written += 1;
            }
        },
    );
    if let Some(e) = failure {
        return Err(e);
    }
    if let Some(block) = builder.finish() {
        writer.write_block(block).map_err(|e| e.to_string())?;
    }
    writer.finish(builder.stats()).map_err(|e| e.to_string())?;
    Ok(written)
}

// ---------------------------------------------------------------------------
// RDB.

/// A problem that stops an RDB analysis before any record (header).
struct HeaderProblem {
    end: u64,
    detail: String,
}

impl HeaderProblem {
    fn problem(&self, file: &Path) -> Problem {
        problem(
            file,
            (0, self.end),
            ProblemKind::DamagedHeader,
            self.detail.clone(),
            Remedy::None,
        )
    }
}

/// What the salvage walk found in an RDB file.
struct RdbAnalysis {
    report: SalvageReport,
    file_len: u64,
    /// Keys stored twice ([`RdbCounts::twice`]).
    twice: Vec<(u64, usize, hozon::types::Blob)>,
}

fn rdb_options() -> reader::Options {
    reader::Options {
        limits: EncodingLimits::default(),
        databases: RDB_MAX_DATABASES,
        skip_expired_before_ms: None,
        // Hash fields whose TTL passed are dropped, as a load would.
        now_ms: hozon::engine::now_ms(),
    }
}

/// One salvage walk (with the duplicate check the writer makes, so the
/// counts are what a salvage writes).
fn rdb_analyse(data: &[u8]) -> Result<(RdbAnalysis, RdbCounts), HeaderProblem> {
    let (report, counts) = rdb_walk(data, &mut |_| Ok(())).map_err(|e| {
        let end = match e.kind {
            ErrorKind::UnsupportedVersion | ErrorKind::NotRdb => 9.min(data.len() as u64),
            _ => data.len() as u64,
        };
        HeaderProblem {
            end,
            detail: format!("RDB header: {e}; the version cannot be known, so nothing is salvaged"),
        }
    })?;
    let analysis = RdbAnalysis {
        report,
        file_len: data.len() as u64,
        twice: counts.twice.clone(),
    };
    Ok((analysis, counts))
}

impl RdbAnalysis {
    fn problems(&self, file: &Path) -> Vec<Problem> {
        let r = &self.report;
        let mut out: Vec<Problem> = r.damaged.iter().map(|d| region_problem(file, d)).collect();
        for (at, db, key) in &self.twice {
            let mut p = problem(
                file,
                (*at, at + 1),
                ProblemKind::DamagedRecord,
                format!(
                    "at offset {at} (db {db}, key '{}'): the key appears twice in the file \
                     (a server refuses the file; salvage keeps the first)",
                    reader::display_key(key)
                ),
                Remedy::Salvage,
            );
            p.keys.add(&db_key(*db, key));
            out.push(p);
        }
        if let (Some(eof), Some(Err(e))) = (r.eof_at, &r.checksum) {
            let detail = if e.kind == ErrorKind::Checksum && !r.damaged.is_empty() {
                format!("{e} (expected: the damaged records above change what it covers)")
            } else if e.kind == ErrorKind::Checksum {
                format!(
                    "{e}: every record decodes, so the damage is inside a value \
                     (salvage rewrites the file with a correct checksum, keeping every value as read)"
                )
            } else {
                format!("the file ends inside the checksum after the EOF opcode: {e}")
            };
            out.push(problem(
                file,
                (eof + 1, (eof + 9).min(self.file_len)),
                if e.kind == ErrorKind::Checksum {
                    ProblemKind::ChecksumMismatch
                } else {
                    ProblemKind::DamagedRecord
                },
                detail,
                Remedy::Salvage,
            ));
        }
        if r.eof_at.is_some() && r.len < self.file_len {
            out.push(problem(
                file,
                (r.len, self.file_len),
                ProblemKind::TrailingBytes,
                format!(
                    "{} bytes after the end of the RDB image (its checksum ends at {})",
                    self.file_len - r.len,
                    r.len
                ),
                Remedy::Salvage,
            ));
        }
        out.sort_by_key(|p| (p.start, p.end));
        out
    }

    /// True when the image itself is intact (only trailing bytes, if any).
    fn image_intact(&self) -> bool {
        self.report.damaged.is_empty()
            && self.twice.is_empty()
            && matches!(self.report.checksum, Some(Ok(_)))
    }
}

fn region_problem(file: &Path, d: &DamagedRegion) -> Problem {
    let mut keys = Keys::default();
    if let Some((db, key)) = &d.error.key {
        keys.add(&db_key(*db, key));
    }
    let detail = if d.resumed {
        format!(
            "the record at {} does not decode ({}); reading resumed at {}",
            d.start, d.error, d.end
        )
    } else if d.error.kind == ErrorKind::Truncated {
        format!(
            "the file ends inside the record at {} ({}); the EOF opcode and checksum are missing",
            d.start, d.error
        )
    } else {
        format!(
            "the record at {} does not decode ({}); nothing after it could be read",
            d.start, d.error
        )
    };
    Problem {
        file: file.to_path_buf(),
        start: d.start,
        end: d.end,
        kind: ProblemKind::DamagedRecord,
        detail,
        commands_or_keys: None,
        keys,
        remedy: Remedy::Salvage,
    }
}

/// A 128-bit fingerprint of (db, key), for finding duplicates without
/// keeping the keys.
fn key_fingerprint(db: usize, key: &[u8]) -> u128 {
    let a = foldhash::fast::FixedState::with_seed(0x6b65_7931).hash_one((db, key));
    let b = foldhash::fast::FixedState::with_seed(0x6b65_7932).hash_one((key, db));
    (u128::from(a) << 64) | u128::from(b)
}

/// What writing (or counting) the salvaged keys gives.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
struct RdbCounts {
    keys: u64,
    duplicates: u64,
    /// Keys a server would refuse as stored twice (not expired, read
    /// before any damage): record offset, db, key. At most
    /// [`TWICE_LISTED`].
    twice: Vec<(u64, usize, hozon::types::Blob)>,
}

/// Keys stored twice listed as problems at most.
const TWICE_LISTED: usize = 100;

/// Walks the original, handing each key not seen before to `keep`.
fn rdb_walk(
    data: &[u8],
    keep: &mut dyn FnMut(LoadedKey) -> Result<(), String>,
) -> Result<(SalvageReport, RdbCounts), reader::RdbError> {
    let mut seen: HashSet<u128> = HashSet::new();
    let mut counts = RdbCounts::default();
    let now = hozon::engine::now_ms();
    // Keys a load keeps (an expired one is dropped before the check).
    let mut kept: HashSet<u128> = HashSet::new();
    let report = reader::salvage(data, &rdb_options(), &mut |at, k| {
        let print = key_fingerprint(k.db, &k.key);
        if k.expire_ms.is_none_or(|e| e >= now)
            && !kept.insert(print)
            && counts.twice.len() < TWICE_LISTED
        {
            counts.twice.push((at, k.db, k.key.clone()));
        }
        if !seen.insert(print) {
            counts.duplicates += 1;
            return Ok(());
        }
        counts.keys += 1;
        keep(k)
    })?;
    // A resynchronisation can read garbage as keys: only a key repeated
    // before any damage is surely in the file twice.
    let first_damage = report.damaged.first().map_or(u64::MAX, |d| d.start);
    counts.twice.retain(|t| t.0 < first_damage);
    Ok((report, counts))
}

fn rdb_plan_salvage(file: &Path, data: &[u8]) -> Result<Plan, Refusal> {
    let (analysis, counts) = match rdb_analyse(data) {
        Ok(a) => a,
        Err(p) => return Err(Refusal(format!("{}: {}", file.display(), p.detail))),
    };
    let problems = analysis.problems(file);
    if problems.is_empty() {
        return Ok(empty_plan(file));
    }
    let mut plan = empty_plan(file);
    plan.dropped = problems
        .iter()
        .filter(|p| p.kind != ProblemKind::ChecksumMismatch)
        .map(|p| Dropped {
            start: p.start,
            end: p.end,
            reason: p.kind.name().to_string(),
            count: p.keys.total,
            keys: p.keys.clone(),
        })
        .collect();
    if analysis.image_intact() {
        plan.notes.push(format!(
            "the RDB image (bytes 0..{}) is intact and kept as it is",
            analysis.report.len
        ));
        plan.content = Some(Content::Pieces(vec![Piece::Copy(0, analysis.report.len)]));
        return Ok(plan);
    }
    let r = &analysis.report;
    plan.notes.push(format!(
        "{} keys are written to a new RDB (version {}, hozon's writer); the original is version {}",
        counts.keys,
        hozon::rdb::WRITE_VERSION,
        r.version
    ));
    if !r.damaged.is_empty() {
        plan.notes.push(
            "how many keys a damaged region held is unknown: an RDB has no index; \
             a key is listed when the damage came after it was read"
                .to_string(),
        );
    }
    if counts.duplicates > 0 {
        plan.notes.push(format!(
            "{} keys read after a resynchronisation repeat earlier keys and are left out \
             (the first occurrence is kept)",
            counts.duplicates
        ));
    }
    if !r.modules_skipped.is_empty() {
        let mut names: Vec<&str> = r.modules_skipped.iter().map(String::as_str).collect();
        names.sort_unstable();
        names.dedup();
        plan.notes.push(format!(
            "{} module values or module AUX records are lost: hozon cannot hold module data ({})",
            r.modules_skipped.len(),
            names.join(", ")
        ));
    }
    if r.empty_skipped > 0 {
        plan.notes.push(format!(
            "{} empty collections are left out (Redis skips them on load too)",
            r.empty_skipped
        ));
    }
    if !r.functions.is_empty() {
        plan.notes.push(format!(
            "{} function libraries read are carried over",
            r.functions.len()
        ));
    }
    if matches!(r.checksum, Some(Ok(Checksum::Unchecked))) {
        plan.notes
            .push("the original has no checksum (rdbchecksum no); the new file has one".into());
    }
    let source = file.to_path_buf();
    let planned = Fingerprint::of(data);
    let functions = r.functions.clone();
    let expected = counts;
    plan.content = Some(Content::Written(Box::new(move |out: &Path| {
        let original = Original::open(&source, planned)?;
        let written = write_rdb(original.bytes(), &functions, out)?;
        if written != expected {
            return Err(format!(
                "wrote {} keys where the plan counted {}",
                written.keys, expected.keys
            ));
        }
        Ok(())
    })));
    Ok(plan)
}

/// Streams every key the salvage walk reads into a new RDB at `out`
/// (fsynced by the writer), the function libraries first.
fn write_rdb(
    data: &[u8],
    functions: &[hozon::types::Blob],
    out: &Path,
) -> Result<RdbCounts, String> {
    let io: Arc<dyn Io> = Arc::new(RealIo);
    let mut file = RdbFile::create(io, out)?;
    let mut records =
        RecordEncoder::with_header(Encoder::default(), hozon::engine::now_ms(), 0, false);
    let mut head = records.take();
    for library in functions {
        head.push(hozon::rdb::opcode::FUNCTION2);
        records.encoder.put_string(&mut head, library);
    }
    file.write(&head)?;
    let (_, counts) = rdb_walk(data, &mut |k| {
        // RESIZEDB is a sizing hint; 0 makes loaders size as they go.
        records.push(k.db, &k.key, &k.value, k.expire_ms, |_| (0, 0));
        match records.take_full() {
            Some(chunk) => file.write(&chunk),
            None => Ok(()),
        }
    })
    .map_err(|e| match e.kind {
        // The writer's own error, as it said it.
        ErrorKind::Rejected => e.message,
        _ => e.to_string(),
    })?;
    file.write(&records.take())?;
    file.finish(true)?;
    Ok(counts)
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;
    use std::path::PathBuf;
    use std::process::{Command, Stdio};
    use std::time::{Duration, Instant};

    use hozon::keyspace::Keyspace;
    use hozon::rand::Rng;
    use hozon::types::list::{End, List};
    use hozon::types::{Blob, Value};

    use super::*;

    type KeySet = BTreeSet<DbKey>;

    /// Far in the future: nothing the tests write expires while they run.
    const LATER_MS: i64 = 4_000_000_000_000;

    /// A dump.hoz of known keys in small blocks, with a list split across
    /// several blocks: the file and, per key, the blocks its records lie in.
    struct HozFixture {
        data: Vec<u8>,
        summary: snapshot::Summary,
        spans: Vec<(DbKey, (u32, u32))>,
    }

    /// (database, key).
    type DbKey = (usize, Vec<u8>);

    fn hoz_fixture(dir: &Path) -> HozFixture {
        let mut ks = Keyspace::new(16);
        for i in 0..300u32 {
            let db = (i % 3) as usize;
            let key = format!("key:{i:04}");
            let value = format!("{i}-{}", "v".repeat(150 + (i as usize * 7) % 90));
            ks.db_mut(db)
                .insert_new(key.as_bytes(), Value::Str(Blob::from(value.as_bytes())));
            if i % 5 == 0 {
                ks.db_mut(db)
                    .set_expire(key.as_bytes(), LATER_MS + i64::from(i));
            }
        }
        let list: List = (0..600u32).map(|i| format!("element-{i:05}")).collect();
        ks.db_mut(1)
            .insert_new(b"big-list", Value::List(Box::new(list)));
        let path = dir.join("fixture.hoz");
        let io: Arc<dyn Io> = Arc::new(RealIo);
        let mut writer =
            FileWriter::create(io, &path, HeaderInfo::new(1_700_000_000_000, 16)).expect("create");
        let mut builder = BlockBuilder::with_block_size(4096);
        for db in 0..ks.db_count() {
            let d = ks.db(db);
            for (key, value) in d.iter() {
                for block in builder.push(db, key, value, d.expire_at(key)) {
                    let buf = writer.write_block(block).expect("write");
                    builder.recycle(buf);
                }
            }
        }
        if let Some(block) = builder.finish() {
            writer.write_block(block).expect("write");
        }
        writer.finish(builder.stats()).expect("finish");
        let data = std::fs::read(&path).expect("read");
        let mut spans = Vec::new();
        let summary = snapshot::scan_keys(&data, 0, &mut |k| {
            spans.push((
                (k.db, k.key.to_vec()),
                (k.block, k.block + k.parts.saturating_sub(1)),
            ));
            std::ops::ControlFlow::Continue(())
        })
        .expect("an intact fixture");
        assert!(
            summary.blocks.len() >= 10,
            "{} blocks",
            summary.blocks.len()
        );
        assert!(spans.iter().any(|(_, (a, b))| b > a), "a split value");
        HozFixture {
            data,
            summary,
            spans,
        }
    }

    impl HozFixture {
        /// Every key none of whose records lies in a block `lost` says.
        fn keys_without(&self, lost: impl Fn(u32) -> bool) -> KeySet {
            self.spans
                .iter()
                .filter(|(_, (a, b))| !(*a..=*b).any(&lost))
                .map(|(k, _)| k.clone())
                .collect()
        }
    }

    fn write_input(dir: &Path, name: &str, data: &[u8]) -> PathBuf {
        let path = dir.join(name);
        std::fs::write(&path, data).expect("write input");
        path
    }

    /// Carries the plan out into `dir/out` and returns the new file.
    fn materialise(plan: Plan, original: &[u8], dir: &Path) -> Vec<u8> {
        let out = dir.join("out");
        match plan.content.expect("a plan with content") {
            Content::Written(write) => write(&out).expect("the plan writes"),
            Content::Pieces(pieces) => {
                let mut bytes = Vec::new();
                hozon::tools::repair::model::write_pieces(&pieces, original, &mut bytes)
                    .expect("pieces");
                std::fs::write(&out, bytes).expect("write");
            }
        }
        std::fs::read(&out).expect("read output")
    }

    fn hoz_keys(data: &[u8]) -> KeySet {
        let loaded = snapshot::load(data, EncodingLimits::default(), 1, 0).expect("loads");
        loaded.keys().map(|k| (k.db, k.key.to_vec())).collect()
    }

    /// Salvages `bad` (as `dir/name`) and returns the keys of the result.
    fn hoz_salvaged(dir: &Path, bad: &[u8]) -> KeySet {
        let path = write_input(dir, "dump.hoz", bad);
        let plan = plan_salvage(&path, bad).expect("salvage is planned");
        hoz_keys(&materialise(plan, bad, dir))
    }

    #[test]
    fn clean_dump_hoz_has_no_problems_and_nothing_to_do() {
        let dir = tempfile::tempdir().expect("tempdir");
        let f = hoz_fixture(dir.path());
        let path = write_input(dir.path(), "dump.hoz", &f.data);
        assert_eq!(check(&path, &f.data), vec![]);
        assert!(plan_fix(&path, &f.data).expect("clean").content.is_none());
        assert!(plan_salvage(&path, &f.data)
            .expect("clean")
            .content
            .is_none());
    }

    #[test]
    fn damaged_block_payload_loses_exactly_that_blocks_keys() {
        let dir = tempfile::tempdir().expect("tempdir");
        let f = hoz_fixture(dir.path());
        // Every block holding a part of the split value (its first, a
        // middle and its last part), and a few others.
        let (first, last) = f
            .spans
            .iter()
            .find(|(_, (a, b))| b > a)
            .map(|(_, span)| *span)
            .expect("a split value");
        let mut victims = vec![0usize, 3, f.summary.blocks.len() - 1];
        victims.extend((first..=last).map(|b| b as usize));
        for k in victims {
            let b = f.summary.blocks[k];
            let mut bad = f.data.clone();
            bad[(b.offset + 40 + b.stored_len / 2) as usize] ^= 0x21;
            let path = write_input(dir.path(), "dump.hoz", &bad);
            let problems = check(&path, &bad);
            assert_eq!(problems.len(), 1, "{problems:?}");
            let p = &problems[0];
            assert_eq!(p.kind, ProblemKind::DamagedBlock);
            assert_eq!((p.start, p.end), (b.offset, b.end()));
            assert_eq!(p.remedy, Remedy::Salvage);
            assert_eq!(p.commands_or_keys, Some(u64::from(b.records)));
            assert!(p.detail.contains("payload checksum"), "{}", p.detail);
            let refusal = plan_fix(&path, &bad).expect_err("fix refuses");
            assert!(refusal.0.contains("salvage"), "{}", refusal.0);
            let plan = plan_salvage(&path, &bad).expect("planned");
            assert_eq!(plan.dropped.len(), 1);
            assert_eq!(plan.dropped[0].count, u64::from(b.records));
            let got = hoz_keys(&materialise(plan, &bad, dir.path()));
            assert_eq!(got, f.keys_without(|i| i == k as u32), "block {k}");
        }
    }

    #[test]
    fn damaged_block_header_and_listed_keys() {
        let dir = tempfile::tempdir().expect("tempdir");
        let f = hoz_fixture(dir.path());
        let k = 4;
        let b = f.summary.blocks[k];
        let mut bad = f.data.clone();
        bad[b.offset as usize + 13] ^= 0x01; // the record count
        let path = write_input(dir.path(), "dump.hoz", &bad);
        let problems = check(&path, &bad);
        let p = problems
            .iter()
            .find(|p| p.start == b.offset)
            .expect("the damaged block");
        assert_eq!(p.kind, ProblemKind::DamagedBlock);
        // The payload is intact: its keys are readable and listed.
        let in_block: Vec<Vec<u8>> = f
            .spans
            .iter()
            .filter(|(_, (a, z))| (*a..=*z).contains(&(k as u32)))
            .map(|((db, key), _)| db_key(*db, key))
            .collect();
        assert!(!in_block.is_empty());
        for key in in_block.iter().take(MAX_LISTED) {
            assert!(p.keys.listed.contains(key), "{key:?} not in {:?}", p.keys);
        }
        assert_eq!(
            hoz_salvaged(dir.path(), &bad),
            f.keys_without(|i| i == k as u32)
        );
    }

    const MAX_LISTED: usize = hozon::tools::repair::model::MAX_LISTED_KEYS;

    #[test]
    fn damaged_footer_or_trailer_salvage_walks_the_blocks() {
        let dir = tempfile::tempdir().expect("tempdir");
        let f = hoz_fixture(dir.path());
        let all = f.keys_without(|_| false);
        for at in [f.summary.footer_offset as usize + 6, f.data.len() - 20] {
            let mut bad = f.data.clone();
            bad[at] ^= 0x08;
            let path = write_input(dir.path(), "dump.hoz", &bad);
            let problems = check(&path, &bad);
            assert_eq!(problems.len(), 1, "{problems:?}");
            assert_eq!(problems[0].kind, ProblemKind::DamagedFooter);
            assert_eq!(hoz_salvaged(dir.path(), &bad), all);
        }
        // The header too: every block is still found.
        let mut bad = f.data.clone();
        bad[30] ^= 0x40;
        let problems = check(&write_input(dir.path(), "dump.hoz", &bad), &bad);
        assert!(problems
            .iter()
            .any(|p| p.kind == ProblemKind::DamagedHeader));
        assert_eq!(hoz_salvaged(dir.path(), &bad), all);
    }

    #[test]
    fn truncated_dump_hoz_keeps_the_complete_blocks() {
        let dir = tempfile::tempdir().expect("tempdir");
        let f = hoz_fixture(dir.path());
        let k = 6;
        let b = f.summary.blocks[k];
        let cut = (b.offset + 40 + b.stored_len / 3) as usize;
        let bad = &f.data[..cut];
        let path = write_input(dir.path(), "dump.hoz", bad);
        let problems = check(&path, bad);
        assert!(problems
            .iter()
            .any(|p| p.kind == ProblemKind::DamagedFooter));
        let p = problems
            .iter()
            .find(|p| p.kind == ProblemKind::DamagedBlock)
            .expect("the cut block");
        assert_eq!((p.start, p.end), (b.offset, cut as u64));
        assert_eq!(
            hoz_salvaged(dir.path(), bad),
            f.keys_without(|i| i >= k as u32)
        );
    }

    #[test]
    fn trailing_bytes_after_a_dump_hoz_are_cut() {
        let dir = tempfile::tempdir().expect("tempdir");
        let f = hoz_fixture(dir.path());
        let mut bad = f.data.clone();
        bad.extend_from_slice(b"some trailing garbage");
        let path = write_input(dir.path(), "dump.hoz", &bad);
        let problems = check(&path, &bad);
        assert_eq!(problems.len(), 1, "{problems:?}");
        assert_eq!(problems[0].kind, ProblemKind::TrailingBytes);
        assert_eq!(
            (problems[0].start, problems[0].end),
            (f.data.len() as u64, bad.len() as u64)
        );
        let plan = plan_salvage(&path, &bad).expect("planned");
        assert!(matches!(plan.content, Some(Content::Pieces(_))));
        assert_eq!(materialise(plan, &bad, dir.path()), f.data);
    }

    #[test]
    fn unknown_format_version_cannot_be_repaired() {
        let dir = tempfile::tempdir().expect("tempdir");
        let f = hoz_fixture(dir.path());
        let mut bad = f.data.clone();
        bad[8..10].copy_from_slice(&7u16.to_le_bytes());
        let header_len = u32::from_le_bytes([bad[16], bad[17], bad[18], bad[19]]) as usize;
        let crc = crc32fast::hash(&bad[..header_len - 4]);
        bad[header_len - 4..header_len].copy_from_slice(&crc.to_le_bytes());
        let path = write_input(dir.path(), "dump.hoz", &bad);
        let problems = check(&path, &bad);
        assert!(!problems.is_empty());
        assert!(
            problems.iter().any(|p| p.remedy == Remedy::None
                && p.kind == ProblemKind::DamagedHeader
                && p.detail.contains("7.")),
            "{problems:?}"
        );
        assert!(plan_salvage(&path, &bad).is_err());
        assert!(plan_fix(&path, &bad).is_err());
    }

    #[test]
    fn salvage_refuses_to_run_on_a_changed_original() {
        let dir = tempfile::tempdir().expect("tempdir");
        let f = hoz_fixture(dir.path());
        let mut bad = f.data.clone();
        bad[f.summary.footer_offset as usize + 6] ^= 0x08;
        let path = write_input(dir.path(), "dump.hoz", &bad);
        let plan = plan_salvage(&path, &bad).expect("planned");
        write_input(dir.path(), "dump.hoz", &f.data);
        let Some(Content::Written(write)) = plan.content else {
            panic!("a written plan");
        };
        let err = write(&dir.path().join("out")).expect_err("changed");
        assert!(err.contains("changed"), "{err}");
    }

    #[test]
    fn fuzzed_dump_hoz_never_panics_and_salvage_output_loads() {
        let dir = tempfile::tempdir().expect("tempdir");
        let f = hoz_fixture(dir.path());
        let all = f.keys_without(|_| false);
        let mut rng = Rng::with_seed(11);
        for round in 0..40 {
            let mut bad = f.data.clone();
            for _ in 0..1 + round % 4 {
                let at = (rng.next_u64() as usize) % bad.len();
                bad[at] ^= 1 << (rng.next_u64() % 8);
            }
            if round % 3 == 0 {
                bad.truncate((rng.next_u64() as usize) % bad.len());
            }
            let path = write_input(dir.path(), "dump.hoz", &bad);
            let problems = check(&path, &bad);
            if let Ok(plan) = plan_salvage(&path, &bad) {
                if plan.content.is_some() {
                    let got = hoz_keys(&materialise(plan, &bad, dir.path()));
                    assert!(got.is_subset(&all), "round {round}");
                } else {
                    assert!(problems.is_empty());
                }
            }
        }
    }

    // -----------------------------------------------------------------------
    // RDB.

    fn rdb_keys(data: &[u8]) -> KeySet {
        let options = reader::Options {
            limits: EncodingLimits::default(),
            databases: 16,
            skip_expired_before_ms: None,
            now_ms: 0,
        };
        let mut keys = KeySet::new();
        reader::load(data, &options, &mut |k| {
            keys.insert((k.db, k.key.to_vec()));
            Ok(())
        })
        .expect("loads");
        keys
    }

    /// Offsets and keys of every key record.
    fn rdb_records(data: &[u8]) -> Vec<(u64, u8, DbKey)> {
        let mut out = Vec::new();
        reader::scan_keys(data, &mut |k| {
            out.push((k.offset, k.type_byte, (k.db, k.key.to_vec())));
            std::ops::ControlFlow::Continue(())
        })
        .expect("an intact file");
        out
    }

    /// A redis-server on a unix socket in `dir`, stopped when dropped.
    struct Redis {
        child: std::process::Child,
        socket: PathBuf,
    }

    impl Redis {
        fn start(dir: &Path, dbfilename: &str, extra: &[&str]) -> Redis {
            let socket = dir.join("redis.sock");
            let mut args: Vec<String> = [
                "--port",
                "0",
                "--unixsocket",
                socket.to_str().expect("utf-8 path"),
                "--dir",
                dir.to_str().expect("utf-8 path"),
                "--dbfilename",
                dbfilename,
                "--save",
                "",
                "--appendonly",
                "no",
            ]
            .iter()
            .map(|s| s.to_string())
            .collect();
            args.extend(extra.iter().map(|s| s.to_string()));
            let child = Command::new("redis-server")
                .args(&args)
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn()
                .expect("redis-server runs");
            let redis = Redis { child, socket };
            let deadline = Instant::now() + Duration::from_secs(10);
            while redis.cli(&["PING"]) != "PONG" {
                assert!(Instant::now() < deadline, "redis-server did not start");
                std::thread::sleep(Duration::from_millis(20));
            }
            redis
        }

        fn cli(&self, args: &[&str]) -> String {
            let out = Command::new("redis-cli")
                .arg("-s")
                .arg(&self.socket)
                .args(args)
                .output()
                .expect("redis-cli runs");
            String::from_utf8_lossy(&out.stdout).trim().to_string()
        }
    }

    impl Drop for Redis {
        fn drop(&mut self) {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }

    /// An RDB written by redis-server: strings, and small hashes (listpacks,
    /// uncompressed so a flipped byte lands where the test puts it).
    fn redis_fixture(dir: &Path) -> Vec<u8> {
        let redis = Redis::start(
            dir,
            "source.rdb",
            &["--enable-debug-command", "yes", "--rdbcompression", "no"],
        );
        assert_eq!(redis.cli(&["DEBUG", "POPULATE", "300", "key", "20"]), "OK");
        for i in 0..60 {
            let key = format!("hash:{i}");
            redis.cli(&["HSET", &key, "f1", &format!("a{i}"), "f2", "bbbbbbbb"]);
        }
        for i in 0..20 {
            let key = format!("list:{i}");
            redis.cli(&["RPUSH", &key, "x", "y", &i.to_string()]);
        }
        redis.cli(&["SELECT", "2"]);
        redis.cli(&["DEBUG", "POPULATE", "50", "other", "10"]);
        redis.cli(&["-n", "2", "PEXPIREAT", "other:1", &LATER_MS.to_string()]);
        assert_eq!(redis.cli(&["SAVE"]), "OK");
        std::fs::read(dir.join("source.rdb")).expect("the saved RDB")
    }

    /// The output must pass redis-check-rdb and load into a real Redis with
    /// `keys` keys.
    fn redis_accepts(dir: &Path, data: &[u8], keys: usize) {
        let check_dir = dir.join("check");
        std::fs::create_dir_all(&check_dir).expect("mkdir");
        let path = check_dir.join("salvaged.rdb");
        std::fs::write(&path, data).expect("write");
        let status = Command::new("redis-check-rdb")
            .arg(&path)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .expect("redis-check-rdb runs");
        assert!(status.success(), "redis-check-rdb refuses the output");
        let redis = Redis::start(&check_dir, "salvaged.rdb", &[]);
        let dbsize: usize = ["0", "2"]
            .iter()
            .map(|db| {
                redis
                    .cli(&["-n", db, "DBSIZE"])
                    .parse::<usize>()
                    .unwrap_or(0)
            })
            .sum();
        assert_eq!(dbsize, keys);
    }

    #[test]
    fn rdb_flipped_value_byte_loses_only_that_record() {
        let dir = tempfile::tempdir().expect("tempdir");
        let data = redis_fixture(dir.path());
        let records = rdb_records(&data);
        let all: KeySet = records.iter().map(|(_, _, k)| k.clone()).collect();
        assert_eq!(all.len(), 430);
        // A hash record in the middle of the file.
        let hashes: Vec<_> = records
            .iter()
            .enumerate()
            .filter(|(_, (_, t, _))| *t == hozon::rdb::kind::HASH_LISTPACK)
            .collect();
        let (index, (offset, _, (db, key))) = hashes[hashes.len() / 2];
        // Type byte, key length and key, listpack string length, then the
        // listpack's total-bytes field: flip its low byte.
        let at = *offset as usize + 1 + 1 + key.len() + 1;
        let mut bad = data.clone();
        bad[at] ^= 0x55;
        let path = write_input(dir.path(), "dump.rdb", &bad);
        let problems = check(&path, &bad);
        let p = problems
            .iter()
            .find(|p| p.kind == ProblemKind::DamagedRecord)
            .expect("a damaged record");
        assert_eq!(p.start, *offset);
        assert_eq!(p.end, records[index + 1].0, "resumed at the next record");
        assert_eq!(p.keys.listed, vec![db_key(*db, key)]);
        assert!(problems
            .iter()
            .any(|p| p.kind == ProblemKind::ChecksumMismatch));
        assert!(plan_fix(&path, &bad).is_err());
        let plan = plan_salvage(&path, &bad).expect("planned");
        let out = materialise(plan, &bad, dir.path());
        let mut want = all.clone();
        want.remove(&(*db, key.clone()));
        assert_eq!(rdb_keys(&out), want);
        redis_accepts(dir.path(), &out, want.len());
    }

    #[test]
    fn rdb_truncated_keeps_the_records_before_the_cut() {
        let dir = tempfile::tempdir().expect("tempdir");
        let data = redis_fixture(dir.path());
        let records = rdb_records(&data);
        let cut_record = records.len() * 2 / 3;
        let cut = records[cut_record].0 as usize + 3;
        let bad = &data[..cut];
        let path = write_input(dir.path(), "dump.rdb", bad);
        let problems = check(&path, bad);
        assert_eq!(problems.len(), 1, "{problems:?}");
        assert_eq!(problems[0].start, records[cut_record].0);
        assert_eq!(problems[0].end, cut as u64);
        let out = materialise(plan_salvage(&path, bad).expect("planned"), bad, dir.path());
        let want: KeySet = records[..cut_record]
            .iter()
            .map(|(_, _, k)| k.clone())
            .collect();
        assert_eq!(rdb_keys(&out), want);
        redis_accepts(dir.path(), &out, want.len());
    }

    #[test]
    fn rdb_bad_checksum_and_trailing_bytes() {
        let dir = tempfile::tempdir().expect("tempdir");
        let data = redis_fixture(dir.path());
        let all: KeySet = rdb_records(&data).into_iter().map(|(_, _, k)| k).collect();
        let mut bad = data.clone();
        let n = bad.len();
        bad[n - 3] ^= 0x10;
        let path = write_input(dir.path(), "dump.rdb", &bad);
        let problems = check(&path, &bad);
        assert_eq!(problems.len(), 1, "{problems:?}");
        assert_eq!(problems[0].kind, ProblemKind::ChecksumMismatch);
        assert_eq!(
            (problems[0].start, problems[0].end),
            (n as u64 - 8, n as u64)
        );
        let out = materialise(
            plan_salvage(&path, &bad).expect("planned"),
            &bad,
            dir.path(),
        );
        assert_eq!(rdb_keys(&out), all);
        redis_accepts(dir.path(), &out, all.len());

        let mut longer = data.clone();
        longer.extend_from_slice(b"\r\ntrailing");
        let path = write_input(dir.path(), "dump.rdb", &longer);
        let problems = check(&path, &longer);
        assert_eq!(problems.len(), 1, "{problems:?}");
        assert_eq!(problems[0].kind, ProblemKind::TrailingBytes);
        assert_eq!(problems[0].start, data.len() as u64);
        let plan = plan_salvage(&path, &longer).expect("planned");
        assert_eq!(materialise(plan, &longer, dir.path()), data);
    }

    #[test]
    fn clean_rdb_and_unsupported_version() {
        let dir = tempfile::tempdir().expect("tempdir");
        let data = hozon_rdb();
        let path = write_input(dir.path(), "dump.rdb", &data);
        assert_eq!(check(&path, &data), vec![]);
        assert!(plan_salvage(&path, &data).expect("clean").content.is_none());
        assert!(plan_fix(&path, &data).expect("clean").content.is_none());
        let mut bad = data.clone();
        bad[5..9].copy_from_slice(b"0099");
        let path = write_input(dir.path(), "dump.rdb", &bad);
        let problems = check(&path, &bad);
        assert_eq!(problems.len(), 1);
        assert_eq!(problems[0].remedy, Remedy::None);
        assert!(plan_salvage(&path, &bad).is_err());
    }

    /// A small RDB written by hozon's writer: strings, lists and hashes.
    fn hozon_rdb() -> Vec<u8> {
        let limits = EncodingLimits::default();
        let mut keys: Vec<(usize, Blob, Value, Option<i64>)> = Vec::new();
        for i in 0..120u32 {
            let key = Blob::from(format!("k{i}").as_bytes());
            let value = match i % 3 {
                0 => Value::Str(Blob::from(format!("value {i}").as_bytes())),
                1 => {
                    let mut l = List::new();
                    for j in 0..4 {
                        l.push(End::Tail, format!("e{i}.{j}").as_bytes());
                    }
                    Value::List(Box::new(l))
                }
                _ => {
                    let mut h = hozon::types::hash::Hash::new();
                    h.set(b"f", Blob::from(format!("{i}").as_bytes()), &limits);
                    h.set(b"g", Blob::from(&b"x"[..]), &limits);
                    Value::Hash(Box::new(h))
                }
            };
            let expire = (i % 7 == 0).then_some(LATER_MS);
            keys.push(((i / 60) as usize, key, value, expire));
        }
        hozon::rdb::writer::encode_file(
            &Encoder::default(),
            1_700_000_000_000,
            keys.iter().map(|(db, k, v, e)| (*db, k, v, *e)),
        )
    }

    #[test]
    fn fuzzed_rdb_never_panics_and_salvage_output_loads() {
        let dir = tempfile::tempdir().expect("tempdir");
        let data = hozon_rdb();
        let all: KeySet = rdb_records(&data).into_iter().map(|(_, _, k)| k).collect();
        let mut rng = Rng::with_seed(5);
        let mut salvaged = 0;
        for round in 0..150 {
            let mut bad = data.clone();
            for _ in 0..1 + round % 3 {
                let at = 9 + (rng.next_u64() as usize) % (bad.len() - 9);
                bad[at] = rng.next_u64() as u8;
            }
            if round % 4 == 0 {
                bad.truncate(9 + (rng.next_u64() as usize) % (bad.len() - 9));
            }
            let path = write_input(dir.path(), "dump.rdb", &bad);
            let problems = check(&path, &bad);
            match plan_salvage(&path, &bad) {
                Ok(plan) if plan.content.is_some() => {
                    let out = materialise(plan, &bad, dir.path());
                    let got = rdb_keys(&out);
                    // A resynchronisation can misread a damaged key's name,
                    // never invent more keys than a record can hold.
                    assert!(got.len() <= all.len() + problems.len(), "round {round}");
                    salvaged += 1;
                }
                Ok(_) => assert!(problems.is_empty(), "round {round}"),
                Err(_) => {}
            }
        }
        assert!(salvaged > 100);
    }
}
