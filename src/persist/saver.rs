//! SAVE and BGSAVE: writing `dump.hoz` from the engine.
//!
//! BGSAVE takes no fork. The keyspace starts a point-in-time capture
//! ([`Keyspace::begin_capture`]): from then on a key about to change for
//! the first time has its old value set aside, so the records the capture
//! emits are exactly the keyspace at that instant. The command thread
//! drives the capture a slice at a time ([`SaveState::step`], called by the
//! host between client requests and by cron), encoding records into
//! uncompressed blocks; a writer thread compresses, checksums and writes
//! the blocks to `temp-<pid>-<n>.hoz`, fsyncing as it goes, then renames it
//! over `dump.hoz` and fsyncs the directory. Clients see at most one slice
//! (about a millisecond) of work at a time.
//!
//! A failure anywhere leaves the previous `dump.hoz` untouched and removes
//! the temporary file; `stop-writes-on-bgsave-error` then refuses writes
//! while save points are configured, until a save succeeds.

use std::collections::VecDeque;
use std::path::Path;
use std::sync::mpsc::{self, Receiver, SyncSender, TryRecvError, TrySendError};
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::io::Io;
use super::snapshot::{self, BlockBuilder, FileWriter, HeaderInfo, RawBlock, Summary};
use crate::keyspace::Keyspace;

/// Blocks queued for the writer thread before the capture pauses (bounds
/// the memory a slow disk can make a BGSAVE hold).
const MAX_QUEUED_BLOCKS: usize = 4;
/// Records captured between two clock checks within a slice (few: one
/// record can be a large collection).
const RECORDS_PER_CHECK: usize = 16;
/// Redis's CONFIG_BGSAVE_RETRY_DELAY: a failed BGSAVE is retried by the
/// save points only after this long.
pub const RETRY_DELAY_MS: i64 = 5_000;

/// What INFO persistence and LASTSAVE report, and the running BGSAVE.
#[derive(Default)]
pub struct SaveState {
    /// Unix ms of the last successful save (the start time until one).
    pub last_save_ms: i64,
    /// The last BGSAVE succeeded (or none ran).
    pub last_bgsave_ok: bool,
    /// Why the last save failed.
    pub last_error: Option<String>,
    /// Seconds the last BGSAVE took, -1 before the first.
    pub last_bgsave_secs: i64,
    /// Successful saves since start (`rdb_saves`).
    pub saves: u64,
    /// Unix ms of the last BGSAVE attempt (save points wait
    /// [`RETRY_DELAY_MS`] after a failure).
    pub last_try_ms: i64,
    /// BGSAVE SCHEDULE: start one when nothing else runs.
    pub scheduled: bool,
    /// Keys loaded from the snapshot at startup (`rdb_last_load_keys_loaded`).
    pub last_load_keys: u64,
    /// Keys skipped at load because their TTL had passed.
    pub last_load_expired: u64,
    /// The BGSAVE in progress.
    pub job: Option<BgSave>,
}

/// How a finished BGSAVE ended, for the host's log.
#[derive(Debug)]
pub enum Finished {
    /// Written and renamed into place.
    Saved {
        /// Keys written.
        keys: u64,
        /// Bytes of the file.
        bytes: u64,
        /// The changes made while it ran (still unsaved).
        dirty_at_start: u64,
    },
    /// Failed; the previous file is intact.
    Failed(String),
}

enum ToWriter {
    Block(RawBlock),
    /// Encoded RDB bytes.
    Bytes(Vec<u8>),
    Finish(Box<snapshot::Stats>),
}

/// What a BGSAVE writes (`snapshot-format`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    /// `dump.hoz`.
    Native,
    /// An RDB file; `checksum` is `rdbchecksum`.
    Rdb {
        /// Value encoder.
        encoder: crate::rdb::writer::Encoder,
        /// Write the CRC-64.
        checksum: bool,
    },
}

