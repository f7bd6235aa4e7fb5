//! The engine as a replica (docs/replication.md §5): a full sync's
//! payload taking the place of the dataset.
//!
//! The payload is loaded into a new keyspace on a thread of its own
//! (`replica_load.rs`); the old dataset stays and is served until the new
//! one is complete (D10: a bad payload leaves the old data and the old
//! files as they were). The commit runs on the event loop: with
//! `appendonly yes` the new AOF, already complete and fsynced under a
//! temporary name (the payload itself as an RDB preamble followed by
//! `#hozon-aof 1`, or the dataset as commands when that path failed), is
//! renamed into place and the directory fsynced before the new dataset
//! replaces the old one in memory: a crash before the rename restarts
//! from the old AOF, after it from the new one.

use std::sync::Arc;

use super::replica_load::{drop_in_background, write_aof_image, LoadedPayload};
use super::Engine;
use crate::clock::now_ms;
use crate::keyspace::Keyspace;
use crate::persist::io::CommitError;
use crate::persist::writer::AofWriter;

/// What a committed payload held.
#[derive(Debug, Clone)]
pub(crate) struct PayloadLoaded {
    /// Keys loaded.
    pub(crate) keys: u64,
    /// The RDB version of the payload.
    pub(crate) version: u16,
    /// Warnings for the log (a directory fsync that failed after the
    /// new AOF was renamed into place).
    pub(crate) warnings: Vec<String>,
}

impl Engine {
    /// Makes a loaded payload the dataset: the old AOF's pending batch is
    /// written, a rewrite, BGSAVE or replication capture of the old data
    /// is abandoned, the new AOF is committed (rename, directory fsync)
    /// and its writer opened, then the keyspace is swapped, WATCHes and
    /// blocked clients see the new contents, and the old keyspace is
    /// freed on a thread. On error nothing changed (the temporary AOF is
    /// removed, the new keyspace freed).
    pub(crate) fn commit_payload(
        &mut self,
        loaded: LoadedPayload,
    ) -> Result<PayloadLoaded, String> {
        let LoadedPayload {
            keyspace,
            functions,
            version,
            aof_temp,
            mut warnings,
        } = loaded;
        let io = Arc::clone(&self.core.io);
        // The master's libraries replace ours (Redis clears its own before
        // it loads the payload): compiled before anything is committed, so
        // a library that does not load leaves everything as it was.
        let mut libraries = crate::core::functions::Libraries::default();
        let engine = libraries
            .set_from_codes(functions)
            .and_then(|()| crate::script::functions::FunctionEngine::build(&libraries));
        let engine = match engine {
            Ok(engine) => engine,
            Err(e) => {
                if let Some(temp) = &aof_temp {
                    let _ = io.remove(temp);
                }
                drop_in_background(keyspace);
                return Err(format!("loading the payload's function libraries: {e}"));
            }
        };
        libraries.set_function_count(engine.function_count());
        if self.core.aof.is_some() {
            match self.replace_aof(&keyspace, &libraries.codes(), aof_temp) {
                Ok(warning) => warnings.extend(warning),
                Err(e) => {
                    drop_in_background(keyspace);
                    return Err(e);
                }
            }
        } else if let Some(temp) = aof_temp {
            // The AOF was switched off during the load.
            let _ = io.remove(&temp);
        }
        // A BGSAVE or a replication capture captures the old data: it must
        // not be saved or sent as ours.
        self.core.save.abort(&mut self.core.keyspace);
        self.core.abort_repl_sync();
        let old = std::mem::replace(&mut self.core.keyspace, keyspace);
        self.core.functions = libraries;
        self.core.function_engine.put(Box::new(engine));
        self.signal_replaced(&old);
        self.core.tracking_flush();
        self.core.forget_replica_expires();
        drop_in_background(old);
        let keys = self.core.keyspace.total_keys() as u64;
        // Save points see a changed dataset.
        self.core.dirty += keys.max(1);
        Ok(PayloadLoaded {
            keys,
            version,
            warnings,
        })
    }

    /// WATCHes and blocked clients after the dataset was replaced
    /// (`old` is what was there), as SWAPDB does for one database.
    fn signal_replaced(&mut self, old: &Keyspace) {
        let now = now_ms();
        for db in 0..self.core.keyspace.db_count() {
            let before = old.db(db);
            self.core
                .signal_db_replaced(db, |key| before.get(key).is_some(), now);
        }
    }

    /// Puts the new AOF in place and appends to it from now on: the old
    /// writer's batch is written first, a rewrite in progress (of the old
    /// data) is abandoned, the new file (`temp`, made by the loading
    /// thread, which ends with `#hozon-aof 1` so the writer appends
    /// checksummed batches after it; written here from the keyspace when
    /// the AOF was switched on during the load)
    /// is renamed over the AOF and the directory fsynced. Ok carries a
    /// warning when only the directory fsync failed (the file is in place).
    fn replace_aof(
        &mut self,
        keyspace: &Keyspace,
        functions: &[Vec<u8>],
        temp: Option<std::path::PathBuf>,
    ) -> Result<Option<String>, String> {
        let io = Arc::clone(&self.core.io);
        let now = now_ms();
        if let Some(aof) = self.core.aof.as_mut() {
            if let Err(e) = aof.flush(now) {
                if let Some(temp) = &temp {
                    let _ = io.remove(temp);
                }
                return Err(format!("writing the AOF before the sync: {e:?}"));
            }
        }
        self.core.rewrite.abort(&mut self.core.keyspace);
        let dir = self.core.config.dir.clone();
        let path = dir.join(&self.core.config.appendfilename);
        let temp = match temp {
            Some(temp) => temp,
            None => {
                let temp = dir.join(format!("temp-sync-aof-{}.aof", std::process::id()));
                write_aof_image(io.as_ref(), keyspace, functions, &temp)
                    .map_err(|e| format!("writing the new append only file: {e}"))?;
                temp
            }
        };
        let warning = match crate::persist::io::commit(io.as_ref(), &temp, &path) {
            Ok(()) => None,
            // Renamed: the new file is in place whatever the directory
            // fsync said (never back to the old file).
            Err(CommitError::DirNotSynced { source, .. }) => Some(format!(
                "Syncing the directory of the new append only file: {source}"
            )),
            Err(CommitError::Rename(e)) => {
                return Err(format!("renaming the new append only file: {e}"))
            }
        };
        let mut writer = AofWriter::open(io, &path, self.core.config.appendfsync, true)
            .map_err(|e| format!("opening the new append only file: {e}"))?;
        if let Some(old) = self.core.aof.as_ref() {
            // Logical offsets keep growing (WAITAOF marks, FACK).
            writer.continue_offsets_of(old);
        }
        self.core.aof = Some(writer);
        Ok(warning)
    }
}
