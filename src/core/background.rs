//! The background work of [`Core`]: the AOF switched on and off at
//! runtime, SAVE and BGSAVE, AOF rewrites, save points.

use std::path::PathBuf;
use std::sync::Arc;

use crate::clock::now_ms;
use crate::persist::lock::DirLock;
use crate::persist::rewriter::{self, Preamble, RewriteFiles};
use crate::persist::saver::{Finished, SaveTarget};
use crate::persist::writer::{AofStatus, AofWriter, FlushError};

use super::Core;

impl Core {
    /// INFO persistence figures of the AOF, when enabled.
    pub(crate) fn aof_status(&self) -> Option<AofStatus> {
        self.aof.as_ref().map(AofWriter::status)
    }

    /// The data directory, locked for this engine, before a file is
    /// written there (SAVE, BGSAVE, a rewrite, the AOF switched on). An
    /// empty `dir` ([`Config::in_memory`](crate::config::Config::in_memory)) means there is none.
    pub(crate) fn data_dir(&mut self) -> Result<PathBuf, String> {
        let dir = self.config.dir.clone();
        if dir.as_os_str().is_empty() {
            return Err("no data directory: set dir (CONFIG SET dir <path>) first".into());
        }
        if self.io.is_real() && self.dir_lock.is_none() {
            self.dir_lock = Some(DirLock::acquire(&dir).map_err(|e| e.to_string())?);
        }
        Ok(dir)
    }

    /// Switches the append-only file on at runtime (CONFIG SET appendonly
    /// yes), as Redis does, through a background rewrite: writes from now
    /// on go to a temporary log (`temp-appendonly-incr-<pid>.aof`), the
    /// rewrite's diff; the switch names the result `appendonly.aof`. Until
    /// then the writes are not durable (the AOF does not exist yet).
    pub(crate) fn start_aof(&mut self, now_ms: i64) -> Result<(), String> {
        if self.aof.is_some() {
            return Ok(());
        }
        let dir = self.data_dir()?;
        let incr = dir.join(format!("temp-appendonly-incr-{}.aof", std::process::id()));
        if self.io.exists(&incr) {
            let _ = self.io.remove(&incr);
        }
        let writer = AofWriter::open(Arc::clone(&self.io), &incr, self.config.appendfsync, true)
            .map_err(|e| {
                format!(
                    "opening {}: {}",
                    incr.display(),
                    crate::persist::writer::error_text(&e)
                )
            })?;
        self.aof = Some(writer);
        self.config.appendonly = true;
        // Redis: a rewrite already running (BGREWRITEAOF with the AOF off)
        // is stopped and a new one started, whose diff is the new log.
        self.rewrite.abort(&mut self.keyspace);
        if self.rdb_child_active() {
            self.rewrite.scheduled = true;
            return Ok(());
        }
        if let Err(e) = self.start_rewrite(now_ms) {
            self.aof = None;
            let _ = self.io.remove(&incr);
            self.config.appendonly = false;
            return Err(e);
        }
        Ok(())
    }

    /// True while the AOF was switched on at runtime and its first
    /// rewrite has not yet put `appendonly.aof` in place (writes go to a
    /// temporary log).
    pub(crate) fn aof_waiting_for_rewrite(&self) -> bool {
        self.aof
            .as_ref()
            .is_some_and(|a| a.path() != self.config.dir.join(&self.config.appendfilename))
    }

    /// Writes the current dataset as a new `appendonly.aof` (temporary
    /// file, fsync, rename, directory fsync), so that the file alone
    /// rebuilds the keyspace.
    pub(crate) fn write_initial_aof(&mut self, now_ms: i64) -> Result<(), String> {
        let dir = self.config.dir.clone();
        let path = dir.join(&self.config.appendfilename);
        let temp = dir.join(format!("temp-appendonly-{}.aof", std::process::id()));
        // A failed directory fsync refuses the start like any other error:
        // the complete file is then in place, and the next start loads it.
        crate::persist::rewrite::write_aof_file(
            self.io.as_ref(),
            &self.keyspace,
            &self.functions.codes(),
            now_ms,
            &temp,
            &path,
        )
        .map_err(|e| format!("writing the initial append only file: {e}"))
    }

