//! The server's answers to commands that reach beyond one client (CLIENT
//! LIST/KILL, SHUTDOWN, CONFIG SET of listening addresses, INFO memory),
//! the listening sockets, the protected-mode decision, and the counting
//! allocator behind INFO `used_memory`.

use std::alloc::{GlobalAlloc, Layout};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};

use mio::Registry;

use super::log::{self, Level};
use super::Client;
use std::io::{Read, Write};

use crate::command::ctx::{BusyAction, BusyScript, Connection, MemoryUse};
use crate::command::{self, flags, Ctx, Host, Session, ShutdownOptions};
use crate::config::{CommandName, Config, LogLevel};
use crate::core::Core;
use crate::reply::Reply;
use crate::script;

/// [`Host`] for the RESP server. The client executing the command is not in
/// `others` (it is borrowed separately while it runs); `current` describes
/// its connection.
pub struct ServerHost<'a> {
    others: &'a mut super::ClientMap,
    shutdown_in_progress: bool,
    current: ConnFacts,
    killed: &'a mut Vec<usize>,
    listeners: &'a mut super::listener::Listeners,
    registry: &'a Registry,
    /// The calling client's SHUTDOWN, for the server to carry out.
    pub shutdown_request: Option<ShutdownOptions>,
    /// A SHUTDOWN NOSAVE another client sent while a script was busy.
    pub busy_shutdown: Option<ShutdownOptions>,
    /// SHUTDOWN ABORT of a shutdown in progress.
    pub abort_request: bool,
    /// Blocked clients to unblock after the command (CLIENT UNBLOCK):
    /// (token, with the UNBLOCKED error).
    pub unblock_requests: Vec<(usize, bool)>,
    /// Clients read from while a script was busy: the server processes
    /// what they sent and writes what they were answered.
    pub busy_touched: Vec<usize>,
    /// Where connections accepted while a script is busy wait for the
    /// server to take them in.
    parking: Option<&'a mut Vec<Client>>,
    /// The link to our master (a replica's): a client once its stream
    /// flows (its socket facts are read only when a command lists or
    /// kills clients).
    master: Option<&'a super::master_link::MasterLink>,
    /// CLIENT KILL matched the master client: the server closes the link
    /// after the command.
    pub kill_master: bool,
}

impl<'a> ServerHost<'a> {
    /// A host view over the other clients, for a command of the client
    /// whose connection is `current`. Tokens of clients killed by the
    /// command are pushed to `killed`; CONFIG SET of `port`/`bind` replaces
    /// `listeners` (registered in `registry`).
    pub fn new(
        others: &'a mut super::ClientMap,
        shutdown_in_progress: bool,
        current: ConnFacts,
        killed: &'a mut Vec<usize>,
        listeners: &'a mut super::listener::Listeners,
        registry: &'a Registry,
    ) -> Self {
        ServerHost {
            others,
            shutdown_in_progress,
            current,
            killed,
            listeners,
            registry,
            shutdown_request: None,
            busy_shutdown: None,
            abort_request: false,
            unblock_requests: Vec::new(),
            busy_touched: Vec::new(),
            parking: None,
            master: None,
            kill_master: false,
        }
    }

    /// Shows the master link (a replica's) to CLIENT LIST and KILL.
    pub(super) fn with_master(&mut self, master: Option<&'a super::master_link::MasterLink>) {
        self.master = master;
    }

    /// Lets a busy script's poll accept connections (every listener's)
    /// into `parked`.
    pub fn busy_parking(&mut self, parked: &'a mut Vec<Client>) {
        self.parking = Some(parked);
    }

    /// Accepts what the listeners have into the parking (Redis accepts
    /// clients while a script is busy, and answers them -BUSY too).
    fn accept_parked(&mut self, core: &mut Core) {
        let Some(parked) = self.parking.as_mut() else {
            return;
        };
        for token in self.listeners.tokens() {
            while let Some(Ok((stream, addr))) = self.listeners.accept(token) {
                let session = core.new_session();
                parked.push(Client::new(
                    stream,
                    addr,
                    crate::resp::Limits::default(),
                    session,
                ));
            }
        }
    }
}

