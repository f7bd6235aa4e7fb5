//! The full sync's payload on the replica (docs/replication.md §5.3).
//!
//! Where the bytes go follows `repl-diskless-load`: `disabled` (and
//! `on-empty-db` while keys exist) writes them to `temp-sync-<pid>-<n>.rdb`
//! in `dir`; `swapdb` (and `on-empty-db` with no keys) keeps them in
//! memory. Once complete, the payload is loaded into a new keyspace on a
//! thread of its own (`engine::replica_load`) while the event loop keeps
//! serving the old data, writes `\n` to the master each second and holds
//! the stream bytes that follow. The load's result is committed here, on
//! the event loop (`Engine::commit_payload`), then the stream starts. Any
//! failure removes the file, keeps the old data and starts a new attempt;
//! a change of master or a lost link cancels the load (`socket.rs`).

use super::{queue_ack, MasterLink, PayloadSink, Phase, SYNC_FILES};
use crate::engine::{now_ms, PayloadSource, StreamedPayload, UNKNOWN_LENGTH_WINDOW};
use crate::repl::handshake::Event;
use crate::repl::payload::{PayloadForm, Receiver};
use crate::server::log::{self, Level};
use crate::server::Server;

impl Server {
    /// `$<len>` or `$EOF:<mark>`: the payload's bytes go to a new
    /// temporary file in `dir`, or to memory (Redis's `useDisklessLoad`).
    pub(super) fn start_payload(&mut self, link: &mut MasterLink, form: PayloadForm) {
        let core = self.engine.core();
        let mode = core.config.replica.diskless_load;
        let in_memory = mode.in_memory(core.keyspace.total_keys() == 0);
        let total = match form {
            PayloadForm::Length(n) => n,
            PayloadForm::Mark(_) => 0,
        };
        let sink = if in_memory {
            PayloadSink::Memory {
                bytes: Vec::new(),
                swapdb: mode == crate::config::DisklessLoad::Swapdb,
            }
        } else {
            let n = SYNC_FILES.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            let dir = self.engine.config().dir.clone();
            let path = dir.join(format!("temp-sync-{}-{n}.rdb", std::process::id()));
            let file = std::fs::OpenOptions::new()
                .write(true)
                .create(true)
                .truncate(true)
                .open(&path);
            match file {
                Ok(file) => PayloadSink::File { file, path },
                Err(e) => {
                    log::log(
                        Level::Warning,
                        &format!(
                            "Opening the temp file needed for MASTER <-> REPLICA synchronization: {e}"
                        ),
                    );
                    self.transfer_failed(link);
                    return;
                }
            }
        };
        log::log(Level::Notice, &form.start_log(in_memory));
        if let Some(master) = self.engine.core().replica.master.as_mut() {
            master.transfer = Some((total, 0, now_ms()));
        }
        let streamed = match &sink {
            PayloadSink::File { path, .. } => self.start_streamed_load(path, &form),
            PayloadSink::Memory { .. } => None,
        };
        link.phase = Phase::Payload {
            receiver: Receiver::new(form),
            sink,
            total,
            streamed,
        };
    }

    /// Starts loading a payload file while it arrives: its window is the
    /// announced length, or for the mark form [`UNKNOWN_LENGTH_WINDOW`].
    /// None (the file is loaded once whole) when the window cannot be
    /// mapped.
    fn start_streamed_load(
        &mut self,
        path: &std::path::Path,
        form: &PayloadForm,
    ) -> Option<(
        crate::engine::PayloadLoad,
        std::sync::Arc<crate::engine::PayloadFeed>,
        u64,
    )> {
        let window = match form {
            PayloadForm::Length(0) => return None,
            PayloadForm::Length(n) => *n,
            PayloadForm::Mark(_) => UNKNOWN_LENGTH_WINDOW,
        };
        let streamed = match StreamedPayload::open(path, window) {
            Ok(streamed) => streamed,
            Err(e) => {
                log::log(
                    Level::Notice,
                    &format!(
                        "MASTER <-> REPLICA sync: the payload will be loaded once received (mapping it: {e})"
                    ),
                );
                return None;
            }
        };
        let feed = std::sync::Arc::clone(&streamed.feed);
        let window = streamed.window_len();
        let total = match form {
            PayloadForm::Length(n) => *n,
            PayloadForm::Mark(_) => 0,
        };
        let load = self
            .engine
            .start_payload_load(PayloadSource::Streamed(streamed), total);
        Some((load, feed, window))
    }

    /// The attempt failed while receiving or loading: the old data stays;
    /// a new attempt starts at once.
    pub(super) fn transfer_failed(&mut self, link: &mut MasterLink) {
        self.close_link_socket(link);
        let step = link.handshake.handle(Event::TransferFailed);
        self.apply_step(link, step);
    }