/// Where and how a BGSAVE writes: `dir/file_name` (through a temp file
/// beside it), in `format`, with `io`.
pub struct SaveTarget<'a> {
    pub io: Arc<dyn Io>,
    pub dir: &'a Path,
    pub file_name: &'a str,
    pub format: Format,
    /// The replication position of the data at the capture instant (the
    /// file records it; docs/replication.md §4.1).
    pub position: Option<crate::repl::ids::Position>,
    /// The function libraries' sources at the capture instant.
    pub functions: Vec<Vec<u8>>,
    /// The access record a native snapshot gives each key (format 1.4).
    pub key_access: crate::rdb::writer::KeyAccessRecord,
}

/// The file a finished writer thread produced: (keys, bytes).
type Written = Result<(u64, u64), String>;

/// A background save in progress.
pub struct BgSave {
    /// Unix ms when it started.
    pub started_ms: i64,
    /// `dirty` when it started: what it saved.
    pub dirty_at_start: u64,
    /// Records captured so far (`current_save_keys_processed`).
    pub keys_processed: u64,
    /// Keys in the keyspace when it started (`current_save_keys_total`).
    pub keys_total: u64,
    builder: BlockBuilder,
    /// The RDB encoder and each database's sizes (`Format::Rdb`).
    rdb: Option<(crate::rdb::writer::RecordEncoder, Vec<(u64, u64)>)>,
    queued: VecDeque<ToWriter>,
    to_writer: SyncSender<ToWriter>,
    result: Receiver<Written>,
    capture_done: bool,
    finish_sent: bool,
}

impl SaveState {
    /// True while a BGSAVE runs.
    pub fn in_progress(&self) -> bool {
        self.job.is_some()
    }

    /// True while the running BGSAVE can only wait for its writer thread:
    /// the blocks queued for it are at the limit, or the capture is over
    /// and the file is being finished. The event loop sleeps instead of
    /// stepping it.
    pub fn waits_for_writer(&self) -> bool {
        self.job
            .as_ref()
            .is_some_and(|job| job.capture_done || job.queued.len() >= MAX_QUEUED_BLOCKS)
    }

    /// Starts a BGSAVE of `keyspace` into `target`; `dirty` is the
    /// engine's change counter now (what the save will have saved).
    pub fn start(
        &mut self,
        keyspace: &mut Keyspace,
        target: SaveTarget<'_>,
        dirty: u64,
        now_ms: i64,
    ) {
        let SaveTarget {
            io,
            dir,
            file_name,
            format,
            position,
            functions,
            key_access,
        } = target;
        debug_assert!(self.job.is_none(), "one BGSAVE at a time");
        self.last_try_ms = now_ms;
        let (to_writer, from_saver) = mpsc::sync_channel(MAX_QUEUED_BLOCKS);
        let (result_tx, result) = mpsc::sync_channel(1);
        let temp = snapshot::temp_path(dir, file_name);
        let target = dir.join(file_name);
        let header = HeaderInfo {
            position,
            functions: functions.clone(),
            key_access,
            ..HeaderInfo::new(now_ms, keyspace.db_count())
        };
        let spawned = std::thread::Builder::new()
            .name("hozon-bgsave".into())
            .spawn(move || {
                lower_thread_priority();
                let outcome = write_file(&io, &temp, &target, header, format, from_saver);
                if outcome.is_err() {
                    let _ = io.remove(&temp);
                }
                let _ = result_tx.send(outcome);
            });
        if let Err(e) = spawned {
            self.fail(format!("cannot start the background save thread: {e}"));
            return;
        }
        let rdb = match format {
            Format::Rdb { encoder, .. } => Some((
                {
                    let mut records = crate::rdb::writer::RecordEncoder::with_header_and_position(
                        encoder,
                        now_ms,
                        0,
                        false,
                        position.as_ref(),
                    );
                    records.put_functions(&functions);
                    records
                },
                keyspace
                    .iter()
                    .map(|db| (db.len() as u64, db.expires_len() as u64))
                    .collect(),
            )),
            Format::Native => None,
        };
        keyspace.begin_capture();
        self.job = Some(BgSave {
            started_ms: now_ms,
            dirty_at_start: dirty,
            keys_processed: 0,
            keys_total: keyspace.total_keys() as u64,
            builder: BlockBuilder::new().with_key_access(key_access),
            rdb,
            queued: VecDeque::new(),
            to_writer,
            result,
            capture_done: false,
            finish_sent: false,
        });
    }

