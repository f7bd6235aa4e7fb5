//! The replica's link to its master (docs/replication.md §5.2–§5.4): the
//! non-blocking connect, the handshake (`repl::handshake` carries Redis's
//! steps, bytes and log lines; this file does its I/O), the payload
//! received to a file or to memory and loaded on a thread while the old
//! data is served (`payload.rs`), then the stream applied through the
//! normal dispatch by a session flagged as the master.
//!
//! The link is one socket outside the client table, on its own token.
//! Cron (each turn, after the AOF write) starts attempts once a second,
//! checks `repl-timeout`, sends `REPLCONF ACK` once a second and writes
//! what the link queued, so an ACK never runs ahead of the replica's own
//! AOF write for the same turn.

use std::io::{self, Read, Write};
use std::path::PathBuf;
use std::sync::Arc;

use super::log::{self, Level};
use super::Server;
use crate::command::Session;
use crate::config::LogLevel;
use crate::engine::{now_ms, PayloadFeed};
use crate::repl::handshake::{Config, Event, Handshake, Outcome, RetryReason, Step};
use crate::repl::ids::{Position, ReplId};
use crate::repl::payload::{Preamble, PreambleReader, Receiver};
use crate::resp;

mod payload;
mod socket;
mod stream;

use stream::{encode_ack, queue_ack};

/// The link's token: below the clients', above any listener's index.
pub(super) const MASTER_TOKEN: usize = super::FIRST_CLIENT_TOKEN - 1;

/// The master's commands are not bound by `proto-max-bulk-len` (Redis
/// exempts its master client).
pub(super) const MASTER_LIMITS: resp::Limits = resp::Limits {
    max_bulk_len: i64::MAX,
};

/// Bytes read from the master per event-loop turn at most (a payload
/// arriving faster than that is read over several turns, so clients are
/// served between them).
const READ_SLICE: usize = 4 << 20;

/// Stream bytes held while a payload loads, beyond which the socket is
/// not read until the load ends.
const LOAD_INBUF_LIMIT: usize = 64 << 20;
/// How often a replica that is loading a payload sends its master a
/// keepalive newline.
const KEEPALIVE_MS: i64 = 500;

/// How many payload files this process received (their names).
static SYNC_FILES: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

/// Where the bytes from the master go.
enum Phase {
    /// Reply lines of the handshake.
    Handshake,
    /// Lines before the payload (`\n` keepalives, then `$…`).
    Preamble(PreambleReader),
    /// The payload, to its temporary file or to memory.
    Payload {
        receiver: Receiver,
        sink: PayloadSink,
        total: u64,
        /// The load reading the file while it arrives (file sink), and
        /// the payload length its window holds.
        streamed: Option<(crate::engine::PayloadLoad, Arc<PayloadFeed>, u64)>,
    },
    /// The payload loads on its thread (the old data is served); stream
    /// bytes that follow it wait in `inbuf`.
    Loading {
        load: crate::engine::PayloadLoad,
        /// The payload's temporary file (removed when the load ends).
        path: Option<PathBuf>,
        /// The payload came in the mark form (an ACK follows the load).
        mark_form: bool,
        /// Loaded beside the old data (`swapdb`): Redis's log lines.
        swapdb: bool,
    },
    /// The command stream.
    Stream,
}

/// Where the payload's bytes go.
enum PayloadSink {
    /// `repl-diskless-load disabled` (or `on-empty-db` with keys): a
    /// temporary file in `dir`.
    File { file: std::fs::File, path: PathBuf },
    /// `swapdb`, or `on-empty-db` with no keys: memory.
    Memory { bytes: Vec<u8>, swapdb: bool },
}