    /// SAVE: writes `dump.hoz` now, on this thread (a running BGSAVE is
    /// stopped first, as a synchronous save supersedes it).
    pub(crate) fn save_now(&mut self, now_ms: i64) -> Result<(), String> {
        self.save.abort(&mut self.keyspace);
        let dir = self.data_dir()?;
        let file_name = self.snapshot_file_name();
        // While replicating, the file records the stream position of the
        // data it holds, so that a restart from it lets replicas continue.
        let position = self.repl.position_now();
        let functions = self.functions.codes();
        let saved = match self.save_format() {
            crate::persist::saver::Format::Native => crate::persist::snapshot::save_keyspace_at(
                &self.keyspace,
                now_ms,
                position,
                functions,
                self.key_access_record(now_ms),
                Arc::clone(&self.io),
                &dir,
                &file_name,
            )
            .map(drop)
            .map_err(|e| e.to_string()),
            crate::persist::saver::Format::Rdb { encoder, checksum } => {
                crate::persist::rdb_file::save_keyspace(
                    &self.keyspace,
                    now_ms,
                    Arc::clone(&self.io),
                    &dir,
                    &file_name,
                    crate::persist::rdb_file::RdbOptions {
                        encoder,
                        checksum,
                        position: position.as_ref(),
                        functions: &functions,
                    },
                )
                .map(drop)
            }
        };
        match saved {
            Ok(()) => {
                self.save.succeed(now_ms);
                self.dirty = 0;
                Ok(())
            }
            Err(cause) => {
                // A failed SAVE does not change the BGSAVE status (Redis's
                // rdbSave leaves lastbgsave_status alone).
                self.save.last_error = Some(cause.clone());
                Err(cause)
            }
        }
    }

    /// BGSAVE: starts a background save. Err when one is already running.
    pub(crate) fn start_bgsave(&mut self, now_ms: i64) -> Result<(), String> {
        if self.rdb_child_active() {
            return Err("Background save already in progress".into());
        }
        let dir = self.data_dir()?;
        let io = Arc::clone(&self.io);
        let format = self.save_format();
        let file_name = self.snapshot_file_name();
        let target = SaveTarget {
            io,
            dir: &dir,
            file_name: &file_name,
            format,
            position: self.repl.position_now(),
            functions: self.functions.codes(),
            key_access: self.key_access_record(now_ms),
        };
        self.save
            .start(&mut self.keyspace, target, self.dirty, now_ms);
        match &self.save.job {
            Some(_) => Ok(()),
            None => Err(self
                .save
                .last_error
                .clone()
                .unwrap_or_else(|| "cannot start a background save".into())),
        }
    }

    /// BGREWRITEAOF: starts a background rewrite of the AOF (see
    /// `persist::rewriter`). The caller checked that no BGSAVE runs.
    pub(crate) fn start_rewrite(&mut self, now_ms: i64) -> Result<(), String> {
        if self.rewrite.in_progress() {
            return Err("Background append only file rewriting already in progress".into());
        }
        let dir = self.data_dir()?;
        let target = dir.join(&self.config.appendfilename);
        let old_path = self
            .aof
            .as_ref()
            .map_or_else(|| target.clone(), |a| a.path().to_path_buf());
        // Everything logged before this instant must be in the old file:
        // the diff is what the old file receives from here on.
        let old_len = match self.aof.as_mut() {
            Some(aof) => {
                aof.flush(now_ms)
                    .map_err(|e| format!("the append only file cannot be written ({e:?})"))?;
                aof.forget_selected_db();
                aof.len()
            }
            None => 0,
        };
        let preamble = match self.config.aof_preamble {
            crate::config::AofPreamble::Native => Preamble::Native,
            crate::config::AofPreamble::None => Preamble::None,
            crate::config::AofPreamble::Rdb => Preamble::Rdb(self.rdb_encoder()),
        };
        self.rewrite.scheduled = false;
        let key_access = self.key_access_record(now_ms);
        let files = RewriteFiles {
            io: Arc::clone(&self.io),
            old_path: &old_path,
            old_len,
            target: &target,
        };
        self.rewrite.start(
            &mut self.keyspace,
            files,
            preamble,
            self.functions.codes(),
            key_access,
            self.config.aof_rewrite_incremental_fsync,
            now_ms,
        )
    }

    /// True while a BGSAVE or an AOF rewrite runs (the host should call
    /// [`Engine::background_step`](crate::engine::Engine::background_step) without sleeping between turns).
    pub(crate) fn background_busy(&self) -> bool {
        self.save.in_progress() || self.rewrite.in_progress() || self.repl_sync_running()
    }

    /// True while every running background job can only wait for its
    /// thread or its replicas (its queue is full, or its file is being
    /// finished): stepping it would do nothing, so the event loop sleeps.
    pub(crate) fn background_waits(&self) -> bool {
        (!self.save.in_progress() || self.save.waits_for_writer())
            && (!self.rewrite.in_progress() || self.rewrite.waits_for_writer())
            && (!self.repl_sync_running() || self.repl_sync_waits())
    }

