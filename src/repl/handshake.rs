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

    /// The configuration.
    pub fn config(&self) -> &Config {
        &self.config
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
                encode_command(
                    &mut step.send,
                    &[&b"PSYNC"[..], cached.replid.as_bytes(), offset.as_bytes()],
                );
            }
            None => {
                step.notice("Partial resynchronization not possible (no cached master)");
                encode_command(&mut step.send, &["PSYNC", "?", "-1"]);
            }
        }
        self.state = State::ReceivePsyncReply;
    }

    /// The reply to PSYNC (Redis's `slaveTryPartialResynchronization`).
    fn psync_reply(&mut self, line: &[u8], step: &mut Out) {
        let text = String::from_utf8_lossy(line);
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
mod tests {
    use super::*;

    const ID: &str = "0123456789abcdef0123456789abcdef01234567";
    const OTHER: &str = "fedcba9876543210fedcba9876543210fedcba98";

    fn config(user: Option<&str>, auth: Option<&str>, ip: Option<&str>) -> Config {
        Config {
            host: "10.0.0.1".into(),
            port: 6379,
            listening_port: 6380,
            announce_ip: ip.map(|s| s.as_bytes().to_vec()),
            masteruser: user.map(|s| s.as_bytes().to_vec()),
            masterauth: auth.map(|s| s.as_bytes().to_vec()),
        }
    }

    fn plain() -> Handshake {
        Handshake::new(config(None, None, None))
    }

    fn texts(step: &Step) -> Vec<&str> {
        step.log.iter().map(|l| l.text.as_str()).collect()
    }

    fn line(h: &mut Handshake, line: &str) -> Step {
        h.handle(Event::Line(line.as_bytes()))
    }

    fn cached(offset: i64) -> Option<Position> {
        Some(Position {
            replid: ReplId::parse(ID.as_bytes()).unwrap(),
            offset,
            stream_db: 0,
        })
    }

    /// Drives a machine to the PSYNC reply; returns the PSYNC step.
    fn to_psync(h: &mut Handshake) -> Step {
        h.handle(Event::Cron);
        h.handle(Event::Connected);
        line(h, "+PONG");
        while h.state() != State::ReceiveCapaReply {
            line(h, "+OK");
        }
        let step = line(h, "+OK");
        assert_eq!(step.state, State::ReceivePsyncReply);
        step
    }

    const PING: &[u8] = b"*1\r\n$4\r\nPING\r\n";
    const PORT: &[u8] = b"*3\r\n$8\r\nREPLCONF\r\n$14\r\nlistening-port\r\n$4\r\n6380\r\n";
    const CAPA: &[u8] =
        b"*5\r\n$8\r\nREPLCONF\r\n$4\r\ncapa\r\n$3\r\neof\r\n$4\r\ncapa\r\n$6\r\npsync2\r\n";
    const PSYNC_ANY: &[u8] = b"*3\r\n$5\r\nPSYNC\r\n$1\r\n?\r\n$2\r\n-1\r\n";

    #[test]
    fn a_first_full_sync_goes_as_with_redis() {
        let mut h = plain();
        assert_eq!(h.config(), &config(None, None, None));
        assert_eq!(h.state(), State::Connect);
        let step = h.handle(Event::Cron);
        assert_eq!(
            texts(&step),
            [
                "Connecting to MASTER 10.0.0.1:6379",
                "MASTER <-> REPLICA sync started"
            ]
        );
        assert!(step.log.iter().all(|l| l.level == LogLevel::Notice));
        assert!(step.connect && step.send.is_empty() && step.outcome.is_none());
        assert_eq!(step.state, State::Connecting);

        let step = h.handle(Event::Connected);
        assert_eq!(
            texts(&step),
            ["Non blocking connect for SYNC fired the event."]
        );
        assert_eq!(step.send, PING);
        assert!(!step.connect);
        assert_eq!(step.state, State::ReceivePingReply);

        let step = line(&mut h, "+PONG");
        assert_eq!(
            texts(&step),
            ["Master replied to PING, replication can continue..."]
        );
        assert_eq!(step.send, [PORT, CAPA].concat());
        assert_eq!(step.state, State::ReceivePortReply);

        let step = line(&mut h, "+OK");
        assert!(step.log.is_empty() && step.send.is_empty());
        assert_eq!(step.state, State::ReceiveCapaReply);

        let step = line(&mut h, "+OK");
        assert_eq!(
            texts(&step),
            ["Partial resynchronization not possible (no cached master)"]
        );
        assert_eq!(step.send, PSYNC_ANY);
        assert_eq!(step.state, State::ReceivePsyncReply);

        let step = line(&mut h, &format!("+FULLRESYNC {ID} 4242"));
        assert_eq!(
            texts(&step),
            [format!("Full resync from master: {ID}:4242")]
        );
        assert_eq!(
            step.outcome,
            Some(Outcome::FullSync {
                replid: ReplId::parse(ID.as_bytes()),
                offset: 4242
            })
        );
        assert_eq!(
            (step.state, step.state.role_name()),
            (State::Transfer, "sync")
        );

        let step = h.handle(Event::Loaded);
        assert_eq!(
            texts(&step),
            ["MASTER <-> REPLICA sync: Finished with success"]
        );
        assert_eq!(
            (step.state, step.state.role_name()),
            (State::Connected, "connected")
        );
    }

    #[test]
    fn the_pipelined_commands_for_every_configuration() {
        let auth = b"*2\r\n$4\r\nAUTH\r\n$6\r\nsecret\r\n".to_vec();
        let user_auth = b"*3\r\n$4\r\nAUTH\r\n$5\r\nalice\r\n$6\r\nsecret\r\n".to_vec();
        let ip = b"*3\r\n$8\r\nREPLCONF\r\n$10\r\nip-address\r\n$8\r\n10.0.0.7\r\n".to_vec();
        let none = Vec::new();
        let cases = [
            ((None, None, None), [&none, &none], 2),
            ((None, Some("secret"), None), [&auth, &none], 3),
            (
                (Some("alice"), Some("secret"), None),
                [&user_auth, &none],
                3,
            ),
            // masteruser alone sends no AUTH.
            ((Some("alice"), None, None), [&none, &none], 2),
            ((None, None, Some("10.0.0.7")), [&none, &ip], 3),
            ((None, Some("secret"), Some("10.0.0.7")), [&auth, &ip], 4),
            (
                (Some("alice"), Some("secret"), Some("10.0.0.7")),
                [&user_auth, &ip],
                4,
            ),
        ];
        for ((user, pass, announce), [auth_bytes, ip_bytes], replies) in cases {
            let mut h = Handshake::new(config(user, pass, announce));
            h.handle(Event::Cron);
            assert_eq!(h.handle(Event::Connected).send, PING);
            let step = line(&mut h, "+PONG");
            let want = [&auth_bytes[..], PORT, &ip_bytes[..], CAPA].concat();
            assert_eq!(
                String::from_utf8_lossy(&step.send),
                String::from_utf8_lossy(&want),
                "{user:?} {pass:?} {announce:?}"
            );
            // One reply per command, then PSYNC and nothing before it.
            for i in 0..replies {
                let step = line(&mut h, "+OK");
                if i + 1 < replies {
                    assert!(step.send.is_empty());
                    assert!(h.state().is_handshake());
                    assert_eq!(h.state().role_name(), "handshake");
                } else {
                    assert_eq!(step.send, PSYNC_ANY);
                }
            }
            assert_eq!(h.state(), State::ReceivePsyncReply);
        }
    }

    #[test]
    fn ping_replies_that_let_the_handshake_go_on() {
        for reply in [
            "+PONG",
            "+",
            "+anything",
            "-NOAUTH Authentication required.",
            "-NOPERM this user has no permissions to run the 'ping' command",
            "-ERR operation not permitted",
            "-ERR operation not permitted by the old server",
        ] {
            let mut h = plain();
            h.handle(Event::Cron);
            h.handle(Event::Connected);
            let step = line(&mut h, reply);
            assert_eq!(
                texts(&step),
                ["Master replied to PING, replication can continue..."],
                "{reply}"
            );
            assert_eq!(step.state, State::ReceivePortReply);
            assert_eq!(step.outcome, None);
        }
    }

    #[test]
    fn ping_replies_that_abort() {
        for reply in [
            "-ERR unknown command 'PING'",
            "-ERR operation not",
            "-LOADING Redis is loading the dataset in memory",
            "-NOAUT",
            "PONG",
            "$4",
            "",
        ] {
            let mut h = plain();
            h.handle(Event::Cron);
            h.handle(Event::Connected);
            let step = line(&mut h, reply);
            assert_eq!(step.log.len(), 1);
            assert_eq!(step.log[0].level, LogLevel::Warning);
            assert_eq!(
                step.log[0].text,
                format!("Error reply to PING from master: '{reply}'")
            );
            assert!(step.send.is_empty() && !step.connect);
            assert_eq!(
                step.outcome,
                Some(Outcome::Retry {
                    reason: RetryReason::PingRefused
                })
            );
            assert_eq!(step.state, State::Connect);
            // The cron starts the next attempt.
            let step = h.handle(Event::Cron);
            assert!(step.connect);
            assert_eq!(step.state, State::Connecting);
        }
    }

    #[test]
    fn an_auth_error_aborts() {
        let mut h = Handshake::new(config(Some("alice"), Some("wrong"), None));
        h.handle(Event::Cron);
        h.handle(Event::Connected);
        line(&mut h, "+PONG");
        assert_eq!(h.state(), State::ReceiveAuthReply);
        let step = line(
            &mut h,
            "-WRONGPASS invalid username-password pair or user is disabled.",
        );
        assert_eq!(
            step.log,
            [LogLine {
                level: LogLevel::Warning,
                text: "Unable to AUTH to MASTER: -WRONGPASS invalid username-password pair \
                       or user is disabled."
                    .into()
            }]
        );
        assert!(step.send.is_empty());
        assert_eq!(
            step.outcome,
            Some(Outcome::Retry {
                reason: RetryReason::AuthRefused
            })
        );
        assert_eq!(step.state, State::Connect);
        // A reply that is not an error is success, whatever it says.
        let mut h = Handshake::new(config(None, Some("secret"), None));
        h.handle(Event::Cron);
        h.handle(Event::Connected);
        line(&mut h, "+PONG");
        let step = line(&mut h, "+OK");
        assert!(step.log.is_empty() && step.outcome.is_none());
        assert_eq!(step.state, State::ReceivePortReply);
    }

    #[test]
    fn replconf_errors_are_logged_and_ignored() {
        let mut h = Handshake::new(config(None, None, Some("10.0.0.7")));
        h.handle(Event::Cron);
        h.handle(Event::Connected);
        line(&mut h, "+PONG");
        let step = line(&mut h, "-ERR Unrecognized REPLCONF option: listening-port");
        assert_eq!(
            step.log,
            [LogLine {
                level: LogLevel::Notice,
                text: "(Non critical) Master does not understand REPLCONF listening-port: \
                       -ERR Unrecognized REPLCONF option: listening-port"
                    .into()
            }]
        );
        assert_eq!(step.state, State::ReceiveIpReply);
        let step = line(&mut h, "-ERR nope");
        assert_eq!(
            texts(&step),
            ["(Non critical) Master does not understand REPLCONF ip-address: -ERR nope"]
        );
        assert_eq!(step.state, State::ReceiveCapaReply);
        let step = line(&mut h, "-ERR syntax error");
        assert_eq!(
            texts(&step),
            [
                "(Non critical) Master does not understand REPLCONF capa: -ERR syntax error",
                "Partial resynchronization not possible (no cached master)"
            ]
        );
        assert_eq!(step.send, PSYNC_ANY);
        assert_eq!(step.outcome, None);
    }

    #[test]
    fn psync_asks_for_the_byte_after_the_cached_offset() {
        let mut h = plain();
        h.set_cached_master(cached(1000));
        assert_eq!(h.cached_master(), cached(1000).as_ref());
        let step = to_psync(&mut h);
        assert_eq!(
            texts(&step),
            [format!(
                "Trying a partial resynchronization (request {ID}:1001)."
            )]
        );
        assert_eq!(
            String::from_utf8_lossy(&step.send),
            format!("*3\r\n$5\r\nPSYNC\r\n$40\r\n{ID}\r\n$4\r\n1001\r\n")
        );
    }

    #[test]
    fn keepalives_before_the_psync_reply_are_skipped() {
        let mut h = plain();
        to_psync(&mut h);
        for _ in 0..3 {
            let step = line(&mut h, "");
            assert!(step.log.is_empty() && step.send.is_empty() && step.outcome.is_none());
            assert_eq!(step.state, State::ReceivePsyncReply);
        }
        let step = line(&mut h, &format!("+FULLRESYNC {ID} 0"));
        assert_eq!(
            step.outcome,
            Some(Outcome::FullSync {
                replid: ReplId::parse(ID.as_bytes()),
                offset: 0
            })
        );
    }

    #[test]
    fn malformed_fullresync_leaves_the_id_unknown() {
        for reply in [
            "+FULLRESYNC".to_string(),
            "+FULLRESYNC ".to_string(),
            format!("+FULLRESYNC {ID}"),
            format!("+FULLRESYNC {ID} "),
            format!("+FULLRESYNC {}  1", &ID[..39]),
            format!("+FULLRESYNC {ID}0 1"),
            format!("+FULLRESYNC {}g 1", &ID[..39]),
            format!("+FULLRESYNC {ID} -1"),
            format!("+FULLRESYNC {ID} 1x"),
            format!("+FULLRESYNC {ID} 01"),
            format!("+FULLRESYNC {ID} 1 2"),
            format!("+FULLRESYNC  {ID} 1"),
            format!("+FULLRESYNCX {ID} 1"),
        ] {
            let mut h = plain();
            to_psync(&mut h);
            let step = line(&mut h, &reply);
            assert_eq!(
                step.log,
                [LogLine {
                    level: LogLevel::Warning,
                    text: "Master replied with wrong +FULLRESYNC syntax.".into()
                }],
                "{reply}"
            );
            assert_eq!(
                step.outcome,
                Some(Outcome::FullSync {
                    replid: None,
                    offset: -1
                }),
                "{reply}"
            );
            assert!(step.send.is_empty());
            assert_eq!(step.state, State::Transfer);
        }
    }

    #[test]
    fn continue_with_the_same_or_no_id() {
        for reply in ["+CONTINUE".to_string(), format!("+CONTINUE {ID}")] {
            let mut h = plain();
            h.set_cached_master(cached(99));
            to_psync(&mut h);
            let step = line(&mut h, &reply);
            assert_eq!(
                texts(&step),
                [
                    "Successful partial resynchronization with master.",
                    "MASTER <-> REPLICA sync: Master accepted a Partial Resynchronization."
                ],
                "{reply}"
            );
            assert_eq!(step.outcome, Some(Outcome::Continue { new_replid: None }));
            assert_eq!(step.state, State::Connected);
            assert!(step.send.is_empty());
        }
    }

    #[test]
    fn continue_with_a_new_id() {
        let upper = ID.to_ascii_uppercase();
        for new in [OTHER, upper.as_str()] {
            let mut h = plain();
            h.set_cached_master(cached(99));
            to_psync(&mut h);
            let step = line(&mut h, &format!("+CONTINUE {new}"));
            assert_eq!(
                step.log,
                [
                    LogLine {
                        level: LogLevel::Notice,
                        text: "Successful partial resynchronization with master.".into()
                    },
                    LogLine {
                        level: LogLevel::Warning,
                        text: format!("Master replication ID changed to {new}")
                    },
                    LogLine {
                        level: LogLevel::Notice,
                        text: "MASTER <-> REPLICA sync: Master accepted a Partial \
                               Resynchronization."
                            .into()
                    },
                ]
            );
            assert_eq!(
                step.outcome,
                Some(Outcome::Continue {
                    new_replid: ReplId::parse(new.as_bytes())
                })
            );
        }
    }

    #[test]
    fn continue_that_hozon_cannot_act_on() {
        for reply in [
            format!("+CONTINUE {}", &ID[..39]),
            format!("+CONTINUE {ID}0"),
            format!("+CONTINUE  {ID}"),
            format!("+CONTINUE {}z", &ID[..39]),
            "+CONTINUEX".to_string(),
        ] {
            let mut h = plain();
            h.set_cached_master(cached(99));
            to_psync(&mut h);
            let step = line(&mut h, &reply);
            assert_eq!(
                step.log,
                [LogLine {
                    level: LogLevel::Warning,
                    text: format!("Master replied with wrong +CONTINUE syntax: {reply}")
                }]
            );
            assert_eq!(
                step.outcome,
                Some(Outcome::Retry {
                    reason: RetryReason::BadReply
                })
            );
            assert_eq!(step.state, State::Connect);
        }
        // We asked `PSYNC ? -1`: a master cannot continue that.
        let mut h = plain();
        to_psync(&mut h);
        let step = line(&mut h, "+CONTINUE");
        assert_eq!(
            texts(&step),
            ["Master accepted a partial resynchronization we did not ask for: +CONTINUE"]
        );
        assert_eq!(
            step.outcome,
            Some(Outcome::Retry {
                reason: RetryReason::BadReply
            })
        );
    }

    #[test]
    fn nomasterlink_and_loading_retry_later() {
        for reply in [
            "-NOMASTERLINK Can't SYNC while not connected with my master",
            "-LOADING Redis is loading the dataset in memory",
        ] {
            let mut h = plain();
            to_psync(&mut h);
            let step = line(&mut h, reply);
            assert_eq!(
                step.log,
                [LogLine {
                    level: LogLevel::Notice,
                    text: format!(
                        "Master is currently unable to PSYNC but should be in the future: {reply}"
                    )
                }]
            );
            assert!(step.send.is_empty() && !step.connect);
            assert_eq!(
                step.outcome,
                Some(Outcome::Retry {
                    reason: RetryReason::TryLater
                })
            );
            assert_eq!(step.state, State::Connect);
        }
    }

    #[test]
    fn an_error_to_psync_falls_back_to_sync() {
        for reply in [
            "-ERR unknown command 'PSYNC'",
            "-ERR SYNC and PSYNC are invalid with pending output",
            "-ERR",
        ] {
            let mut h = plain();
            h.set_cached_master(cached(5));
            to_psync(&mut h);
            let step = line(&mut h, reply);
            assert_eq!(
                step.log,
                [
                    LogLine {
                        level: LogLevel::Notice,
                        text: format!(
                            "Master does not support PSYNC or is in error state (reply: {reply})"
                        )
                    },
                    LogLine {
                        level: LogLevel::Notice,
                        text: "Retrying with SYNC...".into()
                    }
                ]
            );
            assert_eq!(step.send, b"SYNC\r\n");
            assert_eq!(
                step.outcome,
                Some(Outcome::FullSync {
                    replid: None,
                    offset: -1
                })
            );
            assert_eq!(step.state, State::Transfer);
        }
    }

    #[test]
    fn an_unexpected_reply_to_psync_falls_back_to_sync() {
        for reply in [
            "+OK",
            "-NOAUTH Authentication required.",
            "-MISCONF Errors writing to the AOF file: No space left on device",
            "$5",
            "PONG",
        ] {
            let mut h = plain();
            to_psync(&mut h);
            let step = line(&mut h, reply);
            assert_eq!(
                step.log,
                [
                    LogLine {
                        level: LogLevel::Warning,
                        text: format!("Unexpected reply to PSYNC from master: {reply}")
                    },
                    LogLine {
                        level: LogLevel::Notice,
                        text: "Retrying with SYNC...".into()
                    }
                ]
            );
            assert_eq!(step.send, SYNC);
            assert_eq!(
                step.outcome,
                Some(Outcome::FullSync {
                    replid: None,
                    offset: -1
                })
            );
        }
    }

    #[test]
    fn timeouts_in_each_state() {
        // Before and during the handshake: a new attempt at once.
        for replies in 0..=4 {
            let mut h = plain();
            h.handle(Event::Cron);
            if replies > 0 {
                h.handle(Event::Connected);
            }
            for reply in ["+PONG", "+OK", "+OK"].iter().take(replies.max(1) - 1) {
                line(&mut h, reply);
            }
            let before = h.state();
            assert!(before == State::Connecting || before.is_handshake());
            let step = h.handle(Event::Timeout);
            assert_eq!(
                step.log,
                [
                    LogLine {
                        level: LogLevel::Warning,
                        text: "Timeout connecting to the MASTER...".into()
                    },
                    LogLine {
                        level: LogLevel::Notice,
                        text: "Reconnecting to MASTER 10.0.0.1:6379 after failure".into()
                    },
                    LogLine {
                        level: LogLevel::Notice,
                        text: "MASTER <-> REPLICA sync started".into()
                    },
                ],
                "{before:?}"
            );
            assert!(step.connect);
            assert_eq!(
                step.outcome,
                Some(Outcome::Retry {
                    reason: RetryReason::Timeout
                })
            );
            assert_eq!(step.state, State::Connecting);
        }
        // Waiting for the PSYNC reply.
        let mut h = plain();
        to_psync(&mut h);
        let step = h.handle(Event::Timeout);
        assert_eq!(texts(&step)[0], "Timeout connecting to the MASTER...");
        assert_eq!(step.state, State::Connecting);
        // During the transfer.
        let mut h = plain();
        to_psync(&mut h);
        line(&mut h, &format!("+FULLRESYNC {ID} 7"));
        let step = h.handle(Event::Timeout);
        assert_eq!(
            texts(&step),
            [
                "Timeout receiving bulk data from MASTER... If the problem persists try to set \
                 the 'repl-timeout' parameter in redis.conf to a larger value.",
                "Reconnecting to MASTER 10.0.0.1:6379 after failure",
                "MASTER <-> REPLICA sync started"
            ]
        );
        assert_eq!(step.log[0].level, LogLevel::Warning);
        assert!(step.connect);
        assert_eq!(step.state, State::Connecting);
        // Connected: the caller closes the link, then reports it lost.
        let mut h = plain();
        h.set_cached_master(cached(1));
        to_psync(&mut h);
        line(&mut h, "+CONTINUE");
        let step = h.handle(Event::Timeout);
        assert_eq!(
            step.log,
            [LogLine {
                level: LogLevel::Warning,
                text: "MASTER timeout: no data nor PING received...".into()
            }]
        );
        assert_eq!(
            step.outcome,
            Some(Outcome::Retry {
                reason: RetryReason::Timeout
            })
        );
        assert!(!step.connect);
        let step = h.handle(Event::LinkLost);
        assert_eq!(
            texts(&step),
            [
                "Reconnecting to MASTER 10.0.0.1:6379",
                "MASTER <-> REPLICA sync started"
            ]
        );
        assert!(step.connect);
        assert_eq!(step.state, State::Connecting);
        // With no attempt running, a timeout means nothing.
        let mut h = plain();
        let step = h.handle(Event::Timeout);
        assert!(step.log.is_empty() && !step.connect && step.outcome.is_none());
        assert_eq!(step.state, State::Connect);
    }

    #[test]
    fn socket_errors_in_each_state() {
        let retry = Some(Outcome::Retry {
            reason: RetryReason::Socket,
        });
        let mut h = plain();
        h.handle(Event::Cron);
        let step = h.handle(Event::SocketError("Connection refused"));
        assert_eq!(
            texts(&step),
            ["Error condition on socket for SYNC: Connection refused"]
        );
        assert_eq!(
            (step.outcome, step.state, step.connect),
            (retry, State::Connect, false)
        );

        let mut h = plain();
        h.handle(Event::Cron);
        h.handle(Event::Connected);
        let step = h.handle(Event::SocketError("connection lost"));
        assert_eq!(
            texts(&step),
            [
                "Failed to read response from the server: connection lost",
                "Master did not respond to command during SYNC handshake"
            ]
        );
        assert_eq!((step.outcome, step.state), (retry, State::Connect));

        let mut h = plain();
        to_psync(&mut h);
        let step = h.handle(Event::SocketError("connection lost"));
        assert_eq!(
            texts(&step),
            [
                "Failed to read response from the server: connection lost",
                "Master did not reply to PSYNC, will try later"
            ]
        );
        assert_eq!((step.outcome, step.state), (retry, State::Connect));

        let mut h = plain();
        to_psync(&mut h);
        line(&mut h, &format!("+FULLRESYNC {ID} 7"));
        let step = h.handle(Event::SocketError("connection lost"));
        assert_eq!(
            texts(&step),
            [
                "I/O error trying to sync with MASTER: connection lost",
                "Reconnecting to MASTER 10.0.0.1:6379 after failure",
                "MASTER <-> REPLICA sync started"
            ]
        );
        assert_eq!(
            (step.outcome, step.state, step.connect),
            (retry, State::Connecting, true)
        );
    }

    #[test]
    fn a_failed_transfer_reconnects_at_once() {
        let mut h = plain();
        to_psync(&mut h);
        line(&mut h, "-ERR");
        assert_eq!(h.state(), State::Transfer);
        let step = h.handle(Event::TransferFailed);
        assert_eq!(
            texts(&step),
            [
                "Reconnecting to MASTER 10.0.0.1:6379 after failure",
                "MASTER <-> REPLICA sync started"
            ]
        );
        assert_eq!(
            step.outcome,
            Some(Outcome::Retry {
                reason: RetryReason::TransferFailed
            })
        );
        assert!(step.connect);
        assert_eq!(step.state, State::Connecting);
    }

    #[test]
    fn events_that_do_not_apply_change_nothing() {
        let mut h = plain();
        for event in [
            Event::Connected,
            Event::Line(b"+PONG"),
            Event::Loaded,
            Event::LinkLost,
            Event::TransferFailed,
        ] {
            let step = h.handle(event);
            assert!(step.log.is_empty() && step.send.is_empty() && !step.connect);
            assert_eq!(step.state, State::Connect);
        }
        h.handle(Event::Cron);
        for event in [Event::Cron, Event::Line(b"+PONG"), Event::Loaded] {
            let step = h.handle(event);
            assert!(step.log.is_empty() && step.send.is_empty() && !step.connect);
            assert_eq!(step.state, State::Connecting);
        }
        assert_eq!(h.feed(b"+PONG\r\n").0, 0);
    }

    #[test]
    fn role_names() {
        assert_eq!(State::Connect.role_name(), "connect");
        assert_eq!(State::Connecting.role_name(), "connecting");
        for s in [
            State::ReceivePingReply,
            State::ReceiveAuthReply,
            State::ReceivePortReply,
            State::ReceiveIpReply,
            State::ReceiveCapaReply,
            State::ReceivePsyncReply,
        ] {
            assert_eq!(s.role_name(), "handshake");
            assert!(s.is_handshake());
        }
        assert_eq!(State::Transfer.role_name(), "sync");
        assert_eq!(State::Connected.role_name(), "connected");
        assert!(!State::Transfer.is_handshake());
    }

    #[test]
    fn feeding_bytes_reads_lines_and_stops_at_the_outcome() {
        let replies = format!(
            "+PONG\r\n+OK\r\n+OK\r\n+OK\r\n\n\n+FULLRESYNC {ID} 42\r\n\n$EOF:{OTHER}\r\nREDIS"
        );
        let after = format!("\n$EOF:{OTHER}\r\nREDIS");
        for piece in [1, 2, 5, 13, replies.len()] {
            let mut h = Handshake::new(config(None, Some("pw"), None));
            h.handle(Event::Cron);
            h.handle(Event::Connected);
            let bytes = replies.as_bytes();
            let mut at = 0;
            let mut log = Vec::new();
            let mut send = Vec::new();
            let mut outcome = None;
            while at < bytes.len() && outcome.is_none() {
                let end = (at + piece).min(bytes.len());
                let (used, step) = h.feed(&bytes[at..end]);
                at += used;
                log.extend(step.log.into_iter().map(|l| l.text));
                send.extend(step.send);
                outcome = step.outcome;
                if used < end - (at - used) {
                    // Stopped inside the piece: the attempt ended.
                    assert!(outcome.is_some());
                }
            }
            assert_eq!(&replies[at..], after, "pieces of {piece}");
            assert_eq!(
                log,
                [
                    "Master replied to PING, replication can continue...".to_string(),
                    "Partial resynchronization not possible (no cached master)".into(),
                    format!("Full resync from master: {ID}:42"),
                ]
            );
            assert_eq!(
                send,
                [
                    &b"*2\r\n$4\r\nAUTH\r\n$2\r\npw\r\n"[..],
                    PORT,
                    CAPA,
                    PSYNC_ANY
                ]
                .concat()
            );
            assert_eq!(
                outcome,
                Some(Outcome::FullSync {
                    replid: ReplId::parse(ID.as_bytes()),
                    offset: 42
                })
            );
            assert_eq!(h.state(), State::Transfer);
            // Nothing more is read in the transfer.
            assert_eq!(h.feed(after.as_bytes()).0, 0);
        }
    }

    #[test]
    fn a_reply_line_over_1_kib_aborts() {
        let mut h = plain();
        h.handle(Event::Cron);
        h.handle(Event::Connected);
        let long = vec![b'+'; LINE_MAX + 10];
        let (used, step) = h.feed(&long);
        assert_eq!(used, LINE_MAX + 1);
        assert_eq!(
            step.log,
            [LogLine {
                level: LogLevel::Warning,
                text: "Master sent a reply line longer than 1024 bytes during the SYNC handshake"
                    .into()
            }]
        );
        assert_eq!(
            step.outcome,
            Some(Outcome::Retry {
                reason: RetryReason::BadReply
            })
        );
        assert_eq!(step.state, State::Connect);
        // The next attempt starts with an empty line buffer.
        h.handle(Event::Cron);
        h.handle(Event::Connected);
        let (used, step) = h.feed(b"+PONG\r\n");
        assert_eq!(used, 7);
        assert_eq!(step.state, State::ReceivePortReply);
    }
}
