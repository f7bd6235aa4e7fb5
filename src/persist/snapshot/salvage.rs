//! Salvage: every intact block of a damaged snapshot, and a report of the
//! damage ([`load_salvaging`], [`salvage_streaming`], [`readable_keys`]).

use super::decode::{
    decode_record, parse_block_header, BlockHeader, DecodedBlock, Item, LoadedKey, Region,
};
use super::encode::{le_u32, le_u64, Reader};
use super::error::{display_key, BlockDamage, SnapshotError};
use super::format::{
    BLOCK_HEADER_LEN, BLOCK_MAGIC, CODEC_LZ4, FOOTER_MAGIC, HEADER_MIN_LEN, LZ4_MAX_EXPANSION,
    TRAILER_LEN,
};
use super::header::{check_index, read_header, read_summary};
use super::load::{index_jobs, Loaded};
use super::options::ReadOptions;
use super::stats::Summary;
use super::stitch::{run_jobs, Job, StitchProblem, Stitcher};
use crate::types::{Blob, EncodingLimits};
use std::ops::ControlFlow;

/// A damaged region found by [`load_salvaging`].
#[derive(Debug)]
pub struct Damage {
    /// File offset where it starts.
    pub offset: u64,
    /// Its length in bytes (as far as known).
    pub len: u64,
    /// The block it belongs to, when known.
    pub block: Option<u32>,
    /// Keys lost, when known (0 for the header, footer and trailer).
    pub keys_lost: Option<u64>,
    /// What is wrong.
    pub error: SnapshotError,
}

/// Loads every intact block of a possibly damaged snapshot and reports
/// the damage: the header, trailer and footer are checked but not
/// needed (without a usable index the blocks are found by walking their
/// headers, and by scanning for the next intact block header past a
/// damaged one). Records of a damaged block before the damaged record are
/// kept when they are whole values. Keys are decoded with `options`, as
/// [`load`](fn@super::load) decodes them. Never fails: an unsupported
/// version is reported as damage covering the file, with nothing loaded.
pub fn load_salvaging(data: &[u8], options: &ReadOptions) -> (Loaded, Vec<Damage>) {
    let mut loaded = Loaded::default();
    let salvaged = salvage_streaming(data, options, |keys| {
        loaded.blocks.push(keys);
    });
    loaded.expired_skipped = salvaged.expired_skipped;
    loaded.summary = salvaged.summary;
    (loaded, salvaged.damages)
}

/// What [`salvage_streaming`] found besides the keys it delivered.
#[derive(Debug, Default)]
pub struct Salvaged {
    /// The footer's summary, when it was usable.
    pub summary: Option<Summary>,
    /// Keys left out because their expiry had passed at the options'
    /// `now_ms`.
    pub expired_skipped: u64,
    /// The damaged regions, in file order.
    pub damages: Vec<Damage>,
}

