//! Writing files.

use super::builder::{BlockBuilder, RawBlock};
use super::error::SnapshotError;
use super::format::{
    BLOCK_HEADER_LEN, BLOCK_MAGIC, BLOCK_TARGET_BYTES, CODEC_LZ4, CODEC_RAW, FILE_ID_MASK,
    FORMAT_MAJOR,
};
use super::header::{encode_footer, encode_header, encode_trailer};
use super::stats::{BlockInfo, HeaderInfo, Stats, Summary};
use crate::keyspace::Keyspace;
use crate::persist::io::{self as durable, DurableFile, Io};
use std::io;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{mpsc, Arc};

/// Compresses, checksums and appends blocks to a temp file, then writes
/// the footer and trailer. Meant for a background thread. Any error
/// removes the temp file; so does dropping an unfinished writer.
pub struct FileWriter {
    file: DurableFile,
    header: HeaderInfo,
    header_len: u64,
    file_id: u32,
    blocks: Vec<BlockInfo>,
    compressed: Vec<u8>,
    /// Scratch for the check of each compressed block before it is
    /// written (see [`verify_compressed`]).
    check: Vec<u8>,
}

/// The pair assertion of the writer: a compressed block must decompress
/// to exactly its records before it goes to disk, so a compressor fault
/// (or a buffer overwritten between compressing and writing) fails the
/// save instead of leaving a dump whose CRC is right over wrong bytes
/// (the CRC is computed from the compressed bytes, so it cannot catch
/// that). LZ4 decodes at several GB/s: about a tenth of compressing.
pub(super) fn verify_compressed(payload: &[u8], raw: &[u8], scratch: &mut Vec<u8>) -> bool {
    scratch.resize(raw.len(), 0);
    matches!(lz4_flex::block::decompress_into(payload, scratch), Ok(n) if n == raw.len())
        && scratch[..] == raw[..]
}

impl FileWriter {
    /// Creates (or truncates) `temp_path` and writes the header.
    pub fn create(
        io: Arc<dyn Io>,
        temp_path: &Path,
        header: HeaderInfo,
    ) -> Result<FileWriter, SnapshotError> {
        let mut writer = FileWriter {
            file: DurableFile::create(io, temp_path)?,
            header: header.clone(),
            header_len: 0,
            // Random, so blocks of another snapshot (one stored inside a
            // value, say) are never taken for this file's.
            file_id: (crate::rand::Rng::new().next_u64() as u32) & FILE_ID_MASK,
            blocks: Vec::new(),
            compressed: Vec::new(),
            check: Vec::new(),
        };
        let bytes = encode_header(&header, writer.file_id);
        writer.header_len = bytes.len() as u64;
        writer.file.append(&bytes)?;
        Ok(writer)
    }

    /// The temp file's path.
    pub fn path(&self) -> &Path {
        self.file.path()
    }

    /// Bytes written so far.
    pub fn len(&self) -> u64 {
        self.file.len()
    }

    /// True before anything was written (never, once created).
    pub fn is_empty(&self) -> bool {
        self.file.is_empty()
    }

