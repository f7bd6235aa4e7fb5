//! `export --json` / `--format jsonl` of an RDB file, the fast way: keys
//! are found by the skip walk ([`reader::scan_keys`], the CRC-64 following
//! it on another thread), handed in batches to one worker per core, and
//! each worker writes JSON straight from the value's encoding
//! ([`reader::visit_elements`]: listpack, ziplist and intset entries,
//! plain strings) without building a hozon `Value`. The main thread
//! writes the batches' output in file order.
//!
//! The output is byte for byte what the value-model path
//! ([`super::json::write_json_key`] over [`crate::source::Source::for_each`])
//! writes: the same escaping, set members and hash fields sorted by their
//! bytes, sorted sets in score order, the same score text. A value the
//! element walk does not cover (streams, hashes with field TTLs) or finds
//! anything unusual in (an empty collection, a duplicate, a NaN score, a
//! length that disagrees with the skip walk) is decoded by
//! [`reader::decode_value`] and written by the value-model writer.
//!
//! Damage: the first key the workers cannot decode, a damaged record the
//! walk stops at, or a wrong checksum ends the fast path with
//! [`Outcome::Resume`]: the caller then runs the value-model path over
//! the file, skipping the keys already handed on, which writes whatever
//! keys that path would have written after them and reports the damage
//! exactly as it always has. The tests compare both paths on every
//! fixture and on generated files of every encoding, damaged ones too.
//!
//! Memory: at most [`QUEUED_BATCHES`] batches are in flight, each of at
//! most [`BATCH_BYTES`] of input (or one larger key) and its JSON; the
//! walked input pages are given back behind the writer.

use std::borrow::Cow;
use std::io::{self, Write};
use std::ops::ControlFlow;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{self, Receiver, SyncSender};
use std::sync::Mutex;

use hozon::rdb::{kind, reader};
use hozon::types::ordtree::cmp_key;
use hozon::types::EncodingLimits;
use hozon::Config;

use super::filter::Filter;
use super::json::{json_bytes, json_int, json_key_head, json_score, write_json_key};
use crate::progress::Progress;
use crate::source::{KeyValue, Source};

/// Keys per batch at most.
const BATCH_KEYS: usize = 2048;
/// Input bytes per batch (a larger key makes a batch of its own).
pub(crate) const BATCH_BYTES: u64 = 1 << 20;
/// Batches walked ahead of the writer at most.
pub(crate) const QUEUED_BATCHES: usize = 8;

/// How the fast path ended.
pub(crate) enum Outcome {
    /// Every key was written; the file is sound.
    Done,
    /// Writing the output failed (a closed pipe included).
    WriteError(io::Error),
    /// Damage, or something the fast path leaves to the value-model path,
    /// was found after this many keys had been handed on (the count
    /// [`Source::for_each`] would have reached, filtered keys included):
    /// run that path and skip them.
    Resume(u64),
}

/// What [`export`] did: the outcome and the keys it wrote.
pub(crate) struct Exported {
    pub outcome: Outcome,
    pub written: u64,
}

/// One key record to decode.
struct Job<'a> {
    db: usize,
    key: Cow<'a, [u8]>,
    type_byte: u8,
    expire_ms: Option<i64>,
    /// The value's bytes as the skip walk delimited them.
    value: &'a [u8],
    /// The input from the value on: what `decode_value` reads.
    rest: &'a [u8],
    /// The filter accepts it (others are decoded, to find damage where the
    /// value-model path would, but not written).
    selected: bool,
    /// Offset of the record's end in the input.
    end: u64,
}

/// A batch's JSON and counts.
#[derive(Default)]
struct BatchOut {
    json: Vec<u8>,
    /// Keys written.
    written: u64,
    /// Keys handed on (decoded and not empty), written or not.
    handed: u64,
    /// The batch stopped at a key it could not decode.
    failed: bool,
    /// Input offset the batch's records end at.
    end: u64,
}

type Batch<'a> = (Vec<Job<'a>>, SyncSender<BatchOut>);

/// Whether the fast path applies: a mapped or read RDB file that is not
/// Valkey's (whose type 21 means something else to `decode_value`).
pub(crate) fn applies(data: &[u8]) -> bool {
    matches!(reader::read_header(data), Ok((_, false, _)))
}

