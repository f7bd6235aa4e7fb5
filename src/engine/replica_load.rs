//! A full sync's payload loaded off the event loop (docs/replication.md
//! §5.3): a thread owns the new keyspace while it verifies and loads the
//! payload (from its temporary file or from memory) and, with
//! `appendonly yes`, makes the new AOF under a temporary name: the
//! payload itself as an RDB preamble, fsynced by a second thread during
//! the load, then `#hozon-aof 1` (or, when that fails, the dataset as
//! commands). The event loop meanwhile serves the old data, and when
//! the thread is done it commits the result (`Engine::commit_payload`).
//!
//! Cancelling (a change of master, a lost link) drops the receiving end:
//! the thread stops at its next key, and whatever it made (the keyspace,
//! the temporary AOF) is dropped and removed on its own thread.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc;
use std::sync::Arc;

use super::payload_feed::{PayloadFeed, StreamedPayload};
use super::Engine;
use crate::clock::now_ms;
use crate::core::sync_load::{LoadCounters, SyncLoad};
use crate::keyspace::Keyspace;
use crate::persist::aof::FILE_HEADER;
use crate::persist::io::{DurableFile, Io};

/// How many temporary AOFs this process wrote (their names).
static TEMP_AOFS: AtomicU64 = AtomicU64::new(0);

/// Where the payload's bytes are.
pub(crate) enum PayloadSource {
    /// A temporary file, verified whole (`rdb::reader::check_file`) before
    /// it is loaded.
    File(PathBuf),
    /// Memory (`repl-diskless-load on-empty-db`/`swapdb`): loaded at once,
    /// into a keyspace that replaces the old one only when complete.
    Memory(Vec<u8>),
    /// A file still being received, read while it arrives (the load is
    /// the verification: its keyspace is kept only when the whole payload
    /// came and loaded, CRC included).
    Streamed(StreamedPayload),
}

/// What a finished load hands to the event loop.
pub(crate) struct LoadedPayload {
    /// The new dataset.
    pub(crate) keyspace: Keyspace,
    /// The payload's function libraries (sources).
    pub(crate) functions: Vec<Vec<u8>>,
    /// The payload's RDB version.
    pub(crate) version: u16,
    /// The new AOF, written and fsynced, not yet renamed into place
    /// (`appendonly yes` when the load started): the payload as an RDB
    /// preamble, then `#hozon-aof 1`, or, when that failed, the keyspace
    /// as commands.
    pub(crate) aof_temp: Option<PathBuf>,
    /// Lines for the log (the preamble path failed and the AOF was
    /// written from the keyspace).
    pub(crate) warnings: Vec<String>,
}

/// A loaded payload: the keyspace, the RDB version, the payload's length
/// and the function libraries' sources.
type Loaded = (Keyspace, u16, u64, Vec<Vec<u8>>);

/// A load running on its thread.
pub(crate) struct PayloadLoad {
    result: mpsc::Receiver<Result<LoadedPayload, String>>,
    cancel: Arc<AtomicBool>,
    io: Arc<dyn Io>,
    /// The payload's arrival, when it is read while it arrives.
    feed: Option<Arc<PayloadFeed>>,
    /// What INFO reports about it.
    pub(crate) progress: SyncLoad,
}

impl PayloadLoad {
    /// The thread's result once it is done.
    pub(crate) fn poll(&mut self) -> Option<Result<LoadedPayload, String>> {
        match self.result.try_recv() {
            Ok(result) => Some(result),
            Err(mpsc::TryRecvError::Empty) => None,
            Err(mpsc::TryRecvError::Disconnected) => {
                Some(Err("the loading thread stopped without a result".into()))
            }
        }
    }