    /// True while a capture Redis would run as its RDB child runs: a
    /// BGSAVE or a replication capture (BGSAVE answers "already in
    /// progress", BGREWRITEAOF is scheduled, INFO's
    /// `rdb_bgsave_in_progress` is 1).
    pub(crate) fn rdb_child_active(&self) -> bool {
        self.save.in_progress() || self.repl_sync_running()
    }

    /// Advances a running AOF rewrite: publishes the old file's length,
    /// captures a slice, and switches files once the image is written and
    /// the diff nearly copied.
    fn rewrite_step(&mut self, budget: std::time::Duration, now_ms: i64) -> Option<String> {
        if let Some(aof) = &self.aof {
            self.rewrite.publish_len(aof.len());
        }
        if let Some(rewriter::Finished::Failed(cause)) =
            self.rewrite.step(&mut self.keyspace, budget, now_ms)
        {
            return Some(self.rewrite_failed(&cause));
        }
        if !self.rewrite.ready_to_switch() {
            return None;
        }
        let final_len = match self.aof.as_mut() {
            Some(aof) => match aof.flush(now_ms) {
                Ok(()) => aof.len(),
                // The old file cannot take its pending batch now: the
                // switch waits for the retry to succeed.
                Err(FlushError::Write(_)) => return None,
                Err(FlushError::Poisoned(cause)) => {
                    self.rewrite.abandon(
                        format!("the append only file lost durability ({cause})"),
                        &mut self.keyspace,
                        now_ms,
                    );
                    return Some(format!(
                        "Background AOF rewrite abandoned: the append only file lost durability ({cause})"
                    ));
                }
            },
            None => 0,
        };
        match self.rewrite.switch(&mut self.keyspace, final_len, now_ms) {
            rewriter::Finished::Failed(cause) => Some(self.rewrite_failed(&cause)),
            rewriter::Finished::Switched {
                len,
                final_diff_bytes,
                pause,
                dir_not_synced,
            } => {
                let mut line = format!(
                    "Background AOF rewrite finished successfully ({len} bytes; the switch copied \
                     {final_diff_bytes} bytes of diff in {:.3} ms)",
                    pause.as_secs_f64() * 1000.0
                );
                if let Some(old) = self.aof.take() {
                    let path = self.config.dir.join(&self.config.appendfilename);
                    // A temporary log (appendonly switched on at runtime)
                    // is removed once the real file is in place.
                    let temporary = (old.path() != path).then(|| old.path().to_path_buf());
                    match AofWriter::open(
                        Arc::clone(&self.io),
                        &path,
                        self.config.appendfsync,
                        true,
                    ) {
                        Ok(mut writer) => {
                            writer.continue_offsets_of(&old);
                            if let Some(cause) = dir_not_synced {
                                // The new file has the name and takes the
                                // writes, but a power loss may give the
                                // name back to the old file: nothing more
                                // can be acknowledged as durable.
                                let why =
                                    format!("the rewrite's switch was not made durable: {cause}");
                                writer.poison(why.clone());
                                line = format!(
                                    "Background AOF rewrite switched files, but {why}; writes are refused until restart"
                                );
                            }
                            // The new file records the position at once
                            // (its image has none): a restart right after
                            // the switch still lets replicas continue.
                            if let Some(position) = self.repl.position_now() {
                                let _ = writer.flush_at(now_ms, Some(&position));
                            }
                            self.aof = Some(writer);
                            if let Some(temp) = temporary {
                                // Unlinking a name is cheap; the blocks are
                                // freed when the descriptor closes.
                                let _ = self.io.remove(&temp);
                            }
                            // Closing the old file frees its blocks (it was
                            // renamed over or unlinked): not on the command
                            // thread.
                            let _ = std::thread::Builder::new()
                                .name("hozon-aof-close".into())
                                .spawn(move || drop(old));
                        }
                        Err(e) => {
                            // The old descriptor now points at an unlinked
                            // file: appending there would lose writes.
                            let mut old = old;
                            let why = format!(
                                "cannot open the rewritten append only file {}: {}",
                                path.display(),
                                crate::persist::writer::error_text(&e)
                            );
                            old.poison(why.clone());
                            self.aof = Some(old);
                            line = format!("Background AOF rewrite: {why}; writes are refused");
                        }
                    }
                }
                Some(line)
            }
        }
    }

    /// The log line of a failed rewrite; an AOF switched on at runtime
    /// still waiting for its first file schedules another attempt.
    fn rewrite_failed(&mut self, cause: &str) -> String {
        if self.aof_waiting_for_rewrite() {
            self.rewrite.scheduled = true;
        }
        format!("Background AOF rewrite failed: {cause}")
    }

