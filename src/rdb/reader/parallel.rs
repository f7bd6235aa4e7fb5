//! [`load_streaming`]'s reader: values built on every core. One thread
//! walks the records with the skip pass (`scan::skip_value`: lengths
//! only, no value built), handing batches of records to builder threads
//! that read each key and value as the loader does (`read_value`, the
//! same checks); the calling thread takes the batches back in file order
//! and runs the sink. The result is the sequential parse's (`parse_from`):
//! the same keys in the same order, the same summary, the same first
//! error (a record the skip pass cannot walk is read again by the
//! loader's value reader for its error).
//!
//! Memory: a few batches in flight (each at most [`BATCH_RECORDS`]
//! records or about [`BATCH_BYTES`] of file).

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Mutex};

use super::file::{
    apply_meta, begin_summary, end_summary, read_meta, skip_module_value, Event, MetaStep,
};
use super::scan::skip_value;
use super::*;

/// Records per batch at most.
const BATCH_RECORDS: usize = 256;
/// File bytes per batch, about (a batch ends after the record that
/// reaches it).
const BATCH_BYTES: usize = 1 << 20;

/// One record of a batch, in file order.
enum Item {
    /// A RESIZEDB hint (database, keys, keys with an expiry), capped.
    Resize(usize, u64, u64),
    /// A key whose record starts at `record_at`: its key string at
    /// `key_at`, its value of type `t` from `value_at` to `end`.
    Key {
        record_at: usize,
        t: u8,
        key_at: usize,
        value_at: usize,
        end: usize,
        db: usize,
        expire_ms: Option<i64>,
        access: Option<crate::keyspace::KeyAccess>,
    },
}

/// What the walker hands on: a batch of records, all of them within the
/// first `upto` bytes.
struct Walked {
    seq: usize,
    items: Vec<Item>,
    upto: usize,
}

/// A built batch: the events in order, the counters of the records it
/// skipped, and the first failure (the events before it are kept).
struct Built {
    events: Vec<Event>,
    counts: Counts,
    failure: Option<RdbError>,
}

/// The per-record counters the summary adds up.
#[derive(Default)]
struct Counts {
    keys: u64,
    expired_skipped: u64,
    empty_skipped: u64,
    field_ttls_dropped: u64,
    expired_fields_dropped: u64,
}

/// How the walk ended: the summary of what it read (header, AUX fields,
/// functions, modules, checksum, length), or the first failure among
/// the records it walked (after `batches` batches).
struct WalkEnd {
    batches: usize,
    result: Result<Summary, RdbError>,
}

/// Loads `window` (a payload still arriving, `feed` says how far) with the
/// values built on `builders` threads beside the walker; the calling
/// thread runs `sink` and `resize` in file order.
pub(super) fn load_parallel(
    window: &[u8],
    feed: &dyn Feed,
    options: &Options,
    builders: usize,
    sink: &mut dyn FnMut(LoadedKey) -> SinkResult,
    resize: &mut dyn FnMut(usize, u64, u64),
) -> Result<Summary, RdbError> {
    let stream = Streaming { window, feed };
    let stop = AtomicBool::new(false);
    let (to_builders, batches) = mpsc::sync_channel::<Walked>(builders * 2);
    let batches = Mutex::new(batches);
    let (to_taker, built) = mpsc::channel::<(usize, Built)>();
    std::thread::scope(|scope| {
        let stop = &stop;
        let walker = scope.spawn(move || {
            let end = walk(stream, options, stop, &to_builders);
            drop(to_builders);
            end
        });
        for _ in 0..builders {
            let (batches, to_taker) = (&batches, to_taker.clone());
            // A builder takes batches until the walker is done, building
            // none once the load stopped (so the walker never waits on a
            // full channel nobody empties).
            scope.spawn(move || loop {
                let next = batches.lock().map(|rx| rx.recv());
                let Ok(Ok(Walked { seq, items, upto })) = next else {
                    return;
                };
                let built = if stop.load(Ordering::Relaxed) {
                    Built {
                        events: Vec::new(),
                        counts: Counts::default(),
                        failure: None,
                    }
                } else {
                    build(&window[..upto], options, &items)
                };
                if to_taker.send((seq, built)).is_err() {
                    stop.store(true, Ordering::Relaxed);
                }
            });
        }
        drop(to_taker);
        let taken = take_in_order(&built, sink, resize);
        if taken.is_err() {
            stop.store(true, Ordering::Relaxed);
        }
        // The builders end when the walker's channel closes; the walker
        // when it sees `stop` or its channel closed.
        drop(built);
        let end = walker
            .join()
            .unwrap_or_else(|panic| std::panic::resume_unwind(panic));
        let counts = taken?;
        let WalkEnd { batches, result } = end;
        let (done, counts) = counts;
        if done < batches {
            // A builder stopped early (it cannot, short of a panic).
            return Err(RdbError::new(
                ErrorKind::Corrupt,
                0,
                "internal error: a batch of values was not built",
            ));
        }
        let mut summary = result?;
        summary.keys = counts.keys;
        summary.expired_skipped = counts.expired_skipped;
        summary.empty_skipped = counts.empty_skipped;
        summary.field_ttls_dropped = counts.field_ttls_dropped;
        summary.expired_fields_dropped = counts.expired_fields_dropped;
        Ok(summary)
    })
}

