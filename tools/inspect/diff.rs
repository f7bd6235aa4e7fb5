//! `diff A B`: which keys B added, removed and changed (type, value or
//! TTL) compared with A, across any two supported inputs (dump.hoz, RDB,
//! AOF, Redis 7 AOF manifest / `appendonlydir`).
//!
//! Values are compared by logical content, never by encoding or file
//! format: A is walked once and, per key, only a 128-bit digest of a
//! canonical serialisation of its value is kept (with its type, length
//! and expiry); B is then walked and each key is looked up. So memory
//! grows with A's key count and key bytes, not with value sizes.

use std::cmp::Ordering;
use std::collections::{BinaryHeap, HashMap};
use std::io::{self, Write};
use std::ops::ControlFlow;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use clap::Args;
use hozon::tools::{EXIT_PROBLEMS, EXIT_USAGE_OR_IO};
use hozon::types::stream::StreamId;
use hozon::types::Value;

use crate::report::{self, Node};
use crate::source::{self, Failure, KeyValue, Source};
use hozon::tools::report::escape_key;
use hozon::tools::time::utc_text;

/// Arguments of `diff`.
#[derive(Debug, Args)]
pub struct DiffArgs {
    /// The old input: a dump.hoz, an RDB file, an AOF, a Redis 7 AOF
    /// manifest or its appendonlydir (the format is found from the content).
    pub a: PathBuf,
    /// The new input (any supported format, not necessarily A's).
    pub b: PathBuf,
    /// List at most N differing keys (the first N by database, then key
    /// bytes); the counts stay exact.
    #[arg(long, value_name = "N")]
    pub limit: Option<usize>,
    /// Expiries that differ by at most MS milliseconds count as equal.
    #[arg(long, value_name = "MS", default_value_t = 0)]
    pub ttl_tolerance: u64,
    /// Also compare the access times of stream consumer groups (a
    /// consumer's seen time, a pending entry's delivery time), which
    /// differ whenever the same commands ran at another moment.
    #[arg(long)]
    pub stream_times: bool,
}

/// What A held under one key: enough to classify B's key, never the value.
/// Kept small (40 bytes) because there is one per key of A.
struct Seen {
    /// First 128 bits of the SHA-1 of the canonical serialisation (the
    /// type is part of it).
    digest: [u8; 16],
    /// Absolute expiry in Unix ms, [`NO_EXPIRY`] without one (not an
    /// `Option`, which would take 8 more bytes).
    expire_ms: i64,
    /// What the type's length command reports (STRLEN, LLEN, HLEN, ...).
    length: u64,
    kind: Kind,
    /// B had this key too (a second time means B is damaged).
    matched: bool,
}

/// A value's type, compactly.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Str,
    List,
    Hash,
    Set,
    ZSet,
    Stream,
}

impl Kind {
    fn of(value: &Value) -> Kind {
        match value {
            Value::Str(_) => Kind::Str,
            Value::List(_) => Kind::List,
            Value::Hash(_) => Kind::Hash,
            Value::Set(_) => Kind::Set,
            Value::ZSet(_) => Kind::ZSet,
            Value::Stream(_) => Kind::Stream,
        }
    }

    /// The name TYPE reports.
    fn name(self) -> &'static str {
        match self {
            Kind::Str => "string",
            Kind::List => "list",
            Kind::Hash => "hash",
            Kind::Set => "set",
            Kind::ZSet => "zset",
            Kind::Stream => "stream",
        }
    }

    fn tag(self) -> u8 {
        match self {
            Kind::Str => b's',
            Kind::List => b'l',
            Kind::Hash => b'h',
            Kind::Set => b'S',
            Kind::ZSet => b'z',
            Kind::Stream => b'x',
        }
    }
}

/// One side of a differing key.
#[derive(Debug, Clone, Copy)]
struct Side {
    kind: Kind,
    length: u64,
    expire_ms: Option<i64>,
}

/// One differing key, for the listing.
#[derive(Debug)]
struct Row {
    db: usize,
    key: Box<[u8]>,
    /// Absent in A: added.
    a: Option<Side>,
    /// Absent in B: removed.
    b: Option<Side>,
    value_changed: bool,
    ttl_changed: bool,
}