    /// Redis's automatic trigger: the AOF is above `auto-aof-rewrite-min-size`
    /// and grew by `auto-aof-rewrite-percentage` since the last rewrite.
    fn auto_rewrite_due(&self) -> bool {
        let (Some(aof), percentage) = (&self.aof, self.config.auto_aof_rewrite_percentage) else {
            return false;
        };
        if percentage == 0 {
            return false;
        }
        let status = aof.status();
        let base = status.base_size.max(1);
        status.current_size > self.config.auto_aof_rewrite_min_size
            && status.current_size.saturating_sub(base) * 100 / base >= u64::from(percentage)
    }

    /// Advances a running BGSAVE or AOF rewrite for about `budget` (and
    /// starts one when a save point, BGSAVE SCHEDULE, a scheduled rewrite
    /// or the automatic rewrite asks for it). Returns a log line when one
    /// started or ended.
    pub(crate) fn background_step(
        &mut self,
        budget: std::time::Duration,
        now_ms: i64,
    ) -> Option<String> {
        self.keyspace
            .set_capture_key_delay(self.config.rdb_key_save_delay);
        let suppress = self.config.no_appendfsync_on_rewrite && self.background_busy();
        if let Some(aof) = self.aof.as_mut() {
            aof.set_fsync_suppressed(suppress);
        }
        // Waiting replicas go before scheduled saves and rewrites (they
        // time out; save points do not).
        if self.repl_sync_step(budget, now_ms) {
            return None;
        }
        if self.rewrite.in_progress() {
            return self.rewrite_step(budget, now_ms);
        }
        if !self.save.in_progress() {
            let wanted = self.rewrite.scheduled || self.auto_rewrite_due();
            if wanted && self.rewrite.auto_allowed(now_ms) {
                let automatic = !self.rewrite.scheduled;
                return Some(match self.start_rewrite(now_ms) {
                    Ok(()) if automatic => {
                        "Starting automatic rewriting of AOF on growth".to_string()
                    }
                    Ok(()) => "Background append only file rewriting started".to_string(),
                    Err(e) => format!("Can't rewrite append only file in background: {e}"),
                });
            }
            if let Some(minutes) = self.rewrite.take_backoff_notice() {
                return Some(format!(
                    "Background AOF rewrite has repeatedly failed and triggered the limit, will retry in {minutes} minutes"
                ));
            }
        }
        if !self.save.in_progress() {
            if self.save.scheduled || self.save_point_due(now_ms) {
                self.save.scheduled = false;
                let changes = self.dirty;
                return Some(match self.start_bgsave(now_ms) {
                    Ok(()) => {
                        format!("{changes} changes since the last save: background saving started")
                    }
                    Err(e) => format!("Can't save in background: {e}"),
                });
            }
            return None;
        }
        match self.save.step(&mut self.keyspace, budget, now_ms)? {
            Finished::Saved {
                keys,
                bytes,
                dirty_at_start,
            } => {
                self.dirty = self.dirty.saturating_sub(dirty_at_start);
                Some(format!(
                    "Background saving terminated with success ({keys} keys, {bytes} bytes)"
                ))
            }
            Finished::Failed(cause) => Some(format!("Background saving error: {cause}")),
        }
    }

    /// Redis's serverCron rule: a save point is due when it has at least
    /// its changes, its seconds passed since the last save, and the last
    /// attempt succeeded or was at least 5 s ago.
    fn save_point_due(&self, now_ms: i64) -> bool {
        let since_save_s = (now_ms - self.save.last_save_ms) / 1000;
        let retry_ok = self.save.last_bgsave_ok
            || now_ms - self.save.last_try_ms > crate::persist::saver::RETRY_DELAY_MS;
        retry_ok
            && self
                .config
                .save
                .iter()
                .any(|point| self.dirty >= point.changes && since_save_s > point.seconds as i64)
    }

    /// Switches the append-only file off at runtime (CONFIG SET appendonly
    /// no): what was logged is fsynced, the file is closed and the data
    /// directory released.
    pub(crate) fn stop_aof(&mut self) -> Result<(), String> {
        // A rewrite of a file no longer written would be stale at once.
        self.rewrite.abort(&mut self.keyspace);
        self.rewrite.scheduled = false;
        if self.aof_waiting_for_rewrite() {
            // Nothing durable was promised yet: drop the temporary log.
            if let Some(aof) = self.aof.take() {
                let path = aof.path().to_path_buf();
                drop(aof);
                let _ = self.io.remove(&path);
            }
        }
        if let Some(mut aof) = self.aof.take() {
            let synced = aof.flush(now_ms()).and_then(|()| aof.sync_now());
            if let Err(e) = synced {
                self.aof = Some(aof);
                return Err(format!(
                    "cannot flush the append only file before closing it: {e:?}"
                ));
            }
        }
        self.config.appendonly = false;
        self.dir_lock = None;
        Ok(())
    }
}
