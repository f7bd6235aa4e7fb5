//! The checking walk ([`check_keys`]): every key record of a file, each
//! value read by the loader's own value reader in its checking form
//! ([`read_value_as`] without building), so that the walk fails where,
//! and only where, a load fails.
//!
//! The records are found by the skip pass (cheap: lengths only) on the
//! calling thread, and their values are checked in batches by one thread
//! per core; the calling thread then takes the batches back in file
//! order, counts and visits their keys, and looks for keys stored twice.
//! A batch is visited only once it is checked, so a visitor never sees a
//! key after the damage. When the skip pass itself fails inside a value,
//! that value is checked too, and the value reader's error (the loader's)
//! is the one reported.

use std::borrow::Cow;
use std::collections::hash_map::Entry;
use std::collections::{BTreeMap, HashMap, VecDeque};
use std::ops::ControlFlow;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{mpsc, Mutex};

use super::scan::{element_count, scan_opcode, skip_value, with_running_crc, CrcOf, Passed};
use super::*;

/// Input bytes per batch of values handed to a checking thread.
const BATCH_BYTES: u64 = 1 << 20;
/// Keys per batch at most.
const BATCH_KEYS: usize = 4096;

/// The most databases any configuration has (`databases` is at most
/// 2^31 - 1, as in Redis): a file selecting a database beyond cannot be
/// loaded by any server, and the tools take it for damage.
pub const MAX_DATABASES: usize = i32::MAX as usize;

/// A value to check: its type byte (`t` is `None` for a module value,
/// skipped by the loader; the skip pass has walked it as the loader
/// does), where its key starts (its record one byte before), where the
/// value starts and where the skip pass says it ends, its database and
/// its expiry.
#[derive(Clone, Copy)]
struct Job {
    t: Option<u8>,
    type_byte: u8,
    key_at: usize,
    value_at: usize,
    end: usize,
    db: usize,
    expire_ms: Option<i64>,
}

/// A batch's check: per record, whether the loader would skip it (an
/// empty collection), and the first failure (its index and error).
struct Checked {
    empty: Vec<bool>,
    hashes: Vec<u64>,
    failure: Option<(usize, RdbError)>,
}

/// The hash of (db, key) keys stored twice are looked for by.
fn key_hash(db: usize, key: &[u8]) -> u64 {
    use std::hash::BuildHasher;
    foldhash::fast::FixedState::with_seed(0x6b65_7931).hash_one((db, key))
}

/// The key of the record whose key starts at `key_at`.
fn key_at(data: &[u8], key_at: usize) -> Option<Cow<'_, [u8]>> {
    Cursor::new(data, key_at).string("a key").ok()
}

/// A hasher for keys that are hashes already.
#[derive(Default)]
struct Prehashed(u64);

impl std::hash::Hasher for Prehashed {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = self.0.rotate_left(8) ^ u64::from(b);
        }
    }
    fn write_u64(&mut self, n: u64) {
        self.0 = n;
    }
}

/// Checks one value as the loader reads it: Ok(true) when the loader
/// skips it (an empty collection), Err where the loader fails. `end` is
/// where the skip pass says the value ends (None: unknown).
fn check_value(
    data: &[u8],
    valkey: bool,
    options: &Options,
    t: u8,
    value_at: usize,
    end: Option<usize>,
) -> Result<bool, RdbError> {
    let mut c = Cursor::new(data, value_at);
    let mut summary = Summary {
        valkey,
        ..Summary::default()
    };
    let value = read_value_as::<false>(&mut c, t, options, &mut summary)?;
    if let Some(end) = end.filter(|&e| e != c.pos) {
        return Err(c.corrupt(
            value_at,
            format!("the value is read to offset {}, its record to {end}", c.pos),
        ));
    }
    Ok(value.is_none())
}

fn check_batch(data: &[u8], valkey: bool, options: &Options, jobs: &[Job]) -> Checked {
    let mut empty = Vec::with_capacity(jobs.len());
    let mut hashes = Vec::with_capacity(jobs.len());
    for (i, job) in jobs.iter().enumerate() {
        hashes.push(key_at(data, job.key_at).map_or(0, |k| key_hash(job.db, &k)));
        let Some(t) = job.t else {
            empty.push(false);
            continue;
        };
        match check_value(data, valkey, options, t, job.value_at, Some(job.end)) {
            Ok(e) => empty.push(e),
            Err(e) => {
                return Checked {
                    empty,
                    hashes,
                    failure: Some((i, e)),
                }
            }
        }
    }
    Checked {
        empty,
        hashes,
        failure: None,
    }
}

/// How the calling thread checks a batch when there are no threads.
type InlineCheck<'s> = Box<dyn Fn(&[Job]) -> Checked + 's>;

