//! `aof`: what an append-only file holds, command by command — a
//! histogram of command names, operations per key, a timeline by the
//! batches' timestamps — or the commands themselves in a byte or time
//! range. Inputs: hozon's AOF (optionally after a dump.hoz or RDB
//! preamble), Redis 6 plain AOFs, Redis 7 AOFs with `#TS:` lines, and a
//! Redis 7 `appendonlydir` or its manifest (every listed file in order).
//!
//! One pass over the mapped files with [`aof::walk`]; memory stays
//! bounded whatever the file size (capped key and name tables, a timeline
//! that widens its buckets instead of growing, `--list` streamed).

use std::collections::{BTreeMap, HashMap};
use std::hash::{Hash, Hasher};
use std::io::{self, Write};
use std::ops::ControlFlow;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use clap::Args;
use hozon::persist::{aof, snapshot};
use hozon::rdb::reader;
use hozon::tools::{EXIT_PROBLEMS, EXIT_USAGE_OR_IO};

use hozon::tools::time::{rfc3339_ms, utc_text, SubMs};

use crate::info::Input;
use crate::report::{self, Node};
use hozon::tools::report::escape_key;

/// Most keys the per-key table tracks at once.
pub const DEFAULT_KEY_CAP: u64 = 100_000;
/// Most distinct command names tracked; later new names count as `(other)`.
const NAME_CAP: usize = 1000;
/// Command names longer than this are tracked by their first bytes.
const NAME_MAX_BYTES: usize = 64;
/// Keys longer than this are tracked by their first bytes, their length
/// and a hash of the whole key (so the table's memory per key is bounded).
const KEY_STORED_MAX_BYTES: usize = 256;
/// Rows of the default timeline.
const TIMELINE_ROWS: i64 = 50;
/// Buckets kept while walking with an automatic bucket size.
const AUTO_BUCKETS_MAX: usize = 4096;
/// Buckets kept while walking with `--bucket`; beyond, the bucket widens.
const FIXED_BUCKETS_MAX: usize = 100_000;
/// Empty buckets are listed between non-empty ones up to this many rows.
const DENSE_ROWS_MAX: i64 = 1000;
/// Automatic bucket sizes in seconds; each divides the next, so counts
/// merge exactly when the size grows (beyond the last: doubling).
const BUCKET_LADDER_S: [i64; 12] = [
    1, 5, 10, 30, 60, 300, 600, 1800, 3600, 21_600, 86_400, 604_800,
];

/// Arguments of `aof`.
#[derive(Debug, Args)]
pub struct AofArgs {
    /// An AOF (hozon's, possibly after a dump.hoz or RDB preamble, or
    /// Redis's), a Redis 7 AOF manifest or its appendonlydir.
    pub path: PathBuf,
    /// Only commands at or after this time: RFC 3339
    /// (`2026-11-30T12:04:00Z`, `2026-11-30T13:04:00+01:00`) or Unix ms.
    /// Commands without a timestamp are left out.
    #[arg(long, value_name = "TIME", value_parser = parse_time)]
    pub since: Option<i64>,
    /// Only commands before this time (exclusive; same forms as --since).
    #[arg(long, value_name = "TIME", value_parser = parse_time)]
    pub until: Option<i64>,
    /// List the N keys with the most operations.
    #[arg(long, value_name = "N", default_value_t = 20)]
    pub top: usize,
    /// Timeline bucket width in seconds (default: chosen from the time
    /// span so that there are at most about 50 rows).
    #[arg(long, value_name = "SECONDS", value_parser = clap::value_parser!(u64).range(1..=1_000_000_000))]
    pub bucket: Option<u64>,
    /// Print the selected commands (file, offset, db, time, arguments)
    /// instead of statistics; with --json, one JSON object per line.
    #[arg(long)]
    pub list: bool,
    /// Only commands starting at or after this byte offset of their file.
    #[arg(long, value_name = "N")]
    pub from_byte: Option<u64>,
    /// Only commands starting before this byte offset of their file.
    #[arg(long, value_name = "N")]
    pub to_byte: Option<u64>,
    /// Manifest inputs: only this file of the manifest.
    #[arg(long, value_name = "NAME")]
    pub file: Option<String>,
    /// With --list: print at most N commands.
    #[arg(long, value_name = "N", requires = "list")]
    pub limit: Option<u64>,
    /// Most keys tracked at once (tests use a small cap).
    #[arg(long, hide = true, value_name = "N", default_value_t = DEFAULT_KEY_CAP, value_parser = clap::value_parser!(u64).range(2..))]
    pub key_cap: u64,
}

/// Runs `aof`; the exit code is 0 (fine), 1 (the input has problems) or
/// 2 (usage or I/O error).
pub fn run(args: &AofArgs, json: bool) -> ExitCode {
    match run_inner(args, json) {
        Ok(code) => ExitCode::from(code),
        Err(message) => {
            let _ = writeln!(io::stderr(), "hozon-inspect: {message}");
            ExitCode::from(EXIT_USAGE_OR_IO)
        }
    }
}