    /// Advances the running BGSAVE for about `budget`: hands finished
    /// blocks to the writer, captures more records, and collects the
    /// writer's result. Returns how the save ended, once.
    pub fn step(
        &mut self,
        keyspace: &mut Keyspace,
        budget: Duration,
        now_ms: i64,
    ) -> Option<Finished> {
        let job = self.job.as_mut()?;
        let started = Instant::now();
        hand_over(&mut job.queued, &job.to_writer);
        while !job.capture_done && job.queued.len() < MAX_QUEUED_BLOCKS {
            let builder = &mut job.builder;
            let rdb = &mut job.rdb;
            let queued = &mut job.queued;
            let mut captured = 0u64;
            let done = keyspace.capture_step(RECORDS_PER_CHECK, &mut |db, key, value, expire| {
                captured += 1;
                match rdb.as_mut() {
                    Some((records, sizes)) => {
                        records.push_key(db, key, value, expire, |db| {
                            sizes.get(db).copied().unwrap_or((0, 0))
                        });
                        if let Some(chunk) = records.take_full() {
                            queued.push_back(ToWriter::Bytes(chunk));
                        }
                    }
                    None => queued.extend(
                        builder
                            .push_key(db, key, value, expire)
                            .into_iter()
                            .map(ToWriter::Block),
                    ),
                }
            });
            job.keys_processed += captured;
            if done {
                job.capture_done = true;
                if let Some((records, _)) = job.rdb.as_mut() {
                    job.queued.push_back(ToWriter::Bytes(records.take()));
                }
                if let Some(block) = job.builder.finish() {
                    job.queued.push_back(ToWriter::Block(block));
                }
            }
            hand_over(&mut job.queued, &job.to_writer);
            // A paced capture (rdb-key-save-delay) waits for its next key.
            if started.elapsed() >= budget || keyspace.capture_wait().is_some() {
                break;
            }
        }
        if job.capture_done && job.queued.is_empty() && !job.finish_sent {
            let mut stats = Box::new(job.builder.stats().clone());
            if let Some((records, _)) = &job.rdb {
                stats.keys = records.keys;
            }
            match job.to_writer.try_send(ToWriter::Finish(stats)) {
                Ok(()) => job.finish_sent = true,
                Err(TrySendError::Full(_)) => {}
                Err(TrySendError::Disconnected(_)) => job.finish_sent = true,
            }
        }
        let outcome = match job.result.try_recv() {
            Ok(outcome) => outcome,
            Err(TryRecvError::Empty) => return None,
            Err(TryRecvError::Disconnected) => Err("the background save thread ended".into()),
        };
        let job = self.job.take()?;
        keyspace.end_capture();
        let secs = ((now_ms - job.started_ms) as f64 / 1000.0).round() as i64;
        self.last_bgsave_secs = secs;
        Some(match outcome {
            Ok((keys, bytes)) => {
                self.succeed(now_ms);
                Finished::Saved {
                    keys,
                    bytes,
                    dirty_at_start: job.dirty_at_start,
                }
            }
            Err(cause) => {
                self.fail(cause.clone());
                Finished::Failed(cause)
            }
        })
    }

