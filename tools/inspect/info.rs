//! `info`: what a file holds, answered from summaries and skip passes —
//! no value is built. The format is found from the content, never from
//! the name.

use std::fs::File;
use std::path::Path;

use hozon::persist::{aof, snapshot};
use hozon::rdb::{self, reader};
use hozon::tools::manifest::{find_manifest, looks_like_manifest};
use hozon::tools::time::utc_text;

use crate::report::{bytes_text, Node};

/// Options of `info`.
#[derive(Debug, Clone, Copy, Default)]
pub struct InfoOptions {
    /// dump.hoz (also an AOF's dump.hoz preamble): answer from header,
    /// footer and trailer only, without reading the blocks' payloads for
    /// their checksums.
    pub quick: bool,
}

/// A problem found in the data, with the byte offset where it is.
struct Problems {
    /// The file being read, for inputs made of several files.
    file: Option<String>,
    list: Vec<Node>,
}

impl Problems {
    fn new(file: Option<String>) -> Problems {
        Problems {
            file,
            list: Vec::new(),
        }
    }

    fn push(&mut self, offset: u64, message: impl Into<String>) {
        let mut p = Node::object();
        if let Some(file) = &self.file {
            p.set("file", file.as_str());
        }
        p.set("offset", offset);
        p.set("message", message.into());
        self.list.push(p);
    }
}

/// A file mapped read-only. An empty file has nothing to map.
pub struct Input {
    map: Option<memmap2::Mmap>,
}

impl Input {
    /// Maps `path`; the error text names the path.
    pub fn open(path: &Path) -> Result<Input, String> {
        let file = File::open(path).map_err(|e| format!("{}: {e}", path.display()))?;
        let len = file
            .metadata()
            .map_err(|e| format!("{}: {e}", path.display()))?
            .len();
        if len == 0 {
            return Ok(Input { map: None });
        }
        // SAFETY: the map is read-only and private to this process. Another
        // process truncating the file while it is read could fault; the
        // inspector accepts that risk (as every mmap-based reader does) in
        // exchange for reading files larger than memory without copying.
        let map = unsafe { memmap2::Mmap::map(&file) }
            .map_err(|e| format!("{}: cannot map: {e}", path.display()))?;
        // Every subcommand reads front to back: ask for aggressive
        // read-ahead. Advice is a hint; refusing it changes nothing.
        let _ = map.advise(memmap2::Advice::Sequential);
        Ok(Input { map: Some(map) })
    }

    /// The file's bytes.
    pub fn bytes(&self) -> &[u8] {
        self.map.as_deref().unwrap_or(&[])
    }

    /// Gives back the memory of the pages in `start..end` (rounded inwards
    /// to whole pages): a walk that has passed them calls this so that its
    /// resident set does not grow with the file. The bytes stay readable:
    /// a later read faults them in again from the file.
    pub fn release(&self, start: usize, end: usize) {
        const PAGE: usize = 4096;
        let Some(map) = &self.map else { return };
        let start = start.div_ceil(PAGE) * PAGE;
        let end = end.min(map.len()) / PAGE * PAGE;
        if start >= end {
            return;
        }
        // SAFETY: MADV_DONTNEED on a private, read-only file mapping only
        // drops the page cache's mapping of those pages; their contents
        // are the file's and come back unchanged on the next access, so
        // slices borrowed from the map stay valid and keep their bytes.
        // Failure (an old kernel) only means the pages stay resident.
        let _ = unsafe {
            map.unchecked_advise_range(memmap2::UncheckedAdvice::DontNeed, start, end - start)
        };
    }
}