/// The checking threads (none: the calling thread checks each batch as
/// it is submitted).
struct Pool<'s> {
    jobs: Option<mpsc::SyncSender<(usize, Vec<Job>)>>,
    done: mpsc::Receiver<(usize, Checked)>,
    ready: BTreeMap<usize, Checked>,
    next: usize,
    inline: Option<InlineCheck<'s>>,
}

impl Pool<'_> {
    fn submit(&mut self, jobs: Vec<Job>) -> usize {
        let seq = self.next;
        self.next += 1;
        match (&self.inline, &self.jobs) {
            (Some(check), _) => {
                self.ready.insert(seq, check(&jobs));
            }
            (None, Some(tx)) => {
                if tx.send((seq, jobs)).is_err() {
                    self.ready.insert(seq, lost());
                }
            }
            (None, None) => {
                self.ready.insert(seq, lost());
            }
        }
        seq
    }

    /// The result of batch `seq`, waiting for it when `block`.
    fn result(&mut self, seq: usize, block: bool) -> Option<Checked> {
        loop {
            if let Some(c) = self.ready.remove(&seq) {
                return Some(c);
            }
            let got = if block {
                self.done.recv().ok()
            } else {
                self.done.try_recv().ok()
            };
            match got {
                Some((s, c)) => {
                    self.ready.insert(s, c);
                }
                None if block => return Some(lost()),
                None => return None,
            }
        }
    }
}

/// What a batch whose checking thread died reports.
fn lost() -> Checked {
    Checked {
        empty: Vec::new(),
        hashes: Vec::new(),
        failure: Some((
            0,
            RdbError::new(
                ErrorKind::Corrupt,
                0,
                "internal error: a value check failed",
            ),
        )),
    }
}

/// Walks an RDB file like [`scan_keys`], and checks every value the way
/// [`load`] reads it (with `options`' hash-field time; `limits` play no
/// part): encodings walked entry by entry, counts, duplicates and scores
/// checked, LZF decompressed, streams rebuilt; a SELECTDB of
/// `options.databases` or more, and a key stored twice in a database
/// (among keys the load keeps: `skip_expired_before_ms` applies) are
/// damage as for the loader. Empty collections, which the loader skips,
/// are neither visited nor counted as keys
/// ([`ScanSummary::empty_skipped`]). The error is the one [`load`]
/// returns (the same offset), after every key before it was visited.
/// `visit` returning Break ends the walk (no checksum then; `len` is the
/// end of the last key visited).
///
/// Memory: a few batches of record descriptions in flight, the value
/// being checked on each thread, and 16 bytes per key kept by a load
/// (for keys stored twice).
pub fn check_keys<'a>(
    data: &'a [u8],
    options: &Options,
    visit: &mut dyn FnMut(&KeyInfo<'a>) -> ControlFlow<()>,
) -> Result<ScanSummary, RdbError> {
    let (_, valkey, _) = read_header(data)?;
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    let threads = if data.len() < PARALLEL_MIN_BYTES || cores < 2 {
        0
    } else {
        cores
    };
    with_running_crc(data, &mut |passed, crc_of| {
        let (tx, rx) = mpsc::sync_channel::<(usize, Vec<Job>)>(threads * 2 + 1);
        let queue = Mutex::new(rx);
        let (done_tx, done) = mpsc::channel::<(usize, Checked)>();
        let mut pool = Pool {
            jobs: None,
            done,
            ready: BTreeMap::new(),
            next: 0,
            inline: None,
        };
        if threads == 0 {
            pool.inline = Some(Box::new(move |jobs: &[Job]| {
                check_batch(data, valkey, options, jobs)
            }));
        } else {
            pool.jobs = Some(tx);
        }
        std::thread::scope(|scope| {
            for _ in 0..threads {
                let done_tx = done_tx.clone();
                let queue = &queue;
                scope.spawn(move || loop {
                    let next = queue.lock().map(|rx| rx.recv());
                    let Ok(Ok((seq, jobs))) = next else {
                        return;
                    };
                    let checked = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                        check_batch(data, valkey, options, &jobs)
                    }))
                    .unwrap_or_else(|_| lost());
                    if done_tx.send((seq, checked)).is_err() {
                        return;
                    }
                });
            }
            drop(done_tx);
            let result = walk(data, valkey, options, &mut pool, visit, passed, crc_of);
            // Ends the threads: no more jobs.
            pool.jobs = None;
            result
        })
    })
}

/// A batch walked and submitted, waiting for its check.
struct InFlight<'a> {
    seq: usize,
    keys: Vec<KeyInfo<'a>>,
}

/// The calling thread's side: counts, keys stored twice, the visitor.
struct Taker<'a, 'v> {
    data: &'a [u8],
    out: ScanSummary,
    /// Keys kept so far: hash of (db, key) → record offset (a hash seen
    /// twice is confirmed by comparing the keys).
    seen: HashMap<u64, u64, std::hash::BuildHasherDefault<Prehashed>>,
    skip_expired_before_ms: Option<i64>,
    visit: &'v mut dyn FnMut(&KeyInfo<'a>) -> ControlFlow<()>,
    /// Where the last key visited ends.
    visited_to: usize,
    /// Keys per database (small numbers; others in the summary's map).
    per_db: Vec<u64>,
    /// Keys and bytes per type byte.
    per_type: Vec<TypeCount>,
}

