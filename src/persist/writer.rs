//! The AOF writer: batches, write(2), the fsync policies, and error states.

use crate::repl::ids::Position;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicI64, Ordering};
use std::sync::mpsc::{self, Sender};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;

use super::aof::{self, BatchBuilder, FILE_HEADER};
use super::io::{AppendFile, Io, SyncHandle};
use crate::persist::aof::Effect;

pub use crate::config::AppendFsync as FsyncPolicy;

/// How long an everysec fsync may run before writers wait for it.
const FSYNC_POSTPONE_MAX_MS: i64 = 2000;

/// State shared with the background fsync thread.
#[derive(Default)]
struct BgShared {
    in_progress: AtomicBool,
    started_ms: AtomicI64,
    /// Bytes of the file known durable.
    synced_len: AtomicI64,
    error: Mutex<Option<String>>,
    /// Fsync count, latencies and last success (INFO, LATENCY).
    stats: super::aof_stats::FsyncStats,
}

struct BgFsync {
    tx: Option<Sender<(Arc<dyn SyncHandle>, i64)>>,
    shared: Arc<BgShared>,
    thread: Option<JoinHandle<()>>,
}

impl BgFsync {
    fn start(shared: Arc<BgShared>) -> BgFsync {
        let (tx, rx) = mpsc::channel::<(Arc<dyn SyncHandle>, i64)>();
        let worker_shared = Arc::clone(&shared);
        let thread = std::thread::Builder::new()
            .name("hozon-aof-fsync".into())
            .spawn(move || {
                while let Ok((handle, len)) = rx.recv() {
                    let started = std::time::Instant::now();
                    let result = handle.sync_data();
                    match result {
                        Ok(()) => {
                            worker_shared.synced_len.fetch_max(len, Ordering::SeqCst);
                            let us = started.elapsed().as_micros() as u64;
                            worker_shared.stats.record(us, crate::clock::now_ms());
                        }
                        Err(e) => {
                            let mut err = worker_shared
                                .error
                                .lock()
                                .unwrap_or_else(|p| p.into_inner());
                            *err = Some(error_text(&e));
                        }
                    }
                    worker_shared.in_progress.store(false, Ordering::SeqCst);
                }
            })
            .ok();
        BgFsync {
            tx: Some(tx),
            shared,
            thread,
        }
    }
}