/// The link to the master of one REPLICAOF generation.
pub(super) struct MasterLink {
    generation: u64,
    handshake: Handshake,
    socket: Option<socket::LinkSocket>,
    phase: Phase,
    /// Bytes to write to the master.
    out: Vec<u8>,
    /// Stream bytes received and not yet applied.
    inbuf: Vec<u8>,
    parser: resp::Parser,
    /// The master's session (from the end of the sync on).
    session: Option<Session>,
    /// Unix ms of the last progress (for `repl-timeout`).
    progress_ms: i64,
    /// The second of the last cron tick and of the last ACK.
    last_tick_s: i64,
    /// When the last keepalive newline went out during a load (Unix ms).
    last_keepalive_ms: i64,
    /// The master understands PSYNC (it gets ACKs).
    psync_master: bool,
    /// The master's id and offset from `+FULLRESYNC`.
    full_sync: Option<(Option<ReplId>, i64)>,
    /// (our AOF's logical end after a turn's units, the offset applied
    /// then), oldest first: an offset is durable once an fsync covers its
    /// mark (`FACK`, §5.5).
    fack_marks: std::collections::VecDeque<(u64, i64)>,
    /// The last offset known durable in our AOF.
    fack_off: i64,
    /// An ACK is to be sent at the end of the turn.
    ack_due: bool,
    /// The last read stopped at [`READ_SLICE`]: the next turn reads on
    /// without waiting for an event.
    pub(super) more_to_read: bool,
}

impl MasterLink {
    /// The link as one of the clients (Redis lists its master client,
    /// flag `M`, and CLIENT KILL closes it): once the stream flows.
    pub(super) fn as_client(&self) -> Option<(&Session, crate::command::ctx::Connection)> {
        use std::os::fd::AsRawFd;
        let (Some(session), Some(socket), Phase::Stream) =
            (self.session.as_ref(), self.socket.as_ref(), &self.phase)
        else {
            return None;
        };
        let addr =
            |a: io::Result<std::net::SocketAddr>| a.map(|a| a.to_string()).unwrap_or_default();
        Some((
            session,
            crate::command::ctx::Connection {
                addr: addr(socket.tcp().peer_addr()),
                laddr: addr(socket.tcp().local_addr()),
                fd: i64::from(socket.tcp().as_raw_fd()),
                last_interaction_ms: self.progress_ms,
                query_buffer_bytes: self.inbuf.len(),
                output_bytes: self.out.len(),
                events: "r",
                ..Default::default()
            },
        ))
    }

    fn new(generation: u64, config: Config, cached: Option<Position>) -> MasterLink {
        let mut handshake = Handshake::new(config);
        handshake.set_cached_master(cached);
        MasterLink {
            generation,
            handshake,
            socket: None,
            phase: Phase::Handshake,
            out: Vec::new(),
            inbuf: Vec::new(),
            parser: resp::Parser::new(MASTER_LIMITS),
            session: None,
            progress_ms: now_ms(),
            last_tick_s: 0,
            last_keepalive_ms: 0,
            psync_master: false,
            full_sync: None,
            fack_marks: std::collections::VecDeque::new(),
            fack_off: 0,
            ack_due: false,
            more_to_read: false,
        }
    }
}

impl Server {
    /// The link's part of each turn: follows REPLICAOF changes, starts an
    /// attempt once a second, applies `repl-timeout`, sends the periodic
    /// ACK, and writes what is queued for the master.
    pub(super) fn master_link_cron(&mut self) {
        if std::mem::take(&mut self.engine.core().replica.disconnect_blocked) {
            self.disconnect_blocked_clients();
        }
        let generation = self.engine.core().replica.generation;
        if self
            .master_link
            .as_ref()
            .is_some_and(|l| l.generation != generation)
        {
            let link = self.master_link.take().expect("checked");
            self.drop_link(link);
        }
        if self.master_link.is_none() {
            let Some(config) = self.link_config() else {
                return;
            };
            let cached = self.engine.core().replica.cached;
            self.master_link = Some(MasterLink::new(generation, config, cached));
            log::set_role(b'S');
        }
        let Some(mut link) = self.master_link.take() else {
            return;
        };
        let now = now_ms();
        let second = now / 1000;
        if link.more_to_read {
            self.read_link(&mut link);
        }
        if matches!(link.phase, Phase::Loading { .. }) {
            self.poll_load(&mut link);
        }
        if now - link.last_keepalive_ms >= KEEPALIVE_MS
            && matches!(link.phase, Phase::Loading { .. })
        {
            // Redis's replicationSendNewlineToMaster: the master counts
            // it as liveness while we load; our own transfer timer waits.
            // Twice a second, where Redis sends one a second: a master
            // checks its `repl-timeout` in whole seconds, so one newline
            // a little late can cost a 1 s timeout's replica its sync.
            link.last_keepalive_ms = now;
            link.out.push(b'\n');
            link.progress_ms = now;
        }
        if second != link.last_tick_s {
            link.last_tick_s = second;
            let step = link.handshake.handle(Event::Cron);
            self.apply_step(&mut link, step);
            if matches!(link.phase, Phase::Stream) && link.psync_master {
                queue_ack(&mut link, self.engine.core());
            }
        }
        let timeout_ms = (self.engine.config().repl.timeout_s as i64).saturating_mul(1000);
        if link.socket.is_some() && now - link.progress_ms > timeout_ms {
            let step = link.handshake.handle(Event::Timeout);
            self.apply_step(&mut link, step);
        }
        // An ACK never runs ahead of our AOF: while a batch waits for a
        // retry, it waits too.
        let stream = matches!(link.phase, Phase::Stream);
        if !(stream && self.engine.log_pending()) {
            if link.ack_due && stream {
                encode_ack(&mut link, self.engine.core());
            }
            flush_out(&mut link);
        }
        self.sync_upstream_facts(&link);
        self.master_link = Some(link);
    }