impl<'a> Taker<'a, '_> {
    /// Takes a checked batch: Err on damage (the first failure, or a key
    /// stored twice), Ok(Break) when the visitor stopped.
    fn take(&mut self, keys: Vec<KeyInfo<'a>>, checked: Checked) -> Result<bool, RdbError> {
        for (i, info) in keys.into_iter().enumerate() {
            if let Some((at, e)) = &checked.failure {
                if *at == i {
                    let mut e = e.clone();
                    e.key = Some((info.db, Blob::from(&info.key[..])));
                    return Err(e);
                }
            }
            if checked.empty.get(i).copied().unwrap_or(false) {
                self.out.empty_skipped += 1;
                continue;
            }
            let kept = info.type_byte != kind::MODULE_2
                && !matches!(
                    (info.expire_ms, self.skip_expired_before_ms),
                    (Some(at), Some(before)) if at < before
                );
            if kept {
                let hash = checked.hashes.get(i).copied().unwrap_or(0);
                match self.seen.entry(hash) {
                    Entry::Vacant(slot) => {
                        slot.insert(info.offset);
                    }
                    Entry::Occupied(first) => {
                        // The same hash: the same key only if the bytes say so.
                        let same = key_at(self.data, *first.get() as usize + 1)
                            .is_some_and(|k| k[..] == info.key[..]);
                        if same {
                            return Err(RdbError {
                                kind: ErrorKind::Rejected,
                                offset: info.offset,
                                message: "the key appears twice in the file".into(),
                                key: Some((info.db, Blob::from(&info.key[..]))),
                            });
                        }
                    }
                }
            }
            if info.db < 1 << 16 {
                if self.per_db.len() <= info.db {
                    self.per_db.resize(info.db + 1, 0);
                }
                self.per_db[info.db] += 1;
            } else {
                *self.out.keys_per_db.entry(info.db).or_default() += 1;
            }
            if let Some(at) = info.expire_ms {
                self.out.expiring += 1;
                self.out.expired += u64::from(at < self.out.scanned_at_ms);
            }
            let entry = &mut self.per_type[usize::from(info.type_byte)];
            entry.keys += 1;
            entry.bytes += info.record_bytes;
            self.visited_to = (info.offset + info.record_bytes) as usize;
            if (self.visit)(&info).is_break() {
                return Ok(false);
            }
        }
        Ok(true)
    }
}

impl Taker<'_, '_> {
    /// The summary, with the counters folded in.
    fn finish(mut self) -> ScanSummary {
        let per_db = std::mem::take(&mut self.per_db);
        self.out
            .keys_per_db
            .extend(per_db.into_iter().enumerate().filter(|&(_, n)| n > 0));
        let per_type = std::mem::take(&mut self.per_type);
        self.out.types = per_type
            .into_iter()
            .enumerate()
            .filter(|(_, c)| c.keys > 0)
            .map(|(t, c)| (t as u8, c))
            .collect();
        self.out
    }
}

/// Takes the submitted batches back in order, waiting while more than
/// `keep` are in flight (all of them with `keep` 0); Ok(false) when the
/// visitor stopped.
fn drain<'a>(
    in_flight: &mut VecDeque<InFlight<'a>>,
    pool: &mut Pool<'_>,
    taker: &mut Taker<'a, '_>,
    keep: usize,
) -> Result<bool, RdbError> {
    while let Some(front) = in_flight.front() {
        let block = in_flight.len() > keep;
        let Some(checked) = pool.result(front.seq, block) else {
            break;
        };
        let batch = in_flight.pop_front().expect("a batch in flight");
        if !taker.take(batch.keys, checked)? {
            return Ok(false);
        }
    }
    Ok(true)
}