impl Row {
    /// `added`, `removed`, or what changed joined by `+`
    /// (`type`, `value`, `ttl`, `type+ttl`, `value+ttl`).
    fn change(&self) -> String {
        match (self.a, self.b) {
            (None, _) => "added".into(),
            (_, None) => "removed".into(),
            (Some(a), Some(b)) => {
                let mut parts = Vec::new();
                if a.kind != b.kind {
                    parts.push("type");
                } else if self.value_changed {
                    parts.push("value");
                }
                if self.ttl_changed {
                    parts.push("ttl");
                }
                parts.join("+")
            }
        }
    }
}

impl PartialEq for Row {
    fn eq(&self, other: &Row) -> bool {
        self.cmp(other) == Ordering::Equal
    }
}

impl Eq for Row {}

impl PartialOrd for Row {
    fn partial_cmp(&self, other: &Row) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for Row {
    fn cmp(&self, other: &Row) -> Ordering {
        (self.db, &self.key).cmp(&(other.db, &other.key))
    }
}

/// The differing keys to list: all of them, or with a limit the first N
/// by (db, key), in a max-heap of N so memory stays bounded by the limit.
struct Listing {
    limit: Option<usize>,
    rows: BinaryHeap<Row>,
}

impl Listing {
    fn push(&mut self, row: Row) {
        match self.limit {
            Some(0) => {}
            Some(n) if self.rows.len() >= n => {
                if self.rows.peek().is_some_and(|top| row < *top) {
                    self.rows.pop();
                    self.rows.push(row);
                }
            }
            _ => self.rows.push(row),
        }
    }
}

/// Exact counts, whatever the limit.
#[derive(Debug, Default)]
struct Counts {
    keys_a: u64,
    keys_b: u64,
    added: u64,
    removed: u64,
    changed: u64,
    type_changed: u64,
    value_changed: u64,
    ttl_changed: u64,
    unchanged: u64,
}

/// Why a comparison stopped: which input, and the failure.
struct Stop {
    which: &'static str,
    path: PathBuf,
    failure: Failure,
}

/// Runs `diff`: prints the report and returns the exit code (0 compared,
/// whether or not the inputs differ; 1 an input is damaged; 2 usage or
/// I/O error).
pub fn run(args: &DiffArgs, json: bool) -> ExitCode {
    let (counts, rows, inputs) = match compare(args) {
        Ok(r) => r,
        Err(stop) => {
            let path = stop.path.display().to_string();
            let (code, text) = match &stop.failure {
                Failure::Damaged(m) => (EXIT_PROBLEMS, format!("({path}) is damaged: {m}")),
                // I/O messages usually start with the path already.
                Failure::Io(m) if m.contains(&path) => (EXIT_USAGE_OR_IO, m.clone()),
                Failure::Io(m) => (EXIT_USAGE_OR_IO, format!("({path}) {m}")),
            };
            let _ = writeln!(io::stderr(), "hozon-inspect: {}: {text}", stop.which);
            return ExitCode::from(code);
        }
    };
    let written = if json {
        emit_json(args, &counts, &rows, &inputs)
    } else {
        emit_text(&counts, &rows, &inputs)
    };
    if let Err(e) = written {
        if e.kind() != io::ErrorKind::BrokenPipe {
            let _ = writeln!(io::stderr(), "hozon-inspect: writing the output: {e}");
            return ExitCode::from(EXIT_USAGE_OR_IO);
        }
        // The reader went away (`| head`): nothing more to say.
    }
    ExitCode::SUCCESS
}

/// The name and format of each input.
type Inputs = [(String, source::Format); 2];

type Compared = (Counts, Vec<Row>, Inputs);

fn compare(args: &DiffArgs) -> Result<Compared, Stop> {
    let stop = |which: &'static str, path: &Path| {
        let path = path.to_path_buf();
        move |failure| Stop {
            which,
            path,
            failure,
        }
    };
    if args.a.as_os_str() == "-" && args.b.as_os_str() == "-" {
        return Err(stop("B", &args.b)(Failure::Io(
            "only one of A and B can be stdin (-)".into(),
        )));
    }
    // Open both before walking either, so a missing B is reported at once.
    let a = source::open(&args.a).map_err(stop("A", &args.a))?;
    let b = source::open(&args.b).map_err(stop("B", &args.b))?;
    let mut counts = Counts::default();
    let seen = read_a(&a, args.stream_times, &mut counts).map_err(stop("A", &args.a))?;
    let (seen, mut listing) =
        classify_b(&b, seen, args, &mut counts).map_err(stop("B", &args.b))?;
    for (db_key, s) in seen {
        if s.matched {
            continue;
        }
        counts.removed += 1;
        let (db, key) = split_db_key(&db_key);
        listing.push(Row {
            db,
            key: key.into(),
            a: Some(s.side()),
            b: None,
            value_changed: false,
            ttl_changed: false,
        });
    }
    let rows = listing.rows.into_sorted_vec();
    let inputs = [
        (a.name().to_string(), a.format()),
        (b.name().to_string(), b.format()),
    ];
    Ok((counts, rows, inputs))
}

