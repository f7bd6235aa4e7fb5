//! Writing files.

use super::builder::{BlockBuilder, RawBlock};
use super::error::SnapshotError;
use super::format::{
    BLOCK_HEADER_LEN, BLOCK_MAGIC, BLOCK_TARGET_BYTES, CODEC_LZ4, CODEC_RAW, FILE_ID_MASK,
    FORMAT_MAJOR, FORMAT_MINOR, SYNC_EVERY_BYTES,
};
use super::header::{encode_footer, encode_header, encode_trailer};
use super::stats::{BlockInfo, HeaderInfo, Stats, Summary};
use crate::keyspace::Keyspace;
use crate::persist::io::{AppendFile, Io, SyncHandle};
use std::io;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{mpsc, Arc};

fn write_all(file: &mut dyn AppendFile, mut buf: &[u8]) -> io::Result<()> {
    while !buf.is_empty() {
        let n = file.write(buf)?;
        if n == 0 {
            return Err(io::Error::new(io::ErrorKind::WriteZero, "write returned 0"));
        }
        buf = &buf[n..];
    }
    Ok(())
}

/// Compresses, checksums and appends blocks to a temp file, then writes
/// the footer and trailer. Meant for a background thread. Any error
/// removes the temp file; so does dropping an unfinished writer.
pub struct FileWriter {
    io: Arc<dyn Io>,
    path: PathBuf,
    file: Option<Box<dyn AppendFile>>,
    syncer: Arc<dyn SyncHandle>,
    header: HeaderInfo,
    header_len: u64,
    file_id: u32,
    offset: u64,
    unsynced: u64,
    blocks: Vec<BlockInfo>,
    compressed: Vec<u8>,
    /// Scratch for the check of each compressed block before it is
    /// written (see [`verify_compressed`]).
    check: Vec<u8>,
    done: bool,
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
        let ctx = |what: &str| format!("{what} {}", temp_path.display());
        if io.exists(temp_path) {
            io.remove(temp_path)
                .map_err(|e| SnapshotError::io(ctx("removing stale"), e))?;
        }
        let mut file = io
            .open_append(temp_path)
            .map_err(|e| SnapshotError::io(ctx("creating"), e))?;
        let syncer = match file.set_len(0).and_then(|()| file.syncer()) {
            Ok(s) => s,
            Err(e) => {
                let _ = io.remove(temp_path);
                return Err(SnapshotError::io(ctx("opening"), e));
            }
        };
        let mut writer = FileWriter {
            io,
            path: temp_path.to_path_buf(),
            file: Some(file),
            syncer,
            header: header.clone(),
            header_len: 0,
            // Random, so blocks of another snapshot (one stored inside a
            // value, say) are never taken for this file's.
            file_id: (crate::rand::Rng::new().next_u64() as u32) & FILE_ID_MASK,
            offset: 0,
            unsynced: 0,
            blocks: Vec::new(),
            compressed: Vec::new(),
            check: Vec::new(),
            done: false,
        };
        let bytes = encode_header(&header, writer.file_id);
        writer.header_len = bytes.len() as u64;
        writer.append(&bytes)?;
        Ok(writer)
    }

    /// The temp file's path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Bytes written so far.
    pub fn len(&self) -> u64 {
        self.offset
    }

    /// True before anything was written (never, once created).
    pub fn is_empty(&self) -> bool {
        self.offset == 0
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
                    self.path.display()
                ),
                source: io::Error::other(
                    "the compressed block does not decompress to its records (nothing written)",
                ),
            });
        }
        let payload_crc = crc32fast::hash(payload);
        let info = BlockInfo {
            offset: self.offset,
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
            let result = self.append(&both[..BLOCK_HEADER_LEN + stored_len]);
            self.compressed = both;
            result?;
        } else {
            self.append(&head)?;
            self.append(raw)?;
        }
        self.blocks.push(info);
        if self.unsynced >= SYNC_EVERY_BYTES {
            self.sync()?;
        }
        Ok(block.data)
    }

    /// Writes footer and trailer and fsyncs. The file is then complete
    /// under its temp name; [`commit`] puts it in place.
    pub fn finish(mut self, stats: &Stats) -> Result<Summary, SnapshotError> {
        let mut summary = Summary {
            format_major: FORMAT_MAJOR,
            format_minor: FORMAT_MINOR,
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
            footer_offset: self.offset,
            footer_len: 0,
        };
        let footer = encode_footer(&summary);
        let trailer = encode_trailer(self.offset, &footer);
        self.append(&footer)?;
        self.append(&trailer)?;
        self.sync()?;
        summary.footer_len = footer.len() as u64;
        summary.file_len = self.offset;
        self.done = true;
        self.file = None;
        Ok(summary)
    }

    fn append(&mut self, bytes: &[u8]) -> Result<(), SnapshotError> {
        let file = self.file.as_mut().ok_or_else(|| {
            SnapshotError::io(
                "writing a snapshot after a failure",
                io::Error::other("the writer already failed"),
            )
        })?;
        if let Err(e) = write_all(file.as_mut(), bytes) {
            self.abandon();
            return Err(SnapshotError::io(
                format!("writing {}", self.path.display()),
                e,
            ));
        }
        self.offset += bytes.len() as u64;
        self.unsynced += bytes.len() as u64;
        Ok(())
    }

    fn sync(&mut self) -> Result<(), SnapshotError> {
        if let Err(e) = self.syncer.sync_data() {
            self.abandon();
            return Err(SnapshotError::io(
                format!("fsyncing {}", self.path.display()),
                e,
            ));
        }
        self.unsynced = 0;
        Ok(())
    }

    /// Closes and removes the temp file (best effort: a leftover temp file
    /// is removed at the next startup anyway).
    fn abandon(&mut self) {
        self.file = None;
        let _ = self.io.remove(&self.path);
    }
}