// ---------------------------------------------------------------------------
// Inputs.

/// One file to walk.
struct Part {
    /// The file's name in the manifest (None for a single-file input).
    name: Option<String>,
    /// `base` or `incr` for manifest files, `aof` otherwise.
    role: &'static str,
    path: PathBuf,
}

impl Part {
    fn label(&self) -> String {
        match &self.name {
            Some(n) => n.clone(),
            None => self.path.display().to_string(),
        }
    }
}

/// The files of the input in load order, and the manifest if any.
fn resolve(path: &Path) -> Result<(Vec<Part>, Option<PathBuf>), String> {
    let meta = std::fs::metadata(path).map_err(|e| format!("{}: {e}", path.display()))?;
    let manifest = if meta.is_dir() {
        Some(hozon::tools::manifest::find_manifest(path)?)
    } else {
        let input = Input::open(path)?;
        let data = input.bytes();
        (data.starts_with(b"file ") && aof::parse_redis_manifest(data).is_ok())
            .then(|| path.to_path_buf())
    };
    let Some(manifest) = manifest else {
        let part = Part {
            name: None,
            role: "aof",
            path: path.to_path_buf(),
        };
        return Ok((vec![part], None));
    };
    let input = Input::open(&manifest)?;
    let entries = aof::parse_redis_manifest(input.bytes())
        .map_err(|e| format!("{}: {e}", manifest.display()))?;
    let dir = manifest
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(Path::new("."))
        .to_path_buf();
    let parts = entries
        .into_iter()
        .map(|(name, is_base)| Part {
            path: dir.join(&name),
            name: Some(name),
            role: if is_base { "base" } else { "incr" },
        })
        .collect();
    Ok((parts, Some(manifest)))
}

/// What precedes the log in a file: its kind, length and key count.
struct Preamble {
    kind: &'static str,
    len: usize,
    keys: u64,
}

/// Finds the preamble of `data`. Err(Some(..)) is damage in it (offset,
/// message); Err(None) means the file is not an AOF at all.
fn preamble(data: &[u8]) -> Result<Option<Preamble>, Option<(u64, String)>> {
    if data.starts_with(&snapshot::MAGIC) {
        return match snapshot::image_len(data)
            .and_then(|len| snapshot::read_summary(&data[..len]).map(|s| (len, s)))
        {
            Ok((len, s)) => Ok(Some(Preamble {
                kind: "dump.hoz",
                len,
                keys: s.stats.keys,
            })),
            Err(e) => Err(Some((
                crate::info::snapshot_offset(&e),
                format!("snapshot preamble: {e}"),
            ))),
        };
    }
    if reader::is_rdb(data) {
        return match reader::scan(data) {
            Ok(s) => Ok(Some(Preamble {
                kind: "rdb",
                len: s.len,
                keys: s.keys_per_db.values().sum(),
            })),
            Err(e) => Err(Some((e.offset, format!("RDB preamble: {e}")))),
        };
    }
    if data.is_empty() || data[0] == b'*' || data[0] == b'#' {
        return Ok(None);
    }
    Err(None)
}

// ---------------------------------------------------------------------------
// Selection.

/// Which commands count.
struct Selection {
    since_ms: Option<i64>,
    until_ms: Option<i64>,
    from_byte: Option<u64>,
    to_byte: Option<u64>,
}

impl Selection {
    fn takes(&self, offset: u64, ts_ms: Option<i64>) -> bool {
        if self.from_byte.is_some_and(|f| offset < f) || self.to_byte.is_some_and(|t| offset >= t) {
            return false;
        }
        if self.since_ms.is_none() && self.until_ms.is_none() {
            return true;
        }
        let Some(ts) = ts_ms else {
            return false;
        };
        !(self.since_ms.is_some_and(|s| ts < s) || self.until_ms.is_some_and(|u| ts >= u))
    }

    fn describe(&self, file: Option<&str>) -> Node {
        let mut n = Node::object();
        if let Some(s) = self.since_ms {
            n.set("since_ms", s);
            n.set("since_utc", utc_text(s));
        }
        if let Some(u) = self.until_ms {
            n.set("until_ms", u);
            n.set("until_utc", utc_text(u));
        }
        if let Some(f) = self.from_byte {
            n.set("from_byte", f);
        }
        if let Some(t) = self.to_byte {
            n.set("to_byte", t);
        }
        if let Some(f) = file {
            n.set("file", f);
        }
        n
    }
}

// ---------------------------------------------------------------------------
// Keys of a command.

/// Calls `f` with each key argument of `argv`, as COMMAND GETKEYS finds
/// them ([`hozon::tools::keys_of`]: the key specs, a container command's
/// subcommand's; nothing for a command GETKEYS would refuse).
fn for_each_key(argv: &[&[u8]], f: &mut dyn FnMut(&[u8])) {
    for pos in hozon::tools::keys_of(argv) {
        f(argv[pos]);
    }
}