/// A's keys: the database number (4 bytes, big-endian) followed by the
/// key, in one allocation, mapped to what A held there.
type SeenMap = HashMap<Box<[u8]>, Seen>;

// The memory bound in the docs counts on this size.
const _: () = assert!(std::mem::size_of::<Seen>() == 40);

/// [`Seen::expire_ms`] of a key without an expiry.
const NO_EXPIRY: i64 = i64::MIN;

impl Seen {
    fn side(&self) -> Side {
        Side {
            kind: self.kind,
            length: self.length,
            expire_ms: (self.expire_ms != NO_EXPIRY).then_some(self.expire_ms),
        }
    }
}

/// Writes the map key of (`db`, `key`) into `out`.
fn db_key(db: usize, key: &[u8], out: &mut Vec<u8>) -> Result<(), Failure> {
    let db = u32::try_from(db)
        .map_err(|_| Failure::Damaged(format!("database number {db} is out of range")))?;
    out.clear();
    out.extend_from_slice(&db.to_be_bytes());
    out.extend_from_slice(key);
    Ok(())
}

/// The database number and key of a map key made by [`db_key`].
fn split_db_key(db_key: &[u8]) -> (usize, &[u8]) {
    let (db, key) = db_key.split_at(4);
    let db: [u8; 4] = db
        .try_into()
        .expect("a map key starts with 4 database bytes");
    (u32::from_be_bytes(db) as usize, key)
}

/// Walks A and keeps, per key, its digest, type, length and expiry.
fn read_a(a: &Source, stream_times: bool, counts: &mut Counts) -> Result<SeenMap, Failure> {
    let mut seen = SeenMap::new();
    let mut stopped: Option<Failure> = None;
    let mut map_key = Vec::new();
    a.for_each(&mut |kv: KeyValue<'_>| {
        if let Err(e) = db_key(kv.db, kv.key, &mut map_key) {
            stopped = Some(e);
            return ControlFlow::Break(());
        }
        let entry = Seen {
            digest: digest(kv.value, stream_times),
            // A real expiry is never i64::MIN (year -292 million).
            expire_ms: kv.expire_ms.unwrap_or(NO_EXPIRY),
            length: kv.value.length() as u64,
            kind: Kind::of(kv.value),
            matched: false,
        };
        counts.keys_a += 1;
        if seen.insert(map_key.as_slice().into(), entry).is_some() {
            stopped = Some(duplicate_key(kv.db, kv.key));
            return ControlFlow::Break(());
        }
        ControlFlow::Continue(())
    })?;
    match stopped {
        Some(d) => Err(d),
        None => Ok(seen),
    }
}

fn duplicate_key(db: usize, key: &[u8]) -> Failure {
    Failure::Damaged(format!(
        "key '{}' of database {db} appears twice",
        escape_key(key)
    ))
}