impl Drop for FileWriter {
    fn drop(&mut self) {
        if !self.done && self.file.is_some() {
            self.abandon();
        }
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
    if let Err(e) = io.rename(temp_path, final_path) {
        let _ = io.remove(temp_path);
        return Err(SnapshotError::io(
            format!(
                "renaming {} to {}",
                temp_path.display(),
                final_path.display()
            ),
            e,
        ));
    }
    // From here on the new file has the name: a failure is reported as
    // such (DirNotSynced), never as if the old file were still in place.
    let dir = final_path.parent().unwrap_or(Path::new("."));
    io.sync_dir(dir)
        .map_err(|source| SnapshotError::DirNotSynced {
            file: final_path.to_path_buf(),
            source,
        })
}

static TEMP_COUNTER: AtomicU64 = AtomicU64::new(0);

/// A fresh temp-file path in `dir` for a snapshot named `file_name`
/// (`temp-<pid>-<n>-<file_name>`; `temp-*` files are removed at startup).
pub fn temp_path(dir: &Path, file_name: &str) -> PathBuf {
    let n = TEMP_COUNTER.fetch_add(1, Ordering::Relaxed);
    dir.join(format!("temp-{}-{n}-{file_name}", std::process::id()))
}

/// Writes `keyspace` as `dir/file_name` and returns when it is durable
/// (SAVE; tests). Keys already expired at `now_ms` are left out. Records
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

pub(super) fn save_keyspace_with_block_size(
    keyspace: &Keyspace,
    now_ms: i64,
    io: Arc<dyn Io>,
    dir: &Path,
    file_name: &str,
    block_bytes: usize,
) -> Result<Summary, SnapshotError> {
    let temp = temp_path(dir, file_name);
    let writer = FileWriter::create(
        io.clone(),
        &temp,
        HeaderInfo::new(now_ms, keyspace.db_count()),
    )?;
    let mut builder = BlockBuilder::with_block_size(block_bytes);
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
        'dbs: for db_index in 0..keyspace.db_count() {
            let db = keyspace.db(db_index);
            let has_expires = db.expires_len() > 0;
            for (key, value) in db.iter() {
                let expire = if has_expires { db.expire_at(key) } else { None };
                if matches!(expire, Some(at) if at < now_ms) {
                    continue;
                }
                for block in builder.push(db_index, key, value, expire) {
                    if to_writer.send(block).is_err() {
                        break 'dbs; // the writer failed: its error is reported below
                    }
                }
                while let Ok(buf) = buffers.try_recv() {
                    builder.recycle(buf);
                }
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