    /// Abandons the load: the thread stops at its next key; a result
    /// already sent is discarded here (its temporary AOF removed, its
    /// keyspace freed on a thread).
    pub(crate) fn cancel(self) {
        self.cancel.store(true, Ordering::SeqCst);
        if let Some(feed) = &self.feed {
            feed.fail("the load was cancelled");
        }
        if let Ok(Ok(loaded)) = self.result.try_recv() {
            discard(self.io.as_ref(), loaded);
        }
    }
}

/// Drops a result nobody will commit: its temporary AOF is removed and
/// its keyspace freed on a thread of its own.
pub(crate) fn discard(io: &dyn Io, loaded: LoadedPayload) {
    if let Some(temp) = &loaded.aof_temp {
        let _ = io.remove(temp);
    }
    drop_in_background(loaded.keyspace);
}

/// Frees a keyspace on a thread of its own (a large dataset takes a
/// while to free).
pub(crate) fn drop_in_background(keyspace: Keyspace) {
    let spawned = std::thread::Builder::new()
        .name("hozon-free".into())
        .spawn(move || drop(keyspace));
    // Without a thread the keyspace was dropped with the closure.
    drop(spawned);
}

/// What the thread needs from the engine, copied when it starts.
struct Job {
    source: PayloadSource,
    io: Arc<dyn Io>,
    options: crate::rdb::reader::Options,
    databases: usize,
    /// The temporary AOF to write (`appendonly yes`).
    aof_temp: Option<PathBuf>,
    counters: Arc<LoadCounters>,
    cancel: Arc<AtomicBool>,
    /// `key-load-delay` (a test setting): µs after each key.
    key_load_delay: i32,
    /// An LFU policy: which access records of the keys apply.
    lfu: bool,
}

impl Engine {
    /// Starts loading a payload of `total_bytes` on a thread of its own.
    pub(crate) fn start_payload_load(
        &mut self,
        source: PayloadSource,
        total_bytes: u64,
    ) -> PayloadLoad {
        let now = now_ms();
        let progress = SyncLoad::new(now, total_bytes);
        let io = Arc::clone(&self.core.io);
        let databases = self.core.keyspace.db_count();
        let aof_temp = self.core.aof.is_some().then(|| {
            let n = TEMP_AOFS.fetch_add(1, Ordering::Relaxed);
            self.core
                .config
                .dir
                .join(format!("temp-sync-aof-{}-{n}.aof", std::process::id()))
        });
        let cancel = Arc::new(AtomicBool::new(false));
        let feed = match &source {
            PayloadSource::Streamed(streamed) => Some(Arc::clone(&streamed.feed)),
            _ => None,
        };
        let job = Job {
            source,
            io: Arc::clone(&io),
            options: crate::rdb::reader::Options {
                limits: self.core.config.limits,
                databases,
                // A replica keeps keys past their TTL: the master's DELs go.
                skip_expired_before_ms: None,
                now_ms: now,
            },
            databases,
            aof_temp,
            counters: Arc::clone(&progress.counters),
            cancel: Arc::clone(&cancel),
            key_load_delay: self.core.config.key_load_delay,
            lfu: self.core.policy().is_lfu(),
        };
        let (tx, rx) = mpsc::sync_channel(1);
        let spawned = std::thread::Builder::new()
            .name("hozon-sync-load".into())
            .spawn(move || {
                let io = Arc::clone(&job.io);
                let result = run(job);
                if let Err(mpsc::SendError(Ok(loaded))) = tx.send(result) {
                    // Cancelled: nobody commits it.
                    discard(io.as_ref(), loaded);
                }
            });
        // Without a thread the sender went with the closure: `poll`
        // reports the failure.
        drop(spawned);
        PayloadLoad {
            result: rx,
            cancel,
            io,
            feed,
            progress,
        }
    }
}

/// The thread's work: verify (file source), load, and with `appendonly
/// yes` make the new AOF. A failure removes the temporary AOF.
fn run(job: Job) -> Result<LoadedPayload, String> {
    let io = Arc::clone(&job.io);
    let temp = job.aof_temp.clone();
    let result = load_and_write(job);
    if result.is_err() {
        if let Some(temp) = &temp {
            let _ = io.remove(temp);
        }
    }
    result
}