impl Host for ServerHost<'_> {
    fn connected_clients(&self) -> usize {
        // Redis counts every client but its replicas (the caller is one).
        self.others
            .values()
            .filter(|c| !c.session.is_replica)
            .count()
            + 1
    }

    fn request_shutdown(&mut self, options: ShutdownOptions) -> bool {
        self.shutdown_request = Some(options);
        true
    }

    fn abort_shutdown(&mut self) -> bool {
        if !self.shutdown_in_progress {
            return false;
        }
        self.shutdown_in_progress = false;
        self.abort_request = true;
        true
    }

    fn connection(&self) -> Option<Connection> {
        Some(self.current.connection())
    }

    fn for_each_client(&self, f: &mut dyn FnMut(&Session, &Connection)) {
        let mut clients: Vec<(&Session, Connection)> = self
            .others
            .values()
            .map(|c| (&c.session, c.connection()))
            .collect();
        if let Some(master) = self.master.and_then(|l| l.as_client()) {
            clients.push(master);
        }
        clients.sort_by_key(|(session, _)| session.id);
        for (session, conn) in clients {
            f(session, &conn);
        }
    }

    fn kill_clients(&mut self, pred: &mut dyn FnMut(&Session, &Connection) -> bool) -> usize {
        let mut killed = 0;
        for (token, client) in self.others.iter_mut() {
            if !client.closing && pred(&client.session, &client.connection()) {
                client.closing = true;
                self.killed.push(*token);
                killed += 1;
            }
        }
        if let Some((session, conn)) = self.master.and_then(|l| l.as_client()) {
            if !self.kill_master && pred(session, &conn) {
                self.kill_master = true;
                killed += 1;
            }
        }
        killed
    }

    fn unblock_client(&mut self, id: u64, with_error: bool) -> bool {
        let found = self
            .others
            .iter()
            .find(|(_, c)| c.session.id == id && c.session.blocked.is_some())
            .map(|(t, _)| *t);
        match found {
            Some(token) if !self.unblock_requests.iter().any(|(t, _)| *t == token) => {
                self.unblock_requests.push((token, with_error));
                true
            }
            _ => false,
        }
    }

    fn apply_config(&mut self, old: &Config, new: &Config) -> Result<(), String> {
        self.listeners.apply_config(self.registry, old, new)?;
        if old.loglevel != new.loglevel {
            log::set_level(log_level(new.loglevel));
        }
        Ok(())
    }

    fn used_memory(&self) -> Option<MemoryUse> {
        counted_memory()
    }

    fn log(&self, level: LogLevel, message: &str) {
        log::log(log_level(level), message);
    }

    fn while_busy(&mut self, busy: &BusyScript, core: &mut Core) -> BusyAction {
        let mut action = BusyAction::Continue;
        let mut buf = vec![0u8; 16 * 1024];
        self.accept_parked(core);
        if let Some(parked) = self.parking.as_mut() {
            for client in parked.iter_mut() {
                if client.closing {
                    continue;
                }
                let eof = read_available(client, &mut buf);
                match answer_while_busy(client, busy, core) {
                    BusyAction::Continue => {}
                    other => action = other,
                }
                if eof {
                    client.closing = true;
                }
                let _ = write_available(client);
            }
        }
        if action != BusyAction::ShutdownNoSave {
            for (token, client) in self.others.iter_mut() {
                if client.closing || client.session.blocked.is_some() {
                    continue;
                }
                let eof = read_available(client, &mut buf);
                if client.inbuf.is_empty() && !eof {
                    continue;
                }
                if !self.busy_touched.contains(token) {
                    self.busy_touched.push(*token);
                }
                match answer_while_busy(client, busy, core) {
                    BusyAction::Continue => {}
                    other => action = other,
                }
                if eof {
                    client.closing = true;
                    self.killed.push(*token);
                }
                // Best effort: the rest goes out after the script.
                let _ = write_available(client);
                if action == BusyAction::ShutdownNoSave {
                    break;
                }
            }
        }
        if action == BusyAction::ShutdownNoSave {
            self.busy_shutdown = Some(ShutdownOptions {
                nosave: true,
                ..ShutdownOptions::default()
            });
        }
        action
    }
}

