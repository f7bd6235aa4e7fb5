//! AOF analysis and repair plans (docs/repair.md): every damaged region of
//! one append-only file (hozon's checksummed batches, Redis 6 plain RESP,
//! Redis 7 RESP with `#TS:` lines, after a dump.hoz or RDB preamble), and
//! the plans `fix`, `salvage` and `truncate --before` carry out.
//!
//! One pass ([`analyse`]) splits the file into units in file order: the
//! preamble, header lines, verified batches, plain commands, `#` lines and
//! damaged regions. After a damaged region the reader resynchronises
//! (hozon: the next batch that verifies; Redis: the next line start
//! holding a complete, known command) and goes on, so every problem is
//! found. The plans are then decisions over that list.

use std::ops::Range;
use std::path::Path;

use hozon::persist::aof::{self, CommandAt};

use crate::model::{Content, Dropped, Keys, Piece, Plan, Problem, ProblemKind, Refusal, Remedy};

/// Longest `#` line the loader reads (Redis reads 1024).
const LINE_MAX_BYTES: usize = 1024;

// ---------------------------------------------------------------------------
// The public API.

/// Every problem in the AOF `data` (the whole file: may start with a
/// dump.hoz or RDB preamble), named `file`, in file order.
pub fn check(file: &Path, data: &[u8]) -> Vec<Problem> {
    let analysis = match fast_walk(data) {
        FastWalk::Clean => return Vec::new(),
        FastWalk::AnalyseFrom(restart) => analyse_from(data, false, restart),
    };
    problems_of(&analysis, file)
}

/// The problems of an analysis, in file order.
fn problems_of(analysis: &Analysis, file: &Path) -> Vec<Problem> {
    let mut problems: Vec<Problem> = analysis
        .preamble_damage
        .iter()
        .chain(analysis.regions.iter())
        .map(|r| r.problem(file))
        .collect();
    problems.sort_by_key(|p| (p.start, p.end));
    problems
}

/// `fix`: cuts a torn tail (and an unfinished MULTI at the end). Ok with no
/// content when there is nothing to cut; a refusal naming `salvage` when
/// there is damage before the tail.
pub fn plan_fix(file: &Path, data: &[u8]) -> Result<Plan, Refusal> {
    let analysis = analyse(data, true);
    if let Some(p) = &analysis.preamble_damage {
        return Err(preamble_refusal(file, p));
    }
    if let Some(r) = analysis.regions.iter().find(|r| r.remedy != Remedy::Fix) {
        return Err(Refusal(format!(
            "{}: {} at bytes {}..{} is damage before the tail ({}); `fix` only cuts a torn tail. \
             Run `hozon-repair salvage {}` to drop the damaged regions and keep the rest.",
            file.display(),
            r.kind.name(),
            r.start,
            r.end,
            r.detail,
            file.display()
        )));
    }
    let mut plan = empty_plan(file);
    // Every region left runs to the end of the file: there is at most one.
    if let Some(r) = analysis.regions.iter().min_by_key(|r| r.start) {
        plan.content = Some(Content::Pieces(vec![Piece::Copy(0, r.start as u64)]));
        plan.dropped.push(r.dropped());
        plan.notes.push(format!(
            "the file is cut at byte {} (the end of the last intact {})",
            r.start,
            if analysis.checksummed_at(r.start) {
                "batch"
            } else {
                "command"
            }
        ));
    }
    Ok(plan)
}

/// `salvage`: keeps every intact byte and drops only the damaged regions
/// (docs/repair.md): a `SELECT` is put back after a gap that may have
/// changed the database (in a hozon section as a batch of its own), and a
/// region inside `MULTI … EXEC` is refused unless
/// `allow_partial_transactions`, which keeps the transaction's readable
/// commands.
pub fn plan_salvage(
    file: &Path,
    data: &[u8],
    allow_partial_transactions: bool,
) -> Result<Plan, Refusal> {
    let analysis = analyse(data, true);
    if let Some(p) = &analysis.preamble_damage {
        return Err(preamble_refusal(file, p));
    }
    if let Some(r) = analysis.regions.iter().find(|r| r.remedy == Remedy::None) {
        return Err(Refusal(format!(
            "{}: {} at bytes {}..{} cannot be salvaged: {}",
            file.display(),
            r.kind.name(),
            r.start,
            r.end,
            r.detail
        )));
    }
    if !allow_partial_transactions {
        if let Some((r, (multi, exec_end))) =
            analysis.regions.iter().find_map(|r| r.txn.map(|t| (r, t)))
        {
            return Err(Refusal(format!(
                "{}: the damaged region at bytes {}..{} is inside the transaction MULTI at byte {multi} \
                 (EXEC ending at byte {exec_end}); dropping it would apply that transaction in part. \
                 Rerun with --allow-partial-transactions to keep the transaction's readable commands.",
                file.display(),
                r.start,
                r.end
            )));
        }
    }
    let mut plan = empty_plan(file);
    if analysis.regions.is_empty() {
        return Ok(plan);
    }
    let mut out = Output::default();
    // The database in force in the original after what was read so far,
    // and in the salvaged file after what was written so far.
    let mut db_original = 0usize;
    let mut db_written = 0usize;
    let mut checksummed = false;
    let mut last_ts_ms: Option<i64> = None;
    for unit in &analysis.units {
        match unit {
            Unit::Copy { range, header } => {
                out.copy(range.clone());
                checksummed |= *header;
            }
            Unit::Line { range, .. } => out.copy(range.clone()),
            Unit::Plain { cmd, .. } => {
                if db_original != db_written && !cmd.is_select() {
                    out.bytes(select_bytes(db_original, checksummed, last_ts_ms));
                    plan.notes.push(select_note(db_original, cmd.start));
                    db_written = db_original;
                }
                if let Some(db) = cmd.selected_db() {
                    db_original = db;
                    db_written = db;
                }
                out.copy(cmd.start..cmd.end);
            }
            Unit::Batch(batch) => {
                if db_original != db_written && !batch.starts_with_select && batch.commands > 0 {
                    let ts_ms = last_ts_ms.unwrap_or(batch.ts_ms);
                    out.bytes(select_bytes(db_original, true, Some(ts_ms)));
                    plan.notes.push(select_note(db_original, batch.range.start));
                    db_written = db_original;
                }
                if let Some(db) = batch.last_select {
                    db_original = db;
                    db_written = db;
                }
                if batch.bad == 0 {
                    out.copy(batch.range.clone());
                } else {
                    let mut body = Vec::new();
                    for c in &batch.kept {
                        body.extend_from_slice(&data[c.clone()]);
                    }
                    let annotation = aof::annotation_line(&body, batch.ts_ms);
                    body.extend_from_slice(&annotation);
                    out.bytes(body);
                    plan.notes.push(format!(
                        "the batch at bytes {}..{} is written anew without its {} unknown command(s) \
                         (same timestamp, new annotation)",
                        batch.range.start, batch.range.end, batch.bad
                    ));
                }
                last_ts_ms = Some(batch.ts_ms);
            }
            Unit::Region(i) => {
                let r = &analysis.regions[*i];
                if let Some(bytes) = &r.replacement {
                    out.bytes(bytes.clone());
                    checksummed = true;
                }
                if let Some(db) = r.last_select {
                    db_original = db;
                }
            }
        }
    }
    for r in &analysis.regions {
        plan.dropped.push(r.dropped());
        if r.replacement.is_some() {
            plan.notes.push(format!(
                "the damaged header line at bytes {}..{} is replaced by a correct one",
                r.start, r.end
            ));
        }
    }
    let mut partial_txns: Vec<(usize, usize)> = Vec::new();
    for t in analysis.regions.iter().filter_map(|r| r.txn) {
        if !partial_txns.contains(&t) {
            partial_txns.push(t);
        }
    }
    for (multi, exec_end) in partial_txns {
        plan.notes.push(format!(
            "the transaction MULTI at byte {multi} (EXEC ending at byte {exec_end}) is kept in part: \
             its readable commands are applied, the damaged region(s) inside it are dropped"
        ));
    }
    plan.content = Some(Content::Pieces(out.pieces));
    Ok(plan)
}

/// `truncate --before`: keeps what was written before `before_ms` (hozon
/// batch annotations; Redis `#TS:` lines, in seconds). The preamble is
/// always kept. Refused for a file without timestamps, and when damage
/// lies before the cut (salvage first).
pub fn plan_truncate(file: &Path, data: &[u8], before_ms: i64) -> Result<Plan, Refusal> {
    let analysis = analyse(data, true);
    if let Some(p) = &analysis.preamble_damage {
        return Err(preamble_refusal(file, p));
    }
    let mut any_ts = false;
    let mut cut: Option<usize> = None;
    // Damaged regions since the last readable unit: when the cut follows
    // them directly they go with it (their time is unknown, their
    // commands lost anyway); damage with readable data after it, before
    // the cut, needs salvage first.
    let mut run: Option<(usize, bool)> = None;
    let mut blocking: Option<&Region> = None;
    for unit in &analysis.units {
        let (at, ts_ms) = match unit {
            Unit::Region(i) => {
                let r = &analysis.regions[*i];
                let (start, none) = run.unwrap_or((r.start, false));
                run = Some((start, none || r.remedy == Remedy::None));
                if blocking.is_none() && run.is_some_and(|(_, none)| none) {
                    blocking = Some(r);
                }
                continue;
            }
            Unit::Batch(b) => (b.range.start, Some(b.ts_ms)),
            // A time line inside a transaction: the transaction was not
            // complete before it, so the cut goes before its MULTI.
            Unit::Line { range, ts_ms, txn } => (txn.unwrap_or(range.start), *ts_ms),
            Unit::Plain { cmd } => (cmd.start, None),
            Unit::Copy { range, .. } => (range.start, None),
        };
        if let Some(ts_ms) = ts_ms {
            any_ts = true;
            if ts_ms >= before_ms {
                cut = Some(run.map_or(at, |(start, _)| start));
                break;
            }
        }
        if run.take().is_some() && blocking.is_none() {
            blocking = analysis.regions.iter().find(|r| r.start < at);
        }
        if let Unit::Batch(b) = unit {
            if b.bad > 0 && blocking.is_none() {
                blocking = analysis
                    .regions
                    .iter()
                    .find(|r| r.start >= b.range.start && r.end <= b.range.end);
            }
        }
    }
    if !any_ts {
        return Err(Refusal(format!(
            "{}: the file has no timestamps (no hozon batch annotations and no `#TS:` lines): \
             it cannot be cut by time",
            file.display()
        )));
    }
    let cut = cut.unwrap_or_else(|| run.map_or(data.len(), |(start, _)| start));
    if let Some(r) = blocking.filter(|r| r.start < cut || r.remedy == Remedy::None) {
        return Err(Refusal(format!(
            "{}: {} at bytes {}..{} lies before the cut at byte {cut}; run `hozon-repair salvage {}` \
             first, then truncate its result",
            file.display(),
            r.kind.name(),
            r.start,
            r.end,
            file.display()
        )));
    }
    let damaged_in_cut = analysis.regions.iter().any(|r| r.start >= cut);
    let reason = if damaged_in_cut {
        "truncate (with the damaged regions after the cut)".to_string()
    } else {
        "truncate".to_string()
    };
    let mut plan = empty_plan(file);
    if cut >= data.len() {
        plan.notes
            .push("nothing in the file was written at or after that time".to_string());
        return Ok(plan);
    }
    let (count, keys) = commands_and_keys(data, cut..data.len());
    plan.dropped.push(Dropped {
        start: cut as u64,
        end: data.len() as u64,
        reason,
        count,
        keys,
    });
    plan.notes.push(format!(
        "the file is cut at byte {cut}, before the first {} written at or after {before_ms} ms",
        if analysis.checksummed_at(cut) {
            "batch"
        } else {
            "`#TS:` line"
        }
    ));
    plan.content = Some(Content::Pieces(vec![Piece::Copy(0, cut as u64)]));
    Ok(plan)
}