/// The histogram name of a command: lower case, with the subcommand
/// (`xgroup|create`) for container commands.
fn command_name(argv: &[&[u8]], out: &mut Vec<u8>) {
    out.clear();
    let name = &argv[0][..argv[0].len().min(NAME_MAX_BYTES)];
    out.extend(name.iter().map(u8::to_ascii_lowercase));
    if let Some(sub) = hozon::tools::subcommand_name(argv) {
        out.push(b'|');
        out.extend_from_slice(sub.as_bytes());
    }
}

// ---------------------------------------------------------------------------
// Tables.

#[derive(Debug, Clone, Copy, Default)]
struct Tally {
    ops: u64,
    bytes: u64,
}

impl Tally {
    fn add(&mut self, other: Tally) {
        self.ops += other.ops;
        self.bytes += other.bytes;
    }
}

/// Operations per (db, key), in a table of at most `cap` keys. When a new
/// key arrives at a full table, the half of the table with the fewest
/// operations (ties: the greater key) is folded into `folded`; a folded
/// key seen again starts from zero, so after a fold listed counts are
/// lower bounds while listed + folded stay exact.
///
/// A table key is `db (8 bytes BE)`, a flag byte, and the key itself —
/// or, for keys longer than [`KEY_STORED_MAX_BYTES`], its first bytes
/// followed by its length and a 64-bit hash of the whole key.
struct KeyTable {
    cap: usize,
    table: HashMap<Box<[u8]>, Tally>,
    folded: Tally,
    folded_keys: u64,
    scratch: Vec<u8>,
}

impl KeyTable {
    fn new(cap: usize) -> KeyTable {
        KeyTable {
            cap,
            table: HashMap::new(),
            folded: Tally::default(),
            folded_keys: 0,
            scratch: Vec::new(),
        }
    }

    fn add(&mut self, db: u64, key: &[u8], bytes: u64) {
        let id = &mut self.scratch;
        id.clear();
        id.extend_from_slice(&db.to_be_bytes());
        if key.len() <= KEY_STORED_MAX_BYTES {
            id.push(0);
            id.extend_from_slice(key);
        } else {
            id.push(1);
            id.extend_from_slice(&key[..KEY_STORED_MAX_BYTES]);
            id.extend_from_slice(&(key.len() as u64).to_be_bytes());
            let mut h = std::collections::hash_map::DefaultHasher::new();
            key.hash(&mut h);
            id.extend_from_slice(&h.finish().to_be_bytes());
        }
        let one = Tally { ops: 1, bytes };
        if let Some(t) = self.table.get_mut(&id[..]) {
            t.add(one);
            return;
        }
        if self.table.len() >= self.cap {
            self.fold();
        }
        self.table
            .insert(self.scratch.clone().into_boxed_slice(), one);
    }

    fn fold(&mut self) {
        let mut all: Vec<(Box<[u8]>, Tally)> = self.table.drain().collect();
        let keep = self.cap / 2;
        if keep < all.len() {
            // Best first: more operations, then the smaller key.
            all.select_nth_unstable_by(keep, |a, b| {
                b.1.ops.cmp(&a.1.ops).then_with(|| a.0.cmp(&b.0))
            });
            for (_, t) in all.drain(keep..) {
                self.folded.add(t);
                self.folded_keys += 1;
            }
        }
        self.table.extend(all);
    }

    /// (db, key text, tally) of the `n` keys with the most operations.
    fn top(&self, n: usize) -> Vec<(u64, String, Tally)> {
        let mut all: Vec<(&Box<[u8]>, &Tally)> = self.table.iter().collect();
        all.sort_by(|a, b| b.1.ops.cmp(&a.1.ops).then_with(|| a.0.cmp(b.0)));
        all.truncate(n);
        all.into_iter()
            .map(|(id, t)| {
                let mut db = [0u8; 8];
                db.copy_from_slice(&id[..8]);
                let db = u64::from_be_bytes(db);
                let text = if id[8] == 0 {
                    escape_key(&id[9..])
                } else {
                    let stored = &id[9..9 + KEY_STORED_MAX_BYTES];
                    let mut len = [0u8; 8];
                    len.copy_from_slice(&id[9 + KEY_STORED_MAX_BYTES..17 + KEY_STORED_MAX_BYTES]);
                    format!(
                        "{}... ({} bytes)",
                        escape_key(stored),
                        u64::from_be_bytes(len)
                    )
                };
                (db, text, *t)
            })
            .collect()
    }
}

/// Commands and bytes per time bucket (bucket starts are multiples of
/// the width since the Unix epoch).
struct Timeline {
    bucket_ms: i64,
    /// `--bucket` given: keep its width unless memory forces wider.
    fixed: bool,
    widened: bool,
    rows: BTreeMap<i64, Tally>,
}

impl Timeline {
    fn new(bucket_s: Option<u64>) -> Timeline {
        Timeline {
            bucket_ms: bucket_s.map_or(1000, |s| s as i64 * 1000),
            fixed: bucket_s.is_some(),
            widened: false,
            rows: BTreeMap::new(),
        }
    }