/// The report for `path`. Err is an I/O or usage problem (exit 2); damage
/// in the data is listed under `problems` in the report.
pub fn info(path: &Path, options: InfoOptions) -> Result<Node, String> {
    let meta = std::fs::metadata(path).map_err(|e| format!("{}: {e}", path.display()))?;
    let mut report = Node::object().with("path", path.display().to_string());
    let mut problems = Problems::new(None);
    if meta.is_dir() {
        let manifest = find_manifest(path)?;
        let input = Input::open(&manifest)?;
        let dir = manifest.parent().unwrap_or(Path::new(".")).to_path_buf();
        manifest_report(
            &mut report,
            &dir,
            &manifest,
            input.bytes(),
            options,
            &mut problems,
        );
    } else {
        let input = Input::open(path)?;
        let data = input.bytes();
        report.set("size_bytes", data.len());
        if looks_like_manifest(data) {
            let dir = path
                .parent()
                .filter(|p| !p.as_os_str().is_empty())
                .unwrap_or(Path::new("."))
                .to_path_buf();
            manifest_report(&mut report, &dir, path, data, options, &mut problems);
        } else {
            let _progress = crate::progress::Progress::spinner(data.len() as u64, "reading");
            file_report(&mut report, data, options, &mut problems);
        }
    }
    finish(report, problems)
}

/// Puts the status first and the problems last.
fn finish(report: Node, problems: Problems) -> Result<Node, String> {
    let Node::Object(fields) = report else {
        return Ok(report);
    };
    let status = if problems.list.is_empty() {
        "ok"
    } else {
        "damaged"
    };
    let mut out = Node::object();
    let mut fields = fields.into_iter();
    if let Some((k, v)) = fields.next() {
        out.set(&k, v);
    }
    out.set("status", status);
    for (k, v) in fields {
        out.set(&k, v);
    }
    out.set("problems", problems.list);
    Ok(out)
}

/// A single file of any format (not a manifest).
fn file_report(report: &mut Node, data: &[u8], options: InfoOptions, problems: &mut Problems) {
    if data.starts_with(&snapshot::MAGIC) {
        // A snapshot followed by log data is an AOF with a native preamble.
        if let Ok(len) = snapshot::image_len(data) {
            if len < data.len() && looks_like_aof(&data[len..]) {
                return aof_report(report, data, options, problems);
            }
        }
        return hoz_report(report, data, options, problems);
    }
    if reader::is_rdb(data) {
        // An RDB file ends with the EOF opcode and 8 checksum bytes; an AOF
        // with an RDB preamble ends with its log's CRLF. Only when the end
        // does not say which is the image walked to find where it ends.
        let ends_as_rdb = data.len() >= 9 && data[data.len() - 9] == 0xff;
        if !ends_as_rdb || data.ends_with(b"\r\n") {
            if let Ok(s) = reader::scan(data) {
                if s.len < data.len() && looks_like_aof(&data[s.len..]) {
                    return aof_report(report, data, options, problems);
                }
            }
        }
        let scanned = read_rdb(data, options);
        return rdb_report(report, data, scanned, options, problems);
    }
    if looks_like_aof(data) {
        return aof_report(report, data, options, problems);
    }
    report.set("format", "unknown");
    problems.push(
        0,
        "not a dump.hoz, RDB, AOF or AOF manifest (unrecognised content at offset 0)",
    );
}

pub(crate) fn looks_like_aof(data: &[u8]) -> bool {
    data.is_empty() || data[0] == b'*' || data[0] == b'#'
}

// ---------------------------------------------------------------------------
// Redis RDB.

/// The value type a type byte encodes (what TYPE reports).
fn logical_type(t: u8) -> &'static str {
    use rdb::kind::*;
    match t {
        STRING => "string",
        LIST | LIST_ZIPLIST | LIST_QUICKLIST | LIST_QUICKLIST_2 => "list",
        SET | SET_INTSET | SET_LISTPACK => "set",
        ZSET | ZSET_2 | ZSET_ZIPLIST | ZSET_LISTPACK => "zset",
        STREAM_LISTPACKS | STREAM_LISTPACKS_2 | STREAM_LISTPACKS_3 => "stream",
        MODULE_PRE_GA | MODULE_2 => "module",
        _ => "hash",
    }
}

const TYPE_ORDER: [&str; 7] = ["string", "list", "hash", "set", "zset", "stream", "module"];

/// The options the checking walk reads with: the loader's (hash fields
/// whose TTL passed are dropped, keys whose expiry passed are not kept,
/// so they cannot clash with a later key of the same name).
pub(crate) fn check_options() -> reader::Options {
    let now = hozon::engine::now_ms();
    reader::Options {
        limits: hozon::Config::default().limits,
        databases: reader::MAX_DATABASES,
        skip_expired_before_ms: Some(now),
        now_ms: now,
    }
}