/// Writes the keys `filter` accepts as JSON objects to `out`: each
/// followed by a newline (`lines`), or each preceded by `,\n` (`\n` for
/// the first) as elements of the array the caller opens and closes.
pub(crate) fn export(
    src: &Source,
    filter: &Filter<'_>,
    lines: bool,
    now_ms: i64,
    out: &mut dyn Write,
) -> Exported {
    let data = src.data();
    let _progress = Progress::spinner(data.len() as u64, "reading");
    let workers = std::thread::available_parallelism().map_or(1, |n| n.get());
    let stop = AtomicBool::new(false);
    let (work_tx, work_rx) = mpsc::sync_channel::<Batch<'_>>(workers * 2);
    let work_rx = Mutex::new(work_rx);
    let (order_tx, order_rx) = mpsc::sync_channel::<Receiver<BatchOut>>(QUEUED_BATCHES);
    let (spare_tx, spare_rx) = mpsc::sync_channel::<Vec<u8>>(QUEUED_BATCHES);
    let spare_rx = Mutex::new(spare_rx);
    let options = reader::Options {
        limits: Config::default().limits,
        databases: usize::MAX,
        skip_expired_before_ms: None,
        now_ms,
    };
    std::thread::scope(|scope| {
        for _ in 0..workers {
            scope.spawn(|| {
                let mut scratch = Scratch::default();
                loop {
                    let next = work_rx.lock().map(|rx| rx.recv());
                    let Ok(Ok((jobs, done))) = next else { return };
                    // Output buffers come back from the writer: a fresh
                    // multi-MiB buffer per batch would be mapped, faulted
                    // in page by page and unmapped every time.
                    let json = spare_rx.lock().ok().and_then(|rx| rx.try_recv().ok());
                    // A panic here (a bug) must not leave the writer
                    // waiting for this batch: it becomes a failed batch,
                    // and the value model takes over from the keys before.
                    let out = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                        run_batch(&jobs, json, &mut scratch, lines, &options, &stop)
                    }))
                    .unwrap_or_else(|_| BatchOut {
                        failed: true,
                        ..BatchOut::default()
                    });
                    let _ = done.send(out);
                }
            });
        }
        let walker = scope.spawn(|| {
            let walked = walk(data, filter, &stop, work_tx, order_tx);
            walked.is_ok()
        });
        let mut releaser = src.releaser();
        let mut written = 0u64;
        let mut handed = 0u64;
        let mut write_error = None;
        let mut failed = false;
        for done in order_rx.iter() {
            let Ok(batch) = done.recv() else {
                // A worker died (a panic): leave the rest to the slow path.
                failed = true;
                stop.store(true, Ordering::Release);
                continue;
            };
            if failed || write_error.is_some() {
                continue;
            }
            let mut json = &batch.json[..];
            if !lines && written == 0 && !json.is_empty() {
                json = &json[1..]; // the first element: no comma
            }
            if let Err(e) = out.write_all(json) {
                write_error = Some(e);
                stop.store(true, Ordering::Release);
                continue;
            }
            written += batch.written;
            handed += batch.handed;
            releaser.reached(batch.end);
            let mut spare = batch.json;
            spare.clear();
            let _ = spare_tx.try_send(spare);
            if batch.failed {
                failed = true;
                stop.store(true, Ordering::Release);
            }
        }
        let walked_ok = walker.join().unwrap_or(false);
        let outcome = match write_error {
            Some(e) => Outcome::WriteError(e),
            None if failed || !walked_ok => Outcome::Resume(handed),
            None => Outcome::Done,
        };
        Exported { outcome, written }
    })
}