/// [`load_salvaging`] as a stream: each block's intact keys (a split value
/// with the block of its last part) go to `deliver` in file order as soon
/// as they are decoded, so memory holds a few blocks and the value being
/// stitched, not the keyspace (the repair tool rewrites files of any size
/// this way). Never fails: see [`load_salvaging`].
pub fn salvage_streaming(
    data: &[u8],
    options: &ReadOptions,
    mut deliver: impl FnMut(Vec<LoadedKey>),
) -> Salvaged {
    let mut damages = Vec::new();
    let file_len = data.len() as u64;
    let header = match read_header(data) {
        Ok(h) => Some(h),
        Err(
            e @ (SnapshotError::UnsupportedVersion { .. } | SnapshotError::UnsupportedFlags { .. }),
        ) => {
            damages.push(Damage {
                offset: 0,
                len: file_len,
                block: None,
                keys_lost: None,
                error: e,
            });
            return Salvaged {
                damages,
                ..Salvaged::default()
            };
        }
        Err(e) => {
            damages.push(Damage {
                offset: 0,
                len: (HEADER_MIN_LEN as u64).min(file_len),
                block: None,
                keys_lost: Some(0),
                error: e,
            });
            None
        }
    };
    let summary = match read_summary(data) {
        Ok(s) => {
            let usable = header
                .as_ref()
                .map_or(Ok(()), |h| check_index(h.len, &s))
                .and_then(|()| {
                    s.blocks.last().map_or(Ok(()), |b| {
                        if b.end() <= s.footer_offset {
                            Ok(())
                        } else {
                            Err(SnapshotError::Footer {
                                offset: s.footer_offset,
                                len: s.footer_len,
                                detail: "index points past the footer".into(),
                            })
                        }
                    })
                });
            match usable {
                Ok(()) => Some(s),
                Err(e) => {
                    damages.push(Damage {
                        offset: s.footer_offset,
                        len: s.footer_len,
                        block: None,
                        keys_lost: Some(0),
                        error: e,
                    });
                    None
                }
            }
        }
        Err(e) => {
            let offset = file_len.saturating_sub(TRAILER_LEN as u64);
            damages.push(Damage {
                offset,
                len: file_len - offset,
                block: None,
                keys_lost: None,
                error: e,
            });
            None
        }
    };
    let (jobs, limit) = match &summary {
        Some(s) => (index_jobs(s), s.footer_offset),
        None => scan_blocks(
            data,
            header.as_ref().map_or(8, |h| h.len),
            header.as_ref().map(|h| h.file_id),
            &mut damages,
        ),
    };
    let mut stitcher = Stitcher::new(options);
    let mut problems = Vec::new();
    let region = Region {
        file_id: header.as_ref().map(|h| h.file_id),
        end: limit,
    };
    run_jobs(data, &jobs, region, options, |outcome| {
        let job = outcome.job;
        let mut keys = Vec::new();
        match outcome.result {
            Ok(block) => {
                if let Some(damage) = &block.damage {
                    let kept = block
                        .items
                        .iter()
                        .filter(|i| matches!(i, Item::Whole(_) | Item::Expired))
                        .count() as u64;
                    damages.push(Damage {
                        offset: job.offset,
                        len: BLOCK_HEADER_LEN as u64 + job.stored_len,
                        block: Some(job.seq),
                        keys_lost: Some(job.keys.saturating_sub(kept)),
                        error: SnapshotError::Block {
                            index: job.seq,
                            offset: job.offset,
                            keys: job.keys,
                            damage: damage.clone(),
                        },
                    });
                }
                stitcher.accept(job.seq, block, &mut keys, &mut problems);
            }
            Err(damage) => {
                damages.push(Damage {
                    offset: job.offset,
                    len: BLOCK_HEADER_LEN as u64 + job.stored_len,
                    block: Some(job.seq),
                    keys_lost: Some(job.keys),
                    error: SnapshotError::Block {
                        index: job.seq,
                        offset: job.offset,
                        keys: job.keys,
                        damage,
                    },
                });
                stitcher.accept(
                    job.seq,
                    DecodedBlock {
                        damage: Some(BlockDamage::Split(String::new())),
                        ..DecodedBlock::default()
                    },
                    &mut keys,
                    &mut problems,
                );
            }
        }
        deliver(keys);
        ControlFlow::Continue(())
    });
    if let Some(o) = stitcher.open.take() {
        problems.push(StitchProblem {
            seq: o.head.first_seq,
            detail: format!(
                "key \"{}\" of db {} is split but its last part is missing",
                display_key(&o.head.key),
                o.head.db
            ),
        });
    }
    for p in problems {
        let offset = jobs.iter().find(|j| j.seq == p.seq).map_or(0, |j| j.offset);
        damages.push(Damage {
            offset,
            len: 0,
            block: Some(p.seq),
            keys_lost: Some(1),
            error: SnapshotError::Block {
                index: p.seq,
                offset,
                keys: jobs.iter().find(|j| j.seq == p.seq).map_or(0, |j| j.keys),
                damage: BlockDamage::Split(p.detail),
            },
        });
    }
    damages.sort_by_key(|d| d.offset);
    // The position is the header's: only an intact header gives one.
    let summary = summary.map(|s| Summary {
        position: header.as_ref().and_then(|h| h.info.position),
        ..s
    });
    Salvaged {
        summary,
        expired_skipped: stitcher.expired,
        damages,
    }
}

