//! The replica's side of the link's start (docs/replication.md,
//! "Handshake"): a sans-IO state machine with Redis 7.0's steps, replies
//! and log lines (`syncWithMaster`, `slaveTryPartialResynchronization`).
//!
//! The event loop feeds it [`Event`]s (the cron's tick, the connect's
//! result, reply lines, timeouts) and carries out the [`Step`] each
//! returns: open a connection, write bytes, log lines, and act on the
//! attempt's [`Outcome`]. It never touches a socket or a clock: the caller
//! decides when `repl-timeout` has passed (every line received is
//! progress).

use super::ids::{Position, ReplId, REPLID_LEN};
use super::payload::{LineReader, LineTooLong, LINE_MAX};
use crate::config::LogLevel;
use crate::persist::aof::encode_command;
use crate::types::num::parse_i64;

/// What the replica tells its master, from its configuration.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Config {
    /// The master's host, as `replicaof` gives it (for log lines).
    pub host: String,
    /// The master's port.
    pub port: u16,
    /// The port sent with `REPLCONF listening-port`:
    /// `replica-announce-port` when set, else our own port.
    pub listening_port: u16,
    /// `replica-announce-ip`: sent with `REPLCONF ip-address` when set.
    pub announce_ip: Option<Vec<u8>>,
    /// `masteruser`: the user of `AUTH`, only with `masterauth`.
    pub masteruser: Option<Vec<u8>>,
    /// `masterauth`: `AUTH` is sent only when set.
    pub masterauth: Option<Vec<u8>>,
    /// This server is failing over to the master it connects to: PSYNC
    /// carries `FAILOVER`, and any reply but `+CONTINUE`/`+FULLRESYNC`
    /// ends the attempt with [`RetryReason::FailoverRejected`].
    pub failover: bool,
}

/// Where the link stands (Redis's `repl_state`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum State {
    /// No link and no attempt: the next cron tick starts one.
    Connect,
    /// The non-blocking connect is under way.
    Connecting,
    /// `PING` sent; waiting for its reply.
    ReceivePingReply,
    /// `AUTH` and the `REPLCONF`s sent; waiting for `AUTH`'s reply.
    ReceiveAuthReply,
    /// Waiting for the reply to `REPLCONF listening-port`.
    ReceivePortReply,
    /// Waiting for the reply to `REPLCONF ip-address`.
    ReceiveIpReply,
    /// Waiting for the reply to `REPLCONF capa`.
    ReceiveCapaReply,
    /// `PSYNC` sent; waiting for its reply.
    ReceivePsyncReply,
    /// A full sync: the payload's lines and bytes come (the caller reads
    /// them with `payload::PreambleReader` and a `payload::Receiver`).
    Transfer,
    /// The stream flows.
    Connected,
}

impl State {
    /// The state as ROLE names it: `connect`, `connecting`, `handshake`,
    /// `sync` or `connected`.
    pub fn role_name(self) -> &'static str {
        match self {
            State::Connect => "connect",
            State::Connecting => "connecting",
            State::Transfer => "sync",
            State::Connected => "connected",
            _ => "handshake",
        }
    }

    /// Whether the state is one of the handshake's (a reply line is
    /// awaited).
    pub fn is_handshake(self) -> bool {
        matches!(
            self,
            State::ReceivePingReply
                | State::ReceiveAuthReply
                | State::ReceivePortReply
                | State::ReceiveIpReply
                | State::ReceiveCapaReply
                | State::ReceivePsyncReply
        )
    }
}

