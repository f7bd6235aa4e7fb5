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

/// A value to check: its type byte (`None` for a module value, skipped
/// by the loader; the skip pass has walked it as the loader does), where
/// its key starts, where the value starts and where the skip pass says
/// it ends, and its database.
#[derive(Clone, Copy)]
struct Job {
    t: Option<u8>,
    key_at: usize,
    value_at: usize,
    end: usize,
    db: usize,
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
            key_at: key_start,
            value_at,
            end: c.pos,
            db,
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