fn empty_plan(file: &Path) -> Plan {
    Plan {
        file: file.to_path_buf(),
        content: None,
        dropped: Vec::new(),
        notes: Vec::new(),
    }
}

fn preamble_refusal(file: &Path, p: &Region) -> Refusal {
    Refusal(format!(
        "{}: the preamble (bytes {}..{}) is damaged: {}. Repairing the image is the dump repair's \
         work; this AOF repair keeps a preamble as it is and will not write a file the engine refuses.",
        file.display(),
        p.start,
        p.end,
        p.detail
    ))
}

fn select_note(db: usize, at: usize) -> String {
    format!(
        "SELECT {db} is put back before byte {at}: a dropped region selected that database \
         (the last SELECT readable inside it)"
    )
}

/// The bytes of `SELECT db`: a batch of its own in a hozon section
/// (timestamp of the batch before), a bare command in a plain one.
fn select_bytes(db: usize, checksummed: bool, ts_ms: Option<i64>) -> Vec<u8> {
    let mut out = Vec::new();
    aof::encode_command(&mut out, &[b"SELECT".to_vec(), db.to_string().into_bytes()]);
    if checksummed {
        let line = aof::annotation_line(&out, ts_ms.unwrap_or(0));
        out.extend_from_slice(&line);
    }
    out
}

/// Pieces being assembled: adjacent copies are merged.
#[derive(Default)]
struct Output {
    pieces: Vec<Piece>,
}

impl Output {
    fn copy(&mut self, range: Range<usize>) {
        if range.is_empty() {
            return;
        }
        if let Some(Piece::Copy(_, end)) = self.pieces.last_mut() {
            if *end == range.start as u64 {
                *end = range.end as u64;
                return;
            }
        }
        self.pieces
            .push(Piece::Copy(range.start as u64, range.end as u64));
    }

    fn bytes(&mut self, bytes: Vec<u8>) {
        self.pieces.push(Piece::Bytes(bytes));
    }
}

// ---------------------------------------------------------------------------
// Analysis.

/// One command: its bytes, its name, and what the analysis needs of it
/// (no per-command allocation: a large file holds millions).
#[derive(Debug, Clone)]
struct Cmd {
    start: usize,
    end: usize,
    name: Range<usize>,
    /// The database a SELECT selects.
    select: Option<usize>,
    /// Why the engine would refuse it, if it would.
    bad: Option<String>,
}

impl Cmd {
    fn new(data: &[u8], start: usize, end: usize, args: &[Range<usize>]) -> Cmd {
        let name = &data[args[0].clone()];
        let arg1 = args.get(1).map(|r| &data[r.clone()]);
        let select = match arg1 {
            Some(db) if name.eq_ignore_ascii_case(b"select") && args.len() == 2 => {
                std::str::from_utf8(db).ok().and_then(|t| t.parse().ok())
            }
            _ => None,
        };
        Cmd {
            start,
            end,
            name: args[0].clone(),
            select,
            bad: command_valid(name, args.len(), arg1).err(),
        }
    }

    fn is(&self, data: &[u8], name: &str) -> bool {
        data[self.name.clone()].eq_ignore_ascii_case(name.as_bytes())
    }

    fn is_select(&self) -> bool {
        self.select.is_some()
    }

    fn selected_db(&self) -> Option<usize> {
        self.select
    }
}

/// A verified hozon batch.
#[derive(Debug)]
struct Batch {
    /// Body and annotation line.
    range: Range<usize>,
    ts_ms: i64,
    /// Its commands the engine would refuse (each its own region).
    bad: usize,
    /// The byte ranges of the other commands, when `bad` > 0 (the batch
    /// is then written anew).
    kept: Vec<Range<usize>>,
    /// Whether the first command kept is a SELECT.
    starts_with_select: bool,
    /// The database the last SELECT kept selects.
    last_select: Option<usize>,
    /// Commands kept.
    commands: usize,
}

/// The file in order.
#[derive(Debug)]
enum Unit {
    /// Bytes kept as they are: the preamble, or the hozon header line
    /// (`header`: checksummed batches follow).
    Copy { range: Range<usize>, header: bool },
    /// A `#` line; `ts_ms` for `#TS:`; `txn` the MULTI it is inside.
    Line {
        range: Range<usize>,
        ts_ms: Option<i64>,
        txn: Option<usize>,
    },
    /// A command of a plain (Redis) section.
    Plain { cmd: Cmd },
    /// A verified batch.
    Batch(Batch),
    /// A damaged region (index into `regions`).
    Region(usize),
}

/// A damaged region.
#[derive(Debug, Clone)]
struct Region {
    start: usize,
    end: usize,
    kind: ProblemKind,
    detail: String,
    remedy: Remedy,
    commands: Option<u64>,
    keys: Keys,
    /// The last SELECT readable inside.
    last_select: Option<usize>,
    /// The transaction it is inside: MULTI's offset, end of its EXEC.
    txn: Option<(usize, usize)>,
    /// Bytes salvage writes in its place (a correct header line).
    replacement: Option<Vec<u8>>,
}

impl Region {
    fn new(data: &[u8], range: Range<usize>, kind: ProblemKind, detail: String) -> Region {
        let (commands, keys) = commands_and_keys(data, range.clone());
        let remedy = if range.end >= data.len() && kind == ProblemKind::TornTail {
            Remedy::Fix
        } else {
            Remedy::Salvage
        };
        Region {
            start: range.start,
            end: range.end,
            kind,
            detail,
            remedy,
            commands: Some(commands),
            keys,
            last_select: last_select_in(data, range),
            txn: None,
            replacement: None,
        }
    }

    fn problem(&self, file: &Path) -> Problem {
        Problem {
            file: file.to_path_buf(),
            start: self.start as u64,
            end: self.end as u64,
            kind: self.kind,
            detail: self.detail.clone(),
            commands_or_keys: self.commands,
            keys: self.keys.clone(),
            remedy: self.remedy,
        }
    }

    fn dropped(&self) -> Dropped {
        Dropped {
            start: self.start as u64,
            end: self.end as u64,
            reason: self.kind.name().to_string(),
            count: self.commands.unwrap_or(0),
            keys: self.keys.clone(),
        }
    }
}

/// What [`analyse`] found.
#[derive(Debug, Default)]
struct Analysis {
    /// A damaged preamble (reported; never repaired here).
    preamble_damage: Option<Region>,
    units: Vec<Unit>,
    regions: Vec<Region>,
    /// Offsets where checksummed sections start.
    checksummed_from: Vec<usize>,
}

impl Analysis {
    fn checksummed_at(&self, at: usize) -> bool {
        self.checksummed_from.iter().any(|&s| s <= at)
    }
}

/// An open MULTI of a plain section: what was read since it.
struct OpenTxn {
    multi: Cmd,
    units: Vec<Unit>,
    regions: Vec<Region>,
}

struct Scanner<'d> {
    data: &'d [u8],
    out: Analysis,
    txn: Option<OpenTxn>,
    /// Whether units outside transactions are kept (the plans need them;
    /// `check` needs only the regions, and a large file holds millions).
    keep_units: bool,
    /// Argument ranges of the command being read (reused).
    args: Vec<Range<usize>>,
}

impl<'d> Scanner<'d> {
    fn push_unit(&mut self, unit: Unit) {
        match self.txn.as_mut() {
            Some(t) => t.units.push(unit),
            None if self.keep_units => self.out.units.push(unit),
            None => {}
        }
    }

    fn push_region(&mut self, region: Region) {
        match self.txn.as_mut() {
            Some(t) => {
                t.units.push(Unit::Region(t.regions.len()));
                t.regions.push(region);
            }
            None => {
                self.out.units.push(Unit::Region(self.out.regions.len()));
                self.out.regions.push(region);
            }
        }
    }