/// What happened, as the event loop sees it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Event<'a> {
    /// The once-a-second cron: starts an attempt in [`State::Connect`].
    Cron,
    /// The non-blocking connect completed.
    Connected,
    /// The connect or the socket failed (the text: the error).
    SocketError(&'a str),
    /// A reply line from the master, without its line ending.
    Line(&'a [u8]),
    /// `repl-timeout` passed without progress (no line, no payload byte;
    /// in [`State::Connected`], no stream byte).
    Timeout,
    /// The payload could not be received or loaded (the caller logged
    /// why, e.g. `payload::Preamble::Abort`'s text).
    TransferFailed,
    /// The payload is loaded: the stream flows.
    Loaded,
    /// The connected link closed (after the caller cached the master
    /// state): reconnect at once.
    LinkLost,
}

/// How an attempt ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// A full sync: the payload follows. `replid` and `offset` are the
    /// master's from `+FULLRESYNC`; `None` and -1 after `SYNC` or a
    /// malformed `+FULLRESYNC` (Redis's `master_initial_offset`: the
    /// master is then pre-PSYNC, gets no ACKs, and the next PSYNC is `?`).
    FullSync {
        /// The master's replication id.
        replid: Option<ReplId>,
        /// The offset of the last stream byte the payload includes.
        offset: i64,
    },
    /// `+CONTINUE`: the stream follows from the cached master's offset.
    /// `new_replid`: the master's id when it differs from the cached one;
    /// the caller then moves the cached id to replid2 with
    /// `second_replid_offset = master_repl_offset + 1`, takes the new id
    /// and closes its own replicas.
    Continue {
        /// The master's new replication id, if it changed.
        new_replid: Option<ReplId>,
    },
    /// The attempt failed: close the connection. The cron starts the next
    /// attempt, unless the same step already asks to connect.
    Retry {
        /// Why.
        reason: RetryReason,
    },
}

/// Why an attempt is given up.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RetryReason {
    /// No progress for `repl-timeout`.
    Timeout,
    /// The connect or the socket failed.
    Socket,
    /// `PING` got an error other than an authentication one.
    PingRefused,
    /// `AUTH` got an error.
    AuthRefused,
    /// `-NOMASTERLINK` or `-LOADING` to PSYNC: the master should serve us
    /// later.
    TryLater,
    /// A reply hozon cannot act on (a line over 1 KiB, a malformed
    /// `+CONTINUE`, `+CONTINUE` without a cached master).
    BadReply,
    /// The payload could not be received or loaded.
    TransferFailed,
    /// The master we fail over to refused `PSYNC … FAILOVER`.
    FailoverRejected,
}

/// A log line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LogLine {
    /// Redis's level for it.
    pub level: LogLevel,
    /// The text, Redis's where Redis has one.
    pub text: String,
}

/// What the caller does after an event, in this order: log, close the
/// connection on a [`Outcome::Retry`], open one if `connect`, write
/// `send`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Step {
    /// Log lines, in order.
    pub log: Vec<LogLine>,
    /// Start a non-blocking connect to the master, then report
    /// [`Event::Connected`] or [`Event::SocketError`].
    pub connect: bool,
    /// Bytes to write to the master.
    pub send: Vec<u8>,
    /// The attempt's end, when reached.
    pub outcome: Option<Outcome>,
    /// The state after the event.
    pub state: State,
}

/// Redis's inline `SYNC`, sent after PSYNC is refused with an error.
pub const SYNC: &[u8] = b"SYNC\r\n";

/// The replica's handshake with its master.
#[derive(Debug)]
pub struct Handshake {
    config: Config,
    state: State,
    cached: Option<Position>,
    lines: LineReader,
}

impl Handshake {
    /// A machine in [`State::Connect`] with no cached master.
    pub fn new(config: Config) -> Handshake {
        Handshake {
            config,
            state: State::Connect,
            cached: None,
            lines: LineReader::new(),
        }
    }

    /// The current state.
    pub fn state(&self) -> State {
        self.state
    }

    /// The failover this link was made for is over: later attempts send
    /// a plain PSYNC.
    pub fn end_failover(&mut self) {
        self.config.failover = false;
    }

    /// The settings the link was made with.
    pub fn config(&self) -> &Config {
        &self.config
    }

    /// The settings in force now (`masterauth`, `masteruser`, the
    /// announced address, CONFIG SET since the link was made), for the
    /// next attempt: Redis reads them at each one.
    pub fn set_config(&mut self, config: Config) {
        self.config = config;
    }

    /// Sets the cached master: its id and the offset of the last stream
    /// byte applied (`reploff`). The next PSYNC asks for
    /// `<replid> <offset + 1>`; `None`: `PSYNC ? -1`.
    pub fn set_cached_master(&mut self, cached: Option<Position>) {
        self.cached = cached;
    }

    /// The cached master.
    pub fn cached_master(&self) -> Option<&Position> {
        self.cached.as_ref()
    }