/// Bytes the preamble thread writes between two looks at the cancel flag.
const PREAMBLE_CHUNK: usize = 4 << 20;

/// Verifies and loads the payload; with `appendonly yes` the payload
/// itself becomes the new AOF's RDB preamble (docs/persistence.md, "An
/// AOF that starts with a preamble"), made durable by a second thread
/// while this one loads: the payload's file is fsynced (file source) or
/// the bytes are written to the temporary AOF and fsynced (memory). Once
/// the load succeeded, `#hozon-aof 1` follows the image and the file is
/// fsynced (and the payload's file renamed to the temporary AOF's name).
/// When that path fails, the AOF is written from the loaded keyspace
/// instead (`write_aof_image`), with a warning for the log.
fn load_and_write(job: Job) -> Result<LoadedPayload, String> {
    let cancelled = || job.cancel.load(Ordering::Relaxed);
    let stopped = || "the load was cancelled".to_string();
    let payload_path = match &job.source {
        PayloadSource::File(path) => Some(path.clone()),
        PayloadSource::Streamed(streamed) => Some(streamed.path.clone()),
        PayloadSource::Memory(_) => None,
    };
    let mut mapped = None;
    let (data, payload_file): (&[u8], Option<&Path>) = match &job.source {
        PayloadSource::File(path) => {
            let bytes = job
                .io
                .map(path)
                .map_err(|e| format!("reading {}: {e}", path.display()))?;
            (mapped.insert(bytes), Some(path.as_path()))
        }
        PayloadSource::Streamed(streamed) => (&streamed.window[..], Some(streamed.path.as_path())),
        PayloadSource::Memory(bytes) => (bytes.as_slice(), None),
    };
    let feed = match &job.source {
        PayloadSource::Streamed(streamed) => Some(streamed.feed.as_ref()),
        _ => None,
    };
    // Set when the load fails: the preamble thread stops.
    let failed = AtomicBool::new(false);
    let (loaded, preamble) = std::thread::scope(|scope| {
        let preamble = job.aof_temp.as_deref().map(|temp| {
            let stop = || cancelled() || failed.load(Ordering::Relaxed);
            let io = Arc::clone(&job.io);
            std::thread::Builder::new()
                .name("hozon-sync-aof".into())
                .spawn_scoped(scope, move || {
                    // A payload still arriving is made durable once whole.
                    let data = match feed {
                        Some(feed) => &data[..arrived_len(feed)?],
                        None => data,
                    };
                    if !crate::rdb::reader::is_rdb(data) {
                        return Err("the payload is not an RDB image".to_string());
                    }
                    write_preamble(io, data, payload_file, temp, stop)
                })
        });
        let loaded = match feed {
            Some(feed) => load_streamed(&job, data, feed),
            None => verify_and_load(&job, data, payload_file.is_some()),
        };
        if loaded.is_err() {
            failed.store(true, Ordering::Relaxed);
            if let Some(feed) = feed {
                // The preamble thread waits for the payload no more.
                feed.fail("the load failed");
            }
        }
        let preamble = match preamble {
            None => Err("no append only file to make".to_string()),
            Some(Err(e)) => Err(format!("no thread to write it: {e}")),
            Some(Ok(thread)) => thread
                .join()
                .unwrap_or_else(|_| Err("its thread panicked".to_string())),
        };
        (loaded, preamble)
    });
    let (keyspace, version, payload_len, functions) = loaded?;
    drop(mapped);
    drop(job.source);
    let mut warnings = Vec::new();
    if let Some(temp) = &job.aof_temp {
        if cancelled() {
            return Err(stopped());
        }
        let finished = preamble.and_then(|file| {
            finish_preamble(
                job.io.as_ref(),
                file,
                payload_len,
                payload_path.as_deref(),
                temp,
            )
        });
        if let Err(reason) = finished {
            if cancelled() {
                return Err(stopped());
            }
            warnings.push(format!(
                "The payload could not become the new append only file's preamble ({reason}): \
                 writing the new append only file from the loaded data"
            ));
            write_aof_image(job.io.as_ref(), &keyspace, &functions, temp)
                .map_err(|e| format!("writing the new append only file: {e}"))?;
        }
    }
    Ok(LoadedPayload {
        keyspace,
        functions,
        version,
        aof_temp: job.aof_temp,
        warnings,
    })
}