    fn add(&mut self, ts_ms: i64, bytes: u64) {
        let start = bucket_start(ts_ms, self.bucket_ms);
        self.rows
            .entry(start)
            .or_default()
            .add(Tally { ops: 1, bytes });
        let max = if self.fixed {
            FIXED_BUCKETS_MAX
        } else {
            AUTO_BUCKETS_MAX
        };
        if self.rows.len() > max {
            if self.fixed {
                self.widened = true;
            }
            self.widen();
        }
    }

    /// The next width (a multiple of this one) and the rows merged into it.
    fn widen(&mut self) {
        let s = self.bucket_ms / 1000;
        let next_s = if self.fixed {
            s.saturating_mul(2)
        } else {
            BUCKET_LADDER_S
                .iter()
                .copied()
                .find(|&l| l > s)
                .unwrap_or(s.saturating_mul(2))
        };
        self.bucket_ms = next_s.saturating_mul(1000);
        let old = std::mem::take(&mut self.rows);
        for (start, t) in old {
            let to = bucket_start(start, self.bucket_ms);
            self.rows.entry(to).or_default().add(t);
        }
    }

    /// Default width: widen until the span holds at most ~50 buckets.
    fn settle(&mut self) {
        if self.fixed {
            return;
        }
        while let (Some((&first, _)), Some((&last, _))) =
            (self.rows.first_key_value(), self.rows.last_key_value())
        {
            if last.saturating_sub(first) / self.bucket_ms < TIMELINE_ROWS {
                break;
            }
            self.widen();
        }
    }

    fn node(&self, no_timestamp: Tally) -> Node {
        let row = |start: i64, t: Tally| {
            Node::object()
                .with("start_utc", utc_text(start))
                .with("start_ms", start)
                .with("commands", t.ops)
                .with("bytes", t.bytes)
        };
        let mut rows = Vec::new();
        let dense = match (self.rows.first_key_value(), self.rows.last_key_value()) {
            (Some((&f, _)), Some((&l, _))) => l.saturating_sub(f) / self.bucket_ms < DENSE_ROWS_MAX,
            _ => false,
        };
        if dense {
            let (&first, _) = self.rows.first_key_value().expect("dense implies rows");
            let (&last, _) = self.rows.last_key_value().expect("dense implies rows");
            let mut at = first;
            while at <= last {
                rows.push(row(at, self.rows.get(&at).copied().unwrap_or_default()));
                let Some(next) = at.checked_add(self.bucket_ms) else {
                    break;
                };
                at = next;
            }
        } else {
            rows.extend(self.rows.iter().map(|(&s, &t)| row(s, t)));
        }
        Node::object()
            .with("bucket_seconds", self.bucket_ms / 1000)
            .with("bucket_widened", self.widened)
            .with("no_timestamp_commands", no_timestamp.ops)
            .with("no_timestamp_bytes", no_timestamp.bytes)
            .with("rows", rows)
    }
}

/// The start of the bucket of width `bucket_ms` holding `ts_ms` (a
/// multiple of the width; clamped at the ends of the i64 range, which a
/// damaged timestamp can reach).
fn bucket_start(ts_ms: i64, bucket_ms: i64) -> i64 {
    ts_ms.saturating_sub(ts_ms.rem_euclid(bucket_ms))
}

// ---------------------------------------------------------------------------
// The walk.

/// Statistics of the selected commands.
struct Stats {
    /// Selected commands other than SELECT, MULTI and EXEC.
    commands: u64,
    /// Selected SELECT, MULTI and EXEC commands.
    control: u64,
    bytes: u64,
    batches: u64,
    transactions: u64,
    no_timestamp: Tally,
    first_ts_ms: Option<i64>,
    last_ts_ms: Option<i64>,
    names: HashMap<Vec<u8>, Tally>,
    other_names: Tally,
    keys: KeyTable,
    timeline: Timeline,
    name_buf: Vec<u8>,
}

impl Stats {
    fn new(args: &AofArgs) -> Stats {
        Stats {
            commands: 0,
            control: 0,
            bytes: 0,
            batches: 0,
            transactions: 0,
            no_timestamp: Tally::default(),
            first_ts_ms: None,
            last_ts_ms: None,
            names: HashMap::new(),
            other_names: Tally::default(),
            keys: KeyTable::new(usize::try_from(args.key_cap).unwrap_or(usize::MAX)),
            timeline: Timeline::new(args.bucket),
            name_buf: Vec::new(),
        }
    }

    fn add(&mut self, c: &aof::WalkCommand<'_>, db: u64) {
        let name = c.argv[0];
        let is = |n: &[u8]| name.eq_ignore_ascii_case(n);
        let one = Tally {
            ops: 1,
            bytes: c.len,
        };
        if is(b"SELECT") || is(b"MULTI") || is(b"EXEC") {
            self.control += 1;
            if is(b"EXEC") && c.in_multi {
                self.transactions += 1;
            }
        } else {
            self.commands += 1;
            for_each_key(c.argv, &mut |key| self.keys.add(db, key, c.len));
        }
        self.bytes += c.len;
        command_name(c.argv, &mut self.name_buf);
        if let Some(t) = self.names.get_mut(&self.name_buf) {
            t.add(one);
        } else if self.names.len() < NAME_CAP {
            self.names.insert(self.name_buf.clone(), one);
        } else {
            self.other_names.add(one);
        }
        match c.ts_ms {
            Some(ts) => {
                self.first_ts_ms = Some(self.first_ts_ms.map_or(ts, |f| f.min(ts)));
                self.last_ts_ms = Some(self.last_ts_ms.map_or(ts, |l| l.max(ts)));
                self.timeline.add(ts, c.len);
            }
            None => self.no_timestamp.add(one),
        }
    }
}