/// Walks B, classifying each key against what A held.
fn classify_b(
    b: &Source,
    mut seen: SeenMap,
    args: &DiffArgs,
    counts: &mut Counts,
) -> Result<(SeenMap, Listing), Failure> {
    let mut listing = Listing {
        limit: args.limit,
        rows: BinaryHeap::new(),
    };
    let mut stopped: Option<Failure> = None;
    // Reused for the lookup so a key of B is copied only when listed.
    let mut probe = Vec::new();
    b.for_each(&mut |kv: KeyValue<'_>| {
        counts.keys_b += 1;
        let side_b = Side {
            kind: Kind::of(kv.value),
            length: kv.value.length() as u64,
            expire_ms: kv.expire_ms,
        };
        if let Err(e) = db_key(kv.db, kv.key, &mut probe) {
            stopped = Some(e);
            return ControlFlow::Break(());
        }
        let Some(s) = seen.get_mut(probe.as_slice()) else {
            counts.added += 1;
            listing.push(Row {
                db: kv.db,
                key: kv.key.into(),
                a: None,
                b: Some(side_b),
                value_changed: false,
                ttl_changed: false,
            });
            return ControlFlow::Continue(());
        };
        if s.matched {
            stopped = Some(duplicate_key(kv.db, kv.key));
            return ControlFlow::Break(());
        }
        s.matched = true;
        let type_changed = s.kind != side_b.kind;
        let value_changed = type_changed || s.digest != digest(kv.value, args.stream_times);
        let ttl_changed = !expiry_equal(s.side().expire_ms, kv.expire_ms, args.ttl_tolerance);
        if !value_changed && !ttl_changed {
            counts.unchanged += 1;
            return ControlFlow::Continue(());
        }
        counts.changed += 1;
        if type_changed {
            counts.type_changed += 1;
        } else if value_changed {
            counts.value_changed += 1;
        }
        if ttl_changed {
            counts.ttl_changed += 1;
        }
        listing.push(Row {
            db: kv.db,
            key: kv.key.into(),
            a: Some(s.side()),
            b: Some(side_b),
            value_changed,
            ttl_changed,
        });
        ControlFlow::Continue(())
    })?;
    match stopped {
        Some(d) => Err(d),
        None => Ok((seen, listing)),
    }
}

/// Same expiry: both none, or both set within `tolerance_ms`.
fn expiry_equal(a: Option<i64>, b: Option<i64>, tolerance_ms: u64) -> bool {
    match (a, b) {
        (None, None) => true,
        (Some(x), Some(y)) => x.abs_diff(y) <= tolerance_ms,
        _ => false,
    }
}

// ---------------------------------------------------------------------------
// The digest.

/// Feeds the canonical serialisation of a value into SHA-1: a type tag,
/// then the content with every byte string and count length-prefixed, so
/// no two different contents serialise alike. Unordered collections are
/// serialised sorted, so their digest does not depend on encoding or
/// insertion order.
struct Canon(sha1_smol::Sha1);

impl Canon {
    fn u64(&mut self, v: u64) {
        self.0.update(&v.to_le_bytes());
    }

    fn i64(&mut self, v: i64) {
        self.0.update(&v.to_le_bytes());
    }

    fn bytes(&mut self, b: &[u8]) {
        self.u64(b.len() as u64);
        self.0.update(b);
    }

    fn id(&mut self, id: StreamId) {
        self.u64(id.ms);
        self.u64(id.seq);
    }
}

/// 128 bits of the SHA-1 of the value's canonical serialisation; stream
/// group access times are part of it only when `stream_times`.
fn digest(value: &Value, stream_times: bool) -> [u8; 16] {
    let mut c = Canon(sha1_smol::Sha1::new());
    let kind = Kind::of(value);
    c.0.update(&[kind.tag()]);
    match value {
        Value::Str(s) => c.bytes(s),
        Value::List(l) => {
            c.u64(l.len() as u64);
            for item in l.iter() {
                c.bytes(item);
            }
        }
        Value::Hash(h) => {
            let mut pairs: Vec<(&[u8], &[u8])> = h.iter().collect();
            pairs.sort_unstable_by(|x, y| x.0.cmp(y.0));
            c.u64(pairs.len() as u64);
            for (f, v) in pairs {
                c.bytes(f);
                c.bytes(v);
            }
        }
        Value::Set(s) => {
            // Integer members (an intset) are compared as their decimal
            // text, which is what SMEMBERS returns.
            let mut members: Vec<Vec<u8>> = s.iter().map(|m| m.to_vec()).collect();
            members.sort_unstable();
            c.u64(members.len() as u64);
            for m in &members {
                c.bytes(m);
            }
        }
        Value::ZSet(z) => {
            // Scores by value (a zset never holds a NaN), -0 as 0: Redis
            // itself stores -0 as 0 in a listpack, so whether a -0 survives
            // depends on the encoding, not on the data.
            let mut members: Vec<(&[u8], u64)> = z
                .iter()
                .map(|(m, score)| (m, (score + 0.0).to_bits()))
                .collect();
            members.sort_unstable_by(|x, y| x.0.cmp(y.0));
            c.u64(members.len() as u64);
            for (m, bits) in members {
                c.bytes(m);
                c.u64(bits);
            }
        }
        Value::Stream(s) => {
            c.u64(s.len() as u64);
            for (id, fields) in s.range(StreamId::MIN, StreamId::MAX, false) {
                c.id(id);
                c.u64(fields.len() as u64);
                for (f, v) in fields.iter() {
                    c.bytes(f);
                    c.bytes(v);
                }
            }
            c.id(s.last_id);
            c.id(s.first_id);
            c.id(s.max_deleted_entry_id);
            c.u64(s.entries_added);
            c.u64(s.groups.len() as u64);
            for (name, g) in &s.groups {
                c.bytes(name);
                c.id(g.last_id);
                c.i64(g.entries_read);
                c.u64(g.pel.len() as u64);
                for (id, p) in &g.pel {
                    c.id(*id);
                    if stream_times {
                        c.i64(p.delivery_time_ms);
                    }
                    c.u64(p.delivery_count);
                    c.bytes(&p.consumer);
                }
                // A consumer's own PEL is the group's PEL entries naming
                // it, already serialised above.
                c.u64(g.consumers.len() as u64);
                for (cname, consumer) in &g.consumers {
                    c.bytes(cname);
                    if stream_times {
                        c.i64(consumer.seen_time_ms);
                    }
                }
            }
        }
    }
    let full = c.0.digest().bytes();
    let mut out = [0u8; 16];
    out.copy_from_slice(&full[..16]);
    out
}

