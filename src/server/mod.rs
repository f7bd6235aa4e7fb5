//! The RESP server: a single-threaded event loop (mio) in front of the
//! engine.
//!
//! Why mio and one thread: commands execute one at a time anyway (Redis's
//! model), and on a 2-core machine a second thread for I/O would compete
//! with the benchmark client for the other core. One readiness loop reads
//! every ready socket, parses and executes all complete requests
//! (pipelining), encodes the replies, and only at the end of the turn writes
//! them out. That end-of-turn point is where the append-only file is
//! written (`commit_log`): the effects every client's commands logged in the
//! turn go out as one batch in one write(2), fsynced there and then under
//! `appendfsync always` (group commit; under `everysec` a background thread
//! fsyncs about once a second). Replies to those writes are held until their
//! batch is written (and fsynced under `always`); a client whose batch can
//! no longer be made durable (a failed fsync) is disconnected without them.

mod busy_poll;
mod client;
pub mod host;
mod io_threads;
pub mod listener;
pub mod log;
mod master_link;
mod replica;
mod shutdown;
mod startup;
pub mod supervise;
#[cfg(feature = "tls")]
pub mod tls;
#[cfg(not(feature = "tls"))]
#[path = "tls_off.rs"]
pub mod tls;

use std::collections::HashMap;
use std::io::{self, Read, Write};
use std::net::SocketAddr;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;
use std::time::{Duration, Instant};

use mio::{Events, Interest, Poll, Token};

use crate::engine::{now_ms, Engine};
use crate::resp;
use busy_poll::BusyPoll;
pub use client::Client;
use client::{log_overflow, output_pause_bytes, TokenQueue};
use log::Level;

/// Bytes read from a socket per read call.
const READ_CHUNK_BYTES: usize = 16 * 1024;
/// Output buffers above this size are released once flushed.
const OUTPUT_KEEP_BYTES: usize = 64 * 1024;
/// Most bytes read from one client in one loop turn: a client sending
/// faster than the server reads must not keep the turn (and every other
/// client) waiting, nor fill its query buffer in one go. The rest is read
/// in the next turn.
const READ_TURN_MAX_BYTES: usize = 1024 * 1024;
/// A client whose unsent output reaches this many bytes stops having its
/// further input read and executed until the output drains below half of
/// it (backpressure; see docs/security.md "Clients that do not read"). A
/// configured `client-output-buffer-limit normal` above it raises it, so
/// that limit disconnects as in Redis.
const OUTPUT_PAUSE_BYTES: u64 = 1024 * 1024;
/// Longest slice of background work (BGSAVE, AOF rewrite, a replication
/// capture) between two turns of client requests: what a client can wait
/// for because of it (beyond one value's encoding). Short, because a
/// request arriving during a slice waits for its end; the turn between
/// two slices costs about a microsecond.
const BACKGROUND_SLICE: Duration = Duration::from_micros(25);
/// How long the loop sleeps, events aside, while a background job waits
/// for its writer thread (epoll's resolution: 1 ms).
const WRITER_WAIT: Duration = Duration::from_millis(1);
/// TLS clients refused by protected mode kept beyond `maxclients` until
/// their handshake ends and the refusal is sent; past that, one is closed
/// without it.
const TLS_REFUSALS_HELD: u64 = 64;
/// Tokens below this value are listeners.
const FIRST_CLIENT_TOKEN: usize = 1024;

/// Redis's protected-mode refusal, sent to non-loopback clients when no
/// password is set.
const DENIED_PROTECTED: &str = "-DENIED Redis is running in protected mode because protected mode is enabled and no password is set for the default user. In this mode connections are only accepted from the loopback interface. If you want to connect from external computers to Redis you may adopt one of the following solutions: 1) Just disable protected mode sending the command 'CONFIG SET protected-mode no' from the loopback interface by connecting to Redis from the same host the server is running, however MAKE SURE Redis is not publicly accessible from internet if you do so. Use CONFIG REWRITE to make this change permanent. 2) Alternatively you can just disable the protected mode by editing the Redis configuration file, and setting the protected mode option to 'no', and then restarting the server. 3) If you started the server manually just for testing, restart it with the '--protected-mode no' option. 4) Setup a an authentication password for the default user. NOTE: You only need to do one of the above things in order for the server to start accepting connections from the outside.\r\n";

/// Connected clients by token (hashed with foldhash: tokens are ours, so
/// flooding resistance buys nothing on this per-request lookup).
pub type ClientMap = HashMap<usize, Client, foldhash::fast::RandomState>;