/// The RDB image at the start of `data`: checked as the loader reads it,
/// or with `--quick` only walked (lengths and the CRC).
fn read_rdb(data: &[u8], options: InfoOptions) -> Result<reader::ScanSummary, reader::RdbError> {
    if options.quick {
        return reader::scan(data);
    }
    reader::check_file(data, &check_options())
}

fn rdb_report(
    report: &mut Node,
    data: &[u8],
    scanned: Result<reader::ScanSummary, reader::RdbError>,
    options: InfoOptions,
    problems: &mut Problems,
) {
    report.set("format", "rdb");
    let s = match scanned {
        Ok(s) => s,
        Err(e) => {
            if let Ok((version, valkey, _)) = reader::read_header(data) {
                report.set("signature", if valkey { "VALKEY" } else { "REDIS" });
                report.set("version", version);
            }
            problems.push(e.offset, e.to_string());
            return;
        }
    };
    report.set("signature", if s.valkey { "VALKEY" } else { "REDIS" });
    report.set("version", s.version);
    let mut aux = Node::object();
    let mut created = Node::Null;
    for (k, v) in &s.aux {
        aux.set(&bytes_text(k), bytes_text(v));
        if k.as_bytes() == b"ctime" {
            if let Some(secs) = std::str::from_utf8(v)
                .ok()
                .and_then(|t| t.parse::<i64>().ok())
            {
                created = Node::object()
                    .with("unix_s", secs)
                    .with("utc", utc_text(secs.saturating_mul(1000)));
            }
        }
    }
    report.set("created", created);
    report.set("aux", aux);
    let total: u64 = s.keys_per_db.values().sum();
    report.set("keys", total);
    report.set("expiring_keys", s.expiring);
    // Keys a server loading the file now would drop (redis-check-rdb's
    // "already expired").
    report.set("already_expired_keys", s.expired);
    report.set(
        "databases",
        s.keys_per_db
            .iter()
            .map(|(db, keys)| Node::object().with("db", *db).with("keys", *keys))
            .collect::<Vec<_>>(),
    );
    let mut types = Vec::new();
    for name in TYPE_ORDER {
        let (keys, bytes) = s
            .types
            .iter()
            .filter(|(t, _)| logical_type(**t) == name)
            .fold((0, 0), |(k, b), (_, c)| (k + c.keys, b + c.bytes));
        if keys > 0 {
            types.push(
                Node::object()
                    .with("type", name)
                    .with("keys", keys)
                    .with("bytes", bytes),
            );
        }
    }
    report.set("types", types);
    report.set(
        "encodings",
        s.types
            .iter()
            .filter(|(_, c)| c.keys > 0)
            .map(|(t, c)| {
                let name = rdb::kind::name(*t).map_or_else(|| format!("type {t}"), str::to_string);
                Node::object()
                    .with("encoding", name)
                    .with("type_byte", u64::from(*t))
                    .with("keys", c.keys)
                    .with("bytes", c.bytes)
            })
            .collect::<Vec<_>>(),
    );
    report.set("function_libraries", s.functions);
    report.set(
        "empty_keys_skipped",
        if options.quick {
            Node::Null
        } else {
            Node::from(s.empty_skipped)
        },
    );
    report.set(
        "values",
        if options.quick {
            "not checked (--quick)".to_string()
        } else {
            format!("verified ({total} keys, as hozon-server loads them)")
        },
    );
    report.set("redis_7_0", redis_7_0(&s, options));
    report.set(
        "checksum",
        match s.checksum {
            Some(reader::Checksum::Verified) => "verified",
            Some(reader::Checksum::Unchecked) => "not computed (stored as zero)",
            Some(reader::Checksum::Absent) => "absent (RDB version < 5)",
            None => "not reached",
        },
    );
    report.set("length_bytes", s.len);
    if s.len < data.len() {
        problems.push(
            s.len as u64,
            format!(
                "{} bytes after the end of the RDB image (EOF and checksum end at offset {})",
                data.len() - s.len,
                s.len
            ),
        );
    }
}