    /// Stops the running BGSAVE (FLUSHALL, SHUTDOWN, a synchronous SAVE
    /// after it): its temporary file is removed by the writer thread.
    pub fn abort(&mut self, keyspace: &mut Keyspace) {
        if let Some(job) = self.job.take() {
            keyspace.end_capture();
            // Dropping the channel makes the writer stop and clean up.
            drop(job);
        }
    }

    /// Records a successful save at `now_ms`.
    pub fn succeed(&mut self, now_ms: i64) {
        self.last_save_ms = now_ms;
        self.last_bgsave_ok = true;
        self.last_error = None;
        self.saves += 1;
    }

    /// Records a failed save.
    pub fn fail(&mut self, cause: String) {
        self.last_bgsave_ok = false;
        self.last_error = Some(cause);
    }
}

/// How many nice steps the background writers (BGSAVE's and the AOF
/// rewrite's) run below the thread that started them. While a capture
/// runs, the command thread, the writer and the clients want the cores;
/// at the same nice a client woken by its reply waits out the writer's
/// scheduler slice when the writer holds the free core, ten steps lower
/// it takes the core at once (PING p99 during a BGSAVE of 2M keys: about
/// 0.31 ms -> 0.13-0.22 ms, docs/cores.md). Not 19: a writer at nice 19
/// beside a busy command thread and another busy process got so little
/// CPU that a save took 20 s instead of 3.6 s; at 10 it took 3.6 s.
pub(crate) const WRITER_NICE_STEPS: i32 = 10;

/// Lowers the calling thread (a background writer, which inherited the
/// nice value of the thread that spawned it) by [`WRITER_NICE_STEPS`],
/// to at most 19. On Linux a thread has its own nice value; elsewhere
/// `setpriority` would renice the whole process, so it does nothing
/// there. Raising one's own nice value needs no privilege; a failure
/// changes nothing else and is ignored.
pub(crate) fn lower_thread_priority() {
    #[cfg(target_os = "linux")]
    // SAFETY: getpriority and setpriority take plain integers; `who` 0 is
    // the calling thread. getpriority's -1 is also a valid value: errno
    // is cleared first so that a failure is told apart.
    unsafe {
        *libc::__errno_location() = 0;
        let own = libc::getpriority(libc::PRIO_PROCESS, 0);
        if own == -1 && *libc::__errno_location() != 0 {
            return;
        }
        libc::setpriority(libc::PRIO_PROCESS, 0, (own + WRITER_NICE_STEPS).min(19));
    }
}

/// Moves `queued` messages to a background thread's bounded channel
/// without waiting: what does not fit stays queued, in order. When the
/// thread is gone the queue is dropped (its error arrives on its result
/// channel). Shared by BGSAVE and the AOF rewrite.
pub(crate) fn hand_over<T>(queued: &mut VecDeque<T>, tx: &SyncSender<T>) {
    while let Some(message) = queued.pop_front() {
        match tx.try_send(message) {
            Ok(()) => {}
            Err(TrySendError::Full(message)) => {
                queued.push_front(message);
                return;
            }
            Err(TrySendError::Disconnected(_)) => {
                queued.clear();
                return;
            }
        }
    }
}

/// The writer thread: blocks in, file out (renamed into place and the
/// directory fsynced), or an error with the temporary file removed.
fn write_file(
    io: &Arc<dyn Io>,
    temp: &Path,
    target: &Path,
    header: HeaderInfo,
    format: Format,
    blocks: Receiver<ToWriter>,
) -> Written {
    if let Format::Rdb { checksum, .. } = format {
        return write_rdb_file(io, temp, target, checksum, blocks);
    }
    let mut writer = FileWriter::create(Arc::clone(io), temp, header).map_err(|e| e.to_string())?;
    loop {
        match blocks.recv() {
            Ok(ToWriter::Block(block)) => {
                writer.write_block(block).map_err(|e| e.to_string())?;
            }
            Ok(ToWriter::Finish(stats)) => {
                let summary: Summary = writer.finish(&stats).map_err(|e| e.to_string())?;
                snapshot::commit(io.as_ref(), temp, target).map_err(|e| e.to_string())?;
                return Ok((summary.stats.keys, summary.file_len));
            }
            Ok(ToWriter::Bytes(_)) => return Err("background save protocol error".into()),
            Err(_) => return Err("background save aborted".into()),
        }
    }
}

