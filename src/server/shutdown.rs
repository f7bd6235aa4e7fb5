//! Shutting down as Redis 7.0 does (`prepareForShutdown`, `finishShutdown`,
//! `abortShutdown`; docs/replication.md §3.8). SHUTDOWN and SIGTERM/SIGINT
//! start the same sequence at the end of a turn:
//!
//! 1. Unless NOW, with `shutdown-timeout` > 0 and a replica that has not
//!    acknowledged the whole stream, the server waits: writes are paused
//!    (commands that write or may replicate are postponed, nothing
//!    expires), reads are served, the replicas are asked for an ACK. The
//!    SHUTDOWN callers get no reply meanwhile (INFO counts them in
//!    `blocked_clients`; `shutdown_in_milliseconds` tells the time left).
//! 2. When every replica caught up or the timeout passed: the lagging
//!    replicas are logged, background work is abandoned, the AOF written
//!    and fsynced, the snapshot saved when asked (or when save points are
//!    set and not NOSAVE), and the server exits.
//! 3. If step 2 fails (the first AOF of `appendonly yes` is not written,
//!    the save fails) without FORCE, or SHUTDOWN ABORT comes, the shutdown
//!    is cancelled: the callers get `-ERR Errors trying to SHUTDOWN. Check
//!    logs.`, the pause ends, the server goes on.

use std::sync::atomic::Ordering;

use super::log::{self, Level};
use super::Server;
use crate::command::ShutdownOptions;
use crate::core::pause::{PauseMode, PausePurpose};
use crate::engine::now_ms;

/// The error SHUTDOWN callers get when the shutdown is cancelled.
const CANCELLED: &[u8] = b"-ERR Errors trying to SHUTDOWN. Check logs.\r\n";

/// A shutdown asked for and not finished.
#[derive(Debug, Default)]
pub(super) struct Shutdown {
    options: ShutdownOptions,
    /// Waiting for replicas until this Unix ms; None before the first step.
    deadline_ms: Option<i64>,
    /// Tokens of the clients whose SHUTDOWN waits for the outcome.
    callers: Vec<usize>,
}

impl Server {
    /// SHUTDOWN from the client `token`: it waits for the outcome (no
    /// reply, its further input not executed). The sequence runs at the
    /// end of the turn; a shutdown already under way keeps its options.
    pub(super) fn shutdown_requested_by(&mut self, token: Option<usize>, options: ShutdownOptions) {
        let shutdown = self.shutdown_state.get_or_insert_with(|| Shutdown {
            options,
            ..Shutdown::default()
        });
        if let Some(token) = token {
            shutdown.callers.push(token);
        }
        self.shutdown.store(true, Ordering::SeqCst);
        self.count_waiting_clients();
    }

    /// True while a shutdown is asked for or under way (SHUTDOWN ABORT has
    /// something to abort).
    pub(super) fn shutdown_in_progress(&self) -> bool {
        self.shutdown_state.is_some() || self.shutdown.load(Ordering::SeqCst)
    }

    /// SHUTDOWN ABORT, after [`Server::shutdown_in_progress`] said yes.
    pub(super) fn abort_shutdown(&mut self) {
        self.cancel_shutdown();
        log::log(Level::Notice, "Shutdown manually aborted.");
    }

    /// The shutdown's step for this turn. True when the server may exit.
    pub(super) fn shutdown_step(&mut self) -> bool {
        if !self.shutdown.load(Ordering::SeqCst) {
            return false;
        }
        // A signal starts a shutdown with the default options.
        let shutdown = self.shutdown_state.get_or_insert_with(Shutdown::default);
        let (now_flag, deadline) = (shutdown.options.now, shutdown.deadline_ms);
        let now = now_ms();
        match deadline {
            None => {
                log::log(Level::Warning, "User requested shutdown...");
                super::supervise::notify("STOPPING=1\n");
                let timeout_s = self.engine.config().repl.shutdown_timeout_s;
                if !now_flag && timeout_s > 0 && !self.replicas_caught_up() {
                    let deadline = now.saturating_add((timeout_s as i64).saturating_mul(1000));
                    if let Some(s) = self.shutdown_state.as_mut() {
                        s.deadline_ms = Some(deadline);
                    }
                    let core = self.engine.core();
                    core.shutdown_deadline_ms = Some(deadline);
                    core.repl.get_ack = true;
                    core.pauses.pause(PausePurpose::Shutdown, PauseMode::Write);
                    log::log(Level::Notice, "Waiting for replicas before shutting down.");
                    return false;
                }
            }
            Some(deadline) if now < deadline && !self.replicas_caught_up() => return false,
            Some(_) => {}
        }
        if self.finish_shutdown() {
            return true;
        }
        log::log(
            Level::Warning,
            "Errors trying to shut down the server. Check the logs for more information.",
        );
        self.cancel_shutdown();
        false
    }

    /// Redis's `isReadyToShutdown`: every replica acknowledged the whole
    /// stream.
    fn replicas_caught_up(&mut self) -> bool {
        let repl = &self.engine.core().repl;
        let offset = repl.master_repl_offset();
        repl.replicas.values().all(|r| r.ack_off == offset)
    }