/// Reads what the socket has without blocking; true at end of stream.
fn read_available(client: &mut Client, buf: &mut [u8]) -> bool {
    loop {
        match client.stream.read(buf) {
            Ok(0) => return true,
            Ok(n) => {
                client.inbuf.extend_from_slice(&buf[..n]);
                if n < buf.len() {
                    return false;
                }
            }
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => return false,
            Err(_) => return true,
        }
    }
}

/// Writes what the socket takes without blocking.
fn write_available(client: &mut Client) -> std::io::Result<()> {
    while client.out_pos < client.out.len() {
        match client.stream.write(&client.out[client.out_pos..]) {
            Ok(0) => return Err(std::io::ErrorKind::WriteZero.into()),
            Ok(n) => client.out_pos += n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

/// Redis's processCommand for a client while a script is busy: lookup,
/// arity and authentication errors as usual; the commands allowed while
/// busy (MULTI, DISCARD, WATCH, UNWATCH, AUTH, HELLO, RESET, QUIT) run;
/// SCRIPT KILL and SHUTDOWN act; EXEC aborts its transaction; everything
/// else gets `-BUSY` (and fails a transaction being queued).
fn answer_while_busy(client: &mut Client, busy: &BusyScript, core: &mut Core) -> BusyAction {
    let mut action = BusyAction::Continue;
    while !client.closing {
        let request = match client
            .parser
            .next(&client.inbuf, client.session.authenticated)
        {
            Ok(Some(r)) => r,
            Ok(None) => break,
            Err(e) => {
                Reply::error(e.reply_text()).encode(client.session.resp, &mut client.out);
                client.closing = true;
                break;
            }
        };
        let mut argv = request.argv(&client.inbuf);
        let reachable = match core.config.command_renames.resolve(argv[0]) {
            CommandName::Unchanged => true,
            CommandName::Renamed(real) => {
                argv[0] = real.as_bytes();
                true
            }
            CommandName::Removed => false,
        };
        let resolved = if reachable {
            command::resolve(&argv)
        } else {
            Err(command::unknown_command_error(&argv))
        };
        let reply = match resolved {
            Err(reply) => reply,
            Ok((top, spec)) => {
                if !client.session.authenticated && !spec.has(flags::NO_AUTH) {
                    Reply::err("NOAUTH Authentication required.")
                } else if (top.name == "script" || top.name == "function") && spec.name == "kill" {
                    // SCRIPT KILL stops an EVAL, FUNCTION KILL a function;
                    // the other one gets -BUSY (Redis's scriptKill).
                    if busy.wrote {
                        Reply::err(script::UNKILLABLE_ERR)
                    } else if busy.function != (top.name == "function") {
                        Reply::err(busy.busy_error())
                    } else {
                        action = BusyAction::Kill;
                        Reply::ok()
                    }
                } else if top.name == "shutdown" {
                    match shutdown_while_busy(&argv, busy) {
                        Ok(()) => {
                            // The server exits once the script has stopped;
                            // no reply, as from any SHUTDOWN.
                            action = BusyAction::ShutdownNoSave;
                            break;
                        }
                        Err(reply) => reply,
                    }
                } else if top.name == "exec" {
                    // Redis's rejectCommand for EXEC: the transaction ends.
                    crate::command::multi::discard_transaction(core, &mut client.session);
                    Reply::error(format!(
                        "EXECABORT Transaction discarded because of: {}",
                        busy.busy_error()
                    ))
                } else if spec.has(flags::ALLOW_BUSY) {
                    let now = crate::engine::now_ms();
                    let mut host = NullHostForBusy;
                    let mut ctx = Ctx::new(core, &mut client.session, &mut host, now);
                    match (spec.handler)(&mut ctx, &argv) {
                        Ok(r) | Err(r) => r,
                    }
                } else {
                    Reply::err(busy.busy_error())
                }
            }
        };
        if reply.is_error() {
            // A refused command makes a transaction fail at EXEC.
            if let Some(multi) = client.session.multi.as_mut() {
                multi.failed = true;
            }
        }
        reply.encode(client.session.resp, &mut client.out);
        if client.session.close_after_reply {
            client.closing = true;
        }
    }
    let consumed = client.parser.consumed();
    if consumed > 0 {
        client.inbuf.drain(..consumed);
        client.parser.consume(consumed);
    }
    action
}

/// The host of a command run while a script is busy: no other clients.
struct NullHostForBusy;

impl Host for NullHostForBusy {}

/// Redis's SHUTDOWN argument checks while a script is busy: Ok for a
/// valid SHUTDOWN NOSAVE (the server stops), the reply otherwise.
fn shutdown_while_busy(argv: &[&[u8]], busy: &BusyScript) -> Result<(), Reply> {
    let nosave = match command::server::parse_shutdown(argv)? {
        command::server::ShutdownRequest::Shutdown(options) => options.nosave,
        command::server::ShutdownRequest::Abort => {
            // Nothing can be under way while a script runs.
            return Err(Reply::err("ERR No shutdown in progress."));
        }
    };
    if !nosave {
        return Err(Reply::err(busy.busy_error()));
    }
    Ok(())
}

/// What the server knows about a connection, copied cheaply for every
/// batch of requests; [`ConnFacts::connection`] formats it on demand.
#[derive(Debug, Clone, Copy)]
pub struct ConnFacts {
    /// Peer address.
    pub addr: super::listener::PeerAddr,
    /// Local address the client connected to.
    pub local_addr: super::listener::PeerAddr,
    /// File descriptor.
    pub fd: i64,
    /// Unix ms of the last request received.
    pub last_interaction_ms: i64,
    /// Bytes received and not yet executed.
    pub query_buffer_bytes: usize,
    /// Spare capacity of the input buffer.
    pub query_buffer_free_bytes: usize,
    /// Bytes of replies not yet written.
    pub output_bytes: usize,
    /// Buffer memory attributed to the connection.
    pub total_bytes: usize,
    /// True while the server waits to be able to write.
    pub writable_registered: bool,
}

impl ConnFacts {
    /// The facts as commands see them (addresses as Redis prints them).
    pub fn connection(&self) -> Connection {
        Connection {
            addr: self.addr.to_string(),
            laddr: self.local_addr.to_string(),
            fd: self.fd,
            last_interaction_ms: self.last_interaction_ms,
            query_buffer_bytes: self.query_buffer_bytes,
            query_buffer_free_bytes: self.query_buffer_free_bytes,
            output_bytes: self.output_bytes,
            total_bytes: self.total_bytes,
            events: if self.writable_registered { "rw" } else { "r" },
            unix: matches!(self.addr, super::listener::PeerAddr::Unix(_)),
        }
    }
}

/// The log module's level for a configured `loglevel`.
pub fn log_level(level: LogLevel) -> Level {
    match level {
        LogLevel::Debug => Level::Debug,
        LogLevel::Verbose => Level::Verbose,
        LogLevel::Notice => Level::Notice,
        LogLevel::Warning => Level::Warning,
    }
}

// ---------------------------------------------------------------------------
// Open files

/// File descriptors kept for everything but clients (listeners, the AOF,
/// snapshots, logs): Redis's CONFIG_MIN_RESERVED_FDS.
const RESERVED_FDS: u64 = 32;

/// Redis's adjustOpenFilesLimit: raises the open-files limit to
/// `maxclients` + 32 where the system allows, else lowers `maxclients` to
/// what the limit leaves (with Redis's warnings), so that a client over
/// the limit is told `max number of clients reached` instead of waiting
/// in the listen queue for an accept that fails. Err when the limit is
/// too low to start.
pub fn adjust_open_files_limit(config: &mut Config) -> Result<(), String> {
    let wanted = config.maxclients.saturating_add(RESERVED_FDS);
    let mut limit = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit writes into the struct passed, which lives here.
    if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) } != 0 {
        log::log(
            Level::Warning,
            &format!(
                "Unable to obtain the current NOFILE limit ({}), assuming 1024 and setting the max clients configuration accordingly.",
                crate::config::os_error_text(&std::io::Error::last_os_error())
            ),
        );
        config.maxclients = 1024 - RESERVED_FDS;
        return Ok(());
    }
    let old: u64 = limit.rlim_cur;
    if old >= wanted {
        return Ok(());
    }
    // The highest limit at or below `wanted` the system grants, trying
    // down in steps of 16 as Redis does.
    let mut best = wanted;
    let mut error = None;
    while best > old {
        let attempt = libc::rlimit {
            rlim_cur: best,
            rlim_max: limit.rlim_max.max(best),
        };
        // SAFETY: setrlimit only reads the struct passed.
        if unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &attempt) } == 0 {
            break;
        }
        error = Some(std::io::Error::last_os_error());
        if best < 16 {
            best = old;
            break;
        }
        best -= 16;
    }
    best = best.max(old);
    if best >= wanted {
        log::log(
            Level::Notice,
            &format!("Increased maximum number of open files to {wanted} (it was originally set to {old})."),
        );
        return Ok(());
    }
    if best <= RESERVED_FDS {
        return Err(format!(
            "Your current 'ulimit -n' of {old} is not enough for the server to start. Please increase your open file limit to at least {wanted}. Exiting."
        ));
    }
    let requested = config.maxclients;
    config.maxclients = best - RESERVED_FDS;
    log::log(
        Level::Warning,
        &format!("You requested maxclients of {requested} requiring at least {wanted} max file descriptors."),
    );
    let why = error.map_or_else(String::new, |e| crate::config::os_error_text(&e));
    log::log(
        Level::Warning,
        &format!("Server can't set maximum open files to {wanted} because of OS error: {why}."),
    );
    log::log(
        Level::Warning,
        &format!(
            "Current maximum open files is {best}. maxclients has been reduced to {} to compensate for low ulimit. If you need higher maxclients increase 'ulimit -n'.",
            config.maxclients
        ),
    );
    Ok(())
}

