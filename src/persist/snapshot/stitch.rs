//! Parallel decoding and stitching split values.

use super::decode::{decode_block, Builder, DecodedBlock, Item, LoadedKey, PartRecord, Region};
use super::error::{display_key, BlockDamage};
use super::format::Part;
use super::options::ReadOptions;
use super::stats::BlockInfo;
use crate::types::{Blob, EncodingLimits};
use std::collections::BTreeMap;
use std::ops::ControlFlow;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::mpsc;

/// A block to decode.
#[derive(Debug, Clone, Copy)]
pub(super) struct Job {
    pub(super) seq: u32,
    pub(super) offset: u64,
    /// The index entry, when the footer is trusted.
    pub(super) expected: Option<BlockInfo>,
    /// Keys the block holds, for reports.
    pub(super) keys: u64,
    /// Payload bytes (from the index or the block header), for reports.
    pub(super) stored_len: u64,
}

/// The result for one job.
pub(super) struct Outcome {
    pub(super) job: Job,
    pub(super) result: Result<DecodedBlock, BlockDamage>,
}

/// Decodes `jobs` (blocks of `region`) with `options` and hands the
/// outcomes to `sink` (on the calling thread) in job order, the calling
/// thread decoding too (see [`ReadOptions::workers`]). `sink` may stop
/// the run by returning `Break`.
pub(super) fn run_jobs(
    data: &[u8],
    jobs: &[Job],
    region: Region,
    options: &ReadOptions,
    mut sink: impl FnMut(Outcome) -> ControlFlow<()>,
) {
    let decode = |job: &Job, scratch: &mut Vec<u8>| Outcome {
        job: *job,
        result: decode_block(
            data,
            job.offset,
            job.expected.as_ref().map(|e| (job.seq, e)),
            region,
            options,
            scratch,
        ),
    };
    let threads = options.workers.min(jobs.len());
    if threads == 0 {
        let mut scratch = Vec::new();
        for job in jobs {
            if sink(decode(job, &mut scratch)).is_break() {
                return;
            }
        }
        return;
    }
    let next = AtomicUsize::new(0);
    let stop = AtomicBool::new(false);
    std::thread::scope(|scope| {
        let (tx, rx) = mpsc::sync_channel::<(usize, Outcome)>(threads * 4);
        for _ in 0..threads {
            let tx = tx.clone();
            let (next, stop, decode) = (&next, &stop, &decode);
            scope.spawn(move || {
                let mut scratch = Vec::new();
                while !stop.load(Ordering::Relaxed) {
                    let i = next.fetch_add(1, Ordering::Relaxed);
                    let Some(job) = jobs.get(i) else { break };
                    if tx.send((i, decode(job, &mut scratch))).is_err() {
                        break;
                    }
                }
            });
        }
        drop(tx);
        // Outcomes arrive out of order; hand them on in order. While the
        // block due next is not decoded yet, this thread decodes one
        // itself instead of waiting (on 2 cores: one worker, and this
        // thread inserting or decoding).
        let mut pending: BTreeMap<usize, Outcome> = BTreeMap::new();
        let mut scratch = Vec::new();
        let mut want = 0;
        loop {
            while let Some(outcome) = pending.remove(&want) {
                want += 1;
                if sink(outcome).is_break() {
                    stop.store(true, Ordering::Relaxed);
                    return; // dropping rx ends the workers' sends
                }
            }
            if want >= jobs.len() {
                return;
            }
            match rx.try_recv() {
                Ok((i, outcome)) => {
                    pending.insert(i, outcome);
                    continue;
                }
                Err(mpsc::TryRecvError::Empty) | Err(mpsc::TryRecvError::Disconnected) => {}
            }
            let i = next.fetch_add(1, Ordering::Relaxed);
            if let Some(job) = jobs.get(i) {
                pending.insert(i, decode(job, &mut scratch));
                continue;
            }
            match rx.recv() {
                Ok((i, outcome)) => {
                    pending.insert(i, outcome);
                }
                Err(_) => return,
            }
        }
    });
}

