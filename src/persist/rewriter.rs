//! The background AOF rewrite (BGREWRITEAOF): a new `appendonly.aof` made
//! of one image of the keyspace plus what was logged since, swapped in with
//! one rename. The protocol, and what is on disk after a crash at each
//! step, is in docs/persistence.md ("Rewrite").
//!
//! The image comes from the same fork-free point-in-time capture as BGSAVE
//! ([`Keyspace::begin_capture`]), driven a slice at a time on the command
//! thread. Everything logged after the capture instant is, by construction,
//! the old AOF's bytes after the offset it had at that instant: the
//! rewriter thread copies them from the old file instead of keeping a diff
//! buffer in memory.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError, SyncSender, TryRecvError};
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::aof::{BatchBuilder, FILE_HEADER};
use super::io::{DurableFile, FileError, Io};
use super::rewrite::commands_for;
use super::snapshot::{self, BlockBuilder, FileWriter, HeaderInfo, RawBlock, Stats};
use super::writer::error_text;
use crate::keyspace::Keyspace;
use crate::persist::aof::Effect;
use crate::types::{Blob, Value};

/// Image chunks queued for the rewriter thread before the capture pauses.
const MAX_QUEUED_CHUNKS: usize = 4;
/// Records captured between two clock checks within a slice (few: one
/// record can be a large collection).
const RECORDS_PER_CHECK: usize = 16;
/// The switch waits until no more than this much diff is left to copy, so
/// the stop it costs is short.
pub const SWITCH_DIFF_BYTES: u64 = 1 << 20;
/// The diff is copied in pieces of this size.
const COPY_CHUNK_BYTES: usize = 1 << 20;
/// How often the thread looks for new diff bytes while it waits.
const POLL_INTERVAL: Duration = Duration::from_millis(2);
/// A RESP image batch is closed at this size.
const RESP_BATCH_BYTES: usize = 1 << 20;
/// Consecutive failures after which automatic rewrites back off (Redis's
/// AOF_REWRITE_LIMITE_THRESHOLD).
const BACKOFF_AFTER_FAILURES: u32 = 3;
/// Longest back-off between automatic attempts.
const BACKOFF_MAX_MINUTES: i64 = 60;

/// What the image at the start of a rewritten AOF is (`aof-preamble`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Preamble {
    /// A `dump.hoz` image (the default).
    Native,
    /// Commands that recreate every key (Redis loads such a file).
    None,
    /// An RDB image encoded with this encoder (Redis loads such a file).
    Rdb(crate::rdb::writer::Encoder),
}

/// The files of a rewrite: the AOF being rewritten (`old_path`, whose
/// length is `old_len` when the rewrite starts: the diff is what it
/// receives from there on) and the name the new file gets (`target`),
/// both through `io`.
pub struct RewriteFiles<'a> {
    pub io: Arc<dyn Io>,
    pub old_path: &'a Path,
    pub old_len: u64,
    pub target: &'a Path,
}

/// INFO persistence's rewrite figures and the rewrite in progress.
pub struct RewriteState {
    /// A rewrite waits for the running BGSAVE to end.
    pub scheduled: bool,
    /// The last rewrite succeeded (or none ran).
    pub last_ok: bool,
    /// Why the last rewrite failed.
    pub last_error: Option<String>,
    /// Seconds the last rewrite took, -1 before the first.
    pub last_secs: i64,
    /// Rewrites started since the engine started (`aof_rewrites`).
    pub rewrites: u64,
    /// Failures in a row (`aof_rewrites_consecutive_failures`).
    pub consecutive_failures: u32,
    backoff_minutes: i64,
    next_allowed_ms: i64,
    backoff_notice: Option<i64>,
    /// The rewrite in progress.
    pub job: Option<Rewrite>,
}

impl Default for RewriteState {
    fn default() -> Self {
        RewriteState {
            scheduled: false,
            last_ok: true,
            last_error: None,
            last_secs: -1,
            rewrites: 0,
            consecutive_failures: 0,
            backoff_minutes: 0,
            next_allowed_ms: 0,
            backoff_notice: None,
            job: None,
        }
    }
}