impl Drop for BgFsync {
    fn drop(&mut self) {
        self.tx.take();
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// Counters and state reported by INFO persistence.
#[derive(Debug, Clone, Default)]
pub struct AofStatus {
    /// Current file size.
    pub current_size: u64,
    /// Size when the file was opened (or last rewritten).
    pub base_size: u64,
    /// A background fsync is running.
    pub pending_bio_fsync: bool,
    /// Writes that had to wait for a slow background fsync.
    pub delayed_fsync: u64,
    /// The last write error, if writes are currently failing.
    pub write_error: Option<String>,
    /// The fsync error that poisoned durability, if any.
    pub poisoned: Option<String>,
}

/// Why a flush did not make its batch acknowledged.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FlushError {
    /// write(2) failed or was short; the file was cut back, the batch is
    /// kept and retried by `AofWriter::retry`.
    Write(String),
    /// fsync failed: durability is poisoned until restart.
    Poisoned(String),
}

/// Appends batches to the AOF under an fsync policy.
pub struct AofWriter {
    path: PathBuf,
    file: Box<dyn AppendFile>,
    syncer: Arc<dyn SyncHandle>,
    /// Length of the file up to the end of the last complete batch.
    good_len: u64,
    selected_db: Option<usize>,
    policy: FsyncPolicy,
    builder: BatchBuilder,
    /// Commands (or units) ever added to a batch: tells whether a command
    /// logged anything, whatever a flush meanwhile did to the batch.
    logged_count: u64,
    /// A batch whose write failed, to retry before anything else.
    failed_batch: Option<Vec<u8>>,
    write_error: Option<String>,
    poisoned: Option<String>,
    last_fsync_request_ms: i64,
    bg: BgFsync,
    base_size: u64,
    delayed_fsync: u64,
    /// `no-appendfsync-on-rewrite` in force: a background save or rewrite
    /// runs, so this writer skips its fsyncs.
    fsync_suppressed: bool,
    /// The logical offset of this file's length at open: bytes appended by
    /// this process to earlier files (WAITAOF's counters, which must not go
    /// back when a rewrite switches files).
    logical_base: u64,
    /// The file's length at open.
    initial_len: u64,
    /// Bytes written, waits under `always`, worst durations.
    stats: super::aof_stats::WriterStats,
}

impl AofWriter {
    /// Opens (creating when absent) the AOF at `path`, already loaded and
    /// truncated to its valid length; `checksummed` says whether loading
    /// found hozon's header (if not, a marker line starts the checksummed
    /// part).
    pub fn open(
        io: Arc<dyn Io>,
        path: &Path,
        policy: FsyncPolicy,
        checksummed: bool,
    ) -> std::io::Result<AofWriter> {
        let mut file = io.open_append(path)?;
        let mut len = file.len()?;
        if len == 0 || !checksummed {
            // A new file starts with the header that marks it checksummed; a
            // file written by Redis gets the same line as a marker: batches
            // after it carry checksums. Durable (with the directory entry)
            // before any batch.
            let mut written = 0;
            while written < FILE_HEADER.len() {
                match file.write(&FILE_HEADER[written..])? {
                    0 => return Err(std::io::ErrorKind::WriteZero.into()),
                    n => written += n,
                }
            }
            file.syncer()?.sync_data()?;
            if let Some(dir) = path.parent() {
                io.sync_dir(dir)?;
            }
            len += FILE_HEADER.len() as u64;
        }
        let syncer = file.syncer()?;
        let shared = Arc::new(BgShared::default());
        shared.synced_len.store(len as i64, Ordering::SeqCst);
        Ok(AofWriter {
            path: path.to_path_buf(),
            file,
            syncer,
            good_len: len,
            selected_db: None,
            policy,
            builder: BatchBuilder::new(),
            logged_count: 0,
            failed_batch: None,
            write_error: None,
            poisoned: None,
            last_fsync_request_ms: 0,
            bg: BgFsync::start(shared),
            base_size: len,
            delayed_fsync: 0,
            fsync_suppressed: false,
            logical_base: 0,
            initial_len: len,
            stats: Default::default(),
        })
    }

    /// Continues the logical offsets of `previous` (the file this one
    /// replaces, whose content it holds): everything logged before counts
    /// as fsynced here, since the new file was made durable before the
    /// switch.
    pub fn continue_offsets_of(&mut self, previous: &AofWriter) {
        self.logical_base = previous.logged_end();
        self.bg.shared.stats.absorb(&previous.fsync_stats());
        self.stats.bytes_written += previous.stats.bytes_written;
        self.stats.always_wait_max_us = self
            .stats
            .always_wait_max_us
            .max(previous.stats.always_wait_max_us);
    }

    /// The logical offset just after everything logged so far, written or
    /// not (a session's WAITAOF mark after its command).
    pub fn logged_end(&self) -> u64 {
        let failed = self.failed_batch.as_ref().map_or(0, Vec::len);
        self.logical_base
            + (self.good_len - self.initial_len)
            + (failed + self.builder.len()) as u64
    }

    /// The logical offset an fsync has covered: WAITAOF's local
    /// acknowledgement for every mark at or below it.
    pub fn fsynced_end(&self) -> u64 {
        let synced = self.bg.shared.synced_len.load(Ordering::SeqCst).max(0) as u64;
        self.logical_base + synced.saturating_sub(self.initial_len)
    }

    /// The file's path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Changes the fsync policy (CONFIG SET appendfsync).
    pub fn set_policy(&mut self, policy: FsyncPolicy) {
        self.policy = policy;
    }

    /// Makes the next batch start with `SELECT`, so that what is appended
    /// from now on replays on its own (the AOF rewrite copies it into the
    /// new file after the keyspace image).
    pub fn forget_selected_db(&mut self) {
        self.selected_db = None;
    }

    /// `no-appendfsync-on-rewrite`: while `on`, batches are written but
    /// not fsynced (Redis's trade of durability for less I/O contention
    /// during a background save or rewrite).
    pub fn set_fsync_suppressed(&mut self, on: bool) {
        self.fsync_suppressed = on;
    }

    /// Whether `no-appendfsync-on-rewrite` currently suppresses fsyncs.
    pub fn fsync_suppressed(&self) -> bool {
        self.fsync_suppressed
    }