    /// Compresses `block`, appends it with its header and records it in
    /// the index; fsyncs every 32 MiB. Returns the block's buffer for
    /// [`BlockBuilder::recycle`].
    pub fn write_block(&mut self, block: RawBlock) -> Result<Vec<u8>, SnapshotError> {
        let raw = &block.data;
        let max = lz4_flex::block::get_maximum_output_size(raw.len());
        self.compressed.resize(BLOCK_HEADER_LEN + max, 0);
        let compressed_len =
            lz4_flex::block::compress_into(raw, &mut self.compressed[BLOCK_HEADER_LEN..])
                .ok()
                .filter(|n| *n < raw.len());
        let (codec, stored_len) = match compressed_len {
            Some(n) => (CODEC_LZ4, n),
            None => (CODEC_RAW, raw.len()),
        };
        let payload: &[u8] = match codec {
            CODEC_LZ4 => &self.compressed[BLOCK_HEADER_LEN..BLOCK_HEADER_LEN + stored_len],
            _ => raw,
        };
        if codec == CODEC_LZ4 && !verify_compressed(payload, raw, &mut self.check) {
            return Err(SnapshotError::Io {
                context: format!(
                    "checking block {} of {} before writing it",
                    self.blocks.len(),
                    self.file.path().display()
                ),
                source: io::Error::other(
                    "the compressed block does not decompress to its records (nothing written)",
                ),
            });
        }
        let payload_crc = crc32fast::hash(payload);
        let info = BlockInfo {
            offset: self.file.len(),
            stored_len: stored_len as u64,
            raw_len: raw.len() as u64,
            records: block.records,
            codec,
            payload_crc,
        };
        let mut head = [0u8; BLOCK_HEADER_LEN];
        head[0..4].copy_from_slice(&BLOCK_MAGIC);
        head[4] = codec;
        head[5..8].copy_from_slice(&self.file_id.to_le_bytes()[..3]);
        head[8..12].copy_from_slice(&(self.blocks.len() as u32).to_le_bytes());
        head[12..16].copy_from_slice(&block.records.to_le_bytes());
        head[16..24].copy_from_slice(&info.stored_len.to_le_bytes());
        head[24..32].copy_from_slice(&info.raw_len.to_le_bytes());
        head[32..36].copy_from_slice(&payload_crc.to_le_bytes());
        let crc = crc32fast::hash(&head[..36]);
        head[36..40].copy_from_slice(&crc.to_le_bytes());
        if codec == CODEC_LZ4 {
            // One write: header and payload side by side in one buffer.
            self.compressed[..BLOCK_HEADER_LEN].copy_from_slice(&head);
            let both = std::mem::take(&mut self.compressed);
            let result = self.file.append(&both[..BLOCK_HEADER_LEN + stored_len]);
            self.compressed = both;
            result?;
        } else {
            self.file.append(&head)?;
            self.file.append(raw)?;
        }
        self.blocks.push(info);
        self.file.sync_if_due()?;
        Ok(block.data)
    }

    /// Writes footer and trailer and fsyncs. The file is then complete
    /// under its temp name; [`commit`] puts it in place.
    pub fn finish(mut self, stats: &Stats) -> Result<Summary, SnapshotError> {
        let mut summary = Summary {
            format_major: FORMAT_MAJOR,
            format_minor: self.header.format_minor(),
            created_ms: self.header.created_ms,
            databases: self.header.databases,
            engine_version: String::from_utf8_lossy(
                &self.header.engine_version.as_bytes()[..self.header.engine_version.len().min(255)],
            )
            .into_owned(),
            stats: stats.clone(),
            raw_bytes: self.blocks.iter().map(|b| b.raw_len).sum(),
            stored_bytes: self.blocks.iter().map(|b| b.stored_len).sum(),
            blocks: std::mem::take(&mut self.blocks),
            file_len: 0,
            footer_offset: self.file.len(),
            footer_len: 0,
            position: self.header.position,
            functions: self.header.functions.clone(),
        };
        let footer = encode_footer(&summary);
        let trailer = encode_trailer(summary.footer_offset, &footer, summary.format_minor);
        self.file.append(&footer)?;
        self.file.append(&trailer)?;
        summary.footer_len = footer.len() as u64;
        summary.file_len = self.file.finish()?;
        Ok(summary)
    }
}

/// Puts a finished snapshot in place: renames `temp_path` to `final_path`
/// (same directory) and fsyncs the directory. If the rename fails the
/// temp file is removed and whatever was at `final_path` stays. If the
/// directory fsync fails the file under the final name is complete and
/// fsynced, but the durability of its name is not confirmed: the error is
/// [`SnapshotError::DirNotSynced`], and a caller that keeps writing to the
/// file (the AOF after a rewrite) must treat the switch as done.
pub fn commit(io: &dyn Io, temp_path: &Path, final_path: &Path) -> Result<(), SnapshotError> {
    durable::commit(io, temp_path, final_path).map_err(SnapshotError::from)
}

static TEMP_COUNTER: AtomicU64 = AtomicU64::new(0);

