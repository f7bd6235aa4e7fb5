//! Writing RDB files to disk: a temp file in the data directory, fsynced
//! as it grows (every 32 MiB) and at the end, then renamed over the final
//! name and the directory fsynced — the same discipline as `dump.hoz`
//! (docs/persistence.md). Used by SAVE/BGSAVE with `snapshot-format rdb`.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use super::writer::{put_trailer, Encoder};
use super::Crc64;
use crate::keyspace::Keyspace;
use crate::persist::io::{AppendFile, Io, SyncHandle};
use crate::persist::writer::error_text;
use crate::types::Value;

/// Bytes written between two incremental fsyncs.
const SYNC_EVERY_BYTES: u64 = 32 << 20;
/// Encoded bytes gathered before a write.
pub const CHUNK_BYTES: usize = 1 << 20;

/// An RDB file being written under a temporary name. Dropping it before
/// [`RdbFile::finish`] removes the file.
pub struct RdbFile {
    io: Arc<dyn Io>,
    path: PathBuf,
    file: Option<Box<dyn AppendFile>>,
    syncer: Arc<dyn SyncHandle>,
    crc: Crc64,
    len: u64,
    unsynced: u64,
    done: bool,
}

impl RdbFile {
    /// Creates (or truncates) `temp_path`.
    pub fn create(io: Arc<dyn Io>, temp_path: &Path) -> Result<RdbFile, String> {
        let fail = |what: &str, e: std::io::Error| {
            format!("{what} {}: {}", temp_path.display(), error_text(&e))
        };
        let mut file = io.open_append(temp_path).map_err(|e| fail("creating", e))?;
        let syncer = match file.set_len(0).and_then(|()| file.syncer()) {
            Ok(s) => s,
            Err(e) => {
                let _ = io.remove(temp_path);
                return Err(fail("opening", e));
            }
        };
        Ok(RdbFile {
            io,
            path: temp_path.to_path_buf(),
            file: Some(file),
            syncer,
            crc: Crc64::default(),
            len: 0,
            unsynced: 0,
            done: false,
        })
    }

    /// Bytes written so far.
    pub fn len(&self) -> u64 {
        self.len
    }

    /// True before anything was written.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Appends encoded bytes (fsyncing every 32 MiB).
    pub fn write(&mut self, bytes: &[u8]) -> Result<(), String> {
        self.crc.update(bytes);
        self.write_raw(bytes)?;
        if self.unsynced >= SYNC_EVERY_BYTES {
            self.sync()?;
        }
        Ok(())
    }

    fn write_raw(&mut self, mut bytes: &[u8]) -> Result<(), String> {
        let Some(file) = self.file.as_mut() else {
            return Err(format!("writing {} after a failure", self.path.display()));
        };
        while !bytes.is_empty() {
            match file.write(bytes) {
                Ok(0) => {
                    let message = format!("writing {}: short write (0 bytes)", self.path.display());
                    self.abandon();
                    return Err(message);
                }
                Ok(n) => {
                    bytes = &bytes[n..];
                    self.len += n as u64;
                    self.unsynced += n as u64;
                }
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(e) => {
                    let message = format!("writing {}: {}", self.path.display(), error_text(&e));
                    self.abandon();
                    return Err(message);
                }
            }
        }
        Ok(())
    }

    fn sync(&mut self) -> Result<(), String> {
        if let Err(e) = self.syncer.sync_data() {
            let message = format!("fsyncing {}: {}", self.path.display(), error_text(&e));
            self.abandon();
            return Err(message);
        }
        self.unsynced = 0;
        Ok(())
    }

    /// Writes EOF and the checksum (zero when `checksum` is off, as
    /// `rdbchecksum no` does) and fsyncs. The file keeps its temporary
    /// name: see [`crate::persist::snapshot::commit`]. Returns its length.
    pub fn finish(mut self, checksum: bool) -> Result<u64, String> {
        let mut tail = Vec::with_capacity(9);
        put_trailer(&mut tail, &mut self.crc, checksum);
        self.write_raw(&tail)?;
        self.sync()?;
        self.done = true;
        self.file = None;
        Ok(self.len)
    }