    /// The open transaction ends without EXEC at `end`: it was never
    /// applied, so it is one region from its MULTI. When damage inside it
    /// is followed by intact commands, its EXEC was most likely in the
    /// damaged bytes: the region ends with the last damage, and the
    /// commands after it are read as outside the transaction (otherwise
    /// one lost EXEC would take everything up to the next MULTI with it).
    fn drop_open_txn(&mut self, end: usize, why: &str) {
        let Some(mut t) = self.txn.take() else { return };
        let last_damage = t.units.iter().rposition(|u| matches!(u, Unit::Region(_)));
        let (region_end, after) = match (last_damage, t.regions.last()) {
            // Only unreadable bytes can have held the EXEC.
            (Some(i), Some(r)) if i + 1 < t.units.len() && r.kind == ProblemKind::MalformedResp => {
                (r.end, t.units.split_off(i + 1))
            }
            _ => (end, Vec::new()),
        };
        let mut region = Region::new(
            self.data,
            t.multi.start..region_end,
            ProblemKind::UnfinishedMulti,
            if after.is_empty() {
                format!(
                    "the MULTI at byte {} has no EXEC {why}{}",
                    t.multi.start,
                    if t.regions.is_empty() {
                        String::new()
                    } else {
                        format!(" ({} damaged region(s) inside)", t.regions.len())
                    }
                )
            } else {
                format!(
                    "the MULTI at byte {} has no EXEC: it was presumably in the damaged bytes \
                     ending at byte {region_end} ({} damaged region(s) inside)",
                    t.multi.start,
                    t.regions.len()
                )
            },
        );
        region.remedy = if region_end >= self.data.len() {
            Remedy::Fix
        } else {
            Remedy::Salvage
        };
        self.push_region(region);
        for unit in after {
            let unit = match unit {
                Unit::Line { range, ts_ms, .. } => Unit::Line {
                    range,
                    ts_ms,
                    txn: None,
                },
                other => other,
            };
            self.push_unit(unit);
        }
    }

    fn close_txn(&mut self, exec: Cmd) {
        let Some(t) = self.txn.take() else { return };
        let exec_end = exec.end;
        let base = self.out.regions.len();
        let multi_start = t.multi.start;
        self.push_unit(Unit::Plain { cmd: t.multi });
        for unit in t.units {
            let unit = match unit {
                Unit::Region(i) => Unit::Region(base + i),
                Unit::Line { range, ts_ms, .. } => Unit::Line {
                    range,
                    ts_ms,
                    txn: Some(multi_start),
                },
                other => other,
            };
            self.push_unit(unit);
        }
        for mut r in t.regions {
            r.txn = Some((multi_start, exec_end));
            self.out.regions.push(r);
        }
        self.push_unit(Unit::Plain { cmd: exec });
    }
}

/// Where the full analysis of `check` can start: a position after
/// which nothing before matters to it (the end of a verified batch, or of
/// a plain command outside MULTI), and whether a checksummed section
/// goes on there.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Restart {
    at: usize,
    checksummed: bool,
}

/// What the fast walk of `check` found.
#[derive(Debug, PartialEq, Eq)]
enum FastWalk {
    /// Nothing for [`analyse`] to report.
    Clean,
    /// Something may be wrong: analyse from this point (None: from the
    /// start of the file, preamble included).
    AnalyseFrom(Option<Restart>),
}

/// The fast path of `check`: the loader's own walk ([`aof::walk`]) over
/// the log after an intact preamble, every command checked with
/// [`command_valid`]. Every region [`analyse`] reports is one of the
/// walk's failures (damaged preamble; torn tail, checksum mismatch,
/// malformed RESP, a bad annotation or an unfinished MULTI, which the walk
/// refuses or cuts) or a command `command_valid` refuses, so a walk that
/// reads the whole log means `analyse` finds nothing. Otherwise the full
/// analysis starts at the last point the walk passed where its state is
/// empty, so the intact part before the damage is read once, by the walk,
/// which keeps no record per command (on a large file, most of the full
/// analysis's cost). The tests check both on every damaged file they
/// build.
fn fast_walk(data: &[u8]) -> FastWalk {
    use std::ops::ControlFlow;
    let mut scratch = Analysis::default();
    let log_start = preamble(data, &mut scratch);
    if scratch.preamble_damage.is_some() {
        return FastWalk::AnalyseFrom(None);
    }
    if damaged_header(data, log_start).is_some() {
        // The walk reads such a log as a plain one, the analysis as
        // checksummed batches: no restart point of the walk holds.
        return FastWalk::AnalyseFrom(None);
    }
    let log = &data[log_start..];
    let mut commands_ok = true;
    let mut restart = None;
    let walked = aof::walk(log, &mut |event| {
        match event {
            aof::WalkEvent::Command(c) => {
                if command_valid(c.argv[0], c.argv.len(), c.argv.get(1).copied()).is_err() {
                    commands_ok = false;
                    return ControlFlow::Break(());
                }
                let closes = !c.in_multi || c.argv[0].eq_ignore_ascii_case(b"exec");
                if !c.batched && closes {
                    restart = Some(Restart {
                        at: log_start + (c.offset + c.len) as usize,
                        checksummed: false,
                    });
                }
            }
            aof::WalkEvent::BatchEnd(b) => {
                restart = Some(Restart {
                    at: log_start + b.end as usize,
                    checksummed: true,
                });
            }
        }
        ControlFlow::Continue(())
    });
    let clean = matches!(walked, Ok(r) if r.torn.is_none() && r.valid_len == log.len() as u64);
    if commands_ok && clean {
        FastWalk::Clean
    } else {
        FastWalk::AnalyseFrom(restart)
    }
}

/// Splits `data` into units and damaged regions.
fn analyse(data: &[u8], keep_units: bool) -> Analysis {
    analyse_from(data, keep_units, None)
}

/// [`analyse`], from `restart` when given (the regions after it; no units
/// before it). Without `keep_units` only the regions are kept (and the
/// units of a transaction while it is open).
fn analyse_from(data: &[u8], keep_units: bool, restart: Option<Restart>) -> Analysis {
    let mut scanner = Scanner {
        data,
        out: Analysis::default(),
        txn: None,
        keep_units,
        args: Vec::new(),
    };
    if let Some(r) = restart {
        if r.checksummed {
            scanner.out.checksummed_from.push(r.at);
        }
        return scan_log(scanner, r.at, r.checksummed, usize::MAX);
    }
    let log_start = preamble(data, &mut scanner.out);
    let mut pos = log_start;
    let mut checksummed = false;
    if data[pos..].starts_with(aof::FILE_HEADER) {
        let end = pos + aof::FILE_HEADER.len();
        scanner.out.units.push(Unit::Copy {
            range: pos..end,
            header: true,
        });
        scanner.out.checksummed_from.push(end);
        checksummed = true;
        pos = end;
    } else if let Some(end) = damaged_header(data, pos) {
        let mut region = Region::new(
            data,
            pos..end,
            ProblemKind::DamagedHeader,
            format!(
                "the hozon AOF header line is damaged ('{}'), but checksummed batches follow",
                String::from_utf8_lossy(&data[pos..end]).escape_debug()
            ),
        );
        region.replacement = Some(aof::FILE_HEADER.to_vec());
        region.commands = Some(0);
        scanner.push_region(region);
        scanner.out.checksummed_from.push(end);
        checksummed = true;
        pos = end;
    }
    scan_log(scanner, pos, checksummed, log_start)
}

/// The rest of [`analyse_from`]: units and regions from `pos` to the end.
/// `log_start` is where the log after the preamble starts (`usize::MAX`
/// when the analysis restarted past it).
fn scan_log(
    mut scanner: Scanner<'_>,
    mut pos: usize,
    mut checksummed: bool,
    log_start: usize,
) -> Analysis {
    let data = scanner.data;
    while pos < data.len() {
        pos = if checksummed {
            scan_batch(&mut scanner, pos)
        } else {
            let (next, switched) = scan_plain(&mut scanner, pos);
            checksummed = switched;
            next
        };
    }
    scanner.drop_open_txn(data.len(), "before the end of the file");
    let mut out = scanner.out;
    if log_start == 0 && data.first().is_some_and(|b| *b != b'*' && *b != b'#') {
        // Not an AOF's first byte (nor a preamble's magic): perhaps a
        // dump whose magic is damaged. Cutting or dropping it could throw
        // a whole image away, so no AOF repair is offered.
        if let Some(r) = out.regions.iter_mut().find(|r| r.start == 0) {
            r.remedy = Remedy::None;
            r.detail = format!(
                "the file starts like neither an AOF nor a dump.hoz/RDB preamble (a damaged \
                 preamble magic?); {}",
                r.detail
            );
        }
    }
    out
}

/// Checks the preamble, records it (or its damage), and returns where the
/// log after it starts.
fn preamble(data: &[u8], out: &mut Analysis) -> usize {
    use hozon::persist::snapshot;
    use hozon::rdb::reader;
    let limits = hozon::types::EncodingLimits::default();
    let damage = |out: &mut Analysis, log_start: usize, detail: String| {
        out.preamble_damage = Some(Region {
            start: 0,
            end: log_start,
            kind: ProblemKind::DamagedPreamble,
            detail,
            remedy: Remedy::Salvage,
            commands: None,
            keys: Keys::default(),
            last_select: None,
            txn: None,
            replacement: None,
        });
        log_start
    };
    if data.starts_with(&snapshot::MAGIC) {
        let len = match snapshot::image_len(data) {
            Ok(len) => len,
            Err(e) => {
                let start = find(data, aof::FILE_HEADER).unwrap_or(data.len());
                return damage(out, start, format!("dump.hoz preamble: {e}"));
            }
        };
        let verified = snapshot::load_streaming(&data[..len], limits, 0, i64::MIN, |_| Ok(()));
        if let Err(e) = verified {
            return damage(out, len, format!("dump.hoz preamble: {e}"));
        }
        out.units.push(Unit::Copy {
            range: 0..len,
            header: false,
        });
        return len;
    }
    if reader::is_rdb(data) {
        let options = reader::Options {
            limits,
            databases: hozon::config::Config::in_memory().databases,
            skip_expired_before_ms: None,
            now_ms: hozon::engine::now_ms(),
        };
        let checked = reader::scan(data)
            .and_then(|s| reader::load(&data[..s.len], &options, &mut |_| Ok(())).map(|_| s.len));
        return match checked {
            Ok(len) => {
                out.units.push(Unit::Copy {
                    range: 0..len,
                    header: false,
                });
                len
            }
            Err(e) => {
                let from = usize::try_from(e.offset)
                    .unwrap_or(data.len())
                    .min(data.len());
                let start = find(data, aof::FILE_HEADER)
                    .or_else(|| {
                        (from..data.len()).find(|&p| data[p] == b'*' && command_ok(data, p))
                    })
                    .unwrap_or(data.len());
                damage(out, start, format!("RDB preamble: {e}"))
            }
        };
    }
    0
}