/// A fresh temp-file path in `dir` for a snapshot named `file_name`
/// (`temp-<pid>-<n>-<file_name>`; `temp-*` files are removed at startup).
pub fn temp_path(dir: &Path, file_name: &str) -> PathBuf {
    let n = TEMP_COUNTER.fetch_add(1, Ordering::Relaxed);
    dir.join(format!("temp-{}-{n}-{file_name}", std::process::id()))
}

/// Writes `keyspace` as `dir/file_name` and returns when it is durable
/// (SAVE; tests), keys past their TTL included (`persist::saved_keys`). Records
/// are encoded on the calling thread while a helper thread compresses and
/// writes. On error nothing is left under the final name and a previous
/// file there is untouched.
pub fn save_keyspace(
    keyspace: &Keyspace,
    now_ms: i64,
    io: Arc<dyn Io>,
    dir: &Path,
    file_name: &str,
) -> Result<Summary, SnapshotError> {
    save_keyspace_with_block_size(keyspace, now_ms, io, dir, file_name, BLOCK_TARGET_BYTES)
}

/// [`save_keyspace`] recording the replication position `position` in
/// the header (SAVE while replicating: a restart continues from it), the
/// function libraries `functions` in the footer and each key's access
/// record as `key_access` says (format 1.4 unless `None`).
#[allow(clippy::too_many_arguments)]
pub fn save_keyspace_at(
    keyspace: &Keyspace,
    now_ms: i64,
    position: Option<crate::repl::ids::Position>,
    functions: Vec<Vec<u8>>,
    key_access: crate::rdb::writer::KeyAccessRecord,
    io: Arc<dyn Io>,
    dir: &Path,
    file_name: &str,
) -> Result<Summary, SnapshotError> {
    let header = HeaderInfo {
        position,
        functions,
        key_access,
        ..HeaderInfo::new(now_ms, keyspace.db_count())
    };
    save_keyspace_with_header(keyspace, header, io, dir, file_name, BLOCK_TARGET_BYTES)
}

pub(super) fn save_keyspace_with_block_size(
    keyspace: &Keyspace,
    now_ms: i64,
    io: Arc<dyn Io>,
    dir: &Path,
    file_name: &str,
    block_bytes: usize,
) -> Result<Summary, SnapshotError> {
    let header = HeaderInfo::new(now_ms, keyspace.db_count());
    save_keyspace_with_header(keyspace, header, io, dir, file_name, block_bytes)
}

/// [`save_keyspace`] with the header given (its `created_ms` is also the
/// time before which keys count as expired).
pub(super) fn save_keyspace_with_header(
    keyspace: &Keyspace,
    header: HeaderInfo,
    io: Arc<dyn Io>,
    dir: &Path,
    file_name: &str,
    block_bytes: usize,
) -> Result<Summary, SnapshotError> {
    let temp = temp_path(dir, file_name);
    let key_access = header.key_access;
    let writer = FileWriter::create(io.clone(), &temp, header)?;
    let mut builder = BlockBuilder::with_block_size(block_bytes).with_key_access(key_access);
    let (to_writer, blocks) = mpsc::sync_channel::<RawBlock>(2);
    let (to_builder, buffers) = mpsc::channel::<Vec<u8>>();
    let written = std::thread::scope(|scope| {
        let handle = scope.spawn(move || -> Result<FileWriter, SnapshotError> {
            let mut writer = writer;
            for block in blocks {
                let buf = writer.write_block(block)?;
                let _ = to_builder.send(buf);
            }
            Ok(writer)
        });
        'keys: for (db_index, _, key, value, expire) in crate::persist::saved_keys(keyspace) {
            for block in builder.push_key(db_index, key, value, expire) {
                if to_writer.send(block).is_err() {
                    break 'keys; // the writer failed: its error is reported below
                }
            }
            while let Ok(buf) = buffers.try_recv() {
                builder.recycle(buf);
            }
        }
        if let Some(block) = builder.finish() {
            let _ = to_writer.send(block);
        }
        drop(to_writer);
        handle
            .join()
            .unwrap_or_else(|panic| std::panic::resume_unwind(panic))
    })?;
    let summary = written.finish(builder.stats())?;
    commit(io.as_ref(), &temp, &dir.join(file_name))?;
    Ok(summary)
}
