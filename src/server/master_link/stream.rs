//! Applying the master's stream (docs/replication.md §5.4): every command
//! runs through the normal dispatch in the master's session (no replies;
//! allowed on a read-only replica; logged to our own AOF); `reploff`
//! advances per complete unit, a MULTI/EXEC counting once after its EXEC;
//! `REPLCONF GETACK` is answered with `REPLCONF ACK <reploff>`.
//!
//! Each complete unit's bytes, exactly as the master sent them (its PINGs,
//! SELECTs and `REPLCONF GETACK *` included), join our own stream when the
//! unit is applied (`ReplState::mirror_applied`, Redis's
//! `replicationFeedStreamFromMasterStream`): our sub-replicas get the
//! master's stream at the master's offsets, after our AOF write of the
//! turn (§3.2), like any stream byte of ours.

use super::{MasterLink, Phase, MASTER_LIMITS};
use crate::resp;
use crate::server::log::{self, Level};
use crate::server::Server;

impl Server {
    /// The stream flows: the master's session is created.
    pub(super) fn start_stream(&mut self, link: &mut MasterLink) {
        let mut session = self.engine.new_session();
        session.is_master = true;
        session.authenticated = true;
        if let Some(master) = self.engine.core().replica.master.as_mut() {
            session.db = master.stream_db as usize;
            master.down_since_ms = None;
            master.transfer = None;
        }
        link.session = Some(session);
        link.phase = Phase::Stream;
        link.inbuf.clear();
        link.parser = resp::Parser::new(MASTER_LIMITS);
    }

    /// Applies every complete command of the stream. `reploff` moves after
    /// each command that does not leave the session in MULTI (a
    /// transaction counts once, after its EXEC), and the unit's bytes go
    /// to our stream then. Bytes of a unit not complete yet (a MULTI
    /// still open) stay in `inbuf` until it is.
    pub(super) fn apply_stream(&mut self, link: &mut MasterLink) {
        let Some(mut session) = link.session.take() else {
            return;
        };
        // `inbuf` starts with the first byte of the unit being applied.
        let mut unit_start = 0;
        loop {
            let request_start = link.parser.consumed();
            let request = match link.parser.next(&link.inbuf, true) {
                Ok(Some(r)) => r,
                Ok(None) => break,
                Err(e) => {
                    log::log(
                        Level::Warning,
                        &format!("Protocol error ({e}) from the MASTER: closing the link"),
                    );
                    link.session = Some(session);
                    self.link_lost(link, "protocol error");
                    return;
                }
            };
            let argv = request.argv(&link.inbuf);
            if self.engine.must_wait_for_pause(&session, &argv) {
                // Clients are paused: the master's commands wait too, from
                // this one on (Redis pauses its master client); applied
                // when the pause ends or eases (`check_pause_change`).
                link.parser.unread(request_start);
                break;
            }
            let is_getack = argv.len() >= 2
                && argv[0].eq_ignore_ascii_case(b"replconf")
                && argv[1].eq_ignore_ascii_case(b"getack");
            if is_getack {
                queue_ack(link, self.engine.core());
            } else {
                let reply = self.engine.execute_with_host(
                    &mut session,
                    &argv,
                    &mut crate::engine::NullHost,
                );
                if let crate::reply::Reply::Error(text) = &reply {
                    self.master_command_failed(text, argv[0]);
                }
                self.deliver_link_messages();
                if self.engine.has_ready_keys() {
                    self.serve_ready_keys();
                }
            }
            let consumed = link.parser.consumed();
            let unparsed = (link.inbuf.len() - consumed) as i64;
            if session.multi.is_none() {
                let core = self.engine.core();
                if let Some(master) = core.replica.master.as_mut() {
                    master.reploff = master.read_reploff - unparsed;
                    master.stream_db = session.db as u32;
                }
                core.repl
                    .mirror_applied(&link.inbuf[unit_start..consumed], session.db as u32);
                unit_start = consumed;
            }
        }
        mark_applied(link, self.engine.core());
        link.inbuf.drain(..unit_start);
        link.parser.consume(unit_start);
        link.session = Some(session);
    }