/// Takes the built batches in order, running the sink: (batches taken,
/// counters), or the first failure in file order.
fn take_in_order(
    built: &mpsc::Receiver<(usize, Built)>,
    sink: &mut dyn FnMut(LoadedKey) -> SinkResult,
    resize: &mut dyn FnMut(usize, u64, u64),
) -> Result<(usize, Counts), RdbError> {
    let mut waiting: BTreeMap<usize, Built> = BTreeMap::new();
    let mut next = 0usize;
    let mut total = Counts::default();
    for (seq, batch) in built.iter() {
        waiting.insert(seq, batch);
        while let Some(batch) = waiting.remove(&next) {
            next += 1;
            for event in batch.events {
                match event {
                    Event::Key(at, key) => {
                        let ident = (key.db, key.key.clone());
                        if let Err(message) = sink(key) {
                            return Err(RdbError {
                                kind: ErrorKind::Rejected,
                                offset: at as u64,
                                message,
                                key: Some(ident),
                            });
                        }
                    }
                    Event::Resize(db, keys, expiring) => resize(db, keys, expiring),
                }
            }
            if let Some(e) = batch.failure {
                return Err(e);
            }
            let c = batch.counts;
            total.keys += c.keys;
            total.expired_skipped += c.expired_skipped;
            total.empty_skipped += c.empty_skipped;
            total.field_ttls_dropped += c.field_ttls_dropped;
            total.expired_fields_dropped += c.expired_fields_dropped;
        }
    }
    Ok((next, total))
}

/// Builds a batch's keys and values (`data`: the file as far as the
/// batch reaches).
fn build(data: &[u8], options: &Options, items: &[Item]) -> Built {
    let mut events = Vec::with_capacity(items.len());
    let mut counts = Counts::default();
    let mut summary = Summary::default();
    for item in items {
        let &Item::Key {
            record_at,
            t,
            key_at,
            value_at,
            end,
            db,
            expire_ms,
            access,
        } = item
        else {
            if let Item::Resize(db, keys, expiring) = *item {
                events.push(Event::Resize(db, keys, expiring));
            }
            continue;
        };
        let mut c = Cursor::new(data, key_at);
        let key = match c.blob("a key") {
            Ok(key) => key,
            Err(e) => return failed(events, counts, &summary, e),
        };
        let mut c = Cursor::new(data, value_at);
        let value = match read_value(&mut c, t, options, &mut summary) {
            Ok(value) if c.pos == end => value,
            Ok(_) => {
                let e = c.corrupt(
                    value_at,
                    format!("the value is read to offset {}, its record to {end}", c.pos),
                );
                return failed(events, counts, &summary, with_key(e, db, &key));
            }
            Err(e) => return failed(events, counts, &summary, with_key(e, db, &key)),
        };
        let Some(value) = value else {
            counts.empty_skipped += 1;
            continue;
        };
        if let (Some(at), Some(before)) = (expire_ms, options.skip_expired_before_ms) {
            if at < before {
                counts.expired_skipped += 1;
                continue;
            }
        }
        counts.keys += 1;
        events.push(Event::Key(
            record_at,
            LoadedKey {
                db,
                key,
                value,
                expire_ms,
                access,
            },
        ));
    }
    counts.field_ttls_dropped = summary.field_ttls_dropped;
    counts.expired_fields_dropped = summary.expired_fields_dropped;
    Built {
        events,
        counts,
        failure: None,
    }
}

fn failed(events: Vec<Event>, mut counts: Counts, summary: &Summary, e: RdbError) -> Built {
    counts.field_ttls_dropped = summary.field_ttls_dropped;
    counts.expired_fields_dropped = summary.expired_fields_dropped;
    Built {
        events,
        counts,
        failure: Some(e),
    }
}

fn with_key(mut e: RdbError, db: usize, key: &Blob) -> RdbError {
    e.key = Some((db, key.clone()));
    e
}