/// Where the selected commands go.
enum Sink<'o> {
    Stats(Box<Stats>),
    List {
        out: &'o mut dyn Write,
        json: bool,
        /// Print the file column (manifest inputs).
        /// Width of the file column (manifest inputs), 0 without one.
        file_width: usize,
        printed: u64,
        limit: Option<u64>,
        /// The output failed (a closed pipe ends quietly, other errors
        /// are reported).
        error: Option<io::Error>,
    },
}

impl Sink<'_> {
    /// Takes one selected command; Break when the output is done.
    fn take(
        &mut self,
        file: &str,
        offset: u64,
        c: &aof::WalkCommand<'_>,
        db: u64,
    ) -> ControlFlow<()> {
        match self {
            Sink::Stats(stats) => {
                stats.add(c, db);
                ControlFlow::Continue(())
            }
            Sink::List {
                out,
                json,
                file_width,
                printed,
                limit,
                error,
            } => {
                if limit.is_some_and(|l| *printed >= l) {
                    return ControlFlow::Break(());
                }
                let written = if *json {
                    let mut row = Node::object();
                    row.set("file", file);
                    row.set("offset", offset);
                    row.set("db", db);
                    row.set("ts_ms", c.ts_ms);
                    row.set("utc", c.ts_ms.map(utc_text));
                    row.set("in_multi", c.in_multi);
                    row.set("bytes", c.len);
                    row.set(
                        "argv",
                        c.argv
                            .iter()
                            .map(|a| Node::Str(escape_key(a)))
                            .collect::<Vec<_>>(),
                    );
                    report::write_json(*out, &row)
                } else {
                    let time = c.ts_ms.map_or_else(|| "-".to_string(), utc_text);
                    let argv: Vec<String> = c.argv.iter().map(|a| text_arg(a)).collect();
                    let line = if *file_width > 0 {
                        let w = *file_width;
                        format!(
                            "{file:<w$}  {offset:>12}  {db:>3}  {time:<23}  {}\n",
                            argv.join(" ")
                        )
                    } else {
                        format!("{offset:>12}  {db:>3}  {time:<23}  {}\n", argv.join(" "))
                    };
                    out.write_all(line.as_bytes())
                };
                if let Err(e) = written {
                    *error = Some(e);
                    return ControlFlow::Break(());
                }
                *printed += 1;
                ControlFlow::Continue(())
            }
        }
    }
}

/// An argument for the text listing: escaped as keys are (`\\`, `\xHH`),
/// and in double quotes when it is empty or holds a space or a quote
/// (written `\x22` inside), so arguments stay apart.
fn text_arg(arg: &[u8]) -> String {
    let escaped = escape_key(arg);
    if arg.is_empty() || arg.iter().any(|&b| b == b' ' || b == b'"') {
        format!("\"{}\"", escaped.replace('"', "\\x22"))
    } else {
        escaped
    }
}

/// What walking one file found.
struct FileOutcome {
    row: Node,
    problems: Vec<(u64, String)>,
    /// The sink asked to stop (limit reached, output closed).
    stopped: bool,
}