/// The writer thread of an RDB BGSAVE.
fn write_rdb_file(
    io: &Arc<dyn Io>,
    temp: &Path,
    target: &Path,
    checksum: bool,
    chunks: Receiver<ToWriter>,
) -> Written {
    let mut file = super::rdb_file::RdbFile::create(Arc::clone(io), temp)?;
    loop {
        match chunks.recv() {
            Ok(ToWriter::Bytes(bytes)) => file.write(&bytes)?,
            Ok(ToWriter::Finish(stats)) => {
                let keys = stats.keys;
                let len = file.finish(checksum)?;
                snapshot::commit(io.as_ref(), temp, target).map_err(|e| e.to_string())?;
                return Ok((keys, len));
            }
            Ok(ToWriter::Block(_)) => return Err("background save protocol error".into()),
            Err(_) => return Err("background save aborted".into()),
        }
    }
}

#[cfg(test)]
mod tests {
    use std::io;
    use std::sync::{Condvar, Mutex};

    use super::*;
    use crate::persist::io::{AppendFile, FaultyIo};
    use crate::types::{Blob, Value};

    /// An [`Io`] whose `open_append` waits until the gate opens: a writer
    /// thread held at its first step (a slow disk).
    struct GatedIo {
        inner: FaultyIo,
        open: Arc<(Mutex<bool>, Condvar)>,
    }

    impl Io for GatedIo {
        fn open_append(&self, path: &Path) -> io::Result<Box<dyn AppendFile>> {
            let (lock, opened) = &*self.open;
            let mut is_open = lock.lock().unwrap();
            while !*is_open {
                is_open = opened.wait(is_open).unwrap();
            }
            self.inner.open_append(path)
        }
        fn read_all(&self, path: &Path) -> io::Result<Vec<u8>> {
            self.inner.read_all(path)
        }
        fn exists(&self, path: &Path) -> bool {
            self.inner.exists(path)
        }
        fn remove(&self, path: &Path) -> io::Result<()> {
            self.inner.remove(path)
        }
        fn rename(&self, from: &Path, to: &Path) -> io::Result<()> {
            self.inner.rename(from, to)
        }
        fn sync_dir(&self, dir: &Path) -> io::Result<()> {
            self.inner.sync_dir(dir)
        }
        fn list_dir(&self, dir: &Path) -> io::Result<Vec<String>> {
            self.inner.list_dir(dir)
        }
        fn truncate(&self, path: &Path, len: u64) -> io::Result<()> {
            self.inner.truncate(path, len)
        }
    }

    /// The nice values of this process's threads named `name`.
    #[cfg(target_os = "linux")]
    fn nice_of_threads(name: &str) -> Vec<i32> {
        let mut found = Vec::new();
        for task in std::fs::read_dir("/proc/self/task").unwrap().flatten() {
            let comm = std::fs::read_to_string(task.path().join("comm")).unwrap_or_default();
            if comm.trim_end() != name {
                continue;
            }
            let stat = std::fs::read_to_string(task.path().join("stat")).unwrap_or_default();
            // Fields after the command's closing parenthesis: state is
            // field 3, nice field 19.
            let rest = &stat[stat.rfind(')').unwrap() + 2..];
            found.push(rest.split(' ').nth(16).unwrap().parse().unwrap());
        }
        found
    }

    /// The calling thread's nice value.
    #[cfg(target_os = "linux")]
    fn own_nice() -> i32 {
        // SAFETY: getpriority takes plain integers; `who` 0 is this thread.
        unsafe { libc::getpriority(libc::PRIO_PROCESS, 0) }
    }