/// Where a record lies: its block and its place among the block's
/// records.
#[derive(Debug, Clone, Copy)]
pub(super) struct Place {
    /// The block's number.
    pub(super) seq: u32,
    /// The record's index in the block.
    pub(super) index: usize,
    /// Records in the block.
    pub(super) records: usize,
}

/// A split value being read: what its parts have in common, and where
/// the latest one lay (what the next part must match).
#[derive(Debug)]
pub(super) struct SplitHead {
    pub(super) db: usize,
    pub(super) key: Blob,
    /// The type tag every part repeats.
    tag: u8,
    /// Block of the first part.
    pub(super) first_seq: u32,
    /// Block of the latest part.
    seq: u32,
}

impl SplitHead {
    /// The head of the split value whose first part lies at `at`.
    pub(super) fn new(at: Place, db: usize, key: Blob, tag: u8) -> SplitHead {
        SplitHead {
            db,
            key,
            tag,
            first_seq: at.seq,
            seq: at.seq,
        }
    }

    /// Notes that the part at `at` was taken (it continued this value).
    pub(super) fn took(&mut self, at: Place) {
        self.seq = at.seq;
    }

    /// The report of this value, lost (for `why`) before its last part.
    pub(super) fn lost(&self, why: &str) -> String {
        format!(
            "key \"{}\" of db {} split from block {} on lost: {why}",
            display_key(&self.key),
            self.db,
            self.first_seq
        )
    }
}

/// What a part does to the split value being read (see [`place_part`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum PartStep {
    /// A first part: a split value starts.
    Opens,
    /// A middle part of the open value.
    Continues,
    /// The last part of the open value: it is whole.
    Completes,
}

/// The rule for where the parts of a split value lie
/// (docs/snapshot-format.md, *Split values*), the one check of it, made
/// by the stitcher and by [`scan_keys`](super::scan_keys): a first part
/// is its block's last record; every later part, of the same database,
/// key and type, is the first record of the block after the previous
/// part's, and a middle part is its block's only record. `open` is the
/// split value whose earlier parts were read, if any. Err says why `part`
/// is out of place. Unless the answer is `Continues` or `Completes`,
/// `open` never gets its next part: it is lost (as it is when a whole
/// value comes instead).
pub(super) fn place_part(
    open: Option<&SplitHead>,
    at: Place,
    part: &PartRecord,
) -> Result<PartStep, String> {
    let last = match part.part {
        Part::First if at.index + 1 == at.records => return Ok(PartStep::Opens),
        Part::First => {
            return Err(format!(
                "first part of key \"{}\" is not the block's last record",
                display_key(&part.key)
            ))
        }
        Part::Middle => false,
        Part::Last => true,
        Part::Whole => unreachable!("a whole record is decoded as Item::Whole"),
    };
    let continues = open.is_some_and(|o| {
        o.db == part.db
            && o.key == part.key
            && o.tag == part.builder.tag()
            && o.seq.checked_add(1) == Some(at.seq)
            && at.index == 0
            && (last || at.records == 1)
    });
    match (continues, last) {
        (true, true) => Ok(PartStep::Completes),
        (true, false) => Ok(PartStep::Continues),
        (false, _) => Err(format!(
            "a continuation of key \"{}\" of db {} has no preceding part",
            display_key(&part.key),
            part.db
        )),
    }
}

/// A split value whose parts are being collected.
pub(super) struct OpenValue {
    pub(super) head: SplitHead,
    expire_ms: Option<i64>,
    access: Option<crate::keyspace::KeyAccess>,
    builder: Builder,
}

/// Stitches decoded blocks into keys, in block order.
pub(super) struct Stitcher {
    limits: EncodingLimits,
    now_ms: i64,
    pub(super) open: Option<OpenValue>,
    pub(super) expired: u64,
    pub(super) keys: u64,
}