/// Finds blocks by walking their headers from `start` (no usable index):
/// past a damaged header it scans for the next intact one. A block counts
/// only when it carries this file's id (from the header; when the header
/// is damaged, from the first block found) and a number above the last
/// one found, so a block image stored verbatim inside a value (a snapshot
/// saved as a string, say) is never taken for one of this file's.
/// Returns the blocks found and the end of the region they lie in.
fn scan_blocks(
    data: &[u8],
    start: usize,
    mut file_id: Option<u32>,
    damages: &mut Vec<Damage>,
) -> (Vec<Job>, u64) {
    let limit = data.len() as u64;
    let mut jobs: Vec<Job> = Vec::new();
    let mut pos = start as u64;
    while pos < limit {
        let min_seq = jobs.last().map_or(0, |j| j.seq.saturating_add(1));
        match ours(data, pos, file_id, min_seq) {
            Some(h) => {
                file_id = Some(h.file_id);
                let end = h.info.end();
                jobs.push(Job {
                    seq: h.seq,
                    offset: pos,
                    expected: None,
                    keys: u64::from(h.info.records),
                    stored_len: h.info.stored_len,
                });
                if end > limit {
                    // The decode reports it (out of bounds: truncated).
                    break;
                }
                pos = end;
            }
            None => {
                if data.get(pos as usize..pos as usize + 4) == Some(&FOOTER_MAGIC[..]) {
                    break; // the footer: the blocks end here
                }
                let next = find_block_header(data, pos + 1, file_id, min_seq);
                let gap_end = next.unwrap_or(limit);
                damages.push(Damage {
                    offset: pos,
                    len: gap_end - pos,
                    block: None,
                    // How many keys a gap held is unknown.
                    keys_lost: None,
                    error: SnapshotError::Block {
                        index: min_seq,
                        offset: pos,
                        keys: 0,
                        damage: BlockDamage::Header(match next {
                            None => {
                                "no intact block header from here to the end of the file".into()
                            }
                            Some(n) => {
                                format!("unreadable bytes up to the next intact block at {n}")
                            }
                        }),
                    },
                });
                match next {
                    Some(n) => pos = n,
                    None => break,
                }
            }
        }
    }
    (jobs, limit)
}

/// The block header at `pos` when it is intact and belongs here (file id,
/// ascending number).
fn ours(data: &[u8], pos: u64, file_id: Option<u32>, min_seq: u32) -> Option<BlockHeader> {
    parse_block_header(data, pos)
        .ok()
        .filter(|h| h.seq >= min_seq && file_id.is_none_or(|id| id == h.file_id))
}

/// The next block header at or after `from` that belongs here (see
/// [`scan_blocks`]).
fn find_block_header(data: &[u8], from: u64, file_id: Option<u32>, min_seq: u32) -> Option<u64> {
    let mut at = usize::try_from(from).ok()?;
    while at + BLOCK_HEADER_LEN <= data.len() {
        let rel = data[at..].windows(4).position(|w| w == BLOCK_MAGIC)?;
        at += rel;
        if ours(data, at as u64, file_id, min_seq).is_some() {
            return Some(at as u64);
        }
        at += 1;
    }
    None
}

/// The keys (database, key) that can still be read from the block whose
/// header is at `offset`, checks or no checks: a damaged block's header
/// lengths and payload are used as far as they go (bounded by the file),
/// its payload decompressed despite a CRC mismatch, and its records
/// decoded until the first that does not parse. For reports of what a
/// damaged block held ("keys listed where readable"); a flipped byte may
/// show in a key. Empty when not even the block magic is there.
pub fn readable_keys(data: &[u8], offset: u64) -> Vec<(usize, Blob)> {
    let Some(at) = usize::try_from(offset).ok() else {
        return Vec::new();
    };
    let Some(h) = at
        .checked_add(BLOCK_HEADER_LEN)
        .and_then(|end| data.get(at..end))
    else {
        return Vec::new();
    };
    if h[0..4] != BLOCK_MAGIC {
        return Vec::new();
    }
    let records = le_u32(h, 12);
    let start = at + BLOCK_HEADER_LEN;
    let available = (data.len() - start) as u64;
    let stored_len = le_u64(h, 16).min(available) as usize;
    let payload = &data[start..start + stored_len];
    let mut scratch = Vec::new();
    let raw: &[u8] = match h[4] {
        CODEC_LZ4 => {
            let bound = (stored_len as u64)
                .saturating_mul(LZ4_MAX_EXPANSION)
                .saturating_add(64);
            let raw_len = le_u64(h, 24).min(bound) as usize;
            scratch.resize(raw_len, 0);
            // A damaged payload may stop decompressing part way; the bytes
            // produced before the failure are unknown, so nothing is read.
            match lz4_flex::block::decompress_into(payload, &mut scratch) {
                Ok(n) => &scratch[..n],
                Err(_) => return Vec::new(),
            }
        }
        _ => payload,
    };
    let mut r = Reader::new(raw);
    let limits = EncodingLimits::default();
    let mut keys = Vec::new();
    for _ in 0..records {
        match decode_record(&mut r, &limits, i64::MIN) {
            Ok(Item::Whole(k)) => keys.push((k.db, k.key)),
            Ok(Item::Part(p)) => keys.push((p.db, p.key)),
            Ok(Item::Expired) | Err(_) => break,
        }
    }
    keys
}