/// How a finished rewrite ended.
#[derive(Debug)]
pub enum Finished {
    /// The new file is in place under the AOF's name, `len` bytes long;
    /// the caller opens it for appending and retires the old writer.
    Switched {
        /// Length of the new file.
        len: u64,
        /// Bytes of diff copied at the switch (the stop's work).
        final_diff_bytes: u64,
        /// How long the switch stopped the command thread.
        pause: Duration,
        /// Set when the directory fsync after the rename failed: the new
        /// file has the name (the caller must append to it, never to the
        /// old one), but the name may not survive a power loss, so the
        /// caller must not acknowledge writes any more.
        dir_not_synced: Option<String>,
    },
    /// Failed; the old AOF is untouched and still in use.
    Failed(String),
}

/// What the rewriter thread reports after renaming the new file into
/// place.
struct Committed {
    /// Length of the new file.
    len: u64,
    /// The directory fsync after the rename failed (the error text).
    dir_not_synced: Option<String>,
}

/// Progress shared with the rewriter thread.
#[derive(Default)]
struct Progress {
    /// Length of the old AOF up to its last complete batch, as last
    /// published by the command thread.
    published_len: AtomicU64,
    /// Old-file offset copied into the new file so far.
    copied_to: AtomicU64,
    /// The image and the new file's log header are written.
    image_done: AtomicBool,
}

enum ToThread {
    /// Image bytes: a snapshot block (native) or a batch of commands.
    Block(RawBlock),
    Commands(Vec<u8>),
    /// A batch of commands still to be sealed with its annotation (the
    /// time is the rewrite's start).
    Unsealed(Vec<u8>, i64),
    /// The image is complete.
    ImageDone(Box<Stats>),
    /// Copy the old file up to this length, then fsync and rename.
    Switch(u64),
}

/// A rewrite in progress.
pub struct Rewrite {
    /// Unix ms when it started.
    pub started_ms: i64,
    /// The old file's length at the capture instant: the diff starts here.
    pub diff_start: u64,
    preamble: Preamble,
    blocks: BlockBuilder,
    commands: BatchBuilder,
    selected_db: Option<usize>,
    /// The RDB image being encoded (`Preamble::Rdb`), and each database's
    /// sizes at the capture instant (RESIZEDB hints).
    rdb: Option<(crate::rdb::writer::RecordEncoder, Vec<(u64, u64)>)>,
    queued: std::collections::VecDeque<ToThread>,
    to_thread: SyncSender<ToThread>,
    progress: Arc<Progress>,
    result: Receiver<Result<Committed, String>>,
    capture_done: bool,
    image_sent: bool,
}

impl RewriteState {
    /// True while a rewrite runs.
    pub fn in_progress(&self) -> bool {
        self.job.is_some()
    }

    /// True while the running rewrite's capture can only wait for its
    /// thread: the chunks queued for it are at the limit.
    pub fn waits_for_writer(&self) -> bool {
        self.job
            .as_ref()
            .is_some_and(|job| !job.capture_done && job.queued.len() >= MAX_QUEUED_CHUNKS)
    }

    /// Redis's `aofRewriteLimited`: after repeated failures, automatic
    /// attempts wait 1, 2, 4 … up to 60 minutes. True when one may start.
    pub fn auto_allowed(&mut self, now_ms: i64) -> bool {
        if self.consecutive_failures < BACKOFF_AFTER_FAILURES {
            self.backoff_minutes = 0;
            self.next_allowed_ms = 0;
            return true;
        }
        if self.next_allowed_ms != 0 {
            if now_ms < self.next_allowed_ms {
                return false;
            }
            self.next_allowed_ms = 0;
            return true;
        }
        self.backoff_minutes = if self.backoff_minutes == 0 {
            1
        } else {
            (self.backoff_minutes * 2).min(BACKOFF_MAX_MINUTES)
        };
        self.next_allowed_ms = now_ms + self.backoff_minutes * 60_000;
        self.backoff_notice = Some(self.backoff_minutes);
        false
    }

    /// The minutes of a back-off just entered, once (for the log line).
    pub fn take_backoff_notice(&mut self) -> Option<i64> {
        self.backoff_notice.take()
    }

    /// Bytes of diff written to the old file and not yet copied
    /// (`aof_rewrite_buffer_length`).
    pub fn diff_pending(&self) -> u64 {
        self.job.as_ref().map_or(0, |j| {
            let published = j.progress.published_len.load(Ordering::SeqCst);
            let copied = j
                .progress
                .copied_to
                .load(Ordering::SeqCst)
                .max(j.diff_start);
            published.saturating_sub(copied)
        })
    }