/// The walk: batches of key records to the workers, their result
/// receivers to the writer in file order. Ok when the whole file was
/// walked and its checksum holds.
fn walk<'a>(
    data: &'a [u8],
    filter: &Filter<'_>,
    stop: &AtomicBool,
    work: SyncSender<Batch<'a>>,
    order: SyncSender<Receiver<BatchOut>>,
) -> Result<(), ()> {
    let mut jobs = Vec::with_capacity(BATCH_KEYS);
    let mut bytes = 0u64;
    let mut end = 0u64;
    let mut refused = false;
    let mut seen = crate::source::KeysSeen::default();
    let now = hozon::engine::now_ms();
    let send = |jobs: Vec<Job<'a>>, end: u64| -> Result<(), ()> {
        let (tx, rx) = mpsc::sync_channel(1);
        order.send(rx).map_err(drop)?;
        if jobs.is_empty() {
            // Nothing to decode (modules only): an empty result in order.
            let _ = tx.send(BatchOut {
                end,
                ..BatchOut::default()
            });
            return Ok(());
        }
        work.send((jobs, tx)).map_err(drop)
    };
    let scanned = reader::scan_keys(data, &mut |k| {
        if stop.load(Ordering::Relaxed) {
            return ControlFlow::Break(());
        }
        if k.db >= reader::MAX_DATABASES
            || (k.expire_ms.is_none_or(|at| at >= now) && !seen.insert(k.db, &k.key))
        {
            // A SELECTDB no configuration has, or a key stored twice: the
            // loaders refuse the file; the value model says where.
            refused = true;
            return ControlFlow::Break(());
        }
        let value_at = k.value_offset as usize;
        let value_end = (k.offset + k.record_bytes) as usize;
        end = value_end as u64;
        if k.type_byte == kind::MODULE_2 {
            // Skipped by every loader (the walk checked its structure).
            return ControlFlow::Continue(());
        }
        jobs.push(Job {
            db: k.db,
            key: k.key.clone(),
            type_byte: k.type_byte,
            expire_ms: k.expire_ms,
            value: &data[value_at..value_end],
            rest: &data[value_at..],
            selected: filter.accepts_parts(k.db, &k.key, k.logical_type, k.expire_ms),
            end: value_end as u64,
        });
        bytes += k.record_bytes;
        if jobs.len() >= BATCH_KEYS || bytes >= BATCH_BYTES {
            bytes = 0;
            let full = std::mem::replace(&mut jobs, Vec::with_capacity(BATCH_KEYS));
            if send(full, end).is_err() {
                return ControlFlow::Break(());
            }
        }
        ControlFlow::Continue(())
    });
    let stopped = stop.load(Ordering::Relaxed);
    let sent = send(jobs, end);
    match scanned {
        Ok(summary)
            if summary.checksum.is_some()
                && summary.len == data.len()
                && !stopped
                && !refused
                && sent.is_ok() =>
        {
            Ok(())
        }
        _ => Err(()),
    }
}

/// Reused per worker: element bytes and where each one is.
#[derive(Default)]
struct Scratch {
    arena: Vec<u8>,
    /// Elements in file order.
    spans: Vec<Span>,
    /// Elements to sort (set members, hash fields with their pair index,
    /// sorted set members).
    keyed: Vec<Span>,
    /// Sorted sets: member and score.
    scored: Vec<(Span, f64)>,
}

/// An element in the arena, with its first 16 bytes as a big-endian
/// number (zero-padded): comparing that first orders almost every pair
/// without a `memcmp`, and never contradicts the byte order.
#[derive(Clone, Copy)]
struct Span {
    prefix: u128,
    start: u32,
    end: u32,
    /// Hash fields: the pair's index.
    pair: u32,
}

impl Scratch {
    fn clear(&mut self) {
        self.arena.clear();
        self.spans.clear();
        self.keyed.clear();
        self.scored.clear();
    }

    /// Appends an element's text; returns its span.
    fn push(&mut self, e: &reader::Element<'_>) -> Span {
        let start = self.arena.len();
        match *e {
            reader::Element::Bytes(b) => self.arena.extend_from_slice(b),
            reader::Element::Int(n) => self
                .arena
                .extend_from_slice(hozon::types::num::format_i64(n, &mut [0u8; 20])),
            reader::Element::Score(_) => {}
        }
        let end = self.arena.len();
        // The first 16 bytes, zero-padded: 16 zeros appended for a
        // fixed-size read (no memcpy call per element), then dropped.
        self.arena.extend_from_slice(&[0u8; 16]);
        let head: [u8; 16] = self.arena[start..start + 16].try_into().expect("16 bytes");
        self.arena.truncate(end);
        // Offsets wrap past 4 GiB of elements: such a value is declined
        // (see `fits`) before a span is used.
        Span {
            prefix: u128::from_be_bytes(head),
            start: start as u32,
            end: self.arena.len() as u32,
            pair: 0,
        }
    }