// ---------------------------------------------------------------------------
// Protected mode

/// Redis's protected-mode decision: with `protected-mode yes` and the
/// default user `nopass` (`default_nopass`: no `requirepass`, no password
/// given by ACL), only clients from `127.0.0.1` or `::1` are served
/// (exactly those two addresses, as Redis compares them, not all of
/// 127/8).
pub fn protected_mode_refuses(config: &Config, default_nopass: bool, peer: IpAddr) -> bool {
    config.protected_mode && default_nopass && !is_local(peer)
}

fn is_local(peer: IpAddr) -> bool {
    match peer {
        IpAddr::V4(v4) => v4 == Ipv4Addr::LOCALHOST,
        IpAddr::V6(v6) => v6 == Ipv6Addr::LOCALHOST,
    }
}

// ---------------------------------------------------------------------------
// Counting allocator

static ALLOCATED_BYTES: AtomicUsize = AtomicUsize::new(0);
static PEAK_BYTES: AtomicUsize = AtomicUsize::new(0);
static STARTUP_BYTES: AtomicU64 = AtomicU64::new(0);
static COUNTING: AtomicBool = AtomicBool::new(false);

#[cfg(not(feature = "jemalloc"))]
use std::alloc::System as Inner;
/// The allocator under [`CountingAlloc`]: jemalloc (the `jemalloc`
/// feature, the server's default: it builds the replica's and the
/// startup's load about 15% faster than glibc's malloc, docs/memory.md),
/// or the system's.
#[cfg(feature = "jemalloc")]
use tikv_jemallocator::Jemalloc as Inner;