    /// The BGSAVE writer (held at its file's open, so alive) runs
    /// [`WRITER_NICE_STEPS`] below the thread stepping the capture, which
    /// keeps its own (`own`, read before the save started).
    #[cfg(target_os = "linux")]
    fn writer_runs_lower(own: i32) {
        let wanted = (own + WRITER_NICE_STEPS).min(19);
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            let nices = nice_of_threads("hozon-bgsave");
            if !nices.is_empty() && nices.iter().all(|&n| n == wanted) {
                break;
            }
            assert!(
                Instant::now() < deadline,
                "the writer threads' nice values: {nices:?}, wanted {wanted}"
            );
            std::thread::sleep(Duration::from_millis(5));
        }
        assert_eq!(own_nice(), own, "the stepping thread was reniced");
    }

    /// The event loop sleeps while `waits_for_writer` is true, so it must
    /// be true exactly when a step can do nothing: here the writer thread
    /// is held, the queue fills, and further steps capture nothing until
    /// the writer goes on; once the file is done it is false again.
    #[test]
    fn a_held_writer_is_waited_for_not_stepped() {
        let mut ks = Keyspace::new(1);
        // 4 MiB of incompressible-enough values: more blocks than the
        // channel and the queue hold together.
        let mut rng = crate::rand::Rng::with_seed(7);
        for i in 0..4096u32 {
            let value: Vec<u8> = (0..1024).map(|_| rng.next_u64() as u8).collect();
            ks.db_mut(0)
                .insert_new(format!("k{i}").as_bytes(), Value::Str(Blob::from(value)));
        }
        let faulty = FaultyIo::new();
        let gate = Arc::new((Mutex::new(false), Condvar::new()));
        let io: Arc<dyn Io> = Arc::new(GatedIo {
            inner: faulty.clone(),
            open: Arc::clone(&gate),
        });
        #[cfg(target_os = "linux")]
        let own = own_nice();
        let mut save = SaveState::default();
        save.start(
            &mut ks,
            SaveTarget {
                io,
                dir: Path::new("/d"),
                file_name: "dump.hoz",
                format: Format::Native,
                position: None,
                functions: Vec::new(),
                key_access: crate::rdb::writer::KeyAccessRecord::None,
            },
            0,
            1,
        );
        assert!(save.in_progress());
        assert!(!save.waits_for_writer(), "nothing queued yet");
        let step =
            |save: &mut SaveState, ks: &mut Keyspace| save.step(ks, Duration::from_millis(50), 1);
        let mut steps = 0;
        while !save.waits_for_writer() {
            assert!(step(&mut save, &mut ks).is_none());
            steps += 1;
            assert!(steps < 1000, "the queue never filled");
        }
        let captured = save.job.as_ref().unwrap().keys_processed;
        assert!(captured < 4096, "held at {captured} keys");
        #[cfg(target_os = "linux")]
        writer_runs_lower(own);
        for _ in 0..10 {
            assert!(step(&mut save, &mut ks).is_none());
            assert!(save.waits_for_writer());
        }
        assert_eq!(
            save.job.as_ref().unwrap().keys_processed,
            captured,
            "a step while the writer is held captures nothing"
        );
        *gate.0.lock().unwrap() = true;
        gate.1.notify_all();
        let deadline = Instant::now() + Duration::from_secs(60);
        let finished = loop {
            if let Some(finished) = step(&mut save, &mut ks) {
                break finished;
            }
            assert!(Instant::now() < deadline, "the save did not finish");
            std::thread::sleep(Duration::from_millis(1));
        };
        assert!(
            matches!(finished, Finished::Saved { keys: 4096, .. }),
            "finished as {finished:?}"
        );
        assert!(!save.waits_for_writer());
        assert!(faulty.exists(Path::new("/d/dump.hoz")));
    }
}