/// The walk: records found by the skip pass, values handed to `pool`,
/// batches taken back in order.
fn walk<'a>(
    data: &'a [u8],
    valkey: bool,
    options: &Options,
    pool: &mut Pool<'_>,
    visit: &mut dyn FnMut(&KeyInfo<'a>) -> ControlFlow<()>,
    passed: Passed<'_>,
    crc_of: CrcOf<'_>,
) -> Result<ScanSummary, RdbError> {
    let (version, _, header_len) = read_header(data)?;
    let mut taker = Taker {
        data,
        out: ScanSummary {
            version,
            valkey,
            scanned_at_ms: crate::clock::now_ms(),
            ..ScanSummary::default()
        },
        seen: HashMap::default(),
        skip_expired_before_ms: options.skip_expired_before_ms,
        visit,
        visited_to: 0,
        per_db: Vec::new(),
        per_type: vec![TypeCount::default(); 256],
    };
    // The RESIZEDB hints size the table of keys once (capped by what the
    // file can hold).
    let mut hinted = 0u64;
    let max_in_flight = pool.jobs.as_ref().map_or(1, |_| 6);
    let mut in_flight: VecDeque<InFlight<'a>> = VecDeque::new();
    let mut keys: Vec<KeyInfo<'a>> = Vec::new();
    let mut jobs: Vec<Job> = Vec::new();
    let mut batch_bytes = 0u64;
    let mut c = Cursor::new(data, header_len);
    let mut db = 0usize;
    let mut expire_ms: Option<i64> = None;
    let failure: RdbError = loop {
        passed(c.pos);
        let record_at = c.pos;
        let t = match c.u8("a record type") {
            Ok(t) => t,
            Err(e) => break e,
        };
        if t == opcode::EOF {
            let seq = pool.submit(std::mem::take(&mut jobs));
            in_flight.push_back(InFlight {
                seq,
                keys: std::mem::take(&mut keys),
            });
            if !drain(&mut in_flight, pool, &mut taker, 0)? {
                let to = taker.visited_to;
                let mut out = taker.finish();
                out.len = to;
                return Ok(out);
            }
            let mut out = taker.finish();
            out.checksum = Some(verify_checksum(data, &mut c, version, crc_of)?);
            out.len = c.pos;
            return Ok(out);
        }
        if t == opcode::RESIZEDB {
            let mut p = Cursor::new(data, c.pos);
            if let Ok(keys) = p.len("a RESIZEDB size") {
                hinted = hinted.saturating_add(keys);
                let want = hinted.min((data.len() / 8) as u64) as usize;
                if want > taker.seen.capacity() {
                    taker.seen.reserve(want - taker.seen.len());
                }
            }
        }
        match scan_opcode(
            &mut c,
            t,
            record_at,
            &mut taker.out,
            &mut db,
            &mut expire_ms,
        ) {
            Ok(true) => {
                if t == opcode::SELECTDB && db >= options.databases {
                    break RdbError::new(
                        ErrorKind::Rejected,
                        record_at,
                        format!(
                            "the file selects database {db} but only {} are configured",
                            options.databases
                        ),
                    );
                }
                continue;
            }
            Ok(false) => {}
            Err(e) => break e,
        }
        let key_start = c.pos;
        let key = match c.string("a key") {
            Ok(k) => k,
            Err(e) => break e,
        };
        let value_at = c.pos;
        let elements = element_count(&c, t);
        if let Err(mut e) = skip_value(&mut c, t, valkey) {
            // The loader reads the value further than the skip pass in
            // places: its error is the one to report.
            if t != kind::MODULE_2 {
                if let Err(checked) = check_value(data, valkey, options, t, value_at, None) {
                    e = checked;
                }
            }
            e.key = Some((db, Blob::from(&key[..])));
            break e;
        }
        let record_bytes = (c.pos - record_at) as u64;
        jobs.push(Job {
            t: (t != kind::MODULE_2).then_some(t),
            type_byte: t,
            key_at: key_start,
            value_at,
            end: c.pos,
            db,
            expire_ms,
        });
        keys.push(KeyInfo {
            db,
            key,
            type_byte: t,
            logical_type: logical_type(t),
            offset: record_at as u64,
            record_bytes,
            value_offset: value_at as u64,
            expire_ms: expire_ms.take(),
            elements,
        });
        batch_bytes += record_bytes;
        if keys.len() >= BATCH_KEYS || batch_bytes >= BATCH_BYTES {
            batch_bytes = 0;
            let seq = pool.submit(std::mem::take(&mut jobs));
            in_flight.push_back(InFlight {
                seq,
                keys: std::mem::take(&mut keys),
            });
            if !drain(&mut in_flight, pool, &mut taker, max_in_flight)? {
                let to = taker.visited_to;
                let mut out = taker.finish();
                out.len = to;
                return Ok(out);
            }
        }
    };
    // Damage found by the walk: the batches before it come first.
    let seq = pool.submit(std::mem::take(&mut jobs));
    in_flight.push_back(InFlight {
        seq,
        keys: std::mem::take(&mut keys),
    });
    if !drain(&mut in_flight, pool, &mut taker, 0)? {
        let to = taker.visited_to;
        let mut out = taker.finish();
        out.len = to;
        return Ok(out);
    }
    Err(failure)
}

// ---------------------------------------------------------------------------
// The checking walk without a visitor.

/// Shards of the table of kept keys (by the top bits of their hash):
/// each is sorted on its own at the end, in a cache-sized piece.
const SHARD_BITS: u32 = 9;

/// A kept key in the search for keys stored twice: the hash of (db,
/// key) and the offset of its record.
type Kept = (u64, u64);