/// The server: listeners, clients and the engine.
pub struct Server {
    engine: Engine,
    poll: Poll,
    /// The listening sockets (TCP, TLS, Unix) and the TLS configuration.
    listeners: listener::Listeners,
    clients: ClientMap,
    next_token: usize,
    shutdown: Arc<AtomicBool>,
    /// Clients with replies to write at the end of this turn.
    pending: TokenQueue,
    /// Scratch buffer every socket read goes through.
    read_buf: Box<[u8]>,
    /// Clients whose replies wait for their batch to reach the AOF.
    held: TokenQueue,
    /// An AOF write error was logged and has not cleared yet.
    aof_error_logged: bool,
    /// Clients marked for closing by another client (CLIENT KILL).
    killed: Vec<usize>,
    /// Unix ms of the last idle-client check (`timeout`).
    last_idle_check_ms: i64,
    /// Connection token of each session id (blocked clients and Pub/Sub
    /// messages are addressed by session).
    session_tokens: HashMap<u64, usize, foldhash::fast::RandomState>,
    /// Clients served or unblocked this turn: input they sent while blocked
    /// is processed before the turn ends.
    unblocked: TokenQueue,
    /// Clients over their output buffer limit, closed at the end of the turn.
    overflowed: Vec<usize>,
    /// Connections accepted while a script was busy, taken in after it.
    parked: Vec<Client>,
    /// Clients whose input is paused until their output drains.
    paused: TokenQueue,
    /// Clients to read (and process) again in the next turn: their socket
    /// may hold more than one turn reads, or they were just resumed.
    reread: TokenQueue,
    /// Whether to poll a little before sleeping (`busy-poll-us`).
    busy_poll: BusyPoll,
    /// The shutdown asked for (SHUTDOWN or a signal) and not finished.
    shutdown_state: Option<shutdown::Shutdown>,
    /// Clients whose next command waits for a client pause to end.
    postponed: TokenQueue,
    /// The pause in force at the end of the last turn (when it ends or
    /// holds back less, the postponed clients are looked at again).
    pause_seen: Option<crate::core::PauseMode>,
    /// The link to our master, on a replica.
    master_link: Option<master_link::MasterLink>,
    /// The thread loading the files read at startup, until it is done.
    startup: Option<startup::StartupThread>,
    /// The helpers writing replies (`io-threads` above 1).
    io_threads: Option<io_threads::IoThreads>,
}

impl Server {
    /// Binds the configured addresses. `shutdown` is set (by a signal
    /// handler or SHUTDOWN) to stop the loop.
    pub fn bind(mut engine: Engine, shutdown: Arc<AtomicBool>) -> Result<Server, crate::Error> {
        engine.set_group_commit(true);
        engine.set_capture_effects(false);
        host::adjust_open_files_limit(&mut engine.core().config).map_err(crate::Error::Config)?;
        let poll = Poll::new().map_err(|e| io_error("creating the event loop", e))?;
        let listeners = listener::Listeners::open(engine.config(), poll.registry())
            .map_err(crate::Error::Config)?;
        let io_threads = io_threads::IoThreads::start(engine.config().io_threads)
            .map_err(|e| io_error("starting the I/O threads", e))?;
        Ok(Server {
            engine,
            poll,
            listeners,
            clients: ClientMap::default(),
            next_token: FIRST_CLIENT_TOKEN,
            shutdown,
            pending: TokenQueue::default(),
            read_buf: vec![0u8; READ_CHUNK_BYTES].into_boxed_slice(),
            held: TokenQueue::default(),
            aof_error_logged: false,
            killed: Vec::new(),
            last_idle_check_ms: 0,
            session_tokens: HashMap::default(),
            unblocked: TokenQueue::default(),
            overflowed: Vec::new(),
            parked: Vec::new(),
            paused: TokenQueue::default(),
            reread: TokenQueue::default(),
            busy_poll: BusyPoll::new(std::thread::available_parallelism().map_or(1, |n| n.get())),
            shutdown_state: None,
            postponed: TokenQueue::default(),
            pause_seen: None,
            master_link: None,
            startup: None,
            io_threads,
        })
    }

    /// The addresses actually bound (useful with port 0).
    pub fn local_addrs(&self) -> Vec<SocketAddr> {
        self.listeners.tcp_addrs()
    }

    /// The TLS addresses bound (`tls-port`).
    pub fn tls_addrs(&self) -> Vec<SocketAddr> {
        self.listeners.tls_addrs()
    }

    /// The Unix socket's path, when `unixsocket` is set.
    pub fn unix_socket_path(&self) -> Option<&str> {
        self.listeners.unix.as_ref().map(|u| u.path)
    }

    /// Runs until shutdown is requested.
    pub fn run(&mut self) -> Result<(), crate::Error> {
        let mut events = Events::with_capacity(1024);
        loop {
            let hz = self.engine.config().hz.clamp(1, 500);
            let mut tick = Duration::from_millis(u64::from(1000 / hz));
            if self.engine.core().background_busy() {
                // A BGSAVE, rewrite or replication capture advances a
                // short slice per turn, turn after turn, so a request
                // waits for one slice at most (docs/cores.md). It sleeps
                // while its writer thread has the most blocks queued or
                // the file is being finished (a turn would find nothing
                // to do), and a capture paced by rdb-key-save-delay
                // sleeps until its next key is due.
                tick = match self.engine.core().keyspace.capture_wait() {
                    Some(wait) => tick.min(wait),
                    None if self.engine.core().background_waits() => tick.min(WRITER_WAIT),
                    None => Duration::ZERO,
                };
            }
            if let Some(deadline) = self.engine.next_block_deadline() {
                let wait_ms = (deadline - now_ms()).max(0) as u64;
                tick = tick.min(Duration::from_millis(wait_ms));
            }
            if !self.reread.order.is_empty()
                || self.master_link_has_more()
                || self.engine.eviction_pending()
            {
                // Input already waiting, or an eviction run to continue
                // (Redis's zero-delay eviction timer): no sleeping.
                tick = Duration::ZERO;
            }
            self.wait(&mut events, tick)?;
            self.check_startup_load()?;
            for token in self.reread.take() {
                self.read_client(token);
            }
            for event in events.iter() {
                let token = event.token().0;
                if token == master_link::MASTER_TOKEN {
                    self.master_link_event(event);
                    continue;
                }
                if token == startup::STARTUP_TOKEN {
                    continue;
                }
                if token < FIRST_CLIENT_TOKEN {
                    self.accept(token);
                    continue;
                }
                if event.is_readable() || event.is_read_closed() || event.is_error() {
                    self.read_client(token);
                }
                if event.is_writable() {
                    self.pending.push(token);
                }
            }
            self.expire_blocked();
            self.check_pause_change();
            self.process_unblocked();
            if self.engine.eviction_pending() {
                self.engine
                    .eviction_timer(&mut || host::counted_memory().map(|m| m.used));
            }
            self.close_overflowed();
            self.commit_log();
            self.publish_stream();
            self.engine.tracking_turn_end();
            self.deliver_link_messages();
            self.flush_pending();
            self.check_paused();
            self.engine.cron();
            if self.engine.has_messages() {
                // Keyspace notifications of keys active expiry removed.
                self.deliver_link_messages();
                self.flush_pending();
            }
            self.settle_held();
            self.close_idle_clients();
            if let Some(line) = self.engine.background_step(BACKGROUND_SLICE, now_ms()) {
                log::log(Level::Notice, &line);
            }
            self.publish_stream();
            self.service_replicas();
            self.master_link_cron();
            if self.shutdown_step() {
                return Ok(());
            }
        }
    }