// ---------------------------------------------------------------------------
// Output.

fn summary(counts: &Counts) -> Node {
    Node::object()
        .with("keys_a", counts.keys_a)
        .with("keys_b", counts.keys_b)
        .with("added", counts.added)
        .with("removed", counts.removed)
        .with("changed", counts.changed)
        .with("type_changed", counts.type_changed)
        .with("value_changed", counts.value_changed)
        .with("ttl_changed", counts.ttl_changed)
        .with("unchanged", counts.unchanged)
}

fn input((name, format): &(String, source::Format)) -> Node {
    Node::object()
        .with("path", name.as_str())
        .with("format", format.name())
}

fn identical(counts: &Counts) -> bool {
    counts.added == 0 && counts.removed == 0 && counts.changed == 0
}

fn emit_json(args: &DiffArgs, counts: &Counts, rows: &[Row], inputs: &Inputs) -> io::Result<()> {
    let differences: Vec<Node> = rows
        .iter()
        .map(|r| {
            let kind = |s: Option<Side>| s.map(|s| s.kind.name());
            let len = |s: Option<Side>| s.map(|s| s.length);
            let exp = |s: Option<Side>| s.and_then(|s| s.expire_ms);
            Node::object()
                .with("db", r.db)
                .with("key", escape_key(&r.key))
                .with("change", r.change())
                .with("type_a", kind(r.a))
                .with("type_b", kind(r.b))
                .with("length_a", len(r.a))
                .with("length_b", len(r.b))
                .with("expire_ms_a", exp(r.a))
                .with("expire_ms_b", exp(r.b))
        })
        .collect();
    let doc = Node::object()
        .with("a", input(&inputs[0]))
        .with("b", input(&inputs[1]))
        .with("ttl_tolerance_ms", args.ttl_tolerance)
        .with("stream_times", args.stream_times)
        .with("identical", identical(counts))
        .with("summary", summary(counts))
        .with("limit", args.limit)
        .with("listed", rows.len())
        .with("differences", differences);
    let stdout = io::stdout();
    let mut out = io::BufWriter::new(stdout.lock());
    report::write_json(&mut out, &doc)?;
    out.flush()
}

/// An expiry for people: UTC with milliseconds, `-` without one.
fn expiry_text(ms: Option<i64>) -> String {
    match ms {
        None => "-".into(),
        Some(ms) => {
            let utc = utc_text(ms);
            let base = utc.strip_suffix(" UTC").unwrap_or(&utc);
            format!("{base}.{:03} UTC", ms.rem_euclid(1000))
        }
    }
}

/// `old -> new` when they differ, else the one value.
fn pair_text(a: Option<String>, b: Option<String>) -> String {
    match (a, b) {
        (Some(a), Some(b)) if a == b => a,
        (Some(a), Some(b)) => format!("{a} -> {b}"),
        (Some(x), None) | (None, Some(x)) => x,
        (None, None) => "-".into(),
    }
}

