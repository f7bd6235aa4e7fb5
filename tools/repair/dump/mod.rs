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
use hozon::persist::rdb_file::RdbFile;
use hozon::persist::snapshot::{
    self, BlockBuilder, Damage, FileWriter, HeaderInfo, LoadedKey, ReadOptions, SnapshotError,
};
use hozon::rdb::reader::{self, Checksum, DamagedRegion, ErrorKind, SalvageReport};
use hozon::rdb::writer::Encoder;
use hozon::rdb::writer::RecordEncoder;
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

/// How the repair tool reads a dump.hoz: every key kept (expired ones
/// too), default limits, one decoding thread per core besides the
/// calling one (at most 8), none on a single core.
fn read_options() -> ReadOptions {
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get().min(8));
    ReadOptions {
        workers: if cores > 1 { cores } else { 0 },
        ..ReadOptions::default()
    }
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
    let salvaged =
        snapshot::salvage_streaming(image, &read_options(), |block| keys += block.len() as u64);
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
        // Keys were lost: the data no longer stands where a recorded
        // replication position says, so the new file records none (a
        // replica resyncs in full rather than continuing from it).
        position: None,
        // The libraries are in the footer: kept when it is intact.
        functions: analysis
            .summary
            .as_ref()
            .map_or_else(Vec::new, |s| s.functions.clone()),
        // Access records (LRU idle times, LFU counters) are not copied:
        // the keys start fresh, as after loading a file without them.
        key_access: Default::default(),
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
    snapshot::salvage_streaming(image, &read_options(), |keys: Vec<LoadedKey>| {
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
    });
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
mod tests;