/// The allocator's name as INFO `mem_allocator` gives it (Redis:
/// `jemalloc-5.3.0` or `libc`).
#[cfg(feature = "jemalloc")]
pub const ALLOCATOR_NAME: &str = "jemalloc-5.3.0";
/// The allocator's name as INFO `mem_allocator` gives it (Redis:
/// `jemalloc-5.3.0` or `libc`).
#[cfg(not(feature = "jemalloc"))]
pub const ALLOCATOR_NAME: &str = "libc";

/// The allocator (jemalloc, or the system's without the `jemalloc`
/// feature), counting the bytes in use so INFO can report `used_memory`
/// and its peak the way Redis's zmalloc does. Install it in the server
/// binary with `#[global_allocator]`; the cost is one relaxed atomic add
/// per allocation (and a load for the peak).
///
/// Each block counts what the allocator takes for it (`block_size`: its
/// size class, or glibc's chunk), not only the bytes asked for, so the
/// figure follows RSS closely enough for `maxmemory` to mean something
/// (docs/memory.md).
pub struct CountingAlloc;

/// The memory the allocator uses for a request of `size` bytes.
#[inline]
fn block_size(size: usize) -> usize {
    #[cfg(feature = "jemalloc")]
    return crate::types::size_class::jemalloc(size);
    #[cfg(not(feature = "jemalloc"))]
    return crate::types::size_class::glibc(size);
}