    /// Waits up to `tick` for events, polling without sleeping first when
    /// the busy-poll predictor says requests are coming close together.
    fn wait(&mut self, events: &mut Events, tick: Duration) -> Result<(), crate::Error> {
        let limit = Duration::from_micros(self.engine.config().busy_poll_us);
        let start = Instant::now();
        let spin = self.busy_poll.spin_for(limit, tick, start);
        let mut timeout = tick;
        // `events` still holds the last turn's events until a poll.
        let mut found = false;
        if !spin.is_zero() {
            loop {
                self.poll_once(events, Duration::ZERO)?;
                if !events.is_empty() {
                    found = true;
                    break;
                }
                let spun = start.elapsed();
                if spun >= spin {
                    timeout = tick.saturating_sub(spun);
                    break;
                }
                std::hint::spin_loop();
            }
        }
        if !found {
            self.poll_once(events, timeout)?;
        }
        self.busy_poll
            .record(limit, tick, start.elapsed(), !events.is_empty());
        Ok(())
    }

    fn poll_once(&mut self, events: &mut Events, timeout: Duration) -> Result<(), crate::Error> {
        match self.poll.poll(events, Some(timeout)) {
            Ok(()) => Ok(()),
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {
                events.clear();
                Ok(())
            }
            Err(e) => Err(io_error("waiting for events", e)),
        }
    }

    fn accept(&mut self, listener: usize) {
        loop {
            // CONFIG SET port/bind may have replaced the listeners since
            // the event was reported.
            let Some(accepted) = self.listeners.accept(listener) else {
                return;
            };
            let (mut stream, addr): (listener::Stream, listener::PeerAddr) = match accepted {
                Ok(s) => s,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => {
                    log::log(Level::Warning, &format!("Accepting client connection: {e}"));
                    return;
                }
            };
            let nopass = self.engine.core().acl.default_user().nopass;
            let config = self.engine.config();
            let full = self.clients.len() as u64 >= config.maxclients;
            let refusal = if full {
                Some("-ERR max number of clients reached\r\n")
            } else if host::protected_mode_refuses(config, nopass, addr.ip()) {
                Some(DENIED_PROTECTED)
            } else {
                None
            };
            if let Some(refusal) = refusal {
                let room = (self.clients.len() as u64) < config.maxclients + TLS_REFUSALS_HELD;
                self.engine.core().stats.rejected_connections += 1;
                // Over maxclients a TLS connection is dropped unanswered,
                // as Redis drops it (its handshake has not run).
                if stream.is_tls() && room && !full {
                    // Sent once the handshake ends, as Redis sends it.
                    let session = self.engine.new_session();
                    let client = Client::new(stream, addr, resp::Limits::default(), session);
                    self.refuse_tls(client, refusal);
                } else {
                    let _ = stream.write(refusal.as_bytes());
                }
                continue;
            }
            self.engine.core().stats.connections_received += 1;
            let token = self.next_token;
            self.next_token += 1;
            if let Err(e) =
                self.poll
                    .registry()
                    .register(&mut stream, Token(token), Interest::READABLE)
            {
                log::log(Level::Warning, &format!("Registering client: {e}"));
                continue;
            }
            let limits = resp::Limits {
                max_bulk_len: self.engine.config().proto_max_bulk_len as i64,
            };
            let session = self.engine.new_session();
            self.session_tokens.insert(session.id, token);
            self.clients
                .insert(token, Client::new(stream, addr, limits, session));
        }
    }

    /// Takes in the connections accepted while a script was busy: checked
    /// as at accept time, registered, and their input (what they sent
    /// during the script and was not answered) processed.
    fn adopt_parked(&mut self) {
        for mut client in std::mem::take(&mut self.parked) {
            let nopass = self.engine.core().acl.default_user().nopass;
            let config = self.engine.config();
            let refusal = if self.clients.len() as u64 >= config.maxclients {
                Some("-ERR max number of clients reached\r\n")
            } else if host::protected_mode_refuses(config, nopass, client.addr.ip()) {
                Some(DENIED_PROTECTED)
            } else {
                None
            };
            if let Some(refusal) = refusal {
                self.engine.core().stats.rejected_connections += 1;
                let full = refusal.starts_with("-ERR max");
                if client.stream.is_tls() && !full {
                    self.refuse_tls(client, refusal);
                } else {
                    let _ = client.stream.write(refusal.as_bytes());
                }
                continue;
            }
            self.engine.core().stats.connections_received += 1;
            let token = self.next_token;
            self.next_token += 1;
            if let Err(e) =
                self.poll
                    .registry()
                    .register(&mut client.stream, Token(token), Interest::READABLE)
            {
                log::log(Level::Warning, &format!("Registering client: {e}"));
                continue;
            }
            self.session_tokens.insert(client.session.id, token);
            self.clients.insert(token, client);
            self.unblocked.push(token);
            self.pending.push(token);
        }
    }

