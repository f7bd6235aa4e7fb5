//! Loading.

use super::decode::{DecodedBlock, LoadedKey, Region};
use super::error::{display_key, BlockDamage, SnapshotError};
use super::header::{check_index, read_header, read_summary, Header};
use super::options::ReadOptions;
use super::stats::{Stats, Summary};
use super::stitch::{run_jobs, Job, SplitHead, Stitcher};
use crate::keyspace::Keyspace;
use std::ops::ControlFlow;

/// The keys of a snapshot, per block, ready to be inserted.
#[derive(Debug, Default)]
pub struct Loaded {
    /// Keys per block, in file order (a split value belongs to the block
    /// of its last part).
    pub blocks: Vec<Vec<LoadedKey>>,
    /// Keys left out because their expiry had passed at load time.
    pub expired_skipped: u64,
    /// The footer's summary, when it could be read.
    pub summary: Option<Summary>,
}

impl Loaded {
    /// Number of keys loaded.
    pub fn len(&self) -> usize {
        self.blocks.iter().map(Vec::len).sum()
    }

    /// True when no key was loaded.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Every key, in file order.
    pub fn keys(&self) -> impl Iterator<Item = &LoadedKey> {
        self.blocks.iter().flatten()
    }

    /// Inserts every key (with its expiry) into `keyspace`, which should
    /// be empty. Fails, before inserting anything, on a database the
    /// keyspace does not have; fails on a key that is already present.
    /// Returns the number of keys inserted.
    pub fn into_keyspace(self, keyspace: &mut Keyspace) -> Result<u64, SnapshotError> {
        let databases = keyspace.db_count();
        if let Some(k) = self.keys().find(|k| k.db >= databases) {
            return Err(SnapshotError::DbOutOfRange {
                db: k.db,
                databases,
            });
        }
        let mut per_db = vec![(0usize, 0usize); databases];
        for k in self.keys() {
            per_db[k.db].0 += 1;
            per_db[k.db].1 += usize::from(k.expire_ms.is_some());
        }
        for (db, (keys, expiring)) in per_db.into_iter().enumerate() {
            keyspace.db_mut(db).reserve(keys, expiring);
        }
        let mut n = 0;
        for k in self.blocks.into_iter().flatten() {
            insert_key(keyspace, k)?;
            n += 1;
        }
        Ok(n)
    }
}

fn insert_key(keyspace: &mut Keyspace, k: LoadedKey) -> Result<(), SnapshotError> {
    if k.db >= keyspace.db_count() {
        return Err(SnapshotError::DbOutOfRange {
            db: k.db,
            databases: keyspace.db_count(),
        });
    }
    let access = k.access.and_then(|a| keyspace.loaded_access(a));
    keyspace
        .db_mut(k.db)
        .insert_loaded(k.key, k.value, k.expire_ms, access)
        .map_err(|key| SnapshotError::DuplicateKey {
            db: k.db,
            key: display_key(&key),
        })
}

/// Sizes each database's tables for the keys `stats` says the file holds,
/// so loading never resizes (each resize would move every key again).
fn reserve_for(keyspace: &mut Keyspace, stats: &Stats) {
    for (&db, s) in &stats.dbs {
        if db < keyspace.db_count() {
            let keys = usize::try_from(s.keys).unwrap_or(usize::MAX);
            let expiring = usize::try_from(s.expiring_keys).unwrap_or(usize::MAX);
            keyspace.db_mut(db).reserve(keys, expiring);
        }
    }
}

/// Header, trailer, footer and index, all verified (strict loading).
pub(super) fn verify_frame(data: &[u8]) -> Result<(Header, Summary), SnapshotError> {
    let header = read_header(data)?;
    let summary = read_summary(data)?;
    if summary.created_ms != header.info.created_ms
        || summary.databases != header.info.databases
        || summary.engine_version != header.info.engine_version
    {
        return Err(SnapshotError::Footer {
            offset: summary.footer_offset,
            len: summary.footer_len,
            detail: "creation time, databases or engine version disagree with the header".into(),
        });
    }
    check_index(header.len, &summary)?;
    let summary = Summary {
        position: header.info.position,
        ..summary
    };
    Ok((header, summary))
}