    /// A handle that fsyncs this file from any thread (a host that fsyncs
    /// outside its lock: the embedded handle's group commit).
    pub fn sync_handle(&self) -> Arc<dyn SyncHandle> {
        Arc::clone(&self.syncer)
    }

    /// Records an fsync of this file made through [`AofWriter::sync_handle`]
    /// that covered its first `len` bytes and took `took_us`.
    pub fn note_synced(&self, len: u64, took_us: u64) {
        let shared = &self.bg.shared;
        shared.synced_len.fetch_max(len as i64, Ordering::SeqCst);
        shared.stats.record(took_us, crate::clock::now_ms());
    }

    /// Refuses every later write with `why` until restart (the file can no
    /// longer be appended to safely).
    pub fn poison(&mut self, why: String) {
        self.poisoned = Some(why);
    }

    /// Why durability is lost (an fsync failed), if it is.
    pub fn poisoned(&self) -> Option<&str> {
        self.poisoned.as_deref()
    }

    /// Adds the effects of one command execution to the pending batch.
    pub fn push_unit(&mut self, effects: &[Effect]) {
        let before = self.builder.len();
        self.builder.push_unit(effects, &mut self.selected_db);
        if self.builder.len() != before {
            self.logged_count += 1;
        }
    }

    /// Adds one command, logged as received in database `db` (the common
    /// case, without building an [`Effect`]).
    pub fn push_command(&mut self, db: usize, argv: &[&[u8]]) {
        self.builder.push_command(db, argv, &mut self.selected_db);
        self.logged_count += 1;
    }

    /// How many commands (or units) were ever added to a batch; a command
    /// logged something when this grew while it ran.
    pub fn logged_count(&self) -> u64 {
        self.logged_count
    }

    /// Bytes in the batch being built.
    pub fn batch_bytes(&self) -> usize {
        self.builder.len()
    }

    /// True when a batch is waiting to be written (or retried).
    pub fn has_pending(&self) -> bool {
        !self.builder.is_empty() || self.failed_batch.is_some()
    }

    /// Why writes must be refused right now, as Redis's MISCONF error text.
    pub fn refusal(&self) -> Option<String> {
        if let Some(p) = &self.poisoned {
            return Some(format!(
                "MISCONF Errors writing to the AOF file: fsync failed ({p}); durability cannot be \
                 guaranteed, restart the server"
            ));
        }
        self.write_error
            .as_ref()
            .map(|e| format!("MISCONF Errors writing to the AOF file: {e}"))
    }

    /// Writes the pending batch with one write(2) and applies the fsync
    /// policy. On success the batch's replies may be released.
    pub fn flush(&mut self, now_ms: i64) -> Result<(), FlushError> {
        self.flush_at(now_ms, None)
    }

    /// [`AofWriter::flush`], the batch ending with the replication
    /// position `position` when there is one (docs/replication.md §4.1).
    /// With a position and no data the batch holds the position alone: it
    /// is written (so that the file's last position is at least what any
    /// replica received) but not fsynced on its own account.
    pub fn flush_at(&mut self, now_ms: i64, position: Option<&Position>) -> Result<(), FlushError> {
        self.check_background_error();
        if let Some(p) = &self.poisoned {
            return Err(FlushError::Poisoned(p.clone()));
        }
        // A previously failed batch goes first, alone: order is preserved.
        if self.failed_batch.is_some() {
            self.retry(now_ms)?;
        }
        if self.builder.is_empty() && position.is_none() {
            return Ok(());
        }
        let data = !self.builder.is_empty();
        if position.is_some() {
            self.builder.push_position(position);
        }
        let batch = self.builder.finish(now_ms);
        if !data {
            let suppressed = std::mem::replace(&mut self.fsync_suppressed, true);
            let written = self.write_batch(batch, now_ms);
            self.fsync_suppressed = suppressed;
            return written;
        }
        self.write_batch(batch, now_ms)
    }

    /// Retries a failed write (called from cron). Ok when nothing is left.
    pub fn retry(&mut self, now_ms: i64) -> Result<(), FlushError> {
        match self.failed_batch.take() {
            None => Ok(()),
            Some(batch) => self.write_batch(batch, now_ms),
        }
    }