    /// A pause ended or eased: the master's commands held for it are
    /// applied.
    /// A command from the master failed here (Redis's `afterErrorReply`
    /// for the master client): logged as CRITICAL and counted
    /// (`unexpected_error_replies`); under `propagation-error-behavior
    /// panic` or `panic-on-replicas`, a read-only replica then stops, since
    /// its data has diverged from its master's.
    fn master_command_failed(&mut self, text: &str, name: &[u8]) {
        let command = crate::command::lookup(name).map_or("<unknown>", |spec| spec.name);
        // Redis logs the text its caller gave: most plain errors without
        // their "ERR " code, shared ones with a code as "-CODE …".
        let text = match text.strip_prefix("ERR ") {
            Some(plain) => plain.to_string(),
            None => format!("-{text}"),
        };
        log::log(
            Level::Warning,
            &format!(
                "== CRITICAL == This replica is sending an error to its master: '{text}' \
                 after processing the command '{command}'"
            ),
        );
        let core = self.engine.core();
        core.stats.unexpected_error_replies += 1;
        let panics = core.config.replica.propagation_error_behavior != 0;
        if panics && core.config.replica.read_only {
            log::log(
                Level::Warning,
                &format!(
                    "This replica panicked sending an error to its master after processing the command '{command}'"
                ),
            );
            std::process::exit(1);
        }
    }

    pub(in crate::server) fn resume_master_stream(&mut self) {
        let Some(mut link) = self.master_link.take() else {
            return;
        };
        if matches!(link.phase, super::Phase::Stream) && !link.inbuf.is_empty() {
            self.apply_stream(&mut link);
        }
        if self.master_link.is_none() {
            self.master_link = Some(link);
        }
    }

    /// Pub/Sub messages the master's commands (or active expiry, or
    /// anything else outside a client's command) published, to their
    /// subscribers.
    pub(in crate::server) fn deliver_link_messages(&mut self) {
        if !self.engine.has_messages() {
            return;
        }
        for (id, message) in self.engine.take_messages() {
            let Some(&token) = self.session_tokens.get(&id) else {
                continue;
            };
            if let Some(client) = self.clients.get_mut(&token) {
                if super::super::deliver(client, &message) {
                    self.pending.push(token);
                }
            }
        }
    }
}

/// Asks for `REPLCONF ACK <reploff>` to the master at the end of the turn,
/// with `FACK <offset>` (the last offset an fsync of our AOF covers) while
/// the AOF is on; a Redis 7.0 master stops reading after the ACK's offset.
pub(super) fn queue_ack(link: &mut MasterLink, _core: &mut crate::core::Core) {
    link.ack_due = true;
}

/// Encodes the ACK [`queue_ack`] asked for, at the end of the turn (after
/// our AOF write, so `FACK` sees this turn's fsync under `always`).
pub(super) fn encode_ack(link: &mut MasterLink, core: &mut crate::core::Core) {
    link.ack_due = false;
    let Some(master) = core.replica.master.as_ref() else {
        return;
    };
    let offset = master.reploff.to_string();
    match core.aof.as_ref().map(|aof| aof.fsynced_end()) {
        Some(synced) => {
            while let Some(&(mark, off)) = link.fack_marks.front() {
                if mark > synced {
                    break;
                }
                link.fack_off = link.fack_off.max(off);
                link.fack_marks.pop_front();
            }
            let fack = link.fack_off.to_string();
            crate::persist::aof::encode_command(
                &mut link.out,
                &["REPLCONF", "ACK", &offset, "FACK", &fack],
            );
        }
        None => crate::persist::aof::encode_command(&mut link.out, &["REPLCONF", "ACK", &offset]),
    }
}

/// Records where the units applied so far end in our AOF (for `FACK`).
pub(super) fn mark_applied(link: &mut MasterLink, core: &mut crate::core::Core) {
    let (Some(aof), Some(master)) = (core.aof.as_ref(), core.replica.master.as_ref()) else {
        return;
    };
    let mark = (aof.logged_end(), master.reploff);
    match link.fack_marks.back_mut() {
        Some(last) if last.0 == mark.0 => last.1 = mark.1,
        _ => link.fack_marks.push_back(mark),
    }
}