fn walk_file(part: &Part, data: &[u8], selection: &Selection, sink: &mut Sink<'_>) -> FileOutcome {
    let label = part.label();
    let mut row = Node::object()
        .with("file", label.as_str())
        .with("role", part.role)
        .with("size_bytes", data.len());
    let mut problems = Vec::new();
    let start = match preamble(data) {
        Ok(Some(p)) => {
            row.set("preamble", p.kind);
            row.set("preamble_bytes", p.len);
            row.set("preamble_keys", p.keys);
            p.len
        }
        Ok(None) => {
            row.set("preamble", Node::Null);
            0
        }
        Err(Some((offset, message))) => {
            row.set("preamble", Node::Null);
            problems.push((offset, message));
            return FileOutcome {
                row,
                problems,
                stopped: false,
            };
        }
        Err(None) => {
            row.set("preamble", Node::Null);
            problems.push((
                0,
                "not an AOF: neither RESP commands, '#' annotations, nor a dump.hoz or RDB preamble at offset 0".to_string(),
            ));
            return FileOutcome {
                row,
                problems,
                stopped: false,
            };
        }
    };
    let base = start as u64;
    let log = &data[start..];
    let progress = crate::progress::Progress::bytes(data.len() as u64, &label);
    let mut db = 0u64;
    let mut batch_selected = false;
    let mut stopped = false;
    let result = aof::walk(log, &mut |event| match event {
        aof::WalkEvent::Command(c) => {
            let offset = base + c.offset;
            progress.set(offset);
            if c.argv[0].eq_ignore_ascii_case(b"SELECT") {
                if let Some(n) = c
                    .argv
                    .get(1)
                    .and_then(|a| std::str::from_utf8(a).ok()?.parse().ok())
                {
                    db = n;
                }
            }
            if selection.to_byte.is_some_and(|t| offset >= t) {
                // Offsets only grow: nothing more can be selected.
                stopped = true;
                return ControlFlow::Break(());
            }
            if !selection.takes(offset, c.ts_ms) {
                return ControlFlow::Continue(());
            }
            batch_selected = true;
            let flow = sink.take(&label, offset, &c, db);
            if flow.is_break() {
                stopped = true;
            }
            flow
        }
        aof::WalkEvent::BatchEnd(_) => {
            if std::mem::take(&mut batch_selected) {
                if let Sink::Stats(s) = sink {
                    s.batches += 1;
                }
            }
            ControlFlow::Continue(())
        }
    });
    match result {
        Ok(r) => {
            row.set(
                "flavor",
                if r.checksummed {
                    Node::from("hozon (checksummed batches)")
                } else if log.is_empty() {
                    // A bare RDB base file: no log to tell the flavour.
                    Node::Null
                } else {
                    Node::from("redis (plain RESP)")
                },
            );
            row.set("commands", r.commands);
            row.set("batches", r.batches);
            if stopped {
                row.set("walked_to_byte", base + r.valid_len);
            } else {
                row.set("valid_bytes", base + r.valid_len);
            }
            match &r.torn {
                Some(t) if !stopped => {
                    let (at, node, text) = report::torn_tail(base, t);
                    row.set("torn_tail", node);
                    problems.push((at, text));
                }
                _ => row.set("torn_tail", Node::Null),
            }
        }
        Err(c) => {
            let at = base + c.offset;
            row.set("corrupt_at", at);
            problems.push((at, format!("corrupt at offset {at}: {}", c.reason)));
        }
    }
    FileOutcome {
        row,
        problems,
        stopped,
    }
}

fn run_inner(args: &AofArgs, json: bool) -> Result<u8, String> {
    let (mut parts, manifest) = resolve(&args.path)?;
    if let Some(name) = &args.file {
        if manifest.is_none() {
            return Err(
                "--file selects a file of a Redis AOF manifest; the input is a single file".into(),
            );
        }
        parts.retain(|p| p.name.as_deref() == Some(name.as_str()));
        if parts.is_empty() {
            return Err(format!("the manifest lists no file named '{name}'"));
        }
    } else if manifest.is_some()
        && parts.len() > 1
        && (args.from_byte.is_some() || args.to_byte.is_some())
    {
        return Err(
            "byte offsets are per file: with a manifest of several files, add --file NAME".into(),
        );
    }
    let selection = Selection {
        since_ms: args.since,
        until_ms: args.until,
        from_byte: args.from_byte,
        to_byte: args.to_byte,
    };
    let stdout = io::stdout();
    let mut out = io::BufWriter::new(stdout.lock());
    let file_width = if manifest.is_some() {
        parts
            .iter()
            .map(|p| p.label().len())
            .max()
            .unwrap_or(0)
            .max(4)
    } else {
        0
    };
    let mut sink = if args.list {
        if !json {
            let head = if manifest.is_some() {
                format!(
                    "{:<file_width$}  {:>12}  {:>3}  {:<23}  command\n",
                    "file", "offset", "db", "time"
                )
            } else {
                format!("{:>12}  {:>3}  {:<23}  command\n", "offset", "db", "time")
            };
            if let Err(e) = out.write_all(head.as_bytes()) {
                return quiet_or_error(e);
            }
        }
        Sink::List {
            out: &mut out,
            json,
            file_width,
            printed: 0,
            limit: args.limit,
            error: None,
        }
    } else {
        Sink::Stats(Box::new(Stats::new(args)))
    };
    let mut rows = Vec::new();
    let mut problems: Vec<Node> = Vec::new();
    for part in &parts {
        let input = match Input::open(&part.path) {
            Ok(i) => i,
            Err(e) if manifest.is_some() => {
                problems.push(
                    Node::object()
                        .with("file", part.label())
                        .with("offset", 0u64)
                        .with(
                            "message",
                            format!("listed in the manifest but unreadable: {e}"),
                        ),
                );
                continue;
            }
            Err(e) => return Err(e),
        };
        let outcome = walk_file(part, input.bytes(), &selection, &mut sink);
        for (offset, message) in outcome.problems {
            let mut p = Node::object();
            if manifest.is_some() {
                p.set("file", part.label());
            }
            p.set("offset", offset);
            p.set("message", message);
            problems.push(p);
        }
        rows.push(outcome.row);
        if outcome.stopped && !matches!(sink, Sink::Stats(_)) {
            break;
        }
    }
    let code = if problems.is_empty() {
        0
    } else {
        EXIT_PROBLEMS
    };
    let stats = match sink {
        Sink::List { error, .. } => {
            if let Some(e) = error {
                return quiet_or_error(e);
            }
            if let Err(e) = out.flush() {
                return quiet_or_error(e);
            }
            for p in &problems {
                let file = match p.get("file") {
                    Some(Node::Str(f)) => format!("{f}: "),
                    _ => String::new(),
                };
                let message = match p.get("message") {
                    Some(Node::Str(m)) => m.as_str(),
                    _ => "",
                };
                let _ = writeln!(
                    io::stderr(),
                    "hozon-inspect: the input is damaged: {file}{message}"
                );
            }
            return Ok(code);
        }
        Sink::Stats(stats) => stats,
    };
    let report = stats_report(
        args,
        manifest.as_deref(),
        rows,
        *stats,
        &selection,
        problems,
    );
    let written = if json {
        report::write_json(&mut out, &report)
    } else {
        report::write_text(&mut out, &report)
    }
    .and_then(|()| out.flush());
    if let Err(e) = written {
        return quiet_or_error(e);
    }
    if code != 0 && !json {
        let _ = writeln!(
            io::stderr(),
            "hozon-inspect: the input has problems (listed under 'problems')"
        );
    }
    Ok(code)
}