/// What one checking thread of [`check_file`] adds up over its batches.
struct Tally {
    /// Keys per database (small numbers; others in `big_dbs`).
    per_db: Vec<u64>,
    big_dbs: BTreeMap<usize, u64>,
    /// Keys and bytes per type byte.
    per_type: Vec<TypeCount>,
    expiring: u64,
    expired: u64,
    empty_skipped: u64,
    /// The keys a load keeps, by shard.
    kept: Vec<Vec<Kept>>,
    /// The first failure this thread found: the offset of its record and
    /// the loader's error.
    failure: Option<(usize, RdbError)>,
}

impl Tally {
    fn new() -> Tally {
        Tally {
            per_db: Vec::new(),
            big_dbs: BTreeMap::new(),
            per_type: vec![TypeCount::default(); 256],
            expiring: 0,
            expired: 0,
            empty_skipped: 0,
            kept: vec![Vec::new(); 1 << SHARD_BITS],
            failure: None,
        }
    }

    /// Notes a failure at the record at `at`, keeping the first in the file.
    fn fail(&mut self, at: usize, e: RdbError) {
        if self.failure.as_ref().is_none_or(|(first, _)| at < *first) {
            self.failure = Some((at, e));
        }
    }
}

/// A batch of [`check_file`]: its number and its values.
type Batch = (usize, Vec<Job>);

/// Checks a batch of [`check_file`] into `tally`; the first failure ends
/// the batch, and sets `stop` (the lowest failed batch number) so that
/// later batches are neither walked nor checked.
fn check_batch_into(
    data: &[u8],
    valkey: bool,
    options: &Options,
    scanned_at_ms: i64,
    (seq, jobs): &Batch,
    tally: &mut Tally,
    stop: &AtomicUsize,
) {
    for job in jobs {
        let record_at = job.key_at - 1;
        if let Some(t) = job.t {
            match check_value(data, valkey, options, t, job.value_at, Some(job.end)) {
                Ok(true) => {
                    tally.empty_skipped += 1;
                    continue;
                }
                Ok(false) => {}
                Err(mut e) => {
                    let key = key_at(data, job.key_at).unwrap_or_default();
                    e.key = Some((job.db, Blob::from(&key[..])));
                    tally.fail(record_at, e);
                    stop.fetch_min(*seq, Ordering::AcqRel);
                    return;
                }
            }
        }
        let kept = job.t.is_some()
            && !matches!(
                (job.expire_ms, options.skip_expired_before_ms),
                (Some(at), Some(before)) if at < before
            );
        if kept {
            // The walk read this key before handing the job over.
            let hash = key_at(data, job.key_at).map_or(0, |k| key_hash(job.db, &k));
            tally.kept[(hash >> (64 - SHARD_BITS)) as usize].push((hash, record_at as u64));
        }
        if job.db < 1 << 16 {
            if tally.per_db.len() <= job.db {
                tally.per_db.resize(job.db + 1, 0);
            }
            tally.per_db[job.db] += 1;
        } else {
            *tally.big_dbs.entry(job.db).or_default() += 1;
        }
        if let Some(at) = job.expire_ms {
            tally.expiring += 1;
            tally.expired += u64::from(at < scanned_at_ms);
        }
        let entry = &mut tally.per_type[usize::from(job.type_byte)];
        entry.keys += 1;
        entry.bytes += (job.end - record_at) as u64;
    }
}

/// How the walk of [`check_file`] ended.
enum Walked {
    /// At the EOF opcode (the cursor is after it).
    Eof(usize),
    /// Damage found by the walk itself.
    Failed(RdbError),
    /// A checking thread found damage: the walk stopped early.
    Stopped,
}