pub(super) fn index_jobs(summary: &Summary) -> Vec<Job> {
    summary
        .blocks
        .iter()
        .enumerate()
        .map(|(i, b)| Job {
            seq: i as u32,
            offset: b.offset,
            expected: Some(*b),
            keys: u64::from(b.records),
            stored_len: b.stored_len,
        })
        .collect()
}

/// Loads and verifies a whole snapshot: header, trailer, footer, every
/// block's header and CRC, every record, with `options` (threads, limits;
/// keys whose expiry is before `options.now_ms` are left out, counted in
/// [`Loaded::expired_skipped`]). The first problem found (in file order)
/// is the error. A key stored twice is not one of them here (finding it
/// would need a set of every key): [`Loaded::into_keyspace`] and
/// [`load_into`], the engine's path, refuse it.
pub fn load(data: &[u8], options: &ReadOptions) -> Result<Loaded, SnapshotError> {
    let mut loaded = Loaded::default();
    let summary = load_with(data, options, |keys| {
        loaded.blocks.push(keys);
        Ok(())
    })
    .map(|(summary, expired)| {
        loaded.expired_skipped = expired;
        summary
    })?;
    loaded.summary = Some(summary);
    Ok(loaded)
}

/// [`load`] straight into `keyspace` (which should be empty): each block
/// is inserted by the calling thread as soon as it and the blocks before
/// it are decoded, while `options.workers` threads decode the next ones.
/// On error the keyspace holds part of the snapshot and should be
/// discarded. Returns the summary and the number of keys skipped because
/// they had expired.
pub fn load_into(
    data: &[u8],
    keyspace: &mut Keyspace,
    options: &ReadOptions,
) -> Result<(Summary, u64), SnapshotError> {
    load_into_reporting(data, keyspace, options, &mut |_| {})
}

/// [`load_into`], calling `on_key` after each key is inserted (with the
/// number of keys the snapshot's footer announces, 0 when unknown).
pub fn load_into_reporting(
    data: &[u8],
    keyspace: &mut Keyspace,
    options: &ReadOptions,
    on_key: &mut dyn FnMut(u64),
) -> Result<(Summary, u64), SnapshotError> {
    let mut announced = 0;
    if let Ok(summary) = read_summary(data) {
        if let Some((&db, _)) = summary.stats.dbs.range(keyspace.db_count()..).next() {
            return Err(SnapshotError::DbOutOfRange {
                db,
                databases: keyspace.db_count(),
            });
        }
        reserve_for(keyspace, &summary.stats);
        announced = summary.stats.keys;
    }
    load_with(data, options, |keys| {
        // The table is far larger than the caches: each insert's bucket
        // and first node would be a cache miss. Their fetches are started
        // FAR and NEAR keys ahead (the hints are computed from the keys,
        // which are moved out below: their positions are noted first).
        const FAR: usize = 8;
        const NEAR: usize = 3;
        let mut keys = keys.into_iter().map(Some).collect::<Vec<_>>();
        for i in 0..keys.len() {
            for (step, near) in [(FAR, false), (NEAR, true)] {
                if let Some(Some(k)) = keys.get(i + step) {
                    if k.db < keyspace.db_count() {
                        keyspace.db(k.db).prefetch_for_insert(&k.key, near);
                    }
                }
            }
            let k = keys[i].take().expect("each key is inserted once");
            insert_key(keyspace, k)?;
            on_key(announced);
        }
        Ok(())
    })
}