/// A problem found while stitching: the block it belongs to, what, and
/// the key that was lost (salvage reports it).
pub(super) struct StitchProblem {
    pub(super) seq: u32,
    pub(super) detail: String,
}

impl Stitcher {
    /// A stitcher building values with `options`' limits, leaving out
    /// values expired at its time.
    pub(super) fn new(options: &ReadOptions) -> Stitcher {
        Stitcher {
            limits: options.limits,
            now_ms: options.now_ms,
            open: None,
            expired: 0,
            keys: 0,
        }
    }

    fn drop_open(&mut self, seq: u32, why: &str, problems: &mut Vec<StitchProblem>) {
        if let Some(o) = self.open.take() {
            problems.push(StitchProblem {
                seq,
                detail: o.head.lost(why),
            });
        }
    }

    /// Takes one block's items; complete keys go to `out`.
    pub(super) fn accept(
        &mut self,
        seq: u32,
        block: DecodedBlock,
        out: &mut Vec<LoadedKey>,
        problems: &mut Vec<StitchProblem>,
    ) {
        let damaged = block.damage.is_some();
        if damaged {
            self.drop_open(seq, "a later part is in a damaged block", problems);
        }
        let records = block.items.len();
        for (index, item) in block.items.into_iter().enumerate() {
            match item {
                Item::Whole(k) => {
                    self.drop_open(seq, "its next part is missing", problems);
                    self.keys += 1;
                    out.push(k);
                }
                Item::Expired => {
                    self.drop_open(seq, "its next part is missing", problems);
                    self.expired += 1;
                }
                Item::Part(part) => {
                    if damaged {
                        // A part of a damaged block cannot be trusted to
                        // be continued or to continue anything.
                        problems.push(StitchProblem {
                            seq,
                            detail: format!(
                                "part of key \"{}\" of db {} dropped with its damaged block",
                                display_key(&part.key),
                                part.db
                            ),
                        });
                        continue;
                    }
                    let at = Place {
                        seq,
                        index,
                        records,
                    };
                    self.part(at, part, out, problems);
                }
            }
        }
    }

    /// Takes the part at `at`, placed by [`place_part`].
    fn part(
        &mut self,
        at: Place,
        part: PartRecord,
        out: &mut Vec<LoadedKey>,
        problems: &mut Vec<StitchProblem>,
    ) {
        let step = place_part(self.open.as_ref().map(|o| &o.head), at, &part);
        if !matches!(step, Ok(PartStep::Continues | PartStep::Completes)) {
            self.drop_open(at.seq, "its next part is missing", problems);
        }
        let step = match step {
            Ok(step) => step,
            Err(detail) => {
                problems.push(StitchProblem {
                    seq: at.seq,
                    detail,
                });
                return;
            }
        };
        if step == PartStep::Opens {
            let tag = part.builder.tag();
            self.open = Some(OpenValue {
                head: SplitHead::new(at, part.db, part.key, tag),
                expire_ms: part.expire_ms,
                access: part.access,
                builder: part.builder,
            });
            return;
        }
        let mut o = self.open.take().expect("a continuation has an open value");
        if let Err(what) = o.builder.append(part.builder) {
            self.open = Some(o);
            self.drop_open(at.seq, what, problems);
            return;
        }
        o.head.took(at);
        if step == PartStep::Continues {
            self.open = Some(o);
            return;
        }
        match o.builder.finish(&self.limits) {
            Ok(value) => {
                if matches!(o.expire_ms, Some(t) if t < self.now_ms) {
                    self.expired += 1;
                } else {
                    self.keys += 1;
                    out.push(LoadedKey {
                        db: o.head.db,
                        key: o.head.key,
                        value,
                        expire_ms: o.expire_ms,
                        access: o.access,
                    });
                }
            }
            Err(what) => problems.push(StitchProblem {
                seq: at.seq,
                detail: format!(
                    "key \"{}\" of db {} split over blocks {}..={}: {what}",
                    display_key(&o.head.key),
                    o.head.db,
                    o.head.first_seq,
                    at.seq
                ),
            }),
        }
    }
}
