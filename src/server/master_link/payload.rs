//! The full sync's payload on the replica (docs/replication.md §5.3): the
//! bytes go to `temp-sync-<pid>-<n>.rdb` in `dir`; once complete the file
//! is verified whole and loaded (`Engine::load_payload`) before the old
//! dataset goes. Any failure removes the file, keeps the old data and
//! starts a new attempt.

use super::{queue_ack, MasterLink, Phase, SYNC_FILES};
use crate::engine::now_ms;
use crate::repl::handshake::Event;
use crate::repl::payload::{PayloadForm, Receiver};
use crate::server::log::{self, Level};
use crate::server::Server;

impl Server {
    /// `$<len>` or `$EOF:<mark>`: the payload's bytes go to a new
    /// temporary file in `dir`.
    pub(super) fn start_payload(&mut self, link: &mut MasterLink, form: PayloadForm) {
        let n = SYNC_FILES.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let dir = self.engine.config().dir.clone();
        let path = dir.join(format!("temp-sync-{}-{n}.rdb", std::process::id()));
        let file = std::fs::OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .open(&path);
        match file {
            Ok(file) => {
                log::log(Level::Notice, &form.start_log(false));
                let total = match form {
                    PayloadForm::Length(n) => n,
                    PayloadForm::Mark(_) => 0,
                };
                if let Some(master) = self.engine.core().replica.master.as_mut() {
                    master.transfer = Some((total, 0, now_ms()));
                }
                link.phase = Phase::Payload {
                    receiver: Receiver::new(form),
                    file,
                    path,
                    total,
                };
            }
            Err(e) => {
                log::log(
                    Level::Warning,
                    &format!(
                        "Opening the temp file needed for MASTER <-> REPLICA synchronization: {e}"
                    ),
                );
                self.transfer_failed(link);
            }
        }
    }

    /// The attempt failed while receiving: the old data stays; a new
    /// attempt starts at once.
    pub(super) fn transfer_failed(&mut self, link: &mut MasterLink) {
        self.close_link_socket(link);
        let step = link.handshake.handle(Event::TransferFailed);
        self.apply_step(link, step);
    }

    /// The whole payload is in its file: verified, loaded, and the stream
    /// starts.
    pub(super) fn finish_payload(&mut self, link: &mut MasterLink) {
        let Phase::Payload {
            file,
            path,
            receiver,
            ..
        } = std::mem::replace(&mut link.phase, Phase::Handshake)
        else {
            return;
        };
        let mark_form = matches!(receiver, Receiver::Mark(_));
        let synced = file.sync_all();
        drop(file);
        log::log(Level::Notice, "MASTER <-> REPLICA sync: Flushing old data");
        log::log(
            Level::Notice,
            "MASTER <-> REPLICA sync: Loading DB in memory",
        );
        self.engine.core().attach_to_new_master();
        let loaded = synced
            .map_err(|e| e.to_string())
            .and_then(|()| self.engine.load_payload(&path));
        let _ = std::fs::remove_file(&path);
        match loaded {
            Ok(loaded) => {
                log::log(
                    Level::Notice,
                    &format!(
                        "Done loading RDB, keys loaded: {}, keys expired: 0 (RDB version {}).",
                        loaded.keys, loaded.version
                    ),
                );
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
            }
            Err(reason) => {
                log::log(
                    Level::Warning,
                    &format!(
                        "Failed trying to load the MASTER synchronization DB from disk: {reason}"
                    ),
                );
                self.transfer_failed(link);
            }
        }
    }
}