/// [`load`] as a stream: each block's keys go to `deliver` in file order
/// as soon as they are decoded, so memory holds a few blocks and the
/// value being stitched, not the keyspace. An `Err` from `deliver` stops
/// the load and is returned. Returns the summary and the number of keys
/// left out because they had expired.
pub fn load_streaming(
    data: &[u8],
    options: &ReadOptions,
    deliver: impl FnMut(Vec<LoadedKey>) -> Result<(), SnapshotError>,
) -> Result<(Summary, u64), SnapshotError> {
    load_with(data, options, deliver)
}

/// The strict load: `deliver` receives each block's keys in order.
fn load_with(
    data: &[u8],
    options: &ReadOptions,
    mut deliver: impl FnMut(Vec<LoadedKey>) -> Result<(), SnapshotError>,
) -> Result<(Summary, u64), SnapshotError> {
    let mut stitcher = Stitcher::new(options);
    let mut problems = Vec::new();
    let summary = walk_verified(data, options, |job, block| {
        let mut keys = Vec::with_capacity(block.items.len());
        stitcher.accept(job.seq, block, &mut keys, &mut problems);
        if let Some(p) = problems.drain(..).next() {
            return Err(block_error(job, BlockDamage::Split(p.detail)));
        }
        deliver(keys)?;
        Ok(ControlFlow::Continue(()))
    })?;
    if let Some(o) = &stitcher.open {
        return Err(unfinished_split(&summary, &o.head));
    }
    check_key_count(stitcher.keys + stitcher.expired, &summary)?;
    Ok((summary, stitcher.expired))
}

/// A block's damage as the strict readers report it.
pub(super) fn block_error(job: &Job, damage: BlockDamage) -> SnapshotError {
    SnapshotError::Block {
        index: job.seq,
        offset: job.offset,
        keys: job.keys,
        damage,
    }
}

/// The walk every strict reader makes ([`load_streaming`],
/// [`scan_keys`](super::scan_keys)): the frame verified, then the
/// index's blocks decoded with `options` and handed to `accept` in file
/// order. The first damaged block, or the first error of `accept`, is the
/// error; `accept` returning Break ends the walk early. Returns the
/// footer's summary.
pub(super) fn walk_verified(
    data: &[u8],
    options: &ReadOptions,
    mut accept: impl FnMut(&Job, DecodedBlock) -> Result<ControlFlow<()>, SnapshotError>,
) -> Result<Summary, SnapshotError> {
    let (header, summary) = verify_frame(data)?;
    let jobs = index_jobs(&summary);
    let region = Region {
        file_id: Some(header.file_id),
        end: summary.footer_offset,
    };
    let mut failure: Option<SnapshotError> = None;
    run_jobs(data, &jobs, region, options, |outcome| {
        let job = outcome.job;
        let result = match outcome.result {
            Ok(mut block) => match block.damage.take() {
                Some(damage) => Err(block_error(&job, damage)),
                None => accept(&job, block),
            },
            Err(damage) => Err(block_error(&job, damage)),
        };
        result.unwrap_or_else(|e| {
            failure = Some(e);
            ControlFlow::Break(())
        })
    });
    match failure {
        Some(e) => Err(e),
        None => Ok(summary),
    }
}

/// The error for a split value whose last part never came.
pub(super) fn unfinished_split(summary: &Summary, open: &SplitHead) -> SnapshotError {
    let seq = open.first_seq;
    SnapshotError::Block {
        index: seq,
        offset: summary.blocks[seq as usize].offset,
        keys: u64::from(summary.blocks[seq as usize].records),
        damage: BlockDamage::Split(format!(
            "key \"{}\" of db {} is split but its last part is missing",
            display_key(&open.key),
            open.db
        )),
    }
}

/// The keys found must be the footer's count.
pub(super) fn check_key_count(found: u64, summary: &Summary) -> Result<(), SnapshotError> {
    if found != summary.stats.keys {
        return Err(SnapshotError::Mismatch(format!(
            "the blocks hold {found} keys, the footer says {}",
            summary.stats.keys
        )));
    }
    Ok(())
}