/// A first line that is hozon's header with a few bytes damaged, when a
/// checksummed batch follows: the end of that line.
fn damaged_header(data: &[u8], pos: usize) -> Option<usize> {
    let end = pos + aof::FILE_HEADER.len();
    let line = data.get(pos..end)?;
    let differing = line
        .iter()
        .zip(aof::FILE_HEADER)
        .filter(|(a, b)| a != b)
        .count();
    if differing == 0 || differing > 3 {
        return None;
    }
    aof::next_valid_batch(data, pos).map(|_| end)
}

/// Reads the batch starting at `pos` of a checksummed section; returns
/// where the next one starts.
fn scan_batch(s: &mut Scanner<'_>, start: usize) -> usize {
    let data = s.data;
    let mut p = start;
    let mut cmds = Vec::new();
    let why: String;
    let mut mismatch = false;
    let mut remedy_none = false;
    loop {
        if p >= data.len() {
            why = "the last batch has no annotation (an incomplete write)".into();
            break;
        }
        if data[p] == b'#' {
            match read_line(data, p) {
                None => {
                    why = "an annotation line is cut by the end of the file".into();
                    break;
                }
                Some(Err(())) => {
                    why = format!("a line at byte {p} is longer than {LINE_MAX_BYTES} bytes");
                    break;
                }
                Some(Ok((line, next))) => {
                    if line.starts_with(aof::ANNOTATION_PREFIX) {
                        match aof::parse_annotation(line) {
                            Some(a) if a.verifies(&data[start..p], line) => {
                                return verified_batch(s, start..next, a.ts_ms, cmds);
                            }
                            _ => {
                                why = format!(
                                    "the batch's body does not match its annotation at byte {p} \
                                     (length or CRC)"
                                );
                                mismatch = true;
                                break;
                            }
                        }
                    }
                    if line.starts_with(b"#hz") {
                        why = format!(
                            "unknown annotation version '{}' at byte {p}",
                            String::from_utf8_lossy(&line[..line.len().min(16)]).escape_debug()
                        );
                        remedy_none = true;
                        break;
                    }
                    p = next;
                    continue;
                }
            }
        }
        match aof::command_at_into(data, p, &mut s.args) {
            Ok(end) => {
                cmds.push(Cmd::new(data, p, end, &s.args));
                p = end;
            }
            Err(CommandAt::Malformed(m)) => {
                why = format!("malformed command at byte {p}: {m}");
                break;
            }
            Err(_) => {
                why = format!("the command at byte {p} is incomplete");
                break;
            }
        }
    }
    let resync = aof::next_valid_batch(data, start);
    let end = resync.unwrap_or(data.len());
    // A failed annotation among the bytes: the batch did not verify.
    mismatch |= find(&data[start..end], aof::ANNOTATION_PREFIX).is_some();
    let kind = if resync.is_none() {
        ProblemKind::TornTail
    } else if mismatch {
        ProblemKind::ChecksumMismatch
    } else {
        ProblemKind::MalformedResp
    };
    let detail = if resync.is_some() {
        format!("{why}; intact batches follow at byte {end}")
    } else {
        format!("{why}; no intact batch follows")
    };
    let mut region = Region::new(data, start..end, kind, detail);
    if remedy_none && resync.is_none() {
        // A newer format, not damage: cutting it would lose data.
        region.remedy = Remedy::None;
        region.kind = ProblemKind::MalformedResp;
    }
    s.push_region(region);
    end
}

fn verified_batch(s: &mut Scanner<'_>, range: Range<usize>, ts_ms: i64, cmds: Vec<Cmd>) -> usize {
    let data = s.data;
    let end = range.end;
    let mut bad = Vec::new();
    let mut regions = Vec::new();
    let mut multi: Option<usize> = None;
    let mut bad_in_multi: Vec<usize> = Vec::new();
    for (i, c) in cmds.iter().enumerate() {
        if c.is(data, "multi") {
            multi = Some(c.start);
        } else if c.is(data, "exec") {
            if let Some(m) = multi.take() {
                for &r in &bad_in_multi {
                    let region: &mut Region = &mut regions[r];
                    region.txn = Some((m, c.end));
                }
            }
            bad_in_multi.clear();
        }
        if let Some(why) = c.bad.clone() {
            if multi.is_some() {
                bad_in_multi.push(regions.len());
            }
            bad.push(i);
            let mut region = Region::new(data, c.start..c.end, ProblemKind::UnknownCommand, why);
            region.commands = Some(1);
            regions.push(region);
        }
    }
    if multi.is_some() {
        // The writer never ends a batch inside MULTI; the loader refuses it.
        let region = Region::new(
            data,
            range,
            ProblemKind::UnfinishedMulti,
            "a verified batch ends inside MULTI".into(),
        );
        s.push_region(region);
        return end;
    }
    for r in regions {
        // Regions inside a batch are reported and dropped through the
        // batch's `bad` list, not as units of their own.
        s.out.regions.push(r);
    }
    let kept: Vec<&Cmd> = cmds
        .iter()
        .enumerate()
        .filter(|(i, _)| !bad.contains(i))
        .map(|(_, c)| c)
        .collect();
    s.push_unit(Unit::Batch(Batch {
        range,
        ts_ms,
        bad: bad.len(),
        starts_with_select: kept.first().is_some_and(|c| c.is_select()),
        last_select: kept.iter().rev().find_map(|c| c.selected_db()),
        commands: kept.len(),
        kept: if bad.is_empty() {
            Vec::new()
        } else {
            kept.iter().map(|c| c.start..c.end).collect()
        },
    }));
    end
}

/// Reads one unit of a plain section at `pos`; returns where the next
/// starts and whether a checksummed section starts there.
fn scan_plain(s: &mut Scanner<'_>, pos: usize) -> (usize, bool) {
    let data = s.data;
    if data[pos] == b'#' {
        match read_line(data, pos) {
            None => {
                let region = Region::new(
                    data,
                    pos..data.len(),
                    ProblemKind::TornTail,
                    format!("the line at byte {pos} is cut by the end of the file"),
                );
                s.push_region(region);
                return (data.len(), false);
            }
            Some(Err(())) => {
                return (
                    plain_damage(
                        s,
                        pos,
                        format!("a line at byte {pos} is longer than {LINE_MAX_BYTES} bytes"),
                    ),
                    false,
                )
            }
            Some(Ok((line, next))) => {
                if line == &aof::FILE_HEADER[..aof::FILE_HEADER.len() - 2] {
                    s.drop_open_txn(pos, "before the hozon header line");
                    s.push_unit(Unit::Copy {
                        range: pos..next,
                        header: true,
                    });
                    s.out.checksummed_from.push(next);
                    return (next, true);
                }
                if line.starts_with(b"#hz") {
                    let mut region = Region::new(
                        data,
                        pos..next,
                        ProblemKind::MalformedResp,
                        "a checksum annotation in a section without the hozon header line".into(),
                    );
                    region.commands = Some(0);
                    s.push_region(region);
                    return (next, false);
                }
                let ts_ms = line
                    .strip_prefix(b"#TS:")
                    .and_then(hozon::types::num::parse_i64)
                    .map(|secs| secs.saturating_mul(1000));
                s.push_unit(Unit::Line {
                    range: pos..next,
                    ts_ms,
                    txn: s.txn.as_ref().map(|t| t.multi.start),
                });
                return (next, false);
            }
        }
    }
    match aof::command_at_into(data, pos, &mut s.args) {
        Ok(end) => {
            let cmd = Cmd::new(data, pos, end, &s.args);
            if let Some(why) = cmd.bad.clone() {
                let mut region = Region::new(data, pos..end, ProblemKind::UnknownCommand, why);
                region.commands = Some(1);
                s.push_region(region);
            } else if cmd.is(data, "multi") {
                s.drop_open_txn(pos, "before the next MULTI");
                s.txn = Some(OpenTxn {
                    multi: cmd,
                    units: Vec::new(),
                    regions: Vec::new(),
                });
            } else if cmd.is(data, "exec") && s.txn.is_some() {
                s.close_txn(cmd);
            } else {
                s.push_unit(Unit::Plain { cmd });
            }
            (end, false)
        }
        Err(CommandAt::Malformed(m)) => (
            plain_damage(s, pos, format!("malformed command at byte {pos}: {m}")),
            false,
        ),
        Err(_) => (
            plain_damage(s, pos, format!("the command at byte {pos} is incomplete")),
            false,
        ),
    }
}

/// Damage at `pos` of a plain section: a region up to the next line start
/// holding a complete, known command (or a `#TS:` line, or hozon's header
/// line), or a torn tail when there is none.
fn plain_damage(s: &mut Scanner<'_>, pos: usize, why: String) -> usize {
    let data = s.data;
    let resync = plain_resync(data, pos);
    let end = resync.unwrap_or(data.len());
    let (kind, detail) = match resync {
        Some(r) => (
            ProblemKind::MalformedResp,
            format!("{why}; reading resumes at byte {r}"),
        ),
        None => (
            ProblemKind::TornTail,
            format!("{why}; no complete command follows"),
        ),
    };
    s.push_region(Region::new(data, pos..end, kind, detail));
    end
}

/// The next line start after `pos` where reading can resume.
fn plain_resync(data: &[u8], pos: usize) -> Option<usize> {
    let mut from = pos + 1;
    while from < data.len() {
        let nl = data[from - 1..].iter().position(|&b| b == b'\n')?;
        let at = from - 1 + nl + 1;
        if at >= data.len() {
            return None;
        }
        if resumes_at(data, at) {
            return Some(at);
        }
        from = at + 1;
    }
    None
}

fn resumes_at(data: &[u8], at: usize) -> bool {
    match data[at] {
        b'*' => command_ok(data, at),
        b'#' => {
            if data[at..].starts_with(aof::FILE_HEADER) {
                return true;
            }
            match read_line(data, at) {
                Some(Ok((line, _))) => line
                    .strip_prefix(b"#TS:")
                    .is_some_and(|t| hozon::types::num::parse_i64(t).is_some()),
                _ => false,
            }
        }
        _ => false,
    }
}

/// A complete command the engine knows, with a valid arity, at `at`.
fn command_ok(data: &[u8], at: usize) -> bool {
    match aof::command_at(data, at) {
        CommandAt::Complete { args, .. } => {
            let arg1 = args.get(1).map(|r| &data[r.clone()]);
            command_valid(&data[args[0].clone()], args.len(), arg1).is_ok()
        }
        _ => false,
    }
}