    /// Starts a rewrite of `keyspace` from `files.old_path` to
    /// `files.target`. The caller has written the old AOF's pending batch
    /// and made the writer forget its selected database.
    #[allow(clippy::too_many_arguments)]
    pub fn start(
        &mut self,
        keyspace: &mut Keyspace,
        files: RewriteFiles<'_>,
        preamble: Preamble,
        functions: Vec<Vec<u8>>,
        key_access: crate::rdb::writer::KeyAccessRecord,
        incremental_fsync: bool,
        now_ms: i64,
    ) -> Result<(), String> {
        let RewriteFiles {
            io,
            old_path,
            old_len,
            target,
        } = files;
        debug_assert!(self.job.is_none(), "one rewrite at a time");
        let dir = target.parent().unwrap_or(Path::new(".")).to_path_buf();
        let temp = temp_path(&dir);
        let (to_thread, from_engine) = mpsc::sync_channel(MAX_QUEUED_CHUNKS);
        let (result_tx, result) = mpsc::sync_channel(1);
        let progress = Arc::new(Progress::default());
        progress.published_len.store(old_len, Ordering::SeqCst);
        progress.copied_to.store(old_len, Ordering::SeqCst);
        let job = Job {
            io,
            temp,
            target: target.to_path_buf(),
            old_path: old_path.to_path_buf(),
            diff_start: old_len,
            header: HeaderInfo::new(now_ms, keyspace.db_count())
                .with_functions(match preamble {
                    Preamble::Native => functions.clone(),
                    _ => Vec::new(),
                })
                .with_key_access(key_access),
            preamble,
            incremental_fsync,
            progress: Arc::clone(&progress),
        };
        std::thread::Builder::new()
            .name("hozon-aof-rewrite".into())
            .spawn(move || {
                super::saver::lower_thread_priority();
                let outcome = job.run(from_engine);
                if outcome.is_err() {
                    let _ = job.io.remove(&job.temp);
                }
                let _ = result_tx.send(outcome);
            })
            .map_err(|e| format!("cannot start the rewrite thread: {e}"))?;
        let rdb = match preamble {
            Preamble::Rdb(encoder) => Some((
                {
                    let mut records =
                        crate::rdb::writer::RecordEncoder::with_header(encoder, now_ms, 0, true);
                    records.put_functions(&functions);
                    records
                },
                keyspace
                    .iter()
                    .map(|db| (db.len() as u64, db.expires_len() as u64))
                    .collect(),
            )),
            _ => None,
        };
        keyspace.begin_capture();
        // Counted when started, as Redis's `aof_rewrites`.
        self.rewrites += 1;
        self.job = Some(Rewrite {
            started_ms: now_ms,
            diff_start: old_len,
            preamble,
            blocks: BlockBuilder::new().with_key_access(key_access),
            commands: {
                // Without a preamble the libraries come first, as Redis's
                // rewriteFunctions writes them: FUNCTION LOAD each.
                let mut commands = BatchBuilder::new();
                if matches!(preamble, Preamble::None) {
                    let mut selected = None;
                    for code in &functions {
                        commands.push_command(0, &[b"FUNCTION", b"LOAD", code], &mut selected);
                    }
                }
                commands
            },
            selected_db: None,
            rdb,
            queued: std::collections::VecDeque::new(),
            to_thread,
            progress,
            result,
            capture_done: false,
            image_sent: false,
        });
        Ok(())
    }

    /// Tells the running rewrite how long the old AOF is (complete batches
    /// only); the thread copies up to there.
    pub fn publish_len(&self, len: u64) {
        if let Some(job) = &self.job {
            job.progress.published_len.fetch_max(len, Ordering::SeqCst);
        }
    }

    /// True when the image is written and little enough diff is left that
    /// the switch can happen now.
    pub fn ready_to_switch(&self) -> bool {
        self.job
            .as_ref()
            .is_some_and(|j| j.image_sent && j.progress.image_done.load(Ordering::SeqCst))
            && self.diff_pending() <= SWITCH_DIFF_BYTES
    }

