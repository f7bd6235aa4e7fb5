//! Writing RDB files to disk: the encoded records of [`crate::rdb`] on a
//! [`DurableFile`] (a temp file in the data directory, fsynced as it
//! grows and at the end; [`commit`](crate::persist::io::commit) renames it
//! into place and fsyncs the directory), the same discipline as
//! `dump.hoz` (docs/persistence.md). Used by SAVE/BGSAVE with
//! `snapshot-format rdb`, the AOF rewrite's RDB preamble being the
//! exception (it is followed by the log, see `rewriter`).

use std::path::Path;
use std::sync::Arc;

use crate::keyspace::Keyspace;
use crate::persist::io::{DurableFile, FileError, Io};
use crate::persist::writer::error_text;
use crate::rdb::writer::{put_trailer, Encoder, RecordEncoder};
use crate::rdb::Crc64;

/// An RDB file being written under a temporary name. Dropping it before
/// [`RdbFile::finish`] removes the file.
pub struct RdbFile {
    file: DurableFile,
    crc: Crc64,
}

/// The error of a failed file operation as the RDB writers report it.
fn message(e: FileError) -> String {
    format!("{}: {}", e.context, error_text(&e.source))
}

impl RdbFile {
    /// Creates (or truncates) `temp_path`.
    pub fn create(io: Arc<dyn Io>, temp_path: &Path) -> Result<RdbFile, String> {
        Ok(RdbFile {
            file: DurableFile::create(io, temp_path).map_err(message)?,
            crc: Crc64::default(),
        })
    }

    /// Bytes written so far.
    pub fn len(&self) -> u64 {
        self.file.len()
    }

    /// True before anything was written.
    pub fn is_empty(&self) -> bool {
        self.file.is_empty()
    }

    /// Appends encoded bytes (fsyncing every 32 MiB).
    pub fn write(&mut self, bytes: &[u8]) -> Result<(), String> {
        self.crc.update(bytes);
        self.file.append(bytes).map_err(message)?;
        self.file.sync_if_due().map_err(message)
    }

    /// Writes EOF and the checksum (zero when `checksum` is off, as
    /// `rdbchecksum no` does) and fsyncs. The file keeps its temporary
    /// name: see [`crate::persist::snapshot::commit`]. Returns its length.
    pub fn finish(mut self, checksum: bool) -> Result<u64, String> {
        let mut tail = Vec::with_capacity(9);
        put_trailer(&mut tail, &mut self.crc, checksum);
        self.file.append(&tail).map_err(message)?;
        self.file.finish().map_err(message)
    }
}

/// How [`save_keyspace`] encodes the file.
#[derive(Debug, Clone, Copy, Default)]
pub struct RdbOptions<'a> {
    /// The value encoder (`rdbcompression`, listpack sizes).
    pub encoder: Encoder,
    /// Write the CRC-64 (`rdbchecksum`).
    pub checksum: bool,
    /// The replication position to record in the AUX fields, if any.
    pub position: Option<&'a crate::repl::ids::Position>,
    /// The function libraries' sources.
    pub functions: &'a [Vec<u8>],
}

/// Writes `keyspace` as an RDB file `dir/file_name` and returns when it is
/// durable (SAVE with `snapshot-format rdb`). Keys past their TTL are
/// kept (`persist::saved_keys`). On error nothing is left under the final name
/// and a previous file there is untouched. Returns (keys, bytes).
pub fn save_keyspace(
    keyspace: &Keyspace,
    now_ms: i64,
    io: Arc<dyn Io>,
    dir: &Path,
    file_name: &str,
    options: RdbOptions<'_>,
) -> Result<(u64, u64), String> {
    let RdbOptions {
        encoder,
        checksum,
        position,
        functions,
    } = options;
    let temp = crate::persist::snapshot::temp_path(dir, file_name);
    let mut file = RdbFile::create(Arc::clone(&io), &temp)?;
    let mut records = RecordEncoder::with_header_and_position(encoder, now_ms, 0, false, position);
    records.put_functions(functions);
    for (db_index, db, key, value, expire) in super::saved_keys(keyspace) {
        records.push_key(db_index, key, value, expire, |_| {
            (db.len() as u64, db.expires_len() as u64)
        });
        if let Some(chunk) = records.take_full() {
            file.write(&chunk)?;
        }
    }
    file.write(&records.take())?;
    let keys = records.keys;
    let len = file.finish(checksum)?;
    crate::persist::snapshot::commit(io.as_ref(), &temp, &dir.join(file_name))
        .map_err(|e| e.to_string())?;
    Ok((keys, len))
}
