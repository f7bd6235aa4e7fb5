//! The engine as a replica (docs/replication.md §5): following a master or
//! not, and a full sync's payload taking the place of the dataset.
//!
//! The payload file is verified whole and loaded into a new keyspace
//! before anything of the old dataset goes (D10): a bad payload leaves the
//! old data and the old files as they were. With `appendonly yes` the new
//! dataset is written as a complete AOF (temporary file, fsync, rename,
//! directory fsync) before it replaces the old one in memory: a crash
//! before the rename restarts from the old AOF, after it from the new one.

use std::path::Path;
use std::sync::Arc;

use super::Engine;
use crate::clock::now_ms;
use crate::keyspace::Keyspace;
use crate::persist::writer::AofWriter;

/// What a loaded payload held.
#[derive(Debug, Clone, Copy)]
pub(crate) struct PayloadLoaded {
    /// Keys loaded.
    pub(crate) keys: u64,
    /// The RDB version of the payload.
    pub(crate) version: u16,
}

impl Engine {
    /// Loads the payload in `path` (an RDB file) as the new dataset, as
    /// the module documentation describes. On error nothing changed.
    pub(crate) fn load_payload(&mut self, path: &Path) -> Result<PayloadLoaded, String> {
        let io = Arc::clone(&self.core.io);
        let data = io
            .map(path)
            .map_err(|e| format!("reading {}: {e}", path.display()))?;
        let now = now_ms();
        let options = crate::rdb::reader::Options {
            limits: self.core.config.limits,
            databases: self.core.keyspace.db_count(),
            // A replica keeps keys past their TTL: the master's DELs go.
            skip_expired_before_ms: None,
            now_ms: now,
        };
        crate::rdb::reader::check_file(&data, &options).map_err(|e| e.to_string())?;
        let mut keyspace = Keyspace::new(self.core.keyspace.db_count());
        let cell = std::cell::RefCell::new(&mut keyspace);
        let summary = crate::rdb::reader::load_with_hints(
            &data,
            &options,
            &mut |k| {
                cell.borrow_mut()
                    .db_mut(k.db)
                    .insert_loaded(k.key, k.value, k.expire_ms)
                    .map_err(|_| "the key appears twice in the file".to_string())
            },
            &mut |db, keys, expiring| {
                let mut keyspace = cell.borrow_mut();
                let db = keyspace.db_mut(db);
                if db.is_empty() {
                    db.reserve(keys as usize, expiring as usize);
                }
            },
        )
        .map_err(|e| e.to_string())?;
        if summary.len != data.len() {
            return Err(format!(
                "{} bytes follow the RDB checksum",
                data.len() - summary.len
            ));
        }
        drop(data);
        if self.core.aof.is_some() {
            self.replace_aof(&keyspace, now)?;
        }
        // A BGSAVE captures the old data: it must not be saved as ours.
        self.core.save.abort(&mut self.core.keyspace);
        let old = std::mem::replace(&mut self.core.keyspace, keyspace);
        for db in 0..old.db_count() {
            let keys: Vec<Vec<u8>> = old.db(db).iter().map(|(k, _)| k.to_vec()).collect();
            for key in keys {
                self.core.signal_modified(db, &key);
            }
        }
        drop(old);
        let keys = self.core.keyspace.total_keys() as u64;
        // Save points see a changed dataset.
        self.core.dirty += keys.max(1);
        Ok(PayloadLoaded {
            keys,
            version: summary.version,
        })
    }

    /// Writes `keyspace` as the new AOF and appends to it from now on: the
    /// old writer's batch is written first, a rewrite in progress (of the
    /// old data) is abandoned, the new file is committed (fsync, rename,
    /// directory fsync) before it replaces the old one.
    fn replace_aof(&mut self, keyspace: &Keyspace, now: i64) -> Result<(), String> {
        if let Some(aof) = self.core.aof.as_mut() {
            aof.flush(now)
                .map_err(|e| format!("writing the AOF before the sync: {e:?}"))?;
        }
        self.core.rewrite.abort(&mut self.core.keyspace);
        let io = Arc::clone(&self.core.io);
        let dir = self.core.config.dir.clone();
        let path = dir.join(&self.core.config.appendfilename);
        let temp = dir.join(format!("temp-sync-aof-{}.aof", std::process::id()));
        crate::persist::rewrite::write_aof_file(io.as_ref(), keyspace, now, &temp, &path)
            .map_err(|e| format!("writing the new append only file: {e}"))?;
        let mut writer = AofWriter::open(io, &path, self.core.config.appendfsync, true)
            .map_err(|e| format!("opening the new append only file: {e}"))?;
        if let Some(old) = self.core.aof.as_ref() {
            // Logical offsets keep growing (WAITAOF marks, FACK).
            writer.continue_offsets_of(old);
        }
        self.core.aof = Some(writer);
        Ok(())
    }
}