    /// Advances the capture for about `budget`. Returns how the rewrite
    /// ended when the thread failed.
    pub fn step(
        &mut self,
        keyspace: &mut Keyspace,
        budget: Duration,
        now_ms: i64,
    ) -> Option<Finished> {
        let job = self.job.as_mut()?;
        let started = Instant::now();
        super::saver::hand_over(&mut job.queued, &job.to_thread);
        while !job.capture_done && job.queued.len() < MAX_QUEUED_CHUNKS {
            let done = {
                let Rewrite {
                    preamble,
                    blocks,
                    commands,
                    selected_db,
                    rdb,
                    queued,
                    started_ms,
                    ..
                } = job;
                let started_ms = *started_ms;
                keyspace.capture_step(RECORDS_PER_CHECK, &mut |db, key, value, expire| {
                    match preamble {
                        Preamble::Native => {
                            queued.extend(
                                blocks
                                    .push_key(db, key, value, expire)
                                    .into_iter()
                                    .map(ToThread::Block),
                            );
                        }
                        Preamble::None => {
                            push_key_commands(commands, selected_db, db, key, value, expire);
                            if commands.len() >= RESP_BATCH_BYTES {
                                queued.push_back(ToThread::Unsealed(
                                    commands.take_body(),
                                    started_ms,
                                ));
                            }
                        }
                        Preamble::Rdb(_) => {
                            if let Some((records, sizes)) = rdb.as_mut() {
                                records.push_key(db, key, value, expire, |db| {
                                    sizes.get(db).copied().unwrap_or((0, 0))
                                });
                                if let Some(chunk) = records.take_full() {
                                    queued.push_back(ToThread::Commands(chunk));
                                }
                            }
                        }
                    }
                })
            };
            if done {
                job.capture_done = true;
                match job.preamble {
                    Preamble::Native => {
                        if let Some(block) = job.blocks.finish() {
                            job.queued.push_back(ToThread::Block(block));
                        }
                    }
                    Preamble::None => {
                        if !job.commands.is_empty() {
                            let body = job.commands.take_body();
                            job.queued
                                .push_back(ToThread::Unsealed(body, job.started_ms));
                        }
                    }
                    Preamble::Rdb(_) => {
                        if let Some((records, _)) = job.rdb.as_mut() {
                            job.queued.push_back(ToThread::Commands(records.take()));
                        }
                    }
                }
                let stats = Box::new(job.blocks.stats().clone());
                job.queued.push_back(ToThread::ImageDone(stats));
                keyspace.end_capture();
            }
            super::saver::hand_over(&mut job.queued, &job.to_thread);
            // A paced capture (rdb-key-save-delay) waits for its next key.
            if started.elapsed() >= budget || keyspace.capture_wait().is_some() {
                break;
            }
        }
        if job.capture_done && job.queued.is_empty() {
            job.image_sent = true;
        }
        match job.result.try_recv() {
            Err(TryRecvError::Empty) => None,
            Ok(Ok(_)) => Some(self.fail(
                "the rewrite thread ended before the switch".into(),
                keyspace,
                now_ms,
            )),
            Ok(Err(cause)) => Some(self.fail(cause, keyspace, now_ms)),
            Err(TryRecvError::Disconnected) => {
                Some(self.fail("the rewrite thread ended".into(), keyspace, now_ms))
            }
        }
    }

    /// The switch: the old file is complete at `final_len` (its pending
    /// batch written); waits for the thread to copy the rest, fsync and
    /// rename. The caller must not write to the old file meanwhile.
    pub fn switch(&mut self, keyspace: &mut Keyspace, final_len: u64, now_ms: i64) -> Finished {
        let started = Instant::now();
        let Some(job) = self.job.as_mut() else {
            return Finished::Failed("no rewrite in progress".into());
        };
        let copied = job.progress.copied_to.load(Ordering::SeqCst);
        let final_diff_bytes = final_len.saturating_sub(copied);
        if job.to_thread.send(ToThread::Switch(final_len)).is_err() {
            return self.fail("the rewrite thread ended".into(), keyspace, now_ms);
        }
        let outcome = match job.result.recv() {
            Ok(outcome) => outcome,
            Err(_) => Err("the rewrite thread ended".into()),
        };
        match outcome {
            Ok(Committed {
                len,
                dir_not_synced,
            }) => {
                let job = self.job.take();
                keyspace.end_capture();
                let started_ms = job.map_or(now_ms, |j| j.started_ms);
                self.last_secs = ((now_ms - started_ms) as f64 / 1000.0).round() as i64;
                self.last_ok = true;
                self.last_error = None;
                self.consecutive_failures = 0;
                Finished::Switched {
                    len,
                    final_diff_bytes,
                    pause: started.elapsed(),
                    dir_not_synced,
                }
            }
            Err(cause) => self.fail(cause, keyspace, now_ms),
        }
    }

    /// Stops the running rewrite (appendonly turned off, shutdown); its
    /// temporary file is removed by the thread.
    pub fn abort(&mut self, keyspace: &mut Keyspace) {
        if let Some(job) = self.job.take() {
            if !job.capture_done {
                keyspace.end_capture();
            }
            drop(job);
        }
    }