fn emit_text(counts: &Counts, rows: &[Row], inputs: &Inputs) -> io::Result<()> {
    let head = Node::object()
        .with("a", format!("{} ({})", inputs[0].0, inputs[0].1.name()))
        .with("b", format!("{} ({})", inputs[1].0, inputs[1].1.name()))
        .with("identical", identical(counts))
        .with("summary", summary(counts));
    let stdout = io::stdout();
    let mut out = io::BufWriter::new(stdout.lock());
    report::write_text(&mut out, &head)?;
    if rows.is_empty() {
        return out.flush();
    }
    // The table is written here rather than by `report::write_text` so
    // keys appear escaped exactly as `keys` prints them.
    let cells: Vec<[String; 6]> = rows
        .iter()
        .map(|r| {
            let kind = |s: Option<Side>| s.map(|s| s.kind.name().to_string());
            let len = |s: Option<Side>| s.map(|s| s.length.to_string());
            let exp = |s: Option<Side>| s.map(|s| expiry_text(s.expire_ms));
            [
                r.db.to_string(),
                escape_key(&r.key),
                r.change(),
                pair_text(kind(r.a), kind(r.b)),
                pair_text(len(r.a), len(r.b)),
                pair_text(exp(r.a), exp(r.b)),
            ]
        })
        .collect();
    let header = ["db", "key", "change", "type", "length", "ttl"];
    let mut widths = header.map(str::len);
    for row in &cells {
        for (w, cell) in widths.iter_mut().zip(row) {
            *w = (*w).max(cell.len());
        }
    }
    let listed = if rows.len() as u64 == counts.added + counts.removed + counts.changed {
        "differences:".to_string()
    } else {
        format!(
            "differences (first {} of {}):",
            rows.len(),
            counts.added + counts.removed + counts.changed
        )
    };
    writeln!(out, "{listed}")?;
    let line = |out: &mut dyn Write, cells: [&str; 6]| -> io::Result<()> {
        let mut text = String::from("  ");
        for (i, cell) in cells.iter().enumerate() {
            if i > 0 {
                text.push_str("  ");
            }
            let w = widths[i];
            if i == 0 {
                text.push_str(&format!("{cell:>w$}"));
            } else {
                text.push_str(&format!("{cell:w$}"));
            }
        }
        writeln!(out, "{}", text.trim_end())
    };
    line(&mut out, header)?;
    for row in &cells {
        line(&mut out, row.each_ref().map(String::as_str))?;
    }
    out.flush()
}

#[cfg(test)]
mod tests {
    use super::*;
    use hozon::types::list::End;
    use hozon::types::{Blob, EncodingLimits, Hash, List, Set, ZSet};

    fn hash(pairs: &[(&str, &str)], table: bool) -> Value {
        let mut h = Hash::new();
        for (f, v) in pairs {
            h.set(f.as_bytes(), Blob::from(*v), &EncodingLimits::default());
        }
        if table {
            h.convert_to_table();
        }
        Value::Hash(Box::new(h))
    }

    fn set(members: &[&str], table: bool) -> Value {
        let mut s = Set::default();
        for m in members {
            s.insert(m.as_bytes(), 512);
        }
        if table {
            s.convert_to_table();
        }
        Value::Set(Box::new(s))
    }

    fn list(items: &[&str]) -> Value {
        let mut l = List::new();
        for i in items {
            l.push(End::Tail, i.as_bytes());
        }
        Value::List(Box::new(l))
    }

    fn zset(members: &[(&str, f64)], skiplist: bool) -> Value {
        let mut sorted: Vec<(Blob, f64)> =
            members.iter().map(|(m, s)| (Blob::from(*m), *s)).collect();
        sorted.sort_by(|a, b| a.1.total_cmp(&b.1).then_with(|| a.0.cmp(&b.0)));
        let mut z = ZSet::from_sorted(sorted, &EncodingLimits::default());
        if skiplist {
            z.convert_to_skiplist();
        }
        Value::ZSet(Box::new(z))
    }

    fn d(v: &Value) -> [u8; 16] {
        digest(v, false)
    }