    /// Handles one event.
    pub fn handle(&mut self, event: Event<'_>) -> Step {
        let mut step = Out::default();
        match (self.state, event) {
            (State::Connect, Event::Cron) => {
                step.notice(format!(
                    "Connecting to MASTER {}:{}",
                    self.config.host, self.config.port
                ));
                self.connect(&mut step);
            }
            (State::Connecting, Event::Connected) => {
                step.notice("Non blocking connect for SYNC fired the event.");
                encode_command(&mut step.send, &["PING"]);
                self.state = State::ReceivePingReply;
            }
            (State::Connecting, Event::SocketError(err)) => {
                step.warning(format!("Error condition on socket for SYNC: {err}"));
                self.fail(&mut step, RetryReason::Socket);
            }
            (state, Event::SocketError(err)) if state.is_handshake() => {
                step.warning(format!("Failed to read response from the server: {err}"));
                step.warning(if state == State::ReceivePsyncReply {
                    "Master did not reply to PSYNC, will try later"
                } else {
                    "Master did not respond to command during SYNC handshake"
                });
                self.fail(&mut step, RetryReason::Socket);
            }
            (state, Event::Line(line)) if state.is_handshake() => self.line(line, &mut step),
            (state, Event::Timeout) if state == State::Connecting || state.is_handshake() => {
                step.warning("Timeout connecting to the MASTER...");
                self.reconnect_after_failure(&mut step, RetryReason::Timeout);
            }
            (State::Transfer, Event::Timeout) => {
                step.warning(
                    "Timeout receiving bulk data from MASTER... If the problem persists try to \
                     set the 'repl-timeout' parameter in redis.conf to a larger value.",
                );
                self.reconnect_after_failure(&mut step, RetryReason::Timeout);
            }
            (State::Transfer, Event::SocketError(err)) => {
                step.warning(format!("I/O error trying to sync with MASTER: {err}"));
                self.reconnect_after_failure(&mut step, RetryReason::Socket);
            }
            (State::Transfer, Event::TransferFailed) => {
                self.reconnect_after_failure(&mut step, RetryReason::TransferFailed);
            }
            (State::Transfer, Event::Loaded) => {
                step.notice("MASTER <-> REPLICA sync: Finished with success");
                self.state = State::Connected;
            }
            (State::Connected, Event::Timeout) => {
                // The caller closes the link, caches the master and
                // reports `LinkLost`.
                step.warning("MASTER timeout: no data nor PING received...");
                step.outcome = Some(Outcome::Retry {
                    reason: RetryReason::Timeout,
                });
            }
            (State::Connected, Event::LinkLost | Event::SocketError(_)) => {
                step.notice(format!(
                    "Reconnecting to MASTER {}:{}",
                    self.config.host, self.config.port
                ));
                self.connect(&mut step);
            }
            // Anything else does not apply in this state.
            _ => {}
        }
        step.finish(self.state)
    }

    /// Reads reply bytes during the handshake, line by line (at most
    /// [`LINE_MAX`] bytes each), until they run out or the attempt ends.
    /// Returns how many bytes were consumed (those after an outcome are
    /// the payload's lines or the stream) and what to do. Outside the
    /// handshake nothing is consumed. Use either this or
    /// [`Event::Line`], not both.
    pub fn feed(&mut self, bytes: &[u8]) -> (usize, Step) {
        let mut all = Out::default();
        let mut used = 0;
        while used < bytes.len() && self.state.is_handshake() && all.outcome.is_none() {
            let (n, line) = self.lines.feed(&bytes[used..]);
            used += n;
            let step = match line {
                None => break,
                Some(Ok(line)) => {
                    let line = line.to_vec();
                    self.handle(Event::Line(&line))
                }
                Some(Err(LineTooLong)) => {
                    let mut step = Out::default();
                    step.warning(format!(
                        "Master sent a reply line longer than {LINE_MAX} bytes during the SYNC \
                         handshake"
                    ));
                    self.fail(&mut step, RetryReason::BadReply);
                    step.finish(self.state)
                }
            };
            all.merge(step);
        }
        (used, all.finish(self.state))
    }

    /// Starts the non-blocking connect (Redis's `connectWithMaster`).
    fn connect(&mut self, step: &mut Out) {
        step.connect = true;
        step.notice("MASTER <-> REPLICA sync started");
        self.state = State::Connecting;
    }

    /// The attempt failed: back to [`State::Connect`] for the cron.
    fn fail(&mut self, step: &mut Out, reason: RetryReason) {
        step.outcome = Some(Outcome::Retry { reason });
        self.state = State::Connect;
        self.lines = LineReader::new();
    }

    /// The attempt failed and a new one starts at once (Redis's
    /// `cancelReplicationHandshake(1)`).
    fn reconnect_after_failure(&mut self, step: &mut Out, reason: RetryReason) {
        self.fail(step, reason);
        step.notice(format!(
            "Reconnecting to MASTER {}:{} after failure",
            self.config.host, self.config.port
        ));
        self.connect(step);
    }