    /// Ends the running rewrite as failed for `cause` (the caller found it
    /// cannot complete); its temporary file is removed by the thread.
    pub fn abandon(&mut self, cause: String, keyspace: &mut Keyspace, now_ms: i64) {
        self.fail(cause, keyspace, now_ms);
    }

    fn fail(&mut self, cause: String, keyspace: &mut Keyspace, now_ms: i64) -> Finished {
        if let Some(job) = self.job.take() {
            if !job.capture_done {
                keyspace.end_capture();
            }
            self.last_secs = ((now_ms - job.started_ms) as f64 / 1000.0).round() as i64;
        }
        self.last_ok = false;
        self.last_error = Some(cause.clone());
        self.consecutive_failures += 1;
        Finished::Failed(cause)
    }
}

/// The commands recreating one key (and its expiry) as one unit each.
fn push_key_commands(
    batch: &mut BatchBuilder,
    selected_db: &mut Option<usize>,
    db: usize,
    key: &Blob,
    value: &Value,
    expire: Option<i64>,
) {
    for argv in commands_for(key, value) {
        batch.push_unit(&[Effect { db, argv }], selected_db);
    }
    if let Some(at) = expire {
        let at = at.to_string();
        batch.push_command(db, &[b"PEXPIREAT", key, at.as_bytes()], selected_db);
    }
}

static TEMP_COUNTER: AtomicU64 = AtomicU64::new(0);

/// `temp-rewrite-<pid>-<n>.aof` in `dir` (removed at startup like every
/// `temp-*` file).
fn temp_path(dir: &Path) -> PathBuf {
    let n = TEMP_COUNTER.fetch_add(1, Ordering::Relaxed);
    dir.join(format!("temp-rewrite-{}-{n}.aof", std::process::id()))
}

/// The rewriter thread's side.
struct Job {
    io: Arc<dyn Io>,
    temp: PathBuf,
    target: PathBuf,
    old_path: PathBuf,
    diff_start: u64,
    header: HeaderInfo,
    preamble: Preamble,
    /// `aof-rewrite-incremental-fsync`: fsync every 32 MiB of log part
    /// (the snapshot writer of a native image always does).
    incremental_fsync: bool,
    progress: Arc<Progress>,
}

/// The new file while the thread appends the log part.
struct Tail {
    file: DurableFile,
    copied_to: u64,
    buf: Vec<u8>,
}

impl Job {
    fn run(&self, rx: Receiver<ToThread>) -> Result<Committed, String> {
        let mut tail = self.write_image(&rx)?;
        self.progress.image_done.store(true, Ordering::SeqCst);
        loop {
            match rx.recv_timeout(POLL_INTERVAL) {
                Ok(ToThread::Switch(final_len)) => {
                    self.copy_diff(&mut tail, final_len)?;
                    let len = tail.file.finish().map_err(failed)?;
                    let dir_not_synced =
                        match snapshot::commit(self.io.as_ref(), &self.temp, &self.target) {
                            Ok(()) => None,
                            // Renamed: the switch happened, whatever the
                            // directory fsync said.
                            Err(e @ snapshot::SnapshotError::DirNotSynced { .. }) => {
                                Some(e.to_string())
                            }
                            Err(e) => return Err(e.to_string()),
                        };
                    return Ok(Committed {
                        len,
                        dir_not_synced,
                    });
                }
                Ok(_) => return Err("rewrite protocol error: image data after the image".into()),
                Err(RecvTimeoutError::Timeout) => {
                    let published = self.progress.published_len.load(Ordering::SeqCst);
                    if published > tail.copied_to {
                        self.copy_diff(&mut tail, published)?;
                        if self.progress.published_len.load(Ordering::SeqCst) == tail.copied_to {
                            // Caught up: fsync now, so the switch's own
                            // fsync has only the last bytes to flush.
                            tail.file.sync().map_err(failed)?;
                        } else {
                            self.sync_if_due(&mut tail)?;
                        }
                    }
                }
                Err(RecvTimeoutError::Disconnected) => return Err("rewrite aborted".into()),
            }
        }
    }