/// The walk: records found by the skip pass, batches handed on in
/// order. Metadata is read here; a record the skip pass cannot walk is
/// read again with the loader's reader, whose error is the one reported.
fn walk(
    stream: Streaming<'_>,
    options: &Options,
    stop: &AtomicBool,
    out: &mpsc::SyncSender<Walked>,
) -> WalkEnd {
    let mut seq = 0usize;
    let mut send = |items: &mut Vec<Item>, upto: usize| -> bool {
        if items.is_empty() {
            return true;
        }
        let batch = Walked {
            seq,
            items: std::mem::take(items),
            upto,
        };
        seq += 1;
        out.send(batch).is_ok()
    };
    let result = walk_records(stream, options, stop, &mut send);
    WalkEnd {
        batches: seq,
        result,
    }
}

/// [`walk`]'s loop; `send` hands on a batch (false: nobody takes it).
fn walk_records(
    stream: Streaming<'_>,
    options: &Options,
    stop: &AtomicBool,
    send: &mut dyn FnMut(&mut Vec<Item>, usize) -> bool,
) -> Result<Summary, RdbError> {
    let stopped = || RdbError::new(ErrorKind::Rejected, 0, "stopped: the sink refused a key");
    let mut c = Cursor::streaming(stream, 0);
    let mut summary = begin_summary(&mut c)?;
    let valkey = summary.valkey;
    let mut db = 0usize;
    let mut expire: Option<i64> = None;
    let mut access = None;
    let mut items: Vec<Item> = Vec::with_capacity(BATCH_RECORDS);
    let mut batch_from = c.pos;
    loop {
        if items.len() >= BATCH_RECORDS || c.pos - batch_from >= BATCH_BYTES {
            if stop.load(Ordering::Relaxed) || !send(&mut items, c.pos) {
                return Err(stopped());
            }
            batch_from = c.pos;
        }
        let record_at = c.pos;
        let t = c.u8("a record type")?;
        if let Some(meta) = read_meta(&mut c, t, record_at)? {
            let hint = c.remaining_bound();
            match apply_meta(
                meta,
                record_at,
                hint,
                options,
                &mut db,
                &mut expire,
                &mut access,
                &mut summary,
            ) {
                Ok(MetaStep::End) => break,
                Ok(MetaStep::Resize(db, keys, expiring)) => {
                    items.push(Item::Resize(db, keys, expiring))
                }
                Ok(MetaStep::Next) => {}
                Err(e) => {
                    // The keys before it come first.
                    send(&mut items, c.pos);
                    return Err(e);
                }
            }
            continue;
        }
        let key_at = c.pos;
        let key_expire = expire.take();
        let key_access = access.take();
        if let Err(e) = c.skip_string("a key") {
            // The loader's reading of the key, for its error.
            send(&mut items, key_at);
            return Err(reread_key(stream, key_at).unwrap_or(e));
        }
        if t == kind::MODULE_2 {
            let mut p = Cursor::streaming(stream, key_at);
            let key = p.blob("a key")?;
            let attach = |mut e: RdbError| {
                e.key = Some((db, key.clone()));
                e
            };
            let module_id = c.len("a module id").map_err(attach)?;
            let name = module_name(module_id);
            skip_module_value(&mut c, &name).map_err(attach)?;
            summary.modules_skipped.push(name);
            continue;
        }
        let value_at = c.pos;
        if let Err(e) = skip_value(&mut c, t, valkey) {
            // The records before it go first; this one is read by the
            // loader's value reader, whose error the sequential load
            // reports.
            if !send(&mut items, record_at) {
                return Err(stopped());
            }
            return Err(reread_value(stream, options, db, key_at, t, value_at).unwrap_or(e));
        }
        items.push(Item::Key {
            record_at,
            t,
            key_at,
            value_at,
            end: c.pos,
            db,
            expire_ms: key_expire,
            access: key_access,
        });
    }
    if !send(&mut items, c.pos) {
        return Err(stopped());
    }
    let window = stream.window;
    let mut crc = |covered: usize| crate::rdb::crc64(&window[..covered]);
    end_summary(summary, &mut c, &mut crc)
}

/// The loader's error for the key string at `key_at`, if it has one.
fn reread_key(stream: Streaming<'_>, key_at: usize) -> Option<RdbError> {
    Cursor::streaming(stream, key_at).blob("a key").err()
}

/// The loader's error for the value of type `t` at `value_at`, if it has
/// one (with the key attached, as the sequential parse attaches it).
fn reread_value(
    stream: Streaming<'_>,
    options: &Options,
    db: usize,
    key_at: usize,
    t: u8,
    value_at: usize,
) -> Option<RdbError> {
    let key = Cursor::streaming(stream, key_at).blob("a key").ok()?;
    let mut c = Cursor::streaming(stream, value_at);
    let mut summary = Summary::default();
    read_value(&mut c, t, options, &mut summary)
        .err()
        .map(|e| with_key(e, db, &key))
}
