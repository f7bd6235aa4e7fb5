//! [`Engine`]: the keyspace and its commands, executed one at a time.
//!
//! # Threading contract
//!
//! An `Engine` is `Send` but is used through `&mut self`: commands execute
//! one at a time, in the order the caller submits them, exactly as Redis's
//! single command thread does. A multi-threaded host shares it behind a
//! `Mutex`. The engine starts no threads of its own; background work
//! (active expiry) runs in [`Engine::cron`], which the server calls `hz`
//! times a second and which [`Engine::execute`] also runs opportunistically
//! when it is due, so an embedded engine expires keys without a timer.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::{SystemTime, UNIX_EPOCH};

use crate::command::{
    self, flags, BlockKind, BlockState, CommandSpec, Ctx, Effect, Host, NullHost, Session,
};
use crate::config::{CommandName, Config};
use crate::keyspace::Keyspace;
use crate::persist::aof::{self, LoadReport};
use crate::persist::io::{Io, RealIo};
use crate::persist::lock::DirLock;
use crate::persist::rewriter::{self, Preamble, RewriteState};
use crate::persist::saver::{Finished, SaveState};
use crate::persist::writer::{AofStatus, AofWriter, FlushError};
use crate::rand::Rng;
use crate::reply::Reply;
use crate::types::{Blob, Value};

/// Counters reported by INFO stats.
#[derive(Debug, Clone, Default)]
pub struct Stats {
    /// Commands executed.
    pub commands_processed: u64,
    /// Keys removed because their TTL passed.
    pub expired_keys: u64,
    /// Successful key lookups.
    pub keyspace_hits: u64,
    /// Failed key lookups.
    pub keyspace_misses: u64,
    /// Connections accepted (server).
    pub connections_received: u64,
    /// Connections refused by `maxclients` (server).
    pub rejected_connections: u64,
    /// Unix ms when the counters were last reset.
    pub reset_ms: i64,
    /// Bytes read from clients (server).
    pub net_input_bytes: u64,
    /// Bytes written to clients (server).
    pub net_output_bytes: u64,
    /// Socket reads (server).
    pub reads_processed: u64,
    /// Socket writes (server).
    pub writes_processed: u64,
}

/// The engine's state, reachable by commands through [`Ctx::core`].
pub struct Core {
    /// The databases.
    pub keyspace: Keyspace,
    /// Configuration in force.
    pub config: Config,
    /// Statistics.
    pub stats: Stats,
    /// Random source for RANDOMKEY, SPOP, sampling.
    pub rng: Rng,
    /// Effects logged and not yet taken by the persistence layer.
    pub effects: Vec<Effect>,
    /// Changes since the last save (`rdb_changes_since_last_save`).
    pub dirty: u64,
    /// Unix ms when the engine started.
    pub start_ms: i64,
    /// True while the AOF is being replayed: no lazy expiry, nothing logged.
    pub loading: bool,
    /// The append-only file, when `appendonly yes`.
    pub aof: Option<AofWriter>,
    /// What loading the AOF found at startup.
    pub aof_load: Option<LoadReport>,
    /// Blocked clients, WATCHed keys and Pub/Sub subscriptions.
    pub clients: crate::command::clients::Clients,
    /// Snapshot (SAVE/BGSAVE) status and the BGSAVE in progress.
    pub save: SaveState,
    /// AOF rewrite status and the rewrite in progress.
    pub rewrite: RewriteState,
    /// The Lua state and script cache, created by the first script
    /// command (taken out while a script runs).
    pub scripting: Option<Box<crate::script::Scripting>>,
    /// The file-system layer every persistence file goes through.
    io: Arc<dyn Io>,
    /// Held while the engine uses the data directory.
    dir_lock: Option<DirLock>,
    next_session_id: u64,
    last_cron_ms: i64,
}

impl Core {
    /// The RDB value encoder the configuration asks for (`rdbcompression`,
    /// `list-max-listpack-size`): SAVE with `snapshot-format rdb`, an RDB
    /// AOF preamble and DUMP use it.
    pub fn rdb_encoder(&self) -> crate::rdb::writer::Encoder {
        crate::rdb::writer::Encoder {
            compress: self.config.rdbcompression,
            list_max_listpack_size: self.config.limits.list_max_listpack_size,
        }
    }

    /// What SAVE and BGSAVE write (`snapshot-format`, `rdbchecksum`).
    pub fn save_format(&self) -> crate::persist::saver::Format {
        match self.config.snapshot_format {
            crate::config::SnapshotFormat::Native => crate::persist::saver::Format::Native,
            crate::config::SnapshotFormat::Rdb => crate::persist::saver::Format::Rdb {
                encoder: self.rdb_encoder(),
                checksum: self.config.rdbchecksum,
            },
        }
    }

    /// The file SAVE and BGSAVE write: `dbfilename`, except that with
    /// `snapshot-format rdb` and the default `dump.hoz` it is `dump.rdb`.
    pub fn snapshot_file_name(&self) -> String {
        match self.config.snapshot_format {
            crate::config::SnapshotFormat::Rdb if self.config.dbfilename == "dump.hoz" => {
                "dump.rdb".into()
            }
            _ => self.config.dbfilename.clone(),
        }
    }

    /// A new client session (a fresh id; authenticated unless a password
    /// is required).
    pub fn new_session(&mut self) -> Session {
        let id = self.next_session_id;
        self.next_session_id += 1;
        let authenticated = self.config.requirepass.is_none();
        Session::new(id, authenticated, now_ms())
    }

    /// INFO persistence figures of the AOF, when enabled.
    pub fn aof_status(&self) -> Option<AofStatus> {
        self.aof.as_ref().map(AofWriter::status)
    }