/// [`check_keys`] without a visitor, for a verdict and a summary only:
/// the same checks, the same error (offset, message, key) and the same
/// summary, with less work on the calling thread. The checking threads
/// count the keys and collect the hashes of the keys a load keeps; keys
/// stored twice are looked for at the end, shard by shard on every core,
/// and the first one in the file is the one reported (unless damage
/// comes before it).
///
/// Memory: a few batches of record descriptions in flight, the value
/// being checked on each thread, and about 16 bytes per key kept by a
/// load.
pub fn check_file(data: &[u8], options: &Options) -> Result<ScanSummary, RdbError> {
    let (version, valkey, header_len) = read_header(data)?;
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    let threads = if data.len() < PARALLEL_MIN_BYTES || cores < 2 {
        0
    } else {
        cores
    };
    let mut out = ScanSummary {
        version,
        valkey,
        scanned_at_ms: crate::clock::now_ms(),
        ..ScanSummary::default()
    };
    let scanned_at_ms = out.scanned_at_ms;
    let file = WalkedFile {
        data,
        valkey,
        header_len,
        options,
    };
    with_running_crc(data, &mut |passed, crc_of| {
        let stop = AtomicUsize::new(usize::MAX);
        // Where each SELECTDB is: the database of a record by its offset.
        let mut selects: Vec<(usize, usize)> = Vec::new();
        let mut tallies: Vec<Tally> = Vec::new();
        let walked = if threads == 0 {
            let mut tally = Tally::new();
            let walked = walk_records(file, &mut out, &mut selects, passed, &stop, &mut |batch| {
                check_batch_into(
                    data,
                    valkey,
                    options,
                    scanned_at_ms,
                    &batch,
                    &mut tally,
                    &stop,
                )
            });
            tallies.push(tally);
            walked
        } else {
            let (tx, rx) = mpsc::sync_channel::<Batch>(threads * 2 + 1);
            let queue = Mutex::new(rx);
            std::thread::scope(|scope| {
                let workers: Vec<_> = (0..threads)
                    .map(|_| {
                        let (queue, stop) = (&queue, &stop);
                        scope.spawn(move || {
                            let mut tally = Tally::new();
                            loop {
                                let next = queue.lock().map(|rx| rx.recv());
                                let Ok(Ok(batch)) = next else {
                                    return tally;
                                };
                                if batch.0 > stop.load(Ordering::Acquire) {
                                    continue;
                                }
                                let checked =
                                    std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                                        check_batch_into(
                                            data,
                                            valkey,
                                            options,
                                            scanned_at_ms,
                                            &batch,
                                            &mut tally,
                                            stop,
                                        )
                                    }));
                                if checked.is_err() {
                                    let at = batch.1.first().map_or(0, |j| j.key_at - 1);
                                    tally.fail(at, lost_check());
                                    stop.fetch_min(batch.0, Ordering::AcqRel);
                                }
                            }
                        })
                    })
                    .collect();
                let walked =
                    walk_records(file, &mut out, &mut selects, passed, &stop, &mut |batch| {
                        // The threads end only when this sender is dropped.
                        let _ = tx.send(batch);
                    });
                drop(tx);
                for worker in workers {
                    let tally = worker.join().unwrap_or_else(|_| {
                        let mut t = Tally::new();
                        t.fail(0, lost_check());
                        t
                    });
                    tallies.push(tally);
                }
                walked
            })
        };
        // Damage a checking thread found comes first in the file; a key
        // stored twice before it comes first of all.
        let failure = tallies
            .iter_mut()
            .filter_map(|t| t.failure.take())
            .min_by_key(|(at, _)| *at);
        let before = failure.as_ref().map_or(usize::MAX, |(at, _)| *at);
        let shards: Vec<Vec<Vec<Kept>>> = tallies
            .iter_mut()
            .map(|t| std::mem::take(&mut t.kept))
            .collect();
        if let Some(e) = first_stored_twice(data, shards, &selects, before, threads.max(1)) {
            return Err(e);
        }
        if let Some((_, e)) = failure {
            return Err(e);
        }
        let end = match walked {
            Walked::Eof(end) => end,
            Walked::Failed(e) => return Err(e),
            // Stopped only after a failure, taken above.
            Walked::Stopped => return Err(lost_check()),
        };
        let mut per_db: Vec<u64> = Vec::new();
        let mut per_type = vec![TypeCount::default(); 256];
        for t in tallies {
            if per_db.len() < t.per_db.len() {
                per_db.resize(t.per_db.len(), 0);
            }
            for (db, n) in t.per_db.into_iter().enumerate() {
                per_db[db] += n;
            }
            for (db, n) in t.big_dbs {
                *out.keys_per_db.entry(db).or_default() += n;
            }
            for (sum, c) in per_type.iter_mut().zip(t.per_type) {
                sum.keys += c.keys;
                sum.bytes += c.bytes;
            }
            out.expiring += t.expiring;
            out.expired += t.expired;
            out.empty_skipped += t.empty_skipped;
        }
        out.keys_per_db
            .extend(per_db.into_iter().enumerate().filter(|&(_, n)| n > 0));
        out.types = per_type
            .into_iter()
            .enumerate()
            .filter(|(_, c)| c.keys > 0)
            .map(|(t, c)| (t as u8, c))
            .collect();
        let mut c = Cursor::new(data, end);
        out.checksum = Some(verify_checksum(data, &mut c, version, crc_of)?);
        out.len = c.pos;
        Ok(std::mem::take(&mut out))
    })
}

/// What a batch whose check panicked reports.
fn lost_check() -> RdbError {
    RdbError::new(
        ErrorKind::Corrupt,
        0,
        "internal error: a value check failed",
    )
}

/// The file [`check_file`] walks: its bytes, whether its header is
/// Valkey's, where its records start, and the options it is checked for.
#[derive(Clone, Copy)]
struct WalkedFile<'a> {
    data: &'a [u8],
    valkey: bool,
    header_len: usize,
    options: &'a Options,
}