/// Where Redis 7.0's verdict on an intact file differs from hozon-server's.
fn redis_7_0(s: &reader::ScanSummary, options: InfoOptions) -> Node {
    let mut notes: Vec<Node> = Vec::new();
    let mut loads = true;
    if s.valkey || s.version > 10 {
        loads = false;
        notes.push(Node::from(format!(
            "Redis 7.0 reads RDB versions up to 10 and refuses this {} version {} file",
            if s.valkey { "Valkey" } else { "RDB" },
            s.version
        )));
    }
    let modules = s
        .types
        .iter()
        .filter(|(t, _)| logical_type(**t) == "module")
        .map(|(_, c)| c.keys)
        .sum::<u64>();
    if modules > 0 {
        loads = false;
        notes.push(Node::from(format!(
            "{modules} module values: Redis 7.0 loads them only with their module loaded; hozon-server skips them"
        )));
    }
    if s.functions > 0 {
        notes.push(Node::from(format!(
            "{} function libraries: Redis 7.0 loads them; hozon-server does not",
            s.functions
        )));
    }
    if s.empty_skipped > 0 {
        notes.push(Node::from(format!(
            "{} empty collections: Redis 7.0 skips them with a log line, as hozon-server does; redis-check-rdb 7.0 fails on the file",
            s.empty_skipped
        )));
    }
    if options.quick {
        notes.push(Node::from(
            "values not checked (--quick): nothing is known of damage inside them",
        ));
    }
    Node::object()
        .with("loads", if loads { "yes" } else { "no" })
        .with("notes", notes)
}

// ---------------------------------------------------------------------------
// dump.hoz.

/// Where a snapshot error is in the file.
pub(crate) fn snapshot_offset(e: &snapshot::SnapshotError) -> u64 {
    e.offset().unwrap_or(0)
}