    fn abandon(&mut self) {
        self.file = None;
        let _ = self.io.remove(&self.path);
    }
}

impl Drop for RdbFile {
    fn drop(&mut self) {
        if !self.done && self.file.is_some() {
            self.abandon();
        }
    }
}

/// Encodes key records into chunks, adding SELECTDB whenever the database
/// changes (records must come grouped by database).
pub struct RecordEncoder {
    /// The value encoder.
    pub encoder: Encoder,
    buf: Vec<u8>,
    db: Option<usize>,
    /// Keys encoded.
    pub keys: u64,
}

impl RecordEncoder {
    /// A record encoder that starts with the file header.
    pub fn with_header(encoder: Encoder, ctime_ms: i64, used_mem: u64, aof_base: bool) -> Self {
        let mut buf = Vec::with_capacity(CHUNK_BYTES + CHUNK_BYTES / 8);
        encoder.put_header(&mut buf, ctime_ms, used_mem, aof_base);
        RecordEncoder {
            encoder,
            buf,
            db: None,
            keys: 0,
        }
    }

    /// Encodes one key. `sizes` gives the RESIZEDB hint for a database
    /// when one starts.
    pub fn push(
        &mut self,
        db: usize,
        key: &[u8],
        value: &Value,
        expire_ms: Option<i64>,
        sizes: impl FnOnce(usize) -> (u64, u64),
    ) {
        if self.db != Some(db) {
            let (keys, expiring) = sizes(db);
            self.encoder.put_select(&mut self.buf, db, keys, expiring);
            self.db = Some(db);
        }
        self.encoder.put_key(&mut self.buf, key, value, expire_ms);
        self.keys += 1;
    }

    /// The encoded bytes when at least a chunk has gathered.
    pub fn take_full(&mut self) -> Option<Vec<u8>> {
        (self.buf.len() >= CHUNK_BYTES).then(|| self.take())
    }

    /// Everything encoded so far.
    pub fn take(&mut self) -> Vec<u8> {
        std::mem::replace(
            &mut self.buf,
            Vec::with_capacity(CHUNK_BYTES + CHUNK_BYTES / 8),
        )
    }
}

/// Writes `keyspace` as an RDB file `dir/file_name` and returns when it is
/// durable (SAVE with `snapshot-format rdb`). Keys already expired at
/// `now_ms` are left out. On error nothing is left under the final name
/// and a previous file there is untouched. Returns (keys, bytes).
pub fn save_keyspace(
    keyspace: &Keyspace,
    now_ms: i64,
    io: Arc<dyn Io>,
    dir: &Path,
    file_name: &str,
    encoder: Encoder,
    checksum: bool,
) -> Result<(u64, u64), String> {
    let temp = crate::persist::snapshot::temp_path(dir, file_name);
    let mut file = RdbFile::create(Arc::clone(&io), &temp)?;
    let mut records = RecordEncoder::with_header(encoder, now_ms, 0, false);
    for db_index in 0..keyspace.db_count() {
        let db = keyspace.db(db_index);
        let has_expires = db.expires_len() > 0;
        for (key, value) in db.iter() {
            let expire = if has_expires { db.expire_at(key) } else { None };
            if matches!(expire, Some(at) if at < now_ms) {
                continue;
            }
            records.push(db_index, key, value, expire, |_| {
                (db.len() as u64, db.expires_len() as u64)
            });
            if let Some(chunk) = records.take_full() {
                file.write(&chunk)?;
            }
        }
    }
    file.write(&records.take())?;
    let keys = records.keys;
    let len = file.finish(checksum)?;
    crate::persist::snapshot::commit(io.as_ref(), &temp, &dir.join(file_name))
        .map_err(|e| e.to_string())?;
    Ok((keys, len))
}