    /// The whole payload is in its file or in memory: its load starts on
    /// a thread of its own.
    pub(super) fn finish_payload(&mut self, link: &mut MasterLink) {
        let Phase::Payload {
            sink,
            receiver,
            streamed,
            ..
        } = std::mem::replace(&mut link.phase, Phase::Handshake)
        else {
            return;
        };
        let mark_form = matches!(receiver, Receiver::Mark(_));
        let total = receiver.passed();
        let (source, path, swapdb) = match sink {
            PayloadSink::File { file, path } => {
                // Not fsynced here: with `appendonly yes` the loading
                // thread fsyncs it and it becomes the new AOF's RDB
                // preamble (renamed away, so the removal after the load
                // finds nothing); otherwise it is removed after the load.
                drop(file);
                (PayloadSource::File(path.clone()), Some(path), false)
            }
            PayloadSink::Memory { bytes, swapdb } => (PayloadSource::Memory(bytes), None, swapdb),
        };
        log::log(
            Level::Notice,
            "MASTER <-> REPLICA sync: Loading DB in memory",
        );
        // Our replicas resync with us later; a capture for them stops.
        self.engine.core().attach_to_new_master();
        let mut load = match streamed {
            Some((mut load, feed, _)) => {
                // Read while it arrived: the rest of the load follows.
                feed.complete();
                load.progress.started_ms = now_ms();
                load.progress.total_bytes = total;
                drop(source);
                load
            }
            None => self.engine.start_payload_load(source, total),
        };
        // Redis's async loading: a diskless `swapdb` load of the history
        // we already follow serves the old data meanwhile; any other load
        // answers -LOADING (Redis flushes the old data first).
        let core = self.engine.core();
        let same_history = link
            .full_sync
            .and_then(|(replid, _)| replid)
            .is_some_and(|id| id == core.repl.replid);
        load.progress.asynchronous = swapdb && same_history;
        if let Some(master) = self.engine.core().replica.master.as_mut() {
            master.loading = Some(load.progress.clone());
        }
        link.phase = Phase::Loading {
            load,
            path,
            mark_form,
            swapdb,
        };
    }

    /// Looks whether the load finished; commits it or gives up on it.
    pub(super) fn poll_load(&mut self, link: &mut MasterLink) {
        let Phase::Loading { load, .. } = &mut link.phase else {
            return;
        };
        let Some(result) = load.poll() else {
            return;
        };
        let Phase::Loading {
            path,
            mark_form,
            swapdb,
            ..
        } = std::mem::replace(&mut link.phase, Phase::Handshake)
        else {
            return;
        };
        if let Some(path) = &path {
            let _ = std::fs::remove_file(path);
        }
        if let Some(master) = self.engine.core().replica.master.as_mut() {
            master.loading = None;
        }
        let committed = result.and_then(|loaded| {
            if swapdb {
                self.discard_cached_master(link);
                log::log(
                    Level::Notice,
                    "MASTER <-> REPLICA sync: Swapping active DB with loaded DB",
                );
            } else {
                self.discard_cached_master(link);
                log::log(Level::Notice, "MASTER <-> REPLICA sync: Flushing old data");
            }
            self.engine.commit_payload(loaded)
        });
        match committed {
            Ok(loaded) => {
                for warning in &loaded.warnings {
                    log::log(Level::Warning, warning);
                }
                if swapdb {
                    log::log(
                        Level::Notice,
                        "MASTER <-> REPLICA sync: Discarding old DB in background",
                    );
                }
                log::log(
                    Level::Notice,
                    &format!(
                        "Done loading RDB, keys loaded: {}, keys expired: 0 (RDB version {}).",
                        loaded.keys, loaded.version
                    ),
                );
                self.payload_committed(link, mark_form);
            }
            Err(reason) => {
                let from = if path.is_some() { "disk" } else { "socket" };
                log::log(
                    Level::Warning,
                    &format!(
                        "Failed trying to load the MASTER synchronization DB from {from}: {reason}"
                    ),
                );
                if swapdb {
                    log::log(
                        Level::Notice,
                        "MASTER <-> REPLICA sync: Discarding temporary DB in background",
                    );
                }
                self.transfer_failed(link);
            }
        }
    }

    /// A full sync replaces the history: the cached master goes
    /// (Redis's `replicationDiscardCachedMaster`).
    fn discard_cached_master(&mut self, link: &mut MasterLink) {
        if link.handshake.cached_master().is_some() || self.engine.core().replica.cached.is_some() {
            log::log(Level::Notice, "Discarding previously cached master state.");
        }
        link.handshake.set_cached_master(None);
        self.engine.core().replica.cached = None;
    }

    /// The new dataset is in place: the master's position is ours, the
    /// stream starts (with the bytes that came during the load), the new
    /// AOF records the position at once.
    fn payload_committed(&mut self, link: &mut MasterLink, mark_form: bool) {
        let (replid, offset) = link.full_sync.unwrap_or((None, -1));
        let core = self.engine.core();
        if let Some(master) = core.replica.master.as_mut() {
            master.replid = replid;
            master.reploff = offset.max(0);
            master.read_reploff = offset.max(0);
            master.transfer = None;
            master.stream_db = 0;
        }
        core.mirror_full_sync(replid, offset.max(0));
        let step = link.handshake.handle(Event::Loaded);
        self.apply_step(link, step);
        let waiting = std::mem::take(&mut link.inbuf);
        self.start_stream(link);
        // The new AOF was fsynced with the whole payload in it.
        link.fack_marks.clear();
        link.fack_off = offset.max(0);
        // The new AOF records where the stream starts, so a restart
        // continues from it (written at once, before any ACK).
        if let Some(master) = self.engine.core().replica.master.as_mut() {
            master.state = "connected";
            master.recorded_off = -1;
        }
        if let Err(e) = self.engine.flush_log() {
            log::log(
                Level::Warning,
                &format!("Writing the replication position to the AOF: {e:?}"),
            );
        }
        if mark_form && link.psync_master {
            queue_ack(link, self.engine.core());
        }
        // The stream bytes that came during the load, then what the
        // socket holds (it was not read past the limit).
        if !waiting.is_empty() {
            self.link_input(link, &waiting);
        }
        self.read_link(link);
    }
}