    /// True when the master's socket holds bytes not read yet (the loop
    /// should not sleep).
    pub(super) fn master_link_has_more(&self) -> bool {
        self.master_link.as_ref().is_some_and(|l| l.more_to_read)
    }

    /// The handshake's settings, from the configuration, while a master
    /// is followed.
    fn link_config(&mut self) -> Option<Config> {
        let core = self.engine.core();
        let master = core.replica.master.as_ref()?;
        let settings = &core.config.replica;
        Some(Config {
            host: master.host.clone(),
            port: master.port,
            listening_port: match settings.announce_port {
                0 => core.config.port,
                port => port,
            },
            announce_ip: settings.announce_ip.clone(),
            masteruser: settings.masteruser.clone(),
            masterauth: settings.masterauth.clone(),
            failover: core.failover_in_progress(),
        })
    }

    /// A readiness event on the link's socket.
    pub(super) fn master_link_event(&mut self, event: &mio::event::Event) {
        let Some(mut link) = self.master_link.take() else {
            return;
        };
        if link.handshake.state() == crate::repl::handshake::State::Connecting {
            let closed = event.is_error() || event.is_read_closed() || event.is_write_closed();
            // None: still connecting; Some(Ok): connected; Some(Err): failed.
            let result = link
                .socket
                .as_ref()
                .and_then(|s| match s.tcp().take_error() {
                    Ok(Some(e)) | Err(e) => Some(Err(e.to_string())),
                    Ok(None) => match s.tcp().peer_addr() {
                        Ok(_) => Some(Ok(())),
                        Err(e) if e.kind() == io::ErrorKind::NotConnected && !closed => None,
                        Err(e) => Some(Err(e.to_string())),
                    },
                });
            match result {
                Some(Ok(())) => {
                    link.progress_ms = now_ms();
                    let step = link.handshake.handle(Event::Connected);
                    self.apply_step(&mut link, step);
                }
                Some(Err(e)) => {
                    let step = link.handshake.handle(Event::SocketError(&e));
                    self.apply_step(&mut link, step);
                }
                None => {}
            }
        }
        if link.socket.is_some() && (event.is_readable() || event.is_read_closed()) {
            self.read_link(&mut link);
        }
        if !matches!(link.phase, Phase::Stream) {
            // Handshake bytes go at once; ACKs wait for the turn's AOF
            // write (cron writes them after it).
            flush_out(&mut link);
        } else if event.is_writable() {
            // Encrypted bytes the socket did not take earlier.
            if let Some(socket) = link.socket.as_mut() {
                let _ = socket.flush_tls();
            }
        }
        self.sync_upstream_facts(&link);
        self.master_link = Some(link);
    }