    /// Keeps a refused TLS client until its handshake ends and the
    /// refusal is sent (then it is closed); its session never runs a
    /// command.
    fn refuse_tls(&mut self, mut client: Client, refusal: &str) {
        let token = self.next_token;
        self.next_token += 1;
        if let Err(e) = self.poll.registry().register(
            &mut client.stream,
            Token(token),
            Interest::READABLE | Interest::WRITABLE,
        ) {
            log::log(Level::Warning, &format!("Registering client: {e}"));
            return;
        }
        client.writable_registered = true;
        client.closing = true;
        client.out.extend_from_slice(refusal.as_bytes());
        self.session_tokens.insert(client.session.id, token);
        self.clients.insert(token, client);
        self.pending.push(token);
    }

    fn read_client(&mut self, token: usize) {
        let Some(mut client) = self.clients.remove(&token) else {
            return;
        };
        if client.paused {
            // Backpressure: the socket keeps what the client sends (and
            // TCP slows the client down) until its output drains; then
            // `check_paused` reads it again. A write is tried, so a peer
            // that went away is noticed (the write fails).
            self.clients.insert(token, client);
            self.pending.push(token);
            return;
        }
        let query_limit = self.engine.config().client_query_buffer_limit;
        let mut eof = false;
        let mut read_bytes = 0usize;
        loop {
            // Read into the server's one scratch buffer and copy what came:
            // growing the client's buffer by a zero-filled chunk on every
            // read would cost a 16 KiB memset per request.
            match client.stream.read(&mut self.read_buf[..]) {
                Ok(0) => {
                    eof = true;
                    break;
                }
                Ok(n) => {
                    client.inbuf.extend_from_slice(&self.read_buf[..n]);
                    let stats = &mut self.engine.core().stats;
                    stats.net_input_bytes += n as u64;
                    stats.reads_processed += 1;
                    if n < READ_CHUNK_BYTES {
                        // Most likely drained; the next readiness event
                        // brings the rest without an extra failing read.
                        break;
                    }
                    if client.query_buffer_len() as u64 > query_limit {
                        break; // checked and refused below
                    }
                    read_bytes += n;
                    if read_bytes >= READ_TURN_MAX_BYTES {
                        // The socket may hold more: the next turn reads
                        // on, after the other clients had theirs.
                        self.reread.push(token);
                        break;
                    }
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(_) => {
                    eof = true;
                    break;
                }
            }
        }
        client.last_interaction_ms = now_ms();
        if client.query_buffer_len() as u64 > query_limit {
            log::log(
                Level::Warning,
                &format!(
                    "Closing client that reached max query buffer length (qbuf={})",
                    client.query_buffer_len()
                ),
            );
            self.close(token, client);
            return;
        }
        self.process_input(&mut client);
        if eof {
            self.close(token, client);
            return;
        }
        self.finish_processing(token, client);
    }

    /// Puts a client back after its input was processed: closes it if it
    /// asked to be closed and has nothing left to write, queues its output.
    fn finish_processing(&mut self, token: usize, client: Client) {
        if client.closing && client.output_len() == 0 && !client.stream.tls_unsent() {
            self.close(token, client);
            return;
        }
        if client.overflowed {
            // Closed before this turn's replies are written (a second
            // entry for the same client is harmless).
            self.overflowed.push(token);
        }
        if client.paused {
            self.paused.push(token);
        }
        if client.postponed {
            self.postponed.push(token);
            self.count_waiting_clients();
        }
        if client.awaiting_log {
            self.held.push(token);
        }
        // TLS may hold handshake messages (or a reply written during the
        // handshake) the socket did not take.
        if client.output_len() > 0 || client.stream.tls_unsent() {
            self.pending.push(token);
        }
        self.clients.insert(token, client);
    }

    /// Processes the input that clients served or unblocked this turn sent
    /// while they were blocked (which may block them again, or serve
    /// others in turn).
    fn process_unblocked(&mut self) {
        loop {
            let tokens = self.unblocked.take();
            if tokens.is_empty() {
                return;
            }
            for token in tokens {
                let Some(mut client) = self.clients.remove(&token) else {
                    continue;
                };
                if client.session.blocked.is_none() && !client.inbuf.is_empty() {
                    self.process_input(&mut client);
                }
                self.finish_processing(token, client);
            }
        }
    }

    /// Answers blocked clients whose timeout passed.
    fn expire_blocked(&mut self) {
        let Some(deadline) = self.engine.next_block_deadline() else {
            return;
        };
        if deadline > now_ms() {
            return;
        }
        for id in self.engine.timed_out_sessions() {
            self.end_wait(id, false);
        }
    }

    /// Ends the wait of the blocked session `id` with its timeout reply or
    /// the UNBLOCKED error.
    pub(super) fn end_wait(&mut self, id: u64, with_error: bool) {
        let Some(&token) = self.session_tokens.get(&id) else {
            return;
        };
        let Some(client) = self.clients.get_mut(&token) else {
            return;
        };
        if let Some(reply) = self.engine.unblock(&mut client.session, with_error) {
            if !client.session.reply_off {
                reply.encode(client.session.resp, &mut client.out);
            }
            self.pending.push(token);
            self.unblocked.push(token);
        }
    }

    /// Serves clients blocked on keys that received data, in the order the
    /// keys became ready and, per key, the order the clients blocked.
    fn serve_ready_keys(&mut self) {
        while self.engine.has_ready_keys() {
            for (db, key, waiting) in self.engine.take_ready_keys() {
                for id in waiting {
                    let Some(&token) = self.session_tokens.get(&id) else {
                        continue;
                    };
                    let Some(client) = self.clients.get_mut(&token) else {
                        continue;
                    };
                    let logged_before = self.engine.log_appended();
                    let Some(reply) = self.engine.serve_blocked(&mut client.session, db, &key)
                    else {
                        continue;
                    };
                    if self.engine.log_appended() != logged_before {
                        client.awaiting_log = true;
                        self.held.push(token);
                    }
                    if !client.session.reply_off {
                        reply.encode(client.session.resp, &mut client.out);
                    }
                    self.pending.push(token);
                    self.unblocked.push(token);
                }
            }
        }
    }

    /// Appends queued Pub/Sub messages to their receivers' output (the
    /// client whose command published them is `current`, out of the map).
    fn deliver_messages(&mut self, current: &mut Client) {
        let now = now_ms();
        for (id, message) in self.engine.take_messages() {
            if id == current.session.id {
                deliver(current, &message);
                continue;
            }
            let Some(&token) = self.session_tokens.get(&id) else {
                continue;
            };
            let Some(client) = self.clients.get_mut(&token) else {
                continue;
            };
            if client.overflowed || !deliver(client, &message) {
                continue;
            }
            self.pending.push(token);
            // The client's own class (Redis's getClientType: a monitor is
            // `normal`, a subscriber `pubsub`).
            let limits = client.output_limit(self.engine.config());
            if client.output_over_limit(&limits, now) {
                client.overflowed = true;
                self.overflowed.push(token);
                log_overflow(client);
            }
        }
    }

    /// Closes clients that went over their output buffer limit, dropping
    /// what they had not read.
    fn close_overflowed(&mut self) {
        for token in std::mem::take(&mut self.overflowed) {
            if let Some(client) = self.clients.remove(&token) {
                self.close(token, client);
            }
        }
    }

    fn process_input(&mut self, client: &mut Client) {
        client.compact_output();
        let pause_bytes = output_pause_bytes(self.engine.config());
        client.postponed = false;
        // Redis trims the query buffer after the whole batch: a command
        // sees the batch's bytes, its own included, as `qbuf=`.
        let batch_start = client.parser.consumed();
        let mut until_prefetch = 0;
        // One argument vector for the batch's requests (resp::reuse_argv).
        let mut scratch: Vec<&[u8]> = Vec::new();
        while !client.closing
            && !client.overflowed
            && !client.shutdown_caller
            && client.session.blocked.is_none()
        {
            if client.output_len() as u64 >= pause_bytes {
                // The client is not reading its replies: execute nothing
                // more for it until they drain (memory stays bounded by
                // this threshold plus one reply).
                client.paused = true;
                break;
            }
            if until_prefetch == 0 {
                if client.prefetch_quiet > 0 {
                    client.prefetch_quiet -= 1;
                } else if !prefetch_pipelined_keys(&self.engine, client) {
                    client.prefetch_quiet = PREFETCH_QUIET_WINDOWS;
                }
                until_prefetch = PREFETCH_REQUESTS;
            }
            until_prefetch -= 1;
            let start = client.parser.consumed();
            let request = match client
                .parser
                .next(&client.inbuf, client.session.authenticated)
            {
                Ok(Some(r)) => r,
                Ok(None) => break,
                Err(e) => {
                    // A replica's link carries the stream: no reply there.
                    if !client.session.is_replica {
                        client.out.push(b'-');
                        client.out.extend_from_slice(e.reply_text().as_bytes());
                        client.out.extend_from_slice(b"\r\n");
                    }
                    log::log(
                        Level::Verbose,
                        &format!("Protocol error ({e}) from client: addr={}", client.addr),
                    );
                    client.closing = true;
                    break;
                }
            };
            let argv = request.argv_in(&client.inbuf, std::mem::take(&mut scratch));
            // A monitor is never paused: Redis marks it a replica, which
            // processCommand exempts from CLIENT PAUSE.
            if !client.session.monitor && self.engine.must_wait_for_pause(&client.session, &argv) {
                // Writes are paused: the command runs when the pause ends.
                client.parser.unread(start);
                client.postponed = true;
                break;
            }
            let logged_before = self.engine.log_appended();
            let shutdown_in_progress = self.shutdown_in_progress();
            let mut facts = client.facts();
            facts.query_buffer_bytes = client.inbuf.len() - batch_start;
            let mut host = host::ServerHost::new(
                &mut self.clients,
                shutdown_in_progress,
                facts,
                &mut self.killed,
                &mut self.listeners,
                self.poll.registry(),
            );
            host.busy_parking(&mut self.parked);
            host.with_master(self.master_link.as_ref());
            let reply = self
                .engine
                .execute_with_host(&mut client.session, &argv, &mut host);
            scratch = resp::reuse_argv(argv);
            client.parser.recycle(request);
            let kill_master = host.kill_master;
            let shutdown = host.shutdown_request.take();
            let busy_shutdown = host.busy_shutdown.take();
            let abort = std::mem::take(&mut host.abort_request);
            let unblock_requests = std::mem::take(&mut host.unblock_requests);
            // Clients a busy script's poll read from: their input is
            // processed now (the socket will not signal it again), their
            // BUSY replies written.
            for token in std::mem::take(&mut host.busy_touched) {
                self.unblocked.push(token);
                self.pending.push(token);
            }
            if !self.parked.is_empty() {
                self.adopt_parked();
            }
            if self.engine.log_appended() != logged_before {
                client.awaiting_log = true;
            }
            if let Some(options) = shutdown {
                // SHUTDOWN: no reply and nothing more executed until the
                // outcome (the process exits, or the shutdown fails).
                let token = self.session_tokens.get(&client.session.id).copied();
                client.shutdown_caller = true;
                self.shutdown_requested_by(token, options);
                break;
            }
            if let Some(options) = busy_shutdown {
                // SHUTDOWN NOSAVE from a client polled while the script
                // ran: the script's caller gets no reply either.
                self.shutdown_requested_by(None, options);
                break;
            }
            if abort {
                self.abort_shutdown();
            }
            if kill_master {
                self.kill_master_link();
            }
            if self.engine.has_messages() {
                // Messages published by this command reach a subscribed
                // caller before the command's own reply, as in Redis.
                self.deliver_messages(client);
            }
            let out_before = client.out.len();
            if client.session.blocked.is_none()
                && (!client.session.reply_suppressed() || reply.is_push())
            {
                reply.encode(client.session.resp, &mut client.out);
            }
            if client.session.is_replica && client.out.len() > out_before {
                // Redis 7.0: a replica's link carries the stream, never a
                // reply; a replica whose command made one is dropped.
                client.out.truncate(out_before);
                log::log(
                    Level::Warning,
                    &format!(
                        "Replica generated a reply to command '{}', disconnecting it: addr={}",
                        client.session.last_command, client.addr
                    ),
                );
                client.overflowed = true;
                break;
            }
            if client.session.close_after_reply {
                client.closing = true;
            }
            let limit = client.output_limit(self.engine.config());
            if (limit.hard_bytes > 0 || limit.soft_bytes > 0)
                && client.output_over_limit(&limit, now_ms())
            {
                // Redis's closeClientOnOutputBufferLimitReached: closed at
                // the end of the turn, what it had not read dropped.
                client.overflowed = true;
                log_overflow(client);
            }
            for (token, with_error) in unblock_requests {
                if let Some(id) = self.clients.get(&token).map(|c| c.session.id) {
                    self.end_wait(id, with_error);
                }
            }
            if self.engine.has_ready_keys() {
                self.serve_ready_keys();
                if self.engine.has_messages() {
                    // Keyspace notifications of the served commands.
                    self.deliver_messages(client);
                }
            }
        }
        let consumed = client.parser.consumed();
        let unparsed = client.inbuf.len() - consumed;
        // Executed bytes go once they are at least what is left (or what
        // is left is small): a paused client with a long pipeline waiting
        // resumes many times, and moving the rest each time would be
        // quadratic.
        if consumed > 0 && (consumed >= unparsed || unparsed <= OUTPUT_KEEP_BYTES) {
            client.inbuf.drain(..consumed);
            client.parser.consume(consumed);
        }
        if client.inbuf.is_empty() && client.inbuf.capacity() > OUTPUT_KEEP_BYTES {
            client.inbuf = Vec::new();
        }
    }

    /// Resumes paused clients whose output drained (their input is read
    /// and executed in the next turn), and closes those over a soft output
    /// limit for too long (nothing is added to a paused client's output,
    /// so the check would not run otherwise).
    fn check_paused(&mut self) {
        if self.paused.order.is_empty() {
            return;
        }
        let config = self.engine.config();
        let resume_bytes = output_pause_bytes(config) / 2;
        let now = now_ms();
        let mut closing = Vec::new();
        let mut resumed = Vec::new();
        for token in self.paused.order.iter().copied() {
            let Some(client) = self.clients.get_mut(&token) else {
                continue;
            };
            if client.output_len() as u64 <= resume_bytes {
                client.paused = false;
                resumed.push(token);
                continue;
            }
            let limit = client.output_limit(config);
            if !client.overflowed && client.output_over_limit(&limit, now) {
                client.overflowed = true;
                log_overflow(client);
                closing.push(token);
            }
        }
        let clients = &self.clients;
        self.paused
            .retain(|t| clients.get(t).is_some_and(|c| c.paused && !c.overflowed));
        for token in resumed {
            self.reread.push(token);
        }
        self.overflowed.extend(closing);
    }

    /// Writes the turn's logged effects (one write(2), fsync per policy).
    /// Replies of clients whose writes are in a batch that could not be
    /// made durable stay held; if durability is lost for good (fsync
    /// failed), those clients are disconnected: they never get an
    /// acknowledgement that could be false.
    fn commit_log(&mut self) {
        // Only a new batch is written here; a batch that failed is retried
        // by the engine's cron (hz times a second), not on every turn.
        if self.engine.log_batch_bytes() == 0 && !self.engine.stream_pending() {
            return;
        }
        match self.engine.flush_log() {
            Ok(()) => {
                self.aof_error_logged = false;
                self.release_held();
            }
            Err(crate::persist::writer::FlushError::Write(cause)) => {
                if !self.aof_error_logged {
                    self.aof_error_logged = true;
                    log::log(
                        Level::Warning,
                        &format!("Error writing to the AOF file: {cause}; writes refused until it succeeds"),
                    );
                }
                self.pending
                    .retain(|t| !self.clients.get(t).is_some_and(|c| c.awaiting_log));
            }
            Err(crate::persist::writer::FlushError::Poisoned(cause)) => self.drop_held(&cause),
        }
    }

    /// After the engine's cron, which may have retried a failed batch:
    /// releases the held replies once everything is written (and fsynced
    /// per policy), or drops their clients when the retry lost durability.
    fn settle_held(&mut self) {
        if let Some(cause) = self.engine.log_poisoned() {
            if !self.held.is_empty() {
                self.drop_held(&cause);
            }
            return;
        }
        if self.engine.log_pending() {
            return;
        }
        // A batch that failed earlier was written by a retry.
        if self.aof_error_logged {
            self.aof_error_logged = false;
            log::log(
                Level::Warning,
                "AOF write error looks solved, Redis can write again.",
            );
        }
        self.release_held();
    }

    /// Durability is lost for good (an fsync failed): the clients whose
    /// replies wait for the log are disconnected without them, so no
    /// acknowledgement can be false.
    fn drop_held(&mut self, cause: &str) {
        let mut closed = 0;
        for token in self.held.take() {
            if let Some(client) = self.clients.remove(&token) {
                self.close(token, client);
                closed += 1;
            }
        }
        log::log(
            Level::Warning,
            &format!(
                "fsync of the AOF failed: {cause}; durability is lost, writes refused until restart; \
                 {closed} clients waiting for their writes to become durable were disconnected without a reply"
            ),
        );
    }

    fn release_held(&mut self) {
        for token in self.held.take() {
            if let Some(client) = self.clients.get_mut(&token) {
                client.awaiting_log = false;
                if client.output_len() > 0 {
                    self.pending.push(token);
                }
            }
        }
    }

    /// Writes every pending reply (the end of the event-loop turn).
    fn flush_pending(&mut self) {
        // Clients marked for closing by another client (CLIENT KILL) go
        // now, unless replies are still to be written (then they go once
        // written, below).
        let killed = std::mem::take(&mut self.killed);
        for token in killed {
            let idle = self
                .clients
                .get(&token)
                .is_some_and(|c| c.output_len() == 0);
            if idle && !self.pending.contains(&token) {
                if let Some(client) = self.clients.remove(&token) {
                    self.close(token, client);
                }
            }
        }
        let mut order = self.pending.take();
        // Newest first, as Redis does (it links each client at the head of
        // its pending-writes list): the client whose command ran last in
        // this round is typically the one waiting for its reply right now,
        // while the clients that only received Pub/Sub messages or
        // unblocked replies earlier go after it.
        order.reverse();
        let shared = self.share_writes(&mut order);
        for token in order {
            let Some(mut client) = self.clients.remove(&token) else {
                continue;
            };
            if client.awaiting_log {
                self.clients.insert(token, client);
                continue;
            }
            let written = if client.session.is_replica {
                self.write_replica(&mut client)
            } else {
                self.write_client(&mut client)
            };
            // Done only once TLS has sent what it holds too.
            let written = written.and_then(|done| match done {
                true => client.stream.flush_tls(),
                false => Ok(false),
            });
            self.after_write(token, client, written);
        }
        if shared {
            let writes = self.io_threads.as_ref().map(|io| io.collect());
            for write in writes.into_iter().flatten() {
                self.take_back(write);
            }
        }
    }

    /// With `io-threads` above 1 and enough clients to write to, hands
    /// every other share of `order`'s plain (not TLS, not replica) clients
    /// to the I/O threads and removes them from `order`; true if it did.
    /// Those clients' output buffers are lent until [`Server::take_back`].
    fn share_writes(&mut self, order: &mut Vec<usize>) -> bool {
        let Some(io) = self.io_threads.as_ref() else {
            return false;
        };
        let clients = &mut self.clients;
        let shareable = |c: &Client| {
            !c.awaiting_log
                && !c.session.is_replica
                && c.output_len() > 0
                && !matches!(c.stream, listener::Stream::Tls(_))
        };
        let count = order
            .iter()
            .filter(|t| clients.get(t).is_some_and(shareable))
            .count();
        let worth = io.worth_sharing(count);
        self.engine.core().stats.io_threads_active = worth;
        if !worth {
            return false;
        }
        let threads = io.threads();
        let mut shares: Vec<Vec<io_threads::Write>> = (1..threads).map(|_| Vec::new()).collect();
        let mut dealt = 0;
        order.retain(|token| {
            let Some(client) = clients.get_mut(token).filter(|c| shareable(c)) else {
                return true;
            };
            dealt += 1;
            let share = dealt % threads;
            if share == 0 {
                return true;
            }
            let out = std::mem::take(&mut client.out);
            shares[share - 1].push(io_threads::Write::new(
                *token,
                std::os::fd::AsRawFd::as_raw_fd(&client.stream),
                out,
                client.out_pos,
            ));
            false
        });
        io.hand_off(shares);
        // Redis counts every client of a turn shared with its threads.
        self.engine.core().stats.io_threaded_writes_processed += count as u64;
        true
    }

    /// Gives a client its output buffer back from an I/O thread and ends
    /// its turn as [`Server::flush_pending`] does.
    fn take_back(&mut self, write: io_threads::Write) {
        let Some(mut client) = self.clients.remove(&write.token) else {
            return;
        };
        let stats = &mut self.engine.core().stats;
        stats.net_output_bytes += (write.pos - client.out_pos) as u64;
        stats.writes_processed += write.calls;
        // Nothing writes to a lent buffer's client while it is away.
        debug_assert!(client.out.is_empty(), "output added while lent");
        client.out = write.out;
        client.out_pos = write.pos;
        let written = write.outcome.inspect(|&done| {
            if done {
                client.output_written();
            }
        });
        self.after_write(write.token, client, written);
    }

    /// After a write: closes a client that is done and closing or whose
    /// write failed, and asks for writable events while output is left.
    fn after_write(&mut self, token: usize, mut client: Client, written: io::Result<bool>) {
        match written {
            Ok(done) => {
                if done && client.closing {
                    self.close(token, client);
                    return;
                }
                let want_writable = !done;
                if want_writable != client.writable_registered {
                    let interest = if want_writable {
                        Interest::READABLE | Interest::WRITABLE
                    } else {
                        Interest::READABLE
                    };
                    if self
                        .poll
                        .registry()
                        .reregister(&mut client.stream, Token(token), interest)
                        .is_err()
                    {
                        self.close(token, client);
                        return;
                    }
                    client.writable_registered = want_writable;
                }
                self.clients.insert(token, client);
            }
            Err(_) => self.close(token, client),
        }
    }

    /// Writes as much output as the socket takes; Ok(true) when all written.
    pub(super) fn write_client(&mut self, client: &mut Client) -> io::Result<bool> {
        while client.out_pos < client.out.len() {
            match client.stream.write(&client.out[client.out_pos..]) {
                Ok(0) => return Err(io::ErrorKind::WriteZero.into()),
                Ok(n) => {
                    client.out_pos += n;
                    let stats = &mut self.engine.core().stats;
                    stats.net_output_bytes += n as u64;
                    stats.writes_processed += 1;
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Ok(false),
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
        client.output_written();
        Ok(true)
    }

    fn close(&mut self, _token: usize, mut client: Client) {
        let _ = self.poll.registry().deregister(&mut client.stream);
        self.engine.end_session(&mut client.session);
        self.session_tokens.remove(&client.session.id);
    }

    fn close_idle_clients(&mut self) {
        let timeout_s = self.engine.config().timeout_s;
        if timeout_s == 0 {
            return;
        }
        // Checked at the cron rate, not every loop turn: the scan visits
        // every client.
        let now = now_ms();
        let hz = i64::from(self.engine.config().hz.max(1));
        if now - self.last_idle_check_ms < 1000 / hz {
            return;
        }
        self.last_idle_check_ms = now;
        let timeout_ms = (timeout_s as i64).saturating_mul(1000);
        let idle: Vec<usize> = self
            .clients
            .iter()
            .filter(|(_, c)| !c.session.is_replica && now - c.last_interaction_ms > timeout_ms)
            .map(|(t, _)| *t)
            .collect();
        for token in idle {
            if let Some(client) = self.clients.remove(&token) {
                log::log(Level::Verbose, "Closing idle client");
                self.close(token, client);
            }
        }
    }
}

fn io_error(context: &str, source: io::Error) -> crate::Error {
    crate::Error::Io {
        context: context.to_string(),
        source,
    }
}

/// Appends `message` to `client`'s output; false when it was not sent: a
/// MONITOR line (a status line, the only kind of message that is not a
/// push) to a client whose replies are off (CLIENT REPLY OFF, or SKIP
/// until its next command has run), as Redis's `addReply` drops it there
/// while pushes pass. (While CLIENT REPLY SKIP itself runs, both skip
/// flags are set: its own line passes, as in Redis.)
fn deliver(client: &mut Client, message: &crate::core::clients::Message) -> bool {
    let before = client.out.len();
    message.encode(client.session.resp, &mut client.out);
    let session = &client.session;
    let silenced = session.reply_off || (session.reply_skip && !session.reply_skip_next);
    if silenced && client.out.get(before) == Some(&b'+') {
        client.out.truncate(before);
        return false;
    }
    true
}

/// How many pipelined requests one look ahead covers.
const PREFETCH_REQUESTS: usize = 16;

/// Look-aheads skipped after one that had nothing to overlap (a client
/// pipelining on one list or string key: LPUSH/RPOP queues, INCR of one
/// counter), before looking again: the scan of 16 requests cost about 3%
/// of such a client's CPU for nothing.
const PREFETCH_QUIET_WINDOWS: u8 = 7;

/// Prefetch hints for the keys of a client's next pipelined requests
/// ([`Db::prefetch_keys`](crate::keyspace::Db::prefetch_keys)): with 16
/// requests in the buffer their table lookups overlap their cache misses.
/// One request alone gets none (nothing to overlap it with). False when
/// the look-ahead had nothing to overlap ([`Db::prefetch_keys`](crate::keyspace::Db::prefetch_keys)).
fn prefetch_pipelined_keys(engine: &Engine, client: &Client) -> bool {
    let mut args = [[&b""[..]; 3]; PREFETCH_REQUESTS];
    let n = crate::resp::peek::key_args(
        &client.inbuf,
        client.parser.consumed(),
        PREFETCH_REQUESTS,
        &mut args,
    );
    n < 2
        || engine
            .keyspace()
            .db(client.session.db)
            .prefetch_keys(&args[..n])
}