fn hoz_report(report: &mut Node, data: &[u8], options: InfoOptions, problems: &mut Problems) {
    report.set("format", "dump.hoz");
    let mut checks = Node::object();
    // The header's checksum and every block header's checksum, walking
    // from the header to the footer, then the trailer that points back.
    let framing = match snapshot::image_len(data) {
        Ok(len) if len == data.len() => {
            checks.set("header_and_block_headers", "verified");
            None
        }
        Ok(len) => {
            checks.set("header_and_block_headers", "verified");
            Some((
                len as u64,
                format!(
                    "{} bytes after the snapshot's trailer (which ends at offset {len})",
                    data.len() - len
                ),
            ))
        }
        Err(e) => {
            checks.set("header_and_block_headers", "FAILED");
            Some((snapshot_offset(&e), e.to_string()))
        }
    };
    // The loader reads the trailer and footer first: when they are
    // damaged, their problem is the file's verdict (a damaged trailer
    // also leaves the framing walk without an end, a second symptom).
    let s = match snapshot::read_summary(data) {
        Ok(s) => {
            checks.set("footer_and_trailer", "verified");
            s
        }
        Err(e) => {
            checks.set("footer_and_trailer", "FAILED");
            problems.push(snapshot_offset(&e), e.to_string());
            if let Some((at, message)) = framing {
                problems.push(at, message);
            }
            report.set("checks", checks);
            return;
        }
    };
    if let Some((at, message)) = framing {
        problems.push(at, message);
    }
    report.set(
        "format_version",
        format!("{}.{}", s.format_major, s.format_minor),
    );
    report.set("engine_version", s.engine_version.as_str());
    report.set(
        "created",
        Node::object()
            .with("unix_ms", s.created_ms)
            .with("utc", utc_text(s.created_ms)),
    );
    report.set("databases_configured", s.databases);
    let st = &s.stats;
    report.set("keys", st.keys);
    report.set("expiring_keys", st.expiring_keys);
    // The footer has the expiry range, not each key's: the count is known
    // when the range lies wholly before or after now; otherwise `keys
    // --expires` lists the keys and their expiry.
    let now = hozon::engine::now_ms();
    let expired: Option<u64> = match (st.min_expire_ms, st.max_expire_ms) {
        (None, _) | (_, None) => Some(0),
        (Some(min), _) if min >= now => Some(0),
        (_, Some(max)) if max < now => Some(st.expiring_keys),
        _ => None,
    };
    report.set("already_expired_keys", expired);
    if let (Some(min), Some(max)) = (st.min_expire_ms, st.max_expire_ms) {
        report.set(
            "expiry_range",
            Node::object()
                .with("earliest_utc", utc_text(min))
                .with("latest_utc", utc_text(max)),
        );
    }
    report.set(
        "databases",
        st.dbs
            .iter()
            .map(|(db, d)| {
                Node::object()
                    .with("db", *db)
                    .with("keys", d.keys)
                    .with("expiring_keys", d.expiring_keys)
            })
            .collect::<Vec<_>>(),
    );
    let mut types = Vec::new();
    for t in snapshot::ValueType::ALL {
        let ts = st.of(t);
        if ts.keys == 0 {
            continue;
        }
        let mut row = Node::object()
            .with("type", t.name())
            .with("keys", ts.keys)
            .with("elements", ts.elements)
            .with("bytes", ts.bytes);
        if let Some(l) = &ts.largest {
            let mut prefix = bytes_text(&l.key_prefix);
            if l.key_len > l.key_prefix.len() as u64 {
                prefix.push_str("...");
            }
            row.set("largest_key", prefix);
            row.set("largest_bytes", l.bytes);
        }
        types.push(row);
    }
    report.set("types", types);
    report.set("split_values", st.split_values);
    report.set("blocks", s.blocks.len());
    report.set("raw_bytes", s.raw_bytes);
    report.set("stored_bytes", s.stored_bytes);
    if options.quick {
        checks.set("block_payloads", "not checked (--quick)");
        checks.set("records", "not decoded (--quick: counts are the footer's)");
    } else if !problems.list.is_empty() {
        // The load stops at the frame's damage: so does the verdict.
        checks.set("block_payloads", "not checked (the frame is damaged)");
        checks.set("records", "not decoded (the frame is damaged)");
    } else {
        // What a load does: every block's CRC, every record decoded (on
        // one thread per core), a key stored twice refused.
        let read = snapshot::ReadOptions {
            workers: std::thread::available_parallelism().map_or(1, |n| n.get()),
            ..snapshot::ReadOptions::default()
        };
        let mut seen = crate::source::KeysSeen::default();
        let mut twice: Option<(u32, String)> = None;
        let scanned = snapshot::scan_keys(data, &read, &mut |k| {
            if !seen.insert(k.db, &k.key) {
                twice = Some((
                    k.block,
                    format!(
                        "the key '{}' (db {}) appears twice in the snapshot",
                        hozon::tools::report::escape_key(&k.key),
                        k.db
                    ),
                ));
                return std::ops::ControlFlow::Break(());
            }
            std::ops::ControlFlow::Continue(())
        });
        match (scanned, twice) {
            (_, Some((block, message))) => {
                let at = s.blocks.get(block as usize).map_or(0, |b| b.offset);
                checks.set("block_payloads", format!("verified up to block {block}"));
                checks.set("records", "FAILED");
                problems.push(at, format!("at offset {at}: {message}"));
            }
            (Ok(_), None) => {
                checks.set(
                    "block_payloads",
                    format!("verified ({} blocks)", s.blocks.len()),
                );
                checks.set(
                    "records",
                    format!("verified ({} keys, as hozon-server loads them)", st.keys),
                );
            }
            (Err(e), None) => {
                checks.set("block_payloads", "FAILED");
                checks.set("records", "FAILED");
                problems.push(snapshot_offset(&e), e.to_string());
            }
        }
    }
    report.set("checks", checks);
}