/// Whether the loader can replay a command (its name, its number of
/// arguments with the name, its first argument) as far as the file alone
/// tells: a known command with its arity (a SELECT with a database number).
fn command_valid(name: &[u8], argc: usize, arg1: Option<&[u8]>) -> Result<(), String> {
    let Some(spec) = hozon::command::lookup(name) else {
        return Err(format!(
            "unknown command '{}'",
            String::from_utf8_lossy(&name[..name.len().min(64)]).escape_debug()
        ));
    };
    let argc = argc as i64;
    let arity = i64::from(spec.arity);
    if (arity > 0 && argc != arity) || (arity < 0 && argc < -arity) {
        return Err(format!(
            "wrong number of arguments ({argc}) for '{}'",
            spec.name
        ));
    }
    if spec.name == "select" {
        let ok = arg1
            .and_then(|db| std::str::from_utf8(db).ok())
            .and_then(|t| t.parse::<usize>().ok())
            .is_some();
        if !ok {
            return Err("SELECT with an invalid database number".into());
        }
    }
    Ok(())
}

/// A `#` line at `pos`: Some(Ok((text without CRLF, next))), Some(Err)
/// when longer than the loader reads, None when cut by the end.
fn read_line(data: &[u8], pos: usize) -> Option<Result<(&[u8], usize), ()>> {
    let window = &data[pos..data.len().min(pos + LINE_MAX_BYTES)];
    match window.windows(2).position(|w| w == b"\r\n") {
        Some(i) => Some(Ok((&data[pos..pos + i], pos + i + 2))),
        None if data.len() - pos >= LINE_MAX_BYTES => Some(Err(())),
        None => None,
    }
}

fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    haystack.windows(needle.len()).position(|w| w == needle)
}

/// Complete commands readable in `range` (after damage, at the next line
/// start where one parses) and the keys they touch.
fn commands_and_keys(data: &[u8], range: Range<usize>) -> (u64, Keys) {
    let mut count = 0;
    let mut keys = Keys::default();
    each_command(data, range, &mut |argv| {
        let name = argv[0];
        if !["select", "multi", "exec"]
            .iter()
            .any(|n| name.eq_ignore_ascii_case(n.as_bytes()))
        {
            count += 1;
        }
        for_each_key(argv, &mut |k| keys.add(k));
    });
    (count, keys)
}

fn last_select_in(data: &[u8], range: Range<usize>) -> Option<usize> {
    let mut db = None;
    each_command(data, range, &mut |argv| {
        if argv[0].eq_ignore_ascii_case(b"select") && argv.len() == 2 {
            if let Some(n) = std::str::from_utf8(argv[1])
                .ok()
                .and_then(|t| t.parse().ok())
            {
                db = Some(n);
            }
        }
    });
    db
}

/// Calls `f` with every complete command readable inside `range`.
fn each_command(data: &[u8], range: Range<usize>, f: &mut dyn FnMut(&[&[u8]])) {
    let region = &data[..range.end];
    let mut pos = range.start;
    while pos < range.end {
        if region[pos] == b'#' {
            if let Some(Ok((_, next))) = read_line(region, pos) {
                pos = next;
                continue;
            }
        }
        match aof::command_at(region, pos) {
            CommandAt::Complete { args, end } => {
                let argv: Vec<&[u8]> = args.iter().map(|r| &region[r.clone()]).collect();
                f(&argv);
                pos = end;
            }
            _ => {
                // Skip to the next line start that begins a command.
                let mut next = None;
                let mut from = pos + 1;
                while from < range.end {
                    let Some(nl) = region[from..].iter().position(|&b| b == b'\n') else {
                        break;
                    };
                    let at = from + nl + 1;
                    if at < range.end && (region[at] == b'*' || region[at] == b'#') {
                        next = Some(at);
                        break;
                    }
                    from = at;
                }
                match next {
                    Some(n) => pos = n,
                    None => break,
                }
            }
        }
    }
}

