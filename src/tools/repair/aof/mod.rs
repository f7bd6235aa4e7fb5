//! AOF analysis and repair plans (docs/repair.md): every damaged region of
//! one append-only file (hozon's checksummed batches, Redis 6 plain RESP,
//! Redis 7 RESP with `#TS:` lines, after a dump.hoz or RDB preamble), and
//! the plans `fix`, `salvage` and `truncate --before` carry out.
//!
//! One pass (`analyse`) splits the file into units in file order: the
//! preamble, header lines, verified batches, plain commands, `#` lines and
//! damaged regions. After a damaged region the reader resynchronises
//! (hozon: the next batch that verifies; Redis: the next line start
//! holding a complete, known command) and goes on, so every problem is
//! found. The plans are then decisions over that list.

//!
//! Support code of `hozon-repair` (and the `repair_salvage` fuzz check),
//! not a stable API.

mod keys;
mod plan;
#[cfg(test)]
mod tests;

pub use plan::{check, plan_fix, plan_salvage, plan_truncate};

use std::ops::Range;
use std::path::Path;

use crate::persist::aof::{self, CommandAt};
use crate::tools::repair::model::{Dropped, Keys, Problem, ProblemKind, Remedy};
use keys::{commands_and_keys, last_select_in};

/// Longest `#` line the loader reads (Redis reads 1024).
const LINE_MAX_BYTES: usize = 1024;

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
    use crate::persist::snapshot;
    use crate::rdb::reader;
    let limits = crate::types::EncodingLimits::default();
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
        let options = snapshot::ReadOptions {
            limits,
            ..snapshot::ReadOptions::default()
        };
        let verified = snapshot::load_streaming(&data[..len], &options, |_| Ok(()));
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
            databases: crate::config::Config::in_memory().databases,
            skip_expired_before_ms: None,
            now_ms: crate::engine::now_ms(),
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
                    .and_then(crate::types::num::parse_i64)
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
                    .is_some_and(|t| crate::types::num::parse_i64(t).is_some()),
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
    let Some(spec) = crate::command::lookup(name) else {
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