/// A closed pipe ends the output quietly; other write errors are I/O errors.
fn quiet_or_error(e: io::Error) -> Result<u8, String> {
    if e.kind() == io::ErrorKind::BrokenPipe {
        Ok(0)
    } else {
        Err(format!("writing the output: {e}"))
    }
}

fn stats_report(
    args: &AofArgs,
    manifest: Option<&Path>,
    rows: Vec<Node>,
    mut stats: Stats,
    selection: &Selection,
    problems: Vec<Node>,
) -> Node {
    let mut report = Node::object().with("path", args.path.display().to_string());
    report.set("status", if problems.is_empty() { "ok" } else { "damaged" });
    report.set(
        "format",
        if manifest.is_some() {
            "redis-aof-manifest"
        } else {
            "aof"
        },
    );
    if let Some(m) = manifest {
        report.set("manifest", m.display().to_string());
    }
    report.set("files", rows);
    report.set("selection", selection.describe(args.file.as_deref()));
    report.set(
        "totals",
        Node::object()
            .with("commands", stats.commands)
            .with("select_multi_exec", stats.control)
            .with("bytes", stats.bytes)
            .with("batches", stats.batches)
            .with("transactions", stats.transactions)
            .with("no_timestamp", stats.no_timestamp.ops),
    );
    report.set(
        "time_span",
        match (stats.first_ts_ms, stats.last_ts_ms) {
            (Some(f), Some(l)) => Node::object()
                .with("first_ms", f)
                .with("first_utc", utc_text(f))
                .with("last_ms", l)
                .with("last_utc", utc_text(l))
                .with("seconds", l.saturating_sub(f) / 1000),
            _ => Node::Null,
        },
    );
    let mut names: Vec<(Vec<u8>, Tally)> = stats.names.drain().collect();
    names.sort_by(|a, b| b.1.ops.cmp(&a.1.ops).then_with(|| a.0.cmp(&b.0)));
    let mut histogram: Vec<Node> = names
        .iter()
        .map(|(n, t)| {
            Node::object()
                .with("command", escape_key(n))
                .with("count", t.ops)
                .with("bytes", t.bytes)
        })
        .collect();
    if stats.other_names.ops > 0 {
        histogram.push(
            Node::object()
                .with("command", "(other)")
                .with("count", stats.other_names.ops)
                .with("bytes", stats.other_names.bytes),
        );
    }
    report.set("histogram", histogram);
    let keys = &stats.keys;
    report.set(
        "keys",
        Node::object()
            .with("tracked", keys.table.len())
            .with("cap", keys.cap)
            .with("cap_hit", keys.folded_keys > 0)
            .with("folded_keys", keys.folded_keys)
            .with("folded_ops", keys.folded.ops)
            .with(
                "top",
                keys.top(args.top)
                    .into_iter()
                    .enumerate()
                    .map(|(i, (db, key, t))| {
                        Node::object()
                            .with("rank", i + 1)
                            .with("db", db)
                            .with("key", key)
                            .with("ops", t.ops)
                            .with("bytes", t.bytes)
                    })
                    .collect::<Vec<_>>(),
            ),
    );
    stats.timeline.settle();
    report.set("timeline", stats.timeline.node(stats.no_timestamp));
    report.set("problems", problems);
    report
}

// ---------------------------------------------------------------------------
// Time arguments.