// SAFETY: every method forwards to `Inner` with the caller's arguments,
// so `Inner`'s guarantees carry over; the counters are only statistics.
unsafe impl GlobalAlloc for CountingAlloc {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        // SAFETY: same contract as the caller's.
        let p = unsafe { Inner.alloc(layout) };
        if !p.is_null() {
            added(block_size(layout.size()));
        }
        p
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        // SAFETY: same contract as the caller's.
        let p = unsafe { Inner.alloc_zeroed(layout) };
        if !p.is_null() {
            added(block_size(layout.size()));
        }
        p
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: same contract as the caller's.
        unsafe { Inner.dealloc(ptr, layout) };
        ALLOCATED_BYTES.fetch_sub(block_size(layout.size()), Ordering::Relaxed);
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        // SAFETY: same contract as the caller's.
        let p = unsafe { Inner.realloc(ptr, layout, new_size) };
        if !p.is_null() {
            ALLOCATED_BYTES.fetch_sub(block_size(layout.size()), Ordering::Relaxed);
            added(block_size(new_size));
        }
        p
    }
}

#[inline]
fn added(size: usize) {
    let now = ALLOCATED_BYTES.fetch_add(size, Ordering::Relaxed) + size;
    if now > PEAK_BYTES.load(Ordering::Relaxed) {
        PEAK_BYTES.store(now, Ordering::Relaxed);
    }
}

/// Marks the counting allocator as installed and records the memory in use
/// once the server is ready (INFO `used_memory_startup`). Call it from a
/// binary that installed [`CountingAlloc`].
pub fn record_startup_memory() {
    COUNTING.store(true, Ordering::Relaxed);
    STARTUP_BYTES.store(
        ALLOCATED_BYTES.load(Ordering::Relaxed) as u64,
        Ordering::Relaxed,
    );
}

/// The counted memory, when [`CountingAlloc`] is installed.
pub fn counted_memory() -> Option<MemoryUse> {
    COUNTING.load(Ordering::Relaxed).then(|| MemoryUse {
        used: ALLOCATED_BYTES.load(Ordering::Relaxed) as u64,
        peak: PEAK_BYTES.load(Ordering::Relaxed) as u64,
        startup: STARTUP_BYTES.load(Ordering::Relaxed),
        allocator: ALLOCATOR_NAME,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn protected_mode_serves_only_the_two_loopback_addresses_without_a_password() {
        let mut config = Config::default();
        let remote: IpAddr = "10.1.2.3".parse().unwrap();
        assert!(protected_mode_refuses(&config, true, remote));
        assert!(!protected_mode_refuses(
            &config,
            true,
            "127.0.0.1".parse().unwrap()
        ));
        assert!(!protected_mode_refuses(
            &config,
            true,
            "::1".parse().unwrap()
        ));
        // Redis compares the text: other 127/8 addresses and mapped
        // addresses are not local.
        assert!(protected_mode_refuses(
            &config,
            true,
            "127.0.0.2".parse().unwrap()
        ));
        assert!(protected_mode_refuses(
            &config,
            true,
            "::ffff:127.0.0.1".parse().unwrap()
        ));
        // A password on the default user (requirepass or ACL SETUSER).
        assert!(!protected_mode_refuses(&config, false, remote));
        config.protected_mode = false;
        assert!(!protected_mode_refuses(&config, true, remote));
    }
}