    /// Reads what the socket has and hands it on by phase. During a
    /// load, once [`LOAD_INBUF_LIMIT`] stream bytes wait, the socket is
    /// left unread until the load ends (which reads it again).
    fn read_link(&mut self, link: &mut MasterLink) {
        if matches!(link.phase, Phase::Loading { .. }) && link.inbuf.len() >= LOAD_INBUF_LIMIT {
            link.more_to_read = false;
            return;
        }
        let Some(socket) = link.socket.as_mut() else {
            return;
        };
        let (bytes, failure, more) = read_some(socket);
        link.more_to_read = more;
        if !bytes.is_empty() {
            link.progress_ms = now_ms();
            if let Some(master) = self.engine.core().replica.master.as_mut() {
                master.last_io_ms = link.progress_ms;
            }
            self.engine.core().repl.stats.net_repl_input_bytes += bytes.len() as u64;
            self.link_input(link, &bytes);
        }
        if let (Some(e), true) = (failure, link.socket.is_some()) {
            self.link_lost(link, &e);
        }
    }

    /// CLIENT KILL of the master client: the link closes as when the
    /// master's connection drops (its state cached, a partial resync
    /// attempted next), as Redis's freeClient of its master does.
    pub(super) fn kill_master_link(&mut self) {
        let Some(mut link) = self.master_link.take() else {
            return;
        };
        if link.socket.is_some() {
            self.link_lost(&mut link, "killed by CLIENT KILL");
        }
        self.master_link = Some(link);
    }

    /// The socket failed or the master closed it.
    fn link_lost(&mut self, link: &mut MasterLink, error: &str) {
        if matches!(link.phase, Phase::Stream) {
            if let Some(master) = self.engine.core().replica.master.as_ref() {
                log::log(Level::Notice, "Connection with master lost.");
                log::log(Level::Notice, "Caching the disconnected master state.");
                link.handshake.set_cached_master(master.position());
            }
            self.close_link_socket(link);
            let step = link.handshake.handle(Event::LinkLost);
            self.apply_step(link, step);
        } else {
            let step = link.handshake.handle(Event::SocketError(error));
            self.apply_step(link, step);
        }
    }

    /// Carries out a step of the handshake: its log lines, a retry's
    /// close, a connect, bytes to send, a sync's start.
    fn apply_step(&mut self, link: &mut MasterLink, step: Step) {
        for line in &step.log {
            let level = match line.level {
                LogLevel::Warning => Level::Warning,
                LogLevel::Notice => Level::Notice,
                LogLevel::Verbose => Level::Verbose,
                LogLevel::Debug => Level::Debug,
            };
            log::log(level, &line.text);
        }
        match step.outcome {
            Some(Outcome::Retry { .. })
                if link.handshake.state() == crate::repl::handshake::State::Connected =>
            {
                // `repl-timeout` on a connected link: cache the master and
                // reconnect.
                if let Some(master) = self.engine.core().replica.master.as_ref() {
                    link.handshake.set_cached_master(master.position());
                    log::log(Level::Notice, "Caching the disconnected master state.");
                }
                self.close_link_socket(link);
                let step = link.handshake.handle(Event::LinkLost);
                self.apply_step(link, step);
            }
            Some(Outcome::Retry {
                reason: RetryReason::FailoverRejected,
            }) => {
                // Redis's abortFailover: a master again.
                self.close_link_socket(link);
                self.engine
                    .core()
                    .abort_failover("Failover target rejected psync request");
            }
            Some(Outcome::Retry { .. }) => self.close_link_socket(link),
            Some(Outcome::FullSync { replid, offset }) => {
                if link.handshake.config().failover {
                    link.handshake.end_failover();
                    self.engine.core().clear_failover();
                }
                link.full_sync = Some((replid, offset));
                link.psync_master = replid.is_some();
                link.phase = Phase::Preamble(PreambleReader::new());
            }
            Some(Outcome::Continue { new_replid }) => {
                if link.handshake.config().failover {
                    link.handshake.end_failover();
                    self.engine.core().clear_failover();
                }
                link.psync_master = true;
                self.engine.core().mirror_continue(new_replid);
                self.start_stream(link);
            }
            None => {}
        }
        if step.connect {
            self.connect_link(link);
        }
        link.out.extend_from_slice(&step.send);
    }