/// Unix ms from RFC 3339 (`2026-11-30T12:04:00Z`, fractions of a second,
/// `+HH:MM`/`-HH:MM` offsets; `t`/`z` and a space for `T` accepted; a
/// fraction finer than a millisecond is dropped) or a plain integer of
/// Unix ms.
pub fn parse_time(text: &str) -> Result<i64, String> {
    let t = text.trim();
    if !t.is_empty()
        && t.trim_start_matches('-')
            .bytes()
            .all(|b| b.is_ascii_digit())
    {
        return t
            .parse()
            .map_err(|_| format!("'{text}': Unix ms out of range"));
    }
    rfc3339_ms(t, SubMs::Truncate).ok_or_else(|| {
        format!("'{text}': not a time (RFC 3339 like 2026-11-30T12:04:00Z, or Unix ms)")
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn times_parse_as_rfc3339_or_unix_ms() {
        assert_eq!(parse_time("1700000000123"), Ok(1_700_000_000_123));
        assert_eq!(parse_time("1970-01-01T00:00:00Z"), Ok(0));
        assert_eq!(parse_time("2023-11-14T22:13:20Z"), Ok(1_700_000_000_000));
        assert_eq!(
            parse_time("2023-11-14T23:13:20.5+01:00"),
            Ok(1_700_000_000_500)
        );
        assert_eq!(
            parse_time("2023-11-14 22:13:20.123456z"),
            Ok(1_700_000_000_123)
        );
        assert_eq!(parse_time("2000-02-29T00:00:00-00:30"), Ok(951_784_200_000));
        for bad in [
            "",
            "2023-02-29T00:00:00Z",
            "2023-11-14T22:13:20",
            "yesterday",
            "2023-11-14T22:13:20+1:00",
        ] {
            assert!(parse_time(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn key_positions_follow_the_command_table() {
        let keys_of = |words: &[&str]| {
            let argv: Vec<&[u8]> = words.iter().map(|w| w.as_bytes()).collect();
            let mut keys = Vec::new();
            for_each_key(&argv, &mut |k| {
                keys.push(String::from_utf8_lossy(k).into_owned())
            });
            keys
        };
        assert_eq!(keys_of(&["SET", "k", "v"]), ["k"]);
        assert_eq!(keys_of(&["mset", "a", "1", "b", "2"]), ["a", "b"]);
        assert_eq!(keys_of(&["DEL", "a", "b", "c"]), ["a", "b", "c"]);
        assert_eq!(keys_of(&["EVAL", "s", "2", "x", "y", "arg"]), ["x", "y"]);
        assert_eq!(
            keys_of(&["ZUNIONSTORE", "d", "2", "s1", "s2", "WEIGHTS", "1", "2"]),
            ["d", "s1", "s2"]
        );
        assert_eq!(keys_of(&["XGROUP", "CREATE", "st", "g", "$"]), ["st"]);
        assert!(keys_of(&["SELECT", "1"]).is_empty());
        assert!(keys_of(&["NOSUCHCOMMAND", "x"]).is_empty());
        assert!(keys_of(&["EVAL"]).is_empty());
        // As COMMAND GETKEYS: a key count past the end, or a wrong arity,
        // finds no keys.
        assert!(keys_of(&["EVAL", "s", "99", "k"]).is_empty());
        assert!(keys_of(&["ZUNIONSTORE", "d"]).is_empty());
        assert_eq!(keys_of(&["LMPOP", "2", "a", "b", "LEFT"]), ["a", "b"]);
    }

    #[test]
    fn the_key_table_folds_its_smaller_half_and_keeps_totals() {
        let mut t = KeyTable::new(4);
        for (key, ops) in [("a", 5), ("b", 1), ("c", 3), ("d", 2)] {
            for _ in 0..ops {
                t.add(0, key.as_bytes(), 10);
            }
        }
        t.add(1, b"e", 10);
        let top = t.top(10);
        let names: Vec<&str> = top.iter().map(|(_, k, _)| k.as_str()).collect();
        assert_eq!(names, ["a", "c", "e"]);
        assert_eq!(t.folded_keys, 2);
        assert_eq!(t.folded.ops, 3);
        let long = vec![b'x'; 1000];
        t.add(0, &long, 1);
        t.add(0, &long, 1);
        let top = t.top(10);
        let entry = top
            .iter()
            .find(|(_, k, _)| k.ends_with("(1000 bytes)"))
            .expect("the long key");
        assert_eq!(entry.2.ops, 2);
    }

    #[test]
    fn the_timeline_widens_to_at_most_fifty_rows_and_merges_exactly() {
        let mut t = Timeline::new(None);
        for s in 0..10_000i64 {
            t.add(s * 1000 + 17, 3);
        }
        t.settle();
        assert_eq!(t.bucket_ms, 300_000);
        let total: u64 = t.rows.values().map(|r| r.ops).sum();
        assert_eq!(total, 10_000);
        assert!(t.rows.len() <= 50);
        // Extreme timestamps (a #TS line can say anything) do not overflow.
        let mut wild = Timeline::new(None);
        for ts in [i64::MIN, -1, 0, i64::MAX] {
            wild.add(ts, 1);
        }
        wild.settle();
        let rows = wild.node(Tally::default());
        let total: u64 = wild.rows.values().map(|r| r.ops).sum();
        assert_eq!(total, 4, "{rows:?}");
        let mut fixed = Timeline::new(Some(60));
        fixed.add(59_999, 1);
        fixed.add(60_000, 1);
        fixed.settle();
        assert_eq!(fixed.rows.len(), 2);
    }
}