/// The walk of [`check_file`]: the records found by the skip pass, their
/// values handed to `submit` in batches, until the EOF opcode, damage,
/// or a failed batch (`stop`). `out` gets what the skip pass counts,
/// `selects` each SELECTDB's offset and database.
fn walk_records(
    file: WalkedFile<'_>,
    out: &mut ScanSummary,
    selects: &mut Vec<(usize, usize)>,
    passed: Passed<'_>,
    stop: &AtomicUsize,
    submit: &mut dyn FnMut(Batch),
) -> Walked {
    let WalkedFile {
        data,
        valkey,
        header_len,
        options,
    } = file;
    let mut jobs: Vec<Job> = Vec::with_capacity(BATCH_KEYS);
    let mut batch_bytes = 0u64;
    let mut seq = 0usize;
    let mut c = Cursor::new(data, header_len);
    let mut db = 0usize;
    let mut expire_ms: Option<i64> = None;
    let walked = loop {
        passed(c.pos);
        let record_at = c.pos;
        let t = match c.u8("a record type") {
            Ok(t) => t,
            Err(e) => break Walked::Failed(e),
        };
        if t == opcode::EOF {
            break Walked::Eof(c.pos);
        }
        match scan_opcode(&mut c, t, record_at, out, &mut db, &mut expire_ms) {
            Ok(true) => {
                if t == opcode::SELECTDB {
                    if db >= options.databases {
                        break Walked::Failed(RdbError::new(
                            ErrorKind::Rejected,
                            record_at,
                            format!(
                                "the file selects database {db} but only {} are configured",
                                options.databases
                            ),
                        ));
                    }
                    selects.push((record_at, db));
                }
                continue;
            }
            Ok(false) => {}
            Err(e) => break Walked::Failed(e),
        }
        let key_start = c.pos;
        // Read, not skipped: a key the loader cannot decode is damage here.
        if let Err(e) = c.string("a key") {
            break Walked::Failed(e);
        }
        let value_at = c.pos;
        if let Err(mut e) = skip_value(&mut c, t, valkey) {
            // The loader reads the value further than the skip pass in
            // places: its error is the one to report.
            if t != kind::MODULE_2 {
                if let Err(checked) = check_value(data, valkey, options, t, value_at, None) {
                    e = checked;
                }
            }
            let key = key_at(data, key_start).unwrap_or_default();
            e.key = Some((db, Blob::from(&key[..])));
            break Walked::Failed(e);
        }
        jobs.push(Job {
            t: (t != kind::MODULE_2).then_some(t),
            type_byte: t,
            key_at: key_start,
            value_at,
            end: c.pos,
            db,
            expire_ms: expire_ms.take(),
        });
        batch_bytes += (c.pos - record_at) as u64;
        if jobs.len() >= BATCH_KEYS || batch_bytes >= BATCH_BYTES {
            if stop.load(Ordering::Acquire) != usize::MAX {
                return Walked::Stopped;
            }
            batch_bytes = 0;
            submit((
                seq,
                std::mem::replace(&mut jobs, Vec::with_capacity(BATCH_KEYS)),
            ));
            seq += 1;
        }
    };
    if !jobs.is_empty() {
        submit((seq, jobs));
    }
    walked
}