    /// Redis's `finishShutdown`. False when the server cannot exit.
    fn finish_shutdown(&mut self) -> bool {
        let mut options = self
            .shutdown_state
            .as_ref()
            .map(|s| s.options)
            .unwrap_or_default();
        if self.engine.is_loading() {
            // Nothing is loaded yet: a save would replace the files with
            // an empty dataset (Redis forces NOSAVE while loading too).
            options.save = false;
            options.nosave = true;
        }
        self.log_lagging_replicas();
        let core = self.engine.core();
        if core.aof_waiting_for_rewrite() {
            // The first AOF of CONFIG SET appendonly yes is not in place:
            // exiting would leave the data in no AOF.
            if !options.force {
                log::log(Level::Warning, "Writing initial AOF, can't exit.");
                return false;
            }
            log::log(Level::Warning, "Writing initial AOF. Exit anyway.");
        }
        // A running AOF rewrite is abandoned: the old file stays the AOF.
        core.rewrite.abort(&mut core.keyspace);
        // So is a replication capture (its replicas are closed).
        core.abort_repl_sync();
        if self.engine.core().aof.is_some() {
            log::log(Level::Notice, "Calling fsync() on the AOF file.");
            if let Err(e) = self.engine.sync() {
                log::log(
                    Level::Warning,
                    &format!("Error syncing the AOF file at shutdown: {e:?}"),
                );
            }
        }
        let core = self.engine.core();
        if options.save || (!options.nosave && !core.config.save.is_empty()) {
            log::log(Level::Notice, "Saving the final snapshot before exiting.");
            match core.save_now(now_ms()) {
                Ok(()) => log::log(Level::Notice, "DB saved on disk"),
                Err(cause) if options.force => log::log(
                    Level::Warning,
                    &format!("Error trying to save the DB ({cause}). Exit anyway."),
                ),
                Err(cause) => {
                    log::log(
                        Level::Warning,
                        &format!("Error trying to save the DB, can't exit: {cause}"),
                    );
                    return false;
                }
            }
        } else {
            // A running BGSAVE is abandoned (its temporary file removed).
            core.save.abort(&mut core.keyspace);
        }
        let held = self.held.take().len();
        if held > 0 {
            // Their writes' batch could not be made durable: they are
            // closed without a reply when the process exits.
            log::log(
                Level::Warning,
                &format!("{held} clients waiting for their writes to reach the AOF are closed without a reply"),
            );
        }
        if let Some(path) = self.engine.config().pidfile_path() {
            super::supervise::remove_pidfile(path);
        }
        if let Some(unix) = &self.listeners.unix {
            unix.remove_file();
        }
        log::log(Level::Warning, "Redis is now ready to exit, bye bye...");
        true
    }

    /// The lines Redis logs at the end of a shutdown about its replicas.
    fn log_lagging_replicas(&mut self) {
        let now = now_ms();
        let repl = &self.engine.core().repl;
        let offset = repl.master_repl_offset();
        let mut lagging = 0;
        for r in repl.replicas.values().filter(|r| r.ack_off != offset) {
            lagging += 1;
            let lag = if r.streams() {
                (now - r.ack_time_ms) / 1000
            } else {
                0
            };
            log::log(
                Level::Warning,
                &format!(
                    "Lagging replica {} reported offset {} behind master, lag={lag}, state={}.",
                    r.name,
                    offset - r.ack_off,
                    r.state.name()
                ),
            );
        }
        let total = repl.replicas.len();
        if total > 0 {
            log::log(
                Level::Notice,
                &format!(
                    "{} of {total} replicas are in sync when shutting down.",
                    total - lagging
                ),
            );
        }
    }

    /// Redis's `cancelShutdown`: the callers get the error and their input
    /// is executed again, the pause ends (postponed clients go on).
    fn cancel_shutdown(&mut self) {
        self.shutdown.store(false, Ordering::SeqCst);
        let callers = self
            .shutdown_state
            .take()
            .map(|s| s.callers)
            .unwrap_or_default();
        for token in callers {
            if let Some(client) = self.clients.get_mut(&token) {
                client.shutdown_caller = false;
                client.out.extend_from_slice(CANCELLED);
                self.pending.push(token);
                self.unblocked.push(token);
            }
        }
        let core = self.engine.core();
        core.shutdown_deadline_ms = None;
        core.pauses.unpause(PausePurpose::Shutdown);
        self.resume_postponed();
    }

    /// When the pause in force ended or holds back less than at the last
    /// look (CLIENT UNPAUSE, a timeout, ALL became WRITE), the postponed
    /// clients are looked at again (Redis's `unblockPostponedClients`).
    pub(super) fn check_pause_change(&mut self) {
        let now = self.engine.core().pauses.mode();
        if now < self.pause_seen {
            self.resume_postponed();
            self.resume_master_stream();
        }
        self.pause_seen = now;
    }

    /// After a pause ended or eased: the postponed clients' input is
    /// executed this turn (a client still held by a pause is postponed
    /// again).
    pub(super) fn resume_postponed(&mut self) {
        for token in self.postponed.take() {
            if let Some(client) = self.clients.get_mut(&token) {
                client.postponed = false;
                self.unblocked.push(token);
            }
        }
        self.count_waiting_clients();
    }

    /// Clients held for a pause or a shutdown count as blocked in INFO.
    pub(super) fn count_waiting_clients(&mut self) {
        let callers = self.shutdown_state.as_ref().map_or(0, |s| s.callers.len());
        let postponed = self.postponed.order.len();
        self.engine.core().pauses.waiting_clients = callers + postponed;
    }
}
