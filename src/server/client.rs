//! A connected client of the server ([`Client`]) and the token queues the
//! event loop keeps its clients in.

use std::os::fd::AsRawFd;

use super::host;
use super::listener::{PeerAddr, Stream};
use super::log::{self, Level};
use super::{OUTPUT_KEEP_BYTES, OUTPUT_PAUSE_BYTES};
use crate::command::ctx::Connection;
use crate::command::Session;
use crate::engine::now_ms;
use crate::resp::{self, Parser};

/// Client tokens in first-come order without duplicates: O(1) push and
/// membership, so a turn with thousands of active clients stays linear.
#[derive(Debug, Default)]
pub(super) struct TokenQueue {
    pub(super) order: Vec<usize>,
    members: std::collections::HashSet<usize>,
}

impl TokenQueue {
    pub(super) fn push(&mut self, token: usize) {
        if self.members.insert(token) {
            self.order.push(token);
        }
    }

    pub(super) fn contains(&self, token: &usize) -> bool {
        self.members.contains(token)
    }

    pub(super) fn is_empty(&self) -> bool {
        self.order.is_empty()
    }

    pub(super) fn take(&mut self) -> Vec<usize> {
        self.members.clear();
        std::mem::take(&mut self.order)
    }

    pub(super) fn retain(&mut self, mut keep: impl FnMut(&usize) -> bool) {
        let members = &mut self.members;
        self.order.retain(|t| {
            let k = keep(t);
            if !k {
                members.remove(t);
            }
            k
        });
    }
}

/// One connected client.
pub struct Client {
    pub(super) stream: Stream,
    /// Peer address.
    pub addr: PeerAddr,
    /// Local address the client connected to.
    pub local_addr: PeerAddr,
    pub(super) inbuf: Vec<u8>,
    pub(super) parser: Parser,
    pub(super) out: Vec<u8>,
    pub(super) out_pos: usize,
    /// Pipelined-key look-aheads still to skip (the server's
    /// `PREFETCH_QUIET_WINDOWS`).
    pub(super) prefetch_quiet: u8,
    /// The engine-side state (db, protocol, name, auth).
    pub session: Session,
    /// Unix ms of the last request received.
    pub last_interaction_ms: i64,
    pub(super) writable_registered: bool,
    /// Set to close the connection once pending output is written (QUIT,
    /// protocol errors, CLIENT KILL from another client).
    pub closing: bool,
    /// The client's output includes replies to writes whose batch is not
    /// yet in the AOF: it is held until the batch is written (and fsynced
    /// under `always`).
    pub(super) awaiting_log: bool,
    /// Went over its output buffer limit: closed at the end of the turn.
    pub(super) overflowed: bool,
    /// Since when the output has been over the soft limit (Unix ms).
    pub(super) soft_limit_since_ms: Option<i64>,
    /// Input is not read nor executed until the unsent output drains
    /// (backpressure on a client that does not read its replies).
    pub(super) paused: bool,
    /// A replica's disk payload being sent.
    pub(super) bulk: Option<super::replica::BulkSend>,
    /// Its next command waits for a client pause to end (its input kept).
    pub(super) postponed: bool,
    /// Its SHUTDOWN waits for the outcome (nothing more is executed).
    pub(super) shutdown_caller: bool,
}

impl Client {
    /// A client for a connection just accepted.
    pub fn new(
        stream: impl Into<Stream>,
        addr: impl Into<PeerAddr>,
        limits: resp::Limits,
        session: Session,
    ) -> Client {
        let (stream, addr) = (stream.into(), addr.into());
        let _ = stream.set_nodelay(true);
        let local_addr = match (&stream, addr) {
            (Stream::Tcp(s), _) => s.local_addr().map_or(addr, PeerAddr::Tcp),
            (Stream::Tls(s), _) => s.sock().local_addr().map_or(addr, PeerAddr::Tcp),
            (Stream::Unix(_), unix) => unix,
        };
        Client {
            stream,
            addr,
            local_addr,
            inbuf: Vec::new(),
            parser: Parser::new(limits),
            out: Vec::new(),
            out_pos: 0,
            prefetch_quiet: 0,
            session,
            last_interaction_ms: now_ms(),
            writable_registered: false,
            closing: false,
            awaiting_log: false,
            overflowed: false,
            soft_limit_since_ms: None,
            paused: false,
            bulk: None,
            postponed: false,
            shutdown_caller: false,
        }
    }