    #[test]
    fn digests_ignore_encoding_and_insertion_order() {
        let h = hash(&[("a", "1"), ("b", "2"), ("c", "3")], false);
        assert_eq!(
            d(&h),
            d(&hash(&[("c", "3"), ("a", "1"), ("b", "2")], false))
        );
        assert_eq!(d(&h), d(&hash(&[("b", "2"), ("c", "3"), ("a", "1")], true)));
        assert_ne!(
            d(&h),
            d(&hash(&[("a", "1"), ("b", "2"), ("c", "4")], false))
        );
        // An intset and a table of the same members; the intset compares
        // as decimal text.
        let ints = set(&["10", "-3", "7"], false);
        assert_eq!(d(&ints), d(&set(&["7", "10", "-3"], true)));
        assert_ne!(d(&ints), d(&set(&["7", "10", "-4"], true)));
        let z = zset(&[("a", 1.0), ("b", 1.0), ("c", -2.5)], false);
        assert_eq!(
            d(&z),
            d(&zset(&[("c", -2.5), ("b", 1.0), ("a", 1.0)], true))
        );
        assert_ne!(
            d(&z),
            d(&zset(&[("a", 1.0), ("b", 1.5), ("c", -2.5)], false))
        );
    }

    #[test]
    fn digests_tell_apart_what_differs() {
        // Lists keep order; item boundaries count.
        assert_ne!(d(&list(&["a", "b"])), d(&list(&["b", "a"])));
        assert_ne!(d(&list(&["ab"])), d(&list(&["a", "b"])));
        assert_ne!(d(&list(&["", "a"])), d(&list(&["a", ""])));
        // Same bytes under another type.
        let s = Value::Str(Blob::from("a"));
        assert_ne!(d(&s), d(&list(&["a"])));
        assert_ne!(d(&set(&["a"], true)), d(&list(&["a"])));
        // A field/value boundary moved.
        assert_ne!(
            d(&hash(&[("ab", "c")], false)),
            d(&hash(&[("a", "bc")], false))
        );
        // -0 and 0 are the same score (a listpack cannot hold -0), other
        // scores differ.
        assert_eq!(
            d(&zset(&[("m", 0.0)], true)),
            d(&zset(&[("m", -0.0)], true))
        );
        assert_ne!(
            d(&zset(&[("m", 1.0)], true)),
            d(&zset(&[("m", 1.0000000000000002)], true))
        );
        assert_eq!(
            d(&zset(&[("m", 0.0)], false)),
            d(&zset(&[("m", -0.0)], false))
        );
    }

    #[test]
    fn a_limited_listing_keeps_the_first_rows_by_db_then_key() {
        let mut listing = Listing {
            limit: Some(3),
            rows: BinaryHeap::new(),
        };
        for (db, key) in [(1, "a"), (0, "z"), (0, "b"), (2, "a"), (0, "c"), (0, "a")] {
            listing.push(Row {
                db,
                key: key.as_bytes().into(),
                a: None,
                b: None,
                value_changed: false,
                ttl_changed: false,
            });
        }
        let got: Vec<(usize, Vec<u8>)> = listing
            .rows
            .into_sorted_vec()
            .into_iter()
            .map(|r| (r.db, r.key.to_vec()))
            .collect();
        assert_eq!(
            got,
            vec![(0, b"a".to_vec()), (0, b"b".to_vec()), (0, b"c".to_vec())]
        );
    }

    #[test]
    fn expiries_compare_within_the_tolerance() {
        assert!(expiry_equal(None, None, 0));
        assert!(!expiry_equal(Some(5), None, 1000));
        assert!(!expiry_equal(None, Some(5), 1000));
        assert!(expiry_equal(Some(1000), Some(1000), 0));
        assert!(!expiry_equal(Some(1000), Some(1001), 0));
        assert!(expiry_equal(Some(1000), Some(1250), 250));
        assert!(expiry_equal(Some(i64::MAX), Some(i64::MIN + 1), u64::MAX));
    }

    #[test]
    fn map_keys_round_trip_the_database_and_key() {
        let mut out = Vec::new();
        db_key(7, b"k\x00", &mut out).expect("db 7 fits");
        assert_eq!(split_db_key(&out), (7, &b"k\x00"[..]));
        db_key(0, b"", &mut out).expect("db 0 fits");
        assert_eq!(split_db_key(&out), (0, &b""[..]));
    }
}