/// The first record (before offset `before`) whose key a record before
/// it has already stored in the same database: the shards of every
/// thread's kept keys sorted and searched, on `threads` threads.
fn first_stored_twice(
    data: &[u8],
    shards: Vec<Vec<Vec<Kept>>>,
    selects: &[(usize, usize)],
    before: usize,
    threads: usize,
) -> Option<RdbError> {
    let db_of = |at: u64| {
        let i = selects.partition_point(|&(p, _)| (p as u64) < at);
        i.checked_sub(1).map_or(0, |i| selects[i].1)
    };
    let same = |a: u64, b: u64| {
        db_of(a) == db_of(b)
            && key_at(data, a as usize + 1)
                .is_some_and(|ka| key_at(data, b as usize + 1).is_some_and(|kb| ka[..] == kb[..]))
    };
    // Shard `s`: the offset of its first key stored twice.
    let search = |s: usize, all: &mut Vec<Kept>| -> Option<u64> {
        all.clear();
        for thread in &shards {
            all.extend(thread[s].iter().filter(|&&(_, at)| (at as usize) < before));
        }
        all.sort_unstable();
        let mut first: Option<u64> = None;
        let mut i = 0;
        while i < all.len() {
            let mut j = i + 1;
            while j < all.len() && all[j].0 == all[i].0 {
                j += 1;
            }
            // A run of one hash, by offset: its first record whose key
            // an earlier record of the run has (hashes can collide).
            if let Some(at) = (i + 1..j)
                .find_map(|k| (i..k).any(|m| same(all[m].1, all[k].1)).then_some(all[k].1))
            {
                first = Some(first.map_or(at, |f| f.min(at)));
            }
            i = j;
        }
        first
    };
    let count = 1usize << SHARD_BITS;
    let per_thread = count.div_ceil(threads);
    let first = std::thread::scope(|scope| {
        let search = &search;
        let found: Vec<_> = (0..threads)
            .map(|k| {
                scope.spawn(move || {
                    let mut all = Vec::new();
                    (k * per_thread..((k + 1) * per_thread).min(count))
                        .filter_map(|s| search(s, &mut all))
                        .min()
                })
            })
            .collect();
        found
            .into_iter()
            .filter_map(|f| f.join().ok().flatten())
            .min()
    })?;
    let key = key_at(data, first as usize + 1).unwrap_or_default();
    Some(RdbError {
        kind: ErrorKind::Rejected,
        offset: first,
        message: "the key appears twice in the file".into(),
        key: Some((db_of(first), Blob::from(&key[..]))),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rdb::writer::{encode_file, Encoder};
    use crate::types::Value;

    /// `n` keys (`k0`..) over databases 0 and 1, large enough for the
    /// checking threads; the keys at `again` are stored a second time
    /// (`(index, copy of)`), and key 1500's value is LZF-compressed.
    fn file(n: usize, again: &[(usize, usize)]) -> Vec<u8> {
        let mut rng = crate::rand::Rng::with_seed(11);
        let mut keys: Vec<(usize, Blob, Value)> = (0..n)
            .map(|i| {
                let value: Vec<u8> = if i == 1500 {
                    b"abcabcabc".repeat(40)
                } else {
                    (0..500).map(|_| rng.below(256) as u8).collect()
                };
                let db = usize::from(i >= n / 2);
                (
                    db,
                    Blob::from(format!("k{i}").as_bytes()),
                    Value::Str(Blob::from(&value[..])),
                )
            })
            .collect();
        for &(at, of) in again {
            keys[at].1 = keys[of].1.clone();
        }
        let data = encode_file(
            &Encoder::default(),
            1_700_000_000_000,
            keys.iter().map(|(db, k, v)| (*db, k, v, None)),
        );
        assert!(data.len() > PARALLEL_MIN_BYTES);
        data
    }

    /// `data` with key 1500's LZF data damaged (its first control byte
    /// made a back-reference before the start of the output).
    fn damaged(mut data: Vec<u8>) -> Vec<u8> {
        let mut at = None;
        let _ = scan_keys(&data, &mut |k| {
            if &k.key[..] == b"k1500" {
                at = Some(k.value_offset as usize);
            }
            ControlFlow::Continue(())
        });
        let at = at.expect("key 1500");
        let pos = {
            let mut c = Cursor::new(&data, at);
            assert!(matches!(c.raw_len("x"), Ok(Len::Encoded(3))), "LZF");
            c.len("x").expect("clen");
            c.len("x").expect("ulen");
            c.pos
        };
        data[pos] = 0xFF;
        let body = data.len() - 8;
        let sum = crate::rdb::crc64(&data[..body]);
        data[body..].copy_from_slice(&sum.to_le_bytes());
        data
    }

    fn options() -> Options {
        Options {
            limits: Default::default(),
            databases: 16,
            skip_expired_before_ms: None,
            now_ms: 1_700_000_000_000,
        }
    }

    /// Both walks on `data`: they must agree exactly; the verdict.
    fn both(data: &[u8]) -> Result<ScanSummary, RdbError> {
        let walked = check_keys(data, &options(), &mut |_| ControlFlow::Continue(()));
        let mut checked = check_file(data, &options());
        if let (Ok(a), Ok(b)) = (&walked, &mut checked) {
            b.scanned_at_ms = a.scanned_at_ms;
        }
        assert_eq!(format!("{walked:?}"), format!("{checked:?}"));
        checked
    }

    #[test]
    fn check_file_agrees_with_check_keys_on_keys_stored_twice_and_damage() {
        let n = 3000;
        let ok = both(&file(n, &[])).expect("valid");
        assert_eq!(ok.keys_per_db.values().sum::<u64>(), n as u64);
        // Stored twice: the second copy is reported, the first such in
        // the file; the same name in another database is no duplicate.
        let e = both(&file(n, &[(2000, 1700), (2400, 1600), (2200, 1800)])).unwrap_err();
        assert_eq!(e.kind, ErrorKind::Rejected);
        assert_eq!(e.key, Some((1, Blob::from(&b"k1700"[..]))));
        both(&file(n, &[(2100, 100)])).expect("another database");
        let e = both(&file(n, &[(100, 50), (200, 50)])).unwrap_err();
        assert_eq!(e.key, Some((0, Blob::from(&b"k50"[..]))));
        // Damage before a key stored twice comes first, and after it not.
        let e = both(&damaged(file(n, &[(2000, 1600)]))).unwrap_err();
        assert_eq!(e.kind, ErrorKind::Corrupt);
        let e = both(&damaged(file(n, &[(1400, 1200)]))).unwrap_err();
        assert_eq!(e.kind, ErrorKind::Rejected);
        assert_eq!(e.key, Some((0, Blob::from(&b"k1200"[..]))));
        let e = both(&damaged(file(n, &[]))).unwrap_err();
        assert_eq!(e.key, Some((1, Blob::from(&b"k1500"[..]))));
    }
}