/// Verifies (file source: `check_file`, the whole file) and loads the
/// payload into a new keyspace; returns it with the RDB version.
fn verify_and_load(job: &Job, data: &[u8], verify: bool) -> Result<Loaded, String> {
    let cancelled = || job.cancel.load(Ordering::Relaxed);
    let stopped = || "the load was cancelled".to_string();
    if verify {
        crate::rdb::reader::check_file(data, &job.options).map_err(|e| e.to_string())?;
    }
    if cancelled() {
        return Err(stopped());
    }
    load_into_keyspace(job, data.len() as u64, &mut |sink, resize| {
        crate::rdb::reader::load_with_hints(data, &job.options, sink, resize)
    })
}

/// Loads a payload while it arrives (`window`: its mapping, `feed`: how
/// far it came); the keyspace, the RDB version and the payload's length.
fn load_streamed(job: &Job, window: &[u8], feed: &PayloadFeed) -> Result<Loaded, String> {
    let mut arrived = None;
    let loaded = load_into_keyspace(job, u64::MAX, &mut |sink, resize| {
        let summary = crate::rdb::reader::load_streaming(window, feed, &job.options, sink, resize)?;
        // The payload ends with its checksum: whatever follows is damage.
        arrived = Some(
            feed.wait_complete()
                .map_err(|message| crate::rdb::reader::RdbError {
                    kind: crate::rdb::reader::ErrorKind::Truncated,
                    offset: summary.len as u64,
                    message,
                    key: None,
                })?,
        );
        Ok(summary)
    });
    let (keyspace, version, len, functions) = loaded?;
    match arrived {
        Some(total) if total == len => Ok((keyspace, version, len, functions)),
        Some(total) => Err(format!("{} bytes follow the RDB checksum", total - len)),
        None => Err("the payload did not arrive".to_string()),
    }
}

/// The sink and the RESIZEDB hints of a load into a new keyspace;
/// `run` is the reader, `expected_len` the payload's length when known
/// (u64::MAX: checked by the caller).
type Reader<'r> = dyn FnMut(
        &mut dyn FnMut(crate::keyspace::LoadedKey) -> crate::rdb::reader::SinkResult,
        &mut dyn FnMut(usize, u64, u64),
    ) -> Result<crate::rdb::reader::Summary, crate::rdb::reader::RdbError>
    + 'r;

/// Runs `run` into a new keyspace (the cancel flag checked at every
/// key, progress counted); the keyspace, the RDB version and the
/// payload's length.
fn load_into_keyspace(
    job: &Job,
    expected_len: u64,
    run: &mut Reader<'_>,
) -> Result<Loaded, String> {
    let cancelled = || job.cancel.load(Ordering::Relaxed);
    let stopped = || "the load was cancelled".to_string();
    let mut keyspace = Keyspace::new(job.databases);
    let counters = &job.counters;
    let cell = std::cell::RefCell::new(&mut keyspace);
    let summary = run(
        &mut |k| {
            if cancelled() {
                return Err(stopped());
            }
            let count = counters.keys_loaded.fetch_add(1, Ordering::Relaxed) + 1;
            cell.borrow_mut()
                .db_mut(k.db)
                .insert_loaded(
                    k.key,
                    k.value,
                    k.expire_ms,
                    k.access.and_then(|a| a.field(job.lfu, job.options.now_ms)),
                )
                .map_err(|_| "the key appears twice in the file".to_string())?;
            super::open::key_load_pause(job.key_load_delay, count);
            Ok(())
        },
        &mut |db, keys, expiring| {
            counters.keys_expected.fetch_add(keys, Ordering::Relaxed);
            let mut keyspace = cell.borrow_mut();
            let db = keyspace.db_mut(db);
            if db.is_empty() {
                db.reserve(keys as usize, expiring as usize);
            }
        },
    )
    .map_err(|e| e.to_string())?;
    let len = summary.len as u64;
    if expected_len != u64::MAX && len != expected_len {
        return Err(format!(
            "{} bytes follow the RDB checksum",
            expected_len - len
        ));
    }
    let functions = summary
        .functions
        .iter()
        .map(|c| c.as_bytes().to_vec())
        .collect();
    Ok((keyspace, summary.version, len, functions))
}