    /// Writes the image and the log header; returns the open file.
    fn write_image(&self, rx: &Receiver<ToThread>) -> Result<Tail, String> {
        let aborted = || "rewrite aborted".to_string();
        match self.preamble {
            Preamble::Native => {
                let mut writer =
                    FileWriter::create(Arc::clone(&self.io), &self.temp, self.header.clone())
                        .map_err(|e| e.to_string())?;
                loop {
                    match rx.recv().map_err(|_| aborted())? {
                        ToThread::Block(block) => {
                            writer.write_block(block).map_err(|e| e.to_string())?;
                        }
                        ToThread::ImageDone(stats) => {
                            writer.finish(&stats).map_err(|e| e.to_string())?;
                            let file = DurableFile::reopen(Arc::clone(&self.io), &self.temp)
                                .map_err(failed)?;
                            let mut tail = self.tail(file);
                            tail.file.append(FILE_HEADER).map_err(failed)?;
                            return Ok(tail);
                        }
                        _ => return Err("rewrite protocol error: unexpected message".into()),
                    }
                }
            }
            Preamble::None | Preamble::Rdb(_) => {
                let file = DurableFile::create(Arc::clone(&self.io), &self.temp).map_err(failed)?;
                let mut tail = self.tail(file);
                // An RDB image's checksum covers the image; the log part
                // and its header follow it.
                let mut rdb_crc = match self.preamble {
                    Preamble::Rdb(_) => Some(crate::rdb::Crc64::default()),
                    _ => None,
                };
                if rdb_crc.is_none() {
                    tail.file.append(FILE_HEADER).map_err(failed)?;
                }
                loop {
                    let message = match rx.recv().map_err(|_| aborted())? {
                        ToThread::Unsealed(body, ts_ms) => {
                            ToThread::Commands(super::aof::seal(body, ts_ms))
                        }
                        message => message,
                    };
                    match message {
                        ToThread::Commands(batch) => {
                            if let Some(crc) = rdb_crc.as_mut() {
                                crc.update(&batch);
                            }
                            tail.file.append(&batch).map_err(failed)?;
                            self.sync_if_due(&mut tail)?;
                        }
                        ToThread::ImageDone(_) => {
                            if let Some(mut crc) = rdb_crc.take() {
                                let mut end = Vec::with_capacity(9 + FILE_HEADER.len());
                                crate::rdb::writer::put_trailer(&mut end, &mut crc, true);
                                end.extend_from_slice(FILE_HEADER);
                                tail.file.append(&end).map_err(failed)?;
                            }
                            // Durable now, so the switch's fsync covers only
                            // the diff (a stop clients wait for).
                            tail.file.sync().map_err(failed)?;
                            return Ok(tail);
                        }
                        _ => return Err("rewrite protocol error: unexpected message".into()),
                    }
                }
            }
        }
    }

    fn tail(&self, file: DurableFile) -> Tail {
        Tail {
            file,
            copied_to: self.diff_start,
            buf: Vec::new(),
        }
    }

    /// The incremental fsync (`aof-rewrite-incremental-fsync`), every
    /// [`SYNC_EVERY_BYTES`](super::io::SYNC_EVERY_BYTES).
    fn sync_if_due(&self, tail: &mut Tail) -> Result<(), String> {
        if self.incremental_fsync {
            tail.file.sync_if_due().map_err(failed)?;
        }
        Ok(())
    }

    /// Copies the old file's bytes `tail.copied_to .. to` into the new one.
    fn copy_diff(&self, tail: &mut Tail, to: u64) -> Result<(), String> {
        let mut buf = std::mem::take(&mut tail.buf);
        buf.resize(COPY_CHUNK_BYTES, 0);
        while tail.copied_to < to {
            let want = usize::try_from(to - tail.copied_to)
                .unwrap_or(usize::MAX)
                .min(COPY_CHUNK_BYTES);
            let n = self
                .io
                .read_at(&self.old_path, tail.copied_to, &mut buf[..want])
                .map_err(|e| format!("reading {}: {}", self.old_path.display(), error_text(&e)))?;
            if n == 0 {
                return Err(format!(
                    "{} ends at {} but {to} bytes were expected",
                    self.old_path.display(),
                    tail.copied_to
                ));
            }
            tail.file.append(&buf[..n]).map_err(failed)?;
            tail.copied_to += n as u64;
            self.progress
                .copied_to
                .store(tail.copied_to, Ordering::SeqCst);
            self.sync_if_due(tail)?;
        }
        tail.buf = buf;
        Ok(())
    }
}

/// A failed write or fsync of the new file, as the rewrite's failure text
/// (the OS error's words without its number, as the AOF writer prints it).
fn failed(e: FileError) -> String {
    format!("{}: {}", e.context, error_text(&e.source))
}
