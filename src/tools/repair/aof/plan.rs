//! The plans `fix`, `salvage` and `truncate --before` carry out, as
//! decisions over the units [`super::analyse`] found.

use std::ops::Range;
use std::path::Path;

use super::*;
use crate::persist::aof;
use crate::tools::repair::model::{Content, Dropped, Piece, Plan, Problem, Refusal, Remedy};

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
pub(super) fn problems_of(analysis: &Analysis, file: &Path) -> Vec<Problem> {
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