    fn text(&self, span: &Span) -> &[u8] {
        &self.arena[span.range()]
    }

    /// The spans are valid: the arena is within their 32-bit offsets.
    fn fits(&self) -> bool {
        u32::try_from(self.arena.len()).is_ok()
    }
}

impl Span {
    fn range(&self) -> std::ops::Range<usize> {
        self.start as usize..self.end as usize
    }
}

/// Byte order of two spans of `arena`.
fn cmp_spans(arena: &[u8], a: &Span, b: &Span) -> std::cmp::Ordering {
    a.prefix
        .cmp(&b.prefix)
        .then_with(|| arena[a.range()].cmp(&arena[b.range()]))
}

/// Sorts `spans` into byte order; false when two are equal.
fn sort_unique(arena: &[u8], spans: &mut [Span]) -> bool {
    spans.sort_unstable_by(|a, b| cmp_spans(arena, a, b));
    !spans
        .windows(2)
        .any(|w| cmp_spans(arena, &w[0], &w[1]).is_eq())
}

fn run_batch(
    jobs: &[Job<'_>],
    spare: Option<Vec<u8>>,
    scratch: &mut Scratch,
    lines: bool,
    options: &reader::Options,
    stop: &AtomicBool,
) -> BatchOut {
    let mut json = spare.unwrap_or_default();
    json.reserve(jobs.iter().map(|j| j.value.len() * 2 + 128).sum());
    let mut out = BatchOut {
        json,
        end: jobs.last().map_or(0, |j| j.end),
        ..BatchOut::default()
    };
    for job in jobs {
        if stop.load(Ordering::Relaxed) {
            // The writer stopped: what follows is not written anyway.
            out.failed = true;
            break;
        }
        let start = out.json.len();
        if !lines {
            out.json.extend_from_slice(b",\n");
        }
        let object_start = out.json.len();
        json_key_head(
            &mut out.json,
            job.db,
            &job.key,
            reader::logical_type(job.type_byte),
            job.expire_ms,
        );
        let value = match fast_value(job, &options.limits, scratch, &mut out.json) {
            Ok(()) => {
                out.json.push(b'}');
                Some(true)
            }
            Err(reader::Declined) => {
                out.json.truncate(object_start);
                slow_value(job, options, &mut out.json)
            }
        };
        match value {
            Some(true) => {
                out.handed += 1;
                if job.selected {
                    if lines {
                        out.json.push(b'\n');
                    }
                    out.written += 1;
                } else {
                    out.json.truncate(start);
                }
            }
            // An empty collection: no key, as the loaders have it.
            Some(false) => out.json.truncate(start),
            None => {
                out.json.truncate(start);
                out.failed = true;
                break;
            }
        }
    }
    out
}

/// The value-model path for one key: `decode_value`, then the value
/// writer's whole key object. Some(true) written, Some(false) an empty
/// collection (no key), None damage or a value whose extent the skip walk
/// saw otherwise.
fn slow_value(job: &Job<'_>, options: &reader::Options, json: &mut Vec<u8>) -> Option<bool> {
    let (value, used) = reader::decode_value(job.rest, job.type_byte, options).ok()?;
    if used != job.value.len() {
        return None;
    }
    let Some(value) = value else {
        return Some(false);
    };
    let kv = KeyValue {
        db: job.db,
        key: &job.key,
        value: &value,
        expire_ms: job.expire_ms,
    };
    write_json_key(json, &kv).ok()?;
    Some(true)
}

/// Writes the value of `job` as JSON from its encoding, or declines.
fn fast_value(
    job: &Job<'_>,
    limits: &EncodingLimits,
    s: &mut Scratch,
    json: &mut Vec<u8>,
) -> Result<(), reader::Declined> {
    use reader::Element;
    s.clear();
    let t = job.type_byte;
    let used = match reader::logical_type(t) {
        "string" => reader::visit_elements(job.value, t, &mut |e| json_element(json, &e))?,
        "list" => {
            json.push(b'[');
            let mut n = 0usize;
            let used = reader::visit_elements(job.value, t, &mut |e| {
                if n > 0 {
                    json.push(b',');
                }
                n += 1;
                json_element(json, &e);
            })?;
            if n == 0 {
                return Err(reader::Declined);
            }
            json.push(b']');
            used
        }
        "set" => {
            let used = reader::visit_elements(job.value, t, &mut |e| {
                let span = s.push(&e);
                s.keyed.push(span);
            })?;
            if s.keyed.is_empty() || !s.fits() || !sort_unique(&s.arena, &mut s.keyed) {
                return Err(reader::Declined);
            }
            json.push(b'[');
            for (i, span) in s.keyed.iter().enumerate() {
                if i > 0 {
                    json.push(b',');
                }
                json_bytes(json, s.text(span));
            }
            json.push(b']');
            used
        }
        "hash" if !is_hash_with_ttls(t) => {
            let used = reader::visit_elements(job.value, t, &mut |e| {
                let span = s.push(&e);
                s.spans.push(span);
            })?;
            // Pairs (field, value): sort the fields, each knowing its pair.
            let pairs = s.spans.len() / 2;
            if pairs == 0 || !s.fits() {
                return Err(reader::Declined);
            }
            s.keyed.extend((0..pairs).map(|p| Span {
                pair: p as u32,
                ..s.spans[2 * p]
            }));
            if !sort_unique(&s.arena, &mut s.keyed) {
                return Err(reader::Declined);
            }
            json.push(b'[');
            for (i, field) in s.keyed.iter().enumerate() {
                if i > 0 {
                    json.push(b',');
                }
                json.push(b'[');
                json_bytes(json, s.text(field));
                json.push(b',');
                json_bytes(json, s.text(&s.spans[2 * field.pair as usize + 1]));
                json.push(b']');
            }
            json.push(b']');
            used
        }
        "zset" => {
            let mut member = None;
            let used = reader::visit_elements(job.value, t, &mut |e| match e {
                Element::Score(score) => {
                    if let Some(m) = member.take() {
                        s.scored.push((m, score));
                    }
                }
                other => member = Some(s.push(&other)),
            })?;
            if s.scored.is_empty() || !s.fits() || s.scored.iter().any(|m| m.1.is_nan()) {
                return Err(reader::Declined);
            }
            // Duplicate members are damage: look for them in member order.
            s.keyed.extend(s.scored.iter().map(|m| m.0));
            if !sort_unique(&s.arena, &mut s.keyed) {
                return Err(reader::Declined);
            }
            // A sorted set loaded as a listpack (Redis converts a compact
            // encoding by its entry count only) holds no -0.0: it stores 0.
            let compact_type = matches!(t, kind::ZSET_ZIPLIST | kind::ZSET_LISTPACK);
            let listpack = s.scored.len() <= limits.zset_max_listpack_entries
                && (compact_type
                    || s.scored
                        .iter()
                        .all(|(m, _)| m.range().len() <= limits.zset_max_listpack_value));
            if listpack {
                for (_, score) in &mut s.scored {
                    if *score == 0.0 {
                        *score = 0.0;
                    }
                }
            }
            let arena = &s.arena;
            // Stable: an ascending or descending file order costs one pass.
            s.scored.sort_by(|a, b| {
                if a.1 == b.1 {
                    cmp_spans(arena, &a.0, &b.0)
                } else {
                    cmp_key(a.1, &[], b.1, &[])
                }
            });
            json.push(b'[');
            for (i, (m, score)) in s.scored.iter().enumerate() {
                if i > 0 {
                    json.push(b',');
                }
                json.push(b'[');
                json_bytes(json, &arena[m.range()]);
                json.push(b',');
                json_score(json, *score);
                json.push(b']');
            }
            json.push(b']');
            used
        }
        _ => return Err(reader::Declined),
    };
    if used != job.value.len() {
        return Err(reader::Declined);
    }
    Ok(())
}

fn is_hash_with_ttls(t: u8) -> bool {
    matches!(
        t,
        kind::HASH_LISTPACK_EX
            | kind::HASH_LISTPACK_EX_PRE_GA
            | kind::HASH_METADATA
            | kind::HASH_METADATA_PRE_GA
    )
}

/// One string element as a JSON string.
fn json_element(json: &mut Vec<u8>, e: &reader::Element<'_>) {
    match *e {
        reader::Element::Bytes(b) => json_bytes(json, b),
        reader::Element::Int(n) => {
            json.push(b'"');
            json_int(json, n);
            json.push(b'"');
        }
        reader::Element::Score(score) => json_score(json, score),
    }
}