/// The payload's length once all of it arrived.
fn arrived_len(feed: &PayloadFeed) -> Result<usize, String> {
    feed.wait_complete().map(|n| n as usize)
}

/// The preamble thread: makes the payload's bytes durable while the load
/// runs. File source: the payload's file is fsynced (it becomes the new
/// AOF). Memory: the bytes are written to `temp` (fsynced every 32 MiB
/// and at the end). Returns the file, open for appending.
fn write_preamble(
    io: Arc<dyn Io>,
    data: &[u8],
    payload_file: Option<&Path>,
    temp: &Path,
    stop: impl Fn() -> bool,
) -> Result<DurableFile, String> {
    let mut file = match payload_file {
        Some(path) => DurableFile::reopen(io, path).map_err(|e| e.to_string())?,
        None => {
            let mut file = DurableFile::create(io, temp).map_err(|e| e.to_string())?;
            for chunk in data.chunks(PREAMBLE_CHUNK) {
                if stop() {
                    return Err("stopped".into());
                }
                file.append(chunk).map_err(|e| e.to_string())?;
                file.sync_if_due().map_err(|e| e.to_string())?;
            }
            file
        }
    };
    file.sync().map_err(|e| e.to_string())?;
    Ok(file)
}

/// Ends the preamble once the payload loaded: checks it holds the
/// payload's `payload_len` bytes, appends `#hozon-aof 1` (the log part
/// starts there) and fsyncs; the payload's file (file source) takes the
/// temporary AOF's name. The rename into place is the commit.
fn finish_preamble(
    io: &dyn Io,
    mut file: DurableFile,
    payload_len: u64,
    payload_file: Option<&Path>,
    temp: &Path,
) -> Result<(), String> {
    if file.len() != payload_len {
        return Err(format!(
            "the file holds {} bytes, the payload {payload_len}",
            file.len()
        ));
    }
    file.append(FILE_HEADER).map_err(|e| e.to_string())?;
    file.finish().map_err(|e| e.to_string())?;
    if let Some(path) = payload_file {
        io.rename(path, temp)
            .map_err(|e| format!("renaming {} to {}: {e}", path.display(), temp.display()))?;
    }
    Ok(())
}

/// Writes `keyspace` as a complete AOF to `temp` and fsyncs it (the
/// rename into place is the commit, on the event loop). Keys already past
/// their TTL are left out. A failure removes the file.
pub(crate) fn write_aof_image(
    io: &dyn Io,
    keyspace: &Keyspace,
    functions: &[Vec<u8>],
    temp: &std::path::Path,
) -> Result<(), String> {
    let written = (|| -> std::io::Result<()> {
        let mut file = io.open_append(temp)?;
        file.set_len(0)?;
        crate::persist::rewrite::write_keyspace(keyspace, functions, now_ms(), &mut |chunk| {
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
    written.map_err(|e| {
        let _ = io.remove(temp);
        crate::persist::writer::error_text(&e)
    })
}

#[cfg(test)]
#[path = "replica_load_tests.rs"]
mod tests;