/// Calls `f` with each key argument of `argv`, as COMMAND GETKEYS finds
/// them ([`hozon::command::keys_of`]; nothing for a command GETKEYS would
/// refuse).
fn for_each_key(argv: &[&[u8]], f: &mut dyn FnMut(&[u8])) {
    for pos in hozon::command::keys_of(argv) {
        f(argv[pos]);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::write_pieces;
    use hozon::persist::aof::{encode_command, BatchBuilder, FILE_HEADER};
    use hozon::{Config, Engine, Reply};
    use std::collections::BTreeMap;
    use std::sync::Arc;

    /// `check` as the tool runs it (the fast walk, then the analysis from
    /// its restart point), asserted equal to the full analysis from the
    /// start of the file: every test that checks a file checks that the
    /// fast path changes nothing.
    fn check(file: &Path, data: &[u8]) -> Vec<Problem> {
        let fast = super::check(file, data);
        let full = problems_of(&analyse(data, true), file);
        assert_eq!(fast, full, "fast check differs from the full analysis");
        fast
    }

    /// Every key of every database with its DUMP payload.
    type State = BTreeMap<(usize, Vec<u8>), Vec<u8>>;
    /// Commands, each with the database it runs in.
    type Unit = Vec<(usize, Vec<String>)>;

    fn cmd(db: usize, words: &str) -> (usize, Vec<String>) {
        (db, words.split(' ').map(str::to_string).collect())
    }

    fn run(engine: &mut Engine, session: &mut hozon::Session, argv: &[&[u8]]) -> Reply {
        engine.execute(session, argv)
    }

    fn state(engine: &mut Engine) -> State {
        let mut s = engine.new_session();
        s.authenticated = true;
        let mut out = State::new();
        for db in 0..16usize {
            let dbs = db.to_string();
            run(engine, &mut s, &[b"SELECT", dbs.as_bytes()]);
            let Reply::Array(keys) = run(engine, &mut s, &[b"KEYS", b"*"]) else {
                panic!("KEYS did not answer an array");
            };
            for k in keys {
                let Reply::Bulk(k) = k else {
                    panic!("a key is not a bulk")
                };
                let Reply::Bulk(v) = run(engine, &mut s, &[b"DUMP", &k]) else {
                    panic!("DUMP failed")
                };
                out.insert((db, k), v);
            }
        }
        out
    }

    /// The state the commands of `units` make, applied by the engine.
    fn expected<'u>(units: impl IntoIterator<Item = &'u Unit>) -> State {
        let mut engine = Engine::open(Config::in_memory()).expect("in-memory engine");
        let mut s = engine.new_session();
        s.authenticated = true;
        for unit in units {
            for (db, argv) in unit {
                let dbs = db.to_string();
                run(&mut engine, &mut s, &[b"SELECT", dbs.as_bytes()]);
                let argv: Vec<&[u8]> = argv.iter().map(|a| a.as_bytes()).collect();
                let reply = run(&mut engine, &mut s, &argv);
                assert!(!matches!(reply, Reply::Error(_)), "{argv:?}: {reply:?}");
            }
        }
        state(&mut engine)
    }

    /// Loads an AOF image as the server does; a torn tail is a failure
    /// here (a repaired file has none).
    fn load(data: &[u8]) -> Result<State, String> {
        let mut engine = Engine::open(Config::in_memory()).map_err(|e| e.to_string())?;
        let report = engine
            .load_aof_image(data, Path::new("repaired.aof"), true)
            .map_err(|e| e.to_string())?;
        if let Some(t) = report.torn {
            return Err(format!("torn tail left: {t:?}"));
        }
        Ok(state(&mut engine))
    }

    fn materialise(plan: &Plan, data: &[u8]) -> Vec<u8> {
        match &plan.content {
            None => data.to_vec(),
            Some(Content::Pieces(p)) => {
                let mut out = Vec::new();
                write_pieces(p, data, &mut out).expect("pieces inside the original");
                out
            }
            Some(Content::Written(_)) => panic!("an AOF plan writes pieces"),
        }
    }

    /// A hozon AOF, one batch per unit at `ts(i)`; the batches' ranges.
    fn hozon_file(units: &[Unit], ts: impl Fn(usize) -> i64) -> (Vec<u8>, Vec<Range<usize>>) {
        hozon_log(FILE_HEADER.to_vec(), units, ts)
    }

    fn hozon_log(
        mut out: Vec<u8>,
        units: &[Unit],
        ts: impl Fn(usize) -> i64,
    ) -> (Vec<u8>, Vec<Range<usize>>) {
        let mut ranges = Vec::new();
        let mut selected = None;
        let mut b = BatchBuilder::new();
        for (i, unit) in units.iter().enumerate() {
            for (db, argv) in unit {
                let argv: Vec<&[u8]> = argv.iter().map(|a| a.as_bytes()).collect();
                b.push_command(*db, &argv, &mut selected);
            }
            let start = out.len();
            out.extend(b.finish(ts(i)));
            ranges.push(start..out.len());
        }
        (out, ranges)
    }

    /// A Redis AOF (lower-case names like Redis writes, `SELECT` when the
    /// database changes, a `#TS:` line before each unit when `ts`); each
    /// unit's range and the offset of its first command.
    fn redis_file(
        units: &[Unit],
        ts: Option<&dyn Fn(usize) -> i64>,
    ) -> (Vec<u8>, Vec<(Range<usize>, usize)>) {
        redis_log(Vec::new(), units, ts)
    }

    fn redis_log(
        mut out: Vec<u8>,
        units: &[Unit],
        ts: Option<&dyn Fn(usize) -> i64>,
    ) -> (Vec<u8>, Vec<(Range<usize>, usize)>) {
        let mut ranges = Vec::new();
        let mut selected = None;
        for (i, unit) in units.iter().enumerate() {
            let start = out.len();
            if let Some(ts) = ts {
                out.extend_from_slice(format!("#TS:{}\r\n", ts(i)).as_bytes());
            }
            let first = out.len();
            for (db, argv) in unit {
                if selected != Some(*db) {
                    encode_command(&mut out, &["select".to_string(), db.to_string()]);
                    selected = Some(*db);
                }
                let mut argv = argv.clone();
                argv[0].make_ascii_lowercase();
                encode_command(&mut out, &argv);
            }
            ranges.push((start..out.len(), first));
        }
        (out, ranges)
    }

    fn sets(n: usize) -> Vec<Unit> {
        (0..n)
            .map(|i| vec![cmd(0, &format!("SET k{i} value{i}"))])
            .collect()
    }

    fn except(units: &[Unit], dropped: &[usize]) -> Vec<Unit> {
        units
            .iter()
            .enumerate()
            .filter(|(i, _)| !dropped.contains(i))
            .map(|(_, u)| u.clone())
            .collect()
    }

    fn file() -> &'static Path {
        Path::new("appendonly.aof")
    }

    fn keys(p: &Keys) -> Vec<String> {
        p.listed
            .iter()
            .map(|k| String::from_utf8_lossy(k).into_owned())
            .collect()
    }

    #[test]
    fn hozon_checksum_mismatch_mid_file_is_one_region_and_salvage_keeps_the_rest() {
        let units = sets(5);
        let (mut data, ranges) = hozon_file(&units, |i| 1000 + i as i64);
        // A bit of the value "value2": the RESP still parses.
        data[ranges[2].start + 26] ^= 0x01;
        let problems = check(file(), &data);
        assert_eq!(problems.len(), 1, "{problems:?}");
        let p = &problems[0];
        assert_eq!(
            (p.start, p.end),
            (ranges[2].start as u64, ranges[2].end as u64)
        );
        assert_eq!(p.kind, ProblemKind::ChecksumMismatch);
        assert_eq!(p.remedy, Remedy::Salvage);
        assert_eq!(p.commands_or_keys, Some(1));
        assert_eq!(keys(&p.keys), ["k2"]);
        let refusal = plan_fix(file(), &data).unwrap_err();
        assert!(refusal.0.contains("salvage"), "{refusal:?}");
        let plan = plan_salvage(file(), &data, false).unwrap();
        assert_eq!(plan.dropped.len(), 1);
        assert_eq!(plan.dropped[0].count, 1);
        assert_eq!(
            load(&materialise(&plan, &data)).unwrap(),
            expected(&except(&units, &[2]))
        );
        // The damaged file itself is refused by the loader.
        assert!(load(&data).is_err());
    }

    #[test]
    fn hozon_torn_tail_and_a_damaged_last_batch_are_cut_by_fix() {
        let units = sets(5);
        let (data, ranges) = hozon_file(&units, |i| 1000 + i as i64);
        let mut torn = data[..ranges[4].start + 10].to_vec();
        let mut flipped = data.clone();
        flipped[ranges[4].start + 20] ^= 0x04;
        for damaged in [&mut torn, &mut flipped] {
            let problems = check(file(), damaged);
            assert_eq!(problems.len(), 1, "{problems:?}");
            let p = &problems[0];
            assert_eq!(p.kind, ProblemKind::TornTail);
            assert_eq!(p.remedy, Remedy::Fix);
            assert_eq!(
                (p.start, p.end),
                (ranges[4].start as u64, damaged.len() as u64)
            );
            let plan = plan_fix(file(), damaged).unwrap();
            let Some(Content::Pieces(pieces)) = &plan.content else {
                panic!("no cut")
            };
            assert_eq!(pieces, &[Piece::Copy(0, ranges[4].start as u64)]);
            let want = expected(&units[..4]);
            assert_eq!(load(&materialise(&plan, damaged)).unwrap(), want);
            let salvaged = plan_salvage(file(), damaged, false).unwrap();
            assert_eq!(load(&materialise(&salvaged, damaged)).unwrap(), want);
        }
        // An intact file: nothing to do.
        assert!(check(file(), &data).is_empty());
        assert!(plan_fix(file(), &data).unwrap().content.is_none());
        assert!(plan_salvage(file(), &data, false)
            .unwrap()
            .content
            .is_none());
    }

    #[test]
    fn hozon_unknown_command_is_its_own_region_and_its_batch_is_rewritten() {
        let mut units = sets(4);
        units[2] = vec![cmd(0, "SET a 1"), cmd(0, "FLUBBER x"), cmd(0, "SET b 2")];
        let (data, _) = hozon_file(&units, |i| 1000 + i as i64);
        let mut foo = Vec::new();
        encode_command(&mut foo, &["FLUBBER", "x"]);
        let at = find(&data, &foo).unwrap();
        let problems = check(file(), &data);
        assert_eq!(problems.len(), 1, "{problems:?}");
        assert_eq!(problems[0].kind, ProblemKind::UnknownCommand);
        assert_eq!(
            (problems[0].start, problems[0].end),
            (at as u64, (at + foo.len()) as u64)
        );
        assert_eq!(problems[0].commands_or_keys, Some(1));
        assert!(plan_fix(file(), &data).is_err());
        let plan = plan_salvage(file(), &data, false).unwrap();
        let mut want = units.clone();
        want[2].remove(1);
        assert_eq!(load(&materialise(&plan, &data)).unwrap(), expected(&want));
    }

    #[test]
    fn hozon_salvage_puts_the_select_of_a_dropped_batch_back() {
        let units = vec![
            vec![cmd(0, "SET a 1")],
            vec![cmd(3, "SET b 2")],
            vec![cmd(3, "SET c 3")],
            vec![cmd(3, "SET d 4")],
        ];
        let (mut data, ranges) = hozon_file(&units, |i| 1000 + i as i64);
        // Damage the SET of batch 1, after its readable SELECT 3.
        let set_b = find(&data[ranges[1].clone()], b"SET\r\n").unwrap() + ranges[1].start;
        data[set_b + 1] ^= 0x01;
        let problems = check(file(), &data);
        assert_eq!(problems.len(), 1, "{problems:?}");
        assert_eq!(problems[0].start, ranges[1].start as u64);
        let plan = plan_salvage(file(), &data, false).unwrap();
        assert!(
            plan.notes.iter().any(|n| n.contains("SELECT 3")),
            "{:?}",
            plan.notes
        );
        let out = materialise(&plan, &data);
        assert_eq!(load(&out).unwrap(), expected(&except(&units, &[1])));
        // The SELECT is a verified batch of its own: no problem is left.
        assert!(check(file(), &out).is_empty());
    }

    #[test]
    fn salvage_beats_truncation_a_damaged_batch_in_10k_commands_loses_only_its_commands() {
        let units: Vec<Unit> = (0..1000)
            .map(|b| {
                (0..10)
                    .map(|c| cmd(b % 3, &format!("SET k{b}-{c} v{b}")))
                    .collect()
            })
            .collect();
        let (mut data, ranges) = hozon_file(&units, |i| 1_000_000 + i as i64);
        // A digit of the batch's CRC.
        data[ranges[500].end - 4] ^= 0x01;
        let problems = check(file(), &data);
        assert_eq!(problems.len(), 1);
        assert_eq!(problems[0].commands_or_keys, Some(10));
        assert_eq!(problems[0].keys.total, 10);
        let plan = plan_salvage(file(), &data, false).unwrap();
        assert_eq!(plan.dropped.len(), 1);
        assert_eq!(plan.dropped[0].count, 10);
        let got = load(&materialise(&plan, &data)).unwrap();
        assert_eq!(got.len(), 9990);
        assert_eq!(got, expected(&except(&units, &[500])));
    }

    #[test]
    fn hozon_damaged_header_line_is_replaced() {
        let units = sets(3);
        let (mut data, _) = hozon_file(&units, |i| 1000 + i as i64);
        data[3] ^= 0x01;
        assert!(load(&data).is_err());
        let problems = check(file(), &data);
        assert_eq!(problems.len(), 1, "{problems:?}");
        assert_eq!(problems[0].kind, ProblemKind::DamagedHeader);
        assert_eq!(
            (problems[0].start, problems[0].end),
            (0, FILE_HEADER.len() as u64)
        );
        let plan = plan_salvage(file(), &data, false).unwrap();
        let out = materialise(&plan, &data);
        assert!(out.starts_with(FILE_HEADER));
        assert_eq!(load(&out).unwrap(), expected(&units));
    }

    #[test]
    fn truncate_before_a_time_between_batches_yields_exactly_the_prefix_state() {
        let units: Vec<Unit> = (0..6)
            .map(|i| vec![cmd(0, &format!("SET k{i} v{i}")), cmd(0, "INCR n")])
            .collect();
        let (data, ranges) = hozon_file(&units, |i| 1_700_000_000_000 + 1000 * i as i64);
        for (before_ms, kept) in [
            (1_700_000_003_500, 4),
            (1_700_000_003_000, 3),
            (1_700_000_000_000, 0),
        ] {
            let plan = plan_truncate(file(), &data, before_ms).unwrap();
            assert_eq!(plan.dropped[0].start, ranges[kept].start as u64);
            assert_eq!(plan.dropped[0].count, 2 * (6 - kept) as u64);
            assert_eq!(
                load(&materialise(&plan, &data)).unwrap(),
                expected(&units[..kept])
            );
        }
        let plan = plan_truncate(file(), &data, 1_800_000_000_000).unwrap();
        assert!(plan.content.is_none());
        // Damage before the cut: salvage first.
        let mut damaged = data.clone();
        damaged[ranges[1].start + 20] ^= 0x01;
        assert!(plan_truncate(file(), &damaged, 1_700_000_003_500).is_err());
        // Damage right before the cut goes with it (its time is unknown).
        let plan = plan_truncate(file(), &damaged, 1_700_000_000_500).unwrap();
        assert_eq!(plan.dropped[0].start, ranges[1].start as u64);
        assert_eq!(
            load(&materialise(&plan, &damaged)).unwrap(),
            expected(&units[..1])
        );
        // Damage after the cut is cut away with the rest.
        let plan = plan_truncate(file(), &damaged, 1_700_000_000_000).unwrap();
        assert_eq!(
            load(&materialise(&plan, &damaged)).unwrap(),
            expected(&units[..0])
        );
    }

    #[test]
    fn truncate_cuts_redis_files_at_ts_lines_and_refuses_files_without_them() {
        let units = sets(5);
        let ts = |i: usize| 1_700_000_000 + 10 * i as i64;
        let (data, ranges) = redis_file(&units, Some(&ts));
        let plan = plan_truncate(file(), &data, 1_700_000_025_000).unwrap();
        assert_eq!(plan.dropped[0].start, ranges[3].0.start as u64);
        assert_eq!(
            load(&materialise(&plan, &data)).unwrap(),
            expected(&units[..3])
        );
        // A #TS line inside a transaction: the cut goes before its MULTI.
        let mut txn = data[..ranges[1].0.end].to_vec();
        let multi_at = txn.len();
        encode_command(&mut txn, &["multi"]);
        txn.extend_from_slice(b"#TS:1700000099\r\n");
        encode_command(&mut txn, &["set", "t", "1"]);
        encode_command(&mut txn, &["exec"]);
        let plan = plan_truncate(file(), &txn, 1_700_000_050_000).unwrap();
        assert_eq!(plan.dropped[0].start, multi_at as u64);
        assert_eq!(
            load(&materialise(&plan, &txn)).unwrap(),
            expected(&units[..2])
        );
        let (plain, _) = redis_file(&units, None);
        let refusal = plan_truncate(file(), &plain, 1_700_000_025_000).unwrap_err();
        assert!(refusal.0.contains("no timestamps"), "{refusal:?}");
    }

    /// Every damage kind on a Redis file, with and without `#TS:` lines.
    fn redis_damage_kinds(ts: Option<&dyn Fn(usize) -> i64>) {
        let units = sets(5);
        let (data, ranges) = redis_file(&units, ts);
        let first_cmd = |i: usize| ranges[i].1;
        assert!(check(file(), &data).is_empty());

        // Malformed RESP in the middle: from the damaged command to the
        // next unit (its #TS: line or its command).
        let mut damaged = data.clone();
        damaged[first_cmd(2)] = b'+';
        let problems = check(file(), &damaged);
        assert_eq!(problems.len(), 1, "{problems:?}");
        let p = &problems[0];
        assert_eq!(p.kind, ProblemKind::MalformedResp);
        assert_eq!(
            (p.start, p.end),
            (first_cmd(2) as u64, ranges[3].0.start as u64)
        );
        assert!(plan_fix(file(), &damaged).is_err());
        let plan = plan_salvage(file(), &damaged, false).unwrap();
        assert_eq!(
            load(&materialise(&plan, &damaged)).unwrap(),
            expected(&except(&units, &[2]))
        );

        // A torn tail: the last command cut short.
        let torn = &data[..data.len() - 5];
        let problems = check(file(), torn);
        assert_eq!(problems.len(), 1, "{problems:?}");
        assert_eq!(problems[0].kind, ProblemKind::TornTail);
        assert_eq!(problems[0].start, first_cmd(4) as u64);
        let plan = plan_fix(file(), torn).unwrap();
        assert_eq!(
            load(&materialise(&plan, torn)).unwrap(),
            expected(&units[..4])
        );

        // An unknown command between intact ones.
        let mut unknown = data[..ranges[2].0.end].to_vec();
        let at = unknown.len();
        encode_command(&mut unknown, &["flubber", "x", "y"]);
        let end = unknown.len();
        unknown.extend_from_slice(&data[ranges[3].0.start..]);
        let problems = check(file(), &unknown);
        assert_eq!(problems.len(), 1, "{problems:?}");
        assert_eq!(problems[0].kind, ProblemKind::UnknownCommand);
        assert_eq!(
            (problems[0].start, problems[0].end),
            (at as u64, end as u64)
        );
        assert!(plan_fix(file(), &unknown).is_err());
        let plan = plan_salvage(file(), &unknown, false).unwrap();
        assert_eq!(
            load(&materialise(&plan, &unknown)).unwrap(),
            expected(&units)
        );

        // An unfinished MULTI at the end.
        let mut multi = data.clone();
        let at = multi.len();
        encode_command(&mut multi, &["multi"]);
        encode_command(&mut multi, &["set", "x", "1"]);
        let problems = check(file(), &multi);
        assert_eq!(problems.len(), 1, "{problems:?}");
        assert_eq!(problems[0].kind, ProblemKind::UnfinishedMulti);
        assert_eq!(problems[0].remedy, Remedy::Fix);
        assert_eq!(problems[0].start, at as u64);
        let plan = plan_fix(file(), &multi).unwrap();
        assert_eq!(load(&materialise(&plan, &multi)).unwrap(), expected(&units));

        // Damage inside MULTI … EXEC: refused unless allowed.
        let mut txn = data.clone();
        encode_command(&mut txn, &["multi"]);
        let bad = txn.len();
        encode_command(&mut txn, &["set", "x", "1"]);
        encode_command(&mut txn, &["set", "y", "2"]);
        encode_command(&mut txn, &["exec"]);
        txn[bad + 1] = b'z';
        let problems = check(file(), &txn);
        assert_eq!(problems.len(), 1, "{problems:?}");
        assert_eq!(problems[0].start, bad as u64);
        let refusal = plan_salvage(file(), &txn, false).unwrap_err();
        assert!(
            refusal.0.contains("--allow-partial-transactions"),
            "{refusal:?}"
        );
        let plan = plan_salvage(file(), &txn, true).unwrap();
        assert!(
            plan.notes.iter().any(|n| n.contains("kept in part")),
            "{:?}",
            plan.notes
        );
        let mut want = units.clone();
        want.push(vec![cmd(0, "SET y 2")]);
        assert_eq!(load(&materialise(&plan, &txn)).unwrap(), expected(&want));
    }

    #[test]
    fn redis6_plain_files_every_damage_kind() {
        redis_damage_kinds(None);
    }

    #[test]
    fn redis7_files_with_ts_lines_every_damage_kind() {
        redis_damage_kinds(Some(&|i| 1_700_000_000 + i as i64));
    }

    #[test]
    fn redis_salvage_puts_select_back_after_a_transaction_whose_exec_was_lost() {
        let units = vec![vec![cmd(0, "SET a 1")]];
        let (mut data, _) = redis_file(&units, None);
        let multi = data.len();
        encode_command(&mut data, &["multi"]);
        encode_command(&mut data, &["select", "5"]);
        encode_command(&mut data, &["set", "b", "2"]);
        // The EXEC is damaged beyond reading.
        data.extend_from_slice(b"*1\r\n$4\r\nEX");
        let after = data.len();
        data.extend_from_slice(b"C\r\n");
        encode_command(&mut data, &["set", "c", "3"]);
        let problems = check(file(), &data);
        assert_eq!(problems.len(), 1, "{problems:?}");
        assert_eq!(problems[0].kind, ProblemKind::UnfinishedMulti);
        assert_eq!(problems[0].remedy, Remedy::Salvage);
        assert_eq!(problems[0].start, multi as u64);
        assert!(problems[0].end as usize > after);
        assert_eq!(problems[0].commands_or_keys, Some(1));
        let plan = plan_salvage(file(), &data, false).unwrap();
        assert!(
            plan.notes.iter().any(|n| n.contains("SELECT 5")),
            "{:?}",
            plan.notes
        );
        // The transaction is dropped; `c` stays in the database it was
        // written to.
        let want = expected(&[vec![cmd(0, "SET a 1")], vec![cmd(5, "SET c 3")]]);
        assert_eq!(load(&materialise(&plan, &data)).unwrap(), want);
    }

    /// A snapshot of keys p0..p2 (and a hash) saved by the engine, in the
    /// given format; the units that make them.
    fn snapshot(rdb: bool) -> (Vec<u8>, Unit) {
        let dir = tempfile::tempdir().expect("tempdir");
        let mut config = Config::in_memory();
        config.dir = dir.path().to_path_buf();
        if rdb {
            config.snapshot_format = hozon::config::SnapshotFormat::Rdb;
        }
        let unit = vec![
            cmd(0, "SET p0 zero"),
            cmd(0, "SET p1 one"),
            cmd(2, "HSET h f v g w"),
        ];
        let mut engine =
            Engine::open_with_io(config, Arc::new(hozon::persist::io::RealIo)).expect("engine");
        let mut s = engine.new_session();
        s.authenticated = true;
        for (db, argv) in &unit {
            let dbs = db.to_string();
            run(&mut engine, &mut s, &[b"SELECT", dbs.as_bytes()]);
            let argv: Vec<&[u8]> = argv.iter().map(|a| a.as_bytes()).collect();
            run(&mut engine, &mut s, &argv);
        }
        let reply = run(&mut engine, &mut s, &[b"SAVE"]);
        assert!(matches!(reply, Reply::Simple(_)), "{reply:?}");
        let name = if rdb { "dump.rdb" } else { "dump.hoz" };
        drop(engine);
        (std::fs::read(dir.path().join(name)).expect("saved"), unit)
    }

    #[test]
    fn dump_hoz_preamble_then_a_damaged_batch_reports_absolute_offsets_and_salvages() {
        let (image, preamble_unit) = snapshot(false);
        let mut log = image.clone();
        log.extend_from_slice(FILE_HEADER);
        let units = sets(4);
        let (mut data, ranges) = hozon_log(log, &units, |i| 5000 + i as i64);
        assert_eq!(
            load(&data).unwrap(),
            expected([&preamble_unit].into_iter().chain(&units))
        );
        data[ranges[1].start + 20] ^= 0x02;
        let problems = check(file(), &data);
        assert_eq!(problems.len(), 1, "{problems:?}");
        assert!(ranges[1].start > image.len());
        assert_eq!(
            (problems[0].start, problems[0].end),
            (ranges[1].start as u64, ranges[1].end as u64)
        );
        let plan = plan_salvage(file(), &data, false).unwrap();
        let kept = except(&units, &[1]);
        let want = expected([&preamble_unit].into_iter().chain(&kept));
        let out = materialise(&plan, &data);
        assert_eq!(load(&out).unwrap(), want);
        // As the server loads it from its directory.
        let dir = tempfile::tempdir().expect("tempdir");
        std::fs::write(dir.path().join("appendonly.aof"), &out).expect("write");
        let mut config = Config::in_memory();
        config.appendonly = true;
        config.dir = dir.path().to_path_buf();
        config.appendfilename = "appendonly.aof".into();
        let mut engine = Engine::open_with_io(config, Arc::new(hozon::persist::io::RealIo))
            .expect("the server opens the salvaged file");
        assert_eq!(state(&mut engine), want);
    }

    #[test]
    fn rdb_preamble_then_redis_resp_with_damage_salvages() {
        let (image, preamble_unit) = snapshot(true);
        let units = sets(4);
        let ts = |i: usize| 1_700_000_000 + i as i64;
        let (mut data, ranges) = redis_log(image.clone(), &units, Some(&ts));
        data[ranges[2].1 + 1] = b'x';
        let problems = check(file(), &data);
        assert_eq!(problems.len(), 1, "{problems:?}");
        assert_eq!(
            (problems[0].start, problems[0].end),
            (ranges[2].1 as u64, ranges[3].0.start as u64)
        );
        let plan = plan_salvage(file(), &data, false).unwrap();
        let kept = except(&units, &[2]);
        assert_eq!(
            load(&materialise(&plan, &data)).unwrap(),
            expected([&preamble_unit].into_iter().chain(&kept))
        );
        // The preamble is kept by truncate.
        let plan = plan_truncate(file(), &data, 0).unwrap();
        assert_eq!(plan.dropped[0].start, image.len() as u64);
    }

    #[test]
    fn a_damaged_preamble_is_reported_and_the_log_after_it_still_checked() {
        let (mut image, _) = snapshot(false);
        let len = image.len();
        image[len / 2] ^= 0x01;
        image.extend_from_slice(FILE_HEADER);
        let units = sets(4);
        let (mut data, ranges) = hozon_log(image, &units, |i| 5000 + i as i64);
        data[ranges[1].start + 20] ^= 0x02;
        let problems = check(file(), &data);
        assert_eq!(problems.len(), 2, "{problems:?}");
        assert_eq!(problems[0].kind, ProblemKind::DamagedPreamble);
        assert_eq!((problems[0].start, problems[0].end), (0, len as u64));
        assert_eq!(problems[1].start, ranges[1].start as u64);
        let refusal = plan_salvage(file(), &data, true).unwrap_err();
        assert!(refusal.0.contains("preamble"), "{refusal:?}");
        assert!(plan_fix(file(), &data).is_err());
    }

    #[test]
    fn a_file_that_starts_like_no_aof_is_not_cut_away() {
        let (image, _) = snapshot(true);
        let mut data = image.clone();
        data[0] ^= 0x01; // "REDIS" damaged: no longer recognised as RDB
        let (data, _) = redis_log(data, &sets(2), None);
        let problems = check(file(), &data);
        assert_eq!(problems[0].start, 0);
        assert_eq!(problems[0].remedy, Remedy::None);
        assert!(plan_fix(file(), &data).is_err());
        assert!(plan_salvage(file(), &data, true).is_err());
        assert!(plan_fix(file(), b"garbage").is_err());
    }

    /// An AOF written by a real Redis 7 (`#TS:` lines on), when
    /// `redis-server` is installed: damaged in the middle, it salvages
    /// to exactly the other commands.
    #[test]
    fn a_real_redis7_aof_with_ts_lines_salvages() {
        use std::process::{Command, Stdio};
        let dir = tempfile::tempdir().expect("tempdir");
        let sock = dir.path().join("s.sock");
        let started = Command::new("redis-server")
            .args(["--port", "0", "--save", "", "--daemonize", "yes"])
            .args(["--appendonly", "yes", "--aof-timestamp-enabled", "yes"])
            .args(["--appendfsync", "always"])
            .arg("--dir")
            .arg(dir.path())
            .arg("--unixsocket")
            .arg(&sock)
            .stdout(Stdio::null())
            .status();
        if !started.is_ok_and(|s| s.success()) {
            eprintln!("redis-server is not available: skipped");
            return;
        }
        let cli = |input: &str| {
            let mut child = Command::new("redis-cli")
                .arg("-s")
                .arg(&sock)
                .stdin(Stdio::piped())
                .stdout(Stdio::null())
                .spawn()
                .expect("redis-cli");
            use std::io::Write;
            let mut stdin = child.stdin.take().expect("piped stdin");
            stdin
                .write_all(input.as_bytes())
                .expect("write to redis-cli");
            drop(stdin);
            child.wait().expect("redis-cli ran")
        };
        for _ in 0..100 {
            if sock.exists() {
                break;
            }
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
        cli("SET a 1\nSET b 2\nRPUSH l x y\nSELECT 3\nSET c 3\n");
        cli("SHUTDOWN NOSAVE\n");
        let incr = dir.path().join("appendonlydir/appendonly.aof.1.incr.aof");
        let data = std::fs::read(&incr).expect("Redis wrote its incr AOF");
        assert!(
            data.starts_with(b"#TS:"),
            "{:?}",
            String::from_utf8_lossy(&data)
        );
        let mut set_b = Vec::new();
        encode_command(&mut set_b, &["SET", "b", "2"]);
        let at = find(&data, &set_b).expect("SET b in the file");
        let mut damaged = data.clone();
        damaged[at + 4] = b'x';
        let problems = check(file(), &damaged);
        assert_eq!(problems.len(), 1, "{problems:?}");
        assert_eq!(
            (problems[0].start, problems[0].end),
            (at as u64, (at + set_b.len()) as u64)
        );
        let plan = plan_salvage(file(), &damaged, false).unwrap();
        let want = expected(&[vec![
            cmd(0, "SET a 1"),
            cmd(0, "RPUSH l x y"),
            cmd(3, "SET c 3"),
        ]]);
        assert_eq!(load(&materialise(&plan, &damaged)).unwrap(), want);
        let plan = plan_truncate(file(), &data, 0).unwrap();
        assert_eq!(load(&materialise(&plan, &data)).unwrap(), State::new());
    }

    #[test]
    fn an_unknown_command_in_an_unfinished_multi_at_the_end_is_cut_with_it() {
        let units = sets(2);
        let (mut data, _) = redis_file(&units, None);
        let multi = data.len();
        encode_command(&mut data, &["multi"]);
        encode_command(&mut data, &["set", "x", "1"]);
        encode_command(&mut data, &["flubber"]);
        encode_command(&mut data, &["set", "y", "2"]);
        let problems = check(file(), &data);
        assert_eq!(problems.len(), 1, "{problems:?}");
        assert_eq!(problems[0].kind, ProblemKind::UnfinishedMulti);
        assert_eq!(
            (problems[0].start, problems[0].end),
            (multi as u64, data.len() as u64)
        );
        assert_eq!(problems[0].commands_or_keys, Some(3));
        let plan = plan_fix(file(), &data).unwrap();
        assert_eq!(load(&materialise(&plan, &data)).unwrap(), expected(&units));
    }

    /// A small deterministic generator (xorshift).
    struct Rng(u64);

    impl Rng {
        fn below(&mut self, n: usize) -> usize {
            self.0 ^= self.0 << 13;
            self.0 ^= self.0 >> 7;
            self.0 ^= self.0 << 17;
            (self.0 % n as u64) as usize
        }
    }

    #[test]
    fn random_damage_never_panics_and_every_plan_made_loads() {
        let hozon_units = vec![
            vec![cmd(0, "SET a 1"), cmd(0, "APPEND a xy")],
            vec![cmd(1, "SET b 2")],
            vec![cmd(1, "DEL a b"), cmd(0, "SET c 3")],
            vec![cmd(0, "APPEND c zz")],
        ];
        let (hozon, _) = hozon_file(&hozon_units, |i| 1_700_000_000_000 + 1000 * i as i64);
        let plain_units = vec![
            vec![cmd(0, "SET a 1"), cmd(0, "APPEND a xy")],
            vec![cmd(1, "SET b 2")],
            vec![cmd(1, "DEL a b"), cmd(0, "SET c 3")],
        ];
        let ts = |i: usize| 1_700_000_000 + i as i64;
        let (mut plain, _) = redis_file(&plain_units, Some(&ts));
        encode_command(&mut plain, &["multi"]);
        encode_command(&mut plain, &["set", "t", "1"]);
        encode_command(&mut plain, &["append", "t", "2"]);
        encode_command(&mut plain, &["exec"]);
        // A Redis file hozon appended to, and a file with a preamble.
        let mut mixed = plain.clone();
        mixed.extend_from_slice(&hozon);
        let (mut preambled, _) = snapshot(false);
        preambled.extend_from_slice(&hozon);
        let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
        let mut salvaged = 0;
        for original in [&hozon, &plain, &mixed, &preambled] {
            for round in 0..2000 {
                let mut data = original.clone();
                match rng.below(4) {
                    0 => data.truncate(rng.below(data.len())),
                    _ => {
                        for _ in 0..=rng.below(3) {
                            let at = rng.below(data.len());
                            data[at] ^= 1 << rng.below(8);
                        }
                    }
                }
                let what = format!("round {round}: {:?}", String::from_utf8_lossy(&data));
                let problems = check(file(), &data);
                for p in &problems {
                    assert!(
                        p.start <= p.end && p.end <= data.len() as u64,
                        "{what}: {p:?}"
                    );
                }
                // check agrees with the loader.
                assert_eq!(
                    problems.is_empty(),
                    load(&data).is_ok(),
                    "{what}: {problems:?} {:?}",
                    load(&data)
                );
                let plans = [
                    plan_fix(file(), &data),
                    plan_salvage(file(), &data, false),
                    plan_salvage(file(), &data, true),
                    plan_truncate(file(), &data, 1_700_000_001_500),
                ];
                for plan in plans.iter().flatten() {
                    let out = materialise(plan, &data);
                    if plan.content.is_some() {
                        salvaged += 1;
                        assert!(load(&out).is_ok(), "{what}: {plan:?}: {:?}", load(&out));
                        let left = check(file(), &out);
                        assert!(left.is_empty(), "{what}: {plan:?} leaves {left:?}");
                    }
                }
            }
        }
        assert!(salvaged > 100, "{salvaged}");
        // Pure noise, made of the bytes RESP is made of.
        let alphabet = b"*$#\r\n0123-SETselectmultiexc hz1TS:";
        for _ in 0..2000 {
            let len = rng.below(120);
            let data: Vec<u8> = (0..len)
                .map(|_| alphabet[rng.below(alphabet.len())])
                .collect();
            let _ = check(file(), &data);
            for plan in [
                plan_fix(file(), &data),
                plan_salvage(file(), &data, true),
                plan_truncate(file(), &data, 5000),
            ]
            .iter()
            .flatten()
            {
                if plan.content.is_some() {
                    let out = materialise(plan, &data);
                    assert!(load(&out).is_ok(), "{data:?}: {plan:?}");
                }
            }
        }
    }
}