/// Checks the index (blocks contiguous up to the footer) and every block
/// payload's CRC-32 against the index; returns the damaged blocks.
fn check_payloads(data: &[u8], s: &snapshot::Summary, problems: &mut Problems) -> usize {
    let mut damaged = 0;
    for (i, b) in s.blocks.iter().enumerate() {
        let next = s.blocks.get(i + 1).map_or(s.footer_offset, |n| n.offset);
        if b.end() != next {
            problems.push(
                b.offset,
                format!(
                    "index: block {i} ends at {} but the next part starts at {next}",
                    b.end()
                ),
            );
            damaged += 1;
            continue;
        }
        let start = b.offset.saturating_add(snapshot::BLOCK_HEADER_LEN as u64);
        let payload = usize::try_from(start)
            .ok()
            .zip(usize::try_from(b.end()).ok())
            .and_then(|(from, to)| data.get(from..to));
        let Some(payload) = payload else {
            problems.push(b.offset, format!("index: block {i} lies outside the file"));
            damaged += 1;
            continue;
        };
        let computed = crc32fast::hash(payload);
        if computed != b.payload_crc {
            problems.push(
                b.offset,
                format!(
                    "block {i} at offset {} ({} keys): payload checksum mismatch (stored {:#010x}, computed {computed:#010x})",
                    b.offset, b.records, b.payload_crc
                ),
            );
            damaged += 1;
        }
    }
    damaged
}

// ---------------------------------------------------------------------------
// AOF.

fn aof_report(report: &mut Node, data: &[u8], options: InfoOptions, problems: &mut Problems) {
    report.set("format", "aof");
    let mut start = 0;
    if data.starts_with(&snapshot::MAGIC) {
        let mut pre = Node::object().with("kind", "dump.hoz");
        match snapshot::image_len(data)
            .and_then(|len| snapshot::read_summary(&data[..len]).map(|s| (len, s)))
        {
            Ok((len, s)) => {
                start = len;
                pre.set("bytes", len);
                pre.set("keys", s.stats.keys);
                // The same checks as for a dump.hoz: the image was
                // fsynced before the file got its name, so any damage
                // there is corruption.
                if options.quick {
                    pre.set("block_payloads", "not checked (--quick)");
                } else {
                    let damaged = check_payloads(&data[..len], &s, problems);
                    pre.set(
                        "block_payloads",
                        if damaged == 0 { "verified" } else { "FAILED" },
                    );
                }
                report.set("preamble", pre);
            }
            Err(e) => {
                report.set("preamble", pre);
                problems.push(snapshot_offset(&e), format!("snapshot preamble: {e}"));
                return;
            }
        }
    } else if reader::is_rdb(data) {
        let mut pre = Node::object().with("kind", "rdb");
        match read_rdb(data, options) {
            Ok(s) => {
                start = s.len;
                pre.set("version", s.version);
                pre.set("bytes", s.len);
                pre.set("keys", s.keys_per_db.values().sum::<u64>());
                report.set("preamble", pre);
            }
            Err(e) => {
                report.set("preamble", pre);
                problems.push(e.offset, format!("RDB preamble: {e}"));
                return;
            }
        }
    } else {
        report.set("preamble", Node::Null);
    }
    let log = &data[start..];
    let base = start as u64;
    match aof::replay(log, &mut |_| Ok(())) {
        Ok(r) => {
            report.set(
                "flavor",
                if r.checksummed {
                    "hozon (checksummed batches)"
                } else {
                    "redis (plain RESP)"
                },
            );
            report.set("commands", r.commands);
            if r.checksummed {
                report.set("batches", r.batches);
            }
            report.set("valid_bytes", base + r.valid_len);
            report.set("time_span", time_span(r.first_ts_ms, r.last_ts_ms));
            match &r.torn {
                Some(t) => {
                    let (at, node, text) = hozon::tools::report::torn_tail(base, t);
                    report.set("torn_tail", node);
                    problems.push(at, text);
                }
                None => report.set("torn_tail", Node::Null),
            }
        }
        Err(c) => {
            let at = base + c.offset;
            // No report from a corrupt log: find its first timestamp
            // with a separate walk.
            report.set("time_span", time_span(first_timestamp(log), None));
            problems.push(at, format!("corrupt at offset {at}: {}", c.reason));
        }
    }
}

fn time_span(first_ms: Option<i64>, last_ms: Option<i64>) -> Node {
    let Some(first) = first_ms else {
        return Node::Null;
    };
    let mut span = Node::object()
        .with("first_ms", first)
        .with("first_utc", utc_text(first));
    if let Some(last) = last_ms {
        span.set("last_ms", last);
        span.set("last_utc", utc_text(last));
        span.set("seconds", last.saturating_sub(first).max(0) / 1000);
    }
    span
}