    /// A reply line in a handshake state.
    fn line(&mut self, line: &[u8], step: &mut Out) {
        let text = String::from_utf8_lossy(line);
        match self.state {
            State::ReceivePingReply => {
                if line.first() == Some(&b'+')
                    || line.starts_with(b"-NOAUTH")
                    || line.starts_with(b"-NOPERM")
                    || line.starts_with(b"-ERR operation not permitted")
                {
                    step.notice("Master replied to PING, replication can continue...");
                    self.send_handshake(step);
                } else {
                    step.warning(format!("Error reply to PING from master: '{text}'"));
                    self.fail(step, RetryReason::PingRefused);
                }
            }
            State::ReceiveAuthReply => {
                if line.first() == Some(&b'-') {
                    step.warning(format!("Unable to AUTH to MASTER: {text}"));
                    self.fail(step, RetryReason::AuthRefused);
                } else {
                    self.state = State::ReceivePortReply;
                }
            }
            State::ReceivePortReply => {
                non_critical(line, "listening-port", step);
                self.state = if self.config.announce_ip.is_some() {
                    State::ReceiveIpReply
                } else {
                    State::ReceiveCapaReply
                };
            }
            State::ReceiveIpReply => {
                non_critical(line, "ip-address", step);
                self.state = State::ReceiveCapaReply;
            }
            State::ReceiveCapaReply => {
                non_critical(line, "capa", step);
                self.send_psync(step);
            }
            State::ReceivePsyncReply => self.psync_reply(line, step),
            _ => {}
        }
    }

    /// The pipelined AUTH and REPLCONFs, after the PING reply.
    fn send_handshake(&mut self, step: &mut Out) {
        let c = &self.config;
        if let Some(auth) = &c.masterauth {
            match &c.masteruser {
                Some(user) => encode_command(&mut step.send, &[&b"AUTH"[..], user, auth]),
                None => encode_command(&mut step.send, &[&b"AUTH"[..], auth]),
            }
        }
        let port = c.listening_port.to_string();
        encode_command(&mut step.send, &["REPLCONF", "listening-port", &port]);
        if let Some(ip) = &c.announce_ip {
            encode_command(&mut step.send, &[&b"REPLCONF"[..], b"ip-address", ip]);
        }
        encode_command(
            &mut step.send,
            &["REPLCONF", "capa", "eof", "capa", "psync2"],
        );
        self.state = if c.masterauth.is_some() {
            State::ReceiveAuthReply
        } else {
            State::ReceivePortReply
        };
    }

    /// PSYNC with the cached master, or `PSYNC ? -1`.
    fn send_psync(&mut self, step: &mut Out) {
        match &self.cached {
            Some(cached) => {
                let offset = cached.offset.saturating_add(1).to_string();
                step.notice(format!(
                    "Trying a partial resynchronization (request {}:{offset}).",
                    cached.replid
                ));
                let replid = cached.replid.to_string();
                self.encode_psync(&mut step.send, &replid, &offset);
            }
            None => {
                step.notice("Partial resynchronization not possible (no cached master)");
                self.encode_psync(&mut step.send, "?", "-1");
            }
        }
        self.state = State::ReceivePsyncReply;
    }

    /// `PSYNC <replid> <offset>`, with `FAILOVER` while failing over.
    fn encode_psync(&self, out: &mut Vec<u8>, replid: &str, offset: &str) {
        if self.config.failover {
            encode_command(out, &["PSYNC", replid, offset, "FAILOVER"]);
        } else {
            encode_command(out, &["PSYNC", replid, offset]);
        }
    }