    /// Bytes of input received and not yet executed.
    pub fn query_buffer_len(&self) -> usize {
        self.inbuf.len() - self.parser.consumed()
    }

    /// Drops the written part of the output buffer once it is at least
    /// half of it, so a client that reads slowly but steadily does not
    /// keep every byte it was ever sent (amortised: each byte moves at
    /// most once per halving).
    pub(super) fn compact_output(&mut self) {
        if self.out_pos > 0 && self.out_pos >= self.out.len() - self.out_pos {
            self.out.drain(..self.out_pos);
            self.out_pos = 0;
        }
    }

    /// Empties the output once all of it is written, releasing a large
    /// buffer.
    pub(super) fn output_written(&mut self) {
        self.out.clear();
        self.out_pos = 0;
        if self.out.capacity() > OUTPUT_KEEP_BYTES {
            self.out = Vec::new();
        }
    }

    /// Bytes of output not yet written.
    pub fn output_len(&self) -> usize {
        self.out.len() - self.out_pos
    }

    /// The connection facts CLIENT LIST and CLIENT KILL use, without
    /// formatting anything (this is taken for every batch of requests).
    pub fn facts(&self) -> host::ConnFacts {
        host::ConnFacts {
            addr: self.addr,
            local_addr: self.local_addr,
            fd: i64::from(self.stream.as_raw_fd()),
            last_interaction_ms: self.last_interaction_ms,
            query_buffer_bytes: self.query_buffer_len(),
            query_buffer_free_bytes: self.inbuf.capacity() - self.inbuf.len(),
            output_bytes: self.output_len(),
            total_bytes: self.inbuf.capacity() + self.out.capacity(),
            writable_registered: self.writable_registered,
        }
    }

    /// The connection facts CLIENT LIST and CLIENT KILL use.
    pub fn connection(&self) -> Connection {
        self.facts().connection()
    }

    /// Redis's checkClientOutputBufferLimits: over the hard limit, or over
    /// the soft limit for longer than its time.
    pub(super) fn output_over_limit(
        &mut self,
        limits: &crate::config::OutputLimit,
        now_ms: i64,
    ) -> bool {
        let used = self.output_len() as u64;
        self.replica_over_limit(limits, used, now_ms)
    }

    /// [`Client::output_over_limit`] for `used` bytes of output (a
    /// replica's count its stream and outbox too).
    pub(super) fn replica_over_limit(
        &mut self,
        limits: &crate::config::OutputLimit,
        used: u64,
        now_ms: i64,
    ) -> bool {
        if limits.hard_bytes > 0 && used >= limits.hard_bytes {
            return true;
        }
        if limits.soft_bytes > 0 && used >= limits.soft_bytes {
            let since = *self.soft_limit_since_ms.get_or_insert(now_ms);
            return now_ms - since >= (limits.soft_seconds as i64) * 1000;
        }
        self.soft_limit_since_ms = None;
        false
    }

    /// The output limit of the client's class (Redis's getClientType: a
    /// client with subscriptions is `pubsub`, any other `normal`).
    pub(super) fn output_limit(
        &self,
        config: &crate::config::Config,
    ) -> crate::config::OutputLimit {
        if self.session.subscribed() {
            config.pubsub_output_limit
        } else {
            config.normal_output_limit
        }
    }
}

/// The unsent output at which a client's input is paused (see
/// [`OUTPUT_PAUSE_BYTES`]).
pub(super) fn output_pause_bytes(config: &crate::config::Config) -> u64 {
    let normal = config.normal_output_limit;
    OUTPUT_PAUSE_BYTES
        .max(normal.hard_bytes)
        .max(normal.soft_bytes)
}

/// Logs Redis's line for a client closed over its output limit.
pub(super) fn log_overflow(client: &Client) {
    log::log(
        Level::Warning,
        &format!(
            "Client id={} addr={} scheduled to be closed ASAP for overcoming of output buffer limits.",
            client.session.id, client.addr
        ),
    );
}