    /// The data directory, locked for this engine, before a file is
    /// written there (SAVE, BGSAVE, a rewrite, the AOF switched on). An
    /// empty `dir` ([`Config::in_memory`]) means there is none.
    fn data_dir(&mut self) -> Result<PathBuf, String> {
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
    pub fn start_aof(&mut self, now_ms: i64) -> Result<(), String> {
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
        if self.save.in_progress() {
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
    pub fn aof_waiting_for_rewrite(&self) -> bool {
        self.aof
            .as_ref()
            .is_some_and(|a| a.path() != self.config.dir.join(&self.config.appendfilename))
    }

    /// Writes the current dataset as a new `appendonly.aof` (temporary
    /// file, fsync, rename, directory fsync), so that the file alone
    /// rebuilds the keyspace.
    fn write_initial_aof(&mut self, now_ms: i64) -> Result<(), String> {
        let dir = self.config.dir.clone();
        let path = dir.join(&self.config.appendfilename);
        let temp = dir.join(format!("temp-appendonly-{}.aof", std::process::id()));
        let written = (|| -> std::io::Result<()> {
            let mut file = self.io.open_append(&temp)?;
            file.set_len(0)?;
            crate::persist::rewrite::write_keyspace(&self.keyspace, now_ms, &mut |chunk| {
                let mut done = 0;
                while done < chunk.len() {
                    match file.write(&chunk[done..])? {
                        0 => return Err(std::io::ErrorKind::WriteZero.into()),
                        n => done += n,
                    }
                }
                Ok(())
            })?;
            file.syncer()?.sync_data()
        })();
        if let Err(e) = written {
            let _ = self.io.remove(&temp);
            return Err(format!(
                "writing the initial append only file: {}",
                crate::persist::writer::error_text(&e)
            ));
        }
        // A failed directory fsync refuses the start like any other error:
        // the complete file is then in place, and the next start loads it.
        crate::persist::snapshot::commit(self.io.as_ref(), &temp, &path)
            .map_err(|e| format!("writing the initial append only file: {e}"))
    }

    /// SAVE: writes `dump.hoz` now, on this thread (a running BGSAVE is
    /// stopped first, as a synchronous save supersedes it).
    pub fn save_now(&mut self, now_ms: i64) -> Result<(), String> {
        self.save.abort(&mut self.keyspace);
        let dir = self.data_dir()?;
        let file_name = self.snapshot_file_name();
        let saved = match self.save_format() {
            crate::persist::saver::Format::Native => crate::persist::snapshot::save_keyspace(
                &self.keyspace,
                now_ms,
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
                    encoder,
                    checksum,
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
    pub fn start_bgsave(&mut self, now_ms: i64) -> Result<(), String> {
        if self.save.in_progress() {
            return Err("Background save already in progress".into());
        }
        let dir = self.data_dir()?;
        let io = Arc::clone(&self.io);
        let format = self.save_format();
        let file_name = self.snapshot_file_name();
        self.save.start(
            &mut self.keyspace,
            io,
            &dir,
            &file_name,
            format,
            self.dirty,
            now_ms,
        );
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
    pub fn start_rewrite(&mut self, now_ms: i64) -> Result<(), String> {
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
        self.rewrite.start(
            &mut self.keyspace,
            Arc::clone(&self.io),
            &old_path,
            &target,
            old_len,
            preamble,
            self.config.aof_rewrite_incremental_fsync,
            now_ms,
        )
    }

    /// True while a BGSAVE or an AOF rewrite runs (the host should call
    /// [`Engine::background_step`] without sleeping between turns).
    pub fn background_busy(&self) -> bool {
        self.save.in_progress() || self.rewrite.in_progress()
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
    pub fn background_step(&mut self, budget: std::time::Duration, now_ms: i64) -> Option<String> {
        let suppress = self.config.no_appendfsync_on_rewrite && self.background_busy();
        if let Some(aof) = self.aof.as_mut() {
            aof.set_fsync_suppressed(suppress);
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
    pub fn stop_aof(&mut self) -> Result<(), String> {
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

    /// The MISCONF error writes get while the AOF cannot be written.
    pub fn write_refusal(&self) -> Option<String> {
        if self.config.stop_writes_on_bgsave_error
            && !self.config.save.is_empty()
            && !self.save.last_bgsave_ok
        {
            return Some(BGSAVE_ERROR.to_string());
        }
        self.aof.as_ref().and_then(AofWriter::refusal)
    }

    /// Called for every modified key: invalidates WATCHes on it and wakes
    /// clients blocked on it.
    pub fn signal_modified(&mut self, db: usize, key: &[u8]) {
        let keyspace = &self.keyspace;
        self.clients
            .key_touched(db, key, || keyspace.db(db).get(key).is_some());
    }

    /// Active expiry: samples keys with a TTL in every database and removes
    /// expired ones, like Redis's `activeExpireCycle` (20 keys a sample,
    /// repeated while more than a quarter were expired, bounded by a time
    /// budget of 25 ms so a cycle never stalls clients for long).
    pub fn active_expire_cycle(&mut self, now_ms: i64) -> usize {
        const SAMPLE: usize = 20;
        const BUDGET_US: u128 = 25_000;
        let started = std::time::Instant::now();
        let mut removed_total = 0;
        for db in 0..self.keyspace.db_count() {
            loop {
                let database = self.keyspace.db(db);
                if database.expires_len() == 0 {
                    break;
                }
                let expired = database.sample_expired(&mut self.rng, SAMPLE, now_ms);
                for key in &expired {
                    self.keyspace.db_mut(db).remove(key);
                    self.stats.expired_keys += 1;
                    self.effects.push(Effect {
                        db,
                        argv: vec![b"DEL".to_vec(), key.to_vec()],
                    });
                    self.signal_modified(db, key);
                }
                removed_total += expired.len();
                if expired.len() * 4 <= SAMPLE || started.elapsed().as_micros() > BUDGET_US {
                    break;
                }
            }
            if started.elapsed().as_micros() > BUDGET_US {
                break;
            }
        }
        removed_total
    }
}

/// Redis's refusal while `stop-writes-on-bgsave-error` applies.
const BGSAVE_ERROR: &str = "MISCONF Redis is configured to save RDB snapshots, but it's currently unable to persist to disk. Commands that may modify the data set are disabled, because this instance is configured to report errors during writes if RDB snapshotting fails (stop-writes-on-bgsave-error option). Please check the Redis logs for details about the RDB error.";

/// The error prefix an embedded engine's write gets when it was applied in
/// memory but its logged effect could not be made durable (see
/// [`Engine::execute`]). MISCONF, in contrast, always means "refused, not
/// applied".
pub const NOT_DURABLE: &str = "NOTDURABLE";

/// The reply a write gets when it was applied but its logged effect could
/// not be written (embedded engine: each `execute` writes its own batch).
fn not_durable_reply(e: FlushError) -> Reply {
    Reply::error(match e {
        FlushError::Write(cause) => format!(
            "{NOT_DURABLE} applied in memory, but writing it to the AOF failed ({cause}); it is kept \
             and written by a later retry (cron): do not repeat the command"
        ),
        FlushError::Poisoned(cause) => format!(
            "{NOT_DURABLE} applied in memory, but the AOF's fsync failed ({cause}): it may or may \
             not survive a restart, and writes are refused until then"
        ),
    })
}

/// The current time in Unix milliseconds.
pub fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as i64)
        .unwrap_or(0)
}

/// An in-process keyspace engine. `Send`, so a host can move it to the
/// thread that runs it or share it behind a `Mutex` (checked at compile time).
pub struct Engine {
    core: Core,
    /// When true (the server), logged effects wait for [`Engine::flush_log`]
    /// at the end of the event-loop turn; otherwise each `execute` writes
    /// its own batch before returning.
    group_commit: bool,
    /// Log lines for the host to print (what loading found).
    notices: Vec<String>,
    /// Keep logged effects for [`Engine::take_effects`] when there is no
    /// AOF to consume them (tests, embedders that ship effects elsewhere).
    capture_effects: bool,
}

impl Config {
    /// A configuration with persistence off and no data directory (`dir`
    /// empty): the engine reads and writes no file at all, a pure
    /// in-memory cache. SAVE, BGSAVE and BGREWRITEAOF are refused until a
    /// `dir` is set. Everything else has its default.
    pub fn in_memory() -> Config {
        Config {
            appendonly: false,
            save: Vec::new(),
            dir: PathBuf::new(),
            ..Config::default()
        }
    }
}

impl Engine {
    /// Opens an engine with `config`. With `appendonly yes` it locks the
    /// data directory, replays `appendonly.aof` (verifying every batch) and
    /// appends to it from then on; with persistence off it touches no file.
    pub fn open(config: Config) -> Result<Engine, crate::Error> {
        Engine::open_with_io(config, Arc::new(RealIo))
    }

    /// [`Engine::open`] with an explicit I/O backend (tests inject faults).
    pub fn open_with_io(config: Config, io: Arc<dyn Io>) -> Result<Engine, crate::Error> {
        if config.databases == 0 {
            return Err(crate::Error::Config("databases must be at least 1".into()));
        }
        let now = now_ms();
        let mut engine = Engine {
            group_commit: false,
            notices: Vec::new(),
            capture_effects: true,
            core: Core {
                keyspace: Keyspace::new(config.databases),
                config,
                stats: Stats {
                    reset_ms: now,
                    ..Stats::default()
                },
                rng: Rng::new(),
                effects: Vec::new(),
                dirty: 0,
                start_ms: now,
                loading: false,
                aof: None,
                aof_load: None,
                clients: Default::default(),
                save: SaveState {
                    last_save_ms: now,
                    last_bgsave_ok: true,
                    last_bgsave_secs: -1,
                    ..SaveState::default()
                },
                rewrite: RewriteState::default(),
                scripting: None,
                io: Arc::clone(&io),
                dir_lock: None,
                next_session_id: 1,
                last_cron_ms: now,
            },
        };
        engine.open_files(io)?;
        Ok(engine)
    }

    /// The startup rule (docs/persistence.md, "Startup"): with `appendonly
    /// yes`, the AOF if it exists, else a Redis 7 multi-part AOF
    /// (`appendonlydir/`) to import; otherwise (and with `appendonly no`)
    /// the snapshot if one exists (the file SAVE writes, then `dump.hoz`,
    /// then a Redis `dump.rdb`; the format is told by its magic). With
    /// persistence configured (`appendonly yes` or save points) the
    /// directory is locked and `temp-*` files are removed first; without
    /// it nothing is written unless asked (SAVE, BGSAVE). With `appendonly
    /// yes` and no AOF yet, the initial AOF is written from what was loaded
    /// before any write is accepted. Every start logs what was loaded.
    fn open_files(&mut self, io: Arc<dyn Io>) -> Result<(), crate::Error> {
        let dir = self.core.config.dir.clone();
        let appendonly = self.core.config.appendonly;
        let persistent = appendonly || !self.core.config.save.is_empty();
        if dir.as_os_str().is_empty() {
            if persistent {
                return Err(crate::Error::Config(
                    "dir is empty: appendonly yes and save points need a data directory".into(),
                ));
            }
            self.notices.push(
                "No data directory (dir is empty): starting with 0 keys; no file is read or written"
                    .into(),
            );
            return Ok(());
        }
        if persistent {
            if io.is_real() {
                self.core.dir_lock = Some(DirLock::acquire(&dir)?);
            }
            self.remove_temp_files(io.as_ref(), &dir)?;
        }
        let aof_path = dir.join(&self.core.config.appendfilename);
        let aof_present = appendonly && io.exists(&aof_path);
        let imported_aof = !aof_present && appendonly && self.import_redis_aof_dir(io.as_ref())?;
        if !aof_present && !imported_aof {
            match self.snapshot_to_load(io.as_ref()) {
                Some(path) => self.load_snapshot(io.as_ref(), &path)?,
                None => self.notices.push(format!(
                    "No data to load in {} (no {}{}): starting with 0 keys",
                    dir.display(),
                    if appendonly {
                        format!("{}, appendonlydir/, ", self.core.config.appendfilename)
                    } else {
                        String::new()
                    },
                    self.snapshot_candidates().join(", ")
                )),
            }
            if !appendonly {
                self.warn_unread_aofs(io.as_ref(), &dir);
            }
        }
        if !appendonly {
            return Ok(());
        }
        if !aof_present && self.core.keyspace.total_keys() > 0 {
            self.core
                .write_initial_aof(now_ms())
                .map_err(crate::Error::Config)?;
        }
        // The initial AOF holds what is already loaded: it is opened for
        // appending, never replayed on top of it.
        self.open_aof(io, aof_present)
    }

    /// The snapshot names looked for, in order: the file SAVE writes, the
    /// configured `dbfilename`, `dump.hoz`, `dump.rdb`.
    fn snapshot_candidates(&self) -> Vec<String> {
        let mut names = vec![
            self.core.snapshot_file_name(),
            self.core.config.dbfilename.clone(),
            "dump.hoz".to_string(),
            "dump.rdb".to_string(),
        ];
        let mut seen = std::collections::HashSet::new();
        names.retain(|n| seen.insert(n.clone()));
        names
    }

    /// The first snapshot candidate present in the data directory.
    fn snapshot_to_load(&self, io: &dyn Io) -> Option<PathBuf> {
        self.snapshot_candidates()
            .iter()
            .map(|name| self.core.config.dir.join(name))
            .find(|path| io.exists(path))
    }

    /// With `appendonly no`, an AOF in the directory is not read (Redis's
    /// rule): say so, so that nobody wonders where its data went.
    fn warn_unread_aofs(&mut self, io: &dyn Io, dir: &std::path::Path) {
        let name = &self.core.config.appendfilename;
        for path in [
            dir.join(name),
            dir.join("appendonlydir").join(format!("{name}.manifest")),
        ] {
            if io.exists(&path) {
                self.notices.push(format!(
                    "!!! Warning: {} was not loaded because appendonly is no (Redis's rule: the \
                     snapshot is read, the AOF only with appendonly yes); start with appendonly yes \
                     to load it",
                    path.display()
                ));
            }
        }
    }

    /// Loads `dump.hoz` (every checksum verified, blocks decoded in
    /// parallel) or an RDB file. Damage refuses the start with the offset
    /// and what to do.
    fn load_snapshot(&mut self, io: &dyn Io, path: &std::path::Path) -> Result<(), crate::Error> {
        let started = std::time::Instant::now();
        let data = io.map(path).map_err(|source| crate::Error::Io {
            context: format!("reading {}", path.display()),
            source,
        })?;
        if crate::rdb::reader::is_rdb(&data) {
            let summary = self.load_rdb(&data, path, Some(now_ms()))?;
            if summary.len != data.len() {
                return Err(crate::Error::Corrupt(format!(
                    "cannot load the RDB file {}: {} bytes follow its checksum at offset {}. Nothing was loaded and the file was not changed.",
                    path.display(),
                    data.len() - summary.len,
                    summary.len
                )));
            }
            self.core.save.last_load_keys = summary.keys;
            self.core.save.last_load_expired = summary.expired_skipped;
            self.notices.push(format!(
                "DB loaded from disk: {:.3} seconds ({} keys from the RDB file {}, version {}{})",
                started.elapsed().as_secs_f64(),
                summary.keys,
                path.display(),
                summary.version,
                if summary.valkey { ", Valkey" } else { "" }
            ));
            return Ok(());
        }
        let threads = std::thread::available_parallelism().map_or(1, |n| n.get());
        let limits = self.core.config.limits;
        let (summary, expired) = crate::persist::snapshot::load_into(
            &data,
            &mut self.core.keyspace,
            limits,
            threads,
            now_ms(),
        )
        .map_err(|e| {
            let at = e
                .offset()
                .map_or_else(String::new, |n| format!(" (damage at offset {n})"));
            crate::Error::Corrupt(format!(
                "cannot load the snapshot {}{at}: {e}. Nothing was loaded and the file was not changed.",
                path.display()
            ))
        })?;
        let loaded = summary.stats.keys.saturating_sub(expired);
        self.core.save.last_load_keys = loaded;
        self.core.save.last_load_expired = expired;
        self.core.save.last_save_ms = summary.created_ms;
        self.notices.push(format!(
            "DB loaded from disk: {:.3} seconds ({loaded} keys from {})",
            started.elapsed().as_secs_f64(),
            path.display()
        ));
        Ok(())
    }

    /// Reads an RDB image (a file, an AOF preamble, a Redis AOF base) into
    /// the keyspace; keys expired before `skip_expired_before_ms` are left
    /// out. Anything that cannot be loaded refuses the start; what was
    /// skipped is logged.
    fn load_rdb(
        &mut self,
        data: &[u8],
        path: &std::path::Path,
        skip_expired_before_ms: Option<i64>,
    ) -> Result<crate::rdb::reader::Summary, crate::Error> {
        let options = crate::rdb::reader::Options {
            limits: self.core.config.limits,
            databases: self.core.keyspace.db_count(),
            skip_expired_before_ms,
            now_ms: now_ms(),
        };
        let keyspace = std::cell::RefCell::new(&mut self.core.keyspace);
        let summary = crate::rdb::reader::load_with_hints(
            data,
            &options,
            &mut |k| {
                keyspace
                    .borrow_mut()
                    .db_mut(k.db)
                    .insert_loaded(k.key, k.value, k.expire_ms)
                    .map_err(|_| "the key appears twice in the file".to_string())
            },
            &mut |db, keys, expiring| {
                let mut keyspace = keyspace.borrow_mut();
                let db = keyspace.db_mut(db);
                if db.is_empty() {
                    db.reserve(keys as usize, expiring as usize);
                }
            },
        )
        .map_err(|e| {
            crate::Error::Corrupt(format!(
                "cannot load the RDB file {}: {e}. Nothing was loaded and the file was not changed. \
                 Run `hozon-repair check {}` to see every problem, then `hozon-repair salvage {}` \
                 to see what a repair keeps (add --apply to write it).",
                path.display(),
                path.display(),
                path.display()
            ))
        })?;
        if !summary.functions.is_empty() {
            self.notices.push(format!(
                "!!! Warning: {} holds {} function libraries (FUNCTION LOAD); hozon has no Redis Functions, so they were not loaded",
                path.display(),
                summary.functions.len()
            ));
        }
        if summary.empty_skipped > 0 {
            // Redis 7.0 skips them too, with a log line (`hozon-inspect
            // info` reports them as empty_keys_skipped).
            self.notices.push(format!(
                "{} empty collections in {} were skipped (an empty key cannot exist)",
                summary.empty_skipped,
                path.display()
            ));
        }
        if !summary.modules_skipped.is_empty() {
            self.notices.push(format!(
                "!!! Warning: {} holds module data that was skipped ({}): hozon has no modules",
                path.display(),
                summary.modules_skipped.join(", ")
            ));
        }
        if summary.field_ttls_dropped > 0 {
            self.notices.push(format!(
                "!!! Warning: {} hash fields in {} had a TTL (HEXPIRE); hozon has no field expiry, so they were loaded without it",
                summary.field_ttls_dropped,
                path.display()
            ));
        }
        Ok(summary)
    }

    /// Imports a Redis 7 multi-part AOF (`appendonlydir/<appendfilename>.manifest`,
    /// a base `.rdb` or `.aof` and `incr` files, in manifest order) when
    /// the directory has one. Returns whether it did. The Redis files are
    /// only read; hozon then writes its own AOF.
    fn import_redis_aof_dir(&mut self, io: &dyn Io) -> Result<bool, crate::Error> {
        let aof_dir = self.core.config.dir.join("appendonlydir");
        let manifest_path = aof_dir.join(format!("{}.manifest", self.core.config.appendfilename));
        if !io.exists(&manifest_path) {
            return Ok(false);
        }
        let started = std::time::Instant::now();
        let text = io
            .read_all(&manifest_path)
            .map_err(|source| crate::Error::Io {
                context: format!("reading {}", manifest_path.display()),
                source,
            })?;
        let manifest = crate::persist::aof::parse_redis_manifest(&text).map_err(|e| {
            crate::Error::Corrupt(format!(
                "cannot import the Redis AOF manifest {}: {e}",
                manifest_path.display()
            ))
        })?;
        let count = manifest.len();
        for (i, (name, is_base)) in manifest.into_iter().enumerate() {
            let path = aof_dir.join(&name);
            let data = io.map(&path).map_err(|source| crate::Error::Io {
                context: format!(
                    "reading {} (listed in {})",
                    path.display(),
                    manifest_path.display()
                ),
                source,
            })?;
            if crate::rdb::reader::is_rdb(&data) && !is_base {
                return Err(crate::Error::Corrupt(format!(
                    "{} is an incr file but holds an RDB image",
                    path.display()
                )));
            }
            let report = self.load_aof_image(&data, &path, false)?;
            if let Some(torn) = &report.torn {
                let facts = format!(
                    "{} ends with a torn write at offset {} ({}): {} bytes and {} complete commands after it",
                    path.display(),
                    torn.valid_len,
                    torn.reason,
                    torn.dropped_bytes,
                    torn.dropped_commands
                );
                if i + 1 != count || !self.core.config.aof_load_truncated {
                    return Err(crate::Error::Corrupt(format!(
                        "cannot import the Redis AOF: {facts}"
                    )));
                }
                self.notices.push(format!(
                    "!!! Warning: {facts}; they were not imported (the Redis file was not changed)"
                ));
            }
        }
        self.notices.push(format!(
            "Imported the Redis multi-part AOF {} ({} files, {} keys) in {:.3} seconds; hozon writes its own {} from now on",
            aof_dir.display(),
            count,
            self.core.keyspace.total_keys(),
            started.elapsed().as_secs_f64(),
            self.core.config.appendfilename
        ));
        Ok(true)
    }

    /// Opens the AOF for appending, first replaying it when `replay`.
    fn open_aof(&mut self, io: Arc<dyn Io>, replay: bool) -> Result<(), crate::Error> {
        let dir = self.core.config.dir.clone();
        let path = dir.join(&self.core.config.appendfilename);
        if replay && io.exists(&path) {
            let started = std::time::Instant::now();
            let data = io.map(&path).map_err(|source| crate::Error::Io {
                context: format!("reading {}", path.display()),
                source,
            })?;
            let report = self.load_aof_image(&data, &path, false)?;
            // Unmap before the file is truncated or appended to.
            drop(data);
            if let Some(torn) = &report.torn {
                let facts = format!(
                    "the AOF {} ends with a torn write at offset {} ({}): {} bytes and {} complete commands after it",
                    path.display(),
                    torn.valid_len,
                    torn.reason,
                    torn.dropped_bytes,
                    torn.dropped_commands
                );
                if !self.core.config.aof_load_truncated {
                    return Err(crate::Error::Corrupt(format!(
                        "{facts}; not loading because aof-load-truncated is no. \
                         Run `hozon-repair check {}` to see every problem, then `hozon-repair fix {} --apply` to cut \
                         the torn tail, or set aof-load-truncated yes to drop it on load",
                        path.display(),
                        path.display()
                    )));
                }
                io.truncate(&path, torn.valid_len)
                    .map_err(|source| crate::Error::Io {
                        context: format!("truncating {} to {}", path.display(), torn.valid_len),
                        source,
                    })?;
                self.notices.push(format!(
                    "!!! Warning: {facts}; truncated the file to {} bytes and dropped them",
                    torn.valid_len
                ));
            }
            self.notices.push(format!(
                "DB loaded from append only file: {:.3} seconds ({} keys from {}: {} commands in {} verified batches)",
                started.elapsed().as_secs_f64(),
                self.core.keyspace.total_keys(),
                path.display(),
                report.commands,
                report.batches
            ));
            self.core.aof_load = Some(report);
        }
        let checksummed = self.core.aof_load.as_ref().is_none_or(|r| r.checksummed);
        let writer = AofWriter::open(
            Arc::clone(&io),
            &path,
            self.core.config.appendfsync,
            checksummed,
        )
        .map_err(|source| crate::Error::Io {
            context: format!("opening the append only file {}", path.display()),
            source,
        })?;
        self.core.aof = Some(writer);
        Ok(())
    }

    /// Reads an AOF image into the keyspace without touching any file: a
    /// log, or a log after the snapshot image a rewrite starts it with (a
    /// dump.hoz, or an RDB: ours with `aof-preamble rdb`, or Redis's base).
    /// The server uses it at startup; the inspector uses it (on an
    /// in-memory engine) to see the data an AOF holds. Keys of a dump.hoz
    /// preamble whose expiry has passed are left out unless
    /// `keep_expired`; an RDB preamble's are always kept, as Redis does.
    /// A torn tail is reported (`torn`, offsets from the start of `data`),
    /// not removed. Damage anywhere else is an error naming `path`.
    pub fn load_aof_image(
        &mut self,
        data: &[u8],
        path: &std::path::Path,
        keep_expired: bool,
    ) -> Result<LoadReport, crate::Error> {
        let preamble_len = if data.starts_with(&crate::persist::snapshot::MAGIC) {
            let now = if keep_expired { i64::MIN } else { now_ms() };
            self.load_aof_preamble(data, path, now)?
        } else if crate::rdb::reader::is_rdb(data) {
            self.load_rdb(data, path, None)?.len
        } else {
            0
        };
        let mut report = self.replay_aof(&data[preamble_len..], path, preamble_len)?;
        report.valid_len += preamble_len as u64;
        if let Some(torn) = report.torn.as_mut() {
            torn.valid_len += preamble_len as u64;
        }
        Ok(report)
    }

    /// Loads the snapshot image a rewritten AOF starts with, leaving out
    /// keys expired before `now_ms`; returns its length (where the log part
    /// starts). Damage there is corruption: the image was fsynced before
    /// the file got its name.
    fn load_aof_preamble(
        &mut self,
        data: &[u8],
        path: &std::path::Path,
        now_ms: i64,
    ) -> Result<usize, crate::Error> {
        use crate::persist::snapshot;
        let corrupt = |e: snapshot::SnapshotError| {
            crate::Error::Corrupt(format!(
                "Bad file format reading the append only file {}: its snapshot preamble is damaged: {e}. \
                 Nothing was loaded and the file was not changed. Run `hozon-repair check {}` to see every \
                 problem, then `hozon-repair salvage {}` to see what is kept and add --apply to write it.",
                path.display(),
                path.display(),
                path.display()
            ))
        };
        let len = snapshot::image_len(data).map_err(corrupt)?;
        let threads = std::thread::available_parallelism().map_or(1, |n| n.get());
        let (summary, expired) = snapshot::load_into(
            &data[..len],
            &mut self.core.keyspace,
            self.core.config.limits,
            threads,
            now_ms,
        )
        .map_err(corrupt)?;
        self.notices.push(format!(
            "Reading the snapshot preamble of the append only file: {} keys ({} expired, skipped)",
            summary.stats.keys.saturating_sub(expired),
            expired
        ));
        Ok(len)
    }

    fn remove_temp_files(
        &mut self,
        io: &dyn Io,
        dir: &std::path::Path,
    ) -> Result<(), crate::Error> {
        let names = match io.list_dir(dir) {
            Ok(n) => n,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
            Err(source) => {
                return Err(crate::Error::Io {
                    context: format!("listing {}", dir.display()),
                    source,
                })
            }
        };
        for name in names.iter().filter(|n| n.starts_with("temp-")) {
            let path: PathBuf = dir.join(name);
            io.remove(&path).map_err(|source| crate::Error::Io {
                context: format!("removing stale temporary file {}", path.display()),
                source,
            })?;
            self.notices
                .push(format!("Removed stale temporary file {}", path.display()));
        }
        Ok(())
    }

    /// Replays an AOF image into the keyspace.
    fn replay_aof(
        &mut self,
        data: &[u8],
        path: &std::path::Path,
        base_offset: usize,
    ) -> Result<LoadReport, crate::Error> {
        let mut session = self.new_session();
        session.authenticated = true;
        self.core.loading = true;
        let result = aof::replay(data, &mut |argv| {
            if command::lookup(argv[0]).is_none() {
                return Err(format!(
                    "unknown command '{}'",
                    String::from_utf8_lossy(argv[0])
                ));
            }
            let reply = self.execute(&mut session, argv);
            self.core.effects.clear();
            match reply {
                Reply::Error(e) => Err(format!(
                    "replaying '{}' failed: {e}",
                    String::from_utf8_lossy(argv[0])
                )),
                _ => Ok(()),
            }
        });
        self.core.loading = false;
        result.map_err(|c| {
            crate::Error::Corrupt(format!(
                "Bad file format reading the append only file {} at offset {}: {}. Nothing was loaded and the file \
                 was not changed. Run `hozon-repair check {}` to see every problem, then `hozon-repair salvage {}` \
                 to see what is kept and add --apply to write it.",
                path.display(),
                c.offset + base_offset as u64,
                c.reason,
                path.display(),
                path.display()
            ))
        })
    }

    /// Log lines describing what opening found (for the host to print).
    pub fn take_notices(&mut self) -> Vec<String> {
        std::mem::take(&mut self.notices)
    }

    /// Makes logged effects wait for [`Engine::flush_log`] (the server's
    /// group commit) instead of being written by each `execute`.
    pub fn set_group_commit(&mut self, on: bool) {
        self.group_commit = on;
    }

    /// Writes the pending batch of logged effects with one write(2) and
    /// applies the fsync policy. Replies to the commands of the batch may
    /// be released only after this returns Ok.
    pub fn flush_log(&mut self) -> Result<(), FlushError> {
        match self.core.aof.as_mut() {
            Some(aof) if aof.has_pending() => aof.flush(now_ms()),
            _ => Ok(()),
        }
    }

    /// Bytes of logged effects waiting in the current batch (a command
    /// that grew it has a reply that must wait for the batch).
    pub fn log_batch_bytes(&self) -> usize {
        self.core.aof.as_ref().map_or(0, AofWriter::batch_bytes)
    }

    /// A counter that grows whenever a command's effects are logged: a
    /// command whose execution grew it has a reply that must wait for its
    /// batch. (The batch's size cannot tell: a command that only flushes,
    /// like BGREWRITEAOF, shrinks it, or moves it aside when the write
    /// fails.)
    pub fn log_appended(&self) -> u64 {
        self.core.aof.as_ref().map_or(0, AofWriter::logged_count)
    }

    /// Why the AOF lost durability (an fsync failed), if it did: nothing
    /// logged but not yet acknowledged may be acknowledged any more.
    pub fn log_poisoned(&self) -> Option<String> {
        self.core
            .aof
            .as_ref()
            .and_then(|a| a.poisoned().map(str::to_string))
    }

    /// True when logged effects wait to be written.
    pub fn log_pending(&self) -> bool {
        self.core.aof.as_ref().is_some_and(AofWriter::has_pending)
    }

    /// Waits until everything logged so far is on stable storage (fsync),
    /// whatever the policy.
    pub fn sync(&mut self) -> Result<(), FlushError> {
        self.flush_log()?;
        match self.core.aof.as_mut() {
            Some(aof) => aof.sync_now(),
            None => Ok(()),
        }
    }

    /// A new client session (id, database 0, RESP2).
    pub fn new_session(&mut self) -> Session {
        self.core.new_session()
    }

    /// The configuration in force.
    pub fn config(&self) -> &Config {
        &self.core.config
    }

    /// The engine state (for the server and tools in this crate).
    pub fn core(&mut self) -> &mut Core {
        &mut self.core
    }

    /// Executes one command for `session` with no host (embedded use).
    ///
    /// With the AOF on, a write's batch is written (and fsynced under
    /// `appendfsync always`) before this returns. A write's error reply
    /// says whether it was applied:
    ///
    /// - `MISCONF …`: refused before it ran (the AOF cannot be written
    ///   now, or lost durability): nothing changed; repeat it once writes
    ///   are accepted again.
    /// - `NOTDURABLE …` ([`NOT_DURABLE`]): it ran and is visible in memory,
    ///   but its batch could not be made durable. After a failed write(2)
    ///   the batch is kept and written by a later retry (cron); after a
    ///   failed fsync it may or may not survive a restart. Do not repeat
    ///   it (that would apply it twice); [`Engine::sync`] tells when
    ///   everything logged is durable.
    pub fn execute(&mut self, session: &mut Session, argv: &[&[u8]]) -> Reply {
        self.execute_with_host(session, argv, &mut NullHost)
    }

    /// Executes one command for `session`, with `host` answering for the
    /// surrounding program (other clients, shutdown).
    ///
    /// When the command blocks (BLPOP on an empty list, …) `session.blocked`
    /// is set on return and the returned reply must not be sent: the reply
    /// comes later from [`Engine::serve_blocked`] or
    /// [`Engine::unblock`]. Pub/Sub messages for any session are queued
    /// for [`Engine::take_messages`].
    pub fn execute_with_host(
        &mut self,
        session: &mut Session,
        argv: &[&[u8]],
        host: &mut dyn Host,
    ) -> Reply {
        let now = now_ms();
        if !self.core.loading
            && now - self.core.last_cron_ms >= i64::from(1000 / self.core.config.hz.max(1))
        {
            self.cron_at(now);
        }
        // rename-command: the client's name for the command becomes its
        // real name, so everything after (errors, MULTI's queue, the AOF)
        // sees the real command. Replay uses real names already.
        let renamed: Vec<&[u8]>;
        let mut argv = argv;
        if !self.core.loading && !self.core.config.command_renames.is_empty() {
            if let Some(name) = argv.first() {
                match self.core.config.command_renames.resolve(name) {
                    CommandName::Unchanged => {}
                    CommandName::Renamed(real) => {
                        renamed = std::iter::once(real.as_bytes())
                            .chain(argv[1..].iter().copied())
                            .collect();
                        argv = &renamed;
                    }
                    CommandName::Removed => {
                        session.last_command = "NULL";
                        if let Some(multi) = session.multi.as_mut() {
                            multi.failed = true;
                        }
                        return command::unknown_command_error(argv);
                    }
                }
            }
        }
        let (top, spec) = match self.admit(session, argv) {
            Ok(specs) => specs,
            Err(reply) => {
                let is_exec = argv
                    .first()
                    .is_some_and(|name| name.eq_ignore_ascii_case(b"exec"));
                if is_exec {
                    // Redis's rejectCommand for EXEC: the transaction is
                    // discarded and the reason given under EXECABORT.
                    command::multi::discard_transaction(&mut self.core, session);
                    if let Reply::Error(text) = &reply {
                        let reason = text.strip_prefix("ERR ").unwrap_or(text);
                        return Reply::error(format!(
                            "EXECABORT Transaction discarded because of: {reason}"
                        ));
                    }
                }
                // An error while queueing aborts the transaction at EXEC.
                if let Some(multi) = session.multi.as_mut() {
                    multi.failed = true;
                }
                return reply;
            }
        };
        if let Some(multi) = session.multi.as_mut() {
            if !matches!(
                top.name,
                "exec" | "discard" | "multi" | "watch" | "quit" | "reset"
            ) {
                session.last_command = spec.name;
                multi.has_write |= spec.is_write();
                // Nothing is kept for a transaction that will not run.
                if !multi.failed && !self.core.clients.is_dirty(session.id) {
                    multi
                        .commands
                        .push(argv.iter().map(|a| a.to_vec()).collect());
                }
                return Reply::simple("QUEUED");
            }
        }
        session.last_command = spec.name;
        self.core.stats.commands_processed += 1;
        let effects_before = self.core.effects.len();
        let mut ctx = Ctx::new(&mut self.core, session, host, now);
        let reply = match (spec.handler)(&mut ctx, argv) {
            Ok(r) | Err(r) => r,
        };
        let dirty = ctx.dirty;
        let logged_custom = ctx.logged_custom;
        let block = ctx.block_request.take();
        let db = ctx.session.db;
        if let Some(request) = block {
            let state = BlockState {
                db,
                argv: request
                    .argv
                    .clone()
                    .unwrap_or_else(|| argv.iter().map(|a| a.to_vec()).collect()),
                request,
            };
            self.core.clients.add_blocked(session.id, &state);
            session.blocked = Some(Box::new(state));
        }
        if dirty > 0 {
            self.core.dirty += dirty;
            if !logged_custom {
                match self.core.aof.as_mut() {
                    // The common case: logged as received, nothing else
                    // logged by this command: encode straight into the batch.
                    Some(aof)
                        if !self.core.loading && self.core.effects.len() == effects_before =>
                    {
                        aof.push_command(db, argv);
                        if !self.group_commit {
                            if let Err(e) = aof.flush(now) {
                                return not_durable_reply(e);
                            }
                        }
                        return reply;
                    }
                    // No log and nobody collecting effects: nothing to build.
                    None if !self.capture_effects => {}
                    _ => self.core.effects.push(Effect {
                        db,
                        argv: argv.iter().map(|a| a.to_vec()).collect(),
                    }),
                }
            }
        }
        match self.log_unit(effects_before, now) {
            Ok(()) => reply,
            Err(refusal) => refusal,
        }
    }

    /// Redis's processCommand checks before a command runs or is queued:
    /// lookup and arity, authentication, the write refusal (MISCONF), the
    /// RESP2 subscribed context.
    fn admit(
        &mut self,
        session: &mut Session,
        argv: &[&[u8]],
    ) -> Result<(&'static CommandSpec, &'static CommandSpec), Reply> {
        let (top, spec) = command::resolve(argv).inspect_err(|_| {
            // Redis's lastcmd is the looked-up command: NULL when unknown.
            let known = argv
                .first()
                .and_then(|name| command::lookup(name))
                .is_some_and(|top| {
                    top.subcommands.is_empty()
                        || argv.get(1).is_some_and(|sub| top.subcommand(sub).is_some())
                });
            if !known {
                session.last_command = "NULL";
            }
        })?;
        if !session.authenticated
            && self.core.config.requirepass.is_some()
            && !spec.has(flags::NO_AUTH)
        {
            return Err(Reply::err("NOAUTH Authentication required."));
        }
        if !self.core.loading {
            let exec_writes =
                top.name == "exec" && session.multi.as_ref().is_some_and(|m| m.has_write);
            if spec.is_write() || top.name == "ping" || exec_writes {
                if let Some(refusal) = self.core.write_refusal() {
                    return Err(Reply::error(refusal));
                }
            }
        }
        if session.multi.is_some() && spec.has(flags::NO_MULTI) {
            return Err(Reply::err("ERR Command not allowed inside a transaction"));
        }
        if session.resp == 2
            && session.subscribed()
            && !matches!(
                top.name,
                "ping"
                    | "subscribe"
                    | "ssubscribe"
                    | "unsubscribe"
                    | "sunsubscribe"
                    | "psubscribe"
                    | "punsubscribe"
                    | "quit"
                    | "reset"
            )
        {
            return Err(Reply::error(format!(
                "ERR Can't execute '{}': only (P|S)SUBSCRIBE / (P|S)UNSUBSCRIBE / PING / QUIT / RESET are allowed in this context",
                command::full_name(top, spec)
            )));
        }
        Ok((top, spec))
    }

    /// Sends the effects logged since `effects_before` to the AOF as one
    /// atomic unit (and, without group commit, writes them). Err is the
    /// reply a write gets when its effect could not be logged.
    fn log_unit(&mut self, effects_before: usize, now: i64) -> Result<(), Reply> {
        debug_assert!(
            self.core.effects.len() >= effects_before,
            "a command never removes logged effects"
        );
        if self.core.loading {
            return Ok(());
        }
        if self.core.aof.is_none() && !self.capture_effects {
            self.core.effects.clear();
        }
        if let Some(aof) = self.core.aof.as_mut() {
            let logged = self.core.effects.len() > effects_before;
            if logged {
                aof.push_unit(&self.core.effects[effects_before..]);
                self.core.effects.truncate(effects_before);
            }
            // Only a command that logged something waits for the log; a
            // batch that failed earlier is retried by cron.
            if !self.group_commit && logged {
                if let Err(e) = aof.flush(now) {
                    // Applied in memory but not logged: not acknowledged.
                    return Err(not_durable_reply(e));
                }
            }
        }
        Ok(())
    }

    /// True when keys that blocked clients wait on received data: the host
    /// should call [`Engine::take_ready_keys`] and serve those clients.
    pub fn has_ready_keys(&self) -> bool {
        self.core.clients.has_ready()
    }

    /// The keys that became ready, in order, each with the ids of the
    /// sessions blocked on it (first come first): call
    /// [`Engine::serve_blocked`] for each, in that order.
    pub fn take_ready_keys(&mut self) -> Vec<(usize, Blob, Vec<u64>)> {
        let ready = self.core.clients.take_ready();
        ready
            .into_iter()
            .map(|(db, key)| {
                let waiting = self.core.clients.blocked_on(db, &key);
                (db, key, waiting)
            })
            .collect()
    }

    /// Runs `session`'s blocked command again because `key` in `db`
    /// received data. Returns its reply when it was served (the session is
    /// no longer blocked), None when it still waits (the key holds another
    /// type, or what arrived was taken by a client ahead of it).
    pub fn serve_blocked(&mut self, session: &mut Session, db: usize, key: &[u8]) -> Option<Reply> {
        let state = session.blocked.as_ref()?;
        if state.db != db || !state.request.keys.iter().any(|k| k.as_bytes() == key) {
            return None;
        }
        let now = now_ms();
        let database = self.core.keyspace.db(db);
        let live = database.get(key).filter(|_| !database.is_expired(key, now));
        let matches = matches!(
            (state.request.kind, live),
            (BlockKind::List, Some(Value::List(_)))
                | (BlockKind::ZSet, Some(Value::ZSet(_)))
                | (BlockKind::Stream, Some(Value::Stream(_)))
        );
        if !matches && !state.request.wake_on_delete {
            return None;
        }
        let argv_owned = state.argv.clone();
        let argv: Vec<&[u8]> = argv_owned.iter().map(Vec::as_slice).collect();
        let Ok((_, spec)) = command::resolve(&argv) else {
            return None;
        };
        let effects_before = self.core.effects.len();
        let saved_db = session.db;
        session.db = db;
        let mut host = NullHost;
        let mut ctx = Ctx::new(&mut self.core, session, &mut host, now);
        ctx.ready_key = Some(Blob::new(key));
        let reply = match (spec.handler)(&mut ctx, &argv) {
            Ok(r) | Err(r) => r,
        };
        let still_blocked = ctx.block_request.take().is_some();
        let dirty = ctx.dirty;
        let logged_custom = ctx.logged_custom;
        session.db = saved_db;
        if still_blocked {
            debug_assert!(dirty == 0, "a command that blocks changes nothing");
            return None;
        }
        if let Some(state) = session.blocked.take() {
            self.core.clients.remove_blocked(session.id, &state);
        }
        self.core.dirty += dirty;
        if dirty > 0 && !logged_custom && (self.core.aof.is_some() || self.capture_effects) {
            self.core.effects.push(Effect {
                db,
                argv: argv_owned,
            });
        }
        Some(match self.log_unit(effects_before, now) {
            Ok(()) => reply,
            Err(refusal) => refusal,
        })
    }

    /// Ids of blocked sessions whose timeout has passed: answer each with
    /// [`Engine::unblock`].
    pub fn timed_out_sessions(&self) -> Vec<u64> {
        self.core.clients.timed_out(now_ms())
    }

    /// The earliest blocking deadline (Unix ms), for the host's timer.
    pub fn next_block_deadline(&self) -> Option<i64> {
        self.core.clients.next_deadline()
    }

    /// Ends `session`'s wait: with its timeout reply, or with the
    /// UNBLOCKED error (CLIENT UNBLOCK … ERROR). None if it was not blocked.
    pub fn unblock(&mut self, session: &mut Session, with_error: bool) -> Option<Reply> {
        let state = session.blocked.take()?;
        self.core.clients.remove_blocked(session.id, &state);
        Some(if with_error {
            Reply::err("UNBLOCKED client unblocked via CLIENT UNBLOCK")
        } else {
            state.request.timeout_reply
        })
    }

    /// Forgets everything the engine holds for `session` (its wait, WATCHes,
    /// subscriptions, queued transaction): call it when a client goes away.
    pub fn end_session(&mut self, session: &mut Session) {
        if let Some(state) = session.blocked.take() {
            self.core.clients.remove_blocked(session.id, &state);
        }
        command::multi::discard_transaction(&mut self.core, session);
        command::pubsub::unsubscribe_everything(&mut self.core, session);
    }

    /// True when Pub/Sub messages wait for delivery.
    pub fn has_messages(&self) -> bool {
        self.core.clients.has_messages()
    }

    /// Takes the Pub/Sub messages queued for sessions: (session id,
    /// message), in publication order.
    pub fn take_messages(&mut self) -> Vec<(u64, crate::command::clients::Message)> {
        self.core.clients.take_messages()
    }

    /// Advances a running BGSAVE by about `budget` of work (and starts one
    /// when a save point is due). A host with an event loop calls it
    /// between turns; an embedded engine's [`Engine::cron`] calls it too.
    /// Returns a line for the log when a save started or ended.
    pub fn background_step(&mut self, budget: std::time::Duration, now_ms: i64) -> Option<String> {
        self.core.background_step(budget, now_ms)
    }

    /// Runs background work (active expiry, AOF fsync scheduling and
    /// retries) if it is due: `hz` times a second.
    pub fn cron(&mut self) {
        let now = now_ms();
        if now - self.core.last_cron_ms >= i64::from(1000 / self.core.config.hz.max(1)) {
            self.cron_at(now);
        }
    }

    /// Runs background work now, whether due or not.
    pub fn cron_now(&mut self) {
        self.cron_at(now_ms());
    }

    fn cron_at(&mut self, now: i64) {
        self.core.last_cron_ms = now;
        if !self.group_commit {
            // An embedded engine has no event loop to drive a BGSAVE (or
            // start one for a save point): cron does, a slice at a time.
            let _ = self.background_step(std::time::Duration::from_millis(5), now);
        }
        // Active rehashing: finish resizes that writes alone would leave
        // half done (at most 1 ms per database and cycle).
        for db in 0..self.core.keyspace.db_count() {
            self.core
                .keyspace
                .db_mut(db)
                .rehash_for(std::time::Duration::from_millis(1));
        }
        let before = self.core.effects.len();
        self.core.active_expire_cycle(now);
        if let Some(aof) = self.core.aof.as_mut() {
            // Each expired key is its own unit (no MULTI wrapping).
            for effect in self.core.effects.drain(before..) {
                aof.push_unit(std::slice::from_ref(&effect));
            }
            if !self.group_commit && aof.has_pending() {
                // A failure is kept for retry and reported by the next write.
                let _ = aof.flush(now);
            }
            aof.cron(now);
        } else if !self.capture_effects {
            self.core.effects.clear();
        }
    }

    /// Whether effects are kept for [`Engine::take_effects`] when no AOF
    /// consumes them (without it they are dropped after each command).
    pub fn set_capture_effects(&mut self, on: bool) {
        self.capture_effects = on;
        if !on {
            self.core.effects.clear();
        }
    }

    /// Takes the effects logged since the last call, in order (only those
    /// not consumed by the AOF, and only while capturing).
    pub fn take_effects(&mut self) -> Vec<Effect> {
        std::mem::take(&mut self.core.effects)
    }
}

/// Closing an engine makes what it logged durable whatever the policy (as
/// Redis fsyncs its AOF at shutdown): under `everysec` or `no` the last
/// writes of an embedded engine would otherwise wait for an fsync that no
/// later command or cron call requests.
impl Drop for Engine {
    fn drop(&mut self) {
        if self.core.aof.is_some() && !self.core.loading {
            let _ = self.sync();
        }
    }
}

// Compile-time check of the threading contract: an engine may move
// between threads.
const _: () = {
    const fn assert_send<T: Send>() {}
    assert_send::<Engine>();
};