    /// The reply to PSYNC (Redis's `slaveTryPartialResynchronization`).
    fn psync_reply(&mut self, line: &[u8], step: &mut Out) {
        let text = String::from_utf8_lossy(line);
        let settled = line.starts_with(b"+FULLRESYNC") || line.starts_with(b"+CONTINUE");
        if self.config.failover && !line.is_empty() && !settled {
            step.notice(format!("Failover target rejected psync request: {text}"));
            self.fail(step, RetryReason::FailoverRejected);
            return;
        }
        if line.is_empty() {
            // A keepalive before the reply.
        } else if line.starts_with(b"+FULLRESYNC") {
            match parse_fullresync(line) {
                Some((replid, offset)) => {
                    step.notice(format!("Full resync from master: {replid}:{offset}"));
                    self.full_sync(step, Some(replid), offset);
                }
                None => {
                    step.warning("Master replied with wrong +FULLRESYNC syntax.");
                    self.full_sync(step, None, -1);
                }
            }
        } else if let Some(rest) = line.strip_prefix(b"+CONTINUE") {
            let id = match rest {
                b"" => Ok(None),
                _ => rest
                    .strip_prefix(b" ")
                    .and_then(ReplId::parse)
                    .map(Some)
                    .ok_or(()),
            };
            match (id, &self.cached) {
                (Err(()), _) => {
                    step.warning(format!(
                        "Master replied with wrong +CONTINUE syntax: {text}"
                    ));
                    self.fail(step, RetryReason::BadReply);
                }
                (Ok(_), None) => {
                    step.warning(format!(
                        "Master accepted a partial resynchronization we did not ask for: {text}"
                    ));
                    self.fail(step, RetryReason::BadReply);
                }
                (Ok(id), Some(cached)) => {
                    step.notice("Successful partial resynchronization with master.");
                    // Redis compares with strcmp: a change of case is a change.
                    let new_replid = id.filter(|id| id != &cached.replid);
                    if let Some(id) = new_replid {
                        step.warning(format!("Master replication ID changed to {id}"));
                    }
                    step.notice(
                        "MASTER <-> REPLICA sync: Master accepted a Partial Resynchronization.",
                    );
                    step.outcome = Some(Outcome::Continue { new_replid });
                    self.state = State::Connected;
                }
            }
        } else if line.starts_with(b"-NOMASTERLINK") || line.starts_with(b"-LOADING") {
            step.notice(format!(
                "Master is currently unable to PSYNC but should be in the future: {text}"
            ));
            self.fail(step, RetryReason::TryLater);
        } else {
            if line.starts_with(b"-ERR") {
                step.notice(format!(
                    "Master does not support PSYNC or is in error state (reply: {text})"
                ));
            } else {
                step.warning(format!("Unexpected reply to PSYNC from master: {text}"));
            }
            step.notice("Retrying with SYNC...");
            step.send.extend_from_slice(SYNC);
            self.full_sync(step, None, -1);
        }
    }

    /// A full sync starts: the payload's lines come next.
    fn full_sync(&mut self, step: &mut Out, replid: Option<ReplId>, offset: i64) {
        step.outcome = Some(Outcome::FullSync { replid, offset });
        self.state = State::Transfer;
    }
}

/// Logs an error reply to a REPLCONF, which does not stop the handshake.
fn non_critical(line: &[u8], what: &str, step: &mut Out) {
    if line.first() == Some(&b'-') {
        step.notice(format!(
            "(Non critical) Master does not understand REPLCONF {what}: {}",
            String::from_utf8_lossy(line)
        ));
    }
}

/// `+FULLRESYNC <40 hex> <offset>`, exactly: the id and the offset (a
/// non-negative integer by Redis's rules).
fn parse_fullresync(line: &[u8]) -> Option<(ReplId, i64)> {
    let rest = line.strip_prefix(b"+FULLRESYNC ")?;
    let (id, offset) = (rest.get(..REPLID_LEN)?, rest.get(REPLID_LEN..)?);
    let offset = parse_i64(offset.strip_prefix(b" ")?).filter(|&o| o >= 0)?;
    Some((ReplId::parse(id)?, offset))
}

/// A [`Step`] being built.
#[derive(Debug, Default)]
struct Out {
    log: Vec<LogLine>,
    connect: bool,
    send: Vec<u8>,
    outcome: Option<Outcome>,
}

impl Out {
    fn notice(&mut self, text: impl Into<String>) {
        self.log.push(LogLine {
            level: LogLevel::Notice,
            text: text.into(),
        });
    }

    fn warning(&mut self, text: impl Into<String>) {
        self.log.push(LogLine {
            level: LogLevel::Warning,
            text: text.into(),
        });
    }

    fn merge(&mut self, step: Step) {
        self.log.extend(step.log);
        self.connect |= step.connect;
        self.send.extend_from_slice(&step.send);
        self.outcome = self.outcome.or(step.outcome);
    }

    fn finish(self, state: State) -> Step {
        Step {
            log: self.log,
            connect: self.connect,
            send: self.send,
            outcome: self.outcome,
            state,
        }
    }
}

#[cfg(test)]
mod tests;
