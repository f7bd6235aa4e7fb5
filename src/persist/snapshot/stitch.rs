//! Parallel decoding and stitching split values.

use super::decode::{decode_block, Builder, DecodedBlock, Item, LoadedKey};
use super::error::{display_key, BlockDamage};
use super::format::Part;
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

/// Decodes `jobs` on `threads` workers and hands the outcomes to `sink`
/// (on the calling thread) in job order; with 0 workers the calling
/// thread decodes too. `sink` may stop the run by returning `Break`.
#[allow(clippy::too_many_arguments)]
pub(super) fn run_jobs(
    data: &[u8],
    jobs: &[Job],
    file_id: Option<u32>,
    limit: u64,
    limits: &EncodingLimits,
    threads: usize,
    now_ms: i64,
    mut sink: impl FnMut(Outcome) -> ControlFlow<()>,
) {
    let decode = |job: &Job, scratch: &mut Vec<u8>| Outcome {
        job: *job,
        result: decode_block(
            data,
            job.offset,
            job.expected.as_ref().map(|e| (job.seq, e)),
            file_id,
            limit,
            limits,
            now_ms,
            scratch,
        ),
    };
    let threads = threads.min(jobs.len());
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

/// A split value whose parts are being collected.
pub(super) struct OpenValue {
    pub(super) db: usize,
    pub(super) key: Blob,
    expire_ms: Option<i64>,
    builder: Builder,
    /// Block of the latest part.
    seq: u32,
    pub(super) first_seq: u32,
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
    pub(super) fn new(limits: EncodingLimits, now_ms: i64) -> Stitcher {
        Stitcher {
            limits,
            now_ms,
            open: None,
            expired: 0,
            keys: 0,
        }
    }

    fn drop_open(&mut self, seq: u32, why: &str, problems: &mut Vec<StitchProblem>) {
        if let Some(o) = self.open.take() {
            problems.push(StitchProblem {
                seq,
                detail: format!(
                    "key \"{}\" of db {} split from block {} on lost: {why}",
                    display_key(&o.key),
                    o.db,
                    o.first_seq
                ),
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
        let n = block.items.len();
        for (i, item) in block.items.into_iter().enumerate() {
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
                Item::Part {
                    part,
                    db,
                    key,
                    expire_ms,
                    builder,
                } => {
                    if damaged {
                        // A part of a damaged block cannot be trusted to
                        // be continued or to continue anything.
                        problems.push(StitchProblem {
                            seq,
                            detail: format!(
                                "part of key \"{}\" of db {db} dropped with its damaged block",
                                display_key(&key)
                            ),
                        });
                        continue;
                    }
                    self.part(seq, i, n, part, db, key, expire_ms, builder, out, problems);
                }
            }
        }
    }

    #[allow(clippy::too_many_arguments)]
    fn part(
        &mut self,
        seq: u32,
        i: usize,
        n: usize,
        part: Part,
        db: usize,
        key: Blob,
        expire_ms: Option<i64>,
        builder: Builder,
        out: &mut Vec<LoadedKey>,
        problems: &mut Vec<StitchProblem>,
    ) {
        if part == Part::First {
            self.drop_open(seq, "its next part is missing", problems);
            if i + 1 != n {
                problems.push(StitchProblem {
                    seq,
                    detail: format!(
                        "first part of key \"{}\" is not the block's last record",
                        display_key(&key)
                    ),
                });
                return;
            }
            self.open = Some(OpenValue {
                db,
                key,
                expire_ms,
                builder,
                seq,
                first_seq: seq,
            });
            return;
        }
        let continues = self.open.as_ref().is_some_and(|o| {
            o.db == db
                && o.key == key
                && o.builder.tag() == builder.tag()
                && o.seq.checked_add(1) == Some(seq)
                && i == 0
                && (part == Part::Last || n == 1)
        });
        if !continues {
            self.drop_open(seq, "its next part is missing", problems);
            problems.push(StitchProblem {
                seq,
                detail: format!(
                    "a continuation of key \"{}\" of db {db} has no preceding part",
                    display_key(&key)
                ),
            });
            return;
        }
        let mut o = self.open.take().expect("checked above");
        if let Err(what) = o.builder.append(builder) {
            self.open = Some(o);
            self.drop_open(seq, what, problems);
            return;
        }
        o.seq = seq;
        if part == Part::Middle {
            self.open = Some(o);
            return;
        }
        match o.builder.finish(&self.limits) {
            Ok(value) => {
                if matches!(o.expire_ms, Some(at) if at < self.now_ms) {
                    self.expired += 1;
                } else {
                    self.keys += 1;
                    out.push(LoadedKey {
                        db: o.db,
                        key: o.key,
                        value,
                        expire_ms: o.expire_ms,
                    });
                }
            }
            Err(what) => problems.push(StitchProblem {
                seq,
                detail: format!(
                    "key \"{}\" of db {} split over blocks {}..={seq}: {what}",
                    display_key(&o.key),
                    o.db,
                    o.first_seq
                ),
            }),
        }
    }
}