/// The first `#hz1` annotation's or `#TS:` line's time (ms), walking the
/// log's commands without allocating; None when the log has none or does
/// not parse before one.
fn first_timestamp(data: &[u8]) -> Option<i64> {
    let mut pos = 0;
    while pos < data.len() {
        let (line, next) = line_at(data, pos, 1024)?;
        if line.starts_with(b"#") {
            if let Some(a) = aof::parse_annotation(line) {
                return Some(a.ts_ms);
            }
            if let Some(secs) = line.strip_prefix(b"#TS:") {
                return number(secs).map(|s| s.saturating_mul(1000));
            }
            pos = next;
            continue;
        }
        let argc = number(line.strip_prefix(b"*")?)?;
        pos = next;
        for _ in 0..argc {
            let (len_line, after) = line_at(data, pos, 32)?;
            let len = usize::try_from(number(len_line.strip_prefix(b"$")?)?).ok()?;
            pos = after.checked_add(len)?.checked_add(2)?;
        }
    }
    None
}

fn line_at(data: &[u8], pos: usize, max: usize) -> Option<(&[u8], usize)> {
    let window = data.get(pos..data.len().min(pos.saturating_add(max)))?;
    let i = window.windows(2).position(|w| w == b"\r\n")?;
    Some((&window[..i], pos + i + 2))
}

fn number(text: &[u8]) -> Option<i64> {
    std::str::from_utf8(text).ok()?.parse().ok()
}

// ---------------------------------------------------------------------------
// Redis 7 multi-part AOF.

fn manifest_report(
    report: &mut Node,
    dir: &Path,
    manifest: &Path,
    text: &[u8],
    options: InfoOptions,
    problems: &mut Problems,
) {
    report.set("format", "redis-aof-manifest");
    report.set("manifest", manifest.display().to_string());
    let entries = match aof::parse_redis_manifest(text) {
        Ok(e) => e,
        Err(e) => {
            problems.push(0, format!("{}: {e}", manifest.display()));
            return;
        }
    };
    let mut rows = Vec::new();
    let (mut keys, mut commands) = (0u64, 0u64);
    for (name, is_base) in entries {
        let path = dir.join(&name);
        let mut file_problems = Problems::new(Some(name.clone()));
        let mut row = Node::object()
            .with("file", name.as_str())
            .with("role", if is_base { "base" } else { "incr" });
        match Input::open(&path) {
            Ok(input) => {
                let data = input.bytes();
                let mut sub = Node::object();
                file_report(&mut sub, data, options, &mut file_problems);
                row.set("format", sub.get("format").cloned().unwrap_or(Node::Null));
                row.set("size_bytes", data.len());
                let file_keys = match sub
                    .get("keys")
                    .or_else(|| sub.get("preamble").and_then(|p| p.get("keys")))
                {
                    Some(Node::UInt(n)) => Some(*n),
                    _ => None,
                };
                let file_commands = match sub.get("commands") {
                    Some(Node::UInt(n)) => Some(*n),
                    _ => None,
                };
                keys += file_keys.unwrap_or(0);
                commands += file_commands.unwrap_or(0);
                row.set("keys", file_keys);
                row.set("commands", file_commands);
            }
            Err(e) => file_problems.push(0, format!("listed in the manifest but unreadable: {e}")),
        }
        row.set("problems", file_problems.list.len());
        problems.list.append(&mut file_problems.list);
        rows.push(row);
    }
    report.set("files", rows);
    report.set("base_keys", keys);
    report.set("commands", commands);
}

// ---------------------------------------------------------------------------
// Time.

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn first_timestamp_skips_commands_and_reads_ts_lines() {
        let log = b"*2\r\n$6\r\nSELECT\r\n$1\r\n0\r\n#TS:1700000000\r\n*1\r\n$4\r\nPING\r\n";
        assert_eq!(first_timestamp(log), Some(1_700_000_000_000));
        // A "#TS:" inside a value is not an annotation.
        let inside = b"*2\r\n$3\r\nGET\r\n$16\r\n\r\n#TS:1234567890\r\n";
        assert_eq!(first_timestamp(inside), None);
    }
}