    /// Bytes from the master, by phase.
    fn link_input(&mut self, link: &mut MasterLink, bytes: &[u8]) {
        let mut data = bytes;
        while !data.is_empty() && link.socket.is_some() {
            match &mut link.phase {
                Phase::Handshake => {
                    if !link.handshake.state().is_handshake() {
                        return;
                    }
                    let (used, step) = link.handshake.feed(data);
                    data = &data[used..];
                    let ended = step.outcome.is_some();
                    self.apply_step(link, step);
                    if used == 0 && !ended {
                        return;
                    }
                }
                Phase::Preamble(reader) => {
                    let (used, preamble) = reader.feed(data);
                    data = &data[used..];
                    match preamble {
                        None | Some(Preamble::Keepalive) => {}
                        Some(Preamble::Start(form)) => self.start_payload(link, form),
                        Some(Preamble::Abort(text)) => {
                            log::log(Level::Warning, &text);
                            self.transfer_failed(link);
                        }
                    }
                }
                Phase::Payload {
                    receiver,
                    sink,
                    total,
                    streamed,
                } => {
                    let mut payload = Vec::with_capacity(data.len());
                    let rest = receiver.feed(data, &mut payload);
                    let passed = receiver.passed();
                    let total = *total;
                    data = rest.unwrap_or(&[]);
                    let written = match sink {
                        PayloadSink::File { file, .. } => file.write_all(&payload),
                        PayloadSink::Memory { bytes, .. } => {
                            bytes.extend_from_slice(&payload);
                            Ok(())
                        }
                    };
                    if let Err(e) = written {
                        log::log(
                            Level::Warning,
                            &format!(
                                "Write error or short write writing to the DB dump file needed for \
                                 MASTER <-> REPLICA synchronization: {e}"
                            ),
                        );
                        self.transfer_failed(link);
                        continue;
                    }
                    if let Some((_, feed, window)) = streamed.as_ref() {
                        if passed <= *window {
                            feed.arrived(passed);
                        } else if let Some((load, _, _)) = streamed.take() {
                            // Longer than the window: loaded once whole.
                            load.cancel();
                        }
                    }
                    if let Some(master) = self.engine.core().replica.master.as_mut() {
                        master.transfer = Some((total, passed, now_ms()));
                    }
                    if rest.is_some() {
                        self.finish_payload(link);
                    }
                }
                Phase::Loading { .. } => {
                    // The stream after the payload waits for the load.
                    link.inbuf.extend_from_slice(data);
                    data = &[];
                }
                Phase::Stream => {
                    link.inbuf.extend_from_slice(data);
                    if let Some(master) = self.engine.core().replica.master.as_mut() {
                        master.read_reploff += data.len() as i64;
                    }
                    data = &[];
                    self.apply_stream(link);
                }
            }
        }
    }

    /// Copies the link's state where INFO and ROLE read it.
    fn sync_upstream_facts(&mut self, link: &MasterLink) {
        let state = link.handshake.state().role_name();
        let now = now_ms();
        if let Some(master) = self.engine.core().replica.master.as_mut() {
            let was_up = master.link_up();
            master.state = state;
            if was_up && !master.link_up() {
                master.down_since_ms = Some(now);
            }
        }
    }
}

/// Writes what the socket takes of the queued bytes.
fn flush_out(link: &mut MasterLink) {
    let Some(socket) = link.socket.as_mut() else {
        return;
    };
    if link.handshake.state() == crate::repl::handshake::State::Connecting {
        return;
    }
    while !link.out.is_empty() {
        match socket.write(&link.out) {
            Ok(0) => return,
            Ok(n) => {
                link.out.drain(..n);
            }
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(_) => return,
        }
    }
    // What TLS holds goes too (a failure shows on the next read).
    let _ = socket.flush_tls();
}

/// Reads until the socket has nothing more or [`READ_SLICE`] bytes came:
/// the bytes, the error or end of file that ended the reading, if any,
/// and whether the socket may hold more.
fn read_some(socket: &mut impl Read) -> (Vec<u8>, Option<String>, bool) {
    let mut bytes = Vec::new();
    let mut chunk = [0u8; 64 * 1024];
    while bytes.len() < READ_SLICE {
        match socket.read(&mut chunk) {
            Ok(0) => return (bytes, Some("connection lost".to_string()), false),
            Ok(n) => bytes.extend_from_slice(&chunk[..n]),
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => return (bytes, None, false),
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return (bytes, Some(e.to_string()), false),
        }
    }
    (bytes, None, true)
}