    fn write_batch(&mut self, batch: Vec<u8>, now_ms: i64) -> Result<(), FlushError> {
        // Pair assertion (kept in release builds): what goes to the file is
        // what the loader will accept. A failure is a bug in building the
        // batch; stopping is better than logging bytes replay would refuse.
        assert!(
            aof::batch_verifies(&batch),
            "AOF batch about to be written does not verify against its own annotation \
             ({} bytes); nothing was written",
            batch.len()
        );
        if self.policy == FsyncPolicy::Everysec {
            self.wait_for_slow_fsync(now_ms);
        }
        let started = std::time::Instant::now();
        let mut written = 0;
        let mut failure = None;
        while written < batch.len() {
            match self.file.write(&batch[written..]) {
                Ok(0) => {
                    failure = Some("short write (0 bytes)".to_string());
                    break;
                }
                Ok(n) => written += n,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(e) => {
                    failure = Some(error_text(&e));
                    break;
                }
            }
        }
        if let Some(cause) = failure {
            // Cut the partial batch off so the file ends at a batch boundary.
            if written > 0 {
                if let Err(e) = self.file.set_len(self.good_len) {
                    // Cannot restore a clean end: treat like a failed fsync.
                    let why = format!("{cause}; truncating back failed: {e}");
                    self.poisoned = Some(why.clone());
                    return Err(FlushError::Poisoned(why));
                }
            }
            self.failed_batch = Some(batch);
            self.write_error = Some(cause.clone());
            return Err(FlushError::Write(cause));
        }
        self.good_len += batch.len() as u64;
        self.stats.bytes_written += batch.len() as u64;
        let write_ms = started.elapsed().as_millis() as u64;
        self.stats.pending_write_ms = self.stats.pending_write_ms.max(write_ms);
        self.write_error = None;
        // Reuse the buffer for the next batch: no regrowth on every turn.
        self.builder.recycle(batch);
        if self.fsync_suppressed {
            return Ok(());
        }
        match self.policy {
            FsyncPolicy::Always => {
                let fsync_started = std::time::Instant::now();
                if let Err(e) = self.syncer.sync_data() {
                    let why = error_text(&e);
                    self.poisoned = Some(why.clone());
                    return Err(FlushError::Poisoned(why));
                }
                self.record_always_fsync(started, fsync_started, now_ms);
                self.bg
                    .shared
                    .synced_len
                    .store(self.good_len as i64, Ordering::SeqCst);
            }
            FsyncPolicy::Everysec => self.maybe_request_fsync(now_ms),
            FsyncPolicy::No => {}
        }
        Ok(())
    }

    /// Redis's postpone rule, inverted for safety: writes never wait for a
    /// normal background fsync, but when one has run for more than 2 s the
    /// writer waits for it, bounding what a power loss can take.
    fn wait_for_slow_fsync(&mut self, now_ms: i64) {
        let shared = &self.bg.shared;
        if shared.in_progress.load(Ordering::SeqCst)
            && now_ms - shared.started_ms.load(Ordering::SeqCst) > FSYNC_POSTPONE_MAX_MS
        {
            self.delayed_fsync += 1;
            while shared.in_progress.load(Ordering::SeqCst) {
                std::thread::sleep(std::time::Duration::from_millis(1));
            }
        }
    }

    fn maybe_request_fsync(&mut self, now_ms: i64) {
        let shared = &self.bg.shared;
        if shared.in_progress.load(Ordering::SeqCst) || now_ms - self.last_fsync_request_ms < 1000 {
            return;
        }
        if shared.synced_len.load(Ordering::SeqCst) >= self.good_len as i64 {
            return;
        }
        self.request_fsync(now_ms);
    }

    fn request_fsync(&mut self, now_ms: i64) {
        let shared = &self.bg.shared;
        shared.in_progress.store(true, Ordering::SeqCst);
        shared.started_ms.store(now_ms, Ordering::SeqCst);
        self.last_fsync_request_ms = now_ms;
        let sent = self
            .bg
            .tx
            .as_ref()
            .map(|tx| {
                tx.send((Arc::clone(&self.syncer), self.good_len as i64))
                    .is_ok()
            })
            .unwrap_or(false);
        if !sent {
            // No background thread: fsync inline rather than never.
            shared.in_progress.store(false, Ordering::SeqCst);
            match self.syncer.sync_data() {
                Ok(()) => shared
                    .synced_len
                    .store(self.good_len as i64, Ordering::SeqCst),
                Err(e) => self.poisoned = Some(error_text(&e)),
            }
        }
    }

