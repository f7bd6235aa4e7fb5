//! Applying the master's stream (docs/replication.md §5.4): every command
//! runs through the normal dispatch in the master's session (no replies;
//! allowed on a read-only replica; logged to our own AOF); `reploff`
//! advances per complete unit, a MULTI/EXEC counting once after its EXEC;
//! `REPLCONF GETACK` is answered with `REPLCONF ACK <reploff>`.

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
    /// transaction counts once, after its EXEC).
    pub(super) fn apply_stream(&mut self, link: &mut MasterLink) {
        let Some(mut session) = link.session.take() else {
            return;
        };
        loop {
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
                    log::log(
                        Level::Warning,
                        &format!(
                            "== CRITICAL == This replica is sending an error to its master: '{text}' \
                             after processing the command '{}'",
                            String::from_utf8_lossy(argv[0])
                        ),
                    );
                }
                self.deliver_link_messages();
                if self.engine.has_ready_keys() {
                    self.serve_ready_keys();
                }
            }
            let unparsed = (link.inbuf.len() - link.parser.consumed()) as i64;
            if session.multi.is_none() {
                if let Some(master) = self.engine.core().replica.master.as_mut() {
                    master.reploff = master.read_reploff - unparsed;
                    master.stream_db = session.db as u32;
                }
            }
        }
        let consumed = link.parser.consumed();
        link.inbuf.drain(..consumed);
        link.parser.consume(consumed);
        link.session = Some(session);
    }

    /// Pub/Sub messages the master's commands published, to their
    /// subscribers.
    pub(super) fn deliver_link_messages(&mut self) {
        if !self.engine.has_messages() {
            return;
        }
        for (id, message) in self.engine.take_messages() {
            let Some(&token) = self.session_tokens.get(&id) else {
                continue;
            };
            if let Some(client) = self.clients.get_mut(&token) {
                message.encode(client.session.resp, &mut client.out);
                self.pending.push(token);
            }
        }
    }
}

/// Queues `REPLCONF ACK <reploff>` for the master.
pub(super) fn queue_ack(link: &mut MasterLink, core: &mut crate::core::Core) {
    if let Some(master) = core.replica.master.as_ref() {
        let offset = master.reploff.to_string();
        crate::persist::aof::encode_command(&mut link.out, &["REPLCONF", "ACK", &offset]);
    }
}