    fn check_background_error(&mut self) {
        let mut err = self
            .bg
            .shared
            .error
            .lock()
            .unwrap_or_else(|p| p.into_inner());
        if let Some(e) = err.take() {
            self.poisoned = Some(e);
        }
    }

    /// Periodic work: everysec fsync scheduling, retrying failed writes.
    pub fn cron(&mut self, now_ms: i64) {
        self.check_background_error();
        if self.failed_batch.is_some() && self.poisoned.is_none() {
            let _ = self.retry(now_ms);
        }
        if self.policy == FsyncPolicy::Everysec && self.poisoned.is_none() && !self.fsync_suppressed
        {
            self.maybe_request_fsync(now_ms);
        }
    }

    /// Fsyncs everything written so far, waiting for it (shutdown, or a
    /// library user asking for durability).
    pub fn sync_now(&mut self) -> Result<(), FlushError> {
        while self.bg.shared.in_progress.load(Ordering::SeqCst) {
            std::thread::sleep(std::time::Duration::from_millis(1));
        }
        self.check_background_error();
        if let Some(p) = &self.poisoned {
            return Err(FlushError::Poisoned(p.clone()));
        }
        let started = std::time::Instant::now();
        match self.syncer.sync_data() {
            Ok(()) => {
                self.bg
                    .shared
                    .synced_len
                    .store(self.good_len as i64, Ordering::SeqCst);
                let us = started.elapsed().as_micros() as u64;
                self.bg.shared.stats.record(us, crate::clock::now_ms());
                Ok(())
            }
            Err(e) => {
                let why = error_text(&e);
                self.poisoned = Some(why.clone());
                Err(FlushError::Poisoned(why))
            }
        }
    }

    /// Length of the file up to its last complete batch.
    pub fn len(&self) -> u64 {
        self.good_len
    }

    /// An fsync under `always` done: its duration, and the wait of the
    /// batch's clients (write + fsync).
    fn record_always_fsync(
        &mut self,
        write_started: std::time::Instant,
        fsync_started: std::time::Instant,
        now_ms: i64,
    ) {
        let fsync_us = fsync_started.elapsed().as_micros() as u64;
        let wait_us = write_started.elapsed().as_micros() as u64;
        self.bg.shared.stats.record(fsync_us, now_ms);
        let stats = &mut self.stats;
        stats.always_wait_max_us = stats.always_wait_max_us.max(wait_us);
        stats.pending_always_fsync_ms = stats.pending_always_fsync_ms.max(fsync_us / 1000);
    }

    /// The fsync figures (count, histogram, last success).
    pub fn fsync_stats(&self) -> super::aof_stats::FsyncSnapshot {
        self.bg.shared.stats.snapshot()
    }

    /// The writer's own figures.
    pub fn writer_stats(&self) -> &super::aof_stats::WriterStats {
        &self.stats
    }

    /// Bytes written and not yet known durable.
    pub fn unsynced_bytes(&self) -> u64 {
        (self.good_len as i64 - self.bg.shared.synced_len.load(Ordering::SeqCst)).max(0) as u64
    }

    /// The worst write, `always` fsync and background fsync durations
    /// (ms) since the last call, for the latency monitor's `aof-write`,
    /// `aof-fsync-always` and `hozon-aof-fsync` events.
    pub fn take_latency_samples(&mut self) -> [(&'static str, u64); 3] {
        let write = std::mem::take(&mut self.stats.pending_write_ms);
        let always = std::mem::take(&mut self.stats.pending_always_fsync_ms);
        let background = self.bg.shared.stats.take_worst_ms();
        [
            ("aof-write", write),
            ("aof-fsync-always", always),
            ("hozon-aof-fsync", background),
        ]
    }

    /// INFO persistence figures.
    pub fn status(&self) -> AofStatus {
        AofStatus {
            current_size: self.good_len,
            base_size: self.base_size,
            pending_bio_fsync: self.bg.shared.in_progress.load(Ordering::SeqCst),
            delayed_fsync: self.delayed_fsync,
            write_error: self.write_error.clone(),
            poisoned: self.poisoned.clone(),
        }
    }
}

/// An I/O error as C's `strerror` words it (what Redis prints), without
/// Rust's ` (os error N)` suffix.
pub fn error_text(e: &std::io::Error) -> String {
    let text = e.to_string();
    match text.find(" (os error ") {
        Some(i) => text[..i].to_string(),
        None => text,
    }
}
